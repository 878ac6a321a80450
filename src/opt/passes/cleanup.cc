// SPDX-License-Identifier: Apache-2.0
// identity_elimination, common_subexpression_elimination, dead_code_elimination.
//
// NOTE: removing a node whose output equals its input goes through GraphEditor::Bypass, which
// keeps graph-output names (the input's producer is renamed to write the output) and refuses
// when a subgraph captures the value by name. CSE keys a node by op, domain, input ids and
// attributes (nodes with tensor or graph attributes, and random ops, are never merged); small
// identical constants are merged first so that, e.g., two Reshapes with equal shape constants
// become one. DCE walks the nodes backwards so whole dead chains go in one sweep.

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "opt/pass.h"

namespace kiln::opt {
namespace {

// The ONNX TensorProto.DataType number of the common dtypes (Cast's `to`); -2 for others.
int64_t OnnxTypeNumber(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 1;
    case DataType::kUint8:
      return 2;
    case DataType::kInt8:
      return 3;
    case DataType::kUint16:
      return 4;
    case DataType::kInt16:
      return 5;
    case DataType::kInt32:
      return 6;
    case DataType::kInt64:
      return 7;
    case DataType::kBytes:
      return 8;
    case DataType::kBool:
      return 9;
    case DataType::kFloat16:
      return 10;
    case DataType::kFloat64:
      return 11;
    case DataType::kUint32:
      return 12;
    case DataType::kUint64:
      return 13;
    case DataType::kBFloat16:
      return 16;
    default:
      return -2;
  }
}

std::optional<std::vector<int64_t>> StaticDims(const ValueType& t) {
  if (!t.is_tensor() || !t.has_shape) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : t.dims) {
    if (!d.known()) return std::nullopt;
    dims.push_back(d.value);
  }
  return dims;
}

std::optional<std::vector<int64_t>> Int64Values(const GraphEditor& ed, int value) {
  const OwnedTensor* t = ed.Constant(value);
  if (t == nullptr || t->dtype() != DataType::kInt64) return std::nullopt;
  const int64_t* p = t->data<const int64_t>();
  return std::vector<int64_t>(p, p + t->num_elements());
}

