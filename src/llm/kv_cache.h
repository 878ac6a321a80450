// SPDX-License-Identifier: Apache-2.0
#pragma once
// KvCache: the storage of the paged KV cache, plus the BlockManager (kv_blocks.h) that hands out
// its blocks. One anonymous memory mapping holds, for each layer, a K pool and a V pool in the
// cache's dtype (pages are committed as they are first written and returned to the system when
// the cache is destroyed):
//   V: [num_blocks][n_kv_heads][block_size][head_dim]  (a token's head is a contiguous row)
//   K: [num_blocks][n_kv_heads][head_dim][block_size]  (transposed within the block: dimension d
//      of the block's tokens is a contiguous run, what the attention kernel's q . k FMA loop
//      reads 16 keys at a time without transposing anything at attention time)
//
//   KvCacheConfig c{.n_layers = 22, .n_kv_heads = 4, .head_dim = 64};   // F16, 16-token blocks
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(c));
//   cache->blocks().Reserve(&seq, new_len, &copies);         // bookkeeping (scheduler thread)
//   for (const BlockCopy& cp : copies) cache->CopyBlock(cp.src, cp.dst);  // before writes
//   cache->WriteRows(layer, seq.blocks, pos0, n, k, ldk, v, ldv);   // the step's new K/V
//   PagedAttention(*cache, layer, ...);                       // attention.h reads the pools
//
// Dtypes: F32, F16 (IEEE half) and BF16 storage work on every CPU: values are converted when
// written (round to nearest even, as tensor/dtype.h) and widened when read (F16C / AVX-512 or
// scalar code, chosen at run time), so BF16 needs no AVX512-BF16 support. F16 halves the memory
// of F32 at <= 2^-11 (~5e-4) relative rounding error per element; BF16 keeps F32's range at
// <= 2^-8 (~4e-3).
//
// Budget: the pools take at most budget_bytes; budget_bytes = 0 means the default, a quarter of
// the MemAvailable that /proc/meminfo reports at Create, at most 16 GiB (1 GiB when /proc/meminfo
// cannot be read). max_blocks > 0 caps the number of blocks (with budget_bytes = 0 it alone sets
// it). Create fails when the result is less than one block.
//
// Thread safety: Write, WriteRows, CopyBlock and the reads may run concurrently when they touch
// distinct blocks (or only read); blocks() is the single-threaded BlockManager (the scheduler's
// thread). The cache must outlive every attention call reading it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "base/result.h"
#include "base/status.h"
#include "llm/kv_blocks.h"

namespace kiln::llm {

enum class KvDtype { kF32, kF16, kBF16 };

// "f32", "f16", "bf16".
std::string_view KvDtypeName(KvDtype dtype);
// Parses KvDtypeName's spellings (also "fp32", "fp16", "float32", "float16", "bfloat16").
Result<KvDtype> ParseKvDtype(std::string_view name);
// Bytes of one element: 4 or 2.
size_t KvDtypeBytes(KvDtype dtype);

struct KvCacheConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block, 1..1024
  KvDtype dtype = KvDtype::kF16;
  int64_t budget_bytes = 0;  // 0: the default (see above)
  int64_t max_blocks = 0;    // 0: as many as the budget holds
  bool prefix_caching = true;
};

class KvCache {
 public:
  // Validates the config (positive dimensions, block_size <= 1024, head_dim <= 4096), sizes the
  // cache and maps its memory. Errors: InvalidArgument for a bad config, ResourceExhausted when the
  // budget holds no block or the mapping fails.
  static Result<std::unique_ptr<KvCache>> Create(const KvCacheConfig& config);

  // The bytes one block takes over all layers, K and V: 2 * n_layers * n_kv_heads * block_size *
  // head_dim * KvDtypeBytes(dtype). REQUIRES: a config Create accepts.
  static int64_t BlockBytes(const KvCacheConfig& config);
  // The default budget described above, read now.
  static int64_t DefaultBudgetBytes();

  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return config_; }
  KvDtype dtype() const { return config_.dtype; }
  int n_layers() const { return config_.n_layers; }
  int n_kv_heads() const { return config_.n_kv_heads; }
  int head_dim() const { return config_.head_dim; }
  int block_size() const { return config_.block_size; }
  int64_t num_blocks() const { return num_blocks_; }
  size_t bytes() const { return bytes_; }
  BlockManager& blocks() { return blocks_; }
  const BlockManager& blocks() const { return blocks_; }

  // Stores the K and V of one token: k, v are F32 [n_kv_heads * head_dim] (head-major), converted
  // to the dtype. REQUIRES (checked): 0 <= layer < n_layers, 0 <= block < num_blocks,
  // 0 <= slot < block_size.
  void Write(int layer, BlockId block, int slot, const float* k, const float* v);
  // Stores positions [pos0, pos0 + n) of a sequence with block table `table`: row i of k (row
  // stride ldk floats) and of v (ldv) is position pos0 + i. REQUIRES (checked): the table covers
  // pos0 + n positions.
  void WriteRows(int layer, std::span<const BlockId> table, int64_t pos0, int64_t n, const float* k,
                 int64_t ldk, const float* v, int64_t ldv);
  // Reads back one token's K and V as F32 (for tests and debugging).
  void Read(int layer, BlockId block, int slot, float* k, float* v) const;
  // Copies block src to dst in every layer, K and V (executes a BlockCopy).
  void CopyBlock(BlockId src, BlockId dst);

  // The raw pools for the attention kernel: layer's K (V) base, in dtype(), with the layouts
  // above (K [num_blocks][n_kv_heads][head_dim][block_size], V [...][block_size][head_dim]).
  const void* k_pool(int layer) const;
  const void* v_pool(int layer) const;
  // Elements between consecutive blocks in a pool, and between consecutive heads of a block
  // (the same for K and V).
  int64_t block_stride() const { return head_stride() * config_.n_kv_heads; }
  int64_t head_stride() const { return int64_t{config_.block_size} * config_.head_dim; }

 private:
  KvCache(const KvCacheConfig& config, int64_t num_blocks, void* base, size_t bytes);
  uint8_t* pool(int layer, int which) const;  // which: 0 = K, 1 = V
  // Element offset of (block, head, slot, dimension 0) in the K pool / the V pool.
  int64_t KOffset(BlockId block, int head, int slot) const;
  int64_t VOffset(BlockId block, int head, int slot) const;

  const KvCacheConfig config_;
  const int64_t num_blocks_;
  uint8_t* const base_;
  const size_t bytes_;
  const size_t pool_bytes_;
  BlockManager blocks_;
};

}  // namespace kiln::llm
