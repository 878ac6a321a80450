// SPDX-License-Identifier: Apache-2.0
// Tests for the reference reductions and ArgMax / ArgMin (reduce.cc): hand-checked values for
// every reduction, keepdims, negative and input-supplied axes, noop_with_empty_axes, integer
// wrap-around, empty reductions, a randomized comparison against a direct per-output loop, and
// the error paths (bad attributes at load, bad axes at run time).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

// x = [[1, 2, 3], [4, 5, 6]] reduced over axis 1 (rows) or axis 0 (columns).
const std::vector<float> kX = {1, 2, 3, 4, 5, 6};

OwnedTensor RunReduce(const std::string& op, int64_t opset, const std::vector<int64_t>& axes,
                      int64_t keepdims, const OwnedTensor& x) {
  OpTest t(op, opset);
  t.Attr(IntAttr("keepdims", keepdims));
  if (!axes.empty()) t.Attr(IntsAttr("axes", axes));
  return t.Input(x).RunOne();
}

TEST(ReduceTest, HandCheckedAlongAxis1) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, kX);
  // Rows [1,2,3] and [4,5,6].
  ExpectTensor<float>(RunReduce("ReduceMean", 13, {1}, 0, x), {2}, {2, 5});
  ExpectTensor<float>(RunReduce("ReduceMax", 13, {1}, 1, x), {2, 1}, {3, 6});
  ExpectTensor<float>(RunReduce("ReduceMin", 13, {-1}, 0, x), {2}, {1, 4});
  ExpectTensor<float>(RunReduce("ReduceProd", 13, {1}, 0, x), {2}, {6, 120});
  ExpectTensor<float>(RunReduce("ReduceSumSquare", 13, {1}, 0, x), {2}, {14, 77});
  // L2: sqrt(14), sqrt(77).
  ExpectTensor<float>(RunReduce("ReduceL2", 13, {1}, 0, x), {2},
                      {std::sqrt(14.0f), std::sqrt(77.0f)}, 1e-6);
  // LogSum: log 6, log 15.
  ExpectTensor<float>(RunReduce("ReduceLogSum", 13, {1}, 0, x), {2},
                      {std::log(6.0f), std::log(15.0f)}, 1e-6);
  // LogSumExp of [1,2,3] = 3 + log(e^-2 + e^-1 + 1).
  const float lse = 3 + std::log(std::exp(-2.0f) + std::exp(-1.0f) + 1);
  ExpectTensor<float>(RunReduce("ReduceLogSumExp", 13, {1}, 0, x), {2}, {lse, lse + 3}, 1e-6);
  // L1 of [-1, 2] is 3.
  ExpectTensor<float>(RunReduce("ReduceL1", 13, {0}, 1, MakeTensor<float>({2}, {-1, 2})), {1}, {3});
}

TEST(ReduceTest, DefaultAxesReduceEverything) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, kX);
  // 1 + ... + 6 = 21, kept as [1, 1] by default.
  ExpectTensor<float>(OpTest("ReduceSum", 13).Input(x).RunOne(), {1, 1}, {21});
  ExpectTensor<float>(OpTest("ReduceSum", 7).Input(x).RunOne(), {1, 1}, {21});
  ExpectTensor<float>(RunReduce("ReduceMean", 13, {}, 0, x), {}, {3.5});
}

TEST(ReduceTest, ReduceSumAxesInput) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, kX);
  // Columns: [5, 7, 9].
  ExpectTensor<float>(
      OpTest("ReduceSum", 13).Input(x).Input(MakeTensor<int64_t>({1}, {0})).RunOne(), {1, 3},
      {5, 7, 9});
  // Empty axes: everything, or identity with noop_with_empty_axes=1.
  ExpectTensor<float>(OpTest("ReduceSum", 13).Input(x).Input(MakeTensor<int64_t>({0}, {})).RunOne(),
                      {1, 1}, {21});
  ExpectTensor<float>(OpTest("ReduceSum", 13)
                          .Attr(IntAttr("noop_with_empty_axes", 1))
                          .Input(x)
                          .Input(MakeTensor<int64_t>({0}, {}))
                          .RunOne(),
                      {2, 3}, kX);
  // Opset 11 takes the attribute, negative allowed: rows [6, 15].
  ExpectTensor<float>(RunReduce("ReduceSum", 11, {-1}, 0, x), {2}, {6, 15});
}

