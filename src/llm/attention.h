// SPDX-License-Identifier: Apache-2.0
#pragma once
// Paged attention over a flattened batch: each sequence's queries (a prompt chunk or one decode
// token) against the K/V its block table points at in a KvCache, causal, with grouped-query
// attention (query head h reads KV head h / (n_heads / n_kv_heads)).
//
//   std::vector<AttentionSeq> seqs = {{seq_a.blocks, /*pos0=*/0, /*n_q=*/512, /*row0=*/0},
//                                     {seq_b.blocks, /*pos0=*/77, /*n_q=*/1, /*row0=*/512}};
//   // K/V of positions [pos0, pos0 + n_q) already written (KvCache::WriteRows)
//   PagedAttention(cache, layer, seqs, n_heads, /*scale=*/0, q, ldq, out, ldo);
//
// NOTE on the kernel (flash-attention style). Work items are (sequence, KV head, query tile): a
// tile is up to ~64 query rows, the rows being (query position, query head of the group), so the
// n_heads / n_kv_heads heads of a group share every K/V load. An item walks the visible keys in
// tiles of 16 positions. K is stored transposed within a block (kv_cache.h), so with a block size
// that is a multiple of 16 a tile's K is read in place, 16 keys of one dimension per load (F16
// widened by F16C / AVX-512, BF16 by a 16-bit shift, in registers), and V rows likewise (for
// many rows, V is widened once into a scratch tile instead); other block sizes gather the tile
// into an F32 [head_dim][16] scratch. For each row: the 16 scores (q . k, FMA over head_dim),
// the online softmax update (running max m and sum l; the accumulator is rescaled by
// exp(m_old - m_new)) and out += p V. Causality within a prompt chunk: a row sees keys
// [0, its position]; a key tile past a row's position is skipped, a partial one masked. Items are
// split over the OpenMP team by estimated cost (rows x keys), so one long prefill and many short
// decodes both spread over the threads.
//
// Each output row is the same sequence of FP32 operations whatever else is in the batch and
// however the work is split (items never share a row; the key order is fixed): batch invariant at
// a given ISA level. The levels differ in rounding (FMA, polynomial exp) by ~1e-6 relative.
//
// ISA: AVX-512 and AVX2 (+F16C for F16 caches) kernels when head_dim is a multiple of 16; any
// other head_dim (or a CPU without them) runs the portable scalar tile kernel, same algorithm.
//
// Thread safety: PagedAttention runs on the calling thread's OpenMP team (ParallelFor) and only
// reads the cache; concurrent calls are safe while nothing writes the blocks they read.

#include <cstdint>
#include <span>

#include "llm/kv_blocks.h"
#include "llm/kv_cache.h"

namespace kiln::llm {

// One sequence's part of the batch: its queries are rows [row0, row0 + n_q) of q (and out), at
// positions pos0, pos0 + 1, ...; query i sees key positions [0, pos0 + i].
struct AttentionSeq {
  std::span<const BlockId> blocks;  // the sequence's block table
  int64_t pos0 = 0;
  int64_t n_q = 0;
  int64_t row0 = 0;
};

// q: F32 [T, n_heads * head_dim] (row stride ldq floats, head-major within a row); out: the same
// shape (row stride ldo); rows not covered by a sequence are not written. scale <= 0 means
// 1 / sqrt(head_dim). K/V come from cache's pools of `layer`; the K/V of every visible position
// (the queries' own included) must already be written.
// REQUIRES (checked, a bug otherwise): 0 <= layer < cache.n_layers(), n_heads a positive multiple
// of cache.n_kv_heads(), each sequence's table covering pos0 + n_q positions with valid block ids,
// pos0 >= 0, n_q >= 0, row0 >= 0, ldq and ldo >= n_heads * head_dim, out not overlapping q.
void PagedAttention(const KvCache& cache, int layer, std::span<const AttentionSeq> seqs,
                    int n_heads, float scale, const float* q, int64_t ldq, float* out, int64_t ldo);

namespace ref {
// The oracle: for each query and head, every visible score in double, softmax in double, the
// weighted sum of V in double, rounded to float. Reads K/V through KvCache::Read semantics.
void PagedAttention(const KvCache& cache, int layer, std::span<const AttentionSeq> seqs,
                    int n_heads, float scale, const float* q, int64_t ldq, float* out, int64_t ldo);
}  // namespace ref

// Not API: the per-ISA pieces shared by attention.cc and kv_cache.cc.
namespace attention_internal {

inline constexpr int kKeyTile = 16;

// One key tile (up to 16 consecutive positions) against a group of query rows (see the NOTE).
// Rows are contiguous in q and o (row stride head_dim).
struct TileArgs {
  const float* q = nullptr;         // [rows][D] scaled queries
  float* o = nullptr;               // [rows][D] unnormalized outputs
  float* m = nullptr;               // [rows] running max
  float* l = nullptr;               // [rows] running sum
  const int32_t* nvalid = nullptr;  // [rows] visible keys of this tile, 1..n
  int rows = 0;
  int d = 0;  // head_dim
  // K of the tile, transposed: key j's dimension i at k[i * k_stride + j] (k_dtype elements).
  // All 16 lanes are readable; lanes >= n (or >= nvalid) are masked out of the softmax.
  const void* k = nullptr;
  int64_t k_stride = 0;
  KvDtype k_dtype = KvDtype::kF32;
  const void* const* v = nullptr;  // [n] V rows of D v_dtype elements
  KvDtype v_dtype = KvDtype::kF32;
  int n = 0;           // keys in the tile, 1..16
  float* p = nullptr;  // scratch [rows][16]
};

struct TileKernels {
  // Whether tile() reads F16 / BF16 K and V itself (else the caller widens them to F32 first).
  bool typed = false;
  // vt[j * D + i] = V row j widened, j < n.
  void (*load_v)(KvDtype dtype, const void* const* rows, int n, int d, float* vt);
  void (*tile)(const TileArgs& a);
};

// The kernels for the active ISA and this head_dim / dtype.
const TileKernels& SelectTileKernels(KvDtype dtype, int head_dim);

// Narrow n floats to the cache dtype (round to nearest even) / widen back.
void StoreRow(KvDtype dtype, const float* x, void* dst, int64_t n);
void LoadRow(KvDtype dtype, const void* src, float* y, int64_t n);

namespace scalar {
extern const TileKernels kKernels;
void StoreRow(KvDtype dtype, const float* x, void* dst, int64_t n);
}  // namespace scalar
namespace avx2 {  // AVX2 + FMA + F16C
extern const TileKernels kKernels;
void StoreRow(KvDtype dtype, const float* x, void* dst, int64_t n);
void LoadVTile(KvDtype dtype, const void* const* rows, int n, int d, float* vt);
}  // namespace avx2
namespace avx512 {
extern const TileKernels kKernels;
}  // namespace avx512

}  // namespace attention_internal
}  // namespace kiln::llm
