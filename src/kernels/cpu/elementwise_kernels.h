// SPDX-License-Identifier: Apache-2.0
#pragma once
// Contiguous FP32 microkernels of kiln's own CPU kernels, with runtime ISA dispatch (isa.h).
// The dispatching entry points (namespace kiln::cpu) pick avx2:: when ActiveIsa() is kAvx2,
// scalar:: otherwise. The avx2:: versions are defined in *_avx2.cc files built with -mavx2 -mfma
// and must only be called when the CPU has AVX2 and FMA.
//
// All functions run on the calling thread (callers split work with ParallelFor) and allow
// y == x (in place).

#include <cstdint>

#include "kernels/cpu/activation.h"

namespace kiln::cpu {

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

// y[i] = act(x[i]).
void ActivationF32(const Activation& act, const float* x, float* y, int64_t n);
// y[i] = a[i] op b[i].
void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n);
// y[i] = a[i] op s (scalar on the right) or s op a[i] (`scalar_first`).
void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n);
// Sum and max of x[0..n).
float SumF32(const float* x, int64_t n);
float MaxF32(const float* x, int64_t n);
// y[i] = exp(x[i] - max) and returns the sum of y (Softmax's inner step).
float ExpShiftSumF32(const float* x, float max, float* y, int64_t n);
// y[i] = x[i] * s.
void ScaleF32(const float* x, float s, float* y, int64_t n);
// LayerNorm of one row: y = (x - mean) * rstd * scale + bias (bias may be null).
void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n);

namespace scalar {
void ActivationF32(const Activation& act, const float* x, float* y, int64_t n);
void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n);
void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n);
float SumF32(const float* x, int64_t n);
float MaxF32(const float* x, int64_t n);
float ExpShiftSumF32(const float* x, float max, float* y, int64_t n);
void ScaleF32(const float* x, float s, float* y, int64_t n);
void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n);
}  // namespace scalar

namespace avx2 {
void ActivationF32(const Activation& act, const float* x, float* y, int64_t n);
void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n);
void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n);
float SumF32(const float* x, int64_t n);
float MaxF32(const float* x, int64_t n);
float ExpShiftSumF32(const float* x, float max, float* y, int64_t n);
void ScaleF32(const float* x, float s, float* y, int64_t n);
void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n);
}  // namespace avx2

}  // namespace kiln::cpu
