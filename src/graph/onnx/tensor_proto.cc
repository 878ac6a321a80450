// SPDX-License-Identifier: Apache-2.0
// TensorProto <-> kiln tensor conversion (tensor_proto.h, tensor_proto_convert.h).

#include "graph/onnx/tensor_proto.h"

#include <fmt/format.h>

#include <bit>
#include <climits>
#include <cstring>
#include <new>

#include "graph/onnx/tensor_proto_convert.h"

namespace kiln {
namespace onnx_internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "TensorProto raw_data is little-endian; a big-endian host needs byte swapping here");

using onnx::TensorProto;

std::string DimsText(const TensorProto& proto) {
  return fmt::format("[{}]", fmt::join(proto.dims(), ","));
}

// Copies `field` (a repeated proto field) into `out`, converting each value with `convert`.
template <typename T, typename Field, typename Convert>
void CopyField(const Field& field, OwnedTensor& out, Convert convert) {
  T* dst = out.data<T>();
  int64_t i = 0;
  for (const auto& v : field) dst[i++] = convert(v);
}

template <typename T>
auto Cast() {
  return [](auto v) { return static_cast<T>(v); };
}

// Number of values stored in the typed field that holds `dtype`.
int64_t TypedFieldCount(const TensorProto& proto, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return proto.float_data_size();
    case DataType::kFloat64:
      return proto.double_data_size();
    case DataType::kInt64:
      return proto.int64_data_size();
    case DataType::kUint32:
    case DataType::kUint64:
      return proto.uint64_data_size();
    case DataType::kBytes:
      return proto.string_data_size();
    default:
      return proto.int32_data_size();
  }
}

// REQUIRES: ValidateTensorProto accepted `proto` (the value count matches the shape).
Result<OwnedTensor> FromTypedFields(const TensorProto& proto, DataType dtype, const Shape& shape) {
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(dtype, shape));
  switch (dtype) {
    case DataType::kFloat32:
      CopyField<float>(proto.float_data(), t, Cast<float>());
      break;
    case DataType::kFloat64:
      CopyField<double>(proto.double_data(), t, Cast<double>());
      break;
    case DataType::kInt64:
      CopyField<int64_t>(proto.int64_data(), t, Cast<int64_t>());
      break;
    case DataType::kUint32:
      CopyField<uint32_t>(proto.uint64_data(), t, Cast<uint32_t>());
      break;
    case DataType::kUint64:
      CopyField<uint64_t>(proto.uint64_data(), t, Cast<uint64_t>());
      break;
    case DataType::kBytes:
      CopyField<std::string>(proto.string_data(), t, [](const std::string& s) { return s; });
      break;
    case DataType::kBool:
      CopyField<bool>(proto.int32_data(), t, [](int32_t v) { return v != 0; });
      break;
    case DataType::kUint8:
      CopyField<uint8_t>(proto.int32_data(), t, Cast<uint8_t>());
      break;
    case DataType::kInt8:
      CopyField<int8_t>(proto.int32_data(), t, Cast<int8_t>());
      break;
    case DataType::kUint16:
      CopyField<uint16_t>(proto.int32_data(), t, Cast<uint16_t>());
      break;
    case DataType::kInt16:
      CopyField<int16_t>(proto.int32_data(), t, Cast<int16_t>());
      break;
    case DataType::kInt32:
      CopyField<int32_t>(proto.int32_data(), t, Cast<int32_t>());
      break;
    case DataType::kFloat16:
      CopyField<Float16>(proto.int32_data(), t,
                         [](int32_t v) { return Float16{static_cast<uint16_t>(v)}; });
      break;
    case DataType::kBFloat16:
      CopyField<BFloat16>(proto.int32_data(), t,
                          [](int32_t v) { return BFloat16{static_cast<uint16_t>(v)}; });
      break;
    case DataType::kInvalid:
      KILN_CHECK(false, "kInvalid reached the typed-field copy");
  }
  return t;
}

// REQUIRES: ValidateTensorProto accepted `proto` (raw_data matches the shape).
Result<OwnedTensor> FromRawData(const TensorProto& proto, DataType dtype, const Shape& shape) {
  const std::string& raw = proto.raw_data();
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(dtype, shape));
  if (!raw.empty()) std::memcpy(t.raw_data(), raw.data(), raw.size());
  if (dtype == DataType::kBool) {
    auto* bytes = static_cast<unsigned char*>(t.raw_data());
    for (size_t i = 0; i < raw.size(); ++i) bytes[i] = bytes[i] != 0 ? 1 : 0;
  }
  return t;
}

}  // namespace

