// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shape: the concrete dimensions of a tensor, rank <= kMaxRank, stored inline (no allocation).
// Every dim is >= 0. Symbolic or unknown dims belong to the graph IR (graph/ir.h), not here.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "base/result.h"

namespace kiln {

class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;  // rank 0: a scalar with one element
  // REQUIRES: dims.size() <= kMaxRank and every dim >= 0 (checked; use Create for input).
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  // Validates dims from outside the program: rank, negative dims, element-count overflow.
  static Result<Shape> Create(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t operator[](int i) const { return dim(i); }
  void set_dim(int i, int64_t v) { dims_[static_cast<size_t>(i)] = v; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  // Product of dims (1 for a scalar). Shapes built through Create never overflow int64.
  int64_t NumElements() const;
  // "[2,3,4]".
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace kiln
