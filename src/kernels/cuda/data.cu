// SPDX-License-Identifier: Apache-2.0
// Device code of the data-movement kernels (data_launch.h): the strided copy (Slice, the general
// Transpose), the tiled transpose, slab copies (Concat, Split), Gather, GatherElements, Pad and
// Tile. Resize is in data_resize.cu.
//
// NOTE on the approach. Every kernel but the tiled transpose is a grid-stride loop over the
// output (Split: over the input) that computes one element's source from its linear index. The
// per-element functions are __host__ __device__ (host code can run them too) and decompose the
// index over the dims with loops unrolled over kMaxRank, dims past `rank` skipped at run time, so
// the parameter arrays are never indexed by a run-time value and stay in the constant bank
// (the parameters are __grid_constant__). Index math is 32-bit (unsigned; signed offsets) when
// every index and offset of the launch fits in 31 bits, else 64-bit: 64-bit divisions are
// several times slower. Elements move as unsigned words of their size, or of a wider word (up to
// 16 bytes, uint4) where the innermost run is contiguous and every stride, run length and
// pointer is a multiple of it: a channel Slice or a Concat of FP32 NCHW tensors moves 16-byte
// words.
//
// The launchers first simplify the layout (drop size-1 dims, merge dims that step as one), then
// pick the word and the index width. The transpose runs a 32x32 shared-memory tile (reads and
// writes both coalesced) when the merged permutation swaps the last two dims, batched or not
// (NCHW <-> NHWC, [B, M, N] -> [B, N, M]); any other permutation is a strided copy (coalesced
// writes, and coalesced reads too when the innermost dim stays innermost, as in [0, 2, 1, 3]).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/data_launch.h"
#include "kernels/cuda/device.cuh"

namespace kiln::cuda {
namespace {

// Exclusive bound of the indices and offsets a launch may use with 32-bit index math.
constexpr int64_t kIndex32Limit = int64_t{1} << 31;

bool Fits32(std::initializer_list<int64_t> values) {
  for (int64_t v : values) {
    if (v < 0 || v >= kIndex32Limit) return false;
  }
  return true;
}

template <typename U>
using SignedOf = std::make_signed_t<U>;

// `#pragma unroll` in device code (the per-element functions are compiled for the host too).
#ifdef __CUDA_ARCH__
#define KILN_DATA_UNROLL _Pragma("unroll")
#else
#define KILN_DATA_UNROLL
#endif

// The grid-stride loop of the per-element kernels, with index type U.
#define KILN_DATA_LOOP(U, i, n)                                                     \
  for (U i = static_cast<U>(blockIdx.x) * static_cast<U>(blockDim.x) + threadIdx.x; \
       i < static_cast<U>(n); i += static_cast<U>(blockDim.x) * static_cast<U>(gridDim.x))

// Calls f(W{}) with W the unsigned word of `bytes` bytes (1, 2, 4, 8 or 16).
template <typename F>
cudaError_t WithWord(int64_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    case 16:
      return f(uint4{});
    default:
      return cudaErrorInvalidValue;
  }
}

// Calls f(I{}) with I the index type: INT64 or INT32.
template <typename F>
cudaError_t WithIndexType(bool int64, F&& f) {
  return int64 ? f(int64_t{}) : f(int32_t{});
}

// Calls f(U{}) with U uint32_t when `fits32`, else uint64_t.
template <typename F>
cudaError_t WithIndexWidth(bool fits32, F&& f) {
  return fits32 ? f(uint32_t{}) : f(uint64_t{});
}

// The widest word (a multiple of elem_bytes, at most 16 bytes) that every pointer is aligned to
// and that divides every count of elements (as bytes).
int64_t WidestWord(int64_t elem_bytes, std::initializer_list<const void*> pointers,
                   std::initializer_list<int64_t> counts) {
  for (int64_t w = 16; w > elem_bytes; w /= 2) {
    bool ok = true;
    for (const void* p : pointers) ok = ok && reinterpret_cast<uintptr_t>(p) % w == 0;
    for (int64_t c : counts) ok = ok && (c * elem_bytes) % w == 0;
    if (ok) return w;
  }
  return elem_bytes;
}

// Element offset (signed: strides may be negative) of linear index i of row-major v.dims.
template <typename U>
__host__ __device__ __forceinline__ SignedOf<U> ViewOffset(const StridedView& v, U i) {
  using S = SignedOf<U>;
  S offset = 0;
  KILN_DATA_UNROLL
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < v.rank) {
      U c = i;  // the outermost coordinate needs no division
      if (d > 0) {
        const U dim = static_cast<U>(v.dims[d]);
        const U q = i / dim;
        c = i - q * dim;
        i = q;
      }
      offset += static_cast<S>(c) * static_cast<S>(v.strides[d]);
    }
  }
  return offset;
}

