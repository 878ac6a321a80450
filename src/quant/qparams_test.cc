// SPDX-License-Identifier: Apache-2.0
// Tests for the quantization parameters and scalar math (qparams.h, tensor/quantize_math.h):
// hand-derived scales and zero points (ranges widened to contain 0, half-to-even zero points,
// degenerate ranges), QuantizeValue against a brute-force nearest-level search and against the
// reference QuantizeLinear kernel run in a Session, per-channel and per-tensor weights, INT32
// biases.

#include "quant/qparams.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "opt/opt_test_util.h"
#include "runtime/session.h"
#include "tensor/quantize_math.h"

namespace kiln::quant {
namespace {

using opt::testing::FloatTensor;
using opt::testing::TestGraph;

TEST(ActivationParamsTest, AsymmetricHandDerived) {
  // [-0.5, 6]: scale 6.5 / 255; zero point round(0.5 / scale) = round(19.6) = 20.
  ActivationParams p = ComputeActivationParams(-0.5f, 6.0f, ActivationType::kUint8).value();
  EXPECT_FLOAT_EQ(p.scale, 6.5f / 255.0f);
  EXPECT_EQ(p.zero_point, 20);
  // A range not containing 0 is widened to it: [2, 10] -> [0, 10]; [-10, -2] -> [-10, 0].
  p = ComputeActivationParams(2.0f, 10.0f, ActivationType::kUint8).value();
  EXPECT_FLOAT_EQ(p.scale, 10.0f / 255.0f);
  EXPECT_EQ(p.zero_point, 0);
  p = ComputeActivationParams(-10.0f, -2.0f, ActivationType::kUint8).value();
  EXPECT_FLOAT_EQ(p.scale, 10.0f / 255.0f);
  EXPECT_EQ(p.zero_point, 255);
  // Zero points round half to even: scale 1, -min = 2.5 -> 2, 3.5 -> 4.
  EXPECT_EQ(ComputeActivationParams(-2.5f, 252.5f, ActivationType::kUint8)->zero_point, 2);
  EXPECT_EQ(ComputeActivationParams(-3.5f, 251.5f, ActivationType::kUint8)->zero_point, 4);
}

TEST(ActivationParamsTest, SymmetricAndDegenerate) {
  ActivationParams p = ComputeActivationParams(-3.0f, 1.27f, ActivationType::kInt8).value();
  EXPECT_FLOAT_EQ(p.scale, 3.0f / 127.0f);
  EXPECT_EQ(p.zero_point, 0);
  EXPECT_EQ(p.type, ActivationType::kInt8);
  for (ActivationType t : {ActivationType::kUint8, ActivationType::kInt8}) {
    p = ComputeActivationParams(0.0f, 0.0f, t).value();
    EXPECT_EQ(p.scale, 1.0f);
    EXPECT_EQ(p.zero_point, 0);
    p = ComputeActivationParams(0.0f, 1e-40f, t).value();  // a denormal scale
    EXPECT_EQ(p.scale, 1.0f);
  }
  EXPECT_FALSE(ComputeActivationParams(0.0f, std::nanf(""), ActivationType::kUint8).ok());
  EXPECT_FALSE(ComputeActivationParams(-INFINITY, 1.0f, ActivationType::kUint8).ok());
  // A reversed range is the same range.
  EXPECT_EQ(ComputeActivationParams(6.0f, -0.5f, ActivationType::kUint8)->zero_point, 20);
}

// The nearest level of [lo, hi] to x / scale + zp, ties to the even level: an independent
// brute-force search over every level.
template <typename Q>
int BruteForceQuantize(float x, float scale, int zp) {
  const double v = static_cast<double>(std::nearbyint(x / scale)) + zp;  // ONNX: round, then add
  int best = std::numeric_limits<Q>::min();
  for (int q = std::numeric_limits<Q>::min(); q <= std::numeric_limits<Q>::max(); ++q) {
    const double d = std::fabs(v - q), bd = std::fabs(v - best);
    if (d < bd || (d == bd && q % 2 == 0)) best = q;
  }
  return best;
}

TEST(QmathTest, QuantizeMatchesBruteForceAndReferenceKernel) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-400, 400);
  std::vector<float> xs = {0.0f,    0.5f,     1.5f,   2.5f,   -0.5f,   -1.5f,  -2.5f,
                           1000.0f, -1000.0f, 127.5f, 128.5f, -128.5f, 254.5f, 255.5f};
  for (int i = 0; i < 500; ++i) xs.push_back(dist(rng));
  const float scale = 1.0f;
  for (float x : xs) {
    EXPECT_EQ(QuantizeValue<uint8_t>(x, scale, 3), BruteForceQuantize<uint8_t>(x, scale, 3)) << x;
    EXPECT_EQ(QuantizeValue<int8_t>(x, scale, -2), BruteForceQuantize<int8_t>(x, scale, -2)) << x;
  }
  // Against the reference QuantizeLinear kernel, at a scale that is not a power of two.
  const float s = 0.37f;
  for (int zp : {0, 17, 255}) {
    TestGraph t(13);
    const int64_t n = static_cast<int64_t>(xs.size());
    const int x = t.Input("x", {n});
    OwnedTensor zp_t = OwnedTensor::Allocate(DataType::kUint8, Shape{}).value();
    zp_t.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    const int y = t.Op("QuantizeLinear", {x, t.Scalar("s", s), t.Const("zp", std::move(zp_t))}, {},
                       {{n}}, DataType::kUint8);
    t.Output(y);
    SessionOptions so;
    so.kernel_provider = "ref";
    std::unique_ptr<Session> session = Session::Create(t.Build(), so).value();
    OwnedTensor in = FloatTensor(Shape{n}, xs);
    std::vector<Tensor> inputs = {in.view()};
    std::vector<OwnedTensor> out = session->Run(inputs).value();
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(out[0].data<uint8_t>()[i],
                QuantizeValue<uint8_t>(xs[static_cast<size_t>(i)], s, zp))
          << xs[static_cast<size_t>(i)];
    }
  }
  EXPECT_EQ(QuantizeValue<uint8_t>(std::nanf(""), 1.0f, 9), 9);
  EXPECT_FLOAT_EQ(DequantizeValue<uint8_t>(200, 0.5f, 100), 50.0f);
  EXPECT_FLOAT_EQ(DequantizeValue<int8_t>(-128, 0.25f, 0), -32.0f);
}

