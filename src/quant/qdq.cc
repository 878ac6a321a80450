// SPDX-License-Identifier: Apache-2.0
// QDQ insertion (qdq.h).
//
// NOTE on the rewrite: the quantized graph is built as a copy of the FP32 graph in which every
// node keeps its place; the QuantizeLinear -> DequantizeLinear pair of a tensor follows the node
// that produces it (or opens the graph, for a graph input), and the DequantizeLinear of a weight
// or bias comes right before the layer that reads it, so the node order stays topological. Later
// readers of a quantized tensor read the DequantizeLinear's output. The FP32 weights nothing
// reads any more are dropped by GraphEditor::Finish, which also verifies the result.

#include "quant/qdq.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "opt/graph_editor.h"
#include "opt/optimizer.h"

namespace kiln::quant {
namespace {

bool IsFloat(const Graph& g, int v) {
  return v != kNoValue && g.value(v).type.dtype == DataType::kFloat32;
}

bool IsFloatActivation(const Graph& g, int v) { return IsFloat(g, v) && !g.value(v).is_constant(); }

const OwnedTensor* FloatConstant(const Graph& g, int v) {
  if (v == kNoValue || !g.value(v).is_constant()) return nullptr;
  const OwnedTensor* t = g.value(v).constant.get();
  return t->dtype() == DataType::kFloat32 ? t : nullptr;
}

bool IsGraphOutput(const Graph& g, int v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

// Number of live readers of every value (a node reading it twice counts once).
std::vector<std::vector<int>> Readers(const Graph& g) {
  std::vector<std::vector<int>> readers(static_cast<size_t>(g.num_values()));
  for (int n = 0; n < g.num_nodes(); ++n) {
    std::set<int> seen;
    for (int in : g.node(n).inputs) {
      if (in != kNoValue && seen.insert(in).second) readers[static_cast<size_t>(in)].push_back(n);
    }
  }
  return readers;
}

// The tensor after `v`'s lone Relu / Clip reader, or `v`; -1 when that is a graph output.
int OutputPoint(const Graph& g, const std::vector<std::vector<int>>& readers, int v) {
  if (!IsFloat(g, v)) return -1;
  const std::vector<int>& r = readers[static_cast<size_t>(v)];
  if (!IsGraphOutput(g, v) && r.size() == 1) {
    const Node& next = g.node(r[0]);
    if (next.domain.empty() && (next.op_type == "Relu" || next.op_type == "Clip") &&
        next.inputs[0] == v) {
      v = next.outputs[0];
    }
  }
  return IsGraphOutput(g, v) ? -1 : v;
}

// Extends `quantized` (value ids) with the output points of Adds whose two inputs are in it, in
// graph order.
void AddResidualJoins(const Graph& g, const std::vector<std::vector<int>>& readers,
                      std::set<int>& quantized) {
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    if (!node.domain.empty() || node.op_type != "Add" || node.inputs.size() != 2) continue;
    if (quantized.count(node.inputs[0]) == 0 || quantized.count(node.inputs[1]) == 0) continue;
    const int point = OutputPoint(g, readers, node.outputs[0]);
    if (point >= 0) quantized.insert(point);
  }
}

std::set<int> QuantizedActivations(const Graph& g, const std::vector<QuantizableLayer>& layers,
                                   const std::vector<bool>& quantize) {
  std::set<int> q;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!quantize[i]) continue;
    for (int v : layers[i].activation_inputs) q.insert(v);
    if (layers[i].output_point >= 0) q.insert(layers[i].output_point);
  }
  AddResidualJoins(g, Readers(g), q);
  return q;
}

OwnedTensor ScalarOrVector(DataType dtype, const std::vector<float>& values, bool vector) {
  Shape shape = vector ? Shape{static_cast<int64_t>(values.size())} : Shape{};
  OwnedTensor t = OwnedTensor::Allocate(dtype, shape).value();
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.num_elements()); ++i) {
    switch (dtype) {
      case DataType::kFloat32:
        t.data<float>()[i] = values[i];
        break;
      case DataType::kUint8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(values[i]);
        break;
      case DataType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(values[i]);
        break;
      case DataType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
        break;
      default:
        KILN_CHECK(false, "unexpected dtype");
    }
  }
  return t;
}

// Builds the quantized copy of a graph.
class QdqBuilder {
 public:
  explicit QdqBuilder(const Graph& g) {
    out_.name = g.name;
    out_.opset_imports = g.opset_imports;
    out_.ir_version = g.ir_version;
    for (const Value& v : g.values()) {
      Value c = v;
      c.producer = -1;
      out_.AddValue(std::move(c));
    }
  }

