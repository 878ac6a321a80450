// SPDX-License-Identifier: Apache-2.0
// Device code of the broadcasting elementwise ops and Cast (elementwise_launch.h).
//
// NOTE on indexing. Each launch walks the n output elements with a grid-stride loop and hands a
// functor the output index and one element offset per operand. The host gives every operand a
// StridedView over the output's merged dims. When the merge leaves at most one dim (equal shapes,
// or scalars against a tensor) operand k sits at i * step[k], step 0 or 1 ("flat", no division);
// otherwise the output index is split into coordinates once per element and each operand's
// offset is the dot product with its strides, in 32-bit arithmetic when n < 2^32 (every operand
// has at most n elements, so its offsets fit too).
//
// NOTE on numerics. The functors mirror the reference kernels: FP16 / BF16 compute in FP32 and
// round once at the store (FromFloat); integers wrap; Max / Min propagate NaN; Pow computes in
// double; conversions to FP16 / BF16 from double go through a round-to-odd FP32 so that the final
// rounding equals a direct one (the reference's DoubleToFloat16).

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/elementwise_launch.h"

namespace kiln::cuda {
namespace {

// ---- Types --------------------------------------------------------------------------------------

// BOOL elements: one byte, nonzero = true.
struct Bool8 {
  uint8_t v;
};

template <typename T>
struct Tag {
  using type = T;
};

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The type arithmetic on T uses: FP32 for the float types, T itself for integers.
template <typename T>
using MathT = std::conditional_t<std::is_integral_v<T>, T, float>;

template <typename T>
__device__ __forceinline__ MathT<T> Load(T v) {
  if constexpr (std::is_integral_v<T>) {
    return v;
  } else {
    return ToFloat(v);
  }
}

template <typename T>
__device__ __forceinline__ T Store(MathT<T> v) {
  if constexpr (std::is_integral_v<T>) {
    return v;
  } else {
    return FromFloat<T>(v);
  }
}

// Calls f(Tag<T>{}) for the float types (FP32, FP16, BF16).
template <typename F>
cudaError_t WithFloatType(ElemType t, F&& f) {
  switch (t) {
    case ElemType::kF32:
      return f(Tag<float>{});
    case ElemType::kF16:
      return f(Tag<__half>{});
    case ElemType::kBF16:
      return f(Tag<__nv_bfloat16>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// The float types, INT32 and INT64.
template <typename F>
cudaError_t WithNumericType(ElemType t, F&& f) {
  switch (t) {
    case ElemType::kI32:
      return f(Tag<int32_t>{});
    case ElemType::kI64:
      return f(Tag<int64_t>{});
    default:
      return WithFloatType(t, f);
  }
}

// Every type Cast takes.
template <typename F>
cudaError_t WithCastType(ElemType t, F&& f) {
  switch (t) {
    case ElemType::kF64:
      return f(Tag<double>{});
    case ElemType::kI8:
      return f(Tag<int8_t>{});
    case ElemType::kU8:
      return f(Tag<uint8_t>{});
    case ElemType::kBool:
      return f(Tag<Bool8>{});
    default:
      return WithNumericType(t, f);
  }
}

// An unsigned type of `bytes` bytes (elements moved as raw bits).
template <typename F>
cudaError_t WithBitsType(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(Tag<uint8_t>{});
    case 2:
      return f(Tag<uint16_t>{});
    case 4:
      return f(Tag<uint32_t>{});
    case 8:
      return f(Tag<uint64_t>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// ---- Broadcast walk -----------------------------------------------------------------------------

enum class Walk { kFlat, kStrided32, kStrided64 };

template <int N>
struct Operands {
  StridedView view[N];  // same rank and dims
  int64_t step[N];      // kFlat: operand k at i * step[k]
};

template <int N, Walk kWalk>
__device__ __forceinline__ void OffsetsOf(const Operands<N>& ops, int64_t i, int64_t (&off)[N]) {
  if constexpr (kWalk == Walk::kFlat) {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = i * ops.step[k];
  } else {
    using Idx = std::conditional_t<kWalk == Walk::kStrided32, uint32_t, int64_t>;
    Idx rest = static_cast<Idx>(i);
    Idx o[N];
#pragma unroll
    for (int k = 0; k < N; ++k) o[k] = 0;
    for (int d = ops.view[0].rank - 1; d >= 0; --d) {
      const Idx dim = static_cast<Idx>(ops.view[0].dims[d]);
      const Idx q = rest / dim;
      const Idx c = rest - q * dim;
#pragma unroll
      for (int k = 0; k < N; ++k) o[k] += c * static_cast<Idx>(ops.view[k].strides[d]);
      rest = q;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = static_cast<int64_t>(o[k]);
  }
}

template <int N, Walk kWalk, typename Fn>
__global__ void __launch_bounds__(kThreads) NaryKernel(Fn fn, Operands<N> ops, int64_t n) {
  KILN_GRID_STRIDE_LOOP(i, n) {
    int64_t off[N];
    OffsetsOf<N, kWalk>(ops, i, off);
    fn(i, off);
  }
}

// Runs fn over the n output elements of N operands with `views`.
template <int N, typename Fn>
cudaError_t LaunchNary(const Fn& fn, const StridedView* views, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  Operands<N> ops;
  const int rank = views[0].rank;
  for (int k = 0; k < N; ++k) {
    ops.view[k] = views[k];
    ops.step[k] = rank == 1 ? views[k].strides[0] : 0;
  }
  const unsigned int blocks = BlocksFor(n);
  if (rank <= 1) {
    NaryKernel<N, Walk::kFlat><<<blocks, kThreads, 0, stream>>>(fn, ops, n);
  } else if (n <= int64_t{0xFFFFFFFF}) {
    NaryKernel<N, Walk::kStrided32><<<blocks, kThreads, 0, stream>>>(fn, ops, n);
  } else {
    NaryKernel<N, Walk::kStrided64><<<blocks, kThreads, 0, stream>>>(fn, ops, n);
  }
  return cudaGetLastError();
}

// ---- Binary ops ---------------------------------------------------------------------------------

template <BinaryOp kOp, typename T>
__device__ __forceinline__ T Arith(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U ua = static_cast<U>(a), ub = static_cast<U>(b);
    if constexpr (kOp == BinaryOp::kAdd) return static_cast<T>(ua + ub);
    if constexpr (kOp == BinaryOp::kSub) return static_cast<T>(ua - ub);
    if constexpr (kOp == BinaryOp::kMul) return static_cast<T>(ua * ub);
    if constexpr (kOp == BinaryOp::kDiv) {
      if (b == 0) return T{0};  // the reference rejects it; see elementwise.cc
      if (b == -1) return static_cast<T>(U{0} - ua);  // INT_MIN / -1 wraps to INT_MIN
      return static_cast<T>(a / b);
    }
  } else {
    const float x = ToFloat(a), z = ToFloat(b);
    if constexpr (kOp == BinaryOp::kAdd) return FromFloat<T>(x + z);
    if constexpr (kOp == BinaryOp::kSub) return FromFloat<T>(x - z);
    if constexpr (kOp == BinaryOp::kMul) return FromFloat<T>(x * z);
    if constexpr (kOp == BinaryOp::kDiv) return FromFloat<T>(x / z);
  }
  return T{};
}

template <BinaryOp kOp, typename T>
struct ArithFn {
  const T* a;
  const T* b;
  T* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[2]) const {
    y[i] = Arith<kOp>(a[off[0]], b[off[1]]);
  }
};

template <typename T>
struct PReluFn {
  const T* x;
  const T* slope;
  T* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[2]) const {
    const T v = x[off[0]];
    const float f = ToFloat(v);
    y[i] = f < 0.0f ? FromFloat<T>(ToFloat(slope[off[1]]) * f) : v;
  }
};

template <BinaryOp kOp, typename C>
__device__ __forceinline__ bool Compare(C a, C b) {
  if constexpr (kOp == BinaryOp::kEqual) return a == b;
  if constexpr (kOp == BinaryOp::kLess) return a < b;
  if constexpr (kOp == BinaryOp::kGreater) return a > b;
  if constexpr (kOp == BinaryOp::kLessOrEqual) return a <= b;
  if constexpr (kOp == BinaryOp::kGreaterOrEqual) return a >= b;
  return false;
}

template <BinaryOp kOp, typename T>
struct CompareFn {
  const T* a;
  const T* b;
  uint8_t* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[2]) const {
    y[i] = Compare<kOp>(Load(a[off[0]]), Load(b[off[1]])) ? 1 : 0;
  }
};

// And, Or, Xor, and Equal on BOOL.
template <BinaryOp kOp>
struct LogicFn {
  const uint8_t* a;
  const uint8_t* b;
  uint8_t* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[2]) const {
    const bool u = a[off[0]] != 0, v = b[off[1]] != 0;
    bool r = false;
    if constexpr (kOp == BinaryOp::kAnd) r = u && v;
    if constexpr (kOp == BinaryOp::kOr) r = u || v;
    if constexpr (kOp == BinaryOp::kXor) r = u != v;
    if constexpr (kOp == BinaryOp::kEqual) r = u == v;
    y[i] = r ? 1 : 0;
  }
};

template <BinaryOp kOp>
cudaError_t LaunchBinaryOp(ElemType type, const void* a, const StridedView& va, const void* b,
                           const StridedView& vb, void* y, int64_t n, cudaStream_t stream) {
  const StridedView views[2] = {va, vb};
  if constexpr (kOp == BinaryOp::kAdd || kOp == BinaryOp::kSub || kOp == BinaryOp::kMul ||
                kOp == BinaryOp::kDiv) {
    return WithNumericType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const ArithFn<kOp, T> fn{static_cast<const T*>(a), static_cast<const T*>(b),
                               static_cast<T*>(y)};
      return LaunchNary<2>(fn, views, n, stream);
    });
  } else if constexpr (kOp == BinaryOp::kPRelu) {
    return WithFloatType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const PReluFn<T> fn{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y)};
      return LaunchNary<2>(fn, views, n, stream);
    });
  } else if constexpr (kOp == BinaryOp::kAnd || kOp == BinaryOp::kOr || kOp == BinaryOp::kXor) {
    if (type != ElemType::kBool) return cudaErrorInvalidValue;
    const LogicFn<kOp> fn{static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
                          static_cast<uint8_t*>(y)};
    return LaunchNary<2>(fn, views, n, stream);
  } else {
    if constexpr (kOp == BinaryOp::kEqual) {
      if (type == ElemType::kBool) {
        const LogicFn<kOp> fn{static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
                              static_cast<uint8_t*>(y)};
        return LaunchNary<2>(fn, views, n, stream);
      }
    }
    return WithNumericType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const CompareFn<kOp, T> fn{static_cast<const T*>(a), static_cast<const T*>(b),
                                 static_cast<uint8_t*>(y)};
      return LaunchNary<2>(fn, views, n, stream);
    });
  }
}

