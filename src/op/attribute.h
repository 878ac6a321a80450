// SPDX-License-Identifier: Apache-2.0
#pragma once
// Operator attributes: the named constants an operator application carries (ONNX's
// AttributeProto as kiln holds it), shared by the graph IR (graph/ir.h: Node::attributes) and the
// description kernels are built from (op/node_desc.h).
//
//   std::vector<Attribute> attrs = {Attribute::Int("axis", 1), Attribute::Floats("scales", s)};
//   int64_t axis = GetIntAttribute(attrs, "axis", 0);  // 1
//
// A GRAPH(S) attribute (If/Loop/Scan bodies) points to a Graph, which this header only
// forward-declares: only code that includes graph/ir.h (the runtime's control-flow ops, the
// optimizer, the ONNX importer) looks inside one; kernels never do.
//
// Thread safety: plain values; a const Attribute may be read from any thread.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "op/value_type.h"
#include "tensor/tensor.h"

namespace kiln {

class Graph;

enum class AttributeType : uint8_t {
  kUndefined,
  kFloat,
  kInt,
  kString,
  kTensor,
  kGraph,
  kFloats,
  kInts,
  kStrings,
  kTensors,
  kGraphs,
  kTypeProto,
  kTypeProtos
};

struct Attribute {
  std::string name;
  AttributeType type = AttributeType::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;  // raw bytes for STRING attributes
  std::shared_ptr<const OwnedTensor> t;
  std::shared_ptr<const Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<std::shared_ptr<const OwnedTensor>> tensors;
  std::vector<std::shared_ptr<const Graph>> graphs;
  std::shared_ptr<const ValueType> tp;  // TYPE_PROTO (the Optional op's `type`)
  std::vector<ValueType> tps;           // TYPE_PROTOS

  // Attributes of one value (for passes that add or rewrite nodes).
  static Attribute Int(std::string name, int64_t value);
  static Attribute Ints(std::string name, std::vector<int64_t> values);
  static Attribute Float(std::string name, float value);
  static Attribute Floats(std::string name, std::vector<float> values);
  static Attribute String(std::string name, std::string value);
  static Attribute Strings(std::string name, std::vector<std::string> values);
};

// Lookups in a list of attributes (Node and NodeDesc forward their members to these). The typed
// getters return `default_value` (or an empty list) when the attribute is absent or has another
// type; callers that must reject a wrong type check Attribute::type themselves.
const Attribute* FindAttribute(std::span<const Attribute> attributes, std::string_view name);
int64_t GetIntAttribute(std::span<const Attribute> attributes, std::string_view name,
                        int64_t default_value);
float GetFloatAttribute(std::span<const Attribute> attributes, std::string_view name,
                        float default_value);
std::string GetStringAttribute(std::span<const Attribute> attributes, std::string_view name,
                               std::string_view default_value);
std::vector<int64_t> GetIntsAttribute(std::span<const Attribute> attributes, std::string_view name);
std::vector<float> GetFloatsAttribute(std::span<const Attribute> attributes, std::string_view name);

}  // namespace kiln
