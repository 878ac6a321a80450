// SPDX-License-Identifier: Apache-2.0
// Device code of the reductions (ReduceSum ... ReduceLogSumExp, the global pools), ArgMax /
// ArgMin, Softmax / LogSoftmax and the mean / variance normalizations (LayerNormalization,
// InstanceNormalization, BatchNormalization); the launchers of reduce_launch.h.
//
// NOTE on the approach. Two shapes of work cover every reduction:
//   rows:    the elements folded into one output include the innermost input dim (stride 1), so
//            a group of threads (a warp for short rows, a whole block for long ones) walks one
//            output's elements, consecutive threads on consecutive addresses, and combines the
//            partial results with shuffles (and shared memory across the warps of a block);
//   columns: the innermost input dim is kept, so consecutive threads take consecutive outputs
//            (coalesced loads), each walking its own reduced elements; threadIdx.y splits those
//            elements and the partials are combined in shared memory.
// Softmax and ArgMax use the same two shapes over [outer, len, inner] (rows when inner is 1).
// Softmax folds each row into a running (max, sum of exp(x - max)) pair in one pass and writes
// in a second; the normalizations take the mean, then the mean of squared deviations (two-pass
// variance), then write. Everything accumulates in FP32 (integer reductions in 64 bits), half
// types are widened on load and rounded once on store. Grids are capped (BlocksFor) and every
// kernel loops over the rest.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/reduce_launch.h"

