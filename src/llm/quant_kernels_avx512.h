// SPDX-License-Identifier: Apache-2.0
#pragma once
// The AVX-512 tile kernels of the quantized weight types (Q4_0 and Q8_0 with Q8_0 activations,
// Q4_K and Q6_K with Q8_K activations), as templates over whether AVX512_VNNI is available.
// Included by quant_kernels_avx512.cc (built for AVX-512 F/BW/DQ/VL) and
// quant_kernels_avx512vnni.cc (also -mavx512vnni); everything here is in an unnamed namespace so
// that the two builds never merge.
//
// Q4_0 / Q8_0 (Q0x4): "4 rows x 16 columns" registers, one 128-bit lane per row, against the
// token's 16 activation codes broadcast to the 4 lanes; see the comment at Q0x4. Unsigned weight
// codes times signed activation codes: Q4_0's nibbles (0..15) with the -8 offset corrected by
// -8 * sum(x codes); Q8_0's codes made unsigned by xor 0x80 (w + 128), corrected by -128 *
// sum(x codes), with VNNI, or |w| times x with w's sign without.
// Q4_K / Q6_K: one row's 64 codes per register against 64 activation codes, integer sums over
// the super-block (see the comment at Q4KAvx512).
//
// Tiles are up to 8 rows by 6 tokens (Q4_0 / Q8_0; 8 tokens in the whole-block variant) or 4
// rows by 3 tokens (K-quants). While the first token tile of a row tile streams its rows, the
// rows PrefetchAhead bytes further are prefetched: decode reads each row once, in streams of
// one to a few KiB that the hardware prefetchers pick up too late.

// GCC 12 reports the undefined pass-through of the unmasked AVX-512 intrinsics (casts,
// conversions) as uninitialized reads: false positives, silenced for this code only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // GCC's only
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "llm/quant_kernels.h"

namespace kiln::llm::qk {
namespace {

inline void Put512(float v, bool accumulate, float* p) { *p = accumulate ? *p + v : v; }

// Horizontal reductions through the zero-masked extract (the unmasked one trips GCC 12's
// false "used uninitialized" on its undefined pass-through).
inline __m256 Upper256(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 1));
}

inline float ReduceAdd(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), Upper256(v));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float ReduceMax(__m512 v) {
  const __m256 s8 = _mm256_max_ps(_mm512_castps512_ps256(v), Upper256(v));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sums of 4 vectors' lanes, [sum(a0), sum(a1), sum(a2), sum(a3)].
inline __m128 Reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  // Per 128-bit lane: pairs of a0 / a1 and a2 / a3, then the four rows' partial sums.
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
  __m512 s = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, 0x44), _mm512_shuffle_ps(s01, s23, 0xee));
  // Across the four 128-bit lanes.
  s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0x4e));
  s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0xb1));
  return _mm512_castps512_ps128(s);
}

// Stores (or adds) the sums of the M <= 4 vectors a[0..M) to y[0..M).
template <int M>
inline void PutSums(const __m512* a, bool accumulate, float* y) {
  static_assert(M >= 1 && M <= 4);
  const __m512 z = _mm512_setzero_ps();
  __m128 v = Reduce4(a[0], M > 1 ? a[1] : z, M > 2 ? a[2] : z, M > 3 ? a[3] : z);
  if constexpr (M == 4) {
    if (accumulate) v = _mm_add_ps(v, _mm_loadu_ps(y));
    _mm_storeu_ps(y, v);
  } else {
    constexpr __mmask8 kMask = (1u << M) - 1;
    if (accumulate) v = _mm_add_ps(v, _mm_maskz_loadu_ps(kMask, y));
    _mm_mask_storeu_ps(y, kMask, v);
  }
}

