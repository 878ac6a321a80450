// SPDX-License-Identifier: Apache-2.0
// Tests for the tensor family's index-driven kernels: Gather, GatherElements, GatherND, Scatter,
// ScatterElements, ScatterND (gather_scatter.cc), Pad (pad.cc), TopK and Unique (sort_ops.cc),
// Resize and Upsample (resize.cc), StringNormalizer (string_ops.cc). Hand-checked cases with the
// expected values worked out in comments, error paths, and randomized comparisons of Gather,
// GatherND and Pad against index math written independently here.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return v;
}
OwnedTensor I64(const Shape& s, const std::vector<int64_t>& v) { return MakeTensor<int64_t>(s, v); }
OwnedTensor I64(const std::vector<int64_t>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeTensor<int64_t>({n}, v);
}

TEST(GatherTest, HandChecked) {
  // x [3,2] = [[0,1],[2,3],[4,5]]; indices [[2,-3]] along axis 0 -> [[[4,5],[0,1]]].
  const OwnedTensor x = MakeTensor<float>({3, 2}, Iota(6));
  ExpectTensor<float>(OpTest("Gather", 13).Input(x).Input(I64({1, 2}, {2, -3})).RunOne(), {1, 2, 2},
                      {4, 5, 0, 1});
  // Axis 1 with a scalar index 1 -> [1,3,5].
  ExpectTensor<float>(OpTest("Gather", 13)
                          .Attr(IntAttr("axis", 1))
                          .Input(x)
                          .Input(MakeTensor<int32_t>({}, {1}))
                          .RunOne(),
                      {3}, {1, 3, 5});
  ExpectInvalid(OpTest("Gather", 13).Input(x).Input(I64({3})).RunStatus(),
                {"Gather", "index 3 is out of range [-3, 3)"});
  ExpectInvalid(OpTest("Gather", 13).Input(x).Input(MakeTensor<float>({1}, {0})).RunStatus(),
                {"Gather", "indices must be INT32 or INT64"});
}

TEST(GatherTest, RandomizedStrings) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::vector<int64_t> dims;
    dims.reserve(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng() % 3));
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    const Shape s(dims);
    std::vector<std::string> v;
    for (int64_t i = 0; i < s.NumElements(); ++i) v.push_back("s" + std::to_string(i));
    const int64_t n = static_cast<int64_t>(rng() % 4);
    std::vector<int64_t> idx;
    const int64_t dim = dims[static_cast<size_t>(axis)];
    for (int64_t i = 0; i < n; ++i)
      idx.push_back(static_cast<int64_t>(rng() % static_cast<unsigned>(2 * dim)) - dim);
    // Expected: out[o, j, i] = x[o, norm(idx[j]), i].
    std::vector<int64_t> out_dims(dims.begin(), dims.begin() + axis);
    out_dims.push_back(n);
    out_dims.insert(out_dims.end(), dims.begin() + axis + 1, dims.end());
    const Shape os(out_dims);
    const std::vector<int64_t> in_strides = RowMajorStrides(dims);
    std::vector<std::string> expected;
    for (int64_t o = 0; o < os.NumElements(); ++o) {
      std::vector<int64_t> c = Unravel(o, out_dims);
      int64_t k = idx[static_cast<size_t>(c[static_cast<size_t>(axis)])];
      c[static_cast<size_t>(axis)] = k < 0 ? k + dim : k;
      int64_t src = 0;
      for (size_t d = 0; d < c.size(); ++d) src += c[d] * in_strides[d];
      expected.push_back(v[static_cast<size_t>(src)]);
    }
    ExpectTensor<std::string>(OpTest("Gather", 13)
                                  .Attr(IntAttr("axis", axis))
                                  .Input(MakeTensor<std::string>(s, v))
                                  .Input(I64(idx))
                                  .RunOne(),
                              os, expected);
  }
}