  Graph& graph() { return out_; }

  std::string UniqueName(const std::string& base) {
    std::string name = base;
    for (int k = 1; out_.FindValue(name) >= 0; ++k) name = fmt::format("{}_{}", base, k);
    return name;
  }

  int AddConstant(const std::string& base, OwnedTensor t) {
    Value v;
    v.name = UniqueName(base);
    v.type.dtype = t.dtype();
    v.type.has_shape = true;
    for (int64_t d : t.shape().dims()) v.type.dims.push_back(Dim{d, {}});
    v.constant = std::make_shared<const OwnedTensor>(std::move(t));
    return out_.AddValue(std::move(v));
  }

  int AddValue(const std::string& base, ValueType type) {
    Value v;
    v.name = UniqueName(base);
    v.type = std::move(type);
    return out_.AddValue(std::move(v));
  }

  void AddNode(std::string name, std::string op, std::vector<int> inputs, int output,
               std::vector<Attribute> attrs = {}) {
    Node n;
    n.name = std::move(name);
    n.op_type = std::move(op);
    n.inputs = std::move(inputs);
    n.outputs = {output};
    n.attributes = std::move(attrs);
    out_.AddNode(std::move(n));
  }

  // Q -> DQ after activation `v`; later readers read the DQ output.
  void EmitActivationQdq(int v, const ActivationParams& p) {
    const Value src = out_.value(v);
    const bool u8 = p.type == ActivationType::kUint8;
    const int s =
        AddConstant(src.name + "_scale", ScalarOrVector(DataType::kFloat32, {p.scale}, false));
    const int zp = AddConstant(src.name + "_zero_point",
                               ScalarOrVector(u8 ? DataType::kUint8 : DataType::kInt8,
                                              {static_cast<float>(p.zero_point)}, false));
    ValueType qt = src.type;
    qt.dtype = u8 ? DataType::kUint8 : DataType::kInt8;
    const int q = AddValue(src.name + "_quantized", qt);
    const int dq = AddValue(src.name + "_dequantized", src.type);
    AddNode(src.name + "_QuantizeLinear", "QuantizeLinear", {v, s, zp}, q);
    AddNode(src.name + "_DequantizeLinear", "DequantizeLinear", {q, s, zp}, dq);
    remap_[v] = dq;
    ++pairs_;
  }

  int Remapped(int v) const {
    auto it = remap_.find(v);
    return it == remap_.end() ? v : it->second;
  }

  int pairs() const { return pairs_; }

 private:
  Graph out_;
  std::map<int, int> remap_;
  int pairs_ = 0;
};

}  // namespace

int ShareScalesThroughDataMovement(const Graph& graph, std::map<int, ActivationParams>& params) {
  static const std::set<std::string> kMoves = {"MaxPool", "Flatten",   "Reshape", "Transpose",
                                               "Squeeze", "Unsqueeze", "Identity"};
  int changed = 0;
  for (auto& [v, p] : params) {
    int src = v;
    for (int steps = 0; steps < 64; ++steps) {
      const int producer = graph.value(src).producer;
      if (producer < 0) break;
      const Node& n = graph.node(producer);
      // One output only (MaxPool's Indices would be read as values otherwise).
      const auto outputs =
          std::count_if(n.outputs.begin(), n.outputs.end(), [](int o) { return o != kNoValue; });
      if (!n.domain.empty() || kMoves.count(n.op_type) == 0 || n.inputs.empty() || outputs != 1 ||
          n.outputs[0] != src) {
        break;
      }
      src = n.inputs[0];
      if (src != v && params.count(src) != 0) break;
    }
    if (src != v && params.count(src) != 0) {
      p = params.at(src);
      ++changed;
    }
  }
  return changed;
}

std::vector<std::string> PreparePasses() {
  return {"type_propagation",
          "shape_folding",
          "constant_folding",
          "identity_elimination",
          "common_subexpression_elimination",
          "dead_code_elimination",
          "conv_bn_folding"};
}

Result<std::shared_ptr<const Graph>> PrepareGraph(const std::shared_ptr<const Graph>& graph) {
  const std::vector<std::string> keep = PreparePasses();
  OptimizerOptions options;
  for (const PassInfo& p : ListPasses()) {
    if (std::find(keep.begin(), keep.end(), p.name) == keep.end()) {
      options.disabled_passes.emplace_back(p.name);
    }
  }
  KILN_ASSIGN_OR_RETURN(OptimizedGraph result, OptimizeGraph(graph, options));
  return result.graph;
}

