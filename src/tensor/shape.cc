// SPDX-License-Identifier: Apache-2.0
#include "tensor/shape.h"

#include <fmt/format.h>

#include <limits>

namespace kiln {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims)) {}

Shape::Shape(std::span<const int64_t> dims) {
  KILN_CHECK(dims.size() <= static_cast<size_t>(kMaxRank), "rank ", dims.size(), " > ", kMaxRank);
  rank_ = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    KILN_CHECK(dims[i] >= 0, "negative dim ", dims[i]);
    dims_[i] = dims[i];
  }
}

Result<Shape> Shape::Create(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return Status::InvalidArgument(
        fmt::format("rank {} exceeds the maximum supported rank {}", dims.size(), kMaxRank));
  }
  int64_t count = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0) return Status::InvalidArgument(fmt::format("dimension {} is negative", d));
    if (d == 0) zero = true;
  }
  if (!zero) {
    for (int64_t d : dims) {
      if (count > std::numeric_limits<int64_t>::max() / d) {
        return Status::InvalidArgument(
            fmt::format("shape [{}] has more elements than fit in 64 bits", fmt::join(dims, ",")));
      }
      count *= d;
    }
  }
  return Shape(dims);
}

int64_t Shape::NumElements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::string Shape::ToString() const { return fmt::format("[{}]", fmt::join(dims(), ",")); }

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i) {
    if (a.dims_[static_cast<size_t>(i)] != b.dims_[static_cast<size_t>(i)]) return false;
  }
  return true;
}

}  // namespace kiln
