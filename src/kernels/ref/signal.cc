// SPDX-License-Identifier: Apache-2.0
// Reference signal-processing kernels (opset 17): HannWindow, HammingWindow, BlackmanWindow,
// MelWeightMatrix, DFT and STFT.
//
// NOTE on the approach: windows are generalized cosine windows evaluated in double with
// N = size (periodic) or size - 1 (symmetric) and cast to output_datatype. DFT and STFT are
// direct O(n^2) transforms in double (this is the oracle, not a fast path): a real input
// ([..., 1]) is read with zero imaginary part, the signal is truncated or zero-padded to
// dft_length, the inverse transform uses e^{+i...} and scales by 1 / dft_length, and onesided
// keeps bins [0, n / 2]. STFT frames the signal at frame_step, multiplies by the window and runs
// the same DFT per frame. MelWeightMatrix follows the ONNX reference implementation step by step
// (its mel spacing divides by num_mel_bins + 2 and bins are floor((dft_length + 1) * hz /
// sample_rate)), since the conformance data is generated from it.

#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

// The dtypes an output_datatype attribute (a TensorProto data type number) may name here:
// numbers only.
std::optional<DataType> NumericTypeFromOnnx(int64_t t) {
  const std::optional<DataType> dtype = DataTypeFromOnnxNumber(t);
  if (dtype == DataType::kBytes || dtype == DataType::kBool) return std::nullopt;
  return dtype;
}

// Writes `values` to output 0 as `dtype` with `shape` (16-bit floats rounded to nearest even,
// integers truncated toward zero as a C cast does, after clamping to the type's range).
Status WriteAs(KernelContext& ctx, std::string_view op, DataType dtype, const Shape& shape,
               const std::vector<double>& values) {
  KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, dtype, shape));
  if (dtype == DataType::kFloat16) {
    auto* p = y.data<Float16>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = FloatToFloat16(static_cast<float>(values[i]));
    return Status::OK();
  }
  if (dtype == DataType::kBFloat16) {
    auto* p = y.data<BFloat16>();
    for (size_t i = 0; i < values.size(); ++i)
      p[i] = FloatToBFloat16(static_cast<float>(values[i]));
    return Status::OK();
  }
  return DispatchType<float, double, uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t, uint32_t,
                      uint64_t>(dtype, op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* p = y.data<T>();
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        p[i] = static_cast<T>(values[i]);
      } else {
        const double v = std::isnan(values[i]) ? 0.0 : values[i];
        // Clamp in double; the upper bound of 64-bit types rounds up, so compare with >=.
        constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
        constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
        p[i] = v <= lo   ? std::numeric_limits<T>::min()
               : v >= hi ? std::numeric_limits<T>::max()
                         : static_cast<T>(v);
      }
    }
    return Status::OK();
  });
}

// Reads a scalar (or one-element) integer input as int64.
Result<int64_t> ReadIntScalar(const KernelContext& ctx, int i, std::string_view op,
                              std::string_view what) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  const Tensor& t = ctx.input(i);
  if (t.num_elements() != 1 || t.rank() > 1) {
    return OpError(op, "{} must be a scalar, got {}", what, t.shape().ToString());
  }
  if (t.dtype() == DataType::kInt32) return int64_t{*t.data<const int32_t>()};
  if (t.dtype() == DataType::kInt64) return *t.data<const int64_t>();
  return OpError(op, "{} must be INT32 or INT64, got {}", what, DataTypeName(t.dtype()));
}

Result<double> ReadFloatScalar(const KernelContext& ctx, int i, std::string_view op,
                               std::string_view what) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  const Tensor& t = ctx.input(i);
  if (t.num_elements() != 1 || t.rank() > 1) {
    return OpError(op, "{} must be a scalar, got {}", what, t.shape().ToString());
  }
  switch (t.dtype()) {
    case DataType::kFloat32:
      return static_cast<double>(*t.data<const float>());
    case DataType::kFloat64:
      return *t.data<const double>();
    case DataType::kFloat16:
      return static_cast<double>(Float16ToFloat(*t.data<const Float16>()));
    case DataType::kBFloat16:
      return static_cast<double>(BFloat16ToFloat(*t.data<const BFloat16>()));
    default:
      return OpError(op, "{} must be floating point, got {}", what, DataTypeName(t.dtype()));
  }
}

// Largest window / matrix / transform length accepted (keeps O(n^2) loops and allocations sane).
constexpr int64_t kMaxLength = int64_t{1} << 24;

// --- Windows ------------------------------------------------------------------------------------

enum class WindowKind { kHann, kHamming, kBlackman };

class WindowKernel final : public Kernel {
 public:
  WindowKernel(WindowKind kind, DataType out, bool periodic)
      : kind_(kind), out_(out), periodic_(periodic) {}

