// SPDX-License-Identifier: Apache-2.0
// Harness cases (test_cases.h) of the reduce group: reductions, ArgMax / ArgMin, Softmax /
// LogSoftmax, the normalizations, the pools and ai.kiln Attention. Every case is run in FP32,
// FP16 and BF16 (the integer reductions in INT32 / INT64 too); the shapes reach both device
// shapes of each kernel (rows and columns, warp- and block-sized rows), odd sizes, negative axes,
// size-1 and zero-size dims, and grids larger than one wave (70,000 elements and up).

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/test_cases.h"

namespace kiln::cuda::testing {
namespace {

using ref::testing::FloatAttr;
using ref::testing::IntAttr;
using ref::testing::IntsAttr;
using ref::testing::MakeTensor;
using ref::testing::StringAttr;
using Make = std::function<void(CaseInputs&, std::mt19937&)>;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

std::string Suffix(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "f32";
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kInt32:
      return "i32";
    case DataType::kInt64:
      return "i64";
    default:
      return "other";
  }
}

class CaseList {
 public:
  // The case in FP32, FP16 and BF16.
  void Float(const std::string& name, const std::string& op, int64_t opset, const Make& make,
             const std::string& domain = "") {
    for (DataType t : kFloatTypes) Typed(name, op, opset, t, make, domain);
  }
  // The case in one dtype (integer cases build their own tensors).
  void Typed(const std::string& name, const std::string& op, int64_t opset, DataType dtype,
             const Make& make, const std::string& domain = "") {
    CudaCase c;
    c.name = name + " " + Suffix(dtype);
    c.op = op;
    c.domain = domain;
    c.opset = opset;
    c.dtype = dtype;
    c.make = make;
    cases_.push_back(std::move(c));
  }
  std::vector<CudaCase> Take() { return std::move(cases_); }

 private:
  std::vector<CudaCase> cases_;
};

OwnedTensor Axes(std::vector<int64_t> axes) {
  const int64_t n = static_cast<int64_t>(axes.size());
  return MakeTensor<int64_t>({n}, axes);
}

// Values drawn from {0, 1, 2, 3}: ties for ArgMax / ArgMin.
OwnedTensor SmallInts(const Shape& shape, std::mt19937& rng) {
  return RandomInts<float>(shape, rng, 0, 3);
}

// [s, t] additive causal mask (0 on and below the diagonal, -inf above).
OwnedTensor CausalMask(int64_t s, int64_t t) {
  std::vector<float> v(static_cast<size_t>(s * t));
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t j = 0; j < t; ++j) {
      v[static_cast<size_t>(i * t + j)] = j <= i ? 0.0f : -std::numeric_limits<float>::infinity();
    }
  }
  return MakeTensor<float>({s, t}, v);
}

