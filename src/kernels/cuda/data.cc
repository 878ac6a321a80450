// SPDX-License-Identifier: Apache-2.0
// The CUDA data-movement kernels (tables.h DataKernelDefs): the views Reshape, Flatten, Squeeze,
// Unsqueeze and Identity; Transpose, Concat, Split, Slice, Gather, GatherElements, Pad, Tile and
// Resize. Each moves elements of FP32, FP16, BF16, INT32, INT64, INT8, UINT8, BOOL or FP64 as
// plain words (device code in data.cu and data_resize.cu, launchers in data_launch.h); Resize's
// linear mode computes in FP32 (FP64 in double) and takes the floating types only.
//
// NOTE on the approach. Everything a kernel needs on the host comes from attributes or constant
// inputs, read and checked in the factory: Reshape's shape, the axes of Squeeze / Unsqueeze from
// opset 13, Split's sizes from 13, Slice's starts / ends / axes / steps from 10, Pad's pads and
// constant_value from 11, Tile's repeats, Resize's scales or sizes. Where such an input is not a
// constant, `supports` declines the node and placement leaves it on the CPU; so do Resize's
// cubic mode, tf_crop_and_resize and exclude_outside, which these kernels do not implement.
// Compute checks the shapes as the reference kernels check them (same rules, same messages),
// allocates the outputs and enqueues the work; it never reads device memory, so Gather's and
// GatherElements' indices are checked on the device only: an index outside [-dim, dim) yields a
// zero element there, where the reference returns INVALID_ARGUMENT. The views share their input's
// memory where the runtime lends it (KernelContext::ForwardInput) and copy it otherwise.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/data_launch.h"
#include "kernels/cuda/tables.h"
#include "kernels/ref/common.h"
#include "op/slice_range.h"

namespace kiln::cuda {
namespace {

using ref::AttrReader;
using ref::NormalizeAxis;
using ref::OpError;
using ref::RequireInputs;
using ref::ReshapeTarget;

// The types the data-movement kernels move.
constexpr DataTypeMask kCudaDataTypes =
    kCudaFloatTypes | TypeMask({DataType::kInt32, DataType::kInt64, DataType::kInt8,
                                DataType::kUint8, DataType::kBool, DataType::kFloat64});

// ---- Helpers -----------------------------------------------------------------------------------

// Element bytes of a dtype the kernels move; INVALID_ARGUMENT naming the op for others.
Result<int64_t> ElemBytes(std::string_view op, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kBool:
      return 1;
    default:
      break;
  }
  return OpError(op, "the CUDA kernel does not take {} tensors", DataTypeName(dtype));
}

// Inputs 0..n-1 are present, contiguous device tensors, and output 0 has a slot.
Status CheckInputs(const KernelContext& ctx, int n, std::string_view op) {
  for (int i = 0; i < n; ++i) {
    if (i >= ctx.num_inputs() || !ctx.input(i).valid()) {
      return OpError(op, "required input {} is missing", i);
    }
    const Tensor& t = ctx.input(i);
    if (t.device().is_cpu()) {
      return OpError(op, "input {} is in host memory; the CUDA kernel takes device memory", i);
    }
    if (!t.is_contiguous()) return OpError(op, "input {} is not contiguous", i);
  }
  if (ctx.num_outputs() < 1) return OpError(op, "no output slot");
  return Status::OK();
}

// Output 0 is input 0 under `shape`: input 0's memory itself when the runtime lends it, else a
// copy on the stream. REQUIRES: shape.NumElements() == ctx.input(0).num_elements().
Status ForwardOrCopy(KernelContext& ctx, const Shape& shape) {
  if (ctx.ForwardInput(0, 0, shape)) return Status::OK();
  const Tensor& x = ctx.input(0);
  KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), shape));
  if (x.size_bytes() == 0) return Status::OK();
  KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
  KILN_CUDA_OK(
      LaunchCopyBytes(y.raw_data(), x.raw_data(), static_cast<int64_t>(x.size_bytes()), stream));
  return Status::OK();
}

// True when input i is absent or a constant (for the `supports` of nodes whose host-side
// parameters come from inputs).
bool ConstantOrAbsent(const KernelInfo& info, int i) {
  return !info.has_input(i) || info.constant_input(i) != nullptr;
}

// The values of a 1-D (or, with allow_scalar, 0-D) INT32 / INT64 host tensor.
Result<std::vector<int64_t>> ReadIntList(const Tensor& t, std::string_view op,
                                         std::string_view what, bool allow_scalar = false) {
  if (t.rank() != 1 && !(allow_scalar && t.rank() == 0)) {
    return OpError(op, "{} must be a 1-D tensor, got shape {}", what, t.shape().ToString());
  }
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DataType::kInt64) {
    const int64_t* p = t.data<const int64_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (t.dtype() == DataType::kInt32) {
    const int32_t* p = t.data<const int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    return OpError(op, "{} must be INT32 or INT64, got {}", what, DataTypeName(t.dtype()));
  }
  return v;
}

// ReadIntList of constant input i. REQUIRES: the input is a constant (`supports` checked it).
Result<std::vector<int64_t>> ConstIntList(const KernelInfo& info, int i, std::string_view what,
                                          bool allow_scalar = false) {
  const OwnedTensor* t = info.constant_input(i);
  if (t == nullptr) {
    return OpError(info.op_type(), "{} (input {}) must be a constant for the CUDA kernel", what, i);
  }
  return ReadIntList(t->view(), info.op_type(), what, allow_scalar);
}

// Normalizes axes for a tensor of `rank` and rejects duplicates (the reference's NormalizeAxes).
Result<std::vector<int>> NormalizeAxes(std::string_view op, std::span<const int64_t> axes, int rank,
                                       bool allow_negative) {
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(op, a, rank, allow_negative));
    if (seen[static_cast<size_t>(axis)]) return OpError(op, "axis {} appears twice", a);
    seen[static_cast<size_t>(axis)] = true;
    out.push_back(axis);
  }
  return out;
}

// Shape::Create with the error naming the op.
Result<Shape> MakeShape(std::string_view op, std::span<const int64_t> dims) {
  Result<Shape> s = Shape::Create(dims);
  if (!s.ok()) return s.status().WithContext(op);
  return s;
}

int64_t DimProduct(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze, Identity --------------------------------------------

class ReshapeKernel final : public Kernel {
 public:
  ReshapeKernel(std::vector<int64_t> spec, bool allow_zero)
      : spec_(std::move(spec)), allow_zero_(allow_zero) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Reshape"));
    KILN_ASSIGN_OR_RETURN(Shape out, ReshapeTarget(ctx.input(0).shape(), spec_, allow_zero_));
    return ForwardOrCopy(ctx, out);
  }

 private:
  std::vector<int64_t> spec_;  // the constant shape input
  bool allow_zero_;
};

