// SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/isa.h"

#include <cpuid.h>

#include <atomic>

#include "base/settings.h"

namespace kiln::cpu {
namespace {

Isa Detect() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return Isa::kScalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return Isa::kAvx512;
  }
  return Isa::kAvx2;
}

std::atomic<int>& Cap() {
  static std::atomic<int> cap{static_cast<int>(Isa::kAvx512)};
  return cap;
}

}  // namespace

bool CpuHasF16C() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}

// The CPU's level lowered to the KILN_CPU_ISA setting's (base/settings.h; CheckSettings refuses
// a value ParseIsa does not know).
Isa DetectedIsa() {
  static const Isa cpu = Detect();
  Isa cap = Isa::kAvx512;
  if (const std::string_view setting = SettingValue(Setting::kCpuIsa); !setting.empty()) {
    (void)ParseIsa(setting, &cap);
  }
  return static_cast<int>(cap) < static_cast<int>(cpu) ? cap : cpu;
}

Isa ActiveIsa() {
  const int cap = Cap().load(std::memory_order_relaxed);
  const int detected = static_cast<int>(DetectedIsa());
  return static_cast<Isa>(cap < detected ? cap : detected);
}

void SetMaxIsa(Isa cap) { Cap().store(static_cast<int>(cap), std::memory_order_relaxed); }

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "scalar";
}

bool ParseIsa(std::string_view name, Isa* isa) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name == IsaName(i)) {
      *isa = i;
      return true;
    }
  }
  return false;
}

ScopedMaxIsa::ScopedMaxIsa(Isa cap)
    : previous_(static_cast<Isa>(Cap().load(std::memory_order_relaxed))) {
  SetMaxIsa(cap);
}
ScopedMaxIsa::~ScopedMaxIsa() { SetMaxIsa(previous_); }

}  // namespace kiln::cpu
