// SPDX-License-Identifier: Apache-2.0
// FP32 elementwise kernels on the AVX2/scalar microkernels (elementwise_kernels.h): Add / Sub /
// Mul / Div / Pow with numpy broadcasting, variadic Max / Min, the comparisons Equal / Less /
// Greater / LessOrEqual / GreaterOrEqual (BOOL out), the unary math ops (Neg Abs Sqrt Reciprocal
// Floor Ceil Round Sign Log Softplus), the unary activations (Relu Sigmoid Tanh Erf Exp Clip
// LeakyRelu HardSigmoid HardSwish) and ai.kiln Gelu; Not and And on BOOL.
//
// NOTE on broadcasting. The output shape comes from ref::BroadcastShapes; each input gets element
// strides against it (0 where broadcast). Adjacent dims are merged while both inputs stay
// contiguous (or both broadcast) across them, so [N,C,H,W] + [C,1,1] becomes [N*C, H*W] with the
// bias a scalar per row. The innermost merged dim is then one microkernel call per row: both
// operands running (BinaryF32), or one of them constant along the row (BinaryScalarF32). Rows
// are split over threads with ParallelFor. The comparisons and And walk the same rows.
//
// NOTE on Pow. A single-valued exponent (the x ** 2 of LayerNorm decompositions, x ** 0.5,
// x ** 3 of tanh-GELU, x ** -1) is read once per call and the whole tensor goes through
// PowScalarExpF32, whose common exponents are exact; a tensor exponent broadcasts like the
// other binary ops. Numerics are the microkernels' (elementwise_kernels.h). Max and Min fold
// their inputs left to right into the output, each step a broadcasting binary op.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
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

// The merged-dims layout of two operands broadcast to `out` (see the NOTE on broadcasting):
// rows of `len` output elements; along a row the operands advance by `la` / `lb` (1, or 0 when
// broadcast); `dims`, `sa`, `sb` are the outer merged dims and the operands' element strides.
struct RowPlan {
  std::vector<int64_t> dims, sa, sb;
  int64_t len = 1, la = 0, lb = 0, rows = 0;
};

RowPlan PlanRows(const Shape& a, const Shape& b, const Shape& out) {
  const ref::DimArray sa0 = ref::BroadcastStrides(a, out);
  const ref::DimArray sb0 = ref::BroadcastStrides(b, out);
  RowPlan p;
  for (int d = 0; d < out.rank(); ++d) {
    const size_t du = static_cast<size_t>(d);
    if (out.dim(d) == 1) continue;
    if (!p.dims.empty() && p.sa.back() == sa0[du] * out.dim(d) &&
        p.sb.back() == sb0[du] * out.dim(d)) {
      p.dims.back() *= out.dim(d);
      p.sa.back() = sa0[du];
      p.sb.back() = sb0[du];
      continue;
    }
    p.dims.push_back(out.dim(d));
    p.sa.push_back(sa0[du]);
    p.sb.push_back(sb0[du]);
  }
  if (p.dims.empty()) {  // a single element
    p.dims = {1};
    p.sa = {0};
    p.sb = {0};
  }
  p.len = p.dims.back();
  p.la = p.sa.back();
  p.lb = p.sb.back();
  p.dims.pop_back();
  p.sa.pop_back();
  p.sb.pop_back();
  p.rows = out.NumElements() / p.len;
  return p;
}

// Calls row(r, oa, ob) for the rows [begin, end) of `p`: output elements [r * len, (r+1) * len)
// read the operands from element offsets oa and ob.
template <typename F>
void ForEachRow(const RowPlan& p, int64_t begin, int64_t end, F&& row) {
  const size_t r = p.dims.size();
  std::vector<int64_t> coord(r, 0);
  int64_t rem = begin, oa = 0, ob = 0;
  for (size_t d = r; d-- > 0;) {
    coord[d] = rem % p.dims[d];
    rem /= p.dims[d];
    oa += coord[d] * p.sa[d];
    ob += coord[d] * p.sb[d];
  }
  for (int64_t i = begin; i < end; ++i) {
    row(i, oa, ob);
    for (size_t d = r; d-- > 0;) {  // advance the odometer
      oa += p.sa[d];
      ob += p.sb[d];
      if (++coord[d] < p.dims[d]) break;
      oa -= p.sa[d] * p.dims[d];
      ob -= p.sb[d] * p.dims[d];
      coord[d] = 0;
    }
  }
}

