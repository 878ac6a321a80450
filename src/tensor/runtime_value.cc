// SPDX-License-Identifier: Apache-2.0
#include "tensor/runtime_value.h"

#include <fmt/format.h>

#include "base/check.h"

namespace kiln {

Result<TensorSequence> TensorSequence::Create(DataType elem_dtype,
                                              std::vector<OwnedTensor> elements) {
  if (elem_dtype == DataType::kInvalid) {
    return Status::InvalidArgument("a sequence needs an element type");
  }
  for (size_t i = 0; i < elements.size(); ++i) {
    if (elements[i].dtype() != elem_dtype) {
      return Status::InvalidArgument(
          fmt::format("sequence element {} is {}, but the sequence holds {} tensors", i,
                      elements[i].valid() ? DataTypeName(elements[i].dtype()) : "not a tensor",
                      DataTypeName(elem_dtype)));
    }
  }
  TensorSequence s(elem_dtype);
  s.elements_ = std::move(elements);
  return s;
}

Status TensorSequence::Insert(int64_t pos, OwnedTensor element) {
  if (element.dtype() != elem_dtype_) {
    return Status::InvalidArgument(fmt::format(
        "cannot insert a {} tensor into a sequence of {} tensors",
        element.valid() ? DataTypeName(element.dtype()) : "invalid", DataTypeName(elem_dtype_)));
  }
  if (pos < 0 || pos > size()) {
    return Status::InvalidArgument(fmt::format(
        "insert position {} is outside [0, {}] for a sequence of length {}", pos, size(), size()));
  }
  elements_.insert(elements_.begin() + pos, std::move(element));
  return Status::OK();
}

Status TensorSequence::Erase(int64_t pos) {
  if (pos < 0 || pos >= size()) {
    return Status::InvalidArgument(fmt::format(
        "erase position {} is outside [0, {}) for a sequence of length {}", pos, size(), size()));
  }
  elements_.erase(elements_.begin() + pos);
  return Status::OK();
}

std::string TensorSequence::Describe() const {
  return fmt::format("sequence of {} {} tensor{}", size(), DataTypeName(elem_dtype_),
                     size() == 1 ? "" : "s");
}

RuntimeValue::RuntimeValue(OwnedTensor tensor) : kind_(Kind::kTensor), tensor_(std::move(tensor)) {
  KILN_CHECK(tensor_.valid(), "RuntimeValue of an invalid tensor");
}

RuntimeValue::RuntimeValue(TensorSequence sequence)
    : kind_(Kind::kSequence), sequence_(std::move(sequence)) {}

RuntimeValue RuntimeValue::None() {
  RuntimeValue v;
  v.kind_ = Kind::kNone;
  return v;
}

const OwnedTensor& RuntimeValue::tensor() const {
  KILN_CHECK(kind_ == Kind::kTensor, "RuntimeValue::tensor() on a ", Describe());
  return tensor_;
}

const TensorSequence& RuntimeValue::sequence() const {
  KILN_CHECK(kind_ == Kind::kSequence, "RuntimeValue::sequence() on a ", Describe());
  return sequence_;
}

std::string RuntimeValue::Describe() const {
  switch (kind_) {
    case Kind::kInvalid:
      return "missing value";
    case Kind::kNone:
      return "none (an empty optional)";
    case Kind::kTensor:
      return fmt::format("tensor {}{}", DataTypeName(tensor_.dtype()), tensor_.shape().ToString());
    case Kind::kSequence:
      return sequence_.Describe();
  }
  return "unknown value";
}

}  // namespace kiln
