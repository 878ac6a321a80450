// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor files: one tensor per file, the format chosen by the file's extension (case-insensitive):
//   .pb   a serialized onnx TensorProto (tensor_proto.h), as in the ONNX backend test data
//   .npy  numpy's NPY format (tensor/npy.h)
// Any other extension is INVALID_ARGUMENT naming the supported ones. Used by tools and tests to
// load inputs and golden outputs and to save results.
//
//   std::string name;
//   KILN_ASSIGN_OR_RETURN(OwnedTensor x, ReadTensorFile("test_data_set_0/input_0.pb", &name));
//   KILN_RETURN_IF_ERROR(WriteTensorFile("out.npy", y.view(), "y"));
//
// Value files generalize them to the values of a graph's inputs and outputs of any type
// (ReadValueFile / WriteValueFile): for a sequence or optional type, a .pb file holds a
// SequenceProto or OptionalProto (value_proto.h); .npy holds one tensor only.
//
// Errors name the path: NOT_FOUND for a missing file, INVALID_ARGUMENT for unreadable or
// malformed ones, UNIMPLEMENTED for well-formed content kiln does not support (see the format
// headers).
//
// Thread safety: both functions may be called from any thread (on distinct paths when writing).

#include <string>
#include <string_view>

#include "base/result.h"
#include "graph/ir.h"
#include "tensor/runtime_value.h"
#include "tensor/tensor.h"

namespace kiln {

// Reads the tensor stored in `path`. When `name` is non-null it receives the stored name (.pb) or
// the empty string (.npy stores none).
Result<OwnedTensor> ReadTensorFile(const std::string& path, std::string* name = nullptr);

// Writes `tensor` (contiguous, on the host) to `path`, creating or truncating it. `name` is stored
// in .pb files and ignored for .npy. Formats that cannot hold the dtype (BF16 or BYTES as .npy)
// are UNIMPLEMENTED, and nothing is written.
Status WriteTensorFile(const std::string& path, const Tensor& tensor, std::string_view name);

// Reads the value of a graph input declared as `type` from `path`. A .pb file holds a
// SequenceProto when `type` is a sequence, an OptionalProto when it is an optional, else a
// TensorProto (exactly as ReadTensorFile); a .npy file holds one tensor, so it cannot feed a
// sequence type (UNIMPLEMENTED) but can an optional one.
Result<RuntimeValue> ReadValueFile(const std::string& path, const ValueType& type,
                                   std::string* name = nullptr);

// Writes the value of a graph output declared as `type`: a tensor of a non-optional type exactly
// as WriteTensorFile; in .pb files, a sequence as a SequenceProto and any value of an optional
// type (and a none) as an OptionalProto. .npy holds a tensor only; a sequence or a none is
// UNIMPLEMENTED, and nothing is written.
Status WriteValueFile(const std::string& path, const RuntimeValue& value, const ValueType& type,
                      std::string_view name);

}  // namespace kiln
