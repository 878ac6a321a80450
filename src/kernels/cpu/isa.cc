// SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>

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

// The CPU's level lowered to KILN_CPU_ISA's.
Isa DetectWithEnvironment() {
  const Isa cpu = Detect();
  const char* env = std::getenv("KILN_CPU_ISA");
  Isa cap = Isa::kAvx512;
  if (env != nullptr) (void)ParseIsa(env, &cap);
  return static_cast<int>(cap) < static_cast<int>(cpu) ? cap : cpu;
}

std::atomic<int>& Cap() {
  static std::atomic<int> cap{static_cast<int>(Isa::kAvx512)};
  return cap;
}

}  // namespace

Isa DetectedIsa() {
  static const Isa isa = DetectWithEnvironment();
  return isa;
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
