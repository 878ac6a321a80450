// SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "base/settings.h"

namespace kiln::cpu {
namespace {

// Whether the CPU has AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX bits 24 and 25), the OS saves
// the tile state (XCR0 bits 17 and 18) and Linux lets this process use the tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA: asked once, for every thread).
bool AmxUsable() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

Isa Detect() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return Isa::kScalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return AmxUsable() ? Isa::kAmx : Isa::kAvx512;
  }
  return Isa::kAvx2;
}

std::atomic<int>& Cap() {
  static std::atomic<int> cap{static_cast<int>(Isa::kAmx)};
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
  Isa cap = Isa::kAmx;
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
    case Isa::kAmx:
      return "amx";
  }
  return "scalar";
}

bool ParseIsa(std::string_view name, Isa* isa) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
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
