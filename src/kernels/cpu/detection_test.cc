// SPDX-License-Identifier: Apache-2.0
// The fast NonMaxSuppression against the reference kernel: the selected (batch, class, box)
// triples must be identical, on detector-like inputs (clustered boxes, torchvision's per-class
// offsets, tens of thousands of candidates), with center boxes, flipped corners, zero-area, huge
// and non-finite boxes, score thresholds, ties and small max_output_boxes_per_class. The fast
// RoiAlign against the reference (max bit for bit, avg within 1e-5), both coordinate modes (opsets
// 10 and 16), fixed and adaptive sampling, rois partly or wholly outside the image, empty and
// inverted rois, several batches; bad batch indices report the reference's error.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_test_util.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

struct NmsCase {
  std::string what;
  std::vector<float> boxes;   // [B, N, 4]
  std::vector<float> scores;  // [B, C, N]
  int64_t batches = 1, classes = 1, n = 0;
  int64_t max_out = 100000;
  float iou = 0.5f;
  bool has_score_threshold = false;
  float score_threshold = 0;
  bool center = false;
};

// Boxes in clusters (so many overlap) spread over `extent`, each class shifted by `offset`
// along both axes (torchvision's batched NMS when offset > 0).
NmsCase Clustered(std::string what, int64_t batches, int64_t classes, int64_t n, float extent,
                  float offset, std::mt19937& rng) {
  NmsCase c;
  c.what = std::move(what);
  c.batches = batches;
  c.classes = classes;
  c.n = n;
  std::uniform_real_distribution<float> u(0, 1);
  const int64_t clusters = std::max<int64_t>(1, n / 20);
  std::vector<std::array<float, 3>> centers(static_cast<size_t>(clusters));
  for (auto& k : centers) k = {u(rng) * extent, u(rng) * extent, 4 + u(rng) * extent / 8};
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      const auto& k = centers[static_cast<size_t>(i % clusters)];
      const float cls = offset > 0 ? static_cast<float>(i % 7) * offset : 0;
      const float x = k[0] + (u(rng) - 0.5f) * k[2] + cls, y = k[1] + (u(rng) - 0.5f) * k[2] + cls;
      const float w = k[2] * (0.5f + u(rng)), h = k[2] * (0.5f + u(rng));
      c.boxes.insert(c.boxes.end(), {y, x, y + h, x + w});
    }
  }
  for (int64_t i = 0; i < batches * classes * n; ++i) {
    // Quantized scores make ties, which must keep the lower index first.
    c.scores.push_back(std::round(u(rng) * 64) / 64);
  }
  return c;
}

void ExpectSameSelection(const NmsCase& nc) {
  KernelCase c("NonMaxSuppression", 11);
  c.Input(MakeTensor<float>(S({nc.batches, nc.n, 4}), nc.boxes));
  c.Input(MakeTensor<float>(S({nc.batches, nc.classes, nc.n}), nc.scores));
  c.Input(MakeTensor<int64_t>(S({1}), {nc.max_out}));
  c.Input(MakeTensor<float>(S({1}), {nc.iou}));
  if (nc.has_score_threshold) c.Input(MakeTensor<float>(S({1}), {nc.score_threshold}));
  if (nc.center) c.Attr(IntAttr("center_point_box", 1));
  ASSERT_EQ(c.PickedProvider(), "cpu") << nc.what;
  OwnedTensor got = c.Run("cpu");
  OwnedTensor want = c.Run("ref");
  ASSERT_TRUE(got.valid() && want.valid()) << nc.what;
  ASSERT_EQ(got.shape(), want.shape())
      << nc.what << ": " << got.shape().ToString() << " vs " << want.shape().ToString();
  ASSERT_GT(want.shape().dim(0), 0) << nc.what << ": the case selects something";
  const int64_t* g = got.data<const int64_t>();
  const int64_t* w = want.data<const int64_t>();
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    ASSERT_EQ(g[i], w[i]) << nc.what << ": element " << i;
  }
}

