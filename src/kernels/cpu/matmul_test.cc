// SPDX-License-Identifier: Apache-2.0
// oneDNN MatMul / Gemm / FusedMatMul / FusedGemm against the reference kernels: edge sizes,
// batched and broadcast MatMul, every Gemm transpose and C broadcast, constant (pre-packed) and
// runtime B, fused bias, residual and activations, concurrent Compute.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_test_util.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

TEST(CpuMatMulTest, MatchesReference) {
  std::mt19937 rng(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 1}, {1, 1}},
      {{7, 17}, {17, 9}},
      {{2, 3, 17, 8}, {8, 7}},
      {{128, 64}, {64, 33}},
      {{3, 7, 5}, {3, 5, 17}},
      {{2, 1, 4, 6}, {3, 6, 5}},
      {{4, 6}, {2, 6, 5}},
      {{1, 2, 9, 16}, {1, 2, 16, 9}},
      {{5}, {5, 3}},
      {{4, 5}, {5}},
      {{2, 12, 64}, {64, 768}},
  };
  for (const auto& [a, b] : cases) {
    for (bool const_b : {false, true}) {
      KernelCase c("MatMul", 13);
      c.Input(RandomTensor(S(a), rng));
      if (const_b) {
        c.ConstInput(RandomTensor(S(b), rng));
      } else {
        c.Input(RandomTensor(S(b), rng));
      }
      const std::string what =
          fmt::format("A [{}] B [{}] const {}", fmt::join(a, ","), fmt::join(b, ","), const_b);
      OwnedTensor expected = c.Run("ref");
      ExpectClose(c.Run("cpu"), expected, 1e-4, what);
      ExpectClose(c.Run("cpu"), expected, 1e-4, what + " again");
    }
  }
}

TEST(CpuMatMulTest, MismatchIsInvalidArgument) {
  std::mt19937 rng(2);
  KernelCase c("MatMul", 13);
  c.Input(RandomTensor(Shape({3, 4}), rng)).Input(RandomTensor(Shape({5, 2}), rng));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CpuGemmTest, MatchesReference) {
  std::mt19937 rng(3);
  struct G {
    int64_t m, k, n;
    std::vector<int64_t> c;  // empty: no C
  };
  const std::vector<G> cases = {{1, 1, 1, {}},       {7, 17, 9, {9}},    {17, 8, 7, {17, 7}},
                                {16, 33, 5, {1, 5}}, {9, 4, 13, {9, 1}}, {3, 5, 8, {1}},
                                {32, 768, 17, {17}}, {2, 3, 1, {2, 1}}};
  for (const G& g : cases) {
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        for (float alpha : {1.0f, 0.5f}) {
          for (float beta : {1.0f, 2.0f}) {
            KernelCase c("Gemm", 13);
            c.Input(RandomTensor(ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, rng));
            c.ConstInput(RandomTensor(tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, rng));
            if (!g.c.empty()) c.ConstInput(RandomTensor(S(g.c), rng));
            c.Attr(IntAttr("transA", ta)).Attr(IntAttr("transB", tb));
            c.Attr(FloatAttr("alpha", alpha)).Attr(FloatAttr("beta", beta));
            const std::string what =
                fmt::format("m {} k {} n {} c [{}] ta {} tb {} a {} b {}", g.m, g.k, g.n,
                            fmt::join(g.c, ","), ta, tb, alpha, beta);
            ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-4, what);
          }
        }
      }
    }
  }
}

// act(ref + addend) elementwise.
OwnedTensor ApplyExpected(const OwnedTensor& base, const OwnedTensor* z, const Activation& act) {
  OwnedTensor e = OwnedTensor::CopyOf(base.view()).value();
  float* p = e.data<float>();
  for (int64_t i = 0; i < e.num_elements(); ++i) {
    p[i] = ApplyActivation(act, z != nullptr ? p[i] + z->data<const float>()[i] : p[i]);
  }
  return e;
}

Activation Act(ActivationKind kind, float p0 = 0, float p1 = 0) { return {kind, p0, p1}; }

TEST(CpuFusedMatMulTest, BiasResidualActivation) {
  std::mt19937 rng(4);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{7, 17}, {17, 9}}, {{2, 5, 16}, {16, 33}}, {{2, 3, 4, 8}, {2, 3, 8, 5}}};
  const std::vector<std::pair<std::string, Activation>> acts = {
      {"", Act(ActivationKind::kNone)},     {"Relu", Act(ActivationKind::kRelu)},
      {"Gelu", Act(ActivationKind::kGelu)}, {"GeluTanh", Act(ActivationKind::kGeluTanh)},
      {"SiLU", Act(ActivationKind::kSilu)}, {"Tanh", Act(ActivationKind::kTanh)}};
  for (const auto& [a, b] : shapes) {
    for (const auto& [name, act] : acts) {
      for (bool bias : {false, true}) {
        for (bool z : {false, true}) {
          OwnedTensor ta = RandomTensor(S(a), rng), tb = RandomTensor(S(b), rng);
          const int64_t n = b.back();
          OwnedTensor tbias = RandomTensor(Shape({n}), rng);
          KernelCase plain("MatMul", 13);
          plain.Input(ta).ConstInput(tb);
          OwnedTensor base = plain.Run("ref");
          if (bias) {
            float* p = base.data<float>();
            for (int64_t i = 0; i < base.num_elements(); ++i) p[i] += tbias.data<float>()[i % n];
          }
          OwnedTensor tz = RandomTensor(base.shape(), rng);
          KernelCase f("FusedMatMul", 13);
          f.Domain(std::string(kKilnDomain), 1);
          f.Input(ta).ConstInput(tb);
          if (bias) {
            f.ConstInput(tbias);
          } else if (z) {
            f.OmittedInput();
          }
          if (z) f.Input(tz);
          if (!name.empty()) f.Attr(StringAttr("activation", name));
          ExpectClose(f.Run("cpu"), ApplyExpected(base, z ? &tz : nullptr, act), 1e-4,
                      fmt::format("FusedMatMul A [{}] act '{}' bias {} z {}", fmt::join(a, ","),
                                  name, bias, z));
        }
      }
    }
  }
}