// Rows of at most this many elements are batched into LanesBinaryF32 calls (BroadcastBinary).
constexpr int64_t kShortRow = 64;

// y = a op b, a [sa] and b [sb] broadcast to `out` (which y has, contiguous). y may be a when a
// has the shape `out` (in place).
void BroadcastBinary(BinaryKind op, const float* pa, const Shape& sa, const float* pb,
                     const Shape& sb, float* py, const Shape& out) {
  const int64_t total = out.NumElements();
  if (total == 0) return;
  const int64_t na = sa.NumElements(), nb = sb.NumElements();
  if (na == total && nb == total) {  // same shape (or the same elements in other unit dims)
    ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
      BinaryF32(op, pa + begin, pb + begin, py + begin, end - begin);
    });
    return;
  }
  if ((nb == 1 && na == total) || (na == 1 && nb == total)) {
    const bool scalar_first = nb != 1;
    const float s = scalar_first ? pa[0] : pb[0];
    const float* v = scalar_first ? pb : pa;
    ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
      BinaryScalarF32(op, v + begin, s, scalar_first, py + begin, end - begin);
    });
    return;
  }
  // General broadcast: one microkernel call per row of the last merged dim.
  const RowPlan p = PlanRows(sa, sb, out);
  const int64_t len = p.len;
  if (p.la == 1 && p.lb == 1 && len <= kShortRow) {
    // Short rows (a blocked tensor times its per-channel lanes, [N, C/b, H*W, b] * [N, C/b, 1,
    // b]): consecutive rows where one operand stays and the other advances are one
    // LanesBinaryF32 call, not one call per row of b elements.
    ParallelFor(p.rows, std::max<int64_t>(1, kElementGrain / len), [&](int64_t begin, int64_t end) {
      int64_t start = 0, count = 0, a0 = 0, b0 = 0;
      int kind = 0;  // 0: one row so far, 1: b stays (a advances), 2: a stays
      const auto flush = [&] {
        if (count == 0) return;
        if (kind == 2) {
          LanesBinaryF32(op, pb + b0, pa + a0, /*v_first=*/true, py + start * len, count, len);
        } else {
          LanesBinaryF32(op, pa + a0, pb + b0, /*v_first=*/false, py + start * len, count, len);
        }
      };
      ForEachRow(p, begin, end, [&](int64_t row, int64_t oa, int64_t ob) {
        if (count > 0) {
          const bool b_stays = ob == b0 && oa == a0 + count * len;
          const bool a_stays = oa == a0 && ob == b0 + count * len;
          if ((kind != 2 && b_stays) || (kind != 1 && a_stays)) {
            if (kind == 0) kind = b_stays ? 1 : 2;
            ++count;
            return;
          }
          flush();
        }
        start = row;
        count = 1;
        a0 = oa;
        b0 = ob;
        kind = 0;
      });
      flush();
    });
    return;
  }
  ParallelFor(p.rows, std::max<int64_t>(1, kElementGrain / len), [&](int64_t begin, int64_t end) {
    ForEachRow(p, begin, end, [&](int64_t row, int64_t oa, int64_t ob) {
      float* yr = py + row * len;
      if (p.la == 1 && p.lb == 1) {
        BinaryF32(op, pa + oa, pb + ob, yr, len);
      } else if (p.lb == 0 && p.la == 1) {
        BinaryScalarF32(op, pa + oa, pb[ob], false, yr, len);
      } else if (p.la == 0 && p.lb == 1) {
        BinaryScalarF32(op, pb + ob, pa[oa], true, yr, len);
      } else {
        for (int64_t i = 0; i < len; ++i) {
          yr[i] = ApplyBinaryF32(op, pa[oa + i * p.la], pb[ob + i * p.lb]);
        }
      }
    });
  });
}

