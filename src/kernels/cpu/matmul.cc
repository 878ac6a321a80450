// SPDX-License-Identifier: Apache-2.0
// MatMul, Gemm and ai.kiln FusedMatMul / FusedGemm on oneDNN's matmul primitive (FP32).
//
// NOTE on the approach. Every op is lowered to one oneDNN matmul problem per input shape:
//   - MatMul with B's batch dims all 1 (the common "activations x weight matrix") collapses A's
//     leading dims into M: one 2-D [P*M, K] x [K, N] product;
//   - other batched MatMuls keep their (broadcast) batch dims, which oneDNN broadcasts;
//   - Gemm's transposes become strides of the A / B memory descriptors, alpha an output scale.
// A constant B (an initializer) is reordered once, per plan, into the format oneDNN picks
// (format_tag::any): pre-packing. Additive terms become post-ops: FusedMatMul's Bias is the
// primitive's bias; Gemm's C (beta C, broadcast) and the residual Z are written into Y first and
// added by a sum post-op; the activation follows as eltwise post-ops.
// Whatever oneDNN declines (or inputs the fast path does not take: other dtypes, 1-D operands,
// non-contiguous tensors) runs on the reference kernel, for the fused ops followed by Z and the
// activation applied here.
// Half-precision weights (FusedMatMul / FusedGemm with a FLOAT16 / BFLOAT16 constant B, opt pass
// half_weights): B is pre-packed in 16 bits (PackedWeights' half storage) and widened to FP32
// into a per-thread scratch buffer on each call; the product itself runs in FP32. Except a
// BFLOAT16 B on a CPU with BF16 dot products (AVX512-BF16): oneDNN's BF16 matmul runs on B as
// stored and A converted to BF16 per call, accumulating in FP32 (CpuComputesBf16).
//
// NOTE on batch invariance. A constant 2-D B (a weight matrix: the product a batched request
// shares with every other row of its batch) runs on oneDNN only where oneDNN has its brgemm
// matmul (AVX-512), whose rows do not depend on how many rows share the call (matmul_test.cc
// checks it). Elsewhere oneDNN's jit sgemm picks its reduction order from M and the thread count,
// so it runs on kiln's own GEMM instead (gemm.h), which is batch-invariant by construction: B is
// packed once into its panels (in 16 bits for a half-precision B, widened per call).

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/settings.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::cpu {
namespace {

using ref::OpError;
using dt = dnnl::memory::data_type;

// One matmul problem in oneDNN terms (dims of equal rank; strides in elements).
struct Problem {
  dnnl::memory::dims a_dims, a_strides, b_dims, b_strides, y_dims;
  dnnl::memory::dims bias_dims;  // empty: no bias argument
  float alpha = 1.0f;
  bool sum = false;  // Y holds an addend before the product (sum post-op)
  Activation act;
};

struct MatMulPlan {
  dnnl::matmul prim;
  std::string impl;  // OnednnImpl of the primitive
  dnnl::memory::desc a_md, b_user, b_md, bias_md, y_md, scratch_md;
  bool reorder_b = false;
  dnnl::reorder b_reorder;
  dnnl::memory packed_b;                  // B in b_md (shared via PackedWeights) when B is constant
  const uint16_t* packed_half = nullptr;  // the same for a half-precision B (16-bit copy)
  // BF16 compute (a BFLOAT16 B on a CPU with BF16 dot products): A is converted into a_bf16
  // on each call by a_reorder; b_user / b_md / packed_b are BF16.
  bool bf16 = false;
  dnnl::memory::desc a_bf16;
  dnnl::reorder a_reorder;
  // One call's memory objects (data handles set on each call) and its arguments; `a` is what
  // the primitive reads (`a_user`, or its BF16 copy), `b` likewise.
  struct Call {
    dnnl::memory a_user, a, b_user, b, y, scratch, bias;
    std::unordered_map<int, dnnl::memory> args;
  };
  CallObjects<Call> calls;
};

dnnl::memory::dims PlainStrides(const dnnl::memory::dims& dims) {
  dnnl::memory::dims s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * dims[static_cast<size_t>(i) + 1];
  }
  return s;
}

// The primitive's attributes: the sum post-op (Y prefilled), the activation, alpha.
dnnl::primitive_attr MatMulAttr(const Problem& p) {
  dnnl::post_ops ops;
  if (p.sum) ops.append_sum(1.0f);
  AppendActivation(ops, p.act);
  dnnl::primitive_attr attr = MakeAttr(ops);
  if (p.alpha != 1.0f) attr.set_output_scales(0, {p.alpha});
  return attr;
}

// The matmul of `a` x `b` into the plan's y_md, with the problem's bias (set in plan->bias_md)
// when it has one.
dnnl::matmul::desc MatMulDesc(const Problem& p, const dnnl::memory::desc& a,
                              const dnnl::memory::desc& b, MatMulPlan& plan) {
  if (p.bias_dims.empty()) return dnnl::matmul::desc(a, b, plan.y_md);
  plan.bias_md = dnnl::memory::desc(p.bias_dims, dt::f32, PlainStrides(p.bias_dims));
  return dnnl::matmul::desc(a, b, plan.bias_md, plan.y_md);
}

// The plan of a BFLOAT16 constant B on a CPU with BF16 dot products: oneDNN's BF16 matmul (A
// converted per call, B packed in BF16 as stored, FP32 accumulation and Y); null when oneDNN has
// no BF16 kernel for the problem (or only its reference one). May throw dnnl::error.
std::shared_ptr<MatMulPlan> BuildBf16Plan(const Problem& p, const OwnedTensor& b_const,
                                          const PackedWeights& packed) {
  auto plan = std::make_shared<MatMulPlan>();
  const dnnl::engine& eng = CpuEngine();
  plan->bf16 = true;
  plan->a_md = dnnl::memory::desc(p.a_dims, dt::f32, p.a_strides);
  plan->a_bf16 = dnnl::memory::desc(p.a_dims, dt::bf16, PlainStrides(p.a_dims));
  plan->b_user = dnnl::memory::desc(p.b_dims, dt::bf16, p.b_strides);
  plan->y_md = dnnl::memory::desc(p.y_dims, dt::f32, PlainStrides(p.y_dims));
  const dnnl::memory::desc b_any(p.b_dims, dt::bf16, dnnl::memory::format_tag::any);
  const dnnl::matmul::desc desc = MatMulDesc(p, plan->a_bf16, b_any, *plan);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(desc, MatMulAttr(p), eng);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  if (!SkipReferenceImpls(pd)) return nullptr;
  plan->impl = OnednnImpl(pd.impl_info_str());
  plan->prim = dnnl::matmul(pd);
  plan->b_md = pd.weights_desc();
  plan->scratch_md = pd.scratchpad_desc();
  plan->a_reorder =
      dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->a_md, eng, plan->a_bf16));
  plan->reorder_b = plan->b_md != plan->b_user;
  if (plan->reorder_b) plan->packed_b = packed.Get(plan->b_user, b_const.raw_data(), plan->b_md);
  return plan;
}

