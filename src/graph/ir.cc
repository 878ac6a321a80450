// SPDX-License-Identifier: Apache-2.0
#include "graph/ir.h"

namespace kiln {

int Node::num_present_inputs() const {
  int n = static_cast<int>(inputs.size());
  while (n > 0 && inputs[static_cast<size_t>(n - 1)] == kNoValue) --n;
  return n;
}

int Graph::AddValue(Value value) {
  const int id = static_cast<int>(values_.size());
  value_by_name_.emplace(value.name, id);
  values_.push_back(std::move(value));
  return id;
}

int Graph::AddNode(Node node) {
  const int id = static_cast<int>(nodes_.size());
  for (int out : node.outputs) {
    if (out != kNoValue) values_[static_cast<size_t>(out)].producer = id;
  }
  nodes_.push_back(std::move(node));
  return id;
}

int Graph::FindValue(std::string_view value_name) const {
  auto it = value_by_name_.find(value_name);
  return it == value_by_name_.end() ? -1 : it->second;
}

std::vector<int> Graph::Captures() const {
  std::vector<bool> is_input(values_.size(), false);
  for (int id : inputs) is_input[static_cast<size_t>(id)] = true;
  std::vector<int> ids;
  for (int id = 0; id < num_values(); ++id) {
    const Value& v = values_[static_cast<size_t>(id)];
    if (v.producer < 0 && !v.is_constant() && !is_input[static_cast<size_t>(id)]) ids.push_back(id);
  }
  return ids;
}

NodeDesc DescribeNode(const Graph& graph, const Node& node) {
  NodeDesc d;
  d.name = node.name;
  d.op_type = node.op_type;
  d.domain = node.domain;
  d.opset = graph.OpsetFor(node.domain);
  d.attributes = node.attributes;
  const auto describe = [&](int id, bool input) {
    OperandDesc o;
    if (id == kNoValue) return o;
    const Value& v = graph.value(id);
    o.present = true;
    o.type = v.type;
    if (input) o.constant = v.constant;
    return o;
  };
  d.inputs.reserve(node.inputs.size());
  for (int id : node.inputs) d.inputs.push_back(describe(id, true));
  d.outputs.reserve(node.outputs.size());
  for (int id : node.outputs) d.outputs.push_back(describe(id, false));
  return d;
}

int64_t Graph::OpsetFor(std::string_view domain) const {
  if (domain == "ai.onnx") domain = "";
  auto it = opset_imports.find(std::string(domain));
  return it == opset_imports.end() ? 0 : it->second;
}

}  // namespace kiln
