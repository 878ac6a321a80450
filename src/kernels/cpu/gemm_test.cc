// SPDX-License-Identifier: Apache-2.0
// kiln's FP32 GEMM (gemm.h) against a double-precision product, at every ISA level: edge sizes
// around the 6 x 16 tile and the K blocks, strided (transposed) A, every epilogue term; and its
// batch invariance: a row's result is bitwise the same whatever the number of rows computed with
// it, where it sits among them, and how many threads share the call. Also the same invariance for
// the MatMul / FusedGemm kernels as the registry picks them (oneDNN's brgemm on AVX-512, this GEMM
// elsewhere), which is what makes a batched request's answer equal its answer alone.

#include "kernels/cpu/gemm.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_test_util.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Packed {
  explicit Packed(const std::vector<float>& b, int64_t k, int64_t n, bool trans = false)
      : k(k), n(n) {
    const size_t bytes = static_cast<size_t>(GemmPackedElements(k, n)) * 4;
    data.reset(static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    // trans: b holds B^T [n, k].
    GemmPackB(b.data(), k, n, trans ? 1 : n, trans ? k : 1, data.get());
  }
  GemmB view() const { return GemmB{data.get(), k, n}; }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  int64_t k, n;
};

// C = act(alpha * A B + bias + c0) in double (the activation by the scalar ApplyActivation,
// which computes in double too).
std::vector<double> Reference(int64_t m, int64_t k, int64_t n, const std::vector<float>& a,
                              bool trans_a, const std::vector<float>& b, const GemmEpilogue& e,
                              const std::vector<float>& c0) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t) {
        const double av =
            trans_a ? a[static_cast<size_t>(t * m + i)] : a[static_cast<size_t>(i * k + t)];
        acc += av * b[static_cast<size_t>(t * n + j)];
      }
      double y = e.alpha * acc;
      if (e.bias != nullptr) y += e.bias[j];
      if (e.accumulate) y += c0[static_cast<size_t>(i * n + j)];
      if (e.act.kind == ActivationKind::kRelu) {
        y = std::max(y, 0.0);
      } else if (e.act.kind != ActivationKind::kNone) {
        y = ApplyActivation(e.act, static_cast<float>(y));
      }
      c[static_cast<size_t>(i * n + j)] = y;
    }
  }
  return c;
}

TEST(GemmTest, KBlocksDependOnKOnlyAndCoverIt) {
  for (int64_t k : {1, 2, 255, 256, 257, 511, 512, 513, 768, 1000, 3072, 4097}) {
    const int64_t kc = GemmKBlock(k);
    EXPECT_GE(kc, 1);
    EXPECT_LE(kc, 256) << k;
    const int64_t blocks = (k + kc - 1) / kc;
    EXPECT_EQ(blocks, (k + 255) / 256) << k;   // as few blocks as 256 allows
    EXPECT_GT(k - (blocks - 1) * kc, 0) << k;  // the last block is not empty
  }
}

TEST(GemmTest, MatchesDoublePrecisionAtEveryIsaLevel) {
  std::mt19937 rng(7);
  struct Case {
    int64_t m, k, n;
  };
  const std::vector<Case> cases = {{1, 1, 1},    {1, 7, 15},       {2, 16, 16},    {3, 33, 17},
                                   {5, 64, 31},  {6, 255, 32},     {7, 256, 33},   {13, 257, 48},
                                   {64, 700, 7}, {100, 1031, 100}, {200, 96, 130}, {1, 1280, 100}};
  for (Isa isa : IsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (const Case& c : cases) {
      for (int variant = 0; variant < 4; ++variant) {
        const bool trans_a = variant == 1;
        const std::vector<float> a = Random(c.m * c.k, rng), b = Random(c.k * c.n, rng);
        const std::vector<float> bias = Random(c.n, rng), c0 = Random(c.m * c.n, rng);
        GemmEpilogue e;
        if (variant == 2) {
          e.alpha = 0.5f;
          e.bias = bias.data();
        }
        if (variant == 3) {
          e.accumulate = true;
          e.act.kind = ActivationKind::kRelu;
        }
        const Packed p(b, c.k, c.n);
        std::vector<float> got = c0;
        Gemm(c.m, a.data(), trans_a ? 1 : c.k, trans_a ? c.m : 1, p.view(), got.data(), c.n, e);
        const std::vector<double> want = Reference(c.m, c.k, c.n, a, trans_a, b, e, c0);
        const double tol = 1e-6 * (4.0 + std::sqrt(static_cast<double>(c.k)));
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << fmt::format(
              "{} m {} k {} n {} variant {} element {}", IsaName(isa), c.m, c.k, c.n, variant, i);
        }
      }
    }
  }
}

