// SPDX-License-Identifier: Apache-2.0
#pragma once
// The kernel contract.
//
// A Kernel is built once per graph node from a KernelInfo (the node's attributes, declared
// types and constant inputs) and may precompute or pre-pack anything that does not depend on the
// runtime inputs. Compute() is const and thread-safe: several sessions (or several runs of one
// session) may call it at once, each with its own KernelContext.
//
// Output memory comes from the context (AllocateOutput), so the runtime can later hand out
// planned memory without kernels changing. Kernels never create threads.
//
//   class ReluKernel final : public Kernel {
//    public:
//     Status Compute(KernelContext& ctx) const override {
//       const Tensor& x = ctx.input(0);
//       KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
//       ...
//     }
//   };

#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "tensor/tensor.h"

namespace kiln {

// What a kernel factory may look at: the node, the graph it belongs to, and the opset in force.
// Valid only during kernel construction.
class KernelInfo {
 public:
  KernelInfo(const Graph& graph, const Node& node, int64_t opset)
      : graph_(graph), node_(node), opset_(opset) {}

  const Graph& graph() const { return graph_; }
  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool has_input(int i) const { return node_.has_input(i); }
  // Declared type of input i (dtype kInvalid and no shape when absent or unknown).
  const ValueType& input_type(int i) const;
  const ValueType& output_type(int i) const;
  // Data of input i when it is an initializer (constant), else nullptr.
  const OwnedTensor* constant_input(int i) const;

 private:
  const Graph& graph_;
  const Node& node_;
  int64_t opset_;
};

// Per-call state handed to Compute: the input views and the output slots.
// Not thread-safe; one context per Compute call.
class KernelContext {
 public:
  // `inputs[i]` is an invalid Tensor for an omitted optional input. `outputs` must have one slot
  // per node output; AllocateOutput fills them.
  KernelContext(std::span<const Tensor> inputs, std::span<OwnedTensor> outputs,
                Allocator& allocator = HostAllocator())
      : inputs_(inputs), outputs_(outputs), allocator_(allocator) {}

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[static_cast<size_t>(i)].valid(); }
  // REQUIRES: 0 <= i < num_inputs().
  const Tensor& input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  // Allocates output i (zero-filled) and returns a writable view of it.
  // REQUIRES: 0 <= i < num_outputs(); each output allocated at most once.
  Result<Tensor> AllocateOutput(int i, DataType dtype, const Shape& shape);

 private:
  std::span<const Tensor> inputs_;
  std::span<OwnedTensor> outputs_;
  Allocator& allocator_;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Computes every present output of the node from the inputs in `ctx`. Returns an error Status
  // (never crashes) when runtime inputs violate the operator's rules (shape mismatch, etc.).
  virtual Status Compute(KernelContext& ctx) const = 0;
};

// Builds a kernel for the node in `info`; may reject attributes with INVALID_ARGUMENT.
using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelInfo& info);

}  // namespace kiln
