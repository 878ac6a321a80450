// SPDX-License-Identifier: Apache-2.0
// ONNX ModelProto -> kiln Graph (importer.h).
//
// NOTE: the import runs in two passes over the protobuf. CheckGraphStructure walks the graph and
// its subgraphs with a chain of name scopes and reports naming and ordering mistakes in kiln's
// words before libonnx's checker sees them (the checker's messages for these are vaguer: it does
// not name the later producer). GraphBuilder then converts, assuming a checked model but still
// returning errors rather than checking, since its input is a file. In between, the checker runs
// in process and shape inference in a child process (shape_inference.h explains why). Large
// tensors are copied
// into kiln buffers and their protobuf storage released one by one, so peak memory stays near
// one copy of the weights plus the largest tensor.

#include "graph/onnx/importer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "base/logging.h"
#include "graph/onnx/file_io.h"
#include "graph/onnx/gradient.h"
#include "graph/onnx/shape_inference.h"
#include "graph/onnx/tensor_proto_convert.h"
#include "graph/onnx/version_adapter.h"
#include "onnx/checker.h"

namespace kiln {
namespace {

using onnx_internal::DataTypeFromOnnx;
using onnx_internal::OnnxTypeName;
using onnx_internal::TensorFromProto;

// Generous: inference is linear in the model size and takes well under a second for real models.
constexpr std::chrono::milliseconds kShapeInferenceTimeout{120000};

std::string NormalizeDomain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

std::string NodeLabel(const onnx::NodeProto& node, int index) {
  if (!node.name().empty()) return fmt::format("node '{}' ({})", node.name(), node.op_type());
  return fmt::format("node #{} ({})", index, node.op_type());
}

std::string AttributeLabel(const onnx::AttributeProto& attr, std::string_view node_label) {
  return fmt::format("attribute '{}' of {}", attr.name(), node_label);
}

// ---------------------------------------------------------------------------------------------
// Pass 1: names, order, tensors.

// The names defined so far in one graph, chained to the enclosing graph's scope.
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_set<std::string> names;

  bool Sees(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      if (s->names.count(name) > 0) return true;
    }
    return false;
  }
};

Status CheckGraphStructure(const onnx::GraphProto& graph, const Scope* outer);

Status CheckAttributeStructure(const onnx::AttributeProto& attr, std::string_view node_label,
                               const Scope& scope) {
  using A = onnx::AttributeProto;
  const std::string label = AttributeLabel(attr, node_label);
  switch (attr.type()) {
    case A::TENSOR:
      return onnx_internal::ValidateTensorProto(attr.t(), "tensor " + label).status();
    case A::TENSORS:
      for (int i = 0; i < attr.tensors_size(); ++i) {
        KILN_RETURN_IF_ERROR(onnx_internal::ValidateTensorProto(
                                 attr.tensors(i), fmt::format("tensor {} of {}", i, label))
                                 .status());
      }
      return Status::OK();
    case A::GRAPH:
      return CheckGraphStructure(attr.g(), &scope).WithContext(label);
    case A::GRAPHS:
      for (int i = 0; i < attr.graphs_size(); ++i) {
        KILN_RETURN_IF_ERROR(CheckGraphStructure(attr.graphs(i), &scope)
                                 .WithContext(fmt::format("graph {} of {}", i, label)));
      }
      return Status::OK();
    default:
      return Status::OK();
  }
}

