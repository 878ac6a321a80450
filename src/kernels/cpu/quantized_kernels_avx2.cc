// SPDX-License-Identifier: Apache-2.0
// AVX2 quantize / dequantize microkernels (quantized_kernels.h); built with -mavx2 -mfma.
//
// NOTE: quantization divides by the scale (as the reference does, not a multiply by its
// reciprocal, which can differ in the last bit), replaces NaN by 0 (so it lands on the zero
// point), clamps to [qmin - zp, qmax - zp] in FP32 (so the int32 conversion cannot overflow),
// rounds with cvtps2dq (round half to even under the default MXCSR mode) and adds the zero point
// in int32; 32 lanes are then packed to bytes. Tails run the scalar code.

#include <immintrin.h>

#include <limits>

#include "kernels/cpu/quantized_kernels.h"

namespace kiln::cpu::avx2 {
namespace {

template <typename Q>
inline __m256i QuantizeLanes(__m256 x, __m256 scale, __m256 lo, __m256 hi, __m256i zp) {
  __m256 v = _mm256_div_ps(x, scale);
  v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
  v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
  return _mm256_add_epi32(_mm256_cvtps_epi32(v), zp);
}

template <typename Q>
void Quantize(const float* x, float scale, int32_t zero_point, Q* y, int64_t n) {
  constexpr bool kUnsigned = std::numeric_limits<Q>::min() == 0;
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 lo = _mm256_set1_ps(float(std::numeric_limits<Q>::min()) - float(zero_point));
  const __m256 hi = _mm256_set1_ps(float(std::numeric_limits<Q>::max()) - float(zero_point));
  const __m256i zp = _mm256_set1_epi32(zero_point);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = QuantizeLanes<Q>(_mm256_loadu_ps(x + i), vs, lo, hi, zp);
    const __m256i b = QuantizeLanes<Q>(_mm256_loadu_ps(x + i + 8), vs, lo, hi, zp);
    const __m256i c = QuantizeLanes<Q>(_mm256_loadu_ps(x + i + 16), vs, lo, hi, zp);
    const __m256i d = QuantizeLanes<Q>(_mm256_loadu_ps(x + i + 24), vs, lo, hi, zp);
    const __m256i ab = _mm256_packs_epi32(a, b);  // values are in range: no saturation here
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = kUnsigned ? _mm256_packus_epi16(ab, cd) : _mm256_packs_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm256_permutevar8x32_epi32(bytes, order));
  }
  if (i < n) {
    if constexpr (kUnsigned) {
      scalar::QuantizeF32ToU8(x + i, scale, zero_point, y + i, n - i);
    } else {
      scalar::QuantizeF32ToS8(x + i, scale, zero_point, y + i, n - i);
    }
  }
}

template <typename Q>
void Dequantize(const Q* x, float scale, int32_t zero_point, float* y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256i zp = _mm256_set1_epi32(zero_point);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i wide =
        std::numeric_limits<Q>::min() == 0 ? _mm256_cvtepu8_epi32(raw) : _mm256_cvtepi8_epi32(raw);
    const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(wide, zp));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, vs));
  }
  for (; i < n; ++i) y[i] = static_cast<float>(int32_t{x[i]} - zero_point) * scale;
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
  // min_ps / max_ps return their second operand when either is NaN: the accumulator survives.
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vlo = _mm256_min_ps(v, vlo);
    vhi = _mm256_max_ps(v, vhi);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  float tl = 0, th = 0;
  scalar::MinMaxF32(x + i, n - i, &tl, &th);
  for (int k = 0; k < 8; ++k) {
    tl = l[k] < tl ? l[k] : tl;
    th = h[k] > th ? h[k] : th;
  }
  *lo = tl;
  *hi = th;
}

namespace {

inline __m256 DequantizeLanes(const void* t, bool is_signed, int64_t i, __m256i zp, __m256 scale) {
  const __m128i raw =
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint8_t*>(t) + i));
  const __m256i wide = is_signed ? _mm256_cvtepi8_epi32(raw) : _mm256_cvtepu8_epi32(raw);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(wide, zp)), scale);
}

}  // namespace

