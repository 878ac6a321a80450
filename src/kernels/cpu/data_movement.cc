// SPDX-License-Identifier: Apache-2.0
// Data movement for every fixed-width dtype: Slice (10+), Concat, Split, Expand, Tile, Pad (11+),
// Where, and Cast between FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8, UINT8, INT32, INT64 and BOOL.
// Elements of 1, 2, 4 or 8 bytes are moved as bytes, so one path serves FLOAT, INT64, BOOL...;
// BYTES strings run on the reference kernel.
//
// NOTE on the strided walk: Slice, Expand and Tile (and Where, with three operands) are one
// strided copy. The output is contiguous, and each input is described by element strides per
// output dim: Slice has input stride * step (negative for negative steps) from a base offset;
// Expand has stride 0 on broadcast dims; Tile views the input as [r0, d0, r1, d1, ...] with
// stride 0 on each repeat dim. Size-1 dims are dropped and adjacent dims merged wherever every
// operand steps through them as one (stride[i] == stride[i+1] * dim[i+1]), so a channel Slice of
// [8,256,64,64] becomes 8 rows of contiguous runs and an attention-mask Expand [B,1,1,S] ->
// [B,H,S,S] becomes [B, H*S, S] with a zero middle stride. The innermost merged dim is then copied
// per row: memcpy when its stride is 1, a fill when it is 0, a strided loop otherwise. Where's
// innermost strides are each 0 or 1 (an operand either runs along the last output dim or is
// broadcast over it), so its bitwise select loop is instantiated for the eight combinations.
//
// Concat and Split copy slabs: per outer index, one contiguous slab per input (output). Many
// outer rows are split over the team by rows; a few large slabs (Concat on axis 0 or 1 of an
// NCHW tensor) are laid out as a list of (source, destination, bytes) segments whose total is
// cut into equal byte ranges. Pad merges runs of unpadded dims and writes each output row as
// left border, memcpy of the input row, right border (constant fill, edge or reflect through the
// reference's coordinate map); rows whose outer coordinates fall in the constant padding are
// filled whole.
//
// Work is split over the OpenMP team (ParallelFor) only when it moves more than 2 MB (8 MB for
// long memcpy runs; waking the team costs as much as a megabyte copy here, see kGrainBytes). Below
// that it runs inline, and nothing is allocated but the outputs, so shape computations on tiny
// INT64 tensors pay only for reading their parameters. Outputs are written whole and taken with
// AllocateOutputForOverwrite.
//
// Cast mirrors the reference's per-element rules (ref/cast.cc ConvertNumber, with its WrapToInt
// and DoubleToFloat16 helpers) and is bit-identical with it: FLOAT/DOUBLE -> integer converts
// blocks of 256 with one truncating conversion when the whole block is inside the target's
// (32- or 64-bit) range and not NaN, and otherwise runs the reference's rule (NaN -> 0,
// saturation beyond int64, then modulo 2^n); FLOAT -> FLOAT16 uses F16C (a function compiled for
// AVX2+F16C in this file, run only when isa.h reports both) with NaN lanes rewritten to the
// reference's canonical quiet NaN; FLOAT16 / BFLOAT16 -> FLOAT widens with half_kernels.h and
// redoes NaN lanes the reference's way (the vector instructions quiet signalling NaNs).
//
// Everything else goes to the reference kernel each fast kernel holds: BYTES, tensors that are
// not contiguous CPU memory, Cast to or from other dtypes, and every input the reference rejects
// (out-of-range or repeated axes, zero steps, shapes that do not broadcast, pads that leave a
// negative size, mismatched dtypes), so errors read exactly as the reference's.

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/half_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/math_common.h"
#include "op/slice_range.h"

namespace kiln::cpu {
namespace {

// Tile doubles the rank (a repeat dim before each input dim).
constexpr int kMaxDims = 2 * Shape::kMaxRank;
// Bytes an op moves before it is split over the team (ParallelFor's grain, so each chunk moves at
// least half of it). Waking the team costs about 50 us on the 2-core machines kiln targets (the
// bounded idle wait puts the threads to sleep between kernels, base/thread_wait.h), the time of a
// 1-4 MB copy: with a 32 KB grain the Concats of DenseNet-121 took 7x longer than inline, and
// with 1 MB a 1.2 MB copy still took 2.4x longer. Long memcpy runs (Concat, Split, contiguous
// rows) gain least from a second thread, which shares the memory bandwidth: they wait for 8 MB.
constexpr int64_t kGrainBytes = int64_t{2} << 20;
constexpr int64_t kCopyGrainBytes = int64_t{8} << 20;
// Rows at least this long are copied with memcpy and take kCopyGrainBytes.
constexpr int64_t kLongRunBytes = 256;
// Outputs a Split keeps pointers to on the stack (more go to a vector).
constexpr int kInlineOutputs = 32;

// Element bytes of `t` when these kernels move it (a fixed-width dtype, contiguous, on the CPU);
// 0 otherwise.
int64_t MovableSize(const Tensor& t) {
  if (!t.valid() || t.dtype() == DataType::kBytes || !t.device().is_cpu() || !t.is_contiguous()) {
    return 0;
  }
  const size_t s = DataTypeSize(t.dtype());
  return s == 1 || s == 2 || s == 4 || s == 8 ? static_cast<int64_t>(s) : 0;
}

// Reads a 1-D INT32/INT64 CPU tensor of at most `max` entries into `out`; returns the count, or
// -1 for anything else (the reference then reads the tensor and reports it).
int ReadSmallInts(const Tensor& t, int max, int64_t* out) {
  if (!t.valid() || !t.device().is_cpu() || !t.is_contiguous() || t.rank() != 1 || t.dim(0) > max) {
    return -1;
  }
  const int n = static_cast<int>(t.dim(0));
  if (t.dtype() == DataType::kInt64) {
    const int64_t* p = t.data<const int64_t>();
    for (int i = 0; i < n; ++i) out[i] = p[i];
  } else if (t.dtype() == DataType::kInt32) {
    const int32_t* p = t.data<const int32_t>();
    for (int i = 0; i < n; ++i) out[i] = p[i];
  } else {
    return -1;
  }
  return n;
}

// Calls f(tag) with ref::TypeTag<U> for the unsigned integer U of `bytes` (1, 2, 4 or 8).
template <typename F>
void WithWord(int64_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      f(ref::TypeTag<uint8_t>{});
      return;
    case 2:
      f(ref::TypeTag<uint16_t>{});
      return;
    case 4:
      f(ref::TypeTag<uint32_t>{});
      return;
    default:
      f(ref::TypeTag<uint64_t>{});
      return;
  }
}

// A fast kernel holding the reference kernel for the node; Implementation() says whether calls
// were handed to it ("kiln ref"; empty while every call took the fast path).
class FastKernel : public Kernel {
 public:
  explicit FastKernel(std::unique_ptr<Kernel> reference) : reference_(std::move(reference)) {}

