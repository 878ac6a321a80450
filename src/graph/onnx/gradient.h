// SPDX-License-Identifier: Apache-2.0
#pragma once
// Gradient expansion: replaces each `Gradient` node (domain ai.onnx.preview.training, opset 1)
// by ordinary ONNX nodes that compute its outputs, so the runtime needs no training kernels.
// The importer runs this pass on every model right after the version adapter.
//
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, ExpandGradients(std::move(adapted)));
//   // g has no Gradient node left; a graph without one comes back unchanged.
//
// A Gradient node names `xs` (values to differentiate with respect to), `y` (the value
// differentiated) and optionally `zs` (treated as constants). Output i is d(sum(y))/d(xs[i]):
// reverse-mode differentiation over the forward nodes on a path from an x to y, seeded with
// ones of y's shape. Gradients of values with several consumers are summed, and gradients of
// broadcast operands are reduced back to the operand's shape (which must then be statically
// known). An x that y does not depend on gets zeros of its own shape.
//
// Ops with gradient rules: Add Sub Mul Div Neg Identity MatMul (operands of rank >= 2) Relu
// Sigmoid Tanh Exp Log Sqrt Pow (exponent not depending on xs) ReduceSum ReduceMean Reshape
// Transpose. Shape and Size carry no gradient.
//
// Errors: INVALID_ARGUMENT for a malformed Gradient node (xs/y naming no value of the graph, an
// output count other than the number of xs, a y that depends on no x, a y that depends on the
// node's own outputs, declared shapes that contradict each other); UNIMPLEMENTED for an op on the
// path without a gradient rule ("Gradient: op Erf on the path from 'a' to 'd' has no gradient rule
// (node 'e')"), a non-floating y or x, broadcasting between shapes that are not statically known,
// or a default-domain opset below 8. Gradient nodes inside subgraphs are not expanded (the kernel
// lookup then reports them).
//
// Thread safety: a pure function; the input graph is only read.

#include <memory>

#include "base/result.h"
#include "graph/ir.h"

namespace kiln {

inline constexpr char kTrainingDomain[] = "ai.onnx.preview.training";

// `graph` itself when it has no top-level Gradient node; otherwise a new graph (sharing the
// initializer data) in which every Gradient node is replaced as described above.
Result<std::shared_ptr<Graph>> ExpandGradients(std::shared_ptr<Graph> graph);

}  // namespace kiln
