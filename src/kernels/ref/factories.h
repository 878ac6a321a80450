// SPDX-License-Identifier: Apache-2.0
#pragma once
// Declarations of the reference kernel factories and the dtype masks used by the kernel table,
// both generated from ref_kernels.inc (the table is the only inventory). Internal to
// src/kernels/ref/; everything else reaches these kernels through KernelRegistry.
//
// A factory validates the node's attributes and input/output structure at session load and
// returns INVALID_ARGUMENT naming the op for anything it cannot run.

#include <memory>

#include "base/result.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln::ref {

// Floating-point math.
inline constexpr DataTypeMask kRefFloat = TypeMask({DataType::kFloat32, DataType::kFloat64});
// Math that ONNX also defines on integers.
inline constexpr DataTypeMask kRefFloatInt =
    kRefFloat | TypeMask({DataType::kInt32, DataType::kInt64});
// Data movement: every dtype, BYTES, BOOL and the 16-bit floats included.
inline constexpr DataTypeMask kRefAny = kAllTypes;

#define KILN_REF_KERNEL(op, since, end, types, type_input, factory) \
  Result<std::unique_ptr<Kernel>> factory(const KernelInfo& info);
#define KILN_REF_KERNEL_IN_DOMAIN(domain, op, since, end, types, type_input, factory) \
  KILN_REF_KERNEL(op, since, end, types, type_input, factory)
#include "kernels/ref/ref_kernels.inc"
#undef KILN_REF_KERNEL_IN_DOMAIN
#undef KILN_REF_KERNEL

}  // namespace kiln::ref
