// SPDX-License-Identifier: Apache-2.0
// Reference Pad kernel (tensor op family): modes constant, reflect and edge, for every dtype.
// Opsets 7-10: `pads` and `value` attributes (opset 1's `paddings` is renamed by the importer's
// version adapter); 11+: pads (INT64) and an optional constant_value as inputs.
//
// NOTE on the approach: pads are [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] and may be
// negative (cropping). The kernel walks the output with an odometer; output coordinate c of dim
// d maps to input coordinate c - begin_d. In range: copy. Out of range: constant mode writes the
// fill value; edge clamps to [0, dim-1]; reflect mirrors without repeating the border element
// (numpy 'reflect'), folding repeatedly when the pad exceeds the dim (period 2 * (dim - 1)).
// Edge and reflect need a non-empty dim where they pad.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/tensor_family_util.h"

namespace kiln::ref {
namespace {

enum class PadMode { kConstant, kReflect, kEdge };

// Input coordinate for coordinate `i` (which may be outside [0, dim)), or -1 for "fill".
int64_t MapPadCoord(PadMode mode, int64_t i, int64_t dim) {
  if (i >= 0 && i < dim) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : dim - 1;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      int64_t m = i % period;
      if (m < 0) m += period;
      return m < dim ? m : period - m;
    }
  }
  return -1;
}

class PadKernel final : public Kernel {
 public:
  // `attr_pads` set: opset < 11 pads attribute (and `attr_value` the fill); unset: inputs.
  PadKernel(PadMode mode, std::optional<std::vector<int64_t>> attr_pads, float attr_value)
      : mode_(mode), attr_pads_(std::move(attr_pads)), attr_value_(attr_value) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, attr_pads_.has_value() ? 1 : 2, "Pad"));
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    std::vector<int64_t> pads;
    if (attr_pads_.has_value()) {
      pads = *attr_pads_;
    } else {
      KILN_ASSIGN_OR_RETURN(pads, ReadIntList(ctx.input(1), "Pad", "pads"));
    }
    if (pads.size() != 2 * static_cast<size_t>(rank)) {
      return OpError("Pad", "pads has {} entries, expected {} for an input of rank {}", pads.size(),
                     2 * rank, rank);
    }
    // The fill value as a one-element tensor of x's dtype (zero / empty string by default).
    KILN_ASSIGN_OR_RETURN(OwnedTensor fill, OwnedTensor::Allocate(x.dtype(), Shape{1}));
    if (attr_pads_.has_value()) {
      if (attr_value_ != 0) {
        KILN_RETURN_IF_ERROR(DispatchNumeric(x.dtype(), "Pad", [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          *fill.data<T>() = FromDouble<T>(attr_value_);
          return Status::OK();
        }));
      }
    } else if (ctx.has_input(2)) {
      KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, "Pad"));
      const Tensor& v = ctx.input(2);
      if (v.dtype() != x.dtype()) {
        return OpError("Pad", "constant_value has dtype {}, the input {}", DataTypeName(v.dtype()),
                       DataTypeName(x.dtype()));
      }
      if (v.num_elements() > 1) {
        return OpError("Pad", "constant_value must be a scalar, got shape {}",
                       v.shape().ToString());
      }
      if (v.num_elements() == 1) CopyElements(v, 0, fill.view(), 0, 1);
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
    }
    KILN_ASSIGN_OR_RETURN(Shape out, MakeShape("Pad", dims));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
    const int64_t total = out.NumElements();
    if (total == 0) return Status::OK();
    const DimArray in_strides = RowStrides(x.shape());
    WithMover(x, y, [&](auto from_x) {
      WithMover(fill.view(), y, [&](auto from_fill) {
        DimArray coord{};
        for (int64_t o = 0; o < total; ++o) {
          int64_t src = 0;
          for (int d = 0; d < rank && src >= 0; ++d) {
            const size_t du = static_cast<size_t>(d);
            const int64_t i = MapPadCoord(mode_, coord[du] - pads[du], x.dim(d));
            src = i < 0 ? -1 : src + i * in_strides[du];
          }
          if (src >= 0) {
            from_x(o, src);
          } else {
            from_fill(o, 0);
          }
          for (int d = rank - 1; d >= 0; --d) {
            const size_t du = static_cast<size_t>(d);
            if (++coord[du] < out.dim(d)) break;
            coord[du] = 0;
          }
        }
      });
    });
    return Status::OK();
  }

 private:
  PadMode mode_;
  std::optional<std::vector<int64_t>> attr_pads_;
  float attr_value_;
};

}  // namespace

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
  if (info.opset() >= 11) {
    KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
    KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("pads", 11));
    KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("value", 11));
    return std::make_unique<PadKernel>(mode, std::nullopt, 0.0f);
  }
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  if (!attrs.Has("pads")) {
    return OpError("Pad", "attribute 'pads' is required at opset {}", info.opset());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.Ints("pads"));
  KILN_ASSIGN_OR_RETURN(float value, attrs.Float("value", 0.0f));
  return std::make_unique<PadKernel>(mode, std::move(pads), value);
}

}  // namespace kiln::ref
