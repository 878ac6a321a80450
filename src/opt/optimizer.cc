// SPDX-License-Identifier: Apache-2.0
// The pass manager (optimizer.h): runs the passes of passes.inc in order, timed, each on a
// fresh GraphEditor over the previous pass's result, verifying the graph after each one, and
// repeats the pipeline until a round changes nothing or max_iterations rounds have run.

#include "opt/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "op/kiln_ops.h"
#include "opt/pass.h"

namespace kiln {
namespace {

constexpr PassInfo kPasses[] = {
#define KILN_OPT_PASS(name, factory, description) {#name, description},
#include "opt/passes.inc"
#undef KILN_OPT_PASS
};

using PassFactory = std::unique_ptr<opt::Pass> (*)();
constexpr PassFactory kFactories[] = {
#define KILN_OPT_PASS(name, factory, description) &opt::factory,
#include "opt/passes.inc"
#undef KILN_OPT_PASS
};

// The half type a model stores its weights in: FLOAT16 / BFLOAT16 when some Cast(to=FLOAT)
// reads an initializer of that type, or (a file `kiln optimize` wrote with half weights) an
// ai.kiln FusedConv / FusedMatMul / FusedGemm reads one as its weight; FLOAT16 when both types
// occur. FLOAT otherwise, and also when a Conv / MatMul / Gemm (or Fused form) reads a large FP32
// initializer as its weight: a model that stores only some weights in half keeps the others as
// they are, so auto never narrows a weight the model holds in FP32.
DataType StoredWeightType(const Graph& graph) {
  bool fp16 = false, bf16 = false;
  for (const Node& node : graph.nodes()) {
    const bool weight_op =
        node.has_input(1) &&
        ((node.domain.empty() &&
          (node.op_type == "Conv" || node.op_type == "MatMul" || node.op_type == "Gemm")) ||
         (node.domain == kKilnDomain &&
          (node.op_type == kFusedConvOp || node.op_type == kFusedMatMulOp ||
           node.op_type == kFusedGemmOp)));
    if (weight_op) {
      const Value& w = graph.value(node.inputs[1]);
      if (w.constant != nullptr && w.constant->dtype() == DataType::kFloat32 &&
          w.constant->num_elements() >= kHalfWeightMinElements) {
        return DataType::kFloat32;
      }
    }
    int weight = -1;
    if (node.domain.empty() && node.op_type == "Cast" && node.GetInt("to", 0) == 1 &&
        node.has_input(0)) {
      weight = node.inputs[0];
    } else if (node.domain == kKilnDomain && node.has_input(1) &&
               (node.op_type == kFusedConvOp || node.op_type == kFusedMatMulOp ||
                node.op_type == kFusedGemmOp)) {
      weight = node.inputs[1];
    }
    if (weight < 0) continue;
    const Value& v = graph.value(weight);
    if (v.constant == nullptr) continue;
    fp16 = fp16 || v.constant->dtype() == DataType::kFloat16;
    bf16 = bf16 || v.constant->dtype() == DataType::kBFloat16;
  }
  return fp16 ? DataType::kFloat16 : bf16 ? DataType::kBFloat16 : DataType::kFloat32;
}

// OptimizerOptions::weight_precision resolved to "fp32", "fp16" or "bf16".
Result<std::string> ResolveWeightPrecision(const Graph& graph, const std::string& requested) {
  if (requested == "fp32" || requested == "fp16" || requested == "bf16") return requested;
  if (!requested.empty()) {
    return Status::InvalidArgument(fmt::format(
        "weight precision '{}' is not one of \"\" (auto), fp32, fp16, bf16", requested));
  }
  switch (StoredWeightType(graph)) {
    case DataType::kFloat16:
      return std::string("fp16");
    case DataType::kBFloat16:
      return std::string("bf16");
    default:
      return std::string("fp32");
  }
}

}  // namespace

namespace opt {
void ImportKilnDomain(GraphEditor& ed) {
  ed.graph().opset_imports[std::string(kKilnDomain)] = kKilnOpsetVersion;
}
}  // namespace opt

std::span<const PassInfo> ListPasses() { return kPasses; }

Result<OptimizedGraph> OptimizeGraph(const std::shared_ptr<const Graph>& graph,
                                     const OptimizerOptions& options) {
  if (graph == nullptr) return Status::InvalidArgument("OptimizeGraph: null graph");
  for (const std::string& name : options.disabled_passes) {
    const bool known = std::any_of(std::begin(kPasses), std::end(kPasses),
                                   [&](const PassInfo& p) { return p.name == name; });
    if (!known) {
      std::vector<std::string_view> names;
      for (const PassInfo& p : kPasses) names.push_back(p.name);
      return Status::InvalidArgument(
          fmt::format("unknown optimizer pass '{}' (passes: {})", name, fmt::join(names, ", ")));
    }
  }
  KILN_RETURN_IF_ERROR(opt::VerifyGraph(*graph).WithContext("optimizer input"));
  // Passes see the resolved precision (auto looks at the input graph, before folding).
  OptimizerOptions resolved = options;
  KILN_ASSIGN_OR_RETURN(resolved.weight_precision,
                        ResolveWeightPrecision(*graph, options.weight_precision));
  OptimizedGraph result;
  result.weight_precision = resolved.weight_precision;
  result.nodes_before = graph->num_nodes();
  const size_t num_passes = std::size(kPasses);
  std::vector<std::unique_ptr<opt::Pass>> passes;
  for (size_t i = 0; i < num_passes; ++i) {
    PassReport r;
    r.name = std::string(kPasses[i].name);
    r.enabled = std::find(options.disabled_passes.begin(), options.disabled_passes.end(), r.name) ==
                options.disabled_passes.end();
    result.passes.push_back(std::move(r));
    passes.push_back(kFactories[i]());
  }
  // Runs the pipeline on `current` (a subgraph when `subgraph`), then on its subgraphs.
  std::function<Status(Graph&, bool)> optimize = [&](Graph& current, bool subgraph) -> Status {
    // Runs pass i once on `current`; returns its rewrites.
    const auto run_pass = [&](size_t i) -> Result<int> {
      PassReport& report = result.passes[i];
      const auto start = std::chrono::steady_clock::now();
      opt::GraphEditor ed(std::move(current), subgraph);
      Result<int> changes = passes[i]->Run(ed, resolved);
      if (!changes.ok()) {
        return changes.status().WithContext(fmt::format("optimizer pass '{}'", report.name));
      }
      Result<Graph> next = ed.Finish();
      const auto stop = std::chrono::steady_clock::now();
      if (!next.ok()) {
        return next.status().WithContext(fmt::format("after optimizer pass '{}'", report.name));
      }
      current = std::move(next).value();
      if (options.verify_each_pass) {
        KILN_RETURN_IF_ERROR(
            opt::VerifyGraph(current, subgraph)
                .WithContext(fmt::format("after optimizer pass '{}'", report.name)));
      }
      report.runs += 1;
      report.changes += *changes;
      report.time_ms += std::chrono::duration<double, std::milli>(stop - start).count();
      return *changes;
    };
    const int rounds = std::max(1, options.max_iterations);
    for (int round = 0; round < rounds; ++round) {
      int round_changes = 0;
      for (size_t i = 0; i < num_passes; ++i) {
        if (!result.passes[i].enabled || passes[i]->Final()) continue;
        KILN_ASSIGN_OR_RETURN(const int changes, run_pass(i));
        round_changes += changes;
      }
      if (!subgraph) result.rounds = round + 1;
      if (round_changes == 0) break;
    }
    for (size_t i = 0; i < num_passes; ++i) {
      if (result.passes[i].enabled && passes[i]->Final()) {
        KILN_RETURN_IF_ERROR(run_pass(i).status());
      }
    }
    // If / Loop / Scan bodies: the same pipeline (they run on Sessions like the main graph).
    for (int n = 0; n < current.num_nodes(); ++n) {
      for (Attribute& a : current.mutable_node(n).attributes) {
        if (a.type != AttributeType::kGraph || a.g == nullptr) continue;
        Graph body = *a.g;
        // A Loop body's inputs (the loop-carried values) may change shape between iterations,
        // whatever the body declares: the passes must not fold their dims.
        for (int in : body.inputs) {
          ValueType& t = body.mutable_value(in).type;
          for (Dim& d : t.dims) d = Dim{};
        }
        KILN_RETURN_IF_ERROR(opt::VerifyGraph(body, /*subgraph=*/true)
                                 .WithContext(fmt::format("subgraph '{}' of node '{}'", a.name,
                                                          current.node(n).name)));
        KILN_RETURN_IF_ERROR(optimize(body, true)
                                 .WithContext(fmt::format("subgraph '{}' of node '{}'", a.name,
                                                          current.node(n).name)));
        a.g = std::make_shared<const Graph>(std::move(body));
        ++result.subgraphs;
      }
    }
    return Status::OK();
  };
  Graph current = *graph;
  KILN_RETURN_IF_ERROR(optimize(current, false));
  result.nodes_after = current.num_nodes();
  result.graph = std::make_shared<const Graph>(std::move(current));
  return result;
}

std::string FormatPassReport(const OptimizedGraph& result) {
  std::string out = fmt::format("{:<34} {:>8} {:>10}\n", "pass", "changes", "time_ms");
  for (const PassReport& p : result.passes) {
    if (!p.enabled) {
      out += fmt::format("{:<34} {:>8} {:>10}\n", p.name, "-", "disabled");
      continue;
    }
    out += fmt::format("{:<34} {:>8} {:>10.3f}\n", p.name, p.changes, p.time_ms);
  }
  out += fmt::format("nodes: {} -> {} in {} round(s); weight precision {}", result.nodes_before,
                     result.nodes_after, result.rounds,
                     result.weight_precision.empty() ? "fp32" : result.weight_precision);
  if (result.subgraphs > 0) {
    out += fmt::format("; {} subgraph{} optimized too", result.subgraphs,
                       result.subgraphs == 1 ? "" : "s");
  }
  out += "\n";
  return out;
}

}  // namespace kiln
