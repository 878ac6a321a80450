// SPDX-License-Identifier: Apache-2.0
// Reference dequantization and quantization of ggml's block types (ggml_quants.h): plain scalar
// code, written from the layouts; the matrix kernels (llm_matmul.h) never call it per element.

#include "llm/ggml_quants.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/dtype.h"

namespace kiln::llm {
namespace {

float H2F(uint16_t h) { return Float16ToFloat(Float16{h}); }
uint16_t F2H(float f) { return FloatToFloat16(f).bits; }

// Round to nearest, ties to even (the default floating-point environment), as ggml's
// nearest_int does for the magnitudes quantization produces.
int NearestInt(float v) { return static_cast<int>(std::nearbyint(v)); }

// ---------------------------------------------------------------------------------------------
// Dequantization.

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H2F(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 15) - 8) * d;
      y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = H2F(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H2F(b[i].d);
    const float dmin = H2F(b[i].dmin);
    uint8_t sc[8], m[8];
    UnpackQ4KScales(b[i].scales, sc, m);
    for (int g = 0; g < 4; ++g) {
      const uint8_t* q = b[i].qs + 32 * g;
      const float d1 = d * sc[2 * g], m1 = dmin * m[2 * g];
      const float d2 = d * sc[2 * g + 1], m2 = dmin * m[2 * g + 1];
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 15) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = H2F(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
    }
  }
}

void DequantQ8_K(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    for (int j = 0; j < 256; ++j) y[j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

// ---------------------------------------------------------------------------------------------
// Quantization.

void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = F2H(d);
    for (int j = 0; j < 16; ++j) {
      // Truncation of v + 8.5 (v in [-8, 8]) rounds half up, as ggml's reference does.
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantQ8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = F2H(d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void QuantQ8_K(const float* x, BlockQ8_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      b[i].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.0f / iscale;
  }
}

// The (scale, min) of one Q4_K sub-block of n values: codes L[i] in [0, 15] with x[i] ~
// scale * L[i] - min, min >= 0, chosen among a sweep of candidate step sizes by the weighted
// squared error, each candidate's (scale, min) refitted by weighted least squares.
float FitScaleMin(const float* x, const float* w, int n, float* min_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    *min_out = -lo;
    return 0.0f;
  }
  float sw = 0, swx = 0;
  for (int i = 0; i < n; ++i) {
    sw += w[i];
    swx += w[i] * x[i];
  }
  auto error = [&](float scale, float offset) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt((x[i] - offset) / scale), 0, 15);
      const float diff = scale * static_cast<float>(l) + offset - x[i];
      e += w[i] * diff * diff;
    }
    return e;
  };
  float best_scale = (hi - lo) / 15.0f, best_offset = lo;
  float best_err = error(best_scale, best_offset);
  for (int step = 0; step <= 20; ++step) {
    const float iscale = (14.0f + 0.1f * static_cast<float>(step)) / (hi - lo);
    float sl = 0, sl2 = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(std::clamp(NearestInt(iscale * (x[i] - lo)), 0, 15));
      sl += w[i] * l;
      sl2 += w[i] * l * l;
      sxl += w[i] * l * x[i];
    }
    const float det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    float scale = (sw * sxl - swx * sl) / det;
    float offset = (sl2 * swx - sl * sxl) / det;
    if (offset > 0) {
      offset = 0;
      scale = sxl / sl2;
    }
    if (scale <= 0) continue;
    const float err = error(scale, offset);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      best_offset = offset;
    }
  }
  *min_out = -best_offset;
  return best_scale;
}

void QuantQ4_K(const float* x, BlockQ4_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(xs[l]);
      scales[j] = FitScaleMin(xs, w, 32, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      ls[j] = static_cast<uint8_t>(std::clamp(NearestInt(inv_scale * scales[j]), 0, 63));
      lm[j] = static_cast<uint8_t>(std::clamp(NearestInt(inv_min * mins[j]), 0, 63));
    }
    PackQ4KScales(ls, lm, b[i].scales);
    b[i].d = F2H(max_scale / 63.0f);
    b[i].dmin = F2H(max_min / 63.0f);
    const float d = H2F(b[i].d), dmin = H2F(b[i].dmin);
    uint8_t codes[256] = {};
    for (int j = 0; j < 8; ++j) {
      const float dj = d * ls[j];
      if (dj == 0.0f) continue;
      const float mj = dmin * lm[j];
      for (int l = 0; l < 32; ++l) {
        codes[32 * j + l] =
            static_cast<uint8_t>(std::clamp(NearestInt((x[32 * j + l] + mj) / dj), 0, 15));
      }
    }
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * g + l] =
            static_cast<uint8_t>(codes[64 * g + l] | (codes[64 * g + 32 + l] << 4));
      }
    }
  }
}

// The signed scale of one Q6_K group of 16 (codes in [-32, 31], x ~ scale * code), fitted by
// least squares weighted by x^2 over a sweep of candidate steps around -max/32.
float FitScaleSymmetric(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) return 0.0f;
  float best_scale = -max / 32.0f, best = -1;
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(32.0f + 0.1f * static_cast<float>(step)) / max;
    float sxl = 0, sl2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(std::clamp(NearestInt(iscale * x[i]), -32, 31));
      const float w = x[i] * x[i];
      sxl += w * x[i] * l;
      sl2 += w * l * l;
    }
    // The least-squares scale sxl / sl2 leaves an error of sum(w x^2) - sxl^2 / sl2.
    if (sl2 > 0 && sxl * sxl / sl2 > best) {
      best = sxl * sxl / sl2;
      best_scale = sxl / sl2;
    }
  }
  return best_scale;
}

