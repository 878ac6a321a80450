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
//
// NOTE on the math ops. Neg, Abs, Sqrt (sqrtps is correctly rounded), Reciprocal (a division,
// not rcpps), Floor / Ceil / Round (roundps; Round is half to even), Sign, Max / Min and the
// comparisons compute exactly what the reference does. Log, Softplus and Pow with a general
// exponent widen four lanes at a time to double: ln x from x = m 2^e, m in [sqrt(1/2),
// sqrt(2)), ln m = 2 atanh((m - 1) / (m + 1)) by its series to s^15 (relative error < 1e-13);
// e^t as 2^n e^r, |r| <= ln2 / 2, by the Taylor series to r^11 (< 1e-14); pow(x, y) =
// exp(y ln|x|) with t = y ln|x| clamped to [-200, 200] (beyond it every FLOAT result is 0 or
// inf) and C99's special cases (pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf)
// = 1, NaN for a finite negative base and a non-integer exponent, the base's sign for odd
// integer exponents, -0 and -inf included); softplus(x) = max(x, 0) + log1p(e^-|x|). The one
// rounding to FLOAT then gives the correctly rounded result except when the exact value lies
// within about 1e-13 (relative) of a rounding boundary: within 1 ulp of the reference
// ((float) pow in double; logf; its float softplus formula, itself within 1-2 ulp). Pow with a
// scalar exponent of 0, 1, 2, 3, 0.5 or -1 is exact: x * x and 1 / x round once in FLOAT as
// the double result does (a double product of two floats is exact, a division is rounded
// innocuously twice), x^3 is x * x * x in double, 0.5 is sqrtps with pow's +0 for -0 and +inf
// for -inf.

#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>
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

// ---- Double-precision lanes: log, exp, pow, softplus (NOTE on the math ops) ------------------

inline __m256d SetD(double v) { return _mm256_set1_pd(v); }

// Non-negative int64 lanes below 2^52 as doubles.
inline __m256d SmallIntToDouble(__m256i v) {
  const __m256d magic = SetD(4503599627370496.0);  // 2^52
  return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(v, _mm256_castpd_si256(magic))), magic);
}

// ln(x) for positive, finite, normal x (a FLOAT widened to double is never subnormal).
inline __m256d LnPositiveD(__m256d x) {
  const __m256i bits = _mm256_castpd_si256(x);
  __m256d m = _mm256_castsi256_pd(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x000FFFFFFFFFFFFFLL)),
                      _mm256_set1_epi64x(0x3FF0000000000000LL)));  // [1, 2)
  __m256d e = SmallIntToDouble(_mm256_srli_epi64(bits, 52));       // biased exponent
  const __m256d big = _mm256_cmp_pd(m, SetD(1.4142135623730951), _CMP_GT_OQ);
  m = _mm256_blendv_pd(m, _mm256_mul_pd(m, SetD(0.5)), big);
  e = _mm256_add_pd(_mm256_sub_pd(e, SetD(1023.0)), _mm256_and_pd(big, SetD(1.0)));
  const __m256d s = _mm256_div_pd(_mm256_sub_pd(m, SetD(1.0)), _mm256_add_pd(m, SetD(1.0)));
  const __m256d s2 = _mm256_mul_pd(s, s);
  __m256d p = SetD(1.0 / 15);
  p = _mm256_fmadd_pd(p, s2, SetD(1.0 / 13));
  p = _mm256_fmadd_pd(p, s2, SetD(1.0 / 11));
  p = _mm256_fmadd_pd(p, s2, SetD(1.0 / 9));
  p = _mm256_fmadd_pd(p, s2, SetD(1.0 / 7));
  p = _mm256_fmadd_pd(p, s2, SetD(1.0 / 5));
  p = _mm256_fmadd_pd(p, s2, SetD(1.0 / 3));
  p = _mm256_fmadd_pd(p, s2, SetD(1.0));
  return _mm256_fmadd_pd(e, SetD(0.6931471805599453), _mm256_mul_pd(_mm256_add_pd(s, s), p));
}

