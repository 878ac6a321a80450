// SPDX-License-Identifier: Apache-2.0
// FP32 elementwise kernels on the AVX2/scalar microkernels (elementwise_kernels.h): Add / Sub /
// Mul / Div with numpy broadcasting, the unary activations (Relu Sigmoid Tanh Erf Exp Clip
// LeakyRelu HardSigmoid HardSwish) and ai.kiln Gelu.
//
// NOTE on broadcasting. The output shape comes from ref::BroadcastShapes; each input gets element
// strides against it (0 where broadcast). Adjacent dims are merged while both inputs stay
// contiguous (or both broadcast) across them, so [N,C,H,W] + [C,1,1] becomes [N*C, H*W] with the
// bias a scalar per row. The innermost merged dim is then one microkernel call per row: both
// operands running (BinaryF32), or one of them constant along the row (BinaryScalarF32). Rows
// are split over threads with ParallelFor.

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_factories.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using ref::OpError;

constexpr int64_t kElementGrain = 1 << 14;  // elements per parallel chunk, at least

bool IsF32Cpu(const Tensor& t) {
  return t.dtype() == DataType::kFloat32 && t.device().is_cpu() && t.is_contiguous();
}

class BinaryKernel final : public Kernel {
 public:
  BinaryKernel(BinaryKind op, std::unique_ptr<Kernel> reference)
      : op_(op), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1) ||
        !IsF32Cpu(ctx.input(0)) || !IsF32Cpu(ctx.input(1))) {
      return reference_->Compute(ctx);
    }
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Result<Shape> out_or = ref::BroadcastShapes(OpName(), a.shape(), b.shape());
    if (!out_or.ok()) return reference_->Compute(ctx);
    const Shape out = *out_or;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const int64_t total = out.NumElements();
    if (total == 0) return Status::OK();
    const float* pa = a.data<const float>();
    const float* pb = b.data<const float>();
    float* py = y.data<float>();
    if (a.shape() == b.shape()) {
      ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
        BinaryF32(op_, pa + begin, pb + begin, py + begin, end - begin);
      });
      return Status::OK();
    }
    if (b.num_elements() == 1 || a.num_elements() == 1) {
      const bool scalar_first = b.num_elements() != 1;
      const float s = scalar_first ? pa[0] : pb[0];
      const float* v = scalar_first ? pb : pa;
      ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
        BinaryScalarF32(op_, v + begin, s, scalar_first, py + begin, end - begin);
      });
      return Status::OK();
    }
    // General broadcast: merge dims, then one microkernel call per row of the last merged dim.
    const ref::DimArray sa0 = ref::BroadcastStrides(a.shape(), out);
    const ref::DimArray sb0 = ref::BroadcastStrides(b.shape(), out);
    std::vector<int64_t> dims, sa, sb;
    for (int d = 0; d < out.rank(); ++d) {
      const size_t du = static_cast<size_t>(d);
      if (out.dim(d) == 1) continue;
      if (!dims.empty() && sa.back() == sa0[du] * out.dim(d) && sb.back() == sb0[du] * out.dim(d)) {
        dims.back() *= out.dim(d);
        sa.back() = sa0[du];
        sb.back() = sb0[du];
        continue;
      }
      dims.push_back(out.dim(d));
      sa.push_back(sa0[du]);
      sb.push_back(sb0[du]);
    }
    const int r = static_cast<int>(dims.size());
    const int64_t len = dims.back();
    const int64_t la = sa.back(), lb = sb.back();
    const int64_t rows = total / len;
    ParallelFor(rows, std::max<int64_t>(1, kElementGrain / len), [&](int64_t begin, int64_t end) {
      // Coordinates of row `begin` over dims [0, r-1).
      std::vector<int64_t> coord(static_cast<size_t>(std::max(r - 1, 0)), 0);
      int64_t rem = begin, oa = 0, ob = 0;
      for (int d = r - 2; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        coord[du] = rem % dims[du];
        rem /= dims[du];
        oa += coord[du] * sa[du];
        ob += coord[du] * sb[du];
      }
      for (int64_t row = begin; row < end; ++row) {
        float* yr = py + row * len;
        if (la == 1 && lb == 1) {
          BinaryF32(op_, pa + oa, pb + ob, yr, len);
        } else if (lb == 0 && la == 1) {
          BinaryScalarF32(op_, pa + oa, pb[ob], false, yr, len);
        } else if (la == 0 && lb == 1) {
          BinaryScalarF32(op_, pb + ob, pa[oa], true, yr, len);
        } else {
          for (int64_t i = 0; i < len; ++i) {
            const float x = pa[oa + i * la], z = pb[ob + i * lb];
            yr[i] = op_ == BinaryKind::kAdd   ? x + z
                    : op_ == BinaryKind::kSub ? x - z
                    : op_ == BinaryKind::kMul ? x * z
                                              : x / z;
          }
        }
        // Advance the odometer.
        for (int d = r - 2; d >= 0; --d) {
          const size_t du = static_cast<size_t>(d);
          oa += sa[du];
          ob += sb[du];
          if (++coord[du] < dims[du]) break;
          oa -= sa[du] * dims[du];
          ob -= sb[du] * dims[du];
          coord[du] = 0;
        }
      }
    });
    return Status::OK();
  }

 private:
  const char* OpName() const {
    switch (op_) {
      case BinaryKind::kAdd:
        return "Add";
      case BinaryKind::kSub:
        return "Sub";
      case BinaryKind::kMul:
        return "Mul";
      case BinaryKind::kDiv:
        return "Div";
    }
    return "?";
  }
  BinaryKind op_;
  std::unique_ptr<Kernel> reference_;
};

