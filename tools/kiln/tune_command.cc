// SPDX-License-Identifier: Apache-2.0
// `kiln tune`: finds the model config with the highest throughput whose p99 latency meets
// --latency-budget-ms on a live server in explicit model control mode, sweeping instances,
// threads per instance, max batch size, preferred batch sizes, max queue delay and precision. Every
// flag is documented in docs/tune.md. The work is done by src/bench (RunTune); this file maps flags
// onto TuneOptions and supplies the server's config type, inference.ModelConfig.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/tune_run.h"
#include "repo/model_config.pb.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

struct TuneFlags {
  bench::TuneOptions options;
  std::string instances;
  std::string threads;
  std::string max_batch_size;
  std::string max_queue_delay_us;
  std::vector<std::string> preferred;
  std::string precision;
};

Status ToIntList(const std::string& text, const char* flag, bool allow_zero,
                 std::vector<int>& out) {
  if (text.empty()) return Status::OK();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> values, bench::ParseIntList(text, flag, allow_zero));
  for (int64_t v : values) {
    if (v > std::numeric_limits<int32_t>::max()) {
      return Status::InvalidArgument(std::string(flag) + " '" + text + "': a value is too large");
    }
    out.push_back(static_cast<int>(v));
  }
  return Status::OK();
}

// The search space from the flags.
Status FillSpace(const TuneFlags& f, bench::TuneSpace& space) {
  KILN_RETURN_IF_ERROR(ToIntList(f.instances, "--instances", false, space.instances));
  KILN_RETURN_IF_ERROR(ToIntList(f.threads, "--threads", true, space.threads));
  KILN_RETURN_IF_ERROR(
      ToIntList(f.max_batch_size, "--max-batch-size", false, space.max_batch_size));
  if (!f.max_queue_delay_us.empty()) {
    KILN_ASSIGN_OR_RETURN(space.max_queue_delay_us,
                          bench::ParseIntList(f.max_queue_delay_us, "--max-queue-delay-us", true));
  }
  for (const std::string& choice : f.preferred) {
    KILN_ASSIGN_OR_RETURN(std::vector<int> sizes, bench::ParsePreferredChoice(choice));
    space.preferred_batch_sizes.push_back(std::move(sizes));
  }
  if (!f.precision.empty()) {
    size_t pos = 0;
    while (pos <= f.precision.size()) {
      size_t end = f.precision.find(',', pos);
      if (end == std::string::npos) end = f.precision.size();
      std::string p = f.precision.substr(pos, end - pos);
      if (p != "default" && p != "fp32" && p != "fp16" && p != "bf16" && p != "int8") {
        return Status::InvalidArgument("--precision '" + f.precision +
                                       "': expected a list of default, fp32, fp16, bf16, int8");
      }
      space.precision.push_back(p == "default" ? "" : p);
      pos = end + 1;
    }
  }
  return Status::OK();
}

}  // namespace

CommandMain AddTuneCommand(CLI::App& app) {
  auto f = std::make_shared<TuneFlags>();
  bench::TuneOptions& o = f->options;
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Find the model config with the highest throughput whose p99 latency meets a budget, on a "
      "live server in explicit model control mode (docs/tune.md)");
  cmd->add_option("-m,--model", o.model, "Model to tune (loaded on the server)")->required();
  cmd->add_option("-u,--url", o.url,
                  "Server HTTP HOST:PORT (http:// accepted): repository API, config, HTTP load")
      ->capture_default_str();
  cmd->add_option("--latency-budget-ms", o.latency_budget_ms,
                  "p99 latency budget in milliseconds (client-side)")
      ->required();
  cmd->add_option("-i,--protocol", o.protocol, "Protocol of the load: http or grpc")
      ->check(CLI::IsMember({"http", "grpc"}))
      ->capture_default_str();
  cmd->add_option("--grpc-url", o.grpc_url,
                  "gRPC HOST:PORT for -i grpc (default: --url's host:8001)");
  cmd->add_option("--output-dir", o.output_dir,
                  "Where results.csv, frontier.html and config.pbtxt go (default "
                  "tune-MODEL-YYYYMMDD-HHMMSS)");
  cmd->add_option("--instances", f->instances, "Instance counts to try, e.g. 1,2");
  cmd->add_option("--threads", f->threads,
                  "Threads per instance to try (the config parameter kiln.intra_op_threads; 0 = "
                  "the server's --intra-op-threads), e.g. 0,1,2");
  cmd->add_option("--max-batch-size", f->max_batch_size, "max_batch_size values, e.g. 1,4,8,16");
  cmd->add_option("--max-queue-delay-us", f->max_queue_delay_us,
                  "dynamic_batching max_queue_delay_microseconds values, e.g. 0,500,2000");
  cmd->add_option("--preferred-batch-size", f->preferred,
                  "One preferred_batch_size choice per flag: 'none' or sizes like 4,8 "
                  "(repeatable; sizes above the candidate's max_batch_size are dropped)");
  cmd->add_option("--precision", f->precision,
                  "optimization.precision values: default, fp32, fp16, bf16, int8 (int8 only with "
                  "a calibration_dir)");
  cmd->add_option("--max-configs", o.max_configs, "Most configs to measure, the start included")
      ->capture_default_str();
  cmd->add_option("--max-passes", o.max_passes, "Most coordinate-descent passes")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", o.max_concurrency,
                  "Highest concurrency of the ramp 1, 2, 4, ...")
      ->capture_default_str();
  cmd->add_option("--min-gain", o.min_gain,
                  "A level must raise the throughput by this fraction for the ramp to go on")
      ->capture_default_str();
  cmd->add_option("--duration-s", o.duration_s, "Measured seconds per point (3 windows)")
      ->capture_default_str();
  cmd->add_option("--warmup-ms", o.warmup_ms, "Unmeasured load before each point, ms")
      ->capture_default_str();
  cmd->add_option("-b,--batch-size", o.batch_size, "Batch size of each request")
      ->capture_default_str();
  cmd->add_option("--shape", o.shapes,
                  "NAME:d1,d2,... input shape without the batch dim, as kiln bench (repeatable)");
  cmd->add_option("--input-data", o.input_data,
                  "random (default), zero, a perf_analyzer JSON file or a directory of "
                  "<input>.npy files, as kiln bench");
  cmd->add_flag("--keep", o.keep,
                "Leave the winning config loaded (default: reload the model from its repository)");
  cmd->add_flag("-q,--quiet", o.quiet, "No progress lines on stderr");
  return [f]() {
    Status s = FillSpace(*f, f->options.space);
    if (s.ok()) {
      inference::ModelConfig prototype;
      s = bench::RunTune(f->options, prototype, stdout);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "kiln tune: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
