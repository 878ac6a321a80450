// SPDX-License-Identifier: Apache-2.0
#pragma once
// Half-precision weights (`kiln quantize --precision fp16|bf16`, docs/quantization.md): a FP32
// graph rewritten so that the large constant weights of Conv, ConvTranspose, MatMul and Gemm are
// stored as FLOAT16 or BFLOAT16 initializers, each read through one Cast(to=FLOAT) node. The
// result is standard ONNX (ONNX Runtime runs it as written); everything else stays FP32, and
// every operator still computes in FP32.
//
//   KILN_ASSIGN_OR_RETURN(HalfWeights h, ConvertWeightsToHalf(*graph, DataType::kFloat16));
//   KILN_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxModel(*h.graph));
//
// The weight values are rounded to the nearest half value (ties to even, tensor/dtype.h), so a
// converted graph computes exactly what the FP32 graph computes with its weights so rounded.
//
// Thread safety: pure functions (DetectCpuHalfSupport reads CPUID only).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "graph/ir.h"
#include "opt/optimizer.h"

namespace kiln::quant {

// Weights with fewer elements stay FP32: the engine's own threshold (opt/optimizer.h), so a
// file written here is exactly what the engine would hold in half.
inline constexpr int64_t kHalfMinElements = kHalfWeightMinElements;

struct HalfWeights {
  std::shared_ptr<Graph> graph;
  int tensors = 0;        // initializers stored in half precision
  int64_t elements = 0;   // their elements together
  int64_t overflows = 0;  // finite FP32 values beyond the half range (stored as +-inf)
};

// Stores every FP32 initializer that is input 1 (the weight) of a default-domain Conv,
// ConvTranspose, MatMul or Gemm and has at least `min_elements` elements as `dtype`
// (kFloat16 or kBFloat16), renamed "<name>_fp16" / "<name>_bf16", behind a Cast(to=FLOAT) whose
// output keeps the initializer's name and id, placed before the first node that reads it. Every
// reader of such an initializer (whatever its op) reads the Cast output. Errors: INVALID_ARGUMENT
// for another dtype; FAILED_PRECONDITION for an opset without Cast from that type (FLOAT16 needs
// opset 6, BFLOAT16 opset 13) or a graph with no such weight.
Result<HalfWeights> ConvertWeightsToHalf(const Graph& graph, DataType dtype,
                                         int64_t min_elements = kHalfMinElements);

// "fp16" -> kFloat16, "bf16" -> kBFloat16; nullopt for anything else.
std::optional<DataType> HalfTypeFromPrecision(std::string_view precision);
// kFloat16 -> "fp16", kBFloat16 -> "bf16".
std::string_view HalfPrecisionName(DataType dtype);

// The half type of the graph's FLOAT16 / BFLOAT16 initializers (the first one found in value
// order), or nullopt when it has none.
std::optional<DataType> HalfInitializerType(const Graph& graph);

// What this CPU offers for half precision (x86 CPUID; all false elsewhere).
struct CpuHalfSupport {
  bool f16c = false;        // FP16 <-> FP32 conversion instructions
  bool avx512fp16 = false;  // native FP16 arithmetic
  bool avx512bf16 = false;  // BF16 dot products (VDPBF16PS)
};
CpuHalfSupport DetectCpuHalfSupport();

// One sentence for the reports: how `dtype` weights are stored and computed on this CPU, e.g.
// "weights stored in FP16; computed in FP32 (this CPU has no native FP16 arithmetic)".
std::string HalfComputeNote(DataType dtype, const CpuHalfSupport& cpu);

}  // namespace kiln::quant
