// SPDX-License-Identifier: Apache-2.0
// bias_activation_fusion: Conv / Gemm / MatMul followed by a bias Add, a residual Add and an
// activation becomes ai.kiln FusedConv / FusedGemm / FusedMatMul (op/kiln_ops.h).
//
// NOTE: matched forward from the core node, each step only through a value with one reader that
// is not a graph output:
//   1. up to two Adds. An Add of a constant is a bias when it is per output channel: Conv, a
//      constant of M elements shaped [M,1,...] or [1,M,1,...] (added to B, or becoming B); Gemm
//      without C, a constant [N] or [1,N] (becomes C with beta 1); MatMul, a constant [N] or
//      [1,...,N] with N the output's last dim (becomes Bias). Any other Add operand is the
//      residual Z when the declared shapes of Z, the core output and the sum are provably equal
//      (one Z at most).
//   2. one activation: Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid, HardSwish, Clip (constant
//      bounds), ai.kiln Gelu (either form), SiLU written as Mul(y, Sigmoid(y)), or HardSwish
//      written as Mul(y, HardSigmoid(y)) with alpha 1/6 and beta 0.5 (opset-13 exports).
// Nothing is fused unless at least one step matched. The core output must be FP32.

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

struct Act {
  std::string_view name;
  std::vector<float> params;
  std::vector<int> nodes;
  int out = kNoValue;
};

// The activation reading `cur` (its only reader), or nullopt.
std::optional<Act> MatchActivation(const GraphEditor& ed, int cur, int opset) {
  if (ed.IsGraphOutput(cur)) return std::nullopt;
  const std::vector<int>& readers = ed.Consumers(cur);
  if (readers.size() == 2) {
    // SiLU: Mul(cur, Sigmoid(cur)); HardSwish as opset-13 exports write it:
    // Mul(cur, HardSigmoid(cur, alpha 1/6, beta 0.5)).
    int sig = -1, mul = -1;
    std::string_view name;
    for (int r : readers) {
      const Node& n = ed.node(r);
      if (IsOnnxOp(n, "Sigmoid")) {
        sig = r;
        name = kActivationSilu;
      } else if (IsOnnxOp(n, "HardSigmoid") && n.GetFloat("alpha", 0.2f) == 1.0f / 6.0f &&
                 n.GetFloat("beta", 0.5f) == 0.5f) {
        sig = r;
        name = kActivationHardSwish;
      }
      if (IsOnnxOp(n, "Mul")) mul = r;
    }
    if (sig < 0 || mul < 0 || ed.node(sig).inputs.empty() || ed.node(sig).inputs[0] != cur) {
      return std::nullopt;
    }
    const int s_out = ed.node(sig).outputs[0];
    if (OtherInput(ed.node(mul), cur) != s_out || !ed.OnlyFeeds(s_out, mul)) return std::nullopt;
    return Act{name, {}, {sig, mul}, ed.node(mul).outputs[0]};
  }
  if (readers.size() != 1) return std::nullopt;
  const int r = readers[0];
  const Node& n = ed.node(r);
  if (n.inputs.empty() || n.inputs[0] != cur) return std::nullopt;
  Act act{kActivationNone, {}, {r}, n.outputs.empty() ? kNoValue : n.outputs[0]};
  if (n.domain == "ai.kiln" && n.op_type == kGeluOp) {
    act.name = n.GetString("approximate", "none") == "tanh" ? kActivationGeluTanh : kActivationGelu;
    return act;
  }
  if (!n.domain.empty()) return std::nullopt;
  if (n.op_type == "Relu")
    act.name = kActivationRelu;
  else if (n.op_type == "Sigmoid")
    act.name = kActivationSigmoid;
  else if (n.op_type == "Tanh")
    act.name = kActivationTanh;
  else if (n.op_type == "HardSwish")
    act.name = kActivationHardSwish;
  else if (n.op_type == "LeakyRelu") {
    act.name = kActivationLeakyRelu;
    act.params = {n.GetFloat("alpha", 0.01f)};
  } else if (n.op_type == "HardSigmoid") {
    act.name = kActivationHardSigmoid;
    act.params = {n.GetFloat("alpha", 0.2f), n.GetFloat("beta", 0.5f)};
  } else if (n.op_type == "Clip") {
    std::optional<std::pair<float, float>> bounds = ClipBounds(ed, n, opset);
    if (!bounds) return std::nullopt;
    act.name = kActivationClip;
    act.params = {bounds->first, bounds->second};
  } else {
    return std::nullopt;
  }
  return act;
}

// The constant `c` as a per-channel vector of `m` values when its shape is [m], or [m] padded
// with 1s to the given layouts; nullopt otherwise.
std::optional<std::vector<float>> ChannelVector(const GraphEditor& ed, int c, int64_t m,
                                                int channel_axis_from_back, int max_rank) {
  const OwnedTensor* t = ed.Constant(c);
  if (t == nullptr || t->dtype() != DataType::kFloat32 || t->num_elements() != m) {
    return std::nullopt;
  }
  const Shape& s = t->shape();
  if (s.rank() > max_rank || s.rank() < 1) return std::nullopt;
  // Exactly one dim may differ from 1 (unless m == 1): the one at channel_axis_from_back.
  const int axis = s.rank() - 1 - channel_axis_from_back;
  if (axis < 0) return std::nullopt;
  for (int i = 0; i < s.rank(); ++i) {
    if (i != axis && s.dim(i) != 1) return std::nullopt;
  }
  if (s.dim(axis) != m) return std::nullopt;
  const float* p = t->data<const float>();
  return std::vector<float>(p, p + m);
}

class BiasActivationFusionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    const int opset = static_cast<int>(ed.graph().OpsetFor(""));
    for (int c : ed.LiveNodes()) {
      if (!ed.alive(c)) continue;
      const Node core = ed.node(c);
      const bool is_conv = IsOnnxOp(core, "Conv");
      const bool is_gemm = IsOnnxOp(core, "Gemm");
      const bool is_matmul = IsOnnxOp(core, "MatMul");
      if (!is_conv && !is_gemm && !is_matmul) continue;
      if (core.outputs.size() != 1 || !IsFloat32(ed, core.outputs[0])) continue;
      if (core.num_present_inputs() < 2) continue;
      std::vector<int> pattern = {c};
      std::vector<int> inputs(core.inputs.begin(), core.inputs.begin() + core.num_present_inputs());
      std::vector<Attribute> attrs = core.attributes;
      int bias = kNoValue;  // MatMul's Bias
      int z = kNoValue;
      int cur = core.outputs[0];
      const ValueType core_type = ed.value(cur).type;
      // Output channels (Conv: W's dim 0) / last dim N (Gemm, MatMul), when known.
      int64_t channels = -1;
      if (is_conv) {
        if (const OwnedTensor* w = ed.Constant(core.inputs[1])) channels = w->shape().dim(0);
      } else if (core_type.has_shape && !core_type.dims.empty() && core_type.dims.back().known()) {
        channels = core_type.dims.back().value;
      }
      for (int step = 0; step < 2; ++step) {
        const int add = SoleConsumer(ed, cur);
        if (add < 0 || !IsOnnxOp(ed.node(add), "Add")) break;
        const int other = OtherInput(ed.node(add), cur);
        if (other == kNoValue) break;
        const int add_out = ed.node(add).outputs[0];
        bool took = false;
        if (ed.Constant(other) != nullptr && channels > 0) {
          if (is_conv) {
            // Conv's output has W's rank.
            const int rank = ed.Constant(core.inputs[1])->shape().rank();
            std::optional<std::vector<float>> v;
            if (rank >= 3) v = ChannelVector(ed, other, channels, rank - 2, rank);
            if (v) {
              std::vector<float> b(static_cast<size_t>(channels), 0.0f);
              bool ok = true;
              if (inputs.size() > 2) {
                const OwnedTensor* old = ed.Constant(inputs[2]);
                if (old == nullptr || old->dtype() != DataType::kFloat32 ||
                    old->num_elements() != channels) {
                  ok = false;
                } else {
                  for (int64_t i = 0; i < channels; ++i) b[size_t(i)] = old->data<const float>()[i];
                }
              }
              if (ok) {
                for (int64_t i = 0; i < channels; ++i) b[size_t(i)] += (*v)[size_t(i)];
                const int b_id = ed.AddConstant(ed.value(other).name + "_convbias",
                                                MakeFloatTensor(Shape{channels}, b));
                inputs.resize(3);
                inputs[2] = b_id;
                took = true;
              }
            }
          } else if (is_gemm && inputs.size() == 2) {
            std::optional<std::vector<float>> v = ChannelVector(ed, other, channels, 0, 2);
            if (v) {
              inputs.push_back(other);
              attrs.erase(std::remove_if(attrs.begin(), attrs.end(),
                                         [](const Attribute& a) { return a.name == "beta"; }),
                          attrs.end());
              attrs.push_back(Attribute::Float("beta", 1.0f));
              took = true;
            }
          } else if (is_matmul && bias == kNoValue && core_type.has_shape) {
            std::optional<std::vector<float>> v =
                ChannelVector(ed, other, channels, 0, static_cast<int>(core_type.dims.size()));
            if (v) {
              bias = ed.Constant(other)->shape().rank() == 1
                         ? other
                         : ed.AddConstant(ed.value(other).name + "_bias1d",
                                          MakeFloatTensor(Shape{channels}, *v));
              took = true;
            }
          }
        }
        if (!took && z == kNoValue && ed.Constant(other) == nullptr &&
            SameStaticShape(ed.value(other).type, core_type) &&
            SameStaticShape(ed.value(add_out).type, core_type) && IsFloat32(ed, other)) {
          z = other;
          took = true;
        }
        if (!took) break;
        pattern.push_back(add);
        cur = add_out;
      }
      std::optional<Act> act = MatchActivation(ed, cur, opset);
      if (act && act->out != kNoValue) {
        pattern.insert(pattern.end(), act->nodes.begin(), act->nodes.end());
        cur = act->out;
      } else {
        act.reset();
      }
      if (pattern.size() == 1) continue;
      Node fused;
      fused.name =
          core.name.empty() ? fmt::format("{}_fused", ed.value(cur).name) : core.name + "_fused";
      fused.domain = std::string(kKilnDomain);
      fused.op_type = std::string(is_conv ? kFusedConvOp : is_gemm ? kFusedGemmOp : kFusedMatMulOp);
      fused.inputs = inputs;
      if (is_matmul) {
        fused.inputs.resize(2);
        fused.inputs.push_back(bias);
      } else {
        fused.inputs.resize(3, kNoValue);
      }
      fused.inputs.push_back(z);
      while (!fused.inputs.empty() && fused.inputs.back() == kNoValue) fused.inputs.pop_back();
      fused.outputs = {cur};
      fused.attributes = attrs;
      if (act) {
        fused.attributes.push_back(Attribute::String("activation", std::string(act->name)));
        if (!act->params.empty()) {
          fused.attributes.push_back(Attribute::Floats("activation_params", act->params));
        }
      }
      for (int p : pattern) ed.RemoveNode(p);
      ed.AddNode(std::move(fused));
      ImportKilnDomain(ed);
      ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateBiasActivationFusionPass() {
  return std::make_unique<BiasActivationFusionPass>();
}

}  // namespace kiln::opt
