// SPDX-License-Identifier: Apache-2.0
// layout_selection: the convolutional parts of a network run in oneDNN's channel-blocked layout
// (nChw16c / nChw8c, nCdhw16c / nCdhw8c for 3-D convolutions; op/kiln_ops.h) instead of
// converting to and from NCHW around every conv.
//
// NOTE on the approach.
//   1. Candidates, in topological order (every one FP32 with plain operands of rank 4, or of
//      rank 5 for 3-D convolutions and pools; one region has one rank):
//      - Conv / FusedConv (not yet blocked) with a constant FP32 4-D W and a group structure
//        oneDNN runs blocked (one group, depthwise with one output channel per group, or groups
//        whose channel counts are multiples of the block);
//      - unary elementwise ops of a candidate output (Relu, LeakyRelu, Clip with constant
//        bounds, Sigmoid, HardSigmoid, HardSwish, Tanh, ai.kiln Gelu);
//      - Add, Sub, Mul of a candidate output with another one of the same channels, of the same
//        shape or [N or 1, C, 1, 1(, 1)] (a squeeze-excitation scale), or with a constant that is
//        a scalar or per channel ([C, 1, 1] / [1, C, 1, 1] and their 3-D forms, blocked by the
//        pass);
//      - MaxPool (without Indices), AveragePool (not count_include_pad with ceil_mode, not
//        dilated with pads: the shapes oneDNN pools exactly), GlobalAveragePool, GlobalMaxPool
//        of a candidate output: they become ai.kiln BlockedPool;
//      - Concat on the channel axis of candidate outputs (or plain values of known channels)
//        where every input but the last has a multiple of the block channels;
//      - BatchNormalization in inference form with constant statistics, of a candidate output:
//        it becomes an ai.kiln ChannelAffine on the blocked tensors (DenseNet's BN before its
//        convs; BN after a conv was folded into it already).
//      These are layout-blind on blocked tensors (kiln_ops.h): numpy broadcasting of the blocked
//      shapes pairs the same channels as the plain ones, and Concat of whole channel blocks is
//      the Concat of the channels.
//   2. Regions are the connected components of candidates (joined by the values flowing between
//      them as blocked tensors). A region is kept when it has two convolutions or more and at
//      least one of them reads a blocked X; otherwise the conv kernels' own reorders cost no
//      more than the region's edges would.
//   3. Rewrite: every value a region node produces gets a blocked twin; region nodes read and
//      write the twins (convs become FusedConv with x_block / y_block). A plain value entering a
//      region goes through one shared ReorderToBlocked, except the X of a one-group conv with
//      fewer channels than the block (a network's RGB stem), which the conv reads plain
//      (x_block 0: oneDNN has direct plain-in / blocked-out kernels for it, and none from a
//      padded block; such an X produced inside a region leaves it). A value that leaves
//      the region (read by a node outside it, or a graph output) is recomputed from its twin by
//      ReorderFromBlocked under its original name and id, so readers outside and graph outputs
//      are untouched.
// Padding channels: convolutions, pools and reorders write zeros there; Sigmoid / HardSigmoid
// (0 -> 0.5), Add with a scalar and the like leave other finite values, which no op lets into a
// real channel (kiln_ops.h). Div is not a candidate (0 / 0 in the padding).
// The block is the target's (OptimizerOptions::target.channel_block, kernels/target.h): for the
// CPU 16 where oneDNN runs AVX-512 code (its native block there; its 8-blocked kernels are AVX2
// ones), 8 with AVX2; with 0 (below AVX2, or no target given) the pass changes nothing.
// Idempotent: blocked nodes are never candidates again (their operands are rank 5).

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool IsConv(const Node& n) {
  return IsOnnxOp(n, "Conv") ||
         (n.domain == kKilnDomain && n.op_type == kFusedConvOp &&
          n.FindAttribute(kAttrXBlock) == nullptr && n.FindAttribute(kAttrYBlock) == nullptr);
}

// What the rewrite needs to know of a candidate conv.
struct ConvFacts {
  int64_t in_channels = 0, out_channels = 0, group = 1;
  // X is read plain even inside a region: one group and fewer input channels than the block.
  // oneDNN 2.6 convolves such an input fast only from plain NCHW (its "first convolution"
  // kernels); from a padded block its AVX-512 code has no implementation and the reference runs.
  bool plain_x = false;
};

