// SPDX-License-Identifier: Apache-2.0
#pragma once
// `kiln bench`'s driver: reads the model from the server, builds the inputs, then for each load
// level of the sweep runs the load engine through warm-up and measurement windows until stable,
// and writes the table / CSV / JSON / HTML outputs. tools/kiln/bench_command.cc maps the command
// line onto BenchOptions.
//
// NOTE (windows): windows are contiguous slices of the steady clock after warm-up; a request
// belongs to the window its completion falls in (as perf_analyzer counts). The server's
// statistics are read at every window boundary, the process's CPU time too, so each reported
// number covers exactly the merged (last 3, or fewer when the run was short) windows.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/request_bytes.h"

namespace kiln::bench {

struct BenchOptions {
  std::string model;
  std::string version;            // "" = latest
  std::string url;                // "" = localhost:8000 (http) / localhost:8001 (grpc)
  std::string protocol = "http";  // "http" | "grpc"
  bool http_json = false;         // HTTP tensors as JSON instead of the binary extension
  int batch_size = 1;
  std::vector<std::string> shapes;  // "NAME:d1,d2"
  std::string input_data;           // "", "random", "zero", a .json file or a .npy directory
  int string_length = 16;
  std::string concurrency_range;   // closed loop
  std::string request_rate_range;  // open loop
  std::string distribution = "constant";
  int measurement_interval_ms = 5000;
  int warmup_ms = 1000;
  double stability_pct = 10;
  int max_trials = 10;
  double percentile = -1;     // -1: stabilise on the average latency
  int threads = 0;            // 0: min(slots, max(1, cores / 2))
  int max_connections = 256;  // open loop: connections / calls in flight at most
  uint64_t seed = 1;
  std::vector<RequestParameter> request_parameters;  // sent with every request
  std::string csv_file;
  std::string json_file;
  std::string report_file;
  std::string command_line;
  bool quiet = false;  // no progress lines
};

// Runs the whole sweep; prints the table to `out`, progress to stderr. An error (unreachable
// server, unknown model, bad flag value, every request failing at a level) names the problem.
Status RunBench(const BenchOptions& options, std::FILE* out);

}  // namespace kiln::bench
