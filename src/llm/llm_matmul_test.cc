// SPDX-License-Identifier: Apache-2.0
// Tests of MatMul (llm_matmul.h): every kernel family the CPU has (AVX-512 with and without
// VNNI, AVX2, scalar) against ref::MatMul for every weight type, token counts 1..9, 16 and 33,
// odd row counts, column counts of one, an odd number and many blocks, padded ldx / ldy (the
// padding must stay untouched); and both against a double-precision product of the dequantized
// weights with the unquantized activations, within the error the activation rounding allows.

#include "llm/llm_matmul.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/spin_team.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "llm/ggml_quants.h"
#include "llm/quant_kernels.h"
#include "tensor/dtype.h"

namespace kiln::llm {
namespace {

constexpr float kSentinel = -12345.5f;

// Bytes that end exactly where an inaccessible page begins, so that a kernel reading past the
// last row faults instead of passing unnoticed.
class GuardedBytes {
 public:
  GuardedBytes() = default;
  explicit GuardedBytes(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    span_ = (n + page - 1) / page * page + page;
    void* p = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<uint8_t*>(p);
    if (mprotect(base_ + span_ - page, page, PROT_NONE) != 0) std::abort();
    data_ = base_ + span_ - page - n;
  }
  GuardedBytes(GuardedBytes&& o) noexcept { *this = std::move(o); }
  GuardedBytes& operator=(GuardedBytes&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(span_, o.span_);
    std::swap(data_, o.data_);
    return *this;
  }
  ~GuardedBytes() {
    if (base_ != nullptr) munmap(base_, span_);
  }
  uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  size_t span_ = 0;
  uint8_t* data_ = nullptr;
};

struct Weights {
  WeightMatrix w;
  GuardedBytes bytes;
  std::vector<float> dequant;  // [rows][cols]
};

Weights MakeWeights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Weights out;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // Rows a few bytes longer than needed (and so not aligned) like a strided view; the last row
  // ends at a guard page.
  const size_t row_bytes = RowBytes(type, cols) + 6;
  const size_t total = row_bytes * static_cast<size_t>(rows > 0 ? rows - 1 : 0) +
                       (rows > 0 ? RowBytes(type, cols) : 0);
  out.bytes = GuardedBytes(total);
  std::memset(out.bytes.data(), 0xab, total);
  out.dequant.resize(static_cast<size_t>(rows * cols));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    EXPECT_TRUE(QuantizeRow(type, row.data(), out.bytes.data() + r * row_bytes, cols).ok());
    EXPECT_TRUE(
        DequantizeRow(type, out.bytes.data() + r * row_bytes, &out.dequant[r * cols], cols).ok());
  }
  out.w = WeightMatrix{type, rows, cols, out.bytes.data(), row_bytes};
  return out;
}

std::vector<float> MakeActs(int64_t n_tokens, int64_t ldx, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * ldx));
  for (float& v : x) v = dist(rng);
  return x;
}

// The bound on |sum_c w_c (x_c - x'_c)| where x' is x as the weight type's dot product sees it:
// Q8_0 activations err by at most d/2 + 127 d 2^-11 (d = amax/127 of the 32-block, stored
// f16), Q8_K by d/2 (d = amax/127 of the 256-block, F32), F16 by 2^-11 |x|, BF16 by 2^-8 |x|.
double ActivationErrorBound(GgmlType type, const float* w, const float* x, int64_t cols) {
  double bound = 0;
  auto block_bound = [&](int64_t n, double per_d) {
    for (int64_t b = 0; b < cols / n; ++b) {
      double amax = 0, wsum = 0;
      for (int64_t j = 0; j < n; ++j) {
        amax = std::max(amax, std::fabs(double(x[b * n + j])));
        wsum += std::fabs(double(w[b * n + j]));
      }
      bound += wsum * amax / 127 * per_d;
    }
  };
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
      block_bound(32, 0.5 + 127.0 / 2048);
      break;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      block_bound(256, 0.5);
      break;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t c = 0; c < cols; ++c) {
        bound += std::fabs(double(w[c]) * x[c]) * (type == GgmlType::kF16 ? 0x1p-11 : 0x1p-8);
      }
      break;
    default:
      break;
  }
  return bound;
}

