// SPDX-License-Identifier: Apache-2.0
// Scalar quantize / dequantize microkernels and the ISA dispatch (quantized_kernels.h).

#include "kernels/cpu/quantized_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/isa.h"

namespace kiln::cpu {
namespace scalar {
namespace {

template <typename Q>
void Quantize(const float* x, float scale, int32_t zp, Q* y, int64_t n) {
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / scale;
    y[i] = std::isnan(v) ? static_cast<Q>(zp)
                         : static_cast<Q>(std::clamp(std::nearbyint(v) + float(zp), lo, hi));
  }
}

template <typename Q>
void Dequantize(const Q* x, float scale, int32_t zp, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(int32_t{x[i]} - zp) * scale;
}

}  // namespace

void QuantizeF32ToU8(const float* x, float scale, int32_t zp, uint8_t* y, int64_t n) {
  Quantize(x, scale, zp, y, n);
}
void QuantizeF32ToS8(const float* x, float scale, int32_t zp, int8_t* y, int64_t n) {
  Quantize(x, scale, zp, y, n);
}
void DequantizeU8ToF32(const uint8_t* x, float scale, int32_t zp, float* y, int64_t n) {
  Dequantize(x, scale, zp, y, n);
}
void DequantizeS8ToF32(const int8_t* x, float scale, int32_t zp, float* y, int64_t n) {
  Dequantize(x, scale, zp, y, n);
}
void MinMaxF32(const float* x, int64_t n, float* lo, float* hi) {
  float l = 0, h = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    l = std::min(l, x[i]);
    h = std::max(h, x[i]);
  }
  *lo = l;
  *hi = h;
}

void QAdd(const QAddParams& p, const void* a, const void* b, void* y, int64_t n) {
  auto at = [](const void* t, bool is_signed, int64_t i) {
    return is_signed ? int32_t{static_cast<const int8_t*>(t)[i]}
                     : int32_t{static_cast<const uint8_t*>(t)[i]};
  };
  const float qlo = p.y_signed ? -128.0f : 0.0f, qhi = p.y_signed ? 127.0f : 255.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float va = static_cast<float>(at(a, p.a_signed, i) - p.a_zp) * p.a_scale;
    const float vb = static_cast<float>(at(b, p.b_signed, i) - p.b_zp) * p.b_scale;
    const float v = std::min(std::max(va + vb, p.lo), p.hi);
    const float q = std::clamp(std::nearbyint(v / p.y_scale) + float(p.y_zp), qlo, qhi);
    if (p.y_signed) {
      static_cast<int8_t*>(y)[i] = static_cast<int8_t>(q);
    } else {
      static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(q);
    }
  }
}

void TransposeBytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
}

}  // namespace scalar

namespace {
bool UseAvx2() { return ActiveIsa() >= Isa::kAvx2; }
}  // namespace

void QuantizeF32ToU8(const float* x, float scale, int32_t zp, uint8_t* y, int64_t n) {
  UseAvx2() ? avx2::QuantizeF32ToU8(x, scale, zp, y, n)
            : scalar::QuantizeF32ToU8(x, scale, zp, y, n);
}
void QuantizeF32ToS8(const float* x, float scale, int32_t zp, int8_t* y, int64_t n) {
  UseAvx2() ? avx2::QuantizeF32ToS8(x, scale, zp, y, n)
            : scalar::QuantizeF32ToS8(x, scale, zp, y, n);
}
void DequantizeU8ToF32(const uint8_t* x, float scale, int32_t zp, float* y, int64_t n) {
  UseAvx2() ? avx2::DequantizeU8ToF32(x, scale, zp, y, n)
            : scalar::DequantizeU8ToF32(x, scale, zp, y, n);
}
void DequantizeS8ToF32(const int8_t* x, float scale, int32_t zp, float* y, int64_t n) {
  UseAvx2() ? avx2::DequantizeS8ToF32(x, scale, zp, y, n)
            : scalar::DequantizeS8ToF32(x, scale, zp, y, n);
}
void MinMaxF32(const float* x, int64_t n, float* lo, float* hi) {
  UseAvx2() ? avx2::MinMaxF32(x, n, lo, hi) : scalar::MinMaxF32(x, n, lo, hi);
}

void QAdd(const QAddParams& p, const void* a, const void* b, void* y, int64_t n) {
  UseAvx2() ? avx2::QAdd(p, a, b, y, n) : scalar::QAdd(p, a, b, y, n);
}

void TransposeBytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t rows, int64_t cols) {
  UseAvx2() ? avx2::TransposeBytes(src, src_stride, dst, dst_stride, rows, cols)
            : scalar::TransposeBytes(src, src_stride, dst, dst_stride, rows, cols);
}

}  // namespace kiln::cpu
