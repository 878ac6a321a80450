// SPDX-License-Identifier: Apache-2.0
// Reference shape kernels of the tensor op family: Shape, Size, Unsqueeze, Squeeze, Expand,
// Tile, Slice, Split, ConstantOfShape and Range. All but Range move elements of every dtype.
//
// NOTE on the approach: every op first computes its output shape (and, for views like Slice,
// a base offset and per-dim strides into the input), then copies elements through the movers of
// common.h. Slice maps output coordinate c of axis d to start[d] + c * step[d], i.e. a strided
// walk with stride input_stride[d] * step[d] from a base offset (ForEachStrided). Expand is a
// broadcast walk (stride 0 on broadcast dims). Tile walks the output with an odometer and takes
// each coordinate modulo the input dim. Opset differences (attributes before, inputs after) are
// resolved in the factories, which store either the attribute values or "read input i".

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/tensor_family_util.h"
#include "op/slice_range.h"

namespace kiln::ref {
namespace {

// --- Shape, Size -----------------------------------------------------------------------------

class ShapeKernel final : public Kernel {
 public:
  ShapeKernel(std::optional<int64_t> start, std::optional<int64_t> end)
      : start_(start), end_(end) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Shape"));
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    // Opset 15: negative start/end count from the back; both are clamped to [0, rank].
    auto clamp = [rank](int64_t v) {
      if (v < 0) v = v < -rank ? 0 : v + rank;
      return std::min(v, rank);
    };
    const int64_t start = clamp(start_.value_or(0));
    const int64_t end = clamp(end_.value_or(rank));
    const int64_t n = std::max<int64_t>(end - start, 0);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, Shape{n}));
    for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = x.dim(static_cast<int>(start + i));
    return Status::OK();
  }

 private:
  std::optional<int64_t> start_, end_;
};

class SizeKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Size"));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kInt64, Shape()));
    *y.data<int64_t>() = ctx.input(0).num_elements();
    return Status::OK();
  }
};

// --- Unsqueeze, Squeeze ----------------------------------------------------------------------

// Axes from an attribute (opset < 13) or from input 1 (opset 13+).
struct AxesSource {
  std::optional<std::vector<int64_t>> attr;  // set: the attribute; unset: input 1 (if present)
  bool allow_negative = true;
};

Result<std::optional<std::vector<int64_t>>> AxesFrom(const AxesSource& src, KernelContext& ctx,
                                                     std::string_view op) {
  if (src.attr.has_value()) return src.attr;
  if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>();
  KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, op));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        ReadIntList(ctx.input(1), op, "the axes input", /*allow_scalar=*/true));
  return std::optional<std::vector<int64_t>>(std::move(axes));
}

class UnsqueezeKernel final : public Kernel {
 public:
  explicit UnsqueezeKernel(AxesSource axes) : axes_(std::move(axes)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Unsqueeze"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes,
                          AxesFrom(axes_, ctx, "Unsqueeze"));
    if (!axes.has_value()) return OpError("Unsqueeze", "the axes input is required");
    const size_t out_rank = static_cast<size_t>(x.rank()) + axes->size();
    if (out_rank > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("Unsqueeze", "output rank {} exceeds the supported {}", out_rank,
                     Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(
        std::vector<int> norm,
        NormalizeAxes("Unsqueeze", *axes, static_cast<int>(out_rank), axes_.allow_negative));
    std::vector<int64_t> dims(out_rank, 1);
    std::vector<bool> inserted(out_rank, false);
    for (int a : norm) inserted[static_cast<size_t>(a)] = true;
    int src = 0;
    for (size_t i = 0; i < out_rank; ++i) {
      if (!inserted[i]) dims[i] = x.dim(src++);
    }
    return ForwardOrCopyInput(ctx, Shape(dims));
  }

 private:
  AxesSource axes_;
};

class SqueezeKernel final : public Kernel {
 public:
  explicit SqueezeKernel(AxesSource axes) : axes_(std::move(axes)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Squeeze"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes,
                          AxesFrom(axes_, ctx, "Squeeze"));
    std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
    if (!axes.has_value() || axes->empty()) {
      for (int i = 0; i < x.rank(); ++i) drop[static_cast<size_t>(i)] = x.dim(i) == 1;
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<int> norm,
                            NormalizeAxes("Squeeze", *axes, x.rank(), axes_.allow_negative));
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
    return ForwardOrCopyInput(ctx, Shape(dims));
  }

