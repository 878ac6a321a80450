// SPDX-License-Identifier: Apache-2.0
// Own elementwise kernels against the reference kernels, at every ISA level (IsaLevels): binary
// ops over broadcast patterns and edge sizes, unary activations over a wide range (large |x|,
// tiny x, +-inf, NaN), ai.kiln Gelu in both forms against the formula in double; the math ops
// (Pow with scalar and tensor exponents, Sqrt, Reciprocal, Neg, Abs, Floor, Ceil, Round, Sign,
// Log, Softplus, variadic Max / Min, the comparisons, Not / And) bit for bit where the math is
// exact and within the stated ulps for Log, Softplus and general Pow, including NaN, +-inf, -0,
// subnormals and negative inputs.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_test_util.h"
#include "kernels/cpu/elementwise_kernels.h"
#include "kernels/cpu/isa.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

std::vector<Isa> Isas() { return IsaLevels(); }

TEST(CpuElementwiseTest, BinaryBroadcastMatchesReference) {
  std::mt19937 rng(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1}, {1}},
      {{7}, {7}},
      {{17}, {1}},
      {{1}, {17}},
      {{2, 3, 7, 7}, {3, 1, 1}},
      {{2, 17, 5}, {17, 1}},
      {{4, 9, 33}, {33}},
      {{4, 1, 33}, {1, 9, 1}},
      {{3, 1}, {1, 5}},
      {{2, 3, 4, 5}, {2, 1, 4, 1}},
      {{1, 12, 128, 128}, {1, 1, 1, 128}},
      {{0, 3}, {3}},
      {{1000}, {1000}},
      // Short rows repeated over a middle dim (blocked per-channel lanes): 16, 8, 24, 64 and 4
      // lanes, and rows where both operands advance (no run to batch).
      {{2, 3, 5, 16}, {2, 3, 1, 16}},
      {{1, 4, 6, 8}, {1, 4, 1, 8}},
      {{3, 7, 24}, {3, 1, 24}},
      {{2, 5, 64}, {5, 64}},
      {{2, 3, 4, 4}, {3, 1, 4}},
      {{2, 3, 2, 16}, {2, 1, 2, 16}},
  };
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
      for (const auto& [a, b] : cases) {
        for (bool swap : {false, true}) {
          KernelCase c(op, 14);
          c.Input(RandomTensor(S(swap ? b : a), rng, 0.5, 2.0));
          c.Input(RandomTensor(S(swap ? a : b), rng, 0.5, 2.0));
          ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-6,
                      fmt::format("{} [{}] [{}] swap {} {}", op, fmt::join(a, ","),
                                  fmt::join(b, ","), swap, IsaName(isa)));
        }
      }
    }
  }
}

// Values covering tiny, ordinary, large and special inputs, length not a multiple of 8.
std::vector<float> WideRange() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1e-30f,
                          -1e-30f,
                          1e-8f,
                          -1e-8f,
                          1e-4f,
                          -1e-4f,
                          0.49f,
                          -0.49f,
                          0.5f,
                          0.74f,
                          -0.75f,
                          0.76f,
                          1.0f,
                          -1.0f,
                          3.0f,
                          -3.0f,
                          5.5f,
                          -5.5f,
                          9.0f,
                          -9.0f,
                          15.0f,
                          -15.0f,
                          30.0f,
                          -30.0f,
                          80.0f,
                          -80.0f,
                          88.0f,
                          -88.0f,
                          89.0f,
                          -89.0f,
                          100.0f,
                          -100.0f,
                          1e10f,
                          -1e10f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (int i = -1000; i <= 1000; i += 7) v.push_back(static_cast<float>(i) / 97.0f);
  return v;
}

TEST(CpuElementwiseTest, UnaryMatchesReferenceOverWideRange) {
  const std::vector<float> values = WideRange();
  struct U {
    const char* op;
    int opset;
    std::vector<Attribute> attrs;
  };
  const std::vector<U> ops = {{"Relu", 14, {}},
                              {"Sigmoid", 13, {}},
                              {"Tanh", 13, {}},
                              {"Erf", 13, {}},
                              {"Exp", 13, {}},
                              {"LeakyRelu", 16, {FloatAttr("alpha", 0.2f)}},
                              {"HardSigmoid", 7, {}},
                              {"HardSwish", 14, {}},
                              {"Clip", 7, {FloatAttr("min", -1.5f), FloatAttr("max", 2.0f)}}};
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const U& u : ops) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{17}, values.size()}) {
        std::vector<float> v(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
        KernelCase c(u.op, u.opset);
        c.Input(MakeTensor<float>(Shape({static_cast<int64_t>(n)}), v));
        for (const Attribute& a : u.attrs) c.Attr(a);
        ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-4,
                    fmt::format("{} n {} {}", u.op, n, IsaName(isa)));
      }
    }
  }
}

