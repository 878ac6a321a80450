// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the reduce group's device code (normalizations, reductions, pools, attention),
// shared by its host code (reduce*.cc) and its device code (reduce*.cu). Plain data only: the
// host code checks shapes and attributes, allocates the outputs and fills one of these structs;
// each launcher enqueues its kernels on `stream` and returns cudaGetLastError(). Every pointer is
// device memory; inputs are contiguous row-major. A launcher never synchronizes and is never
// called for an empty output (except where a struct says otherwise).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace kiln::cuda::reduce_ops {

// --- Reductions (reduce.cu) ---------------------------------------------------------------------

enum class ReduceOp : int32_t {
  kSum = 0,
  kMean,
  kMax,  // NaN propagates
  kMin,  // NaN propagates
  kProd,
  kL1,
  kL2,
  kLogSum,
  kLogSumExp,
  kSumSquare,
};

// y[o] = reduce over r < count of x[offset(kept, o) + offset(reduced, r)], for o < outputs (the
// output in row-major order of the kept dims). `kept` and `reduced` are views into x (input
// strides) over the kept and the reduced dimensions. count may be 0 (y gets the identity of the
// op: 0, 1, -inf / +inf for max / min, -inf for the logs, NaN for a mean).
// Floating types take every op (accumulated in FP32); kI32 / kI64 take kSum (wrapping), kMax and
// kMin only.
struct ReduceParams {
  ElemType type = ElemType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int64_t outputs = 0;  // > 0
  int64_t count = 0;    // elements folded into each output
  StridedView kept;
  StridedView reduced;
};
cudaError_t LaunchReduce(const ReduceParams& p, const void* x, void* y, cudaStream_t stream);

// ArgMax / ArgMin of x viewed as [outer, len, inner] along len, as INT64 into y [outer, inner]:
// the first (select_last: the last) position of the extreme; NaN loses to any number; a row of
// NaNs gives 0 (select_last: len - 1). Floating types only. REQUIRES: len >= 1.
struct ArgParams {
  ElemType type = ElemType::kF32;
  bool is_max = true;
  bool select_last = false;
  int64_t outer = 0, len = 0, inner = 0;
};
cudaError_t LaunchArgReduce(const ArgParams& p, const void* x, int64_t* y, cudaStream_t stream);

// --- Normalizations (reduce.cu) ------------------------------------------------------------

// Softmax (or LogSoftmax) of x viewed as [outer, len, inner] along len, max-subtracted, FP32.
struct SoftmaxParams {
  ElemType type = ElemType::kF32;
  bool log = false;
  int64_t outer = 0, len = 0, inner = 0;
};
cudaError_t LaunchSoftmax(const SoftmaxParams& p, const void* x, void* y, cudaStream_t stream);

// Mean / variance normalization of `rows` contiguous rows of `len` elements (two-pass FP32
// statistics, population variance): y = (x - mean) / sqrt(var + epsilon) * scale + bias.
//   LayerNormalization (per_row false): scale and bias are indexed per element of the row through
//     `scale` / `bias` (views over the normalized dims, stride 0 where broadcast);
//   InstanceNormalization (per_row true): one scale / bias per row, index row % channels.
// bias may be null (no bias). mean / inv_std, when non-null, receive each row's mean and
// 1 / sqrt(var + epsilon) (FP32 [rows]). Launched whenever rows > 0 (len may be 0).
struct NormParams {
  ElemType type = ElemType::kF32;
  int64_t rows = 0, len = 0;
  float epsilon = 1e-5f;
  bool per_row = false;
  int64_t channels = 1;  // per_row only
  StridedView scale, bias;
};
cudaError_t LaunchNorm(const NormParams& p, const void* x, const void* scale, const void* bias,
                       void* y, float* mean, float* inv_std, cudaStream_t stream);

// Inference BatchNormalization of x [n, channels, spatial]: y = (x - mean[c]) * scale[c] /
// sqrt(var[c] + epsilon) + bias[c]. The four statistics have type `param_type`: `type` or kF32.
struct BatchNormParams {
  ElemType type = ElemType::kF32;
  ElemType param_type = ElemType::kF32;
  int64_t n = 0, channels = 0, spatial = 0;
  float epsilon = 1e-5f;
};
cudaError_t LaunchBatchNorm(const BatchNormParams& p, const void* x, const void* scale,
                            const void* bias, const void* mean, const void* var, void* y,
                            cudaStream_t stream);

// --- Pools (reduce_pool.cu) ---------------------------------------------------------------------

// Spatial ranks the pools take (1-D and 2-D are run as 3-D with leading size-1 dims).
inline constexpr int kPoolRank = 3;

// MaxPool / AveragePool over `planes` planes of x [planes, in...] into y [planes, out...], with
// the window geometry of ref/spatial.h resolved by the host. Max takes the first maximum of the
// taps inside the input; average divides their FP32 sum by their count, or with
// count_include_pad by the number of taps inside the padded input. REQUIRES: every window has a
// tap to take (checked by the host).
struct PoolParams {
  ElemType type = ElemType::kF32;
  bool is_max = true;
  bool count_include_pad = false;
  int64_t planes = 0;
  int64_t in[kPoolRank] = {1, 1, 1};
  int64_t kernel[kPoolRank] = {1, 1, 1};
  int64_t stride[kPoolRank] = {1, 1, 1};
  int64_t dilation[kPoolRank] = {1, 1, 1};
  int64_t pad_begin[kPoolRank] = {0, 0, 0};
  int64_t pad_end[kPoolRank] = {0, 0, 0};
  int64_t out[kPoolRank] = {1, 1, 1};
};
cudaError_t LaunchPool(const PoolParams& p, const void* x, void* y, cudaStream_t stream);

// --- Attention (reduce_attention.cu) ------------------------------------------------------------

// The largest head dims (D of Q and K, Dv of V) the attention kernel takes.
inline constexpr int64_t kAttentionMaxHeadDim = 256;

// Y [batch, s, dv] = Softmax(scale * Q K^T + Mask) V per batch, Q [batch, s, d], K [batch, t, d],
// V [batch, t, dv], online softmax over tiles of keys, FP32. The mask element of (b, i, j) is at
// offset(mask_lead, b) + i * mask_stride_s + j * mask_stride_t (stride 0 where it broadcasts);
// mask null: none. REQUIRES: d, dv <= kAttentionMaxHeadDim; batch, s, dv > 0 (t and d may be 0).
struct AttentionParams {
  ElemType type = ElemType::kF32;
  int64_t batch = 0, s = 0, t = 0, d = 0, dv = 0;
  float scale = 1.0f;
  StridedView mask_lead;  // over the flattened batch's dims
  int64_t mask_stride_s = 0, mask_stride_t = 0;
};
cudaError_t LaunchAttention(const AttentionParams& p, const void* q, const void* k, const void* v,
                            const void* mask, void* y, cudaStream_t stream);

}  // namespace kiln::cuda::reduce_ops
