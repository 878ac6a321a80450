// SPDX-License-Identifier: Apache-2.0
#pragma once
// Latency statistics and the stability rule of `kiln bench`.
//
// NOTE (percentiles): nearest rank on the sorted latencies, index = round(p/100 * (n-1)), the
// rule perf_analyzer uses, so the two tools report the same number for the same samples.
// Stability: the last `window_count` (3) windows all have non-zero throughput and, for both the
// throughput and the stabilising latency (the --percentile latency, or the average when no
// percentile is given), max/min <= 1 + stability_pct/100.
//
// Pure functions over plain data; no threads, no clocks.

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::bench {

// REQUIRES: `sorted` ascending and non-empty; 0 <= p <= 100.
uint64_t PercentileOfSorted(std::span<const uint64_t> sorted, double p);

struct LatencySummary {
  uint64_t count = 0;
  double avg_us = 0;
  double stddev_us = 0;  // population standard deviation
  double min_us = 0;
  double max_us = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p95_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double custom_us = 0;  // the --percentile value (== avg_us when custom_percentile < 0)
};

// Summarises latencies given in nanoseconds; sorts `latencies_ns` in place. All zero for an
// empty input. `custom_percentile` < 0 means "none" (custom_us is then the average).
LatencySummary Summarize(std::vector<uint64_t>& latencies_ns, double custom_percentile);

// One measurement window as the stability rule sees it.
struct WindowMeasure {
  double throughput = 0;  // inferences/s
  double latency_us = 0;  // the stabilising latency
};

// True when the last `window_count` entries of `windows` are stable within `stability_pct`
// percent (see the NOTE above). False when there are fewer than `window_count` windows.
bool IsStable(std::span<const WindowMeasure> windows, double stability_pct,
              size_t window_count = 3);

}  // namespace kiln::bench