std::optional<DataType> DataTypeFromOnnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT:
      return DataType::kFloat32;
    case TensorProto::UINT8:
      return DataType::kUint8;
    case TensorProto::INT8:
      return DataType::kInt8;
    case TensorProto::UINT16:
      return DataType::kUint16;
    case TensorProto::INT16:
      return DataType::kInt16;
    case TensorProto::INT32:
      return DataType::kInt32;
    case TensorProto::INT64:
      return DataType::kInt64;
    case TensorProto::STRING:
      return DataType::kBytes;
    case TensorProto::BOOL:
      return DataType::kBool;
    case TensorProto::FLOAT16:
      return DataType::kFloat16;
    case TensorProto::DOUBLE:
      return DataType::kFloat64;
    case TensorProto::UINT32:
      return DataType::kUint32;
    case TensorProto::UINT64:
      return DataType::kUint64;
    case TensorProto::BFLOAT16:
      return DataType::kBFloat16;
    default:
      return std::nullopt;  // UNDEFINED, COMPLEX64, COMPLEX128, newer types
  }
}

int32_t DataTypeToOnnx(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return TensorProto::FLOAT;
    case DataType::kUint8:
      return TensorProto::UINT8;
    case DataType::kInt8:
      return TensorProto::INT8;
    case DataType::kUint16:
      return TensorProto::UINT16;
    case DataType::kInt16:
      return TensorProto::INT16;
    case DataType::kInt32:
      return TensorProto::INT32;
    case DataType::kInt64:
      return TensorProto::INT64;
    case DataType::kBytes:
      return TensorProto::STRING;
    case DataType::kBool:
      return TensorProto::BOOL;
    case DataType::kFloat16:
      return TensorProto::FLOAT16;
    case DataType::kFloat64:
      return TensorProto::DOUBLE;
    case DataType::kUint32:
      return TensorProto::UINT32;
    case DataType::kUint64:
      return TensorProto::UINT64;
    case DataType::kBFloat16:
      return TensorProto::BFLOAT16;
    case DataType::kInvalid:
      return TensorProto::UNDEFINED;
  }
  return TensorProto::UNDEFINED;
}

std::string OnnxTypeName(int32_t elem_type) {
  if (onnx::TensorProto_DataType_IsValid(elem_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<TensorProto::DataType>(elem_type));
  }
  return std::to_string(elem_type);
}

bool UsesExternalData(const TensorProto& proto) {
  return proto.data_location() == TensorProto::EXTERNAL || proto.external_data_size() > 0;
}

Status ExternalDataError(std::string_view what) {
  return Status::Unimplemented(fmt::format(
      "{} is stored in an external file; external data is not supported (save the model with its "
      "tensors embedded)",
      what));
}

Result<TensorProtoInfo> ValidateTensorProto(const TensorProto& proto, std::string_view what) {
  if (UsesExternalData(proto)) return ExternalDataError(what);
  if (proto.has_segment()) {
    return Status::Unimplemented(fmt::format(
        "{} is a segment of a larger tensor; segmented tensors are not supported", what));
  }
  const int32_t elem_type = proto.data_type();
  std::optional<DataType> dtype = DataTypeFromOnnx(elem_type);
  if (!dtype) {
    if (elem_type == TensorProto::UNDEFINED) {
      return Status::InvalidArgument(
          fmt::format("{} has no element type (data_type is UNDEFINED)", what));
    }
    return Status::Unimplemented(fmt::format("{} has element type {}, which kiln does not support",
                                             what, OnnxTypeName(elem_type)));
  }
  for (int64_t d : proto.dims()) {
    if (d < 0) {
      return Status::InvalidArgument(
          fmt::format("{} has negative dimension {} in shape {}", what, d, DimsText(proto)));
    }
  }
  if (proto.dims_size() > Shape::kMaxRank) {
    return Status::Unimplemented(fmt::format("{} has rank {} (shape {}); kiln supports at most {}",
                                             what, proto.dims_size(), DimsText(proto),
                                             Shape::kMaxRank));
  }
  Result<Shape> shape =
      Shape::Create(std::span<const int64_t>(proto.dims().data(), proto.dims().size()));
  if (!shape.ok()) return shape.status().WithContext(what);
  int64_t count;
  if (proto.has_raw_data()) {
    if (*dtype == DataType::kBytes) {
      return Status::InvalidArgument(
          fmt::format("{} is a STRING tensor with raw_data; strings must use string_data", what));
    }
    const size_t raw_bytes = proto.raw_data().size();
    const size_t elem_bytes = DataTypeSize(*dtype);
    if (raw_bytes % elem_bytes != 0) {
      return Status::InvalidArgument(
          fmt::format("{} has {} bytes of raw_data, not a whole number of {}-byte {} values", what,
                      raw_bytes, elem_bytes, DataTypeName(*dtype)));
    }
    count = static_cast<int64_t>(raw_bytes / elem_bytes);
  } else {
    count = TypedFieldCount(proto, *dtype);
  }
  if (count != shape->NumElements()) {
    return Status::InvalidArgument(fmt::format("{} has {} values but shape {} needs {}", what,
                                               count, shape->ToString(), shape->NumElements()));
  }
  return TensorProtoInfo{*dtype, *shape};
}

