// SPDX-License-Identifier: Apache-2.0
// ai.kiln ReorderToBlocked / ReorderFromBlocked (op/kiln_ops.h) on oneDNN reorders: plain
// [N, C, spatial...] <-> blocked [N, ceil(C/b), spatial..., b] (nCw8c ... nCdhw16c), FP32, rank
// 3 to 5, block 8 or 16. The optimizer's layout_selection pass puts them at the edges of blocked
// conv regions.
//
// NOTE: per shape the kernel builds one reorder primitive (PlanCache) and then only executes it.
// oneDNN writes the padding channels of a blocked destination as zeros, as the layout requires.
// Anything else (another dtype, rank or block) runs on the reference kernel.

#include "kernels/cpu/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using ref::OpError;
using dt = dnnl::memory::data_type;

struct ReorderPlan {
  dnnl::reorder prim;
  dnnl::memory::desc src_md, dst_md;
  Shape out_shape;
  // One call's memory objects (data handles set on each call).
  struct Call {
    dnnl::memory src, dst;
  };
  CallObjects<Call> calls;
};

class BlockReorderKernel final : public Kernel {
 public:
  // to_blocked: ReorderToBlocked; else ReorderFromBlocked with `channels`.
  BlockReorderKernel(std::string label, bool to_blocked, int64_t block, int64_t channels,
                     std::unique_ptr<Kernel> fallback)
      : label_(std::move(label)),
        to_blocked_(to_blocked),
        block_(block),
        channels_(channels),
        fallback_(std::move(fallback)) {}

  std::string Implementation() const override { return impls_.Joined(); }

  Status Compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return fallback_->Compute(ctx);
    const Tensor& in = ctx.input(0);
    const int plain_rank = to_blocked_ ? in.rank() : in.rank() - 1;
    const bool fast = in.dtype() == DataType::kFloat32 && in.device().is_cpu() &&
                      in.is_contiguous() && plain_rank >= 3 && plain_rank <= 5 &&
                      in.num_elements() > 0 && (block_ == 8 || block_ == 16) &&
                      (to_blocked_ || (in.dim(in.rank() - 1) == block_ &&
                                       in.dim(1) == (channels_ + block_ - 1) / block_));
    if (!fast) {  // its checks and messages apply
      impls_.Record("kiln ref");
      return fallback_->Compute(ctx);
    }
    // The logical [N, C, spatial...] dims.
    std::vector<int64_t> dims(in.shape().dims().begin(), in.shape().dims().begin() + plain_rank);
    if (!to_blocked_) dims[1] = channels_;
    std::shared_ptr<const ReorderPlan> plan;
    KILN_RETURN_IF_ERROR(CatchDnnl(label_, [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(plan, cache_.Get(dims, [&] { return BuildPlan(dims); }));
      return Status::OK();
    }));
    KILN_ASSIGN_OR_RETURN(Tensor out,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, plan->out_shape));
    return CatchDnnl(label_, [&]() -> Status {
      dnnl::stream& s = ThreadStream();
      const auto call = plan->calls.Acquire([&] {
        const dnnl::engine& eng = CpuEngine();
        auto c = std::make_unique<ReorderPlan::Call>();
        c->src = dnnl::memory(plan->src_md, eng, nullptr);
        c->dst = dnnl::memory(plan->dst_md, eng, nullptr);
        return c;
      });
      call->src.set_data_handle(const_cast<void*>(in.raw_data()));
      call->dst.set_data_handle(out.raw_data());
      plan->prim.execute(s, call->src, call->dst);
      s.wait();
      return Status::OK();
    });
  }

 private:
  Result<std::shared_ptr<ReorderPlan>> BuildPlan(const std::vector<int64_t>& dims) const {
    const int rank = static_cast<int>(dims.size());
    auto plan = std::make_shared<ReorderPlan>();
    const dnnl::memory::desc plain(ToDims(dims), dt::f32, PlainTag(rank));
    const dnnl::memory::desc blocked(ToDims(dims), dt::f32, BlockedTag(rank, block_));
    plan->src_md = to_blocked_ ? plain : blocked;
    plan->dst_md = to_blocked_ ? blocked : plain;
    std::vector<int64_t> out = dims;
    if (to_blocked_) {
      out[1] = (dims[1] + block_ - 1) / block_;
      out.push_back(block_);
    }
    KILN_ASSIGN_OR_RETURN(plan->out_shape, Shape::Create(out));
    const dnnl::engine& eng = CpuEngine();
    // oneDNN picks one reorder per format pair (no iterator); plain <-> blocked FP32 is jit.
    const dnnl::reorder::primitive_desc pd(eng, plan->src_md, eng, plan->dst_md);
    impls_.Record(OnednnImpl(pd.impl_info_str()));
    plan->prim = dnnl::reorder(pd);
    return plan;
  }

  std::string label_;
  ImplementationLog impls_;
  bool to_blocked_;
  int64_t block_, channels_;
  std::unique_ptr<Kernel> fallback_;
  PlanCache<ReorderPlan> cache_;
};

}  // namespace

int64_t PreferredChannelBlock() {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
  const auto avx2 = static_cast<unsigned>(dnnl_cpu_isa_avx2);
  if ((isa & avx512) == avx512) return 16;
  return (isa & avx2) == avx2 ? 8 : 0;
}

Result<std::unique_ptr<Kernel>> CreateReorderToBlocked(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, ref::CreateKilnReorderToBlocked(info));
  KILN_ASSIGN_OR_RETURN(int64_t block, ref::AttrReader(info).Int(kAttrBlock, 0));
  return std::unique_ptr<Kernel>(std::make_unique<BlockReorderKernel>(
      NodeLabel(info), /*to_blocked=*/true, block, 0, std::move(fallback)));
}

Result<std::unique_ptr<Kernel>> CreateReorderFromBlocked(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, ref::CreateKilnReorderFromBlocked(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t block, attrs.Int(kAttrBlock, 0));
  KILN_ASSIGN_OR_RETURN(int64_t channels, attrs.Int(kAttrChannels, 0));
  return std::unique_ptr<Kernel>(std::make_unique<BlockReorderKernel>(
      NodeLabel(info), /*to_blocked=*/false, block, channels, std::move(fallback)));
}

}  // namespace kiln::cpu
