// SPDX-License-Identifier: Apache-2.0
// Reference kernels of kiln's own operators (domain ai.kiln, op/kiln_ops.h): FusedConv,
// FusedGemm, FusedMatMul, LayerNormalization, Gelu, Attention. They define the numerics the fast
// kernels (src/kernels/cpu) are tested against, so they are written to be obviously right, not
// fast.
//
// NOTE on the approach: the fused ops are computed exactly as their unfused graph would be. The
// core op (Conv, Gemm, MatMul; LayerNormalization) runs through the ONNX reference kernel of
// that op, built from a copy of the node with the fused-only inputs and attributes removed;
// then Bias (FusedMatMul), the residual Z and the activation are applied elementwise in a second
// loop, in the order Y = act(core + Bias + Z). A FLOAT16 / BFLOAT16 weight (input 1, opt pass
// half_weights) is widened to an FP32 tensor first, so the core op sees FP32 throughout. Gelu and
// Attention are direct loops; Attention accumulates in double and subtracts the row maximum
// before exp, as the reference Softmax does.

#include "op/kiln_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

enum class Act {
  kNone,
  kRelu,
  kClip,
  kSigmoid,
  kSilu,
  kHardSigmoid,
  kHardSwish,
  kGelu,
  kGeluTanh,
  kTanh,
  kLeakyRelu
};

struct Activation {
  Act kind = Act::kNone;
  std::vector<float> params;
};

Result<Activation> ReadActivation(const KernelInfo& info) {
  AttrReader attrs(info);
  const std::string& op = info.node().op_type;
  KILN_ASSIGN_OR_RETURN(std::string name, attrs.String("activation", ""));
  Activation a;
  if (const Attribute* p = info.node().FindAttribute("activation_params")) {
    if (p->type != AttributeType::kFloats) {
      return OpError(op, "attribute 'activation_params' must be a FLOATS");
    }
    a.params = p->floats;
  }
  struct Entry {
    std::string_view name;
    Act kind;
    size_t num_params;
  };
  static constexpr Entry kTable[] = {
      {kActivationNone, Act::kNone, 0},           {kActivationRelu, Act::kRelu, 0},
      {kActivationClip, Act::kClip, 2},           {kActivationSigmoid, Act::kSigmoid, 0},
      {kActivationSilu, Act::kSilu, 0},           {kActivationHardSigmoid, Act::kHardSigmoid, 2},
      {kActivationHardSwish, Act::kHardSwish, 0}, {kActivationGelu, Act::kGelu, 0},
      {kActivationGeluTanh, Act::kGeluTanh, 0},   {kActivationTanh, Act::kTanh, 0},
      {kActivationLeakyRelu, Act::kLeakyRelu, 1}};
  for (const Entry& e : kTable) {
    if (e.name != name) continue;
    if (a.params.size() != e.num_params) {
      return OpError(op, "activation '{}' takes {} activation_params, got {}", name, e.num_params,
                     a.params.size());
    }
    a.kind = e.kind;
    return a;
  }
  return OpError(op, "unknown activation '{}'", name);
}

double GeluErf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double ApplyAct(const Activation& a, double x) {
  switch (a.kind) {
    case Act::kNone:
      return x;
    case Act::kRelu:
      return x > 0 ? x : 0.0;
    case Act::kClip:
      return std::min(std::max(x, static_cast<double>(a.params[0])),
                      static_cast<double>(a.params[1]));
    case Act::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Act::kSilu:
      return x / (1.0 + std::exp(-x));
    case Act::kHardSigmoid:
      return std::max(0.0, std::min(1.0, a.params[0] * x + a.params[1]));
    case Act::kHardSwish:
      return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case Act::kGelu:
      return GeluErf(x);
    case Act::kGeluTanh:
      return GeluTanh(x);
    case Act::kTanh:
      return std::tanh(x);
    case Act::kLeakyRelu:
      return x >= 0 ? x : a.params[0] * x;
  }
  return x;
}

// The attributes of `node` except the named ones.
std::vector<Attribute> AttributesWithout(const NodeDesc& node,
                                         std::initializer_list<std::string_view> drop) {
  std::vector<Attribute> out;
  for (const Attribute& a : node.attributes) {
    if (std::find(drop.begin(), drop.end(), a.name) == drop.end()) out.push_back(a);
  }
  return out;
}

// The FP32 tensor of a FLOAT16 / BFLOAT16 tensor's values.
Result<OwnedTensor> WidenHalf(std::string_view op, const Tensor& t) {
  if (!t.device().is_cpu() || !t.is_contiguous()) {
    return OpError(op, "a {} weight must be a contiguous CPU tensor", DataTypeName(t.dtype()));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(DataType::kFloat32, t.shape()));
  float* po = out.data<float>();
  const int64_t n = t.num_elements();
  if (t.dtype() == DataType::kFloat16) {
    const Float16* p = t.data<const Float16>();
    for (int64_t i = 0; i < n; ++i) po[i] = Float16ToFloat(p[i]);
  } else {
    const BFloat16* p = t.data<const BFloat16>();
    for (int64_t i = 0; i < n; ++i) po[i] = BFloat16ToFloat(p[i]);
  }
  return out;
}

// A fused op: the ONNX core kernel on inputs [0, num_core_inputs), then Bias / Z / activation.
class FusedKernel final : public Kernel {
 public:
  FusedKernel(std::string op, std::unique_ptr<Kernel> core, int num_core_inputs, int bias_input,
              int z_input, Activation act)
      : op_(std::move(op)),
        core_(std::move(core)),
        num_core_inputs_(num_core_inputs),
        bias_input_(bias_input),
        z_input_(z_input),
        act_(std::move(act)) {}

