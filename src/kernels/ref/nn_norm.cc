// SPDX-License-Identifier: Apache-2.0
// Reference normalizations of the nn op family: LogSoftmax, Hardmax, LayerNormalization (with
// the optional Mean / InvStdDev outputs), InstanceNormalization, MeanVarianceNormalization and
// LRN. (Softmax and BatchNormalization live in normalization.cc.)
//
// NOTE on the approach. LogSoftmax and Hardmax follow Softmax's layout: the input is viewed as
// [outer, len, inner] and each of the outer * inner rows of `len` elements (stride `inner`) is
// processed; before opset 13 the input is coerced to 2-D at `axis` (len = product of
// dims[axis:], inner = 1), from 13 the row runs along dims[axis] only. LogSoftmax subtracts the
// row max before exp and sums in double: y = x - max - log(sum exp(x - max)). Hardmax writes 1
// at the first maximum of each row and 0 elsewhere.
// The mean / variance normalizations compute per-group statistics in double with the reduction
// walk of nn_common.h (groups = the elements sharing the non-normalized coordinates), using the
// two-pass variance mean((x - mean)^2):
//   LayerNormalization: groups over dims[axis:]; Y = (X - mean) / sqrt(var + epsilon) * Scale + B
//     with Scale and B broadcast to dims[axis:]; Mean and InvStdDev have X's shape with 1 from
//     `axis` on, in FP32 (stash_type 1, the only stash type ONNX defines).
//   InstanceNormalization: groups over the spatial dims of each (n, c); per-channel scale / B.
//   MeanVarianceNormalization: groups over `axes` (default [0, 2, 3]); Y = (X - mean) /
//     (sqrt(var) + 1e-9), as the ONNX function body defines it.
// LRN sums squares over a window of channels [c - floor((size-1)/2), c + ceil((size-1)/2)]:
// y = x / (bias + alpha / size * sum)^beta.

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nn_common.h"

