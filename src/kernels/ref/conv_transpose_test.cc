// SPDX-License-Identifier: Apache-2.0
// Tests for the reference ConvTranspose (conv_transpose.cc): hand-checked 1-D cases for strides,
// pads, output_padding, output_shape, auto_pad, bias and groups; a randomized 2-D comparison
// against the gather form of the definition (each output sums the inputs that reach it); and
// the error paths.

#include <gtest/gtest.h>

#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

// X [1, 1, 2] = [1, 2], W [1, 1, 2] = [1, 1].
OpTest Ct1d(std::vector<Attribute> attrs) {
  OpTest t("ConvTranspose", 11);
  for (Attribute& a : attrs) t.Attr(std::move(a));
  t.Input(MakeTensor<float>({1, 1, 2}, {1, 2})).Input(MakeTensor<float>({1, 1, 2}, {1, 1}));
  return t;
}

TEST(ConvTransposeTest, HandChecked1d) {
  // Stride 1: x0 lands on 0, 1; x1 on 1, 2: [1, 3, 2].
  ExpectTensor<float>(Ct1d({}).RunOne(), {1, 1, 3}, {1, 3, 2});
  // Stride 2: x0 on 0, 1; x1 on 2, 3: [1, 1, 2, 2].
  ExpectTensor<float>(Ct1d({IntsAttr("strides", {2})}).RunOne(), {1, 1, 4}, {1, 1, 2, 2});
  // Pads [1, 0] crop the first element of the stride-1 result.
  ExpectTensor<float>(Ct1d({IntsAttr("pads", {1, 0})}).RunOne(), {1, 1, 2}, {3, 2});
  // output_padding 1 with stride 2 adds a trailing 0.
  ExpectTensor<float>(Ct1d({IntsAttr("strides", {2}), IntsAttr("output_padding", {1})}).RunOne(),
                      {1, 1, 5}, {1, 1, 2, 2, 0});
  // output_shape 3 with stride 2: full 4, total padding 1; without SAME_UPPER the odd pixel is
  // cropped at the beginning -> [1, 2, 2].
  ExpectTensor<float>(Ct1d({IntsAttr("strides", {2}), IntsAttr("output_shape", {3})}).RunOne(),
                      {1, 1, 3}, {1, 2, 2});
  // SAME_UPPER: out = in * stride = 4 with stride 2, no cropping needed.
  ExpectTensor<float>(
      Ct1d({IntsAttr("strides", {2}), StringAttr("auto_pad", "SAME_UPPER")}).RunOne(), {1, 1, 4},
      {1, 1, 2, 2});
  // SAME_UPPER with stride 1: out 2, total 1: crop at the end -> [1, 3]; SAME_LOWER at the
  // beginning -> [3, 2].
  ExpectTensor<float>(Ct1d({StringAttr("auto_pad", "SAME_UPPER")}).RunOne(), {1, 1, 2}, {1, 3});
  ExpectTensor<float>(Ct1d({StringAttr("auto_pad", "SAME_LOWER")}).RunOne(), {1, 1, 2}, {3, 2});
  // Dilation 2 with stride 1: x0 on 0, 2; x1 on 1, 3: [1, 2, 1, 2].
  ExpectTensor<float>(Ct1d({IntsAttr("dilations", {2})}).RunOne(), {1, 1, 4}, {1, 2, 1, 2});
}

TEST(ConvTransposeTest, BiasAndGroups) {
  // Group 2: channel 0 (x 1) with W[0] = 3, channel 1 (x 2) with W[1] = 4; bias [10, 20].
  ExpectTensor<double>(OpTest("ConvTranspose", 11)
                           .Attr(IntAttr("group", 2))
                           .Input(MakeTensor<double>({1, 2, 1}, {1, 2}))
                           .Input(MakeTensor<double>({2, 1, 1}, {3, 4}))
                           .Input(MakeTensor<double>({2}, {10, 20}))
                           .RunOne(),
                       {1, 2, 1}, {13, 28});
}

// Gather form: y[n, m, oh, ow] = B[m] + sum over c in m's group, kh, kw with
// ih = (oh + pad_top - kh * dh) / sh an integer in range (likewise iw) of x * w.
std::vector<double> GatherConvTranspose(const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& b, int64_t n, int64_t c,
                                        int64_t h, int64_t wd, int64_t m, int64_t group, int64_t kh,
                                        int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                                        int64_t pt, int64_t pl, int64_t oh, int64_t ow) {
  std::vector<double> y;
  const int64_t cg = c / group, mg = m / group;
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t im = 0; im < m; ++im) {
      const int64_t g = im / mg;
      for (int64_t yh = 0; yh < oh; ++yh) {
        for (int64_t yw = 0; yw < ow; ++yw) {
          double acc = b[static_cast<size_t>(im)];
          for (int64_t ic = g * cg; ic < (g + 1) * cg; ++ic) {
            for (int64_t a = 0; a < kh; ++a) {
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t th = yh + pt - a * dh, tw = yw + pl - e * dw;
                if (th < 0 || tw < 0 || th % sh != 0 || tw % sw != 0) continue;
                const int64_t ih = th / sh, iw = tw / sw;
                if (ih >= h || iw >= wd) continue;
                acc += x[static_cast<size_t>(((in * c + ic) * h + ih) * wd + iw)] *
                       w[static_cast<size_t>(((ic * mg + im % mg) * kh + a) * kw + e)];
              }
            }
          }
          y.push_back(acc);
        }
      }
    }
  }
  return y;
}

