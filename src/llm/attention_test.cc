// SPDX-License-Identifier: Apache-2.0
// Paged attention: the reference against a dense attention written here from the K/V the test
// wrote, then the fast kernel against the reference at every ISA level up to the active one, on
// shuffled block tables, mixed batches (a prompt chunk at pos0 > 0, a fresh prompt, decodes of
// various lengths), GQA ratios 1, 4 and 8, head_dim 64, 128 and an odd one, F32 / F16 / BF16.
#include "llm/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "tensor/dtype.h"

namespace kiln::llm {
namespace {

float Rounded(KvDtype dtype, float x) {
  switch (dtype) {
    case KvDtype::kF32:
      return x;
    case KvDtype::kF16:
      return Float16ToFloat(FloatToFloat16(x));
    case KvDtype::kBF16:
      return BFloat16ToFloat(FloatToBFloat16(x));
  }
  return 0;
}

struct SeqSpec {
  int64_t pos0, n_q;
};

// A cache filled with random K/V for a batch of sequences, each with a shuffled block table, and
// the test's own dense copy of what was written (rounded to the dtype with tensor/dtype.h).
struct Batch {
  std::unique_ptr<KvCache> cache;
  std::vector<std::vector<BlockId>> tables;
  std::vector<std::vector<float>> k, v;  // per sequence [len][n_kv * d]
  std::vector<AttentionSeq> seqs;
  std::vector<float> q;
  int64_t ldq = 0, rows = 0;
  int n_heads = 0, n_kv = 0, d = 0, layer = 1;
};

Batch MakeBatch(const std::vector<SeqSpec>& specs, int n_heads, int n_kv, int d, int bs,
                KvDtype dtype, uint32_t seed) {
  Batch b;
  b.n_heads = n_heads;
  b.n_kv = n_kv;
  b.d = d;
  int64_t blocks = 0;
  for (const SeqSpec& s : specs) blocks += (s.pos0 + s.n_q + bs - 1) / bs;
  KvCacheConfig c;
  c.n_layers = 2;
  c.n_kv_heads = n_kv;
  c.head_dim = d;
  c.block_size = bs;
  c.dtype = dtype;
  c.max_blocks = blocks + 3;
  b.cache = KvCache::Create(c).value();
  std::mt19937 rng(seed);
  std::vector<BlockId> ids(static_cast<size_t>(c.max_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int width = n_kv * d;
  // Every slot starts as NaN: slots past a sequence's length (read as masked lanes of a K tile)
  // must never leak into a result.
  const std::vector<float> nan_row(static_cast<size_t>(width), std::nanf(""));
  for (int layer = 0; layer < 2; ++layer) {
    for (BlockId blk = 0; blk < c.max_blocks; ++blk) {
      for (int slot = 0; slot < bs; ++slot) {
        b.cache->Write(layer, blk, slot, nan_row.data(), nan_row.data());
      }
    }
  }
  size_t next = 0;
  b.rows = 0;
  for (const SeqSpec& s : specs) b.rows += s.n_q;
  b.ldq = int64_t{n_heads} * d + 7;  // padded rows
  b.q.assign(static_cast<size_t>(b.rows * b.ldq), 0.0f);
  for (float& x : b.q) x = normal(rng) * 1.5f;
  // Rows are handed out in reverse order of the sequences (row0 need not follow them).
  int64_t row = b.rows;
  for (const SeqSpec& s : specs) {
    const int64_t len = s.pos0 + s.n_q;
    std::vector<BlockId> table;
    for (int64_t i = 0; i < (len + bs - 1) / bs; ++i) table.push_back(ids[next++]);
    std::vector<float> k(static_cast<size_t>(len * width)), v(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = normal(rng);
      v[i] = normal(rng);
    }
    for (int layer = 0; layer < 2; ++layer) {
      // Layer 0 gets other values: the kernel must read the layer it is asked for.
      std::vector<float> junk(k.size(), layer == 0 ? 100.0f : 0.0f);
      const std::vector<float>& kk = layer == 0 ? junk : k;
      b.cache->WriteRows(layer, table, 0, len, kk.data(), width,
                         layer == 0 ? junk.data() : v.data(), width);
    }
    for (float& x : k) x = Rounded(dtype, x);
    for (float& x : v) x = Rounded(dtype, x);
    row -= s.n_q;
    b.tables.push_back(std::move(table));
    b.k.push_back(std::move(k));
    b.v.push_back(std::move(v));
    b.seqs.push_back({{}, s.pos0, s.n_q, row});
  }
  for (size_t i = 0; i < b.seqs.size(); ++i) b.seqs[i].blocks = b.tables[i];
  return b;
}

// Dense causal attention from the test's own copies, in double.
std::vector<float> Dense(const Batch& b, int64_t ldo) {
  std::vector<float> out(static_cast<size_t>(b.rows * ldo), 0.0f);
  const int group = b.n_heads / b.n_kv;
  const int width = b.n_kv * b.d;
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    const AttentionSeq& s = b.seqs[si];
    for (int64_t i = 0; i < s.n_q; ++i) {
      for (int h = 0; h < b.n_heads; ++h) {
        const float* q = &b.q[(s.row0 + i) * b.ldq + h * b.d];
        const int kvh = h / group;
        std::vector<double> w;
        for (int64_t p = 0; p <= s.pos0 + i; ++p) {
          double dot = 0;
          for (int e = 0; e < b.d; ++e) dot += double{q[e]} * b.k[si][p * width + kvh * b.d + e];
          w.push_back(dot / std::sqrt(static_cast<double>(b.d)));
        }
        const double mx = *std::max_element(w.begin(), w.end());
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int e = 0; e < b.d; ++e) {
          double acc = 0;
          for (size_t p = 0; p < w.size(); ++p) acc += w[p] * b.v[si][p * width + kvh * b.d + e];
          out[(s.row0 + i) * ldo + h * b.d + e] = static_cast<float>(acc / sum);
        }
      }
    }
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                int64_t width, int64_t ld, double tol, const std::string& what) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < width; ++e) {
      const double g = got[r * ld + e], w = want[r * ld + e];
      ASSERT_TRUE(std::isfinite(g)) << what << " row " << r << " col " << e;
      worst = std::max(worst, std::abs(g - w));
    }
    for (int64_t e = width; e < ld; ++e) ASSERT_EQ(got[r * ld + e], -7.0f) << "padding written";
  }
  EXPECT_LE(worst, tol) << what;
}

