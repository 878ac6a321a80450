// SPDX-License-Identifier: Apache-2.0
// If, Loop, Scan and SequenceMap over nested Sessions.
//
// NOTE on the approach: each subgraph becomes a Session at load (so an unsupported op inside a
// body fails the model load, like any other). At run time the kernel gathers the subgraph's
// captured values from its implicit inputs, runs the subgraph once (If), once per iteration
// (Loop, Scan) or once per sequence element (SequenceMap) through Session::RunValues, and hands
// the final values to its outputs. If outputs, Loop-carried values and captures may be tensors,
// sequences or nones; Loop scan outputs, Scan and the per-element values of SequenceMap are
// tensors, as ONNX says. Per-iteration outputs are kept as separate tensors and stacked (or
// collected into a sequence) once at the end. Loop-carried values may change shape between
// iterations, so subgraph inputs are checked for dtype and rank only.

#include "runtime/control_flow.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace kiln {
namespace {

Status CfError(std::string_view op, std::string msg) {
  return Status::InvalidArgument(fmt::format("{}: {}", op, msg));
}

// Copies `n` elements of `dtype` (strings element by element).
void CopyElements(DataType dtype, const void* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dtype == DataType::kBytes) {
    const auto* s = static_cast<const std::string*>(src);
    auto* d = static_cast<std::string*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * DataTypeSize(dtype));
  }
}

const char* ElementPtr(const Tensor& t, int64_t element) {
  return static_cast<const char*>(t.raw_data()) +
         static_cast<size_t>(element) * DataTypeSize(t.dtype());
}
char* ElementPtr(OwnedTensor& t, int64_t element) {
  return static_cast<char*>(t.raw_data()) + static_cast<size_t>(element) * DataTypeSize(t.dtype());
}

Status CopyToOutput(KernelContext& ctx, int i, const Tensor& src) {
  KILN_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(i, src.dtype(), src.shape()));
  CopyElements(src.dtype(), src.raw_data(), out.raw_data(), src.num_elements());
  return Status::OK();
}

// Slice `index` of `t` along `axis`, with that axis removed.
Result<OwnedTensor> SliceAlong(const Tensor& t, int axis, int64_t index) {
  std::vector<int64_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  const int64_t outer =
      std::accumulate(dims.begin(), dims.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner =
      std::accumulate(dims.begin() + axis + 1, dims.end(), int64_t{1}, std::multiplies<>());
  const int64_t len = dims[static_cast<size_t>(axis)];
  dims.erase(dims.begin() + axis);
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(t.dtype(), Shape(dims)));
  for (int64_t o = 0; o < outer; ++o) {
    CopyElements(t.dtype(), ElementPtr(t, (o * len + index) * inner), ElementPtr(out, o * inner),
                 inner);
  }
  return out;
}

// Stacks equally shaped `parts` along a new axis `axis`. With no parts, `empty_dims` (the
// declared per-part dims, unknown ones as 0) give the shape, with 0 at `axis`.
Result<OwnedTensor> StackAlong(std::string_view op, const std::vector<OwnedTensor>& parts,
                               int64_t axis, DataType empty_dtype) {
  if (parts.empty()) {
    return OwnedTensor::Allocate(
        empty_dtype == DataType::kInvalid ? DataType::kFloat32 : empty_dtype, Shape{0});
  }
  const Shape& part = parts[0].shape();
  const int rank = part.rank() + 1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return CfError(op, fmt::format("output axis {} is out of range for rank {}", axis, rank));
  }
  for (const OwnedTensor& p : parts) {
    if (!(p.shape() == part) || p.dtype() != parts[0].dtype()) {
      return CfError(op, fmt::format("iterations produced different shapes {} and {} for one "
                                     "scan output",
                                     part.ToString(), p.shape().ToString()));
    }
  }
  std::vector<int64_t> dims(part.dims().begin(), part.dims().end());
  dims.insert(dims.begin() + axis, static_cast<int64_t>(parts.size()));
  KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(parts[0].dtype(), shape));
  const int64_t outer = std::accumulate(part.dims().begin(), part.dims().begin() + axis, int64_t{1},
                                        std::multiplies<>());
  const int64_t inner = std::accumulate(part.dims().begin() + axis, part.dims().end(), int64_t{1},
                                        std::multiplies<>());
  const int64_t n = static_cast<int64_t>(parts.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < n; ++k) {
      CopyElements(out.dtype(), ElementPtr(parts[static_cast<size_t>(k)].view(), o * inner),
                   ElementPtr(out, (o * n + k) * inner), inner);
    }
  }
  return out;
}

