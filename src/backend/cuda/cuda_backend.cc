// SPDX-License-Identifier: Apache-2.0
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "base/mutex.h"

namespace kiln {
namespace {

Status CudaError(cudaError_t e, const char* call, const char* file, int line) {
  return Status::Internal(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                      cudaGetErrorString(e), cudaGetErrorName(e)));
}

#define KILN_CUDA_RETURN_IF_ERROR(call)                         \
  do {                                                          \
    const cudaError_t kiln_cuda_e = (call);                     \
    if (kiln_cuda_e != cudaSuccess) {                           \
      return CudaError(kiln_cuda_e, #call, __FILE__, __LINE__); \
    }                                                           \
  } while (false)

// Makes GPU `index` current on the calling thread (CUDA's current device is per thread).
Status UseDevice(int index) {
  KILN_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  return Status::OK();
}

class DevicePoolAllocator final : public Allocator {
 public:
  DevicePoolAllocator(int index, cudaMemPool_t pool) : index_(index), pool_(pool) {}
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    KILN_RETURN_IF_ERROR(UseDevice(index_));
    void* p = nullptr;
    // Pool blocks are at least 256-byte aligned, more than kiln asks.
    (void)alignment;
    const cudaError_t e =
        cudaMallocFromPoolAsync(&p, bytes == 0 ? 1 : bytes, pool_, cudaStreamLegacy);
    if (e == cudaErrorMemoryAllocation) {
      return Status::ResourceExhausted(fmt::format(
          "cuda:{}: out of device memory for {} bytes ({})", index_, bytes, cudaGetErrorString(e)));
    }
    if (e != cudaSuccess) return CudaError(e, "cudaMallocFromPoolAsync", __FILE__, __LINE__);
    return p;
  }
  void Free(void* ptr, size_t) override {
    if (ptr == nullptr || !UseDevice(index_).ok()) return;
    (void)cudaFreeAsync(ptr, cudaStreamLegacy);  // ordered after the work enqueued before
  }
  Device device() const override { return Device::Cuda(index_); }
  Status Fill(void* ptr, int value, size_t bytes) override {
    if (bytes == 0) return Status::OK();
    KILN_RETURN_IF_ERROR(UseDevice(index_));
    KILN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ptr, value, bytes, cudaStreamLegacy));
    return Status::OK();
  }

 private:
  const int index_;
  const cudaMemPool_t pool_;
};

// Pinned host memory, with freed blocks cached by their (rounded) size up to `cache_limit`
// bytes, so that staging a batch of a size seen before does not call cudaMallocHost.
class PinnedAllocator final : public Allocator {
 public:
  explicit PinnedAllocator(uint64_t cache_limit) : cache_limit_(cache_limit) {}
  ~PinnedAllocator() override {
    MutexLock lock(mu_);
    for (auto& [size, blocks] : cache_) {
      for (void* p : blocks) (void)cudaFreeHost(p);
    }
  }
  Result<void*> Allocate(size_t bytes, size_t) override {
    const size_t size = Rounded(bytes);
    {
      MutexLock lock(mu_);
      auto it = cache_.find(size);
      if (it != cache_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return p;
      }
    }
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      return Status::ResourceExhausted(
          fmt::format("out of pinned host memory for {} bytes", bytes));
    }
    if (e != cudaSuccess) return CudaError(e, "cudaMallocHost", __FILE__, __LINE__);
    return p;
  }
  void Free(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    const size_t size = Rounded(bytes);
    {
      MutexLock lock(mu_);
      if (cached_ + size <= cache_limit_) {
        cache_[size].push_back(ptr);
        cached_ += size;
        return;
      }
    }
    (void)cudaFreeHost(ptr);
  }
  Device device() const override { return Device::Cpu(); }

 private:
  // Sizes are rounded up to 64 KiB steps (to the next power of two past 16 MiB), so that batches
  // of nearby sizes share blocks.
  static size_t Rounded(size_t bytes) {
    const size_t b = bytes == 0 ? 1 : bytes;
    if (b > (size_t{16} << 20)) {
      size_t p = size_t{16} << 20;
      while (p < b) p <<= 1;
      return p;
    }
    const size_t step = size_t{64} << 10;
    return (b + step - 1) / step * step;
  }
  const uint64_t cache_limit_;
  Mutex mu_;
  std::map<size_t, std::vector<void*>> cache_ KILN_GUARDED_BY(mu_);
  uint64_t cached_ KILN_GUARDED_BY(mu_) = 0;
};

