// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small matching helpers shared by the fusion passes (internal to src/opt/passes).

#include <cfloat>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "opt/graph_editor.h"

namespace kiln::opt {

inline bool IsOnnxOp(const Node& n, std::string_view op) {
  return n.domain.empty() && n.op_type == op;
}

// For a two-input node with one single-element constant input: (the other input, the constant).
// `constant_second_only`: only the second input may be the constant (Div, Sub, Pow).
inline std::optional<std::pair<int, double>> SplitScalar(const GraphEditor& ed, const Node& n,
                                                         bool constant_second_only = false) {
  if (n.inputs.size() != 2 || n.inputs[0] == kNoValue || n.inputs[1] == kNoValue) {
    return std::nullopt;
  }
  if (std::optional<double> c = ed.ScalarConstant(n.inputs[1])) {
    return std::make_pair(n.inputs[0], *c);
  }
  if (constant_second_only) return std::nullopt;
  if (std::optional<double> c = ed.ScalarConstant(n.inputs[0])) {
    return std::make_pair(n.inputs[1], *c);
  }
  return std::nullopt;
}

// The constant bounds of a Clip node (attributes before opset 11, constant inputs since); an
// absent bound is -FLT_MAX / FLT_MAX. nullopt when a bound input is not a scalar constant.
inline std::optional<std::pair<float, float>> ClipBounds(const GraphEditor& ed, const Node& n,
                                                         int64_t opset) {
  float lo = -FLT_MAX, hi = FLT_MAX;
  if (opset < 11) {
    lo = n.GetFloat("min", lo);
    hi = n.GetFloat("max", hi);
    return std::pair<float, float>{lo, hi};
  }
  for (int i = 1; i <= 2; ++i) {
    if (!n.has_input(i)) continue;
    std::optional<double> c = ed.ScalarConstant(n.inputs[static_cast<size_t>(i)]);
    if (!c) return std::nullopt;
    (i == 1 ? lo : hi) = static_cast<float>(*c);
  }
  return std::pair<float, float>{lo, hi};
}

inline bool Near(double a, double b, double rel = 1e-3) {
  return std::abs(a - b) <= rel * std::abs(b);
}

// The one live reader of `value` when it is the only reader and `value` is not a graph output;
// else -1.
inline int SoleConsumer(const GraphEditor& ed, int value) {
  if (value == kNoValue || ed.IsGraphOutput(value)) return -1;
  const std::vector<int>& c = ed.Consumers(value);
  return c.size() == 1 ? c[0] : -1;
}

// The other input of a two-input node, given one of them; kNoValue when `one` is not an input
// or both inputs are `one`.
inline int OtherInput(const Node& n, int one) {
  if (n.inputs.size() != 2) return kNoValue;
  if (n.inputs[0] == one && n.inputs[1] != one) return n.inputs[1];
  if (n.inputs[1] == one && n.inputs[0] != one) return n.inputs[0];
  return kNoValue;
}

inline bool IsFloat32(const GraphEditor& ed, int value) {
  return ed.DtypeOf(value) == DataType::kFloat32;
}

// An inference BatchNormalization (training_mode 0, only Y used, FP32 constant statistics of
// `channels` values) as a per-channel scale and shift: s = gamma / sqrt(var + eps),
// t = beta - mean * s, computed in double and stored as FP32. nullopt for anything else.
struct ChannelScaleShift {
  std::vector<float> scale, shift;
};
inline std::optional<ChannelScaleShift> FoldBatchNorm(const GraphEditor& ed, const Node& bn,
                                                      int64_t channels) {
  if (!IsOnnxOp(bn, "BatchNormalization") || bn.inputs.size() != 5 ||
      bn.GetInt("training_mode", 0) != 0) {
    return std::nullopt;
  }
  for (size_t i = 1; i < bn.outputs.size(); ++i) {
    if (bn.outputs[i] != kNoValue) return std::nullopt;
  }
  std::vector<std::vector<double>> st(4);
  for (size_t i = 0; i < 4; ++i) {
    const int v = bn.inputs[i + 1];
    const OwnedTensor* t = v == kNoValue ? nullptr : ed.Constant(v);
    if (t == nullptr || t->dtype() != DataType::kFloat32 || t->num_elements() != channels) {
      return std::nullopt;
    }
    st[i] = *ed.ConstantValues(v);
  }
  const double eps = bn.GetFloat("epsilon", 1e-5f);
  ChannelScaleShift r;
  r.scale.resize(static_cast<size_t>(channels));
  r.shift.resize(r.scale.size());
  for (size_t k = 0; k < r.scale.size(); ++k) {
    const double sk = st[0][k] / std::sqrt(st[3][k] + eps);
    r.scale[k] = static_cast<float>(sk);
    r.shift[k] = static_cast<float>(st[1][k] - st[2][k] * sk);
  }
  return r;
}

}  // namespace kiln::opt
