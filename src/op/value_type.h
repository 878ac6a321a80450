// SPDX-License-Identifier: Apache-2.0
#pragma once
// Declared value types: what a model states (or shape inference derived) about a value flowing
// between operators: a tensor's element type and shape, a sequence of tensors, or an optional.
// The graph IR (graph/ir.h) records one per value; kernels see the ones of their node's operands
// (op/node_desc.h). At run time the values themselves are tensor/runtime_value.h's.
//
//   ValueType t;                        // unknown: accepts anything
//   t.dtype = DataType::kFloat32;
//   t.has_shape = true;
//   t.dims = {Dim{-1, "batch"}, Dim{16, ""}};
//   t.ToString();                       // "FP32[batch,16]"
//
// Thread safety: plain values; a const ValueType may be read from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace kiln {

// One dimension of a declared tensor type: a known size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty for a named symbolic dim
  bool known() const { return value >= 0; }
};

// What kind of value a ValueType describes.
enum class TypeKind : uint8_t {
  kTensor,    // a tensor (the default, and the only kind most ops take)
  kSequence,  // an ordered list of tensors of one element type
  kOptional,  // a tensor or a sequence of tensors, or nothing ("none")
};

// Declared type of a value, as the model states or shape inference derived it.
//
// A tensor type has an element type and an (optional) shape: `has_shape == false` means the
// rank itself is unknown. A sequence type has `elem`, the type of its elements (a tensor type);
// an optional type has `elem`, the type of what it holds (a tensor or a sequence type). `elem`
// is null when the model does not say; dtype/has_shape/dims are unused for those kinds. A
// default-constructed ValueType is a tensor of unknown dtype and rank, which is also how a value
// without any recorded type looks (IsUnknown()).
struct ValueType {
  TypeKind kind = TypeKind::kTensor;
  DataType dtype = DataType::kInvalid;
  bool has_shape = false;
  std::vector<Dim> dims;
  std::shared_ptr<const ValueType> elem;  // kSequence / kOptional only

  static ValueType Sequence(ValueType element);
  static ValueType Optional(ValueType contained);

  bool is_tensor() const { return kind == TypeKind::kTensor; }
  bool is_sequence() const { return kind == TypeKind::kSequence; }
  bool is_optional() const { return kind == TypeKind::kOptional; }
  // A tensor type with neither dtype nor shape: nothing is known, not even the kind.
  bool IsUnknown() const {
    return kind == TypeKind::kTensor && dtype == DataType::kInvalid && !has_shape;
  }
  // "FP32[batch,16]" / "FP32[?]" for tensors, "seq(FP32[?])", "optional(seq(INT64[2]))",
  // "seq(?)" for a sequence of unknown elements: text for messages.
  std::string ToString() const;
};

}  // namespace kiln
