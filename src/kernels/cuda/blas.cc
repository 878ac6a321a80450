// SPDX-License-Identifier: Apache-2.0
// MatMul, Gemm and ai.kiln FusedMatMul / FusedGemm (op/kiln_ops.h) on cuBLASLt, in FP32, FP16
// and BF16; the fused ops also in their half-precision weight form (a FLOAT16 / BFLOAT16 B with
// every other operand FLOAT).
//
// NOTE on the approach.
//   - Layout. kiln tensors are row-major, cuBLAS is column-major: a row-major [r, c] matrix is
//     the column-major [c, r] one, so Y = op(A) op(B) is computed as Y^T = op(B)^T op(A)^T with
//     cuBLAS's A = our B and cuBLAS's B = our A, cuBLAS's m = N, n = M; Gemm's transposes are
//     cuBLAS's operations on the stored matrices. Nothing is copied or transposed.
//   - Batches (MatMul). The batch dims of A and B broadcast as in numpy. They are laid against
//     the output's, dims of size 1 dropped and neighbouring dims merged where every operand is
//     contiguous across them (or broadcast across both). A B without batches (a weight matrix)
//     folds A's batch into M: one 2-D product. Otherwise the innermost merged dim is cuBLASLt's
//     strided batch (stride 0 for an operand broadcast along it) and any outer dims are a loop
//     of launches.
//   - Epilogues. Where the op's extra terms fit cuBLASLt's epilogue exactly, the product is one
//     cublasLtMatmul writing Y: a bias along N (FusedMatMul's Bias, or Gemm's C of shape [N] /
//     [1, N] with beta = 1) is CUBLASLT_EPILOGUE_BIAS; one addend of Y's full shape (Gemm's C
//     times beta, or the residual Z) is cuBLASLt's C; activation Relu is RELU(_BIAS) and
//     "GeluTanh" GELU(_BIAS) (cuBLASLt's GELU is the tanh form; the erf Gelu is never mapped
//     to it). Everything else (the other activations, Clip / LeakyRelu / HardSigmoid
//     parameters, a C broadcast along rows or a scalar, C and Z together) runs as one own
//     elementwise kernel after a plain product (blas.cu): Y = act(X + scale * C + Z) in FP32,
//     with X the product in FP32 (Y itself for an FP32 Y, a scratch tensor for FP16 / BF16, so
//     the product is rounded to the 16-bit type only once). The order is the reference's:
//     act(alpha*A'B' + beta*C + Z) for (Fused)Gemm, act(A*B + Bias + Z) for FusedMatMul.
//     Gemm's C with beta = 0 is not read.
//   - Precision. FP16 / BF16 run with FP32 compute (CUBLAS_COMPUTE_32F) and output in the input
//     type. FP32 runs on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32: operands rounded to
//     10 mantissa bits, FP32 accumulation) unless the setting KILN_CUDA_TF32 is
//     "0" (base/settings.h), which gives full FP32 (CUBLAS_COMPUTE_32F).
//   - Half-precision weights. A is converted to the weight's type on the device (blas.cu) and
//     the product runs with 16-bit A and B, FP32 compute and FP32 C / D (a combination cuBLASLt
//     supports), so B is read as stored. With KILN_CUDA_TF32=0 the weight is widened to FP32
//     instead and the product is the FP32 one, exactly the op's definition.
//   - Algorithms. cublasLtMatmulAlgoGetHeuristic picks the algorithm (up to 32 MiB of
//     workspace) per problem: types, shapes, strides, epilogue and the alignment of each
//     pointer. The choice is cached in the kernel (a small mutex-guarded map; Compute is const
//     and may run concurrently). A problem with a cuBLASLt epilogue for which the heuristic
//     finds nothing runs as the plain product plus the own epilogue instead.
//   - Memory. The workspace (the size the chosen algorithm asks for), the converted A and the
//     FP32 scratch product come from the context's allocator without a zero fill; the device
//     allocator frees them stream-ordered after the work enqueued here.
// INT8 products (MatMulInteger, QLinearMatMul, ai.kiln QMatMul) are not here: they stay on the
// CPU.

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "kernels/cuda/blas_handles.h"
#include "kernels/cuda/blas_launch.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/tables.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"

