// SPDX-License-Identifier: Apache-2.0
// Host code of the reduce group's pools on CUDA: MaxPool (without its Indices output),
// AveragePool, GlobalAveragePool and GlobalMaxPool, NCHW. Device code in reduce_pool.cu (the
// windowed pools) and reduce.cu (the global pools are reductions over the spatial dims).
//
// NOTE on the approach. The window attributes are read and checked as the reference reads them
// (ref/spatial.h: ReadWindowAttrs in the factory, ResolveWindow at run time), so both agree on
// the output size for every auto_pad, ceil_mode, pads, strides and dilations; 1-D to 3-D pools
// run here (more spatial dims are declined). The reference fails a window that covers no input
// element (max; average without count_include_pad) or no padded-input element (average with
// count_include_pad); that depends on the geometry only, so the host finds such windows axis by
// axis before launching and reports the first, as the reference does.

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/reduce_launch.h"
#include "kernels/cuda/reduce_parts.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"

namespace kiln::cuda::reduce_ops {
namespace {

using ref::OpError;

// The flat index of the first output position whose window has no tap to take (no tap inside
// the input; with count_include_pad, none inside the padded input), or -1 when every window has
// one. A window is empty exactly when its coordinate on some axis is.
int64_t FirstEmptyWindow(const ref::WindowGeometry& g, bool padded) {
  int64_t first = -1, stride = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    const size_t du = static_cast<size_t>(d);
    const int64_t lo = padded ? -g.pad_begin[du] : 0;
    const int64_t hi = padded ? g.in[du] + g.pad_end[du] : g.in[du];
    for (int64_t o = 0; o < g.out[du]; ++o) {
      const int64_t start = o * g.stride[du] - g.pad_begin[du];
      bool any = false;
      for (int64_t k = 0; k < g.kernel[du] && !any; ++k) {
        const int64_t c = start + k * g.dilation[du];
        any = c >= lo && c < hi;
      }
      if (!any) {
        if (first < 0 || o * stride < first) first = o * stride;
        break;
      }
    }
    stride *= g.out[du];
  }
  return g.out_size == 0 ? -1 : first;
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(std::string op, bool is_max, ref::WindowAttrs window, bool count_include_pad)
      : op_(std::move(op)),
        is_max_(is_max),
        window_(std::move(window)),
        count_include_pad_(count_include_pad) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 0, op_));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const size_t spatial = window_.kernel_shape.size();
    if (x.rank() != static_cast<int>(spatial) + 2) {
      return OpError(op_,
                     "kernel_shape has {} dims, so X must have rank {} ([N, C, spatial...]), "
                     "got {}",
                     spatial, spatial + 2, x.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(
        ref::WindowGeometry g,
        ref::ResolveWindow(op_, window_, x.shape().dims().subspan(2), window_.kernel_shape));
    const int64_t empty = FirstEmptyWindow(g, !is_max_ && count_include_pad_);
    if (empty >= 0) {
      return OpError(op_,
                     "the window at output position {} covers no input element "
                     "(pads or dilations too large for input {})",
                     empty, x.shape().ToString());
    }
    std::vector<int64_t> out_dims = {x.dim(0), x.dim(1)};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    if (y.num_elements() == 0) return Status::OK();
    PoolParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
    p.is_max = is_max_;
    p.count_include_pad = count_include_pad_;
    p.planes = x.dim(0) * x.dim(1);
    const int offset = kPoolRank - g.rank;  // leading size-1 dims
    for (int d = 0; d < g.rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      p.in[offset + d] = g.in[du];
      p.kernel[offset + d] = g.kernel[du];
      p.stride[offset + d] = g.stride[du];
      p.dilation[offset + d] = g.dilation[du];
      p.pad_begin[offset + d] = g.pad_begin[du];
      p.pad_end[offset + d] = g.pad_end[du];
      p.out[offset + d] = g.out[du];
    }
    KILN_CUDA_OK(LaunchPool(p, x.raw_data(), y.raw_data(), stream));
    return Status::OK();
  }

 private:
  std::string op_;
  bool is_max_;
  ref::WindowAttrs window_;
  bool count_include_pad_;
};

class GlobalPoolKernel final : public Kernel {
 public:
  explicit GlobalPoolKernel(bool is_max) : is_max_(is_max) {}

  Status Compute(KernelContext& ctx) const override {
    const char* op = is_max_ ? "GlobalMaxPool" : "GlobalAveragePool";
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 0, op));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const int min_rank = is_max_ ? 2 : 3;
    if (x.rank() < min_rank) {
      return OpError(op, "X must have rank >= {} ([N, C, spatial...]), got {}", min_rank,
                     x.shape().ToString());
    }
    const int64_t planes = x.dim(0) * x.dim(1);
    const int64_t spatial = ref::DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    if (spatial == 0 && planes > 0) {
      return OpError(op, "X {} has no spatial elements to pool", x.shape().ToString());
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(x.rank()), 1);
    out_dims[0] = x.dim(0);
    out_dims[1] = x.dim(1);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    std::vector<bool> reduced(static_cast<size_t>(x.rank()), true);
    reduced[0] = reduced[1] = false;
    return EnqueueReduce(is_max_ ? ReduceOp::kMax : ReduceOp::kMean, x, reduced, y, stream);
  }

 private:
  bool is_max_;
};

Result<std::unique_ptr<Kernel>> CreateWindowPool(const KernelInfo& info, bool is_max) {
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(ref::WindowAttrs window, ref::ReadWindowAttrs(attrs, true));
  KILN_ASSIGN_OR_RETURN(window.ceil_mode, attrs.Bool("ceil_mode", false));
  bool count_include_pad = false;
  if (!is_max) {
    KILN_ASSIGN_OR_RETURN(count_include_pad, attrs.Bool("count_include_pad", false));
  }
  if (!SupportsPool(info)) {
    return OpError(info.op_type(),
                   "the CUDA kernel takes 1 to {} spatial dims and no Indices output", kPoolRank);
  }
  return std::unique_ptr<Kernel>(
      std::make_unique<PoolKernel>(info.op_type(), is_max, std::move(window), count_include_pad));
}

}  // namespace

bool SupportsPool(const KernelInfo& info) {
  // MaxPool's Indices output stays with the reference kernel.
  for (int i = 1; i < info.num_outputs(); ++i) {
    if (info.has_output(i)) return false;
  }
  const size_t spatial = info.node().GetInts("kernel_shape").size();
  return spatial <= static_cast<size_t>(kPoolRank);
}

Result<std::unique_ptr<Kernel>> CreateMaxPool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateMaxPool(info).status());
  return CreateWindowPool(info, /*is_max=*/true);
}

Result<std::unique_ptr<Kernel>> CreateAveragePool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateAveragePool(info).status());
  return CreateWindowPool(info, /*is_max=*/false);
}

Result<std::unique_ptr<Kernel>> CreateGlobalAveragePool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateGlobalAveragePool(info).status());
  return std::unique_ptr<Kernel>(std::make_unique<GlobalPoolKernel>(/*is_max=*/false));
}

Result<std::unique_ptr<Kernel>> CreateGlobalMaxPool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateGlobalMaxPool(info).status());
  return std::unique_ptr<Kernel>(std::make_unique<GlobalPoolKernel>(/*is_max=*/true));
}

}  // namespace kiln::cuda::reduce_ops
