// SPDX-License-Identifier: Apache-2.0
// Conversion of opset 1-6 graphs into opset 7 form (version_adapter.h).
//
// NOTE on the approach. A graph is rebuilt rather than edited in place (the IR has no node
// removal or insertion): every value is copied first, with its id unchanged, then the nodes are
// appended in order, each after its chain of steps. A step edits the node's attributes and inputs
// and may add initializers or nodes ahead of it (their values get fresh ids after the copied
// ones, and names that no value of the graph uses). Initializers derived from existing ones share
// their buffers (OwnedTensor::Reshape on a copy), so weights are not duplicated.
//
// Which steps a node needs comes from libonnx's schema registry: the schema versions in force at
// the model's opset and at opset 7. The step table below covers every operator whose schema
// changed between opset 1 and 7 (version_adapter_test.cc checks that against the registry), so a
// missing step is reported rather than a node silently keeping old semantics.
//
// Dropout's is_test: before opset 7, is_test=0 (the default) asked for training-mode dropout,
// which drops random elements. kiln runs models for inference, so the step drops the attribute
// whatever its value and Dropout stays the identity (as the reference kernel always treated it).
// BatchNormalization's is_test=0 instead changes the result deterministically (batch
// statistics) and has no opset 7 inference form: it fails.

#include "graph/onnx/version_adapter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "base/check.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------------------------
// Attribute and value helpers.

