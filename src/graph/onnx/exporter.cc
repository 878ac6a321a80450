// SPDX-License-Identifier: Apache-2.0
// Graph -> ONNX ModelProto (exporter.h).

#include "graph/onnx/exporter.h"

#include <fmt/format.h>

#include <new>

#include "graph/onnx/file_io.h"
#include "graph/onnx/tensor_proto_convert.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

using onnx_internal::DataTypeToOnnx;

Status SetType(const ValueType& type, onnx::TypeProto* proto) {
  switch (type.kind) {
    case TypeKind::kSequence: {
      onnx::TypeProto_Sequence* seq = proto->mutable_sequence_type();
      if (type.elem) return SetType(*type.elem, seq->mutable_elem_type());
      return Status::OK();
    }
    case TypeKind::kOptional: {
      onnx::TypeProto_Optional* opt = proto->mutable_optional_type();
      if (type.elem) return SetType(*type.elem, opt->mutable_elem_type());
      return Status::OK();
    }
    case TypeKind::kTensor:
      break;
  }
  onnx::TypeProto_Tensor* t = proto->mutable_tensor_type();
  t->set_elem_type(DataTypeToOnnx(type.dtype));
  if (type.has_shape) {
    onnx::TensorShapeProto* shape = t->mutable_shape();
    for (const Dim& d : type.dims) {
      onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
      if (d.known())
        dim->set_dim_value(d.value);
      else if (!d.symbol.empty())
        dim->set_dim_param(d.symbol);
    }
  }
  return Status::OK();
}

Status SetValueInfo(const Value& value, onnx::ValueInfoProto* proto) {
  proto->set_name(value.name);
  if (value.type.IsUnknown()) return Status::OK();
  return SetType(value.type, proto->mutable_type());
}

Status ExportGraph(const Graph& graph, onnx::GraphProto* proto);

Status ExportAttribute(const Attribute& a, onnx::AttributeProto* proto) {
  using A = onnx::AttributeProto;
  proto->set_name(a.name);
  switch (a.type) {
    case AttributeType::kFloat:
      proto->set_type(A::FLOAT);
      proto->set_f(a.f);
      break;
    case AttributeType::kInt:
      proto->set_type(A::INT);
      proto->set_i(a.i);
      break;
    case AttributeType::kString:
      proto->set_type(A::STRING);
      proto->set_s(a.s);
      break;
    case AttributeType::kTensor:
      proto->set_type(A::TENSOR);
      if (a.t)
        KILN_RETURN_IF_ERROR(onnx_internal::TensorToProto(a.t->view(), "", proto->mutable_t()));
      break;
    case AttributeType::kGraph:
      proto->set_type(A::GRAPH);
      if (a.g) KILN_RETURN_IF_ERROR(ExportGraph(*a.g, proto->mutable_g()));
      break;
    case AttributeType::kFloats:
      proto->set_type(A::FLOATS);
      for (float f : a.floats) proto->add_floats(f);
      break;
    case AttributeType::kInts:
      proto->set_type(A::INTS);
      for (int64_t i : a.ints) proto->add_ints(i);
      break;
    case AttributeType::kStrings:
      proto->set_type(A::STRINGS);
      for (const std::string& s : a.strings) proto->add_strings(s);
      break;
    case AttributeType::kTensors:
      proto->set_type(A::TENSORS);
      for (const auto& t : a.tensors) {
        KILN_RETURN_IF_ERROR(onnx_internal::TensorToProto(t->view(), "", proto->add_tensors()));
      }
      break;
    case AttributeType::kGraphs:
      proto->set_type(A::GRAPHS);
      for (const auto& g : a.graphs) KILN_RETURN_IF_ERROR(ExportGraph(*g, proto->add_graphs()));
      break;
    case AttributeType::kTypeProto:
      proto->set_type(A::TYPE_PROTO);
      if (a.tp) KILN_RETURN_IF_ERROR(SetType(*a.tp, proto->mutable_tp()));
      break;
    case AttributeType::kTypeProtos:
      proto->set_type(A::TYPE_PROTOS);
      for (const ValueType& t : a.tps) KILN_RETURN_IF_ERROR(SetType(t, proto->add_type_protos()));
      break;
    case AttributeType::kUndefined:
      return Status::InvalidArgument(fmt::format("attribute '{}' has no type", a.name));
  }
  return Status::OK();
}

Status ExportGraph(const Graph& graph, onnx::GraphProto* proto) {
  proto->set_name(graph.name);
  std::vector<bool> listed(static_cast<size_t>(graph.num_values()), false);
  for (int id : graph.inputs) {
    KILN_RETURN_IF_ERROR(SetValueInfo(graph.value(id), proto->add_input()));
    listed[static_cast<size_t>(id)] = true;
  }
  for (int id : graph.outputs) {
    KILN_RETURN_IF_ERROR(SetValueInfo(graph.value(id), proto->add_output()));
    listed[static_cast<size_t>(id)] = true;
  }
  for (int id = 0; id < graph.num_values(); ++id) {
    const Value& v = graph.value(id);
    if (v.is_constant()) {
      KILN_RETURN_IF_ERROR(
          onnx_internal::TensorToProto(v.constant->view(), v.name, proto->add_initializer())
              .WithContext(fmt::format("initializer '{}'", v.name)));
      continue;
    }
    if (listed[static_cast<size_t>(id)] || v.type.IsUnknown()) continue;
    KILN_RETURN_IF_ERROR(SetValueInfo(v, proto->add_value_info()));
  }
  for (const Node& node : graph.nodes()) {
    onnx::NodeProto* n = proto->add_node();
    n->set_name(node.name);
    n->set_op_type(node.op_type);
    if (!node.domain.empty()) n->set_domain(node.domain);
    for (int in : node.inputs) n->add_input(in == kNoValue ? std::string() : graph.value(in).name);
    for (int out : node.outputs) {
      n->add_output(out == kNoValue ? std::string() : graph.value(out).name);
    }
    for (const Attribute& a : node.attributes) {
      KILN_RETURN_IF_ERROR(
          ExportAttribute(a, n->add_attribute())
              .WithContext(fmt::format("node '{}' ({})", node.name, node.op_type)));
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::string> ExportOnnxModel(const Graph& graph) {
  try {
    onnx::ModelProto model;
    model.set_ir_version(graph.ir_version > 0 ? graph.ir_version : 8);
    model.set_producer_name("kiln");
    for (const auto& [domain, version] : graph.opset_imports) {
      onnx::OperatorSetIdProto* op = model.add_opset_import();
      op->set_domain(domain);
      op->set_version(version);
    }
    KILN_RETURN_IF_ERROR(ExportGraph(graph, model.mutable_graph()));
    std::string bytes;
    if (!model.SerializeToString(&bytes)) {
      return Status::InvalidArgument("the model does not fit in one protobuf message (over 2 GiB)");
    }
    return bytes;
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while exporting the model");
  }
}

Status WriteOnnxModel(const Graph& graph, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxModel(graph));
  return onnx_internal::WriteWholeFile(path, bytes, "model file");
}

}  // namespace kiln
