// SPDX-License-Identifier: Apache-2.0
#pragma once
// Control-flow operators (If, Loop, Scan, SequenceMap): kernels that run subgraphs. They live in
// the runtime, not in kernels/, because each builds nested Sessions for its branches or body at
// load time. Session::Create routes these ops here instead of the kernel registry.
//
// Subgraphs read values of the enclosing graph through the node's implicit inputs
// (Node::implicit_inputs, fed after the explicit inputs), matched by name to the subgraph's
// captured values (Graph::Captures).

#include <memory>

#include "base/result.h"
#include "graph/ir.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln {

struct SessionOptions;
struct MemoryPlanStats;

// True for the ONNX-domain ops If, Loop, Scan and SequenceMap.
bool IsControlFlowOp(const Node& node);

// Builds the kernel of `node` (a node of `graph`, described by `info`), including nested
// sessions for every subgraph attribute; the node's implicit inputs are matched to the
// subgraphs' captured values. Errors name the subgraph (e.g. an unsupported op inside a Loop
// body).
Result<std::unique_ptr<Kernel>> CreateControlFlowKernel(const Graph& graph, const Node& node,
                                                        const KernelInfo& info,
                                                        const SessionOptions& options);

// The KernelDef reported for control-flow nodes (provider "runtime").
const KernelDef& ControlFlowKernelDef();

// Adds the memory-plan run counters of `kernel`'s subgraph sessions (nested ones included) to
// `stats`' subgraph_* counters; nothing for a kernel that is not a control-flow kernel.
void AddSubgraphPlanStats(const Kernel& kernel, MemoryPlanStats& stats);

}  // namespace kiln
