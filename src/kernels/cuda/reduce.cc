// SPDX-License-Identifier: Apache-2.0
// The reduce group of CUDA kernels: its table (ReduceKernelDefs, the group's one inventory), the
// reductions ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and ArgMax / ArgMin. Normalizations, pools and
// attention have their host code in reduce_norm.cc, reduce_pool.cc and reduce_attention.cc;
// the device code is in reduce*.cu (reduce_launch.h).
//
// NOTE on the approach. Each row of the table spans the opsets of the reference kernel's rows for
// the op (7-17 for most) and its factory applies the opset's rules the way the reference factory
// does (it builds the reference kernel to validate the node, so both report the same errors).
// A reduction needs its axes on the host: from the `axes` attribute or, for ReduceSum from
// opset 13, from a constant input 1 (`supports` declines a node whose axes input is computed,
// which then stays on the CPU). Compute marks the reduced dims, drops size-1 dims, merges
// neighbouring dims that are both kept or both reduced and hands the device the two strided views
// (kept, reduced); reduce.cu picks a row or a column kernel from where the innermost dim lies.
// ArgMax / ArgMin view the input as [outer, len, inner]. Integer inputs (INT32 / INT64) are taken
// by ReduceSum (wrapping), ReduceMax and ReduceMin only.

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/reduce_launch.h"
#include "kernels/cuda/reduce_parts.h"
#include "kernels/cuda/tables.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nn_common.h"

namespace kiln::cuda {
namespace reduce_ops {

using ref::OpError;

Status CheckDeviceInput(const KernelContext& ctx, int i, std::string_view op) {
  if (i >= ctx.num_inputs() || !ctx.input(i).valid()) {
    return OpError(op, "required input {} is missing", i);
  }
  if (!ctx.input(i).is_contiguous()) return OpError(op, "input {} is not contiguous", i);
  return Status::OK();
}

Result<StridedView> BroadcastViewOver(const Shape& in, const Shape& out) {
  if (out.rank() > kMaxRank) {
    return Status::InvalidArgument(
        fmt::format("rank {} is more than the CUDA kernels take ({})", out.rank(), kMaxRank));
  }
  // Strides of `in` over out's dims (0 where broadcast), then size-1 dims dropped and runs where
  // the stride pattern stays contiguous (or stays 0) merged.
  const ref::DimArray strides = ref::BroadcastStrides(in, out);
  StridedView v;
  for (int d = 0; d < out.rank(); ++d) {
    const int64_t dim = out.dim(d), stride = strides[static_cast<size_t>(d)];
    if (dim == 1) continue;
    if (v.rank > 0) {
      int64_t& prev_dim = v.dims[v.rank - 1];
      int64_t& prev_stride = v.strides[v.rank - 1];
      if ((prev_stride == 0 && stride == 0) || (stride != 0 && prev_stride == stride * dim)) {
        prev_dim *= dim;
        prev_stride = stride;
        continue;
      }
    }
    v.dims[v.rank] = dim;
    v.strides[v.rank] = stride;
    ++v.rank;
  }
  return v;
}

Status EnqueueReduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduced, Tensor& y,
                     cudaStream_t stream) {
  if (y.num_elements() == 0) return Status::OK();
  ReduceParams p;
  KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
  p.op = op;
  p.outputs = y.num_elements();
  p.count = 1;
  const int rank = x.rank();
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = stride;
    stride *= x.dim(d);
  }
  // Runs of neighbouring dims (size-1 dims dropped) that are all kept or all reduced: each is one
  // dim of the kept or of the reduced view.
  bool last_reduced = false;
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = x.dim(d);
    const bool r = reduced[static_cast<size_t>(d)];
    if (r) p.count *= dim;
    if (dim == 1) continue;
    StridedView& v = r ? p.reduced : p.kept;
    if (v.rank > 0 && last_reduced == r) {
      v.dims[v.rank - 1] *= dim;
      v.strides[v.rank - 1] = strides[static_cast<size_t>(d)];
    } else {
      v.dims[v.rank] = dim;
      v.strides[v.rank] = strides[static_cast<size_t>(d)];
      ++v.rank;
    }
    last_reduced = r;
  }
  KILN_CUDA_OK(LaunchReduce(p, x.raw_data(), y.raw_data(), stream));
  return Status::OK();
}

