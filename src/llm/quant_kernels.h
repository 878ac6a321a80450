// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal interface of llm_matmul.cc and its instruction-set kernels (quant_kernels_*.cc):
// the activations prepared for one MatMul call (Acts), the tile kernels' signature, and the
// scalar activation quantizers every path shares, so that the fast paths quantize exactly as
// the reference does. Not part of the library's API.
//
// Tile kernels compute, for rows [r0, r1) and tokens [t0, t1), the partial dot products over
// columns [c0, c1) and store them to y[t * ldy + r] (accumulate false) or add them (true). They
// run on the calling thread; llm_matmul.cc splits the work over threads.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "llm/ggml_quants.h"
#include "llm/llm_matmul.h"
#include "tensor/dtype.h"

namespace kiln::llm::qk {

// Activation rows of one call, converted for the weight type. Token t's data starts at
// t * <stride>. Every array is zero beyond the real columns up to its stride, and strides keep
// rows 64-byte aligned, so kernels may read whole vectors past the last column.
struct Acts {
  int64_t cols = 0;
  // Q8_0 codes (Q4_0 / Q8_0 weights) or Q8_K codes (Q4_K / Q6_K weights), int8.
  const int8_t* qs = nullptr;
  int64_t qs_stride = 0;  // bytes; a multiple of 64 covering cols
  // Per block (32 elements for Q8_0, 256 for Q8_K): the scale (Q8_0: the f16-rounded value).
  const float* d = nullptr;
  // Q8_0 only, per block: -offset * (sum of the block's codes), offset 8 for Q4_0 weights and
  // 128 for Q8_0 weights: the correction of the unsigned-weight integer dot products.
  const int32_t* bias = nullptr;
  int64_t blk_stride = 0;  // elements of d / bias per token; even, covering cols / block
  // Q8_K only: the sums of the codes per 16 (bsums16, 16 per super-block) and per 32 (bsums32,
  // 8 per super-block).
  const int16_t* bsums16 = nullptr;
  const int16_t* bsums32 = nullptr;
  int64_t bsums_stride = 0;  // elements of bsums16 per token (bsums32: half of it)
  // F32 / F16 / BF16 weights: the activations, rounded to F16 / BF16 for those weights.
  const float* f = nullptr;
  int64_t f_stride = 0;
  // The AMX path's copy of the Q8_0 codes (amx::PrepareTiles), per group of 16 tokens (the last
  // padded with zero tokens) and block of 32 columns, at (group * amx_blocks + block): the
  // codes as the B operand of a tile product (8 rows of [16 tokens][4 codes], 512 bytes, at
  // amx_qs + 512 * that) and the 16 tokens' scales (16 lanes at amx_d + 16 * that).
  const int8_t* amx_qs = nullptr;
  const float* amx_d = nullptr;
  int64_t amx_blocks = 0;  // cols / 32
};

using TileFn = void (*)(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0,
                        int64_t t1, int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy);

// Quantizes n elements (a multiple of 32) to Q8_0 codes: q[0..n), d[n/32] (f16-rounded scale),
// bias[n/32] = -offset * sum of each block's codes. Same results on every path.
using QuantizeQ8_0Fn = void (*)(const float* x, int64_t n, int offset, int8_t* q, float* d,
                                int32_t* bias);
// y[i] = x[i] rounded to F16 (bf16 false) or BF16 (true) and widened back.
using RoundHalfFn = void (*)(const float* x, int64_t n, bool bf16, float* y);

// Column step of the tile kernels: c0 and c1 must be multiples of it, or c1 == cols.
constexpr int64_t ColumnStep(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
      return 64;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return 256;
    default:
      return 64;
  }
}

// The packed layout of Q4_0 / Q8_0 matrices (PackedWeights): rows in groups of 8 (the last
// group padded with zero rows), group g at packed + g * PackedGroupBytes, one stream for a
// kernel's 8-row tile; a group is a run of super-blocks of 8 blocks of 32 columns (the last
// padded with zero blocks), each 64-byte aligned: the 8 blocks' f16 scales as [block][row]
// (128 bytes), then per block the codes of rows 0..3 and then rows 4..7, each as Q4_0 [row][16
// code bytes] (one 64-byte line) or Q8_0 [row][codes 0..15] then [row][codes 16..31] (two
// lines). One aligned 64-byte load gives a "4 rows x 16 columns" register of the AVX-512
// kernels (quant_kernels_avx512.h).
constexpr int64_t kPackRows = 8;
constexpr int64_t kPackBlocks = 8;
constexpr int64_t PackedBlockBytes(GgmlType type) { return type == GgmlType::kQ8_0 ? 256 : 128; }
constexpr int64_t PackedSuperBytes(GgmlType type) {
  return 2 * kPackRows * kPackBlocks + kPackBlocks * PackedBlockBytes(type);
}
constexpr int64_t PackedGroupBytes(GgmlType type, int64_t cols) {
  return (cols / 32 + kPackBlocks - 1) / kPackBlocks * PackedSuperBytes(type);
}
constexpr int64_t PackedBytes(GgmlType type, int64_t rows, int64_t cols) {
  return (rows + kPackRows - 1) / kPackRows * PackedGroupBytes(type, cols);
}

// A 64-byte-aligned buffer that only grows: a thread's scratch (thread_local in the users).
struct GrowingBuffer {
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<uint8_t[], Free> data;
  size_t size = 0;

  uint8_t* Get(size_t bytes) {
    if (bytes > size) {
      bytes = std::max(bytes, size + size / 2);
      data.reset(static_cast<uint8_t*>(::operator new[](bytes, std::align_val_t{64})));
      size = bytes;
    }
    return data.get();
  }
};

