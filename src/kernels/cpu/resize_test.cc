// SPDX-License-Identifier: Apache-2.0
// The fast Resize against the reference kernel: nearest (every nearest_mode, bit-exact) and
// linear (FLOAT arithmetic against the reference's double: 1e-5 relative, inputs in [-1, 1]),
// every coordinate_transformation_mode (tf_crop_and_resize with extrapolation), up- and
// down-sampling by integer and non-integer scales, sizes input, ranks 1 to 5, opsets 10 to 17,
// the typical detector / segmentation shapes, inf and NaN inputs; nodes outside the fast path
// (resized outer dims, cubic) still match through the reference.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "kernels/cpu/cpu_test_util.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

// Linear interpolation runs in FLOAT here and in double in the reference: a few ulps of the
// largest input tap apart.
constexpr double kLinearTol = 1e-5;

struct ResizeCase {
  std::vector<int64_t> shape;
  std::vector<float> scales;   // empty: sizes
  std::vector<int64_t> sizes;  // empty: scales
};

// A Resize node at `opset` over `x` with the scales or sizes of `rc` (opset 13+: the unused
// inputs omitted; 11-12: given empty), `roi` for tf_crop_and_resize.
KernelCase MakeResize(int64_t opset, const ResizeCase& rc, OwnedTensor x, bool const_sizes,
                      const std::vector<float>& roi = {}) {
  KernelCase c("Resize", opset);
  c.Input(std::move(x));
  const int64_t r = static_cast<int64_t>(rc.shape.size());
  auto sizes_tensor = [&] { return MakeTensor<int64_t>(S({r}), rc.sizes); };
  auto scales_tensor = [&] {
    return MakeTensor<float>(S({static_cast<int64_t>(rc.scales.size())}), rc.scales);
  };
  if (opset < 11) {
    c.ConstInput(scales_tensor());
    return c;
  }
  if (!roi.empty()) {
    c.Input(MakeTensor<float>(S({static_cast<int64_t>(roi.size())}), roi));
  } else if (opset < 13) {
    c.Input(MakeTensor<float>(S({0}), {}));
  } else {
    c.OmittedInput();
  }
  if (!rc.scales.empty()) {
    c.ConstInput(scales_tensor());
    return c;
  }
  if (opset < 13) {
    c.ConstInput(MakeTensor<float>(S({0}), {}));
  } else {
    c.OmittedInput();
  }
  if (const_sizes) {
    c.ConstInput(sizes_tensor());
  } else {
    c.Input(sizes_tensor());  // computed at run time, as torchvision's transform does
  }
  return c;
}

void ExpectResizeMatches(const KernelCase& c, bool linear, const std::string& what,
                         bool expect_cpu = true) {
  if (expect_cpu) {
    ASSERT_EQ(c.PickedProvider(), "cpu") << what;
  }
  ExpectClose(c.Run("cpu"), c.Run("ref"), linear ? kLinearTol : 0, what);
}

std::string Describe(const ResizeCase& rc) {
  return rc.scales.empty()
             ? fmt::format("[{}] sizes [{}]", fmt::join(rc.shape, ","), fmt::join(rc.sizes, ","))
             : fmt::format("[{}] scales [{}]", fmt::join(rc.shape, ","), fmt::join(rc.scales, ","));
}

const std::vector<ResizeCase>& Shapes() {
  static const std::vector<ResizeCase> shapes = {
      {{1, 3, 7, 9}, {1, 1, 2, 2}, {}},            // integer upsampling
      {{2, 3, 8, 10}, {1, 1, 0.5f, 0.5f}, {}},     // integer downsampling
      {{1, 2, 7, 9}, {1, 1, 0.6f, 1.7f}, {}},      // non-integer, down and up
      {{1, 2, 5, 6}, {1, 1, 3.3f, 0.45f}, {}},     // non-integer, up and down
      {{1, 2, 7, 9}, {}, {1, 2, 13, 5}},           // sizes
      {{1, 1, 9, 4}, {}, {1, 1, 1, 11}},           // to one row
      {{1, 1, 1, 1}, {}, {1, 1, 4, 3}},            // from one pixel
      {{3, 5, 6}, {1, 1.5f, 2.3f}, {}},            // rank 3
      {{6, 11}, {}, {4, 17}},                      // rank 2
      {{10}, {1.7f}, {}},                          // rank 1
      {{2, 1, 2, 5, 4}, {1, 1, 1, 1.25f, 3}, {}},  // rank 5
      {{1, 2, 6, 6}, {1, 1, 1, 1}, {}},            // identity
  };
  return shapes;
}