Result<bool> ReadBool(std::string_view op, const Tensor& t, std::string_view what) {
  if (t.dtype() != DataType::kBool || t.num_elements() != 1) {
    return CfError(op, fmt::format("{} must be a BOOL tensor with one element, got {}{}", what,
                                   DataTypeName(t.dtype()), t.shape().ToString()));
  }
  return *t.data<const bool>();
}

// A subgraph made ready to run, with where each of its captured values comes from among the
// node's inputs.
struct Subgraph {
  std::unique_ptr<Session> session;
  std::vector<int> capture_inputs;  // node input index per captures() entry

  Result<std::vector<RuntimeValue>> Run(const KernelContext& ctx,
                                        std::span<const RuntimeValue> inputs) const {
    std::vector<Tensor> tensors;
    std::vector<const RuntimeValue*> values;
    tensors.reserve(capture_inputs.size());
    values.reserve(capture_inputs.size());
    for (int i : capture_inputs) {
      tensors.push_back(ctx.input(i));
      values.push_back(ctx.value_input(i));
    }
    return session->RunValues(inputs, tensors, values);
  }
};

// The tensor in `v`, or an error naming `what` when it is a sequence or none.
Result<OwnedTensor> TensorOf(std::string_view op, const RuntimeValue& v, std::string_view what) {
  if (!v.is_tensor()) {
    return CfError(op, fmt::format("{} must be a tensor, got a {}", what, v.Describe()));
  }
  return v.tensor();
}

// The base of the control-flow kernels: all of them may see sequences and nones (captured
// values, If outputs, Loop-carried values, SequenceMap inputs).
class ControlFlowKernel : public Kernel {
 public:
  bool TakesNonTensorValues() const override { return true; }
  // The implementations the subgraphs' nodes ran on ("kiln ref", "oneDNN ..."), distinct.
  void AddPlanStats(MemoryPlanStats& stats) const {
    for (const Subgraph* g : Subgraphs()) {
      const MemoryPlanStats s = g->session->memory_plan_stats();
      stats.subgraph_recorded_runs += s.recorded_runs + s.subgraph_recorded_runs;
      stats.subgraph_planned_runs += s.planned_runs + s.subgraph_planned_runs;
      stats.subgraph_unplanned_runs += s.unplanned_runs + s.subgraph_unplanned_runs;
    }
  }

  std::string Implementation() const override {
    std::vector<std::string> seen;
    for (const Subgraph* g : Subgraphs()) {
      const Session& s = *g->session;
      for (int n = 0; n < static_cast<int>(s.graph().nodes().size()); ++n) {
        const std::string impl = s.implementation(n);
        size_t begin = 0;
        while (begin < impl.size()) {  // split ", "-joined lists so each appears once
          size_t end = impl.find(", ", begin);
          if (end == std::string::npos) end = impl.size();
          std::string one = impl.substr(begin, end - begin);
          if (std::find(seen.begin(), seen.end(), one) == seen.end()) seen.push_back(one);
          begin = end + 2;
        }
      }
    }
    return fmt::format("{}", fmt::join(seen, ", "));
  }

 protected:
  virtual std::vector<const Subgraph*> Subgraphs() const = 0;
};

// What building a control-flow kernel needs besides the node's description: the graph node itself
// (its implicit inputs feed the subgraphs' captured values) and the options of the nested
// sessions.
struct CfContext {
  const Graph& graph;
  const Node& node;
  const SessionOptions& options;
};

