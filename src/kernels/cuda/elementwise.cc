// SPDX-License-Identifier: Apache-2.0
// The CUDA kernels of the elementwise ops (tables.h: ElementwiseKernelDefs): the binary math ops
// Add Sub Mul Div Pow PRelu, the comparisons Equal Less Greater LessOrEqual GreaterOrEqual, the
// logic ops And Or Xor Not, Where, the variadic Max Min Sum Mean, the unary math and activation
// ops (Relu ... Shrink, Clip), Cast and Expand; ai.kiln Gelu and ChannelAffine. Device code in
// elementwise.cu and elementwise_unary.cu (elementwise_launch.h).
//
// NOTE on the table. The rows follow the reference table's opset ranges (ref/table_math.inc,
// table_tensor.inc, ref_kernels.inc), narrowed to the types these kernels take: FP32 and FP16
// where ONNX has no BF16 yet, BF16 from the opset that adds it; INT32 / INT64 for Add Sub Mul Div
// Neg Abs Max Min and the comparisons; BOOL for the logic ops and Equal; Where and Expand move
// any 1-, 2-, 4- or 8-byte element of those types and INT8 / UINT8. Neighbouring reference rows
// whose differences the factory reads from the opset (Clip's attributes before 11, the variadic
// ops' equal shapes at 7, Pow's exponent dtype before 12) share a row when their types agree.
// Each kernel checks the runtime dtype again (a declared type may be unknown).
//
// NOTE on what stays on the CPU (`supports` declines, placement keeps the node on the CPU):
// Max / Min / Sum / Mean with more than 3 inputs; Clip whose min / max inputs are not constant;
// Expand whose shape is not constant; Cast to or from a type outside FP32 FP16 BF16 FP64 INT32
// INT64 INT8 UINT8 BOOL (strings, 16-bit and unsigned wide integers); Pow with an exponent type
// other than FP32 FP16 BF16 INT32 INT64; ChannelAffine on the blocked layout (block != 0).
//
// NOTE on one deviation. The reference rejects an integer Div by zero with INVALID_ARGUMENT after
// reading the divisor; here the divisor is on the device and Compute never reads device memory,
// so a zero divisor gives 0 in that element instead of an error.

#include <cfloat>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/elementwise_launch.h"
#include "kernels/cuda/tables.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/common.h"
#include "kernels/ref/math_common.h"
#include "kernels/ref/tensor_family_util.h"
#include "op/kiln_ops.h"

namespace kiln::cuda {
namespace {

using ref::AttrReader;
using ref::OpError;

// FP32 and FP16: the float types of an ONNX op before it takes BF16.
constexpr DataTypeMask kF32F16 = TypeMask({DataType::kFloat32, DataType::kFloat16});
constexpr DataTypeMask kF32Only = TypeBit(DataType::kFloat32);
constexpr DataTypeMask kInts = TypeMask({DataType::kInt32, DataType::kInt64});
constexpr DataTypeMask kBoolOnly = TypeBit(DataType::kBool);
// The byte-sized types Where and Expand also move.
constexpr DataTypeMask kSmallTypes = TypeMask({DataType::kBool, DataType::kInt8, DataType::kUint8});
constexpr DataTypeMask kNoBF16 = ~TypeBit(DataType::kBFloat16);
// What Cast converts between.
constexpr DataTypeMask kCastTypes =
    kCudaFloatTypes | kInts | kSmallTypes | TypeBit(DataType::kFloat64);
// Pow's exponent types.
constexpr DataTypeMask kPowExponentTypes = kCudaFloatTypes | kInts;

// Input i is present and dense.
Status CheckInput(const KernelContext& ctx, int i, std::string_view op) {
  if (i >= ctx.num_inputs() || !ctx.input(i).valid()) {
    return OpError(op, "required input {} is missing", i);
  }
  if (!ctx.input(i).is_contiguous()) return OpError(op, "input {} is not contiguous", i);
  return Status::OK();
}

Status CheckInputs(const KernelContext& ctx, int n, std::string_view op) {
  for (int i = 0; i < n; ++i) KILN_RETURN_IF_ERROR(CheckInput(ctx, i, op));
  if (ctx.num_outputs() < 1) return OpError(op, "no output slot");
  return Status::OK();
}

Status CheckType(std::string_view op, DataType dtype, DataTypeMask types) {
  if ((TypeBit(dtype) & types) == 0) {
    return OpError(op, "unsupported dtype {}", DataTypeName(dtype));
  }
  return Status::OK();
}

Status CheckSameType(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return OpError(op, "inputs have different dtypes {} and {}", DataTypeName(a.dtype()),
                   DataTypeName(b.dtype()));
  }
  return Status::OK();
}

Result<Broadcast> BroadcastOf(std::string_view op, const std::vector<Shape>& shapes) {
  Result<Broadcast> b = BroadcastShapes(shapes);
  if (!b.ok()) return b.status().WithContext(op);
  return b;
}

// ---- Binary ops ---------------------------------------------------------------------------------

constexpr bool IsBoolResult(BinaryOp op) {
  return op != BinaryOp::kAdd && op != BinaryOp::kSub && op != BinaryOp::kMul &&
         op != BinaryOp::kDiv && op != BinaryOp::kPRelu;
}

constexpr DataTypeMask BinaryTypes(BinaryOp op) {
  switch (op) {
    case BinaryOp::kPRelu:
      return kCudaFloatTypes;
    case BinaryOp::kAnd:
    case BinaryOp::kOr:
    case BinaryOp::kXor:
      return kBoolOnly;
    case BinaryOp::kEqual:
      return kCudaFloatTypes | kInts | kBoolOnly;
    default:
      return kCudaFloatTypes | kInts;
  }
}

class BinaryKernel final : public Kernel {
 public:
  BinaryKernel(std::string op, BinaryOp kind) : op_(std::move(op)), kind_(kind) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, op_));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckSameType(op_, a, b));
    KILN_RETURN_IF_ERROR(CheckType(op_, a.dtype(), BinaryTypes(kind_)));
    if (kind_ == BinaryOp::kPRelu && !ref::BroadcastsTo(b.shape(), a.shape())) {
      return OpError(op_, "slope {} does not broadcast to the input {}", b.shape().ToString(),
                     a.shape().ToString());
    }
    KILN_ASSIGN_OR_RETURN(Broadcast bc, BroadcastOf(op_, {a.shape(), b.shape()}));
    KILN_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(a.dtype()));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    const DataType out = IsBoolResult(kind_) ? DataType::kBool : a.dtype();
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, out, bc.output));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchBinary(kind_, type, a.raw_data(), bc.inputs[0], b.raw_data(), bc.inputs[1],
                              y.raw_data(), y.num_elements(), stream));
    return Status::OK();
  }

 private:
  std::string op_;
  BinaryOp kind_;
};

