// SPDX-License-Identifier: Apache-2.0
// ai.kiln Attention against the formula in double: edge sizes, several leading dims, masks of
// several broadcast shapes, explicit and default scale.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/cpu_test_util.h"
#include "kernels/ref/broadcast.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

Shape S(const std::vector<int64_t>& d) { return Shape(std::span<const int64_t>(d)); }

OwnedTensor Expected(const OwnedTensor& q, const OwnedTensor& k, const OwnedTensor& v,
                     const OwnedTensor* mask, double scale) {
  const int r = q.shape().rank();
  const int64_t s = q.shape().dim(r - 2), d = q.shape().dim(r - 1), t = k.shape().dim(r - 2);
  const int64_t dv = v.shape().dim(r - 1);
  const int64_t b = q.num_elements() / (s * d);
  std::vector<int64_t> score_dims(q.shape().dims().begin(), q.shape().dims().end() - 1);
  score_dims.push_back(t);
  const Shape score_shape = S(score_dims);
  ref::DimArray ms{};
  if (mask != nullptr) ms = ref::BroadcastStrides(mask->shape(), score_shape);
  std::vector<int64_t> out_dims(q.shape().dims().begin(), q.shape().dims().end() - 1);
  out_dims.push_back(dv);
  std::vector<float> y(static_cast<size_t>(b * s * dv));
  const float* pq = q.data<const float>();
  const float* pk = k.data<const float>();
  const float* pv = v.data<const float>();
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t si = 0; si < s; ++si) {
      std::vector<double> p(static_cast<size_t>(t));
      double max = -INFINITY;
      for (int64_t ti = 0; ti < t; ++ti) {
        double acc = 0;
        for (int64_t di = 0; di < d; ++di) {
          acc += static_cast<double>(pq[(bi * s + si) * d + di]) * pk[(bi * t + ti) * d + di];
        }
        acc *= scale;
        if (mask != nullptr) {
          const std::vector<int64_t> coord =
              ref::testing::Unravel((bi * s + si) * t + ti, score_dims);
          int64_t off = 0;
          for (size_t dd = 0; dd < coord.size(); ++dd) off += coord[dd] * ms[dd];
          acc += mask->data<const float>()[off];
        }
        p[static_cast<size_t>(ti)] = acc;
        max = std::max(max, acc);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - max));
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t ti = 0; ti < t; ++ti)
          acc += p[static_cast<size_t>(ti)] / sum * pv[(bi * t + ti) * dv + j];
        y[static_cast<size_t>((bi * s + si) * dv + j)] = static_cast<float>(acc);
      }
    }
  }
  return MakeTensor<float>(S(out_dims), y);
}

TEST(CpuAttentionTest, MatchesFormula) {
  std::mt19937 rng(1);
  struct A {
    std::vector<int64_t> lead;
    int64_t s, t, d, dv;
    std::vector<int64_t> mask;  // empty: none
    float scale;                // 0: default
  };
  const std::vector<A> cases = {
      {{}, 1, 1, 1, 1, {}, 0},
      {{1}, 7, 7, 17, 9, {}, 0},
      {{2, 3}, 17, 9, 8, 8, {2, 1, 1, 9}, 0.3f},
      {{1, 12}, 128, 128, 64, 64, {1, 1, 1, 128}, 0},
      {{2}, 5, 6, 4, 3, {5, 6}, 0},
      {{2, 2}, 3, 4, 5, 6, {2, 1, 3, 1}, 0.5f},
  };
  for (const A& a : cases) {
    auto with = [&](std::vector<int64_t> tail) {
      std::vector<int64_t> d = a.lead;
      d.insert(d.end(), tail.begin(), tail.end());
      return S(d);
    };
    OwnedTensor q = RandomTensor(with({a.s, a.d}), rng, -2, 2);
    OwnedTensor k = RandomTensor(with({a.t, a.d}), rng, -2, 2);
    OwnedTensor v = RandomTensor(with({a.t, a.dv}), rng);
    OwnedTensor mask = a.mask.empty() ? OwnedTensor() : RandomTensor(S(a.mask), rng, -5, 0);
    KernelCase c("Attention", 17);
    c.Domain(std::string(kKilnDomain), 1);
    c.Input(q).Input(k).Input(v);
    if (mask.valid()) c.Input(mask);
    if (a.scale != 0) c.Attr(FloatAttr("scale", a.scale));
    const double scale = a.scale != 0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(a.d));
    ExpectClose(c.Run("cpu"), Expected(q, k, v, mask.valid() ? &mask : nullptr, scale), 1e-4,
                fmt::format("Attention lead [{}] s {} t {} d {} mask [{}]", fmt::join(a.lead, ","),
                            a.s, a.t, a.d, fmt::join(a.mask, ",")));
  }
}

TEST(CpuAttentionTest, BadShapesAreInvalid) {
  std::mt19937 rng(2);
  KernelCase c("Attention", 17);
  c.Domain(std::string(kKilnDomain), 1);
  c.Input(RandomTensor(Shape({2, 4, 8}), rng))
      .Input(RandomTensor(Shape({2, 5, 7}), rng))
      .Input(RandomTensor(Shape({2, 5, 3}), rng));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
