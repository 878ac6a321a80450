// SPDX-License-Identifier: Apache-2.0
#pragma once
// Glue between kiln and oneDNN (internal to src/kernels/cpu): the process-wide CPU engine, a
// per-thread stream, per-thread scratch buffers, kiln activations as post-ops, and the boundary
// that turns dnnl::error into a Status.
//
// NOTE on threading: oneDNN is built with the OpenMP runtime; a primitive executed on the calling
// thread parallelizes over that thread's OpenMP team (omp_set_num_threads set by the session).
// Primitives are immutable and may execute concurrently with distinct memory arguments; every
// primitive is created with scratchpad_mode::user so that concurrent executions never share
// oneDNN's internal scratchpad: each call passes a per-thread buffer (ThreadScratch).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "kernels/cpu/activation.h"
#include "kernels/ref/spatial.h"
#include "tensor/dtype.h"

namespace kiln::cpu {

const dnnl::engine& CpuEngine();
// A stream for the calling thread (created on first use).
dnnl::stream& ThreadStream();

// Per-thread growable, 64-byte aligned buffers, indexed by slot (distinct uses in one Compute
// take distinct slots). Pointers stay valid until the same thread asks for the same slot again.
// They never shrink: the steady state allocates nothing.
// kGemmA and kGemmAcc belong to gemm.cc's tasks (which may run on the calling thread inside a
// kernel that holds the others).
enum class ScratchSlot {
  kOnednnScratchpad,
  kSrc,
  kDst,
  kWeights,
  kOther,
  kGemmA,
  kGemmAcc,
  kCount
};
void* ThreadScratch(ScratchSlot slot, size_t bytes);

// Whether oneDNN runs BF16 convolutions and matmuls natively here (AVX512-BF16's VDPBF16PS; the
// ISA oneDNN dispatches to, so ONEDNN_MAX_CPU_ISA caps it). Thread-safe.
bool CpuComputesBf16();

// Whether oneDNN's INT8 kernels multiply with VNNI dot products here (AVX512-VNNI or AVX-VNNI's
// VPDPBUSD, which accumulates u8 x s8 products in 32 bits; the ISA oneDNN dispatches to, so
// ONEDNN_MAX_CPU_ISA caps it). Without them oneDNN multiplies u8 x s8 pairs with VPMADDUBSW,
// whose 16-bit pair sums saturate unless |w| <= 64 (quantized.cc). Thread-safe.
bool CpuHasInt8DotProducts();

// dnnl dims from kiln dims.
dnnl::memory::dims ToDims(std::span<const int64_t> dims);
// Plain row-major format tag for rank 1..5 (a, ab, abc, abcd, abcde).
dnnl::memory::format_tag PlainTag(int rank);
// Channel-blocked format tag for rank 3..5 and block 8 or 16 (aBc8b ... aBcde16b: oneDNN's
// nCw8c / nChw16c / nCdhw16c), the layout of kiln's blocked tensors (op/kiln_ops.h).
// REQUIRES: 3 <= rank <= 5, block 8 or 16.
dnnl::memory::format_tag BlockedTag(int rank, int64_t block);

// Appends `act` to `ops` as eltwise post-ops (HardSigmoid as linear then clip). Every kiln
// activation has an oneDNN 2.6 equivalent; returns false for kErf / kExp (not fusable).
bool AppendActivation(dnnl::post_ops& ops, const Activation& act);

// A convolution window in oneDNN's terms (dilation counted from 0) for ConvWindow's arguments.
struct DnnlWindow {
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};
DnnlWindow ToDnnlWindow(const ref::WindowGeometry& g);

// Whether an operand in `from` must be converted to `to` on each call; when so, `*out` becomes
// the reorder primitive that does it.
bool PlanReorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to, dnnl::reorder* out);

// True for oneDNN's reference implementations ("ref:any", "ref_int8:any", "ref_fused_..."):
// loops written for correctness, up to hundreds of times slower than its jit ones (a dilated 3x3
// convolution from an 8-blocked source on AVX2 took 44 s). kiln never plans one: each kernel
// tries other implementations and formats and otherwise runs its own kernel (docs/kernels.md).
bool IsReferenceImpl(std::string_view impl_info);