 private:
  AxesSource axes_;
};

// --- Expand, Tile ----------------------------------------------------------------------------

class ExpandKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Expand"));
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> spec,
                          ReadIntList(ctx.input(1), "Expand", "the shape input"));
    if (spec.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("Expand", "shape has {} dims, more than the supported {}", spec.size(),
                     Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(Shape target, MakeShape("Expand", spec));
    KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes("Expand", x.shape(), target));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    const DimArray strides = BroadcastStrides(x.shape(), out);
    WithMover(x, y, [&](auto mover) { ForEachStrided(out, strides, 0, mover); });
    return Status::OK();
  }
};

// Copies `x` tiled `repeats[d]` times along each dim d into a new output 0.
Status TileInto(KernelContext& ctx, const Tensor& x, std::span<const int64_t> repeats) {
  const int rank = x.rank();
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const int64_t r = repeats[static_cast<size_t>(d)];
    if (r < 0) return OpError("Tile", "repeats must be >= 0, got {} for dim {}", r, d);
    if (__builtin_mul_overflow(x.dim(d), r, &dims[static_cast<size_t>(d)])) {
      return OpError("Tile", "output dim {} overflows", d);
    }
  }
  KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("Tile", dims));
  KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
  const int64_t total = out.NumElements();
  if (total == 0) return Status::OK();
  const DimArray in_strides = RowStrides(x.shape());
  WithMover(x, y, [&](auto mover) {
    DimArray coord{};  // output coordinate
    for (int64_t o = 0; o < total; ++o) {
      int64_t src = 0;
      for (int d = 0; d < rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        src += (coord[du] % x.dim(d)) * in_strides[du];
      }
      mover(o, src);
      for (int d = rank - 1; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        if (++coord[du] < out.dim(d)) break;
        coord[du] = 0;
      }
    }
  });
  return Status::OK();
}

class TileKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Tile"));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> repeats,
                          ReadIntList(ctx.input(1), "Tile", "repeats"));
    if (repeats.size() != static_cast<size_t>(x.rank())) {
      return OpError("Tile", "repeats has {} entries but the input {} has rank {}", repeats.size(),
                     x.shape().ToString(), x.rank());
    }
    return TileInto(ctx, x, repeats);
  }
};

// --- Slice -----------------------------------------------------------------------------------

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

class SliceKernel final : public Kernel {
 public:
  // `attr` set: opset 7-9 attributes; unset: inputs 1..4.
  explicit SliceKernel(std::optional<SliceParams> attr) : attr_(std::move(attr)) {}

  Status Compute(KernelContext& ctx) const override {
    SliceParams p;
    if (attr_.has_value()) {
      KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Slice"));
      p = *attr_;
    } else {
      KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, "Slice"));
      KILN_ASSIGN_OR_RETURN(p.starts, ReadIntList(ctx.input(1), "Slice", "starts"));
      KILN_ASSIGN_OR_RETURN(p.ends, ReadIntList(ctx.input(2), "Slice", "ends"));
      if (ctx.has_input(3)) {
        KILN_RETURN_IF_ERROR(CheckInput(ctx, 3, "Slice"));
        KILN_ASSIGN_OR_RETURN(p.axes, ReadIntList(ctx.input(3), "Slice", "axes"));
      }
      if (ctx.has_input(4)) {
        KILN_RETURN_IF_ERROR(CheckInput(ctx, 4, "Slice"));
        KILN_ASSIGN_OR_RETURN(p.steps, ReadIntList(ctx.input(4), "Slice", "steps"));
      }
    }
    const Tensor& x = ctx.input(0);
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
    const DimArray in_strides = RowStrides(x.shape());
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
    DimArray strides = in_strides;
    int64_t base = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t a = static_cast<size_t>(axes[i]);
      if (p.steps[i] == 0) return OpError("Slice", "step for axis {} is 0", axes[i]);
      const SliceRange r = ClampSlice(p.starts[i], p.ends[i], p.steps[i], dims[a]);
      dims[a] = r.count;
      base += r.start * in_strides[a];
      // With two or more elements |step| < dim, so the product stays below the element count.
      strides[a] = r.count > 1 ? in_strides[a] * p.steps[i] : 0;
    }
    const Shape out(dims);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    if (out.NumElements() == 0) return Status::OK();
    WithMover(x, y, [&](auto mover) { ForEachStrided(out, strides, base, mover); });
    return Status::OK();
  }

 private:
  std::optional<SliceParams> attr_;
};