// ln(x) with log's special cases: -inf at +-0, +inf at +inf, NaN below 0 and for NaN.
inline __m256d LnD(__m256d x) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d inf = SetD(std::numeric_limits<double>::infinity());
  __m256d r = LnPositiveD(x);
  r = _mm256_blendv_pd(r, SetD(-std::numeric_limits<double>::infinity()),
                       _mm256_cmp_pd(x, zero, _CMP_EQ_OQ));
  r = _mm256_blendv_pd(r, inf, _mm256_cmp_pd(x, inf, _CMP_EQ_OQ));
  r = _mm256_blendv_pd(r, SetD(std::numeric_limits<double>::quiet_NaN()),
                       _mm256_cmp_pd(x, zero, _CMP_LT_OQ));
  return _mm256_blendv_pd(r, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
}

// e^t for |t| <= 700 (callers clamp).
inline __m256d ExpD(__m256d t) {
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(t, SetD(1.4426950408889634)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, SetD(6.93147180369123816490e-01), t);  // ln2 split in two
  r = _mm256_fnmadd_pd(n, SetD(1.90821492927058770002e-10), r);
  __m256d p = SetD(1.0 / 39916800.0);  // 1 / 11!
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 3628800.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 362880.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 40320.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 5040.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 720.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 120.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 24.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0 / 6.0));
  p = _mm256_fmadd_pd(p, r, SetD(0.5));
  p = _mm256_fmadd_pd(p, r, SetD(1.0));
  p = _mm256_fmadd_pd(p, r, SetD(1.0));
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)), _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

