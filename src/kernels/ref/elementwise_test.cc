// SPDX-License-Identifier: Apache-2.0
// Tests for the reference elementwise kernels (elementwise.cc): hand-checked cases, randomized
// broadcasting against an index-by-index computation, integer edge rules, legacy (opset < 7)
// broadcasting, and error cases.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ElementwiseTest, AddBroadcastsTrailingDim) {
  // [[1,2,3],[4,5,6]] + [10,20,30] = [[11,22,33],[14,25,36]]
  OwnedTensor y = OpTest("Add", 13)
                      .Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}))
                      .Input(MakeTensor<float>({3}, {10, 20, 30}))
                      .RunOne();
  ExpectTensor<float>(y, {2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(ElementwiseTest, SubBroadcastsBothWays) {
  // [[1],[2]] - [[10,20,30]] = [[1-10, 1-20, 1-30], [2-10, 2-20, 2-30]]
  OwnedTensor y = OpTest("Sub", 14)
                      .Input(MakeTensor<double>({2, 1}, {1, 2}))
                      .Input(MakeTensor<double>({1, 3}, {10, 20, 30}))
                      .RunOne();
  ExpectTensor<double>(y, {2, 3}, {-9, -19, -29, -8, -18, -28});
}

TEST(ElementwiseTest, MulScalarTimesMatrix) {
  // 2 * [[1,2],[3,4]] = [[2,4],[6,8]]; a rank-0 A broadcasts to B's shape.
  OwnedTensor y = OpTest("Mul", 7)
                      .Input(MakeTensor<int64_t>({}, {2}))
                      .Input(MakeTensor<int64_t>({2, 2}, {1, 2, 3, 4}))
                      .RunOne();
  ExpectTensor<int64_t>(y, {2, 2}, {2, 4, 6, 8});
}

TEST(ElementwiseTest, DivFloatFollowsIeee) {
  // 1/2 = 0.5, -3/4 = -0.75, 1/0 = +inf, 0/0 = nan.
  OwnedTensor y = OpTest("Div", 13)
                      .Input(MakeTensor<float>({4}, {1, -3, 1, 0}))
                      .Input(MakeTensor<float>({4}, {2, 4, 0, 0}))
                      .RunOne();
  ExpectTensor<float>(y, {4}, {0.5f, -0.75f, static_cast<float>(kInf), static_cast<float>(kNaN)});
}

TEST(ElementwiseTest, IntegerDivTruncatesTowardZero) {
  // 7/2 = 3, -7/2 = -3, 7/-2 = -3, -7/-2 = 3.
  OwnedTensor y = OpTest("Div", 13)
                      .Input(MakeTensor<int32_t>({4}, {7, -7, 7, -7}))
                      .Input(MakeTensor<int32_t>({4}, {2, 2, -2, -2}))
                      .RunOne();
  ExpectTensor<int32_t>(y, {4}, {3, -3, -3, 3});
}

TEST(ElementwiseTest, IntegerOverflowWraps) {
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  // INT32_MAX + 1 wraps to INT32_MIN.
  ExpectTensor<int32_t>(OpTest("Add", 13)
                            .Input(MakeTensor<int32_t>({1}, {kMax32}))
                            .Input(MakeTensor<int32_t>({1}, {1}))
                            .RunOne(),
                        {1}, {kMin32});
  // INT32_MIN - 1 wraps to INT32_MAX.
  ExpectTensor<int32_t>(OpTest("Sub", 13)
                            .Input(MakeTensor<int32_t>({1}, {kMin32}))
                            .Input(MakeTensor<int32_t>({1}, {1}))
                            .RunOne(),
                        {1}, {kMax32});
  // (2^63 - 1) * 2 = 2^64 - 2, which is -2 modulo 2^64.
  ExpectTensor<int64_t>(OpTest("Mul", 13)
                            .Input(MakeTensor<int64_t>({1}, {kMax64}))
                            .Input(MakeTensor<int64_t>({1}, {2}))
                            .RunOne(),
                        {1}, {-2});
  // INT32_MIN / -1 = 2^31, which wraps to INT32_MIN (the documented rule).
  ExpectTensor<int32_t>(OpTest("Div", 13)
                            .Input(MakeTensor<int32_t>({2}, {kMin32, 9}))
                            .Input(MakeTensor<int32_t>({2}, {-1, -1}))
                            .RunOne(),
                        {2}, {kMin32, -9});
}

TEST(ElementwiseTest, IntegerDivisionByZeroIsAnError) {
  const Status s = OpTest("Div", 13)
                       .Input(MakeTensor<int64_t>({3}, {1, 2, 3}))
                       .Input(MakeTensor<int64_t>({3}, {1, 0, 1}))
                       .RunStatus();
  ExpectInvalid(s, {"Div", "division by zero"});
  // A broadcast zero divisor too.
  ExpectInvalid(OpTest("Div", 13)
                    .Input(MakeTensor<int32_t>({2, 2}, {1, 2, 3, 4}))
                    .Input(MakeTensor<int32_t>({}, {0}))
                    .RunStatus(),
                {"Div", "division by zero"});
}

TEST(ElementwiseTest, IncompatibleShapesAreInvalidArgument) {
  const Status s = OpTest("Add", 13)
                       .Input(MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}))
                       .Input(MakeTensor<float>({2}, {1, 2}))
                       .RunStatus();
  ExpectInvalid(s, {"Add", "incompatible broadcast shapes", "[2,3]", "[2]"});
}