const char* BinaryOpName(BinaryKind op) {
  switch (op) {
    case BinaryKind::kAdd:
      return "Add";
    case BinaryKind::kSub:
      return "Sub";
    case BinaryKind::kMul:
      return "Mul";
    case BinaryKind::kDiv:
      return "Div";
    case BinaryKind::kMax:
      return "Max";
    case BinaryKind::kMin:
      return "Min";
    case BinaryKind::kPow:
      return "Pow";
  }
  return "?";
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
    Result<Shape> out_or = ref::BroadcastShapes(BinaryOpName(op_), a.shape(), b.shape());
    if (!out_or.ok()) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, *out_or));
    BroadcastBinary(op_, a.data<const float>(), a.shape(), b.data<const float>(), b.shape(),
                    y.data<float>(), *out_or);
    return Status::OK();
  }

 private:
  BinaryKind op_;
  std::unique_ptr<Kernel> reference_;
};

// Pow(X, Y): X FLOAT; Y a single value of FLOAT, DOUBLE, INT32 or INT64 (taken as the double the
// reference raises to: PowScalarExpF32's exact special exponents apply), or a FLOAT tensor that
// broadcasts (PowF32 along rows). Other exponent types go to the reference.
class PowKernel final : public Kernel {
 public:
  explicit PowKernel(std::unique_ptr<Kernel> reference) : reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1) ||
        !IsF32Cpu(ctx.input(0))) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    const Tensor& e = ctx.input(1);
    if (!e.device().is_cpu() || !e.is_contiguous()) return reference_->Compute(ctx);
    Result<Shape> out_or = ref::BroadcastShapes("Pow", x.shape(), e.shape());
    if (!out_or.ok()) return reference_->Compute(ctx);
    const Shape out = *out_or;
    std::optional<double> exponent;
    if (e.num_elements() == 1 && out.NumElements() == x.num_elements()) {
      switch (e.dtype()) {
        case DataType::kFloat32:
          exponent = e.data<const float>()[0];
          break;
        case DataType::kFloat64:
          exponent = e.data<const double>()[0];
          break;
        case DataType::kInt32:
          exponent = e.data<const int32_t>()[0];
          break;
        case DataType::kInt64:
          exponent = static_cast<double>(e.data<const int64_t>()[0]);
          break;
        default:
          break;
      }
    }
    if (!exponent && e.dtype() != DataType::kFloat32) return reference_->Compute(ctx);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    if (exponent) {
      const double ev = *exponent;
      ParallelFor(out.NumElements(), kElementGrain, [&](int64_t begin, int64_t end) {
        PowScalarExpF32(px + begin, ev, py + begin, end - begin);
      });
      return Status::OK();
    }
    BroadcastBinary(BinaryKind::kPow, px, x.shape(), e.data<const float>(), e.shape(), py, out);
    return Status::OK();
  }

 private:
  std::unique_ptr<Kernel> reference_;
};

