// SPDX-License-Identifier: Apache-2.0
// Tests for the reference pools (pool.cc): hand-checked MaxPool (Indices in both storage orders,
// pads, ceil_mode, dilations), AveragePool (count_include_pad, ceil_mode) and GlobalAveragePool;
// randomized 1-D/2-D/3-D comparisons against explicit loops; runtime and factory errors.

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

TEST(MaxPoolTest, TwoByTwoStrideTwoWithIndices) {
  //  1  2  3  4
  //  5  6  7  8      2x2 windows, stride 2: maxima 6, 8, 14, 16
  //  9 10 11 12      at row-major offsets 5, 7, 13, 15;
  // 13 14 15 16      column-major (h + 4w): 5, 13, 7, 15.
  auto run = [](int64_t storage_order) {
    Result<std::vector<OwnedTensor>> r = OpTest("MaxPool", 12)
                                             .Attr(IntsAttr("kernel_shape", {2, 2}))
                                             .Attr(IntsAttr("strides", {2, 2}))
                                             .Attr(IntAttr("storage_order", storage_order))
                                             .Input(MakeTensor<float>({1, 1, 4, 4}, Iota(16)))
                                             .Outputs({true, true})
                                             .Run();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<OwnedTensor>(2);
  };
  std::vector<OwnedTensor> row = run(0);
  ExpectTensor<float>(row[0], {1, 1, 2, 2}, {6, 8, 14, 16});
  ExpectTensor<int64_t>(row[1], {1, 1, 2, 2}, {5, 7, 13, 15});
  std::vector<OwnedTensor> col = run(1);
  ExpectTensor<float>(col[0], {1, 1, 2, 2}, {6, 8, 14, 16});
  ExpectTensor<int64_t>(col[1], {1, 1, 2, 2}, {5, 13, 7, 15});
}

TEST(MaxPoolTest, IndicesCountBatchAndChannelPlanes) {
  // Channel 0 [1,2,3,4]: max 4 at offset 3. Channel 1 [8,7,6,5]: max 8 at its offset 0, which is
  // flat index 4 in X. The Indices output is optional: omitted here for the first run.
  const OwnedTensor x = MakeTensor<float>({1, 2, 2, 2}, {1, 2, 3, 4, 8, 7, 6, 5});
  ExpectTensor<float>(OpTest("MaxPool", 8)
                          .Attr(IntsAttr("kernel_shape", {2, 2}))
                          .Input(x)
                          .Outputs({true, false})
                          .RunOne(),
                      {1, 2, 1, 1}, {4, 8});
  Result<std::vector<OwnedTensor>> r = OpTest("MaxPool", 8)
                                           .Attr(IntsAttr("kernel_shape", {2, 2}))
                                           .Input(x)
                                           .Outputs({true, true})
                                           .Run();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensor<int64_t>(r->at(1), {1, 2, 1, 1}, {3, 4});
}

TEST(MaxPoolTest, PadsCeilModeAndDilations) {
  const OwnedTensor x = MakeTensor<float>({1, 1, 5}, {3, 1, 4, 1, 5});
  auto pool = [&](std::vector<Attribute> attrs) {
    OpTest t("MaxPool", 10);
    t.Attr(IntsAttr("kernel_shape", {2})).Input(x);
    for (Attribute& a : attrs) t.Attr(std::move(a));
    return t.RunOne();
  };
  // Stride 2, floor: windows [0,1], [2,3] -> [3, 4].
  ExpectTensor<float>(pool({IntsAttr("strides", {2})}), {1, 1, 2}, {3, 4});
  // ceil_mode adds the partial window [4] -> [3, 4, 5].
  ExpectTensor<float>(pool({IntsAttr("strides", {2}), IntAttr("ceil_mode", 1)}), {1, 1, 3},
                      {3, 4, 5});
  // pads [1,1]: windows start at -1, 1, 3 -> [3, max(1,4), max(1,5)] = [3, 4, 5]; padding is
  // never a candidate for the max.
  ExpectTensor<float>(pool({IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}), {1, 1, 3},
                      {3, 4, 5});
  // dilation 2: taps (0,2), (1,3), (2,4) -> [max(3,4), max(1,1), max(4,5)] = [4, 1, 5].
  ExpectTensor<float>(pool({IntsAttr("dilations", {2})}), {1, 1, 3}, {4, 1, 5});
  // Negative values: padding does not act as zero. [-3,-1] padded by 1 each side, window 2,
  // stride 1: [-3, max(-3,-1), -1].
  ExpectTensor<float>(OpTest("MaxPool", 10)
                          .Attr(IntsAttr("kernel_shape", {2}))
                          .Attr(IntsAttr("pads", {1, 1}))
                          .Input(MakeTensor<float>({1, 1, 2}, {-3, -1}))
                          .RunOne(),
                      {1, 1, 3}, {-3, -1, -1});
}