// Drops size-1 dims and merges dim d into dim d-1 where the strides step through both as one
// (strides[d-1] == strides[d] * dims[d]); the row-major order of the dims is kept. Rank >= 1.
StridedView SimplifyView(const StridedView& v) {
  StridedView s;
  int r = 0;
  for (int d = 0; d < v.rank; ++d) {
    if (v.dims[d] == 1) continue;
    if (r > 0 && s.strides[r - 1] == v.strides[d] * v.dims[d]) {
      s.dims[r - 1] *= v.dims[d];
      s.strides[r - 1] = v.strides[d];
      continue;
    }
    s.dims[r] = v.dims[d];
    s.strides[r] = v.strides[d];
    ++r;
  }
  if (r == 0) {
    s.dims[0] = 1;
    s.strides[0] = 0;
    r = 1;
  }
  s.rank = r;
  return s;
}

int64_t NumElements(const StridedView& v) {
  int64_t n = 1;
  for (int d = 0; d < v.rank; ++d) n *= v.dims[d];
  return n;
}

// ---- Strided copy ------------------------------------------------------------------------------

struct StridedArgs {
  const void* src;  // at the view's base element
  void* dst;
  int64_t n;
  StridedView view;  // in words
};

template <typename W, typename U>
__host__ __device__ __forceinline__ void StridedCopyElement(const StridedArgs& a, U i) {
  static_cast<W*>(a.dst)[i] = static_cast<const W*>(a.src)[ViewOffset(a.view, i)];
}

template <typename W, typename U>
__global__ void __launch_bounds__(kThreads)
    StridedCopyKernel(const __grid_constant__ StridedArgs a) {
  KILN_DATA_LOOP(U, i, a.n) { StridedCopyElement<W>(a, i); }
}

// ---- Tiled transpose ---------------------------------------------------------------------------

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // threads per block: kTile x kTileRows

// dst[b][c][r] = src[b][r][c] for src [batch, rows, cols]: each block moves 32x32 tiles through
// shared memory (padded a column against bank conflicts), reading src rows and writing dst rows.
template <typename W>
__global__ void __launch_bounds__(kTile* kTileRows)
    TransposeTiledKernel(const W* __restrict__ src, W* __restrict__ dst, int64_t batch,
                         int64_t rows, int64_t cols) {
  __shared__ W tile[kTile][kTile + 1];
  const int64_t tiles_r = (rows + kTile - 1) / kTile;
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t plane = rows * cols;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const W* s = src + b * plane;
    W* d = dst + b * plane;
    for (int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y) {
      for (int64_t tc = blockIdx.x; tc < tiles_c; tc += gridDim.x) {
        const int64_t r0 = tr * kTile, c0 = tc * kTile;
        const int64_t c = c0 + tx;
        for (int j = ty; j < kTile; j += kTileRows) {
          const int64_t r = r0 + j;
          if (r < rows && c < cols) tile[j][tx] = s[r * cols + c];
        }
        __syncthreads();
        const int64_t r = r0 + tx;
        for (int j = ty; j < kTile; j += kTileRows) {
          const int64_t cc = c0 + j;
          if (cc < cols && r < rows) d[cc * rows + r] = tile[tx][j];
        }
        __syncthreads();
      }
    }
  }
}

