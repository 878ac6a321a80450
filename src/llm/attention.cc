// SPDX-License-Identifier: Apache-2.0
// Paged attention: the work split and tile loop (ISA-independent), the scalar tile kernels, the
// reference, and the cache's row conversions. The AVX2 / AVX-512 tile kernels are in
// attention_avx2.cc / attention_avx512.cc.
#include "llm/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/half_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "tensor/dtype.h"

namespace kiln::llm {
namespace attention_internal {

namespace scalar {
namespace {

void LoadVTile(KvDtype dtype, const void* const* rows, int n, int d, float* vt) {
  for (int j = 0; j < n; ++j) LoadRow(dtype, rows[j], vt + static_cast<size_t>(j) * d, d);
}

// F32 K and V only (typed = false).
void Tile(const TileArgs& a) {
  const int d = a.d;
  const float* kt = static_cast<const float*>(a.k);
  for (int r = 0; r < a.rows; ++r) {
    const float* q = a.q + static_cast<size_t>(r) * d;
    float s[kKeyTile] = {};
    for (int i = 0; i < d; ++i) {
      const float qi = q[i];
      const float* k = kt + i * a.k_stride;
      for (int j = 0; j < kKeyTile; ++j) s[j] += qi * k[j];
    }
    const int nv = a.nvalid[r];
    float mx = s[0];
    for (int j = 1; j < nv; ++j) mx = std::max(mx, s[j]);
    const float m_new = std::max(a.m[r], mx);
    const float alpha = std::exp(a.m[r] - m_new);
    float* p = a.p + static_cast<size_t>(r) * kKeyTile;
    float sum = 0.0f;
    for (int j = 0; j < nv; ++j) {
      p[j] = std::exp(s[j] - m_new);
      sum += p[j];
    }
    a.l[r] = a.l[r] * alpha + sum;
    a.m[r] = m_new;
    float* o = a.o + static_cast<size_t>(r) * d;
    for (int i = 0; i < d; ++i) o[i] *= alpha;
    for (int j = 0; j < nv; ++j) {
      const float pj = p[j];
      const float* v = static_cast<const float*>(a.v[j]);
      for (int i = 0; i < d; ++i) o[i] += pj * v[i];
    }
  }
}

}  // namespace

const TileKernels kKernels = {/*typed=*/false, &LoadVTile, &Tile};

void StoreRow(KvDtype dtype, const float* x, void* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvDtype::kF16: {
      uint16_t* y = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = FloatToFloat16(x[i]).bits;
      return;
    }
    case KvDtype::kBF16: {
      uint16_t* y = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = FloatToBFloat16(x[i]).bits;
      return;
    }
  }
}

}  // namespace scalar

const TileKernels& SelectTileKernels(KvDtype dtype, int head_dim) {
  const cpu::Isa isa = cpu::ActiveIsa();
  if (head_dim % 16 == 0) {
    if (isa >= cpu::Isa::kAvx512) return avx512::kKernels;
    if (isa >= cpu::Isa::kAvx2 && (dtype != KvDtype::kF16 || cpu::CpuHasF16C())) {
      return avx2::kKernels;
    }
  }
  return scalar::kKernels;
}

void StoreRow(KvDtype dtype, const float* x, void* dst, int64_t n) {
  if (dtype != KvDtype::kF32 && cpu::ActiveIsa() >= cpu::Isa::kAvx2 && cpu::CpuHasF16C()) {
    avx2::StoreRow(dtype, x, dst, n);
  } else {
    scalar::StoreRow(dtype, x, dst, n);
  }
}

void LoadRow(KvDtype dtype, const void* src, float* y, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(y, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvDtype::kF16:
      cpu::HalfToFloat(DataType::kFloat16, static_cast<const uint16_t*>(src), y, n);
      return;
    case KvDtype::kBF16:
      cpu::HalfToFloat(DataType::kBFloat16, static_cast<const uint16_t*>(src), y, n);
      return;
  }
}

}  // namespace attention_internal

