// SPDX-License-Identifier: Apache-2.0
// Reference matrix products: MatMul (numpy matmul semantics) and Gemm.
//
// NOTE on the approach: a plain i-k-j triple loop per matrix, accumulating one output row at a
// time in AccType (double for floats; the unsigned type for integers, so overflow wraps modulo
// 2^n). MatMul promotes a 1-D A to [1, K] and a 1-D B to [K, 1] and drops those dims from the
// result; the batch dims (all but the last two) broadcast like numpy and are walked with
// ForEachBroadcast in units of whole matrices. Gemm reads A and B through their transposes in
// place and adds beta * C, with C unidirectionally broadcast to [M, N].

#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"

namespace kiln::ref {
namespace {

// y[M, N] = a[M, K] * b[K, N], all row-major; `acc` is scratch of N elements.
template <typename T>
void MatMulPlain(const T* a, const T* b, T* y, int64_t m, int64_t k, int64_t n,
                 std::vector<AccType<T>>& acc) {
  using Acc = AccType<T>;
  for (int64_t i = 0; i < m; ++i) {
    acc.assign(static_cast<size_t>(n), Acc{0});
    for (int64_t p = 0; p < k; ++p) {
      const Acc aip = static_cast<Acc>(a[i * k + p]);
      const T* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        acc[static_cast<size_t>(j)] += aip * static_cast<Acc>(brow[j]);
    }
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = static_cast<T>(acc[static_cast<size_t>(j)]);
  }
}

class MatMulKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "MatMul"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype()) {
      return OpError("MatMul", "inputs have different dtypes {} and {}", DataTypeName(a.dtype()),
                     DataTypeName(b.dtype()));
    }
    if (a.rank() < 1 || b.rank() < 1) {
      return OpError("MatMul", "inputs must have rank >= 1, got {} and {}", a.shape().ToString(),
                     b.shape().ToString());
    }
    const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
    const int64_t m = a_vec ? 1 : a.dim(a.rank() - 2);
    const int64_t k = a.dim(a.rank() - 1);
    const int64_t kb = b_vec ? b.dim(0) : b.dim(b.rank() - 2);
    const int64_t n = b_vec ? 1 : b.dim(b.rank() - 1);
    if (k != kb) {
      return OpError("MatMul", "inner dimensions differ: A {} has K={}, B {} has K={}",
                     a.shape().ToString(), k, b.shape().ToString(), kb);
    }
    const Shape a_batch(a.shape().dims().first(static_cast<size_t>(a_vec ? 0 : a.rank() - 2)));
    const Shape b_batch(b.shape().dims().first(static_cast<size_t>(b_vec ? 0 : b.rank() - 2)));
    Result<Shape> batch = BroadcastShapes("MatMul", a_batch, b_batch);
    if (!batch.ok()) {
      return OpError("MatMul", "batch dims of A {} and B {} do not broadcast", a.shape().ToString(),
                     b.shape().ToString());
    }
    std::vector<int64_t> out_dims(batch->dims().begin(), batch->dims().end());
    if (!a_vec) out_dims.push_back(m);
    if (!b_vec) out_dims.push_back(n);
    KILN_ASSIGN_OR_RETURN(Shape out, Shape::Create(out_dims));
    const DimArray sa = BroadcastStrides(a_batch, *batch);
    const DimArray sb = BroadcastStrides(b_batch, *batch);
    return DispatchType<float, double, int32_t, int64_t>(
        a.dtype(), "MatMul", [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), out));
          const T* pa = a.data<const T>();
          const T* pb = b.data<const T>();
          T* py = y.data<T>();
          std::vector<AccType<T>> acc;
          ForEachBroadcast(*batch, sa, sb, [&](int64_t o, int64_t ia, int64_t ib) {
            MatMulPlain(pa + ia * m * k, pb + ib * k * n, py + o * m * n, m, k, n, acc);
          });
          return Status::OK();
        });
  }
};