namespace {

bool IsIntegerReduceType(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(std::string op, ReduceOp kind, std::vector<int64_t> axes, bool keepdims,
               bool noop_with_empty_axes, bool allow_negative)
      : op_(std::move(op)),
        kind_(kind),
        axes_(std::move(axes)),
        keepdims_(keepdims),
        noop_with_empty_axes_(noop_with_empty_axes),
        allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 0, op_));
    const Tensor& x = ctx.input(0);
    if (IsIntegerReduceType(x.dtype()) && kind_ != ReduceOp::kSum && kind_ != ReduceOp::kMax &&
        kind_ != ReduceOp::kMin) {
      return OpError(op_, "the CUDA kernel takes {} for ReduceSum, ReduceMax and ReduceMin only",
                     DataTypeName(x.dtype()));
    }
    if (axes_.empty() && noop_with_empty_axes_) {
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
      if (x.size_bytes() > 0) {
        KILN_CUDA_OK(cudaMemcpyAsync(y.raw_data(), x.raw_data(), x.size_bytes(),
                                     cudaMemcpyDeviceToDevice, stream));
      }
      return Status::OK();
    }
    const int rank = x.rank();
    std::vector<bool> reduced(static_cast<size_t>(rank), true);
    if (!axes_.empty()) {
      KILN_ASSIGN_OR_RETURN(reduced, ref::AxesMask(op_, axes_, rank, allow_negative_));
    }
    std::vector<int64_t> out_dims;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[static_cast<size_t>(d)]) {
        out_dims.push_back(x.dim(d));
      } else if (keepdims_) {
        out_dims.push_back(1);
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out_shape));
    return EnqueueReduce(kind_, x, reduced, y, stream);
  }

 private:
  std::string op_;
  ReduceOp kind_;
  std::vector<int64_t> axes_;  // from the attribute or the constant axes input
  bool keepdims_;
  bool noop_with_empty_axes_;
  bool allow_negative_;
};

Result<std::unique_ptr<Kernel>> CreateReduce(const KernelInfo& info, ReduceOp kind,
                                             KernelFactory reference) {
  KILN_RETURN_IF_ERROR(reference(info).status());  // the reference's attribute checks
  const std::string& op = info.op_type();
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, attrs.Ints("axes"));
  KILN_ASSIGN_OR_RETURN(bool keepdims, attrs.Bool("keepdims", true));
  KILN_ASSIGN_OR_RETURN(bool noop, attrs.Bool("noop_with_empty_axes", false));
  const bool axes_from_input = kind == ReduceOp::kSum && info.opset() >= 13;
  if (axes_from_input && info.has_input(1)) {
    const OwnedTensor* c = info.constant_input(1);
    if (c == nullptr) {
      return OpError(op, "the CUDA kernel takes the axes input only as a constant");
    }
    KILN_ASSIGN_OR_RETURN(axes, ref::ReadInt64List(op, "input 'axes'", c->view()));
  }
  return std::unique_ptr<Kernel>(std::make_unique<ReduceKernel>(
      op, kind, std::move(axes), keepdims, noop, /*allow_negative=*/info.opset() >= 11));
}

// ReduceSum from opset 13 takes its axes from input 1: only a constant one.
bool SupportsReduceSum(const KernelInfo& info) {
  return !(info.opset() >= 13 && info.has_input(1) && info.constant_input(1) == nullptr);
}

#define KILN_CUDA_REDUCE_FACTORY(name, kind)                             \
  Result<std::unique_ptr<Kernel>> Create##name(const KernelInfo& info) { \
    return CreateReduce(info, ReduceOp::kind, &ref::Create##name);       \
  }
KILN_CUDA_REDUCE_FACTORY(ReduceSum, kSum)
KILN_CUDA_REDUCE_FACTORY(ReduceMean, kMean)
KILN_CUDA_REDUCE_FACTORY(ReduceMax, kMax)
KILN_CUDA_REDUCE_FACTORY(ReduceMin, kMin)
KILN_CUDA_REDUCE_FACTORY(ReduceProd, kProd)
KILN_CUDA_REDUCE_FACTORY(ReduceL1, kL1)
KILN_CUDA_REDUCE_FACTORY(ReduceL2, kL2)
KILN_CUDA_REDUCE_FACTORY(ReduceLogSum, kLogSum)
KILN_CUDA_REDUCE_FACTORY(ReduceLogSumExp, kLogSumExp)
KILN_CUDA_REDUCE_FACTORY(ReduceSumSquare, kSumSquare)
#undef KILN_CUDA_REDUCE_FACTORY

class ArgKernel final : public Kernel {
 public:
  ArgKernel(std::string op, bool is_max, int64_t axis, bool keepdims, bool select_last,
            bool allow_negative)
      : op_(std::move(op)),
        is_max_(is_max),
        axis_(axis),
        keepdims_(keepdims),
        select_last_(select_last),
        allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 0, op_));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError(op_, "input must have rank >= 1, got a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, ref::NormalizeAxis(op_, axis_, x.rank(), allow_negative_));
    const std::span<const int64_t> dims = x.shape().dims();
    const size_t ax = static_cast<size_t>(axis);
    ArgParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
    p.is_max = is_max_;
    p.select_last = select_last_;
    p.outer = ref::DimProduct(dims, 0, ax);
    p.len = dims[ax];
    p.inner = ref::DimProduct(dims, ax + 1, dims.size());
    if (p.len == 0 && p.outer * p.inner > 0) {
      return OpError(op_, "axis {} of {} is empty: there is no element to select", axis,
                     x.shape().ToString());
    }
    std::vector<int64_t> out_dims(dims.begin(), dims.end());
    if (keepdims_) {
      out_dims[ax] = 1;
    } else {
      out_dims.erase(out_dims.begin() + axis);
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kInt64, out_shape));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchArgReduce(p, x.raw_data(), y.data<int64_t>(), stream));
    return Status::OK();
  }

 private:
  std::string op_;
  bool is_max_;
  int64_t axis_;
  bool keepdims_;
  bool select_last_;
  bool allow_negative_;
};

