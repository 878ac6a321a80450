// SPDX-License-Identifier: Apache-2.0
// Quantization parameters (qparams.h).

#include "quant/qparams.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/quantize_math.h"

namespace kiln::quant {
namespace {

// A scale too small to divide by safely (zero or denormal) means the range was degenerate.
bool UsableScale(float s) { return std::isfinite(s) && s >= std::numeric_limits<float>::min(); }

}  // namespace

Result<ActivationParams> ComputeActivationParams(float min_value, float max_value,
                                                 ActivationType type) {
  if (!std::isfinite(min_value) || !std::isfinite(max_value)) {
    return Status::InvalidArgument(
        fmt::format("activation range [{}, {}] is not finite", min_value, max_value));
  }
  if (min_value > max_value) std::swap(min_value, max_value);
  const float lo = std::min(min_value, 0.0f);
  const float hi = std::max(max_value, 0.0f);
  ActivationParams p;
  p.type = type;
  if (type == ActivationType::kInt8) {
    const float a = std::max(-lo, hi);
    const float s = a / 127.0f;
    p.scale = UsableScale(s) ? s : 1.0f;
    p.zero_point = 0;
    return p;
  }
  const float s = (hi - lo) / 255.0f;
  if (!UsableScale(s)) {
    p.scale = 1.0f;
    p.zero_point = 0;
    return p;
  }
  p.scale = s;
  p.zero_point = static_cast<int32_t>(RoundSaturate(0.0 - static_cast<double>(lo) / s, 0, 255));
  return p;
}

Result<QuantizedWeight> QuantizeWeight(const Tensor& weight, int64_t axis, bool per_channel,
                                       int qmax) {
  if (qmax < 1 || qmax > kWeightMax8Bit) {
    return Status::InvalidArgument(
        fmt::format("weight range [-{0}, {0}] is not in [1, 127]", qmax));
  }
  if (weight.dtype() != DataType::kFloat32) {
    return Status::InvalidArgument(
        fmt::format("weight must be FP32, got {}", DataTypeName(weight.dtype())));
  }
  if (per_channel && (axis < 0 || axis >= weight.rank())) {
    return Status::InvalidArgument(
        fmt::format("axis {} out of range for a weight of rank {}", axis, weight.rank()));
  }
  const int64_t n = weight.num_elements();
  const float* w = weight.data<const float>();
  for (int64_t e = 0; e < n; ++e) {
    if (!std::isfinite(w[e])) return Status::InvalidArgument("weight holds a non-finite value");
  }
  int64_t channels = 1;
  int64_t inner = n;
  if (per_channel) {
    channels = weight.dim(static_cast<int>(axis));
    inner = 1;
    for (int d = static_cast<int>(axis) + 1; d < weight.rank(); ++d) inner *= weight.dim(d);
  }
  QuantizedWeight out;
  out.axis = axis;
  out.scales.assign(static_cast<size_t>(channels), 0.0f);
  auto channel_of = [&](int64_t e) { return channels == 1 ? 0 : (e / inner) % channels; };
  std::vector<float> max_abs(static_cast<size_t>(channels), 0.0f);
  for (int64_t e = 0; e < n; ++e) {
    float& m = max_abs[static_cast<size_t>(channel_of(e))];
    m = std::max(m, std::fabs(w[e]));
  }
  for (int64_t c = 0; c < channels; ++c) {
    const float s = max_abs[static_cast<size_t>(c)] / static_cast<float>(qmax);
    out.scales[static_cast<size_t>(c)] = UsableScale(s) ? s : 1.0f;
  }
  KILN_ASSIGN_OR_RETURN(out.values, OwnedTensor::Allocate(DataType::kInt8, weight.shape()));
  int8_t* q = out.values.data<int8_t>();
  for (int64_t e = 0; e < n; ++e) {
    const float s = out.scales[static_cast<size_t>(channel_of(e))];
    const int64_t v = RoundSaturate(static_cast<double>(std::nearbyint(w[e] / s)), -qmax, qmax);
    q[e] = static_cast<int8_t>(v);
    out.max_abs_error = std::max(out.max_abs_error, std::fabs(w[e] - static_cast<float>(v) * s));
  }
  return out;
}

Result<OwnedTensor> QuantizeBias(const Tensor& bias, float input_scale,
                                 const std::vector<float>& weight_scales) {
  if (bias.dtype() != DataType::kFloat32 || bias.rank() != 1) {
    return Status::InvalidArgument("bias must be a 1-D FP32 tensor");
  }
  const int64_t c = bias.dim(0);
  if (weight_scales.size() != 1 && static_cast<int64_t>(weight_scales.size()) != c) {
    return Status::InvalidArgument(
        fmt::format("bias has {} elements but the weight {} scales", c, weight_scales.size()));
  }
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(DataType::kInt32, bias.shape()));
  const float* b = bias.data<const float>();
  int32_t* q = out.data<int32_t>();
  for (int64_t i = 0; i < c; ++i) {
    const float ws =
        weight_scales.size() == 1 ? weight_scales[0] : weight_scales[static_cast<size_t>(i)];
    // The scale DequantizeLinear will use, computed in float exactly as written to the model.
    const float s = input_scale * ws;
    q[i] = static_cast<int32_t>(RoundSaturate(static_cast<double>(b[i]) / s,
                                              std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max()));
  }
  return out;
}

}  // namespace kiln::quant
