// SPDX-License-Identifier: Apache-2.0
#include "bench/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::bench {
namespace {

std::vector<int64_t> Take(ArrivalSchedule& s, int n) {
  std::vector<int64_t> v;
  v.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(s.Next());
  return v;
}

TEST(ScheduleTest, ConstantIsEvenlySpacedWithoutDrift) {
  ArrivalSchedule s(1000, Distribution::kConstant, 1);
  std::vector<int64_t> v = Take(s, 1'000'001);
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[1], 1'000'000);
  EXPECT_EQ(v[7], 7'000'000);
  EXPECT_EQ(v[1'000'000], 1'000'000'000'000);  // the millionth arrival at exactly 1000 s
}

TEST(ScheduleTest, ConstantShardsInterleaveToTheFullRate) {
  // 3 shards of 300/s: the union is every 1/300 s.
  std::vector<int64_t> all;
  for (int shard = 0; shard < 3; ++shard) {
    ArrivalSchedule s(300, Distribution::kConstant, 1, shard, 3);
    for (int64_t t : Take(s, 100)) all.push_back(t);
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_NEAR(static_cast<double>(all[i]), i * 1e9 / 300, 1.0) << i;
  }
}

TEST(ScheduleTest, PoissonMeanRateAndExponentialGaps) {
  const double rate = 2000;
  const int n = 200'000;
  ArrivalSchedule s(rate, Distribution::kPoisson, 7);
  std::vector<int64_t> v = Take(s, n);
  ASSERT_TRUE(std::is_sorted(v.begin(), v.end()));
  double measured = n / (static_cast<double>(v.back()) / 1e9);
  EXPECT_NEAR(measured, rate, rate * 0.01);
  // Exponential gaps: the coefficient of variation is 1, and P(gap > mean) = e^-1.
  double mean_gap = 1e9 / rate, sum = 0, sq = 0;
  int above = 0;
  int64_t prev = 0;
  for (int64_t t : v) {
    double g = static_cast<double>(t - prev);
    prev = t;
    sum += g;
    sq += g * g;
    above += g > mean_gap;
  }
  double m = sum / n, sd = std::sqrt(sq / n - m * m);
  EXPECT_NEAR(sd / m, 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(above) / n, std::exp(-1.0), 0.01);
}

TEST(ScheduleTest, PoissonIsDeterministicPerSeed) {
  ArrivalSchedule a(500, Distribution::kPoisson, 11), b(500, Distribution::kPoisson, 11),
      c(500, Distribution::kPoisson, 12);
  std::vector<int64_t> va = Take(a, 1000), vb = Take(b, 1000), vc = Take(c, 1000);
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
}

TEST(ScheduleTest, PoissonShardsSumToTheRate) {
  const int shards = 4;
  int64_t horizon = 20'000'000'000;  // 20 s
  int64_t count = 0;
  for (int shard = 0; shard < shards; ++shard) {
    ArrivalSchedule s(1000, Distribution::kPoisson, 3, shard, shards);
    while (s.Next() < horizon) ++count;
  }
  EXPECT_NEAR(static_cast<double>(count) / 20.0, 1000, 1000 * 0.03);
}

}  // namespace
}  // namespace kiln::bench
