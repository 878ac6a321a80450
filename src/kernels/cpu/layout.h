// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the CPU kernels want of the channel-blocked layout (op/kiln_ops.h): the block their
// convolutions run fastest on, decided by the ISA oneDNN dispatches to on this machine (so
// ONEDNN_MAX_CPU_ISA caps it too). The optimizer gets it through KernelTargetFor
// (kernels/target.h), never from here.

#include <cstdint>

namespace kiln {
class Tensor;
}  // namespace kiln

namespace kiln::cpu {

// 16 when oneDNN runs AVX-512 code (its native nChw16c kernels), 8 when it runs AVX2 code (its
// nChw8c kernels), 0 below AVX2 (oneDNN's SSE4.1 code runs many blocked convolutions on its
// reference kernel: no blocked layout there). Thread-safe.
int64_t PreferredChannelBlock();

}  // namespace kiln::cpu
