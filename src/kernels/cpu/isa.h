// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runtime instruction-set dispatch for kiln's own CPU kernels (src/kernels/cpu).
//
// The AVX2+FMA kernels live in translation units compiled with -mavx2 -mfma (the *_avx2.cc
// files); everything else is built for baseline x86-64. Kernels ask ActiveIsa() on every Compute
// and take the AVX2 path only when it returns Isa::kAvx2, so the binary runs on any x86-64 CPU.
//
//   if (cpu::ActiveIsa() == cpu::Isa::kAvx2) avx2::AddF32(...); else scalar::AddF32(...);
//
// ActiveIsa() is the detected ISA capped by SetMaxIsa() (tests force the scalar path with
// SetMaxIsa(Isa::kScalar)) and, read once at first use, by the environment variable
// KILN_CPU_ISA=scalar|avx2 (for comparing paths in a deployed binary).
//
// Thread safety: all functions are thread-safe (an atomic cap); changing the cap while kernels
// run is allowed and takes effect at their next Compute.

#include <string_view>

namespace kiln::cpu {

enum class Isa { kScalar = 0, kAvx2 = 1 };

// What the CPU supports (AVX2 and FMA both present, and the OS saves YMM state => kAvx2).
Isa DetectedIsa();
// min(DetectedIsa(), cap).
Isa ActiveIsa();
// Caps the ISA the kernels may use; SetMaxIsa(Isa::kAvx2) restores the default.
void SetMaxIsa(Isa cap);
std::string_view IsaName(Isa isa);

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
