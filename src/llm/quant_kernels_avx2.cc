// SPDX-License-Identifier: Apache-2.0
// AVX2 + FMA + F16C tile kernels of MatMul (quant_kernels.h), 256 bits wide; built with -mavx2
// -mfma -mf16c and called only when the CPU has them (the F16 ones only with F16C). The
// AVX-512 path also runs the K-quant kernels of this file.
//
// Integer dot products of unsigned weight codes with signed activation codes use
// _mm256_maddubs_epi16 (u8 x s8 pairs to s16) then _mm256_madd_epi16 (pairs to s32). The pair
// sums stay below 2^15: Q4_0 codes are at most 15, Q4_K's 15, Q6_K's 63, activations at most
// 127 in magnitude; Q8_0 weights (signed) go through the sign trick (|w| times x with w's sign).
// Q4_0's -8 offset is added back per block as bias = -8 * sum(x codes), precomputed per token.
// Q4_0 and Q8_0 use "2 rows x 16 columns" registers (Q0x2); the K-quants one row's 32 codes.

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "llm/quant_kernels.h"

namespace kiln::llm::qk::avx2 {
namespace {

inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float Hsum(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float H2F(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline void Put(float v, bool accumulate, float* p) { *p = accumulate ? *p + v : v; }

// The arguments of one tile call.
struct Ctx {
  const WeightMatrix& w;
  const Acts& a;
  int64_t c0, c1;
  bool accumulate;
  float* y;
  int64_t ldy;
  int64_t t_first;  // the first token of the call: its tiles prefetch the next rows
};

// While the first token tile streams a tile's rows, the next tile's rows (the same offsets
// `ahead` bytes further: rows are contiguous) are prefetched; row streams of a few KB are too
// short for the hardware prefetchers.
inline void Prefetch(const void* p, int64_t ahead) {
  _mm_prefetch(static_cast<const char*>(p) + ahead, _MM_HINT_T0);
}

// The prefetch distance: a whole number of m-row tiles, at least 8 KiB.
inline int64_t PrefetchAhead(int m, size_t row_bytes) {
  constexpr int64_t kMinBytes = 8192;
  const int64_t tile = m * static_cast<int64_t>(row_bytes);
  return tile * std::max<int64_t>(1, (kMinBytes + tile - 1) / tile);
}

// Runs Kernel<M, N>(ctx, r, t) over [r0, r1) x [t0, t1) in tiles of at most MR x NR: rows
// outer (a tile of weight rows stays in L1), tokens inner.
template <int MR, int NR, template <int, int> class Kernel>
void RunTiles(const Ctx& ctx, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  using Fn = void (*)(const Ctx&, int64_t, int64_t);
  static constexpr auto table = []<int... Ms, int... Ns>(std::integer_sequence<int, Ms...>,
                                                         std::integer_sequence<int, Ns...>) {
    std::array<std::array<Fn, NR>, MR> tab{};
    auto row = [&]<int M>() { ((tab[M][Ns] = &Kernel<M + 1, Ns + 1>::Run), ...); };
    (row.template operator()<Ms>(), ...);
    return tab;
  }
  (std::make_integer_sequence<int, MR>{}, std::make_integer_sequence<int, NR>{});
  for (int64_t r = r0; r < r1; r += MR) {
    const int m = static_cast<int>(std::min<int64_t>(MR, r1 - r));
    for (int64_t t = t0; t < t1; t += NR) {
      const int n = static_cast<int>(std::min<int64_t>(NR, t1 - t));
      table[m - 1][n - 1](ctx, r, t);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Q4_0 and Q8_0 weights, Q8_0 activations: "2 rows x 16 columns" registers, one 128-bit lane
// per row (as the AVX-512 kernel's 4 rows, quant_kernels_avx512.h), against the token's 16
// activation codes broadcast to both lanes; each row's 4 partial sums are added at the end.

template <bool kQ8>
struct Q0x2 {
  template <int M, int N>
  struct K {
    static constexpr int G = (M + 1) / 2;  // pairs of rows

    static void Run(const Ctx& c, int64_t r, int64_t t) {
      const WeightMatrix& w = c.w;
      const Acts& a = c.a;
      constexpr size_t kBlock = kQ8 ? 34 : 18;
      const uint8_t* wr[M];
      for (int i = 0; i < M; ++i) wr[i] = w.data + (r + i) * w.row_bytes;
      const int8_t* xq[N];
      const float* xd[N];
      const int32_t* xb[N];
      for (int j = 0; j < N; ++j) {
        xq[j] = a.qs + (t + j) * a.qs_stride;
        xd[j] = a.d + (t + j) * a.blk_stride;
        xb[j] = a.bias + (t + j) * a.blk_stride;
      }
      __m256 acc[G][N];
      for (int g = 0; g < G; ++g)
        for (int j = 0; j < N; ++j) acc[g][j] = _mm256_setzero_ps();
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i m4 = _mm256_set1_epi8(0x0f);
      const __m256i idx_d = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
      const bool prefetch = t == c.t_first;
      const int64_t ahead = PrefetchAhead(M, w.row_bytes);
      for (int64_t b = c.c0 / 32; b < c.c1 / 32; ++b) {
        __m256i wlo[G], whi[G], slo[G], shi[G];
        __m256 dwv[G];
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          const bool two = 2 * g + 1 < M;
          const uint8_t* b0 = wr[2 * g] + b * kBlock;
          const uint8_t* b1 = two ? wr[2 * g + 1] + b * kBlock : b0;
          if (prefetch) {
            Prefetch(b0, ahead);
            if (two) Prefetch(b1, ahead);
          }
          uint16_t h0, h1 = 0;
          std::memcpy(&h0, b0, 2);
          if (two) std::memcpy(&h1, b1, 2);
          dwv[g] = _mm256_permutevar8x32_ps(
              _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi32_si128(h0 | (h1 << 16)))), idx_d);
          const __m128i z = _mm_setzero_si128();
          auto load16 = [](const uint8_t* p) {
            return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
          };
          const __m256i qa = _mm256_set_m128i(two ? load16(b1 + 2) : z, load16(b0 + 2));
          if constexpr (kQ8) {
            const __m256i qb = _mm256_set_m128i(two ? load16(b1 + 18) : z, load16(b0 + 18));
            slo[g] = qa;
            shi[g] = qb;
            wlo[g] = _mm256_abs_epi8(qa);
            whi[g] = _mm256_abs_epi8(qb);
          } else {
            wlo[g] = _mm256_and_si256(qa, m4);
            whi[g] = _mm256_and_si256(_mm256_srli_epi16(qa, 4), m4);
          }
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const int8_t* xp = xq[j] + 32 * b;
          const __m256i xlo =
              _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(xp)));
          const __m256i xhi = _mm256_broadcastsi128_si256(
              _mm_load_si128(reinterpret_cast<const __m128i*>(xp + 16)));
          const __m256 dx = _mm256_set1_ps(xd[j][b]);
          const int32_t bj = kQ8 ? 0 : xb[j][b];
          const __m256i bias = _mm256_setr_epi32(bj, 0, 0, 0, bj, 0, 0, 0);
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            __m256i s;
            if constexpr (kQ8) {
              s = _mm256_add_epi32(
                  _mm256_madd_epi16(_mm256_maddubs_epi16(wlo[g], _mm256_sign_epi8(xlo, slo[g])),
                                    ones),
                  _mm256_madd_epi16(_mm256_maddubs_epi16(whi[g], _mm256_sign_epi8(xhi, shi[g])),
                                    ones));
            } else {
              // Q4_0 pair sums stay below 2 * 15 * 127, so two of them fit in 16 bits.
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(wlo[g], xlo),
                                                 _mm256_maddubs_epi16(whi[g], xhi));
              s = _mm256_add_epi32(_mm256_madd_epi16(p, ones), bias);
            }
            acc[g][j] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dwv[g], dx), acc[g][j]);
          }
        }
      }
      for (int g = 0; g < G; ++g) {
        for (int j = 0; j < N; ++j) {
          __m256 v = _mm256_hadd_ps(acc[g][j], acc[g][j]);
          v = _mm256_hadd_ps(v, v);  // each lane's element 0: its row's sum
          float* yp = c.y + (t + j) * c.ldy + r + 2 * g;
          Put(_mm256_cvtss_f32(v), c.accumulate, yp);
          if (2 * g + 1 < M) Put(_mm_cvtss_f32(_mm256_extractf128_ps(v, 1)), c.accumulate, yp + 1);
        }
      }
    }
  };
};

