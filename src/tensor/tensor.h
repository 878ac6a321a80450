// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tensor: a non-owning view of typed, shaped memory on a device (dtype, shape, byte strides, data
// pointer, device). OwnedTensor: a Tensor together with the Buffer that holds its bytes.
//
// Views are cheap values; they are valid while the memory they point at is. Kernels take views.
// OwnedTensor shares its buffer (shared_ptr) so read-only data, such as model weights, can be
// shared by several sessions.
//
//   KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(DataType::kFloat32, Shape{2, 3}));
//   float* p = t.data<float>();
//
// BYTES tensors hold one std::string per element; OwnedTensor constructs and destroys them.
//
// Thread safety: no synchronization; concurrent reads are fine.

#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "base/result.h"
#include "tensor/buffer.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace kiln {

class Tensor {
 public:
  Tensor() = default;  // dtype kInvalid, null data: also how an absent optional input looks
  // A contiguous row-major view.
  Tensor(DataType dtype, const Shape& shape, void* data, Device device = Device::Cpu());

  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Device device() const { return device_; }
  bool valid() const { return dtype_ != DataType::kInvalid; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return shape_.NumElements(); }
  // Bytes covered by a contiguous view.
  size_t size_bytes() const { return static_cast<size_t>(num_elements()) * DataTypeSize(dtype_); }
  // Byte stride of dimension i.
  int64_t stride_bytes(int i) const { return strides_[static_cast<size_t>(i)]; }
  bool is_contiguous() const;

  void* raw_data() const { return data_; }
  // REQUIRES: DataTypeOf<T>() == dtype() (checked in debug builds).
  template <typename T>
  T* data() const {
    KILN_DCHECK(DataTypeOf<std::remove_const_t<T>>() == dtype_, "tensor dtype is ",
                DataTypeName(dtype_));
    return static_cast<T*>(data_);
  }

  // Same memory seen with another shape of equal element count (contiguous views only).
  Result<Tensor> Reshaped(const Shape& shape) const;

 private:
  DataType dtype_ = DataType::kInvalid;
  Shape shape_;
  std::array<int64_t, Shape::kMaxRank> strides_{};
  void* data_ = nullptr;
  Device device_;
};

class OwnedTensor {
 public:
  OwnedTensor() = default;
  // Allocates a contiguous tensor. Numeric contents are zero-filled; BYTES elements are empty.
  static Result<OwnedTensor> Allocate(DataType dtype, const Shape& shape,
                                      Allocator& allocator = HostAllocator());
  // Allocate without the zero-fill, for a caller that writes every element before anyone reads
  // it (kernels writing their whole output). BYTES elements are still constructed empty.
  static Result<OwnedTensor> AllocateForOverwrite(DataType dtype, const Shape& shape,
                                                  Allocator& allocator = HostAllocator());
  // Allocates and copies from `src` (host, contiguous). Strings are copied element by element.
  static Result<OwnedTensor> CopyOf(const Tensor& src, Allocator& allocator = HostAllocator());
  // Memory owned elsewhere, kept alive by `owner` for as long as this tensor (or a copy of it)
  // lives; no bytes are copied. REQUIRES: `view` points into memory that `owner` keeps valid, and
  // view.dtype() is not BYTES (BYTES elements must be constructed std::strings).
  static OwnedTensor Borrow(const Tensor& view, std::shared_ptr<const void> owner);

  const Tensor& view() const { return view_; }
  DataType dtype() const { return view_.dtype(); }
  const Shape& shape() const { return view_.shape(); }
  int64_t num_elements() const { return view_.num_elements(); }
  size_t size_bytes() const { return view_.size_bytes(); }
  bool valid() const { return view_.valid(); }
  template <typename T>
  T* data() const {
    return view_.data<T>();
  }
  void* raw_data() const { return view_.raw_data(); }

  // Changes the shape in place (same element count), keeping the buffer.
  Status Reshape(const Shape& shape);

 private:
  static Result<OwnedTensor> AllocateImpl(DataType dtype, const Shape& shape, Allocator& allocator,
                                          bool zero);
  std::shared_ptr<Buffer> buffer_;
  Tensor view_;
};

}  // namespace kiln
