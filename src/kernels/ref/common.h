// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the reference kernels (internal to src/kernels/ref/): errors that name the
// op, attribute reading with type checks, axis normalization, dtype dispatch and element copies
// that work for every dtype (BYTES elements are std::string and are copied as such).
//
//   KILN_ASSIGN_OR_RETURN(int64_t axis, AttrReader(info).Int("axis", 1));
//   return DispatchType<float, double>(x.dtype(), "Relu", [&](auto tag) -> Status {
//     using T = typename decltype(tag)::type;
//     ...
//   });

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "kernels/kernel.h"
#include "tensor/tensor.h"

namespace kiln::ref {

// INVALID_ARGUMENT "op: message".
template <typename... Args>
Status OpError(std::string_view op, fmt::format_string<Args...> format, Args&&... args) {
  return Status::InvalidArgument(
      fmt::format("{}: {}", op, fmt::format(format, std::forward<Args>(args)...)));
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) for the T in Ts whose DataType is `dtype` and returns its Status;
// INVALID_ARGUMENT naming `op` when no T matches.
template <typename... Ts, typename F>
Status DispatchType(DataType dtype, std::string_view op, F&& f) {
  Status result;
  const bool matched = ((DataTypeOf<Ts>() == dtype && (result = f(TypeTag<Ts>{}), true)) || ...);
  if (!matched) return OpError(op, "unsupported dtype {}", DataTypeName(dtype));
  return result;
}

// Accumulator for sums of products: double for floating point, the unsigned counterpart for
// integers (so that overflow wraps modulo 2^n instead of being undefined).
template <typename T>
using AccType = typename std::conditional_t<std::is_floating_point_v<T>, std::type_identity<double>,
                                            std::make_unsigned<T>>::type;

// Input `i` must be present, on the CPU, and contiguous (the reference kernels index densely).
inline Status CheckInput(const KernelContext& ctx, int i, std::string_view op) {
  if (!ctx.has_input(i)) return OpError(op, "required input {} is missing", i);
  const Tensor& t = ctx.input(i);
  if (!t.device().is_cpu()) {
    return OpError(op, "input {} is on {}, reference kernels run on the CPU", i,
                   t.device().ToString());
  }
  if (!t.is_contiguous()) return OpError(op, "input {} is not contiguous", i);
  return Status::OK();
}

// Checks inputs 0..n-1 with CheckInput and that output 0 has a slot.
inline Status CheckInputs(const KernelContext& ctx, int n, std::string_view op) {
  for (int i = 0; i < n; ++i) KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  if (ctx.num_outputs() < 1) return OpError(op, "no output slot");
  return Status::OK();
}

// Factory-side check that inputs 0..n-1 are present.
inline Status RequireInputs(const KernelInfo& info, int n) {
  for (int i = 0; i < n; ++i) {
    if (!info.has_input(i)) return OpError(info.node().op_type, "required input {} is missing", i);
  }
  if (!info.has_output(0)) {
    return OpError(info.node().op_type, "output 0 is missing");
  }
  return Status::OK();
}

// Factory-side check that no output at index >= n is present.
inline Status LimitOutputs(const KernelInfo& info, int n, std::string_view why) {
  for (int i = n; i < info.num_outputs(); ++i) {
    if (info.has_output(i)) {
      return OpError(info.node().op_type, "output {} is not supported: {}", i, why);
    }
  }
  return Status::OK();
}

// Maps `axis` to [0, rank) (or [0, rank] when `inclusive_end`). Negative values count from the
// back when `allow_negative`; the error names the op and the accepted range.
inline Result<int> NormalizeAxis(std::string_view op, int64_t axis, int rank, bool allow_negative,
                                 bool inclusive_end = false) {
  const int64_t hi = inclusive_end ? rank : rank - 1;
  const int64_t lo = allow_negative ? -rank : 0;
  if (axis < lo || axis > hi) {
    return OpError(op, "axis {} is out of range [{}, {}] for an input of rank {}", axis, lo, hi,
                   rank);
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Every numeric dtype (floats, 16-bit floats, signed and unsigned integers); not BOOL or BYTES.
template <typename F>
Status DispatchNumeric(DataType dtype, std::string_view op, F&& f) {
  return DispatchType<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t,
                      uint16_t, uint32_t, uint64_t>(dtype, op, std::forward<F>(f));
}
// Every dtype, BOOL and BYTES (std::string) included.
template <typename F>
Status DispatchAll(DataType dtype, std::string_view op, F&& f) {
  return DispatchType<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t,
                      uint16_t, uint32_t, uint64_t, bool, std::string>(dtype, op,
                                                                       std::forward<F>(f));
}

// Element `i` of `t` as a double, for every numeric dtype (DispatchNumeric's; 16-bit floats
// widened exactly, 64-bit integers rounded to the nearest double) and BOOL (0 or 1). BYTES and
// invalid tensors read as NaN: a kernel that takes only some dtypes checks them first.
// REQUIRES: t is on the CPU and contiguous, 0 <= i < t.num_elements().
inline double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat32:
      return static_cast<double>(t.data<const float>()[i]);
    case DataType::kFloat64:
      return t.data<const double>()[i];
    case DataType::kFloat16:
      return static_cast<double>(Float16ToFloat(t.data<const Float16>()[i]));
    case DataType::kBFloat16:
      return static_cast<double>(BFloat16ToFloat(t.data<const BFloat16>()[i]));
    case DataType::kInt8:
      return static_cast<double>(t.data<const int8_t>()[i]);
    case DataType::kInt16:
      return static_cast<double>(t.data<const int16_t>()[i]);
    case DataType::kInt32:
      return static_cast<double>(t.data<const int32_t>()[i]);
    case DataType::kInt64:
      return static_cast<double>(t.data<const int64_t>()[i]);
    case DataType::kUint8:
      return static_cast<double>(t.data<const uint8_t>()[i]);
    case DataType::kUint16:
      return static_cast<double>(t.data<const uint16_t>()[i]);
    case DataType::kUint32:
      return static_cast<double>(t.data<const uint32_t>()[i]);
    case DataType::kUint64:
      return static_cast<double>(t.data<const uint64_t>()[i]);
    case DataType::kBool:
      return t.data<const bool>()[i] ? 1.0 : 0.0;
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// 16-bit floats are computed in float: MathType<T> is the type arithmetic on T uses, ToMath and
// FromMath convert (FromMath rounds to nearest even).
template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
// FP16, BF16, FP32, FP64.
template <typename T>
inline constexpr bool kIsFloatLike = std::is_floating_point_v<T> || kIsHalf<T>;

template <typename T>
using MathType = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T>
MathType<T> ToMath(T v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return Float16ToFloat(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16ToFloat(v);
  } else {
    return v;
  }
}

template <typename T>
T FromMath(MathType<T> v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return FloatToFloat16(v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return FloatToBFloat16(v);
  } else {
    return v;
  }
}

// kiln dtype for an ONNX TensorProto.DataType number, as attributes such as Cast's `to` or
// EyeLike's `dtype` give it; nullopt for UNDEFINED, COMPLEX64/128 and numbers kiln has no type
// for.
inline std::optional<DataType> DataTypeFromOnnxNumber(int64_t v) {
  switch (v) {
    case 1:
      return DataType::kFloat32;
    case 2:
      return DataType::kUint8;
    case 3:
      return DataType::kInt8;
    case 4:
      return DataType::kUint16;
    case 5:
      return DataType::kInt16;
    case 6:
      return DataType::kInt32;
    case 7:
      return DataType::kInt64;
    case 8:
      return DataType::kBytes;
    case 9:
      return DataType::kBool;
    case 10:
      return DataType::kFloat16;
    case 11:
      return DataType::kFloat64;
    case 12:
      return DataType::kUint32;
    case 13:
      return DataType::kUint64;
    case 16:
      return DataType::kBFloat16;
    default:
      return std::nullopt;
  }
}

// Product of dims[begin, end).
inline int64_t DimProduct(std::span<const int64_t> dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// Reads node attributes, checking that a present attribute has the expected type. Errors name
// the op and the attribute.
class AttrReader {
 public:
  explicit AttrReader(const KernelInfo& info) : node_(info.node()), opset_(info.opset()) {}

  const std::string& op() const { return node_.op_type; }
  bool Has(std::string_view name) const { return node_.FindAttribute(name) != nullptr; }

  Result<int64_t> Int(std::string_view name, int64_t default_value) const {
    const Attribute* a = node_.FindAttribute(name);
    if (a == nullptr) return default_value;
    if (a->type != AttributeType::kInt) return WrongType(name, "an INT");
    return a->i;
  }
  Result<float> Float(std::string_view name, float default_value) const {
    const Attribute* a = node_.FindAttribute(name);
    if (a == nullptr) return default_value;
    if (a->type != AttributeType::kFloat) return WrongType(name, "a FLOAT");
    return a->f;
  }
  Result<std::string> String(std::string_view name, std::string_view default_value) const {
    const Attribute* a = node_.FindAttribute(name);
    if (a == nullptr) return std::string(default_value);
    if (a->type != AttributeType::kString) return WrongType(name, "a STRING");
    return a->s;
  }
  // Empty when absent.
  Result<std::vector<int64_t>> Ints(std::string_view name) const {
    const Attribute* a = node_.FindAttribute(name);
    if (a == nullptr) return std::vector<int64_t>{};
    if (a->type != AttributeType::kInts) return WrongType(name, "an INTS");
    return a->ints;
  }
  // A 0/1 flag.
  Result<bool> Bool(std::string_view name, bool default_value) const {
    KILN_ASSIGN_OR_RETURN(int64_t v, Int(name, default_value ? 1 : 0));
    if (v != 0 && v != 1) {
      return OpError(op(), "attribute '{}' must be 0 or 1, got {}", name, v);
    }
    return v == 1;
  }

  // INVALID_ARGUMENT when `name` is present but the node's opset predates it.
  Status RequireOpset(std::string_view name, int64_t since) const {
    if (Has(name) && opset_ < since) {
      return OpError(op(), "attribute '{}' is not defined before opset {} (model uses opset {})",
                     name, since, opset_);
    }
    return Status::OK();
  }
  // INVALID_ARGUMENT when `name` is present and the node's opset is >= `removed_in`.
  Status RequireRemovedIn(std::string_view name, int64_t removed_in) const {
    if (Has(name) && opset_ >= removed_in) {
      return OpError(op(), "attribute '{}' was removed in opset {} (model uses opset {})", name,
                     removed_in, opset_);
    }
    return Status::OK();
  }

 private:
  Status WrongType(std::string_view name, std::string_view want) const {
    return OpError(op(), "attribute '{}' must be {}", name, want);
  }

  const NodeDesc& node_;
  int64_t opset_;
};

// Element movers: copy element `from` of a source buffer to element `to` of a destination
// buffer. PodMover<N> moves N-byte plain elements (every non-BYTES dtype) with memcpy;
// StringMover assigns std::string elements.
template <size_t N>
struct PodMover {
  const std::byte* src;
  std::byte* dst;
  void operator()(int64_t to, int64_t from) const {
    std::memcpy(dst + to * static_cast<int64_t>(N), src + from * static_cast<int64_t>(N), N);
  }
};
struct StringMover {
  const std::string* src;
  std::string* dst;
  void operator()(int64_t to, int64_t from) const { dst[to] = src[from]; }
};

// Calls f(mover) with the mover for src's dtype. REQUIRES: src.dtype() == dst.dtype().
template <typename F>
void WithMover(const Tensor& src, const Tensor& dst, F&& f) {
  KILN_CHECK(src.dtype() == dst.dtype(), "WithMover: dtype mismatch");
  if (src.dtype() == DataType::kBytes) {
    f(StringMover{static_cast<const std::string*>(src.raw_data()),
                  static_cast<std::string*>(dst.raw_data())});
    return;
  }
  const auto* s = static_cast<const std::byte*>(src.raw_data());
  auto* d = static_cast<std::byte*>(dst.raw_data());
  switch (DataTypeSize(src.dtype())) {
    case 1:
      f(PodMover<1>{s, d});
      return;
    case 2:
      f(PodMover<2>{s, d});
      return;
    case 4:
      f(PodMover<4>{s, d});
      return;
    case 8:
      f(PodMover<8>{s, d});
      return;
    default:
      KILN_CHECK(false, "no mover for dtype ", DataTypeName(src.dtype()));
  }
}

// Copies `n` consecutive elements: src[src_offset, +n) to dst[dst_offset, +n) (element offsets).
// REQUIRES: same dtype, ranges in bounds.
inline void CopyElements(const Tensor& src, int64_t src_offset, const Tensor& dst,
                         int64_t dst_offset, int64_t n) {
  KILN_CHECK(src.dtype() == dst.dtype(), "CopyElements: dtype mismatch");
  if (n <= 0) return;
  if (src.dtype() == DataType::kBytes) {
    const auto* s = static_cast<const std::string*>(src.raw_data()) + src_offset;
    auto* d = static_cast<std::string*>(dst.raw_data()) + dst_offset;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  const size_t elem = DataTypeSize(src.dtype());
  std::memcpy(
      static_cast<std::byte*>(dst.raw_data()) + static_cast<size_t>(dst_offset) * elem,
      static_cast<const std::byte*>(src.raw_data()) + static_cast<size_t>(src_offset) * elem,
      static_cast<size_t>(n) * elem);
}

// Allocates output 0 with src's dtype and `shape` and copies all of src into it.
// REQUIRES: shape.NumElements() == src.num_elements().
inline Status CopyToOutput(KernelContext& ctx, const Tensor& src, const Shape& shape) {
  KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, src.dtype(), shape));
  CopyElements(src, 0, y, 0, src.num_elements());
  return Status::OK();
}

// Output 0 is input 0 under `shape` (view ops): input 0's memory itself when the runtime lends
// it (KernelContext::ForwardInput), else a copy.
// REQUIRES: shape.NumElements() == ctx.input(0).num_elements().
inline Status ForwardOrCopyInput(KernelContext& ctx, const Shape& shape) {
  if (ctx.ForwardInput(0, 0, shape)) return Status::OK();
  return CopyToOutput(ctx, ctx.input(0), shape);
}

// The Reshape rule (shared by the reference and device kernels): at most one -1 (inferred), 0
// copies the input dim at the same index unless allowzero (then 0 is a zero dim, and -1 may not
// appear with it), other negatives are invalid. INVALID_ARGUMENT naming the problem.
Result<Shape> ReshapeTarget(const Shape& in, std::span<const int64_t> spec, bool allow_zero);

}  // namespace kiln::ref
