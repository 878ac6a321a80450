// SPDX-License-Identifier: Apache-2.0
// MatMul (llm_matmul.h): kernel selection, activation preparation, the split over threads and
// the blocking; the portable scalar tile kernels; the reference product.
//
// NOTE on blocking. A call is memory-bound when it has few tokens (decode: every weight byte is
// used n_tokens times) and compute-bound when it has many (a prompt chunk). The tile kernels
// stream a tile of up to 8 weight rows once per call and, while those rows sit in L1, run them
// against every token of the current token block, a few tokens at a time; while the first
// token tile streams a row tile, the kernels prefetch the rows 32 KiB or more further (decode's
// row streams are too short for the hardware prefetchers). The driver cuts the tokens into
// blocks whose prepared activations fit in L2 (and, for the 4-byte float activations of F16 /
// BF16 / F32 weights, the columns into chunks of at most 2048), and the rows into contiguous
// ranges, one per thread, so each weight byte is read from memory once per token block.

#include "llm/llm_matmul.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/parallel.h"
#include "llm/quant_kernels.h"

namespace kiln::llm {
namespace {

std::atomic<bool>& VnniAllowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

bool CpuHasVnni() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") != 0;
  }();
  return has;
}

enum class Path { kScalar, kAvx2, kAvx512, kAvx512Vnni, kAmx };

bool IsAvx512(Path p) { return p == Path::kAvx512 || p == Path::kAvx512Vnni || p == Path::kAmx; }

// Calls with fewer tokens take the VNNI kernels on the kAmx path (their whole-block variant,
// which sums as the tile kernels do): a tile product computes 16 tokens whatever the call has,
// so its time is flat below 16, while the VNNI kernels' grows with the tokens. They cross at 9
// to 10 tokens (llm_matmul_bench, TinyLlama's 5632x2048 and 2048x5632, 2 threads on a Xeon with
// AMX, median microseconds per call, VNNI / tiles: Q4_0 at 9 tokens 590 / 686, at 10 728 / 684;
// Q8_0 at 9 748 / 907, at 10 892 / 924, about even from 11).
constexpr int64_t kAmxMinTokens = 10;

Path ActivePath() {
  switch (cpu::ActiveIsa()) {
    case cpu::Isa::kAmx:
      if (!cpu::CpuHasF16C()) return Path::kScalar;
      return CpuHasVnni() && VnniAllowed().load(std::memory_order_relaxed) ? Path::kAmx
                                                                           : Path::kAvx512;
    case cpu::Isa::kAvx512:
      if (!cpu::CpuHasF16C()) return Path::kScalar;  // never seen: AVX-512 CPUs have F16C
      return CpuHasVnni() && VnniAllowed().load(std::memory_order_relaxed) ? Path::kAvx512Vnni
                                                                           : Path::kAvx512;
    case cpu::Isa::kAvx2:
      // The AVX2 kernels convert the f16 block scales with F16C (every AVX2 CPU has it).
      return cpu::CpuHasF16C() ? Path::kAvx2 : Path::kScalar;
    case cpu::Isa::kScalar:
      break;
  }
  return Path::kScalar;
}

bool IsQ8_0Class(GgmlType t) { return t == GgmlType::kQ4_0 || t == GgmlType::kQ8_0; }
bool IsQ8_KClass(GgmlType t) { return t == GgmlType::kQ4_K || t == GgmlType::kQ6_K; }

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The calling thread's scratch.
qk::GrowingBuffer& ThreadScratch() {
  thread_local qk::GrowingBuffer scratch;
  return scratch;
}

// Bytes of scratch PrepareActs needs for weight type `type`, and the layout it uses.
struct ActsLayout {
  int64_t qs_stride = 0, blk_stride = 0, bsums_stride = 0, f_stride = 0;
  size_t qs_bytes = 0, blk_bytes = 0, b16_bytes = 0, f_bytes = 0;
  size_t amx_bytes = 0;  // kAmx path, Q4_0 / Q8_0: amx::PrepareTiles's
  size_t Total() const {
    return qs_bytes + 2 * blk_bytes + b16_bytes + b16_bytes / 2 + f_bytes + amx_bytes;
  }
};

