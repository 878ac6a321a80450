// SPDX-License-Identifier: Apache-2.0
// Reference normalizations: Softmax and BatchNormalization (inference mode).
//
// NOTE on the approach. Softmax views the input as [outer, len, inner] and normalizes each of the
// outer * inner rows of `len` elements (stride `inner`): before opset 13 the input is coerced to
// 2-D at `axis` (len = product of dims[axis:], inner = 1); from 13 it runs along dims[axis] only.
// Each row subtracts its max before exp (no overflow) and sums in double.
// BatchNormalization computes Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel
// (dim 1), in double, from the given statistics. Before opset 9, spatial=0 gives per-activation
// statistics of shape [C, D1..Dn]. From opset 14, training_mode=1 normalizes with the batch
// statistics instead (per channel over N and the spatial dims, population variance) and the
// optional outputs 1 and 2 are the running statistics input_mean * momentum + batch_mean *
// (1 - momentum), likewise for the variance, in the dtype of the mean / var inputs. The older
// training mode of opsets 7-13 (the mean/var/saved_* outputs) is rejected when the session is
// created (is_test=0, before opset 7, already at import by the version adapter).

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(int64_t axis, bool coerce_2d, bool allow_negative_axis)
      : axis_(axis), coerce_2d_(coerce_2d), allow_negative_axis_(allow_negative_axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Softmax"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(int axis,
                          NormalizeAxis("Softmax", axis_, x.rank(), allow_negative_axis_));
    const std::span<const int64_t> dims = x.shape().dims();
    const size_t ax = static_cast<size_t>(axis);
    const int64_t outer = DimProduct(dims, 0, ax);
    const int64_t len = coerce_2d_ ? DimProduct(dims, ax, dims.size()) : dims[ax];
    const int64_t inner = coerce_2d_ ? 1 : DimProduct(dims, ax + 1, dims.size());
    return DispatchType<float, double>(x.dtype(), "Softmax", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      std::vector<double> e(static_cast<size_t>(len));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * len * inner + i;
          double max = -std::numeric_limits<double>::infinity();
          for (int64_t k = 0; k < len; ++k) {
            max = std::max(max, static_cast<double>(px[base + k * inner]));
          }
          double sum = 0;
          for (int64_t k = 0; k < len; ++k) {
            e[static_cast<size_t>(k)] = std::exp(static_cast<double>(px[base + k * inner]) - max);
            sum += e[static_cast<size_t>(k)];
          }
          for (int64_t k = 0; k < len; ++k) {
            py[base + k * inner] = static_cast<T>(e[static_cast<size_t>(k)] / sum);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  int64_t axis_;
  bool coerce_2d_;
  bool allow_negative_axis_;
};

// Reads a FP32 or FP64 tensor as doubles (X in training mode; anything else yields zeros and
// is rejected by the dtype dispatch afterwards).
std::vector<double> ToDoublesAny(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat64) return out;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype() == DataType::kFloat32 ? static_cast<double>(t.data<const float>()[i])
                                             : t.data<const double>()[i];
  }
  return out;
}