Attribute* FindMutableAttribute(Node& node, std::string_view name) {
  for (Attribute& a : node.attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

void RemoveAttribute(Node& node, std::string_view name) {
  std::erase_if(node.attributes, [&](const Attribute& a) { return a.name == name; });
}

// A graph being adapted and the graphs enclosing it, for values a subgraph reads from outside
// (their types and data live in the enclosing graph).
struct Scope {
  const Graph& graph;
  const Scope* parent = nullptr;
};

// The graph and id that define value `id` of `scope`: an outer-scope reference resolves by name
// to the nearest enclosing graph that has the value.
std::pair<const Graph*, int> Resolve(const Scope& scope, int id) {
  const Scope* s = &scope;
  while (true) {
    const Value& v = s->graph.value(id);
    const bool outer_reference =
        v.producer < 0 && !v.is_constant() &&
        std::find(s->graph.inputs.begin(), s->graph.inputs.end(), id) == s->graph.inputs.end();
    if (!outer_reference || s->parent == nullptr) return {&s->graph, id};
    const int outer = s->parent->graph.FindValue(v.name);
    if (outer < 0) return {&s->graph, id};
    s = s->parent;
    id = outer;
  }
}

// The tensor a value holds when it is an initializer or the output of a Constant node with a
// `value` tensor; nullptr otherwise.
const OwnedTensor* KnownConstant(const Scope& scope, int value_id) {
  const auto [g, id] = Resolve(scope, value_id);
  const Value& v = g->value(id);
  if (v.constant) return v.constant.get();
  if (v.producer < 0) return nullptr;
  const Node& producer = g->node(v.producer);
  if (producer.op_type != "Constant" || !producer.domain.empty()) return nullptr;
  const Attribute* a = producer.FindAttribute("value");
  if (a == nullptr || a->type != AttributeType::kTensor || a->t == nullptr) return nullptr;
  return a->t.get();
}

const ValueType& KnownType(const Scope& scope, int value_id) {
  const auto [g, id] = Resolve(scope, value_id);
  return g->value(id).type;
}

std::optional<int> KnownRank(const Scope& scope, int id) {
  if (const OwnedTensor* t = KnownConstant(scope, id)) return t->shape().rank();
  const ValueType& type = KnownType(scope, id);
  if (!type.has_shape) return std::nullopt;
  return static_cast<int>(type.dims.size());
}

std::optional<int64_t> KnownDim(const Scope& scope, int id, int axis) {
  if (const OwnedTensor* t = KnownConstant(scope, id)) {
    if (axis >= t->shape().rank()) return std::nullopt;
    return t->shape().dim(axis);
  }
  const ValueType& type = KnownType(scope, id);
  if (!type.has_shape || axis >= static_cast<int>(type.dims.size())) return std::nullopt;
  const Dim& d = type.dims[static_cast<size_t>(axis)];
  if (!d.known()) return std::nullopt;
  return d.value;
}

// True when values `a` and `b` are known to have different shapes.
bool KnownToDiffer(const Scope& scope, int a, int b) {
  const std::optional<int> ra = KnownRank(scope, a), rb = KnownRank(scope, b);
  if (!ra || !rb) return false;
  if (*ra != *rb) return true;
  for (int i = 0; i < *ra; ++i) {
    const std::optional<int64_t> da = KnownDim(scope, a, i), db = KnownDim(scope, b, i);
    if (da && db && *da != *db) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The conversion of one node: what a step sees and may add.

class NodeRewrite {
 public:
  // `graph` is the graph being built, `scope` the same graph with its enclosing ones.
  NodeRewrite(Graph& graph, const Scope& scope, std::string label, int64_t opset)
      : graph_(graph), scope_(scope), label_(std::move(label)), opset_(opset) {}

  const Graph& graph() const { return graph_; }
  const Scope& scope() const { return scope_; }

  // UNIMPLEMENTED: the node has no opset 7 form kiln can build.
  Status Unconvertible(const Node& node, std::string_view reason) const {
    return Status::Unimplemented(Message(node, reason));
  }
  // INVALID_ARGUMENT: the legacy node itself is malformed.
  Status Invalid(const Node& node, std::string_view reason) const {
    return Status::InvalidArgument(Message(node, reason));
  }

  // The INT attribute `name`, or `default_value` when absent.
  Result<int64_t> Int(const Node& node, std::string_view name, int64_t default_value) const {
    const Attribute* a = node.FindAttribute(name);
    if (a == nullptr) return default_value;
    if (a->type != AttributeType::kInt) {
      return Invalid(node, fmt::format("attribute '{}' must be an INT", name));
    }
    return a->i;
  }

  Result<float> Float(const Node& node, std::string_view name) const {
    const Attribute* a = node.FindAttribute(name);
    if (a == nullptr) return Invalid(node, fmt::format("attribute '{}' is required", name));
    if (a->type != AttributeType::kFloat) {
      return Invalid(node, fmt::format("attribute '{}' must be a FLOAT", name));
    }
    return a->f;
  }

  // Adds an initializer holding `tensor`, named after `hint`, and returns its id.
  int AddInitializer(std::string_view hint, OwnedTensor tensor) {
    Value v;
    v.name = UniqueName(hint);
    v.type.dtype = tensor.dtype();
    v.type.has_shape = true;
    for (int64_t d : tensor.shape().dims()) v.type.dims.push_back(Dim{d, {}});
    v.constant = std::make_shared<const OwnedTensor>(std::move(tensor));
    return graph_.AddValue(std::move(v));
  }

  // Adds an INT64 1-D initializer.
  Result<int> AddInt64Initializer(std::string_view hint, const std::vector<int64_t>& values) {
    KILN_ASSIGN_OR_RETURN(
        OwnedTensor t,
        OwnedTensor::Allocate(DataType::kInt64, Shape{static_cast<int64_t>(values.size())}));
    std::copy(values.begin(), values.end(), t.data<int64_t>());
    return AddInitializer(hint, std::move(t));
  }

  // Value `id` (of rank `rank`) with `count` trailing dims of 1 appended: a reshaped initializer
  // (sharing the data) when `id` is one, otherwise the output of a new Unsqueeze node.
  Result<int> AppendUnitDims(const Node& node, int id, int rank, int count) {
    const Value& v = graph_.value(id);
    const std::string hint = v.name + "_unsqueezed";
    if (v.constant) {
      std::vector<int64_t> dims(v.constant->shape().dims().begin(),
                                v.constant->shape().dims().end());
      dims.resize(dims.size() + static_cast<size_t>(count), 1);
      Result<Shape> shape = Shape::Create(dims);
      if (!shape.ok()) return Invalid(node, shape.status().message());
      OwnedTensor reshaped = *v.constant;
      KILN_RETURN_IF_ERROR(reshaped.Reshape(*shape));
      return AddInitializer(hint, std::move(reshaped));
    }
    std::vector<int64_t> axes;
    axes.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) axes.push_back(rank + i);
    const ValueType& type = KnownType(scope_, id);
    Value out;
    out.name = UniqueName(hint);
    out.type.dtype = type.dtype;
    if (type.has_shape) {
      out.type.has_shape = true;
      out.type.dims = type.dims;
      out.type.dims.resize(out.type.dims.size() + static_cast<size_t>(count), Dim{1, {}});
    }
    Node unsqueeze;
    unsqueeze.name = node.name.empty() ? std::string() : node.name + "_unsqueeze";
    unsqueeze.op_type = "Unsqueeze";
    unsqueeze.inputs = {id};
    unsqueeze.attributes.push_back(Attribute::Ints("axes", std::move(axes)));
    const int out_id = graph_.AddValue(std::move(out));
    unsqueeze.outputs = {out_id};
    graph_.AddNode(std::move(unsqueeze));
    return out_id;
  }

 private:
  std::string Message(const Node& node, std::string_view reason) const {
    return fmt::format("op {} (opset {}) cannot be converted to opset {}: {} ({})", node.op_type,
                       opset_, kAdaptedOpset, reason, label_);
  }

  std::string UniqueName(std::string_view hint) const {
    std::string name(hint);
    for (int i = 1; graph_.FindValue(name) >= 0; ++i) name = fmt::format("{}_{}", hint, i);
    return name;
  }

  Graph& graph_;
  const Scope& scope_;
  std::string label_;
  int64_t opset_;
};

// ---------------------------------------------------------------------------------------------
// Steps. Each converts a node of one schema version into the next version's form.

using StepFn = Status (*)(NodeRewrite& rw, Node& node);

Status Compatible(NodeRewrite&, Node&) { return Status::OK(); }

// An attribute the next version adds (with a default that keeps the old meaning) must not be
// present yet.
Status RejectAttributeBefore(NodeRewrite& rw, const Node& node, std::string_view name,
                             int version) {
  if (node.FindAttribute(name) == nullptr) return Status::OK();
  return rw.Invalid(node,
                    fmt::format("attribute '{}' does not exist before opset {}", name, version));
}

Status AveragePoolCountIncludePad(NodeRewrite& rw, Node& node) {
  return RejectAttributeBefore(rw, node, "count_include_pad", 7);
}

Status GruLinearBeforeReset(NodeRewrite& rw, Node& node) {
  return RejectAttributeBefore(rw, node, "linear_before_reset", 3);
}

Status RemoveConsumedInputs(NodeRewrite&, Node& node) {
  RemoveAttribute(node, "consumed_inputs");
  return Status::OK();
}

// Opset 1-6 `broadcast`/`axis` (Caffe2 broadcasting): broadcast=0 needs equal shapes, which
// numpy broadcasting handles alike (shapes known to differ are refused here, as the old operator
// refused them); broadcast=1 lays B onto A's dims starting at `axis` (default rank(A) - rank(B),
// B's dims of size 1 broadcasting), which is numpy broadcasting once B has rank(A) - axis dims.
Status LegacyBroadcast(NodeRewrite& rw, Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t broadcast, rw.Int(node, "broadcast", 0));
  const Attribute* axis_attr = node.FindAttribute("axis");
  if (!node.has_input(0) || !node.has_input(1)) {
    return rw.Invalid(node, "inputs A and B are required");
  }
  if (broadcast == 0 && KnownToDiffer(rw.scope(), node.inputs[0], node.inputs[1])) {
    return rw.Invalid(node,
                      "A and B have different shapes and broadcast=0 (before opset 7 only "
                      "broadcast=1 broadcasts)");
  }
  if (broadcast != 0 && axis_attr != nullptr) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, rw.Int(node, "axis", 0));
    const std::optional<int> a_rank = KnownRank(rw.scope(), node.inputs[0]);
    const std::optional<int> b_rank = KnownRank(rw.scope(), node.inputs[1]);
    if (!a_rank || !b_rank) {
      return rw.Unconvertible(
          node, fmt::format("broadcast=1 with axis={} needs the ranks of A and B, and the rank of "
                            "{} is unknown",
                            axis, !a_rank ? "A" : "B"));
    }
    if (axis < 0 || axis + *b_rank > *a_rank) {
      return rw.Invalid(node, fmt::format("broadcast axis {} does not fit B (rank {}) into A "
                                          "(rank {})",
                                          axis, *b_rank, *a_rank));
    }
    const int trailing = *a_rank - static_cast<int>(axis) - *b_rank;
    if (trailing > 0) {
      KILN_ASSIGN_OR_RETURN(node.inputs[1],
                            rw.AppendUnitDims(node, node.inputs[1], *b_rank, trailing));
    }
  }
  RemoveAttribute(node, "broadcast");
  RemoveAttribute(node, "axis");
  return Status::OK();
}

