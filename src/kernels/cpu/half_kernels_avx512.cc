// SPDX-License-Identifier: Apache-2.0
// AVX-512F widening of 16-bit floats (half_kernels.h); built with -mavx512f. Same numerics as
// the AVX2 + F16C code, 16 lanes at a time; tails run the scalar code.

#include <immintrin.h>

#include "kernels/cpu/half_kernels.h"

namespace kiln::cpu::avx512 {
namespace {

// The zero-masked forms with every lane selected: the same instructions, without GCC 12's
// false "may be used uninitialized" on the unmasked intrinsics' undefined pass-through.
constexpr __mmask16 kAll = 0xffff;

}  // namespace

void Fp16ToFloat(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    _mm512_storeu_ps(y + i, _mm512_maskz_cvtph_ps(kAll, h));
  }
  scalar::Fp16ToFloat(x + i, y + i, n - i);
}

void Bf16ToFloat(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m512i w = _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, h), 16);
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(w));
  }
  scalar::Bf16ToFloat(x + i, y + i, n - i);
}

}  // namespace kiln::cpu::avx512
