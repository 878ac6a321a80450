// SPDX-License-Identifier: Apache-2.0
// Device code of ai.kiln Attention (reduce_launch.h's LaunchAttention): Y = Softmax(scale * Q K^T
// + Mask) V, one pass over the keys with an online softmax (flash-attention style), FP32.
//
// NOTE on the approach. A block of 4 warps takes one batch entry and a tile of 16 query rows (4
// per warp) and walks the keys in tiles of 32, staged through shared memory as FP32 (Q tile
// [16][D], K tile [32][D'] with D' = D rounded up to odd so that lane j reading key row j hits a
// distinct bank, V tile [32][32 * kVT] zero-padded past Dv and past T). Per key tile, lane j of a
// warp computes the scores of key j against the warp's 4 query rows (dot products over D from
// shared memory), adds the mask, and the warp updates each row's running max m and denominator
// l: with m' = max(m, tile max), the old accumulators are scaled by exp(m - m') and the key's
// weight is exp(s - m'). The output row lives in registers, lane c holding columns c + 32 t
// (t < kVT); each key's weight is broadcast by a shuffle and multiplied into V's row. The end
// divides by l. As in the reference: a row whose scores are all -inf gives 0 / 0 = NaN, and a
// NaN score makes its row NaN. Score tiles never reach global memory.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/reduce_launch.h"

namespace kiln::cuda::reduce_ops {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kTileRows = kWarps * kRowsPerWarp;  // query rows per block
constexpr int kTileKeys = 32;                     // keys per tile: one per lane
constexpr int kBlockThreads = kWarps * 32;

__device__ __forceinline__ float NegInf() { return __int_as_float(static_cast<int>(0xff800000u)); }

// Row stride of the K tile: D rounded up to an odd number (conflict-free column reads).
__host__ __device__ __forceinline__ int KeyStride(int d) { return d | 1; }

// Shared floats of one block: Q tile, K tile, V tile.
__host__ __device__ __forceinline__ int SharedFloats(int d, int vt) {
  return kTileRows * d + kTileKeys * KeyStride(d) + kTileKeys * 32 * vt;
}

template <typename T, int kVT>
__global__ void __launch_bounds__(kBlockThreads)
    AttentionKernel(AttentionParams p, const T* __restrict__ q, const T* __restrict__ k,
                    const T* __restrict__ v, const T* __restrict__ mask, T* __restrict__ y) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(p.d);
  const int dv = static_cast<int>(p.dv);
  const int ks_stride = KeyStride(d);
  constexpr int kVStride = 32 * kVT;
  float* qs = smem;                        // [kTileRows][d]
  float* ks = qs + kTileRows * d;          // [kTileKeys][ks_stride]
  float* vs = ks + kTileKeys * ks_stride;  // [kTileKeys][kVStride]
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t q_tiles = (p.s + kTileRows - 1) / kTileRows;
  const int64_t work_items = p.batch * q_tiles;