inline int32_t ReduceAddI32(__m512i v) {
  const __m256i s8 =
      _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_maskz_extracti64x4_epi64(0xff, v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

struct Ctx512 {
  const WeightMatrix& w;
  const Acts& a;
  int64_t c0, c1;
  bool accumulate;
  float* y;
  int64_t ldy;
  int64_t t_first;  // the first token of the call: its tile prefetches the next row tile
};

// How far ahead the first token tile of a row tile prefetches weights: a whole number of M-row
// tiles (rows are contiguous, so the same offsets that many rows further), at least 32 KiB
// (measured on Zen 5: without software prefetch decode streams at half the speed, and 4 KiB
// ahead leaves decode of 1 KiB rows latency-bound).
inline int64_t PrefetchAheadBytes(int64_t tile) {
  constexpr int64_t kMinBytes = 32768;
  return tile * std::max<int64_t>(1, (kMinBytes + tile - 1) / tile);
}
// How far ahead the packed kernels prefetch their one stream (a row group: 8 rows' blocks) is
// PackedPrefetchBytes() (quant_kernels.h): the best distance differs between CPUs (on Zen 5,
// 8 KiB streams Q4_0 and Q8_0 at 90-95% of the read bandwidth, 1 KiB at 75-90%; on a Sapphire
// Rapids-class Xeon 1 KiB is about 30% faster than 8 KiB), so a loaded model times its own
// weights (TunePackedPrefetch, llm_matmul.h).
inline int64_t PrefetchAhead(int m, size_t row_bytes) {
  return PrefetchAheadBytes(m * static_cast<int64_t>(row_bytes));
}

template <int MR, int NR, template <int, int> class Kernel>
void RunTiles512(const Ctx512& ctx, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  using Fn = void (*)(const Ctx512&, int64_t, int64_t);
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

// The Q4_0 / Q8_0 kernel proper: "4 rows x 16 columns" lanes. A 512-bit register holds 16
// consecutive codes of each of 4 rows (one 128-bit lane per row): for Q4_0 the 16 code bytes
// of the block, whose low nibbles are the block's elements 0..15 and high nibbles 16..31, so
// that one load per row and a mask / shift give both halves; for Q8_0 the 32 codes in two such
// registers. The token's matching 16 activation codes are broadcast to the 4 lanes, and
// vpdpbusd leaves in each 32-bit lane a partial dot product of one row (4 per row), so a block
// (32 columns) of 4 rows x 1 token costs 2 dot instructions and one F32 conversion, scale and
// FMA with [dw_r * dx x 4 lanes per row]: half the work per column of one-row-per-register
// kernels. The 4 partial sums of each row are added at the end. kPacked: the registers come from
// the packed layout (quant_kernels.h) with one aligned load each, and the 4 rows' scales with
// one 8-byte load, instead of a load and a lane insert per row and a 2-byte load per scale.
// kWhole: the 4 partial sums of a row are added as integers per block (exact) before the
// scaling, so that each row's F32 sum is the one the AMX kernels compute (one scaled integer
// per block, added in block order): on AMX machines a row's result then does not depend on how
// many tokens share the call (batch invariance). So that this costs less than a reduction per
// token and block, the partial sums of up to 4 tokens are reduced together into one register
// (lane 4 i + k: row i, token k) with one F32 conversion and FMA, and token tiles are 8 wide.
template <bool kVnni, bool kQ8, bool kPacked, bool kWhole = false>
struct Q0x4 {
  template <int M, int N>
  struct K {
    static constexpr int G = (M + 3) / 4;  // groups of 4 rows
    static constexpr int Q = (N + 3) / 4;  // kWhole: groups of up to 4 tokens

    // Block b of rows wr[0, rows) (ggml layout) into the 128-bit lanes of qa (codes 0..15 of
    // each row) and qb (Q8_0: codes 16..31), their f16 scales into dbits (16 bits per row).
    [[gnu::always_inline]] static inline void LoadRows(const uint8_t* const* wr, int rows,
                                                       int64_t b, bool prefetch, int64_t ahead,
                                                       uint64_t* dbits, __m512i* qa, __m512i* qb) {
      constexpr int64_t kBlock = kQ8 ? 34 : 18;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        if (i >= rows) break;
        const uint8_t* blk = wr[i] + b * kBlock;
        if (prefetch && ((b * kBlock) & 63) < kBlock) {  // once per 64-byte line
          _mm_prefetch(reinterpret_cast<const char*>(blk + ahead), _MM_HINT_T0);
        }
        uint16_t h;
        std::memcpy(&h, blk, 2);
        *dbits |= static_cast<uint64_t>(h) << (16 * i);
        // Row i's codes go to 128-bit lane i (a masked broadcast: the lane index need not be a
        // compile-time constant, as _mm512_inserti32x4's must).
        const __mmask16 lane = static_cast<__mmask16>(0xF << (4 * i));
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        *qa = _mm512_mask_broadcast_i32x4(*qa, lane, lo);
        if constexpr (kQ8) {
          const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
          *qb = _mm512_mask_broadcast_i32x4(*qb, lane, hi);
        }
      }
    }

    // Token j's activation codes of block b, broadcast to the 4 lanes (xlo: codes 0..15, xhi:
    // 16..31), and its -8 / -128 correction once per row (lane 0 of each row's four).
    [[gnu::always_inline]] static inline void LoadToken(const int8_t* xq, const int32_t* xb,
                                                        int64_t b, __m512i* xlo, __m512i* xhi,
                                                        __m512i* bias) {
      const int8_t* xp = xq + 32 * b;
      *xlo = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(xp)));
      *xhi = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(xp + 16)));
      *bias = (kVnni || !kQ8) ? _mm512_maskz_set1_epi32(0x1111, xb[b]) : _mm512_setzero_si512();
    }

    // One token's integer dot products of a block with 4 rows: 4 partial sums per row.
    [[gnu::always_inline]] static inline __m512i Dot(__m512i wlo, __m512i whi, __mmask64 nlo,
                                                     __mmask64 nhi, __m512i xlo, __m512i xhi,
                                                     __m512i bias) {
      if constexpr (kVnni) {
        return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(bias, wlo, xlo), whi, xhi);
      } else if constexpr (kQ8) {
        const __m512i zero = _mm512_setzero_si512();
        const __m512i ones16 = _mm512_set1_epi16(1);
        const __m512i sl = _mm512_mask_sub_epi8(xlo, nlo, zero, xlo);
        const __m512i sh = _mm512_mask_sub_epi8(xhi, nhi, zero, xhi);
        return _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(wlo, sl), ones16),
                                _mm512_madd_epi16(_mm512_maddubs_epi16(whi, sh), ones16));
      } else {
        // Q4_0 pair sums stay below 2 * 15 * 127, so two of them fit in 16 bits.
        const __m512i p =
            _mm512_add_epi16(_mm512_maddubs_epi16(wlo, xlo), _mm512_maddubs_epi16(whi, xhi));
        return _mm512_add_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), bias);
      }
    }

    // Rows 4 g .. of one token (the first `mask` lanes of out) to y, added if accumulating.
    [[gnu::always_inline]] static inline void Store(const Ctx512& c, __mmask8 mask, __m128 out,
                                                    float* yp) {
      if (c.accumulate) out = _mm_add_ps(out, _mm_maskz_loadu_ps(mask, yp));
      _mm_mask_storeu_ps(yp, mask, out);
    }

    static void Run(const Ctx512& c, int64_t r, int64_t t) {
      const WeightMatrix& w = c.w;
      const Acts& a = c.a;
      constexpr GgmlType kType = kQ8 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
      constexpr int64_t kSuper = PackedSuperBytes(kType);
      constexpr int64_t kPackedBlock = PackedBlockBytes(kType);
      const uint8_t* wr[M];         // ggml layout: the rows
      const uint8_t* gp = nullptr;  // packed: the row group
      int64_t ahead;
      if constexpr (kPacked) {
        gp = w.packed + r / kPackRows * PackedGroupBytes(kType, w.cols);
        ahead = PackedPrefetchBytes();
      } else {
        for (int i = 0; i < M; ++i) wr[i] = w.data + (r + i) * w.row_bytes;
        ahead = PrefetchAheadBytes(M * static_cast<int64_t>(w.row_bytes));
      }
      const int8_t* xq[N];
      const float* xd[N];
      const int32_t* xb[N];
      for (int j = 0; j < N; ++j) {
        xq[j] = a.qs + (t + j) * a.qs_stride;
        xd[j] = a.d + (t + j) * a.blk_stride;
        xb[j] = a.bias + (t + j) * a.blk_stride;
      }
      __m512 acc[G][kWhole ? Q : N];
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
        for (int j = 0; j < (kWhole ? Q : N); ++j) acc[g][j] = _mm512_setzero_ps();
      const __m512i m4 = _mm512_set1_epi8(0x0f);
      const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
      const __m512i idx_d = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
      const bool prefetch = t == c.t_first;

      for (int64_t b = c.c0 / 32; b < c.c1 / 32; ++b) {
        __m512i wlo[G], whi[G];
        __m512 dwv[G];
        __mmask64 nlo[G] = {}, nhi[G] = {};  // (Q8_0 without VNNI: the codes' signs)
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          const int rows = M - 4 * g < 4 ? M - 4 * g : 4;
          uint64_t dbits = 0;
          __m512i qa = _mm512_setzero_si512(), qb = _mm512_setzero_si512();
          if constexpr (kPacked) {
            // Super-block b / 8: its scales (2 lines), then block b % 8's codes, 4 rows per
            // 64-byte line (Q8_0: codes 0..15, then 16..31 of the same rows).
            const uint8_t* sb = gp + (b / kPackBlocks) * kSuper;
            const int64_t k = b % kPackBlocks;
            const uint8_t* q = sb + 2 * 64 + k * kPackedBlock + g * (kQ8 ? 128 : 64);
            if (prefetch && g == 0) {
#pragma GCC unroll 4
              for (int64_t l = 0; l < kPackedBlock; l += 64) {
                _mm_prefetch(reinterpret_cast<const char*>(q + l + ahead), _MM_HINT_T0);
              }
              if (k == 0) {
                _mm_prefetch(reinterpret_cast<const char*>(sb + ahead), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(sb + 64 + ahead), _MM_HINT_T0);
              }
            }
            std::memcpy(&dbits, sb + 16 * k + 8 * g, 8);
            qa = _mm512_load_si512(q);
            if constexpr (kQ8) qb = _mm512_load_si512(q + 64);
          } else {
            LoadRows(wr + 4 * g, rows, b, prefetch, ahead, &dbits, &qa, &qb);
          }
          dwv[g] = _mm512_permutexvar_ps(
              idx_d,
              _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(dbits)))));
          if constexpr (kQ8) {
            if constexpr (kVnni) {
              wlo[g] = _mm512_xor_si512(qa, x80);
              whi[g] = _mm512_xor_si512(qb, x80);
            } else {
              nlo[g] = _mm512_movepi8_mask(qa);
              nhi[g] = _mm512_movepi8_mask(qb);
              wlo[g] = _mm512_abs_epi8(qa);
              whi[g] = _mm512_abs_epi8(qb);
            }
          } else {
            wlo[g] = _mm512_and_si512(qa, m4);
            whi[g] = _mm512_and_si512(_mm512_srli_epi16(qa, 4), m4);
          }
        }
        if constexpr (!kWhole) {
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) {
            __m512i xlo, xhi, bias;
            LoadToken(xq[j], xb[j], b, &xlo, &xhi, &bias);
            const __m512 dx = _mm512_set1_ps(xd[j][b]);
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) {
              const __m512i s = Dot(wlo[g], whi[g], nlo[g], nhi[g], xlo, xhi, bias);
              acc[g][j] =
                  _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dwv[g], dx), acc[g][j]);
            }
          }
        } else {
          // Up to 4 tokens at a time: their partial sums are reduced together, so that lane
          // 4 i + k of the result holds row i's block sum of token k (9 instructions for 4
          // tokens instead of 4 per token), and are scaled by [d_w(row) * d_x(token)].
#pragma GCC unroll 2
          for (int q = 0; q < Q; ++q) {
            const int nq = N - 4 * q < 4 ? N - 4 * q : 4;
            __m512i xlo[4], xhi[4], bias[4];
            // [d_x of tokens 4 q .. 4 q + 3] in each 128-bit lane (inserted from the scalars:
            // a vector load of values just stored would wait for the stores).
            __m128 d4 = _mm_load_ss(xd[4 * q] + b);
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
              if (k >= nq) break;
              LoadToken(xq[4 * q + k], xb[4 * q + k], b, &xlo[k], &xhi[k], &bias[k]);
            }
            if (nq > 1) d4 = _mm_insert_ps(d4, _mm_load_ss(xd[4 * q + 1] + b), 0x10);
            if (nq > 2) d4 = _mm_insert_ps(d4, _mm_load_ss(xd[4 * q + 2] + b), 0x20);
            if (nq > 3) d4 = _mm_insert_ps(d4, _mm_load_ss(xd[4 * q + 3] + b), 0x30);
            const __m512 dx = nq == 1 ? _mm512_set1_ps(xd[4 * q][b]) : _mm512_broadcast_f32x4(d4);
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) {
              __m512i sk[4];
#pragma GCC unroll 4
              for (int k = 0; k < 4; ++k) {
                sk[k] = k < nq ? Dot(wlo[g], whi[g], nlo[g], nhi[g], xlo[k], xhi[k], bias[k])
                               : _mm512_setzero_si512();
              }
              __m512i v;
              if (nq == 1) {
                v = _mm512_add_epi32(sk[0],
                                     _mm512_shuffle_epi32(sk[0], static_cast<_MM_PERM_ENUM>(0x4e)));
                v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, static_cast<_MM_PERM_ENUM>(0xb1)));
              } else {
                // Per row (128-bit lane): [a0+a2, b0+b2, a1+a3, b1+b3] of tokens a, b, ...
                const __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(sk[0], sk[1]),
                                                     _mm512_unpackhi_epi32(sk[0], sk[1]));
                const __m512i u23 = nq == 2 ? u01
                                            : _mm512_add_epi32(_mm512_unpacklo_epi32(sk[2], sk[3]),
                                                               _mm512_unpackhi_epi32(sk[2], sk[3]));
                // ... then [a, b, c, d]: each token's whole sum.
                v = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23),
                                     _mm512_unpackhi_epi64(u01, u23));
              }
              acc[g][q] =
                  _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(dwv[g], dx), acc[g][q]);
            }
          }
        }
      }
      // To y, where a token's rows are contiguous: each row's 4 partial sums (one 128-bit lane)
      // added to one value, or with kWhole, each token's lane of the row.
      const __m512i idx_out = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        const int rows = M - 4 * g < 4 ? M - 4 * g : 4;
        const __mmask8 mask = static_cast<__mmask8>((1u << rows) - 1);
        if constexpr (!kWhole) {
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) {
            __m512 v = acc[g][j];
            v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e));
            v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xb1));
            Store(c, mask, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx_out, v)),
                  c.y + (t + j) * c.ldy + r + 4 * g);
          }
        } else {  // lane 4 i + k: row i, token 4 q + k
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) {
            const __m512i idx = _mm512_add_epi32(idx_out, _mm512_set1_epi32(j % 4));
            Store(c, mask, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, acc[g][j / 4])),
                  c.y + (t + j) * c.ldy + r + 4 * g);
          }
        }
      }
    }
  };
};