// Every M from 1 to 40 (every tile height and split into tiles at each level) against odd K
// (one step, under, at and over a K block, several blocks) and odd N (partial B panels), with
// the epilogue terms and activations taking turns.
TEST(GemmTest, EdgeShapesMatchDoublePrecisionAtEveryIsaLevel) {
  std::mt19937 rng(11);
  const std::vector<Activation> acts = {
      {ActivationKind::kNone},           {ActivationKind::kRelu},
      {ActivationKind::kGelu},           {ActivationKind::kSilu},
      {ActivationKind::kTanh},           {ActivationKind::kClip, -0.5f, 0.5f},
      {ActivationKind::kLeakyRelu, 0.1f}};
  int variant = 0;
  for (int64_t k : {1, 7, 255, 256, 257, 1000}) {
    for (int64_t n : {1, 15, 17, 31, 33, 100}) {
      const std::vector<float> b = Random(k * n, rng), bias = Random(n, rng);
      const Packed p(b, k, n);
      for (int64_t m = 1; m <= 40; ++m) {
        ++variant;
        const std::vector<float> a = Random(m * k, rng), c0 = Random(m * n, rng);
        GemmEpilogue e;
        e.alpha = variant % 3 == 0 ? 0.75f : 1.0f;
        e.bias = variant % 2 == 0 ? bias.data() : nullptr;
        e.accumulate = variant % 5 < 2;
        e.act = acts[static_cast<size_t>(variant) % acts.size()];
        const std::vector<double> want = Reference(m, k, n, a, false, b, e, c0);
        const double tol = 1e-6 * (4.0 + std::sqrt(static_cast<double>(k)));
        for (Isa isa : IsaLevels()) {
          ScopedMaxIsa cap(isa);
          std::vector<float> got = c0;
          Gemm(m, a.data(), k, 1, p.view(), got.data(), n, e);
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i])))
                << fmt::format("{} m {} k {} n {} act {} element {}", IsaName(isa), m, k, n,
                               static_cast<int>(e.act.kind), i);
          }
        }
      }
    }
  }
}

