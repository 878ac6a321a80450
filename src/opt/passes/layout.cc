// SPDX-License-Identifier: Apache-2.0
// layout_selection: chains of 2-D convolutions run in oneDNN's channel-blocked layout
// (nChw16c / nChw8c; op/kiln_ops.h) instead of converting to and from NCHW around every conv.
//
// NOTE on the approach.
//   1. Candidates, in topological order: Conv / FusedConv (not yet blocked) with a constant FP32
//      4-D W, FP32 X of rank 4, and a group structure oneDNN runs blocked (one group, depthwise
//      with one output channel per group, or groups whose channel counts are multiples of the
//      block); Add of two candidate outputs whose declared shapes provably equal each other and
//      the sum's (no broadcasting); Relu of a candidate output. Elementwise ops on equal shapes
//      are layout-blind and keep the zero padding, so they stay ONNX ops on blocked tensors.
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
// The block is the target's (OptimizerOptions::target.channel_block, kernels/target.h): for the
// CPU 16 where oneDNN runs AVX-512 code (its native block there; its 8-blocked kernels are AVX2
// ones), 8 with AVX2; with 0 (below AVX2, or no target given) the pass changes nothing.
// Idempotent: blocked FusedConvs are never candidates again.

#include <fmt/format.h>

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

std::optional<ConvFacts> ConvCandidate(const GraphEditor& ed, const Node& n, int64_t block) {
  if (!IsConv(n) || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return std::nullopt;
  if (!n.has_input(0) || !n.has_input(1) || !IsFloat32(ed, n.outputs[0])) return std::nullopt;
  const int x = n.inputs[0];
  const ValueType& xt = ed.value(x).type;
  if (!IsFloat32(ed, x) || !xt.has_shape || xt.dims.size() != 4) return std::nullopt;
  const OwnedTensor* w = ed.Constant(n.inputs[1]);
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->shape().rank() != 4) {
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

// The blocked type of a plain [N, C, H, W] FP32 value with `channels` channels.
ValueType BlockedType(const ValueType& plain, int64_t channels, int64_t block) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  const bool known = plain.has_shape && plain.dims.size() == 4;
  t.dims = {known ? plain.dims[0] : Dim{}, Dim{CeilDiv(channels, block), {}},
            known ? plain.dims[2] : Dim{}, known ? plain.dims[3] : Dim{}, Dim{block, {}}};
  return t;
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
    const std::vector<int> order = ed.LiveNodes();
    const size_t num_nodes = ed.graph().nodes().size();
    // Candidates: node -> channels of its output; conv facts per conv.
    std::map<int, int64_t> channels_of_node;
    std::map<int, ConvFacts> convs;
    std::map<int, int64_t> channels_of_value;  // outputs of candidates
    auto candidate_output = [&](int v) { return channels_of_value.count(v) > 0; };
    for (int id : order) {
      const Node& n = ed.node(id);
      if (std::optional<ConvFacts> f = ConvCandidate(ed, n, block)) {
        convs[id] = *f;
        channels_of_node[id] = f->out_channels;
      } else if ((IsOnnxOp(n, "Add") && n.inputs.size() == 2 && n.outputs.size() == 1 &&
                  candidate_output(n.inputs[0]) && candidate_output(n.inputs[1]) &&
                  channels_of_value[n.inputs[0]] == channels_of_value[n.inputs[1]] &&
                  SameStaticShape(ed.value(n.inputs[0]).type, ed.value(n.inputs[1]).type) &&
                  SameStaticShape(ed.value(n.inputs[0]).type, ed.value(n.outputs[0]).type)) ||
                 (IsOnnxOp(n, "Relu") && n.inputs.size() == 1 && n.outputs.size() == 1 &&
                  candidate_output(n.inputs[0]))) {
        // An Add of two candidates with the same channels and shape, or a Relu of a candidate:
        // the output has the channels of input 0.
        channels_of_node[id] = channels_of_value[n.inputs[0]];
      } else {
        continue;
      }
      channels_of_value[n.outputs[0]] = channels_of_node[id];
    }
    // Regions: connected components; keep those with two convolutions or more.
    // True when `node` reads `value` as its plain X.
    auto reads_plain = [&](int node, int value) {
      auto it = convs.find(node);
      return it != convs.end() && it->second.plain_x && ed.node(node).inputs[0] == value;
    };
    UnionFind uf(num_nodes);
    for (const auto& [id, c] : channels_of_node) {
      const Node& n = ed.node(id);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const int in = n.inputs[i];
        if (in == kNoValue || !candidate_output(in)) continue;
        if (i == 0 && convs.count(id) > 0 && convs[id].plain_x) continue;  // read plain
        const int p = ed.Producer(in);
        if (p >= 0 && channels_of_node.count(p) > 0) uf.Join(id, p);
      }
    }
    std::map<int, int> convs_in_region, blocked_x_convs_in_region;
    for (const auto& [id, f] : convs) {
      ++convs_in_region[uf.Find(id)];
      if (!f.plain_x) ++blocked_x_convs_in_region[uf.Find(id)];
    }
    std::map<int, int64_t> region;  // node -> output channels, nodes kept
    for (const auto& [id, c] : channels_of_node) {
      const int r = uf.Find(id);
      if (convs_in_region[r] >= 2 && blocked_x_convs_in_region[r] >= 1) region[id] = c;
    }
    if (region.empty()) return 0;
    auto in_region = [&](int node) { return node >= 0 && region.count(node) > 0; };

    // Blocked twins of every region output, and which outputs leave the region.
    std::map<int, int> twin;  // plain value -> blocked value
    std::vector<std::pair<int, int64_t>> exits;
    for (const auto& [id, c] : region) {
      const int v = ed.node(id).outputs[0];
      twin[v] = ed.AddValue(ed.value(v).name + "_blocked", BlockedType(ed.value(v).type, c, block));
      bool leaves = ed.IsGraphOutput(v);
      for (int r : ed.Consumers(v)) leaves = leaves || !in_region(r) || reads_plain(r, v);
      if (leaves) exits.emplace_back(v, c);
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

    int changes = 0;
    for (int id : order) {
      if (!in_region(id)) continue;
      Node n = ed.node(id);
      const int out = n.outputs[0];
      if (auto it = convs.find(id); it != convs.end()) {
        const ConvFacts& f = it->second;
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
      } else {
        for (int& in : n.inputs) in = twin.at(in);
      }
      n.outputs = {twin.at(out)};
      n.name = n.name.empty() ? ed.value(out).name + "_blocked" : n.name + "_blocked";
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
};

}  // namespace

std::unique_ptr<Pass> CreateLayoutSelectionPass() {
  return std::make_unique<LayoutSelectionPass>();
}

}  // namespace kiln::opt