template <bool kVnni, bool kQ8, bool kPacked = false, bool kWhole = false>
void TileQ0Avx512(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0,
                  int64_t t1, int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx512 ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  RunTiles512<8, kWhole ? 8 : 6, Q0x4<kVnni, kQ8, kPacked, kWhole>::template K>(ctx, r0, r1, t0,
                                                                                t1);
}

// ---------------------------------------------------------------------------------------------
// Q4_K and Q6_K weights, Q8_K activations (Q4KAvx512, Q6KAvx512). Per super-block and 64-column
// chunk, the codes of a row (unsigned: Q4_K 0..15, Q6_K 0..63) times a token's int8 activations
// with vpmaddubsw (pairs stay below 2^15), then the 16-bit pair sums times the sub-block scales
// into int32 lanes (vpdpwssd with VNNI, else vpmaddwd + vpaddd); the integer sum of the super-block
// is scaled by d_w * d_x once. Q4_K's min term, dmin_w * d_x * sum_j m_j * bsum32_j, is a vpmaddwd
// of the 8 mins with the token's 8 sums per 32; Q6_K's -32 offset, -32 * sum_g sc_g * bsum16_g,
// starts the integer sum (as (2 sc) * (-16 bsum), both in 16 bits).

template <bool kVnni>
inline __m512i MulAddScale(__m512i acc, __m512i p16, __m512i scale16) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(acc, p16, scale16);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p16, scale16));
  }
}