template <bool kQ8>
void TileQ0(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
            int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  RunTiles<4, 3, Q0x2<kQ8>::template K>(ctx, r0, r1, t0, t1);
}

// ---------------------------------------------------------------------------------------------
// Q4_K weights, Q8_K activations: one row, N tokens; integer sums over each super-block.

template <int M, int N>
struct Q4K {
  static_assert(M == 1);
  static void Run(const Ctx& c, int64_t r, int64_t t) {
    const Acts& a = c.a;
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(c.w.data + r * c.w.row_bytes);
    const int8_t* xq[N];
    const float* xd[N];
    const int16_t* xm[N];
    for (int j = 0; j < N; ++j) {
      xq[j] = a.qs + (t + j) * a.qs_stride;
      xd[j] = a.d + (t + j) * a.blk_stride;
      xm[j] = a.bsums32 + (t + j) * (a.bsums_stride / 2);
    }
    __m256 acc[N];
    __m128 accm[N];
    for (int j = 0; j < N; ++j) {
      acc[j] = _mm256_setzero_ps();
      accm[j] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const bool prefetch = t == c.t_first;
    const int64_t ahead = PrefetchAhead(1, c.w.row_bytes);
    for (int64_t b = c.c0 / 256; b < c.c1 / 256; ++b) {
      const BlockQ4_K& blk = blocks[b];
      if (prefetch) {
        for (int k = 0; k < 144; k += 64)
          Prefetch(reinterpret_cast<const uint8_t*>(&blk) + k, ahead);
      }
      const float d = H2F(reinterpret_cast<const uint8_t*>(&blk.d));
      const float dmin = H2F(reinterpret_cast<const uint8_t*>(&blk.dmin));
      alignas(16) uint32_t sm[4];
      UnpackQ4KScales16(blk.scales, sm);
      const auto* sc = reinterpret_cast<const uint8_t*>(sm);
      const __m128i mins =
          _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 2)));
      __m256i isum[N];
      for (int j = 0; j < N; ++j) isum[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * g));
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i slo = _mm256_set1_epi16(sc[2 * g]);
        const __m256i shi = _mm256_set1_epi16(sc[2 * g + 1]);
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const int8_t* x = xq[j] + 256 * b + 64 * g;
          const __m256i xl = _mm256_load_si256(reinterpret_cast<const __m256i*>(x));
          const __m256i xh = _mm256_load_si256(reinterpret_cast<const __m256i*>(x + 32));
          const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), slo);
          const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), shi);
          isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(pl, ph));
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        const float dx = xd[j][b];
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * dx), acc[j]);
        const __m128i bs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xm[j] + 8 * b));
        const __m128i mm = _mm_madd_epi16(mins, bs);
        accm[j] = _mm_fmadd_ps(_mm_cvtepi32_ps(mm), _mm_set1_ps(dmin * dx), accm[j]);
      }
    }
    for (int j = 0; j < N; ++j) {
      Put(Hsum(acc[j]) - Hsum(accm[j]), c.accumulate, c.y + (t + j) * c.ldy + r);
    }
  }
};