// Gemm-6's broadcast=0 requires C to be [M, N]; Gemm-7 broadcasts C to [M, N], which covers it
// (a C known not to be [M, N] is refused here, as the old operator refused it).
Status GemmRemoveBroadcast(NodeRewrite& rw, Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t broadcast, rw.Int(node, "broadcast", 0));
  if (broadcast == 0 && node.has_input(0) && node.has_input(1) && node.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(int64_t trans_a, rw.Int(node, "transA", 0));
    KILN_ASSIGN_OR_RETURN(int64_t trans_b, rw.Int(node, "transB", 0));
    const Scope& s = rw.scope();
    const int c = node.inputs[2];
    const std::optional<int> c_rank = KnownRank(s, c);
    const std::optional<int64_t> m = KnownDim(s, node.inputs[0], trans_a != 0 ? 1 : 0);
    const std::optional<int64_t> n = KnownDim(s, node.inputs[1], trans_b != 0 ? 0 : 1);
    const std::optional<int64_t> c0 = KnownDim(s, c, 0), c1 = KnownDim(s, c, 1);
    if ((c_rank && *c_rank != 2) || (m && c0 && *m != *c0) || (n && c1 && *n != *c1)) {
      return rw.Invalid(node,
                        "C is not [M, N] and broadcast=0 (before opset 7 only broadcast=1 "
                        "broadcasts C)");
    }
  }
  RemoveAttribute(node, "broadcast");
  return Status::OK();
}