struct Level {
  cpu::Isa isa;
  bool vnni;
  std::string name;
};

std::vector<Level> Levels() {
  std::vector<Level> levels;
  const cpu::Isa top = cpu::DetectedIsa();
  // AMX tile products for calls of 12 tokens or more (Q4_0, Q8_0), the VNNI kernels below that.
  if (top >= cpu::Isa::kAmx) levels.push_back({cpu::Isa::kAmx, true, "amx"});
  if (top >= cpu::Isa::kAvx512) {
    levels.push_back({cpu::Isa::kAvx512, true, "avx512 (VNNI if present)"});
    levels.push_back({cpu::Isa::kAvx512, false, "avx512 without VNNI"});
  }
  if (top >= cpu::Isa::kAvx2) levels.push_back({cpu::Isa::kAvx2, false, "avx2"});
  levels.push_back({cpu::Isa::kScalar, false, "scalar"});
  return levels;
}

struct VnniGuard {
  explicit VnniGuard(bool allowed) { SetMatMulVnniAllowed(allowed); }
  ~VnniGuard() { SetMatMulVnniAllowed(true); }
};

// Runs every level on one shape and checks fast vs ref vs the double-precision product.
void CheckShape(GgmlType type, int64_t rows, int64_t cols, int64_t n_tokens, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "type " << static_cast<int>(type) << " rows " << rows
                                    << " cols " << cols << " tokens " << n_tokens);
  const Weights wt = MakeWeights(type, rows, cols, seed);
  const int64_t ldx = cols + 3, ldy = rows + 5;
  const std::vector<float> x = MakeActs(n_tokens, ldx, seed + 1);

  std::vector<float> want(static_cast<size_t>(n_tokens * ldy), kSentinel);
  ref::MatMul(wt.w, x.data(), ldx, n_tokens, want.data(), ldy);

  // Scales: sum |w x| per output, and the exact product of the dequantized weights with x.
  std::vector<double> scale(static_cast<size_t>(n_tokens * rows));
  std::vector<double> exact(scale.size()), act_bound(scale.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, e = 0;
      const float* wr = &wt.dequant[r * cols];
      const float* xt = &x[t * ldx];
      for (int64_t c = 0; c < cols; ++c) {
        s += std::fabs(double(wr[c]) * xt[c]);
        e += double(wr[c]) * xt[c];
      }
      scale[t * rows + r] = s;
      exact[t * rows + r] = e;
      act_bound[t * rows + r] = ActivationErrorBound(type, wr, xt, cols);
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const double tol = act_bound[t * rows + r] + 1e-5 * scale[t * rows + r] + 1e-6;
      ASSERT_NEAR(want[t * ldy + r], exact[t * rows + r], tol) << "ref t " << t << " r " << r;
    }
    for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(want[t * ldy + r], kSentinel);
  }

  // The AVX-512 kernels of Q4_0 / Q8_0 read a packed copy when there is one: every level runs
  // the matrix as stored and, where the top level packs the type, with a packed copy (which the
  // levels below it ignore).
  std::vector<std::pair<WeightMatrix, std::string>> forms{{wt.w, "as stored"}};
  WeightMatrix packed_w = wt.w;
  WeightMatrix* to_pack[] = {&packed_w};
  const std::unique_ptr<PackedWeights> packed = PackedWeights::Pack(to_pack);
  if (MatMulReadsPacked(type)) {
    ASSERT_NE(packed, nullptr);
    ASSERT_NE(packed_w.packed, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(packed_w.packed) % 64, 0u);
    forms.emplace_back(packed_w, "packed");
  } else {
    ASSERT_EQ(packed, nullptr);
    ASSERT_EQ(packed_w.packed, nullptr);
  }
  for (const auto& [w, form] : forms) {
    for (const Level& level : Levels()) {
      SCOPED_TRACE(level.name + ", " + form);
      cpu::ScopedMaxIsa cap(level.isa);
      VnniGuard vnni(level.vnni);
      std::vector<float> got(static_cast<size_t>(n_tokens * ldy), kSentinel);
      MatMul(w, x.data(), ldx, n_tokens, got.data(), ldy);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          // The integer parts are exact; only the F32 summation order differs.
          const double tol = 2e-6 * scale[t * rows + r] + 1e-6;
          ASSERT_NEAR(got[t * ldy + r], want[t * ldy + r], tol)
              << MatMulKernelName() << " t " << t << " r " << r;
        }
        for (int64_t r = rows; r < ldy; ++r) {
          ASSERT_EQ(got[t * ldy + r], kSentinel) << "padding touched at t " << t << " r " << r;
        }
      }
    }
  }
}