template <BinaryOp kOp>
Result<std::unique_ptr<Kernel>> CreateBinary(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  if constexpr (kOp == BinaryOp::kPRelu) {
    KILN_RETURN_IF_ERROR(AttrReader(info).RequireRemovedIn("consumed_inputs", 6));
  } else {
    KILN_RETURN_IF_ERROR(ref::RejectLegacyBroadcast(info));
  }
  return std::make_unique<BinaryKernel>(info.node().op_type, kOp);
}

// ---- Pow ----------------------------------------------------------------------------------------

class PowKernel final : public Kernel {
 public:
  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 2, "Pow"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_RETURN_IF_ERROR(CheckType("Pow", a.dtype(), kCudaFloatTypes));
    if ((TypeBit(b.dtype()) & kPowExponentTypes) == 0) {
      return OpError("Pow", "unsupported exponent dtype {}", DataTypeName(b.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(Broadcast bc, BroadcastOf("Pow", {a.shape(), b.shape()}));
    KILN_ASSIGN_OR_RETURN(ElemType base_type, ElemTypeOf(a.dtype()));
    KILN_ASSIGN_OR_RETURN(ElemType exp_type, ElemTypeOf(b.dtype()));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, a.dtype(), bc.output));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchPow(base_type, a.raw_data(), bc.inputs[0], exp_type, b.raw_data(),
                           bc.inputs[1], y.raw_data(), y.num_elements(), stream));
    return Status::OK();
  }
};

Result<std::unique_ptr<Kernel>> CreatePow(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  KILN_RETURN_IF_ERROR(ref::RejectLegacyBroadcast(info));
  if (info.opset() < 12) {
    const DataType base = info.input_type(0).dtype, exp = info.input_type(1).dtype;
    if (base != DataType::kInvalid && exp != DataType::kInvalid && base != exp) {
      return OpError("Pow", "base {} and exponent {} must have one dtype before opset 12",
                     DataTypeName(base), DataTypeName(exp));
    }
  }
  return std::make_unique<PowKernel>();
}

// An exponent of a type the kernel lacks (INT8, FP64, ...) stays on the CPU.
bool SupportsPow(const KernelInfo& info) {
  const DataType exp = info.input_type(1).dtype;
  return exp == DataType::kInvalid || (TypeBit(exp) & kPowExponentTypes) != 0;
}

// ---- Max, Min, Sum, Mean ------------------------------------------------------------------------

