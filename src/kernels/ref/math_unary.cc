// SPDX-License-Identifier: Apache-2.0
// Reference elementwise unary math kernels: Abs Neg Exp Log Sqrt Reciprocal Floor Ceil Round Sign
// Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Erf, IsNaN IsInf Not, and the pointwise
// activations LeakyRelu Elu Selu Celu HardSigmoid HardSwish Softplus Softsign ThresholdedRelu
// Shrink Clip.
//
// NOTE on the approach: one kernel template per op (UnaryOp) maps every element through a scalar
// function of the op's attributes. The dtypes each op accepts are the ONNX ones (the table rows
// hold the per-opset sets): floating-point ops compute FP32/FP64 natively and FP16/BF16 in float,
// rounded back to nearest even (MathType). Integer rules: Abs/Neg wrap (|INT_MIN| = INT_MIN);
// Sign is -1/0/1; Erf and Shrink on integers compute in double and convert back with WrapToInt.
// Round is half-to-even (like numpy and the ONNX reference). Clip before opset 11 reads `min` and
// `max` attributes; from 11 they are optional single-element inputs of the input's dtype; NaN
// passes through, and min > max yields max everywhere (numpy's clip).

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/math_common.h"

namespace kiln::ref {
namespace {

enum class UnaryOp {
  kRelu,
  kSigmoid,
  kTanh,
  kAbs,
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kRound,
  kSign,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kErf,
  kLeakyRelu,
  kElu,
  kSelu,
  kCelu,
  kHardSigmoid,
  kHardSwish,
  kSoftplus,
  kSoftsign,
  kThresholdedRelu,
  kShrink,
};

// Which dtypes an op's kernel handles (the table narrows them per opset).
enum class TypeSet { kFloats, kSignedAndFloats, kNumeric };

constexpr TypeSet TypesOf(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
    case UnaryOp::kRelu:
      return TypeSet::kSignedAndFloats;
    case UnaryOp::kAbs:
    case UnaryOp::kSign:
    case UnaryOp::kErf:
    case UnaryOp::kShrink:
      return TypeSet::kNumeric;
    default:
      return TypeSet::kFloats;
  }
}

// Attribute values (unused ones stay 0).
struct UnaryParams {
  float alpha = 0;
  float beta = 0;
  float gamma = 0;
};

// The op on a floating-point compute type C (float or double).
template <UnaryOp kOp, typename C>
C ApplyFloat(C x, const UnaryParams& p) {
  const C alpha = static_cast<C>(p.alpha), beta = static_cast<C>(p.beta);
  if constexpr (kOp == UnaryOp::kRelu) return x < C{0} ? C{0} : x;  // keeps NaN
  if constexpr (kOp == UnaryOp::kSigmoid) {
    // Written so that exp never overflows.
    if (x >= C{0}) return C{1} / (C{1} + std::exp(-x));
    const C e = std::exp(x);
    return e / (C{1} + e);
  }
  if constexpr (kOp == UnaryOp::kTanh) return std::tanh(x);
  if constexpr (kOp == UnaryOp::kAbs) return std::abs(x);
  if constexpr (kOp == UnaryOp::kNeg) return -x;
  if constexpr (kOp == UnaryOp::kExp) return std::exp(x);
  if constexpr (kOp == UnaryOp::kLog) return std::log(x);
  if constexpr (kOp == UnaryOp::kSqrt) return std::sqrt(x);
  if constexpr (kOp == UnaryOp::kReciprocal) return C{1} / x;
  if constexpr (kOp == UnaryOp::kFloor) return std::floor(x);
  if constexpr (kOp == UnaryOp::kCeil) return std::ceil(x);
  if constexpr (kOp == UnaryOp::kRound) return std::nearbyint(x);  // default mode: half-to-even
  if constexpr (kOp == UnaryOp::kSign) return x > C{0} ? C{1} : x < C{0} ? C{-1} : x;
  if constexpr (kOp == UnaryOp::kSin) return std::sin(x);
  if constexpr (kOp == UnaryOp::kCos) return std::cos(x);
  if constexpr (kOp == UnaryOp::kTan) return std::tan(x);
  if constexpr (kOp == UnaryOp::kAsin) return std::asin(x);
  if constexpr (kOp == UnaryOp::kAcos) return std::acos(x);
  if constexpr (kOp == UnaryOp::kAtan) return std::atan(x);
  if constexpr (kOp == UnaryOp::kSinh) return std::sinh(x);
  if constexpr (kOp == UnaryOp::kCosh) return std::cosh(x);
  if constexpr (kOp == UnaryOp::kAsinh) return std::asinh(x);
  if constexpr (kOp == UnaryOp::kAcosh) return std::acosh(x);
  if constexpr (kOp == UnaryOp::kAtanh) return std::atanh(x);
  if constexpr (kOp == UnaryOp::kErf) return std::erf(x);
  if constexpr (kOp == UnaryOp::kLeakyRelu) return x < C{0} ? alpha * x : x;
  if constexpr (kOp == UnaryOp::kElu) return x < C{0} ? alpha * std::expm1(x) : x;
  if constexpr (kOp == UnaryOp::kSelu) {
    return static_cast<C>(p.gamma) * (x <= C{0} ? alpha * std::expm1(x) : x);
  }
  if constexpr (kOp == UnaryOp::kCelu) {
    // max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); alpha != 0 is checked at load.
    return x > C{0} ? x : alpha * std::expm1(x / alpha);
  }
  if constexpr (kOp == UnaryOp::kHardSigmoid) {
    return std::fmax(C{0}, std::fmin(C{1}, alpha * x + beta));
  }
  if constexpr (kOp == UnaryOp::kHardSwish) {
    return x * std::fmax(C{0}, std::fmin(C{1}, x / C{6} + C{0.5}));
  }
  if constexpr (kOp == UnaryOp::kSoftplus) {
    // log(1 + exp(x)) without overflow for large x.
    return x > C{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  if constexpr (kOp == UnaryOp::kSoftsign) return x / (C{1} + std::abs(x));
  if constexpr (kOp == UnaryOp::kThresholdedRelu) return x > alpha ? x : C{0};
  if constexpr (kOp == UnaryOp::kShrink) {
    return x < -alpha ? x + beta : x > alpha ? x - beta : C{0};  // alpha = lambd, beta = bias
  }
}

// The op on integer T (only the ops TypesOf admits for integers).
template <UnaryOp kOp, typename T>
T ApplyInt(T x, const UnaryParams& p) {
  using U = WrapType<T>;
  if constexpr (kOp == UnaryOp::kAbs || kOp == UnaryOp::kNeg) {
    if constexpr (std::is_unsigned_v<T>) {
      return x;  // Abs only (Neg has no unsigned types)
    } else {
      const bool negate = kOp == UnaryOp::kNeg || x < 0;
      return negate ? static_cast<T>(static_cast<U>(U{0} - static_cast<U>(x))) : x;
    }
  }
  if constexpr (kOp == UnaryOp::kRelu) return x < T{0} ? T{0} : x;
  if constexpr (kOp == UnaryOp::kSign)
    return x > T{0} ? T{1} : x < T{0} ? static_cast<T>(-1) : T{0};
  if constexpr (kOp == UnaryOp::kErf) return WrapToInt<T>(std::erf(static_cast<double>(x)));
  if constexpr (kOp == UnaryOp::kShrink) {
    return WrapToInt<T>(ApplyFloat<kOp, double>(static_cast<double>(x), p));
  }
  return x;
}

template <UnaryOp kOp>
class UnaryMathKernel final : public Kernel {
 public:
  UnaryMathKernel(std::string op, UnaryParams params) : op_(std::move(op)), params_(params) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      const int64_t n = x.num_elements();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kIsFloatLike<T>) {
          py[i] = FromMath<T>(ApplyFloat<kOp, MathType<T>>(ToMath(px[i]), params_));
        } else {
          py[i] = ApplyInt<kOp>(px[i], params_);
        }
      }
      return Status::OK();
    };
    constexpr TypeSet kTypes = TypesOf(kOp);
    if constexpr (kTypes == TypeSet::kFloats) {
      return DispatchFloats(x.dtype(), op_, run);
    } else if constexpr (kTypes == TypeSet::kSignedAndFloats) {
      return DispatchType<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t>(
          x.dtype(), op_, run);
    } else {
      return DispatchNumeric(x.dtype(), op_, run);
    }
  }

 private:
  std::string op_;
  UnaryParams params_;
};