template <bool kVnni>
struct Q4KAvx512 {
  template <int M, int N>
  struct K {
    static void Run(const Ctx512& c, int64_t r, int64_t t) {
      const Acts& a = c.a;
      const BlockQ4_K* rows[M];
      for (int i = 0; i < M; ++i) {
        rows[i] = reinterpret_cast<const BlockQ4_K*>(c.w.data + (r + i) * c.w.row_bytes);
      }
      const int8_t* xq[N];
      const float* xd[N];
      const int16_t* xm[N];
      for (int j = 0; j < N; ++j) {
        xq[j] = a.qs + (t + j) * a.qs_stride;
        xd[j] = a.d + (t + j) * a.blk_stride;
        xm[j] = a.bsums32 + (t + j) * (a.bsums_stride / 2);
      }
      __m512 acc[M][N];
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) acc[i][j] = _mm512_setzero_ps();
      const __m512i m4 = _mm512_set1_epi8(0x0f);
      // Words 0..15 keep the low nibbles, 16..31 (the second copy of the 32 bytes) the high.
      const __m512i shift = _mm512_set_epi16(4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,  //
                                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
      const __m512i idx_rows = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
      const bool prefetch = t == c.t_first;
      const int64_t ahead = PrefetchAhead(M, c.w.row_bytes);
      for (int64_t b = c.c0 / 256; b < c.c1 / 256; ++b) {
        __m512i scw[M];  // words 0..7: the 6-bit scales, 8..15: the mins
        __m512 dv[M];
        uint64_t min_bytes[4] = {0, 0, 0, 0};
        float dmin[4] = {0, 0, 0, 0};
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          const BlockQ4_K& blk = rows[i][b];
          if (prefetch) {
            const char* p = reinterpret_cast<const char*>(&blk) + ahead;
            _mm_prefetch(p, _MM_HINT_T0);
            _mm_prefetch(p + 64, _MM_HINT_T0);
            _mm_prefetch(p + 128, _MM_HINT_T0);
          }
          alignas(16) uint32_t sm[4];
          UnpackQ4KScales16(blk.scales, sm);
          scw[i] = _mm512_castsi256_si512(
              _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(sm))));
          dv[i] = _mm512_set1_ps(_cvtsh_ss(blk.d));
          min_bytes[i] = sm[2] | static_cast<uint64_t>(sm[3]) << 32;
          dmin[i] = _cvtsh_ss(blk.dmin);
        }
        // The min term of all M rows at once: row i's 8 mins in 128-bit lane i, times the
        // token's 8 sums per 32 in every lane, leave 4 partial sums per row; their scale is
        // [dmin_i x 4 lanes] * dx.
        const __m512i mins4 = _mm512_cvtepu8_epi16(_mm256_set_epi64x(
            static_cast<int64_t>(min_bytes[3]), static_cast<int64_t>(min_bytes[2]),
            static_cast<int64_t>(min_bytes[1]), static_cast<int64_t>(min_bytes[0])));
        const __m512 dmin4 = _mm512_permutexvar_ps(
            idx_rows, _mm512_castps128_ps512(_mm_setr_ps(dmin[0], dmin[1], dmin[2], dmin[3])));
        __m512i isum[M][N];
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) isum[i][j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const __m512i idx = _mm512_inserti64x4(
              _mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(2 * g))),
              _mm256_set1_epi16(static_cast<short>(2 * g + 1)), 1);
          __m512i wq[M], sv[M];
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) {
            const __m512i q = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i][b].qs + 32 * g)));
            wq[i] = _mm512_and_si512(_mm512_srlv_epi16(q, shift), m4);
            sv[i] = _mm512_permutexvar_epi16(idx, scw[i]);
          }
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) {
            const __m512i x = _mm512_load_si512(xq[j] + 256 * b + 64 * g);
#pragma GCC unroll 8
            for (int i = 0; i < M; ++i) {
              isum[i][j] = MulAddScale<kVnni>(isum[i][j], _mm512_maddubs_epi16(wq[i], x), sv[i]);
            }
          }
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const __m512 dx = _mm512_set1_ps(xd[j][b]);
          const __m512i bs = _mm512_broadcast_i32x4(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(xm[j] + 8 * b)));
          const __m512 mm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(mins4, bs)),
                                          _mm512_mul_ps(dmin4, dx));
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) {
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][j]), _mm512_mul_ps(dv[i], dx),
                                        acc[i][j]);
            acc[i][j] = _mm512_mask_sub_ps(acc[i][j], static_cast<__mmask16>(0xf << (4 * i)),
                                           acc[i][j], mm);
          }
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

