// SPDX-License-Identifier: Apache-2.0
// Reference kernels of the sequence and optional operators: SequenceEmpty, SequenceConstruct,
// SequenceInsert, SequenceAt, SequenceErase, SequenceLength, SplitToSequence,
// ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement, and Identity from opset
// 14 (tensors, sequences and, from 16, optionals). SequenceMap runs a subgraph and lives with the
// control-flow ops (runtime/control_flow.cc).
//
// NOTE on the approach: sequences are TensorSequence values (tensor/runtime_value.h) whose
// elements are OwnedTensors with shared buffers, and tensors are immutable once produced. So a
// kernel that passes elements through (SequenceInsert, SequenceErase, SequenceAt, Identity)
// copies the list, never the data; only a tensor that arrives as an input view (the tensor
// SequenceInsert inserts, the inputs of SequenceConstruct) is copied into memory of its own.
// Positions follow ONNX: negative values count from the back; SequenceInsert accepts [-n, n],
// SequenceAt and SequenceErase [-n, n-1]. An optional that holds something is that value at run
// time; none is RuntimeValue::None().

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

// Kernels of this file read and write sequences and nones.
class ValueKernel : public Kernel {
 public:
  bool TakesNonTensorValues() const override { return true; }
};

// What input i holds, for messages.
std::string DescribeInput(const KernelContext& ctx, int i) {
  if (const RuntimeValue* v = ctx.value_input(i)) return v->Describe();
  if (!ctx.input(i).valid()) return "nothing (the input is omitted)";
  return fmt::format("tensor {}{}", DataTypeName(ctx.input(i).dtype()),
                     ctx.input(i).shape().ToString());
}

Result<const TensorSequence*> SequenceInput(const KernelContext& ctx, int i, std::string_view op) {
  if (i >= ctx.num_inputs()) return OpError(op, "required input {} is missing", i);
  const TensorSequence* seq = ctx.sequence_input(i);
  if (seq == nullptr) {
    return OpError(op, "input {} must be a sequence, got {}", i, DescribeInput(ctx, i));
  }
  return seq;
}

// Input i as a CPU tensor (present, contiguous, not a sequence or none).
Result<Tensor> TensorInput(const KernelContext& ctx, int i, std::string_view op) {
  if (i >= ctx.num_inputs() || !ctx.has_input(i)) {
    return OpError(op, "required input {} is missing", i);
  }
  if (!ctx.input(i).valid()) {
    return OpError(op, "input {} must be a tensor, got {}", i, DescribeInput(ctx, i));
  }
  KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  return ctx.input(i);
}

// A position input: an INT32 or INT64 tensor with one element (a scalar, as ONNX specifies; a
// one-element 1-D tensor is accepted too).
Result<int64_t> ReadPosition(const Tensor& t, std::string_view op, std::string_view what) {
  if ((t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64) || t.num_elements() != 1 ||
      t.rank() > 1) {
    return OpError(op, "{} must be an INT32 or INT64 scalar, got {}{}", what,
                   DataTypeName(t.dtype()), t.shape().ToString());
  }
  return t.dtype() == DataType::kInt32 ? int64_t{*t.data<const int32_t>()}
                                       : *t.data<const int64_t>();
}

// Maps `pos` into [0, n) (or [0, n] with `inclusive_end`), negative counting from the back.
Result<int64_t> NormalizePosition(int64_t pos, int64_t n, bool inclusive_end, std::string_view op) {
  const int64_t hi = inclusive_end ? n : n - 1;
  if (pos < -n || pos > hi) {
    return OpError(op, "position {} is out of range [{}, {}] for a sequence of length {}", pos, -n,
                   hi, n);
  }
  return pos < 0 ? pos + n : pos;
}

// A copy of `src` in memory from the context's allocator.
Result<OwnedTensor> CopyTensor(const KernelContext& ctx, const Tensor& src) {
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, ctx.AllocateTensor(src.dtype(), src.shape()));
  CopyElements(src, 0, t.view(), 0, src.num_elements());
  return t;
}

