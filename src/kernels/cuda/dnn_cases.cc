// SPDX-License-Identifier: Apache-2.0
// Harness cases of the cuDNN convolutions (dnn.cc): Conv and ai.kiln FusedConv in FLOAT, FLOAT16
// and BFLOAT16, over the padding paths (symmetric pads, pads cuDNN takes as they are, asymmetric
// pads through the zero-extended copy of X at either end), groups and depthwise, strides,
// dilations, 1-D / 2-D / 3-D, every fused activation, the residual, empty tensors, and
// FusedConv's half-precision weights (FLOAT X with a FLOAT16 / BFLOAT16 W).
//
// Tolerances (|cuda - ref| <= tol * (1 + |ref|)), inputs uniform in [-1, 1]:
//   FLOAT     5e-3: cuDNN may use TF32 tensor cores (inputs rounded to 10 mantissa bits, FP32
//             accumulation): about 1e-3 relative on sums of a few hundred products.
//   FLOAT16   5e-3: the convolution's result is rounded to FLOAT16 before the epilogue adds B and
//             Z and rounds again (up to 2^-10 relative), plus Winograd's transforms in half
//             precision where cuDNN's heuristics pick them.
//   BFLOAT16  the default (1.6e-2, four units in the last place) covers the same double rounding.
//   Half weights (FLOAT cases): X and the convolution's result are rounded to W's type once each:
//             5e-3 with FLOAT16 W, 1.6e-2 with BFLOAT16 W.

#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/test_cases.h"
#include "op/kiln_ops.h"

namespace kiln::cuda::testing {
namespace {

using ref::testing::FloatsAttr;
using ref::testing::IntAttr;
using ref::testing::IntsAttr;
using ref::testing::StringAttr;

using Make = std::function<void(CaseInputs&, std::mt19937&)>;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

std::string Suffix(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    default:
      return "f32";
  }
}

// See the file comment.
double ConvTolerance(DataType t) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kFloat16:
      return 5e-3;
    default:
      return 0.0;  // BFLOAT16: DefaultTolerance
  }
}

// The case in each float type.
void AddConv(std::vector<CudaCase>& out, const std::string& name, int64_t opset, const Make& make) {
  for (DataType t : kFloatTypes) {
    out.push_back({"Conv " + name + " " + Suffix(t), "Conv", "", opset, t, make, ConvTolerance(t)});
  }
}
void AddFused(std::vector<CudaCase>& out, const std::string& name, const Make& make) {
  for (DataType t : kFloatTypes) {
    out.push_back({"FusedConv " + name + " " + Suffix(t), std::string(kFusedConvOp),
                   std::string(kKilnDomain), kKilnOpsetVersion, t, make, ConvTolerance(t)});
  }
}

// `f` (FLOAT) rounded to FLOAT16 / BFLOAT16 and stored in that type.
OwnedTensor ToHalf(const OwnedTensor& f, DataType t) {
  OwnedTensor out = OwnedTensor::Allocate(t, f.shape()).value();
  const float* src = f.data<const float>();
  for (int64_t i = 0; i < f.num_elements(); ++i) {
    if (t == DataType::kFloat16) {
      out.data<Float16>()[i] = FloatToFloat16(src[i]);
    } else {
      out.data<BFloat16>()[i] = FloatToBFloat16(src[i]);
    }
  }
  return out;
}

Attribute ActAttr(const std::string& name) { return StringAttr("activation", name); }
Attribute ActParamsAttr(std::vector<float> p) {
  return FloatsAttr("activation_params", std::move(p));
}

}  // namespace

