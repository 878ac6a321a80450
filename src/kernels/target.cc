// SPDX-License-Identifier: Apache-2.0
#include "kernels/target.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/layout.h"

namespace kiln {

KernelTarget KernelTargetFor(DeviceType device) {
  KernelTarget t;
  t.device = device;
  if (device == DeviceType::kCpu) {
    t.channel_block = cpu::PreferredChannelBlock();
    t.int8_dot_products = CpuKernelsHaveInt8DotProducts();
    t.bf16_dot_products = CpuKernelsComputeBf16();
  }
  return t;
}

}  // namespace kiln