std::vector<QuantizableLayer> FindQuantizableLayers(const Graph& g) {
  const std::vector<std::vector<int>> readers = Readers(g);
  std::vector<QuantizableLayer> layers;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    if (!node.domain.empty() || node.outputs.empty()) continue;
    QuantizableLayer layer;
    layer.node = n;
    layer.op_type = node.op_type;
    layer.name = node.name.empty() ? fmt::format("{}_{}", node.op_type, n) : node.name;
    const int x = node.inputs.empty() ? kNoValue : node.inputs[0];
    if (!IsFloatActivation(g, x)) continue;
    if (node.op_type == "Conv") {
      const OwnedTensor* w = node.has_input(1) ? FloatConstant(g, node.inputs[1]) : nullptr;
      if (w == nullptr || w->shape().rank() < 3) continue;
      layer.activation_inputs = {x};
      layer.weight_input = 1;
      layer.weight_axis = 0;
      const OwnedTensor* b = node.has_input(2) ? FloatConstant(g, node.inputs[2]) : nullptr;
      if (b != nullptr && b->shape().rank() == 1 && b->shape().dim(0) == w->shape().dim(0)) {
        layer.bias_input = 2;
      }
    } else if (node.op_type == "Gemm") {
      const OwnedTensor* w = node.has_input(1) ? FloatConstant(g, node.inputs[1]) : nullptr;
      if (w == nullptr || w->shape().rank() != 2) continue;
      const bool trans_b = node.GetInt("transB", 0) != 0;
      layer.activation_inputs = {x};
      layer.weight_input = 1;
      layer.weight_axis = trans_b ? 0 : 1;
      const int64_t n_out = w->shape().dim(trans_b ? 0 : 1);
      const OwnedTensor* b = node.has_input(2) ? FloatConstant(g, node.inputs[2]) : nullptr;
      if (b != nullptr && b->shape().rank() == 1 && b->shape().dim(0) == n_out &&
          node.GetFloat("alpha", 1.0f) == 1.0f && node.GetFloat("beta", 1.0f) == 1.0f) {
        layer.bias_input = 2;
      }
    } else if (node.op_type == "MatMul") {
      const int b = node.has_input(1) ? node.inputs[1] : kNoValue;
      const OwnedTensor* w = FloatConstant(g, b);
      if (w != nullptr) {
        if (w->shape().rank() != 2) continue;
        layer.activation_inputs = {x};
        layer.weight_input = 1;
        layer.weight_axis = 1;
      } else if (IsFloatActivation(g, b)) {
        layer.activation_inputs = {x};
        if (b != x) layer.activation_inputs.push_back(b);
      } else {
        continue;
      }
    } else {
      continue;
    }
    layer.output_point = OutputPoint(g, readers, node.outputs[0]);
    layers.push_back(std::move(layer));
  }
  return layers;
}

std::vector<int> ActivationsToCalibrate(const Graph& graph,
                                        const std::vector<QuantizableLayer>& layers) {
  const std::set<int> all =
      QuantizedActivations(graph, layers, std::vector<bool>(layers.size(), true));
  return std::vector<int>(all.begin(), all.end());
}

