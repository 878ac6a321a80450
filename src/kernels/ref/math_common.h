// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the math family's reference kernels (math_unary.cc, math_binary.cc,
// cast.cc, elementwise.cc); internal to src/kernels/ref/.
//
//  - MathType<T>: the type arithmetic on T is done in. FP16 and BF16 compute in float and
//    round back to nearest even (ToMath / FromMath); every other type computes in itself.
//  - Dispatch lists: DispatchFloats (FP32, FP64, FP16, BF16), DispatchNumeric (those and every
//    integer type), DispatchAll (those, BOOL and BYTES).
//  - WrapToInt<T>(double): a defined float-to-integer conversion (C++ leaves out-of-range ones
//    undefined): NaN -> 0, truncation toward zero, then modulo 2^n, saturating beyond int64.
//  - DoubleToFloat16 / DoubleToBFloat16: rounding straight from double (no double rounding).
//  - The numpy layout of a binary op's inputs, and a three-input broadcast walk.
//
//   return DispatchFloats(x.dtype(), op_, [&](auto tag) -> Status {
//     using T = typename decltype(tag)::type;
//     ... y[i] = FromMath<T>(std::exp(ToMath(x[i]))); ...
//   });

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/result.h"
#include "kernels/kernel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "tensor/dtype.h"

namespace kiln::ref {

template <typename F>
Status DispatchFloats(DataType dtype, std::string_view op, F&& f) {
  return DispatchType<float, double, Float16, BFloat16>(dtype, op, std::forward<F>(f));
}
template <typename F>
Status DispatchSignedInts(DataType dtype, std::string_view op, F&& f) {
  return DispatchType<int8_t, int16_t, int32_t, int64_t>(dtype, op, std::forward<F>(f));
}

// Unsigned type at least as wide as `unsigned` for wrap-around arithmetic on T (uint8/uint16
// would otherwise promote to int, whose overflow is undefined).
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// Integer T from a double: NaN -> 0; otherwise truncated toward zero, saturated to the int64
// range (uint64 range for uint64 targets), then reduced modulo 2^n into T.
template <typename T>
T WrapToInt(double v) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (std::isnan(v)) return T{0};
  v = std::trunc(v);
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (v >= 0)
      return v >= 18446744073709551616.0 ? std::numeric_limits<uint64_t>::max()
                                         : static_cast<uint64_t>(v);
  }
  int64_t i;
  if (v >= 9223372036854775808.0) {
    i = std::numeric_limits<int64_t>::max();
  } else if (v < -9223372036854775808.0) {
    i = std::numeric_limits<int64_t>::min();
  } else {
    i = static_cast<int64_t>(v);
  }
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<uint64_t>(i)));
}

// Round-to-odd double -> float: exact when representable, else the neighbour of the two nearest
// floats whose last mantissa bit is 1. A later round-to-nearest to fewer bits then equals direct
// rounding from the double.
inline float DoubleToFloatRoundOdd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 1u) == 0)
    f = std::nextafter(f, d > f ? std::numeric_limits<float>::infinity()
                                : -std::numeric_limits<float>::infinity());
  return f;
}
inline Float16 DoubleToFloat16(double d) { return FloatToFloat16(DoubleToFloatRoundOdd(d)); }
inline BFloat16 DoubleToBFloat16(double d) { return FloatToBFloat16(DoubleToFloatRoundOdd(d)); }

// Rejects the opset 1-6 `broadcast`/`axis` attributes of binary ops (the importer's version
// adapter converts them into numpy broadcasting before kernels are built).
inline Status RejectLegacyBroadcast(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("broadcast", 7));
  return attrs.RequireRemovedIn("axis", 7);
}

// Output shape and input layouts of a binary op under numpy broadcasting.
struct BinaryLayout {
  Shape out;
  DimArray a_strides{};
  DimArray b_strides{};
};
inline Result<BinaryLayout> LayoutBinary(std::string_view op, const Shape& a, const Shape& b) {
  BinaryLayout l;
  KILN_ASSIGN_OR_RETURN(l.out, BroadcastShapes(op, a, b));
  l.a_strides = BroadcastStrides(a, l.out);
  l.b_strides = BroadcastStrides(b, l.out);
  return l;
}

// Calls f(out_index, a_index, b_index, c_index) for every element of `out` in row-major order
// (see ForEachBroadcast; strides from BroadcastStrides).
template <typename F>
void ForEachBroadcast3(const Shape& out, const DimArray& sa, const DimArray& sb, const DimArray& sc,
                       F&& f) {
  const int64_t total = out.NumElements();
  if (total == 0) return;
  const int rank = out.rank();
  DimArray coord{};
  int64_t ia = 0, ib = 0, ic = 0;
  for (int64_t o = 0; o < total; ++o) {
    f(o, ia, ib, ic);
    for (int d = rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++coord[du];
      ia += sa[du];
      ib += sb[du];
      ic += sc[du];
      if (coord[du] < out.dim(d)) break;
      ia -= sa[du] * coord[du];
      ib -= sb[du] * coord[du];
      ic -= sc[du] * coord[du];
      coord[du] = 0;
    }
  }
}

}  // namespace kiln::ref