  std::string Implementation() const override {
    const unsigned paths = paths_.load(std::memory_order_relaxed);
    if ((paths & kRefPath) == 0) return {};
    return (paths & kFastPath) != 0 ? "kiln, kiln ref" : "kiln ref";
  }

 protected:
  Status Reference(KernelContext& ctx) const {
    if ((paths_.load(std::memory_order_relaxed) & kRefPath) == 0) paths_.fetch_or(kRefPath);
    return reference_->Compute(ctx);
  }
  void TookFastPath() const {
    if ((paths_.load(std::memory_order_relaxed) & kFastPath) == 0) paths_.fetch_or(kFastPath);
  }

 private:
  static constexpr unsigned kFastPath = 1, kRefPath = 2;
  std::unique_ptr<Kernel> reference_;
  mutable std::atomic<unsigned> paths_{0};
};

// ---- Strided walk ----------------------------------------------------------------------------

// The output (contiguous, `dims`) and N inputs laid against it: element `base[k]` plus the sum
// of coord[d] * strides[k][d] is operand k's element for output coordinate `coord`.
template <int N>
struct Layout {
  int rank = 0;
  std::array<int64_t, kMaxDims> dims{};
  std::array<std::array<int64_t, kMaxDims>, N> strides{};
  std::array<int64_t, N> base{};

  int64_t Total() const {
    int64_t t = 1;
    for (int d = 0; d < rank; ++d) t *= dims[static_cast<size_t>(d)];
    return t;
  }

  // Drops size-1 dims and merges each dim into the previous one where every operand steps
  // through the pair as through one dim. Leaves at least one dim. REQUIRES: Total() > 0.
  void Simplify() {
    int r = 0;
    for (int i = 0; i < rank; ++i) {
      const size_t iu = static_cast<size_t>(i);
      const int64_t d = dims[iu];
      if (d == 1) continue;
      if (r > 0) {
        const size_t p = static_cast<size_t>(r - 1);
        bool merge = true;
        for (int k = 0; k < N; ++k) merge = merge && strides[k][p] == strides[k][iu] * d;
        if (merge) {
          dims[p] *= d;
          for (int k = 0; k < N; ++k) strides[k][p] = strides[k][iu];
          continue;
        }
      }
      const size_t ru = static_cast<size_t>(r);
      dims[ru] = d;
      for (int k = 0; k < N; ++k) strides[k][ru] = strides[k][iu];
      ++r;
    }
    if (r == 0) {  // one element
      dims[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 0;
      r = 1;
    }
    rank = r;
  }
};

// Calls row(out, in, n) for the output elements [begin, end) in order, one call per piece of an
// innermost row: output elements [out, out + n) take operand k's elements in[k] + j * (innermost
// stride of k) for j < n.
template <int N, typename RowFn>
void WalkRows(const Layout<N>& l, int64_t begin, int64_t end, RowFn&& row) {
  const int last = l.rank - 1;
  const size_t lu = static_cast<size_t>(last);
  const int64_t len = l.dims[lu];
  int64_t r = begin / len, col = begin % len;
  std::array<int64_t, kMaxDims> coord;
  std::array<int64_t, N> off = l.base;
  for (int d = last - 1; d >= 0; --d) {
    const size_t du = static_cast<size_t>(d);
    coord[du] = r % l.dims[du];
    r /= l.dims[du];
    for (int k = 0; k < N; ++k) off[k] += coord[du] * l.strides[k][du];
  }
  for (int64_t o = begin; o < end;) {
    const int64_t n = std::min(len - col, end - o);
    std::array<int64_t, N> at;
    for (int k = 0; k < N; ++k) at[k] = off[k] + col * l.strides[k][lu];
    row(o, at, n);
    o += n;
    col = 0;
    if (o >= end) break;
    for (int d = last - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      ++coord[du];
      for (int k = 0; k < N; ++k) off[k] += l.strides[k][du];
      if (coord[du] < l.dims[du]) break;
      for (int k = 0; k < N; ++k) off[k] -= l.strides[k][du] * l.dims[du];
      coord[du] = 0;
    }
  }
}

// WalkRows over the whole output, split over the team when it moves more than `grain_bytes`.
template <int N, typename RowFn>
void WalkAllRows(const Layout<N>& l, int64_t out_elem_bytes, int64_t grain_bytes, RowFn&& row) {
  const int64_t total = l.Total();
  const int64_t grain = std::max<int64_t>(1, grain_bytes / out_elem_bytes);
  if (total <= grain) {
    WalkRows(l, 0, total, row);
    return;
  }
  ParallelFor(total, grain, [&](int64_t begin, int64_t end) { WalkRows(l, begin, end, row); });
}

// y = the strided view `l` of x. REQUIRES: l.Total() > 0, simplified.
template <typename T>
void CopyStrided(const Layout<1>& l, const void* src, void* dst) {
  const T* x = static_cast<const T*>(src);
  T* y = static_cast<T*>(dst);
  const size_t last = static_cast<size_t>(l.rank - 1);
  const int64_t s = l.strides[0][last];
  const bool long_runs = s == 1 && l.dims[last] * static_cast<int64_t>(sizeof(T)) >= kLongRunBytes;
  WalkAllRows(l, static_cast<int64_t>(sizeof(T)), long_runs ? kCopyGrainBytes : kGrainBytes,
              [&](int64_t o, const std::array<int64_t, 1>& in, int64_t n) {
                const T* p = x + in[0];
                T* q = y + o;
                if (s == 1) {
                  std::memcpy(q, p, static_cast<size_t>(n) * sizeof(T));
                } else if (s == 0) {
                  const T v = *p;
#pragma omp simd
                  for (int64_t j = 0; j < n; ++j) q[j] = v;
                } else if (s == 2) {  // every other element (space-to-depth slices)
#pragma omp simd
                  for (int64_t j = 0; j < n; ++j) q[j] = p[2 * j];
                } else if (s == -1) {  // reversed
#pragma omp simd
                  for (int64_t j = 0; j < n; ++j) q[j] = p[-j];
                } else {
                  for (int64_t j = 0; j < n; ++j) q[j] = p[j * s];
                }
              });
}

void CopyStridedBytes(Layout<1>& l, int64_t elem_bytes, const void* src, void* dst) {
  l.Simplify();
  WithWord(elem_bytes, [&](auto tag) {
    using U = typename decltype(tag)::type;
    CopyStrided<U>(l, src, dst);
  });
}

// Row-major element strides of `s` into `out`.
void RowStrides(const Shape& s, int64_t* out) {
  int64_t stride = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    out[i] = stride;
    stride *= s.dim(i);
  }
}

// ---- Slice -----------------------------------------------------------------------------------

class SliceKernel final : public FastKernel {
 public:
  using FastKernel::FastKernel;

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) {
      return Reference(ctx);
    }
    const Tensor& x = ctx.input(0);
    const int64_t elem = MovableSize(x);
    const int rank = x.rank();
    std::array<int64_t, Shape::kMaxRank> starts, ends, axes, steps;
    const int n = ReadSmallInts(ctx.input(1), rank, starts.data());
    if (elem == 0 || n < 0 || ReadSmallInts(ctx.input(2), rank, ends.data()) != n) {
      return Reference(ctx);
    }
    if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
      if (ReadSmallInts(ctx.input(3), rank, axes.data()) != n) return Reference(ctx);
    } else {
      for (int i = 0; i < n; ++i) axes[static_cast<size_t>(i)] = i;
    }
    if (ctx.num_inputs() > 4 && ctx.has_input(4)) {
      if (ReadSmallInts(ctx.input(4), rank, steps.data()) != n) return Reference(ctx);
    } else {
      std::fill_n(steps.begin(), n, 1);
    }
    Layout<1> l;
    l.rank = rank;
    RowStrides(x.shape(), l.strides[0].data());
    std::array<int64_t, Shape::kMaxRank> in_strides;
    std::copy_n(l.strides[0].begin(), Shape::kMaxRank, in_strides.begin());
    for (int d = 0; d < rank; ++d) l.dims[static_cast<size_t>(d)] = x.dim(d);
    unsigned seen = 0;
    for (int i = 0; i < n; ++i) {
      const size_t iu = static_cast<size_t>(i);
      int64_t a = axes[iu];
      const int64_t step = steps[iu];
      // Out-of-range and repeated axes and zero steps are errors the reference reports;
      // INT64_MIN cannot be negated (ClampSlice's -step).
      if (a < -rank || a >= rank || step == 0 || step == std::numeric_limits<int64_t>::min()) {
        return Reference(ctx);
      }
      if (a < 0) a += rank;
      if ((seen >> a) & 1u) return Reference(ctx);
      seen |= 1u << a;
      const size_t au = static_cast<size_t>(a);
      const SliceRange r = ClampSlice(starts[iu], ends[iu], step, x.dim(static_cast<int>(a)));
      l.dims[au] = r.count;
      l.base[0] += r.start * in_strides[au];
      l.strides[0][au] = r.count > 1 ? in_strides[au] * step : 0;
    }
    const Shape out(std::span<const int64_t>(l.dims.data(), static_cast<size_t>(rank)));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    TookFastPath();
    if (out.NumElements() == 0) return Status::OK();
    CopyStridedBytes(l, elem, x.raw_data(), y.raw_data());
    return Status::OK();
  }
};