TEST(QuantizeWeightTest, PerChannelAndPerTensor) {
  // [2 channels, 3]: channel 1 is all zero (scale 1, values 0).
  OwnedTensor w = FloatTensor(Shape{2, 3}, {1.0f, -2.0f, 0.5f, 0.0f, 0.0f, 0.0f});
  QuantizedWeight q = QuantizeWeight(w.view(), 0, true).value();
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_FLOAT_EQ(q.scales[0], 2.0f / 127.0f);
  EXPECT_EQ(q.scales[1], 1.0f);
  const int8_t* v = q.values.data<int8_t>();
  EXPECT_EQ(v[1], -127);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(v[i] * q.scales[0], w.data<float>()[i], q.scales[0] / 2 + 1e-7);
    EXPECT_EQ(v[3 + i], 0);
  }
  // Per channel along axis 1 of [3, 2] (MatMul's B): column maxima 4 and 0.1.
  OwnedTensor b = FloatTensor(Shape{3, 2}, {4.0f, 0.1f, -1.0f, 0.05f, 2.0f, -0.1f});
  q = QuantizeWeight(b.view(), 1, true).value();
  ASSERT_EQ(q.scales.size(), 2u);
  EXPECT_FLOAT_EQ(q.scales[0], 4.0f / 127.0f);
  EXPECT_FLOAT_EQ(q.scales[1], 0.1f / 127.0f);
  EXPECT_EQ(q.values.data<int8_t>()[1], 127);
  EXPECT_EQ(q.values.data<int8_t>()[5], -127);
  // Per tensor: one scale from the global maximum; the small column loses its resolution.
  q = QuantizeWeight(b.view(), 1, false).value();
  ASSERT_EQ(q.scales.size(), 1u);
  EXPECT_FLOAT_EQ(q.scales[0], 4.0f / 127.0f);
  EXPECT_EQ(q.values.data<int8_t>()[3], 2);  // 0.05 / (4 / 127) = 1.59 -> 2
  // Brute force on random weights: every value within half a step, |q| <= 127, max |q| = 127.
  std::mt19937 rng(3);
  OwnedTensor r = opt::testing::RandomTensor(Shape{5, 4, 3, 3}, rng, -3, 3);
  q = QuantizeWeight(r.view(), 0, true).value();
  for (int c = 0; c < 5; ++c) {
    int max_q = 0;
    for (int e = 0; e < 36; ++e) {
      const int qv = q.values.data<int8_t>()[c * 36 + e];
      max_q = std::max(max_q, std::abs(qv));
      EXPECT_LE(std::abs(qv), 127);
      EXPECT_LE(std::fabs(qv * q.scales[c] - r.data<float>()[c * 36 + e]),
                q.scales[c] / 2 * (1 + 1e-5));
    }
    EXPECT_EQ(max_q, 127);
  }
  EXPECT_LE(q.max_abs_error, *std::max_element(q.scales.begin(), q.scales.end()) / 2 * (1 + 1e-5));
  EXPECT_FALSE(QuantizeWeight(r.view(), 4, true).ok());
}

