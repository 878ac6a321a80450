// SPDX-License-Identifier: Apache-2.0
// AVX-512 (F/BW/DQ/VL) tile kernels of MatMul (quant_kernels.h): Q4_0 / Q8_0 without VNNI
// (quant_kernels_avx512.h), the F32 / F16 / BF16 kernels, and the Q8_0 activation quantizer.
// The K-quant types run the AVX2 kernels (Tile answers nullptr for them).
//
// Float weights: a tile of 4 rows x 6 tokens (4 x 1 for one token) keeps 24 accumulators of 16
// lanes, one per (row, token) in every tile shape (so a token's sums do not depend on the other
// tokens of the call); each step
// widens 16 weights of each row to F32 (vcvtph2ps for F16, a 16-bit shift for BF16) and runs
// 24 FMAs; the 16-lane sums are reduced once per tile. The last partial step uses masked loads.

#include "llm/quant_kernels_avx512.h"

namespace kiln::llm::qk::avx512 {
namespace {

enum class WKind { kF32, kF16, kBF16 };

template <WKind kKind>
inline __m512 LoadW(const uint8_t* row, int64_t c, __mmask16 m) {
  if constexpr (kKind == WKind::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  } else if constexpr (kKind == WKind::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * c));
  } else {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * c));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
}

template <WKind kKind>
struct Flt {
  template <int M, int N>
  struct K {
    static void Run(const Ctx512& c, int64_t r, int64_t t) {
      const uint8_t* wr[M];
      for (int i = 0; i < M; ++i) wr[i] = c.w.data + (r + i) * c.w.row_bytes;
      const float* xr[N];
      for (int j = 0; j < N; ++j) xr[j] = c.a.f + (t + j) * c.a.f_stride;
      // One accumulator per (row, token) in every tile, so that a (row, token)'s sum is the
      // same whatever the tile (the other tokens of the call).
      __m512 acc[M][N];
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) acc[i][j] = _mm512_setzero_ps();
      // The first token tile prefetches the next M rows (see quant_kernels_avx512.h).
      const bool prefetch = t == c.t_first;
      const int64_t ahead = PrefetchAhead(M, c.w.row_bytes);
      constexpr int kBytes = kKind == WKind::kF32 ? 4 : 2;
      for (int64_t k = c.c0; k < c.c1; k += 16) {
        const __mmask16 m =
            c.c1 - k >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (c.c1 - k)) - 1);
        __m512 wv[M];
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          // One prefetch per 64-byte line (F32: every step, halves: every other step).
          if (prefetch && (kBytes == 4 || (k & 31) == 0)) {
            _mm_prefetch(reinterpret_cast<const char*>(wr[i] + kBytes * k + ahead), _MM_HINT_T0);
          }
          wv[i] = LoadW<kKind>(wr[i], k, m);
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const __m512 x = _mm512_maskz_loadu_ps(m, xr[j] + k);
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], x, acc[i][j]);
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        __m512 col[M];
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) col[i] = acc[i][j];
        PutSums<M>(col, c.accumulate, c.y + (t + j) * c.ldy + r);
      }
    }
  };
};

template <WKind kKind>
void TileFloat(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
               int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx512 ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  // One token: 4-row tiles (4 independent FMA chains; each (row, token) sums in the same order
  // as in the wider tiles). Two or more share each activation load across 4 rows.
  if (t1 - t0 == 1) {
    RunTiles512<4, 1, Flt<kKind>::template K>(ctx, r0, r1, t0, t1);
  } else {
    RunTiles512<4, 6, Flt<kKind>::template K>(ctx, r0, r1, t0, t1);
  }
}

}  // namespace

TileFn Tile(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TileQ0Avx512</*kVnni=*/false, /*kQ8=*/false>;
    case GgmlType::kQ8_0:
      return TileQ0Avx512</*kVnni=*/false, /*kQ8=*/true>;
    case GgmlType::kQ4_K:
      return TileQ4KAvx512</*kVnni=*/false>;
    case GgmlType::kQ6_K:
      return TileQ6KAvx512</*kVnni=*/false>;
    case GgmlType::kF32:
      return TileFloat<WKind::kF32>;
    case GgmlType::kF16:
      return TileFloat<WKind::kF16>;
    case GgmlType::kBF16:
      return TileFloat<WKind::kBF16>;
    default:
      return nullptr;
  }
}

TileFn TilePacked(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TileQ0Avx512</*kVnni=*/false, /*kQ8=*/false, /*kPacked=*/true>;
    case GgmlType::kQ8_0:
      return TileQ0Avx512</*kVnni=*/false, /*kQ8=*/true, /*kPacked=*/true>;
    default:
      return nullptr;
  }
}

void QuantizeQ8_0(const float* x, int64_t n, int offset, int8_t* q, float* d, int32_t* bias) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), abs_mask));
    const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), abs_mask));
    const float amax = ReduceMax(_mm512_max_ps(a0, a1));
    const float dd = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    d[b] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
    const __m512 mul = _mm512_set1_ps(id);
    const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, mul));
    const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, mul));
    bias[b] = -offset * ReduceAddI32(_mm512_add_epi32(i0, i1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtsepi32_epi8(i1));
  }
}

void QuantizeQ8_K(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsums16,
                  int16_t* bsums32) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i max_code = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + 256 * b;
    __m512 v[16], av[16];
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) {
      v[i] = _mm512_loadu_ps(xb + 16 * i);
      av[i] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v[i]), abs_mask));
      m = _mm512_max_ps(m, av[i]);
    }
    const float amax = ReduceMax(m);
    int8_t* qb = q + 256 * b;
    if (amax == 0.0f) {
      std::memset(qb, 0, 256);
      d[b] = 0.0f;
      std::memset(bsums16 + 16 * b, 0, 32);
      std::memset(bsums32 + 8 * b, 0, 16);
      continue;
    }
    // The first element of largest magnitude gives the sign of the scale (as the reference's
    // strict > scan does).
    float max = 0.0f;
    const __m512 amax_v = _mm512_set1_ps(amax);
    for (int i = 0; i < 16; ++i) {
      const __mmask16 hit = _mm512_cmp_ps_mask(av[i], amax_v, _CMP_EQ_OQ);
      if (hit != 0) {
        max = xb[16 * i + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 mul = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      const __m512i c = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], mul)), max_code);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * i), _mm512_cvtsepi32_epi8(c));
      bsums16[16 * b + i] = static_cast<int16_t>(ReduceAddI32(c));
    }
    for (int g = 0; g < 8; ++g) {
      bsums32[8 * b + g] =
          static_cast<int16_t>(bsums16[16 * b + 2 * g] + bsums16[16 * b + 2 * g + 1]);
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace kiln::llm::qk::avx512