Result<std::shared_ptr<MatMulPlan>> BuildPlan(const Problem& p, const OwnedTensor* b_const,
                                              const PackedWeights& packed) {
  if (b_const != nullptr && packed.storage() == DataType::kBFloat16 && CpuComputesBf16()) {
    if (std::shared_ptr<MatMulPlan> plan = BuildBf16Plan(p, *b_const, packed)) return plan;
  }
  auto plan = std::make_shared<MatMulPlan>();
  const dnnl::engine& eng = CpuEngine();
  plan->a_md = dnnl::memory::desc(p.a_dims, dt::f32, p.a_strides);
  plan->b_user = dnnl::memory::desc(p.b_dims, dt::f32, p.b_strides);
  plan->y_md = dnnl::memory::desc(p.y_dims, dt::f32, PlainStrides(p.y_dims));
  const dnnl::memory::desc b_any(p.b_dims, dt::f32, dnnl::memory::format_tag::any);
  const dnnl::memory::desc& b_desc = b_const != nullptr ? b_any : plan->b_user;
  dnnl::matmul::primitive_desc pd(MatMulDesc(p, plan->a_md, b_desc, *plan), MatMulAttr(p), eng);
  if (!SkipReferenceImpls(pd)) {  // kiln's reference kernel runs instead
    return Status::Unimplemented("oneDNN has only its reference matmul for this problem");
  }
  plan->impl = OnednnImpl(pd.impl_info_str());
  plan->prim = dnnl::matmul(pd);
  plan->b_md = pd.weights_desc();
  plan->scratch_md = pd.scratchpad_desc();
  plan->reorder_b = plan->b_md != plan->b_user;
  if (plan->reorder_b) {
    plan->b_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->b_user, eng, plan->b_md));
    if (b_const != nullptr && packed.half()) {
      plan->packed_half = packed.GetHalf(plan->b_user, b_const->raw_data(), plan->b_md);
    } else if (b_const != nullptr) {
      plan->packed_b = packed.Get(plan->b_user, b_const->raw_data(), plan->b_md);
    }
  }
  return plan;
}