void TileQ4_K(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  RunTiles<1, 4, Q4K>(ctx, r0, r1, t0, t1);
}

// ---------------------------------------------------------------------------------------------
// Q6_K weights, Q8_K activations: one row, N tokens.

template <int M, int N>
struct Q6K {
  static_assert(M == 1);
  static void Run(const Ctx& c, int64_t r, int64_t t) {
    const Acts& a = c.a;
    const auto* blocks = reinterpret_cast<const BlockQ6_K*>(c.w.data + r * c.w.row_bytes);
    const int8_t* xq[N];
    const float* xd[N];
    const int16_t* xs[N];
    for (int j = 0; j < N; ++j) {
      xq[j] = a.qs + (t + j) * a.qs_stride;
      xd[j] = a.d + (t + j) * a.blk_stride;
      xs[j] = a.bsums16 + (t + j) * a.bsums_stride;
    }
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    // Spreads dword c of the scales (words sc[2c], sc[2c+1]) to [sc[2c] x 8 | sc[2c+1] x 8].
    const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                            2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    const bool prefetch = t == c.t_first;
    const int64_t ahead = PrefetchAhead(1, c.w.row_bytes);
    for (int64_t b = c.c0 / 256; b < c.c1 / 256; ++b) {
      const BlockQ6_K& blk = blocks[b];
      if (prefetch) {
        for (int k = 0; k < 210; k += 64)
          Prefetch(reinterpret_cast<const uint8_t*>(&blk) + k, ahead);
      }
      const float d = H2F(reinterpret_cast<const uint8_t*>(&blk.d));
      const __m256i sc16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
      __m256i isum[N];
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        // The -32 offset of the codes: -32 * sum over groups of scale * bsum.
        const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(xs[j] + 16 * b));
        isum[j] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
        const __m256i ql1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
        __m256i e[4];
        e[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                               _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        e[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                               _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        e[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                               _mm256_and_si256(qh, m30));
        e[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m256i scv = _mm256_shuffle_epi8(
              _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(4 * h + q)), spread);
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) {
            const __m256i x = _mm256_load_si256(
                reinterpret_cast<const __m256i*>(xq[j] + 256 * b + 128 * h + 32 * q));
            isum[j] =
                _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(e[q], x), scv));
          }
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * xd[j][b]), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) Put(Hsum(acc[j]), c.accumulate, c.y + (t + j) * c.ldy + r);
  }
};

