// SPDX-License-Identifier: Apache-2.0
// Conv and ai.kiln FusedConv on oneDNN (FP32, 1-D to 3-D spatial, groups and depthwise, strides,
// dilations, explicit pads and auto_pad).
//
// NOTE on the approach. Per input shape (X's and W's dims) the kernel builds a plan once: a
// convolution primitive whose source, weights and destination formats are left to oneDNN
// (format_tag::any, so it picks its blocked layouts), the reorders between those formats and
// the plain NCHW tensors kiln passes around, and, when W is a constant initializer, W reordered
// once into the primitive's format (pre-packing). Plans live in a small cache behind a mutex;
// Compute only looks one up and executes it. FusedConv adds Z with a binary-add post-op that reads
// it in place when the destination's format is fixed, else with a sum post-op (Z copied or
// reordered into the destination first), and the activation with eltwise post-ops. Padding is
// resolved by the same code as the reference kernel (ref/spatial.h), so both agree on auto_pad
// and output sizes.
//
// Blocked layout (op/kiln_ops.h, FusedConv x_block / y_block): a blocked X, Y or Z is handed to
// oneDNN as nChw8c / nChw16c memory of the logical [N, C, H, W] dims, which is exactly kiln's
// [N, ceil(C/b), H, W, b] tensor, zero padding included. Those operands are fixed to that format
// (never format_tag::any), so inside a blocked region a call runs the convolution alone: no
// source, destination or weight reorder (weights are pre-packed as above).
//
// Half-precision weights (FusedConv with a FLOAT16 / BFLOAT16 constant W, opt pass half_weights):
// W is pre-packed in 16 bits (PackedWeights' half storage) and widened to FP32 into a per-thread
// scratch buffer on each call; the convolution itself runs in FP32. Except a BFLOAT16 W on a CPU
// with BF16 dot products (AVX512-BF16): there oneDNN's BF16 convolution runs on W as stored and
// X converted to BF16 per call, accumulating in FP32 (CpuComputesBf16).

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/layout.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using ref::OpError;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// The input channels from which a spatial convolution of a blocked X tries oneDNN's BRGEMM
// kernel on channels-last operands first (see BuildPlan).
constexpr int64_t kBrgemmMinChannels = 160;
// The images (pixels per channel) up to which a plain pointwise convolution takes oneDNN's
// blocked kernel with reorders rather than its GEMM on NCHW (see BuildPlan).
constexpr int64_t kPlainPointwiseMaxSmallPixels = 64;

struct ConvPlan {
  dnnl::convolution_forward prim;
  dnnl::memory::desc src_user, wei_user, dst_user, bias_md;
  dnnl::memory::desc src_md, wei_md, dst_md, scratch_md;
  bool reorder_src = false, reorder_wei = false, reorder_dst = false;
  dnnl::reorder src_reorder, wei_reorder, z_reorder, dst_reorder;
  dnnl::memory packed_wei;  // W in wei_md (shared via PackedWeights), when W is constant
  const uint16_t* packed_half = nullptr;  // the same for a half-precision W (16-bit copy)
  Shape out_shape;
  bool unimplemented = false;  // oneDNN has no implementation: the fallback kernel runs
  bool binary_z = false;       // Z is read by a binary-add post-op (else copied into Y, summed)
  bool bf16 = false;           // computes in BF16 (a BFLOAT16 W on a CPU with BF16 dot products)
  // One call's memory objects, bound to the descriptors above and to the arguments; each call
  // sets their data handles. `src` is `src_user` unless X is reordered (likewise `dst`).
  struct Call {
    dnnl::memory src_user, src, wei_user, wei, dst_user, dst, scratch, bias, z;
    std::unordered_map<int, dnnl::memory> args;
  };
  CallObjects<Call> calls;
};

