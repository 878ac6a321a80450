// SPDX-License-Identifier: Apache-2.0
#pragma once
// NodeDesc: one operator application described as plain data, which is all a kernel factory
// sees of the model (kernels/kernel.h: KernelInfo). It carries the op type, domain and opset in
// force, the attributes, and per operand slot whether it is present, its declared type and, for
// a constant input, its data. Nothing in it refers to a graph, so kernels know no graph.
//
// The runtime describes each graph node with DescribeNode (graph/ir.h) before it builds the
// node's kernel (constant folding does the same); a kernel that builds another kernel for an
// inner op (a fused op's core) copies its own description and edits it:
//
//   NodeDesc core = info.node();
//   core.op_type = "Conv";
//   core.domain.clear();
//   core.opset = 13;
//   core.inputs.resize(3);
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, CreateConv(KernelInfo(core)));
//
// Thread safety: plain values; a const NodeDesc may be read from any thread. Constant data is
// shared (not copied) with the graph it was described from.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "op/attribute.h"
#include "op/value_type.h"
#include "tensor/tensor.h"

namespace kiln {

// One input or output slot of an operator application.
struct OperandDesc {
  bool present = false;  // false for an omitted optional input or output
  ValueType type;        // declared type (unknown when the model does not say)
  std::shared_ptr<const OwnedTensor> constant;  // inputs only: the data of a constant input

  // A present operand of declared type `declared` (tests and hand-built descriptions).
  static OperandDesc Of(ValueType declared);
  // A present constant input holding `data`, declared as a tensor of its dtype.
  static OperandDesc Constant(std::shared_ptr<const OwnedTensor> data);
};

struct NodeDesc {
  std::string name;     // the node's name, for messages (may be empty)
  std::string op_type;  // "Conv"
  std::string domain;   // "" for the default ONNX domain
  int64_t opset = 0;    // the version of `domain` the model imports
  std::vector<Attribute> attributes;
  std::vector<OperandDesc> inputs;   // one per input slot, omitted ones included
  std::vector<OperandDesc> outputs;  // one per output slot, omitted ones included

  const Attribute* FindAttribute(std::string_view attr_name) const {
    return kiln::FindAttribute(attributes, attr_name);
  }
  int64_t GetInt(std::string_view attr_name, int64_t default_value) const {
    return GetIntAttribute(attributes, attr_name, default_value);
  }
  float GetFloat(std::string_view attr_name, float default_value) const {
    return GetFloatAttribute(attributes, attr_name, default_value);
  }
  std::string GetString(std::string_view attr_name, std::string_view default_value) const {
    return GetStringAttribute(attributes, attr_name, default_value);
  }
  std::vector<int64_t> GetInts(std::string_view attr_name) const {
    return GetIntsAttribute(attributes, attr_name);
  }
  std::vector<float> GetFloats(std::string_view attr_name) const {
    return GetFloatsAttribute(attributes, attr_name);
  }
  bool has_input(int i) const {
    return i >= 0 && i < static_cast<int>(inputs.size()) && inputs[static_cast<size_t>(i)].present;
  }
  bool has_output(int i) const {
    return i >= 0 && i < static_cast<int>(outputs.size()) &&
           outputs[static_cast<size_t>(i)].present;
  }
  // "domain.op_type" (just op_type in the ONNX domain), for messages.
  std::string QualifiedOp() const;
};

}  // namespace kiln
