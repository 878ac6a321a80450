// SPDX-License-Identifier: Apache-2.0
// MaxPool and AveragePool on oneDNN (pooling_v2: dilations; ceil_mode; count_include_pad), and
// GlobalAveragePool / GlobalMaxPool as own row reductions (AVX2 with runtime dispatch), FP32.
//
// NOTE on ceil_mode: the reference's window resolution (ref/spatial.h) gives the output size;
// oneDNN wants padding that produces exactly that size, so the end padding is grown to
// (out - 1) * stride + extent - in - pad_begin. Max ignores padding and average without
// count_include_pad excludes it, so that is exact; average *with* count_include_pad would count
// the grown padding in its divisor, where ONNX counts only the declared pads: that one case runs
// on the reference kernel, as does MaxPool with the Indices output (declined at load), and any
// input the fast path does not take (other dtypes, rank outside 3..5).
//
// ai.kiln BlockedPool (op/kiln_ops.h) runs the same kernels on blocked tensors: MaxPool and
// AveragePool hand oneDNN nChw8c / nChw16c memory of the logical [N, C, H, W] dims (its blocked
// pooling kernels; it writes the padding channels as zeros), the global pools reduce each
// channel block's b lanes at once over H*W and write zeros to the padding lanes.

#include <fmt/format.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using dt = dnnl::memory::data_type;

struct PoolPlan {
  dnnl::pooling_v2_forward prim;
  dnnl::memory::desc src_md, dst_md, scratch_md;
  Shape out_shape;
  // One call's memory objects (data handles set on each call) and its arguments.
  struct Call {
    dnnl::memory src, dst, scratch;
    std::unordered_map<int, dnnl::memory> args;
  };
  CallObjects<Call> calls;
};

bool IsFastTensor(const Tensor& t) {
  return t.dtype() == DataType::kFloat32 && t.device().is_cpu() && t.is_contiguous() &&
         t.rank() >= 3 && t.rank() <= 5 && t.num_elements() > 0;
}

// Blocked operands (ai.kiln BlockedPool): the block and the logical channel count; block 0 for
// the plain ONNX ops.
struct PoolLayout {
  int64_t block = 0;
  int64_t channels = 0;
};

