// SPDX-License-Identifier: Apache-2.0
// cuDNN handles per (thread, device) and cuDNN errors as Status values; see dnn_handles.h.

#ifdef KILN_HAVE_CUDNN

#include "kernels/cuda/dnn_handles.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "base/mutex.h"
#include "kernels/cuda/common.h"

namespace kiln::cuda {

Status CudnnError(cudnnStatus_t s, const char* call, const char* file, int line) {
  return Status::Internal(fmt::format("{} failed at {}:{}: {} (cudnnStatus_t {})", call, file, line,
                                      cudnnGetErrorString(s), static_cast<int>(s)));
}

namespace {

// The idle handles of every device, shared by all threads. Never destroyed (see the header).
class HandlePool {
 public:
  static HandlePool& Get() {
    static HandlePool* pool = new HandlePool();
    return *pool;
  }

  // An idle handle of `device`, or null when there is none.
  cudnnHandle_t Take(int device) KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    for (size_t i = 0; i < idle_.size(); ++i) {
      if (idle_[i].first != device) continue;
      cudnnHandle_t h = idle_[i].second;
      idle_[i] = idle_.back();
      idle_.pop_back();
      return h;
    }
    return nullptr;
  }

  void Give(int device, cudnnHandle_t handle) KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    idle_.emplace_back(device, handle);
  }

 private:
  Mutex mu_;
  std::vector<std::pair<int, cudnnHandle_t>> idle_ KILN_GUARDED_BY(mu_);
};

// The handles lent to one thread, one per device it used; given back to the pool when the thread
// ends.
struct ThreadHandles {
  std::vector<std::pair<int, cudnnHandle_t>> lent;

  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (const auto& [device, handle] : lent) HandlePool::Get().Give(device, handle);
  }
};

}  // namespace

Result<cudnnHandle_t> CudnnHandleFor(cudaStream_t stream) {
  int device = 0;
  KILN_CUDA_OK(cudaGetDevice(&device));
  thread_local ThreadHandles mine;
  cudnnHandle_t handle = nullptr;
  for (const auto& [d, h] : mine.lent) {
    if (d == device) {
      handle = h;
      break;
    }
  }
  if (handle == nullptr) {
    handle = HandlePool::Get().Take(device);
    if (handle == nullptr) KILN_CUDNN_OK(cudnnCreate(&handle));
    mine.lent.emplace_back(device, handle);
  }
  KILN_CUDNN_OK(cudnnSetStream(handle, stream));
  return handle;
}

}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDNN
