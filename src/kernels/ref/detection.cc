// SPDX-License-Identifier: Apache-2.0
// Reference detection / sampling kernels: NonMaxSuppression, RoiAlign and GridSample (2-D).
//
// NOTE on the approach.
//  - NonMaxSuppression: per (batch, class), the boxes whose score is above score_threshold are
//    stably sorted by descending score (ties keep the lower box index first) and greedily kept
//    unless their IoU with an already kept box exceeds iou_threshold, up to
//    max_output_boxes_per_class. Corner boxes may come with flipped corners (min/max are taken);
//    center boxes are [x_center, y_center, width, height]. Zero-area boxes have IoU 0.
//  - RoiAlign follows onnxruntime (which the ONNX reference mirrors): per output bin a grid of
//    sampling points (sampling_ratio, or ceil(roi_size / output_size) when 0), each bilinearly
//    interpolated (points more than one pixel outside are 0, the rest clamp to the edge);
//    `avg` averages the samples, `max` takes the max over samples of the largest of the four
//    weighted corner terms (onnxruntime's definition). Opset 10 has no
//    coordinate_transformation_mode and behaves as `output_half_pixel` (no -0.5 shift, rois at
//    least 1x1); from 16 the default is `half_pixel`.
//  - GridSample follows PyTorch's grid_sampler_2d, from which the ONNX definition and test data
//    come: unnormalize with or without align_corners, apply the padding mode to the coordinate
//    (border: clamp; reflection: reflect about the edges then clamp), then bilinear (four
//    corners, out-of-range corners read 0), nearest (round half to even) or bicubic (4x4 taps,
//    A = -0.75, padding applied to each tap). Computation is in double.

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nms_box.h"

namespace kiln::ref {
namespace {

// --- NonMaxSuppression --------------------------------------------------------------------------

using nms::Box;
using nms::Iou;
using nms::MakeBox;

class NonMaxSuppressionKernel final : public Kernel {
 public:
  explicit NonMaxSuppressionKernel(bool center) : center_(center) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "NonMaxSuppression";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& boxes = ctx.input(0);   // FP32 [B, N, 4]
    const Tensor& scores = ctx.input(1);  // FP32 [B, C, N]
    if (boxes.dtype() != DataType::kFloat32 || scores.dtype() != DataType::kFloat32) {
      return OpError(kOp, "boxes and scores must be FP32, got {} and {}",
                     DataTypeName(boxes.dtype()), DataTypeName(scores.dtype()));
    }
    if (boxes.rank() != 3 || boxes.dim(2) != 4) {
      return OpError(kOp, "boxes {} must be [batch, boxes, 4]", boxes.shape().ToString());
    }
    if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
      return OpError(kOp, "scores {} must be [batch, classes, boxes] matching boxes {}",
                     scores.shape().ToString(), boxes.shape().ToString());
    }
    int64_t max_out = 0;
    float iou_threshold = 0;
    bool has_score_threshold = false;
    float score_threshold = 0;
    if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kOp));
      const Tensor& t = ctx.input(2);
      if (t.dtype() != DataType::kInt64 || t.num_elements() != 1) {
        return OpError(kOp, "max_output_boxes_per_class must be one INT64, got {}{}",
                       DataTypeName(t.dtype()), t.shape().ToString());
      }
      max_out = std::max<int64_t>(0, *t.data<const int64_t>());
    }
    for (int i = 3; i < 5; ++i) {
      if (!ctx.has_input(i)) continue;
      KILN_RETURN_IF_ERROR(CheckInput(ctx, i, kOp));
      const Tensor& t = ctx.input(i);
      if (t.dtype() != DataType::kFloat32 || t.num_elements() != 1) {
        return OpError(kOp, "{} must be one FP32, got {}{}",
                       i == 3 ? "iou_threshold" : "score_threshold", DataTypeName(t.dtype()),
                       t.shape().ToString());
      }
      if (i == 3) {
        iou_threshold = *t.data<const float>();
      } else {
        has_score_threshold = true;
        score_threshold = *t.data<const float>();
      }
    }
    if (!(iou_threshold >= 0 && iou_threshold <= 1)) {
      return OpError(kOp, "iou_threshold {} must be in [0, 1]", iou_threshold);
    }
    const int64_t batches = boxes.dim(0), num_boxes = boxes.dim(1), classes = scores.dim(1);
    const float* pb = boxes.data<const float>();
    const float* ps = scores.data<const float>();
    std::vector<int64_t> selected;  // triples
    std::vector<int64_t> order;
    std::vector<Box> kept;
    std::vector<Box> all(static_cast<size_t>(num_boxes));
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t i = 0; i < num_boxes; ++i) {
        all[static_cast<size_t>(i)] = MakeBox(pb + (b * num_boxes + i) * 4, center_);
      }
      for (int64_t c = 0; c < classes; ++c) {
        const float* s = ps + (b * classes + c) * num_boxes;
        nms::OrderCandidates(s, num_boxes, has_score_threshold, score_threshold, order);
        kept.clear();
        int64_t count = 0;
        for (int64_t i : order) {
          if (count >= max_out) break;
          const Box& cand = all[static_cast<size_t>(i)];
          bool suppressed = false;
          for (const Box& k : kept) {
            if (Iou(cand, k) > iou_threshold) {
              suppressed = true;
              break;
            }
          }
          if (suppressed) continue;
          kept.push_back(cand);
          selected.insert(selected.end(), {b, c, i});
          ++count;
        }
      }
    }
    const int64_t n = static_cast<int64_t>(selected.size()) / 3;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, Shape{n, 3}));
    std::copy(selected.begin(), selected.end(), y.data<int64_t>());
    return Status::OK();
  }

 private:
  bool center_;
};

