// SPDX-License-Identifier: Apache-2.0
// Reference gather/scatter kernels of the tensor op family: Gather, GatherElements, GatherND,
// Scatter (deprecated alias of ScatterElements), ScatterElements and ScatterND. Data of every
// dtype; indices INT32 or INT64, negative ones counting from the back of their dim; an index out
// of range is INVALID_ARGUMENT (checked before anything is written to the output).
//
// NOTE on the approach: all indices are read into int64 and validated first. Gather and GatherND
// then copy contiguous slabs (everything after the indexed dims); GatherElements and the
// scatters walk the indices tensor with an odometer, replacing the coordinate of `axis` by the
// index. Scatters copy the data to the output first and then apply the updates in the order of
// the indices tensor (so with duplicate indices and no reduction the last update wins, as in the
// ONNX reference). Reductions add/mul (opset 16) are done in the element type (16-bit floats in
// float, integers modulo 2^n on the unsigned type).

#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/tensor_family_util.h"

namespace kiln::ref {
namespace {

enum class Reduction { kNone, kAdd, kMul };

Result<Reduction> ParseReduction(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("reduction", 16));
  KILN_ASSIGN_OR_RETURN(std::string r, attrs.String("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  return OpError(attrs.op(), "reduction '{}' is not supported (none, add, mul)", r);
}

// dst[to] = dst[to] (op) src[from] for numeric T; integers wrap.
template <typename T>
void Reduce(Reduction r, T* dst, int64_t to, const T* src, int64_t from) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U a = static_cast<U>(dst[to]), b = static_cast<U>(src[from]);
    dst[to] = static_cast<T>(r == Reduction::kAdd ? static_cast<U>(a + b) : static_cast<U>(a * b));
  } else {
    const MathType<T> a = ToMath(dst[to]), b = ToMath(src[from]);
    dst[to] = FromMath<T>(r == Reduction::kAdd ? a + b : a * b);
  }
}

// Applies the update pairs (output element, update element) to `y` (a copy of the data).
Status ApplyUpdates(std::string_view op, Reduction reduction, const Tensor& updates,
                    const Tensor& y, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  if (reduction == Reduction::kNone) {
    WithMover(updates, y, [&](auto mover) {
      for (const auto& [to, from] : pairs) mover(to, from);
    });
    return Status::OK();
  }
  return DispatchNumeric(y.dtype(), op, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* src = updates.data<const T>();
    T* dst = y.data<T>();
    for (const auto& [to, from] : pairs) Reduce(reduction, dst, to, src, from);
    return Status::OK();
  });
}

// --- Gather ----------------------------------------------------------------------------------

class GatherKernel final : public Kernel {
 public:
  GatherKernel(int64_t axis, bool allow_negative) : axis_(axis), allow_negative_(allow_negative) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Gather"));
    const Tensor& x = ctx.input(0);
    const Tensor& idx_t = ctx.input(1);
    if (x.rank() < 1) return OpError("Gather", "data must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Gather", axis_, x.rank(), allow_negative_));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadInts(idx_t, "Gather", "indices"));
    const int64_t dim = x.dim(axis);
    for (int64_t& i : idx) {
      KILN_ASSIGN_OR_RETURN(i, NormalizeIndex("Gather", i, dim));
    }
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().begin() + axis);
    for (int64_t d : idx_t.shape().dims()) dims.push_back(d);
    for (int d = axis + 1; d < x.rank(); ++d) dims.push_back(x.dim(d));
    if (dims.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("Gather", "output rank {} exceeds the supported {}", dims.size(),
                     Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), Shape(dims)));
    const std::span<const int64_t> xd = x.shape().dims();
    const int64_t outer = DimProduct(xd, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(xd, static_cast<size_t>(axis) + 1, xd.size());
    const int64_t n = static_cast<int64_t>(idx.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n; ++j) {
        CopyElements(x, (o * dim + idx[static_cast<size_t>(j)]) * inner, y, (o * n + j) * inner,
                     inner);
      }
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool allow_negative_;
};

// --- GatherElements / ScatterElements ----------------------------------------------------------

