// SPDX-License-Identifier: Apache-2.0
#include "kernels/registry.h"

#include <fmt/format.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace kiln {

const ValueType& KernelInfo::input_type(int i) const {
  static const ValueType kNone;
  return has_input(i) ? node_.inputs[static_cast<size_t>(i)].type : kNone;
}

const ValueType& KernelInfo::output_type(int i) const {
  static const ValueType kNone;
  return has_output(i) ? node_.outputs[static_cast<size_t>(i)].type : kNone;
}

const OwnedTensor* KernelInfo::constant_input(int i) const {
  return has_input(i) ? node_.inputs[static_cast<size_t>(i)].constant.get() : nullptr;
}

Result<Tensor> KernelContext::AllocateOutput(int i, DataType dtype, const Shape& shape) {
  KILN_CHECK(i >= 0 && i < num_outputs(), "output index ", i, " of ", num_outputs());
  OwnedTensor& slot = outputs_[static_cast<size_t>(i)];
  KILN_CHECK(!slot.valid(), "output ", i, " allocated twice");
  KILN_ASSIGN_OR_RETURN(slot, OwnedTensor::Allocate(dtype, shape, allocator_));
  return slot.view();
}

Result<Tensor> KernelContext::AllocateOutputForOverwrite(int i, DataType dtype,
                                                         const Shape& shape) {
  KILN_CHECK(i >= 0 && i < num_outputs(), "output index ", i, " of ", num_outputs());
  OwnedTensor& slot = outputs_[static_cast<size_t>(i)];
  KILN_CHECK(!slot.valid(), "output ", i, " allocated twice");
  KILN_ASSIGN_OR_RETURN(slot, OwnedTensor::AllocateForOverwrite(dtype, shape, allocator_));
  return slot.view();
}

Result<OwnedTensor> KernelContext::AllocateTensor(DataType dtype, const Shape& shape) const {
  return OwnedTensor::Allocate(dtype, shape, allocator_);
}

Result<RuntimeValue> KernelContext::InputValue(int i) const {
  if (const RuntimeValue* v = value_input(i)) return *v;
  if (!has_input(i)) return RuntimeValue();
  KILN_ASSIGN_OR_RETURN(OwnedTensor copy, OwnedTensor::CopyOf(input(i), allocator_));
  return RuntimeValue(std::move(copy));
}

bool KernelContext::ForwardInput(int in, int out, const Shape& shape) {
  KILN_CHECK(out >= 0 && out < num_outputs(), "output index ", out, " of ", num_outputs());
  if (in < 0 || static_cast<size_t>(in) >= input_owners_.size() || out >= 64) return false;
  const OwnedTensor* owner = input_owners_[static_cast<size_t>(in)];
  // The owner must be what the kernel sees as input `in` (same memory), whole.
  if (owner == nullptr || !owner->valid() || owner->raw_data() != input(in).raw_data() ||
      owner->num_elements() != input(in).num_elements() ||
      shape.NumElements() != owner->num_elements()) {
    return false;
  }
  OwnedTensor shared = *owner;
  if (!shared.Reshape(shape).ok()) return false;
  OwnedTensor& slot = outputs_[static_cast<size_t>(out)];
  KILN_CHECK(!slot.valid(), "output ", out, " set twice");
  slot = std::move(shared);
  forwarded_ |= uint64_t{1} << out;
  return true;
}

void KernelContext::SetOutputValue(int i, RuntimeValue value) {
  KILN_CHECK(i >= 0 && i < num_outputs(), "output index ", i, " of ", num_outputs());
  KILN_CHECK(value.valid(), "output ", i, " set to an invalid value");
  OwnedTensor& slot = outputs_[static_cast<size_t>(i)];
  KILN_CHECK(!slot.valid(), "output ", i, " set twice");
  if (value.is_tensor()) {
    slot = value.tensor();
    return;
  }
  KILN_CHECK(static_cast<size_t>(i) < output_values_.size(),
             "this context has no value slot for output ", i);
  RuntimeValue& value_slot = output_values_[static_cast<size_t>(i)];
  KILN_CHECK(!value_slot.valid(), "output ", i, " set twice");
  value_slot = std::move(value);
}

namespace {
KernelRegistry& MutableGlobal() {
  static KernelRegistry* const registry = [] {
    auto* r = new KernelRegistry();
    RegisterRefKernels(*r);
    RegisterCpuKernels(*r);
    return r;
  }();
  return *registry;
}
}  // namespace

const KernelRegistry& KernelRegistry::Global() { return MutableGlobal(); }

void KernelRegistry::RegisterGlobal(std::span<const KernelDef> defs) {
  KernelRegistry& r = MutableGlobal();
  for (const KernelDef& def : defs) r.Register(def);
}

void KernelRegistry::Register(const KernelDef& def) {
  KILN_CHECK(def.since_version <= def.end_version, "bad opset range for ", def.op_type);
  KILN_CHECK(def.create != nullptr, "kernel ", def.op_type, " has no factory");
  MutexLock lock(mu_);
  defs_.push_back(def);
}

Result<const KernelDef*> KernelRegistry::Find(const KernelInfo& info, DeviceType device,
                                              std::string_view only_provider) const {
  const NodeDesc& node = info.node();
  const int64_t opset = info.opset();
  // The candidates, gathered under the lock; `supports` runs without it (a device's predicate
  // may look up kernels itself). Definitions never move, so the pointers stay valid.
  std::vector<const KernelDef*> candidates;
  {
    MutexLock lock(mu_);
    for (const KernelDef& def : defs_) {
      if (def.device != device || def.op_type != node.op_type || def.domain != node.domain) {
        continue;
      }
      if (!only_provider.empty() && def.provider != only_provider) continue;
      if (opset < def.since_version || opset > def.end_version) continue;
      candidates.push_back(&def);
    }
  }
  const bool op_known = !candidates.empty();
  DataType dtype = DataType::kInvalid;
  const KernelDef* best = nullptr;
  for (const KernelDef* candidate : candidates) {
    const KernelDef& def = *candidate;
    dtype = def.type_input >= 0 ? info.input_type(def.type_input).dtype : info.output_type(0).dtype;
    if (dtype != DataType::kInvalid && !(def.types & TypeBit(dtype))) continue;
    if (def.supports != nullptr && !def.supports(info)) continue;
    // A faster provider beats "ref"; among equals, later registrations win.
    if (best != nullptr && best->provider != "ref" && def.provider == "ref") continue;
    best = &def;
  }
  const std::string where =
      node.name.empty() ? std::string() : fmt::format(" (node '{}')", node.name);
  const std::string op = node.QualifiedOp();
  if (!op_known) {
    return Status::InvalidArgument(
        fmt::format("op {} (opset {}) is not supported{}", op, opset, where));
  }
  if (best == nullptr) {
    return Status::InvalidArgument(fmt::format("op {} (opset {}) is not supported for dtype {}{}",
                                               op, opset, DataTypeName(dtype), where));
  }
  return best;
}

}  // namespace kiln
