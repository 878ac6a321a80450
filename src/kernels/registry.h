// SPDX-License-Identifier: Apache-2.0
#pragma once
// KernelRegistry: which kernel implements which (op, domain, opset range, device, dtype).
//
// Each backend declares its kernels in one table (see ref/ref_kernels.inc) and registers it with
// a single call. Lookup happens at session load, so an unsupported op fails at load with
// "op X (opset N) is not supported", never at run time.
//
//   const KernelRegistry& reg = KernelRegistry::Global();
//   KILN_ASSIGN_OR_RETURN(const KernelDef* def, reg.Find(info, DeviceType::kCpu));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, def->create(info));
//
// Thread safety: Register and Find are thread-safe (a registry is locked while either runs;
// lookups happen at session load, not per run). Global() holds every kernel built into the
// binary when it returns; a device registered at run time (a test's device) adds its table
// with RegisterGlobal. Definitions never move: Find's pointers stay valid.

#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "kernels/kernel.h"

namespace kiln {

// Bit mask over DataType values: TypeMask({DataType::kFloat32, DataType::kFloat64}).
using DataTypeMask = uint32_t;
constexpr DataTypeMask TypeBit(DataType t) { return 1u << static_cast<unsigned>(t); }
constexpr DataTypeMask TypeMask(std::initializer_list<DataType> types) {
  DataTypeMask m = 0;
  for (DataType t : types) m |= TypeBit(t);
  return m;
}
inline constexpr DataTypeMask kAllTypes = 0xFFFFFFFEu;  // every valid DataType

struct KernelDef {
  std::string_view op_type;
  std::string_view domain;  // "" for ONNX
  int since_version;        // first opset this kernel implements
  int end_version;          // last opset (inclusive)
  DeviceType device;
  // Element types accepted for the type-deciding tensor: input `type_input`, or output 0 when
  // type_input is -1 (ops like Constant with no inputs). A declared type of kInvalid (unknown)
  // matches any mask; the kernel then checks at run time.
  DataTypeMask types;
  int type_input;
  KernelFactory create;
  std::string_view provider;  // "ref", "cpu", "cuda": for profiles and messages
  // Optional: false for nodes this kernel declines (an attribute or declared shape it does not
  // handle); Find then falls back to the next candidate, in the end the reference kernel.
  bool (*supports)(const KernelInfo& info) = nullptr;
};

class KernelRegistry {
 public:
  // The process-wide registry with every kernel built into this binary.
  static const KernelRegistry& Global();
  // Adds `defs` to Global(): the kernel table of a device registered at run time.
  static void RegisterGlobal(std::span<const KernelDef> defs);

  KernelRegistry() = default;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // REQUIRES: def.since_version <= def.end_version.
  void Register(const KernelDef& def);

  // The best kernel for the node in `info` on `device`: among the defs that match (op, domain,
  // opset, dtype) and whose `supports` accepts the node, one of a provider other than "ref" wins
  // over a "ref" one; among equals the later registration wins. Errors (INVALID_ARGUMENT, naming
  // the node):
  //   "op X (opset N) is not supported"              no kernel for the op at that opset;
  //   "op X (opset N) is not supported for dtype T"  the op exists but not for that type.
  // `only_provider` non-empty restricts the candidates to that provider (e.g. "ref" to run a
  // graph on the reference kernels only, for tests and numerics checks).
  Result<const KernelDef*> Find(const KernelInfo& info, DeviceType device,
                                std::string_view only_provider = {}) const;

  // Every definition, in registration order (elements never move). Not synchronized with
  // Register: for tests and tools, once registration is done.
  const std::deque<KernelDef>& defs() const KILN_NO_THREAD_SAFETY_ANALYSIS { return defs_; }

 private:
  mutable Mutex mu_;
  std::deque<KernelDef> defs_ KILN_GUARDED_BY(mu_);  // a deque: Find's pointers stay valid
};

}  // namespace kiln