namespace kiln::cuda {
namespace {

using ref::OpError;

constexpr uint64_t kMaxWorkspaceBytes = uint64_t{32} << 20;
constexpr size_t kMaxCachedAlgos = 256;   // the cache starts over when it reaches this size
constexpr int64_t kMaxLtDim = INT32_MAX;  // dims and batch counts handed to cuBLASLt

// TF32 tensor cores for FP32 products unless KILN_CUDA_TF32=0.
bool UseTf32() { return CudaTf32Allowed(); }

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }
bool IsCudaFloat(DataType t) { return t == DataType::kFloat32 || IsHalf(t); }

cudaDataType_t CudaTypeOf(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return CUDA_R_16F;
    case DataType::kBFloat16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// --- cuBLASLt descriptors, destroyed with their owner ----------------------------------------

class LtDesc {
 public:
  LtDesc() = default;
  LtDesc(const LtDesc&) = delete;
  LtDesc& operator=(const LtDesc&) = delete;
  ~LtDesc() {
    if (desc_ != nullptr) (void)cublasLtMatmulDescDestroy(desc_);
  }
  Status Init(cublasComputeType_t compute) {
    KILN_CUBLAS_OK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
    return Status::OK();
  }
  template <typename V>
  Status Set(cublasLtMatmulDescAttributes_t attr, const V& value) {
    KILN_CUBLAS_OK(cublasLtMatmulDescSetAttribute(desc_, attr, &value, sizeof(value)));
    return Status::OK();
  }
  cublasLtMatmulDesc_t get() const { return desc_; }

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
};

class LtLayout {
 public:
  LtLayout() = default;
  LtLayout(const LtLayout&) = delete;
  LtLayout& operator=(const LtLayout&) = delete;
  ~LtLayout() {
    if (layout_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_);
  }
  // A column-major rows x cols matrix with leading dimension ld, `batch` of them `stride`
  // elements apart.
  Status Init(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int32_t batch,
              int64_t stride) {
    KILN_CUBLAS_OK(cublasLtMatrixLayoutCreate(&layout_, type, static_cast<uint64_t>(rows),
                                              static_cast<uint64_t>(cols), ld));
    if (batch > 1) {
      KILN_CUBLAS_OK(cublasLtMatrixLayoutSetAttribute(layout_, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batch, sizeof(batch)));
      KILN_CUBLAS_OK(cublasLtMatrixLayoutSetAttribute(
          layout_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    return Status::OK();
  }
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

class LtPreference {
 public:
  LtPreference() = default;
  LtPreference(const LtPreference&) = delete;
  LtPreference& operator=(const LtPreference&) = delete;
  ~LtPreference() {
    if (pref_ != nullptr) (void)cublasLtMatmulPreferenceDestroy(pref_);
  }
  Status Init() {
    KILN_CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref_));
    return Status::OK();
  }
  template <typename V>
  Status Set(cublasLtMatmulPreferenceAttributes_t attr, const V& value) {
    KILN_CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref_, attr, &value, sizeof(value)));
    return Status::OK();
  }
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  cublasLtMatmulPreference_t pref_ = nullptr;
};

// --- One cuBLASLt problem ---------------------------------------------------------------------

// An outer batch dim looped over with one launch per index (element strides).
struct LoopDim {
  int64_t count = 1;
  int64_t a = 0, b = 0, d = 0;  // cuBLAS operands: A (our B), B (our A), C / D
};

// cublasLtMatmul in cuBLAS's column-major terms: D[m, n] = alpha * op(A) op(B) + beta * C
// (+ bias, activation); C, when present, has D's layout.
struct LtProblem {
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, d_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements
  std::vector<LoopDim> loops;                        // outer to inner
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // null: beta is 0
  void* d = nullptr;
  const void* bias = nullptr;  // with a *_BIAS epilogue: m elements of d_type
  float alpha = 1.0f, beta = 0.0f;
};

// The cache key of an algorithm choice: everything the heuristic sees.
struct AlgoKey {
  int device = 0;
  int32_t a_type = 0, b_type = 0, d_type = 0, compute = 0, epilogue = 0;
  bool trans_a = false, trans_b = false, has_c = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 0, stride_a = 0, stride_b = 0, stride_d = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0;
  auto operator<=>(const AlgoKey&) const = default;
};

struct AlgoChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
};

size_t ElemSize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// The alignment (a power of two, at most 256) every address `p + i * stride * elem` of the
// launches shares, for strides in `strides` (elements).
uint32_t AlignmentOf(const void* p, std::initializer_list<int64_t> strides, size_t elem,
                     const std::vector<LoopDim>& loops, int64_t LoopDim::*loop_stride) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256;
  for (int64_t s : strides) bits |= static_cast<uint64_t>(s) * elem;
  for (const LoopDim& l : loops) bits |= static_cast<uint64_t>(l.*loop_stride) * elem;
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

// --- The kernel -------------------------------------------------------------------------------

enum class OpKind { kMatMul, kGemm };

struct ProductAttrs {
  std::string_view op;  // the node's op type (a literal)
  OpKind kind = OpKind::kMatMul;
  bool fused = false;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  Activation act;
};

// MatMul, Gemm, FusedMatMul and FusedGemm: one class, the op's attributes decide.
// Thread safety: Compute may run concurrently (the algorithm cache is guarded by mu_).
class ProductKernel final : public Kernel {
 public:
  explicit ProductKernel(const ProductAttrs& attrs) : attrs_(attrs) {}

