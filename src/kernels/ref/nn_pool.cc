// SPDX-License-Identifier: Apache-2.0
// Reference pooling extras of the nn op family: GlobalMaxPool and MaxUnpool. (MaxPool,
// AveragePool and GlobalAveragePool live in pool.cc.)
//
// NOTE on the approach. GlobalMaxPool takes the max of each (n, c) plane (NaN propagates) and
// keeps the spatial dims as 1s. MaxUnpool scatters: Y starts as zeros and Y.flat[I[i]] = X[i],
// where I holds flat indices into the whole inferred output (as MaxPool's Indices are into its
// whole input), whose spatial dims are (in - 1) * stride + kernel - pad_begin - pad_end. The
// optional `output_shape` input may enlarge the output (not shrink it); an index then keeps its
// coordinates (it is unravelled over the inferred shape and ravelled over the output, which is
// what the ONNX test data expects). An index outside the inferred output is INVALID_ARGUMENT;
// when two indices collide the later element wins.

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

class GlobalMaxPoolKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "GlobalMaxPool"));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    if (x.rank() < 2) {
      return OpError("GlobalMaxPool", "input must have rank >= 2 ([N, C, ...]), got {}",
                     x.shape().ToString());
    }
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t spatial = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    if (spatial == 0 && planes > 0) {
      return OpError("GlobalMaxPool", "input {} has empty spatial dims: no max to take",
                     x.shape().ToString());
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(x.rank()), 1);
    out_dims[0] = x.dim(0);
    out_dims[1] = x.dim(1);
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), "GlobalMaxPool", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), Shape(out_dims)));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t p = 0; p < planes; ++p) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < spatial; ++s) {
          const double v = ToDouble(px[p * spatial + s]);
          if (v > max || std::isnan(v)) max = v;
          if (std::isnan(max)) break;
        }
        py[p] = FromDouble<T>(max);
      }
      return Status::OK();
    });
  }
};

class MaxUnpoolKernel final : public Kernel {
 public:
  MaxUnpoolKernel(std::vector<int64_t> kernel, std::vector<int64_t> strides,
                  std::vector<int64_t> pads)
      : kernel_(std::move(kernel)), strides_(std::move(strides)), pads_(std::move(pads)) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "MaxUnpool";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const Tensor& indices = ctx.input(1);
    const size_t spatial = kernel_.size();
    if (x.rank() != static_cast<int>(spatial) + 2) {
      return OpError(kOp, "kernel_shape has {} dims, so X must have rank {}, got {}", spatial,
                     spatial + 2, x.shape().ToString());
    }
    if (indices.dtype() != DataType::kInt64 || !(indices.shape() == x.shape())) {
      return OpError(kOp, "I must be INT64 with X's shape {}, got {} {}", x.shape().ToString(),
                     DataTypeName(indices.dtype()), indices.shape().ToString());
    }
    // The indices address the inferred output; output_shape may enlarge it (each index keeps its
    // coordinates).
    std::vector<int64_t> inferred = {x.dim(0), x.dim(1)};
    for (size_t d = 0; d < spatial; ++d) {
      const int64_t in = x.dim(static_cast<int>(d) + 2);
      int64_t out = 0;
      if (__builtin_mul_overflow(in - 1, strides_[d], &out) ||
          __builtin_add_overflow(out, kernel_[d] - pads_[d] - pads_[d + spatial], &out)) {
        return OpError(kOp, "the output size overflows on spatial axis {}", d);
      }
      if (out < 0) {
        return OpError(kOp, "pads leave a negative output size {} on spatial axis {}", out, d);
      }
      inferred.push_back(out);
    }
    KILN_ASSIGN_OR_RETURN(Shape inferred_shape, Shape::Create(inferred));
    std::vector<int64_t> out_dims = inferred;
    if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kOp));
      KILN_ASSIGN_OR_RETURN(out_dims, ReadInt64List(kOp, "input 'output_shape'", ctx.input(2)));
      if (out_dims.size() != spatial + 2) {
        return OpError(kOp, "output_shape has {} values, expected {} (X's rank)", out_dims.size(),
                       spatial + 2);
      }
      for (size_t d = 0; d < out_dims.size(); ++d) {
        if (out_dims[d] < inferred[d]) {
          return OpError(kOp, "output_shape [{}] is smaller than the inferred output {}",
                         fmt::join(out_dims, ","), inferred_shape.ToString());
        }
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    const int64_t total = inferred_shape.NumElements();
    const int64_t* pi = indices.data<const int64_t>();
    std::vector<int64_t> target(static_cast<size_t>(indices.num_elements()));
    for (int64_t i = 0; i < indices.num_elements(); ++i) {
      if (pi[i] < 0 || pi[i] >= total) {
        return OpError(kOp, "index {} at position {} is outside the output {}", pi[i], i,
                       inferred_shape.ToString());
      }
      // Unravel over the inferred shape, ravel over the output shape.
      int64_t rest = pi[i], offset = 0, scale = 1;
      for (size_t d = inferred.size(); d-- > 0;) {
        offset += (rest % inferred[d]) * scale;
        rest /= inferred[d];
        scale *= out_dims[d];
      }
      target[static_cast<size_t>(i)] = offset;
    }
    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_shape));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.num_elements(); ++i) py[target[static_cast<size_t>(i)]] = px[i];
      return Status::OK();
    });
  }

 private:
  std::vector<int64_t> kernel_, strides_, pads_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateGlobalMaxPool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "GlobalMaxPool has one output"));
  return std::make_unique<GlobalMaxPoolKernel>();
}

Result<std::unique_ptr<Kernel>> CreateMaxUnpool(const KernelInfo& info) {
  static constexpr const char* kOp = "MaxUnpool";
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "MaxUnpool has one output"));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, attrs.Ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.Ints("strides"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.Ints("pads"));
  if (kernel.empty()) return OpError(kOp, "attribute 'kernel_shape' is required");
  const size_t n = kernel.size();
  if (strides.empty()) strides.assign(n, 1);
  if (pads.empty()) pads.assign(2 * n, 0);
  if (strides.size() != n || pads.size() != 2 * n) {
    return OpError(kOp, "strides ({}) and pads ({}) must have {} and {} values (kernel_shape)",
                   strides.size(), pads.size(), n, 2 * n);
  }
  constexpr int64_t kMax = int64_t{1} << 31;
  for (size_t i = 0; i < n; ++i) {
    if (kernel[i] < 1 || kernel[i] > kMax || strides[i] < 1 || strides[i] > kMax) {
      return OpError(kOp, "kernel_shape and strides must be in [1, 2^31], got {} and {}", kernel[i],
                     strides[i]);
    }
  }
  for (int64_t p : pads) {
    if (p < 0 || p > kMax) return OpError(kOp, "pads must be in [0, 2^31], got {}", p);
  }
  return std::make_unique<MaxUnpoolKernel>(std::move(kernel), std::move(strides), std::move(pads));
}

}  // namespace kiln::ref
