// SPDX-License-Identifier: Apache-2.0
// Tests for the reference quantization kernels (quantize.cc): hand-checked Quantize/Dequantize
// (per tensor and per axis, rounding half to even, saturation), DynamicQuantizeLinear,
// MatMulInteger and QLinearMatMul with per-row/per-column zero points, ConvInteger and
// QLinearConv against an independent naive convolution, and the error paths.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

TEST(QuantizeLinearTest, PerTensorRoundsHalfToEvenAndSaturates) {
  // x / 2 + 128: 0 -> 128; 3/2 = 1.5 -> 2 -> 130; 5/2 = 2.5 -> 2 -> 130; -3/2 = -1.5 -> -2 ->
  // 126; 1000/2 + 128 = 628 -> 255; -1000/2 + 128 = -372 -> 0.
  ExpectTensor<uint8_t>(OpTest("QuantizeLinear", 13)
                            .Input(MakeTensor<float>({6}, {0, 3, 5, -3, 1000, -1000}))
                            .Input(MakeTensor<float>({}, {2}))
                            .Input(MakeTensor<uint8_t>({}, {128}))
                            .RunOne(),
                        {6}, {128, 130, 130, 126, 255, 0});
  // INT8 output through the zero point's type; no zero point means UINT8 with zp 0.
  ExpectTensor<int8_t>(OpTest("QuantizeLinear", 10)
                           .Input(MakeTensor<float>({3}, {-300, 10, 7}))
                           .Input(MakeTensor<float>({}, {1}))
                           .Input(MakeTensor<int8_t>({}, {-1}))
                           .RunOne(),
                       {3}, {-128, 9, 6});
  ExpectTensor<uint8_t>(OpTest("QuantizeLinear", 13)
                            .Input(MakeTensor<int32_t>({2}, {-5, 40}))
                            .Input(MakeTensor<float>({}, {4}))
                            .RunOne(),
                        {2}, {0, 10});
}

TEST(QuantizeLinearTest, PerAxis) {
  // x [2, 2] quantized along axis 0 with scales {1, 10} and zero points {0, 100}:
  //   row 0: 5/1 + 0 = 5, 7/1 = 7; row 1: 50/10 + 100 = 105, -20/10 + 100 = 98.
  ExpectTensor<uint8_t>(OpTest("QuantizeLinear", 13)
                            .Attr(IntAttr("axis", 0))
                            .Input(MakeTensor<float>({2, 2}, {5, 7, 50, -20}))
                            .Input(MakeTensor<float>({2}, {1, 10}))
                            .Input(MakeTensor<uint8_t>({2}, {0, 100}))
                            .RunOne(),
                        {2, 2}, {5, 7, 105, 98});
  // Default axis 1 on [1, 2, 2]: channel 0 scale 2, channel 1 scale 4 (zp 0):
  //   {2/2, 4/2, 8/4, 12/4} = {1, 2, 2, 3}.
  ExpectTensor<uint8_t>(OpTest("QuantizeLinear", 13)
                            .Input(MakeTensor<float>({1, 2, 2}, {2, 4, 8, 12}))
                            .Input(MakeTensor<float>({2}, {2, 4}))
                            .Input(MakeTensor<uint8_t>({2}, {0, 0}))
                            .RunOne(),
                        {1, 2, 2}, {1, 2, 2, 3});
}

TEST(QuantizeLinearTest, Errors) {
  auto x = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  // Per-axis parameters before opset 13.
  ExpectInvalid(
      OpTest("QuantizeLinear", 10).Input(x).Input(MakeTensor<float>({2}, {1, 1})).RunStatus(),
      {"QuantizeLinear", "y_scale", "scalar"});
  ExpectInvalid(OpTest("QuantizeLinear", 10)
                    .Attr(IntAttr("axis", 0))
                    .Input(x)
                    .Input(MakeTensor<float>({}, {1}))
                    .Create(),
                {"QuantizeLinear", "axis", "opset 13"});
  // Wrong per-axis length, axis out of range, zero point count and dtype.
  ExpectInvalid(
      OpTest("QuantizeLinear", 13).Input(x).Input(MakeTensor<float>({3}, {1, 1, 1})).RunStatus(),
      {"QuantizeLinear", "y_scale"});
  ExpectInvalid(OpTest("QuantizeLinear", 13)
                    .Attr(IntAttr("axis", 2))
                    .Input(x)
                    .Input(MakeTensor<float>({2}, {1, 1}))
                    .RunStatus(),
                {"QuantizeLinear", "axis 2"});
  ExpectInvalid(OpTest("QuantizeLinear", 13)
                    .Input(x)
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<uint8_t>({2}, {1, 1}))
                    .RunStatus(),
                {"QuantizeLinear", "y_zero_point"});
  ExpectInvalid(OpTest("QuantizeLinear", 13)
                    .Input(x)
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<int32_t>({}, {1}))
                    .RunStatus(),
                {"QuantizeLinear", "y_zero_point", "UINT8 or INT8"});
  ExpectInvalid(
      OpTest("QuantizeLinear", 13).Input(x).Input(MakeTensor<double>({}, {1})).RunStatus(),
      {"QuantizeLinear", "y_scale", "FP32"});
  ExpectInvalid(OpTest("QuantizeLinear", 13)
                    .Input(MakeTensor<double>({1}, {1}))
                    .Input(MakeTensor<float>({}, {1}))
                    .Create(),
                {"QuantizeLinear", "FP64"});
}