class VariadicKernel final : public Kernel {
 public:
  VariadicKernel(std::string op, VariadicOp kind, bool broadcast)
      : op_(std::move(op)), kind_(kind), broadcast_(broadcast) {}

  Status Compute(KernelContext& ctx) const override {
    const int n = ctx.num_inputs();
    if (n < 1 || n > 3) return OpError(op_, "takes 1 to 3 inputs here, got {}", n);
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, n, op_));
    const Tensor& first = ctx.input(0);
    const DataTypeMask types = kind_ == VariadicOp::kMax || kind_ == VariadicOp::kMin
                                   ? kCudaFloatTypes | kInts
                                   : kCudaFloatTypes;
    KILN_RETURN_IF_ERROR(CheckType(op_, first.dtype(), types));
    std::vector<Shape> shapes;
    const void* data[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      KILN_RETURN_IF_ERROR(CheckSameType(op_, first, t));
      if (!broadcast_ && t.shape() != first.shape()) {
        return OpError(op_, "input {} has shape {}, expected {} (no broadcasting before opset 8)",
                       i, t.shape().ToString(), first.shape().ToString());
      }
      shapes.push_back(t.shape());
      data[i] = t.raw_data();
    }
    KILN_ASSIGN_OR_RETURN(Broadcast bc, BroadcastOf(op_, shapes));
    KILN_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(first.dtype()));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, first.dtype(), bc.output));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchVariadic(kind_, type, n, data, bc.inputs.data(), y.raw_data(),
                                y.num_elements(), stream));
    return Status::OK();
  }

 private:
  std::string op_;
  VariadicOp kind_;
  bool broadcast_;  // opset >= 8
};

template <VariadicOp kOp>
Result<std::unique_ptr<Kernel>> CreateVariadic(const KernelInfo& info) {
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  if (info.num_inputs() < 1) return OpError(info.node().op_type, "needs at least one input");
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, info.num_inputs()));
  return std::make_unique<VariadicKernel>(info.node().op_type, kOp, info.opset() >= 8);
}

// More than 3 inputs stay on the CPU.
bool SupportsVariadic(const KernelInfo& info) {
  return info.num_inputs() >= 1 && info.num_inputs() <= 3;
}

// ---- Where --------------------------------------------------------------------------------------

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
    KILN_RETURN_IF_ERROR(CheckSameType("Where", a, b));
    KILN_RETURN_IF_ERROR(CheckType("Where", a.dtype(), kCudaFloatTypes | kInts | kSmallTypes));
    KILN_ASSIGN_OR_RETURN(Broadcast bc, BroadcastOf("Where", {c.shape(), a.shape(), b.shape()}));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, a.dtype(), bc.output));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchWhere(static_cast<int>(DataTypeSize(a.dtype())), c.raw_data(), bc.inputs[0],
                             a.raw_data(), bc.inputs[1], b.raw_data(), bc.inputs[2], y.raw_data(),
                             y.num_elements(), stream));
    return Status::OK();
  }
};

Result<std::unique_ptr<Kernel>> CreateWhere(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 3));
  return std::make_unique<WhereKernel>();
}

// ---- Expand -------------------------------------------------------------------------------------

class ExpandKernel final : public Kernel {
 public:
  explicit ExpandKernel(Shape target) : target_(std::move(target)) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Expand"));
    const Tensor& x = ctx.input(0);
    KILN_RETURN_IF_ERROR(CheckType("Expand", x.dtype(), kCudaFloatTypes | kInts | kSmallTypes));
    KILN_ASSIGN_OR_RETURN(Broadcast bc, BroadcastOf("Expand", {x.shape(), target_}));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), bc.output));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchBroadcastCopy(static_cast<int>(DataTypeSize(x.dtype())), x.raw_data(),
                                     bc.inputs[0], y.raw_data(), y.num_elements(), stream));
    return Status::OK();
  }

 private:
  Shape target_;  // the shape input
};

Result<std::unique_ptr<Kernel>> CreateExpand(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 2));
  const OwnedTensor* shape = info.constant_input(1);
  if (shape == nullptr) return OpError("Expand", "the shape input must be a constant here");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> spec,
                        ref::ReadIntList(shape->view(), "Expand", "the shape input"));
  if (spec.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return OpError("Expand", "shape has {} dims, more than the supported {}", spec.size(),
                   Shape::kMaxRank);
  }
  KILN_ASSIGN_OR_RETURN(Shape target, ref::MakeShape("Expand", spec));
  return std::make_unique<ExpandKernel>(std::move(target));
}

// A shape computed at run time stays on the CPU.
bool SupportsExpand(const KernelInfo& info) { return info.constant_input(1) != nullptr; }

