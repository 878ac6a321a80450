// SPDX-License-Identifier: Apache-2.0
// RMSNorm, RoPE (normal / NeoX, the inv_freq and the llama.cpp angle forms), SwiGLU and Add:
// fast and reference versions against plain formulas written here, at every ISA level up to
// the active one.
#include "llm/llm_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"

namespace kiln::llm {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<cpu::Isa> Levels() {
  std::vector<cpu::Isa> levels;
  for (cpu::Isa isa : {cpu::Isa::kScalar, cpu::Isa::kAvx2, cpu::Isa::kAvx512}) {
    if (isa <= cpu::ActiveIsa()) levels.push_back(isa);
  }
  return levels;
}

TEST(LlmOpsTest, RmsNormMatchesTheFormula) {
  for (cpu::Isa isa : Levels()) {
    cpu::ScopedMaxIsa cap(isa);
    for (int64_t n : {1, 7, 64, 2048, 2051}) {
      const int64_t T = n > 100 ? 9 : 33;
      const std::vector<float> x = Random(static_cast<size_t>(n * T), 3, 2.0f);
      const std::vector<float> w = Random(static_cast<size_t>(n), 4);
      for (bool with_weight : {true, false}) {
        std::vector<float> out(x.size()), ref_out(x.size());
        RmsNorm(x.data(), with_weight ? w.data() : nullptr, 1e-5f, n, T, out.data());
        ref::RmsNorm(x.data(), with_weight ? w.data() : nullptr, 1e-5f, n, T, ref_out.data());
        for (int64_t t = 0; t < T; ++t) {
          double ss = 0;
          for (int64_t i = 0; i < n; ++i) ss += double{x[t * n + i]} * x[t * n + i];
          const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
          for (int64_t i = 0; i < n; ++i) {
            const double want = x[t * n + i] * inv * (with_weight ? w[i] : 1.0);
            const double tol = 1e-6 * (std::abs(want) + 1e-3);
            ASSERT_NEAR(out[t * n + i], want, tol) << IsaName(isa) << " n " << n;
            ASSERT_NEAR(ref_out[t * n + i], want, tol);
            // Fast and ref follow ggml's rounding steps: equal up to the double sum's order.
            ASSERT_NEAR(out[t * n + i], ref_out[t * n + i], 4e-7 * std::abs(want) + 1e-30);
          }
        }
        // In place, and per head (rows of head_dim).
        std::vector<float> inplace = x;
        RmsNorm(inplace.data(), with_weight ? w.data() : nullptr, 1e-5f, n, T, inplace.data());
        ASSERT_EQ(inplace, out);
      }
    }
  }
}

// theta_i = (float) pos * inv_freq[i]; rotation in double from the test's pairing.
void RopeFormula(std::vector<float>& x, const std::vector<int32_t>& pos, int heads, int hd,
                 int n_rot, const std::vector<double>& angles_per_token, bool neox) {
  const int half = n_rot / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int h = 0; h < heads; ++h) {
      float* v = &x[(t * heads + h) * hd];
      for (int i = 0; i < half; ++i) {
        const double a = angles_per_token[t * half + i];
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const double x0 = v[i0], x1 = v[i1];
        v[i0] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
        v[i1] = static_cast<float>(x0 * std::sin(a) + x1 * std::cos(a));
      }
    }
  }
}

TEST(LlmOpsTest, RopePairsAsLlamaCppModes) {
  // head_dim 4, both pairs rotated: mode 0 pairs (0,1), (2,3); NeoX pairs (0,2), (1,3).
  const float inv_freq[2] = {1.0f, 0.5f};
  const int32_t pos = 1;
  for (cpu::Isa isa : Levels()) {
    cpu::ScopedMaxIsa cap(isa);
    std::vector<float> x = {1, 2, 3, 4};
    Rope(x.data(), &pos, 1, 1, 4, 4, inv_freq, /*neox=*/false);
    const double c1 = std::cos(1.0), s1 = std::sin(1.0), c5 = std::cos(0.5), s5 = std::sin(0.5);
    EXPECT_NEAR(x[0], 1 * c1 - 2 * s1, 1e-6);
    EXPECT_NEAR(x[1], 1 * s1 + 2 * c1, 1e-6);
    EXPECT_NEAR(x[2], 3 * c5 - 4 * s5, 1e-6);
    EXPECT_NEAR(x[3], 3 * s5 + 4 * c5, 1e-6);
    std::vector<float> y = {1, 2, 3, 4};
    Rope(y.data(), &pos, 1, 1, 4, 4, inv_freq, /*neox=*/true);
    EXPECT_NEAR(y[0], 1 * c1 - 3 * s1, 1e-6);
    EXPECT_NEAR(y[2], 1 * s1 + 3 * c1, 1e-6);
    EXPECT_NEAR(y[1], 2 * c5 - 4 * s5, 1e-6);
    EXPECT_NEAR(y[3], 2 * s5 + 4 * c5, 1e-6);
  }
}