TEST(DequantizeLinearTest, PerTensorAndPerAxis) {
  // (x - 10) * 0.5: {10, 20, 0, 255} -> {0, 5, -5, 122.5}.
  ExpectTensor<float>(OpTest("DequantizeLinear", 10)
                          .Input(MakeTensor<uint8_t>({4}, {10, 20, 0, 255}))
                          .Input(MakeTensor<float>({}, {0.5f}))
                          .Input(MakeTensor<uint8_t>({}, {10}))
                          .RunOne(),
                      {4}, {0, 5, -5, 122.5f});
  // INT8 per axis 1 of [1, 2, 2]: channel 0 (x - 1) * 2, channel 1 (x + 1) * 3:
  //   {(3-1)*2, (-1-1)*2, (0+1)*3, (-128+1)*3} = {4, -4, 3, -381}.
  ExpectTensor<float>(OpTest("DequantizeLinear", 13)
                          .Input(MakeTensor<int8_t>({1, 2, 2}, {3, -1, 0, -128}))
                          .Input(MakeTensor<float>({2}, {2, 3}))
                          .Input(MakeTensor<int8_t>({2}, {1, -1}))
                          .RunOne(),
                      {1, 2, 2}, {4, -4, 3, -381});
  // INT32 with zero point 0 (or none): x * 0.25.
  ExpectTensor<float>(OpTest("DequantizeLinear", 13)
                          .Input(MakeTensor<int32_t>({2}, {-2147483647 - 1, 8}))
                          .Input(MakeTensor<float>({}, {0.25f}))
                          .RunOne(),
                      {2}, {-536870912.0f, 2});
}

TEST(DequantizeLinearTest, Errors) {
  ExpectInvalid(OpTest("DequantizeLinear", 13)
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<int32_t>({}, {3}))
                    .RunStatus(),
                {"DequantizeLinear", "must be 0"});
  ExpectInvalid(OpTest("DequantizeLinear", 13)
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<int8_t>({}, {3}))
                    .RunStatus(),
                {"DequantizeLinear", "x_zero_point", "INT8"});
  ExpectInvalid(OpTest("DequantizeLinear", 13)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({}, {1}))
                    .Create(),
                {"DequantizeLinear", "FP32"});
  ExpectInvalid(OpTest("DequantizeLinear", 13)
                    .Attr(IntAttr("axis", 0))
                    .Input(MakeTensor<uint8_t>({2}, {1, 1}))
                    .Input(MakeTensor<float>({2, 1}, {1, 1}))
                    .RunStatus(),
                {"DequantizeLinear", "x_scale"});
}

TEST(DynamicQuantizeLinearTest, HandChecked) {
  // x = {0, 2, -3, 255 - 3 = 252}: range [-3, 252], scale = 255 / 255 = 1, zp = round(3) = 3,
  // y = round(x) + 3 = {3, 5, 0, 255}.
  Result<std::vector<OwnedTensor>> r = OpTest("DynamicQuantizeLinear", 11)
                                           .Input(MakeTensor<float>({4}, {0, 2, -3, 252}))
                                           .Outputs({true, true, true})
                                           .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<uint8_t>(r->at(0), {4}, {3, 5, 0, 255});
  ExpectTensor<float>(r->at(1), {}, {1.0f});
  ExpectTensor<uint8_t>(r->at(2), {}, {3});
  // All zeros: scale 0, zero point 0, y 0 (no division by zero).
  r = OpTest("DynamicQuantizeLinear", 11)
          .Input(MakeTensor<float>({2}, {0, 0}))
          .Outputs({true, true, true})
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<uint8_t>(r->at(0), {2}, {0, 0});
  ExpectTensor<float>(r->at(1), {}, {0.0f});
  // Positive only: range [0, 51], scale 0.2, zp 0, y = round(x / 0.2) = {0, 255, 50}.
  r = OpTest("DynamicQuantizeLinear", 11)
          .Input(MakeTensor<float>({3}, {0, 51, 10}))
          .Outputs({true, true, true})
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<uint8_t>(r->at(0), {3}, {0, 255, 50});
  ExpectTensor<uint8_t>(r->at(2), {}, {0});
  ExpectInvalid(OpTest("DynamicQuantizeLinear", 11).Input(MakeTensor<double>({1}, {1})).Create(),
                {"DynamicQuantizeLinear", "FP64"});
}