template <UnaryOp kOp>
Result<std::unique_ptr<Kernel>> CreateUnaryMath(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  // Opsets 1-5's `consumed_inputs` memory hint is dropped by the importer's version adapter.
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  UnaryParams p;
  if constexpr (kOp == UnaryOp::kLeakyRelu) {
    KILN_ASSIGN_OR_RETURN(p.alpha, attrs.Float("alpha", 0.01f));
  } else if constexpr (kOp == UnaryOp::kElu || kOp == UnaryOp::kThresholdedRelu) {
    KILN_ASSIGN_OR_RETURN(p.alpha, attrs.Float("alpha", 1.0f));
  } else if constexpr (kOp == UnaryOp::kCelu) {
    KILN_ASSIGN_OR_RETURN(p.alpha, attrs.Float("alpha", 1.0f));
    if (p.alpha == 0) return OpError(attrs.op(), "attribute 'alpha' must not be 0");
  } else if constexpr (kOp == UnaryOp::kSelu) {
    KILN_ASSIGN_OR_RETURN(p.alpha, attrs.Float("alpha", 1.67326319217681884765625f));
    KILN_ASSIGN_OR_RETURN(p.gamma, attrs.Float("gamma", 1.05070102214813232421875f));
  } else if constexpr (kOp == UnaryOp::kHardSigmoid) {
    KILN_ASSIGN_OR_RETURN(p.alpha, attrs.Float("alpha", 0.2f));
    KILN_ASSIGN_OR_RETURN(p.beta, attrs.Float("beta", 0.5f));
  } else if constexpr (kOp == UnaryOp::kShrink) {
    KILN_ASSIGN_OR_RETURN(p.alpha, attrs.Float("lambd", 0.5f));
    KILN_ASSIGN_OR_RETURN(p.beta, attrs.Float("bias", 0.0f));
  }
  return std::make_unique<UnaryMathKernel<kOp>>(info.node().op_type, p);
}

