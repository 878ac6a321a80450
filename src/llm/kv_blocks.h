// SPDX-License-Identifier: Apache-2.0
#pragma once
// BlockManager: the bookkeeping of the paged KV cache (vLLM's block manager). Pure data, no
// storage: it hands out block ids, counts references, plans copy-on-write and keeps the prefix
// cache. The storage (kv_cache.h) executes what it decides: KvCache::CopyBlock for each
// BlockCopy, KvCache::Write into the slots of a sequence's block table.
//
// The scheduler drives it once per step, for each sequence it schedules:
//
//   SequenceBlocks& sb = seq.kv;                       // owned by the caller's sequence table
//   if (sb.blocks.empty()) {                             // admission of a waiting sequence
//     if (mgr.BlocksToAdmit(seq.tokens, first_chunk_end) > mgr.num_free_blocks() - watermark)
//       { /* not now */ }
//     mgr.MatchPrefix(seq.tokens, &sb);                  // prefix-cache hit: skip those tokens
//   }
//   int64_t new_len = sb.num_computed + tokens_this_step;
//   if (mgr.BlocksNeeded(sb, new_len) > mgr.num_free_blocks()) { /* preempt a victim: Free */ }
//   std::vector<BlockCopy> copies;
//   KILN_RETURN_IF_ERROR(mgr.Reserve(&sb, new_len, &copies));  // all or nothing
//   for (const BlockCopy& c : copies) cache.CopyBlock(c.src, c.dst);
//   ... engine step writes K/V of positions [sb.num_computed, new_len) and attends ...
//   mgr.Commit(&sb, seq.tokens, new_len);               // hashes the blocks that became full
//   ...
//   mgr.Fork(sb, &child.kv);                             // n samples share the prompt's blocks
//   mgr.Free(&sb);                                       // finished, cancelled or preempted
//
// Preemption by recompute is Free: the victim's full, hashed blocks go to the prefix cache, so
// when it is scheduled again MatchPrefix usually finds most of them (unless evicted meanwhile).
//
// NOTE on the design.
//  - Block states: free (never used, or released without a hash), used (referenced by >= 1
//    sequence), cached (unreferenced but registered in the prefix cache: reusable by a hit,
//    reclaimable by eviction). num_free_blocks() = free + cached: both can be allocated.
//  - Allocation takes the free list first (most recently freed first), then evicts the least
//    recently released cached block. Free releases a sequence's blocks from its last to its first,
//    so a sequence's tail is evicted before its head (heads are what later prompts share).
//  - Prefix cache keys are chained: hash(block i) = H(hash(block i-1), tokens of block i), so a
//    block matches only behind the same whole prefix, never because its own 16 tokens happen to
//    be equal. Only full blocks whose every position is computed are registered (Commit); a
//    partial last block never is. A match also compares the stored tokens and the parent's hash
//    (a false hit needs a 64-bit collision of the chained hash of the previous block together with
//    equal tokens in this block).
//  - Dedupe policy: when a sequence fills a block whose chained hash is already registered to
//    another block (two sequences computed the same prefix at the same time, without a hit), the
//    registered block stays the cache's entry and the new one stays unregistered: it is a private
//    block of its sequence and goes to the free list when released. The sequence keeps the block
//    it wrote (no swap of its table in the middle of a generation).
//  - Copy-on-write: Fork shares every block. A later Reserve that writes into a shared block (the
//    partially filled last block, or a reserved but not yet computed one) gives the writer a new
//    block and reports a BlockCopy when the old one holds computed positions. Full computed
//    blocks are never written (writes start at num_computed), so shared prefixes are never copied.
//  - With prefix caching off, MatchPrefix matches nothing, Commit hashes nothing and released
//    blocks always go to the free list.
//
// Thread safety: none. The scheduler's thread owns the manager (and the SequenceBlocks it edits);
// every call, const ones included, must come from that thread or be otherwise serialized.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace kiln::llm {

using BlockId = int32_t;

// One sequence's KV state. Owned by the caller's sequence table; edited only through the
// BlockManager that filled it (never copy one to make a second owner: use Fork).
struct SequenceBlocks {
  // The block table: position p lives in blocks[p / block_size], slot p % block_size.
  std::vector<BlockId> blocks;
  // Positions [0, num_computed) hold valid K/V.
  int64_t num_computed = 0;
  // The chained hash of each full, committed block (prefix cache keys), hashes[i] for blocks[i].
  // Filled only with prefix caching on.
  std::vector<uint64_t> hashes;

  bool empty() const { return blocks.empty() && num_computed == 0; }
};

// Copy-on-write work for the storage: copy block src to dst (every layer) before the step that
// follows Reserve writes anything.
struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
};

struct KvStats {
  int64_t total = 0;   // blocks managed
  int64_t used = 0;    // referenced by at least one sequence
  int64_t free = 0;    // never used, or released without a prefix-cache entry
  int64_t cached = 0;  // unreferenced but holding a reusable prefix (allocatable by eviction)
  int64_t prefix_hits_tokens = 0;     // tokens MatchPrefix found cached
  int64_t prefix_queries_tokens = 0;  // tokens MatchPrefix was asked about (prompt lengths)
  int64_t evictions = 0;              // cached blocks reclaimed for a new allocation
};

class BlockManager {
 public:
  // REQUIRES: 1 <= num_blocks <= INT32_MAX, block_size >= 1 (KvCache::Create validates).
  BlockManager(int64_t num_blocks, int block_size, bool prefix_caching);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // For a new sequence (REQUIRES: seq->empty()): claims the cached (or in-use) blocks whose chained
  // hashes match the leading full blocks of `tokens`, takes a reference on each, sets
  // seq->blocks, seq->hashes and seq->num_computed, and returns the number of tokens matched (a
  // multiple of block_size). Never matches all of `tokens`: at most (size - 1) / block_size blocks,
  // so at least one token is left to compute and the caller gets its logits. Counts the query and
  // the hit in stats(). Returns 0 with prefix caching off.
  int64_t MatchPrefix(std::span<const int32_t> tokens, SequenceBlocks* seq);

