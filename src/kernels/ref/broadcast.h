// SPDX-License-Identifier: Apache-2.0
#pragma once
// Numpy-style broadcasting for the reference kernels (internal to src/kernels/ref/).
//
// BroadcastShapes computes the multidirectional result shape; BroadcastStrides lays an input
// against the output shape (trailing dims aligned, stride 0 where the input has size 1 or lacks
// the dim); ForEachBroadcast walks the output in row-major order and hands the callback the
// matching flat indices of both inputs.
//
//   KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes("Add", a.shape(), b.shape()));
//   const DimArray sa = BroadcastStrides(a.shape(), out), sb = BroadcastStrides(b.shape(), out);
//   ForEachBroadcast(out, sa, sb, [&](int64_t o, int64_t ia, int64_t ib) { y[o] = x[ia] + z[ib];
//   });
//
// NOTE: the walk keeps an odometer over all dims but the last and runs the last dim as a tight
// loop, so the per-element cost is one multiply-add per input.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

#include "base/result.h"
#include "tensor/shape.h"

namespace kiln::ref {

using DimArray = std::array<int64_t, Shape::kMaxRank>;

// The numpy broadcast of `a` and `b`; INVALID_ARGUMENT naming `op` and both shapes otherwise.
inline Result<Shape> BroadcastShapes(std::string_view op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  DimArray dims{};
  for (int i = 0; i < rank; ++i) {
    // i counts from the back.
    const int ai = a.rank() - 1 - i, bi = b.rank() - 1 - i;
    const int64_t da = ai >= 0 ? a.dim(ai) : 1;
    const int64_t db = bi >= 0 ? b.dim(bi) : 1;
    if (da != db && da != 1 && db != 1) {
      return Status::InvalidArgument(fmt::format(
          "{}: incompatible broadcast shapes {} and {} (dim {} from the back: {} vs {})", op,
          a.ToString(), b.ToString(), i, da, db));
    }
    dims[static_cast<size_t>(rank - 1 - i)] = da == 1 ? db : da;
  }
  return Shape(std::span<const int64_t>(dims.data(), static_cast<size_t>(rank)));
}

// True when `in` broadcasts to exactly `out` (unidirectional broadcasting).
inline bool BroadcastsTo(const Shape& in, const Shape& out) {
  if (in.rank() > out.rank()) return false;
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t d = in.dim(in.rank() - 1 - i);
    if (d != 1 && d != out.dim(out.rank() - 1 - i)) return false;
  }
  return true;
}

// Element strides of `in` indexed by the dims of `out`, 0 where `in` is broadcast.
// REQUIRES: BroadcastsTo(in, out).
inline DimArray BroadcastStrides(const Shape& in, const Shape& out) {
  DimArray strides{};
  int64_t stride = 1;
  const int offset = out.rank() - in.rank();
  for (int i = in.rank() - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i) + static_cast<size_t>(offset)] = in.dim(i) == 1 ? 0 : stride;
    stride *= in.dim(i);
  }
  return strides;
}

// Calls f(out_index, a_index, b_index) for every element of `out` in row-major order, where
// a_index = sum(coord[d] * a_strides[d]) and likewise for b.
template <typename F>
void ForEachBroadcast(const Shape& out, const DimArray& a_strides, const DimArray& b_strides,
                      F&& f) {
  const int64_t total = out.NumElements();
  if (total == 0) return;
  const int rank = out.rank();
  if (rank == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  const size_t last = static_cast<size_t>(rank - 1);
  const int64_t inner = out.dim(rank - 1);
  const int64_t inner_a = a_strides[last], inner_b = b_strides[last];
  DimArray coord{};
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < total; o += inner) {
    for (int64_t k = 0; k < inner; ++k) f(o + k, ia + k * inner_a, ib + k * inner_b);
    for (int d = rank - 2; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++coord[du];
      ia += a_strides[du];
      ib += b_strides[du];
      if (coord[du] < out.dim(d)) break;
      ia -= a_strides[du] * coord[du];
      ib -= b_strides[du] * coord[du];
      coord[du] = 0;
    }
  }
}

}  // namespace kiln::ref