TEST(MaxPoolTest, CeilModeDropsAWindowThatStartsInThePadding) {
  // [1,2,3,4], kernel 2, stride 2, pads [0,1], ceil_mode: ceil((4+1-2)/2)+1 = 3 windows by the
  // formula, but the third would start at 4, entirely in the end padding, so it is dropped:
  // [max(1,2), max(3,4)] = [2, 4].
  ExpectTensor<float>(OpTest("MaxPool", 11)
                          .Attr(IntsAttr("kernel_shape", {2}))
                          .Attr(IntsAttr("strides", {2}))
                          .Attr(IntsAttr("pads", {0, 1}))
                          .Attr(IntAttr("ceil_mode", 1))
                          .Input(MakeTensor<float>({1, 1, 4}, {1, 2, 3, 4}))
                          .RunOne(),
                      {1, 1, 2}, {2, 4});
}

TEST(AveragePoolTest, CountIncludePad) {
  // X = [[1,2,3],[4,5,6],[7,8,9]], kernel 2x2, stride 2, pads 1: windows start at -1 and 1.
  //   (0,0) covers {1}            -> 1/1 = 1      or 1/4 = 0.25 counting padding
  //   (0,1) covers {2,3}          -> 5/2 = 2.5    or 5/4 = 1.25
  //   (1,0) covers {4,7}          -> 11/2 = 5.5   or 11/4 = 2.75
  //   (1,1) covers {5,6,8,9}      -> 28/4 = 7     either way
  auto pool = [](int64_t opset, std::optional<int64_t> include) {
    OpTest t("AveragePool", opset);
    t.Attr(IntsAttr("kernel_shape", {2, 2}))
        .Attr(IntsAttr("strides", {2, 2}))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Input(MakeTensor<float>({1, 1, 3, 3}, Iota(9)));
    if (include) t.Attr(IntAttr("count_include_pad", *include));
    return t;
  };
  ExpectTensor<float>(pool(11, 0).RunOne(), {1, 1, 2, 2}, {1, 2.5f, 5.5f, 7});
  ExpectTensor<float>(pool(11, 1).RunOne(), {1, 1, 2, 2}, {0.25f, 1.25f, 2.75f, 7});
  // By default padding is not counted (as before opset 7, when it never was).
  ExpectTensor<float>(pool(7, std::nullopt).RunOne(), {1, 1, 2, 2}, {1, 2.5f, 5.5f, 7});
}

TEST(AveragePoolTest, CeilModeWindowIsNotPadding) {
  // [1..5], kernel 2, stride 2, ceil_mode: windows [1,2], [3,4], [5]. With count_include_pad the
  // partial last window still divides by 1: the part added by ceil_mode is not padding.
  ExpectTensor<double>(OpTest("AveragePool", 10)
                           .Attr(IntsAttr("kernel_shape", {2}))
                           .Attr(IntsAttr("strides", {2}))
                           .Attr(IntAttr("ceil_mode", 1))
                           .Attr(IntAttr("count_include_pad", 1))
                           .Input(MakeTensor<double>({1, 1, 5}, {1, 2, 3, 4, 5}))
                           .RunOne(),
                       {1, 1, 3}, {1.5, 3.5, 5});
}

