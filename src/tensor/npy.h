// SPDX-License-Identifier: Apache-2.0
#pragma once
// NPY: numpy's single-array file format (numpy.save / numpy.load), read from and written to bytes
// in memory. File access lives with the callers (graph/onnx/tensor_file.h picks the format by
// extension); this file only converts between the byte layout and kiln tensors.
//
//   KILN_ASSIGN_OR_RETURN(OwnedTensor t, ReadNpy(bytes));        // bytes of a .npy file
//   KILN_ASSIGN_OR_RETURN(std::string out, WriteNpy(t.view()));  // what numpy.load reads back
//
// Supported: format versions 1.0, 2.0 and 3.0 on read, 1.0 on write; C order only; element types
//   <f2 <f4 <f8 |b1 |u1 <u2 <u4 <u8 |i1 <i2 <i4 <i8
// with byte-order marks '<' (little-endian), '=' (native) and '|' (not applicable); big-endian
// ('>') data is byte-swapped on read. kiln's BF16 and BYTES have no plain numpy dtype and cannot
// be written. BOOL bytes other than 0 and 1 read as true.
//
// Errors: INVALID_ARGUMENT for bytes that are not a well-formed NPY file (bad magic, truncated or
// malformed header, data size not matching the shape); UNIMPLEMENTED for well-formed files kiln
// does not support (other dtypes, Fortran order, unknown format versions). Never crashes or
// over-allocates on malformed input: the data size is checked against the shape before any
// allocation.
//
// Thread safety: both functions are pure and may be called from any thread.

#include <string>
#include <string_view>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// Parses a whole .npy file held in `bytes` into a new host tensor.
Result<OwnedTensor> ReadNpy(std::string_view bytes);

// Serializes `tensor` as an NPY 1.0 file (header padded to a multiple of 64 bytes, little-endian
// data). REQUIRES: tensor is a contiguous host tensor (violations return INVALID_ARGUMENT).
Result<std::string> WriteNpy(const Tensor& tensor);

}  // namespace kiln
