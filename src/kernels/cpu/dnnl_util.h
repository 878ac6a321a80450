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

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kernels/cpu/activation.h"

namespace kiln::cpu {

const dnnl::engine& CpuEngine();
// A stream for the calling thread (created on first use).
dnnl::stream& ThreadStream();

// Per-thread growable, 64-byte aligned buffers, indexed by slot (distinct uses in one Compute
// take distinct slots). Pointers stay valid until the same thread asks for the same slot again.
// They never shrink: the steady state allocates nothing.
enum class ScratchSlot { kOnednnScratchpad, kSrc, kDst, kWeights, kOther, kCount };
void* ThreadScratch(ScratchSlot slot, size_t bytes);

// dnnl dims from kiln dims.
dnnl::memory::dims ToDims(std::span<const int64_t> dims);
// Plain row-major format tag for rank 1..5 (a, ab, abc, abcd, abcde).
dnnl::memory::format_tag PlainTag(int rank);

// Appends `act` to `ops` as eltwise post-ops (HardSigmoid as linear then clip). Every kiln
// activation has an oneDNN 2.6 equivalent; returns false for kErf / kExp (not fusable).
bool AppendActivation(dnnl::post_ops& ops, const Activation& act);

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

}  // namespace kiln::cpu
