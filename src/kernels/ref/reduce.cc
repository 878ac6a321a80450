// SPDX-License-Identifier: Apache-2.0
// Reference reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and ArgMax / ArgMin.
//
// NOTE on the approach. A reduction walks the input once in row-major order with an odometer
// that also tracks the output offset (stride 0 on reduced axes) and folds each element into its
// output's accumulator: double for floating point (FP16/BF16 included), a uint64 that wraps
// modulo 2^64 for integer sums, products and means (then truncated to T, which is the exact
// result modulo 2^n), T itself for integer max/min, and double for integer L2 / LogSum /
// LogSumExp (converted back saturating). LogSumExp makes two passes (max, then the sum of
// exp(x - max)) so large inputs do not overflow. Empty reductions give the identity of the
// operation: 0 for sums, 1 for products, -inf / lowest for max, +inf / max for min, -inf for
// LogSum and LogSumExp, NaN for a floating-point mean (an integer mean of nothing is
// INVALID_ARGUMENT: it divides by zero). Max and Min propagate NaN.
// Axes: the `axes` attribute (negative values from opset 11), or from ReduceSum-13 on the
// optional INT64 input 1; absent or empty axes reduce everything unless noop_with_empty_axes=1,
// which makes the op an identity.
// ArgMax / ArgMin view the input as [outer, len, inner] and return the first (or, with
// select_last_index, the last) position of the extreme along `axis` as INT64; NaN is never
// selected unless every candidate is NaN (then position 0 / len - 1).

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nn_common.h"

