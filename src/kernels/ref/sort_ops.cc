// SPDX-License-Identifier: Apache-2.0
// Reference sorting kernels of the tensor op family: TopK (values and INT64 indices) and Unique
// (unique elements or slices, first-occurrence indices, inverse indices, counts).
//
// NOTE on the approach: both sort index arrays with std::stable_sort over a total order of the
// element type: NaN sorts after every number (and equals other NaNs), strings compare
// bytewise, 16-bit floats compare as float. TopK sorts each (outer, inner) line along the axis by
// (value descending or ascending, index ascending), so ties keep the lower index first as ONNX
// specifies; `sorted = 0` also returns them in this order (the order is implementation-defined).
// Unique moves `axis` to the front conceptually: slice k is every element with coordinate k
// along the axis, in row-major order of the other dims, and slices compare lexicographically
// (numpy's unique with axis). Without an axis the flattened elements are the slices. Stable
// sorting keeps the first occurrence first within a group of equal slices; unsorted output
// lists the groups in order of first occurrence.

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/tensor_family_util.h"

namespace kiln::ref {
namespace {

// Three-way comparison under the total order described above.
template <typename T>
int Compare(const T& a, const T& b) {
  if constexpr (kIsFloatLike<T>) {
    const auto x = ToMath(a), y = ToMath(b);
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) return nx == ny ? 0 : (nx ? 1 : -1);
    return x < y ? -1 : (y < x ? 1 : 0);
  } else {
    return a < b ? -1 : (b < a ? 1 : 0);
  }
}

// --- TopK ------------------------------------------------------------------------------------

class TopKKernel final : public Kernel {
 public:
  // `attr_k` set: opset 7-9 attribute; unset: input 1.
  TopKKernel(std::optional<int64_t> attr_k, int64_t axis, bool largest)
      : attr_k_(attr_k), axis_(axis), largest_(largest) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, attr_k_.has_value() ? 1 : 2, "TopK"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return OpError("TopK", "the input must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis("TopK", axis_, x.rank(), true));
    int64_t k = 0;
    if (attr_k_.has_value()) {
      k = *attr_k_;
    } else {
      KILN_ASSIGN_OR_RETURN(k, ReadIntScalar(ctx.input(1), "TopK", "K"));
    }
    const int64_t dim = x.dim(axis);
    if (k < 0 || k > dim) {
      return OpError("TopK", "K = {} is out of range [0, {}] for axis {} of input {}", k, dim, axis,
                     x.shape().ToString());
    }
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
    dims[static_cast<size_t>(axis)] = k;
    const Shape out(dims);
    KILN_ASSIGN_OR_RETURN(Tensor values, ctx.AllocateOutput(0, x.dtype(), out));
    Tensor indices;
    if (ctx.num_outputs() > 1) {
      KILN_ASSIGN_OR_RETURN(indices, ctx.AllocateOutput(1, DataType::kInt64, out));
    }
    const std::span<const int64_t> d = x.shape().dims();
    const int64_t outer = DimProduct(d, 0, static_cast<size_t>(axis));
    const int64_t inner = DimProduct(d, static_cast<size_t>(axis) + 1, d.size());
    return DispatchNumeric(x.dtype(), "TopK", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* p = x.data<const T>();
      T* v = values.data<T>();
      int64_t* ix = indices.valid() ? indices.data<int64_t>() : nullptr;
      std::vector<int64_t> order(static_cast<size_t>(dim));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          auto at = [&](int64_t j) -> const T& { return p[(o * dim + j) * inner + i]; };
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            const int c = Compare(at(a), at(b));
            return largest_ ? c > 0 : c < 0;
          });
          for (int64_t j = 0; j < k; ++j) {
            const int64_t e = (o * k + j) * inner + i;
            v[e] = at(order[static_cast<size_t>(j)]);
            if (ix != nullptr) ix[e] = order[static_cast<size_t>(j)];
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  std::optional<int64_t> attr_k_;
  int64_t axis_;
  bool largest_;
};

// --- Unique ----------------------------------------------------------------------------------

class UniqueKernel final : public Kernel {
 public:
  UniqueKernel(std::optional<int64_t> axis, bool sorted) : axis_(axis), sorted_(sorted) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Unique"));
    const Tensor& x = ctx.input(0);
    int axis = 0;
    int64_t outer = 1, dim = x.num_elements(), inner = 1;
    if (axis_.has_value()) {
      if (x.rank() < 1) return OpError("Unique", "the input must have rank >= 1 with an axis");
      KILN_ASSIGN_OR_RETURN(axis, NormalizeAxis("Unique", *axis_, x.rank(), true));
      const std::span<const int64_t> d = x.shape().dims();
      outer = DimProduct(d, 0, static_cast<size_t>(axis));
      dim = x.dim(axis);
      inner = DimProduct(d, static_cast<size_t>(axis) + 1, d.size());
    }
    // Sort slice ids; group equal neighbours.
    std::vector<int64_t> order(static_cast<size_t>(dim));
    std::iota(order.begin(), order.end(), 0);
    std::vector<int64_t> group_of(static_cast<size_t>(dim));  // slice -> group (sorted order)
    std::vector<int64_t> first, counts;                       // per group
    KILN_RETURN_IF_ERROR(DispatchAll(x.dtype(), "Unique", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* p = x.data<const T>();
      auto cmp = [&](int64_t a, int64_t b) {
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const int c = Compare(p[(o * dim + a) * inner + i], p[(o * dim + b) * inner + i]);
            if (c != 0) return c;
          }
        }
        return 0;
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      for (size_t s = 0; s < order.size(); ++s) {
        if (s == 0 || cmp(order[s - 1], order[s]) != 0) {
          first.push_back(order[s]);
          counts.push_back(0);
        }
        group_of[static_cast<size_t>(order[s])] = static_cast<int64_t>(first.size()) - 1;
        ++counts.back();
      }
      return Status::OK();
    }));
    const int64_t n = static_cast<int64_t>(first.size());
    // Output position of each group: sorted order, or order of first occurrence.
    std::vector<int64_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), 0);
    if (!sorted_) {
      std::vector<int64_t> by_first(static_cast<size_t>(n));
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
        return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)];
      });
      for (int64_t j = 0; j < n; ++j)
        pos[static_cast<size_t>(by_first[static_cast<size_t>(j)])] = j;
    }
    std::vector<int64_t> dims{n};
    if (axis_.has_value()) {
      dims.assign(x.shape().dims().begin(), x.shape().dims().end());
      dims[static_cast<size_t>(axis)] = n;
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), Shape(dims)));
    for (int64_t g = 0; g < n; ++g) {
      const int64_t to = pos[static_cast<size_t>(g)], from = first[static_cast<size_t>(g)];
      for (int64_t o = 0; o < outer; ++o) {
        CopyElements(x, (o * dim + from) * inner, y, (o * n + to) * inner, inner);
      }
    }
    if (ctx.num_outputs() > 1) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ctx.AllocateOutput(1, DataType::kInt64, Shape{n}));
      for (int64_t g = 0; g < n; ++g) {
        t.data<int64_t>()[pos[static_cast<size_t>(g)]] = first[static_cast<size_t>(g)];
      }
    }
    if (ctx.num_outputs() > 2) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ctx.AllocateOutput(2, DataType::kInt64, Shape{dim}));
      for (int64_t s = 0; s < dim; ++s) {
        t.data<int64_t>()[s] = pos[static_cast<size_t>(group_of[static_cast<size_t>(s)])];
      }
    }
    if (ctx.num_outputs() > 3) {
      KILN_ASSIGN_OR_RETURN(Tensor t, ctx.AllocateOutput(3, DataType::kInt64, Shape{n}));
      for (int64_t g = 0; g < n; ++g) {
        t.data<int64_t>()[pos[static_cast<size_t>(g)]] = counts[static_cast<size_t>(g)];
      }
    }
    return Status::OK();
  }

 private:
  std::optional<int64_t> axis_;
  bool sorted_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateTopK(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("k", 10));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("largest", 11));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("sorted", 11));
  KILN_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", -1));
  KILN_ASSIGN_OR_RETURN(bool largest, attrs.Bool("largest", true));
  KILN_ASSIGN_OR_RETURN(bool sorted, attrs.Bool("sorted", true));
  (void)sorted;  // sorted output is a valid answer for sorted = 0
  std::optional<int64_t> k;
  if (info.opset() < 10) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
    if (!attrs.Has("k")) return OpError("TopK", "attribute 'k' is required before opset 10");
    KILN_ASSIGN_OR_RETURN(k, attrs.Int("k", 0));
  } else {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  }
  return std::make_unique<TopKKernel>(k, axis, largest);
}

Result<std::unique_ptr<Kernel>> CreateUnique(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  std::optional<int64_t> axis;
  if (attrs.Has("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, attrs.Int("axis", 0));
  }
  KILN_ASSIGN_OR_RETURN(bool sorted, attrs.Bool("sorted", true));
  return std::make_unique<UniqueKernel>(axis, sorted);
}

}  // namespace kiln::ref
