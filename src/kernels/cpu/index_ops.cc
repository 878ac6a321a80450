// SPDX-License-Identifier: Apache-2.0
// Index ops on the CPU, parallel, for every fixed-width dtype (the bytes are only moved, except by
// the scatter reductions): Gather (any axis), GatherND (batch_dims), ScatterElements and
// ScatterND (reduction none / add / mul), TopK (FLOAT and INT64 values) and NonZero.
//
// NOTE on the approach. Every kernel holds the reference kernel built from the same node and
// hands it the call whenever the inputs are outside the fast path: BYTES data (a declared type
// can be unknown at load), a non-contiguous or non-host tensor, indices that are not INT32 /
// INT64, any shape the reference would reject, and every out-of-range index (the reference
// reports them, so errors read exactly as its). The checks and the index arithmetic are the
// reference's (ref/gather_scatter.cc, ref/sort_ops.cc), done up front, before the output is
// written.
//  - Gather: output[o, j, :] = data[o, idx[j], :] for outer x index x inner slabs; one memcpy per
//    slab, or an element loop by size when inner == 1 (gathers along the last axis).
//  - GatherND: one slab copy per index tuple, the tuples' offsets computed in parallel.
//  - ScatterElements: output = data, then the updates in the reference's order, which only
//    matters among updates that hit the same output element (duplicates: the last one wins, or
//    the reductions apply in order). Updates that differ in a coordinate other than `axis` never
//    collide, so the work is split over (outer, block of inner) positions of the indices tensor,
//    each walking its `axis` in order.
//  - ScatterND: a tuple addresses a whole slab (offsets are multiples of the slab size), so two
//    updates collide only when they are the same element of two tuples with the same offset.
//    Large slabs are split into element ranges (each range visits every tuple in order); small
//    slabs are split by output position (each part applies, in order, the tuples that land in
//    it, after a scan of all offsets).
//  - Reductions add / mul run in the element type as the reference does them (integers wrap
//    modulo 2^n through the unsigned type); FLOAT16, BFLOAT16 and BOOL reductions go to the
//    reference.
//  - TopK: per row, the reference orders elements by (value, index), descending or ascending in
//    value with a NaN above every number, and ties to the lower index. That order is total over
//    (value, index) pairs, so a selection (std::nth_element over the row, then std::sort of the
//    first k) gives exactly the reference's first k. FLOAT values become a 32-bit key that sorts
//    as the floats do (-0 and +0 equal, every NaN one largest key) packed with the index into one
//    64-bit integer; INT64 values compare as (value, index) pairs. Rows run in parallel; `sorted
//    = 0` is answered sorted, as the reference does.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cpu {
namespace {

// On the host and densely laid out.
bool IsDense(const Tensor& t) { return t.valid() && t.device().is_cpu() && t.is_contiguous(); }

// Element size of a dtype whose elements are plain bytes (every dtype but BYTES), else 0.
int64_t FixedWidthSize(DataType dt) {
  if (dt == DataType::kBytes || dt == DataType::kInvalid) return 0;
  const size_t s = DataTypeSize(dt);
  return (s == 1 || s == 2 || s == 4 || s == 8) ? static_cast<int64_t>(s) : 0;
}

bool IsIndexTensor(const Tensor& t) {
  return IsDense(t) && (t.dtype() == DataType::kInt64 || t.dtype() == DataType::kInt32);
}

// Element i of an INT32 or INT64 tensor.
int64_t IndexAt(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kInt64 ? t.data<const int64_t>()[i]
                                       : static_cast<int64_t>(t.data<const int32_t>()[i]);
}

// Whether every element of an INT32 / INT64 tensor is in [-dim, dim), checked in parallel.
bool IndicesInRange(const Tensor& t, int64_t dim) {
  std::atomic<bool> ok{true};
  auto check = [&](const auto* p) {
    ParallelFor(t.num_elements(), 1 << 16, [&](int64_t begin, int64_t end) {
      bool good = true;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t v = p[i];
        good = good && v >= -dim && v < dim;
      }
      if (!good) ok.store(false, std::memory_order_relaxed);
    });
  };
  if (t.dtype() == DataType::kInt64) {
    check(t.data<const int64_t>());
  } else {
    check(t.data<const int32_t>());
  }
  return ok.load();
}

