// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runtime instruction-set dispatch for kiln's own CPU kernels (src/kernels/cpu).
//
// The AVX2+FMA kernels live in translation units compiled with -mavx2 -mfma (the *_avx2.cc
// files), the AVX-512 ones in *_avx512.cc files; everything else is built for baseline x86-64.
// Kernels ask ActiveIsa() on every Compute and take a path only when it is at least that level,
// so the binary runs on any x86-64 CPU:
//
//   if (cpu::ActiveIsa() >= cpu::Isa::kAvx2) avx2::AddF32(...); else scalar::AddF32(...);
//
// The levels are ordered: kScalar (baseline x86-64) < kAvx2 (AVX2 and FMA) < kAvx512 (AVX-512
// F, BW, DQ and VL, the Skylake-SP set) < kAmx (that and the AMX-TILE / AMX-INT8 tile registers,
// Sapphire Rapids and later, with the kernel's permission to use them, asked once at detection).
// DetectedIsa() is the CPU's level lowered by the setting
// KILN_CPU_ISA=scalar|avx2|avx512|amx (base/settings.h: read from the environment once, at first
// use; to run a lower level's code on a machine that has a higher one: `make test` runs the kernel
// tests at every level this way, together with ONEDNN_MAX_CPU_ISA for oneDNN; see
// docs/kernels.md; `kiln` refuses an unknown value at start-up). ActiveIsa() is DetectedIsa()
// capped further by SetMaxIsa() (tests force a path with ScopedMaxIsa; no cap lifts the
// environment's).
//
// Thread safety: all functions are thread-safe (an atomic cap); changing the cap while kernels
// run is allowed and takes effect at their next Compute.

#include <string_view>

namespace kiln::cpu {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

// The highest level the CPU supports (CPUID through __builtin_cpu_supports), at most
// KILN_CPU_ISA's.
Isa DetectedIsa();
// min(DetectedIsa(), cap).
Isa ActiveIsa();
// Whether the CPU has F16C (the FP16 <-> FP32 conversions; CPUID leaf 1, ECX bit 29), read
// with <cpuid.h> (clang before 16 does not know __builtin_cpu_supports("f16c")).
bool CpuHasF16C();
// Caps the ISA the kernels may use; SetMaxIsa(Isa::kAmx) lifts the cap.
void SetMaxIsa(Isa cap);
// "scalar", "avx2", "avx512", "amx".
std::string_view IsaName(Isa isa);
// The level named by `name` (one of IsaName's answers); false when the name is unknown.
bool ParseIsa(std::string_view name, Isa* isa);

// RAII cap for tests: forces `cap` for its lifetime, then restores the previous cap.
class ScopedMaxIsa {
 public:
  explicit ScopedMaxIsa(Isa cap);
  ~ScopedMaxIsa();
  ScopedMaxIsa(const ScopedMaxIsa&) = delete;
  ScopedMaxIsa& operator=(const ScopedMaxIsa&) = delete;

 private:
  Isa previous_;
};

}  // namespace kiln::cpu
