// SPDX-License-Identifier: Apache-2.0
// shape_folding and constant_folding.
//
// NOTE: constant folding evaluates a node with the registered CPU kernels (the same ones a
// Session would pick) on its constant inputs and turns each output into an initializer that
// keeps the output's name. It skips: nodes outside the ONNX and ai.kiln domains, random ops
// (their value must differ per run), nodes with subgraphs or sequence/optional values, nodes
// producing graph outputs (so output names stay node outputs), and results larger than
// max(fold_max_bytes, the node's constant inputs' bytes), checked from the declared output type
// before computing where it is known. A kernel that refuses the node leaves it unfolded; the
// session reports the problem at load as it would have anyway.
// Shape folding needs no kernel: Shape, Size and Gather(Shape(x), constant indices) read the
// declared dims of x, which must be known for every dim they return (a symbolic batch dim
// blocks only the entries that read it). A Gather of one symbolic dim is rewired to read that
// symbol from the graph input that declares it, so CSE can merge the many copies of "the batch
// size" PyTorch exports compute.
// Cast(to=FLOAT) of a FLOAT16 / BFLOAT16 constant is folded at any size (twice the input's
// bytes): it is how models store half-precision weights (see half_weights in passes.inc).
// A DequantizeLinear of an INT8 weight or INT32 bias feeding an op qdq_fusion makes INT8
// (passes/qdq.h) is not folded while that pass is enabled: the INT8 kernel reads the constant.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "kernels/registry.h"
#include "opt/pass.h"
#include "opt/passes/qdq.h"