namespace {

using attention_internal::kKeyTile;
using attention_internal::TileArgs;
using attention_internal::TileKernels;

constexpr int64_t kTargetRows = 64;  // query rows per work item (positions x group heads)

struct Item {
  int32_t seq;
  int32_t kv_head;
  int64_t i0, i1;  // query indexes within the sequence
};

// What every work item shares.
struct Ctx {
  const uint8_t* k_pool;
  const uint8_t* v_pool;
  KvDtype dtype;
  size_t elem;
  int bs, d, group;
  int64_t block_stride, head_stride;
  float scale;
  const float* q;
  int64_t ldq;
  float* out;
  int64_t ldo;
  const TileKernels* kernels;
};

// Per-thread scratch, grown on demand and kept for later calls (no allocation in steady state).
float* ScratchFloats(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n + 16) buf.resize(n + 16);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

size_t Round16(size_t n) { return (n + 15) & ~size_t{15}; }

// kt[i * 16 + j] = K of position j0 + j, dimension i, widened (0 for j >= n).
void GatherK(const Ctx& c, const AttentionSeq& s, int64_t head_off, int64_t j0, int n, float* kt) {
  std::fill(kt, kt + static_cast<size_t>(c.d) * kKeyTile, 0.0f);
  for (int j = 0; j < n; ++j) {
    const int64_t pos = j0 + j;
    const int64_t base = s.blocks[pos / c.bs] * c.block_stride + head_off + pos % c.bs;
    for (int i = 0; i < c.d; ++i) {
      const int64_t e = base + int64_t{i} * c.bs;
      float x;
      switch (c.dtype) {
        case KvDtype::kF32:
          x = reinterpret_cast<const float*>(c.k_pool)[e];
          break;
        case KvDtype::kF16:
          x = Float16ToFloat(Float16{reinterpret_cast<const uint16_t*>(c.k_pool)[e]});
          break;
        default:
          x = BFloat16ToFloat(BFloat16{reinterpret_cast<const uint16_t*>(c.k_pool)[e]});
          break;
      }
      kt[i * kKeyTile + j] = x;
    }
  }
}

void RunItem(const Ctx& c, const AttentionSeq& s, const Item& it) {
  const int d = c.d;
  const int g = c.group;
  const int rows = static_cast<int>((it.i1 - it.i0) * g);
  // Scratch: q [rows][d], o [rows][d], p [rows][16], m, l [rows], kt [d][16], vt [16][d].
  const size_t rd = Round16(static_cast<size_t>(rows) * d);
  const size_t r16 = Round16(static_cast<size_t>(rows));
  const size_t dk = static_cast<size_t>(d) * kKeyTile;
  float* qs = ScratchFloats(2 * rd + rows * size_t{kKeyTile} + 2 * r16 + 2 * dk);
  float* o = qs + rd;
  float* p = o + rd;
  float* m = p + static_cast<size_t>(rows) * kKeyTile;
  float* l = m + r16;
  float* kt = l + r16;
  float* vt = kt + dk;
  thread_local std::vector<int32_t> nvalid_buf;
  if (nvalid_buf.size() < static_cast<size_t>(rows)) nvalid_buf.resize(static_cast<size_t>(rows));
  int32_t* nvalid = nvalid_buf.data();

  for (int64_t i = it.i0; i < it.i1; ++i) {
    const float* qrow = c.q + (s.row0 + i) * c.ldq + static_cast<int64_t>(it.kv_head) * g * d;
    for (int h = 0; h < g; ++h) {
      float* dst = qs + ((i - it.i0) * g + h) * d;
      for (int e = 0; e < d; ++e) dst[e] = qrow[h * d + e] * c.scale;
    }
  }
  std::fill(o, o + static_cast<size_t>(rows) * d, 0.0f);
  std::fill(m, m + rows, -std::numeric_limits<float>::infinity());
  std::fill(l, l + rows, 0.0f);

  const void* vrows[kKeyTile];
  const void* vptr[kKeyTile];
  const int64_t last_key = s.pos0 + it.i1 - 1;  // inclusive
  const int64_t head_off = static_cast<int64_t>(it.kv_head) * c.head_stride;
  // K straight from the block when a 16-key tile never crosses a block (and the kernel reads
  // the dtype); else gathered into kt as F32.
  const bool k_in_place = c.bs % kKeyTile == 0 && (c.kernels->typed || c.dtype == KvDtype::kF32);
  // V rows in place when the kernel reads the dtype and few rows share them; else widened once.
  const bool v_in_place = c.dtype == KvDtype::kF32 || (c.kernels->typed && rows <= 16);
  for (int64_t j0 = 0; j0 <= last_key; j0 += kKeyTile) {
    const int n = static_cast<int>(std::min<int64_t>(kKeyTile, last_key - j0 + 1));
    TileArgs a;
    if (k_in_place) {
      a.k = c.k_pool + (s.blocks[j0 / c.bs] * c.block_stride + head_off + j0 % c.bs) *
                           static_cast<int64_t>(c.elem);
      a.k_stride = c.bs;
      a.k_dtype = c.dtype;
    } else {
      GatherK(c, s, head_off, j0, n, kt);
      a.k = kt;
      a.k_stride = kKeyTile;
      a.k_dtype = KvDtype::kF32;
    }
    if (c.bs % kKeyTile == 0) {  // the whole tile is in one block: consecutive V rows
      const uint8_t* v0 =
          c.v_pool + (s.blocks[j0 / c.bs] * c.block_stride + head_off + (j0 % c.bs) * int64_t{d}) *
                         static_cast<int64_t>(c.elem);
      for (int j = 0; j < n; ++j) vrows[j] = v0 + static_cast<size_t>(j) * d * c.elem;
    } else {
      for (int j = 0; j < n; ++j) {
        const int64_t pos = j0 + j;
        vrows[j] = c.v_pool +
                   (s.blocks[pos / c.bs] * c.block_stride + head_off + (pos % c.bs) * int64_t{d}) *
                       static_cast<int64_t>(c.elem);
      }
    }
    if (v_in_place) {
      a.v = vrows;
      a.v_dtype = c.dtype;
    } else {
      c.kernels->load_v(c.dtype, vrows, n, d, vt);
      for (int j = 0; j < n; ++j) vptr[j] = vt + static_cast<size_t>(j) * d;
      a.v = vptr;
      a.v_dtype = KvDtype::kF32;
    }
    // Rows whose position is below j0 see nothing of this tile: they form a prefix.
    const int64_t i_first = std::max(it.i0, j0 - s.pos0);
    const int r_first = static_cast<int>((i_first - it.i0) * g);
    for (int64_t i = i_first, r = r_first; i < it.i1; ++i) {
      const int32_t nv = static_cast<int32_t>(std::min<int64_t>(n, s.pos0 + i - j0 + 1));
      for (int h = 0; h < g; ++h) nvalid[r++] = nv;
    }
    a.q = qs + static_cast<size_t>(r_first) * d;
    a.o = o + static_cast<size_t>(r_first) * d;
    a.m = m + r_first;
    a.l = l + r_first;
    a.nvalid = nvalid + r_first;
    a.rows = rows - r_first;
    a.d = d;
    a.n = n;
    a.p = p;
    c.kernels->tile(a);
  }
  for (int64_t i = it.i0; i < it.i1; ++i) {
    float* orow = c.out + (s.row0 + i) * c.ldo + static_cast<int64_t>(it.kv_head) * g * d;
    for (int h = 0; h < g; ++h) {
      const int r = static_cast<int>((i - it.i0) * g + h);
      const float inv = 1.0f / l[r];
      const float* src = o + static_cast<size_t>(r) * d;
      for (int e = 0; e < d; ++e) orow[h * d + e] = src[e] * inv;
    }
  }
}

void CheckArgs(const KvCache& cache, int layer, std::span<const AttentionSeq> seqs, int n_heads,
               const float* q, int64_t ldq, float* out, int64_t ldo) {
  KILN_CHECK(layer >= 0 && layer < cache.n_layers(), "attention layer ", layer);
  KILN_CHECK(n_heads > 0 && n_heads % cache.n_kv_heads() == 0, "n_heads ", n_heads,
             " is not a multiple of n_kv_heads ", cache.n_kv_heads());
  const int64_t width = int64_t{n_heads} * cache.head_dim();
  KILN_CHECK(ldq >= width && ldo >= width, "attention ldq ", ldq, " ldo ", ldo, " < ", width);
  KILN_CHECK(q != nullptr && out != nullptr, "attention null q/out");
  for (const AttentionSeq& s : seqs) {
    KILN_CHECK(s.pos0 >= 0 && s.n_q >= 0 && s.row0 >= 0, "attention sequence pos0 ", s.pos0,
               " n_q ", s.n_q, " row0 ", s.row0);
    KILN_CHECK(s.pos0 + s.n_q <= static_cast<int64_t>(s.blocks.size()) * cache.block_size(),
               "attention: ", s.pos0 + s.n_q, " positions with a table of ", s.blocks.size(),
               " blocks");
    const int64_t used = (s.pos0 + s.n_q + cache.block_size() - 1) / cache.block_size();
    for (int64_t b = 0; b < used; ++b) {
      KILN_CHECK(s.blocks[b] >= 0 && s.blocks[b] < cache.num_blocks(), "attention: block id ",
                 s.blocks[b]);
    }
  }
}

}  // namespace