// ---- Pow ----------------------------------------------------------------------------------------

// Round-to-odd double -> FP32: exact when representable, else the one of the two neighbouring
// floats whose last mantissa bit is 1 (truncate toward zero, then set that bit). A later
// round-to-nearest to FP16 / BF16 then equals the direct rounding of the double.
__device__ __forceinline__ float RoundOddFloat(double d) {
  if (isnan(d)) return __double2float_rn(d);
  const float f = __double2float_rz(d);
  if (static_cast<double>(f) == d) return f;
  return __uint_as_float(__float_as_uint(f) | 1u);
}

// T (a float type or FP64) from a double, rounded once.
template <typename T>
__device__ __forceinline__ T FromDouble(double d) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(RoundOddFloat(d));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(RoundOddFloat(d));
  } else {
    return static_cast<T>(d);
  }
}

// Element i of a numeric array of type t, as a double (exact but for INT64 beyond 2^53, rounded
// to nearest as the reference's static_cast<double>).
__device__ __forceinline__ double LoadDouble(const void* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::kF16:
      return static_cast<double>(__half2float(static_cast<const __half*>(p)[i]));
    case ElemType::kBF16:
      return static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]));
    case ElemType::kI32:
      return static_cast<double>(static_cast<const int32_t*>(p)[i]);
    case ElemType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    default:
      return static_cast<double>(static_cast<const float*>(p)[i]);
  }
}

