// SPDX-License-Identifier: Apache-2.0
#include "kernels/ref/ref_kernels.h"

#include "kernels/registry.h"

namespace kiln {

void RegisterRefKernels(KernelRegistry& registry) { (void)registry; }

}  // namespace kiln