ActsLayout LayoutFor(Path path, GgmlType type, int64_t cols, int64_t n_tokens) {
  ActsLayout l;
  const auto n = static_cast<size_t>(n_tokens);
  if (type == GgmlType::kF32) return l;
  if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    l.f_stride = RoundUp(cols, 16);
    l.f_bytes = n * static_cast<size_t>(l.f_stride) * sizeof(float);
    return l;
  }
  l.qs_stride = RoundUp(cols, 64);
  l.qs_bytes = n * static_cast<size_t>(l.qs_stride);
  if (IsQ8_0Class(type)) {
    l.blk_stride = RoundUp(cols / 32, 16);
    l.blk_bytes = n * static_cast<size_t>(l.blk_stride) * 4;
    if (path == Path::kAmx && n_tokens >= kAmxMinTokens) {
      l.amx_bytes = static_cast<size_t>(
          RoundUp(static_cast<int64_t>(qk::amx::PreparedBytes(cols, n_tokens)), 64));
    }
  } else {
    l.blk_stride = RoundUp(cols / 256, 16);
    l.blk_bytes = n * static_cast<size_t>(l.blk_stride) * 4;
    l.bsums_stride = RoundUp(cols / 256 * 16, 64);
    l.b16_bytes = n * static_cast<size_t>(l.bsums_stride) * 2;
  }
  return l;
}

// Converts the activations for `path`'s kernels of weight type `type` into `mem` (64-byte
// aligned, LayoutFor(type, cols, n_tokens).Total() bytes; nothing for F32, whose kernels read x).
qk::Acts PrepareActs(Path path, GgmlType type, int64_t cols, const float* x, int64_t ldx,
                     int64_t n_tokens, uint8_t* mem) {
  qk::Acts a;
  a.cols = cols;
  const ActsLayout l = LayoutFor(path, type, cols, n_tokens);
  const int64_t par_grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  if (type == GgmlType::kF32) {
    a.f = x;
    a.f_stride = ldx;
    return a;
  }
  if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    const bool bf16 = type == GgmlType::kBF16;
    a.f_stride = l.f_stride;
    auto* f = reinterpret_cast<float*>(mem);
    qk::RoundHalfFn round = qk::scalar::RoundHalf;
    if (path != Path::kScalar) round = qk::avx2::RoundHalf;
    cpu::ParallelFor(n_tokens, par_grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* row = f + t * a.f_stride;
        round(x + t * ldx, cols, bf16, row);
        std::fill(row + cols, row + a.f_stride, 0.0f);
      }
    });
    a.f = f;
    return a;
  }
  a.qs_stride = l.qs_stride;
  a.blk_stride = l.blk_stride;
  auto* qs = reinterpret_cast<int8_t*>(mem);
  auto* d = reinterpret_cast<float*>(mem + l.qs_bytes);
  a.qs = qs;
  a.d = d;
  if (IsQ8_0Class(type)) {
    auto* bias = reinterpret_cast<int32_t*>(mem + l.qs_bytes + l.blk_bytes);
    const int offset = type == GgmlType::kQ4_0 ? 8 : 128;
    qk::QuantizeQ8_0Fn quantize = qk::scalar::QuantizeQ8_0;
    if (path == Path::kAvx2) quantize = qk::avx2::QuantizeQ8_0;
    if (IsAvx512(path)) quantize = qk::avx512::QuantizeQ8_0;
    const int64_t nb = cols / 32;
    cpu::ParallelFor(n_tokens, par_grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int8_t* q = qs + t * a.qs_stride;
        float* dt = d + t * a.blk_stride;
        int32_t* bt = bias + t * a.blk_stride;
        quantize(x + t * ldx, cols, offset, q, dt, bt);
        std::memset(q + cols, 0, static_cast<size_t>(a.qs_stride - cols));
        std::fill(dt + nb, dt + a.blk_stride, 0.0f);
        std::fill(bt + nb, bt + a.blk_stride, 0);
      }
    });
    a.bias = bias;
    if (l.amx_bytes > 0) {
      uint8_t* amx = mem + l.Total() - l.amx_bytes;
      qk::amx::PrepareTiles(a, n_tokens, amx);
    }
    return a;
  }
  // Q8_K.
  const int64_t nsb = cols / 256;
  a.bsums_stride = l.bsums_stride;
  auto* b16 = reinterpret_cast<int16_t*>(mem + l.qs_bytes + l.blk_bytes);
  auto* b32 = reinterpret_cast<int16_t*>(mem + l.qs_bytes + l.blk_bytes + l.b16_bytes);
  cpu::ParallelFor(n_tokens, par_grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int8_t* q = qs + t * a.qs_stride;
      float* dt = d + t * a.blk_stride;
      int16_t* s16 = b16 + t * a.bsums_stride;
      int16_t* s32 = b32 + t * (a.bsums_stride / 2);
      if (IsAvx512(path)) {
        qk::avx512::QuantizeQ8_K(x + t * ldx, cols, q, dt, s16, s32);
      } else {
        for (int64_t i = 0; i < nsb; ++i) {
          dt[i] = qk::QuantizeActBlockQ8_K(x + t * ldx + 256 * i, q + 256 * i, s16 + 16 * i,
                                           s32 + 8 * i);
        }
      }
      std::memset(q + cols, 0, static_cast<size_t>(a.qs_stride - cols));
      std::fill(dt + nsb, dt + a.blk_stride, 0.0f);
      std::fill(s16 + nsb * 16, s16 + a.bsums_stride, int16_t{0});
      std::fill(s32 + nsb * 8, s32 + a.bsums_stride / 2, int16_t{0});
    }
  });
  a.bsums16 = b16;
  a.bsums32 = b32;
  return a;
}

