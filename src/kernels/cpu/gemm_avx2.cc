// SPDX-License-Identifier: Apache-2.0
// The AVX2+FMA microkernels of gemm.h: a 6 x 16 tile in 12 YMM accumulators, one FMA chain per
// element in k order, and the narrower-row tiles. Built with -mavx2 -mfma; called only when
// ActiveIsa() >= kAvx2.

#include <immintrin.h>

#include <array>
#include <utility>

#include "kernels/cpu/gemm.h"

namespace kiln::cpu::avx2 {

namespace {

// rows x (16 * panels) tile of acc: one FMA chain per element in k order. 6 x 1 is the main
// microkernel (12 accumulators); row panels with fewer rows take more B panels at once, which
// keeps as many independent chains going.
template <int kRows, int kPanels>
void MicroTile(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* b,
               int64_t b_panel_stride, float* acc, int64_t acc_stride, bool load) {
  __m256 c[kRows][2 * kPanels];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 2 * kPanels; ++j) {
      c[i][j] = load ? _mm256_load_ps(acc + i * acc_stride + j * 8) : _mm256_setzero_ps();
    }
  }
  const float* rows[kRows];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) rows[i] = a + i * a_row;
  for (int64_t k = 0; k < kc; ++k) {
    __m256 bv[2 * kPanels];
#pragma GCC unroll 12
    for (int j = 0; j < 2 * kPanels; ++j) {
      bv[j] = _mm256_load_ps(b + (j / 2) * b_panel_stride + k * kGemmNr + (j % 2) * 8);
    }
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      const __m256 x = _mm256_broadcast_ss(rows[i] + k * a_k);
#pragma GCC unroll 12
      for (int j = 0; j < 2 * kPanels; ++j) c[i][j] = _mm256_fmadd_ps(x, bv[j], c[i][j]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 2 * kPanels; ++j) _mm256_store_ps(acc + i * acc_stride + j * 8, c[i][j]);
  }
}

using Tile = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*,
                      int64_t, bool);

template <int kRows, int... kP>
constexpr std::array<Tile, sizeof...(kP)> Row(std::integer_sequence<int, kP...>) {
  return {&MicroTile<kRows, kP + 1>...};
}

}  // namespace

void GemmMicro6x16(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* b,
                   float* acc, int64_t acc_stride, bool load) {
  MicroTile<6, 1>(kc, a, a_row, a_k, b, 0, acc, acc_stride, load);
}

int GemmPanelsPerTile(int rows) { return rows <= 1 ? 6 : rows == 2 ? 3 : rows == 3 ? 2 : 1; }

void GemmMicroTile(int rows, int panels, int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                   const float* b, int64_t b_panel_stride, float* acc, int64_t acc_stride,
                   bool load) {
  static constexpr auto r1 = Row<1>(std::make_integer_sequence<int, 6>());
  static constexpr auto r2 = Row<2>(std::make_integer_sequence<int, 3>());
  static constexpr auto r3 = Row<3>(std::make_integer_sequence<int, 2>());
  static constexpr auto r4 = Row<4>(std::make_integer_sequence<int, 1>());
  static constexpr auto r5 = Row<5>(std::make_integer_sequence<int, 1>());
  if (rows == 6) {
    GemmMicro6x16(kc, a, a_row, a_k, b, acc, acc_stride, load);
    return;
  }
  const Tile* row = rows == 1   ? r1.data()
                    : rows == 2 ? r2.data()
                    : rows == 3 ? r3.data()
                    : rows == 4 ? r4.data()
                                : r5.data();
  row[panels - 1](kc, a, a_row, a_k, b, b_panel_stride, acc, acc_stride, load);
}

}  // namespace kiln::cpu::avx2