  Status Compute(KernelContext& ctx) const override {
    std::vector<Tensor> core_inputs(static_cast<size_t>(num_core_inputs_));
    for (int i = 0; i < num_core_inputs_ && i < ctx.num_inputs(); ++i) {
      core_inputs[static_cast<size_t>(i)] = ctx.input(i);
    }
    // A half-precision weight (W / B, input 1) is computed as the FP32 of its values.
    OwnedTensor wide_weight;
    if (core_inputs.size() > 1 && core_inputs[1].valid() &&
        (core_inputs[1].dtype() == DataType::kFloat16 ||
         core_inputs[1].dtype() == DataType::kBFloat16)) {
      KILN_ASSIGN_OR_RETURN(wide_weight, WidenHalf(op_, core_inputs[1]));
      core_inputs[1] = wide_weight.view();
    }
    OwnedTensor core_out[1];
    KernelContext core_ctx(core_inputs, core_out);
    KILN_RETURN_IF_ERROR(core_->Compute(core_ctx));
    const Tensor& c = core_out[0].view();
    const Tensor* bias = nullptr;
    const Tensor* z = nullptr;
    if (bias_input_ >= 0 && ctx.has_input(bias_input_)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, bias_input_, op_));
      bias = &ctx.input(bias_input_);
      const int64_t n = c.rank() > 0 ? c.dim(c.rank() - 1) : 1;
      if (bias->rank() != 1 || bias->dim(0) != n || bias->dtype() != c.dtype()) {
        return OpError(op_, "Bias {} must be 1-D of {} with {} elements (Y's last dim)",
                       bias->shape().ToString(), DataTypeName(c.dtype()), n);
      }
    }
    if (z_input_ >= 0 && ctx.has_input(z_input_)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, z_input_, op_));
      z = &ctx.input(z_input_);
      if (!(z->shape() == c.shape()) || z->dtype() != c.dtype()) {
        return OpError(op_, "Z {} {} must have Y's dtype and shape exactly, {} {}",
                       DataTypeName(z->dtype()), z->shape().ToString(), DataTypeName(c.dtype()),
                       c.shape().ToString());
      }
    }
    return DispatchType<float, double>(c.dtype(), op_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, c.dtype(), c.shape()));
      const T* pc = c.data<const T>();
      const T* pb = bias ? bias->data<const T>() : nullptr;
      const T* pz = z ? z->data<const T>() : nullptr;
      const int64_t n = c.num_elements();
      const int64_t last = pb ? bias->dim(0) : 1;
      T* py = y.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        double v = static_cast<double>(pc[i]);
        if (pb) v += static_cast<double>(pb[i % last]);
        if (pz) v += static_cast<double>(pz[i]);
        py[i] = static_cast<T>(ApplyAct(act_, v));
      }
      return Status::OK();
    });
  }

 private:
  std::string op_;
  std::unique_ptr<Kernel> core_;
  int num_core_inputs_;
  int bias_input_;
  int z_input_;
  Activation act_;
};

// Builds the core ONNX kernel `core_op` at `core_opset` from `info`'s node: inputs
// [0, num_core_inputs), output 0, the attributes minus the activation ones.
Result<std::unique_ptr<Kernel>> CreateFused(const KernelInfo& info, std::string_view core_op,
                                            int64_t core_opset, int num_core_inputs, int bias_input,
                                            int z_input, KernelFactory factory) {
  const NodeDesc& node = info.node();
  if (info.num_inputs() > z_input + 1) {
    return OpError(node.op_type, "takes at most {} inputs, got {}", z_input + 1, info.num_inputs());
  }
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "fused ops have one output"));
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  NodeDesc core;
  core.name = node.name;
  core.op_type = std::string(core_op);
  core.opset = core_opset;
  for (int i = 0; i < num_core_inputs && i < info.num_inputs(); ++i) {
    core.inputs.push_back(node.inputs[static_cast<size_t>(i)]);
  }
  core.outputs = {node.outputs.empty() ? OperandDesc() : node.outputs[0]};
  core.attributes = AttributesWithout(node, {"activation", "activation_params"});
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, factory(KernelInfo(core)));
  return std::unique_ptr<Kernel>(std::make_unique<FusedKernel>(
      node.op_type, std::move(kernel), num_core_inputs, bias_input, z_input, std::move(act)));
}

// LayerNormalization (ai.kiln): the ONNX opset-17 kernel, first output only.
class KilnLayerNormKernel final : public Kernel {
 public:
  explicit KilnLayerNormKernel(std::unique_ptr<Kernel> core) : core_(std::move(core)) {}
  Status Compute(KernelContext& ctx) const override {
    std::vector<Tensor> in(3);
    for (int i = 0; i < 3 && i < ctx.num_inputs(); ++i) in[static_cast<size_t>(i)] = ctx.input(i);
    OwnedTensor out[1];
    KernelContext core_ctx(in, out);
    KILN_RETURN_IF_ERROR(core_->Compute(core_ctx));
    return CopyToOutput(ctx, out[0].view(), out[0].shape());
  }

 private:
  std::unique_ptr<Kernel> core_;
};

