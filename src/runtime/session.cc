// SPDX-License-Identifier: Apache-2.0
#include "runtime/session.h"

#include <fmt/format.h>

#include <string>

#include "kernels/registry.h"
#include "runtime/control_flow.h"

namespace kiln {

struct Session::NodeKernel {
  std::unique_ptr<Kernel> kernel;
  const KernelDef* def = nullptr;
};

Session::Session(std::shared_ptr<const Graph> graph, std::vector<NodeKernel> kernels)
    : graph_(std::move(graph)), kernels_(std::move(kernels)) {
  last_use_.assign(static_cast<size_t>(graph_->num_values()), -1);
  for (int n = 0; n < graph_->num_nodes(); ++n) {
    const Node& node = graph_->node(n);
    for (int in : node.inputs) {
      if (in != kNoValue) last_use_[static_cast<size_t>(in)] = n;
    }
    for (int in : node.implicit_inputs) last_use_[static_cast<size_t>(in)] = n;
  }
  captures_ = graph_->Captures();
  // Graph outputs must survive to the end.
  for (int out : graph_->outputs) last_use_[static_cast<size_t>(out)] = graph_->num_nodes();
}

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Graph> graph,
                                                 const SessionOptions& options) {
  if (graph == nullptr) return Status::InvalidArgument("Session::Create: null graph");
  const KernelRegistry& registry = KernelRegistry::Global();
  std::vector<NodeKernel> kernels;
  kernels.reserve(static_cast<size_t>(graph->num_nodes()));
  for (const Node& node : graph->nodes()) {
    const int64_t opset = graph->OpsetFor(node.domain);
    KernelInfo info(*graph, node, opset);
    if (IsControlFlowOp(node)) {
      Result<std::unique_ptr<Kernel>> kernel = CreateControlFlowKernel(info, options);
      if (!kernel.ok()) {
        return kernel.status().WithContext(fmt::format(
            "node '{}' (op {})", node.name.empty() ? node.op_type : node.name, node.op_type));
      }
      kernels.push_back({std::move(kernel).value(), &ControlFlowKernelDef()});
      continue;
    }
    KILN_ASSIGN_OR_RETURN(const KernelDef* def, registry.Find(info, options.device.type));
    Result<std::unique_ptr<Kernel>> kernel = def->create(info);
    if (!kernel.ok()) {
      return kernel.status().WithContext(fmt::format(
          "node '{}' (op {})", node.name.empty() ? node.op_type : node.name, node.op_type));
    }
    kernels.push_back({std::move(kernel).value(), def});
  }
  auto session = std::unique_ptr<Session>(new Session(std::move(graph), std::move(kernels)));
  session->check_input_shapes_ = options.check_input_shapes;
  session->allocator_ = options.allocator != nullptr ? options.allocator : &HostAllocator();
  return session;
}

std::string_view Session::provider(int node) const {
  return kernels_[static_cast<size_t>(node)].def->provider;
}