bool ReadsPacked(Path path, GgmlType type) { return IsAvx512(path) && IsQ8_0Class(type); }

qk::TileFn SelectTile(Path path, const WeightMatrix& w, int64_t n_tokens) {
  const GgmlType type = w.type;
  if (path == Path::kAmx) {
    // Every Q4_0 / Q8_0 kernel of this path sums as the tile kernels do (one scaled integer per
    // block), so a token's products do not depend on the call's token count or on the copy.
    const bool packed = w.packed != nullptr;
    qk::TileFn fn = packed && n_tokens >= kAmxMinTokens
                        ? qk::amx::TilePacked(type)
                        : qk::avx512vnni::TileWholeBlocks(type, packed);
    if (fn != nullptr) return fn;
    path = Path::kAvx512Vnni;  // the other types
  }
  if (w.packed != nullptr && ReadsPacked(path, type)) {
    return path == Path::kAvx512Vnni ? qk::avx512vnni::TilePacked(type)
                                     : qk::avx512::TilePacked(type);
  }
  qk::TileFn fn = nullptr;
  switch (path) {
    case Path::kAmx:  // (replaced above)
    case Path::kAvx512Vnni:
      fn = qk::avx512vnni::Tile(type);
      if (fn == nullptr) fn = qk::avx512::Tile(type);
      break;
    case Path::kAvx512:
      fn = qk::avx512::Tile(type);
      break;
    case Path::kAvx2:
      fn = qk::avx2::Tile(type);
      break;
    case Path::kScalar:
      break;
  }
  if (fn == nullptr && path == Path::kAvx512Vnni) fn = qk::avx2::Tile(type);
  if (fn == nullptr && path == Path::kAvx512) fn = qk::avx2::Tile(type);
  if (fn == nullptr) fn = qk::scalar::Tile(type);
  return fn;
}

// Bytes of prepared activations per column per token.
double ActBytesPerColumn(GgmlType type) {
  if (IsQ8_0Class(type)) return 1.25;
  if (IsQ8_KClass(type)) return 1.1;
  return 4.0;
}

}  // namespace

Status CheckWeightMatrix(const WeightMatrix& w) {
  if (!GgmlTypeSupported(w.type)) {
    return Status::InvalidArgument(
        fmt::format("weight matrix of ggml type {} is not supported (supported: f32, f16, bf16, "
                    "q8_0, q4_0, q4_K, q6_K)",
                    static_cast<uint32_t>(w.type)));
  }
  if (w.rows < 0 || w.cols < 0) {
    return Status::InvalidArgument(
        fmt::format("weight matrix has a negative shape [{}, {}]", w.rows, w.cols));
  }
  const int64_t be = BlockElements(w.type);
  if (w.cols % be != 0) {
    return Status::InvalidArgument(fmt::format(
        "weight matrix has {} columns, not a multiple of its type's {}-element block", w.cols, be));
  }
  if (w.row_bytes < RowBytes(w.type, w.cols)) {
    return Status::InvalidArgument(
        fmt::format("weight matrix rows are {} bytes apart, less than a row's {} bytes",
                    w.row_bytes, RowBytes(w.type, w.cols)));
  }
  if (w.data == nullptr && w.rows > 0 && w.cols > 0) {
    return Status::InvalidArgument("weight matrix has no data");
  }
  return Status::OK();
}

bool MatMulReadsPacked(GgmlType type) { return ReadsPacked(ActivePath(), type); }

