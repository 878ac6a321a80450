// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the data-movement kernels (device code in data.cu and data_resize.cu; the Kernel
// classes in data.cc and data_resize.cc fill these structs from host metadata). Every launcher
// enqueues its work on `stream`, touches no memory from the host and returns cudaGetLastError()
// (or the error of the copy it enqueued). Element offsets and counts are in elements of
// `elem_bytes` bytes (1, 2, 4 or 8): the kernels move elements as plain words, so one
// instantiation serves FP32, INT32 and the rest of that size. Where the layout allows, the
// launchers move several elements as one wider word (up to 16 bytes).
//
// A zero-size operation must not be launched (the kernels assume at least one element).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace kiln::cuda {

// dst[0, bytes) = src[0, bytes), device to device.
cudaError_t LaunchCopyBytes(void* dst, const void* src, int64_t bytes, cudaStream_t stream);

// A strided gather into a contiguous output: dst (row-major over view.dims) element i is src
// element base + StridedOffset(view, i). Strides may be negative (Slice with negative steps) or
// 0. Slice and the general Transpose.
struct StridedCopyParams {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t elem_bytes = 0;
  int64_t base = 0;
  StridedView view;  // dims: the output's; strides: src element strides per output dim
};
cudaError_t LaunchStridedCopy(const StridedCopyParams& p, cudaStream_t stream);

// dst = src (contiguous, `dims`) with its dims permuted: dst dim i is src dim perm[i]. Dims that
// stay adjacent are merged first; a swap of the last two (merged) dims, batched or not, runs a
// tiled shared-memory kernel, everything else the strided copy.
struct TransposeParams {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t elem_bytes = 0;
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};  // src dims
  int32_t perm[kMaxRank] = {};
};
cudaError_t LaunchTranspose(const TransposeParams& p, cudaStream_t stream);

// Concat and Split as slab copies. The whole tensor is [outer, row] elements; part k is
// [outer, cols[k]] and sits at columns [sum of cols[<k], + cols[k]) of each row (the concat
// axis and everything after it, flattened); row = sum of cols. Concat copies every part into
// the whole, Split the whole into every part. Any number of parts (launched in groups).
cudaError_t LaunchConcat(void* dst, const void* const* srcs, const int64_t* cols, int num_parts,
                         int64_t outer, int64_t elem_bytes, cudaStream_t stream);
cudaError_t LaunchSplit(const void* src, void* const* dsts, const int64_t* cols, int num_parts,
                        int64_t outer, int64_t elem_bytes, cudaStream_t stream);

// Gather: src is [outer, axis_dim, inner], indices (INT32 or INT64, any shape) has num_indices
// elements, dst is [outer, num_indices, inner] with dst[o, j, k] = src[o, indices[j], k].
// Negative indices count from the back of the axis; an index still outside [0, axis_dim) yields
// zeros (the reference rejects it, which the device cannot report).
struct GatherParams {
  const void* src = nullptr;
  void* dst = nullptr;
  const void* indices = nullptr;
  bool indices_int64 = true;  // else INT32
  int64_t elem_bytes = 0;
  int64_t outer = 0;
  int64_t axis_dim = 0;
  int64_t num_indices = 0;
  int64_t inner = 0;
};
cudaError_t LaunchGather(const GatherParams& p, cudaStream_t stream);

// GatherElements: dst has the indices' shape (view.dims); dst element i (coordinate c) is the
// src element at c with its `axis` coordinate replaced by indices[i] (negative: from the back;
// out of range: zero). view.strides are src's element strides with 0 for the axis.
struct GatherElementsParams {
  const void* src = nullptr;
  void* dst = nullptr;
  const void* indices = nullptr;
  bool indices_int64 = true;
  int64_t elem_bytes = 0;
  int64_t src_elements = 0;
  int64_t axis_dim = 0;
  int64_t axis_stride = 0;
  StridedView view;
};
cudaError_t LaunchGatherElements(const GatherElementsParams& p, cudaStream_t stream);

enum class PadMode : int32_t { kConstant = 0, kReflect = 1, kEdge = 2 };

// Pad: dst (out_dims) coordinate c of dim d reads src coordinate c - begin[d] (begin may be
// negative: cropping); outside [0, in_dims[d]) constant mode writes `fill`, edge clamps, reflect
// mirrors without repeating the border (period 2 * (dim - 1)), as the reference's MapPadCoord.
struct PadParams {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t elem_bytes = 0;
  PadMode mode = PadMode::kConstant;
  int32_t rank = 0;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
  alignas(16) unsigned char fill[16] = {};  // the fill element's bytes (first elem_bytes)
};
cudaError_t LaunchPad(const PadParams& p, cudaStream_t stream);

// Tile: dst (out_dims, each a multiple of in_dims) coordinate c of dim d reads src coordinate
// c % in_dims[d].
struct TileParams {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t elem_bytes = 0;
  int32_t rank = 0;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
};
cudaError_t LaunchTile(const TileParams& p, cudaStream_t stream);

// Resize (data_resize.cu): modes nearest and n-linear; the coordinate transformation in double,
// as the reference computes it.
enum class ResizeCoord : int32_t {
  kHalfPixel = 0,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
};
enum class ResizeNearest : int32_t { kRoundPreferFloor = 0, kRoundPreferCeil, kFloor, kCeil };

struct ResizeAxis {
  int64_t in = 0;        // input dim (> 0 unless out is 0)
  int64_t out = 0;       // output dim
  double scale = 1.0;    // the reference's scale (sizes: out / in)
  int32_t identity = 0;  // 1: output coordinate o reads input o (one tap, weight 1)
};

struct ResizeParams {
  const void* src = nullptr;
  void* dst = nullptr;
  ElemType type = ElemType::kF32;  // linear: FP32, FP16, BF16, FP64; nearest: any
  int32_t linear = 0;              // else nearest
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  int32_t rank = 0;
  ResizeAxis axes[kMaxRank];
};
cudaError_t LaunchResize(const ResizeParams& p, cudaStream_t stream);

}  // namespace kiln::cuda