TEST(GatherElementsTest, HandChecked) {
  // x [[1,2],[3,4]], indices [[0,0],[1,0]], axis 1: out[i][j] = x[i][idx[i][j]] -> [[1,1],[4,3]].
  const OwnedTensor x = MakeTensor<int32_t>({2, 2}, {1, 2, 3, 4});
  ExpectTensor<int32_t>(OpTest("GatherElements", 13)
                            .Attr(IntAttr("axis", 1))
                            .Input(x)
                            .Input(I64({2, 2}, {0, 0, 1, 0}))
                            .RunOne(),
                        {2, 2}, {1, 1, 4, 3});
  // axis 0, negative index -1 -> row 1: out[0][j] = x[idx][j]: idx [[-1, 0]] -> [3, 2].
  ExpectTensor<int32_t>(OpTest("GatherElements", 13).Input(x).Input(I64({1, 2}, {-1, 0})).RunOne(),
                        {1, 2}, {3, 2});
  ExpectInvalid(OpTest("GatherElements", 13).Input(x).Input(I64({1, 2}, {2, 0})).RunStatus(),
                {"GatherElements", "out of range"});
  ExpectInvalid(OpTest("GatherElements", 13).Input(x).Input(I64({2}, {0, 0})).RunStatus(),
                {"GatherElements", "must have the rank of data"});
}

TEST(GatherNDTest, HandCheckedAndBatch) {
  // x [2,2] = [[0,1],[2,3]]; indices [[1,0],[0,1]] -> [x[1][0], x[0][1]] = [2, 1].
  const OwnedTensor x = MakeTensor<float>({2, 2}, Iota(4));
  ExpectTensor<float>(OpTest("GatherND", 13).Input(x).Input(I64({2, 2}, {1, 0, 0, 1})).RunOne(),
                      {2}, {2, 1});
  // Slices: indices [[1]] -> [[2,3]].
  ExpectTensor<float>(OpTest("GatherND", 13).Input(x).Input(I64({1, 1}, {1})).RunOne(), {1, 2},
                      {2, 3});
  // batch_dims 1: x [2,2,2] = 0..7, indices [[1],[0]] -> batch 0 row 1 = [2,3], batch 1 row 0 =
  // [4,5].
  ExpectTensor<float>(OpTest("GatherND", 13)
                          .Attr(IntAttr("batch_dims", 1))
                          .Input(MakeTensor<float>({2, 2, 2}, Iota(8)))
                          .Input(I64({2, 1}, {1, 0}))
                          .RunOne(),
                      {2, 2}, {2, 3, 4, 5});
  ExpectInvalid(OpTest("GatherND", 13).Input(x).Input(I64({1, 3}, {0, 0, 0})).RunStatus(),
                {"GatherND", "last dim must be in [1, 2]"});
  ExpectInvalid(OpTest("GatherND", 13).Input(x).Input(I64({1, 2}, {0, 2})).RunStatus(),
                {"GatherND", "out of range"});
  ExpectInvalid(
      OpTest("GatherND", 11).Attr(IntAttr("batch_dims", 1)).Input(x).Input(I64({1})).Create(),
      {"GatherND", "'batch_dims' is not defined before opset 12"});
}

TEST(GatherNDTest, RandomizedAgainstCoordinates) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<int64_t> dims = {2, 1 + static_cast<int64_t>(rng() % 3),
                                       1 + static_cast<int64_t>(rng() % 3)};
    const int64_t k = 1 + static_cast<int64_t>(rng() % 2);  // batch_dims 1, k <= 2
    const int64_t tuples = 1 + static_cast<int64_t>(rng() % 3);
    std::vector<int64_t> idx;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t t = 0; t < tuples; ++t) {
        for (int64_t j = 0; j < k; ++j) {
          idx.push_back(static_cast<int64_t>(
              rng() % static_cast<unsigned>(dims[static_cast<size_t>(1 + j)])));
        }
      }
    }
    const Shape s(dims);
    const std::vector<float> v = RandomValues<float>(s.NumElements(), rng);
    std::vector<float> expected;
    const int64_t slab = k == 1 ? dims[2] : 1;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t* tup = &idx[static_cast<size_t>((b * tuples + t) * k)];
        const int64_t base = b * dims[1] * dims[2] + tup[0] * dims[2] + (k == 2 ? tup[1] : 0);
        for (int64_t e = 0; e < slab; ++e) expected.push_back(v[static_cast<size_t>(base + e)]);
      }
    }
    const Shape os = k == 1 ? Shape{2, tuples, dims[2]} : Shape{2, tuples};
    ExpectTensor<float>(OpTest("GatherND", 13)
                            .Attr(IntAttr("batch_dims", 1))
                            .Input(MakeTensor<float>(s, v))
                            .Input(I64({2, tuples, k}, idx))
                            .RunOne(),
                        os, expected);
  }
}