class FlattenKernel final : public Kernel {
 public:
  FlattenKernel(int64_t axis, bool allow_negative) : axis_(axis), allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Flatten"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Flatten", axis_, x.rank(), allow_negative_,
                                                  /*inclusive_end=*/true));
    const std::span<const int64_t> dims = x.shape().dims();
    const Shape out{DimProduct(dims, 0, static_cast<size_t>(axis)),
                    DimProduct(dims, static_cast<size_t>(axis), dims.size())};
    return ForwardOrCopy(ctx, out);
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

// Squeeze / Unsqueeze axes: the attribute before opset 13, the constant input 1 from 13; unset
// when neither is given (Squeeze then drops every size-1 dim).
struct Axes {
  std::optional<std::vector<int64_t>> axes;
  bool allow_negative = true;
};

class UnsqueezeKernel final : public Kernel {
 public:
  explicit UnsqueezeKernel(Axes axes) : axes_(std::move(axes)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Unsqueeze"));
    const Tensor& x = ctx.input(0);
    if (!axes_.axes.has_value()) return OpError("Unsqueeze", "the axes input is required");
    const size_t out_rank = static_cast<size_t>(x.rank()) + axes_.axes->size();
    if (out_rank > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("Unsqueeze", "output rank {} exceeds the supported {}", out_rank,
                     Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(
        std::vector<int> norm,
        NormalizeAxes("Unsqueeze", *axes_.axes, static_cast<int>(out_rank), axes_.allow_negative));
    std::vector<int64_t> dims(out_rank, 1);
    std::vector<bool> inserted(out_rank, false);
    for (int a : norm) inserted[static_cast<size_t>(a)] = true;
    int src = 0;
    for (size_t i = 0; i < out_rank; ++i) {
      if (!inserted[i]) dims[i] = x.dim(src++);
    }
    return ForwardOrCopy(ctx, Shape(dims));
  }

 private:
  Axes axes_;
};

class SqueezeKernel final : public Kernel {
 public:
  explicit SqueezeKernel(Axes axes) : axes_(std::move(axes)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Squeeze"));
    const Tensor& x = ctx.input(0);
    std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
    if (!axes_.axes.has_value() || axes_.axes->empty()) {
      for (int i = 0; i < x.rank(); ++i) drop[static_cast<size_t>(i)] = x.dim(i) == 1;
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<int> norm,
                            NormalizeAxes("Squeeze", *axes_.axes, x.rank(), axes_.allow_negative));
      for (int a : norm) {
        if (x.dim(a) != 1) {
          return OpError("Squeeze", "cannot squeeze axis {} of input {}: its size is not 1", a,
                         x.shape().ToString());
        }
        drop[static_cast<size_t>(a)] = true;
      }
    }
    std::vector<int64_t> dims;
    for (int i = 0; i < x.rank(); ++i) {
      if (!drop[static_cast<size_t>(i)]) dims.push_back(x.dim(i));
    }
    return ForwardOrCopy(ctx, Shape(dims));
  }

 private:
  Axes axes_;
};

class IdentityKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Identity"));
    return ForwardOrCopy(ctx, ctx.input(0).shape());
  }
};

Result<std::unique_ptr<Kernel>> CreateReshape(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("shape", 5));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("allowzero", 14));
  KILN_ASSIGN_OR_RETURN(bool allow_zero, attrs.Bool("allowzero", false));
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  const OwnedTensor* s = info.constant_input(1);
  if (s == nullptr) return OpError("Reshape", "the shape input must be a constant");
  if (s->dtype() != DataType::kInt64 || s->shape().rank() != 1) {
    return OpError("Reshape", "the shape input must be a 1-D INT64 tensor, got {}{}",
                   DataTypeName(s->dtype()), s->shape().ToString());
  }
  const int64_t* p = s->data<const int64_t>();
  return std::make_unique<ReshapeKernel>(std::vector<int64_t>(p, p + s->num_elements()),
                                         allow_zero);
}

bool SupportsReshape(const KernelInfo& info) { return info.constant_input(1) != nullptr; }

Result<std::unique_ptr<Kernel>> CreateFlatten(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 1));
  if (info.opset() < 11 && axis < 0) {
    return OpError("Flatten", "negative axis {} is not allowed before opset 11 (model uses {})",
                   axis, info.opset());
  }
  return std::make_unique<FlattenKernel>(axis, info.opset() >= 11);
}

// Squeeze / Unsqueeze axes: the attribute before opset 13 (negative from 11), the constant input
// 1 from 13.
Result<Axes> ReadAxes(const KernelInfo& info, bool required) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("axes", 13));
  Axes a;
  a.allow_negative = info.opset() >= 11;
  if (info.opset() < 13) {
    if (required && !attrs.Has("axes")) {
      return OpError(attrs.op(), "attribute 'axes' is required before opset 13");
    }
    if (attrs.Has("axes")) {
      KILN_ASSIGN_OR_RETURN(a.axes, attrs.Ints("axes"));
    }
  } else if (info.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(a.axes, ConstIntList(info, 1, "the axes input", /*allow_scalar=*/true));
  } else if (required) {
    return OpError(attrs.op(), "the axes input is required from opset 13");
  }
  return a;
}

Result<std::unique_ptr<Kernel>> CreateUnsqueeze(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(Axes axes, ReadAxes(info, /*required=*/true));
  return std::make_unique<UnsqueezeKernel>(std::move(axes));
}

Result<std::unique_ptr<Kernel>> CreateSqueeze(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(Axes axes, ReadAxes(info, /*required=*/false));
  return std::make_unique<SqueezeKernel>(std::move(axes));
}

// Opset 13+: the axes input, when given, must be a constant.
bool SupportsAxesInput(const KernelInfo& info) {
  return info.opset() < 13 || ConstantOrAbsent(info, 1);
}

Result<std::unique_ptr<Kernel>> CreateIdentity(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<IdentityKernel>();
}

// Identity from opset 14 also takes sequences (16: optionals), which stay on the CPU: only a
// declared tensor of a known dtype is taken.
bool SupportsTensorIdentity(const KernelInfo& info) {
  const ValueType& t = info.input_type(0);
  return t.is_tensor() && t.dtype != DataType::kInvalid;
}

// ---- Transpose ---------------------------------------------------------------------------------

