// SPDX-License-Identifier: Apache-2.0
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace kiln {
namespace {

TEST(MemoryPlanTest, BlockBytesRoundUpToTheAlignment) {
  EXPECT_EQ(PlanBlockBytes(0, 64), 64u);
  EXPECT_EQ(PlanBlockBytes(1, 64), 64u);
  EXPECT_EQ(PlanBlockBytes(64, 64), 64u);
  EXPECT_EQ(PlanBlockBytes(65, 64), 128u);
}

TEST(MemoryPlanTest, DisjointLifetimesShareAndOverlappingOnesDoNot) {
  // A chain: a [0,2) b [1,3) c [2,4): a and c may share, b sits beside them.
  const PlanInterval chain[] = {{1000, 0, 2}, {1000, 1, 3}, {1000, 2, 4}};
  IntervalPlan p = PlanIntervals(chain, 64);
  ASSERT_EQ(p.offsets.size(), 3u);
  EXPECT_EQ(p.arena_bytes, 2 * 1024u);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_TRUE(PlanIsOverlapFree(chain, p.offsets, 64));
  // All live at once: the sum.
  const PlanInterval together[] = {{100, 0, 9}, {200, 1, 9}, {300, 2, 9}};
  EXPECT_EQ(PlanIntervals(together, 64).arena_bytes, 128u + 256u + 320u);
}

TEST(MemoryPlanTest, BestFitPicksTheSmallestGapThatFits) {
  // Big blocks at [0,4096) and [8192, ...) with a 4096-byte hole between them ([4096, 8192))
  // while a 1024-byte block frees the rest: a small block must go into the snuggest hole.
  const PlanInterval v[] = {
      {4096, 0, 10},  // 0: offset 0
      {4096, 0, 1},   // 1: offset 4096, dies at 1
      {4096, 0, 10},  // 2: offset 8192
      {1024, 2, 10},  // 3: fits in the hole left by 1
  };
  IntervalPlan p = PlanIntervals(v, 64);
  EXPECT_TRUE(PlanIsOverlapFree(v, p.offsets, 64));
  EXPECT_EQ(p.offsets[3], 4096u);
  EXPECT_EQ(p.arena_bytes, 3 * 4096u);
}

// Property: on random interval sets no two live blocks overlap, the arena holds every block,
// and it is never larger than the unplanned sum nor smaller than the largest moment's live sum.
TEST(MemoryPlanTest, RandomIntervalSetsAreOverlapFree) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 60)(rng);
    std::vector<PlanInterval> v;
    for (int i = 0; i < n; ++i) {
      const int64_t begin = std::uniform_int_distribution<int64_t>(0, 100)(rng);
      const int64_t len = std::uniform_int_distribution<int64_t>(1, 40)(rng);
      const size_t bytes = std::uniform_int_distribution<size_t>(0, 5000)(rng);
      v.push_back({bytes, begin, begin + len});
    }
    IntervalPlan p = PlanIntervals(v, 64);
    ASSERT_TRUE(PlanIsOverlapFree(v, p.offsets, 64)) << "trial " << trial;
    size_t sum = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t block = PlanBlockBytes(v[i].bytes, 64);
      sum += block;
      EXPECT_LE(p.offsets[i] + block, p.arena_bytes);
    }
    EXPECT_LE(p.arena_bytes, sum);
    size_t live_peak = 0;
    for (int64_t t = 0; t <= 140; ++t) {
      size_t live = 0;
      for (const PlanInterval& iv : v) {
        if (iv.begin <= t && t < iv.end) live += PlanBlockBytes(iv.bytes, 64);
      }
      live_peak = std::max(live_peak, live);
    }
    EXPECT_GE(p.arena_bytes, live_peak);
    EXPECT_EQ(PlanLivePeakBytes(v, 64), live_peak);
  }
}

TEST(MemoryPlanTest, OverlapCheckerCatchesAClash) {
  const PlanInterval v[] = {{64, 0, 2}, {64, 1, 3}};
  const size_t same[] = {0, 0};
  const size_t apart[] = {0, 64};
  EXPECT_FALSE(PlanIsOverlapFree(v, same, 64));
  EXPECT_TRUE(PlanIsOverlapFree(v, apart, 64));
}

TEST(MemoryPlanTest, BuildLeavesSurvivorsAndMarkedNodesOnTheHeap) {
  // Node 0 makes a (freed) and scratch s (freed inside the node); node 1 makes b (freed); node 2
  // is marked (a graph output's producer); node 3 makes c, which outlives the run.
  std::vector<RecordedAllocation> r(6);
  r[0] = {100, 64, 0, 10, 0, 5};
  r[1] = {50, 64, 0, -1, 1, 2};
  r[2] = {100, 64, 1, 11, 3, 7};
  r[3] = {100, 64, 2, 12, 4, 8};
  r[4] = {100, 64, 3, 13, 6, RecordedAllocation::kNotFreed};
  r[5] = {10, 64, 3, -1, 9, 10};
  MemoryPlan plan = BuildMemoryPlan(r, 4, {0, 0, 1, 0});
  ASSERT_EQ(plan.allocations.size(), 3u);
  EXPECT_EQ(plan.heap_nodes, (std::vector<char>{0, 0, 1, 1}));
  EXPECT_EQ(plan.node_begin, (std::vector<int>{0, 2, 3, 3, 3}));
  EXPECT_EQ(plan.unplanned_bytes, 250u);
  // a, s and b are all live at tick 3..4? a [0,5), s [1,2), b [3,7): s can share with b.
  EXPECT_EQ(plan.arena_bytes, 256u);
  EXPECT_EQ(plan.live_peak_bytes, 256u);  // a and b at ticks 3..4
  EXPECT_EQ(plan.allocations[0].value, 10);
  EXPECT_EQ(plan.allocations[1].value, -1);
}

}  // namespace
}  // namespace kiln
