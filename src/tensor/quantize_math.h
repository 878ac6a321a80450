// SPDX-License-Identifier: Apache-2.0
#pragma once
// Scalar quantization math: the exact arithmetic of ONNX QuantizeLinear / DequantizeLinear, used
// by kiln's reference kernels (src/kernels/ref/quantize.cc) and by the quantizer (src/quant):
//
//   q = saturate(round_half_to_even(x / scale) + zero_point)     NaN -> zero_point
//   x = (q - zero_point) * scale
//
// round_half_to_even is std::nearbyint under the default rounding mode (FE_TONEAREST). The
// quantizer's tests also check these helpers element for element against the reference kernel
// run in a Session.
//
// Thread safety: pure functions.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln {

// round-half-to-even(v) saturated to [lo, hi]; NaN gives 0.
inline int64_t RoundSaturate(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r <= static_cast<double>(lo)) return lo;
  if (r >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(r);
}

// round-half-to-even(v) saturated to Q's range; NaN gives 0.
template <typename Q>
Q SaturateRound(float v) {
  if (std::isnan(v)) return Q{0};
  const float r = std::nearbyint(v);
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  return static_cast<Q>(std::clamp(r, lo, hi));
}

// QuantizeLinear of one value into Q's full range (as the ONNX operator does, in float).
template <typename Q>
Q QuantizeValue(float x, float scale, int32_t zero_point) {
  constexpr int64_t lo = std::numeric_limits<Q>::min();
  constexpr int64_t hi = std::numeric_limits<Q>::max();
  if (std::isnan(x)) return static_cast<Q>(std::clamp<int64_t>(zero_point, lo, hi));
  const float r = std::nearbyint(x / scale);
  return static_cast<Q>(RoundSaturate(static_cast<double>(r) + zero_point, lo, hi));
}

// DequantizeLinear of one value.
template <typename Q>
float DequantizeValue(Q q, float scale, int32_t zero_point) {
  return static_cast<float>(static_cast<int32_t>(q) - zero_point) * scale;
}

}  // namespace kiln