// Output slot 0 must exist.
Status RequireOutput(const KernelContext& ctx, std::string_view op) {
  if (ctx.num_outputs() < 1) return OpError(op, "no output slot");
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Sequences.

class SequenceEmptyKernel final : public ValueKernel {
 public:
  explicit SequenceEmptyKernel(DataType dtype) : dtype_(dtype) {}
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, "SequenceEmpty"));
    ctx.SetOutputValue(0, RuntimeValue(TensorSequence(dtype_)));
    return Status::OK();
  }

 private:
  DataType dtype_;
};

class SequenceConstructKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "SequenceConstruct";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    if (ctx.num_inputs() < 1) return OpError(kOp, "needs at least one input");
    std::vector<OwnedTensor> elements;
    elements.reserve(static_cast<size_t>(ctx.num_inputs()));
    DataType dtype = DataType::kInvalid;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor t, TensorInput(ctx, i, kOp));
      if (i == 0) dtype = t.dtype();
      if (t.dtype() != dtype) {
        return OpError(kOp,
                       "input {} is {} but input 0 is {}; the elements of a sequence share "
                       "one dtype",
                       i, DataTypeName(t.dtype()), DataTypeName(dtype));
      }
      KILN_ASSIGN_OR_RETURN(OwnedTensor copy, CopyTensor(ctx, t));
      elements.push_back(std::move(copy));
    }
    KILN_ASSIGN_OR_RETURN(TensorSequence seq, TensorSequence::Create(dtype, std::move(elements)));
    ctx.SetOutputValue(0, RuntimeValue(std::move(seq)));
    return Status::OK();
  }
};

class SequenceInsertKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "SequenceInsert";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    KILN_ASSIGN_OR_RETURN(const TensorSequence* in, SequenceInput(ctx, 0, kOp));
    KILN_ASSIGN_OR_RETURN(Tensor t, TensorInput(ctx, 1, kOp));
    if (t.dtype() != in->elem_dtype()) {
      return OpError(kOp, "cannot insert a {} tensor into a sequence of {} tensors",
                     DataTypeName(t.dtype()), DataTypeName(in->elem_dtype()));
    }
    int64_t pos = in->size();
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(Tensor p, TensorInput(ctx, 2, kOp));
      KILN_ASSIGN_OR_RETURN(int64_t raw, ReadPosition(p, kOp, "input 'position'"));
      KILN_ASSIGN_OR_RETURN(pos, NormalizePosition(raw, in->size(), /*inclusive_end=*/true, kOp));
    }
    KILN_ASSIGN_OR_RETURN(OwnedTensor copy, CopyTensor(ctx, t));
    TensorSequence out = *in;
    KILN_RETURN_IF_ERROR(out.Insert(pos, std::move(copy)));
    ctx.SetOutputValue(0, RuntimeValue(std::move(out)));
    return Status::OK();
  }
};

class SequenceAtKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "SequenceAt";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    KILN_ASSIGN_OR_RETURN(const TensorSequence* in, SequenceInput(ctx, 0, kOp));
    KILN_ASSIGN_OR_RETURN(Tensor p, TensorInput(ctx, 1, kOp));
    KILN_ASSIGN_OR_RETURN(int64_t raw, ReadPosition(p, kOp, "input 'position'"));
    KILN_ASSIGN_OR_RETURN(int64_t pos,
                          NormalizePosition(raw, in->size(), /*inclusive_end=*/false, kOp));
    ctx.SetOutputValue(0, RuntimeValue(in->at(pos)));
    return Status::OK();
  }
};

class SequenceEraseKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "SequenceErase";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    KILN_ASSIGN_OR_RETURN(const TensorSequence* in, SequenceInput(ctx, 0, kOp));
    int64_t raw = -1;  // the last element
    if (ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(Tensor p, TensorInput(ctx, 1, kOp));
      KILN_ASSIGN_OR_RETURN(raw, ReadPosition(p, kOp, "input 'position'"));
    }
    if (in->empty()) return OpError(kOp, "cannot erase from an empty sequence");
    KILN_ASSIGN_OR_RETURN(int64_t pos,
                          NormalizePosition(raw, in->size(), /*inclusive_end=*/false, kOp));
    TensorSequence out = *in;
    KILN_RETURN_IF_ERROR(out.Erase(pos));
    ctx.SetOutputValue(0, RuntimeValue(std::move(out)));
    return Status::OK();
  }
};

class SequenceLengthKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "SequenceLength";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    KILN_ASSIGN_OR_RETURN(const TensorSequence* in, SequenceInput(ctx, 0, kOp));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, Shape{}));
    *y.data<int64_t>() = in->size();
    return Status::OK();
  }
};

// SplitToSequence: without `split`, pieces of length 1 along `axis` (squeezed unless keepdims);
// a scalar `split` gives pieces of that length (the last one shorter when it does not divide);
// a 1-D `split` gives the listed lengths, which must add up to the axis length.
class SplitToSequenceKernel final : public ValueKernel {
 public:
  SplitToSequenceKernel(int64_t axis, bool keepdims) : axis_(axis), keepdims_(keepdims) {}

  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "SplitToSequence";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    KILN_ASSIGN_OR_RETURN(Tensor x, TensorInput(ctx, 0, kOp));
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(kOp, axis_, x.rank(), /*allow_negative=*/true));
    const int64_t len = x.dim(axis);
    std::vector<int64_t> lengths;
    bool squeeze = false;
    if (ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(Tensor split, TensorInput(ctx, 1, kOp));
      KILN_ASSIGN_OR_RETURN(lengths, SplitLengths(split, len));
    } else {
      lengths.assign(static_cast<size_t>(len), 1);
      squeeze = !keepdims_;
    }
    const std::span<const int64_t> dims = x.shape().dims();
    const int64_t outer = DimProduct(dims, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(dims, static_cast<size_t>(axis) + 1, dims.size());
    TensorSequence out(x.dtype());
    int64_t start = 0;
    for (int64_t piece : lengths) {
      std::vector<int64_t> piece_dims(dims.begin(), dims.end());
      if (squeeze) {
        piece_dims.erase(piece_dims.begin() + axis);
      } else {
        piece_dims[static_cast<size_t>(axis)] = piece;
      }
      KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(piece_dims));
      KILN_ASSIGN_OR_RETURN(OwnedTensor t, ctx.AllocateTensor(x.dtype(), shape));
      for (int64_t o = 0; o < outer; ++o) {
        CopyElements(x, (o * len + start) * inner, t.view(), o * piece * inner, piece * inner);
      }
      KILN_RETURN_IF_ERROR(out.Insert(out.size(), std::move(t)));
      start += piece;
    }
    ctx.SetOutputValue(0, RuntimeValue(std::move(out)));
    return Status::OK();
  }

 private:
  static Result<std::vector<int64_t>> SplitLengths(const Tensor& split, int64_t len) {
    constexpr std::string_view kOp = "SplitToSequence";
    if ((split.dtype() != DataType::kInt32 && split.dtype() != DataType::kInt64) ||
        split.rank() > 1) {
      return OpError(kOp,
                     "input 'split' must be an INT32 or INT64 scalar or 1-D tensor, got "
                     "{}{}",
                     DataTypeName(split.dtype()), split.shape().ToString());
    }
    std::vector<int64_t> values(static_cast<size_t>(split.num_elements()));
    for (int64_t i = 0; i < split.num_elements(); ++i) {
      values[static_cast<size_t>(i)] = split.dtype() == DataType::kInt32
                                           ? int64_t{split.data<const int32_t>()[i]}
                                           : split.data<const int64_t>()[i];
    }
    if (split.rank() == 0) {
      const int64_t chunk = values[0];
      if (chunk <= 0) return OpError(kOp, "split length {} must be positive", chunk);
      std::vector<int64_t> lengths;
      for (int64_t at = 0; at < len; at += chunk) lengths.push_back(std::min(chunk, len - at));
      return lengths;
    }
    int64_t total = 0;
    for (int64_t v : values) {
      if (v < 0) return OpError(kOp, "split length {} is negative", v);
      if (v > len - total) {
        return OpError(kOp, "split lengths [{}] exceed the axis length {}", fmt::join(values, ","),
                       len);
      }
      total += v;
    }
    if (total != len) {
      return OpError(kOp, "split lengths [{}] add up to {}, not the axis length {}",
                     fmt::join(values, ","), total, len);
    }
    return values;
  }

  int64_t axis_;
  bool keepdims_;
};

