// SPDX-License-Identifier: Apache-2.0
// Tests for the reference losses (loss.cc): NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss with every reduction, weights, ignore_index, the log_prob output and
// the error paths.

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

OpTest Nll(const std::string& reduction, bool weighted, std::optional<int64_t> ignore) {
  // input [2, 3] = {{-1, -2, -3}, {-4, -5, -6}}, target {2, 0}, weight {1, 2, 3}.
  OpTest t("NegativeLogLikelihoodLoss", 13);
  t.Attr(StringAttr("reduction", reduction));
  if (ignore) t.Attr(IntAttr("ignore_index", *ignore));
  t.Input(MakeTensor<float>({2, 3}, {-1, -2, -3, -4, -5, -6}))
      .Input(MakeTensor<int64_t>({2}, {2, 0}));
  if (weighted) t.Input(MakeTensor<float>({3}, {1, 2, 3}));
  return t;
}

TEST(LossTest, NegativeLogLikelihoodHandChecked) {
  // Unweighted: loss = {3, 4}; sum 7; mean 3.5.
  ExpectTensor<float>(Nll("none", false, {}).RunOne(), {2}, {3, 4});
  ExpectTensor<float>(Nll("sum", false, {}).RunOne(), {}, {7});
  ExpectTensor<float>(Nll("mean", false, {}).RunOne(), {}, {3.5f});
  // Weighted: {3 * 3, 4 * 1} = {9, 4}; mean = 13 / (3 + 1) = 3.25.
  ExpectTensor<float>(Nll("none", true, {}).RunOne(), {2}, {9, 4});
  ExpectTensor<float>(Nll("mean", true, {}).RunOne(), {}, {3.25f});
  // ignore_index 0 drops the second element: none {9, 0}; mean 9 / 3 = 3.
  ExpectTensor<float>(Nll("none", true, 0).RunOne(), {2}, {9, 0});
  ExpectTensor<float>(Nll("mean", true, 0).RunOne(), {}, {3});
}

TEST(LossTest, NegativeLogLikelihoodSpatial) {
  // input [1, 2, 2] (N=1, C=2, d=2): class 0 {-1, -2}, class 1 {-3, -4}; target {{1, 0}}:
  //   loss {3, 2}.
  ExpectTensor<double>(OpTest("NegativeLogLikelihoodLoss", 12)
                           .Attr(StringAttr("reduction", "none"))
                           .Input(MakeTensor<double>({1, 2, 2}, {-1, -2, -3, -4}))
                           .Input(MakeTensor<int32_t>({1, 2}, {1, 0}))
                           .RunOne(),
                       {1, 2}, {3, 2});
}

TEST(LossTest, SoftmaxCrossEntropyHandChecked) {
  // scores [1, 2] = {0, ln 3}: softmax {1/4, 3/4}, log_prob {-ln 4, ln 3 - ln 4};
  // label 1: loss = ln 4 - ln 3.
  const float l0 = -std::log(4.0f), l1 = std::log(3.0f) - std::log(4.0f);
  Result<std::vector<OwnedTensor>> r = OpTest("SoftmaxCrossEntropyLoss", 13)
                                           .Input(MakeTensor<float>({1, 2}, {0, std::log(3.0f)}))
                                           .Input(MakeTensor<int64_t>({1}, {1}))
                                           .Outputs({true, true})
                                           .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {}, {-l1}, 1e-6);
  ExpectTensor<float>(r->at(1), {1, 2}, {l0, l1}, 1e-6);
  // Large scores do not overflow (max-subtracted): {1000, 1000} -> loss ln 2.
  ExpectTensor<float>(OpTest("SoftmaxCrossEntropyLoss", 13)
                          .Attr(StringAttr("reduction", "sum"))
                          .Input(MakeTensor<float>({1, 2}, {1000, 1000}))
                          .Input(MakeTensor<int64_t>({1}, {0}))
                          .RunOne(),
                      {}, {std::log(2.0f)}, 1e-6);
}

TEST(LossTest, Errors) {
  ExpectInvalid(OpTest("NegativeLogLikelihoodLoss", 13)
                    .Attr(StringAttr("reduction", "max"))
                    .Input(MakeTensor<float>({1, 2}, {0, 0}))
                    .Input(MakeTensor<int64_t>({1}, {0}))
                    .Create(),
                {"NegativeLogLikelihoodLoss", "reduction"});
  ExpectInvalid(OpTest("NegativeLogLikelihoodLoss", 13)
                    .Input(MakeTensor<float>({1, 2}, {0, 0}))
                    .Input(MakeTensor<int64_t>({1}, {2}))
                    .RunStatus(),
                {"NegativeLogLikelihoodLoss", "out of range"});
  ExpectInvalid(OpTest("SoftmaxCrossEntropyLoss", 13)
                    .Input(MakeTensor<float>({1, 2}, {0, 0}))
                    .Input(MakeTensor<int64_t>({2}, {0, 0}))
                    .RunStatus(),
                {"SoftmaxCrossEntropyLoss", "target"});
  ExpectInvalid(OpTest("SoftmaxCrossEntropyLoss", 13)
                    .Input(MakeTensor<float>({1, 2}, {0, 0}))
                    .Input(MakeTensor<int64_t>({1}, {0}))
                    .Input(MakeTensor<float>({3}, {1, 1, 1}))
                    .RunStatus(),
                {"SoftmaxCrossEntropyLoss", "weight"});
  ExpectInvalid(OpTest("SoftmaxCrossEntropyLoss", 13)
                    .Input(MakeTensor<float>({2}, {0, 0}))
                    .Input(MakeTensor<int64_t>({}, {0}))
                    .RunStatus(),
                {"SoftmaxCrossEntropyLoss", "rank"});
  ExpectInvalid(OpTest("SoftmaxCrossEntropyLoss", 13)
                    .Input(MakeTensor<float>({1, 2}, {0, 0}))
                    .Input(MakeTensor<float>({1}, {0}))
                    .RunStatus(),
                {"SoftmaxCrossEntropyLoss", "INT32 or INT64"});
}

}  // namespace
}  // namespace kiln::ref::testing