TEST(QuantizeWeightTest, SevenBitRangeForCpusWithoutVnni) {
  // qmax 64: values in [-64, 64], the channel maximum maps to 64, every value within half a step.
  std::mt19937 rng(4);
  OwnedTensor r = opt::testing::RandomTensor(Shape{6, 8, 3, 3}, rng, -2, 2);
  QuantizedWeight q = QuantizeWeight(r.view(), 0, true, kWeightMax7Bit).value();
  ASSERT_EQ(q.scales.size(), 6u);
  for (int c = 0; c < 6; ++c) {
    float max_abs = 0;
    int max_q = 0;
    for (int e = 0; e < 72; ++e) {
      max_abs = std::max(max_abs, std::fabs(r.data<float>()[c * 72 + e]));
      const int qv = q.values.data<int8_t>()[c * 72 + e];
      max_q = std::max(max_q, std::abs(qv));
      EXPECT_LE(std::fabs(qv * q.scales[c] - r.data<float>()[c * 72 + e]),
                q.scales[c] / 2 * (1 + 1e-5));
    }
    EXPECT_EQ(max_q, 64);
    EXPECT_FLOAT_EQ(q.scales[c], max_abs / 64.0f);
  }
  // Twice the step of 8 bits (64 vs 127 levels a side), so about twice the error.
  QuantizedWeight q8 = QuantizeWeight(r.view(), 0, true, kWeightMax8Bit).value();
  EXPECT_GT(q.max_abs_error, 1.5f * q8.max_abs_error);
  for (int bad : {0, 128, -1}) {
    Result<QuantizedWeight> b = QuantizeWeight(r.view(), 0, true, bad);
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(QuantizeBiasTest, ScalesAndSaturation) {
  OwnedTensor b = FloatTensor(Shape{2}, {1.0f, -2.0f});
  OwnedTensor q = QuantizeBias(b.view(), 0.5f, {0.25f, 0.5f}).value();
  EXPECT_EQ(q.dtype(), DataType::kInt32);
  EXPECT_EQ(q.data<int32_t>()[0], 8);   // 1 / 0.125
  EXPECT_EQ(q.data<int32_t>()[1], -8);  // -2 / 0.25
  OwnedTensor big = FloatTensor(Shape{2}, {1e10f, -1e10f});
  q = QuantizeBias(big.view(), 1e-3f, {1e-3f}).value();
  EXPECT_EQ(q.data<int32_t>()[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(q.data<int32_t>()[1], std::numeric_limits<int32_t>::min());
  EXPECT_FALSE(QuantizeBias(b.view(), 1.0f, {1.0f, 1.0f, 1.0f}).ok());
}

}  // namespace
}  // namespace kiln::quant