class ConvKernel final : public Kernel {
 public:
  // `w` is W when it is a constant; a FLOAT16 / BFLOAT16 W (FusedConv only) is kept in 16 bits.
  ConvKernel(std::string label, ref::WindowAttrs window, int64_t group, Activation act, bool fused,
             ConstantWeight w, int64_t x_block = 0, int64_t y_block = 0)
      : label_(std::move(label)),
        window_(std::move(window)),
        group_(group),
        act_(act),
        fused_(fused),
        w_const_(std::move(w.tensor)),
        w_half_(w.half()),
        x_block_(x_block),
        y_block_(y_block),
        packed_(w.half() ? w.dtype : DataType::kFloat32) {}

  int64_t PackedWeightBytes() const override {
    return static_cast<int64_t>(packed_.resident_bytes());
  }
  std::string Implementation() const override { return impls_.Joined(); }

  // The reference kernel of the node, for what oneDNN does not take (non-FLOAT, rank outside
  // 3..5, empty tensors, configurations where oneDNN has only its reference implementation); its
  // checks and messages then apply.
  void set_fallback(std::unique_ptr<Kernel> k) { fallback_ = std::move(k); }

  Status Compute(KernelContext& ctx) const override {
    const char* op = fused_ ? "FusedConv" : "Conv";
    if (fallback_ != nullptr && !FastPathApplies(ctx)) {
      impls_.Record("kiln ref");
      return fallback_->Compute(ctx);
    }
    KILN_RETURN_IF_ERROR(ref::CheckInputs(ctx, 2, op));
    const bool has_bias = ctx.has_input(2);
    const bool has_z = fused_ && ctx.has_input(3);
    for (int i = 2; i < 4; ++i) {
      if (ctx.has_input(i)) KILN_RETURN_IF_ERROR(ref::CheckInput(ctx, i, op));
    }
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    for (int i = 0; i < 4; ++i) {
      if (i == 1 && w_half_ && w.dtype() == packed_.storage()) continue;
      if (ctx.has_input(i) && ctx.input(i).dtype() != DataType::kFloat32) {
        return OpError(op, "input {} has dtype {}, this kernel takes FLOAT", i,
                       DataTypeName(ctx.input(i).dtype()));
      }
    }
    const int x_logical_rank = x_block_ > 0 ? x.rank() - 1 : x.rank();
    if (x_logical_rank < 3 || x_logical_rank > 5) {
      return OpError(op, "X must have rank 3 to 5 ([N, C, spatial...]), got {}",
                     x.shape().ToString());
    }
    // X's logical [N, C, spatial...] dims (a blocked X: [N, C/b, spatial..., b], C from W).
    std::vector<int64_t> x_dims(x.shape().dims().begin(), x.shape().dims().end());
    if (x_block_ > 0) {
      const bool blocked_rank = w.rank() == 4 || w.rank() == 5;
      const int64_t c = blocked_rank ? w.dim(1) * group_ : -1;
      if (!blocked_rank || x.rank() != w.rank() + 1 || x.dim(x.rank() - 1) != x_block_ ||
          x.dim(1) != (c + x_block_ - 1) / x_block_) {
        return OpError(op,
                       "blocked X {} must be [N, ceil(C/{}), spatial..., {}] with C and the "
                       "spatial rank (2 or 3) from W {}",
                       x.shape().ToString(), x_block_, x_block_, w.shape().ToString());
      }
      x_dims.pop_back();
      x_dims[1] = c;
    }
    if (w.rank() != static_cast<int>(x_dims.size())) {
      return OpError(op, "W {} must have the same rank as X {}", w.shape().ToString(),
                     x.shape().ToString());
    }
    if (y_block_ > 0 && w.rank() != 4 && w.rank() != 5) {
      return OpError(op, "a blocked Y needs a 2-D or 3-D convolution, W is {}",
                     w.shape().ToString());
    }
    const int64_t channels = x_dims[1], out_channels = w.dim(0), group_channels = w.dim(1);
    if (channels % group_ != 0 || channels / group_ != group_channels) {
      return OpError(op, "X {} has {} channels but W {} with group={} expects {} x {} channels",
                     x.shape().ToString(), channels, w.shape().ToString(), group_, group_,
                     group_channels);
    }
    if (out_channels % group_ != 0) {
      return OpError(op, "W {} has {} output channels, not divisible by group={}",
                     w.shape().ToString(), out_channels, group_);
    }
    if (has_bias && (ctx.input(2).rank() != 1 || ctx.input(2).dim(0) != out_channels)) {
      return OpError(op, "B {} must be 1-D with {} elements (W's output channels)",
                     ctx.input(2).shape().ToString(), out_channels);
    }
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    if (!window_.kernel_shape.empty() &&
        !std::equal(kernel.begin(), kernel.end(), window_.kernel_shape.begin(),
                    window_.kernel_shape.end())) {
      return OpError(op, "attribute 'kernel_shape' [{}] differs from W's spatial dims {}",
                     fmt::join(window_.kernel_shape, ","), w.shape().ToString());
    }
    if (x.num_elements() == 0 || w.num_elements() == 0) {
      return OpError(op, "empty X {} or W {} is not supported", x.shape().ToString(),
                     w.shape().ToString());
    }
    Result<std::shared_ptr<const ConvPlan>> plan_or = GetPlan(x_dims, w, has_bias, has_z);
    if (!plan_or.ok()) {
      // A configuration oneDNN does not implement: plain Conv still runs on the reference.
      if (fallback_ != nullptr && plan_or.status().code() == StatusCode::kInternal) {
        impls_.Record("kiln ref");
        return fallback_->Compute(ctx);
      }
      return plan_or.status();
    }
    const std::shared_ptr<const ConvPlan> plan = std::move(plan_or).value();
    if (plan->unimplemented) return fallback_->Compute(ctx);
    if (has_z && ctx.input(3).shape() != plan->out_shape) {
      return OpError(op, "Z {} must have Y's shape {}", ctx.input(3).shape().ToString(),
                     plan->out_shape.ToString());
    }
    // Every element of Y is written below by the primitive (or the reorder from its format),
    // the padding lanes of a blocked Y included: oneDNN writes zeros there (CpuLayoutTest
    // checks it on NaN-filled outputs at every ISA level).
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, plan->out_shape));
    return CatchDnnl(label_, [&]() -> Status {
      Execute(*plan, ctx, y, has_bias, has_z);
      return Status::OK();
    });
  }

 private:
  bool FastPathApplies(const KernelContext& ctx) const {
    for (int i = 0; i < std::min(ctx.num_inputs(), 3); ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& t = ctx.input(i);
      const bool half_w = i == 1 && w_half_ && t.dtype() == packed_.storage();
      if ((t.dtype() != DataType::kFloat32 && !half_w) || !t.device().is_cpu() ||
          !t.is_contiguous()) {
        return false;
      }
    }
    const Tensor& x = ctx.input(0);
    const int x_rank = x_block_ > 0 ? x.rank() - 1 : x.rank();  // a blocked X has one more
    return x_rank >= 3 && x_rank <= 5 && ctx.input(1).rank() == x_rank && x.num_elements() > 0 &&
           ctx.input(1).num_elements() > 0;
  }

  Result<std::shared_ptr<const ConvPlan>> GetPlan(std::span<const int64_t> x_dims, const Tensor& w,
                                                  bool has_bias, bool has_z) const {
    std::vector<int64_t> key(x_dims.begin(), x_dims.end());
    key.insert(key.end(), w.shape().dims().begin(), w.shape().dims().end());
    key.push_back(has_bias);
    key.push_back(has_z);
    std::shared_ptr<const ConvPlan> plan;
    KILN_RETURN_IF_ERROR(CatchDnnl(label_, [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(plan,
                            cache_.Get(key, [&] { return BuildPlan(x_dims, w, has_bias, has_z); }));
      return Status::OK();
    }));
    return plan;
  }

  Result<std::shared_ptr<ConvPlan>> BuildPlan(std::span<const int64_t> x_dims, const Tensor& w,
                                              bool has_bias, bool has_z) const {
    const char* op = fused_ ? "FusedConv" : "Conv";
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    KILN_ASSIGN_OR_RETURN(ref::WindowGeometry g,
                          ref::ResolveWindow(op, window_, x_dims.subspan(2), kernel));
    const int rank = static_cast<int>(x_dims.size());
    const int64_t out_channels = w.dim(0);
    std::vector<int64_t> out_dims = {x_dims[0], out_channels};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
    auto plan = std::make_shared<ConvPlan>();
    if (y_block_ > 0) {
      std::vector<int64_t> blocked = out_dims;
      blocked[1] = (out_channels + y_block_ - 1) / y_block_;
      blocked.push_back(y_block_);
      KILN_ASSIGN_OR_RETURN(plan->out_shape, Shape::Create(blocked));
    } else {
      KILN_ASSIGN_OR_RETURN(plan->out_shape, Shape::Create(out_dims));
    }

    dnnl::memory::dims src_dims = ToDims(x_dims);
    dnnl::memory::dims dst_dims = ToDims(out_dims);
    dnnl::memory::dims wei_dims;
    if (group_ > 1) {
      wei_dims = {group_, out_channels / group_, w.dim(1)};
      for (int64_t k : kernel) wei_dims.push_back(k);
    } else {
      wei_dims = ToDims(w.shape().dims());
    }
    const DnnlWindow win = ToDnnlWindow(g);
    plan->src_user = dnnl::memory::desc(src_dims, dt::f32,
                                        x_block_ > 0 ? BlockedTag(rank, x_block_) : PlainTag(rank));
    plan->dst_user = dnnl::memory::desc(dst_dims, dt::f32,
                                        y_block_ > 0 ? BlockedTag(rank, y_block_) : PlainTag(rank));
    plan->wei_user =
        dnnl::memory::desc(wei_dims, dt::f32, PlainTag(static_cast<int>(wei_dims.size())));
    plan->bias_md = dnnl::memory::desc({out_channels}, dt::f32, tag::a);
    // A pointwise convolution (1x1, stride 1, no padding, one group) is a plain GEMM over NCHW:
    // oneDNN runs it in place faster than reordering X and Y to and from a blocked layout
    // (measured: ResNet-50's 256->64 1x1 at 56x56, about 1.9x). Everything else gets oneDNN's
    // preferred layout. Not on a small image (at most 8x8 pixels): a GEMM of so few columns runs
    // slowly, and oneDNN's blocked 1x1 kernel is faster, reorders included (ShuffleNetV2's
    // 192->1024 at 7x7: 49 us against 66 us; Inception-v3's 2048->320 at 8x8: 193 / 314 us).
    bool pointwise = group_ == 1 && x_block_ == 0 && y_block_ == 0;
    int64_t pixels = 1;
    for (int d = 0; d < g.rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      pointwise = pointwise && g.kernel[du] == 1 && g.stride[du] == 1 && g.pad_begin[du] == 0 &&
                  g.pad_end[du] == 0;
      pixels *= g.out[du];
    }
    pointwise = pointwise && pixels > kPlainPointwiseMaxSmallPixels;
    // Blocked operands are fixed to their format (no reorder inside a blocked region). A BF16
    // convolution takes X in BF16, in the same format (X is converted on each call) and W in BF16.
    // A thin plain X entering a blocked region (fewer channels than the block: an RGB stem, or
    // MNASNet's 8-channel layer) is read as it is: oneDNN's "first convolution" kernels take
    // plain NCHW, where left to choose it would pick a padded block and kiln would reorder X
    // into it on every call (MNASNet 0.5's 8->24 1x1 at 112x112: 20 us plain, 58 us with the
    // reorder).
    const bool thin_x = x_block_ == 0 && y_block_ > 0 && group_ == 1 && x_dims[1] < y_block_;
    const auto src_any = [&](dt type) {
      return pointwise || x_block_ > 0 || thin_x
                 ? dnnl::memory::desc(src_dims, type,
                                      x_block_ > 0 ? BlockedTag(rank, x_block_) : PlainTag(rank))
                 : dnnl::memory::desc(src_dims, type, tag::any);
    };
    const dnnl::memory::desc dst_any = pointwise || y_block_ > 0
                                           ? plan->dst_user
                                           : dnnl::memory::desc(dst_dims, dt::f32, tag::any);

    // The residual Z: added by a sum post-op, Y holding a copy of Z first; or, when Y's format is
    // fixed (so Z is in it too), read in place by a binary-add post-op, which saves the copy (a
    // full read and write of Y: measured 1.05x on MobileNetV2's 144->24 projection at 56x56,
    // 1.4x on ResNet-50's 64->256 at batch 32). The binary form is kept only when oneDNN runs it
    // with the same implementation as the sum form, never a slower reference one.
    const auto make_attr = [&](bool binary_z) {
      dnnl::post_ops ops;
      if (has_z && binary_z) {
        ops.append_binary(dnnl::algorithm::binary_add, plan->dst_user);
      } else if (has_z) {
        ops.append_sum(1.0f);
      }
      AppendActivation(ops, act_);
      return MakeAttr(ops);
    };
    const dnnl::engine& eng = CpuEngine();
    const auto make_desc = [&](dt type, const dnnl::memory::desc& src,
                               const dnnl::memory::desc& dst) {
      const dnnl::memory::desc wei_any(wei_dims, type, tag::any);
      return has_bias
                 ? dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                       wei_any, plan->bias_md, dst, win.strides, win.dilates, win.pad_l, win.pad_r)
                 : dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                       wei_any, dst, win.strides, win.dilates, win.pad_l, win.pad_r);
    };
    // A BFLOAT16 W on a CPU with BF16 dot products: the convolution computes in BF16 (X rounded
    // to BF16, products accumulated in FP32, Y in FP32), about 2x the FP32 rate on 3x3 layers,
    // when oneDNN has a BF16 kernel for it (never its reference one); else FP32 as below.
    dnnl::convolution_forward::desc desc = make_desc(dt::f32, src_any(dt::f32), dst_any);
    dnnl::memory::desc dst_chosen = dst_any;
    dnnl::convolution_forward::primitive_desc pd;
    if (w_half_ && packed_.storage() == DataType::kBFloat16 && CpuComputesBf16()) {
      try {
        const dnnl::convolution_forward::desc bf16 =
            make_desc(dt::bf16, src_any(dt::bf16), dst_any);
        dnnl::convolution_forward::primitive_desc candidate(bf16, make_attr(false), eng);
        if (SkipReferenceImpls(candidate)) {
          desc = bf16;
          pd = candidate;
          plan->bf16 = true;
        }
      } catch (const dnnl::error&) {
        // No BF16 convolution for this configuration: FP32 with widened weights.
      }
    }
    if (!plan->bf16) {
      // The formats tried, best first, each with oneDNN's implementations other than its
      // reference ones: the preferred ones above (a blocked operand fixed, as its region has
      // it); then every operand left to oneDNN, with reorders at the edges (AVX2 has no 8-blocked
      // kernel for a dilated convolution, say); then plain NCHW, where oneDNN's GEMM-based
      // convolution takes any geometry. Only when all of them have nothing but the reference
      // implementation does kiln's own reference kernel run instead.
      const dnnl::memory::desc src_free(src_dims, dt::f32, tag::any);
      const dnnl::memory::desc dst_free(dst_dims, dt::f32, tag::any);
      const dnnl::memory::desc src_plain(src_dims, dt::f32, PlainTag(rank));
      const dnnl::memory::desc dst_plain(dst_dims, dt::f32, PlainTag(rank));
      // A spatial convolution of a wide blocked X (C_in >= 160) runs faster on oneDNN's
      // BRGEMM-based kernel, which takes channels-last operands, than on its direct
      // kernel for the blocked layout, reorders of X and Y included. Those layers read
      // large weights for little spatial reuse (ResNet's last stages, Inception's and
      // GoogLeNet's 3x3 branches), and BRGEMM streams weights from memory better: ResNet-18's
      // 512->512 3x3 at 7x7 with its weights out of cache takes 567 us instead of 780 us
      // (batch 8: 3328 / 3676 us; 256->256 at 14x14: 461 / 533 us). Narrower layers (64-128
      // channels at 28x28 and more) are as fast or faster on the direct kernel, so they keep
      // it. Only a BRGEMM implementation is taken here (there is none below AVX-512).
      const bool spatial =
          std::any_of(g.kernel.begin(), g.kernel.begin() + g.rank, [](int64_t k) { return k > 1; });
      const bool try_brgemm =
          group_ == 1 && g.rank == 2 && x_block_ > 0 && spatial && x_dims[1] >= kBrgemmMinChannels;
      const std::pair<dnnl::memory::desc, dnnl::memory::desc> formats[] = {
          {src_free, dst_free},
          {src_any(dt::f32), dst_any},
          {src_free, dst_free},
          {src_plain, dst_plain}};
      bool found = false;
      for (size_t f = try_brgemm ? 0 : 1; f < std::size(formats); ++f) {
        const auto& [src, dst] = formats[f];
        try {
          const dnnl::convolution_forward::desc candidate_desc = make_desc(dt::f32, src, dst);
          dnnl::convolution_forward::primitive_desc candidate(candidate_desc, make_attr(false),
                                                              eng);
          if (!SkipReferenceImpls(candidate)) continue;
          if (f == 0 && !std::string_view(candidate.impl_info_str()).starts_with("brgconv")) {
            continue;
          }
          desc = candidate_desc;
          dst_chosen = dst;
          pd = candidate;
          found = true;
          break;
        } catch (const dnnl::error& e) {
          if (e.status != dnnl_unimplemented) throw;
        }
      }
      if (!found) {
        if (fallback_ == nullptr) {
          return Status::Unimplemented(fmt::format(
              "{}: oneDNN has only its reference convolution for this configuration", label_));
        }
        // Remembered per shape, so a configuration oneDNN lacks is not retried on every call.
        plan->unimplemented = true;
        impls_.Record("kiln ref");
        return plan;
      }
    }
    if (has_z && dst_chosen == plan->dst_user) {
      try {
        dnnl::convolution_forward::primitive_desc binary(desc, make_attr(true), eng);
        if (std::string_view(binary.impl_info_str()) == pd.impl_info_str()) {
          pd = binary;
          plan->binary_z = true;
        }
      } catch (const dnnl::error&) {
        // No binary post-op for this configuration: the sum form stays.
      }
    }
    impls_.Record(OnednnImpl(pd.impl_info_str()));
    plan->prim = dnnl::convolution_forward(pd);
    plan->src_md = pd.src_desc();
    plan->wei_md = pd.weights_desc();
    plan->dst_md = pd.dst_desc();
    plan->scratch_md = pd.scratchpad_desc();
    plan->reorder_src = PlanReorder(plan->src_user, plan->src_md, &plan->src_reorder);
    plan->reorder_dst = PlanReorder(plan->dst_md, plan->dst_user, &plan->dst_reorder);
    if (plan->reorder_dst && has_z) PlanReorder(plan->dst_user, plan->dst_md, &plan->z_reorder);
    if (plan->bf16) {  // W is used in BF16 as stored: packed (or read) without widening
      plan->wei_user =
          dnnl::memory::desc(wei_dims, dt::bf16, PlainTag(static_cast<int>(wei_dims.size())));
    }
    plan->reorder_wei = PlanReorder(plan->wei_user, plan->wei_md, &plan->wei_reorder);
    if (plan->reorder_wei) {
      if (w_const_ != nullptr && w_half_ && !plan->bf16) {  // pre-pack once per format
        plan->packed_half = packed_.GetHalf(plan->wei_user, w_const_->raw_data(), plan->wei_md);
      } else if (w_const_ != nullptr) {  // an FP32 W, or a BF16 W packed as stored
        plan->packed_wei = packed_.Get(plan->wei_user, w_const_->raw_data(), plan->wei_md);
      }
    }
    return plan;
  }

  static std::unique_ptr<ConvPlan::Call> MakeCall(const ConvPlan& plan, bool has_bias, bool has_z) {
    const dnnl::engine& eng = CpuEngine();
    auto c = std::make_unique<ConvPlan::Call>();
    c->src_user = dnnl::memory(plan.src_user, eng, nullptr);
    c->src = plan.reorder_src ? dnnl::memory(plan.src_md, eng, nullptr) : c->src_user;
    c->wei_user = dnnl::memory(plan.wei_user, eng, nullptr);
    c->wei = plan.packed_wei    ? plan.packed_wei
             : plan.reorder_wei ? dnnl::memory(plan.wei_md, eng, nullptr)
                                : c->wei_user;
    c->dst_user = dnnl::memory(plan.dst_user, eng, nullptr);
    c->dst = plan.reorder_dst ? dnnl::memory(plan.dst_md, eng, nullptr) : c->dst_user;
    c->scratch = dnnl::memory(plan.scratch_md, eng, nullptr);
    c->args = {{DNNL_ARG_SRC, c->src},
               {DNNL_ARG_WEIGHTS, c->wei},
               {DNNL_ARG_DST, c->dst},
               {DNNL_ARG_SCRATCHPAD, c->scratch}};
    if (has_bias) {
      c->bias = dnnl::memory(plan.bias_md, eng, nullptr);
      c->args.emplace(DNNL_ARG_BIAS, c->bias);
    }
    if (has_z) {
      c->z = dnnl::memory(plan.dst_user, eng, nullptr);
      if (plan.binary_z) c->args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, c->z);
    }
    return c;
  }

  void Execute(const ConvPlan& plan, KernelContext& ctx, Tensor& y, bool has_bias,
               bool has_z) const {
    dnnl::stream& s = ThreadStream();
    const auto call = plan.calls.Acquire([&] { return MakeCall(plan, has_bias, has_z); });
    ConvPlan::Call& c = *call;
    c.src_user.set_data_handle(ctx.input(0).raw_data());
    if (plan.reorder_src) {
      c.src.set_data_handle(ThreadScratch(ScratchSlot::kSrc, plan.src_md.get_size()));
      plan.src_reorder.execute(s, c.src_user, c.src);
    }
    if (w_half_ && !plan.bf16) {  // widened on each call, from the constant or its packed copy
      c.args[DNNL_ARG_WEIGHTS] =
          plan.reorder_wei
              ? ExpandHalfWeights(packed_.storage(), plan.packed_half, plan.wei_md)
              : ExpandHalfWeights(packed_.storage(), ctx.input(1).raw_data(), plan.wei_user);
    } else if (!plan.reorder_wei) {
      c.wei_user.set_data_handle(ctx.input(1).raw_data());
    } else if (!plan.packed_wei) {
      c.wei.set_data_handle(ThreadScratch(ScratchSlot::kWeights, plan.wei_md.get_size()));
      c.wei_user.set_data_handle(ctx.input(1).raw_data());
      plan.wei_reorder.execute(s, c.wei_user, c.wei);
    }
    c.dst_user.set_data_handle(y.raw_data());
    if (plan.reorder_dst) {
      c.dst.set_data_handle(ThreadScratch(ScratchSlot::kDst, plan.dst_md.get_size()));
    }
    if (has_z) {
      c.z.set_data_handle(ctx.input(3).raw_data());
      if (!plan.binary_z && plan.reorder_dst) {
        plan.z_reorder.execute(s, c.z, c.dst);
      } else if (!plan.binary_z) {
        std::memcpy(y.raw_data(), ctx.input(3).raw_data(), y.size_bytes());
      }
    }
    c.scratch.set_data_handle(
        ThreadScratch(ScratchSlot::kOnednnScratchpad, plan.scratch_md.get_size()));
    if (has_bias) c.bias.set_data_handle(ctx.input(2).raw_data());
    plan.prim.execute(s, c.args);
    if (plan.reorder_dst) plan.dst_reorder.execute(s, c.dst, c.dst_user);
    s.wait();
  }

  std::string label_;
  ImplementationLog impls_;
  ref::WindowAttrs window_;
  int64_t group_;
  Activation act_;
  bool fused_;
  std::shared_ptr<const OwnedTensor> w_const_;  // W when it is a constant initializer, else null
  bool w_half_;                // W is a FLOAT16 / BFLOAT16 constant (packed_.storage() says which)
  int64_t x_block_, y_block_;  // 0: plain; else the block of X / of Y and Z
  std::unique_ptr<Kernel> fallback_;
  PlanCache<ConvPlan> cache_;
  PackedWeights packed_;
};

