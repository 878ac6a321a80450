// SPDX-License-Identifier: Apache-2.0
#pragma once
// Raw (binary) tensor encoding shared by the protocol front ends: the HTTP binary tensor data
// extension and gRPC's raw_input_contents / raw_output_contents (KSERVE-V2.md 1.10, 1.13).
//
// Layout: elements packed in row-major order, little-endian, at their native width; BOOL is one
// byte 0 or 1; BYTES is, per element, a 4-byte little-endian length followed by that many bytes.
//
//   KILN_ASSIGN_OR_RETURN(OwnedTensor t,
//                         DecodeRawTensor("INPUT0", DataType::kFloat32, shape, bytes, body));
//   ...
//   AppendRawTensor(output.view(), &body);   // RawTensorBytes(view) bytes are appended
//
// Errors are INVALID_ARGUMENT naming the input and the problem (size that does not match
// shape x datatype, a BYTES length prefix that runs past the data, bytes left over, a BOOL byte
// other than 0/1). Thread safety: stateless functions.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// Bytes the raw form of `shape` x `dtype` takes (fixed-size datatypes only); INVALID_ARGUMENT
// naming `input` when it overflows size_t. REQUIRES: dtype is not BYTES or INVALID.
Result<size_t> RawTensorSize(std::string_view input, DataType dtype, const Shape& shape);

// Decodes the raw form in `data` into a tensor of `dtype` and `shape`. For fixed-size datatypes
// `data` must be exactly RawTensorSize bytes; when `owner` is non-null and `data` is suitably
// aligned for the element type, the tensor borrows `data` (no copy) and keeps `owner` alive,
// so `owner` must own the memory `data` points into. Otherwise the bytes are copied. BYTES
// elements are always copied into strings.
Result<OwnedTensor> DecodeRawTensor(std::string_view input, DataType dtype, const Shape& shape,
                                    std::string_view data, std::shared_ptr<const void> owner);

// Size of the raw form of a contiguous host tensor (for BYTES: the sum of 4 + length).
size_t RawTensorBytes(const Tensor& tensor);

// Appends the raw form of a contiguous host tensor to *out. INVALID_ARGUMENT for a BYTES element
// longer than 2^32 - 1 bytes (nothing is appended then).
Status AppendRawTensor(const Tensor& tensor, std::string* out);

}  // namespace kiln
