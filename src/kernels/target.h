// SPDX-License-Identifier: Apache-2.0
#pragma once
// KernelTarget: what the kernels of one device built into this binary want of the graphs they
// run, as plain data. The optimizer decides its target-dependent rewrites by it
// (OptimizerOptions::target, opt/optimizer.h) without knowing any backend; whoever optimizes a
// graph for a device (the model loader, kiln's tools) asks KernelTargetFor(device) and passes the
// answer on.
//
//   OptimizerOptions options;
//   options.target = KernelTargetFor(DeviceType::kCpu);
//   KILN_ASSIGN_OR_RETURN(OptimizedGraph opt, OptimizeGraph(graph, options));

#include <cstdint>

#include "tensor/device.h"

namespace kiln {

struct KernelTarget {
  DeviceType device = DeviceType::kCpu;
  // The channel block of the blocked layout (op/kiln_ops.h) the device's convolutions run
  // fastest on: 8 or 16; 0 when no blocked layout pays (layout_selection then changes nothing).
  int64_t channel_block = 0;
  // INT8 dot products at full speed for 8-bit weights (CPU: AVX512-VNNI or AVX-VNNI); without
  // them the INT8 quantizer keeps weights to 7 bits (docs/quantization.md).
  bool int8_dot_products = false;
  // BFLOAT16 weights computed in BF16 (CPU: AVX512-BF16); else widened to FP32.
  bool bf16_dot_products = false;
};

// The target of this machine's kernels for `device`. CUDA: no blocked layout, BF16 computed in
// BF16, no INT8 dot products. CPU: the block oneDNN's dispatch ISA runs
// natively (16 with AVX-512, 8 with AVX2, 0 below; ONEDNN_MAX_CPU_ISA caps it) and the dot
// products it dispatches (capped the same way). A device without kernels here gets the
// defaults (no blocked layout, no INT8 or BF16 dot products). Thread-safe.
KernelTarget KernelTargetFor(DeviceType device);

}  // namespace kiln