  Status Compute(KernelContext& ctx) const override {
    const std::string_view op = kind_ == WindowKind::kHann      ? "HannWindow"
                                : kind_ == WindowKind::kHamming ? "HammingWindow"
                                                                : "BlackmanWindow";
    KILN_ASSIGN_OR_RETURN(int64_t size, ReadIntScalar(ctx, 0, op, "size"));
    if (size < 0 || size > kMaxLength) {
      return OpError(op, "size {} is out of range [0, {}]", size, kMaxLength);
    }
    const double n1 = static_cast<double>(periodic_ ? size : size - 1);
    std::vector<double> w(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      // A symmetric window of size 1 has N = 0: take the phase as 0 (value a0 + a1 + a2...).
      const double phase = n1 > 0 ? 2 * std::numbers::pi * static_cast<double>(i) / n1 : 0.0;
      double v = 0;
      switch (kind_) {
        case WindowKind::kHann:
          v = 0.5 - 0.5 * std::cos(phase);
          break;
        case WindowKind::kHamming:
          v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(phase);
          break;
        case WindowKind::kBlackman:
          v = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2 * phase);
          break;
      }
      w[static_cast<size_t>(i)] = v;
    }
    return WriteAs(ctx, op, out_, Shape{size}, w);
  }

 private:
  WindowKind kind_;
  DataType out_;
  bool periodic_;
};

Result<std::unique_ptr<Kernel>> CreateWindow(const KernelInfo& info, WindowKind kind) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t t, attrs.Int("output_datatype", 1));
  const std::optional<DataType> out = NumericTypeFromOnnx(t);
  if (!out) return OpError(attrs.op(), "attribute 'output_datatype' {} is not supported", t);
  KILN_ASSIGN_OR_RETURN(bool periodic, attrs.Bool("periodic", true));
  return std::make_unique<WindowKernel>(kind, *out, periodic);
}

// --- MelWeightMatrix ----------------------------------------------------------------------------

class MelWeightMatrixKernel final : public Kernel {
 public:
  explicit MelWeightMatrixKernel(DataType out) : out_(out) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "MelWeightMatrix";
    KILN_ASSIGN_OR_RETURN(int64_t mel_bins, ReadIntScalar(ctx, 0, kOp, "num_mel_bins"));
    KILN_ASSIGN_OR_RETURN(int64_t dft_length, ReadIntScalar(ctx, 1, kOp, "dft_length"));
    KILN_ASSIGN_OR_RETURN(int64_t sample_rate, ReadIntScalar(ctx, 2, kOp, "sample_rate"));
    KILN_ASSIGN_OR_RETURN(double lower, ReadFloatScalar(ctx, 3, kOp, "lower_edge_hertz"));
    KILN_ASSIGN_OR_RETURN(double upper, ReadFloatScalar(ctx, 4, kOp, "upper_edge_hertz"));
    if (mel_bins < 1 || mel_bins > kMaxLength || dft_length < 1 || dft_length > kMaxLength ||
        sample_rate < 1) {
      return OpError(kOp,
                     "num_mel_bins {}, dft_length {} and sample_rate {} must be positive (lengths "
                     "at most {})",
                     mel_bins, dft_length, sample_rate, kMaxLength);
    }
    if (!(lower >= 0 && upper > lower && std::isfinite(upper))) {
      return OpError(kOp, "need 0 <= lower_edge_hertz {} < upper_edge_hertz {}", lower, upper);
    }
    const int64_t spec_bins = dft_length / 2 + 1;
    const double low_mel = 2595 * std::log10(1 + lower / 700);
    const double high_mel = 2595 * std::log10(1 + upper / 700);
    const double mel_step = (high_mel - low_mel) / static_cast<double>(mel_bins + 2);
    std::vector<int64_t> bins(static_cast<size_t>(mel_bins + 2));
    for (int64_t i = 0; i < mel_bins + 2; ++i) {
      const double hz =
          700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
      const double bin =
          std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
      // hi (the last edge) may equal spec_bins: it is an exclusive bound below.
      if (!(bin >= 0 && bin <= static_cast<double>(spec_bins))) {
        return OpError(kOp, "upper_edge_hertz {} maps past the {} spectrogram bins", upper,
                       spec_bins);
      }
      bins[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
    }
    std::vector<double> w(static_cast<size_t>(spec_bins * mel_bins), 0.0);
    auto at = [&](int64_t j, int64_t i) -> Result<double*> {
      if (j < 0 || j >= spec_bins) {
        return OpError(kOp, "mel bin {} maps to spectrogram bin {} past the {} bins", i, j,
                       spec_bins);
      }
      return &w[static_cast<size_t>(j * mel_bins + i)];
    };
    for (int64_t i = 0; i < mel_bins; ++i) {
      const int64_t lo = bins[static_cast<size_t>(i)], center = bins[static_cast<size_t>(i + 1)],
                    hi = bins[static_cast<size_t>(i + 2)];
      const int64_t up = center - lo;
      if (up == 0) {
        KILN_ASSIGN_OR_RETURN(double* p, at(center, i));
        *p = 1;
      } else {
        for (int64_t j = lo; j <= center; ++j) {
          KILN_ASSIGN_OR_RETURN(double* p, at(j, i));
          *p = static_cast<double>(j - lo) / static_cast<double>(up);
        }
      }
      const int64_t down = hi - center;
      for (int64_t j = center; down > 0 && j < hi; ++j) {
        KILN_ASSIGN_OR_RETURN(double* p, at(j, i));
        *p = static_cast<double>(hi - j) / static_cast<double>(down);
      }
    }
    return WriteAs(ctx, kOp, out_, Shape{spec_bins, mel_bins}, w);
  }

