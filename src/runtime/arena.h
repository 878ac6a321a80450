// SPDX-License-Identifier: Apache-2.0
#pragma once
// The allocators behind a session's memory plans (runtime/memory_plan.h) and the cache that
// holds the plans. Internal to the runtime: Session uses them, kernels only see an Allocator.
//
//   first run of a signature   RecordingAllocator: serves from the session's allocator and
//                              records every allocation (size, node, value, lifetime) ->
//                              BuildMemoryPlan -> PlanCache::Insert (one arena made up front)
//   later runs                 PlanCache::Find -> AcquireArena: a PlannedAllocator that hands
//                              out the planned offsets of one arena in allocation order ->
//                              ReleaseArena after the run, back to the entry's pool
//
// Correctness never depends on the plan: a PlannedAllocator checks each request against the plan
// (same node, same position within the node, same size) and against the arena blocks live at
// that moment, and serves anything that does not match from the session's allocator.
//
// Lifetimes: a Buffer frees into the allocator that made it, possibly after the run ended (a
// value that outlived it). A run allocator with blocks still live at the end of its run is
// orphaned instead of reused or destroyed: it deletes itself (and its arena) when its last block
// is freed. The session's allocator must outlive such buffers, as it must outlive the session.
//
// Thread safety: all classes here are thread-safe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "runtime/memory_plan.h"
#include "tensor/buffer.h"

namespace kiln {

// An allocator one run uses; the executor tells it which node is computing.
class RunAllocator : public Allocator {
 public:
  // Called before node `node` computes.
  virtual void BeginNode(int node) = 0;
  // Called once when the run is over. True: no block is live and the caller keeps ownership (to
  // delete or reuse it). False: blocks are still live; the caller must give up ownership
  // (unique_ptr::release) and the allocator deletes itself when the last one is freed.
  bool EndRun() KILN_EXCLUDES(lifetime_mu_);

 protected:
  // Counts blocks in and out; Free implementations call BlockFreed() last, outside their lock,
  // and must not touch `this` afterwards.
  void BlockAllocated() KILN_EXCLUDES(lifetime_mu_);
  void BlockFreed() KILN_EXCLUDES(lifetime_mu_);

 private:
  Mutex lifetime_mu_;
  int64_t live_blocks_ KILN_GUARDED_BY(lifetime_mu_) = 0;
  bool orphaned_ KILN_GUARDED_BY(lifetime_mu_) = false;
};

class RecordingAllocator final : public RunAllocator {
 public:
  explicit RecordingAllocator(Allocator& base) : base_(base) {}

  Result<void*> Allocate(size_t bytes, size_t alignment) override;
  void Free(void* ptr, size_t bytes) override;
  Device device() const override { return base_.device(); }
  Status Fill(void* ptr, int value, size_t bytes) override { return base_.Fill(ptr, value, bytes); }
  void BeginNode(int node) override;

  // Records that the live block at `ptr` became graph value `value` (a node output).
  void MarkValue(const void* ptr, int value);
  // Everything recorded so far, in allocation order.
  std::vector<RecordedAllocation> records() const;

 private:
  Allocator& base_;
  mutable Mutex mu_;
  int node_ KILN_GUARDED_BY(mu_) = -1;
  int64_t tick_ KILN_GUARDED_BY(mu_) = 0;
  std::vector<RecordedAllocation> records_ KILN_GUARDED_BY(mu_);
  std::unordered_map<const void*, size_t> live_ KILN_GUARDED_BY(mu_);  // block -> index in records_
};

class PlannedAllocator final : public RunAllocator {
 public:
  // Allocates an arena of plan.arena_bytes from `base`.
  static Result<std::unique_ptr<PlannedAllocator>> Create(const MemoryPlan& plan, Allocator& base);
  ~PlannedAllocator() override;

  // Starts a run over `plan` (the plan the arena was made for; it must stay alive until EndRun).
  void BeginRun(const MemoryPlan* plan);
  Result<void*> Allocate(size_t bytes, size_t alignment) override;
  void Free(void* ptr, size_t bytes) override;
  Device device() const override { return base_.device(); }
  Status Fill(void* ptr, int value, size_t bytes) override { return base_.Fill(ptr, value, bytes); }
  void BeginNode(int node) override;

  // Requests of the current run served from the session's allocator instead of the arena.
  int64_t fallbacks() const;
  size_t arena_bytes() const { return arena_bytes_; }

 private:
  PlannedAllocator(Allocator& base, void* arena, size_t arena_bytes)
      : base_(base), arena_(static_cast<char*>(arena)), arena_bytes_(arena_bytes) {}

  Allocator& base_;
  char* const arena_;
  const size_t arena_bytes_;
  mutable Mutex mu_;
  const MemoryPlan* plan_ KILN_GUARDED_BY(mu_) = nullptr;
  int node_ KILN_GUARDED_BY(mu_) = -1;
  int ordinal_ KILN_GUARDED_BY(mu_) = 0;  // requests of node_ so far
  int64_t fallbacks_ KILN_GUARDED_BY(mu_) = 0;
  // [offset, end) of the arena blocks in use.
  std::vector<std::pair<size_t, size_t>> live_ KILN_GUARDED_BY(mu_);
};

// A cached plan with its pool of arenas. `key` and `plan` are fixed once the entry is cached.
struct PlanEntry {
  std::vector<int64_t> key;
  MemoryPlan plan;
  Mutex mu;
  std::vector<std::unique_ptr<PlannedAllocator>> idle KILN_GUARDED_BY(mu);  // arenas no run uses
};

// The plans of one session, keyed by input signature, least recently used evicted first.
class PlanCache {
 public:
  explicit PlanCache(size_t capacity) : capacity_(capacity) {}

  size_t capacity() const { return capacity_; }
  // The entry for `key`, or null.
  std::shared_ptr<PlanEntry> Find(const std::vector<int64_t>& key) KILN_EXCLUDES(mu_);
  // Adds a plan (keeping an entry already there for the same key) and returns the entry.
  std::shared_ptr<PlanEntry> Insert(std::vector<int64_t> key, MemoryPlan plan) KILN_EXCLUDES(mu_);
  // Every cached entry, most recently used first.
  std::vector<std::shared_ptr<PlanEntry>> Entries() const KILN_EXCLUDES(mu_);
  int64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }

 private:
  struct Cached {
    std::shared_ptr<PlanEntry> entry;
    uint64_t last_used = 0;  // clock_ at the entry's last Find or Insert
  };
  const size_t capacity_;
  mutable Mutex mu_;
  uint64_t clock_ KILN_GUARDED_BY(mu_) = 0;
  std::vector<Cached> entries_ KILN_GUARDED_BY(mu_);
  std::atomic<int64_t> evictions_{0};
};

// An arena of `entry` for one run: an idle one, or a new one made from `base`.
Result<std::unique_ptr<PlannedAllocator>> AcquireArena(PlanEntry& entry, Allocator& base);
// Ends the run of `arena` and returns it to `entry`'s pool (or orphans it, see RunAllocator).
void ReleaseArena(PlanEntry& entry, std::unique_ptr<PlannedAllocator> arena);

}  // namespace kiln