namespace {

// Writes w (Q4_0 or Q8_0) in the packed layout (quant_kernels.h) to out, which holds
// qk::PackedBytes(w.type, w.rows, w.cols) bytes; padding rows and blocks are zero.
void PackMatrix(const WeightMatrix& w, uint8_t* out) {
  const bool q8 = w.type == GgmlType::kQ8_0;
  const int64_t block_bytes = q8 ? 34 : 18;
  const int64_t nb = w.cols / 32;
  const int64_t group_bytes = qk::PackedGroupBytes(w.type, w.cols);
  const int64_t super_bytes = qk::PackedSuperBytes(w.type);
  const int64_t packed_block = qk::PackedBlockBytes(w.type);
  const int64_t groups = (w.rows + qk::kPackRows - 1) / qk::kPackRows;
  cpu::ParallelFor(groups, 16, [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      uint8_t* dst = out + g * group_bytes;
      std::memset(dst, 0, static_cast<size_t>(group_bytes));
      for (int64_t i = 0; i < qk::kPackRows; ++i) {
        const int64_t r = g * qk::kPackRows + i;
        if (r >= w.rows) break;
        const uint8_t* row = w.data + r * w.row_bytes;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = row + b * block_bytes;
          uint8_t* sb = dst + (b / qk::kPackBlocks) * super_bytes;
          const int64_t k = b % qk::kPackBlocks;
          std::memcpy(sb + 2 * (qk::kPackRows * k + i), blk, 2);  // the f16 scale
          // Rows 0..3, then 4..7: one line (Q4_0) or two (Q8_0) per 4 rows.
          uint8_t* codes = sb + 2 * qk::kPackRows * qk::kPackBlocks + k * packed_block +
                           (i / 4) * (packed_block / 2) + 16 * (i % 4);
          std::memcpy(codes, blk + 2, 16);
          if (q8) std::memcpy(codes + 64, blk + 18, 16);
        }
      }
    }
  });
}

}  // namespace

std::unique_ptr<PackedWeights> PackedWeights::Pack(
    std::span<WeightMatrix* const> matrices,
    const std::function<void(const WeightMatrix&)>& packed_one) {
  // Offsets of the distinct matrices (by data) to pack.
  std::vector<std::pair<const uint8_t*, size_t>> placed;
  size_t total = 0;
  for (WeightMatrix* w : matrices) {
    if (w == nullptr || w->rows == 0 || w->cols == 0 || !MatMulReadsPacked(w->type)) continue;
    bool seen = false;
    for (const auto& [data, offset] : placed) seen = seen || data == w->data;
    if (seen) continue;
    placed.emplace_back(w->data, total);
    total += static_cast<size_t>(qk::PackedBytes(w->type, w->rows, w->cols));
  }
  if (total == 0) return nullptr;
  // Whole 2 MiB pages, so that the kernel can back all of it with huge pages.
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (total + kHuge - 1) / kHuge * kHuge;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: 4 KiB pages work too
  auto* base = static_cast<uint8_t*>(p);
  std::vector<bool> done(placed.size(), false);
  for (WeightMatrix* w : matrices) {
    if (w == nullptr || w->rows == 0 || w->cols == 0 || !MatMulReadsPacked(w->type)) continue;
    for (size_t i = 0; i < placed.size(); ++i) {
      if (placed[i].first != w->data) continue;
      w->packed = base + placed[i].second;
      if (!done[i]) {
        PackMatrix(*w, base + placed[i].second);
        if (packed_one) packed_one(*w);
      }
      done[i] = true;
    }
  }
  return std::unique_ptr<PackedWeights>(new PackedWeights(base, bytes));
}

PackedWeights::~PackedWeights() { munmap(base_, bytes_); }

void SetMatMulVnniAllowed(bool allowed) { VnniAllowed().store(allowed, std::memory_order_relaxed); }

namespace {
std::atomic<int64_t>& PrefetchDistance() {
  static std::atomic<int64_t> bytes{8192};
  return bytes;
}
}  // namespace

int64_t qk::PackedPrefetchBytes() { return PrefetchDistance().load(std::memory_order_relaxed); }

int64_t MatMulPackedPrefetchBytes() { return qk::PackedPrefetchBytes(); }

int64_t TunePackedPrefetch(std::span<WeightMatrix* const> matrices) {
  std::vector<const WeightMatrix*> timed;
  int64_t max_cols = 0, max_rows = 0;
  for (const WeightMatrix* w : matrices) {
    if (w == nullptr || w->packed == nullptr || !MatMulReadsPacked(w->type)) continue;
    timed.push_back(w);
    max_cols = std::max(max_cols, w->cols);
    max_rows = std::max(max_rows, w->rows);
  }
  if (timed.empty()) return 0;
  // Activations of a typical spread (their values do not change the time).
  std::vector<float> x(static_cast<size_t>(max_cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 17) - 8);
  std::vector<float> y(static_cast<size_t>(max_rows));
  constexpr int64_t kCandidates[] = {1024, 2048, 4096, 8192};
  double best[std::size(kCandidates)];
  std::fill(std::begin(best), std::end(best), 1e30);
  for (int round = 0; round < 3; ++round) {
    for (size_t c = 0; c < std::size(kCandidates); ++c) {
      PrefetchDistance().store(kCandidates[c], std::memory_order_relaxed);
      const auto start = std::chrono::steady_clock::now();
      for (const WeightMatrix* w : timed) MatMul(*w, x.data(), max_cols, 1, y.data(), max_rows);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best[c] = std::min(best[c], s);
    }
  }
  const size_t chosen =
      static_cast<size_t>(std::min_element(std::begin(best), std::end(best)) - std::begin(best));
  PrefetchDistance().store(kCandidates[chosen], std::memory_order_relaxed);
  return kCandidates[chosen];
}

