// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/system_metrics.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(SystemMetrics, ParsesTheAggregateCpuLine) {
  const char* text =
      "cpu  100 5 50 800 20 3 2 10 7 0\n"
      "cpu0 50 2 25 400 10 1 1 5 3 0\n"
      "intr 12345\n";
  const std::optional<CpuTimes> t = ParseProcStat(text);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->idle, 820u);                                    // idle + iowait
  EXPECT_EQ(t->total, 100u + 5 + 50 + 800 + 20 + 3 + 2 + 10);  // guest is inside user
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4\n").has_value());
  EXPECT_FALSE(ParseProcStat("cpu  1 2\n").has_value());
}

TEST(SystemMetrics, UtilizationIsTheBusyShareOfTheDelta) {
  const CpuTimes before{800, 1000};
  const CpuTimes after{830, 1100};  // 100 jiffies, 30 idle
  EXPECT_DOUBLE_EQ(*CpuUtilization(before, after), 0.7);
  EXPECT_FALSE(CpuUtilization(before, before).has_value());
  EXPECT_DOUBLE_EQ(*CpuUtilization({0, 0}, {100, 100}), 0.0);
}

TEST(SystemMetrics, ParsesMeminfoAndRss) {
  const char* meminfo =
      "MemTotal:       16318960 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   12000000 kB\n";
  const std::optional<MemoryInfo> m = ParseMeminfo(meminfo);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->total_bytes, 16318960ull * 1024);
  EXPECT_EQ(m->used_bytes, (16318960ull - 12000000ull) * 1024);
  EXPECT_FALSE(ParseMeminfo("MemTotal: 5 kB\n").has_value());
  EXPECT_EQ(ParseStatusRss("Name:\tkiln\nVmRSS:\t   51200 kB\nThreads: 4\n"), 51200ull * 1024);
  EXPECT_FALSE(ParseStatusRss("Name:\tkiln\n").has_value());
}

TEST(SystemMetrics, ReadsThisMachine) {
  const std::optional<MemoryInfo> m = ReadMemoryInfo();
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->total_bytes, 0u);
  EXPECT_LE(m->used_bytes, m->total_bytes);
  const std::optional<uint64_t> rss = ReadProcessRssBytes();
  ASSERT_TRUE(rss.has_value());
  EXPECT_GT(*rss, 0u);
  CpuUtilizationSampler cpu;
  volatile uint64_t spin = 0;
  for (int i = 0; i < 50'000'000; ++i) spin = spin + 1;
  const std::optional<double> u = cpu.Sample();
  if (u.has_value()) {
    EXPECT_GE(*u, 0.0);
    EXPECT_LE(*u, 1.0);
  }
}

}  // namespace
}  // namespace kiln