// The unsigned integer type of N bytes (elements are moved as these).
template <int64_t N>
using Word = std::conditional_t<
    N == 1, uint8_t,
    std::conditional_t<N == 2, uint16_t, std::conditional_t<N == 4, uint32_t, uint64_t>>>;

// Calls f(std::integral_constant<int64_t, N>) for the element size N in {1, 2, 4, 8}.
template <typename F>
void WithElementSize(int64_t size, F&& f) {
  switch (size) {
    case 1:
      f(std::integral_constant<int64_t, 1>{});
      return;
    case 2:
      f(std::integral_constant<int64_t, 2>{});
      return;
    case 4:
      f(std::integral_constant<int64_t, 4>{});
      return;
    default:
      f(std::integral_constant<int64_t, 8>{});
      return;
  }
}

// Row-major element strides of `dims`.
std::vector<int64_t> RowStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

int64_t Product(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// Copies all of x into y (same size) in parallel chunks.
void ParallelCopy(const Tensor& x, const Tensor& y) {
  const int64_t bytes = static_cast<int64_t>(x.size_bytes());
  const auto* src = static_cast<const std::byte*>(x.raw_data());
  auto* dst = static_cast<std::byte*>(y.raw_data());
  constexpr int64_t kBlock = 1 << 16;
  ParallelFor((bytes + kBlock - 1) / kBlock, 8, [&](int64_t begin, int64_t end) {
    const int64_t b = begin * kBlock, e = std::min(bytes, end * kBlock);
    std::memcpy(dst + b, src + b, static_cast<size_t>(e - b));
  });
}

// --- Gather ------------------------------------------------------------------------------------

class GatherKernel final : public Kernel {
 public:
  GatherKernel(int64_t axis, std::unique_ptr<Kernel> reference)
      : axis_(axis), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 2 || ctx.num_outputs() < 1 || !IsDense(ctx.input(0)) ||
        !IsIndexTensor(ctx.input(1))) {
      return reference_->Compute(ctx);
    }
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const int64_t esize = FixedWidthSize(data.dtype());
    const int rank = data.rank();
    if (esize == 0 || rank < 1 || axis_ < -rank || axis_ >= rank) return reference_->Compute(ctx);
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const std::span<const int64_t> dd = data.shape().dims();
    const int64_t dim = dd[axis];
    const int64_t n = indices.num_elements();
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = IndexAt(indices, i);
      if (v < -dim || v >= dim) return reference_->Compute(ctx);  // it reports the index
      idx[static_cast<size_t>(i)] = v < 0 ? v + dim : v;
    }
    std::vector<int64_t> out_dims(dd.begin(), dd.begin() + static_cast<std::ptrdiff_t>(axis));
    out_dims.insert(out_dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
    out_dims.insert(out_dims.end(), dd.begin() + static_cast<std::ptrdiff_t>(axis) + 1, dd.end());
    if (out_dims.size() > static_cast<size_t>(Shape::kMaxRank)) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, data.dtype(), out));
    const int64_t outer = Product(dd, 0, axis);
    const int64_t inner = Product(dd, axis + 1, dd.size());
    if (out.NumElements() == 0) return Status::OK();
    const auto* src = static_cast<const std::byte*>(data.raw_data());
    auto* dst = static_cast<std::byte*>(y.raw_data());
    const int64_t* pidx = idx.data();
    if (inner == 1) {
      // One element per index: a typed gather, flat over (outer, index).
      WithElementSize(esize, [&](auto size) {
        using W = Word<decltype(size)::value>;
        const W* s = reinterpret_cast<const W*>(src);
        W* d = reinterpret_cast<W*>(dst);
        ParallelFor(outer * n, 16384, [&](int64_t begin, int64_t end) {
          int64_t o = begin / n, j = begin % n;
          for (int64_t q = begin; q < end; ++q) {
            d[q] = s[o * dim + pidx[j]];
            if (++j == n) {
              j = 0;
              ++o;
            }
          }
        });
      });
      return Status::OK();
    }
    const int64_t slab = inner * esize;
    ParallelFor(outer * n, std::max<int64_t>(1, 65536 / slab), [&](int64_t begin, int64_t end) {
      for (int64_t q = begin; q < end; ++q) {
        const int64_t o = q / n, j = q % n;
        std::memcpy(dst + q * slab, src + (o * dim + pidx[j]) * slab, static_cast<size_t>(slab));
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
  std::unique_ptr<Kernel> reference_;
};

// --- GatherND ----------------------------------------------------------------------------------

// The slab offsets (in elements) of the index tuples of a GatherND / ScatterND, as the
// reference's PlanNd computes them; nullopt where the reference would fail (it reports that).
struct NdPlan {
  std::vector<int64_t> offsets;
  int64_t slab = 1;
  std::vector<int64_t> out_dims;  // indices.shape[:-1] + data.shape[batch_dims + k:]
};

std::optional<NdPlan> PlanNd(const Tensor& data, const Tensor& indices, int64_t batch_dims) {
  const int r = data.rank(), q = indices.rank();
  if (r < 1 || q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) return std::nullopt;
  const size_t b = static_cast<size_t>(batch_dims);
  const std::span<const int64_t> dd = data.shape().dims();
  for (size_t d = 0; d < b; ++d) {
    if (dd[d] != indices.dim(static_cast<int>(d))) return std::nullopt;
  }
  const int64_t k = indices.dim(q - 1);
  if (k < 1 || k > r - static_cast<int64_t>(b)) return std::nullopt;
  NdPlan plan;
  const std::vector<int64_t> strides = RowStrides(dd);
  const size_t tail = b + static_cast<size_t>(k);
  plan.slab = Product(dd, tail, dd.size());
  const int64_t batch = Product(dd, 0, b);
  const int64_t batch_stride = b > 0 ? strides[b - 1] : 0;
  const int64_t tuples = indices.num_elements() / k;
  const int64_t per_batch = batch > 0 ? tuples / batch : 0;
  plan.offsets.resize(static_cast<size_t>(tuples));
  std::atomic<bool> bad{false};
  ParallelFor(tuples, std::max<int64_t>(1, 32768 / k), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
      for (int64_t j = 0; j < k; ++j) {
        const size_t d = b + static_cast<size_t>(j);
        const int64_t v = IndexAt(indices, t * k + j);
        if (v < -dd[d] || v >= dd[d]) {
          bad.store(true, std::memory_order_relaxed);
          return;
        }
        off += (v < 0 ? v + dd[d] : v) * strides[d];
      }
      plan.offsets[static_cast<size_t>(t)] = off;
    }
  });
  if (bad.load()) return std::nullopt;
  plan.out_dims.assign(indices.shape().dims().begin(), indices.shape().dims().end() - 1);
  plan.out_dims.insert(plan.out_dims.end(), dd.begin() + static_cast<std::ptrdiff_t>(tail),
                       dd.end());
  if (plan.out_dims.size() > static_cast<size_t>(Shape::kMaxRank)) return std::nullopt;
  return plan;
}

