// SPDX-License-Identifier: Apache-2.0
// Tests for the reference Conv (conv.cc): hand-checked 1-D and 2-D cases (padding, bias,
// strides, dilations, auto_pad, groups), randomized 1-D/2-D/3-D comparisons against explicit
// nested loops, a speed sanity check, and runtime and factory errors.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <random>
#include <type_traits>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

std::vector<float> Iota(int64_t n, float start = 1) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(ConvTest, TwoByTwoOnesNoPadding) {
  // X = [[1,2,3],[4,5,6],[7,8,9]], W = ones(2x2): window sums 1+2+4+5=12, 2+3+5+6=16,
  // 4+5+7+8=24, 5+6+8+9=28.
  ExpectTensor<float>(OpTest("Conv", 11)
                          .Input(MakeTensor<float>({1, 1, 3, 3}, Iota(9)))
                          .Input(MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
                          .RunOne(),
                      {1, 1, 2, 2}, {12, 16, 24, 28});
}

TEST(ConvTest, PaddingAndBias) {
  // Zero-padded by 1 on every side, the 2x2 window sums over
  //   0 0 0 0 0
  //   0 1 2 3 0
  //   0 4 5 6 0
  //   0 7 8 9 0
  //   0 0 0 0 0
  // are [1,3,5,3; 5,12,16,9; 11,24,28,15; 7,15,17,9]; the bias adds 1.
  ExpectTensor<float>(OpTest("Conv", 7)
                          .Attr(IntsAttr("pads", {1, 1, 1, 1}))
                          .Input(MakeTensor<float>({1, 1, 3, 3}, Iota(9)))
                          .Input(MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
                          .Input(MakeTensor<float>({1}, {1}))
                          .RunOne(),
                      {1, 1, 4, 4}, {2, 4, 6, 4, 6, 13, 17, 10, 12, 25, 29, 16, 8, 16, 18, 10});
}

TEST(ConvTest, OneDimStrideAndDilation) {
  // X = [1..7], W = [1, 10] with dilation 2: y = x[i] + 10 * x[i+2]; stride 2, so i = 0, 2, 4
  // (extent 3, (7-3)/2+1 = 3 outputs): 1+30 = 31, 3+50 = 53, 5+70 = 75.
  ExpectTensor<double>(OpTest("Conv", 13)
                           .Attr(IntsAttr("strides", {2}))
                           .Attr(IntsAttr("dilations", {2}))
                           .Attr(IntsAttr("kernel_shape", {2}))
                           .Input(MakeTensor<double>({1, 1, 7}, {1, 2, 3, 4, 5, 6, 7}))
                           .Input(MakeTensor<double>({1, 1, 2}, {1, 10}))
                           .RunOne(),
                       {1, 1, 3}, {31, 53, 75});
}

TEST(ConvTest, AutoPad) {
  const OwnedTensor x = MakeTensor<float>({1, 1, 4}, {1, 2, 3, 4});
  const OwnedTensor w = MakeTensor<float>({1, 1, 2}, {1, 1});
  auto run = [&](const char* mode) {
    return OpTest("Conv", 11).Attr(StringAttr("auto_pad", mode)).Input(x).Input(w).RunOne();
  };
  // Total padding (4-1)*1 + 2 - 4 = 1. SAME_UPPER puts it at the end: [1+2, 2+3, 3+4, 4+0].
  ExpectTensor<float>(run("SAME_UPPER"), {1, 1, 4}, {3, 5, 7, 4});
  // SAME_LOWER puts it at the beginning: [0+1, 1+2, 2+3, 3+4].
  ExpectTensor<float>(run("SAME_LOWER"), {1, 1, 4}, {1, 3, 5, 7});
  // VALID: no padding.
  ExpectTensor<float>(run("VALID"), {1, 1, 3}, {3, 5, 7});
  // Stride 2, kernel 3 on [1..5]: out = ceil(5/2) = 3, total pad (3-1)*2 + 3 - 5 = 2, one per
  // side; windows start at -1, 1, 3: [0+1+2, 2+3+4, 4+5+0] = [3, 9, 9].
  ExpectTensor<float>(OpTest("Conv", 11)
                          .Attr(StringAttr("auto_pad", "SAME_UPPER"))
                          .Attr(IntsAttr("strides", {2}))
                          .Input(MakeTensor<float>({1, 1, 5}, {1, 2, 3, 4, 5}))
                          .Input(MakeTensor<float>({1, 1, 3}, {1, 1, 1}))
                          .RunOne(),
                      {1, 1, 3}, {3, 9, 9});
}

TEST(ConvTest, DepthwiseAndChannelSums) {
  // group = C = 2: channel 0 [1,2] scaled by 10, channel 1 [3,4] scaled by 100.
  ExpectTensor<float>(OpTest("Conv", 11)
                          .Attr(IntAttr("group", 2))
                          .Input(MakeTensor<float>({1, 2, 1, 2}, {1, 2, 3, 4}))
                          .Input(MakeTensor<float>({2, 1, 1, 1}, {10, 100}))
                          .RunOne(),
                      {1, 2, 1, 2}, {10, 20, 300, 400});
  // group = 1, 1x1 kernels: y[m] = sum_c W[m,c] * x[c] with x = [1,2]:
  //   [1,1] -> 3, [1,-1] -> -1, [2,0] -> 2.
  ExpectTensor<float>(OpTest("Conv", 11)
                          .Input(MakeTensor<float>({1, 2, 1, 1}, {1, 2}))
                          .Input(MakeTensor<float>({3, 2, 1, 1}, {1, 1, 1, -1, 2, 0}))
                          .RunOne(),
                      {1, 3, 1, 1}, {3, -1, 2});
}

// One convolution configuration; 1-D and 2-D are run as 3-D with unit leading dims by the
// naive implementation below.
struct ConvCase {
  int64_t n, c, m, group;
  std::vector<int64_t> in, kernel, strides, dilations, pads;  // pads: begins then ends
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

// Explicit nested loops over (n, m, od, oh, ow, c, kd, kh, kw), with padding resolved here.
std::vector<double> NaiveConv(const ConvCase& cc, const std::vector<double>& x,
                              const std::vector<double>& w, const std::vector<double>& b,
                              std::vector<int64_t>* out_spatial) {
  const size_t s = cc.in.size();
  std::vector<int64_t> pb(s), pe(s), out(s);
  for (size_t d = 0; d < s; ++d) {
    const int64_t ext = (cc.kernel[d] - 1) * cc.dilations[d] + 1;
    if (cc.auto_pad == "NOTSET" || cc.auto_pad == "VALID") {
      pb[d] = cc.auto_pad == "VALID" ? 0 : cc.pads[d];
      pe[d] = cc.auto_pad == "VALID" ? 0 : cc.pads[d + s];
      out[d] = (cc.in[d] + pb[d] + pe[d] - ext) / cc.strides[d] + 1;
    } else {
      out[d] = (cc.in[d] + cc.strides[d] - 1) / cc.strides[d];
      const int64_t total = std::max<int64_t>(0, (out[d] - 1) * cc.strides[d] + ext - cc.in[d]);
      pb[d] = cc.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[d] = total - pb[d];
    }
  }
  *out_spatial = out;
  // Lift to 3 spatial dims.
  auto lift = [&](const std::vector<int64_t>& v, int64_t fill) {
    std::vector<int64_t> r(3 - s, fill);
    r.insert(r.end(), v.begin(), v.end());
    return r;
  };
  const std::vector<int64_t> in = lift(cc.in, 1), k = lift(cc.kernel, 1), st = lift(cc.strides, 1),
                             dl = lift(cc.dilations, 1), p = lift(pb, 0), o = lift(out, 1);
  const int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> y;
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t m = 0; m < cc.m; ++m)
      for (int64_t od = 0; od < o[0]; ++od)
        for (int64_t oh = 0; oh < o[1]; ++oh)
          for (int64_t ow = 0; ow < o[2]; ++ow) {
            double acc = cc.bias ? b[static_cast<size_t>(m)] : 0.0;
            const int64_t g = m / mg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    const int64_t id = od * st[0] - p[0] + kd * dl[0];
                    const int64_t ih = oh * st[1] - p[1] + kh * dl[1];
                    const int64_t iw = ow * st[2] - p[2] + kw * dl[2];
                    if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2]) {
                      continue;  // zero padding
                    }
                    const int64_t ci = g * cg + c;
                    const double xv = x[static_cast<size_t>(
                        (((n * cc.c + ci) * in[0] + id) * in[1] + ih) * in[2] + iw)];
                    const double wv = w[static_cast<size_t>(
                        (((m * cg + c) * k[0] + kd) * k[1] + kh) * k[2] + kw)];
                    acc += xv * wv;
                  }
            y.push_back(acc);
          }
  return y;
}