// For each element of `indices` (row-major), the flat data index it addresses: its own
// coordinate with the `axis` coordinate replaced by the (normalized) index value.
Result<std::vector<int64_t>> ElementTargets(std::string_view op, const Shape& data,
                                            const Tensor& indices, int axis) {
  if (indices.rank() != data.rank()) {
    return OpError(op, "indices {} must have the rank of data {}", indices.shape().ToString(),
                   data.ToString());
  }
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      return OpError(op, "indices {} exceed data {} at dim {}", indices.shape().ToString(),
                     data.ToString(), d);
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadInts(indices, op, "indices"));
  const DimArray strides = RowStrides(data);
  const int rank = data.rank();
  DimArray coord{};
  for (size_t k = 0; k < idx.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(int64_t v, NormalizeIndex(op, idx[k], data.dim(axis)));
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d) {
      const size_t du = static_cast<size_t>(d);
      flat += (d == axis ? v : coord[du]) * strides[du];
    }
    idx[k] = flat;
    for (int d = rank - 1; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      if (++coord[du] < indices.dim(d)) break;
      coord[du] = 0;
    }
  }
  return idx;
}

class GatherElementsKernel final : public Kernel {
 public:
  explicit GatherElementsKernel(int64_t axis) : axis_(axis) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "GatherElements"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError("GatherElements", "data must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("GatherElements", axis_, x.rank(), true));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> src,
                          ElementTargets("GatherElements", x.shape(), ctx.input(1), axis));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), ctx.input(1).shape()));
    WithMover(x, y, [&](auto mover) {
      for (size_t k = 0; k < src.size(); ++k) mover(static_cast<int64_t>(k), src[k]);
    });
    return Status::OK();
  }

 private:
  int64_t axis_;
};

class ScatterElementsKernel final : public Kernel {
 public:
  ScatterElementsKernel(std::string op, int64_t axis, Reduction reduction)
      : op_(std::move(op)), axis_(axis), reduction_(reduction) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, op_));
    const Tensor& x = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    if (x.rank() < 1) return OpError(op_, "data must have rank >= 1");
    if (updates.dtype() != x.dtype()) {
      return OpError(op_, "updates have dtype {}, data {}", DataTypeName(updates.dtype()),
                     DataTypeName(x.dtype()));
    }
    if (!(updates.shape() == indices.shape())) {
      return OpError(op_, "updates {} and indices {} must have the same shape",
                     updates.shape().ToString(), indices.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(op_, axis_, x.rank(), true));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dst, ElementTargets(op_, x.shape(), indices, axis));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
    CopyElements(x, 0, y, 0, x.num_elements());
    std::vector<std::pair<int64_t, int64_t>> pairs(dst.size());
    for (size_t k = 0; k < dst.size(); ++k) pairs[k] = {dst[k], static_cast<int64_t>(k)};
    return ApplyUpdates(op_, reduction_, updates, y, pairs);
  }

 private:
  std::string op_;
  int64_t axis_;
  Reduction reduction_;
};

// --- GatherND / ScatterND --------------------------------------------------------------------

// The index tuples of a GatherND/ScatterND `indices` tensor resolved to flat slab offsets into
// `data` (in elements): one per tuple, row-major over indices.shape[:-1]. `batch_dims` leading
// dims are shared by data and indices.
struct NdPlan {
  std::vector<int64_t> offsets;   // data element offset of each addressed slab
  int64_t slab = 1;               // elements per slab: prod(data.shape[batch_dims + k:])
  std::vector<int64_t> out_dims;  // indices.shape[:-1] + data.shape[batch_dims + k:]
};

Result<NdPlan> PlanNd(std::string_view op, const Shape& data, const Tensor& indices,
                      int64_t batch_dims) {
  const int r = data.rank(), q = indices.rank();
  if (r < 1 || q < 1) return OpError(op, "data and indices must have rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return OpError(op, "batch_dims {} must be in [0, {})", batch_dims, std::min(r, q));
  }
  const int b = static_cast<int>(batch_dims);
  for (int d = 0; d < b; ++d) {
    if (data.dim(d) != indices.dim(d)) {
      return OpError(op, "batch dim {} differs: data {} vs indices {}", d, data.ToString(),
                     indices.shape().ToString());
    }
  }
  const int64_t k = indices.dim(q - 1);
  if (k < 1 || k > r - b) {
    return OpError(op, "indices {} last dim must be in [1, {}]", indices.shape().ToString(), r - b);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadInts(indices, op, "indices"));
  NdPlan plan;
  const DimArray strides = RowStrides(data);
  const int tail = b + static_cast<int>(k);
  plan.slab = DimProduct(data.dims(), static_cast<size_t>(tail), static_cast<size_t>(r));
  const int64_t batch = DimProduct(data.dims(), 0, static_cast<size_t>(b));
  const int64_t batch_stride = b > 0 ? strides[static_cast<size_t>(b - 1)] : 0;
  const int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  const int64_t per_batch = batch > 0 ? tuples / batch : 0;
  plan.offsets.resize(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      const int d = b + static_cast<int>(j);
      KILN_ASSIGN_OR_RETURN(int64_t v,
                            NormalizeIndex(op, idx[static_cast<size_t>(t * k + j)], data.dim(d)));
      off += v * strides[static_cast<size_t>(d)];
    }
    plan.offsets[static_cast<size_t>(t)] = off;
  }
  plan.out_dims.assign(indices.shape().dims().begin(), indices.shape().dims().end() - 1);
  for (int d = tail; d < r; ++d) plan.out_dims.push_back(data.dim(d));
  return plan;
}

