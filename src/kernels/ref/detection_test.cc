// SPDX-License-Identifier: Apache-2.0
// Tests for the reference detection kernels (detection.cc): NonMaxSuppression (IoU suppression,
// score threshold, per-class limit, center boxes, random against a brute-force IoU), RoiAlign
// (avg and max, both coordinate modes) and GridSample (modes and padding), plus error paths.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

OpTest Nms(const OwnedTensor& boxes, const OwnedTensor& scores, int64_t max_out, float iou,
           float score, int64_t center = 0) {
  OpTest t("NonMaxSuppression", 11);
  t.Attr(IntAttr("center_point_box", center))
      .Input(boxes)
      .Input(scores)
      .Input(MakeTensor<int64_t>({1}, {max_out}))
      .Input(MakeTensor<float>({1}, {iou}))
      .Input(MakeTensor<float>({1}, {score}));
  return t;
}

TEST(NonMaxSuppressionTest, HandChecked) {
  // Box 0 [0,0,1,1] and box 1 [0,0.5,1,1.5] overlap by 0.5 / 1.5 = 1/3; box 2 is far away.
  // Scores 0.9, 0.8, 0.7. iou_threshold 0.3 < 1/3 suppresses box 1; 0.5 keeps it.
  auto boxes = MakeTensor<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0.5f, 1, 1.5f, 5, 5, 6, 6});
  auto scores = MakeTensor<float>({1, 1, 3}, {0.9f, 0.8f, 0.7f});
  ExpectTensor<int64_t>(Nms(boxes, scores, 10, 0.3f, 0).RunOne(), {2, 3}, {0, 0, 0, 0, 0, 2});
  ExpectTensor<int64_t>(Nms(boxes, scores, 10, 0.5f, 0).RunOne(), {3, 3},
                        {0, 0, 0, 0, 0, 1, 0, 0, 2});
  // Score threshold 0.75 drops box 2; limit 1 keeps only the best.
  ExpectTensor<int64_t>(Nms(boxes, scores, 10, 0.5f, 0.75f).RunOne(), {2, 3}, {0, 0, 0, 0, 0, 1});
  ExpectTensor<int64_t>(Nms(boxes, scores, 1, 0.5f, 0).RunOne(), {1, 3}, {0, 0, 0});
  // max_output_boxes_per_class 0 selects nothing.
  ExpectTensor<int64_t>(Nms(boxes, scores, 0, 0.5f, 0).RunOne(), {0, 3}, {});
  // The same boxes in center format [xc, yc, w, h]: box 0 = [0.5,0.5,1,1], box 1 =
  // [1,0.5,1,1] (x 0.5..1.5), box 2 = [5.5,5.5,1,1].
  auto centers = MakeTensor<float>({1, 3, 4}, {0.5f, 0.5f, 1, 1, 1, 0.5f, 1, 1, 5.5f, 5.5f, 1, 1});
  ExpectTensor<int64_t>(Nms(centers, scores, 10, 0.3f, 0, 1).RunOne(), {2, 3}, {0, 0, 0, 0, 0, 2});
}

// Brute force: for every (batch, class), repeatedly take the best remaining box above the
// threshold and drop everything overlapping it by more than `iou`.
std::vector<int64_t> NaiveNms(const std::vector<float>& boxes, const std::vector<float>& scores,
                              int64_t nb, int64_t nc, int64_t n, int64_t max_out, float iou) {
  auto area_iou = [&](int64_t b, int64_t i, int64_t j) {
    const float* p = &boxes[static_cast<size_t>((b * n + i) * 4)];
    const float* q = &boxes[static_cast<size_t>((b * n + j) * 4)];
    const double ay1 = std::min(p[0], p[2]), ay2 = std::max(p[0], p[2]);
    const double ax1 = std::min(p[1], p[3]), ax2 = std::max(p[1], p[3]);
    const double by1 = std::min(q[0], q[2]), by2 = std::max(q[0], q[2]);
    const double bx1 = std::min(q[1], q[3]), bx2 = std::max(q[1], q[3]);
    const double ih = std::max(0.0, std::min(ay2, by2) - std::max(ay1, by1));
    const double iw = std::max(0.0, std::min(ax2, bx2) - std::max(ax1, bx1));
    const double inter = ih * iw;
    const double uni = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter;
    return uni <= 0 ? 0.0 : inter / uni;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t c = 0; c < nc; ++c) {
      std::vector<bool> alive(static_cast<size_t>(n), true);
      for (int64_t taken = 0; taken < max_out; ++taken) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; ++i) {
          if (!alive[static_cast<size_t>(i)]) continue;
          const float s = scores[static_cast<size_t>((b * nc + c) * n + i)];
          if (best < 0 || s > scores[static_cast<size_t>((b * nc + c) * n + best)]) best = i;
        }
        if (best < 0) break;
        out.insert(out.end(), {b, c, best});
        for (int64_t i = 0; i < n; ++i) {
          if (i == best || area_iou(b, best, i) > iou) alive[static_cast<size_t>(i)] = false;
        }
      }
    }
  }
  return out;
}

