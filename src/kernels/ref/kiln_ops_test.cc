// SPDX-License-Identifier: Apache-2.0
// Reference kernels of the ai.kiln operators: each expected value is worked out here from the
// operator's definition in op/kiln_ops.h (by hand for small cases, or by a naive formula
// written in the test), never taken from the kernel's own output.

#include "op/kiln_ops.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ref/ref_test_util.h"
#include "kernels/registry.h"

namespace kiln::ref::testing {
namespace {

OpTest Kiln(std::string op) {
  OpTest t(std::move(op), 17);
  t.Domain("ai.kiln", 1);
  return t;
}

void ExpectNear(const OwnedTensor& t, const Shape& shape, const std::vector<float>& want,
                double tol = 1e-5) {
  ASSERT_EQ(t.shape(), shape);
  std::vector<float> got = ToVector<float>(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(KilnOpsTest, EveryKilnOpHasOneReferenceRowForVersion1) {
  for (std::string_view op :
       {kFusedConvOp, kFusedGemmOp, kFusedMatMulOp, kLayerNormalizationOp, kGeluOp, kAttentionOp}) {
    int rows = 0;
    for (const KernelDef& def : KernelRegistry::Global().defs()) {
      if (def.provider != "ref" || def.domain != kKilnDomain || def.op_type != op) continue;
      ++rows;
      EXPECT_EQ(def.since_version, 1) << op;
      EXPECT_EQ(def.end_version, kKilnOpsetVersion) << op;
      EXPECT_NE(def.types & TypeBit(DataType::kFloat32), 0u) << op;
    }
    EXPECT_EQ(rows, 1) << op;
  }
}

TEST(KilnOpsTest, FusedConvAddsBiasResidualThenRelu) {
  // 1x1 conv, two output channels: weights 1 and -1, bias 0.5 and 0, residual all ones.
  OpTest t = Kiln("FusedConv");
  t.Input(MakeTensor<float>({1, 1, 2, 2}, {1, -2, 3, -4}))
      .ConstInput(MakeTensor<float>({2, 1, 1, 1}, {1, -1}))
      .ConstInput(MakeTensor<float>({2}, {0.5f, 0}))
      .Input(MakeTensor<float>({1, 2, 2, 2}, std::vector<float>(8, 1.0f)))
      .Attr(Attribute::String("activation", "Relu"));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // ch0: relu(x + 0.5 + 1) ; ch1: relu(-x + 1)
  ExpectNear(out->at(0), Shape{1, 2, 2, 2}, {2.5f, 0, 4.5f, 0, 0, 3, 0, 5});
}

TEST(KilnOpsTest, FusedConvKeepsConvAttributes) {
  // 3x3 input, 2x2 kernel of ones, stride 1, pad 0: window sums.
  OpTest t = Kiln("FusedConv");
  t.Input(MakeTensor<float>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}))
      .ConstInput(MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
      .Attr(Attribute::Ints("kernel_shape", {2, 2}))
      .Attr(Attribute::String("activation", "Clip"))
      .Attr(Attribute::Floats("activation_params", {0, 20}));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(out->at(0), Shape{1, 1, 2, 2}, {12, 16, 20, 20});  // 24 and 28 clipped to 20
}

TEST(KilnOpsTest, FusedGemmAlphaBetaCThenClip) {
  OpTest t = Kiln("FusedGemm");
  t.Input(MakeTensor<float>({1, 2}, {1, 2}))
      .ConstInput(MakeTensor<float>({2, 2}, {1, 0, 0, 1}))
      .ConstInput(MakeTensor<float>({2}, {1, 1}))
      .Attr(Attribute::Float("alpha", 2.0f))
      .Attr(Attribute::Float("beta", 0.5f))
      .Attr(Attribute::String("activation", "Clip"))
      .Attr(Attribute::Floats("activation_params", {0, 4}));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // 2*[1,2] + 0.5*[1,1] = [2.5, 4.5] -> clip to [2.5, 4]
  ExpectNear(out->at(0), Shape{1, 2}, {2.5f, 4.0f});
}

TEST(KilnOpsTest, FusedMatMulBiasAndResidualThenLeakyRelu) {
  OpTest t = Kiln("FusedMatMul");
  t.Input(MakeTensor<float>({1, 2}, {1, -3}))
      .ConstInput(MakeTensor<float>({2, 2}, {1, 0, 0, 1}))
      .ConstInput(MakeTensor<float>({2}, {0, 1}))
      .Input(MakeTensor<float>({1, 2}, {-2, 0}))
      .Attr(Attribute::String("activation", "LeakyRelu"))
      .Attr(Attribute::Floats("activation_params", {0.1f}));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // [1,-3] + [0,1] + [-2,0] = [-1,-2] -> [-0.1, -0.2]
  ExpectNear(out->at(0), Shape{1, 2}, {-0.1f, -0.2f});
}

TEST(KilnOpsTest, EveryActivationMatchesItsFormula) {
  const std::vector<float> xs = {-3.5f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f, 4.0f};
  struct Case {
    std::string name;
    std::vector<float> params;
    double (*f)(double);
  };
  const std::vector<Case> cases = {
      {"", {}, [](double x) { return x; }},
      {"Relu", {}, [](double x) { return x > 0 ? x : 0; }},
      {"Sigmoid", {}, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"SiLU", {}, [](double x) { return x / (1 + std::exp(-x)); }},
      {"Tanh", {}, [](double x) { return std::tanh(x); }},
      {"HardSigmoid", {0.2f, 0.5f}, [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }},
      {"HardSwish", {}, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
      {"Gelu", {}, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"GeluTanh",
       {},
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       }},
      {"LeakyRelu", {0.01f}, [](double x) { return x >= 0 ? x : 0.01 * x; }},
      {"Clip", {-1.0f, 1.0f}, [](double x) { return std::clamp(x, -1.0, 1.0); }},
  };
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> eye(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) eye[static_cast<size_t>(i * n + i)] = 1.0f;
  for (const Case& c : cases) {
    OpTest t = Kiln("FusedMatMul");
    t.Input(MakeTensor<float>({1, n}, xs)).ConstInput(MakeTensor<float>({n, n}, eye));
    t.Attr(Attribute::String("activation", c.name));
    if (!c.params.empty()) t.Attr(Attribute::Floats("activation_params", c.params));
    Result<std::vector<OwnedTensor>> out = t.Run();
    ASSERT_TRUE(out.ok()) << c.name << ": " << out.status().ToString();
    std::vector<float> want;
    want.reserve(xs.size());
    for (float x : xs) want.push_back(static_cast<float>(c.f(x)));
    SCOPED_TRACE(c.name);
    ExpectNear(out->at(0), Shape{1, n}, want);
  }
}

TEST(KilnOpsTest, FusedOpsRejectBadActivations) {
  {
    OpTest t = Kiln("FusedMatMul");
    t.Input(MakeTensor<float>({1, 1}, {1})).ConstInput(MakeTensor<float>({1, 1}, {1}));
    t.Attr(Attribute::String("activation", "Swish"));
    Result<std::vector<OwnedTensor>> out = t.Run();
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("unknown activation 'Swish'"), std::string::npos)
        << out.status().ToString();
  }
  {
    OpTest t = Kiln("FusedMatMul");
    t.Input(MakeTensor<float>({1, 1}, {1})).ConstInput(MakeTensor<float>({1, 1}, {1}));
    t.Attr(Attribute::String("activation", "Clip"));
    Result<std::vector<OwnedTensor>> out = t.Run();
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("takes 2 activation_params"), std::string::npos)
        << out.status().ToString();
  }
  {
    // Z must have Y's shape exactly (no broadcasting).
    OpTest t = Kiln("FusedMatMul");
    t.Input(MakeTensor<float>({2, 1}, {1, 2})).ConstInput(MakeTensor<float>({1, 1}, {1}));
    t.OmittedInput().Input(MakeTensor<float>({1, 1}, {1}));
    Result<std::vector<OwnedTensor>> out = t.Run();
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find('Z'), std::string::npos) << out.status().ToString();
  }
}