template <bool kVnni>
struct Q6KAvx512 {
  template <int M, int N>
  struct K {
    static void Run(const Ctx512& c, int64_t r, int64_t t) {
      const Acts& a = c.a;
      const BlockQ6_K* rows[M];
      for (int i = 0; i < M; ++i) {
        rows[i] = reinterpret_cast<const BlockQ6_K*>(c.w.data + (r + i) * c.w.row_bytes);
      }
      const int8_t* xq[N];
      const float* xd[N];
      const int16_t* xs[N];
      for (int j = 0; j < N; ++j) {
        xq[j] = a.qs + (t + j) * a.qs_stride;
        xd[j] = a.d + (t + j) * a.blk_stride;
        xs[j] = a.bsums16 + (t + j) * a.bsums_stride;
      }
      __m512 acc[M][N];
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) acc[i][j] = _mm512_setzero_ps();
      const __m512i m4 = _mm512_set1_epi8(0x0f);
      const __m512i m30 = _mm512_set1_epi8(0x30);
      // qh bits 0-1 / 2-3 to bits 4-5 (elements 0..31 / 32..63 of a half: shifts left 4 / 2),
      // bits 4-5 / 6-7 (elements 64..95 / 96..127: shifts right 0 / 2).
      const __m512i shl_a = _mm512_set_epi16(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                             4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4);
      const __m512i shr_b = _mm512_set_epi16(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
      const bool prefetch = t == c.t_first;
      const int64_t ahead = PrefetchAhead(M, c.w.row_bytes);
      for (int64_t b = c.c0 / 256; b < c.c1 / 256; ++b) {
        __m512i sc[M], sc2[M];
        __m512 dv[M];
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          const BlockQ6_K& blk = rows[i][b];
          if (prefetch) {
            const char* p = reinterpret_cast<const char*>(&blk) + ahead;
            _mm_prefetch(p, _MM_HINT_T0);
            _mm_prefetch(p + 64, _MM_HINT_T0);
            _mm_prefetch(p + 128, _MM_HINT_T0);
            _mm_prefetch(p + 192, _MM_HINT_T0);
          }
          const __m256i s16 =
              _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
          sc[i] = _mm512_castsi256_si512(s16);
          sc2[i] = _mm512_zextsi256_si512(_mm256_add_epi16(s16, s16));
          dv[i] = _mm512_set1_ps(_cvtsh_ss(blk.d));
        }
        __m512i isum[M][N];
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          // -16 * bsum16 fits in 16 bits; times 2 * scale it is the -32 offset of the codes.
          const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(xs[j] + 16 * b));
          const __m512i nb = _mm512_zextsi256_si512(
              _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(bs, 4)));
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) isum[i][j] = _mm512_madd_epi16(sc2[i], nb);
        }