TEST(ConvTransposeTest, RandomMatchesGatherForm) {
  std::mt19937 rng(11);
  struct Case {
    int64_t group, sh, sw, dh, dw, pt, pl, pb, pr, adj_h, adj_w;
  };
  const Case cases[] = {{1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
                        {2, 2, 3, 1, 1, 1, 0, 0, 2, 1, 0},
                        {1, 3, 2, 2, 1, 0, 1, 2, 0, 0, 1},
                        {2, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1}};
  const int64_t n = 2, c = 4, h = 3, wd = 4, m = 6, kh = 2, kw = 3;
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "group " << k.group << " strides " << k.sh << "," << k.sw);
    const std::vector<double> x = RandomValues<double>(n * c * h * wd, rng);
    const std::vector<double> w = RandomValues<double>(c * (m / k.group) * kh * kw, rng);
    const std::vector<double> b = RandomValues<double>(m, rng);
    const int64_t oh = k.sh * (h - 1) + k.adj_h + (kh - 1) * k.dh + 1 - k.pt - k.pb;
    const int64_t ow = k.sw * (wd - 1) + k.adj_w + (kw - 1) * k.dw + 1 - k.pl - k.pr;
    const std::vector<double> expected = GatherConvTranspose(
        x, w, b, n, c, h, wd, m, k.group, kh, kw, k.sh, k.sw, k.dh, k.dw, k.pt, k.pl, oh, ow);
    ExpectTensor<double>(OpTest("ConvTranspose", 11)
                             .Attr(IntAttr("group", k.group))
                             .Attr(IntsAttr("strides", {k.sh, k.sw}))
                             .Attr(IntsAttr("dilations", {k.dh, k.dw}))
                             .Attr(IntsAttr("pads", {k.pt, k.pl, k.pb, k.pr}))
                             .Attr(IntsAttr("output_padding", {k.adj_h, k.adj_w}))
                             .Input(MakeTensor<double>({n, c, h, wd}, x))
                             .Input(MakeTensor<double>({c, m / k.group, kh, kw}, w))
                             .Input(MakeTensor<double>({m}, b))
                             .RunOne(),
                         {n, m, oh, ow}, expected, 1e-12);
  }
}

TEST(ConvTransposeTest, Errors) {
  // Load time.
  ExpectInvalid(Ct1d({IntAttr("group", 0)}).Create(), {"ConvTranspose", "group"});
  ExpectInvalid(Ct1d({StringAttr("auto_pad", "FOO")}).Create(), {"ConvTranspose", "auto_pad"});
  ExpectInvalid(Ct1d({IntsAttr("output_padding", {-1})}).Create(),
                {"ConvTranspose", "output_padding"});
  // Run time.
  ExpectInvalid(Ct1d({IntsAttr("output_padding", {1})}).RunStatus(),
                {"ConvTranspose", "output_padding"});
  ExpectInvalid(Ct1d({IntsAttr("pads", {2, 2})}).RunStatus(), {"ConvTranspose", "pads"});
  ExpectInvalid(Ct1d({IntsAttr("strides", {1, 1})}).RunStatus(), {"ConvTranspose", "strides"});
  ExpectInvalid(Ct1d({IntsAttr("kernel_shape", {3})}).RunStatus(),
                {"ConvTranspose", "kernel_shape"});
  ExpectInvalid(Ct1d({IntAttr("group", 2)}).RunStatus(), {"ConvTranspose", "group=2"});
  ExpectInvalid(OpTest("ConvTranspose", 11)
                    .Input(MakeTensor<float>({1, 2}, {1, 2}))
                    .Input(MakeTensor<float>({2, 1}, {1, 1}))
                    .RunStatus(),
                {"ConvTranspose", "rank >= 3"});
  ExpectInvalid(OpTest("ConvTranspose", 11)
                    .Input(MakeTensor<float>({1, 1, 2}, {1, 2}))
                    .Input(MakeTensor<float>({1, 1, 2}, {1, 1}))
                    .Input(MakeTensor<float>({2}, {0, 0}))
                    .RunStatus(),
                {"ConvTranspose", "B"});
}

}  // namespace
}  // namespace kiln::ref::testing
