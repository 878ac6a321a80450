// SPDX-License-Identifier: Apache-2.0
#pragma once
// The tensor element types of GGUF files (ggml's `enum ggml_type`, numbered as ggml numbers
// them, since GGUF stores the number) and their block geometry. A row of `n` elements of a
// block-quantized type is n / BlockElements(t) blocks of BlockBytes(t) bytes each; n must be a
// multiple of BlockElements(t). F32, F16 and BF16 are "blocks" of one element.
//
// kiln reads F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K weights (GgmlTypeSupported); Q8_K is the
// activation type of the K-quant dot products. The others are named so that an error can say
// which type a file holds.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::llm {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

// Elements per block: 1 for F32/F16/BF16, 32 for Q4_0/Q8_0, 256 (QK_K) for the K-quants.
// 0 for a type kiln has no geometry for.
constexpr int64_t BlockElements(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kI8:
    case GgmlType::kI16:
    case GgmlType::kI32:
    case GgmlType::kI64:
    case GgmlType::kF64:
      return 1;
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kQ8_1:
    case GgmlType::kIQ4_NL:
      return 32;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ8_K:
    case GgmlType::kIQ2_XXS:
    case GgmlType::kIQ2_XS:
    case GgmlType::kIQ3_XXS:
    case GgmlType::kIQ1_S:
    case GgmlType::kIQ3_S:
    case GgmlType::kIQ2_S:
    case GgmlType::kIQ4_XS:
    case GgmlType::kIQ1_M:
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
      return 256;
  }
  return 0;
}

// Bytes per block (ggml's type_size); 0 for a type kiln has no geometry for.
constexpr size_t BlockBytes(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return 4;
    case GgmlType::kF16:
      return 2;
    case GgmlType::kBF16:
      return 2;
    case GgmlType::kI8:
      return 1;
    case GgmlType::kI16:
      return 2;
    case GgmlType::kI32:
      return 4;
    case GgmlType::kI64:
      return 8;
    case GgmlType::kF64:
      return 8;
    case GgmlType::kQ4_0:
      return 2 + 16;  // d (f16), 32 nibbles
    case GgmlType::kQ4_1:
      return 2 + 2 + 16;  // d, m, 32 nibbles
    case GgmlType::kQ5_0:
      return 2 + 4 + 16;  // d, qh, qs
    case GgmlType::kQ5_1:
      return 2 + 2 + 4 + 16;
    case GgmlType::kQ8_0:
      return 2 + 32;  // d (f16), 32 int8
    case GgmlType::kQ8_1:
      return 4 + 32;  // d, s (f16 each), 32 int8
    case GgmlType::kQ2_K:
      return 256 / 16 + 256 / 4 + 2 + 2;
    case GgmlType::kQ3_K:
      return 256 / 8 + 256 / 4 + 12 + 2;
    case GgmlType::kQ4_K:
      return 2 + 2 + 12 + 256 / 2;  // d, dmin, scales, qs
    case GgmlType::kQ5_K:
      return 2 + 2 + 12 + 256 / 8 + 256 / 2;
    case GgmlType::kQ6_K:
      return 256 / 2 + 256 / 4 + 256 / 16 + 2;  // ql, qh, scales, d
    case GgmlType::kQ8_K:
      return 4 + 256 + 256 / 16 * 2;  // d (f32), qs, bsums
    // Types kiln does not compute, sized so that a file holding them parses (ggml-common.h).
    case GgmlType::kIQ2_XXS:
      return 2 + 256 / 8 * 2;  // d, qs (u16)
    case GgmlType::kIQ2_XS:
      return 2 + 256 / 8 * 2 + 256 / 32;  // d, qs (u16), scales
    case GgmlType::kIQ3_XXS:
      return 2 + 3 * 256 / 8;  // d, qs
    case GgmlType::kIQ1_S:
      return 2 + 256 / 8 + 256 / 32 * 2;  // d, qs, qh (u16)
    case GgmlType::kIQ4_NL:
      return 2 + 32 / 2;  // d, qs
    case GgmlType::kIQ3_S:
      return 2 + 256 / 4 + 256 / 32 + 256 / 8 + 256 / 64;
    case GgmlType::kIQ2_S:
      return 2 + 256 / 4 + 256 / 32 + 256 / 32;  // d, qs, qh, scales
    case GgmlType::kIQ4_XS:
      return 2 + 2 + 256 / 64 + 256 / 2;  // d, scales_h, _l, qs
    case GgmlType::kIQ1_M:
      return 256 / 8 + 256 / 16 + 256 / 32;  // qs, qh, scales
    case GgmlType::kTQ1_0:
      return (256 - 4 * 256 / 64) / 5 + 256 / 64 + 2;  // qs, qh, d
    case GgmlType::kTQ2_0:
      return 256 / 4 + 2;  // qs, d
    default:
      return 0;
  }
}

// The bytes of a row of `n` elements. REQUIRES: n % BlockElements(t) == 0 and BlockElements(t)
// > 0.
constexpr size_t RowBytes(GgmlType t, int64_t n) {
  return static_cast<size_t>(n / BlockElements(t)) * BlockBytes(t);
}

// Whether kiln reads weights of this type: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K.
constexpr bool GgmlTypeSupported(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// ggml's name of the type ("f32", "q4_0", "q6_K", ...), or "type N" for an unknown number is
// left to the caller: returns "" then.
std::string_view GgmlTypeName(GgmlType t);

}  // namespace kiln::llm
