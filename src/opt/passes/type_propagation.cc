// SPDX-License-Identifier: Apache-2.0
// type_propagation: fills in the dtype and dims that ONNX's shape inference left unknown, so the
// folding and fusion passes can prove what they need on models with a symbolic batch dim.
//
// NOTE: libonnx's inference stops at a Reshape whose target shape is computed at run time
// (Shape -> Gather -> Unsqueeze -> Concat, as PyTorch exports `x.view(b, t, h, d)`), and in
// lenient mode every value after it loses its type. This pass walks the nodes in order and
// derives output types from input types for the common ops: elementwise unary ops, broadcasting
// binary ops, MatMul, Gemm, Transpose, Softmax, ReduceMean, Reshape. For Reshape it tracks small
// INT64 "shape values" symbolically (Shape(x) gives x's dims, symbols included; Gather, Unsqueeze,
// Squeeze, Concat and Cast carry them through), so `view(b, t, -1)` keeps the batch symbol and
// resolves -1 when the known factors and symbols divide out. A dim is only ever filled in, never
// changed: known dims, symbols and dtypes already present are kept. Dims with the same symbol are
// taken to be equal, as ONNX's dim_param convention says.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "opt/pass.h"
#include "opt/passes/pattern.h"

namespace kiln::opt {
namespace {

using Dims = std::vector<Dim>;

// Marks a Reshape target entry of -1 ("infer this dim") in a shape value. Not a valid ONNX
// dim_param, and it never leaves this file: only ReshapeDims reads shape values.
const std::string kInferMarker = "<-1>";

// Merges `derived` into `type`; returns true when anything was added.
bool Refine(ValueType& type, DataType dtype, const std::optional<Dims>& dims) {
  if (!type.is_tensor()) return false;
  bool changed = false;
  if (type.dtype == DataType::kInvalid && dtype != DataType::kInvalid) {
    type.dtype = dtype;
    changed = true;
  }
  if (!dims) return changed;
  if (!type.has_shape) {
    type.has_shape = true;
    type.dims = *dims;
    return true;
  }
  if (type.dims.size() != dims->size()) return changed;  // disagreement: keep what is declared
  for (size_t i = 0; i < dims->size(); ++i) {
    Dim& d = type.dims[i];
    const Dim& n = (*dims)[i];
    if (d.known() || !d.symbol.empty()) continue;
    if (n.known() || !n.symbol.empty()) {
      d = n;
      changed = true;
    }
  }
  return changed;
}

std::optional<Dims> DimsOf(const GraphEditor& ed, int v) {
  if (v == kNoValue) return std::nullopt;
  const ValueType& t = ed.value(v).type;
  if (!t.is_tensor() || !t.has_shape) return std::nullopt;
  return t.dims;
}

bool Same(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

std::optional<Dims> Broadcast(const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim one{1, {}};
    const Dim& x = i < r - a.size() ? one : a[i - (r - a.size())];
    const Dim& y = i < r - b.size() ? one : b[i - (r - b.size())];
    // An unknown dim against a known one must be 1 or equal to it: the result is the known one,
    // unless that is 1.
    if ((x.known() && x.value == 1) || (!x.known() && y.known() && y.value != 1))
      out[i] = y;
    else if ((y.known() && y.value == 1) || Same(x, y) || (x.known() && !y.known()))
      out[i] = x;
    else if (x.known() && y.known())
      return std::nullopt;  // invalid broadcast
    else
      out[i] = Dim{};
  }
  return out;
}

const std::set<std::string_view> kUnary = {"Relu",
                                           "Sigmoid",
                                           "Tanh",
                                           "Erf",
                                           "Sqrt",
                                           "Neg",
                                           "Exp",
                                           "Log",
                                           "Abs",
                                           "Reciprocal",
                                           "LeakyRelu",
                                           "HardSigmoid",
                                           "HardSwish",
                                           "Clip",
                                           "Softmax",
                                           "LogSoftmax",
                                           "Identity",
                                           "Dropout",
                                           "Elu",
                                           "Selu",
                                           "Softplus",
                                           "Floor",
                                           "Ceil",
                                           "Round",
                                           "Sin",
                                           "Cos",
                                           "LayerNormalization",
                                           "BatchNormalization",
                                           "InstanceNormalization"};
const std::set<std::string_view> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "PRelu"};

class TypePropagationPass final : public Pass {
 public:
  Result<int> Run(GraphEditor& ed, const OptimizerOptions&) const override {
    int changes = 0;
    // Symbolic INT64 vectors (shape values) by value id.
    std::map<int, Dims> sv;
    auto shape_value = [&](int v) -> std::optional<Dims> {
      auto it = sv.find(v);
      if (it != sv.end()) return it->second;
      const OwnedTensor* c = ed.Constant(v);
      if (c == nullptr || c->dtype() != DataType::kInt64 || c->shape().rank() > 1 ||
          c->num_elements() > 16) {
        return std::nullopt;
      }
      Dims d;
      for (int64_t i = 0; i < c->num_elements(); ++i) {
        const int64_t x = c->data<const int64_t>()[i];
        if (x >= 0)
          d.push_back(Dim{x, {}});
        else if (x == -1)
          d.push_back(Dim{-1, kInferMarker});
        else
          d.push_back(Dim{});
      }
      return d;
    };
    for (int n : ed.LiveNodes()) {
      const Node& node = ed.node(n);
      if (node.outputs.empty() || node.outputs[0] == kNoValue || !node.has_input(0)) continue;
      const int out = node.outputs[0];
      const std::string& op = node.op_type;
      const bool onnx = node.domain.empty();
      const int x = node.inputs[0];
      DataType dtype = ed.DtypeOf(x);
      std::optional<Dims> dims;
      // Shape values first (they feed Reshape below).
      if (onnx && op == "Shape") {
        if (std::optional<Dims> d = DimsOf(ed, x)) {
          const int64_t r = static_cast<int64_t>(d->size());
          int64_t b = node.GetInt("start", 0), e = node.GetInt("end", r);
          if (b < 0) b += r;
          if (e < 0) e += r;
          b = std::clamp<int64_t>(b, 0, r);
          e = std::clamp<int64_t>(e, b, r);
          sv[out] = Dims(d->begin() + b, d->begin() + e);
        }
        continue;
      }
      if (onnx && op == "Gather" && node.GetInt("axis", 0) == 0 && node.has_input(1)) {
        std::optional<Dims> s = shape_value(x);
        std::optional<Dims> idx = shape_value(node.inputs[1]);
        const OwnedTensor* ic = ed.Constant(node.inputs[1]);
        if (s && idx && ic != nullptr) {
          Dims picked;
          bool ok = true;
          for (const Dim& i : *idx) {
            int64_t k = i.value;
            if (k < 0) k += static_cast<int64_t>(s->size());
            if (k < 0 || k >= static_cast<int64_t>(s->size()))
              ok = false;
            else
              picked.push_back((*s)[static_cast<size_t>(k)]);
          }
          if (ok) sv[out] = picked;
        }
      } else if (onnx &&
                 (op == "Unsqueeze" || op == "Squeeze" || op == "Cast" || op == "Identity")) {
        if (std::optional<Dims> s = shape_value(x); s && s->size() == 1) sv[out] = *s;
      } else if (onnx && op == "Concat") {
        Dims all;
        bool ok = true;
        for (int in : node.inputs) {
          std::optional<Dims> s = in == kNoValue ? std::nullopt : shape_value(in);
          if (!s) {
            ok = false;
            break;
          }
          all.insert(all.end(), s->begin(), s->end());
        }
        if (ok) sv[out] = all;
      }
      if (!onnx && node.domain != "ai.kiln") continue;
      if (kUnary.count(op) > 0 || (!onnx && op == "Gelu")) {
        dims = DimsOf(ed, x);
      } else if (onnx && op == "Cast") {
        dims = DimsOf(ed, x);
        dtype = DataType::kInvalid;  // `to` decides; left to the declared type
      } else if (onnx && kBinary.count(op) > 0 && node.has_input(1)) {
        std::optional<Dims> a = DimsOf(ed, x), b = DimsOf(ed, node.inputs[1]);
        if (a && b) dims = Broadcast(*a, *b);
        if (dtype == DataType::kInvalid) dtype = ed.DtypeOf(node.inputs[1]);
      } else if (onnx && op == "MatMul" && node.has_input(1)) {
        std::optional<Dims> a = DimsOf(ed, x), b = DimsOf(ed, node.inputs[1]);
        if (a && b && a->size() >= 2 && b->size() >= 2) {
          Dims ba(a->begin(), a->end() - 2), bb(b->begin(), b->end() - 2);
          if (std::optional<Dims> lead = Broadcast(ba, bb)) {
            dims = *lead;
            dims->push_back((*a)[a->size() - 2]);
            dims->push_back(b->back());
          }
        }
      } else if (onnx && op == "Transpose") {
        std::optional<Dims> a = DimsOf(ed, x);
        std::vector<int64_t> perm = node.GetInts("perm");
        if (a && perm.empty()) {
          for (int64_t i = static_cast<int64_t>(a->size()) - 1; i >= 0; --i) perm.push_back(i);
        }
        if (a && perm.size() == a->size()) {
          dims = Dims();
          for (int64_t p : perm) {
            if (p < 0 || p >= static_cast<int64_t>(a->size())) {
              dims.reset();
              break;
            }
            dims->push_back((*a)[static_cast<size_t>(p)]);
          }
        }
      } else if (onnx && op == "ReduceMean" && node.inputs.size() == 1) {
        std::optional<Dims> a = DimsOf(ed, x);
        std::vector<int64_t> axes = node.GetInts("axes");
        if (a && !axes.empty() && node.GetInt("keepdims", 1) == 1) {
          dims = *a;
          const int64_t r = static_cast<int64_t>(a->size());
          for (int64_t ax : axes) {
            if (ax < 0) ax += r;
            if (ax < 0 || ax >= r) {
              dims.reset();
              break;
            }
            (*dims)[static_cast<size_t>(ax)] = Dim{1, {}};
          }
        }
      } else if (onnx && op == "Reshape" && node.has_input(1)) {
        dims = ReshapeDims(DimsOf(ed, x), shape_value(node.inputs[1]),
                           node.GetInt("allowzero", 0) != 0);
      } else {
        continue;
      }
      if (Refine(ed.graph().mutable_value(out).type, dtype, dims)) ++changes;
    }
    return changes;
  }