// ---- Slab copies (Concat, Split) ---------------------------------------------------------------

constexpr int kSlabParts = 32;  // parts per launch

struct SlabArgs {
  void* whole;
  void* parts[kSlabParts];
  int64_t start[kSlabParts + 1];  // column of each part within the group; start[num] = width
  int64_t col0;                   // the group's first column within a row of the whole
  int64_t row;                    // columns per row of the whole
  int64_t width;                  // columns per row of the group
  int64_t n;                      // outer * width
  int32_t num;
};

// Element i of the group (row-major over [outer, width]) between the whole and its part.
template <bool kSplit, typename W, typename U>
__host__ __device__ __forceinline__ void SlabElement(const SlabArgs& a, U i) {
  const U width = static_cast<U>(a.width);
  const U o = i / width;
  const U c = i - o * width;
  // The part holding column c: the last k with start[k] <= c.
  int lo = 0, hi = a.num - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (static_cast<U>(a.start[mid]) <= c) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const U begin = static_cast<U>(a.start[lo]);
  const U cols = static_cast<U>(a.start[lo + 1]) - begin;
  const U part_index = o * cols + (c - begin);
  const U whole_index = o * static_cast<U>(a.row) + static_cast<U>(a.col0) + c;
  W* whole = static_cast<W*>(a.whole);
  W* part = static_cast<W*>(a.parts[lo]);
  if (kSplit) {
    part[part_index] = whole[whole_index];
  } else {
    whole[whole_index] = part[part_index];
  }
}

template <bool kSplit, typename W, typename U>
__global__ void __launch_bounds__(kThreads) SlabKernel(const __grid_constant__ SlabArgs a) {
  KILN_DATA_LOOP(U, i, a.n) { SlabElement<kSplit, W>(a, i); }
}

// ---- Gather, GatherElements --------------------------------------------------------------------

struct GatherArgs {
  const void* src;
  void* dst;
  const void* indices;
  int64_t outer, axis_dim, num_indices, inner;  // inner in words
  int64_t n;
};

template <typename W, typename I, typename U>
__host__ __device__ __forceinline__ void GatherElement(const GatherArgs& a, U i) {
  const U inner = static_cast<U>(a.inner);
  const U n = static_cast<U>(a.num_indices);
  const U t = i / inner;
  const U k = i - t * inner;
  const U o = t / n;
  const U j = t - o * n;
  int64_t index = static_cast<int64_t>(static_cast<const I*>(a.indices)[j]);
  if (index < 0) index += a.axis_dim;
  W* dst = static_cast<W*>(a.dst);
  if (index < 0 || index >= a.axis_dim) {  // the reference rejects it: zeros here
    dst[i] = W{};
    return;
  }
  const U dim = static_cast<U>(a.axis_dim);
  dst[i] = static_cast<const W*>(a.src)[(o * dim + static_cast<U>(index)) * inner + k];
}

template <typename W, typename I, typename U>
__global__ void __launch_bounds__(kThreads) GatherKernel(const __grid_constant__ GatherArgs a) {
  KILN_DATA_LOOP(U, i, a.n) { GatherElement<W, I>(a, i); }
}

struct GatherElementsArgs {
  const void* src;
  void* dst;
  const void* indices;
  int64_t axis_dim, axis_stride;
  int64_t n;
  StridedView view;
};

template <typename W, typename I, typename U>
__host__ __device__ __forceinline__ void GatherElementsElement(const GatherElementsArgs& a, U i) {
  using S = SignedOf<U>;
  int64_t index = static_cast<int64_t>(static_cast<const I*>(a.indices)[i]);
  if (index < 0) index += a.axis_dim;
  W* dst = static_cast<W*>(a.dst);
  if (index < 0 || index >= a.axis_dim) {  // the reference rejects it: zeros here
    dst[i] = W{};
    return;
  }
  dst[i] = static_cast<const W*>(
      a.src)[ViewOffset(a.view, i) + static_cast<S>(index) * static_cast<S>(a.axis_stride)];
}

