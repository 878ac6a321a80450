// SPDX-License-Identifier: Apache-2.0
// AMX-INT8 tiles of Q4_0 / Q8_0 matrices (quant_kernels.h, namespace amx), compiled with
// -mamx-tile -mamx-int8 and AVX-512; run only on the kAmx path.
//
// One tile product per block of 32 columns: C[16 weight rows][16 tokens] (int32) = A[16 rows][32
// codes] (the weight codes, unpacked from the packed layout to bytes) x B[8][16 tokens x 4 codes]
// (the activation codes, laid out by PrepareTiles), signed times signed (TDPBSSD; Q4_0's codes
// 0..15 are unpacked as the values -8..7). The block's integer dot products are exact, as on
// every other path; each is then scaled by d_w * d_x in F32 and summed over the blocks in order.
//
// Two accumulator tiles alternate, so the tile unit computes the next block while the vector
// units scale and add the one before. Tiles: 0, 1 accumulators; 2, 3 weights; 4, 5 activations.

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"
#include "llm/quant_kernels.h"

// GCC 12 warns about the undefined first operand that its own AVX-512 intrinsics pass.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::llm::qk::amx {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

const TileConfig& Config() {
  static const TileConfig config = [] {
    TileConfig c;
    for (int t : {0, 1}) {  // accumulators: 16 rows x 16 int32
      c.rows[t] = 16;
      c.colsb[t] = 64;
    }
    for (int t : {2, 3}) {  // weights: 16 rows x 32 codes
      c.rows[t] = 16;
      c.colsb[t] = 32;
    }
    for (int t : {4, 5}) {  // activations: 8 rows x (16 tokens x 4 codes)
      c.rows[t] = 8;
      c.colsb[t] = 64;
    }
    return c;
  }();
  return config;
}

// Rows [8 * group, 8 * group + 8) of blocks [b0, b1) from the packed layout: the codes as bytes
// to a[(b - b0) * 512 + 32 * (row_in_tile)], rows 0..7 of the group at tile rows `half * 8..`,
// and the scales to dw[(b - b0) * 16 + row_in_tile]. A group past the matrix gives zeros.
template <bool kQ8>
void UnpackGroup(const WeightMatrix& w, int64_t group, int half, int64_t b0, int64_t b1, uint8_t* a,
                 float* dw) {
  const int64_t groups = (w.rows + kPackRows - 1) / kPackRows;
  if (group >= groups) {
    for (int64_t b = b0; b < b1; ++b) {
      std::memset(a + (b - b0) * 512 + 256 * half, 0, 256);
      std::memset(dw + (b - b0) * 16 + 8 * half, 0, 8 * sizeof(float));
    }
    return;
  }
  const GgmlType type = kQ8 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
  const uint8_t* base = w.packed + group * PackedGroupBytes(type, w.cols);
  const __m512i lo_rows = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i hi_rows = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i eight = _mm512_set1_epi8(8);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* sb = base + (b / kPackBlocks) * PackedSuperBytes(type);
    const int64_t k = b % kPackBlocks;
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 16 * k)));
    _mm256_storeu_ps(dw + (b - b0) * 16 + 8 * half, d);
    const uint8_t* codes = sb + 2 * kPackRows * kPackBlocks + k * PackedBlockBytes(type);
    uint8_t* out = a + (b - b0) * 512 + 256 * half;
    for (int q = 0; q < 2; ++q) {  // rows 0..3, then 4..7
      __m512i first, second;       // per row: codes 0..15, then 16..31
      if (kQ8) {
        first = _mm512_load_si512(codes + 128 * q);
        second = _mm512_load_si512(codes + 128 * q + 64);
      } else {  // codes 0..15 to the values -8..7
        const __m512i v = _mm512_load_si512(codes + 64 * q);
        first = _mm512_sub_epi8(_mm512_and_si512(v, nibble), eight);
        second = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibble), eight);
      }
      _mm512_store_si512(out + 128 * q, _mm512_permutex2var_epi64(first, lo_rows, second));
      _mm512_store_si512(out + 128 * q + 64, _mm512_permutex2var_epi64(first, hi_rows, second));
    }
  }
}

// acc[n] (lanes: tokens) += float(c[n]) * (dx * dw[n]) for the 16 rows of one block.
// (Unrolled, so that the accumulators stay in registers.)
inline void ScaleAdd(const int32_t* c, __m512 dx, const float* dw, __m512* acc) {
#pragma GCC unroll 16
  for (int n = 0; n < 16; ++n) {
    const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * n));
    acc[n] = _mm512_fmadd_ps(v, _mm512_mul_ps(dx, _mm512_set1_ps(dw[n])), acc[n]);
  }
}

// The 16 x 16 accumulators (acc[n] lane j: row r + n, token t + j) to y[(t + j) * ldy + r + n],
// for j < tokens and n < rows.
inline void StoreTransposed(const __m512* acc, int64_t rows, int64_t tokens, bool accumulate,
                            float* y, int64_t ldy) {
  alignas(64) float buf[16][16];
#pragma GCC unroll 16
  for (int n = 0; n < 16; ++n) _mm512_store_ps(buf[n], acc[n]);
  const __m512i index =
      _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1u);
  for (int64_t j = 0; j < tokens; ++j) {
    __m512 v = _mm512_i32gather_ps(index, &buf[0][j], 4);
    float* dst = y + j * ldy;
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, dst));
    _mm512_mask_storeu_ps(dst, mask, v);
  }
}

