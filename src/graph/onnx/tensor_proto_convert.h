// SPDX-License-Identifier: Apache-2.0
#pragma once
// Private to graph/onnx: conversions between onnx protobuf messages and kiln types, shared by the
// importer and tensor_proto.cc. Nothing outside graph/onnx/ may include this header (it pulls in
// protobuf); the public, protobuf-free entry points are tensor_proto.h and importer.h.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "onnx/onnx_pb.h"
#include "tensor/tensor.h"

namespace kiln::onnx_internal {

// kiln's DataType for an onnx TensorProto.DataType value; nullopt for UNDEFINED and for types
// kiln lacks (COMPLEX64, COMPLEX128, and values newer than this libonnx knows, such as float8).
std::optional<DataType> DataTypeFromOnnx(int32_t elem_type);
// onnx TensorProto.DataType value for a kiln dtype (UNDEFINED for kInvalid).
int32_t DataTypeToOnnx(DataType dtype);
// "COMPLEX64", or the number for values this libonnx does not name ("17").
std::string OnnxTypeName(int32_t elem_type);

// True when the tensor's data lives outside the model (data_location EXTERNAL or any
// external_data entry).
bool UsesExternalData(const onnx::TensorProto& proto);
// The UNIMPLEMENTED error for such a tensor; `what` names it ("initializer 'w'").
Status ExternalDataError(std::string_view what);

// What ValidateTensorProto found.
struct TensorProtoInfo {
  DataType dtype;
  Shape shape;
};

// Every check TensorFromProto makes, without copying the data: element type, external data,
// dims (negative, rank, element-count overflow) and the number of stored values against the dims.
Result<TensorProtoInfo> ValidateTensorProto(const onnx::TensorProto& proto, std::string_view what);

// Converts a TensorProto to a new host tensor. `what` names the tensor in error messages, e.g.
// "initializer 'w'" gives "initializer 'w' has 5 values but shape [2,3] needs 6".
Result<OwnedTensor> TensorFromProto(const onnx::TensorProto& proto, std::string_view what);

// Fills `proto` (cleared first) from a contiguous host tensor.
Status TensorToProto(const Tensor& tensor, std::string_view name, onnx::TensorProto* proto);

}  // namespace kiln::onnx_internal
