// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host-side helpers of kiln's CUDA kernels (*.cc): CUDA errors as Status values, the stream a
// kernel enqueues on, element types, fused activations and broadcasting, the shared handles of
// cuBLASLt and cuDNN. Rules every CUDA kernel keeps:
//   - Its factory (KernelDef::create) never touches the GPU, so kernel tables, placement and
//     kernel construction are tested on machines without one; handles and device workspaces are
//     made at the first Compute.
//   - Compute never reads device memory from the host and never synchronizes: it checks shapes
//     (host metadata), allocates outputs with AllocateOutputForOverwrite (or AllocateOutput, whose
//     zero-fill the device's allocator enqueues) and enqueues its work on StreamOf(ctx).
//   - Data it must know on the host (a Reshape's shape, a Slice's starts) comes from constant
//     inputs, read in the factory; `supports` declines the node when they are not constant, and
//     placement leaves it to the CPU.
//   - Every CUDA, cuBLAS and cuDNN call is checked (KILN_CUDA_OK, KILN_CUBLAS_OK, KILN_CUDNN_OK),
//     naming the call, file and line.

#include <cuda_runtime_api.h>

#include <string_view>
#include <vector>

#include "base/result.h"
#include "kernels/cuda/params.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln::cuda {

Status CudaError(cudaError_t e, const char* call, const char* file, int line);

#define KILN_CUDA_OK(call)                                                     \
  do {                                                                         \
    const cudaError_t kiln_cuda_e_ = (call);                                   \
    if (kiln_cuda_e_ != cudaSuccess) {                                         \
      return ::kiln::cuda::CudaError(kiln_cuda_e_, #call, __FILE__, __LINE__); \
    }                                                                          \
  } while (false)

// The types the CUDA float kernels take: FP32, FP16, BF16.
inline constexpr DataTypeMask kCudaFloatTypes =
    TypeMask({DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});

// Whether FP32 matrix products and convolutions may run on TF32 tensor cores: yes unless
// KILN_CUDA_TF32=0 (base/settings.h). TF32 keeps 10 mantissa bits of each product's inputs and
// sums in FP32: results differ from full FP32 by about 1e-3 relative.
bool CudaTf32Allowed();

// The CUDA stream the runtime handed the kernel (KernelContext::stream); INTERNAL when the kernel
// runs without a CUDA stream (a CUDA kernel outside a CUDA session).
Result<cudaStream_t> StreamOf(const KernelContext& ctx);

// The device code's type for `dtype`; INVALID_ARGUMENT naming the type for one it lacks.
Result<ElemType> ElemTypeOf(DataType dtype);

// The fused activation of an ai.kiln op (attributes activation, activation_params), checked as
// the reference kernels check it.
Result<Activation> ParseActivation(const KernelInfo& info);

// Numpy broadcasting of `inputs` (1 to 3 shapes): the output shape, and per input a strided view
// over the output's (merged) dimensions with stride 0 where it broadcasts. Dimensions that are
// contiguous in every operand are merged, so the views' rank is usually 1 to 3.
struct Broadcast {
  Shape output;
  std::vector<StridedView> inputs;  // one per input, each of the same rank and dims
};
Result<Broadcast> BroadcastShapes(const std::vector<Shape>& inputs);

// A contiguous row-major view of `shape` (rank <= kMaxRank, else INVALID_ARGUMENT).
Result<StridedView> ContiguousView(const Shape& shape);

}  // namespace kiln::cuda
