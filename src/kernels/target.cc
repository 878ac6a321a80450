// SPDX-License-Identifier: Apache-2.0
#include "kernels/target.h"

#include "kernels/cpu/layout.h"

namespace kiln {

KernelTarget KernelTargetFor(DeviceType device) {
  KernelTarget t;
  t.device = device;
  if (device == DeviceType::kCpu) t.channel_block = cpu::PreferredChannelBlock();
  return t;
}

}  // namespace kiln
