// SPDX-License-Identifier: Apache-2.0
#include "llm/kv_blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace kiln::llm {
namespace {

// splitmix64's finalizer: a bijective 64-bit mix with full avalanche.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t BlockManager::ChainHash(uint64_t parent_hash, std::span<const int32_t> block_tokens) {
  uint64_t h = Mix64(parent_hash ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t t : block_tokens) {
    h = Mix64(h + 0x9e3779b97f4a7c15ULL + static_cast<uint32_t>(t));
  }
  return Mix64(h ^ static_cast<uint64_t>(block_tokens.size()));
}

BlockManager::BlockManager(int64_t num_blocks, int block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching) {
  KILN_CHECK(num_blocks >= 1 && num_blocks <= INT32_MAX, "num_blocks ", num_blocks);
  KILN_CHECK(block_size >= 1, "block_size ", block_size);
  const size_t n = static_cast<size_t>(num_blocks);
  refcount_.assign(n, 0);
  lru_prev_.assign(n, kNone);
  lru_next_.assign(n, kNone);
  in_lru_.assign(n, 0);
  registered_.assign(n, 0);
  hash_.assign(n, 0);
  parent_hash_.assign(n, 0);
  if (prefix_caching_) tokens_.assign(n * static_cast<size_t>(block_size), 0);
  free_.reserve(n);
  // Block 0 is allocated first (back of the stack): deterministic tables, readable tests.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<BlockId>(b));
}

bool BlockManager::BlockMatches(BlockId b, uint64_t hash, uint64_t parent_hash,
                                std::span<const int32_t> block_tokens) const {
  if (!registered_[b] || hash_[b] != hash || parent_hash_[b] != parent_hash) return false;
  return std::memcmp(&tokens_[static_cast<size_t>(b) * block_size_], block_tokens.data(),
                     block_tokens.size_bytes()) == 0;
}