template <bool kQ8>
void TilePackedQ(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0,
                 int64_t t1, int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  const int64_t b0 = c0 / 32, b1 = c1 / 32, nb = b1 - b0;
  if (nb <= 0 || r0 >= r1 || t0 >= t1) return;
  thread_local GrowingBuffer buffer;
  uint8_t* mem = buffer.Get(static_cast<size_t>(nb) * (512 + 64) + 2 * 1024);
  uint8_t* a_tiles = mem;
  auto* dw = reinterpret_cast<float*>(mem + nb * 512);
  auto* c_even = reinterpret_cast<int32_t*>(mem + nb * 576);
  int32_t* c_odd = c_even + 256;

  _tile_loadconfig(&Config());
  for (int64_t r = r0; r < r1; r += 16) {
    UnpackGroup<kQ8>(w, r / kPackRows, 0, b0, b1, a_tiles, dw);
    UnpackGroup<kQ8>(w, r / kPackRows + 1, 1, b0, b1, a_tiles, dw);
    const int64_t rows = std::min<int64_t>(16, r1 - r);
    for (int64_t t = t0; t < t1; t += 16) {
      const int64_t g = t / 16;
      const int64_t blk0 = g * a.amx_blocks + b0;  // the token group's first block
      const int8_t* bq = a.amx_qs + blk0 * 512;
      const float* bd = a.amx_d + blk0 * 16;
      __m512 acc[16];
#pragma GCC unroll 16
      for (int n = 0; n < 16; ++n) acc[n] = _mm512_setzero_ps();
        // Block i's product into accumulator tile `c`, with weight and activation tiles `ta`, `tb`.
#define KILN_AMX_ISSUE(c, ta, tb, i)          \
  do {                                        \
    _tile_zero(c);                            \
    _tile_loadd(ta, a_tiles + 512 * (i), 32); \
    _tile_loadd(tb, bq + 512 * (i), 64);      \
    _tile_dpbssd(c, ta, tb);                  \
  } while (0)
      // Block i is stored one block before its products are scaled, so that the vector loads
      // never wait for the tile store they read.
      KILN_AMX_ISSUE(0, 2, 4, 0);
      if (nb > 1) KILN_AMX_ISSUE(1, 3, 5, 1);
      for (int64_t i = 0;; i += 2) {
        _tile_stored(0, c_even, 64);
        if (i + 2 < nb) KILN_AMX_ISSUE(0, 2, 4, i + 2);
        if (i > 0) ScaleAdd(c_odd, _mm512_load_ps(bd + 16 * (i - 1)), dw + 16 * (i - 1), acc);
        if (i + 1 >= nb) {
          ScaleAdd(c_even, _mm512_load_ps(bd + 16 * i), dw + 16 * i, acc);
          break;
        }
        _tile_stored(1, c_odd, 64);
        if (i + 3 < nb) KILN_AMX_ISSUE(1, 3, 5, i + 3);
        ScaleAdd(c_even, _mm512_load_ps(bd + 16 * i), dw + 16 * i, acc);
        if (i + 2 >= nb) {
          ScaleAdd(c_odd, _mm512_load_ps(bd + 16 * (i + 1)), dw + 16 * (i + 1), acc);
          break;
        }
      }
#undef KILN_AMX_ISSUE
      StoreTransposed(acc, rows, std::min<int64_t>(16, t1 - t), accumulate, y + t * ldy + r, ldy);
    }
  }
  _tile_release();
}

}  // namespace

TileFn TilePacked(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TilePackedQ<false>;
    case GgmlType::kQ8_0:
      return TilePackedQ<true>;
    default:
      return nullptr;
  }
}

size_t PreparedBytes(int64_t cols, int64_t n_tokens) {
  const auto groups = static_cast<size_t>((n_tokens + 15) / 16);
  const auto blocks = static_cast<size_t>(cols / 32);
  return groups * blocks * (512 + 64);
}

void PrepareTiles(Acts& a, int64_t n_tokens, uint8_t* mem) {
  const int64_t groups = (n_tokens + 15) / 16;
  const int64_t nb = a.cols / 32;
  auto* qs = reinterpret_cast<int8_t*>(mem);
  auto* d = reinterpret_cast<float*>(mem + groups * nb * 512);
  const Acts src = a;
  cpu::ParallelFor(groups, 1, [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t tokens = std::min<int64_t>(16, n_tokens - 16 * g);
      const auto mask = static_cast<__mmask16>((1u << tokens) - 1u);
      // Lane j reads token 16 g + j: its codes as 4-byte words, its scales.
      const __m512i qs_index = _mm512_mullo_epi32(
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
          _mm512_set1_epi32(static_cast<int32_t>(src.qs_stride / 4)));
      const __m512i blk_index = _mm512_mullo_epi32(
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
          _mm512_set1_epi32(static_cast<int32_t>(src.blk_stride)));
      const int8_t* q_tok = src.qs + 16 * g * src.qs_stride;
      const float* d_tok = src.d + 16 * g * src.blk_stride;
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t at = g * nb + b;
        for (int kq = 0; kq < 8; ++kq) {
          const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, qs_index,
                                                        q_tok + 32 * b + 4 * kq, 4);
          _mm512_store_si512(qs + 512 * at + 64 * kq, v);
        }
        _mm512_store_ps(d + 16 * at, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, blk_index,
                                                              d_tok + b, 4));
      }
    }
  });
  a.amx_qs = qs;
  a.amx_d = d;
  a.amx_blocks = nb;
}

}  // namespace kiln::llm::qk::amx
