// SPDX-License-Identifier: Apache-2.0
#pragma once
// The kernel contract.
//
// A Kernel is built once per graph node from a KernelInfo (the node's description, op/node_desc.h:
// attributes, declared types and constant inputs; kernels never see the graph) and may precompute
// or pre-pack anything that does not depend on the runtime inputs. Compute() is const and
// thread-safe: several sessions (or several runs of one session) may call it at once, each with its
// own KernelContext.
//
// Output memory comes from the context (AllocateOutput), so the runtime can later hand out
// planned memory without kernels changing. Kernels never create threads.
//
// Most kernels see only tensors. Kernels of the sequence and optional operators (and the
// control-flow ops) also take and produce non-tensor values (tensor/runtime_value.h): they
// override TakesNonTensorValues(), read such inputs with value_input(i) and write such outputs
// with SetOutputValue(i, ...). Tensor inputs stay visible as input(i) to every kernel. The
// runtime refuses to hand a sequence or a none to a kernel that does not take them.
//
//   class ReluKernel final : public Kernel {
//    public:
//     Status Compute(KernelContext& ctx) const override {
//       const Tensor& x = ctx.input(0);
//       KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
//       ...
//     }
//   };

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "op/node_desc.h"
#include "tensor/runtime_value.h"
#include "tensor/tensor.h"

namespace kiln {

class Stream;  // backend/backend.h

// What a kernel factory may look at: the description of the node (op, domain, opset in force,
// attributes, and per operand slot its presence, declared type and constant data). Holds a
// reference: valid only during kernel construction, while the description lives.
class KernelInfo {
 public:
  explicit KernelInfo(const NodeDesc& node) : node_(node) {}