TEST(CpuElementwiseTest, ClipWithInputBounds) {
  std::mt19937 rng(2);
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (int mode = 0; mode < 3; ++mode) {
      KernelCase c("Clip", 13);
      c.Input(RandomTensor(Shape({3, 17}), rng, -3, 3));
      if (mode == 0 || mode == 1) {
        c.ConstInput(MakeTensor<float>(Shape(), {-1.0f}));
      } else {
        c.OmittedInput();
      }
      if (mode != 1) c.ConstInput(MakeTensor<float>(Shape(), {0.5f}));
      ExpectClose(c.Run("cpu"), c.Run("ref"), 0, fmt::format("Clip mode {}", mode));
    }
  }
}

double GeluRef(double x, bool tanh_form) {
  if (tanh_form) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}

TEST(CpuElementwiseTest, GeluBothFormsOverWideRange) {
  const std::vector<float> values = WideRange();
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (bool tanh_form : {false, true}) {
      KernelCase c("Gelu", 13);
      c.Domain(std::string(kKilnDomain), 1);
      c.Input(MakeTensor<float>(Shape({static_cast<int64_t>(values.size())}), values));
      if (tanh_form) c.Attr(StringAttr("approximate", "tanh"));
      std::vector<float> expected;
      expected.reserve(values.size());
      for (float v : values) expected.push_back(static_cast<float>(GeluRef(v, tanh_form)));
      ExpectClose(c.Run("cpu"),
                  MakeTensor<float>(Shape({static_cast<int64_t>(values.size())}), expected), 1e-4,
                  fmt::format("Gelu tanh {} {}", tanh_form, IsaName(isa)));
    }
  }
}

// Relative accuracy (not only absolute) of the vector math where values are small.
TEST(CpuElementwiseTest, VectorMathRelativeAccuracy) {
  if (DetectedIsa() < Isa::kAvx2) GTEST_SKIP() << "no AVX2";
  std::vector<float> x;
  for (int i = -2000; i <= 2000; ++i) x.push_back(static_cast<float>(i) * 0.01f);
  for (float t : {1e-6f, -1e-6f, 3e-5f, -3e-5f, 1e-3f}) x.push_back(t);
  std::vector<float> y(x.size());
  struct K {
    ActivationKind kind;
    double (*f)(double);
  };
  const std::vector<K> kinds = {
      {ActivationKind::kExp, [](double v) { return std::exp(v); }},
      {ActivationKind::kTanh, [](double v) { return std::tanh(v); }},
      {ActivationKind::kErf, [](double v) { return std::erf(v); }},
      {ActivationKind::kSigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {ActivationKind::kGelu, [](double v) { return GeluRef(v, false); }},
      {ActivationKind::kGeluTanh, [](double v) { return GeluRef(v, true); }}};
  for (const K& k : kinds) {
    avx2::ActivationF32({k.kind}, x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = k.f(x[i]);
      if (std::abs(e) < 1e-30) continue;
      EXPECT_LE(std::abs(y[i] - e), 1e-4 * std::abs(e) + 1e-7)
          << static_cast<int>(k.kind) << " at x=" << x[i] << ": " << y[i] << " vs " << e;
    }
  }
}

// ---- Math ops (Pow, Sqrt, Reciprocal, ..., Max / Min, comparisons, Not / And) ---------------

// Distance in units in the last place between two floats (0 for equal values, +0 == -0; both
// NaN: 0; one NaN: huge).
int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7FFFFFFF) : static_cast<int64_t>(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

// Same shape and every element within `max_ulps` of the expected one (NaN matches NaN only;
// with 0, bit for bit apart from NaN payloads, so -0 must match -0).
void ExpectUlps(const OwnedTensor& actual, const OwnedTensor& expected, int64_t max_ulps,
                const std::string& what, const OwnedTensor* input = nullptr) {
  ASSERT_TRUE(actual.valid()) << what;
  ASSERT_TRUE(expected.valid()) << what;
  ASSERT_EQ(actual.dtype(), DataType::kFloat32) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const float* a = actual.data<const float>();
  const float* e = expected.data<const float>();
  int failures = 0;
  for (int64_t i = 0; i < actual.num_elements() && failures < 8; ++i) {
    const bool same_zero = a[i] == 0 && e[i] == 0 && std::signbit(a[i]) == std::signbit(e[i]);
    const bool ok = max_ulps == 0 ? (same_zero || (a[i] != 0 && UlpDistance(a[i], e[i]) == 0) ||
                                     (std::isnan(a[i]) && std::isnan(e[i])))
                                  : UlpDistance(a[i], e[i]) <= max_ulps;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i
                    << (input != nullptr && input->num_elements() == actual.num_elements()
                            ? fmt::format(" (x = {})", input->data<const float>()[i])
                            : std::string())
                    << " is " << fmt::format("{}", a[i]) << ", expected " << fmt::format("{}", e[i])
                    << " (" << UlpDistance(a[i], e[i]) << " ulp)";
    }
  }
}