// ---- Cast ---------------------------------------------------------------------------------------

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(DataType to) : to_(to) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Cast"));
    const Tensor& x = ctx.input(0);
    KILN_RETURN_IF_ERROR(CheckType("Cast", x.dtype(), kCastTypes));
    KILN_ASSIGN_OR_RETURN(ElemType from, ElemTypeOf(x.dtype()));
    KILN_ASSIGN_OR_RETURN(ElemType to, ElemTypeOf(to_));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, to_, x.shape()));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchCast(from, to, x.raw_data(), y.raw_data(), y.num_elements(), stream));
    return Status::OK();
  }

 private:
  DataType to_;
};

// Cast's `to` when it is a valid INT attribute naming a kiln type.
std::optional<DataType> CastTarget(const KernelInfo& info) {
  const Attribute* attr = info.node().FindAttribute("to");
  if (attr == nullptr || attr->type != AttributeType::kInt) return std::nullopt;
  return ref::DataTypeFromOnnxNumber(attr->i);
}

Result<std::unique_ptr<Kernel>> CreateCast(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 1));
  const Attribute* attr = info.node().FindAttribute("to");
  if (attr == nullptr) return OpError("Cast", "attribute 'to' is required");
  if (attr->type != AttributeType::kInt) return OpError("Cast", "attribute 'to' must be an INT");
  const std::optional<DataType> to = ref::DataTypeFromOnnxNumber(attr->i);
  if (!to.has_value() || (TypeBit(*to) & kCastTypes) == 0) {
    return OpError("Cast", "attribute 'to' is {}, not a type the CUDA Cast converts to", attr->i);
  }
  if (*to == DataType::kBFloat16 && info.opset() < 13) {
    return OpError("Cast", "casting to BFLOAT16 needs opset 13 (model uses opset {})",
                   info.opset());
  }
  return std::make_unique<CastKernel>(*to);
}

// Targets outside kCastTypes (strings, UINT16 ...) and malformed `to` attributes stay on the CPU
// (whose kernel reports the latter).
bool SupportsCast(const KernelInfo& info) {
  const std::optional<DataType> to = CastTarget(info);
  return to.has_value() && (TypeBit(*to) & kCastTypes) != 0;
}

// ---- Unary ops ----------------------------------------------------------------------------------

// The dtypes an op's kernel takes (the rows narrow them per opset).
constexpr DataTypeMask UnaryTypes(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
    case UnaryOp::kAbs:
      return kCudaFloatTypes | kInts;
    case UnaryOp::kNot:
      return kBoolOnly;
    default:
      return kCudaFloatTypes;
  }
}

class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(std::string op, UnaryParams params) : op_(std::move(op)), params_(params) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, op_));
    const Tensor& x = ctx.input(0);
    KILN_RETURN_IF_ERROR(CheckType(op_, x.dtype(), UnaryTypes(params_.op)));
    KILN_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(x.dtype()));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    const bool predicate = params_.op == UnaryOp::kIsNaN || params_.op == UnaryOp::kIsInf;
    const DataType out = predicate ? DataType::kBool : x.dtype();
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, out, x.shape()));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchUnary(params_, type, x.raw_data(), y.raw_data(), y.num_elements(), stream));
    return Status::OK();
  }

 private:
  std::string op_;
  UnaryParams params_;
};

template <UnaryOp kOp>
Result<std::unique_ptr<Kernel>> CreateUnary(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  UnaryParams p;
  p.op = kOp;
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
  } else if constexpr (kOp == UnaryOp::kIsInf) {
    KILN_ASSIGN_OR_RETURN(bool negative, attrs.Bool("detect_negative", true));
    KILN_ASSIGN_OR_RETURN(bool positive, attrs.Bool("detect_positive", true));
    p.alpha = negative ? 1.0f : 0.0f;
    p.beta = positive ? 1.0f : 0.0f;
  }
  return std::make_unique<UnaryKernel>(info.node().op_type, p);
}

// ai.kiln Gelu: approximate "none" (erf) or "tanh".
Result<std::unique_ptr<Kernel>> CreateGelu(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 1));
  KILN_RETURN_IF_ERROR(ref::LimitOutputs(info, 1, "Gelu has one output"));
  const Attribute* a = info.node().FindAttribute("approximate");
  if (a != nullptr && a->type != AttributeType::kString) {
    return OpError("Gelu", "attribute 'approximate' must be a STRING");
  }
  const std::string approximate = a != nullptr ? a->s : std::string("none");
  if (approximate != "none" && approximate != "tanh") {
    return OpError("Gelu", "attribute 'approximate' must be \"none\" or \"tanh\", got \"{}\"",
                   approximate);
  }
  UnaryParams p;
  p.op = approximate == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
  return std::make_unique<UnaryKernel>("Gelu", p);
}