namespace kiln::ref {
namespace {

// ---- LogSoftmax / Hardmax ----------------------------------------------------------------------

enum class RowOp { kLogSoftmax, kHardmax };

class RowKernel final : public Kernel {
 public:
  RowKernel(std::string op, RowOp kind, int64_t axis, bool coerce_2d, bool allow_negative_axis)
      : op_(std::move(op)),
        kind_(kind),
        axis_(axis),
        coerce_2d_(coerce_2d),
        allow_negative_axis_(allow_negative_axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError(op_, "input must have rank >= 1, got a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(op_, axis_, x.rank(), allow_negative_axis_));
    const std::span<const int64_t> dims = x.shape().dims();
    const size_t ax = static_cast<size_t>(axis);
    const int64_t outer = DimProduct(dims, 0, ax);
    const int64_t len = coerce_2d_ ? DimProduct(dims, ax, dims.size()) : dims[ax];
    const int64_t inner = coerce_2d_ ? 1 : DimProduct(dims, ax + 1, dims.size());
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), op_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * len * inner + i;
          double max = -std::numeric_limits<double>::infinity();
          int64_t arg = 0;
          for (int64_t k = 0; k < len; ++k) {
            const double v = ToDouble(px[base + k * inner]);
            if (v > max) {
              max = v;
              arg = k;
            }
          }
          if (kind_ == RowOp::kHardmax) {
            for (int64_t k = 0; k < len; ++k) {
              py[base + k * inner] = FromDouble<T>(k == arg ? 1.0 : 0.0);
            }
            continue;
          }
          double sum = 0;
          for (int64_t k = 0; k < len; ++k) sum += std::exp(ToDouble(px[base + k * inner]) - max);
          const double log_sum = std::log(sum);
          for (int64_t k = 0; k < len; ++k) {
            py[base + k * inner] = FromDouble<T>(ToDouble(px[base + k * inner]) - max - log_sum);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  std::string op_;
  RowOp kind_;
  int64_t axis_;
  bool coerce_2d_;
  bool allow_negative_axis_;
};

Result<std::unique_ptr<Kernel>> CreateRowOp(const KernelInfo& info, RowOp kind) {
  const std::string& op = info.node().op_type;
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "the op has one output"));
  const int64_t opset = info.opset();
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", opset >= 13 ? -1 : 1));
  // Negative axes are accepted at every opset (a leniency: the schemas before 11 say [0, r-1],
  // but PyTorch exports LogSoftmax with axis -1 at opset 6 and onnxruntime runs it).
  return std::make_unique<RowKernel>(op, kind, axis, /*coerce_2d=*/opset < 13,
                                     /*allow_negative_axis=*/true);
}

// ---- Group statistics ---------------------------------------------------------------------------

// Per-group mean and variance (two-pass, population variance) of `x` grouped by ForEachReduced
// with `out_strides`; `groups` outputs of `group_size` elements each.
template <typename T>
void GroupMeanVar(const T* x, std::span<const int64_t> dims, int64_t count,
                  const DimArray& out_strides, int64_t groups, int64_t group_size,
                  std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(static_cast<size_t>(groups), 0.0);
  var.assign(static_cast<size_t>(groups), 0.0);
  ForEachReduced(dims, out_strides, count,
                 [&](int64_t i, int64_t o) { mean[static_cast<size_t>(o)] += ToDouble(x[i]); });
  for (double& m : mean) m /= static_cast<double>(group_size);
  ForEachReduced(dims, out_strides, count, [&](int64_t i, int64_t o) {
    const double d = ToDouble(x[i]) - mean[static_cast<size_t>(o)];
    var[static_cast<size_t>(o)] += d * d;
  });
  for (double& v : var) v /= static_cast<double>(group_size);
}

// ---- LayerNormalization -------------------------------------------------------------------------

class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(int64_t axis, double epsilon) : axis_(axis), epsilon_(epsilon) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "LayerNormalization";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const bool has_bias = ctx.has_input(2);
    if (has_bias) KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError(kOp, "X must have rank >= 1, got a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(kOp, axis_, x.rank(), /*allow_negative=*/true));
    const std::span<const int64_t> dims = x.shape().dims();
    const Shape norm_shape(dims.subspan(static_cast<size_t>(axis)));
    for (int i = 1; i < (has_bias ? 3 : 2); ++i) {
      const Tensor& p = ctx.input(i);
      if (p.dtype() != x.dtype()) {
        return OpError(kOp, "input {} has dtype {}, X has {}", i, DataTypeName(p.dtype()),
                       DataTypeName(x.dtype()));
      }
      if (!BroadcastsTo(p.shape(), norm_shape)) {
        return OpError(kOp, "input {} {} does not broadcast to the normalized shape {}", i,
                       p.shape().ToString(), norm_shape.ToString());
      }
    }
    std::vector<bool> reduced(dims.size(), false);
    for (size_t d = static_cast<size_t>(axis); d < dims.size(); ++d) reduced[d] = true;
    int64_t groups = 0, group_size = 0;
    const DimArray out_strides = ReducedStrides(dims, reduced, &groups, &group_size);
    std::vector<int64_t> stat_dims(dims.begin(), dims.end());
    for (size_t d = static_cast<size_t>(axis); d < dims.size(); ++d) stat_dims[d] = 1;
    const Shape stat_shape(stat_dims);
    const DimArray scale_strides = BroadcastStrides(ctx.input(1).shape(), norm_shape);
    const DimArray bias_strides =
        has_bias ? BroadcastStrides(ctx.input(2).shape(), norm_shape) : DimArray{};
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      const T* ps = ctx.input(1).data<const T>();
      const T* pb = has_bias ? ctx.input(2).data<const T>() : nullptr;
      T* py = y.data<T>();
      std::vector<double> mean, var;
      GroupMeanVar(px, dims, x.num_elements(), out_strides, groups, group_size, mean, var);
      std::vector<double> inv_std(var.size());
      for (size_t g = 0; g < var.size(); ++g) inv_std[g] = 1.0 / std::sqrt(var[g] + epsilon_);
      // Elements of one group are contiguous: group g covers [g * group_size, +group_size).
      std::vector<int64_t> s_off(static_cast<size_t>(group_size)),
          b_off(static_cast<size_t>(group_size));
      ForEachBroadcast(norm_shape, scale_strides, bias_strides,
                       [&](int64_t o, int64_t is, int64_t ib) {
                         s_off[static_cast<size_t>(o)] = is;
                         b_off[static_cast<size_t>(o)] = ib;
                       });
      for (int64_t g = 0; g < groups; ++g) {
        const size_t gu = static_cast<size_t>(g);
        for (int64_t j = 0; j < group_size; ++j) {
          const size_t ju = static_cast<size_t>(j);
          const int64_t i = g * group_size + j;
          double v = (ToDouble(px[i]) - mean[gu]) * inv_std[gu] * ToDouble(ps[s_off[ju]]);
          if (pb != nullptr) v += ToDouble(pb[b_off[ju]]);
          py[i] = FromDouble<T>(v);
        }
      }
      if (ctx.num_outputs() > 1) {
        KILN_ASSIGN_OR_RETURN(Tensor m, ctx.AllocateOutput(1, DataType::kFloat32, stat_shape));
        for (size_t g = 0; g < mean.size(); ++g) m.data<float>()[g] = static_cast<float>(mean[g]);
      }
      if (ctx.num_outputs() > 2) {
        KILN_ASSIGN_OR_RETURN(Tensor s, ctx.AllocateOutput(2, DataType::kFloat32, stat_shape));
        for (size_t g = 0; g < inv_std.size(); ++g) {
          s.data<float>()[g] = static_cast<float>(inv_std[g]);
        }
      }
      return Status::OK();
    });
  }

 private:
  int64_t axis_;
  double epsilon_;
};

