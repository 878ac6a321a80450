// SPDX-License-Identifier: Apache-2.0
// Scalar microkernels (the portable path: the reference's own float formulas, or for Pow's
// special exponents the exact arithmetic of elementwise_kernels.h, so every op is exact here)
// and the ISA dispatch of elementwise_kernels.h.

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
// The reference's definitions (math_binary.cc, math_unary.cc) for FLOAT.
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
    case BinaryKind::kMax:
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return b > a ? b : a;
    case BinaryKind::kMin:
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return b < a ? b : a;
    case BinaryKind::kPow:
      return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
  return 0;
}

inline float ApplyUnary(UnaryKind op, float x) {
  switch (op) {
    case UnaryKind::kNeg:
      return -x;
    case UnaryKind::kAbs:
      return std::abs(x);
    case UnaryKind::kSqrt:
      return std::sqrt(x);
    case UnaryKind::kReciprocal:
      return 1.0f / x;
    case UnaryKind::kFloor:
      return std::floor(x);
    case UnaryKind::kCeil:
      return std::ceil(x);
    case UnaryKind::kRound:
      return std::nearbyint(x);  // the default rounding mode: half to even
    case UnaryKind::kSign:
      return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case UnaryKind::kLog:
      return std::log(x);
    case UnaryKind::kSoftplus:
      return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

inline bool Compare(CompareKind op, float a, float b) {
  switch (op) {
    case CompareKind::kEqual:
      return a == b;
    case CompareKind::kLess:
      return a < b;
    case CompareKind::kGreater:
      return a > b;
    case CompareKind::kLessOrEqual:
      return a <= b;
    case CompareKind::kGreaterOrEqual:
      return a >= b;
  }
  return false;
}
}  // namespace

void UnaryF32(UnaryKind op, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ApplyUnary(op, x[i]);
}

void PowScalarExpF32(const float* x, double e, float* y, int64_t n) {
  // The exact exponents of elementwise_kernels.h (the same arithmetic as the AVX2 level).
  if (e == 0.0 || e == 1.0) {
    for (int64_t i = 0; i < n; ++i) y[i] = e == 0.0 ? 1.0f : x[i];
  } else if (e == 2.0) {  // the double product of two floats is exact: one rounding either way
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
  } else if (e == -1.0) {
    for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / x[i];
  } else if (e == 0.5) {  // pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf
    for (int64_t i = 0; i < n; ++i) {
      y[i] = std::isinf(x[i]) ? std::numeric_limits<float>::infinity() : std::sqrt(x[i]) + 0.0f;
    }
  } else if (e == 3.0) {
    for (int64_t i = 0; i < n; ++i) {
      const double d = x[i];
      y[i] = static_cast<float>(d * d * d);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<float>(std::pow(static_cast<double>(x[i]), e));
    }
  }
}

void PowF32(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Apply(BinaryKind::kPow, a[i], b[i]);
}

void CompareF32(CompareKind op, const float* a, const float* b, bool* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Compare(op, a[i], b[i]);
}

void CompareScalarF32(CompareKind op, const float* a, float s, bool scalar_first, bool* y,
                      int64_t n) {
  if (scalar_first) {
    for (int64_t i = 0; i < n; ++i) y[i] = Compare(op, s, a[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = Compare(op, a[i], s);
  }
}

void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Apply(op, a[i], b[i]);
}

void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n) {
  if (op == BinaryKind::kPow && !scalar_first) return PowScalarExpF32(a, s, y, n);
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

namespace {
// The mean and 1 / sqrt(variance + epsilon) of x[0..n), in double.
void RowMeanRstd(const float* x, int64_t n, float epsilon, double* mean, double* rstd) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += x[i];
  m /= static_cast<double>(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - m) * (x[i] - m);
  var /= static_cast<double>(n);
  *mean = m;
  *rstd = 1.0 / std::sqrt(var + epsilon);
}
}  // namespace

void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n) {
  double mean = 0, rstd = 0;
  RowMeanRstd(x, n, epsilon, &mean, &rstd);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>((x[i] - mean) * rstd) * scale[i];
    y[i] = bias != nullptr ? v + bias[i] : v;
  }
}

