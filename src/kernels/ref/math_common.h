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
//  - The opset 1-6 `broadcast`/`axis` layout of B onto A, and a three-input broadcast walk.
//
//   return DispatchFloats(x.dtype(), op_, [&](auto tag) -> Status {
//     using T = typename decltype(tag)::type;
//     ... y[i] = FromMath<T>(std::exp(ToMath(x[i]))); ...
//   });

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
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

// Opset 1-6 broadcast attributes of binary ops (`broadcast`, `axis`).
struct LegacyBroadcast {
  bool broadcast = false;
  std::optional<int64_t> axis;
};

// Reads `broadcast`/`axis` for opset < 7 (nullopt from opset 7, where they are rejected).
inline Result<std::optional<LegacyBroadcast>> ReadLegacyBroadcast(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("broadcast", 7));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("axis", 7));
  if (info.opset() >= 7) return std::optional<LegacyBroadcast>();
  LegacyBroadcast legacy;
  KILN_ASSIGN_OR_RETURN(legacy.broadcast, attrs.Bool("broadcast", false));
  if (attrs.Has("axis")) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
    legacy.axis = axis;
  }
  return std::optional<LegacyBroadcast>(legacy);
}

// B's shape expanded to A's rank under the opset 1-6 rule: broadcast=0 needs equal shapes; with
// broadcast=1, B (one element, or a run of A's dims starting at `axis`, by default A's trailing
// dims; a B dim of 1 broadcasts) is laid onto A.
inline Result<Shape> LegacyBroadcastLayout(std::string_view op, const LegacyBroadcast& legacy,
                                           const Shape& a, const Shape& b) {
  if (!legacy.broadcast) {
    if (a == b) return b;
    return OpError(op,
                   "shapes {} and {} differ and broadcast=0 (before opset 7 only broadcast=1 "
                   "broadcasts)",
                   a.ToString(), b.ToString());
  }
  if (b.NumElements() == 1) return Shape();
  if (b.rank() > a.rank()) {
    return OpError(op, "with broadcast=1, B {} must not have more dims than A {}", b.ToString(),
                   a.ToString());
  }
  const int64_t axis = legacy.axis.value_or(a.rank() - b.rank());
  if (axis < 0 || axis + b.rank() > a.rank()) {
    return OpError(op, "broadcast axis {} does not fit B {} into A {}", axis, b.ToString(),
                   a.ToString());
  }
  DimArray dims{};
  for (int i = 0; i < a.rank(); ++i) dims[static_cast<size_t>(i)] = 1;
  for (int i = 0; i < b.rank(); ++i) {
    const int ai = static_cast<int>(axis) + i;
    if (b.dim(i) != a.dim(ai) && b.dim(i) != 1) {
      return OpError(op, "with broadcast=1 and axis {}, B {} must match A {} at dim {} (or be 1)",
                     axis, b.ToString(), a.ToString(), ai);
    }
    dims[static_cast<size_t>(ai)] = b.dim(i);
  }
  return Shape(std::span<const int64_t>(dims.data(), static_cast<size_t>(a.rank())));
}

// Output shape and input layouts of a binary op: numpy broadcasting, or the legacy rule when
// `legacy` is set (the output then has A's shape).
struct BinaryLayout {
  Shape out;
  DimArray a_strides{};
  DimArray b_strides{};
};
inline Result<BinaryLayout> LayoutBinary(std::string_view op,
                                         const std::optional<LegacyBroadcast>& legacy,
                                         const Shape& a, const Shape& b) {
  BinaryLayout l;
  Shape b_laid = b;
  if (legacy.has_value()) {
    l.out = a;
    KILN_ASSIGN_OR_RETURN(b_laid, LegacyBroadcastLayout(op, *legacy, a, b));
  } else {
    KILN_ASSIGN_OR_RETURN(l.out, BroadcastShapes(op, a, b));
  }
  l.a_strides = BroadcastStrides(a, l.out);
  l.b_strides = BroadcastStrides(b_laid, l.out);
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