// Moves `pd` to its first implementation that is not a reference one (oneDNN lists them best
// first); false, with `pd` unchanged, when only reference ones remain.
template <typename PrimitiveDesc>
bool SkipReferenceImpls(PrimitiveDesc& pd) {
  while (IsReferenceImpl(pd.impl_info_str())) {
    if (!pd.next_impl()) return false;
  }
  return true;
}

// The implementations one kernel's plans run on (oneDNN's impl_info_str, or kiln's own kernel),
// for Kernel::Implementation (kiln profile, kiln run --implementations). Thread-safe.
class ImplementationLog {
 public:
  void Record(std::string_view impl) const KILN_EXCLUDES(mu_);
  // The distinct implementations in first-use order, ", "-separated; "" before any plan.
  std::string Joined() const KILN_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  mutable std::vector<std::string> seen_ KILN_GUARDED_BY(mu_);
};

// Objects a plan's calls need and can reuse, such as oneDNN memory objects bound to its
// descriptors (each call sets their data handles): making a dnnl::memory costs about 0.25 us, a
// convolution node makes five, and a small model at batch 1 runs a node every 10-20 us. Each
// call holds its own object for its duration, so concurrent calls never share one; at most
// kKeep idle ones are kept. Thread-safe.
template <typename T>
class CallObjects {
 public:
  class Lease {
   public:
    Lease(const CallObjects* owner, std::unique_ptr<T> obj) : owner_(owner), obj_(std::move(obj)) {}
    Lease(Lease&&) = default;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (obj_ != nullptr) owner_->Return(std::move(obj_));
    }
    T& operator*() const { return *obj_; }
    T* operator->() const { return obj_.get(); }

   private:
    const CallObjects* owner_;
    std::unique_ptr<T> obj_;
  };

  // An idle object, or make() (returning std::unique_ptr<T>) when none is idle.
  template <typename Make>
  Lease Acquire(Make&& make) const KILN_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<T> obj = std::move(idle_.back());
        idle_.pop_back();
        return Lease(this, std::move(obj));
      }
    }
    return Lease(this, make());
  }

 private:
  static constexpr size_t kKeep = 8;
  void Return(std::unique_ptr<T> obj) const KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (idle_.size() < kKeep) idle_.push_back(std::move(obj));
  }
  mutable Mutex mu_;
  mutable std::vector<std::unique_ptr<T>> idle_ KILN_GUARDED_BY(mu_);
};

// "oneDNN <impl_info_str>", the form ImplementationLog records for a oneDNN primitive.
std::string OnednnImpl(std::string_view impl_info);

// Primitive attributes with user scratchpad and the given post-ops.
dnnl::primitive_attr MakeAttr(const dnnl::post_ops& ops);

// INTERNAL "<what>: oneDNN error <status>: <message>".
Status DnnlError(std::string_view what, const dnnl::error& e);

// Runs f() (returning Status) and converts a dnnl::error or std::bad_alloc into a Status; no
// exception leaves.
template <typename F>
Status CatchDnnl(std::string_view what, F&& f) noexcept {
  try {
    return f();
  } catch (const dnnl::error& e) {
    return DnnlError(what, e);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return Status::Internal(std::string(what) + ": " + e.what());
  }
}

// The threads a oneDNN primitive made now would use (omp_get_max_threads(); 1 inside a parallel
// region).
int CurrentThreads();

// A small thread-safe cache of per-shape plans (primitives, reorders, packed weights) owned by
// one kernel. Lookup takes a mutex for a map find; building happens outside the lock (two
// threads may build the same plan at once; one wins). At most kMaxPlans entries: when full, the
// cache is cleared (shapes that change every call must not grow memory without bound).
//
// The key also holds the calling thread's OpenMP thread count: oneDNN fixes a primitive's
// thread partition when it is created (its `parallel(nthr, ...)` forks nthr threads whatever
// the count in force at execution), so a node that runs on one thread (a small node, or a run
// the session's thread governor keeps narrow) gets a primitive made for one thread.
template <typename Plan>
class PlanCache {
 public:
  static constexpr size_t kMaxPlans = 64;
  using Key = std::vector<int64_t>;

