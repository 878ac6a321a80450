// SPDX-License-Identifier: Apache-2.0
// Half-precision weights (half_precision.h).

#include "quant/half_precision.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/target.h"

namespace kiln::quant {
namespace {

bool IsWeightOp(const Node& n) {
  return n.domain.empty() && (n.op_type == "Conv" || n.op_type == "ConvTranspose" ||
                              n.op_type == "MatMul" || n.op_type == "Gemm");
}

// `src` (FP32) rounded to `dtype`; counts the finite values that overflow to infinity.
Result<OwnedTensor> ToHalf(const Tensor& src, DataType dtype, int64_t& overflows) {
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(dtype, src.shape()));
  const float* in = src.data<float>();
  const int64_t n = src.num_elements();
  if (dtype == DataType::kFloat16) {
    Float16* out = t.data<Float16>();
    for (int64_t i = 0; i < n; ++i) {
      out[i] = FloatToFloat16(in[i]);
      if (std::isfinite(in[i]) && std::isinf(Float16ToFloat(out[i]))) ++overflows;
    }
  } else {
    BFloat16* out = t.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) {
      out[i] = FloatToBFloat16(in[i]);
      if (std::isfinite(in[i]) && std::isinf(BFloat16ToFloat(out[i]))) ++overflows;
    }
  }
  return t;
}

}  // namespace

std::optional<DataType> HalfTypeFromPrecision(std::string_view precision) {
  if (precision == "fp16") return DataType::kFloat16;
  if (precision == "bf16") return DataType::kBFloat16;
  return std::nullopt;
}

std::string_view HalfPrecisionName(DataType dtype) {
  return dtype == DataType::kBFloat16 ? "bf16" : "fp16";
}

Result<HalfWeights> ConvertWeightsToHalf(const Graph& graph, DataType dtype, int64_t min_elements) {
  if (dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return Status::InvalidArgument(
        fmt::format("half-precision weights are FLOAT16 or BFLOAT16, not {}", DataTypeName(dtype)));
  }
  const std::string_view type_name = dtype == DataType::kFloat16 ? "FLOAT16" : "BFLOAT16";
  // Cast reads FLOAT16 from opset 6 on, BFLOAT16 from opset 13 on.
  const int64_t need = dtype == DataType::kFloat16 ? 6 : 13;
  const int64_t opset = graph.OpsetFor("");
  if (opset < need) {
    return Status::FailedPrecondition(fmt::format(
        "the model's ONNX opset is {}; Cast from {} needs opset {} or later (re-export the model "
        "at a newer opset{})",
        opset, type_name, need, dtype == DataType::kBFloat16 ? ", or use --precision fp16" : ""));
  }

  std::vector<bool> convert(static_cast<size_t>(graph.num_values()), false);
  HalfWeights result;
  for (const Node& n : graph.nodes()) {
    if (!IsWeightOp(n) || !n.has_input(1)) continue;
    const int w = n.inputs[1];
    const Value& v = graph.value(w);
    if (!v.is_constant() || v.constant->dtype() != DataType::kFloat32 ||
        v.constant->num_elements() < min_elements || convert[static_cast<size_t>(w)]) {
      continue;
    }
    convert[static_cast<size_t>(w)] = true;
    ++result.tensors;
    result.elements += v.constant->num_elements();
  }
  if (result.tensors == 0) {
    return Status::FailedPrecondition(fmt::format(
        "the model has no FP32 Conv, ConvTranspose, MatMul or Gemm weight with at least {} "
        "elements to store in {}",
        min_elements, type_name));
  }

  auto out = std::make_shared<Graph>();
  out->name = graph.name;
  out->opset_imports = graph.opset_imports;
  out->ir_version = graph.ir_version;
  for (const Value& v : graph.values()) {
    Value c = v;
    c.producer = -1;
    if (convert[static_cast<size_t>(out->num_values())]) c.constant = nullptr;  // a Cast output
    out->AddValue(std::move(c));
  }
  // The half initializers, by the id of the value whose Cast reads them.
  std::vector<int> half_of(convert.size(), -1);
  const std::string suffix = dtype == DataType::kFloat16 ? "_fp16" : "_bf16";
  for (int id = 0; id < graph.num_values(); ++id) {
    if (!convert[static_cast<size_t>(id)]) continue;
    const Value& w = graph.value(id);
    Value h;
    h.name = w.name + suffix;
    for (int k = 1; out->FindValue(h.name) >= 0; ++k) {
      h.name = fmt::format("{}{}_{}", w.name, suffix, k);
    }
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, ToHalf(w.constant->view(), dtype, result.overflows));
    h.type.dtype = dtype;
    h.type.has_shape = true;
    for (int64_t d : t.shape().dims()) h.type.dims.push_back(Dim{d, {}});
    h.constant = std::make_shared<const OwnedTensor>(std::move(t));
    half_of[static_cast<size_t>(id)] = out->AddValue(std::move(h));
  }
  // Nodes in order, each Cast just before the first node that reads its output.
  std::vector<bool> cast_emitted(convert.size(), false);
  auto emit_casts_for = [&](const std::vector<int>& ids) {
    for (int v : ids) {
      if (v == kNoValue || !convert[static_cast<size_t>(v)] ||
          cast_emitted[static_cast<size_t>(v)]) {
        continue;
      }
      cast_emitted[static_cast<size_t>(v)] = true;
      Node cast;
      cast.name = graph.value(v).name + "_Cast";
      cast.op_type = "Cast";
      cast.inputs = {half_of[static_cast<size_t>(v)]};
      cast.outputs = {v};
      cast.attributes = {Attribute::Int("to", 1)};  // TensorProto.FLOAT
      out->AddNode(std::move(cast));
    }
  };
  for (const Node& n : graph.nodes()) {
    emit_casts_for(n.inputs);
    emit_casts_for(n.implicit_inputs);
    out->AddNode(n);
  }
  out->inputs = graph.inputs;
  out->outputs = graph.outputs;
  result.graph = std::move(out);
  return result;
}

