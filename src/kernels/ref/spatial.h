// SPDX-License-Identifier: Apache-2.0
#pragma once
// Sliding-window geometry shared by Conv and the pools (internal to src/kernels/ref/): the
// kernel_shape / strides / dilations / pads / auto_pad attributes, the output size they give for
// an input, and the window taps of one output position.
//
//   KILN_ASSIGN_OR_RETURN(WindowAttrs wa, ReadWindowAttrs(attrs, /*kernel_shape_required=*/true));
//   ...                                           // at run time:
//   KILN_ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow("MaxPool", wa, in_dims,
//   wa.kernel_shape)); ForEachWindow(g, [&](int64_t pos, const DimArray& coord) {
//     CollectTaps(g, coord, taps);                // (kernel index, input offset) pairs
//   });
//
// NOTE on the output size, per spatial axis, with extent = (kernel - 1) * dilation + 1:
//   NOTSET: out = floor((in + pad_begin + pad_end - extent) / stride) + 1 (ceil with ceil_mode;
//           with ceil_mode a last window that would start past in + pad_begin, i.e. entirely in
//           the end padding, is dropped, as PyTorch and onnxruntime do);
//   VALID:  no padding, out = floor((in - extent) / stride) + 1 (ceil_mode ignored);
//   SAME_UPPER / SAME_LOWER: out = ceil(in / stride), total padding
//           max(0, (out - 1) * stride + extent - in), split evenly with the odd pixel at the end
//           (UPPER) or the beginning (LOWER).
// An input smaller than the window (out < 1 for NOTSET / VALID) is INVALID_ARGUMENT.

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"

namespace kiln::ref {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// The window attributes as written on the node. Empty vectors mean "default" (kernel_shape:
// taken from W, Conv only; strides and dilations: 1; pads: 0).
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // [x1_begin, x2_begin, ..., x1_end, x2_end, ...]
  bool ceil_mode = false;     // set by the pools (opset >= 10); Conv has none
};

// Reads auto_pad, kernel_shape, strides, dilations and pads and checks them as far as possible
// without the input: values in range (kernel, strides, dilations >= 1; pads >= 0; all at most
// 2^31), lengths consistent with each other, nonzero pads only with auto_pad NOTSET.
Result<WindowAttrs> ReadWindowAttrs(const AttrReader& attrs, bool kernel_shape_required);

// The resolved window for one input. Arrays are indexed by spatial axis, [0, rank).
struct WindowGeometry {
  int rank = 0;
  DimArray in{}, kernel{}, stride{}, dilation{}, pad_begin{}, pad_end{}, out{};
  int64_t in_size = 1;      // product of `in`
  int64_t out_size = 1;     // product of `out`
  int64_t kernel_size = 1;  // product of `kernel`
};

// Resolves `attrs` for spatial input dims `in` and kernel dims `kernel` (Conv: W's spatial dims;
// pools: kernel_shape). INVALID_ARGUMENT naming `op` when attribute lengths do not match the
// input's spatial rank or the window does not fit.
Result<WindowGeometry> ResolveWindow(std::string_view op, const WindowAttrs& attrs,
                                     std::span<const int64_t> in, std::span<const int64_t> kernel);

// Calls f(pos, coord) for every output position in row-major order (pos is the flat index).
template <typename F>
void ForEachWindow(const WindowGeometry& g, F&& f) {
  DimArray coord{};
  for (int64_t pos = 0; pos < g.out_size; ++pos) {
    f(pos, static_cast<const DimArray&>(coord));
    for (int d = g.rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      if (++coord[du] < g.out[du]) break;
      coord[du] = 0;
    }
  }
}

// (kernel flat index, input flat offset) of each tap of a window that falls inside the input.
using Taps = std::vector<std::pair<int64_t, int64_t>>;

// Fills `taps` for the window at output coordinate `out_coord`.
void CollectTaps(const WindowGeometry& g, const DimArray& out_coord, Taps& taps);

// Number of taps of the window at `out_coord` that fall inside the padded input
// [-pad_begin, in + pad_end) on every axis (AveragePool's count_include_pad divisor).
int64_t CountPaddedTaps(const WindowGeometry& g, const DimArray& out_coord);

}  // namespace kiln::ref