class GeluKernel final : public Kernel {
 public:
  explicit GeluKernel(bool tanh) : tanh_(tanh) {}
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Gelu"));
    const Tensor& x = ctx.input(0);
    return DispatchType<float, double>(x.dtype(), "Gelu", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const double v = static_cast<double>(px[i]);
        py[i] = static_cast<T>(tanh_ ? GeluTanh(v) : GeluErf(v));
      }
      return Status::OK();
    });
  }

 private:
  bool tanh_;
};

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(std::optional<float> scale) : scale_(scale) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, "Attention"));
    const Tensor& q = ctx.input(0);  // [..., S, D]
    const Tensor& k = ctx.input(1);  // [..., T, D]
    const Tensor& v = ctx.input(2);  // [..., T, Dv]
    const bool has_mask = ctx.has_input(3);
    if (has_mask) KILN_RETURN_IF_ERROR(CheckInput(ctx, 3, "Attention"));
    const int r = q.rank();
    if (r < 2 || k.rank() != r || v.rank() != r) {
      return OpError("Attention", "Q {}, K {}, V {} must have the same rank >= 2",
                     q.shape().ToString(), k.shape().ToString(), v.shape().ToString());
    }
    for (int i = 0; i < r - 2; ++i) {
      if (k.dim(i) != q.dim(i) || v.dim(i) != q.dim(i)) {
        return OpError("Attention", "Q {}, K {}, V {} must have equal leading dims",
                       q.shape().ToString(), k.shape().ToString(), v.shape().ToString());
      }
    }
    const int64_t s = q.dim(r - 2), d = q.dim(r - 1), t = k.dim(r - 2), dv = v.dim(r - 1);
    if (k.dim(r - 1) != d || v.dim(r - 2) != t) {
      return OpError("Attention", "K {} must be [..., T, {}] and V {} [..., T, Dv] with T = {}",
                     k.shape().ToString(), d, v.shape().ToString(), t);
    }
    for (int i = 1; i < (has_mask ? 4 : 3); ++i) {
      if (ctx.input(i).dtype() != q.dtype()) {
        return OpError("Attention", "input {} has dtype {}, Q has {}", i,
                       DataTypeName(ctx.input(i).dtype()), DataTypeName(q.dtype()));
      }
    }
    std::vector<int64_t> score_dims(q.shape().dims().begin(), q.shape().dims().end());
    score_dims[static_cast<size_t>(r - 1)] = t;
    KILN_ASSIGN_OR_RETURN(Shape score_shape, Shape::Create(score_dims));
    // The mask expanded to the scores' shape (a reference kernel may spend the memory).
    std::vector<int64_t> mask_at;
    if (has_mask) {
      const Tensor& m = ctx.input(3);
      if (!BroadcastsTo(m.shape(), score_shape)) {
        return OpError("Attention", "Mask {} does not broadcast to the scores' shape {}",
                       m.shape().ToString(), score_shape.ToString());
      }
      mask_at.resize(static_cast<size_t>(score_shape.NumElements()));
      ForEachBroadcast(
          score_shape, BroadcastStrides(m.shape(), score_shape), DimArray{},
          [&](int64_t o, int64_t im, int64_t) { mask_at[static_cast<size_t>(o)] = im; });
    }
    std::vector<int64_t> out_dims(score_dims);
    out_dims[static_cast<size_t>(r - 1)] = dv;
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    const double scale = scale_ ? static_cast<double>(*scale_) : 1.0 / std::sqrt(double(d));
    const int64_t batch = DimProduct(q.shape().dims(), 0, static_cast<size_t>(r - 2));
    return DispatchType<float, double>(q.dtype(), "Attention", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, q.dtype(), out_shape));
      const T* pq = q.data<const T>();
      const T* pk = k.data<const T>();
      const T* pv = v.data<const T>();
      const T* pm = has_mask ? ctx.input(3).data<const T>() : nullptr;
      T* py = y.data<T>();
      std::vector<double> row(static_cast<size_t>(t));
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < s; ++i) {
          double mx = -INFINITY;
          for (int64_t j = 0; j < t; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < d; ++c) {
              acc += static_cast<double>(pq[(b * s + i) * d + c]) *
                     static_cast<double>(pk[(b * t + j) * d + c]);
            }
            acc *= scale;
            if (pm)
              acc += static_cast<double>(pm[mask_at[static_cast<size_t>((b * s + i) * t + j)]]);
            row[static_cast<size_t>(j)] = acc;
            mx = std::max(mx, acc);
          }
          double sum = 0;
          for (double& e : row) {
            e = std::exp(e - mx);
            sum += e;
          }
          for (int64_t c = 0; c < dv; ++c) {
            double acc = 0;
            for (int64_t j = 0; j < t; ++j) {
              acc += row[static_cast<size_t>(j)] * static_cast<double>(pv[(b * t + j) * dv + c]);
            }
            py[(b * s + i) * dv + c] = static_cast<T>(acc / sum);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  std::optional<float> scale_;
};

// --- Quantized ops: QConv, QMatMul ----------------------------------------------------------
//
// NOTE on the approach: the integer core is the ONNX reference ConvInteger / MatMulInteger
// kernel (X, W, x_zero_point, w_zero_point), giving the int32 accumulator; the INT32 bias, the
// scales, the activation and the requantization are then applied elementwise here, exactly in
// the order op/kiln_ops.h states.

// [N, d1, ..., dk] -> [N, dk, d1, ..., dk-1] (`to_first`) or back, for 1-byte elements: QConv's
// channels-last X and Y.
Result<OwnedTensor> MoveChannels(const Tensor& t, bool to_first) {
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  if (dims.size() < 3 || DataTypeSize(t.dtype()) != 1) {
    return Status::InvalidArgument("channels-last tensors must have rank >= 3 and 1-byte elements");
  }
  const int64_t n = dims[0];
  const int64_t c = to_first ? dims.back() : dims[1];
  const int64_t spatial = t.num_elements() / std::max<int64_t>(1, n * c);
  if (to_first) {
    std::rotate(dims.begin() + 1, dims.end() - 1, dims.end());
  } else {
    std::rotate(dims.begin() + 1, dims.begin() + 2, dims.end());
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(t.dtype(), shape));
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t first = (b * c + ch) * spatial + s, last = (b * spatial + s) * c + ch;
        if (to_first) {
          dst[first] = src[last];
        } else {
          dst[last] = src[first];
        }
      }
    }
  }
  return out;
}

class QuantizedKernel final : public Kernel {
 public:
  QuantizedKernel(std::string op, std::unique_ptr<Kernel> core, bool conv, Activation act,
                  bool x_channels_last, bool y_channels_last)
      : op_(std::move(op)),
        core_(std::move(core)),
        conv_(conv),
        act_(std::move(act)),
        x_channels_last_(x_channels_last),
        y_channels_last_(y_channels_last) {}

