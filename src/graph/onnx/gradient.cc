// SPDX-License-Identifier: Apache-2.0
// Expansion of Gradient nodes into backward-pass nodes (gradient.h).
//
// NOTE on the approach. As in the version adapter, the graph is rebuilt: every value is copied
// with its id unchanged, and the new values (intermediate gradients, constants) get fresh ids and
// names no value of the graph uses. A Gradient node refers to y by name, not as an input, so the
// stored node order need not put y's producer before it; the rebuilt node list (forward nodes
// plus each Gradient node's expansion in its place) is therefore sorted topologically again,
// which also catches any cycle the expansion would create.
//
// For one Gradient node the pass finds the forward set F (values depending on an x through
// differentiable inputs; zs stop the walk) and the backward set B (values y depends on). The
// nodes with an output in B and a differentiable input in F are the path; each must have a rule.
// Walking the path in reverse node order, each rule turns the gradient of the node's output into
// contributions to its inputs in F, and contributions to one value are added up.

#include "graph/onnx/gradient.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"

namespace kiln {
namespace {

std::string NodeLabel(const Node& node, int index) {
  if (!node.name.empty()) return fmt::format("node '{}'", node.name);
  return fmt::format("node #{} ({})", index, node.op_type);
}

bool IsGradientNode(const Node& n) {
  return n.op_type == "Gradient" && n.domain == kTrainingDomain;
}

// Positions of the inputs a rule differentiates through; nullopt for ops without a rule.
std::optional<std::vector<int>> DifferentiableInputs(const Node& n) {
  if (!n.domain.empty()) return std::nullopt;
  static const std::set<std::string, std::less<>> kBinary = {"Add", "Sub",    "Mul",
                                                             "Div", "MatMul", "Pow"};
  static const std::set<std::string, std::less<>> kUnary = {
      "Neg", "Identity", "Relu",      "Sigmoid",    "Tanh",    "Exp",
      "Log", "Sqrt",     "ReduceSum", "ReduceMean", "Reshape", "Transpose"};
  if (kBinary.count(n.op_type)) return std::vector<int>{0, 1};
  if (kUnary.count(n.op_type)) return std::vector<int>{0};
  return std::nullopt;
}

// Ops whose outputs never carry a gradient (integer results describing their input).
bool IsNonDifferentiable(const Node& n) {
  return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size");
}

bool IsFloating(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }

bool SameDims(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].known() && b[i].known() && a[i].value == b[i].value) continue;
    if (!a[i].known() && !b[i].known() && !a[i].symbol.empty() && a[i].symbol == b[i].symbol) {
      continue;
    }
    return false;
  }
  return true;
}

bool AllKnown(const std::vector<Dim>& d) {
  return std::all_of(d.begin(), d.end(), [](const Dim& x) { return x.known(); });
}

// Builds the expansion of one Gradient node into `graph` (values) and `nodes` (new nodes, added
// to the graph later in topological order).
class Expansion {
 public:
  Expansion(Graph& graph, const Graph& source, std::vector<Node>& nodes, const Node& grad,
            std::string label, int64_t opset)
      : graph_(graph),
        source_(source),
        nodes_(nodes),
        grad_(grad),
        label_(std::move(label)),
        opset_(opset) {}

