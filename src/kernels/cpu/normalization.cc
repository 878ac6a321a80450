// SPDX-License-Identifier: Apache-2.0
// Softmax (every opset's axis rule), ai.kiln LayerNormalization and InstanceNormalization, FP32,
// on the AVX2 / scalar row microkernels (elementwise_kernels.h), rows split over threads with
// ParallelFor.
//
// NOTE: Softmax is seen as [outer, len, inner] around its axis (opsets 7-12 coerce to 2-D, so
// inner = 1). inner == 1 (the last axis, e.g. attention scores) is three passes over a
// contiguous row: max, exp(x - max) with the sum, scale by 1/sum. inner > 1 transposes each
// [len, inner] slab through a per-thread buffer so the same row kernel applies.

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cpu {
namespace {

using ref::OpError;

bool IsF32Cpu(const Tensor& t) {
  return t.dtype() == DataType::kFloat32 && t.device().is_cpu() && t.is_contiguous();
}

int64_t Product(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

void SoftmaxRow(const float* x, float* y, int64_t len) {
  const float max = MaxF32(x, len);
  const float sum = ExpShiftSumF32(x, max, y, len);
  ScaleF32(y, 1.0f / sum, y, len);
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(int64_t axis, bool coerce_2d, bool allow_negative_axis,
                std::unique_ptr<Kernel> reference)
      : axis_(axis),
        coerce_2d_(coerce_2d),
        allow_negative_axis_(allow_negative_axis),
        reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !ctx.has_input(0) || !IsF32Cpu(ctx.input(0)) ||
        ctx.input(0).rank() == 0) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    Result<int> axis_or = ref::NormalizeAxis("Softmax", axis_, x.rank(), allow_negative_axis_);
    if (!axis_or.ok()) return reference_->Compute(ctx);
    const std::span<const int64_t> dims = x.shape().dims();
    const size_t ax = static_cast<size_t>(*axis_or);
    const int64_t outer = Product(dims, 0, ax);
    const int64_t len = coerce_2d_ ? Product(dims, ax, dims.size()) : dims[ax];
    const int64_t inner = coerce_2d_ ? 1 : Product(dims, ax + 1, dims.size());
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, x.shape()));
    if (x.num_elements() == 0) return Status::OK();
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    if (inner == 1) {
      ParallelFor(outer, std::max<int64_t>(1, 4096 / len), [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) SoftmaxRow(px + o * len, py + o * len, len);
      });
      return Status::OK();
    }
    ParallelFor(outer * inner, std::max<int64_t>(1, 4096 / len), [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(len));
      for (int64_t r = begin; r < end; ++r) {
        const int64_t base = (r / inner) * len * inner + r % inner;
        for (int64_t k = 0; k < len; ++k) row[static_cast<size_t>(k)] = px[base + k * inner];
        SoftmaxRow(row.data(), row.data(), len);
        for (int64_t k = 0; k < len; ++k) py[base + k * inner] = row[static_cast<size_t>(k)];
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool coerce_2d_;
  bool allow_negative_axis_;
  std::unique_ptr<Kernel> reference_;
};

// ai.kiln LayerNormalization(X, Scale, B?): normalizes over X's dims [axis, rank).
class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(int64_t axis, float epsilon) : axis_(axis), epsilon_(epsilon) {}

  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "ai.kiln.LayerNormalization";
    KILN_RETURN_IF_ERROR(ref::CheckInputs(ctx, 2, kOp));
    const bool has_bias = ctx.num_inputs() > 2 && ctx.has_input(2);
    if (has_bias) KILN_RETURN_IF_ERROR(ref::CheckInput(ctx, 2, kOp));
    for (int i = 0; i < (has_bias ? 3 : 2); ++i) {
      if (ctx.input(i).dtype() != DataType::kFloat32) {
        return OpError(kOp, "input {} has dtype {}, this kernel takes FLOAT", i,
                       DataTypeName(ctx.input(i).dtype()));
      }
    }
    const Tensor& x = ctx.input(0);
    if (x.rank() == 0) return OpError(kOp, "X must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, ref::NormalizeAxis(kOp, axis_, x.rank(), true));
    const std::span<const int64_t> dims = x.shape().dims();
    const int64_t rows = Product(dims, 0, static_cast<size_t>(axis));
    const int64_t len = Product(dims, static_cast<size_t>(axis), dims.size());
    const Tensor& scale = ctx.input(1);
    if (scale.num_elements() != len || (has_bias && ctx.input(2).num_elements() != len)) {
      return OpError(kOp, "Scale {} and B {} must have the normalized shape of X {} (axis {})",
                     scale.shape().ToString(),
                     has_bias ? ctx.input(2).shape().ToString() : std::string("(none)"),
                     x.shape().ToString(), axis);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, x.shape()));
    if (x.num_elements() == 0) return Status::OK();
    const float* px = x.data<const float>();
    const float* ps = scale.data<const float>();
    const float* pb = has_bias ? ctx.input(2).data<const float>() : nullptr;
    float* py = y.data<float>();
    ParallelFor(rows, std::max<int64_t>(1, 4096 / len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        LayerNormRowF32(px + r * len, ps, pb, epsilon_, py + r * len, len);
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
  float epsilon_;
};

// InstanceNormalization(X [N, C, spatial...], scale [C], B [C]): each (n, c) row of the spatial
// elements normalized, then scaled and shifted by its channel's values (GroupNorm as exported by
// torch: a reshape to [N, groups, -1] around it). Anything but contiguous FP32 operands of valid
// shapes goes to the reference kernel (which reports the errors).
class InstanceNormKernel final : public Kernel {
 public:
  InstanceNormKernel(float epsilon, std::unique_ptr<Kernel> reference)
      : epsilon_(epsilon), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ref::CheckInputs(ctx, 3, "InstanceNormalization"));
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    if (!IsF32Cpu(x) || !IsF32Cpu(scale) || !IsF32Cpu(bias) || x.rank() < 2 || scale.rank() != 1 ||
        bias.rank() != 1 || scale.dim(0) != x.dim(1) || bias.dim(0) != x.dim(1)) {
      return reference_->Compute(ctx);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, x.shape()));
    const int64_t channels = x.dim(1);
    const int64_t rows = x.dim(0) * channels;
    const int64_t len = Product(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    if (rows == 0 || len == 0) return Status::OK();
    const float* px = x.data<const float>();
    const float* ps = scale.data<const float>();
    const float* pb = bias.data<const float>();
    float* py = y.data<float>();
    ParallelFor(rows, std::max<int64_t>(1, 4096 / len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t c = r % channels;
        InstanceNormRowF32(px + r * len, ps[c], pb[c], epsilon_, py + r * len, len);
      }
    });
    return Status::OK();
  }

 private:
  float epsilon_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateInstanceNormalization(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateInstanceNormalization(info));
  KILN_ASSIGN_OR_RETURN(float epsilon, ref::AttrReader(info).Float("epsilon", 1e-5f));
  return std::make_unique<InstanceNormKernel>(epsilon, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateSoftmax(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateSoftmax(info));
  const int64_t opset = info.opset();
  KILN_ASSIGN_OR_RETURN(int64_t axis, ref::AttrReader(info).Int("axis", opset >= 13 ? -1 : 1));
  return std::make_unique<SoftmaxKernel>(axis, opset < 13, opset >= 11, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateLayerNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", -1));
  KILN_ASSIGN_OR_RETURN(float epsilon, attrs.Float("epsilon", 1e-5f));
  if (!(epsilon >= 0)) {
    return OpError("ai.kiln.LayerNormalization", "epsilon must be >= 0, got {}", epsilon);
  }
  return std::make_unique<LayerNormKernel>(axis, epsilon);
}

}  // namespace kiln::cpu