// PRelu-6 applies a 1-D slope of X's channel count along dim 1 (a one-element slope everywhere);
// PRelu-7 broadcasts the slope numpy-style, which aligns it with X's last dim instead.
Status PReluChannelSlope(NodeRewrite& rw, Node& node) {
  if (!node.has_input(0) || !node.has_input(1)) {
    return rw.Invalid(node, "inputs X and slope are required");
  }
  const Scope& g = rw.scope();
  const int x = node.inputs[0], slope = node.inputs[1];
  const std::optional<int> slope_rank = KnownRank(g, slope);
  if (slope_rank.has_value() && *slope_rank != 1) return Status::OK();
  const std::optional<int64_t> slope_len = KnownDim(g, slope, 0);
  if (slope_len == 1) return Status::OK();
  const std::optional<int> x_rank = KnownRank(g, x);
  if (!slope_rank || !x_rank) {
    return rw.Unconvertible(node, fmt::format("the rank of {} is unknown, so whether the slope "
                                              "applies per channel cannot be decided",
                                              !slope_rank ? "slope" : "X"));
  }
  if (*x_rank <= 2) return Status::OK();  // dim 1 is the last dim: numpy aligns it already
  const std::optional<int64_t> channels = KnownDim(g, x, 1);
  if (slope_len && channels && *slope_len != *channels) return Status::OK();  // not per channel
  KILN_ASSIGN_OR_RETURN(node.inputs[1], rw.AppendUnitDims(node, slope, 1, *x_rank - 2));
  return Status::OK();
}

Status BatchNormIsTest(NodeRewrite& rw, Node& node) {
  KILN_ASSIGN_OR_RETURN(int64_t is_test, rw.Int(node, "is_test", 0));
  if (is_test == 0) {
    return rw.Unconvertible(node,
                            "is_test=0 (training mode, the default before opset 7) normalizes "
                            "with batch statistics, which has no opset 7 inference form; only "
                            "is_test=1 models are supported");
  }
  RemoveAttribute(node, "is_test");
  return Status::OK();
}

Status DropoutIsTest(NodeRewrite& rw, Node& node) {
  KILN_RETURN_IF_ERROR(rw.Int(node, "is_test", 0).status());
  RemoveAttribute(node, "is_test");
  return Status::OK();
}