namespace kiln::cuda::reduce_ops {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
// The most threads a block of these kernels has (long rows; wide column blocks): every kernel
// launched with up to this many declares it, so that its registers fit.
constexpr int kMaxBlockThreads = 1024;

__device__ __forceinline__ float PosInf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float NegInf() { return __int_as_float(static_cast<int>(0xff800000u)); }

// Max / min in which NaN wins (the reference's `if (v > a || isnan(v)) a = v`).
__device__ __forceinline__ float MaxNan(float a, float b) { return (a > b || isnan(a)) ? a : b; }
__device__ __forceinline__ float MinNan(float a, float b) { return (a < b || isnan(a)) ? a : b; }

// exp(a - m), and 0 for a == -inf (so that an all -inf prefix contributes nothing).
__device__ __forceinline__ float ExpOrZero(float a, float m) {
  return a == NegInf() ? 0.0f : expf(a - m);
}

// Offset of element i of a view; rank 0 and 1 without divisions.
__device__ __forceinline__ int64_t ViewOffset(const StridedView& v, int64_t i) {
  if (v.rank == 0) return 0;
  if (v.rank == 1) return i * v.strides[0];
  return StridedOffset(v, i);
}

template <typename A, typename Op>
__device__ __forceinline__ A WarpReduce(A v, Op op) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

// Combines one value per warp (every thread holds its warp's total) into the block's total,
// returned to every thread. `shared` holds 32 values. Called by every thread of the block.
template <typename A, typename Op>
__device__ __forceinline__ A CrossWarp(A v, Op op, A* shared) {
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  __syncthreads();  // earlier readers of `shared` are done
  if ((threadIdx.x & (kWarp - 1)) == 0) shared[threadIdx.x / kWarp] = v;
  __syncthreads();
  A total = shared[0];
  for (int w = 1; w < warps; ++w) total = op(total, shared[w]);
  return total;
}

// The threads that share one row: a warp (kBlock false: blockDim.x / 32 rows per block) or the
// whole block (kBlock true). `first` / `step` walk the rows of this group over the grid.
// REQUIRES: blockDim.x a multiple of 32, blockDim.y == 1.
template <bool kBlock>
struct Group {
  int64_t first, step;
  int lane, size;
  __device__ Group() {
    if constexpr (kBlock) {
      first = blockIdx.x;
      step = gridDim.x;
      lane = static_cast<int>(threadIdx.x);
      size = static_cast<int>(blockDim.x);
    } else {
      const int warps = static_cast<int>(blockDim.x) / kWarp;
      first = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / kWarp;
      step = static_cast<int64_t>(gridDim.x) * warps;
      lane = static_cast<int>(threadIdx.x & (kWarp - 1));
      size = kWarp;
    }
  }
  // The total of v over the group, in every thread of it. Every thread of the group calls it.
  template <typename A, typename Op>
  __device__ A Reduce(A v, Op op, A* shared) const {
    v = WarpReduce(v, op);
    if constexpr (kBlock) v = CrossWarp(v, op, shared);
    return v;
  }
};

// Launch sizes of the row kernels: a warp per row up to `warp_max` elements, else a block.
struct RowLaunch {
  bool block;
  unsigned int grid;
  int threads;
};
RowLaunch RowLaunchFor(int64_t rows, int64_t len, int64_t warp_max) {
  if (len <= warp_max) return {false, BlocksFor(rows, kThreads / kWarp), kThreads};
  const int threads = len >= 32768 ? 1024 : len >= 8192 ? 512 : 256;
  return {true, BlocksFor(rows, 1), threads};
}

// ---- Reductions ---------------------------------------------------------------------------------

// Integer reductions accumulate in 64 bits (sums wrap), floating ones in FP32.
template <typename T>
inline constexpr bool kIntAcc = std::is_integral_v<T>;
template <typename T>
using Acc = std::conditional_t<kIntAcc<T>, long long, float>;

template <typename T>
__device__ __forceinline__ Acc<T> ReduceInit(ReduceOp op) {
  if constexpr (kIntAcc<T>) {
    if (op == ReduceOp::kMax) return static_cast<long long>(std::numeric_limits<T>::lowest());
    if (op == ReduceOp::kMin) return static_cast<long long>(std::numeric_limits<T>::max());
    return 0;
  } else {
    switch (op) {
      case ReduceOp::kProd:
        return 1.0f;
      case ReduceOp::kMax:
        return NegInf();
      case ReduceOp::kMin:
        return PosInf();
      default:
        return 0.0f;
    }
  }
}

// Folds partial b into partial a.
template <typename T>
__device__ __forceinline__ Acc<T> ReduceCombine(ReduceOp op, Acc<T> a, Acc<T> b) {
  if constexpr (kIntAcc<T>) {
    if (op == ReduceOp::kMax) return a > b ? a : b;
    if (op == ReduceOp::kMin) return a < b ? a : b;
    return static_cast<long long>(static_cast<unsigned long long>(a) +
                                  static_cast<unsigned long long>(b));
  } else {
    switch (op) {
      case ReduceOp::kMax:
        return MaxNan(a, b);
      case ReduceOp::kMin:
        return MinNan(a, b);
      case ReduceOp::kProd:
        return a * b;
      default:
        return a + b;
    }
  }
}

// Folds element v into a; m is the max of the output's elements (kLogSumExp only).
template <typename T>
__device__ __forceinline__ Acc<T> ReduceFold(ReduceOp op, Acc<T> a, T v, float m) {
  if constexpr (kIntAcc<T>) {
    return ReduceCombine<T>(op, a, static_cast<long long>(v));
  } else {
    const float x = ToFloat(v);
    switch (op) {
      case ReduceOp::kMax:
        return MaxNan(a, x);
      case ReduceOp::kMin:
        return MinNan(a, x);
      case ReduceOp::kProd:
        return a * x;
      case ReduceOp::kL1:
        return a + fabsf(x);
      case ReduceOp::kL2:
      case ReduceOp::kSumSquare:
        return a + x * x;
      case ReduceOp::kLogSumExp:
        return isfinite(m) ? a + expf(x - m) : a;
      default:
        return a + x;
    }
  }
}

template <typename T>
__device__ __forceinline__ T ReduceFinish(ReduceOp op, Acc<T> a, float m, int64_t count) {
  if constexpr (kIntAcc<T>) {
    return static_cast<T>(a);
  } else {
    float r = a;
    switch (op) {
      case ReduceOp::kMean:
        r = a / static_cast<float>(count);
        break;
      case ReduceOp::kL2:
        r = sqrtf(a);
        break;
      case ReduceOp::kLogSum:
        r = logf(a);
        break;
      case ReduceOp::kLogSumExp:
        r = isfinite(m) ? m + logf(a) : m;
        break;
      default:
        break;
    }
    return FromFloat<T>(r);
  }
}

template <typename T>
struct CombineFn {
  ReduceOp op;
  __device__ Acc<T> operator()(Acc<T> a, Acc<T> b) const { return ReduceCombine<T>(op, a, b); }
};
struct MaxNanFn {
  __device__ float operator()(float a, float b) const { return MaxNan(a, b); }
};
struct AddFn {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Rows: the group of each output walks its `count` elements (the innermost one contiguous).
template <typename T, bool kBlock>
__global__ void __launch_bounds__(kMaxBlockThreads)
    ReduceRowsKernel(ReduceParams p, const T* __restrict__ x, T* __restrict__ y) {
  __shared__ Acc<T> shared[kWarp];
  __shared__ float shared_max[kWarp];
  const Group<kBlock> g;
  for (int64_t o = g.first; o < p.outputs; o += g.step) {
    const T* xo = x + ViewOffset(p.kept, o);
    float m = 0.0f;
    if constexpr (!kIntAcc<T>) {
      if (p.op == ReduceOp::kLogSumExp) {
        float mx = NegInf();
        for (int64_t r = g.lane; r < p.count; r += g.size) {
          mx = MaxNan(mx, ToFloat(xo[ViewOffset(p.reduced, r)]));
        }
        m = g.Reduce(mx, MaxNanFn{}, shared_max);
      }
    }
    Acc<T> acc = ReduceInit<T>(p.op);
    for (int64_t r = g.lane; r < p.count; r += g.size) {
      acc = ReduceFold<T>(p.op, acc, xo[ViewOffset(p.reduced, r)], m);
    }
    acc = g.Reduce(acc, CombineFn<T>{p.op}, shared);
    if (g.lane == 0) y[o] = ReduceFinish<T>(p.op, acc, m, p.count);
  }
}

// The total over threadIdx.y of v (per threadIdx.x), returned to every thread. Called by every
// thread of the block; `buf` holds blockDim.x * blockDim.y values.
template <typename A, typename Op>
__device__ __forceinline__ A ColumnCombine(A v, Op op, A* buf) {
  __syncthreads();  // earlier readers of `buf` are done
  buf[threadIdx.y * blockDim.x + threadIdx.x] = v;
  __syncthreads();
  A total = buf[threadIdx.x];
  for (unsigned int k = 1; k < blockDim.y; ++k) {
    total = op(total, buf[k * blockDim.x + threadIdx.x]);
  }
  return total;
}

// Columns: threadIdx.x takes consecutive outputs, threadIdx.y splits their elements.
template <typename T>
__global__ void __launch_bounds__(kMaxBlockThreads)
    ReduceColumnsKernel(ReduceParams p, const T* __restrict__ x, T* __restrict__ y) {
  __shared__ Acc<T> buf[kMaxBlockThreads];
  __shared__ float buf_max[kMaxBlockThreads];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * blockDim.x; o0 < p.outputs; o0 += step) {
    const int64_t o = o0 + threadIdx.x;
    const bool valid = o < p.outputs;
    const T* xo = x + (valid ? ViewOffset(p.kept, o) : 0);
    float m = 0.0f;
    if constexpr (!kIntAcc<T>) {
      if (p.op == ReduceOp::kLogSumExp) {
        float mx = NegInf();
        if (valid) {
          for (int64_t r = threadIdx.y; r < p.count; r += blockDim.y) {
            mx = MaxNan(mx, ToFloat(xo[ViewOffset(p.reduced, r)]));
          }
        }
        m = ColumnCombine(mx, MaxNanFn{}, buf_max);
      }
    }
    Acc<T> acc = ReduceInit<T>(p.op);
    if (valid) {
      for (int64_t r = threadIdx.y; r < p.count; r += blockDim.y) {
        acc = ReduceFold<T>(p.op, acc, xo[ViewOffset(p.reduced, r)], m);
      }
    }
    acc = ColumnCombine(acc, CombineFn<T>{p.op}, buf);
    if (valid && threadIdx.y == 0) y[o] = ReduceFinish<T>(p.op, acc, m, p.count);
  }
}

template <typename T>
cudaError_t RunReduce(const ReduceParams& p, const void* x, void* y, cudaStream_t stream) {
  const T* px = static_cast<const T*>(x);
  T* py = static_cast<T*>(y);
  const bool rows = p.reduced.rank > 0 && p.reduced.strides[p.reduced.rank - 1] == 1;
  if (rows) {
    const RowLaunch l = RowLaunchFor(p.outputs, p.count, 512);
    if (l.block) {
      ReduceRowsKernel<T, true><<<l.grid, l.threads, 0, stream>>>(p, px, py);
    } else {
      ReduceRowsKernel<T, false><<<l.grid, l.threads, 0, stream>>>(p, px, py);
    }
  } else {
    dim3 block(32, 8);
    if (p.count >= 32 && p.outputs <= 4096) {
      block = dim3(32, 32);
    } else if (p.count < 8) {
      const unsigned int ty = p.count >= 4 ? 4 : p.count >= 2 ? 2 : 1;
      block = dim3(kThreads / ty, ty);
    }
    ReduceColumnsKernel<T>
        <<<BlocksFor(p.outputs, static_cast<int>(block.x)), block, 0, stream>>>(p, px, py);
  }
  return cudaGetLastError();
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------------

// Whether candidate (v, i) beats (bv, bi): a number beats NaN, then the extreme wins, then the
// first (select_last: the last) position. Index -1 is "no candidate".
__device__ __forceinline__ bool ArgBetter(float v, int64_t i, float bv, int64_t bi, bool is_max,
                                          bool last) {
  if (bi < 0) return i >= 0;
  if (i < 0) return false;
  const bool vn = isnan(v), bn = isnan(bv);
  if (vn != bn) return bn;
  if (!vn && v != bv) return is_max ? v > bv : v < bv;
  return last ? i > bi : i < bi;
}

template <typename T, bool kBlock>
__global__ void __launch_bounds__(kMaxBlockThreads)
    ArgRowsKernel(ArgParams p, const T* __restrict__ x, int64_t* __restrict__ y) {
  __shared__ float shared_v[kWarp];
  __shared__ int64_t shared_i[kWarp];
  const Group<kBlock> g;
  for (int64_t o = g.first; o < p.outer; o += g.step) {
    const T* row = x + o * p.len;
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t k = g.lane; k < p.len; k += g.size) {
      const float v = ToFloat(row[k]);
      if (ArgBetter(v, k, bv, bi, p.is_max, p.select_last)) {
        bv = v;
        bi = k;
      }
    }
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, bv, offset);
      const int64_t oi = __shfl_xor_sync(kFullMask, bi, offset);
      if (ArgBetter(ov, oi, bv, bi, p.is_max, p.select_last)) {
        bv = ov;
        bi = oi;
      }
    }
    if constexpr (kBlock) {
      __syncthreads();
      if ((threadIdx.x & (kWarp - 1)) == 0) {
        shared_v[threadIdx.x / kWarp] = bv;
        shared_i[threadIdx.x / kWarp] = bi;
      }
      __syncthreads();
      const int warps = static_cast<int>(blockDim.x) / kWarp;
      for (int w = 0; w < warps; ++w) {
        if (ArgBetter(shared_v[w], shared_i[w], bv, bi, p.is_max, p.select_last)) {
          bv = shared_v[w];
          bi = shared_i[w];
        }
      }
    }
    if (g.lane == 0) y[o] = bi;
  }
}

