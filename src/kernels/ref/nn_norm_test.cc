// SPDX-License-Identifier: Apache-2.0
// Tests for the nn family's normalizations (nn_norm.cc): LogSoftmax and Hardmax (including the
// opset 13 change of axis semantics), LayerNormalization with its Mean / InvStdDev outputs,
// InstanceNormalization, MeanVarianceNormalization and LRN: hand-checked values, a randomized
// LayerNormalization check against a direct formula, and the error paths.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

const double kLn3 = std::log(3.0);

TEST(LogSoftmaxTest, HandChecked) {
  // [0, ln3]: softmax [1/4, 3/4], log: [-ln4, ln3 - ln4].
  ExpectTensor<double>(OpTest("LogSoftmax", 13).Input(MakeTensor<double>({2}, {0, kLn3})).RunOne(),
                       {2}, {-std::log(4.0), kLn3 - std::log(4.0)}, 1e-14);
  // Large inputs: log(1/2) each.
  ExpectTensor<float>(OpTest("LogSoftmax", 13).Input(MakeTensor<float>({2}, {1000, 1000})).RunOne(),
                      {2}, {-std::log(2.0f), -std::log(2.0f)}, 1e-6);
}

TEST(LogSoftmaxTest, Opset13ChangedTheAxisSemantics) {
  // x = [[0, 0], [ln3, ln3]] with axis 0.
  const OwnedTensor x = MakeTensor<double>({2, 2}, {0, 0, kLn3, kLn3});
  // 13: columns [0, ln3] -> log [1/4, 3/4].
  const double a = std::log(0.25), b = std::log(0.75);
  ExpectTensor<double>(OpTest("LogSoftmax", 13).Attr(IntAttr("axis", 0)).Input(x).RunOne(), {2, 2},
                       {a, a, b, b}, 1e-14);
  // 11: one row of 4 with exps 1,1,3,3 summing to 8 -> log 1/8, log 3/8.
  ExpectTensor<double>(OpTest("LogSoftmax", 11).Attr(IntAttr("axis", 0)).Input(x).RunOne(), {2, 2},
                       {std::log(0.125), std::log(0.125), std::log(0.375), std::log(0.375)}, 1e-14);
  // Opset 7 with a negative axis is accepted (PyTorch exports it at opset 6).
  ExpectTensor<double>(OpTest("LogSoftmax", 7).Attr(IntAttr("axis", -1)).Input(x).RunOne(), {2, 2},
                       {std::log(0.5), std::log(0.5), std::log(0.5), std::log(0.5)}, 1e-14);
}

TEST(HardmaxTest, HandChecked) {
  // Rows [1, 3, 3] and [5, 2, 0]: first maximum wins.
  const OwnedTensor x = MakeTensor<float>({2, 3}, {1, 3, 3, 5, 2, 0});
  ExpectTensor<float>(OpTest("Hardmax", 13).Input(x).RunOne(), {2, 3}, {0, 1, 0, 1, 0, 0});
  // Axis 0 at 13: columns [1,5] [3,2] [3,0] -> rows 1, 0, 0.
  ExpectTensor<float>(OpTest("Hardmax", 13).Attr(IntAttr("axis", 0)).Input(x).RunOne(), {2, 3},
                      {0, 1, 1, 1, 0, 0});
  // Axis 0 before 13: the whole tensor is one row; max 5 at flat index 3.
  ExpectTensor<float>(OpTest("Hardmax", 11).Attr(IntAttr("axis", 0)).Input(x).RunOne(), {2, 3},
                      {0, 0, 0, 1, 0, 0});
}

TEST(RowOpTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectInvalid(OpTest("Hardmax", 13).Attr(IntAttr("axis", 2)).Input(x).RunStatus(),
                {"Hardmax", "out of range"});
  ExpectInvalid(OpTest("LogSoftmax", 13).Input(MakeTensor<float>({}, {1})).RunStatus(),
                {"LogSoftmax", "scalar"});
  ExpectInvalid(OpTest("LogSoftmax", 13).Attr(FloatAttr("axis", 1)).Input(x).Create(),
                {"LogSoftmax", "axis"});
}

