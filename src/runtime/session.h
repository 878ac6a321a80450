// SPDX-License-Identifier: Apache-2.0
#pragma once
// Session: a graph made ready to run. Create() picks a kernel for every node (failing at load,
// with the op's name and opset, when one is missing) and builds the kernels; Run() executes the
// nodes in order on caller-provided inputs.
//
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> g, ImportOnnxModel(path));
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Create(g));
//   KILN_ASSIGN_OR_RETURN(std::vector<OwnedTensor> outs, s->Run(inputs));
//
// Thread safety: Run() is const and may be called from several threads at once; each call keeps
// its intermediate tensors to itself. The graph is shared read-only.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "kernels/kernel.h"
#include "tensor/tensor.h"

namespace kiln {

struct SessionOptions {
  Device device = Device::Cpu();
  // Check input dims against the declared shapes (dtype and rank are always checked). Off for
  // subgraphs, whose loop-carried values may change shape between iterations.
  bool check_input_shapes = true;
  // Where node outputs are allocated; nullptr: HostAllocator(). Must outlive the session.
  // A run whose allocation fails returns the allocator's RESOURCE_EXHAUSTED.
  Allocator* allocator = nullptr;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const Graph> graph,
                                                 const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Graph& graph() const { return *graph_; }

  // Runs the graph. `inputs` holds one tensor per graph input (graph().inputs order). Each is
  // checked against the declared type: dtype must match, rank and every known dim must match.
  // Returns one tensor per graph output (graph().outputs order).
  Result<std::vector<OwnedTensor>> Run(std::span<const Tensor> inputs) const {
    return Run(inputs, {});
  }
  // For a subgraph (an If branch, a Loop or Scan body): `captures` holds one tensor per
  // captures() entry, the data of the values the subgraph reads from its enclosing scope.
  Result<std::vector<OwnedTensor>> Run(std::span<const Tensor> inputs,
                                       std::span<const Tensor> captures) const;
  // Value ids of the graph's captured values (Graph::Captures), in the order Run expects them.
  std::span<const int> captures() const { return captures_; }

  // Name of the kernel provider chosen for node i ("ref", ...), for profiles and tests.
  std::string_view provider(int node) const;

 private:
  struct NodeKernel;
  Session(std::shared_ptr<const Graph> graph, std::vector<NodeKernel> kernels);

  std::shared_ptr<const Graph> graph_;
  std::vector<NodeKernel> kernels_;
  // For every value, the index of the last node that reads it (-1 when none / graph output),
  // so intermediates are released as soon as they are dead.
  std::vector<int> last_use_;
  std::vector<int> captures_;
  bool check_input_shapes_ = true;
  Allocator* allocator_ = nullptr;  // never null after Create
};

// Checks `tensor` against a declared value type; the message names `what` ("input 'x'").
Status CheckTensorMatchesType(const Tensor& tensor, const ValueType& type, std::string_view what);

}  // namespace kiln