template <typename T>
__global__ void ArgColumnsKernel(ArgParams p, const T* __restrict__ x, int64_t* __restrict__ y) {
  const int64_t total = p.outer * p.inner;
  KILN_GRID_STRIDE_LOOP(idx, total) {
    const int64_t o = idx / p.inner, i = idx - o * p.inner;
    const T* col = x + o * p.len * p.inner + i;
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t k = 0; k < p.len; ++k) {
      const float v = ToFloat(col[k * p.inner]);
      if (ArgBetter(v, k, bv, bi, p.is_max, p.select_last)) {
        bv = v;
        bi = k;
      }
    }
    y[idx] = bi;
  }
}

template <typename T>
cudaError_t RunArg(const ArgParams& p, const void* x, int64_t* y, cudaStream_t stream) {
  const T* px = static_cast<const T*>(x);
  if (p.inner == 1) {
    const RowLaunch l = RowLaunchFor(p.outer, p.len, 512);
    if (l.block) {
      ArgRowsKernel<T, true><<<l.grid, l.threads, 0, stream>>>(p, px, y);
    } else {
      ArgRowsKernel<T, false><<<l.grid, l.threads, 0, stream>>>(p, px, y);
    }
  } else {
    ArgColumnsKernel<T><<<BlocksFor(p.outer * p.inner), kThreads, 0, stream>>>(p, px, y);
  }
  return cudaGetLastError();
}