TEST(ElementwiseTest, MixedDtypesAreInvalidArgument) {
  // The registry only looks at input 0; the kernel catches the mismatch.
  const Status s = OpTest("Mul", 13)
                       .Input(MakeTensor<float>({1}, {1}))
                       .Input(MakeTensor<double>({1}, {1}))
                       .RunStatus();
  ExpectInvalid(s, {"Mul", "different dtypes", "FP32", "FP64"});
}

TEST(ElementwiseTest, LegacyBroadcastAttributesAreRejected) {
  // Opset 1-6's `broadcast`/`axis` are rewritten by the importer's version adapter
  // (tests/onnx/version_adapter_test.cc); from opset 7 they do not exist.
  ExpectInvalid(OpTest("Add", 7)
                    .Attr(IntAttr("broadcast", 1))
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Add", "attribute 'broadcast' was removed in opset 7"});
  ExpectInvalid(OpTest("Sub", 13)
                    .Attr(IntAttr("axis", 0))
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Sub", "attribute 'axis' was removed in opset 7"});
}

// Expected value of a binary op computed independently in the test.
template <typename T>
T Reference(std::string_view op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == "Add") return a + b;
    if (op == "Sub") return a - b;
    if (op == "Mul") return a * b;
    return a / b;
  } else {
    // Small operands: no overflow, so plain arithmetic is the definition.
    if (op == "Add") return static_cast<T>(a + b);
    if (op == "Sub") return static_cast<T>(a - b);
    if (op == "Mul") return static_cast<T>(a * b);
    return static_cast<T>(a / b);
  }
}

template <typename T>
void RandomBroadcastCase(std::string_view op, const std::vector<int64_t>& ad,
                         const std::vector<int64_t>& bd, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message()
               << op << " " << Shape(ad).ToString() << " x " << Shape(bd).ToString() << " "
               << DataTypeName(DataTypeOf<T>()));
  const Shape as(ad), bs(bd);
  std::vector<T> a = RandomValues<T>(as.NumElements(), rng, -100, 100);
  std::vector<T> b = RandomValues<T>(bs.NumElements(), rng, 1, 9);  // nonzero divisors
  for (size_t i = 0; i < b.size(); i += 2) b[i] = static_cast<T>(-b[i]);
  // Output dims: numpy rule, computed here dim by dim.
  const size_t rank = std::max(ad.size(), bd.size());
  std::vector<int64_t> od(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - ad.size() ? 1 : ad[i - (rank - ad.size())];
    const int64_t db = i < rank - bd.size() ? 1 : bd[i - (rank - bd.size())];
    od[i] = da == 1 ? db : da;
  }
  const Shape os(od);
  std::vector<T> expected(static_cast<size_t>(os.NumElements()));
  const std::vector<int64_t> a_strides = RowMajorStrides(ad), b_strides = RowMajorStrides(bd);
  for (int64_t i = 0; i < os.NumElements(); ++i) {
    const std::vector<int64_t> c = Unravel(i, od);
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < ad.size(); ++d) {
      const int64_t coord = c[d + rank - ad.size()];
      ia += (ad[d] == 1 ? 0 : coord) * a_strides[d];
    }
    for (size_t d = 0; d < bd.size(); ++d) {
      const int64_t coord = c[d + rank - bd.size()];
      ib += (bd[d] == 1 ? 0 : coord) * b_strides[d];
    }
    expected[static_cast<size_t>(i)] =
        Reference<T>(op, a[static_cast<size_t>(ia)], b[static_cast<size_t>(ib)]);
  }
  OwnedTensor y =
      OpTest(std::string(op), 14).Input(MakeTensor<T>(as, a)).Input(MakeTensor<T>(bs, b)).RunOne();
  ExpectTensor<T>(y, os, expected, 1e-12);
}

TEST(ElementwiseTest, RandomBroadcastMatchesIndexByIndex) {
  std::mt19937 rng(7);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {4}},
      {{2, 1, 4}, {3, 1}},
      {{1}, {5, 2}},
      {{}, {3, 2}},
      {{2, 3, 1, 5}, {2, 1, 4, 1}},
      {{0, 3}, {1, 3}},
      {{3, 1, 2, 1, 2}, {1, 2, 1, 2, 1}},
      {{4, 5}, {4, 5}},
      {{7}, {}},
      {{2, 2, 2, 2, 2, 2, 2}, {2, 1, 2, 1, 2, 1, 2}},
  };
  for (std::string_view op : {"Add", "Sub", "Mul", "Div"}) {
    for (const auto& [ad, bd] : cases) {
      RandomBroadcastCase<float>(op, ad, bd, rng);
      RandomBroadcastCase<double>(op, ad, bd, rng);
      RandomBroadcastCase<int32_t>(op, ad, bd, rng);
      RandomBroadcastCase<int64_t>(op, ad, bd, rng);
    }
  }
}