 private:
  DataType out_;
};

// --- DFT / STFT ---------------------------------------------------------------------------------

// out[k] = scale * sum_n in[n] * e^{sign * 2 pi i k n / len} for k < bins; `in` has len complex
// values (re, im interleaved).
void Dft(const std::vector<double>& in, int64_t len, int64_t bins, bool inverse,
         std::vector<double>& out) {
  out.assign(static_cast<size_t>(2 * bins), 0.0);
  const double sign = inverse ? 1.0 : -1.0;
  const double scale = inverse ? 1.0 / static_cast<double>(len) : 1.0;
  for (int64_t k = 0; k < bins; ++k) {
    double re = 0, im = 0;
    for (int64_t n = 0; n < len; ++n) {
      // (k * n) mod len keeps the angle small and exact for large indices.
      const double a = sign * 2 * std::numbers::pi * static_cast<double>((k * n) % len) /
                       static_cast<double>(len);
      const double c = std::cos(a), s = std::sin(a);
      const double xr = in[static_cast<size_t>(2 * n)], xi = in[static_cast<size_t>(2 * n + 1)];
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    out[static_cast<size_t>(2 * k)] = re * scale;
    out[static_cast<size_t>(2 * k + 1)] = im * scale;
  }
}

class DftKernel final : public Kernel {
 public:
  DftKernel(int64_t axis, bool inverse, bool onesided)
      : axis_(axis), inverse_(inverse), onesided_(onesided) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "DFT";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kOp));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3 || (x.dim(x.rank() - 1) != 1 && x.dim(x.rank() - 1) != 2)) {
      return OpError(kOp, "input {} must be [batch, ..., 1 or 2] with rank >= 3",
                     x.shape().ToString());
    }
    const int r = x.rank();
    // The axis ranges over the signal dims [1, r - 2]; negative counts from the back.
    const int64_t a = axis_ < 0 ? axis_ + r : axis_;
    if (a < 1 || a > r - 2) {
      return OpError(kOp, "axis {} must name a signal dim of input {}", axis_,
                     x.shape().ToString());
    }
    const int64_t size = x.dim(static_cast<int>(a));
    int64_t len = size;
    if (ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(len, ReadIntScalar(ctx, 1, kOp, "dft_length"));
      if (len < 1 || len > kMaxLength) {
        return OpError(kOp, "dft_length {} is out of range [1, {}]", len, kMaxLength);
      }
    }
    const int64_t bins = onesided_ ? len / 2 + 1 : len;
    const bool complex_in = x.dim(r - 1) == 2;
    const int64_t outer = DimProduct(x.shape().dims(), 0, static_cast<size_t>(a));
    const int64_t inner =
        DimProduct(x.shape().dims(), static_cast<size_t>(a) + 1, static_cast<size_t>(r - 1));
    std::vector<int64_t> out_dims(x.shape().dims().begin(), x.shape().dims().end());
    out_dims[static_cast<size_t>(a)] = bins;
    out_dims.back() = 2;
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    if (!IsFloatingPoint(x.dtype())) {
      return OpError(kOp, "unsupported dtype {}", DataTypeName(x.dtype()));
    }
    std::vector<double> result(static_cast<size_t>(out.NumElements()));
    std::vector<double> in(static_cast<size_t>(2 * len)), spec;
    const int64_t comp = complex_in ? 2 : 1;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        std::fill(in.begin(), in.end(), 0.0);
        for (int64_t n = 0; n < std::min(size, len); ++n) {
          const int64_t base = ((o * size + n) * inner + i) * comp;
          in[static_cast<size_t>(2 * n)] = ElementAsDouble(x, base);
          if (complex_in) in[static_cast<size_t>(2 * n + 1)] = ElementAsDouble(x, base + 1);
        }
        Dft(in, len, bins, inverse_, spec);
        for (int64_t k = 0; k < bins; ++k) {
          const int64_t base = ((o * bins + k) * inner + i) * 2;
          result[static_cast<size_t>(base)] = spec[static_cast<size_t>(2 * k)];
          result[static_cast<size_t>(base + 1)] = spec[static_cast<size_t>(2 * k + 1)];
        }
      }
    }
    return WriteAs(ctx, kOp, x.dtype(), out, result);
  }

 private:
  int64_t axis_;
  bool inverse_, onesided_;
};

