// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the tensor op family's reference kernels (shape_ops.cc, layout_ops.cc,
// gather_scatter.cc, pad.cc, resize.cc, sort_ops.cc, string_ops.cc); internal to
// src/kernels/ref/.
//
// - dtype dispatch over every numeric type (16-bit floats included) or every type;
// - Load/Store: 16-bit floats are computed in float and rounded back (nearest even);
// - reading INT32/INT64 index tensors (shapes, axes, repeats, k...) into int64 vectors;
// - row-major element strides and index normalization with range errors that name the op.
//
//   return DispatchNumeric(x.dtype(), "CumSum", [&](auto tag) -> Status {
//     using T = typename decltype(tag)::type;
//     MathType<T> sum = ToMath(p[i]); ...; q[i] = FromMath<T>(sum);
//   });

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"

namespace kiln::ref {

// Converts a double to T (16-bit floats through float).
template <typename T>
T FromDouble(double v) {
  return FromMath<T>(static_cast<MathType<T>>(v));
}

// The elements of an INT32 or INT64 tensor (any shape) as int64; `what` names it in errors.
inline Result<std::vector<int64_t>> ReadInts(const Tensor& t, std::string_view op,
                                             std::string_view what) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DataType::kInt64) {
    const int64_t* p = t.data<const int64_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (t.dtype() == DataType::kInt32) {
    const int32_t* p = t.data<const int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    return OpError(op, "{} must be INT32 or INT64, got {}", what, DataTypeName(t.dtype()));
  }
  return v;
}

// Like ReadInts, but the tensor must be 1-D (or, with `allow_scalar`, 0-D).
inline Result<std::vector<int64_t>> ReadIntList(const Tensor& t, std::string_view op,
                                                std::string_view what, bool allow_scalar = false) {
  if (t.rank() != 1 && !(allow_scalar && t.rank() == 0)) {
    return OpError(op, "{} must be a 1-D tensor, got shape {}", what, t.shape().ToString());
  }
  return ReadInts(t, op, what);
}

// The single element of an INT32/INT64 tensor with one element (a scalar or [1]).
inline Result<int64_t> ReadIntScalar(const Tensor& t, std::string_view op, std::string_view what) {
  if (t.num_elements() != 1) {
    return OpError(op, "{} must have exactly one element, got shape {}", what,
                   t.shape().ToString());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInts(t, op, what));
  return v[0];
}

// Row-major element strides of `s`.
inline DimArray RowStrides(const Shape& s) {
  DimArray strides{};
  int64_t stride = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = stride;
    stride *= s.dim(i);
  }
  return strides;
}

// Shape::Create with the error naming the op.
inline Result<Shape> MakeShape(std::string_view op, std::span<const int64_t> dims) {
  Result<Shape> s = Shape::Create(dims);
  if (!s.ok()) return s.status().WithContext(op);
  return s;
}

// Maps an index in [-dim, dim) to [0, dim); INVALID_ARGUMENT naming `op` otherwise.
inline Result<int64_t> NormalizeIndex(std::string_view op, int64_t index, int64_t dim) {
  if (index < -dim || index >= dim) {
    return OpError(op, "index {} is out of range [{}, {})", index, -dim, dim);
  }
  return index < 0 ? index + dim : index;
}

// Normalizes a list of axes for a tensor of `rank` and rejects duplicates.
inline Result<std::vector<int>> NormalizeAxes(std::string_view op, std::span<const int64_t> axes,
                                              int rank, bool allow_negative) {
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(op, a, rank, allow_negative));
    if (seen[static_cast<size_t>(axis)]) return OpError(op, "axis {} appears twice", a);
    seen[static_cast<size_t>(axis)] = true;
    out.push_back(axis);
  }
  return out;
}

// Calls f(out_index, in_index) for every element of `out` in row-major order, where in_index is
// `base` plus the sum of coord[d] * strides[d] (strides may be negative or zero).
template <typename F>
void ForEachStrided(const Shape& out, const DimArray& strides, int64_t base, F&& f) {
  const DimArray zeros{};
  ForEachBroadcast(out, strides, zeros,
                   [&](int64_t o, int64_t i, int64_t /*unused*/) { f(o, base + i); });
}

}  // namespace kiln::ref