  Status Compute(KernelContext& ctx) const override;

 private:
  // The extra terms of the op around the product, over Y seen as [rows, last].
  struct Terms {
    const void* c = nullptr;  // Gemm's C (times c_scale) or FusedMatMul's Bias
    int64_t c_row_stride = 0, c_col_stride = 0;
    float c_scale = 1.0f;
    bool c_full = false;  // C has Y's layout exactly
    const void* z = nullptr;
  };

  // Enqueues `p` (every loop index); false, enqueuing nothing, when cuBLASLt has no algorithm
  // for it.
  Result<bool> RunLt(KernelContext& ctx, cudaStream_t stream, const LtProblem& p) const;
  Result<AlgoChoice> FindAlgo(cublasLtHandle_t lt, const AlgoKey& key, const LtDesc& desc,
                              const LtLayout& la, const LtLayout& lb, const LtLayout& ld) const;

  const ProductAttrs attrs_;
  mutable Mutex mu_;
  mutable std::map<AlgoKey, AlgoChoice> algos_ KILN_GUARDED_BY(mu_);
};

Result<AlgoChoice> ProductKernel::FindAlgo(cublasLtHandle_t lt, const AlgoKey& key,
                                           const LtDesc& desc, const LtLayout& la,
                                           const LtLayout& lb, const LtLayout& ld) const {
  {
    MutexLock lock(mu_);
    auto it = algos_.find(key);
    if (it != algos_.end()) return it->second;
  }
  LtPreference pref;
  KILN_RETURN_IF_ERROR(pref.Init());
  KILN_RETURN_IF_ERROR(pref.Set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes));
  KILN_RETURN_IF_ERROR(pref.Set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a));
  KILN_RETURN_IF_ERROR(pref.Set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b));
  KILN_RETURN_IF_ERROR(pref.Set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c));
  KILN_RETURN_IF_ERROR(pref.Set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
      lt, desc.get(), la.get(), lb.get(), ld.get(), ld.get(), pref.get(), 1, &result, &returned);
  AlgoChoice choice;
  if (s == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    choice.found = true;
    choice.algo = result.algo;
    choice.workspace_bytes = result.workspaceSize;
  } else if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
    return CublasError(s, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  MutexLock lock(mu_);
  if (algos_.size() >= kMaxCachedAlgos) algos_.clear();
  algos_.emplace(key, choice);
  return choice;
}

