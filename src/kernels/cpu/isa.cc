// SPDX-License-Identifier: Apache-2.0
#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln::cpu {
namespace {

Isa Detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa InitialCap() {
  const char* env = std::getenv("KILN_CPU_ISA");
  if (env != nullptr && std::strcmp(env, "scalar") == 0) return Isa::kScalar;
  return Isa::kAvx2;
}

std::atomic<int>& Cap() {
  static std::atomic<int> cap{static_cast<int>(InitialCap())};
  return cap;
}

}  // namespace

Isa DetectedIsa() {
  static const Isa isa = Detect();
  return isa;
}

Isa ActiveIsa() {
  const int cap = Cap().load(std::memory_order_relaxed);
  const int detected = static_cast<int>(DetectedIsa());
  return static_cast<Isa>(cap < detected ? cap : detected);
}

void SetMaxIsa(Isa cap) { Cap().store(static_cast<int>(cap), std::memory_order_relaxed); }

std::string_view IsaName(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

ScopedMaxIsa::ScopedMaxIsa(Isa cap)
    : previous_(static_cast<Isa>(Cap().load(std::memory_order_relaxed))) {
  SetMaxIsa(cap);
}
ScopedMaxIsa::~ScopedMaxIsa() { SetMaxIsa(previous_); }

}  // namespace kiln::cpu