 private:
  static std::optional<Dims> ReshapeDims(const std::optional<Dims>& in,
                                         const std::optional<Dims>& target, bool allowzero) {
    if (!target) return std::nullopt;
    Dims out;
    int minus_one = -1;
    for (size_t i = 0; i < target->size(); ++i) {
      const Dim& t = (*target)[i];
      if (t.symbol == kInferMarker) {
        if (minus_one >= 0) return std::nullopt;  // two -1 entries: invalid
        minus_one = static_cast<int>(i);
        out.push_back(Dim{});
      } else if (t.known() && t.value == 0 && !allowzero) {
        if (!in || i >= in->size()) return std::nullopt;
        out.push_back((*in)[i]);
      } else if (t.known() || !t.symbol.empty()) {
        out.push_back(t);
      } else {
        out.push_back(Dim{});  // unknown entry
      }
    }
    if (minus_one >= 0 && in) {
      // Known product and symbols of the input, divided by those of the other entries.
      int64_t known = 1;
      std::vector<std::string> syms;
      for (const Dim& d : *in) {
        if (d.known())
          known *= d.value;
        else if (!d.symbol.empty())
          syms.push_back(d.symbol);
        else
          return out;
      }
      for (size_t i = 0; i < out.size(); ++i) {
        if (static_cast<int>(i) == minus_one) continue;
        const Dim& d = out[i];
        if (d.known()) {
          if (d.value == 0 || known % d.value != 0) return out;
          known /= d.value;
        } else if (!d.symbol.empty()) {
          auto it = std::find(syms.begin(), syms.end(), d.symbol);
          if (it == syms.end()) return out;
          syms.erase(it);
        } else {
          return out;
        }
      }
      if (syms.empty())
        out[static_cast<size_t>(minus_one)] = Dim{known, {}};
      else if (syms.size() == 1 && known == 1)
        out[static_cast<size_t>(minus_one)] = Dim{-1, syms[0]};
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateTypePropagationPass() {
  return std::make_unique<TypePropagationPass>();
}

}  // namespace kiln::opt
