// SPDX-License-Identifier: Apache-2.0
// AVX2+FMA microkernels of elementwise_kernels.h. Built with -mavx2 -mfma: call only when
// ActiveIsa() >= Isa::kAvx2.
//
// NOTE on the math. exp: range reduction x = n ln2 + r (ln2 split in two), a degree-6 polynomial
// for e^r, 2^n through the exponent bits; |rel err| < 2e-7 on [-87, 88], +inf above 88.72, 0
// below -103, NaN kept. sigmoid(x) = 1 / (1 + e^-x) (exact division, no cancellation). tanh: an
// odd Taylor polynomial for |x| < 0.5 (so tiny x keep full relative accuracy), else
// sign(x) (1 - 2 / (e^{2|x|} + 1)). erf: Taylor series for |x| < 0.75, else
// 1 - P(t) e^{-x^2} with t = 1 / (1 + p|x|) (Abramowitz-Stegun 7.1.26, |abs err| < 1.5e-7).
// GELU (erf form) uses erfc(-x/sqrt2)/2 directly for x < 0, so the left tail keeps relative
// accuracy; GELU (tanh form) is x * sigmoid(2u), exact rewriting of 0.5 x (1 + tanh u).
// Tails (n not a multiple of 8) go through the same vector code with masked loads and stores.

#include <immintrin.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/elementwise_kernels.h"

namespace kiln::cpu::avx2 {
namespace {

inline __m256i TailMask(int64_t r) {
  alignas(32) static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - r));
}

inline __m256 Set(float v) { return _mm256_set1_ps(v); }

