// SPDX-License-Identifier: Apache-2.0
// Reference quantization kernels: QuantizeLinear, DequantizeLinear (per tensor; per axis from
// opset 13), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.
// Quantized tensors are UINT8 or INT8 (DequantizeLinear also INT32); scales are FP32.
//
// NOTE on the approach: every integer product first widens its operands to int32 with the zero
// point already subtracted (per tensor, per row of A / per column of B, or per output channel of
// W), then runs a plain integer matmul or a direct convolution over spatial.h's window taps, so
// padding contributes exactly the zero point (i.e. nothing). Accumulation is in int64 and the
// result is narrowed to int32 modulo 2^32 (no UB on overflow). Requantization multiplies the
// int32 accumulator by the float multiplier x_scale * w_scale / y_scale in float (as the ONNX
// reference does), rounds half to even (std::nearbyint under the default rounding mode) and
// saturates; NaN quantizes to the zero point.

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"
#include "tensor/quantize_math.h"

namespace kiln::ref {
namespace {

// int64 -> int32 modulo 2^32.
inline int32_t WrapToInt32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

// Number of elements a quantization parameter must have: 1 (per tensor) or `per_axis` (a 1-D
// tensor along the quantized axis). Returns the count, or INVALID_ARGUMENT naming `what`.
Result<int64_t> ParamCount(std::string_view op, std::string_view what, const Tensor& t,
                           int64_t per_axis, bool allow_per_axis) {
  if (t.rank() == 0 || (t.rank() == 1 && t.dim(0) == 1)) return int64_t{1};
  if (allow_per_axis && t.rank() == 1 && t.dim(0) == per_axis) return per_axis;
  if (allow_per_axis) {
    return OpError(op, "{} {} must be a scalar or 1-D with {} elements", what, t.shape().ToString(),
                   per_axis);
  }
  return OpError(op, "{} {} must be a scalar", what, t.shape().ToString());
}

// Scale input `i`: FP32 with 1 or `per_axis` elements, all finite and nonzero when `nonzero`.
Result<std::vector<float>> ReadScale(const KernelContext& ctx, int i, std::string_view op,
                                     std::string_view what, int64_t per_axis, bool allow_per_axis) {
  KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  const Tensor& s = ctx.input(i);
  if (s.dtype() != DataType::kFloat32) {
    return OpError(op, "{} must be FP32, got {}", what, DataTypeName(s.dtype()));
  }
  KILN_ASSIGN_OR_RETURN(int64_t n, ParamCount(op, what, s, per_axis, allow_per_axis));
  const float* p = s.data<const float>();
  return std::vector<float>(p, p + n);
}

// Zero point input `i` as int32 values (1 or `count` of them), or zeros when absent. Its dtype
// must be `dtype` (kInvalid: any of UINT8/INT8, reported through `dtype_out`).
Result<std::vector<int32_t>> ReadZeroPoint(const KernelContext& ctx, int i, std::string_view op,
                                           std::string_view what, DataType dtype, int64_t count) {
  if (!ctx.has_input(i)) return std::vector<int32_t>(static_cast<size_t>(count), 0);
  KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  const Tensor& z = ctx.input(i);
  if (z.dtype() != dtype) {
    return OpError(op, "{} has dtype {}, expected {}", what, DataTypeName(z.dtype()),
                   DataTypeName(dtype));
  }
  if (z.num_elements() != count) {
    return OpError(op, "{} {} must have {} element(s), like its scale", what, z.shape().ToString(),
                   count);
  }
  std::vector<int32_t> v(static_cast<size_t>(count));
  Status st = DispatchType<uint8_t, int8_t, int32_t>(z.dtype(), op, [&](auto tag) -> Status {
    using Z = typename decltype(tag)::type;
    const Z* p = z.data<const Z>();
    for (int64_t k = 0; k < count; ++k) v[static_cast<size_t>(k)] = static_cast<int32_t>(p[k]);
    return Status::OK();
  });
  KILN_RETURN_IF_ERROR(st);
  return v;
}

// A UINT8 or INT8 input widened to int32 with a zero point subtracted: element e uses
// zp[(e / inner) % zp.size()].
Result<std::vector<int32_t>> Widen(const Tensor& t, std::string_view op,
                                   const std::vector<int32_t>& zp, int64_t inner) {
  std::vector<int32_t> v(static_cast<size_t>(t.num_elements()));
  const int64_t nz = static_cast<int64_t>(zp.size());
  Status st = DispatchType<uint8_t, int8_t>(t.dtype(), op, [&](auto tag) -> Status {
    using Q = typename decltype(tag)::type;
    const Q* p = t.data<const Q>();
    for (int64_t e = 0; e < t.num_elements(); ++e) {
      const int32_t z = nz == 1 ? zp[0] : zp[static_cast<size_t>((e / inner) % nz)];
      v[static_cast<size_t>(e)] = static_cast<int32_t>(p[e]) - z;
    }
    return Status::OK();
  });
  KILN_RETURN_IF_ERROR(st);
  return v;
}

Status CheckQuantType(std::string_view op, std::string_view what, DataType t) {
  if (t != DataType::kUint8 && t != DataType::kInt8) {
    return OpError(op, "{} must be UINT8 or INT8, got {}", what, DataTypeName(t));
  }
  return Status::OK();
}

// Writes saturate(round(v[e] * mult(e)) + zp) into output 0 of dtype `dtype` (UINT8 / INT8).
template <typename F>
Status Requantize(KernelContext& ctx, std::string_view op, DataType dtype, const Shape& shape,
                  int64_t n, int32_t zp, F&& value) {
  return DispatchType<uint8_t, int8_t>(dtype, op, [&](auto tag) -> Status {
    using Q = typename decltype(tag)::type;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, dtype, shape));
    Q* py = y.data<Q>();
    for (int64_t e = 0; e < n; ++e) {
      py[e] = QuantizeValue<Q>(value(e), 1.0f, zp);
    }
    return Status::OK();
  });
}