// --- Split -----------------------------------------------------------------------------------

class SplitKernel final : public Kernel {
 public:
  // `attr_split` set: split sizes from the attribute (may be empty = equal parts); unset: from
  // input 1 when present (opset 13+).
  SplitKernel(int64_t axis, bool allow_negative, std::optional<std::vector<int64_t>> attr_split)
      : axis_(axis), allow_negative_(allow_negative), attr_split_(std::move(attr_split)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Split"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError("Split", "the input must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("Split", axis_, x.rank(), allow_negative_));
    const int64_t dim = x.dim(axis);
    const int n = ctx.num_outputs();
    std::vector<int64_t> split;
    if (attr_split_.has_value()) {
      split = *attr_split_;
    } else if (ctx.has_input(1)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 1, "Split"));
      KILN_ASSIGN_OR_RETURN(split, ReadIntList(ctx.input(1), "Split", "split"));
    }
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
    const std::span<const int64_t> in_dims = x.shape().dims();
    const int64_t outer = DimProduct(in_dims, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(in_dims, static_cast<size_t>(axis) + 1, in_dims.size());
    int64_t offset = 0;  // along the axis
    for (int i = 0; i < n; ++i) {
      const int64_t part = split[static_cast<size_t>(i)];
      std::vector<int64_t> dims(in_dims.begin(), in_dims.end());
      dims[static_cast<size_t>(axis)] = part;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(i, x.dtype(), Shape(dims)));
      for (int64_t o = 0; o < outer; ++o) {
        CopyElements(x, (o * dim + offset) * inner, y, o * part * inner, part * inner);
      }
      offset += part;
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool allow_negative_;
  std::optional<std::vector<int64_t>> attr_split_;
};

// --- ConstantOfShape, Range ------------------------------------------------------------------

class ConstantOfShapeKernel final : public Kernel {
 public:
  explicit ConstantOfShapeKernel(std::shared_ptr<const OwnedTensor> value)
      : value_(std::move(value)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "ConstantOfShape"));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                          ReadIntList(ctx.input(0), "ConstantOfShape", "the shape input"));
    if (dims.size() > static_cast<size_t>(Shape::kMaxRank)) {
      return OpError("ConstantOfShape", "shape has {} dims, more than the supported {}",
                     dims.size(), Shape::kMaxRank);
    }
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("ConstantOfShape", dims));
    const size_t size = DataTypeSize(value_->dtype());
    if (value_->dtype() == DataType::kBytes || size == 0 || value_->num_elements() != 1) {
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, value_->dtype(), out));
      WithMover(value_->view(), y, [&](auto mover) {
        for (int64_t i = 0; i < out.NumElements(); ++i) mover(i, 0);
      });
      return Status::OK();
    }
    const auto* value = static_cast<const unsigned char*>(value_->raw_data());
    if (std::all_of(value, value + size, [](unsigned char b) { return b == 0; })) {
      return ctx.AllocateOutput(0, value_->dtype(), out).status();  // zero-filled
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, value_->dtype(), out));
    const auto fill = [&](auto tag) {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, value, sizeof(T));
      std::fill_n(static_cast<T*>(y.raw_data()), out.NumElements(), v);
    };
    switch (size) {
      case 1:
        fill(uint8_t{});
        break;
      case 2:
        fill(uint16_t{});
        break;
      case 4:
        fill(uint32_t{});
        break;
      case 8:
        fill(uint64_t{});
        break;
      default:
        for (int64_t i = 0; i < out.NumElements(); ++i) {
          std::memcpy(static_cast<unsigned char*>(y.raw_data()) + static_cast<size_t>(i) * size,
                      value, size);
        }
    }
    return Status::OK();
  }

 private:
  std::shared_ptr<const OwnedTensor> value_;
};

class RangeKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, "Range"));
    const Tensor& start_t = ctx.input(0);
    for (int i = 0; i < 3; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != start_t.dtype()) {
        return OpError("Range", "inputs have different dtypes {} and {}",
                       DataTypeName(start_t.dtype()), DataTypeName(t.dtype()));
      }
      if (t.num_elements() != 1) {
        return OpError("Range", "input {} must be a scalar, got shape {}", i, t.shape().ToString());
      }
    }
    return DispatchType<float, double, int16_t, int32_t, int64_t>(
        start_t.dtype(), "Range", [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          const T start = *ctx.input(0).data<const T>();
          const T limit = *ctx.input(1).data<const T>();
          const T delta = *ctx.input(2).data<const T>();
          if (delta == 0) return OpError("Range", "delta is 0");
          int64_t n = 0;
          if constexpr (std::is_floating_point_v<T>) {
            const double count = std::ceil((static_cast<double>(limit) - start) / delta);
            if (!(count < 9.2e18)) {  // also rejects NaN
              return OpError("Range", "the range has too many elements ({})", count);
            }
            n = count > 0 ? static_cast<int64_t>(count) : 0;
          } else {
            const __int128 diff = static_cast<__int128>(limit) - start;
            const __int128 d = delta;
            // ceil(diff / d) for either sign of d.
            __int128 q = diff / d;
            if (q * d != diff && ((diff > 0) == (d > 0))) ++q;
            if (q > std::numeric_limits<int64_t>::max()) {
              return OpError("Range", "the range has too many elements");
            }
            n = q > 0 ? static_cast<int64_t>(q) : 0;
          }
          KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, start_t.dtype(), Shape{n}));
          T* out = y.data<T>();
          for (int64_t i = 0; i < n; ++i) {
            if constexpr (std::is_floating_point_v<T>) {
              out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
            } else {
              // start + i * delta stays within [start, limit) so it fits in T.
              out[i] =
                  static_cast<T>(static_cast<__int128>(start) + static_cast<__int128>(i) * delta);
            }
          }
          return Status::OK();
        });
  }
};

}  // namespace

// --- factories -------------------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> CreateShape(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("start", 15));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("end", 15));
  std::optional<int64_t> start, end;
  if (attrs.Has("start")) {
    KILN_ASSIGN_OR_RETURN(start, attrs.Int("start", 0));
  }
  if (attrs.Has("end")) {
    KILN_ASSIGN_OR_RETURN(end, attrs.Int("end", 0));
  }
  return std::make_unique<ShapeKernel>(start, end);
}

Result<std::unique_ptr<Kernel>> CreateSize(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<SizeKernel>();
}

namespace {

// Unsqueeze/Squeeze axes: the attribute before opset 13 (negative from 11), input 1 from 13.
Result<AxesSource> ReadAxesSource(const KernelInfo& info, bool required) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("axes", 13));
  AxesSource src;
  src.allow_negative = info.opset() >= 11;
  if (info.opset() < 13) {
    if (required && !attrs.Has("axes")) {
      return OpError(attrs.op(), "attribute 'axes' is required before opset 13");
    }
    if (attrs.Has("axes")) {
      KILN_ASSIGN_OR_RETURN(src.attr, attrs.Ints("axes"));
    }
  } else if (required && !info.has_input(1)) {
    return OpError(attrs.op(), "the axes input is required from opset 13");
  }
  return src;
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateUnsqueeze(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(AxesSource src, ReadAxesSource(info, /*required=*/true));
  return std::make_unique<UnsqueezeKernel>(std::move(src));
}

