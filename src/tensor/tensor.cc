// SPDX-License-Identifier: Apache-2.0
#include "tensor/tensor.h"

#include <fmt/format.h>

#include <limits>

namespace kiln {

Tensor::Tensor(DataType dtype, const Shape& shape, void* data, Device device)
    : dtype_(dtype), shape_(shape), data_(data), device_(device) {
  int64_t stride = static_cast<int64_t>(DataTypeSize(dtype));
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides_[static_cast<size_t>(i)] = stride;
    stride *= shape.dim(i);
  }
}

bool Tensor::is_contiguous() const {
  int64_t stride = static_cast<int64_t>(DataTypeSize(dtype_));
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    if (shape_.dim(i) != 1 && strides_[static_cast<size_t>(i)] != stride) return false;
    stride *= shape_.dim(i);
  }
  return true;
}

Result<Tensor> Tensor::Reshaped(const Shape& shape) const {
  if (!is_contiguous()) return Status::Internal("Reshaped() on a non-contiguous view");
  if (shape.NumElements() != num_elements()) {
    return Status::InvalidArgument(fmt::format("cannot reshape {} ({} elements) to {}",
                                               shape_.ToString(), num_elements(),
                                               shape.ToString()));
  }
  return Tensor(dtype_, shape, data_, device_);
}

Result<OwnedTensor> OwnedTensor::Allocate(DataType dtype, const Shape& shape,
                                          Allocator& allocator) {
  return AllocateImpl(dtype, shape, allocator, /*zero=*/true);
}

Result<OwnedTensor> OwnedTensor::AllocateForOverwrite(DataType dtype, const Shape& shape,
                                                      Allocator& allocator) {
  return AllocateImpl(dtype, shape, allocator, /*zero=*/false);
}

Result<OwnedTensor> OwnedTensor::AllocateImpl(DataType dtype, const Shape& shape,
                                              Allocator& allocator, bool zero) {
  if (dtype == DataType::kInvalid) return Status::InvalidArgument("cannot allocate INVALID dtype");
  const int64_t n = shape.NumElements();
  const size_t elem = DataTypeSize(dtype);
  if (n > 0 && static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / elem) {
    return Status::ResourceExhausted(
        fmt::format("tensor {} of {} is too large", shape.ToString(), DataTypeName(dtype)));
  }
  const size_t bytes = static_cast<size_t>(n) * elem;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> buffer, Buffer::Allocate(allocator, bytes));
  OwnedTensor t;
  if (dtype == DataType::kBytes) {
    auto* strings = static_cast<std::string*>(buffer->data());
    for (int64_t i = 0; i < n; ++i) new (strings + i) std::string();
    t.buffer_ = std::shared_ptr<Buffer>(buffer.release(), [n](Buffer* b) {
      auto* s = static_cast<std::string*>(b->data());
      for (int64_t i = 0; i < n; ++i) s[i].~basic_string();
      delete b;
    });
  } else {
    if (zero && bytes > 0) KILN_RETURN_IF_ERROR(allocator.Fill(buffer->data(), 0, bytes));
    t.buffer_ = std::move(buffer);
  }
  t.view_ = Tensor(dtype, shape, t.buffer_->data(), allocator.device());
  return t;
}

OwnedTensor OwnedTensor::Borrow(const Tensor& view, std::shared_ptr<const void> owner) {
  KILN_CHECK(view.dtype() != DataType::kBytes, "Borrow() of a BYTES view");
  OwnedTensor t;
  // Aliasing constructor: shares ownership of `owner`, points at no Buffer.
  t.buffer_ = std::shared_ptr<Buffer>(std::move(owner), nullptr);
  t.view_ = view;
  return t;
}

Result<OwnedTensor> OwnedTensor::CopyOf(const Tensor& src, Allocator& allocator) {
  if (!src.is_contiguous()) return Status::Internal("CopyOf() on a non-contiguous view");
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, Allocate(src.dtype(), src.shape(), allocator));
  if (src.dtype() == DataType::kBytes) {
    const auto* in = src.data<const std::string>();
    auto* out = t.data<std::string>();
    for (int64_t i = 0; i < src.num_elements(); ++i) out[i] = in[i];
  } else if (src.size_bytes() > 0) {
    std::memcpy(t.raw_data(), src.raw_data(), src.size_bytes());
  }
  return t;
}

Status OwnedTensor::Reshape(const Shape& shape) {
  KILN_ASSIGN_OR_RETURN(view_, view_.Reshaped(shape));
  return Status::OK();
}

}  // namespace kiln