// --- QuantizeLinear / DequantizeLinear --------------------------------------------------------

// Outer/axis/inner split of `x` at `axis` for per-axis parameters.
struct AxisSplit {
  int64_t axis_dim = 1;
  int64_t inner = 1;
};

// A scale with one element is per tensor, and `axis` is then ignored.
Result<AxisSplit> SplitAt(std::string_view op, const Tensor& x, const Tensor& scale, int64_t axis,
                          bool per_axis_ok) {
  AxisSplit s;
  if (!per_axis_ok || scale.num_elements() == 1) return s;
  KILN_ASSIGN_OR_RETURN(int a, NormalizeAxis(op, axis, x.rank(), /*allow_negative=*/true));
  s.axis_dim = x.dim(a);
  s.inner = DimProduct(x.shape().dims(), static_cast<size_t>(a) + 1, static_cast<size_t>(x.rank()));
  return s;
}

class QuantizeLinearKernel final : public Kernel {
 public:
  QuantizeLinearKernel(int64_t axis, bool per_axis_ok) : axis_(axis), per_axis_ok_(per_axis_ok) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "QuantizeLinear";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(AxisSplit split, SplitAt(kOp, x, ctx.input(1), axis_, per_axis_ok_));
    KILN_ASSIGN_OR_RETURN(std::vector<float> scale,
                          ReadScale(ctx, 1, kOp, "y_scale", split.axis_dim, per_axis_ok_));
    const DataType out_type = ctx.has_input(2) ? ctx.input(2).dtype() : DataType::kUint8;
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "y_zero_point", out_type));
    const int64_t nparam = static_cast<int64_t>(scale.size());
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp,
                          ReadZeroPoint(ctx, 2, kOp, "y_zero_point", out_type, nparam));
    return DispatchType<float, int32_t>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x.data<const T>();
      return DispatchType<uint8_t, int8_t>(out_type, kOp, [&](auto qtag) -> Status {
        using Q = typename decltype(qtag)::type;
        KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, out_type, x.shape()));
        Q* py = y.data<Q>();
        for (int64_t e = 0; e < x.num_elements(); ++e) {
          const size_t c = nparam == 1 ? 0 : static_cast<size_t>((e / split.inner) % nparam);
          py[e] = QuantizeValue<Q>(static_cast<float>(px[e]), scale[c], zp[c]);
        }
        return Status::OK();
      });
    });
  }

 private:
  int64_t axis_;
  bool per_axis_ok_;
};

