// SPDX-License-Identifier: Apache-2.0
#include "backend/backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "base/mutex.h"

namespace kiln {
namespace {

// Complete when recorded, carrying the stream's error at that point.
class DoneEvent final : public Event {
 public:
  explicit DoneEvent(Status status) : status_(std::move(status)) {}
  Status Synchronize() override { return status_; }
  bool Ready() const override { return true; }

 private:
  Status status_;
};

class CpuStream final : public Stream {
 public:
  Device device() const override { return Device::Cpu(); }
  void Launch(std::function<Status()> work) override {
    if (status_.ok()) status_ = work();
  }
  void CopyAsync(void* dst, const void* src, size_t bytes) override {
    if (status_.ok() && bytes > 0) std::memcpy(dst, src, bytes);
  }
  std::unique_ptr<Event> Record() override { return std::make_unique<DoneEvent>(status_); }
  void Wait(std::shared_ptr<Event> event) override {
    // The host waits now: what the CPU runs next comes after the event.
    Status s = event->Synchronize();
    if (status_.ok() && !s.ok()) status_ = std::move(s);
  }
  Status Synchronize() override { return status_; }

 private:
  Status status_;
};

class HostBufferType final : public BufferType {
 public:
  std::string_view name() const override { return "cpu"; }
  Allocator& allocator() override { return HostAllocator(); }
  bool host_accessible() const override { return true; }
  // Host memory is every pointer that no other device's buffer type owns; as a question about
  // one pointer, the CPU answers yes.
  bool Owns(const void*) const override { return true; }
};

class CpuBackendImpl final : public Backend {
 public:
  Device device() const override { return Device::Cpu(); }
  std::string name() const override { return "cpu"; }
  BufferType& buffer_type() override { return host_; }
  BufferType& host_buffer_type() override { return host_; }
  bool async() const override { return false; }
  Result<std::unique_ptr<Stream>> CreateStream() override {
    return std::unique_ptr<Stream>(std::make_unique<CpuStream>());
  }

 private:
  HostBufferType host_;
};

struct Registry {
  Mutex mu;
  std::vector<std::unique_ptr<Backend>> backends KILN_GUARDED_BY(mu);
  std::map<DeviceType, std::string> missing KILN_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // lives until the process ends
  return *r;
}

}  // namespace

Backend& CpuBackend() {
  static CpuBackendImpl* cpu = new CpuBackendImpl();
  return *cpu;
}

Status BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  if (backend == nullptr) return Status::InvalidArgument("BackendRegistry::Register: null backend");
  const Device device = backend->device();
  if (device.is_cpu()) {
    return Status::AlreadyExists("the CPU backend is built in");
  }
  Registry& r = TheRegistry();
  MutexLock lock(r.mu);
  for (const std::unique_ptr<Backend>& b : r.backends) {
    if (b->device() == device) {
      return Status::AlreadyExists("a backend for " + device.ToString() + " is registered");
    }
  }
  r.backends.push_back(std::move(backend));
  return Status::OK();
}

Backend* BackendRegistry::Find(Device device) {
  if (device.is_cpu()) return &CpuBackend();
  Registry& r = TheRegistry();
  MutexLock lock(r.mu);
  for (const std::unique_ptr<Backend>& b : r.backends) {
    if (b->device() == device) return b.get();
  }
  return nullptr;
}

std::vector<Backend*> BackendRegistry::All() {
  std::vector<Backend*> all{&CpuBackend()};
  Registry& r = TheRegistry();
  MutexLock lock(r.mu);
  for (const std::unique_ptr<Backend>& b : r.backends) all.push_back(b.get());
  return all;
}

void BackendRegistry::SetMissingReason(DeviceType type, std::string why) {
  Registry& r = TheRegistry();
  MutexLock lock(r.mu);
  r.missing[type] = std::move(why);
}

std::string BackendRegistry::MissingReason(DeviceType type) {
  Registry& r = TheRegistry();
  MutexLock lock(r.mu);
  auto it = r.missing.find(type);
  if (it != r.missing.end()) return it->second;
  const std::string name = Device{type, 0}.ToString();
  return "no " + name.substr(0, name.find(':')) + " device is registered in this process";
}

std::vector<Backend*> BackendRegistry::OfType(DeviceType type) {
  std::vector<Backend*> found;
  Registry& r = TheRegistry();
  MutexLock lock(r.mu);
  for (const std::unique_ptr<Backend>& b : r.backends) {
    if (b->device().type == type) found.push_back(b.get());
  }
  std::sort(found.begin(), found.end(),
            [](Backend* a, Backend* b) { return a->device().index < b->device().index; });
  return found;
}

}  // namespace kiln
