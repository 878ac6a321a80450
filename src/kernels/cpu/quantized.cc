// SPDX-License-Identifier: Apache-2.0
// INT8 kernels on oneDNN: ai.kiln QConv / QMatMul (op/kiln_ops.h), ONNX QLinearConv /
// QLinearMatMul (the same kernels: QConv and QMatMul take their inputs in the same order) and
// ConvInteger / MatMulInteger (INT32 output); plus QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear and ai.kiln QAdd on kiln's own AVX2 loops (quantized_kernels.h).
//
// NOTE on the approach. Everything but X is known when the kernel is built: the supports
// predicates accept a node only when W is an INT8 initializer with zero zero points, the scales,
// the output zero point and the bias are initializers, and X is UINT8 or INT8. The factory folds
// them into oneDNN terms once: output scales x_scale * w_scale[c] / y_scale (mask over output
// channels); an FP32 bias divided by x_scale * w_scale[c] into accumulator units; Relu / Clip as
// eltwise post-ops with their bounds divided by y_scale; x and y zero points as runtime zero points
// of the primitive (oneDNN adds the destination zero point after the post-ops). That is the
// reference order of op/kiln_ops.h up to FP32 rounding: within 1 in the last place of a
// quantized output. Per input shape a plan holds the primitive, the reorders between kiln's
// plain layouts (NCHW; row-major) and the layouts oneDNN prefers, and W packed once (shared by
// all plans of a kernel). MatMul flattens A's leading dims into M ([P*M, K] x [K, N]).
// Whatever oneDNN declines at plan time runs on the reference kernel.
//
// NOTE on CPUs without VNNI (CpuHasInt8DotProducts false: AVX2, or AVX-512 without VNNI). There
// oneDNN multiplies u8 x s8 pairs with VPMADDUBSW, whose 16-bit sum of two products saturates
// once 255 * (|w_a| + |w_b|) > 32767: with 8-bit weights the results are wrong, not rounded. Two
// rules keep every result exact:
//   - Weights: with max |w| <= 64 (kiln quantize's 7-bit weights for such CPUs, ONNX Runtime's
//     reduce_range) no pair can saturate and oneDNN runs as it is. Wider weights are split,
//     w = w_hi + w_lo with w_hi = floor(w / 2) and w_lo = ceil(w / 2), both in [-64, 64], and the
//     reduction is doubled: MatMul runs [A | A] x [B_hi ; B_lo], Conv runs X with each group's
//     channels twice against W with [W_hi | W_lo] along its input channels. The sums are the same
//     integers, at twice the multiply work plus a copy of X. Depthwise convolutions (one input
//     and one output channel per group) run on oneDNN's depthwise kernels, which widen to 32
//     bits before they add; they are not split. (A channel multiplier, two or more outputs per
//     group, runs on the general kernels and is split.)
//   - Signed sources: oneDNN's s8 x s8 convolutions there need a weight scale adjustment (a
//     rounding); instead X is flipped to UINT8 (x ^ 0x80 = x + 128) with zero point zp + 128,
//     which leaves every x - zp unchanged, in the same copy.
// quantized_test.cc checks both at the extremes (x = 255 or -128, w = +-127) on every ISA level.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized_kernels.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using ref::OpError;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// Which op a kernel serves; decides the input positions.
enum class QOp { kQConv, kQLinearConv, kConvInteger, kQMatMul, kQLinearMatMul, kMatMulInteger };

bool IsConv(QOp op) {
  return op == QOp::kQConv || op == QOp::kQLinearConv || op == QOp::kConvInteger;
}
bool IsInteger(QOp op) { return op == QOp::kConvInteger || op == QOp::kMatMulInteger; }

// Input positions: X, x_scale, x_zero_point, W, w_scale, w_zero_point, y_scale, y_zero_point, B
// (-1: the op has no such input).
struct Slots {
  int x, xs, xzp, w, ws, wzp, ys, yzp, b;
};
Slots SlotsOf(QOp op) {
  if (IsInteger(op)) return {0, -1, 2, 1, -1, 3, -1, -1, -1};
  return {0, 1, 2, 3, 4, 5, 6, 7, 8};
}

const OwnedTensor* ConstAt(const KernelInfo& info, int i) {
  return i >= 0 && info.has_input(i) ? info.constant_input(i) : nullptr;
}

bool SourceTypeSupported(DataType t) { return t == DataType::kUint8 || t == DataType::kInt8; }

// The largest |w| oneDNN's INT8 kernels take without VNNI and stay exact (NOTE above).
constexpr int kMaxUnsaturatedWeight = 64;

int MaxAbsWeight(const OwnedTensor& w) {
  const auto* p = w.data<const int8_t>();
  int m = 0;
  for (int64_t i = 0; i < w.num_elements(); ++i) m = std::max(m, std::abs(int{p[i]}));
  return m;
}

// W split for CPUs without VNNI: [W_hi | W_lo] along the reduction axis (Conv: each output
// channel's C/group input channels, then the same of W_lo; MatMul [K, N]: the K rows of W_hi,
// then those of W_lo), w_hi = floor(w / 2), w_lo = w - w_hi.
Result<OwnedTensor> SplitWeights(const OwnedTensor& w, bool conv) {
  std::vector<int64_t> dims(w.shape().dims().begin(), w.shape().dims().end());
  dims[conv ? 1 : 0] *= 2;
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(DataType::kInt8, shape));
  const auto* src = w.data<const int8_t>();
  auto* dst = out.data<int8_t>();
  // Rows of `run` elements: per output channel for Conv (C/group * window), the whole [K, N]
  // matrix for MatMul.
  const int64_t run = conv ? w.num_elements() / w.shape().dim(0) : w.num_elements();
  for (int64_t r = 0; r < w.num_elements() / run; ++r) {
    for (int64_t i = 0; i < run; ++i) {
      const int v = src[r * run + i];
      const int hi = v >= 0 ? v / 2 : -((-v + 1) / 2);  // floor(v / 2)
      dst[2 * r * run + i] = static_cast<int8_t>(hi);
      dst[2 * r * run + run + i] = static_cast<int8_t>(v - hi);
    }
  }
  return out;
}