std::vector<int64_t> TokenCounts() { return {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33}; }

TEST(LlmMatMulTest, Q4_0) {
  for (int64_t cols : {32, 96, 320}) {
    for (int64_t n : TokenCounts()) CheckShape(GgmlType::kQ4_0, 37, cols, n, 1000 + n);
  }
  CheckShape(GgmlType::kQ4_0, 5, 2048, 3, 1);
}

TEST(LlmMatMulTest, Q8_0) {
  for (int64_t cols : {32, 96, 320}) {
    for (int64_t n : TokenCounts()) CheckShape(GgmlType::kQ8_0, 37, cols, n, 2000 + n);
  }
  CheckShape(GgmlType::kQ8_0, 5, 2048, 3, 2);
}

TEST(LlmMatMulTest, Q4_K) {
  for (int64_t cols : {256, 768}) {
    for (int64_t n : TokenCounts()) CheckShape(GgmlType::kQ4_K, 13, cols, n, 3000 + n);
  }
}

TEST(LlmMatMulTest, Q6_K) {
  for (int64_t cols : {256, 768}) {
    for (int64_t n : TokenCounts()) CheckShape(GgmlType::kQ6_K, 13, cols, n, 4000 + n);
  }
}

TEST(LlmMatMulTest, Floats) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    for (int64_t cols : {1, 16, 45, 200}) {
      for (int64_t n : TokenCounts()) {
        CheckShape(type, 11, cols, n, 5000 + static_cast<uint32_t>(n + cols));
      }
    }
    // Columns over 1024 are cut into chunks whose sums are added.
    CheckShape(type, 6, 2100, 7, 6);
  }
}

// Enough rows and tokens that the rows are split over threads and the tokens into blocks.
TEST(LlmMatMulTest, LargeSplitsOverThreads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(std::max(2, saved));
  CheckShape(GgmlType::kQ4_0, 150, 2048, 200, 7);
  CheckShape(GgmlType::kQ8_0, 150, 2048, 200, 19);
  // Decode's shape: one token, rows over threads (packed groups on AVX-512).
  CheckShape(GgmlType::kQ4_0, 70, 5632, 1, 17);
  CheckShape(GgmlType::kQ8_0, 70, 1056, 1, 18);
  CheckShape(GgmlType::kF16, 70, 1536, 40, 8);
  CheckShape(GgmlType::kQ6_K, 40, 1024, 20, 9);
  omp_set_num_threads(saved);
}