// An FP32 plain value of rank 4 (2-D spatial) or 5 (3-D).
bool IsPlainSpatial(const GraphEditor& ed, int v) {
  if (v == kNoValue || !IsFloat32(ed, v)) return false;
  const ValueType& t = ed.value(v).type;
  return t.has_shape && (t.dims.size() == 4 || t.dims.size() == 5);
}

size_t RankOf(const GraphEditor& ed, int v) { return ed.value(v).type.dims.size(); }

// The value's statically known channel count (dim 1), or -1.
int64_t KnownChannels(const GraphEditor& ed, int v) {
  if (!IsPlainSpatial(ed, v)) return -1;
  const Dim& c = ed.value(v).type.dims[1];
  return c.known() ? c.value : -1;
}

std::optional<ConvFacts> ConvCandidate(const GraphEditor& ed, const Node& n, int64_t block) {
  if (!IsConv(n) || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return std::nullopt;
  if (!n.has_input(0) || !n.has_input(1) || !IsFloat32(ed, n.outputs[0])) return std::nullopt;
  const int x = n.inputs[0];
  const ValueType& xt = ed.value(x).type;
  if (!IsPlainSpatial(ed, x)) return std::nullopt;
  const OwnedTensor* w = ed.Constant(n.inputs[1]);
  if (w == nullptr || w->dtype() != DataType::kFloat32 ||
      static_cast<size_t>(w->shape().rank()) != xt.dims.size()) {
    return std::nullopt;
  }
  for (int i = 2; i < 4; ++i) {
    if (n.has_input(i) && !IsFloat32(ed, n.inputs[static_cast<size_t>(i)])) return std::nullopt;
  }
  ConvFacts f;
  f.group = n.GetInt("group", 1);
  f.out_channels = w->shape().dim(0);
  const int64_t per_group = w->shape().dim(1);
  if (f.group < 1 || f.out_channels % f.group != 0 || per_group < 1) return std::nullopt;
  f.in_channels = per_group * f.group;
  if (xt.dims[1].known() && xt.dims[1].value != f.in_channels) return std::nullopt;
  const bool depthwise = per_group == 1 && f.out_channels == f.group;
  const bool blocked_groups = per_group % block == 0 && (f.out_channels / f.group) % block == 0;
  if (f.group != 1 && !depthwise && !blocked_groups) return std::nullopt;
  f.plain_x = f.group == 1 && f.in_channels < block;
  return f;
}

// The blocked type of a plain [N, C, spatial...] FP32 value with `channels` channels:
// [N, ceil(C/b), spatial..., b].
ValueType BlockedType(const ValueType& plain, int64_t channels, int64_t block) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = plain.dims;
  t.dims[1] = Dim{CeilDiv(channels, block), {}};
  t.dims.push_back(Dim{block, {}});
  return t;
}

// The per-channel values of a constant that broadcasts against a plain [N, C, spatial...] of
// rank `rank` along everything but the channels: [C, 1...] (rank - 1 dims) or [1, C, 1...]
// (rank dims) FP32; nullopt otherwise.
std::optional<std::vector<double>> PerChannelConstant(const GraphEditor& ed, int v,
                                                      int64_t channels, size_t rank) {
  const OwnedTensor* c = ed.Constant(v);
  if (c == nullptr || c->dtype() != DataType::kFloat32) return std::nullopt;
  const Shape& s = c->shape();
  const int r = static_cast<int>(rank);
  const int channel_dim = s.rank() == r - 1 ? 0 : s.rank() == r ? 1 : -1;
  if (channel_dim < 0 || s.dim(channel_dim) != channels) return std::nullopt;
  for (int d = 0; d < s.rank(); ++d) {
    if (d != channel_dim && s.dim(d) != 1) return std::nullopt;
  }
  return ed.ConstantValues(v);
}

// A scalar FP32 constant (any shape of one element, rank <= 4) broadcasts against a blocked
// tensor as it does against the plain one.
bool IsScalarConstant(const GraphEditor& ed, int v) {
  const OwnedTensor* c = ed.Constant(v);
  return c != nullptr && c->dtype() == DataType::kFloat32 && c->num_elements() == 1 &&
         c->shape().rank() <= 4;
}

