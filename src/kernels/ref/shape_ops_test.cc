// SPDX-License-Identifier: Apache-2.0
// Tests for the tensor family's shape and layout kernels (shape_ops.cc, layout_ops.cc): Shape,
// Size, Unsqueeze, Squeeze, Expand, Tile, Slice, Split, ConstantOfShape, Range, Trilu, EyeLike,
// DepthToSpace, SpaceToDepth, Compress, NonZero, ReverseSequence, OneHot, CumSum. Hand-checked
// cases (expected values worked out in the comments), error paths, and randomized comparisons of
// Slice, Tile and DepthToSpace against index math written independently here.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

std::vector<float> Iota(int64_t n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}
OwnedTensor I64(const std::vector<int64_t>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeTensor<int64_t>({n}, v);
}
OwnedTensor I64Scalar(int64_t v) { return MakeTensor<int64_t>({}, {v}); }

TEST(ShapeTest, StartEnd) {
  const OwnedTensor x = MakeTensor<float>({2, 3, 4}, Iota(24));
  ExpectTensor<int64_t>(OpTest("Shape", 13).Input(x).RunOne(), {3}, {2, 3, 4});
  // start -2 -> 1, end 10 clamps to 3: dims [3, 4].
  ExpectTensor<int64_t>(
      OpTest("Shape", 15).Attr(IntAttr("start", -2)).Attr(IntAttr("end", 10)).Input(x).RunOne(),
      {2}, {3, 4});
  // start > end: empty.
  ExpectTensor<int64_t>(
      OpTest("Shape", 15).Attr(IntAttr("start", 2)).Attr(IntAttr("end", 1)).Input(x).RunOne(), {0},
      {});
  ExpectInvalid(OpTest("Shape", 13).Attr(IntAttr("start", 1)).Input(x).Create(),
                {"Shape", "'start' is not defined before opset 15"});
  ExpectTensor<int64_t>(OpTest("Size", 13).Input(x).RunOne(), {}, {24});
  ExpectTensor<int64_t>(OpTest("Size", 7).Input(MakeTensor<std::string>({0, 2}, {})).RunOne(), {},
                        {0});
}

TEST(UnsqueezeSqueezeTest, Axes) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, Iota(6));
  // Axes [-1, 0] of an output of rank 4: dims 0 and 3 are new -> [1,2,3,1].
  ExpectTensor<float>(OpTest("Unsqueeze", 13).Input(x).ConstInput(I64({-1, 0})).RunOne(),
                      {1, 2, 3, 1}, Iota(6));
  ExpectTensor<float>(OpTest("Unsqueeze", 7).Attr(IntsAttr("axes", {1})).Input(x).RunOne(),
                      {2, 1, 3}, Iota(6));
  ExpectInvalid(OpTest("Unsqueeze", 13).Input(x).ConstInput(I64({0, 0})).RunStatus(),
                {"Unsqueeze", "appears twice"});
  ExpectInvalid(OpTest("Unsqueeze", 13).Input(x).ConstInput(I64({3})).RunStatus(),
                {"Unsqueeze", "out of range"});
  ExpectInvalid(OpTest("Unsqueeze", 7).Attr(IntsAttr("axes", {-1})).Input(x).RunStatus(),
                {"Unsqueeze", "out of range"});
  ExpectInvalid(OpTest("Unsqueeze", 11).Input(x).Create(), {"Unsqueeze", "'axes' is required"});
  ExpectInvalid(OpTest("Unsqueeze", 13).Attr(IntsAttr("axes", {0})).Input(x).Create(),
                {"Unsqueeze", "'axes' was removed in opset 13"});

  const OwnedTensor y = MakeTensor<float>({1, 3, 1}, Iota(3));
  ExpectTensor<float>(OpTest("Squeeze", 13).Input(y).RunOne(), {3}, Iota(3));
  ExpectTensor<float>(OpTest("Squeeze", 13).Input(y).ConstInput(I64({-1})).RunOne(), {1, 3},
                      Iota(3));
  ExpectTensor<float>(OpTest("Squeeze", 11).Attr(IntsAttr("axes", {0})).Input(y).RunOne(), {3, 1},
                      Iota(3));
  ExpectInvalid(OpTest("Squeeze", 13).Input(y).ConstInput(I64({1})).RunStatus(),
                {"Squeeze", "size is not 1"});
}