Result<std::unique_ptr<Kernel>> CreateSqueeze(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_ASSIGN_OR_RETURN(AxesSource src, ReadAxesSource(info, /*required=*/false));
  return std::make_unique<SqueezeKernel>(std::move(src));
}

Result<std::unique_ptr<Kernel>> CreateExpand(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return std::make_unique<ExpandKernel>();
}

Result<std::unique_ptr<Kernel>> CreateTile(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return std::make_unique<TileKernel>();
}

Result<std::unique_ptr<Kernel>> CreateSlice(const KernelInfo& info) {
  AttrReader attrs(info);
  for (std::string_view name : {"starts", "ends", "axes"}) {
    KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn(name, 10));
  }
  if (info.opset() >= 10) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
    return std::make_unique<SliceKernel>(std::nullopt);
  }
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  if (!attrs.Has("starts") || !attrs.Has("ends")) {
    return OpError("Slice", "attributes 'starts' and 'ends' are required before opset 10");
  }
  SliceParams p;
  KILN_ASSIGN_OR_RETURN(p.starts, attrs.Ints("starts"));
  KILN_ASSIGN_OR_RETURN(p.ends, attrs.Ints("ends"));
  KILN_ASSIGN_OR_RETURN(p.axes, attrs.Ints("axes"));
  if (p.starts.size() != p.ends.size() || (attrs.Has("axes") && p.axes.size() != p.starts.size())) {
    return OpError("Slice", "attributes starts, ends and axes must have equal lengths");
  }
  return std::make_unique<SliceKernel>(std::move(p));
}

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
  std::optional<std::vector<int64_t>> attr_split;
  if (attrs.Has("split")) {
    if (info.has_input(1)) {
      return OpError("Split", "has both the 'split' attribute and the split input");
    }
    KILN_ASSIGN_OR_RETURN(attr_split, attrs.Ints("split"));
    if (attr_split->size() != static_cast<size_t>(info.num_outputs())) {
      return OpError("Split", "split has {} entries but the node has {} outputs",
                     attr_split->size(), info.num_outputs());
    }
  }
  return std::make_unique<SplitKernel>(axis, true, std::move(attr_split));
}

Result<std::unique_ptr<Kernel>> CreateConstantOfShape(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  const Attribute* a = info.node().FindAttribute("value");
  std::shared_ptr<const OwnedTensor> value;
  if (a == nullptr) {
    KILN_ASSIGN_OR_RETURN(OwnedTensor zero, OwnedTensor::Allocate(DataType::kFloat32, Shape{1}));
    value = std::make_shared<const OwnedTensor>(std::move(zero));
  } else {
    if (a->type != AttributeType::kTensor || a->t == nullptr) {
      return OpError("ConstantOfShape", "attribute 'value' must be a TENSOR");
    }
    if (a->t->num_elements() != 1) {
      return OpError("ConstantOfShape", "attribute 'value' must have one element, it has shape {}",
                     a->t->shape().ToString());
    }
    if (a->t->dtype() == DataType::kBytes) {
      return OpError("ConstantOfShape", "attribute 'value' may not be a string tensor");
    }
    value = a->t;
  }
  const DataType declared = info.input_type(0).dtype;
  if (declared != DataType::kInvalid && declared != DataType::kInt64) {
    return OpError("ConstantOfShape", "the shape input must be INT64, it is declared {}",
                   DataTypeName(declared));
  }
  return std::make_unique<ConstantOfShapeKernel>(std::move(value));
}

Result<std::unique_ptr<Kernel>> CreateRange(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  return std::make_unique<RangeKernel>();
}

}  // namespace kiln::ref