// ---- InstanceNormalization ----------------------------------------------------------------------

class InstanceNormKernel final : public Kernel {
 public:
  explicit InstanceNormKernel(double epsilon) : epsilon_(epsilon) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "InstanceNormalization";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, kOp));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    if (x.rank() < 2) {
      return OpError(kOp, "input must have rank >= 2 ([N, C, ...]), got {}", x.shape().ToString());
    }
    const int64_t channels = x.dim(1);
    for (int i = 1; i < 3; ++i) {
      const Tensor& p = ctx.input(i);
      if (p.dtype() != x.dtype()) {
        return OpError(kOp, "input {} has dtype {}, input has {}", i, DataTypeName(p.dtype()),
                       DataTypeName(x.dtype()));
      }
      if (p.rank() != 1 || p.dim(0) != channels) {
        return OpError(kOp, "input {} {} must be 1-D with {} elements (the channels)", i,
                       p.shape().ToString(), channels);
      }
    }
    const int64_t spatial = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      const T* ps = ctx.input(1).data<const T>();
      const T* pb = ctx.input(2).data<const T>();
      T* py = y.data<T>();
      for (int64_t plane = 0; plane < x.dim(0) * channels; ++plane) {
        const int64_t c = plane % channels;
        const T* xp = px + plane * spatial;
        double mean = 0, var = 0;
        for (int64_t s = 0; s < spatial; ++s) mean += ToDouble(xp[s]);
        mean /= static_cast<double>(spatial);
        for (int64_t s = 0; s < spatial; ++s) {
          const double d = ToDouble(xp[s]) - mean;
          var += d * d;
        }
        var /= static_cast<double>(spatial);
        const double mul = ToDouble(ps[c]) / std::sqrt(var + epsilon_);
        for (int64_t s = 0; s < spatial; ++s) {
          py[plane * spatial + s] = FromDouble<T>((ToDouble(xp[s]) - mean) * mul + ToDouble(pb[c]));
        }
      }
      return Status::OK();
    });
  }

 private:
  double epsilon_;
};

// ---- MeanVarianceNormalization ------------------------------------------------------------------

class MvnKernel final : public Kernel {
 public:
  explicit MvnKernel(std::vector<int64_t> axes) : axes_(std::move(axes)) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "MeanVarianceNormalization";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kOp));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                          AxesMask(kOp, axes_, x.rank(), /*allow_negative=*/true));
    const std::span<const int64_t> dims = x.shape().dims();
    int64_t groups = 0, group_size = 0;
    const DimArray out_strides = ReducedStrides(dims, reduced, &groups, &group_size);
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      std::vector<double> mean, var;
      GroupMeanVar(px, dims, x.num_elements(), out_strides, groups, group_size, mean, var);
      ForEachReduced(dims, out_strides, x.num_elements(), [&](int64_t i, int64_t o) {
        const size_t ou = static_cast<size_t>(o);
        py[i] = FromDouble<T>((ToDouble(px[i]) - mean[ou]) / (std::sqrt(var[ou]) + 1e-9));
      });
      return Status::OK();
    });
  }

 private:
  std::vector<int64_t> axes_;
};

