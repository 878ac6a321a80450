// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per-node timing of session runs. Off by default: a run without a RunProfile pays one branch per
// node. `kiln profile` (tools/kiln/profile_command.cc) aggregates these into its table and
// Chrome trace.
//
//   RunProfile profile;
//   KILN_ASSIGN_OR_RETURN(auto outs, session->RunWithProfile(inputs, &profile));
//   for (const NodeTiming& t : profile.nodes) ...   // in execution order
//
// Thread safety: a RunProfile belongs to one run; NodeFlops is pure.

#include <cstdint>
#include <span>
#include <vector>

#include "graph/ir.h"
#include "tensor/tensor.h"

namespace kiln {

struct NodeTiming {
  int node = -1;
  int64_t start_ns = 0;     // steady clock
  int64_t duration_ns = 0;  // Compute() of the node
  double flops = 0;         // floating-point operations of this call, 0 when not counted
};

struct RunProfile {
  int64_t start_ns = 0;  // steady clock, around the whole run (input checks included)
  int64_t end_ns = 0;
  std::vector<NodeTiming> nodes;  // appended in execution order
};

// The steady clock in nanoseconds, the time base of RunProfile.
int64_t ProfileNowNs();

// Floating-point operations (a multiply-add counts 2) of one call of `node` on `inputs` producing
// `outputs`, for the ops that have a count: Conv, ConvTranspose, MatMul, Gemm and ai.kiln
// FusedConv, FusedGemm, FusedMatMul, Attention. 0 for other ops or when a shape is missing.
double NodeFlops(const Node& node, std::span<const Tensor> inputs,
                 std::span<const OwnedTensor> outputs);

}  // namespace kiln