class TransposeKernel final : public Kernel {
 public:
  // Empty `perm`: reverse the dims.
  explicit TransposeKernel(std::vector<int64_t> perm) : perm_(std::move(perm)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Transpose"));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    } else if (perm.size() != static_cast<size_t>(rank)) {
      return OpError("Transpose", "perm [{}] has {} entries but the input {} has rank {}",
                     fmt::join(perm, ","), perm.size(), x.shape().ToString(), rank);
    }
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Transpose", x.dtype()));
    TransposeParams p;
    p.rank = rank;
    std::vector<int64_t> out_dims(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i) {
      p.dims[i] = x.dim(i);
      p.perm[i] = static_cast<int32_t>(perm[static_cast<size_t>(i)]);
      out_dims[static_cast<size_t>(i)] = x.dim(p.perm[i]);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), Shape(out_dims)));
    if (x.num_elements() == 0) return Status::OK();
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    p.src = x.raw_data();
    p.dst = y.raw_data();
    p.elem_bytes = elem;
    KILN_CUDA_OK(LaunchTranspose(p, stream));
    return Status::OK();
  }

 private:
  std::vector<int64_t> perm_;
};

Result<std::unique_ptr<Kernel>> CreateTranspose(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, AttrReader(info).Ints("perm"));
  if (perm.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return OpError("Transpose", "perm has {} entries, more than the supported rank {}", perm.size(),
                   Shape::kMaxRank);
  }
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(p)]) {
      return OpError("Transpose", "perm [{}] is not a permutation of 0..{}", fmt::join(perm, ","),
                     static_cast<int64_t>(perm.size()) - 1);
    }
    seen[static_cast<size_t>(p)] = true;
  }
  return std::make_unique<TransposeKernel>(std::move(perm));
}

// ---- Concat, Split -----------------------------------------------------------------------------

class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(int64_t axis, bool allow_negative) : axis_(axis), allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    const int n = ctx.num_inputs();
    if (n < 1) return OpError("Concat", "needs at least one input");
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, n, "Concat"));
    const Tensor& first = ctx.input(0);
    const int rank = first.rank();
    if (rank < 1) return OpError("Concat", "inputs must have rank >= 1, input 0 is a scalar");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Concat", axis_, rank, allow_negative_));
    std::vector<int64_t> out_dims(first.shape().dims().begin(), first.shape().dims().end());
    out_dims[static_cast<size_t>(axis)] = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != first.dtype()) {
        return OpError("Concat", "input {} has dtype {}, input 0 has {}", i,
                       DataTypeName(t.dtype()), DataTypeName(first.dtype()));
      }
      if (t.rank() != rank) {
        return OpError("Concat", "input {} {} has rank {}, input 0 {} has rank {}", i,
                       t.shape().ToString(), t.rank(), first.shape().ToString(), rank);
      }
      for (int d = 0; d < rank; ++d) {
        if (d != axis && t.dim(d) != first.dim(d)) {
          return OpError("Concat",
                         "input {} {} differs from input 0 {} at dim {} (only axis {} may differ)",
                         i, t.shape().ToString(), first.shape().ToString(), d, axis);
        }
      }
      out_dims[static_cast<size_t>(axis)] += t.dim(axis);
    }
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Concat", first.dtype()));
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("Concat", out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, first.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    const std::span<const int64_t> dims = out.dims();
    const int64_t outer = DimProduct(dims, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(dims, static_cast<size_t>(axis) + 1, dims.size());
    std::vector<const void*> srcs(static_cast<size_t>(n));
    std::vector<int64_t> cols(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      srcs[static_cast<size_t>(i)] = ctx.input(i).raw_data();
      cols[static_cast<size_t>(i)] = ctx.input(i).dim(axis) * inner;
    }
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_CUDA_OK(LaunchConcat(y.raw_data(), srcs.data(), cols.data(), n, outer, elem, stream));
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

Result<std::unique_ptr<Kernel>> CreateConcat(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  for (int i = 0; i < info.num_inputs(); ++i) {
    if (!info.has_input(i)) return OpError("Concat", "input {} is missing", i);
  }
  AttrReader attrs(info);
  if (!attrs.Has("axis")) return OpError("Concat", "attribute 'axis' is required");
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 1));
  if (info.opset() < 11 && axis < 0) {
    return OpError("Concat", "negative axis {} is not allowed before opset 11 (model uses {})",
                   axis, info.opset());
  }
  return std::make_unique<ConcatKernel>(axis, info.opset() >= 11);
}

class SplitKernel final : public Kernel {
 public:
  // `split`: the sizes from the attribute or the constant input; empty: equal parts.
  SplitKernel(int64_t axis, std::vector<int64_t> split) : axis_(axis), split_(std::move(split)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Split"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError("Split", "the input must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Split", axis_, x.rank(), true));
    const int64_t dim = x.dim(axis);
    const int n = ctx.num_outputs();
    std::vector<int64_t> split = split_;
    if (split.empty()) {
      if (dim % n != 0) {
        return OpError("Split", "axis {} of size {} cannot be split into {} equal parts", axis, dim,
                       n);
      }
      split.assign(static_cast<size_t>(n), dim / n);
    }
    if (split.size() != static_cast<size_t>(n)) {
      return OpError("Split", "split has {} entries but the node has {} outputs", split.size(), n);
    }
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return OpError("Split", "split sizes must be >= 0, got {}", s);
      if (__builtin_add_overflow(sum, s, &sum)) return OpError("Split", "split sizes overflow");
    }
    if (sum != dim) {
      return OpError("Split", "split sizes [{}] sum to {}, but axis {} has size {}",
                     fmt::join(split, ","), sum, axis, dim);
    }
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Split", x.dtype()));
    const std::span<const int64_t> in_dims = x.shape().dims();
    const int64_t outer = DimProduct(in_dims, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(in_dims, static_cast<size_t>(axis) + 1, in_dims.size());
    std::vector<void*> dsts(static_cast<size_t>(n));
    std::vector<int64_t> cols(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const int64_t part = split[static_cast<size_t>(i)];
      std::vector<int64_t> dims(in_dims.begin(), in_dims.end());
      dims[static_cast<size_t>(axis)] = part;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(i, x.dtype(), Shape(dims)));
      dsts[static_cast<size_t>(i)] = y.raw_data();
      cols[static_cast<size_t>(i)] = part * inner;
    }
    if (x.num_elements() == 0) return Status::OK();
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_CUDA_OK(LaunchSplit(x.raw_data(), dsts.data(), cols.data(), n, outer, elem, stream));
    return Status::OK();
  }

 private:
  int64_t axis_;
  std::vector<int64_t> split_;
};