// The perm of a Transpose (default: reversed axes, needs the rank).
std::optional<std::vector<int64_t>> PermOf(const GraphEditor& ed, const Node& n) {
  std::vector<int64_t> perm = n.GetInts("perm");
  if (!perm.empty()) return perm;
  const ValueType& t = ed.value(n.inputs[0]).type;
  if (!t.has_shape) return std::nullopt;
  for (int64_t i = static_cast<int64_t>(t.dims.size()) - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

class IdentityEliminationPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    for (int n : ed.LiveNodes()) {
      if (!ed.alive(n)) continue;
      const Node node = ed.node(n);
      if (!node.domain.empty() || !node.has_input(0) || node.outputs.empty() ||
          node.outputs[0] == kNoValue) {
        continue;
      }
      const int in = node.inputs[0];
      const int out = node.outputs[0];
      bool noop = false;
      if (node.op_type == "Identity") {
        noop = true;
      } else if (node.op_type == "Dropout") {
        const bool mask_used =
            node.outputs.size() > 1 && node.outputs[1] != kNoValue &&
            (ed.IsGraphOutput(node.outputs[1]) || !ed.Consumers(node.outputs[1]).empty());
        bool training = false;
        if (node.has_input(2)) {
          std::optional<double> t = ed.ScalarConstant(node.inputs[2]);
          training = !t || *t != 0;
          if (!t && ed.Constant(node.inputs[2]) != nullptr) {  // BOOL constant
            const OwnedTensor* c = ed.Constant(node.inputs[2]);
            training = !(c->dtype() == DataType::kBool && c->num_elements() == 1 &&
                         !c->data<const bool>()[0]);
          }
        }
        // In training mode a ratio of 0 keeps every element and scales by 1 / (1 - 0): the
        // identity too (torchvision's Swin exports its attention dropout so).
        const std::optional<double> ratio =
            node.has_input(1) ? ed.ScalarConstant(node.inputs[1]) : std::optional<double>();
        noop = !mask_used && (!training || (ratio && *ratio == 0));
      } else if (node.op_type == "Cast") {
        const DataType from = ed.DtypeOf(in);
        noop = from != DataType::kInvalid && ed.value(in).type.is_tensor() &&
               OnnxTypeNumber(from) == node.GetInt("to", -1);
      } else if (node.op_type == "Reshape") {
        std::optional<std::vector<int64_t>> a = StaticDims(ed.value(in).type);
        std::optional<std::vector<int64_t>> shape =
            node.has_input(1) ? Int64Values(ed, node.inputs[1]) : std::nullopt;
        // To the input's own static shape, or to a shape the types prove equal (same dims or
        // symbols: x.view(x.shape[0], 8, 32) of an [N, 8, 32] x).
        noop =
            (a && shape && *a == *shape) || SameStaticShape(ed.value(in).type, ed.value(out).type);
        if (!noop && shape) {
          // Reshape(Reshape(x, s1), s2) == Reshape(x, s2) when s2 copies no dim (no 0).
          const int inner = ed.ProducerOf(in, "Reshape");
          const bool copies = std::find(shape->begin(), shape->end(), 0) != shape->end();
          if (inner >= 0 && !copies && ed.OnlyFeeds(in, n)) {
            ed.SetInput(n, 0, ed.node(inner).inputs[0]);
            ed.RemoveNode(inner);
            ++changes;
            continue;
          }
        }
      } else if (node.op_type == "Concat") {
        // One input: the input itself (DenseNet's first dense layer concatenates one tensor).
        noop = node.inputs.size() == 1;
      } else if (node.op_type == "Pad") {
        // Pads all zero (from opset 11 a constant input; before, the attribute): PyTorch exports
        // AvgPool2d as such a Pad before the AveragePool.
        std::optional<std::vector<int64_t>> pads =
            ed.graph().OpsetFor("") >= 11
                ? (node.has_input(1) ? Int64Values(ed, node.inputs[1]) : std::nullopt)
                : std::optional<std::vector<int64_t>>(node.GetInts("pads"));
        noop = pads && std::all_of(pads->begin(), pads->end(), [](int64_t p) { return p == 0; });
        // The axes input (opset 18) only narrows which dims the pads apply to: zeros still pad
        // nothing.
      } else if (node.op_type == "Transpose") {
        std::optional<std::vector<int64_t>> perm = PermOf(ed, node);
        if (!perm) continue;
        noop = true;
        for (size_t i = 0; i < perm->size(); ++i) noop = noop && (*perm)[i] == int64_t(i);
        const int inner = ed.ProducerOf(in, "Transpose");
        if (!noop && inner >= 0 && ed.OnlyFeeds(in, n)) {
          std::optional<std::vector<int64_t>> p1 = PermOf(ed, ed.node(inner));
          if (p1 && p1->size() == perm->size()) {
            // y = T(T(x, p1), p2): y[i] = x axis p1[p2[i]].
            std::vector<int64_t> q(perm->size());
            for (size_t i = 0; i < q.size(); ++i) q[i] = (*p1)[static_cast<size_t>((*perm)[i])];
            Node& mut = ed.graph().mutable_node(n);
            mut.attributes.erase(
                std::remove_if(mut.attributes.begin(), mut.attributes.end(),
                               [](const Attribute& a) { return a.name == "perm"; }),
                mut.attributes.end());
            mut.attributes.push_back(Attribute::Ints("perm", q));
            ed.SetInput(n, 0, ed.node(inner).inputs[0]);
            ed.RemoveNode(inner);
            ++changes;
            continue;
          }
        }
      }
      if (noop && ed.Bypass(n, in, out)) ++changes;
    }
    return changes;
  }
};

std::string AttributeKey(const Attribute& a) {
  std::string k = fmt::format("{}:{}:", a.name, static_cast<int>(a.type));
  switch (a.type) {
    case AttributeType::kFloat: {
      uint32_t bits;
      std::memcpy(&bits, &a.f, 4);
      return k + std::to_string(bits);
    }
    case AttributeType::kInt:
      return k + std::to_string(a.i);
    case AttributeType::kString:
      return k + std::to_string(a.s.size()) + ":" + a.s;
    case AttributeType::kFloats: {
      for (float f : a.floats) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        k += std::to_string(bits) + ",";
      }
      return k;
    }
    case AttributeType::kInts:
      for (int64_t v : a.ints) k += std::to_string(v) + ",";
      return k;
    case AttributeType::kStrings:
      for (const std::string& s : a.strings) k += std::to_string(s.size()) + ":" + s;
      return k;
    default:
      return {};  // not comparable here
  }
}

