// SPDX-License-Identifier: Apache-2.0
// conv_bn_folding: Conv(X, W, B?) -> BatchNormalization(scale, bias, mean, var) becomes one Conv
// with W'[m] = W[m] * s[m] and B'[m] = (B[m] - mean[m]) * s[m] + bias[m], where
// s = scale / sqrt(var + epsilon).
//
// NOTE: applies when W, B and the four statistics are FP32 constants of the right lengths, the
// Conv output is read only by the BatchNormalization and is not a graph output, and the
// BatchNormalization is in inference form (only Y used; training_mode absent or 0). The new
// weights are computed in double and stored as FP32.

#include <cmath>

#include "opt/pass.h"

namespace kiln::opt {
namespace {

class ConvBnFoldingPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    for (int n : ed.LiveNodes()) {
      if (!ed.alive(n)) continue;
      const Node bn = ed.node(n);
      if (bn.op_type != "BatchNormalization" || !bn.domain.empty()) continue;
      if (bn.num_present_inputs() != 5 || bn.GetInt("training_mode", 0) != 0) continue;
      bool extra_outputs = false;
      for (size_t i = 1; i < bn.outputs.size(); ++i) {
        if (bn.outputs[i] != kNoValue) extra_outputs = true;
      }
      if (extra_outputs || bn.outputs.empty()) continue;
      const int conv_id = ed.ProducerOf(bn.inputs[0], "Conv");
      if (conv_id < 0 || !ed.OnlyFeeds(bn.inputs[0], n)) continue;
      const Node conv = ed.node(conv_id);
      const OwnedTensor* w = ed.Constant(conv.inputs[1]);
      if (w == nullptr || w->dtype() != DataType::kFloat32 || w->shape().rank() < 3) continue;
      const int64_t m = w->shape().dim(0);
      const OwnedTensor* b = conv.has_input(2) ? ed.Constant(conv.inputs[2]) : nullptr;
      if (conv.has_input(2) &&
          (b == nullptr || b->dtype() != DataType::kFloat32 || b->num_elements() != m)) {
        continue;
      }
      const OwnedTensor* stats[4];
      bool ok = true;
      for (int i = 0; i < 4; ++i) {
        stats[i] = ed.Constant(bn.inputs[static_cast<size_t>(i) + 1]);
        if (stats[i] == nullptr || stats[i]->dtype() != DataType::kFloat32 ||
            stats[i]->num_elements() != m) {
          ok = false;
        }
      }
      if (!ok) continue;
      const double eps = bn.GetFloat("epsilon", 1e-5f);
      const float* scale = stats[0]->data<const float>();
      const float* shift = stats[1]->data<const float>();
      const float* mean = stats[2]->data<const float>();
      const float* var = stats[3]->data<const float>();
      const int64_t per_m = w->num_elements() / m;
      std::vector<float> new_w(static_cast<size_t>(w->num_elements()));
      std::vector<float> new_b(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) {
        const double s =
            static_cast<double>(scale[i]) / std::sqrt(static_cast<double>(var[i]) + eps);
        for (int64_t k = 0; k < per_m; ++k) {
          new_w[static_cast<size_t>(i * per_m + k)] =
              static_cast<float>(w->data<const float>()[i * per_m + k] * s);
        }
        const double bias = b ? b->data<const float>()[i] : 0.0;
        new_b[static_cast<size_t>(i)] = static_cast<float>((bias - mean[i]) * s + shift[i]);
      }
      const int w_id = ed.AddConstant(ed.value(conv.inputs[1]).name + "_bnfold",
                                      MakeFloatTensor(w->shape(), new_w));
      const int b_id = ed.AddConstant(ed.value(conv.inputs[1]).name + "_bnfold_bias",
                                      MakeFloatTensor(Shape{m}, new_b));
      Node fused = conv;
      fused.inputs = {conv.inputs[0], w_id, b_id};
      fused.outputs = {bn.outputs[0]};
      ed.RemoveNode(n);
      ed.RemoveNode(conv_id);
      ed.AddNode(std::move(fused));
      ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateConvBnFoldingPass() { return std::make_unique<ConvBnFoldingPass>(); }

}  // namespace kiln::opt