// Cast-1 names the target type ("FLOAT"); Cast-6 gives its TensorProto.DataType number.
Status CastTypeName(NodeRewrite& rw, Node& node) {
  Attribute* to = FindMutableAttribute(node, "to");
  if (to == nullptr) return rw.Invalid(node, "attribute 'to' is required");
  if (to->type != AttributeType::kString) {
    return rw.Invalid(node, "attribute 'to' must be a STRING type name before opset 6");
  }
  onnx::TensorProto_DataType number;
  if (!onnx::TensorProto_DataType_Parse(to->s, &number) ||
      number == onnx::TensorProto_DataType_UNDEFINED) {
    return rw.Invalid(node, fmt::format("attribute 'to' names no known type: '{}'", to->s));
  }
  *to = Attribute::Int("to", static_cast<int64_t>(number));
  return Status::OK();
}

// Reshape-1 takes the target shape as an attribute; Reshape-5 as an INT64 input.
Status ReshapeShapeInput(NodeRewrite& rw, Node& node) {
  RemoveAttribute(node, "consumed_inputs");
  const Attribute* shape = node.FindAttribute("shape");
  if (shape == nullptr) return rw.Invalid(node, "attribute 'shape' is required");
  if (shape->type != AttributeType::kInts) {
    return rw.Invalid(node, "attribute 'shape' must be INTS");
  }
  if (!node.has_input(0)) return rw.Invalid(node, "input 'data' is required");
  const std::string hint = rw.graph().value(node.inputs[0]).name + "_shape";
  KILN_ASSIGN_OR_RETURN(int id, rw.AddInt64Initializer(hint, shape->ints));
  node.inputs.resize(1);
  node.inputs.push_back(id);
  RemoveAttribute(node, "shape");
  return Status::OK();
}

// Concat-1's axis defaults to 1; Concat-4 requires it.
Status ConcatDefaultAxis(NodeRewrite&, Node& node) {
  if (node.FindAttribute("axis") == nullptr) node.attributes.push_back(Attribute::Int("axis", 1));
  return Status::OK();
}

// Pad-1's `paddings` is Pad-2's `pads` (same [begins..., ends...] layout).
Status PadRenamePaddings(NodeRewrite& rw, Node& node) {
  if (node.FindAttribute("pads") != nullptr) {
    return rw.Invalid(node, "attribute 'pads' does not exist before opset 2 (use 'paddings')");
  }
  Attribute* paddings = FindMutableAttribute(node, "paddings");
  if (paddings == nullptr) return rw.Invalid(node, "attribute 'paddings' is required");
  paddings->name = "pads";
  return Status::OK();
}

// Split-1 may take the split sizes as input 1; from Split-2 they are the `split` attribute.
Status SplitSizesAttribute(NodeRewrite& rw, Node& node) {
  if (!node.has_input(1)) {
    node.inputs.resize(std::min<size_t>(node.inputs.size(), 1));
    return Status::OK();
  }
  if (node.FindAttribute("split") != nullptr) {
    return rw.Invalid(node, "has both the 'split' attribute and the split input");
  }
  const OwnedTensor* sizes = KnownConstant(rw.scope(), node.inputs[1]);
  if (sizes == nullptr) {
    return rw.Unconvertible(node,
                            "the split input is computed at run time; opset 7 takes the "
                            "split sizes as an attribute, so the input must be a constant");
  }
  if (sizes->shape().rank() > 1 ||
      (sizes->dtype() != DataType::kInt64 && sizes->dtype() != DataType::kInt32)) {
    return rw.Invalid(node, fmt::format("the split input must be a 1-D INT64 or INT32 tensor, got "
                                        "{}{}",
                                        DataTypeName(sizes->dtype()), sizes->shape().ToString()));
  }
  std::vector<int64_t> split;
  for (int64_t i = 0; i < sizes->num_elements(); ++i) {
    split.push_back(sizes->dtype() == DataType::kInt64 ? sizes->data<const int64_t>()[i]
                                                       : sizes->data<const int32_t>()[i]);
  }
  node.inputs.resize(1);
  node.attributes.push_back(Attribute::Ints("split", std::move(split)));
  return Status::OK();
}

// Reads a one-element integer constant input of Tile-1.
Result<int64_t> TileScalar(NodeRewrite& rw, const Node& node, int input, std::string_view what) {
  const OwnedTensor* t =
      node.has_input(input) ? KnownConstant(rw.scope(), node.inputs[input]) : nullptr;
  if (t == nullptr) {
    return rw.Unconvertible(node, fmt::format("input '{}' is not a constant; opset 7 needs the "
                                              "repeats for every axis when the graph is loaded",
                                              what));
  }
  if (t->num_elements() != 1 ||
      (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32)) {
    return rw.Invalid(node, fmt::format("input '{}' must be one INT64 or INT32 value, got {}{}",
                                        what, DataTypeName(t->dtype()), t->shape().ToString()));
  }
  return t->dtype() == DataType::kInt64 ? t->data<const int64_t>()[0]
                                        : int64_t{t->data<const int32_t>()[0]};
}