class DequantizeLinearKernel final : public Kernel {
 public:
  DequantizeLinearKernel(int64_t axis, bool per_axis_ok) : axis_(axis), per_axis_ok_(per_axis_ok) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "DequantizeLinear";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(AxisSplit split, SplitAt(kOp, x, ctx.input(1), axis_, per_axis_ok_));
    KILN_ASSIGN_OR_RETURN(std::vector<float> scale,
                          ReadScale(ctx, 1, kOp, "x_scale", split.axis_dim, per_axis_ok_));
    const int64_t nparam = static_cast<int64_t>(scale.size());
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp,
                          ReadZeroPoint(ctx, 2, kOp, "x_zero_point", x.dtype(), nparam));
    if (x.dtype() == DataType::kInt32 &&
        std::any_of(zp.begin(), zp.end(), [](int32_t z) { return z != 0; })) {
      return OpError(kOp, "x_zero_point must be 0 for an INT32 input");
    }
    return DispatchType<uint8_t, int8_t, int32_t>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x.data<const T>();
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
      float* py = y.data<float>();
      for (int64_t e = 0; e < x.num_elements(); ++e) {
        const size_t c = nparam == 1 ? 0 : static_cast<size_t>((e / split.inner) % nparam);
        // int64: an INT32 x minus its (zero) zero point cannot overflow.
        const int64_t d = static_cast<int64_t>(px[e]) - zp[c];
        py[e] = static_cast<float>(d) * scale[c];
      }
      return Status::OK();
    });
  }

 private:
  int64_t axis_;
  bool per_axis_ok_;
};

// --- DynamicQuantizeLinear --------------------------------------------------------------------

class DynamicQuantizeLinearKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "DynamicQuantizeLinear";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kOp));
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kFloat32) {
      return OpError(kOp, "unsupported dtype {}", DataTypeName(x.dtype()));
    }
    const float* px = x.data<const float>();
    const int64_t n = x.num_elements();
    // The range always includes 0 so that 0 is exactly representable; NaNs are skipped.
    float lo = 0, hi = 0;
    for (int64_t e = 0; e < n; ++e) {
      if (std::isnan(px[e])) continue;
      lo = std::min(lo, px[e]);
      hi = std::max(hi, px[e]);
    }
    const float scale = (hi - lo) / 255.0f;
    uint8_t zp = 0;
    if (scale != 0 && std::isfinite(scale)) zp = SaturateRound<uint8_t>(-lo / scale);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kUint8, x.shape()));
    uint8_t* py = y.data<uint8_t>();
    for (int64_t e = 0; e < n; ++e) {
      if (scale == 0 || !std::isfinite(scale) || std::isnan(px[e])) {
        py[e] = zp;
        continue;
      }
      py[e] = SaturateRound<uint8_t>(std::nearbyint(px[e] / scale) + static_cast<float>(zp));
    }
    if (ctx.num_outputs() > 1) {
      KILN_ASSIGN_OR_RETURN(Tensor s, ctx.AllocateOutput(1, DataType::kFloat32, Shape{}));
      *s.data<float>() = scale;
    }
    if (ctx.num_outputs() > 2) {
      KILN_ASSIGN_OR_RETURN(Tensor z, ctx.AllocateOutput(2, DataType::kUint8, Shape{}));
      *z.data<uint8_t>() = zp;
    }
    return Status::OK();
  }
};

// --- Integer matmul (MatMulInteger, QLinearMatMul) ----------------------------------------------