template <typename W, typename I, typename U>
__global__ void __launch_bounds__(kThreads)
    GatherElementsKernel(const __grid_constant__ GatherElementsArgs a) {
  KILN_DATA_LOOP(U, i, a.n) { GatherElementsElement<W, I>(a, i); }
}

// ---- Pad, Tile ---------------------------------------------------------------------------------

// The reference's MapPadCoord (ref/pad.cc): the input coordinate for coordinate x of a dim of
// `dim` elements, -1 for the fill value.
__host__ __device__ __forceinline__ int64_t MapPadCoord(PadMode mode, int64_t x, int64_t dim) {
  if (x >= 0 && x < dim) return x;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return x < 0 ? 0 : dim - 1;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      int64_t m = x % period;
      if (m < 0) m += period;
      return m < dim ? m : period - m;
    }
  }
  return -1;
}

struct PadArgs {
  const void* src;
  void* dst;
  int64_t n;
  PadMode mode;
  int32_t rank;
  int64_t in_dims[kMaxRank];
  int64_t out_dims[kMaxRank];
  int64_t begin[kMaxRank];
  int64_t in_strides[kMaxRank];
  alignas(16) unsigned char fill[16];  // the fill element repeated over a word
};

template <typename W, typename U>
__host__ __device__ __forceinline__ void PadElement(const PadArgs& a, U out) {
  using S = SignedOf<U>;
  S offset = 0;
  bool fill = false;
  U i = out;
  KILN_DATA_UNROLL
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < a.rank) {
      U c = i;
      if (d > 0) {
        const U dim = static_cast<U>(a.out_dims[d]);
        const U q = i / dim;
        c = i - q * dim;
        i = q;
      }
      const int64_t x = MapPadCoord(a.mode, static_cast<int64_t>(c) - a.begin[d], a.in_dims[d]);
      if (x < 0) {
        fill = true;
      } else {
        offset += static_cast<S>(x) * static_cast<S>(a.in_strides[d]);
      }
    }
  }
  W* dst = static_cast<W*>(a.dst);
  dst[out] = fill ? *reinterpret_cast<const W*>(a.fill) : static_cast<const W*>(a.src)[offset];
}

template <typename W, typename U>
__global__ void __launch_bounds__(kThreads) PadKernel(const __grid_constant__ PadArgs a) {
  KILN_DATA_LOOP(U, i, a.n) { PadElement<W>(a, i); }
}

struct TileArgs {
  const void* src;
  void* dst;
  int64_t n;
  int32_t rank;
  int64_t in_dims[kMaxRank];
  int64_t out_dims[kMaxRank];
  int64_t in_strides[kMaxRank];
};

template <typename W, typename U>
__host__ __device__ __forceinline__ void TileElement(const TileArgs& a, U out) {
  U offset = 0;
  U i = out;
  KILN_DATA_UNROLL
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < a.rank) {
      U c = i;
      if (d > 0) {
        const U dim = static_cast<U>(a.out_dims[d]);
        const U q = i / dim;
        c = i - q * dim;
        i = q;
      }
      const U in = static_cast<U>(a.in_dims[d]);
      offset += (c < in ? c : c % in) * static_cast<U>(a.in_strides[d]);
    }
  }
  static_cast<W*>(a.dst)[out] = static_cast<const W*>(a.src)[offset];
}

template <typename W, typename U>
__global__ void __launch_bounds__(kThreads) TileKernel(const __grid_constant__ TileArgs a) {
  KILN_DATA_LOOP(U, i, a.n) { TileElement<W>(a, i); }
}

}  // namespace

// ---- Launchers ---------------------------------------------------------------------------------

cudaError_t LaunchCopyBytes(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (bytes <= 0) return cudaSuccess;
  return cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream);
}

