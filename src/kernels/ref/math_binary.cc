// SPDX-License-Identifier: Apache-2.0
// Reference binary and variadic math kernels: Pow, Mod, BitShift, PRelu; logic And Or Xor;
// comparisons Equal Less Greater LessOrEqual GreaterOrEqual; Where; Max Min Sum Mean.
//
// NOTE on the approach: every op walks the broadcast output once (broadcast.h; Where with the
// three-input walk of math_common.h) and applies a scalar function. The binary ops broadcast
// numpy-style (the importer's version adapter rewrites the opset 1-6 `broadcast`/`axis` rule);
// before opset 8 the variadic ops need equal shapes. FP16/BF16 compute in float and round back
// (MathType).
//
// Integer rules (never undefined behaviour):
//  - Mod: fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's (C's %); a zero
//    divisor is INVALID_ARGUMENT; x mod -1 is 0. Floating-point Mod needs fmod=1 (ONNX) and
//    follows C's fmod (x fmod 0 is NaN).
//  - Pow: the output has the base's dtype. Integer bases with integer exponents are exact
//    (wrapping modulo 2^n); a negative exponent gives 1/base^n truncated (1, -1 or 0) and a zero
//    base with a negative exponent is INVALID_ARGUMENT. Otherwise Pow computes in double and
//    converts to the base's dtype (WrapToInt for integers), as the ONNX reference does.
//  - BitShift: shifts by the bit width or more give 0.
//  - PRelu wraps on integer overflow of slope * x.
// Max/Min propagate NaN (numpy's maximum/minimum). PRelu's slope broadcasts unidirectionally to X
// (the version adapter gives opset 6's per-channel 1-D slopes their trailing 1-dims).

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/math_common.h"

namespace kiln::ref {
namespace {

Status CheckSameDtype(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return OpError(op, "inputs have different dtypes {} and {}", DataTypeName(a.dtype()),
                   DataTypeName(b.dtype()));
  }
  return Status::OK();
}

// ---- And, Or, Xor ----------------------------------------------------------------------------

enum class LogicOp { kAnd, kOr, kXor };

class LogicKernel final : public Kernel {
 public:
  LogicKernel(std::string op, LogicOp kind) : op_(std::move(op)), kind_(kind) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, op_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DataType::kBool || b.dtype() != DataType::kBool) {
      return OpError(op_, "inputs must be BOOL, got {} and {}", DataTypeName(a.dtype()),
                     DataTypeName(b.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(BinaryLayout l, LayoutBinary(op_, a.shape(), b.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kBool, l.out));
    const bool* pa = a.data<const bool>();
    const bool* pb = b.data<const bool>();
    bool* py = y.data<bool>();
    ForEachBroadcast(l.out, l.a_strides, l.b_strides, [&](int64_t o, int64_t ia, int64_t ib) {
      const bool u = pa[ia], v = pb[ib];
      py[o] = kind_ == LogicOp::kAnd ? (u && v) : kind_ == LogicOp::kOr ? (u || v) : (u != v);
    });
    return Status::OK();
  }

 private:
  std::string op_;
  LogicOp kind_;
};

Result<std::unique_ptr<Kernel>> CreateLogic(const KernelInfo& info, LogicOp kind) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(RejectLegacyBroadcast(info));
  return std::make_unique<LogicKernel>(info.node().op_type, kind);
}

// ---- Comparisons -----------------------------------------------------------------------------

enum class CompareOp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual };

template <CompareOp kOp, typename C>
bool ApplyCompare(C a, C b) {
  if constexpr (kOp == CompareOp::kEqual) return a == b;
  if constexpr (kOp == CompareOp::kLess) return a < b;
  if constexpr (kOp == CompareOp::kGreater) return a > b;
  if constexpr (kOp == CompareOp::kLessOrEqual) return a <= b;
  if constexpr (kOp == CompareOp::kGreaterOrEqual) return a >= b;
}