// Tile-1 repeats its input `tiles` times along `axis` (both inputs); Tile-6 takes one repeat count
// per axis.
Status TileRepeatsInput(NodeRewrite& rw, Node& node) {
  if (!node.has_input(0)) return rw.Invalid(node, "input 'input' is required");
  KILN_ASSIGN_OR_RETURN(int64_t tiles, TileScalar(rw, node, 1, "tiles"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, TileScalar(rw, node, 2, "axis"));
  const std::optional<int> rank = KnownRank(rw.scope(), node.inputs[0]);
  if (!rank) {
    return rw.Unconvertible(node,
                            "the rank of the input is unknown, so the repeats cannot be "
                            "spelled out");
  }
  if (axis < 0 || axis >= *rank) {
    return rw.Invalid(node,
                      fmt::format("axis {} is out of range for an input of rank {}", axis, *rank));
  }
  if (tiles < 0) return rw.Invalid(node, fmt::format("tiles is {}, expected >= 0", tiles));
  std::vector<int64_t> repeats(static_cast<size_t>(*rank), 1);
  repeats[static_cast<size_t>(axis)] = tiles;
  const std::string hint = rw.graph().value(node.inputs[0]).name + "_repeats";
  KILN_ASSIGN_OR_RETURN(int id, rw.AddInt64Initializer(hint, repeats));
  node.inputs = {node.inputs[0], id};
  return Status::OK();
}

// Upsample-1 (NCHW only) scales H and W by height_scale and width_scale; Upsample-7 takes one
// scale per dim. Its "bilinear" mode is Upsample-7's "linear".
Status UpsampleScales(NodeRewrite& rw, Node& node) {
  KILN_ASSIGN_OR_RETURN(float height, rw.Float(node, "height_scale"));
  KILN_ASSIGN_OR_RETURN(float width, rw.Float(node, "width_scale"));
  if (node.has_input(0)) {
    const std::optional<int> rank = KnownRank(rw.scope(), node.inputs[0]);
    if (rank && *rank != 4) {
      return rw.Invalid(node, fmt::format("X must be 4-D [N, C, H, W], it has rank {}", *rank));
    }
  }
  if (Attribute* mode = FindMutableAttribute(node, "mode")) {
    if (mode->type == AttributeType::kString && mode->s == "bilinear") mode->s = "linear";
  }
  RemoveAttribute(node, "height_scale");
  RemoveAttribute(node, "width_scale");
  Attribute scales;
  scales.name = "scales";
  scales.type = AttributeType::kFloats;
  scales.floats = {1.0f, 1.0f, height, width};
  node.attributes.push_back(std::move(scales));
  return Status::OK();
}

// RNN-1, GRU-3 and LSTM-1's `output_sequence` only said whether Y is wanted, which opset 7 reads
// from whether the output is named.
Status RemoveOutputSequence(NodeRewrite& rw, Node& node) {
  KILN_RETURN_IF_ERROR(rw.Int(node, "output_sequence", 0).status());
  RemoveAttribute(node, "output_sequence");
  return Status::OK();
}

// LpPool-1 / GlobalLpPool-1 take p as a FLOAT; from version 2 it is an INT.
Status LpPoolIntegerP(NodeRewrite& rw, Node& node) {
  Attribute* p = FindMutableAttribute(node, "p");
  if (p == nullptr) return Status::OK();  // both default to 2
  if (p->type != AttributeType::kFloat) return rw.Invalid(node, "attribute 'p' must be a FLOAT");
  if (!(p->f >= 1 && p->f <= 1e6f) || std::trunc(p->f) != p->f) {
    return rw.Unconvertible(node, fmt::format("p={} is not a positive whole number, which the "
                                              "integer p of opset 2 needs",
                                              p->f));
  }
  *p = Attribute::Int("p", static_cast<int64_t>(p->f));
  if (node.op_type == "LpPool" && node.FindAttribute("kernel_shape") == nullptr) {
    return rw.Unconvertible(node, "attribute 'kernel_shape' is required from opset 2");
  }
  return Status::OK();
}

struct Step {
  std::string_view op;
  int from;  // schema version the step converts from
  int to;    // the next schema version of the op
  StepFn fn;
};

// Every schema change of the default domain between opset 1 and opset 7.
constexpr Step kSteps[] = {
    {"Abs", 1, 6, RemoveConsumedInputs},
    {"Add", 1, 6, RemoveConsumedInputs},
    {"Add", 6, 7, LegacyBroadcast},
    {"And", 1, 7, LegacyBroadcast},
    {"AveragePool", 1, 7, AveragePoolCountIncludePad},
    {"BatchNormalization", 1, 6, RemoveConsumedInputs},
    {"BatchNormalization", 6, 7, BatchNormIsTest},
    {"Cast", 1, 6, CastTypeName},
    {"Ceil", 1, 6, RemoveConsumedInputs},
    {"Clip", 1, 6, RemoveConsumedInputs},
    {"Concat", 1, 4, ConcatDefaultAxis},
    {"Div", 1, 6, RemoveConsumedInputs},
    {"Div", 6, 7, LegacyBroadcast},
    {"Dropout", 1, 6, RemoveConsumedInputs},
    {"Dropout", 6, 7, DropoutIsTest},
    {"Elu", 1, 6, RemoveConsumedInputs},
    {"Equal", 1, 7, LegacyBroadcast},
    {"Exp", 1, 6, RemoveConsumedInputs},
    {"Floor", 1, 6, RemoveConsumedInputs},
    {"GRU", 1, 3, GruLinearBeforeReset},
    {"GRU", 3, 7, RemoveOutputSequence},
    {"Gemm", 1, 6, Compatible},  // only the type constraints changed
    {"Gemm", 6, 7, GemmRemoveBroadcast},
    {"GlobalLpPool", 1, 2, LpPoolIntegerP},
    {"Greater", 1, 7, LegacyBroadcast},
    {"HardSigmoid", 1, 6, RemoveConsumedInputs},
    {"InstanceNormalization", 1, 6, RemoveConsumedInputs},
    {"LSTM", 1, 7, RemoveOutputSequence},
    {"LeakyRelu", 1, 6, RemoveConsumedInputs},
    {"Less", 1, 7, LegacyBroadcast},
    {"Log", 1, 6, RemoveConsumedInputs},
    {"LpPool", 1, 2, LpPoolIntegerP},
    {"Max", 1, 6, RemoveConsumedInputs},
    {"Mean", 1, 6, RemoveConsumedInputs},
    {"Min", 1, 6, RemoveConsumedInputs},
    {"Mul", 1, 6, RemoveConsumedInputs},
    {"Mul", 6, 7, LegacyBroadcast},
    {"Neg", 1, 6, RemoveConsumedInputs},
    {"Or", 1, 7, LegacyBroadcast},
    {"PRelu", 1, 6, RemoveConsumedInputs},
    {"PRelu", 6, 7, PReluChannelSlope},
    {"Pad", 1, 2, PadRenamePaddings},
    {"Pow", 1, 7, LegacyBroadcast},
    {"RNN", 1, 7, RemoveOutputSequence},
    {"Reciprocal", 1, 6, RemoveConsumedInputs},
    {"Relu", 1, 6, RemoveConsumedInputs},
    {"Reshape", 1, 5, ReshapeShapeInput},
    {"Selu", 1, 6, RemoveConsumedInputs},
    {"Sigmoid", 1, 6, RemoveConsumedInputs},
    {"Split", 1, 2, SplitSizesAttribute},
    {"Sqrt", 1, 6, RemoveConsumedInputs},
    {"Sub", 1, 6, RemoveConsumedInputs},
    {"Sub", 6, 7, LegacyBroadcast},
    {"Sum", 1, 6, RemoveConsumedInputs},
    {"Tanh", 1, 6, RemoveConsumedInputs},
    {"Tile", 1, 6, TileRepeatsInput},
    {"Upsample", 1, 7, UpsampleScales},
    {"Xor", 1, 7, LegacyBroadcast},
};

const Step* FindStep(std::string_view op, int from) {
  for (const Step& s : kSteps) {
    if (s.op == op && s.from == from) return &s;
  }
  return nullptr;
}

// Schema version of `op` in force at `opset` of the default domain; 0 when the op does not exist
// there.
int SchemaVersion(const std::string& op, int64_t opset) {
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset), onnx::ONNX_DOMAIN);
  return schema == nullptr ? 0 : schema->since_version();
}