Status CheckGraphStructure(const onnx::GraphProto& graph, const Scope* outer) {
  Scope scope{outer, {}};
  for (int i = 0; i < graph.input_size(); ++i) {
    const std::string& name = graph.input(i).name();
    if (name.empty()) return Status::InvalidArgument(fmt::format("graph input #{} has no name", i));
    if (!scope.names.insert(name).second) {
      return Status::InvalidArgument(fmt::format("graph input '{}' is declared twice", name));
    }
  }
  std::unordered_set<std::string> initializers;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto& t = graph.initializer(i);
    if (t.name().empty()) {
      return Status::InvalidArgument(fmt::format("initializer #{} has no name", i));
    }
    if (!initializers.insert(t.name()).second) {
      return Status::InvalidArgument(fmt::format("initializer '{}' is declared twice", t.name()));
    }
    KILN_RETURN_IF_ERROR(
        onnx_internal::ValidateTensorProto(t, fmt::format("initializer '{}'", t.name())).status());
    scope.names.insert(t.name());  // may also be a graph input: that is allowed
  }
  if (graph.sparse_initializer_size() > 0) {
    return Status::Unimplemented(
        fmt::format("sparse initializer '{}': sparse tensors are not supported",
                    graph.sparse_initializer(0).values().name()));
  }
  // Every node output, for "produced later" messages.
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (out.empty()) continue;
      if (scope.names.count(out) > 0) {
        return Status::InvalidArgument(
            fmt::format("{} output '{}' redefines a graph input or initializer",
                        NodeLabel(graph.node(i), i), out));
      }
      auto [it, inserted] = producer.emplace(out, i);
      if (!inserted) {
        return Status::InvalidArgument(fmt::format(
            "value '{}' is produced twice, by {} and by {}", out,
            NodeLabel(graph.node(it->second), it->second), NodeLabel(graph.node(i), i)));
      }
    }
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const std::string label = NodeLabel(node, i);
    for (const std::string& in : node.input()) {
      if (in.empty() || scope.Sees(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end()) {
        return Status::InvalidArgument(fmt::format(
            "{} reads unknown value '{}' (not a graph input, an initializer or an output of an "
            "earlier node)",
            label, in));
      }
      if (it->second == i) {
        return Status::InvalidArgument(fmt::format("{} reads its own output '{}'", label, in));
      }
      return Status::InvalidArgument(fmt::format(
          "{} reads '{}', which is produced later by {}; ONNX requires nodes in topological order",
          label, in, NodeLabel(graph.node(it->second), it->second)));
    }
    for (const onnx::AttributeProto& attr : node.attribute()) {
      KILN_RETURN_IF_ERROR(CheckAttributeStructure(attr, label, scope));
    }
    for (const std::string& out : node.output()) {
      if (!out.empty()) scope.names.insert(out);
    }
  }
  for (int i = 0; i < graph.output_size(); ++i) {
    const std::string& name = graph.output(i).name();
    if (name.empty()) {
      return Status::InvalidArgument(fmt::format("graph output #{} has no name", i));
    }
    if (!scope.Sees(name)) {
      return Status::InvalidArgument(fmt::format(
          "graph output '{}' is not a graph input, an initializer or a node output", name));
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Pass 2: conversion.

// The kind of a TypeProto that kiln cannot represent, for messages.
std::string_view TypeKindName(const onnx::TypeProto& type) {
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType:
      return "a tensor";
    case onnx::TypeProto::kSequenceType:
      return "a sequence";
    case onnx::TypeProto::kMapType:
      return "a map";
    case onnx::TypeProto::kOptionalType:
      return "an optional";
    case onnx::TypeProto::kSparseTensorType:
      return "a sparse tensor";
    case onnx::TypeProto::kOpaqueType:
      return "an opaque";
    case onnx::TypeProto::VALUE_NOT_SET:
      break;
  }
  return "an unknown";
}

// `what` names the value in messages ("value 'x'").
Result<ValueType> ConvertTensorType(const onnx::TypeProto_Tensor& tensor, std::string_view what) {
  ValueType out;
  if (tensor.elem_type() != onnx::TensorProto::UNDEFINED) {
    std::optional<DataType> dtype = DataTypeFromOnnx(tensor.elem_type());
    if (!dtype) {
      return Status::Unimplemented(
          fmt::format("{} has element type {}, which kiln does not support", what,
                      OnnxTypeName(tensor.elem_type())));
    }
    out.dtype = *dtype;
  }
  if (tensor.has_shape()) {
    out.has_shape = true;
    out.dims.reserve(static_cast<size_t>(tensor.shape().dim_size()));
    for (const onnx::TensorShapeProto_Dimension& d : tensor.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        out.dims.push_back(Dim{d.dim_value(), {}});
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        out.dims.push_back(Dim{-1, d.dim_param()});
      } else {
        out.dims.push_back(Dim{});
      }
    }
  }
  return out;
}