inline __m256 Exp(__m256 x) {
  const __m256 hi = Set(88.3762626647949f), lo = Set(-87.3365447504f);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, Set(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, Set(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, Set(-2.12194440e-4f), r);
  __m256 p = Set(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, Set(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, Set(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, Set(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, Set(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, Set(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, Set(1.0f)));
  // 2^n: n in [-126, 127] after the clamp.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, Set(std::numeric_limits<float>::infinity()),
                       _mm256_cmp_ps(x, Set(88.72283935546875f), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, Set(-103.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN stays NaN
}

inline __m256 Sigmoid(__m256 x) {
  const __m256 one = Set(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

inline __m256 Abs(__m256 x) { return _mm256_andnot_ps(Set(-0.0f), x); }
inline __m256 SignOf(__m256 x) { return _mm256_and_ps(Set(-0.0f), x); }

inline __m256 Tanh(__m256 x) {
  const __m256 ax = Abs(x);
  // Small |x|: x + x^3 P(x^2).
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = Set(-1382.0f / 155925.0f);
  p = _mm256_fmadd_ps(p, x2, Set(62.0f / 2835.0f));
  p = _mm256_fmadd_ps(p, x2, Set(-17.0f / 315.0f));
  p = _mm256_fmadd_ps(p, x2, Set(2.0f / 15.0f));
  p = _mm256_fmadd_ps(p, x2, Set(-1.0f / 3.0f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x2), x, x);
  // Large |x|: 1 - 2 / (e^{2|x|} + 1), with x's sign.
  const __m256 e = Exp(_mm256_add_ps(ax, ax));
  const __m256 big =
      _mm256_sub_ps(Set(1.0f), _mm256_div_ps(Set(2.0f), _mm256_add_ps(e, Set(1.0f))));
  const __m256 big_signed = _mm256_or_ps(big, SignOf(x));
  __m256 y = _mm256_blendv_ps(big_signed, small, _mm256_cmp_ps(ax, Set(0.5f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// erfc(a) for a >= 0.75 (Abramowitz-Stegun 7.1.26 without the final 1 -).
inline __m256 ErfcTail(__m256 a) {
  const __m256 t = _mm256_div_ps(Set(1.0f), _mm256_fmadd_ps(Set(0.3275911f), a, Set(1.0f)));
  __m256 p = Set(1.061405429f);
  p = _mm256_fmadd_ps(p, t, Set(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, Set(1.421413741f));
  p = _mm256_fmadd_ps(p, t, Set(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, Set(0.254829592f));
  p = _mm256_mul_ps(p, t);
  return _mm256_mul_ps(p, Exp(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a))));
}

// erf(x) for |x| < 0.75 by its Taylor series.
inline __m256 ErfSmall(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = Set(1.0f / 9360.0f);
  p = _mm256_fmadd_ps(p, x2, Set(-1.0f / 1320.0f));
  p = _mm256_fmadd_ps(p, x2, Set(1.0f / 216.0f));
  p = _mm256_fmadd_ps(p, x2, Set(-1.0f / 42.0f));
  p = _mm256_fmadd_ps(p, x2, Set(1.0f / 10.0f));
  p = _mm256_fmadd_ps(p, x2, Set(-1.0f / 3.0f));
  p = _mm256_fmadd_ps(p, x2, Set(1.0f));
  return _mm256_mul_ps(_mm256_mul_ps(p, x), Set(1.1283791670955126f));  // 2/sqrt(pi)
}

inline __m256 Erf(__m256 x) {
  const __m256 ax = Abs(x);
  const __m256 big = _mm256_or_ps(_mm256_sub_ps(Set(1.0f), ErfcTail(ax)), SignOf(x));
  __m256 y = _mm256_blendv_ps(big, ErfSmall(x), _mm256_cmp_ps(ax, Set(0.75f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// 0.5 x (1 + erf(x / sqrt2)).
inline __m256 GeluErf(__m256 x) {
  const __m256 z = _mm256_mul_ps(x, Set(0.70710678118654752f));
  const __m256 az = Abs(z);
  // 1 + erf(z): small |z| -> 1 + ErfSmall; z >= 0.75 -> 2 - erfc(z); z <= -0.75 -> erfc(-z).
  const __m256 tail = ErfcTail(az);
  const __m256 pos = _mm256_sub_ps(Set(2.0f), tail);
  __m256 one_plus = _mm256_blendv_ps(pos, tail, _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ));
  one_plus = _mm256_blendv_ps(one_plus, _mm256_add_ps(Set(1.0f), ErfSmall(z)),
                              _mm256_cmp_ps(az, Set(0.75f), _CMP_LT_OQ));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(Set(0.5f), x), one_plus);
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)).
inline __m256 GeluTanh(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u =
      _mm256_mul_ps(Set(2.0f * 0.7978845608028654f), _mm256_fmadd_ps(Set(0.044715f), x3, x));
  // Large |x| saturates the sigmoid to exactly 1 or 0; -inf gives NaN (-inf * 0), as the formula.
  return _mm256_mul_ps(x, Sigmoid(u));
}

inline __m256 ApplyAct(const Activation& act, __m256 x) {
  switch (act.kind) {
    case ActivationKind::kNone:
      return x;
    // Operand order keeps NaN where the reference keeps it (max_ps/min_ps return the second
    // operand when either is NaN).
    case ActivationKind::kRelu:
      return _mm256_max_ps(_mm256_setzero_ps(), x);
    case ActivationKind::kClip:
      return _mm256_min_ps(Set(act.p1), _mm256_max_ps(Set(act.p0), x));
    case ActivationKind::kSigmoid:
      return Sigmoid(x);
    case ActivationKind::kSilu:
      return _mm256_mul_ps(x, Sigmoid(x));
    case ActivationKind::kHardSigmoid:  // fmax(0, fmin(1, v)): NaN -> 1, as the reference
      return _mm256_max_ps(_mm256_min_ps(_mm256_fmadd_ps(Set(act.p0), x, Set(act.p1)), Set(1.0f)),
                           _mm256_setzero_ps());
    case ActivationKind::kHardSwish:
      return _mm256_mul_ps(
          x,
          _mm256_max_ps(_mm256_min_ps(_mm256_fmadd_ps(Set(1.0f / 6.0f), x, Set(0.5f)), Set(1.0f)),
                        _mm256_setzero_ps()));
    case ActivationKind::kGelu:
      return GeluErf(x);
    case ActivationKind::kGeluTanh:
      return GeluTanh(x);
    case ActivationKind::kTanh:
      return Tanh(x);
    case ActivationKind::kLeakyRelu:
      return _mm256_blendv_ps(x, _mm256_mul_ps(x, Set(act.p0)),
                              _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    case ActivationKind::kErf:
      return Erf(x);
    case ActivationKind::kExp:
      return Exp(x);
  }
  return x;
}

template <typename F>
inline void Map(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = TailMask(n - i);
    _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));
  }
}

inline __m256 BinaryOp(BinaryKind op, __m256 a, __m256 b) {
  switch (op) {
    case BinaryKind::kAdd:
      return _mm256_add_ps(a, b);
    case BinaryKind::kSub:
      return _mm256_sub_ps(a, b);
    case BinaryKind::kMul:
      return _mm256_mul_ps(a, b);
    case BinaryKind::kDiv:
      return _mm256_div_ps(a, b);
  }
  return a;
}

template <BinaryKind kOp>
void BinaryT(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, BinaryOp(kOp, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    // Masked-off lanes load 0; 0/0 there is never stored.
    _mm256_maskstore_ps(y + i, m,
                        BinaryOp(kOp, _mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void ActivationF32(const Activation& act, const float* x, float* y, int64_t n) {
  switch (act.kind) {  // hoist the switch out of the loop for the common cases
    case ActivationKind::kRelu:
      return Map(x, y, n, [](__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); });
    case ActivationKind::kGelu:
      return Map(x, y, n, [](__m256 v) { return GeluErf(v); });
    case ActivationKind::kGeluTanh:
      return Map(x, y, n, [](__m256 v) { return GeluTanh(v); });
    case ActivationKind::kSigmoid:
      return Map(x, y, n, [](__m256 v) { return Sigmoid(v); });
    case ActivationKind::kTanh:
      return Map(x, y, n, [](__m256 v) { return Tanh(v); });
    default:
      return Map(x, y, n, [&act](__m256 v) { return ApplyAct(act, v); });
  }
}

void BinaryF32(BinaryKind op, const float* a, const float* b, float* y, int64_t n) {
  switch (op) {
    case BinaryKind::kAdd:
      return BinaryT<BinaryKind::kAdd>(a, b, y, n);
    case BinaryKind::kSub:
      return BinaryT<BinaryKind::kSub>(a, b, y, n);
    case BinaryKind::kMul:
      return BinaryT<BinaryKind::kMul>(a, b, y, n);
    case BinaryKind::kDiv:
      return BinaryT<BinaryKind::kDiv>(a, b, y, n);
  }
}

void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n) {
  const __m256 vs = Set(s);
  if (scalar_first) {
    Map(a, y, n, [&](__m256 v) { return BinaryOp(op, vs, v); });
  } else {
    Map(a, y, n, [&](__m256 v) { return BinaryOp(op, v, vs); });
  }
}

float SumF32(const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(x + i));
    acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(x + i));
  if (i < n) acc1 = _mm256_add_ps(acc1, _mm256_maskload_ps(x + i, TailMask(n - i)));
  return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

float MaxF32(const float* x, int64_t n) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  __m256 acc = Set(kNegInf);
  __m256 nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_max_ps(acc, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  float m = kNegInf;
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float v : lanes) m = v > m ? v : m;
  for (; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = x[i] > m ? x[i] : m;
  }
  if (_mm256_movemask_ps(nan) != 0) return std::numeric_limits<float>::quiet_NaN();
  return m;
}

float ExpShiftSumF32(const float* x, float max, float* y, int64_t n) {
  const __m256 vmax = Set(max);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    const __m256 e = _mm256_and_ps(Exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vmax)),
                                   _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(y + i, m, e);
    acc = _mm256_add_ps(acc, e);
  }
  return HorizontalSum(acc);
}

void ScaleF32(const float* x, float s, float* y, int64_t n) {
  const __m256 vs = Set(s);
  Map(x, y, n, [&](__m256 v) { return _mm256_mul_ps(v, vs); });
}

void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n) {
  const float mean = SumF32(x, n) / static_cast<float>(n);
  const __m256 vmean = Set(mean);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    acc = _mm256_fmadd_ps(d, d, acc);
  }
  float var = HorizontalSum(acc);
  for (; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(n);
  const float rstd = 1.0f / std::sqrt(var + epsilon);
  const __m256 vrstd = Set(rstd);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmean), vrstd);
    __m256 v = _mm256_mul_ps(d, _mm256_loadu_ps(scale + i));
    if (bias != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + i));
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) {
    const float v = (x[i] - mean) * rstd * scale[i];
    y[i] = bias != nullptr ? v + bias[i] : v;
  }
}

}  // namespace kiln::cpu::avx2
