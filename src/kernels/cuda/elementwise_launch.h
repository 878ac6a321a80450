// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the elementwise CUDA kernels, called by elementwise.cc:
//   elementwise.cu        the broadcasting ops (binary math, Pow, PRelu, comparisons, logic, the
//                         variadic Max / Min / Sum / Mean, Where, Expand) and Cast;
//   elementwise_unary.cu  the unary math and activation ops (Clip and ai.kiln Gelu included) and
//                         ai.kiln ChannelAffine.
// Plain C++ (params.h structs and cudaStream_t), read by both compilers. Every launcher enqueues
// its work on `stream`, launches nothing when n == 0, and returns cudaGetLastError() after the
// launch (cudaErrorInvalidValue for an op or type it lacks; the host code checks types first).
// Pointers are device pointers to dense row-major tensors.
//
// Broadcasting operands come as StridedViews over the output's merged dims (BroadcastShapes in
// common.h): the views of one launch share rank and dims, and give each operand's element
// strides (0 where it broadcasts). `n` is the output's element count.
//
// Numerics: FP16 / BF16 load as FP32, compute in FP32 and round to nearest even once at the
// store; FP32 computes in FP32 (Pow in double); INT32 / INT64 wrap modulo 2^n. BOOL is one byte,
// read as nonzero = true and written as 0 / 1.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace kiln::cuda {

// --- elementwise.cu ------------------------------------------------------------------------------

enum class BinaryOp : int32_t {
  kAdd = 0,  // a, b and y of `type`: FP32, FP16, BF16, INT32, INT64
  kSub,
  kMul,
  kDiv,    // integers: truncated toward zero, x / -1 wraps, x / 0 gives 0 (see elementwise.cc)
  kPRelu,  // a = X, b = slope (floats): y = X < 0 ? slope * X : X
  kEqual,  // BOOL y; Equal also takes BOOL operands
  kLess,
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,  // BOOL a, b and y
  kOr,
  kXor,
};

// y[i] = a[ia] op b[ib] for the n output elements.
cudaError_t LaunchBinary(BinaryOp op, ElemType type, const void* a, const StridedView& va,
                         const void* b, const StridedView& vb, void* y, int64_t n,
                         cudaStream_t stream);

// Pow: y = base ^ exponent, computed in double from the operands' values and rounded once to the
// base's type (FP32, FP16, BF16). The exponent is FP32, FP16, BF16, INT32 or INT64.
cudaError_t LaunchPow(ElemType base_type, const void* base, const StridedView& vbase,
                      ElemType exp_type, const void* exponent, const StridedView& vexp, void* y,
                      int64_t n, cudaStream_t stream);

enum class VariadicOp : int32_t { kMax = 0, kMin, kSum, kMean };

// y = inputs[0] op inputs[1] op ... (left to right, in FP32 for the float types; Max / Min
// propagate NaN), Mean divides the sum by num_inputs. 1 <= num_inputs <= 3; `type` FP32, FP16,
// BF16 (and INT32 / INT64 for Max / Min).
cudaError_t LaunchVariadic(VariadicOp op, ElemType type, int num_inputs, const void* const* inputs,
                           const StridedView* views, void* y, int64_t n, cudaStream_t stream);

// Where: y = cond ? a : b (cond BOOL); a, b and y have elements of `elem_bytes` (1, 2, 4, 8).
cudaError_t LaunchWhere(int elem_bytes, const void* cond, const StridedView& vcond, const void* a,
                        const StridedView& va, const void* b, const StridedView& vb, void* y,
                        int64_t n, cudaStream_t stream);

// A broadcasting copy (Expand): y[i] = x[ix], elements of `elem_bytes` (1, 2, 4, 8).
cudaError_t LaunchBroadcastCopy(int elem_bytes, const void* x, const StridedView& vx, void* y,
                                int64_t n, cudaStream_t stream);

// Cast: n elements of x (type `from`) converted to `to` (FP32, FP16, BF16, FP64, INT32, INT64,
// INT8, UINT8, BOOL), with the reference's rules (src/kernels/ref/cast.cc): to BOOL x != 0 (NaN
// is true); integers to integers modulo 2^n; floats to integers truncated toward zero, NaN -> 0,
// saturated to the INT64 range, then modulo 2^n; to FP16 / BF16 rounded once from the exact
// value (through a round-to-odd FP32).
cudaError_t LaunchCast(ElemType from, ElemType to, const void* x, void* y, int64_t n,
                       cudaStream_t stream);

// --- elementwise_unary.cu ------------------------------------------------------------------------

enum class UnaryOp : int32_t {
  kRelu = 0,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kNeg,  // also INT32 / INT64 (wrapping)
  kAbs,  // also INT32 / INT64 (wrapping)
  kErf,
  kFloor,
  kCeil,
  kRound,  // half to even
  kSign,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kSoftplus,
  kSoftsign,
  kElu,          // alpha
  kSelu,         // alpha, gamma
  kCelu,         // alpha (nonzero)
  kLeakyRelu,    // alpha
  kHardSigmoid,  // alpha, beta
  kHardSwish,
  kThresholdedRelu,  // alpha
  kShrink,           // alpha = lambd, beta = bias
  kClip,             // alpha = min, beta = max
  kGelu,             // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,         // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kIsNaN,            // BOOL y
  kIsInf,            // BOOL y; alpha != 0: detect -inf, beta != 0: detect +inf
  kNot,              // BOOL x and y
};

struct UnaryParams {
  UnaryOp op = UnaryOp::kRelu;
  float alpha = 0.0f;
  float beta = 0.0f;
  float gamma = 0.0f;
};

// y[i] = op(x[i]) for n elements; x of `type` (FP32, FP16, BF16; INT32 / INT64 for Neg and Abs;
// BOOL for Not), y of the same type (BOOL for IsNaN, IsInf).
cudaError_t LaunchUnary(const UnaryParams& p, ElemType type, const void* x, void* y, int64_t n,
                        cudaStream_t stream);

// ai.kiln ChannelAffine on a plain X [N, C, inner...]: y[i] = act(x[i] * scale[c] + bias[c]) with
// c = (i / inner) % channels, the product and the sum each rounded to FP32. X and y of x_type
// (FP32, FP16, BF16); scale and bias of param_type (FP32 or x_type).
cudaError_t LaunchChannelAffine(ElemType x_type, ElemType param_type, const void* x,
                                const void* scale, const void* bias, void* y, int64_t n,
                                int64_t channels, int64_t inner, const Activation& act,
                                cudaStream_t stream);

}  // namespace kiln::cuda
