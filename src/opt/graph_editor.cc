// SPDX-License-Identifier: Apache-2.0
#include "opt/graph_editor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace kiln::opt {
namespace {

void AddUnique(std::vector<int>& list, int id) {
  if (std::find(list.begin(), list.end(), id) == list.end()) list.push_back(id);
}

bool Reads(const Node& node, int value) {
  return std::find(node.inputs.begin(), node.inputs.end(), value) != node.inputs.end() ||
         std::find(node.implicit_inputs.begin(), node.implicit_inputs.end(), value) !=
             node.implicit_inputs.end();
}

}  // namespace

GraphEditor::GraphEditor(Graph graph, bool subgraph)
    : graph_(std::move(graph)), subgraph_(subgraph) {
  const size_t nv = static_cast<size_t>(graph_.num_values());
  dead_.assign(static_cast<size_t>(graph_.num_nodes()), false);
  consumers_.assign(nv, {});
  is_output_.assign(nv, false);
  is_input_.assign(nv, false);
  for (int id : graph_.outputs) is_output_[static_cast<size_t>(id)] = true;
  for (int id : graph_.inputs) is_input_[static_cast<size_t>(id)] = true;
  for (int n = 0; n < graph_.num_nodes(); ++n) {
    const Node& node = graph_.node(n);
    for (int in : node.inputs) {
      if (in != kNoValue) AddUnique(consumers_[static_cast<size_t>(in)], n);
    }
    for (int in : node.implicit_inputs) AddUnique(consumers_[static_cast<size_t>(in)], n);
  }
}

std::vector<int> GraphEditor::LiveNodes() const {
  std::vector<int> ids;
  for (int n = 0; n < graph_.num_nodes(); ++n) {
    if (alive(n)) ids.push_back(n);
  }
  return ids;
}

bool GraphEditor::IsGraphOutput(int value) const { return is_output_[static_cast<size_t>(value)]; }
bool GraphEditor::IsGraphInput(int value) const { return is_input_[static_cast<size_t>(value)]; }

int GraphEditor::Producer(int value) const {
  if (value == kNoValue) return -1;
  const int p = graph_.value(value).producer;
  return p >= 0 && alive(p) ? p : -1;
}

int GraphEditor::ProducerOf(int value, std::string_view op_type) const {
  const int p = Producer(value);
  if (p < 0) return -1;
  const Node& n = graph_.node(p);
  return n.op_type == op_type && n.domain.empty() ? p : -1;
}

bool GraphEditor::OnlyFeeds(int value, int consumer) const {
  if (value == kNoValue || IsGraphOutput(value)) return false;
  const std::vector<int>& c = Consumers(value);
  return c.size() == 1 && c[0] == consumer;
}

int GraphEditor::AddValue(std::string_view base, ValueType type) {
  std::string name;
  do {
    name = fmt::format("{}__opt{}", base, next_name_++);
  } while (graph_.FindValue(name) >= 0);
  Value v;
  v.name = std::move(name);
  v.type = std::move(type);
  const int id = graph_.AddValue(std::move(v));
  consumers_.emplace_back();
  is_output_.push_back(false);
  is_input_.push_back(false);
  return id;
}

int GraphEditor::AddConstant(std::string_view base, OwnedTensor tensor) {
  ValueType type;
  type.dtype = tensor.dtype();
  type.has_shape = true;
  for (int64_t d : tensor.shape().dims()) type.dims.push_back(Dim{d, {}});
  const int id = AddValue(base, std::move(type));
  graph_.mutable_value(id).constant = std::make_shared<const OwnedTensor>(std::move(tensor));
  return id;
}

int GraphEditor::AddNode(Node node) {
  const int id = graph_.AddNode(std::move(node));
  dead_.push_back(false);
  const Node& n = graph_.node(id);
  for (int in : n.inputs) {
    if (in != kNoValue) AddUnique(consumers_[static_cast<size_t>(in)], id);
  }
  for (int in : n.implicit_inputs) AddUnique(consumers_[static_cast<size_t>(in)], id);
  return id;
}

void GraphEditor::RemoveNode(int node) {
  if (!alive(node)) return;
  dead_[static_cast<size_t>(node)] = true;
  const Node& n = graph_.node(node);
  auto drop = [&](int in) {
    if (in == kNoValue) return;
    auto& list = consumers_[static_cast<size_t>(in)];
    list.erase(std::remove(list.begin(), list.end(), node), list.end());
  };
  for (int in : n.inputs) drop(in);
  for (int in : n.implicit_inputs) drop(in);
}

void GraphEditor::SetInput(int node, int index, int value) {
  Node& n = graph_.mutable_node(node);
  const int old = n.inputs[static_cast<size_t>(index)];
  n.inputs[static_cast<size_t>(index)] = value;
  if (old != kNoValue && !Reads(n, old)) {
    auto& list = consumers_[static_cast<size_t>(old)];
    list.erase(std::remove(list.begin(), list.end(), node), list.end());
  }
  if (value != kNoValue) AddUnique(consumers_[static_cast<size_t>(value)], node);
}

