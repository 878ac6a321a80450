// SPDX-License-Identifier: Apache-2.0
// Reference data-movement kernels: Reshape, Flatten, Transpose, Concat, Identity, Constant. They
// work for every dtype, BYTES (std::string elements), BOOL, FP16 and BF16 included.
//
// NOTE on the approach: the output is always a fresh tensor (outputs come from
// ctx.AllocateOutput), so Reshape, Flatten and Identity copy the input whole with the new shape;
// Concat copies contiguous slabs (outer x dims[axis] x inner); Transpose gathers element by
// element, walking the output in order with the input's strides permuted (ForEachBroadcast with
// the permuted strides). Element copies go through the movers of common.h: memcpy of the
// element size for plain types, std::string assignment for BYTES. Constant builds its tensor
// once in the factory and copies it out on each run.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {

Result<Shape> ReshapeTarget(const Shape& in, std::span<const int64_t> spec, bool allow_zero) {
  if (spec.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return OpError("Reshape", "target shape has {} dims, more than the supported {}", spec.size(),
                   Shape::kMaxRank);
  }
  std::vector<int64_t> dims(spec.begin(), spec.end());
  std::optional<size_t> inferred;
  bool has_zero = false;
  int64_t known = 1;  // product of every dim but the inferred one
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t& d = dims[i];
    if (d == -1) {
      if (inferred.has_value()) {
        return OpError("Reshape", "target shape [{}] has more than one -1", fmt::join(spec, ","));
      }
      inferred = i;
      continue;
    }
    if (d < -1) {
      return OpError("Reshape", "target shape [{}] has invalid dim {}", fmt::join(spec, ","), d);
    }
    if (d == 0) {
      has_zero = true;
      if (!allow_zero) {
        if (i >= static_cast<size_t>(in.rank())) {
          return OpError("Reshape",
                         "target shape [{}] has 0 at index {}, which copies an input dim, but the "
                         "input {} has rank {}",
                         fmt::join(spec, ","), i, in.ToString(), in.rank());
        }
        d = in.dim(static_cast<int>(i));
      }
    }
    if (__builtin_mul_overflow(known, d, &known)) {
      return OpError("Reshape", "target shape [{}] has more elements than fit in 64 bits",
                     fmt::join(spec, ","));
    }
  }
  if (allow_zero && has_zero && inferred.has_value()) {
    return OpError("Reshape", "target shape [{}] has both 0 and -1, invalid with allowzero=1",
                   fmt::join(spec, ","));
  }
  const int64_t total = in.NumElements();
  if (inferred.has_value()) {
    if (known == 0 || total % known != 0) {
      return OpError("Reshape", "cannot infer the -1 in [{}] for input {} ({} elements)",
                     fmt::join(spec, ","), in.ToString(), total);
    }
    dims[*inferred] = total / known;
  } else if (known != total) {
    return OpError("Reshape", "cannot reshape input {} ({} elements) to [{}] ({} elements)",
                   in.ToString(), total, fmt::join(dims, ","), known);
  }
  return Shape::Create(dims);
}

namespace {

class ReshapeKernel final : public Kernel {
 public:
  explicit ReshapeKernel(bool allow_zero) : allow_zero_(allow_zero) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Reshape"));
    const Tensor& x = ctx.input(0);
    const Tensor& s = ctx.input(1);
    if (s.dtype() != DataType::kInt64 || s.rank() != 1) {
      return OpError("Reshape", "the shape input must be a 1-D INT64 tensor, got {}{}",
                     DataTypeName(s.dtype()), s.shape().ToString());
    }
    const std::span<const int64_t> spec(s.data<const int64_t>(),
                                        static_cast<size_t>(s.num_elements()));
    KILN_ASSIGN_OR_RETURN(Shape out, ReshapeTarget(x.shape(), spec, allow_zero_));
    return ForwardOrCopyInput(ctx, out);
  }

 private:
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
    return ForwardOrCopyInput(ctx, out);
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

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
    // The factory checked that perm is a permutation of [0, perm.size()).
    DimArray in_strides{};
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; --i) {
      in_strides[static_cast<size_t>(i)] = stride;
      stride *= x.dim(i);
    }
    DimArray out_dims{}, src_strides{};
    for (int i = 0; i < rank; ++i) {
      const size_t p = static_cast<size_t>(perm[static_cast<size_t>(i)]);
      out_dims[static_cast<size_t>(i)] = x.dim(static_cast<int>(p));
      src_strides[static_cast<size_t>(i)] = in_strides[p];
    }
    const Shape out(std::span<const int64_t>(out_dims.data(), static_cast<size_t>(rank)));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    const DimArray zeros{};
    WithMover(x, y, [&](auto mover) {
      ForEachBroadcast(out, src_strides, zeros,
                       [&](int64_t o, int64_t i, int64_t /*unused*/) { mover(o, i); });
    });
    return Status::OK();
  }

 private:
  std::vector<int64_t> perm_;
};

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
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, first.dtype(), out));
    const std::span<const int64_t> dims = out.dims();
    const int64_t outer = DimProduct(dims, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(dims, static_cast<size_t>(axis) + 1, dims.size());
    int64_t dst = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int i = 0; i < n; ++i) {
        const int64_t slab = ctx.input(i).dim(axis) * inner;
        CopyElements(ctx.input(i), o * slab, y, dst, slab);
        dst += slab;
      }
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

class IdentityKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Identity"));
    return ForwardOrCopyInput(ctx, ctx.input(0).shape());
  }
};

class ConstantKernel final : public Kernel {
 public:
  explicit ConstantKernel(std::shared_ptr<const OwnedTensor> value) : value_(std::move(value)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_outputs() < 1) return OpError("Constant", "no output slot");
    return CopyToOutput(ctx, value_->view(), value_->shape());
  }

 private:
  std::shared_ptr<const OwnedTensor> value_;
};

// A 0-D (scalar) or 1-D tensor of `values`, for Constant's value_* attributes.
template <typename T, typename Values>
Result<std::shared_ptr<const OwnedTensor>> MakeConstant(const Values& values, bool scalar) {
  const Shape shape = scalar ? Shape() : Shape{static_cast<int64_t>(values.size())};
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(DataTypeOf<T>(), shape));
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  return std::make_shared<const OwnedTensor>(std::move(t));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateReshape(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("shape", 5));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("allowzero", 14));
  KILN_ASSIGN_OR_RETURN(bool allow_zero, attrs.Bool("allowzero", false));
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  const DataType shape_type = info.input_type(1).dtype;
  if (shape_type != DataType::kInvalid && shape_type != DataType::kInt64) {
    return OpError("Reshape", "the shape input must be INT64, it is declared {}",
                   DataTypeName(shape_type));
  }
  return std::make_unique<ReshapeKernel>(allow_zero);
}

Result<std::unique_ptr<Kernel>> CreateFlatten(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 1));
  if (info.opset() < 11 && axis < 0) {
    return OpError("Flatten", "negative axis {} is not allowed before opset 11 (model uses {})",
                   axis, info.opset());
  }
  return std::make_unique<FlattenKernel>(axis, info.opset() >= 11);
}

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

Result<std::unique_ptr<Kernel>> CreateIdentity(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<IdentityKernel>();
}

Result<std::unique_ptr<Kernel>> CreateConstant(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 0));
  static constexpr std::string_view kValueAttrs[] = {"value",        "sparse_value", "value_float",
                                                     "value_floats", "value_int",    "value_ints",
                                                     "value_string", "value_strings"};
  const Attribute* attr = nullptr;
  for (std::string_view name : kValueAttrs) {
    const Attribute* a = info.node().FindAttribute(name);
    if (a == nullptr) continue;
    if (attr != nullptr) {
      return OpError("Constant", "has both '{}' and '{}'; exactly one value attribute is allowed",
                     attr->name, a->name);
    }
    attr = a;
  }
  if (attr == nullptr) return OpError("Constant", "has no value attribute");
  const std::string_view name = attr->name;
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("sparse_value", 11));
  if (name == "sparse_value") {
    return OpError("Constant", "attribute 'sparse_value' (a sparse tensor) is not supported");
  }
  if (name != "value") KILN_RETURN_IF_ERROR(attrs.RequireOpset(name, 12));

  std::shared_ptr<const OwnedTensor> value;
  auto wrong_type = [&](std::string_view want) {
    return OpError("Constant", "attribute '{}' must be {}", name, want);
  };
  if (name == "value") {
    if (attr->type != AttributeType::kTensor || attr->t == nullptr) return wrong_type("a TENSOR");
    const Tensor& t = attr->t->view();
    if (!t.valid() || !t.device().is_cpu() || !t.is_contiguous()) {
      return OpError("Constant", "attribute 'value' must be a valid, contiguous CPU tensor");
    }
    value = attr->t;
  } else if (name == "value_float") {
    if (attr->type != AttributeType::kFloat) return wrong_type("a FLOAT");
    KILN_ASSIGN_OR_RETURN(value, MakeConstant<float>(std::vector<float>{attr->f}, true));
  } else if (name == "value_floats") {
    if (attr->type != AttributeType::kFloats) return wrong_type("a FLOATS");
    KILN_ASSIGN_OR_RETURN(value, MakeConstant<float>(attr->floats, false));
  } else if (name == "value_int") {
    if (attr->type != AttributeType::kInt) return wrong_type("an INT");
    KILN_ASSIGN_OR_RETURN(value, MakeConstant<int64_t>(std::vector<int64_t>{attr->i}, true));
  } else if (name == "value_ints") {
    if (attr->type != AttributeType::kInts) return wrong_type("an INTS");
    KILN_ASSIGN_OR_RETURN(value, MakeConstant<int64_t>(attr->ints, false));
  } else if (name == "value_string") {
    if (attr->type != AttributeType::kString) return wrong_type("a STRING");
    KILN_ASSIGN_OR_RETURN(value,
                          MakeConstant<std::string>(std::vector<std::string>{attr->s}, true));
  } else {  // value_strings
    if (attr->type != AttributeType::kStrings) return wrong_type("a STRINGS");
    KILN_ASSIGN_OR_RETURN(value, MakeConstant<std::string>(attr->strings, false));
  }
  const DataType declared = info.output_type(0).dtype;
  if (declared != DataType::kInvalid && declared != value->dtype()) {
    return OpError("Constant", "output is declared {} but the value is {}", DataTypeName(declared),
                   DataTypeName(value->dtype()));
  }
  return std::make_unique<ConstantKernel>(std::move(value));
}

}  // namespace kiln::ref
