// SPDX-License-Identifier: Apache-2.0
// Reference Resize (opsets 10, 11, 13) and Upsample (opsets 7-9) kernels of the tensor op
// family: modes nearest, linear (n-linear) and cubic (n-cubic); every
// coordinate_transformation_mode, nearest_mode, exclude_outside, cubic_coeff_a,
// extrapolation_value; output size from scales or sizes; roi for tf_crop_and_resize.
//
// NOTE on the approach: the ONNX reference interpolates one axis at a time; since its 1-D
// weights depend only on the output coordinate of that axis, the n-D result equals a sum over
// the tensor product of per-axis taps. So the kernel first builds, for every axis and output
// coordinate, the list of (input index, weight) taps (or "extrapolate" for tf_crop_and_resize
// outside the roi), exactly as onnx/backend/test/case/node/resize.py does: the original
// coordinate from the transformation mode, computed with output_width = scale * input_width
// (not the rounded output size); neighbours are the n input indices nearest to it (ties to the
// smaller one), clamped to the edge; weights from the mode (nearest picks one neighbour by
// nearest_mode; linear 1-r, r; cubic Keys with coefficient A), with exclude_outside zeroing the
// taps that fall outside and renormalizing. Then each output element sums weight products over
// the cartesian product of its axes' taps, in double. If any axis extrapolates, the element is
// extrapolation_value (the reference's weights sum to 1, so this is what it yields too).
// Nearest copies elements through the movers of common.h, so it works for every dtype; linear
// and cubic need numeric types (integers are rounded to nearest and saturated).
//
// Opset 10 Resize and Upsample use asymmetric coordinates and, for nearest, floor: the
// Upsample reference (y[i] = x[floor(i / scale)]).

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/tensor_family_util.h"

