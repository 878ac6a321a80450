// SPDX-License-Identifier: Apache-2.0
// Reference ConvTranspose: N-d spatial (1-D and up), groups, strides, dilations, explicit pads or
// auto_pad, output_padding and output_shape, optional bias; kernel_shape comes from W (the
// attribute, when given, must agree with W).
//
// NOTE on the approach: a direct scatter. Per spatial axis, with extent = (k - 1) * d + 1 and
// full = s * (in - 1) + output_padding + extent (the size before cropping):
//   output_shape given:  out = output_shape; total = full - out;
//   SAME_UPPER/LOWER:    out = in * s;        total = full - out;
//   otherwise:           pads as given (VALID: 0), out = full - pad_begin - pad_end.
// A `total` is split with the odd pixel at the end for SAME_UPPER and at the beginning otherwise
// (the ONNX 1.12 schema text; the test data agrees); a negative total (the requested output is
// larger than `full`) becomes extra rows at the end that only receive the bias.
// Each input element then adds X[n, c, i] * W[c, m', k] to Y[n, g * M/group + m', i * s + k * d
// - pad_begin] for every kernel tap landing inside the output; the (kernel, output offset) taps
// of each input position are listed once and reused for every batch item and channel. Sums are
// accumulated in double and start at the bias.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/nn_common.h"
#include "kernels/ref/spatial.h"