// Shapes of a numpy matmul of A and B (rank >= 1 each).
struct MatMulDims {
  bool a_vec = false, b_vec = false;
  int64_t m = 1, k = 1, n = 1;
  Shape batch, a_batch, b_batch, out;
};

Result<MatMulDims> ResolveMatMul(std::string_view op, const Shape& a, const Shape& b) {
  if (a.rank() < 1 || b.rank() < 1) {
    return OpError(op, "inputs must have rank >= 1, got {} and {}", a.ToString(), b.ToString());
  }
  MatMulDims d;
  d.a_vec = a.rank() == 1;
  d.b_vec = b.rank() == 1;
  d.m = d.a_vec ? 1 : a.dim(a.rank() - 2);
  d.k = a.dim(a.rank() - 1);
  const int64_t kb = d.b_vec ? b.dim(0) : b.dim(b.rank() - 2);
  d.n = d.b_vec ? 1 : b.dim(b.rank() - 1);
  if (d.k != kb) {
    return OpError(op, "inner dimensions differ: A {} has K={}, B {} has K={}", a.ToString(), d.k,
                   b.ToString(), kb);
  }
  d.a_batch = Shape(a.dims().first(static_cast<size_t>(d.a_vec ? 0 : a.rank() - 2)));
  d.b_batch = Shape(b.dims().first(static_cast<size_t>(d.b_vec ? 0 : b.rank() - 2)));
  KILN_ASSIGN_OR_RETURN(d.batch, BroadcastShapes(op, d.a_batch, d.b_batch));
  std::vector<int64_t> out_dims(d.batch.dims().begin(), d.batch.dims().end());
  if (!d.a_vec) out_dims.push_back(d.m);
  if (!d.b_vec) out_dims.push_back(d.n);
  KILN_ASSIGN_OR_RETURN(d.out, Shape::Create(out_dims));
  return d;
}

// acc = A' x B' for widened operands, batched with broadcasting; int32 modulo 2^32.
std::vector<int32_t> IntMatMul(const MatMulDims& d, const std::vector<int32_t>& a,
                               const std::vector<int32_t>& b) {
  std::vector<int32_t> y(static_cast<size_t>(d.out.NumElements()));
  const DimArray sa = BroadcastStrides(d.a_batch, d.batch);
  const DimArray sb = BroadcastStrides(d.b_batch, d.batch);
  const int64_t m = d.m, k = d.k, n = d.n;
  ForEachBroadcast(d.batch, sa, sb, [&](int64_t o, int64_t ia, int64_t ib) {
    const int32_t* pa = a.data() + ia * m * k;
    const int32_t* pb = b.data() + ib * k * n;
    int32_t* py = y.data() + o * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += int64_t{pa[i * k + p]} * pb[p * n + j];
        py[i * n + j] = WrapToInt32(acc);
      }
    }
  });
  return y;
}

// Zero points (and the number of them) for A per row (M) and B per column (N).
Result<int64_t> RowParamCount(std::string_view op, std::string_view what, const Tensor& t,
                              int64_t rows) {
  if (t.num_elements() == 1 && t.rank() <= 1) return int64_t{1};
  if (t.rank() == 1 && t.dim(0) == rows) return rows;
  return OpError(op, "{} {} must be a scalar or 1-D with {} elements", what, t.shape().ToString(),
                 rows);
}

class MatMulIntegerKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "MatMulInteger";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "A", a.dtype()));
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "B", b.dtype()));
    KILN_ASSIGN_OR_RETURN(MatMulDims d, ResolveMatMul(kOp, a.shape(), b.shape()));
    int64_t na = 1, nb = 1;
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(na, RowParamCount(kOp, "a_zero_point", ctx.input(2), d.m));
    }
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(nb, RowParamCount(kOp, "b_zero_point", ctx.input(3), d.n));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> za,
                          ReadZeroPoint(ctx, 2, kOp, "a_zero_point", a.dtype(), na));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zb,
                          ReadZeroPoint(ctx, 3, kOp, "b_zero_point", b.dtype(), nb));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wa, Widen(a, kOp, za, d.k));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wb, Widen(b, kOp, zb, 1));
    const std::vector<int32_t> acc = IntMatMul(d, wa, wb);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt32, d.out));
    std::copy(acc.begin(), acc.end(), y.data<int32_t>());
    return Status::OK();
  }
};

class QLinearMatMulKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "QLinearMatMul";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 8, kOp));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const DataType out_type = ctx.input(7).dtype();
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "a", a.dtype()));
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "b", b.dtype()));
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "y_zero_point", out_type));
    KILN_ASSIGN_OR_RETURN(MatMulDims d, ResolveMatMul(kOp, a.shape(), b.shape()));
    KILN_ASSIGN_OR_RETURN(int64_t na, RowParamCount(kOp, "a_scale", ctx.input(1), d.m));
    KILN_ASSIGN_OR_RETURN(int64_t nb, RowParamCount(kOp, "b_scale", ctx.input(4), d.n));
    KILN_ASSIGN_OR_RETURN(std::vector<float> sa, ReadScale(ctx, 1, kOp, "a_scale", na, true));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> za,
                          ReadZeroPoint(ctx, 2, kOp, "a_zero_point", a.dtype(), na));
    KILN_ASSIGN_OR_RETURN(std::vector<float> sb, ReadScale(ctx, 4, kOp, "b_scale", nb, true));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zb,
                          ReadZeroPoint(ctx, 5, kOp, "b_zero_point", b.dtype(), nb));
    KILN_ASSIGN_OR_RETURN(std::vector<float> sy, ReadScale(ctx, 6, kOp, "y_scale", 1, false));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zy,
                          ReadZeroPoint(ctx, 7, kOp, "y_zero_point", out_type, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wa, Widen(a, kOp, za, d.k));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wb, Widen(b, kOp, zb, 1));
    const std::vector<int32_t> acc = IntMatMul(d, wa, wb);
    const int64_t m = d.m, n = d.n;
    return Requantize(ctx, kOp, out_type, d.out, d.out.NumElements(), zy[0], [&](int64_t e) {
      const int64_t i = (e / n) % m, j = e % n;
      const float mult = sa[static_cast<size_t>(na == 1 ? 0 : i)] *
                         sb[static_cast<size_t>(nb == 1 ? 0 : j)] / sy[0];
      return static_cast<float>(acc[static_cast<size_t>(e)]) * mult;
    });
  }
};

// --- Integer convolution (ConvInteger, QLinearConv) ---------------------------------------------

struct ConvResult {
  Shape out;
  int64_t out_channels = 0;
  int64_t out_size = 0;  // spatial positions per output channel
  std::vector<int32_t> acc;
};