Result<Subgraph> BuildSubgraph(const CfContext& cf, std::string_view attr) {
  const Node& node = cf.node;
  const Attribute* a = node.FindAttribute(attr);
  if (a == nullptr || a->type != AttributeType::kGraph || a->g == nullptr) {
    return CfError(node.op_type, fmt::format("graph attribute '{}' is missing", attr));
  }
  SessionOptions sub = cf.options;
  sub.check_input_shapes = false;
  sub.inherit_threads = true;  // a body runs as wide as the run of its node
  Result<std::unique_ptr<Session>> session = Session::Create(a->g, sub);
  if (!session.ok()) return session.status().WithContext(fmt::format("subgraph '{}'", attr));
  Subgraph s;
  s.session = std::move(session).value();
  for (int capture : s.session->captures()) {
    const std::string& name = a->g->value(capture).name;
    int index = -1;
    for (size_t j = 0; j < node.implicit_inputs.size(); ++j) {
      if (cf.graph.value(node.implicit_inputs[j]).name == name) {
        index = static_cast<int>(node.inputs.size() + j);
      }
    }
    if (index < 0) {
      return Status::Internal(
          fmt::format("{}: subgraph '{}' reads '{}', which the node does "
                      "not supply",
                      node.op_type, attr, name));
    }
    s.capture_inputs.push_back(index);
  }
  return s;
}

class IfKernel final : public ControlFlowKernel {
 public:
  IfKernel(Subgraph then_branch, Subgraph else_branch)
      : then_(std::move(then_branch)), else_(std::move(else_branch)) {}

  Status Compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return CfError("If", "input 'cond' is missing");
    KILN_ASSIGN_OR_RETURN(bool cond, ReadBool("If", ctx.input(0), "input 'cond'"));
    const Subgraph& branch = cond ? then_ : else_;
    KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, branch.Run(ctx, {}));
    if (static_cast<int>(outs.size()) != ctx.num_outputs()) {
      return CfError("If", fmt::format("the {} branch has {} outputs but the node has {}",
                                       cond ? "then" : "else", outs.size(), ctx.num_outputs()));
    }
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      ctx.SetOutputValue(i, std::move(outs[static_cast<size_t>(i)]));
    }
    return Status::OK();
  }

 private:
  std::vector<const Subgraph*> Subgraphs() const override { return {&then_, &else_}; }
  Subgraph then_, else_;
};

class LoopKernel final : public ControlFlowKernel {
 public:
  LoopKernel(Subgraph body, int num_carried, int num_scan, std::vector<DataType> scan_dtypes)
      : body_(std::move(body)),
        num_carried_(num_carried),
        num_scan_(num_scan),
        scan_dtypes_(std::move(scan_dtypes)) {}

  Status Compute(KernelContext& ctx) const override {
    int64_t max_trips = std::numeric_limits<int64_t>::max();
    if (ctx.has_input(0)) {
      const Tensor& m = ctx.input(0);
      if (m.dtype() != DataType::kInt64 || m.num_elements() != 1) {
        return CfError("Loop", "input 'M' must be an INT64 tensor with one element");
      }
      max_trips = *m.data<const int64_t>();
    }
    const bool use_cond = ctx.has_input(1);
    bool cond = true;
    if (use_cond) {
      KILN_ASSIGN_OR_RETURN(cond, ReadBool("Loop", ctx.input(1), "input 'cond'"));
    }

    // inputs = {iteration number, condition, loop-carried values...}
    std::vector<RuntimeValue> inputs(static_cast<size_t>(2 + num_carried_));
    for (int i = 0; i < num_carried_; ++i) {
      if (!ctx.has_input(2 + i)) {
        return CfError("Loop", fmt::format("loop-carried input {} is missing", i));
      }
      KILN_ASSIGN_OR_RETURN(inputs[static_cast<size_t>(2 + i)], ctx.InputValue(2 + i));
    }
    std::vector<std::vector<OwnedTensor>> scans(static_cast<size_t>(num_scan_));
    for (int64_t i = 0; i < max_trips && cond; ++i) {
      // Fresh scalars each iteration: values the body returns may share their buffers.
      KILN_ASSIGN_OR_RETURN(OwnedTensor iter, OwnedTensor::Allocate(DataType::kInt64, Shape{}));
      KILN_ASSIGN_OR_RETURN(OwnedTensor cond_t, OwnedTensor::Allocate(DataType::kBool, Shape{}));
      *iter.data<int64_t>() = i;
      *cond_t.data<bool>() = cond;
      inputs[0] = RuntimeValue(std::move(iter));
      inputs[1] = RuntimeValue(std::move(cond_t));
      KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, body_.Run(ctx, inputs));
      if (static_cast<int>(outs.size()) != 1 + num_carried_ + num_scan_) {
        return CfError("Loop", fmt::format("the body produced {} outputs, expected {}", outs.size(),
                                           1 + num_carried_ + num_scan_));
      }
      if (use_cond) {
        KILN_ASSIGN_OR_RETURN(OwnedTensor c, TensorOf("Loop", outs[0], "body output 'cond'"));
        KILN_ASSIGN_OR_RETURN(cond, ReadBool("Loop", c.view(), "body 'cond'"));
      }
      for (int c = 0; c < num_carried_; ++c) {
        inputs[2 + static_cast<size_t>(c)] = std::move(outs[1 + static_cast<size_t>(c)]);
      }
      for (int k = 0; k < num_scan_; ++k) {
        KILN_ASSIGN_OR_RETURN(OwnedTensor t,
                              TensorOf("Loop", outs[static_cast<size_t>(1 + num_carried_ + k)],
                                       fmt::format("scan output {} of the body", k)));
        scans[static_cast<size_t>(k)].push_back(std::move(t));
      }
    }
    for (int c = 0; c < num_carried_ && c < ctx.num_outputs(); ++c) {
      ctx.SetOutputValue(c, std::move(inputs[2 + static_cast<size_t>(c)]));
    }
    for (int k = 0; k < num_scan_ && num_carried_ + k < ctx.num_outputs(); ++k) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor stacked,
                            StackAlong("Loop", scans[static_cast<size_t>(k)], 0,
                                       scan_dtypes_[static_cast<size_t>(k)]));
      KILN_RETURN_IF_ERROR(CopyToOutput(ctx, num_carried_ + k, stacked.view()));
    }
    return Status::OK();
  }

 private:
  std::vector<const Subgraph*> Subgraphs() const override { return {&body_}; }
  Subgraph body_;
  int num_carried_;
  int num_scan_;
  std::vector<DataType> scan_dtypes_;
};