// The source as the primitive reads it on a CPU without VNNI: X viewed as [outer, groups, run]
// bytes is written as [outer, groups, copies, run] (copies 2 when the weights are split), each
// byte XORed with 0x80 when `flip` (INT8 -> UINT8 with zero point + 128).
void PrepareSource(const uint8_t* x, uint8_t* out, int64_t outer, int64_t groups, int64_t run,
                   int copies, bool flip) {
  const int64_t blocks = outer * groups;
  ParallelFor(blocks, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, run)),
              [&](int64_t begin, int64_t end) {
                for (int64_t b = begin; b < end; ++b) {
                  const uint8_t* s = x + b * run;
                  for (int c = 0; c < copies; ++c) {
                    uint8_t* d = out + (b * copies + c) * run;
                    if (flip) {
                      for (int64_t i = 0; i < run; ++i) d[i] = s[i] ^ 0x80;
                    } else {
                      std::memcpy(d, s, static_cast<size_t>(run));
                    }
                  }
                }
              });
}

bool AllZero(const OwnedTensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.size_bytes(); ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// Everything but X (and, for the Integer ops, x_zero_point) is an initializer of the types and
// shapes oneDNN takes.
bool SupportsQuantized(const KernelInfo& info, QOp op) {
  const Slots s = SlotsOf(op);
  const ValueType& x = info.input_type(s.x);
  if (!SourceTypeSupported(x.dtype)) return false;
  const OwnedTensor* w = ConstAt(info, s.w);
  if (w == nullptr || w->dtype() != DataType::kInt8) return false;
  if (IsConv(op)) {
    if (w->shape().rank() < 3 || w->shape().rank() > 5) return false;
    if (x.has_shape && x.dims.size() != static_cast<size_t>(w->shape().rank())) return false;
  } else {
    if (w->shape().rank() != 2) return false;
    if (x.has_shape && x.dims.size() < 2) return false;
  }
  if (s.wzp >= 0 && info.has_input(s.wzp)) {
    const OwnedTensor* z = ConstAt(info, s.wzp);
    if (z == nullptr || z->dtype() != DataType::kInt8 || !AllZero(*z)) return false;
  }
  if (s.xzp >= 0 && info.has_input(s.xzp)) {
    if (info.input_type(s.xzp).dtype != x.dtype) return false;
    if (!IsInteger(op) && ConstAt(info, s.xzp) == nullptr) return false;
  }
  if (IsInteger(op)) return true;
  const int64_t channels = IsConv(op) ? w->shape().dim(0) : w->shape().dim(1);
  const OwnedTensor* xs = ConstAt(info, s.xs);
  const OwnedTensor* ws = ConstAt(info, s.ws);
  if (xs == nullptr || xs->dtype() != DataType::kFloat32 || xs->num_elements() != 1) return false;
  if (ws == nullptr || ws->dtype() != DataType::kFloat32 ||
      (ws->num_elements() != 1 && ws->num_elements() != channels)) {
    return false;
  }
  const bool has_y = info.has_input(s.ys);
  if (has_y != info.has_input(s.yzp)) return false;
  if (has_y) {
    const OwnedTensor* ys = ConstAt(info, s.ys);
    const OwnedTensor* yzp = ConstAt(info, s.yzp);
    if (ys == nullptr || ys->dtype() != DataType::kFloat32 || ys->num_elements() != 1) return false;
    if (yzp == nullptr || yzp->num_elements() != 1 ||
        (yzp->dtype() != DataType::kUint8 && yzp->dtype() != DataType::kInt8)) {
      return false;
    }
  }
  if (info.has_input(s.b)) {
    const OwnedTensor* b = ConstAt(info, s.b);
    if (b == nullptr || b->shape().rank() != 1 || b->num_elements() != channels ||
        (b->dtype() != DataType::kInt32 && b->dtype() != DataType::kFloat32)) {
      return false;
    }
  }
  return true;
}

// The constant part of a quantized op, in oneDNN's terms.
struct QParams {
  QOp op;
  std::shared_ptr<const OwnedTensor> w;  // INT8
  // CPUs without VNNI: the split [W_hi | W_lo] when W is wider than 7 bits (NOTE above); null
  // when W is used as it is.
  std::shared_ptr<const OwnedTensor> w_split;
  bool int8_dot = true;           // CpuHasInt8DotProducts() when the kernel was built
  std::vector<int32_t> w_colsum;  // MatMulInteger: sum_k W[k][n]
  int64_t channels = 0;           // output channels (Conv: W dim 0; MatMul: N)
  dnnl::memory::data_type y_type = dt::s32;
  DataType y_dtype = DataType::kInt32;
  std::vector<float> out_scales;  // empty: none (Integer ops); 1 or `channels` values
  int32_t x_zp_const = 0;         // used when x_zero_point is an initializer or absent
  int32_t y_zp = 0;
  std::vector<int32_t> bias_s32;  // one of the two, or neither
  std::vector<float> bias_f32;    // accumulator units
  dnnl::post_ops post_ops;
};

int32_t ScalarInt(const OwnedTensor& t) {
  switch (t.dtype()) {
    case DataType::kUint8:
      return t.data<const uint8_t>()[0];
    case DataType::kInt8:
      return t.data<const int8_t>()[0];
    default:
      return t.data<const int32_t>()[0];
  }
}

Result<QParams> ReadParams(const KernelInfo& info, QOp op) {
  const Slots s = SlotsOf(op);
  QParams p;
  p.op = op;
  p.w = info.node().inputs[static_cast<size_t>(s.w)].constant;
  p.channels = IsConv(op) ? p.w->shape().dim(0) : p.w->shape().dim(1);
  if (const OwnedTensor* z = ConstAt(info, s.xzp)) p.x_zp_const = ScalarInt(*z);
  if (IsInteger(op)) return p;
  const float x_scale = ConstAt(info, s.xs)->data<const float>()[0];
  const OwnedTensor* ws = ConstAt(info, s.ws);
  const bool has_y = info.has_input(s.ys);
  float y_scale = 1.0f;
  p.y_type = dt::f32;
  p.y_dtype = DataType::kFloat32;
  if (has_y) {
    y_scale = ConstAt(info, s.ys)->data<const float>()[0];
    const OwnedTensor* yzp = ConstAt(info, s.yzp);
    p.y_zp = ScalarInt(*yzp);
    p.y_dtype = yzp->dtype();
    p.y_type = yzp->dtype() == DataType::kUint8 ? dt::u8 : dt::s8;
  }
  const int64_t nws = ws->num_elements();
  std::vector<float> acc_scale(static_cast<size_t>(nws));  // x_scale * w_scale[c]
  for (int64_t c = 0; c < nws; ++c) {
    acc_scale[static_cast<size_t>(c)] = x_scale * ws->data<const float>()[c];
    p.out_scales.push_back(acc_scale[static_cast<size_t>(c)] / y_scale);
  }
  if (const OwnedTensor* b = ConstAt(info, s.b)) {
    if (b->dtype() == DataType::kInt32) {
      p.bias_s32.assign(b->data<const int32_t>(), b->data<const int32_t>() + p.channels);
    } else {
      for (int64_t c = 0; c < p.channels; ++c) {
        const float sc = acc_scale[static_cast<size_t>(nws == 1 ? 0 : c)];
        p.bias_f32.push_back(b->data<const float>()[c] / sc);
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  if (act.kind == ActivationKind::kRelu) {
    p.post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  } else if (act.kind == ActivationKind::kClip) {
    p.post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, act.p0 / y_scale,
                              act.p1 / y_scale);
  } else if (act.kind != ActivationKind::kNone) {
    return OpError(info.node().op_type, "activation must be \"\", \"Relu\" or \"Clip\"");
  }
  return p;
}

dnnl::memory::data_type DnnlType(DataType t) { return t == DataType::kUint8 ? dt::u8 : dt::s8; }

// dst[n][c][r] = src[n][r][c] for `batch` byte matrices of rows x cols: the channels-first <->
// channels-last transposes around an INT8 convolution (oneDNN's generic reorder is several times
// slower for bytes). 64x64 tiles of TransposeBytes (16x16 SSE blocks), in parallel.
void TransposeImages(const uint8_t* src, uint8_t* dst, int64_t batch, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t per_image = row_tiles * col_tiles;
  ParallelFor(batch * per_image, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / per_image;
      const int64_t r0 = (t % per_image) / col_tiles * kTile;
      const int64_t c0 = (t % col_tiles) * kTile;
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      const uint8_t* s = src + n * rows * cols;
      uint8_t* d = dst + n * rows * cols;
      TransposeBytes(s + r0 * cols + c0, cols, d + c0 * rows + r0, rows, r1 - r0, c1 - c0);
    }
  });
}

// The channels-last format tag of rank 3..5 (N, spatial..., C).
dnnl::memory::format_tag ChannelsLastTag(int rank) {
  return rank == 3 ? tag::acb : rank == 4 ? tag::acdb : tag::acdeb;
}

struct QPlan {
  dnnl::primitive prim;
  // CPUs without VNNI: X is copied first (PrepareSource), flipped to UINT8 and / or with its
  // reduction doubled for split weights.
  bool flip = false;
  int copies = 1;
  dnnl::memory::desc src_user, dst_user, src_md, dst_md, wei_md, bias_md, scratch_md;
  bool reorder_src = false, reorder_dst = false;
  // Reorders that are plain channels-first <-> channels-last byte transposes (TransposeImages):
  // batch, channels and spatial size.
  bool transpose_src = false, transpose_dst = false;
  int64_t batch = 0, src_channels = 0, dst_channels = 0, src_spatial = 0, dst_spatial = 0;
  dnnl::reorder src_reorder, dst_reorder;
  dnnl::memory packed_wei;
  Shape out_shape;
};

class QuantizedKernel final : public Kernel {
 public:
  QuantizedKernel(std::string label, QParams params, ref::WindowAttrs window, int64_t group,
                  bool x_channels_last, bool y_channels_last, std::unique_ptr<Kernel> reference)
      : label_(std::move(label)),
        p_(std::move(params)),
        window_(std::move(window)),
        group_(group),
        x_channels_last_(x_channels_last),
        y_channels_last_(y_channels_last),
        reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    const Slots s = SlotsOf(p_.op);
    const Tensor& x = ctx.input(s.x);
    if (!x.valid() || !x.device().is_cpu() || !x.is_contiguous() ||
        !SourceTypeSupported(x.dtype()) || x.num_elements() == 0 ||
        (IsConv(p_.op) ? x.rank() != p_.w->shape().rank() : x.rank() < 2)) {
      return reference_->Compute(ctx);
    }
    int32_t x_zp = p_.x_zp_const;
    if (s.xzp >= 0 && ctx.has_input(s.xzp)) {
      const Tensor& z = ctx.input(s.xzp);
      if (z.dtype() != x.dtype() || z.num_elements() != 1) return reference_->Compute(ctx);
      x_zp = z.dtype() == DataType::kUint8 ? int32_t{z.data<const uint8_t>()[0]}
                                           : int32_t{z.data<const int8_t>()[0]};
    }
    // Without VNNI a signed X runs as UINT8 with its zero point moved by 128 (NOTE above).
    const bool flip = !p_.int8_dot && x.dtype() == DataType::kInt8;
    if (flip) x_zp += 128;
    // MatMulInteger subtracts its zero point here, in INT32: oneDNN's brgemm matmul applies a
    // source zero point through FP32, which is off by one beyond 2^24.
    int32_t subtract_zp = 0;
    if (p_.op == QOp::kMatMulInteger) std::swap(subtract_zp, x_zp);
    std::vector<int64_t> key(x.shape().dims().begin(), x.shape().dims().end());
    key.push_back(static_cast<int64_t>(x.dtype()));
    key.push_back(x_zp != 0);
    std::shared_ptr<const QPlan> plan;
    Status built = CatchDnnl(label_, [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(plan, cache_.Get(key, [&] { return BuildPlan(x, x_zp != 0, flip); }));
      return Status::OK();
    });
    if (!built.ok()) {
      if (built.code() == StatusCode::kInternal) {
        impls_.Record("kiln ref");
        return reference_->Compute(ctx);
      }
      return built;
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, p_.y_dtype, plan->out_shape));
    KILN_RETURN_IF_ERROR(CatchDnnl(label_, [&]() -> Status {
      Execute(*plan, x, x_zp, y);
      return Status::OK();
    }));
    if (subtract_zp != 0) SubtractZeroPoint(subtract_zp, y);
    return Status::OK();
  }

  std::string Implementation() const override { return impls_.Joined(); }

  std::string_view Note() const override {
    if (p_.w_split == nullptr) return {};
    return "INT8 layer with 8-bit weights on a CPU without VNNI dot products: exact, at about "
           "half the INT8 speed (weights split in two 7-bit halves; kiln quantize --target-cpu "
           "avx2 writes 7-bit weights that run at full speed)";
  }

 private:
  // y[i][n] -= zp * sum_k w[k][n] for MatMulInteger's INT32 Y [..., N], wrapping as INT32 does.
  void SubtractZeroPoint(int32_t zp, Tensor& y) const {
    const int64_t n = p_.channels, rows = y.num_elements() / n;
    auto* py = y.data<int32_t>();
    ParallelFor(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          const uint32_t sub = static_cast<uint32_t>(zp) * static_cast<uint32_t>(p_.w_colsum[j]);
          py[r * n + j] = static_cast<int32_t>(static_cast<uint32_t>(py[r * n + j]) - sub);
        }
      }
    });
  }

  Result<std::shared_ptr<QPlan>> BuildPlan(const Tensor& x, bool x_zp, bool flip) const {
    auto plan = std::make_shared<QPlan>();
    plan->flip = flip;
    plan->copies = p_.w_split != nullptr ? 2 : 1;
    const int64_t copies = plan->copies;
    const dnnl::engine& eng = CpuEngine();
    dnnl::primitive_attr attr = MakeAttr(p_.post_ops);
    if (!p_.out_scales.empty()) {
      attr.set_output_scales(p_.out_scales.size() > 1 ? 1 << 1 : 0, p_.out_scales);
    }
    if (x_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (p_.y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    const bool has_bias = !p_.bias_s32.empty() || !p_.bias_f32.empty();
    const dt bias_type = !p_.bias_s32.empty() ? dt::s32 : dt::f32;
    const dt src_type = flip ? dt::u8 : DnnlType(x.dtype());
    dnnl::memory::desc wei_user;
    if (IsConv(p_.op)) {
      const Shape& ws = p_.w->shape();
      const std::span<const int64_t> kernel = ws.dims().subspan(2);
      const char* op = "QConv";
      // X's dims in [N, C, spatial...] order, whichever layout X has.
      std::vector<int64_t> xl(x.shape().dims().begin(), x.shape().dims().end());
      if (x_channels_last_) std::rotate(xl.begin() + 1, xl.end() - 1, xl.end());
      KILN_ASSIGN_OR_RETURN(
          ref::WindowGeometry g,
          ref::ResolveWindow(op, window_, std::span<const int64_t>(xl).subspan(2), kernel));
      const int64_t channels = xl[1];
      if (channels % group_ != 0 || channels / group_ != ws.dim(1) || p_.channels % group_ != 0) {
        return OpError(op, "X {} and W {} do not match with group={}", x.shape().ToString(),
                       ws.ToString(), group_);
      }
      std::vector<int64_t> out_dims = {x.dim(0), p_.channels};
      out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
      std::vector<int64_t> y_dims = out_dims;  // Y as stored
      if (y_channels_last_) std::rotate(y_dims.begin() + 1, y_dims.begin() + 2, y_dims.end());
      KILN_ASSIGN_OR_RETURN(plan->out_shape, Shape::Create(y_dims));
      const int rank = x.rank();
      dnnl::memory::dims src_dims = ToDims(xl);
      src_dims[1] *= copies;  // split weights: each group's channels twice
      dnnl::memory::dims dst_dims = ToDims(out_dims);
      dnnl::memory::dims wei_dims;
      if (group_ > 1) {
        wei_dims = {group_, p_.channels / group_, ws.dim(1) * copies};
        for (int64_t k : kernel) wei_dims.push_back(k);
      } else {
        wei_dims = ToDims(ws.dims());
        wei_dims[1] *= copies;
      }
      const DnnlWindow win = ToDnnlWindow(g);
      plan->src_user = dnnl::memory::desc(
          src_dims, src_type, x_channels_last_ ? ChannelsLastTag(rank) : PlainTag(rank));
      plan->dst_user = dnnl::memory::desc(
          dst_dims, p_.y_type, y_channels_last_ ? ChannelsLastTag(rank) : PlainTag(rank));
      wei_user = dnnl::memory::desc(wei_dims, dt::s8, PlainTag(static_cast<int>(wei_dims.size())));
      plan->bias_md = dnnl::memory::desc({p_.channels}, bias_type, tag::a);
      const dnnl::memory::desc src_any(src_dims, src_type, tag::any);
      const dnnl::memory::desc dst_any(dst_dims, p_.y_type, tag::any);
      const dnnl::memory::desc wei_any(wei_dims, dt::s8, tag::any);
      const auto desc =
          has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                     dnnl::algorithm::convolution_direct, src_any,
                                                     wei_any, plan->bias_md, dst_any, win.strides,
                                                     win.dilates, win.pad_l, win.pad_r)
                   : dnnl::convolution_forward::desc(
                         dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                         src_any, wei_any, dst_any, win.strides, win.dilates, win.pad_l, win.pad_r);
      dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
      // oneDNN 2.6's jit_1x1 AMX INT8 convolution corrupts the heap when it has a source zero
      // point (its weights reorder with the zero-point compensation, then a run: glibc aborts;
      // Debian's 2.6.3 on Sapphire Rapids). The next implementation oneDNN offers (the AMX jit
      // convolution) computes the same without it.
      // oneDNN's reference implementations are skipped as everywhere (IsReferenceImpl).
      const auto rejected = [&](std::string_view impl) {
        return IsReferenceImpl(impl) || (x_zp && impl == "jit_1x1:avx512_core_amx_int8");
      };
      while (rejected(pd.impl_info_str())) {
        if (!pd.next_impl()) {
          return Status::Internal("oneDNN has only its reference INT8 convolution here");
        }
      }
      impls_.Record(OnednnImpl(pd.impl_info_str()));
      plan->prim = dnnl::convolution_forward(pd);
      plan->src_md = pd.src_desc();
      plan->dst_md = pd.dst_desc();
      plan->wei_md = pd.weights_desc();
      plan->scratch_md = pd.scratchpad_desc();
      plan->batch = x.dim(0);
      plan->src_channels = channels * copies;
      plan->dst_channels = p_.channels;
      plan->src_spatial = x.num_elements() / (x.dim(0) * channels);
      plan->dst_spatial = plan->out_shape.NumElements() / (x.dim(0) * p_.channels);
      plan->transpose_src =
          !x_channels_last_ &&
          plan->src_md == dnnl::memory::desc(src_dims, src_type, ChannelsLastTag(rank));
      plan->transpose_dst =
          !y_channels_last_ &&
          plan->dst_md == dnnl::memory::desc(dst_dims, p_.y_type, ChannelsLastTag(rank)) &&
          (p_.y_type == dt::u8 || p_.y_type == dt::s8);
    } else {
      const int64_t k = p_.w->shape().dim(0), n = p_.channels;
      if (x.dim(x.rank() - 1) != k) {
        return OpError("QMatMul", "A {} has K={}, B {} has K={}", x.shape().ToString(),
                       x.dim(x.rank() - 1), p_.w->shape().ToString(), k);
      }
      const int64_t m = x.num_elements() / k;
      std::vector<int64_t> out_dims(x.shape().dims().begin(), x.shape().dims().end());
      out_dims.back() = n;
      KILN_ASSIGN_OR_RETURN(plan->out_shape, Shape::Create(out_dims));
      plan->src_user = dnnl::memory::desc({m, k * copies}, src_type, tag::ab);
      plan->dst_user = dnnl::memory::desc({m, n}, p_.y_type, tag::ab);
      wei_user = dnnl::memory::desc({k * copies, n}, dt::s8, tag::ab);
      plan->bias_md = dnnl::memory::desc({1, n}, bias_type, tag::ab);
      const dnnl::memory::desc wei_any({k * copies, n}, dt::s8, tag::any);
      const auto desc =
          has_bias ? dnnl::matmul::desc(plan->src_user, wei_any, plan->bias_md, plan->dst_user)
                   : dnnl::matmul::desc(plan->src_user, wei_any, plan->dst_user);
      dnnl::matmul::primitive_desc pd(desc, attr, eng);
      if (!SkipReferenceImpls(pd)) {
        return Status::Internal("oneDNN has only its reference INT8 matmul here");
      }
      impls_.Record(OnednnImpl(pd.impl_info_str()));
      plan->prim = dnnl::matmul(pd);
      plan->src_md = pd.src_desc();
      plan->dst_md = pd.dst_desc();
      plan->wei_md = pd.weights_desc();
      plan->scratch_md = pd.scratchpad_desc();
    }
    plan->reorder_src = PlanReorder(plan->src_user, plan->src_md, &plan->src_reorder);
    plan->reorder_dst = PlanReorder(plan->dst_md, plan->dst_user, &plan->dst_reorder);
    // W packed once per format (with oneDNN's compensation terms where the format has them).
    const OwnedTensor& w = p_.w_split != nullptr ? *p_.w_split : *p_.w;
    plan->packed_wei = packed_.Get(wei_user, w.raw_data(), plan->wei_md);
    return plan;
  }

  void Execute(const QPlan& plan, const Tensor& x, int32_t x_zp, Tensor& y) const {
    const dnnl::engine& eng = CpuEngine();
    dnnl::stream& s = ThreadStream();
    const void* src_data = x.raw_data();
    if (plan.flip || plan.copies > 1) {
      // [outer, groups, run] views of X: NCHW runs over a group's channels and pixels,
      // channels-last and MatMul rows over a group's channels.
      const int64_t groups = IsConv(p_.op) ? group_ : 1;
      const int64_t outer =
          IsConv(p_.op) && !x_channels_last_ ? x.dim(0) : x.num_elements() / x.dim(x.rank() - 1);
      const int64_t run = x.num_elements() / (outer * groups);
      void* buf = ThreadScratch(ScratchSlot::kOther, x.size_bytes() * plan.copies);
      PrepareSource(static_cast<const uint8_t*>(x.raw_data()), static_cast<uint8_t*>(buf), outer,
                    groups, run, plan.copies, plan.flip);
      src_data = buf;
    }
    dnnl::memory src_user(plan.src_user, eng, const_cast<void*>(src_data));
    dnnl::memory src = src_user;
    if (plan.reorder_src) {
      void* buf = ThreadScratch(ScratchSlot::kSrc, plan.src_md.get_size());
      src = dnnl::memory(plan.src_md, eng, buf);
      if (plan.transpose_src) {
        TransposeImages(static_cast<const uint8_t*>(src_data), static_cast<uint8_t*>(buf),
                        plan.batch, plan.src_channels, plan.src_spatial);
      } else {
        plan.src_reorder.execute(s, src_user, src);
      }
    }
    dnnl::memory dst_user(plan.dst_user, eng, y.raw_data());
    dnnl::memory dst = dst_user;
    if (plan.reorder_dst) {
      dst =
          dnnl::memory(plan.dst_md, eng, ThreadScratch(ScratchSlot::kDst, plan.dst_md.get_size()));
    }
    dnnl::memory scratch(plan.scratch_md, eng,
                         ThreadScratch(ScratchSlot::kOnednnScratchpad, plan.scratch_md.get_size()));
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, src},
                                                  {DNNL_ARG_WEIGHTS, plan.packed_wei},
                                                  {DNNL_ARG_DST, dst},
                                                  {DNNL_ARG_SCRATCHPAD, scratch}};
    const dnnl::memory::desc zp_md({1}, dt::s32, tag::a);
    int32_t x_zp_value = x_zp, y_zp_value = p_.y_zp;
    if (x_zp != 0) {
      args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, dnnl::memory(zp_md, eng, &x_zp_value));
    }
    if (p_.y_zp != 0) {
      args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, dnnl::memory(zp_md, eng, &y_zp_value));
    }
    if (!p_.bias_s32.empty()) {
      args.emplace(DNNL_ARG_BIAS,
                   dnnl::memory(plan.bias_md, eng, const_cast<int32_t*>(p_.bias_s32.data())));
    } else if (!p_.bias_f32.empty()) {
      args.emplace(DNNL_ARG_BIAS,
                   dnnl::memory(plan.bias_md, eng, const_cast<float*>(p_.bias_f32.data())));
    }
    plan.prim.execute(s, args);
    if (plan.reorder_dst && plan.transpose_dst) {
      s.wait();
      TransposeImages(static_cast<const uint8_t*>(dst.get_data_handle()),
                      static_cast<uint8_t*>(y.raw_data()), plan.batch, plan.dst_spatial,
                      plan.dst_channels);
      return;
    }
    if (plan.reorder_dst) plan.dst_reorder.execute(s, dst, dst_user);
    s.wait();
  }

  std::string label_;
  ImplementationLog impls_;
  QParams p_;
  ref::WindowAttrs window_;
  int64_t group_;
  bool x_channels_last_, y_channels_last_;  // QConv: X / Y stored [N, spatial..., C]
  std::unique_ptr<Kernel> reference_;
  PlanCache<QPlan> cache_;
  PackedWeights packed_;
};