// ---- Clip ---------------------------------------------------------------------------------------

// A bound of Clip: an attribute (before opset 11) or a constant input's single element.
struct ClipBound {
  bool present = false;
  float value = 0.0f;
  DataType dtype = DataType::kInvalid;  // an input's; kInvalid for an attribute
};

class ClipKernel final : public Kernel {
 public:
  ClipKernel(ClipBound lo, ClipBound hi) : lo_(lo), hi_(hi) {}

  Status Compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 1, "Clip"));
    const Tensor& x = ctx.input(0);
    KILN_RETURN_IF_ERROR(CheckType("Clip", x.dtype(), kCudaFloatTypes));
    int i = 1;
    for (const ClipBound* b : {&lo_, &hi_}) {
      if (b->present && b->dtype != DataType::kInvalid && b->dtype != x.dtype()) {
        return OpError("Clip", "input {} has dtype {}, expected the input's {}", i,
                       DataTypeName(b->dtype), DataTypeName(x.dtype()));
      }
      ++i;
    }
    UnaryParams p;
    p.op = UnaryOp::kClip;
    p.alpha = lo_.present ? lo_.value : -FLT_MAX;
    p.beta = hi_.present ? hi_.value : FLT_MAX;
    KILN_ASSIGN_OR_RETURN(ElemType type, ElemTypeOf(x.dtype()));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
    if (y.num_elements() == 0) return Status::OK();
    KILN_CUDA_OK(LaunchUnary(p, type, x.raw_data(), y.raw_data(), y.num_elements(), stream));
    return Status::OK();
  }

 private:
  ClipBound lo_, hi_;
};

// Input i of Clip (opset 11+): absent, or a constant with one element.
Result<ClipBound> ReadClipInput(const KernelInfo& info, int i) {
  ClipBound b;
  if (!info.has_input(i)) return b;
  const OwnedTensor* t = info.constant_input(i);
  if (t == nullptr) return OpError("Clip", "input {} must be a constant here", i);
  if (t->num_elements() != 1) {
    return OpError("Clip", "input {} must be a scalar, got shape {}", i, t->shape().ToString());
  }
  b.present = true;
  b.dtype = t->dtype();
  switch (t->dtype()) {
    case DataType::kFloat32:
      b.value = t->data<const float>()[0];
      break;
    case DataType::kFloat16:
      b.value = Float16ToFloat(t->data<const Float16>()[0]);
      break;
    case DataType::kBFloat16:
      b.value = BFloat16ToFloat(t->data<const BFloat16>()[0]);
      break;
    default:
      break;  // not X's dtype: Compute reports it
  }
  return b;
}

Result<std::unique_ptr<Kernel>> CreateClip(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 1));
  AttrReader attrs(info);
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("consumed_inputs", 6));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("min", 11));
  KILN_RETURN_IF_ERROR(attrs.RequireRemovedIn("max", 11));
  ClipBound lo, hi;
  if (info.opset() >= 11) {
    if (info.num_inputs() > 3) return OpError("Clip", "takes at most 3 inputs");
    KILN_ASSIGN_OR_RETURN(lo, ReadClipInput(info, 1));
    KILN_ASSIGN_OR_RETURN(hi, ReadClipInput(info, 2));
  } else {
    if (info.num_inputs() > 1) {
      return OpError("Clip", "takes 1 input before opset 11 (bounds are attributes)");
    }
    if (attrs.Has("min")) {
      lo.present = true;
      KILN_ASSIGN_OR_RETURN(lo.value, attrs.Float("min", 0.0f));
    }
    if (attrs.Has("max")) {
      hi.present = true;
      KILN_ASSIGN_OR_RETURN(hi.value, attrs.Float("max", 0.0f));
    }
  }
  return std::make_unique<ClipKernel>(lo, hi);
}

// Bounds computed at run time (opset 11+) stay on the CPU.
bool SupportsClip(const KernelInfo& info) {
  if (info.opset() < 11) return true;
  for (int i = 1; i <= 2; ++i) {
    if (info.has_input(i) && info.constant_input(i) == nullptr) return false;
  }
  return true;
}

// ---- ai.kiln ChannelAffine ----------------------------------------------------------------------

class ChannelAffineKernel final : public Kernel {
 public:
  explicit ChannelAffineKernel(Activation act) : act_(act) {}