// Scan. Opset 8 has a leading batch axis on every input and output and an optional
// sequence_lens input; opset 9+ has per-input/output axes and directions.
class ScanKernel final : public ControlFlowKernel {
 public:
  struct Attrs {
    int num_states = 0;
    int num_scan_inputs = 0;
    int num_scan_outputs = 0;
    std::vector<int64_t> input_directions, output_directions, input_axes, output_axes;
    bool batched = false;  // opset 8
  };
  ScanKernel(Subgraph body, Attrs attrs) : body_(std::move(body)), a_(std::move(attrs)) {}

  Status Compute(KernelContext& ctx) const override {
    const int first = a_.batched ? 1 : 0;  // opset 8: input 0 is sequence_lens
    for (int i = 0; i < first + a_.num_states + a_.num_scan_inputs; ++i) {
      if (const RuntimeValue* v = ctx.value_input(i)) {
        return CfError("Scan",
                       fmt::format("input {} is a {}; Scan takes tensors only", i, v->Describe()));
      }
    }
    std::vector<Tensor> states, scans;
    for (int i = 0; i < a_.num_states; ++i) states.push_back(ctx.input(first + i));
    for (int j = 0; j < a_.num_scan_inputs; ++j) {
      scans.push_back(ctx.input(first + a_.num_states + j));
    }
    for (const Tensor& t : states) {
      if (!t.valid()) return CfError("Scan", "a state input is missing");
    }
    for (const Tensor& t : scans) {
      if (!t.valid()) return CfError("Scan", "a scan input is missing");
    }
    if (!a_.batched) {
      std::vector<OwnedTensor> final_states;
      std::vector<OwnedTensor> outputs;
      KILN_RETURN_IF_ERROR(RunSequence(ctx, states, scans, -1, &final_states, &outputs));
      int o = 0;
      for (OwnedTensor& t : final_states) KILN_RETURN_IF_ERROR(CopyToOutput(ctx, o++, t.view()));
      for (OwnedTensor& t : outputs) KILN_RETURN_IF_ERROR(CopyToOutput(ctx, o++, t.view()));
      return Status::OK();
    }
    // Opset 8: run each batch entry on its own and stack the results on axis 0.
    if (states.empty() && scans.empty()) return CfError("Scan", "no inputs");
    const int64_t batch = (states.empty() ? scans[0] : states[0]).rank() > 0
                              ? (states.empty() ? scans[0] : states[0]).dim(0)
                              : 0;
    std::vector<std::vector<OwnedTensor>> per_output(
        static_cast<size_t>(a_.num_states + a_.num_scan_outputs));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<OwnedTensor> owned_states, owned_scans;
      std::vector<Tensor> bs, bx;
      for (const Tensor& t : states) {
        if (t.rank() < 1 || t.dim(0) != batch) return CfError("Scan", "batch sizes differ");
        KILN_ASSIGN_OR_RETURN(OwnedTensor s, SliceAlong(t, 0, b));
        owned_states.push_back(std::move(s));
      }
      for (const Tensor& t : scans) {
        if (t.rank() < 2 || t.dim(0) != batch) {
          return CfError("Scan", "scan inputs need a batch axis and a sequence axis");
        }
        KILN_ASSIGN_OR_RETURN(OwnedTensor s, SliceAlong(t, 0, b));
        owned_scans.push_back(std::move(s));
      }
      for (const OwnedTensor& t : owned_states) bs.push_back(t.view());
      for (const OwnedTensor& t : owned_scans) bx.push_back(t.view());
      int64_t length = -1;
      if (ctx.has_input(0)) {
        const Tensor& lens = ctx.input(0);
        if (lens.dtype() != DataType::kInt32 || lens.num_elements() != batch) {
          return CfError("Scan", "sequence_lens must be INT32 with one entry per batch item");
        }
        length = lens.data<const int32_t>()[b];
      }
      std::vector<OwnedTensor> final_states, outputs;
      KILN_RETURN_IF_ERROR(RunSequence(ctx, bs, bx, length, &final_states, &outputs));
      size_t o = 0;
      for (OwnedTensor& t : final_states) per_output[o++].push_back(std::move(t));
      for (OwnedTensor& t : outputs) per_output[o++].push_back(std::move(t));
    }
    for (size_t o = 0; o < per_output.size(); ++o) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor stacked,
                            StackAlong("Scan", per_output[o], 0, DataType::kFloat32));
      KILN_RETURN_IF_ERROR(CopyToOutput(ctx, static_cast<int>(o), stacked.view()));
    }
    return Status::OK();
  }

 private:
  // One scan over `scans` (no batch axis). `length` < 0: the full sequence.
  Status RunSequence(const KernelContext& ctx, std::span<const Tensor> states,
                     std::span<const Tensor> scans, int64_t length,
                     std::vector<OwnedTensor>* final_states,
                     std::vector<OwnedTensor>* outputs) const {
    std::vector<int> axes;
    int64_t seq = -1;
    for (size_t j = 0; j < scans.size(); ++j) {
      int64_t axis = j < a_.input_axes.size() ? a_.input_axes[j] : 0;
      if (axis < 0) axis += scans[j].rank();
      if (axis < 0 || axis >= scans[j].rank()) {
        return CfError("Scan", fmt::format("scan input {} has no axis {}", j, axis));
      }
      const int64_t len = scans[j].dim(static_cast<int>(axis));
      if (seq >= 0 && len != seq) {
        return CfError("Scan",
                       fmt::format("scan inputs have different lengths {} and {}", seq, len));
      }
      seq = len;
      axes.push_back(static_cast<int>(axis));
    }
    if (seq < 0) seq = 0;
    if (length >= 0) {
      if (length > seq) return CfError("Scan", "sequence_lens exceeds the sequence length");
      if (length != seq && a_.num_scan_outputs > 0) {
        return Status::Unimplemented(
            "Scan: sequence_lens shorter than the sequence with scan outputs is not supported");
      }
      seq = length;
    }
    std::vector<OwnedTensor> current;
    for (const Tensor& s : states) {
      KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::CopyOf(s));
      current.push_back(std::move(t));
    }
    std::vector<std::vector<OwnedTensor>> collected(static_cast<size_t>(a_.num_scan_outputs));
    std::vector<RuntimeValue> inputs;
    for (int64_t t = 0; t < seq; ++t) {
      inputs.clear();
      for (const OwnedTensor& c : current) inputs.emplace_back(c);
      for (size_t j = 0; j < scans.size(); ++j) {
        const bool reverse = j < a_.input_directions.size() && a_.input_directions[j] == 1;
        KILN_ASSIGN_OR_RETURN(OwnedTensor slice,
                              SliceAlong(scans[j], axes[j], reverse ? seq - 1 - t : t));
        inputs.emplace_back(std::move(slice));
      }
      KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, body_.Run(ctx, inputs));
      if (static_cast<int>(outs.size()) != a_.num_states + a_.num_scan_outputs) {
        return CfError("Scan", fmt::format("the body produced {} outputs, expected {}", outs.size(),
                                           a_.num_states + a_.num_scan_outputs));
      }
      for (int i = 0; i < a_.num_states + a_.num_scan_outputs; ++i) {
        KILN_ASSIGN_OR_RETURN(OwnedTensor out, TensorOf("Scan", outs[static_cast<size_t>(i)],
                                                        fmt::format("body output {}", i)));
        if (i < a_.num_states) {
          current[static_cast<size_t>(i)] = std::move(out);
        } else {
          collected[static_cast<size_t>(i - a_.num_states)].push_back(std::move(out));
        }
      }
    }
    *final_states = std::move(current);
    for (int k = 0; k < a_.num_scan_outputs; ++k) {
      auto& parts = collected[static_cast<size_t>(k)];
      if (static_cast<size_t>(k) < a_.output_directions.size() &&
          a_.output_directions[static_cast<size_t>(k)] == 1) {
        std::reverse(parts.begin(), parts.end());
      }
      const int64_t axis = static_cast<size_t>(k) < a_.output_axes.size()
                               ? a_.output_axes[static_cast<size_t>(k)]
                               : 0;
      KILN_ASSIGN_OR_RETURN(OwnedTensor stacked,
                            StackAlong("Scan", parts, axis, DataType::kFloat32));
      outputs->push_back(std::move(stacked));
    }
    return Status::OK();
  }

  std::vector<const Subgraph*> Subgraphs() const override { return {&body_}; }
  Subgraph body_;
  Attrs a_;
};

