// SPDX-License-Identifier: Apache-2.0
// Reference pooling: MaxPool (with the optional Indices output), AveragePool and
// GlobalAveragePool, N-d spatial.
//
// NOTE on the approach: as for Conv, the in-input taps of each output window are listed once
// (spatial.h) and reused for every (batch, channel) plane. Padding never takes part in a max.
// MaxPool keeps the first maximum in row-major window order; its Indices are flat offsets into
// X (including the batch and channel planes), row-major (storage_order=0) or column-major over
// the spatial dims (storage_order=1). AveragePool divides by the number of in-input taps, or with
// count_include_pad=1 by the taps inside the explicitly padded input (never the part added by
// ceil_mode). Sums are accumulated in double. A window with no tap to take a max or an average of
// (possible only with pads or dilations larger than the input) is INVALID_ARGUMENT.

#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"

namespace kiln::ref {
namespace {

enum class PoolKind { kMax, kAverage };

// Column-major flat index over the spatial dims of the row-major offset `offset`.
int64_t ColumnMajor(const WindowGeometry& g, int64_t offset) {
  DimArray coord{};
  for (int d = g.rank - 1; d >= 0; --d) {
    const size_t du = static_cast<size_t>(d);
    coord[du] = offset % g.in[du];
    offset /= g.in[du];
  }
  int64_t index = 0, stride = 1;
  for (int d = 0; d < g.rank; ++d) {
    const size_t du = static_cast<size_t>(d);
    index += coord[du] * stride;
    stride *= g.in[du];
  }
  return index;
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(std::string op, PoolKind kind, WindowAttrs window, bool count_include_pad,
             bool column_major, bool want_indices)
      : op_(std::move(op)),
        kind_(kind),
        window_(std::move(window)),
        count_include_pad_(count_include_pad),
        column_major_(column_major),
        want_indices_(want_indices) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const size_t spatial = window_.kernel_shape.size();
    if (x.rank() != static_cast<int>(spatial) + 2) {
      return OpError(op_,
                     "kernel_shape has {} dims, so X must have rank {} ([N, C, spatial...]), "
                     "got {}",
                     spatial, spatial + 2, x.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(WindowGeometry g, ResolveWindow(op_, window_, x.shape().dims().subspan(2),
                                                          window_.kernel_shape));
    std::vector<int64_t> out_dims = {x.dim(0), x.dim(1)};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    const int64_t planes = x.dim(0) * x.dim(1);

    // Integer dtypes (MaxPool-12's int8 / uint8) only reach the kMax branch; the registry
    // never routes them to AveragePool.
    return DispatchType<float, double, int8_t, uint8_t>(x.dtype(), op_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
      int64_t* pi = nullptr;
      if (want_indices_ && ctx.num_outputs() > 1) {
        KILN_ASSIGN_OR_RETURN(Tensor indices, ctx.AllocateOutput(1, DataType::kInt64, out));
        pi = indices.data<int64_t>();
      }
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      Taps taps;
      Status status;
      ForEachWindow(g, [&](int64_t pos, const DimArray& coord) {
        if (!status.ok()) return;
        CollectTaps(g, coord, taps);
        const int64_t divisor = kind_ == PoolKind::kMax ? 1
                                : count_include_pad_    ? CountPaddedTaps(g, coord)
                                                        : static_cast<int64_t>(taps.size());
        if (divisor == 0 || (kind_ == PoolKind::kMax && taps.empty())) {
          status = OpError(op_,
                           "the window at output position {} covers no input element "
                           "(pads or dilations too large for input {})",
                           pos, x.shape().ToString());
          return;
        }
        for (int64_t p = 0; p < planes; ++p) {
          const T* xp = px + p * g.in_size;
          const int64_t o = p * g.out_size + pos;
          if (kind_ == PoolKind::kMax) {
            int64_t best = taps.front().second;
            for (const auto& tap : taps) {
              if (xp[tap.second] > xp[best]) best = tap.second;
            }
            py[o] = xp[best];
            if (pi != nullptr) {
              pi[o] = p * g.in_size + (column_major_ ? ColumnMajor(g, best) : best);
            }
          } else {
            double sum = 0;
            for (const auto& tap : taps) sum += static_cast<double>(xp[tap.second]);
            py[o] = static_cast<T>(sum / static_cast<double>(divisor));
          }
        }
      });
      return status;
    });
  }

 private:
  std::string op_;
  PoolKind kind_;
  WindowAttrs window_;
  bool count_include_pad_;
  bool column_major_;
  bool want_indices_;
};

class GlobalAveragePoolKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "GlobalAveragePool"));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3) {
      return OpError("GlobalAveragePool", "X must have rank >= 3 ([N, C, spatial...]), got {}",
                     x.shape().ToString());
    }
    const int64_t spatial = DimProduct(x.shape().dims(), 2, static_cast<size_t>(x.rank()));
    const int64_t planes = x.dim(0) * x.dim(1);
    if (spatial == 0 && planes > 0) {
      return OpError("GlobalAveragePool", "X {} has no spatial elements to average",
                     x.shape().ToString());
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(x.rank()), 1);
    out_dims[0] = x.dim(0);
    out_dims[1] = x.dim(1);
    return DispatchType<float, double>(x.dtype(), "GlobalAveragePool", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), Shape(out_dims)));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t p = 0; p < planes; ++p) {
        double sum = 0;
        for (int64_t i = 0; i < spatial; ++i) sum += static_cast<double>(px[p * spatial + i]);
        py[p] = static_cast<T>(sum / static_cast<double>(spatial));
      }
      return Status::OK();
    });
  }
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateMaxPool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("storage_order", 8));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("dilations", 10));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("ceil_mode", 10));
  if (info.opset() < 8) {
    KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "MaxPool has the Indices output from opset 8"));
  } else {
    KILN_RETURN_IF_ERROR(LimitOutputs(info, 2, "MaxPool has at most two outputs"));
  }
  KILN_ASSIGN_OR_RETURN(WindowAttrs window, ReadWindowAttrs(attrs, true));
  KILN_ASSIGN_OR_RETURN(window.ceil_mode, attrs.Bool("ceil_mode", false));
  KILN_ASSIGN_OR_RETURN(bool column_major, attrs.Bool("storage_order", false));
  const bool want_indices = info.has_output(1);
  return std::make_unique<PoolKernel>("MaxPool", PoolKind::kMax, std::move(window), false,
                                      column_major, want_indices);
}

Result<std::unique_ptr<Kernel>> CreateAveragePool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "AveragePool has one output"));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("ceil_mode", 10));
  KILN_RETURN_IF_ERROR(attrs.RequireOpset("dilations", 19));
  KILN_ASSIGN_OR_RETURN(WindowAttrs window, ReadWindowAttrs(attrs, true));
  KILN_ASSIGN_OR_RETURN(window.ceil_mode, attrs.Bool("ceil_mode", false));
  KILN_ASSIGN_OR_RETURN(bool count_include_pad, attrs.Bool("count_include_pad", false));
  return std::make_unique<PoolKernel>("AveragePool", PoolKind::kAverage, std::move(window),
                                      count_include_pad, false, false);
}

Result<std::unique_ptr<Kernel>> CreateGlobalAveragePool(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<GlobalAveragePoolKernel>();
}

}  // namespace kiln::ref