// ---- Softmax / LogSoftmax -----------------------------------------------------------------------

// A running softmax denominator: m the max so far (never NaN), s = sum of exp(x - m).
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ void MaxSumAdd(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = a.s * ExpOrZero(a.m, x) + 1.0f;
    a.m = x;
  } else {
    a.s += ExpOrZero(x, a.m);  // NaN x makes s NaN, as the reference's sum
  }
}

__device__ __forceinline__ MaxSum MaxSumCombine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * ExpOrZero(a.m, m) + b.s * ExpOrZero(b.m, m)};
}

template <typename T>
__device__ __forceinline__ T SoftmaxOut(bool log, float x, const MaxSum& ms) {
  return FromFloat<T>(log ? x - ms.m - logf(ms.s) : expf(x - ms.m) / ms.s);
}

template <typename T, bool kBlock>
__global__ void __launch_bounds__(kMaxBlockThreads)
    SoftmaxRowsKernel(SoftmaxParams p, const T* __restrict__ x, T* __restrict__ y) {
  __shared__ float shared_m[kWarp];
  __shared__ float shared_s[kWarp];
  const Group<kBlock> g;
  for (int64_t row = g.first; row < p.outer; row += g.step) {
    const T* xr = x + row * p.len;
    T* yr = y + row * p.len;
    MaxSum ms{NegInf(), 0.0f};
    for (int64_t k = g.lane; k < p.len; k += g.size) MaxSumAdd(ms, ToFloat(xr[k]));
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
      const MaxSum other{__shfl_xor_sync(kFullMask, ms.m, offset),
                         __shfl_xor_sync(kFullMask, ms.s, offset)};
      ms = MaxSumCombine(ms, other);
    }
    if constexpr (kBlock) {
      __syncthreads();
      if ((threadIdx.x & (kWarp - 1)) == 0) {
        shared_m[threadIdx.x / kWarp] = ms.m;
        shared_s[threadIdx.x / kWarp] = ms.s;
      }
      __syncthreads();
      ms = {shared_m[0], shared_s[0]};
      const int warps = static_cast<int>(blockDim.x) / kWarp;
      for (int w = 1; w < warps; ++w) ms = MaxSumCombine(ms, {shared_m[w], shared_s[w]});
    }
    for (int64_t k = g.lane; k < p.len; k += g.size) {
      yr[k] = SoftmaxOut<T>(p.log, ToFloat(xr[k]), ms);
    }
  }
}