Result<bool> ProductKernel::RunLt(KernelContext& ctx, cudaStream_t stream,
                                  const LtProblem& p) const {
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldd, p.batch}) {
    if (v > kMaxLtDim) {
      return OpError(attrs_.op, "a dimension of {} is more than cuBLASLt takes", v);
    }
  }
  KILN_ASSIGN_OR_RETURN(cublasLtHandle_t lt, CublasLtHandle());
  const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  LtDesc desc;
  KILN_RETURN_IF_ERROR(desc.Init(p.compute));
  KILN_RETURN_IF_ERROR(desc.Set(CUBLASLT_MATMUL_DESC_TRANSA, op_a));
  KILN_RETURN_IF_ERROR(desc.Set(CUBLASLT_MATMUL_DESC_TRANSB, op_b));
  KILN_RETURN_IF_ERROR(desc.Set(CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue));
  if (p.bias != nullptr) KILN_RETURN_IF_ERROR(desc.Set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias));
  const int32_t batch = static_cast<int32_t>(p.batch);
  LtLayout la, lb, ld;
  // Stored shapes: op(A) is m x k, op(B) is k x n.
  KILN_RETURN_IF_ERROR(
      la.Init(p.a_type, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda, batch, p.stride_a));
  KILN_RETURN_IF_ERROR(
      lb.Init(p.b_type, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb, batch, p.stride_b));
  KILN_RETURN_IF_ERROR(ld.Init(p.d_type, p.m, p.n, p.ldd, batch, p.stride_d));

  int device = 0;
  KILN_CUDA_OK(cudaGetDevice(&device));
  AlgoKey key;
  key.device = device;
  key.a_type = static_cast<int32_t>(p.a_type);
  key.b_type = static_cast<int32_t>(p.b_type);
  key.d_type = static_cast<int32_t>(p.d_type);
  key.compute = static_cast<int32_t>(p.compute);
  key.epilogue = static_cast<int32_t>(p.epilogue);
  key.trans_a = p.trans_a;
  key.trans_b = p.trans_b;
  key.has_c = p.c != nullptr;
  key.m = p.m;
  key.n = p.n;
  key.k = p.k;
  key.lda = p.lda;
  key.ldb = p.ldb;
  key.ldd = p.ldd;
  key.batch = p.batch;
  key.stride_a = p.stride_a;
  key.stride_b = p.stride_b;
  key.stride_d = p.stride_d;
  const size_t ea = ElemSize(p.a_type), eb = ElemSize(p.b_type), ed = ElemSize(p.d_type);
  const int64_t sa = p.batch > 1 ? p.stride_a : 0, sb = p.batch > 1 ? p.stride_b : 0;
  const int64_t sd = p.batch > 1 ? p.stride_d : 0;
  key.align_a = AlignmentOf(p.a, {sa}, ea, p.loops, &LoopDim::a);
  key.align_b = AlignmentOf(p.b, {sb}, eb, p.loops, &LoopDim::b);
  key.align_d = AlignmentOf(p.d, {sd}, ed, p.loops, &LoopDim::d);
  // Without C, D is handed as C (not read: beta is 0).
  key.align_c = p.c != nullptr ? AlignmentOf(p.c, {sd}, ed, p.loops, &LoopDim::d) : key.align_d;
  key.align_bias = p.bias != nullptr ? AlignmentOf(p.bias, {}, ed, {}, &LoopDim::d) : 256;
  KILN_ASSIGN_OR_RETURN(AlgoChoice choice, FindAlgo(lt, key, desc, la, lb, ld));
  if (!choice.found) return false;

  OwnedTensor workspace;
  void* ws = nullptr;
  if (choice.workspace_bytes > 0) {
    KILN_ASSIGN_OR_RETURN(workspace,
                          OwnedTensor::AllocateForOverwrite(
                              DataType::kUint8, Shape{static_cast<int64_t>(choice.workspace_bytes)},
                              ctx.allocator()));
    ws = workspace.raw_data();
  }
  // One launch per index of the outer loops (an odometer over them).
  std::vector<int64_t> index(p.loops.size(), 0);
  while (true) {
    int64_t oa = 0, ob = 0, od = 0;
    for (size_t i = 0; i < p.loops.size(); ++i) {
      oa += index[i] * p.loops[i].a;
      ob += index[i] * p.loops[i].b;
      od += index[i] * p.loops[i].d;
    }
    const auto* a = static_cast<const char*>(p.a) + oa * static_cast<int64_t>(ea);
    const auto* b = static_cast<const char*>(p.b) + ob * static_cast<int64_t>(eb);
    auto* d = static_cast<char*>(p.d) + od * static_cast<int64_t>(ed);
    const char* c =
        p.c != nullptr ? static_cast<const char*>(p.c) + od * static_cast<int64_t>(ed) : nullptr;
    // Without C, D stands in for it (beta is 0, so it is not read).
    KILN_CUBLAS_OK(cublasLtMatmul(lt, desc.get(), &p.alpha, a, la.get(), b, lb.get(), &p.beta,
                                  c != nullptr ? static_cast<const void*>(c) : d, ld.get(), d,
                                  ld.get(), &choice.algo, ws, choice.workspace_bytes, stream));
    size_t i = p.loops.size();
    while (i > 0 && ++index[i - 1] == p.loops[i - 1].count) index[--i] = 0;
    if (i == 0) break;
  }
  return true;
}