// ---- Expand, Tile ----------------------------------------------------------------------------

class ExpandKernel final : public FastKernel {
 public:
  using FastKernel::FastKernel;

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1)) return Reference(ctx);
    const Tensor& x = ctx.input(0);
    const int64_t elem = MovableSize(x);
    std::array<int64_t, Shape::kMaxRank> spec;
    const int n = ReadSmallInts(ctx.input(1), Shape::kMaxRank, spec.data());
    if (elem == 0 || n < 0) return Reference(ctx);
    // The target shape must itself be a valid shape (the reference checks it on its own).
    if (!Shape::Create(std::span<const int64_t>(spec.data(), static_cast<size_t>(n))).ok()) {
      return Reference(ctx);
    }
    const int xr = x.rank();
    const int rank = std::max(n, xr);
    std::array<int64_t, Shape::kMaxRank> x_strides{};
    RowStrides(x.shape(), x_strides.data());
    Layout<1> l;
    l.rank = rank;
    for (int i = 0; i < rank; ++i) {  // i counts from the back
      const int xi = xr - 1 - i, si = n - 1 - i;
      const int64_t xd = xi >= 0 ? x.dim(xi) : 1;
      const int64_t sd = si >= 0 ? spec[static_cast<size_t>(si)] : 1;
      if (xd != sd && xd != 1 && sd != 1) return Reference(ctx);
      const size_t o = static_cast<size_t>(rank - 1 - i);
      l.dims[o] = xd == 1 ? sd : xd;
      l.strides[0][o] = xd == 1 ? 0 : x_strides[static_cast<size_t>(xi)];
    }
    Result<Shape> out =
        Shape::Create(std::span<const int64_t>(l.dims.data(), static_cast<size_t>(rank)));
    if (!out.ok()) return Reference(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), *out));
    TookFastPath();
    if (out->NumElements() == 0) return Status::OK();
    CopyStridedBytes(l, elem, x.raw_data(), y.raw_data());
    return Status::OK();
  }
};