// A tensor, a sequence of tensors, or an optional of either. The element of a sequence and the
// content of an optional may be left unset by the model (`elem` stays null).
Result<ValueType> ConvertType(const onnx::TypeProto& type, std::string_view what) {
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType:
      return ConvertTensorType(type.tensor_type(), what);
    case onnx::TypeProto::VALUE_NOT_SET:
      return ValueType{};
    case onnx::TypeProto::kSequenceType: {
      ValueType out;
      out.kind = TypeKind::kSequence;
      if (!type.sequence_type().has_elem_type() ||
          type.sequence_type().elem_type().value_case() == onnx::TypeProto::VALUE_NOT_SET) {
        return out;
      }
      const onnx::TypeProto& elem = type.sequence_type().elem_type();
      if (elem.value_case() != onnx::TypeProto::kTensorType) {
        return Status::Unimplemented(
            fmt::format("{} is a sequence of {} type; kiln supports sequences of tensors only",
                        what, TypeKindName(elem)));
      }
      KILN_ASSIGN_OR_RETURN(ValueType element, ConvertTensorType(elem.tensor_type(), what));
      return ValueType::Sequence(std::move(element));
    }
    case onnx::TypeProto::kOptionalType: {
      ValueType out;
      out.kind = TypeKind::kOptional;
      if (!type.optional_type().has_elem_type() ||
          type.optional_type().elem_type().value_case() == onnx::TypeProto::VALUE_NOT_SET) {
        return out;
      }
      const onnx::TypeProto& elem = type.optional_type().elem_type();
      if (elem.value_case() != onnx::TypeProto::kTensorType &&
          elem.value_case() != onnx::TypeProto::kSequenceType) {
        return Status::Unimplemented(fmt::format(
            "{} is an optional of {} type; kiln supports optional tensors and optional sequences "
            "of tensors only",
            what, TypeKindName(elem)));
      }
      KILN_ASSIGN_OR_RETURN(ValueType contained, ConvertType(elem, what));
      return ValueType::Optional(std::move(contained));
    }
    case onnx::TypeProto::kMapType:
    case onnx::TypeProto::kSparseTensorType:
    case onnx::TypeProto::kOpaqueType:
      break;
  }
  return Status::Unimplemented(
      fmt::format("{} has {} type; kiln supports tensors, sequences of tensors and optionals", what,
                  TypeKindName(type)));
}

// What every graph of the model shares.
struct ModelContext {
  std::map<std::string, int64_t> opset_imports;
  int64_t ir_version = 0;
};

class GraphBuilder {
 public:
  GraphBuilder(const ModelContext& model, bool is_subgraph)
      : model_(model), is_subgraph_(is_subgraph), graph_(std::make_shared<Graph>()) {}

  // Converts `proto`, releasing the storage of its tensors as they are copied.
  Result<std::shared_ptr<Graph>> Build(onnx::GraphProto& proto) {
    graph_->name = proto.name();
    graph_->opset_imports = model_.opset_imports;
    graph_->ir_version = model_.ir_version;
    for (const onnx::ValueInfoProto& vi : proto.value_info()) {
      if (vi.has_type()) types_[vi.name()] = &vi.type();
    }
    for (const onnx::ValueInfoProto& vi : proto.output()) {
      if (vi.has_type()) types_[vi.name()] = &vi.type();
    }
    KILN_RETURN_IF_ERROR(AddInitializers(proto));
    KILN_RETURN_IF_ERROR(AddInputs(proto));
    for (int i = 0; i < proto.node_size(); ++i) {
      KILN_RETURN_IF_ERROR(AddNode(*proto.mutable_node(i), i));
    }
    for (const onnx::ValueInfoProto& vi : proto.output()) {
      int id = graph_->FindValue(vi.name());
      if (id < 0) {
        if (!is_subgraph_) {
          return Status::InvalidArgument(
              fmt::format("graph output '{}' is not a graph input, an initializer or a node output",
                          vi.name()));
        }
        KILN_ASSIGN_OR_RETURN(id, AddOuterValue(vi.name()));
      }
      graph_->outputs.push_back(id);
    }
    return std::move(graph_);
  }

 private:
  Result<ValueType> TypeOf(const std::string& name) const {
    auto it = types_.find(name);
    if (it == types_.end()) return ValueType{};
    return ConvertType(*it->second, fmt::format("value '{}'", name));
  }