// SequenceMap (opset 17): runs the body once per element of input 0. Additional inputs that are
// sequences (of the same length) contribute their element at the same position; tensors are fed
// whole to every iteration. Body output k, one tensor per iteration, becomes output sequence k.
class SequenceMapKernel final : public ControlFlowKernel {
 public:
  SequenceMapKernel(Subgraph body, std::vector<DataType> output_dtypes)
      : body_(std::move(body)), output_dtypes_(std::move(output_dtypes)) {}

  Status Compute(KernelContext& ctx) const override {
    const int num_explicit = static_cast<int>(body_.session->graph().inputs.size());
    const TensorSequence* first = ctx.sequence_input(0);
    if (first == nullptr) {
      return CfError("SequenceMap",
                     fmt::format("input 0 must be a sequence, got {}", Describe(ctx, 0)));
    }
    const int64_t n = first->size();
    // Per body input: the sequence it walks, or the whole value it gets every time.
    std::vector<const TensorSequence*> walked(static_cast<size_t>(num_explicit), nullptr);
    std::vector<RuntimeValue> inputs(static_cast<size_t>(num_explicit));
    walked[0] = first;
    for (int j = 1; j < num_explicit; ++j) {
      if (const TensorSequence* seq = ctx.sequence_input(j)) {
        if (seq->size() != n) {
          return CfError("SequenceMap",
                         fmt::format("input {} has {} elements but input 0 has {}; sequences "
                                     "must have the same length",
                                     j, seq->size(), n));
        }
        walked[static_cast<size_t>(j)] = seq;
      } else if (ctx.input(j).valid()) {
        KILN_ASSIGN_OR_RETURN(inputs[static_cast<size_t>(j)], ctx.InputValue(j));
      } else {
        return CfError("SequenceMap", fmt::format("input {} must be a sequence or a tensor, "
                                                  "got {}",
                                                  j, Describe(ctx, j)));
      }
    }
    std::vector<TensorSequence> results;
    for (DataType dtype : output_dtypes_) results.emplace_back(dtype);
    for (int64_t k = 0; k < n; ++k) {
      for (size_t j = 0; j < walked.size(); ++j) {
        if (walked[j] != nullptr) inputs[j] = RuntimeValue(walked[j]->at(k));
      }
      KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, body_.Run(ctx, inputs));
      if (outs.size() != results.size()) {
        return CfError("SequenceMap", fmt::format("the body produced {} outputs, expected {}",
                                                  outs.size(), results.size()));
      }
      for (size_t o = 0; o < outs.size(); ++o) {
        KILN_ASSIGN_OR_RETURN(OwnedTensor t,
                              TensorOf("SequenceMap", outs[o], fmt::format("body output {}", o)));
        if (k == 0 && results[o].elem_dtype() == DataType::kInvalid) {
          results[o] = TensorSequence(t.dtype());
        }
        Status s = results[o].Insert(results[o].size(), std::move(t));
        if (!s.ok()) {
          return CfError("SequenceMap",
                         fmt::format("body output {} at element {}: {}", o, k, s.message()));
        }
      }
    }
    for (size_t o = 0; o < results.size(); ++o) {
      if (results[o].elem_dtype() == DataType::kInvalid) {
        return CfError("SequenceMap", fmt::format("output {} is an empty sequence whose element "
                                                  "type the model does not declare",
                                                  o));
      }
      if (static_cast<int>(o) < ctx.num_outputs()) {
        ctx.SetOutputValue(static_cast<int>(o), RuntimeValue(std::move(results[o])));
      }
    }
    return Status::OK();
  }

 private:
  static std::string Describe(const KernelContext& ctx, int i) {
    if (const RuntimeValue* v = ctx.value_input(i)) return v->Describe();
    return ctx.input(i).valid() ? "a tensor" : "nothing (the input is omitted)";
  }

  std::vector<const Subgraph*> Subgraphs() const override { return {&body_}; }
  Subgraph body_;
  // Element type per output sequence from the declared types; kInvalid: from the first element.
  std::vector<DataType> output_dtypes_;
};

