// SPDX-License-Identifier: Apache-2.0
// Reference elementwise kernels: Add, Sub, Mul, Div (binary, broadcasting). The unary ones,
// Relu, Sigmoid and Tanh included, are in math_unary.cc.
//
// NOTE on the approach: each binary op walks the numpy-broadcast output once (broadcast.h) and
// applies a scalar function. The opset 1-6 `broadcast`/`axis` rule never reaches these kernels:
// the importer's version adapter (graph/onnx/version_adapter.h) rewrites it into numpy
// broadcasting.
//
// Every integer width, FP16 and BF16 (computed in float, rounded to nearest even; math_common.h).
// Integers: Add/Sub/Mul wrap modulo 2^n (computed on an unsigned type, so no undefined
// behaviour). Div truncates toward zero, like C++ and the ONNX reference; a zero divisor makes
// Compute return INVALID_ARGUMENT before anything is written; INT_MIN / -1 wraps to INT_MIN.
// Floats follow IEEE (x/0 is inf or nan).

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/math_common.h"

namespace kiln::ref {
namespace {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

template <BinaryOp kOp, typename T>
T ApplyBinary(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if constexpr (kOp == BinaryOp::kAdd) return a + b;
    if constexpr (kOp == BinaryOp::kSub) return a - b;
    if constexpr (kOp == BinaryOp::kMul) return a * b;
    if constexpr (kOp == BinaryOp::kDiv) return a / b;
  } else {
    using U = WrapType<T>;
    const U ua = static_cast<U>(a), ub = static_cast<U>(b);
    if constexpr (kOp == BinaryOp::kAdd) return static_cast<T>(ua + ub);
    if constexpr (kOp == BinaryOp::kSub) return static_cast<T>(ua - ub);
    if constexpr (kOp == BinaryOp::kMul) return static_cast<T>(ua * ub);
    if constexpr (kOp == BinaryOp::kDiv) {
      // b != 0 was checked by the caller; -1 negates with wrap-around (INT_MIN stays INT_MIN).
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return static_cast<T>(U{0} - ua);
      }
      return static_cast<T>(a / b);
    }
  }
}

template <BinaryOp kOp>
class BinaryKernel final : public Kernel {
 public:
  explicit BinaryKernel(std::string op) : op_(std::move(op)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, op_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype()) {
      return OpError(op_, "inputs have different dtypes {} and {}", DataTypeName(a.dtype()),
                     DataTypeName(b.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(BinaryLayout layout, LayoutBinary(op_, a.shape(), b.shape()));
    const Shape& out = layout.out;
    return DispatchNumeric(a.dtype(), op_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pa = a.data<const T>();
      const T* pb = b.data<const T>();
      if constexpr (kOp == BinaryOp::kDiv && std::is_integral_v<T>) {
        // Every element of b is read when the output is non-empty.
        if (out.NumElements() > 0) {
          for (int64_t i = 0; i < b.num_elements(); ++i) {
            if (pb[i] == 0) {
              return OpError(op_, "integer division by zero (divisor element {})", i);
            }
          }
        }
      }
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), out));
      T* py = y.data<T>();
      ForEachBroadcast(
          out, layout.a_strides, layout.b_strides, [&](int64_t o, int64_t ia, int64_t ib) {
            py[o] = FromMath<T>(ApplyBinary<kOp, MathType<T>>(ToMath(pa[ia]), ToMath(pb[ib])));
          });
      return Status::OK();
    });
  }

 private:
  std::string op_;
};

template <BinaryOp kOp>
Result<std::unique_ptr<Kernel>> CreateBinary(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(RejectLegacyBroadcast(info));
  return std::make_unique<BinaryKernel<kOp>>(info.node().op_type);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateAdd(const KernelInfo& info) {
  return CreateBinary<BinaryOp::kAdd>(info);
}
Result<std::unique_ptr<Kernel>> CreateSub(const KernelInfo& info) {
  return CreateBinary<BinaryOp::kSub>(info);
}
Result<std::unique_ptr<Kernel>> CreateMul(const KernelInfo& info) {
  return CreateBinary<BinaryOp::kMul>(info);
}
Result<std::unique_ptr<Kernel>> CreateDiv(const KernelInfo& info) {
  return CreateBinary<BinaryOp::kDiv>(info);
}

}  // namespace kiln::ref