// pow(x, y) with C99's special cases.
inline __m256d PowD(__m256d x, __m256d y) {
  const __m256d zero = _mm256_setzero_pd(), one = SetD(1.0), sign = SetD(-0.0);
  const __m256d inf = SetD(std::numeric_limits<double>::infinity());
  const __m256d ax = _mm256_andnot_pd(sign, x);
  __m256d l = LnPositiveD(ax);
  l = _mm256_blendv_pd(l, SetD(-std::numeric_limits<double>::infinity()),
                       _mm256_cmp_pd(ax, zero, _CMP_EQ_OQ));
  l = _mm256_blendv_pd(l, inf, _mm256_cmp_pd(ax, inf, _CMP_EQ_OQ));
  // NaN lanes of t (0 * inf, NaN inputs) are replaced below.
  const __m256d t = _mm256_min_pd(_mm256_max_pd(_mm256_mul_pd(y, l), SetD(-200.0)), SetD(200.0));
  __m256d r = ExpD(t);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m256d y_int = _mm256_cmp_pd(_mm256_round_pd(y, kNearest), y, _CMP_EQ_OQ);
  const __m256d half = _mm256_mul_pd(y, SetD(0.5));
  const __m256d y_odd =
      _mm256_and_pd(y_int, _mm256_cmp_pd(_mm256_round_pd(half, kNearest), half, _CMP_NEQ_OQ));
  r = _mm256_xor_pd(r, _mm256_and_pd(y_odd, _mm256_and_pd(x, sign)));  // odd power of a negative
  const __m256d neg_finite = _mm256_and_pd(_mm256_cmp_pd(x, zero, _CMP_LT_OQ),
                                           _mm256_cmp_pd(x, _mm256_sub_pd(zero, inf), _CMP_NEQ_OQ));
  const __m256d nan = SetD(std::numeric_limits<double>::quiet_NaN());
  r = _mm256_blendv_pd(r, nan, _mm256_andnot_pd(y_int, neg_finite));
  r = _mm256_blendv_pd(r, nan, _mm256_cmp_pd(x, y, _CMP_UNORD_Q));
  r = _mm256_blendv_pd(r, one,
                       _mm256_and_pd(_mm256_cmp_pd(ax, one, _CMP_EQ_OQ),
                                     _mm256_cmp_pd(_mm256_andnot_pd(sign, y), inf, _CMP_EQ_OQ)));
  return _mm256_blendv_pd(
      r, one, _mm256_or_pd(_mm256_cmp_pd(x, one, _CMP_EQ_OQ), _mm256_cmp_pd(y, zero, _CMP_EQ_OQ)));
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
inline __m256d SoftplusD(__m256d x) {
  const __m256d zero = _mm256_setzero_pd();
  const __m256d ax = _mm256_andnot_pd(SetD(-0.0), x);
  const __m256d u = ExpD(_mm256_max_pd(_mm256_sub_pd(zero, ax), SetD(-200.0)));  // (0, 1]
  // log1p(u): ln(1 + u) keeps u's digits for u >= 1e-4; below, its series to u^4.
  const __m256d big = LnPositiveD(_mm256_add_pd(SetD(1.0), u));
  __m256d small = _mm256_fmadd_pd(SetD(-0.25), u, SetD(1.0 / 3));
  small = _mm256_fnmadd_pd(small, u, SetD(0.5));
  small = _mm256_mul_pd(_mm256_fnmadd_pd(small, u, SetD(1.0)), u);
  const __m256d l = _mm256_blendv_pd(big, small, _mm256_cmp_pd(u, SetD(1e-4), _CMP_LT_OQ));
  const __m256d r = _mm256_add_pd(_mm256_max_pd(x, zero), l);
  return _mm256_blendv_pd(r, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
}

// f over the 8 lanes of `x` widened to double, four at a time, rounded back to FLOAT once.
template <typename F>
inline __m256 MapDouble(__m256 x, F f) {
  const __m256d lo = f(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
  const __m256d hi = f(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
  return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

inline __m256 PowPs(__m256 a, __m256 b) {
  const __m256d lo =
      PowD(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), _mm256_cvtps_pd(_mm256_castps256_ps128(b)));
  const __m256d hi = PowD(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)),
                          _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
  return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

// max / min as the reference: NaN if b is (maxps / minps return their second operand, a, when
// either is NaN or both are equal).
inline __m256 MaxPs(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_max_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
}
inline __m256 MinPs(__m256 a, __m256 b) {
  return _mm256_blendv_ps(_mm256_min_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
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
    case BinaryKind::kMax:
      return MaxPs(a, b);
    case BinaryKind::kMin:
      return MinPs(a, b);
    case BinaryKind::kPow:
      return PowPs(a, b);
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

// Byte i of kBoolBytes[m] is bit i of m: eight comparison results as eight BOOL bytes.
constexpr std::array<uint64_t, 256> MakeBoolBytes() {
  std::array<uint64_t, 256> t{};
  for (int m = 0; m < 256; ++m) {
    for (int i = 0; i < 8; ++i) t[m] |= static_cast<uint64_t>((m >> i) & 1) << (8 * i);
  }
  return t;
}
constexpr std::array<uint64_t, 256> kBoolBytes = MakeBoolBytes();

inline void StoreBools(int mask, bool* y, int64_t count) {
  const uint64_t v = kBoolBytes[static_cast<size_t>(mask)];
  std::memcpy(y, &v, static_cast<size_t>(count));
}

// kScalarFirst: the scalar is the left operand. kBroadcastB: b is one value (b[0]).
template <int kPred, bool kBroadcastB, bool kScalarFirst>
void CompareT(const float* a, const float* b, bool* y, int64_t n) {
  const __m256 vs = Set(b[0]);
  auto cmp = [&](__m256 va, __m256 vb) {
    return _mm256_movemask_ps(kScalarFirst ? _mm256_cmp_ps(vb, va, kPred)
                                           : _mm256_cmp_ps(va, vb, kPred));
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vb = kBroadcastB ? vs : _mm256_loadu_ps(b + i);
    StoreBools(cmp(_mm256_loadu_ps(a + i), vb), y + i, 8);
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    const __m256 vb = kBroadcastB ? vs : _mm256_maskload_ps(b + i, m);
    StoreBools(cmp(_mm256_maskload_ps(a + i, m), vb), y + i, n - i);
  }
}

template <bool kBroadcastB, bool kScalarFirst>
void CompareDispatch(CompareKind op, const float* a, const float* b, bool* y, int64_t n) {
  switch (op) {
    case CompareKind::kEqual:
      return CompareT<_CMP_EQ_OQ, kBroadcastB, kScalarFirst>(a, b, y, n);
    case CompareKind::kLess:
      return CompareT<_CMP_LT_OQ, kBroadcastB, kScalarFirst>(a, b, y, n);
    case CompareKind::kGreater:
      return CompareT<_CMP_GT_OQ, kBroadcastB, kScalarFirst>(a, b, y, n);
    case CompareKind::kLessOrEqual:
      return CompareT<_CMP_LE_OQ, kBroadcastB, kScalarFirst>(a, b, y, n);
    case CompareKind::kGreaterOrEqual:
      return CompareT<_CMP_GE_OQ, kBroadcastB, kScalarFirst>(a, b, y, n);
  }
}

}  // namespace

void UnaryF32(UnaryKind op, const float* x, float* y, int64_t n) {
  switch (op) {
    case UnaryKind::kNeg:
      return Map(x, y, n, [](__m256 v) { return _mm256_xor_ps(v, Set(-0.0f)); });
    case UnaryKind::kAbs:
      return Map(x, y, n, [](__m256 v) { return Abs(v); });
    case UnaryKind::kSqrt:
      return Map(x, y, n, [](__m256 v) { return _mm256_sqrt_ps(v); });
    case UnaryKind::kReciprocal:
      return Map(x, y, n, [](__m256 v) { return _mm256_div_ps(Set(1.0f), v); });
    case UnaryKind::kFloor:
      return Map(x, y, n, [](__m256 v) {
        return _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      });
    case UnaryKind::kCeil:
      return Map(x, y, n, [](__m256 v) {
        return _mm256_round_ps(v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
      });
    case UnaryKind::kRound:
      return Map(x, y, n, [](__m256 v) {
        return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      });
    case UnaryKind::kSign:
      return Map(x, y, n, [](__m256 v) {
        const __m256 zero = _mm256_setzero_ps();
        const __m256 r = _mm256_blendv_ps(v, Set(1.0f), _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
        return _mm256_blendv_ps(r, Set(-1.0f), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
      });
    case UnaryKind::kLog:
      return Map(x, y, n, [](__m256 v) { return MapDouble(v, [](__m256d d) { return LnD(d); }); });
    case UnaryKind::kSoftplus:
      return Map(x, y, n,
                 [](__m256 v) { return MapDouble(v, [](__m256d d) { return SoftplusD(d); }); });
  }
}

void PowScalarExpF32(const float* x, double e, float* y, int64_t n) {
  if (e == 0.0) return Map(x, y, n, [](__m256) { return Set(1.0f); });
  if (e == 1.0) return Map(x, y, n, [](__m256 v) { return v; });
  if (e == 2.0) return Map(x, y, n, [](__m256 v) { return _mm256_mul_ps(v, v); });
  if (e == -1.0) return Map(x, y, n, [](__m256 v) { return _mm256_div_ps(Set(1.0f), v); });
  if (e == 0.5) {
    return Map(x, y, n, [](__m256 v) {
      const __m256 r = _mm256_add_ps(_mm256_sqrt_ps(v), _mm256_setzero_ps());  // -0 -> +0
      return _mm256_blendv_ps(
          r, Set(std::numeric_limits<float>::infinity()),
          _mm256_cmp_ps(v, Set(-std::numeric_limits<float>::infinity()), _CMP_EQ_OQ));
    });
  }
  if (e == 3.0) {
    return Map(x, y, n, [](__m256 v) {
      return MapDouble(v, [](__m256d d) { return _mm256_mul_pd(_mm256_mul_pd(d, d), d); });
    });
  }
  const __m256d ve = SetD(e);
  Map(x, y, n, [&](__m256 v) { return MapDouble(v, [&](__m256d d) { return PowD(d, ve); }); });
}

void PowF32(const float* a, const float* b, float* y, int64_t n) {
  BinaryT<BinaryKind::kPow>(a, b, y, n);
}

void CompareF32(CompareKind op, const float* a, const float* b, bool* y, int64_t n) {
  CompareDispatch<false, false>(op, a, b, y, n);
}

void CompareScalarF32(CompareKind op, const float* a, float s, bool scalar_first, bool* y,
                      int64_t n) {
  scalar_first ? CompareDispatch<true, true>(op, a, &s, y, n)
               : CompareDispatch<true, false>(op, a, &s, y, n);
}

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
    case BinaryKind::kMax:
      return BinaryT<BinaryKind::kMax>(a, b, y, n);
    case BinaryKind::kMin:
      return BinaryT<BinaryKind::kMin>(a, b, y, n);
    case BinaryKind::kPow:
      return BinaryT<BinaryKind::kPow>(a, b, y, n);
  }
}

void BinaryScalarF32(BinaryKind op, const float* a, float s, bool scalar_first, float* y,
                     int64_t n) {
  if (op == BinaryKind::kPow && !scalar_first) return PowScalarExpF32(a, s, y, n);
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

namespace {
// The mean and 1 / sqrt(variance + epsilon) of x[0..n): two passes (no cancellation).
void RowMeanRstd(const float* x, int64_t n, float epsilon, float* mean_out, float* rstd_out) {
  const float mean = SumF32(x, n) / static_cast<float>(n);
  const __m256 vmean = Set(mean);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmean);
    acc0 = _mm256_fmadd_ps(d0, d0, acc0);
    acc1 = _mm256_fmadd_ps(d1, d1, acc1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    acc0 = _mm256_fmadd_ps(d, d, acc0);
  }
  float var = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(n);
  *mean_out = mean;
  *rstd_out = 1.0f / std::sqrt(var + epsilon);
}
}  // namespace

void LanesReduceF32(bool max, const float* x, int64_t groups, int64_t lanes, float* acc) {
  if (lanes % 8 != 0 || lanes > 64) {
    scalar::LanesReduceF32(max, x, groups, lanes, acc);
    return;
  }
  const int64_t vecs = lanes / 8;
  __m256 va[8];
  for (int64_t k = 0; k < vecs; ++k) va[k] = _mm256_loadu_ps(x + 8 * k);
  for (int64_t g = 1; g < groups; ++g) {
    for (int64_t k = 0; k < vecs; ++k) {
      const __m256 r = _mm256_loadu_ps(x + g * lanes + 8 * k);
      if (max) {  // as the scalar rule: take r where r > acc or r is NaN
        const __m256 take =
            _mm256_or_ps(_mm256_cmp_ps(r, va[k], _CMP_GT_OQ), _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
        va[k] = _mm256_blendv_ps(va[k], r, take);
      } else {
        va[k] = _mm256_add_ps(va[k], r);
      }
    }
  }
  for (int64_t k = 0; k < vecs; ++k) _mm256_storeu_ps(acc + 8 * k, va[k]);
}

void LanesBinaryF32(BinaryKind op, const float* x, const float* v, bool v_first, float* y,
                    int64_t groups, int64_t lanes) {
  if (lanes % 8 != 0 || lanes > 64) {  // row by row on the vector microkernel
    for (int64_t g = 0; g < groups; ++g) {
      const float* row = x + g * lanes;
      v_first ? avx2::BinaryF32(op, v, row, y + g * lanes, lanes)
              : avx2::BinaryF32(op, row, v, y + g * lanes, lanes);
    }
    return;
  }
  const int64_t vecs = lanes / 8;
  __m256 vv[8];
  for (int64_t k = 0; k < vecs; ++k) vv[k] = _mm256_loadu_ps(v + 8 * k);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t k = 0; k < vecs; ++k) {
      const int64_t at = g * lanes + 8 * k;
      const __m256 a = _mm256_loadu_ps(x + at);
      _mm256_storeu_ps(y + at, v_first ? BinaryOp(op, vv[k], a) : BinaryOp(op, a, vv[k]));
    }
  }
}

void LanesAffineF32(const float* x, const float* scale, const float* bias, bool relu, float* y,
                    int64_t groups, int64_t lanes) {
  if (lanes % 8 != 0 || lanes > 64) {
    scalar::LanesAffineF32(x, scale, bias, relu, y, groups, lanes);
    return;
  }
  const int64_t vecs = lanes / 8;
  __m256 vs[8], vb[8];
  for (int64_t k = 0; k < vecs; ++k) {
    vs[k] = _mm256_loadu_ps(scale + 8 * k);
    vb[k] = _mm256_loadu_ps(bias + 8 * k);
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t k = 0; k < vecs; ++k) {
      const int64_t at = g * lanes + 8 * k;
      __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(x + at), vs[k], vb[k]);
      if (relu) v = _mm256_max_ps(zero, v);  // a NaN stays NaN, as std::max(v, 0) keeps it
      _mm256_storeu_ps(y + at, v);
    }
  }
}

void InstanceNormRowF32(const float* x, float scale, float bias, float epsilon, float* y,
                        int64_t n) {
  float mean = 0, rstd = 0;
  RowMeanRstd(x, n, epsilon, &mean, &rstd);
  const float mul = rstd * scale;
  const __m256 vmean = Set(mean), vmul = Set(mul), vbias = Set(bias);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(d, vmul, vbias));
  }
  for (; i < n; ++i) y[i] = (x[i] - mean) * mul + bias;
}

void LayerNormRowF32(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                     int64_t n) {
  float mean = 0, rstd = 0;
  RowMeanRstd(x, n, epsilon, &mean, &rstd);
  const __m256 vmean = Set(mean);
  const __m256 vrstd = Set(rstd);
  int64_t i = 0;
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