class TileKernel final : public FastKernel {
 public:
  using FastKernel::FastKernel;

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1)) return Reference(ctx);
    const Tensor& x = ctx.input(0);
    const int64_t elem = MovableSize(x);
    const int rank = x.rank();
    std::array<int64_t, Shape::kMaxRank> repeats;
    if (elem == 0 || ReadSmallInts(ctx.input(1), Shape::kMaxRank, repeats.data()) != rank) {
      return Reference(ctx);
    }
    std::array<int64_t, Shape::kMaxRank> x_strides{}, dims{};
    RowStrides(x.shape(), x_strides.data());
    Layout<1> l;
    l.rank = 2 * rank;
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      if (repeats[du] < 0 || __builtin_mul_overflow(x.dim(d), repeats[du], &dims[du])) {
        return Reference(ctx);
      }
      // Input dim d seen as [repeats, dim]: the repeat dim steps by 0.
      l.dims[2 * du] = repeats[du];
      l.strides[0][2 * du] = 0;
      l.dims[2 * du + 1] = x.dim(d);
      l.strides[0][2 * du + 1] = x_strides[du];
    }
    Result<Shape> out =
        Shape::Create(std::span<const int64_t>(dims.data(), static_cast<size_t>(rank)));
    if (!out.ok()) return Reference(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), *out));
    TookFastPath();
    if (out->NumElements() == 0) return Status::OK();
    CopyStridedBytes(l, elem, x.raw_data(), y.raw_data());
    return Status::OK();
  }
};

// ---- Where -----------------------------------------------------------------------------------

// y[j] = c[j * kC] ? a[j * kA] : b[j * kB], a bitwise select on the element bits.
template <typename U, int kC, int kA, int kB>
void SelectRow(const uint8_t* c, const U* a, const U* b, U* y, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const U m = static_cast<U>(U{0} - static_cast<U>(c[j * kC] != 0));
    y[j] = static_cast<U>((a[j * kA] & m) | (b[j * kB] & static_cast<U>(~m)));
  }
}

template <typename U>
using SelectFn = void (*)(const uint8_t*, const U*, const U*, U*, int64_t);

// The select loop for innermost strides (sc, sa, sb), each 0 or 1.
template <typename U>
SelectFn<U> PickSelect(int64_t sc, int64_t sa, int64_t sb) {
  static constexpr SelectFn<U> kTable[8] = {
      SelectRow<U, 0, 0, 0>, SelectRow<U, 0, 0, 1>, SelectRow<U, 0, 1, 0>, SelectRow<U, 0, 1, 1>,
      SelectRow<U, 1, 0, 0>, SelectRow<U, 1, 0, 1>, SelectRow<U, 1, 1, 0>, SelectRow<U, 1, 1, 1>};
  return kTable[sc * 4 + sa * 2 + sb];
}

class WhereKernel final : public FastKernel {
 public:
  using FastKernel::FastKernel;

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) {
      return Reference(ctx);
    }
    const Tensor& c = ctx.input(0);
    const Tensor& a = ctx.input(1);
    const Tensor& b = ctx.input(2);
    const int64_t elem = MovableSize(a);
    if (elem == 0 || c.dtype() != DataType::kBool || MovableSize(c) == 0 ||
        b.dtype() != a.dtype() || MovableSize(b) == 0) {
      return Reference(ctx);
    }
    const Tensor* ops[3] = {&c, &a, &b};
    const int rank = std::max({c.rank(), a.rank(), b.rank()});
    Layout<3> l;
    l.rank = rank;
    for (int k = 0; k < 3; ++k) {
      const Tensor& t = *ops[k];
      int64_t stride = 1;
      for (int i = 0; i < rank; ++i) {  // i counts from the back
        const int ti = t.rank() - 1 - i;
        const int64_t d = ti >= 0 ? t.dim(ti) : 1;
        const size_t o = static_cast<size_t>(rank - 1 - i);
        if (k == 0) {
          l.dims[o] = d;
        } else if (d != l.dims[o] && d != 1 && l.dims[o] != 1) {
          return Reference(ctx);  // does not broadcast
        } else if (l.dims[o] == 1) {
          l.dims[o] = d;
        }
        l.strides[static_cast<size_t>(k)][o] = d == 1 ? 0 : stride;
        stride *= d;
      }
    }
    Result<Shape> out =
        Shape::Create(std::span<const int64_t>(l.dims.data(), static_cast<size_t>(rank)));
    if (!out.ok()) return Reference(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, a.dtype(), *out));
    TookFastPath();
    if (out->NumElements() == 0) return Status::OK();
    l.Simplify();
    const size_t last = static_cast<size_t>(l.rank - 1);
    const uint8_t* pc = static_cast<const uint8_t*>(c.raw_data());
    WithWord(elem, [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U* pa = static_cast<const U*>(a.raw_data());
      const U* pb = static_cast<const U*>(b.raw_data());
      U* py = static_cast<U*>(y.raw_data());
      const SelectFn<U> select =
          PickSelect<U>(l.strides[0][last], l.strides[1][last], l.strides[2][last]);
      WalkAllRows(l, static_cast<int64_t>(sizeof(U)), kGrainBytes,
                  [&](int64_t o, const std::array<int64_t, 3>& in, int64_t n) {
                    select(pc + in[0], pa + in[1], pb + in[2], py + o, n);
                  });
    });
    return Status::OK();
  }
};

// ---- Concat, Split ---------------------------------------------------------------------------

// One contiguous copy.
struct Segment {
  const std::byte* src;
  std::byte* dst;
  int64_t bytes;
};

// Copies every segment; their total is cut into equal byte ranges over the team.
void CopySegments(std::span<const Segment> segs) {
  std::vector<int64_t> ends(segs.size());
  int64_t total = 0;
  for (size_t i = 0; i < segs.size(); ++i) ends[i] = total += segs[i].bytes;
  ParallelFor(total, kCopyGrainBytes, [&](int64_t begin, int64_t end) {
    size_t i =
        static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), begin) - ends.begin());
    for (int64_t pos = begin; pos < end; ++i) {
      const int64_t seg_begin = ends[i] - segs[i].bytes;
      const int64_t n = std::min(ends[i], end) - pos;
      const int64_t off = pos - seg_begin;
      std::memcpy(segs[i].dst + off, segs[i].src + off, static_cast<size_t>(n));
      pos += n;
    }
  });
}

// How slab copies of `outer` rows of `row_bytes` each are run.
enum class SlabPlan { kInline, kRows, kSegments };

SlabPlan PlanSlabs(int64_t outer, int64_t row_bytes) {
  if (outer * row_bytes <= kCopyGrainBytes) return SlabPlan::kInline;
  const int threads = ParallelThreads();
  if (threads <= 1) return SlabPlan::kInline;
  // Enough rows to balance the team: whole rows per chunk. Otherwise cut the slabs themselves.
  return outer >= 4 * threads ? SlabPlan::kRows : SlabPlan::kSegments;
}

