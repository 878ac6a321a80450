// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's graph optimizer: an ordered pipeline of named passes (passes.inc) that rewrites a graph
// into one that computes the same outputs faster: constant and shape folding, dead-code and
// common-subexpression elimination, no-op removal, Conv+BatchNormalization folding, and fusions
// into kiln's own operators (op/kiln_ops.h, domain ai.kiln).
//
//   OptimizerOptions options;
//   options.disabled_passes = {"attention_fusion"};
//   options.target = KernelTargetFor(DeviceType::kCpu);  // the kernels it will run on
//   KILN_ASSIGN_OR_RETURN(OptimizedGraph opt, OptimizeGraph(graph, options));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Create(opt.graph));
//   fmt::print("{}", FormatPassReport(opt));
//
// The input graph is not modified (the optimizer works on a copy). Every pass may be switched
// off by name, is timed, and is followed by a structural check of the graph (VerifyGraph: ids,
// topological order, every input defined); the pipeline repeats until a round changes nothing,
// at most `max_iterations` rounds. Graphs with symbolic dims (an unknown batch) are fine: only
// what is static in the declared types is folded, and fusions that need a shape fact they
// cannot prove are skipped. Subgraphs (If/Loop/Scan bodies) are left as they are.
//
// Thread safety: OptimizeGraph may be called from any thread; it shares nothing.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "kernels/target.h"

namespace kiln {

// Weights with fewer elements stay FP32 under a half weight precision: they save little, and
// biases, scales and small projections are where half precision costs accuracy first.
inline constexpr int64_t kHalfWeightMinElements = 1024;

struct OptimizerOptions {
  // Pass names (ListPasses) not to run; an unknown name is INVALID_ARGUMENT.
  std::vector<std::string> disabled_passes;
  // Rounds of the whole pipeline at most (a fixpoint bound).
  int max_iterations = 4;
  // Constant folding keeps a result only when it is at most this many bytes or no larger than
  // the node's constant inputs together (so folding never inflates the model much).
  int64_t fold_max_bytes = int64_t{1} << 20;
  // Check the graph after every pass (cheap: linear in the graph).
  bool verify_each_pass = true;
  // How the constant weights of Conv / MatMul / Gemm (and their fused forms) are held after
  // optimization: "" (auto: in FLOAT16 / BFLOAT16 when the model stores them so, as a Cast of a
  // half-precision initializer, and holds none of at least kHalfWeightMinElements elements in
  // FP32; else FP32), "fp32", "fp16" or "bf16"; anything else is
  // INVALID_ARGUMENT. Half weights halve the memory they take; the kernels expand them to FP32
  // as they use them and compute in FP32 (docs/quantization.md).
  std::string weight_precision;
  // The kernels the graph will run on (kernels/target.h), for the passes that depend on them
  // (layout_selection uses target.channel_block). The optimizer asks no backend itself: the
  // caller passes KernelTargetFor(device). The default, channel_block 0, selects no blocked
  // layout.
  KernelTarget target;
};

struct PassInfo {
  std::string_view name;
  std::string_view description;
};

// What one pass did over all rounds.
struct PassReport {
  std::string name;
  bool enabled = true;
  int changes = 0;     // rewrites made (nodes folded, removed or fused)
  int runs = 0;        // rounds it ran in
  double time_ms = 0;  // total time, verification excluded
};

struct OptimizedGraph {
  std::shared_ptr<const Graph> graph;
  std::vector<PassReport> passes;  // pipeline order
  int rounds = 0;
  int nodes_before = 0;
  int nodes_after = 0;  // of the top-level graph
  int subgraphs = 0;    // If / Loop / Scan bodies optimized (nested ones included)
  // OptimizerOptions::weight_precision as resolved: "fp32", "fp16" or "bf16".
  std::string weight_precision;
};

// Every pass in pipeline order.
std::span<const PassInfo> ListPasses();

// Optimizes `graph` (a top-level graph that passes VerifyGraph). Errors: INVALID_ARGUMENT for
// an unknown pass name, an unknown weight precision or a null graph; INTERNAL when a pass breaks
// the graph (a bug; the message names the pass).
Result<OptimizedGraph> OptimizeGraph(const std::shared_ptr<const Graph>& graph,
                                     const OptimizerOptions& options = {});

// A text table: pass, changes, time; then a line with the node counts.
std::string FormatPassReport(const OptimizedGraph& result);

}  // namespace kiln