cudaError_t LaunchStridedCopy(const StridedCopyParams& p, cudaStream_t stream) {
  StridedView v = SimplifyView(p.view);
  const int64_t n = NumElements(v);
  if (n <= 0) return cudaSuccess;
  const void* src = static_cast<const unsigned char*>(p.src) + p.base * p.elem_bytes;
  const int last = v.rank - 1;
  if (v.rank == 1 && v.strides[0] == 1) {
    return LaunchCopyBytes(p.dst, src, n * p.elem_bytes, stream);
  }
  int64_t word = p.elem_bytes;
  if (v.strides[last] == 1) {
    // Several elements per word: the innermost run, every outer stride and both pointers must
    // be whole words.
    word = WidestWord(p.elem_bytes, {src, p.dst}, {v.dims[last]});
    for (int d = 0; d < last; ++d) {
      while (word > p.elem_bytes && (v.strides[d] * p.elem_bytes) % word != 0) word /= 2;
    }
    const int64_t k = word / p.elem_bytes;
    v.dims[last] /= k;
    for (int d = 0; d < last; ++d) v.strides[d] /= k;
  }
  int64_t extent = 0;  // largest |offset|
  for (int d = 0; d < v.rank; ++d) extent += (v.dims[d] - 1) * std::llabs(v.strides[d]);
  StridedArgs a{src, p.dst, n / (word / p.elem_bytes), v};
  return WithWord(word, [&](auto w) {
    using W = decltype(w);
    return WithIndexWidth(Fits32({a.n, extent}), [&](auto u) {
      using U = decltype(u);
      StridedCopyKernel<W, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchTranspose(const TransposeParams& p, cudaStream_t stream) {
  int64_t in_strides[kMaxRank] = {};
  int64_t stride = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= p.dims[d];
  }
  StridedView view;
  view.rank = p.rank;
  for (int d = 0; d < p.rank; ++d) {
    view.dims[d] = p.dims[p.perm[d]];
    view.strides[d] = in_strides[p.perm[d]];
  }
  const StridedView v = SimplifyView(view);
  if (NumElements(v) <= 0) return cudaSuccess;
  // The swap of the last two dims: [a, b] <- [b, a], or [n, a, b] <- [n, b, a].
  int64_t batch = 0, rows = 0, cols = 0;
  if (v.rank == 2 && v.strides[0] == 1 && v.strides[1] == v.dims[0]) {
    batch = 1;
    rows = v.dims[1];
    cols = v.dims[0];
  } else if (v.rank == 3 && v.strides[1] == 1 && v.strides[2] == v.dims[1] &&
             v.strides[0] == v.dims[1] * v.dims[2]) {
    batch = v.dims[0];
    rows = v.dims[2];
    cols = v.dims[1];
  }
  if (batch == 0 || p.elem_bytes > 8) {
    StridedCopyParams s;
    s.src = p.src;
    s.dst = p.dst;
    s.elem_bytes = p.elem_bytes;
    s.view = v;
    return LaunchStridedCopy(s, stream);
  }
  const int64_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles_c, 0x7fffffff)),
                  static_cast<unsigned>(std::min<int64_t>(tiles_r, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(batch, 65535)));
  const dim3 block(kTile, kTileRows);
  auto launch = [&](auto w) {
    using W = decltype(w);
    TransposeTiledKernel<W><<<grid, block, 0, stream>>>(static_cast<const W*>(p.src),
                                                        static_cast<W*>(p.dst), batch, rows, cols);
    return cudaGetLastError();
  };
  switch (p.elem_bytes) {
    case 1:
      return launch(uint8_t{});
    case 2:
      return launch(uint16_t{});
    case 4:
      return launch(uint32_t{});
    case 8:
      return launch(uint64_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

namespace {

// Concat (kSplit false) or Split: the parts with columns, in groups of kSlabParts.
template <bool kSplit>
cudaError_t LaunchSlabs(void* whole, void* const* parts, const int64_t* cols, int num_parts,
                        int64_t outer, int64_t elem_bytes, cudaStream_t stream) {
  if (outer <= 0) return cudaSuccess;
  int64_t row = 0;
  int64_t word = 16;
  for (int k = 0; k < num_parts; ++k) {
    row += cols[k];
    if (cols[k] > 0) word = std::min(word, WidestWord(elem_bytes, {parts[k], whole}, {cols[k]}));
  }
  if (row <= 0) return cudaSuccess;
  word = std::max(word, elem_bytes);
  const int64_t per_word = word / elem_bytes;
  const bool fits32 = Fits32({outer * (row / per_word)});
  int64_t col0 = 0;  // in words
  int k = 0;
  while (k < num_parts) {
    SlabArgs a{};
    a.whole = whole;
    a.row = row / per_word;
    a.col0 = col0;
    a.num = 0;
    int64_t width = 0;
    for (; k < num_parts && a.num < kSlabParts; ++k) {
      if (cols[k] == 0) continue;
      a.parts[a.num] = parts[k];
      a.start[a.num] = width;
      width += cols[k] / per_word;
      ++a.num;
    }
    if (a.num == 0) break;
    a.start[a.num] = width;
    a.width = width;
    a.n = outer * width;
    col0 += width;
    const cudaError_t e = WithWord(word, [&](auto w) {
      using W = decltype(w);
      return WithIndexWidth(fits32, [&](auto u) {
        using U = decltype(u);
        SlabKernel<kSplit, W, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      });
    });
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchConcat(void* dst, const void* const* srcs, const int64_t* cols, int num_parts,
                         int64_t outer, int64_t elem_bytes, cudaStream_t stream) {
  // The kernel reads the parts through non-const pointers it never writes (kSplit false).
  return LaunchSlabs<false>(dst, const_cast<void* const*>(srcs), cols, num_parts, outer, elem_bytes,
                            stream);
}

cudaError_t LaunchSplit(const void* src, void* const* dsts, const int64_t* cols, int num_parts,
                        int64_t outer, int64_t elem_bytes, cudaStream_t stream) {
  // The kernel only reads the whole (kSplit true).
  return LaunchSlabs<true>(const_cast<void*>(src), dsts, cols, num_parts, outer, elem_bytes,
                           stream);
}

cudaError_t LaunchGather(const GatherParams& p, cudaStream_t stream) {
  const int64_t word = WidestWord(p.elem_bytes, {p.src, p.dst}, {p.inner});
  const int64_t per_word = word / p.elem_bytes;
  GatherArgs a{p.src, p.dst, p.indices, p.outer, p.axis_dim, p.num_indices, p.inner / per_word, 0};
  a.n = a.outer * a.num_indices * a.inner;
  if (a.n <= 0) return cudaSuccess;
  const bool fits32 = Fits32({a.n, a.outer * a.axis_dim * a.inner});
  return WithWord(word, [&](auto w) {
    using W = decltype(w);
    return WithIndexType(p.indices_int64, [&](auto index) {
      using I = decltype(index);
      return WithIndexWidth(fits32, [&](auto u) {
        using U = decltype(u);
        GatherKernel<W, I, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      });
    });
  });
}

cudaError_t LaunchGatherElements(const GatherElementsParams& p, cudaStream_t stream) {
  GatherElementsArgs a{p.src, p.dst, p.indices, p.axis_dim, p.axis_stride, NumElements(p.view),
                       p.view};
  if (a.n <= 0) return cudaSuccess;
  const bool fits32 = Fits32({a.n, p.src_elements});
  return WithWord(p.elem_bytes, [&](auto w) {
    using W = decltype(w);
    return WithIndexType(p.indices_int64, [&](auto index) {
      using I = decltype(index);
      return WithIndexWidth(fits32, [&](auto u) {
        using U = decltype(u);
        GatherElementsKernel<W, I, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      });
    });
  });
}

cudaError_t LaunchPad(const PadParams& p, cudaStream_t stream) {
  // Drop unpadded size-1 dims and merge runs of unpadded dims (both sides 0: in == out).
  PadArgs a{};
  a.src = p.src;
  a.dst = p.dst;
  a.mode = p.mode;
  int r = 0;
  auto unpadded = [&](int d) { return p.begin[d] == 0 && p.in_dims[d] == p.out_dims[d]; };
  for (int d = 0; d < p.rank; ++d) {
    if (unpadded(d) && p.in_dims[d] == 1) continue;
    if (r > 0 && unpadded(d) && a.begin[r - 1] == 0 && a.in_dims[r - 1] == a.out_dims[r - 1]) {
      a.in_dims[r - 1] *= p.in_dims[d];
      a.out_dims[r - 1] *= p.in_dims[d];
      continue;
    }
    a.in_dims[r] = p.in_dims[d];
    a.out_dims[r] = p.out_dims[d];
    a.begin[r] = p.begin[d];
    ++r;
  }
  if (r == 0) {
    a.in_dims[0] = a.out_dims[0] = 1;
    r = 1;
  }
  a.rank = r;
  const int last = r - 1;
  // An unpadded innermost dim moves in wider words (the fill repeated over the word).
  int64_t word = p.elem_bytes;
  if (a.begin[last] == 0 && a.in_dims[last] == a.out_dims[last]) {
    word = WidestWord(p.elem_bytes, {p.src, p.dst}, {a.in_dims[last]});
    a.in_dims[last] /= word / p.elem_bytes;
    a.out_dims[last] /= word / p.elem_bytes;
  }
  for (int64_t b = 0; b < word; ++b) a.fill[b] = p.fill[b % p.elem_bytes];
  int64_t in_elements = 1;
  a.n = 1;
  for (int d = last; d >= 0; --d) {
    a.in_strides[d] = in_elements;
    in_elements *= a.in_dims[d];
    a.n *= a.out_dims[d];
  }
  if (a.n <= 0) return cudaSuccess;
  const bool fits32 = Fits32({a.n, in_elements});
  return WithWord(word, [&](auto w) {
    using W = decltype(w);
    return WithIndexWidth(fits32, [&](auto u) {
      using U = decltype(u);
      PadKernel<W, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchTile(const TileParams& p, cudaStream_t stream) {
  // Merge runs of dims that are not repeated (in == out).
  TileArgs a{};
  a.src = p.src;
  a.dst = p.dst;
  int r = 0;
  for (int d = 0; d < p.rank; ++d) {
    const bool same = p.in_dims[d] == p.out_dims[d];
    if (same && p.in_dims[d] == 1) continue;
    if (r > 0 && same && a.in_dims[r - 1] == a.out_dims[r - 1]) {
      a.in_dims[r - 1] *= p.in_dims[d];
      a.out_dims[r - 1] *= p.in_dims[d];
      continue;
    }
    a.in_dims[r] = p.in_dims[d];
    a.out_dims[r] = p.out_dims[d];
    ++r;
  }
  if (r == 0) {
    a.in_dims[0] = a.out_dims[0] = 1;
    r = 1;
  }
  a.rank = r;
  const int last = r - 1;
  const int64_t word = WidestWord(p.elem_bytes, {p.src, p.dst}, {a.in_dims[last]});
  a.in_dims[last] /= word / p.elem_bytes;
  a.out_dims[last] /= word / p.elem_bytes;
  int64_t in_elements = 1;
  a.n = 1;
  for (int d = last; d >= 0; --d) {
    a.in_strides[d] = in_elements;
    in_elements *= a.in_dims[d];
    a.n *= a.out_dims[d];
  }
  if (a.n <= 0) return cudaSuccess;
  const bool fits32 = Fits32({a.n, in_elements});
  return WithWord(word, [&](auto w) {
    using W = decltype(w);
    return WithIndexWidth(fits32, [&](auto u) {
      using U = decltype(u);
      TileKernel<W, U><<<BlocksFor(a.n), kThreads, 0, stream>>>(a);
      return cudaGetLastError();
    });
  });
}

}  // namespace kiln::cuda