Result<std::unique_ptr<Kernel>> CreateIf(const CfContext& cf) {
  KILN_ASSIGN_OR_RETURN(Subgraph then_branch, BuildSubgraph(cf, "then_branch"));
  KILN_ASSIGN_OR_RETURN(Subgraph else_branch, BuildSubgraph(cf, "else_branch"));
  return std::unique_ptr<Kernel>(new IfKernel(std::move(then_branch), std::move(else_branch)));
}

Result<std::unique_ptr<Kernel>> CreateLoop(const KernelInfo& info, const CfContext& cf) {
  KILN_ASSIGN_OR_RETURN(Subgraph body, BuildSubgraph(cf, "body"));
  const Graph& g = body.session->graph();
  const int num_carried = static_cast<int>(g.inputs.size()) - 2;
  if (num_carried < 0) return CfError("Loop", "the body needs at least 2 inputs (iter, cond)");
  const int num_scan = static_cast<int>(g.outputs.size()) - 1 - num_carried;
  if (num_scan < 0) {
    return CfError("Loop", fmt::format("the body has {} outputs; it needs 1 + {} loop-carried",
                                       g.outputs.size(), num_carried));
  }
  if (info.num_inputs() != 2 + num_carried) {
    return CfError("Loop", fmt::format("the node has {} inputs; the body expects M, cond and {} "
                                       "loop-carried values",
                                       info.num_inputs(), num_carried));
  }
  std::vector<DataType> scan_dtypes;
  scan_dtypes.reserve(static_cast<size_t>(num_scan));
  const size_t first_scan = 1 + static_cast<size_t>(num_carried);
  for (size_t k = 0; k < static_cast<size_t>(num_scan); ++k) {
    scan_dtypes.push_back(g.value(g.outputs[first_scan + k]).type.dtype);
  }
  return std::unique_ptr<Kernel>(
      new LoopKernel(std::move(body), num_carried, num_scan, std::move(scan_dtypes)));
}

