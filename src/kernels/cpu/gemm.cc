// SPDX-License-Identifier: Apache-2.0
// The driver of kiln's FP32 matrix product (gemm.h): packing, tasks, the epilogue, and the
// scalar microkernel.

#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace scalar {

void GemmMicro6x16(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* b,
                   float* acc, int64_t acc_stride, bool load) {
  float t[kGemmMr][kGemmNr];
  for (int64_t i = 0; i < kGemmMr; ++i) {
    for (int64_t j = 0; j < kGemmNr; ++j) t[i][j] = load ? acc[i * acc_stride + j] : 0.0f;
  }
  for (int64_t k = 0; k < kc; ++k) {
    for (int64_t i = 0; i < kGemmMr; ++i) {
      const float x = a[i * a_row + k * a_k];
      for (int64_t j = 0; j < kGemmNr; ++j) t[i][j] += x * b[k * kGemmNr + j];
    }
  }
  for (int64_t i = 0; i < kGemmMr; ++i) {
    for (int64_t j = 0; j < kGemmNr; ++j) acc[i * acc_stride + j] = t[i][j];
  }
}

}  // namespace scalar

namespace {

constexpr int64_t kMaxKBlock = 256;
// Rows per task at most: 32 A panels (the packed block, 192 x K block floats, stays in L2).
constexpr int64_t kRowBlock = 32 * kGemmMr;
// B panels a task computes at once (its partial sums, rows x 256 floats, stay in L2 beside A).
constexpr int64_t kMaxPanelsPerBlock = 16;
// Below this many multiply-adds one task does everything (waking the team costs more).
constexpr double kSerialMacs = 64.0 * 1024.0;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows [i0, i0 + rows) x columns [k0, k0 + kc) of A into 6-row panels, k-major within a panel
// (panel p, step k, row r at out[(p * kc + k) * 6 + r]); rows past `rows` are zero.
void PackA(const float* a, int64_t a_row, int64_t a_col, int64_t i0, int64_t rows, int64_t k0,
           int64_t kc, float* out) {
  const int64_t panels = CeilDiv(rows, kGemmMr);
  for (int64_t p = 0; p < panels; ++p) {
    float* dst = out + p * kc * kGemmMr;
    const int64_t r_end = std::min<int64_t>(kGemmMr, rows - p * kGemmMr);
    if (r_end == kGemmMr && a_col == 1) {
      const float* s0 = a + (i0 + p * kGemmMr) * a_row + k0;
      const float *s1 = s0 + a_row, *s2 = s1 + a_row, *s3 = s2 + a_row, *s4 = s3 + a_row,
                  *s5 = s4 + a_row;
      for (int64_t k = 0; k < kc; ++k, dst += kGemmMr) {
        dst[0] = s0[k];
        dst[1] = s1[k];
        dst[2] = s2[k];
        dst[3] = s3[k];
        dst[4] = s4[k];
        dst[5] = s5[k];
      }
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t r = 0; r < kGemmMr; ++r) {
        dst[k * kGemmMr + r] =
            r < r_end ? a[(i0 + p * kGemmMr + r) * a_row + (k0 + k) * a_col] : 0.0f;
      }
    }
  }
}

}  // namespace

int64_t GemmPackedElements(int64_t k, int64_t n) { return CeilDiv(n, kGemmNr) * k * kGemmNr; }

void GemmPackB(const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride,
               float* out) {
  const int64_t panels = CeilDiv(n, kGemmNr);
  ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      float* dst = out + p * k * kGemmNr;
      const int64_t j_end = std::min<int64_t>(kGemmNr, n - p * kGemmNr);
      for (int64_t kk = 0; kk < k; ++kk) {
        for (int64_t j = 0; j < kGemmNr; ++j) {
          dst[kk * kGemmNr + j] =
              j < j_end ? b[kk * row_stride + (p * kGemmNr + j) * col_stride] : 0.0f;
        }
      }
    }
  });
}

int64_t GemmKBlock(int64_t k) {
  const int64_t blocks = CeilDiv(k, kMaxKBlock);
  return CeilDiv(k, blocks);
}

