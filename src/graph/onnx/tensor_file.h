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
// Errors name the path: NOT_FOUND for a missing file, INVALID_ARGUMENT for unreadable or
// malformed ones, UNIMPLEMENTED for well-formed content kiln does not support (see the format
// headers).
//
// Thread safety: both functions may be called from any thread (on distinct paths when writing).

#include <string>
#include <string_view>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// Reads the tensor stored in `path`. When `name` is non-null it receives the stored name (.pb) or
// the empty string (.npy stores none).
Result<OwnedTensor> ReadTensorFile(const std::string& path, std::string* name = nullptr);

// Writes `tensor` (contiguous, on the host) to `path`, creating or truncating it. `name` is stored
// in .pb files and ignored for .npy. Formats that cannot hold the dtype (BF16 or BYTES as .npy)
// are UNIMPLEMENTED, and nothing is written.
Status WriteTensorFile(const std::string& path, const Tensor& tensor, std::string_view name);

}  // namespace kiln
