// SPDX-License-Identifier: Apache-2.0
#pragma once
// ggml's block-quantized tensor types, bit-exact to llama.cpp's layouts (ggml-common.h), with
// reference (scalar, straightforward) dequantization and quantization.
//
//   std::vector<BlockQ4_0> blocks(n / 32);
//   KILN_RETURN_IF_ERROR(QuantizeRow(GgmlType::kQ4_0, x, blocks.data(), n));
//   KILN_RETURN_IF_ERROR(DequantizeRow(GgmlType::kQ4_0, blocks.data(), y, n));
//
// Layouts (all little-endian; "f16" is an IEEE binary16 bit pattern):
//   Q4_0 (32 elements, 18 bytes): f16 d; u8 qs[16]. x[j] = d*((qs[j] & 15) - 8),
//        x[j+16] = d*((qs[j] >> 4) - 8), j < 16.
//   Q8_0 (32 elements, 34 bytes): f16 d; i8 qs[32]. x[j] = d*qs[j].
//   Q4_K (256 elements, 144 bytes): f16 d; f16 dmin; u8 scales[12]; u8 qs[128]. Eight
//        sub-blocks of 32 with a 6-bit scale sc[j] and a 6-bit min m[j] packed in `scales`
//        (UnpackQ4KScales); element 64*g + l (g < 4, l < 32) is
//        d*sc[2g]*(qs[32g+l] & 15) - dmin*m[2g] and element 64*g + 32 + l is
//        d*sc[2g+1]*(qs[32g+l] >> 4) - dmin*m[2g+1].
//   Q6_K (256 elements, 210 bytes): u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d. Each half
//        h < 2 of 128 elements uses ql[64h..], qh[32h..]; with l < 32, its element 32*q + l
//        (q < 4) has the 6-bit value ((ql[64h + l + 32*(q&1)] >> 4*(q>>1)) & 15) |
//        (((qh[32h + l] >> 2*q) & 3) << 4), and x = d * scales[(128h + 32q + l) / 16] *
//        (value - 32).
//   Q8_K (256 elements, 292 bytes): f32 d; i8 qs[256]; i16 bsums[16] (sums of qs in groups of
//        16). The activation type of the K-quant dot products; x[j] = d*qs[j].
//   F32, F16, BF16: plain rows.
//
// Thread safety: every function is thread-safe (no shared state).

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "llm/ggml_type.h"

namespace kiln::llm {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK_K = 256;

struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // nibbles: low = elements 0..15, high = 16..31
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block is 18 bytes");

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes");

struct BlockQ4_K {
  uint16_t d;          // f16 super-block scale of the 6-bit scales
  uint16_t dmin;       // f16 super-block scale of the 6-bit mins
  uint8_t scales[12];  // 8 scales and 8 mins, 6 bits each (UnpackQ4KScales)
  uint8_t qs[128];     // nibbles
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes");

struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // 8-bit scales of the 16 groups of 16
  uint16_t d;         // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes");

struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sum of qs[16*i .. 16*i + 15]
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block is 292 bytes");

static_assert(sizeof(BlockQ4_0) == BlockBytes(GgmlType::kQ4_0) &&
                  sizeof(BlockQ8_0) == BlockBytes(GgmlType::kQ8_0) &&
                  sizeof(BlockQ4_K) == BlockBytes(GgmlType::kQ4_K) &&
                  sizeof(BlockQ6_K) == BlockBytes(GgmlType::kQ6_K) &&
                  sizeof(BlockQ8_K) == BlockBytes(GgmlType::kQ8_K),
              "block structs agree with ggml_type.h");

// The 6-bit scales sc[0..7] and mins m[0..7] of a Q4_K block (ggml's get_scale_min_k4):
// j < 4: sc[j] = s[j] & 63, m[j] = s[j+4] & 63; j >= 4: sc[j] = (s[j+4] & 15) | ((s[j-4] >> 6)
// << 4), m[j] = (s[j+4] >> 4) | ((s[j] >> 6) << 4).
inline void UnpackQ4KScales(const uint8_t s[12], uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// The inverse of UnpackQ4KScales. REQUIRES: every sc[j], m[j] < 64.
inline void PackQ4KScales(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Whether DequantizeRow reads `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K and Q8_K.
bool CanDequantize(GgmlType type);
// Whether QuantizeRow writes `type`: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K and Q8_K.
bool CanQuantize(GgmlType type);

// dst[0..n) = the n elements encoded at `src` (RowBytes(type, n) bytes), computed as ggml's
// dequantize_row_* does (float products in the order the layout comment above writes them).
// Errors: InvalidArgument when the type cannot be dequantized, n < 0, or n is not a multiple of
// BlockElements(type). REQUIRES: src holds RowBytes(type, n) bytes; dst holds n floats.
Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// Encodes src[0..n) into RowBytes(type, n) bytes at `dst` with ggml's layout and rounding:
// Q8_0 as quantize_row_q8_0_ref (d = amax/127, round half away from zero), Q4_0 as
// quantize_row_q4_0_ref (d = -max/8 with max the value of largest magnitude), Q8_K as
// quantize_row_q8_K_ref (d = max/-127, bsums), F16 / BF16 round to nearest even. Q4_K and Q6_K
// search each sub-block's scale (and min) for the least weighted squared error, then quantize the
// scales to 6 / 8 bits under an f16 super-block scale, as ggml's reference quantizers do; the
// search is kiln's own, so the codes may differ from ggml's in a few elements, never the layout.
// Errors: as DequantizeRow. REQUIRES: src holds n finite floats.
Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

// Dequantizes rows [first_row, first_row + n_rows) of a matrix of `cols` columns whose rows are
// `row_bytes` apart at `data` (an embedding lookup): out[i * cols + c] = element c of row
// first_row + i. Errors: InvalidArgument when the type cannot be dequantized, cols or n_rows or
// first_row is negative, cols is not a multiple of BlockElements(type), or row_bytes <
// RowBytes(type, cols). REQUIRES: the caller checked first_row + n_rows against the matrix's row
// count; out holds n_rows * cols floats.
Status DequantizeRows(GgmlType type, const void* data, size_t row_bytes, int64_t first_row,
                      int64_t n_rows, int64_t cols, float* out);

}  // namespace kiln::llm