void LanesReduceF32(bool max, const float* x, int64_t groups, int64_t lanes, float* acc) {
  for (int64_t l = 0; l < lanes; ++l) acc[l] = x[l];
  for (int64_t g = 1; g < groups; ++g) {
    const float* row = x + g * lanes;
    for (int64_t l = 0; l < lanes; ++l) {
      // NaN propagates: a NaN lane replaces acc, and a NaN acc stays (no comparison is true).
      acc[l] = max ? (row[l] > acc[l] || row[l] != row[l] ? row[l] : acc[l]) : acc[l] + row[l];
    }
  }
}

void LanesBinaryF32(BinaryKind op, const float* x, const float* v, bool v_first, float* y,
                    int64_t groups, int64_t lanes) {
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t l = 0; l < lanes; ++l) {
      const float a = x[g * lanes + l];
      y[g * lanes + l] = v_first ? Apply(op, v[l], a) : Apply(op, a, v[l]);
    }
  }
}

void LanesAffineF32(const float* x, const float* scale, const float* bias, bool relu, float* y,
                    int64_t groups, int64_t lanes) {
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t l = 0; l < lanes; ++l) {
      const float v = x[g * lanes + l] * scale[l] + bias[l];
      y[g * lanes + l] = relu ? std::max(v, 0.0f) : v;
    }
  }
}

void InstanceNormRowF32(const float* x, float scale, float bias, float epsilon, float* y,
                        int64_t n) {
  double mean = 0, rstd = 0;
  RowMeanRstd(x, n, epsilon, &mean, &rstd);
  const double mul = rstd * scale;
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((x[i] - mean) * mul + bias);
}

}  // namespace scalar

namespace {
inline bool UseAvx2() { return ActiveIsa() >= Isa::kAvx2; }
}  // namespace

float ApplyBinaryF32(BinaryKind op, float a, float b) { return scalar::Apply(op, a, b); }
bool ApplyCompareF32(CompareKind op, float a, float b) { return scalar::Compare(op, a, b); }

void UnaryF32(UnaryKind op, const float* x, float* y, int64_t n) {
  UseAvx2() ? avx2::UnaryF32(op, x, y, n) : scalar::UnaryF32(op, x, y, n);
}
void PowScalarExpF32(const float* x, double e, float* y, int64_t n) {
  UseAvx2() ? avx2::PowScalarExpF32(x, e, y, n) : scalar::PowScalarExpF32(x, e, y, n);
}
void PowF32(const float* a, const float* b, float* y, int64_t n) {
  UseAvx2() ? avx2::PowF32(a, b, y, n) : scalar::PowF32(a, b, y, n);
}
void CompareF32(CompareKind op, const float* a, const float* b, bool* y, int64_t n) {
  UseAvx2() ? avx2::CompareF32(op, a, b, y, n) : scalar::CompareF32(op, a, b, y, n);
}
void CompareScalarF32(CompareKind op, const float* a, float s, bool scalar_first, bool* y,
                      int64_t n) {
  UseAvx2() ? avx2::CompareScalarF32(op, a, s, scalar_first, y, n)
            : scalar::CompareScalarF32(op, a, s, scalar_first, y, n);
}

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
void LanesReduceF32(bool max, const float* x, int64_t groups, int64_t lanes, float* acc) {
  UseAvx2() ? avx2::LanesReduceF32(max, x, groups, lanes, acc)
            : scalar::LanesReduceF32(max, x, groups, lanes, acc);
}
void LanesBinaryF32(BinaryKind op, const float* x, const float* v, bool v_first, float* y,
                    int64_t groups, int64_t lanes) {
  UseAvx2() ? avx2::LanesBinaryF32(op, x, v, v_first, y, groups, lanes)
            : scalar::LanesBinaryF32(op, x, v, v_first, y, groups, lanes);
}
void LanesAffineF32(const float* x, const float* scale, const float* bias, bool relu, float* y,
                    int64_t groups, int64_t lanes) {
  UseAvx2() ? avx2::LanesAffineF32(x, scale, bias, relu, y, groups, lanes)
            : scalar::LanesAffineF32(x, scale, bias, relu, y, groups, lanes);
}
void InstanceNormRowF32(const float* x, float scale, float bias, float epsilon, float* y,
                        int64_t n) {
  UseAvx2() ? avx2::InstanceNormRowF32(x, scale, bias, epsilon, y, n)
            : scalar::InstanceNormRowF32(x, scale, bias, epsilon, y, n);
}

}  // namespace kiln::cpu