TEST(ExpandTest, Broadcasts) {
  // [3,1] expanded by [2,1,2]: result [2,3,2], each row value repeated twice, block twice.
  const OwnedTensor x = MakeTensor<int32_t>({3, 1}, {1, 2, 3});
  ExpectTensor<int32_t>(OpTest("Expand", 13).Input(x).ConstInput(I64({2, 1, 2})).RunOne(),
                        {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  // A shape dim of 1 keeps the input dim (bidirectional).
  ExpectTensor<int32_t>(OpTest("Expand", 8).Input(x).ConstInput(I64({1, 1})).RunOne(), {3, 1},
                        {1, 2, 3});
  ExpectInvalid(OpTest("Expand", 13).Input(x).ConstInput(I64({2, 2})).RunStatus(),
                {"Expand", "incompatible broadcast shapes"});
  ExpectInvalid(OpTest("Expand", 13).Input(x).ConstInput(I64({-2})).RunStatus(), {"Expand"});
}

TEST(TileTest, HandChecked) {
  // [[1,2],[3,4]] tiled [1,2]: rows [1,2,1,2], [3,4,3,4].
  const OwnedTensor x = MakeTensor<std::string>({2, 2}, {"a", "b", "c", "d"});
  ExpectTensor<std::string>(OpTest("Tile", 13).Input(x).ConstInput(I64({1, 2})).RunOne(), {2, 4},
                            {"a", "b", "a", "b", "c", "d", "c", "d"});
  // Opset 7: repeats [2, 1] (opset 1's tiles=2 along axis 0, as the importer's version adapter
  // writes it).
  ExpectTensor<std::string>(OpTest("Tile", 7).Input(x).ConstInput(I64({2, 1})).RunOne(), {4, 2},
                            {"a", "b", "c", "d", "a", "b", "c", "d"});
  ExpectInvalid(OpTest("Tile", 13).Input(x).ConstInput(I64({1})).RunStatus(),
                {"Tile", "repeats has 1 entries"});
  ExpectInvalid(OpTest("Tile", 13).Input(x).ConstInput(I64({1, -1})).RunStatus(),
                {"Tile", "repeats must be >= 0"});
}

TEST(TileTest, RandomizedAgainstCoordinates) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims, reps, out_dims;
    for (int d = 0; d < rank; ++d) {
      dims.push_back(1 + static_cast<int64_t>(rng() % 3));
      reps.push_back(static_cast<int64_t>(rng() % 3));
      out_dims.push_back(dims.back() * reps.back());
    }
    const Shape s(dims);
    const std::vector<float> v = RandomValues<float>(s.NumElements(), rng);
    const OwnedTensor y =
        OpTest("Tile", 13).Input(MakeTensor<float>(s, v)).ConstInput(I64(reps)).RunOne();
    const Shape os(out_dims);
    std::vector<float> expected(static_cast<size_t>(os.NumElements()));
    const std::vector<int64_t> in_strides = RowMajorStrides(dims);
    for (int64_t o = 0; o < os.NumElements(); ++o) {
      const std::vector<int64_t> c = Unravel(o, out_dims);
      int64_t src = 0;
      for (size_t d = 0; d < c.size(); ++d) src += (c[d] % dims[d]) * in_strides[d];
      expected[static_cast<size_t>(o)] = v[static_cast<size_t>(src)];
    }
    ExpectTensor<float>(y, os, expected);
  }
}

