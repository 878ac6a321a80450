// SPDX-License-Identifier: Apache-2.0
#pragma once
// Device-side helpers of kiln's CUDA kernels (included by *.cu only): conversions between the
// element types and FP32, the fused activations, strided indexing, launch sizes and the
// dispatch of an ElemType to a C++ type.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace kiln::cuda {

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

// Round to nearest even for the half types; a C++ conversion otherwise.
template <typename T>
__device__ __forceinline__ T FromFloat(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// The fused activation, in FP32 (the reference kernels' definitions, op/kiln_ops.h).
__device__ __forceinline__ float Activate(const Activation& act, float x) {
  switch (act.kind) {
    case ActKind::kNone:
      return x;
    case ActKind::kRelu:
      return x > 0.0f ? x : 0.0f;
    case ActKind::kClip:  // NaN stays NaN, as in the reference (fminf / fmaxf would drop it)
      return x != x ? x : fminf(fmaxf(x, act.a), act.b);
    case ActKind::kSigmoid:
      return Sigmoid(x);
    case ActKind::kSilu:
      return x * Sigmoid(x);
    case ActKind::kHardSigmoid:
      return fmaxf(0.0f, fminf(1.0f, act.a * x + act.b));
    case ActKind::kHardSwish:
      return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case ActKind::kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case ActKind::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case ActKind::kTanh:
      return tanhf(x);
    case ActKind::kLeakyRelu:
      return x >= 0.0f ? x : act.a * x;
  }
  return x;
}

// The element offset in `v` of the element with linear index `i` in row-major order of v.dims.
__device__ __forceinline__ int64_t StridedOffset(const StridedView& v, int64_t i) {
  int64_t offset = 0;
  for (int d = v.rank - 1; d >= 0; --d) {
    const int64_t q = i / v.dims[d];
    offset += (i - q * v.dims[d]) * v.strides[d];
    i = q;
  }
  return offset;
}

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (at most 65535 * 32 blocks; the loop covers the
// rest).
inline unsigned int BlocksFor(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  const int64_t cap = int64_t{65535} * 32;
  return static_cast<unsigned int>(b < 1 ? 1 : (b > cap ? cap : b));
}

#define KILN_GRID_STRIDE_LOOP(i, n)                                                    \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Runs the statement list with T bound to the C++ type of `type` (a floating ElemType); other
// types fall to the caller's default. Use: KILN_CUDA_FLOAT_SWITCH(p.type, T, Launch<T>(p));
#define KILN_CUDA_FLOAT_SWITCH(type, T, ...) \
  switch (type) {                            \
    case ::kiln::cuda::ElemType::kF32: {     \
      using T = float;                       \
      __VA_ARGS__;                           \
      break;                                 \
    }                                        \
    case ::kiln::cuda::ElemType::kF16: {     \
      using T = __half;                      \
      __VA_ARGS__;                           \
      break;                                 \
    }                                        \
    case ::kiln::cuda::ElemType::kBF16: {    \
      using T = __nv_bfloat16;               \
      __VA_ARGS__;                           \
      break;                                 \
    }                                        \
    default:                                 \
      return cudaErrorInvalidValue;          \
  }

}  // namespace kiln::cuda
