// SPDX-License-Identifier: Apache-2.0
// Host code of ai.kiln Attention(Q, K, V, Mask?) on CUDA (op/kiln_ops.h): Y = Softmax(scale *
// Q K^T + Mask) V over the leading (batch, head) dims. Device code in reduce_attention.cu.
//
// NOTE on the approach. The shapes are checked as the reference checks them; the leading dims
// are flattened into one batch index, and the mask (broadcastable to [..., S, T]) reaches the
// device as a strided view: a view over the leading dims for the batch index plus one stride
// each for S and T (0 where it broadcasts), so no expanded mask is ever built. Head dims above
// kAttentionMaxHeadDim (D of Q and K, Dv of V) are declined when the declared shapes show them,
// and fail at run time otherwise.

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/reduce_launch.h"
#include "kernels/cuda/reduce_parts.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cuda::reduce_ops {
namespace {

using ref::OpError;
constexpr const char* kOp = "Attention";

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(std::optional<float> scale) : scale_(scale) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, i, kOp));
    const bool has_mask = ctx.num_inputs() > 3 && ctx.input(3).valid();
    if (has_mask) KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 3, kOp));
    const Tensor& q = ctx.input(0);  // [..., S, D]
    const Tensor& k = ctx.input(1);  // [..., T, D]
    const Tensor& v = ctx.input(2);  // [..., T, Dv]
    const int r = q.rank();
    if (r < 2 || k.rank() != r || v.rank() != r) {
      return OpError(kOp, "Q {}, K {}, V {} must have the same rank >= 2", q.shape().ToString(),
                     k.shape().ToString(), v.shape().ToString());
    }
    for (int i = 0; i < r - 2; ++i) {
      if (k.dim(i) != q.dim(i) || v.dim(i) != q.dim(i)) {
        return OpError(kOp, "Q {}, K {}, V {} must have equal leading dims", q.shape().ToString(),
                       k.shape().ToString(), v.shape().ToString());
      }
    }
    const int64_t s = q.dim(r - 2), d = q.dim(r - 1), t = k.dim(r - 2), dv = v.dim(r - 1);
    if (k.dim(r - 1) != d || v.dim(r - 2) != t) {
      return OpError(kOp, "K {} must be [..., T, {}] and V {} [..., T, Dv] with T = {}",
                     k.shape().ToString(), d, v.shape().ToString(), t);
    }
    for (int i = 1; i < (has_mask ? 4 : 3); ++i) {
      if (ctx.input(i).dtype() != q.dtype()) {
        return OpError(kOp, "input {} has dtype {}, Q has {}", i,
                       DataTypeName(ctx.input(i).dtype()), DataTypeName(q.dtype()));
      }
    }
    if (d > kAttentionMaxHeadDim || dv > kAttentionMaxHeadDim) {
      return OpError(kOp, "the CUDA kernel takes head dims up to {}, got D {} and Dv {}",
                     kAttentionMaxHeadDim, d, dv);
    }
    std::vector<int64_t> score_dims(q.shape().dims().begin(), q.shape().dims().end());
    score_dims[static_cast<size_t>(r - 1)] = t;
    KILN_ASSIGN_OR_RETURN(Shape score_shape, Shape::Create(score_dims));
    AttentionParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(q.dtype()));
    if (has_mask) {
      const Shape& ms = ctx.input(3).shape();
      if (!ref::BroadcastsTo(ms, score_shape)) {
        return OpError(kOp, "Mask {} does not broadcast to the scores' shape {}", ms.ToString(),
                       score_shape.ToString());
      }
      const ref::DimArray strides = ref::BroadcastStrides(ms, score_shape);
      for (int i = 0; i < r - 2; ++i) {
        if (score_dims[static_cast<size_t>(i)] == 1) continue;
        p.mask_lead.dims[p.mask_lead.rank] = score_dims[static_cast<size_t>(i)];
        p.mask_lead.strides[p.mask_lead.rank] = strides[static_cast<size_t>(i)];
        ++p.mask_lead.rank;
      }
      p.mask_stride_s = strides[static_cast<size_t>(r - 2)];
      p.mask_stride_t = strides[static_cast<size_t>(r - 1)];
    }
    std::vector<int64_t> out_dims(score_dims);
    out_dims[static_cast<size_t>(r - 1)] = dv;
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, q.dtype(), out_shape));
    if (y.num_elements() == 0) return Status::OK();
    p.batch = ref::DimProduct(q.shape().dims(), 0, static_cast<size_t>(r - 2));
    p.s = s;
    p.t = t;
    p.d = d;
    p.dv = dv;
    p.scale = scale_ ? *scale_ : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    KILN_CUDA_OK(LaunchAttention(p, q.raw_data(), k.raw_data(), v.raw_data(),
                                 has_mask ? ctx.input(3).raw_data() : nullptr, y.raw_data(),
                                 stream));
    return Status::OK();
  }

 private:
  std::optional<float> scale_;
};

// The declared last dim of input i exceeds the kernel's head dims.
bool DeclaredHeadDimTooLarge(const KernelInfo& info, int i) {
  const ValueType& type = info.input_type(i);
  return type.has_shape && !type.dims.empty() && type.dims.back().known() &&
         type.dims.back().value > kAttentionMaxHeadDim;
}

}  // namespace

bool SupportsAttention(const KernelInfo& info) {
  return !DeclaredHeadDimTooLarge(info, 0) && !DeclaredHeadDimTooLarge(info, 1) &&
         !DeclaredHeadDimTooLarge(info, 2);
}

Result<std::unique_ptr<Kernel>> CreateAttention(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateKilnAttention(info).status());
  ref::AttrReader attrs(info);
  std::optional<float> scale;
  if (attrs.Has("scale")) {
    KILN_ASSIGN_OR_RETURN(float s, attrs.Float("scale", 1.0f));
    scale = s;
  }
  return std::unique_ptr<Kernel>(std::make_unique<AttentionKernel>(scale));
}

}  // namespace kiln::cuda::reduce_ops
