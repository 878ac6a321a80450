// SPDX-License-Identifier: Apache-2.0
// Device code of the unary elementwise ops and ai.kiln ChannelAffine (elementwise_launch.h).
//
// NOTE: one grid-stride kernel per (op, type), the op's scalar function a template argument, so
// each kernel is a plain load-compute-store loop. FP16 / BF16 compute in FP32 and round once at
// the store. The formulas are the reference kernels' (src/kernels/ref/math_unary.cc and
// kiln_ops.cc) on the FP32 math functions, with the same NaN behaviour (Relu, Clip and Sign keep
// NaN); where the reference rounds a product before adding to it (HardSigmoid, ChannelAffine),
// __fmul_rn / __fadd_rn keep nvcc from fusing the two into an FMA. Two forms differ from the
// reference's text for accuracy in FP32: Gelu is 0.5 x erfc(-x / sqrt 2) (no cancellation for
// negative x) and the tanh Gelu is x / (1 + exp(-2u)) (the same function, 0.5 x (1 + tanh u)).

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/elementwise_launch.h"

namespace kiln::cuda {
namespace {

// The ops with a float result, applied in FP32.
template <UnaryOp kOp>
__device__ __forceinline__ float Apply(float x, const UnaryParams& p) {
  if constexpr (kOp == UnaryOp::kRelu) {
    return x < 0.0f ? 0.0f : x;  // keeps NaN
  } else if constexpr (kOp == UnaryOp::kSigmoid) {
    // As the reference: exp never overflows.
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
  } else if constexpr (kOp == UnaryOp::kTanh) {
    return tanhf(x);
  } else if constexpr (kOp == UnaryOp::kExp) {
    return expf(x);
  } else if constexpr (kOp == UnaryOp::kLog) {
    return logf(x);
  } else if constexpr (kOp == UnaryOp::kSqrt) {
    return sqrtf(x);
  } else if constexpr (kOp == UnaryOp::kReciprocal) {
    return 1.0f / x;
  } else if constexpr (kOp == UnaryOp::kNeg) {
    return -x;
  } else if constexpr (kOp == UnaryOp::kAbs) {
    return fabsf(x);
  } else if constexpr (kOp == UnaryOp::kErf) {
    return erff(x);
  } else if constexpr (kOp == UnaryOp::kFloor) {
    return floorf(x);
  } else if constexpr (kOp == UnaryOp::kCeil) {
    return ceilf(x);
  } else if constexpr (kOp == UnaryOp::kRound) {
    return rintf(x);  // half to even
  } else if constexpr (kOp == UnaryOp::kSign) {
    return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);  // keeps 0, -0 and NaN
  } else if constexpr (kOp == UnaryOp::kSin) {
    return sinf(x);
  } else if constexpr (kOp == UnaryOp::kCos) {
    return cosf(x);
  } else if constexpr (kOp == UnaryOp::kTan) {
    return tanf(x);
  } else if constexpr (kOp == UnaryOp::kAsin) {
    return asinf(x);
  } else if constexpr (kOp == UnaryOp::kAcos) {
    return acosf(x);
  } else if constexpr (kOp == UnaryOp::kAtan) {
    return atanf(x);
  } else if constexpr (kOp == UnaryOp::kSinh) {
    return sinhf(x);
  } else if constexpr (kOp == UnaryOp::kCosh) {
    return coshf(x);
  } else if constexpr (kOp == UnaryOp::kAsinh) {
    return asinhf(x);
  } else if constexpr (kOp == UnaryOp::kAcosh) {
    return acoshf(x);
  } else if constexpr (kOp == UnaryOp::kAtanh) {
    return atanhf(x);
  } else if constexpr (kOp == UnaryOp::kSoftplus) {
    // log(1 + exp(x)) without overflow for large x.
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
  } else if constexpr (kOp == UnaryOp::kSoftsign) {
    return x / (1.0f + fabsf(x));
  } else if constexpr (kOp == UnaryOp::kElu) {
    return x < 0.0f ? p.alpha * expm1f(x) : x;
  } else if constexpr (kOp == UnaryOp::kSelu) {
    return p.gamma * (x <= 0.0f ? p.alpha * expm1f(x) : x);
  } else if constexpr (kOp == UnaryOp::kCelu) {
    return x > 0.0f ? x : p.alpha * expm1f(x / p.alpha);
  } else if constexpr (kOp == UnaryOp::kLeakyRelu) {
    return x < 0.0f ? p.alpha * x : x;
  } else if constexpr (kOp == UnaryOp::kHardSigmoid) {
    return fmaxf(0.0f, fminf(1.0f, __fadd_rn(__fmul_rn(p.alpha, x), p.beta)));
  } else if constexpr (kOp == UnaryOp::kHardSwish) {
    return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
  } else if constexpr (kOp == UnaryOp::kThresholdedRelu) {
    return x > p.alpha ? x : 0.0f;
  } else if constexpr (kOp == UnaryOp::kShrink) {
    return x < -p.alpha ? x + p.beta : (x > p.alpha ? x - p.beta : 0.0f);
  } else if constexpr (kOp == UnaryOp::kClip) {
    // NaN passes; min > max gives max everywhere (numpy's clip), as the reference.
    float v = x < p.alpha ? p.alpha : x;
    return v > p.beta ? p.beta : v;
  } else if constexpr (kOp == UnaryOp::kGelu) {
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
  } else if constexpr (kOp == UnaryOp::kGeluTanh) {
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
  } else {
    return x;
  }
}

template <UnaryOp kOp, typename T>
__global__ void __launch_bounds__(kThreads)
    UnaryFloatKernel(const T* x, T* y, int64_t n, UnaryParams p) {
  KILN_GRID_STRIDE_LOOP(i, n) { y[i] = FromFloat<T>(Apply<kOp>(ToFloat(x[i]), p)); }
}

// IsNaN, IsInf: a float type in, BOOL out.
template <UnaryOp kOp, typename T>
__global__ void __launch_bounds__(kThreads)
    PredicateKernel(const T* x, uint8_t* y, int64_t n, UnaryParams p) {
  KILN_GRID_STRIDE_LOOP(i, n) {
    const float v = ToFloat(x[i]);
    bool r;
    if constexpr (kOp == UnaryOp::kIsNaN) {
      r = isnan(v);
    } else {
      r = isinf(v) && (v > 0.0f ? p.beta != 0.0f : p.alpha != 0.0f);
    }
    y[i] = r ? 1 : 0;
  }
}

// Neg and Abs on INT32 / INT64, wrapping (|INT_MIN| = INT_MIN).
template <UnaryOp kOp, typename T>
__global__ void __launch_bounds__(kThreads) UnaryIntKernel(const T* x, T* y, int64_t n) {
  using U = std::make_unsigned_t<T>;
  KILN_GRID_STRIDE_LOOP(i, n) {
    const T v = x[i];
    const bool negate = kOp == UnaryOp::kNeg || v < 0;
    y[i] = negate ? static_cast<T>(U{0} - static_cast<U>(v)) : v;
  }
}

__global__ void __launch_bounds__(kThreads) NotKernel(const uint8_t* x, uint8_t* y, int64_t n) {
  KILN_GRID_STRIDE_LOOP(i, n) { y[i] = x[i] == 0 ? 1 : 0; }
}

template <UnaryOp kOp>
cudaError_t LaunchFloatOp(const UnaryParams& p, ElemType type, const void* x, void* y, int64_t n,
                          cudaStream_t stream) {
  const unsigned int blocks = BlocksFor(n);
  constexpr bool kPredicate = kOp == UnaryOp::kIsNaN || kOp == UnaryOp::kIsInf;
  constexpr bool kIntegers = kOp == UnaryOp::kNeg || kOp == UnaryOp::kAbs;
  switch (type) {
    case ElemType::kI32:
    case ElemType::kI64:
      if constexpr (kIntegers) {
        if (type == ElemType::kI32) {
          UnaryIntKernel<kOp, int32_t><<<blocks, kThreads, 0, stream>>>(
              static_cast<const int32_t*>(x), static_cast<int32_t*>(y), n);
        } else {
          UnaryIntKernel<kOp, int64_t><<<blocks, kThreads, 0, stream>>>(
              static_cast<const int64_t*>(x), static_cast<int64_t*>(y), n);
        }
        return cudaGetLastError();
      } else {
        return cudaErrorInvalidValue;
      }
    default:
      break;
  }
  KILN_CUDA_FLOAT_SWITCH(type, T, {
    if constexpr (kPredicate) {
      PredicateKernel<kOp, T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                               static_cast<uint8_t*>(y), n, p);
    } else {
      UnaryFloatKernel<kOp, T>
          <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, p);
    }
  });
  return cudaGetLastError();
}

