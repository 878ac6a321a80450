// SPDX-License-Identifier: Apache-2.0
#pragma once
// QDQ insertion: rewrites a FP32 graph into the QDQ form of docs/quantization.md ("The QDQ model
// contract"): QuantizeLinear -> DequantizeLinear pairs on the activations around every quantized
// Conv, MatMul and Gemm, INT8 weights behind DequantizeLinear, INT32 biases, everything else
// FP32. The result is standard ONNX that kiln and ONNX Runtime both run.
//
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> g, PrepareGraph(imported));
//   std::vector<QuantizableLayer> layers = FindQuantizableLayers(*g);
//   std::vector<int> to_observe = ActivationsToCalibrate(*g, layers);
//   ... calibrate them (calibration.h) into `params` (value id -> ActivationParams) ...
//   KILN_ASSIGN_OR_RETURN(QdqResult q, InsertQdq(*g, layers, quantize, params, options));
//
// Which layers: Conv with a constant weight; Gemm with a constant 2-D B; MatMul with a constant
// 2-D B (a weight) or with two computed inputs (both quantized as activations). A layer's
// "output point" is its output, or the output of a Relu / Clip that alone reads it; it gets a
// QDQ pair too unless it is a graph output (the model's outputs stay FP32). An Add whose two
// inputs are quantized tensors gets a QDQ pair on its own output point (a residual join).
// A tensor gets one QDQ pair however many layers read it, and every reader reads its dequantized
// value.
//
// Thread safety: pure functions over their arguments.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "quant/qparams.h"

namespace kiln::quant {

struct QuantizableLayer {
  int node = -1;                       // node id in the graph it was found in
  std::string name;                    // the node's name, or "<op_type>_<id>"
  std::string op_type;                 // Conv / Gemm / MatMul
  std::vector<int> activation_inputs;  // value ids quantized as activations
  int weight_input = -1;               // input index of the constant weight, or -1
  int64_t weight_axis = 0;             // the weight's output-channel axis
  int bias_input = -1;                 // input index of a 1-D FP32 bias quantized to INT32, or -1
  int output_point = -1;               // value id of the output QDQ, or -1
};

// The passes of kiln's optimizer that preserve numerics and keep standard ONNX (constant and
// shape folding, cleanups, Conv+BatchNormalization folding): PrepareGraph runs only these.
std::vector<std::string> PreparePasses();

// Runs the optimizer with every pass but PreparePasses() disabled, so BatchNormalization is folded
// into Conv weights before they are quantized and no ai.kiln fused op appears.
Result<std::shared_ptr<const Graph>> PrepareGraph(const std::shared_ptr<const Graph>& graph);

std::vector<QuantizableLayer> FindQuantizableLayers(const Graph& graph);

// Every FP32 activation a QDQ pair may land on when all `layers` are quantized (activation
// inputs, output points, residual Add output points), in graph order. Calibrate these.
std::vector<int> ActivationsToCalibrate(const Graph& graph,
                                        const std::vector<QuantizableLayer>& layers);

// Gives an activation that only moves or selects the values of another calibrated activation
// (through chains of MaxPool, Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Identity) that
// activation's parameters, as ONNX Runtime's quantizer does: the
// values keep their range, and the engine can keep the tensor INT8 across those ops without
// requantizing. Returns how many activations were changed.
int ShareScalesThroughDataMovement(const Graph& graph, std::map<int, ActivationParams>& params);

struct QdqOptions {
  bool per_channel = false;         // weights per output channel (else per tensor)
  int weight_max = kWeightMax8Bit;  // weights in [-weight_max, weight_max] (qparams.h)
  bool quantize_bias = true;        // INT32 biases (else the FP32 bias stays)
};

// What InsertQdq did to one layer (for the report).
struct LayerQuantization {
  bool quantized = false;
  ActivationParams input;  // of activation_inputs[0]
  bool has_output = false;
  ActivationParams output;     // of the output point
  float weight_scale_min = 0;  // over the weight's scales
  float weight_scale_max = 0;
  int weight_channels = 0;  // number of weight scales
};

struct QdqResult {
  std::shared_ptr<Graph> graph;
  std::vector<LayerQuantization> layers;  // parallel to the `layers` argument
  int qdq_pairs = 0;                      // activation QuantizeLinear/DequantizeLinear pairs
};

// Quantizes the layers with quantize[i] true (a vector parallel to `layers`), taking the
// activation parameters from `params` (value id in `graph` -> parameters; every activation a
// quantized layer needs must be there: INVALID_ARGUMENT naming it otherwise). The graph must be
// the one the layers were found in. Errors: FAILED_PRECONDITION for a default-domain opset below
// 10 (below 13 with per-channel weights), which has no QuantizeLinear of that form.
Result<QdqResult> InsertQdq(const Graph& graph, const std::vector<QuantizableLayer>& layers,
                            const std::vector<bool>& quantize,
                            const std::map<int, ActivationParams>& params,
                            const QdqOptions& options);

}  // namespace kiln::quant