Result<std::unique_ptr<Kernel>> MakeQuantized(const KernelInfo& info, QOp op, KernelFactory ref) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref(info));
  KILN_ASSIGN_OR_RETURN(QParams params, ReadParams(info, op));
  ref::WindowAttrs window;
  int64_t group = 1;
  bool x_channels_last = false, y_channels_last = false;
  if (IsConv(op)) {
    ref::AttrReader attrs(info);
    KILN_ASSIGN_OR_RETURN(group, attrs.Int("group", 1));
    if (op == QOp::kQConv) {
      x_channels_last = info.node().GetInt("x_channels_last", 0) != 0;
      y_channels_last = info.node().GetInt("y_channels_last", 0) != 0;
    }
    if (group < 1) return OpError(info.node().op_type, "attribute 'group' is {}", group);
    KILN_ASSIGN_OR_RETURN(window, ref::ReadWindowAttrs(attrs, /*kernel_shape_required=*/false));
  }
  // Without VNNI, weights wider than 7 bits are split (NOTE above), except for depthwise
  // convolutions (oneDNN's depthwise kernels widen to 32 bits before they add).
  params.int8_dot = CpuHasInt8DotProducts();
  if (op == QOp::kMatMulInteger) {
    const int64_t k = params.w->shape().dim(0), n = params.channels;
    params.w_colsum.assign(static_cast<size_t>(n), 0);
    const auto* w = params.w->data<const int8_t>();
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) params.w_colsum[static_cast<size_t>(j)] += w[i * n + j];
    }
  }
  const bool depthwise = IsConv(op) && params.w->shape().dim(1) == 1 && params.channels == group;
  if (!params.int8_dot && !depthwise && MaxAbsWeight(*params.w) > kMaxUnsaturatedWeight) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor split, SplitWeights(*params.w, IsConv(op)));
    params.w_split = std::make_shared<const OwnedTensor>(std::move(split));
  }
  return std::unique_ptr<Kernel>(std::make_unique<QuantizedKernel>(
      NodeLabel(info), std::move(params), std::move(window), group, x_channels_last,
      y_channels_last, std::move(reference)));
}

