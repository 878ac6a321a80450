// SPDX-License-Identifier: Apache-2.0
#pragma once
// Allocator and Buffer: device memory ownership.
//
// An Allocator hands out raw byte ranges on one device. A Buffer owns one such range and returns
// it to its allocator when destroyed. Tensors (tensor.h) are views into Buffers.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> buf, Buffer::Allocate(HostAllocator(), 1024));
//   float* p = static_cast<float*>(buf->data());
//
// Thread safety: Allocator implementations are thread-safe. A Buffer is not synchronized; its
// owner decides who writes.

#include <cstddef>
#include <memory>

#include "base/result.h"
#include "tensor/device.h"

namespace kiln {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns `bytes` bytes aligned to `alignment` (a power of two), or RESOURCE_EXHAUSTED.
  // A zero-byte request returns a valid, unique, non-null pointer.
  virtual Result<void*> Allocate(size_t bytes, size_t alignment) = 0;
  // REQUIRES: ptr came from Allocate on this allocator with the same `bytes`.
  virtual void Free(void* ptr, size_t bytes) = 0;
  virtual Device device() const = 0;
  // Sets `bytes` bytes at `ptr` (memory this allocator handed out) to `value`, as memset does;
  // allocators of memory the host may not write (a GPU's) override it with the device's own
  // fill, ordered before any work enqueued on the device after the call.
  virtual Status Fill(void* ptr, int value, size_t bytes);
};

// Plain aligned host memory. The process-wide instance lives forever.
Allocator& HostAllocator();

inline constexpr size_t kDefaultAlignment = 64;

class Buffer {
 public:
  // Allocates `bytes` from `allocator`, which must outlive the Buffer.
  static Result<std::unique_ptr<Buffer>> Allocate(Allocator& allocator, size_t bytes,
                                                  size_t alignment = kDefaultAlignment);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  Device device() const { return allocator_->device(); }

 private:
  Buffer(Allocator* allocator, void* data, size_t size_bytes)
      : allocator_(allocator), data_(data), size_bytes_(size_bytes) {}

  Allocator* allocator_;
  void* data_;
  size_t size_bytes_;
};

}  // namespace kiln