  Status Compute(KernelContext& ctx) const override {
    constexpr std::string_view kOp = kChannelAffineOp;
    KILN_RETURN_IF_ERROR(CheckInputs(ctx, 3, kOp));
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    KILN_RETURN_IF_ERROR(CheckType(kOp, x.dtype(), kCudaFloatTypes));
    if (scale.dtype() != bias.dtype() ||
        (scale.dtype() != DataType::kFloat32 && scale.dtype() != x.dtype())) {
      return OpError(kOp, "Scale ({}) and Bias ({}) must both be FLOAT or X's {}",
                     DataTypeName(scale.dtype()), DataTypeName(bias.dtype()),
                     DataTypeName(x.dtype()));
    }
    if (scale.rank() != 1 || bias.shape() != scale.shape()) {
      return OpError(kOp, "Scale {} and Bias {} must be [C]", scale.shape().ToString(),
                     bias.shape().ToString());
    }
    const int64_t c = scale.dim(0);
    if (x.rank() < 2 || x.dim(1) != c) {
      return OpError(kOp, "X {} is not an [N, C, ...] tensor of {} channels", x.shape().ToString(),
                     c);
    }
    KILN_ASSIGN_OR_RETURN(ElemType x_type, ElemTypeOf(x.dtype()));
    KILN_ASSIGN_OR_RETURN(ElemType param_type, ElemTypeOf(scale.dtype()));
    KILN_ASSIGN_OR_RETURN(cudaStream_t stream, StreamOf(ctx));
    KILN_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.shape()));
    const int64_t n = y.num_elements();
    if (n == 0) return Status::OK();
    const int64_t inner = n / (x.dim(0) * c);
    KILN_CUDA_OK(LaunchChannelAffine(x_type, param_type, x.raw_data(), scale.raw_data(),
                                     bias.raw_data(), y.raw_data(), n, c, inner, act_, stream));
    return Status::OK();
  }

 private:
  Activation act_;
};

// The `block` attribute (0 when absent): the layout the node uses.
Result<int64_t> ChannelAffineBlock(const KernelInfo& info) {
  return AttrReader(info).Int(kAttrBlock, 0);
}

Result<std::unique_ptr<Kernel>> CreateChannelAffine(const KernelInfo& info) {
  KILN_RETURN_IF_ERROR(ref::RequireInputs(info, 3));
  KILN_RETURN_IF_ERROR(ref::LimitOutputs(info, 1, "ChannelAffine has one output"));
  KILN_ASSIGN_OR_RETURN(int64_t block, ChannelAffineBlock(info));
  if (block != 0) {
    return OpError(kChannelAffineOp, "the CUDA kernel takes the plain layout (block 0), not {}",
                   block);
  }
  KILN_ASSIGN_OR_RETURN(Activation act, ParseActivation(info));
  return std::make_unique<ChannelAffineKernel>(act);
}

// The blocked layout stays on the CPU.
bool SupportsChannelAffine(const KernelInfo& info) {
  Result<int64_t> block = ChannelAffineBlock(info);
  return block.ok() && *block == 0;
}

}  // namespace