TEST(ElementwiseTest, Relu) {
  // max(0, x); NaN stays NaN.
  ExpectTensor<float>(
      OpTest("Relu", 13)
          .Input(MakeTensor<float>({5}, {-1.5f, 0, 2, -0.0f, static_cast<float>(kNaN)}))
          .RunOne(),
      {5}, {0, 0, 2, 0, static_cast<float>(kNaN)});
  // Integers from opset 14.
  ExpectTensor<int32_t>(OpTest("Relu", 14).Input(MakeTensor<int32_t>({3}, {-3, 0, 5})).RunOne(),
                        {3}, {0, 0, 5});
  ExpectTensor<int64_t>(OpTest("Relu", 17).Input(MakeTensor<int64_t>({2}, {-9, 9})).RunOne(), {2},
                        {0, 9});
  ExpectInvalid(OpTest("Relu", 13).Input(MakeTensor<int32_t>({1}, {1})).Create(),
                {"op Relu (opset 13) is not supported for dtype INT32"});
}

TEST(ElementwiseTest, Sigmoid) {
  // 1/(1+e^0) = 0.5; 1/(1+e^-2) = 0.8807970779778823; 1 - that for -2; saturates without NaN.
  ExpectTensor<double>(
      OpTest("Sigmoid", 13).Input(MakeTensor<double>({5}, {0, 2, -2, -1000, 1000})).RunOne(), {5},
      {0.5, 0.8807970779778823, 0.11920292202211755, 0, 1}, 1e-15);
  ExpectTensor<float>(OpTest("Sigmoid", 7).Input(MakeTensor<float>({2}, {-200, 200})).RunOne(), {2},
                      {0, 1}, 1e-7);
}

TEST(ElementwiseTest, Tanh) {
  // tanh(1) = 0.7615941559557649.
  ExpectTensor<double>(OpTest("Tanh", 13).Input(MakeTensor<double>({4}, {0, 1, -1, 20})).RunOne(),
                       {4}, {0, 0.7615941559557649, -0.7615941559557649, 1}, 1e-15);
}

TEST(ElementwiseTest, RandomUnaryMatchesFormulas) {
  std::mt19937 rng(11);
  const std::vector<double> x = RandomValues<double>(257, rng, -30, 30);
  std::vector<double> relu, sigmoid, tanh_;
  for (double v : x) {
    relu.push_back(v > 0 ? v : 0);
    sigmoid.push_back(1 / (1 + std::exp(-v)));
    tanh_.push_back((std::exp(v) - std::exp(-v)) / (std::exp(v) + std::exp(-v)));
  }
  ExpectTensor<double>(OpTest("Relu", 14).Input(MakeTensor<double>({257}, x)).RunOne(), {257},
                       relu);
  ExpectTensor<double>(OpTest("Sigmoid", 13).Input(MakeTensor<double>({257}, x)).RunOne(), {257},
                       sigmoid, 1e-14);
  ExpectTensor<double>(OpTest("Tanh", 13).Input(MakeTensor<double>({257}, x)).RunOne(), {257},
                       tanh_, 1e-14);
}

TEST(ElementwiseTest, UnsupportedDtypesAreRejected) {
  ExpectInvalid(OpTest("Add", 13)
                    .Input(MakeTensor<bool>({1}, {true}))
                    .Input(MakeTensor<bool>({1}, {true}))
                    .Create(),
                {"op Add (opset 13) is not supported for dtype BOOL"});
  // 8-bit integer Add is only defined from opset 14 (INT32 from 6, MatMul's integers from 9).
  ExpectInvalid(OpTest("Add", 13)
                    .Input(MakeTensor<int8_t>({1}, {1}))
                    .Input(MakeTensor<int8_t>({1}, {1}))
                    .Create(),
                {"not supported for dtype INT8"});
  EXPECT_TRUE(OpTest("Add", 7)
                  .Input(MakeTensor<int32_t>({1}, {1}))
                  .Input(MakeTensor<int32_t>({1}, {1}))
                  .Create()
                  .ok());
  // An undeclared dtype passes the registry; the kernel rejects it at run time.
  ExpectInvalid(
      OpTest("Tanh", 13).Input(MakeTensor<int32_t>({1}, {1}), DataType::kInvalid).RunStatus(),
      {"Tanh", "unsupported dtype INT32"});
}

}  // namespace
}  // namespace kiln::ref::testing