void GraphEditor::ReplaceUses(int from, int to) {
  KILN_CHECK(!IsGraphOutput(from), "ReplaceUses: value '", graph_.value(from).name,
             "' is a graph output");
  std::vector<int> readers = consumers_[static_cast<size_t>(from)];
  for (int c : readers) {
    Node& n = graph_.mutable_node(c);
    for (int& in : n.inputs) {
      if (in == from) in = to;
    }
    for (int& in : n.implicit_inputs) {
      if (in == from) in = to;
    }
    AddUnique(consumers_[static_cast<size_t>(to)], c);
  }
  consumers_[static_cast<size_t>(from)].clear();
}

bool GraphEditor::Bypass(int node, int in, int out) {
  // Subgraphs capture values by name: a captured value must keep its name.
  auto captured = [&](int v) {
    for (int c : Consumers(v)) {
      const Node& n = graph_.node(c);
      if (std::find(n.implicit_inputs.begin(), n.implicit_inputs.end(), v) !=
          n.implicit_inputs.end()) {
        return true;
      }
    }
    return false;
  };
  if (captured(out)) return false;
  if (!IsGraphOutput(out)) {
    RemoveNode(node);
    ReplaceUses(out, in);
    return true;
  }
  const int p = Producer(in);
  if (p < 0 || IsGraphOutput(in) || IsGraphInput(in) || captured(in)) return false;
  RemoveNode(node);
  ReplaceUses(in, out);
  for (int& o : graph_.mutable_node(p).outputs) {
    if (o == in) o = out;
  }
  graph_.mutable_value(out).producer = p;
  return true;
}

const OwnedTensor* GraphEditor::Constant(int value) const {
  if (value == kNoValue) return nullptr;
  const Value& v = graph_.value(value);
  return v.constant ? v.constant.get() : nullptr;
}

std::optional<std::vector<double>> GraphEditor::ConstantValues(int value) const {
  const OwnedTensor* t = Constant(value);
  if (t == nullptr) return std::nullopt;
  const int64_t n = t->num_elements();
  std::vector<double> out(static_cast<size_t>(n));
  auto fill = [&](auto* p) {
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(p[i]);
  };
  switch (t->dtype()) {
    case DataType::kFloat32:
      fill(t->data<const float>());
      break;
    case DataType::kFloat64:
      fill(t->data<const double>());
      break;
    case DataType::kInt64:
      fill(t->data<const int64_t>());
      break;
    case DataType::kInt32:
      fill(t->data<const int32_t>());
      break;
    case DataType::kFloat16: {
      const Float16* p = t->data<const Float16>();
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = Float16ToFloat(p[i]);
      break;
    }
    default:
      return std::nullopt;
  }
  return out;
}

std::optional<double> GraphEditor::ScalarConstant(int value) const {
  std::optional<std::vector<double>> v = ConstantValues(value);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

Result<Graph> GraphEditor::Finish() const {
  const int nn = graph_.num_nodes();
  const int nv = graph_.num_values();
  // Producers among live nodes.
  std::vector<int> prod(static_cast<size_t>(nv), -1);
  for (int n = 0; n < nn; ++n) {
    if (!alive(n)) continue;
    for (int o : graph_.node(n).outputs) {
      if (o == kNoValue) continue;
      if (prod[static_cast<size_t>(o)] >= 0) {
        return Status::Internal(
            fmt::format("optimizer: value '{}' is produced twice", graph_.value(o).name));
      }
      prod[static_cast<size_t>(o)] = n;
    }
  }
  // Topological order: depth-first from each live node in current order, producers first.
  std::vector<int> order;
  std::vector<uint8_t> state(static_cast<size_t>(nn), 0);  // 0 new, 1 on stack, 2 done
  for (int root = 0; root < nn; ++root) {
    if (!alive(root) || state[static_cast<size_t>(root)] != 0) continue;
    std::vector<std::pair<int, size_t>> stack{{root, 0}};
    state[static_cast<size_t>(root)] = 1;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      const Node& node = graph_.node(n);
      const size_t total = node.inputs.size() + node.implicit_inputs.size();
      if (next < total) {
        const int in = next < node.inputs.size() ? node.inputs[next]
                                                 : node.implicit_inputs[next - node.inputs.size()];
        ++next;
        if (in == kNoValue) continue;
        const int p = prod[static_cast<size_t>(in)];
        if (p < 0) continue;
        if (state[static_cast<size_t>(p)] == 1) {
          return Status::Internal(
              fmt::format("optimizer: cycle through value '{}'", graph_.value(in).name));
        }
        if (state[static_cast<size_t>(p)] == 0) {
          state[static_cast<size_t>(p)] = 1;
          stack.emplace_back(p, 0);
        }
        continue;
      }
      state[static_cast<size_t>(n)] = 2;
      order.push_back(n);
      stack.pop_back();
    }
  }
  // Values that survive.
  std::vector<bool> keep(static_cast<size_t>(nv), false);
  for (int id : graph_.inputs) keep[static_cast<size_t>(id)] = true;
  for (int id : graph_.outputs) keep[static_cast<size_t>(id)] = true;
  for (int n : order) {
    const Node& node = graph_.node(n);
    for (int v : node.inputs) {
      if (v != kNoValue) keep[static_cast<size_t>(v)] = true;
    }
    for (int v : node.implicit_inputs) keep[static_cast<size_t>(v)] = true;
    for (int v : node.outputs) {
      if (v != kNoValue) keep[static_cast<size_t>(v)] = true;
    }
  }
  Graph out;
  out.name = graph_.name;
  out.opset_imports = graph_.opset_imports;
  out.ir_version = graph_.ir_version;
  std::vector<int> remap(static_cast<size_t>(nv), kNoValue);
  for (int v = 0; v < nv; ++v) {
    if (!keep[static_cast<size_t>(v)]) continue;
    Value value = graph_.value(v);
    value.producer = -1;
    remap[static_cast<size_t>(v)] = out.AddValue(std::move(value));
  }
  auto map_ids = [&](std::vector<int>& ids) {
    for (int& id : ids) {
      if (id != kNoValue) id = remap[static_cast<size_t>(id)];
    }
  };
  for (int n : order) {
    Node node = graph_.node(n);
    map_ids(node.inputs);
    map_ids(node.outputs);
    map_ids(node.implicit_inputs);
    out.AddNode(std::move(node));
  }
  out.inputs = graph_.inputs;
  out.outputs = graph_.outputs;
  map_ids(out.inputs);
  map_ids(out.outputs);
  KILN_RETURN_IF_ERROR(VerifyGraph(out, subgraph_));
  return out;
}