void PagedAttention(const KvCache& cache, int layer, std::span<const AttentionSeq> seqs,
                    int n_heads, float scale, const float* q, int64_t ldq, float* out,
                    int64_t ldo) {
  CheckArgs(cache, layer, seqs, n_heads, q, ldq, out, ldo);
  Ctx c;
  c.k_pool = static_cast<const uint8_t*>(cache.k_pool(layer));
  c.v_pool = static_cast<const uint8_t*>(cache.v_pool(layer));
  c.dtype = cache.dtype();
  c.elem = KvDtypeBytes(c.dtype);
  c.bs = cache.block_size();
  c.d = cache.head_dim();
  c.group = n_heads / cache.n_kv_heads();
  c.block_stride = cache.block_stride();
  c.head_stride = cache.head_stride();
  c.scale = scale > 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(c.d));
  c.q = q;
  c.ldq = ldq;
  c.out = out;
  c.ldo = ldo;
  c.kernels = &attention_internal::SelectTileKernels(c.dtype, c.d);

  // Work items in (sequence, KV head, query tile) order with their estimated costs.
  const int64_t tile_q = std::max<int64_t>(1, kTargetRows / c.group);
  thread_local std::vector<Item> items;
  thread_local std::vector<double> cost_end;  // cumulative cost at each item's end
  items.clear();
  cost_end.clear();
  double total = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const AttentionSeq& s = seqs[si];
    for (int h = 0; h < cache.n_kv_heads(); ++h) {
      for (int64_t i0 = 0; i0 < s.n_q; i0 += tile_q) {
        const int64_t i1 = std::min(s.n_q, i0 + tile_q);
        items.push_back({static_cast<int32_t>(si), h, i0, i1});
        // Rows x visible keys (the tile loop), plus the K/V tile loads, plus a fixed part.
        const double keys = static_cast<double>(s.pos0 + i1);
        total += static_cast<double>((i1 - i0) * c.group) * keys * c.d + keys * c.d * 2 + 2000;
        cost_end.push_back(total);
      }
    }
  }
  if (items.empty()) return;
  int nt = cpu::ParallelThreads();
  if (total < 2e5) nt = 1;  // not worth waking the team
  nt = static_cast<int>(std::min<int64_t>(nt, static_cast<int64_t>(items.size())));
  const Item* item_data = items.data();
  const double* cost_data = cost_end.data();
  const size_t n_items = items.size();
  cpu::ParallelFor(nt, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      // Thread t runs the items whose cost midpoint falls in its share [t, t+1) * total / nt.
      const double lo = total * static_cast<double>(t) / nt;
      const double hi = total * static_cast<double>(t + 1) / nt;
      for (size_t k = 0; k < n_items; ++k) {
        const double start = k == 0 ? 0.0 : cost_data[k - 1];
        const double mid = 0.5 * (start + cost_data[k]);
        if (mid < lo) continue;
        if (mid >= hi && t + 1 < nt) break;
        RunItem(c, seqs[item_data[k].seq], item_data[k]);
      }
    }
  });
}