Result<std::unique_ptr<Kernel>> CreateSplit(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("split", 13));
  // Negative axes are accepted at every opset (PyTorch exports them before opset 11 too).
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 0));
  for (int i = 0; i < info.num_outputs(); ++i) {
    if (!info.has_output(i)) {
      return OpError("Split", "output {} is missing; every output must be present", i);
    }
  }
  if (info.opset() < 13 && info.num_inputs() > 1) {
    return OpError("Split", "takes one input before opset 13 (split sizes are an attribute)");
  }
  std::vector<int64_t> split;
  if (attrs.Has("split")) {
    if (info.has_input(1)) {
      return OpError("Split", "has both the 'split' attribute and the split input");
    }
    KILN_ASSIGN_OR_RETURN(split, attrs.Ints("split"));
    if (split.size() != static_cast<size_t>(info.num_outputs())) {
      return OpError("Split", "split has {} entries but the node has {} outputs", split.size(),
                     info.num_outputs());
    }
  } else if (info.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(split, ConstIntList(info, 1, "split"));
  }
  return std::make_unique<SplitKernel>(axis, std::move(split));
}

bool SupportsSplit(const KernelInfo& info) { return ConstantOrAbsent(info, 1); }

// ---- Slice -------------------------------------------------------------------------------------

struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;  // axes / steps empty: the defaults
};

class SliceKernel final : public Kernel {
 public:
  explicit SliceKernel(SliceSpec spec) : spec_(std::move(spec)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Slice"));
    const Tensor& x = ctx.input(0);
    SliceSpec p = spec_;
    const size_t n = p.starts.size();
    if (p.ends.size() != n) {
      return OpError("Slice", "starts has {} entries but ends has {}", n, p.ends.size());
    }
    if (p.axes.empty()) {
      if (n > static_cast<size_t>(x.rank())) {
        return OpError("Slice", "{} starts for an input of rank {}", n, x.rank());
      }
      for (size_t i = 0; i < n; ++i) p.axes.push_back(static_cast<int64_t>(i));
    } else if (p.axes.size() != n) {
      return OpError("Slice", "axes has {} entries but starts has {}", p.axes.size(), n);
    }
    if (p.steps.empty()) p.steps.assign(n, 1);
    if (p.steps.size() != n) {
      return OpError("Slice", "steps has {} entries but starts has {}", p.steps.size(), n);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int> axes, NormalizeAxes("Slice", p.axes, x.rank(), true));
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Slice", x.dtype()));
    StridedCopyParams c;
    c.view.rank = x.rank();
    int64_t stride = 1;
    for (int d = x.rank() - 1; d >= 0; --d) {
      c.view.dims[d] = x.dim(d);
      c.view.strides[d] = stride;
      stride *= x.dim(d);
    }
    int64_t in_strides[kMaxRank];
    std::copy_n(c.view.strides, kMaxRank, in_strides);
    for (size_t i = 0; i < n; ++i) {
      const int a = axes[i];
      const int64_t step = p.steps[i];
      if (step == 0) return OpError("Slice", "step for axis {} is 0", a);
      if (step == std::numeric_limits<int64_t>::min()) {
        return OpError("Slice", "step {} for axis {} is out of range", step, a);
      }
      const SliceRange r = ClampSlice(p.starts[i], p.ends[i], step, c.view.dims[a]);
      c.view.dims[a] = r.count;
      c.base += r.start * in_strides[a];
      // With two or more elements |step| < dim, so the product stays below the element count.
      c.view.strides[a] = r.count > 1 ? in_strides[a] * step : 0;
    }
    const Shape out(std::span<const int64_t>(c.view.dims, static_cast<size_t>(x.rank())));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    c.src = x.raw_data();
    c.dst = y.raw_data();
    c.elem_bytes = elem;
    KILN_CUDA_OK(LaunchStridedCopy(c, stream));
    return Status::OK();
  }

 private:
  SliceSpec spec_;
};

Result<std::unique_ptr<Kernel>> CreateSlice(const KernelInfo& info) {
  AttrReader attrs(info);
  for (std::string_view name : {"starts", "ends", "axes"}) {
    KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn(name, 10));
  }
  SliceSpec p;
  if (info.opset() >= 10) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
    KILN_ASSIGN_OR_RETURN(p.starts, ConstIntList(info, 1, "starts"));
    KILN_ASSIGN_OR_RETURN(p.ends, ConstIntList(info, 2, "ends"));
    if (info.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(p.axes, ConstIntList(info, 3, "axes"));
    }
    if (info.has_input(4)) {
      KILN_ASSIGN_OR_RETURN(p.steps, ConstIntList(info, 4, "steps"));
    }
    return std::make_unique<SliceKernel>(std::move(p));
  }
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  if (!attrs.Has("starts") || !attrs.Has("ends")) {
    return OpError("Slice", "attributes 'starts' and 'ends' are required before opset 10");
  }
  KILN_ASSIGN_OR_RETURN(p.starts, attrs.Ints("starts"));
  KILN_ASSIGN_OR_RETURN(p.ends, attrs.Ints("ends"));
  KILN_ASSIGN_OR_RETURN(p.axes, attrs.Ints("axes"));
  if (p.starts.size() != p.ends.size() || (attrs.Has("axes") && p.axes.size() != p.starts.size())) {
    return OpError("Slice", "attributes starts, ends and axes must have equal lengths");
  }
  return std::make_unique<SliceKernel>(std::move(p));
}

// Opset 10+: starts, ends, axes and steps must be constants.
bool SupportsSlice(const KernelInfo& info) {
  if (info.opset() < 10) return true;
  for (int i = 1; i <= 4; ++i) {
    if (!ConstantOrAbsent(info, i)) return false;
  }
  return true;
}

// ---- Gather, GatherElements --------------------------------------------------------------------

// Indices must be INT32 or INT64; true for INT64.
Result<bool> IndicesAreInt64(std::string_view op, const Tensor& indices) {
  if (indices.dtype() == DataType::kInt64) return true;
  if (indices.dtype() == DataType::kInt32) return false;
  return OpError(op, "indices must be INT32 or INT64, got {}", DataTypeName(indices.dtype()));
}