Result<OwnedTensor> TensorFromProto(const TensorProto& proto, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(TensorProtoInfo info, ValidateTensorProto(proto, what));
  if (proto.has_raw_data()) return FromRawData(proto, info.dtype, info.shape);
  return FromTypedFields(proto, info.dtype, info.shape);
}

Status TensorToProto(const Tensor& tensor, std::string_view name, TensorProto* proto) {
  proto->Clear();
  if (!tensor.valid()) return Status::InvalidArgument("cannot serialize a tensor of INVALID dtype");
  if (!tensor.device().is_cpu()) {
    return Status::InvalidArgument(fmt::format(
        "cannot serialize a tensor on {}; copy it to the host first", tensor.device().ToString()));
  }
  if (!tensor.is_contiguous()) {
    return Status::InvalidArgument("cannot serialize a non-contiguous tensor view");
  }
  proto->set_name(std::string(name));
  proto->set_data_type(DataTypeToOnnx(tensor.dtype()));
  for (int64_t d : tensor.shape().dims()) proto->add_dims(d);
  if (tensor.dtype() == DataType::kBytes) {
    const auto* strings = tensor.data<const std::string>();
    for (int64_t i = 0; i < tensor.num_elements(); ++i) proto->add_string_data(strings[i]);
  } else {
    proto->set_raw_data(static_cast<const char*>(tensor.raw_data()), tensor.size_bytes());
  }
  return Status::OK();
}

}  // namespace onnx_internal

Result<OwnedTensor> TensorFromProtoBytes(std::string_view bytes, std::string* name) {
  try {
    if (bytes.size() > static_cast<size_t>(INT_MAX)) {
      return Status::InvalidArgument(fmt::format(
          "serialized TensorProto of {} bytes exceeds protobuf's 2 GiB limit", bytes.size()));
    }
    onnx::TensorProto proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return Status::InvalidArgument(
          fmt::format("{} bytes are not a valid serialized onnx TensorProto", bytes.size()));
    }
    const std::string what =
        proto.name().empty() ? std::string("tensor") : fmt::format("tensor '{}'", proto.name());
    KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, onnx_internal::TensorFromProto(proto, what));
    if (name != nullptr) *name = proto.name();
    return tensor;
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while parsing a TensorProto");
  } catch (const std::exception& e) {
    return Status::Internal(
        fmt::format("unexpected exception parsing a TensorProto: {}", e.what()));
  }
}

Result<std::string> TensorToProtoBytes(const Tensor& tensor, std::string_view name) {
  try {
    onnx::TensorProto proto;
    KILN_RETURN_IF_ERROR(onnx_internal::TensorToProto(tensor, name, &proto));
    const size_t size = proto.ByteSizeLong();
    if (size > static_cast<size_t>(INT_MAX)) {
      return Status::InvalidArgument(fmt::format(
          "tensor '{}' needs {} bytes as a TensorProto, over protobuf's 2 GiB limit", name, size));
    }
    std::string out;
    if (!proto.SerializeToString(&out)) {
      return Status::Internal(fmt::format("serializing tensor '{}' as a TensorProto failed", name));
    }
    return out;
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while serializing a TensorProto");
  } catch (const std::exception& e) {
    return Status::Internal(
        fmt::format("unexpected exception serializing a TensorProto: {}", e.what()));
  }
}

}  // namespace kiln
