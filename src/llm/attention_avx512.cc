// SPDX-License-Identifier: Apache-2.0
// AVX-512 tile kernel of paged attention (attention.h): the 16 scores of a key tile are one zmm
// per query row (8 rows at a time, FMA over head_dim with the transposed K read 16 keys per
// load, F16 / BF16 widened in registers), the online softmax runs on masked zmm lanes with a
// polynomial exp, and P x V accumulates 4 rows x 64 columns in registers. The V tile widening
// (for many rows) is the AVX2 one (attention_avx2.cc). Compiled with
// the AVX-512 F/BW/DQ/VL flags; called only when ActiveIsa() >= kAvx512.
// GCC 12 warns that the _mm512_undefined_* inside its own max/min/round/convert intrinsics are
// uninitialized (a false positive of its headers); nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "llm/attention.h"

namespace kiln::llm::attention_internal::avx512 {
namespace {

// exp(x) for x in [-87.3, 88.7] (clamped outside), as attention_avx2.cc's Exp.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.72283f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

template <KvDtype kDtype>
inline __m512 Load16(const void* row, int64_t i) {
  if constexpr (kDtype == KvDtype::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
    if constexpr (kDtype == KvDtype::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

// P x V for rows [r0, r0 + NR) over columns [i0, i0 + 16 * NV).
template <int NR, int NV, KvDtype kV>
inline void AccumulatePv(const TileArgs& a, int r0, int i0, const float* alpha) {
  __m512 o[NR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    const float* orow = a.o + static_cast<size_t>(r0 + r) * a.d + i0;
    const __m512 al = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) o[r][c] = _mm512_mul_ps(_mm512_loadu_ps(orow + 16 * c), al);
  }
  for (int j = 0; j < a.n; ++j) {
    __m512 v[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) v[c] = Load16<kV>(a.v[j], i0 + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m512 pb = _mm512_set1_ps(a.p[(r0 + r) * kKeyTile + j]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) o[r][c] = _mm512_fmadd_ps(pb, v[c], o[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    float* orow = a.o + static_cast<size_t>(r0 + r) * a.d + i0;
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(orow + 16 * c, o[r][c]);
  }
}

template <int NR, KvDtype kV>
inline void PvRows(const TileArgs& a, int r0, const float* alpha) {
  int i0 = 0;
  for (; i0 + 64 <= a.d; i0 += 64) AccumulatePv<NR, 4, kV>(a, r0, i0, alpha);
  for (; i0 < a.d; i0 += 16) AccumulatePv<NR, 1, kV>(a, r0, i0, alpha);
}

// Rows [r0, r0 + NR) of a tile (NR <= 8): scores, online softmax, P x V.
template <int NR, KvDtype kK, KvDtype kV>
void TileRows(const TileArgs& a, int r0) {
  const int d = a.d;
  const float* q = a.q + static_cast<size_t>(r0) * d;
  __m512 acc[NR];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int i = 0; i < d; ++i) {
    const __m512 k = Load16<kK>(a.k, i * a.k_stride);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[static_cast<size_t>(r) * d + i]), k, acc[r]);
    }
  }
  // alpha = exp(m_old - m_new) for the NR rows in one vector exp (m_old = -inf on a row's first
  // tile gives ~1e-38, which multiplies a zero accumulator and a zero sum).
  alignas(64) float m_old[16] = {}, m_new[16] = {}, alpha[16];
  float sum[NR];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    const int rr = r0 + r;
    const __mmask16 mask = static_cast<__mmask16>((1u << a.nvalid[rr]) - 1u);
    m_old[r] = a.m[rr];
    m_new[r] = std::max(m_old[r], _mm512_mask_reduce_max_ps(mask, acc[r]));
    const __m512 p =
        _mm512_maskz_mov_ps(mask, Exp(_mm512_sub_ps(acc[r], _mm512_set1_ps(m_new[r]))));
    sum[r] = _mm512_reduce_add_ps(p);
    _mm512_storeu_ps(a.p + rr * kKeyTile, p);
  }
  _mm512_store_ps(alpha, Exp(_mm512_sub_ps(_mm512_load_ps(m_old), _mm512_load_ps(m_new))));
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    a.l[r0 + r] = a.l[r0 + r] * alpha[r] + sum[r];
    a.m[r0 + r] = m_new[r];
  }
  int r = 0;
  for (; r + 4 <= NR; r += 4) PvRows<4, kV>(a, r0 + r, alpha + r);
  if constexpr (NR % 4 >= 2) {
    PvRows<2, kV>(a, r0 + r, alpha + r);
    r += 2;
  }
  if constexpr (NR % 2 == 1) PvRows<1, kV>(a, r0 + r, alpha + r);
}

template <KvDtype kK, KvDtype kV>
void TileT(const TileArgs& a) {
  int r = 0;
  for (; r + 8 <= a.rows; r += 8) TileRows<8, kK, kV>(a, r);
  if (r + 4 <= a.rows) {
    TileRows<4, kK, kV>(a, r);
    r += 4;
  }
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

const TileKernels kKernels = {/*typed=*/true, &avx2::LoadVTile, &Tile};

}  // namespace kiln::llm::attention_internal::avx512