// Whether `x` is the blocked form ([N, ceil(C/b), spatial..., b], rank 4 to 6) of `layout`'s C.
bool IsBlockedOf(const Tensor& x, const PoolLayout& layout) {
  return x.rank() >= 4 && x.rank() <= 6 && x.dim(x.rank() - 1) == layout.block &&
         x.dim(1) == (layout.channels + layout.block - 1) / layout.block;
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(std::string label, bool max, bool count_include_pad, ref::WindowAttrs window,
             std::unique_ptr<Kernel> reference, PoolLayout layout = {})
      : label_(std::move(label)),
        max_(max),
        count_include_pad_(count_include_pad),
        window_(std::move(window)),
        reference_(std::move(reference)),
        layout_(layout) {}

  std::string Implementation() const override { return impls_.Joined(); }

  Status Compute(KernelContext& ctx) const override {
    const bool blocked = layout_.block > 0;
    if (ctx.num_inputs() < 1 || !ctx.has_input(0) || ctx.num_outputs() > 1 ||
        !(blocked ? ctx.input(0).dtype() == DataType::kFloat32 && ctx.input(0).device().is_cpu() &&
                        ctx.input(0).is_contiguous() && ctx.input(0).num_elements() > 0 &&
                        IsBlockedOf(ctx.input(0), layout_)
                  : IsFastTensor(ctx.input(0)))) {
      impls_.Record("kiln ref");
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> key(x.shape().dims().begin(), x.shape().dims().end());
    std::shared_ptr<const PoolPlan> plan;
    bool declined = false;
    Status built = CatchDnnl(label_, [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(plan, cache_.Get(key, [&]() -> Result<std::shared_ptr<PoolPlan>> {
        return BuildPlan(x, declined);
      }));
      return Status::OK();
    });
    if (!built.ok() || declined || plan == nullptr) {
      impls_.Record("kiln ref");
      return reference_->Compute(ctx);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, plan->out_shape));
    return CatchDnnl(label_, [&]() -> Status {
      dnnl::stream& s = ThreadStream();
      const auto call = plan->calls.Acquire([&] {
        const dnnl::engine& eng = CpuEngine();
        auto c = std::make_unique<PoolPlan::Call>();
        c->src = dnnl::memory(plan->src_md, eng, nullptr);
        c->dst = dnnl::memory(plan->dst_md, eng, nullptr);
        c->scratch = dnnl::memory(plan->scratch_md, eng, nullptr);
        c->args = {
            {DNNL_ARG_SRC, c->src}, {DNNL_ARG_DST, c->dst}, {DNNL_ARG_SCRATCHPAD, c->scratch}};
        return c;
      });
      call->src.set_data_handle(x.raw_data());
      call->dst.set_data_handle(y.raw_data());
      call->scratch.set_data_handle(
          ThreadScratch(ScratchSlot::kOnednnScratchpad, plan->scratch_md.get_size()));
      plan->prim.execute(s, call->args);
      s.wait();
      ZeroPaddingLanes(y);
      return Status::OK();
    });
  }

 private:
  // A plan, or an error (the reference then runs and reports it); `declined` for the one
  // combination oneDNN computes differently (see the NOTE).
  Result<std::shared_ptr<PoolPlan>> BuildPlan(const Tensor& x, bool& declined) const {
    const bool blocked = layout_.block > 0;
    // The logical [N, C, spatial...] dims of X.
    std::vector<int64_t> x_dims(x.shape().dims().begin(),
                                x.shape().dims().end() - (blocked ? 1 : 0));
    if (blocked) x_dims[1] = layout_.channels;
    KILN_ASSIGN_OR_RETURN(
        ref::WindowGeometry g,
        ref::ResolveWindow(max_ ? "MaxPool" : "AveragePool", window_,
                           std::span<const int64_t>(x_dims).subspan(2), window_.kernel_shape));
    dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
    std::vector<int64_t> out_dims = {x_dims[0], x_dims[1]};
    for (int d = 0; d < g.rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      const int64_t extent = (g.kernel[du] - 1) * g.dilation[du] + 1;
      const int64_t end = (g.out[du] - 1) * g.stride[du] + extent - g.in[du] - g.pad_begin[du];
      if (!max_ && count_include_pad_ && end != g.pad_end[du]) declined = true;
      // Windows that might hold no input tap are an error the reference reports.
      if (g.pad_begin[du] >= extent || end >= extent) declined = true;
      if (g.dilation[du] > 1 && (g.pad_begin[du] > 0 || end > 0)) declined = true;
      strides.push_back(g.stride[du]);
      kernel.push_back(g.kernel[du]);
      dilation.push_back(g.dilation[du] - 1);
      pad_l.push_back(g.pad_begin[du]);
      pad_r.push_back(end);
      out_dims.push_back(g.out[du]);
    }
    if (declined) return Status::Unimplemented("declined");
    auto plan = std::make_shared<PoolPlan>();
    const int rank = static_cast<int>(x_dims.size());
    const dnnl::memory::format_tag tag = blocked ? BlockedTag(rank, layout_.block) : PlainTag(rank);
    if (tag == dnnl::memory::format_tag::undef) {
      declined = true;
      return Status::Unimplemented("declined");
    }
    plan->src_md = dnnl::memory::desc(ToDims(x_dims), dt::f32, tag);
    plan->dst_md = dnnl::memory::desc(ToDims(out_dims), dt::f32, tag);
    if (blocked) {  // the stored shape: [N, ceil(C/b), spatial..., b]
      out_dims[1] = x.dim(1);
      out_dims.push_back(layout_.block);
    }
    KILN_ASSIGN_OR_RETURN(plan->out_shape, Shape::Create(out_dims));
    const dnnl::algorithm alg =
        max_ ? dnnl::algorithm::pooling_max
             : (count_include_pad_ ? dnnl::algorithm::pooling_avg_include_padding
                                   : dnnl::algorithm::pooling_avg_exclude_padding);
    const dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, plan->src_md,
                                              plan->dst_md, strides, kernel, dilation, pad_l,
                                              pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, MakeAttr(dnnl::post_ops()), CpuEngine());
    if (!SkipReferenceImpls(pd)) {  // only oneDNN's reference pooling: kiln's runs instead
      declined = true;
      return Status::Unimplemented("declined");
    }
    impls_.Record(OnednnImpl(pd.impl_info_str()));
    plan->prim = dnnl::pooling_v2_forward(pd);
    plan->scratch_md = pd.scratchpad_desc();
    return plan;
  }

  // oneDNN pools the padding lanes of a blocked source into the destination's padding lanes;
  // BlockedPool writes zeros there (kiln_ops.h), so they are cleared: the last channel block's
  // lanes C % b .. b - 1 at every (n, position).
  void ZeroPaddingLanes(Tensor& y) const {
    const int64_t b = layout_.block;
    if (b == 0 || layout_.channels % b == 0) return;
    const int64_t blocks = y.dim(1);
    const int64_t positions = y.num_elements() / (y.dim(0) * blocks * b);
    const int64_t first = layout_.channels % b;
    float* py = y.data<float>();
    for (int64_t n = 0; n < y.dim(0); ++n) {
      float* last = py + ((n * blocks + blocks - 1) * positions) * b;
      for (int64_t p = 0; p < positions; ++p) {
        for (int64_t l = first; l < b; ++l) last[p * b + l] = 0.0f;
      }
    }
  }

  std::string label_;
  ImplementationLog impls_;
  bool max_;
  bool count_include_pad_;
  ref::WindowAttrs window_;
  std::unique_ptr<Kernel> reference_;
  PoolLayout layout_;
  PlanCache<PoolPlan> cache_;
};

