// SPDX-License-Identifier: Apache-2.0
// Scalar microkernels (the portable path) and the ISA dispatch of elementwise_kernels.h.

#include "kernels/cpu/elementwise_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/isa.h"

namespace kiln::cpu {

namespace scalar {

void ActivationF32(const Activation& act, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ApplyActivation(act, x[i]);
}

namespace {
inline float Apply(BinaryKind op, float a, float b) {
  switch (op) {
    case BinaryKind::kAdd:
      return a + b;
    case BinaryKind::kSub:
      return a - b;
    case BinaryKind::kMul:
      return a * b;
    case BinaryKind::kDiv:
      return a / b;
  }
  return 0;
}
}  // namespace

void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Apply(op, a[i], b[i]);
}

void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n) {
  if (scalar_first) {
    for (int64_t i = 0; i < n; ++i) y[i] = Apply(op, s, a[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = Apply(op, a[i], s);
  }
}

float SumF32(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return static_cast<float>(s);
}

float MaxF32(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::max(m, x[i]);
  }
  return m;
}

float ExpShiftSumF32(const float* x, float max, float* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    s += y[i];
  }
  return static_cast<float>(s);
}

void ScaleF32(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n) {
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const double rstd = 1.0 / std::sqrt(var + epsilon);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>((x[i] - mean) * rstd) * scale[i];
    y[i] = bias != nullptr ? v + bias[i] : v;
  }
}

}  // namespace scalar

namespace {
inline bool UseAvx2() { return ActiveIsa() >= Isa::kAvx2; }
}  // namespace

void ActivationF32(const Activation& act, const float* x, float* y, int64_t n) {
  UseAvx2() ? avx2::ActivationF32(act, x, y, n) : scalar::ActivationF32(act, x, y, n);
}
void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n) {
  UseAvx2() ? avx2::BinaryF32(op, a, b, y, n) : scalar::BinaryF32(op, a, b, y, n);
}
void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n) {
  UseAvx2() ? avx2::BinaryScalarF32(op, a, s, scalar_first, y, n)
            : scalar::BinaryScalarF32(op, a, s, scalar_first, y, n);
}
float SumF32(const float* x, int64_t n) {
  return UseAvx2() ? avx2::SumF32(x, n) : scalar::SumF32(x, n);
}
float MaxF32(const float* x, int64_t n) {
  return UseAvx2() ? avx2::MaxF32(x, n) : scalar::MaxF32(x, n);
}
float ExpShiftSumF32(const float* x, float max, float* y, int64_t n) {
  return UseAvx2() ? avx2::ExpShiftSumF32(x, max, y, n) : scalar::ExpShiftSumF32(x, max, y, n);
}
void ScaleF32(const float* x, float s, float* y, int64_t n) {
  UseAvx2() ? avx2::ScaleF32(x, s, y, n) : scalar::ScaleF32(x, s, y, n);
}
void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n) {
  UseAvx2() ? avx2::LayerNormRowF32(x, scale, bias, epsilon, y, n)
            : scalar::LayerNormRowF32(x, scale, bias, epsilon, y, n);
}

}  // namespace kiln::cpu
