// SPDX-License-Identifier: Apache-2.0
// Scalar 16-bit float conversions and the ISA dispatch (half_kernels.h).

#include "kernels/cpu/half_kernels.h"

#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace scalar {

void Fp16ToFloat(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Float16ToFloat(Float16{x[i]});
}

void Bf16ToFloat(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = BFloat16ToFloat(BFloat16{x[i]});
}

}  // namespace scalar

namespace {

// Elements per parallel chunk: below this a conversion is cheaper than waking the team.
constexpr int64_t kGrain = int64_t{1} << 15;

bool HasF16C() { return CpuHasF16C(); }

}  // namespace

void HalfToFloat(DataType dtype, const uint16_t* x, float* y, int64_t n) {
  const bool fp16 = dtype == DataType::kFloat16;
  if (ActiveIsa() >= Isa::kAvx2) {
    if (ActiveIsa() >= Isa::kAvx512) {
      fp16 ? avx512::Fp16ToFloat(x, y, n) : avx512::Bf16ToFloat(x, y, n);
      return;
    }
    if (!fp16) {
      avx2::Bf16ToFloat(x, y, n);
      return;
    }
    if (HasF16C()) {  // every AVX2 CPU so far has it, but it is a separate CPUID bit
      avx2::Fp16ToFloat(x, y, n);
      return;
    }
  }
  fp16 ? scalar::Fp16ToFloat(x, y, n) : scalar::Bf16ToFloat(x, y, n);
}

void HalfToFloatParallel(DataType dtype, const uint16_t* x, float* y, int64_t n) {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    HalfToFloat(dtype, x + begin, y + begin, end - begin);
  });
}

void FloatToHalfParallel(DataType dtype, const float* x, uint16_t* y, int64_t n) {
  const bool fp16 = dtype == DataType::kFloat16;
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      y[i] = fp16 ? FloatToFloat16(x[i]).bits : FloatToBFloat16(x[i]).bits;
    }
  });
}

}  // namespace kiln::cpu