class GatherNDKernel final : public Kernel {
 public:
  GatherNDKernel(int64_t batch_dims, std::unique_ptr<Kernel> reference)
      : batch_dims_(batch_dims), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 2 || ctx.num_outputs() < 1 || !IsDense(ctx.input(0)) ||
        !IsIndexTensor(ctx.input(1))) {
      return reference_->Compute(ctx);
    }
    const Tensor& data = ctx.input(0);
    const int64_t esize = FixedWidthSize(data.dtype());
    if (esize == 0) return reference_->Compute(ctx);
    std::optional<NdPlan> plan = PlanNd(data, ctx.input(1), batch_dims_);
    if (!plan.has_value()) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(plan->out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, data.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    const auto* src = static_cast<const std::byte*>(data.raw_data());
    auto* dst = static_cast<std::byte*>(y.raw_data());
    const int64_t slab = plan->slab * esize;
    const int64_t* off = plan->offsets.data();
    ParallelFor(static_cast<int64_t>(plan->offsets.size()), std::max<int64_t>(1, 65536 / slab),
                [&](int64_t begin, int64_t end) {
                  for (int64_t t = begin; t < end; ++t) {
                    std::memcpy(dst + t * slab, src + off[t] * esize, static_cast<size_t>(slab));
                  }
                });
    return Status::OK();
  }

 private:
  int64_t batch_dims_;
  std::unique_ptr<Kernel> reference_;
};

