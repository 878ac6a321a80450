// SPDX-License-Identifier: Apache-2.0
// Tests for the reference Softmax and BatchNormalization (normalization.cc): hand-checked
// values, the opset 13 change in Softmax's axis semantics, randomized comparisons against direct
// formulas, and errors (bad axis, bad statistics shapes, training mode).

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

const double kLn3 = std::log(3.0);

TEST(SoftmaxTest, HandChecked) {
  // exp(0) = 1, exp(ln 3) = 3: [1/4, 3/4].
  ExpectTensor<double>(OpTest("Softmax", 13).Input(MakeTensor<double>({2}, {0, kLn3})).RunOne(),
                       {2}, {0.25, 0.75}, 1e-15);
  // Large inputs do not overflow.
  ExpectTensor<float>(OpTest("Softmax", 13).Input(MakeTensor<float>({2}, {1000, 1000})).RunOne(),
                      {2}, {0.5f, 0.5f});
}

TEST(SoftmaxTest, Opset13ChangedTheAxisSemantics) {
  // x = [[0, 0], [ln3, ln3]].
  const OwnedTensor x = MakeTensor<double>({2, 2}, {0, 0, kLn3, kLn3});
  // Opset 13, axis 0: each column [0, ln3] -> [1/4, 3/4].
  ExpectTensor<double>(OpTest("Softmax", 13).Attr(IntAttr("axis", 0)).Input(x).RunOne(), {2, 2},
                       {0.25, 0.25, 0.75, 0.75}, 1e-15);
  // Opset 11, axis 0: coerced to one row of 4, exps 1,1,3,3 sum to 8.
  ExpectTensor<double>(OpTest("Softmax", 11).Attr(IntAttr("axis", 0)).Input(x).RunOne(), {2, 2},
                       {0.125, 0.125, 0.375, 0.375}, 1e-15);
  // Opset 7, default axis 1: each row normalized: all 1/2.
  ExpectTensor<double>(OpTest("Softmax", 7).Input(x).RunOne(), {2, 2}, {0.5, 0.5, 0.5, 0.5}, 1e-15);
  // Default axis: 1 before 13 (coerce [1,2,2] to [1,4]), -1 from 13 (pairs).
  // y = [[0, ln3], [ln3, 0]]: exps 1,3,3,1.
  const OwnedTensor y = MakeTensor<double>({1, 2, 2}, {0, kLn3, kLn3, 0});
  ExpectTensor<double>(OpTest("Softmax", 12).Input(y).RunOne(), {1, 2, 2},
                       {0.125, 0.375, 0.375, 0.125}, 1e-15);
  ExpectTensor<double>(OpTest("Softmax", 13).Input(y).RunOne(), {1, 2, 2}, {0.25, 0.75, 0.75, 0.25},
                       1e-15);
}

TEST(SoftmaxTest, RandomMatchesDirectFormula) {
  std::mt19937 rng(19);
  const std::vector<int64_t> dims = {3, 4, 5};
  const std::vector<double> x = RandomValues<double>(60, rng, -5, 5);
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  for (int64_t opset : {11, 13}) {
    for (int64_t axis = -3; axis < 3; ++axis) {
      SCOPED_TRACE(::testing::Message() << "opset " << opset << " axis " << axis);
      const size_t ax = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
      // Group elements into the sets normalized together: for opset 13 the elements that differ
      // only in coordinate `ax`; for opset 11 those that share coordinates [0, ax).
      std::vector<double> expected(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const std::vector<int64_t> ci = Unravel(static_cast<int64_t>(i), dims);
        double denom = 0;
        for (size_t j = 0; j < x.size(); ++j) {
          const std::vector<int64_t> cj = Unravel(static_cast<int64_t>(j), dims);
          bool same = true;
          for (size_t d = 0; d < 3; ++d) {
            const bool free = opset >= 13 ? d == ax : d >= ax;
            if (!free && ci[d] != cj[d]) same = false;
          }
          if (same) denom += std::exp(x[j]);
        }
        expected[i] = std::exp(x[i]) / denom;
      }
      ExpectTensor<double>(OpTest("Softmax", opset)
                               .Attr(IntAttr("axis", axis))
                               .Input(MakeTensor<double>({3, 4, 5}, x))
                               .RunOne(),
                           {3, 4, 5}, expected, 1e-13);
    }
  }
}

TEST(SoftmaxTest, Errors) {
  ExpectInvalid(OpTest("Softmax", 13)
                    .Attr(IntAttr("axis", 2))
                    .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                    .RunStatus(),
                {"Softmax", "axis 2 is out of range [-2, 1]"});
  ExpectInvalid(OpTest("Softmax", 10)
                    .Attr(IntAttr("axis", -1))
                    .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                    .Create(),
                {"Softmax", "negative axis", "opset 11"});
  ExpectInvalid(OpTest("Softmax", 13).Input(MakeTensor<float>({}, {1})).RunStatus(),
                {"Softmax", "out of range"});
}

