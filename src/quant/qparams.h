// SPDX-License-Identifier: Apache-2.0
#pragma once
// Quantization parameters: how a float range or a weight tensor maps to 8-bit integers.
//
//   ActivationParams p = ComputeActivationParams(-0.5f, 6.0f, ActivationType::kUint8);
//   // p.scale = 6.5 / 255, p.zero_point = round(0.5 / p.scale) = 20
//   KILN_ASSIGN_OR_RETURN(QuantizedWeight w, QuantizeWeight(conv_w.view(), /*axis=*/0, true));
//
// Activations: asymmetric UINT8 (qmin 0, qmax 255) or symmetric INT8 (zero point 0). The range is
// first widened to contain 0 (so zero, which padding and ReLU produce, is exact); then
//   asymmetric: scale = (max - min) / 255, zero_point = clamp(round(-min / scale), 0, 255)
//   symmetric:  scale = max(|min|, |max|) / 127, zero_point = 0
// A degenerate range (both ends 0, or so small the scale would be denormal or zero) gets scale 1
// and zero point 0 (asymmetric) / 0 (symmetric): every value then quantizes to about zero, which
// is what the tensor held. Non-finite ends are INVALID_ARGUMENT.
//
// Weights: symmetric INT8 in [-qmax, qmax], zero point 0, per output channel (scale_c = max|w_c| /
// qmax along `axis`) or per tensor (one scale). An all-zero channel gets scale 1. qmax is
// kWeightMax8Bit (127; -128 is never used) for CPUs with VNNI dot products, or kWeightMax7Bit
// (64, ONNX Runtime's reduce_range) for CPUs without them: there the INT8 kernels sum two
// u8 x s8 products in 16 bits, which stays exact only while 255 * (|w_a| + |w_b|) <= 32767
// (kernels/cpu/quantized.cc splits wider weights, at twice the work).
//
// Bias: INT32 with scale input_scale * weight_scale_c and zero point 0 (ONNX Runtime's
// convention), rounded half to even and saturated to the int32 range.
//
// Thread safety: pure functions.

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln::quant {

enum class ActivationType : uint8_t {
  kUint8,  // asymmetric, zero point in [0, 255]
  kInt8,   // symmetric, zero point 0
};

struct ActivationParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
  ActivationType type = ActivationType::kUint8;
};

// Parameters for values observed in [min_value, max_value]. REQUIRES: min_value <= max_value
// (a reversed range is treated as its swapped self).
Result<ActivationParams> ComputeActivationParams(float min_value, float max_value,
                                                 ActivationType type);

inline constexpr int kWeightMax8Bit = 127;
inline constexpr int kWeightMax7Bit = 64;

struct QuantizedWeight {
  OwnedTensor values;         // INT8, the weight's shape
  std::vector<float> scales;  // one per channel along `axis`, or one
  int64_t axis = 0;           // meaningful when scales.size() > 1
  float max_abs_error = 0;    // max |w - dequantized w| over all elements
};

// Quantizes a FP32 weight to [-qmax, qmax]. Per channel along `axis` (which must be a valid axis)
// when `per_channel`, else per tensor. Errors: INVALID_ARGUMENT for a non-FP32 weight, a bad axis,
// non-finite values or a qmax outside [1, 127].
Result<QuantizedWeight> QuantizeWeight(const Tensor& weight, int64_t axis, bool per_channel,
                                       int qmax = kWeightMax8Bit);

// Quantizes a FP32 1-D bias of C elements to INT32 with scales input_scale * weight_scales[c]
// (weight_scales has 1 or C elements). Errors: INVALID_ARGUMENT for a bias that is not FP32 1-D
// or a count mismatch.
Result<OwnedTensor> QuantizeBias(const Tensor& bias, float input_scale,
                                 const std::vector<float>& weight_scales);

}  // namespace kiln::quant