TEST(CpuNonMaxSuppressionTest, MatchesReferenceOnDetectorInputs) {
  std::mt19937 rng(7);
  std::vector<NmsCase> cases;
  cases.push_back(Clustered("one class, 300 boxes", 1, 1, 300, 320, 0, rng));
  cases.push_back(Clustered("per-class offsets, 5000 boxes", 1, 1, 5000, 320, 321, rng));
  cases.push_back(Clustered("two batches, three classes", 2, 3, 700, 100, 0, rng));
  NmsCase t = Clustered("IoU 0.3, score threshold, max 17", 1, 2, 900, 64, 0, rng);
  t.iou = 0.3f;
  t.has_score_threshold = true;
  t.score_threshold = 0.25f;
  t.max_out = 17;
  cases.push_back(t);
  NmsCase z = Clustered("IoU 0", 1, 1, 400, 200, 0, rng);
  z.iou = 0;
  cases.push_back(z);
  NmsCase one = Clustered("IoU 1", 1, 1, 400, 200, 0, rng);
  one.iou = 1;
  cases.push_back(one);
  NmsCase ctr = Clustered("center boxes", 1, 2, 600, 300, 0, rng);
  ctr.center = true;
  for (size_t i = 0; i < ctr.boxes.size(); i += 4) {  // [y1,x1,y2,x2] -> [xc,yc,w,h]
    const float y1 = ctr.boxes[i], x1 = ctr.boxes[i + 1], y2 = ctr.boxes[i + 2],
                x2 = ctr.boxes[i + 3];
    ctr.boxes[i] = (x1 + x2) / 2;
    ctr.boxes[i + 1] = (y1 + y2) / 2;
    ctr.boxes[i + 2] = x2 - x1;
    ctr.boxes[i + 3] = y2 - y1;
  }
  cases.push_back(ctr);
  // Odd boxes: flipped corners, zero area, a few huge ones, NaN and infinite coordinates, and
  // NaN scores.
  NmsCase odd = Clustered("flipped, empty, huge and non-finite boxes", 1, 2, 800, 150, 0, rng);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < odd.n; ++i) {
    float* b = &odd.boxes[static_cast<size_t>(4 * i)];
    switch (i % 23) {
      case 1:
        std::swap(b[0], b[2]);
        break;
      case 2:
        b[2] = b[0];
        break;
      case 3:
        b[0] = -1000;
        b[1] = -1000;
        b[2] = 1000;
        b[3] = 1000;
        break;
      case 4:
        b[2] = inf;
        break;
      case 5:
        b[1] = nan;
        break;
      case 6:
        b[0] = -inf;
        b[3] = inf;
        break;
      case 7:
        odd.scores[static_cast<size_t>(i)] = nan;
        break;
      default:
        break;
    }
  }
  cases.push_back(odd);
  NmsCase same = Clustered("identical boxes", 1, 1, 200, 10, 0, rng);
  for (size_t i = 4; i < same.boxes.size(); ++i) same.boxes[i] = same.boxes[i % 4];
  cases.push_back(same);
  for (const NmsCase& nc : cases) ExpectSameSelection(nc);
}

TEST(CpuNonMaxSuppressionTest, BadInputsReportTheReferenceError) {
  KernelCase c("NonMaxSuppression", 11);
  c.Input(MakeTensor<float>(S({1, 3, 4}), std::vector<float>(12, 0)));
  c.Input(MakeTensor<float>(S({1, 1, 2}), {0.5f, 0.5f}));  // 2 scores for 3 boxes
  Result<OwnedTensor> got = c.TryRun("cpu");
  Result<OwnedTensor> want = c.TryRun("ref");
  ASSERT_FALSE(want.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().ToString(), want.status().ToString());
}

struct RoiAlignCase {
  int64_t opset = 16;
  std::string mode = "avg", ctm;  // ctm empty: the opset's default
  int64_t out_h = 7, out_w = 7, sampling_ratio = 2;
  float spatial_scale = 1;
};

