// SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/blas_handles.h"

#include <fmt/format.h>

#include <vector>

#include "kernels/cuda/common.h"

namespace kiln::cuda {
namespace {

// One thread's handles, indexed by device; destroyed when the thread ends.
struct ThreadHandles {
  std::vector<cublasLtHandle_t> by_device;
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (cublasLtHandle_t h : by_device) {
      if (h != nullptr) (void)cublasLtDestroy(h);
    }
  }
};

}  // namespace

Status CublasError(cublasStatus_t status, const char* call, const char* file, int line) {
  return Status::Internal(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                      cublasLtGetStatusString(status), static_cast<int>(status)));
}

Result<cublasLtHandle_t> CublasLtHandle() {
  int device = 0;
  KILN_CUDA_OK(cudaGetDevice(&device));
  thread_local ThreadHandles handles;
  const size_t i = static_cast<size_t>(device);
  if (i >= handles.by_device.size()) handles.by_device.resize(i + 1, nullptr);
  if (handles.by_device[i] == nullptr) {
    cublasLtHandle_t h = nullptr;
    KILN_CUBLAS_OK(cublasLtCreate(&h));
    handles.by_device[i] = h;
  }
  return handles.by_device[i];
}

}  // namespace kiln::cuda
