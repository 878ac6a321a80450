// SPDX-License-Identifier: Apache-2.0
// Own elementwise kernels against the reference kernels, on both ISA paths (AVX2 and the forced
// scalar path): binary ops over broadcast patterns and edge sizes, unary activations over a wide
// range (large |x|, tiny x, +-inf, NaN), ai.kiln Gelu in both forms against the formula in
// double.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

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
  };
  for (Isa isa : Isas()) {
    ScopedMaxIsa cap(isa);
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
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

}  // namespace
}  // namespace kiln::cpu