// Rois over an image of h x w (in roi coordinates: pixels / spatial_scale): random boxes, some
// partly or wholly outside, empty (x1 == x2), inverted (x2 < x1), tiny and whole-image.
std::vector<float> MakeRois(int64_t r, float h, float w, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> rois;
  for (int64_t i = 0; i < r; ++i) {
    float x1 = u(rng) * w, y1 = u(rng) * h;
    float x2 = x1 + u(rng) * w / 2, y2 = y1 + u(rng) * h / 2;
    switch (i % 9) {
      case 1:  // partly outside
        x1 -= w / 3;
        y2 += h / 3;
        break;
      case 2:  // wholly outside
        x1 += 2 * w;
        x2 += 2 * w;
        break;
      case 3:  // empty
        x2 = x1;
        break;
      case 4:  // inverted
        std::swap(y1, y2);
        break;
      case 5:  // under a pixel
        x2 = x1 + 0.3f;
        y2 = y1 + 0.6f;
        break;
      case 6:  // the whole image
        x1 = 0;
        y1 = 0;
        x2 = w;
        y2 = h;
        break;
      default:
        break;
    }
    rois.insert(rois.end(), {x1, y1, x2, y2});
  }
  return rois;
}

void ExpectRoiAlignMatches(const RoiAlignCase& rc, const std::vector<int64_t>& x_shape, int64_t r,
                           std::mt19937& rng) {
  const float h = static_cast<float>(x_shape[2]) / rc.spatial_scale;
  const float w = static_cast<float>(x_shape[3]) / rc.spatial_scale;
  std::vector<int64_t> batch(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) batch[static_cast<size_t>(i)] = i % x_shape[0];
  KernelCase c("RoiAlign", rc.opset);
  c.Input(RandomTensor(S(x_shape), rng))
      .Input(MakeTensor<float>(S({r, 4}), MakeRois(r, h, w, rng)))
      .Input(MakeTensor<int64_t>(S({r}), batch));
  c.Attr(StringAttr("mode", rc.mode))
      .Attr(IntAttr("output_height", rc.out_h))
      .Attr(IntAttr("output_width", rc.out_w))
      .Attr(IntAttr("sampling_ratio", rc.sampling_ratio))
      .Attr(FloatAttr("spatial_scale", rc.spatial_scale));
  if (!rc.ctm.empty()) c.Attr(StringAttr("coordinate_transformation_mode", rc.ctm));
  const std::string what = fmt::format(
      "RoiAlign opset {} {} {} {}x{} sampling {} scale {} X [{}] rois {}", rc.opset, rc.mode,
      rc.ctm, rc.out_h, rc.out_w, rc.sampling_ratio, rc.spatial_scale, fmt::join(x_shape, ","), r);
  ASSERT_EQ(c.PickedProvider(), "cpu") << what;
  // max: the reference's expressions in the same order, bit-identical; avg: FLOAT sums.
  ExpectClose(c.Run("cpu"), c.Run("ref"), rc.mode == "max" ? 0 : 1e-5, what);
}

TEST(CpuRoiAlignTest, MatchesReference) {
  std::mt19937 rng(11);
  for (int64_t opset : {10, 16}) {
    for (const char* ctm : {"", "half_pixel", "output_half_pixel"}) {
      if (opset < 16 && ctm[0] != '\0') continue;
      for (const char* mode : {"avg", "max"}) {
        for (int64_t sampling : {0, 1, 2, 3}) {
          RoiAlignCase rc;
          rc.opset = opset;
          rc.ctm = ctm;
          rc.mode = mode;
          rc.sampling_ratio = sampling;
          ExpectRoiAlignMatches(rc, {2, 5, 23, 31}, 40, rng);
          rc.out_h = 3;
          rc.out_w = 5;
          rc.spatial_scale = 0.25f;
          ExpectRoiAlignMatches(rc, {1, 3, 12, 9}, 20, rng);
          rc.out_h = rc.out_w = 1;
          rc.spatial_scale = 1.0f / 16;
          ExpectRoiAlignMatches(rc, {3, 2, 6, 7}, 10, rng);
        }
      }
    }
  }
}

