// SPDX-License-Identifier: Apache-2.0
#pragma once
// `kiln bench generate`'s driver, the counterpart of `vllm bench serve`: builds the dataset and
// the arrival times, streams every request to an OpenAI-compatible endpoint (gen_client.h),
// computes the metrics (gen_stats.h) and writes the table, --json and --html (gen_report.h).
// tools/kiln/bench_command.cc maps the command line onto GenOptions; docs/bench.md documents it.
//
//   GenOptions o;
//   o.url = "http://localhost:8000"; o.model = "llama"; o.num_prompts = 200;
//   o.request_rate = 4;
//   KILN_RETURN_IF_ERROR(RunGenBench(o, stdout));
//
// NOTE (duration): from the start of the run (time zero of the arrival schedule) to the end of
// the last request, as vLLM measures it; throughputs divide by it.
//
// Thread safety: RunGenBench runs on the calling thread (the streams are one event loop on it).

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/gen_stats.h"

namespace kiln::bench {

struct GenOptions {
  std::string url = "http://localhost:8000";  // http://HOST:PORT
  std::string model;                          // required
  std::string endpoint = "/v1/completions";   // or "/v1/chat/completions"
  std::string api_key;                        // Authorization: Bearer, when set
  // The dataset (gen_dataset.h DatasetOptions).
  std::string dataset = "random";  // "random" | "sharegpt-like" | "file"
  std::string prompts_file;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0;
  int64_t vocab_size = 32000;
  int64_t num_prompts = 0;  // 0: 1000, or every line of a prompts file
  uint64_t seed = 0;
  double temperature = 0;
  // Arrivals and load.
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s
  double burstiness = 1;
  int max_concurrency = 0;           // 0 = unlimited
  double request_timeout_s = 21600;  // per request, from its send
  std::vector<std::string> goodput;  // "ttft:MS", "tpot:MS", "e2el:MS"
  // Outputs.
  std::string json_file;
  std::string html_file;
  std::string command_line;
  bool quiet = false;  // no progress lines on stderr
};

// Runs the benchmark; prints the table to `out`, progress to stderr. Errors name the problem: a
// bad flag value, an unreadable prompts file, a server that cannot be reached, every request
// failing (with the first error). Individual failures are counted in the report, not errors.
Status RunGenBench(const GenOptions& options, std::FILE* out);

}  // namespace kiln::bench