// --- RoiAlign -----------------------------------------------------------------------------------

struct BilinearTap {
  int64_t o1 = 0, o2 = 0, o3 = 0, o4 = 0;  // offsets in the H x W plane
  double w1 = 0, w2 = 0, w3 = 0, w4 = 0;
};

BilinearTap RoiBilinear(int64_t height, int64_t width, double y, double x) {
  BilinearTap t;
  if (std::isnan(y) || std::isnan(x) || y < -1.0 || y > static_cast<double>(height) || x < -1.0 ||
      x > static_cast<double>(width)) {
    return t;  // all weights 0
  }
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly, hx = 1 - lx;
  t.o1 = y_low * width + x_low;
  t.o2 = y_low * width + x_high;
  t.o3 = y_high * width + x_low;
  t.o4 = y_high * width + x_high;
  t.w1 = hy * hx;
  t.w2 = hy * lx;
  t.w3 = ly * hx;
  t.w4 = ly * lx;
  return t;
}

// ceil(v) samples per bin, bounded so that a huge or NaN roi cannot make the loops run forever.
int64_t GridSize(double v) {
  if (!(v > 0)) return 0;
  return static_cast<int64_t>(std::ceil(std::min(v, 1.0e4)));
}

class RoiAlignKernel final : public Kernel {
 public:
  RoiAlignKernel(bool max_mode, int64_t out_h, int64_t out_w, int64_t sampling_ratio,
                 float spatial_scale, bool half_pixel)
      : max_mode_(max_mode),
        out_h_(out_h),
        out_w_(out_w),
        sampling_ratio_(sampling_ratio),
        spatial_scale_(spatial_scale),
        half_pixel_(half_pixel) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "RoiAlign";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, kOp));
    const Tensor& x = ctx.input(0);     // [N, C, H, W]
    const Tensor& rois = ctx.input(1);  // [R, 4]: x1, y1, x2, y2
    const Tensor& idx = ctx.input(2);   // INT64 [R]
    if (x.rank() != 4) return OpError(kOp, "X {} must be 4-D", x.shape().ToString());
    if (rois.dtype() != x.dtype()) {
      return OpError(kOp, "rois has dtype {}, X has {}", DataTypeName(rois.dtype()),
                     DataTypeName(x.dtype()));
    }
    if (rois.rank() != 2 || rois.dim(1) != 4) {
      return OpError(kOp, "rois {} must be [num_rois, 4]", rois.shape().ToString());
    }
    if (idx.dtype() != DataType::kInt64 || idx.rank() != 1 || idx.dim(0) != rois.dim(0)) {
      return OpError(kOp, "batch_indices must be INT64 [{}], got {}{}", rois.dim(0),
                     DataTypeName(idx.dtype()), idx.shape().ToString());
    }
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), r = rois.dim(0);
    const int64_t* pi = idx.data<const int64_t>();
    for (int64_t i = 0; i < r; ++i) {
      if (pi[i] < 0 || pi[i] >= n) {
        return OpError(kOp, "batch_indices[{}] = {} is out of range [0, {})", i, pi[i], n);
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(std::vector<int64_t>{r, c, out_h_, out_w_}));
    return DispatchType<float, double>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      const double offset = half_pixel_ ? 0.5 : 0.0;
      std::vector<BilinearTap> taps;
      for (int64_t ri = 0; ri < r; ++ri) {
        const double sx = ElementAsDouble(rois, ri * 4 + 0) * spatial_scale_ - offset;
        const double sy = ElementAsDouble(rois, ri * 4 + 1) * spatial_scale_ - offset;
        const double ex = ElementAsDouble(rois, ri * 4 + 2) * spatial_scale_ - offset;
        const double ey = ElementAsDouble(rois, ri * 4 + 3) * spatial_scale_ - offset;
        double roi_w = ex - sx, roi_h = ey - sy;
        if (!half_pixel_) {
          roi_w = std::max(roi_w, 1.0);
          roi_h = std::max(roi_h, 1.0);
        }
        const double bin_h = roi_h / static_cast<double>(out_h_);
        const double bin_w = roi_w / static_cast<double>(out_w_);
        const int64_t grid_h = sampling_ratio_ > 0 ? sampling_ratio_ : GridSize(roi_h / out_h_);
        const int64_t grid_w = sampling_ratio_ > 0 ? sampling_ratio_ : GridSize(roi_w / out_w_);
        const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
        const T* plane0 = px + pi[ri] * c * h * w;
        for (int64_t ph = 0; ph < out_h_; ++ph) {
          for (int64_t pw = 0; pw < out_w_; ++pw) {
            taps.clear();
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              const double yy = sy + static_cast<double>(ph) * bin_h +
                                (static_cast<double>(iy) + 0.5) * bin_h / grid_h;
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                const double xx = sx + static_cast<double>(pw) * bin_w +
                                  (static_cast<double>(ix) + 0.5) * bin_w / grid_w;
                taps.push_back(RoiBilinear(h, w, yy, xx));
              }
            }
            for (int64_t ci = 0; ci < c; ++ci) {
              const T* plane = plane0 + ci * h * w;
              double acc = 0;
              bool first = true;
              for (const BilinearTap& t : taps) {
                const double v1 = t.w1 * static_cast<double>(plane[t.o1]);
                const double v2 = t.w2 * static_cast<double>(plane[t.o2]);
                const double v3 = t.w3 * static_cast<double>(plane[t.o3]);
                const double v4 = t.w4 * static_cast<double>(plane[t.o4]);
                if (max_mode_) {
                  const double m = std::max(std::max(v1, v2), std::max(v3, v4));
                  acc = first ? m : std::max(acc, m);
                  first = false;
                } else {
                  acc += v1 + v2 + v3 + v4;
                }
              }
              if (!max_mode_) acc /= count;
              py[((ri * c + ci) * out_h_ + ph) * out_w_ + pw] = static_cast<T>(acc);
            }
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  bool max_mode_;
  int64_t out_h_, out_w_, sampling_ratio_;
  float spatial_scale_;
  bool half_pixel_;
};

// --- GridSample ---------------------------------------------------------------------------------

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPadding { kZeros, kBorder, kReflection };

double Unnormalize(double coord, int64_t size, bool align_corners) {
  const double s = static_cast<double>(size);
  return align_corners ? (coord + 1) / 2 * (s - 1) : ((coord + 1) * s - 1) / 2;
}

// PyTorch's reflect_coordinates: reflects `in` into [twice_low / 2, twice_high / 2].
double Reflect(double in, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double lo = static_cast<double>(twice_low) / 2;
  const double span = static_cast<double>(twice_high - twice_low) / 2;
  in = std::fabs(in - lo);
  const double extra = std::fmod(in, span);
  const double flips = std::floor(in / span);
  return std::fmod(flips, 2.0) == 0 ? extra + lo : span - extra + lo;
}

double ApplyPadding(double coord, int64_t size, GridPadding padding, bool align_corners) {
  const double hi = static_cast<double>(size - 1);
  if (padding == GridPadding::kBorder) return std::clamp(coord, 0.0, std::max(hi, 0.0));
  if (padding == GridPadding::kReflection) {
    coord = align_corners ? Reflect(coord, 0, 2 * (size - 1)) : Reflect(coord, -1, 2 * size - 1);
    return std::clamp(coord, 0.0, std::max(hi, 0.0));
  }
  return coord;
}

// Cubic convolution weights (A = -0.75) for the taps at -1, 0, 1, 2 from floor(x), t = frac.
void CubicWeights(double t, double w[4]) {
  constexpr double a = -0.75;
  auto c1 = [](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto c2 = [](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  w[0] = c2(t + 1);
  w[1] = c1(t);
  w[2] = c1(1 - t);
  w[3] = c2(2 - t);
}

class GridSampleKernel final : public Kernel {
 public:
  GridSampleKernel(GridMode mode, GridPadding padding, bool align_corners)
      : mode_(mode), padding_(padding), align_corners_(align_corners) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "GridSample";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);     // [N, C, H, W]
    const Tensor& grid = ctx.input(1);  // [N, Ho, Wo, 2]
    if (x.rank() != 4) return OpError(kOp, "X {} must be 4-D", x.shape().ToString());
    if (grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2) {
      return OpError(kOp, "grid {} must be [{}, H_out, W_out, 2]", grid.shape().ToString(),
                     x.dim(0));
    }
    if (grid.dtype() != DataType::kFloat32 && grid.dtype() != DataType::kFloat64) {
      return OpError(kOp, "grid must be FP32 or FP64, got {}", DataTypeName(grid.dtype()));
    }
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t ho = grid.dim(1), wo = grid.dim(2);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(std::vector<int64_t>{n, c, ho, wo}));
    return DispatchType<float, double>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < ho; ++i) {
          for (int64_t j = 0; j < wo; ++j) {
            const int64_t g = ((b * ho + i) * wo + j) * 2;
            const double gx = ElementAsDouble(grid, g), gy = ElementAsDouble(grid, g + 1);
            for (int64_t ci = 0; ci < c; ++ci) {
              const T* plane = px + (b * c + ci) * h * w;
              auto at = [&](int64_t yy, int64_t xx) -> double {
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) return 0.0;
                return static_cast<double>(plane[yy * w + xx]);
              };
              py[((b * c + ci) * ho + i) * wo + j] = static_cast<T>(Sample(at, gx, gy, h, w));
            }
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  // Index of a finite coordinate, saturated so that casting never overflows.
  // NaN maps to -1 (outside, reads 0).
  static int64_t Floor(double v) {
    if (std::isnan(v)) return -1;
    return static_cast<int64_t>(std::clamp(std::floor(v), -1e15, 1e15));
  }

  template <typename At>
  double Sample(const At& at, double gx, double gy, int64_t h, int64_t w) const {
    if (std::isnan(gx) || std::isnan(gy)) return 0.0;
    double ix = Unnormalize(gx, w, align_corners_);
    double iy = Unnormalize(gy, h, align_corners_);
    if (mode_ == GridMode::kBicubic) {
      const int64_t x0 = Floor(ix), y0 = Floor(iy);
      double wx[4], wy[4];
      CubicWeights(ix - static_cast<double>(x0), wx);
      CubicWeights(iy - static_cast<double>(y0), wy);
      double acc = 0;
      for (int r = 0; r < 4; ++r) {
        for (int q = 0; q < 4; ++q) {
          const double tx =
              ApplyPadding(static_cast<double>(x0 - 1 + q), w, padding_, align_corners_);
          const double ty =
              ApplyPadding(static_cast<double>(y0 - 1 + r), h, padding_, align_corners_);
          acc += wy[r] * wx[q] * at(Floor(ty), Floor(tx));
        }
      }
      return acc;
    }
    ix = ApplyPadding(ix, w, padding_, align_corners_);
    iy = ApplyPadding(iy, h, padding_, align_corners_);
    if (mode_ == GridMode::kNearest) {
      return at(Floor(std::nearbyint(iy)), Floor(std::nearbyint(ix)));
    }
    const int64_t x0 = Floor(ix), y0 = Floor(iy);
    const double lx = ix - static_cast<double>(x0), ly = iy - static_cast<double>(y0);
    return at(y0, x0) * (1 - ly) * (1 - lx) + at(y0, x0 + 1) * (1 - ly) * lx +
           at(y0 + 1, x0) * ly * (1 - lx) + at(y0 + 1, x0 + 1) * ly * lx;
  }

  GridMode mode_;
  GridPadding padding_;
  bool align_corners_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateNonMaxSuppression(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(bool center, attrs.Bool("center_point_box", false));
  return std::make_unique<NonMaxSuppressionKernel>(center);
}

Result<std::unique_ptr<Kernel>> CreateRoiAlign(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("coordinate_transformation_mode", 16));
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "avg"));
  if (mode != "avg" && mode != "max") {
    return OpError("RoiAlign", "attribute 'mode' is '{}', expected 'avg' or 'max'", mode);
  }
  KILN_ASSIGN_OR_RETURN(std::string ctm,
                        attrs.String("coordinate_transformation_mode",
                                     info.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return OpError("RoiAlign",
                   "attribute 'coordinate_transformation_mode' is '{}', expected 'half_pixel' or "
                   "'output_half_pixel'",
                   ctm);
  }
  KILN_ASSIGN_OR_RETURN(int64_t out_h, attrs.Int("output_height", 1));
  KILN_ASSIGN_OR_RETURN(int64_t out_w, attrs.Int("output_width", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sampling_ratio, attrs.Int("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(float spatial_scale, attrs.Float("spatial_scale", 1.0f));
  constexpr int64_t kMaxSize = int64_t{1} << 20;
  if (out_h < 1 || out_w < 1 || out_h > kMaxSize || out_w > kMaxSize) {
    return OpError("RoiAlign", "output_height {} and output_width {} must be in [1, {}]", out_h,
                   out_w, kMaxSize);
  }
  if (sampling_ratio < 0 || sampling_ratio > 1024) {
    return OpError("RoiAlign", "attribute 'sampling_ratio' is {}, expected [0, 1024]",
                   sampling_ratio);
  }
  if (!std::isfinite(spatial_scale)) {
    return OpError("RoiAlign", "attribute 'spatial_scale' must be finite");
  }
  return std::make_unique<RoiAlignKernel>(mode == "max", out_h, out_w, sampling_ratio,
                                          spatial_scale, ctm == "half_pixel");
}

Result<std::unique_ptr<Kernel>> CreateGridSample(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(bool align_corners, attrs.Bool("align_corners", false));
  KILN_ASSIGN_OR_RETURN(std::string mode_s, attrs.String("mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(std::string pad_s, attrs.String("padding_mode", "zeros"));
  GridMode mode;
  if (mode_s == "bilinear") {
    mode = GridMode::kBilinear;
  } else if (mode_s == "nearest") {
    mode = GridMode::kNearest;
  } else if (mode_s == "bicubic") {
    mode = GridMode::kBicubic;
  } else {
    return OpError("GridSample", "attribute 'mode' is '{}', expected bilinear, nearest or bicubic",
                   mode_s);
  }
  GridPadding padding;
  if (pad_s == "zeros") {
    padding = GridPadding::kZeros;
  } else if (pad_s == "border") {
    padding = GridPadding::kBorder;
  } else if (pad_s == "reflection") {
    padding = GridPadding::kReflection;
  } else {
    return OpError("GridSample",
                   "attribute 'padding_mode' is '{}', expected zeros, border or reflection", pad_s);
  }
  return std::make_unique<GridSampleKernel>(mode, padding, align_corners);
}

}  // namespace kiln::ref
