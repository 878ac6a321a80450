// SPDX-License-Identifier: Apache-2.0
#pragma once
// Version adapter: rewrites a graph whose default-domain (ONNX) opset is below 7 into the
// equivalent opset 7 graph. kiln's kernels implement each operator from opset 7 on; models of
// older opsets (PyTorch's and Caffe2's early exporters wrote opsets 1-6) reach them through this
// pass, which the importer runs on every model right after building the IR.
//
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, AdaptToOpset7(std::move(imported)));
//   // g->OpsetFor("") >= 7 now; a graph already at opset 7 or later comes back unchanged.
//
// For each node of the default domain, libonnx's schema registry gives the operator version in
// force at the model's opset and at opset 7. When they differ, the adapter applies one step per
// schema version in between, modelled on ONNX's own version converter (whose PRelu 6 -> 7 step
// ignores the opset 6 operator's per-channel slope, which the step here keeps):
//
//   step                       ops (from version)                  rewrite
//   remove consumed_inputs     Abs Add BatchNormalization Ceil     drop the memory-reuse hint
//                              Clip Div Dropout Elu Exp Floor
//                              HardSigmoid InstanceNormalization
//                              LeakyRelu Log Max Mean Min Mul Neg
//                              PRelu Reciprocal Relu Selu Sigmoid
//                              Sqrt Sub Sum Tanh (1)
//   legacy broadcast           Add Sub Mul Div (6), Pow And Or Xor  drop `broadcast`/`axis`; with
//                              Equal Less Greater (1)              broadcast=1 and an axis other
//                                                                  than rank(A) - rank(B), give B
//                                                                  trailing 1-dims (a reshaped
//                                                                  initializer, or an Unsqueeze);
//                                                                  broadcast=0 with shapes known
//                                                                  to differ fails
//   Gemm broadcast             Gemm (6)                            drop `broadcast` (broadcast=0
//                                                                  with a C known not to be
//                                                                  [M, N] fails)
//   PRelu channel slope        PRelu (6)                           a 1-D slope of X's channel
//                                                                  count gets trailing 1-dims, so
//                                                                  it applies along dim 1
//   BatchNormalization is_test BatchNormalization (6)              drop is_test=1 (is_test=0,
//                                                                  training, fails)
//   Dropout is_test            Dropout (6)                         drop is_test (see .cc NOTE)
//   Cast type name             Cast (1)                            `to` "FLOAT" -> 1
//   Reshape shape input        Reshape (1)                         `shape` -> INT64 initializer
//                                                                  input (and consumed_inputs)
//   Concat default axis        Concat (1)                          absent `axis` -> axis=1
//   Pad paddings               Pad (1)                             rename `paddings` to `pads`
//   Split sizes attribute      Split (1)                           constant input 1 -> `split`
//   Tile repeats input         Tile (1)                            constant (tiles, axis) inputs
//                                                                  -> INT64 repeats initializer
//   Upsample scales            Upsample (1)                        width/height_scale -> scales
//                                                                  [1, 1, h, w]; bilinear -> linear
//   recurrent output_sequence  RNN LSTM (1), GRU (3)               drop `output_sequence`
//   LpPool integer p           LpPool GlobalLpPool (1)             FLOAT p -> INT p
//   attribute arrives          AveragePool (1) count_include_pad,  nothing to change (the new
//                              GRU (1) linear_before_reset         attribute's default is the old
//                                                                  meaning); refused if present
//   compatible                 Gemm (1)                            nothing to change
//
// Subgraphs (If/Loop/Scan bodies) are adapted the same way, and every adapted graph records
// opset 7 for the default domain. Other domains are left as they are. Ranks and dims that a step
// needs come from initializers, Constant nodes, and the declared or inferred value types.
//
// Errors name the op, the model's opset and the node: UNIMPLEMENTED for a node that has no opset 7
// equivalent or whose conversion needs what the model does not say ("op BatchNormalization
// (opset 6) cannot be converted to opset 7: is_test=0 (training mode) ... (node 'bn')");
// INVALID_ARGUMENT for malformed legacy attributes. Subgraph errors carry the owning node's
// attribute as context.
//
// Thread safety: pure functions; the input graph is only read.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"

namespace kiln {

// The default-domain opset that adapted graphs record.
inline constexpr int64_t kAdaptedOpset = 7;

// `graph` itself when it does not import the default domain below opset 7; otherwise a new
// graph (sharing the initializer data) in the opset 7 form described above.
Result<std::shared_ptr<Graph>> AdaptToOpset7(std::shared_ptr<Graph> graph);

// Every (op, schema version) the adapter has a step from, in table order: the inventory the
// tests check against libonnx's schema registry.
std::vector<std::pair<std::string, int>> VersionAdapterSteps();

}  // namespace kiln