// Same shape, BOOL, identical bytes.
void ExpectSameBools(const OwnedTensor& actual, const OwnedTensor& expected,
                     const std::string& what) {
  ASSERT_TRUE(actual.valid()) << what;
  ASSERT_TRUE(expected.valid()) << what;
  ASSERT_EQ(actual.dtype(), DataType::kBool) << what;
  ASSERT_EQ(expected.dtype(), DataType::kBool) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const uint8_t* a = static_cast<const uint8_t*>(actual.raw_data());
  const uint8_t* e = static_cast<const uint8_t*>(expected.raw_data());
  int failures = 0;
  for (int64_t i = 0; i < actual.num_elements() && failures < 8; ++i) {
    if (a[i] != e[i]) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " is " << int{a[i]} << ", expected "
                    << int{e[i]};
    }
  }
}

// WideRange plus what the math ops treat specially: subnormals, exact halves (Round), values
// beyond 2^23 (already integers), the extremes.
std::vector<float> MathRange() {
  std::vector<float> v = WideRange();
  const float kMax = std::numeric_limits<float>::max();
  const float kMin = std::numeric_limits<float>::min();
  const float kDenorm = std::numeric_limits<float>::denorm_min();
  for (float f : {0.5f,       1.5f,        2.5f,       -0.5f,    -1.5f,  -2.5f,   0.49999997f,
                  8388607.5f, -8388607.5f, 8388609.0f, 1e30f,    -1e30f, kMax,    -kMax,
                  kMin,       -kMin,       kDenorm,    -kDenorm, 1e-40f, -1e-40f, 0.9999999f,
                  1.0000001f, 2.0f,        4.0f,       1024.0f,  0.25f}) {
    v.push_back(f);
  }
  // Positive values over the whole exponent range (Log, Pow).
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> e(-44.0, 38.0);
  for (int i = 0; i < 997; ++i) v.push_back(static_cast<float>(std::pow(10.0, e(rng))));
  return v;
}

OwnedTensor Vec(const std::vector<float>& v) {
  return MakeTensor<float>(Shape({static_cast<int64_t>(v.size())}), v);
}

TEST(CpuMathTest, FastKernelsArePicked) {
  for (const char* op :
       {"Pow", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    KernelCase c(op, 13);
    c.Input(Vec({1.0f})).Input(Vec({2.0f}));
    EXPECT_EQ(c.PickedProvider(), "cpu") << op;
  }
  for (const char* op :
       {"Sqrt", "Reciprocal", "Neg", "Abs", "Log", "Floor", "Ceil", "Round", "Sign", "Softplus"}) {
    KernelCase c(op, 13);
    c.Input(Vec({1.0f}));
    EXPECT_EQ(c.PickedProvider(), "cpu") << op;
  }
  KernelCase n("Not", 13);
  n.Input(MakeTensor<bool>(Shape({2}), {true, false}));
  EXPECT_EQ(n.PickedProvider(), "cpu");
  KernelCase a("And", 13);
  a.Input(MakeTensor<bool>(Shape({1}), {true})).Input(MakeTensor<bool>(Shape({1}), {false}));
  EXPECT_EQ(a.PickedProvider(), "cpu");
}

TEST(CpuMathTest, ExactUnaryOpsMatchReferenceBitForBit) {
  const std::vector<float> values = MathRange();
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const char* op : {"Neg", "Abs", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign"}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{17}, values.size()}) {
        std::vector<float> v(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
        KernelCase c(op, 13);
        c.Input(Vec(v));
        const OwnedTensor x = Vec(v);
        ExpectUlps(c.Run("cpu"), c.Run("ref"), 0, fmt::format("{} n {} {}", op, n, IsaName(isa)),
                   &x);
      }
    }
  }
}