// Max / Min over any number of FLOAT inputs: the numpy broadcast of all of them (opset 8+; equal
// shapes before, else the reference reports it), folded left to right into the output as the
// reference folds them (so NaN and the sign of equal zeros come out the same).
class VariadicKernel final : public Kernel {
 public:
  VariadicKernel(BinaryKind op, bool broadcast, std::unique_ptr<Kernel> reference)
      : op_(op), broadcast_(broadcast), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    const int n = ctx.num_inputs();
    if (n < 1) return reference_->Compute(ctx);
    for (int i = 0; i < n; ++i) {
      if (!ctx.has_input(i) || !IsF32Cpu(ctx.input(i))) return reference_->Compute(ctx);
    }
    Shape out = ctx.input(0).shape();
    for (int i = 1; i < n; ++i) {
      const Shape& s = ctx.input(i).shape();
      if (!broadcast_) {
        if (s != out) return reference_->Compute(ctx);
        continue;
      }
      Result<Shape> r = ref::BroadcastShapes(BinaryOpName(op_), out, s);
      if (!r.ok()) return reference_->Compute(ctx);
      out = *r;
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, out));
    float* py = y.data<float>();
    const Tensor& first = ctx.input(0);
    if (n == 1) {
      std::copy(first.data<const float>(), first.data<const float>() + first.num_elements(), py);
      return Status::OK();
    }
    BroadcastBinary(op_, first.data<const float>(), first.shape(), ctx.input(1).data<const float>(),
                    ctx.input(1).shape(), py, out);
    for (int i = 2; i < n; ++i) {
      BroadcastBinary(op_, py, out, ctx.input(i).data<const float>(), ctx.input(i).shape(), py,
                      out);
    }
    return Status::OK();
  }

 private:
  BinaryKind op_;
  bool broadcast_;  // opset >= 8
  std::unique_ptr<Kernel> reference_;
};

// Equal / Less / Greater / LessOrEqual / GreaterOrEqual: FLOAT inputs, BOOL output.
class CompareKernel final : public Kernel {
 public:
  CompareKernel(CompareKind op, std::unique_ptr<Kernel> reference)
      : op_(op), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1) ||
        !IsF32Cpu(ctx.input(0)) || !IsF32Cpu(ctx.input(1))) {
      return reference_->Compute(ctx);
    }
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Result<Shape> out_or = ref::BroadcastShapes("Compare", a.shape(), b.shape());
    if (!out_or.ok()) return reference_->Compute(ctx);
    const Shape out = *out_or;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kBool, out));
    const int64_t total = out.NumElements();
    if (total == 0) return Status::OK();
    const float* pa = a.data<const float>();
    const float* pb = b.data<const float>();
    bool* py = y.data<bool>();
    const int64_t na = a.num_elements(), nb = b.num_elements();
    if (na == total && nb == total) {
      ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
        CompareF32(op_, pa + begin, pb + begin, py + begin, end - begin);
      });
      return Status::OK();
    }
    if ((nb == 1 && na == total) || (na == 1 && nb == total)) {
      const bool scalar_first = nb != 1;
      const float s = scalar_first ? pa[0] : pb[0];
      const float* v = scalar_first ? pb : pa;
      ParallelFor(total, kElementGrain, [&](int64_t begin, int64_t end) {
        CompareScalarF32(op_, v + begin, s, scalar_first, py + begin, end - begin);
      });
      return Status::OK();
    }
    const RowPlan p = PlanRows(a.shape(), b.shape(), out);
    const int64_t len = p.len;
    ParallelFor(p.rows, std::max<int64_t>(1, kElementGrain / len), [&](int64_t begin, int64_t end) {
      ForEachRow(p, begin, end, [&](int64_t row, int64_t oa, int64_t ob) {
        bool* yr = py + row * len;
        if (p.la == 1 && p.lb == 1) {
          CompareF32(op_, pa + oa, pb + ob, yr, len);
        } else if (p.lb == 0 && p.la == 1) {
          CompareScalarF32(op_, pa + oa, pb[ob], false, yr, len);
        } else if (p.la == 0 && p.lb == 1) {
          CompareScalarF32(op_, pb + ob, pa[oa], true, yr, len);
        } else {
          for (int64_t i = 0; i < len; ++i) {
            yr[i] = ApplyCompareF32(op_, pa[oa + i * p.la], pb[ob + i * p.lb]);
          }
        }
      });
    });
    return Status::OK();
  }

 private:
  CompareKind op_;
  std::unique_ptr<Kernel> reference_;
};