TEST(ReduceTest, Integers) {
  // int32 sum wraps modulo 2^32: 2^31 - 1 + 1 = -2^31.
  const int32_t big = std::numeric_limits<int32_t>::max();
  ExpectTensor<int32_t>(RunReduce("ReduceSum", 11, {0}, 0, MakeTensor<int32_t>({2}, {big, 1})), {},
                        {std::numeric_limits<int32_t>::min()});
  // Integer mean truncates toward zero: (-3 + -4) / 2 = -3.
  ExpectTensor<int64_t>(RunReduce("ReduceMean", 13, {0}, 0, MakeTensor<int64_t>({2}, {-3, -4})), {},
                        {-3});
  ExpectTensor<int8_t>(RunReduce("ReduceMax", 13, {0}, 0, MakeTensor<int8_t>({3}, {-5, 7, 2})), {},
                       {7});
  // L1 of INT32_MIN wraps to itself without UB.
  ExpectTensor<int32_t>(RunReduce("ReduceL1", 13, {0}, 0,
                                  MakeTensor<int32_t>({1}, {std::numeric_limits<int32_t>::min()})),
                        {}, {std::numeric_limits<int32_t>::min()});
  // L2 of [3, 4] = 5; saturates instead of overflowing for huge values.
  ExpectTensor<int32_t>(RunReduce("ReduceL2", 13, {0}, 0, MakeTensor<int32_t>({2}, {3, 4})), {},
                        {5});
  ExpectTensor<uint32_t>(
      RunReduce("ReduceSumSquare", 13, {0}, 0, MakeTensor<uint32_t>({2}, {3, 4})), {}, {25});
}

TEST(ReduceTest, EmptyReductions) {
  const OwnedTensor x = MakeTensor<float>({2, 0}, {});
  const float inf = std::numeric_limits<float>::infinity();
  ExpectTensor<float>(RunReduce("ReduceSum", 11, {1}, 0, x), {2}, {0, 0});
  ExpectTensor<float>(RunReduce("ReduceProd", 13, {1}, 0, x), {2}, {1, 1});
  ExpectTensor<float>(RunReduce("ReduceMax", 13, {1}, 0, x), {2}, {-inf, -inf});
  ExpectTensor<float>(RunReduce("ReduceMin", 13, {1}, 0, x), {2}, {inf, inf});
  ExpectTensor<float>(RunReduce("ReduceLogSumExp", 13, {1}, 0, x), {2}, {-inf, -inf});
  // Integer mean of nothing divides by zero.
  OpTest t("ReduceMean", 13);
  t.Attr(IntsAttr("axes", {1})).Input(MakeTensor<int32_t>({2, 0}, {}));
  ExpectInvalid(t.RunStatus(), {"ReduceMean", "divides by zero"});
  // Reducing the non-empty axis of an empty tensor gives an empty result.
  ExpectTensor<float>(RunReduce("ReduceSum", 11, {0}, 1, x), {1, 0}, {});
}

TEST(ReduceTest, NanPropagatesThroughMaxAndMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const OwnedTensor x = MakeTensor<float>({3}, {1, nan, 2});
  EXPECT_TRUE(std::isnan(RunReduce("ReduceMax", 13, {0}, 0, x).data<float>()[0]));
  EXPECT_TRUE(std::isnan(RunReduce("ReduceMin", 13, {0}, 0, x).data<float>()[0]));
}

TEST(ReduceTest, LogSumExpDoesNotOverflow) {
  // log(e^1000 + e^1000) = 1000 + log 2.
  ExpectTensor<double>(
      RunReduce("ReduceLogSumExp", 13, {0}, 0, MakeTensor<double>({2}, {1000, 1000})), {},
      {1000 + std::log(2.0)}, 1e-12);
}

