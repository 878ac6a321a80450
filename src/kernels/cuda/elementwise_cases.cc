// SPDX-License-Identifier: Apache-2.0
#include "kernels/cuda/test_cases.h"

namespace kiln::cuda::testing {

std::vector<CudaCase> ElementwiseCases() { return {}; }

}  // namespace kiln::cuda::testing