template <typename T>
__global__ void SoftmaxColumnsKernel(SoftmaxParams p, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = p.outer * p.inner;
  KILN_GRID_STRIDE_LOOP(idx, total) {
    const int64_t o = idx / p.inner, i = idx - o * p.inner;
    const int64_t base = o * p.len * p.inner + i;
    MaxSum ms{NegInf(), 0.0f};
    for (int64_t k = 0; k < p.len; ++k) MaxSumAdd(ms, ToFloat(x[base + k * p.inner]));
    for (int64_t k = 0; k < p.len; ++k) {
      const int64_t at = base + k * p.inner;
      y[at] = SoftmaxOut<T>(p.log, ToFloat(x[at]), ms);
    }
  }
}

template <typename T>
cudaError_t RunSoftmax(const SoftmaxParams& p, const void* x, void* y, cudaStream_t stream) {
  const T* px = static_cast<const T*>(x);
  T* py = static_cast<T*>(y);
  if (p.inner == 1) {
    const RowLaunch l = RowLaunchFor(p.outer, p.len, 1024);
    if (l.block) {
      SoftmaxRowsKernel<T, true><<<l.grid, l.threads, 0, stream>>>(p, px, py);
    } else {
      SoftmaxRowsKernel<T, false><<<l.grid, l.threads, 0, stream>>>(p, px, py);
    }
  } else {
    SoftmaxColumnsKernel<T><<<BlocksFor(p.outer * p.inner), kThreads, 0, stream>>>(p, px, py);
  }
  return cudaGetLastError();
}

