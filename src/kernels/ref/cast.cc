// SPDX-License-Identifier: Apache-2.0
// Reference Cast and CastLike kernels: every pair of kiln dtypes ONNX allows (numbers, BOOL,
// FP16/BF16, BYTES strings).
//
// NOTE on the approach: a two-level dtype dispatch picks a scalar converter per (from, to) pair.
// Rules:
//  - to BOOL: x != 0 (NaN is true); from BOOL: 0 or 1.
//  - integer -> integer: modulo 2^n (two's complement truncation, as C++20 and numpy).
//  - float -> integer: truncation toward zero; NaN -> 0 and out-of-range values -> WrapToInt
//    (ONNX leaves them undefined; this keeps them defined and deterministic).
//  - -> FP16/BF16: round to nearest even, straight from double (no double rounding).
//  - number -> string: numpy's str(): shortest round-trip digits of the source type, positional
//    for 1e-4 <= |x| < 1e16 (integral values get ".0"), otherwise d.ddde+XX; "nan", "inf",
//    "-inf"; integers in decimal; BOOL as "True"/"False".
//  - string -> number: decimal or scientific text, optional sign, "inf"/"infinity"/"nan" in any
//    case, surrounding blanks ignored; "True"/"False" for BOOL. Anything else is
//    INVALID_ARGUMENT naming the element.
// Cast's `to` is a TensorProto.DataType number (Cast-1's type names are converted by the importer's
// version adapter); BYTES targets need opset 9, BF16 opset 13. CastLike (15) takes the target
// dtype from its second input.

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "kernels/ref/common.h"
#include "kernels/ref/factories.h"
#include "kernels/ref/math_common.h"

namespace kiln::ref {
namespace {

// ---- number -> string ------------------------------------------------------------------------

// numpy-style text for `digits` (significant digits, no dot) times 10^exp10 (the exponent of the
// first digit).
std::string FormatDecimal(bool negative, std::string_view digits, int exp10) {
  std::string s = negative ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    s += digits[0];
    if (digits.size() > 1) {
      s += '.';
      s += digits.substr(1);
    }
    s += exp10 < 0 ? "e-" : "e+";
    const int e = std::abs(exp10);
    if (e < 10) s += '0';
    s += std::to_string(e);
    return s;
  }
  const int n = static_cast<int>(digits.size());
  if (exp10 < 0) {
    s += "0.";
    s.append(static_cast<size_t>(-exp10 - 1), '0');
    s += digits;
    return s;
  }
  if (n <= exp10 + 1) {
    s += digits;
    s.append(static_cast<size_t>(exp10 + 1 - n), '0');
    s += ".0";
  } else {
    s += digits.substr(0, static_cast<size_t>(exp10) + 1);
    s += '.';
    s += digits.substr(static_cast<size_t>(exp10) + 1);
  }
  return s;
}

// Splits to_chars scientific output "d.ddde-XX" into digits and exponent.
void SplitScientific(std::string_view sci, std::string* digits, int* exp10) {
  const size_t e = sci.find('e');
  digits->clear();
  for (char c : sci.substr(0, e)) {
    if (c != '.') *digits += c;
  }
  while (digits->size() > 1 && digits->back() == '0') digits->pop_back();
  *exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
}

// Text of a floating-point value with the fewest digits that read back to the same T.
template <typename T>
std::string FloatToString(T value) {
  const double d = static_cast<double>(ToMath(value));
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  const bool negative = std::signbit(d);
  if (d == 0) return negative ? "-0.0" : "0.0";
  char buf[64];
  std::string digits;
  int exp10 = 0;
  if constexpr (std::is_floating_point_v<T>) {
    const auto r =
        std::to_chars(buf, buf + sizeof buf, std::abs(value), std::chars_format::scientific);
    SplitScientific(std::string_view(buf, static_cast<size_t>(r.ptr - buf)), &digits, &exp10);
  } else {
    // FP16/BF16: the shortest precision whose float text rounds back to the same bits.
    const float f = std::abs(ToMath(value));
    for (int precision = 0; precision < 9; ++precision) {
      const auto r =
          std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific, precision);
      const std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
      float back = 0;
      std::from_chars(sci.data(), sci.data() + sci.size(), back);
      if (FromMath<T>(back) == FromMath<T>(f)) {
        SplitScientific(sci, &digits, &exp10);
        break;
      }
    }
  }
  return FormatDecimal(negative, digits, exp10);
}

template <typename From>
std::string ToText(From v) {
  if constexpr (std::is_same_v<From, bool>) {
    return v ? "True" : "False";
  } else if constexpr (kIsFloatLike<From>) {
    return FloatToString(v);
  } else {
    return std::to_string(v);
  }
}