TEST(ScatterTest, ElementsAndND) {
  // data zeros [2,3], indices [[1,0,2]], updates [[7,8,9]], axis 1: row 0 becomes [8,7,9].
  const OwnedTensor data = MakeTensor<float>({2, 3}, std::vector<float>(6, 0));
  ExpectTensor<float>(OpTest("ScatterElements", 16)
                          .Attr(IntAttr("axis", 1))
                          .Input(data)
                          .Input(I64({1, 3}, {1, 0, 2}))
                          .Input(MakeTensor<float>({1, 3}, {7, 8, 9}))
                          .RunOne(),
                      {2, 3}, {8, 7, 9, 0, 0, 0});
  // Duplicates with add: both updates land on (0,1): 1 + 2 = 3 (data 0).
  ExpectTensor<float>(OpTest("ScatterElements", 16)
                          .Attr(IntAttr("axis", 1))
                          .Attr(StringAttr("reduction", "add"))
                          .Input(data)
                          .Input(I64({1, 2}, {1, -2}))
                          .Input(MakeTensor<float>({1, 2}, {1, 2}))
                          .RunOne(),
                      {2, 3}, {0, 3, 0, 0, 0, 0});
  // Deprecated Scatter, axis 0: (idx 1, col 0) <- 5.
  ExpectTensor<float>(OpTest("Scatter", 10)
                          .Input(data)
                          .Input(I64({1, 1}, {1}))
                          .Input(MakeTensor<float>({1, 1}, {5}))
                          .RunOne(),
                      {2, 3}, {0, 0, 0, 5, 0, 0});
  // ScatterND: row 1 replaced by [4,5,6]; then mul reduction on element (0,2) by 3 -> 3*2.
  ExpectTensor<float>(OpTest("ScatterND", 13)
                          .Input(data)
                          .Input(I64({1, 1}, {1}))
                          .Input(MakeTensor<float>({1, 3}, {4, 5, 6}))
                          .RunOne(),
                      {2, 3}, {0, 0, 0, 4, 5, 6});
  ExpectTensor<int32_t>(OpTest("ScatterND", 16)
                            .Attr(StringAttr("reduction", "mul"))
                            .Input(MakeTensor<int32_t>({2, 3}, {1, 1, 2, 1, 1, 1}))
                            .Input(I64({1, 2}, {0, 2}))
                            .Input(MakeTensor<int32_t>({1}, {3}))
                            .RunOne(),
                        {2, 3}, {1, 1, 6, 1, 1, 1});
  ExpectInvalid(OpTest("ScatterND", 16)
                    .Input(data)
                    .Input(I64({1, 1}, {1}))
                    .Input(MakeTensor<float>({1, 2}, {4, 5}))
                    .RunStatus(),
                {"ScatterND", "updates have shape [1,2], expected [1,3]"});
  ExpectInvalid(OpTest("ScatterElements", 16)
                    .Input(data)
                    .Input(I64({1, 1}, {2}))
                    .Input(MakeTensor<float>({1, 1}, {5}))
                    .RunStatus(),
                {"ScatterElements", "out of range"});
  ExpectInvalid(OpTest("ScatterElements", 16)
                    .Attr(StringAttr("reduction", "max"))
                    .Input(data)
                    .Input(I64({1, 1}, {0}))
                    .Input(MakeTensor<float>({1, 1}, {5}))
                    .Create(),
                {"ScatterElements", "reduction 'max'"});
  ExpectInvalid(OpTest("ScatterND", 13)
                    .Attr(StringAttr("reduction", "add"))
                    .Input(data)
                    .Input(I64({1, 1}, {0}))
                    .Input(MakeTensor<float>({1, 3}, {5, 5, 5}))
                    .Create(),
                {"ScatterND", "'reduction' is not defined before opset 16"});
}