std::optional<DataType> HalfInitializerType(const Graph& graph) {
  for (const Value& v : graph.values()) {
    if (v.is_constant() &&
        (v.constant->dtype() == DataType::kFloat16 || v.constant->dtype() == DataType::kBFloat16)) {
      return v.constant->dtype();
    }
  }
  return std::nullopt;
}

CpuHalfSupport DetectCpuHalfSupport() {
  CpuHalfSupport s;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    (defined(__clang__) ? __clang_major__ >= 16 : __GNUC__ >= 12)
  // "avx512fp16" is known to __builtin_cpu_supports from GCC 12 and Clang 16 on.
  __builtin_cpu_init();
  s.f16c = __builtin_cpu_supports("f16c") != 0;
  s.avx512fp16 = __builtin_cpu_supports("avx512fp16") != 0;
#endif
  // As the kernels see it (oneDNN's dispatch, which ONEDNN_MAX_CPU_ISA lowers).
  s.avx512bf16 = KernelTargetFor(DeviceType::kCpu).bf16_dot_products;
  return s;
}

std::string HalfComputeNote(DataType dtype, const CpuHalfSupport& cpu) {
  if (dtype == DataType::kBFloat16) {
    return cpu.avx512bf16
               ? "weights stored in BF16; convolutions and matrix products computed in BF16 with "
                 "FP32 "
                 "accumulation (this CPU has BF16 dot products, AVX512-BF16), everything else "
                 "computed in FP32"
               : "weights stored in BF16; computed in FP32 (this CPU has no native BF16 "
                 "arithmetic)";
  }
  return cpu.avx512fp16
             ? "weights stored in FP16; computed in FP32 (this CPU has native FP16 arithmetic, "
               "AVX512-FP16, but kiln's CPU kernels compute in FP32)"
             : "weights stored in FP16; computed in FP32 (this CPU has no native FP16 "
               "arithmetic)";
}

}  // namespace kiln::quant