namespace kiln::opt {
namespace {

// Ops whose outputs may differ between runs (Dropout in training mode; in inference mode
// identity_elimination removes it).
const std::set<std::string_view> kNonDeterministic = {
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Multinomial",  "Bernoulli",     "Dropout"};

OwnedTensor Int64Tensor(const Shape& shape, const std::vector<int64_t>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<int64_t>()[i] = values[i];
  return std::move(t).value();
}

// Makes `value` a constant holding `t` (its producer is removed by the caller).
void SetConstant(GraphEditor& ed, int value, OwnedTensor t) {
  Value& v = ed.graph().mutable_value(value);
  v.type = ValueType{};
  v.type.dtype = t.dtype();
  v.type.has_shape = true;
  for (int64_t d : t.shape().dims()) v.type.dims.push_back(Dim{d, {}});
  v.constant = std::make_shared<const OwnedTensor>(std::move(t));
}

bool HasSubgraph(const Node& n) {
  for (const Attribute& a : n.attributes) {
    if (a.type == AttributeType::kGraph || a.type == AttributeType::kGraphs) return true;
  }
  return !n.implicit_inputs.empty();
}

bool WritesGraphOutput(const GraphEditor& ed, const Node& n) {
  for (int o : n.outputs) {
    if (o != kNoValue && ed.IsGraphOutput(o)) return true;
  }
  return false;
}

// Known dims of a tensor value, or nullopt when the rank is unknown.
std::optional<std::vector<Dim>> DimsOf(const GraphEditor& ed, int value) {
  const ValueType& t = ed.value(value).type;
  if (!t.is_tensor() || !t.has_shape) return std::nullopt;
  return t.dims;
}

// Gather node `gather` reads dim `pos` of `source`, which is the symbol `symbol`. When a graph
// input has that symbol at some position j, makes the Gather read Shape(input)[j] instead, so
// every such read of one symbol becomes the same node pair and CSE keeps one (PyTorch exports
// compute the batch size afresh before each Reshape). `shape_of_input` caches the Shape nodes
// added in this pass. Returns true when it rewired the Gather.
bool ReadSymbolFromInput(GraphEditor& ed, int gather, int source, int64_t pos,
                         const std::string& symbol, const Shape& index_shape,
                         std::map<int, int>& shape_of_input) {
  for (int in : ed.graph().inputs) {
    const ValueType& t = ed.value(in).type;
    if (!t.is_tensor() || !t.has_shape) continue;
    for (size_t j = 0; j < t.dims.size(); ++j) {
      if (t.dims[j].known() || t.dims[j].symbol != symbol) continue;
      if (in == source && static_cast<int64_t>(j) == pos) return false;  // already canonical
      auto it = shape_of_input.find(in);
      if (it == shape_of_input.end()) {
        ValueType st;
        st.dtype = DataType::kInt64;
        st.has_shape = true;
        st.dims = {Dim{static_cast<int64_t>(t.dims.size()), {}}};
        const int v = ed.AddValue(ed.value(in).name + "_shape", st);
        Node shape;
        shape.name = ed.value(v).name;
        shape.op_type = "Shape";
        shape.inputs = {in};
        shape.outputs = {v};
        ed.AddNode(std::move(shape));
        it = shape_of_input.emplace(in, v).first;
      }
      std::vector<int64_t> index(1, static_cast<int64_t>(j));
      Result<OwnedTensor> idx = OwnedTensor::Allocate(DataType::kInt64, index_shape);
      KILN_CHECK(idx.ok(), idx.status().ToString());
      idx->data<int64_t>()[0] = static_cast<int64_t>(j);
      const int idx_id = ed.AddConstant(ed.value(in).name + "_dim", std::move(idx).value());
      ed.SetInput(gather, 0, it->second);
      ed.SetInput(gather, 1, idx_id);
      return true;
    }
  }
  return false;
}

class ShapeFoldingPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    std::map<int, int> shape_of_input;
    for (int n : ed.LiveNodes()) {
      const Node& node = ed.node(n);
      if (!node.domain.empty() || node.outputs.empty() || node.outputs[0] == kNoValue ||
          !node.has_input(0) || WritesGraphOutput(ed, node)) {
        continue;
      }
      const int out = node.outputs[0];
      if (node.op_type == "Shape" || node.op_type == "Size") {
        std::optional<std::vector<Dim>> dims = DimsOf(ed, node.inputs[0]);
        if (!dims) continue;
        const int64_t rank = static_cast<int64_t>(dims->size());
        int64_t begin = 0, end = rank;
        if (node.op_type == "Shape") {
          begin = node.GetInt("start", 0);
          end = node.GetInt("end", rank);
          if (begin < 0) begin += rank;
          if (end < 0) end += rank;
          begin = std::clamp<int64_t>(begin, 0, rank);
          end = std::clamp<int64_t>(end, begin, rank);
        }
        std::vector<int64_t> values;
        bool known = true;
        for (int64_t i = begin; i < end; ++i) {
          const Dim& d = (*dims)[static_cast<size_t>(i)];
          if (!d.known()) known = false;
          values.push_back(d.value);
        }
        if (!known) continue;
        if (node.op_type == "Shape") {
          SetConstant(ed, out, Int64Tensor(Shape{end - begin}, values));
        } else {
          int64_t size = 1;
          for (int64_t v : values) size *= v;
          SetConstant(ed, out, Int64Tensor(Shape{}, {size}));
        }
        ed.RemoveNode(n);
        ++changes;
        continue;
      }
      if (node.op_type == "Gather" && node.GetInt("axis", 0) == 0 && node.has_input(1)) {
        const int shape_node = ed.ProducerOf(node.inputs[0], "Shape");
        const OwnedTensor* idx = ed.Constant(node.inputs[1]);
        if (shape_node < 0 || idx == nullptr || idx->dtype() != DataType::kInt64) continue;
        const Node& sn = ed.node(shape_node);
        std::optional<std::vector<Dim>> dims = DimsOf(ed, sn.inputs[0]);
        if (!dims) continue;
        const int64_t rank = static_cast<int64_t>(dims->size());
        int64_t begin = sn.GetInt("start", 0);
        int64_t end = sn.GetInt("end", rank);
        if (begin < 0) begin += rank;
        if (end < 0) end += rank;
        begin = std::clamp<int64_t>(begin, 0, rank);
        end = std::clamp<int64_t>(end, begin, rank);
        const int64_t len = end - begin;
        std::vector<int64_t> values;
        bool ok = true;
        for (int64_t i = 0; i < idx->num_elements(); ++i) {
          int64_t k = idx->data<const int64_t>()[i];
          if (k < 0) k += len;
          if (k < 0 || k >= len) {
            ok = false;
            break;
          }
          const Dim& d = (*dims)[static_cast<size_t>(begin + k)];
          if (!d.known()) {
            ok = false;
            if (idx->num_elements() == 1 && !d.symbol.empty() &&
                ReadSymbolFromInput(ed, n, sn.inputs[0], begin + k, d.symbol, idx->shape(),
                                    shape_of_input)) {
              ++changes;
            }
            break;
          }
          values.push_back(d.value);
        }
        if (!ok) continue;
        SetConstant(ed, out, Int64Tensor(idx->shape(), values));
        ed.RemoveNode(n);
        ++changes;
      }
    }
    return changes;
  }
};

class ConstantFoldingPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions& options) const override {
    int changes = 0;
    const KernelRegistry& registry = KernelRegistry::Global();
    const bool keep_quantized =
        std::find(options.disabled_passes.begin(), options.disabled_passes.end(), "qdq_fusion") ==
        options.disabled_passes.end();
    for (int n : ed.LiveNodes()) {
      const Node& node = ed.node(n);
      if (!node.domain.empty() && node.domain != "ai.kiln") continue;
      if (keep_quantized && IsQuantizedOperandDequantize(ed, n)) continue;
      if (kNonDeterministic.count(node.op_type) > 0 || HasSubgraph(node)) continue;
      if (node.outputs.empty() || WritesGraphOutput(ed, node)) continue;
      bool all_constant = true;
      int64_t input_bytes = 0;
      std::vector<Tensor> inputs;
      for (int in : node.inputs) {
        if (in == kNoValue) {
          inputs.emplace_back();
          continue;
        }
        const OwnedTensor* c = ed.Constant(in);
        if (c == nullptr) {
          all_constant = false;
          break;
        }
        input_bytes += static_cast<int64_t>(c->size_bytes());
        inputs.push_back(c->view());
      }
      if (!all_constant) continue;
      int64_t limit = std::max(options.fold_max_bytes, input_bytes);
      // A Cast of a half-precision weight to FLOAT (how ONNX models store FP16 / BF16 weights)
      // is folded whatever its size: the FP32 weight is what the rest of the pipeline works on,
      // and half_weights narrows it again when the weight precision is half.
      if (node.domain.empty() && node.op_type == "Cast" && node.GetInt("to", 0) == 1 &&
          inputs.size() == 1 &&
          (inputs[0].dtype() == DataType::kFloat16 || inputs[0].dtype() == DataType::kBFloat16)) {
        limit = std::max(limit, 2 * input_bytes);
      }
      bool too_big = false;
      for (int o : node.outputs) {
        if (o == kNoValue) continue;
        const ValueType& t = ed.value(o).type;
        std::optional<int64_t> count = KnownNumElements(t);
        if (count && t.dtype != DataType::kInvalid &&
            *count * static_cast<int64_t>(DataTypeSize(t.dtype)) > limit) {
          too_big = true;
        }
      }
      if (too_big) continue;
      const Graph& g = ed.graph();
      const NodeDesc desc = DescribeNode(g, node);
      const KernelInfo info(desc);
      Result<const KernelDef*> def = registry.Find(info, DeviceType::kCpu);
      if (!def.ok()) continue;
      Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
      if (!kernel.ok() || (*kernel)->TakesNonTensorValues()) continue;
      std::vector<OwnedTensor> outputs(node.outputs.size());
      KernelContext ctx(inputs, outputs);
      if (!(*kernel)->Compute(ctx).ok()) continue;
      bool usable = true;
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (node.outputs[i] == kNoValue) continue;
        if (!outputs[i].valid() || static_cast<int64_t>(outputs[i].size_bytes()) > limit) {
          usable = false;
        }
      }
      if (!usable) continue;
      const std::vector<int> outs = node.outputs;
      ed.RemoveNode(n);
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i] != kNoValue) SetConstant(ed, outs[i], std::move(outputs[i]));
      }
      ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateShapeFoldingPass() { return std::make_unique<ShapeFoldingPass>(); }
std::unique_ptr<Pass> CreateConstantFoldingPass() {
  return std::make_unique<ConstantFoldingPass>();
}

}  // namespace kiln::opt