  const NodeDesc& node() const { return node_; }
  const std::string& op_type() const { return node_.op_type; }
  int64_t opset() const { return node_.opset; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool has_input(int i) const { return node_.has_input(i); }
  bool has_output(int i) const { return node_.has_output(i); }
  // Declared type of input i (dtype kInvalid and no shape when absent or unknown).
  const ValueType& input_type(int i) const;
  const ValueType& output_type(int i) const;
  // Data of input i when it is a constant (an initializer), else nullptr.
  const OwnedTensor* constant_input(int i) const;

 private:
  const NodeDesc& node_;
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
  // For kernels that take non-tensor values: input i is `inputs[i]` when that tensor is valid,
  // else `input_values[i]` (a sequence or none) when non-null, else omitted. `input_values` may
  // be shorter than `inputs` (missing entries are null). `output_values` has one slot per node
  // output for the outputs that are not tensors (SetOutputValue).
  KernelContext(std::span<const Tensor> inputs, std::span<const RuntimeValue* const> input_values,
                std::span<OwnedTensor> outputs, std::span<RuntimeValue> output_values,
                Allocator& allocator = HostAllocator())
      : inputs_(inputs),
        input_values_(input_values),
        outputs_(outputs),
        output_values_(output_values),
        allocator_(allocator) {}

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // True when input i is present: a tensor, or (for kernels that take them) a sequence or none.
  bool has_input(int i) const {
    return i >= 0 && i < num_inputs() &&
           (inputs_[static_cast<size_t>(i)].valid() || value_input(i) != nullptr);
  }
  // The tensor at input i; an invalid Tensor when the input is omitted or not a tensor.
  // REQUIRES: 0 <= i < num_inputs().
  const Tensor& input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  // The non-tensor value (a sequence or none) at input i; nullptr when input i is a tensor or is
  // omitted.
  const RuntimeValue* value_input(int i) const {
    return i >= 0 && static_cast<size_t>(i) < input_values_.size()
               ? input_values_[static_cast<size_t>(i)]
               : nullptr;
  }
  // The sequence at input i, or nullptr when input i is not a sequence.
  const TensorSequence* sequence_input(int i) const {
    const RuntimeValue* v = value_input(i);
    return v != nullptr && v->is_sequence() ? &v->sequence() : nullptr;
  }
  // Input i as an owned value (a tensor input is copied into the context's allocator); an
  // invalid RuntimeValue when the input is omitted.
  Result<RuntimeValue> InputValue(int i) const;
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  // Allocates output i (zero-filled) and returns a writable view of it.
  // REQUIRES: 0 <= i < num_outputs(); each output allocated at most once.
  Result<Tensor> AllocateOutput(int i, DataType dtype, const Shape& shape);
  // AllocateOutput without the zero-fill, for a kernel that writes every element of output i
  // on every path that returns OK (a fast kernel's own loops, a oneDNN primitive's dst).
  Result<Tensor> AllocateOutputForOverwrite(int i, DataType dtype, const Shape& shape);
  // A zero-filled tensor from the context's allocator that is not (yet) an output, such as an
  // element of a sequence being built.
  Result<OwnedTensor> AllocateTensor(DataType dtype, const Shape& shape) const;
  // Sets output i to `value`: a tensor goes to the tensor slot (as AllocateOutput would put it),
  // a sequence or none to the value slot.
  // REQUIRES: 0 <= i < num_outputs(); value.valid(); output i not set before; the context was
  // built with output value slots (the runtime does so for kernels that take non-tensor values).
  void SetOutputValue(int i, RuntimeValue value);

  // The owners of the input tensors, one per input (null where the runtime does not lend one:
  // graph inputs and outputs, constants), for ForwardInput. The runtime sets them per call.
  void set_input_owners(std::span<const OwnedTensor* const> owners) { input_owners_ = owners; }
  std::span<const OwnedTensor* const> input_owners() const { return input_owners_; }
  // Where outputs come from (for a kernel that runs another kernel in a context of its own).
  Allocator& allocator() const { return allocator_; }
  // For view ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity): makes output `out` share input
  // `in`'s memory under `shape` (same dtype and element count) instead of copying it. Returns
  // false, doing nothing, when the runtime lent no owner for input `in`; the kernel then copies.
  // Nothing writes into a tensor after its producer made it, so sharing is safe.
  // REQUIRES: 0 <= out < num_outputs(); output `out` not set yet.
  bool ForwardInput(int in, int out, const Shape& shape);
  // Whether output `out` was made by ForwardInput (it is memory of an input, not a new block).
  bool forwarded(int out) const { return out >= 0 && out < 64 && ((forwarded_ >> out) & 1) != 0; }

  // The stream of the node's device (backend/backend.h): kernels of an asynchronous device
  // enqueue their work on it, after the copies that brought their inputs. Null for the CPU,
  // whose kernels run on the calling thread. The runtime sets it per call.
  void set_stream(Stream* stream) { stream_ = stream; }
  Stream* stream() const { return stream_; }

 private:
  std::span<const Tensor> inputs_;
  std::span<const RuntimeValue* const> input_values_;
  std::span<OwnedTensor> outputs_;
  std::span<RuntimeValue> output_values_;
  Allocator& allocator_;
  std::span<const OwnedTensor* const> input_owners_;
  uint64_t forwarded_ = 0;  // bit o: output o was forwarded
  Stream* stream_ = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Computes every present output of the node from the inputs in `ctx`. Returns an error Status
  // (never crashes) when runtime inputs violate the operator's rules (shape mismatch, etc.).
  virtual Status Compute(KernelContext& ctx) const = 0;
  // True for kernels that read sequences or nones (KernelContext::value_input) or write them
  // (SetOutputValue). The runtime gives other kernels tensors only.
  virtual bool TakesNonTensorValues() const { return false; }
  // Bytes of constant weights the kernel holds in its own (repacked) copies, on top of the
  // graph's initializers; 0 for kernels that keep none. For memory accounting and tests.
  virtual int64_t PackedWeightBytes() const { return 0; }
  // A remark on how this kernel runs that its user should know, in one sentence (an INT8 layer
  // whose weights this CPU takes at half speed, say); empty for almost every kernel. Sessions
  // gather them (Session::KernelNotes) for kiln profile and the server's load log.
  virtual std::string_view Note() const { return {}; }
  // The implementations this kernel has run on so far, for kiln profile and
  // `kiln run --implementations`: oneDNN's name for each primitive it planned ("oneDNN
  // brgconv:avx512_core"), "kiln ref" when a fast kernel handed a call to its reference kernel;
  // distinct ones ", "-separated. Empty for kernels with one implementation (the provider says it).
  virtual std::string Implementation() const { return {}; }
};

// Builds a kernel for the node in `info`; may reject attributes with INVALID_ARGUMENT.
using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelInfo& info);

}  // namespace kiln