TEST(MatMulIntegerTest, ZeroPointsPerTensorRowColumn) {
  // A [2,2] uint8 {1,2,3,4} with a_zp per row {1, 3} -> {0,1,0,1};
  // B [2,2] int8 {5,6,7,8} with b_zp per column {5, 6} -> {0,0,2,2};
  // A' x B' = [[0*0+1*2, 0*0+1*2], [0*0+1*2, ...]] = {2,2,2,2}.
  ExpectTensor<int32_t>(OpTest("MatMulInteger", 10)
                            .Input(MakeTensor<uint8_t>({2, 2}, {1, 2, 3, 4}))
                            .Input(MakeTensor<int8_t>({2, 2}, {5, 6, 7, 8}))
                            .Input(MakeTensor<uint8_t>({2}, {1, 3}))
                            .Input(MakeTensor<int8_t>({2}, {5, 6}))
                            .RunOne(),
                        {2, 2}, {2, 2, 2, 2});
  // No zero points: [255, 255] . [[-128], [127]] = -32640 + 32385 = -255.
  ExpectTensor<int32_t>(OpTest("MatMulInteger", 10)
                            .Input(MakeTensor<uint8_t>({1, 2}, {255, 255}))
                            .Input(MakeTensor<int8_t>({2, 1}, {-128, 127}))
                            .RunOne(),
                        {1, 1}, {-255});
  // Batched A [2,1,1] x B [1,1]: {3*2, 4*2} = {6, 8}.
  ExpectTensor<int32_t>(OpTest("MatMulInteger", 10)
                            .Input(MakeTensor<int8_t>({2, 1, 1}, {3, 4}))
                            .Input(MakeTensor<int8_t>({1, 1}, {2}))
                            .RunOne(),
                        {2, 1, 1}, {6, 8});
}