int64_t BlockManager::FindPrefix(std::span<const int32_t> tokens, std::vector<BlockId>* found,
                                 std::vector<uint64_t>* hashes) const {
  if (!prefix_caching_ || tokens.empty()) return 0;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  uint64_t parent = kRootHash;
  int64_t n = 0;
  for (; n < max_blocks; ++n) {
    const auto block_tokens =
        tokens.subspan(static_cast<size_t>(n * block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = ChainHash(parent, block_tokens);
    const auto it = index_.find(h);
    if (it == index_.end() || !BlockMatches(it->second, h, parent, block_tokens)) break;
    if (found != nullptr) found->push_back(it->second);
    if (hashes != nullptr) hashes->push_back(h);
    parent = h;
  }
  return n * block_size_;
}

int64_t BlockManager::PeekPrefix(std::span<const int32_t> tokens) const {
  return FindPrefix(tokens, nullptr, nullptr);
}

int64_t BlockManager::MatchPrefix(std::span<const int32_t> tokens, SequenceBlocks* seq) {
  KILN_CHECK(seq != nullptr && seq->empty() && seq->hashes.empty(),
             "MatchPrefix needs an empty sequence");
  if (!prefix_caching_) return 0;
  std::vector<BlockId> found;
  std::vector<uint64_t> hashes;
  const int64_t matched = FindPrefix(tokens, &found, &hashes);
  for (BlockId b : found) {
    if (refcount_[b] == 0) LruRemove(b);  // cached -> used
    ++refcount_[b];
  }
  seq->blocks = std::move(found);
  seq->hashes = std::move(hashes);
  seq->num_computed = matched;
  prefix_queries_tokens_ += static_cast<int64_t>(tokens.size());
  prefix_hits_tokens_ += matched;
  return matched;
}

int64_t BlockManager::BlocksToAdmit(std::span<const int32_t> tokens, int64_t new_len) const {
  std::vector<BlockId> found;
  FindPrefix(tokens, &found, nullptr);
  int64_t n = 0;
  for (BlockId b : found) n += refcount_[b] == 0 ? 1 : 0;
  const int64_t need = (std::max<int64_t>(new_len, 0) + block_size_ - 1) / block_size_;
  return n + std::max<int64_t>(0, need - static_cast<int64_t>(found.size()));
}

int64_t BlockManager::BlocksNeeded(const SequenceBlocks& seq, int64_t new_len) const {
  if (new_len <= 0) return 0;
  const int64_t have = static_cast<int64_t>(seq.blocks.size());
  const int64_t need = (new_len + block_size_ - 1) / block_size_;
  int64_t n = std::max<int64_t>(0, need - have);
  if (new_len > seq.num_computed) {
    const int64_t last = std::min(have, need);
    for (int64_t i = seq.num_computed / block_size_; i < last; ++i) {
      if (refcount_[seq.blocks[i]] > 1) ++n;
    }
  }
  return n;
}

Status BlockManager::Reserve(SequenceBlocks* seq, int64_t new_len, std::vector<BlockCopy>* copies) {
  KILN_CHECK(seq != nullptr && copies != nullptr && new_len >= 0, "Reserve arguments");
  const int64_t needed = BlocksNeeded(*seq, new_len);
  const int64_t available = num_free_blocks();
  if (needed > available) {
    return Status::ResourceExhausted(
        fmt::format("KV cache: {} more blocks needed to hold {} positions, {} of {} allocatable",
                    needed, new_len, available, num_blocks()));
  }
  if (needed == 0) return Status::OK();
  const int64_t have = static_cast<int64_t>(seq->blocks.size());
  const int64_t need = (new_len + block_size_ - 1) / block_size_;
  if (new_len > seq->num_computed) {
    const int64_t last = std::min(have, need);
    for (int64_t i = seq->num_computed / block_size_; i < last; ++i) {
      const BlockId old = seq->blocks[i];
      if (refcount_[old] <= 1) continue;
      const BlockId fresh = Allocate();
      if (i * block_size_ < seq->num_computed) copies->push_back({old, fresh});
      --refcount_[old];  // still >= 1: another sequence holds it
      seq->blocks[i] = fresh;
    }
  }
  for (int64_t i = have; i < need; ++i) seq->blocks.push_back(Allocate());
  return Status::OK();
}

void BlockManager::Commit(SequenceBlocks* seq, std::span<const int32_t> tokens,
                          int64_t new_computed) {
  KILN_CHECK(seq != nullptr, "Commit: null sequence");
  const int64_t capacity = static_cast<int64_t>(seq->blocks.size()) * block_size_;
  KILN_CHECK(new_computed >= seq->num_computed && new_computed <= capacity &&
                 new_computed <= static_cast<int64_t>(tokens.size()),
             "Commit(", new_computed, ") with num_computed ", seq->num_computed, ", capacity ",
             capacity, ", ", tokens.size(), " tokens");
  seq->num_computed = new_computed;
  if (!prefix_caching_) return;
  while (static_cast<int64_t>(seq->hashes.size() + 1) * block_size_ <= new_computed) {
    const size_t i = seq->hashes.size();
    const uint64_t parent = i == 0 ? kRootHash : seq->hashes[i - 1];
    const auto block_tokens =
        tokens.subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = ChainHash(parent, block_tokens);
    seq->hashes.push_back(h);
    const BlockId b = seq->blocks[i];
    if (registered_[b]) continue;        // already the cache's entry (shared through Fork)
    if (index_.count(h) != 0) continue;  // dedupe: the registered twin stays the entry
    registered_[b] = 1;
    hash_[b] = h;
    parent_hash_[b] = parent;
    std::memcpy(&tokens_[static_cast<size_t>(b) * block_size_], block_tokens.data(),
                block_tokens.size_bytes());
    index_.emplace(h, b);
  }
}

void BlockManager::Fork(const SequenceBlocks& parent, SequenceBlocks* child) {
  KILN_CHECK(child != nullptr && child != &parent && child->empty() && child->hashes.empty(),
             "Fork needs an empty child");
  for (BlockId b : parent.blocks) {
    KILN_CHECK(refcount_[b] > 0, "Fork of a sequence holding unreferenced block ", b);
    ++refcount_[b];
  }
  child->blocks = parent.blocks;
  child->num_computed = parent.num_computed;
  child->hashes = parent.hashes;
}

void BlockManager::Free(SequenceBlocks* seq) {
  KILN_CHECK(seq != nullptr, "Free: null sequence");
  for (auto it = seq->blocks.rbegin(); it != seq->blocks.rend(); ++it) Release(*it);
  seq->blocks.clear();
  seq->hashes.clear();
  seq->num_computed = 0;
}

void BlockManager::ClearCache() {
  while (lru_head_ != kNone) {
    const BlockId b = lru_head_;
    LruRemove(b);
    Unregister(b);
    free_.push_back(b);
  }
}

BlockId BlockManager::Allocate() {
  BlockId b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    KILN_CHECK(lru_head_ != kNone, "Allocate with no allocatable block");
    b = lru_head_;
    LruRemove(b);
    Unregister(b);
    ++evictions_;
  }
  KILN_DCHECK(refcount_[b] == 0, "allocated block ", b, " has refcount ", refcount_[b]);
  refcount_[b] = 1;
  return b;
}

void BlockManager::Release(BlockId b) {
  KILN_CHECK(b >= 0 && b < num_blocks() && refcount_[b] > 0, "Release of block ", b);
  if (--refcount_[b] > 0) return;
  if (registered_[b]) {
    LruPushBack(b);
  } else {
    free_.push_back(b);
  }
}

void BlockManager::Unregister(BlockId b) {
  if (!registered_[b]) return;
  const auto it = index_.find(hash_[b]);
  if (it != index_.end() && it->second == b) index_.erase(it);
  registered_[b] = 0;
  hash_[b] = 0;
  parent_hash_[b] = 0;
}

void BlockManager::LruPushBack(BlockId b) {
  lru_prev_[b] = lru_tail_;
  lru_next_[b] = kNone;
  if (lru_tail_ != kNone) {
    lru_next_[lru_tail_] = b;
  } else {
    lru_head_ = b;
  }
  lru_tail_ = b;
  in_lru_[b] = 1;
  ++lru_size_;
}

void BlockManager::LruRemove(BlockId b) {
  KILN_DCHECK(in_lru_[b], "block ", b, " is not cached");
  const BlockId p = lru_prev_[b], n = lru_next_[b];
  if (p != kNone) {
    lru_next_[p] = n;
  } else {
    lru_head_ = n;
  }
  if (n != kNone) {
    lru_prev_[n] = p;
  } else {
    lru_tail_ = p;
  }
  lru_prev_[b] = lru_next_[b] = kNone;
  in_lru_[b] = 0;
  --lru_size_;
}

int64_t BlockManager::num_free_blocks() const {
  return static_cast<int64_t>(free_.size()) + lru_size_;
}

int32_t BlockManager::ref_count(BlockId b) const {
  KILN_CHECK(b >= 0 && b < num_blocks(), "block id ", b, " out of range");
  return refcount_[b];
}

KvStats BlockManager::stats() const {
  KvStats s;
  s.total = num_blocks();
  s.free = static_cast<int64_t>(free_.size());
  s.cached = lru_size_;
  s.used = s.total - s.free - s.cached;
  s.prefix_hits_tokens = prefix_hits_tokens_;
  s.prefix_queries_tokens = prefix_queries_tokens_;
  s.evictions = evictions_;
  return s;
}

Status BlockManager::CheckInvariants() const {
  const int64_t n = num_blocks();
  std::vector<uint8_t> in_free(static_cast<size_t>(n), 0);
  for (BlockId b : free_) {
    if (b < 0 || b >= n) return Status::Internal(fmt::format("free list holds id {}", b));
    if (in_free[b]) return Status::Internal(fmt::format("block {} twice in the free list", b));
    in_free[b] = 1;
    if (refcount_[b] != 0 || registered_[b] || in_lru_[b]) {
      return Status::Internal(fmt::format("free block {}: refcount {}, registered {}, cached {}", b,
                                          refcount_[b], registered_[b], in_lru_[b]));
    }
  }
  int64_t walked = 0;
  BlockId prev = kNone;
  for (BlockId b = lru_head_; b != kNone; b = lru_next_[b]) {
    if (b < 0 || b >= n || ++walked > n) return Status::Internal("LRU list is corrupt");
    if (!in_lru_[b] || lru_prev_[b] != prev) {
      return Status::Internal(fmt::format("LRU links of block {} disagree", b));
    }
    if (refcount_[b] != 0 || !registered_[b]) {
      return Status::Internal(fmt::format("cached block {}: refcount {}, registered {}", b,
                                          refcount_[b], registered_[b]));
    }
    prev = b;
  }
  if (prev != lru_tail_ || walked != lru_size_) {
    return Status::Internal(fmt::format("LRU list: walked {}, size {}", walked, lru_size_));
  }
  int64_t used = 0, registered = 0, in_lru = 0;
  for (BlockId b = 0; b < n; ++b) {
    if (refcount_[b] < 0) return Status::Internal(fmt::format("block {} refcount < 0", b));
    if (refcount_[b] > 0) ++used;
    if (refcount_[b] == 0 && !in_free[b] && !in_lru_[b]) {
      return Status::Internal(fmt::format("block {} is unreferenced, neither free nor cached", b));
    }
    if (refcount_[b] > 0 && (in_free[b] || in_lru_[b])) {
      return Status::Internal(fmt::format("block {} is referenced and free/cached", b));
    }
    in_lru += in_lru_[b];
    if (registered_[b]) {
      ++registered;
      const auto it = index_.find(hash_[b]);
      if (it == index_.end() || it->second != b) {
        return Status::Internal(fmt::format("registered block {} missing from the index", b));
      }
    }
  }
  if (registered != static_cast<int64_t>(index_.size())) {
    return Status::Internal(
        fmt::format("{} registered blocks, index holds {}", registered, index_.size()));
  }
  if (in_lru != lru_size_ || used + lru_size_ + static_cast<int64_t>(free_.size()) != n) {
    return Status::Internal(fmt::format("counts: used {} + cached {} + free {} != total {}", used,
                                        lru_size_, free_.size(), n));
  }
  return Status::OK();
}

}  // namespace kiln::llm