  Status Run() {
    KILN_RETURN_IF_ERROR(ParseAttributes());
    KILN_RETURN_IF_ERROR(FindPath());
    const ValueType& y_type = source_.value(y_).type;
    if (!y_type.is_tensor() || !IsFloating(y_type.dtype)) {
      return Unimplemented(fmt::format("y '{}' must be a FLOAT or DOUBLE tensor, not {}", y_name_,
                                       y_type.ToString()));
    }
    dtype_ = y_type.dtype;
    for (int x : xs_) {
      const ValueType& t = source_.value(x).type;
      if (t.dtype != dtype_) {
        return Unimplemented(
            fmt::format("x '{}' is {}, y '{}' is {}: both must have one "
                        "floating type",
                        source_.value(x).name, t.ToString(), y_name_, y_type.ToString()));
      }
    }
    // Seed: ones of y's shape.
    KILN_ASSIGN_OR_RETURN(int one, Scalar(1.0));
    const int y_shape = Op("Shape", {y_}, {}, DataType::kInt64);
    grads_[y_] = Op("Expand", {one, y_shape}, {}, dtype_);
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
      const Node& n = source_.node(*it);
      const auto g = grads_.find(n.outputs[0]);
      if (g == grads_.end()) continue;
      KILN_RETURN_IF_ERROR(Backward(n, *it, g->second));
    }
    for (size_t i = 0; i < xs_.size(); ++i) {
      const int out = grad_.outputs[i];
      if (out == kNoValue) continue;
      Node n;
      n.name = UniqueNodeName(fmt::format("{}_grad_{}", grad_.name, i));
      n.outputs = {out};
      const auto g = grads_.find(xs_[i]);
      if (g != grads_.end()) {
        n.op_type = "Identity";
        n.inputs = {g->second};
      } else {
        KILN_ASSIGN_OR_RETURN(int zero, Scalar(0.0));
        n.op_type = "Expand";
        n.inputs = {zero, Op("Shape", {xs_[i]}, {}, DataType::kInt64)};
      }
      nodes_.push_back(std::move(n));
    }
    return Status::OK();
  }

 private:
  Status Invalid(std::string_view reason) const {
    return Status::InvalidArgument(fmt::format("Gradient: {} ({})", reason, label_));
  }
  Status Unimplemented(std::string_view reason) const {
    return Status::Unimplemented(fmt::format("Gradient: {} ({})", reason, label_));
  }

  Result<int> NamedValue(std::string_view what, const std::string& name) const {
    const int id = source_.FindValue(name);
    if (id < 0) {
      return Invalid(fmt::format("{} names '{}', which is not a value of the graph", what, name));
    }
    return id;
  }

  Status ParseAttributes() {
    const Attribute* xs = grad_.FindAttribute("xs");
    const Attribute* y = grad_.FindAttribute("y");
    if (xs == nullptr || xs->type != AttributeType::kStrings || xs->strings.empty()) {
      return Invalid("attribute 'xs' must be a non-empty list of value names");
    }
    if (y == nullptr || y->type != AttributeType::kString) {
      return Invalid("attribute 'y' must be a value name");
    }
    for (const std::string& name : xs->strings) {
      KILN_ASSIGN_OR_RETURN(int id, NamedValue("xs", name));
      xs_.push_back(id);
    }
    y_name_ = y->s;
    KILN_ASSIGN_OR_RETURN(y_, NamedValue("y", y_name_));
    if (const Attribute* zs = grad_.FindAttribute("zs")) {
      if (zs->type != AttributeType::kStrings) {
        return Invalid("attribute 'zs' must be a list of value names");
      }
      for (const std::string& name : zs->strings) {
        KILN_ASSIGN_OR_RETURN(int id, NamedValue("zs", name));
        zs_.insert(id);
      }
    }
    if (grad_.outputs.size() != xs_.size()) {
      return Invalid(fmt::format("{} outputs for {} xs (one gradient per x)", grad_.outputs.size(),
                                 xs_.size()));
    }
    return Status::OK();
  }

  Status FindPath() {
    // Forward: the first x each value depends on.
    for (size_t i = 0; i < xs_.size(); ++i) {
      if (!zs_.count(xs_[i])) origin_.emplace(xs_[i], static_cast<int>(i));
    }
    for (int i = 0; i < source_.num_nodes(); ++i) {
      const Node& n = source_.node(i);
      if (IsNonDifferentiable(n)) continue;
      std::optional<std::vector<int>> diff = DifferentiableInputs(n);
      std::vector<int> ins;
      if (diff) {
        for (int k : *diff) {
          if (n.has_input(k)) ins.push_back(n.inputs[static_cast<size_t>(k)]);
        }
      } else {
        ins = n.inputs;
        ins.insert(ins.end(), n.implicit_inputs.begin(), n.implicit_inputs.end());
      }
      std::optional<int> from;
      for (int v : ins) {
        const auto it = v == kNoValue ? origin_.end() : origin_.find(v);
        if (it != origin_.end()) from = from ? std::min(*from, it->second) : it->second;
      }
      if (!from) continue;
      for (int out : n.outputs) {
        if (out != kNoValue && !zs_.count(out)) origin_.emplace(out, *from);
      }
    }
    if (!origin_.count(y_)) {
      return Invalid(fmt::format("y '{}' does not depend on any of xs", y_name_));
    }
    // Backward: the values y depends on; the path is the nodes between.
    std::set<int> needed = {y_};
    for (int i = source_.num_nodes() - 1; i >= 0; --i) {
      const Node& n = source_.node(i);
      const bool feeds_y = std::any_of(n.outputs.begin(), n.outputs.end(),
                                       [&](int v) { return needed.count(v) > 0; });
      if (!feeds_y) continue;
      if (&n == &grad_) {
        return Invalid(fmt::format("y '{}' depends on this node's own outputs (a cycle)", y_name_));
      }
      for (int v : n.inputs) needed.insert(v);
      for (int v : n.implicit_inputs) needed.insert(v);
      if (IsNonDifferentiable(n)) continue;
      const bool on_path =
          std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return InF(v); });
      if (!on_path) continue;
      const int from = origin_.at(
          *std::find_if(n.outputs.begin(), n.outputs.end(), [&](int v) { return InF(v); }));
      if (!DifferentiableInputs(n) || n.outputs.size() != 1) {
        return Status::Unimplemented(fmt::format(
            "Gradient: op {} on the path from '{}' to '{}' has no gradient rule ({})", n.op_type,
            source_.value(xs_[static_cast<size_t>(from)]).name, y_name_, NodeLabel(n, i)));
      }
      if (n.op_type == "Pow" && n.has_input(1) && InF(n.inputs[1])) {
        return Status::Unimplemented(fmt::format(
            "Gradient: the exponent of Pow depends on '{}'; only a constant exponent has a "
            "gradient rule ({})",
            source_.value(xs_[static_cast<size_t>(origin_.at(n.inputs[1]))]).name,
            NodeLabel(n, i)));
      }
      path_.push_back(i);
    }
    std::reverse(path_.begin(), path_.end());
    return Status::OK();
  }

  bool InF(int v) const { return v != kNoValue && origin_.count(v) > 0 && !zs_.count(v); }

  std::string UniqueName(std::string_view hint) const {
    std::string name(hint);
    for (int i = 1; graph_.FindValue(name) >= 0; ++i) name = fmt::format("{}_{}", hint, i);
    return name;
  }
  std::string UniqueNodeName(std::string_view hint) {
    return fmt::format("{}_{}", hint, node_counter_++);
  }

  int NewValue(std::string_view hint, DataType dtype) {
    Value v;
    v.name = UniqueName(fmt::format("{}_{}", grad_.name.empty() ? "gradient" : grad_.name, hint));
    v.type.dtype = dtype;
    return graph_.AddValue(std::move(v));
  }

  // Appends node `op` with one output (dtype `dtype`) and returns the output's id.
  int Op(std::string op, std::vector<int> inputs, std::vector<Attribute> attributes,
         DataType dtype) {
    Node n;
    n.name = UniqueNodeName(fmt::format("{}_{}", grad_.name.empty() ? "gradient" : grad_.name, op));
    n.op_type = std::move(op);
    n.inputs = std::move(inputs);
    n.attributes = std::move(attributes);
    const int out = NewValue(n.op_type, dtype);
    n.outputs = {out};
    nodes_.push_back(std::move(n));
    return out;
  }
  int Op(std::string op, std::vector<int> inputs) {
    return Op(std::move(op), std::move(inputs), {}, dtype_);
  }

  Result<int> Scalar(double v) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(dtype_, Shape{}));
    if (dtype_ == DataType::kFloat64) {
      *t.data<double>() = v;
    } else {
      *t.data<float>() = static_cast<float>(v);
    }
    return Initializer("const", std::move(t));
  }

  int Initializer(std::string_view hint, OwnedTensor t) {
    Value v;
    v.name = UniqueName(fmt::format("{}_{}", grad_.name.empty() ? "gradient" : grad_.name, hint));
    v.type.dtype = t.dtype();
    v.type.has_shape = true;
    for (int64_t d : t.shape().dims()) v.type.dims.push_back(Dim{d, {}});
    v.constant = std::make_shared<const OwnedTensor>(std::move(t));
    return graph_.AddValue(std::move(v));
  }

  Result<int> Int64s(std::string_view hint, const std::vector<int64_t>& values) {
    KILN_ASSIGN_OR_RETURN(
        OwnedTensor t,
        OwnedTensor::Allocate(DataType::kInt64, Shape{static_cast<int64_t>(values.size())}));
    std::copy(values.begin(), values.end(), t.data<int64_t>());
    return Initializer(hint, std::move(t));
  }

  std::optional<std::vector<Dim>> DimsOf(int v) const {
    const Value& value = source_.value(v);
    if (value.constant) {
      std::vector<Dim> d;
      for (int64_t x : value.constant->shape().dims()) d.push_back(Dim{x, {}});
      return d;
    }
    if (!value.type.has_shape) return std::nullopt;
    return value.type.dims;
  }

  // `grad` (of shape `grad_dims`) summed over the axes along which `target` was broadcast, so it
  // gets `target`'s shape.
  Result<int> Unbroadcast(int grad, const std::optional<std::vector<Dim>>& grad_dims, int target,
                          const Node& n, int index) {
    const std::optional<std::vector<Dim>> to = DimsOf(target);
    if (grad_dims && to && SameDims(*grad_dims, *to)) return grad;
    if (!grad_dims || !to || !AllKnown(*grad_dims) || !AllKnown(*to)) {
      return Status::Unimplemented(fmt::format(
          "Gradient: op {} may broadcast '{}' and its shape or the result's is not statically "
          "known ({})",
          n.op_type, source_.value(target).name, NodeLabel(n, index)));
    }
    const size_t out_rank = grad_dims->size(), in_rank = to->size();
    if (in_rank > out_rank) {
      return Status::InvalidArgument(
          fmt::format("Gradient: operand '{}' has a higher rank than the "
                      "result of op {} ({})",
                      source_.value(target).name, n.op_type, NodeLabel(n, index)));
    }
    std::vector<int64_t> axes, in_dims;
    for (size_t i = 0; i < out_rank; ++i) {
      if (i < out_rank - in_rank) {
        axes.push_back(static_cast<int64_t>(i));
        continue;
      }
      const int64_t d = (*to)[i - (out_rank - in_rank)].value;
      if (d == 1 && (*grad_dims)[i].value != 1) axes.push_back(static_cast<int64_t>(i));
    }
    for (const Dim& d : *to) in_dims.push_back(d.value);
    int reduced = grad;
    if (!axes.empty()) {
      if (opset_ >= 13) {
        KILN_ASSIGN_OR_RETURN(int axes_id, Int64s("axes", axes));
        reduced = Op("ReduceSum", {grad, axes_id}, {Attribute::Int("keepdims", 1)}, dtype_);
      } else {
        reduced = Op("ReduceSum", {grad},
                     {Attribute::Ints("axes", axes), Attribute::Int("keepdims", 1)}, dtype_);
      }
    }
    if (in_rank == out_rank) return reduced;
    KILN_ASSIGN_OR_RETURN(int shape_id, Int64s("shape", in_dims));
    return Op("Reshape", {reduced, shape_id});
  }

  void Accumulate(int value, int grad) {
    const auto [it, inserted] = grads_.emplace(value, grad);
    if (!inserted) it->second = Op("Add", {it->second, grad});
  }

  // Adds the contributions of node `n`, whose output has gradient `g`.
  Status Backward(const Node& n, int index, int g) {
    const std::string& op = n.op_type;
    const int y = n.outputs[0];
    const int a = n.inputs[0];
    const int b = n.has_input(1) ? n.inputs[1] : kNoValue;
    const std::optional<std::vector<Dim>> y_dims = DimsOf(y);
    auto to_a = [&](int contribution) -> Status {
      KILN_ASSIGN_OR_RETURN(int c, Unbroadcast(contribution, y_dims, a, n, index));
      Accumulate(a, c);
      return Status::OK();
    };
    auto to_b = [&](int contribution) -> Status {
      KILN_ASSIGN_OR_RETURN(int c, Unbroadcast(contribution, y_dims, b, n, index));
      Accumulate(b, c);
      return Status::OK();
    };
    const bool da = InF(a), db = InF(b);
    if (op == "Add" || op == "Sub") {
      if (da) KILN_RETURN_IF_ERROR(to_a(g));
      if (db) KILN_RETURN_IF_ERROR(to_b(op == "Add" ? g : Op("Neg", {g})));
    } else if (op == "Mul") {
      if (da) KILN_RETURN_IF_ERROR(to_a(Op("Mul", {g, b})));
      if (db) KILN_RETURN_IF_ERROR(to_b(Op("Mul", {g, a})));
    } else if (op == "Div") {
      if (da) KILN_RETURN_IF_ERROR(to_a(Op("Div", {g, b})));
      // d(a/b)/db = -(a/b)/b
      if (db) KILN_RETURN_IF_ERROR(to_b(Op("Neg", {Op("Div", {Op("Mul", {g, y}), b})})));
    } else if (op == "Neg") {
      Accumulate(a, Op("Neg", {g}));
    } else if (op == "Identity") {
      Accumulate(a, g);
    } else if (op == "Relu") {
      KILN_ASSIGN_OR_RETURN(int zero, Scalar(0.0));
      const int positive = Op("Greater", {a, zero}, {}, DataType::kBool);
      const int mask = Op("Cast", {positive},
                          {Attribute::Int("to", dtype_ == DataType::kFloat64 ? 11 : 1)}, dtype_);
      Accumulate(a, Op("Mul", {g, mask}));
    } else if (op == "Sigmoid") {
      KILN_ASSIGN_OR_RETURN(int one, Scalar(1.0));
      Accumulate(a, Op("Mul", {g, Op("Mul", {y, Op("Sub", {one, y})})}));
    } else if (op == "Tanh") {
      KILN_ASSIGN_OR_RETURN(int one, Scalar(1.0));
      Accumulate(a, Op("Mul", {g, Op("Sub", {one, Op("Mul", {y, y})})}));
    } else if (op == "Exp") {
      Accumulate(a, Op("Mul", {g, y}));
    } else if (op == "Log") {
      Accumulate(a, Op("Div", {g, a}));
    } else if (op == "Sqrt") {
      KILN_ASSIGN_OR_RETURN(int two, Scalar(2.0));
      Accumulate(a, Op("Div", {g, Op("Mul", {y, two})}));
    } else if (op == "Pow") {
      KILN_ASSIGN_OR_RETURN(int one, Scalar(1.0));
      const int p =
          Op("Cast", {b}, {Attribute::Int("to", dtype_ == DataType::kFloat64 ? 11 : 1)}, dtype_);
      const int pow = Op("Pow", {a, Op("Sub", {p, one})});
      KILN_RETURN_IF_ERROR(to_a(Op("Mul", {Op("Mul", {g, p}), pow})));
    } else if (op == "ReduceSum" || op == "ReduceMean") {
      // The reduced shape with keepdims=1 comes from the same reduction of the input.
      Node kept = n;
      kept.name = UniqueNodeName(n.name + "_keepdims");
      std::erase_if(kept.attributes, [](const Attribute& at) { return at.name == "keepdims"; });
      kept.attributes.push_back(Attribute::Int("keepdims", 1));
      const int kept_out = NewValue("kept", dtype_);
      kept.outputs = {kept_out};
      nodes_.push_back(std::move(kept));
      const int kept_shape = Op("Shape", {kept_out}, {}, DataType::kInt64);
      const int reshaped = Op("Reshape", {g, kept_shape});
      int expanded = Op("Expand", {reshaped, Op("Shape", {a}, {}, DataType::kInt64)});
      if (op == "ReduceMean") {
        const int to = dtype_ == DataType::kFloat64 ? 11 : 1;
        const int n_in =
            Op("Cast", {Op("Size", {a}, {}, DataType::kInt64)}, {Attribute::Int("to", to)}, dtype_);
        const int n_out = Op("Cast", {Op("Size", {kept_out}, {}, DataType::kInt64)},
                             {Attribute::Int("to", to)}, dtype_);
        expanded = Op("Div", {expanded, Op("Div", {n_in, n_out})});
      }
      Accumulate(a, expanded);
    } else if (op == "Reshape") {
      Accumulate(a, Op("Reshape", {g, Op("Shape", {a}, {}, DataType::kInt64)}));
    } else if (op == "Transpose") {
      const Attribute* perm = n.FindAttribute("perm");
      if (perm == nullptr) {
        Accumulate(a, Op("Transpose", {g}));
      } else {
        std::vector<int64_t> inverse(perm->ints.size(), 0);
        for (size_t i = 0; i < perm->ints.size(); ++i) {
          const int64_t p = perm->ints[i];
          if (p < 0 || p >= static_cast<int64_t>(inverse.size())) {
            return Status::InvalidArgument(fmt::format(
                "Gradient: Transpose perm {} is out of range ({})", p, NodeLabel(n, index)));
          }
          inverse[static_cast<size_t>(p)] = static_cast<int64_t>(i);
        }
        Accumulate(a, Op("Transpose", {g}, {Attribute::Ints("perm", inverse)}, dtype_));
      }
    } else if (op == "MatMul") {
      const std::optional<std::vector<Dim>> ad = DimsOf(a), bd = DimsOf(b);
      if (!ad || !bd || ad->size() < 2 || bd->size() < 2 || !y_dims || y_dims->size() < 2) {
        return Status::Unimplemented(fmt::format(
            "Gradient: MatMul needs operands of known rank >= 2 ({})", NodeLabel(n, index)));
      }
      auto swap_last = [&](int v, size_t rank) {
        std::vector<int64_t> perm;
        for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(i));
        std::swap(perm[rank - 1], perm[rank - 2]);
        return Op("Transpose", {v}, {Attribute::Ints("perm", perm)}, dtype_);
      };
      auto batch_with = [&](const std::vector<Dim>& last) {
        std::vector<Dim> d(y_dims->begin(), y_dims->end() - 2);
        d.insert(d.end(), last.end() - 2, last.end());
        return std::optional<std::vector<Dim>>(d);
      };
      if (da) {
        const int c = Op("MatMul", {g, swap_last(b, bd->size())});
        KILN_ASSIGN_OR_RETURN(int r, Unbroadcast(c, batch_with(*ad), a, n, index));
        Accumulate(a, r);
      }
      if (db) {
        const int c = Op("MatMul", {swap_last(a, ad->size()), g});
        KILN_ASSIGN_OR_RETURN(int r, Unbroadcast(c, batch_with(*bd), b, n, index));
        Accumulate(b, r);
      }
    } else {
      KILN_CHECK(false, "no backward rule for an op DifferentiableInputs accepts");
    }
    return Status::OK();
  }

  Graph& graph_;
  const Graph& source_;
  std::vector<Node>& nodes_;
  const Node& grad_;
  std::string label_;
  int64_t opset_;
  DataType dtype_ = DataType::kInvalid;
  std::vector<int> xs_;
  std::set<int> zs_;
  int y_ = -1;
  std::string y_name_;
  std::map<int, int> origin_;  // value -> index of the first x it depends on
  std::vector<int> path_;      // node ids, in node order
  std::map<int, int> grads_;   // value -> its gradient's value
  int node_counter_ = 0;
};

