// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the device code of the cuDNN convolutions (dnn.cu), called by dnn.cc: the copy of
// X that cuDNN convolves when it cannot take X as it is (a zero-padded copy for asymmetric pads,
// a copy converted to the weights' type for half-precision weights), and the epilogue that
// applies bias, residual and activation after the convolution. Plain C++ signatures; each
// enqueues its work on `stream` and returns cudaGetLastError().

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace kiln::cuda {

// The most dimensions of a convolution operand: [N, C, D, H, W].
inline constexpr int kDnnMaxRank = 5;

// dst = src zero-padded: dst element (i0, ..., i_{r-1}) is src element (i0 - begin[0], ...) where
// that lies inside src, else 0. Dims N and C have begin 0 and equal extents.
struct DnnPadParams {
  int32_t rank = 0;
  int64_t src_dims[kDnnMaxRank] = {};
  int64_t dst_dims[kDnnMaxRank] = {};
  int64_t begin[kDnnMaxRank] = {};
};

// `dst` (dst_type) = `src` (src_type) converted and, when `pad` is non-null, zero-padded as it
// says; without `pad`, n elements are converted. Types: kF32, kF16, kBF16 (through FP32).
cudaError_t LaunchDnnPrepareInput(ElemType src_type, const void* src, ElemType dst_type, void* dst,
                                  int64_t n, const DnnPadParams* pad, cudaStream_t stream);

// y[i] = act(conv[i] + bias[c] + z[i]) over the n elements of Y [N, channels, inner...], c the
// channel of element i (i / inner % channels), in FP32. `conv` (conv_type) null: the convolution
// is all zeros (an empty reduction). `bias` and `z` (of y_type, either may be null). `conv` may be
// `y` (in place). Types: kF32, kF16, kBF16.
struct DnnEpilogueParams {
  int64_t n = 0;
  int64_t inner = 1;
  int64_t channels = 1;
  Activation act;
};
cudaError_t LaunchDnnEpilogue(ElemType conv_type, const void* conv, ElemType y_type,
                              const void* bias, const void* z, void* y, const DnnEpilogueParams& p,
                              cudaStream_t stream);

}  // namespace kiln::cuda