TEST(PadTest, Modes) {
  // x [1,3] = [1,2,3], pads begin (0,2) end (0,1).
  const OwnedTensor x = MakeTensor<float>({1, 3}, {1, 2, 3});
  const OwnedTensor pads = I64({0, 2, 0, 1});
  // constant 9: [9,9,1,2,3,9].
  ExpectTensor<float>(
      OpTest("Pad", 13).Input(x).ConstInput(pads).ConstInput(MakeTensor<float>({}, {9})).RunOne(),
      {1, 6}, {9, 9, 1, 2, 3, 9});
  // reflect: [3,2,1,2,3,2].
  ExpectTensor<float>(
      OpTest("Pad", 13).Attr(StringAttr("mode", "reflect")).Input(x).ConstInput(pads).RunOne(),
      {1, 6}, {3, 2, 1, 2, 3, 2});
  // edge: [1,1,1,2,3,3].
  ExpectTensor<float>(
      OpTest("Pad", 13).Attr(StringAttr("mode", "edge")).Input(x).ConstInput(pads).RunOne(), {1, 6},
      {1, 1, 1, 2, 3, 3});
  // Opset 2-10 attributes with negative pads (crop one from the front).
  ExpectTensor<float>(OpTest("Pad", 7).Attr(IntsAttr("pads", {0, -1, 0, 0})).Input(x).RunOne(),
                      {1, 2}, {2, 3});
  // Strings pad with the empty string by default.
  ExpectTensor<std::string>(
      OpTest("Pad", 13).Input(MakeTensor<std::string>({1}, {"a"})).ConstInput(I64({1, 0})).RunOne(),
      {2}, {"", "a"});
  ExpectInvalid(OpTest("Pad", 13).Input(x).ConstInput(I64({0, 0})).RunStatus(),
                {"Pad", "pads has 2 entries, expected 4"});
  ExpectInvalid(OpTest("Pad", 13).Input(x).ConstInput(I64({0, -4, 0, 0})).RunStatus(),
                {"Pad", "invalid size"});
  ExpectInvalid(
      OpTest("Pad", 13).Attr(StringAttr("mode", "wrap")).Input(x).ConstInput(pads).Create(),
      {"Pad", "mode 'wrap'"});
  ExpectInvalid(OpTest("Pad", 13)
                    .Attr(StringAttr("mode", "edge"))
                    .Input(MakeTensor<float>({0}, {}))
                    .ConstInput(I64({1, 0}))
                    .RunStatus(),
                {"Pad", "size 0"});
}

TEST(PadTest, RandomizedReflectAgainstNumpyRule) {
  // numpy 'reflect' for pads < dim: index i < 0 -> -i; i >= dim -> 2 * (dim - 1) - i.
  std::mt19937 rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<int64_t> dims = {2 + static_cast<int64_t>(rng() % 3),
                                       2 + static_cast<int64_t>(rng() % 3)};
    std::vector<int64_t> pads(4);
    for (int i = 0; i < 4; ++i)
      pads[static_cast<size_t>(i)] =
          static_cast<int64_t>(rng() % static_cast<unsigned>(dims[static_cast<size_t>(i % 2)]));
    const std::vector<int64_t> out_dims = {dims[0] + pads[0] + pads[2],
                                           dims[1] + pads[1] + pads[3]};
    const std::vector<float> v = RandomValues<float>(dims[0] * dims[1], rng);
    std::vector<float> expected;
    auto reflect = [](int64_t i, int64_t n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); };
    for (int64_t r = 0; r < out_dims[0]; ++r) {
      for (int64_t c = 0; c < out_dims[1]; ++c) {
        const int64_t sr = reflect(r - pads[0], dims[0]), sc = reflect(c - pads[1], dims[1]);
        expected.push_back(v[static_cast<size_t>(sr * dims[1] + sc)]);
      }
    }
    ExpectTensor<float>(OpTest("Pad", 11)
                            .Attr(StringAttr("mode", "reflect"))
                            .Input(MakeTensor<float>(Shape(dims), v))
                            .ConstInput(I64(pads))
                            .RunOne(),
                        Shape(out_dims), expected);
  }
}

