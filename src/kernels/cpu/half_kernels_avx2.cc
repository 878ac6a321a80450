// SPDX-License-Identifier: Apache-2.0
// AVX2 + F16C widening of 16-bit floats (half_kernels.h); built with -mavx2 -mfma -mf16c.
//
// NOTE: vcvtph2ps converts FLOAT16 exactly (denormal halves become normal floats; MXCSR's DAZ
// does not apply to it); BFLOAT16 is the upper half of an FP32, so widening is a zero-extend
// and a 16-bit shift. Tails run the scalar code.

#include <immintrin.h>

#include "kernels/cpu/half_kernels.h"

namespace kiln::cpu::avx2 {

void Fp16ToFloat(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(a));
    _mm256_storeu_ps(y + i + 8, _mm256_cvtph_ps(b));
  }
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  scalar::Fp16ToFloat(x + i, y + i, n - i);
}

void Bf16ToFloat(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(w));
  }
  scalar::Bf16ToFloat(x + i, y + i, n - i);
}

}  // namespace kiln::cpu::avx2