  // What MatchPrefix would return for `tokens` now, changing nothing (no references, no stats).
  int64_t PeekPrefix(std::span<const int32_t> tokens) const;

  // Admission of a new sequence: how many allocatable blocks (num_free_blocks())
  // MatchPrefix(tokens) followed by Reserve(new_len) would take: the matched blocks that are cached
  // now (a hit on a cached block takes it off the allocatable pool; a hit on a block in use costs
  // nothing) plus the blocks past the match up to ceil(new_len / block_size). Pure.
  int64_t BlocksToAdmit(std::span<const int32_t> tokens, int64_t new_len) const;

  // The number of blocks Reserve(seq, new_len) would allocate: the blocks past the table's end up
  // to ceil(new_len / block_size), plus one for each shared block (refcount > 1) that the write
  // of positions [num_computed, new_len) would touch (copy-on-write). Pure.
  int64_t BlocksNeeded(const SequenceBlocks& seq, int64_t new_len) const;

  // Makes seq's table cover positions [0, new_len): copy-on-writes the shared blocks the step will
  // write (appending a BlockCopy to `copies` for each one that holds computed positions) and
  // appends new blocks (free list first, then evicting LRU cached blocks). All or nothing: when
  // fewer than BlocksNeeded(seq, new_len) blocks are allocatable it returns ResourceExhausted and
  // changes nothing. A new_len inside the current table allocates nothing (the table never
  // shrinks here). REQUIRES: new_len >= 0, copies != nullptr.
  Status Reserve(SequenceBlocks* seq, int64_t new_len, std::vector<BlockCopy>* copies);

  // Records that positions [0, new_computed) of seq now hold K/V computed for `tokens` (the
  // sequence's whole token list so far, prompt and generated). With prefix caching, hashes each
  // block that became full and registers it (see the dedupe policy above).
  // REQUIRES: seq->num_computed <= new_computed <= min(tokens.size(), table capacity), and
  // tokens[0, seq->num_computed) are the tokens the earlier calls committed.
  void Commit(SequenceBlocks* seq, std::span<const int32_t> tokens, int64_t new_computed);

  // child shares all of parent's blocks (a reference each), num_computed and hashes: n samples of
  // one prompt. REQUIRES: child->empty(), child != &parent.
  void Fork(const SequenceBlocks& parent, SequenceBlocks* child);

  // Releases the sequence's blocks, last to first (refcount--; at 0 a registered block becomes
  // cached, most recently released last in the LRU order, any other becomes free). seq becomes
  // empty. Safe on an empty sequence.
  void Free(SequenceBlocks* seq);

  // Drops every cached block to the free list (the prefix cache forgets everything unreferenced).
  void ClearCache();

  // Blocks an allocation can take now: free + cached.
  int64_t num_free_blocks() const;
  int64_t num_blocks() const { return static_cast<int64_t>(refcount_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  KvStats stats() const;
  // The reference count of block b (0 when free or cached). REQUIRES: 0 <= b < num_blocks().
  int32_t ref_count(BlockId b) const;

  // For tests: checks the internal structures agree (every block in exactly one state, free list
  // and LRU list without duplicates, refcounts >= 0, the hash index pointing at registered blocks
  // only, counts summing to the total). An Internal error names the first disagreement.
  Status CheckInvariants() const;

  // The chained hash of a block: parent_hash (kRootHash for the first block) and its tokens.
  static uint64_t ChainHash(uint64_t parent_hash, std::span<const int32_t> block_tokens);
  static constexpr uint64_t kRootHash = 0x6b696c6e2d6b7631ULL;  // "kiln-kv1"

 private:
  static constexpr BlockId kNone = -1;

  // Walks the chain over `tokens` and returns the blocks that match (at most `max_blocks`),
  // with their hashes.
  int64_t FindPrefix(std::span<const int32_t> tokens, std::vector<BlockId>* found,
                     std::vector<uint64_t>* hashes) const;
  bool BlockMatches(BlockId b, uint64_t hash, uint64_t parent_hash,
                    std::span<const int32_t> block_tokens) const;
  BlockId Allocate();  // REQUIRES: num_free_blocks() > 0; returns a block with refcount 1
  void Release(BlockId b);
  void Unregister(BlockId b);
  void LruPushBack(BlockId b);
  void LruRemove(BlockId b);

  const int block_size_;
  const bool prefix_caching_;
  std::vector<int32_t> refcount_;
  std::vector<BlockId> free_;  // stack: back() is allocated next
  // Intrusive LRU list of cached blocks: head_ = least recently released (evicted first).
  std::vector<BlockId> lru_prev_, lru_next_;
  std::vector<uint8_t> in_lru_;
  BlockId lru_head_ = kNone, lru_tail_ = kNone;
  int64_t lru_size_ = 0;
  // Prefix cache entries: registered_[b] says b is the index's block for hash_[b].
  std::vector<uint8_t> registered_;
  std::vector<uint64_t> hash_, parent_hash_;
  std::vector<int32_t> tokens_;  // [num_blocks * block_size]: tokens of registered blocks
  std::unordered_map<uint64_t, BlockId> index_;
  int64_t prefix_hits_tokens_ = 0, prefix_queries_tokens_ = 0, evictions_ = 0;
};

}  // namespace kiln::llm
