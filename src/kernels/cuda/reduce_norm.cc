// SPDX-License-Identifier: Apache-2.0
// Host code of the reduce group's normalizations on CUDA: Softmax and LogSoftmax, ONNX
// LayerNormalization (with its optional Mean / InvStdDev outputs) and ai.kiln
// LayerNormalization, inference BatchNormalization, InstanceNormalization. Device code in
// reduce.cu.
//
// NOTE on the approach. Softmax / LogSoftmax view X as [outer, len, inner]: before opset 13 the
// input is coerced to 2-D at `axis` (default 1; len = product of dims[axis:], inner = 1), from
// 13 the rows run along dims[axis] (default -1). Softmax takes a negative axis from opset 11,
// LogSoftmax at every opset (the reference's leniency). LayerNormalization normalizes the
// contiguous rows of dims[axis:]; Scale and B are broadcast over those dims through strided
// views. InstanceNormalization is the same row kernel over each (n, c) plane with a per-channel
// scale and bias. BatchNormalization is elementwise per channel; its statistics have X's dtype
// or (from opset 14) FP32. Training-mode BatchNormalization and the per-activation statistics of
// opsets 7-8 (spatial=0) are declined and stay on the CPU.

#include <memory>
#include <string>
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

// ---- Softmax / LogSoftmax -----------------------------------------------------------------------

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(std::string op, bool log, int64_t axis, bool coerce_2d, bool allow_negative)
      : op_(std::move(op)),
        log_(log),
        axis_(axis),
        coerce_2d_(coerce_2d),
        allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 0, op_));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError(op_, "input must have rank >= 1, got a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, ref::NormalizeAxis(op_, axis_, x.rank(), allow_negative_));
    const std::span<const int64_t> dims = x.shape().dims();
    const size_t ax = static_cast<size_t>(axis);
    SoftmaxParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
    p.log = log_;
    p.outer = ref::DimProduct(dims, 0, ax);
    p.len = coerce_2d_ ? ref::DimProduct(dims, ax, dims.size()) : dims[ax];
    p.inner = coerce_2d_ ? 1 : ref::DimProduct(dims, ax + 1, dims.size());
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchSoftmax(p, x.raw_data(), y.raw_data(), stream));
    return Status::OK();
  }

 private:
  std::string op_;
  bool log_;
  int64_t axis_;
  bool coerce_2d_;
  bool allow_negative_;
};

Result<std::unique_ptr<Kernel>> CreateSoftmaxLike(const KernelInfo& info, bool log,
                                                  KernelFactory reference) {
  KILN_RETURN_IF_ERROR(reference(info).status());
  const int64_t opset = info.opset();
  KILN_ASSIGN_OR_RETURN(int64_t axis, ref::AttrReader(info).Int("axis", opset >= 13 ? -1 : 1));
  return std::unique_ptr<Kernel>(
      std::make_unique<SoftmaxKernel>(info.op_type(), log, axis, /*coerce_2d=*/opset < 13,
                                      /*allow_negative=*/log || opset >= 11));
}

// ---- LayerNormalization -------------------------------------------------------------------------