namespace kiln::ref {
namespace {

enum class ResizeMode { kNearest, kLinear, kCubic };
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
  std::string op;  // "Resize" or "Upsample"
  int64_t opset = 13;
  ResizeMode mode = ResizeMode::kNearest;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  std::optional<std::vector<float>> attr_scales;  // Upsample-7
};

// The taps of one output coordinate along one axis.
struct Taps {
  bool extrapolate = false;
  std::vector<std::pair<int64_t, double>> taps;  // (input index, weight)
};

// Original coordinate of output coordinate x (see the NOTE). `roi_start/end` only for
// tf_crop_and_resize. Returns nullopt when it must extrapolate.
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

Taps MakeTaps(const ResizeParams& p, double x_ori, int64_t in_len) {
  Taps t;
  // The reference's neighbours of x_ori: with f = floor(x_ori) and r = x_ori - f in (0, 1], or
  // f = x_ori - 1 and r = 1 for an integral x_ori, the n nearest indices are f-n/2+1 .. f+n/2.
  double f = std::floor(x_ori);
  double r = x_ori - f;
  if (r == 0) {
    f -= 1;
    r = 1;
  }
  std::vector<double> coeffs;
  int64_t first = 0;  // index of coeffs[0]
  // Coordinates far outside any real input are clamped before the cast (the taps then all sit
  // on an edge element either way).
  const double lim = static_cast<double>(in_len) + 4;
  const int64_t fi = static_cast<int64_t>(std::clamp(f, -lim, lim));
  switch (p.mode) {
    case ResizeMode::kNearest: {
      bool right = true;  // r == 1: the integral coordinate itself
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
      coeffs = {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
      first = fi;
      break;
    }
    case ResizeMode::kLinear:
      coeffs = {1 - r, r};
      first = fi;
      break;
    case ResizeMode::kCubic: {
      const double a = p.cubic_a, s = 1 - r;
      coeffs = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
      first = fi - 1;
      break;
    }
  }
  if (p.exclude_outside) {
    double sum = 0;
    for (size_t i = 0; i < coeffs.size(); ++i) {
      const int64_t idx = first + static_cast<int64_t>(i);
      if (idx < 0 || idx >= in_len) coeffs[i] = 0;
      sum += coeffs[i];
    }
    if (sum != 0) {
      for (double& c : coeffs) c /= sum;
    }
  }
  for (size_t i = 0; i < coeffs.size(); ++i) {
    if (coeffs[i] == 0) continue;
    const int64_t idx = std::clamp<int64_t>(first + static_cast<int64_t>(i), 0, in_len - 1);
    t.taps.emplace_back(idx, coeffs[i]);
  }
  return t;
}

// Saturating conversion of an interpolated value to T (integers round to nearest).
template <typename T>
T ConvertResult(double v) {
  if constexpr (kIsFloatLike<T>) {
    return FromDouble<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T{0};
    const double r = std::nearbyint(v);
    if (r <= static_cast<double>(std::numeric_limits<T>::min())) {
      return std::numeric_limits<T>::min();
    }
    if (r >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(r);
  }
}

class ResizeKernel final : public Kernel {
 public:
  explicit ResizeKernel(ResizeParams p) : p_(std::move(p)) {}

  Status Compute(KernelContext& ctx) const override {
    const std::string& op = p_.op;
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    // Inputs: Upsample-9 / Resize-10 (X, scales); Resize-11+ (X, roi, scales, sizes).
    const bool has_roi_input = op == "Resize" && p_.opset >= 11;
    const int scales_input = has_roi_input ? 2 : 1;
    std::vector<double> scales;
    std::optional<std::vector<int64_t>> sizes;
    if (p_.attr_scales.has_value()) {
      scales.assign(p_.attr_scales->begin(), p_.attr_scales->end());
    } else {
      if (ctx.has_input(scales_input)) {
        KILN_RETURN_IF_ERROR(CheckInput(ctx, scales_input, op));
        KILN_ASSIGN_OR_RETURN(scales, ReadFloats(ctx.input(scales_input), "scales"));
      }
      if (has_roi_input && ctx.has_input(3)) {
        KILN_RETURN_IF_ERROR(CheckInput(ctx, 3, op));
        if (ctx.input(3).num_elements() > 0) {
          KILN_ASSIGN_OR_RETURN(sizes, ReadIntList(ctx.input(3), op, "sizes"));
        }
      }
    }
    if (sizes.has_value() == !scales.empty()) {
      return OpError(op, "exactly one of scales and sizes must be given (scales has {} entries)",
                     scales.size());
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(rank));
    if (sizes.has_value()) {
      if (sizes->size() != static_cast<size_t>(rank)) {
        return OpError(op, "sizes has {} entries, the input {} has rank {}", sizes->size(),
                       x.shape().ToString(), rank);
      }
      scales.resize(static_cast<size_t>(rank));
      for (int d = 0; d < rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        if ((*sizes)[du] < 0) return OpError(op, "sizes must be >= 0, got {}", (*sizes)[du]);
        out_dims[du] = (*sizes)[du];
        scales[du] =
            x.dim(d) == 0 ? 1.0 : static_cast<double>((*sizes)[du]) / static_cast<double>(x.dim(d));
      }
    } else {
      if (scales.size() != static_cast<size_t>(rank)) {
        return OpError(op, "scales has {} entries, the input {} has rank {}", scales.size(),
                       x.shape().ToString(), rank);
      }
      for (int d = 0; d < rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        const double s = scales[du];
        if (!(s > 0) || !std::isfinite(s) || (op == "Upsample" && s < 1)) {
          return OpError(op, "scale {} for dim {} is invalid (must be {})", s, d,
                         op == "Upsample" ? ">= 1" : "> 0");
        }
        const double n = std::floor(s * static_cast<double>(x.dim(d)));
        if (n > 9.0e15) return OpError(op, "output dim {} is too large", d);
        out_dims[du] = static_cast<int64_t>(n);
      }
    }
    std::vector<double> roi;
    if (p_.coord == CoordMode::kTfCropAndResize) {
      if (!ctx.has_input(1)) return OpError(op, "tf_crop_and_resize needs the roi input");
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, op));
      KILN_ASSIGN_OR_RETURN(roi, ReadFloats(ctx.input(1), "roi"));
      if (roi.size() != 2 * static_cast<size_t>(rank)) {
        return OpError(op, "roi has {} entries, expected {}", roi.size(), 2 * rank);
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape(op, out_dims));
    // Allocated before the taps, so an output too large to hold fails here, as a Status.
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    const int64_t total = out.NumElements();
    if (total == 0) return Status::OK();
    // Per-axis taps.
    std::vector<std::vector<Taps>> axes(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      const int64_t in_len = x.dim(d);
      if (in_len == 0 && out_dims[du] > 0) {
        return OpError(op, "cannot resize dim {} of size 0 to {}", d, out_dims[du]);
      }
      axes[du].resize(static_cast<size_t>(out_dims[du]));
      for (int64_t o = 0; o < out_dims[du]; ++o) {
        const double rs = roi.empty() ? 0 : roi[du];
        const double re = roi.empty() ? 1 : roi[du + static_cast<size_t>(rank)];
        std::optional<double> x_ori =
            OriginalCoord(p_.coord, static_cast<double>(o), scales[du], in_len, rs, re);
        Taps& t = axes[du][static_cast<size_t>(o)];
        if (!x_ori.has_value()) {
          t.extrapolate = true;
        } else {
          t = MakeTaps(p_, *x_ori, in_len);
        }
      }
    }
    const DimArray in_strides = RowStrides(x.shape());
    // Visits every output element with its per-axis taps.
    auto for_each_output = [&](auto&& f) {
      DimArray coord{};
      std::vector<const Taps*> taps(static_cast<size_t>(rank));
      for (int64_t o = 0; o < total; ++o) {
        bool extrapolate = false;
        for (int d = 0; d < rank; ++d) {
          const size_t du = static_cast<size_t>(d);
          taps[du] = &axes[du][static_cast<size_t>(coord[du])];
          extrapolate = extrapolate || taps[du]->extrapolate;
        }
        f(o, extrapolate, taps);
        for (int d = rank - 1; d >= 0; --d) {
          const size_t du = static_cast<size_t>(d);
          if (++coord[du] < out.dim(d)) break;
          coord[du] = 0;
        }
      }
    };
    if (p_.mode == ResizeMode::kNearest) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor fill, OwnedTensor::Allocate(x.dtype(), Shape{1}));
      if (p_.extrapolation != 0 && x.dtype() != DataType::kBytes) {
        KILN_RETURN_IF_ERROR(
            (DispatchType<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t,
                          uint8_t, uint16_t, uint32_t, uint64_t, bool>(
                x.dtype(), op, [&](auto tag) -> Status {
                  using T = typename decltype(tag)::type;
                  *fill.data<T>() = ConvertResult<T>(p_.extrapolation);
                  return Status::OK();
                })));
      }
      WithMover(x, y, [&](auto from_x) {
        WithMover(fill.view(), y, [&](auto from_fill) {
          for_each_output([&](int64_t o, bool extrapolate, const std::vector<const Taps*>& taps) {
            if (extrapolate) {
              from_fill(o, 0);
              return;
            }
            int64_t src = 0;
            for (int d = 0; d < rank; ++d) {
              const size_t du = static_cast<size_t>(d);
              src += taps[du]->taps.front().first * in_strides[du];
            }
            from_x(o, src);
          });
        });
      });
      return Status::OK();
    }
    return DispatchNumeric(x.dtype(), op, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* p = x.data<const T>();
      T* q = y.data<T>();
      for_each_output([&](int64_t o, bool extrapolate, const std::vector<const Taps*>& taps) {
        if (extrapolate) {
          q[o] = ConvertResult<T>(p_.extrapolation);
          return;
        }
        // Sum over the tensor product of the axes' taps (recursion over the axes).
        auto sum = [&](auto&& self, int d, int64_t offset) -> double {
          if (d == rank) return static_cast<double>(ToMath(p[offset]));
          double acc = 0;
          const size_t du = static_cast<size_t>(d);
          for (const auto& [idx, w] : taps[du]->taps) {
            acc += w * self(self, d + 1, offset + idx * in_strides[du]);
          }
          return acc;
        };
        q[o] = ConvertResult<T>(sum(sum, 0, 0));
      });
      return Status::OK();
    });
  }

 private:
  // A 1-D FLOAT/DOUBLE/FLOAT16 tensor as doubles.
  Result<std::vector<double>> ReadFloats(const Tensor& t, std::string_view what) const {
    if (t.rank() != 1) {
      return OpError(p_.op, "{} must be 1-D, got shape {}", what, t.shape().ToString());
    }
    std::vector<double> v(static_cast<size_t>(t.num_elements()));
    KILN_RETURN_IF_ERROR(
        (DispatchType<float, double, Float16, BFloat16>(t.dtype(), p_.op, [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          const T* p = t.data<const T>();
          for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(ToMath(p[i]));
          return Status::OK();
        })));
    return v;
  }

  ResizeParams p_;
};