bool IsBoolCpu(const Tensor& t) {
  return t.dtype() == DataType::kBool && t.device().is_cpu() && t.is_contiguous();
}

// Not and And on BOOL tensors (bytes 0 / 1): plain byte loops, which the compiler vectorizes at
// the baseline ISA already, so they have no AVX2 variant.
class NotKernel final : public Kernel {
 public:
  explicit NotKernel(std::unique_ptr<Kernel> reference) : reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() != 1 || !ctx.has_input(0) || !IsBoolCpu(ctx.input(0))) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kBool, x.shape()));
    const bool* px = x.data<const bool>();
    bool* py = y.data<bool>();
    ParallelFor(x.num_elements(), kElementGrain * 4, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) py[i] = !px[i];
    });
    return Status::OK();
  }

 private:
  std::unique_ptr<Kernel> reference_;
};

class AndKernel final : public Kernel {
 public:
  explicit AndKernel(std::unique_ptr<Kernel> reference) : reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1) ||
        !IsBoolCpu(ctx.input(0)) || !IsBoolCpu(ctx.input(1))) {
      return reference_->Compute(ctx);
    }
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Result<Shape> out_or = ref::BroadcastShapes("And", a.shape(), b.shape());
    if (!out_or.ok()) return reference_->Compute(ctx);
    const Shape out = *out_or;
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kBool, out));
    if (out.NumElements() == 0) return Status::OK();
    const bool* pa = a.data<const bool>();
    const bool* pb = b.data<const bool>();
    bool* py = y.data<bool>();
    const RowPlan p = PlanRows(a.shape(), b.shape(), out);
    const int64_t len = p.len;
    ParallelFor(p.rows, std::max<int64_t>(1, 4 * kElementGrain / len),
                [&](int64_t begin, int64_t end) {
                  ForEachRow(p, begin, end, [&](int64_t row, int64_t oa, int64_t ob) {
                    bool* yr = py + row * len;
                    const bool* ar = pa + oa;
                    const bool* br = pb + ob;
                    if (p.la == 1 && p.lb == 1) {
                      for (int64_t i = 0; i < len; ++i) yr[i] = ar[i] && br[i];
                    } else if (p.lb == 0) {
                      if (br[0]) {
                        for (int64_t i = 0; i < len; ++i) yr[i] = ar[i * p.la];
                      } else {
                        std::fill(yr, yr + len, false);
                      }
                    } else if (p.la == 0) {
                      if (ar[0]) {
                        for (int64_t i = 0; i < len; ++i) yr[i] = br[i * p.lb];
                      } else {
                        std::fill(yr, yr + len, false);
                      }
                    } else {
                      for (int64_t i = 0; i < len; ++i) yr[i] = ar[i * p.la] && br[i * p.lb];
                    }
                  });
                });
    return Status::OK();
  }

 private:
  std::unique_ptr<Kernel> reference_;
};

// The unary math ops of UnaryKind on one FLOAT input.
class MathUnaryKernel final : public Kernel {
 public:
  MathUnaryKernel(UnaryKind op, std::unique_ptr<Kernel> reference)
      : op_(op), reference_(std::move(reference)) {}

  Status Compute(KernelContext& ctx) const override {
    if (ctx.num_inputs() != 1 || !ctx.has_input(0) || !IsF32Cpu(ctx.input(0))) {
      return reference_->Compute(ctx);
    }
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(Tensor y,
                          ctx.AllocateOutputForOverwrite(0, DataType::kFloat32, x.shape()));
    const float* px = x.data<const float>();
    float* py = y.data<float>();
    ParallelFor(x.num_elements(), kElementGrain, [&](int64_t begin, int64_t end) {
      UnaryF32(op_, px + begin, py + begin, end - begin);
    });
    return Status::OK();
  }

 private:
  UnaryKind op_;
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

using RefFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelInfo&);

