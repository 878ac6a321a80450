// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host-side pieces of the reduce group of CUDA kernels, internal to src/kernels/cuda/reduce*.cc:
// the factories and `supports` predicates that reduce.cc's table (ReduceKernelDefs, the group's
// one inventory) lists, and helpers the group's files share.
//
//   reduce.cc            the table; ReduceSum ... ReduceLogSumExp, ArgMax / ArgMin
//   reduce_norm.cc       Softmax, LogSoftmax, LayerNormalization (ONNX and ai.kiln),
//                        BatchNormalization, InstanceNormalization
//   reduce_pool.cc       MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
//   reduce_attention.cc  ai.kiln Attention
//
// Factories never touch the GPU: they validate the node as the reference kernel's factory does
// (by building it, so both report the same errors) and keep what Compute needs from the
// attributes and constant inputs.

#include <memory>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/reduce_launch.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln::cuda::reduce_ops {

// Input i of `ctx` is present and contiguous (INVALID_ARGUMENT naming `op` otherwise).
Status CheckDeviceInput(const KernelContext& ctx, int i, std::string_view op);

// The view of `in` (a shape broadcastable to `out`) over the dims of `out`, row-major over out
// with stride 0 where `in` broadcasts; size-1 dims dropped and contiguous runs merged so that the
// device indexes it cheaply. REQUIRES: in broadcasts to out (unidirectionally).
Result<StridedView> BroadcastViewOver(const Shape& in, const Shape& out);

// Enqueues the reduction of x over the dims marked in `reduced` into y (y holds the kept dims in
// order, keepdims or not); nothing when y is empty. Shared by the Reduce ops and the global pools.
Status EnqueueReduce(ReduceOp op, const Tensor& x, const std::vector<bool>& reduced, Tensor& y,
                     cudaStream_t stream);

// reduce_norm.cc
Result<std::unique_ptr<Kernel>> CreateSoftmax(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateLogSoftmax(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateLayerNormalization(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateKilnLayerNormalization(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateBatchNormalization(const KernelInfo& info);
bool SupportsBatchNormalization(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateInstanceNormalization(const KernelInfo& info);

// reduce_pool.cc
Result<std::unique_ptr<Kernel>> CreateMaxPool(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateAveragePool(const KernelInfo& info);
bool SupportsPool(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateGlobalAveragePool(const KernelInfo& info);
Result<std::unique_ptr<Kernel>> CreateGlobalMaxPool(const KernelInfo& info);

// reduce_attention.cc
Result<std::unique_ptr<Kernel>> CreateAttention(const KernelInfo& info);
bool SupportsAttention(const KernelInfo& info);

}  // namespace kiln::cuda::reduce_ops