// Direct convolution of widened x [N, C, ...] with widened w [M, C / group, k...].
Result<ConvResult> IntConv(std::string_view op, const WindowAttrs& window, int64_t group,
                           const Tensor& x, const std::vector<int32_t>& wx, const Tensor& w,
                           const std::vector<int32_t>& ww) {
  if (x.rank() < 3) {
    return OpError(op, "x must have rank >= 3 ([N, C, spatial...]), got {}", x.shape().ToString());
  }
  if (w.rank() != x.rank()) {
    return OpError(op, "w {} must have the same rank as x {}", w.shape().ToString(),
                   x.shape().ToString());
  }
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t out_channels = w.dim(0), group_channels = w.dim(1);
  if (channels % group != 0 || channels / group != group_channels) {
    return OpError(op, "x {} has {} channels but w {} with group={} expects {} x {} channels",
                   x.shape().ToString(), channels, w.shape().ToString(), group, group,
                   group_channels);
  }
  if (out_channels % group != 0) {
    return OpError(op, "w {} has {} output channels, not divisible by group={}",
                   w.shape().ToString(), out_channels, group);
  }
  const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
  if (!window.kernel_shape.empty() &&
      !std::equal(kernel.begin(), kernel.end(), window.kernel_shape.begin(),
                  window.kernel_shape.end())) {
    return OpError(op, "attribute 'kernel_shape' [{}] differs from w's spatial dims {}",
                   fmt::join(window.kernel_shape, ","), w.shape().ToString());
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                        ResolveWindow(op, window, x.shape().dims().subspan(2), kernel));
  std::vector<int64_t> out_dims = {batch, out_channels};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
  ConvResult r;
  KILN_ASSIGN_OR_RETURN(r.out, Shape::Create(out_dims));
  r.out_channels = out_channels;
  r.out_size = g.out_size;
  r.acc.assign(static_cast<size_t>(r.out.NumElements()), 0);
  const int64_t m_per_group = out_channels / group;
  Taps taps;
  ForEachWindow(g, [&](int64_t pos, const DimArray& coord) {
    CollectTaps(g, coord, taps);
    for (int64_t nb = 0; nb < batch; ++nb) {
      for (int64_t m = 0; m < out_channels; ++m) {
        const int64_t grp = m / m_per_group;
        int64_t acc = 0;
        for (int64_t c = 0; c < group_channels; ++c) {
          const int32_t* xc = wx.data() + (nb * channels + grp * group_channels + c) * g.in_size;
          const int32_t* wc = ww.data() + (m * group_channels + c) * g.kernel_size;
          for (const auto& [k, offset] : taps) acc += int64_t{xc[offset]} * wc[k];
        }
        r.acc[static_cast<size_t>((nb * out_channels + m) * g.out_size + pos)] = WrapToInt32(acc);
      }
    }
  });
  return r;
}

// Per-output-channel parameter count of `t` for W with `out_channels` channels.
Result<int64_t> ChannelParamCount(std::string_view op, std::string_view what, const Tensor& t,
                                  int64_t out_channels) {
  return RowParamCount(op, what, t, out_channels);
}

int64_t WeightInner(const Tensor& w) {
  return w.rank() >= 1 ? DimProduct(w.shape().dims(), 1, static_cast<size_t>(w.rank())) : 1;
}

class ConvIntegerKernel final : public Kernel {
 public:
  ConvIntegerKernel(WindowAttrs window, int64_t group)
      : window_(std::move(window)), group_(group) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "ConvInteger";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "x", x.dtype()));
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "w", w.dtype()));
    if (w.rank() < 1) return OpError(kOp, "w must have rank >= 3, got a scalar");
    int64_t nw = 1;
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(int64_t nx, ParamCount(kOp, "x_zero_point", ctx.input(2), 1, false));
      (void)nx;
    }
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(nw, ChannelParamCount(kOp, "w_zero_point", ctx.input(3), w.dim(0)));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zx,
                          ReadZeroPoint(ctx, 2, kOp, "x_zero_point", x.dtype(), 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zw,
                          ReadZeroPoint(ctx, 3, kOp, "w_zero_point", w.dtype(), nw));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wx, Widen(x, kOp, zx, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> ww, Widen(w, kOp, zw, WeightInner(w)));
    KILN_ASSIGN_OR_RETURN(ConvResult r, IntConv(kOp, window_, group_, x, wx, w, ww));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt32, r.out));
    std::copy(r.acc.begin(), r.acc.end(), y.data<int32_t>());
    return Status::OK();
  }

 private:
  WindowAttrs window_;
  int64_t group_;
};

