// SPDX-License-Identifier: Apache-2.0
#pragma once
// Matrix products of the decoder: a weight matrix in one of ggml's types (F32, F16, BF16, Q8_0,
// Q4_0, Q4_K, Q6_K) times a batch of F32 activation rows.
//
//   WeightMatrix w{GgmlType::kQ4_0, /*rows=*/4096, /*cols=*/4096, data, RowBytes(kQ4_0, 4096)};
//   KILN_RETURN_IF_ERROR(CheckWeightMatrix(w));            // once, when the model is bound
//   MatMul(w, x, /*ldx=*/4096, n_tokens, y, /*ldy=*/4096);  // per step
//   MatMulShared({{&wq, q, 4096}, {&wk, k, 1024}, {&wv, v, 1024}}, x, 4096, n_tokens);
//
// Numerics (the same as llama.cpp's CPU backend, so that kiln can be compared with it):
//   - Q4_0 and Q8_0 weights: each token's activations are quantized per 32-block to Q8_0
//     (d = amax/127 stored as f16, q = round-half-even(x * 127/amax), as ggml-cpu's x86
//     quantize_row_q8_0 does); each block's integer dot product is scaled by d_w * d_x and the
//     blocks are summed in F32.
//   - Q4_K and Q6_K weights: the activations are quantized per 256-block to Q8_K
//     (quantize_row_q8_K_ref: d = max/-127 in F32, bsums); integer dot products per sub-block
//     times the 6- or 8-bit sub-block scales, summed as integers over the super-block, scaled by
//     d_w * d_x; Q4_K's min term uses the Q8_K bsums.
//   - F16 weights: the activations are rounded to F16 (ggml's vec_dot_type for F16) and the
//     products (exact in F32) are summed in F32. BF16 weights: the activations are rounded to
//     BF16 likewise. F32 weights: plain F32.
// The fast kernels sum in a different order than ref::MatMul (vector lanes, column chunks), so
// the two agree to F32 rounding, not bit for bit; the integer parts are exact in both.
//
// Kernels: AMX-INT8 tiles (Q4_0 / Q8_0 calls of 10 tokens or more, on CPUs with AMX), AVX-512
// (with VNNI where the CPU has avx512_vnni), AVX2+FMA+F16C, and portable scalar, chosen per call by
// kiln::cpu::ActiveIsa() (kernels/cpu/isa.h); they read the weights in place, in ggml's layout,
// except that the AVX-512 kernels read Q4_0 / Q8_0 matrices from a packed copy when the model made
// one (PackedWeights): 4 rows' blocks interleaved, so that one aligned 64-byte load feeds a
// register, in memory backed by 2 MiB pages where the kernel gives them (decode streams every
// weight once per token; 4 KiB pages cost it TLB misses and prefetcher restarts). Q4_0 / Q8_0 use
// registers of "4 rows x 16 columns" against broadcast activation codes (quant_kernels_avx512.h),
// the K-quants integer sums over each super-block, the float types a 4-row x 6-token FMA tile.
// Decode (few tokens) streams each weight row once against all tokens, with software prefetch of
// the rows ahead; prompt chunks (many tokens) tile rows x tokens so that a tile of weights stays in
// L1 across a block of tokens whose activations stay in L2.
//
// Threading: MatMul splits the rows over the calling thread's OpenMP team
// (kiln::cpu::ParallelFor) and runs inline inside a parallel region. Its scratch (the quantized
// activations) is a thread-local buffer of the calling thread that only grows, so steady-state
// decode allocates nothing. Any number of threads may call MatMul at once on distinct outputs.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "base/status.h"
#include "llm/ggml_type.h"

namespace kiln::llm {

// A row-major weight matrix in a ggml type, not owned (typically a view into a mapped GGUF
// file). Row r (an output feature) is the `cols` elements encoded at data + r * row_bytes.
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;  // out features, ggml ne[1]
  int64_t cols = 0;  // in features, ggml ne[0]
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  // Optional: the same matrix in the packed layout (PackedWeights::Pack sets it). The kernels
  // that read that layout use it instead of `data`; the others read `data`.
  const uint8_t* packed = nullptr;
};

// Whether MatMul accepts `w`: a type in GgmlTypeSupported, rows and cols >= 0, cols a multiple
// of BlockElements(type), row_bytes >= RowBytes(type, cols), data non-null when the matrix is
// not empty. The error names the problem ("weight matrix of type q5_1 is not supported
// (supported: ...)").
Status CheckWeightMatrix(const WeightMatrix& w);

