// SPDX-License-Identifier: Apache-2.0
#pragma once
// The metrics of `kiln bench generate`, computed from one record per request: duration,
// completed / failed requests, request and token throughput, TTFT, TPOT, ITL and E2E latency
// (mean, median, p99, ...), and goodput under --goodput SLOs. The definitions follow
// `vllm bench serve`, so the two tools report the same numbers for the same trace:
//
//   TTFT  = first content chunk - send
//   ITL   = the gaps between consecutive content chunks of a request (all requests pooled)
//   TPOT  = (E2E - TTFT) / (output tokens - 1), for requests with more than one output token
//   E2E   = end of the stream ([DONE] or the body's end) - send
//   output tokens = the usage chunk's completion_tokens, else the number of content chunks
//   input tokens  = the usage chunk's prompt_tokens, else the dataset's count
//   goodput = completed requests meeting every given SLO (TTFT <= ttft, TPOT <= tpot, E2E <=
//             e2el; TPOT counts as 0 for one-token outputs) / duration
//
// NOTE (percentiles): linear interpolation between the closest ranks (numpy's default, which
// vLLM's benchmark uses): rank = p/100 * (n - 1). The KServe mode (stats.h) uses nearest rank,
// as perf_analyzer does.
//
// Thread safety: pure functions over plain data.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace kiln::bench {

// One request as the streaming client saw it. Times are steady-clock nanoseconds.
struct GenRecord {
  int64_t intended_ns = 0;         // when the arrival schedule wanted it sent
  int64_t due_ns = 0;              // the same, after the run's start (the schedule's offset)
  int64_t send_ns = 0;             // when it was handed to a connection (latencies start here)
  int64_t done_ns = 0;             // end of the stream, or when it failed
  std::vector<int64_t> chunk_ns;   // arrival of every content chunk, in order
  int64_t prompt_tokens = -1;      // usage.prompt_tokens, -1 when the server sent none
  int64_t completion_tokens = -1;  // usage.completion_tokens, -1 when the server sent none
  int64_t dataset_input_tokens = 0;
  bool ok = false;
  std::string error_kind;  // failures: "HTTP 404", "error event", "connection error", ...
  std::string error;       // failures: the message
};

// One record read with the rules above. `ok` is false for a failed request (the rest is then 0).
struct RequestMetrics {
  bool ok = false;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double ttft_ms = 0;
  double tpot_ms = -1;  // -1 for one output token (no TPOT)
  double e2el_ms = 0;
  double send_delay_ms = 0;
};
RequestMetrics MetricsOf(const GenRecord& record);

// --goodput SLOs in milliseconds; < 0 = not given.
struct GoodputSlo {
  double ttft_ms = -1;
  double tpot_ms = -1;
  double e2el_ms = -1;
  bool any() const { return ttft_ms >= 0 || tpot_ms >= 0 || e2el_ms >= 0; }
};

// Parses the --goodput values ("ttft:500", "tpot:50", "e2el:3000"). InvalidArgument naming the
// value for an unknown metric, a missing or negative number, or a metric given twice.
Result<GoodputSlo> ParseGoodput(const std::vector<std::string>& values);

// REQUIRES: `sorted` ascending and non-empty; 0 <= p <= 100.
double PercentileLinear(std::span<const double> sorted, double p);

struct MetricSummary {
  uint64_t count = 0;
  double mean_ms = 0;
  double median_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double std_ms = 0;  // population standard deviation (numpy's default)
  double min_ms = 0;
  double max_ms = 0;
};

// All zero for no samples; sorts `ms` in place.
MetricSummary SummarizeMs(std::vector<double>& ms);

struct GenMetrics {
  double duration_s = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;
  int64_t total_input_tokens = 0;     // over completed requests
  int64_t total_output_tokens = 0;    // over completed requests
  double request_throughput = 0;      // completed / duration
  double output_throughput = 0;       // output tokens / duration
  double total_token_throughput = 0;  // (input + output tokens) / duration
  bool goodput_given = false;
  uint64_t good = 0;   // completed requests meeting every SLO
  double goodput = 0;  // good / duration, requests/s
  MetricSummary ttft, tpot, itl, e2el;
  MetricSummary send_delay;  // send - intended (waits for --max-concurrency, client lag)
  std::map<std::string, uint64_t> errors_by_kind;
  std::string first_error;  // the first failed request's message
};

// REQUIRES: duration_s > 0 unless `records` is empty.
GenMetrics ComputeGenMetrics(std::span<const GenRecord> records, double duration_s,
                             const GoodputSlo& slo);

}  // namespace kiln::bench