class GemmKernel final : public Kernel {
 public:
  GemmKernel(bool trans_a, bool trans_b, float alpha, float beta)
      : trans_a_(trans_a), trans_b_(trans_b), alpha_(alpha), beta_(beta) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Gemm"));
    const bool has_c = ctx.has_input(2);
    if (has_c) KILN_RETURN_IF_ERROR(CheckInput(ctx, 2, "Gemm"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.rank() != 2 || b.rank() != 2) {
      return OpError("Gemm", "A and B must be 2-D, got {} and {}", a.shape().ToString(),
                     b.shape().ToString());
    }
    const int64_t m = trans_a_ ? a.dim(1) : a.dim(0);
    const int64_t k = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t kb = trans_b_ ? b.dim(1) : b.dim(0);
    const int64_t n = trans_b_ ? b.dim(0) : b.dim(1);
    if (k != kb) {
      return OpError("Gemm",
                     "inner dimensions differ: A' has K={}, B' has K={} (A {}, B {}, "
                     "transA={}, transB={})",
                     k, kb, a.shape().ToString(), b.shape().ToString(), int{trans_a_},
                     int{trans_b_});
    }
    const Shape out{m, n};
    for (int i = 1; i < (has_c ? 3 : 2); ++i) {
      if (ctx.input(i).dtype() != a.dtype()) {
        return OpError("Gemm", "input {} has dtype {}, A has {}", i,
                       DataTypeName(ctx.input(i).dtype()), DataTypeName(a.dtype()));
      }
    }
    DimArray sc{};
    if (has_c) {
      const Shape& cs = ctx.input(2).shape();
      if (!BroadcastsTo(cs, out)) {
        return OpError("Gemm", "C {} does not broadcast to the output shape {}", cs.ToString(),
                       out.ToString());
      }
      sc = BroadcastStrides(cs, out);
    }
    return DispatchType<float, double>(a.dtype(), "Gemm", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), out));
      const T* pa = a.data<const T>();
      const T* pb = b.data<const T>();
      const T* pc = has_c ? ctx.input(2).data<const T>() : nullptr;
      T* py = y.data<T>();
      // A'(i, p) and B'(p, j) read through the transposes.
      const int64_t a_si = trans_a_ ? 1 : k, a_sp = trans_a_ ? m : 1;
      const int64_t b_sp = trans_b_ ? 1 : n, b_sj = trans_b_ ? k : 1;
      std::vector<double> acc;
      for (int64_t i = 0; i < m; ++i) {
        acc.assign(static_cast<size_t>(n), 0.0);
        for (int64_t p = 0; p < k; ++p) {
          const double aip = static_cast<double>(pa[i * a_si + p * a_sp]);
          for (int64_t j = 0; j < n; ++j) {
            acc[static_cast<size_t>(j)] += aip * static_cast<double>(pb[p * b_sp + j * b_sj]);
          }
        }
        for (int64_t j = 0; j < n; ++j) {
          double v = static_cast<double>(alpha_) * acc[static_cast<size_t>(j)];
          if (pc != nullptr)
            v += static_cast<double>(beta_) * static_cast<double>(pc[i * sc[0] + j * sc[1]]);
          py[i * n + j] = static_cast<T>(v);
        }
      }
      return Status::OK();
    });
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateMatMul(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return std::make_unique<MatMulKernel>();
}

Result<std::unique_ptr<Kernel>> CreateGemm(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  if (info.opset() < 11 && !info.has_input(2)) {
    return OpError("Gemm", "input C is required before opset 11 (model uses opset {})",
                   info.opset());
  }
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("broadcast", 7));
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, attrs.Int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, attrs.Int("transB", 0));
  KILN_ASSIGN_OR_RETURN(float alpha, attrs.Float("alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(float beta, attrs.Float("beta", 1.0f));
  return std::make_unique<GemmKernel>(trans_a != 0, trans_b != 0, alpha, beta);
}

}  // namespace kiln::ref