// GlobalAveragePool / GlobalMaxPool: one reduction per (n, c) row of H*W... elements.
class GlobalPoolKernel final : public Kernel {
 public:
  GlobalPoolKernel(bool max, std::unique_ptr<Kernel> reference, PoolLayout layout = {})
      : max_(max), reference_(std::move(reference)), layout_(layout) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return reference_->Compute(ctx);
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kFloat32 || !x.device().is_cpu() || !x.is_contiguous() ||
        x.rank() < 3 || x.num_elements() == 0) {
      return reference_->Compute(ctx);
    }
    if (layout_.block > 0) {
      if (!IsBlockedOf(x, layout_)) return reference_->Compute(ctx);
      return ComputeBlocked(ctx, x);
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(x.rank()), 1);
    out_dims[0] = x.dim(0);
    out_dims[1] = x.dim(1);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const int64_t rows = x.dim(0) * x.dim(1);
    const int64_t len = x.num_elements() / rows;
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    const float inv = 1.0f / static_cast<float>(len);
    ParallelFor(rows, std::max<int64_t>(1, 16384 / len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        py[r] = max_ ? MaxF32(px + r * len, len) : SumF32(px + r * len, len) * inv;
      }
    });
    return Status::OK();
  }

 private:
  // X [N, Cb, spatial..., b] -> Y [N, Cb, 1..., b]: per (n, channel block) the b lanes reduced
  // over the spatial positions at once (the inner loop over b lanes vectorizes); the lanes past
  // the real channels are written as zeros.
  Status ComputeBlocked(KernelContext& ctx, const Tensor& x) const {
    const int64_t b = layout_.block;
    std::vector<int64_t> out_dims(static_cast<size_t>(x.rank()), 1);
    out_dims[0] = x.dim(0);
    out_dims[1] = x.dim(1);
    out_dims.back() = b;
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const int64_t blocks = x.dim(1);
    const int64_t rows = x.dim(0) * blocks;
    const int64_t spatial = x.num_elements() / (rows * b);
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    const float inv = 1.0f / static_cast<float>(spatial);
    const int64_t channels = layout_.channels;
    ParallelFor(
        rows, std::max<int64_t>(1, 4096 / (spatial * b) + 1), [&](int64_t begin, int64_t end) {
          float acc[64];
          for (int64_t r = begin; r < end; ++r) {
            // NaN propagates, as in the reference (LanesReduceF32's max rule).
            LanesReduceF32(max_, px + r * spatial * b, spatial, b, acc);
            const int64_t first_channel = (r % blocks) * b;
            for (int64_t l = 0; l < b; ++l) {
              py[r * b + l] = first_channel + l >= channels ? 0.0f : (max_ ? acc[l] : acc[l] * inv);
            }
          }
        });
    return Status::OK();
  }

  bool max_;
  std::unique_ptr<Kernel> reference_;
  PoolLayout layout_;
};

}  // namespace

bool SupportsPool(const KernelInfo& info) {
  // MaxPool's Indices output stays with the reference kernel.
  for (int i = 1; i < info.num_outputs(); ++i) {
    if (info.has_output(i)) return false;
  }
  return true;
}

Result<std::unique_ptr<Kernel>> CreateMaxPool(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateMaxPool(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(ref::WindowAttrs window, ref::ReadWindowAttrs(attrs, true));
  KILN_ASSIGN_OR_RETURN(window.ceil_mode, attrs.Bool("ceil_mode", false));
  return std::make_unique<PoolKernel>(NodeLabel(info), true, false, std::move(window),
                                      std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateAveragePool(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateAveragePool(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(ref::WindowAttrs window, ref::ReadWindowAttrs(attrs, true));
  KILN_ASSIGN_OR_RETURN(window.ceil_mode, attrs.Bool("ceil_mode", false));
  KILN_ASSIGN_OR_RETURN(bool include_pad, attrs.Bool("count_include_pad", false));
  return std::make_unique<PoolKernel>(NodeLabel(info), false, include_pad, std::move(window),
                                      std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateGlobalAveragePool(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateGlobalAveragePool(info));
  return std::make_unique<GlobalPoolKernel>(false, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateGlobalMaxPool(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateGlobalMaxPool(info));
  return std::make_unique<GlobalPoolKernel>(true, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateBlockedPool(const KernelInfo& info) {
  // The reference checks the attributes and runs whatever the fast paths decline.
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateKilnBlockedPool(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::string pool, attrs.String(kAttrPool, ""));
  PoolLayout layout;
  KILN_ASSIGN_OR_RETURN(layout.block, attrs.Int(kAttrBlock, 0));
  KILN_ASSIGN_OR_RETURN(layout.channels, attrs.Int(kAttrChannels, 0));
  if (pool == "GlobalAveragePool" || pool == "GlobalMaxPool") {
    return std::make_unique<GlobalPoolKernel>(pool == "GlobalMaxPool", std::move(reference),
                                              layout);
  }
  const bool max = pool == "MaxPool";
  KILN_ASSIGN_OR_RETURN(ref::WindowAttrs window, ref::ReadWindowAttrs(attrs, true));
  KILN_ASSIGN_OR_RETURN(window.ceil_mode, attrs.Bool("ceil_mode", false));
  KILN_ASSIGN_OR_RETURN(bool include_pad, attrs.Bool("count_include_pad", false));
  return std::make_unique<PoolKernel>(NodeLabel(info), max, !max && include_pad, std::move(window),
                                      std::move(reference), layout);
}

}  // namespace kiln::cpu