TEST(NonMaxSuppressionTest, RandomAgainstBruteForce) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 20; ++iter) {
    const int64_t nb = 2, nc = 2, n = 12;
    std::vector<float> boxes = RandomValues<float>(nb * n * 4, rng, 0, 4);
    std::vector<float> scores = RandomValues<float>(nb * nc * n, rng, 0, 1);
    const float iou = 0.1f * static_cast<float>(iter % 8);
    const std::vector<int64_t> want = NaiveNms(boxes, scores, nb, nc, n, 5, iou);
    ExpectTensor<int64_t>(Nms(MakeTensor<float>({nb, n, 4}, boxes),
                              MakeTensor<float>({nb, nc, n}, scores), 5, iou, -1)
                              .RunOne(),
                          {static_cast<int64_t>(want.size()) / 3, 3}, want);
  }
}

TEST(NonMaxSuppressionTest, Errors) {
  auto boxes = MakeTensor<float>({1, 1, 4}, {0, 0, 1, 1});
  ExpectInvalid(Nms(boxes, MakeTensor<float>({1, 1, 2}, {1, 1}), 1, 0.5f, 0).RunStatus(),
                {"NonMaxSuppression", "scores"});
  ExpectInvalid(Nms(boxes, MakeTensor<float>({1, 1, 1}, {1}), 1, 1.5f, 0).RunStatus(),
                {"NonMaxSuppression", "iou_threshold"});
  ExpectInvalid(
      Nms(MakeTensor<float>({1, 3}, {0, 0, 1}), MakeTensor<float>({1, 1, 1}, {1}), 1, 0.5f, 0)
          .RunStatus(),
      {"NonMaxSuppression", "boxes"});
  ExpectInvalid(OpTest("NonMaxSuppression", 11)
                    .Attr(IntAttr("center_point_box", 2))
                    .Input(boxes)
                    .Input(MakeTensor<float>({1, 1, 1}, {1}))
                    .Create(),
                {"NonMaxSuppression", "center_point_box"});
}

TEST(RoiAlignTest, HandChecked) {
  // X 1x1x2x2 {0,1,2,3}; roi [0,0,1,1] (x1,y1,x2,y2), one 1x1 bin, sampling_ratio 1.
  // output_half_pixel: roi 1x1 from (0,0), the sample at (0.5, 0.5) interpolates to
  //   (0+1+2+3)/4 = 1.5.
  // half_pixel: the roi shifts by -0.5 to [-0.5, 0.5], sample at (0, 0) -> X[0,0] = 0.
  auto x = MakeTensor<float>({1, 1, 2, 2}, {0, 1, 2, 3});
  auto rois = MakeTensor<float>({1, 4}, {0, 0, 1, 1});
  auto idx = MakeTensor<int64_t>({1}, {0});
  ExpectTensor<float>(OpTest("RoiAlign", 16)
                          .Attr(StringAttr("coordinate_transformation_mode", "output_half_pixel"))
                          .Attr(IntAttr("sampling_ratio", 1))
                          .Input(x)
                          .Input(rois)
                          .Input(idx)
                          .RunOne(),
                      {1, 1, 1, 1}, {1.5f}, 1e-6);
  ExpectTensor<float>(OpTest("RoiAlign", 16)
                          .Attr(IntAttr("sampling_ratio", 1))
                          .Input(x)
                          .Input(rois)
                          .Input(idx)
                          .RunOne(),
                      {1, 1, 1, 1}, {0.0f}, 1e-6);
  // Opset 10 is output_half_pixel. 2x2 samples at 0.25 / 0.75 in y and x, avg = 1.5 again
  // (bilinear is linear); max of the largest weighted corner: at (0.75, 0.75) the weights are
  //   .0625*0, .1875*1, .1875*2, .5625*3 -> 1.6875.
  ExpectTensor<float>(OpTest("RoiAlign", 10)
                          .Attr(IntAttr("sampling_ratio", 2))
                          .Attr(StringAttr("mode", "max"))
                          .Input(x)
                          .Input(rois)
                          .Input(idx)
                          .RunOne(),
                      {1, 1, 1, 1}, {1.6875f}, 1e-6);
}

TEST(RoiAlignTest, Errors) {
  auto x = MakeTensor<float>({1, 1, 2, 2}, {0, 1, 2, 3});
  auto rois = MakeTensor<float>({1, 4}, {0, 0, 1, 1});
  ExpectInvalid(
      OpTest("RoiAlign", 16).Input(x).Input(rois).Input(MakeTensor<int64_t>({1}, {1})).RunStatus(),
      {"RoiAlign", "batch_indices"});
  ExpectInvalid(OpTest("RoiAlign", 16)
                    .Input(x)
                    .Input(MakeTensor<float>({1, 3}, {0, 0, 1}))
                    .Input(MakeTensor<int64_t>({1}, {0}))
                    .RunStatus(),
                {"RoiAlign", "rois"});
  ExpectInvalid(OpTest("RoiAlign", 16)
                    .Attr(StringAttr("mode", "median"))
                    .Input(x)
                    .Input(rois)
                    .Input(MakeTensor<int64_t>({1}, {0}))
                    .Create(),
                {"RoiAlign", "mode"});
  ExpectInvalid(OpTest("RoiAlign", 10)
                    .Attr(StringAttr("coordinate_transformation_mode", "half_pixel"))
                    .Input(x)
                    .Input(rois)
                    .Input(MakeTensor<int64_t>({1}, {0}))
                    .Create(),
                {"RoiAlign", "opset 16"});
  ExpectInvalid(OpTest("RoiAlign", 16)
                    .Attr(IntAttr("output_height", 0))
                    .Input(x)
                    .Input(rois)
                    .Input(MakeTensor<int64_t>({1}, {0}))
                    .Create(),
                {"RoiAlign", "output_height"});
}

