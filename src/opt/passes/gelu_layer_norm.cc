// SPDX-License-Identifier: Apache-2.0
// gelu_fusion and layer_norm_fusion.
//
// NOTE on GELU: the erf form is matched from its Erf node,
//   u = x / sqrt(2) (or x * (1/sqrt 2)); e = Erf(u); a = e + 1; then either
//   y = (x * a) * 0.5, or y = (x * 0.5) * a;
// the tanh form from its Tanh node,
//   w = x + 0.044715 * Pow(x, 3); t = Tanh(w * sqrt(2/pi)); a = t + 1; then the same tails.
// Constants must match within 1e-3 relative; every intermediate must have one reader and not be
// a graph output; x must be FP32.
// NOTE on LayerNormalization: matched from the first ReduceMean,
//   mean = ReduceMean(x, axes); d = x - mean; var = ReduceMean(d^2 (Pow 2 or d*d), axes);
//   n = d / Sqrt(var + eps); y = n * gamma + beta (Mul and Add each optional),
// keepdims 1, axes the last k axes of x (negative axes need no rank). The normalized dims must
// be known: from the declared type of x (or of x - mean, or of the Div's output), or else from
// the dims of gamma / beta that are not 1 (NormalizedShape); PyTorch's opset-13 exports of ViT,
// Swin and MaxViT with a dynamic batch declare no shape for x at all, so the types alone fused
// none of their LayerNorms. gamma / beta must be constants that broadcast only along the
// normalized dims; they are expanded to exactly those dims. ONNX's own LayerNormalization
// (opset 17) with only Y read becomes the ai.kiln op as well.

#include <fmt/format.h>

#include <algorithm>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

// Matches the tail after a = e + 1: returns (final node id, nodes of the tail) or -1.
struct Tail {
  int out = kNoValue;
  std::vector<int> nodes;
};

std::optional<Tail> MatchGeluTail(const GraphEditor& ed, int a, int x) {
  const int m1 = SoleConsumer(ed, a);
  if (m1 < 0 || !IsOnnxOp(ed.node(m1), "Mul")) return std::nullopt;
  const int o = OtherInput(ed.node(m1), a);
  if (o == kNoValue) return std::nullopt;
  if (o == x) {  // (x * a) * 0.5
    const int m2 = SoleConsumer(ed, ed.node(m1).outputs[0]);
    if (m2 < 0 || !IsOnnxOp(ed.node(m2), "Mul")) return std::nullopt;
    std::optional<std::pair<int, double>> half = SplitScalar(ed, ed.node(m2));
    if (!half || !Near(half->second, 0.5)) return std::nullopt;
    return Tail{ed.node(m2).outputs[0], {m1, m2}};
  }
  const int h = ed.ProducerOf(o, "Mul");  // (x * 0.5) * a
  if (h < 0 || !ed.OnlyFeeds(o, m1)) return std::nullopt;
  std::optional<std::pair<int, double>> half = SplitScalar(ed, ed.node(h));
  if (!half || half->first != x || !Near(half->second, 0.5)) return std::nullopt;
  return Tail{ed.node(m1).outputs[0], {h, m1}};
}

// a = e + 1 where e is the output of node `e_node`: returns a's id or kNoValue.
int MatchPlusOne(const GraphEditor& ed, int e) {
  const int add = SoleConsumer(ed, e);
  if (add < 0 || !IsOnnxOp(ed.node(add), "Add")) return kNoValue;
  std::optional<std::pair<int, double>> one = SplitScalar(ed, ed.node(add));
  if (!one || one->first != e || !Near(one->second, 1.0)) return kNoValue;
  return ed.node(add).outputs[0];
}

class GeluFusionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    const double kSqrt2 = std::sqrt(2.0);
    const double kTanhScale = std::sqrt(2.0 / M_PI);
    for (int n : ed.LiveNodes()) {
      if (!ed.alive(n)) continue;
      const Node& node = ed.node(n);
      if (!IsOnnxOp(node, "Erf") && !IsOnnxOp(node, "Tanh")) continue;
      const bool is_tanh = node.op_type == "Tanh";
      std::vector<int> pattern = {n};
      int x = kNoValue;
      const int u = node.inputs[0];
      const int un = ed.Producer(u);
      if (un < 0 || !ed.OnlyFeeds(u, n)) continue;
      const Node& unode = ed.node(un);
      if (!is_tanh) {
        if (IsOnnxOp(unode, "Div")) {
          auto s = SplitScalar(ed, unode, true);
          if (s && Near(s->second, kSqrt2)) x = s->first;
        } else if (IsOnnxOp(unode, "Mul")) {
          auto s = SplitScalar(ed, unode);
          if (s && Near(s->second, 1.0 / kSqrt2)) x = s->first;
        }
        if (x == kNoValue) continue;
        pattern.push_back(un);
      } else {
        // t = Tanh(w * k); w = x + c * Pow(x, 3)
        if (!IsOnnxOp(unode, "Mul")) continue;
        auto s = SplitScalar(ed, unode);
        if (!s || !Near(s->second, kTanhScale)) continue;
        const int w = s->first;
        const int wn = ed.ProducerOf(w, "Add");
        if (wn < 0 || !ed.OnlyFeeds(w, un)) continue;
        const Node& wnode = ed.node(wn);
        bool matched = false;
        for (int side = 0; side < 2 && !matched; ++side) {
          const int cand_x = wnode.inputs[static_cast<size_t>(side)];
          const int cube_scaled = wnode.inputs[static_cast<size_t>(1 - side)];
          const int cm = ed.ProducerOf(cube_scaled, "Mul");
          if (cm < 0 || !ed.OnlyFeeds(cube_scaled, wn)) continue;
          auto c = SplitScalar(ed, ed.node(cm));
          if (!c || !Near(c->second, 0.044715)) continue;
          const int pw = ed.ProducerOf(c->first, "Pow");
          if (pw < 0 || !ed.OnlyFeeds(c->first, cm)) continue;
          auto e = SplitScalar(ed, ed.node(pw), true);
          if (!e || e->first != cand_x || e->second != 3.0) continue;
          x = cand_x;
          pattern.insert(pattern.end(), {un, wn, cm, pw});
          matched = true;
        }
        if (!matched) continue;
      }
      if (!IsFloat32(ed, x)) continue;
      const int a = MatchPlusOne(ed, node.outputs[0]);
      if (a == kNoValue) continue;
      std::optional<Tail> tail = MatchGeluTail(ed, a, x);
      if (!tail) continue;
      pattern.push_back(ed.Producer(a));
      pattern.insert(pattern.end(), tail->nodes.begin(), tail->nodes.end());
      Node gelu;
      gelu.name = fmt::format("{}_gelu", ed.node(tail->nodes.back()).name);
      gelu.op_type = std::string(kGeluOp);
      gelu.domain = std::string(kKilnDomain);
      gelu.inputs = {x};
      gelu.outputs = {tail->out};
      if (is_tanh) {
        Attribute approx;
        approx.name = "approximate";
        approx.type = AttributeType::kString;
        approx.s = "tanh";
        gelu.attributes.push_back(std::move(approx));
      }
      for (int p : pattern) ed.RemoveNode(p);
      ed.AddNode(std::move(gelu));
      ImportKilnDomain(ed);
      ++changes;
    }
    return changes;
  }
};

// Axes of a ReduceMean (attribute form) as negative numbers counted from the back, sorted; nullopt
// unless they are the last k axes, keepdims is 1, and the rank is known when needed.
std::optional<int64_t> TrailingAxesCount(const GraphEditor& ed, const Node& r, int x) {
  if (r.GetInt("keepdims", 1) != 1 || r.inputs.size() != 1) return std::nullopt;
  std::vector<int64_t> axes = r.GetInts("axes");
  if (axes.empty()) return std::nullopt;
  const ValueType& t = ed.value(x).type;
  const int64_t rank = t.has_shape ? static_cast<int64_t>(t.dims.size()) : -1;
  for (int64_t& a : axes) {
    if (a >= 0) {
      if (rank < 0) return std::nullopt;
      a -= rank;
    }
  }
  std::sort(axes.begin(), axes.end());
  const int64_t k = static_cast<int64_t>(axes.size());
  for (int64_t i = 0; i < k; ++i) {
    if (axes[static_cast<size_t>(i)] != i - k) return std::nullopt;
  }
  return k;
}