TEST(LayerNormTest, HandCheckedWithStatistics) {
  // Rows [1, 3] and [2, 6]: means 2 and 4, variances 1 and 4; epsilon 0.
  // Y = (x - mean) / std * scale + B with scale [1, 2], B [0, 1]:
  // row 0: [-1, 1] -> [-1, 3]; row 1: [-1, 1] -> [-1, 3].
  Result<std::vector<OwnedTensor>> out = OpTest("LayerNormalization", 17)
                                             .Attr(FloatAttr("epsilon", 0))
                                             .Input(MakeTensor<float>({2, 2}, {1, 3, 2, 6}))
                                             .Input(MakeTensor<float>({2}, {1, 2}))
                                             .Input(MakeTensor<float>({2}, {0, 1}))
                                             .Outputs({true, true, true})
                                             .Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensor<float>(out->at(0), {2, 2}, {-1, 3, -1, 3}, 1e-6);
  ExpectTensor<float>(out->at(1), {2, 1}, {2, 4}, 1e-6);
  ExpectTensor<float>(out->at(2), {2, 1}, {1, 0.5}, 1e-6);
  // Axis 0 normalizes everything: mean 3, variance (4+0+1+9)/4 = 3.5; no bias.
  const double s = 1 / std::sqrt(3.5);
  ExpectTensor<double>(OpTest("LayerNormalization", 17)
                           .Attr(IntAttr("axis", 0))
                           .Attr(FloatAttr("epsilon", 0))
                           .Input(MakeTensor<double>({2, 2}, {1, 3, 2, 6}))
                           .Input(MakeTensor<double>({}, {1}))
                           .RunOne(),
                       {2, 2}, {-2 * s, 0, -1 * s, 3 * s}, 1e-12);
}

TEST(LayerNormTest, RandomMatchesDirectFormula) {
  std::mt19937 rng(5);
  const std::vector<double> x = RandomValues<double>(24, rng, -3, 3);
  const std::vector<double> scale = RandomValues<double>(4, rng, 0.5, 2);
  for (int64_t axis : {-1, 1, 2}) {
    SCOPED_TRACE(axis);
    const int64_t ax = axis < 0 ? axis + 3 : axis;
    const int64_t group = ax == 1 ? 12 : 4;
    std::vector<double> expected;
    for (int64_t g = 0; g < 24 / group; ++g) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < group; ++j) mean += x[static_cast<size_t>(g * group + j)] / group;
      for (int64_t j = 0; j < group; ++j) {
        const double d = x[static_cast<size_t>(g * group + j)] - mean;
        var += d * d / group;
      }
      for (int64_t j = 0; j < group; ++j) {
        expected.push_back((x[static_cast<size_t>(g * group + j)] - mean) / std::sqrt(var + 1e-5) *
                           scale[static_cast<size_t>(j % 4)]);
      }
    }
    ExpectTensor<double>(OpTest("LayerNormalization", 17)
                             .Attr(IntAttr("axis", axis))
                             .Input(MakeTensor<double>({2, 3, 4}, x))
                             .Input(MakeTensor<double>({4}, scale))
                             .RunOne(),
                         {2, 3, 4}, expected, 1e-6);  // epsilon is a float attribute
  }
}

TEST(LayerNormTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  ExpectInvalid(OpTest("LayerNormalization", 17)
                    .Attr(IntAttr("stash_type", 0))
                    .Input(x)
                    .Input(MakeTensor<float>({2}, {1, 1}))
                    .Create(),
                {"LayerNormalization", "stash_type"});
  ExpectInvalid(OpTest("LayerNormalization", 17)
                    .Input(x)
                    .Input(MakeTensor<float>({3}, {1, 1, 1}))
                    .RunStatus(),
                {"LayerNormalization", "broadcast"});
  ExpectInvalid(OpTest("LayerNormalization", 17)
                    .Attr(IntAttr("axis", 2))
                    .Input(x)
                    .Input(MakeTensor<float>({2}, {1, 1}))
                    .RunStatus(),
                {"LayerNormalization", "out of range"});
  ExpectInvalid(OpTest("LayerNormalization", 17).Input(x).OmittedInput().Create(),
                {"LayerNormalization", "required input 1"});
}