TEST(CpuFusedGemmTest, CResidualActivation) {
  std::mt19937 rng(5);
  for (int tb : {0, 1}) {
    for (const std::vector<int64_t>& cshape : {std::vector<int64_t>{}, {9}, {5, 9}, {5, 1}}) {
      for (bool z : {false, true}) {
        for (float alpha : {1.0f, 0.5f}) {
          OwnedTensor ta = RandomTensor(Shape({5, 12}), rng);
          OwnedTensor tb_t = RandomTensor(tb ? Shape({9, 12}) : Shape({12, 9}), rng);
          OwnedTensor tc = cshape.empty() ? OwnedTensor() : RandomTensor(S(cshape), rng);
          KernelCase plain("Gemm", 13);
          plain.Input(ta).ConstInput(tb_t);
          if (tc.valid()) plain.ConstInput(tc);
          plain.Attr(IntAttr("transB", tb)).Attr(FloatAttr("alpha", alpha));
          plain.Attr(FloatAttr("beta", 1.5f));
          OwnedTensor base = plain.Run("ref");
          OwnedTensor tz = RandomTensor(base.shape(), rng);
          KernelCase f("FusedGemm", 13);
          f.Domain(std::string(kKilnDomain), 1);
          f.Input(ta).ConstInput(tb_t);
          if (tc.valid()) {
            f.ConstInput(tc);
          } else if (z) {
            f.OmittedInput();
          }
          if (z) f.Input(tz);
          f.Attr(IntAttr("transB", tb)).Attr(FloatAttr("alpha", alpha));
          f.Attr(FloatAttr("beta", 1.5f));
          f.Attr(StringAttr("activation", "Clip"))
              .Attr(FloatsAttr("activation_params", {-0.5f, 0.5f}));
          ExpectClose(
              f.Run("cpu"),
              ApplyExpected(base, z ? &tz : nullptr, Act(ActivationKind::kClip, -0.5f, 0.5f)), 1e-4,
              fmt::format("FusedGemm tb {} C [{}] z {}", tb, fmt::join(cshape, ","), z));
        }
      }
    }
  }
}

// One kernel instance fed several A shapes (as with dynamic batching): each gets its own plan,
// all share the one packed copy of the constant B.
TEST(CpuMatMulTest, OneKernelManyBatchSizes) {
  std::mt19937 rng(7);
  OwnedTensor b = RandomTensor(Shape({64, 48}), rng);
  KernelCase c("MatMul", 13);
  c.Input(RandomTensor(Shape({1, 64}), rng)).ConstInput(b);
  Result<KernelCase::Prepared> p = c.Prepare("cpu");
  ASSERT_TRUE(p.ok());
  const Tensor b_view = p->node.inputs[1].constant->view();
  for (int round = 0; round < 2; ++round) {
    for (int64_t rows : {1, 7, 17, 32, 3}) {
      OwnedTensor a = RandomTensor(Shape({rows, 64}), rng);
      std::vector<Tensor> inputs = {a.view(), b_view};
      std::vector<OwnedTensor> outputs(1);
      KernelContext ctx(inputs, outputs);
      ASSERT_TRUE(p->kernel->Compute(ctx).ok());
      KernelCase r("MatMul", 13);
      r.Input(a).ConstInput(b);
      ExpectClose(outputs[0], r.Run("ref"), 1e-4, fmt::format("rows {}", rows));
    }
  }
}

TEST(CpuMatMulTest, ConcurrentComputeOnOneKernel) {
  std::mt19937 rng(6);
  KernelCase c("MatMul", 13);
  c.Input(RandomTensor(Shape({4, 32, 64}), rng)).ConstInput(RandomTensor(Shape({64, 48}), rng));
  OwnedTensor expected = c.Run("ref");
  Result<KernelCase::Prepared> p = c.Prepare("cpu");
  ASSERT_TRUE(p.ok());
  std::vector<OwnedTensor> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) results[t] = c.Execute(*p).value();
    });
  }
  for (auto& th : threads) th.join();
  for (const OwnedTensor& r : results) ExpectClose(r, expected, 1e-4, "concurrent");
}

}  // namespace
}  // namespace kiln::cpu
