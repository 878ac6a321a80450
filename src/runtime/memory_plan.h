// SPDX-License-Identifier: Apache-2.0
#pragma once
// Static memory plans: where, inside one arena, every intermediate allocation of a run goes.
//
// A plan is computed from a recording of one run (RecordedAllocation: size, alignment, the node
// that made it, and its lifetime as a half-open interval of allocator event ticks). Two
// allocations whose lifetimes overlap never share bytes; allocations whose lifetimes are disjoint
// may. This file is pure (no threads, no allocators): the runtime's recording and planned
// allocators (runtime/arena.h) feed it and use its result.
//
// NOTE on the algorithm: greedy by size with best fit (Pisarchyk & Lee 2020, "Efficient Memory
// Management for Deep Neural Net Inference"; what TFLite's arena planner does). Allocations are
// placed from the largest down; each goes into the smallest gap, between the blocks already
// placed that are live at the same time, that fits it, or above them all. O(n^2 log n) in the
// number of allocations, which is the number of node outputs plus scratch of one run.
//
//   std::vector<PlanInterval> intervals = ...;
//   IntervalPlan p = PlanIntervals(intervals, 64);
//   // p.offsets[i] is where interval i starts; p.arena_bytes is the arena it needs.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

// One allocation to place: `bytes` live over ticks [begin, end).
struct PlanInterval {
  size_t bytes = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

struct IntervalPlan {
  std::vector<size_t> offsets;  // one per interval, a multiple of the alignment
  size_t arena_bytes = 0;       // the highest offset + rounded size: what the arena must hold
};

// Rounds `bytes` up to a multiple of `alignment` (a power of two); at least `alignment`, so every
// block, even an empty one, has a unique address.
size_t PlanBlockBytes(size_t bytes, size_t alignment);

// Places every interval. REQUIRES: alignment is a power of two; begin < end for every interval.
// Guarantees: for i != j with overlapping lifetimes, the byte ranges
// [offsets[i], offsets[i] + PlanBlockBytes(bytes_i)) do not intersect.
IntervalPlan PlanIntervals(std::span<const PlanInterval> intervals, size_t alignment);

// True when no two intervals that are live at the same time share a byte under `offsets` (the
// property PlanIntervals guarantees; for tests and debug checks).
bool PlanIsOverlapFree(std::span<const PlanInterval> intervals, std::span<const size_t> offsets,
                       size_t alignment);

// The largest sum of rounded block sizes live at one moment: a lower bound of every plan's arena.
size_t PlanLivePeakBytes(std::span<const PlanInterval> intervals, size_t alignment);

// One allocation seen while recording a run.
struct RecordedAllocation {
  static constexpr int64_t kNotFreed = INT64_MAX;
  size_t bytes = 0;
  size_t alignment = 0;
  int node = -1;   // the node whose Compute made it
  int value = -1;  // the graph value it became (an output of `node`), -1 for scratch
  int64_t alloc_tick = 0;
  int64_t free_tick = kNotFreed;  // kNotFreed: still live when the run ended
};

// The plan of one input-shape signature: per node, its allocations in the order it makes them,
// each with an arena offset. Nodes listed in `heap_nodes` allocate from the session's allocator
// directly (they made an allocation that outlived the run, such as a graph output).
struct MemoryPlan {
  static constexpr size_t kAlignment = 64;
  std::vector<RecordedAllocation> allocations;  // grouped by node, in allocation order
  std::vector<size_t> offsets;                  // one per allocation
  std::vector<int> node_begin;                  // allocations of node n: [node_begin[n], [n+1])
  std::vector<char> heap_nodes;                 // one per node: 1 = not planned
  size_t arena_bytes = 0;                       // the planned peak
  size_t unplanned_bytes = 0;                   // the sum of the planned allocations' sizes
  // The most bytes (blocks rounded to kAlignment) live at one moment: no plan can do better, so
  // arena_bytes / live_peak_bytes says how close to optimal the placement is.
  size_t live_peak_bytes = 0;
};

// Builds the plan of a recorded run of a graph with `num_nodes` nodes. Allocations of nodes in
// `heap_nodes` (num_nodes entries; the caller's static list, e.g. nodes producing graph outputs)
// and of nodes with an allocation still live at the end are left out, and those nodes are marked.
MemoryPlan BuildMemoryPlan(std::span<const RecordedAllocation> recorded, int num_nodes,
                           std::vector<char> heap_nodes);

}  // namespace kiln