  Status Compute(KernelContext& ctx) const override {
    if (!y_channels_last_) return ComputeInto(ctx, ctx);
    // Y computed channels-first into a scratch context, then moved.
    OwnedTensor out[1];
    KernelContext inner(std::span<const Tensor>(), out);
    KILN_RETURN_IF_ERROR(ComputeInto(ctx, inner));
    KILN_ASSIGN_OR_RETURN(OwnedTensor moved, MoveChannels(out[0].view(), /*to_first=*/false));
    return CopyToOutput(ctx, moved.view(), moved.shape());
  }

 private:
  // Reads the inputs from `ctx`, allocates Y (channels-first) in `out_ctx` and computes it.
  Status ComputeInto(const KernelContext& ctx, KernelContext& out_ctx) const {
    for (int i : {0, 1, 3, 4}) KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op_));
    std::vector<Tensor> core_inputs(4);
    OwnedTensor x_first;
    if (x_channels_last_) {
      KILN_ASSIGN_OR_RETURN(x_first, MoveChannels(ctx.input(0), /*to_first=*/true));
      core_inputs[0] = x_first.view();
    } else {
      core_inputs[0] = ctx.input(0);
    }
    core_inputs[1] = ctx.input(3);
    if (ctx.has_input(2)) core_inputs[2] = ctx.input(2);
    if (ctx.num_inputs() > 5 && ctx.has_input(5)) core_inputs[3] = ctx.input(5);
    OwnedTensor acc_out[1];
    KernelContext core_ctx(core_inputs, acc_out);
    KILN_RETURN_IF_ERROR(core_->Compute(core_ctx));
    const Tensor& acc = acc_out[0].view();
    const int r = acc.rank();
    // Output channel c of element e is (e / inner) % channels.
    const int64_t channels = conv_ ? acc.dim(1) : acc.dim(r - 1);
    const int64_t inner =
        conv_ ? DimProduct(acc.shape().dims(), 2, static_cast<size_t>(r)) : int64_t{1};
    KILN_ASSIGN_OR_RETURN(float x_scale, Scalar<float>(ctx, 1, "x_scale", DataType::kFloat32));
    const Tensor& ws = ctx.input(4);
    if (ws.dtype() != DataType::kFloat32 ||
        !(ws.num_elements() == 1 || (ws.rank() == 1 && ws.dim(0) == channels))) {
      return OpError(op_, "w_scale must be FP32, a scalar or [{}], got {} {}", channels,
                     DataTypeName(ws.dtype()), ws.shape().ToString());
    }
    const bool has_y = ctx.num_inputs() > 6 && ctx.has_input(6);
    const bool has_yzp = ctx.num_inputs() > 7 && ctx.has_input(7);
    if (has_y != has_yzp) {
      return OpError(op_, "y_scale and y_zero_point must be both present or both omitted");
    }
    float y_scale = 1.0f;
    int32_t y_zp = 0;
    DataType y_type = DataType::kFloat32;
    if (has_y) {
      KILN_ASSIGN_OR_RETURN(y_scale, Scalar<float>(ctx, 6, "y_scale", DataType::kFloat32));
      y_type = ctx.input(7).dtype();
      if (y_type == DataType::kUint8) {
        KILN_ASSIGN_OR_RETURN(uint8_t z, Scalar<uint8_t>(ctx, 7, "y_zero_point", y_type));
        y_zp = z;
      } else if (y_type == DataType::kInt8) {
        KILN_ASSIGN_OR_RETURN(int8_t z, Scalar<int8_t>(ctx, 7, "y_zero_point", y_type));
        y_zp = z;
      } else {
        return OpError(op_, "y_zero_point must be UINT8 or INT8, got {}", DataTypeName(y_type));
      }
    }
    const int32_t* bias_i = nullptr;
    const float* bias_f = nullptr;
    if (ctx.num_inputs() > 8 && ctx.has_input(8)) {
      const Tensor& b = ctx.input(8);
      if (b.rank() != 1 || b.dim(0) != channels ||
          (b.dtype() != DataType::kInt32 && b.dtype() != DataType::kFloat32)) {
        return OpError(op_, "B must be INT32 or FP32 [{}], got {} {}", channels,
                       DataTypeName(b.dtype()), b.shape().ToString());
      }
      if (b.dtype() == DataType::kInt32) {
        bias_i = b.data<const int32_t>();
      } else {
        bias_f = b.data<const float>();
      }
    }
    const float* pws = ws.data<const float>();
    const int64_t nws = ws.num_elements();
    const int32_t* pacc = acc.data<const int32_t>();
    const int64_t n = acc.num_elements();
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
    if (act_.kind == Act::kRelu) lo = 0.0f;
    if (act_.kind == Act::kClip) {
      lo = act_.params[0] / y_scale;
      hi = act_.params[1] / y_scale;
    }
    auto value = [&](int64_t e) {
      const int64_t c = (e / inner) % channels;
      int32_t a = pacc[e];
      if (bias_i != nullptr) {
        a = static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(bias_i[c]));
      }
      const float mult = x_scale * pws[nws == 1 ? 0 : c] / y_scale;
      float v = static_cast<float>(a) * mult;
      if (bias_f != nullptr) v += bias_f[c] / y_scale;
      return std::min(std::max(v, lo), hi);
    };
    KILN_ASSIGN_OR_RETURN(Tensor y, out_ctx.AllocateOutput(0, y_type, acc.shape()));
    if (!has_y) {
      float* py = y.data<float>();
      for (int64_t e = 0; e < n; ++e) py[e] = value(e);
      return Status::OK();
    }
    return DispatchType<uint8_t, int8_t>(y_type, op_, [&](auto tag) -> Status {
      using Q = typename decltype(tag)::type;
      constexpr float qlo = static_cast<float>(std::numeric_limits<Q>::min());
      constexpr float qhi = static_cast<float>(std::numeric_limits<Q>::max());
      Q* py = y.data<Q>();
      for (int64_t e = 0; e < n; ++e) {
        const float v = value(e);
        py[e] = std::isnan(v) ? static_cast<Q>(y_zp)
                              : static_cast<Q>(std::clamp(
                                    std::nearbyint(v) + static_cast<float>(y_zp), qlo, qhi));
      }
      return Status::OK();
    });
  }

  // A one-element input of `dtype`.
  template <typename T>
  Result<T> Scalar(const KernelContext& ctx, int i, std::string_view what, DataType dtype) const {
    KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op_));
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dtype || t.num_elements() != 1) {
      return OpError(op_, "{} must be a {} scalar, got {} {}", what, DataTypeName(dtype),
                     DataTypeName(t.dtype()), t.shape().ToString());
    }
    return t.data<const T>()[0];
  }

  std::string op_;
  std::unique_ptr<Kernel> core_;
  bool conv_;
  Activation act_;
  bool x_channels_last_, y_channels_last_;
};