  // The plan for `key` at the current thread count, building it with build() ->
  // Result<std::shared_ptr<Plan>> when absent.
  template <typename Build>
  Result<std::shared_ptr<const Plan>> Get(const Key& shape_key, Build&& build) const
      KILN_EXCLUDES(mu_) {
    Key key;
    key.reserve(shape_key.size() + 1);
    key.assign(shape_key.begin(), shape_key.end());
    key.push_back(CurrentThreads());
    {
      MutexLock lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, build());
    MutexLock lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.emplace(std::move(key), plan);
    return std::shared_ptr<const Plan>(std::move(plan));
  }

 private:
  mutable Mutex mu_;
  mutable std::map<Key, std::shared_ptr<const Plan>> plans_ KILN_GUARDED_BY(mu_);
};

// A constant weight tensor reordered into the formats primitives asked for, shared by every plan
// of one kernel: plans for different batch sizes usually want the same packed format, so the
// weights are packed (and held in memory) once per format, not once per plan. Thread-safe.
//
// Storage type. FP32 storage (the default) keeps the packed FP32 memory. FLOAT16 / BFLOAT16
// storage (half-precision weights, opt pass half_weights) keeps only 16 bits per element: at pack
// time the half constant is widened to a temporary FP32 tensor, reordered into the format, and
// the packed result narrowed back (exactly: every value came from the half type) element by
// element, so the half copy has the packed layout (padding included). Each call then widens it
// into the calling thread's kWeights scratch (ExpandHalfWeights). No FP32 copy stays resident.
class PackedWeights {
 public:
  explicit PackedWeights(DataType storage = DataType::kFloat32) : storage_(storage) {}

  DataType storage() const { return storage_; }
  bool half() const { return storage_ != DataType::kFloat32; }

  // FP32 storage, or a BFLOAT16 constant packed for a primitive that computes in BF16 (the
  // reorder keeps the type). `user` describes the constant's plain layout at `data` (which
  // outlives this object). Returns `data` in `format`, reordering it the first time that format is
  // asked for. May throw dnnl::error (call inside CatchDnnl).
  dnnl::memory Get(const dnnl::memory::desc& user, const void* data,
                   const dnnl::memory::desc& format) const KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    for (const auto& [desc, mem] : packed_) {
      if (desc == format) return mem;
    }
    const dnnl::engine& eng = CpuEngine();
    dnnl::memory packed(format, eng);
    dnnl::memory src(user, eng, const_cast<void*>(data));
    dnnl::stream& s = ThreadStream();
    dnnl::reorder(dnnl::reorder::primitive_desc(eng, user, eng, format)).execute(s, src, packed);
    s.wait();
    packed_.emplace_back(format, packed);
    resident_bytes_ += format.get_size();
    return packed;
  }

  // Half storage. `user` describes the constant's plain layout as FP32 (f32 data type, the
  // primitive's view), `data` the constant's 16-bit elements in that layout (outliving this
  // object). Returns the 16-bit packed copy in `format` (format.get_size() / 4 elements), built
  // the first time that format is asked for. May throw dnnl::error or std::bad_alloc.
  const uint16_t* GetHalf(const dnnl::memory::desc& user, const void* data,
                          const dnnl::memory::desc& format) const KILN_EXCLUDES(mu_);

  // Bytes of packed copies held (FP32 or 16-bit), for memory accounting and tests.
  size_t resident_bytes() const KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return resident_bytes_;
  }

 private:
  struct HalfBuffer {
    dnnl::memory::desc format;
    std::unique_ptr<uint16_t[]> data;
  };
  DataType storage_;
  mutable Mutex mu_;
  mutable std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed_ KILN_GUARDED_BY(mu_);
  mutable std::vector<HalfBuffer> packed_half_ KILN_GUARDED_BY(mu_);
  mutable size_t resident_bytes_ KILN_GUARDED_BY(mu_) = 0;
};

// Widens the 16-bit weights `half` (of `storage`, FLOAT16 or BFLOAT16) into the calling thread's
// kWeights scratch, split over its OpenMP team, and returns them as FP32 memory of `md`
// (md.get_size() / 4 elements are read). Valid until the thread next asks for that slot.
dnnl::memory ExpandHalfWeights(DataType storage, const void* half, const dnnl::memory::desc& md);

}  // namespace kiln::cpu