// ---- LayerNormalization / InstanceNormalization -------------------------------------------------

template <typename T, bool kBlock>
__global__ void __launch_bounds__(kMaxBlockThreads)
    NormRowsKernel(NormParams p, const T* __restrict__ x, const T* __restrict__ scale,
                   const T* __restrict__ bias, T* __restrict__ y, float* __restrict__ mean_out,
                   float* __restrict__ inv_std_out) {
  __shared__ float shared[kWarp];
  const Group<kBlock> g;
  const float n = static_cast<float>(p.len);
  for (int64_t row = g.first; row < p.rows; row += g.step) {
    const T* xr = x + row * p.len;
    T* yr = y + row * p.len;
    float sum = 0.0f;
    for (int64_t j = g.lane; j < p.len; j += g.size) sum += ToFloat(xr[j]);
    const float mean = g.Reduce(sum, AddFn{}, shared) / n;
    float sq = 0.0f;
    for (int64_t j = g.lane; j < p.len; j += g.size) {
      const float d = ToFloat(xr[j]) - mean;
      sq += d * d;
    }
    const float var = g.Reduce(sq, AddFn{}, shared) / n;
    const float inv_std = 1.0f / sqrtf(var + p.epsilon);
    if (g.lane == 0) {
      if (mean_out != nullptr) mean_out[row] = mean;
      if (inv_std_out != nullptr) inv_std_out[row] = inv_std;
    }
    if (p.per_row) {
      const int64_t c = row % p.channels;
      const float mul = ToFloat(scale[c]) * inv_std;
      const float add = bias != nullptr ? ToFloat(bias[c]) : 0.0f;
      for (int64_t j = g.lane; j < p.len; j += g.size) {
        yr[j] = FromFloat<T>((ToFloat(xr[j]) - mean) * mul + add);
      }
    } else {
      for (int64_t j = g.lane; j < p.len; j += g.size) {
        float v = (ToFloat(xr[j]) - mean) * inv_std * ToFloat(scale[ViewOffset(p.scale, j)]);
        if (bias != nullptr) v += ToFloat(bias[ViewOffset(p.bias, j)]);
        yr[j] = FromFloat<T>(v);
      }
    }
  }
}

