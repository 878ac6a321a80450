// SPDX-License-Identifier: Apache-2.0
#include "llm/kv_cache.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "base/check.h"
#include "llm/attention.h"

namespace kiln::llm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int kMaxBlockSize = 1024;
constexpr int kMaxHeadDim = 4096;

// Bytes of one pool's block (one layer, K or V): n_kv_heads * block_size * head_dim elements.
int64_t PoolBlockBytes(const KvCacheConfig& c) {
  return int64_t{c.n_kv_heads} * c.block_size * c.head_dim *
         static_cast<int64_t>(KvDtypeBytes(c.dtype));
}

}  // namespace

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBF16:
      return "bf16";
  }
  return "?";
}

Result<KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return KvDtype::kF32;
  if (name == "f16" || name == "fp16" || name == "float16") return KvDtype::kF16;
  if (name == "bf16" || name == "bfloat16") return KvDtype::kBF16;
  return Status::InvalidArgument(
      fmt::format("KV cache dtype '{}' is not supported (supported: f32, f16, bf16)", name));
}

size_t KvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

int64_t KvCache::BlockBytes(const KvCacheConfig& config) {
  return 2 * int64_t{config.n_layers} * PoolBlockBytes(config);
}

int64_t KvCache::DefaultBudgetBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") {
      return std::min<int64_t>(value * 1024 / 4, 16 * kGiB);  // the file says kB (KiB)
    }
  }
  return kGiB;
}

Result<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheConfig& config) {
  const KvCacheConfig& c = config;
  if (c.n_layers <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 || c.head_dim > kMaxHeadDim ||
      c.n_kv_heads > 4096 || c.n_layers > 4096) {
    return Status::InvalidArgument(
        fmt::format("KV cache: n_layers {}, n_kv_heads {}, head_dim {}: each must be in 1..4096",
                    c.n_layers, c.n_kv_heads, c.head_dim));
  }
  if (c.block_size <= 0 || c.block_size > kMaxBlockSize) {
    return Status::InvalidArgument(
        fmt::format("KV cache: block_size {} is outside 1..{}", c.block_size, kMaxBlockSize));
  }
  if (c.dtype != KvDtype::kF32 && c.dtype != KvDtype::kF16 && c.dtype != KvDtype::kBF16) {
    return Status::InvalidArgument("KV cache: unknown dtype");
  }
  if (c.budget_bytes < 0 || c.max_blocks < 0) {
    return Status::InvalidArgument(fmt::format(
        "KV cache: budget_bytes {} and max_blocks {} must be >= 0", c.budget_bytes, c.max_blocks));
  }
  const int64_t block_bytes = BlockBytes(c);  // <= 2 * 4096^3 * 1024 * 4: no overflow
  int64_t num_blocks;
  if (c.budget_bytes == 0 && c.max_blocks > 0) {
    num_blocks = c.max_blocks;
  } else {
    const int64_t budget = c.budget_bytes > 0 ? c.budget_bytes : DefaultBudgetBytes();
    num_blocks = budget / block_bytes;
    if (c.max_blocks > 0) num_blocks = std::min(num_blocks, c.max_blocks);
    if (num_blocks < 1) {
      return Status::ResourceExhausted(fmt::format(
          "KV cache budget of {} bytes{} holds no block: one block of {} tokens takes {} bytes "
          "({} layers x K,V x {} KV heads x head_dim {} x {})",
          budget, c.budget_bytes > 0 ? "" : " (the default share of available memory)",
          c.block_size, block_bytes, c.n_layers, c.n_kv_heads, c.head_dim, KvDtypeName(c.dtype)));
    }
  }
  num_blocks = std::min<int64_t>(num_blocks, std::numeric_limits<int32_t>::max());
  if (num_blocks > std::numeric_limits<int64_t>::max() / block_bytes) {
    return Status::InvalidArgument(fmt::format("KV cache: {} blocks overflow", num_blocks));
  }
  const int64_t total = num_blocks * block_bytes;
  void* base = mmap(nullptr, static_cast<size_t>(total), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return Status::ResourceExhausted(
        fmt::format("KV cache: cannot map {} bytes ({} blocks of {} bytes): {}", total, num_blocks,
                    block_bytes, std::strerror(errno)));
  }
#ifdef MADV_HUGEPAGE
  madvise(base, static_cast<size_t>(total), MADV_HUGEPAGE);  // advice only: failure is fine
#endif
  return std::unique_ptr<KvCache>(new KvCache(c, num_blocks, base, static_cast<size_t>(total)));
}

KvCache::KvCache(const KvCacheConfig& config, int64_t num_blocks, void* base, size_t bytes)
    : config_(config),
      num_blocks_(num_blocks),
      base_(static_cast<uint8_t*>(base)),
      bytes_(bytes),
      pool_bytes_(static_cast<size_t>(num_blocks * PoolBlockBytes(config))),
      blocks_(num_blocks, config.block_size, config.prefix_caching) {}