template <CompareOp kOp>
class CompareKernel final : public Kernel {
 public:
  explicit CompareKernel(std::string op) : op_(std::move(op)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, op_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckSameDtype(op_, a, b));
    KILN_ASSIGN_OR_RETURN(BinaryLayout l, LayoutBinary(op_, a.shape(), b.shape()));
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kBool, l.out));
      const T* pa = a.data<const T>();
      const T* pb = b.data<const T>();
      bool* py = y.data<bool>();
      ForEachBroadcast(l.out, l.a_strides, l.b_strides, [&](int64_t o, int64_t ia, int64_t ib) {
        py[o] = ApplyCompare<kOp, MathType<T>>(ToMath(pa[ia]), ToMath(pb[ib]));
      });
      return Status::OK();
    };
    if constexpr (kOp == CompareOp::kEqual) {
      if (a.dtype() == DataType::kBool) return run(TypeTag<bool>{});
    }
    return DispatchNumeric(a.dtype(), op_, run);
  }

 private:
  std::string op_;
};

template <CompareOp kOp>
Result<std::unique_ptr<Kernel>> CreateCompare(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(RejectLegacyBroadcast(info));
  return std::make_unique<CompareKernel<kOp>>(info.node().op_type);
}

// ---- Mod, BitShift ---------------------------------------------------------------------------

// C's truncated remainder (fmod) or the floored one (Python's %). REQUIRES: b != 0.
template <typename T>
T IntMod(T a, T b, bool fmod) {
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return T{0};  // INT_MIN % -1 is undefined in C++
    const T r = static_cast<T>(a % b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) return static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}

class ModKernel final : public Kernel {
 public:
  explicit ModKernel(bool fmod) : fmod_(fmod) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Mod"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckSameDtype("Mod", a, b));
    KILN_ASSIGN_OR_RETURN(BinaryLayout l, LayoutBinary("Mod", a.shape(), b.shape()));
    return DispatchNumeric(a.dtype(), "Mod", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* pa = a.data<const T>();
      const T* pb = b.data<const T>();
      if constexpr (kIsFloatLike<T>) {
        if (!fmod_) {
          return OpError("Mod", "floating-point inputs ({}) need fmod=1", DataTypeName(a.dtype()));
        }
      } else {
        if (l.out.NumElements() > 0) {
          for (int64_t i = 0; i < b.num_elements(); ++i) {
            if (pb[i] == 0) return OpError("Mod", "integer modulo by zero (divisor element {})", i);
          }
        }
      }
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), l.out));
      T* py = y.data<T>();
      ForEachBroadcast(l.out, l.a_strides, l.b_strides, [&](int64_t o, int64_t ia, int64_t ib) {
        if constexpr (kIsFloatLike<T>) {
          py[o] = FromMath<T>(std::fmod(ToMath(pa[ia]), ToMath(pb[ib])));
        } else {
          py[o] = IntMod(pa[ia], pb[ib], fmod_);
        }
      });
      return Status::OK();
    });
  }

 private:
  bool fmod_;
};

class BitShiftKernel final : public Kernel {
 public:
  explicit BitShiftKernel(bool left) : left_(left) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "BitShift"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckSameDtype("BitShift", a, b));
    KILN_ASSIGN_OR_RETURN(BinaryLayout l, LayoutBinary("BitShift", a.shape(), b.shape()));
    return DispatchType<uint8_t, uint16_t, uint32_t, uint64_t>(
        a.dtype(), "BitShift", [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          using U = WrapType<T>;
          KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), l.out));
          const T* pa = a.data<const T>();
          const T* pb = b.data<const T>();
          T* py = y.data<T>();
          ForEachBroadcast(l.out, l.a_strides, l.b_strides, [&](int64_t o, int64_t ia, int64_t ib) {
            const T s = pb[ib];
            if (s >= sizeof(T) * 8) {
              py[o] = T{0};
            } else {
              const U v = static_cast<U>(pa[ia]);
              py[o] = static_cast<T>(left_ ? v << s : v >> s);
            }
          });
          return Status::OK();
        });
  }

 private:
  bool left_;
};

// ---- Pow -------------------------------------------------------------------------------------