template <typename T>
struct PowFn {
  const T* base;
  const void* exponent;
  ElemType exp_type;
  T* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[2]) const {
    const double b = static_cast<double>(ToFloat(base[off[0]]));
    y[i] = FromDouble<T>(pow(b, LoadDouble(exponent, exp_type, off[1])));
  }
};

// ---- Variadic ops -------------------------------------------------------------------------------

template <VariadicOp kOp, typename C>
__device__ __forceinline__ C Combine(C acc, C v) {
  if constexpr (kOp == VariadicOp::kSum || kOp == VariadicOp::kMean) {
    return acc + v;
  } else {
    if constexpr (!std::is_integral_v<C>) {
      if (isnan(acc) || isnan(v)) return isnan(acc) ? acc : v;
    }
    if constexpr (kOp == VariadicOp::kMax) return v > acc ? v : acc;
    if constexpr (kOp == VariadicOp::kMin) return v < acc ? v : acc;
  }
  return acc;
}

template <VariadicOp kOp, typename T>
struct VariadicFn {
  const T* in[3];
  int count;
  T* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[3]) const {
    MathT<T> acc = Load(in[0][off[0]]);
    // Unrolled with a guard, so that in[] and off[] stay in registers.
#pragma unroll
    for (int k = 1; k < 3; ++k) {
      if (k < count) acc = Combine<kOp>(acc, Load(in[k][off[k]]));
    }
    if constexpr (kOp == VariadicOp::kMean) acc = acc / static_cast<float>(count);
    y[i] = Store<T>(acc);
  }
};