TEST(TopKTest, LargestSmallestStable) {
  // Row [3,1,3,2], k=2 largest: 3 (idx 0), 3 (idx 2): ties keep the lower index first.
  const OwnedTensor x = MakeTensor<float>({1, 4}, {3, 1, 3, 2});
  Result<std::vector<OwnedTensor>> r =
      OpTest("TopK", 11).Input(x).ConstInput(I64({2})).Outputs({true, true}).Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {1, 2}, {3, 3});
  ExpectTensor<int64_t>(r->at(1), {1, 2}, {0, 2});
  // Smallest 3 along axis 1: 1 (1), 2 (3), 3 (0).
  r = OpTest("TopK", 11)
          .Attr(IntAttr("largest", 0))
          .Input(x)
          .ConstInput(I64({3}))
          .Outputs({true, true})
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {1, 3}, {1, 2, 3});
  ExpectTensor<int64_t>(r->at(1), {1, 3}, {1, 3, 0});
  // Opsets 1-9: k attribute; along axis 0 of [2,1] = [5, 7] -> 7 (1).
  r = OpTest("TopK", 7)
          .Attr(IntAttr("k", 1))
          .Attr(IntAttr("axis", 0))
          .Input(MakeTensor<int32_t>({2, 1}, {5, 7}))
          .Outputs({true, true})
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<int32_t>(r->at(0), {1, 1}, {7});
  ExpectInvalid(OpTest("TopK", 11).Input(x).ConstInput(I64({5})).Outputs({true, true}).RunStatus(),
                {"TopK", "K = 5 is out of range [0, 4]"});
  ExpectInvalid(OpTest("TopK", 10)
                    .Attr(IntAttr("largest", 0))
                    .Input(x)
                    .ConstInput(I64({1}))
                    .Outputs({true, true})
                    .Create(),
                {"TopK", "'largest' is not defined before opset 11"});
}

TEST(UniqueTest, AllOutputs) {
  // x = [2,1,1,3,4,3], sorted: Y [1,2,3,4], first indices [1,0,3,4], inverse [1,0,0,2,3,2],
  // counts [2,1,2,1].
  const OwnedTensor x = MakeTensor<float>({6}, {2, 1, 1, 3, 4, 3});
  Result<std::vector<OwnedTensor>> r =
      OpTest("Unique", 11).Input(x).Outputs({true, true, true, true}).Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {4}, {1, 2, 3, 4});
  ExpectTensor<int64_t>(r->at(1), {4}, {1, 0, 3, 4});
  ExpectTensor<int64_t>(r->at(2), {6}, {1, 0, 0, 2, 3, 2});
  ExpectTensor<int64_t>(r->at(3), {4}, {2, 1, 2, 1});
  // Unsorted: first-occurrence order Y [2,1,3,4], inverse [0,1,1,2,3,2], counts [1,2,2,1].
  r = OpTest("Unique", 11)
          .Attr(IntAttr("sorted", 0))
          .Input(x)
          .Outputs({true, true, true, true})
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<float>(r->at(0), {4}, {2, 1, 3, 4});
  ExpectTensor<int64_t>(r->at(1), {4}, {0, 1, 3, 4});
  ExpectTensor<int64_t>(r->at(2), {6}, {0, 1, 1, 2, 3, 2});
  ExpectTensor<int64_t>(r->at(3), {4}, {1, 2, 2, 1});
  // Axis 0 of [[1,0],[0,1],[1,0]] (strings): unique rows sorted ["0","1"] < ["1","0"].
  r = OpTest("Unique", 11)
          .Attr(IntAttr("axis", 0))
          .Input(MakeTensor<std::string>({3, 2}, {"1", "0", "0", "1", "1", "0"}))
          .Outputs({true, true, true, true})
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<std::string>(r->at(0), {2, 2}, {"0", "1", "1", "0"});
  ExpectTensor<int64_t>(r->at(2), {3}, {1, 0, 1});
  ExpectInvalid(OpTest("Unique", 11).Attr(IntAttr("axis", 1)).Input(x).RunStatus(),
                {"Unique", "axis 1 is out of range"});
}

