// SPDX-License-Identifier: Apache-2.0
#pragma once
// Outputs of `kiln bench generate`: the terminal table, the JSON file (--json) and the
// self-contained HTML report (--html), in the style of the KServe mode's writers (writers.h).
//
// NOTE (JSON keys): the top-level metric keys are the ones `vllm bench serve --save-result`
// writes (duration, completed, total_input_tokens, request_throughput, mean_ttft_ms,
// median_ttft_ms, p99_ttft_ms, ...), so scripts that read vLLM's results read kiln's; kiln adds
// "run" (the stamp), "failed", "errors_by_kind", "first_error", the send delay and "requests"
// (one object per request).
//
// Pure functions from plain data to text; the caller writes the files (writers.h WriteFile).

#include <cstdint>
#include <span>
#include <string>

#include "bench/gen_stats.h"

namespace kiln::bench {

// Where and how the run happened; stamped on every output.
struct GenRunInfo {
  std::string command_line;
  std::string git_commit;  // empty when unknown
  std::string cpu_model;
  int cpu_count = 0;
  std::string start_time_utc;  // ISO 8601
  std::string url;
  std::string endpoint;  // "/v1/completions" | "/v1/chat/completions"
  std::string model;
  std::string dataset;  // "random", "sharegpt-like", "file:PATH"
  int64_t num_prompts = 0;
  double request_rate = 0;  // +inf: all at once
  double burstiness = 1;
  int max_concurrency = 0;  // 0 = unlimited
  GoodputSlo slo;
};

std::string FormatGenTable(const GenRunInfo& info, const GenMetrics& m);

// `records` (in request order) fill the "requests" array; they are read with `m`'s rules.
std::string FormatGenJson(const GenRunInfo& info, const GenMetrics& m,
                          std::span<const GenRecord> records);

// One page with no external assets: the stamp, the summary table, the cumulative distributions
// of TTFT and E2E latency and of TPOT and ITL as inline SVG, and the errors.
std::string FormatGenHtml(const GenRunInfo& info, const GenMetrics& m,
                          std::span<const GenRecord> records);

}  // namespace kiln::bench