TEST(KilnOpsTest, LayerNormalizationOverLastAxis) {
  OpTest t = Kiln("LayerNormalization");
  t.Input(MakeTensor<float>({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2}))
      .ConstInput(MakeTensor<float>({4}, {1, 2, 1, 1}))
      .ConstInput(MakeTensor<float>({4}, {0, 0, 0, 10}));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Row 0: mean 2.5, variance 1.25. Row 1: constant, so (x - mean) = 0.
  const double inv = 1 / std::sqrt(1.25 + 1e-5);
  ExpectNear(out->at(0), Shape{2, 4},
             {float(-1.5 * inv), float(2 * -0.5 * inv), float(0.5 * inv), float(1.5 * inv + 10), 0,
              0, 0, 10});
}

TEST(KilnOpsTest, GeluBothForms) {
  const std::vector<float> xs = {-2, -0.5f, 0, 1, 3};
  for (std::string approx : {"none", "tanh"}) {
    OpTest t = Kiln("Gelu");
    t.Input(MakeTensor<float>({5}, xs)).Attr(Attribute::String("approximate", approx));
    Result<std::vector<OwnedTensor>> out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<float> want;
    want.reserve(xs.size());
    for (double x : xs) {
      want.push_back(static_cast<float>(
          approx == "none"
              ? 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))
              : 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))));
    }
    ExpectNear(out->at(0), Shape{5}, want);
  }
  OpTest bad = Kiln("Gelu");
  bad.Input(MakeTensor<float>({1}, {1})).Attr(Attribute::String("approximate", "fast"));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(KilnOpsTest, AttentionWithScaleAndMask) {
  // One query, two keys, D = 1: scores = scale * [1*1, 1*2] + mask.
  OpTest t = Kiln("Attention");
  t.Input(MakeTensor<float>({1, 1, 1}, {1}))
      .Input(MakeTensor<float>({1, 2, 1}, {1, 2}))
      .Input(MakeTensor<float>({1, 2, 1}, {10, 20}))
      .Input(MakeTensor<float>({1, 2}, {0, -1}))  // broadcasts to [1, 1, 2]
      .Attr(Attribute::Float("scale", 2.0f));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double s0 = 2.0 + 0, s1 = 4.0 - 1;  // scaled scores plus mask
  const double p0 = std::exp(s0) / (std::exp(s0) + std::exp(s1));
  ExpectNear(out->at(0), Shape{1, 1, 1}, {float(p0 * 10 + (1 - p0) * 20)}, 1e-4);
}

