// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's fast CPU kernels: oneDNN for Conv / MatMul / Gemm / pooling, own AVX2+FMA kernels
// (runtime dispatch, scalar fallback) for the rest. Registered after the reference kernels, and
// preferred over them by KernelRegistry::Find. docs/kernels.md lists the ops.

namespace kiln {

class KernelRegistry;

// Registers every row of cpu_kernels.inc for DeviceType::kCpu with provider "cpu".
void RegisterCpuKernels(KernelRegistry& registry);

}  // namespace kiln