// ParallelFor on a SpinTeam (the engine's steps) cuts [0, n) into the chunks OpenMP's team of the
// same size gets, each once, and MatMul gives the same bits on either.
TEST(LlmMatMulTest, SpinTeamRunsWhatOpenMpRuns) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  auto chunks = [](int64_t n, int64_t grain) {
    std::vector<std::pair<int64_t, int64_t>> got(8, {-1, -1});
    std::atomic<int> count{0};
    cpu::ParallelFor(n, grain, [&](int64_t b, int64_t e) {
      got[static_cast<size_t>(count.fetch_add(1))] = {b, e};
    });
    got.resize(static_cast<size_t>(count.load()));
    std::sort(got.begin(), got.end());
    return got;
  };
  SpinTeam team(3);
  ASSERT_EQ(team.threads(), 3);
  for (int64_t n : {1, 2, 3, 5, 47, 1000}) {
    for (int64_t grain : {1, 16}) {
      const auto omp = chunks(n, grain);
      SpinTeamScope scope(&team);
      const auto spin = chunks(n, grain);
      EXPECT_EQ(spin, omp) << "n " << n << " grain " << grain;
      int64_t covered = 0;
      for (size_t i = 0; i < spin.size(); ++i) {
        EXPECT_EQ(spin[i].first, covered);
        covered = spin[i].second;
      }
      EXPECT_EQ(covered, n);
    }
  }
  struct Case {
    GgmlType type;
    int64_t rows, cols, n;
  };
  for (const Case& k : {Case{GgmlType::kQ4_0, 70, 2048, 1}, Case{GgmlType::kQ8_0, 150, 1024, 19},
                        Case{GgmlType::kQ4_K, 40, 1024, 5}, Case{GgmlType::kF16, 70, 1536, 40}}) {
    const Weights w = MakeWeights(k.type, k.rows, k.cols, 21);
    const std::vector<float> x = MakeActs(k.n, k.cols, 22);
    std::vector<float> omp(static_cast<size_t>(k.n * k.rows)), spin(omp.size());
    MatMul(w.w, x.data(), k.cols, k.n, omp.data(), k.rows);
    {
      SpinTeamScope scope(&team);
      MatMul(w.w, x.data(), k.cols, k.n, spin.data(), k.rows);
    }
    EXPECT_EQ(spin, omp) << GgmlTypeName(k.type) << " n " << k.n;
  }
  omp_set_num_threads(saved);
}

// Products sharing activations (mixed types, as Q4_K_M files mix Q4_K and Q6_K) give exactly
// what one MatMul per matrix gives, at every level.
TEST(LlmMatMulTest, SharedActivations) {
  const int64_t cols = 512;
  const Weights a = MakeWeights(GgmlType::kQ4_K, 37, cols, 11);
  const Weights b = MakeWeights(GgmlType::kQ6_K, 8, cols, 12);
  const Weights c = MakeWeights(GgmlType::kQ4_0, 21, cols, 13);
  const Weights d = MakeWeights(GgmlType::kF16, 5, cols, 14);
  const Weights e = MakeWeights(GgmlType::kQ4_K, 3, cols, 15);
  const Weights* all[] = {&a, &b, &c, &d, &e};
  for (int64_t n : {1, 3, 17}) {
    const int64_t ldx = cols + 8;
    const std::vector<float> x = MakeActs(n, ldx, 99);
    for (const Level& level : Levels()) {
      SCOPED_TRACE(level.name);
      cpu::ScopedMaxIsa cap(level.isa);
      VnniGuard vnni(level.vnni);
      std::vector<std::vector<float>> shared(5), single(5);
      std::vector<MatMulOutput> outs;
      for (int k = 0; k < 5; ++k) {
        const int64_t ldy = all[k]->w.rows + 2;
        shared[k].assign(static_cast<size_t>(n * ldy), kSentinel);
        single[k].assign(static_cast<size_t>(n * ldy), kSentinel);
        outs.push_back({&all[k]->w, shared[k].data(), ldy});
        MatMul(all[k]->w, x.data(), ldx, n, single[k].data(), ldy);
      }
      MatMulShared(outs, x.data(), ldx, n);
      for (int k = 0; k < 5; ++k) EXPECT_EQ(shared[k], single[k]) << "output " << k << " n " << n;
    }
  }
}