template <VariadicOp kOp>
cudaError_t LaunchVariadicOp(ElemType type, int count, const void* const* inputs,
                             const StridedView* views, void* y, int64_t n, cudaStream_t stream) {
  auto launch = [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    VariadicFn<kOp, T> fn{{nullptr, nullptr, nullptr}, count, static_cast<T*>(y)};
    StridedView v[3];
    for (int k = 0; k < 3; ++k) {
      // Unused operands read nothing; give them input 0's view (same rank and dims).
      v[k] = views[k < count ? k : 0];
      fn.in[k] = static_cast<const T*>(inputs[k < count ? k : 0]);
    }
    return LaunchNary<3>(fn, v, n, stream);
  };
  if constexpr (kOp == VariadicOp::kMax || kOp == VariadicOp::kMin) {
    return WithNumericType(type, launch);
  } else {
    return WithFloatType(type, launch);
  }
}

// ---- Where, Expand ------------------------------------------------------------------------------

template <typename E>
struct WhereFn {
  const uint8_t* cond;
  const E* a;
  const E* b;
  E* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[3]) const {
    y[i] = cond[off[0]] != 0 ? a[off[1]] : b[off[2]];
  }
};

template <typename E>
struct CopyFn {
  const E* x;
  E* y;
  __device__ __forceinline__ void operator()(int64_t i, const int64_t (&off)[1]) const {
    y[i] = x[off[0]];
  }
};

// ---- Cast ---------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ double ToDouble(T v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<double>(ToFloat(v));
  } else {
    return static_cast<double>(v);
  }
}

// The reference's WrapToInt: NaN -> 0; truncation toward zero, saturated to the INT64 range, then
// reduced modulo 2^n.
template <typename T>
__device__ __forceinline__ T WrapToInt(double v) {
  if (isnan(v)) return T{0};
  v = trunc(v);
  int64_t i;
  if (v >= 9223372036854775808.0) {
    i = INT64_MAX;
  } else if (v < -9223372036854775808.0) {
    i = INT64_MIN;
  } else {
    i = static_cast<int64_t>(v);
  }
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<uint64_t>(i)));
}

template <typename From, typename To>
__device__ __forceinline__ To Convert(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (std::is_same_v<To, Bool8>) {
    bool nonzero;
    if constexpr (std::is_same_v<From, Bool8>) {
      nonzero = v.v != 0;
    } else if constexpr (kIsHalf<From>) {
      nonzero = ToFloat(v) != 0.0f;  // NaN is true
    } else {
      nonzero = v != From{0};
    }
    return Bool8{static_cast<uint8_t>(nonzero ? 1 : 0)};
  } else if constexpr (std::is_same_v<From, Bool8>) {
    return Convert<uint8_t, To>(static_cast<uint8_t>(v.v != 0 ? 1 : 0));
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));
  } else if constexpr (std::is_integral_v<From> && std::is_floating_point_v<To>) {
    return static_cast<To>(v);  // one rounding
  } else if constexpr (std::is_integral_v<To>) {
    return WrapToInt<To>(ToDouble(v));
  } else {
    return FromDouble<To>(ToDouble(v));
  }
}

template <typename From, typename To>
__global__ void __launch_bounds__(kThreads) CastKernel(const From* x, To* y, int64_t n) {
  KILN_GRID_STRIDE_LOOP(i, n) { y[i] = Convert<From, To>(x[i]); }
}

int ElemBytes(ElemType t) {
  switch (t) {
    case ElemType::kF32:
    case ElemType::kI32:
      return 4;
    case ElemType::kF16:
    case ElemType::kBF16:
      return 2;
    case ElemType::kI64:
    case ElemType::kF64:
      return 8;
    case ElemType::kI8:
    case ElemType::kU8:
    case ElemType::kBool:
      return 1;
  }
  return 0;
}

}  // namespace