TEST(ReduceTest, Float16) {
  // FP16 1.5 = 0x3E00, 2.5 = 0x4100; sum 4 = 0x4400.
  ExpectTensor<Float16>(
      RunReduce("ReduceSum", 11, {0}, 0, MakeTensor<Float16>({2}, {{0x3E00}, {0x4100}})), {},
      {Float16{0x4400}});
}

// A direct per-output-element loop over the input coordinates.
std::vector<double> DirectReduce(const std::string& op, const std::vector<double>& x,
                                 const std::vector<int64_t>& dims, const std::vector<bool>& red,
                                 std::vector<int64_t>& out_dims) {
  out_dims.clear();
  for (size_t d = 0; d < dims.size(); ++d) out_dims.push_back(red[d] ? 1 : dims[d]);
  int64_t n_out = 1;
  for (int64_t d : out_dims) n_out *= d;
  std::vector<double> out;
  for (int64_t o = 0; o < n_out; ++o) {
    const std::vector<int64_t> oc = Unravel(o, out_dims);
    std::vector<double> vals;
    for (size_t i = 0; i < x.size(); ++i) {
      const std::vector<int64_t> ic = Unravel(static_cast<int64_t>(i), dims);
      bool match = true;
      for (size_t d = 0; d < dims.size(); ++d) {
        if (!red[d] && ic[d] != oc[d]) match = false;
      }
      if (match) vals.push_back(x[i]);
    }
    double r = 0;
    if (op == "ReduceSum") {
      for (double v : vals) r += v;
    } else if (op == "ReduceMean") {
      for (double v : vals) r += v / static_cast<double>(vals.size());
    } else if (op == "ReduceMax") {
      r = *std::max_element(vals.begin(), vals.end());
    } else if (op == "ReduceProd") {
      r = 1;
      for (double v : vals) r *= v;
    } else if (op == "ReduceLogSumExp") {
      for (double v : vals) r += std::exp(v);
      r = std::log(r);
    }
    out.push_back(r);
  }
  return out;
}

TEST(ReduceTest, RandomMatchesDirectLoop) {
  std::mt19937 rng(7);
  const std::vector<int64_t> dims = {2, 3, 4};
  const std::vector<double> x = RandomValues<double>(24, rng, -2, 2);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceProd", "ReduceLogSumExp"}) {
    for (int mask = 1; mask < 8; ++mask) {
      SCOPED_TRACE(::testing::Message() << op << " mask " << mask);
      std::vector<bool> red(3);
      std::vector<int64_t> axes;
      for (int d = 0; d < 3; ++d) {
        red[static_cast<size_t>(d)] = (mask >> d) & 1;
        if (red[static_cast<size_t>(d)]) axes.push_back(d);
      }
      std::vector<int64_t> out_dims;
      const std::vector<double> expected = DirectReduce(op, x, dims, red, out_dims);
      ExpectTensor<double>(RunReduce(op, 12, axes, 1, MakeTensor<double>({2, 3, 4}, x)),
                           Shape(out_dims), expected, 1e-12);
    }
  }
}

TEST(ReduceTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, kX);
  // Load time: negative axes before 11, noop where axes is an attribute, axes attribute on
  // ReduceSum-13, bad keepdims.
  ExpectInvalid(OpTest("ReduceSum", 10).Attr(IntsAttr("axes", {-1})).Input(x).Create(),
                {"ReduceSum", "negative axis"});
  ExpectInvalid(OpTest("ReduceMean", 13).Attr(IntAttr("noop_with_empty_axes", 1)).Input(x).Create(),
                {"ReduceMean", "noop_with_empty_axes"});
  ExpectInvalid(OpTest("ReduceSum", 13).Attr(IntsAttr("axes", {0})).Input(x).Create(),
                {"ReduceSum", "axes"});
  ExpectInvalid(OpTest("ReduceMax", 13).Attr(IntAttr("keepdims", 2)).Input(x).Create(),
                {"ReduceMax", "keepdims"});
  // Run time: axis out of range, duplicate axis, axes input of the wrong dtype.
  ExpectInvalid(OpTest("ReduceMax", 13).Attr(IntsAttr("axes", {2})).Input(x).RunStatus(),
                {"ReduceMax", "out of range"});
  ExpectInvalid(OpTest("ReduceMin", 13).Attr(IntsAttr("axes", {1, -1})).Input(x).RunStatus(),
                {"ReduceMin", "twice"});
  ExpectInvalid(OpTest("ReduceSum", 13).Input(x).Input(MakeTensor<int32_t>({1}, {0})).RunStatus(),
                {"ReduceSum", "INT64"});
}

