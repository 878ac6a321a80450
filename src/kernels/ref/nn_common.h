// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the nn op family's reference kernels (reduce.cc, nn_norm.cc, nn_pool.cc,
// conv_transpose.cc, einsum.cc; internal to src/kernels/ref/): element conversion to and from
// double for every numeric dtype (FP16 and BF16 are computed in double and rounded to nearest
// even on the way back), saturating float-to-integer conversion (no UB for NaN or out-of-range
// values), and axis-list normalization.
//
//   return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), "LRN", [&](auto tag) -> Status {
//     using T = typename decltype(tag)::type;
//     y[i] = FromDouble<T>(ToDouble(x[i]) * 2);
//   });

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/result.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "tensor/dtype.h"

namespace kiln::ref {

// The floating-point element types, for DispatchType<KILN_NN_FLOAT_TYPES>.
#define KILN_NN_FLOAT_TYPES float, double, ::kiln::Float16, ::kiln::BFloat16

template <typename T>
double ToDouble(T v) {
  return static_cast<double>(ToMath(v));
}

// Converts to T: floats round (FP16/BF16 to nearest even via float); integers truncate toward
// zero and saturate at T's range, NaN gives 0; bool is v != 0.
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return FloatToFloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return FloatToBFloat16(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T{0};
    // The limits as doubles: lowest is exact (a power of two or 0); max + 1 is a power of two,
    // formed as (max / 2 + 1) * 2: the truncating integer division keeps it from overflowing T.
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const T half_hi_excl = std::numeric_limits<T>::max() / 2 + 1;
    const double hi_excl = static_cast<double>(half_hi_excl) * 2.0;
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi_excl) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Walks a tensor of `dims` (`count` elements) in row-major order and calls f(in_index,
// out_index), where out_index advances by `out_strides` per axis (stride 0 on reduced axes,
// so every element of a reduction group maps to the group's output).
template <typename F>
void ForEachReduced(std::span<const int64_t> dims, const DimArray& out_strides, int64_t count,
                    F&& f) {
  const int rank = static_cast<int>(dims.size());
  DimArray coord{};
  int64_t out = 0;
  for (int64_t i = 0; i < count; ++i) {
    f(i, out);
    for (int d = rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      out += out_strides[du];
      if (++coord[du] < dims[du]) break;
      out -= out_strides[du] * coord[du];
      coord[du] = 0;
    }
  }
}

// The out_strides for ForEachReduced when reducing `dims` over the axes marked in `reduced`:
// row-major over the kept axes, 0 on reduced ones. Sets *groups to the number of outputs and
// *group_size to the number of elements folded into each.
inline DimArray ReducedStrides(std::span<const int64_t> dims, const std::vector<bool>& reduced,
                               int64_t* groups, int64_t* group_size) {
  DimArray strides{};
  int64_t stride = 1, size = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (reduced[d]) {
      size *= dims[d];
    } else {
      strides[d] = stride;
      stride *= dims[d];
    }
  }
  *groups = stride;
  *group_size = size;
  return strides;
}

// Normalizes a list of axes for a tensor of `rank` (negative values count from the back when
// `allow_negative`) and marks them in the returned mask; duplicates are INVALID_ARGUMENT.
inline Result<std::vector<bool>> AxesMask(std::string_view op, std::span<const int64_t> axes,
                                          int rank, bool allow_negative) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(op, a, rank, allow_negative));
    if (mask[static_cast<size_t>(axis)]) return OpError(op, "axis {} is listed twice", a);
    mask[static_cast<size_t>(axis)] = true;
  }
  return mask;
}

// Reads a 1-D (or scalar) INT64 tensor into a vector; INVALID_ARGUMENT naming `op` and `what`
// for any other dtype or rank.
inline Result<std::vector<int64_t>> ReadInt64List(std::string_view op, std::string_view what,
                                                  const Tensor& t) {
  if (t.dtype() != DataType::kInt64) {
    return OpError(op, "{} must be INT64, got {}", what, DataTypeName(t.dtype()));
  }
  if (t.rank() > 1) return OpError(op, "{} must be 1-D, got {}", what, t.shape().ToString());
  const int64_t* p = t.data<const int64_t>();
  return std::vector<int64_t>(p, p + t.num_elements());
}

}  // namespace kiln::ref
