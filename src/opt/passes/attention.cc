// SPDX-License-Identifier: Apache-2.0
// attention_fusion: Softmax(scale * MatMul(Q, K^T) [+ Mask]) then MatMul(., V) becomes ai.kiln
// Attention(Q, K, V, Mask?) with `scale` set explicitly.
//
// NOTE: matched from the Softmax node. Before it: an optional Add with the mask (either
// operand), an optional Mul / Div by a scalar constant (the scale; a Mul on either side), and
// the MatMul Q x Kt. After it: the MatMul P x V. When Kt comes from a Transpose that swaps the
// last two axes (and is read only there), K is that Transpose's input; otherwise a Transpose is
// inserted. Validity is checked from the declared types: Q, Kt, V of one known rank >= 3 (rank
// 2 works too), FP32, equal leading dims (known and equal, or the same symbol) because the
// Attention op does not broadcast them as MatMul would; the Softmax over the last axis
// (opset >= 13 axis -1 / rank-1; before 13 only axis = rank-1); a mask whose declared shape
// broadcasts to the scores' shape without growing it. Intermediates: one reader, not graph
// outputs.

#include <fmt/format.h>

#include <algorithm>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

bool SameDim(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) return a.value == b.value;
  return !a.known() && !b.known() && !a.symbol.empty() && a.symbol == b.symbol;
}

// True when a value of type `mask` broadcasts to `scores` without changing its shape.
bool MaskFits(const ValueType& mask, const ValueType& scores) {
  if (!mask.has_shape || !scores.has_shape || mask.dims.size() > scores.dims.size()) return false;
  const size_t off = scores.dims.size() - mask.dims.size();
  for (size_t i = 0; i < mask.dims.size(); ++i) {
    const Dim& m = mask.dims[i];
    if (m.known() && m.value == 1) continue;
    if (!SameDim(m, scores.dims[off + i])) return false;
  }
  return true;
}

struct Scores {
  int matmul = -1;
  double scale = 1.0;
  std::vector<int> nodes;  // scale node(s)
};

// Walks back from `v` through an optional scalar Mul/Div to a MatMul that only feeds it.
std::optional<Scores> MatchScores(const GraphEditor& ed, int v, int reader) {
  Scores s;
  int p = ed.Producer(v);
  if (p < 0 || !ed.OnlyFeeds(v, reader)) return std::nullopt;
  const Node& pn = ed.node(p);
  if (IsOnnxOp(pn, "Mul") || IsOnnxOp(pn, "Div")) {
    auto c = SplitScalar(ed, pn, pn.op_type == "Div");
    if (!c || c->second == 0) return std::nullopt;
    s.scale = pn.op_type == "Div" ? 1.0 / c->second : c->second;
    s.nodes.push_back(p);
    const int mm_out = c->first;
    const int mm = ed.ProducerOf(mm_out, "MatMul");
    if (mm < 0 || !ed.OnlyFeeds(mm_out, p)) return std::nullopt;
    s.matmul = mm;
    return s;
  }
  if (IsOnnxOp(pn, "MatMul")) {
    s.matmul = p;
    return s;
  }
  return std::nullopt;
}

class AttentionFusionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    for (int sm : ed.LiveNodes()) {
      if (!ed.alive(sm) || !IsOnnxOp(ed.node(sm), "Softmax")) continue;
      const Node softmax = ed.node(sm);
      const int opset = static_cast<int>(ed.graph().OpsetFor(""));
      const int pre = softmax.inputs[0];
      const ValueType& st = ed.value(pre).type;
      if (!st.has_shape || st.dims.size() < 2) continue;
      const int64_t rank = static_cast<int64_t>(st.dims.size());
      int64_t axis = softmax.GetInt("axis", opset >= 13 ? -1 : 1);
      if (axis < 0) axis += rank;
      if (axis != rank - 1) continue;
      // Mask?
      int mask = kNoValue;
      std::optional<Scores> scores;
      std::vector<int> pattern = {sm};
      const int pre_node = ed.Producer(pre);
      if (pre_node >= 0 && IsOnnxOp(ed.node(pre_node), "Add") && ed.OnlyFeeds(pre, sm)) {
        const Node& add = ed.node(pre_node);
        for (int side = 0; side < 2 && !scores; ++side) {
          const int a = add.inputs[static_cast<size_t>(side)];
          const int b = add.inputs[static_cast<size_t>(1 - side)];
          if (a == b) continue;
          scores = MatchScores(ed, a, pre_node);
          if (scores) mask = b;
        }
        if (!scores) continue;
        pattern.push_back(pre_node);
      } else {
        scores = MatchScores(ed, pre, sm);
        if (!scores) continue;
      }
      pattern.insert(pattern.end(), scores->nodes.begin(), scores->nodes.end());
      pattern.push_back(scores->matmul);
      const Node& qk = ed.node(scores->matmul);
      const int q = qk.inputs[0];
      const int kt = qk.inputs[1];
      const int pv = SoleConsumer(ed, softmax.outputs[0]);
      if (pv < 0 || !IsOnnxOp(ed.node(pv), "MatMul") ||
          ed.node(pv).inputs[0] != softmax.outputs[0]) {
        continue;
      }
      const int v = ed.node(pv).inputs[1];
      const int out = ed.node(pv).outputs[0];
      pattern.push_back(pv);
      const ValueType& qt = ed.value(q).type;
      const ValueType& ktt = ed.value(kt).type;
      const ValueType& vt = ed.value(v).type;
      if (!IsFloat32(ed, q) || !IsFloat32(ed, kt) || !IsFloat32(ed, v)) continue;
      if (!qt.has_shape || !ktt.has_shape || !vt.has_shape) continue;
      const size_t r = qt.dims.size();
      if (r < 2 || ktt.dims.size() != r || vt.dims.size() != r || static_cast<size_t>(rank) != r) {
        continue;
      }
      bool ok = true;
      for (size_t i = 0; i + 2 < r; ++i) {
        ok = ok && SameDim(qt.dims[i], ktt.dims[i]) && SameDim(qt.dims[i], vt.dims[i]);
      }
      if (!ok) continue;
      if (mask != kNoValue && (!IsFloat32(ed, mask) || !MaskFits(ed.value(mask).type, st)))
        continue;
      // K from Kt.
      int k = kNoValue;
      const int tr = ed.ProducerOf(kt, "Transpose");
      if (tr >= 0 && ed.OnlyFeeds(kt, scores->matmul)) {
        std::vector<int64_t> perm = ed.node(tr).GetInts("perm");
        bool swap = perm.size() == r;
        for (size_t i = 0; swap && i < r; ++i) {
          const int64_t want = i + 2 < r ? static_cast<int64_t>(i)
                                         : static_cast<int64_t>(i + 2 == r ? r - 1 : r - 2);
          swap = perm[i] == want;
        }
        if (swap) {
          k = ed.node(tr).inputs[0];
          pattern.push_back(tr);
        }
      }
      std::vector<Node> new_nodes;
      if (k == kNoValue) {
        ValueType kty = ktt;
        std::swap(kty.dims[r - 1], kty.dims[r - 2]);
        k = ed.AddValue(ed.value(kt).name + "_t", kty);
        Node t;
        t.name = fmt::format("{}_transpose", ed.value(kt).name);
        t.op_type = "Transpose";
        t.inputs = {kt};
        t.outputs = {k};
        std::vector<int64_t> perm;
        for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(i));
        std::swap(perm[r - 1], perm[r - 2]);
        t.attributes.push_back(Attribute::Ints("perm", perm));
        new_nodes.push_back(std::move(t));
      }
      Node att;
      att.name = fmt::format("{}_attention", ed.value(out).name);
      att.op_type = std::string(kAttentionOp);
      att.domain = std::string(kKilnDomain);
      att.inputs = {q, k, v};
      if (mask != kNoValue) att.inputs.push_back(mask);
      att.outputs = {out};
      Attribute sc;
      sc.name = "scale";
      sc.type = AttributeType::kFloat;
      sc.f = static_cast<float>(scores->scale);
      att.attributes.push_back(std::move(sc));
      new_nodes.push_back(std::move(att));
      for (int p : pattern) ed.RemoveNode(p);
      for (Node& nn : new_nodes) ed.AddNode(std::move(nn));
      ImportKilnDomain(ed);
      ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateAttentionFusionPass() {
  return std::make_unique<AttentionFusionPass>();
}

}  // namespace kiln::opt