template <typename T, typename P, typename Idx>
__global__ void __launch_bounds__(kThreads)
    ChannelAffineKernel(const T* x, const P* scale, const P* bias, T* y, int64_t n, Idx channels,
                        Idx inner, Activation act) {
  KILN_GRID_STRIDE_LOOP(i, n) {
    const Idx c = (static_cast<Idx>(i) / inner) % channels;
    const float v = __fadd_rn(__fmul_rn(ToFloat(x[i]), ToFloat(scale[c])), ToFloat(bias[c]));
    y[i] = FromFloat<T>(Activate(act, v));
  }
}

template <typename T, typename P>
cudaError_t LaunchAffine(const void* x, const void* scale, const void* bias, void* y, int64_t n,
                         int64_t channels, int64_t inner, const Activation& act,
                         cudaStream_t stream) {
  const unsigned int blocks = BlocksFor(n);
  const T* px = static_cast<const T*>(x);
  const P* ps = static_cast<const P*>(scale);
  const P* pb = static_cast<const P*>(bias);
  T* py = static_cast<T*>(y);
  if (n <= int64_t{0xFFFFFFFF}) {
    ChannelAffineKernel<T, P, uint32_t><<<blocks, kThreads, 0, stream>>>(
        px, ps, pb, py, n, static_cast<uint32_t>(channels), static_cast<uint32_t>(inner), act);
  } else {
    ChannelAffineKernel<T, P, int64_t>
        <<<blocks, kThreads, 0, stream>>>(px, ps, pb, py, n, channels, inner, act);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchUnary(const UnaryParams& p, ElemType type, const void* x, void* y, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (p.op) {
#define KILN_UNARY_CASE(name) \
  case UnaryOp::k##name:      \
    return LaunchFloatOp<UnaryOp::k##name>(p, type, x, y, n, stream);
    KILN_UNARY_CASE(Relu)
    KILN_UNARY_CASE(Sigmoid)
    KILN_UNARY_CASE(Tanh)
    KILN_UNARY_CASE(Exp)
    KILN_UNARY_CASE(Log)
    KILN_UNARY_CASE(Sqrt)
    KILN_UNARY_CASE(Reciprocal)
    KILN_UNARY_CASE(Neg)
    KILN_UNARY_CASE(Abs)
    KILN_UNARY_CASE(Erf)
    KILN_UNARY_CASE(Floor)
    KILN_UNARY_CASE(Ceil)
    KILN_UNARY_CASE(Round)
    KILN_UNARY_CASE(Sign)
    KILN_UNARY_CASE(Sin)
    KILN_UNARY_CASE(Cos)
    KILN_UNARY_CASE(Tan)
    KILN_UNARY_CASE(Asin)
    KILN_UNARY_CASE(Acos)
    KILN_UNARY_CASE(Atan)
    KILN_UNARY_CASE(Sinh)
    KILN_UNARY_CASE(Cosh)
    KILN_UNARY_CASE(Asinh)
    KILN_UNARY_CASE(Acosh)
    KILN_UNARY_CASE(Atanh)
    KILN_UNARY_CASE(Softplus)
    KILN_UNARY_CASE(Softsign)
    KILN_UNARY_CASE(Elu)
    KILN_UNARY_CASE(Selu)
    KILN_UNARY_CASE(Celu)
    KILN_UNARY_CASE(LeakyRelu)
    KILN_UNARY_CASE(HardSigmoid)
    KILN_UNARY_CASE(HardSwish)
    KILN_UNARY_CASE(ThresholdedRelu)
    KILN_UNARY_CASE(Shrink)
    KILN_UNARY_CASE(Clip)
    KILN_UNARY_CASE(Gelu)
    KILN_UNARY_CASE(GeluTanh)
    KILN_UNARY_CASE(IsNaN)
    KILN_UNARY_CASE(IsInf)
#undef KILN_UNARY_CASE
    case UnaryOp::kNot:
      if (type != ElemType::kBool) return cudaErrorInvalidValue;
      NotKernel<<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x),
                                                       static_cast<uint8_t*>(y), n);
      return cudaGetLastError();
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchChannelAffine(ElemType x_type, ElemType param_type, const void* x,
                                const void* scale, const void* bias, void* y, int64_t n,
                                int64_t channels, int64_t inner, const Activation& act,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (channels <= 0 || inner <= 0) return cudaErrorInvalidValue;
  if (param_type != ElemType::kF32 && param_type != x_type) return cudaErrorInvalidValue;
  const bool fp32_params = param_type == ElemType::kF32;
  switch (x_type) {
    case ElemType::kF32:
      return LaunchAffine<float, float>(x, scale, bias, y, n, channels, inner, act, stream);
    case ElemType::kF16:
      return fp32_params
                 ? LaunchAffine<__half, float>(x, scale, bias, y, n, channels, inner, act, stream)
                 : LaunchAffine<__half, __half>(x, scale, bias, y, n, channels, inner, act, stream);
    case ElemType::kBF16:
      return fp32_params ? LaunchAffine<__nv_bfloat16, float>(x, scale, bias, y, n, channels, inner,
                                                              act, stream)
                         : LaunchAffine<__nv_bfloat16, __nv_bfloat16>(x, scale, bias, y, n,
                                                                      channels, inner, act, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