TEST(InstanceNormTest, HandChecked) {
  // [N=1, C=2, 2]: channel 0 [1, 3] (mean 2, var 1), channel 1 [5, 5] (var 0).
  // Scale [2, 1], B [0, 7], epsilon 1e-30 (negligible): channel 0: (x - 2) / 1 * 2 = [-2, 2];
  // channel 1: (5 - 5) / sqrt(1e-30) * 1 + 7 = 7.
  ExpectTensor<double>(OpTest("InstanceNormalization", 7)
                           .Attr(FloatAttr("epsilon", 1e-30f))
                           .Input(MakeTensor<double>({1, 2, 2}, {1, 3, 5, 5}))
                           .Input(MakeTensor<double>({2}, {2, 1}))
                           .Input(MakeTensor<double>({2}, {0, 7}))
                           .RunOne(),
                       {1, 2, 2}, {-2, 2, 7, 7}, 1e-12);
  ExpectInvalid(OpTest("InstanceNormalization", 7)
                    .Input(MakeTensor<float>({1, 2, 2}, {1, 3, 5, 5}))
                    .Input(MakeTensor<float>({3}, {1, 1, 1}))
                    .Input(MakeTensor<float>({2}, {0, 0}))
                    .RunStatus(),
                {"InstanceNormalization", "channels"});
  ExpectInvalid(OpTest("InstanceNormalization", 7)
                    .Input(MakeTensor<float>({2}, {1, 3}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {0}))
                    .RunStatus(),
                {"InstanceNormalization", "rank >= 2"});
}

TEST(MvnTest, HandChecked) {
  // Axes [1]: rows [1, 3] and [4, 8]: means 2 and 6, std 1 and 2: both [-1, 1] (up to 1e-9).
  ExpectTensor<double>(OpTest("MeanVarianceNormalization", 13)
                           .Attr(IntsAttr("axes", {1}))
                           .Input(MakeTensor<double>({2, 2}, {1, 3, 4, 8}))
                           .RunOne(),
                       {2, 2}, {-1, 1, -1, 1}, 1e-8);
  // Default axes [0, 2, 3] need rank 4.
  ExpectInvalid(OpTest("MeanVarianceNormalization", 13)
                    .Input(MakeTensor<float>({2, 2}, {1, 3, 4, 8}))
                    .RunStatus(),
                {"MeanVarianceNormalization", "out of range"});
}

TEST(LrnTest, HandChecked) {
  // C = 3, size 2: window [c, c + 1] (floor((2-1)/2) = 0 before, 1 after).
  // x = [1, 2, 3]; sums 1+4 = 5, 4+9 = 13, 9. alpha 2, beta 1, bias 1:
  // y = x / (1 + 2 / 2 * sum) = [1/6, 2/14, 3/10].
  ExpectTensor<double>(OpTest("LRN", 13)
                           .Attr(IntAttr("size", 2))
                           .Attr(FloatAttr("alpha", 2))
                           .Attr(FloatAttr("beta", 1))
                           .Input(MakeTensor<double>({1, 3, 1}, {1, 2, 3}))
                           .RunOne(),
                       {1, 3, 1}, {1.0 / 6, 2.0 / 14, 3.0 / 10}, 1e-12);
  ExpectInvalid(OpTest("LRN", 13).Input(MakeTensor<float>({1, 1}, {1})).Create(),
                {"LRN", "'size' is required"});
  ExpectInvalid(
      OpTest("LRN", 13).Attr(IntAttr("size", 0)).Input(MakeTensor<float>({1, 1}, {1})).Create(),
      {"LRN", "size"});
  ExpectInvalid(
      OpTest("LRN", 13).Attr(IntAttr("size", 1)).Input(MakeTensor<float>({1}, {1})).RunStatus(),
      {"LRN", "rank >= 2"});
}

}  // namespace
}  // namespace kiln::ref::testing
