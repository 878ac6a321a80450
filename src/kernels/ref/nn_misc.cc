// SPDX-License-Identifier: Apache-2.0
// Reference Dropout and Det of the nn op family.
//
// NOTE on the approach. Dropout is an identity at inference, with the optional mask output all
// true (all ones in X's dtype before opset 10, when the mask had type T). Only opset 12+'s
// training_mode input turns training on: then with ratio 0 it is still the identity, otherwise
// each element is kept when a uniform draw in [0, 1) is >= ratio and scaled by 1 / (1 - ratio).
// The draws come from a std::mt19937_64 seeded with the `seed` attribute (0 when absent) for
// each call, so results are reproducible and Compute stays const. (Before opset 7, is_test=0 also
// meant training; the importer's version adapter drops it, so such models run as an identity.)
// Det factors each trailing [M, M] matrix with Gaussian elimination and partial pivoting in
// double; the determinant is the signed product of the pivots (0 for a singular matrix).

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nn_common.h"

namespace kiln::ref {
namespace {

class DropoutKernel final : public Kernel {
 public:
  DropoutKernel(float ratio_attr, bool mask_is_bool, bool inputs_control, uint64_t seed)
      : ratio_attr_(ratio_attr),
        mask_is_bool_(mask_is_bool),
        inputs_control_(inputs_control),
        seed_(seed) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "Dropout";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kOp));
    const Tensor& x = ctx.input(0);
    double ratio = ratio_attr_;
    bool training = false;
    if (inputs_control_ && ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, kOp));
      const Tensor& r = ctx.input(1);
      if (r.num_elements() != 1) {
        return OpError(kOp, "ratio must be a scalar, got {}", r.shape().ToString());
      }
      KILN_RETURN_IF_ERROR(
          DispatchType<KILN_NN_FLOAT_TYPES>(r.dtype(), kOp, [&](auto tag) -> Status {
            ratio = ToDouble(r.data<const typename decltype(tag)::type>()[0]);
            return Status::OK();
          }));
    }
    if (inputs_control_ && ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kOp));
      const Tensor& t = ctx.input(2);
      if (t.dtype() != DataType::kBool || t.num_elements() != 1) {
        return OpError(kOp, "training_mode must be a BOOL scalar, got {} {}",
                       DataTypeName(t.dtype()), t.shape().ToString());
      }
      training = t.data<const bool>()[0];
    }
    if (training && !(ratio >= 0 && ratio < 1)) {
      return OpError(kOp, "ratio must be in [0, 1) in training mode, got {}", ratio);
    }
    const bool drop = training && ratio > 0;
    const bool want_mask = ctx.num_outputs() > 1;
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      const int64_t n = x.num_elements();
      std::vector<bool> keep(static_cast<size_t>(n), true);
      if (drop) {
        std::mt19937_64 rng(seed_);
        std::uniform_real_distribution<double> uniform(0.0, 1.0);
        const double scale = 1.0 / (1.0 - ratio);
        for (int64_t i = 0; i < n; ++i) {
          keep[static_cast<size_t>(i)] = uniform(rng) >= ratio;
          py[i] = keep[static_cast<size_t>(i)] ? FromDouble<T>(ToDouble(px[i]) * scale)
                                               : FromDouble<T>(0.0);
        }
      } else {
        CopyElements(x, 0, y, 0, n);
      }
      if (!want_mask) return Status::OK();
      if (mask_is_bool_) {
        KILN_ASSIGN_OR_RETURN(Tensor m, ctx.AllocateOutput(1, DataType::kBool, x.shape()));
        for (int64_t i = 0; i < n; ++i) m.data<bool>()[i] = keep[static_cast<size_t>(i)];
      } else {
        KILN_ASSIGN_OR_RETURN(Tensor m, ctx.AllocateOutput(1, x.dtype(), x.shape()));
        for (int64_t i = 0; i < n; ++i) {
          m.data<T>()[i] = FromDouble<T>(keep[static_cast<size_t>(i)] ? 1.0 : 0.0);
        }
      }
      return Status::OK();
    });
  }

 private:
  float ratio_attr_;
  bool mask_is_bool_;    // opset >= 10
  bool inputs_control_;  // opset >= 12: ratio and training_mode are inputs
  uint64_t seed_;
};

class DetKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Det"));
    const Tensor& x = ctx.input(0);  // [*, M, M]
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
      return OpError("Det", "input must be [*, M, M] (square matrices), got {}",
                     x.shape().ToString());
    }
    const int64_t m = x.dim(x.rank() - 1);
    const Shape out(x.shape().dims().subspan(0, static_cast<size_t>(x.rank() - 2)));
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), "Det", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t b = 0; b < out.NumElements(); ++b) {
        for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = ToDouble(px[b * m * m + i]);
        auto at = [&](int64_t r, int64_t c) -> double& {
          return a[static_cast<size_t>(r * m + c)];
        };
        double det = 1;
        for (int64_t col = 0; col < m && det != 0; ++col) {
          int64_t pivot = col;
          for (int64_t r = col + 1; r < m; ++r) {
            if (std::abs(at(r, col)) > std::abs(at(pivot, col))) pivot = r;
          }
          if (at(pivot, col) == 0) {
            det = 0;
            break;
          }
          if (pivot != col) {
            for (int64_t c = 0; c < m; ++c) std::swap(at(pivot, c), at(col, c));
            det = -det;
          }
          det *= at(col, col);
          for (int64_t r = col + 1; r < m; ++r) {
            const double f = at(r, col) / at(col, col);
            for (int64_t c = col; c < m; ++c) at(r, c) -= f * at(col, c);
          }
        }
        py[b] = FromDouble<T>(det);
      }
      return Status::OK();
    });
  }
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateDropout(const KernelInfo& info) {
  static constexpr const char* kOp = "Dropout";
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 2, "Dropout has output and mask"));
  AttrReader attrs(info);
  const int64_t opset = info.opset();
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("is_test", 7));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("ratio", 12));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("seed", 12));
  KILN_ASSIGN_OR_RETURN(float ratio, attrs.Float("ratio", 0.5f));
  KILN_ASSIGN_OR_RETURN(int64_t seed, attrs.Int("seed", 0));
  if (!(ratio >= 0 && ratio <= 1)) {
    return OpError(kOp, "attribute 'ratio' must be in [0, 1], got {}", ratio);
  }
  if (opset < 12 && info.num_inputs() > 1) {
    return OpError(kOp, "takes one input before opset 12 (model uses {})", opset);
  }
  return std::make_unique<DropoutKernel>(ratio, /*mask_is_bool=*/opset >= 10,
                                         /*inputs_control=*/opset >= 12,
                                         static_cast<uint64_t>(seed));
}

Result<std::unique_ptr<Kernel>> CreateDet(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "Det has one output"));
  return std::make_unique<DetKernel>();
}

}  // namespace kiln::ref