// Adds `nodes` to `graph` in a topological order (stable: ties keep list order).
Status AddSorted(Graph& graph, std::vector<Node> nodes) {
  std::map<int, int> producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int v : nodes[i].outputs) {
      if (v != kNoValue) producer[v] = static_cast<int>(i);
    }
  }
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<int>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<int> deps;
    auto add = [&](int v) {
      const auto it = producer.find(v);
      if (v != kNoValue && it != producer.end()) deps.insert(it->second);
    };
    for (int v : nodes[i].inputs) add(v);
    for (int v : nodes[i].implicit_inputs) add(v);
    for (int d : deps) consumers[static_cast<size_t>(d)].push_back(static_cast<int>(i));
    pending[i] = static_cast<int>(deps.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[static_cast<size_t>(i)]) {
      if (--pending[static_cast<size_t>(c)] == 0) ready.push(c);
    }
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (pending[i] > 0) {
        return Status::InvalidArgument(
            fmt::format("Gradient: after expansion the graph has a cycle through node '{}' ({})",
                        nodes[i].name, nodes[i].op_type));
      }
    }
  }
  for (int i : order) graph.AddNode(std::move(nodes[static_cast<size_t>(i)]));
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<Graph>> ExpandGradients(std::shared_ptr<Graph> graph) {
  const auto nodes = graph->nodes();
  if (std::none_of(nodes.begin(), nodes.end(), IsGradientNode)) return graph;
  const int64_t opset = graph->OpsetFor("");
  if (opset < 8) {
    return Status::Unimplemented(fmt::format(
        "Gradient: needs the default ONNX domain at opset 8 or later (the model has {})", opset));
  }
  auto out = std::make_shared<Graph>();
  out->name = graph->name;
  out->opset_imports = graph->opset_imports;
  out->ir_version = graph->ir_version;
  for (const Value& v : graph->values()) {
    Value copy = v;
    copy.producer = -1;  // set again as the nodes are added
    out->AddValue(std::move(copy));
  }
  out->inputs = graph->inputs;
  out->outputs = graph->outputs;
  std::vector<Node> list;
  for (int i = 0; i < graph->num_nodes(); ++i) {
    const Node& n = graph->node(i);
    if (!IsGradientNode(n)) {
      list.push_back(n);
      continue;
    }
    Expansion e(*out, *graph, list, n, NodeLabel(n, i), opset);
    KILN_RETURN_IF_ERROR(e.Run());
  }
  KILN_RETURN_IF_ERROR(AddSorted(*out, std::move(list)));
  return out;
}

}  // namespace kiln