Result<std::unique_ptr<Kernel>> CreateQuantized(const KernelInfo& info, bool conv) {
  const NodeDesc& node = info.node();
  KILN_RETURN_IF_ERROR(RequireInputs(info, 5));
  if (info.num_inputs() > 9) {
    return OpError(node.op_type, "takes at most 9 inputs, got {}", info.num_inputs());
  }
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "quantized ops have one output"));
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  if (act.kind != Act::kNone && act.kind != Act::kRelu && act.kind != Act::kClip) {
    return OpError(node.op_type, "activation must be \"\", \"Relu\" or \"Clip\"");
  }
  if (!conv) {
    for (const Attribute& a : node.attributes) {
      if (a.name != "activation" && a.name != "activation_params") {
        return OpError(node.op_type, "unknown attribute '{}'", a.name);
      }
    }
  }
  NodeDesc core;
  core.name = node.name;
  core.op_type = conv ? "ConvInteger" : "MatMulInteger";
  core.opset = 10;
  auto in = [&](int i) {
    return i < info.num_inputs() ? node.inputs[static_cast<size_t>(i)] : OperandDesc();
  };
  core.inputs = {in(0), in(3), in(2), in(5)};
  core.outputs = {node.outputs.empty() ? OperandDesc() : node.outputs[0]};
  core.attributes = AttributesWithout(
      node, {"activation", "activation_params", "x_channels_last", "y_channels_last"});
  const KernelInfo core_info(core);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel,
                        conv ? CreateConvInteger(core_info) : CreateMatMulInteger(core_info));
  const bool x_channels_last = conv && node.GetInt("x_channels_last", 0) != 0;
  const bool y_channels_last = conv && node.GetInt("y_channels_last", 0) != 0;
  return std::unique_ptr<Kernel>(std::make_unique<QuantizedKernel>(
      node.op_type, std::move(kernel), conv, std::move(act), x_channels_last, y_channels_last));
}

// QAdd: both operands dequantized, added, the activation, quantized, in FP32 exactly as the
// unfused DequantizeLinear / Add / activation / QuantizeLinear reference kernels do.
class QAddKernel final : public Kernel {
 public:
  explicit QAddKernel(Activation act) : act_(std::move(act)) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "QAdd";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 8, kOp));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    if (a.shape() != b.shape()) {
      return OpError(kOp, "A {} and B {} must have the same shape", a.shape().ToString(),
                     b.shape().ToString());
    }
    float scale[3];
    int32_t zp[3];
    DataType types[3];
    static constexpr int kScaleInput[3] = {1, 4, 6}, kZeroPointInput[3] = {2, 5, 7};
    for (int k = 0; k < 3; ++k) {
      const Tensor& s = ctx.input(kScaleInput[k]);
      const Tensor& z = ctx.input(kZeroPointInput[k]);
      types[k] = k < 2 ? ctx.input(3 * k).dtype() : z.dtype();
      if (s.dtype() != DataType::kFloat32 || s.num_elements() != 1 || z.num_elements() != 1 ||
          z.dtype() != types[k] || (types[k] != DataType::kUint8 && types[k] != DataType::kInt8)) {
        return OpError(kOp,
                       "operand {}: scale must be an FP32 scalar and the zero point a UINT8 "
                       "or INT8 scalar of the tensor's dtype",
                       k);
      }
      scale[k] = s.data<const float>()[0];
      zp[k] = z.dtype() == DataType::kUint8 ? int32_t{z.data<const uint8_t>()[0]}
                                            : int32_t{z.data<const int8_t>()[0]};
    }
    auto at = [](const Tensor& t, int64_t e) {
      return t.dtype() == DataType::kUint8 ? int32_t{t.data<const uint8_t>()[e]}
                                           : int32_t{t.data<const int8_t>()[e]};
    };
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, types[2], a.shape()));
    return DispatchType<uint8_t, int8_t>(types[2], kOp, [&](auto tag) -> Status {
      using Q = typename decltype(tag)::type;
      constexpr float qlo = static_cast<float>(std::numeric_limits<Q>::min());
      constexpr float qhi = static_cast<float>(std::numeric_limits<Q>::max());
      Q* py = y.data<Q>();
      for (int64_t e = 0; e < a.num_elements(); ++e) {
        const float va = static_cast<float>(at(a, e) - zp[0]) * scale[0];
        const float vb = static_cast<float>(at(b, e) - zp[1]) * scale[1];
        float v = va + vb;
        if (act_.kind == Act::kRelu) v = std::max(v, 0.0f);
        if (act_.kind == Act::kClip) v = std::min(std::max(v, act_.params[0]), act_.params[1]);
        const float q = v / scale[2];
        py[e] = std::isnan(q) ? static_cast<Q>(zp[2])
                              : static_cast<Q>(std::clamp(
                                    std::nearbyint(q) + static_cast<float>(zp[2]), qlo, qhi));
      }
      return Status::OK();
    });
  }

 private:
  Activation act_;
};

// --- Blocked channel layout (kiln_ops.h): ReorderToBlocked, ReorderFromBlocked and FusedConv's
// x_block / y_block. Blocked tensors are unblocked into plain ones, the plain kernel runs, and
// the result is blocked again; padding channels are written as zeros (outputs are zero-filled
// when allocated and the loops below touch only the real channels).

constexpr int64_t kMaxBlock = 64;

Result<int64_t> ReadBlock(const KernelInfo& info, std::string_view name, bool required) {
  AttrReader attrs(info);
  if (required && !attrs.Has(name)) {
    return OpError(info.node().op_type, "attribute '{}' is required", name);
  }
  KILN_ASSIGN_OR_RETURN(int64_t b, attrs.Int(name, 0));
  if (b < (required ? 1 : 0) || b > kMaxBlock) {
    return OpError(info.node().op_type, "attribute '{}' is {}, expected {} to {}", name, b,
                   required ? 1 : 0, kMaxBlock);
  }
  return b;
}

// Index of element (n, c, s) of a plain [N, C, S] tensor in its blocked [N, ceil(C/b), S, b] form.
int64_t BlockedIndex(int64_t n, int64_t c, int64_t s, int64_t channels, int64_t spatial,
                     int64_t b) {
  const int64_t cb = (channels + b - 1) / b;
  return ((n * cb + c / b) * spatial + s) * b + c % b;
}

// The blocked shape of plain `dims` ([N, C, S...]).
Result<Shape> BlockedShape(std::span<const int64_t> dims, int64_t b) {
  std::vector<int64_t> out = {dims[0], (dims[1] + b - 1) / b};
  out.insert(out.end(), dims.begin() + 2, dims.end());
  out.push_back(b);
  return Shape::Create(out);
}

// A plain tensor with `channels` channels from blocked `t` (FLOAT or DOUBLE).
Result<OwnedTensor> Unblock(std::string_view op, const char* what, const Tensor& t, int64_t b,
                            int64_t channels) {
  if (t.rank() < 4 || t.dim(t.rank() - 1) != b || t.dim(1) != (channels + b - 1) / b) {
    return OpError(op,
                   "{} {} is not a blocked tensor of {} channels with block {} "
                   "([N, {}, spatial..., {}])",
                   what, t.shape().ToString(), channels, b, (channels + b - 1) / b, b);
  }
  std::vector<int64_t> dims = {t.dim(0), channels};
  for (int i = 2; i < t.rank() - 1; ++i) dims.push_back(t.dim(i));
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  OwnedTensor out;
  const Status st = DispatchType<float, double>(t.dtype(), op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    KILN_ASSIGN_OR_RETURN(out, OwnedTensor::Allocate(t.dtype(), shape));
    const int64_t spatial = DimProduct(shape.dims(), 2, shape.dims().size());
    const T* src = t.data<const T>();
    T* dst = out.data<T>();
    for (int64_t n = 0; n < dims[0]; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t s = 0; s < spatial; ++s) {
          dst[(n * channels + c) * spatial + s] = src[BlockedIndex(n, c, s, channels, spatial, b)];
        }
      }
    }
    return Status::OK();
  });
  KILN_RETURN_IF_ERROR(st);
  return out;
}

// Writes plain `x` ([N, C, S...], FLOAT or DOUBLE) blocked into output 0.
Status BlockToOutput(KernelContext& ctx, std::string_view op, const Tensor& x, int64_t b) {
  if (x.rank() < 3) {
    return OpError(op, "X {} must be [N, C, spatial...] (rank >= 3)", x.shape().ToString());
  }
  KILN_ASSIGN_OR_RETURN(Shape shape, BlockedShape(x.shape().dims(), b));
  return DispatchType<float, double>(x.dtype(), op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), shape));
    const int64_t spatial = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    const T* src = x.data<const T>();
    T* dst = y.data<T>();
    const int64_t channels = x.dim(1);
    for (int64_t n = 0; n < x.dim(0); ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t s = 0; s < spatial; ++s) {
          dst[BlockedIndex(n, c, s, channels, spatial, b)] = src[(n * channels + c) * spatial + s];
        }
      }
    }
    return Status::OK();
  });
}

class ReorderToBlockedKernel final : public Kernel {
 public:
  explicit ReorderToBlockedKernel(int64_t block) : block_(block) {}
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kReorderToBlockedOp));
    return BlockToOutput(ctx, kReorderToBlockedOp, ctx.input(0), block_);
  }

 private:
  int64_t block_;
};

class ReorderFromBlockedKernel final : public Kernel {
 public:
  ReorderFromBlockedKernel(int64_t block, int64_t channels) : block_(block), channels_(channels) {}
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kReorderFromBlockedOp));
    KILN_ASSIGN_OR_RETURN(OwnedTensor x,
                          Unblock(kReorderFromBlockedOp, "Y", ctx.input(0), block_, channels_));
    return CopyToOutput(ctx, x.view(), x.shape());
  }

 private:
  int64_t block_, channels_;
};

// FusedConv with a blocked X and/or a blocked Y and Z around the plain FusedConv kernel.
class BlockedFusedConvKernel final : public Kernel {
 public:
  BlockedFusedConvKernel(std::unique_ptr<Kernel> plain, int64_t x_block, int64_t y_block,
                         int64_t group)
      : plain_(std::move(plain)), x_block_(x_block), y_block_(y_block), group_(group) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kFusedConvOp));
    const Tensor& w = ctx.input(1);
    if (w.rank() < 3) {
      return OpError(kFusedConvOp, "W {} must be [M, C/group, kernel...]", w.shape().ToString());
    }
    std::vector<Tensor> in(static_cast<size_t>(ctx.num_inputs()));
    for (int i = 0; i < ctx.num_inputs(); ++i) in[static_cast<size_t>(i)] = ctx.input(i);
    OwnedTensor x_plain, z_plain;
    if (x_block_ > 0) {
      KILN_ASSIGN_OR_RETURN(x_plain,
                            Unblock(kFusedConvOp, "X", ctx.input(0), x_block_, w.dim(1) * group_));
      in[0] = x_plain.view();
    }
    if (y_block_ > 0 && ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(z_plain, Unblock(kFusedConvOp, "Z", ctx.input(3), y_block_, w.dim(0)));
      in[3] = z_plain.view();
    }
    OwnedTensor out[1];
    KernelContext plain_ctx(in, out);
    KILN_RETURN_IF_ERROR(plain_->Compute(plain_ctx));
    if (y_block_ > 0) return BlockToOutput(ctx, kFusedConvOp, out[0].view(), y_block_);
    return CopyToOutput(ctx, out[0].view(), out[0].shape());
  }

 private:
  std::unique_ptr<Kernel> plain_;
  int64_t x_block_, y_block_, group_;
};

Result<std::unique_ptr<Kernel>> CreateBlockedFusedConv(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(int64_t x_block, ReadBlock(info, kAttrXBlock, false));
  KILN_ASSIGN_OR_RETURN(int64_t y_block, ReadBlock(info, kAttrYBlock, false));
  KILN_ASSIGN_OR_RETURN(int64_t group, AttrReader(info).Int("group", 1));
  if (group < 1) return OpError(kFusedConvOp, "attribute 'group' is {}, expected >= 1", group);
  NodeDesc plain = info.node();
  plain.attributes = AttributesWithout(info.node(), {kAttrXBlock, kAttrYBlock});
  const KernelInfo plain_info(plain);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel,
                        CreateFused(plain_info, "Conv", 13, 3, -1, 3, &CreateConv));
  return std::unique_ptr<Kernel>(
      std::make_unique<BlockedFusedConvKernel>(std::move(kernel), x_block, y_block, group));
}

// BlockedPool: the plain ONNX pool of the unblocked X, blocked again.
class BlockedPoolKernel final : public Kernel {
 public:
  BlockedPoolKernel(std::unique_ptr<Kernel> plain, int64_t block, int64_t channels)
      : plain_(std::move(plain)), block_(block), channels_(channels) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, kBlockedPoolOp));
    KILN_ASSIGN_OR_RETURN(OwnedTensor x,
                          Unblock(kBlockedPoolOp, "X", ctx.input(0), block_, channels_));
    const Tensor in[1] = {x.view()};
    OwnedTensor out[1];
    KernelContext plain_ctx(in, out);
    KILN_RETURN_IF_ERROR(plain_->Compute(plain_ctx));
    return BlockToOutput(ctx, kBlockedPoolOp, out[0].view(), block_);
  }

 private:
  std::unique_ptr<Kernel> plain_;
  int64_t block_, channels_;
};

// ChannelAffine: per element, the product and the sum rounded to FP32 (as the fast kernel
// computes them), the activation in double.
class ChannelAffineKernel final : public Kernel {
 public:
  ChannelAffineKernel(int64_t block, Activation act) : block_(block), act_(std::move(act)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, kChannelAffineOp));
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    for (const Tensor* t : {&x, &scale, &bias}) {
      if (t->dtype() != DataType::kFloat32) {
        return OpError(kChannelAffineOp, "inputs must be FLOAT, got {}", DataTypeName(t->dtype()));
      }
    }
    if (scale.rank() != 1 || bias.shape() != scale.shape()) {
      return OpError(kChannelAffineOp, "Scale {} and Bias {} must be [C]", scale.shape().ToString(),
                     bias.shape().ToString());
    }
    const int64_t c = scale.dim(0);
    const int min_rank = block_ > 0 ? 3 : 2;
    const bool layout_ok =
        x.rank() >= min_rank &&
        (block_ > 0 ? x.dim(1) == (c + block_ - 1) / block_ && x.dim(x.rank() - 1) == block_
                    : x.dim(1) == c);
    if (!layout_ok) {
      return OpError(kChannelAffineOp, "X {} is not a{} tensor of {} channels{}",
                     x.shape().ToString(), block_ > 0 ? " blocked" : "n [N, C, ...]", c,
                     block_ > 0 ? fmt::format(" with block {}", block_) : "");
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
    const float* px = x.data<const float>();
    const float* ps = scale.data<const float>();
    const float* pb = bias.data<const float>();
    float* py = y.data<float>();
    const int64_t n = x.dim(0), slots = x.dim(1);
    const int64_t inner = n * slots == 0 ? 0 : x.num_elements() / (n * slots);
    const int64_t b = block_ > 0 ? block_ : 1;
    for (int64_t i = 0; i < n * slots; ++i) {
      const int64_t slot = i % slots;
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t ch = block_ > 0 ? slot * b + k % b : slot;
        const int64_t at = i * inner + k;
        if (ch >= c) {
          py[at] = 0.0f;  // a padding lane
          continue;
        }
        const float v = static_cast<float>(static_cast<double>(px[at]) * ps[ch]);
        py[at] = static_cast<float>(ApplyAct(act_, static_cast<double>(v + pb[ch])));
      }
    }
    return Status::OK();
  }

 private:
  int64_t block_;
  Activation act_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateKilnFusedConv(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  if (info.node().FindAttribute(kAttrXBlock) != nullptr ||
      info.node().FindAttribute(kAttrYBlock) != nullptr) {
    return CreateBlockedFusedConv(info);
  }
  return CreateFused(info, "Conv", 13, 3, -1, 3, &CreateConv);
}

Result<std::unique_ptr<Kernel>> CreateKilnFusedGemm(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return CreateFused(info, "Gemm", 13, 3, -1, 3, &CreateGemm);
}

Result<std::unique_ptr<Kernel>> CreateKilnFusedMatMul(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  if (!info.node().attributes.empty()) {
    for (const Attribute& a : info.node().attributes) {
      if (a.name != "activation" && a.name != "activation_params") {
        return OpError("FusedMatMul", "unknown attribute '{}'", a.name);
      }
    }
  }
  return CreateFused(info, "MatMul", 13, 2, 2, 3, &CreateMatMul);
}

Result<std::unique_ptr<Kernel>> CreateKilnLayerNormalization(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "ai.kiln LayerNormalization has one output"));
  NodeDesc core = info.node();
  core.domain.clear();
  core.opset = 17;
  const KernelInfo core_info(core);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, CreateLayerNormalization(core_info));
  return std::unique_ptr<Kernel>(std::make_unique<KilnLayerNormKernel>(std::move(kernel)));
}

Result<std::unique_ptr<Kernel>> CreateKilnGelu(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "Gelu has one output"));
  const Attribute* a = info.node().FindAttribute("approximate");
  if (a != nullptr && a->type != AttributeType::kString) {
    return OpError("Gelu", "attribute 'approximate' must be a STRING");
  }
  const std::string approximate = a != nullptr ? a->s : std::string("none");
  if (approximate != "none" && approximate != "tanh") {
    return OpError("Gelu", "attribute 'approximate' must be \"none\" or \"tanh\", got \"{}\"",
                   approximate);
  }
  return std::unique_ptr<Kernel>(std::make_unique<GeluKernel>(approximate == "tanh"));
}

Result<std::unique_ptr<Kernel>> CreateKilnAttention(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "Attention has one output"));
  if (info.num_inputs() > 4) {
    return OpError("Attention", "takes at most 4 inputs, got {}", info.num_inputs());
  }
  std::optional<float> scale;
  if (AttrReader(info).Has("scale")) {
    KILN_ASSIGN_OR_RETURN(float s, AttrReader(info).Float("scale", 1.0f));
    scale = s;
  }
  return std::unique_ptr<Kernel>(std::make_unique<AttentionKernel>(scale));
}

Result<std::unique_ptr<Kernel>> CreateKilnQConv(const KernelInfo& info) {
  return CreateQuantized(info, /*conv=*/true);
}

Result<std::unique_ptr<Kernel>> CreateKilnQMatMul(const KernelInfo& info) {
  return CreateQuantized(info, /*conv=*/false);
}

Result<std::unique_ptr<Kernel>> CreateKilnQAdd(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 8));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "QAdd has one output"));
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  if (act.kind != Act::kNone && act.kind != Act::kRelu && act.kind != Act::kClip) {
    return OpError("QAdd", "activation must be \"\", \"Relu\" or \"Clip\"");
  }
  return std::unique_ptr<Kernel>(std::make_unique<QAddKernel>(std::move(act)));
}

// --- Blocked channel layout --------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> CreateKilnReorderToBlocked(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "ReorderToBlocked has one output"));
  KILN_ASSIGN_OR_RETURN(int64_t block, ReadBlock(info, kAttrBlock, true));
  return std::unique_ptr<Kernel>(std::make_unique<ReorderToBlockedKernel>(block));
}

Result<std::unique_ptr<Kernel>> CreateKilnBlockedPool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "BlockedPool has one output"));
  KILN_ASSIGN_OR_RETURN(int64_t block, ReadBlock(info, kAttrBlock, true));
  AttrReader attrs(info);
  if (!attrs.Has(kAttrChannels) || !attrs.Has(kAttrPool)) {
    return OpError(kBlockedPoolOp, "attributes 'pool' and 'channels' are required");
  }
  KILN_ASSIGN_OR_RETURN(int64_t channels, attrs.Int(kAttrChannels, 0));
  if (channels < 1) {
    return OpError(kBlockedPoolOp, "attribute 'channels' is {}, expected >= 1", channels);
  }
  KILN_ASSIGN_OR_RETURN(std::string pool, attrs.String(kAttrPool, ""));
  KernelFactory factory = nullptr;
  if (pool == "MaxPool") {
    factory = &CreateMaxPool;
  } else if (pool == "AveragePool") {
    factory = &CreateAveragePool;
  } else if (pool == "GlobalAveragePool") {
    factory = &CreateGlobalAveragePool;
  } else if (pool == "GlobalMaxPool") {
    factory = &CreateGlobalMaxPool;
  } else {
    return OpError(kBlockedPoolOp,
                   "attribute 'pool' is \"{}\", expected MaxPool, AveragePool, "
                   "GlobalAveragePool or GlobalMaxPool",
                   pool);
  }
  const NodeDesc& node = info.node();
  NodeDesc plain;
  plain.name = node.name;
  plain.op_type = pool;
  plain.opset = 17;
  plain.inputs = {node.inputs[0]};
  plain.inputs[0].type = ValueType();  // the blocked declared type is not the plain one
  plain.outputs = {OperandDesc::Of(ValueType())};
  plain.attributes = AttributesWithout(node, {kAttrPool, kAttrBlock, kAttrChannels});
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, factory(KernelInfo(plain)));
  return std::unique_ptr<Kernel>(
      std::make_unique<BlockedPoolKernel>(std::move(kernel), block, channels));
}

Result<std::unique_ptr<Kernel>> CreateKilnChannelAffine(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "ChannelAffine has one output"));
  KILN_ASSIGN_OR_RETURN(int64_t block, ReadBlock(info, kAttrBlock, false));
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  return std::unique_ptr<Kernel>(std::make_unique<ChannelAffineKernel>(block, std::move(act)));
}

Result<std::unique_ptr<Kernel>> CreateKilnReorderFromBlocked(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "ReorderFromBlocked has one output"));
  KILN_ASSIGN_OR_RETURN(int64_t block, ReadBlock(info, kAttrBlock, true));
  AttrReader attrs(info);
  if (!attrs.Has(kAttrChannels)) {
    return OpError(kReorderFromBlockedOp, "attribute 'channels' is required");
  }
  KILN_ASSIGN_OR_RETURN(int64_t channels, attrs.Int(kAttrChannels, 0));
  if (channels < 1) {
    return OpError(kReorderFromBlockedOp, "attribute 'channels' is {}, expected >= 1", channels);
  }
  return std::unique_ptr<Kernel>(std::make_unique<ReorderFromBlockedKernel>(block, channels));
}

}  // namespace kiln::ref
