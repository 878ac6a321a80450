// SPDX-License-Identifier: Apache-2.0
#include "graph/ir.h"

#include <fmt/format.h>

namespace kiln {

ValueType ValueType::Sequence(ValueType element) {
  ValueType t;
  t.kind = TypeKind::kSequence;
  t.elem = std::make_shared<const ValueType>(std::move(element));
  return t;
}

ValueType ValueType::Optional(ValueType contained) {
  ValueType t;
  t.kind = TypeKind::kOptional;
  t.elem = std::make_shared<const ValueType>(std::move(contained));
  return t;
}

std::string ValueType::ToString() const {
  if (kind != TypeKind::kTensor) {
    const char* name = kind == TypeKind::kSequence ? "seq" : "optional";
    return fmt::format("{}({})", name, elem ? elem->ToString() : std::string("?"));
  }
  std::string out(DataTypeName(dtype));
  if (!has_shape) return out + "[?]";
  out += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    if (dims[i].known())
      out += std::to_string(dims[i].value);
    else if (!dims[i].symbol.empty())
      out += dims[i].symbol;
    else
      out += "?";
  }
  return out + "]";
}

Attribute Attribute::Int(std::string name, int64_t value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kInt;
  a.i = value;
  return a;
}

Attribute Attribute::Ints(std::string name, std::vector<int64_t> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kInts;
  a.ints = std::move(values);
  return a;
}

Attribute Attribute::Float(std::string name, float value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloat;
  a.f = value;
  return a;
}

Attribute Attribute::Floats(std::string name, std::vector<float> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloats;
  a.floats = std::move(values);
  return a;
}

Attribute Attribute::String(std::string name, std::string value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kString;
  a.s = std::move(value);
  return a;
}

const Attribute* Node::FindAttribute(std::string_view attr_name) const {
  for (const Attribute& a : attributes) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

int64_t Node::GetInt(std::string_view attr_name, int64_t default_value) const {
  const Attribute* a = FindAttribute(attr_name);
  return a && a->type == AttributeType::kInt ? a->i : default_value;
}

float Node::GetFloat(std::string_view attr_name, float default_value) const {
  const Attribute* a = FindAttribute(attr_name);
  return a && a->type == AttributeType::kFloat ? a->f : default_value;
}

std::string Node::GetString(std::string_view attr_name, std::string_view default_value) const {
  const Attribute* a = FindAttribute(attr_name);
  return a && a->type == AttributeType::kString ? a->s : std::string(default_value);
}

std::vector<int64_t> Node::GetInts(std::string_view attr_name) const {
  const Attribute* a = FindAttribute(attr_name);
  return a && a->type == AttributeType::kInts ? a->ints : std::vector<int64_t>{};
}

std::vector<float> Node::GetFloats(std::string_view attr_name) const {
  const Attribute* a = FindAttribute(attr_name);
  return a && a->type == AttributeType::kFloats ? a->floats : std::vector<float>{};
}

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

int64_t Graph::OpsetFor(std::string_view domain) const {
  if (domain == "ai.onnx") domain = "";
  auto it = opset_imports.find(std::string(domain));
  return it == opset_imports.end() ? 0 : it->second;
}

}  // namespace kiln