Result<std::unique_ptr<Kernel>> CreateScan(const KernelInfo& info, const CfContext& cf) {
  KILN_ASSIGN_OR_RETURN(Subgraph body, BuildSubgraph(cf, "body"));
  const NodeDesc& node = info.node();
  ScanKernel::Attrs a;
  a.batched = info.opset() < 9;
  a.num_scan_inputs = static_cast<int>(node.GetInt("num_scan_inputs", -1));
  const Graph& g = body.session->graph();
  a.num_states = static_cast<int>(g.inputs.size()) - a.num_scan_inputs;
  a.num_scan_outputs = static_cast<int>(g.outputs.size()) - a.num_states;
  const int explicit_inputs = info.num_inputs() - (a.batched ? 1 : 0);
  if (a.num_scan_inputs < 1 || a.num_states < 0 || a.num_scan_outputs < 0 ||
      explicit_inputs != a.num_states + a.num_scan_inputs) {
    return CfError("Scan", fmt::format("num_scan_inputs {} does not fit a body with {} inputs "
                                       "and {} outputs and a node with {} inputs",
                                       a.num_scan_inputs, g.inputs.size(), g.outputs.size(),
                                       info.num_inputs()));
  }
  if (a.batched) {
    a.input_directions = node.GetInts("directions");
  } else {
    a.input_directions = node.GetInts("scan_input_directions");
    a.output_directions = node.GetInts("scan_output_directions");
    a.input_axes = node.GetInts("scan_input_axes");
    a.output_axes = node.GetInts("scan_output_axes");
  }
  for (int64_t d : a.input_directions) {
    if (d != 0 && d != 1) return CfError("Scan", fmt::format("direction {} is not 0 or 1", d));
  }
  for (int64_t d : a.output_directions) {
    if (d != 0 && d != 1) return CfError("Scan", fmt::format("direction {} is not 0 or 1", d));
  }
  return std::unique_ptr<Kernel>(new ScanKernel(std::move(body), std::move(a)));
}

