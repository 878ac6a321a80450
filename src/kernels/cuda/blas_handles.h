// SPDX-License-Identifier: Apache-2.0
#pragma once
// cuBLASLt handles of the CUDA matrix products (blas.cc), and the check of cuBLAS calls.
//
// A handle is made lazily, at the first Compute that needs one (never in a kernel factory, so
// that building kernels needs no GPU), one per device per thread: the handle of the device
// current on the calling thread (the backend's stream makes its GPU current before a kernel
// runs). Handles live until their thread ends.
//
//   KILN_ASSIGN_OR_RETURN(cublasLtHandle_t lt, CublasLtHandle());
//   KILN_CUBLAS_OK(cublasLtMatmul(lt, ...));
//
// Thread safety: CublasLtHandle may be called from any thread; it returns that thread's handle,
// which only that thread uses.

#include <cublasLt.h>

#include "base/result.h"

namespace kiln::cuda {

// INTERNAL naming the cuBLAS call, the file and line and cuBLAS's message for `status`.
Status CublasError(cublasStatus_t status, const char* call, const char* file, int line);

#define KILN_CUBLAS_OK(call)                                                       \
  do {                                                                             \
    const cublasStatus_t kiln_cublas_s_ = (call);                                  \
    if (kiln_cublas_s_ != CUBLAS_STATUS_SUCCESS) {                                 \
      return ::kiln::cuda::CublasError(kiln_cublas_s_, #call, __FILE__, __LINE__); \
    }                                                                              \
  } while (false)

// The calling thread's cuBLASLt handle for the current CUDA device, created on first use.
Result<cublasLtHandle_t> CublasLtHandle();

}  // namespace kiln::cuda