TEST(GlobalAveragePoolTest, AveragesEachPlane) {
  // [1,2,3,4] -> 2.5; [5,6,7,9] -> 27/4 = 6.75.
  ExpectTensor<float>(OpTest("GlobalAveragePool", 7)
                          .Input(MakeTensor<float>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 9}))
                          .RunOne(),
                      {1, 2, 1, 1}, {2.5f, 6.75f});
  // 1-D spatial, two batch items: [1,2,3] -> 2, [4,5,6] -> 5.
  ExpectTensor<double>(OpTest("GlobalAveragePool", 17)
                           .Input(MakeTensor<double>({2, 1, 3}, {1, 2, 3, 4, 5, 6}))
                           .RunOne(),
                       {2, 1, 1}, {2, 5});
  ExpectInvalid(
      OpTest("GlobalAveragePool", 13).Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4})).RunStatus(),
      {"GlobalAveragePool", "rank >= 3"});
}

struct PoolCase {
  int64_t n, c;
  std::vector<int64_t> in, kernel, strides, dilations, pads;
  bool ceil_mode = false;
  bool count_include_pad = false;
};

struct PoolExpected {
  std::vector<int64_t> out_spatial;
  std::vector<double> max, max_index, avg;
};

// Explicit loops over (plane, od, oh, ow, kd, kh, kw) with 1-D/2-D lifted to 3-D.
PoolExpected NaivePool(const PoolCase& pc, const std::vector<double>& x) {
  const size_t s = pc.in.size();
  PoolExpected e;
  std::vector<int64_t> out(s);
  for (size_t d = 0; d < s; ++d) {
    const int64_t ext = (pc.kernel[d] - 1) * pc.dilations[d] + 1;
    const int64_t span = pc.in[d] + pc.pads[d] + pc.pads[d + s] - ext;
    out[d] = span / pc.strides[d] + 1;
    if (pc.ceil_mode && span % pc.strides[d] != 0) {
      ++out[d];
      if ((out[d] - 1) * pc.strides[d] >= pc.in[d] + pc.pads[d]) --out[d];
    }
  }
  e.out_spatial = out;
  auto lift = [&](const std::vector<int64_t>& v, int64_t fill) {
    std::vector<int64_t> r(3 - s, fill);
    r.insert(r.end(), v.begin(), v.end());
    return r;
  };
  const std::vector<int64_t> in = lift(pc.in, 1), k = lift(pc.kernel, 1), st = lift(pc.strides, 1),
                             dl = lift(pc.dilations, 1),
                             pb = lift(std::vector<int64_t>(pc.pads.begin(), pc.pads.begin() + s),
                                       0),
                             pe = lift(std::vector<int64_t>(pc.pads.begin() + s, pc.pads.end()), 0),
                             o = lift(out, 1);
  const int64_t plane = in[0] * in[1] * in[2];
  for (int64_t p = 0; p < pc.n * pc.c; ++p)
    for (int64_t od = 0; od < o[0]; ++od)
      for (int64_t oh = 0; oh < o[1]; ++oh)
        for (int64_t ow = 0; ow < o[2]; ++ow) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t best_index = -1, inside = 0, padded = 0;
          for (int64_t kd = 0; kd < k[0]; ++kd)
            for (int64_t kh = 0; kh < k[1]; ++kh)
              for (int64_t kw = 0; kw < k[2]; ++kw) {
                const int64_t id = od * st[0] - pb[0] + kd * dl[0];
                const int64_t ih = oh * st[1] - pb[1] + kh * dl[1];
                const int64_t iw = ow * st[2] - pb[2] + kw * dl[2];
                if (id >= -pb[0] && id < in[0] + pe[0] && ih >= -pb[1] && ih < in[1] + pe[1] &&
                    iw >= -pb[2] && iw < in[2] + pe[2]) {
                  ++padded;
                }
                if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2]) {
                  continue;
                }
                const int64_t off = (id * in[1] + ih) * in[2] + iw;
                const double v = x[static_cast<size_t>(p * plane + off)];
                ++inside;
                sum += v;
                if (v > best) {
                  best = v;
                  best_index = p * plane + off;
                }
              }
          e.max.push_back(best);
          e.max_index.push_back(static_cast<double>(best_index));
          e.avg.push_back(sum / static_cast<double>(pc.count_include_pad ? padded : inside));
        }
  return e;
}

TEST(PoolTest, RandomMatchesNestedLoops) {
  std::mt19937 rng(17);
  const std::vector<PoolCase> cases = {
      {2, 3, {10}, {3}, {2}, {1}, {1, 1}},
      {1, 2, {7, 6}, {3, 2}, {2, 1}, {1, 2}, {1, 0, 1, 1}, true, true},
      {2, 2, {6, 7}, {2, 3}, {2, 2}, {1, 1}, {0, 1, 1, 0}, true, false},
      {1, 3, {5, 4, 6}, {2, 2, 3}, {1, 2, 2}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}, false, true},
      {1, 1, {9, 9}, {3, 3}, {3, 3}, {1, 1}, {0, 0, 0, 0}},
      {3, 2, {8}, {2}, {3}, {3}, {0, 2}, true},
  };
  for (const PoolCase& pc : cases) {
    std::vector<int64_t> xd = {pc.n, pc.c};
    xd.insert(xd.end(), pc.in.begin(), pc.in.end());
    SCOPED_TRACE("X " + Shape(xd).ToString());
    const std::vector<double> x = RandomValues<double>(Shape(xd).NumElements(), rng, -5, 5);
    const PoolExpected e = NaivePool(pc, x);
    std::vector<int64_t> yd = {pc.n, pc.c};
    yd.insert(yd.end(), e.out_spatial.begin(), e.out_spatial.end());
    const bool dilated =
        std::any_of(pc.dilations.begin(), pc.dilations.end(), [](int64_t d) { return d != 1; });

    Result<std::vector<OwnedTensor>> mp = OpTest("MaxPool", 12)
                                              .Attr(IntsAttr("kernel_shape", pc.kernel))
                                              .Attr(IntsAttr("strides", pc.strides))
                                              .Attr(IntsAttr("dilations", pc.dilations))
                                              .Attr(IntsAttr("pads", pc.pads))
                                              .Attr(IntAttr("ceil_mode", pc.ceil_mode))
                                              .Input(MakeTensor<double>(Shape(xd), x))
                                              .Outputs({true, true})
                                              .Run();
    ASSERT_TRUE(mp.ok()) << mp.status().ToString();
    ExpectTensor<double>(mp->at(0), Shape(yd), e.max);
    ExpectTensor<int64_t>(mp->at(1), Shape(yd),
                          std::vector<int64_t>(e.max_index.begin(), e.max_index.end()));
    if (dilated) continue;  // AveragePool has no dilations before opset 19
    const std::vector<float> xf(x.begin(), x.end());
    ExpectTensor<float>(OpTest("AveragePool", 11)
                            .Attr(IntsAttr("kernel_shape", pc.kernel))
                            .Attr(IntsAttr("strides", pc.strides))
                            .Attr(IntsAttr("pads", pc.pads))
                            .Attr(IntAttr("ceil_mode", pc.ceil_mode))
                            .Attr(IntAttr("count_include_pad", pc.count_include_pad))
                            .Input(MakeTensor<float>(Shape(xd), xf))
                            .RunOne(),
                        Shape(yd), std::vector<float>(e.avg.begin(), e.avg.end()), 1e-6);
  }
}

TEST(PoolTest, RuntimeErrors) {
  // kernel_shape says 2-D, X is 1-D spatial.
  ExpectInvalid(OpTest("MaxPool", 12)
                    .Attr(IntsAttr("kernel_shape", {2, 2}))
                    .Input(MakeTensor<float>({1, 1, 4}, Iota(4)))
                    .RunStatus(),
                {"MaxPool", "kernel_shape has 2 dims", "[1,1,4]"});
  ExpectInvalid(OpTest("AveragePool", 12)
                    .Attr(IntsAttr("kernel_shape", {5}))
                    .Input(MakeTensor<float>({1, 1, 4}, Iota(4)))
                    .RunStatus(),
                {"AveragePool", "exceeds the padded input"});
  // Kernel 2 with dilation 3 on one element padded [1,2]: the only window's taps are at -1
  // and 2, both outside the input.
  ExpectInvalid(OpTest("MaxPool", 12)
                    .Attr(IntsAttr("kernel_shape", {2}))
                    .Attr(IntsAttr("dilations", {3}))
                    .Attr(IntsAttr("pads", {1, 2}))
                    .Input(MakeTensor<float>({1, 1, 1}, {1}))
                    .RunStatus(),
                {"MaxPool", "covers no input element"});
  ExpectInvalid(OpTest("MaxPool", 12)
                    .Attr(IntsAttr("kernel_shape", {2}))
                    .Input(MakeTensor<int64_t>({1, 1, 4}, {1, 2, 3, 4}), DataType::kInvalid)
                    .RunStatus(),
                {"MaxPool", "unsupported dtype INT64"});
}

