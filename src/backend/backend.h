// SPDX-License-Identifier: Apache-2.0
#pragma once
// The device seam: one small abstract class each for a device (Backend), a kind of memory
// (BufferType, whose Allocator hands out Buffers: tensor/buffer.h), a queue of work on a device
// (Stream) and a point in such a queue (Event), in the shape of ggml-backend. The runtime places
// graph nodes on devices and runs them through these classes; kernels of an asynchronous device
// enqueue their work on the stream their KernelContext carries.
//
//   Backend& dev = *BackendRegistry::Find(Device::Cuda(0));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Stream> s, dev.CreateStream());
//   s->CopyAsync(dev_ptr, host_ptr, bytes);      // host -> device, ordered on s
//   s->Launch([=] { return RunKernel(dev_ptr); });  // after the copy
//   std::unique_ptr<Event> done = s->Record();
//   KILN_RETURN_IF_ERROR(done->Synchronize());   // the host waits for both
//
// Semantics every backend keeps:
//   - Work on one stream runs in the order it was enqueued (copies and launches alike).
//   - An error of one piece of work fails the stream: the work after it is skipped, and every
//     later Synchronize (of the stream or of an event recorded after the error) returns it.
//   - A copy's source must stay valid and unchanged, and its destination untouched by others,
//     until the copy has run (an event recorded after it completes).
//   - The CPU backend's stream is synchronous: work runs inside Launch / CopyAsync, on the
//     calling thread, and its events are complete when recorded.
//
// Optional capabilities are query methods (Backend::async, BufferType::host_accessible,
// Backend::pinned_host_buffer_type), never null function pointers.
//
// Thread safety: Backends, BufferTypes and the registry are thread-safe. A Stream is used by one
// thread at a time (its work may run on another thread); an Event may be waited on from any
// thread.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tensor/buffer.h"
#include "tensor/device.h"

namespace kiln {

// A point in a stream's work: complete once everything enqueued on the stream before it ran.
class Event {
 public:
  virtual ~Event() = default;
  // Blocks until the event is complete; returns the stream's first error up to that point.
  virtual Status Synchronize() = 0;
  // Whether the event is complete, without waiting.
  virtual bool Ready() const = 0;
  // Device time from `earlier` (an event of the same stream recorded with RecordTimed) to this
  // one, once both are complete. UNIMPLEMENTED where the device keeps no timestamps (the CPU's
  // and the test device's events).
  virtual Result<int64_t> NanosecondsSince(const Event& earlier) const {
    (void)earlier;
    return Status::Unimplemented("this device's events carry no time");
  }
};

// An ordered queue of work on one device.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  // Enqueues `work`, to run after everything enqueued before it, on the device's execution
  // context (the calling thread for the CPU). Its error fails the stream.
  virtual void Launch(std::function<Status()> work) = 0;
  // Enqueues a copy of `bytes` bytes from `src` to `dst`. Each side is memory of this stream's
  // device or host memory (plain or pinned); the backend knows which from the pointers'
  // buffer types (BufferType::Owns). REQUIRES: the ranges do not overlap.
  virtual void CopyAsync(void* dst, const void* src, size_t bytes) = 0;
  // An event that completes when the work enqueued so far has run.
  virtual std::unique_ptr<Event> Record() = 0;
  // Record() with a device timestamp, for Event::NanosecondsSince (kiln profile's device times);
  // Record() where the device has no timestamps.
  virtual std::unique_ptr<Event> RecordTimed() { return Record(); }
  // Makes the work enqueued after this call wait until `event` (of any stream) is complete.
  virtual void Wait(std::shared_ptr<Event> event) = 0;
  // Blocks until everything enqueued so far has run; returns the stream's first error.
  virtual Status Synchronize() = 0;
};

// A kind of memory: a device's own, or host memory a device reads fastest (pinned).
class BufferType {
 public:
  virtual ~BufferType() = default;
  // "cpu", "cpu_pinned", "cuda:0", ...
  virtual std::string_view name() const = 0;
  virtual Allocator& allocator() = 0;
  // Whether host code (the CPU kernels, memcpy) may read and write this memory directly.
  virtual bool host_accessible() const = 0;
  // Whether `ptr` points into memory this buffer type handed out (for copies that must tell
  // host memory from device memory).
  virtual bool Owns(const void* ptr) const = 0;
};

// One device.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // "cpu", "cuda:0 (NVIDIA H200)", ...: for logs and messages.
  virtual std::string name() const = 0;
  // The device's own memory.
  virtual BufferType& buffer_type() = 0;
  // Host memory for staging the device's inputs and outputs: pinned host memory where the
  // device has it, else plain host memory. The CPU's is its own buffer type.
  virtual BufferType& host_buffer_type() = 0;
  // Whether work on this device's streams runs asynchronously to the host (false: Launch and
  // CopyAsync run before they return).
  virtual bool async() const = 0;
  virtual Result<std::unique_ptr<Stream>> CreateStream() = 0;
  // Gives memory the device's pools keep cached for reuse back to the device (after a model is
  // unloaded); a no-op where nothing is cached.
  virtual void TrimCachedMemory() {}
  // Annotations for the device's profilers (NVTX ranges for Nsight on CUDA): the runtime brackets
  // each node it runs on the device with them. No-ops by default. Not nested across threads:
  // a range pushed on one thread is popped on that thread.
  virtual void PushRange(std::string_view name) { (void)name; }
  virtual void PopRange() {}
};

// The CPU: host memory (HostAllocator), synchronous streams.
Backend& CpuBackend();

// The backends of this process: the CPU always; others as they are registered (the CUDA backend
// when built and a GPU is present; tests register their own).
class BackendRegistry {
 public:
  // Registers `backend` for its device, replacing none: a second backend for the same device is
  // ALREADY_EXISTS. Backends live until the process ends.
  static Status Register(std::unique_ptr<Backend> backend);
  // The backend of `device`, or null when none is registered.
  static Backend* Find(Device device);
  // Every registered backend, the CPU first.
  static std::vector<Backend*> All();
  // Why devices of `type` are missing (no GPU, no driver, a build without the backend): set by
  // whoever tried to register them, for load errors. Default: "no <type> device is registered
  // in this process".
  static void SetMissingReason(DeviceType type, std::string why);
  static std::string MissingReason(DeviceType type);
  // The registered devices of `type`, by index.
  static std::vector<Backend*> OfType(DeviceType type);
};

}  // namespace kiln