// The AVX-512 tiles called directly, every height and width they come in, against double
// sums: from zero and continued from acc, A rows and B panels strided as the driver has them;
// into acc, or through the epilogue's linear terms into C (the last group partly, at N's edge).
TEST(GemmTest, Avx512TilesMatchDoublePrecision) {
  if (DetectedIsa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(12);
  int variant = 0;
  for (int64_t kc : {1, 7, 64, 256}) {
    for (int rows = 1; rows <= kGemmMrAvx512; ++rows) {
      for (int groups = 1; groups <= avx512::GemmGroupsPerTile(rows); ++groups) {
        for (bool load : {false, true}) {
          for (bool to_c : {false, true}) {
            ++variant;
            const int64_t a_row = kc + 3, panel = (kc + 2) * kGemmNr;  // strides with slack
            const int64_t acc_stride = (groups + 1) * kGemmNr, ldc = acc_stride + 5;
            const std::vector<float> a = Random(rows * a_row, rng);
            const Packed b(Random((kc + 2) * groups * kGemmNr, rng), kc + 2, groups * kGemmNr);
            const std::vector<float> acc0 = Random(rows * acc_stride, rng);
            const std::vector<float> c0 = Random(rows * ldc, rng), bias = Random(ldc, rng);
            auto* acc = static_cast<float*>(
                std::aligned_alloc(64, static_cast<size_t>(rows * acc_stride) * 4));
            std::memcpy(acc, acc0.data(), acc0.size() * 4);
            std::vector<float> c = c0;
            avx512::TileOut out;
            out.c = c.data() + 1;  // unaligned, as C's rows are
            out.ldc = ldc;
            out.cols = groups * kGemmNr - variant % 17;  // 0..16 columns short
            out.alpha = variant % 3 == 0 ? 1.0f : 0.5f;
            out.bias = variant % 2 == 0 ? bias.data() : nullptr;
            out.accumulate = variant % 5 < 3;
            // B's panels start at step 1 (the driver's K blocks start inside a panel).
            avx512::GemmMicroTile(rows, groups, kc, a.data(), a_row, b.data.get() + kGemmNr, panel,
                                  acc, acc_stride, load, to_c ? &out : nullptr);
            const std::string what = fmt::format("kc {} rows {} groups {} load {} to C {}", kc,
                                                 rows, groups, load, to_c);
            for (int i = 0; i < rows; ++i) {
              for (int64_t j = 0; j < acc_stride; ++j) {
                const size_t at = static_cast<size_t>(i * acc_stride + j);
                const float got_acc = acc[at];
                const float got_c = c[static_cast<size_t>(i * ldc + 1 + j)];
                const float before_c = c0[static_cast<size_t>(i * ldc + 1 + j)];
                if (j >= groups * kGemmNr || to_c) {
                  ASSERT_EQ(got_acc, acc0[at])
                      << what << fmt::format(": acc ({}, {}) written", i, j);
                }
                if (j >= (to_c ? out.cols : 0)) {
                  ASSERT_EQ(got_c, before_c) << what << fmt::format(": C ({}, {}) written", i, j);
                }
                if (j >= (to_c ? out.cols : groups * kGemmNr)) continue;
                double want = load ? acc0[at] : 0.0;
                const float* bp = b.data.get() + (j / kGemmNr) * panel + j % kGemmNr;
                for (int64_t t = 0; t < kc; ++t) {
                  want += static_cast<double>(a[static_cast<size_t>(i * a_row + t)]) *
                          bp[(t + 1) * kGemmNr];
                }
                if (to_c) {
                  want *= out.alpha;
                  if (out.bias != nullptr) want += out.bias[j];
                  if (out.accumulate) want += before_c;
                }
                ASSERT_NEAR(to_c ? got_c : got_acc, want,
                            1e-5 * (1.0 + std::sqrt(static_cast<double>(kc))))
                    << what << fmt::format(": ({}, {})", i, j);
              }
            }
            std::free(acc);
          }
        }
      }
    }
  }
}

// The AVX-512 level runs the AVX2 level's FMA chain per element (K blocks, k order, FMA), so
// the two give the same bits, whatever the tiles.
TEST(GemmTest, Avx512RoundsLikeAvx2) {
  if (DetectedIsa() < Isa::kAvx512) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(13);
  struct Case {
    int64_t m, k, n;
  };
  for (const Case& c : std::vector<Case>{
           {1, 1000, 100}, {13, 257, 33}, {37, 768, 130}, {200, 300, 64}, {5, 4097, 17}}) {
    const std::vector<float> a = Random(c.m * c.k, rng), b = Random(c.k * c.n, rng);
    const std::vector<float> bias = Random(c.n, rng), c0 = Random(c.m * c.n, rng);
    const Packed p(b, c.k, c.n);
    GemmEpilogue e;
    e.alpha = 0.5f;
    e.bias = bias.data();
    e.accumulate = true;
    e.act.kind = ActivationKind::kRelu;
    std::vector<float> at[2] = {c0, c0};
    for (int level = 0; level < 2; ++level) {
      ScopedMaxIsa cap(level == 0 ? Isa::kAvx2 : Isa::kAvx512);
      Gemm(c.m, a.data(), c.k, 1, p.view(), at[level].data(), c.n, e);
    }
    ASSERT_EQ(std::memcmp(at[0].data(), at[1].data(), at[0].size() * 4), 0)
        << fmt::format("m {} k {} n {}", c.m, c.k, c.n);
  }
}

TEST(GemmTest, TransposedBPacksTheSame) {
  std::mt19937 rng(8);
  const int64_t k = 37, n = 21;
  const std::vector<float> b = Random(k * n, rng);
  std::vector<float> bt(b.size());
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j)
      bt[static_cast<size_t>(j * k + i)] = b[static_cast<size_t>(i * n + j)];
  }
  const Packed p(b, k, n), pt(bt, k, n, /*trans=*/true);
  EXPECT_EQ(
      std::memcmp(p.data.get(), pt.data.get(), static_cast<size_t>(GemmPackedElements(k, n)) * 4),
      0);
}