void RunRandomConv(const ConvCase& cc, std::mt19937& rng) {
  std::vector<int64_t> xd = {cc.n, cc.c}, wd = {cc.m, cc.c / cc.group};
  xd.insert(xd.end(), cc.in.begin(), cc.in.end());
  wd.insert(wd.end(), cc.kernel.begin(), cc.kernel.end());
  SCOPED_TRACE("X " + Shape(xd).ToString() + " W " + Shape(wd).ToString() + " auto_pad " +
               cc.auto_pad);
  const std::vector<double> x = RandomValues<double>(Shape(xd).NumElements(), rng);
  const std::vector<double> w = RandomValues<double>(Shape(wd).NumElements(), rng);
  const std::vector<double> b = RandomValues<double>(cc.m, rng);
  std::vector<int64_t> out_spatial;
  const std::vector<double> expected = NaiveConv(cc, x, w, b, &out_spatial);
  std::vector<int64_t> yd = {cc.n, cc.m};
  yd.insert(yd.end(), out_spatial.begin(), out_spatial.end());

  auto build = [&](auto tag) {
    using T = typename decltype(tag)::type;
    OpTest t("Conv", 11);
    t.Attr(IntAttr("group", cc.group))
        .Attr(IntsAttr("strides", cc.strides))
        .Attr(IntsAttr("dilations", cc.dilations))
        .Attr(StringAttr("auto_pad", cc.auto_pad));
    if (cc.auto_pad == "NOTSET") t.Attr(IntsAttr("pads", cc.pads));
    t.Input(MakeTensor<T>(Shape(xd), std::vector<T>(x.begin(), x.end())))
        .ConstInput(MakeTensor<T>(Shape(wd), std::vector<T>(w.begin(), w.end())));
    if (cc.bias) t.ConstInput(MakeTensor<T>({cc.m}, std::vector<T>(b.begin(), b.end())));
    return t;
  };
  ExpectTensor<double>(build(std::type_identity<double>{}).RunOne(), Shape(yd), expected, 1e-12);
  // FP32: inputs rounded to float, so compare loosely.
  ExpectTensor<float>(build(std::type_identity<float>{}).RunOne(), Shape(yd),
                      std::vector<float>(expected.begin(), expected.end()), 1e-5);
}

