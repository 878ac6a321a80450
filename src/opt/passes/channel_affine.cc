// SPDX-License-Identifier: Apache-2.0
// channel_affine_fusion: inference BatchNormalization becomes ai.kiln ChannelAffine
// (op/kiln_ops.h), and the activation that follows a ChannelAffine joins it.
//
// NOTE on the approach. A BatchNormalization right after a convolution is folded into it
// (conv_bn_folding), and one inside a blocked region becomes a ChannelAffine on the blocked
// tensors (layout_selection). What is left runs here, after both: a BatchNormalization with
// FP32 constant statistics of X's channel count (known from X's type) and only Y read becomes a
// plain ChannelAffine (block 0) with the folded scale and shift (FoldBatchNorm: in double,
// stored as FP32). Then a ChannelAffine without an activation whose output is read only by a
// Relu, LeakyRelu, Clip (constant bounds), Sigmoid, HardSigmoid, HardSwish, Tanh or ai.kiln
// Gelu, and is not a graph output, takes that activation: DenseNet's BN -> ReLU before every
// convolution becomes one pass over the tensor instead of two (or three). Works on plain and
// blocked tensors alike (the activation is elementwise; the padding lanes are written as zeros
// either way).

#include <optional>
#include <string>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

struct FusedAct {
  std::string name;
  std::vector<float> params;
};

// The activation node `n` applies to its only input, in ai.kiln terms; nullopt when it is not
// one.
std::optional<FusedAct> AsActivation(const GraphEditor& ed, const Node& n, int64_t opset) {
  if (n.outputs.size() != 1) return std::nullopt;
  if (n.domain == kKilnDomain && n.op_type == kGeluOp) {
    const std::string approx = n.GetString("approximate", "none");
    if (approx == "none") return FusedAct{std::string(kActivationGelu), {}};
    if (approx == "tanh") return FusedAct{std::string(kActivationGeluTanh), {}};
    return std::nullopt;
  }
  if (!n.domain.empty()) return std::nullopt;
  if (n.op_type == "Relu") return FusedAct{std::string(kActivationRelu), {}};
  if (n.op_type == "Sigmoid") return FusedAct{std::string(kActivationSigmoid), {}};
  if (n.op_type == "Tanh") return FusedAct{std::string(kActivationTanh), {}};
  if (n.op_type == "HardSwish") return FusedAct{std::string(kActivationHardSwish), {}};
  if (n.op_type == "LeakyRelu") {
    return FusedAct{std::string(kActivationLeakyRelu), {n.GetFloat("alpha", 0.01f)}};
  }
  if (n.op_type == "HardSigmoid") {
    return FusedAct{std::string(kActivationHardSigmoid),
                    {n.GetFloat("alpha", 0.2f), n.GetFloat("beta", 0.5f)}};
  }
  if (n.op_type == "Clip") {
    std::optional<std::pair<float, float>> bounds = ClipBounds(ed, n, opset);
    if (!bounds) return std::nullopt;
    return FusedAct{std::string(kActivationClip), {bounds->first, bounds->second}};
  }
  return std::nullopt;
}

bool IsChannelAffine(const Node& n) {
  return n.domain == kKilnDomain && n.op_type == kChannelAffineOp;
}

class ChannelAffineFusionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    const int64_t opset = ed.graph().OpsetFor("");
    int changes = 0;
    bool imported = false;
    for (int id : ed.LiveNodes()) {
      if (!ed.alive(id)) continue;
      const Node& n = ed.node(id);
      // Standalone BatchNormalization -> ChannelAffine.
      if (IsOnnxOp(n, "BatchNormalization") && !n.inputs.empty() && n.inputs[0] != kNoValue &&
          IsFloat32(ed, n.inputs[0]) && !n.outputs.empty() && n.outputs[0] != kNoValue) {
        const ValueType& xt = ed.value(n.inputs[0]).type;
        if (!xt.has_shape || xt.dims.size() < 2 || !xt.dims[1].known()) continue;
        const int64_t channels = xt.dims[1].value;
        std::optional<ChannelScaleShift> st = FoldBatchNorm(ed, n, channels);
        if (!st) continue;
        const Shape shape{channels};
        Node affine;
        affine.name = n.name;
        affine.domain = std::string(kKilnDomain);
        affine.op_type = std::string(kChannelAffineOp);
        affine.inputs = {n.inputs[0],
                         ed.AddConstant(n.name + "_scale", MakeFloatTensor(shape, st->scale)),
                         ed.AddConstant(n.name + "_shift", MakeFloatTensor(shape, st->shift))};
        affine.outputs = {n.outputs[0]};
        ed.RemoveNode(id);
        ed.AddNode(std::move(affine));
        imported = true;
        ++changes;
      }
    }
    // ChannelAffine -> activation.
    for (int id : ed.LiveNodes()) {
      if (!ed.alive(id)) continue;
      const Node& n = ed.node(id);
      if (!IsChannelAffine(n) || n.FindAttribute("activation") != nullptr) continue;
      const int act_id = SoleConsumer(ed, n.outputs[0]);
      if (act_id < 0) continue;
      const Node& act_node = ed.node(act_id);
      if (act_node.inputs.empty() || act_node.inputs[0] != n.outputs[0]) continue;
      std::optional<FusedAct> act = AsActivation(ed, act_node, opset);
      if (!act) continue;
      Node fused = n;
      fused.outputs = {act_node.outputs[0]};
      fused.attributes.push_back(Attribute::String("activation", act->name));
      if (!act->params.empty()) {
        fused.attributes.push_back(Attribute::Floats("activation_params", act->params));
      }
      ed.RemoveNode(act_id);
      ed.RemoveNode(id);
      ed.AddNode(std::move(fused));
      ++changes;
    }
    if (imported) ImportKilnDomain(ed);
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateChannelAffineFusionPass() {
  return std::make_unique<ChannelAffineFusionPass>();
}

}  // namespace kiln::opt
