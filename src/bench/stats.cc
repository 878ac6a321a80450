// SPDX-License-Identifier: Apache-2.0
#include "bench/stats.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace kiln::bench {

uint64_t PercentileOfSorted(std::span<const uint64_t> sorted, double p) {
  KILN_CHECK(!sorted.empty(), "percentile of no samples");
  KILN_CHECK(p >= 0 && p <= 100, "percentile out of range");
  size_t index =
      static_cast<size_t>(std::llround(p / 100.0 * static_cast<double>(sorted.size() - 1)));
  return sorted[std::min(index, sorted.size() - 1)];
}

LatencySummary Summarize(std::vector<uint64_t>& latencies_ns, double custom_percentile) {
  LatencySummary s;
  if (latencies_ns.empty()) return s;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  const double n = static_cast<double>(latencies_ns.size());
  double sum = 0;
  for (uint64_t v : latencies_ns) sum += static_cast<double>(v);
  const double mean = sum / n;
  double sq = 0;
  for (uint64_t v : latencies_ns) {
    double d = static_cast<double>(v) - mean;
    sq += d * d;
  }
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  s.count = latencies_ns.size();
  s.avg_us = mean / 1000.0;
  s.stddev_us = std::sqrt(sq / n) / 1000.0;
  s.min_us = us(latencies_ns.front());
  s.max_us = us(latencies_ns.back());
  s.p50_us = us(PercentileOfSorted(latencies_ns, 50));
  s.p90_us = us(PercentileOfSorted(latencies_ns, 90));
  s.p95_us = us(PercentileOfSorted(latencies_ns, 95));
  s.p99_us = us(PercentileOfSorted(latencies_ns, 99));
  s.p999_us = us(PercentileOfSorted(latencies_ns, 99.9));
  s.custom_us =
      custom_percentile < 0 ? s.avg_us : us(PercentileOfSorted(latencies_ns, custom_percentile));
  return s;
}

bool IsStable(std::span<const WindowMeasure> windows, double stability_pct, size_t window_count) {
  if (window_count == 0 || windows.size() < window_count) return false;
  auto last = windows.subspan(windows.size() - window_count);
  const double bound = 1.0 + stability_pct / 100.0;
  auto within = [&](auto get) {
    double lo = get(last[0]), hi = lo;
    for (const WindowMeasure& w : last) {
      lo = std::min(lo, get(w));
      hi = std::max(hi, get(w));
    }
    if (lo <= 0) return false;
    return hi / lo <= bound;
  };
  for (const WindowMeasure& w : last) {
    if (w.throughput <= 0) return false;
  }
  return within([](const WindowMeasure& w) { return w.throughput; }) &&
         within([](const WindowMeasure& w) { return w.latency_us; });
}

}  // namespace kiln::bench
