// SPDX-License-Identifier: Apache-2.0
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace kiln::bench {
namespace {

TEST(PercentileTest, NearestRankRoundedIndex) {
  // 1..100 ns: index = round(p/100 * 99).
  std::vector<uint64_t> v(100);
  std::iota(v.begin(), v.end(), 1);
  EXPECT_EQ(PercentileOfSorted(v, 0), 1u);
  EXPECT_EQ(PercentileOfSorted(v, 50), 51u);     // round(49.5) = 50 (half away from zero)
  EXPECT_EQ(PercentileOfSorted(v, 90), 90u);     // round(89.1) = 89
  EXPECT_EQ(PercentileOfSorted(v, 99), 99u);     // round(98.01) = 98
  EXPECT_EQ(PercentileOfSorted(v, 99.9), 100u);  // round(98.901) = 99
  EXPECT_EQ(PercentileOfSorted(v, 100), 100u);
  std::vector<uint64_t> one{7};
  EXPECT_EQ(PercentileOfSorted(one, 99), 7u);
}

TEST(PercentileTest, SummarizeMatchesDirectComputation) {
  std::mt19937_64 rng(42);
  std::vector<uint64_t> v;
  v.reserve(1001);
  for (int i = 0; i < 1001; ++i) v.push_back(1000 + rng() % 1'000'000);
  std::vector<uint64_t> copy = v;
  // Reference values computed here independently.
  double sum = 0;
  for (uint64_t x : copy) sum += static_cast<double>(x);
  double mean = sum / copy.size();
  double sq = 0;
  for (uint64_t x : copy) sq += (x - mean) * (x - mean);
  std::sort(copy.begin(), copy.end());
  LatencySummary s = Summarize(v, 75);
  EXPECT_EQ(s.count, 1001u);
  EXPECT_NEAR(s.avg_us, mean / 1000, 1e-6);
  EXPECT_NEAR(s.stddev_us, std::sqrt(sq / 1001) / 1000, 1e-6);
  EXPECT_DOUBLE_EQ(s.p50_us, copy[500] / 1000.0);
  EXPECT_DOUBLE_EQ(s.p90_us, copy[900] / 1000.0);
  EXPECT_DOUBLE_EQ(s.p95_us, copy[950] / 1000.0);
  EXPECT_DOUBLE_EQ(s.p99_us, copy[990] / 1000.0);
  EXPECT_DOUBLE_EQ(s.p999_us, copy[999] / 1000.0);
  EXPECT_DOUBLE_EQ(s.custom_us, copy[750] / 1000.0);
  EXPECT_DOUBLE_EQ(s.min_us, copy.front() / 1000.0);
  EXPECT_DOUBLE_EQ(s.max_us, copy.back() / 1000.0);
}

TEST(PercentileTest, EmptyAndNoCustomPercentile) {
  std::vector<uint64_t> none;
  LatencySummary e = Summarize(none, 99);
  EXPECT_EQ(e.count, 0u);
  EXPECT_EQ(e.p99_us, 0);
  std::vector<uint64_t> v{1000, 3000};
  LatencySummary s = Summarize(v, -1);
  EXPECT_DOUBLE_EQ(s.custom_us, 2.0);  // the average when no percentile is given
}

TEST(StabilityTest, NeedsThreeWindows) {
  std::vector<WindowMeasure> w{{100, 10}, {100, 10}};
  EXPECT_FALSE(IsStable(w, 10));
  w.push_back({100, 10});
  EXPECT_TRUE(IsStable(w, 10));
}

TEST(StabilityTest, BoundIsMaxOverMin) {
  // 110 / 100 = 1.10: within 10 %; 111 / 100 is not.
  EXPECT_TRUE(IsStable(std::vector<WindowMeasure>{{100, 50}, {110, 50}, {105, 50}}, 10));
  EXPECT_FALSE(IsStable(std::vector<WindowMeasure>{{100, 50}, {111, 50}, {105, 50}}, 10));
  // Latency judged the same way.
  EXPECT_TRUE(IsStable(std::vector<WindowMeasure>{{100, 50}, {100, 55}, {100, 52}}, 10));
  EXPECT_FALSE(IsStable(std::vector<WindowMeasure>{{100, 50}, {100, 56}, {100, 52}}, 10));
  // A wider tolerance accepts it.
  EXPECT_TRUE(IsStable(std::vector<WindowMeasure>{{100, 50}, {100, 56}, {100, 52}}, 20));
}

TEST(StabilityTest, OnlyTheLastWindowsCount) {
  std::vector<WindowMeasure> w{{10, 500}, {1000, 5}, {100, 50}, {101, 51}, {99, 49}};
  EXPECT_TRUE(IsStable(w, 10));
  w.push_back({200, 50});
  EXPECT_FALSE(IsStable(w, 10));
}

TEST(StabilityTest, ZeroThroughputIsNeverStable) {
  EXPECT_FALSE(IsStable(std::vector<WindowMeasure>{{0, 0}, {0, 0}, {0, 0}}, 10));
  EXPECT_FALSE(IsStable(std::vector<WindowMeasure>{{100, 5}, {0, 5}, {100, 5}}, 10));
}

}  // namespace
}  // namespace kiln::bench