namespace kiln::ref {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <typename T>
uint64_t WrapAbs(T v) {
  if constexpr (std::is_signed_v<T>) {
    return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  } else {
    return static_cast<uint64_t>(v);
  }
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(std::string op, ReduceKind kind, std::vector<int64_t> axes, bool axes_from_input,
               bool keepdims, bool noop_with_empty_axes, bool allow_negative)
      : op_(std::move(op)),
        kind_(kind),
        axes_(std::move(axes)),
        axes_from_input_(axes_from_input),
        keepdims_(keepdims),
        noop_with_empty_axes_(noop_with_empty_axes),
        allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_ && ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, op_));
      KILN_ASSIGN_OR_RETURN(axes, ReadInt64List(op_, "input 'axes'", ctx.input(1)));
    }
    if (axes.empty() && noop_with_empty_axes_) return CopyToOutput(ctx, x, x.shape());
    const int rank = x.rank();
    std::vector<bool> reduced(static_cast<size_t>(rank), true);
    if (!axes.empty()) {
      KILN_ASSIGN_OR_RETURN(reduced, AxesMask(op_, axes, rank, allow_negative_));
    }
    int64_t groups = 0, count = 0;
    const DimArray out_strides = ReducedStrides(x.shape().dims(), reduced, &groups, &count);
    std::vector<int64_t> out_dims;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[static_cast<size_t>(d)]) {
        out_dims.push_back(x.dim(d));
      } else if (keepdims_) {
        out_dims.push_back(1);
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    return DispatchType<KILN_NN_FLOAT_TYPES, int32_t, int64_t, uint32_t, uint64_t, int8_t, uint8_t>(
        x.dtype(), op_, [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_shape));
          return Run<T>(x, y, out_strides, count);
        });
  }

 private:
  // Integer sums, products and means, exact modulo 2^64.
  template <typename T>
  bool UsesWrappingInt() const {
    if constexpr (kIsFloatLike<T>) {
      return false;
    } else {
      return kind_ == ReduceKind::kSum || kind_ == ReduceKind::kMean ||
             kind_ == ReduceKind::kProd || kind_ == ReduceKind::kL1 ||
             kind_ == ReduceKind::kSumSquare;
    }
  }

  template <typename T>
  Status Run(const Tensor& x, Tensor& y, const DimArray& out_strides, int64_t count) const {
    const T* px = x.data<const T>();
    T* py = y.data<T>();
    const int64_t n_in = x.num_elements(), n_out = y.num_elements();
    const size_t n = static_cast<size_t>(n_out);
    const std::span<const int64_t> dims = x.shape().dims();
    if constexpr (!kIsFloatLike<T>) {
      if (kind_ == ReduceKind::kMax || kind_ == ReduceKind::kMin) {
        const bool is_max = kind_ == ReduceKind::kMax;
        std::vector<T> acc(
            n, is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max());
        ForEachReduced(dims, out_strides, n_in, [&](int64_t i, int64_t o) {
          T& a = acc[static_cast<size_t>(o)];
          if (is_max ? px[i] > a : px[i] < a) a = px[i];
        });
        for (size_t o = 0; o < n; ++o) py[o] = acc[o];
        return Status::OK();
      }
    }
    if (UsesWrappingInt<T>()) {
      if constexpr (!kIsFloatLike<T>) {
        if (kind_ == ReduceKind::kMean && count == 0 && n_out > 0) {
          return OpError(op_, "the mean of an empty integer reduction divides by zero");
        }
        std::vector<uint64_t> acc(n, kind_ == ReduceKind::kProd ? 1 : 0);
        ForEachReduced(dims, out_strides, n_in, [&](int64_t i, int64_t o) {
          uint64_t& a = acc[static_cast<size_t>(o)];
          const uint64_t v = static_cast<uint64_t>(px[i]);  // sign-extends, modulo 2^64
          switch (kind_) {
            case ReduceKind::kProd:
              a *= v;
              break;
            case ReduceKind::kL1:
              a += WrapAbs(px[i]);
              break;
            case ReduceKind::kSumSquare:
              a += v * v;
              break;
            default:
              a += v;
          }
        });
        for (size_t o = 0; o < n; ++o) {
          if (kind_ != ReduceKind::kMean) {
            py[o] = static_cast<T>(acc[o]);
          } else if constexpr (std::is_signed_v<T>) {
            py[o] = static_cast<T>(static_cast<int64_t>(acc[o]) / count);
          } else {
            py[o] = static_cast<T>(acc[o] / static_cast<uint64_t>(count));
          }
        }
      }
      return Status::OK();
    }
    // Floating point (and integer L2 / LogSum / LogSumExp) in double.
    std::vector<double> max;
    if (kind_ == ReduceKind::kLogSumExp) {
      max.assign(n, -std::numeric_limits<double>::infinity());
      ForEachReduced(dims, out_strides, n_in, [&](int64_t i, int64_t o) {
        const double v = ToDouble(px[i]);
        double& m = max[static_cast<size_t>(o)];
        if (v > m || std::isnan(v)) m = v;
      });
    }
    const double inf = std::numeric_limits<double>::infinity();
    double init = 0;
    if (kind_ == ReduceKind::kProd) init = 1;
    if (kind_ == ReduceKind::kMax) init = -inf;
    if (kind_ == ReduceKind::kMin) init = inf;
    std::vector<double> acc(n, init);
    ForEachReduced(dims, out_strides, n_in, [&](int64_t i, int64_t o) {
      const size_t ou = static_cast<size_t>(o);
      double& a = acc[ou];
      const double v = ToDouble(px[i]);
      switch (kind_) {
        case ReduceKind::kMax:
          if (v > a || std::isnan(v)) a = v;
          break;
        case ReduceKind::kMin:
          if (v < a || std::isnan(v)) a = v;
          break;
        case ReduceKind::kProd:
          a *= v;
          break;
        case ReduceKind::kL1:
          a += std::abs(v);
          break;
        case ReduceKind::kL2:
        case ReduceKind::kSumSquare:
          a += v * v;
          break;
        case ReduceKind::kLogSumExp:
          if (std::isfinite(max[ou])) a += std::exp(v - max[ou]);
          break;
        default:
          a += v;
      }
    });
    for (size_t o = 0; o < n; ++o) {
      double r = acc[o];
      switch (kind_) {
        case ReduceKind::kMean:
          r /= static_cast<double>(count);
          break;
        case ReduceKind::kL2:
          r = std::sqrt(r);
          break;
        case ReduceKind::kLogSum:
          r = std::log(r);
          break;
        case ReduceKind::kLogSumExp:
          r = std::isfinite(max[o]) ? max[o] + std::log(r) : max[o];
          break;
        default:
          break;
      }
      py[o] = FromDouble<T>(r);
    }
    return Status::OK();
  }

  std::string op_;
  ReduceKind kind_;
  std::vector<int64_t> axes_;  // from the attribute
  bool axes_from_input_;       // ReduceSum-13+: axes come from optional input 1
  bool keepdims_;
  bool noop_with_empty_axes_;
  bool allow_negative_;
};

Result<std::unique_ptr<Kernel>> CreateReduce(const KernelInfo& info, ReduceKind kind) {
  const std::string& op = info.node().op_type;
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "reductions have one output"));
  AttrReader attrs(info);
  const bool axes_from_input = kind == ReduceKind::kSum && info.opset() >= 13;
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("noop_with_empty_axes", 13));
  if (axes_from_input) {
    if (attrs.Has("axes")) {
      return OpError(op, "attribute 'axes' was replaced by input 1 in opset 13 (model uses {})",
                     info.opset());
    }
  } else if (info.num_inputs() > 1) {
    return OpError(op, "takes one input at opset {}, got {}", info.opset(), info.num_inputs());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, attrs.Ints("axes"));
  KILN_ASSIGN_OR_RETURN(bool keepdims, attrs.Bool("keepdims", true));
  KILN_ASSIGN_OR_RETURN(bool noop, attrs.Bool("noop_with_empty_axes", false));
  if (noop && !axes_from_input) {
    return OpError(op, "attribute 'noop_with_empty_axes' is only defined where axes is an input");
  }
  const bool allow_negative = info.opset() >= 11;
  for (int64_t a : axes) {
    if (a < 0 && !allow_negative) {
      return OpError(op, "negative axis {} is not allowed before opset 11 (model uses {})", a,
                     info.opset());
    }
  }
  return std::make_unique<ReduceKernel>(op, kind, std::move(axes), axes_from_input, keepdims, noop,
                                        allow_negative);
}