// --- QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear ----------------------------------

// Per-tensor or per-axis parameters of a Q/DQ node resolved for one input: block b of `inner`
// elements uses parameter (b % count).
struct AxisLayout {
  int64_t count = 1, inner = 1;
};

Result<AxisLayout> Layout(const Tensor& x, const Tensor& scale, int64_t axis, bool per_axis_ok,
                          std::string_view op) {
  AxisLayout l;
  if (scale.num_elements() == 1 || !per_axis_ok) return l;
  KILN_ASSIGN_OR_RETURN(int a, ref::NormalizeAxis(op, axis, x.rank(), /*allow_negative=*/true));
  l.count = x.dim(a);
  l.inner =
      ref::DimProduct(x.shape().dims(), static_cast<size_t>(a) + 1, static_cast<size_t>(x.rank()));
  if (scale.rank() != 1 || scale.dim(0) != l.count) {
    return OpError(op, "scale {} must be a scalar or 1-D with {} elements",
                   scale.shape().ToString(), l.count);
  }
  return l;
}

int32_t ZeroPointAt(const Tensor* zp, int64_t c) {
  if (zp == nullptr) return 0;
  return zp->dtype() == DataType::kUint8 ? int32_t{zp->data<const uint8_t>()[c]}
                                         : int32_t{zp->data<const int8_t>()[c]};
}