namespace {

std::string NodeLabel(const Node& node) {
  return fmt::format("node '{}' ({})", node.name.empty() ? node.op_type : node.name, node.op_type);
}

// CheckTensorMatchesType; without `check_dims` only dtype and rank are compared.
Status CheckTensor(const Tensor& tensor, const ValueType& type, std::string_view what,
                   bool check_dims) {
  if (type.is_optional()) {  // an optional holding a tensor is that tensor at run time
    return type.elem ? CheckTensor(tensor, *type.elem, what, check_dims) : Status::OK();
  }
  if (type.is_sequence()) {
    return Status::InvalidArgument(fmt::format("{}: expected {}, got a tensor {}{}", what,
                                               type.ToString(), DataTypeName(tensor.dtype()),
                                               tensor.shape().ToString()));
  }
  if (type.dtype != DataType::kInvalid && tensor.dtype() != type.dtype) {
    return Status::InvalidArgument(fmt::format("{}: expected datatype {}, got {}", what,
                                               DataTypeName(type.dtype),
                                               DataTypeName(tensor.dtype())));
  }
  if (!type.has_shape) return Status::OK();
  if (static_cast<size_t>(tensor.rank()) != type.dims.size()) {
    return Status::InvalidArgument(fmt::format("{}: expected shape {} (rank {}), got {}", what,
                                               type.ToString(), type.dims.size(),
                                               tensor.shape().ToString()));
  }
  if (!check_dims) return Status::OK();
  for (int i = 0; i < tensor.rank(); ++i) {
    const Dim& d = type.dims[static_cast<size_t>(i)];
    if (d.known() && d.value != tensor.dim(i)) {
      return Status::InvalidArgument(fmt::format("{}: expected shape {}, got {} (dim {} differs)",
                                                 what, type.ToString(),
                                                 tensor.shape().ToString(), i));
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckTensorMatchesType(const Tensor& tensor, const ValueType& type, std::string_view what) {
  return CheckTensor(tensor, type, what, /*check_dims=*/true);
}

Status CheckValueMatchesType(const RuntimeValue& value, const ValueType& type,
                             std::string_view what, bool check_dims) {
  if (!value.valid()) return Status::InvalidArgument(fmt::format("{}: no value given", what));
  if (type.IsUnknown()) return Status::OK();
  const auto mismatch = [&] {
    return Status::InvalidArgument(
        fmt::format("{}: expected {}, got {}", what, type.ToString(), value.Describe()));
  };
  switch (type.kind) {
    case TypeKind::kTensor:
      if (!value.is_tensor()) return mismatch();
      return CheckTensor(value.tensor().view(), type, what, check_dims);
    case TypeKind::kSequence: {
      if (!value.is_sequence()) return mismatch();
      if (type.elem == nullptr) return Status::OK();
      const TensorSequence& seq = value.sequence();
      if (type.elem->dtype != DataType::kInvalid && seq.elem_dtype() != type.elem->dtype) {
        return mismatch();
      }
      if (!check_dims) return Status::OK();
      for (int64_t i = 0; i < seq.size(); ++i) {
        KILN_RETURN_IF_ERROR(
            CheckTensor(seq.at(i).view(), *type.elem, fmt::format("{} element {}", what, i), true));
      }
      return Status::OK();
    }
    case TypeKind::kOptional:
      if (value.is_none() || type.elem == nullptr) return Status::OK();
      return CheckValueMatchesType(value, *type.elem, what, check_dims);
  }
  return mismatch();
}

// Every value of one run: tensors as views (with the storage of the ones nodes produced),
// sequences and nones as RuntimeValue pointers (with the storage of the ones nodes produced,
// allocated only for those, so a run over tensors pays two null pointers per value). A value is
// readable when its view is valid or its value pointer is set.
struct Session::Frame {
  explicit Frame(int num_values)
      : views(static_cast<size_t>(num_values)),
        owned(static_cast<size_t>(num_values)),
        values(static_cast<size_t>(num_values), nullptr),
        owned_values(static_cast<size_t>(num_values)) {}

  std::vector<Tensor> views;
  std::vector<OwnedTensor> owned;
  std::vector<const RuntimeValue*> values;
  std::vector<std::unique_ptr<RuntimeValue>> owned_values;
};

Status Session::Execute(std::span<const Tensor> capture_tensors,
                        std::span<const RuntimeValue* const> capture_values, Frame& frame) const {
  const Graph& g = *graph_;
  if (capture_tensors.size() != captures_.size() || capture_values.size() > captures_.size()) {
    return Status::Internal(fmt::format("subgraph '{}' reads {} outer values, {} were given",
                                        g.name, captures_.size(), capture_tensors.size()));
  }
  for (int id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    if (v.is_constant()) frame.views[static_cast<size_t>(id)] = v.constant->view();
  }
  for (size_t i = 0; i < captures_.size(); ++i) {
    const size_t id = static_cast<size_t>(captures_[i]);
    frame.views[id] = capture_tensors[i];
    if (!capture_tensors[i].valid() && i < capture_values.size()) {
      frame.values[id] = capture_values[i];
    }
  }

  std::vector<Tensor> node_inputs;
  std::vector<const RuntimeValue*> node_values;
  std::vector<OwnedTensor> node_outputs;
  std::vector<RuntimeValue> node_value_outputs;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    const Kernel& kernel = *kernels_[static_cast<size_t>(n)].kernel;
    const bool takes_values = kernel.TakesNonTensorValues();
    const size_t num_inputs = node.inputs.size() + node.implicit_inputs.size();
    node_inputs.assign(num_inputs, Tensor());
    if (takes_values) node_values.assign(num_inputs, nullptr);
    for (size_t i = 0; i < num_inputs; ++i) {
      const int id = i < node.inputs.size() ? node.inputs[i]
                                            : node.implicit_inputs[i - node.inputs.size()];
      if (id == kNoValue) continue;
      const Tensor& t = frame.views[static_cast<size_t>(id)];
      if (t.valid()) {
        node_inputs[i] = t;
        continue;
      }
      const RuntimeValue* v = frame.values[static_cast<size_t>(id)];
      if (v == nullptr) {
        return Status::Internal(fmt::format("node '{}' reads value '{}' before it is computed",
                                            node.name, g.value(id).name));
      }
      if (!takes_values) {
        return Status::InvalidArgument(
            fmt::format("{}: input {} ('{}') is a {}, but the op takes tensors only",
                        NodeLabel(node), i, g.value(id).name, v->Describe()));
      }
      node_values[i] = v;
    }
    node_outputs.clear();
    node_outputs.resize(node.outputs.size());
    if (takes_values) {
      node_value_outputs.clear();
      node_value_outputs.resize(node.outputs.size());
    }
    KernelContext ctx(
        node_inputs,
        takes_values ? std::span<const RuntimeValue* const>(node_values)
                     : std::span<const RuntimeValue* const>(),
        node_outputs,
        takes_values ? std::span<RuntimeValue>(node_value_outputs) : std::span<RuntimeValue>(),
        *allocator_);
    Status s = kernel.Compute(ctx);
    if (!s.ok()) return s.WithContext(NodeLabel(node));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id == kNoValue) continue;
      const size_t slot = static_cast<size_t>(id);
      if (node_outputs[o].valid()) {
        frame.owned[slot] = std::move(node_outputs[o]);
        frame.views[slot] = frame.owned[slot].view();
      } else if (takes_values && node_value_outputs[o].valid()) {
        frame.owned_values[slot] = std::make_unique<RuntimeValue>(std::move(node_value_outputs[o]));
        frame.values[slot] = frame.owned_values[slot].get();
      } else {
        return Status::Internal(fmt::format("node '{}' ({}) did not produce output {}",
                                            node.name, node.op_type, o));
      }
    }
    // Release intermediates whose last reader was this node.
    auto release = [&](int id) {
      if (id == kNoValue || last_use_[static_cast<size_t>(id)] != n) return;
      const size_t slot = static_cast<size_t>(id);
      if (frame.owned[slot].valid()) {
        frame.owned[slot] = OwnedTensor();
        frame.views[slot] = Tensor();
      }
      if (frame.owned_values[slot] != nullptr) {
        frame.owned_values[slot].reset();
        frame.values[slot] = nullptr;
      }
    };
    for (int id : node.inputs) release(id);
    for (int id : node.implicit_inputs) release(id);
  }
  return Status::OK();
}

Result<std::vector<OwnedTensor>> Session::Run(std::span<const Tensor> inputs,
                                              std::span<const Tensor> captures) const {
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size()) {
    return Status::InvalidArgument(
        fmt::format("expected {} inputs, got {}", g.inputs.size(), inputs.size()));
  }
  Frame frame(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = g.inputs[i];
    const Value& v = g.value(id);
    KILN_RETURN_IF_ERROR(
        CheckTensor(inputs[i], v.type, fmt::format("input '{}'", v.name), check_input_shapes_));
    frame.views[static_cast<size_t>(id)] = inputs[i];
  }
  KILN_RETURN_IF_ERROR(Execute(captures, {}, frame));

