// SPDX-License-Identifier: Apache-2.0
// Device code of the cuDNN convolutions (dnn_launch.h): the prepared copy of X (converted and/or
// zero-padded) and the epilogue (bias, residual, activation), both grid-stride loops in FP32.
// Indices are 32-bit when the element count allows it (the common case: cheaper divisions),
// 64-bit otherwise.

#include <cstdint>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/dnn_launch.h"

namespace kiln::cuda {
namespace {

constexpr int64_t kMax32 = int64_t{0x7FFFFFFF};

// i runs over [0, n) with a grid-stride loop; Idx 32-bit needs n <= 2^31 - 1 (so i + stride,
// both below 2^31, never wraps).
#define KILN_DNN_LOOP(Idx, i, n)                                                                   \
  for (Idx i = static_cast<Idx>(blockIdx.x) * static_cast<Idx>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<Idx>(blockDim.x) * static_cast<Idx>(gridDim.x))

template <typename S, typename D, typename Idx>
__global__ void ConvertKernel(const S* __restrict__ src, D* __restrict__ dst, Idx n) {
  KILN_DNN_LOOP(Idx, i, n) { dst[i] = FromFloat<D>(ToFloat(src[i])); }
}

template <typename S, typename D>
__global__ void PadKernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n,
                          DnnPadParams p) {
  KILN_DNN_LOOP(int64_t, i, n) {
    int64_t coord[kDnnMaxRank];
    int64_t rem = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t q = rem / p.dst_dims[d];
      coord[d] = rem - q * p.dst_dims[d];
      rem = q;
    }
    bool inside = true;
    int64_t offset = 0;
    for (int d = 0; d < p.rank; ++d) {
      const int64_t c = coord[d] - p.begin[d];
      if (c < 0 || c >= p.src_dims[d]) {
        inside = false;
        break;
      }
      offset = offset * p.src_dims[d] + c;
    }
    dst[i] = FromFloat<D>(inside ? ToFloat(src[offset]) : 0.0f);
  }
}

// `conv` and `y` may be the same memory (in place): no __restrict__ on them.
template <typename Tc, typename Ty, typename Idx>
__global__ void EpilogueKernel(const Tc* conv, const Ty* __restrict__ bias,
                               const Ty* __restrict__ z, Ty* y, Idx n, Idx inner, Idx channels,
                               Activation act) {
  KILN_DNN_LOOP(Idx, i, n) {
    float v = conv != nullptr ? ToFloat(conv[i]) : 0.0f;
    if (bias != nullptr) v += ToFloat(bias[(i / inner) % channels]);
    if (z != nullptr) v += ToFloat(z[i]);
    y[i] = FromFloat<Ty>(Activate(act, v));
  }
}

template <typename S, typename D>
void PrepareInput(const void* src, void* dst, int64_t n, const DnnPadParams* pad,
                  cudaStream_t stream) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  if (pad != nullptr) {
    PadKernel<S, D><<<BlocksFor(n), kThreads, 0, stream>>>(s, d, n, *pad);
  } else if (n <= kMax32) {
    ConvertKernel<S, D, uint32_t>
        <<<BlocksFor(n), kThreads, 0, stream>>>(s, d, static_cast<uint32_t>(n));
  } else {
    ConvertKernel<S, D, int64_t><<<BlocksFor(n), kThreads, 0, stream>>>(s, d, n);
  }
}

template <typename Tc, typename Ty>
void Epilogue(const void* conv, const void* bias, const void* z, void* y,
              const DnnEpilogueParams& p, cudaStream_t stream) {
  const Tc* c = static_cast<const Tc*>(conv);
  const Ty* b = static_cast<const Ty*>(bias);
  const Ty* r = static_cast<const Ty*>(z);
  Ty* out = static_cast<Ty*>(y);
  if (p.n <= kMax32) {
    EpilogueKernel<Tc, Ty, uint32_t><<<BlocksFor(p.n), kThreads, 0, stream>>>(
        c, b, r, out, static_cast<uint32_t>(p.n), static_cast<uint32_t>(p.inner),
        static_cast<uint32_t>(p.channels), p.act);
  } else {
    EpilogueKernel<Tc, Ty, int64_t>
        <<<BlocksFor(p.n), kThreads, 0, stream>>>(c, b, r, out, p.n, p.inner, p.channels, p.act);
  }
}

}  // namespace

cudaError_t LaunchDnnPrepareInput(ElemType src_type, const void* src, ElemType dst_type, void* dst,
                                  int64_t n, const DnnPadParams* pad, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  KILN_CUDA_FLOAT_SWITCH(
      src_type, S,
      KILN_CUDA_FLOAT_SWITCH(dst_type, D, PrepareInput<S, D>(src, dst, n, pad, stream)));
  return cudaGetLastError();
}

cudaError_t LaunchDnnEpilogue(ElemType conv_type, const void* conv, ElemType y_type,
                              const void* bias, const void* z, void* y, const DnnEpilogueParams& p,
                              cudaStream_t stream) {
  if (p.n <= 0) return cudaSuccess;
  if (p.inner <= 0 || p.channels <= 0) return cudaErrorInvalidValue;
  KILN_CUDA_FLOAT_SWITCH(
      conv_type, Tc,
      KILN_CUDA_FLOAT_SWITCH(y_type, Ty, Epilogue<Tc, Ty>(conv, bias, z, y, p, stream)));
  return cudaGetLastError();
}

}  // namespace kiln::cuda