class StftKernel final : public Kernel {
 public:
  explicit StftKernel(bool onesided) : onesided_(onesided) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "STFT";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kOp));
    const Tensor& x = ctx.input(0);  // [batch, length, 1 or 2]
    if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2)) {
      return OpError(kOp, "signal {} must be [batch, length, 1 or 2]", x.shape().ToString());
    }
    if (!IsFloatingPoint(x.dtype())) {
      return OpError(kOp, "unsupported dtype {}", DataTypeName(x.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(int64_t step, ReadIntScalar(ctx, 1, kOp, "frame_step"));
    const Tensor* window = nullptr;
    int64_t frame = -1;
    if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kOp));
      window = &ctx.input(2);
      if (window->rank() != 1 || !IsFloatingPoint(window->dtype())) {
        return OpError(kOp, "window must be a 1-D float tensor, got {}{}",
                       DataTypeName(window->dtype()), window->shape().ToString());
      }
      frame = window->dim(0);
    }
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(int64_t fl, ReadIntScalar(ctx, 3, kOp, "frame_length"));
      if (frame >= 0 && fl != frame) {
        return OpError(kOp, "frame_length {} differs from the window length {}", fl, frame);
      }
      frame = fl;
    }
    const int64_t batch = x.dim(0), length = x.dim(1);
    if (frame < 1 || frame > length || frame > kMaxLength) {
      return OpError(kOp,
                     "frame length {} must be in [1, signal length {}] (from window or "
                     "frame_length)",
                     frame, length);
    }
    if (step < 1) return OpError(kOp, "frame_step {} must be >= 1", step);
    const bool complex_in = x.dim(2) == 2;
    if (complex_in && onesided_) {
      return OpError(kOp, "onesided output needs a real signal");
    }
    const int64_t frames = (length - frame) / step + 1;
    const int64_t bins = onesided_ ? frame / 2 + 1 : frame;
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(std::vector<int64_t>{batch, frames, bins, 2}));
    std::vector<double> result(static_cast<size_t>(out.NumElements()));
    std::vector<double> in(static_cast<size_t>(2 * frame)), spec;
    const int64_t comp = complex_in ? 2 : 1;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t n = 0; n < frame; ++n) {
          const double wn = window != nullptr ? ElementAsDouble(*window, n) : 1.0;
          const int64_t base = (b * length + f * step + n) * comp;
          in[static_cast<size_t>(2 * n)] = ElementAsDouble(x, base) * wn;
          in[static_cast<size_t>(2 * n + 1)] = complex_in ? ElementAsDouble(x, base + 1) * wn : 0.0;
        }
        Dft(in, frame, bins, /*inverse=*/false, spec);
        std::copy(spec.begin(), spec.end(),
                  result.begin() + static_cast<int64_t>((b * frames + f) * bins * 2));
      }
    }
    return WriteAs(ctx, kOp, x.dtype(), out, result);
  }

 private:
  bool onesided_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateHannWindow(const KernelInfo& info) {
  return CreateWindow(info, WindowKind::kHann);
}
Result<std::unique_ptr<Kernel>> CreateHammingWindow(const KernelInfo& info) {
  return CreateWindow(info, WindowKind::kHamming);
}
Result<std::unique_ptr<Kernel>> CreateBlackmanWindow(const KernelInfo& info) {
  return CreateWindow(info, WindowKind::kBlackman);
}

Result<std::unique_ptr<Kernel>> CreateMelWeightMatrix(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 5));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t t, attrs.Int("output_datatype", 1));
  const std::optional<DataType> out = NumericTypeFromOnnx(t);
  if (!out) return OpError("MelWeightMatrix", "attribute 'output_datatype' {} is not supported", t);
  return std::make_unique<MelWeightMatrixKernel>(*out);
}

Result<std::unique_ptr<Kernel>> CreateDFT(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 1));
  KILN_ASSIGN_OR_RETURN(bool inverse, attrs.Bool("inverse", false));
  KILN_ASSIGN_OR_RETURN(bool onesided, attrs.Bool("onesided", false));
  if (inverse && onesided) {
    return OpError("DFT", "onesided is not supported together with inverse");
  }
  return std::make_unique<DftKernel>(axis, inverse, onesided);
}

Result<std::unique_ptr<Kernel>> CreateSTFT(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(bool onesided, attrs.Bool("onesided", true));
  return std::make_unique<StftKernel>(onesided);
}

}  // namespace kiln::ref
