// SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/tables.h"

namespace kiln::cuda {

std::vector<KernelDef> DnnKernelDefs() { return {}; }

}  // namespace kiln::cuda