TEST(KilnOpsTest, AttentionDefaultScaleMatchesNaiveFormula) {
  std::mt19937 rng(3);
  const int64_t b = 2, s = 3, t_len = 4, d = 4, dv = 2;
  std::vector<float> q = RandomValues<float>(b * s * d, rng);
  std::vector<float> k = RandomValues<float>(b * t_len * d, rng);
  std::vector<float> v = RandomValues<float>(b * t_len * dv, rng);
  OpTest t = Kiln("Attention");
  t.Input(MakeTensor<float>({b, s, d}, q))
      .Input(MakeTensor<float>({b, t_len, d}, k))
      .Input(MakeTensor<float>({b, t_len, dv}, v));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<float> want;
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> w(static_cast<size_t>(t_len));
      double total = 0;
      for (int64_t j = 0; j < t_len; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q[size_t((bi * s + i) * d + c)] * k[size_t((bi * t_len + j) * d + c)];
        w[size_t(j)] = std::exp(dot / 2.0);  // 1/sqrt(4)
        total += w[size_t(j)];
      }
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < t_len; ++j)
          acc += w[size_t(j)] / total * v[size_t((bi * t_len + j) * dv + c)];
        want.push_back(float(acc));
      }
    }
  }
  ExpectNear(out->at(0), Shape{b, s, dv}, want, 1e-5);
}

TEST(KilnOpsTest, AttentionRejectsUnequalLeadingDims) {
  OpTest t = Kiln("Attention");
  t.Input(MakeTensor<float>({2, 1, 1}, {1, 1}))
      .Input(MakeTensor<float>({1, 1, 1}, {1}))
      .Input(MakeTensor<float>({1, 1, 1}, {1}));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("equal leading dims"), std::string::npos);
}

// --- Quantized ops ------------------------------------------------------------------------------

TEST(KilnOpsTest, QuantizedOpsHaveOneReferenceRowEach) {
  for (std::string_view op : {kQConvOp, kQMatMulOp, kQAddOp}) {
    int rows = 0;
    for (const KernelDef& def : KernelRegistry::Global().defs()) {
      if (def.provider != "ref" || def.domain != kKilnDomain || def.op_type != op) continue;
      ++rows;
      EXPECT_NE(def.types & TypeBit(DataType::kUint8), 0u) << op;
      EXPECT_NE(def.types & TypeBit(DataType::kInt8), 0u) << op;
    }
    EXPECT_EQ(rows, 1) << op;
  }
}

