// SPDX-License-Identifier: Apache-2.0
#include "runtime/session.h"

#include <fmt/format.h>

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

Status CheckTensorMatchesType(const Tensor& tensor, const ValueType& type, std::string_view what) {
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

Result<std::vector<OwnedTensor>> Session::Run(std::span<const Tensor> inputs,
                                              std::span<const Tensor> captures) const {
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size()) {
    return Status::InvalidArgument(
        fmt::format("expected {} inputs, got {}", g.inputs.size(), inputs.size()));
  }
  if (captures.size() != captures_.size()) {
    return Status::Internal(fmt::format("subgraph '{}' reads {} outer values, {} were given",
                                        g.name, captures_.size(), captures.size()));
  }
  // Views of every value; owned storage for the ones produced by nodes.
  std::vector<Tensor> views(static_cast<size_t>(g.num_values()));
  std::vector<OwnedTensor> owned(static_cast<size_t>(g.num_values()));
  for (int id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    if (v.is_constant()) views[static_cast<size_t>(id)] = v.constant->view();
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = g.inputs[i];
    const Value& v = g.value(id);
    ValueType declared = v.type;
    if (!check_input_shapes_) {
      for (Dim& d : declared.dims) d = Dim{};
    }
    KILN_RETURN_IF_ERROR(
        CheckTensorMatchesType(inputs[i], declared, fmt::format("input '{}'", v.name)));
    views[static_cast<size_t>(id)] = inputs[i];
  }
  for (size_t i = 0; i < captures.size(); ++i) {
    views[static_cast<size_t>(captures_[i])] = captures[i];
  }

  std::vector<Tensor> node_inputs;
  std::vector<OwnedTensor> node_outputs;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    node_inputs.assign(node.inputs.size() + node.implicit_inputs.size(), Tensor());
    for (size_t i = 0; i < node_inputs.size(); ++i) {
      const int id = i < node.inputs.size() ? node.inputs[i]
                                            : node.implicit_inputs[i - node.inputs.size()];
      if (id == kNoValue) continue;
      const Tensor& t = views[static_cast<size_t>(id)];
      if (!t.valid()) {
        return Status::Internal(fmt::format("node '{}' reads value '{}' before it is computed",
                                            node.name, g.value(id).name));
      }
      node_inputs[i] = t;
    }
    node_outputs.clear();
    node_outputs.resize(node.outputs.size());
    KernelContext ctx(node_inputs, node_outputs, *allocator_);
    Status s = kernels_[static_cast<size_t>(n)].kernel->Compute(ctx);
    if (!s.ok()) {
      return s.WithContext(fmt::format("node '{}' ({})",
                                       node.name.empty() ? node.op_type : node.name,
                                       node.op_type));
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id == kNoValue) continue;
      if (!node_outputs[o].valid()) {
        return Status::Internal(fmt::format("node '{}' ({}) did not produce output {}",
                                            node.name, node.op_type, o));
      }
      owned[static_cast<size_t>(id)] = std::move(node_outputs[o]);
      views[static_cast<size_t>(id)] = owned[static_cast<size_t>(id)].view();
    }
    // Release intermediates whose last reader was this node.
    auto release = [&](int id) {
      if (id != kNoValue && last_use_[static_cast<size_t>(id)] == n &&
          owned[static_cast<size_t>(id)].valid()) {
        owned[static_cast<size_t>(id)] = OwnedTensor();
        views[static_cast<size_t>(id)] = Tensor();
      }
    };
    for (int id : node.inputs) release(id);
    for (int id : node.implicit_inputs) release(id);
  }

  std::vector<OwnedTensor> results;
  results.reserve(g.outputs.size());
  for (int id : g.outputs) {
    OwnedTensor& t = owned[static_cast<size_t>(id)];
    if (t.valid()) {
      results.push_back(t);  // shares the buffer; a value listed twice stays valid
    } else {
      // An output that is a graph input or an initializer: copy it out.
      const Tensor& view = views[static_cast<size_t>(id)];
      if (!view.valid()) {
        return Status::Internal(fmt::format("graph output '{}' was not computed",
                                            g.value(id).name));
      }
      KILN_ASSIGN_OR_RETURN(OwnedTensor copy, OwnedTensor::CopyOf(view));
      results.push_back(std::move(copy));
    }
  }
  return results;
}

}  // namespace kiln