#pragma GCC unroll 4
        for (int ch = 0; ch < 4; ++ch) {
          const int h = ch / 2;
          // Words [4ch x 8, 4ch+1 x 8, 4ch+2 x 8, 4ch+3 x 8]: the scales of the chunk's groups.
          const __m512i idx = _mm512_set_epi16(
              4 * ch + 3, 4 * ch + 3, 4 * ch + 3, 4 * ch + 3, 4 * ch + 3, 4 * ch + 3, 4 * ch + 3,
              4 * ch + 3, 4 * ch + 2, 4 * ch + 2, 4 * ch + 2, 4 * ch + 2, 4 * ch + 2, 4 * ch + 2,
              4 * ch + 2, 4 * ch + 2, 4 * ch + 1, 4 * ch + 1, 4 * ch + 1, 4 * ch + 1, 4 * ch + 1,
              4 * ch + 1, 4 * ch + 1, 4 * ch + 1, 4 * ch, 4 * ch, 4 * ch, 4 * ch, 4 * ch, 4 * ch,
              4 * ch, 4 * ch);
          __m512i wq[M], sv[M];
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) {
            const BlockQ6_K& blk = rows[i][b];
            const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h)));
            if (ch % 2 == 0) {
              const __m512i hi = _mm512_and_si512(_mm512_sllv_epi16(qh, shl_a), m30);
              wq[i] = _mm512_ternarylogic_epi32(ql, m4, hi, 0xea);  // (ql & m4) | hi
            } else {
              const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shr_b), m30);
              wq[i] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), m4, hi, 0xea);
            }
            sv[i] = _mm512_permutexvar_epi16(idx, sc[i]);
          }
#pragma GCC unroll 8
          for (int j = 0; j < N; ++j) {
            const __m512i x = _mm512_load_si512(xq[j] + 256 * b + 64 * ch);
#pragma GCC unroll 8
            for (int i = 0; i < M; ++i) {
              isum[i][j] = MulAddScale<kVnni>(isum[i][j], _mm512_maddubs_epi16(wq[i], x), sv[i]);
            }
          }
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const __m512 dx = _mm512_set1_ps(xd[j][b]);
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) {
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][j]), _mm512_mul_ps(dv[i], dx),
                                        acc[i][j]);
          }
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

template <bool kVnni>
void TileQ4KAvx512(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0,
                   int64_t t1, int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx512 ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  RunTiles512<4, 3, Q4KAvx512<kVnni>::template K>(ctx, r0, r1, t0, t1);
}

template <bool kVnni>
void TileQ6KAvx512(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0,
                   int64_t t1, int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const Ctx512 ctx{w, a, c0, c1, accumulate, y, ldy, t0};
  RunTiles512<4, 3, Q6KAvx512<kVnni>::template K>(ctx, r0, r1, t0, t1);
}

}  // namespace
}  // namespace kiln::llm::qk