const char* MatMulKernelName() {
  switch (ActivePath()) {
    case Path::kAmx:
      return "amx";
    case Path::kAvx512Vnni:
      return "avx512-vnni";
    case Path::kAvx512:
      return "avx512";
    case Path::kAvx2:
      return "avx2";
    case Path::kScalar:
      break;
  }
  return "scalar";
}

void MatMulShared(std::span<const MatMulOutput> outputs, const float* x, int64_t ldx,
                  int64_t n_tokens) {
  if (outputs.empty()) return;
  const int64_t cols = outputs[0].w->cols;
  for (const MatMulOutput& o : outputs) {
    KILN_CHECK(o.w->cols == cols && n_tokens >= 0 && ldx >= cols && o.ldy >= o.w->rows,
               "MatMul: n_tokens ", n_tokens, " ldx ", ldx, " ldy ", o.ldy, " for a [", o.w->rows,
               ", ", o.w->cols, "] matrix (", cols, " columns expected)");
  }
  if (n_tokens == 0) return;
  if (cols == 0) {
    for (const MatMulOutput& o : outputs) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::fill(o.y + t * o.ldy, o.y + t * o.ldy + o.w->rows, 0.0f);
      }
    }
    return;
  }
  const Path path = ActivePath();

  // The activations, converted once per distinct weight type, in the calling thread's scratch.
  constexpr int kMaxOutputs = 8;
  KILN_CHECK(outputs.size() <= kMaxOutputs, "MatMulShared: at most ", kMaxOutputs, " outputs");
  GgmlType types[kMaxOutputs];
  size_t offsets[kMaxOutputs];
  int n_types = 0;
  size_t total = 0;
  for (const MatMulOutput& o : outputs) {
    bool seen = false;
    for (int k = 0; k < n_types; ++k) seen = seen || types[k] == o.w->type;
    if (seen) continue;
    types[n_types] = o.w->type;
    offsets[n_types] = total;
    total += RoundUp(static_cast<int64_t>(LayoutFor(path, o.w->type, cols, n_tokens).Total()), 64);
    ++n_types;
  }
  uint8_t* mem = ThreadScratch().Get(std::max<size_t>(total, 64));
  qk::Acts acts[kMaxOutputs];
  for (int k = 0; k < n_types; ++k) {
    acts[k] = PrepareActs(path, types[k], cols, x, ldx, n_tokens, mem + offsets[k]);
  }

  // One job per output: its kernel, its blocking, its first row unit.
  struct Job {
    const MatMulOutput* out;
    const qk::Acts* acts;
    qk::TileFn tile;
    int64_t kc, tb, unit0, units;
  };
  constexpr int64_t kRowUnit = 16;
  Job jobs[kMaxOutputs];
  int64_t units = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const WeightMatrix& w = *outputs[i].w;
    Job& job = jobs[i];
    job.out = &outputs[i];
    for (int k = 0; k < n_types; ++k) {
      if (types[k] == w.type) job.acts = &acts[k];
    }
    job.tile = SelectTile(path, w, n_tokens);
    // Column chunks (4-byte float activations only) and token blocks sized for L2.
    job.kc = cols;
    // (For any number of tokens: a token's sums must not depend on the other tokens of the
    // call, and chunks change the order of the additions.)
    if (ActBytesPerColumn(w.type) >= 4.0 && cols > 2048) {
      const int64_t chunks = (cols + 2047) / 2048;
      job.kc = RoundUp((cols + chunks - 1) / chunks, qk::ColumnStep(w.type));
    }
    // The AMX tiles unpack a tile of weight rows once per token block: larger blocks (their
    // activations still in L2) make that rarer.
    const bool amx = job.tile == qk::amx::TilePacked(w.type) && job.tile != nullptr;
    const double act_budget_bytes = (amx ? 1024 : 512) * 1024;
    const int64_t tb = static_cast<int64_t>(
        act_budget_bytes / (static_cast<double>(job.kc) * ActBytesPerColumn(w.type)));
    // A multiple of 48: whole token tiles of every kernel (3, 4 or 6 tokens; 16 for AMX).
    job.tb = std::clamp<int64_t>(tb / 48 * 48, 48, std::max<int64_t>(n_tokens, 48));
    job.unit0 = units;
    job.units = (w.rows + kRowUnit - 1) / kRowUnit;
    units += job.units;
  }

  // Contiguous ranges of row units, one per thread, at least ~2^18 multiply-adds each.
  const int64_t work_per_unit = kRowUnit * cols * n_tokens;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(work_per_unit, 1));
  const size_t n_jobs = outputs.size();
  cpu::ParallelFor(units, grain, [&](int64_t ub, int64_t ue) {
    for (size_t i = 0; i < n_jobs; ++i) {
      const Job& job = jobs[i];
      const int64_t b = std::max(ub, job.unit0), e = std::min(ue, job.unit0 + job.units);
      if (b >= e) continue;
      const WeightMatrix& w = *job.out->w;
      const int64_t r0 = (b - job.unit0) * kRowUnit;
      const int64_t r1 = std::min(w.rows, (e - job.unit0) * kRowUnit);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += job.tb) {
        const int64_t t1 = std::min(n_tokens, t0 + job.tb);
        for (int64_t c0 = 0; c0 < cols; c0 += job.kc) {
          const int64_t c1 = std::min(cols, c0 + job.kc);
          job.tile(w, *job.acts, r0, r1, t0, t1, c0, c1, /*accumulate=*/c0 > 0, job.out->y,
                   job.out->ldy);
        }
      }
    }
  });
}