class ConcatKernel final : public FastKernel {
 public:
  ConcatKernel(int64_t axis, bool allow_negative, std::unique_ptr<Kernel> reference)
      : FastKernel(std::move(reference)), axis_(axis), allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    const int n = ctx.num_inputs();
    if (n < 1 || !ctx.has_input(0)) return Reference(ctx);
    const Tensor& first = ctx.input(0);
    const int64_t elem = MovableSize(first);
    const int rank = first.rank();
    if (elem == 0 || rank < 1 || axis_ < -rank || axis_ >= rank ||
        (axis_ < 0 && !allow_negative_)) {
      return Reference(ctx);
    }
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    std::array<int64_t, Shape::kMaxRank> dims;
    for (int d = 0; d < rank; ++d) dims[static_cast<size_t>(d)] = first.dim(d);
    dims[static_cast<size_t>(axis)] = 0;
    for (int i = 0; i < n; ++i) {
      if (!ctx.has_input(i)) return Reference(ctx);
      const Tensor& t = ctx.input(i);
      if (t.dtype() != first.dtype() || t.rank() != rank || MovableSize(t) == 0) {
        return Reference(ctx);
      }
      for (int d = 0; d < rank; ++d) {
        if (d != axis && t.dim(d) != first.dim(d)) return Reference(ctx);
      }
      dims[static_cast<size_t>(axis)] += t.dim(axis);
    }
    Result<Shape> out =
        Shape::Create(std::span<const int64_t>(dims.data(), static_cast<size_t>(rank)));
    if (!out.ok()) return Reference(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, first.dtype(), *out));
    TookFastPath();
    int64_t outer = 1, inner = elem;
    for (int d = 0; d < axis; ++d) outer *= dims[static_cast<size_t>(d)];
    for (int d = axis + 1; d < rank; ++d) inner *= dims[static_cast<size_t>(d)];
    const int64_t row_bytes = dims[static_cast<size_t>(axis)] * inner;
    if (outer * row_bytes == 0) return Status::OK();
    std::byte* py = static_cast<std::byte*>(y.raw_data());
    // Output row o is input 0's slab o, input 1's slab o, ...
    auto copy_rows = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        std::byte* dst = py + o * row_bytes;
        for (int i = 0; i < n; ++i) {
          const Tensor& t = ctx.input(i);
          const int64_t slab = t.dim(axis) * inner;
          std::memcpy(dst, static_cast<const std::byte*>(t.raw_data()) + o * slab,
                      static_cast<size_t>(slab));
          dst += slab;
        }
      }
    };
    switch (PlanSlabs(outer, row_bytes)) {
      case SlabPlan::kInline:
        copy_rows(0, outer);
        break;
      case SlabPlan::kRows:
        ParallelFor(outer, std::max<int64_t>(1, kCopyGrainBytes / row_bytes), copy_rows);
        break;
      case SlabPlan::kSegments: {
        std::vector<Segment> segs;
        segs.reserve(static_cast<size_t>(outer * n));
        std::byte* dst = py;
        for (int64_t o = 0; o < outer; ++o) {
          for (int i = 0; i < n; ++i) {
            const Tensor& t = ctx.input(i);
            const int64_t slab = t.dim(axis) * inner;
            segs.push_back({static_cast<const std::byte*>(t.raw_data()) + o * slab, dst, slab});
            dst += slab;
          }
        }
        CopySegments(segs);
        break;
      }
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

class SplitKernel final : public FastKernel {
 public:
  // `attr_split` set: sizes from the attribute (empty: equal parts); unset: from input 1 when
  // present (opset 13+), else equal parts.
  SplitKernel(int64_t axis, std::optional<std::vector<int64_t>> attr_split,
              std::unique_ptr<Kernel> reference)
      : FastKernel(std::move(reference)), axis_(axis), attr_split_(std::move(attr_split)) {}

  Status Compute(KernelContext& ctx) const override {
    const int n = ctx.num_outputs();
    if (ctx.num_inputs() < 1 || !ctx.has_input(0) || n < 1) return Reference(ctx);
    const Tensor& x = ctx.input(0);
    const int64_t elem = MovableSize(x);
    const int rank = x.rank();
    if (elem == 0 || rank < 1 || axis_ < -rank || axis_ >= rank) return Reference(ctx);
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    const int64_t dim = x.dim(axis);
    // Sizes: the attribute, the input (INT32 or INT64, 1-D), or equal parts.
    const int64_t* sizes64 = nullptr;
    const int32_t* sizes32 = nullptr;
    int64_t count = 0;
    if (attr_split_.has_value()) {
      sizes64 = attr_split_->data();
      count = static_cast<int64_t>(attr_split_->size());
    } else if (ctx.num_inputs() > 1 && ctx.has_input(1)) {
      const Tensor& s = ctx.input(1);
      if (!s.device().is_cpu() || !s.is_contiguous() || s.rank() != 1) return Reference(ctx);
      count = s.dim(0);
      if (s.dtype() == DataType::kInt64) {
        sizes64 = s.data<const int64_t>();
      } else if (s.dtype() == DataType::kInt32) {
        sizes32 = s.data<const int32_t>();
      } else {
        return Reference(ctx);
      }
    }
    const bool equal = count == 0;
    if (equal && dim % n != 0) return Reference(ctx);
    if (!equal && count != n) return Reference(ctx);
    auto part = [&](int i) -> int64_t {
      if (equal) return dim / n;
      return sizes64 != nullptr ? sizes64[i] : sizes32[i];
    };
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      if (part(i) < 0 || __builtin_add_overflow(sum, part(i), &sum)) return Reference(ctx);
    }
    if (sum != dim) return Reference(ctx);

    std::array<std::byte*, kInlineOutputs> inline_ptrs;
    std::vector<std::byte*> heap_ptrs;
    std::byte** ptrs = inline_ptrs.data();
    if (n > kInlineOutputs) {
      heap_ptrs.resize(static_cast<size_t>(n));
      ptrs = heap_ptrs.data();
    }
    std::array<int64_t, Shape::kMaxRank> dims;
    for (int d = 0; d < rank; ++d) dims[static_cast<size_t>(d)] = x.dim(d);
    for (int i = 0; i < n; ++i) {
      dims[static_cast<size_t>(axis)] = part(i);
      const Shape shape(std::span<const int64_t>(dims.data(), static_cast<size_t>(rank)));
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(i, x.dtype(), shape));
      ptrs[i] = static_cast<std::byte*>(y.raw_data());
    }
    TookFastPath();
    int64_t outer = 1, inner = elem;
    for (int d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int d = axis + 1; d < rank; ++d) inner *= x.dim(d);
    const int64_t row_bytes = dim * inner;
    if (outer * row_bytes == 0) return Status::OK();
    const std::byte* px = static_cast<const std::byte*>(x.raw_data());
    // Input row o is output 0's slab o, output 1's slab o, ...
    auto copy_rows = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const std::byte* src = px + o * row_bytes;
        for (int i = 0; i < n; ++i) {
          const int64_t slab = part(i) * inner;
          std::memcpy(ptrs[i] + o * slab, src, static_cast<size_t>(slab));
          src += slab;
        }
      }
    };
    switch (PlanSlabs(outer, row_bytes)) {
      case SlabPlan::kInline:
        copy_rows(0, outer);
        break;
      case SlabPlan::kRows:
        ParallelFor(outer, std::max<int64_t>(1, kCopyGrainBytes / row_bytes), copy_rows);
        break;
      case SlabPlan::kSegments: {
        std::vector<Segment> segs;
        segs.reserve(static_cast<size_t>(outer * n));
        const std::byte* src = px;
        for (int64_t o = 0; o < outer; ++o) {
          for (int i = 0; i < n; ++i) {
            const int64_t slab = part(i) * inner;
            segs.push_back({src, ptrs[i] + o * slab, slab});
            src += slab;
          }
        }
        CopySegments(segs);
        break;
      }
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  std::optional<std::vector<int64_t>> attr_split_;
};