// Runs fn(begin, end, param) over blocks of x split by the layout, in parallel.
template <typename F>
void ForEachBlock(int64_t n, const AxisLayout& l, F&& fn) {
  if (l.count == 1) {
    ParallelFor(n, 1 << 14, [&](int64_t b, int64_t e) { fn(b, e, int64_t{0}); });
    return;
  }
  const int64_t blocks = n / l.inner;
  ParallelFor(blocks, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, l.inner)),
              [&](int64_t b, int64_t e) {
                for (int64_t k = b; k < e; ++k) fn(k * l.inner, (k + 1) * l.inner, k % l.count);
              });
}

class QuantizeLinearKernel final : public Kernel {
 public:
  QuantizeLinearKernel(int64_t axis, bool per_axis_ok, std::unique_ptr<Kernel> reference)
      : axis_(axis), per_axis_ok_(per_axis_ok), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const bool has_zp = ctx.num_inputs() > 2 && ctx.has_input(2);
    if (!x.valid() || x.dtype() != DataType::kFloat32 || !x.is_contiguous() || !ctx.has_input(1) ||
        ctx.input(1).dtype() != DataType::kFloat32 ||
        (has_zp && ctx.input(2).dtype() != DataType::kUint8 &&
         ctx.input(2).dtype() != DataType::kInt8)) {
      return reference_->Compute(ctx);
    }
    const Tensor& scale = ctx.input(1);
    if (!per_axis_ok_ && scale.num_elements() != 1) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(AxisLayout l, Layout(x, scale, axis_, per_axis_ok_, "QuantizeLinear"));
    const Tensor* zp = has_zp ? &ctx.input(2) : nullptr;
    if (zp != nullptr && zp->num_elements() != l.count) return reference_->Compute(ctx);
    const DataType out_type = zp != nullptr ? zp->dtype() : DataType::kUint8;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, out_type, x.shape()));
    const float* px = x.data<const float>();
    const float* ps = scale.data<const float>();
    ForEachBlock(x.num_elements(), l, [&](int64_t b, int64_t e, int64_t c) {
      if (out_type == DataType::kUint8) {
        QuantizeF32ToU8(px + b, ps[c], ZeroPointAt(zp, c), y.data<uint8_t>() + b, e - b);
      } else {
        QuantizeF32ToS8(px + b, ps[c], ZeroPointAt(zp, c), y.data<int8_t>() + b, e - b);
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool per_axis_ok_;
  std::unique_ptr<Kernel> reference_;
};

class DequantizeLinearKernel final : public Kernel {
 public:
  DequantizeLinearKernel(int64_t axis, bool per_axis_ok, std::unique_ptr<Kernel> reference)
      : axis_(axis), per_axis_ok_(per_axis_ok), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const bool has_zp = ctx.num_inputs() > 2 && ctx.has_input(2);
    if (!x.valid() || (x.dtype() != DataType::kUint8 && x.dtype() != DataType::kInt8) ||
        !x.is_contiguous() || !ctx.has_input(1) || ctx.input(1).dtype() != DataType::kFloat32 ||
        (has_zp && ctx.input(2).dtype() != x.dtype())) {
      return reference_->Compute(ctx);
    }
    const Tensor& scale = ctx.input(1);
    if (!per_axis_ok_ && scale.num_elements() != 1) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(AxisLayout l, Layout(x, scale, axis_, per_axis_ok_, "DequantizeLinear"));
    const Tensor* zp = has_zp ? &ctx.input(2) : nullptr;
    if (zp != nullptr && zp->num_elements() != l.count) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
    const float* ps = scale.data<const float>();
    float* py = y.data<float>();
    ForEachBlock(x.num_elements(), l, [&](int64_t b, int64_t e, int64_t c) {
      if (x.dtype() == DataType::kUint8) {
        DequantizeU8ToF32(x.data<const uint8_t>() + b, ps[c], ZeroPointAt(zp, c), py + b, e - b);
      } else {
        DequantizeS8ToF32(x.data<const int8_t>() + b, ps[c], ZeroPointAt(zp, c), py + b, e - b);
      }
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool per_axis_ok_;
  std::unique_ptr<Kernel> reference_;
};

class DynamicQuantizeLinearKernel final : public Kernel {
 public:
  explicit DynamicQuantizeLinearKernel(std::unique_ptr<Kernel> reference)
      : reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (!x.valid() || x.dtype() != DataType::kFloat32 || !x.is_contiguous()) {
      return reference_->Compute(ctx);
    }
    const float* px = x.data<const float>();
    const int64_t n = x.num_elements();
    // The range always includes 0; NaNs are skipped (MinMaxF32 ignores them).
    Mutex mu;
    float lo = 0, hi = 0;
    ParallelFor(n, 1 << 15, [&](int64_t b, int64_t e) {
      float l = 0, h = 0;
      MinMaxF32(px + b, e - b, &l, &h);
      MutexLock lock(mu);
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    });
    const float scale = (hi - lo) / 255.0f;
    const bool usable = scale != 0 && std::isfinite(scale);
    uint8_t zp = 0;
    if (usable) {
      const float z = std::nearbyint(-lo / scale);
      zp = static_cast<uint8_t>(std::isnan(z) ? 0.0f : std::clamp(z, 0.0f, 255.0f));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kUint8, x.shape()));
    uint8_t* py = y.data<uint8_t>();
    if (!usable) {
      std::memset(py, zp, static_cast<size_t>(n));
    } else {
      ParallelFor(n, 1 << 14,
                  [&](int64_t b, int64_t e) { QuantizeF32ToU8(px + b, scale, zp, py + b, e - b); });
    }
    if (ctx.num_outputs() > 1) {
      KILN_ASSIGN_OR_RETURN(Tensor s, ctx.AllocateOutput(1, DataType::kFloat32, Shape{}));
      *s.data<float>() = scale;
    }
    if (ctx.num_outputs() > 2) {
      KILN_ASSIGN_OR_RETURN(Tensor z, ctx.AllocateOutput(2, DataType::kUint8, Shape{}));
      *z.data<uint8_t>() = zp;
    }
    return Status::OK();
  }

 private:
  std::unique_ptr<Kernel> reference_;
};

// ai.kiln QAdd: scalar parameters read per call, one parallel pass of QAdd microkernels.
class QAddKernel final : public Kernel {
 public:
  QAddKernel(Activation act, std::unique_ptr<Kernel> reference)
      : act_(act), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 8) return reference_->Compute(ctx);
    for (int i = 0; i < 8; ++i) {
      if (!ctx.has_input(i) || !ctx.input(i).is_contiguous()) return reference_->Compute(ctx);
    }
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    if (a.shape() != b.shape()) return reference_->Compute(ctx);
    QAddParams p;
    const int scale_input[3] = {1, 4, 6}, zp_input[3] = {2, 5, 7};
    float* scales[3] = {&p.a_scale, &p.b_scale, &p.y_scale};
    int32_t* zps[3] = {&p.a_zp, &p.b_zp, &p.y_zp};
    bool* signs[3] = {&p.a_signed, &p.b_signed, &p.y_signed};
    for (int k = 0; k < 3; ++k) {
      const Tensor& s = ctx.input(scale_input[k]);
      const Tensor& z = ctx.input(zp_input[k]);
      if (s.dtype() != DataType::kFloat32 || s.num_elements() != 1 || z.num_elements() != 1 ||
          (z.dtype() != DataType::kUint8 && z.dtype() != DataType::kInt8) ||
          (k < 2 && ctx.input(3 * k).dtype() != z.dtype())) {
        return reference_->Compute(ctx);
      }
      *scales[k] = s.data<const float>()[0];
      *signs[k] = z.dtype() == DataType::kInt8;
      *zps[k] = ZeroPointAt(&z, 0);
    }
    if (act_.kind == ActivationKind::kRelu) p.lo = 0.0f;
    if (act_.kind == ActivationKind::kClip) {
      p.lo = act_.p0;
      p.hi = act_.p1;
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, ctx.input(7).dtype(), a.shape()));
    const auto* pa = static_cast<const uint8_t*>(a.raw_data());
    const auto* pb = static_cast<const uint8_t*>(b.raw_data());
    auto* py = static_cast<uint8_t*>(y.raw_data());
    ParallelFor(a.num_elements(), 1 << 14, [&](int64_t begin, int64_t end) {
      QAdd(p, pa + begin, pb + begin, py + begin, end - begin);
    });
    return Status::OK();
  }

 private:
  Activation act_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