// A token's products do not depend on the other tokens of the call (the engine's batch
// invariance rests on it): at every level, packed and as stored, each token of an n-token call
// gets exactly (bit for bit) what a call with that token alone gets, though the two may run
// different kernels (AMX tiles for many tokens, VNNI below that); and the packed copy gives
// exactly what the matrix as stored gives.
TEST(LlmMatMulTest, TokensAreIndependentOfTheCall) {
  struct Shape {
    GgmlType type;
    int64_t rows, cols;
  };
  // (Float weights over 2048 columns are summed in column chunks.)
  for (const Shape& shape : {Shape{GgmlType::kQ4_0, 70, 512}, Shape{GgmlType::kQ8_0, 70, 512},
                             Shape{GgmlType::kQ4_K, 70, 512}, Shape{GgmlType::kQ6_K, 70, 512},
                             Shape{GgmlType::kF16, 70, 512}, Shape{GgmlType::kBF16, 70, 512},
                             Shape{GgmlType::kF32, 70, 512}, Shape{GgmlType::kF16, 9, 4160}}) {
    const GgmlType type = shape.type;
    const int64_t rows = shape.rows, cols = shape.cols, ldx = cols + 8, ldy = rows + 2;
    const Weights wt = MakeWeights(type, rows, cols, 21);
    WeightMatrix packed_w = wt.w;
    WeightMatrix* to_pack[] = {&packed_w};
    const std::unique_ptr<PackedWeights> packed = PackedWeights::Pack(to_pack);
    for (const Level& level : Levels()) {
      SCOPED_TRACE(level.name);
      cpu::ScopedMaxIsa cap(level.isa);
      VnniGuard vnni(level.vnni);
      for (int64_t n : {2, 3, 5, 6, 7, 8, 9, 10, 16, 40}) {
        const std::vector<float> x = MakeActs(n, ldx, 300 + static_cast<uint32_t>(n));
        std::vector<float> as_stored;
        for (const WeightMatrix& w : {wt.w, packed_w}) {
          const char* form = w.packed != nullptr ? "packed" : "as stored";
          std::vector<float> all(static_cast<size_t>(n * ldy), kSentinel);
          MatMul(w, x.data(), ldx, n, all.data(), ldy);
          for (int64_t t = 0; t < n; ++t) {
            std::vector<float> one(static_cast<size_t>(ldy), kSentinel);
            MatMul(w, x.data() + t * ldx, ldx, 1, one.data(), ldy);
            for (int64_t r = 0; r < rows; ++r) {
              ASSERT_EQ(all[t * ldy + r], one[r]) << "type " << static_cast<int>(type) << " "
                                                  << form << " n " << n << " t " << t << " r " << r;
            }
          }
          // The packed copy changes nothing either.
          if (as_stored.empty()) {
            as_stored = all;
          } else {
            ASSERT_EQ(all, as_stored) << "type " << static_cast<int>(type) << " n " << n;
          }
        }
      }
    }
  }
}

// The prefetch distance of the packed kernels is timed on the packed matrices and chosen from
// the candidates; it changes no result.
TEST(LlmMatMulTest, TunedPrefetchChangesNoResult) {
  const Weights a = MakeWeights(GgmlType::kQ4_0, 300, 1024, 31);
  const Weights b = MakeWeights(GgmlType::kQ8_0, 100, 1024, 32);
  WeightMatrix wa = a.w, wb = b.w;
  WeightMatrix* both[] = {&wa, &wb};
  const std::unique_ptr<PackedWeights> packed = PackedWeights::Pack(both);
  const int64_t ldx = 1024;
  const std::vector<float> x = MakeActs(3, ldx, 33);
  auto products = [&] {
    std::vector<float> y(3 * 400, kSentinel);
    MatMul(wa, x.data(), ldx, 3, y.data(), 400);
    MatMul(wb, x.data(), ldx, 1, y.data() + 300, 400);
    return y;
  };
  const std::vector<float> before = products();
  const int64_t chosen = TunePackedPrefetch(both);
  if (!MatMulReadsPacked(GgmlType::kQ4_0)) {
    EXPECT_EQ(chosen, 0);
    EXPECT_EQ(MatMulPackedPrefetchBytes(), 8192);
    return;
  }
  EXPECT_TRUE(chosen == 1024 || chosen == 2048 || chosen == 4096 || chosen == 8192) << chosen;
  EXPECT_EQ(MatMulPackedPrefetchBytes(), chosen);
  EXPECT_EQ(products(), before);
  WeightMatrix unpacked = a.w;
  WeightMatrix* none[] = {&unpacked};
  EXPECT_EQ(TunePackedPrefetch(none), 0);  // nothing to time: nothing changes
  EXPECT_EQ(MatMulPackedPrefetchBytes(), chosen);
}