// --- ScatterElements / ScatterND ---------------------------------------------------------------

enum class Reduction { kNone, kAdd, kMul };

Result<Reduction> ReadReduction(const KernelInfo& info) {
  if (info.opset() < 16) return Reduction::kNone;
  KILN_ASSIGN_OR_RETURN(std::string r, ref::AttrReader(info).String("reduction", "none"));
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  return Reduction::kNone;  // "none" (anything else failed in the reference's factory)
}

// dst = dst (op) src as the reference computes it: in the element type, integers modulo 2^n.
template <typename T>
inline void ReduceInto(Reduction r, T& dst, T src) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U a = static_cast<U>(dst), b = static_cast<U>(src);
    dst = static_cast<T>(r == Reduction::kAdd ? static_cast<U>(a + b) : static_cast<U>(a * b));
  } else {
    dst = r == Reduction::kAdd ? dst + src : dst * src;
  }
}

// Calls f(TypeTag-like T{}) for the element types whose reductions run here; false when the
// dtype is not one of them (FLOAT16, BFLOAT16, BOOL: the reference runs those).
template <typename F>
bool WithReduceType(DataType dt, F&& f) {
  switch (dt) {
    case DataType::kFloat32:
      f(float{});
      return true;
    case DataType::kFloat64:
      f(double{});
      return true;
    case DataType::kInt8:
      f(int8_t{});
      return true;
    case DataType::kInt16:
      f(int16_t{});
      return true;
    case DataType::kInt32:
      f(int32_t{});
      return true;
    case DataType::kInt64:
      f(int64_t{});
      return true;
    case DataType::kUint8:
      f(uint8_t{});
      return true;
    case DataType::kUint16:
      f(uint16_t{});
      return true;
    case DataType::kUint32:
      f(uint32_t{});
      return true;
    case DataType::kUint64:
      f(uint64_t{});
      return true;
    default:
      return false;
  }
}

bool ReductionRunsHere(Reduction r, DataType dt) {
  return r == Reduction::kNone || WithReduceType(dt, [](auto) {});
}

// Calls apply(element_op) where element_op(dst, dst_index, src, src_index) writes one update:
// a move of the element's bytes without reduction, else the reduction in the element type.
// REQUIRES: ReductionRunsHere(r, dt).
template <typename F>
void WithUpdateOp(Reduction r, DataType dt, F&& apply) {
  if (r == Reduction::kNone) {
    WithElementSize(FixedWidthSize(dt), [&](auto size) {
      using W = Word<decltype(size)::value>;
      apply([](void* dst, int64_t to, const void* src, int64_t from) {
        static_cast<W*>(dst)[to] = static_cast<const W*>(src)[from];
      });
    });
    return;
  }
  WithReduceType(dt, [&](auto tag) {
    using T = decltype(tag);
    apply([r](void* dst, int64_t to, const void* src, int64_t from) {
      ReduceInto(r, static_cast<T*>(dst)[to], static_cast<const T*>(src)[from]);
    });
  });
}