std::unique_ptr<MatMulPlan::Call> MakeCall(const MatMulPlan& plan, bool has_bias) {
  const dnnl::engine& eng = CpuEngine();
  auto c = std::make_unique<MatMulPlan::Call>();
  c->a_user = dnnl::memory(plan.a_md, eng, nullptr);
  c->a = plan.bf16 ? dnnl::memory(plan.a_bf16, eng, nullptr) : c->a_user;
  c->b_user = dnnl::memory(plan.b_user, eng, nullptr);
  c->b = plan.packed_b    ? plan.packed_b
         : plan.reorder_b ? dnnl::memory(plan.b_md, eng, nullptr)
                          : c->b_user;
  c->y = dnnl::memory(plan.y_md, eng, nullptr);
  c->scratch = dnnl::memory(plan.scratch_md, eng, nullptr);
  c->args = {{DNNL_ARG_SRC, c->a},
             {DNNL_ARG_WEIGHTS, c->b},
             {DNNL_ARG_DST, c->y},
             {DNNL_ARG_SCRATCHPAD, c->scratch}};
  if (has_bias) {
    c->bias = dnnl::memory(plan.bias_md, eng, nullptr);
    c->args.emplace(DNNL_ARG_BIAS, c->bias);
  }
  return c;
}

// `b_half`: B (and the plan's packed copy) is held in that 16-bit type; kFloat32 otherwise.
void ExecutePlan(const MatMulPlan& plan, const void* a, const void* b, const void* bias, void* y,
                 DataType b_half) {
  dnnl::stream& s = ThreadStream();
  const auto call = plan.calls.Acquire([&] { return MakeCall(plan, bias != nullptr); });
  MatMulPlan::Call& c = *call;
  c.a_user.set_data_handle(const_cast<void*>(a));
  if (plan.bf16) {  // A converted to BF16; B used as stored (packed, or the constant itself)
    c.a.set_data_handle(ThreadScratch(ScratchSlot::kSrc, plan.a_bf16.get_size()));
    plan.a_reorder.execute(s, c.a_user, c.a);
    if (!plan.reorder_b) c.b_user.set_data_handle(const_cast<void*>(b));
  } else if (b_half != DataType::kFloat32) {  // widened on each call
    c.args[DNNL_ARG_WEIGHTS] = plan.reorder_b
                                   ? ExpandHalfWeights(b_half, plan.packed_half, plan.b_md)
                                   : ExpandHalfWeights(b_half, b, plan.b_user);
  } else if (!plan.reorder_b) {
    c.b_user.set_data_handle(const_cast<void*>(b));
  } else if (!plan.packed_b) {
    c.b.set_data_handle(ThreadScratch(ScratchSlot::kWeights, plan.b_md.get_size()));
    c.b_user.set_data_handle(const_cast<void*>(b));
    plan.b_reorder.execute(s, c.b_user, c.b);
  }
  c.y.set_data_handle(y);
  c.scratch.set_data_handle(
      ThreadScratch(ScratchSlot::kOnednnScratchpad, plan.scratch_md.get_size()));
  if (bias != nullptr) c.bias.set_data_handle(const_cast<void*>(bias));
  plan.prim.execute(s, c.args);
  s.wait();
}