TEST(MatMulIntegerTest, Errors) {
  ExpectInvalid(OpTest("MatMulInteger", 10)
                    .Input(MakeTensor<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6}))
                    .Input(MakeTensor<uint8_t>({2, 1}, {1, 2}))
                    .RunStatus(),
                {"MatMulInteger", "inner dimensions"});
  ExpectInvalid(OpTest("MatMulInteger", 10)
                    .Input(MakeTensor<uint8_t>({1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({3}, {1, 2, 3}))
                    .RunStatus(),
                {"MatMulInteger", "a_zero_point"});
  ExpectInvalid(OpTest("MatMulInteger", 10)
                    .Input(MakeTensor<uint8_t>({1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({1, 1}, {1}))
                    .Input(MakeTensor<int8_t>({}, {1}))
                    .RunStatus(),
                {"MatMulInteger", "a_zero_point", "UINT8"});
  ExpectInvalid(OpTest("MatMulInteger", 10)
                    .Input(MakeTensor<int32_t>({1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({1, 1}, {1}))
                    .Create(),
                {"MatMulInteger", "INT32"});
}

TEST(QLinearMatMulTest, HandChecked) {
  // a = {10, 12} - 10 = {0, 2}; b = {[1], [5]} - 1 = {[0], [4]}; acc = 8;
  // y = round(8 * 0.5 * 0.25 / 0.1) + 3 = round(10) + 3 = 13.
  ExpectTensor<uint8_t>(OpTest("QLinearMatMul", 10)
                            .Input(MakeTensor<uint8_t>({1, 2}, {10, 12}))
                            .Input(MakeTensor<float>({}, {0.5f}))
                            .Input(MakeTensor<uint8_t>({}, {10}))
                            .Input(MakeTensor<uint8_t>({2, 1}, {1, 5}))
                            .Input(MakeTensor<float>({}, {0.25f}))
                            .Input(MakeTensor<uint8_t>({}, {1}))
                            .Input(MakeTensor<float>({}, {0.1f}))
                            .Input(MakeTensor<uint8_t>({}, {3}))
                            .RunOne(),
                        {1, 1}, {13});
  ExpectInvalid(OpTest("QLinearMatMul", 10)
                    .Input(MakeTensor<uint8_t>({1, 2}, {10, 12}))
                    .Input(MakeTensor<float>({}, {0.5f}))
                    .Input(MakeTensor<uint8_t>({}, {10}))
                    .Input(MakeTensor<uint8_t>({2, 1}, {1, 5}))
                    .Input(MakeTensor<float>({}, {0.25f}))
                    .Input(MakeTensor<uint8_t>({}, {1}))
                    .Input(MakeTensor<float>({2}, {0.1f, 0.1f}))
                    .Input(MakeTensor<uint8_t>({}, {3}))
                    .RunStatus(),
                {"QLinearMatMul", "y_scale"});
  ExpectInvalid(OpTest("QLinearMatMul", 10)
                    .Input(MakeTensor<uint8_t>({1, 2}, {10, 12}))
                    .Input(MakeTensor<float>({}, {0.5f}))
                    .Create(),
                {"QLinearMatMul", "missing"});
}

// Naive 2-D convolution with explicit zero-point padding: the padded cells hold x_zp.
std::vector<int32_t> NaiveConv2d(const std::vector<int32_t>& x, int64_t c, int64_t h, int64_t w,
                                 int32_t xzp, const std::vector<int32_t>& k, int64_t m, int64_t kh,
                                 int64_t kw, const std::vector<int32_t>& wzp, int64_t pad,
                                 int64_t stride, int64_t* oh, int64_t* ow) {
  *oh = (h + 2 * pad - kh) / stride + 1;
  *ow = (w + 2 * pad - kw) / stride + 1;
  std::vector<int32_t> y;
  for (int64_t om = 0; om < m; ++om) {
    for (int64_t i = 0; i < *oh; ++i) {
      for (int64_t j = 0; j < *ow; ++j) {
        int64_t s = 0;
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t a = 0; a < kh; ++a) {
            for (int64_t b = 0; b < kw; ++b) {
              const int64_t yy = i * stride + a - pad, xx = j * stride + b - pad;
              const bool inside = yy >= 0 && yy < h && xx >= 0 && xx < w;
              const int32_t xv = inside ? x[static_cast<size_t>((ci * h + yy) * w + xx)] : xzp;
              const int32_t kv = k[static_cast<size_t>(((om * c + ci) * kh + a) * kw + b)];
              s += int64_t{xv - xzp} * (kv - wzp[static_cast<size_t>(om)]);
            }
          }
        }
        y.push_back(static_cast<int32_t>(s));
      }
    }
  }
  return y;
}

TEST(ConvIntegerTest, HandChecked) {
  // x 3x3 {1..9} - zp 1 = {0..8}; w 2x2 all 1 (zp 0): sums of 2x2 windows of {0..8}:
  //   0+1+3+4 = 8, 1+2+4+5 = 12, 3+4+6+7 = 20, 4+5+7+8 = 24.
  ExpectTensor<int32_t>(OpTest("ConvInteger", 10)
                            .Input(MakeTensor<uint8_t>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}))
                            .Input(MakeTensor<uint8_t>({1, 1, 2, 2}, {1, 1, 1, 1}))
                            .Input(MakeTensor<uint8_t>({}, {1}))
                            .RunOne(),
                        {1, 1, 2, 2}, {8, 12, 20, 24});
}

TEST(ConvIntegerTest, RandomAgainstNaive) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 10; ++iter) {
    const int64_t c = 2, h = 5, w = 4, m = 3, kh = 2, kw = 3, pad = iter % 2, stride = 1 + iter % 2;
    std::vector<uint8_t> xv = RandomValues<uint8_t>(c * h * w, rng, 0, 255);
    std::vector<int8_t> kv = RandomValues<int8_t>(m * c * kh * kw, rng, -128, 127);
    const uint8_t xzp = static_cast<uint8_t>(rng() % 256);
    std::vector<int8_t> wzp = RandomValues<int8_t>(m, rng, -5, 5);
    int64_t oh = 0, ow = 0;
    const std::vector<int32_t> want =
        NaiveConv2d(std::vector<int32_t>(xv.begin(), xv.end()), c, h, w, xzp,
                    std::vector<int32_t>(kv.begin(), kv.end()), m, kh, kw,
                    std::vector<int32_t>(wzp.begin(), wzp.end()), pad, stride, &oh, &ow);
    ExpectTensor<int32_t>(OpTest("ConvInteger", 10)
                              .Attr(IntsAttr("pads", {pad, pad, pad, pad}))
                              .Attr(IntsAttr("strides", {stride, stride}))
                              .Input(MakeTensor<uint8_t>({1, c, h, w}, xv))
                              .Input(MakeTensor<int8_t>({m, c, kh, kw}, kv))
                              .Input(MakeTensor<uint8_t>({}, {xzp}))
                              .Input(MakeTensor<int8_t>({m}, wzp))
                              .RunOne(),
                          {1, m, oh, ow}, want);
  }
}