bool SupportsQConv(const KernelInfo& info) { return SupportsQuantized(info, QOp::kQConv); }
bool SupportsQMatMul(const KernelInfo& info) { return SupportsQuantized(info, QOp::kQMatMul); }
bool SupportsQLinearConv(const KernelInfo& info) {
  return SupportsQuantized(info, QOp::kQLinearConv);
}
bool SupportsQLinearMatMul(const KernelInfo& info) {
  return SupportsQuantized(info, QOp::kQLinearMatMul);
}
bool SupportsConvInteger(const KernelInfo& info) {
  return SupportsQuantized(info, QOp::kConvInteger);
}
bool SupportsMatMulInteger(const KernelInfo& info) {
  return SupportsQuantized(info, QOp::kMatMulInteger);
}

Result<std::unique_ptr<Kernel>> CreateQConv(const KernelInfo& info) {
  return MakeQuantized(info, QOp::kQConv, &ref::CreateKilnQConv);
}
Result<std::unique_ptr<Kernel>> CreateQMatMul(const KernelInfo& info) {
  return MakeQuantized(info, QOp::kQMatMul, &ref::CreateKilnQMatMul);
}
Result<std::unique_ptr<Kernel>> CreateQLinearConvCpu(const KernelInfo& info) {
  return MakeQuantized(info, QOp::kQLinearConv, &ref::CreateQLinearConv);
}
Result<std::unique_ptr<Kernel>> CreateQLinearMatMulCpu(const KernelInfo& info) {
  return MakeQuantized(info, QOp::kQLinearMatMul, &ref::CreateQLinearMatMul);
}
Result<std::unique_ptr<Kernel>> CreateConvIntegerCpu(const KernelInfo& info) {
  return MakeQuantized(info, QOp::kConvInteger, &ref::CreateConvInteger);
}
Result<std::unique_ptr<Kernel>> CreateMatMulIntegerCpu(const KernelInfo& info) {
  return MakeQuantized(info, QOp::kMatMulInteger, &ref::CreateMatMulInteger);
}

