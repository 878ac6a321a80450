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

#include "op/attribute.h"
#include "op/node_desc.h"
#include "op/value_type.h"
#include "tensor/tensor.h"

namespace kiln {

class Graph;

inline constexpr int kNoValue = -1;

struct Value {
  std::string name;
  ValueType type;
  int producer = -1;                            // node id, or -1 for inputs/initializers
  std::shared_ptr<const OwnedTensor> constant;  // set for initializers
  bool is_constant() const { return constant != nullptr; }
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

  // nullptr when absent (op/attribute.h: the typed getters fall back on a wrong type too).
  const Attribute* FindAttribute(std::string_view attr_name) const {
    return kiln::FindAttribute(attributes, attr_name);
  }
  int64_t GetInt(std::string_view attr_name, int64_t default_value) const {
    return GetIntAttribute(attributes, attr_name, default_value);
  }
  float GetFloat(std::string_view attr_name, float default_value) const {
    return GetFloatAttribute(attributes, attr_name, default_value);
  }
  std::string GetString(std::string_view attr_name, std::string_view default_value) const {
    return GetStringAttribute(attributes, attr_name, default_value);
  }
  // Empty when absent.
  std::vector<int64_t> GetInts(std::string_view attr_name) const {
    return GetIntsAttribute(attributes, attr_name);
  }
  // Empty when absent.
  std::vector<float> GetFloats(std::string_view attr_name) const {
    return GetFloatsAttribute(attributes, attr_name);
  }
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

// The description of `node` (a node of `graph`) that its kernel is built from: op, domain, the
// opset `graph` imports for the domain, attributes, and per input and output slot its presence,
// declared type and (inputs) constant data. Implicit inputs are not described. The description
// shares the constants' data with `graph`.
NodeDesc DescribeNode(const Graph& graph, const Node& node);

}  // namespace kiln
