// SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/tables.h"

namespace kiln::cuda {

std::vector<KernelDef> ElementwiseKernelDefs() { return {}; }

}  // namespace kiln::cuda
