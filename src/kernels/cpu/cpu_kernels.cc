// SPDX-License-Identifier: Apache-2.0
// Registers the fast CPU kernels (one KernelDef per row of cpu_kernels.inc) and holds the small
// helpers the factories share.

#include "kernels/cpu/cpu_kernels.h"

#include <fmt/format.h>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/isa.h"
#include "op/kiln_ops.h"

namespace kiln {

void RegisterCpuKernels(KernelRegistry& registry) {
#define KILN_CPU_KERNEL(domain, op, since, end, types, type_input, factory, supports)            \
  registry.Register(KernelDef{#op, domain, since, end, DeviceType::kCpu, cpu::types, type_input, \
                              &cpu::factory, "cpu", cpu::supports});
#include "kernels/cpu/cpu_kernels.inc"
#undef KILN_CPU_KERNEL
}

bool CpuKernelsHaveInt8DotProducts() { return cpu::CpuHasInt8DotProducts(); }
bool CpuKernelsComputeBf16() { return cpu::CpuComputesBf16(); }

CpuKernelInfo DescribeCpuKernels() {
  CpuKernelInfo info;
  info.kiln_isa = std::string(cpu::IsaName(cpu::DetectedIsa()));
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      info.onednn_isa = "SSE41";
      break;
    case dnnl_cpu_isa_avx:
      info.onednn_isa = "AVX";
      break;
    case dnnl_cpu_isa_avx2:
      info.onednn_isa = "AVX2";
      break;
    case dnnl_cpu_isa_avx2_vnni:
      info.onednn_isa = "AVX2_VNNI";
      break;
    case dnnl_cpu_isa_avx512_core:
      info.onednn_isa = "AVX512_CORE";
      break;
    case dnnl_cpu_isa_avx512_core_vnni:
      info.onednn_isa = "AVX512_CORE_VNNI";
      break;
    case dnnl_cpu_isa_avx512_core_bf16:
      info.onednn_isa = "AVX512_CORE_BF16";
      break;
    case dnnl_cpu_isa_avx512_core_amx:
      info.onednn_isa = "AVX512_CORE_AMX";
      break;
    default:
      info.onednn_isa = "OTHER";
      break;
  }
  info.int8_dot_products = cpu::CpuHasInt8DotProducts();
  info.bf16_dot_products = cpu::CpuComputesBf16();
  return info;
}

namespace cpu {

std::string NodeLabel(const KernelInfo& info) {
  const NodeDesc& node = info.node();
  return fmt::format("node '{}' ({})", node.name.empty() ? node.op_type : node.name,
                     node.QualifiedOp());
}

std::shared_ptr<const OwnedTensor> ConstantFloatInput(const KernelInfo& info, int i) {
  if (!info.has_input(i)) return nullptr;
  const std::shared_ptr<const OwnedTensor>& c = info.node().inputs[static_cast<size_t>(i)].constant;
  if (c == nullptr || c->dtype() != DataType::kFloat32) return nullptr;
  return c;
}

ConstantWeight ConstantWeightInput(const KernelInfo& info, int i) {
  if (!info.has_input(i)) return {};
  const std::shared_ptr<const OwnedTensor>& c = info.node().inputs[static_cast<size_t>(i)].constant;
  if (c == nullptr) return {};
  const DataType dt = c->dtype();
  if (dt != DataType::kFloat32 && dt != DataType::kFloat16 && dt != DataType::kBFloat16) return {};
  return {c, dt};
}

bool SupportsConv(const KernelInfo& info) {
  // oneDNN convolutions are 1-D to 3-D; a declared rank outside that goes to the reference. A
  // blocked X (FusedConv's x_block, op/kiln_ops.h) has one dim more.
  const ValueType& x = info.input_type(0);
  const size_t extra = info.node().GetInt(kAttrXBlock, 0) > 0 ? 1 : 0;
  if (x.has_shape && (x.dims.size() < 3 + extra || x.dims.size() > 5 + extra)) return false;
  return true;
}

}  // namespace cpu
}  // namespace kiln
