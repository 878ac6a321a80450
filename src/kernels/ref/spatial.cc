// SPDX-License-Identifier: Apache-2.0
// Sliding-window geometry for Conv and the pools; see spatial.h for the output-size rules.

#include "kernels/ref/spatial.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::ref {
namespace {

constexpr int64_t kMaxWindowAttr = int64_t{1} << 31;

Status CheckValues(const AttrReader& attrs, std::string_view name,
                   const std::vector<int64_t>& values, int64_t min) {
  for (int64_t v : values) {
    if (v < min || v > kMaxWindowAttr) {
      return OpError(attrs.op(), "attribute '{}' has value {}, expected {} <= value <= 2^31", name,
                     v, min);
    }
  }
  return Status::OK();
}

Status CheckLength(std::string_view op, std::string_view name, size_t got, size_t want,
                   std::string_view against) {
  if (got != want) {
    return OpError(op, "attribute '{}' has {} values, expected {} ({})", name, got, want, against);
  }
  return Status::OK();
}

bool MulOk(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool AddOk(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

}  // namespace

Result<WindowAttrs> ReadWindowAttrs(const AttrReader& attrs, bool kernel_shape_required) {
  WindowAttrs w;
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.String("auto_pad", "NOTSET"));
  if (auto_pad == "NOTSET") {
    w.auto_pad = AutoPad::kNotSet;
  } else if (auto_pad == "SAME_UPPER") {
    w.auto_pad = AutoPad::kSameUpper;
  } else if (auto_pad == "SAME_LOWER") {
    w.auto_pad = AutoPad::kSameLower;
  } else if (auto_pad == "VALID") {
    w.auto_pad = AutoPad::kValid;
  } else {
    return OpError(attrs.op(),
                   "attribute 'auto_pad' is '{}', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID",
                   auto_pad);
  }
  KILN_ASSIGN_OR_RETURN(w.kernel_shape, attrs.Ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(w.strides, attrs.Ints("strides"));
  KILN_ASSIGN_OR_RETURN(w.dilations, attrs.Ints("dilations"));
  KILN_ASSIGN_OR_RETURN(w.pads, attrs.Ints("pads"));
  if (kernel_shape_required && w.kernel_shape.empty()) {
    return OpError(attrs.op(), "attribute 'kernel_shape' is required");
  }
  KILN_RETURN_IF_ERROR(CheckValues(attrs, "kernel_shape", w.kernel_shape, 1));
  KILN_RETURN_IF_ERROR(CheckValues(attrs, "strides", w.strides, 1));
  KILN_RETURN_IF_ERROR(CheckValues(attrs, "dilations", w.dilations, 1));
  KILN_RETURN_IF_ERROR(CheckValues(attrs, "pads", w.pads, 0));
  if (w.pads.size() % 2 != 0) {
    return OpError(attrs.op(), "attribute 'pads' has {} values, expected an even count",
                   w.pads.size());
  }
  // The spatial rank implied by whichever attributes are present must agree.
  size_t rank = 0;
  std::string_view from;
  auto agree = [&](std::string_view name, size_t n) -> Status {
    if (n == 0) return Status::OK();
    if (rank == 0) {
      rank = n;
      from = name;
      return Status::OK();
    }
    if (n != rank) {
      return OpError(attrs.op(), "attribute '{}' implies {} spatial dims but '{}' implies {}", name,
                     n, from, rank);
    }
    return Status::OK();
  };
  KILN_RETURN_IF_ERROR(agree("kernel_shape", w.kernel_shape.size()));
  KILN_RETURN_IF_ERROR(agree("strides", w.strides.size()));
  KILN_RETURN_IF_ERROR(agree("dilations", w.dilations.size()));
  KILN_RETURN_IF_ERROR(agree("pads", w.pads.size() / 2));
  if (rank > static_cast<size_t>(Shape::kMaxRank - 2)) {
    return OpError(attrs.op(), "{} spatial dims exceed the supported {}", rank,
                   Shape::kMaxRank - 2);
  }
  if (w.auto_pad != AutoPad::kNotSet &&
      std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; })) {
    return OpError(attrs.op(), "nonzero 'pads' cannot be combined with auto_pad={}", auto_pad);
  }
  return w;
}