namespace kiln::ref {
namespace {

constexpr const char* kOp = "ConvTranspose";

class ConvTransposeKernel final : public Kernel {
 public:
  ConvTransposeKernel(WindowAttrs window, int64_t group, std::vector<int64_t> output_padding,
                      std::vector<int64_t> output_shape)
      : window_(std::move(window)),
        group_(group),
        output_padding_(std::move(output_padding)),
        output_shape_(std::move(output_shape)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, kOp));
    const bool has_bias = ctx.has_input(2);
    if (has_bias) KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, kOp));
    const Tensor& x = ctx.input(0);  // [N, C, D1..Dn]
    const Tensor& w = ctx.input(1);  // [C, M / group, k1..kn]
    if (x.rank() < 3) {
      return OpError(kOp, "X must have rank >= 3 ([N, C, spatial...]), got {}",
                     x.shape().ToString());
    }
    if (w.rank() != x.rank()) {
      return OpError(kOp, "W {} must have the same rank as X {}", w.shape().ToString(),
                     x.shape().ToString());
    }
    for (int i = 1; i < (has_bias ? 3 : 2); ++i) {
      if (ctx.input(i).dtype() != x.dtype()) {
        return OpError(kOp, "input {} has dtype {}, X has {}", i,
                       DataTypeName(ctx.input(i).dtype()), DataTypeName(x.dtype()));
      }
    }
    const int64_t batch = x.dim(0), channels = x.dim(1);
    if (w.dim(0) != channels || channels % group_ != 0) {
      return OpError(kOp, "W {} must have X's {} input channels first, divisible by group={}",
                     w.shape().ToString(), channels, group_);
    }
    const int64_t m_per_group = w.dim(1), c_per_group = channels / group_;
    int64_t out_channels = 0;
    if (__builtin_mul_overflow(m_per_group, group_, &out_channels)) {
      return OpError(kOp, "the output channel count overflows");
    }
    if (has_bias) {
      const Tensor& b = ctx.input(2);
      if (b.rank() != 1 || b.dim(0) != out_channels) {
        return OpError(kOp, "B {} must be 1-D with {} elements (the output channels)",
                       b.shape().ToString(), out_channels);
      }
    }
    const size_t rank = static_cast<size_t>(x.rank() - 2);
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    if (!window_.kernel_shape.empty() &&
        !std::equal(kernel.begin(), kernel.end(), window_.kernel_shape.begin(),
                    window_.kernel_shape.end())) {
      return OpError(kOp, "attribute 'kernel_shape' [{}] differs from W's spatial dims {}",
                     fmt::join(window_.kernel_shape, ","), w.shape().ToString());
    }
    auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* name) {
      return v.empty() || v.size() == want
                 ? Status::OK()
                 : OpError(kOp, "attribute '{}' has {} values, expected {} for X {}", name,
                           v.size(), want, x.shape().ToString());
    };
    KILN_RETURN_IF_ERROR(check_len(window_.strides, rank, "strides"));
    KILN_RETURN_IF_ERROR(check_len(window_.dilations, rank, "dilations"));
    KILN_RETURN_IF_ERROR(check_len(window_.pads, 2 * rank, "pads"));
    KILN_RETURN_IF_ERROR(check_len(output_padding_, rank, "output_padding"));
    // output_shape may list the spatial dims only or the whole output.
    std::span<const int64_t> requested(output_shape_);
    if (requested.size() == rank + 2) requested = requested.subspan(2);
    KILN_RETURN_IF_ERROR(
        check_len(std::vector<int64_t>(requested.begin(), requested.end()), rank, "output_shape"));

    DimArray in{}, k{}, stride{}, dil{}, pad_begin{}, out{};
    std::vector<int64_t> out_dims = {batch, out_channels};
    int64_t in_size = 1, k_size = 1, out_size = 1;
    for (size_t d = 0; d < rank; ++d) {
      in[d] = x.dim(static_cast<int>(d) + 2);
      k[d] = kernel[d];
      stride[d] = window_.strides.empty() ? 1 : window_.strides[d];
      dil[d] = window_.dilations.empty() ? 1 : window_.dilations[d];
      const int64_t adj = output_padding_.empty() ? 0 : output_padding_[d];
      if (adj >= std::max(stride[d], dil[d])) {
        return OpError(kOp, "output_padding {} must be smaller than the stride or the dilation",
                       adj);
      }
      if (in[d] < 1) return OpError(kOp, "X {} has an empty spatial dim", x.shape().ToString());
      // full = s * (in - 1) + adj + (k - 1) * dil + 1; all factors <= 2^31 but `in`.
      int64_t full = 0, ext = 0;
      if (__builtin_mul_overflow(stride[d], in[d] - 1, &full) ||
          __builtin_mul_overflow(k[d] - 1, dil[d], &ext) ||
          __builtin_add_overflow(full, ext + 1 + adj, &full)) {
        return OpError(kOp, "the output size overflows on spatial axis {}", d);
      }
      int64_t pb = window_.pads.empty() ? 0 : window_.pads[d];
      int64_t pe = window_.pads.empty() ? 0 : window_.pads[d + rank];
      int64_t o = 0;
      const bool same =
          window_.auto_pad == AutoPad::kSameUpper || window_.auto_pad == AutoPad::kSameLower;
      if (!requested.empty() || same) {
        if (!requested.empty()) {
          o = requested[d];
        } else if (__builtin_mul_overflow(in[d], stride[d], &o)) {
          return OpError(kOp, "the output size overflows on spatial axis {}", d);
        }
        if (o < 0) return OpError(kOp, "output_shape has a negative dim {}", o);
        const int64_t total = full - o;
        if (total < 0) {
          pb = 0;
          pe = total;
        } else if (window_.auto_pad == AutoPad::kSameUpper) {
          pb = total / 2;
          pe = total - pb;
        } else {
          pe = total / 2;
          pb = total - pe;
        }
      } else {
        if (window_.auto_pad == AutoPad::kValid) pb = pe = 0;
        o = full - pb - pe;
        if (o < 0) {
          return OpError(kOp, "pads {} + {} exceed the full output size {} on spatial axis {}", pb,
                         pe, full, d);
        }
      }
      pad_begin[d] = pb;
      out[d] = o;
      out_dims.push_back(o);
      in_size *= in[d];
      k_size *= k[d];
    }
    KILN_ASSIGN_OR_RETURN(Shape out_shape, Shape::Create(out_dims));
    for (size_t d = 0; d < rank; ++d) out_size *= out[d];

    // taps[i] = (kernel flat index, output flat offset) of input position i.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> taps(static_cast<size_t>(in_size));
    DimArray ic{};
    for (int64_t i = 0; i < in_size; ++i) {
      DimArray kc{};
      for (int64_t kf = 0; kf < k_size; ++kf) {
        int64_t offset = 0;
        bool inside = true;
        for (size_t d = 0; d < rank && inside; ++d) {
          const int64_t c = ic[d] * stride[d] + kc[d] * dil[d] - pad_begin[d];
          inside = c >= 0 && c < out[d];
          offset = offset * out[d] + c;
        }
        if (inside) taps[static_cast<size_t>(i)].emplace_back(kf, offset);
        for (size_t d = rank; d-- > 0;) {
          if (++kc[d] < k[d]) break;
          kc[d] = 0;
        }
      }
      for (size_t d = rank; d-- > 0;) {
        if (++ic[d] < in[d]) break;
        ic[d] = 0;
      }
    }

    return DispatchType<KILN_NN_FLOAT_TYPES>(x.dtype(), kOp, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), out_shape));
      const T* px = x.data<const T>();
      const T* pw = w.data<const T>();
      const T* pb = has_bias ? ctx.input(2).data<const T>() : nullptr;
      T* py = y.data<T>();
      std::vector<double> acc(static_cast<size_t>(out_size));
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t m = 0; m < out_channels; ++m) {
          const int64_t g = m / m_per_group, mg = m % m_per_group;
          std::fill(acc.begin(), acc.end(), pb != nullptr ? ToDouble(pb[m]) : 0.0);
          for (int64_t cg = 0; cg < c_per_group; ++cg) {
            const int64_t c = g * c_per_group + cg;
            const T* xc = px + (n * channels + c) * in_size;
            const T* wc = pw + (c * m_per_group + mg) * k_size;
            for (int64_t i = 0; i < in_size; ++i) {
              const double xv = ToDouble(xc[i]);
              for (const auto& [kf, offset] : taps[static_cast<size_t>(i)]) {
                acc[static_cast<size_t>(offset)] += xv * ToDouble(wc[kf]);
              }
            }
          }
          T* ym = py + (n * out_channels + m) * out_size;
          for (int64_t o = 0; o < out_size; ++o) ym[o] = FromDouble<T>(acc[static_cast<size_t>(o)]);
        }
      }
      return Status::OK();
    });
  }

 private:
  WindowAttrs window_;
  int64_t group_;
  std::vector<int64_t> output_padding_;
  std::vector<int64_t> output_shape_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateConvTranspose(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(LimitOutputs(info, 1, "ConvTranspose has one output"));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(int64_t group, attrs.Int("group", 1));
  if (group < 1) return OpError(kOp, "attribute 'group' is {}, expected >= 1", group);
  KILN_ASSIGN_OR_RETURN(WindowAttrs window,
                        ReadWindowAttrs(attrs, /*kernel_shape_required=*/false));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, attrs.Ints("output_padding"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, attrs.Ints("output_shape"));
  for (int64_t v : output_padding) {
    if (v < 0 || v > (int64_t{1} << 31)) {
      return OpError(kOp, "attribute 'output_padding' has value {}, expected 0 <= value <= 2^31",
                     v);
    }
  }
  for (int64_t v : output_shape) {
    if (v < 0) return OpError(kOp, "attribute 'output_shape' has a negative value {}", v);
  }
  return std::make_unique<ConvTransposeKernel>(std::move(window), group, std::move(output_padding),
                                               std::move(output_shape));
}

}  // namespace kiln::ref