Result<std::unique_ptr<Kernel>> CreateQuantizeLinearCpu(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateQuantizeLinear(info));
  const Attribute* a = info.node().FindAttribute("axis");
  const int64_t axis = a != nullptr ? a->i : 1;
  return std::unique_ptr<Kernel>(
      std::make_unique<QuantizeLinearKernel>(axis, info.opset() >= 13, std::move(reference)));
}
Result<std::unique_ptr<Kernel>> CreateDequantizeLinearCpu(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateDequantizeLinear(info));
  const Attribute* a = info.node().FindAttribute("axis");
  const int64_t axis = a != nullptr ? a->i : 1;
  return std::unique_ptr<Kernel>(
      std::make_unique<DequantizeLinearKernel>(axis, info.opset() >= 13, std::move(reference)));
}
Result<std::unique_ptr<Kernel>> CreateDynamicQuantizeLinearCpu(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateDynamicQuantizeLinear(info));
  return std::unique_ptr<Kernel>(
      std::make_unique<DynamicQuantizeLinearKernel>(std::move(reference)));
}

Result<std::unique_ptr<Kernel>> CreateQAdd(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateKilnQAdd(info));
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  return std::unique_ptr<Kernel>(std::make_unique<QAddKernel>(act, std::move(reference)));
}

}  // namespace kiln::cpu