// base^exp for integers, exact with wrap-around. REQUIRES: !(base == 0 && exp < 0).
template <typename T, typename E>
T IntPow(T base, E exp) {
  using U = WrapType<T>;
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return T{1};
      if constexpr (std::is_signed_v<T>) {
        if (base == -1) return (exp % 2 == 0) ? T{1} : static_cast<T>(-1);
      }
      return T{0};
    }
  }
  U result = 1, b = static_cast<U>(base);
  auto e = static_cast<std::make_unsigned_t<E>>(exp);
  while (e != 0) {
    if (e & 1u) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

class PowKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Pow"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_ASSIGN_OR_RETURN(BinaryLayout l, LayoutBinary("Pow", a.shape(), b.shape()));
    return DispatchType<float, double, Float16, BFloat16, int32_t, int64_t>(
        a.dtype(), "Pow", [&](auto base_tag) -> Status {
          using T = typename decltype(base_tag)::type;
          return DispatchNumeric(b.dtype(), "Pow", [&](auto exp_tag) -> Status {
            using E = typename decltype(exp_tag)::type;
            const T* pa = a.data<const T>();
            const E* pb = b.data<const E>();
            if constexpr (!kIsFloatLike<T> && std::is_integral_v<E> && std::is_signed_v<E>) {
              bool zero_to_negative = false;
              ForEachBroadcast(
                  l.out, l.a_strides, l.b_strides,
                  [&](auto, auto ia, auto ib) {  // generic: not instantiated for floats
                    zero_to_negative |= pa[ia] == 0 && pb[ib] < 0;
                  });
              if (zero_to_negative) {
                return OpError("Pow", "integer zero raised to a negative power");
              }
            }
            KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), l.out));
            T* py = y.data<T>();
            ForEachBroadcast(
                l.out, l.a_strides, l.b_strides,
                [&](int64_t o, int64_t ia, int64_t ib) { py[o] = PowOne<T, E>(pa[ia], pb[ib]); });
            return Status::OK();
          });
        });
  }

 private:
  template <typename T, typename E>
  static T PowOne(T base, E exp) {
    if constexpr (!kIsFloatLike<T> && std::is_integral_v<E>) {
      return IntPow(base, exp);
    } else {
      const double r =
          std::pow(static_cast<double>(ToMath(base)), static_cast<double>(ToMath(exp)));
      if constexpr (std::is_same_v<T, Float16>) {
        return DoubleToFloat16(r);
      } else if constexpr (std::is_same_v<T, BFloat16>) {
        return DoubleToBFloat16(r);
      } else if constexpr (std::is_floating_point_v<T>) {
        return static_cast<T>(r);
      } else {
        return WrapToInt<T>(r);
      }
    }
  }
};

// ---- PRelu -----------------------------------------------------------------------------------

class PReluKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "PRelu"));
    const Tensor& x = ctx.input(0);
    const Tensor& slope = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckSameDtype("PRelu", x, slope));
    if (!BroadcastsTo(slope.shape(), x.shape())) {
      return OpError("PRelu", "slope {} does not broadcast to the input {}",
                     slope.shape().ToString(), x.shape().ToString());
    }
    const DimArray sx = BroadcastStrides(x.shape(), x.shape());
    const DimArray ss = BroadcastStrides(slope.shape(), x.shape());
    return DispatchType<float, double, Float16, BFloat16, int32_t, int64_t, uint32_t, uint64_t>(
        x.dtype(), "PRelu", [&](auto tag) -> Status {
          using T = typename decltype(tag)::type;
          KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.shape()));
          const T* px = x.data<const T>();
          const T* ps = slope.data<const T>();
          T* py = y.data<T>();
          ForEachBroadcast(x.shape(), sx, ss, [&](int64_t o, int64_t ix, int64_t is) {
            if constexpr (kIsFloatLike<T>) {
              const MathType<T> v = ToMath(px[ix]);
              py[o] = v < 0 ? FromMath<T>(ToMath(ps[is]) * v) : px[ix];
            } else {
              using U = WrapType<T>;
              const T v = px[ix];
              py[o] =
                  v < T{0}
                      ? static_cast<T>(static_cast<U>(static_cast<U>(ps[is]) * static_cast<U>(v)))
                      : v;
            }
          });
          return Status::OK();
        });
  }
};