// ---- Pad -------------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge };

// The reference's coordinate map (ref/pad.cc MapPadCoord): input coordinate for output
// coordinate `i` shifted by the begin pad, or -1 for the constant fill.
int64_t MapPadCoord(PadMode mode, int64_t i, int64_t dim) {
  if (i >= 0 && i < dim) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : dim - 1;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < dim ? m : period - m;
    }
  }
  return -1;
}

// Pad with runs of unpadded dims merged: input dims, begin pads, output dims, input strides.
struct PadLayout {
  int rank = 0;
  std::array<int64_t, Shape::kMaxRank> in{}, begin{}, out{}, stride{};
};

template <typename T>
void PadRows(PadMode mode, const PadLayout& p, const T* x, T* y, T fill) {
  const int last = p.rank - 1;
  const size_t lu = static_cast<size_t>(last);
  const int64_t len = p.out[lu], dim = p.in[lu], b = p.begin[lu];
  // Output columns [lo, hi) copy input columns [lo - b, hi - b); the rest are border.
  const int64_t lo = std::clamp<int64_t>(b, 0, len);
  const int64_t hi = std::clamp<int64_t>(dim + b, lo, len);
  int64_t rows = 1;
  for (int d = 0; d < last; ++d) rows *= p.out[static_cast<size_t>(d)];
  auto border = [&](T* q, const T* src, int64_t c0, int64_t c1) {
    if (mode == PadMode::kConstant) {
      for (int64_t c = c0; c < c1; ++c) q[c] = fill;
    } else {
      for (int64_t c = c0; c < c1; ++c) q[c] = src[MapPadCoord(mode, c - b, dim)];
    }
  };
  auto run = [&](int64_t begin, int64_t end) {
    std::array<int64_t, Shape::kMaxRank> coord;
    int64_t r = begin;
    for (int d = last - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      coord[du] = r % p.out[du];
      r /= p.out[du];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* q = y + row * len;
      int64_t off = 0;
      bool filled = false;
      for (int d = 0; d < last; ++d) {
        const size_t du = static_cast<size_t>(d);
        const int64_t i = MapPadCoord(mode, coord[du] - p.begin[du], p.in[du]);
        if (i < 0) {
          filled = true;
          break;
        }
        off += i * p.stride[du];
      }
      if (filled) {
        for (int64_t c = 0; c < len; ++c) q[c] = fill;
      } else {
        const T* src = x + off;
        border(q, src, 0, lo);
        if (hi > lo) {
          std::memcpy(q + lo, src + (lo - b), static_cast<size_t>(hi - lo) * sizeof(T));
        }
        border(q, src, hi, len);
      }
      for (int d = last - 1; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        if (++coord[du] < p.out[du]) break;
        coord[du] = 0;
      }
    }
  };
  const int64_t row_bytes = len * static_cast<int64_t>(sizeof(T));
  const int64_t grain_bytes = row_bytes >= kLongRunBytes ? kCopyGrainBytes : kGrainBytes;
  const int64_t grain = std::max<int64_t>(1, grain_bytes / std::max<int64_t>(1, row_bytes));
  if (rows <= grain) {
    run(0, rows);
  } else {
    ParallelFor(rows, grain, run);
  }
}

