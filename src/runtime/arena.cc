// SPDX-License-Identifier: Apache-2.0
#include "runtime/arena.h"

#include <algorithm>

namespace kiln {

bool RunAllocator::EndRun() {
  MutexLock lock(lifetime_mu_);
  if (live_blocks_ == 0) return true;
  orphaned_ = true;
  return false;
}

void RunAllocator::BlockAllocated() {
  MutexLock lock(lifetime_mu_);
  ++live_blocks_;
}

void RunAllocator::BlockFreed() {
  bool destroy = false;
  {
    MutexLock lock(lifetime_mu_);
    --live_blocks_;
    destroy = orphaned_ && live_blocks_ == 0;
  }
  if (destroy) delete this;
}

// ---- RecordingAllocator ----

Result<void*> RecordingAllocator::Allocate(size_t bytes, size_t alignment) {
  KILN_ASSIGN_OR_RETURN(void* p, base_.Allocate(bytes, alignment));
  {
    MutexLock lock(mu_);
    RecordedAllocation r;
    r.bytes = bytes;
    r.alignment = alignment;
    r.node = node_;
    r.alloc_tick = tick_++;
    live_[p] = records_.size();
    records_.push_back(r);
  }
  BlockAllocated();
  return p;
}

void RecordingAllocator::Free(void* ptr, size_t bytes) {
  {
    MutexLock lock(mu_);
    auto it = live_.find(ptr);
    if (it != live_.end()) {
      records_[it->second].free_tick = tick_++;
      live_.erase(it);
    }
  }
  base_.Free(ptr, bytes);
  BlockFreed();
}

void RecordingAllocator::BeginNode(int node) {
  MutexLock lock(mu_);
  node_ = node;
}

void RecordingAllocator::MarkValue(const void* ptr, int value) {
  MutexLock lock(mu_);
  auto it = live_.find(ptr);
  if (it != live_.end()) records_[it->second].value = value;
}

std::vector<RecordedAllocation> RecordingAllocator::records() const {
  MutexLock lock(mu_);
  return records_;
}

// ---- PlannedAllocator ----

Result<std::unique_ptr<PlannedAllocator>> PlannedAllocator::Create(const MemoryPlan& plan,
                                                                   Allocator& base) {
  KILN_ASSIGN_OR_RETURN(void* arena, base.Allocate(plan.arena_bytes, MemoryPlan::kAlignment));
  return std::unique_ptr<PlannedAllocator>(new PlannedAllocator(base, arena, plan.arena_bytes));
}

PlannedAllocator::~PlannedAllocator() { base_.Free(arena_, arena_bytes_); }

void PlannedAllocator::BeginRun(const MemoryPlan* plan) {
  MutexLock lock(mu_);
  plan_ = plan;
  node_ = -1;
  ordinal_ = 0;
  fallbacks_ = 0;
}

void PlannedAllocator::BeginNode(int node) {
  MutexLock lock(mu_);
  node_ = node;
  ordinal_ = 0;
}

int64_t PlannedAllocator::fallbacks() const {
  MutexLock lock(mu_);
  return fallbacks_;
}

Result<void*> PlannedAllocator::Allocate(size_t bytes, size_t alignment) {
  {
    MutexLock lock(mu_);
    const int ordinal = ordinal_++;
    const MemoryPlan* plan = plan_;
    if (plan != nullptr && node_ >= 0 && static_cast<size_t>(node_) + 1 < plan->node_begin.size() &&
        alignment <= MemoryPlan::kAlignment) {
      const size_t index = static_cast<size_t>(plan->node_begin[static_cast<size_t>(node_)]) +
                           static_cast<size_t>(ordinal);
      if (index < static_cast<size_t>(plan->node_begin[static_cast<size_t>(node_) + 1]) &&
          plan->allocations[index].bytes == bytes) {
        const size_t begin = plan->offsets[index];
        const size_t end = begin + PlanBlockBytes(bytes, MemoryPlan::kAlignment);
        const bool clash =
            end > arena_bytes_ || std::any_of(live_.begin(), live_.end(), [&](const auto& b) {
              return begin < b.second && b.first < end;
            });
        if (!clash) {
          live_.emplace_back(begin, end);
          BlockAllocated();
          return static_cast<void*>(arena_ + begin);
        }
      }
    }
    ++fallbacks_;
  }
  KILN_ASSIGN_OR_RETURN(void* p, base_.Allocate(bytes, alignment));
  BlockAllocated();
  return p;
}

void PlannedAllocator::Free(void* ptr, size_t bytes) {
  char* p = static_cast<char*>(ptr);
  if (p >= arena_ && p < arena_ + arena_bytes_) {
    MutexLock lock(mu_);
    const size_t offset = static_cast<size_t>(p - arena_);
    auto it =
        std::find_if(live_.begin(), live_.end(), [&](const auto& b) { return b.first == offset; });
    if (it != live_.end()) {
      *it = live_.back();
      live_.pop_back();
    }
  } else {
    base_.Free(ptr, bytes);
  }
  BlockFreed();
}

// ---- PlanCache ----

std::shared_ptr<PlanEntry> PlanCache::Find(const std::vector<int64_t>& key) {
  MutexLock lock(mu_);
  for (Cached& c : entries_) {
    if (c.entry->key == key) {
      c.last_used = ++clock_;
      return c.entry;
    }
  }
  return nullptr;
}

std::shared_ptr<PlanEntry> PlanCache::Insert(std::vector<int64_t> key, MemoryPlan plan) {
  MutexLock lock(mu_);
  for (Cached& c : entries_) {
    if (c.entry->key == key) {
      c.last_used = ++clock_;
      return c.entry;
    }
  }
  if (capacity_ > 0 && entries_.size() >= capacity_) {
    auto lru = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
      return a.last_used < b.last_used;
    });
    entries_.erase(lru);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
  auto e = std::make_shared<PlanEntry>();
  e->key = std::move(key);
  e->plan = std::move(plan);
  entries_.push_back({e, ++clock_});
  return e;
}

std::vector<std::shared_ptr<PlanEntry>> PlanCache::Entries() const {
  std::vector<Cached> cached;
  {
    MutexLock lock(mu_);
    cached = entries_;
  }
  std::sort(cached.begin(), cached.end(),
            [](const Cached& a, const Cached& b) { return a.last_used > b.last_used; });
  std::vector<std::shared_ptr<PlanEntry>> out;
  out.reserve(cached.size());
  for (Cached& c : cached) out.push_back(std::move(c.entry));
  return out;
}

Result<std::unique_ptr<PlannedAllocator>> AcquireArena(PlanEntry& entry, Allocator& base) {
  {
    MutexLock lock(entry.mu);
    if (!entry.idle.empty()) {
      std::unique_ptr<PlannedAllocator> a = std::move(entry.idle.back());
      entry.idle.pop_back();
      a->BeginRun(&entry.plan);
      return a;
    }
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<PlannedAllocator> a,
                        PlannedAllocator::Create(entry.plan, base));
  a->BeginRun(&entry.plan);
  return a;
}

void ReleaseArena(PlanEntry& entry, std::unique_ptr<PlannedAllocator> arena) {
  arena->BeginRun(nullptr);  // from here on, anything new goes to the heap
  if (!arena->EndRun()) {
    (void)arena.release();  // orphaned: deletes itself when its last block is freed
    return;
  }
  MutexLock lock(entry.mu);
  entry.idle.push_back(std::move(arena));
}

}  // namespace kiln
