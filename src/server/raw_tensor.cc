// SPDX-License-Identifier: Apache-2.0
// Raw tensor encoding and decoding (see raw_tensor.h). The host is little-endian (x86-64 and
// AArch64 Linux), so fixed-size elements are copied or borrowed as they are.
#include "server/raw_tensor.h"

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

static_assert(std::endian::native == std::endian::little, "raw tensors are little-endian");

uint32_t ReadLength(const char* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Result<OwnedTensor> DecodeBytes(std::string_view input, const Shape& shape, std::string_view data) {
  const int64_t count = shape.NumElements();
  // Every element takes at least its 4-byte prefix: refuse before allocating count strings.
  if (static_cast<uint64_t>(count) > data.size() / 4) {
    return Status::InvalidArgument(fmt::format(
        "input '{}': BYTES data of {} bytes cannot hold {} elements (each needs a 4-byte length "
        "prefix)",
        input, data.size(), count));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, OwnedTensor::Allocate(DataType::kBytes, shape));
  std::string* out = tensor.data<std::string>();
  size_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (data.size() - offset < 4) {
      return Status::InvalidArgument(
          fmt::format("input '{}': BYTES element {} has a truncated length prefix at byte {} of {}",
                      input, i, offset, data.size()));
    }
    const uint32_t length = ReadLength(data.data() + offset);
    offset += 4;
    if (length > data.size() - offset) {
      return Status::InvalidArgument(
          fmt::format("input '{}': BYTES element {} declares {} bytes but only {} remain", input, i,
                      length, data.size() - offset));
    }
    out[i].assign(data.data() + offset, length);
    offset += length;
  }
  if (offset != data.size()) {
    return Status::InvalidArgument(
        fmt::format("input '{}': {} bytes left after the {} BYTES elements of shape {}", input,
                    data.size() - offset, count, shape.ToString()));
  }
  return tensor;
}

}  // namespace

Result<size_t> RawTensorSize(std::string_view input, DataType dtype, const Shape& shape) {
  const uint64_t count = static_cast<uint64_t>(shape.NumElements());
  const size_t elem = DataTypeSize(dtype);
  if (count > std::numeric_limits<size_t>::max() / elem) {
    return Status::InvalidArgument(fmt::format("input '{}': shape {} of {} is too large", input,
                                               shape.ToString(), DataTypeName(dtype)));
  }
  return static_cast<size_t>(count) * elem;
}

Result<OwnedTensor> DecodeRawTensor(std::string_view input, DataType dtype, const Shape& shape,
                                    std::string_view data, std::shared_ptr<const void> owner) {
  if (dtype == DataType::kInvalid) {
    return Status::InvalidArgument(fmt::format("input '{}' has an invalid datatype", input));
  }
  if (dtype == DataType::kBytes) return DecodeBytes(input, shape, data);
  KILN_ASSIGN_OR_RETURN(const size_t expected, RawTensorSize(input, dtype, shape));
  if (data.size() != expected) {
    return Status::InvalidArgument(
        fmt::format("input '{}': {} bytes of binary data, but shape {} of {} needs {} bytes", input,
                    data.size(), shape.ToString(), DataTypeName(dtype), expected));
  }
  if (dtype == DataType::kBool) {
    for (size_t i = 0; i < data.size(); ++i) {
      const auto byte = static_cast<unsigned char>(data[i]);
      if (byte > 1) {
        return Status::InvalidArgument(
            fmt::format("input '{}': BOOL element {} is byte {}; expected 0 or 1", input, i, byte));
      }
    }
  }
  const size_t elem = DataTypeSize(dtype);
  const bool aligned = reinterpret_cast<uintptr_t>(data.data()) % elem == 0;
  if (owner != nullptr && aligned && expected > 0) {
    // The view is read-only in practice; Tensor has no const view type.
    const Tensor view(dtype, shape, const_cast<char*>(data.data()));
    return OwnedTensor::Borrow(view, std::move(owner));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor tensor, OwnedTensor::Allocate(dtype, shape));
  if (expected > 0) std::memcpy(tensor.raw_data(), data.data(), expected);
  return tensor;
}

size_t RawTensorBytes(const Tensor& tensor) {
  if (tensor.dtype() != DataType::kBytes) return tensor.size_bytes();
  size_t n = 0;
  const auto* s = tensor.data<const std::string>();
  for (int64_t i = 0; i < tensor.num_elements(); ++i) n += 4 + s[i].size();
  return n;
}

Status AppendRawTensor(const Tensor& tensor, std::string* out) {
  if (tensor.dtype() != DataType::kBytes) {
    if (tensor.size_bytes() == 0) return Status::OK();
    out->append(static_cast<const char*>(tensor.raw_data()), tensor.size_bytes());
    return Status::OK();
  }
  const auto* s = tensor.data<const std::string>();
  const int64_t n = tensor.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    if (s[i].size() > std::numeric_limits<uint32_t>::max()) {
      return Status::InvalidArgument(
          fmt::format("BYTES element {} of {} bytes is longer than 2^32 - 1", i, s[i].size()));
    }
  }
  out->reserve(out->size() + RawTensorBytes(tensor));
  for (int64_t i = 0; i < n; ++i) {
    const auto length = static_cast<uint32_t>(s[i].size());
    char prefix[4];
    std::memcpy(prefix, &length, 4);
    out->append(prefix, 4);
    out->append(s[i]);
  }
  return Status::OK();
}

}  // namespace kiln