Result<std::unique_ptr<Kernel>> MakeConv(const KernelInfo& info, bool fused) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t group, attrs.Int("group", 1));
  if (group < 1)
    return OpError(info.node().op_type, "attribute 'group' is {}, expected >= 1", group);
  KILN_ASSIGN_OR_RETURN(ref::WindowAttrs window,
                        ref::ReadWindowAttrs(attrs, /*kernel_shape_required=*/false));
  Activation act;
  int64_t x_block = 0, y_block = 0;
  if (fused) {
    KILN_ASSIGN_OR_RETURN(act, ReadActivation(info));
    KILN_ASSIGN_OR_RETURN(x_block, attrs.Int(kAttrXBlock, 0));
    KILN_ASSIGN_OR_RETURN(y_block, attrs.Int(kAttrYBlock, 0));
    for (int64_t b : {x_block, y_block}) {
      if (b != 0 && b != 8 && b != 16) {
        return OpError(info.node().op_type, "blocks of {} channels are not supported (0, 8, 16)",
                       b);
      }
    }
  }
  // Half-precision weights are FusedConv's only (op/kiln_ops.h); a plain Conv with a FLOAT16
  // W is not FLOAT throughout and goes to the reference kernel's checks.
  ConstantWeight w = ConstantWeightInput(info, 1);
  if (!fused && w.half()) w = {};
  auto kernel = std::make_unique<ConvKernel>(NodeLabel(info), std::move(window), group, act, fused,
                                             std::move(w), x_block, y_block);
  if (x_block > 0 || y_block > 0) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, ref::CreateKilnFusedConv(info));
    kernel->set_fallback(std::move(fallback));
  } else if (fused) {
    // The reference reads activation_params strictly (op/kiln_ops.h) where this kernel takes
    // the defaults of an empty list: a node only this kernel accepts runs without a fallback.
    Result<std::unique_ptr<Kernel>> fallback = ref::CreateKilnFusedConv(info);
    if (fallback.ok()) kernel->set_fallback(std::move(fallback).value());
  } else {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, ref::CreateConv(info));
    kernel->set_fallback(std::move(fallback));
  }
  return kernel;
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateConv(const KernelInfo& info) {
  return MakeConv(info, /*fused=*/false);
}
Result<std::unique_ptr<Kernel>> CreateFusedConv(const KernelInfo& info) {
  return MakeConv(info, /*fused=*/true);
}

}  // namespace kiln::cpu