Result<std::unique_ptr<Kernel>> CreateArg(const KernelInfo& info, bool is_max,
                                          KernelFactory reference) {
  KILN_RETURN_IF_ERROR(reference(info).status());
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
  KILN_ASSIGN_OR_RETURN(bool keepdims, attrs.Bool("keepdims", true));
  KILN_ASSIGN_OR_RETURN(bool select_last, attrs.Bool("select_last_index", false));
  return std::unique_ptr<Kernel>(std::make_unique<ArgKernel>(
      info.op_type(), is_max, axis, keepdims, select_last, /*allow_negative=*/info.opset() >= 11));
}

Result<std::unique_ptr<Kernel>> CreateArgMax(const KernelInfo& info) {
  return CreateArg(info, /*is_max=*/true, &ref::CreateArgMax);
}
Result<std::unique_ptr<Kernel>> CreateArgMin(const KernelInfo& info) {
  return CreateArg(info, /*is_max=*/false, &ref::CreateArgMin);
}

}  // namespace
}  // namespace reduce_ops

std::vector<KernelDef> ReduceKernelDefs() {
  using namespace reduce_ops;  // NOLINT(build/namespaces): the factories of the table
  constexpr DataTypeMask kFloatInt =
      kCudaFloatTypes | TypeMask({DataType::kInt32, DataType::kInt64});
  constexpr DataTypeMask kFloat = kCudaFloatTypes;
  auto row = [](std::string_view op, std::string_view domain, int since, int end,
                DataTypeMask types, KernelFactory create,
                bool (*supports)(const KernelInfo&) = nullptr) {
    return KernelDef{op, domain, since, end, DeviceType::kCuda, types, 0, create, "cuda", supports};
  };
  return {
      // Reductions (reduce.cc): opsets 7-17 as the reference's rows; ReduceSum-13's axes input
      // must be constant.
      row("ReduceSum", "", 7, 17, kFloatInt, &CreateReduceSum, &SupportsReduceSum),
      row("ReduceMean", "", 7, 17, kFloat, &CreateReduceMean),
      row("ReduceMax", "", 7, 17, kFloatInt, &CreateReduceMax),
      row("ReduceMin", "", 7, 17, kFloatInt, &CreateReduceMin),
      row("ReduceProd", "", 7, 17, kFloat, &CreateReduceProd),
      row("ReduceL1", "", 7, 17, kFloat, &CreateReduceL1),
      row("ReduceL2", "", 7, 17, kFloat, &CreateReduceL2),
      row("ReduceLogSum", "", 7, 17, kFloat, &CreateReduceLogSum),
      row("ReduceLogSumExp", "", 7, 17, kFloat, &CreateReduceLogSumExp),
      row("ReduceSumSquare", "", 7, 17, kFloat, &CreateReduceSumSquare),
      row("ArgMax", "", 7, 17, kFloat, &CreateArgMax),
      row("ArgMin", "", 7, 17, kFloat, &CreateArgMin),
      // Normalizations (reduce_norm.cc). Softmax / LogSoftmax: coerced to 2-D before opset 13.
      row("Softmax", "", 7, 17, kFloat, &CreateSoftmax),
      row("LogSoftmax", "", 7, 17, kFloat, &CreateLogSoftmax),
      row("LayerNormalization", "", 17, 17, kFloat, &CreateLayerNormalization),
      row("LayerNormalization", "ai.kiln", 1, 1, kFloat, &CreateKilnLayerNormalization),
      row("BatchNormalization", "", 7, 17, kFloat, &CreateBatchNormalization,
          &SupportsBatchNormalization),
      row("InstanceNormalization", "", 7, 17, kFloat, &CreateInstanceNormalization),
      // Pools (reduce_pool.cc): 1-D to 3-D, MaxPool without its Indices output.
      row("MaxPool", "", 7, 17, kFloat, &CreateMaxPool, &SupportsPool),
      row("AveragePool", "", 7, 17, kFloat, &CreateAveragePool, &SupportsPool),
      row("GlobalAveragePool", "", 7, 17, kFloat, &CreateGlobalAveragePool),
      row("GlobalMaxPool", "", 7, 17, kFloat, &CreateGlobalMaxPool),
      // Attention (reduce_attention.cc): head dims up to kAttentionMaxHeadDim.
      row("Attention", "ai.kiln", 1, 1, kFloat, &CreateAttention, &SupportsAttention),
  };
}

}  // namespace kiln::cuda