Status VerifyGraph(const Graph& g, bool subgraph) {
  const int nv = g.num_values();
  auto bad = [&](std::string msg) {
    return Status::Internal(fmt::format("graph verification failed: {}", msg));
  };
  std::vector<bool> defined(static_cast<size_t>(nv), false);
  std::vector<bool> is_input(static_cast<size_t>(nv), false);
  std::set<std::string_view> names;
  for (int v = 0; v < nv; ++v) {
    const Value& value = g.value(v);
    if (!names.insert(value.name).second)
      return bad(fmt::format("value name '{}' twice", value.name));
    if (value.is_constant()) defined[static_cast<size_t>(v)] = true;
  }
  for (int id : g.inputs) {
    if (id < 0 || id >= nv) return bad(fmt::format("graph input id {} out of range", id));
    defined[static_cast<size_t>(id)] = true;
    is_input[static_cast<size_t>(id)] = true;
  }
  if (subgraph) {
    for (int id : g.Captures()) defined[static_cast<size_t>(id)] = true;
  }
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    const std::string label = fmt::format("node #{} '{}' ({})", n, node.name, node.op_type);
    for (const std::vector<int>* ids : {&node.inputs, &node.implicit_inputs}) {
      for (int in : *ids) {
        if (in == kNoValue && ids == &node.inputs) continue;
        if (in < 0 || in >= nv)
          return bad(fmt::format("{} reads value id {} out of range", label, in));
        if (!defined[static_cast<size_t>(in)]) {
          return bad(fmt::format("{} reads '{}' before it is defined", label, g.value(in).name));
        }
      }
    }
    for (int out : node.outputs) {
      if (out == kNoValue) continue;
      if (out < 0 || out >= nv)
        return bad(fmt::format("{} writes value id {} out of range", label, out));
      const Value& value = g.value(out);
      if (defined[static_cast<size_t>(out)] || value.producer != n) {
        return bad(fmt::format("{} writes '{}', which is defined elsewhere", label, value.name));
      }
      defined[static_cast<size_t>(out)] = true;
    }
  }
  for (int id : g.outputs) {
    if (id < 0 || id >= nv) return bad(fmt::format("graph output id {} out of range", id));
    if (!defined[static_cast<size_t>(id)]) {
      return bad(fmt::format("graph output '{}' is never defined", g.value(id).name));
    }
  }
  return Status::OK();
}

bool SameStaticShape(const ValueType& a, const ValueType& b) {
  if (!a.is_tensor() || !b.is_tensor() || !a.has_shape || !b.has_shape) return false;
  if (a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    const Dim& x = a.dims[i];
    const Dim& y = b.dims[i];
    if (x.known() && y.known() && x.value == y.value) continue;
    if (!x.known() && !y.known() && !x.symbol.empty() && x.symbol == y.symbol) continue;
    return false;
  }
  return true;
}

std::optional<int64_t> KnownNumElements(const ValueType& t) {
  if (!t.is_tensor() || !t.has_shape) return std::nullopt;
  int64_t n = 1;
  for (const Dim& d : t.dims) {
    if (!d.known()) return std::nullopt;
    n *= d.value;
  }
  return n;
}

OwnedTensor MakeFloatTensor(const Shape& shape, const std::vector<float>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  KILN_CHECK(static_cast<int64_t>(values.size()) == shape.NumElements(),
             "MakeFloatTensor: ", values.size(), " values for ", shape.ToString());
  if (!values.empty()) std::memcpy(t->raw_data(), values.data(), values.size() * sizeof(float));
  return std::move(t).value();
}

}  // namespace kiln::opt
