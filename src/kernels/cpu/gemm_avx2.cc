// SPDX-License-Identifier: Apache-2.0
// The AVX2+FMA microkernel of gemm.h: a 6 x 16 tile in 12 YMM accumulators, one FMA chain per
// element in k order. Built with -mavx2 -mfma; called only when ActiveIsa() >= kAvx2.

#include <immintrin.h>

#include <array>
#include <utility>

#include "kernels/cpu/gemm.h"

namespace kiln::cpu::avx2 {

void GemmMicro6x16(int64_t kc, const float* a, const float* b, float* acc, int64_t acc_stride,
                   bool load) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (load) {
    c00 = _mm256_load_ps(acc + 0 * acc_stride);
    c01 = _mm256_load_ps(acc + 0 * acc_stride + 8);
    c10 = _mm256_load_ps(acc + 1 * acc_stride);
    c11 = _mm256_load_ps(acc + 1 * acc_stride + 8);
    c20 = _mm256_load_ps(acc + 2 * acc_stride);
    c21 = _mm256_load_ps(acc + 2 * acc_stride + 8);
    c30 = _mm256_load_ps(acc + 3 * acc_stride);
    c31 = _mm256_load_ps(acc + 3 * acc_stride + 8);
    c40 = _mm256_load_ps(acc + 4 * acc_stride);
    c41 = _mm256_load_ps(acc + 4 * acc_stride + 8);
    c50 = _mm256_load_ps(acc + 5 * acc_stride);
    c51 = _mm256_load_ps(acc + 5 * acc_stride + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(x, b0, c40);
    c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(x, b0, c50);
    c51 = _mm256_fmadd_ps(x, b1, c51);
    a += kGemmMr;
    b += kGemmNr;
  }
  _mm256_store_ps(acc + 0 * acc_stride, c00);
  _mm256_store_ps(acc + 0 * acc_stride + 8, c01);
  _mm256_store_ps(acc + 1 * acc_stride, c10);
  _mm256_store_ps(acc + 1 * acc_stride + 8, c11);
  _mm256_store_ps(acc + 2 * acc_stride, c20);
  _mm256_store_ps(acc + 2 * acc_stride + 8, c21);
  _mm256_store_ps(acc + 3 * acc_stride, c30);
  _mm256_store_ps(acc + 3 * acc_stride + 8, c31);
  _mm256_store_ps(acc + 4 * acc_stride, c40);
  _mm256_store_ps(acc + 4 * acc_stride + 8, c41);
  _mm256_store_ps(acc + 5 * acc_stride, c50);
  _mm256_store_ps(acc + 5 * acc_stride + 8, c51);
}

namespace {

// rows x (16 * panels) tile: the same FMA chain per element as GemmMicro6x16, for the row panels
// that hold fewer than 6 rows (more B panels at once keep the FMA units busy).
template <int kRows, int kPanels>
void MicroTile(int64_t kc, const float* a, const float* b, int64_t b_panel_stride, float* acc,
               int64_t acc_stride, bool load) {
  __m256 c[kRows][2 * kPanels];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 2 * kPanels; ++j) {
      c[i][j] = load ? _mm256_load_ps(acc + i * acc_stride + j * 8) : _mm256_setzero_ps();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    if constexpr (kRows <= 2) {
      // Few rows: every B element is used once or twice, so the tile streams B; fetch ahead.
#pragma GCC unroll 6
      for (int p = 0; p < kPanels; ++p) {
        _mm_prefetch(reinterpret_cast<const char*>(b + p * b_panel_stride + (k + 16) * kGemmNr),
                     _MM_HINT_T0);
      }
    }
    __m256 bv[2 * kPanels];
#pragma GCC unroll 12
    for (int j = 0; j < 2 * kPanels; ++j) {
      bv[j] = _mm256_load_ps(b + (j / 2) * b_panel_stride + k * kGemmNr + (j % 2) * 8);
    }
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + k * kGemmMr + i);
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

using Tile = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, bool);

template <int kRows, int... kP>
constexpr std::array<Tile, sizeof...(kP)> Row(std::integer_sequence<int, kP...>) {
  return {&MicroTile<kRows, kP + 1>...};
}

}  // namespace

int GemmPanelsPerTile(int rows) { return rows <= 1 ? 6 : rows == 2 ? 3 : rows == 3 ? 2 : 1; }

void GemmMicroTile(int rows, int panels, int64_t kc, const float* a, const float* b,
                   int64_t b_panel_stride, float* acc, int64_t acc_stride, bool load) {
  static constexpr auto r1 = Row<1>(std::make_integer_sequence<int, 6>());
  static constexpr auto r2 = Row<2>(std::make_integer_sequence<int, 3>());
  static constexpr auto r3 = Row<3>(std::make_integer_sequence<int, 2>());
  static constexpr auto r4 = Row<4>(std::make_integer_sequence<int, 1>());
  static constexpr auto r5 = Row<5>(std::make_integer_sequence<int, 1>());
  if (rows == 6) {
    GemmMicro6x16(kc, a, b, acc, acc_stride, load);
    return;
  }
  const Tile* row = rows == 1 ? r1.data() : rows == 2 ? r2.data() : rows == 3 ? r3.data()
                    : rows == 4 ? r4.data() : r5.data();
  row[panels - 1](kc, a, b, b_panel_stride, acc, acc_stride, load);
}

}  // namespace kiln::cpu::avx2