TEST(KilnOpsTest, QConvRequantizesWithBiasAndRelu) {
  // 1x1 conv of X [1,1,1,4] (UINT8, scale 0.5, zp 10) with two output channels, W = [2, -3]
  // (scales 0.25 and 1), INT32 bias [4, 0], y_scale 0.5, y_zp 3, Relu:
  //   acc0 = 2 * (x - 10) + 4, acc1 = -3 * (x - 10)
  //   y0 = sat(rne(acc0 * 0.5 * 0.25 / 0.5) + 3) = sat(rne(acc0 / 4) + 3)   (acc0 / 4 >= 0 kept)
  //   y1 = sat(rne(max(acc1 * 0.5 * 1 / 0.5, 0)) + 3) = sat(max(acc1, 0) + 3)
  OpTest t = Kiln("QConv");
  t.Input(MakeTensor<uint8_t>({1, 1, 1, 4}, {10, 13, 5, 200}))
      .ConstInput(MakeTensor<float>({}, {0.5f}))
      .ConstInput(MakeTensor<uint8_t>({}, {10}))
      .ConstInput(MakeTensor<int8_t>({2, 1, 1, 1}, {2, -3}))
      .ConstInput(MakeTensor<float>({2}, {0.25f, 1.0f}))
      .ConstInput(MakeTensor<int8_t>({2}, {0, 0}))
      .ConstInput(MakeTensor<float>({}, {0.5f}))
      .ConstInput(MakeTensor<uint8_t>({}, {3}))
      .ConstInput(MakeTensor<int32_t>({2}, {4, 0}))
      .Attr(Attribute::String("activation", "Relu"));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // acc0 = 4, 10, -6, 384 -> /4 = 1, 2.5, -1.5, 96 -> relu 1, 2.5, 0, 96 -> rne 1, 2, 0, 96
  // acc1 = 0, -9, 15, -570 -> relu 0, 0, 15, 0
  EXPECT_EQ(ToVector<uint8_t>(out->at(0)), (std::vector<uint8_t>{4, 5, 3, 99, 3, 3, 18, 3}));
}

TEST(KilnOpsTest, QMatMulWithoutOutputScaleIsFp32WithFp32Bias) {
  // A [1,2] INT8 (scale 0.5, zp 0) x B [2,1] = [1, 2] (scale 2): y = (a0 + 2 a1) * 1 + bias 0.25.
  OpTest t = Kiln("QMatMul");
  t.Input(MakeTensor<int8_t>({1, 2}, {3, -4}))
      .ConstInput(MakeTensor<float>({}, {0.5f}))
      .ConstInput(MakeTensor<int8_t>({}, {0}))
      .ConstInput(MakeTensor<int8_t>({2, 1}, {1, 2}))
      .ConstInput(MakeTensor<float>({}, {2.0f}))
      .OmittedInput()
      .OmittedInput()
      .OmittedInput()
      .ConstInput(MakeTensor<float>({1}, {0.25f}));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(out->at(0), Shape{1, 1}, {-4.75f});
}

TEST(KilnOpsTest, QAddDequantizesAddsAndRequantizes) {
  // a: scale 0.5 zp 2; b: scale 0.25 zp 0; y: scale 1 zp 1, Relu.
  // a = 2, 5, 0 -> 0, 1.5, -1; b = 2, 2, 1 -> 0.5, 0.5, 0.25; sum 0.5, 2, -0.75
  // relu 0.5, 2, 0 -> rne 0, 2, 0 -> + 1 = 1, 3, 1
  OpTest t = Kiln("QAdd");
  t.Input(MakeTensor<uint8_t>({3}, {2, 5, 0}))
      .ConstInput(MakeTensor<float>({}, {0.5f}))
      .ConstInput(MakeTensor<uint8_t>({}, {2}))
      .Input(MakeTensor<uint8_t>({3}, {2, 2, 1}))
      .ConstInput(MakeTensor<float>({}, {0.25f}))
      .ConstInput(MakeTensor<uint8_t>({}, {0}))
      .ConstInput(MakeTensor<float>({}, {1.0f}))
      .ConstInput(MakeTensor<uint8_t>({}, {1}))
      .Attr(Attribute::String("activation", "Relu"));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(ToVector<uint8_t>(out->at(0)), (std::vector<uint8_t>{1, 3, 1}));
}

// --- Blocked channel layout ----------------------------------------------------------------------

