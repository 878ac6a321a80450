// SPDX-License-Identifier: Apache-2.0
#pragma once
// cuDNN handles for the CUDA kernels (host code; only where cuDNN was found, KILN_HAVE_CUDNN):
// one cudnnHandle_t per (thread, device), made at the first use on that thread and device, and
// bound to the caller's stream on every use. And KILN_CUDNN_OK, which turns a failed cuDNN call
// into a Status naming the call, the file and line and cuDNN's message.
//
//   KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, CudnnHandleFor(stream));
//   KILN_CUDNN_OK(cudnnConvolutionForward(h, ...));
//
// NOTE on lifetimes: a handle is owned by a process-wide pool of its device and lent to one
// thread at a time; a thread that ends gives its handles back to the pool (the next new thread
// takes them), so handles number at most the threads that ever ran cuDNN work at once. Handles
// are never destroyed: destroying them at process exit races the CUDA runtime's own teardown.
//
// Thread safety: CudnnHandleFor is thread-safe; the handle it returns belongs to the calling
// thread (a cuDNN handle must not be used by two threads at once) and stays valid for the
// thread's lifetime.

#ifdef KILN_HAVE_CUDNN

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "base/result.h"

namespace kiln::cuda {

Status CudnnError(cudnnStatus_t s, const char* call, const char* file, int line);

#define KILN_CUDNN_OK(call)                                                      \
  do {                                                                           \
    const cudnnStatus_t kiln_cudnn_s_ = (call);                                  \
    if (kiln_cudnn_s_ != CUDNN_STATUS_SUCCESS) {                                 \
      return ::kiln::cuda::CudnnError(kiln_cudnn_s_, #call, __FILE__, __LINE__); \
    }                                                                            \
  } while (false)

// The calling thread's cuDNN handle for the current CUDA device (cudaGetDevice), created on
// first use, with its stream set to `stream` (cudnnSetStream). INTERNAL when the device or
// cuDNN cannot be reached.
Result<cudnnHandle_t> CudnnHandleFor(cudaStream_t stream);

}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDNN
