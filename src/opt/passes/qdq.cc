// SPDX-License-Identifier: Apache-2.0
// qdq_fusion: QuantizeLinear / DequantizeLinear (QDQ) patterns around Conv, MatMul, Gemm and
// residual Adds become the INT8 ai.kiln ops QConv / QMatMul / QAdd (op/kiln_ops.h).
//
// NOTE: matched from the core node:
//   X:    DequantizeLinear(x_q, x_scale, x_zero_point?) with a scalar FP32 constant scale and a
//         scalar UINT8 / INT8 constant zero point; x_q is UINT8 or INT8.
//   W:    DequantizeLinear(w_q, w_scale, w_zero_point?, axis) of an INT8 constant with zero zero
//         points (symmetric; an asymmetric weight is left to the FP32 path), per tensor or per
//         output channel (axis 0 for Conv and for Gemm with transB=1, axis 1 for MatMul's
//         B [K, N] and Gemm with transB=0). MatMul's B must be 2-D; Gemm needs transA=0, alpha=1
//         and beta=1 (when C is present); a transposed Gemm B is stored transposed, [K, N].
//   bias: Conv's B / Gemm's C, either an FP32 constant with one value per output channel or
//         DequantizeLinear(b_q INT32 constant, b_scale, 0); for MatMul, a following Add of an
//         FP32 constant [N] or [1, ..., N] (through a single-reader value). When b_scale equals
//         x_scale * w_scale (to 1e-6 relative) b_q is kept as the INT32 bias; otherwise b_q *
//         b_scale becomes an FP32 bias.
//   then, each only through a value with a single reader that is not a graph output: one Relu
//   or Clip (constant bounds), and one QuantizeLinear with scalar constant parameters. With the
//   QuantizeLinear the new op produces its INT8 output directly (the next quantized op's
//   DequantizeLinear then reads INT8, so tensors stay INT8 between consecutive quantized ops);
//   without it the op produces FP32.
// A residual Add of two dequantized tensors with provably equal shapes, followed by an optional
// Relu / Clip and a QuantizeLinear (all scalar parameters), becomes QAdd.
// The DequantizeLinear nodes are left to dead code elimination (another reader may still need
// them). QuantizeLinear(DequantizeLinear(q, s, z), s, z) with equal scalar parameters is q
// itself: its readers read q.
// ONNX QLinearConv / QLinearMatMul (models quantized in the operator format) become QConv /
// QMatMul unchanged: same inputs in the same order, same numerics.
// Layout: oneDNN's INT8 convolutions want channels-last data, kiln's tensors are channels-first,
// so each QConv would transpose X in and Y out. Once per graph, the INT8 outputs of QConv / QAdd
// are grouped (a QAdd ties its two operands and its output to one layout); a group whose values
// are all such outputs (rank 3..5, not graph outputs) and of which some QConv reads one as X is
// stored channels-last: the values' declared dims become [N, spatial..., C], the producing
// QConvs get y_channels_last, the reading QConvs x_channels_last, and any other reader (a
// DequantizeLinear before an FP32 op) reads it through a Transpose back to channels-first.

#include "opt/passes/qdq.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

bool IsQuant8(DataType t) { return t == DataType::kUint8 || t == DataType::kInt8; }

// Scalar quantization parameters of a QuantizeLinear / DequantizeLinear node.
struct ScalarParams {
  int scale = kNoValue;
  int zero_point = kNoValue;  // kNoValue: absent (UINT8 0)
  float s = 1.0f;
  int32_t z = 0;
  DataType type = DataType::kUint8;  // the quantized type
};

std::optional<ScalarParams> ScalarParamsOf(const GraphEditor& ed, const Node& n) {
  if (n.inputs.size() < 2 || n.inputs[1] == kNoValue) return std::nullopt;
  const OwnedTensor* s = ed.Constant(n.inputs[1]);
  if (s == nullptr || s->dtype() != DataType::kFloat32 || s->num_elements() != 1) {
    return std::nullopt;
  }
  ScalarParams p;
  p.scale = n.inputs[1];
  p.s = s->data<const float>()[0];
  if (!(p.s > 0) || !std::isfinite(p.s)) return std::nullopt;
  if (n.has_input(2)) {
    const OwnedTensor* z = ed.Constant(n.inputs[2]);
    if (z == nullptr || z->num_elements() != 1 || !IsQuant8(z->dtype())) return std::nullopt;
    p.zero_point = n.inputs[2];
    p.type = z->dtype();
    p.z = z->dtype() == DataType::kUint8 ? int32_t{z->data<const uint8_t>()[0]}
                                         : int32_t{z->data<const int8_t>()[0]};
  }
  return p;
}

bool IsQuantCore(const Node& n) {
  return IsOnnxOp(n, "Conv") || IsOnnxOp(n, "MatMul") || IsOnnxOp(n, "Gemm");
}

// The DequantizeLinear producing core input 0 with scalar parameters of a UINT8 / INT8 tensor.
int ActivationDequantize(const GraphEditor& ed, const Node& core) {
  if (!core.has_input(0)) return -1;
  const int dq = ed.ProducerOf(core.inputs[0], "DequantizeLinear");
  if (dq < 0) return -1;
  const Node& n = ed.node(dq);
  if (!IsQuant8(ed.DtypeOf(n.inputs[0])) || !ScalarParamsOf(ed, n)) return -1;
  if (n.has_input(2) && ed.DtypeOf(n.inputs[0]) != ed.DtypeOf(n.inputs[2])) return -1;
  return dq;
}

// True when the DequantizeLinear `n` of a weight has no zero point or an INT8 constant one that
// is all zeros.
bool HasZeroWeightZeroPoint(const GraphEditor& ed, const Node& n) {
  if (!n.has_input(2)) return true;
  const OwnedTensor* z = ed.Constant(n.inputs[2]);
  if (z == nullptr || z->dtype() != DataType::kInt8) return false;
  const int8_t* p = z->data<const int8_t>();
  return std::all_of(p, p + z->num_elements(), [](int8_t v) { return v == 0; });
}

// The weight: INT8 constant, scale (1 or `channels` values) and zero point, already in the
// layout the INT8 op takes.
struct Weight {
  int w = kNoValue, scale = kNoValue, zero_point = kNoValue;
  std::vector<float> s;
};

std::optional<Weight> MatchWeight(GraphEditor& ed, const Node& core, bool is_conv, bool is_gemm,
                                  bool trans_b) {
  const int dq = ed.ProducerOf(core.inputs[1], "DequantizeLinear");
  if (dq < 0) return std::nullopt;
  const Node n = ed.node(dq);
  const OwnedTensor* w = ed.Constant(n.inputs[0]);
  if (w == nullptr || w->dtype() != DataType::kInt8) return std::nullopt;
  const int rank = w->shape().rank();
  if (is_conv ? (rank < 3 || rank > 5) : rank != 2) return std::nullopt;
  const OwnedTensor* s = n.has_input(1) ? ed.Constant(n.inputs[1]) : nullptr;
  if (s == nullptr || s->dtype() != DataType::kFloat32) return std::nullopt;
  // The output-channel axis of W as stored in the graph.
  const int channel_axis = is_conv ? 0 : (is_gemm && trans_b) ? 0 : 1;
  const int64_t channels = w->shape().dim(channel_axis);
  if (s->num_elements() != 1) {
    int64_t axis = n.GetInt("axis", 1);
    if (axis < 0) axis += rank;
    if (axis != channel_axis || s->shape().rank() != 1 || s->num_elements() != channels) {
      return std::nullopt;
    }
  }
  Weight out;
  out.scale = n.inputs[1];
  out.s.assign(s->data<const float>(), s->data<const float>() + s->num_elements());
  for (float v : out.s) {
    if (!(v > 0) || !std::isfinite(v)) return std::nullopt;
  }
  if (n.has_input(2)) {
    // Symmetric weights only: oneDNN's INT8 primitives take no weight zero point, and an
    // asymmetric weight is better served by the FP32 kernels on folded weights than by the
    // reference INT8 kernel.
    if (!HasZeroWeightZeroPoint(ed, n)) return std::nullopt;
    const OwnedTensor* z = ed.Constant(n.inputs[2]);
    if (z->num_elements() != s->num_elements()) return std::nullopt;
    out.zero_point = n.inputs[2];
  }
  out.w = n.inputs[0];
  if (is_gemm && trans_b) {  // [N, K] -> [K, N]
    const int64_t nn = w->shape().dim(0), k = w->shape().dim(1);
    Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt8, Shape{k, nn});
    if (!t.ok()) return std::nullopt;
    const int8_t* src = w->data<const int8_t>();
    int8_t* dst = t->data<int8_t>();
    for (int64_t i = 0; i < nn; ++i) {
      for (int64_t j = 0; j < k; ++j) dst[j * nn + i] = src[i * k + j];
    }
    out.w = ed.AddConstant(ed.value(n.inputs[0]).name + "_kn", std::move(t).value());
  }
  return out;
}