  Status AddInitializers(onnx::GraphProto& proto) {
    for (onnx::TensorProto& init : *proto.mutable_initializer()) {
      Value value;
      value.name = init.name();
      if (graph_->FindValue(value.name) >= 0) {
        return Status::InvalidArgument(
            fmt::format("initializer '{}' is declared twice", value.name));
      }
      KILN_ASSIGN_OR_RETURN(OwnedTensor tensor,
                            TensorFromProto(init, fmt::format("initializer '{}'", value.name)));
      onnx::TensorProto().Swap(&init);  // frees the protobuf copy of the data now
      value.type.dtype = tensor.dtype();
      value.type.has_shape = true;
      for (int64_t d : tensor.shape().dims()) value.type.dims.push_back(Dim{d, {}});
      value.constant = std::make_shared<const OwnedTensor>(std::move(tensor));
      graph_->AddValue(std::move(value));
    }
    return Status::OK();
  }

  Status AddInputs(const onnx::GraphProto& proto) {
    for (const onnx::ValueInfoProto& vi : proto.input()) {
      const int existing = graph_->FindValue(vi.name());
      if (existing >= 0) {
        if (graph_->value(existing).is_constant()) continue;  // an initializer: not fed
        return Status::InvalidArgument(
            fmt::format("graph input '{}' is declared twice", vi.name()));
      }
      Value value;
      value.name = vi.name();
      if (vi.has_type()) {
        KILN_ASSIGN_OR_RETURN(value.type,
                              ConvertType(vi.type(), fmt::format("value '{}'", vi.name())));
      }
      graph_->inputs.push_back(graph_->AddValue(std::move(value)));
    }
    return Status::OK();
  }

  // A name a subgraph reads from an enclosing graph (see importer.h).
  Result<int> AddOuterValue(const std::string& name) {
    Value value;
    value.name = name;
    KILN_ASSIGN_OR_RETURN(value.type, TypeOf(name));
    return graph_->AddValue(std::move(value));
  }

  Status AddNode(onnx::NodeProto& proto, int index) {
    const std::string label = NodeLabel(proto, index);
    Node node;
    node.name = proto.name();
    node.op_type = proto.op_type();
    node.domain = NormalizeDomain(proto.domain());
    node.inputs.reserve(static_cast<size_t>(proto.input_size()));
    for (const std::string& in : proto.input()) {
      if (in.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      int id = graph_->FindValue(in);
      if (id < 0) {
        if (!is_subgraph_) {
          return Status::InvalidArgument(fmt::format("{} reads unknown value '{}'", label, in));
        }
        KILN_ASSIGN_OR_RETURN(id, AddOuterValue(in));
      }
      node.inputs.push_back(id);
    }
    for (onnx::AttributeProto& attr : *proto.mutable_attribute()) {
      KILN_ASSIGN_OR_RETURN(Attribute a, ConvertAttribute(attr, label));
      KILN_RETURN_IF_ERROR(AddImplicitInputs(a, label, &node.implicit_inputs));
      node.attributes.push_back(std::move(a));
    }
    for (const std::string& out : proto.output()) {
      if (out.empty()) {
        node.outputs.push_back(kNoValue);
        continue;
      }
      if (graph_->FindValue(out) >= 0) {
        return Status::InvalidArgument(
            fmt::format("{} output '{}' is already defined in this graph", label, out));
      }
      Value value;
      value.name = out;
      KILN_ASSIGN_OR_RETURN(value.type, TypeOf(out));
      node.outputs.push_back(graph_->AddValue(std::move(value)));
    }
    graph_->AddNode(std::move(node));
    return Status::OK();
  }

  // Records, as implicit inputs of the node, the values of this graph that the subgraphs in `a`
  // capture from the enclosing scope (a capture this graph does not define is captured here in
  // turn, when this graph is itself a subgraph).
  Status AddImplicitInputs(const Attribute& a, std::string_view label, std::vector<int>* ids) {
    std::vector<const Graph*> graphs;
    if (a.g) graphs.push_back(a.g.get());
    for (const auto& g : a.graphs) graphs.push_back(g.get());
    for (const Graph* g : graphs) {
      for (int capture : g->Captures()) {
        const std::string& name = g->value(capture).name;
        int id = graph_->FindValue(name);
        if (id < 0) {
          if (!is_subgraph_) {
            return Status::InvalidArgument(
                fmt::format("{} reads unknown value '{}' in a subgraph", label, name));
          }
          KILN_ASSIGN_OR_RETURN(id, AddOuterValue(name));
        }
        if (std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
      }
    }
    return Status::OK();
  }

  Result<std::shared_ptr<const OwnedTensor>> ConvertTensor(const onnx::TensorProto& proto,
                                                           std::string_view what) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, TensorFromProto(proto, what));
    return std::make_shared<const OwnedTensor>(std::move(t));
  }

