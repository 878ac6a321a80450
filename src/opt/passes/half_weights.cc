// SPDX-License-Identifier: Apache-2.0
// half_weights: with a half weight precision (OptimizerOptions::weight_precision "fp16" / "bf16",
// or auto-detected from a model that stores its weights so), the constant weights of Conv,
// MatMul, Gemm and their ai.kiln Fused forms are stored as FLOAT16 / BFLOAT16 initializers,
// halving their memory; the kernels widen them to FP32 as they use them (op/kiln_ops.h).
//
// NOTE: a weight (Conv / FusedConv W, MatMul / FusedMatMul B, Gemm / FusedGemm B: input 1) is
// narrowed when it is a FLOAT initializer of at least kMinElements elements (smaller ones save
// nothing worth a conversion per call) that is not a graph input or output and that every reader
// reads as such a weight input only (a constant also read as data must stay FP32). Values are
// rounded to nearest even (tensor/dtype.h). Plain Conv / MatMul / Gemm readers become the
// equivalent ai.kiln op with no activation, so only kiln's ops carry half weights; biases stay
// FP32. The pass is final (Pass::Final): it runs once, after the other passes' rounds, so none of
// them ever sees a 16-bit weight.

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "op/kiln_ops.h"
#include "opt/optimizer.h"
#include "opt/pass.h"

namespace kiln::opt {
namespace {

constexpr int64_t kMinElements = kHalfWeightMinElements;

// Whether `node` has a weight input 1 this pass may narrow, and which ai.kiln op it becomes.
bool IsWeightOp(const Node& node, std::string_view* fused_op) {
  if (node.domain.empty()) {
    if (node.op_type == "Conv") {
      *fused_op = kFusedConvOp;
    } else if (node.op_type == "MatMul") {
      *fused_op = kFusedMatMulOp;
    } else if (node.op_type == "Gemm") {
      // Only Gemm's current attributes carry over (opset <= 6 had `broadcast`).
      for (const Attribute& a : node.attributes) {
        if (a.name != "alpha" && a.name != "beta" && a.name != "transA" && a.name != "transB") {
          return false;
        }
      }
      *fused_op = kFusedGemmOp;
    } else {
      return false;
    }
    return true;
  }
  if (node.domain != kKilnDomain) return false;
  if (node.op_type == kFusedConvOp || node.op_type == kFusedMatMulOp ||
      node.op_type == kFusedGemmOp) {
    *fused_op = node.op_type;
    return true;
  }
  return false;
}

Result<OwnedTensor> Narrow(const OwnedTensor& w, DataType dt) {
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(dt, w.shape()));
  const float* p = w.data<const float>();
  uint16_t* q = static_cast<uint16_t*>(out.raw_data());
  const int64_t n = w.num_elements();
  if (dt == DataType::kFloat16) {
    for (int64_t i = 0; i < n; ++i) q[i] = FloatToFloat16(p[i]).bits;
  } else {
    for (int64_t i = 0; i < n; ++i) q[i] = FloatToBFloat16(p[i]).bits;
  }
  return out;
}

class HalfWeightsPass final : public Pass {
 public:
  // Once, after the fixpoint: no other pass sees a 16-bit weight (fusions and type propagation
  // work on the FP32 graph in every round).
  bool Final() const override { return true; }

  Result<int> Run(GraphEditor& ed, const OptimizerOptions& options) const override {
    DataType dt;
    if (options.weight_precision == "fp16") {
      dt = DataType::kFloat16;
    } else if (options.weight_precision == "bf16") {
      dt = DataType::kBFloat16;
    } else {
      return 0;  // "fp32" (OptimizeGraph resolves "" before the passes run)
    }
    // Weight values and the nodes that read them as weights.
    std::map<int, std::vector<int>> weights;
    for (int n : ed.LiveNodes()) {
      const Node& node = ed.node(n);
      std::string_view fused_op;
      if (!IsWeightOp(node, &fused_op) || !node.has_input(0) || !node.has_input(1)) continue;
      if (ed.DtypeOf(node.inputs[0]) != DataType::kFloat32) continue;
      const int w = node.inputs[1];
      const OwnedTensor* c = ed.Constant(w);
      if (c == nullptr || c->dtype() != DataType::kFloat32 || c->num_elements() < kMinElements) {
        continue;
      }
      weights[w].push_back(n);
    }
    int changes = 0;
    for (const auto& [w, readers] : weights) {
      if (ed.IsGraphInput(w) || ed.IsGraphOutput(w)) continue;
      const std::vector<int>& consumers = ed.Consumers(w);
      bool only_weight = consumers.size() == readers.size();
      for (int n : readers) {
        const Node& node = ed.node(n);
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          if (i != 1 && node.inputs[i] == w) only_weight = false;
        }
      }
      if (!only_weight) continue;
      KILN_ASSIGN_OR_RETURN(OwnedTensor narrowed, Narrow(*ed.Constant(w), dt));
      const int half = ed.AddConstant(ed.value(w).name, std::move(narrowed));
      for (int n : readers) {
        Node node = ed.node(n);
        std::string_view fused_op;
        IsWeightOp(node, &fused_op);
        node.inputs[1] = half;
        if (node.domain.empty()) {
          node.domain = std::string(kKilnDomain);
          node.op_type = std::string(fused_op);
        }
        ed.RemoveNode(n);
        ed.AddNode(std::move(node));
        ++changes;
      }
      ImportKilnDomain(ed);
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateHalfWeightsPass() { return std::make_unique<HalfWeightsPass>(); }

}  // namespace kiln::opt
