// SPDX-License-Identifier: Apache-2.0
// Reference loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reduction
// none / sum / mean, optional class weights, ignore_index, SoftmaxCrossEntropyLoss's optional
// log_prob output).
//
// NOTE on the approach: inputs are [N, C, d1..dk] and targets [N, d1..dk]; both kernels view
// them as N x C x D (D = d1 * ... * dk). SoftmaxCrossEntropyLoss first computes log_softmax over
// C (max-subtracted, in double) and then runs the same NLL step on it:
//   loss[n, d] = -w[t] * logp[n, t, d] with t = target[n, d] (0 when t == ignore_index),
// reduced by sum, or by mean = sum / (sum of w[t] over the elements not ignored), as the ONNX
// reference does (0 / 0 gives NaN). A target outside [0, C) that is not ignore_index is an
// INVALID_ARGUMENT.

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

enum class Reduction { kNone, kSum, kMean };

class LossKernel final : public Kernel {
 public:
  LossKernel(bool softmax, Reduction reduction, std::optional<int64_t> ignore_index)
      : softmax_(softmax), reduction_(reduction), ignore_index_(ignore_index) {}

  Status Compute(KernelContext& ctx) const override {
    const std::string_view op = softmax_ ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, op));
    const Tensor& x = ctx.input(0);
    const Tensor& target = ctx.input(1);
    if (x.rank() < 2) return OpError(op, "input {} must have rank >= 2", x.shape().ToString());
    if (target.rank() != x.rank() - 1 || target.dim(0) != x.dim(0) ||
        !std::equal(target.shape().dims().begin() + 1, target.shape().dims().end(),
                    x.shape().dims().begin() + 2)) {
      return OpError(op, "target {} must be input {} without the class dim",
                     target.shape().ToString(), x.shape().ToString());
    }
    if (target.dtype() != DataType::kInt32 && target.dtype() != DataType::kInt64) {
      return OpError(op, "target must be INT32 or INT64, got {}", DataTypeName(target.dtype()));
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    const int64_t d = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    const Tensor* weight = nullptr;
    if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, op));
      weight = &ctx.input(2);
      if (weight->dtype() != x.dtype() || !(weight->shape() == Shape{c})) {
        return OpError(op, "weight must be {} [{}], got {}{}", DataTypeName(x.dtype()), c,
                       DataTypeName(weight->dtype()), weight->shape().ToString());
      }
    }
    // Targets as int64, checked.
    std::vector<int64_t> t(static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n * d; ++i) {
      const int64_t v = target.dtype() == DataType::kInt32
                            ? int64_t{target.data<const int32_t>()[i]}
                            : target.data<const int64_t>()[i];
      if (!(ignore_index_ && v == *ignore_index_) && (v < 0 || v >= c)) {
        return OpError(op, "target {} at element {} is out of range [0, {})", v, i, c);
      }
      t[static_cast<size_t>(i)] = v;
    }
    const Shape loss_shape = reduction_ == Reduction::kNone ? target.shape() : Shape{};
    return DispatchType<float, double>(x.dtype(), op, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x.data<const T>();
      const T* pw = weight != nullptr ? weight->data<const T>() : nullptr;
      // log-probabilities (SoftmaxCrossEntropyLoss) or the input itself.
      std::vector<double> logp;
      if (softmax_) {
        logp.resize(static_cast<size_t>(n * c * d));
        for (int64_t ni = 0; ni < n; ++ni) {
          for (int64_t di = 0; di < d; ++di) {
            const T* base = px + ni * c * d + di;
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t ci = 0; ci < c; ++ci) mx = std::max(mx, static_cast<double>(base[ci * d]));
            double sum = 0;
            for (int64_t ci = 0; ci < c; ++ci)
              sum += std::exp(static_cast<double>(base[ci * d]) - mx);
            const double lse = mx + std::log(sum);
            for (int64_t ci = 0; ci < c; ++ci) {
              logp[static_cast<size_t>(ni * c * d + ci * d + di)] =
                  static_cast<double>(base[ci * d]) - lse;
            }
          }
        }
      }
      auto lp = [&](int64_t ni, int64_t ci, int64_t di) {
        const int64_t idx = ni * c * d + ci * d + di;
        return softmax_ ? logp[static_cast<size_t>(idx)] : static_cast<double>(px[idx]);
      };
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), loss_shape));
      T* py = y.data<T>();
      double total = 0, weight_sum = 0;
      for (int64_t ni = 0; ni < n; ++ni) {
        for (int64_t di = 0; di < d; ++di) {
          const int64_t ti = t[static_cast<size_t>(ni * d + di)];
          double l = 0, wt = 0;
          if (!(ignore_index_ && ti == *ignore_index_)) {
            wt = pw != nullptr ? static_cast<double>(pw[ti]) : 1.0;
            l = -lp(ni, ti, di) * wt;
          }
          if (reduction_ == Reduction::kNone) py[ni * d + di] = static_cast<T>(l);
          total += l;
          weight_sum += wt;
        }
      }
      if (reduction_ == Reduction::kSum) *py = static_cast<T>(total);
      if (reduction_ == Reduction::kMean) *py = static_cast<T>(total / weight_sum);
      if (softmax_ && ctx.num_outputs() > 1) {
        KILN_ASSIGN_OR_RETURN(Tensor lpo, ctx.AllocateOutput(1, x.dtype(), x.shape()));
        T* pl = lpo.data<T>();
        for (size_t i = 0; i < logp.size(); ++i) pl[i] = static_cast<T>(logp[i]);
      }
      return Status::OK();
    });
  }

 private:
  bool softmax_;
  Reduction reduction_;
  std::optional<int64_t> ignore_index_;
};

Result<std::unique_ptr<Kernel>> CreateLoss(const KernelInfo& info, bool softmax) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::string r, attrs.String("reduction", "mean"));
  Reduction reduction;
  if (r == "none") {
    reduction = Reduction::kNone;
  } else if (r == "sum") {
    reduction = Reduction::kSum;
  } else if (r == "mean") {
    reduction = Reduction::kMean;
  } else {
    return OpError(attrs.op(), "attribute 'reduction' is '{}', expected none, sum or mean", r);
  }
  std::optional<int64_t> ignore_index;
  if (attrs.Has("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ii, attrs.Int("ignore_index", 0));
    ignore_index = ii;
  }
  if (!softmax) KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "NegativeLogLikelihoodLoss has one"));
  return std::make_unique<LossKernel>(softmax, reduction, ignore_index);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateNegativeLogLikelihoodLoss(const KernelInfo& info) {
  return CreateLoss(info, /*softmax=*/false);
}

Result<std::unique_ptr<Kernel>> CreateSoftmaxCrossEntropyLoss(const KernelInfo& info) {
  return CreateLoss(info, /*softmax=*/true);
}

}  // namespace kiln::ref