class ScatterElementsKernel final : public Kernel {
 public:
  ScatterElementsKernel(int64_t axis, Reduction reduction, std::unique_ptr<Kernel> reference)
      : axis_(axis), reduction_(reduction), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 3 || ctx.num_outputs() < 1 || !IsDense(ctx.input(0)) ||
        !IsIndexTensor(ctx.input(1)) || !IsDense(ctx.input(2))) {
      return reference_->Compute(ctx);
    }
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    const int rank = data.rank();
    if (FixedWidthSize(data.dtype()) == 0 || !ReductionRunsHere(reduction_, data.dtype()) ||
        rank < 1 || updates.dtype() != data.dtype() || !(updates.shape() == indices.shape()) ||
        indices.rank() != rank || axis_ < -rank || axis_ >= rank) {
      return reference_->Compute(ctx);
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const std::span<const int64_t> dd = data.shape().dims();
    const std::span<const int64_t> id = indices.shape().dims();
    for (size_t d = 0; d < dd.size(); ++d) {
      if (d != axis && id[d] > dd[d]) return reference_->Compute(ctx);
    }
    const int64_t dim = dd[axis];
    const int64_t count = indices.num_elements();
    if (!IndicesInRange(indices, dim)) return reference_->Compute(ctx);  // it reports the index
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, data.dtype(), data.shape()));
    ParallelCopy(data, y);
    if (count == 0) return Status::OK();
    // Update (o, k, i) of the indices viewed as [outer, n, inner] goes to data offset
    // base[o] + index * stride[axis] + inner_off[i].
    const std::vector<int64_t> strides = RowStrides(dd);
    const int64_t outer = Product(id, 0, axis), n = id[axis],
                  inner = Product(id, axis + 1, id.size());
    std::vector<int64_t> base(static_cast<size_t>(outer)), inner_off(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
      int64_t rem = o, off = 0;
      for (size_t d = axis; d-- > 0;) {
        off += (rem % id[d]) * strides[d];
        rem /= id[d];
      }
      base[static_cast<size_t>(o)] = off;
    }
    for (int64_t i = 0; i < inner; ++i) {
      int64_t rem = i, off = 0;
      for (size_t d = id.size(); d-- > axis + 1;) {
        off += (rem % id[d]) * strides[d];
        rem /= id[d];
      }
      inner_off[static_cast<size_t>(i)] = off;
    }
    const int64_t axis_stride = strides[axis];
    // Jobs: (o, block of inner). Blocks are only cut when outer is too small to share out.
    const int64_t block = outer >= 8 ? inner : std::max<int64_t>(64, (inner + 7) / 8);
    const int64_t blocks = (inner + block - 1) / block;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * block));
    WithUpdateOp(reduction_, data.dtype(), [&](auto op) {
      void* py = y.raw_data();
      const void* pu = updates.raw_data();
      auto run = [&](const auto* idx) {
        ParallelFor(outer * blocks, grain, [&](int64_t begin, int64_t end) {
          for (int64_t job = begin; job < end; ++job) {
            const int64_t o = job / blocks;
            const int64_t i0 = (job % blocks) * block;
            const int64_t i1 = std::min(inner, i0 + block);
            const int64_t b = base[static_cast<size_t>(o)];
            for (int64_t k = 0; k < n; ++k) {
              const int64_t row = (o * n + k) * inner;
              for (int64_t i = i0; i < i1; ++i) {
                int64_t v = idx[row + i];
                if (v < 0) v += dim;
                op(py, b + v * axis_stride + inner_off[static_cast<size_t>(i)], pu, row + i);
              }
            }
          }
        });
      };
      if (indices.dtype() == DataType::kInt64) {
        run(indices.data<const int64_t>());
      } else {
        run(indices.data<const int32_t>());
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
  Reduction reduction_;
  std::unique_ptr<Kernel> reference_;
};

class ScatterNDKernel final : public Kernel {
 public:
  ScatterNDKernel(Reduction reduction, std::unique_ptr<Kernel> reference)
      : reduction_(reduction), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 3 || ctx.num_outputs() < 1 || !IsDense(ctx.input(0)) ||
        !IsIndexTensor(ctx.input(1)) || !IsDense(ctx.input(2))) {
      return reference_->Compute(ctx);
    }
    const Tensor& data = ctx.input(0);
    const Tensor& updates = ctx.input(2);
    if (FixedWidthSize(data.dtype()) == 0 || !ReductionRunsHere(reduction_, data.dtype()) ||
        updates.dtype() != data.dtype()) {
      return reference_->Compute(ctx);
    }
    std::optional<NdPlan> plan = PlanNd(data, ctx.input(1), 0);
    if (!plan.has_value() || !(Shape(plan->out_dims) == updates.shape())) {
      return reference_->Compute(ctx);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, data.dtype(), data.shape()));
    ParallelCopy(data, y);
    const int64_t slab = plan->slab;
    const int64_t tuples = static_cast<int64_t>(plan->offsets.size());
    if (slab == 0 || tuples == 0) return Status::OK();
    const int64_t* off = plan->offsets.data();
    WithUpdateOp(reduction_, data.dtype(), [&](auto op) {
      void* py = y.raw_data();
      const void* pu = updates.raw_data();
      if (slab >= 1024) {
        // Element ranges of the slab; every range visits the tuples in order.
        ParallelFor(slab, std::max<int64_t>(256, 16384 / tuples), [&](int64_t e0, int64_t e1) {
          for (int64_t t = 0; t < tuples; ++t) {
            for (int64_t e = e0; e < e1; ++e) op(py, off[t] + e, pu, t * slab + e);
          }
        });
        return;
      }
      // Ranges of output slabs; each applies, in order, the tuples whose slab it holds.
      const int64_t out_slabs = data.num_elements() / slab;
      auto apply = [&](int64_t s0, int64_t s1) {
        const int64_t lo = s0 * slab, hi = s1 * slab;
        for (int64_t t = 0; t < tuples; ++t) {
          if (off[t] < lo || off[t] >= hi) continue;
          for (int64_t e = 0; e < slab; ++e) op(py, off[t] + e, pu, t * slab + e);
        }
      };
      if (tuples * slab < 32768) {
        apply(0, out_slabs);
      } else {
        ParallelFor(out_slabs, 1, apply);
      }
    });
    return Status::OK();
  }

 private:
  Reduction reduction_;
  std::unique_ptr<Kernel> reference_;
};

