// SPDX-License-Identifier: Apache-2.0
// The AVX512_VNNI build of the Q4_0 / Q8_0 tile kernels, in ggml's layout and packed
// (quant_kernels_avx512.h, vpdpbusd);
// built with the AVX-512 flags plus -mavx512vnni and called only when the CPU reports
// avx512vnni (llm_matmul.cc). Types without a VNNI kernel answer nullptr.

#include "llm/quant_kernels_avx512.h"

namespace kiln::llm::qk::avx512vnni {

TileFn Tile(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TileQ0Avx512</*kVnni=*/true, /*kQ8=*/false>;
    case GgmlType::kQ8_0:
      return TileQ0Avx512</*kVnni=*/true, /*kQ8=*/true>;
    case GgmlType::kQ4_K:
      return TileQ4KAvx512</*kVnni=*/true>;
    case GgmlType::kQ6_K:
      return TileQ6KAvx512</*kVnni=*/true>;
    default:
      return nullptr;
  }
}

TileFn TilePacked(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TileQ0Avx512</*kVnni=*/true, /*kQ8=*/false, /*kPacked=*/true>;
    case GgmlType::kQ8_0:
      return TileQ0Avx512</*kVnni=*/true, /*kQ8=*/true, /*kPacked=*/true>;
    default:
      return nullptr;
  }
}

TileFn TileWholeBlocks(GgmlType type, bool packed) {
  switch (type) {
    case GgmlType::kQ4_0:
      return packed ? TileQ0Avx512</*kVnni=*/true, /*kQ8=*/false, /*kPacked=*/true, /*kWhole=*/true>
                    : TileQ0Avx512<true, false, false, true>;
    case GgmlType::kQ8_0:
      return packed ? TileQ0Avx512</*kVnni=*/true, /*kQ8=*/true, /*kPacked=*/true, /*kWhole=*/true>
                    : TileQ0Avx512<true, true, false, true>;
    default:
      return nullptr;
  }
}

}  // namespace kiln::llm::qk::avx512vnni