TEST(SliceTest, HandChecked) {
  const OwnedTensor x = MakeTensor<float>({3, 4}, Iota(12));
  // Rows 0..2 step 2 -> rows 0, 2; cols -1 down to (exclusive) 0 step -2 -> cols 3, 1.
  // Row 0: [3, 1]; row 2: [11, 9].
  ExpectTensor<float>(OpTest("Slice", 13)
                          .Input(x)
                          .ConstInput(I64({0, -1}))
                          .ConstInput(I64({3, 0}))
                          .ConstInput(I64({0, 1}))
                          .ConstInput(I64({2, -2}))
                          .RunOne(),
                      {2, 2}, {3, 1, 11, 9});
  // Out-of-bounds ends clamp: cols 1..INT64_MAX -> 1, 2, 3.
  ExpectTensor<float>(OpTest("Slice", 13)
                          .Input(x)
                          .ConstInput(I64({1}))
                          .ConstInput(I64({INT64_MAX}))
                          .ConstInput(I64({-1}))
                          .RunOne(),
                      {3, 3}, {1, 2, 3, 5, 6, 7, 9, 10, 11});
  // Opset 7-9 attributes: rows 1..2.
  ExpectTensor<float>(OpTest("Slice", 7)
                          .Attr(IntsAttr("starts", {1}))
                          .Attr(IntsAttr("ends", {2}))
                          .Attr(IntsAttr("axes", {0}))
                          .Input(x)
                          .RunOne(),
                      {1, 4}, {4, 5, 6, 7});
  // Reverse everything with INT64_MIN end.
  ExpectTensor<float>(OpTest("Slice", 13)
                          .Input(MakeTensor<float>({3}, {1, 2, 3}))
                          .ConstInput(I64({-1}))
                          .ConstInput(I64({INT64_MIN}))
                          .ConstInput(I64({0}))
                          .ConstInput(I64({-1}))
                          .RunOne(),
                      {3}, {3, 2, 1});
  ExpectInvalid(OpTest("Slice", 13)
                    .Input(x)
                    .ConstInput(I64({0}))
                    .ConstInput(I64({1}))
                    .ConstInput(I64({0}))
                    .ConstInput(I64({0}))
                    .RunStatus(),
                {"Slice", "step for axis 0 is 0"});
  ExpectInvalid(
      OpTest("Slice", 13).Input(x).ConstInput(I64({0, 0})).ConstInput(I64({1})).RunStatus(),
      {"Slice", "starts has 2 entries but ends has 1"});
  ExpectInvalid(OpTest("Slice", 13)
                    .Input(x)
                    .ConstInput(I64({0, 0}))
                    .ConstInput(I64({1, 1}))
                    .ConstInput(I64({1, 1}))
                    .RunStatus(),
                {"Slice", "appears twice"});
  ExpectInvalid(OpTest("Slice", 9).Input(x).Create(), {"Slice", "'starts' and 'ends'"});
}

TEST(SliceTest, RandomizedAgainstPython) {
  // Independent model: Python's slice semantics (range(*slice(start, end, step).indices(dim)))
  // except for one rule the ONNX spec states differently: with a negative step a start before
  // the first element is clamped to 0 (ONNX, ONNX Runtime), where Python would give -1 (empty).
  auto py_indices = [](int64_t start, int64_t end, int64_t step, int64_t dim) {
    if (dim == 0) return std::vector<int64_t>{};
    auto adjust = [&](int64_t v, bool is_start) {
      const int64_t lo = step < 0 && !is_start ? -1 : 0, hi = step < 0 ? dim - 1 : dim;
      if (v < 0) {
        v += dim;
        if (v < 0) v = lo;
      } else if (v >= dim) {
        v = hi;
      }
      return v;
    };
    const int64_t s = adjust(start, true), e = adjust(end, false);
    std::vector<int64_t> idx;
    for (int64_t i = s; step > 0 ? i < e : i > e; i += step) idx.push_back(i);
    return idx;
  };
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> dims;
    dims.reserve(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) dims.push_back(static_cast<int64_t>(rng() % 5));
    const Shape s(dims);
    const std::vector<int32_t> v = RandomValues<int32_t>(s.NumElements(), rng, -100, 100);
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<std::vector<int64_t>> picked(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      int64_t n = 0;
      for (int64_t i = 0; i < dims[static_cast<size_t>(d)]; ++i) n = i + 1;
      picked[static_cast<size_t>(d)].resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) picked[static_cast<size_t>(d)][static_cast<size_t>(i)] = i;
      if (rng() % 2 == 0) continue;
      const int64_t st = static_cast<int64_t>(rng() % 13) - 6,
                    en = static_cast<int64_t>(rng() % 13) - 6;
      int64_t step = static_cast<int64_t>(rng() % 7) - 3;
      if (step == 0) step = 1;
      starts.push_back(st);
      ends.push_back(en);
      axes.push_back(rng() % 2 ? d : d - rank);
      steps.push_back(step);
      picked[static_cast<size_t>(d)] = py_indices(st, en, step, dims[static_cast<size_t>(d)]);
    }
    if (starts.empty()) continue;
    std::vector<int64_t> out_dims;
    out_dims.reserve(picked.size());
    for (const auto& p : picked) out_dims.push_back(static_cast<int64_t>(p.size()));
    const Shape os(out_dims);
    const std::vector<int64_t> in_strides = RowMajorStrides(dims);
    std::vector<int32_t> expected;
    for (int64_t o = 0; o < os.NumElements(); ++o) {
      const std::vector<int64_t> c = Unravel(o, out_dims);
      int64_t src = 0;
      for (size_t d = 0; d < c.size(); ++d)
        src += picked[d][static_cast<size_t>(c[d])] * in_strides[d];
      expected.push_back(v[static_cast<size_t>(src)]);
    }
    ExpectTensor<int32_t>(OpTest("Slice", 13)
                              .Input(MakeTensor<int32_t>(s, v))
                              .ConstInput(I64(starts))
                              .ConstInput(I64(ends))
                              .ConstInput(I64(axes))
                              .ConstInput(I64(steps))
                              .RunOne(),
                          os, expected);
  }
}