// --- TopK --------------------------------------------------------------------------------------

// A key that orders floats as the reference's Compare does (ascending): -0 == +0, every NaN
// equal and above +inf.
inline uint32_t FloatKey(float v) {
  if (v != v) return 0xFFFFFFFFu;
  if (v == 0) v = 0;  // -0 -> +0
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

class TopKKernel final : public Kernel {
 public:
  TopKKernel(std::optional<int64_t> attr_k, int64_t axis, bool largest,
             std::unique_ptr<Kernel> reference)
      : attr_k_(attr_k), axis_(axis), largest_(largest), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    const int needed = attr_k_.has_value() ? 1 : 2;
    if (ctx.num_inputs() < needed || ctx.num_outputs() < 1 || !IsDense(ctx.input(0))) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    if ((x.dtype() != DataType::kFloat32 && x.dtype() != DataType::kInt64) || rank < 1 ||
        axis_ < -rank || axis_ >= rank) {
      return reference_->Compute(ctx);
    }
    int64_t k = 0;
    if (attr_k_.has_value()) {
      k = *attr_k_;
    } else {
      const Tensor& kt = ctx.input(1);
      if (!IsIndexTensor(kt) || kt.num_elements() != 1) return reference_->Compute(ctx);
      k = IndexAt(kt, 0);
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    const std::span<const int64_t> d = x.shape().dims();
    const int64_t dim = d[axis];
    // k out of range (reported by the reference), nothing to do, or indices that do not fit the
    // packed 32-bit index: the reference.
    if (k < 1 || k > dim || x.num_elements() == 0 || dim > int64_t{0xFFFFFFFF}) {
      return reference_->Compute(ctx);
    }
    std::vector<int64_t> dims(d.begin(), d.end());
    dims[axis] = k;
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(dims));
    KILN_ASSIGN_OR_RETURN(Tensor values, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    Tensor indices;
    if (ctx.num_outputs() > 1) {
      KILN_ASSIGN_OR_RETURN(indices, ctx.AllocateOutputForOverwrite(1, DataType::kInt64, out));
    }
    const int64_t outer = Product(d, 0, axis), inner = Product(d, axis + 1, d.size());
    int64_t* ix = indices.valid() ? indices.data<int64_t>() : nullptr;
    if (x.dtype() == DataType::kFloat32) {
      Rows<float>(x.data<const float>(), values.data<float>(), ix, outer, dim, inner, k);
    } else {
      Rows<int64_t>(x.data<const int64_t>(), values.data<int64_t>(), ix, outer, dim, inner, k);
    }
    return Status::OK();
  }

 private:
  // Selects the first k of each row (outer, inner) of length dim, in parallel over rows.
  template <typename T>
  void Rows(const T* px, T* pv, int64_t* pi, int64_t outer, int64_t dim, int64_t inner,
            int64_t k) const {
    const int64_t rows = outer * inner;
    ParallelFor(rows, std::max<int64_t>(1, 16384 / dim), [&](int64_t begin, int64_t end) {
      std::vector<uint64_t> packed;                 // FLOAT: key << 32 | index
      std::vector<std::pair<int64_t, int64_t>> kv;  // INT64: (value, index)
      for (int64_t row = begin; row < end; ++row) {
        const int64_t o = row / inner, i = row % inner;
        const T* src = px + o * dim * inner + i;
        T* vdst = pv + o * k * inner + i;
        int64_t* idst = pi == nullptr ? nullptr : pi + o * k * inner + i;
        auto emit = [&](int64_t j, int64_t index) {
          vdst[j * inner] = src[index * inner];
          if (idst != nullptr) idst[j * inner] = index;
        };
        if constexpr (std::is_same_v<T, float>) {
          // Largest: the k largest keys first, and among equal keys the lower index, so the
          // index is stored complemented; smallest: the k smallest (key, index).
          packed.resize(static_cast<size_t>(dim));
          for (int64_t j = 0; j < dim; ++j) {
            const uint64_t key = FloatKey(src[j * inner]);
            const uint64_t low =
                largest_ ? 0xFFFFFFFFu - static_cast<uint64_t>(j) : static_cast<uint64_t>(j);
            packed[static_cast<size_t>(j)] = key << 32 | low;
          }
          if (largest_) {
            SelectFirst(packed, k, std::greater<uint64_t>());
          } else {
            SelectFirst(packed, k, std::less<uint64_t>());
          }
          for (int64_t j = 0; j < k; ++j) {
            const uint64_t low = packed[static_cast<size_t>(j)] & 0xFFFFFFFFu;
            emit(j, static_cast<int64_t>(largest_ ? 0xFFFFFFFFu - low : low));
          }
        } else {
          kv.resize(static_cast<size_t>(dim));
          for (int64_t j = 0; j < dim; ++j) kv[static_cast<size_t>(j)] = {src[j * inner], j};
          using P = std::pair<int64_t, int64_t>;
          if (largest_) {
            SelectFirst(kv, k, [](const P& a, const P& b) {
              return a.first > b.first || (a.first == b.first && a.second < b.second);
            });
          } else {
            SelectFirst(kv, k, [](const P& a, const P& b) { return a < b; });
          }
          for (int64_t j = 0; j < k; ++j) emit(j, kv[static_cast<size_t>(j)].second);
        }
      }
    });
  }

  // Puts the first k of v under the strict total order `before` at the front, in order.
  template <typename V, typename Less>
  static void SelectFirst(std::vector<V>& v, int64_t k, Less before) {
    const auto kth = v.begin() + static_cast<std::ptrdiff_t>(k);
    if (k < static_cast<int64_t>(v.size())) std::nth_element(v.begin(), kth - 1, v.end(), before);
    std::sort(v.begin(), kth, before);
  }

  std::optional<int64_t> attr_k_;
  int64_t axis_;
  bool largest_;
  std::unique_ptr<Kernel> reference_;
};

// NonZero: the coordinates of X's non-zero elements, [rank, count], in row-major order. One pass
// counts, a second writes each non-zero element's coordinates (a scalar is a 1-D tensor of one
// element). Fixed-width numbers and BOOL; anything else (FLOAT16, strings) goes to the reference.
class NonZeroKernel final : public Kernel {
 public:
  explicit NonZeroKernel(std::unique_ptr<Kernel> reference) : reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ref::CheckInputs(ctx, 1, "NonZero"));
    const Tensor& x = ctx.input(0);
    if (!x.device().is_cpu() || !x.is_contiguous()) return reference_->Compute(ctx);
    switch (x.dtype()) {
      case DataType::kFloat32:
        return Run<float>(ctx, x);
      case DataType::kFloat64:
        return Run<double>(ctx, x);
      case DataType::kBool:
      case DataType::kInt8:
      case DataType::kUint8:
        return Run<uint8_t>(ctx, x);
      case DataType::kInt16:
      case DataType::kUint16:
        return Run<uint16_t>(ctx, x);
      case DataType::kInt32:
      case DataType::kUint32:
        return Run<uint32_t>(ctx, x);
      case DataType::kInt64:
      case DataType::kUint64:
        return Run<uint64_t>(ctx, x);
      default:
        return reference_->Compute(ctx);
    }
  }

 private:
  // T: the element type, or an unsigned integer of its width (any set bit is non-zero).
  template <typename T>
  static Status Run(KernelContext& ctx, const Tensor& x) {
    const T* p = static_cast<const T*>(x.raw_data());
    const int64_t n = x.num_elements();
    int64_t nnz = 0;
    for (int64_t i = 0; i < n; ++i) nnz += p[i] != T{0} ? 1 : 0;
    const int rank = std::max(x.rank(), 1);
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kInt64, Shape{rank, nnz}));
    int64_t* out = y.data<int64_t>();
    int64_t col = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (p[i] == T{0}) continue;
      int64_t rest = i;
      for (int d = rank - 1; d >= 1; --d) {
        const int64_t extent = x.dim(d);
        out[d * nnz + col] = rest % extent;
        rest /= extent;
      }
      out[col] = rest;
      ++col;
    }
    return Status::OK();
  }

  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateGather(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateGather(info));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ref::AttrReader(info).Int("axis", 0));
  return std::make_unique<GatherKernel>(axis, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateGatherND(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateGatherND(info));
  KILN_ASSIGN_OR_RETURN(int64_t batch_dims, ref::AttrReader(info).Int("batch_dims", 0));
  return std::make_unique<GatherNDKernel>(batch_dims, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateScatterElements(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateScatterElements(info));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ref::AttrReader(info).Int("axis", 0));
  KILN_ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(info));
  return std::make_unique<ScatterElementsKernel>(axis, reduction, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateScatterND(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateScatterND(info));
  KILN_ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(info));
  return std::make_unique<ScatterNDKernel>(reduction, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateNonZero(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateNonZero(info));
  return std::make_unique<NonZeroKernel>(std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateTopK(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateTopK(info));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", -1));
  KILN_ASSIGN_OR_RETURN(bool largest, attrs.Bool("largest", true));
  std::optional<int64_t> k;
  if (info.opset() < 10) {
    KILN_ASSIGN_OR_RETURN(k, attrs.Int("k", 0));
  }
  return std::make_unique<TopKKernel>(k, axis, largest, std::move(reference));
}

}  // namespace kiln::cpu