void AddReductions(CaseList& l) {
  // ReduceSum: attribute axes before 13, a constant axes input from 13.
  l.Float("ReduceSum opset7 axes 0 2", "ReduceSum", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {0, 2})).Input(Random({4, 6, 5}, rng));
  });
  l.Float("ReduceSum opset11 axis 1 columns", "ReduceSum", 11,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Attr(IntsAttr("axes", {1})).Input(Random({3, 5, 7}, rng));
          });
  l.Float("ReduceSum const axes -1 no keepdims", "ReduceSum", 13,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Attr(IntAttr("keepdims", 0)).Input(Random({4, 33}, rng)).KeepConstInput(Axes({-1}));
          });
  l.Float("ReduceSum noop empty axes", "ReduceSum", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntAttr("noop_with_empty_axes", 1)).Input(Random({3, 4}, rng)).KeepConstInput(Axes({}));
  });
  l.Float("ReduceSum all 70000", "ReduceSum", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({70, 1000}, rng));
  });
  l.Float("ReduceSum axis 0 70000 outputs", "ReduceSum", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({3, 70000}, rng)).KeepConstInput(Axes({0}));
  });
  l.Float("ReduceSum size-1 dims", "ReduceSum", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({1, 5, 1, 3}, rng)).KeepConstInput(Axes({0, 2}));
  });
  for (DataType t : {DataType::kInt32, DataType::kInt64}) {
    l.Typed("ReduceSum int axis 1", "ReduceSum", 13, t, [t](CaseInputs& in, std::mt19937& rng) {
      in.Input(t == DataType::kInt32 ? RandomInts<int32_t>({5, 9}, rng, -100, 100)
                                     : RandomInts<int64_t>({5, 9}, rng, -100, 100))
          .KeepConstInput(Axes({1}));
    });
    l.Typed("ReduceSum int opset11 axis 0", "ReduceSum", 11, t,
            [t](CaseInputs& in, std::mt19937& rng) {
              in.Attr(IntsAttr("axes", {0}))
                  .Input(t == DataType::kInt32 ? RandomInts<int32_t>({6, 7}, rng, -9, 9)
                                               : RandomInts<int64_t>({6, 7}, rng, -9, 9));
            });
    for (const char* op : {"ReduceMax", "ReduceMin"}) {
      l.Typed(std::string(op) + " int axis -1", op, 13, t, [t](CaseInputs& in, std::mt19937& rng) {
        in.Attr(IntsAttr("axes", {-1}))
            .Input(t == DataType::kInt32 ? RandomInts<int32_t>({4, 37}, rng, -1000, 1000)
                                         : RandomInts<int64_t>({4, 37}, rng, -1000, 1000));
      });
      l.Typed(std::string(op) + " int axis 0 columns", op, 13, t,
              [t](CaseInputs& in, std::mt19937& rng) {
                in.Attr(IntsAttr("axes", {0}))
                    .Input(t == DataType::kInt32 ? RandomInts<int32_t>({9, 40}, rng, -50, 50)
                                                 : RandomInts<int64_t>({9, 40}, rng, -50, 50));
              });
    }
  }

  l.Float("ReduceMean axes 1 3 no keepdims", "ReduceMean", 13,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Attr(IntsAttr("axes", {1, 3}))
                .Attr(IntAttr("keepdims", 0))
                .Input(Random({2, 3, 4, 5}, rng));
          });
  l.Float("ReduceMean long rows", "ReduceMean", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {-1})).Input(Random({3, 5000}, rng));
  });
  l.Float("ReduceMean empty reduction", "ReduceMean", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {1})).Input(Random({3, 0, 4}, rng));
  });
  l.Float("ReduceMean empty output", "ReduceMean", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {1})).Input(Random({0, 5}, rng));
  });
  l.Float("ReduceMean scalar", "ReduceMean", 13,
          [](CaseInputs& in, std::mt19937& rng) { in.Input(Random({}, rng)); });

  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    const std::string o(op);
    l.Float(o + " axis 1", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntsAttr("axes", {1})).Input(Random({6, 700}, rng));
    });
    l.Float(o + " opset7 all", op, 7, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("keepdims", 0)).Input(Random({5, 7, 3}, rng));
    });
    l.Float(o + " axis 0 columns", op, 12, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntsAttr("axes", {0})).Input(Random({33, 65}, rng));
    });
    l.Float(o + " empty reduction", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntsAttr("axes", {1})).Input(Random({2, 0}, rng));
    });
  }

  l.Float("ReduceProd axis 1", "ReduceProd", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {1})).Input(Random({6, 8}, rng, 0.5, 1.5));
  });
  l.Float("ReduceProd axis 0", "ReduceProd", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {0})).Input(Random({5, 21}, rng, 0.5, 1.5));
  });
  l.Float("ReduceL1 axis 0", "ReduceL1", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {0})).Input(Random({5, 40}, rng));
  });
  l.Float("ReduceL1 axes -1 -2", "ReduceL1", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {-1, -2})).Input(Random({3, 4, 9}, rng));
  });
  l.Float("ReduceL2 axis 1", "ReduceL2", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {1})).Input(Random({4, 50, 3}, rng));
  });
  l.Float("ReduceL2 all", "ReduceL2", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({7, 9}, rng));
  });
  l.Float("ReduceSumSquare axis 2", "ReduceSumSquare", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {2})).Input(Random({3, 4, 45}, rng));
  });
  l.Float("ReduceSumSquare axis 0", "ReduceSumSquare", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {0})).Attr(IntAttr("keepdims", 0)).Input(Random({3, 17}, rng));
  });
  l.Float("ReduceLogSum axis 1", "ReduceLogSum", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {1})).Input(Random({3, 50}, rng, 0.1, 1.0));
  });
  l.Float("ReduceLogSum axis 0", "ReduceLogSum", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {0})).Input(Random({6, 10}, rng, 0.1, 1.0));
  });
  l.Float("ReduceLogSumExp rows", "ReduceLogSumExp", 13, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {1})).Input(Random({4, 100}, rng, -5.0, 5.0));
  });
  l.Float("ReduceLogSumExp long rows", "ReduceLogSumExp", 13,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Attr(IntsAttr("axes", {1})).Input(Random({2, 3000}, rng, -5.0, 5.0));
          });
  l.Float("ReduceLogSumExp columns", "ReduceLogSumExp", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("axes", {0})).Input(Random({100, 6}, rng, -5.0, 5.0));
  });
}