TEST(ConvIntegerTest, Errors) {
  ExpectInvalid(OpTest("ConvInteger", 10)
                    .Attr(IntAttr("group", 0))
                    .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
                    .Create(),
                {"ConvInteger", "group"});
  ExpectInvalid(OpTest("ConvInteger", 10)
                    .Input(MakeTensor<uint8_t>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}))
                    .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
                    .RunStatus(),
                {"ConvInteger", "channels"});
  ExpectInvalid(OpTest("ConvInteger", 10)
                    .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({1, 1, 2, 2}, {1, 1, 1, 1}))
                    .RunStatus(),
                {"ConvInteger"});
  ExpectInvalid(OpTest("ConvInteger", 10)
                    .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {1}))
                    .Input(MakeTensor<uint8_t>({2}, {1, 1}))
                    .RunStatus(),
                {"ConvInteger", "x_zero_point"});
}

TEST(QLinearConvTest, HandCheckedWithBiasAndPerChannelScale) {
  // x 1x1x2x2 {4,6,8,10} - zp 4 = {0,2,4,6}, x_scale 0.5; w [2,1,1,1] {3, 1} (zp 0) with
  // w_scale {1, 2}; B {1, 0}; y_scale 1, y_zp 10.
  //   channel 0: (3 * x' + 1) * 0.5 * 1 = {0.5, 3.5, 6.5, 9.5} -> round half even {0, 4, 6, 10}
  //              + 10 = {10, 14, 16, 20};
  //   channel 1: (1 * x') * 0.5 * 2 = {0, 2, 4, 6} + 10 = {10, 12, 14, 16}.
  ExpectTensor<uint8_t>(OpTest("QLinearConv", 10)
                            .Input(MakeTensor<uint8_t>({1, 1, 2, 2}, {4, 6, 8, 10}))
                            .Input(MakeTensor<float>({}, {0.5f}))
                            .Input(MakeTensor<uint8_t>({}, {4}))
                            .Input(MakeTensor<int8_t>({2, 1, 1, 1}, {3, 1}))
                            .Input(MakeTensor<float>({2}, {1, 2}))
                            .Input(MakeTensor<int8_t>({2}, {0, 0}))
                            .Input(MakeTensor<float>({}, {1}))
                            .Input(MakeTensor<uint8_t>({}, {10}))
                            .Input(MakeTensor<int32_t>({2}, {1, 0}))
                            .RunOne(),
                        {1, 2, 2, 2}, {10, 14, 16, 20, 10, 12, 14, 16});
}

TEST(QLinearConvTest, Errors) {
  OpTest t("QLinearConv", 10);
  t.Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {4}))
      .Input(MakeTensor<float>({}, {0.5f}))
      .Input(MakeTensor<uint8_t>({}, {4}))
      .Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {3}))
      .Input(MakeTensor<float>({}, {1}))
      .Input(MakeTensor<uint8_t>({}, {0}))
      .Input(MakeTensor<float>({}, {1}))
      .Input(MakeTensor<uint8_t>({}, {10}));
  OpTest bad_bias = t;
  bad_bias.Input(MakeTensor<int32_t>({2}, {1, 0}));
  ExpectInvalid(bad_bias.RunStatus(), {"QLinearConv", "B"});
  OpTest ok = t;
  // (4 - 4) * 3 * 0.5 + 10 = 10.
  ExpectTensor<uint8_t>(ok.RunOne(), {1, 1, 1, 1}, {10});
  ExpectInvalid(OpTest("QLinearConv", 10).Input(MakeTensor<uint8_t>({1, 1, 1, 1}, {4})).Create(),
                {"QLinearConv", "missing"});
}

}  // namespace
}  // namespace kiln::ref::testing