Status ProductKernel::Compute(KernelContext& ctx) const {
  const std::string_view op = attrs_.op;
  const bool gemm = attrs_.kind == OpKind::kGemm;
  for (int i = 0; i < 2; ++i) {
    if (!ctx.has_input(i)) return OpError(op, "required input {} is missing", i);
  }
  if (ctx.num_outputs() < 1) return OpError(op, "no output slot");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  // Optional inputs: Gemm's C (2), FusedMatMul's Bias (2), the fused ops' Z (3).
  const Tensor* c = nullptr;
  const Tensor* bias = nullptr;
  const Tensor* z = nullptr;
  if (gemm && ctx.has_input(2)) c = &ctx.input(2);
  if (!gemm && attrs_.fused && ctx.has_input(2)) bias = &ctx.input(2);
  if (attrs_.fused && ctx.has_input(3)) z = &ctx.input(3);
  for (int i = 0; i < ctx.num_inputs() && i < 4; ++i) {
    if (ctx.has_input(i) && !ctx.input(i).is_contiguous()) {
      return OpError(op, "input {} is not contiguous", i);
    }
  }

  // Types: A, B and Y of one float type, or (fused ops) A and Y FLOAT with a 16-bit B.
  const DataType dtype = a.dtype();
  if (!IsCudaFloat(dtype)) return OpError(op, "unsupported dtype {}", DataTypeName(dtype));
  const bool half_weight = attrs_.fused && dtype == DataType::kFloat32 && IsHalf(b.dtype());
  if (!half_weight && b.dtype() != dtype) {
    if (gemm) {
      return OpError(op, "input 1 has dtype {}, A has {}", DataTypeName(b.dtype()),
                     DataTypeName(dtype));
    }
    return OpError(op, "inputs have different dtypes {} and {}", DataTypeName(dtype),
                   DataTypeName(b.dtype()));
  }

  // Shapes, in row-major terms: Y[batch..., M, N] = op(A) op(B).
  int64_t m = 0, n = 0, k = 0;
  Shape out;
  std::vector<LoopDim> dims;  // batch dims (count; matrix strides of our A, our B, Y)
  if (gemm) {
    if (a.rank() != 2 || b.rank() != 2) {
      return OpError(op, "A and B must be 2-D, got {} and {}", a.shape().ToString(),
                     b.shape().ToString());
    }
    m = attrs_.trans_a ? a.dim(1) : a.dim(0);
    k = attrs_.trans_a ? a.dim(0) : a.dim(1);
    const int64_t kb = attrs_.trans_b ? b.dim(1) : b.dim(0);
    n = attrs_.trans_b ? b.dim(0) : b.dim(1);
    if (k != kb) {
      return OpError(op,
                     "inner dimensions differ: A' has K={}, B' has K={} (A {}, B {}, "
                     "transA={}, transB={})",
                     k, kb, a.shape().ToString(), b.shape().ToString(), int{attrs_.trans_a},
                     int{attrs_.trans_b});
    }
    out = Shape{m, n};
  } else {
    if (a.rank() < 1 || b.rank() < 1) {
      return OpError(op, "inputs must have rank >= 1, got {} and {}", a.shape().ToString(),
                     b.shape().ToString());
    }
    const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
    m = a_vec ? 1 : a.dim(a.rank() - 2);
    k = a.dim(a.rank() - 1);
    const int64_t kb = b_vec ? b.dim(0) : b.dim(b.rank() - 2);
    n = b_vec ? 1 : b.dim(b.rank() - 1);
    if (k != kb) {
      return OpError(op, "inner dimensions differ: A {} has K={}, B {} has K={}",
                     a.shape().ToString(), k, b.shape().ToString(), kb);
    }
    const Shape a_batch(a.shape().dims().first(static_cast<size_t>(a_vec ? 0 : a.rank() - 2)));
    const Shape b_batch(b.shape().dims().first(static_cast<size_t>(b_vec ? 0 : b.rank() - 2)));
    Result<Shape> batch = ref::BroadcastShapes(op, a_batch, b_batch);
    if (!batch.ok()) {
      return OpError(op, "batch dims of A {} and B {} do not broadcast", a.shape().ToString(),
                     b.shape().ToString());
    }
    std::vector<int64_t> out_dims(batch->dims().begin(), batch->dims().end());
    if (!a_vec) out_dims.push_back(m);
    if (!b_vec) out_dims.push_back(n);
    KILN_ASSIGN_OR_RETURN(out, Shape::Create(out_dims));
    // The batch dims, size-1 ones dropped, merged where every operand is contiguous across the
    // pair (or broadcast across both).
    const ref::DimArray sa = ref::BroadcastStrides(a_batch, *batch);
    const ref::DimArray sb = ref::BroadcastStrides(b_batch, *batch);
    int64_t sy = 1;
    std::vector<LoopDim> rev;  // inner to outer
    for (int d = batch->rank() - 1; d >= 0; --d) {
      const int64_t count = batch->dim(d);
      const LoopDim cur{count, sa[static_cast<size_t>(d)], sb[static_cast<size_t>(d)], sy};
      sy *= count;
      if (count == 1) continue;
      if (!rev.empty()) {
        LoopDim& in = rev.back();
        auto joins = [&](int64_t inner, int64_t outer) {
          return (inner == 0 && outer == 0) || (inner != 0 && outer == inner * in.count);
        };
        if (joins(in.a, cur.a) && joins(in.b, cur.b) && joins(in.d, cur.d)) {
          in.count *= count;
          continue;
        }
      }
      rev.push_back(cur);
    }
    dims.assign(rev.rbegin(), rev.rend());
  }

  // The extra terms and their checks (the reference's rules and messages).
  const int64_t last = out.rank() > 0 ? out.dim(out.rank() - 1) : 1;
  Terms terms;
  if (c != nullptr) {
    if (c->dtype() != dtype) {
      return OpError(op, "input 2 has dtype {}, A has {}", DataTypeName(c->dtype()),
                     DataTypeName(dtype));
    }
    if (!ref::BroadcastsTo(c->shape(), out)) {
      return OpError(op, "C {} does not broadcast to the output shape {}", c->shape().ToString(),
                     out.ToString());
    }
    if (attrs_.beta != 0.0f) {
      const ref::DimArray sc = ref::BroadcastStrides(c->shape(), out);
      terms.c = c->raw_data();
      terms.c_row_stride = sc[0];
      terms.c_col_stride = sc[1];
      terms.c_scale = attrs_.beta;
      terms.c_full = c->num_elements() == out.NumElements();
    }
  }
  if (bias != nullptr) {
    if (bias->rank() != 1 || bias->dim(0) != last || bias->dtype() != dtype) {
      return OpError(op, "Bias {} must be 1-D of {} with {} elements (Y's last dim)",
                     bias->shape().ToString(), DataTypeName(dtype), last);
    }
    terms.c = bias->raw_data();
    terms.c_row_stride = 0;
    terms.c_col_stride = 1;
    terms.c_scale = 1.0f;
    terms.c_full = bias->num_elements() == out.NumElements();
  }
  if (z != nullptr) {
    if (!(z->shape() == out) || z->dtype() != dtype) {
      return OpError(op, "Z {} {} must have Y's dtype and shape exactly, {} {}",
                     DataTypeName(z->dtype()), z->shape().ToString(), DataTypeName(dtype),
                     out.ToString());
    }
    terms.z = z->raw_data();
  }

  KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, dtype, out));
  if (out.NumElements() == 0) return Status::OK();
  KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
  KILN_ASSIGN_OR_RETURN(ElemType y_type, ElemTypeOf(dtype));

  // The own epilogue over Y (x: the FP32 product, null for zeros).
  MatMulEpilogueParams epi;
  epi.type = y_type;
  epi.y = y.raw_data();
  epi.count = out.NumElements();
  epi.last = last;
  epi.c = terms.c;
  epi.c_row_stride = terms.c_row_stride;
  epi.c_col_stride = terms.c_col_stride;
  epi.c_scale = terms.c_scale;
  epi.z = terms.z;
  epi.act = attrs_.act;
  if (k == 0) {  // an empty sum: Y = act(beta * C + Z), or act(Bias + Z)
    KILN_CUDA_OK(LaunchMatMulEpilogue(epi, stream));
    return Status::OK();
  }

  // The operands as cuBLASLt reads them: a 16-bit B with an FP32 A (half-precision weight)
  // converts A to B's type, or with KILN_CUDA_TF32=0 widens B to FP32.
  const void* a_data = a.raw_data();
  const void* b_data = b.raw_data();
  DataType ab_type = dtype;
  OwnedTensor a_half, b_wide;
  if (half_weight && UseTf32()) {
    KILN_ASSIGN_OR_RETURN(a_half,
                          OwnedTensor::AllocateForOverwrite(b.dtype(), a.shape(), ctx.allocator()));
    KILN_ASSIGN_OR_RETURN(ElemType half_type, ElemTypeOf(b.dtype()));
    KILN_CUDA_OK(LaunchFloatToHalf(static_cast<const float*>(a_data), half_type, a_half.raw_data(),
                                   a.num_elements(), stream));
    a_data = a_half.raw_data();
    ab_type = b.dtype();
  } else if (half_weight) {
    KILN_ASSIGN_OR_RETURN(
        b_wide, OwnedTensor::AllocateForOverwrite(DataType::kFloat32, b.shape(), ctx.allocator()));
    KILN_ASSIGN_OR_RETURN(ElemType half_type, ElemTypeOf(b.dtype()));
    KILN_CUDA_OK(LaunchHalfToFloat(half_type, b_data, static_cast<float*>(b_wide.raw_data()),
                                   b.num_elements(), stream));
    b_data = b_wide.raw_data();
  }

  // The problem in cuBLAS's terms: cuBLAS A = our B, cuBLAS B = our A, m = N, n = M.
  LtProblem p;
  p.a_type = p.b_type = CudaTypeOf(ab_type);
  p.d_type = CudaTypeOf(dtype);
  p.compute = ab_type == DataType::kFloat32 && UseTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                         : CUBLAS_COMPUTE_32F;
  p.trans_a = attrs_.trans_b;
  p.trans_b = attrs_.trans_a;
  p.k = k;
  p.m = n;
  p.lda = attrs_.trans_b ? k : n;
  p.a = b_data;
  p.b = a_data;
  p.alpha = attrs_.alpha;
  int64_t rows = m;  // our M, after folding A's batch into it
  if (dims.size() == 1 && dims[0].b == 0 && dims[0].a == 1 && dims[0].d == 1) {
    rows = m * dims[0].count;  // B without batches: A's batch folds into M
  } else if (!dims.empty()) {
    const LoopDim& in = dims.back();
    p.batch = in.count;
    p.stride_a = in.b * k * n;
    p.stride_b = in.a * m * k;
    p.stride_d = in.d * m * n;
    for (size_t i = 0; i + 1 < dims.size(); ++i) {
      p.loops.push_back({dims[i].count, dims[i].b * k * n, dims[i].a * m * k, dims[i].d * m * n});
    }
  }
  p.n = rows;
  p.ldb = attrs_.trans_a ? rows : k;
  p.ldd = n;

  // All in cuBLASLt where its epilogue matches: a bias along N, one addend of Y's layout,
  // Relu / GeluTanh.
  const ActKind act = attrs_.act.kind;
  bool native = act == ActKind::kNone || act == ActKind::kRelu || act == ActKind::kGeluTanh;
  const void* lt_bias = nullptr;
  const void* lt_c = nullptr;
  float lt_beta = 0.0f;
  if (terms.c != nullptr) {
    const bool row_vector = terms.c_row_stride == 0 && (terms.c_col_stride == 1 || last == 1) &&
                            last == n && terms.c_scale == 1.0f;
    if (row_vector) {
      lt_bias = terms.c;
    } else if (terms.c_full) {
      lt_c = terms.c;
      lt_beta = terms.c_scale;
    } else {
      native = false;
    }
  }
  if (terms.z != nullptr) {
    if (lt_c == nullptr) {
      lt_c = terms.z;
      lt_beta = 1.0f;
    } else {
      native = false;
    }
  }
  if (native) {
    LtProblem q = p;
    q.d = y.raw_data();
    q.c = lt_c;
    q.beta = lt_beta;
    q.bias = lt_bias;
    const bool relu = act == ActKind::kRelu, gelu = act == ActKind::kGeluTanh;
    if (lt_bias != nullptr) {
      q.epilogue = relu   ? CUBLASLT_EPILOGUE_RELU_BIAS
                   : gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                          : CUBLASLT_EPILOGUE_BIAS;
    } else {
      q.epilogue = relu   ? CUBLASLT_EPILOGUE_RELU
                   : gelu ? CUBLASLT_EPILOGUE_GELU
                          : CUBLASLT_EPILOGUE_DEFAULT;
    }
    KILN_ASSIGN_OR_RETURN(bool done, RunLt(ctx, stream, q));
    if (done) return Status::OK();
  }

  // The plain product in FP32 (into Y when Y is FP32, else a scratch tensor), then the own
  // epilogue.
  OwnedTensor scratch;
  float* x = nullptr;
  if (dtype == DataType::kFloat32) {
    x = static_cast<float*>(y.raw_data());
  } else {
    KILN_ASSIGN_OR_RETURN(
        scratch, OwnedTensor::AllocateForOverwrite(DataType::kFloat32, out, ctx.allocator()));
    x = static_cast<float*>(scratch.raw_data());
  }
  p.d = x;
  p.d_type = CUDA_R_32F;
  KILN_ASSIGN_OR_RETURN(bool done, RunLt(ctx, stream, p));
  if (!done && p.batch > 1) {  // no strided-batch algorithm: one launch per matrix
    p.loops.push_back({p.batch, p.stride_a, p.stride_b, p.stride_d});
    p.batch = 1;
    p.stride_a = p.stride_b = p.stride_d = 0;
    KILN_ASSIGN_OR_RETURN(done, RunLt(ctx, stream, p));
  }
  if (!done) {
    return Status::Internal(
        fmt::format("{}: cuBLASLt has no algorithm for a [{}, {}] x [{}, {}] "
                    "product of {}",
                    op, m, k, k, n, DataTypeName(ab_type)));
  }
  const bool plain = terms.c == nullptr && terms.z == nullptr && act == ActKind::kNone;
  if (plain && x == y.raw_data()) return Status::OK();
  epi.x = x;
  KILN_CUDA_OK(LaunchMatMulEpilogue(epi, stream));
  return Status::OK();
}