  for (int64_t work = blockIdx.x; work < work_items; work += gridDim.x) {
    const int64_t b = work / q_tiles;
    const int64_t q0 = (work - b * q_tiles) * kTileRows;
    const int64_t mask_base = mask != nullptr ? StridedOffset(p.mask_lead, b) : 0;
    __syncthreads();  // the previous work item's readers of qs are done
    for (int e = threadIdx.x; e < kTileRows * d; e += kBlockThreads) {
      const int r = e / d;
      const int64_t i = q0 + r;
      qs[e] = i < p.s ? ToFloat(q[(b * p.s + i) * p.d + (e - r * d)]) : 0.0f;
    }
    float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kVT];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      m[r] = NegInf();
      l[r] = 0.0f;
#pragma unroll
      for (int t = 0; t < kVT; ++t) o[r][t] = 0.0f;
    }
    const float* qw = qs + warp * kRowsPerWarp * d;  // this warp's query rows

    for (int64_t t0 = 0; t0 < p.t; t0 += kTileKeys) {
      __syncthreads();  // qs written; the previous tile's readers of ks / vs are done
      for (int e = threadIdx.x; e < kTileKeys * d; e += kBlockThreads) {
        const int j = e / d;
        const int64_t t = t0 + j;
        ks[j * ks_stride + (e - j * d)] =
            t < p.t ? ToFloat(k[(b * p.t + t) * p.d + (e - j * d)]) : 0.0f;
      }
      for (int e = threadIdx.x; e < kTileKeys * kVStride; e += kBlockThreads) {
        const int j = e / kVStride, c = e - j * kVStride;
        const int64_t t = t0 + j;
        vs[e] = (t < p.t && c < dv) ? ToFloat(v[(b * p.t + t) * p.dv + c]) : 0.0f;
      }
      __syncthreads();

      // Scores of key t0 + lane against the warp's rows.
      float s[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.0f;
      const float* kr = ks + lane * ks_stride;
      for (int c = 0; c < d; ++c) {
        const float kv = kr[c];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) s[r] += qw[r * d + c] * kv;
      }
      const int64_t t = t0 + lane;
      float w[kRowsPerWarp];  // the key's weight per row
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t i = q0 + warp * kRowsPerWarp + r;
        float score = NegInf();
        if (t < p.t) {
          score = s[r] * p.scale;
          if (mask != nullptr && i < p.s) {
            score += ToFloat(mask[mask_base + i * p.mask_stride_s + t * p.mask_stride_t]);
          }
        }
        float tile_max = score;
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
          tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, offset));
        }
        const float m_new = fmaxf(m[r], tile_max);
        const float alpha = m[r] == NegInf() ? 0.0f : expf(m[r] - m_new);
        w[r] = score == NegInf() ? 0.0f : expf(score - m_new);
        float sum = w[r];
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
          sum += __shfl_xor_sync(kFullMask, sum, offset);
        }
        l[r] = l[r] * alpha + sum;
        m[r] = m_new;
#pragma unroll
        for (int tt = 0; tt < kVT; ++tt) o[r][tt] *= alpha;
      }

      // o += weights x V tile.
      for (int j = 0; j < kTileKeys; ++j) {
        float wj[kRowsPerWarp];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) wj[r] = __shfl_sync(kFullMask, w[r], j);
        const float* vr = vs + j * kVStride + lane;
#pragma unroll
        for (int tt = 0; tt < kVT; ++tt) {
          const float vv = vr[32 * tt];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) o[r][tt] += wj[r] * vv;
        }
      }
    }

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = q0 + warp * kRowsPerWarp + r;
      if (i >= p.s) continue;
      T* yr = y + (b * p.s + i) * p.dv;
#pragma unroll
      for (int tt = 0; tt < kVT; ++tt) {
        const int c = lane + 32 * tt;
        if (c < dv) yr[c] = FromFloat<T>(o[r][tt] / l[r]);
      }
    }
  }
}

template <typename T, int kVT>
cudaError_t Run(const AttentionParams& p, const void* q, const void* k, const void* v,
                const void* mask, void* y, cudaStream_t stream) {
  const size_t bytes =
      sizeof(float) * static_cast<size_t>(SharedFloats(static_cast<int>(p.d), kVT));
  if (bytes > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(AttentionKernel<T, kVT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  const int64_t work = p.batch * ((p.s + kTileRows - 1) / kTileRows);
  AttentionKernel<T, kVT><<<BlocksFor(work, 1), kBlockThreads, bytes, stream>>>(
      p, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
      static_cast<const T*>(mask), static_cast<T*>(y));
  return cudaGetLastError();
}

template <typename T>
cudaError_t RunForDv(const AttentionParams& p, const void* q, const void* k, const void* v,
                     const void* mask, void* y, cudaStream_t stream) {
  if (p.dv <= 32) return Run<T, 1>(p, q, k, v, mask, y, stream);
  if (p.dv <= 64) return Run<T, 2>(p, q, k, v, mask, y, stream);
  if (p.dv <= 128) return Run<T, 4>(p, q, k, v, mask, y, stream);
  return Run<T, 8>(p, q, k, v, mask, y, stream);
}

}  // namespace

cudaError_t LaunchAttention(const AttentionParams& p, const void* q, const void* k, const void* v,
                            const void* mask, void* y, cudaStream_t stream) {
  if (p.d > kAttentionMaxHeadDim || p.dv > kAttentionMaxHeadDim) return cudaErrorInvalidValue;
  KILN_CUDA_FLOAT_SWITCH(p.type, T, return RunForDv<T>(p, q, k, v, mask, y, stream));
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda::reduce_ops