TEST(PoolTest, FactoryRejectsBadAttributes) {
  auto pool = [](const char* op, int64_t opset, std::vector<Attribute> attrs,
                 std::vector<bool> outputs = {true}) {
    OpTest t(op, opset);
    t.Input(MakeTensor<float>({1, 1, 4, 4}, Iota(16))).Outputs(std::move(outputs));
    for (Attribute& a : attrs) t.Attr(std::move(a));
    return t.Create();
  };
  const Attribute k2 = IntsAttr("kernel_shape", {2, 2});
  ExpectInvalid(pool("MaxPool", 12, {}), {"MaxPool", "'kernel_shape' is required"});
  ExpectInvalid(pool("AveragePool", 12, {IntsAttr("kernel_shape", {2, 0})}),
                {"AveragePool", "'kernel_shape'"});
  ExpectInvalid(pool("MaxPool", 9, {k2, IntAttr("ceil_mode", 1)}),
                {"MaxPool", "'ceil_mode' is not defined before opset 10"});
  ExpectInvalid(pool("MaxPool", 9, {k2, IntsAttr("dilations", {1, 1})}),
                {"MaxPool", "'dilations' is not defined before opset 10"});
  ExpectInvalid(pool("MaxPool", 7, {k2, IntAttr("storage_order", 1)}),
                {"MaxPool", "'storage_order' is not defined before opset 8"});
  ExpectInvalid(pool("MaxPool", 12, {k2, IntAttr("storage_order", 2)}),
                {"MaxPool", "'storage_order' must be 0 or 1"});
  ExpectInvalid(pool("MaxPool", 7, {k2}, {true, true}), {"MaxPool", "output 1", "Indices"});
  ExpectInvalid(pool("AveragePool", 17, {k2, IntsAttr("dilations", {1, 1})}),
                {"AveragePool", "'dilations' is not defined before opset 19"});
  ExpectInvalid(pool("AveragePool", 17, {k2, StringAttr("auto_pad", "same")}),
                {"AveragePool", "auto_pad"});
}

TEST(PoolTest, AutoPadSame) {
  // MaxPool 1-D [1,5,2,4,3], kernel 2, SAME_UPPER: one pad at the end ->
  // [max(1,5), max(5,2), max(2,4), max(4,3), 3] = [5,5,4,4,3]; SAME_LOWER pads the beginning ->
  // [1, 5, 5, 4, 4].
  const OwnedTensor x = MakeTensor<float>({1, 1, 5}, {1, 5, 2, 4, 3});
  ExpectTensor<float>(OpTest("MaxPool", 8)
                          .Attr(IntsAttr("kernel_shape", {2}))
                          .Attr(StringAttr("auto_pad", "SAME_UPPER"))
                          .Input(x)
                          .RunOne(),
                      {1, 1, 5}, {5, 5, 4, 4, 3});
  ExpectTensor<float>(OpTest("MaxPool", 8)
                          .Attr(IntsAttr("kernel_shape", {2}))
                          .Attr(StringAttr("auto_pad", "SAME_LOWER"))
                          .Input(x)
                          .RunOne(),
                      {1, 1, 5}, {1, 5, 5, 4, 4});
  // AveragePool VALID, kernel 2, stride 2: [(1+5)/2, (2+4)/2] = [3, 3].
  ExpectTensor<float>(OpTest("AveragePool", 7)
                          .Attr(IntsAttr("kernel_shape", {2}))
                          .Attr(IntsAttr("strides", {2}))
                          .Attr(StringAttr("auto_pad", "VALID"))
                          .Input(x)
                          .RunOne(),
                      {1, 1, 2}, {3, 3});
}

}  // namespace
}  // namespace kiln::ref::testing
