// SPDX-License-Identifier: Apache-2.0
#pragma once
// Contiguous quantize / dequantize microkernels of the CPU QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear kernels (quantized.cc), with runtime ISA dispatch (isa.h): avx2:: when
// ActiveIsa() is kAvx2 (quantized_kernels_avx2.cc, built with -mavx2 -mfma), scalar:: otherwise.
// Both compute exactly what the reference kernels (ref/quantize.cc) compute:
//   quantize:   y = saturate(round_half_to_even(x / scale) + zero_point); NaN gives zero_point
//   dequantize: y = float(x - zero_point) * scale
// All run on the calling thread (callers split work with ParallelFor).

#include <cstdint>
#include <limits>

namespace kiln::cpu {

void QuantizeF32ToU8(const float* x, float scale, int32_t zero_point, uint8_t* y, int64_t n);
void QuantizeF32ToS8(const float* x, float scale, int32_t zero_point, int8_t* y, int64_t n);
void DequantizeU8ToF32(const uint8_t* x, float scale, int32_t zero_point, float* y, int64_t n);
void DequantizeS8ToF32(const int8_t* x, float scale, int32_t zero_point, float* y, int64_t n);
// *lo = min(0, min x), *hi = max(0, max x), NaNs ignored.
void MinMaxF32(const float* x, int64_t n, float* lo, float* hi);

// ai.kiln QAdd (op/kiln_ops.h) on n elements: A, B and Y are UINT8, or INT8 when their
// `*_signed` flag is set; [lo, hi] are the activation's bounds (+-inf: none).
struct QAddParams {
  float a_scale = 1, b_scale = 1, y_scale = 1;
  int32_t a_zp = 0, b_zp = 0, y_zp = 0;
  bool a_signed = false, b_signed = false, y_signed = false;
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};
void QAdd(const QAddParams& p, const void* a, const void* b, void* y, int64_t n);

// dst[c][r] = src[r][c] for a rows x cols byte matrix whose rows are `src_stride` bytes apart,
// written with rows `dst_stride` bytes apart: one tile of the channels-first <-> channels-last
// transposes around INT8 convolutions.
void TransposeBytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t rows, int64_t cols);

namespace scalar {
void QuantizeF32ToU8(const float* x, float scale, int32_t zero_point, uint8_t* y, int64_t n);
void QuantizeF32ToS8(const float* x, float scale, int32_t zero_point, int8_t* y, int64_t n);
void DequantizeU8ToF32(const uint8_t* x, float scale, int32_t zero_point, float* y, int64_t n);
void DequantizeS8ToF32(const int8_t* x, float scale, int32_t zero_point, float* y, int64_t n);
void MinMaxF32(const float* x, int64_t n, float* lo, float* hi);
void QAdd(const QAddParams& p, const void* a, const void* b, void* y, int64_t n);
void TransposeBytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t rows, int64_t cols);
}  // namespace scalar

namespace avx2 {
void QuantizeF32ToU8(const float* x, float scale, int32_t zero_point, uint8_t* y, int64_t n);
void QuantizeF32ToS8(const float* x, float scale, int32_t zero_point, int8_t* y, int64_t n);
void DequantizeU8ToF32(const uint8_t* x, float scale, int32_t zero_point, float* y, int64_t n);
void DequantizeS8ToF32(const int8_t* x, float scale, int32_t zero_point, float* y, int64_t n);
void MinMaxF32(const float* x, int64_t n, float* lo, float* hi);
void QAdd(const QAddParams& p, const void* a, const void* b, void* y, int64_t n);
void TransposeBytes(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t rows, int64_t cols);
}  // namespace avx2

}  // namespace kiln::cpu
