// SPDX-License-Identifier: Apache-2.0
// SequenceProto / OptionalProto <-> RuntimeValue conversion (value_proto.h).

#include "graph/onnx/value_proto.h"

#include <fmt/format.h>

#include <climits>
#include <new>

#include "graph/onnx/tensor_proto.h"
#include "graph/onnx/tensor_proto_convert.h"
#include "onnx/onnx-data_pb.h"

namespace kiln {
namespace {

using onnx::OptionalProto;
using onnx::SequenceProto;

std::string Quoted(std::string_view kind, const std::string& name) {
  return name.empty() ? std::string(kind) : fmt::format("{} '{}'", kind, name);
}

// The element type a declared sequence type states, or kInvalid.
DataType DeclaredElementType(const ValueType* type) {
  if (type == nullptr || !type->is_sequence() || type->elem == nullptr) return DataType::kInvalid;
  return type->elem->dtype;
}

// `declared`: the sequence's declared type (may be null or unknown).
Result<TensorSequence> SequenceFromProto(const SequenceProto& proto, const ValueType* declared,
                                         std::string_view what) {
  const int other_values = proto.sparse_tensor_values_size() + proto.sequence_values_size() +
                           proto.map_values_size() + proto.optional_values_size();
  switch (proto.elem_type()) {
    case SequenceProto::TENSOR:
      if (other_values > 0) {
        return Status::InvalidArgument(
            fmt::format("{} has elem_type TENSOR but also holds values of another kind", what));
      }
      break;
    case SequenceProto::UNDEFINED:
      if (other_values > 0 || proto.tensor_values_size() > 0) {
        return Status::InvalidArgument(
            fmt::format("{} has elem_type UNDEFINED but holds values", what));
      }
      break;
    case SequenceProto::SPARSE_TENSOR:
    case SequenceProto::SEQUENCE:
    case SequenceProto::MAP:
    case SequenceProto::OPTIONAL:
      return Status::Unimplemented(fmt::format(
          "{} holds {} values; kiln supports sequences of tensors only", what,
          SequenceProto::DataType_Name(static_cast<SequenceProto::DataType>(proto.elem_type()))));
    default:
      return Status::InvalidArgument(
          fmt::format("{} has unknown elem_type {}", what, proto.elem_type()));
  }
  DataType dtype = DeclaredElementType(declared);
  std::vector<OwnedTensor> elements;
  elements.reserve(static_cast<size_t>(proto.tensor_values_size()));
  for (int i = 0; i < proto.tensor_values_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor t,
                          onnx_internal::TensorFromProto(proto.tensor_values(i),
                                                         fmt::format("element {} of {}", i, what)));
    if (i == 0 && dtype == DataType::kInvalid) dtype = t.dtype();
    if (t.dtype() != dtype) {
      return Status::InvalidArgument(
          fmt::format("element {} of {} is {}, but the sequence holds {} tensors", i, what,
                      DataTypeName(t.dtype()), DataTypeName(dtype)));
    }
    elements.push_back(std::move(t));
  }
  if (dtype == DataType::kInvalid) {
    return Status::InvalidArgument(fmt::format(
        "{} is empty and its element type is not declared, so its dtype is unknown", what));
  }
  return TensorSequence::Create(dtype, std::move(elements));
}

// `declared`: the optional's declared type (may be null or unknown).
Result<RuntimeValue> OptionalFromProto(const OptionalProto& proto, const ValueType* declared,
                                       std::string_view what) {
  const ValueType* contained =
      declared != nullptr && declared->is_optional() ? declared->elem.get() : nullptr;
  const int set = (proto.has_tensor_value() ? 1 : 0) + (proto.has_sparse_tensor_value() ? 1 : 0) +
                  (proto.has_sequence_value() ? 1 : 0) + (proto.has_map_value() ? 1 : 0) +
                  (proto.has_optional_value() ? 1 : 0);
  switch (proto.elem_type()) {
    case OptionalProto::UNDEFINED:
      if (set > 0) {
        return Status::InvalidArgument(
            fmt::format("{} has elem_type UNDEFINED (none) but holds a value", what));
      }
      return RuntimeValue::None();
    case OptionalProto::TENSOR: {
      if (!proto.has_tensor_value() || set != 1) {
        return Status::InvalidArgument(
            fmt::format("{} has elem_type TENSOR but does not hold exactly a tensor", what));
      }
      KILN_ASSIGN_OR_RETURN(OwnedTensor t,
                            onnx_internal::TensorFromProto(proto.tensor_value(), what));
      return RuntimeValue(std::move(t));
    }
    case OptionalProto::SEQUENCE: {
      if (!proto.has_sequence_value() || set != 1) {
        return Status::InvalidArgument(
            fmt::format("{} has elem_type SEQUENCE but does not hold exactly a sequence", what));
      }
      KILN_ASSIGN_OR_RETURN(TensorSequence s,
                            SequenceFromProto(proto.sequence_value(), contained,
                                              fmt::format("the sequence in {}", what)));
      return RuntimeValue(std::move(s));
    }
    case OptionalProto::SPARSE_TENSOR:
    case OptionalProto::MAP:
    case OptionalProto::OPTIONAL:
      return Status::Unimplemented(fmt::format(
          "{} holds a {} value; kiln supports optional tensors and sequences only", what,
          OptionalProto::DataType_Name(static_cast<OptionalProto::DataType>(proto.elem_type()))));
    default:
      return Status::InvalidArgument(
          fmt::format("{} has unknown elem_type {}", what, proto.elem_type()));
  }
}

// A nested tensor, without a name (as ONNX's own writers leave it).
Status NestedTensorToProto(const Tensor& tensor, onnx::TensorProto* proto) {
  KILN_RETURN_IF_ERROR(onnx_internal::TensorToProto(tensor, "", proto));
  proto->clear_name();
  return Status::OK();
}

// `name` empty: no name, as for a sequence nested in an optional.
Status SequenceToProto(const TensorSequence& seq, std::string_view name, SequenceProto* proto) {
  proto->Clear();
  if (!name.empty()) proto->set_name(std::string(name));
  proto->set_elem_type(SequenceProto::TENSOR);
  for (const OwnedTensor& t : seq.elements()) {
    KILN_RETURN_IF_ERROR(NestedTensorToProto(t.view(), proto->add_tensor_values()));
  }
  return Status::OK();
}

template <typename Message>
Result<std::string> Serialize(const Message& proto, std::string_view what) {
  const size_t size = proto.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    return Status::InvalidArgument(
        fmt::format("{} needs {} bytes, over protobuf's 2 GiB limit", what, size));
  }
  std::string out;
  if (!proto.SerializeToString(&out)) {
    return Status::Internal(fmt::format("serializing {} failed", what));
  }
  return out;
}

