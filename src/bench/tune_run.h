// SPDX-License-Identifier: Apache-2.0
#pragma once
// `kiln tune`'s driver against a live server: reads the model's config (GET
// /v2/models/{m}/config), then for each config the search (tune.h) asks for, loads the model with
// that config through the repository API (POST /v2/repository/models/{m}/load with
// {"parameters": {"config": "<json>"}}; the server must run with --model-control-mode=explicit),
// measures it at concurrency 1, 2, 4, ... with `kiln bench`'s runner (RunBench, one level per
// call) until the p99 passes the budget or the throughput stops growing, and in the end writes
// results.csv, frontier.html and the winner's config.pbtxt, prints the table, and reloads the
// model from its repository (or, with `keep`, with the winning config).
// tools/kiln/tune_command.cc maps the command line onto TuneOptions.
//
// Thread safety: RunTune runs on the calling thread (the load engine has its own threads).

#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/tune.h"

namespace kiln::bench {

struct TuneOptions {
  std::string model;
  std::string url = "localhost:8000";  // HTTP: the repository API, the config and HTTP load
  std::string protocol = "http";       // the load's protocol: "http" | "grpc"
  std::string grpc_url;                // -i grpc: "" = the host of `url`, port 8001
  double latency_budget_ms = 0;        // p99
  std::string output_dir;              // "" = tune-<model>-<UTC time>
  TuneSpace space;
  int max_configs = 16;
  int max_passes = 2;
  int max_concurrency = 64;
  double min_gain = 0.05;  // a level must raise the throughput by this fraction to go on
  double duration_s = 2;   // measured per point, in 3 windows
  int warmup_ms = 500;     // load before each point's windows, not measured
  int batch_size = 1;
  std::vector<std::string> shapes;  // as kiln bench --shape
  std::string input_data;           // as kiln bench --input-data
  bool keep = false;                // leave the winning config loaded instead of reloading
  bool quiet = false;               // no progress lines
};

// Runs the whole tuning; the table goes to `out`, progress lines to stderr. `config_prototype`
// is an empty message of the server's model config type (inference.ModelConfig), the type the
// config is read into, edited and written out as. Errors name the problem: an unreachable
// server, an unknown or unloaded model, a server not in explicit model control mode, no point
// meeting the budget (FailedPrecondition naming the closest point, after the outputs are
// written), a failed restore.
Status RunTune(const TuneOptions& options, const google::protobuf::Message& config_prototype,
               std::FILE* out);

}  // namespace kiln::bench