void TileQ6_K(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  RunTiles<1, 4, Q6K>(ctx, r0, r1, t0, t1);
}

// ---------------------------------------------------------------------------------------------
// F32 / F16 / BF16 weights: widen 8 weights to F32, FMA against M x N accumulators.

enum class WKind { kF32, kF16, kBF16 };

template <WKind kKind>
inline __m256 LoadW(const uint8_t* row, int64_t c) {
  if constexpr (kKind == WKind::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (kKind == WKind::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  } else {
    const __m256i v =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
}

template <WKind kKind>
inline float LoadW1(const uint8_t* row, int64_t c) {
  if constexpr (kKind == WKind::kF32) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  } else if constexpr (kKind == WKind::kF16) {
    return H2F(row + 2 * c);
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
}

template <WKind kKind>
struct Flt {
  template <int M, int N>
  struct K {
    static void Run(const Ctx& c, int64_t r, int64_t t) {
      const uint8_t* wr[M];
      for (int i = 0; i < M; ++i) wr[i] = c.w.data + (r + i) * c.w.row_bytes;
      const float* xr[N];
      for (int j = 0; j < N; ++j) xr[j] = c.a.f + (t + j) * c.a.f_stride;
      __m256 acc[M][N];
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) acc[i][j] = _mm256_setzero_ps();
      const bool prefetch = t == c.t_first;
      const int64_t ahead = PrefetchAhead(M, c.w.row_bytes);
      constexpr int kBytes = kKind == WKind::kF32 ? 4 : 2;
      int64_t k = c.c0;
      for (; k + 8 <= c.c1; k += 8) {
        __m256 wv[M];
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          if (prefetch && (k & 15) == 0) Prefetch(wr[i] + kBytes * k, ahead);
          wv[i] = LoadW<kKind>(wr[i], k);
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const __m256 x = _mm256_loadu_ps(xr[j] + k);
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) acc[i][j] = _mm256_fmadd_ps(wv[i], x, acc[i][j]);
        }
      }
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          float s = Hsum(acc[i][j]);
          for (int64_t kk = k; kk < c.c1; ++kk) s += LoadW1<kKind>(wr[i], kk) * xr[j][kk];
          Put(s, c.accumulate, c.y + (t + j) * c.ldy + r + i);
        }
      }
    }
  };
};

template <WKind kKind>
void TileFloat(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
               int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  // Every tile sums a (row, token) in the same order (one accumulator, 8 columns at a time), so
  // that a token's products do not depend on the other tokens of the call.
  if (t1 - t0 == 1) {
    RunTiles<4, 1, Flt<kKind>::template K>(ctx, r0, r1, t0, t1);  // one token: 4 row streams
  } else {
    RunTiles<2, 4, Flt<kKind>::template K>(ctx, r0, r1, t0, t1);
  }
}

}  // namespace

TileFn Tile(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TileQ0<false>;
    case GgmlType::kQ8_0:
      return TileQ0<true>;
    case GgmlType::kQ4_K:
      return TileQ4_K;
    case GgmlType::kQ6_K:
      return TileQ6_K;
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

void QuantizeQ8_0(const float* x, int64_t n, int offset, int8_t* q, float* d, int32_t* bias) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float dd = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    d[b] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
    const __m256 mul = _mm256_set1_ps(id);
    __m256i iv[4];
    for (int i = 0; i < 4; ++i) iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], mul));
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    bias[b] = -offset * _mm_cvtsi128_si32(s4);
    const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]);
    const __m256i p23 = _mm256_packs_epi32(iv[2], iv[3]);
    const __m256i p = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), p);
  }
}

void RoundHalf(const float* x, int64_t n, bool bf16, float* y) {
  int64_t i = 0;
  if (bf16) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i half = _mm256_set1_epi32(0x7fff);
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    for (; i + 8 <= n; i += 8) {
      const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i));
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
      const __m256i r = _mm256_and_si256(_mm256_add_epi32(v, _mm256_add_epi32(half, lsb)), hi);
      _mm256_storeu_ps(y + i, _mm256_castsi256_ps(r));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
      _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
  }
  scalar::RoundHalf(x + i, n - i, bf16, y + i);
}

}  // namespace kiln::llm::qk::avx2