OwnedTensor RunGrid(const std::string& mode, const std::string& padding, int64_t align, float gx,
                    float gy) {
  // X 1x1x2x2 {0,1,2,3} sampled at one grid point.
  return OpTest("GridSample", 16)
      .Attr(StringAttr("mode", mode))
      .Attr(StringAttr("padding_mode", padding))
      .Attr(IntAttr("align_corners", align))
      .Input(MakeTensor<float>({1, 1, 2, 2}, {0, 1, 2, 3}))
      .Input(MakeTensor<float>({1, 1, 1, 2}, {gx, gy}))
      .RunOne();
}

TEST(GridSampleTest, HandChecked) {
  // (0, 0) is the image center: bilinear average (0+1+2+3)/4 = 1.5 either way.
  ExpectTensor<float>(RunGrid("bilinear", "zeros", 0, 0, 0), {1, 1, 1, 1}, {1.5f}, 1e-6);
  ExpectTensor<float>(RunGrid("bilinear", "zeros", 1, 0, 0), {1, 1, 1, 1}, {1.5f}, 1e-6);
  // (-1, -1) with align_corners: pixel (0, 0) = 0; without: (-0.5, -0.5), a quarter of pixel 0
  //   plus zeros -> 0 * 0.25 = 0. Use (1, 1): align -> pixel (1,1) = 3; no align -> (1.5, 1.5):
  //   0.25 * 3 = 0.75 with zeros padding, 3 with border padding.
  ExpectTensor<float>(RunGrid("bilinear", "zeros", 1, 1, 1), {1, 1, 1, 1}, {3.0f}, 1e-6);
  ExpectTensor<float>(RunGrid("bilinear", "zeros", 0, 1, 1), {1, 1, 1, 1}, {0.75f}, 1e-6);
  ExpectTensor<float>(RunGrid("bilinear", "border", 0, 1, 1), {1, 1, 1, 1}, {3.0f}, 1e-6);
  // Reflection without align_corners reflects about -0.5 / 1.5: x = 1.5 stays 1.5, then clamps
  //   to 1 -> pixel (1, 1) = 3.
  ExpectTensor<float>(RunGrid("bilinear", "reflection", 0, 1, 1), {1, 1, 1, 1}, {3.0f}, 1e-6);
  // Nearest: (0.2, -0.2) without align -> x = (1.2*2-1)/2 = 0.7 -> 1, y = 0.3 -> 0: X[0][1] = 1.
  ExpectTensor<float>(RunGrid("nearest", "zeros", 0, 0.2f, -0.2f), {1, 1, 1, 1}, {1.0f}, 1e-6);
  // Bicubic at an exact pixel (align_corners, (-1, -1) = pixel (0,0)) reproduces it: weights
  // at t = 0 are {0, 1, 0, 0}.
  ExpectTensor<float>(RunGrid("bicubic", "border", 1, 1, -1), {1, 1, 1, 1}, {1.0f}, 1e-6);
}

TEST(GridSampleTest, Errors) {
  ExpectInvalid(OpTest("GridSample", 16)
                    .Attr(StringAttr("mode", "area"))
                    .Input(MakeTensor<float>({1, 1, 1, 1}, {0}))
                    .Input(MakeTensor<float>({1, 1, 1, 2}, {0, 0}))
                    .Create(),
                {"GridSample", "mode"});
  ExpectInvalid(OpTest("GridSample", 16)
                    .Attr(StringAttr("padding_mode", "wrap"))
                    .Input(MakeTensor<float>({1, 1, 1, 1}, {0}))
                    .Input(MakeTensor<float>({1, 1, 1, 2}, {0, 0}))
                    .Create(),
                {"GridSample", "padding_mode"});
  ExpectInvalid(OpTest("GridSample", 16)
                    .Input(MakeTensor<float>({1, 1, 1, 1}, {0}))
                    .Input(MakeTensor<float>({2, 1, 1, 2}, {0, 0, 0, 0}))
                    .RunStatus(),
                {"GridSample", "grid"});
  // NaN and huge grid values read as outside (zeros), never crash.
  OwnedTensor y = RunGrid("bicubic", "reflection", 0, std::nanf(""), 1e30f);
  ASSERT_TRUE(y.valid());
}

}  // namespace
}  // namespace kiln::ref::testing
