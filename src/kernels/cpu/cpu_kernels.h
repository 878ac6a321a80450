// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's fast CPU kernels: oneDNN for Conv / MatMul / Gemm / pooling, own AVX2+FMA kernels
// (runtime dispatch, scalar fallback) for the rest. Registered after the reference kernels, and
// preferred over them by KernelRegistry::Find. docs/kernels.md lists the ops.

#include <string>

namespace kiln {

class KernelRegistry;

// Registers every row of cpu_kernels.inc for DeviceType::kCpu with provider "cpu".
void RegisterCpuKernels(KernelRegistry& registry);

// What the fast kernels compute with on this machine, as oneDNN dispatches them (so
// ONEDNN_MAX_CPU_ISA lowers both answers). Thread-safe.
// VNNI dot products (AVX512-VNNI or AVX-VNNI): INT8 layers with 8-bit weights run at full
// speed; without them, weights wider than 7 bits are split and take twice the work
// (docs/quantization.md).
bool CpuKernelsHaveInt8DotProducts();
// BF16 dot products (AVX512-BF16): BFLOAT16 weights are computed in BF16.
bool CpuKernelsComputeBf16();

// The instruction sets the fast kernels use here, for reports (kiln profile) and tests.
struct CpuKernelInfo {
  std::string kiln_isa;  // kiln's own kernels: "scalar", "avx2", "avx512" (KILN_CPU_ISA lowers it)
  std::string onednn_isa;  // oneDNN's dispatch, as ONEDNN_MAX_CPU_ISA names it ("AVX2", ...)
  bool int8_dot_products = false;
  bool bf16_dot_products = false;
};
CpuKernelInfo DescribeCpuKernels();

}  // namespace kiln