void MatMul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy) {
  const MatMulOutput out{&w, y, ldy};
  MatMulShared({&out, 1}, x, ldx, n_tokens);
}

// ---------------------------------------------------------------------------------------------
// Portable scalar tiles (the kScalar path).

namespace qk::scalar {
namespace {

void Store(float v, bool accumulate, float* p) { *p = accumulate ? *p + v : v; }

void TileQ4_0(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(w.data + r * w.row_bytes);
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* q = a.qs + t * a.qs_stride;
      const float* d = a.d + t * a.blk_stride;
      float sum = 0.0f;
      for (int64_t b = c0 / 32; b < c1 / 32; ++b) {
        const BlockQ4_0& blk = blocks[b];
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum +=
              ((blk.qs[j] & 15) - 8) * q[32 * b + j] + ((blk.qs[j] >> 4) - 8) * q[32 * b + 16 + j];
        }
        sum += static_cast<float>(isum) * (HalfToF32(&blk.d) * d[b]);
      }
      Store(sum, accumulate, y + t * ldy + r);
    }
  }
}

void TileQ8_0(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w.data + r * w.row_bytes);
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* q = a.qs + t * a.qs_stride;
      const float* d = a.d + t * a.blk_stride;
      float sum = 0.0f;
      for (int64_t b = c0 / 32; b < c1 / 32; ++b) {
        const BlockQ8_0& blk = blocks[b];
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += blk.qs[j] * q[32 * b + j];
        sum += static_cast<float>(isum) * (HalfToF32(&blk.d) * d[b]);
      }
      Store(sum, accumulate, y + t * ldy + r);
    }
  }
}

void TileQ4_K(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(w.data + r * w.row_bytes);
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* q = a.qs + t * a.qs_stride;
      const float* d = a.d + t * a.blk_stride;
      const int16_t* s32 = a.bsums32 + t * (a.bsums_stride / 2);
      float sum = 0.0f;
      for (int64_t b = c0 / 256; b < c1 / 256; ++b) {
        const BlockQ4_K& blk = blocks[b];
        uint8_t sc[8], m[8];
        UnpackQ4KScales(blk.scales, sc, m);
        const int8_t* qb = q + 256 * b;
        int32_t isum = 0, imin = 0;
        for (int g = 0; g < 4; ++g) {
          int32_t lo = 0, hi = 0;
          for (int l = 0; l < 32; ++l) {
            lo += (blk.qs[32 * g + l] & 15) * qb[64 * g + l];
            hi += (blk.qs[32 * g + l] >> 4) * qb[64 * g + 32 + l];
          }
          isum += sc[2 * g] * lo + sc[2 * g + 1] * hi;
        }
        for (int j = 0; j < 8; ++j) imin += m[j] * s32[8 * b + j];
        sum += d[b] * HalfToF32(&blk.d) * static_cast<float>(isum) -
               d[b] * HalfToF32(&blk.dmin) * static_cast<float>(imin);
      }
      Store(sum, accumulate, y + t * ldy + r);
    }
  }
}