// ---- LRN
// ------------------------------------------------------------------------------------------

class LrnKernel final : public Kernel {
 public:
  LrnKernel(double alpha, double beta, double bias, int64_t size)
      : alpha_(alpha), beta_(beta), bias_(bias), size_(size) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "LRN"));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    if (x.rank() < 2) {
      return OpError("LRN", "input must have rank >= 2 ([N, C, ...]), got {}",
                     x.shape().ToString());
    }
    const int64_t channels = x.dim(1);
    const int64_t spatial = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), "LRN", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t n = 0; n < x.dim(0); ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t lo = std::max<int64_t>(0, c - before);
          const int64_t hi = std::min<int64_t>(channels - 1, c + after);
          for (int64_t s = 0; s < spatial; ++s) {
            double sum = 0;
            for (int64_t k = lo; k <= hi; ++k) {
              const double v = ToDouble(px[(n * channels + k) * spatial + s]);
              sum += v * v;
            }
            const int64_t i = (n * channels + c) * spatial + s;
            const double denom = std::pow(bias_ + alpha_ / static_cast<double>(size_) * sum, beta_);
            py[i] = FromDouble<T>(ToDouble(px[i]) / denom);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  double alpha_, beta_, bias_;
  int64_t size_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateLogSoftmax(const KernelInfo& info) {
  return CreateRowOp(info, RowOp::kLogSoftmax);
}
Result<std::unique_ptr<Kernel>> CreateHardmax(const KernelInfo& info) {
  return CreateRowOp(info, RowOp::kHardmax);
}

Result<std::unique_ptr<Kernel>> CreateLayerNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 3, "LayerNormalization has Y, Mean and InvStdDev"));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", -1));
  KILN_ASSIGN_OR_RETURN(float epsilon, attrs.Float("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int64_t stash_type, attrs.Int("stash_type", 1));
  if (stash_type != 1) {
    return OpError("LayerNormalization", "stash_type {} is not supported (only 1, FP32)",
                   stash_type);
  }
  if (!(epsilon >= 0)) {
    return OpError("LayerNormalization", "epsilon must be >= 0, got {}", epsilon);
  }
  return std::make_unique<LayerNormKernel>(axis, static_cast<double>(epsilon));
}

Result<std::unique_ptr<Kernel>> CreateInstanceNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "InstanceNormalization has one output"));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  KILN_ASSIGN_OR_RETURN(float epsilon, attrs.Float("epsilon", 1e-5f));
  if (!(epsilon >= 0)) {
    return OpError("InstanceNormalization", "epsilon must be >= 0, got {}", epsilon);
  }
  return std::make_unique<InstanceNormKernel>(static_cast<double>(epsilon));
}

Result<std::unique_ptr<Kernel>> CreateMeanVarianceNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "MeanVarianceNormalization has one output"));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, attrs.Ints("axes"));
  if (!attrs.Has("axes")) axes = {0, 2, 3};
  return std::make_unique<MvnKernel>(std::move(axes));
}

Result<std::unique_ptr<Kernel>> CreateLRN(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "LRN has one output"));
  AttrReader attrs(info);
  if (!attrs.Has("size")) return OpError("LRN", "attribute 'size' is required");
  KILN_ASSIGN_OR_RETURN(int64_t size, attrs.Int("size", 1));
  KILN_ASSIGN_OR_RETURN(float alpha, attrs.Float("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, attrs.Float("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, attrs.Float("bias", 1.0f));
  if (size < 1) return OpError("LRN", "attribute 'size' is {}, expected >= 1", size);
  return std::make_unique<LrnKernel>(static_cast<double>(alpha), static_cast<double>(beta),
                                     static_cast<double>(bias), size);
}

}  // namespace kiln::ref
