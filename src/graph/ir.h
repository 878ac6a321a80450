// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's graph IR: the model as the runtime and optimizer see it, independent of ONNX protobuf
// (graph/onnx/ is the only code that reads protobuf and builds this IR).
//
// A Graph owns Values (tensors, sequences of tensors and optionals flowing between nodes) and
// Nodes (operators). Both are addressed by dense integer ids (indices into the graph's vectors).
// Node inputs/outputs are value ids; kNoValue (-1) marks an omitted optional input or output.
// Initializers are Values with constant data. Nodes are stored in topological order (the
// importer checks it).
//
//   const Graph& g = ...;
//   for (const Node& n : g.nodes()) {
//     const Value& x = g.value(n.inputs[0]);
//     int64_t axis = n.GetInt("axis", 1);
//   }
//
// Thread safety: a Graph is immutable once built and may be read from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace kiln {

class Graph;

inline constexpr int kNoValue = -1;

// One dimension of a declared tensor type: a known size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty for a named symbolic dim
  bool known() const { return value >= 0; }
};

// What kind of value a ValueType describes.
enum class TypeKind : uint8_t {
  kTensor,    // a tensor (the default, and the only kind most ops take)
  kSequence,  // an ordered list of tensors of one element type
  kOptional,  // a tensor or a sequence of tensors, or nothing ("none")
};

// Declared type of a value, as the model states or shape inference derived it.
//
// A tensor type has an element type and an (optional) shape: `has_shape == false` means the
// rank itself is unknown. A sequence type has `elem`, the type of its elements (a tensor type);
// an optional type has `elem`, the type of what it holds (a tensor or a sequence type). `elem`
// is null when the model does not say; dtype/has_shape/dims are unused for those kinds. A
// default-constructed ValueType is a tensor of unknown dtype and rank, which is also how a value
// without any recorded type looks (IsUnknown()).
struct ValueType {
  TypeKind kind = TypeKind::kTensor;
  DataType dtype = DataType::kInvalid;
  bool has_shape = false;
  std::vector<Dim> dims;
  std::shared_ptr<const ValueType> elem;  // kSequence / kOptional only

  static ValueType Sequence(ValueType element);
  static ValueType Optional(ValueType contained);

  bool is_tensor() const { return kind == TypeKind::kTensor; }
  bool is_sequence() const { return kind == TypeKind::kSequence; }
  bool is_optional() const { return kind == TypeKind::kOptional; }
  // A tensor type with neither dtype nor shape: nothing is known, not even the kind.
  bool IsUnknown() const {
    return kind == TypeKind::kTensor && dtype == DataType::kInvalid && !has_shape;
  }
  // "FP32[batch,16]" / "FP32[?]" for tensors, "seq(FP32[?])", "optional(seq(INT64[2]))",
  // "seq(?)" for a sequence of unknown elements: text for messages.
  std::string ToString() const;
};

struct Value {
  std::string name;
  ValueType type;
  int producer = -1;                            // node id, or -1 for inputs/initializers
  std::shared_ptr<const OwnedTensor> constant;  // set for initializers
  bool is_constant() const { return constant != nullptr; }
};

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
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;        // "" for the default ONNX domain ("ai.onnx" is normalized to "")
  std::vector<int> inputs;   // value ids; kNoValue for an omitted optional input
  std::vector<int> outputs;  // value ids; kNoValue for an omitted optional output
  std::vector<Attribute> attributes;
  // Values of this graph that the node's subgraphs (If/Loop/Scan bodies) read from the
  // enclosing scope, matched by name to the subgraphs' captured values (Graph::Captures).
  // Empty for nodes without subgraphs. The runtime feeds them after the explicit inputs.
  std::vector<int> implicit_inputs;

  // nullptr when absent.
  const Attribute* FindAttribute(std::string_view name) const;
  int64_t GetInt(std::string_view name, int64_t default_value) const;
  float GetFloat(std::string_view name, float default_value) const;
  std::string GetString(std::string_view name, std::string_view default_value) const;
  std::vector<int64_t> GetInts(std::string_view name) const;  // empty when absent
  std::vector<float> GetFloats(std::string_view name) const;  // empty when absent
  // Number of inputs actually given (trailing omitted ones do not count).
  int num_present_inputs() const;
  bool has_input(int i) const {
    return i < static_cast<int>(inputs.size()) && inputs[static_cast<size_t>(i)] != kNoValue;
  }
};

class Graph {
 public:
  std::string name;
  // Operator-set versions by domain ("" for the default ONNX domain).
  std::map<std::string, int64_t> opset_imports;
  int64_t ir_version = 0;

  // Adds a value and returns its id. Names must be unique within the graph (not checked here).
  int AddValue(Value value);
  // Adds a node and records it as producer of its outputs. Returns the node id.
  int AddNode(Node node);

  const Value& value(int id) const { return values_[static_cast<size_t>(id)]; }
  Value& mutable_value(int id) { return values_[static_cast<size_t>(id)]; }
  const Node& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  // For graph rewrites (src/opt) on a graph nobody else reads yet. Changing a node's outputs
  // does not update Value::producer; the rewriter rebuilds the graph afterwards.
  Node& mutable_node(int id) { return nodes_[static_cast<size_t>(id)]; }
  std::span<const Value> values() const { return values_; }
  std::span<const Node> nodes() const { return nodes_; }
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }

  // Graph inputs that the caller must feed (initializers excluded), in declaration order.
  std::vector<int> inputs;
  // Graph outputs in declaration order.
  std::vector<int> outputs;

  // Value id by name, or -1.
  int FindValue(std::string_view name) const;
  // Values read from an enclosing graph (subgraphs only): no producer, not constant, not an
  // input. Their data is supplied by the node that owns the subgraph, matched by name.
  std::vector<int> Captures() const;
  // Opset of `domain` ("" / "ai.onnx" for ONNX); 0 when the model does not import it.
  int64_t OpsetFor(std::string_view domain) const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::map<std::string, int, std::less<>> value_by_name_;
};

}  // namespace kiln
