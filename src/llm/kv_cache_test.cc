// SPDX-License-Identifier: Apache-2.0
// KvCache: sizing from the budget, config errors, the pool layout, conversions to F16 / BF16
// (at every ISA level: the binary runs under tests/run_at_isa.sh), WriteRows and CopyBlock.
#include "llm/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "tensor/dtype.h"

namespace kiln::llm {
namespace {

KvCacheConfig SmallConfig(KvDtype dtype) {
  KvCacheConfig c;
  c.n_layers = 3;
  c.n_kv_heads = 2;
  c.head_dim = 24;
  c.block_size = 4;
  c.dtype = dtype;
  c.max_blocks = 6;
  return c;
}

// What the pool must hold for value x, computed with the scalar conversions of tensor/dtype.h.
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

// Element (block, head, slot, d) of a pool, read from the raw bytes with the documented layouts:
// K [block][head][d][slot], V [block][head][slot][d].
float PoolAt(const KvCache& c, bool k_pool, BlockId block, int head, int slot, int d) {
  const int64_t bh = int64_t{block} * c.n_kv_heads() + head;
  const int64_t index = k_pool ? (bh * c.head_dim() + d) * c.block_size() + slot
                               : (bh * c.block_size() + slot) * c.head_dim() + d;
  const void* pool = k_pool ? c.k_pool(1) : c.v_pool(1);
  if (c.dtype() == KvDtype::kF32) return static_cast<const float*>(pool)[index];
  const uint16_t bits = static_cast<const uint16_t*>(pool)[index];
  return c.dtype() == KvDtype::kF16 ? Float16ToFloat(Float16{bits})
                                    : BFloat16ToFloat(BFloat16{bits});
}

bool SameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST(KvCacheTest, SizesFromBudgetAndMaxBlocks) {
  KvCacheConfig c = SmallConfig(KvDtype::kF16);
  const int64_t block_bytes = KvCache::BlockBytes(c);
  EXPECT_EQ(block_bytes, 2 * 3 * 2 * 4 * 24 * 2);
  c.max_blocks = 0;
  c.budget_bytes = 10 * block_bytes + 5;
  auto r = KvCache::Create(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value()->num_blocks(), 10);
  EXPECT_EQ(r.value()->bytes(), static_cast<size_t>(10 * block_bytes));
  EXPECT_EQ(r.value()->blocks().num_blocks(), 10);
  EXPECT_EQ(r.value()->blocks().block_size(), 4);
  c.max_blocks = 7;  // both: the smaller
  EXPECT_EQ(KvCache::Create(c).value()->num_blocks(), 7);
  c.budget_bytes = 0;  // max_blocks alone
  c.max_blocks = 13;
  EXPECT_EQ(KvCache::Create(c).value()->num_blocks(), 13);
  c.max_blocks = 0;  // the default budget: a share of available memory
  EXPECT_GT(KvCache::DefaultBudgetBytes(), 0);
  auto d = KvCache::Create(c);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  // MemAvailable moves while the test runs: within 25% of what it says now, at most 16 GiB.
  const double expected = static_cast<double>(KvCache::DefaultBudgetBytes()) / block_bytes;
  EXPECT_GT(d.value()->num_blocks(), 0.75 * expected);
  EXPECT_LT(d.value()->num_blocks(), 1.25 * expected + 1);
  EXPECT_LE(static_cast<int64_t>(d.value()->bytes()), int64_t{16} << 30);
}

TEST(KvCacheTest, RejectsBadConfigs) {
  KvCacheConfig c = SmallConfig(KvDtype::kF32);
  c.max_blocks = 0;
  c.budget_bytes = KvCache::BlockBytes(c) - 1;
  auto r = KvCache::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("holds no block"), std::string::npos);
  for (auto mutate : std::vector<void (*)(KvCacheConfig&)>{
           [](KvCacheConfig& k) { k.n_layers = 0; }, [](KvCacheConfig& k) { k.n_kv_heads = -1; },
           [](KvCacheConfig& k) { k.head_dim = 0; }, [](KvCacheConfig& k) { k.block_size = 0; },
           [](KvCacheConfig& k) { k.block_size = 4096; },
           [](KvCacheConfig& k) { k.budget_bytes = -5; },
           [](KvCacheConfig& k) { k.max_blocks = -1; }}) {
    KvCacheConfig bad = SmallConfig(KvDtype::kF16);
    mutate(bad);
    auto b = KvCache::Create(bad);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << b.status().ToString();
  }
}

TEST(KvCacheTest, ParsesDtypes) {
  EXPECT_EQ(ParseKvDtype("f16").value(), KvDtype::kF16);
  EXPECT_EQ(ParseKvDtype("bfloat16").value(), KvDtype::kBF16);
  EXPECT_EQ(ParseKvDtype("fp32").value(), KvDtype::kF32);
  EXPECT_FALSE(ParseKvDtype("q8_0").ok());
  EXPECT_EQ(KvDtypeName(KvDtype::kBF16), "bf16");
}

class KvCacheDtypeTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(KvCacheDtypeTest, WriteStoresTheLayoutAndRoundsToNearestEven) {
  const KvDtype dtype = GetParam();
  auto r = KvCache::Create(SmallConfig(dtype));
  ASSERT_TRUE(r.ok());
  KvCache& c = *r.value();
  const int width = c.n_kv_heads() * c.head_dim();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> k(width), v(width), k2(width), v2(width);
  for (int i = 0; i < width; ++i) {
    k[i] = normal(rng);
    v[i] = normal(rng) * 1e-3f;
  }
  // Special values: ties, denormals (F16's and F32's), overflow, infinities, NaN, signed zero.
  const float specials[] = {1.0f + 1.0f / 2048,  // F16 tie -> even
                            1.0f + 3.0f / 2048,  // F16 tie -> up
                            1.0f + 1.0f / 256,   // BF16 tie
                            3e-6f,
                            -6e-8f,
                            1e-40f,
                            70000.0f,
                            -1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -0.0f,
                            65519.0f,
                            65520.0f};
  for (size_t i = 0; i < std::size(specials); ++i) k[i * 3 % width] = specials[i];
  c.Write(/*layer=*/1, /*block=*/4, /*slot=*/2, k.data(), v.data());
  for (int h = 0; h < c.n_kv_heads(); ++h) {
    for (int d = 0; d < c.head_dim(); ++d) {
      const int i = h * c.head_dim() + d;
      ASSERT_TRUE(SameFloat(PoolAt(c, /*k_pool=*/true, 4, h, 2, d), Rounded(dtype, k[i])))
          << "k[" << i << "] = " << k[i];
      ASSERT_TRUE(SameFloat(PoolAt(c, /*k_pool=*/false, 4, h, 2, d), Rounded(dtype, v[i])));
    }
  }
  c.Read(1, 4, 2, k2.data(), v2.data());
  for (int i = 0; i < width; ++i) {
    ASSERT_TRUE(SameFloat(k2[i], Rounded(dtype, k[i])));
    ASSERT_TRUE(SameFloat(v2[i], Rounded(dtype, v[i])));
  }
}

TEST_P(KvCacheDtypeTest, WriteRowsFollowsTheTableAndCopyBlockCopiesEveryLayer) {
  const KvDtype dtype = GetParam();
  auto r = KvCache::Create(SmallConfig(dtype));
  ASSERT_TRUE(r.ok());
  KvCache& c = *r.value();
  const int width = c.n_kv_heads() * c.head_dim();
  const std::vector<BlockId> table = {5, 1, 3};
  const int64_t pos0 = 3, n = 7;  // positions 3..9: blocks 5 (slot 3), 1, 3 (slots 0, 1)
  const int64_t ld = width + 5;
  std::vector<float> k(n * ld), v(n * ld);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i % 97) * 0.25f;
    v[i] = -static_cast<float>(i % 89) * 0.5f;
  }
  for (int layer = 0; layer < c.n_layers(); ++layer) {
    c.WriteRows(layer, table, pos0, n, k.data(), ld, v.data(), ld);
  }
  std::vector<float> kr(width), vr(width);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    c.Read(2, table[p / 4], static_cast<int>(p % 4), kr.data(), vr.data());
    for (int e = 0; e < width; ++e) {
      ASSERT_EQ(kr[e], Rounded(dtype, k[i * ld + e]));
      ASSERT_EQ(vr[e], Rounded(dtype, v[i * ld + e]));
    }
  }
  c.CopyBlock(1, 0);
  for (int layer = 0; layer < c.n_layers(); ++layer) {
    for (int slot = 0; slot < 4; ++slot) {
      std::vector<float> a(width), av(width), b(width), bv(width);
      c.Read(layer, 1, slot, a.data(), av.data());
      c.Read(layer, 0, slot, b.data(), bv.data());
      ASSERT_EQ(a, b);
      ASSERT_EQ(av, bv);
    }
  }
  // Block 3 (not copied over) still holds positions 8 and 9.
  c.Read(0, 3, 1, kr.data(), vr.data());
  EXPECT_EQ(kr[0], Rounded(dtype, k[6 * ld]));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvCacheDtypeTest,
                         ::testing::Values(KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16),
                         [](const auto& info) { return std::string(KvDtypeName(info.param)); });

}  // namespace
}  // namespace kiln::llm