class GatherKernel final : public Kernel {
 public:
  explicit GatherKernel(int64_t axis) : axis_(axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Gather"));
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    if (x.rank() < 1) return OpError("Gather", "data must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Gather", axis_, x.rank(), true));
    KILN_ASSIGN_OR_RETURN(bool int64, IndicesAreInt64("Gather", idx));
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Gather", x.dtype()));
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().begin() + axis);
    for (int64_t d : idx.shape().dims()) dims.push_back(d);
    for (int d = axis + 1; d < x.rank(); ++d) dims.push_back(x.dim(d));
    if (dims.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("Gather", "output rank {} exceeds the supported {}", dims.size(),
                     Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), Shape(dims)));
    if (y.num_elements() == 0) return Status::OK();
    const std::span<const int64_t> xd = x.shape().dims();
    GatherParams p;
    p.src = x.raw_data();
    p.dst = y.raw_data();
    p.indices = idx.raw_data();
    p.indices_int64 = int64;
    p.elem_bytes = elem;
    p.outer = DimProduct(xd, 0, static_cast<size_t>(axis));
    p.axis_dim = x.dim(axis);
    p.num_indices = idx.num_elements();
    p.inner = DimProduct(xd, static_cast<size_t>(axis) + 1, xd.size());
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_CUDA_OK(LaunchGather(p, stream));
    return Status::OK();
  }

 private:
  int64_t axis_;
};

Result<std::unique_ptr<Kernel>> CreateGather(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  // Negative axes are accepted at every opset (exporters emit them before opset 11 too).
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 0));
  return std::make_unique<GatherKernel>(axis);
}

class GatherElementsKernel final : public Kernel {
 public:
  explicit GatherElementsKernel(int64_t axis) : axis_(axis) {}

  Status Compute(KernelContext& ctx) const override {
    static constexpr std::string_view kOp = "GatherElements";
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);
    const Tensor& idx = ctx.input(1);
    if (x.rank() < 1) return OpError(kOp, "data must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(kOp, axis_, x.rank(), true));
    if (idx.rank() != x.rank()) {
      return OpError(kOp, "indices {} must have the rank of data {}", idx.shape().ToString(),
                     x.shape().ToString());
    }
    for (int d = 0; d < x.rank(); ++d) {
      if (d != axis && idx.dim(d) > x.dim(d)) {
        return OpError(kOp, "indices {} exceed data {} at dim {}", idx.shape().ToString(),
                       x.shape().ToString(), d);
      }
    }
    KILN_ASSIGN_OR_RETURN(bool int64, IndicesAreInt64(kOp, idx));
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes(kOp, x.dtype()));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), idx.shape()));
    if (y.num_elements() == 0) return Status::OK();
    GatherElementsParams p;
    p.src = x.raw_data();
    p.dst = y.raw_data();
    p.indices = idx.raw_data();
    p.indices_int64 = int64;
    p.elem_bytes = elem;
    p.src_elements = x.num_elements();
    p.axis_dim = x.dim(axis);
    p.view.rank = x.rank();
    int64_t stride = 1;
    for (int d = x.rank() - 1; d >= 0; --d) {
      p.view.dims[d] = idx.dim(d);
      p.view.strides[d] = d == axis ? 0 : stride;
      if (d == axis) p.axis_stride = stride;
      stride *= x.dim(d);
    }
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_CUDA_OK(LaunchGatherElements(p, stream));
    return Status::OK();
  }

 private:
  int64_t axis_;
};

Result<std::unique_ptr<Kernel>> CreateGatherElements(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 0));
  return std::make_unique<GatherElementsKernel>(axis);
}

// ---- Pad ---------------------------------------------------------------------------------------

// The fill element of Pad: opset 7-10's `value` attribute converted to the input's dtype when
// the kernel runs, or opset 11+'s constant_value input (its bytes and dtype).
struct PadFill {
  float attr_value = 0.0f;
  std::optional<DataType> dtype;  // set: constant_value given, of this dtype
  Shape shape;                    // of constant_value (the reference takes 0 or 1 elements)
  unsigned char bytes[8] = {};    // its first element
};

// `value` (a FLOAT attribute) as an element of `dtype`, as the reference converts it (through
// float, then a C++ conversion; 16-bit floats round to nearest even).
Status ConvertPadValue(float value, DataType dtype, unsigned char* out) {
  auto put = [&](auto v) { std::memcpy(out, &v, sizeof(v)); };
  const double v = value;
  switch (dtype) {
    case DataType::kFloat32:
      put(static_cast<float>(v));
      break;
    case DataType::kFloat64:
      put(v);
      break;
    case DataType::kFloat16:
      put(FloatToFloat16(static_cast<float>(v)));
      break;
    case DataType::kBFloat16:
      put(FloatToBFloat16(static_cast<float>(v)));
      break;
    case DataType::kInt8:
      put(static_cast<int8_t>(v));
      break;
    case DataType::kUint8:
      put(static_cast<uint8_t>(v));
      break;
    case DataType::kInt32:
      put(static_cast<int32_t>(v));
      break;
    case DataType::kInt64:
      put(static_cast<int64_t>(v));
      break;
    default:  // the reference's DispatchNumeric error (BOOL among them)
      return OpError("Pad", "unsupported dtype {}", DataTypeName(dtype));
  }
  return Status::OK();
}

class PadKernel final : public Kernel {
 public:
  PadKernel(PadMode mode, std::vector<int64_t> pads, PadFill fill)
      : mode_(mode), pads_(std::move(pads)), fill_(fill) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Pad"));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    const std::vector<int64_t>& pads = pads_;
    if (pads.size() != 2 * static_cast<size_t>(rank)) {
      return OpError("Pad", "pads has {} entries, expected {} for an input of rank {}", pads.size(),
                     2 * rank, rank);
    }
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Pad", x.dtype()));
    PadParams p;
    if (!fill_.dtype.has_value()) {
      if (fill_.attr_value != 0) {
        KILN_RETURN_IF_ERROR(ConvertPadValue(fill_.attr_value, x.dtype(), p.fill));
      }
    } else {
      if (*fill_.dtype != x.dtype()) {
        return OpError("Pad", "constant_value has dtype {}, the input {}",
                       DataTypeName(*fill_.dtype), DataTypeName(x.dtype()));
      }
      if (fill_.shape.NumElements() > 1) {
        return OpError("Pad", "constant_value must be a scalar, got shape {}",
                       fill_.shape.ToString());
      }
      if (fill_.shape.NumElements() == 1)
        std::memcpy(p.fill, fill_.bytes, static_cast<size_t>(elem));
    }
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      const int64_t begin = pads[du], end = pads[du + static_cast<size_t>(rank)];
      int64_t sum = 0;
      if (__builtin_add_overflow(x.dim(d), begin, &sum) || __builtin_add_overflow(sum, end, &sum) ||
          sum < 0) {
        return OpError("Pad", "pads [{}] give an invalid size for dim {} of input {}",
                       fmt::join(pads, ","), d, x.shape().ToString());
      }
      if (mode_ != PadMode::kConstant && x.dim(d) == 0 && sum > 0) {
        return OpError("Pad", "cannot {}-pad dim {} of size 0",
                       mode_ == PadMode::kEdge ? "edge" : "reflect", d);
      }
      dims[du] = sum;
      p.in_dims[d] = x.dim(d);
      p.out_dims[d] = sum;
      p.begin[d] = begin;
    }
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("Pad", dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    p.src = x.raw_data();
    p.dst = y.raw_data();
    p.elem_bytes = elem;
    p.mode = mode_;
    p.rank = rank;
    KILN_CUDA_OK(LaunchPad(p, stream));
    return Status::OK();
  }

 private:
  PadMode mode_;
  std::vector<int64_t> pads_;
  PadFill fill_;
};