// How far ahead (bytes) the kernels that read the packed layout prefetch: 8 KiB until
// TunePackedPrefetch (llm_matmul.h) sets another. Thread-safe (a relaxed atomic).
int64_t PackedPrefetchBytes();

// One instruction-set family's kernels. Tile(type) is null for a type it has no kernel for.
namespace scalar {
TileFn Tile(GgmlType type);
void QuantizeQ8_0(const float* x, int64_t n, int offset, int8_t* q, float* d, int32_t* bias);
void RoundHalf(const float* x, int64_t n, bool bf16, float* y);
}  // namespace scalar
namespace avx2 {  // AVX2 + FMA + F16C
TileFn Tile(GgmlType type);
void QuantizeQ8_0(const float* x, int64_t n, int offset, int8_t* q, float* d, int32_t* bias);
void RoundHalf(const float* x, int64_t n, bool bf16, float* y);
}  // namespace avx2
namespace avx512 {  // AVX-512 F/BW/DQ/VL
TileFn Tile(GgmlType type);
// Tiles of Q4_0 / Q8_0 matrices that read w.packed (null for other types). REQUIRES: r0 is a
// multiple of kPackRows.
TileFn TilePacked(GgmlType type);
void QuantizeQ8_0(const float* x, int64_t n, int offset, int8_t* q, float* d, int32_t* bias);
// n elements (a multiple of 256) to Q8_K codes, exactly as QuantizeActBlockQ8_K per block.
void QuantizeQ8_K(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsums16,
                  int16_t* bsums32);
}  // namespace avx512
namespace avx512vnni {  // AVX-512 F/BW/DQ/VL + VNNI
TileFn Tile(GgmlType type);
TileFn TilePacked(GgmlType type);
// Tile (packed false) or TilePacked (true) of Q4_0 / Q8_0 with each block's integer sum
// completed before it is scaled: the F32 sums of amx::TilePacked, for the kAmx path's calls
// with too few tokens for a tile product and its matrices without a packed copy (null for
// other types).
TileFn TileWholeBlocks(GgmlType type, bool packed);
}  // namespace avx512vnni
namespace amx {  // AVX-512 + AMX-TILE + AMX-INT8 (cpu::Isa::kAmx)
// Tiles of Q4_0 / Q8_0 matrices that read w.packed and a.amx_* (null for other types): per
// 16 weight rows, the rows' blocks unpacked to signed bytes once (Q4_0: the values -8..7), then
// one tile product (TDPBSSD) per block of 32 columns and group of 16 tokens, scaled and summed
// in F32 as the other kernels do. REQUIRES: r0 a multiple of 16; t0 a multiple of 16.
TileFn TilePacked(GgmlType type);
// Bytes PrepareTiles writes for n_tokens tokens of `cols` columns.
size_t PreparedBytes(int64_t cols, int64_t n_tokens);
// Fills a.amx_* from a's Q8_0 codes and scales into mem (64-byte aligned, PreparedBytes
// bytes), on the calling thread's team.
void PrepareTiles(Acts& a, int64_t n_tokens, uint8_t* mem);
}  // namespace amx

// ---------------------------------------------------------------------------------------------
// Scalar quantizers shared by every path.

// One 32-block of activations to Q8_0 as ggml-cpu's x86 quantize_row_q8_0: amax, d = amax /
// 127 (stored f16), codes round-half-even(x * (127 / amax)). Returns the f16-rounded d.
inline float QuantizeActBlockQ8_0(const float* x, int8_t* q, int32_t* sum) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) {
    const int v = static_cast<int>(std::nearbyint(x[j] * id));
    q[j] = static_cast<int8_t>(v);
    s += v;
  }
  *sum = s;
  return Float16ToFloat(FloatToFloat16(d));
}

// One 256-block of activations to Q8_K as quantize_row_q8_K_ref (QuantizeRow kQ8_K): codes,
// returns d; bsums16[16], bsums32[8].
inline float QuantizeActBlockQ8_K(const float* x, int8_t* q, int16_t* bsums16, int16_t* bsums32) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 256; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  float d = 0.0f;
  if (amax == 0.0f) {
    for (int j = 0; j < 256; ++j) q[j] = 0;
  } else {
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      const int v = static_cast<int>(std::nearbyint(iscale * x[j]));
      q[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    d = 1.0f / iscale;
  }
  for (int g = 0; g < 16; ++g) {
    int s = 0;
    for (int l = 0; l < 16; ++l) s += q[16 * g + l];
    bsums16[g] = static_cast<int16_t>(s);
  }
  for (int g = 0; g < 8; ++g) {
    bsums32[g] = static_cast<int16_t>(bsums16[2 * g] + bsums16[2 * g + 1]);
  }
  return d;
}

// The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K block's packed `scales`, as
// 16 bytes built from its three 32-bit words (UnpackQ4KScales, four bytes at a time).
inline void UnpackQ4KScales16(const uint8_t* s, uint32_t out[4]) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, s, 4);
  __builtin_memcpy(&w1, s + 4, 4);
  __builtin_memcpy(&w2, s + 8, 4);
  constexpr uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  out[0] = w0 & k6;                                     // sc[0..3]
  out[1] = (w2 & k4) | (((w0 >> 6) & k2) << 4);         // sc[4..7]
  out[2] = w1 & k6;                                     // m[0..3]
  out[3] = ((w2 >> 4) & k4) | (((w1 >> 6) & k2) << 4);  // m[4..7]
}

inline float HalfToF32(const void* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return Float16ToFloat(Float16{h});
}

}  // namespace kiln::llm::qk