namespace ref {

void PagedAttention(const KvCache& cache, int layer, std::span<const AttentionSeq> seqs,
                    int n_heads, float scale, const float* q, int64_t ldq, float* out,
                    int64_t ldo) {
  CheckArgs(cache, layer, seqs, n_heads, q, ldq, out, ldo);
  const int d = cache.head_dim();
  const int n_kv = cache.n_kv_heads();
  const int bs = cache.block_size();
  const int group = n_heads / n_kv;
  const double sc = scale > 0.0f ? scale : 1.0 / std::sqrt(static_cast<double>(d));
  const size_t width = static_cast<size_t>(n_kv) * d;
  for (const AttentionSeq& s : seqs) {
    const int64_t len = s.pos0 + s.n_q;
    std::vector<float> k(static_cast<size_t>(len) * width), v(k.size());
    for (int64_t p = 0; p < len; ++p) {
      cache.Read(layer, s.blocks[p / bs], static_cast<int>(p % bs), &k[p * width], &v[p * width]);
    }
    std::vector<double> w(static_cast<size_t>(len)), acc(static_cast<size_t>(d));
    for (int64_t i = 0; i < s.n_q; ++i) {
      const int64_t visible = s.pos0 + i + 1;
      for (int h = 0; h < n_heads; ++h) {
        const int kvh = h / group;
        const float* qh = q + (s.row0 + i) * ldq + static_cast<int64_t>(h) * d;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t p = 0; p < visible; ++p) {
          const float* kp = &k[p * width + static_cast<size_t>(kvh) * d];
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += static_cast<double>(qh[e]) * kp[e];
          w[p] = dot * sc;
          mx = std::max(mx, w[p]);
        }
        double sum = 0;
        for (int64_t p = 0; p < visible; ++p) {
          w[p] = std::exp(w[p] - mx);
          sum += w[p];
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t p = 0; p < visible; ++p) {
          const float* vp = &v[p * width + static_cast<size_t>(kvh) * d];
          for (int e = 0; e < d; ++e) acc[e] += w[p] * vp[e];
        }
        float* o = out + (s.row0 + i) * ldo + static_cast<int64_t>(h) * d;
        for (int e = 0; e < d; ++e) o[e] = static_cast<float>(acc[e] / sum);
      }
    }
  }
}

}  // namespace ref
}  // namespace kiln::llm
