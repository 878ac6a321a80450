// SPDX-License-Identifier: Apache-2.0
#pragma once
// Conversions between 16-bit floats (FLOAT16, BFLOAT16) and FP32 for half-precision weights
// (dnnl_util.h PackedWeights): the CPU kernels keep such weights in 16 bits and widen them to
// FP32 on every call, so the widening is vectorized and split over the session's OpenMP team.
//
// Dispatch (isa.h): with ActiveIsa() kAvx512 the AVX-512 code runs (half_kernels_avx512.cc,
// `_mm512_cvtph_ps`), with kAvx2 the AVX2 code (half_kernels_avx2.cc, `_mm256_cvtph_ps`, FLOAT16
// only where the CPU reports F16C); scalar:: otherwise. All produce exactly Float16ToFloat /
// BFloat16ToFloat (tensor/dtype.h) for every input, denormals included (NaNs stay NaNs; a
// signalling NaN may come back quiet). Narrowing (FP32 -> 16 bits, round to nearest even) happens
// once, when weights are packed, and uses the scalar dtype.h functions.

#include <cstdint>

#include "tensor/dtype.h"

namespace kiln::cpu {

// y[i] = widen(x[i]) for n elements on the calling thread. REQUIRES: dtype is kFloat16 or
// kBFloat16.
void HalfToFloat(DataType dtype, const uint16_t* x, float* y, int64_t n);
// The same, split over the calling thread's OpenMP team (ParallelFor; inline when small).
void HalfToFloatParallel(DataType dtype, const uint16_t* x, float* y, int64_t n);
// y[i] = narrow(x[i]) (round to nearest even), split over the OpenMP team.
// REQUIRES: dtype is kFloat16 or kBFloat16.
void FloatToHalfParallel(DataType dtype, const float* x, uint16_t* y, int64_t n);

namespace scalar {
void Fp16ToFloat(const uint16_t* x, float* y, int64_t n);
void Bf16ToFloat(const uint16_t* x, float* y, int64_t n);
}  // namespace scalar

namespace avx2 {  // AVX2 + F16C
void Fp16ToFloat(const uint16_t* x, float* y, int64_t n);
void Bf16ToFloat(const uint16_t* x, float* y, int64_t n);
}  // namespace avx2

namespace avx512 {  // AVX-512F
void Fp16ToFloat(const uint16_t* x, float* y, int64_t n);
void Bf16ToFloat(const uint16_t* x, float* y, int64_t n);
}  // namespace avx512

}  // namespace kiln::cpu
