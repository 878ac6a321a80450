// SPDX-License-Identifier: Apache-2.0
// einsum_lowering: two-operand FP32 Einsum nodes that are (batched) matrix products become
// Transpose / Reshape / MatMul / Reshape / Transpose, which run on the fast MatMul kernel (the
// only Einsum kernel is the reference's: a loop over every label combination).
//
// NOTE on the lowering. Every label of "A,B->Y" falls in one of four classes:
//   batch: in A, B and Y    MatMul's leading dims (it broadcasts them as Einsum does)
//   m:     in A and Y only  merged into MatMul's M
//   n:     in B and Y only  merged into N
//   k:     in A and B only  merged into K, summed
// A is transposed to [batch, m, k] and reshaped to [batch, M, K], B to [batch, k, n] and
// [batch, K, N]; MatMul gives [batch, M, N], which is reshaped to [batch, m..., n...] and
// transposed into Y's order. Batch, m and n labels take Y's order and k labels A's, so that the
// common equations need no transpose at all; transposes that keep the order and reshapes that
// keep the shape are not emitted. When B has no batch dims (a weight, "bnd,dk->bnk"), A's m
// dims stay separate instead: MatMul broadcasts the 2-D B over them, and A's leading dims are
// what the MatMul kernels collapse into rows. So MaxViT's "BGHID,BGHJD->BGHIJ" becomes a
// Transpose of B and a MatMul, "BGHIJ,BGHJD->BGHID" a MatMul alone.
//
// NOTE on dims. Reshape targets copy a dim that keeps its position (entry 0) and take a known
// size otherwise; one dim of unknown size per target becomes -1. A k label must have provably
// one size in A and B (known and equal, or the same symbol), since Einsum would broadcast a
// size-1 k where MatMul reports an error. Sizes come from the declared types and, where those
// say nothing, from DimTracer, which walks back from the operand: PyTorch's opset-13 MaxViT
// declares no shape after its window partition, but q, k and v are Transposes of Reshapes whose
// targets are Concats of constants and Gather(Shape(x), i), x a LayerNorm of the partition's
// Reshape with constant window sizes (the grid partition multiplies and divides them), and the
// attention scores get a constant [1, H, P, P] bias before the Softmax. The output gets its
// dims declared when the Einsum's were not, so the type propagation of the next round reaches
// what reads it.
//
// Declined (the Einsum stays): not exactly two inputs, inputs not FP32, a label repeated
// within one term (a diagonal), a label in one input only and not in the output (a sum over
// one operand), "..." anywhere but at the start of a term or of an explicit output, an
// ellipsis operand of unknown rank, k labels not provably equal, and reshape targets the
// declared types cannot express (two unknown sizes merged or split in one target, or a
// known size of 0).

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "op/kiln_ops.h"
#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

constexpr int kNumLetters = 52;  // a-z then A-Z