void TileQ6_K(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ6_K*>(w.data + r * w.row_bytes);
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* q = a.qs + t * a.qs_stride;
      const float* d = a.d + t * a.blk_stride;
      float sum = 0.0f;
      for (int64_t b = c0 / 256; b < c1 / 256; ++b) {
        const BlockQ6_K& blk = blocks[b];
        const int8_t* qb = q + 256 * b;
        int32_t isum = 0;
        for (int h = 0; h < 2; ++h) {
          const uint8_t* ql = blk.ql + 64 * h;
          const uint8_t* qh = blk.qh + 32 * h;
          int32_t group[8] = {};
          for (int l = 0; l < 32; ++l) {
            const int v0 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int v1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int v2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int v3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            const int8_t* qx = qb + 128 * h;
            group[0 + l / 16] += v0 * qx[l];
            group[2 + l / 16] += v1 * qx[l + 32];
            group[4 + l / 16] += v2 * qx[l + 64];
            group[6 + l / 16] += v3 * qx[l + 96];
          }
          for (int g = 0; g < 8; ++g) isum += blk.scales[8 * h + g] * group[g];
        }
        sum += d[b] * HalfToF32(&blk.d) * static_cast<float>(isum);
      }
      Store(sum, accumulate, y + t * ldy + r);
    }
  }
}

template <typename Widen>
void TileFloat(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
               int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy, Widen widen) {
  float row[256];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* wr = w.data + r * w.row_bytes;
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = a.f + t * a.f_stride;
      float sum = 0.0f;
      for (int64_t c = c0; c < c1; c += 256) {
        const int64_t n = std::min<int64_t>(256, c1 - c);
        widen(wr, c, n, row);
        for (int64_t i = 0; i < n; ++i) sum += row[i] * xt[c + i];
      }
      Store(sum, accumulate, y + t * ldy + r);
    }
  }
}

void TileF32(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
             int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  TileFloat(w, a, r0, r1, t0, t1, c0, c1, accumulate, y, ldy,
            [](const uint8_t* wr, int64_t c, int64_t n, float* out) {
              std::memcpy(out, wr + 4 * c, static_cast<size_t>(n) * 4);
            });
}

void TileF16(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
             int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  TileFloat(w, a, r0, r1, t0, t1, c0, c1, accumulate, y, ldy,
            [](const uint8_t* wr, int64_t c, int64_t n, float* out) {
              for (int64_t i = 0; i < n; ++i) out[i] = HalfToF32(wr + 2 * (c + i));
            });
}

void TileBF16(const WeightMatrix& w, const Acts& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
              int64_t c0, int64_t c1, bool accumulate, float* y, int64_t ldy) {
  TileFloat(w, a, r0, r1, t0, t1, c0, c1, accumulate, y, ldy,
            [](const uint8_t* wr, int64_t c, int64_t n, float* out) {
              for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, wr + 2 * (c + i), 2);
                const uint32_t bits = static_cast<uint32_t>(h) << 16;
                std::memcpy(out + i, &bits, 4);
              }
            });
}

}  // namespace

TileFn Tile(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return TileQ4_0;
    case GgmlType::kQ8_0:
      return TileQ8_0;
    case GgmlType::kQ4_K:
      return TileQ4_K;
    case GgmlType::kQ6_K:
      return TileQ6_K;
    case GgmlType::kF32:
      return TileF32;
    case GgmlType::kF16:
      return TileF16;
    case GgmlType::kBF16:
      return TileBF16;
    default:
      return nullptr;
  }
}

void QuantizeQ8_0(const float* x, int64_t n, int offset, int8_t* q, float* d, int32_t* bias) {
  for (int64_t b = 0; b < n / 32; ++b) {
    int32_t sum;
    d[b] = QuantizeActBlockQ8_0(x + 32 * b, q + 32 * b, &sum);
    bias[b] = -offset * sum;
  }
}

void RoundHalf(const float* x, int64_t n, bool bf16, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = bf16 ? BFloat16ToFloat(FloatToBFloat16(x[i])) : Float16ToFloat(FloatToFloat16(x[i]));
  }
}

}  // namespace qk::scalar

// ---------------------------------------------------------------------------------------------
// Reference.

namespace ref {

void MatMul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy) {
  KILN_CHECK(n_tokens >= 0 && ldx >= w.cols && ldy >= w.rows, "ref::MatMul: bad arguments");
  const int64_t cols = w.cols;
  std::vector<float> xr(static_cast<size_t>(cols));
  std::vector<int8_t> q8(static_cast<size_t>(cols));
  std::vector<float> d8(static_cast<size_t>(cols / 32 + 1));
  std::vector<BlockQ8_K> q8k(static_cast<size_t>(cols / 256 + 1));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * ldx;
    // The activations as the weight type's dot product sees them.
    switch (w.type) {
      case GgmlType::kQ4_0:
      case GgmlType::kQ8_0:
        for (int64_t b = 0; b < cols / 32; ++b) {
          int32_t unused;
          d8[b] = qk::QuantizeActBlockQ8_0(xt + 32 * b, q8.data() + 32 * b, &unused);
        }
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ6_K:
        KILN_CHECK(QuantizeRow(GgmlType::kQ8_K, xt, q8k.data(), cols).ok(), "Q8_K");
        break;
      case GgmlType::kF16:
        for (int64_t c = 0; c < cols; ++c) xr[c] = Float16ToFloat(FloatToFloat16(xt[c]));
        break;
      case GgmlType::kBF16:
        for (int64_t c = 0; c < cols; ++c) xr[c] = BFloat16ToFloat(FloatToBFloat16(xt[c]));
        break;
      default:
        for (int64_t c = 0; c < cols; ++c) xr[c] = xt[c];
        break;
    }
    for (int64_t r = 0; r < w.rows; ++r) {
      const uint8_t* wr = w.data + r * w.row_bytes;
      float sum = 0.0f;
      switch (w.type) {
        case GgmlType::kQ4_0: {
          const auto* blk = reinterpret_cast<const BlockQ4_0*>(wr);
          for (int64_t b = 0; b < cols / 32; ++b) {
            int32_t isum = 0;
            for (int j = 0; j < 16; ++j) {
              isum += ((blk[b].qs[j] & 15) - 8) * q8[32 * b + j];
              isum += ((blk[b].qs[j] >> 4) - 8) * q8[32 * b + j + 16];
            }
            sum += static_cast<float>(isum) * qk::HalfToF32(&blk[b].d) * d8[b];
          }
          break;
        }
        case GgmlType::kQ8_0: {
          const auto* blk = reinterpret_cast<const BlockQ8_0*>(wr);
          for (int64_t b = 0; b < cols / 32; ++b) {
            int32_t isum = 0;
            for (int j = 0; j < 32; ++j) isum += blk[b].qs[j] * q8[32 * b + j];
            sum += static_cast<float>(isum) * qk::HalfToF32(&blk[b].d) * d8[b];
          }
          break;
        }
        case GgmlType::kQ4_K: {
          const auto* blk = reinterpret_cast<const BlockQ4_K*>(wr);
          for (int64_t b = 0; b < cols / 256; ++b) {
            uint8_t sc[8], m[8];
            UnpackQ4KScales(blk[b].scales, sc, m);
            int32_t isum = 0, imin = 0;
            for (int j = 0; j < 8; ++j) {
              int32_t s = 0;
              for (int l = 0; l < 32; ++l) {
                const uint8_t byte = blk[b].qs[32 * (j / 2) + l];
                const int v = j % 2 == 0 ? byte & 15 : byte >> 4;
                s += v * q8k[b].qs[32 * j + l];
              }
              isum += sc[j] * s;
              imin += m[j] * (q8k[b].bsums[2 * j] + q8k[b].bsums[2 * j + 1]);
            }
            sum += q8k[b].d * qk::HalfToF32(&blk[b].d) * static_cast<float>(isum) -
                   q8k[b].d * qk::HalfToF32(&blk[b].dmin) * static_cast<float>(imin);
          }
          break;
        }
        case GgmlType::kQ6_K: {
          const auto* blk = reinterpret_cast<const BlockQ6_K*>(wr);
          for (int64_t b = 0; b < cols / 256; ++b) {
            int32_t isum = 0;
            for (int g = 0; g < 16; ++g) {
              int32_t s = 0;
              for (int l = 0; l < 16; ++l) {
                const int e = 16 * g + l;  // element in the block
                const int h = e / 128, qq = (e % 128) / 32, ll = e % 32;
                const uint8_t low = blk[b].ql[64 * h + ll + 32 * (qq & 1)];
                const int v = (((low >> (4 * (qq >> 1))) & 15) |
                               (((blk[b].qh[32 * h + ll] >> (2 * qq)) & 3) << 4)) -
                              32;
                s += v * q8k[b].qs[e];
              }
              isum += blk[b].scales[g] * s;
            }
            sum += q8k[b].d * qk::HalfToF32(&blk[b].d) * static_cast<float>(isum);
          }
          break;
        }
        case GgmlType::kF32:
          for (int64_t c = 0; c < cols; ++c) {
            float v;
            std::memcpy(&v, wr + 4 * c, 4);
            sum += v * xr[c];
          }
          break;
        case GgmlType::kF16:
          for (int64_t c = 0; c < cols; ++c) sum += qk::HalfToF32(wr + 2 * c) * xr[c];
          break;
        case GgmlType::kBF16:
          for (int64_t c = 0; c < cols; ++c) {
            uint16_t h;
            std::memcpy(&h, wr + 2 * c, 2);
            sum += BFloat16ToFloat(BFloat16{h}) * xr[c];
          }
          break;
        default:
          KILN_CHECK(false, "ref::MatMul: unsupported type ", static_cast<int>(w.type));
      }
      y[t * ldy + r] = sum;
    }
  }
}

}  // namespace ref
}  // namespace kiln::llm