void AddArgReductions(CaseList& l) {
  for (const char* op : {"ArgMax", "ArgMin"}) {
    const std::string o(op);
    l.Float(o + " axis 1 warp rows", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", 1)).Input(Random({7, 300}, rng));
    });
    l.Float(o + " axis -1 block rows", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", -1)).Input(Random({3, 2000}, rng));
    });
    l.Float(o + " axis 1 columns no keepdims", op, 11, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", 1)).Attr(IntAttr("keepdims", 0)).Input(Random({5, 9, 6}, rng));
    });
    l.Float(o + " ties first", op, 7, [](CaseInputs& in, std::mt19937& rng) {
      in.Input(SmallInts({40, 3}, rng));
    });
    l.Float(o + " ties select last rows", op, 12, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", 1))
          .Attr(IntAttr("select_last_index", 1))
          .Input(SmallInts({6, 1000}, rng));
    });
    l.Float(o + " ties select last columns", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", 0))
          .Attr(IntAttr("select_last_index", 1))
          .Input(SmallInts({50, 7}, rng));
    });
  }
}

void AddSoftmax(CaseList& l) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const std::string o(op);
    l.Float(o + " opset13 warp rows", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Input(Random({4, 50}, rng, -4.0, 4.0));
    });
    l.Float(o + " opset13 block rows", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Input(Random({3, 3000}, rng, -4.0, 4.0));
    });
    l.Float(o + " opset13 70000", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Input(Random({70, 1000}, rng, -4.0, 4.0));
    });
    l.Float(o + " opset13 axis 1 columns", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", 1)).Input(Random({2, 5, 7}, rng, -4.0, 4.0));
    });
    l.Float(o + " opset13 size-1 axis", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", 0)).Input(Random({1, 6}, rng));
    });
    l.Float(o + " opset11 coerced axis -2", op, 11, [](CaseInputs& in, std::mt19937& rng) {
      in.Attr(IntAttr("axis", -2)).Input(Random({2, 3, 4}, rng, -4.0, 4.0));
    });
    l.Float(o + " opset7 default axis", op, 7, [](CaseInputs& in, std::mt19937& rng) {
      in.Input(Random({3, 4, 5}, rng, -4.0, 4.0));
    });
    l.Float(o + " empty", op, 13, [](CaseInputs& in, std::mt19937& rng) {
      in.Input(Random({0, 5}, rng));
    });
  }
}

