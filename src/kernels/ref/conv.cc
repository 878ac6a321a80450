// SPDX-License-Identifier: Apache-2.0
// Reference Conv: N-d spatial (1-D and up), groups (depthwise included), strides, dilations,
// explicit pads or auto_pad, optional bias; kernel_shape comes from W (the attribute, when
// given, must agree with W).
//
// NOTE on the approach: direct convolution, no im2col. For each output position the window taps
// that fall inside the input are listed once (spatial.h, CollectTaps: kernel index and input
// offset, so padding needs no branches in the inner loop), then reused for every batch item,
// output channel and input channel of the group. Sums are accumulated in double.
// Y[n, m, o] = B[m] + sum over c in group(m), taps t of X[n, c, t.offset] * W[m, c - c0, t.k].

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/spatial.h"

namespace kiln::ref {
namespace {

class ConvKernel final : public Kernel {
 public:
  ConvKernel(WindowAttrs window, int64_t group) : window_(std::move(window)), group_(group) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Conv"));
    const bool has_bias = ctx.has_input(2);
    if (has_bias) KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, "Conv"));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const Tensor& w = ctx.input(1);  // [M, C / group, k1..kn]
    if (x.rank() < 3) {
      return OpError("Conv", "X must have rank >= 3 ([N, C, spatial...]), got {}",
                     x.shape().ToString());
    }
    if (w.rank() != x.rank()) {
      return OpError("Conv", "W {} must have the same rank as X {}", w.shape().ToString(),
                     x.shape().ToString());
    }
    for (int i = 1; i < (has_bias ? 3 : 2); ++i) {
      if (ctx.input(i).dtype() != x.dtype()) {
        return OpError("Conv", "input {} has dtype {}, X has {}", i,
                       DataTypeName(ctx.input(i).dtype()), DataTypeName(x.dtype()));
      }
    }
    const int64_t batch = x.dim(0), channels = x.dim(1);
    const int64_t out_channels = w.dim(0), group_channels = w.dim(1);
    if (channels % group_ != 0 || channels / group_ != group_channels) {
      return OpError("Conv", "X {} has {} channels but W {} with group={} expects {} x {} channels",
                     x.shape().ToString(), channels, w.shape().ToString(), group_, group_,
                     group_channels);
    }
    if (out_channels % group_ != 0) {
      return OpError("Conv", "W {} has {} output channels, not divisible by group={}",
                     w.shape().ToString(), out_channels, group_);
    }
    if (has_bias) {
      const Tensor& b = ctx.input(2);
      if (b.rank() != 1 || b.dim(0) != out_channels) {
        return OpError("Conv", "B {} must be 1-D with {} elements (W's output channels)",
                       b.shape().ToString(), out_channels);
      }
    }
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    if (!window_.kernel_shape.empty() &&
        !std::equal(kernel.begin(), kernel.end(), window_.kernel_shape.begin(),
                    window_.kernel_shape.end())) {
      return OpError("Conv", "attribute 'kernel_shape' [{}] differs from W's spatial dims {}",
                     fmt::join(window_.kernel_shape, ","), w.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(WindowGeometry g,
                          ResolveWindow("Conv", window_, x.shape().dims().subspan(2), kernel));
    std::vector<int64_t> out_dims = {batch, out_channels};
    out_dims.insert(out_dims.end(), g.out.begin(), g.out.begin() + g.rank);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));

    return DispatchType<float, double>(x.dtype(), "Conv", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out));
      const T* px = x.data<const T>();
      const T* pw = w.data<const T>();
      const T* pb = has_bias ? ctx.input(2).data<const T>() : nullptr;
      T* py = y.data<T>();
      const int64_t m_per_group = out_channels / group_;
      Taps taps;
      ForEachWindow(g, [&](int64_t pos, const DimArray& coord) {
        CollectTaps(g, coord, taps);
        for (int64_t n = 0; n < batch; ++n) {
          for (int64_t grp = 0; grp < group_; ++grp) {
            for (int64_t mg = 0; mg < m_per_group; ++mg) {
              const int64_t m = grp * m_per_group + mg;
              double acc = pb != nullptr ? static_cast<double>(pb[m]) : 0.0;
              for (int64_t c = 0; c < group_channels; ++c) {
                const T* xc = px + (n * channels + grp * group_channels + c) * g.in_size;
                const T* wc = pw + (m * group_channels + c) * g.kernel_size;
                for (const auto& [k, offset] : taps) {
                  acc += static_cast<double>(xc[offset]) * static_cast<double>(wc[k]);
                }
              }
              py[(n * out_channels + m) * g.out_size + pos] = static_cast<T>(acc);
            }
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  WindowAttrs window_;
  int64_t group_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateConv(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t group, attrs.Int("group", 1));
  if (group < 1) return OpError("Conv", "attribute 'group' is {}, expected >= 1", group);
  KILN_ASSIGN_OR_RETURN(WindowAttrs window,
                        ReadWindowAttrs(attrs, /*kernel_shape_required=*/false));
  return std::make_unique<ConvKernel>(std::move(window), group);
}

}  // namespace kiln::ref