// Reads a FP32 or FP64 tensor as doubles.
std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.dtype() == DataType::kFloat32 ? static_cast<double>(t.data<const float>()[i])
                                             : t.data<const double>()[i];
  }
  return out;
}

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(double epsilon, bool per_activation, bool mixed_types, bool training,
                  double momentum)
      : epsilon_(epsilon),
        per_activation_(per_activation),
        mixed_types_(mixed_types),
        training_(training),
        momentum_(momentum) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kInputNames[] = {"X", "scale", "B", "mean", "var"};
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 5, "BatchNormalization"));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    if (x.rank() < 2) {
      return OpError("BatchNormalization", "X must have rank >= 2 ([N, C, ...]), got {}",
                     x.shape().ToString());
    }
    // Statistics: [C], or [C, D1..Dn] per activation (spatial=0).
    const Shape param_shape =
        per_activation_ ? Shape(x.shape().dims().subspan(1)) : Shape{x.dim(1)};
    for (int i = 1; i < 5; ++i) {
      const Tensor& p = ctx.input(i);
      const bool dtype_ok =
          mixed_types_ ? (p.dtype() == DataType::kFloat32 || p.dtype() == DataType::kFloat64)
                       : p.dtype() == x.dtype();
      if (!dtype_ok) {
        return OpError("BatchNormalization", "input '{}' has dtype {}, expected {}", kInputNames[i],
                       DataTypeName(p.dtype()),
                       mixed_types_ ? "FP32 or FP64" : DataTypeName(x.dtype()));
      }
      if (!(p.shape() == param_shape)) {
        return OpError("BatchNormalization", "input '{}' has shape {}, expected {} for X {}",
                       kInputNames[i], p.shape().ToString(), param_shape.ToString(),
                       x.shape().ToString());
      }
    }
    const std::vector<double> scale = ToDoubles(ctx.input(1)), bias = ToDoubles(ctx.input(2));
    std::vector<double> mean = ToDoubles(ctx.input(3)), var = ToDoubles(ctx.input(4));
    const int64_t channels = x.dim(1);
    const int64_t spatial = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    if (training_) {
      // Batch statistics per channel (training_mode is opset 14+, where statistics are [C]).
      const std::vector<double> xs = ToDoublesAny(x);
      const double count = static_cast<double>(x.dim(0) * spatial);
      std::vector<double> batch_mean(static_cast<size_t>(channels), 0.0),
          batch_var(static_cast<size_t>(channels), 0.0);
      for (size_t i = 0; i < xs.size(); ++i) {
        batch_mean[static_cast<size_t>((static_cast<int64_t>(i) / spatial) % channels)] += xs[i];
      }
      for (double& m : batch_mean) m /= count;
      for (size_t i = 0; i < xs.size(); ++i) {
        const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / spatial) % channels);
        batch_var[c] += (xs[i] - batch_mean[c]) * (xs[i] - batch_mean[c]);
      }
      for (double& v : batch_var) v /= count;
      for (int out = 1; out <= 2 && out < ctx.num_outputs(); ++out) {
        const Tensor& stat_in = ctx.input(out + 2);  // input mean (3) or var (4)
        const std::vector<double>& running = out == 1 ? mean : var;
        const std::vector<double>& batch = out == 1 ? batch_mean : batch_var;
        KILN_ASSIGN_OR_RETURN(Tensor r, ctx.AllocateOutput(out, stat_in.dtype(), stat_in.shape()));
        for (size_t c = 0; c < running.size(); ++c) {
          const double v = running[c] * momentum_ + batch[c] * (1 - momentum_);
          if (r.dtype() == DataType::kFloat32) {
            r.data<float>()[c] = static_cast<float>(v);
          } else {
            r.data<double>()[c] = v;
          }
        }
      }
      mean = std::move(batch_mean);
      var = std::move(batch_var);
    }
    // Y = (X - mean) * mul + bias with mul = scale / sqrt(var + epsilon).
    std::vector<double> mul(scale.size());
    for (size_t i = 0; i < mul.size(); ++i) mul[i] = scale[i] / std::sqrt(var[i] + epsilon_);
    return DispatchType<float, double>(x.dtype(), "BatchNormalization", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t n = 0; n < x.dim(0); ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t base = (n * channels + c) * spatial;
          for (int64_t s = 0; s < spatial; ++s) {
            const size_t p = static_cast<size_t>(per_activation_ ? c * spatial + s : c);
            py[base + s] =
                static_cast<T>((static_cast<double>(px[base + s]) - mean[p]) * mul[p] + bias[p]);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  double epsilon_;
  bool per_activation_;  // spatial=0 (opset < 9)
  bool mixed_types_;     // opset >= 14: statistics may be FP32 or FP64 whatever X is
  bool training_;        // opset >= 14, training_mode=1: normalize with batch statistics
  double momentum_;      // for the running statistics outputs in training mode
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateSoftmax(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  const int64_t opset = info.opset();
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", opset >= 13 ? -1 : 1));
  if (opset < 11 && axis < 0) {
    return OpError("Softmax", "negative axis {} is not allowed before opset 11 (model uses {})",
                   axis, opset);
  }
  return std::make_unique<SoftmaxKernel>(axis, /*coerce_2d=*/opset < 13,
                                         /*allow_negative_axis=*/opset >= 11);
}

Result<std::unique_ptr<Kernel>> CreateBatchNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 5));
  AttrReader attrs(info);
  const int64_t opset = info.opset();
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("is_test", 7));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("spatial", 9));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("training_mode", 14));
  KILN_ASSIGN_OR_RETURN(float epsilon, attrs.Float("epsilon", 1e-5f));
  bool per_activation = false;
  if (opset < 9) {
    KILN_ASSIGN_OR_RETURN(int64_t spatial, attrs.Int("spatial", 1));
    per_activation = spatial == 0;
  }
  bool training = false;
  if (opset >= 14) {
    KILN_ASSIGN_OR_RETURN(training, attrs.Bool("training_mode", false));
  }
  KILN_ASSIGN_OR_RETURN(float momentum, attrs.Float("momentum", 0.9f));
  if (training) {
    KILN_RETURN_IF_ERROR(LimitOutputs(info, 3, "training mode has Y, running_mean, running_var"));
  } else {
    KILN_RETURN_IF_ERROR(LimitOutputs(
        info, 1,
        opset >= 14 ? "the running statistics outputs exist only with training_mode=1"
                    : "the statistics outputs exist only in training mode, which is not "
                      "supported before opset 14"));
  }
  return std::make_unique<BatchNormKernel>(static_cast<double>(epsilon), per_activation,
                                           /*mixed_types=*/opset >= 14, training,
                                           static_cast<double>(momentum));
}

}  // namespace kiln::ref