TEST(KilnOpsTest, BlockedLayoutOpsHaveOneReferenceRowForVersion1) {
  for (std::string_view op : {kReorderToBlockedOp, kReorderFromBlockedOp}) {
    int rows = 0;
    for (const KernelDef& def : KernelRegistry::Global().defs()) {
      if (def.provider != "ref" || def.domain != kKilnDomain || def.op_type != op) continue;
      ++rows;
      EXPECT_EQ(def.since_version, 1) << op;
      EXPECT_NE(def.types & TypeBit(DataType::kFloat32), 0u) << op;
    }
    EXPECT_EQ(rows, 1) << op;
  }
}

TEST(KilnOpsTest, ReorderToBlockedInterleavesChannelsAndZeroPads) {
  // x[c, s] = 2c + s, C = 3, block 2: element (c, s) goes to ((c/2)*2 + s)*2 + c%2; the fourth
  // channel is padding.
  OpTest t = Kiln("ReorderToBlocked");
  t.Input(MakeTensor<float>({1, 3, 1, 2}, {0, 1, 2, 3, 4, 5})).Attr(Attribute::Int("block", 2));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(out->at(0), Shape{1, 2, 1, 2, 2}, {0, 2, 1, 3, 4, 0, 5, 0}, 0);
}

TEST(KilnOpsTest, ReorderFromBlockedDropsThePadding) {
  OpTest t = Kiln("ReorderFromBlocked");
  t.Input(MakeTensor<float>({1, 2, 1, 2, 2}, {0, 2, 1, 3, 4, 9, 5, 9}))
      .Attr(Attribute::Int("block", 2))
      .Attr(Attribute::Int("channels", 3));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(out->at(0), Shape{1, 3, 1, 2}, {0, 1, 2, 3, 4, 5}, 0);
}

TEST(KilnOpsTest, ReorderFromBlockedChecksTheBlockCount) {
  OpTest t = Kiln("ReorderFromBlocked");
  t.Input(MakeTensor<float>({1, 1, 1, 1, 2}, {1, 2}))
      .Attr(Attribute::Int("block", 2))
      .Attr(Attribute::Int("channels", 3));  // needs 2 blocks
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(KilnOpsTest, ReorderToBlockedNeedsABlock) {
  OpTest t = Kiln("ReorderToBlocked");
  t.Input(MakeTensor<float>({1, 1, 1, 1}, {1}));
  EXPECT_FALSE(t.Run().ok());
  OpTest zero = Kiln("ReorderToBlocked");
  zero.Input(MakeTensor<float>({1, 1, 1, 1}, {1})).Attr(Attribute::Int("block", 0));
  EXPECT_FALSE(zero.Run().ok());
}

TEST(KilnOpsTest, FusedConvWithBlockedOutputAndInput) {
  // The FusedConvAddsBiasResidualThenRelu case without Z: ch0 relu(x + 0.5), ch1 relu(-x), with Y
  // blocked by 2 (the two channels of each pixel adjacent).
  OpTest t = Kiln("FusedConv");
  t.Input(MakeTensor<float>({1, 1, 2, 2}, {1, -2, 3, -4}))
      .ConstInput(MakeTensor<float>({2, 1, 1, 1}, {1, -1}))
      .ConstInput(MakeTensor<float>({2}, {0.5f, 0}))
      .Attr(Attribute::String("activation", "Relu"))
      .Attr(Attribute::Int("y_block", 2));
  Result<std::vector<OwnedTensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(out->at(0), Shape{1, 1, 2, 2, 2}, {1.5f, 0, 0, 2, 3.5f, 0, 0, 4});

  // Blocked X (one channel padded to 2; the padding lane is ignored as W has one input channel)
  // and plain Y: Y = 2x.
  OpTest u = Kiln("FusedConv");
  u.Input(MakeTensor<float>({1, 1, 1, 2, 2}, {1, 0, -3, 0}))
      .ConstInput(MakeTensor<float>({1, 1, 1, 1}, {2}))
      .Attr(Attribute::Int("x_block", 2));
  Result<std::vector<OwnedTensor>> out2 = u.Run();
  ASSERT_TRUE(out2.ok()) << out2.status().ToString();
  ExpectNear(out2->at(0), Shape{1, 1, 1, 2}, {2, -6});
}

}  // namespace
}  // namespace kiln::ref::testing