// ConcatFromSequence: concatenates the elements along `axis` (every other dim equal), or with
// new_axis = 1 stacks them along a new axis at `axis` (every shape equal).
class ConcatFromSequenceKernel final : public ValueKernel {
 public:
  ConcatFromSequenceKernel(int64_t axis, bool new_axis) : axis_(axis), new_axis_(new_axis) {}

  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "ConcatFromSequence";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    KILN_ASSIGN_OR_RETURN(const TensorSequence* in, SequenceInput(ctx, 0, kOp));
    if (in->empty()) return OpError(kOp, "cannot concatenate an empty sequence");
    const Shape& first = in->at(0).shape();
    if (new_axis_ && first.rank() + 1 > Shape::kMaxRank) {
      return OpError(kOp, "stacking rank-{} elements exceeds the maximum rank {}", first.rank(),
                     Shape::kMaxRank);
    }
    const int rank = first.rank() + (new_axis_ ? 1 : 0);
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(kOp, axis_, rank, /*allow_negative=*/true));
    // Every element seen with the output's rank: a 1 inserted at `axis` when stacking.
    auto dims_of = [&](const Shape& s) {
      std::vector<int64_t> d(s.dims().begin(), s.dims().end());
      if (new_axis_) d.insert(d.begin() + axis, 1);
      return d;
    };
    std::vector<int64_t> out_dims = dims_of(first);
    out_dims[static_cast<size_t>(axis)] = 0;
    for (int64_t e = 0; e < in->size(); ++e) {
      const Shape& s = in->at(e).shape();
      const std::vector<int64_t> d = dims_of(s);
      bool fits = d.size() == out_dims.size();
      for (size_t k = 0; fits && k < d.size(); ++k) {
        if (static_cast<int>(k) != axis && d[k] != out_dims[k]) fits = false;
      }
      if (!fits) {
        return OpError(kOp,
                       "element {} has shape {}, which does not fit element 0's {} {} axis "
                       "{}",
                       e, s.ToString(), first.ToString(), new_axis_ ? "stacked on" : "joined on",
                       axis_);
      }
      out_dims[static_cast<size_t>(axis)] += d[static_cast<size_t>(axis)];
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, in->elem_dtype(), out_shape));
    const int64_t outer = DimProduct(out_dims, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(out_dims, static_cast<size_t>(axis) + 1, out_dims.size());
    const int64_t out_len = out_dims[static_cast<size_t>(axis)];
    int64_t start = 0;
    for (int64_t e = 0; e < in->size(); ++e) {
      const OwnedTensor& t = in->at(e);
      const int64_t len = dims_of(t.shape())[static_cast<size_t>(axis)];
      for (int64_t o = 0; o < outer; ++o) {
        CopyElements(t.view(), o * len * inner, y, (o * out_len + start) * inner, len * inner);
      }
      start += len;
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool new_axis_;
};

// ---------------------------------------------------------------------------------------------
// Optionals and Identity.

// Optional: with an input, an optional holding it (at run time: the value itself); without one,
// none (the `type` attribute then gives the static type, which the runtime does not need).
class OptionalKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, "Optional"));
    if (!ctx.has_input(0)) {
      ctx.SetOutputValue(0, RuntimeValue::None());
      return Status::OK();
    }
    KILN_ASSIGN_OR_RETURN(RuntimeValue v, ctx.InputValue(0));
    ctx.SetOutputValue(0, std::move(v));
    return Status::OK();
  }
};

class OptionalHasElementKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "OptionalHasElement";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    if (!ctx.has_input(0)) return OpError(kOp, "required input 0 is missing");
    const RuntimeValue* v = ctx.value_input(0);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kBool, Shape{}));
    *y.data<bool>() = v == nullptr || !v->is_none();
    return Status::OK();
  }
};

class OptionalGetElementKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "OptionalGetElement";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    if (!ctx.has_input(0)) return OpError(kOp, "required input 0 is missing");
    const RuntimeValue* v = ctx.value_input(0);
    if (v != nullptr && v->is_none()) {
      return OpError(kOp, "the optional input is empty (none); there is no element to get");
    }
    KILN_ASSIGN_OR_RETURN(RuntimeValue out, ctx.InputValue(0));
    ctx.SetOutputValue(0, std::move(out));
    return Status::OK();
  }
};

// Identity from opset 14: a tensor is copied, a sequence or none passed on (sharing elements).
class ValueIdentityKernel final : public ValueKernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = "Identity";
    KILN_RETURN_IF_ERROR(RequireOutput(ctx, kOp));
    if (const RuntimeValue* v = ctx.value_input(0)) {
      ctx.SetOutputValue(0, *v);
      return Status::OK();
    }
    KILN_ASSIGN_OR_RETURN(Tensor x, TensorInput(ctx, 0, kOp));
    return CopyToOutput(ctx, x, x.shape());
  }
};

template <typename K>
Result<std::unique_ptr<Kernel>> Make() {
  return std::unique_ptr<Kernel>(new K());
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateSequenceEmpty(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 0));
  KILN_ASSIGN_OR_RETURN(int64_t number, AttrReader(info).Int("dtype", 1));  // FLOAT
  const std::optional<DataType> dtype = DataTypeFromOnnxNumber(number);
  if (!dtype)
    return OpError("SequenceEmpty", "attribute 'dtype' {} is not a supported type", number);
  return std::unique_ptr<Kernel>(new SequenceEmptyKernel(*dtype));
}

Result<std::unique_ptr<Kernel>> CreateSequenceConstruct(const KernelInfo& info) {
  if (info.num_inputs() < 1) return OpError("SequenceConstruct", "needs at least one input");
  KILN_RETURN_IF_ERROR(RequireInputs(info, info.num_inputs()));
  return Make<SequenceConstructKernel>();
}

Result<std::unique_ptr<Kernel>> CreateSequenceInsert(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return Make<SequenceInsertKernel>();
}

Result<std::unique_ptr<Kernel>> CreateSequenceAt(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return Make<SequenceAtKernel>();
}

Result<std::unique_ptr<Kernel>> CreateSequenceErase(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return Make<SequenceEraseKernel>();
}

Result<std::unique_ptr<Kernel>> CreateSequenceLength(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return Make<SequenceLengthKernel>();
}

Result<std::unique_ptr<Kernel>> CreateSplitToSequence(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
  KILN_ASSIGN_OR_RETURN(bool keepdims, attrs.Bool("keepdims", true));
  return std::unique_ptr<Kernel>(new SplitToSequenceKernel(axis, keepdims));
}

Result<std::unique_ptr<Kernel>> CreateConcatFromSequence(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  if (!attrs.Has("axis")) {
    return OpError("ConcatFromSequence", "required attribute 'axis' is missing");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
  KILN_ASSIGN_OR_RETURN(bool new_axis, attrs.Bool("new_axis", false));
  return std::unique_ptr<Kernel>(new ConcatFromSequenceKernel(axis, new_axis));
}

Result<std::unique_ptr<Kernel>> CreateOptional(const KernelInfo& info) {
  const Attribute* type = info.node().FindAttribute("type");
  if (type != nullptr && type->type != AttributeType::kTypeProto) {
    return OpError("Optional", "attribute 'type' must be a TYPE_PROTO");
  }
  if (!info.has_input(0) && type == nullptr) {
    return OpError("Optional",
                   "without input 0 the attribute 'type' must say what the empty "
                   "optional would hold");
  }
  if (!info.has_output(0)) {
    return OpError("Optional", "output 0 is missing");
  }
  return Make<OptionalKernel>();
}

Result<std::unique_ptr<Kernel>> CreateOptionalHasElement(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return Make<OptionalHasElementKernel>();
}

Result<std::unique_ptr<Kernel>> CreateOptionalGetElement(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return Make<OptionalGetElementKernel>();
}

Result<std::unique_ptr<Kernel>> CreateValueIdentity(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return Make<ValueIdentityKernel>();
}

}  // namespace kiln::ref