// --- Factories and the table ------------------------------------------------------------------

// `op` is a literal.
ProductAttrs AttrsOf(std::string_view op, OpKind kind) {
  ProductAttrs attrs;
  attrs.op = op;
  attrs.kind = kind;
  return attrs;
}

Result<std::unique_ptr<Kernel>> Make(const ProductAttrs& attrs) {
  return std::unique_ptr<Kernel>(std::make_unique<ProductKernel>(attrs));
}

// Gemm's attributes (transA, transB, alpha, beta), as the reference reads them.
Status ReadGemmAttrs(const KernelInfo& info, ProductAttrs& attrs) {
  ref::AttrReader reader(info);
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, reader.Int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, reader.Int("transB", 0));
  KILN_ASSIGN_OR_RETURN(attrs.alpha, reader.Float("alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(attrs.beta, reader.Float("beta", 1.0f));
  attrs.trans_a = trans_a != 0;
  attrs.trans_b = trans_b != 0;
  return Status::OK();
}

// The fused ops' common checks: at most 4 inputs, one output, the activation.
Status ReadFusedAttrs(const KernelInfo& info, ProductAttrs& attrs) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  if (info.num_inputs() > 4) {
    return OpError(attrs.op, "takes at most 4 inputs, got {}", info.num_inputs());
  }
  KILN_RETURN_IF_ERROR(ref::LimitOutputs(info, 1, "fused ops have one output"));
  KILN_ASSIGN_OR_RETURN(attrs.act, ParseActivation(info));
  attrs.fused = true;
  return Status::OK();
}

