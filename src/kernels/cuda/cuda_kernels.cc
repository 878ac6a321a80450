// SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/cuda_kernels.h"

#include <mutex>
#include <vector>

#include "kernels/cuda/tables.h"

namespace kiln {

std::span<const KernelDef> CudaKernelDefs() {
  static const std::vector<KernelDef>* defs = [] {
    auto* all = new std::vector<KernelDef>();
    for (auto part : {&cuda::ElementwiseKernelDefs, &cuda::ReduceKernelDefs, &cuda::DataKernelDefs,
                      &cuda::BlasKernelDefs, &cuda::DnnKernelDefs}) {
      std::vector<KernelDef> d = part();
      all->insert(all->end(), d.begin(), d.end());
    }
    return all;
  }();
  return *defs;
}

Status RegisterCudaKernels() {
  static std::once_flag once;
  std::call_once(once, [] { KernelRegistry::RegisterGlobal(CudaKernelDefs()); });
  return Status::OK();
}

}  // namespace kiln