Result<WindowGeometry> ResolveWindow(std::string_view op, const WindowAttrs& attrs,
                                     std::span<const int64_t> in, std::span<const int64_t> kernel) {
  const size_t rank = in.size();
  if (rank == 0) return OpError(op, "the input has no spatial dims");
  if (kernel.size() != rank) {
    return OpError(op, "the kernel has {} spatial dims but the input has {}", kernel.size(), rank);
  }
  const std::string_view against = "one per spatial dim of the input";
  if (!attrs.strides.empty()) {
    KILN_RETURN_IF_ERROR(CheckLength(op, "strides", attrs.strides.size(), rank, against));
  }
  if (!attrs.dilations.empty()) {
    KILN_RETURN_IF_ERROR(CheckLength(op, "dilations", attrs.dilations.size(), rank, against));
  }
  if (!attrs.pads.empty()) {
    KILN_RETURN_IF_ERROR(
        CheckLength(op, "pads", attrs.pads.size(), 2 * rank, "two per spatial dim of the input"));
  }
  WindowGeometry g;
  g.rank = static_cast<int>(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = in[d], k = kernel[d];
    const int64_t s = attrs.strides.empty() ? 1 : attrs.strides[d];
    const int64_t dil = attrs.dilations.empty() ? 1 : attrs.dilations[d];
    int64_t pb = attrs.pads.empty() ? 0 : attrs.pads[d];
    int64_t pe = attrs.pads.empty() ? 0 : attrs.pads[d + rank];
    if (k < 1) return OpError(op, "kernel dim {} is {}, expected >= 1", d, k);
    int64_t ext = 0;
    if (!MulOk(k - 1, dil, &ext) || !AddOk(ext, 1, &ext)) {
      return OpError(op, "window extent along spatial dim {} overflows", d);
    }
    int64_t out = 0;
    switch (attrs.auto_pad) {
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        out = n / s + (n % s != 0 ? 1 : 0);
        // (out - 1) * s < n, so total < ext: no overflow.
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + ext - n);
        const int64_t half = total / 2;
        pb = attrs.auto_pad == AutoPad::kSameUpper ? half : total - half;
        pe = total - pb;
        break;
      }
      case AutoPad::kValid:
        pb = pe = 0;
        [[fallthrough]];
      case AutoPad::kNotSet: {
        int64_t span = 0;
        if (!AddOk(n, pb, &span) || !AddOk(span, pe, &span)) {
          return OpError(op, "padded size along spatial dim {} overflows", d);
        }
        span -= ext;
        if (span < 0) {
          return OpError(op,
                         "window extent {} (kernel {}, dilation {}) exceeds the padded input "
                         "size {} along spatial dim {}",
                         ext, k, dil, span + ext, d);
        }
        out = span / s + 1;
        // ceil_mode applies to explicit padding only; VALID is always floor (the ONNX formula).
        if (attrs.ceil_mode && attrs.auto_pad == AutoPad::kNotSet && span % s != 0) {
          ++out;
          if ((out - 1) * s >= n + pb) --out;  // the last window would lie in the end padding
        }
        break;
      }
    }
    g.in[d] = n;
    g.kernel[d] = k;
    g.stride[d] = s;
    g.dilation[d] = dil;
    g.pad_begin[d] = pb;
    g.pad_end[d] = pe;
    g.out[d] = out;
    g.in_size *= n;
    g.kernel_size *= k;
    if (!MulOk(g.out_size, out, &g.out_size)) return OpError(op, "output size overflows");
  }
  return g;
}

void CollectTaps(const WindowGeometry& g, const DimArray& out_coord, Taps& taps) {
  taps.clear();
  DimArray start{};
  for (int d = 0; d < g.rank; ++d) {
    const size_t du = static_cast<size_t>(d);
    start[du] = out_coord[du] * g.stride[du] - g.pad_begin[du];
  }
  DimArray kc{};
  for (int64_t kf = 0; kf < g.kernel_size; ++kf) {
    bool inside = true;
    int64_t offset = 0;
    for (int d = 0; d < g.rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      const int64_t c = start[du] + kc[du] * g.dilation[du];
      if (c < 0 || c >= g.in[du]) {
        inside = false;
        break;
      }
      offset = offset * g.in[du] + c;
    }
    if (inside) taps.emplace_back(kf, offset);
    for (int d = g.rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      if (++kc[du] < g.kernel[du]) break;
      kc[du] = 0;
    }
  }
}

int64_t CountPaddedTaps(const WindowGeometry& g, const DimArray& out_coord) {
  int64_t count = 1;
  for (int d = 0; d < g.rank; ++d) {
    const size_t du = static_cast<size_t>(d);
    const int64_t start = out_coord[du] * g.stride[du] - g.pad_begin[du];
    int64_t n = 0;
    for (int64_t k = 0; k < g.kernel[du]; ++k) {
      const int64_t c = start + k * g.dilation[du];
      if (c >= -g.pad_begin[du] && c < g.in[du] + g.pad_end[du]) ++n;
    }
    count *= n;
  }
  return count;
}

}  // namespace kiln::ref