// ---- string -> number ------------------------------------------------------------------------

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// Parses `text` as To. nullopt when it is not a number.
template <typename To>
std::optional<To> ParseText(std::string_view text) {
  std::string_view s = Trim(text);
  if constexpr (std::is_same_v<To, bool>) {
    if (s == "True" || s == "true") return true;
    if (s == "False" || s == "false") return false;
  }
  const bool plus = !s.empty() && s.front() == '+';
  if (plus) s.remove_prefix(1);
  if (s.empty() || (plus && s.front() == '-')) return std::nullopt;
  if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    To v{};
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return v;
  }
  double d = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ptr != s.data() + s.size() ||
      (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) {
    return std::nullopt;
  }
  if (r.ec == std::errc::result_out_of_range) {
    // Overflow to +-inf, underflow to 0 (from_chars leaves `d` unset then).
    d = std::strtod(std::string(s).c_str(), nullptr);
  }
  if constexpr (std::is_same_v<To, bool>) {
    return d != 0;
  } else if constexpr (std::is_same_v<To, Float16>) {
    return DoubleToFloat16(d);
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return DoubleToBFloat16(d);
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(d);
  } else {
    return WrapToInt<To>(d);
  }
}

// ---- number -> number ------------------------------------------------------------------------

template <typename From, typename To>
To ConvertNumber(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return ToMath(v) != MathType<From>{0};
  } else if constexpr (std::is_same_v<From, bool>) {
    return ConvertNumber<uint8_t, To>(v ? 1 : 0);
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));
  } else if constexpr (std::is_integral_v<From> && std::is_floating_point_v<To>) {
    return static_cast<To>(v);  // one rounding
  } else if constexpr (std::is_integral_v<To>) {
    return WrapToInt<To>(static_cast<double>(ToMath(v)));
  } else {
    // To is floating-point like; From is a float-like or an integer bound for FP16/BF16.
    const double d = static_cast<double>(ToMath(v));
    if constexpr (std::is_same_v<To, Float16>) {
      return DoubleToFloat16(d);
    } else if constexpr (std::is_same_v<To, BFloat16>) {
      return DoubleToBFloat16(d);
    } else {
      return static_cast<To>(d);
    }
  }
}

// Converts every element of x into y (same shape, y's dtype).
Status CastElements(std::string_view op, const Tensor& x, const Tensor& y) {
  const int64_t n = x.num_elements();
  return DispatchAll(x.dtype(), op, [&](auto from_tag) -> Status {
    using From = typename decltype(from_tag)::type;
    const From* px = x.data<const From>();
    return DispatchAll(y.dtype(), op, [&](auto to_tag) -> Status {
      using To = typename decltype(to_tag)::type;
      To* py = y.data<To>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<From, To>) {
          py[i] = px[i];
        } else if constexpr (std::is_same_v<To, std::string>) {
          py[i] = ToText(px[i]);
        } else if constexpr (std::is_same_v<From, std::string>) {
          std::optional<To> v = ParseText<To>(px[i]);
          if (!v.has_value()) {
            return OpError(op, "element {} ('{}') is not a {} number", i, px[i].substr(0, 64),
                           DataTypeName(y.dtype()));
          }
          py[i] = *v;
        } else {
          py[i] = ConvertNumber<From, To>(px[i]);
        }
      }
      return Status::OK();
    });
  });
}

class CastKernel final : public Kernel {
 public:
  // `to` is nullopt for CastLike (the dtype of input 1).
  CastKernel(std::string op, std::optional<DataType> to) : op_(std::move(op)), to_(to) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, to_.has_value() ? 1 : 2, op_));
    const Tensor& x = ctx.input(0);
    const DataType to = to_.has_value() ? *to_ : ctx.input(1).dtype();
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, to, x.shape()));
    return CastElements(op_, x, y);
  }

 private:
  std::string op_;
  std::optional<DataType> to_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateCast(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 1));
  const Attribute* attr = info.node().FindAttribute("to");
  if (attr == nullptr) return OpError("Cast", "attribute 'to' is required");
  if (attr->type != AttributeType::kInt) return OpError("Cast", "attribute 'to' must be an INT");
  const std::optional<DataType> to = DataTypeFromOnnxNumber(attr->i);
  if (!to.has_value()) {
    return OpError("Cast", "attribute 'to' is {}, not a supported TensorProto data type", attr->i);
  }
  if (*to == DataType::kBytes && info.opset() < 9) {
    return OpError("Cast", "casting to STRING needs opset 9 (model uses opset {})", info.opset());
  }
  if (*to == DataType::kBFloat16 && info.opset() < 13) {
    return OpError("Cast", "casting to BFLOAT16 needs opset 13 (model uses opset {})",
                   info.opset());
  }
  return std::make_unique<CastKernel>("Cast", to);
}

Result<std::unique_ptr<Kernel>> CreateCastLike(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(RequireInputs(info, 2));
  return std::make_unique<CastKernel>("CastLike", std::nullopt);
}

}  // namespace kiln::ref