class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(int64_t axis, float epsilon) : axis_(axis), epsilon_(epsilon) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "LayerNormalization";
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 0, kOp));
    KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 1, kOp));
    const bool has_bias = ctx.num_inputs() > 2 && ctx.input(2).valid();
    if (has_bias) KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError(kOp, "X must have rank >= 1, got a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, ref::NormalizeAxis(kOp, axis_, x.rank(), true));
    const std::span<const int64_t> dims = x.shape().dims();
    const Shape norm_shape(dims.subspan(static_cast<size_t>(axis)));
    for (int i = 1; i < (has_bias ? 3 : 2); ++i) {
      const Tensor& p = ctx.input(i);
      if (p.dtype() != x.dtype()) {
        return OpError(kOp, "input {} has dtype {}, X has {}", i, DataTypeName(p.dtype()),
                       DataTypeName(x.dtype()));
      }
      if (!ref::BroadcastsTo(p.shape(), norm_shape)) {
        return OpError(kOp, "input {} {} does not broadcast to the normalized shape {}", i,
                       p.shape().ToString(), norm_shape.ToString());
      }
    }
    NormParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
    p.rows = ref::DimProduct(dims, 0, static_cast<size_t>(axis));
    p.len = norm_shape.NumElements();
    p.epsilon = epsilon_;
    KILN_ASSIGN_OR_RETURN(p.scale, BroadcastViewOver(ctx.input(1).shape(), norm_shape));
    if (has_bias) {
      KILN_ASSIGN_OR_RETURN(p.bias, BroadcastViewOver(ctx.input(2).shape(), norm_shape));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
    // Mean and InvStdDev: FP32, X's shape with 1 from `axis` on.
    std::vector<int64_t> stat_dims(dims.begin(), dims.end());
    for (size_t d = static_cast<size_t>(axis); d < stat_dims.size(); ++d) stat_dims[d] = 1;
    const Shape stat_shape(stat_dims);
    float* stats[2] = {nullptr, nullptr};
    for (int o = 1; o <= 2 && o < ctx.num_outputs(); ++o) {
      KILN_ASSIGN_OR_RETURN(Tensor s,
                            ctx.AllocateOutputForOverwrite(o, DataType::kFloat32, stat_shape));
      stats[o - 1] = s.data<float>();
    }
    const bool any_stats = stats[0] != nullptr || stats[1] != nullptr;
    if (p.rows == 0 || (p.len == 0 && !any_stats)) return Status::OK();
    KILN_CUDA_OK(LaunchNorm(p, x.raw_data(), ctx.input(1).raw_data(),
                            has_bias ? ctx.input(2).raw_data() : nullptr, y.raw_data(), stats[0],
                            stats[1], stream));
    return Status::OK();
  }

 private:
  int64_t axis_;
  float epsilon_;
};

Result<std::unique_ptr<Kernel>> MakeLayerNorm(const KernelInfo& info) {
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", -1));
  KILN_ASSIGN_OR_RETURN(float epsilon, attrs.Float("epsilon", 1e-5f));
  return std::unique_ptr<Kernel>(std::make_unique<LayerNormKernel>(axis, epsilon));
}

// ---- BatchNormalization -------------------------------------------------------------------------

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(float epsilon, bool mixed_types) : epsilon_(epsilon), mixed_types_(mixed_types) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "BatchNormalization";
    static constexpr const char* kInputNames[] = {"X", "scale", "B", "mean", "var"};
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    for (int i = 0; i < 5; ++i) KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, i, kOp));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    if (x.rank() < 2) {
      return OpError(kOp, "X must have rank >= 2 ([N, C, ...]), got {}", x.shape().ToString());
    }
    const DataType param_dtype = ctx.input(1).dtype();
    if (param_dtype != x.dtype() && !(mixed_types_ && param_dtype == DataType::kFloat32)) {
      return OpError(kOp, "input 'scale' has dtype {}; the CUDA kernel takes {}{}",
                     DataTypeName(param_dtype), DataTypeName(x.dtype()),
                     mixed_types_ ? " or FP32" : "");
    }
    const Shape param_shape{x.dim(1)};
    for (int i = 1; i < 5; ++i) {
      const Tensor& p = ctx.input(i);
      if (p.dtype() != param_dtype) {
        return OpError(kOp, "input '{}' has dtype {}, 'scale' has {}", kInputNames[i],
                       DataTypeName(p.dtype()), DataTypeName(param_dtype));
      }
      if (!(p.shape() == param_shape)) {
        return OpError(kOp, "input '{}' has shape {}, expected {} for X {}", kInputNames[i],
                       p.shape().ToString(), param_shape.ToString(), x.shape().ToString());
      }
    }
    BatchNormParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
    KILN_ASSIGN_OR_RETURN(p.param_type, ElemTypeOf(param_dtype));
    p.n = x.dim(0);
    p.channels = x.dim(1);
    p.spatial = ref::DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    p.epsilon = epsilon_;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchBatchNorm(p, x.raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(),
                                 ctx.input(3).raw_data(), ctx.input(4).raw_data(), y.raw_data(),
                                 stream));
    return Status::OK();
  }

 private:
  float epsilon_;
  bool mixed_types_;  // opset >= 14: the statistics may be FP32 whatever X is
};