class PadKernel final : public FastKernel {
 public:
  PadKernel(PadMode mode, std::unique_ptr<Kernel> reference)
      : FastKernel(std::move(reference)), mode_(mode) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 2 || !ctx.has_input(0) || !ctx.has_input(1)) return Reference(ctx);
    const Tensor& x = ctx.input(0);
    const int64_t elem = MovableSize(x);
    const int rank = x.rank();
    std::array<int64_t, 2 * Shape::kMaxRank> pads;
    if (elem == 0 || ReadSmallInts(ctx.input(1), 2 * Shape::kMaxRank, pads.data()) != 2 * rank) {
      return Reference(ctx);
    }
    uint64_t fill = 0;  // the fill value's bytes (zero by default)
    if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
      const Tensor& v = ctx.input(2);
      if (v.dtype() != x.dtype() || MovableSize(v) == 0 || v.num_elements() > 1) {
        return Reference(ctx);
      }
      if (v.num_elements() == 1) std::memcpy(&fill, v.raw_data(), static_cast<size_t>(elem));
    }
    std::array<int64_t, Shape::kMaxRank> dims;
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      int64_t sum = 0;
      if (__builtin_add_overflow(x.dim(d), pads[du], &sum) ||
          __builtin_add_overflow(sum, pads[du + static_cast<size_t>(rank)], &sum) || sum < 0 ||
          (mode_ != PadMode::kConstant && x.dim(d) == 0 && sum > 0)) {
        return Reference(ctx);
      }
      dims[du] = sum;
    }
    Result<Shape> out =
        Shape::Create(std::span<const int64_t>(dims.data(), static_cast<size_t>(rank)));
    if (!out.ok()) return Reference(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), *out));
    TookFastPath();
    if (out->NumElements() == 0) return Status::OK();
    if (rank == 0) {
      std::memcpy(y.raw_data(), x.raw_data(), static_cast<size_t>(elem));
      return Status::OK();
    }
    // Merge each unpadded dim into a preceding unpadded one.
    std::array<int64_t, Shape::kMaxRank> x_strides;
    RowStrides(x.shape(), x_strides.data());
    PadLayout p;
    bool prev_unpadded = false;
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      const bool unpadded = pads[du] == 0 && pads[du + static_cast<size_t>(rank)] == 0;
      if (unpadded && prev_unpadded) {
        const size_t q = static_cast<size_t>(p.rank - 1);
        p.in[q] *= x.dim(d);
        p.out[q] *= x.dim(d);
        p.stride[q] = x_strides[du];
        continue;
      }
      const size_t q = static_cast<size_t>(p.rank++);
      p.in[q] = x.dim(d);
      p.begin[q] = pads[du];
      p.out[q] = dims[du];
      p.stride[q] = x_strides[du];
      prev_unpadded = unpadded;
    }
    WithWord(elem, [&](auto tag) {
      using U = typename decltype(tag)::type;
      U fv;
      std::memcpy(&fv, &fill, sizeof(U));
      PadRows<U>(mode_, p, static_cast<const U*>(x.raw_data()), static_cast<U*>(y.raw_data()), fv);
    });
    return Status::OK();
  }

 private:
  PadMode mode_;
};

// ---- Cast ------------------------------------------------------------------------------------

// Elements per Cast chunk (2 MB of FLOAT; see kGrainBytes) and per conversion block.
constexpr int64_t kCastGrain = int64_t{1} << 19;
constexpr int64_t kCastBlock = 256;

// One element as the reference converts it (ref/cast.cc ConvertNumber).
template <typename From, typename To>
To CastOne(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return ref::ToMath(v) != ref::MathType<From>{0};
  } else if constexpr (std::is_same_v<From, bool>) {
    return CastOne<uint8_t, To>(v ? 1 : 0);
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));
  } else if constexpr (std::is_integral_v<From> && std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_integral_v<To>) {
    return ref::WrapToInt<To>(static_cast<double>(ref::ToMath(v)));
  } else {
    const double d = static_cast<double>(ref::ToMath(v));
    if constexpr (std::is_same_v<To, Float16>) {
      return ref::DoubleToFloat16(d);
    } else if constexpr (std::is_same_v<To, BFloat16>) {
      return ref::DoubleToBFloat16(d);
    } else {
      return static_cast<To>(d);
    }
  }
}

// FLOAT/DOUBLE -> integer: whole blocks inside the range of Wide (int32 for targets of up to 32
// bits, int64 for INT64) take one truncating conversion (then modulo 2^n, as the reference's
// WrapToInt); a block with NaN or an out-of-range value runs the reference's rule.
template <typename From, typename To>
void FloatToInt(const From* x, To* y, int64_t n) {
  using Wide = std::conditional_t<(sizeof(To) < 8), int32_t, int64_t>;
  constexpr From kLo = -static_cast<From>(uint64_t{1} << (8 * sizeof(Wide) - 1));
  constexpr From kHi = static_cast<From>(uint64_t{1} << (8 * sizeof(Wide) - 1));
  for (int64_t i = 0; i < n; i += kCastBlock) {
    const int64_t m = std::min(kCastBlock, n - i);
    const From* p = x + i;
    To* q = y + i;
    int in_range = 1;
#pragma omp simd reduction(& : in_range)
    for (int64_t j = 0; j < m; ++j) in_range &= static_cast<int>((p[j] >= kLo) & (p[j] < kHi));
    if (in_range != 0) {
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) q[j] = static_cast<To>(static_cast<Wide>(p[j]));
    } else {
      for (int64_t j = 0; j < m; ++j) q[j] = ref::WrapToInt<To>(static_cast<double>(p[j]));
    }
  }
}

// FLOAT -> FLOAT16 with F16C, round to nearest even; NaNs become FloatToFloat16's sign | 0x7e00
// (the instruction would keep their payload). Compiled for AVX2+F16C; called only when
// ActiveIsa() >= kAvx2 and CpuHasF16C().
__attribute__((target("avx2,f16c"))) void FloatToFp16F16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) y[j] = FloatToFloat16(x[j]).bits;
    }
  }
  for (; i < n; ++i) y[i] = FloatToFloat16(x[i]).bits;
}

