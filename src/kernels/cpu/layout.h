// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the CPU kernels want of the channel-blocked layout (graph/kiln_ops.h), for the optimizer's
// layout_selection pass: the block their convolutions run fastest on, decided by the ISA oneDNN
// dispatches to on this machine (so ONEDNN_MAX_CPU_ISA caps it too).

#include <cstdint>

namespace kiln::cpu {

// 16 when oneDNN runs AVX-512 code (its native nChw16c kernels), else 8 (its AVX2 kernels are
// nChw8c ones). Thread-safe.
int64_t PreferredChannelBlock();

}  // namespace kiln::cpu
