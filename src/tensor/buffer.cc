// SPDX-License-Identifier: Apache-2.0
#include "tensor/buffer.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln {
namespace {

class HostAllocatorImpl final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    if (alignment < sizeof(void*)) alignment = sizeof(void*);
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded == 0) rounded = alignment;
    if (rounded < bytes) {
      return Status::ResourceExhausted(fmt::format("host allocation of {} bytes overflows", bytes));
    }
    void* p = std::aligned_alloc(alignment, rounded);
    if (p == nullptr) {
      return Status::ResourceExhausted(fmt::format("host allocation of {} bytes failed", bytes));
    }
    return p;
  }
  void Free(void* ptr, size_t) override { std::free(ptr); }
  Device device() const override { return Device::Cpu(); }
};

}  // namespace

Status Allocator::Fill(void* ptr, int value, size_t bytes) {
  if (bytes > 0) std::memset(ptr, value, bytes);
  return Status::OK();
}

Allocator& HostAllocator() {
  static HostAllocatorImpl* const instance = new HostAllocatorImpl();
  return *instance;
}

Result<std::unique_ptr<Buffer>> Buffer::Allocate(Allocator& allocator, size_t bytes,
                                                 size_t alignment) {
  KILN_ASSIGN_OR_RETURN(void* p, allocator.Allocate(bytes, alignment));
  return std::unique_ptr<Buffer>(new Buffer(&allocator, p, bytes));
}

Buffer::~Buffer() { allocator_->Free(data_, size_bytes_); }

}  // namespace kiln
