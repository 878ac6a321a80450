// SPDX-License-Identifier: Apache-2.0
// Device code of MaxPool and AveragePool (reduce_launch.h's LaunchPool), NCHW, 1-D to 3-D.
//
// NOTE on the approach. One thread per output element (grid-stride): it finds its window from
// the geometry the host resolved (ref/spatial.h's rules: strides, dilations, pads, ceil_mode,
// auto_pad) and walks the window's taps in row-major kernel order, skipping those outside the
// input. Max keeps the first maximum (a later tap replaces it only when strictly greater, as the
// reference does); average sums in FP32 and divides by the number of taps inside the input, or
// with count_include_pad by the taps inside the explicitly padded input (never the part ceil_mode
// adds). 1-D and 2-D pools run as 3-D ones with leading size-1 dims. Neighbouring threads take
// neighbouring outputs of one plane, so their loads overlap in cache.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/reduce_launch.h"

namespace kiln::cuda::reduce_ops {
namespace {

// Taps of axis d at window start `start` that fall inside [lo, hi).
__device__ __forceinline__ int64_t TapsWithin(const PoolParams& p, int d, int64_t start, int64_t lo,
                                              int64_t hi) {
  int64_t n = 0;
  for (int64_t k = 0; k < p.kernel[d]; ++k) {
    const int64_t c = start + k * p.dilation[d];
    n += (c >= lo && c < hi) ? 1 : 0;
  }
  return n;
}

template <typename T>
__global__ void PoolKernel(PoolParams p, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t out_plane = p.out[0] * p.out[1] * p.out[2];
  const int64_t in_plane = p.in[0] * p.in[1] * p.in[2];
  const int64_t total = p.planes * out_plane;
  KILN_GRID_STRIDE_LOOP(idx, total) {
    int64_t rest = idx;
    int64_t start[kPoolRank];
    for (int d = kPoolRank - 1; d >= 0; --d) {
      const int64_t q = rest / p.out[d];
      start[d] = (rest - q * p.out[d]) * p.stride[d] - p.pad_begin[d];
      rest = q;
    }
    const T* xp = x + rest * in_plane;  // rest is the plane now
    float acc = 0.0f;
    int64_t taps = 0;
    for (int64_t k0 = 0; k0 < p.kernel[0]; ++k0) {
      const int64_t c0 = start[0] + k0 * p.dilation[0];
      if (c0 < 0 || c0 >= p.in[0]) continue;
      for (int64_t k1 = 0; k1 < p.kernel[1]; ++k1) {
        const int64_t c1 = start[1] + k1 * p.dilation[1];
        if (c1 < 0 || c1 >= p.in[1]) continue;
        const T* xr = xp + (c0 * p.in[1] + c1) * p.in[2];
        for (int64_t k2 = 0; k2 < p.kernel[2]; ++k2) {
          const int64_t c2 = start[2] + k2 * p.dilation[2];
          if (c2 < 0 || c2 >= p.in[2]) continue;
          const float v = ToFloat(xr[c2]);
          if (p.is_max) {
            if (taps == 0 || v > acc) acc = v;
          } else {
            acc += v;
          }
          ++taps;
        }
      }
    }
    if (!p.is_max) {
      int64_t divisor = taps;
      if (p.count_include_pad) {
        divisor = 1;
        for (int d = 0; d < kPoolRank; ++d) {
          divisor *= TapsWithin(p, d, start[d], -p.pad_begin[d], p.in[d] + p.pad_end[d]);
        }
      }
      acc /= static_cast<float>(divisor);
    }
    y[idx] = FromFloat<T>(acc);
  }
}

}  // namespace

cudaError_t LaunchPool(const PoolParams& p, const void* x, void* y, cudaStream_t stream) {
  const int64_t total = p.planes * p.out[0] * p.out[1] * p.out[2];
  KILN_CUDA_FLOAT_SWITCH(p.type, T,
                         PoolKernel<T><<<BlocksFor(total), kThreads, 0, stream>>>(
                             p, static_cast<const T*>(x), static_cast<T*>(y));
                         return cudaGetLastError());
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda::reduce_ops