void AddNormalizations(CaseList& l) {
  l.Float("LayerNormalization axis -1 bias", "LayerNormalization", 17,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Input(Random({4, 6, 32}, rng, -2.0, 2.0))
                .Input(Random({32}, rng))
                .Input(Random({32}, rng));
          });
  l.Float("LayerNormalization axis 1 broadcast stats", "LayerNormalization", 17,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Attr(IntAttr("axis", 1))
                .Attr(FloatAttr("epsilon", 1e-3f))
                .Input(Random({3, 5, 4}, rng, -2.0, 2.0))
                .Input(Random({4}, rng))
                .Input(Random({5, 1}, rng))
                .Outputs(3);
          });
  l.Float("LayerNormalization block rows no bias", "LayerNormalization", 17,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Input(Random({2, 3000}, rng, -2.0, 2.0)).Input(Random({3000}, rng));
          });
  l.Float("LayerNormalization 70000", "LayerNormalization", 17,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Input(Random({700, 100}, rng, -2.0, 2.0))
                .Input(Random({100}, rng))
                .Input(Random({100}, rng))
                .Outputs(2);
          });
  l.Float(
      "kiln LayerNormalization", "LayerNormalization", 1,
      [](CaseInputs& in, std::mt19937& rng) {
        in.Attr(FloatAttr("epsilon", 1e-6f))
            .Input(Random({3, 64}, rng, -2.0, 2.0))
            .Input(Random({64}, rng))
            .Input(Random({64}, rng));
      },
      "ai.kiln");
  l.Float(
      "kiln LayerNormalization axis -2 no bias", "LayerNormalization", 1,
      [](CaseInputs& in, std::mt19937& rng) {
        in.Attr(IntAttr("axis", -2))
            .Input(Random({2, 7, 9}, rng, -2.0, 2.0))
            .Input(Random({7, 9}, rng));
      },
      "ai.kiln");

  // BatchNormalization (inference): var in [0.5, 1.5).
  auto bn = [](const Shape& x_shape, bool keep_stats) {
    return [x_shape, keep_stats](CaseInputs& in, std::mt19937& rng) {
      const int64_t c = x_shape.dim(1);
      in.Input(Random(x_shape, rng, -2.0, 2.0));
      for (int i = 0; i < 4; ++i) {
        OwnedTensor t = i == 3 ? Random({c}, rng, 0.5, 1.5) : Random({c}, rng);
        if (keep_stats) {
          in.KeepInput(std::move(t));
        } else {
          in.Input(std::move(t));
        }
      }
    };
  };
  l.Float("BatchNormalization opset15", "BatchNormalization", 15, bn({2, 3, 4, 5}, false));
  l.Float("BatchNormalization opset15 fp32 stats", "BatchNormalization", 15,
          bn({2, 3, 4, 5}, true));
  l.Float("BatchNormalization opset9 rank3", "BatchNormalization", 9, bn({2, 4, 6}, false));
  l.Float("BatchNormalization opset7 rank2", "BatchNormalization", 7, bn({3, 5}, false));
  l.Float("BatchNormalization 70000", "BatchNormalization", 14, bn({2, 35, 1000}, false));

  l.Float("InstanceNormalization", "InstanceNormalization", 11,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Input(Random({2, 3, 5, 7}, rng, -2.0, 2.0))
                .Input(Random({3}, rng))
                .Input(Random({3}, rng));
          });
  l.Float("InstanceNormalization block rows", "InstanceNormalization", 7,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Attr(FloatAttr("epsilon", 1e-3f))
                .Input(Random({1, 2, 50, 50}, rng, -2.0, 2.0))
                .Input(Random({2}, rng))
                .Input(Random({2}, rng));
          });
}

void AddPools(CaseList& l) {
  l.Float("MaxPool 2d pads strides", "MaxPool", 12, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3, 3}))
        .Attr(IntsAttr("strides", {2, 2}))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({1, 2, 9, 9}, rng));
  });
  l.Float("MaxPool 1d dilations ceil", "MaxPool", 12, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3}))
        .Attr(IntsAttr("dilations", {2}))
        .Attr(IntsAttr("strides", {2}))
        .Attr(IntAttr("ceil_mode", 1))
        .Input(Random({2, 3, 12}, rng));
  });
  l.Float("MaxPool 3d same upper", "MaxPool", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {2, 3, 2}))
        .Attr(StringAttr("auto_pad", "SAME_UPPER"))
        .Attr(IntsAttr("strides", {2, 2, 2}))
        .Input(Random({1, 2, 5, 6, 7}, rng));
  });
  l.Float("MaxPool 2d same lower", "MaxPool", 10, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {4, 4}))
        .Attr(StringAttr("auto_pad", "SAME_LOWER"))
        .Input(Random({1, 1, 6, 5}, rng));
  });
  l.Float("MaxPool opset8", "MaxPool", 8, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {2, 2})).Input(Random({1, 3, 6, 6}, rng));
  });
  l.Float("MaxPool opset7 valid", "MaxPool", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3, 2}))
        .Attr(StringAttr("auto_pad", "VALID"))
        .Attr(IntsAttr("strides", {1, 2}))
        .Input(Random({2, 1, 7, 8}, rng));
  });
  l.Float("MaxPool resnet stem", "MaxPool", 12, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3, 3}))
        .Attr(IntsAttr("strides", {2, 2}))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({2, 16, 56, 56}, rng));
  });

  l.Float("AveragePool 2d exclude pad", "AveragePool", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3, 3}))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(Random({1, 3, 8, 8}, rng));
  });
  l.Float("AveragePool 2d include pad", "AveragePool", 11, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3, 3}))
        .Attr(IntsAttr("pads", {1, 2, 1, 0}))
        .Attr(IntAttr("count_include_pad", 1))
        .Input(Random({2, 2, 7, 8}, rng));
  });
  l.Float("AveragePool ceil include pad", "AveragePool", 10, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {3, 3}))
        .Attr(IntsAttr("strides", {2, 2}))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Attr(IntAttr("ceil_mode", 1))
        .Attr(IntAttr("count_include_pad", 1))
        .Input(Random({1, 2, 8, 8}, rng));
  });
  l.Float("AveragePool 1d same upper", "AveragePool", 17, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {4}))
        .Attr(StringAttr("auto_pad", "SAME_UPPER"))
        .Attr(IntsAttr("strides", {3}))
        .Input(Random({2, 3, 13}, rng));
  });
  l.Float("AveragePool 3d", "AveragePool", 17, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {2, 2, 3}))
        .Attr(IntsAttr("pads", {0, 1, 1, 1, 0, 1}))
        .Input(Random({1, 2, 4, 5, 6}, rng));
  });
  l.Float("AveragePool opset7", "AveragePool", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Attr(IntsAttr("kernel_shape", {2, 2}))
        .Attr(IntsAttr("strides", {2, 2}))
        .Input(Random({1, 4, 9, 9}, rng));
  });

  l.Float("GlobalAveragePool", "GlobalAveragePool", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({2, 3, 7, 7}, rng));
  });
  l.Float("GlobalAveragePool large planes", "GlobalAveragePool", 7,
          [](CaseInputs& in, std::mt19937& rng) {
            in.Input(Random({1, 8, 100, 100}, rng));
          });
  l.Float("GlobalAveragePool 1x1", "GlobalAveragePool", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({2, 5, 1, 1}, rng));
  });
  l.Float("GlobalMaxPool", "GlobalMaxPool", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({2, 3, 5, 5}, rng));
  });
  l.Float("GlobalMaxPool rank3", "GlobalMaxPool", 7, [](CaseInputs& in, std::mt19937& rng) {
    in.Input(Random({2, 4, 900}, rng));
  });
}

