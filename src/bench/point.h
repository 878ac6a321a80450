// SPDX-License-Identifier: Apache-2.0
#pragma once
// What `kiln bench` measured at one load level (a concurrency or an intended request rate), and
// the run's stamp. Plain data, filled by the runner and read by the writers (writers.h).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace kiln::bench {

// Server-side averages over the measured windows, from the statistics endpoint (deltas of the
// cumulative counters, as perf_analyzer computes them). Times per request, in microseconds.
struct ServerBreakdown {
  bool present = false;  // false when the server's statistics could not be read
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  uint64_t success_count = 0;
  double request_us = 0;  // success.ns / success.count
  double queue_us = 0;
  double compute_input_us = 0;
  double compute_infer_us = 0;
  double compute_output_us = 0;
  double overhead_us = 0;  // request - (queue + compute), floored at 0
  double mean_batch = 0;   // inference_count / execution_count
};

// One measurement window of a level, for the JSON output (every window, stable or not).
struct WindowResult {
  double throughput = 0;  // inferences/s
  double avg_us = 0;
  double p50_us = 0;
  double p99_us = 0;
  uint64_t errors = 0;
  ServerBreakdown server;  // this window's deltas
};

struct PointResult {
  bool open_loop = false;
  int concurrency = 0;         // closed loop
  double request_rate = 0;     // open loop: the intended rate, requests/s
  double achieved_rate = 0;    // requests/s sent during the merged windows
  double throughput = 0;       // inferences/s = completed requests * batch / seconds
  uint64_t request_count = 0;  // completed in the merged windows, errors included
  LatencySummary latency;      // of successful requests
  uint64_t errors = 0;
  std::map<std::string, uint64_t> errors_by_status;  // "HTTP 400", "gRPC NOT_FOUND", ...
  std::string first_error;                           // the first error's message, if any
  bool stable = false;
  int windows = 0;            // measurement windows run at this level
  double window_s = 0;        // seconds covered by the merged windows
  double client_cpu_pct = 0;  // user+system CPU of the bench process / wall time, % of one core
  // Open loop: how late requests left against their intended send time.
  double send_lag_avg_us = 0;
  double send_lag_p99_us = 0;
  double send_lag_max_us = 0;
  ServerBreakdown server;
  std::vector<WindowResult> window_results;  // every window run at this level, in order
};

// Where and how the run happened; stamped on every output.
struct RunInfo {
  std::string command_line;
  std::string git_commit;  // empty when unknown
  std::string cpu_model;
  int cpu_count = 0;
  std::string start_time_utc;  // ISO 8601
  std::string model;
  std::string model_version;
  std::string url;
  std::string protocol;  // "http-binary", "http-json" or "grpc"
  int batch_size = 1;
  double percentile = -1;           // the --percentile, -1 for none
  std::string stabilizing_latency;  // "p99", "avg", ...
};

}  // namespace kiln::bench