// ---- Where -----------------------------------------------------------------------------------

class WhereKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, "Where"));
    const Tensor& c = ctx.input(0);
    const Tensor& a = ctx.input(1);
    const Tensor& b = ctx.input(2);
    if (c.dtype() != DataType::kBool) {
      return OpError("Where", "condition must be BOOL, got {}", DataTypeName(c.dtype()));
    }
    KILN_RETURN_IF_ERROR(CheckSameDtype("Where", a, b));
    KILN_ASSIGN_OR_RETURN(Shape ab, BroadcastShapes("Where", a.shape(), b.shape()));
    KILN_ASSIGN_OR_RETURN(Shape out, BroadcastShapes("Where", c.shape(), ab));
    const DimArray sc = BroadcastStrides(c.shape(), out);
    const DimArray sa = BroadcastStrides(a.shape(), out);
    const DimArray sb = BroadcastStrides(b.shape(), out);
    return DispatchAll(a.dtype(), "Where", [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a.dtype(), out));
      const bool* pc = c.data<const bool>();
      const T* pa = a.data<const T>();
      const T* pb = b.data<const T>();
      T* py = y.data<T>();
      ForEachBroadcast3(out, sc, sa, sb, [&](int64_t o, int64_t ic, int64_t ia, int64_t ib) {
        py[o] = pc[ic] ? pa[ia] : pb[ib];
      });
      return Status::OK();
    });
  }
};

// ---- Max, Min, Sum, Mean ---------------------------------------------------------------------

enum class VariadicOp { kMax, kMin, kSum, kMean };

template <VariadicOp kOp, typename C>
C Combine(C acc, C v) {
  if constexpr (kOp == VariadicOp::kSum || kOp == VariadicOp::kMean) {
    return acc + v;
  } else {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(acc) || std::isnan(v)) return std::isnan(acc) ? acc : v;
    }
    if constexpr (kOp == VariadicOp::kMax) return v > acc ? v : acc;
    if constexpr (kOp == VariadicOp::kMin) return v < acc ? v : acc;
  }
}

template <VariadicOp kOp>
class VariadicKernel final : public Kernel {
 public:
  VariadicKernel(std::string op, bool broadcast) : op_(std::move(op)), broadcast_(broadcast) {}

  Status Compute(KernelContext& ctx) const override {
    const int n = ctx.num_inputs();
    if (n < 1) return OpError(op_, "needs at least one input");
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, n, op_));
    const Tensor& first = ctx.input(0);
    Shape out = first.shape();
    for (int i = 1; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      KILN_RETURN_IF_ERROR(CheckSameDtype(op_, first, t));
      if (broadcast_) {
        KILN_ASSIGN_OR_RETURN(out, BroadcastShapes(op_, out, t.shape()));
      } else if (t.shape() != out) {
        return OpError(op_, "input {} has shape {}, expected {} (no broadcasting before opset 8)",
                       i, t.shape().ToString(), out.ToString());
      }
    }
    auto run = [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = MathType<T>;
      const DimArray so = BroadcastStrides(out, out);
      std::vector<C> acc(static_cast<size_t>(out.NumElements()));
      for (int i = 0; i < n; ++i) {
        const Tensor& t = ctx.input(i);
        const T* p = t.data<const T>();
        ForEachBroadcast(out, so, BroadcastStrides(t.shape(), out),
                         [&](int64_t o, int64_t, int64_t it) {
                           const C v = ToMath(p[it]);
                           C& a = acc[static_cast<size_t>(o)];
                           a = i == 0 ? v : Combine<kOp, C>(a, v);
                         });
      }
      KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, first.dtype(), out));
      T* py = y.data<T>();
      for (size_t o = 0; o < acc.size(); ++o) {
        if constexpr (kOp == VariadicOp::kMean) acc[o] /= static_cast<C>(n);
        py[o] = FromMath<T>(acc[o]);
      }
      return Status::OK();
    };
    if constexpr (kOp == VariadicOp::kMax || kOp == VariadicOp::kMin) {
      return DispatchNumeric(first.dtype(), op_, run);
    } else {
      return DispatchFloats(first.dtype(), op_, run);
    }
  }

 private:
  std::string op_;
  bool broadcast_;  // opset >= 8
};

