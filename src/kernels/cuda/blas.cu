// SPDX-License-Identifier: Apache-2.0
// Device code of the matrix products (blas_launch.h): the elementwise epilogue that finishes a
// cuBLASLt product (broadcast addend, residual, activation, in FP32) and the FP32 <-> 16-bit
// float conversions of the half-precision weight forms. Grid-stride loops over contiguous
// elements: consecutive threads touch consecutive elements, so every access is coalesced (the
// broadcast addend is read along its row, or is one element per row).

#include "kernels/cuda/blas_launch.h"
#include "kernels/cuda/device.cuh"

namespace kiln::cuda {
namespace {

template <typename T, bool kHasC, bool kHasZ>
__global__ void MatMulEpilogueKernel(MatMulEpilogueParams p) {
  T* y = static_cast<T*>(p.y);
  const T* c = static_cast<const T*>(p.c);
  const T* z = static_cast<const T*>(p.z);
  KILN_GRID_STRIDE_LOOP(i, p.count) {
    // x may alias y (FP32): read before the write of the same element by the same thread.
    float v = p.x != nullptr ? p.x[i] : 0.0f;
    if constexpr (kHasC) {
      const int64_t row = i / p.last;
      const int64_t col = i - row * p.last;
      v += p.c_scale * ToFloat(c[row * p.c_row_stride + col * p.c_col_stride]);
    }
    if constexpr (kHasZ) v += ToFloat(z[i]);
    y[i] = FromFloat<T>(Activate(p.act, v));
  }
}

template <typename T>
void LaunchEpilogue(const MatMulEpilogueParams& p, cudaStream_t stream) {
  const unsigned int blocks = BlocksFor(p.count);
  if (p.c != nullptr && p.z != nullptr) {
    MatMulEpilogueKernel<T, true, true><<<blocks, kThreads, 0, stream>>>(p);
  } else if (p.c != nullptr) {
    MatMulEpilogueKernel<T, true, false><<<blocks, kThreads, 0, stream>>>(p);
  } else if (p.z != nullptr) {
    MatMulEpilogueKernel<T, false, true><<<blocks, kThreads, 0, stream>>>(p);
  } else {
    MatMulEpilogueKernel<T, false, false><<<blocks, kThreads, 0, stream>>>(p);
  }
}

template <typename T>
__global__ void FloatToHalfKernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  KILN_GRID_STRIDE_LOOP(i, n) { dst[i] = FromFloat<T>(src[i]); }
}

template <typename T>
__global__ void HalfToFloatKernel(const T* __restrict__ src, float* __restrict__ dst, int64_t n) {
  KILN_GRID_STRIDE_LOOP(i, n) { dst[i] = ToFloat(src[i]); }
}

}  // namespace

cudaError_t LaunchMatMulEpilogue(const MatMulEpilogueParams& p, cudaStream_t stream) {
  if (p.count <= 0) return cudaSuccess;
  if (p.last <= 0) return cudaErrorInvalidValue;
  KILN_CUDA_FLOAT_SWITCH(p.type, T, LaunchEpilogue<T>(p, stream));
  return cudaGetLastError();
}

cudaError_t LaunchFloatToHalf(const float* src, ElemType dst_type, void* dst, int64_t n,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned int blocks = BlocksFor(n);
  switch (dst_type) {
    case ElemType::kF16:
      FloatToHalfKernel<<<blocks, kThreads, 0, stream>>>(src, static_cast<__half*>(dst), n);
      break;
    case ElemType::kBF16:
      FloatToHalfKernel<<<blocks, kThreads, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchHalfToFloat(ElemType src_type, const void* src, float* dst, int64_t n,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned int blocks = BlocksFor(n);
  switch (src_type) {
    case ElemType::kF16:
      HalfToFloatKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
      break;
    case ElemType::kBF16:
      HalfToFloatKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src),
                                                         dst, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kiln::cuda