// The packed layout holds each block's scale and codes where quant_kernels.h says; matrices
// with the same data share one copy; types the kernels read in place are left alone.
TEST(LlmMatMulTest, PackedLayout) {
  if (!MatMulReadsPacked(GgmlType::kQ4_0)) {
    WeightMatrix w = MakeWeights(GgmlType::kQ4_0, 5, 64, 1).w;
    WeightMatrix* one[] = {&w};
    EXPECT_EQ(PackedWeights::Pack(one), nullptr);
    EXPECT_EQ(w.packed, nullptr);
    GTEST_SKIP() << "the active kernels (" << MatMulKernelName() << ") read Q4_0 in place";
  }
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ8_0}) {
    const bool q8 = type == GgmlType::kQ8_0;
    const int64_t rows = 11, cols = 32 * 11;  // a padded row group and a padded super-block
    const Weights a = MakeWeights(type, rows, cols, 21);
    const Weights f = MakeWeights(GgmlType::kF16, 3, cols, 22);
    WeightMatrix w1 = a.w, w2 = a.w, wf = f.w;
    WeightMatrix* list[] = {&w1, &wf, &w2};
    const std::unique_ptr<PackedWeights> packed = PackedWeights::Pack(list);
    ASSERT_NE(packed, nullptr);
    EXPECT_EQ(w1.packed, w2.packed);
    EXPECT_EQ(wf.packed, nullptr);
    // 2 groups of 8 rows x 2 super-blocks of 8 blocks: 128 bytes of scales and 8 blocks of
    // codes (8 rows x 16 bytes, Q8_0 twice that) each.
    const int64_t block = q8 ? 256 : 128, super = 128 + 8 * block, group = 2 * super;
    EXPECT_EQ(qk::PackedBytes(type, rows, cols), 2 * group);
    EXPECT_GE(packed->bytes(), static_cast<size_t>(2 * group));
    const int64_t block_bytes = q8 ? 34 : 18;
    for (int64_t r = 0; r < 16; ++r) {
      for (int64_t b = 0; b < 16; ++b) {
        const uint8_t* sb = w1.packed + (r / 8) * group + (b / 8) * super;
        const uint8_t* scale = sb + 2 * (8 * (b % 8) + r % 8);
        const uint8_t* codes =
            sb + 128 + (b % 8) * block + (r % 8 / 4) * (block / 2) + 16 * (r % 4);
        if (r >= rows || b >= cols / 32) {  // padding: zero
          EXPECT_EQ(scale[0] | scale[1], 0) << "r " << r << " b " << b;
          for (int j = 0; j < 16; ++j) EXPECT_EQ(codes[j], 0);
          continue;
        }
        const uint8_t* blk = a.w.data + r * a.w.row_bytes + b * block_bytes;
        EXPECT_EQ(std::memcmp(scale, blk, 2), 0) << "r " << r << " b " << b;
        EXPECT_EQ(std::memcmp(codes, blk + 2, 16), 0) << "r " << r << " b " << b;
        if (q8) {
          EXPECT_EQ(std::memcmp(codes + 64, blk + 18, 16), 0) << "r " << r << " b " << b;
        }
      }
    }
  }
}