// Rows [r0, r0 + m) of A (row-major [rows, k]) through Gemm.
std::vector<float> RunRows(const std::vector<float>& a, int64_t r0, int64_t m, int64_t k,
                           const Packed& p, const GemmEpilogue& e) {
  std::vector<float> c(static_cast<size_t>(m * p.n));
  Gemm(m, a.data() + r0 * k, k, 1, p.view(), c.data(), p.n, e);
  return c;
}

TEST(GemmTest, RowsDoNotDependOnTheirBatchOrTheThreads) {
  std::mt19937 rng(9);
  const int saved_threads = omp_get_max_threads();
  struct Shape3 {
    int64_t k, n;
  };
  for (Isa isa : IsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (const Shape3& s : std::vector<Shape3>{{64, 10}, {300, 33}, {768, 100}, {2048, 16}}) {
      const int64_t rows = 70;
      const std::vector<float> a = Random(rows * s.k, rng), b = Random(s.k * s.n, rng);
      const std::vector<float> bias = Random(s.n, rng);
      const Packed p(b, s.k, s.n);
      GemmEpilogue e;
      e.bias = bias.data();
      e.act.kind = ActivationKind::kRelu;
      omp_set_num_threads(1);
      const std::vector<float> all = RunRows(a, 0, rows, s.k, p, e);
      for (int threads : {1, 2, 3, 4}) {
        omp_set_num_threads(threads);
        for (int64_t m = 1; m <= 40; m += m < 37 ? 1 : 24) {  // 1..37, and 61
          for (int64_t r0 : {int64_t{0}, int64_t{1}, rows - m}) {
            const std::vector<float> part = RunRows(a, r0, m, s.k, p, e);
            ASSERT_EQ(std::memcmp(part.data(), all.data() + r0 * s.n, part.size() * 4), 0)
                << fmt::format(
                       "{} k {} n {}: rows {}..{} computed {} at a time on {} threads "
                       "differ from the same rows computed {} at a time",
                       IsaName(isa), s.k, s.n, r0, r0 + m - 1, m, threads, rows);
          }
        }
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

// The MatMul / FusedGemm kernels the registry picks, with a constant B: the rows of a batch are
// bitwise those of each row run alone (oneDNN's brgemm on AVX-512, kiln's GEMM elsewhere).
TEST(GemmTest, MatMulKernelsAreBatchInvariant) {
  std::mt19937 rng(10);
  const int saved_threads = omp_get_max_threads();
  struct Shape3 {
    int64_t k, n;
  };
  for (const Shape3& s : std::vector<Shape3>{{64, 32}, {32, 10}, {768, 768}, {2048, 10}}) {
    const OwnedTensor b = RandomTensor(Shape{s.k, s.n}, rng);
    const OwnedTensor bias = RandomTensor(Shape{s.n}, rng);
    const int64_t rows = 17;
    const OwnedTensor a = RandomTensor(Shape{rows, s.k}, rng);
    for (bool fused : {false, true}) {
      auto run = [&](int64_t r0, int64_t m) {
        std::vector<float> v(a.data<const float>() + r0 * s.k,
                             a.data<const float>() + (r0 + m) * s.k);
        KernelCase c(fused ? "FusedGemm" : "MatMul", 13);
        if (fused) c.Domain(std::string(kKilnDomain), 1).Attr(StringAttr("activation", "Relu"));
        c.Input(MakeTensor<float>(Shape{m, s.k}, v))
            .ConstInput(OwnedTensor::CopyOf(b.view()).value());
        if (fused) c.ConstInput(OwnedTensor::CopyOf(bias.view()).value());
        return c.Run("cpu");
      };
      for (int threads : {1, 2, 4}) {
        omp_set_num_threads(threads);
        const OwnedTensor all = run(0, rows);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t m : {int64_t{1}, std::min<int64_t>(8, rows - r)}) {
            const OwnedTensor part = run(r, m);
            ASSERT_EQ(std::memcmp(part.raw_data(), all.data<const float>() + r * s.n,
                                  static_cast<size_t>(m * s.n) * 4),
                      0)
                << fmt::format(
                       "{} k {} n {}: rows {}..{} alone differ from the batch of {} on "
                       "{} threads",
                       fused ? "FusedGemm" : "MatMul", s.k, s.n, r, r + m - 1, rows, threads);
          }
        }
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

}  // namespace
}  // namespace kiln::cpu
