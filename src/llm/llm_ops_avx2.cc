// SPDX-License-Identifier: Apache-2.0
// AVX2 + FMA row kernels of llm_ops.h (RMSNorm's sum of squares and scaling, SwiGLU, Add, the
// RoPE rotations). Compiled with -mavx2 -mfma; called only when ActiveIsa() >= kAvx2.
#include <immintrin.h>

#include <cmath>

#include "llm/avx2_exp.h"
#include "llm/llm_ops.h"

namespace kiln::llm::llm_ops_internal::avx2 {
namespace {

using avx2_math::Exp;

}  // namespace

double SumSquares(const float* x, int64_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);  // rounded to float, as ggml's x * x
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  const __m256d acc = _mm256_add_pd(acc0, acc1);
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

void ScaleMul(const float* x, float scale, const float* weight, float* out, int64_t n) {
  const __m256 sc = _mm256_set1_ps(scale);
  int64_t i = 0;
  if (weight != nullptr) {
    for (; i + 8 <= n; i += 8) {
      const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), sc);
      _mm256_storeu_ps(out + i, _mm256_mul_ps(y, _mm256_loadu_ps(weight + i)));
    }
    for (; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sc));
    for (; i < n; ++i) out[i] = x[i] * scale;
  }
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, Exp(_mm256_xor_ps(g, sign))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

void RotateNeox(float* x, const float* cos, const float* sin, int half) {
  float* x1p = x + half;
  int i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x1p + i);
    const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
    _mm256_storeu_ps(x + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
    _mm256_storeu_ps(x1p + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
  }
  for (; i < half; ++i) {
    const float x0 = x[i], x1 = x1p[i];
    x[i] = x0 * cos[i] - x1 * sin[i];
    x1p[i] = x0 * sin[i] + x1 * cos[i];
  }
}

void RotateNormal(float* x, const float* cs2, const float* sn2, int n_rot) {
  int i = 0;
  for (; i + 8 <= n_rot; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x1, x0, x3, x2, ...)
    _mm256_storeu_ps(x + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(cs2 + i),
                                            _mm256_mul_ps(swapped, _mm256_loadu_ps(sn2 + i))));
  }
  for (; i < n_rot; i += 2) {
    const float x0 = x[i], x1 = x[i + 1];
    const float c = cs2[i], s = sn2[i + 1];
    x[i] = x0 * c - x1 * s;
    x[i + 1] = x0 * s + x1 * c;
  }
}

}  // namespace kiln::llm::llm_ops_internal::avx2
