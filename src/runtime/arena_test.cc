// SPDX-License-Identifier: Apache-2.0
#include "runtime/arena.h"

#include <gtest/gtest.h>

#include <atomic>

namespace kiln {
namespace {

// Counts live blocks and bytes.
class TrackingAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    ++allocs;
    ++live;
    return HostAllocator().Allocate(bytes, alignment);
  }
  void Free(void* ptr, size_t bytes) override {
    --live;
    HostAllocator().Free(ptr, bytes);
  }
  Device device() const override { return Device::Cpu(); }
  std::atomic<int> allocs{0};
  std::atomic<int> live{0};
};

// Node 0 makes a (1000 bytes) then b (500); node 1 makes c (1000) after a is freed.
MemoryPlan ThreeBlockPlan() {
  std::vector<RecordedAllocation> r(3);
  r[0] = {1000, 64, 0, 1, 0, 3};
  r[1] = {500, 64, 0, 2, 1, 5};
  r[2] = {1000, 64, 1, 3, 4, 6};
  return BuildMemoryPlan(r, 2, {0, 0});
}

TEST(ArenaTest, RecordingAllocatorRecordsSizesNodesValuesAndLifetimes) {
  TrackingAllocator base;
  auto rec = std::make_unique<RecordingAllocator>(base);
  rec->BeginNode(0);
  void* a = *rec->Allocate(100, 64);
  void* b = *rec->Allocate(200, 64);
  rec->MarkValue(b, 7);
  rec->BeginNode(1);
  rec->Free(a, 100);
  void* c = *rec->Allocate(300, 64);
  rec->Free(c, 300);
  std::vector<RecordedAllocation> r = rec->records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].bytes, 100u);
  EXPECT_EQ(r[0].node, 0);
  EXPECT_EQ(r[0].alloc_tick, 0);
  EXPECT_EQ(r[0].free_tick, 2);
  EXPECT_EQ(r[1].value, 7);
  EXPECT_EQ(r[1].free_tick, RecordedAllocation::kNotFreed);
  EXPECT_EQ(r[2].node, 1);
  EXPECT_EQ(r[2].alloc_tick, 3);
  EXPECT_EQ(r[2].free_tick, 4);
  // b is still live: the recorder cannot end cleanly and frees itself with b.
  EXPECT_FALSE(rec->EndRun());
  RecordingAllocator* orphan = rec.release();
  EXPECT_EQ(base.live.load(), 1);
  orphan->Free(b, 200);
  EXPECT_EQ(base.live.load(), 0);
}

TEST(ArenaTest, PlannedAllocatorServesThePlanAndFallsBackOnDeviations) {
  TrackingAllocator base;
  const MemoryPlan plan = ThreeBlockPlan();
  EXPECT_EQ(plan.arena_bytes, 1024u + 512u);
  auto arena = PlannedAllocator::Create(plan, base);
  ASSERT_TRUE(arena.ok());
  PlannedAllocator& p = **arena;
  EXPECT_EQ(base.allocs.load(), 1);  // the arena

  p.BeginRun(&plan);
  p.BeginNode(0);
  char* a = static_cast<char*>(*p.Allocate(1000, 64));
  char* b = static_cast<char*>(*p.Allocate(500, 64));
  p.Free(a, 1000);
  p.BeginNode(1);
  char* c = static_cast<char*>(*p.Allocate(1000, 64));
  EXPECT_EQ(c, a);  // c reuses a's bytes
  EXPECT_GE(b, a + 1000);
  EXPECT_EQ(base.allocs.load(), 1);
  EXPECT_EQ(p.fallbacks(), 0);
  p.Free(b, 500);
  p.Free(c, 1000);

  // A second run that deviates: another size, one request too many, and a block that is still
  // live where the plan wants to put the next one.
  p.BeginRun(&plan);
  p.BeginNode(0);
  void* a2 = *p.Allocate(999, 64);   // size differs: heap
  void* b2 = *p.Allocate(500, 64);   // as planned
  void* extra = *p.Allocate(8, 64);  // node 0 planned only two
  p.BeginNode(1);
  void* c2 = *p.Allocate(1000, 64);  // planned over a, which is free (a2 went to the heap)
  EXPECT_EQ(p.fallbacks(), 2);
  EXPECT_EQ(base.allocs.load(), 3);
  p.Free(extra, 8);
  p.Free(a2, 999);
  p.Free(b2, 500);
  p.Free(c2, 1000);

  p.BeginRun(&plan);
  p.BeginNode(0);
  void* a3 = *p.Allocate(1000, 64);
  void* b3 = *p.Allocate(500, 64);
  p.BeginNode(1);  // a3 not freed yet: c's planned bytes are taken, so c goes to the heap
  void* c3 = *p.Allocate(1000, 64);
  EXPECT_NE(c3, a3);
  EXPECT_EQ(p.fallbacks(), 1);
  p.Free(a3, 1000);
  p.Free(b3, 500);
  p.Free(c3, 1000);
  EXPECT_TRUE(p.EndRun());
  EXPECT_EQ(base.live.load(), 1);  // the arena only
}

TEST(ArenaTest, ArenaWithALiveBlockAtTheEndIsOrphanedAndFreesItselfLater) {
  TrackingAllocator base;
  auto entry = std::make_shared<PlanEntry>();
  entry->plan = ThreeBlockPlan();
  Result<std::unique_ptr<PlannedAllocator>> arena = AcquireArena(*entry, base);
  ASSERT_TRUE(arena.ok());
  PlannedAllocator* raw = arena->get();
  raw->BeginNode(0);
  void* a = *raw->Allocate(1000, 64);
  ReleaseArena(*entry, std::move(arena).value());
  {
    MutexLock lock(entry->mu);
    EXPECT_TRUE(entry->idle.empty());  // not reusable while `a` lives
  }
  EXPECT_EQ(base.live.load(), 1);
  raw->Free(a, 1000);  // the last block: the arena goes with it
  EXPECT_EQ(base.live.load(), 0);

  Result<std::unique_ptr<PlannedAllocator>> clean = AcquireArena(*entry, base);
  ASSERT_TRUE(clean.ok());
  ReleaseArena(*entry, std::move(clean).value());
  MutexLock lock(entry->mu);
  EXPECT_EQ(entry->idle.size(), 1u);
}

TEST(ArenaTest, PlanCacheFindsInsertsAndEvicts) {
  PlanCache cache(2);
  EXPECT_EQ(cache.Find({1}), nullptr);
  auto one = cache.Insert({1}, MemoryPlan());
  EXPECT_EQ(cache.Insert({1}, MemoryPlan()), one);  // kept, not replaced
  cache.Insert({2}, MemoryPlan());
  EXPECT_EQ(cache.Find({1}), one);  // 1 is now the most recent
  cache.Insert({3}, MemoryPlan());  // evicts 2
  EXPECT_EQ(cache.Find({2}), nullptr);
  EXPECT_NE(cache.Find({3}), nullptr);
  EXPECT_EQ(cache.evictions(), 1);
  std::vector<std::shared_ptr<PlanEntry>> entries = cache.Entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]->key, std::vector<int64_t>{3});
}

}  // namespace
}  // namespace kiln