// The normalized dims (the last k of x) and the highest rank a gamma / beta constant may have
// without growing the output's rank.
struct NormShape {
  std::vector<int64_t> dims;
  size_t max_param_rank = 0;
};

// Finds the normalized dims from what the graph proves: the declared types of `same_shape`
// (values of x's shape: x, x - mean, the Div's output), then the trailing dims of the gamma /
// beta candidates in `params` (kNoValue or non-constants ignored) where they are not 1: a
// valid broadcast of [..., D] with a constant's dim G != 1 needs D == G or D == 1. (PyTorch
// exports with a dynamic batch often carry no shape at all for x: the class-token Concat of an
// Expand in ViT, the window Reshapes of Swin and MaxViT.) D == 1 against G > 1 would have the
// original broadcast the output up; the fused node then has fewer normalized elements than its
// Scale and the kernel reports an error instead of a result: LayerNorm over a size-1 axis with
// a wider gamma is not a model anyone exports. nullopt when some dim stays unknown or the
// sources disagree.
std::optional<NormShape> NormalizedShape(const GraphEditor& ed, const std::vector<int>& same_shape,
                                         const std::vector<int>& params, int64_t k) {
  const size_t ku = static_cast<size_t>(k);
  std::vector<int64_t> dims(ku, -1);
  int64_t rank = -1;
  auto pin = [&](size_t i, int64_t v) {
    if (dims[i] >= 0 && dims[i] != v) return false;
    dims[i] = v;
    return true;
  };
  for (int v : same_shape) {
    const ValueType& t = ed.value(v).type;
    if (!t.has_shape) continue;
    const int64_t r = static_cast<int64_t>(t.dims.size());
    if (r < k || (rank >= 0 && rank != r)) return std::nullopt;
    rank = r;
    for (size_t i = 0; i < ku; ++i) {
      const Dim& dim = t.dims[static_cast<size_t>(r - k) + i];
      if (dim.known() && !pin(i, dim.value)) return std::nullopt;
    }
  }
  // x has at least k dims (the ReduceMean reads axes -k..-1), so a constant of rank <= k never
  // grows the output's rank.
  const size_t max_param_rank = rank >= 0 ? static_cast<size_t>(rank) : ku;
  for (int p : params) {
    const OwnedTensor* c = p == kNoValue ? nullptr : ed.Constant(p);
    if (c == nullptr || c->dtype() != DataType::kFloat32 ||
        static_cast<size_t>(c->shape().rank()) > max_param_rank) {
      continue;
    }
    const Shape& s = c->shape();
    for (size_t i = 0; i < ku; ++i) {
      const int si = s.rank() - static_cast<int>(ku) + static_cast<int>(i);
      if (si >= 0 && s.dim(si) != 1 && !pin(i, s.dim(si))) return std::nullopt;
    }
  }
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
  }
  return NormShape{std::move(dims), max_param_rank};
}

// `c` expanded to exactly `dims` (it may only broadcast along them and have at most
// `max_rank` dims, so that it does not grow the output's rank); nullopt otherwise.
std::optional<std::vector<float>> ExpandParam(const GraphEditor& ed, int c,
                                              const std::vector<int64_t>& dims, size_t max_rank) {
  const OwnedTensor* t = ed.Constant(c);
  if (t == nullptr || t->dtype() != DataType::kFloat32) return std::nullopt;
  const Shape& s = t->shape();
  if (static_cast<size_t>(s.rank()) > max_rank) return std::nullopt;  // would grow the rank
  const int k = static_cast<int>(dims.size());
  for (int i = 0; i < s.rank() - k; ++i) {
    if (s.dim(i) != 1) return std::nullopt;
  }
  // Strides of c over `dims` (0 where broadcast).
  std::vector<int64_t> stride(static_cast<size_t>(k), 0);
  int64_t acc = 1;
  for (int i = k - 1; i >= 0; --i) {
    const int si = s.rank() - k + i;
    const int64_t d = si >= 0 ? s.dim(si) : 1;
    if (d != 1 && d != dims[static_cast<size_t>(i)]) return std::nullopt;
    stride[static_cast<size_t>(i)] = d == 1 ? 0 : acc;
    acc *= d;
  }
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<float> out(static_cast<size_t>(total));
  const float* p = t->data<const float>();
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat, src = 0;
    for (int i = k - 1; i >= 0; --i) {
      const int64_t d = dims[static_cast<size_t>(i)];
      src += (rem % d) * stride[static_cast<size_t>(i)];
      rem /= d;
    }
    out[static_cast<size_t>(flat)] = p[src];
  }
  return out;
}

