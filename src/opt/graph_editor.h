// SPDX-License-Identifier: Apache-2.0
#pragma once
// GraphEditor: the mutable view of a Graph that optimizer passes rewrite, and the helpers they
// share (use lists, constants, pattern checks). Internal to src/opt.
//
// A pass adds nodes and values, rewires inputs and removes nodes; nodes it adds are appended
// (so they may sit after their consumers) and removed nodes stay in place, marked dead.
// Finish() then drops dead nodes and unused values, restores topological order and renumbers
// the ids densely, giving an ordinary Graph again. The pass manager calls it after every pass.
//
//   GraphEditor ed(graph_copy);
//   for (int n : ed.LiveNodes()) {
//     if (ed.node(n).op_type == "Identity" && ed.Bypass(n, ed.node(n).inputs[0],
//                                                       ed.node(n).outputs[0])) ...
//   }
//   KILN_ASSIGN_OR_RETURN(Graph out, ed.Finish());
//
// Use lists are kept up to date by every mutation below. Direct edits through
// graph().mutable_node() bypass them; use SetInput instead.
//
// Thread safety: none; one editor per pass run.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"

namespace kiln::opt {

class GraphEditor {
 public:
  // `subgraph`: `graph` is an If / Loop / Scan body, whose captured values (read, never
  // produced: Graph::Captures) come from the enclosing graph (Finish's verification allows
  // them).
  explicit GraphEditor(Graph graph, bool subgraph = false);

  const Graph& graph() const { return graph_; }
  Graph& graph() { return graph_; }
  const Node& node(int id) const { return graph_.node(id); }
  const Value& value(int id) const { return graph_.value(id); }

  bool alive(int node) const { return !dead_[static_cast<size_t>(node)]; }
  // Ids of the live nodes in their current order (a snapshot).
  std::vector<int> LiveNodes() const;

  // Alive nodes reading `value` (each once, even when it reads the value twice).
  const std::vector<int>& Consumers(int value) const {
    return consumers_[static_cast<size_t>(value)];
  }
  bool IsGraphOutput(int value) const;
  bool IsGraphInput(int value) const;
  // The live producer of `value`, or -1 (graph input, constant, or produced by a dead node).
  int Producer(int value) const;
  // The producer of `value` when it is a live node of `op_type` in the default domain; else -1.
  int ProducerOf(int value, std::string_view op_type) const;
  // True when `value` is an intermediate a fusion may swallow: read only by `consumer` (once or
  // several times), not a graph output.
  bool OnlyFeeds(int value, int consumer) const;

  // Adds a value with a name derived from `base` that is unique in the graph.
  int AddValue(std::string_view base, ValueType type);
  // Adds a constant (an initializer) named after `base`.
  int AddConstant(std::string_view base, OwnedTensor tensor);
  // Adds a node (appended; Finish restores topological order). Returns its id.
  int AddNode(Node node);
  // Marks `node` dead and drops its uses.
  void RemoveNode(int node);
  // Sets input `index` of `node` to `value`.
  void SetInput(int node, int index, int value);
  // Makes every live reader of `from` read `to` instead. REQUIRES: !IsGraphOutput(from).
  void ReplaceUses(int from, int to);
  // Removes `node`, whose output `out` equals its input `in`, so that readers of `out` read
  // `in`. When `out` is a graph output the output's name must survive: then `in`'s producer is
  // made to produce `out` directly, which needs `in` to come from a live node and not be a graph
  // output itself. Returns false (and changes nothing) when neither way is possible.
  bool Bypass(int node, int in, int out);

  // The constant data of `value`, or nullptr.
  const OwnedTensor* Constant(int value) const;
  // A constant's elements as doubles (any numeric dtype); nullopt when not a numeric constant.
  std::optional<std::vector<double>> ConstantValues(int value) const;
  // A constant holding a single element (any shape), as a double.
  std::optional<double> ScalarConstant(int value) const;
  // The declared element type, or kInvalid.
  DataType DtypeOf(int value) const { return graph_.value(value).type.dtype; }

  // Drops dead nodes and values nothing refers to, sorts the nodes topologically (keeping the
  // current order where it is already valid) and renumbers; the result passes VerifyGraph.
  Result<Graph> Finish() const;

 private:
  Graph graph_;
  std::vector<bool> dead_;
  std::vector<std::vector<int>> consumers_;
  std::vector<bool> is_output_;
  std::vector<bool> is_input_;
  int next_name_ = 0;
  bool subgraph_ = false;
};

// Structural checks of a graph: ids in range, each value produced at most once and by the node
// listed as its producer, every node input defined earlier (graph input, constant, or an earlier
// node's output; for a subgraph also a captured value of the enclosing graph), graph outputs
// defined, value names unique. INTERNAL naming the first problem (a failure here is an optimizer
// bug).
Status VerifyGraph(const Graph& graph, bool subgraph = false);

// True when the two declared types are provably the same tensor shape: same rank, and every dim
// known and equal or the same named symbol.
bool SameStaticShape(const ValueType& a, const ValueType& b);
// Product of the dims when all are known, else nullopt.
std::optional<int64_t> KnownNumElements(const ValueType& t);

// A float32 tensor of `shape` holding `values`.
OwnedTensor MakeFloatTensor(const Shape& shape, const std::vector<float>& values);

}  // namespace kiln::opt