TEST(CpuResizeTest, NearestEveryModeAndCoordinateMode) {
  std::mt19937 rng(1);
  for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                            "tf_half_pixel_for_nn"}) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      for (const ResizeCase& rc : Shapes()) {
        const int64_t opset = std::string(coord) == "tf_half_pixel_for_nn" ? 11 : 13;
        KernelCase c = MakeResize(opset, rc, RandomTensor(S(rc.shape), rng), true);
        c.Attr(StringAttr("mode", "nearest"))
            .Attr(StringAttr("coordinate_transformation_mode", coord))
            .Attr(StringAttr("nearest_mode", nearest));
        ExpectResizeMatches(c, false,
                            fmt::format("nearest {} {} {}", coord, nearest, Describe(rc)));
      }
    }
  }
}

TEST(CpuResizeTest, LinearEveryCoordinateMode) {
  std::mt19937 rng(2);
  for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                            "tf_half_pixel_for_nn"}) {
    for (bool exclude_outside : {false, true}) {
      for (const ResizeCase& rc : Shapes()) {
        const int64_t opset = std::string(coord) == "tf_half_pixel_for_nn" ? 11 : 17;
        KernelCase c = MakeResize(opset, rc, RandomTensor(S(rc.shape), rng), false);
        c.Attr(StringAttr("mode", "linear"))
            .Attr(StringAttr("coordinate_transformation_mode", coord))
            .Attr(IntAttr("exclude_outside", exclude_outside ? 1 : 0));
        ExpectResizeMatches(
            c, true, fmt::format("linear {} exclude {} {}", coord, exclude_outside, Describe(rc)));
      }
    }
  }
}

TEST(CpuResizeTest, TfCropAndResizeExtrapolates) {
  std::mt19937 rng(3);
  const std::vector<float> roi = {0, 0, -0.2f, 0.1f, 1, 1, 0.9f, 1.3f};  // starts, then ends
  for (const char* mode : {"nearest", "linear"}) {
    for (const ResizeCase& rc : {ResizeCase{{1, 2, 7, 9}, {1, 1, 1.6f, 0.8f}, {}},
                                 ResizeCase{{1, 2, 7, 9}, {}, {1, 2, 5, 12}},
                                 ResizeCase{{1, 2, 7, 9}, {}, {1, 2, 1, 1}}}) {
      KernelCase c = MakeResize(13, rc, RandomTensor(S(rc.shape), rng), true, roi);
      c.Attr(StringAttr("mode", mode))
          .Attr(StringAttr("coordinate_transformation_mode", "tf_crop_and_resize"))
          .Attr(FloatAttr("extrapolation_value", -7.5f));
      ExpectResizeMatches(c, std::string(mode) == "linear",
                          fmt::format("tf_crop_and_resize {} {}", mode, Describe(rc)));
    }
  }
}

TEST(CpuResizeTest, OpsetsTenToSeventeen) {
  std::mt19937 rng(4);
  const ResizeCase up{{1, 3, 5, 7}, {1, 1, 2.5f, 1.5f}, {}};
  for (int64_t opset : {10, 11, 13, 17}) {
    for (const char* mode : {"nearest", "linear"}) {
      KernelCase c = MakeResize(opset, up, RandomTensor(S(up.shape), rng), true);
      c.Attr(StringAttr("mode", mode));
      ExpectResizeMatches(c, std::string(mode) == "linear",
                          fmt::format("opset {} {}", opset, mode));
    }
  }
}

