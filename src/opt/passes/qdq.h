// SPDX-License-Identifier: Apache-2.0
#pragma once
// What constant folding must leave to qdq_fusion (src/opt/passes/qdq.cc). Internal to src/opt.

#include "opt/graph_editor.h"

namespace kiln::opt {

// True for a DequantizeLinear of a constant INT8 weight or INT32 bias that feeds a Conv, MatMul
// or Gemm whose activation input is itself dequantized: qdq_fusion turns that op into an INT8
// kernel reading the constant as it is, so folding the DequantizeLinear into an FP32 constant
// would only hide the pattern (and keep both copies of the weights).
bool IsQuantizedOperandDequantize(const GraphEditor& ed, int node);

}  // namespace kiln::opt
