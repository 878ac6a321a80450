// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reference CPU kernels: straightforward, obviously-correct implementations that every faster
// kernel is tested against.

namespace kiln {

class KernelRegistry;

// Registers every reference kernel (the table in ref_kernels.inc) for DeviceType::kCpu.
void RegisterRefKernels(KernelRegistry& registry);

}  // namespace kiln