TEST(CpuResizeTest, TypicalDetectorAndSegmentationShapes) {
  std::mt19937 rng(5);
  struct T {
    const char* what;
    ResizeCase rc;
    const char* mode;
    const char* coord;
  };
  for (const T& t : std::vector<T>{
           {"FPN upsample", {{1, 256, 20, 20}, {}, {1, 256, 40, 40}}, "nearest", "asymmetric"},
           {"FPN upsample (scales)", {{1, 256, 25, 34}, {1, 1, 2, 2}, {}}, "nearest", "asymmetric"},
           {"segmentation head",
            {{1, 21, 32, 32}, {}, {1, 21, 256, 256}},
            "linear",
            "pytorch_half_pixel"},
           {"segmentation head, align_corners",
            {{1, 21, 28, 28}, {}, {1, 21, 224, 224}},
            "linear",
            "align_corners"},
           {"detector transform",
            {{1, 3, 480, 640}, {1, 1, 0.5f, 0.5f}, {}},
            "linear",
            "pytorch_half_pixel"},
           {"detector transform by a scale",
            {{1, 3, 427, 640}, {1, 1, 1.2490242f, 1.2490242f}, {}},
            "linear",
            "pytorch_half_pixel"},
           {"SSDlite transform", {{1, 3, 500, 375}, {}, {1, 3, 320, 320}}, "linear", "half_pixel"},
       }) {
    KernelCase c = MakeResize(13, t.rc, RandomTensor(S(t.rc.shape), rng), false);
    c.Attr(StringAttr("mode", t.mode)).Attr(StringAttr("coordinate_transformation_mode", t.coord));
    ExpectResizeMatches(c, std::string(t.mode) == "linear", t.what);
  }
}

TEST(CpuResizeTest, InfAndNanPropagateAsInTheReference) {
  std::mt19937 rng(6);
  const ResizeCase rc{{1, 1, 6, 7}, {1, 1, 2, 1.5f}, {}};
  OwnedTensor x = RandomTensor(S(rc.shape), rng);
  float* p = x.data<float>();
  p[3] = std::numeric_limits<float>::infinity();
  p[10] = -std::numeric_limits<float>::infinity();
  p[11] = std::numeric_limits<float>::infinity();
  p[30] = std::numeric_limits<float>::quiet_NaN();
  p[41] = std::numeric_limits<float>::infinity();  // last element: edge taps
  for (const char* mode : {"nearest", "linear"}) {
    for (const char* coord : {"half_pixel", "align_corners", "asymmetric"}) {
      KernelCase c = MakeResize(13, rc, x, true);
      c.Attr(StringAttr("mode", mode)).Attr(StringAttr("coordinate_transformation_mode", coord));
      ExpectResizeMatches(c, std::string(mode) == "linear",
                          fmt::format("inf/nan {} {}", mode, coord));
    }
  }
}

TEST(CpuResizeTest, OutsideTheFastPathMatchesThroughTheReference) {
  std::mt19937 rng(7);
  // Batch or channels resized, cubic, nearest with exclude_outside: the reference runs them.
  for (const ResizeCase& rc : {ResizeCase{{2, 3, 4, 5}, {1.5f, 1, 2, 2}, {}},
                               ResizeCase{{1, 3, 4, 5}, {}, {1, 5, 4, 5}}}) {
    for (const char* mode : {"nearest", "linear", "cubic"}) {
      KernelCase c = MakeResize(13, rc, RandomTensor(S(rc.shape), rng), true);
      c.Attr(StringAttr("mode", mode));
      ExpectResizeMatches(c, std::string(mode) != "nearest",
                          fmt::format("outer dims {} {}", mode, Describe(rc)));
    }
  }
  const ResizeCase rc{{1, 2, 5, 6}, {1, 1, 1.7f, 0.6f}, {}};
  KernelCase c = MakeResize(13, rc, RandomTensor(S(rc.shape), rng), true);
  c.Attr(StringAttr("mode", "nearest")).Attr(IntAttr("exclude_outside", 1));
  ExpectResizeMatches(c, false, "nearest exclude_outside", false);
  // Errors read as the reference's.
  KernelCase bad = MakeResize(13, ResizeCase{{1, 2, 5, 6}, {1, 1, 2}, {}},
                              RandomTensor(S({1, 2, 5, 6}), rng), true);
  Result<OwnedTensor> got = bad.TryRun("cpu");
  Result<OwnedTensor> want = bad.TryRun("ref");
  ASSERT_FALSE(want.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().ToString(), want.status().ToString());
}

TEST(CpuResizeTest, ConcurrentRuns) {
  std::mt19937 rng(8);
  const ResizeCase rc{{1, 4, 16, 16}, {1, 1, 2.5f, 2.5f}, {}};
  KernelCase c = MakeResize(13, rc, RandomTensor(S(rc.shape), rng), true);
  c.Attr(StringAttr("mode", "linear"));
  Result<KernelCase::Prepared> p = c.Prepare("cpu");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ExpectConcurrentRunsMatch(c, *p, c.Run("ref"));
}

}  // namespace
}  // namespace kiln::cpu