TEST(LlmOpsTest, RopeMatchesTheFormula) {
  const int heads = 5;
  for (cpu::Isa isa : Levels()) {
    cpu::ScopedMaxIsa cap(isa);
    for (int hd : {64, 128, 24}) {
      for (int n_rot : {hd, hd / 2, 8}) {
        for (bool neox : {false, true}) {
          const std::vector<int32_t> pos = {0, 1, 7, 100, 511, 4095, 17};
          std::vector<float> inv(static_cast<size_t>(n_rot / 2));
          RopeInvFreq(10000.0f, n_rot, nullptr, inv.data());
          for (int i = 0; i < n_rot / 2; ++i) {
            ASSERT_NEAR(inv[i], std::pow(10000.0, -2.0 * i / n_rot), 1e-7 * inv[i]);
          }
          const std::vector<float> x0 = Random(pos.size() * heads * hd, 8);
          std::vector<double> angles;
          for (int32_t p : pos) {
            for (int i = 0; i < n_rot / 2; ++i) angles.push_back(static_cast<float>(p) * inv[i]);
          }
          std::vector<float> want = x0, got = x0, ref_got = x0;
          RopeFormula(want, pos, heads, hd, n_rot, angles, neox);
          Rope(got.data(), pos.data(), static_cast<int64_t>(pos.size()), heads, hd, n_rot,
               inv.data(), neox);
          ref::Rope(ref_got.data(), pos.data(), static_cast<int64_t>(pos.size()), heads, hd, n_rot,
                    inv.data(), neox);
          for (size_t i = 0; i < want.size(); ++i) {
            // cosf/sinf of a float angle up to ~4000 rad: a few ulp of the angle's result.
            ASSERT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i])))
                << IsaName(isa) << " hd " << hd << " n_rot " << n_rot << " neox " << neox;
            ASSERT_NEAR(ref_got[i], want[i], 1e-6 * (1 + std::abs(want[i])));
          }
          // Dims past n_rot untouched; position 0 is the identity.
          for (size_t t = 0; t < pos.size(); ++t) {
            for (int h = 0; h < heads; ++h) {
              for (int e = 0; e < hd; ++e) {
                const size_t i = (t * heads + h) * hd + e;
                if (e >= n_rot || pos[t] == 0) {
                  ASSERT_EQ(got[i], x0[i]);
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(LlmOpsTest, RopeGgmlUsesChainedFloatAngles) {
  const int heads = 3, hd = 64, n_rot = 64;
  const std::vector<int32_t> pos = {0, 3, 250, 1000, 3000};
  std::vector<float> ff(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) ff[i] = i < 10 ? 1.0f : (i < 20 ? 2.5f : 8.0f);
  for (cpu::Isa isa : Levels()) {
    cpu::ScopedMaxIsa cap(isa);
    for (bool neox : {false, true}) {
      const float* factor_options[] = {nullptr, ff.data()};
      for (const float* factors : factor_options) {
        const float freq_scale = factors ? 0.5f : 1.0f;
        // The test's own copy of ggml_rope_cache_init's recurrence.
        const float theta_scale = std::pow(500000.0f, -2.0f / n_rot);
        std::vector<double> angles;
        for (int32_t p : pos) {
          float theta = static_cast<float>(p);
          for (int i = 0; i < n_rot / 2; ++i) {
            angles.push_back(freq_scale * (theta / (factors ? factors[i] : 1.0f)));
            theta *= theta_scale;
          }
        }
        const std::vector<float> x0 = Random(pos.size() * heads * hd, 12);
        std::vector<float> want = x0, got = x0, ref_got = x0;
        RopeFormula(want, pos, heads, hd, n_rot, angles, neox);
        RopeGgml(got.data(), pos.data(), static_cast<int64_t>(pos.size()), heads, hd, n_rot,
                 500000.0f, freq_scale, factors, neox);
        ref::RopeGgml(ref_got.data(), pos.data(), static_cast<int64_t>(pos.size()), heads, hd,
                      n_rot, 500000.0f, freq_scale, factors, neox);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i]))) << IsaName(isa);
          ASSERT_NEAR(ref_got[i], want[i], 1e-6 * (1 + std::abs(want[i])));
        }
        // The product form with the same frequencies agrees to the angles' rounding.
        std::vector<float> inv(n_rot / 2), prod = x0;
        RopeInvFreq(500000.0f, n_rot, factors, inv.data());
        for (float& f : inv) f *= freq_scale;
        Rope(prod.data(), pos.data(), static_cast<int64_t>(pos.size()), heads, hd, n_rot,
             inv.data(), neox);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(prod[i], got[i], 2e-3 * (1 + std::abs(want[i])));
        }
      }
    }
  }
}

TEST(LlmOpsTest, SwiGluAndAddMatchTheFormulas) {
  for (cpu::Isa isa : Levels()) {
    cpu::ScopedMaxIsa cap(isa);
    for (int64_t n : {1, 13, 5632}) {
      const int64_t T = n > 100 ? 7 : 3;
      std::vector<float> g = Random(static_cast<size_t>(n * T), 21, 4.0f);
      const std::vector<float> u = Random(g.size(), 22);
      g[0] = 100.0f;  // far tails: exp's clamp
      if (g.size() > 1) g[1] = -100.0f;
      if (g.size() > 2) g[2] = 0.0f;
      std::vector<float> out(g.size()), ref_out(g.size());
      SwiGlu(g.data(), u.data(), out.data(), n, T);
      ref::SwiGlu(g.data(), u.data(), ref_out.data(), n, T);
      for (size_t i = 0; i < g.size(); ++i) {
        const double want = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
        ASSERT_NEAR(out[i], want, 1e-6 * std::abs(want) + 1e-30) << IsaName(isa) << " i " << i;
        ASSERT_NEAR(ref_out[i], want, 1e-6 * std::abs(want) + 1e-30);
      }
      std::vector<float> inplace = g;
      SwiGlu(inplace.data(), u.data(), inplace.data(), n, T);
      ASSERT_EQ(inplace, out);

      std::vector<float> sum(g.size());
      Add(g.data(), u.data(), sum.data(), n * T);
      for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(sum[i], g[i] + u[i]);
      std::vector<float> acc = g;
      Add(acc.data(), u.data(), acc.data(), n * T);
      ASSERT_EQ(acc, sum);
      std::vector<float> ref_sum(g.size());
      ref::Add(g.data(), u.data(), ref_sum.data(), n * T);
      ASSERT_EQ(ref_sum, sum);
    }
  }
}

}  // namespace
}  // namespace kiln::llm
