// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's CUDA kernels (DeviceType::kCuda, provider "cuda"): matrix products through cuBLASLt,
// convolutions through cuDNN, kiln's own kernels for the elementwise, normalization, reduction,
// pooling, data-movement and attention ops. Built only with the CUDA toolkit (KILN_HAVE_CUDA).
// What has no CUDA kernel here runs on the CPU (placement, runtime/session.h).
//
// The table is registered without a GPU (kernel factories never touch one), so kernel choice and
// placement are tested everywhere; running the kernels needs one (cuda_kernels_test).
//
//   KILN_RETURN_IF_ERROR(RegisterCudaKernels());   // once; later calls do nothing
//   KILN_ASSIGN_OR_RETURN(int gpus, RegisterCudaBackends());

#include <span>

#include "base/status.h"
#include "kernels/registry.h"

namespace kiln {

// Every CUDA kernel definition, in registration order.
std::span<const KernelDef> CudaKernelDefs();

// Adds CudaKernelDefs() to KernelRegistry::Global() once per process. Thread-safe.
Status RegisterCudaKernels();

}  // namespace kiln