// y[t * ldy + r] = sum_c W[r, c] * x[t * ldx + c] for t < n_tokens, r < w.rows, computed with
// the numerics in the header comment. Elements of y outside those (the padding up to ldy) are
// not touched. REQUIRES: CheckWeightMatrix(w) is OK; n_tokens >= 0; ldx >= w.cols; ldy >=
// w.rows; x holds n_tokens rows of ldx floats (finite), y n_tokens rows of ldy; x and y do not
// overlap.
void MatMul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy);

// One product of a MatMulShared call: y[t * ldy + r] = sum_c w[r, c] * x[t * ldx + c].
struct MatMulOutput {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};

// Several products of the same activations in one call (Q, K and V; gate and up): the
// activations are converted once per weight type and the rows of all the matrices are split over
// the team in one parallel region, which saves a decode step one fork and join per matrix. Each
// output gets exactly what MatMul(*o.w, x, ldx, n_tokens, o.y, o.ldy) gives. REQUIRES: at most 8
// outputs; each as MatMul requires; every matrix has the same cols; the outputs overlap neither
// each other nor x.
void MatMulShared(std::span<const MatMulOutput> outputs, const float* x, int64_t ldx,
                  int64_t n_tokens);

// Whether the kernels MatMul runs now (the active ISA) read matrices of `type` from a packed
// copy: Q4_0 and Q8_0 on AVX-512.
bool MatMulReadsPacked(GgmlType type);

// Packed copies of weight matrices, in one block of memory (anonymous, 2 MiB pages requested).
// The layout (quant_kernels.h, "packed layout"): rows in groups of 4, each group a run of
// super-blocks holding 8 blocks' scales and then their codes, 4 rows interleaved per block.
// The copies hold the same numbers: MatMul gives the same results with or without them.
class PackedWeights {
 public:
  // Copies every matrix in `matrices` that MatMulReadsPacked(type) into the packed layout and
  // points its `packed` at the copy (matrices with the same data share one copy). Returns null
  // when there is nothing to pack, or when the memory cannot be had (the matrices are then left
  // as they were, and the kernels read them in place). The packing runs on the calling
  // thread's OpenMP team. `packed_one`, when set, is called with each matrix as soon as its copy
  // is made (so that a caller can let go of the original before the next is read: a model
  // releases the file's pages, which keeps the peak resident set near one copy of the weights).
  static std::unique_ptr<PackedWeights> Pack(
      std::span<WeightMatrix* const> matrices,
      const std::function<void(const WeightMatrix&)>& packed_one = {});
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  size_t bytes() const { return bytes_; }

 private:
  PackedWeights(uint8_t* base, size_t bytes) : base_(base), bytes_(bytes) {}
  uint8_t* base_;
  size_t bytes_;
};

// Chooses how far ahead the kernels that read packed copies prefetch, for this machine (the
// best distance differs between CPUs): times one-token products over the matrices that have a
// packed copy (a loaded model's own weights, so that they stream from memory as in decode) at
// 1, 2, 4 and 8 KiB, three rounds in turn, and keeps the fastest (by its best round) for the
// process. The distance changes only the speed, never a result. Returns the distance chosen, or
// 0 when no matrix has a packed copy the active kernels read (nothing is changed then). Runs
// the products on the calling thread's OpenMP team.
int64_t TunePackedPrefetch(std::span<WeightMatrix* const> matrices);
// The distance the packed kernels prefetch now (8192 until TunePackedPrefetch).
int64_t MatMulPackedPrefetchBytes();

namespace ref {
// The same product, computed plainly on the calling thread: each token's activations quantized
// with the scalar quantizers, then for every (token, row) the blocks' integer dot products
// scaled and summed in order. The oracle of the tests.
void MatMul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy);
}  // namespace ref

// For tests and benchmarks: whether the AVX-512 kernels may use AVX512_VNNI when the CPU has it
// (default true). With false they take the AVX-512BW path that CPUs without VNNI run.
// Thread-safe (atomic); takes effect at the next MatMul.
void SetMatMulVnniAllowed(bool allowed);
// The kernel family MatMul would run now: "amx" (for calls of 10 tokens or more; fewer run
// "avx512-vnni"), "avx512-vnni", "avx512", "avx2" or "scalar".
const char* MatMulKernelName();

}  // namespace kiln::llm