class ArgKernel final : public Kernel {
 public:
  ArgKernel(std::string op, bool is_max, int64_t axis, bool keepdims, bool select_last,
            bool allow_negative)
      : op_(std::move(op)),
        is_max_(is_max),
        axis_(axis),
        keepdims_(keepdims),
        select_last_(select_last),
        allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError(op_, "input must have rank >= 1, got a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(op_, axis_, x.rank(), allow_negative_));
    const std::span<const int64_t> dims = x.shape().dims();
    const size_t ax = static_cast<size_t>(axis);
    const int64_t outer = DimProduct(dims, 0, ax), len = dims[ax];
    const int64_t inner = DimProduct(dims, ax + 1, dims.size());
    if (len == 0 && outer * inner > 0) {
      return OpError(op_, "axis {} of {} is empty: there is no element to select", axis,
                     x.shape().ToString());
    }
    std::vector<int64_t> out_dims(dims.begin(), dims.end());
    if (keepdims_) {
      out_dims[ax] = 1;
    } else {
      out_dims.erase(out_dims.begin() + axis);
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    return DispatchType<KILN_NN_FLOAT_TYPES, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                        uint32_t, uint64_t>(x.dtype(), op_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, out_shape));
      const T* px = x.data<const T>();
      int64_t* py = y.data<int64_t>();
      // Integers compare as themselves, floats as doubles (FP16/BF16 have no operator<).
      auto key = [](T v) {
        if constexpr (kIsFloatLike<T>) {
          return ToDouble(v);
        } else {
          return v;
        }
      };
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* row = px + o * len * inner + i;
          int64_t best = select_last_ ? len - 1 : 0;
          auto best_key = key(row[best * inner]);
          for (int64_t step = 1; step < len; ++step) {
            const int64_t k = select_last_ ? len - 1 - step : step;
            const auto v = key(row[k * inner]);
            // A NaN best is replaced by any number; ties keep the earlier candidate.
            bool better = is_max_ ? v > best_key : v < best_key;
            if constexpr (kIsFloatLike<T>) {
              if (std::isnan(best_key) && !std::isnan(v)) better = true;
            }
            if (better) {
              best = k;
              best_key = v;
            }
          }
          py[o * inner + i] = best;
        }
      }
      return Status::OK();
    });
  }

 private:
  std::string op_;
  bool is_max_;
  int64_t axis_;
  bool keepdims_;
  bool select_last_;
  bool allow_negative_;
};

Result<std::unique_ptr<Kernel>> CreateArg(const KernelInfo& info, bool is_max) {
  const std::string& op = info.node().op_type;
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "ArgMax and ArgMin have one output"));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("select_last_index", 12));
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
  KILN_ASSIGN_OR_RETURN(bool keepdims, attrs.Bool("keepdims", true));
  KILN_ASSIGN_OR_RETURN(bool select_last, attrs.Bool("select_last_index", false));
  const bool allow_negative = info.opset() >= 11;
  if (axis < 0 && !allow_negative) {
    return OpError(op, "negative axis {} is not allowed before opset 11 (model uses {})", axis,
                   info.opset());
  }
  return std::make_unique<ArgKernel>(op, is_max, axis, keepdims, select_last, allow_negative);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateReduceSum(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kSum);
}
Result<std::unique_ptr<Kernel>> CreateReduceMean(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kMean);
}
Result<std::unique_ptr<Kernel>> CreateReduceMax(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kMax);
}
Result<std::unique_ptr<Kernel>> CreateReduceMin(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kMin);
}
Result<std::unique_ptr<Kernel>> CreateReduceProd(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kProd);
}
Result<std::unique_ptr<Kernel>> CreateReduceL1(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kL1);
}
Result<std::unique_ptr<Kernel>> CreateReduceL2(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kL2);
}
Result<std::unique_ptr<Kernel>> CreateReduceLogSum(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kLogSum);
}
Result<std::unique_ptr<Kernel>> CreateReduceLogSumExp(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kLogSumExp);
}
Result<std::unique_ptr<Kernel>> CreateReduceSumSquare(const KernelInfo& info) {
  return CreateReduce(info, ReduceKind::kSumSquare);
}
Result<std::unique_ptr<Kernel>> CreateArgMax(const KernelInfo& info) {
  return CreateArg(info, /*is_max=*/true);
}
Result<std::unique_ptr<Kernel>> CreateArgMin(const KernelInfo& info) {
  return CreateArg(info, /*is_max=*/false);
}

}  // namespace kiln::ref