TEST(CpuMathTest, LogAndSoftplusWithinStatedUlps) {
  std::vector<float> values = MathRange();
  // Around 1, where log is small (relative accuracy) and the reduction switches at sqrt(2).
  for (int k = -300; k <= 300; ++k) values.push_back(1.0f + static_cast<float>(k) * 1.1920929e-7f);
  for (float f : {1.4142135f, 1.4142137f, 0.70710677f, 0.7071068f}) values.push_back(f);
  const OwnedTensor x = Vec(values);
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    // The scalar level runs the reference's own formulas: exact.
    const int64_t log_ulps = isa == Isa::kScalar ? 0 : 1;
    const int64_t softplus_ulps = isa == Isa::kScalar ? 0 : 2;
    KernelCase log("Log", 13);
    log.Input(Vec(values));
    ExpectUlps(log.Run("cpu"), log.Run("ref"), log_ulps, fmt::format("Log {}", IsaName(isa)), &x);
    KernelCase sp("Softplus", 13);
    sp.Input(Vec(values));
    ExpectUlps(sp.Run("cpu"), sp.Run("ref"), softplus_ulps,
               fmt::format("Softplus {}", IsaName(isa)), &x);
    // Independently of the reference: Log within 1 ulp of log in double rounded to FLOAT.
    std::vector<float> truth;
    for (float f : values) truth.push_back(static_cast<float>(std::log(static_cast<double>(f))));
    ExpectUlps(log.Run("cpu"), Vec(truth), 1, fmt::format("Log vs double {}", IsaName(isa)), &x);
  }
}

TEST(CpuMathTest, PowWithScalarExponents) {
  const std::vector<float> values = MathRange();
  const OwnedTensor x = Vec(values);
  const float kInf = std::numeric_limits<float>::infinity();
  // Exponents with exact paths, then general ones (integers, halves, non-integers, specials).
  const std::vector<float> exact = {2.0f, 0.5f, 3.0f, -1.0f, 1.0f, 0.0f, -0.0f};
  const std::vector<float> general = {
      -2.0f, 4.0f,  -3.0f,  1.5f,  -0.5f, 2.2f,  0.3333333f,
      10.0f, 1e10f, -1e-3f, 25.5f, kInf,  -kInf, std::numeric_limits<float>::quiet_NaN()};
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (bool is_exact : {true, false}) {
      for (float e : is_exact ? exact : general) {
        for (bool rank0 : {true, false}) {
          KernelCase c("Pow", 13);
          c.Input(Vec(values));
          c.ConstInput(MakeTensor<float>(rank0 ? Shape() : Shape({1}), {e}));
          ExpectUlps(c.Run("cpu"), c.Run("ref"), is_exact || isa == Isa::kScalar ? 0 : 1,
                     fmt::format("Pow x^{} {}", e, IsaName(isa)), &x);
        }
      }
    }
    // Integer and DOUBLE exponents (opset 12+): the same paths, the value as a double.
    for (int64_t e : {int64_t{2}, int64_t{3}, int64_t{-2}, int64_t{7}}) {
      KernelCase c("Pow", 13);
      c.Input(Vec(values));
      c.ConstInput(MakeTensor<int64_t>(Shape(), {e}));
      ExpectUlps(c.Run("cpu"), c.Run("ref"), e == 2 || e == 3 || isa == Isa::kScalar ? 0 : 1,
                 fmt::format("Pow x^int64 {} {}", e, IsaName(isa)), &x);
      KernelCase c32("Pow", 13);
      c32.Input(Vec(values));
      c32.ConstInput(MakeTensor<int32_t>(Shape({1}), {static_cast<int32_t>(e)}));
      ExpectUlps(c32.Run("cpu"), c32.Run("ref"), e == 2 || e == 3 || isa == Isa::kScalar ? 0 : 1,
                 fmt::format("Pow x^int32 {} {}", e, IsaName(isa)), &x);
    }
    KernelCase cd("Pow", 13);
    cd.Input(Vec(values));
    cd.ConstInput(MakeTensor<double>(Shape(), {0.1}));  // not a FLOAT value
    ExpectUlps(cd.Run("cpu"), cd.Run("ref"), isa == Isa::kScalar ? 0 : 1,
               fmt::format("Pow x^0.1 (double) {}", IsaName(isa)), &x);
    // An exponent the fast kernel does not read (INT8): the reference runs it.
    KernelCase c8("Pow", 13);
    c8.Input(Vec(values));
    c8.ConstInput(MakeTensor<int8_t>(Shape(), {3}));
    ExpectUlps(c8.Run("cpu"), c8.Run("ref"), 0, fmt::format("Pow x^int8 {}", IsaName(isa)), &x);
  }
}