// Whether `ptr` is memory of kind `type` (on GPU `index` for device memory).
bool PointerIs(const void* ptr, cudaMemoryType type, int index) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: a plain host pointer is not an error here
    return false;
  }
  return a.type == type && (type != cudaMemoryTypeDevice || a.device == index);
}

class CudaBufferType final : public BufferType {
 public:
  CudaBufferType(std::string name, std::unique_ptr<Allocator> allocator, bool host, int index)
      : name_(std::move(name)), allocator_(std::move(allocator)), host_(host), index_(index) {}
  std::string_view name() const override { return name_; }
  Allocator& allocator() override { return *allocator_; }
  bool host_accessible() const override { return host_; }
  bool Owns(const void* ptr) const override {
    return PointerIs(ptr, host_ ? cudaMemoryTypeHost : cudaMemoryTypeDevice, index_);
  }

 private:
  const std::string name_;
  std::unique_ptr<Allocator> allocator_;
  const bool host_;
  const int index_;
};

class CudaEvent final : public Event {
 public:
  CudaEvent(cudaEvent_t event, Status stream_status)
      : event_(event), stream_status_(std::move(stream_status)) {}
  ~CudaEvent() override {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  Status Synchronize() override {
    if (!stream_status_.ok()) return stream_status_;
    KILN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
    return Status::OK();
  }
  bool Ready() const override {
    return !stream_status_.ok() || cudaEventQuery(event_) == cudaSuccess;
  }
  Result<int64_t> NanosecondsSince(const Event& earlier) const override {
    const auto* e = dynamic_cast<const CudaEvent*>(&earlier);
    if (e == nullptr || e->event_ == nullptr || event_ == nullptr) {
      return Status::InvalidArgument("NanosecondsSince: not two recorded CUDA events");
    }
    float ms = 0.0f;
    KILN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e->event_, event_));
    return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }
  cudaEvent_t event() const { return event_; }

 private:
  cudaEvent_t event_;
  Status stream_status_;  // the stream's error when recorded (then the event is never waited on)
};

class CudaStream final : public Stream {
 public:
  CudaStream(int index, cudaStream_t stream) : index_(index), stream_(stream) {}
  ~CudaStream() override {
    if (UseDevice(index_).ok()) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
  }
  Device device() const override { return Device::Cuda(index_); }
  cudaStream_t stream() const { return stream_; }

  void Launch(std::function<Status()> work) override {
    if (!status_.ok()) return;
    status_ = UseDevice(index_);
    if (status_.ok()) status_ = work();
  }
  void CopyAsync(void* dst, const void* src, size_t bytes) override {
    if (!status_.ok() || bytes == 0) return;
    status_ =
        Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync");
  }
  std::unique_ptr<Event> Record() override { return RecordWith(cudaEventDisableTiming); }
  std::unique_ptr<Event> RecordTimed() override { return RecordWith(cudaEventDefault); }
  std::unique_ptr<Event> RecordWith(unsigned int flags) {
    cudaEvent_t e = nullptr;
    if (status_.ok()) {
      status_ = Check(cudaEventCreateWithFlags(&e, flags), "cudaEventCreate");
    }
    if (status_.ok()) status_ = Check(cudaEventRecord(e, stream_), "cudaEventRecord");
    return std::make_unique<CudaEvent>(e, status_);
  }
  void Wait(std::shared_ptr<Event> event) override {
    if (!status_.ok()) return;
    if (auto* ce = dynamic_cast<CudaEvent*>(event.get()); ce != nullptr && ce->event() != nullptr) {
      status_ = Check(cudaStreamWaitEvent(stream_, ce->event(), 0), "cudaStreamWaitEvent");
      return;
    }
    status_ = event->Synchronize();  // another device's event: the host waits for it
  }
  Status Synchronize() override {
    if (!status_.ok()) return status_;
    status_ = Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return status_;
  }