// An [N, C, spatial...] plain type against the output's: equal, or [N or 1, C, 1...].
bool SameOrChannelBroadcast(const ValueType& t, const ValueType& out) {
  if (SameStaticShape(t, out)) return true;
  if (!t.has_shape || !out.has_shape || t.dims.size() != out.dims.size() || t.dims.size() < 4) {
    return false;
  }
  auto is = [](const Dim& d, int64_t v) { return d.known() && d.value == v; };
  for (size_t d = 2; d < t.dims.size(); ++d) {
    if (!is(t.dims[d], 1)) return false;
  }
  const Dim& n = t.dims[0];
  const Dim& on = out.dims[0];
  const bool same_batch = is(n, 1) || (n.known() && on.known() && n.value == on.value) ||
                          (!n.known() && !n.symbol.empty() && n.symbol == on.symbol);
  return same_batch && t.dims[1].known() && out.dims[1].known() &&
         t.dims[1].value == out.dims[1].value;
}

enum class Kind { kConv, kUnary, kBinary, kPool, kConcat, kBatchNorm };

struct Candidate {
  Kind kind = Kind::kUnary;
  int64_t channels = 0;  // of the output
  ConvFacts conv;        // kConv
  // kBinary: per input, -1 a blocked candidate output, 0 a scalar constant kept as is, 1 a
  // per-channel constant to block.
  std::vector<int> operand;
};

bool IsUnaryCandidateOp(const GraphEditor& ed, const Node& n, int64_t opset) {
  if (n.domain == kKilnDomain) return n.op_type == kGeluOp;
  if (!n.domain.empty()) return false;
  if (n.op_type == "Relu" || n.op_type == "LeakyRelu" || n.op_type == "Sigmoid" ||
      n.op_type == "HardSigmoid" || n.op_type == "HardSwish" || n.op_type == "Tanh") {
    return n.inputs.size() == 1;
  }
  return n.op_type == "Clip" && ClipBounds(ed, n, opset).has_value();
}

bool IsPoolCandidateOp(const Node& n) {
  if (!n.domain.empty() || n.inputs.size() != 1) return false;
  if (n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool") return true;
  const bool max = n.op_type == "MaxPool";
  if (!max && n.op_type != "AveragePool") return false;
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (n.outputs[i] != kNoValue) return false;  // MaxPool's Indices
  }
  const bool ceil = n.GetInt("ceil_mode", 0) != 0;
  if (!max && ceil && n.GetInt("count_include_pad", 0) != 0) return false;
  bool dilated = false, padded = false;
  for (int64_t d : n.GetInts("dilations")) dilated = dilated || d > 1;
  for (int64_t p : n.GetInts("pads")) padded = padded || p > 0;
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  padded = padded || (auto_pad != "NOTSET" && auto_pad != "VALID");
  // Dilated windows with padding or a ceil-mode overhang may hold no input tap: the reference
  // reports those.
  return !(dilated && (padded || ceil));
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int a) {
    while (parent[static_cast<size_t>(a)] != a) {
      parent[static_cast<size_t>(a)] = parent[static_cast<size_t>(parent[static_cast<size_t>(a)])];
      a = parent[static_cast<size_t>(a)];
    }
    return a;
  }
  void Join(int a, int b) { parent[static_cast<size_t>(Find(a))] = Find(b); }
};

class LayoutSelectionPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions& options) const override {
    const int64_t block = options.target.channel_block;
    if (block != 8 && block != 16) return 0;
    const int64_t opset = ed.graph().OpsetFor("");
    const std::vector<int> order = ed.LiveNodes();
    const size_t num_nodes = ed.graph().nodes().size();
    std::map<int, Candidate> cands;
    std::map<int, int64_t> channels_of_value;  // outputs of candidates
    auto candidate_output = [&](int v) { return v != kNoValue && channels_of_value.count(v) > 0; };
    for (int id : order) {
      const Node& n = ed.node(id);
      if (n.outputs.empty() || n.outputs[0] == kNoValue || !IsPlainSpatial(ed, n.outputs[0]))
        continue;
      std::optional<Candidate> c =
          Classify(ed, n, block, opset, candidate_output, channels_of_value);
      if (!c) continue;
      channels_of_value[n.outputs[0]] = c->channels;
      cands[id] = std::move(*c);
    }

