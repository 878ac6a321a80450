// SPDX-License-Identifier: Apache-2.0
#pragma once
// Serialized ONNX TensorProto <-> kiln tensor, without exposing protobuf to the caller. This is
// the format of the ONNX backend test data (test_data_set_0/input_0.pb) and of `.pb` tensor files
// (tensor_file.h). The importer converts initializers and tensor attributes with the same code.
//
//   std::string name;
//   KILN_ASSIGN_OR_RETURN(OwnedTensor t, TensorFromProtoBytes(file_bytes, &name));
//   KILN_ASSIGN_OR_RETURN(std::string bytes, TensorToProtoBytes(t.view(), name));
//
// Reading accepts raw_data and every typed field (float_data, int32_data, int64_data,
// double_data, uint64_data, string_data) for every kiln dtype; FLOAT16 and BFLOAT16 values in
// int32_data hold their 16-bit patterns, as the ONNX spec says. The number of values must match
// the dims exactly. Writing uses raw_data (little-endian) for numeric and BOOL tensors and
// string_data for BYTES.
//
// Errors: INVALID_ARGUMENT for bytes that are not a TensorProto or whose contents are inconsistent
// (negative dims, value count not matching the dims, no element type); UNIMPLEMENTED for valid
// tensors kiln cannot hold (COMPLEX64/128 and newer ONNX element types, external data, segments,
// rank above Shape::kMaxRank).
//
// Thread safety: both functions may be called from any thread.

#include <string>
#include <string_view>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// Parses a serialized onnx.TensorProto. On success sets *name (when non-null) to the tensor's
// name, which may be empty.
Result<OwnedTensor> TensorFromProtoBytes(std::string_view bytes, std::string* name = nullptr);

// Serializes `tensor` (a contiguous host tensor of any valid dtype) as an onnx.TensorProto named
// `name`.
Result<std::string> TensorToProtoBytes(const Tensor& tensor, std::string_view name);

}  // namespace kiln