// ---- InstanceNormalization ----------------------------------------------------------------------

class InstanceNormKernel final : public Kernel {
 public:
  explicit InstanceNormKernel(float epsilon) : epsilon_(epsilon) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr const char* kOp = "InstanceNormalization";
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    for (int i = 0; i < 3; ++i) KILN_RETURN_IF_ERROR(CheckDeviceInput(ctx, i, kOp));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    if (x.rank() < 2) {
      return OpError(kOp, "input must have rank >= 2 ([N, C, ...]), got {}", x.shape().ToString());
    }
    const int64_t channels = x.dim(1);
    for (int i = 1; i < 3; ++i) {
      const Tensor& p = ctx.input(i);
      if (p.dtype() != x.dtype()) {
        return OpError(kOp, "input {} has dtype {}, input has {}", i, DataTypeName(p.dtype()),
                       DataTypeName(x.dtype()));
      }
      if (p.rank() != 1 || p.dim(0) != channels) {
        return OpError(kOp, "input {} {} must be 1-D with {} elements (the channels)", i,
                       p.shape().ToString(), channels);
      }
    }
    NormParams p;
    KILN_ASSIGN_OR_RETURN(p.type, ElemTypeOf(x.dtype()));
    p.rows = x.dim(0) * channels;
    p.len = ref::DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    p.epsilon = epsilon_;
    p.per_row = true;
    p.channels = channels;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchNorm(p, x.raw_data(), ctx.input(1).raw_data(), ctx.input(2).raw_data(),
                            y.raw_data(), nullptr, nullptr, stream));
    return Status::OK();
  }

 private:
  float epsilon_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateSoftmax(const KernelInfo& info) {
  return CreateSoftmaxLike(info, /*log=*/false, &ref::CreateSoftmax);
}

Result<std::unique_ptr<Kernel>> CreateLogSoftmax(const KernelInfo& info) {
  return CreateSoftmaxLike(info, /*log=*/true, &ref::CreateLogSoftmax);
}

Result<std::unique_ptr<Kernel>> CreateLayerNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateLayerNormalization(info).status());
  return MakeLayerNorm(info);
}

Result<std::unique_ptr<Kernel>> CreateKilnLayerNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateKilnLayerNormalization(info).status());
  return MakeLayerNorm(info);
}

bool SupportsBatchNormalization(const KernelInfo& info) {
  const NodeDesc& node = info.node();
  if (info.opset() >= 14 && node.GetInt("training_mode", 0) != 0) return false;
  if (info.opset() < 9 && node.GetInt("spatial", 1) == 0) return false;
  for (int i = 1; i < info.num_outputs(); ++i) {
    if (info.has_output(i)) return false;  // running statistics: training mode only
  }
  for (int i = 1; i < 5 && i < info.num_inputs(); ++i) {
    if (info.input_type(i).dtype == DataType::kFloat64) return false;
  }
  return true;
}

Result<std::unique_ptr<Kernel>> CreateBatchNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateBatchNormalization(info).status());
  if (!SupportsBatchNormalization(info)) {
    return OpError("BatchNormalization",
                   "the CUDA kernel runs inference with per-channel statistics only");
  }
  KILN_ASSIGN_OR_RETURN(float epsilon, ref::AttrReader(info).Float("epsilon", 1e-5f));
  return std::unique_ptr<Kernel>(
      std::make_unique<BatchNormKernel>(epsilon, /*mixed_types=*/info.opset() >= 14));
}

Result<std::unique_ptr<Kernel>> CreateInstanceNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::CreateInstanceNormalization(info).status());
  KILN_ASSIGN_OR_RETURN(float epsilon, ref::AttrReader(info).Float("epsilon", 1e-5f));
  return std::unique_ptr<Kernel>(std::make_unique<InstanceNormKernel>(epsilon));
}

}  // namespace kiln::cuda::reduce_ops