void AddAttention(CaseList& l) {
  auto qkv = [](CaseInputs& in, std::mt19937& rng, const Shape& q, const Shape& k, const Shape& v) {
    in.Input(Random(q, rng)).Input(Random(k, rng)).Input(Random(v, rng));
  };
  l.Float(
      "kiln Attention no mask", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {2, 3, 10, 16}, {2, 3, 20, 16}, {2, 3, 20, 24});
      },
      "ai.kiln");
  l.Float(
      "kiln Attention mask s t", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {2, 3, 10, 16}, {2, 3, 20, 16}, {2, 3, 20, 16});
        in.Input(Random({10, 20}, rng));
      },
      "ai.kiln");
  l.Float(
      "kiln Attention padding mask", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {2, 2, 5, 32}, {2, 2, 40, 32}, {2, 2, 40, 32});
        in.Input(Random({2, 1, 1, 40}, rng, -3.0, 0.0));
      },
      "ai.kiln");
  l.Float(
      "kiln Attention causal multi tile", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {1, 2, 70, 64}, {1, 2, 70, 64}, {1, 2, 70, 64});
        in.Input(CausalMask(70, 70));
      },
      "ai.kiln");
  l.Float(
      "kiln Attention scale d128", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        in.Attr(FloatAttr("scale", 0.05f));
        qkv(in, rng, {3, 17, 128}, {3, 33, 128}, {3, 33, 128});
      },
      "ai.kiln");
  l.Float(
      "kiln Attention d256 dv200", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {2, 9, 256}, {2, 45, 256}, {2, 45, 200});
      },
      "ai.kiln");
  l.Float(
      "kiln Attention rank2 odd d", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {5, 7}, {3, 7}, {3, 5});
      },
      "ai.kiln");
  l.Float(
      "kiln Attention many heads", "Attention", 1,
      [qkv](CaseInputs& in, std::mt19937& rng) {
        qkv(in, rng, {4, 8, 40, 32}, {4, 8, 64, 32}, {4, 8, 64, 32});
      },
      "ai.kiln");
}

}  // namespace

std::vector<CudaCase> ReduceCases() {
  CaseList l;
  AddReductions(l);
  AddArgReductions(l);
  AddSoftmax(l);
  AddNormalizations(l);
  AddPools(l);
  AddAttention(l);
  return l.Take();
}

}  // namespace kiln::cuda::testing