TEST(PagedAttentionTest, ReferenceMatchesDenseAttention) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16}) {
    Batch b = MakeBatch({{0, 5}, {3, 4}, {9, 1}}, /*n_heads=*/4, /*n_kv=*/2, /*d=*/8, /*bs=*/2,
                        dtype, 11);
    const int64_t ldo = int64_t{b.n_heads} * b.d + 3;
    std::vector<float> out(static_cast<size_t>(b.rows * ldo), -7.0f);
    ref::PagedAttention(*b.cache, b.layer, b.seqs, b.n_heads, 0.0f, b.q.data(), b.ldq, out.data(),
                        ldo);
    std::vector<float> want = Dense(b, ldo);
    for (int64_t r = 0; r < b.rows; ++r) {
      for (int64_t e = b.n_heads * b.d; e < ldo; ++e) want[r * ldo + e] = -7.0f;
    }
    ExpectNear(out, want, b.rows, int64_t{b.n_heads} * b.d, ldo, 1e-6, "ref vs dense");
  }
  // A single key: the output is that key's V exactly.
  Batch one = MakeBatch({{0, 1}}, 2, 1, 16, 16, KvDtype::kF32, 5);
  std::vector<float> out(static_cast<size_t>(2 * 16));
  ref::PagedAttention(*one.cache, 1, one.seqs, 2, 0.0f, one.q.data(), one.ldq, out.data(), 32);
  for (int e = 0; e < 16; ++e) EXPECT_FLOAT_EQ(out[e], one.v[0][e]);
}

struct Case {
  int n_heads, n_kv, d, bs;
  KvDtype dtype;
};

std::string CaseName(const Case& c) {
  return "h" + std::to_string(c.n_heads) + "_kv" + std::to_string(c.n_kv) + "_d" +
         std::to_string(c.d) + "_bs" + std::to_string(c.bs) + "_" +
         std::string(KvDtypeName(c.dtype));
}