// ---------------------------------------------------------------------------------------------
// Graphs.

Result<std::shared_ptr<Graph>> AdaptGraph(const Graph& source, int64_t opset, const Scope* outer);

std::string NodeLabel(const Node& node, int index) {
  if (!node.name.empty()) return fmt::format("node '{}'", node.name);
  return fmt::format("node #{}", index);
}

Status AdaptSubgraphs(Node& node, std::string_view label, int64_t opset, const Scope& scope) {
  for (Attribute& a : node.attributes) {
    const std::string where = fmt::format("attribute '{}' of {} ({})", a.name, label, node.op_type);
    if (a.type == AttributeType::kGraph && a.g != nullptr) {
      Result<std::shared_ptr<Graph>> g = AdaptGraph(*a.g, opset, &scope);
      if (!g.ok()) return g.status().WithContext(where);
      a.g = std::move(g).value();
    } else if (a.type == AttributeType::kGraphs) {
      for (size_t i = 0; i < a.graphs.size(); ++i) {
        if (a.graphs[i] == nullptr) continue;
        Result<std::shared_ptr<Graph>> g = AdaptGraph(*a.graphs[i], opset, &scope);
        if (!g.ok()) return g.status().WithContext(fmt::format("graph {} of {}", i, where));
        a.graphs[i] = std::move(g).value();
      }
    }
  }
  return Status::OK();
}