void FloatToFp16(const float* x, Float16* y, int64_t n) {
  uint16_t* out = reinterpret_cast<uint16_t*>(y);
  if (ActiveIsa() >= Isa::kAvx2 && CpuHasF16C()) {
    FloatToFp16F16c(x, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToFloat16(x[i]).bits;
}

// FLOAT16 / BFLOAT16 -> FLOAT for up to kCastBlock elements, bit-identical with the reference:
// the vector widening (half_kernels.h) may quiet a signalling NaN, so NaN lanes are redone the
// reference's way.
template <typename H>
void HalfToFloatBlock(const H* x, float* y, int64_t n) {
  constexpr DataType kType = std::is_same_v<H, Float16> ? DataType::kFloat16 : DataType::kBFloat16;
  constexpr uint16_t kInf = std::is_same_v<H, Float16> ? 0x7c00 : 0x7f80;
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(x);
  HalfToFloat(kType, bits, y, n);
  int nan = 0;
#pragma omp simd reduction(| : nan)
  for (int64_t j = 0; j < n; ++j) nan |= static_cast<int>((bits[j] & 0x7fff) > kInf);
  if (nan == 0) return;
  for (int64_t j = 0; j < n; ++j) {
    if ((bits[j] & 0x7fff) > kInf) y[j] = CastOne<H, float>(x[j]);
  }
}

// y[i] = CastOne<From, To>(x[i]) for n elements, with the fast forms of the hot pairs.
template <typename From, typename To>
void CastRange(const From* x, To* y, int64_t n) {
  if constexpr (std::is_same_v<From, To>) {
    std::memcpy(y, x, static_cast<size_t>(n) * sizeof(From));
  } else if constexpr (ref::kIsHalf<From>) {
    // Widen to FLOAT (exact), then FLOAT -> To: every rule of the reference's factors so
    // (its value goes through double, which FLOAT converts to exactly).
    float buf[kCastBlock];
    for (int64_t i = 0; i < n; i += kCastBlock) {
      const int64_t m = std::min(kCastBlock, n - i);
      if constexpr (std::is_same_v<To, float>) {
        HalfToFloatBlock(x + i, y + i, m);
      } else {
        HalfToFloatBlock(x + i, buf, m);
        CastRange<float, To>(buf, y + i, m);
      }
    }
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> &&
                       !std::is_same_v<To, bool>) {
    FloatToInt(x, y, n);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, Float16>) {
    FloatToFp16(x, y, n);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, BFloat16>) {
    // FloatToBFloat16 inline (the reference rounds straight from the exact double).
    const uint32_t* in = reinterpret_cast<const uint32_t*>(x);
    uint16_t* out = reinterpret_cast<uint16_t*>(y);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = in[i];
      const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
      out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
    }
  } else if constexpr (ref::kIsHalf<To>) {
    for (int64_t i = 0; i < n; ++i) y[i] = CastOne<From, To>(x[i]);
  } else if constexpr (std::is_same_v<From, bool>) {
    // BOOL as bytes: the vectorizer has no vector type for bool.
    const uint8_t* in = reinterpret_cast<const uint8_t*>(x);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = CastOne<uint8_t, To>(in[i] != 0 ? 1 : 0);
  } else if constexpr (std::is_same_v<To, bool>) {
    uint8_t* out = reinterpret_cast<uint8_t*>(y);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = CastOne<From, bool>(x[i]) ? 1 : 0;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = CastOne<From, To>(x[i]);
  }
}

// Calls f(ref::TypeTag<T>) for the C++ type of a dtype the fast Cast takes; false for others.
template <typename F>
bool VisitCastType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32:
      f(ref::TypeTag<float>{});
      return true;
    case DataType::kFloat64:
      f(ref::TypeTag<double>{});
      return true;
    case DataType::kFloat16:
      f(ref::TypeTag<Float16>{});
      return true;
    case DataType::kBFloat16:
      f(ref::TypeTag<BFloat16>{});
      return true;
    case DataType::kInt8:
      f(ref::TypeTag<int8_t>{});
      return true;
    case DataType::kUint8:
      f(ref::TypeTag<uint8_t>{});
      return true;
    case DataType::kInt32:
      f(ref::TypeTag<int32_t>{});
      return true;
    case DataType::kInt64:
      f(ref::TypeTag<int64_t>{});
      return true;
    case DataType::kBool:
      f(ref::TypeTag<bool>{});
      return true;
    default:
      return false;
  }
}

bool IsCastType(DataType dtype) {
  return VisitCastType(dtype, [](auto) {});
}

class CastKernel final : public FastKernel {
 public:
  CastKernel(DataType to, std::unique_ptr<Kernel> reference)
      : FastKernel(std::move(reference)), to_(to) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !ctx.has_input(0)) return Reference(ctx);
    const Tensor& x = ctx.input(0);
    if (!x.device().is_cpu() || !x.is_contiguous() || !IsCastType(x.dtype()) || !IsCastType(to_)) {
      return Reference(ctx);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, to_, x.shape()));
    TookFastPath();
    const int64_t n = x.num_elements();
    if (n == 0) return Status::OK();
    VisitCastType(x.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      VisitCastType(to_, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        const From* px = static_cast<const From*>(x.raw_data());
        To* py = static_cast<To*>(y.raw_data());
        if (n <= kCastGrain) {
          CastRange(px, py, n);
          return;
        }
        ParallelFor(n, kCastGrain, [&](int64_t begin, int64_t end) {
          CastRange(px + begin, py + begin, end - begin);
        });
      });
    });
    return Status::OK();
  }

 private:
  DataType to_;
};

}  // namespace

// ---- Factories -------------------------------------------------------------------------------
// Each builds the reference kernel first: it validates the node's attributes at load, and runs
// every call the fast path declines.

Result<std::unique_ptr<Kernel>> CreateSlice(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateSlice(info));
  if (info.opset() < 10) return reference;  // attribute form: the row starts at 10
  return std::make_unique<SliceKernel>(std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateExpand(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateExpand(info));
  return std::make_unique<ExpandKernel>(std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateTile(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateTile(info));
  return std::make_unique<TileKernel>(std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateWhere(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateWhere(info));
  return std::make_unique<WhereKernel>(std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateConcat(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateConcat(info));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ref::AttrReader(info).Int("axis", 1));
  return std::make_unique<ConcatKernel>(axis, info.opset() >= 11, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateSplit(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateSplit(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
  std::optional<std::vector<int64_t>> attr_split;
  if (attrs.Has("split")) {
    KILN_ASSIGN_OR_RETURN(attr_split, attrs.Ints("split"));
  }
  return std::make_unique<SplitKernel>(axis, std::move(attr_split), std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreatePad(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreatePad(info));
  if (info.opset() < 11) return reference;  // attribute form: the row starts at 11
  KILN_ASSIGN_OR_RETURN(std::string mode, ref::AttrReader(info).String("mode", "constant"));
  // The reference factory accepted the mode: one of these three.
  const PadMode m = mode == "reflect" ? PadMode::kReflect
                    : mode == "edge"  ? PadMode::kEdge
                                      : PadMode::kConstant;
  return std::make_unique<PadKernel>(m, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateCast(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateCast(info));
  // The reference factory checked that `to` is an INT naming a kiln dtype.
  const std::optional<DataType> to =
      ref::DataTypeFromOnnxNumber(info.node().FindAttribute("to")->i);
  return std::make_unique<CastKernel>(*to, std::move(reference));
}

}  // namespace kiln::cpu
