// SPDX-License-Identifier: Apache-2.0
// Tests for GlobalMaxPool and MaxUnpool (nn_pool.cc) and Dropout and Det (nn_misc.cc):
// hand-checked values, Dropout's inference and training modes across opsets, and the error
// paths.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

TEST(GlobalMaxPoolTest, HandChecked) {
  // [1, 2, 2, 2]: planes [1, 7, 3, 2] and [-1, -5, -2, -3] -> 7 and -1.
  ExpectTensor<float>(OpTest("GlobalMaxPool", 7)
                          .Input(MakeTensor<float>({1, 2, 2, 2}, {1, 7, 3, 2, -1, -5, -2, -3}))
                          .RunOne(),
                      {1, 2, 1, 1}, {7, -1});
  ExpectInvalid(OpTest("GlobalMaxPool", 7).Input(MakeTensor<float>({1, 2, 0}, {})).RunStatus(),
                {"GlobalMaxPool", "empty spatial"});
  ExpectInvalid(OpTest("GlobalMaxPool", 7).Input(MakeTensor<float>({2}, {1, 2})).RunStatus(),
                {"GlobalMaxPool", "rank >= 2"});
}

TEST(MaxUnpoolTest, HandChecked) {
  // X [1, 1, 2] with kernel 2, stride 2: output length (2 - 1) * 2 + 2 = 4; indices 1 and 2.
  ExpectTensor<float>(OpTest("MaxUnpool", 11)
                          .Attr(IntsAttr("kernel_shape", {2}))
                          .Attr(IntsAttr("strides", {2}))
                          .Input(MakeTensor<float>({1, 1, 2}, {5, 6}))
                          .Input(MakeTensor<int64_t>({1, 1, 2}, {1, 2}))
                          .RunOne(),
                      {1, 1, 4}, {0, 5, 6, 0});
  // output_shape [1, 1, 2, 3] enlarges an inferred [1, 1, 1, 2] (kernel 1): index 1 is (0, 1)
  // and stays there: flat 1 of the 2 x 3 output.
  ExpectTensor<float>(OpTest("MaxUnpool", 11)
                          .Attr(IntsAttr("kernel_shape", {1, 1}))
                          .Input(MakeTensor<float>({1, 1, 1, 2}, {5, 6}))
                          .Input(MakeTensor<int64_t>({1, 1, 1, 2}, {1, 0}))
                          .Input(MakeTensor<int64_t>({4}, {1, 1, 2, 3}))
                          .RunOne(),
                      {1, 1, 2, 3}, {6, 5, 0, 0, 0, 0});
}

TEST(MaxUnpoolTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({1, 1, 2}, {5, 6});
  ExpectInvalid(
      OpTest("MaxUnpool", 11).Input(x).Input(MakeTensor<int64_t>({1, 1, 2}, {0, 1})).Create(),
      {"MaxUnpool", "kernel_shape"});
  ExpectInvalid(OpTest("MaxUnpool", 11)
                    .Attr(IntsAttr("kernel_shape", {2}))
                    .Attr(IntsAttr("strides", {2, 2}))
                    .Input(x)
                    .Input(MakeTensor<int64_t>({1, 1, 2}, {0, 1}))
                    .Create(),
                {"MaxUnpool", "strides"});
  auto unpool = [&](OwnedTensor indices) {
    return OpTest("MaxUnpool", 11)
        .Attr(IntsAttr("kernel_shape", {2}))
        .Attr(IntsAttr("strides", {2}))
        .Input(x)
        .Input(std::move(indices));
  };
  ExpectInvalid(unpool(MakeTensor<int64_t>({1, 1, 2}, {0, 4})).RunStatus(),
                {"MaxUnpool", "outside the output"});
  ExpectInvalid(unpool(MakeTensor<int64_t>({1, 1, 2}, {-1, 0})).RunStatus(),
                {"MaxUnpool", "outside the output"});
  ExpectInvalid(unpool(MakeTensor<int64_t>({1, 2}, {0, 1})).RunStatus(),
                {"MaxUnpool", "X's shape"});
  ExpectInvalid(unpool(MakeTensor<int64_t>({1, 1, 2}, {0, 1}))
                    .Input(MakeTensor<int64_t>({3}, {1, 1, 3}))
                    .RunStatus(),
                {"MaxUnpool", "smaller than the inferred"});
}