Result<std::unique_ptr<Kernel>> CreatePad(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(std::string mode_name, attrs.String("mode", "constant"));
  PadMode mode;
  if (mode_name == "constant") {
    mode = PadMode::kConstant;
  } else if (mode_name == "reflect") {
    mode = PadMode::kReflect;
  } else if (mode_name == "edge") {
    mode = PadMode::kEdge;
  } else {
    return OpError("Pad", "mode '{}' is not supported (constant, reflect, edge)", mode_name);
  }
  PadFill fill;
  if (info.opset() >= 11) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
    KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("pads", 11));
    KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("value", 11));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ConstIntList(info, 1, "pads"));
    if (info.has_input(2)) {
      const OwnedTensor* v = info.constant_input(2);
      if (v == nullptr) {
        return OpError("Pad", "constant_value (input 2) must be a constant for the CUDA kernel");
      }
      if (DataTypeSize(v->dtype()) > sizeof(fill.bytes) || v->dtype() == DataType::kBytes) {
        return OpError("Pad", "constant_value of dtype {} is not supported",
                       DataTypeName(v->dtype()));
      }
      fill.dtype = v->dtype();
      fill.shape = v->shape();
      if (v->num_elements() >= 1) {
        std::memcpy(fill.bytes, v->raw_data(), DataTypeSize(v->dtype()));
      }
    }
    return std::make_unique<PadKernel>(mode, std::move(pads), fill);
  }
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  if (!attrs.Has("pads")) {
    return OpError("Pad", "attribute 'pads' is required at opset {}", info.opset());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.Ints("pads"));
  KILN_ASSIGN_OR_RETURN(fill.attr_value, attrs.Float("value", 0.0f));
  return std::make_unique<PadKernel>(mode, std::move(pads), fill);
}

// Opset 11+: pads and constant_value must be constants.
bool SupportsPad(const KernelInfo& info) {
  return info.opset() < 11 || (info.constant_input(1) != nullptr && ConstantOrAbsent(info, 2));
}

// ---- Tile --------------------------------------------------------------------------------------

class TileKernel final : public Kernel {
 public:
  explicit TileKernel(std::vector<int64_t> repeats) : repeats_(std::move(repeats)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Tile"));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    if (repeats_.size() != static_cast<size_t>(rank)) {
      return OpError("Tile", "repeats has {} entries but the input {} has rank {}", repeats_.size(),
                     x.shape().ToString(), rank);
    }
    KILN_ASSIGN_OR_RETURN(int64_t elem, ElemBytes("Tile", x.dtype()));
    TileParams p;
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      const int64_t r = repeats_[static_cast<size_t>(d)];
      if (r < 0) return OpError("Tile", "repeats must be >= 0, got {} for dim {}", r, d);
      if (__builtin_mul_overflow(x.dim(d), r, &dims[static_cast<size_t>(d)])) {
        return OpError("Tile", "output dim {} overflows", d);
      }
      p.in_dims[d] = x.dim(d);
      p.out_dims[d] = dims[static_cast<size_t>(d)];
    }
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("Tile", dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    p.src = x.raw_data();
    p.dst = y.raw_data();
    p.elem_bytes = elem;
    p.rank = rank;
    KILN_CUDA_OK(LaunchTile(p, stream));
    return Status::OK();
  }

 private:
  std::vector<int64_t> repeats_;
};

Result<std::unique_ptr<Kernel>> CreateTile(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ConstIntList(info, 1, "repeats"));
  return std::make_unique<TileKernel>(std::move(repeats));
}

bool SupportsTile(const KernelInfo& info) { return info.constant_input(1) != nullptr; }

// ---- Resize ------------------------------------------------------------------------------------

// Resize's host-side description: mode, coordinate transformation, and the constant scales or
// sizes (exactly one of them).
struct ResizeSpec {
  bool linear = false;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  std::vector<double> scales;
  std::optional<std::vector<int64_t>> sizes;
};