  std::vector<OwnedTensor> results;
  results.reserve(g.outputs.size());
  for (int id : g.outputs) {
    const size_t slot = static_cast<size_t>(id);
    OwnedTensor& t = frame.owned[slot];
    if (t.valid()) {
      results.push_back(t);  // shares the buffer; a value listed twice stays valid
      continue;
    }
    // An output that is a graph input or an initializer: copy it out.
    const Tensor& view = frame.views[slot];
    if (view.valid()) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor copy, OwnedTensor::CopyOf(view));
      results.push_back(std::move(copy));
      continue;
    }
    if (frame.values[slot] != nullptr) {
      return Status::Unimplemented(fmt::format(
          "graph output '{}' is a {}, not a tensor; this Run returns tensors only (RunValues "
          "returns any value)",
          g.value(id).name, frame.values[slot]->Describe()));
    }
    return Status::Internal(fmt::format("graph output '{}' was not computed", g.value(id).name));
  }
  return results;
}

Result<std::vector<RuntimeValue>> Session::RunValues(
    std::span<const RuntimeValue> inputs, std::span<const Tensor> capture_tensors,
    std::span<const RuntimeValue* const> capture_values) const {
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size()) {
    return Status::InvalidArgument(
        fmt::format("expected {} inputs, got {}", g.inputs.size(), inputs.size()));
  }
  Frame frame(g.num_values());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = g.inputs[i];
    const Value& v = g.value(id);
    KILN_RETURN_IF_ERROR(CheckValueMatchesType(inputs[i], v.type, fmt::format("input '{}'", v.name),
                                               check_input_shapes_));
    if (inputs[i].is_tensor()) {
      frame.views[static_cast<size_t>(id)] = inputs[i].tensor().view();
    } else {
      frame.values[static_cast<size_t>(id)] = &inputs[i];
    }
  }
  KILN_RETURN_IF_ERROR(Execute(capture_tensors, capture_values, frame));

  std::vector<RuntimeValue> results;
  results.reserve(g.outputs.size());
  for (int id : g.outputs) {
    const size_t slot = static_cast<size_t>(id);
    if (frame.owned[slot].valid()) {
      results.emplace_back(frame.owned[slot]);
    } else if (frame.views[slot].valid()) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor copy, OwnedTensor::CopyOf(frame.views[slot]));
      results.emplace_back(std::move(copy));
    } else if (frame.values[slot] != nullptr) {
      // Sequences hold OwnedTensors, so even an input passed through can be shared.
      results.push_back(*frame.values[slot]);
    } else {
      return Status::Internal(fmt::format("graph output '{}' was not computed", g.value(id).name));
    }
  }
  return results;
}

}  // namespace kiln
