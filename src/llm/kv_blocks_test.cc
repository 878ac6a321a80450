// SPDX-License-Identifier: Apache-2.0
// BlockManager: allocation and exhaustion, copy-on-write, prefix hits (chained hashes), eviction
// order, stats, and a randomized property test with a shadow model of the slots' contents.
#include "llm/kv_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <vector>

namespace kiln::llm {
namespace {

std::vector<int32_t> Iota(int n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Reserve + Commit of a whole token list from scratch (after an optional prefix match).
void Compute(BlockManager& m, SequenceBlocks* s, const std::vector<int32_t>& tokens) {
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.Reserve(s, static_cast<int64_t>(tokens.size()), &copies).ok());
  EXPECT_TRUE(copies.empty());
  m.Commit(s, tokens, static_cast<int64_t>(tokens.size()));
}

TEST(BlockManagerTest, AllocationAndExhaustionIsAllOrNothing) {
  BlockManager m(8, 4, /*prefix_caching=*/false);
  EXPECT_EQ(m.num_free_blocks(), 8);
  SequenceBlocks a, b;
  std::vector<BlockCopy> copies;
  EXPECT_EQ(m.BlocksNeeded(a, 10), 3);
  ASSERT_TRUE(m.Reserve(&a, 10, &copies).ok());
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(m.num_free_blocks(), 5);
  // Within the table: nothing more.
  EXPECT_EQ(m.BlocksNeeded(a, 12), 0);
  ASSERT_TRUE(m.Reserve(&a, 12, &copies).ok());
  EXPECT_EQ(a.blocks.size(), 3u);

  EXPECT_EQ(m.BlocksNeeded(b, 24), 6);
  const Status s = m.Reserve(&b, 24, &copies);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("6 more blocks"), std::string::npos) << s.message();
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(m.num_free_blocks(), 5);
  ASSERT_TRUE(m.Reserve(&b, 20, &copies).ok());
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_EQ(m.Reserve(&a, 13, &copies).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(a.blocks.size(), 3u);
  EXPECT_TRUE(copies.empty());
  ASSERT_TRUE(m.CheckInvariants().ok());

  KvStats st = m.stats();
  EXPECT_EQ(st.total, 8);
  EXPECT_EQ(st.used, 8);
  EXPECT_EQ(st.free, 0);
  m.Free(&a);
  EXPECT_TRUE(a.empty());
  st = m.stats();
  EXPECT_EQ(st.used, 5);
  EXPECT_EQ(st.free, 3);
  EXPECT_EQ(st.cached, 0);
  m.Free(&b);
  m.Free(&b);  // empty: no-op
  EXPECT_EQ(m.stats().free, 8);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, CopyOnWriteAfterForkOfAPartialBlock) {
  BlockManager m(8, 4, /*prefix_caching=*/true);
  SequenceBlocks a, b;
  const std::vector<int32_t> prompt = Iota(6, 100);
  Compute(m, &a, prompt);
  m.Fork(a, &b);
  EXPECT_EQ(b.blocks, a.blocks);
  EXPECT_EQ(b.num_computed, 6);
  EXPECT_EQ(m.ref_count(a.blocks[0]), 2);
  EXPECT_EQ(m.ref_count(a.blocks[1]), 2);
  EXPECT_EQ(m.stats().used, 2);

  // b writes position 6, inside the shared partial block 1: copy-on-write.
  EXPECT_EQ(m.BlocksNeeded(b, 7), 1);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.Reserve(&b, 7, &copies).ok());
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, a.blocks[1]);
  EXPECT_EQ(copies[0].dst, b.blocks[1]);
  EXPECT_NE(b.blocks[1], a.blocks[1]);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);  // the full block stays shared
  EXPECT_EQ(m.ref_count(a.blocks[0]), 2);
  EXPECT_EQ(m.ref_count(a.blocks[1]), 1);
  // a now owns its block alone: no copy.
  copies.clear();
  EXPECT_EQ(m.BlocksNeeded(a, 7), 0);
  ASSERT_TRUE(m.Reserve(&a, 7, &copies).ok());
  EXPECT_TRUE(copies.empty());
  // Growing past the table after a fork at a block boundary: a new block, nothing copied.
  SequenceBlocks c, d;
  Compute(m, &c, Iota(8, 500));
  m.Fork(c, &d);
  EXPECT_EQ(m.BlocksNeeded(d, 9), 1);
  ASSERT_TRUE(m.Reserve(&d, 9, &copies).ok());
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(d.blocks.size(), 3u);
  ASSERT_TRUE(m.CheckInvariants().ok());
  m.Free(&a);
  m.Free(&b);
  m.Free(&c);
  m.Free(&d);
  EXPECT_EQ(m.stats().used, 0);
}