    // True when `node` reads `value` as its plain X.
    auto reads_plain = [&](int node, int value) {
      auto it = cands.find(node);
      return it != cands.end() && it->second.kind == Kind::kConv && it->second.conv.plain_x &&
             ed.node(node).inputs[0] == value;
    };
    // Regions: connected components; keep those with two convolutions or more.
    UnionFind uf(num_nodes);
    for (const auto& [id, c] : cands) {
      const Node& n = ed.node(id);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const int in = n.inputs[i];
        if (!candidate_output(in) || reads_plain(id, in)) continue;
        const int p = ed.Producer(in);
        if (p >= 0 && cands.count(p) > 0) uf.Join(id, p);
      }
    }
    std::map<int, int> convs_in_region, blocked_x_convs_in_region;
    for (const auto& [id, c] : cands) {
      if (c.kind != Kind::kConv) continue;
      ++convs_in_region[uf.Find(id)];
      if (!c.conv.plain_x) ++blocked_x_convs_in_region[uf.Find(id)];
    }
    std::map<int, const Candidate*> region;  // the nodes kept
    for (const auto& [id, c] : cands) {
      const int r = uf.Find(id);
      if (convs_in_region[r] >= 2 && blocked_x_convs_in_region[r] >= 1) region[id] = &c;
    }
    if (region.empty()) return 0;
    auto in_region = [&](int node) { return node >= 0 && region.count(node) > 0; };

    // Blocked twins of every region output, and which outputs leave the region.
    std::map<int, int> twin;  // plain value -> blocked value
    std::vector<std::pair<int, int64_t>> exits;
    for (const auto& [id, c] : region) {
      const int v = ed.node(id).outputs[0];
      twin[v] = ed.AddValue(ed.value(v).name + "_blocked",
                            BlockedType(ed.value(v).type, c->channels, block));
      bool leaves = ed.IsGraphOutput(v);
      for (int r : ed.Consumers(v)) leaves = leaves || !in_region(r) || reads_plain(r, v);
      if (leaves) exits.emplace_back(v, c->channels);
    }
    std::map<int, int> entry;  // plain value from outside -> its ReorderToBlocked output
    auto blocked_input = [&](int v, int64_t c) {
      if (auto it = twin.find(v); it != twin.end()) return it->second;
      if (auto it = entry.find(v); it != entry.end()) return it->second;
      const int b =
          ed.AddValue(ed.value(v).name + "_blocked", BlockedType(ed.value(v).type, c, block));
      Node n;
      n.name = ed.value(v).name + "_to_blocked";
      n.domain = std::string(kKilnDomain);
      n.op_type = std::string(kReorderToBlockedOp);
      n.inputs = {v};
      n.outputs = {b};
      n.attributes = {Attribute::Int(std::string(kAttrBlock), block)};
      ed.AddNode(std::move(n));
      entry[v] = b;
      return b;
    };
    // A per-channel constant as a blocked [1, ceil(C/b), 1..., b] constant (zero padding) for a
    // plain operand of rank `rank`.
    auto blocked_constant = [&](int v, int64_t c, size_t rank) {
      std::optional<std::vector<double>> values = PerChannelConstant(ed, v, c, rank);
      std::vector<float> data(static_cast<size_t>(CeilDiv(c, block) * block), 0.0f);
      for (int64_t i = 0; i < c; ++i) data[static_cast<size_t>(i)] = float((*values)[size_t(i)]);
      std::vector<int64_t> dims(rank + 1, 1);
      dims[1] = CeilDiv(c, block);
      dims[rank] = block;
      return ed.AddConstant(ed.value(v).name + "_blocked",
                            MakeFloatTensor(Shape(std::span<const int64_t>(dims)), data));
    };

    int changes = 0;
    for (int id : order) {
      if (!in_region(id)) continue;
      const Candidate& c = *region.at(id);
      Node n = ed.node(id);
      const int out = n.outputs[0];
      n.outputs = {twin.at(out)};
      n.name = n.name.empty() ? ed.value(out).name + "_blocked" : n.name + "_blocked";
      switch (c.kind) {
        case Kind::kConv: {
          const ConvFacts& f = c.conv;
          int64_t x_block = block;
          if (f.plain_x) {
            x_block = 0;  // a thin input (an RGB stem): read plain
          } else {
            n.inputs[0] = blocked_input(n.inputs[0], f.in_channels);
          }
          if (n.has_input(3)) n.inputs[3] = blocked_input(n.inputs[3], f.out_channels);
          if (n.domain.empty()) {
            n.domain = std::string(kKilnDomain);
            n.op_type = std::string(kFusedConvOp);
          }
          n.attributes.push_back(Attribute::Int(std::string(kAttrXBlock), x_block));
          n.attributes.push_back(Attribute::Int(std::string(kAttrYBlock), block));
          break;
        }
        case Kind::kUnary:
          n.inputs[0] = twin.at(n.inputs[0]);
          break;
        case Kind::kBinary:
          for (size_t i = 0; i < 2; ++i) {
            if (c.operand[i] < 0) n.inputs[i] = twin.at(n.inputs[i]);
            if (c.operand[i] > 0) {
              n.inputs[i] = blocked_constant(n.inputs[i], c.channels, RankOf(ed, out));
            }
          }
          break;
        case Kind::kPool: {
          const std::string pool = n.op_type;
          n.inputs[0] = twin.at(n.inputs[0]);
          n.outputs.resize(1);
          n.domain = std::string(kKilnDomain);
          n.op_type = std::string(kBlockedPoolOp);
          std::vector<Attribute> attrs;
          for (const Attribute& a : n.attributes) {
            if (a.name != "storage_order") attrs.push_back(a);
          }
          attrs.push_back(Attribute::String(std::string(kAttrPool), pool));
          attrs.push_back(Attribute::Int(std::string(kAttrBlock), block));
          attrs.push_back(Attribute::Int(std::string(kAttrChannels), c.channels));
          n.attributes = std::move(attrs);
          break;
        }
        case Kind::kConcat:
          for (int& in : n.inputs) {
            const int64_t ch =
                candidate_output(in) ? channels_of_value.at(in) : KnownChannels(ed, in);
            in = blocked_input(in, ch);
          }
          n.attributes = {Attribute::Int("axis", 1)};
          break;
        case Kind::kBatchNorm: {
          // y = x * s + t with s = scale / sqrt(var + eps), t = bias - mean * s (in double): one
          // ai.kiln ChannelAffine on the blocked tensors (channel_affine_fusion then folds the
          // activation that follows).
          const std::optional<ChannelScaleShift> st = FoldBatchNorm(ed, ed.node(id), c.channels);
          if (!st) return Status::Internal("layout_selection: BatchNormalization no longer folds");
          const Shape shape{c.channels};
          Node affine;
          affine.name = n.name;
          affine.domain = std::string(kKilnDomain);
          affine.op_type = std::string(kChannelAffineOp);
          affine.inputs = {twin.at(n.inputs[0]),
                           ed.AddConstant(n.name + "_scale", MakeFloatTensor(shape, st->scale)),
                           ed.AddConstant(n.name + "_shift", MakeFloatTensor(shape, st->shift))};
          affine.outputs = {twin.at(out)};
          affine.attributes = {Attribute::Int(std::string(kAttrBlock), block)};
          ed.RemoveNode(id);
          ed.AddNode(std::move(affine));
          ++changes;
          continue;
        }
      }
      ed.RemoveNode(id);
      ed.AddNode(std::move(n));
      ++changes;
    }
    for (const auto& [v, c] : exits) {
      Node n;
      n.name = ed.value(v).name + "_from_blocked";
      n.domain = std::string(kKilnDomain);
      n.op_type = std::string(kReorderFromBlockedOp);
      n.inputs = {twin.at(v)};
      n.outputs = {v};
      n.attributes = {Attribute::Int(std::string(kAttrBlock), block),
                      Attribute::Int(std::string(kAttrChannels), c)};
      ed.AddNode(std::move(n));
    }
    ImportKilnDomain(ed);
    return changes;
  }

 private:
  // The candidate node `n` is, given the candidates before it; nullopt when it is none.
  template <typename IsCandidateOutput>
  static std::optional<Candidate> Classify(const GraphEditor& ed, const Node& n, int64_t block,
                                           int64_t opset, const IsCandidateOutput& candidate_output,
                                           const std::map<int, int64_t>& channels_of_value) {
    const int out = n.outputs[0];
    Candidate c;
    if (std::optional<ConvFacts> f = ConvCandidate(ed, n, block)) {
      c.kind = Kind::kConv;
      c.conv = *f;
      c.channels = f->out_channels;
      return c;
    }
    if (n.outputs.size() != 1 && !IsOnnxOp(n, "MaxPool")) return std::nullopt;
    if (n.inputs.empty() || !candidate_output(n.inputs[0])) {
      // Only Concat and the binary ops (candidate second operand) may start elsewhere.
      if (!IsOnnxOp(n, "Concat") && !((IsOnnxOp(n, "Add") || IsOnnxOp(n, "Mul")) &&
                                      n.inputs.size() == 2 && candidate_output(n.inputs[1]))) {
        return std::nullopt;
      }
    }
    if (IsUnaryCandidateOp(ed, n, opset)) {
      c.kind = Kind::kUnary;
      c.channels = channels_of_value.at(n.inputs[0]);
      return c;
    }
    if (IsPoolCandidateOp(n)) {
      c.kind = Kind::kPool;
      c.channels = channels_of_value.at(n.inputs[0]);
      return c;
    }
    if ((IsOnnxOp(n, "Add") || IsOnnxOp(n, "Sub") || IsOnnxOp(n, "Mul")) && n.inputs.size() == 2) {
      const ValueType& ot = ed.value(out).type;
      int64_t channels = -1;
      for (int v : n.inputs) {
        if (candidate_output(v)) channels = channels_of_value.at(v);
      }
      if (channels < 0 || KnownChannels(ed, out) != channels) return std::nullopt;
      c.kind = Kind::kBinary;
      c.channels = channels;
      bool full = false;  // one candidate operand has the output's shape
      for (int v : n.inputs) {
        if (candidate_output(v)) {
          if (channels_of_value.at(v) != channels ||
              !SameOrChannelBroadcast(ed.value(v).type, ot)) {
            return std::nullopt;
          }
          full = full || SameStaticShape(ed.value(v).type, ot);
          c.operand.push_back(-1);
        } else if (IsScalarConstant(ed, v)) {
          c.operand.push_back(0);
        } else if (PerChannelConstant(ed, v, channels, RankOf(ed, out))) {
          c.operand.push_back(1);
        } else {
          return std::nullopt;
        }
      }
      if (!full) return std::nullopt;
      return c;
    }
    if (IsOnnxOp(n, "Concat") && !n.inputs.empty()) {
      const int64_t axis = n.GetInt("axis", 0);
      if (axis != 1 && axis != 1 - static_cast<int64_t>(RankOf(ed, out))) return std::nullopt;
      int64_t total = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const int v = n.inputs[i];
        if (v == kNoValue) return std::nullopt;
        const int64_t ch = candidate_output(v) ? channels_of_value.at(v) : KnownChannels(ed, v);
        if (ch < 1 || (i + 1 < n.inputs.size() && ch % block != 0)) return std::nullopt;
        total += ch;
      }
      // At least one input from a candidate: a Concat of plain values alone stays plain.
      bool any = false;
      for (int v : n.inputs) any = any || candidate_output(v);
      if (!any || KnownChannels(ed, out) != total) return std::nullopt;
      c.kind = Kind::kConcat;
      c.channels = total;
      return c;
    }
    if (IsOnnxOp(n, "BatchNormalization") &&
        FoldBatchNorm(ed, n, channels_of_value.at(n.inputs[0]))) {
      const int64_t channels = channels_of_value.at(n.inputs[0]);
      c.kind = Kind::kBatchNorm;
      c.channels = channels;
      return c;
    }
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateLayoutSelectionPass() {
  return std::make_unique<LayoutSelectionPass>();
}

}  // namespace kiln::opt
