// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the matrix products' own device code (blas.cu), called by blas.cc: the
// elementwise epilogue that follows a cuBLASLt product when cuBLASLt's own epilogues do not
// match the op, and the conversions of an FP32 operand to and from a 16-bit float type (the
// half-precision weight forms). Plain signatures only (this header is read by nvcc and by the
// C++ compiler); each returns cudaGetLastError() after its launch, and launches nothing for
// zero elements.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace kiln::cuda {

// y[i] = act(x[i] + c_scale * c[c_index(i)] + z[i]) for i in [0, count), in FP32, where the
// output is seen as [count / last, last] (row-major) and c_index(i) = row * c_row_stride +
// col * c_col_stride (stride 0 where c broadcasts). `y`, `c` and `z` are of `type` (FP32, FP16
// or BF16); `x` is FP32 and may be `y` itself (an FP32 output finished in place); a null `x`
// reads zeros (a product with K = 0); a null `c` or `z` adds nothing.
struct MatMulEpilogueParams {
  ElemType type = ElemType::kF32;
  const float* x = nullptr;
  void* y = nullptr;
  int64_t count = 0;
  int64_t last = 1;  // > 0
  const void* c = nullptr;
  int64_t c_row_stride = 0;
  int64_t c_col_stride = 0;
  float c_scale = 1.0f;
  const void* z = nullptr;
  Activation act;
};
cudaError_t LaunchMatMulEpilogue(const MatMulEpilogueParams& p, cudaStream_t stream);

// dst[i] = src[i] rounded to `dst_type` (FP16 or BF16, round to nearest even), i in [0, n).
cudaError_t LaunchFloatToHalf(const float* src, ElemType dst_type, void* dst, int64_t n,
                              cudaStream_t stream);

// dst[i] = src[i] widened to FP32 (src of FP16 or BF16 `src_type`), i in [0, n).
cudaError_t LaunchHalfToFloat(ElemType src_type, const void* src, float* dst, int64_t n,
                              cudaStream_t stream);

}  // namespace kiln::cuda