Result<std::unique_ptr<Kernel>> CreateMatMul(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  return Make(AttrsOf("MatMul", OpKind::kMatMul));
}

Result<std::unique_ptr<Kernel>> CreateGemm(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  if (info.opset() < 11 && !info.has_input(2)) {
    return OpError("Gemm", "input C is required before opset 11 (model uses opset {})",
                   info.opset());
  }
  KILN_RETURN_IF_ERROR(ref::AttrReader(info).RequireRemovedIn("broadcast", 7));
  ProductAttrs attrs = AttrsOf("Gemm", OpKind::kGemm);
  KILN_RETURN_IF_ERROR(ReadGemmAttrs(info, attrs));
  return Make(attrs);
}

Result<std::unique_ptr<Kernel>> CreateFusedMatMul(const KernelInfo& info) {
  ProductAttrs attrs = AttrsOf("FusedMatMul", OpKind::kMatMul);
  KILN_RETURN_IF_ERROR(ReadFusedAttrs(info, attrs));
  for (const Attribute& a : info.node().attributes) {
    if (a.name != "activation" && a.name != "activation_params") {
      return OpError(attrs.op, "unknown attribute '{}'", a.name);
    }
  }
  return Make(attrs);
}

Result<std::unique_ptr<Kernel>> CreateFusedGemm(const KernelInfo& info) {
  ProductAttrs attrs = AttrsOf("FusedGemm", OpKind::kGemm);
  KILN_RETURN_IF_ERROR(ReadFusedAttrs(info, attrs));
  if (info.node().FindAttribute("broadcast") != nullptr) {  // the core Gemm is opset 13's
    return OpError(attrs.op, "attribute 'broadcast' was removed in opset 7 (model uses opset 13)");
  }
  KILN_RETURN_IF_ERROR(ReadGemmAttrs(info, attrs));
  return Make(attrs);
}