TEST(DropoutTest, InferenceIsIdentityWithTrueMask) {
  const OwnedTensor x = MakeTensor<float>({3}, {1, -2, 3});
  for (int64_t opset : {7, 10, 12, 13}) {
    SCOPED_TRACE(opset);
    Result<std::vector<OwnedTensor>> out =
        OpTest("Dropout", opset).Input(x).Outputs({true, true}).Run();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectTensor<float>(out->at(0), {3}, {1, -2, 3});
    if (opset >= 10) {
      ExpectTensor<bool>(out->at(1), {3}, {true, true, true});
    } else {
      ExpectTensor<float>(out->at(1), {3}, {1, 1, 1});  // the mask had type T before 10
    }
  }
  // Opset 1-6's is_test is dropped by the importer's version adapter; later it does not exist.
  ExpectInvalid(OpTest("Dropout", 7).Attr(IntAttr("is_test", 1)).Input(x).Create(),
                {"Dropout", "'is_test' was removed in opset 7"});
}

TEST(DropoutTest, TrainingMode) {
  const OwnedTensor x = MakeTensor<float>({1000}, std::vector<float>(1000, 2.0f));
  // Ratio 0: identity.
  ExpectTensor<float>(OpTest("Dropout", 13)
                          .Input(x)
                          .Input(MakeTensor<float>({}, {0}))
                          .Input(MakeTensor<bool>({}, {true}))
                          .RunOne(),
                      {1000}, std::vector<float>(1000, 2.0f));
  // Ratio 0.75: each element is 0 or 2 / 0.25 = 8, and the mask says which; about 250 kept.
  Result<std::vector<OwnedTensor>> out = OpTest("Dropout", 13)
                                             .Attr(IntAttr("seed", 42))
                                             .Input(x)
                                             .Input(MakeTensor<float>({}, {0.75f}))
                                             .Input(MakeTensor<bool>({}, {true}))
                                             .Outputs({true, true})
                                             .Run();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  int kept = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const float y = out->at(0).data<float>()[i];
    const bool m = out->at(1).data<bool>()[i];
    EXPECT_EQ(y, m ? 8.0f : 0.0f);
    kept += m ? 1 : 0;
  }
  EXPECT_GT(kept, 150);
  EXPECT_LT(kept, 350);
  // Ratio 1 cannot be scaled.
  ExpectInvalid(OpTest("Dropout", 13)
                    .Input(x)
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<bool>({}, {true}))
                    .RunStatus(),
                {"Dropout", "ratio"});
}

TEST(DropoutTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({1}, {1});
  ExpectInvalid(OpTest("Dropout", 12).Attr(FloatAttr("ratio", 0.5f)).Input(x).Create(),
                {"Dropout", "'ratio' was removed"});
  ExpectInvalid(OpTest("Dropout", 10).Attr(FloatAttr("ratio", 2)).Input(x).Create(),
                {"Dropout", "ratio"});
  ExpectInvalid(OpTest("Dropout", 10).Attr(IntAttr("seed", 1)).Input(x).Create(),
                {"Dropout", "seed"});
  ExpectInvalid(OpTest("Dropout", 13)
                    .Input(x)
                    .Input(MakeTensor<float>({}, {0.5f}))
                    .Input(MakeTensor<int64_t>({}, {1}))
                    .RunStatus(),
                {"Dropout", "training_mode must be a BOOL scalar"});
  ExpectInvalid(
      OpTest("Dropout", 13).Input(x).Input(MakeTensor<float>({2}, {0.5f, 0.5f})).RunStatus(),
      {"Dropout", "ratio must be a scalar"});
}

TEST(DetTest, HandChecked) {
  // det [[1, 2], [3, 4]] = 4 - 6 = -2; det [[0, 1], [1, 0]] = -1 (needs a pivot swap);
  // det of a singular matrix [[1, 2], [2, 4]] = 0.
  ExpectTensor<double>(
      OpTest("Det", 11)
          .Input(MakeTensor<double>({3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, 1, 2, 2, 4}))
          .RunOne(),
      {3}, {-2, -1, 0}, 1e-12);
  // 3 x 3 by cofactors along row 0: [[2, 0, 1], [1, 3, 2], [1, 1, 2]]:
  // 2 * (3*2 - 2*1) - 0 * (1*2 - 2*1) + 1 * (1*1 - 3*1) = 8 - 0 - 2 = 6.
  ExpectTensor<float>(
      OpTest("Det", 11).Input(MakeTensor<float>({3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 2})).RunOne(), {},
      {6}, 1e-5);
  ExpectInvalid(OpTest("Det", 11).Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})).RunStatus(),
                {"Det", "square"});
  ExpectInvalid(OpTest("Det", 11).Input(MakeTensor<float>({2}, {1, 2})).RunStatus(),
                {"Det", "square"});
}

}  // namespace
}  // namespace kiln::ref::testing