  Result<std::shared_ptr<const Graph>> ConvertGraph(onnx::GraphProto& proto,
                                                    std::string_view what) {
    Result<std::shared_ptr<Graph>> g = GraphBuilder(model_, /*is_subgraph=*/true).Build(proto);
    if (!g.ok()) return g.status().WithContext(what);
    return std::shared_ptr<const Graph>(std::move(g).value());
  }

  Result<Attribute> ConvertAttribute(onnx::AttributeProto& proto, std::string_view node_label) {
    using A = onnx::AttributeProto;
    const std::string label = AttributeLabel(proto, node_label);
    Attribute a;
    a.name = proto.name();
    const A::AttributeType kind = proto.type();
    switch (kind) {
      case A::FLOAT:
        a.type = AttributeType::kFloat;
        a.f = proto.f();
        break;
      case A::INT:
        a.type = AttributeType::kInt;
        a.i = proto.i();
        break;
      case A::STRING:
        a.type = AttributeType::kString;
        a.s = proto.s();
        break;
      case A::TENSOR: {
        a.type = AttributeType::kTensor;
        KILN_ASSIGN_OR_RETURN(a.t, ConvertTensor(proto.t(), "tensor " + label));
        onnx::TensorProto().Swap(proto.mutable_t());  // Constant nodes may hold large weights
        break;
      }
      case A::GRAPH: {
        a.type = AttributeType::kGraph;
        KILN_ASSIGN_OR_RETURN(a.g, ConvertGraph(*proto.mutable_g(), label));
        break;
      }
      case A::FLOATS:
        a.type = AttributeType::kFloats;
        a.floats.assign(proto.floats().begin(), proto.floats().end());
        break;
      case A::INTS:
        a.type = AttributeType::kInts;
        a.ints.assign(proto.ints().begin(), proto.ints().end());
        break;
      case A::STRINGS:
        a.type = AttributeType::kStrings;
        a.strings.assign(proto.strings().begin(), proto.strings().end());
        break;
      case A::TENSORS:
        a.type = AttributeType::kTensors;
        for (int i = 0; i < proto.tensors_size(); ++i) {
          KILN_ASSIGN_OR_RETURN(
              std::shared_ptr<const OwnedTensor> t,
              ConvertTensor(proto.tensors(i), fmt::format("tensor {} of {}", i, label)));
          a.tensors.push_back(std::move(t));
          onnx::TensorProto().Swap(proto.mutable_tensors(i));
        }
        break;
      case A::GRAPHS:
        a.type = AttributeType::kGraphs;
        for (int i = 0; i < proto.graphs_size(); ++i) {
          KILN_ASSIGN_OR_RETURN(
              std::shared_ptr<const Graph> g,
              ConvertGraph(*proto.mutable_graphs(i), fmt::format("graph {} of {}", i, label)));
          a.graphs.push_back(std::move(g));
        }
        break;
      case A::SPARSE_TENSOR:
      case A::SPARSE_TENSORS:
        return Status::Unimplemented(
            fmt::format("{} holds a sparse tensor; sparse tensors are not supported", label));
      case A::TYPE_PROTO: {
        a.type = AttributeType::kTypeProto;
        KILN_ASSIGN_OR_RETURN(ValueType t, ConvertType(proto.tp(), "type " + label));
        a.tp = std::make_shared<const ValueType>(std::move(t));
        break;
      }
      case A::TYPE_PROTOS:
        a.type = AttributeType::kTypeProtos;
        for (int i = 0; i < proto.type_protos_size(); ++i) {
          KILN_ASSIGN_OR_RETURN(ValueType t, ConvertType(proto.type_protos(i),
                                                         fmt::format("type {} of {}", i, label)));
          a.tps.push_back(std::move(t));
        }
        break;
      case A::UNDEFINED:  // the checker rejects these; kept so the switch stays total
        return Status::InvalidArgument(fmt::format("{} has no type", label));
      default:
        return Status::InvalidArgument(
            fmt::format("{} has unknown attribute type {}", label, static_cast<int>(kind)));
    }
    return a;
  }