class GatherNDKernel final : public Kernel {
 public:
  explicit GatherNDKernel(int64_t batch_dims) : batch_dims_(batch_dims) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "GatherND"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(NdPlan plan, PlanNd("GatherND", x.shape(), ctx.input(1), batch_dims_));
    if (plan.out_dims.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("GatherND", "output rank {} exceeds the supported {}", plan.out_dims.size(),
                     Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), Shape(plan.out_dims)));
    for (size_t t = 0; t < plan.offsets.size(); ++t) {
      CopyElements(x, plan.offsets[t], y, static_cast<int64_t>(t) * plan.slab, plan.slab);
    }
    return Status::OK();
  }

 private:
  int64_t batch_dims_;
};

class ScatterNDKernel final : public Kernel {
 public:
  explicit ScatterNDKernel(Reduction reduction) : reduction_(reduction) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, "ScatterND"));
    const Tensor& x = ctx.input(0);
    const Tensor& updates = ctx.input(2);
    if (updates.dtype() != x.dtype()) {
      return OpError("ScatterND", "updates have dtype {}, data {}", DataTypeName(updates.dtype()),
                     DataTypeName(x.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(NdPlan plan, PlanNd("ScatterND", x.shape(), ctx.input(1), 0));
    if (!(Shape(plan.out_dims) == updates.shape())) {
      return OpError("ScatterND", "updates have shape {}, expected [{}]",
                     updates.shape().ToString(), fmt::join(plan.out_dims, ","));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
    CopyElements(x, 0, y, 0, x.num_elements());
    std::vector<std::pair<int64_t, int64_t>> pairs;
    pairs.reserve(plan.offsets.size() * static_cast<size_t>(plan.slab));
    for (size_t t = 0; t < plan.offsets.size(); ++t) {
      for (int64_t e = 0; e < plan.slab; ++e) {
        pairs.emplace_back(plan.offsets[t] + e, static_cast<int64_t>(t) * plan.slab + e);
      }
    }
    return ApplyUpdates("ScatterND", reduction_, updates, y, pairs);
  }

 private:
  Reduction reduction_;
};

}  // namespace

// --- factories -------------------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> CreateGather(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  // Negative axes are accepted at every opset (exporters emit them before opset 11 too).
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 0));
  return std::make_unique<GatherKernel>(axis, true);
}

Result<std::unique_ptr<Kernel>> CreateGatherElements(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 0));
  return std::make_unique<GatherElementsKernel>(axis);
}

Result<std::unique_ptr<Kernel>> CreateGatherND(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("batch_dims", 12));
  KILN_ASSIGN_OR_RETURN(int64_t batch_dims, attrs.Int("batch_dims", 0));
  if (batch_dims < 0) return OpError("GatherND", "batch_dims must be >= 0, got {}", batch_dims);
  return std::make_unique<GatherNDKernel>(batch_dims);
}

Result<std::unique_ptr<Kernel>> CreateScatterElements(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 0));
  const std::string& op = info.node().op_type;  // "Scatter" or "ScatterElements"
  KILN_ASSIGN_OR_RETURN(Reduction reduction, ParseReduction(info));
  const DataType dtype = info.input_type(0).dtype;
  if (reduction != Reduction::kNone && (dtype == DataType::kBool || dtype == DataType::kBytes)) {
    return OpError(op, "reduction is not defined for dtype {}", DataTypeName(dtype));
  }
  return std::make_unique<ScatterElementsKernel>(op, axis, reduction);
}

Result<std::unique_ptr<Kernel>> CreateScatterND(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  KILN_ASSIGN_OR_RETURN(Reduction reduction, ParseReduction(info));
  const DataType dtype = info.input_type(0).dtype;
  if (reduction != Reduction::kNone && (dtype == DataType::kBool || dtype == DataType::kBytes)) {
    return OpError("ScatterND", "reduction is not defined for dtype {}", DataTypeName(dtype));
  }
  return std::make_unique<ScatterNDKernel>(reduction);
}

}  // namespace kiln::ref
