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

// Max / Min follow the reference: NaN when either operand is NaN, else a unless b is greater
// (smaller), so among equal values (+0 and -0) the first operand wins. Pow computes as
// PowScalarExpF32 / PowF32 below.
enum class BinaryKind { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow };

// The unary math ops of the reference's math_unary.cc, FLOAT only. Exact (bit for bit, NaN as
// NaN) at every level: Neg, Abs, Sqrt, Reciprocal (a true division), Floor, Ceil, Round (half to
// even), Sign (keeps -0 and NaN). Log and Softplus are exact on the scalar level (the
// reference's own float formula) and within 1 ulp of it on AVX2 (computed in double, see the
// NOTE in elementwise_kernels_avx2.cc; the reference's logf / log1pf are themselves within
// 1 ulp); Softplus within 2 ulp.
enum class UnaryKind {
  kNeg,
  kAbs,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kSign,
  kLog,
  kSoftplus,
};

// FLOAT in, BOOL out (the reference's comparisons: NaN compares false, -0 == +0).
enum class CompareKind { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

// y[i] = act(x[i]).
void ActivationF32(const Activation& act, const float* x, float* y, int64_t n);
// y[i] = a[i] op b[i].
void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n);
// y[i] = a[i] op s (scalar on the right) or s op a[i] (`scalar_first`).
void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n);
// y[i] = op(x[i]).
void UnaryF32(UnaryKind op, const float* x, float* y, int64_t n);
// y[i] = pow(x[i], e) for one exponent, as the reference computes it: (float) pow((double) x,
// e). Exact for e = 0, 1, 2 (x * x), 0.5 (sqrt with pow's +0 for -0 and +inf for -inf), -1
// (1 / x) and 3 (x^3 in double) at every level; other exponents are exact on the scalar level
// and within 1 ulp on AVX2 (exp(e * log|x|) in double with C99 pow's special cases).
void PowScalarExpF32(const float* x, double e, float* y, int64_t n);
// y[i] = pow(a[i], b[i]) with the same contract as PowScalarExpF32's general exponent.
void PowF32(const float* a, const float* b, float* y, int64_t n);
// y[i] = a[i] op b[i], and with one operand a scalar (`scalar_first`: s op a[i]).
void CompareF32(CompareKind op, const float* a, const float* b, bool* y, int64_t n);
void CompareScalarF32(CompareKind op, const float* a, float s, bool scalar_first, bool* y,
                      int64_t n);
// The scalar definitions, shared with the kernels' strided loops.
float ApplyBinaryF32(BinaryKind op, float a, float b);
bool ApplyCompareF32(CompareKind op, float a, float b);

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
// InstanceNorm of one row (one channel): y = (x - mean) * rstd * scale + bias.
void InstanceNormRowF32(const float* x, float scale, float bias, float epsilon, float* y,
                        int64_t n);
// acc[l] = the sum (or, `max`, the maximum; a NaN wins) of x[g * lanes + l] over g < groups
// (groups >= 1), in order of g: a blocked tensor's global pooling over its pixels.
void LanesReduceF32(bool max, const float* x, int64_t groups, int64_t lanes, float* acc);
// y[g * lanes + l] = x[g * lanes + l] op v[l] for g < groups (v[l] op x[...] when `v_first`):
// one operand repeating a short row (a blocked tensor's per-channel lanes) over the other.
void LanesBinaryF32(BinaryKind op, const float* x, const float* v, bool v_first, float* y,
                    int64_t groups, int64_t lanes);
// y[g * lanes + l] = x[g * lanes + l] * scale[l] + bias[l] for g < groups (then max(., 0) when
// `relu`): a per-channel affine over `groups` pixels of a blocked tensor's channel block.
void LanesAffineF32(const float* x, const float* scale, const float* bias, bool relu, float* y,
                    int64_t groups, int64_t lanes);

namespace scalar {
void UnaryF32(UnaryKind op, const float* x, float* y, int64_t n);
void PowScalarExpF32(const float* x, double e, float* y, int64_t n);
void PowF32(const float* a, const float* b, float* y, int64_t n);
void CompareF32(CompareKind op, const float* a, const float* b, bool* y, int64_t n);
void CompareScalarF32(CompareKind op, const float* a, float s, bool scalar_first, bool* y,
                      int64_t n);
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
// InstanceNorm of one row (one channel): y = (x - mean) * rstd * scale + bias.
void InstanceNormRowF32(const float* x, float scale, float bias, float epsilon, float* y,
                        int64_t n);
// y[g * lanes + l] = x[g * lanes + l] * scale[l] + bias[l] for g < groups (then max(., 0) when
// `relu`): a per-channel affine over `groups` pixels of a blocked tensor's channel block.
void LanesAffineF32(const float* x, const float* scale, const float* bias, bool relu, float* y,
                    int64_t groups, int64_t lanes);
void LanesBinaryF32(BinaryKind op, const float* x, const float* v, bool v_first, float* y,
                    int64_t groups, int64_t lanes);
void LanesReduceF32(bool max, const float* x, int64_t groups, int64_t lanes, float* acc);
}  // namespace scalar

namespace avx2 {
void UnaryF32(UnaryKind op, const float* x, float* y, int64_t n);
void PowScalarExpF32(const float* x, double e, float* y, int64_t n);
void PowF32(const float* a, const float* b, float* y, int64_t n);
void CompareF32(CompareKind op, const float* a, const float* b, bool* y, int64_t n);
void CompareScalarF32(CompareKind op, const float* a, float s, bool scalar_first, bool* y,
                      int64_t n);
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
// InstanceNorm of one row (one channel): y = (x - mean) * rstd * scale + bias.
void InstanceNormRowF32(const float* x, float scale, float bias, float epsilon, float* y,
                        int64_t n);
// y[g * lanes + l] = x[g * lanes + l] * scale[l] + bias[l] for g < groups (then max(., 0) when
// `relu`): a per-channel affine over `groups` pixels of a blocked tensor's channel block.
void LanesAffineF32(const float* x, const float* scale, const float* bias, bool relu, float* y,
                    int64_t groups, int64_t lanes);
void LanesBinaryF32(BinaryKind op, const float* x, const float* v, bool v_first, float* y,
                    int64_t groups, int64_t lanes);
void LanesReduceF32(bool max, const float* x, int64_t groups, int64_t lanes, float* acc);
}  // namespace avx2

}  // namespace kiln::cpu