void Gemm(int64_t m, const float* a, int64_t a_row, int64_t a_col, const GemmB& b, float* c,
          int64_t ldc, const GemmEpilogue& e) {
  if (m <= 0) return;
  const int64_t n = b.n, k = b.k;
  const int64_t panels = CeilDiv(n, kGemmNr);
  const int64_t kc = GemmKBlock(k);
  const Isa isa = ActiveIsa();
  const bool use_avx512 = isa >= Isa::kAvx512;
  const bool use_avx2 = isa >= Isa::kAvx2;
  // Row granularity of the blocks: the level's tile height.
  const int64_t mr = use_avx512 ? kGemmMrAvx512 : kGemmMr;

  // Tasks: row blocks x runs of B panels, cut as evenly as 6-row and 16-column granularity
  // allows, and one run of B's panels per thread when B is the larger operand (each thread then
  // streams only its share of B; A is read by all), else one run of rows per thread. Fewer,
  // larger tasks stream B better than many small ones. How they are cut never changes an
  // element's arithmetic.
  const int threads = ParallelThreads();
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool serial = macs < kSerialMacs || threads <= 1;
  const bool split_columns = !serial && m <= n;
  const int64_t row_panels = CeilDiv(m, mr);
  int64_t row_blocks = CeilDiv(m, kRowBlock);
  int64_t panel_runs = 1;
  if (split_columns) {
    panel_runs = std::min<int64_t>(panels, threads);
  } else if (!serial) {
    row_blocks = std::min(row_panels, CeilDiv(row_blocks, int64_t{threads}) * threads);
    if (row_blocks < threads) panel_runs = std::min(panels, CeilDiv(int64_t{threads}, row_blocks));
  }
  // Rows per block: a multiple of the tile height, blocks as equal as that allows.
  const int64_t block_rows = CeilDiv(CeilDiv(m, row_blocks), mr) * mr;
  row_blocks = CeilDiv(m, block_rows);
  const int64_t per_task = CeilDiv(panels, panel_runs);
  panel_runs = CeilDiv(panels, per_task);
  const int64_t tasks = row_blocks * panel_runs;

  // A task's rows of A: row r, step k at base[r * row + k * step].
  struct AView {
    const float* base;
    int64_t row, step;
  };
  // The AVX-512 level's block. Per K block, each tile of rows (its A rows, a K block of 12 rows
  // at most: 12 KiB, stay in L1) runs across the block's B panels (np x K block x 16 floats, at
  // most 256 KiB, stay in L2): B streams from L2 in one sequential run per panel, where A read
  // in place would stream as 12 rows. The last K block's tiles write C through the epilogue's
  // linear terms, and the activation follows on the tile's rows.
  auto run_block_avx512 = [&](AView av, int64_t i0, int64_t rows, int64_t p0, int64_t np) {
    const int64_t stride = np * kGemmNr;  // acc row stride, floats (a multiple of 16)
    float* acc = nullptr;                 // partial sums between K blocks
    if (k > kc) {
      acc = static_cast<float*>(
          ThreadScratch(ScratchSlot::kGemmAcc, static_cast<size_t>(rows * stride) * 4));
    }
    // Tiles of as equal heights as `rows` allows, at most 12 (each row's arithmetic is the same
    // in any of them); a chunk of B panels as wide as the tallest tile takes.
    const int64_t tiles = CeilDiv(rows, kGemmMrAvx512);
    const int64_t h = rows / tiles, taller = rows % tiles;  // the first `taller` have h + 1
    const int group = avx512::GemmGroupsPerTile(static_cast<int>(h + (taller > 0)));
    const int64_t j0 = p0 * kGemmNr;
    const int64_t cols = std::min(n, (p0 + np) * kGemmNr) - j0;
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
      const int64_t kk = std::min(kc, k - k0);
      const bool last = k0 + kk == k;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t r0 = t * h + std::min(t, taller);
        const int th = static_cast<int>(h + (t < taller));
        for (int64_t p = 0; p < np; p += group) {
          const int g = static_cast<int>(std::min<int64_t>(group, np - p));
          const float* bp = b.panels + (p0 + p) * k * kGemmNr + k0 * kGemmNr;
          avx512::TileOut out;
          if (last) {
            out.c = c + (i0 + r0) * ldc + j0 + p * kGemmNr;
            out.ldc = ldc;
            out.cols = std::min<int64_t>(g * kGemmNr, cols - p * kGemmNr);
            out.alpha = e.alpha;
            out.bias = e.bias != nullptr ? e.bias + j0 + p * kGemmNr : nullptr;
            out.accumulate = e.accumulate;
          }
          float* tile_acc = acc != nullptr ? acc + r0 * stride + p * kGemmNr : nullptr;
          avx512::GemmMicroTile(th, g, kk, av.base + r0 * av.row + k0, av.row, bp, k * kGemmNr,
                                tile_acc, stride, k0 > 0, last ? &out : nullptr);
        }
        if (last && e.act.kind != ActivationKind::kNone) {  // the tile's rows, still in cache
          for (int64_t r = r0; r < r0 + th; ++r) {
            ApplyActivationInPlace(e.act, c + (i0 + r) * ldc + j0, cols);
          }
        }
      }
    }
  };
  // Rows [i0, i0 + rows) x panels [p0, p0 + np) of C, np <= kMaxPanelsPerBlock, reading those
  // rows of A through `av` (row r, step k at av.base[r * av.row + k * av.step]).
  auto run_block = [&](AView av, int64_t i0, int64_t rows, int64_t p0, int64_t np) {
    if (use_avx512) {
      run_block_avx512(av, i0, rows, p0, np);
      return;
    }
    const int64_t a_panels = CeilDiv(rows, kGemmMr);
    const int64_t stride = np * kGemmNr;  // acc row stride, floats (a multiple of 16)
    auto* acc = static_cast<float*>(
        ThreadScratch(ScratchSlot::kGemmAcc, static_cast<size_t>(a_panels * kGemmMr * stride) * 4));
    // Packed A: panels of 6 rows, K steps each (row 1 apart within a step, 6 between steps).
    const int64_t a_panel = av.step == kGemmMr ? k * kGemmMr : kGemmMr * av.row;
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
      const int64_t kk = std::min(kc, k - k0);
      const float* a0 = av.base + k0 * av.step;
      if (!use_avx2) {
        for (int64_t p = 0; p < np; ++p) {
          const float* bp = b.panels + (p0 + p) * k * kGemmNr + k0 * kGemmNr;
          for (int64_t ap = 0; ap < a_panels; ++ap) {
            scalar::GemmMicro6x16(kk, a0 + ap * a_panel, av.row, av.step, bp,
                                  acc + ap * kGemmMr * stride + p * kGemmNr, stride, k0 > 0);
          }
        }
        continue;
      }
      // Full row panels take one B panel at a time (B's panel stays in L1 across them); a last
      // panel with fewer rows takes several B panels at once.
      const int64_t full = rows / kGemmMr;
      const int tail_rows = static_cast<int>(rows - full * kGemmMr);
      for (int64_t p = 0; p < np; ++p) {
        const float* bp = b.panels + (p0 + p) * k * kGemmNr + k0 * kGemmNr;
        for (int64_t ap = 0; ap < full; ++ap) {
          avx2::GemmMicro6x16(kk, a0 + ap * a_panel, av.row, av.step, bp,
                              acc + ap * kGemmMr * stride + p * kGemmNr, stride, k0 > 0);
        }
      }
      if (tail_rows > 0) {
        const int group = avx2::GemmPanelsPerTile(tail_rows);
        for (int64_t p = 0; p < np; p += group) {
          const int g = static_cast<int>(std::min<int64_t>(group, np - p));
          avx2::GemmMicroTile(tail_rows, g, kk, a0 + full * a_panel, av.row, av.step,
                              b.panels + (p0 + p) * k * kGemmNr + k0 * kGemmNr, k * kGemmNr,
                              acc + full * kGemmMr * stride + p * kGemmNr, stride, k0 > 0);
        }
      }
    }
    // Epilogue: the valid rows and columns of the tile into C.
    const int64_t j0 = p0 * kGemmNr;
    const int64_t cols = std::min(n, (p0 + np) * kGemmNr) - j0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = acc + r * stride;
      float* dst = c + (i0 + r) * ldc + j0;
      for (int64_t j = 0; j < cols; ++j) {
        float y = e.alpha * src[j];
        if (e.bias != nullptr) y += e.bias[j0 + j];
        if (e.accumulate) y += dst[j];
        dst[j] = y;
      }
      if (e.act.kind != ActivationKind::kNone) ApplyActivationInPlace(e.act, dst, cols);
    }
  };
  // Task order: consecutive tasks (one thread's share under static scheduling) run along the
  // split dimension's other axis, so a thread keeps its columns (or its rows).
  auto run_task = [&](int64_t t) {
    const int64_t rb = split_columns ? t % row_blocks : t / panel_runs;
    const int64_t run = split_columns ? t / row_blocks : t % panel_runs;
    const int64_t i0 = rb * block_rows;
    const int64_t rows = std::min(block_rows, m - i0);
    const int64_t p0 = run * per_task;
    const int64_t p_end = std::min(panels, p0 + per_task);
    // A row-major A is read in place by the AVX2 tiles (each reads only its valid rows); the
    // scalar 6x16 kernel, or a strided A, reads the task's rows packed once (zero rows past M).
    AView av{a + i0 * a_row, a_row, 1};
    if (use_avx512 && a_col != 1) {
      // The AVX-512 tiles read rows of a row-major A: a strided one is copied to one.
      auto* arows = static_cast<float*>(
          ThreadScratch(ScratchSlot::kGemmA, static_cast<size_t>(rows * k) * 4));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t kk = 0; kk < k; ++kk) arows[r * k + kk] = a[(i0 + r) * a_row + kk * a_col];
      }
      av = AView{arows, k, 1};
    } else if (!use_avx2 || a_col != 1) {
      auto* apack = static_cast<float*>(ThreadScratch(
          ScratchSlot::kGemmA, static_cast<size_t>(CeilDiv(rows, kGemmMr) * kGemmMr * k) * 4));
      PackA(a, a_row, a_col, i0, rows, 0, k, apack);
      av = AView{apack, 1, kGemmMr};
    }
    for (int64_t p = p0; p < p_end; p += kMaxPanelsPerBlock) {
      run_block(av, i0, rows, p, std::min(kMaxPanelsPerBlock, p_end - p));
    }
  };
  if (tasks == 1 || serial) {
    for (int64_t t = 0; t < tasks; ++t) run_task(t);
    return;
  }
  // Static assignment: with one task per thread, a thread that starts early must not take a
  // late one's task.
  ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) run_task(t);
  });
}

}  // namespace kiln::cpu