Result<ResizeMode> ParseMode(std::string_view op, const std::string& mode, bool allow_cubic) {
  if (mode == "nearest") return ResizeMode::kNearest;
  if (mode == "linear" || mode == "bilinear") return ResizeMode::kLinear;
  if (mode == "cubic" && allow_cubic) return ResizeMode::kCubic;
  return OpError(op, "mode '{}' is not supported", mode);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateResize(const KernelInfo& info) {
  AttrReader attrs(info);
  ResizeParams p;
  p.op = "Resize";
  p.opset = info.opset();
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  for (std::string_view name : {"coordinate_transformation_mode", "cubic_coeff_a",
                                "exclude_outside", "extrapolation_value", "nearest_mode"}) {
    KILN_RETURN_IF_ERROR(attrs.RequireOpset(name, 11));
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(p.mode, ParseMode("Resize", mode, info.opset() >= 11));
  if (info.opset() < 11) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
    p.coord = CoordMode::kAsymmetric;
    p.nearest = NearestMode::kFloor;
    return std::make_unique<ResizeKernel>(std::move(p));
  }
  if (info.opset() < 13) {
    // Opset 11: roi and scales are required inputs (possibly empty).
    KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
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
  } else if (coord == "tf_half_pixel_for_nn" && info.opset() < 13) {
    p.coord = CoordMode::kTfHalfPixelForNn;
  } else if (coord == "tf_crop_and_resize") {
    p.coord = CoordMode::kTfCropAndResize;
  } else {
    return OpError("Resize", "coordinate_transformation_mode '{}' is not supported at opset {}",
                   coord, info.opset());
  }
  KILN_ASSIGN_OR_RETURN(std::string nearest, attrs.String("nearest_mode", "round_prefer_floor"));
  if (nearest == "round_prefer_floor") {
    p.nearest = NearestMode::kRoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    p.nearest = NearestMode::kRoundPreferCeil;
  } else if (nearest == "floor") {
    p.nearest = NearestMode::kFloor;
  } else if (nearest == "ceil") {
    p.nearest = NearestMode::kCeil;
  } else {
    return OpError("Resize", "nearest_mode '{}' is not supported", nearest);
  }
  KILN_ASSIGN_OR_RETURN(float a, attrs.Float("cubic_coeff_a", -0.75f));
  KILN_ASSIGN_OR_RETURN(p.exclude_outside, attrs.Bool("exclude_outside", false));
  KILN_ASSIGN_OR_RETURN(float extrapolation, attrs.Float("extrapolation_value", 0.0f));
  p.cubic_a = a;
  p.extrapolation = extrapolation;
  if (p.mode != ResizeMode::kNearest) {
    const DataType t = info.input_type(0).dtype;
    if (t == DataType::kBytes || t == DataType::kBool) {
      return OpError("Resize", "mode '{}' needs a numeric input, got {}", mode, DataTypeName(t));
    }
  }
  return std::make_unique<ResizeKernel>(std::move(p));
}

Result<std::unique_ptr<Kernel>> CreateUpsample(const KernelInfo& info) {
  AttrReader attrs(info);
  ResizeParams p;
  p.op = "Upsample";
  p.opset = info.opset();
  p.coord = CoordMode::kAsymmetric;
  p.nearest = NearestMode::kFloor;
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(p.mode, ParseMode("Upsample", mode, false));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("scales", 9));
  if (info.opset() < 9) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
    if (!attrs.Has("scales")) return OpError("Upsample", "attribute 'scales' is required");
    const Attribute* s = info.node().FindAttribute("scales");
    if (s->type != AttributeType::kFloats) {
      return OpError("Upsample", "attribute 'scales' must be a FLOATS");
    }
    p.attr_scales = s->floats;
  } else {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  }
  return std::make_unique<ResizeKernel>(std::move(p));
}

}  // namespace kiln::ref
