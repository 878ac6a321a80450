// SPDX-License-Identifier: Apache-2.0
// Registers the reference CPU kernels: one KernelDef per row of ref_kernels.inc.

#include "kernels/ref/ref_kernels.h"

#include "kernels/ref/factories.h"
#include "kernels/registry.h"

namespace kiln {

void RegisterRefKernels(KernelRegistry& registry) {
#define KILN_REF_KERNEL(op, since, end, types, type_input, factory)                          \
  registry.Register(KernelDef{#op, "", since, end, DeviceType::kCpu, ref::types, type_input, \
                              &ref::factory, "ref"});
#define KILN_REF_KERNEL_IN_DOMAIN(domain, op, since, end, types, type_input, factory)            \
  registry.Register(KernelDef{#op, domain, since, end, DeviceType::kCpu, ref::types, type_input, \
                              &ref::factory, "ref"});
#include "kernels/ref/ref_kernels.inc"
#undef KILN_REF_KERNEL_IN_DOMAIN
#undef KILN_REF_KERNEL
}

}  // namespace kiln