// The bias input of the INT8 op (kNoValue: none), or nullopt when `b` cannot be one.
std::optional<int> MatchBias(GraphEditor& ed, int b, int64_t channels, float x_scale,
                             const std::vector<float>& w_scale) {
  if (b == kNoValue) return kNoValue;
  if (const OwnedTensor* c = ed.Constant(b)) {
    if (c->dtype() != DataType::kFloat32 || c->num_elements() != channels) return std::nullopt;
    for (int i = 0; i + 1 < c->shape().rank(); ++i) {
      if (c->shape().dim(i) != 1) return std::nullopt;
    }
    if (c->shape().rank() == 1) return b;
    const float* p = c->data<const float>();
    return ed.AddConstant(ed.value(b).name + "_1d",
                          MakeFloatTensor(Shape{channels}, std::vector<float>(p, p + channels)));
  }
  const int dq = ed.ProducerOf(b, "DequantizeLinear");
  if (dq < 0) return std::nullopt;
  const Node& n = ed.node(dq);
  const OwnedTensor* q = ed.Constant(n.inputs[0]);
  const OwnedTensor* s = n.has_input(1) ? ed.Constant(n.inputs[1]) : nullptr;
  if (q == nullptr || q->dtype() != DataType::kInt32 || q->shape().rank() != 1 ||
      q->num_elements() != channels || s == nullptr || s->dtype() != DataType::kFloat32 ||
      (s->num_elements() != 1 && s->num_elements() != channels)) {
    return std::nullopt;
  }
  if (n.has_input(2)) {
    std::optional<std::vector<double>> z = ed.ConstantValues(n.inputs[2]);
    if (!z) return std::nullopt;
    for (double v : *z) {
      if (v != 0) return std::nullopt;
    }
  }
  const float* ps = s->data<const float>();
  const int32_t* pq = q->data<const int32_t>();
  bool same_scale = true;
  std::vector<float> real(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float bs = ps[s->num_elements() == 1 ? 0 : c];
    const float acc = x_scale * w_scale[w_scale.size() == 1 ? 0 : static_cast<size_t>(c)];
    if (std::abs(bs - acc) > 1e-6f * acc) same_scale = false;
    real[static_cast<size_t>(c)] = static_cast<float>(pq[c]) * bs;
  }
  if (same_scale) return n.inputs[0];
  return ed.AddConstant(ed.value(b).name + "_f32", MakeFloatTensor(Shape{channels}, real));
}

// A Relu, or a Clip with constant bounds, reading `cur` as its only reader.
struct Activation {
  int node = -1;
  std::string name;
  std::vector<float> params;
};

std::optional<Activation> MatchActivation(const GraphEditor& ed, int cur, int opset) {
  const int r = SoleConsumer(ed, cur);
  if (r < 0) return std::nullopt;
  const Node& n = ed.node(r);
  if (n.inputs.empty() || n.inputs[0] != cur || n.outputs.empty()) return std::nullopt;
  if (IsOnnxOp(n, "Relu")) return Activation{r, std::string(kActivationRelu), {}};
  if (!IsOnnxOp(n, "Clip")) return std::nullopt;
  std::optional<std::pair<float, float>> bounds = ClipBounds(ed, n, opset);
  if (!bounds) return std::nullopt;
  return Activation{r, std::string(kActivationClip), {bounds->first, bounds->second}};
}

class QdqFusionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    const int opset = static_cast<int>(ed.graph().OpsetFor(""));
    for (int c : ed.LiveNodes()) {
      if (!ed.alive(c) || !IsQuantCore(ed.node(c))) continue;
      if (Fuse(ed, c, opset)) ++changes;
    }
    for (int a : ed.LiveNodes()) {
      if (!ed.alive(a) || !IsOnnxOp(ed.node(a), "Add")) continue;
      if (FuseAdd(ed, a, opset)) ++changes;
    }
    for (int n : ed.LiveNodes()) {
      if (RenameQLinear(ed, n)) ++changes;
    }
    changes += RemoveRequantizeIdentities(ed);
    changes += SelectChannelsLast(ed);
    return changes;
  }

 private:
  static bool Fuse(GraphEditor& ed, int c, int opset) {
    const Node core = ed.node(c);
    const bool is_conv = IsOnnxOp(core, "Conv");
    const bool is_gemm = IsOnnxOp(core, "Gemm");
    if (core.outputs.size() != 1 || !IsFloat32(ed, core.outputs[0])) return false;
    if (core.num_present_inputs() < 2) return false;
    const int dqa = ActivationDequantize(ed, core);
    if (dqa < 0) return false;
    const Node xa = ed.node(dqa);
    const ScalarParams xp = *ScalarParamsOf(ed, xa);
    bool trans_b = false;
    if (is_gemm) {
      if (core.GetInt("transA", 0) != 0 || core.GetFloat("alpha", 1.0f) != 1.0f) return false;
      if (core.has_input(2) && core.GetFloat("beta", 1.0f) != 1.0f) return false;
      trans_b = core.GetInt("transB", 0) != 0;
      const ValueType& a = ed.value(core.inputs[0]).type;
      if (!a.has_shape || a.dims.size() != 2) return false;
    }
    if (!is_conv && !is_gemm) {  // MatMul: A of rank >= 2 (the 1-D form is not taken)
      const ValueType& a = ed.value(core.inputs[0]).type;
      if (!a.has_shape || a.dims.size() < 2) return false;
    }
    if (is_conv) {
      const ValueType& a = ed.value(core.inputs[0]).type;
      if (a.has_shape && (a.dims.size() < 3 || a.dims.size() > 5)) return false;
    }
    // Validate everything before adding constants.
    {
      const int dqw = ed.ProducerOf(core.inputs[1], "DequantizeLinear");
      if (dqw < 0 || ed.Constant(ed.node(dqw).inputs[0]) == nullptr) return false;
    }
    std::optional<Weight> w = MatchWeight(ed, core, is_conv, is_gemm, trans_b);
    if (!w) return false;
    const int64_t channels = ed.Constant(w->w)->shape().dim(is_conv ? 0 : 1);
    std::optional<int> bias = kNoValue;
    if ((is_conv || is_gemm) && core.has_input(2)) {
      bias = MatchBias(ed, core.inputs[2], channels, xp.s, w->s);
      if (!bias) return false;
    }
    std::vector<int> pattern = {c};
    int cur = core.outputs[0];
    if (!is_conv && !is_gemm) {
      // MatMul then Add of a constant [N] (or [1, ..., N]): the bias, as the ONNX Runtime
      // quantizer leaves it.
      const int add = SoleConsumer(ed, cur);
      if (add >= 0 && IsOnnxOp(ed.node(add), "Add") && ed.node(add).outputs.size() == 1) {
        const int other = OtherInput(ed.node(add), cur);
        std::optional<int> b = other != kNoValue && ed.Constant(other) != nullptr &&
                                       ed.Constant(other)->shape().rank() <=
                                           static_cast<int>(ed.value(cur).type.dims.size())
                                   ? MatchBias(ed, other, channels, xp.s, w->s)
                                   : std::nullopt;
        if (b) {
          bias = b;
          pattern.push_back(add);
          cur = ed.node(add).outputs[0];
        }
      }
    }
    std::optional<Activation> act = MatchActivation(ed, cur, opset);
    if (act) {
      pattern.push_back(act->node);
      cur = ed.node(act->node).outputs[0];
    }
    int y_scale = kNoValue, y_zero_point = kNoValue;
    const int q = SoleConsumer(ed, cur);
    if (q >= 0 && IsOnnxOp(ed.node(q), "QuantizeLinear") && ed.node(q).inputs[0] == cur &&
        ed.node(q).outputs.size() == 1) {
      if (std::optional<ScalarParams> yp = ScalarParamsOf(ed, ed.node(q))) {
        y_scale = yp->scale;
        y_zero_point = yp->zero_point;
        if (y_zero_point == kNoValue) {
          Result<OwnedTensor> z = OwnedTensor::Allocate(DataType::kUint8, Shape{});
          KILN_CHECK(z.ok(), z.status().ToString());
          y_zero_point = ed.AddConstant(ed.value(cur).name + "_zero_point", std::move(z).value());
        }
        pattern.push_back(q);
        cur = ed.node(q).outputs[0];
      }
    }
    Node fused;
    fused.name =
        core.name.empty() ? fmt::format("{}_int8", ed.value(cur).name) : core.name + "_int8";
    fused.domain = std::string(kKilnDomain);
    fused.op_type = std::string(is_conv ? kQConvOp : kQMatMulOp);
    fused.inputs = {xa.inputs[0],  xp.scale, xp.zero_point, w->w, w->scale,
                    w->zero_point, y_scale,  y_zero_point,  *bias};
    while (!fused.inputs.empty() && fused.inputs.back() == kNoValue) fused.inputs.pop_back();
    fused.outputs = {cur};
    if (is_conv) fused.attributes = core.attributes;
    if (act) {
      fused.attributes.push_back(Attribute::String("activation", act->name));
      if (!act->params.empty()) {
        fused.attributes.push_back(Attribute::Floats("activation_params", act->params));
      }
    }
    for (int p : pattern) ed.RemoveNode(p);
    ed.AddNode(std::move(fused));
    ImportKilnDomain(ed);
    return true;
  }

  // QLinearConv / QLinearMatMul are QConv / QMatMul with the same inputs (and no activation):
  // renamed, they join the channels-last choice below.
  static bool RenameQLinear(GraphEditor& ed, int n) {
    const Node& node = ed.node(n);
    const bool conv = IsOnnxOp(node, "QLinearConv"), matmul = IsOnnxOp(node, "QLinearMatMul");
    if (!conv && !matmul) return false;
    if (node.outputs.size() != 1 || node.inputs.size() < 8) return false;
    if (!IsQuant8(ed.DtypeOf(node.outputs[0]))) return false;
    // Within QConv / QMatMul's definition: scalar activation parameters, an INT8 weight (2-D for
    // the matmul) with one scale per tensor or per output channel.
    for (int i : {1, 2, 6, 7}) {
      const OwnedTensor* c = ed.Constant(node.inputs[static_cast<size_t>(i)]);
      if (c == nullptr || c->num_elements() != 1) return false;
    }
    const OwnedTensor* w = ed.Constant(node.inputs[3]);
    if (w == nullptr || w->dtype() != DataType::kInt8 || (matmul && w->shape().rank() != 2)) {
      return false;
    }
    Node q = node;
    q.domain = std::string(kKilnDomain);
    q.op_type = std::string(conv ? kQConvOp : kQMatMulOp);
    ed.RemoveNode(n);
    ed.AddNode(std::move(q));
    ImportKilnDomain(ed);
    return true;
  }

  // The zero point input of a QDQ node's parameters, made explicit (a zero of `type`) when the
  // node omits it.
  static int ExplicitZeroPoint(GraphEditor& ed, const ScalarParams& p, DataType type,
                               std::string_view base) {
    if (p.zero_point != kNoValue) return p.zero_point;
    Result<OwnedTensor> z = OwnedTensor::Allocate(type, Shape{});
    KILN_CHECK(z.ok(), z.status().ToString());
    return ed.AddConstant(std::string(base) + "_zero_point", std::move(z).value());
  }

  // DequantizeLinear x2 -> Add [-> Relu/Clip] -> QuantizeLinear, all scalar parameters and
  // provably equal shapes, becomes QAdd.
  static bool FuseAdd(GraphEditor& ed, int add, int opset) {
    const Node n = ed.node(add);
    if (n.inputs.size() != 2 || n.outputs.size() != 1 || !IsFloat32(ed, n.outputs[0])) {
      return false;
    }
    int dq[2];
    ScalarParams p[2];
    for (int k = 0; k < 2; ++k) {
      dq[k] = ed.ProducerOf(n.inputs[static_cast<size_t>(k)], "DequantizeLinear");
      if (dq[k] < 0) return false;
      const Node& d = ed.node(dq[k]);
      const DataType t = ed.DtypeOf(d.inputs[0]);
      std::optional<ScalarParams> sp = ScalarParamsOf(ed, d);
      if (!IsQuant8(t) || !sp || (sp->zero_point != kNoValue && sp->type != t)) return false;
      p[k] = *sp;
      p[k].type = t;
    }
    const ValueType& out_type = ed.value(n.outputs[0]).type;
    if (!SameStaticShape(ed.value(n.inputs[0]).type, ed.value(n.inputs[1]).type) ||
        !SameStaticShape(ed.value(n.inputs[0]).type, out_type)) {
      return false;
    }
    std::vector<int> pattern = {add};
    int cur = n.outputs[0];
    std::optional<Activation> act = MatchActivation(ed, cur, opset);
    if (act) {
      pattern.push_back(act->node);
      cur = ed.node(act->node).outputs[0];
    }
    const int q = SoleConsumer(ed, cur);
    if (q < 0 || !IsOnnxOp(ed.node(q), "QuantizeLinear") || ed.node(q).inputs[0] != cur ||
        ed.node(q).outputs.size() != 1) {
      return false;
    }
    std::optional<ScalarParams> yp = ScalarParamsOf(ed, ed.node(q));
    if (!yp) return false;
    pattern.push_back(q);
    Node fused;
    fused.name = n.name.empty() ? fmt::format("{}_int8", ed.value(cur).name) : n.name + "_int8";
    fused.domain = std::string(kKilnDomain);
    fused.op_type = std::string(kQAddOp);
    for (int k = 0; k < 2; ++k) {
      const int x = ed.node(dq[k]).inputs[0];
      fused.inputs.push_back(x);
      fused.inputs.push_back(p[k].scale);
      fused.inputs.push_back(ExplicitZeroPoint(ed, p[k], p[k].type, ed.value(x).name));
    }
    fused.inputs.push_back(yp->scale);
    fused.inputs.push_back(ExplicitZeroPoint(ed, *yp, yp->type, ed.value(cur).name));
    fused.outputs = {ed.node(q).outputs[0]};
    if (act) {
      fused.attributes.push_back(Attribute::String("activation", act->name));
      if (!act->params.empty()) {
        fused.attributes.push_back(Attribute::Floats("activation_params", act->params));
      }
    }
    for (int r : pattern) ed.RemoveNode(r);
    ed.AddNode(std::move(fused));
    ImportKilnDomain(ed);
    return true;
  }

  // Keeps INT8 tensors between quantized convs in channels-last layout: see the file comment.
  static int SelectChannelsLast(GraphEditor& ed) {
    std::vector<int> nodes = ed.LiveNodes();
    for (int n : nodes) {
      const Node& node = ed.node(n);
      if (IsKilnOp(node, kQConvOp) &&
          (node.FindAttribute("x_channels_last") || node.FindAttribute("y_channels_last"))) {
        return 0;  // chosen in an earlier round
      }
    }
    // Union-find over values; QAdd ties its operands and output to one layout.
    std::map<int, int> parent;
    std::function<int(int)> find = [&](int v) {
      auto it = parent.find(v);
      if (it == parent.end()) return parent[v] = v;
      return it->second == v ? v : (it->second = find(it->second));
    };
    auto unite = [&](int a, int b) { parent[find(a)] = find(b); };
    std::set<int> eligible;  // INT8 rank 3..5 outputs of QConv / QAdd, not graph outputs
    for (int n : nodes) {
      const Node& node = ed.node(n);
      const bool conv = IsKilnOp(node, kQConvOp), add = IsKilnOp(node, kQAddOp);
      if (!conv && !add) continue;
      const int out = node.outputs[0];
      const ValueType& t = ed.value(out).type;
      find(out);
      if (add) {
        unite(node.inputs[0], out);
        unite(node.inputs[3], out);
      }
      if (IsQuant8(t.dtype) && t.has_shape && t.dims.size() >= 3 && t.dims.size() <= 5 &&
          !ed.IsGraphOutput(out) && (add || node.has_input(6))) {
        eligible.insert(out);
      }
    }
    // A group goes channels-last when all its values are eligible and a QConv reads one of them.
    std::map<int, bool> group_ok, group_used;
    for (const auto& [v, unused] : parent) {
      const int g = find(v);
      if (!group_ok.count(g)) group_ok[g] = true;
      if (!eligible.count(v)) group_ok[g] = false;
      for (int r : ed.Consumers(v)) {
        if (IsKilnOp(ed.node(r), kQConvOp) && ed.node(r).inputs[0] == v) group_used[g] = true;
      }
    }
    int changes = 0;
    for (const auto& [v, unused] : parent) {
      const int g = find(v);
      if (!group_ok[g] || !group_used[g]) continue;
      ToChannelsLast(ed, v);
      ++changes;
    }
    return changes;
  }

  static bool IsKilnOp(const Node& n, std::string_view op) {
    return n.domain == kKilnDomain && n.op_type == op;
  }

  static void SetIntAttribute(GraphEditor& ed, int node, std::string_view name, int64_t value) {
    std::vector<Attribute>& attrs = ed.graph().mutable_node(node).attributes;
    for (Attribute& a : attrs) {
      if (a.name == name) {
        a = Attribute::Int(std::string(name), value);
        return;
      }
    }
    attrs.push_back(Attribute::Int(std::string(name), value));
  }

  // Value `v` (produced by a QConv or QAdd) becomes channels-last: its declared dims, its
  // producer's and QConv readers' flags; any other reader gets a Transpose back.
  static void ToChannelsLast(GraphEditor& ed, int v) {
    const int producer = ed.Producer(v);
    if (IsKilnOp(ed.node(producer), kQConvOp)) SetIntAttribute(ed, producer, "y_channels_last", 1);
    const ValueType first = ed.value(v).type;
    std::vector<Dim>& dims = ed.graph().mutable_value(v).type.dims;
    std::rotate(dims.begin() + 1, dims.begin() + 2, dims.end());
    const int rank = static_cast<int>(dims.size());
    int back = kNoValue;
    const std::vector<int> readers = ed.Consumers(v);
    for (int r : readers) {
      const Node& node = ed.node(r);
      if (IsKilnOp(node, kQAddOp)) continue;
      if (IsKilnOp(node, kQConvOp) && node.inputs[0] == v &&
          std::count(node.inputs.begin(), node.inputs.end(), v) == 1) {
        SetIntAttribute(ed, r, "x_channels_last", 1);
        continue;
      }
      if (back == kNoValue) {
        back = ed.AddValue(ed.value(v).name + "_nchw", first);
        Node t;
        t.name = ed.value(back).name;
        t.op_type = "Transpose";
        t.inputs = {v};
        t.outputs = {back};
        std::vector<int64_t> perm = {0, rank - 1};
        for (int i = 1; i < rank - 1; ++i) perm.push_back(i);
        t.attributes = {Attribute::Ints("perm", perm)};
        ed.AddNode(std::move(t));
      }
      const std::vector<int> ins = ed.node(r).inputs;
      for (size_t i = 0; i < ins.size(); ++i) {
        if (ins[i] == v) ed.SetInput(r, static_cast<int>(i), back);
      }
    }
  }

  // QuantizeLinear(DequantizeLinear(q, s, z), s, z) -> q.
  static int RemoveRequantizeIdentities(GraphEditor& ed) {
    int changes = 0;
    for (int n : ed.LiveNodes()) {
      const Node& qn = ed.node(n);
      if (!IsOnnxOp(qn, "QuantizeLinear") || qn.outputs.size() != 1 || !qn.has_input(0)) continue;
      const int out = qn.outputs[0];
      if (ed.IsGraphOutput(out)) continue;
      const int dq = ed.ProducerOf(qn.inputs[0], "DequantizeLinear");
      if (dq < 0) continue;
      const Node& dn = ed.node(dq);
      std::optional<ScalarParams> a = ScalarParamsOf(ed, dn);
      std::optional<ScalarParams> b = ScalarParamsOf(ed, qn);
      if (!a || !b || a->s != b->s || a->z != b->z || a->type != b->type) continue;
      if (ed.DtypeOf(dn.inputs[0]) != b->type) continue;
      ed.ReplaceUses(out, dn.inputs[0]);
      ed.RemoveNode(n);
      ++changes;
    }
    return changes;
  }
};

}  // namespace

bool IsQuantizedOperandDequantize(const GraphEditor& ed, int node) {
  const Node& n = ed.node(node);
  if (!IsOnnxOp(n, "DequantizeLinear") || n.outputs.size() != 1 || !n.has_input(0)) return false;
  const OwnedTensor* c = ed.Constant(n.inputs[0]);
  if (c == nullptr || (c->dtype() != DataType::kInt8 && c->dtype() != DataType::kInt32)) {
    return false;
  }
  if (c->dtype() == DataType::kInt8 && !HasZeroWeightZeroPoint(ed, n)) return false;
  for (int reader : ed.Consumers(n.outputs[0])) {
    const Node& r = ed.node(reader);
    if (!IsQuantCore(r) || !r.has_input(0) || r.inputs[0] == n.outputs[0]) continue;
    if (ActivationDequantize(ed, r) >= 0) return true;
  }
  return false;
}

std::unique_ptr<Pass> CreateQdqFusionPass() { return std::make_unique<QdqFusionPass>(); }

}  // namespace kiln::opt
