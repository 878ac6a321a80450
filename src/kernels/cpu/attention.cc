// SPDX-License-Identifier: Apache-2.0
// ai.kiln Attention(Q, K, V, Mask?) -> Softmax(scale * Q K^T + Mask) V, FP32.
//
// NOTE on the approach: the leading dims (batch, heads) are flattened into one batch B. Two
// batched oneDNN matmuls do the products: scores [B,S,T] = scale * Q [B,S,D] x K^T (K read
// through transposed strides, the scale as the output scale), and Y [B,S,Dv] = P [B,S,T] x V.
// Between them each score row gets its mask row added (the mask broadcast by strides, 0 where a
// dim is broadcast) and is softmaxed in place by the AVX2 / scalar row kernels, rows split over
// threads. The scores live in a per-thread scratch buffer (no allocation in the steady state);
// the two primitives are cached per (B, S, T, D, Dv).

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"

namespace kiln::cpu {
namespace {

using ref::OpError;
using dt = dnnl::memory::data_type;
constexpr std::string_view kOp = "ai.kiln.Attention";

struct AttentionPlan {
  dnnl::matmul qk, pv;
  dnnl::memory::desc q_md, kt_md, s_md, v_md, y_md, qk_scratch, pv_scratch;
};

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(std::string label, std::optional<float> scale)
      : label_(std::move(label)), scale_(scale) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ref::CheckInputs(ctx, 3, kOp));
    const bool has_mask = ctx.num_inputs() > 3 && ctx.has_input(3);
    if (has_mask) KILN_RETURN_IF_ERROR(ref::CheckInput(ctx, 3, kOp));
    for (int i = 0; i < (has_mask ? 4 : 3); ++i) {
      if (ctx.input(i).dtype() != DataType::kFloat32) {
        return OpError(kOp, "input {} has dtype {}, this kernel takes FLOAT", i,
                       DataTypeName(ctx.input(i).dtype()));
      }
    }
    const Tensor& q = ctx.input(0);
    const Tensor& k = ctx.input(1);
    const Tensor& v = ctx.input(2);
    const int r = q.rank();
    if (r < 2 || k.rank() != r || v.rank() != r) {
      return OpError(kOp, "Q {}, K {} and V {} must have the same rank >= 2", q.shape().ToString(),
                     k.shape().ToString(), v.shape().ToString());
    }
    for (int d = 0; d < r - 2; ++d) {
      if (k.dim(d) != q.dim(d) || v.dim(d) != q.dim(d)) {
        return OpError(kOp, "Q {}, K {} and V {} must have equal leading dims",
                       q.shape().ToString(), k.shape().ToString(), v.shape().ToString());
      }
    }
    const int64_t s_len = q.dim(r - 2), d = q.dim(r - 1), t_len = k.dim(r - 2);
    const int64_t dv = v.dim(r - 1);
    if (k.dim(r - 1) != d || v.dim(r - 2) != t_len) {
      return OpError(kOp, "K {} must be [..., T, {}] and V {} [..., T, Dv] with K's T",
                     k.shape().ToString(), d, v.shape().ToString());
    }
    std::vector<int64_t> score_dims(q.shape().dims().begin(), q.shape().dims().end() - 1);
    score_dims.push_back(t_len);
    KILN_ASSIGN_OR_RETURN(Shape score_shape, Shape::Create(score_dims));
    ref::DimArray ms{};
    if (has_mask) {
      if (!ref::BroadcastsTo(ctx.input(3).shape(), score_shape)) {
        return OpError(kOp, "Mask {} does not broadcast to the scores' shape {}",
                       ctx.input(3).shape().ToString(), score_shape.ToString());
      }
      ms = ref::BroadcastStrides(ctx.input(3).shape(), score_shape);
    }
    std::vector<int64_t> out_dims(q.shape().dims().begin(), q.shape().dims().end() - 1);
    out_dims.push_back(dv);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    if (out.NumElements() == 0) return Status::OK();
    if (t_len == 0 || d == 0) {
      return OpError(kOp, "empty K {} or head size {} is not supported", k.shape().ToString(), d);
    }
    const int64_t batch = q.num_elements() / (s_len * d);
    const float scale = scale_.value_or(1.0f / std::sqrt(static_cast<float>(d)));
    std::shared_ptr<const AttentionPlan> plan;
    KILN_RETURN_IF_ERROR(CatchDnnl(label_, [&]() -> Status {
      const std::vector<int64_t> key = {batch, s_len, t_len, d, dv};
      KILN_ASSIGN_OR_RETURN(
          plan, cache_.Get(key, [&] { return BuildPlan(batch, s_len, t_len, d, dv, scale); }));
      return Status::OK();
    }));
    // The scale is part of the plan; a plan built for another scale cannot occur since the
    // scale depends only on D (in the key) or the attribute.
    return CatchDnnl(label_, [&]() -> Status {
      const dnnl::engine& eng = CpuEngine();
      dnnl::stream& st = ThreadStream();
      float* scores = static_cast<float*>(ThreadScratch(
          ScratchSlot::kOther, static_cast<size_t>(batch * s_len * t_len) * sizeof(float)));
      const size_t scratch_bytes =
          std::max(plan->qk_scratch.get_size(), plan->pv_scratch.get_size());
      void* scratch = ThreadScratch(ScratchSlot::kOnednnScratchpad, scratch_bytes);
      dnnl::memory s_mem(plan->s_md, eng, scores);
      plan->qk.execute(st, {{DNNL_ARG_SRC, dnnl::memory(plan->q_md, eng, q.raw_data())},
                            {DNNL_ARG_WEIGHTS, dnnl::memory(plan->kt_md, eng, k.raw_data())},
                            {DNNL_ARG_DST, s_mem},
                            {DNNL_ARG_SCRATCHPAD, dnnl::memory(plan->qk_scratch, eng, scratch)}});
      st.wait();
      const float* mask = has_mask ? ctx.input(3).data<const float>() : nullptr;
      const int64_t rows = batch * s_len;
      const int lead = r - 2;
      ParallelFor(rows, std::max<int64_t>(1, 2048 / t_len), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          float* sr = scores + row * t_len;
          if (mask != nullptr) {
            // Mask offset of (leading coords, s).
            int64_t rem = row / s_len, off = (row % s_len) * ms[static_cast<size_t>(lead)];
            for (int dd = lead - 1; dd >= 0; --dd) {
              off += (rem % score_dims[static_cast<size_t>(dd)]) * ms[static_cast<size_t>(dd)];
              rem /= score_dims[static_cast<size_t>(dd)];
            }
            const int64_t mt = ms[static_cast<size_t>(lead) + 1];
            if (mt == 1) {
              BinaryF32(BinaryKind::kAdd, sr, mask + off, sr, t_len);
            } else {
              BinaryScalarF32(BinaryKind::kAdd, sr, mask[off], false, sr, t_len);
            }
          }
          const float max = MaxF32(sr, t_len);
          const float sum = ExpShiftSumF32(sr, max, sr, t_len);
          ScaleF32(sr, 1.0f / sum, sr, t_len);
        }
      });
      plan->pv.execute(st, {{DNNL_ARG_SRC, s_mem},
                            {DNNL_ARG_WEIGHTS, dnnl::memory(plan->v_md, eng, v.raw_data())},
                            {DNNL_ARG_DST, dnnl::memory(plan->y_md, eng, y.raw_data())},
                            {DNNL_ARG_SCRATCHPAD, dnnl::memory(plan->pv_scratch, eng, scratch)}});
      st.wait();
      return Status::OK();
    });
  }

 private:
  static Result<std::shared_ptr<AttentionPlan>> BuildPlan(int64_t b, int64_t s, int64_t t,
                                                          int64_t d, int64_t dv, float scale) {
    auto plan = std::make_shared<AttentionPlan>();
    const dnnl::engine& eng = CpuEngine();
    plan->q_md = dnnl::memory::desc({b, s, d}, dt::f32, dnnl::memory::dims{s * d, d, 1});
    plan->kt_md = dnnl::memory::desc({b, d, t}, dt::f32, dnnl::memory::dims{t * d, 1, d});
    plan->s_md = dnnl::memory::desc({b, s, t}, dt::f32, dnnl::memory::dims{s * t, t, 1});
    plan->v_md = dnnl::memory::desc({b, t, dv}, dt::f32, dnnl::memory::dims{t * dv, dv, 1});
    plan->y_md = dnnl::memory::desc({b, s, dv}, dt::f32, dnnl::memory::dims{s * dv, dv, 1});
    dnnl::primitive_attr qk_attr = MakeAttr(dnnl::post_ops());
    qk_attr.set_output_scales(0, {scale});
    const dnnl::matmul::primitive_desc qk_pd(
        dnnl::matmul::desc(plan->q_md, plan->kt_md, plan->s_md), qk_attr, eng);
    const dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(plan->s_md, plan->v_md, plan->y_md),
                                             MakeAttr(dnnl::post_ops()), eng);
    plan->qk = dnnl::matmul(qk_pd);
    plan->pv = dnnl::matmul(pv_pd);
    plan->qk_scratch = qk_pd.scratchpad_desc();
    plan->pv_scratch = pv_pd.scratchpad_desc();
    return plan;
  }

  std::string label_;
  std::optional<float> scale_;
  PlanCache<AttentionPlan> cache_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateAttention(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 3));
  std::optional<float> scale;
  if (const Attribute* a = info.node().FindAttribute("scale")) {
    if (a->type != AttributeType::kFloat) {
      return OpError(kOp, "attribute 'scale' must be a FLOAT");
    }
    scale = a->f;
  }
  return std::make_unique<AttentionKernel>(NodeLabel(info), scale);
}

}  // namespace kiln::cpu