// y = act(x) for one FLOAT input; Clip (opset 11+) reads its bounds from inputs 1 and 2.
class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(Activation act, bool clip_bounds_are_inputs, std::unique_ptr<Kernel> reference)
      : act_(act),
        clip_bounds_are_inputs_(clip_bounds_are_inputs),
        reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() < 1 || !ctx.has_input(0) || !IsF32Cpu(ctx.input(0))) {
      return reference_ != nullptr ? reference_->Compute(ctx)
                                   : OpError("Gelu", "input 0 must be a FLOAT tensor");
    }
    Activation act = act_;
    if (clip_bounds_are_inputs_) {
      act.p0 = -std::numeric_limits<float>::infinity();
      act.p1 = std::numeric_limits<float>::infinity();
      for (int i = 1; i < 3 && i < ctx.num_inputs(); ++i) {
        if (!ctx.has_input(i)) continue;
        const Tensor& t = ctx.input(i);
        if (!IsF32Cpu(t) || t.num_elements() != 1 || t.rank() > 1) {
          return reference_->Compute(ctx);  // the reference reports it
        }
        (i == 1 ? act.p0 : act.p1) = t.data<const float>()[0];
      }
    }
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, x.shape()));
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    ParallelFor(x.num_elements(), kElementGrain, [&](int64_t begin, int64_t end) {
      ActivationF32(act, px + begin, py + begin, end - begin);
    });
    return Status::OK();
  }

 private:
  Activation act_;
  bool clip_bounds_are_inputs_;
  std::unique_ptr<Kernel> reference_;  // null for ai.kiln Gelu
};

template <BinaryKind kOp>
Result<std::unique_ptr<Kernel>> MakeBinary(
    const KernelInfo& info, Result<std::unique_ptr<Kernel>> (*ref_factory)(const KernelInfo&)) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref_factory(info));
  return std::make_unique<BinaryKernel>(kOp, std::move(reference));
}