class PagedAttentionFastTest : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionFastTest, MatchesReferenceOnAMixedBatchAtEveryIsa) {
  const Case c = GetParam();
  // A prompt chunk at pos0 > 0, a fresh prompt, and decodes at lengths around block edges.
  const std::vector<SeqSpec> specs = {{37, 45}, {0, 20}, {0, 1},  {15, 1},
                                      {16, 1},  {17, 1}, {99, 1}, {200, 1}};
  Batch b = MakeBatch(specs, c.n_heads, c.n_kv, c.d, c.bs, c.dtype, 1000 + c.d + c.n_heads);
  const int64_t width = int64_t{b.n_heads} * b.d;
  const int64_t ldo = width + 5;
  std::vector<float> want(static_cast<size_t>(b.rows * ldo), -7.0f);
  ref::PagedAttention(*b.cache, b.layer, b.seqs, b.n_heads, 0.0f, b.q.data(), b.ldq, want.data(),
                      ldo);
  const cpu::Isa top = cpu::ActiveIsa();
  for (cpu::Isa isa : {cpu::Isa::kScalar, cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (isa > top) break;
    cpu::ScopedMaxIsa cap(isa);
    std::vector<float> out(static_cast<size_t>(b.rows * ldo), -7.0f);
    PagedAttention(*b.cache, b.layer, b.seqs, b.n_heads, 0.0f, b.q.data(), b.ldq, out.data(), ldo);
    const std::string what = CaseName(c) + " at " + std::string(cpu::IsaName(isa));
    ExpectNear(out, want, b.rows, width, ldo, 2e-5, what);
    if (HasFatalFailure()) return;
    // Batch invariance: each sequence alone gives the same bits as in the batch.
    for (size_t si : {size_t{0}, size_t{5}}) {
      std::vector<float> alone(static_cast<size_t>(b.rows * ldo), -7.0f);
      PagedAttention(*b.cache, b.layer, std::span<const AttentionSeq>(&b.seqs[si], 1), b.n_heads,
                     0.0f, b.q.data(), b.ldq, alone.data(), ldo);
      const AttentionSeq& s = b.seqs[si];
      for (int64_t r = s.row0; r < s.row0 + s.n_q; ++r) {
        for (int64_t e = 0; e < width; ++e) {
          ASSERT_EQ(alone[r * ldo + e], out[r * ldo + e]) << what << " seq " << si << " row " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionFastTest,
    ::testing::Values(Case{2, 2, 64, 16, KvDtype::kF32}, Case{8, 2, 64, 16, KvDtype::kF16},
                      Case{16, 2, 64, 16, KvDtype::kBF16}, Case{4, 4, 128, 16, KvDtype::kF16},
                      Case{8, 2, 128, 32, KvDtype::kF32}, Case{16, 2, 128, 16, KvDtype::kBF16},
                      Case{8, 1, 64, 5, KvDtype::kF16}, Case{4, 1, 80, 1, KvDtype::kF32},
                      Case{6, 2, 40, 8, KvDtype::kF16}, Case{3, 3, 24, 16, KvDtype::kBF16}),
    [](const auto& info) { return CaseName(info.param); });

TEST(PagedAttentionTest, ExplicitScaleAndEmptyBatch) {
  Batch b = MakeBatch({{10, 3}}, 4, 2, 64, 16, KvDtype::kF32, 3);
  const int64_t ldo = 4 * 64;
  std::vector<float> want(static_cast<size_t>(b.rows * ldo)), got(want.size());
  ref::PagedAttention(*b.cache, 1, b.seqs, 4, 0.3f, b.q.data(), b.ldq, want.data(), ldo);
  PagedAttention(*b.cache, 1, b.seqs, 4, 0.3f, b.q.data(), b.ldq, got.data(), ldo);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5);
  // A different scale changes the answer (the scale is used).
  std::vector<float> other(want.size());
  ref::PagedAttention(*b.cache, 1, b.seqs, 4, 0.0f, b.q.data(), b.ldq, other.data(), ldo);
  EXPECT_GT(std::abs(other[0] - want[0]) + std::abs(other[1] - want[1]), 1e-4);
  PagedAttention(*b.cache, 1, {}, 4, 0.0f, b.q.data(), b.ldq, got.data(), ldo);
}

TEST(PagedAttentionTest, LongPrefillSpreadsOverThreads) {
  // One 300-token prompt (many query tiles of very different costs) against the reference.
  Batch b = MakeBatch({{0, 300}}, 8, 2, 64, 16, KvDtype::kF16, 9);
  const int64_t ldo = 8 * 64;
  std::vector<float> want(static_cast<size_t>(b.rows * ldo)), got(want.size());
  ref::PagedAttention(*b.cache, 1, b.seqs, 8, 0.0f, b.q.data(), b.ldq, want.data(), ldo);
  PagedAttention(*b.cache, 1, b.seqs, 8, 0.0f, b.q.data(), b.ldq, got.data(), ldo);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, double{std::abs(got[i] - want[i])});
  EXPECT_LE(worst, 2e-5);
}

}  // namespace
}  // namespace kiln::llm