TEST(SplitTest, PartsAndErrors) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, Iota(6));
  // Along axis 1 into [1, 2]: [[0],[3]] and [[1,2],[4,5]].
  Result<std::vector<OwnedTensor>> r = OpTest("Split", 13)
                                           .Attr(IntAttr("axis", 1))
                                           .Input(x)
                                           .ConstInput(I64({1, 2}))
                                           .Outputs({true, true})
                                           .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {2, 1}, {0, 3});
  ExpectTensor<float>(r->at(1), {2, 2}, {1, 2, 4, 5});
  // Equal parts along axis 0 (attribute form, opsets 2-12).
  r = OpTest("Split", 7).Input(x).Outputs({true, true}).Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(1), {1, 3}, {3, 4, 5});
  ExpectInvalid(
      OpTest("Split", 13).Attr(IntAttr("axis", 1)).Input(x).Outputs({true, true}).RunStatus(),
      {"Split", "cannot be split into 2 equal parts"});
  ExpectInvalid(
      OpTest("Split", 13).Input(x).ConstInput(I64({1, 2})).Outputs({true, true}).RunStatus(),
      {"Split", "sum to 3, but axis 0 has size 2"});
  ExpectInvalid(
      OpTest("Split", 11).Attr(IntsAttr("split", {1})).Input(x).Outputs({true, true}).Create(),
      {"Split", "split has 1 entries but the node has 2 outputs"});
}

TEST(ConstantOfShapeTest, ValueAndDefault) {
  ExpectTensor<float>(OpTest("ConstantOfShape", 9).Input(I64({2, 2})).RunOne(), {2, 2},
                      {0, 0, 0, 0});
  ExpectTensor<int32_t>(OpTest("ConstantOfShape", 9)
                            .Attr(TensorAttr("value", MakeTensor<int32_t>({1}, {7})))
                            .Input(I64({3}))
                            .RunOne(),
                        {3}, {7, 7, 7});
  ExpectTensor<int32_t>(OpTest("ConstantOfShape", 9)
                            .Attr(TensorAttr("value", MakeTensor<int32_t>({1}, {7})))
                            .Input(I64({0, 3}))
                            .RunOne(),
                        {0, 3}, {});
  // Every element width the fill takes, and values that are not zero.
  ExpectTensor<int64_t>(OpTest("ConstantOfShape", 9)
                            .Attr(TensorAttr("value", MakeTensor<int64_t>({1}, {-5})))
                            .Input(I64({2, 3}))
                            .RunOne(),
                        {2, 3}, {-5, -5, -5, -5, -5, -5});
  ExpectTensor<double>(OpTest("ConstantOfShape", 9)
                           .Attr(TensorAttr("value", MakeTensor<double>({1}, {2.5})))
                           .Input(I64({3}))
                           .RunOne(),
                       {3}, {2.5, 2.5, 2.5});
  ExpectTensor<float>(OpTest("ConstantOfShape", 9)
                          .Attr(TensorAttr("value", MakeTensor<float>({1}, {-0.0f})))
                          .Input(I64({2}))
                          .RunOne(),
                      {2}, {-0.0f, -0.0f});
  ExpectTensor<int8_t>(OpTest("ConstantOfShape", 9)
                           .Attr(TensorAttr("value", MakeTensor<int8_t>({1}, {-3})))
                           .Input(I64({4}))
                           .RunOne(),
                       {4}, {-3, -3, -3, -3});
  ExpectTensor<uint16_t>(OpTest("ConstantOfShape", 9)
                             .Attr(TensorAttr("value", MakeTensor<uint16_t>({1}, {40000})))
                             .Input(I64({2}))
                             .RunOne(),
                         {2}, {40000, 40000});
  ExpectInvalid(OpTest("ConstantOfShape", 9)
                    .Attr(TensorAttr("value", MakeTensor<int32_t>({2}, {7, 8})))
                    .Input(I64({3}))
                    .Create(),
                {"ConstantOfShape", "must have one element"});
  ExpectInvalid(OpTest("ConstantOfShape", 9).Input(I64({-1})).RunStatus(), {"ConstantOfShape"});
}

