// SPDX-License-Identifier: Apache-2.0
#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "base/check.h"

namespace kiln {

size_t PlanBlockBytes(size_t bytes, size_t alignment) {
  const size_t rounded = (bytes + alignment - 1) & ~(alignment - 1);
  return std::max(rounded, alignment);
}

namespace {

bool LiveTogether(const PlanInterval& a, const PlanInterval& b) {
  return a.begin < b.end && b.begin < a.end;
}

}  // namespace

IntervalPlan PlanIntervals(std::span<const PlanInterval> intervals, size_t alignment) {
  KILN_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0, "alignment ", alignment,
             " is not a power of two");
  const size_t n = intervals.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (intervals[a].bytes != intervals[b].bytes) return intervals[a].bytes > intervals[b].bytes;
    return intervals[a].begin < intervals[b].begin;
  });

  IntervalPlan plan;
  plan.offsets.assign(n, 0);
  std::vector<size_t> placed;  // indices, in placement order
  placed.reserve(n);
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed blocks live with i
  for (size_t i : order) {
    const size_t size = PlanBlockBytes(intervals[i].bytes, alignment);
    busy.clear();
    for (size_t j : placed) {
      if (LiveTogether(intervals[i], intervals[j])) {
        busy.emplace_back(plan.offsets[j],
                          plan.offsets[j] + PlanBlockBytes(intervals[j].bytes, alignment));
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX;
    size_t best_gap = SIZE_MAX;
    size_t top = 0;  // end of the busy range seen so far
    for (const auto& [begin, end] : busy) {
      if (begin > top) {
        const size_t gap = begin - top;
        if (gap >= size && gap < best_gap) {
          best = top;
          best_gap = gap;
        }
      }
      top = std::max(top, end);
    }
    if (best == SIZE_MAX) best = top;
    plan.offsets[i] = best;
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
    placed.push_back(i);
  }
  return plan;
}

bool PlanIsOverlapFree(std::span<const PlanInterval> intervals, std::span<const size_t> offsets,
                       size_t alignment) {
  if (offsets.size() != intervals.size()) return false;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (offsets[i] % alignment != 0) return false;
    const size_t i_end = offsets[i] + PlanBlockBytes(intervals[i].bytes, alignment);
    for (size_t j = i + 1; j < intervals.size(); ++j) {
      if (!LiveTogether(intervals[i], intervals[j])) continue;
      const size_t j_end = offsets[j] + PlanBlockBytes(intervals[j].bytes, alignment);
      if (offsets[i] < j_end && offsets[j] < i_end) return false;
    }
  }
  return true;
}

size_t PlanLivePeakBytes(std::span<const PlanInterval> intervals, size_t alignment) {
  // Sweep: +size at begin, -size at end; ends sort before begins at the same tick.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(intervals.size() * 2);
  for (const PlanInterval& iv : intervals) {
    const auto size = static_cast<int64_t>(PlanBlockBytes(iv.bytes, alignment));
    events.emplace_back(iv.begin, size);
    events.emplace_back(iv.end, -size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  int64_t peak = 0;
  for (const auto& [tick, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<size_t>(peak);
}

MemoryPlan BuildMemoryPlan(std::span<const RecordedAllocation> recorded, int num_nodes,
                           std::vector<char> heap_nodes) {
  KILN_CHECK(heap_nodes.size() == static_cast<size_t>(num_nodes), "heap_nodes has ",
             heap_nodes.size(), " entries for ", num_nodes, " nodes");
  MemoryPlan plan;
  plan.heap_nodes = std::move(heap_nodes);
  for (const RecordedAllocation& a : recorded) {
    if (a.node < 0 || a.node >= num_nodes) continue;
    if (a.free_tick == RecordedAllocation::kNotFreed) {
      plan.heap_nodes[static_cast<size_t>(a.node)] = 1;
    }
  }
  for (const RecordedAllocation& a : recorded) {
    if (a.node < 0 || a.node >= num_nodes || plan.heap_nodes[static_cast<size_t>(a.node)]) continue;
    if (a.alignment > MemoryPlan::kAlignment) {  // cannot promise it: leave the node on the heap
      plan.heap_nodes[static_cast<size_t>(a.node)] = 1;
    }
  }
  for (const RecordedAllocation& a : recorded) {
    if (a.node < 0 || a.node >= num_nodes || plan.heap_nodes[static_cast<size_t>(a.node)]) continue;
    plan.allocations.push_back(a);
  }
  // Nodes run one after another, so a stable sort by node keeps each node's allocation order.
  std::stable_sort(
      plan.allocations.begin(), plan.allocations.end(),
      [](const RecordedAllocation& a, const RecordedAllocation& b) { return a.node < b.node; });
  plan.node_begin.assign(static_cast<size_t>(num_nodes) + 1, 0);
  for (const RecordedAllocation& a : plan.allocations) {
    ++plan.node_begin[static_cast<size_t>(a.node) + 1];
  }
  for (size_t n = 1; n < plan.node_begin.size(); ++n) plan.node_begin[n] += plan.node_begin[n - 1];

  std::vector<PlanInterval> intervals;
  intervals.reserve(plan.allocations.size());
  for (const RecordedAllocation& a : plan.allocations) {
    intervals.push_back({a.bytes, a.alloc_tick, a.free_tick});
    plan.unplanned_bytes += a.bytes;
  }
  IntervalPlan placed = PlanIntervals(intervals, MemoryPlan::kAlignment);
  plan.offsets = std::move(placed.offsets);
  plan.arena_bytes = placed.arena_bytes;
  plan.live_peak_bytes = PlanLivePeakBytes(intervals, MemoryPlan::kAlignment);
  return plan;
}

}  // namespace kiln