  const ModelContext& model_;
  const bool is_subgraph_;
  std::shared_ptr<Graph> graph_;
  // Declared or inferred type by value name (value_info, then outputs, which take precedence).
  std::unordered_map<std::string, const onnx::TypeProto*> types_;
};

// ---------------------------------------------------------------------------------------------

Status ParseModel(std::string_view bytes, onnx::ModelProto* model) {
  if (bytes.empty()) return Status::InvalidArgument("the model is empty (0 bytes)");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return Status::InvalidArgument(fmt::format(
        "the model is {} bytes, over protobuf's 2 GiB limit (models with external data are not "
        "supported)",
        bytes.size()));
  }
  if (!model->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument(
        "protobuf parsing failed (not an ONNX ModelProto, or truncated or corrupt)");
  }
  return Status::OK();
}

// Imports `bytes`. When `owned_bytes` is non-null it holds `bytes` and is released once parsed.
Result<std::shared_ptr<Graph>> Import(std::string_view bytes, std::string_view origin,
                                      std::string* owned_bytes) {
  auto model = std::make_unique<onnx::ModelProto>();
  KILN_RETURN_IF_ERROR(ParseModel(bytes, model.get()));
  if (owned_bytes != nullptr) std::string().swap(*owned_bytes);  // `bytes` dangles from here on
  if (!model->has_graph()) return Status::InvalidArgument("the model has no graph");
  KILN_RETURN_IF_ERROR(CheckGraphStructure(model->graph(), nullptr));
  try {
    onnx::checker::check_model(*model);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("ONNX checker: {}", e.what()));
  }
  // Inference is advisory (see importer.h): on any failure the model keeps its declared types.
  Status inferred = onnx_internal::InferShapesIsolated(model.get(), kShapeInferenceTimeout);
  if (!inferred.ok()) {
    KILN_LOG_WARN("'{}': ONNX shape inference failed, importing with the declared types only: {}",
                  origin, inferred.ToString());
  }

  ModelContext context;
  context.ir_version = model->ir_version();
  for (const onnx::OperatorSetIdProto& opset : model->opset_import()) {
    context.opset_imports[NormalizeDomain(opset.domain())] = opset.version();
  }
  KILN_ASSIGN_OR_RETURN(
      std::shared_ptr<Graph> graph,
      GraphBuilder(context, /*is_subgraph=*/false).Build(*model->mutable_graph()));
  KILN_ASSIGN_OR_RETURN(graph, AdaptToOpset7(std::move(graph)));
  return ExpandGradients(std::move(graph));
}

Result<std::shared_ptr<Graph>> ImportWithContext(std::string_view bytes, std::string_view origin,
                                                 std::string* owned_bytes) {
  Result<std::shared_ptr<Graph>> graph = [&]() -> Result<std::shared_ptr<Graph>> {
    try {
      return Import(bytes, origin, owned_bytes);
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted("out of memory while importing the model");
    } catch (const std::exception& e) {
      return Status::Internal(fmt::format("unexpected exception while importing: {}", e.what()));
    } catch (...) {
      return Status::Internal("unexpected non-standard exception while importing");
    }
  }();
  if (graph.ok()) return graph;
  const Status& s = graph.status();
  if (s.code() == StatusCode::kInvalidArgument) {
    return s.WithContext(fmt::format("'{}' is not a valid ONNX model", origin));
  }
  return s.WithContext(fmt::format("'{}'", origin));
}

}  // namespace

Result<std::shared_ptr<Graph>> ImportOnnxModel(const std::string& path) {
  Result<std::string> bytes = [&]() -> Result<std::string> {
    try {
      return onnx_internal::ReadWholeFile(path, "model file");
    } catch (const std::bad_alloc&) {
      return Status::ResourceExhausted(fmt::format("out of memory reading model file '{}'", path));
    }
  }();
  if (!bytes.ok()) return bytes.status();
  return ImportWithContext(*bytes, path, &bytes.value());
}

Result<std::shared_ptr<Graph>> ImportOnnxModelFromString(std::string_view bytes,
                                                         std::string_view origin) {
  return ImportWithContext(bytes, origin, nullptr);
}

}  // namespace kiln