// IsNaN, IsInf: floating-point input, BOOL output.
class FloatPredicateKernel final : public Kernel {
 public:
  FloatPredicateKernel(std::string op, bool is_inf, bool detect_negative, bool detect_positive)
      : op_(std::move(op)),
        is_inf_(is_inf),
        detect_negative_(detect_negative),
        detect_positive_(detect_positive) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);
    return DispatchFloats(x.dtype(), op_, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kBool, x.shape()));
      const T* px = x.data<const T>();
      bool* py = y.data<bool>();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const double v = static_cast<double>(ToMath(px[i]));
        if (is_inf_) {
          py[i] = std::isinf(v) && (v > 0 ? detect_positive_ : detect_negative_);
        } else {
          py[i] = std::isnan(v);
        }
      }
      return Status::OK();
    });
  }

 private:
  std::string op_;
  bool is_inf_;
  bool detect_negative_;
  bool detect_positive_;
};

class NotKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Not"));
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kBool) {
      return OpError("Not", "unsupported dtype {}", DataTypeName(x.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kBool, x.shape()));
    const bool* px = x.data<const bool>();
    bool* py = y.data<bool>();
    for (int64_t i = 0; i < x.num_elements(); ++i) py[i] = !px[i];
    return Status::OK();
  }
};

// Clip. Before opset 11 the bounds are attributes (`attr_min`/`attr_max`); from 11 they are the
// optional inputs 1 and 2.
class ClipKernel final : public Kernel {
 public:
  ClipKernel(bool bounds_are_inputs, std::optional<float> attr_min, std::optional<float> attr_max)
      : bounds_are_inputs_(bounds_are_inputs), attr_min_(attr_min), attr_max_(attr_max) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Clip"));
    const Tensor& x = ctx.input(0);
    return DispatchNumeric(x.dtype(), "Clip", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = MathType<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if (bounds_are_inputs_) {
        for (int i = 1; i <= 2; ++i) {
          if (!ctx.has_input(i)) continue;
          KILN_RETURN_IF_ERROR(CheckInput(ctx, i, "Clip"));
          const Tensor& b = ctx.input(i);
          if (b.dtype() != x.dtype()) {
            return OpError("Clip", "input {} has dtype {}, expected the input's {}", i,
                           DataTypeName(b.dtype()), DataTypeName(x.dtype()));
          }
          if (b.num_elements() != 1) {
            return OpError("Clip", "input {} must be a scalar, got shape {}", i,
                           b.shape().ToString());
          }
          (i == 1 ? lo : hi) = ToMath(b.data<const T>()[0]);
        }
      } else if constexpr (kIsFloatLike<T>) {
        if (attr_min_.has_value()) lo = static_cast<C>(*attr_min_);
        if (attr_max_.has_value()) hi = static_cast<C>(*attr_max_);
      }
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
      const T* px = x.data<const T>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        C v = ToMath(px[i]);
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        py[i] = FromMath<T>(v);
      }
      return Status::OK();
    });
  }

 private:
  bool bounds_are_inputs_;
  std::optional<float> attr_min_;  // absent: the dtype's lowest value
  std::optional<float> attr_max_;  // absent: the dtype's highest value
};

}  // namespace