// X [1,2,1,2]: channel 0 = [1,3], channel 1 = [2,4].
OpTest BatchNorm(int64_t opset, const std::vector<float>& scale, const std::vector<float>& bias,
                 const std::vector<float>& mean, const std::vector<float>& var) {
  OpTest t("BatchNormalization", opset);
  const int64_t c = static_cast<int64_t>(scale.size());
  t.Input(MakeTensor<float>({1, 2, 1, 2}, {1, 3, 2, 4}))
      .ConstInput(MakeTensor<float>({c}, scale))
      .ConstInput(MakeTensor<float>({static_cast<int64_t>(bias.size())}, bias))
      .ConstInput(MakeTensor<float>({static_cast<int64_t>(mean.size())}, mean))
      .ConstInput(MakeTensor<float>({static_cast<int64_t>(var.size())}, var));
  return t;
}

TEST(BatchNormalizationTest, HandChecked) {
  // epsilon 0; channel 0: (x - 2) / sqrt(1) * 1 + 0 = [-1, 1];
  //            channel 1: (x - 3) / sqrt(4) * 2 + 1 = [0, 2].
  ExpectTensor<float>(
      BatchNorm(15, {1, 2}, {0, 1}, {2, 3}, {1, 4}).Attr(FloatAttr("epsilon", 0)).RunOne(),
      {1, 2, 1, 2}, {-1, 1, 0, 2});
  // Default epsilon 1e-5 changes the result by about 1e-5 relative.
  ExpectTensor<float>(BatchNorm(9, {1, 2}, {0, 1}, {2, 3}, {1, 4}).RunOne(), {1, 2, 1, 2},
                      {-1, 1, 0, 2}, 1e-5);
}