template <typename T>
cudaError_t RunNorm(const NormParams& p, const void* x, const void* scale, const void* bias,
                    void* y, float* mean, float* inv_std, cudaStream_t stream) {
  const RowLaunch l = RowLaunchFor(p.rows, p.len, 1024);
  const T* px = static_cast<const T*>(x);
  const T* ps = static_cast<const T*>(scale);
  const T* pb = static_cast<const T*>(bias);
  T* py = static_cast<T*>(y);
  if (l.block) {
    NormRowsKernel<T, true><<<l.grid, l.threads, 0, stream>>>(p, px, ps, pb, py, mean, inv_std);
  } else {
    NormRowsKernel<T, false><<<l.grid, l.threads, 0, stream>>>(p, px, ps, pb, py, mean, inv_std);
  }
  return cudaGetLastError();
}

// ---- BatchNormalization -------------------------------------------------------------------------

template <typename T, typename P>
__global__ void BatchNormKernel(BatchNormParams p, const T* __restrict__ x,
                                const P* __restrict__ scale, const P* __restrict__ bias,
                                const P* __restrict__ mean, const P* __restrict__ var,
                                T* __restrict__ y) {
  const int64_t total = p.n * p.channels * p.spatial;
  KILN_GRID_STRIDE_LOOP(i, total) {
    const int64_t c = (i / p.spatial) % p.channels;
    const float mul = ToFloat(scale[c]) / sqrtf(ToFloat(var[c]) + p.epsilon);
    y[i] = FromFloat<T>((ToFloat(x[i]) - ToFloat(mean[c])) * mul + ToFloat(bias[c]));
  }
}

template <typename T, typename P>
cudaError_t RunBatchNorm(const BatchNormParams& p, const void* x, const void* scale,
                         const void* bias, const void* mean, const void* var, void* y,
                         cudaStream_t stream) {
  BatchNormKernel<T, P><<<BlocksFor(p.n * p.channels * p.spatial), kThreads, 0, stream>>>(
      p, static_cast<const T*>(x), static_cast<const P*>(scale), static_cast<const P*>(bias),
      static_cast<const P*>(mean), static_cast<const P*>(var), static_cast<T*>(y));
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchReduce(const ReduceParams& p, const void* x, void* y, cudaStream_t stream) {
  switch (p.type) {
    case ElemType::kI32:
      return RunReduce<int32_t>(p, x, y, stream);
    case ElemType::kI64:
      return RunReduce<int64_t>(p, x, y, stream);
    default:
      break;
  }
  KILN_CUDA_FLOAT_SWITCH(p.type, T, return RunReduce<T>(p, x, y, stream));
  return cudaErrorInvalidValue;
}

cudaError_t LaunchArgReduce(const ArgParams& p, const void* x, int64_t* y, cudaStream_t stream) {
  KILN_CUDA_FLOAT_SWITCH(p.type, T, return RunArg<T>(p, x, y, stream));
  return cudaErrorInvalidValue;
}

cudaError_t LaunchSoftmax(const SoftmaxParams& p, const void* x, void* y, cudaStream_t stream) {
  KILN_CUDA_FLOAT_SWITCH(p.type, T, return RunSoftmax<T>(p, x, y, stream));
  return cudaErrorInvalidValue;
}

cudaError_t LaunchNorm(const NormParams& p, const void* x, const void* scale, const void* bias,
                       void* y, float* mean, float* inv_std, cudaStream_t stream) {
  KILN_CUDA_FLOAT_SWITCH(p.type, T, return RunNorm<T>(p, x, scale, bias, y, mean, inv_std, stream));
  return cudaErrorInvalidValue;
}

cudaError_t LaunchBatchNorm(const BatchNormParams& p, const void* x, const void* scale,
                            const void* bias, const void* mean, const void* var, void* y,
                            cudaStream_t stream) {
  if (p.param_type == ElemType::kF32) {
    KILN_CUDA_FLOAT_SWITCH(p.type, T,
                           return RunBatchNorm<T, float>(p, x, scale, bias, mean, var, y, stream));
  } else if (p.param_type == p.type) {
    KILN_CUDA_FLOAT_SWITCH(p.type, T,
                           return RunBatchNorm<T, T>(p, x, scale, bias, mean, var, y, stream));
  }
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda::reduce_ops