Result<std::unique_ptr<Kernel>> MakeMathUnary(const KernelInfo& info, UnaryKind op,
                                              RefFactory ref_factory) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref_factory(info));
  return std::make_unique<MathUnaryKernel>(op, std::move(reference));
}

Result<std::unique_ptr<Kernel>> MakeCompare(const KernelInfo& info, CompareKind op,
                                            RefFactory ref_factory) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref_factory(info));
  return std::make_unique<CompareKernel>(op, std::move(reference));
}

Result<std::unique_ptr<Kernel>> MakeVariadic(const KernelInfo& info, BinaryKind op,
                                             RefFactory ref_factory) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref_factory(info));
  return std::make_unique<VariadicKernel>(op, info.opset() >= 8, std::move(reference));
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

Result<std::unique_ptr<Kernel>> CreatePow(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreatePow(info));
  return std::make_unique<PowKernel>(std::move(reference));
}
Result<std::unique_ptr<Kernel>> CreateMax(const KernelInfo& info) {
  return MakeVariadic(info, BinaryKind::kMax, &ref::CreateMax);
}
Result<std::unique_ptr<Kernel>> CreateMin(const KernelInfo& info) {
  return MakeVariadic(info, BinaryKind::kMin, &ref::CreateMin);
}

Result<std::unique_ptr<Kernel>> CreateNeg(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kNeg, &ref::CreateNeg);
}
Result<std::unique_ptr<Kernel>> CreateAbs(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kAbs, &ref::CreateAbs);
}
Result<std::unique_ptr<Kernel>> CreateSqrt(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kSqrt, &ref::CreateSqrt);
}
Result<std::unique_ptr<Kernel>> CreateReciprocal(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kReciprocal, &ref::CreateReciprocal);
}
Result<std::unique_ptr<Kernel>> CreateFloor(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kFloor, &ref::CreateFloor);
}
Result<std::unique_ptr<Kernel>> CreateCeil(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kCeil, &ref::CreateCeil);
}
Result<std::unique_ptr<Kernel>> CreateRound(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kRound, &ref::CreateRound);
}
Result<std::unique_ptr<Kernel>> CreateSign(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kSign, &ref::CreateSign);
}
Result<std::unique_ptr<Kernel>> CreateLog(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kLog, &ref::CreateLog);
}
Result<std::unique_ptr<Kernel>> CreateSoftplus(const KernelInfo& info) {
  return MakeMathUnary(info, UnaryKind::kSoftplus, &ref::CreateSoftplus);
}

Result<std::unique_ptr<Kernel>> CreateEqual(const KernelInfo& info) {
  return MakeCompare(info, CompareKind::kEqual, &ref::CreateEqual);
}
Result<std::unique_ptr<Kernel>> CreateLess(const KernelInfo& info) {
  return MakeCompare(info, CompareKind::kLess, &ref::CreateLess);
}
Result<std::unique_ptr<Kernel>> CreateGreater(const KernelInfo& info) {
  return MakeCompare(info, CompareKind::kGreater, &ref::CreateGreater);
}
Result<std::unique_ptr<Kernel>> CreateLessOrEqual(const KernelInfo& info) {
  return MakeCompare(info, CompareKind::kLessOrEqual, &ref::CreateLessOrEqual);
}
Result<std::unique_ptr<Kernel>> CreateGreaterOrEqual(const KernelInfo& info) {
  return MakeCompare(info, CompareKind::kGreaterOrEqual, &ref::CreateGreaterOrEqual);
}

Result<std::unique_ptr<Kernel>> CreateNot(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateNot(info));
  return std::make_unique<NotKernel>(std::move(reference));
}
Result<std::unique_ptr<Kernel>> CreateAnd(const KernelInfo& info) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> reference, ref::CreateAnd(info));
  return std::make_unique<AndKernel>(std::move(reference));
}

}  // namespace kiln::cpu
