// SPDX-License-Identifier: Apache-2.0
// ReduceSum / ReduceMean / ReduceMax over trailing axes (FP32): rows of the product of the
// reduced dims, one AVX2 / scalar row reduction each, rows split over threads. Any other axes
// set (a leading or interior axis kept after a reduced one), empty inputs, noop_with_empty_axes
// and non-FLOAT inputs run on the reference kernel, which also reports bad axes.

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cpu {
namespace {

enum class ReduceKind { kSum, kMean, kMax };

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(ReduceKind kind, std::vector<int64_t> axes, bool axes_from_input, bool keepdims,
               bool noop_with_empty_axes, std::unique_ptr<Kernel> reference)
      : kind_(kind),
        axes_(std::move(axes)),
        axes_from_input_(axes_from_input),
        keepdims_(keepdims),
        noop_with_empty_axes_(noop_with_empty_axes),
        reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return reference_->Compute(ctx);
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kFloat32 || !x.device().is_cpu() || !x.is_contiguous() ||
        x.num_elements() == 0 || x.rank() == 0) {
      return reference_->Compute(ctx);
    }
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_ && ctx.num_inputs() > 1 && ctx.has_input(1)) {
      const Tensor& a = ctx.input(1);
      if (a.dtype() != DataType::kInt64 || a.rank() > 1 || !a.device().is_cpu()) {
        return reference_->Compute(ctx);
      }
      axes.assign(a.data<const int64_t>(), a.data<const int64_t>() + a.num_elements());
    }
    if (axes.empty() && noop_with_empty_axes_) return reference_->Compute(ctx);
    const int rank = x.rank();
    int first = 0;  // reduced axes are [first, rank)
    if (!axes.empty()) {
      std::vector<bool> reduced(static_cast<size_t>(rank), false);
      for (int64_t a : axes) {
        if (a < -rank || a >= rank) return reference_->Compute(ctx);
        reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
      }
      first = rank;
      while (first > 0 && reduced[static_cast<size_t>(first - 1)]) --first;
      for (int d = 0; d < first; ++d) {
        if (reduced[static_cast<size_t>(d)]) return reference_->Compute(ctx);  // not trailing
      }
    }
    std::vector<int64_t> out_dims;
    int64_t rows = 1, len = 1;
    for (int d = 0; d < rank; ++d) {
      if (d < first) {
        out_dims.push_back(x.dim(d));
        rows *= x.dim(d);
      } else {
        if (keepdims_) out_dims.push_back(1);
        len *= x.dim(d);
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    const float inv = 1.0f / static_cast<float>(len);
    ParallelFor(rows, std::max<int64_t>(1, 16384 / len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* row = px + r * len;
        switch (kind_) {
          case ReduceKind::kSum:
            py[r] = SumF32(row, len);
            break;
          case ReduceKind::kMean:
            py[r] = SumF32(row, len) * inv;
            break;
          case ReduceKind::kMax:
            py[r] = MaxF32(row, len);
            break;
        }
      }
    });
    return Status::OK();
  }

 private:
  ReduceKind kind_;
  std::vector<int64_t> axes_;
  bool axes_from_input_;
  bool keepdims_;
  bool noop_with_empty_axes_;
  std::unique_ptr<Kernel> reference_;
};

Result<std::unique_ptr<Kernel>> Make(
    const KernelInfo& info, ReduceKind kind,
    Result<std::unique_ptr<Kernel>> (*ref_factory)(const KernelInfo&)) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref_factory(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, attrs.Ints("axes"));
  KILN_ASSIGN_OR_RETURN(bool keepdims, attrs.Bool("keepdims", true));
  const bool axes_from_input = kind == ReduceKind::kSum && info.opset() >= 13;
  bool noop = false;
  if (axes_from_input) {
    KILN_ASSIGN_OR_RETURN(noop, attrs.Bool("noop_with_empty_axes", false));
  }
  return std::make_unique<ReduceKernel>(kind, std::move(axes), axes_from_input, keepdims, noop,
                                        std::move(reference));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateReduceSum(const KernelInfo& info) {
  return Make(info, ReduceKind::kSum, &ref::CreateReduceSum);
}
Result<std::unique_ptr<Kernel>> CreateReduceMean(const KernelInfo& info) {
  return Make(info, ReduceKind::kMean, &ref::CreateReduceMean);
}
Result<std::unique_ptr<Kernel>> CreateReduceMax(const KernelInfo& info) {
  return Make(info, ReduceKind::kMax, &ref::CreateReduceMax);
}

}  // namespace kiln::cpu