TEST(CpuRoiAlignTest, DetectorSizes) {
  std::mt19937 rng(12);
  RoiAlignCase rc;  // torchvision's MultiScaleRoIAlign: 7x7, sampling 2, aligned = False
  rc.ctm = "output_half_pixel";
  rc.spatial_scale = 0.25f;
  ExpectRoiAlignMatches(rc, {1, 64, 50, 68}, 300, rng);
  rc.sampling_ratio = 0;
  rc.spatial_scale = 0.125f;
  ExpectRoiAlignMatches(rc, {2, 32, 25, 34}, 200, rng);
}

TEST(CpuRoiAlignTest, InfAndNanPropagateAsInTheReference) {
  // X[0] non-finite too: the reference's samples outside the image read it with weight 0.
  std::mt19937 rng(15);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float x0 : {1.0f, inf, nan}) {
    for (const char* mode : {"avg", "max"}) {
      OwnedTensor x = RandomTensor(S({1, 2, 12, 12}), rng);
      float* p = x.data<float>();
      p[0] = x0;
      p[30] = inf;
      p[31] = -inf;
      p[77] = nan;
      p[144 + 50] = inf;
      const int64_t r = 20;
      KernelCase c("RoiAlign", 16);
      c.Input(std::move(x))
          .Input(MakeTensor<float>(S({r, 4}), MakeRois(r, 12, 12, rng)))
          .Input(MakeTensor<int64_t>(S({r}), std::vector<int64_t>(r, 0)));
      c.Attr(StringAttr("mode", mode))
          .Attr(IntAttr("output_height", 3))
          .Attr(IntAttr("output_width", 3))
          .Attr(IntAttr("sampling_ratio", 0));
      ExpectClose(c.Run("cpu"), c.Run("ref"), std::string(mode) == "max" ? 0 : 1e-5,
                  fmt::format("{} X[0] {}", mode, x0));
    }
  }
}

TEST(CpuRoiAlignTest, HugeAdaptiveGridsRunInBatches) {
  // 400-pixel rois at 2x2 bins sample 200 x 200 points per bin: the rois' taps exceed one batch.
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> u(-200, 40);
  const int64_t r = 200;
  std::vector<float> rois;
  for (int64_t i = 0; i < r; ++i) {
    const float x1 = u(rng), y1 = u(rng);
    rois.insert(rois.end(), {x1, y1, x1 + 400, y1 + 400});
  }
  for (const char* mode : {"avg", "max"}) {
    KernelCase c("RoiAlign", 16);
    c.Input(RandomTensor(S({1, 2, 40, 40}), rng))
        .Input(MakeTensor<float>(S({r, 4}), rois))
        .Input(MakeTensor<int64_t>(S({r}), std::vector<int64_t>(r, 0)));
    c.Attr(StringAttr("mode", mode))
        .Attr(IntAttr("output_height", 2))
        .Attr(IntAttr("output_width", 2))
        .Attr(IntAttr("sampling_ratio", 0));
    ExpectClose(c.Run("cpu"), c.Run("ref"), std::string(mode) == "max" ? 0 : 1e-5, mode);
  }
}

TEST(CpuRoiAlignTest, BadInputsReportTheReferenceError) {
  std::mt19937 rng(13);
  for (int64_t bad_index : {-1, 2}) {
    KernelCase c("RoiAlign", 16);
    c.Input(RandomTensor(S({2, 3, 8, 8}), rng))
        .Input(MakeTensor<float>(S({2, 4}), {0, 0, 4, 4, 1, 1, 5, 5}))
        .Input(MakeTensor<int64_t>(S({2}), {0, bad_index}));
    Result<OwnedTensor> got = c.TryRun("cpu");
    Result<OwnedTensor> want = c.TryRun("ref");
    ASSERT_FALSE(want.ok());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().ToString(), want.status().ToString());
  }
}

}  // namespace
}  // namespace kiln::cpu