TEST(RangeTest, HandChecked) {
  // 10, 7, 4 (limit 1 exclusive... 10-3*3 = 1 excluded): ceil((1-10)/-3) = 3 elements.
  ExpectTensor<int32_t>(OpTest("Range", 11)
                            .Input(MakeTensor<int32_t>({}, {10}))
                            .Input(MakeTensor<int32_t>({}, {1}))
                            .Input(MakeTensor<int32_t>({}, {-3}))
                            .RunOne(),
                        {3}, {10, 7, 4});
  // 1, 1.5, 2, 2.5: ceil((3-1)/0.5) = 4.
  ExpectTensor<float>(OpTest("Range", 11)
                          .Input(MakeTensor<float>({}, {1}))
                          .Input(MakeTensor<float>({}, {3}))
                          .Input(MakeTensor<float>({}, {0.5f}))
                          .RunOne(),
                      {4}, {1, 1.5f, 2, 2.5f});
  // Empty when the limit is behind the start.
  ExpectTensor<int64_t>(
      OpTest("Range", 11).Input(I64Scalar(5)).Input(I64Scalar(1)).Input(I64Scalar(1)).RunOne(), {0},
      {});
  ExpectInvalid(
      OpTest("Range", 11).Input(I64Scalar(0)).Input(I64Scalar(5)).Input(I64Scalar(0)).RunStatus(),
      {"Range", "delta is 0"});
  ExpectInvalid(OpTest("Range", 11)
                    .Input(I64Scalar(INT64_MIN))
                    .Input(I64Scalar(INT64_MAX))
                    .Input(I64Scalar(1))
                    .RunStatus(),
                {"Range", "too many elements"});
}