// MatMul / Gemm: A and B of one type (unknown declared types are checked at run time).
bool SupportsSameTypes(const KernelInfo& info) {
  const DataType a = info.input_type(0).dtype, b = info.input_type(1).dtype;
  return a == DataType::kInvalid || b == DataType::kInvalid || a == b;
}

// The fused ops also take a FLOAT16 / BFLOAT16 B with a FLOAT A (half-precision weights).
bool SupportsFused(const KernelInfo& info) {
  if (SupportsSameTypes(info)) return true;
  return info.input_type(0).dtype == DataType::kFloat32 && IsHalf(info.input_type(1).dtype);
}

// ONNX's types per opset: FLOAT16 / FLOAT from opset 7, BFLOAT16 from 13.
constexpr DataTypeMask kFp32Fp16 = TypeMask({DataType::kFloat32, DataType::kFloat16});

}  // namespace

std::vector<KernelDef> BlasKernelDefs() {
  const DeviceType cuda = DeviceType::kCuda;
  return {
      {"MatMul", "", 7, 12, cuda, kFp32Fp16, 0, &CreateMatMul, "cuda", &SupportsSameTypes},
      {"MatMul", "", 13, 17, cuda, kCudaFloatTypes, 0, &CreateMatMul, "cuda", &SupportsSameTypes},
      // 7-10: C required; 11+: C optional (the factory reads the opset).
      {"Gemm", "", 7, 10, cuda, kFp32Fp16, 0, &CreateGemm, "cuda", &SupportsSameTypes},
      {"Gemm", "", 11, 12, cuda, kFp32Fp16, 0, &CreateGemm, "cuda", &SupportsSameTypes},
      {"Gemm", "", 13, 17, cuda, kCudaFloatTypes, 0, &CreateGemm, "cuda", &SupportsSameTypes},
      {"FusedMatMul", "ai.kiln", 1, 1, cuda, kCudaFloatTypes, 0, &CreateFusedMatMul, "cuda",
       &SupportsFused},
      {"FusedGemm", "ai.kiln", 1, 1, cuda, kCudaFloatTypes, 0, &CreateFusedGemm, "cuda",
       &SupportsFused},
  };
}

}  // namespace kiln::cuda
