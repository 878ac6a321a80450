// SPDX-License-Identifier: Apache-2.0
#pragma once
// Declarations of the fast CPU kernel factories and `supports` predicates, generated from
// cpu_kernels.inc (the only inventory), plus small helpers the factories share. Internal to
// src/kernels/cpu/; everything else reaches these kernels through KernelRegistry.

#include <memory>
#include <string>

#include "base/result.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln::cpu {

inline constexpr DataTypeMask kCpuF32 = TypeBit(DataType::kFloat32);
// 8-bit quantized tensors (UINT8 and INT8).
inline constexpr DataTypeMask kCpuQuant8 = TypeBit(DataType::kUint8) | TypeBit(DataType::kInt8);
// Every fixed-width dtype (all but BYTES): the kernels that only move elements.
inline constexpr DataTypeMask kCpuFixedWidth = kAllTypes & ~TypeBit(DataType::kBytes);
// Where from opset 9 to 15 (no BFLOAT16 yet).
inline constexpr DataTypeMask kCpuFixedWidthNoBf16 = kCpuFixedWidth & ~TypeBit(DataType::kBFloat16);
inline constexpr DataTypeMask kCpuBool = TypeBit(DataType::kBool);
// FLOAT and INT64 (TopK's values).
inline constexpr DataTypeMask kCpuF32I64 = kCpuF32 | TypeBit(DataType::kInt64);
// Cast's sources: FLOAT, DOUBLE, FLOAT16, INT8, UINT8, INT32, INT64, BOOL (and BFLOAT16 from 13).
inline constexpr DataTypeMask kCpuCastSources =
    kCpuF32 | TypeMask({DataType::kFloat64, DataType::kFloat16, DataType::kInt8, DataType::kUint8,
                        DataType::kInt32, DataType::kInt64, DataType::kBool});
inline constexpr DataTypeMask kCpuCastSources13 = kCpuCastSources | TypeBit(DataType::kBFloat16);

#define KILN_CPU_KERNEL(domain, op, since, end, types, type_input, factory, supports) \
  Result<std::unique_ptr<Kernel>> factory(const KernelInfo& info);
#include "kernels/cpu/cpu_kernels.inc"
#undef KILN_CPU_KERNEL

// Predicates named in the table; AnyNode accepts every node.
inline constexpr bool (*AnyNode)(const KernelInfo&) = nullptr;
bool SupportsConv(const KernelInfo& info);
bool SupportsPool(const KernelInfo& info);
// quantized.cc: weights, scales, zero points and bias are initializers oneDNN's int8 primitives
// take (INT8 W with zero zero points; UINT8 X, or INT8 X with VNNI).
bool SupportsQConv(const KernelInfo& info);
bool SupportsQMatMul(const KernelInfo& info);
bool SupportsQLinearConv(const KernelInfo& info);
bool SupportsQLinearMatMul(const KernelInfo& info);
bool SupportsConvInteger(const KernelInfo& info);
bool SupportsMatMulInteger(const KernelInfo& info);

// "node 'name' (op Type)" for error messages.
std::string NodeLabel(const KernelInfo& info);

// Input i as a shared constant when it is a FLOAT initializer, else null.
std::shared_ptr<const OwnedTensor> ConstantFloatInput(const KernelInfo& info, int i);

// Input i as a shared constant when it is a FLOAT, FLOAT16 or BFLOAT16 initializer (a weight the
// Fused ops may hold in half precision, op/kiln_ops.h), with its dtype; else a null tensor
// (dtype kInvalid).
struct ConstantWeight {
  std::shared_ptr<const OwnedTensor> tensor;
  DataType dtype = DataType::kInvalid;
  bool half() const { return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16; }
};
ConstantWeight ConstantWeightInput(const KernelInfo& info, int i);

}  // namespace kiln::cpu
