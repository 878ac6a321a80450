// SPDX-License-Identifier: Apache-2.0
// The AVX-512 microkernels of gemm.h: tiles of up to 12 rows x 32 columns (24 ZMM accumulators,
// two loads of B and one broadcast of A per row and k step), and shorter tiles that take more
// columns at once. Every element is one FMA chain in k order, as at the AVX2 level, so the two
// levels give the same bits. Built with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma
// -ffp-contract=off (the epilogue's multiply and adds stay apart); called only when
// ActiveIsa() >= kAvx512.

#include <immintrin.h>

#include <array>
#include <utility>

#include "kernels/cpu/gemm.h"

namespace kiln::cpu::avx512 {

namespace {

// Column groups (16 floats, one ZMM each) for a tile of `rows` rows: about 24 accumulators, so
// that short tiles keep as many independent FMA chains going as the 12 x 32 one; at least 8
// (two FMA pipes x a 4-cycle latency).
constexpr int GroupsFor(int rows) {
  return rows >= 9 ? 2 : rows >= 7 ? 3 : rows >= 5 ? 4 : rows == 4 ? 6 : 8;
}

// rows x (16 * groups) tile of acc: one FMA chain per element in k order, continued from acc
// (load) or from zero. A row-major (row i, step k at a[i * a_row + k]); group j of B at
// b + j * b_panel_stride, 16 floats per k step.
// C[i][j] = alpha * t[i][j] (+ bias[j]) (+ C[i][j]) for the tile's valid columns: separate
// multiplies and adds (this file is built with -ffp-contract=off), so each rounds as in the
// epilogue of the other levels.
template <int kRows, int kGroups>
void StoreOut(const __m512 (&t)[kRows][kGroups], const TileOut& out) {
  const __m512 alpha = _mm512_set1_ps(out.alpha);
#pragma GCC unroll 8
  for (int j = 0; j < kGroups; ++j) {
    const int64_t left = out.cols - j * kGemmNr;
    if (left <= 0) break;
    const __mmask16 mask =
        left >= kGemmNr ? __mmask16{0xffff} : static_cast<__mmask16>((1u << left) - 1);
    const __m512 bias = out.bias != nullptr ? _mm512_maskz_loadu_ps(mask, out.bias + j * kGemmNr)
                                            : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      float* dst = out.c + i * out.ldc + j * kGemmNr;
      __m512 y = out.alpha != 1.0f ? _mm512_mul_ps(t[i][j], alpha) : t[i][j];
      if (out.bias != nullptr) y = _mm512_add_ps(y, bias);
      if (out.accumulate) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, dst));
      _mm512_mask_storeu_ps(dst, mask, y);
    }
  }
}

template <int kRows, int kGroups>
void MicroTile(int64_t kc, const float* a, int64_t a_row, const float* b, int64_t b_panel_stride,
               float* acc, int64_t acc_stride, bool load, const TileOut* out) {
  __m512 c[kRows][kGroups];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < kGroups; ++j) {
      c[i][j] = load ? _mm512_load_ps(acc + i * acc_stride + j * kGemmNr) : _mm512_setzero_ps();
    }
  }
  const float* bj[kGroups];
#pragma GCC unroll 8
  for (int j = 0; j < kGroups; ++j) bj[j] = b + j * b_panel_stride;
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[kGroups];
#pragma GCC unroll 8
    for (int j = 0; j < kGroups; ++j) bv[j] = _mm512_load_ps(bj[j] + k * kGemmNr);
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * a_row + k]);
#pragma GCC unroll 8
      for (int j = 0; j < kGroups; ++j) c[i][j] = _mm512_fmadd_ps(x, bv[j], c[i][j]);
    }
  }
  if (out != nullptr) {
    StoreOut<kRows, kGroups>(c, *out);
    return;
  }
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < kGroups; ++j) _mm512_store_ps(acc + i * acc_stride + j * kGemmNr, c[i][j]);
  }
}

using Tile = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool,
                      const TileOut*);

template <int kRows, int... kG>
constexpr std::array<Tile, sizeof...(kG)> Row(std::integer_sequence<int, kG...>) {
  return {&MicroTile<kRows, kG + 1>...};
}

template <int kRows>
struct RowTiles {
  static constexpr auto tiles = Row<kRows>(std::make_integer_sequence<int, GroupsFor(kRows)>());
};

}  // namespace

int GemmGroupsPerTile(int rows) { return GroupsFor(rows); }

void GemmMicroTile(int rows, int groups, int64_t kc, const float* a, int64_t a_row, const float* b,
                   int64_t b_panel_stride, float* acc, int64_t acc_stride, bool load,
                   const TileOut* out) {
  static constexpr std::array<const Tile*, kGemmMrAvx512> rows_table = {
      RowTiles<1>::tiles.data(),  RowTiles<2>::tiles.data(),  RowTiles<3>::tiles.data(),
      RowTiles<4>::tiles.data(),  RowTiles<5>::tiles.data(),  RowTiles<6>::tiles.data(),
      RowTiles<7>::tiles.data(),  RowTiles<8>::tiles.data(),  RowTiles<9>::tiles.data(),
      RowTiles<10>::tiles.data(), RowTiles<11>::tiles.data(), RowTiles<12>::tiles.data()};
  rows_table[rows - 1][groups - 1](kc, a, a_row, b, b_panel_stride, acc, acc_stride, load, out);
}

}  // namespace kiln::cpu::avx512