cudaError_t LaunchBinary(BinaryOp op, ElemType type, const void* a, const StridedView& va,
                         const void* b, const StridedView& vb, void* y, int64_t n,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (op) {
    case BinaryOp::kAdd:
      return LaunchBinaryOp<BinaryOp::kAdd>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kSub:
      return LaunchBinaryOp<BinaryOp::kSub>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kMul:
      return LaunchBinaryOp<BinaryOp::kMul>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kDiv:
      return LaunchBinaryOp<BinaryOp::kDiv>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kPRelu:
      return LaunchBinaryOp<BinaryOp::kPRelu>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kEqual:
      return LaunchBinaryOp<BinaryOp::kEqual>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kLess:
      return LaunchBinaryOp<BinaryOp::kLess>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kGreater:
      return LaunchBinaryOp<BinaryOp::kGreater>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kLessOrEqual:
      return LaunchBinaryOp<BinaryOp::kLessOrEqual>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kGreaterOrEqual:
      return LaunchBinaryOp<BinaryOp::kGreaterOrEqual>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kAnd:
      return LaunchBinaryOp<BinaryOp::kAnd>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kOr:
      return LaunchBinaryOp<BinaryOp::kOr>(type, a, va, b, vb, y, n, stream);
    case BinaryOp::kXor:
      return LaunchBinaryOp<BinaryOp::kXor>(type, a, va, b, vb, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchPow(ElemType base_type, const void* base, const StridedView& vbase,
                      ElemType exp_type, const void* exponent, const StridedView& vexp, void* y,
                      int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (exp_type) {
    case ElemType::kF32:
    case ElemType::kF16:
    case ElemType::kBF16:
    case ElemType::kI32:
    case ElemType::kI64:
      break;
    default:
      return cudaErrorInvalidValue;
  }
  const StridedView views[2] = {vbase, vexp};
  return WithFloatType(base_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const PowFn<T> fn{static_cast<const T*>(base), exponent, exp_type, static_cast<T*>(y)};
    return LaunchNary<2>(fn, views, n, stream);
  });
}

cudaError_t LaunchVariadic(VariadicOp op, ElemType type, int num_inputs, const void* const* inputs,
                           const StridedView* views, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (num_inputs < 1 || num_inputs > 3) return cudaErrorInvalidValue;
  switch (op) {
    case VariadicOp::kMax:
      return LaunchVariadicOp<VariadicOp::kMax>(type, num_inputs, inputs, views, y, n, stream);
    case VariadicOp::kMin:
      return LaunchVariadicOp<VariadicOp::kMin>(type, num_inputs, inputs, views, y, n, stream);
    case VariadicOp::kSum:
      return LaunchVariadicOp<VariadicOp::kSum>(type, num_inputs, inputs, views, y, n, stream);
    case VariadicOp::kMean:
      return LaunchVariadicOp<VariadicOp::kMean>(type, num_inputs, inputs, views, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchWhere(int elem_bytes, const void* cond, const StridedView& vcond, const void* a,
                        const StridedView& va, const void* b, const StridedView& vb, void* y,
                        int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const StridedView views[3] = {vcond, va, vb};
  return WithBitsType(elem_bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const WhereFn<E> fn{static_cast<const uint8_t*>(cond), static_cast<const E*>(a),
                        static_cast<const E*>(b), static_cast<E*>(y)};
    return LaunchNary<3>(fn, views, n, stream);
  });
}

cudaError_t LaunchBroadcastCopy(int elem_bytes, const void* x, const StridedView& vx, void* y,
                                int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return WithBitsType(elem_bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const CopyFn<E> fn{static_cast<const E*>(x), static_cast<E*>(y)};
    return LaunchNary<1>(fn, &vx, n, stream);
  });
}

cudaError_t LaunchCast(ElemType from, ElemType to, const void* x, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (from == to) {
    const int bytes = ElemBytes(from);
    if (bytes == 0) return cudaErrorInvalidValue;
    return cudaMemcpyAsync(y, x, static_cast<size_t>(n) * static_cast<size_t>(bytes),
                           cudaMemcpyDeviceToDevice, stream);
  }
  return WithCastType(from, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    return WithCastType(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      CastKernel<From, To><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const From*>(x),
                                                                  static_cast<To*>(y), n);
      return cudaGetLastError();
    });
  });
}

}  // namespace kiln::cuda
