// SPDX-License-Identifier: Apache-2.0
// AVX2 + FMA + F16C pieces of paged attention (attention.h): the tile kernel (4 query rows x 16
// keys of scores in registers from the transposed K, online softmax with a polynomial exp, P x V
// 4 rows x 16 columns at a time; F16 widened by F16C and BF16 by a 16-bit shift, in registers),
// the V tile widening, and the cache's narrowing of F32 rows to F16 / BF16. Compiled with -mavx2
// -mfma -mf16c; called only when ActiveIsa() >= kAvx2 (and the CPU has F16C where F16 is involved).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "llm/attention.h"
#include "llm/avx2_exp.h"
#include "tensor/dtype.h"

namespace kiln::llm::attention_internal::avx2 {
namespace {

using avx2_math::Exp;

inline float HMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <KvDtype kDtype>
inline __m256 Load8(const void* row, int64_t i) {
  if constexpr (kDtype == KvDtype::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i));
    if constexpr (kDtype == KvDtype::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

template <KvDtype kDtype>
void LoadVTileT(const void* const* rows, int n, int d, float* vt) {
  for (int j = 0; j < n; ++j) {
    float* dst = vt + static_cast<size_t>(j) * d;
    for (int i = 0; i < d; i += 8) _mm256_storeu_ps(dst + i, Load8<kDtype>(rows[j], i));
  }
}

// Rows [r0, r0 + NR) of a tile: scores, online softmax, P x V. (The loops over the rows are
// unrolled, so that the accumulators stay in registers.)
template <int NR, KvDtype kK, KvDtype kV>
void TileRows(const TileArgs& a, int r0) {
  const int d = a.d;
  const float* q = a.q + static_cast<size_t>(r0) * d;
  __m256 acc[NR][2];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int i = 0; i < d; ++i) {
    const __m256 k0 = Load8<kK>(a.k, i * a.k_stride);
    const __m256 k1 = Load8<kK>(a.k, i * a.k_stride + 8);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const __m256 qb = _mm256_broadcast_ss(q + static_cast<size_t>(r) * d + i);
      acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
    }
  }
  const __m256i lane0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lane1 = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  float alpha[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    const int rr = r0 + r;
    const __m256i nv = _mm256_set1_epi32(a.nvalid[rr]);
    const __m256 mask0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nv, lane0));
    const __m256 mask1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(nv, lane1));
    const __m256 s0 = _mm256_blendv_ps(neg_inf, acc[r][0], mask0);
    const __m256 s1 = _mm256_blendv_ps(neg_inf, acc[r][1], mask1);
    const float m_new = std::max(a.m[rr], HMax(_mm256_max_ps(s0, s1)));
    alpha[r] = std::exp(a.m[rr] - m_new);
    const __m256 mv = _mm256_set1_ps(m_new);
    const __m256 p0 = _mm256_and_ps(Exp(_mm256_sub_ps(s0, mv)), mask0);
    const __m256 p1 = _mm256_and_ps(Exp(_mm256_sub_ps(s1, mv)), mask1);
    a.l[rr] = a.l[rr] * alpha[r] + HSum(_mm256_add_ps(p0, p1));
    a.m[rr] = m_new;
    _mm256_storeu_ps(a.p + r * kKeyTile, p0);
    _mm256_storeu_ps(a.p + r * kKeyTile + 8, p1);
  }
  for (int i0 = 0; i0 < d; i0 += 16) {
    __m256 o[NR][2];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      float* orow = a.o + static_cast<size_t>(r0 + r) * d + i0;
      const __m256 al = _mm256_set1_ps(alpha[r]);
      o[r][0] = _mm256_mul_ps(_mm256_loadu_ps(orow), al);
      o[r][1] = _mm256_mul_ps(_mm256_loadu_ps(orow + 8), al);
    }
    for (int j = 0; j < a.n; ++j) {
      const __m256 v0 = Load8<kV>(a.v[j], i0);
      const __m256 v1 = Load8<kV>(a.v[j], i0 + 8);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        const __m256 pb = _mm256_broadcast_ss(a.p + r * kKeyTile + j);
        o[r][0] = _mm256_fmadd_ps(pb, v0, o[r][0]);
        o[r][1] = _mm256_fmadd_ps(pb, v1, o[r][1]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      float* orow = a.o + static_cast<size_t>(r0 + r) * d + i0;
      _mm256_storeu_ps(orow, o[r][0]);
      _mm256_storeu_ps(orow + 8, o[r][1]);
    }
  }
}

template <KvDtype kK, KvDtype kV>
void TileT(const TileArgs& a) {
  int r = 0;
  for (; r + 4 <= a.rows; r += 4) TileRows<4, kK, kV>(a, r);
  if (r + 2 <= a.rows) {
    TileRows<2, kK, kV>(a, r);
    r += 2;
  }
  if (r < a.rows) TileRows<1, kK, kV>(a, r);
}

template <KvDtype kK>
void TileK(const TileArgs& a) {
  switch (a.v_dtype) {
    case KvDtype::kF32:
      return TileT<kK, KvDtype::kF32>(a);
    case KvDtype::kF16:
      return TileT<kK, KvDtype::kF16>(a);
    case KvDtype::kBF16:
      return TileT<kK, KvDtype::kBF16>(a);
  }
}

void Tile(const TileArgs& a) {
  switch (a.k_dtype) {
    case KvDtype::kF32:
      return TileK<KvDtype::kF32>(a);
    case KvDtype::kF16:
      return TileK<KvDtype::kF16>(a);
    case KvDtype::kBF16:
      return TileK<KvDtype::kBF16>(a);
  }
}

}  // namespace

void LoadVTile(KvDtype dtype, const void* const* rows, int n, int d, float* vt) {
  switch (dtype) {
    case KvDtype::kF32:
      return LoadVTileT<KvDtype::kF32>(rows, n, d, vt);
    case KvDtype::kF16:
      return LoadVTileT<KvDtype::kF16>(rows, n, d, vt);
    case KvDtype::kBF16:
      return LoadVTileT<KvDtype::kBF16>(rows, n, d, vt);
  }
}

const TileKernels kKernels = {/*typed=*/true, &LoadVTile, &Tile};

void StoreRow(KvDtype dtype, const float* x, void* dst, int64_t n) {
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  uint16_t* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  if (dtype == KvDtype::kF16) {
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) y[i] = FloatToFloat16(x[i]).bits;
    return;
  }
  // BF16, round to nearest even; NaNs stay NaNs (quiet), as FloatToBFloat16.
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i rounded = _mm256_add_epi32(
        u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i r =
        _mm256_srli_epi32(_mm256_blendv_epi8(rounded, _mm256_or_si256(u, quiet), is_nan), 16);
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), packed);
  }
  for (; i < n; ++i) y[i] = FloatToBFloat16(x[i]).bits;
}

}  // namespace kiln::llm::attention_internal::avx2