TEST(BatchNormalizationTest, PerActivationBeforeOpset9) {
  // spatial=0: statistics have shape [C, D] = [2, 2]; X = [[5,5],[5,5]] minus
  // mean [[1,2],[3,4]] = [4,3,2,1] (scale 1, bias 0, var 1, epsilon 0).
  ExpectTensor<float>(OpTest("BatchNormalization", 7)
                          .Attr(IntAttr("spatial", 0))
                          .Attr(FloatAttr("epsilon", 0))
                          .Input(MakeTensor<float>({1, 2, 2}, {5, 5, 5, 5}))
                          .ConstInput(MakeTensor<float>({2, 2}, {1, 1, 1, 1}))
                          .ConstInput(MakeTensor<float>({2, 2}, {0, 0, 0, 0}))
                          .ConstInput(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                          .ConstInput(MakeTensor<float>({2, 2}, {1, 1, 1, 1}))
                          .RunOne(),
                      {1, 2, 2}, {4, 3, 2, 1});
  ExpectInvalid(OpTest("BatchNormalization", 9)
                    .Attr(IntAttr("spatial", 0))
                    .Input(MakeTensor<float>({1, 2, 2}, {5, 5, 5, 5}))
                    .ConstInput(MakeTensor<float>({2}, {1, 1}))
                    .ConstInput(MakeTensor<float>({2}, {0, 0}))
                    .ConstInput(MakeTensor<float>({2}, {1, 2}))
                    .ConstInput(MakeTensor<float>({2}, {1, 1}))
                    .Create(),
                {"BatchNormalization", "'spatial'", "removed in opset 9"});
}

TEST(BatchNormalizationTest, RandomMatchesFormula) {
  std::mt19937 rng(23);
  const int64_t n = 2, c = 3, h = 4, w = 5;
  const std::vector<double> x = RandomValues<double>(n * c * h * w, rng, -3, 3);
  const std::vector<double> scale = RandomValues<double>(c, rng, 0.5, 2);
  const std::vector<double> bias = RandomValues<double>(c, rng);
  const std::vector<double> mean = RandomValues<double>(c, rng);
  const std::vector<double> var = RandomValues<double>(c, rng, 0.1, 3);
  const double eps = 1e-3;
  std::vector<double> expected;
  for (int64_t i = 0; i < n * c * h * w; ++i) {
    const size_t ch = static_cast<size_t>((i / (h * w)) % c);
    expected.push_back(
        (x[static_cast<size_t>(i)] - mean[ch]) / std::sqrt(var[ch] + eps) * scale[ch] + bias[ch]);
  }
  ExpectTensor<double>(OpTest("BatchNormalization", 14)
                           .Attr(FloatAttr("epsilon", static_cast<float>(eps)))
                           .Input(MakeTensor<double>({n, c, h, w}, x))
                           .ConstInput(MakeTensor<double>({c}, scale))
                           .ConstInput(MakeTensor<double>({c}, bias))
                           .ConstInput(MakeTensor<double>({c}, mean))
                           .ConstInput(MakeTensor<double>({c}, var))
                           .RunOne(),
                       {n, c, h, w}, expected, 1e-6);  // epsilon is a float attribute
  // From opset 14 the statistics may be FP64 while X is FP32.
  ExpectTensor<float>(
      OpTest("BatchNormalization", 15)
          .Attr(FloatAttr("epsilon", static_cast<float>(eps)))
          .Input(MakeTensor<float>({n, c, h, w}, std::vector<float>(x.begin(), x.end())))
          .ConstInput(MakeTensor<double>({c}, scale))
          .ConstInput(MakeTensor<double>({c}, bias))
          .ConstInput(MakeTensor<double>({c}, mean))
          .ConstInput(MakeTensor<double>({c}, var))
          .RunOne(),
      {n, c, h, w}, std::vector<float>(expected.begin(), expected.end()), 1e-5);
}

TEST(BatchNormalizationTest, TrainingMode) {
  // X [2, 1, 1] = [1, 3]: batch mean 2, population variance 1. With scale 1, B 0, epsilon 0:
  // Y = (x - 2) / 1 = [-1, 1]. Running statistics with momentum 0.9 from mean 0, var 1:
  // 0 * 0.9 + 2 * 0.1 = 0.2 and 1 * 0.9 + 1 * 0.1 = 1.
  Result<std::vector<OwnedTensor>> out = OpTest("BatchNormalization", 15)
                                             .Attr(IntAttr("training_mode", 1))
                                             .Attr(FloatAttr("epsilon", 0))
                                             .Input(MakeTensor<float>({2, 1, 1}, {1, 3}))
                                             .ConstInput(MakeTensor<float>({1}, {1}))
                                             .ConstInput(MakeTensor<float>({1}, {0}))
                                             .ConstInput(MakeTensor<double>({1}, {0}))
                                             .ConstInput(MakeTensor<double>({1}, {1}))
                                             .Outputs({true, true, true})
                                             .Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectTensor<float>(out->at(0), {2, 1, 1}, {-1, 1}, 1e-6);
  ExpectTensor<double>(out->at(1), {1}, {0.2}, 1e-7);
  ExpectTensor<double>(out->at(2), {1}, {1}, 1e-7);
}

TEST(BatchNormalizationTest, Errors) {
  ExpectInvalid(BatchNorm(15, {1, 2, 3}, {0, 1}, {2, 3}, {1, 4}).RunStatus(),
                {"BatchNormalization", "'scale' has shape [3], expected [2]"});
  // Before opset 14 the statistics must have X's dtype.
  ExpectInvalid(OpTest("BatchNormalization", 9)
                    .Input(MakeTensor<float>({1, 1, 1}, {1}))
                    .ConstInput(MakeTensor<double>({1}, {1}))
                    .ConstInput(MakeTensor<float>({1}, {0}))
                    .ConstInput(MakeTensor<float>({1}, {0}))
                    .ConstInput(MakeTensor<float>({1}, {1}))
                    .RunStatus(),
                {"BatchNormalization", "'scale' has dtype FP64, expected FP32"});
  ExpectInvalid(OpTest("BatchNormalization", 15)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .ConstInput(MakeTensor<float>({1}, {1}))
                    .ConstInput(MakeTensor<float>({1}, {0}))
                    .ConstInput(MakeTensor<float>({1}, {0}))
                    .ConstInput(MakeTensor<float>({1}, {1}))
                    .RunStatus(),
                {"BatchNormalization", "rank >= 2"});
  // Training mode before opset 14 (the statistics outputs of 7-13) is rejected at load; from 14
  // the running statistics outputs need training_mode=1. (Opset 1-6's is_test=0 is refused by
  // the importer's version adapter.)
  ExpectInvalid(BatchNorm(7, {1, 2}, {0, 1}, {2, 3}, {1, 4}).Attr(IntAttr("is_test", 1)).Create(),
                {"BatchNormalization", "'is_test' was removed in opset 7"});
  ExpectInvalid(
      BatchNorm(9, {1, 2}, {0, 1}, {2, 3}, {1, 4}).Outputs({true, true, true, true, true}).Create(),
      {"BatchNormalization", "output 1", "training mode"});
  ExpectInvalid(BatchNorm(15, {1, 2}, {0, 1}, {2, 3}, {1, 4}).Outputs({true, true, true}).Create(),
                {"BatchNormalization", "output 1"});
  ExpectInvalid(
      BatchNorm(13, {1, 2}, {0, 1}, {2, 3}, {1, 4}).Attr(IntAttr("training_mode", 0)).Create(),
      {"BatchNormalization", "'training_mode' is not defined before opset 14"});
}

}  // namespace
}  // namespace kiln::ref::testing