// Exact ops of Pow on 2^20 random values: x * x, sqrt, 1 / x and x^3 in double match the
// reference's pow in double rounded to FLOAT bit for bit.
TEST(CpuMathTest, PowExactExponentsOnManyValues) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values;
  while (values.size() < (1u << 20)) {
    const uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (!std::isnan(f)) values.push_back(f);
  }
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (float e : {2.0f, 0.5f, 3.0f, -1.0f}) {
      KernelCase c("Pow", 13);
      c.Input(Vec(values));
      c.ConstInput(MakeTensor<float>(Shape(), {e}));
      ExpectUlps(c.Run("cpu"), c.Run("ref"), 0, fmt::format("Pow x^{} {}", e, IsaName(isa)));
    }
  }
}

// Every pair of special bases and exponents, as a broadcast [13, 1] ^ [1, 17] tensor exponent.
TEST(CpuMathTest, PowSpecialCasesWithTensorExponent) {
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {0.0f,  -0.0f, 1.0f,  -1.0f, 0.5f,   -0.5f, 2.0f,
                                 -2.0f, kInf,  -kInf, kNan,  1e-40f, -3.0f};
  const std::vector<float> ys = {0.0f,  -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f,   -3.0f, 0.5f,
                                 -0.5f, 2.5f,  kInf, -kInf, kNan, 1e10f, -1e10f, 1e-40f};
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    KernelCase c("Pow", 13);
    c.Input(MakeTensor<float>(Shape({13, 1}), xs));
    c.Input(MakeTensor<float>(Shape({1, 17}), ys));
    ExpectUlps(c.Run("cpu"), c.Run("ref"), isa == Isa::kScalar ? 0 : 1,
               fmt::format("Pow specials {}", IsaName(isa)));
  }
}

TEST(CpuMathTest, PowTensorExponentBroadcasts) {
  std::mt19937 rng(4);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{7}, {7}},
      {{2, 3, 17}, {17}},
      {{2, 3, 17}, {3, 1}},
      {{1}, {2, 9}},
      {{4, 1, 9}, {5, 1}},
      {{2, 3, 4, 5}, {2, 1, 4, 1}},
      {{1000}, {1000}},
      {{0, 3}, {3}},
      {{2, 3, 5, 16}, {2, 3, 1, 16}},
      {{2, 3, 1, 8}, {2, 3, 4, 8}},
  };
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const auto& [a, b] : cases) {
      KernelCase c("Pow", 13);
      // Bases of both signs; exponents half integers (so negative bases give numbers too),
      // half not.
      std::vector<float> ev = ref::testing::RandomValues<float>(S(b).NumElements(), rng, -4, 4);
      for (size_t i = 0; i < ev.size(); i += 2) ev[i] = std::round(ev[i]);
      c.Input(RandomTensor(S(a), rng, -3, 3));
      c.Input(MakeTensor<float>(S(b), ev));
      ExpectUlps(
          c.Run("cpu"), c.Run("ref"), isa == Isa::kScalar ? 0 : 1,
          fmt::format("Pow [{}] ^ [{}] {}", fmt::join(a, ","), fmt::join(b, ","), IsaName(isa)));
    }
  }
}