TEST(BlockManagerTest, ForkOfReservedButUncomputedBlockNeedsNoCopy) {
  BlockManager m(8, 4, false);
  SequenceBlocks a, b;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.Reserve(&a, 8, &copies).ok());
  m.Commit(&a, Iota(8, 0), 4);  // block 1 reserved, nothing computed in it
  m.Fork(a, &b);
  EXPECT_EQ(m.BlocksNeeded(b, 6), 1);
  ASSERT_TRUE(m.Reserve(&b, 6, &copies).ok());
  EXPECT_TRUE(copies.empty());  // block 1 held no computed position
  EXPECT_NE(a.blocks[1], b.blocks[1]);
  m.Free(&a);
  m.Free(&b);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, PrefixHitReusesCachedBlocks) {
  BlockManager m(16, 4, true);
  const std::vector<int32_t> prompt = Iota(10, 1);
  SequenceBlocks a;
  EXPECT_EQ(m.MatchPrefix(prompt, &a), 0);
  Compute(m, &a, prompt);
  EXPECT_EQ(a.hashes.size(), 2u);  // two full blocks; the partial third is not hashed
  const std::vector<BlockId> a_blocks = a.blocks;
  m.Free(&a);
  KvStats st = m.stats();
  EXPECT_EQ(st.cached, 2);
  EXPECT_EQ(st.used, 0);

  // Same 8-token prefix, different tail.
  SequenceBlocks b;
  const std::vector<int32_t> b_tokens = Concat(Iota(8, 1), {77, 78, 79});
  EXPECT_EQ(m.PeekPrefix(b_tokens), 8);
  // Admission: the two cached blocks it hits leave the allocatable pool, plus one new block.
  EXPECT_EQ(m.BlocksToAdmit(b_tokens, 11), 3);
  EXPECT_EQ(m.BlocksToAdmit(b_tokens, 16), 4);
  EXPECT_EQ(m.BlocksToAdmit(Iota(11, 50), 11), 3);  // no hit
  EXPECT_EQ(m.MatchPrefix(b_tokens, &b), 8);
  EXPECT_EQ(b.num_computed, 8);
  EXPECT_EQ(b.blocks, (std::vector<BlockId>{a_blocks[0], a_blocks[1]}));
  st = m.stats();
  EXPECT_EQ(st.cached, 0);
  EXPECT_EQ(st.used, 2);
  EXPECT_EQ(st.prefix_hits_tokens, 8);
  EXPECT_EQ(st.prefix_queries_tokens, 10 + 11);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.Reserve(&b, 11, &copies).ok());
  EXPECT_TRUE(copies.empty());
  m.Commit(&b, b_tokens, 11);

  // A live sequence's blocks are shared too (refcount 2), at no cost to the pool.
  EXPECT_EQ(m.BlocksToAdmit(Concat(Iota(8, 1), {5}), 9), 1);
  SequenceBlocks c;
  EXPECT_EQ(m.MatchPrefix(Concat(Iota(8, 1), {5}), &c), 8);
  EXPECT_EQ(m.ref_count(a_blocks[0]), 2);

  // A prompt of exactly two blocks hits only one: the last token is always computed.
  SequenceBlocks d;
  EXPECT_EQ(m.MatchPrefix(Iota(8, 1), &d), 4);
  EXPECT_EQ(m.ref_count(a_blocks[0]), 3);
  EXPECT_EQ(m.ref_count(a_blocks[1]), 2);
  SequenceBlocks e;
  EXPECT_EQ(m.MatchPrefix(Iota(4, 1), &e), 0);
  ASSERT_TRUE(m.CheckInvariants().ok());
  for (SequenceBlocks* s : {&b, &c, &d, &e}) m.Free(s);
  EXPECT_EQ(m.stats().used, 0);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, ChainedHashNeedsTheWholePrefix) {
  BlockManager m(16, 4, true);
  const std::vector<int32_t> x = {1, 2, 3, 4}, y = {5, 6, 7, 8}, w = {9, 9, 9, 9};
  SequenceBlocks a;
  Compute(m, &a, Concat(Concat(x, y), {42}));
  // Same second block behind a different first block: no hit at all.
  SequenceBlocks b;
  EXPECT_EQ(m.MatchPrefix(Concat(Concat(w, y), {42}), &b), 0);
  EXPECT_TRUE(b.blocks.empty());
  // Same first block, different second: one block.
  SequenceBlocks c;
  EXPECT_EQ(m.MatchPrefix(Concat(Concat(x, w), {42}), &c), 4);
  // The same block content at another depth does not match either.
  SequenceBlocks d;
  EXPECT_EQ(m.MatchPrefix(Concat(y, {42}), &d), 0);
  EXPECT_NE(BlockManager::ChainHash(BlockManager::kRootHash, y),
            BlockManager::ChainHash(BlockManager::ChainHash(BlockManager::kRootHash, x), y));
  for (SequenceBlocks* s : {&a, &b, &c, &d}) m.Free(s);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, PartialLastBlockIsNeverCached) {
  BlockManager m(16, 4, true);
  SequenceBlocks a;
  const std::vector<int32_t> t = Iota(7, 1);
  Compute(m, &a, t);
  m.Free(&a);
  KvStats st = m.stats();
  EXPECT_EQ(st.cached, 1);
  EXPECT_EQ(st.free, 15);
  // The first 7 tokens plus more: only the full block is found.
  SequenceBlocks b;
  EXPECT_EQ(m.MatchPrefix(Concat(t, {8, 9, 10}), &b), 4);
  m.Free(&b);
  // A block filled by decode steps is cached once full.
  SequenceBlocks c;
  std::vector<int32_t> toks = {50, 51, 52};
  Compute(m, &c, toks);
  std::vector<BlockCopy> copies;
  for (int32_t tok : {53, 54}) {
    toks.push_back(tok);
    ASSERT_TRUE(m.Reserve(&c, static_cast<int64_t>(toks.size()), &copies).ok());
    m.Commit(&c, toks, static_cast<int64_t>(toks.size()));
  }
  EXPECT_EQ(c.hashes.size(), 1u);
  m.Free(&c);
  SequenceBlocks d;
  EXPECT_EQ(m.MatchPrefix(toks, &d), 4);
  m.Free(&d);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, EvictsLeastRecentlyReleasedFirstTailBeforeHead) {
  BlockManager m(6, 2, true);
  SequenceBlocks a, b;
  const std::vector<int32_t> ta = {1, 2, 3, 4, 5};  // blocks 0, 1 full; 2 partial
  const std::vector<int32_t> tb = {7, 8, 9};        // block 3 full; 4 partial
  Compute(m, &a, ta);
  Compute(m, &b, tb);
  EXPECT_EQ(a.blocks, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(b.blocks, (std::vector<BlockId>{3, 4}));
  m.Free(&a);  // releases 2 (free), 1 (cached), 0 (cached, most recent of a's)
  m.Free(&b);  // 4 free, 3 cached (most recent)
  KvStats st = m.stats();
  EXPECT_EQ(st.cached, 3);
  EXPECT_EQ(st.free, 3);
  // 4 blocks: 3 free ones, then one eviction: block 1 (a's tail) goes first.
  SequenceBlocks c;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(m.Reserve(&c, 8, &copies).ok());
  EXPECT_EQ(m.stats().evictions, 1);
  EXPECT_NE(std::find(c.blocks.begin(), c.blocks.end(), 1), c.blocks.end());
  EXPECT_EQ(m.PeekPrefix(ta), 2);  // a's head survives, its second block is gone
  EXPECT_EQ(m.PeekPrefix(tb), 2);
  // One more: block 0 (released before b's block 3).
  SequenceBlocks d;
  ASSERT_TRUE(m.Reserve(&d, 1, &copies).ok());
  EXPECT_EQ(d.blocks, (std::vector<BlockId>{0}));
  EXPECT_EQ(m.PeekPrefix(ta), 0);
  EXPECT_EQ(m.PeekPrefix(tb), 2);
  // A hit refreshes nothing until release; releasing makes it most recent again.
  EXPECT_EQ(m.stats().evictions, 2);
  m.Free(&c);
  m.Free(&d);
  ASSERT_TRUE(m.CheckInvariants().ok());
  m.ClearCache();
  EXPECT_EQ(m.stats().free, 6);
  EXPECT_EQ(m.PeekPrefix(tb), 0);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, DuplicateBlocksKeepTheFirstRegistered) {
  BlockManager m(8, 4, true);
  SequenceBlocks a, b;
  const std::vector<int32_t> t = Iota(6, 1);
  // Both computed without a hit (b matched before a committed).
  EXPECT_EQ(m.MatchPrefix(t, &a), 0);
  EXPECT_EQ(m.MatchPrefix(t, &b), 0);
  Compute(m, &a, t);
  Compute(m, &b, t);
  EXPECT_EQ(a.hashes, b.hashes);
  m.Free(&b);  // b's full block is a private duplicate: free, not cached
  KvStats st = m.stats();
  EXPECT_EQ(st.cached, 0);
  EXPECT_EQ(st.free, 6);
  m.Free(&a);
  EXPECT_EQ(m.stats().cached, 1);
  SequenceBlocks c;
  EXPECT_EQ(m.MatchPrefix(t, &c), 4);
  EXPECT_EQ(c.blocks[0], 0);  // a's block
  m.Free(&c);
  ASSERT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManagerTest, PrefixCachingOffNeverHits) {
  BlockManager m(8, 4, false);
  SequenceBlocks a, b;
  const std::vector<int32_t> t = Iota(9, 1);
  Compute(m, &a, t);
  EXPECT_TRUE(a.hashes.empty());
  m.Free(&a);
  EXPECT_EQ(m.stats().cached, 0);
  EXPECT_EQ(m.MatchPrefix(t, &b), 0);
  EXPECT_EQ(m.stats().prefix_queries_tokens, 0);
}

// Random operations checked against a shadow model: the storage is simulated as what each slot
// holds, and a slot's K/V depends on the token at its position and on every token before it (the
// attention context), so the step "writes" an id of the whole prefix tokens[0..p] into position
// p's slot after executing the copies. A block shared through Fork or reused through the prefix
// cache must hold exactly what every sequence using it believes is there.
class BlockManagerRandomTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(BlockManagerRandomTest, RandomOperationsKeepInvariantsAndContents) {
  constexpr int kBlocks = 48, kBs = 4;
  BlockManager m(kBlocks, kBs, true);
  std::mt19937 rng(GetParam());
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p;
    const int len = uniform(0, 14);
    for (int j = 0; j < len; ++j) p.push_back(uniform(0, 3));  // small alphabet: equal blocks
    prefixes.push_back(p);
  }
  struct Seq {
    SequenceBlocks kv;
    std::vector<int32_t> tokens;  // prompt (+ generated)
    int64_t prompt_len = 0;
  };
  std::vector<Seq> seqs;
  std::vector<uint64_t> slot(kBlocks * kBs, 0);  // the simulated storage
  // The id of prefix tokens[0..p] (a polynomial hash, independent of the manager's).
  auto prefix_ids = [](const std::vector<int32_t>& tokens) {
    std::vector<uint64_t> ids(tokens.size());
    uint64_t h = 0;
    for (size_t p = 0; p < tokens.size(); ++p) ids[p] = h = h * 1000003u + tokens[p] + 1;
    return ids;
  };
  int64_t n_copies = 0, n_exhausted = 0, n_forks = 0;

  auto check = [&](int op) {
    const Status s = m.CheckInvariants();
    ASSERT_TRUE(s.ok()) << "after op " << op << ": " << s.ToString();
    std::vector<int32_t> refs(kBlocks, 0);
    for (const Seq& q : seqs) {
      ASSERT_LE(q.kv.num_computed, static_cast<int64_t>(q.kv.blocks.size()) * kBs);
      for (BlockId b : q.kv.blocks) ++refs[b];
      const std::vector<uint64_t> ids = prefix_ids(q.tokens);
      for (int64_t p = 0; p < q.kv.num_computed; ++p) {
        ASSERT_EQ(slot[q.kv.blocks[p / kBs] * kBs + p % kBs], ids[p])
            << "op " << op << " position " << p;
      }
    }
    for (int b = 0; b < kBlocks; ++b) ASSERT_EQ(refs[b], m.ref_count(b)) << "block " << b;
  };

  // One engine step for sequence q: reserve, execute copies, write, commit. False if exhausted.
  auto step = [&](Seq& q, int64_t new_len) {
    const int64_t free_before = m.num_free_blocks();
    const std::vector<BlockId> blocks_before = q.kv.blocks;
    std::vector<BlockCopy> copies;
    const Status s = m.Reserve(&q.kv, new_len, &copies);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
      EXPECT_EQ(m.num_free_blocks(), free_before);
      EXPECT_EQ(q.kv.blocks, blocks_before);
      EXPECT_TRUE(copies.empty());
      ++n_exhausted;
      return false;
    }
    for (const BlockCopy& c : copies) {
      std::copy_n(&slot[c.src * kBs], kBs, &slot[c.dst * kBs]);
      ++n_copies;
    }
    const std::vector<uint64_t> ids = prefix_ids(q.tokens);
    for (int64_t p = q.kv.num_computed; p < new_len; ++p) {
      slot[q.kv.blocks[p / kBs] * kBs + p % kBs] = ids[p];
    }
    m.Commit(&q.kv, q.tokens, new_len);
    return true;
  };

  for (int op = 0; op < 6000; ++op) {
    const int kind = uniform(0, 9);
    if (kind <= 1 || seqs.empty()) {  // a new sequence (a prompt from a shared prefix)
      Seq q;
      q.tokens = prefixes[uniform(0, 3)];
      const int extra = uniform(1, 9);
      for (int j = 0; j < extra; ++j) q.tokens.push_back(uniform(0, 3));
      q.prompt_len = static_cast<int64_t>(q.tokens.size());
      const int64_t admit = m.BlocksToAdmit(q.tokens, q.prompt_len);
      const int64_t free_before = m.num_free_blocks();
      const int64_t hit = m.MatchPrefix(q.tokens, &q.kv);
      ASSERT_LT(hit, q.prompt_len);
      // BlocksToAdmit predicted what the match took plus what the whole prompt still needs.
      ASSERT_EQ(admit, free_before - m.num_free_blocks() + m.BlocksNeeded(q.kv, q.prompt_len));
      seqs.push_back(std::move(q));
    } else if (kind <= 6) {  // a step: a prompt chunk or one decode token
      Seq& q = seqs[uniform(0, static_cast<int>(seqs.size()) - 1)];
      int64_t new_len;
      if (q.kv.num_computed < q.prompt_len) {
        new_len = std::min<int64_t>(q.prompt_len, q.kv.num_computed + uniform(1, 7));
      } else {
        q.tokens.resize(static_cast<size_t>(q.kv.num_computed));  // drop an unrun sample
        q.tokens.push_back(uniform(0, 3));
        new_len = q.kv.num_computed + 1;
      }
      if (!step(q, new_len) && uniform(0, 1) == 0) {
        // Preempt by recompute: free a random victim; it resumes from a prefix match.
        Seq& v = seqs[uniform(0, static_cast<int>(seqs.size()) - 1)];
        v.tokens.resize(static_cast<size_t>(v.kv.num_computed));
        if (v.tokens.empty()) v.tokens.push_back(uniform(0, 3));
        m.Free(&v.kv);
        v.prompt_len = static_cast<int64_t>(v.tokens.size());
        m.MatchPrefix(v.tokens, &v.kv);
      }
    } else if (kind == 7) {  // fork (n samples)
      Seq& q = seqs[uniform(0, static_cast<int>(seqs.size()) - 1)];
      Seq child;
      child.tokens.assign(q.tokens.begin(), q.tokens.begin() + q.kv.num_computed);
      child.prompt_len = q.kv.num_computed;
      m.Fork(q.kv, &child.kv);
      // The child's next decode token differs from the parent's: they diverge.
      seqs.push_back(std::move(child));
      ++n_forks;
    } else {  // finished or cancelled
      const size_t i = static_cast<size_t>(uniform(0, static_cast<int>(seqs.size()) - 1));
      m.Free(&seqs[i].kv);
      seqs.erase(seqs.begin() + static_cast<std::ptrdiff_t>(i));
    }
    check(op);
    if (HasFatalFailure()) return;
  }
  const KvStats st = m.stats();
  EXPECT_GT(st.prefix_hits_tokens, 0);
  EXPECT_GT(st.evictions, 0);
  EXPECT_GT(n_copies, 0);
  EXPECT_GT(n_exhausted, 0);
  EXPECT_GT(n_forks, 0);
  for (Seq& q : seqs) m.Free(&q.kv);
  seqs.clear();
  check(-1);
  const KvStats end = m.stats();
  EXPECT_EQ(end.used, 0);
  EXPECT_EQ(end.free + end.cached, end.total);
  EXPECT_EQ(m.num_free_blocks(), kBlocks);
}

INSTANTIATE_TEST_SUITE_P(Seeds, BlockManagerRandomTest, ::testing::Values(1234u, 7u, 99u, 2024u));

}  // namespace
}  // namespace kiln::llm