TEST(ResizeTest, NearestLinearCubic) {
  // [1,1,1,2] = [1,2] upsampled x2 on the last axis.
  const OwnedTensor x = MakeTensor<float>({1, 1, 1, 2}, {1, 2});
  const OwnedTensor scales = MakeTensor<float>({4}, {1, 1, 1, 2});
  // nearest, half_pixel, round_prefer_floor: x_ori = (o + 0.5)/2 - 0.5 = -0.25, 0.25, 0.75, 1.25
  // -> 0, 0, 1, 1 (0.75 rounds up, 1.25 down) -> [1,1,2,2].
  ExpectTensor<float>(OpTest("Resize", 13).Input(x).OmittedInput().ConstInput(scales).RunOne(),
                      {1, 1, 1, 4}, {1, 1, 2, 2});
  // linear half_pixel: -0.25 clamps to 1; 0.25 -> 1.25; 0.75 -> 1.75; 1.25 -> clamps to 2.
  ExpectTensor<float>(OpTest("Resize", 13)
                          .Attr(StringAttr("mode", "linear"))
                          .Input(x)
                          .OmittedInput()
                          .ConstInput(scales)
                          .RunOne(),
                      {1, 1, 1, 4}, {1, 1.25f, 1.75f, 2}, 1e-6);
  // linear align_corners with sizes [1,1,1,3]: x_ori = o * 1/2 -> 1, 1.5, 2.
  ExpectTensor<float>(OpTest("Resize", 13)
                          .Attr(StringAttr("mode", "linear"))
                          .Attr(StringAttr("coordinate_transformation_mode", "align_corners"))
                          .Input(x)
                          .OmittedInput()
                          .OmittedInput()
                          .ConstInput(I64({1, 1, 1, 3}))
                          .RunOne(),
                      {1, 1, 1, 3}, {1, 1.5f, 2}, 1e-6);
  // cubic asymmetric on [0,1,2,3] x2: at x_ori 0.5 (f=0, r=0.5, A=-0.75) the Keys weights are
  // [-0.09375, 0.59375, 0.59375, -0.09375] over indices -1(->0),0,1,2:
  // -0.09375*0 + 0.59375*0 + 0.59375*1 - 0.09375*2 = 0.40625.
  const OwnedTensor ramp = MakeTensor<float>({1, 4}, {0, 1, 2, 3});
  const OwnedTensor y = OpTest("Resize", 13)
                            .Attr(StringAttr("mode", "cubic"))
                            .Attr(StringAttr("coordinate_transformation_mode", "asymmetric"))
                            .Input(ramp)
                            .OmittedInput()
                            .ConstInput(MakeTensor<float>({2}, {1, 2}))
                            .RunOne();
  ASSERT_EQ(y.shape(), (Shape{1, 8}));
  EXPECT_NEAR(y.data<float>()[0], 0, 1e-6);
  EXPECT_NEAR(y.data<float>()[1], 0.40625, 1e-6);
  EXPECT_NEAR(y.data<float>()[2], 1, 1e-6);
  // tf_crop_and_resize outside the roi -> extrapolation_value.
  ExpectTensor<float>(OpTest("Resize", 13)
                          .Attr(StringAttr("mode", "linear"))
                          .Attr(StringAttr("coordinate_transformation_mode", "tf_crop_and_resize"))
                          .Attr(FloatAttr("extrapolation_value", 7))
                          .Input(MakeTensor<float>({2}, {1, 2}))
                          .ConstInput(MakeTensor<float>({2}, {0.5f, 1.5f}))
                          .OmittedInput()
                          .ConstInput(I64({2}))
                          .RunOne(),
                      {2}, {1.5f, 7}, 1e-6);
  // Nearest works for strings.
  ExpectTensor<std::string>(OpTest("Resize", 13)
                                .Input(MakeTensor<std::string>({2}, {"a", "b"}))
                                .OmittedInput()
                                .ConstInput(MakeTensor<float>({1}, {2}))
                                .RunOne(),
                            {4}, {"a", "a", "b", "b"});
}