enum class OpKind { kMatMul, kGemm };

// Whether a constant 2-D B runs on kiln's GEMM: where oneDNN's FP32 matmul is not its brgemm
// one (below AVX-512; ONEDNN_MAX_CPU_ISA caps it), unless KILN_CPU_GEMM (read once) says
// otherwise: 'onednn' keeps oneDNN everywhere, to measure what batch invariance costs;
// 'kiln-all' takes kiln's GEMM at every level, whose AVX-512 tiles round as its AVX2 ones
// (docs/kernels.md).
bool UseKilnGemm() {
  static const bool use = [] {
    const std::string_view choice = SettingValue(Setting::kCpuGemm);
    if (choice == "onednn") return false;
    if (choice == "kiln-all") return true;
    const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    return (isa & avx512) != avx512;
  }();
  return use;
}

// A constant B packed for gemm.h: FP32 panels, or the same panels narrowed to the 16-bit type of
// a half-precision B (exact: every value came from that type), widened per call.
struct GemmWeights {
  int64_t k = 0, n = 0;
  DataType storage = DataType::kFloat32;
  std::shared_ptr<float[]> f32;
  std::shared_ptr<uint16_t[]> half;
  int64_t elements = 0;
  int64_t bytes() const { return elements * (half ? 2 : 4); }
};

