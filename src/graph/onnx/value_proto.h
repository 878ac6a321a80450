// SPDX-License-Identifier: Apache-2.0
#pragma once
// Serialized ONNX SequenceProto / OptionalProto (and TensorProto) <-> kiln RuntimeValue, without
// exposing protobuf to the caller. These are the files of the ONNX backend test data for
// sequence and optional inputs and outputs (test_data_set_0/input_0.pb of test_sequence_*), and
// of `.pb` value files (tensor_file.h ReadValueFile / WriteValueFile).
//
//   KILN_ASSIGN_OR_RETURN(RuntimeValue v, ValueFromProtoBytes(bytes, graph_input.type, &name));
//   KILN_ASSIGN_OR_RETURN(std::string out, ValueToProtoBytes(v, graph_output.type, name));
//
// Which message the bytes hold is not recorded in them, so the declared type decides: a
// sequence type reads a SequenceProto, an optional type an OptionalProto, anything else a
// TensorProto (tensor_proto.h). A SequenceProto must hold tensors (elem_type TENSOR, or
// UNDEFINED when empty) of one dtype; an empty one takes its element type from the declared
// type. An OptionalProto holds nothing (elem_type UNDEFINED: none), a tensor, or a sequence of
// tensors. Writing picks the message the same way: an OptionalProto for an optional type or a
// none, a SequenceProto for a sequence, a TensorProto for a tensor.
//
// Errors: INVALID_ARGUMENT for bytes that are not the expected message, inconsistent contents
// (elem_type disagreeing with the stored values, elements of different dtypes, an empty
// sequence of unknown element type) and tensor errors as in tensor_proto.h, each naming the
// element; UNIMPLEMENTED for valid values kiln cannot hold (sequences of sequences, maps, sparse
// tensors). The value is not checked against the declared type beyond what parsing needs;
// Session::RunValues does that.
//
// Thread safety: both functions may be called from any thread.

#include <string>
#include <string_view>

#include "base/result.h"
#include "graph/ir.h"
#include "tensor/runtime_value.h"

namespace kiln {

// Parses `bytes` as the message `type` calls for (above). On success sets *name (when non-null)
// to the stored name, which may be empty.
Result<RuntimeValue> ValueFromProtoBytes(std::string_view bytes, const ValueType& type,
                                         std::string* name = nullptr);

// Serializes `value` (valid; contiguous host tensors) as the message `type` calls for, named
// `name`.
Result<std::string> ValueToProtoBytes(const RuntimeValue& value, const ValueType& type,
                                      std::string_view name);

}  // namespace kiln
