// SPDX-License-Identifier: Apache-2.0
#pragma once
// kiln's own FP32 matrix product C = epilogue(A x B) with a constant, pre-packed B: the fast path
// of MatMul / Gemm / FusedMatMul / FusedGemm whose B is a weight matrix, on CPUs where oneDNN has
// no brgemm matmul (without AVX-512; matmul.cc decides).
//
//   std::vector<float, ...> panels(GemmPackedElements(k, n));
//   GemmPackB(b, k, n, /*row_stride=*/n, /*col_stride=*/1, panels.data());   // once
//   GemmEpilogue e; e.bias = bias; e.act = act;
//   Gemm(m, a, /*a_row=*/k, /*a_col=*/1, GemmB{panels.data(), k, n}, c, /*ldc=*/n, e);
//
// NOTE on batch invariance. oneDNN's jit sgemm chooses its code path and how it splits the
// reduction over K (between threads) from M, N, K and the thread count, so a row's result changes
// with the number of rows it is computed with: a request's answer would depend on who else was in
// its batch. Here every element of C is the same sequence of FP32 operations whatever M is and
// however the work is split:
//   - K is walked in blocks whose length depends on K only (GemmKBlock), in order; within a block
//     each element is one chain of multiply-adds in k order (FMA on the AVX2 path, a multiply
//     then an add on the scalar path), continued from the previous block's partial sum;
//   - rows and columns never mix: A is taken 6 rows at a time (a last group with fewer rows runs
//     a narrower tile with the same per-element chain), B in panels of 16 columns (zero columns
//     past N), and padding columns are computed but never written out;
//   - threads split rows and columns only, never K.
// So C[i, :] depends only on A[i, :], B, the epilogue and the ISA level. The two levels round
// differently (FMA or not); each is invariant on its own.
//
// Blocking (Goto's): a task owns a block of rows and a run of B panels. A row-major A is read in
// place; a strided (transposed) one is packed once per task into 6-row panels, k-major. Per K
// block the 6x16 microkernel runs over every (panel of B, panel of A) pair, B's panel (K block x
// 16 floats) staying in L1 while A's rows stream from L2; partial sums live in a per-thread
// tile, and the epilogue (alpha, bias, addend, activation) runs once at the end.
//
// Thread safety: Gemm runs on the calling thread's OpenMP team (ParallelFor); concurrent calls
// from different threads are safe (per-thread scratch).

#include <cstdint>

#include "kernels/cpu/activation.h"

namespace kiln::cpu {

inline constexpr int64_t kGemmMr = 6;   // rows of a microkernel tile (A panel height)
inline constexpr int64_t kGemmNr = 16;  // columns of a microkernel tile (B panel width)

// Floats of B [K, N] packed: ceil(N / 16) panels of K x 16.
int64_t GemmPackedElements(int64_t k, int64_t n);

// Packs B, element (k, n) at b[k * row_stride + n * col_stride], into `out`
// (GemmPackedElements(k, n) floats; 64-byte alignment makes the microkernel's loads aligned).
void GemmPackB(const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride,
               float* out);

// The length of the K blocks for a reduction of length k: at most 256, equal lengths (the last
// one may be shorter by less than the number of blocks). A function of k alone.
int64_t GemmKBlock(int64_t k);

// A packed B: panels from GemmPackB of a [k, n] matrix.
struct GemmB {
  const float* panels = nullptr;
  int64_t k = 0, n = 0;
};

struct GemmEpilogue {
  float alpha = 1.0f;           // C = act(alpha * (A x B) + bias + addend)
  const float* bias = nullptr;  // N values added to every row, or null
  bool accumulate = false;      // addend = C's value before the call (prefilled), else 0
  Activation act;
};

// C[M, N] (rows `ldc` floats apart) = epilogue(A x B); A's element (i, k) at
// a[i * a_row + k * a_col]. REQUIRES: m >= 0, b.k >= 1, b.n >= 1. The AVX2+FMA microkernel runs
// when ActiveIsa() >= kAvx2, the scalar one otherwise.
void Gemm(int64_t m, const float* a, int64_t a_row, int64_t a_col, const GemmB& b, float* c,
          int64_t ldc, const GemmEpilogue& e);

// acc[6][16] (rows `acc_stride` floats apart) = (load ? acc : 0) + a x b over kc steps, where A's
// row i, step k is a[i * a_row + k * a_k] (a packed panel: a_row 1, a_k 6; rows of a row-major A
// used in place: a_row = its row stride, a_k 1) and b is kc x 16 (k-major, 64-byte aligned).
namespace scalar {
void GemmMicro6x16(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* b,
                   float* acc, int64_t acc_stride, bool load);
}  // namespace scalar
namespace avx2 {
void GemmMicro6x16(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* b,
                   float* acc, int64_t acc_stride, bool load);
// The same for a panel of A holding `rows` (1..6) valid rows against `panels` consecutive B
// panels (b_panel_stride floats apart; at most GemmPanelsPerTile(rows)): the rows x 16 * panels
// tile of acc, with the same FMA chain per element.
int GemmPanelsPerTile(int rows);
void GemmMicroTile(int rows, int panels, int64_t kc, const float* a, int64_t a_row, int64_t a_k,
                   const float* b, int64_t b_panel_stride, float* acc, int64_t acc_stride,
                   bool load);
}  // namespace avx2
inline constexpr int kGemmMrAvx512 = 12;  // rows of the AVX-512 level's tiles, at most
namespace avx512 {
// Where a tile's last K block goes: through the epilogue's linear terms into C (the activation
// runs afterwards, on whole rows), instead of back into acc.
struct TileOut {
  float* c = nullptr;  // C's element at the tile's first row and column
  int64_t ldc = 0;
  int64_t cols = 0;  // columns of C the tile covers (<= 16 * groups; fewer at N's edge)
  float alpha = 1.0f;
  const float* bias = nullptr;  // at the tile's first column, or null
  bool accumulate = false;
};
// Column groups (16 floats: one B panel) a tile of `rows` (1..12) rows takes at once.
int GemmGroupsPerTile(int rows);
// tile[rows][16 * groups] = (load ? acc : 0) + a x b over kc steps: A's row i, step k at
// a[i * a_row + k] (row-major, read in place), group j of B at b + j * b_panel_stride (kc x 16,
// k-major, 64-byte aligned); groups <= GemmGroupsPerTile(rows). One FMA chain per element in k
// order, the AVX2 tiles' chain. The tile goes to acc (rows acc_stride floats apart, 64-byte
// aligned) when out is null, else C[i][j] = alpha * tile[i][j] (+ bias[j]) (+ C[i][j]), in that
// order and rounding as the other levels' epilogue, for j < out->cols.
void GemmMicroTile(int rows, int groups, int64_t kc, const float* a, int64_t a_row, const float* b,
                   int64_t b_panel_stride, float* acc, int64_t acc_stride, bool load,
                   const TileOut* out);
}  // namespace avx512

}  // namespace kiln::cpu