TEST(ResizeTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({1, 2}, {1, 2});
  ExpectInvalid(OpTest("Resize", 13).Input(x).RunStatus(),
                {"Resize", "exactly one of scales and sizes"});
  ExpectInvalid(OpTest("Resize", 13)
                    .Input(x)
                    .OmittedInput()
                    .ConstInput(MakeTensor<float>({1}, {2}))
                    .RunStatus(),
                {"Resize", "scales has 1 entries"});
  ExpectInvalid(OpTest("Resize", 13)
                    .Input(x)
                    .OmittedInput()
                    .ConstInput(MakeTensor<float>({2}, {1, -2}))
                    .RunStatus(),
                {"Resize", "scale -2"});
  ExpectInvalid(OpTest("Resize", 13).Attr(StringAttr("mode", "area")).Input(x).Create(),
                {"Resize", "mode 'area'"});
  ExpectInvalid(OpTest("Resize", 13)
                    .Attr(StringAttr("coordinate_transformation_mode", "tf_half_pixel_for_nn"))
                    .Input(x)
                    .Create(),
                {"Resize", "tf_half_pixel_for_nn"});
  ExpectInvalid(OpTest("Resize", 10).Attr(StringAttr("mode", "cubic")).Input(x).Input(x).Create(),
                {"Resize", "mode 'cubic'"});
}

TEST(UpsampleTest, NearestAndLinear) {
  // Upsample-9 nearest x2 on [1,2]: y[i] = x[floor(i/2)] -> [1,1,2,2]; linear asymmetric:
  // x_ori = i/2 -> 1, 1.5, 2, 2 (clamped).
  const OwnedTensor x = MakeTensor<float>({1, 2}, {1, 2});
  const OwnedTensor scales = MakeTensor<float>({2}, {1, 2});
  ExpectTensor<float>(OpTest("Upsample", 9).Input(x).ConstInput(scales).RunOne(), {1, 4},
                      {1, 1, 2, 2});
  ExpectTensor<float>(OpTest("Upsample", 7)
                          .Attr(StringAttr("mode", "linear"))
                          .Attr(FloatsAttr("scales", {1, 2}))
                          .Input(x)
                          .RunOne(),
                      {1, 4}, {1, 1.5f, 2, 2}, 1e-6);
  ExpectInvalid(
      OpTest("Upsample", 9).Input(x).ConstInput(MakeTensor<float>({2}, {1, 0.5f})).RunStatus(),
      {"Upsample", ">= 1"});
  ExpectInvalid(OpTest("Upsample", 7).Input(x).Create(), {"Upsample", "'scales' is required"});
}

TEST(StringNormalizerTest, StopwordsAndCase) {
  const OwnedTensor x = MakeTensor<std::string>({4}, {"Monday", "tuesday", "MONDAY", "x"});
  // Case-insensitive removal of "monday", then upper-casing: [TUESDAY, X].
  ExpectTensor<std::string>(OpTest("StringNormalizer", 10)
                                .Attr(StringAttr("case_change_action", "UPPER"))
                                .Attr(StringsAttr("stopwords", {"monday"}))
                                .Input(x)
                                .RunOne(),
                            {2}, {"TUESDAY", "X"});
  // Case-sensitive: only "MONDAY" matches; lower-case the rest.
  ExpectTensor<std::string>(OpTest("StringNormalizer", 10)
                                .Attr(StringAttr("case_change_action", "LOWER"))
                                .Attr(IntAttr("is_case_sensitive", 1))
                                .Attr(StringsAttr("stopwords", {"MONDAY"}))
                                .Input(x)
                                .RunOne(),
                            {3}, {"monday", "tuesday", "x"});
  // Everything removed from a [1, C] input: [1, 1] holding "".
  ExpectTensor<std::string>(OpTest("StringNormalizer", 10)
                                .Attr(StringsAttr("stopwords", {"a"}))
                                .Input(MakeTensor<std::string>({1, 2}, {"a", "A"}))
                                .RunOne(),
                            {1, 1}, {""});
  ExpectInvalid(OpTest("StringNormalizer", 10)
                    .Attr(StringAttr("case_change_action", "TITLE"))
                    .Input(x)
                    .Create(),
                {"StringNormalizer", "'TITLE'"});
  ExpectInvalid(OpTest("StringNormalizer", 10)
                    .Input(MakeTensor<std::string>({2, 2}, {"a", "b", "c", "d"}))
                    .RunStatus(),
                {"StringNormalizer", "[C] or [1, C]"});
}

}  // namespace
}  // namespace kiln::ref::testing