void QAdd(const QAddParams& p, const void* a, const void* b, void* y, int64_t n) {
  const __m256i za = _mm256_set1_epi32(p.a_zp), zb = _mm256_set1_epi32(p.b_zp);
  const __m256i zy = _mm256_set1_epi32(p.y_zp);
  const __m256 sa = _mm256_set1_ps(p.a_scale), sb = _mm256_set1_ps(p.b_scale);
  const __m256 sy = _mm256_set1_ps(p.y_scale);
  const __m256 lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi);
  const float qlo = p.y_signed ? -128.0f : 0.0f, qhi = p.y_signed ? 127.0f : 255.0f;
  const __m256 vqlo = _mm256_set1_ps(qlo - float(p.y_zp));
  const __m256 vqhi = _mm256_set1_ps(qhi - float(p.y_zp));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  auto lanes = [&](int64_t i) {
    const __m256 va = DequantizeLanes(a, p.a_signed, i, za, sa);
    const __m256 vb = DequantizeLanes(b, p.b_signed, i, zb, sb);
    __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(va, vb), lo), hi);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, sy), vqlo), vqhi);
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), zy);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i ab = _mm256_packs_epi32(lanes(i), lanes(i + 8));
    const __m256i cd = _mm256_packs_epi32(lanes(i + 16), lanes(i + 24));
    const __m256i bytes = p.y_signed ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint8_t*>(y) + i),
                        _mm256_permutevar8x32_epi32(bytes, order));
  }
  if (i < n) {
    auto offset = [i](const void* t) { return static_cast<const uint8_t*>(t) + i; };
    scalar::QAdd(p, offset(a), offset(b), static_cast<uint8_t*>(y) + i, n - i);
  }
}

namespace {

// 16x16 bytes: four rounds of unpacks (8-, 16-, 32-, 64-bit), the classic SSE2 transpose.
inline void Transpose16x16(const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds) {
  __m128i r[16], t[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ss));
  }
  for (int i = 0; i < 8; ++i) {
    t[i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[i + 8] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm_unpacklo_epi16(t[2 * i], t[2 * i + 1]);
    r[i + 4] = _mm_unpackhi_epi16(t[2 * i], t[2 * i + 1]);
    r[i + 8] = _mm_unpacklo_epi16(t[2 * i + 8], t[2 * i + 9]);
    r[i + 12] = _mm_unpackhi_epi16(t[2 * i + 8], t[2 * i + 9]);
  }
  for (int g = 0; g < 4; ++g) {
    for (int i = 0; i < 2; ++i) {
      t[4 * g + i] = _mm_unpacklo_epi32(r[4 * g + 2 * i], r[4 * g + 2 * i + 1]);
      t[4 * g + i + 2] = _mm_unpackhi_epi32(r[4 * g + 2 * i], r[4 * g + 2 * i + 1]);
    }
  }
  for (int g = 0; g < 8; ++g) {
    r[2 * g] = _mm_unpacklo_epi64(t[(g / 2) * 4 + (g % 2) * 2], t[(g / 2) * 4 + (g % 2) * 2 + 1]);
    r[2 * g + 1] =
        _mm_unpackhi_epi64(t[(g / 2) * 4 + (g % 2) * 2], t[(g / 2) * 4 + (g % 2) * 2 + 1]);
  }
  for (int i = 0; i < 16; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * ds), r[i]);
  }
}

}  // namespace

void TransposeBytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t rows, int64_t cols) {
  const int64_t rows16 = rows / 16 * 16, cols16 = cols / 16 * 16;
  for (int64_t r = 0; r < rows16; r += 16) {
    for (int64_t c = 0; c < cols16; c += 16) {
      Transpose16x16(src + r * src_stride + c, src_stride, dst + c * dst_stride + r, dst_stride);
    }
  }
  if (cols16 < cols) {
    scalar::TransposeBytes(src + cols16, src_stride, dst + cols16 * dst_stride, dst_stride, rows,
                           cols - cols16);
  }
  if (rows16 < rows) {
    scalar::TransposeBytes(src + rows16 * src_stride, src_stride, dst + rows16, dst_stride,
                           rows - rows16, cols16);
  }
}

}  // namespace kiln::cpu::avx2
