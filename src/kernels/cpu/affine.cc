// SPDX-License-Identifier: Apache-2.0
// ai.kiln ChannelAffine (op/kiln_ops.h): Y = act(X * Scale[c] + Bias[c]), one pass over X.
//
// NOTE on the approach. The op is an inference BatchNormalization (and the activation after it)
// on a tensor that no convolution precedes, above all DenseNet's BN -> ReLU before each of its
// convolutions, where it ran as three full passes (a broadcast Mul, a broadcast Add, a Relu)
// over a concatenation that grows layer by layer. Here each (image, channel slot) is one job:
// plain X, slot c is a row of H*W values with one scale and one shift; blocked X, slot cb is
// H*W groups of b lanes with b scales and b shifts (LanesAffineF32, AVX2 where available, ReLU
// in the same pass); another activation runs on the job's output while it is in cache
// (ApplyActivationInPlace). Padding lanes of a blocked Y are written as zeros. Jobs go to the team
// in runs of at least 32 KB. Other dtypes, shapes the op does not describe, and non-contiguous
// tensors run on the reference kernel, which reports the errors.

#include <algorithm>
#include <memory>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

bool IsF32(const Tensor& t) {
  return t.dtype() == DataType::kFloat32 && t.device().is_cpu() && t.is_contiguous();
}

class ChannelAffineKernel final : public Kernel {
 public:
  ChannelAffineKernel(int64_t block, Activation act, std::unique_ptr<Kernel> reference)
      : block_(block), act_(act), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    if (!IsF32(x) || !IsF32(scale) || !IsF32(bias) || scale.rank() != 1 ||
        bias.shape() != scale.shape() || x.num_elements() == 0) {
      return reference_->Compute(ctx);
    }
    const int64_t c = scale.dim(0);
    const int64_t b = block_;
    const bool layout_ok =
        b > 0 ? x.rank() >= 3 && x.dim(1) == (c + b - 1) / b && x.dim(x.rank() - 1) == b
              : x.rank() >= 2 && x.dim(1) == c;
    if (!layout_ok) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, x.shape()));
    const float* px = x.data<const float>();
    const float* ps = scale.data<const float>();
    const float* pb = bias.data<const float>();
    float* py = y.data<float>();
    const int64_t slots = x.dim(1);
    const int64_t jobs = x.dim(0) * slots;
    const int64_t inner = x.num_elements() / jobs;  // per job: spatial (x b lanes when blocked)
    const int64_t grain = std::max<int64_t>(1, 8192 / inner);
    // ReLU is applied in the affine pass itself; other activations in a second pass over the
    // job's output while it is in cache.
    const bool relu = act_.kind == ActivationKind::kRelu;
    ParallelFor(jobs, grain, [&](int64_t begin, int64_t end) {
      float lane_scale[64], lane_bias[64];
      for (int64_t j = begin; j < end; ++j) {
        const int64_t slot = j % slots;
        const float* src = px + j * inner;
        float* dst = py + j * inner;
        // A plain row is groups of 8 lanes of one scale and shift (and its tail); a blocked
        // slot is groups of b lanes, one scale and shift per lane.
        const int64_t lanes = b == 0 ? 8 : b;
        for (int64_t l = 0; l < lanes; ++l) {
          const int64_t ch = b == 0 ? slot : slot * b + l;
          lane_scale[l] = ch < c ? ps[ch] : 0.0f;
          lane_bias[l] = ch < c ? pb[ch] : 0.0f;
        }
        const int64_t groups = inner / lanes;
        LanesAffineF32(src, lane_scale, lane_bias, relu, dst, groups, lanes);
        for (int64_t k = groups * lanes; k < inner; ++k) {  // a plain row's tail
          const float v = src[k] * lane_scale[0] + lane_bias[0];
          dst[k] = relu ? std::max(v, 0.0f) : v;
        }
        if (!relu) ApplyActivationInPlace(act_, dst, inner);
        if (b > 0 && (slot + 1) * b > c) {  // the last slot's padding lanes: zeros
          for (int64_t p = 0; p < inner; p += b) {
            std::fill(dst + p + (c - slot * b), dst + p + b, 0.0f);
          }
        }
      }
    });
    return Status::OK();
  }

 private:
  int64_t block_;
  Activation act_;
  std::unique_ptr<Kernel> reference_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateChannelAffine(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateKilnChannelAffine(info));
  KILN_ASSIGN_OR_RETURN(int64_t block, ref::AttrReader(info).Int(kAttrBlock, 0));
  KILN_ASSIGN_OR_RETURN(Activation act, ReadActivation(info));
  if (block < 0 || block > 64) block = 0;  // the reference refused anything else already
  return std::unique_ptr<Kernel>(
      std::make_unique<ChannelAffineKernel>(block, act, std::move(reference)));
}

}  // namespace kiln::cpu