class ResizeKernel final : public Kernel {
 public:
  explicit ResizeKernel(ResizeSpec spec) : spec_(std::move(spec)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Resize"));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    std::vector<int64_t> out_dims(static_cast<size_t>(rank));
    std::vector<double> scales = spec_.scales;
    if (spec_.sizes.has_value()) {
      const std::vector<int64_t>& sizes = *spec_.sizes;
      if (sizes.size() != static_cast<size_t>(rank)) {
        return OpError("Resize", "sizes has {} entries, the input {} has rank {}", sizes.size(),
                       x.shape().ToString(), rank);
      }
      scales.resize(static_cast<size_t>(rank));
      for (int d = 0; d < rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        if (sizes[du] < 0) return OpError("Resize", "sizes must be >= 0, got {}", sizes[du]);
        out_dims[du] = sizes[du];
        scales[du] =
            x.dim(d) == 0 ? 1.0 : static_cast<double>(sizes[du]) / static_cast<double>(x.dim(d));
      }
    } else {
      if (scales.size() != static_cast<size_t>(rank)) {
        return OpError("Resize", "scales has {} entries, the input {} has rank {}", scales.size(),
                       x.shape().ToString(), rank);
      }
      for (int d = 0; d < rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        const double s = scales[du];
        if (!(s > 0) || !std::isfinite(s)) {
          return OpError("Resize", "scale {} for dim {} is invalid (must be > 0)", s, d);
        }
        const double n = std::floor(s * static_cast<double>(x.dim(d)));
        if (n > 9.0e15) return OpError("Resize", "output dim {} is too large", d);
        out_dims[du] = static_cast<int64_t>(n);
      }
    }
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("Resize", out_dims));
    KILN_RETURN_IF_ERROR(ElemBytes("Resize", x.dtype()).status());
    KILN_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(x.dtype()));
    const bool floating = type == ElemType::kF32 || type == ElemType::kF16 ||
                          type == ElemType::kBF16 || type == ElemType::kF64;
    if (spec_.linear && !floating) {
      return OpError("Resize", "the CUDA kernel's linear mode takes floating types, got {}",
                     DataTypeName(x.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    ResizeParams p;
    p.type = type;
    p.linear = spec_.linear ? 1 : 0;
    p.coord = spec_.coord;
    p.nearest = spec_.nearest;
    p.rank = rank;
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      const int64_t in = x.dim(d);
      if (in == 0 && out_dims[du] > 0) {
        return OpError("Resize", "cannot resize dim {} of size 0 to {}", d, out_dims[du]);
      }
      ResizeAxis& a = p.axes[d];
      a.in = in;
      a.out = out_dims[du];
      a.scale = scales[du];
      // Scale 1 maps o to o exactly under these transformations (pytorch_half_pixel but for a
      // single output element); tf_half_pixel_for_nn shifts by half a pixel.
      const bool exact = spec_.coord == ResizeCoord::kHalfPixel ||
                         spec_.coord == ResizeCoord::kAlignCorners ||
                         spec_.coord == ResizeCoord::kAsymmetric ||
                         (spec_.coord == ResizeCoord::kPytorchHalfPixel && a.out != 1);
      a.identity = a.scale == 1.0 && a.in == a.out && exact ? 1 : 0;
    }
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    p.src = x.raw_data();
    p.dst = y.raw_data();
    KILN_CUDA_OK(LaunchResize(p, stream));
    return Status::OK();
  }

 private:
  ResizeSpec spec_;
};

// The values of a 1-D FLOAT / DOUBLE / FLOAT16 / BFLOAT16 host tensor as doubles.
Result<std::vector<double>> ReadFloats(const Tensor& t, std::string_view what) {
  if (t.rank() != 1) {
    return OpError("Resize", "{} must be 1-D, got shape {}", what, t.shape().ToString());
  }
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DataType::kFloat32:
        v[i] = static_cast<double>(t.data<const float>()[i]);
        break;
      case DataType::kFloat64:
        v[i] = t.data<const double>()[i];
        break;
      case DataType::kFloat16:
        v[i] = static_cast<double>(Float16ToFloat(t.data<const Float16>()[i]));
        break;
      case DataType::kBFloat16:
        v[i] = static_cast<double>(BFloat16ToFloat(t.data<const BFloat16>()[i]));
        break;
      default:
        return OpError("Resize", "unsupported dtype {}", DataTypeName(t.dtype()));
    }
  }
  return v;
}

// The input of Resize's scales: 1 at opset 10, 2 from 11 (after roi).
int ResizeScalesInput(const KernelInfo& info) { return info.opset() >= 11 ? 2 : 1; }

Result<std::unique_ptr<Kernel>> CreateResize(const KernelInfo& info) {
  AttrReader attrs(info);
  ResizeSpec spec;
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  for (std::string_view name : {"coordinate_transformation_mode", "cubic_coeff_a",
                                "exclude_outside", "extrapolation_value", "nearest_mode"}) {
    KILN_RETURN_IF_ERROR(attrs.RequireOpset(name, 11));
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.String("mode", "nearest"));
  if (mode == "nearest") {
    spec.linear = false;
  } else if (mode == "linear" || mode == "bilinear") {
    spec.linear = true;
  } else if (mode == "cubic" && info.opset() >= 11) {
    return OpError("Resize", "mode 'cubic' is not implemented by the CUDA kernel");
  } else {
    return OpError("Resize", "mode '{}' is not supported", mode);
  }
  if (info.opset() < 11) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
    spec.coord = ResizeCoord::kAsymmetric;
    spec.nearest = ResizeNearest::kFloor;
  } else {
    // Opset 11-12: roi and scales are required inputs (possibly empty).
    if (info.opset() < 13) KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
    KILN_ASSIGN_OR_RETURN(std::string coord,
                          attrs.String("coordinate_transformation_mode", "half_pixel"));
    if (coord == "half_pixel") {
      spec.coord = ResizeCoord::kHalfPixel;
    } else if (coord == "pytorch_half_pixel") {
      spec.coord = ResizeCoord::kPytorchHalfPixel;
    } else if (coord == "align_corners") {
      spec.coord = ResizeCoord::kAlignCorners;
    } else if (coord == "asymmetric") {
      spec.coord = ResizeCoord::kAsymmetric;
    } else if (coord == "tf_half_pixel_for_nn" && info.opset() < 13) {
      spec.coord = ResizeCoord::kTfHalfPixelForNn;
    } else if (coord == "tf_crop_and_resize") {
      return OpError("Resize", "tf_crop_and_resize is not implemented by the CUDA kernel");
    } else {
      return OpError("Resize", "coordinate_transformation_mode '{}' is not supported at opset {}",
                     coord, info.opset());
    }
    KILN_ASSIGN_OR_RETURN(std::string nearest, attrs.String("nearest_mode", "round_prefer_floor"));
    if (nearest == "round_prefer_floor") {
      spec.nearest = ResizeNearest::kRoundPreferFloor;
    } else if (nearest == "round_prefer_ceil") {
      spec.nearest = ResizeNearest::kRoundPreferCeil;
    } else if (nearest == "floor") {
      spec.nearest = ResizeNearest::kFloor;
    } else if (nearest == "ceil") {
      spec.nearest = ResizeNearest::kCeil;
    } else {
      return OpError("Resize", "nearest_mode '{}' is not supported", nearest);
    }
    // Checked as the reference checks them; cubic_coeff_a and extrapolation_value matter only
    // to the modes declined here.
    KILN_RETURN_IF_ERROR(attrs.Float("cubic_coeff_a", -0.75f).status());
    KILN_RETURN_IF_ERROR(attrs.Float("extrapolation_value", 0.0f).status());
    KILN_ASSIGN_OR_RETURN(bool exclude_outside, attrs.Bool("exclude_outside", false));
    if (exclude_outside) {
      return OpError("Resize", "exclude_outside is not implemented by the CUDA kernel");
    }
  }
  if (spec.linear) {
    const DataType t = info.input_type(0).dtype;
    if (t == DataType::kBytes || t == DataType::kBool) {
      return OpError("Resize", "mode '{}' needs a numeric input, got {}", mode, DataTypeName(t));
    }
  }
  const int scales_input = ResizeScalesInput(info);
  if (info.has_input(scales_input)) {
    const OwnedTensor* s = info.constant_input(scales_input);
    if (s == nullptr) return OpError("Resize", "scales must be a constant for the CUDA kernel");
    KILN_ASSIGN_OR_RETURN(spec.scales, ReadFloats(s->view(), "scales"));
  }
  if (info.opset() >= 11 && info.has_input(3)) {
    const OwnedTensor* s = info.constant_input(3);
    if (s == nullptr) return OpError("Resize", "sizes must be a constant for the CUDA kernel");
    if (s->num_elements() > 0) {
      KILN_ASSIGN_OR_RETURN(spec.sizes, ReadIntList(s->view(), "Resize", "sizes"));
    }
  }
  if (spec.sizes.has_value() == !spec.scales.empty()) {
    return OpError("Resize",
                   "exactly one of scales and sizes must be given (scales has {} entries)",
                   spec.scales.size());
  }
  return std::make_unique<ResizeKernel>(std::move(spec));
}