int LetterId(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// One operand or the output: whether it starts with "...", then its labels.
struct Term {
  bool ellipsis = false;
  std::vector<int> labels;
};

struct Equation {
  Term a, b, y;
};

// Parses `s` (spaces removed) into a term; nullopt for "..." not at the start, a character that
// is no letter, or a repeated label.
std::optional<Term> ParseTerm(std::string_view s) {
  Term t;
  if (s.substr(0, 3) == "...") {
    t.ellipsis = true;
    s.remove_prefix(3);
  }
  std::array<bool, kNumLetters> seen{};
  for (char c : s) {
    const int id = LetterId(c);
    if (id < 0 || seen[static_cast<size_t>(id)]) return std::nullopt;
    seen[static_cast<size_t>(id)] = true;
    t.labels.push_back(id);
  }
  return t;
}

bool Has(const Term& t, int label) {
  return std::find(t.labels.begin(), t.labels.end(), label) != t.labels.end();
}

// The two-operand equations the lowering takes (see the NOTE); nullopt for any other.
std::optional<Equation> ParseEquation(const std::string& equation) {
  std::string s;
  for (char c : equation) {
    if (c != ' ' && c != '\t') s.push_back(c);
  }
  const size_t arrow = s.find("->");
  const std::string_view lhs = std::string_view(s).substr(0, arrow);
  const size_t comma = lhs.find(',');
  if (comma == std::string_view::npos || lhs.find(',', comma + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  std::optional<Term> a = ParseTerm(lhs.substr(0, comma));
  std::optional<Term> b = ParseTerm(lhs.substr(comma + 1));
  if (!a || !b) return std::nullopt;
  Equation eq{*a, *b, {}};
  if (arrow != std::string::npos) {
    std::optional<Term> y = ParseTerm(std::string_view(s).substr(arrow + 2));
    if (!y) return std::nullopt;
    if ((a->ellipsis || b->ellipsis) && !y->ellipsis) return std::nullopt;  // invalid
    eq.y = *y;
    eq.y.ellipsis = a->ellipsis || b->ellipsis;
  } else {
    // Implicit output: the ellipsis, then the labels used once in ASCII order (upper case
    // first), as numpy and the reference kernel order them.
    eq.y.ellipsis = a->ellipsis || b->ellipsis;
    for (int i = 0; i < kNumLetters; ++i) {
      const int id = (i + 26) % kNumLetters;
      if (Has(*a, id) != Has(*b, id)) eq.y.labels.push_back(id);
    }
  }
  for (int id : eq.y.labels) {
    if (!Has(*a, id) && !Has(*b, id)) return std::nullopt;  // invalid
  }
  return eq;
}

bool SameDim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

// What the graph proves about a value's rank and dims beyond its declared type, for the
// operands of an Einsum (see the NOTE on dims): it walks back through the producers that keep,
// permute or broadcast dims (elementwise ops, Softmax, normalizations, Transpose, MatMul) and
// through Reshapes whose target is a constant or a Concat of constants and Gather(Shape(v), i)
// pieces. A dim comes out as a known size, a declared symbol, or unknown. Sizes are sound for
// every input the graph accepts: a broadcast output dim is taken from an operand only where
// that operand's size is not 1 or every other operand's is 1.
class DimTracer {
 public:
  explicit DimTracer(const GraphEditor& ed) : ed_(ed) {}

  std::optional<int64_t> Rank(int v, int depth = 0) const {
    if (v == kNoValue || depth > kMaxDepth) return std::nullopt;
    const ValueType& t = ed_.value(v).type;
    if (t.has_shape) return static_cast<int64_t>(t.dims.size());
    if (const OwnedTensor* c = ed_.Constant(v)) return c->shape().rank();
    const Node* node = Producer(v);
    if (node == nullptr) return std::nullopt;
    switch (Kind(*node)) {
      case OpKind::kSameShape:
        return Rank(node->inputs[0], depth + 1);
      case OpKind::kTranspose:
        if (node->FindAttribute("perm") != nullptr) {
          return static_cast<int64_t>(node->GetInts("perm").size());
        }
        return Rank(node->inputs[0], depth + 1);
      case OpKind::kBroadcast: {
        int64_t r = 0;
        for (int in : node->inputs) {
          std::optional<int64_t> ri = Rank(in, depth + 1);
          if (!ri) return std::nullopt;
          r = std::max(r, *ri);
        }
        return r;
      }
      case OpKind::kReshape:
        return TargetLength(node->inputs[1], depth + 1);
      case OpKind::kMatMul: {
        std::optional<int64_t> ra = Rank(node->inputs[0], depth + 1);
        std::optional<int64_t> rb = Rank(node->inputs[1], depth + 1);
        if (!ra || !rb || *ra < 2 || *rb < 2) return std::nullopt;
        return std::max(*ra, *rb);
      }
      case OpKind::kOther:
        break;
    }
    // The index arithmetic of Reshape targets: Shape(v) is 1-D, Gather(data, indices) has
    // rank(data) - 1 + rank(indices).
    if (node->domain.empty() && node->op_type == "Shape") return 1;
    if (node->domain.empty() && node->op_type == "Gather" && node->inputs.size() == 2) {
      std::optional<int64_t> rd = Rank(node->inputs[0], depth + 1);
      std::optional<int64_t> ri = Rank(node->inputs[1], depth + 1);
      if (rd && ri && *rd >= 1) return *rd - 1 + *ri;
    }
    return std::nullopt;
  }

  // Dim `axis` of `v` (negative: from the end).
  Dim DimOf(int v, int64_t axis, int depth = 0) const {
    if (v == kNoValue || depth > kMaxDepth) return Dim{};
    const ValueType& t = ed_.value(v).type;
    std::optional<int64_t> rank = Rank(v, depth);
    const int64_t abs = axis >= 0 ? axis : (rank ? *rank + axis : -1);
    if (rank && (abs < 0 || abs >= *rank)) return Dim{};
    if (t.has_shape && abs >= 0) {
      const Dim& d = t.dims[static_cast<size_t>(abs)];
      if (d.known() || !d.symbol.empty()) return d;
    }
    if (const OwnedTensor* c = ed_.Constant(v)) {
      return abs >= 0 ? Dim{c->shape().dim(static_cast<int>(abs)), {}} : Dim{};
    }
    const Node* node = Producer(v);
    if (node == nullptr) return Dim{};
    switch (Kind(*node)) {
      case OpKind::kSameShape:
        return DimOf(node->inputs[0], axis, depth + 1);
      case OpKind::kTranspose: {
        std::vector<int64_t> perm = node->GetInts("perm");
        if (perm.empty()) {  // reversed
          if (!rank) return Dim{};
          return DimOf(node->inputs[0], *rank - 1 - abs, depth + 1);
        }
        const int64_t r = static_cast<int64_t>(perm.size());
        const int64_t a = axis >= 0 ? axis : r + axis;
        if (a < 0 || a >= r) return Dim{};
        return DimOf(node->inputs[0], perm[static_cast<size_t>(a)], depth + 1);
      }
      case OpKind::kBroadcast:
        if (axis >= 0 && !rank) return Dim{};
        return BroadcastDim(node->inputs, axis < 0 ? axis : axis - *rank, depth + 1);
      case OpKind::kReshape:
        return ReshapeDim(*node, abs, depth + 1);
      case OpKind::kMatMul: {
        if (axis >= 0 && !rank) return Dim{};
        const int64_t j = axis < 0 ? axis : axis - *rank;
        if (j == -1) return DimOf(node->inputs[1], -1, depth + 1);
        if (j == -2) return DimOf(node->inputs[0], -2, depth + 1);
        return BroadcastDim(node->inputs, j, depth + 1);
      }
      case OpKind::kOther:
        return Dim{};
    }
    return Dim{};
  }

 private:
  static constexpr int kMaxDepth = 48;

  enum class OpKind { kSameShape, kTranspose, kBroadcast, kReshape, kMatMul, kOther };

  // The live producer of `v` when `v` is its first output.
  const Node* Producer(int v) const {
    const int p = ed_.Producer(v);
    if (p < 0) return nullptr;
    const Node& node = ed_.node(p);
    return !node.outputs.empty() && node.outputs[0] == v ? &node : nullptr;
  }

  static OpKind Kind(const Node& n) {
    static const std::set<std::string_view> kSame = {"Relu",
                                                     "Sigmoid",
                                                     "Tanh",
                                                     "Softmax",
                                                     "LogSoftmax",
                                                     "Erf",
                                                     "Exp",
                                                     "Log",
                                                     "Neg",
                                                     "Abs",
                                                     "Sqrt",
                                                     "Reciprocal",
                                                     "Cast",
                                                     "Identity",
                                                     "Dropout",
                                                     "Clip",
                                                     "LeakyRelu",
                                                     "HardSigmoid",
                                                     "HardSwish",
                                                     "Softplus",
                                                     "Floor",
                                                     "Ceil",
                                                     "Round",
                                                     "Sign",
                                                     "Not",
                                                     "PRelu",
                                                     "Elu",
                                                     "Selu",
                                                     "Celu",
                                                     "LayerNormalization",
                                                     "BatchNormalization",
                                                     "InstanceNormalization"};
    static const std::set<std::string_view> kBroadcastOps = {
        "Add",   "Sub",   "Mul",  "Div",     "Pow", "Max", "Min",
        "Where", "Equal", "Less", "Greater", "And", "Or"};
    if (n.domain == kKilnDomain) {
      return n.op_type == kLayerNormalizationOp || n.op_type == kGeluOp ? OpKind::kSameShape
                                                                        : OpKind::kOther;
    }
    if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] == kNoValue) return OpKind::kOther;
    if (kSame.count(n.op_type)) return OpKind::kSameShape;
    for (int in : n.inputs) {
      if (in == kNoValue) return OpKind::kOther;
    }
    if (kBroadcastOps.count(n.op_type)) return OpKind::kBroadcast;
    if (n.op_type == "Transpose") return OpKind::kTranspose;
    if (n.op_type == "Reshape" && n.inputs.size() == 2 && n.GetInt("allowzero", 0) == 0) {
      return OpKind::kReshape;
    }
    if (n.op_type == "MatMul" && n.inputs.size() == 2) return OpKind::kMatMul;
    return OpKind::kOther;
  }

  // Dim j (negative) of the numpy broadcast of `inputs`.
  Dim BroadcastDim(const std::vector<int>& inputs, int64_t j, int depth) const {
    std::vector<Dim> dims;
    std::vector<int> unranked;
    for (int in : inputs) {
      std::optional<int64_t> r = Rank(in, depth);
      if (!r) {
        unranked.push_back(in);
        continue;
      }
      if (*r < -j) continue;  // absent: acts as 1
      dims.push_back(DimOf(in, j, depth));
    }
    // A known size other than 1 is the output's (a valid broadcast has the others 1 or equal).
    for (const Dim& d : dims) {
      if (d.known() && d.value != 1) return d;
    }
    if (!unranked.empty()) {
      // Only an input of unknown rank reaches this dim: it must have the output's rank here.
      return dims.empty() && unranked.size() == 1 ? DimOf(unranked[0], j, depth) : Dim{};
    }
    std::optional<Dim> found;
    for (const Dim& d : dims) {
      if (d.known()) continue;  // a 1
      if (d.symbol.empty() || (found && found->symbol != d.symbol)) return Dim{};
      found = d;
    }
    return found ? *found : Dim{1, {}};
  }

  // The length of a Reshape target (rank-1 INT64).
  std::optional<int64_t> TargetLength(int s, int depth) const {
    if (const OwnedTensor* c = ed_.Constant(s)) return c->num_elements();
    const ValueType& t = ed_.value(s).type;
    if (t.has_shape && t.dims.size() == 1 && t.dims[0].known()) return t.dims[0].value;
    const Node* node = Producer(s);
    if (node == nullptr || !node->domain.empty() || depth > kMaxDepth) return std::nullopt;
    if (node->op_type == "Concat") {
      int64_t n = 0;
      for (int in : node->inputs) {
        std::optional<int64_t> ni = TargetLength(in, depth + 1);
        if (!ni) return std::nullopt;
        n += *ni;
      }
      return n;
    }
    if (node->op_type == "Unsqueeze") {
      std::optional<int64_t> r = Rank(node->inputs[0], depth + 1);
      if (r && *r == 0) return 1;
    }
    if (node->op_type == "Shape" && node->FindAttribute("start") == nullptr &&
        node->FindAttribute("end") == nullptr) {
      return Rank(node->inputs[0], depth + 1);
    }
    return std::nullopt;
  }

  // Dim `abs` of the output of Reshape `node`.
  Dim ReshapeDim(const Node& node, int64_t abs, int depth) const {
    if (abs < 0) return Dim{};
    int s = node.inputs[1];
    int64_t offset = abs;
    // Find the Concat piece (or the whole target) holding entry `abs`.
    for (int guard = 0; guard < 2; ++guard) {
      const Node* cat = Producer(s);
      if (cat == nullptr || cat->op_type != "Concat" || !cat->domain.empty()) break;
      bool found = false;
      for (int in : cat->inputs) {
        std::optional<int64_t> n = TargetLength(in, depth);
        if (!n) return Dim{};
        if (offset < *n) {
          s = in;
          found = true;
          break;
        }
        offset -= *n;
      }
      if (!found) return Dim{};
    }
    std::optional<int64_t> entry = EntryValue(s, offset, depth);
    if (entry) {
      if (*entry > 0) return Dim{*entry, {}};
      if (*entry == 0) return DimOf(node.inputs[0], abs, depth);  // copies the input's dim
      return Dim{};
    }
    // A runtime entry that is some tensor's dim (>= 0; a 0 would copy: then unknown).
    Dim d = EntryDim(s, offset, depth);
    return d.known() && d.value == 0 ? Dim{} : d;
  }

  // Entry `i` of a constant INT64 vector (or scalar) `s`.
  std::optional<int64_t> EntryValue(int s, int64_t i, int depth) const {
    const OwnedTensor* c = ed_.Constant(s);
    if (c == nullptr) {
      const Node* node = Producer(s);
      if (node != nullptr && node->domain.empty() && depth <= kMaxDepth &&
          (node->op_type == "Unsqueeze" || node->op_type == "Squeeze" ||
           node->op_type == "Reshape" || node->op_type == "Identity")) {
        return EntryValue(node->inputs[0], i, depth + 1);
      }
      return std::nullopt;
    }
    if (c->dtype() != DataType::kInt64 || i >= c->num_elements()) return std::nullopt;
    return c->data<const int64_t>()[i];
  }

  // Entry `i` of INT64 vector `s` (entry 0 when it has one element) when it is a constant or a
  // known dim.
  std::optional<int64_t> KnownEntry(int s, int64_t i, int depth) const {
    if (depth > kMaxDepth) return std::nullopt;
    std::optional<int64_t> n = TargetLength(s, depth);
    if (!n) {
      std::optional<int64_t> r = Rank(s, depth);
      if (r && *r == 0) n = 1;  // a scalar
    }
    if (!n) return std::nullopt;
    const int64_t at = *n == 1 ? 0 : i;
    if (std::optional<int64_t> c = EntryValue(s, at, depth)) return c;
    const Dim d = EntryDim(s, at, depth);
    return d.known() ? std::optional<int64_t>(d.value) : std::nullopt;
  }

  // Entry `i` of a runtime INT64 vector `s` made from Shape(v): Gather(Shape(v), constant),
  // Shape(v) itself, through Unsqueeze / Squeeze / Cast, and products, sums and quotients of
  // known entries.
  Dim EntryDim(int s, int64_t i, int depth) const {
    const Node* node = Producer(s);
    if (node == nullptr || !node->domain.empty() || depth > kMaxDepth) return Dim{};
    if (node->op_type == "Unsqueeze" || node->op_type == "Squeeze" || node->op_type == "Cast" ||
        node->op_type == "Identity") {
      return EntryDim(node->inputs[0], i, depth + 1);
    }
    if (node->op_type == "Shape" && node->FindAttribute("start") == nullptr &&
        node->FindAttribute("end") == nullptr) {
      return DimOf(node->inputs[0], i, depth + 1);
    }
    if ((node->op_type == "Mul" || node->op_type == "Div" || node->op_type == "Add") &&
        node->inputs.size() == 2) {
      // Arithmetic on known entries (MaxViT's grid partition: (H / p) * (W / p)), numpy
      // broadcasting a single-element operand.
      std::optional<int64_t> x = KnownEntry(node->inputs[0], i, depth + 1);
      std::optional<int64_t> y = KnownEntry(node->inputs[1], i, depth + 1);
      if (!x || !y || *x < 0 || *y < 0) return Dim{};
      if (node->op_type == "Mul") return Dim{*x * *y, {}};
      if (node->op_type == "Add") return Dim{*x + *y, {}};
      return *y > 0 ? Dim{*x / *y, {}} : Dim{};
    }
    if (node->op_type == "Gather" && node->inputs.size() == 2 && node->GetInt("axis", 0) == 0) {
      std::optional<int64_t> index = EntryValue(node->inputs[1], i, depth + 1);
      const Node* shape = Producer(node->inputs[0]);
      if (!index || shape == nullptr || shape->op_type != "Shape" || !shape->domain.empty() ||
          shape->FindAttribute("start") != nullptr || shape->FindAttribute("end") != nullptr) {
        return Dim{};
      }
      return DimOf(shape->inputs[0], *index, depth + 1);
    }
    return Dim{};
  }

  const GraphEditor& ed_;
};

// An operand as the lowering sees it: its value, rank, ellipsis rank and the dim of each
// position (unknown where the type says nothing).
struct Operand {
  int value = kNoValue;
  const Term* term = nullptr;
  int64_t ell = 0;        // dims the ellipsis stands for
  std::vector<Dim> dims;  // one per dim: the ellipsis dims, then one per label
  // Position of `label` in the operand, or -1.
  int64_t Pos(int label) const {
    const auto it = std::find(term->labels.begin(), term->labels.end(), label);
    return it == term->labels.end() ? -1 : ell + (it - term->labels.begin());
  }
};

std::optional<Operand> MakeOperand(const DimTracer& tracer, int value, const Term& term) {
  Operand o;
  o.value = value;
  o.term = &term;
  const int64_t letters = static_cast<int64_t>(term.labels.size());
  std::optional<int64_t> rank = tracer.Rank(value);
  if (term.ellipsis) {
    if (!rank || *rank < letters) return std::nullopt;
    o.ell = *rank - letters;
  } else if (rank && *rank != letters) {
    return std::nullopt;  // the reference would reject it
  }
  const int64_t r = o.ell + letters;
  for (int64_t i = 0; i < r; ++i) o.dims.push_back(tracer.DimOf(value, i - r));
  return o;
}

// Broadcast of two dims as MatMul's batch dims: the known one when the other is 1, the common
// one when provably equal, else unknown.
Dim BroadcastDim(const Dim& a, const Dim& b) {
  if (a.known() && a.value == 1) return b;
  if (b.known() && b.value == 1) return a;
  if (SameDim(a, b)) return a;
  return Dim{};
}

ValueType FloatType(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

// One Reshape target: `dims` are the wanted dims; `same[i]` says that input dim i is output
// dim i (entry 0 copies it). Returns the INT64 entries, or nullopt when more than one size is
// unknown or a known size is 0 (Reshape's 0 would copy instead).
std::optional<std::vector<int64_t>> ReshapeTarget(const std::vector<Dim>& dims,
                                                  const std::vector<bool>& same) {
  std::vector<int64_t> target;
  int unknown = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (same[i]) {
      target.push_back(0);
    } else if (dims[i].known()) {
      if (dims[i].value == 0) return std::nullopt;
      target.push_back(dims[i].value);
    } else {
      if (++unknown > 1) return std::nullopt;
      target.push_back(-1);
    }
  }
  return target;
}

// The product of `dims` as one dim: known when every factor is, else unknown.
Dim Product(const std::vector<Dim>& dims) {
  if (dims.size() == 1) return dims[0];
  int64_t p = 1;
  for (const Dim& d : dims) {
    if (!d.known()) return Dim{};
    p *= d.value;
  }
  return Dim{p, {}};
}

OwnedTensor Int64Vector(const std::vector<int64_t>& values) {
  Result<OwnedTensor> t =
      OwnedTensor::Allocate(DataType::kInt64, Shape({static_cast<int64_t>(values.size())}));
  KILN_CHECK(t.ok(), t.status().ToString());
  std::copy(values.begin(), values.end(), t->data<int64_t>());
  return std::move(t).value();
}

bool IsIdentity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Builds the nodes of one lowering. Their values and Reshape shape constants enter the graph as
// they are made; the nodes only at Commit (a lowering given up half way leaves unused values,
// which Finish drops).
class Lowering {
 public:
  Lowering(GraphEditor& ed, std::string base) : ed_(ed), base_(std::move(base)) {}

  // value -> Transpose(value, perm) unless perm is the identity.
  int Transpose(int value, const std::vector<int64_t>& perm, const std::vector<Dim>& in_dims,
                std::vector<Dim>* out_dims, int out = kNoValue) {
    std::vector<Dim> dims;
    for (int64_t p : perm) dims.push_back(in_dims[static_cast<size_t>(p)]);
    *out_dims = dims;
    if (IsIdentity(perm)) return value;
    Node n;
    n.op_type = "Transpose";
    n.inputs = {value};
    n.attributes.push_back(Attribute::Ints("perm", perm));
    return Add(std::move(n), "transpose", FloatType(std::move(dims)), out);
  }

  // value -> Reshape(value, target) unless the target keeps every dim.
  int Reshape(int value, const std::vector<int64_t>& target, std::vector<Dim> dims, int64_t in_rank,
              int out = kNoValue) {
    if (static_cast<int64_t>(target.size()) == in_rank &&
        std::all_of(target.begin(), target.end(), [](int64_t v) { return v == 0; })) {
      return value;
    }
    Node n;
    n.op_type = "Reshape";
    n.inputs = {value, ed_.AddConstant(base_ + "_shape", Int64Vector(target))};
    return Add(std::move(n), "reshape", FloatType(std::move(dims)), out);
  }

  int MatMul(int a, int b, std::vector<Dim> dims, int out = kNoValue) {
    Node n;
    n.op_type = "MatMul";
    n.inputs = {a, b};
    return Add(std::move(n), "matmul", FloatType(std::move(dims)), out);
  }

  // The last node writes `out` (the Einsum's output) instead of a new value.
  void RetargetLast(int out) {
    KILN_CHECK(!nodes_.empty(), "einsum_lowering: no node to retarget");
    nodes_.back().outputs = {out};
  }
  bool empty() const { return nodes_.empty(); }

  void Commit(int einsum) {
    ed_.RemoveNode(einsum);
    for (Node& n : nodes_) ed_.AddNode(std::move(n));
  }

 private:
  int Add(Node n, const char* what, ValueType type, int out) {
    n.name = fmt::format("{}_{}{}", base_, what, nodes_.size());
    const int v = out != kNoValue ? out : ed_.AddValue(n.name, std::move(type));
    n.outputs = {v};
    nodes_.push_back(std::move(n));
    return v;
  }

  GraphEditor& ed_;
  std::string base_;
  std::vector<Node> nodes_;
};

// Lowers Einsum node `n`; false (the graph unchanged, apart from unused constants and values
// that Finish drops) when the node is not one the pass takes.
bool LowerEinsum(GraphEditor& ed, int n) {
  const Node& node = ed.node(n);
  if (node.inputs.size() != 2 || node.outputs.size() != 1 || !node.has_input(0) ||
      !node.has_input(1) || !IsFloat32(ed, node.inputs[0]) || !IsFloat32(ed, node.inputs[1])) {
    return false;
  }
  const Attribute* attr = node.FindAttribute("equation");
  if (attr == nullptr || attr->type != AttributeType::kString) return false;
  std::optional<Equation> eq = ParseEquation(attr->s);
  if (!eq) return false;
  const DimTracer tracer(ed);
  std::optional<Operand> a = MakeOperand(tracer, node.inputs[0], eq->a);
  std::optional<Operand> b = MakeOperand(tracer, node.inputs[1], eq->b);
  if (!a || !b) return false;
  const Term& y = eq->y;
  // Classify the labels.
  std::vector<int> batch, m, nl, k;
  for (int l : y.labels) {
    const bool in_a = Has(eq->a, l), in_b = Has(eq->b, l);
    (in_a && in_b ? batch : in_a ? m : nl).push_back(l);
  }
  for (int l : eq->a.labels) {
    if (Has(y, l)) continue;
    if (!Has(eq->b, l)) return false;  // summed over A alone
    k.push_back(l);
  }
  for (int l : eq->b.labels) {
    if (!Has(y, l) && !Has(eq->a, l)) return false;  // summed over B alone
  }
  std::vector<Dim> k_dims;
  for (int l : k) {
    const Dim& da = a->dims[static_cast<size_t>(a->Pos(l))];
    const Dim& db = b->dims[static_cast<size_t>(b->Pos(l))];
    if (!SameDim(da, db)) return false;
    k_dims.push_back(da.known() ? da : db);
  }
  auto dims_of = [](const Operand& o, const std::vector<int>& labels) {
    std::vector<Dim> d;
    for (int l : labels) d.push_back(o.dims[static_cast<size_t>(o.Pos(l))]);
    return d;
  };
  const std::vector<Dim> m_dims = dims_of(*a, m), n_dims = dims_of(*b, nl);
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t nm = static_cast<int64_t>(m.size()), nn = static_cast<int64_t>(nl.size()),
                nk = static_cast<int64_t>(k.size());
  // B without batch dims: A keeps its m dims as MatMul batch dims (see the NOTE).
  const bool rows_batched = nb == 0 && b->ell == 0 && nm > 0;
  // Batch dims of the product ([ellipsis..., batch labels...]), right-aligned broadcast.
  const int64_t ell = std::max(a->ell, b->ell);
  std::vector<Dim> prod_batch(static_cast<size_t>(ell));
  for (int64_t i = 0; i < ell; ++i) {
    const int64_t ia = i - (ell - a->ell), ib = i - (ell - b->ell);
    const Dim da = ia >= 0 ? a->dims[static_cast<size_t>(ia)] : Dim{1, {}};
    const Dim db = ib >= 0 ? b->dims[static_cast<size_t>(ib)] : Dim{1, {}};
    prod_batch[static_cast<size_t>(i)] = BroadcastDim(da, db);
  }
  for (int l : batch) {
    prod_batch.push_back(BroadcastDim(a->dims[static_cast<size_t>(a->Pos(l))],
                                      b->dims[static_cast<size_t>(b->Pos(l))]));
  }

  Lowering low(ed, ed.value(node.outputs[0]).name + "_einsum");
  auto append = [](std::vector<Dim> v, const std::vector<Dim>& w) {
    v.insert(v.end(), w.begin(), w.end());
    return v;
  };
  // A -> [ell, batch, m, k] -> [ell, batch, M, K] (rows_batched: [ell, m..., K]).
  std::vector<int64_t> perm_a(static_cast<size_t>(a->ell));
  std::iota(perm_a.begin(), perm_a.end(), 0);
  for (const std::vector<int>* group : {&batch, &m, &k}) {
    for (int l : *group) perm_a.push_back(a->Pos(l));
  }
  std::vector<Dim> at_dims;
  int av = low.Transpose(a->value, perm_a, a->dims, &at_dims);
  {
    const int64_t lead = a->ell + nb + (rows_batched ? nm : 0);
    std::vector<Dim> want(at_dims.begin(), at_dims.begin() + lead);
    std::vector<bool> same(static_cast<size_t>(lead), true);
    if (!rows_batched) {
      want.push_back(nm == 0 ? Dim{1, {}} : Product(m_dims));
      same.push_back(nm == 1);
    }
    want.push_back(nk == 0 ? Dim{1, {}} : Product(k_dims));
    same.push_back(nk == 1 && (rows_batched || nm == 1));
    std::optional<std::vector<int64_t>> target = ReshapeTarget(want, same);
    if (!target) return false;
    at_dims = want;
    av = low.Reshape(av, *target, want, static_cast<int64_t>(perm_a.size()));
  }
  // B -> [ell, batch, k, n] -> [ell, batch, K, N].
  std::vector<int64_t> perm_b(static_cast<size_t>(b->ell));
  std::iota(perm_b.begin(), perm_b.end(), 0);
  for (const std::vector<int>* group : {&batch, &k, &nl}) {
    for (int l : *group) perm_b.push_back(b->Pos(l));
  }
  std::vector<Dim> bt_dims;
  int bv = low.Transpose(b->value, perm_b, b->dims, &bt_dims);
  {
    const int64_t lead = b->ell + nb;
    std::vector<Dim> want(bt_dims.begin(), bt_dims.begin() + lead);
    std::vector<bool> same(static_cast<size_t>(lead), true);
    want.push_back(nk == 0 ? Dim{1, {}} : Product(k_dims));
    same.push_back(nk == 1);
    want.push_back(nn == 0 ? Dim{1, {}} : Product(n_dims));
    same.push_back(nn == 1 && nk == 1);
    std::optional<std::vector<int64_t>> target = ReshapeTarget(want, same);
    if (!target) return false;
    bv = low.Reshape(bv, *target, want, static_cast<int64_t>(perm_b.size()));
  }
  // MatMul -> [ell, batch, M, N] (rows_batched: [ell_a, m..., N]).
  std::vector<Dim> mm_dims =
      rows_batched ? std::vector<Dim>(at_dims.begin(), at_dims.end() - 1) : prod_batch;
  if (!rows_batched) mm_dims.push_back(at_dims[at_dims.size() - 2]);  // M
  mm_dims.push_back(nn == 0 ? Dim{1, {}} : Product(n_dims));
  int yv = low.MatMul(av, bv, mm_dims);
  // -> [ell, batch, m..., n...].
  std::vector<Dim> split = rows_batched ? std::vector<Dim>(mm_dims.begin(), mm_dims.end() - 1)
                                        : append(prod_batch, m_dims);
  split = append(split, n_dims);
  {
    const int64_t lead = rows_batched ? ell + nm : ell + nb;
    std::vector<bool> same(split.size(), false);
    std::fill(same.begin(), same.begin() + lead, true);
    if (!rows_batched && nm == 1) same[static_cast<size_t>(lead)] = true;
    if (nn == 1 && (rows_batched || nm == 1)) same[split.size() - 1] = true;
    std::optional<std::vector<int64_t>> target = ReshapeTarget(split, same);
    if (!target) return false;
    yv = low.Reshape(yv, *target, split, static_cast<int64_t>(mm_dims.size()));
  }
  // -> Y's order.
  std::vector<int> order;  // labels of `split` after the ellipsis dims
  for (const std::vector<int>* group : {&batch, &m, &nl}) {
    order.insert(order.end(), group->begin(), group->end());
  }
  std::vector<int64_t> perm_y(static_cast<size_t>(ell));
  std::iota(perm_y.begin(), perm_y.end(), 0);
  for (int l : y.labels) {
    perm_y.push_back(ell + (std::find(order.begin(), order.end(), l) - order.begin()));
  }
  std::vector<Dim> y_dims;
  low.Transpose(yv, perm_y, split, &y_dims);
  // The last node writes the Einsum's output.
  low.RetargetLast(node.outputs[0]);
  Value& out = ed.graph().mutable_value(node.outputs[0]);
  if (!out.type.has_shape) out.type = FloatType(std::move(y_dims));
  low.Commit(n);
  return true;
}

class EinsumLoweringPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    for (int n : ed.LiveNodes()) {
      if (!ed.alive(n) || !IsOnnxOp(ed.node(n), "Einsum")) continue;
      if (LowerEinsum(ed, n)) ++changes;
    }
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateEinsumLoweringPass() { return std::make_unique<EinsumLoweringPass>(); }

}  // namespace kiln::opt