constexpr int64_t kMaxMergedConstantBytes = 256;

class CsePass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    // Identical small constants first.
    std::map<std::string, int> constants;
    for (int v = 0; v < ed.graph().num_values(); ++v) {
      const OwnedTensor* c = ed.Constant(v);
      if (c == nullptr || c->dtype() == DataType::kBytes || ed.IsGraphOutput(v) ||
          static_cast<int64_t>(c->size_bytes()) > kMaxMergedConstantBytes ||
          ed.Consumers(v).empty()) {
        continue;
      }
      std::string key = fmt::format("{}{}", static_cast<int>(c->dtype()), c->shape().ToString());
      key.append(static_cast<const char*>(c->raw_data()), c->size_bytes());
      auto [it, inserted] = constants.emplace(std::move(key), v);
      if (inserted) continue;
      bool captured = false;
      for (int r : ed.Consumers(v)) {
        const Node& n = ed.node(r);
        if (std::find(n.implicit_inputs.begin(), n.implicit_inputs.end(), v) !=
            n.implicit_inputs.end()) {
          captured = true;
        }
      }
      if (captured) continue;
      ed.ReplaceUses(v, it->second);
      ++changes;
    }
    std::map<std::string, int> seen;
    for (int n : ed.LiveNodes()) {
      const Node& node = ed.node(n);
      if (node.domain != "" && node.domain != "ai.kiln") continue;
      if (node.op_type.find("Random") != std::string::npos || node.op_type == "Multinomial" ||
          node.op_type == "Bernoulli" || node.op_type == "Dropout" ||
          !node.implicit_inputs.empty()) {
        continue;
      }
      std::string key = node.domain + "|" + node.op_type + "|";
      for (int in : node.inputs) key += std::to_string(in) + ",";
      key += fmt::format("|{}|", node.outputs.size());
      bool comparable = true;
      std::vector<std::string> attrs;
      for (const Attribute& a : node.attributes) {
        std::string ak = AttributeKey(a);
        if (ak.empty()) comparable = false;
        attrs.push_back(std::move(ak));
      }
      if (!comparable) continue;
      std::sort(attrs.begin(), attrs.end());
      for (const std::string& a : attrs) key += a + ";";
      auto [it, inserted] = seen.emplace(std::move(key), n);
      if (inserted) continue;
      const Node& first = ed.node(it->second);
      bool mergeable = true;
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const int o = node.outputs[i];
        if (o == kNoValue) continue;
        if (ed.IsGraphOutput(o) || first.outputs[i] == kNoValue) mergeable = false;
        for (int r : ed.Consumers(o)) {
          const Node& rn = ed.node(r);
          if (std::find(rn.implicit_inputs.begin(), rn.implicit_inputs.end(), o) !=
              rn.implicit_inputs.end()) {
            mergeable = false;
          }
        }
      }
      if (!mergeable) continue;
      const std::vector<int> outs = node.outputs;
      const std::vector<int> keep = first.outputs;
      ed.RemoveNode(n);
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i] != kNoValue) ed.ReplaceUses(outs[i], keep[i]);
      }
      ++changes;
    }
    return changes;
  }
};

class DcePass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    std::vector<int> nodes = ed.LiveNodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const Node& node = ed.node(*it);
      bool used = false;
      for (int o : node.outputs) {
        if (o != kNoValue && (ed.IsGraphOutput(o) || !ed.Consumers(o).empty())) used = true;
      }
      if (used) continue;
      ed.RemoveNode(*it);
      ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateIdentityEliminationPass() {
  return std::make_unique<IdentityEliminationPass>();
}
std::unique_ptr<Pass> CreateCsePass() { return std::make_unique<CsePass>(); }
std::unique_ptr<Pass> CreateDcePass() { return std::make_unique<DcePass>(); }

}  // namespace kiln::opt
