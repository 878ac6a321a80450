// SPDX-License-Identifier: Apache-2.0
// Resize (opsets 10-17) for FLOAT tensors whose last two dims are resized (NCHW upsampling in
// FPNs, segmentation heads, detectors' image transforms): modes nearest (every nearest_mode) and
// linear, every coordinate_transformation_mode, scales or sizes, parallel over N*C*output rows.
//
// NOTE on the approach. The reference (ref/resize.cc) builds, per axis and output coordinate,
// the list of (input index, weight) taps in double, then sums weight products over the tensor
// product of the axes' taps. The taps here are built by the same code (copied below: the original
// coordinate from the transformation mode with output_width = scale * input_width, the two
// neighbours, nearest_mode, exclude_outside, tf_crop_and_resize's extrapolation), once per call,
// so the source indices are the reference's exactly. Every axis but the last two must come out
// as the identity (one tap of weight 1 on its own index); otherwise (and for cubic, exclude_outside
// with nearest, other dtypes, bad inputs) the reference runs. Then:
//  - nearest copies out[r][c] = in[row[r]][col[c]]; an output row with the same source row as the
//    one before is a memcpy of it (upsampling);
//  - linear is separable: a source row is interpolated horizontally into a row buffer (two taps
//    per output column, FLOAT weights), and each output row blends the buffers of its two source
//    rows. The two most recent buffers are kept, so upsampling by s computes each source row once
//    instead of s times. The reference interpolates in the same order (columns inside, rows
//    outside) but in double; here it is FLOAT, so results differ by a few ulps of the largest
//    input tap (tests: 1e-5 relative with inputs in [-1, 1]). A column or row with a single tap
//    (integral source coordinate, or clamped at an edge) carries its weight 1 as two half-weight
//    taps on the same index, which is exact and keeps inf an inf (a zero-weight tap would turn an
//    inf into NaN where the reference skips it).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cpu {
namespace {

enum class CoordMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeParams {
  int64_t opset = 13;
  bool linear = false;  // else nearest
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// The taps of one output coordinate along one axis (the reference's Taps, at most two).
struct Taps {
  bool extrapolate = false;
  int n = 0;
  int64_t index[2] = {0, 0};
  double weight[2] = {0, 0};
};

// The reference's OriginalCoord (ref/resize.cc); nullopt: extrapolate.
std::optional<double> OriginalCoord(CoordMode mode, double x, double scale, int64_t in_len,
                                    double roi_start, double roi_end) {
  const double in_w = static_cast<double>(in_len);
  const double out_w = scale * in_w;
  switch (mode) {
    case CoordMode::kAlignCorners:
      return out_w == 1 ? 0.0 : x * (in_w - 1) / (out_w - 1);
    case CoordMode::kAsymmetric:
      return x / scale;
    case CoordMode::kTfCropAndResize: {
      double x_ori = out_w == 1 ? (roi_end - roi_start) * (in_w - 1) / 2
                                : x * (roi_end - roi_start) * (in_w - 1) / (out_w - 1);
      x_ori += roi_start * (in_w - 1);
      if (x_ori < 0 || x_ori > in_w - 1) return std::nullopt;
      return x_ori;
    }
    case CoordMode::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case CoordMode::kPytorchHalfPixel:
      return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case CoordMode::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
  }
  return x;
}

// The reference's MakeTaps for nearest and linear.
Taps MakeTaps(const ResizeParams& p, double x_ori, int64_t in_len) {
  Taps t;
  double f = std::floor(x_ori);
  double r = x_ori - f;
  if (r == 0) {
    f -= 1;
    r = 1;
  }
  const double lim = static_cast<double>(in_len) + 4;
  const int64_t first = static_cast<int64_t>(std::clamp(f, -lim, lim));
  double coeffs[2];
  if (p.linear) {
    coeffs[0] = 1 - r;
    coeffs[1] = r;
  } else {
    bool right = true;
    if (r != 1) {
      switch (p.nearest) {
        case NearestMode::kRoundPreferFloor:
          right = r > 0.5;
          break;
        case NearestMode::kRoundPreferCeil:
          right = r >= 0.5;
          break;
        case NearestMode::kFloor:
          right = false;
          break;
        case NearestMode::kCeil:
          right = true;
          break;
      }
    }
    coeffs[0] = right ? 0.0 : 1.0;
    coeffs[1] = right ? 1.0 : 0.0;
  }
  if (p.exclude_outside) {
    double sum = 0;
    for (int i = 0; i < 2; ++i) {
      const int64_t idx = first + i;
      if (idx < 0 || idx >= in_len) coeffs[i] = 0;
      sum += coeffs[i];
    }
    if (sum != 0) {
      for (double& c : coeffs) c /= sum;
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (coeffs[i] == 0) continue;
    t.index[t.n] = std::clamp<int64_t>(first + i, 0, in_len - 1);
    t.weight[t.n] = coeffs[i];
    ++t.n;
  }
  return t;
}

// Per output coordinate of one axis, as the fast loops read it.
struct AxisPlan {
  std::vector<int32_t> i0, i1;        // source indices (nearest: i0 only)
  std::vector<float> w0, w1;          // linear weights; a single tap is two halves on one index
  std::vector<int64_t> extrapolated;  // output coordinates that take extrapolation_value
};

// Builds the axis plan; false when a coordinate has no tap (the reference then sums nothing:
// left to it).
bool PlanAxis(const ResizeParams& p, int64_t in_len, int64_t out_len, double scale,
              double roi_start, double roi_end, AxisPlan& a) {
  const size_t n = static_cast<size_t>(out_len);
  a.i0.assign(n, 0);
  a.i1.assign(n, 0);
  a.w0.assign(n, 0.5f);
  a.w1.assign(n, 0.5f);
  for (int64_t o = 0; o < out_len; ++o) {
    const size_t ou = static_cast<size_t>(o);
    std::optional<double> x_ori =
        OriginalCoord(p.coord, static_cast<double>(o), scale, in_len, roi_start, roi_end);
    if (!x_ori.has_value()) {
      a.extrapolated.push_back(o);
      continue;
    }
    const Taps t = MakeTaps(p, *x_ori, in_len);
    if (t.n == 0) return false;
    a.i0[ou] = static_cast<int32_t>(t.index[0]);
    if (t.n == 1) {
      a.i1[ou] = a.i0[ou];
      a.w0[ou] = a.w1[ou] = static_cast<float>(t.weight[0] * 0.5);
    } else {
      a.i1[ou] = static_cast<int32_t>(t.index[1]);
      a.w0[ou] = static_cast<float>(t.weight[0]);
      a.w1[ou] = static_cast<float>(t.weight[1]);
    }
  }
  return true;
}

// Whether the axis maps every output coordinate to its own input index with weight 1.
bool IsIdentityAxis(const ResizeParams& p, int64_t in_len, int64_t out_len, double scale,
                    double roi_start, double roi_end) {
  if (in_len != out_len) return false;
  for (int64_t o = 0; o < out_len; ++o) {
    std::optional<double> x_ori =
        OriginalCoord(p.coord, static_cast<double>(o), scale, in_len, roi_start, roi_end);
    if (!x_ori.has_value()) return false;
    const Taps t = MakeTaps(p, *x_ori, in_len);
    if (t.n != 1 || t.index[0] != o || t.weight[0] != 1.0) return false;
  }
  return true;
}

bool IsDense(const Tensor& t) { return t.valid() && t.device().is_cpu() && t.is_contiguous(); }

// A dense 1-D FLOAT or DOUBLE tensor as doubles; nullopt for anything else.
std::optional<std::vector<double>> ReadFloatList(const Tensor& t) {
  if (!IsDense(t) || t.rank() != 1) return std::nullopt;
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DataType::kFloat32) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<const float>()[i];
  } else if (t.dtype() == DataType::kFloat64) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<const double>()[i];
  } else {
    return std::nullopt;
  }
  return v;
}

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(ResizeParams p, std::unique_ptr<Kernel> reference)
      : p_(p), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || ctx.num_outputs() < 1 || !IsDense(ctx.input(0)) ||
        ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() < 1) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    const size_t ranku = static_cast<size_t>(rank);
    // Output size, as the reference computes it; anything it would reject goes to it.
    const bool has_roi_input = p_.opset >= 11;
    const int scales_input = has_roi_input ? 2 : 1;
    std::vector<double> scales;
    std::optional<std::vector<int64_t>> sizes;
    if (ctx.num_inputs() > scales_input && ctx.has_input(scales_input)) {
      std::optional<std::vector<double>> s = ReadFloatList(ctx.input(scales_input));
      if (!s.has_value()) return reference_->Compute(ctx);
      scales = std::move(*s);
    }
    if (has_roi_input && ctx.num_inputs() > 3 && ctx.has_input(3)) {
      const Tensor& st = ctx.input(3);
      if (st.num_elements() > 0) {
        if (!IsDense(st) || st.rank() != 1 || st.dtype() != DataType::kInt64) {
          return reference_->Compute(ctx);
        }
        sizes.emplace(st.data<const int64_t>(), st.data<const int64_t>() + st.num_elements());
      }
    }
    if (sizes.has_value() == !scales.empty()) return reference_->Compute(ctx);
    std::vector<int64_t> out_dims(ranku);
    if (sizes.has_value()) {
      if (sizes->size() != ranku) return reference_->Compute(ctx);
      scales.resize(ranku);
      for (size_t d = 0; d < ranku; ++d) {
        const int64_t in = x.dim(static_cast<int>(d));
        if ((*sizes)[d] < 0) return reference_->Compute(ctx);
        out_dims[d] = (*sizes)[d];
        scales[d] = in == 0 ? 1.0 : static_cast<double>((*sizes)[d]) / static_cast<double>(in);
      }
    } else {
      if (scales.size() != ranku) return reference_->Compute(ctx);
      for (size_t d = 0; d < ranku; ++d) {
        const double s = scales[d];
        if (!(s > 0) || !std::isfinite(s)) return reference_->Compute(ctx);
        const double n = std::floor(s * static_cast<double>(x.dim(static_cast<int>(d))));
        if (n > 9.0e15) return reference_->Compute(ctx);
        out_dims[d] = static_cast<int64_t>(n);
      }
    }
    std::vector<double> roi;
    if (p_.coord == CoordMode::kTfCropAndResize) {
      if (ctx.num_inputs() < 2 || !ctx.has_input(1)) return reference_->Compute(ctx);
      std::optional<std::vector<double>> r = ReadFloatList(ctx.input(1));
      if (!r.has_value() || r->size() != 2 * ranku) return reference_->Compute(ctx);
      roi = std::move(*r);
    }
    auto roi_start = [&](size_t d) { return roi.empty() ? 0.0 : roi[d]; };
    auto roi_end = [&](size_t d) { return roi.empty() ? 1.0 : roi[d + ranku]; };
    // The resized axes: the last two (rank 1: a virtual H of 1).
    const size_t hd = rank >= 2 ? ranku - 2 : 0, wd = ranku - 1;
    const int64_t in_h = rank >= 2 ? x.dim(rank - 2) : 1, in_w = x.dim(rank - 1);
    const int64_t out_h = rank >= 2 ? out_dims[hd] : 1, out_w = out_dims[wd];
    int64_t planes = 1;
    for (size_t d = 0; d + 2 < ranku; ++d) {
      if (!IsIdentityAxis(p_, x.dim(static_cast<int>(d)), out_dims[d], scales[d], roi_start(d),
                          roi_end(d))) {
        return reference_->Compute(ctx);
      }
      planes *= out_dims[d];
    }
    if (planes * out_h * out_w == 0 || in_h * in_w == 0 || in_h > INT32_MAX || in_w > INT32_MAX) {
      return reference_->Compute(ctx);
    }
    AxisPlan rows, cols;
    if (rank >= 2) {
      if (!PlanAxis(p_, in_h, out_h, scales[hd], roi_start(hd), roi_end(hd), rows)) {
        return reference_->Compute(ctx);
      }
    } else {
      rows.i0 = rows.i1 = {0};
      rows.w0 = rows.w1 = {0.5f};
    }
    if (!PlanAxis(p_, in_w, out_w, scales[wd], roi_start(wd), roi_end(wd), cols)) {
      return reference_->Compute(ctx);
    }
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const float fill = static_cast<float>(p_.extrapolation);
    std::vector<uint8_t> row_extrapolated(static_cast<size_t>(out_h), 0);
    for (int64_t r : rows.extrapolated) row_extrapolated[static_cast<size_t>(r)] = 1;
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    const int64_t jobs = planes * out_h;
    const int64_t grain = std::max<int64_t>(1, 16384 / out_w);
    if (!p_.linear) {
      ParallelFor(jobs, grain, [&](int64_t begin, int64_t end) {
        for (int64_t job = begin; job < end; ++job) {
          const int64_t p = job / out_h, r = job % out_h;
          float* dst = py + job * out_w;
          if (row_extrapolated[static_cast<size_t>(r)] != 0) {
            std::fill(dst, dst + out_w, fill);
            continue;
          }
          if (job > begin && r > 0 && row_extrapolated[static_cast<size_t>(r) - 1] == 0 &&
              rows.i0[static_cast<size_t>(r)] == rows.i0[static_cast<size_t>(r) - 1]) {
            std::memcpy(dst, dst - out_w, static_cast<size_t>(out_w) * sizeof(float));
            continue;
          }
          const float* src = px + (p * in_h + rows.i0[static_cast<size_t>(r)]) * in_w;
          const int32_t* ci = cols.i0.data();
          for (int64_t c = 0; c < out_w; ++c) dst[c] = src[ci[c]];
          for (int64_t c : cols.extrapolated) dst[c] = fill;
        }
      });
      return Status::OK();
    }
    ParallelFor(jobs, grain, [&](int64_t begin, int64_t end) {
      // Two row buffers holding horizontally interpolated source rows, keyed by
      // plane * in_h + source row.
      std::vector<float> buffer(2 * static_cast<size_t>(out_w));
      float* slot[2] = {buffer.data(), buffer.data() + out_w};
      int64_t key[2] = {-1, -1};
      auto row = [&](int64_t k, int64_t keep) -> const float* {
        if (key[0] == k) return slot[0];
        if (key[1] == k) return slot[1];
        const int s = key[0] == keep ? 1 : 0;
        float* h = slot[s];
        key[s] = k;
        const float* src = px + k * in_w;
        const int32_t* i0 = cols.i0.data();
        const int32_t* i1 = cols.i1.data();
        const float* w0 = cols.w0.data();
        const float* w1 = cols.w1.data();
        for (int64_t c = 0; c < out_w; ++c) h[c] = w0[c] * src[i0[c]] + w1[c] * src[i1[c]];
        return h;
      };
      for (int64_t job = begin; job < end; ++job) {
        const int64_t p = job / out_h, r = job % out_h;
        const size_t ru = static_cast<size_t>(r);
        float* dst = py + job * out_w;
        if (row_extrapolated[ru] != 0) {
          std::fill(dst, dst + out_w, fill);
          continue;
        }
        const int64_t k0 = p * in_h + rows.i0[ru], k1 = p * in_h + rows.i1[ru];
        const float* h0 = row(k0, k1);
        const float* h1 = row(k1, k0);
        const float a = rows.w0[ru], b = rows.w1[ru];
        for (int64_t c = 0; c < out_w; ++c) dst[c] = a * h0[c] + b * h1[c];
        for (int64_t c : cols.extrapolated) dst[c] = fill;
      }
    });
    return Status::OK();
  }

 private:
  ResizeParams p_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateResize(const KernelInfo& info) {
  // The reference validates the node (and is the kernel for everything outside the fast path).
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateResize(info));
  ref::AttrReader attrs(info);
  ResizeParams p;
  p.opset = info.opset();
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "nearest"));
  if (mode != "nearest" && mode != "linear" && mode != "bilinear") return reference;
  p.linear = mode != "nearest";
  if (info.opset() < 11) {
    p.coord = CoordMode::kAsymmetric;
    p.nearest = NearestMode::kFloor;
    return std::make_unique<ResizeKernel>(p, std::move(reference));
  }
  KILN_ASSIGN_OR_RETURN(std::string coord,
                        attrs.String("coordinate_transformation_mode", "half_pixel"));
  if (coord == "half_pixel") {
    p.coord = CoordMode::kHalfPixel;
  } else if (coord == "pytorch_half_pixel") {
    p.coord = CoordMode::kPytorchHalfPixel;
  } else if (coord == "align_corners") {
    p.coord = CoordMode::kAlignCorners;
  } else if (coord == "asymmetric") {
    p.coord = CoordMode::kAsymmetric;
  } else if (coord == "tf_half_pixel_for_nn") {
    p.coord = CoordMode::kTfHalfPixelForNn;
  } else {
    p.coord = CoordMode::kTfCropAndResize;  // the reference's factory accepted nothing else
  }
  KILN_ASSIGN_OR_RETURN(std::string nearest, attrs.String("nearest_mode", "round_prefer_floor"));
  if (nearest == "round_prefer_ceil") {
    p.nearest = NearestMode::kRoundPreferCeil;
  } else if (nearest == "floor") {
    p.nearest = NearestMode::kFloor;
  } else if (nearest == "ceil") {
    p.nearest = NearestMode::kCeil;
  } else {
    p.nearest = NearestMode::kRoundPreferFloor;
  }
  KILN_ASSIGN_OR_RETURN(p.exclude_outside, attrs.Bool("exclude_outside", false));
  KILN_ASSIGN_OR_RETURN(float extrapolation, attrs.Float("extrapolation_value", 0.0f));
  p.extrapolation = extrapolation;
  // Nearest with exclude_outside can leave a coordinate without its tap: the reference's.
  if (p.exclude_outside && !p.linear) return reference;
  return std::make_unique<ResizeKernel>(p, std::move(reference));
}

}  // namespace kiln::cpu