TEST(ArgMaxTest, HandChecked) {
  // x = [[1, 5, 5], [7, 2, 7]].
  const OwnedTensor x = MakeTensor<float>({2, 3}, {1, 5, 5, 7, 2, 7});
  // Axis 1: first max at 1 and 0; last max at 2 and 2.
  ExpectTensor<int64_t>(
      OpTest("ArgMax", 13).Attr(IntAttr("axis", 1)).Attr(IntAttr("keepdims", 0)).Input(x).RunOne(),
      {2}, {1, 0});
  ExpectTensor<int64_t>(OpTest("ArgMax", 13)
                            .Attr(IntAttr("axis", -1))
                            .Attr(IntAttr("select_last_index", 1))
                            .Input(x)
                            .RunOne(),
                        {2, 1}, {2, 2});
  // ArgMin along axis 0 (default): columns [1,7] [5,2] [5,7] -> 0, 1, 0.
  ExpectTensor<int64_t>(OpTest("ArgMin", 11).Input(x).RunOne(), {1, 3}, {0, 1, 0});
  ExpectTensor<int64_t>(
      OpTest("ArgMin", 13).Input(MakeTensor<int8_t>({4}, {3, -2, -2, 9})).RunOne(), {1}, {1});
}

TEST(ArgMaxTest, RandomMatchesDirectLoop) {
  std::mt19937 rng(3);
  const std::vector<int64_t> dims = {3, 4, 2};
  // Small integers so that ties happen.
  const std::vector<int32_t> x = RandomValues<int32_t>(24, rng, 0, 3);
  for (int axis = 0; axis < 3; ++axis) {
    for (int last = 0; last < 2; ++last) {
      std::vector<int64_t> out_dims = dims;
      out_dims[static_cast<size_t>(axis)] = 1;
      std::vector<int64_t> expected;
      for (int64_t o = 0; o < 24 / dims[static_cast<size_t>(axis)]; ++o) {
        std::vector<int64_t> c = Unravel(o, out_dims);
        int64_t best = -1;
        int32_t best_v = 0;
        for (int64_t k = 0; k < dims[static_cast<size_t>(axis)]; ++k) {
          c[static_cast<size_t>(axis)] = k;
          const int32_t v = x[static_cast<size_t>(c[0] * 8 + c[1] * 2 + c[2])];
          if (best < 0 || v > best_v || (last == 1 && v == best_v)) {
            best = k;
            best_v = v;
          }
        }
        expected.push_back(best);
      }
      ExpectTensor<int64_t>(OpTest("ArgMax", 12)
                                .Attr(IntAttr("axis", axis))
                                .Attr(IntAttr("select_last_index", last))
                                .Input(MakeTensor<int32_t>({3, 4, 2}, x))
                                .RunOne(),
                            Shape(out_dims), expected);
    }
  }
}

TEST(ArgMaxTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectInvalid(OpTest("ArgMax", 11).Attr(IntAttr("select_last_index", 1)).Input(x).Create(),
                {"ArgMax", "select_last_index"});
  ExpectInvalid(OpTest("ArgMin", 10).Attr(IntAttr("axis", -1)).Input(x).Create(),
                {"ArgMin", "negative axis"});
  ExpectInvalid(OpTest("ArgMax", 13).Attr(IntAttr("axis", 2)).Input(x).RunStatus(),
                {"ArgMax", "out of range"});
  ExpectInvalid(OpTest("ArgMax", 13).Input(MakeTensor<float>({0, 2}, {})).RunStatus(),
                {"ArgMax", "empty"});
  ExpectInvalid(OpTest("ArgMax", 13).Input(MakeTensor<float>({}, {1})).RunStatus(),
                {"ArgMax", "scalar"});
}

}  // namespace
}  // namespace kiln::ref::testing