std::shared_ptr<float[]> AlignedFloats(int64_t count) {
  const size_t bytes = (static_cast<size_t>(count) * 4 + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  return std::shared_ptr<float[]>(p, [](float* q) { std::free(q); });
}

// B (a constant [K, N], or [N, K] with trans_b) packed for gemm.h; null on allocation failure.
std::shared_ptr<const GemmWeights> PackGemmWeights(const OwnedTensor& b, bool trans_b,
                                                   DataType storage) {
  if (b.shape().rank() != 2) return nullptr;
  auto w = std::make_shared<GemmWeights>();
  w->k = trans_b ? b.shape().dim(1) : b.shape().dim(0);
  w->n = trans_b ? b.shape().dim(0) : b.shape().dim(1);
  w->storage = storage;
  w->elements = GemmPackedElements(w->k, w->n);
  const int64_t row_stride = trans_b ? 1 : w->n, col_stride = trans_b ? w->k : 1;
  std::shared_ptr<float[]> wide;  // a half B widened to FP32 before packing
  if (storage != DataType::kFloat32) {
    wide = AlignedFloats(b.num_elements());
    if (wide == nullptr) return nullptr;
    HalfToFloatParallel(storage, static_cast<const uint16_t*>(b.raw_data()), wide.get(),
                        b.num_elements());
  }
  const float* src = wide != nullptr ? wide.get() : b.data<const float>();
  std::shared_ptr<float[]> panels = AlignedFloats(w->elements);
  if (panels == nullptr) return nullptr;
  GemmPackB(src, w->k, w->n, row_stride, col_stride, panels.get());
  if (storage == DataType::kFloat32) {
    w->f32 = std::move(panels);
    return w;
  }
  w->half =
      std::shared_ptr<uint16_t[]>(new (std::nothrow) uint16_t[static_cast<size_t>(w->elements)]);
  if (w->half == nullptr) return nullptr;
  FloatToHalfParallel(storage, panels.get(), w->half.get(), w->elements);
  return w;
}

class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(std::string label, OpKind kind, bool fused, Activation act, bool trans_a,
               bool trans_b, float alpha, float beta, ConstantWeight b_const,
               std::unique_ptr<Kernel> reference)
      : label_(std::move(label)),
        kind_(kind),
        fused_(fused),
        act_(act),
        trans_a_(trans_a),
        trans_b_(trans_b),
        alpha_(alpha),
        beta_(beta),
        b_const_(std::move(b_const.tensor)),
        reference_(std::move(reference)),
        packed_(b_const.half() ? b_const.dtype : DataType::kFloat32) {
    if (b_const_ != nullptr && UseKilnGemm()) {
      gemm_ = PackGemmWeights(*b_const_, trans_b_, packed_.storage());
    }
  }

  int64_t PackedWeightBytes() const override {
    return static_cast<int64_t>(packed_.resident_bytes()) + (gemm_ ? gemm_->bytes() : 0);
  }
  std::string Implementation() const override { return impls_.Joined(); }

  Status Compute(KernelContext& ctx) const override {
    if (!FastPathApplies(ctx)) return RunReference(ctx);
    Problem p;
    Shape out;
    bool declined = false;
    KILN_RETURN_IF_ERROR(kind_ == OpKind::kMatMul ? SetUpMatMul(ctx, p, out, declined)
                                                  : SetUpGemm(ctx, p, out, declined));
    if (declined) return RunReference(ctx);
    const bool has_z = fused_ && ctx.has_input(3);
    if (has_z && ctx.input(3).shape() != out) {
      return OpError(OpName(), "Z {} must have Y's shape {}", ctx.input(3).shape().ToString(),
                     out.ToString());
    }
    const bool gemm_c =
        kind_ == OpKind::kGemm && ctx.has_input(2) && p.bias_dims.empty() && beta_ != 0.0f;
    p.sum = has_z || gemm_c;
    p.act = act_;
    if (gemm_ != nullptr && p.a_dims.size() == 2 && p.b_dims.size() == 2 &&
        p.b_dims[0] == gemm_->k && p.b_dims[1] == gemm_->n) {
      if (!gemm_recorded_.exchange(true, std::memory_order_relaxed)) impls_.Record("kiln gemm");
      return RunGemm(ctx, p, out, gemm_c, has_z);
    }
    PlanCache<MatMulPlan>::Key key(p.a_dims.begin(), p.a_dims.end());
    key.insert(key.end(), p.b_dims.begin(), p.b_dims.end());
    key.insert(key.end(), p.bias_dims.begin(), p.bias_dims.end());
    key.push_back(static_cast<int64_t>(p.bias_dims.size()));
    key.push_back(p.sum);
    std::shared_ptr<const MatMulPlan> plan;
    Status built = CatchDnnl(label_, [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(plan, cache_.Get(key, [&]() -> Result<std::shared_ptr<MatMulPlan>> {
        KILN_ASSIGN_OR_RETURN(std::shared_ptr<MatMulPlan> built,
                              BuildPlan(p, b_const_.get(), packed_));
        impls_.Record(built->impl);
        return built;
      }));
      return Status::OK();
    });
    // A shape oneDNN does not implement, or implements only in its reference code.
    if (!built.ok()) return RunReference(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    Prefill(ctx, gemm_c, has_z, y);
    const void* bias = !p.bias_dims.empty() ? ctx.input(2).raw_data() : nullptr;
    return CatchDnnl(label_, [&]() -> Status {
      ExecutePlan(*plan, ctx.input(0).raw_data(), ctx.input(1).raw_data(), bias, y.raw_data(),
                  packed_.storage());
      return Status::OK();
    });
  }

 private:
  // Y's addend before the product: beta * C (Gemm) and / or Z (the fused ops).
  void Prefill(const KernelContext& ctx, bool gemm_c, bool has_z, Tensor& y) const {
    if (gemm_c) PrefillGemmC(ctx.input(2), y);
    if (has_z) {
      if (gemm_c) {
        AddInPlace(ctx.input(3).data<const float>(), y.data<float>(), y.num_elements());
      } else {
        std::memcpy(y.raw_data(), ctx.input(3).raw_data(), y.size_bytes());
      }
    }
  }

  // The 2-D problem `p` on kiln's GEMM with the packed constant B.
  Status RunGemm(KernelContext& ctx, const Problem& p, const Shape& out, bool gemm_c,
                 bool has_z) const {
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    Prefill(ctx, gemm_c, has_z, y);
    const float* panels = gemm_->f32.get();
    if (gemm_->half != nullptr) {
      auto* wide = static_cast<float*>(
          ThreadScratch(ScratchSlot::kWeights, static_cast<size_t>(gemm_->elements) * 4));
      HalfToFloatParallel(gemm_->storage, gemm_->half.get(), wide, gemm_->elements);
      panels = wide;
    }
    GemmEpilogue e;
    e.alpha = p.alpha;
    e.bias = !p.bias_dims.empty() ? ctx.input(2).data<const float>() : nullptr;
    e.accumulate = p.sum;
    e.act = act_;
    Gemm(p.a_dims[0], ctx.input(0).data<const float>(), p.a_strides[0], p.a_strides[1],
         GemmB{panels, gemm_->k, gemm_->n}, y.data<float>(), p.y_dims[1], e);
    return Status::OK();
  }

  const char* OpName() const {
    if (kind_ == OpKind::kMatMul) return fused_ ? "FusedMatMul" : "MatMul";
    return fused_ ? "FusedGemm" : "Gemm";
  }

  bool FastPathApplies(const KernelContext& ctx) const {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& t = ctx.input(i);
      const bool half_b = i == 1 && packed_.half() && t.dtype() == packed_.storage();
      if ((t.dtype() != DataType::kFloat32 && !half_b) || !t.device().is_cpu() ||
          !t.is_contiguous()) {
        return false;
      }
    }
    return ctx.num_inputs() >= 2 && ctx.has_input(0) && ctx.has_input(1) &&
           ctx.input(0).rank() >= 2 && ctx.input(1).rank() >= 2 &&
           ctx.input(0).num_elements() > 0 && ctx.input(1).num_elements() > 0;
  }

  Status SetUpMatMul(const KernelContext& ctx, Problem& p, Shape& out, bool& declined) const {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const int ra = a.rank(), rb = b.rank();
    const int64_t m = a.dim(ra - 2), k = a.dim(ra - 1), kb = b.dim(rb - 2), n = b.dim(rb - 1);
    if (k != kb) {
      declined = true;  // the reference reports it
      return Status::OK();
    }
    const Shape a_batch(a.shape().dims().first(static_cast<size_t>(ra - 2)));
    const Shape b_batch(b.shape().dims().first(static_cast<size_t>(rb - 2)));
    Result<Shape> batch = ref::BroadcastShapes("MatMul", a_batch, b_batch);
    if (!batch.ok()) {
      declined = true;
      return Status::OK();
    }
    std::vector<int64_t> out_dims(batch->dims().begin(), batch->dims().end());
    out_dims.push_back(m);
    out_dims.push_back(n);
    KILN_ASSIGN_OR_RETURN(out, Shape::Create(out_dims));
    if (out.NumElements() == 0) {
      declined = true;
      return Status::OK();
    }
    const bool has_bias = fused_ && ctx.has_input(2);
    if (has_bias) {
      const Tensor& bias = ctx.input(2);
      if (bias.rank() != 1 || bias.dim(0) != n) {
        return OpError(OpName(), "Bias {} must be 1-D with N={} elements", bias.shape().ToString(),
                       n);
      }
    }
    if (b_batch.NumElements() == 1 && a_batch.rank() >= b_batch.rank()) {
      // Collapse A's batch into M: one 2-D product.
      const int64_t rows = a_batch.NumElements() * m;
      p.a_dims = {rows, k};
      p.b_dims = {k, n};
      p.y_dims = {rows, n};
      p.a_strides = {k, 1};
      p.b_strides = {n, 1};
      if (has_bias) p.bias_dims = {1, n};
      return Status::OK();
    }
    const int r = out.rank();
    auto padded = [r](const Tensor& t) {
      dnnl::memory::dims d(static_cast<size_t>(r - t.rank()), 1);
      d.insert(d.end(), t.shape().dims().begin(), t.shape().dims().end());
      return d;
    };
    p.a_dims = padded(a);
    p.b_dims = padded(b);
    p.y_dims = ToDims(out.dims());
    p.a_strides = PlainStrides(p.a_dims);
    p.b_strides = PlainStrides(p.b_dims);
    if (has_bias) {
      p.bias_dims = dnnl::memory::dims(static_cast<size_t>(r), 1);
      p.bias_dims.back() = n;
    }
    return Status::OK();
  }

  Status SetUpGemm(const KernelContext& ctx, Problem& p, Shape& out, bool& declined) const {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.rank() != 2 || b.rank() != 2) {
      declined = true;
      return Status::OK();
    }
    const int64_t m = trans_a_ ? a.dim(1) : a.dim(0);
    const int64_t k = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t kb = trans_b_ ? b.dim(1) : b.dim(0);
    const int64_t n = trans_b_ ? b.dim(0) : b.dim(1);
    if (k != kb) {
      declined = true;
      return Status::OK();
    }
    out = Shape{m, n};
    if (ctx.has_input(2) && !ref::BroadcastsTo(ctx.input(2).shape(), out)) {
      declined = true;
      return Status::OK();
    }
    p.a_dims = {m, k};
    p.a_strides = trans_a_ ? dnnl::memory::dims{1, m} : dnnl::memory::dims{k, 1};
    p.b_dims = {k, n};
    p.b_strides = trans_b_ ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1};
    p.y_dims = {m, n};
    p.alpha = alpha_;
    // C that is a row vector with alpha = beta = 1 is the primitive's bias; others are prefilled
    // into Y.
    if (ctx.has_input(2) && beta_ == 1.0f && alpha_ == 1.0f) {
      const Shape& cs = ctx.input(2).shape();
      const bool row = (cs.rank() == 1 && cs.dim(0) == n && n > 1) ||
                       (cs.rank() == 2 && cs.dim(0) == 1 && cs.dim(1) == n && n > 1);
      if (row) p.bias_dims = {1, n};
    }
    return Status::OK();
  }

  // y = beta * C broadcast to y's [M, N].
  void PrefillGemmC(const Tensor& c, Tensor& y) const {
    const ref::DimArray sc = ref::BroadcastStrides(c.shape(), y.shape());
    const float* pc = c.data<const float>();
    float* py = y.data<float>();
    const int64_t m = y.dim(0), n = y.dim(1);
    ParallelFor(m, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t j = 0; j < n; ++j) py[i * n + j] = beta_ * pc[i * sc[0] + j * sc[1]];
      }
    });
  }

  static void AddInPlace(const float* z, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += z[i];
  }

  // The reference kernel on A, B (and C / Bias for Gemm); for the fused ops, Bias, Z and the
  // activation are applied here afterwards.
  Status RunReference(KernelContext& ctx) const {
    impls_.Record("kiln ref");
    if (!fused_) return reference_->Compute(ctx);
    KILN_RETURN_IF_ERROR(ref::CheckInputs(ctx, 2, OpName()));
    const int n_ref_inputs = kind_ == OpKind::kGemm ? 3 : 2;
    std::vector<Tensor> inputs;
    inputs.reserve(n_ref_inputs);
    for (int i = 0; i < n_ref_inputs; ++i) {
      inputs.push_back(i < ctx.num_inputs() ? ctx.input(i) : Tensor());
    }
    OwnedTensor wide_b;  // a half-precision B, widened for the FP32 reference
    if (packed_.half() && inputs[1].valid() && inputs[1].dtype() == packed_.storage() &&
        inputs[1].is_contiguous()) {
      KILN_ASSIGN_OR_RETURN(wide_b, OwnedTensor::Allocate(DataType::kFloat32, inputs[1].shape()));
      HalfToFloat(packed_.storage(), static_cast<const uint16_t*>(inputs[1].raw_data()),
                  wide_b.data<float>(), wide_b.num_elements());
      inputs[1] = wide_b.view();
    }
    std::vector<OwnedTensor> outputs(1);
    KernelContext sub(inputs, outputs);
    KILN_RETURN_IF_ERROR(reference_->Compute(sub));
    const OwnedTensor& r = outputs[0];
    if (r.dtype() != DataType::kFloat32) {
      return OpError(OpName(), "only FLOAT is supported, got {}", DataTypeName(r.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, r.shape()));
    std::memcpy(y.raw_data(), r.raw_data(), y.size_bytes());
    float* py = y.data<float>();
    const int64_t total = y.num_elements();
    if (kind_ == OpKind::kMatMul && ctx.has_input(2)) {
      const Tensor& bias = ctx.input(2);
      const int64_t n = y.rank() > 0 ? y.dim(y.rank() - 1) : 1;
      if (bias.rank() != 1 || bias.dim(0) != n) {
        return OpError(OpName(), "Bias {} must be 1-D with N={} elements", bias.shape().ToString(),
                       n);
      }
      const float* pb = bias.data<const float>();
      for (int64_t i = 0; i < total; ++i) py[i] += pb[i % n];
    }
    if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
      if (ctx.input(3).shape() != y.shape()) {
        return OpError(OpName(), "Z {} must have Y's shape {}", ctx.input(3).shape().ToString(),
                       y.shape().ToString());
      }
      AddInPlace(ctx.input(3).data<const float>(), py, total);
    }
    ApplyActivationInPlace(act_, py, total);
    return Status::OK();
  }

  std::string label_;
  ImplementationLog impls_;
  mutable std::atomic<bool> gemm_recorded_{false};  // "kiln gemm" is in impls_
  OpKind kind_;
  bool fused_;
  Activation act_;
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  std::shared_ptr<const OwnedTensor> b_const_;  // B when it is a constant initializer
  std::unique_ptr<Kernel> reference_;           // ref MatMul / Gemm
  PlanCache<MatMulPlan> cache_;
  PackedWeights packed_;  // storage: FLOAT16 / BFLOAT16 for a half-precision B
  // B packed for kiln's GEMM (NOTE on batch invariance); null: oneDNN runs every product.
  std::shared_ptr<const GemmWeights> gemm_;
};