 private:
  Status Check(cudaError_t e, const char* call) {
    return e == cudaSuccess ? Status::OK() : CudaError(e, call, __FILE__, __LINE__);
  }
  const int index_;
  const cudaStream_t stream_;
  Status status_;  // the first error; later work is skipped
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int index, std::string gpu_name, cudaMemPool_t pool, uint64_t pinned_pool_bytes)
      : index_(index),
        pool_(pool),
        name_(fmt::format("cuda:{} ({})", index, gpu_name)),
        memory_(fmt::format("cuda:{}", index), std::make_unique<DevicePoolAllocator>(index, pool),
                /*host=*/false, index),
        pinned_("cuda_pinned", std::make_unique<PinnedAllocator>(pinned_pool_bytes),
                /*host=*/true, index) {}

  Device device() const override { return Device::Cuda(index_); }
  std::string name() const override { return name_; }
  BufferType& buffer_type() override { return memory_; }
  BufferType& host_buffer_type() override { return pinned_; }
  bool async() const override { return true; }
  Result<std::unique_ptr<Stream>> CreateStream() override {
    KILN_RETURN_IF_ERROR(UseDevice(index_));
    cudaStream_t s = nullptr;
    KILN_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&s));  // blocking: ordered with the pool's frees
    return std::unique_ptr<Stream>(std::make_unique<CudaStream>(index_, s));
  }
  void TrimCachedMemory() override {
    if (!UseDevice(index_).ok()) return;
    (void)cudaDeviceSynchronize();  // frees enqueued on the legacy stream have run
    (void)cudaMemPoolTrimTo(pool_, 0);
  }
  void PushRange(std::string_view name) override { nvtxRangePushA(std::string(name).c_str()); }
  void PopRange() override { nvtxRangePop(); }

 private:
  const int index_;
  const cudaMemPool_t pool_;
  const std::string name_;
  CudaBufferType memory_;
  CudaBufferType pinned_;
};

}  // namespace

CUstream_st* CudaStreamHandle(Stream* stream) {
  auto* s = dynamic_cast<CudaStream*>(stream);
  return s != nullptr ? s->stream() : nullptr;
}

int CudaDeviceCount(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why != nullptr) *why = fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "no CUDA device";
  return n;
}

Result<int> RegisterCudaBackends(const CudaBackendOptions& options) {
  static Mutex mu;
  static int registered = -1;
  MutexLock lock(mu);
  if (registered >= 0) return registered;
  const int n = CudaDeviceCount();
  for (int i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(UseDevice(i));
    cudaDeviceProp prop{};
    KILN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = i;
    cudaMemPool_t pool = nullptr;
    KILN_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&pool, &props));
    uint64_t threshold = options.pool_release_threshold_bytes;
    if (auto it = options.pool_release_threshold_per_gpu.find(i);
        it != options.pool_release_threshold_per_gpu.end()) {
      threshold = it->second;
    }
    KILN_CUDA_RETURN_IF_ERROR(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    KILN_RETURN_IF_ERROR(BackendRegistry::Register(
        std::make_unique<CudaBackend>(i, prop.name, pool, options.pinned_pool_bytes)));
  }
  if (n == 0) {
    std::string why;
    CudaDeviceCount(&why);
    BackendRegistry::SetMissingReason(DeviceType::kCuda, "no GPU: " + why);
  }
  registered = n;
  return n;
}

Result<CudaMemoryInfo> GetCudaMemoryInfo(int index) {
  KILN_RETURN_IF_ERROR(UseDevice(index));
  size_t free_bytes = 0, total_bytes = 0;
  KILN_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return CudaMemoryInfo{free_bytes, total_bytes};
}

}  // namespace kiln
