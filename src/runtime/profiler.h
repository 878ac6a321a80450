// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per-node timing of session runs, and its aggregation over many runs. Off by default: a run
// without a RunProfile pays one branch per node. `kiln profile` (tools/kiln/profile_command.cc)
// summarizes the runs with SummarizeRuns and prints the summary as a table, JSON and a Chrome
// trace (tools/kiln/profile_writers.h).
//
//   std::vector<RunProfile> runs(100);
//   for (RunProfile& profile : runs) {
//     KILN_ASSIGN_OR_RETURN(auto outs, session->RunWithProfile(inputs, &profile));
//   }
//   RunsSummary summary = SummarizeRuns(session->graph(), runs);
//   for (const NodeSummary& n : summary.nodes) ...   // most total time first
//
// Thread safety: a RunProfile belongs to one run; the functions are pure.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "graph/ir.h"
#include "tensor/tensor.h"

namespace kiln {

struct NodeTiming {
  int node = -1;
  int64_t start_ns = 0;     // steady clock
  int64_t duration_ns = 0;  // Compute() of the node
  double flops = 0;         // floating-point operations of this call, 0 when not counted
  // Where the node ran ("cpu", "cuda:0", ...). On a device with timestamps (CUDA), duration_ns is
  // the device's time between events recorded around the node's work, not Compute()'s.
  Device device;
  bool device_timed = false;
};

struct RunProfile {
  int64_t start_ns = 0;  // steady clock, around the whole run (input checks included)
  int64_t end_ns = 0;
  int threads = 0;                // the run's width (intra-op threads)
  std::vector<NodeTiming> nodes;  // appended in execution order
  // Device events around nodes (index into `nodes`, start, end), resolved into the timings
  // once the run's work is done.
  struct DeviceSpan {
    size_t timing = 0;
    std::shared_ptr<Event> start, end;
  };
  std::vector<DeviceSpan> device_spans;
};

// The steady clock in nanoseconds, the time base of RunProfile.
int64_t ProfileNowNs();

// Floating-point operations (a multiply-add counts 2) of one call of `node` on `inputs` producing
// `outputs`, for the ops that have a count: Conv, ConvTranspose, MatMul, Gemm and ai.kiln
// FusedConv, FusedGemm, FusedMatMul, Attention. 0 for other ops or when a shape is missing.
double NodeFlops(const Node& node, std::span<const Tensor> inputs,
                 std::span<const OwnedTensor> outputs);

// One node's calls summed over runs.
struct NodeSummary {
  int node = -1;  // index in the graph
  int64_t calls = 0;
  int64_t total_ns = 0;
  double flops = 0;  // summed over the calls
};

// The nodes of one op type summed over runs.
struct OpTypeSummary {
  std::string op_type;
  int64_t nodes = 0;  // distinct nodes of this type that ran
  int64_t calls = 0;
  int64_t total_ns = 0;
  double flops = 0;
};

// What SummarizeRuns computes from the RunProfiles of several runs of one session.
struct RunsSummary {
  int64_t runs = 0;
  // Whole-run latency (RunProfile start to end) in milliseconds: nearest-rank median and p99,
  // mean, min, max and the sum over the runs. All 0 without runs.
  double median_ms = 0;
  double p99_ms = 0;
  double mean_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double total_ms = 0;
  double runs_per_s = 0;      // runs / total_ms (0 when total_ms is 0)
  int64_t node_total_ns = 0;  // the time of every node call
  double flops = 0;           // the counted FLOPs of every node call
  // The nodes called at least once, most total time first (ties in graph order).
  std::vector<NodeSummary> nodes;
  // The same summed per op type, most total time first (ties in order of first appearance in
  // `nodes`).
  std::vector<OpTypeSummary> op_types;

  // `ns` as a percentage of node_total_ns (0 when that is 0).
  double PercentOfNodeTime(int64_t ns) const;
};

// REQUIRES: every NodeTiming::node of `runs` is a node index of `graph`.
RunsSummary SummarizeRuns(const Graph& graph, std::span<const RunProfile> runs);

// The nearest-rank percentile `p` (0..100] of ascending `sorted` values: the value at rank
// ceil(p / 100 * n), clamped to [1, n]. 0 for no values.
double NearestRankPercentile(std::span<const double> sorted, double p);

// `flops` done in `ns` nanoseconds as GFLOP/s (FLOPs per nanosecond); 0 when ns <= 0.
double GflopsPerSecond(double flops, int64_t ns);

}  // namespace kiln