KvCache::~KvCache() { munmap(base_, bytes_); }

uint8_t* KvCache::pool(int layer, int which) const {
  KILN_CHECK(layer >= 0 && layer < config_.n_layers, "KV cache layer ", layer, " of ",
             config_.n_layers);
  return base_ + (2 * static_cast<size_t>(layer) + which) * pool_bytes_;
}

const void* KvCache::k_pool(int layer) const { return pool(layer, 0); }
const void* KvCache::v_pool(int layer) const { return pool(layer, 1); }

int64_t KvCache::KOffset(BlockId block, int head, int slot) const {
  return int64_t{block} * block_stride() + int64_t{head} * head_stride() + slot;
}

int64_t KvCache::VOffset(BlockId block, int head, int slot) const {
  return int64_t{block} * block_stride() + int64_t{head} * head_stride() +
         int64_t{slot} * config_.head_dim;
}

void KvCache::Write(int layer, BlockId block, int slot, const float* k, const float* v) {
  KILN_CHECK(block >= 0 && block < num_blocks_ && slot >= 0 && slot < config_.block_size,
             "KV cache write to block ", block, " slot ", slot);
  const KvDtype dtype = config_.dtype;
  const size_t elem = KvDtypeBytes(dtype);
  const int d = config_.head_dim;
  const int bs = config_.block_size;
  uint8_t* kp = pool(layer, 0);
  uint8_t* vp = pool(layer, 1);
  // K: narrowed as a row (vectorized), then scattered down the block's [head_dim][block_size].
  uint32_t narrowed[kMaxHeadDim];  // head_dim elements of 2 or 4 bytes
  for (int h = 0; h < config_.n_kv_heads; ++h) {
    attention_internal::StoreRow(dtype, k + int64_t{h} * d, narrowed, d);
    uint8_t* dst = kp + static_cast<size_t>(KOffset(block, h, slot)) * elem;
    if (elem == 4) {
      const float* src = reinterpret_cast<const float*>(narrowed);
      float* out = reinterpret_cast<float*>(dst);
      for (int i = 0; i < d; ++i) out[int64_t{i} * bs] = src[i];
    } else {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(narrowed);
      uint16_t* out = reinterpret_cast<uint16_t*>(dst);
      for (int i = 0; i < d; ++i) out[int64_t{i} * bs] = src[i];
    }
    attention_internal::StoreRow(dtype, v + int64_t{h} * d,
                                 vp + static_cast<size_t>(VOffset(block, h, slot)) * elem, d);
  }
}

void KvCache::WriteRows(int layer, std::span<const BlockId> table, int64_t pos0, int64_t n,
                        const float* k, int64_t ldk, const float* v, int64_t ldv) {
  const int bs = config_.block_size;
  KILN_CHECK(pos0 >= 0 && n >= 0 && pos0 + n <= static_cast<int64_t>(table.size()) * bs,
             "KV cache WriteRows of positions [", pos0, ", ", pos0 + n, ") with a table of ",
             table.size(), " blocks");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    Write(layer, table[p / bs], static_cast<int>(p % bs), k + i * ldk, v + i * ldv);
  }
}

void KvCache::Read(int layer, BlockId block, int slot, float* k, float* v) const {
  KILN_CHECK(block >= 0 && block < num_blocks_ && slot >= 0 && slot < config_.block_size,
             "KV cache read of block ", block, " slot ", slot);
  const KvDtype dtype = config_.dtype;
  const size_t elem = KvDtypeBytes(dtype);
  const int d = config_.head_dim;
  const int bs = config_.block_size;
  const uint8_t* kp = pool(layer, 0);
  const uint8_t* vp = pool(layer, 1);
  uint32_t gathered[kMaxHeadDim];
  for (int h = 0; h < config_.n_kv_heads; ++h) {
    const uint8_t* src = kp + static_cast<size_t>(KOffset(block, h, slot)) * elem;
    for (int i = 0; i < d; ++i) {
      std::memcpy(reinterpret_cast<uint8_t*>(gathered) + i * elem,
                  src + static_cast<size_t>(i) * bs * elem, elem);
    }
    attention_internal::LoadRow(dtype, gathered, k + int64_t{h} * d, d);
    attention_internal::LoadRow(dtype, vp + static_cast<size_t>(VOffset(block, h, slot)) * elem,
                                v + int64_t{h} * d, d);
  }
}

void KvCache::CopyBlock(BlockId src, BlockId dst) {
  KILN_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_, "KV cache CopyBlock ",
             src, " -> ", dst);
  if (src == dst) return;
  const size_t block_bytes = static_cast<size_t>(PoolBlockBytes(config_));
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    for (int which = 0; which < 2; ++which) {
      uint8_t* p = pool(layer, which);
      std::memcpy(p + static_cast<size_t>(dst) * block_bytes,
                  p + static_cast<size_t>(src) * block_bytes, block_bytes);
    }
  }
}

}  // namespace kiln::llm
