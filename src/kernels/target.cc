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
  } else if (device == DeviceType::kCuda) {
    // NCHW convolutions through cuDNN (no blocked layout); half weights computed in half on the
    // tensor cores; INT8 stays on the CPU's kernels.
    t.bf16_dot_products = true;
  }
  return t;
}

}  // namespace kiln