void QuantQ6_K(const float* x, BlockQ6_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float scales[16];
    float max_scale = 0, max_abs = 0;
    for (int g = 0; g < 16; ++g) {
      scales[g] = FitScaleSymmetric(x + 16 * g, 16);
      if (std::fabs(scales[g]) > max_abs) {
        max_abs = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    std::memset(&b[i], 0, sizeof(BlockQ6_K));
    if (max_abs < 1e-15f) continue;
    const float iscale = -128.0f / max_scale;
    b[i].d = F2H(1.0f / iscale);
    for (int g = 0; g < 16; ++g) {
      b[i].scales[g] = static_cast<int8_t>(std::clamp(NearestInt(iscale * scales[g]), -128, 127));
    }
    const float d = H2F(b[i].d);
    uint8_t codes[256];
    for (int g = 0; g < 16; ++g) {
      const float dg = d * b[i].scales[g];
      for (int l = 0; l < 16; ++l) {
        const int c = dg != 0.0f ? std::clamp(NearestInt(x[16 * g + l] / dg), -32, 31) : 0;
        codes[16 * g + l] = static_cast<uint8_t>(c + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* c = codes + 128 * h;
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((c[l] & 15) | ((c[l + 64] & 15) << 4));
        ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 15) | ((c[l + 96] & 15) << 4));
        qh[l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) |
                                     ((c[l + 64] >> 4) << 4) | ((c[l + 96] >> 4) << 6));
      }
    }
  }
}

// ggml's name of the type, or "type N" for a number without one.
std::string TypeLabel(GgmlType type) {
  const std::string_view name = GgmlTypeName(type);
  return name.empty() ? fmt::format("type {}", static_cast<uint32_t>(type)) : std::string(name);
}

Status CheckRow(GgmlType type, int64_t n, const char* what) {
  if (n < 0) return Status::InvalidArgument(fmt::format("{}: negative length {}", what, n));
  const int64_t be = BlockElements(type);
  if (be > 0 && n % be != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: length {} is not a multiple of the {}-element "
                    "block of type {}",
                    what, n, be, TypeLabel(type)));
  }
  return Status::OK();
}

}  // namespace

bool CanDequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ8_K:
      return true;
    default:
      return false;
  }
}

bool CanQuantize(GgmlType type) { return CanDequantize(type); }

Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  if (!CanDequantize(type)) {
    return Status::InvalidArgument(
        fmt::format("cannot dequantize {}; supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, q8_K",
                    TypeLabel(type)));
  }
  KILN_RETURN_IF_ERROR(CheckRow(type, n, "DequantizeRow"));
  const int64_t nb = n / BlockElements(type);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case GgmlType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = H2F(h[i]);
      break;
    }
    case GgmlType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(BFloat16{h[i]});
      break;
    }
    case GgmlType::kQ4_0:
      DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
      break;
    case GgmlType::kQ8_0:
      DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
      break;
    case GgmlType::kQ4_K:
      DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
      break;
    case GgmlType::kQ6_K:
      DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
      break;
    case GgmlType::kQ8_K:
      DequantQ8_K(static_cast<const BlockQ8_K*>(src), dst, nb);
      break;
    default:
      break;
  }
  return Status::OK();
}

Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  if (!CanQuantize(type)) {
    return Status::InvalidArgument(fmt::format(
        "cannot quantize to {}; supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, q8_K",
        TypeLabel(type)));
  }
  KILN_RETURN_IF_ERROR(CheckRow(type, n, "QuantizeRow"));
  const int64_t nb = n / BlockElements(type);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case GgmlType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = F2H(src[i]);
      break;
    }
    case GgmlType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = FloatToBFloat16(src[i]).bits;
      break;
    }
    case GgmlType::kQ4_0:
      QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
      break;
    case GgmlType::kQ8_0:
      QuantQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
      break;
    case GgmlType::kQ4_K:
      QuantQ4_K(src, static_cast<BlockQ4_K*>(dst), nb);
      break;
    case GgmlType::kQ6_K:
      QuantQ6_K(src, static_cast<BlockQ6_K*>(dst), nb);
      break;
    case GgmlType::kQ8_K:
      QuantQ8_K(src, static_cast<BlockQ8_K*>(dst), nb);
      break;
    default:
      break;
  }
  return Status::OK();
}

Status DequantizeRows(GgmlType type, const void* data, size_t row_bytes, int64_t first_row,
                      int64_t n_rows, int64_t cols, float* out) {
  if (!CanDequantize(type)) {
    return Status::InvalidArgument(
        fmt::format("cannot dequantize {}; supported: f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, q8_K",
                    TypeLabel(type)));
  }
  KILN_RETURN_IF_ERROR(CheckRow(type, cols, "DequantizeRows"));
  if (first_row < 0 || n_rows < 0) {
    return Status::InvalidArgument(
        fmt::format("DequantizeRows: negative row range [{}, +{})", first_row, n_rows));
  }
  if (row_bytes < RowBytes(type, cols)) {
    return Status::InvalidArgument(
        fmt::format("DequantizeRows: rows of {} bytes are too short for {} {} elements "
                    "({} bytes)",
                    row_bytes, cols, TypeLabel(type), RowBytes(type, cols)));
  }
  const auto* base = static_cast<const uint8_t*>(data);
  for (int64_t i = 0; i < n_rows; ++i) {
    KILN_RETURN_IF_ERROR(DequantizeRow(type, base + static_cast<size_t>(first_row + i) * row_bytes,
                                       out + i * cols, cols));
  }
  return Status::OK();
}

}  // namespace kiln::llm