template <typename Message>
Status Parse(std::string_view bytes, std::string_view message, Message* proto) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return Status::InvalidArgument(fmt::format(
        "serialized {} of {} bytes exceeds protobuf's 2 GiB limit", message, bytes.size()));
  }
  if (!proto->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument(
        fmt::format("{} bytes are not a valid serialized onnx {}", bytes.size(), message));
  }
  return Status::OK();
}

Result<RuntimeValue> FromBytes(std::string_view bytes, const ValueType& type, std::string* name) {
  if (type.is_sequence()) {
    SequenceProto proto;
    KILN_RETURN_IF_ERROR(Parse(bytes, "SequenceProto", &proto));
    KILN_ASSIGN_OR_RETURN(TensorSequence s,
                          SequenceFromProto(proto, &type, Quoted("sequence", proto.name())));
    if (name != nullptr) *name = proto.name();
    return RuntimeValue(std::move(s));
  }
  if (type.is_optional()) {
    OptionalProto proto;
    KILN_RETURN_IF_ERROR(Parse(bytes, "OptionalProto", &proto));
    KILN_ASSIGN_OR_RETURN(RuntimeValue v,
                          OptionalFromProto(proto, &type, Quoted("optional", proto.name())));
    if (name != nullptr) *name = proto.name();
    return v;
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, TensorFromProtoBytes(bytes, name));
  return RuntimeValue(std::move(t));
}

Result<std::string> ToBytes(const RuntimeValue& value, const ValueType& type,
                            std::string_view name) {
  if (!value.valid()) {
    return Status::InvalidArgument(fmt::format("value '{}' has no data to write", name));
  }
  const std::string what = fmt::format("value '{}'", name);
  if (type.is_optional() || value.is_none()) {
    OptionalProto proto;
    proto.set_name(std::string(name));
    if (value.is_tensor()) {
      proto.set_elem_type(OptionalProto::TENSOR);
      KILN_RETURN_IF_ERROR(
          NestedTensorToProto(value.tensor().view(), proto.mutable_tensor_value()));
    } else if (value.is_sequence()) {
      proto.set_elem_type(OptionalProto::SEQUENCE);
      KILN_RETURN_IF_ERROR(SequenceToProto(value.sequence(), "", proto.mutable_sequence_value()));
    } else {
      proto.set_elem_type(OptionalProto::UNDEFINED);
    }
    return Serialize(proto, what + " as an OptionalProto");
  }
  if (value.is_sequence()) {
    SequenceProto proto;
    KILN_RETURN_IF_ERROR(SequenceToProto(value.sequence(), name, &proto));
    return Serialize(proto, what + " as a SequenceProto");
  }
  return TensorToProtoBytes(value.tensor().view(), name);
}

}  // namespace

Result<RuntimeValue> ValueFromProtoBytes(std::string_view bytes, const ValueType& type,
                                         std::string* name) {
  try {
    return FromBytes(bytes, type, name);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while parsing a serialized value");
  } catch (const std::exception& e) {
    return Status::Internal(
        fmt::format("unexpected exception parsing a serialized value: {}", e.what()));
  }
}

Result<std::string> ValueToProtoBytes(const RuntimeValue& value, const ValueType& type,
                                      std::string_view name) {
  try {
    return ToBytes(value, type, name);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while serializing a value");
  } catch (const std::exception& e) {
    return Status::Internal(fmt::format("unexpected exception serializing a value: {}", e.what()));
  }
}

}  // namespace kiln