std::vector<CudaCase> DnnCases() {
  std::vector<CudaCase> c;

  // --- Conv -------------------------------------------------------------------------------------
  AddConv(c, "2d pads bias", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({2, 3, 9, 11}, rng))
        .ConstInput(Random({4, 3, 3, 3}, rng))
        .ConstInput(Random({4}, rng));
  });
  // H: pads (0, 2) with dilation 2 and stride 2 need the zero-extended copy; W: pads (1, 1).
  AddConv(c, "2d strides dilations asymmetric pads", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {0, 1, 2, 1}))
        .Attr(IntsAttr("strides", {2, 3}))
        .Attr(IntsAttr("dilations", {2, 1}))
        .Input(Random({1, 3, 13, 12}, rng))
        .ConstInput(Random({5, 3, 3, 2}, rng));
  });
  AddConv(c, "group 2 stride 2", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntAttr("group", 2))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Attr(IntsAttr("strides", {2, 2}))
        .Input(Random({2, 4, 7, 7}, rng))
        .ConstInput(Random({6, 2, 3, 3}, rng))
        .ConstInput(Random({6}, rng));
  });
  // SAME_UPPER, stride 2, even size: pads (0, 1), the copy extended at the end.
  AddConv(c, "depthwise SAME_UPPER stride 2", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntAttr("group", 8))
        .Attr(StringAttr("auto_pad", "SAME_UPPER"))
        .Attr(IntsAttr("strides", {2, 2}))
        .Input(Random({2, 8, 10, 10}, rng))
        .ConstInput(Random({8, 1, 3, 3}, rng))
        .ConstInput(Random({8}, rng));
  });
  // SAME_LOWER, stride 2: pads (1, 0), which cuDNN's symmetric pad 1 reproduces (no copy).
  AddConv(c, "SAME_LOWER stride 2", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(StringAttr("auto_pad", "SAME_LOWER"))
        .Attr(IntsAttr("strides", {2, 2}))
        .Input(Random({1, 3, 8, 8}, rng))
        .ConstInput(Random({4, 3, 3, 3}, rng));
  });
  // SAME_LOWER, kernel 4: pads (2, 1), the copy extended at the start.
  AddConv(c, "SAME_LOWER kernel 4", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(StringAttr("auto_pad", "SAME_LOWER"))
        .Input(Random({1, 2, 7, 9}, rng))
        .ConstInput(Random({3, 2, 4, 4}, rng))
        .ConstInput(Random({3}, rng));
  });
  AddConv(c, "VALID kernel_shape", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(StringAttr("auto_pad", "VALID"))
        .Attr(IntsAttr("kernel_shape", {3, 3}))
        .Input(Random({1, 3, 10, 8}, rng))
        .ConstInput(Random({2, 3, 3, 3}, rng))
        .ConstInput(Random({2}, rng));
  });
  AddConv(c, "1d stride 2 asymmetric pads", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("strides", {2}))
        .Attr(IntsAttr("pads", {1, 2}))
        .Input(Random({2, 5, 17}, rng))
        .ConstInput(Random({3, 5, 4}, rng))
        .ConstInput(Random({3}, rng));
  });
  AddConv(c, "3d pads strides", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 0, 1, 1, 0, 1}))
        .Attr(IntsAttr("strides", {1, 2, 1}))
        .Input(Random({1, 2, 5, 6, 7}, rng))
        .ConstInput(Random({3, 2, 2, 3, 3}, rng))
        .ConstInput(Random({3}, rng));
  });
  // D: pads (0, 1), extended at the end; H: pads (1, 0), extended at the start.
  AddConv(c, "3d asymmetric pads", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {0, 1, 0, 1, 0, 0}))
        .Input(Random({1, 2, 4, 5, 6}, rng))
        .ConstInput(Random({2, 2, 2, 2, 2}, rng));
  });
  // Y has 147456 elements: the epilogue's grid-stride loop.
  AddConv(c, "1x1 large", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({2, 16, 48, 48}, rng))
        .ConstInput(Random({32, 16, 1, 1}, rng))
        .ConstInput(Random({32}, rng));
  });
  // 288 products per output.
  AddConv(c, "long sums", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({1, 32, 12, 12}, rng))
        .ConstInput(Random({16, 32, 3, 3}, rng))
        .ConstInput(Random({16}, rng));
  });
  AddConv(c, "W and B not constant", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {0, 1, 0, 1}))
        .Input(Random({3, 2, 5, 6}, rng))
        .Input(Random({4, 2, 2, 3}, rng))
        .Input(Random({4}, rng));
  });
  AddConv(c, "opset 7 size-1 dims", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({1, 1, 1, 9}, rng))
        .ConstInput(Random({1, 1, 1, 3}, rng))
        .ConstInput(Random({1}, rng));
  });
  AddConv(c, "empty batch", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({0, 3, 5, 5}, rng))
        .ConstInput(Random({4, 3, 3, 3}, rng))
        .ConstInput(Random({4}, rng));
  });
  // No input channels: Y is B everywhere.
  AddConv(c, "no input channels", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({1, 0, 5, 5}, rng))
        .ConstInput(Random({4, 0, 3, 3}, rng))
        .ConstInput(Random({4}, rng));
  });

  // --- FusedConv --------------------------------------------------------------------------------
  AddFused(c, "bias Z Relu", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Attr(ActAttr("Relu"))
        .Input(Random({2, 4, 9, 9}, rng))
        .ConstInput(Random({6, 4, 3, 3}, rng))
        .ConstInput(Random({6}, rng))
        .Input(Random({2, 6, 9, 9}, rng));
  });
  AddFused(c, "Z without bias SiLU SAME_UPPER", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(StringAttr("auto_pad", "SAME_UPPER"))
        .Attr(IntsAttr("strides", {2, 2}))
        .Attr(ActAttr("SiLU"))
        .Input(Random({1, 3, 8, 8}, rng))
        .ConstInput(Random({5, 3, 3, 3}, rng))
        .OmittedInput()
        .Input(Random({1, 5, 4, 4}, rng));
  });
  AddFused(c, "depthwise Clip", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntAttr("group", 6))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Attr(ActAttr("Clip"))
        .Attr(ActParamsAttr({-0.5f, 0.5f}))
        .Input(Random({2, 6, 11, 11}, rng))
        .ConstInput(Random({6, 1, 3, 3}, rng))
        .ConstInput(Random({6}, rng));
  });
  AddFused(c, "1d LeakyRelu", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {2, 2}))
        .Attr(ActAttr("LeakyRelu"))
        .Attr(ActParamsAttr({0.1f}))
        .Input(Random({2, 4, 20}, rng))
        .ConstInput(Random({3, 4, 5}, rng))
        .ConstInput(Random({3}, rng));
  });
  AddFused(c, "HardSigmoid", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(ActAttr("HardSigmoid"))
        .Attr(ActParamsAttr({0.2f, 0.5f}))
        .Input(Random({1, 3, 6, 7}, rng))
        .ConstInput(Random({2, 3, 2, 2}, rng))
        .ConstInput(Random({2}, rng));
  });
  AddFused(c, "3d HardSwish Z", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 1, 1, 1, 1, 1}))
        .Attr(ActAttr("HardSwish"))
        .Input(Random({1, 2, 4, 5, 6}, rng))
        .ConstInput(Random({4, 2, 3, 3, 3}, rng))
        .ConstInput(Random({4}, rng))
        .Input(Random({1, 4, 4, 5, 6}, rng));
  });
  AddFused(c, "Gelu", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(ActAttr("Gelu"))
        .Attr(IntsAttr("dilations", {2, 2}))
        .Input(Random({2, 3, 9, 8}, rng))
        .ConstInput(Random({4, 3, 3, 3}, rng))
        .ConstInput(Random({4}, rng));
  });
  AddFused(c, "GeluTanh", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(ActAttr("GeluTanh"))
        .Input(Random({1, 4, 6, 6}, rng))
        .ConstInput(Random({4, 4, 3, 3}, rng))
        .ConstInput(Random({4}, rng));
  });
  AddFused(c, "Tanh group 3", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(ActAttr("Tanh"))
        .Attr(IntAttr("group", 3))
        .Input(Random({1, 6, 5, 5}, rng))
        .ConstInput(Random({9, 2, 2, 2}, rng))
        .ConstInput(Random({9}, rng));
  });
  AddFused(c, "Sigmoid asymmetric pads", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(ActAttr("Sigmoid"))
        .Attr(IntsAttr("pads", {1, 0, 0, 2}))
        .Input(Random({2, 2, 6, 6}, rng))
        .ConstInput(Random({3, 2, 3, 3}, rng))
        .ConstInput(Random({3}, rng));
  });
  AddFused(c, "no activation bias only", [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({1, 3, 5, 5}, rng))
        .ConstInput(Random({2, 3, 3, 3}, rng))
        .ConstInput(Random({2}, rng));
  });
  AddFused(c, "plain layout attributes", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntAttr(std::string(kAttrXBlock), 0))
        .Attr(IntAttr(std::string(kAttrYBlock), 0))
        .Attr(ActAttr("Relu"))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({1, 4, 6, 6}, rng))
        .ConstInput(Random({4, 4, 3, 3}, rng))
        .ConstInput(Random({4}, rng))
        .Input(Random({1, 4, 6, 6}, rng));
  });
  // Y has 73728 elements: the epilogue's grid-stride loop with the residual.
  AddFused(c, "large Z Relu", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Attr(ActAttr("Relu"))
        .Input(Random({2, 8, 64, 72}, rng))
        .ConstInput(Random({8, 8, 3, 3}, rng))
        .ConstInput(Random({8}, rng))
        .Input(Random({2, 8, 64, 72}, rng));
  });
  AddFused(c, "no input channels Z", [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(ActAttr("Relu"))
        .Input(Random({2, 0, 4, 4}, rng))
        .ConstInput(Random({3, 0, 1, 1}, rng))
        .ConstInput(Random({3}, rng))
        .Input(Random({2, 3, 4, 4}, rng));
  });

  // Half-precision weights: FLOAT X, B, Z (kept FLOAT), W a FLOAT16 / BFLOAT16 constant.
  for (DataType wt : {DataType::kFloat16, DataType::kBFloat16}) {
    const std::string w = Suffix(wt);
    const double tol = wt == DataType::kFloat16 ? 5e-3 : 1.6e-2;
    c.push_back({"FusedConv " + w + " weights bias Z Relu f32", std::string(kFusedConvOp),
                 std::string(kKilnDomain), kKilnOpsetVersion, DataType::kFloat32,
                 [wt](CaseInputs& in, std::mt19937& rng) {
                   in.Attr(IntsAttr("pads", {1, 1, 1, 1}))
                       .Attr(ActAttr("Relu"))
                       .KeepInput(Random({2, 5, 10, 9}, rng))
                       .KeepConstInput(ToHalf(Random({6, 5, 3, 3}, rng), wt))
                       .KeepConstInput(Random({6}, rng))
                       .KeepInput(Random({2, 6, 10, 9}, rng));
                 },
                 tol});
    // The conversion of X in the same pass as the zero-extended copy.
    c.push_back({"FusedConv " + w + " weights SAME_UPPER f32", std::string(kFusedConvOp),
                 std::string(kKilnDomain), kKilnOpsetVersion, DataType::kFloat32,
                 [wt](CaseInputs& in, std::mt19937& rng) {
                   in.Attr(StringAttr("auto_pad", "SAME_UPPER"))
                       .Attr(IntsAttr("strides", {2, 2}))
                       .KeepInput(Random({1, 4, 8, 10}, rng))
                       .KeepConstInput(ToHalf(Random({3, 4, 3, 3}, rng), wt));
                 },
                 tol});
    c.push_back({"FusedConv " + w + " weights 1d SiLU f32", std::string(kFusedConvOp),
                 std::string(kKilnDomain), kKilnOpsetVersion, DataType::kFloat32,
                 [wt](CaseInputs& in, std::mt19937& rng) {
                   in.Attr(ActAttr("SiLU"))
                       .KeepInput(Random({2, 3, 15}, rng))
                       .KeepConstInput(ToHalf(Random({4, 3, 3}, rng), wt))
                       .KeepConstInput(Random({4}, rng));
                 },
                 tol});
  }
  return c;
}

}  // namespace kiln::cuda::testing