// ONNX's own LayerNormalization (opset 17) used for Y only, FP32, stash_type 1: the same
// computation as ai.kiln LayerNormalization, which the fast kernels implement.
bool AdoptOnnxLayerNorm(GraphEditor& ed, int n) {
  const Node& node = ed.node(n);
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    const int o = node.outputs[i];
    if (o != kNoValue && (ed.IsGraphOutput(o) || !ed.Consumers(o).empty())) return false;
  }
  if (node.outputs.empty() || node.outputs[0] == kNoValue || !node.has_input(1) ||
      !IsFloat32(ed, node.inputs[0]) || node.GetInt("stash_type", 1) != 1) {
    return false;
  }
  Node ln;
  ln.name = node.name;
  ln.op_type = std::string(kLayerNormalizationOp);
  ln.domain = std::string(kKilnDomain);
  ln.inputs = node.inputs;
  ln.outputs = {node.outputs[0]};
  for (const Attribute& a : node.attributes) {
    if (a.name == "axis" || a.name == "epsilon") ln.attributes.push_back(a);
  }
  ed.RemoveNode(n);
  ed.AddNode(std::move(ln));
  ImportKilnDomain(ed);
  return true;
}

class LayerNormFusionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    for (int r1 : ed.LiveNodes()) {
      if (ed.alive(r1) && IsOnnxOp(ed.node(r1), "LayerNormalization")) {
        changes += AdoptOnnxLayerNorm(ed, r1) ? 1 : 0;
        continue;
      }
      if (!ed.alive(r1) || !IsOnnxOp(ed.node(r1), "ReduceMean")) continue;
      const Node& rm1 = ed.node(r1);
      const int x = rm1.inputs[0];
      if (!IsFloat32(ed, x)) continue;
      std::optional<int64_t> k = TrailingAxesCount(ed, rm1, x);
      if (!k) continue;
      const int mean = rm1.outputs[0];
      const int sub = SoleConsumer(ed, mean);
      if (sub < 0 || !IsOnnxOp(ed.node(sub), "Sub") || ed.node(sub).inputs[0] != x ||
          ed.node(sub).inputs[1] != mean) {
        continue;
      }
      const int d = ed.node(sub).outputs[0];
      if (ed.IsGraphOutput(d) || ed.Consumers(d).size() != 2) continue;
      int sq = -1, div = -1;
      for (int c : ed.Consumers(d)) {
        const Node& cn = ed.node(c);
        if (IsOnnxOp(cn, "Div") && cn.inputs[0] == d)
          div = c;
        else if (IsOnnxOp(cn, "Pow")) {
          auto e = SplitScalar(ed, cn, true);
          if (e && e->first == d && e->second == 2.0) sq = c;
        } else if (IsOnnxOp(cn, "Mul") && cn.inputs[0] == d && cn.inputs[1] == d) {
          sq = c;
        }
      }
      if (sq < 0 || div < 0) continue;
      const int r2 = SoleConsumer(ed, ed.node(sq).outputs[0]);
      if (r2 < 0 || !IsOnnxOp(ed.node(r2), "ReduceMean")) continue;
      std::optional<int64_t> k2 = TrailingAxesCount(ed, ed.node(r2), x);
      if (!k2 || *k2 != *k) continue;
      const int add_eps = SoleConsumer(ed, ed.node(r2).outputs[0]);
      if (add_eps < 0 || !IsOnnxOp(ed.node(add_eps), "Add")) continue;
      auto eps = SplitScalar(ed, ed.node(add_eps));
      if (!eps || eps->first != ed.node(r2).outputs[0] || !(eps->second >= 0)) continue;
      const int sqrt = SoleConsumer(ed, ed.node(add_eps).outputs[0]);
      if (sqrt < 0 || !IsOnnxOp(ed.node(sqrt), "Sqrt")) continue;
      if (SoleConsumer(ed, ed.node(sqrt).outputs[0]) != div ||
          ed.node(div).inputs[1] != ed.node(sqrt).outputs[0]) {
        continue;
      }
      std::vector<int> pattern = {r1, sub, sq, r2, add_eps, sqrt, div};
      int out = ed.node(div).outputs[0];
      // The gamma / beta candidates (the constants the Mul and Add after the Div read): their
      // dims may tell the normalized dims when the types do not. A non-constant operand ends
      // the chain (past it, a dim would be that operand's broadcast, not x's).
      std::vector<int> params;
      int tail = out;
      for (const char* op : {"Mul", "Add"}) {
        const int c = SoleConsumer(ed, tail);
        if (c < 0 || !IsOnnxOp(ed.node(c), op)) continue;
        const int other = OtherInput(ed.node(c), tail);
        if (other == kNoValue || ed.Constant(other) == nullptr) break;
        params.push_back(other);
        tail = ed.node(c).outputs[0];
      }
      std::optional<NormShape> ns = NormalizedShape(ed, {x, d, out}, params, *k);
      if (!ns) continue;
      const std::vector<int64_t>& norm_dims = ns->dims;
      int64_t count = 1;
      for (int64_t dd : norm_dims) count *= dd;
      std::vector<float> gamma(static_cast<size_t>(count), 1.0f);
      std::optional<std::vector<float>> beta;
      int next = SoleConsumer(ed, out);
      if (next >= 0 && IsOnnxOp(ed.node(next), "Mul")) {
        const int g = OtherInput(ed.node(next), out);
        std::optional<std::vector<float>> gv =
            g == kNoValue ? std::nullopt : ExpandParam(ed, g, norm_dims, ns->max_param_rank);
        if (gv) {
          gamma = std::move(*gv);
          pattern.push_back(next);
          out = ed.node(next).outputs[0];
          next = SoleConsumer(ed, out);
        }
      }
      if (next >= 0 && IsOnnxOp(ed.node(next), "Add")) {
        const int b = OtherInput(ed.node(next), out);
        beta = b == kNoValue ? std::nullopt : ExpandParam(ed, b, norm_dims, ns->max_param_rank);
        if (beta) {
          pattern.push_back(next);
          out = ed.node(next).outputs[0];
        }
      }
      const Shape pshape(norm_dims);
      const std::string base = ed.value(out).name;
      Node ln;
      ln.name = fmt::format("{}_layernorm", base);
      ln.op_type = std::string(kLayerNormalizationOp);
      ln.domain = std::string(kKilnDomain);
      ln.inputs = {x, ed.AddConstant(base + "_ln_scale", MakeFloatTensor(pshape, gamma))};
      if (beta)
        ln.inputs.push_back(ed.AddConstant(base + "_ln_bias", MakeFloatTensor(pshape, *beta)));
      ln.outputs = {out};
      ln.attributes.push_back(Attribute::Int("axis", -*k));
      Attribute e;
      e.name = "epsilon";
      e.type = AttributeType::kFloat;
      e.f = static_cast<float>(eps->second);
      ln.attributes.push_back(std::move(e));
      for (int p : pattern) ed.RemoveNode(p);
      ed.AddNode(std::move(ln));
      ImportKilnDomain(ed);
      ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateGeluFusionPass() { return std::make_unique<GeluFusionPass>(); }
std::unique_ptr<Pass> CreateLayerNormFusionPass() {
  return std::make_unique<LayerNormFusionPass>();
}

}  // namespace kiln::opt