#define KILN_MATH_UNARY_FACTORY(name)                                    \
  Result<std::unique_ptr<Kernel>> Create##name(const KernelInfo& info) { \
    return CreateUnaryMath<UnaryOp::k##name>(info);                      \
  }
KILN_MATH_UNARY_FACTORY(Relu)
KILN_MATH_UNARY_FACTORY(Sigmoid)
KILN_MATH_UNARY_FACTORY(Tanh)
KILN_MATH_UNARY_FACTORY(Abs)
KILN_MATH_UNARY_FACTORY(Neg)
KILN_MATH_UNARY_FACTORY(Exp)
KILN_MATH_UNARY_FACTORY(Log)
KILN_MATH_UNARY_FACTORY(Sqrt)
KILN_MATH_UNARY_FACTORY(Reciprocal)
KILN_MATH_UNARY_FACTORY(Floor)
KILN_MATH_UNARY_FACTORY(Ceil)
KILN_MATH_UNARY_FACTORY(Round)
KILN_MATH_UNARY_FACTORY(Sign)
KILN_MATH_UNARY_FACTORY(Sin)
KILN_MATH_UNARY_FACTORY(Cos)
KILN_MATH_UNARY_FACTORY(Tan)
KILN_MATH_UNARY_FACTORY(Asin)
KILN_MATH_UNARY_FACTORY(Acos)
KILN_MATH_UNARY_FACTORY(Atan)
KILN_MATH_UNARY_FACTORY(Sinh)
KILN_MATH_UNARY_FACTORY(Cosh)
KILN_MATH_UNARY_FACTORY(Asinh)
KILN_MATH_UNARY_FACTORY(Acosh)
KILN_MATH_UNARY_FACTORY(Atanh)
KILN_MATH_UNARY_FACTORY(Erf)
KILN_MATH_UNARY_FACTORY(LeakyRelu)
KILN_MATH_UNARY_FACTORY(Elu)
KILN_MATH_UNARY_FACTORY(Selu)
KILN_MATH_UNARY_FACTORY(Celu)
KILN_MATH_UNARY_FACTORY(HardSigmoid)
KILN_MATH_UNARY_FACTORY(HardSwish)
KILN_MATH_UNARY_FACTORY(Softplus)
KILN_MATH_UNARY_FACTORY(Softsign)
KILN_MATH_UNARY_FACTORY(ThresholdedRelu)
KILN_MATH_UNARY_FACTORY(Shrink)
#undef KILN_MATH_UNARY_FACTORY

Result<std::unique_ptr<Kernel>> CreateIsNaN(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<FloatPredicateKernel>("IsNaN", false, false, false);
}

Result<std::unique_ptr<Kernel>> CreateIsInf(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_ASSIGN_OR_RETURN(bool negative, attrs.Bool("detect_negative", true));
  KILN_ASSIGN_OR_RETURN(bool positive, attrs.Bool("detect_positive", true));
  return std::make_unique<FloatPredicateKernel>("IsInf", true, negative, positive);
}

Result<std::unique_ptr<Kernel>> CreateNot(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  return std::make_unique<NotKernel>();
}

Result<std::unique_ptr<Kernel>> CreateClip(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("min", 11));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("max", 11));
  if (info.opset() >= 11) {
    if (info.num_inputs() > 3) return OpError("Clip", "takes at most 3 inputs");
    return std::make_unique<ClipKernel>(true, std::nullopt, std::nullopt);
  }
  if (info.num_inputs() > 1) {
    return OpError("Clip", "takes 1 input before opset 11 (bounds are attributes)");
  }
  std::optional<float> lo, hi;
  if (attrs.Has("min")) {
    KILN_ASSIGN_OR_RETURN(lo, attrs.Float("min", 0.0f));
  }
  if (attrs.Has("max")) {
    KILN_ASSIGN_OR_RETURN(hi, attrs.Float("max", 0.0f));
  }
  return std::make_unique<ClipKernel>(false, lo, hi);
}

}  // namespace kiln::ref
