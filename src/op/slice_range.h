// SPDX-License-Identifier: Apache-2.0
#pragma once
// ONNX Slice's rule for one axis, shared by the Slice kernels and type propagation.

#include <algorithm>
#include <cstdint>

namespace kiln {

// The first index a slice of an axis of `dim` elements (dim >= 0) takes, and how many: negative
// start / end count from the end (adding dim cannot overflow), then both clamp to the axis
// ([0, dim] going forward, [-1, dim - 1] going backward). `step` must not be 0.
struct SliceRange {
  int64_t start = 0;
  int64_t count = 0;
};

inline SliceRange ClampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceRange r;
  if (dim == 0) return r;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    r.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    r.count = start > end ? (start - end - 1) / (-step) + 1 : 0;
  }
  r.start = start;
  return r;
}

}  // namespace kiln