// Declines what the kernel does not implement (cubic, tf_crop_and_resize, exclude_outside),
// non-constant scales or sizes, and linear on a declared non-floating type.
bool SupportsResize(const KernelInfo& info) {
  const NodeDesc& node = info.node();
  const std::string mode = node.GetString("mode", "nearest");
  if (mode == "cubic") return false;
  if (node.GetString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") {
    return false;
  }
  if (node.GetInt("exclude_outside", 0) != 0) return false;
  if (!ConstantOrAbsent(info, ResizeScalesInput(info))) return false;
  if (info.opset() >= 11 && !ConstantOrAbsent(info, 3)) return false;
  if (mode == "linear" || mode == "bilinear") {
    const DataType t = info.input_type(0).dtype;
    if (t != DataType::kInvalid && !IsFloatingPoint(t)) return false;
  }
  return true;
}

}  // namespace

std::vector<KernelDef> DataKernelDefs() {
  constexpr DeviceType kCuda = DeviceType::kCuda;
  constexpr DataTypeMask kTypes = kCudaDataTypes;
  return {
      // Views: the input's memory under a new shape.
      {"Reshape", "", 7, 13, kCuda, kTypes, 0, &CreateReshape, "cuda", &SupportsReshape},
      {"Reshape", "", 14, 17, kCuda, kTypes, 0, &CreateReshape, "cuda", &SupportsReshape},
      {"Flatten", "", 7, 10, kCuda, kTypes, 0, &CreateFlatten, "cuda"},
      {"Flatten", "", 11, 17, kCuda, kTypes, 0, &CreateFlatten, "cuda"},
      {"Squeeze", "", 7, 10, kCuda, kTypes, 0, &CreateSqueeze, "cuda"},
      {"Squeeze", "", 11, 12, kCuda, kTypes, 0, &CreateSqueeze, "cuda"},
      {"Squeeze", "", 13, 17, kCuda, kTypes, 0, &CreateSqueeze, "cuda", &SupportsAxesInput},
      {"Unsqueeze", "", 7, 10, kCuda, kTypes, 0, &CreateUnsqueeze, "cuda"},
      {"Unsqueeze", "", 11, 12, kCuda, kTypes, 0, &CreateUnsqueeze, "cuda"},
      {"Unsqueeze", "", 13, 17, kCuda, kTypes, 0, &CreateUnsqueeze, "cuda", &SupportsAxesInput},
      {"Identity", "", 7, 13, kCuda, kTypes, 0, &CreateIdentity, "cuda"},
      {"Identity", "", 14, 15, kCuda, kTypes, 0, &CreateIdentity, "cuda", &SupportsTensorIdentity},
      {"Identity", "", 16, 17, kCuda, kTypes, 0, &CreateIdentity, "cuda", &SupportsTensorIdentity},
      // Copies.
      {"Transpose", "", 7, 17, kCuda, kTypes, 0, &CreateTranspose, "cuda"},
      {"Concat", "", 7, 10, kCuda, kTypes, 0, &CreateConcat, "cuda"},
      {"Concat", "", 11, 17, kCuda, kTypes, 0, &CreateConcat, "cuda"},
      {"Split", "", 7, 10, kCuda, kTypes, 0, &CreateSplit, "cuda"},
      {"Split", "", 11, 12, kCuda, kTypes, 0, &CreateSplit, "cuda"},
      {"Split", "", 13, 17, kCuda, kTypes, 0, &CreateSplit, "cuda", &SupportsSplit},
      {"Slice", "", 7, 9, kCuda, kTypes, 0, &CreateSlice, "cuda"},
      {"Slice", "", 10, 10, kCuda, kTypes, 0, &CreateSlice, "cuda", &SupportsSlice},
      {"Slice", "", 11, 12, kCuda, kTypes, 0, &CreateSlice, "cuda", &SupportsSlice},
      {"Slice", "", 13, 17, kCuda, kTypes, 0, &CreateSlice, "cuda", &SupportsSlice},
      {"Gather", "", 7, 10, kCuda, kTypes, 0, &CreateGather, "cuda"},
      {"Gather", "", 11, 12, kCuda, kTypes, 0, &CreateGather, "cuda"},
      {"Gather", "", 13, 17, kCuda, kTypes, 0, &CreateGather, "cuda"},
      {"GatherElements", "", 11, 12, kCuda, kTypes, 0, &CreateGatherElements, "cuda"},
      {"GatherElements", "", 13, 17, kCuda, kTypes, 0, &CreateGatherElements, "cuda"},
      {"Pad", "", 7, 10, kCuda, kTypes, 0, &CreatePad, "cuda"},
      {"Pad", "", 11, 12, kCuda, kTypes, 0, &CreatePad, "cuda", &SupportsPad},
      {"Pad", "", 13, 17, kCuda, kTypes, 0, &CreatePad, "cuda", &SupportsPad},
      {"Tile", "", 7, 12, kCuda, kTypes, 0, &CreateTile, "cuda", &SupportsTile},
      {"Tile", "", 13, 17, kCuda, kTypes, 0, &CreateTile, "cuda", &SupportsTile},
      {"Resize", "", 10, 10, kCuda, kTypes, 0, &CreateResize, "cuda", &SupportsResize},
      {"Resize", "", 11, 12, kCuda, kTypes, 0, &CreateResize, "cuda", &SupportsResize},
      {"Resize", "", 13, 17, kCuda, kTypes, 0, &CreateResize, "cuda", &SupportsResize},
  };
}

}  // namespace kiln::cuda