template <VariadicOp kOp>
Result<std::unique_ptr<Kernel>> CreateVariadic(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  if (info.num_inputs() < 1) return OpError(info.node().op_type, "needs at least one input");
  KILN_RETURN_IF_ERROR(RequireInputs(info, info.num_inputs()));
  return std::make_unique<VariadicKernel<kOp>>(info.node().op_type, info.opset() >= 8);
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateAnd(const KernelInfo& info) {
  return CreateLogic(info, LogicOp::kAnd);
}
Result<std::unique_ptr<Kernel>> CreateOr(const KernelInfo& info) {
  return CreateLogic(info, LogicOp::kOr);
}
Result<std::unique_ptr<Kernel>> CreateXor(const KernelInfo& info) {
  return CreateLogic(info, LogicOp::kXor);
}
Result<std::unique_ptr<Kernel>> CreateEqual(const KernelInfo& info) {
  return CreateCompare<CompareOp::kEqual>(info);
}
Result<std::unique_ptr<Kernel>> CreateLess(const KernelInfo& info) {
  return CreateCompare<CompareOp::kLess>(info);
}
Result<std::unique_ptr<Kernel>> CreateGreater(const KernelInfo& info) {
  return CreateCompare<CompareOp::kGreater>(info);
}
Result<std::unique_ptr<Kernel>> CreateLessOrEqual(const KernelInfo& info) {
  return CreateCompare<CompareOp::kLessOrEqual>(info);
}
Result<std::unique_ptr<Kernel>> CreateGreaterOrEqual(const KernelInfo& info) {
  return CreateCompare<CompareOp::kGreaterOrEqual>(info);
}

Result<std::unique_ptr<Kernel>> CreateMod(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_ASSIGN_OR_RETURN(bool fmod, AttrReader(info).Bool("fmod", false));
  return std::make_unique<ModKernel>(fmod);
}

Result<std::unique_ptr<Kernel>> CreateBitShift(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  AttrReader attrs(info);
  if (!attrs.Has("direction")) return OpError("BitShift", "attribute 'direction' is required");
  KILN_ASSIGN_OR_RETURN(std::string direction, attrs.String("direction", ""));
  if (direction != "LEFT" && direction != "RIGHT") {
    return OpError("BitShift", "attribute 'direction' must be LEFT or RIGHT, got '{}'", direction);
  }
  return std::make_unique<BitShiftKernel>(direction == "LEFT");
}

Result<std::unique_ptr<Kernel>> CreatePow(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(RejectLegacyBroadcast(info));
  // Before opset 12 the exponent has the base's dtype.
  if (info.opset() < 12) {
    const DataType base = info.input_type(0).dtype, exp = info.input_type(1).dtype;
    if (base != DataType::kInvalid && exp != DataType::kInvalid && base != exp) {
      return OpError("Pow", "base {} and exponent {} must have one dtype before opset 12",
                     DataTypeName(base), DataTypeName(exp));
    }
  }
  return std::make_unique<PowKernel>();
}

Result<std::unique_ptr<Kernel>> CreatePRelu(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(AttrReader(info).RequireRemovedIn("consumed_inputs", 6));
  return std::make_unique<PReluKernel>();
}

Result<std::unique_ptr<Kernel>> CreateWhere(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 3));
  return std::make_unique<WhereKernel>();
}

Result<std::unique_ptr<Kernel>> CreateMax(const KernelInfo& info) {
  return CreateVariadic<VariadicOp::kMax>(info);
}
Result<std::unique_ptr<Kernel>> CreateMin(const KernelInfo& info) {
  return CreateVariadic<VariadicOp::kMin>(info);
}
Result<std::unique_ptr<Kernel>> CreateSum(const KernelInfo& info) {
  return CreateVariadic<VariadicOp::kSum>(info);
}
Result<std::unique_ptr<Kernel>> CreateMean(const KernelInfo& info) {
  return CreateVariadic<VariadicOp::kMean>(info);
}

}  // namespace kiln::ref