TEST(TriluTest, UpperLower) {
  // 3x3 of 1..9. upper k=1: keep j - i >= 1 -> [0,2,3; 0,0,6; 0,0,0].
  const OwnedTensor x = MakeTensor<int64_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectTensor<int64_t>(OpTest("Trilu", 14).Input(x).ConstInput(I64Scalar(1)).RunOne(), {3, 3},
                        {0, 2, 3, 0, 0, 6, 0, 0, 0});
  // lower k=-1: keep j - i <= -1 -> [0,0,0; 4,0,0; 7,8,0].
  ExpectTensor<int64_t>(
      OpTest("Trilu", 14).Attr(IntAttr("upper", 0)).Input(x).ConstInput(I64Scalar(-1)).RunOne(),
      {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  ExpectTensor<int64_t>(OpTest("Trilu", 14).Input(x).ConstInput(I64Scalar(INT64_MIN)).RunOne(),
                        {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectInvalid(OpTest("Trilu", 14).Input(I64({1, 2})).RunStatus(), {"Trilu", "rank >= 2"});
}

TEST(EyeLikeTest, DtypeAndK) {
  const OwnedTensor x = MakeTensor<int32_t>({2, 3}, {9, 9, 9, 9, 9, 9});
  // k=1: ones at (0,1), (1,2).
  ExpectTensor<int32_t>(OpTest("EyeLike", 9).Attr(IntAttr("k", 1)).Input(x).RunOne(), {2, 3},
                        {0, 1, 0, 0, 0, 1});
  ExpectTensor<double>(OpTest("EyeLike", 9).Attr(IntAttr("dtype", 11)).Input(x).RunOne(), {2, 3},
                       {1, 0, 0, 0, 1, 0});
  ExpectInvalid(OpTest("EyeLike", 9).Attr(IntAttr("dtype", 8)).Input(x).Create(),
                {"EyeLike", "dtype 8"});
  ExpectInvalid(OpTest("EyeLike", 9).Input(I64({1})).RunStatus(), {"EyeLike", "2-D"});
}

TEST(DepthToSpaceTest, ModesAndInverse) {
  // x [1,4,1,1] = 0,1,2,3, blocksize 2. DCR: out (h,w) takes channel (h*2+w)*1 + 0 ->
  // [[0,1],[2,3]]. CRD: channel 0*4 + h*2 + w: the same for one output channel.
  const OwnedTensor x = MakeTensor<float>({1, 4, 1, 1}, Iota(4));
  ExpectTensor<float>(OpTest("DepthToSpace", 11).Attr(IntAttr("blocksize", 2)).Input(x).RunOne(),
                      {1, 1, 2, 2}, {0, 1, 2, 3});
  // x [1,8,1,1], b=2, C'=2. DCR: out channel c at (h,w) = x[(h*2+w)*2+c]: c0 -> 0,2,4,6;
  // c1 -> 1,3,5,7. CRD: x[c*4+h*2+w]: c0 -> 0,1,2,3; c1 -> 4,5,6,7.
  const OwnedTensor x8 = MakeTensor<float>({1, 8, 1, 1}, Iota(8));
  ExpectTensor<float>(OpTest("DepthToSpace", 13).Attr(IntAttr("blocksize", 2)).Input(x8).RunOne(),
                      {1, 2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7});
  ExpectTensor<float>(OpTest("DepthToSpace", 13)
                          .Attr(IntAttr("blocksize", 2))
                          .Attr(StringAttr("mode", "CRD"))
                          .Input(x8)
                          .RunOne(),
                      {1, 2, 2, 2}, Iota(8));
  // SpaceToDepth inverts DCR DepthToSpace on random data.
  std::mt19937 rng(3);
  const std::vector<float> v = RandomValues<float>(2 * 3 * 4 * 6, rng);
  const OwnedTensor s2d = OpTest("SpaceToDepth", 13)
                              .Attr(IntAttr("blocksize", 2))
                              .Input(MakeTensor<float>({2, 3, 4, 6}, v))
                              .RunOne();
  ASSERT_EQ(s2d.shape(), (Shape{2, 12, 2, 3}));
  ExpectTensor<float>(OpTest("DepthToSpace", 13).Attr(IntAttr("blocksize", 2)).Input(s2d).RunOne(),
                      {2, 3, 4, 6}, v);
  ExpectInvalid(OpTest("DepthToSpace", 13).Attr(IntAttr("blocksize", 3)).Input(x8).RunStatus(),
                {"DepthToSpace", "not divisible"});
  ExpectInvalid(OpTest("DepthToSpace", 13).Input(x8).Create(), {"DepthToSpace", "'blocksize'"});
  ExpectInvalid(OpTest("DepthToSpace", 13)
                    .Attr(IntAttr("blocksize", 2))
                    .Attr(StringAttr("mode", "XYZ"))
                    .Input(x8)
                    .Create(),
                {"DepthToSpace", "mode 'XYZ'"});
  ExpectInvalid(OpTest("SpaceToDepth", 13).Attr(IntAttr("blocksize", 3)).Input(x8).RunStatus(),
                {"SpaceToDepth", "not divisible"});
}

TEST(CompressNonZeroTest, HandChecked) {
  const OwnedTensor x = MakeTensor<float>({3, 2}, Iota(6));
  const OwnedTensor cond = MakeTensor<bool>({2}, {false, true});
  // Axis 0 rows where cond: row 1 -> [2,3].
  ExpectTensor<float>(OpTest("Compress", 11).Attr(IntAttr("axis", 0)).Input(x).Input(cond).RunOne(),
                      {1, 2}, {2, 3});
  // No axis: flattened elements 1 -> [1].
  ExpectTensor<float>(OpTest("Compress", 11).Input(x).Input(cond).RunOne(), {1}, {1});
  ExpectInvalid(OpTest("Compress", 11)
                    .Attr(IntAttr("axis", 1))
                    .Input(x)
                    .Input(MakeTensor<bool>({3}, {false, false, true}))
                    .RunStatus(),
                {"Compress", "selects index 2"});
  // NonZero of [[1,0],[0,2]] -> rows [0,1], cols [0,1].
  ExpectTensor<int64_t>(
      OpTest("NonZero", 13).Input(MakeTensor<float>({2, 2}, {1, 0, -0.0f, 2})).RunOne(), {2, 2},
      {0, 1, 0, 1});
  ExpectTensor<int64_t>(
      OpTest("NonZero", 13).Input(MakeTensor<std::string>({3}, {"", "a", ""})).RunOne(), {1, 1},
      {1});
}

TEST(ReverseSequenceTest, HandChecked) {
  // time_axis 0, batch_axis 1: x [3 time, 2 batch]; lens [2, 3].
  // batch 0 reverses the first 2 steps: 0,2,4 -> 2,0,4. batch 1 all 3: 1,3,5 -> 5,3,1.
  const OwnedTensor x = MakeTensor<float>({3, 2}, Iota(6));
  ExpectTensor<float>(OpTest("ReverseSequence", 10).Input(x).Input(I64({2, 3})).RunOne(), {3, 2},
                      {2, 5, 0, 3, 4, 1});
  ExpectInvalid(OpTest("ReverseSequence", 10).Input(x).Input(I64({2, 4})).RunStatus(),
                {"ReverseSequence", "out of range"});
  ExpectInvalid(OpTest("ReverseSequence", 10)
                    .Attr(IntAttr("batch_axis", 0))
                    .Input(x)
                    .Input(I64({1}))
                    .Create(),
                {"ReverseSequence", "batch_axis 0 and time_axis 0"});
}

TEST(OneHotTest, HandChecked) {
  // indices [1, -1, 5], depth 3, values [0, 9], axis -1: rows [0,9,0], [0,0,9], [0,0,0].
  ExpectTensor<float>(OpTest("OneHot", 11)
                          .Input(I64({1, -1, 5}))
                          .Input(MakeTensor<float>({}, {3}))
                          .Input(MakeTensor<float>({2}, {0, 9}))
                          .RunOne(),
                      {3, 3}, {0, 9, 0, 0, 0, 9, 0, 0, 0});
  // axis 0: the transpose.
  ExpectTensor<int32_t>(OpTest("OneHot", 11)
                            .Attr(IntAttr("axis", 0))
                            .Input(I64({1, 0}))
                            .Input(I64Scalar(2))
                            .Input(MakeTensor<int32_t>({2}, {0, 1}))
                            .RunOne(),
                        {2, 2}, {0, 1, 1, 0});
  ExpectInvalid(OpTest("OneHot", 11)
                    .Input(I64({1}))
                    .Input(I64Scalar(0))
                    .Input(MakeTensor<float>({2}, {0, 1}))
                    .RunStatus(),
                {"OneHot", "depth must be >= 1"});
  ExpectInvalid(OpTest("OneHot", 11)
                    .Input(I64({1}))
                    .Input(I64Scalar(2))
                    .Input(MakeTensor<float>({3}, {0, 1, 2}))
                    .RunStatus(),
                {"OneHot", "two elements"});
}

TEST(CumSumTest, Modes) {
  const OwnedTensor x = MakeTensor<double>({4}, {1, 2, 3, 4});
  ExpectTensor<double>(OpTest("CumSum", 14).Input(x).ConstInput(I64Scalar(0)).RunOne(), {4},
                       {1, 3, 6, 10});
  ExpectTensor<double>(
      OpTest("CumSum", 14).Attr(IntAttr("exclusive", 1)).Input(x).ConstInput(I64Scalar(0)).RunOne(),
      {4}, {0, 1, 3, 6});
  ExpectTensor<double>(
      OpTest("CumSum", 14).Attr(IntAttr("reverse", 1)).Input(x).ConstInput(I64Scalar(0)).RunOne(),
      {4}, {10, 9, 7, 4});
  ExpectTensor<double>(OpTest("CumSum", 14)
                           .Attr(IntAttr("reverse", 1))
                           .Attr(IntAttr("exclusive", 1))
                           .Input(x)
                           .ConstInput(I64Scalar(0))
                           .RunOne(),
                       {4}, {9, 7, 4, 0});
  // int8 wraps: 100 + 100 = 200 -> -56.
  ExpectTensor<int8_t>(OpTest("CumSum", 14)
                           .Input(MakeTensor<int8_t>({2}, {100, 100}))
                           .ConstInput(I64Scalar(-1))
                           .RunOne(),
                       {2}, {100, -56});
  ExpectInvalid(OpTest("CumSum", 14).Input(x).ConstInput(I64Scalar(1)).RunStatus(),
                {"CumSum", "axis 1 is out of range"});
  ExpectInvalid(
      OpTest("CumSum", 14).Attr(IntAttr("reverse", 2)).Input(x).ConstInput(I64Scalar(0)).Create(),
      {"CumSum", "must be 0 or 1"});
}

}  // namespace
}  // namespace kiln::ref::testing