TEST(CpuMathTest, MaxMinVariadicWithBroadcastNanAndSignedZeros) {
  std::mt19937 rng(5);
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> pool = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, kNan, kInf, -kInf, 1e-40f};
  auto pick = [&](const Shape& s) {
    std::vector<float> v(static_cast<size_t>(s.NumElements()));
    std::uniform_int_distribution<size_t> d(0, pool.size() - 1);
    for (float& f : v) f = pool[d(rng)];
    return MakeTensor<float>(s, v);
  };
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{2, 3, 4}},          {{2, 3, 4}, {4}}, {{4}, {2, 3, 4}},        {{3, 1}, {1, 4}, {2, 1, 1}},
      {{9}, {9}, {9}, {9}}, {{1}, {1}},       {{2, 1, 33}, {2, 7, 1}}, {{1, 12, 40}, {1}, {12, 1}},
  };
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const char* op : {"Max", "Min"}) {
      for (const auto& shapes : cases) {
        KernelCase c(op, 13);
        for (const auto& s : shapes) c.Input(pick(S(s)));
        ExpectUlps(c.Run("cpu"), c.Run("ref"), 0,
                   fmt::format("{} {} inputs {}", op, shapes.size(), IsaName(isa)));
      }
      // Opset 7: equal shapes only; the reference reports other shapes.
      KernelCase ok(op, 7);
      ok.Input(pick(S({5, 3}))).Input(pick(S({5, 3})));
      ExpectUlps(ok.Run("cpu"), ok.Run("ref"), 0, fmt::format("{} opset 7", op));
      KernelCase bad(op, 7);
      bad.Input(pick(S({5, 3}))).Input(pick(S({3})));
      Result<OwnedTensor> cpu = bad.TryRun("cpu"), ref = bad.TryRun("ref");
      ASSERT_FALSE(cpu.ok());
      ASSERT_FALSE(ref.ok());
      EXPECT_EQ(cpu.status().ToString(), ref.status().ToString());
    }
  }
}

TEST(CpuMathTest, ComparisonsBroadcastToBool) {
  std::mt19937 rng(6);
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> pool = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, kNan, kInf, -kInf, 1e-40f};
  auto pick = [&](const Shape& s) {
    std::vector<float> v(static_cast<size_t>(s.NumElements()));
    std::uniform_int_distribution<size_t> d(0, pool.size() - 1);
    for (float& f : v) f = pool[d(rng)];
    return MakeTensor<float>(s, v);
  };
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1}, {1}},
      {{7}, {7}},
      {{17}, {1}},
      {{1}, {17}},
      {{2, 3, 7, 7}, {3, 1, 1}},
      {{4, 9, 33}, {33}},
      {{4, 1, 33}, {1, 9, 1}},
      {{3, 1}, {1, 5}},
      {{0, 3}, {3}},
      {{1000}, {1000}},
      {{2, 1}, {2, 1000}},
  };
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
      for (const auto& [a, b] : cases) {
        KernelCase c(op, 13);
        c.Input(pick(S(a))).Input(pick(S(b)));
        ExpectSameBools(
            c.Run("cpu"), c.Run("ref"),
            fmt::format("{} [{}] [{}] {}", op, fmt::join(a, ","), fmt::join(b, ","), IsaName(isa)));
      }
    }
  }
}

TEST(CpuMathTest, NotAndOnBool) {
  std::mt19937 rng(7);
  auto bools = [&](const Shape& s) {
    std::vector<bool> v(static_cast<size_t>(s.NumElements()));
    std::bernoulli_distribution d(0.5);
    for (size_t i = 0; i < v.size(); ++i) v[i] = d(rng);
    return MakeTensor<bool>(s, v);
  };
  for (int64_t n : {1, 7, 31, 100000}) {
    KernelCase c("Not", 13);
    c.Input(bools(Shape({n})));
    ExpectSameBools(c.Run("cpu"), c.Run("ref"), fmt::format("Not {}", n));
  }
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1}, {1}},          {{33}, {33}},           {{17}, {1}},   {{1}, {17}}, {{3, 1}, {1, 5}},
      {{2, 3, 4}, {3, 1}}, {{4, 1, 9}, {1, 5, 9}}, {{0, 2}, {2}},
  };
  for (const auto& [a, b] : cases) {
    KernelCase c("And", 13);
    c.Input(bools(S(a))).Input(bools(S(b)));
    ExpectSameBools(c.Run("cpu"), c.Run("ref"),
                    fmt::format("And [{}] [{}]", fmt::join(a, ","), fmt::join(b, ",")));
  }
}

TEST(CpuMathTest, ConcurrentRunsOfPow) {
  std::mt19937 rng(8);
  KernelCase c("Pow", 13);
  c.Input(RandomTensor(Shape({64, 1000}), rng, 0.1, 3.0));
  c.ConstInput(MakeTensor<float>(Shape(), {1.7f}));
  Result<KernelCase::Prepared> p = c.Prepare("cpu");
  ASSERT_TRUE(p.ok());
  ExpectConcurrentRunsMatch(c, *p, c.Run("ref"));
}

}  // namespace
}  // namespace kiln::cpu