Result<std::unique_ptr<Kernel>> Make(const KernelInfo& info, OpKind kind, bool fused) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  ref::AttrReader attrs(info);
  Activation act;
  if (fused) {
    KILN_ASSIGN_OR_RETURN(act, ReadActivation(info));
  }
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  std::unique_ptr<Kernel> reference;
  if (kind == OpKind::kGemm) {
    KILN_ASSIGN_OR_RETURN(trans_a, attrs.Bool("transA", false));
    KILN_ASSIGN_OR_RETURN(trans_b, attrs.Bool("transB", false));
    KILN_ASSIGN_OR_RETURN(alpha, attrs.Float("alpha", 1.0f));
    KILN_ASSIGN_OR_RETURN(beta, attrs.Float("beta", 1.0f));
    if (fused) {
      // The reference Gemm checks opset-dependent rules; ai.kiln has C optional.
      NodeDesc as_gemm = info.node();
      as_gemm.opset = 13;
      KILN_ASSIGN_OR_RETURN(reference, ref::CreateGemm(KernelInfo(as_gemm)));
    } else {
      KILN_ASSIGN_OR_RETURN(reference, ref::CreateGemm(info));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(reference, ref::CreateMatMul(info));
  }
  // Half-precision weights are the fused ops' only (op/kiln_ops.h); a plain MatMul / Gemm
  // with a FLOAT16 B goes to the reference kernel's checks.
  ConstantWeight b = ConstantWeightInput(info, 1);
  if (!fused && b.half()) b = {};
  return std::make_unique<MatMulKernel>(NodeLabel(info), kind, fused, act, trans_a, trans_b, alpha,
                                        beta, std::move(b), std::move(reference));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateMatMul(const KernelInfo& info) {
  return Make(info, OpKind::kMatMul, false);
}
Result<std::unique_ptr<Kernel>> CreateGemm(const KernelInfo& info) {
  return Make(info, OpKind::kGemm, false);
}
Result<std::unique_ptr<Kernel>> CreateFusedMatMul(const KernelInfo& info) {
  return Make(info, OpKind::kMatMul, true);
}
Result<std::unique_ptr<Kernel>> CreateFusedGemm(const KernelInfo& info) {
  return Make(info, OpKind::kGemm, true);
}

}  // namespace kiln::cpu