// The activation quantizers of every path give the scalar reference's codes bit for bit,
// halfway cases included (Q8_0 as ggml-cpu's x86 code: round half to even).
TEST(LlmMatMulTest, ActivationQuantizersAgree) {
  std::vector<float> x = MakeActs(1, 1024, 5);
  // A block whose amax is 127 (so 127 / amax = 1): halfway values round to even.
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = -0.5f;
  // A 256-block whose first largest magnitude is negative, then its positive twin.
  x[300] = -9.0f;
  x[301] = 9.0f;
  // An all-zero block of each size.
  std::fill(x.begin() + 512, x.begin() + 768, 0.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<int8_t> q_ref(n), q(n);
  std::vector<float> d_ref(n / 32), d(n / 32);
  std::vector<int32_t> b_ref(n / 32), b(n / 32);
  qk::scalar::QuantizeQ8_0(x.data(), n, 8, q_ref.data(), d_ref.data(), b_ref.data());
  EXPECT_EQ(q_ref[1], 2);
  EXPECT_EQ(q_ref[2], 4);
  EXPECT_EQ(q_ref[3], -2);
  EXPECT_EQ(q_ref[4], 0);
  EXPECT_EQ(d_ref[0], 1.0f);
  if (cpu::DetectedIsa() >= cpu::Isa::kAvx2) {
    qk::avx2::QuantizeQ8_0(x.data(), n, 8, q.data(), d.data(), b.data());
    EXPECT_EQ(q, q_ref);
    EXPECT_EQ(d, d_ref);
    EXPECT_EQ(b, b_ref);
  }
  if (cpu::DetectedIsa() >= cpu::Isa::kAvx512) {
    qk::avx512::QuantizeQ8_0(x.data(), n, 8, q.data(), d.data(), b.data());
    EXPECT_EQ(q, q_ref);
    EXPECT_EQ(d, d_ref);
    EXPECT_EQ(b, b_ref);
    std::vector<int8_t> k_ref(n), k(n);
    std::vector<float> kd_ref(n / 256), kd(n / 256);
    std::vector<int16_t> s16_ref(n / 16), s16(n / 16), s32_ref(n / 32), s32(n / 32);
    for (int64_t i = 0; i < n / 256; ++i) {
      kd_ref[i] = qk::QuantizeActBlockQ8_K(x.data() + 256 * i, k_ref.data() + 256 * i,
                                           s16_ref.data() + 16 * i, s32_ref.data() + 8 * i);
    }
    EXPECT_EQ(k_ref[1], -2);      // block 0: iscale = -127 / 127, -2.5 rounds to even
    EXPECT_EQ(k_ref[300], -127);  // block 1: the first largest magnitude is -9
    EXPECT_EQ(k_ref[301], 127);
    EXPECT_EQ(kd_ref[1], 1.0f / (-127.0f / -9.0f));
    EXPECT_EQ(kd_ref[2], 0.0f);
    qk::avx512::QuantizeQ8_K(x.data(), n, k.data(), kd.data(), s16.data(), s32.data());
    EXPECT_EQ(k, k_ref);
    EXPECT_EQ(kd, kd_ref);
    EXPECT_EQ(s16, s16_ref);
    EXPECT_EQ(s32, s32_ref);
  }
  // Rounding to F16 / BF16.
  std::vector<float> h_ref(n), h(n);
  for (bool bf16 : {false, true}) {
    qk::scalar::RoundHalf(x.data(), n, bf16, h_ref.data());
    if (cpu::DetectedIsa() >= cpu::Isa::kAvx2) {
      qk::avx2::RoundHalf(x.data(), n, bf16, h.data());
      EXPECT_EQ(h, h_ref) << bf16;
    }
  }
}

TEST(LlmMatMulTest, EmptyShapes) {
  const Weights wt = MakeWeights(GgmlType::kQ8_0, 3, 64, 1);
  std::vector<float> x(64, 1.0f), y(8, kSentinel);
  MatMul(wt.w, x.data(), 64, 0, y.data(), 3);
  EXPECT_EQ(y[0], kSentinel);
  WeightMatrix empty{GgmlType::kF16, 2, 0, nullptr, 0};
  EXPECT_TRUE(CheckWeightMatrix(empty).ok());
  MatMul(empty, x.data(), 0, 2, y.data(), 4);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], kSentinel);
  EXPECT_EQ(y[4], 0.0f);
}

TEST(LlmMatMulTest, CheckWeightMatrixErrors) {
  uint8_t buf[64] = {};
  EXPECT_TRUE(CheckWeightMatrix({GgmlType::kQ4_0, 2, 32, buf, 18}).ok());
  Status s = CheckWeightMatrix({GgmlType::kQ5_0, 2, 32, buf, 22});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not supported"), std::string::npos) << s.message();
  EXPECT_FALSE(CheckWeightMatrix({GgmlType::kQ4_0, 2, 33, buf, 18}).ok());
  EXPECT_FALSE(CheckWeightMatrix({GgmlType::kQ4_0, 2, 32, buf, 17}).ok());
  EXPECT_FALSE(CheckWeightMatrix({GgmlType::kQ4_0, -1, 32, buf, 18}).ok());
  EXPECT_FALSE(CheckWeightMatrix({GgmlType::kF32, 1, 4, nullptr, 16}).ok());
}

}  // namespace
}  // namespace kiln::llm