Status AdaptNode(Graph& graph, const Scope& scope, Node& node, std::string_view label,
                 int64_t opset) {
  KILN_RETURN_IF_ERROR(AdaptSubgraphs(node, label, opset, scope));
  if (!node.domain.empty()) return Status::OK();
  NodeRewrite rw(graph, scope, std::string(label), opset);
  int version = SchemaVersion(node.op_type, opset);
  const int target = SchemaVersion(node.op_type, kAdaptedOpset);
  if (version == 0) {
    if (target == 0) return Status::OK();  // not an ONNX op: the kernel lookup reports it
    return rw.Invalid(node, fmt::format("the op does not exist before opset {}", target));
  }
  while (version != target) {
    const Step* step = FindStep(node.op_type, version);
    if (step == nullptr) {
      return rw.Unconvertible(
          node, fmt::format("no version adapter from version {} to version {}", version, target));
    }
    KILN_CHECK(step->to > version && step->to <= target, "bad version step for ", node.op_type);
    KILN_RETURN_IF_ERROR(step->fn(rw, node));
    version = step->to;
  }
  return Status::OK();
}

Result<std::shared_ptr<Graph>> AdaptGraph(const Graph& source, int64_t opset, const Scope* outer) {
  auto graph = std::make_shared<Graph>();
  graph->name = source.name;
  graph->opset_imports = source.opset_imports;
  graph->opset_imports[""] = kAdaptedOpset;
  graph->ir_version = source.ir_version;
  for (const Value& v : source.values()) {
    Value copy = v;
    copy.producer = -1;  // set again as the nodes are added
    graph->AddValue(std::move(copy));
  }
  graph->inputs = source.inputs;
  graph->outputs = source.outputs;
  const Scope scope{*graph, outer};
  for (int i = 0; i < source.num_nodes(); ++i) {
    Node node = source.node(i);
    KILN_RETURN_IF_ERROR(AdaptNode(*graph, scope, node, NodeLabel(node, i), opset));
    graph->AddNode(std::move(node));
  }
  return graph;
}

}  // namespace

Result<std::shared_ptr<Graph>> AdaptToOpset7(std::shared_ptr<Graph> graph) {
  const auto it = graph->opset_imports.find("");
  if (it == graph->opset_imports.end() || it->second >= kAdaptedOpset) return graph;
  return AdaptGraph(*graph, it->second, nullptr);
}

std::vector<std::pair<std::string, int>> VersionAdapterSteps() {
  std::vector<std::pair<std::string, int>> steps;
  for (const Step& s : kSteps) steps.emplace_back(std::string(s.op), s.from);
  return steps;
}

}  // namespace kiln