TEST(ConvTest, RandomMatchesNestedLoops) {
  std::mt19937 rng(13);
  const std::vector<ConvCase> cases = {
      {2, 3, 4, 1, {11}, {3}, {2}, {1}, {1, 2}},
      {1, 4, 6, 2, {7, 6}, {3, 2}, {1, 2}, {2, 1}, {1, 0, 2, 1}},
      {2, 3, 3, 3, {5, 5}, {3, 3}, {2, 2}, {1, 1}, {}, "SAME_UPPER"},
      {1, 2, 2, 1, {6, 5}, {2, 3}, {1, 1}, {1, 2}, {}, "SAME_LOWER", false},
      {1, 2, 2, 1, {4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1, 0, 1, 1}},
      {1, 2, 4, 2, {8, 7}, {3, 3}, {3, 2}, {1, 1}, {}, "VALID"},
      {3, 6, 4, 2, {9}, {4}, {1}, {2}, {0, 0}, "NOTSET", false},
      {1, 16, 16, 1, {32, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
  };
  for (const ConvCase& cc : cases) RunRandomConv(cc, rng);
}

TEST(ConvTest, ThreeByThreeOnSixteenChannelsIsFast) {
  // 1x16x32x32 input, 16 3x3 filters: about 2.4M multiply-adds.
  std::mt19937 rng(1);
  OpTest t("Conv", 11);
  t.Attr(IntsAttr("pads", {1, 1, 1, 1}))
      .Input(MakeTensor<float>({1, 16, 32, 32}, RandomValues<float>(16 * 32 * 32, rng)))
      .ConstInput(MakeTensor<float>({16, 16, 3, 3}, RandomValues<float>(16 * 16 * 9, rng)));
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<OwnedTensor>> out = t.Run();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->at(0).shape(), (Shape{1, 16, 32, 32}));
  // Milliseconds in a Release build; the bound leaves room for sanitizer builds.
  EXPECT_LT(ms, 2000);
}

TEST(ConvTest, RuntimeShapeErrors) {
  auto conv = [](const Shape& xs, const Shape& ws, std::optional<Shape> bs = std::nullopt) {
    OpTest t("Conv", 11);
    t.Input(MakeTensor<float>(xs, std::vector<float>(static_cast<size_t>(xs.NumElements()))))
        .Input(MakeTensor<float>(ws, std::vector<float>(static_cast<size_t>(ws.NumElements()))));
    if (bs) {
      t.Input(MakeTensor<float>(*bs, std::vector<float>(static_cast<size_t>(bs->NumElements()))));
    }
    return t;
  };
  ExpectInvalid(conv({1, 3, 4, 4}, {2, 2, 3, 3}).RunStatus(), {"Conv", "3 channels", "[2,2,3,3]"});
  ExpectInvalid(conv({1, 3, 4, 4}, {2, 3, 3}).RunStatus(), {"Conv", "same rank"});
  ExpectInvalid(conv({1, 3, 4, 4}, {2, 3, 3, 3}, Shape{3}).RunStatus(), {"Conv", "B [3]"});
  ExpectInvalid(conv({1, 3, 4}, {2, 3, 5}).RunStatus(), {"Conv", "exceeds the padded input"});
  ExpectInvalid(conv({1, 3}, {2, 3}).RunStatus(), {"Conv", "rank >= 3"});
  ExpectInvalid(conv({1, 4, 2, 2}, {3, 2, 1, 1}).Attr(IntAttr("group", 2)).RunStatus(),
                {"Conv", "not divisible by group=2"});
  ExpectInvalid(conv({1, 1, 4, 4}, {1, 1, 3, 3}).Attr(IntsAttr("kernel_shape", {2, 2})).RunStatus(),
                {"Conv", "kernel_shape"});
  ExpectInvalid(conv({1, 1, 4, 4}, {1, 1, 3, 3}).Attr(IntsAttr("strides", {1, 1, 1})).RunStatus(),
                {"Conv", "'strides' has 3 values"});
  ExpectInvalid(conv({1, 1, 4, 4}, {1, 1, 3, 3})
                    .Input(MakeTensor<double>({1}, {0}), DataType::kInvalid)
                    .RunStatus(),
                {"Conv", "dtype FP64"});
}

TEST(ConvTest, FactoryRejectsBadAttributes) {
  auto conv = [](Attribute a) {
    return OpTest("Conv", 11)
        .Attr(std::move(a))
        .Input(MakeTensor<float>({1, 1, 3, 3}, Iota(9)))
        .Input(MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
        .Create();
  };
  ExpectInvalid(conv(StringAttr("auto_pad", "SAME")), {"Conv", "auto_pad", "SAME"});
  ExpectInvalid(conv(IntAttr("group", 0)), {"Conv", "group"});
  ExpectInvalid(conv(IntsAttr("pads", {0, -1, 0, 0})), {"Conv", "'pads'", "-1"});
  ExpectInvalid(conv(IntsAttr("strides", {1, 0})), {"Conv", "'strides'"});
  ExpectInvalid(conv(IntsAttr("dilations", {0, 1})), {"Conv", "'dilations'"});
  ExpectInvalid(conv(IntsAttr("pads", {1, 1, 1})), {"Conv", "'pads'", "even"});
  ExpectInvalid(conv(FloatAttr("group", 1)), {"Conv", "'group' must be an INT"});
  ExpectInvalid(OpTest("Conv", 11)
                    .Attr(IntsAttr("strides", {1, 1}))
                    .Attr(IntsAttr("dilations", {1}))
                    .Input(MakeTensor<float>({1, 1, 3, 3}, Iota(9)))
                    .Input(MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
                    .Create(),
                {"Conv", "'dilations' implies 1 spatial dims but 'strides' implies 2"});
  ExpectInvalid(OpTest("Conv", 11)
                    .Attr(StringAttr("auto_pad", "SAME_UPPER"))
                    .Attr(IntsAttr("pads", {1, 1, 1, 1}))
                    .Input(MakeTensor<float>({1, 1, 3, 3}, Iota(9)))
                    .Input(MakeTensor<float>({1, 1, 2, 2}, {1, 1, 1, 1}))
                    .Create(),
                {"Conv", "pads", "auto_pad=SAME_UPPER"});
}

}  // namespace
}  // namespace kiln::ref::testing
