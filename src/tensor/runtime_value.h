// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runtime values beyond a single tensor: TensorSequence (an ordered list of tensors of one
// element type) and RuntimeValue (a tensor, a sequence, or "none", the empty optional).
//
// Most of kiln moves plain tensors (tensor.h) and never sees these types. They exist for the
// ONNX sequence and optional operators (SequenceInsert, Optional, ...), for If/Loop values of
// those kinds, and for callers that feed or read such values (Session's RuntimeValue Run,
// `kiln run`). An optional that holds something is at run time just that tensor or sequence;
// only the static type (graph/ir.h ValueType) says "optional". None is a value of its own kind.
//
//   KILN_ASSIGN_OR_RETURN(TensorSequence seq,
//                         TensorSequence::Create(DataType::kFloat32, {a, b}));
//   RuntimeValue v(std::move(seq));
//   if (v.is_sequence()) n = v.sequence().size();
//
// Elements are OwnedTensors, which share their buffers: copying a sequence copies the list, not
// the data. Tensors in a sequence are treated as immutable once inserted, so several sequences
// (and the outputs of SequenceAt) may share one element safely.
//
// Thread safety: none; concurrent reads are fine.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

// An ordered list of tensors that all have the element type `elem_dtype()`. The element type is
// set at construction, so an empty sequence is typed too. Element shapes may differ.
class TensorSequence {
 public:
  // An empty sequence of `elem_dtype` (kInvalid only for a default-constructed placeholder).
  explicit TensorSequence(DataType elem_dtype = DataType::kInvalid) : elem_dtype_(elem_dtype) {}

  // A sequence of `elements`. INVALID_ARGUMENT naming the first element whose dtype is not
  // `elem_dtype` (or that is not a valid tensor).
  static Result<TensorSequence> Create(DataType elem_dtype, std::vector<OwnedTensor> elements);

  DataType elem_dtype() const { return elem_dtype_; }
  int64_t size() const { return static_cast<int64_t>(elements_.size()); }
  bool empty() const { return elements_.empty(); }
  // REQUIRES: 0 <= i < size().
  const OwnedTensor& at(int64_t i) const { return elements_[static_cast<size_t>(i)]; }
  std::span<const OwnedTensor> elements() const { return elements_; }

  // Inserts `element` before position `pos` (pos == size() appends). INVALID_ARGUMENT when the
  // element's dtype is not elem_dtype() or `pos` is outside [0, size()].
  Status Insert(int64_t pos, OwnedTensor element);
  // Removes the element at `pos`. INVALID_ARGUMENT when `pos` is outside [0, size()).
  Status Erase(int64_t pos);

  // "sequence of 3 FP32 tensors": text for messages.
  std::string Describe() const;

 private:
  DataType elem_dtype_;
  std::vector<OwnedTensor> elements_;
};

// One runtime value: a tensor, a sequence of tensors, or none (the empty optional). A
// default-constructed RuntimeValue holds nothing at all (invalid), like a default Tensor.
class RuntimeValue {
 public:
  enum class Kind : uint8_t { kInvalid, kNone, kTensor, kSequence };

  RuntimeValue() = default;
  // REQUIRES: tensor.valid().
  explicit RuntimeValue(OwnedTensor tensor);
  explicit RuntimeValue(TensorSequence sequence);
  static RuntimeValue None();

  Kind kind() const { return kind_; }
  bool valid() const { return kind_ != Kind::kInvalid; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }

  // REQUIRES: is_tensor().
  const OwnedTensor& tensor() const;
  // REQUIRES: is_sequence().
  const TensorSequence& sequence() const;

  // "tensor FP32[2,3]", "sequence of 3 FP32 tensors", "none": text for messages.
  std::string Describe() const;

 private:
  Kind kind_ = Kind::kInvalid;
  OwnedTensor tensor_;
  TensorSequence sequence_;
};

}  // namespace kiln