Result<std::unique_ptr<Kernel>> MakeUnary(
    const KernelInfo& info, Activation act,
    Result<std::unique_ptr<Kernel>> (*ref_factory)(const KernelInfo&)) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref_factory(info));
  return std::make_unique<UnaryKernel>(act, false, std::move(reference));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateAdd(const KernelInfo& info) {
  return MakeBinary<BinaryKind::kAdd>(info, &ref::CreateAdd);
}
Result<std::unique_ptr<Kernel>> CreateSub(const KernelInfo& info) {
  return MakeBinary<BinaryKind::kSub>(info, &ref::CreateSub);
}
Result<std::unique_ptr<Kernel>> CreateMul(const KernelInfo& info) {
  return MakeBinary<BinaryKind::kMul>(info, &ref::CreateMul);
}
Result<std::unique_ptr<Kernel>> CreateDiv(const KernelInfo& info) {
  return MakeBinary<BinaryKind::kDiv>(info, &ref::CreateDiv);
}

Result<std::unique_ptr<Kernel>> CreateRelu(const KernelInfo& info) {
  return MakeUnary(info, {ActivationKind::kRelu}, &ref::CreateRelu);
}
Result<std::unique_ptr<Kernel>> CreateSigmoid(const KernelInfo& info) {
  return MakeUnary(info, {ActivationKind::kSigmoid}, &ref::CreateSigmoid);
}
Result<std::unique_ptr<Kernel>> CreateTanh(const KernelInfo& info) {
  return MakeUnary(info, {ActivationKind::kTanh}, &ref::CreateTanh);
}
Result<std::unique_ptr<Kernel>> CreateErf(const KernelInfo& info) {
  return MakeUnary(info, {ActivationKind::kErf}, &ref::CreateErf);
}
Result<std::unique_ptr<Kernel>> CreateExp(const KernelInfo& info) {
  return MakeUnary(info, {ActivationKind::kExp}, &ref::CreateExp);
}
Result<std::unique_ptr<Kernel>> CreateHardSwish(const KernelInfo& info) {
  return MakeUnary(info, {ActivationKind::kHardSwish}, &ref::CreateHardSwish);
}
Result<std::unique_ptr<Kernel>> CreateLeakyRelu(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(float alpha, ref::AttrReader(info).Float("alpha", 0.01f));
  return MakeUnary(info, {ActivationKind::kLeakyRelu, alpha}, &ref::CreateLeakyRelu);
}
Result<std::unique_ptr<Kernel>> CreateHardSigmoid(const KernelInfo& info) {
  ref::AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(float alpha, attrs.Float("alpha", 0.2f));
  KILN_ASSIGN_OR_RETURN(float beta, attrs.Float("beta", 0.5f));
  return MakeUnary(info, {ActivationKind::kHardSigmoid, alpha, beta}, &ref::CreateHardSigmoid);
}
Result<std::unique_ptr<Kernel>> CreateClip(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateClip(info));
  Activation act{ActivationKind::kClip, -std::numeric_limits<float>::max(),
                 std::numeric_limits<float>::max()};
  const bool inputs = info.opset() >= 11;
  if (!inputs) {
    ref::AttrReader attrs(info);
    KILN_ASSIGN_OR_RETURN(act.p0, attrs.Float("min", -std::numeric_limits<float>::max()));
    KILN_ASSIGN_OR_RETURN(act.p1, attrs.Float("max", std::numeric_limits<float>::max()));
  }
  return std::make_unique<UnaryKernel>(act, inputs, std::move(reference));
}

Result<std::unique_ptr<Kernel>> CreateGelu(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 1));
  Result<std::string> approximate_or = ref::AttrReader(info).String("approximate", "none");
  if (!approximate_or.ok()) return approximate_or.status();
  const std::string& approximate = *approximate_or;
  Activation act;
  if (approximate == "none") {
    act.kind = ActivationKind::kGelu;
  } else if (approximate == "tanh") {
    act.kind = ActivationKind::kGeluTanh;
  } else {
    return OpError("ai.kiln.Gelu", "attribute 'approximate' must be \"none\" or \"tanh\", got '{}'",
                   approximate);
  }
  return std::make_unique<UnaryKernel>(act, false, nullptr);
}

}  // namespace kiln::cpu