std::vector<KernelDef> ElementwiseKernelDefs() {
  constexpr DeviceType kCuda = DeviceType::kCuda;
  constexpr DataTypeMask kFloats = kCudaFloatTypes;
  constexpr DataTypeMask kMoved = kCudaFloatTypes | kInts | kSmallTypes;  // Where, Expand
  return {
      // Binary arithmetic: BF16 from 13.
      {"Add", "", 7, 12, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kAdd>, "cuda"},
      {"Add", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kAdd>, "cuda"},
      {"Sub", "", 7, 12, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kSub>, "cuda"},
      {"Sub", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kSub>, "cuda"},
      {"Mul", "", 7, 12, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kMul>, "cuda"},
      {"Mul", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kMul>, "cuda"},
      {"Div", "", 7, 12, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kDiv>, "cuda"},
      {"Div", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kDiv>, "cuda"},
      // Pow: float bases; before 12 the exponent has the base's dtype (the factory checks).
      {"Pow", "", 7, 12, kCuda, kF32F16, 0, &CreatePow, "cuda", &SupportsPow},
      {"Pow", "", 13, 17, kCuda, kFloats, 0, &CreatePow, "cuda", &SupportsPow},
      {"PRelu", "", 7, 15, kCuda, kF32F16, 0, &CreateBinary<BinaryOp::kPRelu>, "cuda"},
      {"PRelu", "", 16, 17, kCuda, kFloats, 0, &CreateBinary<BinaryOp::kPRelu>, "cuda"},
      // Logic and comparisons (BOOL out).
      {"And", "", 7, 17, kCuda, kBoolOnly, 0, &CreateBinary<BinaryOp::kAnd>, "cuda"},
      {"Or", "", 7, 17, kCuda, kBoolOnly, 0, &CreateBinary<BinaryOp::kOr>, "cuda"},
      {"Xor", "", 7, 17, kCuda, kBoolOnly, 0, &CreateBinary<BinaryOp::kXor>, "cuda"},
      {"Equal", "", 7, 10, kCuda, kBoolOnly | kInts, 0, &CreateBinary<BinaryOp::kEqual>, "cuda"},
      {"Equal", "", 11, 12, kCuda, kF32F16 | kInts | kBoolOnly, 0, &CreateBinary<BinaryOp::kEqual>,
       "cuda"},
      {"Equal", "", 13, 17, kCuda, kFloats | kInts | kBoolOnly, 0, &CreateBinary<BinaryOp::kEqual>,
       "cuda"},
      {"Less", "", 7, 8, kCuda, kF32F16, 0, &CreateBinary<BinaryOp::kLess>, "cuda"},
      {"Less", "", 9, 12, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kLess>, "cuda"},
      {"Less", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kLess>, "cuda"},
      {"Greater", "", 7, 8, kCuda, kF32F16, 0, &CreateBinary<BinaryOp::kGreater>, "cuda"},
      {"Greater", "", 9, 12, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kGreater>, "cuda"},
      {"Greater", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kGreater>, "cuda"},
      {"LessOrEqual", "", 12, 15, kCuda, kF32F16 | kInts, 0, &CreateBinary<BinaryOp::kLessOrEqual>,
       "cuda"},
      {"LessOrEqual", "", 16, 17, kCuda, kFloats | kInts, 0, &CreateBinary<BinaryOp::kLessOrEqual>,
       "cuda"},
      {"GreaterOrEqual", "", 12, 15, kCuda, kF32F16 | kInts, 0,
       &CreateBinary<BinaryOp::kGreaterOrEqual>, "cuda"},
      {"GreaterOrEqual", "", 16, 17, kCuda, kFloats | kInts, 0,
       &CreateBinary<BinaryOp::kGreaterOrEqual>, "cuda"},
      // Where: the dtype-deciding input is X (1).
      {"Where", "", 9, 15, kCuda, kMoved & kNoBF16, 1, &CreateWhere, "cuda"},
      {"Where", "", 16, 17, kCuda, kMoved, 1, &CreateWhere, "cuda"},
      // Variadic, 1 to 3 inputs: equal shapes at 7 (the factory reads the opset), integers for
      // Max / Min from 12, BF16 from 13.
      {"Max", "", 7, 11, kCuda, kF32F16, 0, &CreateVariadic<VariadicOp::kMax>, "cuda",
       &SupportsVariadic},
      {"Max", "", 12, 12, kCuda, kF32F16 | kInts, 0, &CreateVariadic<VariadicOp::kMax>, "cuda",
       &SupportsVariadic},
      {"Max", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateVariadic<VariadicOp::kMax>, "cuda",
       &SupportsVariadic},
      {"Min", "", 7, 11, kCuda, kF32F16, 0, &CreateVariadic<VariadicOp::kMin>, "cuda",
       &SupportsVariadic},
      {"Min", "", 12, 12, kCuda, kF32F16 | kInts, 0, &CreateVariadic<VariadicOp::kMin>, "cuda",
       &SupportsVariadic},
      {"Min", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateVariadic<VariadicOp::kMin>, "cuda",
       &SupportsVariadic},
      {"Sum", "", 7, 12, kCuda, kF32F16, 0, &CreateVariadic<VariadicOp::kSum>, "cuda",
       &SupportsVariadic},
      {"Sum", "", 13, 17, kCuda, kFloats, 0, &CreateVariadic<VariadicOp::kSum>, "cuda",
       &SupportsVariadic},
      {"Mean", "", 7, 12, kCuda, kF32F16, 0, &CreateVariadic<VariadicOp::kMean>, "cuda",
       &SupportsVariadic},
      {"Mean", "", 13, 17, kCuda, kFloats, 0, &CreateVariadic<VariadicOp::kMean>, "cuda",
       &SupportsVariadic},
      // Cast and Expand.
      {"Cast", "", 7, 12, kCuda, kCastTypes & kNoBF16, 0, &CreateCast, "cuda", &SupportsCast},
      {"Cast", "", 13, 17, kCuda, kCastTypes, 0, &CreateCast, "cuda", &SupportsCast},
      {"Expand", "", 8, 12, kCuda, kMoved & kNoBF16, 0, &CreateExpand, "cuda", &SupportsExpand},
      {"Expand", "", 13, 17, kCuda, kMoved, 0, &CreateExpand, "cuda", &SupportsExpand},
      // Unary math: BF16 from 13.
      {"Relu", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kRelu>, "cuda"},
      {"Relu", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kRelu>, "cuda"},
      {"Sigmoid", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSigmoid>, "cuda"},
      {"Sigmoid", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kSigmoid>, "cuda"},
      {"Tanh", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kTanh>, "cuda"},
      {"Tanh", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kTanh>, "cuda"},
      {"Exp", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kExp>, "cuda"},
      {"Exp", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kExp>, "cuda"},
      {"Log", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kLog>, "cuda"},
      {"Log", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kLog>, "cuda"},
      {"Sqrt", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSqrt>, "cuda"},
      {"Sqrt", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kSqrt>, "cuda"},
      {"Reciprocal", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kReciprocal>, "cuda"},
      {"Reciprocal", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kReciprocal>, "cuda"},
      {"Floor", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kFloor>, "cuda"},
      {"Floor", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kFloor>, "cuda"},
      {"Ceil", "", 7, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kCeil>, "cuda"},
      {"Ceil", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kCeil>, "cuda"},
      {"Abs", "", 7, 12, kCuda, kF32F16 | kInts, 0, &CreateUnary<UnaryOp::kAbs>, "cuda"},
      {"Abs", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateUnary<UnaryOp::kAbs>, "cuda"},
      {"Neg", "", 7, 12, kCuda, kF32F16 | kInts, 0, &CreateUnary<UnaryOp::kNeg>, "cuda"},
      {"Neg", "", 13, 17, kCuda, kFloats | kInts, 0, &CreateUnary<UnaryOp::kNeg>, "cuda"},
      {"Round", "", 11, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kRound>, "cuda"},
      {"Sign", "", 9, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSign>, "cuda"},
      {"Sign", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kSign>, "cuda"},
      {"Erf", "", 9, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kErf>, "cuda"},
      {"Erf", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kErf>, "cuda"},
      {"Sin", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSin>, "cuda"},
      {"Cos", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kCos>, "cuda"},
      {"Tan", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kTan>, "cuda"},
      {"Asin", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kAsin>, "cuda"},
      {"Acos", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kAcos>, "cuda"},
      {"Atan", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kAtan>, "cuda"},
      {"Sinh", "", 9, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSinh>, "cuda"},
      {"Cosh", "", 9, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kCosh>, "cuda"},
      {"Asinh", "", 9, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kAsinh>, "cuda"},
      {"Acosh", "", 9, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kAcosh>, "cuda"},
      {"Atanh", "", 9, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kAtanh>, "cuda"},
      {"IsNaN", "", 9, 12, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kIsNaN>, "cuda"},
      {"IsNaN", "", 13, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kIsNaN>, "cuda"},
      {"IsInf", "", 10, 17, kCuda, kF32Only, 0, &CreateUnary<UnaryOp::kIsInf>, "cuda"},
      {"Not", "", 7, 17, kCuda, kBoolOnly, 0, &CreateUnary<UnaryOp::kNot>, "cuda"},
      // Activations.
      {"LeakyRelu", "", 7, 15, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kLeakyRelu>, "cuda"},
      {"LeakyRelu", "", 16, 17, kCuda, kFloats, 0, &CreateUnary<UnaryOp::kLeakyRelu>, "cuda"},
      {"Elu", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kElu>, "cuda"},
      {"Selu", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSelu>, "cuda"},
      {"Celu", "", 12, 17, kCuda, kF32Only, 0, &CreateUnary<UnaryOp::kCelu>, "cuda"},
      {"HardSigmoid", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kHardSigmoid>, "cuda"},
      {"HardSwish", "", 14, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kHardSwish>, "cuda"},
      {"Softplus", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSoftplus>, "cuda"},
      {"Softsign", "", 7, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kSoftsign>, "cuda"},
      {"ThresholdedRelu", "", 10, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kThresholdedRelu>,
       "cuda"},
      {"Shrink", "", 9, 17, kCuda, kF32F16, 0, &CreateUnary<UnaryOp::kShrink>, "cuda"},
      // Clip: attributes before 11 (the factory reads the opset), constant inputs from 11.
      {"Clip", "", 7, 12, kCuda, kF32F16, 0, &CreateClip, "cuda", &SupportsClip},
      {"Clip", "", 13, 17, kCuda, kFloats, 0, &CreateClip, "cuda", &SupportsClip},
      // ai.kiln.
      {"Gelu", kKilnDomain, 1, 1, kCuda, kFloats, 0, &CreateGelu, "cuda"},
      {"ChannelAffine", kKilnDomain, 1, 1, kCuda, kFloats, 0, &CreateChannelAffine, "cuda",
       &SupportsChannelAffine},
  };
}

}  // namespace kiln::cuda