class QLinearConvKernel final : public Kernel {
 public:
  QLinearConvKernel(WindowAttrs window, int64_t group)
      : window_(std::move(window)), group_(group) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "QLinearConv";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 8, kOp));
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(3);
    const DataType out_type = ctx.input(7).dtype();
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "x", x.dtype()));
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "w", w.dtype()));
    KILN_RETURN_IF_ERROR(CheckQuantType(kOp, "y_zero_point", out_type));
    if (w.rank() < 1) return OpError(kOp, "w must have rank >= 3, got a scalar");
    const int64_t out_channels = w.dim(0);
    KILN_ASSIGN_OR_RETURN(std::vector<float> sx, ReadScale(ctx, 1, kOp, "x_scale", 1, false));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zx,
                          ReadZeroPoint(ctx, 2, kOp, "x_zero_point", x.dtype(), 1));
    KILN_ASSIGN_OR_RETURN(int64_t nw,
                          ChannelParamCount(kOp, "w_scale", ctx.input(4), out_channels));
    KILN_ASSIGN_OR_RETURN(std::vector<float> sw,
                          ReadScale(ctx, 4, kOp, "w_scale", out_channels, true));
    KILN_ASSIGN_OR_RETURN(int64_t nzw,
                          ChannelParamCount(kOp, "w_zero_point", ctx.input(5), out_channels));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zw,
                          ReadZeroPoint(ctx, 5, kOp, "w_zero_point", w.dtype(), nzw));
    KILN_ASSIGN_OR_RETURN(std::vector<float> sy, ReadScale(ctx, 6, kOp, "y_scale", 1, false));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zy,
                          ReadZeroPoint(ctx, 7, kOp, "y_zero_point", out_type, 1));
    const int32_t* bias = nullptr;
    if (ctx.has_input(8)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 8, kOp));
      const Tensor& b = ctx.input(8);
      if (b.dtype() != DataType::kInt32 || b.rank() != 1 || b.dim(0) != out_channels) {
        return OpError(kOp, "B must be INT32 [{}], got {}{}", out_channels, DataTypeName(b.dtype()),
                       b.shape().ToString());
      }
      bias = b.data<const int32_t>();
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wx, Widen(x, kOp, zx, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> ww, Widen(w, kOp, zw, WeightInner(w)));
    KILN_ASSIGN_OR_RETURN(ConvResult r, IntConv(kOp, window_, group_, x, wx, w, ww));
    return Requantize(ctx, kOp, out_type, r.out, r.out.NumElements(), zy[0], [&](int64_t e) {
      const int64_t m = (e / r.out_size) % r.out_channels;
      int64_t acc = r.acc[static_cast<size_t>(e)];
      if (bias != nullptr) acc += bias[m];
      const float mult = sx[0] * sw[static_cast<size_t>(nw == 1 ? 0 : m)] / sy[0];
      return static_cast<float>(WrapToInt32(acc)) * mult;
    });
  }

 private:
  WindowAttrs window_;
  int64_t group_;
};

Result<std::unique_ptr<Kernel>> CreateQuantConv(const KernelInfo& info, bool qlinear) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, qlinear ? 8 : 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t group, attrs.Int("group", 1));
  if (group < 1) return OpError(attrs.op(), "attribute 'group' is {}, expected >= 1", group);
  KILN_ASSIGN_OR_RETURN(WindowAttrs window,
                        ReadWindowAttrs(attrs, /*kernel_shape_required=*/false));
  if (qlinear) return std::make_unique<QLinearConvKernel>(std::move(window), group);
  return std::make_unique<ConvIntegerKernel>(std::move(window), group);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateQuantizeLinear(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("axis", 13));
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 1));
  return std::make_unique<QuantizeLinearKernel>(axis, info.opset() >= 13);
}

Result<std::unique_ptr<Kernel>> CreateDequantizeLinear(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("axis", 13));
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 1));
  return std::make_unique<DequantizeLinearKernel>(axis, info.opset() >= 13);
}

Result<std::unique_ptr<Kernel>> CreateDynamicQuantizeLinear(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<DynamicQuantizeLinearKernel>();
}

Result<std::unique_ptr<Kernel>> CreateMatMulInteger(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return std::make_unique<MatMulIntegerKernel>();
}

Result<std::unique_ptr<Kernel>> CreateQLinearMatMul(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 8));
  return std::make_unique<QLinearMatMulKernel>();
}

Result<std::unique_ptr<Kernel>> CreateConvInteger(const KernelInfo& info) {
  return CreateQuantConv(info, /*qlinear=*/false);
}

Result<std::unique_ptr<Kernel>> CreateQLinearConv(const KernelInfo& info) {
  return CreateQuantConv(info, /*qlinear=*/true);
}

}  // namespace kiln::ref