Result<QdqResult> InsertQdq(const Graph& graph, const std::vector<QuantizableLayer>& layers,
                            const std::vector<bool>& quantize,
                            const std::map<int, ActivationParams>& params,
                            const QdqOptions& options) {
  KILN_CHECK(quantize.size() == layers.size(), "quantize must parallel layers");
  const int64_t opset = graph.OpsetFor("");
  if (opset < 10) {
    return Status::FailedPrecondition(
        fmt::format("the model's ONNX opset is {}; QuantizeLinear needs opset 10 or later", opset));
  }
  if (options.per_channel && opset < 13) {
    return Status::FailedPrecondition(fmt::format(
        "the model's ONNX opset is {}; per-channel weights need opset 13 or later (quantize per "
        "tensor, without --per-channel, or re-export the model at opset 13)",
        opset));
  }
  const std::set<int> activations = QuantizedActivations(graph, layers, quantize);
  for (int v : activations) {
    if (params.count(v) == 0) {
      return Status::InvalidArgument(
          fmt::format("no calibration range for activation '{}'", graph.value(v).name));
    }
  }
  std::map<int, size_t> layer_of_node;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (quantize[i]) layer_of_node[layers[i].node] = i;
  }

  QdqResult result;
  result.layers.resize(layers.size());
  QdqBuilder b(graph);
  for (int v : graph.inputs) {
    if (activations.count(v) != 0) b.EmitActivationQdq(v, params.at(v));
  }
  for (int n = 0; n < graph.num_nodes(); ++n) {
    Node node = graph.node(n);
    for (int& in : node.inputs) {
      if (in != kNoValue) in = b.Remapped(in);
    }
    auto it = layer_of_node.find(n);
    if (it != layer_of_node.end()) {
      const QuantizableLayer& layer = layers[it->second];
      LayerQuantization& info = result.layers[it->second];
      info.quantized = true;
      info.input = params.at(layer.activation_inputs[0]);
      if (layer.output_point >= 0) {
        info.has_output = true;
        info.output = params.at(layer.output_point);
      }
      if (layer.weight_input >= 0) {
        const int w_id = graph.node(n).inputs[static_cast<size_t>(layer.weight_input)];
        const Value& w = graph.value(w_id);
        KILN_ASSIGN_OR_RETURN(QuantizedWeight qw,
                              QuantizeWeight(w.constant->view(), layer.weight_axis,
                                             options.per_channel, options.weight_max));
        const bool vec = options.per_channel;
        info.weight_channels = static_cast<int>(qw.scales.size());
        info.weight_scale_min = *std::min_element(qw.scales.begin(), qw.scales.end());
        info.weight_scale_max = *std::max_element(qw.scales.begin(), qw.scales.end());
        const int wq = b.AddConstant(w.name + "_quantized", std::move(qw.values));
        const int ws =
            b.AddConstant(w.name + "_scale", ScalarOrVector(DataType::kFloat32, qw.scales, vec));
        const int wz = b.AddConstant(
            w.name + "_zero_point",
            ScalarOrVector(DataType::kInt8, std::vector<float>(qw.scales.size(), 0.0f), vec));
        const int wdq = b.AddValue(w.name + "_dequantized", w.type);
        std::vector<Attribute> attrs;
        if (vec) attrs.push_back(Attribute::Int("axis", layer.weight_axis));
        b.AddNode(w.name + "_DequantizeLinear_" + layer.name, "DequantizeLinear", {wq, ws, wz}, wdq,
                  std::move(attrs));
        node.inputs[static_cast<size_t>(layer.weight_input)] = wdq;

        if (layer.bias_input >= 0 && options.quantize_bias) {
          const int b_id = graph.node(n).inputs[static_cast<size_t>(layer.bias_input)];
          const Value& bias = graph.value(b_id);
          KILN_ASSIGN_OR_RETURN(OwnedTensor bq,
                                QuantizeBias(bias.constant->view(), info.input.scale, qw.scales));
          std::vector<float> bias_scales;
          for (float s : qw.scales) bias_scales.push_back(info.input.scale * s);
          const int bqv = b.AddConstant(bias.name + "_quantized", std::move(bq));
          const int bs = b.AddConstant(bias.name + "_scale",
                                       ScalarOrVector(DataType::kFloat32, bias_scales, vec));
          const int bz = b.AddConstant(
              bias.name + "_zero_point",
              ScalarOrVector(DataType::kInt32, std::vector<float>(bias_scales.size(), 0.0f), vec));
          const int bdq = b.AddValue(bias.name + "_dequantized", bias.type);
          std::vector<Attribute> battrs;
          if (vec) battrs.push_back(Attribute::Int("axis", 0));
          b.AddNode(bias.name + "_DequantizeLinear_" + layer.name, "DequantizeLinear",
                    {bqv, bs, bz}, bdq, std::move(battrs));
          node.inputs[static_cast<size_t>(layer.bias_input)] = bdq;
        }
      }
    }
    const std::vector<int> outputs = node.outputs;
    b.graph().AddNode(std::move(node));
    for (int o : outputs) {
      if (o != kNoValue && activations.count(o) != 0) b.EmitActivationQdq(o, params.at(o));
    }
  }
  b.graph().inputs = graph.inputs;
  b.graph().outputs = graph.outputs;
  result.qdq_pairs = b.pairs();
  opt::GraphEditor editor(std::move(b.graph()));
  KILN_ASSIGN_OR_RETURN(Graph finished, editor.Finish());
  result.graph = std::make_shared<Graph>(std::move(finished));
  return result;
}

}  // namespace kiln::quant