Result<std::unique_ptr<Kernel>> CreateSequenceMap(const KernelInfo& info, const CfContext& cf) {
  KILN_ASSIGN_OR_RETURN(Subgraph body, BuildSubgraph(cf, "body"));
  const Graph& g = body.session->graph();
  if (g.inputs.empty() || info.num_inputs() != static_cast<int>(g.inputs.size())) {
    return CfError("SequenceMap", fmt::format("the node has {} inputs but the body takes {}; "
                                              "they must match, and be at least 1",
                                              info.num_inputs(), g.inputs.size()));
  }
  if (static_cast<int>(g.outputs.size()) != info.num_outputs()) {
    return CfError("SequenceMap", fmt::format("the node has {} outputs but the body produces {}",
                                              info.num_outputs(), g.outputs.size()));
  }
  std::vector<DataType> output_dtypes;
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    DataType dtype = g.value(g.outputs[o]).type.dtype;
    const ValueType& declared = info.output_type(static_cast<int>(o));
    if (dtype == DataType::kInvalid && declared.is_sequence() && declared.elem != nullptr) {
      dtype = declared.elem->dtype;
    }
    output_dtypes.push_back(dtype);
  }
  return std::unique_ptr<Kernel>(new SequenceMapKernel(std::move(body), std::move(output_dtypes)));
}

}  // namespace

bool IsControlFlowOp(const Node& node) {
  return node.domain.empty() && (node.op_type == "If" || node.op_type == "Loop" ||
                                 node.op_type == "Scan" || node.op_type == "SequenceMap");
}

Result<std::unique_ptr<Kernel>> CreateControlFlowKernel(const Graph& graph, const Node& node,
                                                        const KernelInfo& info,
                                                        const SessionOptions& options) {
  const CfContext cf{graph, node, options};
  const std::string& op = info.op_type();
  if (op == "If") return CreateIf(cf);
  if (op == "Loop") return CreateLoop(info, cf);
  if (op == "Scan" && info.opset() >= 8) return CreateScan(info, cf);
  if (op == "SequenceMap" && info.opset() >= 17) return CreateSequenceMap(info, cf);
  return Status::InvalidArgument(
      fmt::format("op {} (opset {}) is not supported", op, info.opset()));
}

const KernelDef& ControlFlowKernelDef() {
  static const KernelDef def{"", "", 1, 17, DeviceType::kCpu, kAllTypes, 0, nullptr, "runtime"};
  return def;
}

void AddSubgraphPlanStats(const Kernel& kernel, MemoryPlanStats& stats) {
  if (const auto* cf = dynamic_cast<const ControlFlowKernel*>(&kernel); cf != nullptr) {
    cf->AddPlanStats(stats);
  }
}

}  // namespace kiln
