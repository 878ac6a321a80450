// SPDX-License-Identifier: Apache-2.0
// `kiln bench`: the load generator. Flags follow perf_analyzer's where the same setting exists
// (so existing scripts keep working); kiln's own additions are --json, --report, --http-json,
// --warmup-interval, --max-connections, --seed and the xN factor step in ranges. Every flag is
// documented in docs/bench.md. The work is done by src/bench (RunBench).
//
// `kiln bench generate`: the generation mode, a streaming load generator for OpenAI-compatible
// endpoints (/v1/completions, /v1/chat/completions) with `vllm bench serve`'s flags and metrics
// (TTFT, TPOT, ITL, E2E, goodput). A subcommand rather than a flag because none of the KServe
// mode's flags apply to it and its own would crowd that mode's help. src/bench/gen_runner.h.

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "bench/gen_runner.h"
#include "bench/runner.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

// The command line as a shell would take it back (arguments with special characters quoted), for
// the reports.
std::string QuotedCommandLine(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) line += ' ';
    std::string a = argv[i];
    bool plain = !a.empty() && a.find_first_of(" \t\"'$\\`*?") == std::string::npos;
    line += plain ? a : "'" + a + "'";
  }
  return line;
}

// The load and how it is measured: levels, arrivals, windows, stability, client threads, seed.
void AddLoadFlags(CLI::App& cmd, bench::BenchOptions& opt) {
  cmd.add_option("--concurrency-range", opt.concurrency_range,
                 "Closed loop START[:END[:STEP]]; STEP may be xN (factor), e.g. 1:64:x2 "
                 "(default 1)");
  cmd.add_option("--request-rate-range", opt.request_rate_range,
                 "Open loop, requests/s START[:END[:STEP]]; STEP may be xN");
  cmd.add_option("--request-distribution", opt.distribution,
                 "Open-loop arrivals: constant or poisson")
      ->check(CLI::IsMember({"constant", "poisson"}))
      ->capture_default_str();
  cmd.add_option("-p,--measurement-interval", opt.measurement_interval_ms, "Measurement window, ms")
      ->capture_default_str();
  cmd.add_option("--warmup-interval", opt.warmup_ms,
                 "Load before the first window at each level, not measured, ms")
      ->capture_default_str();
  cmd.add_option("-s,--stability-percentage", opt.stability_pct,
                 "Stable when throughput and the stabilising latency of the last 3 windows are "
                 "within this %")
      ->capture_default_str();
  cmd.add_option("-r,--max-trials", opt.max_trials, "Most windows per level")
      ->capture_default_str();
  cmd.add_option("--percentile", opt.percentile,
                 "Stabilise on this latency percentile (default: the average)");
  cmd.add_option("--max-threads", opt.threads,
                 "Client event-loop threads (default: min(slots, max(1, cores/2)))");
  cmd.add_option("--max-connections", opt.max_connections,
                 "Open loop: most connections (HTTP) or calls (gRPC) in flight")
      ->capture_default_str();
  cmd.add_option("--seed", opt.seed, "Seed of the random inputs and Poisson arrivals")
      ->capture_default_str();
}

// "inf" or a number > 0, for --request-rate.
bool ParseRate(const std::string& text, double& rate) {
  if (text == "inf" || text == "infinity") {
    rate = std::numeric_limits<double>::infinity();
    return true;
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), rate);
  return ec == std::errc() && ptr == text.data() + text.size() && rate > 0 && std::isfinite(rate);
}

// `kiln bench generate`'s flags (vllm bench serve's names where it has the setting).
void AddGenerateFlags(CLI::App& gen, bench::GenOptions& g, std::string& rate_text) {
  gen.add_option("-u,--url", g.url, "Server http://HOST:PORT")->capture_default_str();
  gen.add_option("-m,--model", g.model, "Model name sent in every request")->required();
  gen.add_option("--endpoint", g.endpoint, "API path")
      ->check(CLI::IsMember({"/v1/completions", "/v1/chat/completions"}))
      ->capture_default_str();
  gen.add_option("--api-key", g.api_key,
                 "Sent as Authorization: Bearer KEY (default: $OPENAI_API_KEY when set)");
  gen.add_option("--dataset", g.dataset, "random, sharegpt-like or file")
      ->check(CLI::IsMember({"random", "sharegpt-like", "file"}))
      ->capture_default_str();
  gen.add_option("--prompts", g.prompts_file,
                 "--dataset file: one prompt per line, or JSONL {\"prompt\": ...} / "
                 "{\"messages\": [...]} with optional \"max_tokens\"");
  gen.add_option("--input-len", g.input_len, "random: input tokens per request")
      ->capture_default_str();
  gen.add_option("--output-len", g.output_len,
                 "random: output tokens per request (max_tokens); file: max_tokens when a line "
                 "gives none")
      ->capture_default_str();
  gen.add_option("--range-ratio", g.range_ratio,
                 "random: lengths uniform in [len*(1-R), len*(1+R)], 0 <= R < 1")
      ->capture_default_str();
  gen.add_option("--vocab-size", g.vocab_size,
                 "Token ids of random prompts are drawn from [100, V)")
      ->capture_default_str();
  gen.add_option("--num-prompts", g.num_prompts,
                 "Requests to send (default 1000; file: every prompt once)");
  gen.add_option("--seed", g.seed, "Seed of the prompts, lengths and arrivals")
      ->capture_default_str();
  gen.add_option("--temperature", g.temperature, "Sampling temperature of every request")
      ->capture_default_str();
  gen.add_option("--request-rate", rate_text,
                 "Requests/s with Poisson (or gamma) arrivals; inf sends all at once")
      ->capture_default_str();
  gen.add_option("--burstiness", g.burstiness,
                 "Gamma shape of the inter-arrival times: 1 = Poisson, < 1 burstier, > 1 steadier")
      ->capture_default_str();
  gen.add_option("--max-concurrency", g.max_concurrency,
                 "Requests in flight at most (0 = unlimited)")
      ->capture_default_str();
  gen.add_option("--request-timeout", g.request_timeout_s,
                 "Seconds a request may take from its send before it counts as failed")
      ->capture_default_str();
  gen.add_option("--goodput", g.goodput,
                 "SLOs for goodput, any of ttft:MS tpot:MS e2el:MS (requests/s meeting all)");
  gen.add_option("--json", g.json_file, "JSON file (vllm bench serve's keys, plus per request)");
  gen.add_option("--html", g.html_file, "Self-contained HTML report");
  gen.add_flag("-q,--quiet", g.quiet, "No progress lines on stderr");
}
}  // namespace

CommandMain AddBenchCommand(CLI::App& app, int argc, char** argv) {
  auto opt = std::make_shared<bench::BenchOptions>();
  opt->command_line = QuotedCommandLine(argc, argv);
  auto input_format = std::make_shared<std::string>("binary");
  auto output_format = std::make_shared<std::string>("binary");
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Load generator for any KServe v2 server (HTTP JSON/binary or gRPC): latency "
      "percentiles and throughput under a concurrency or request-rate sweep");
  cmd->add_option("-m,--model", opt->model, "Model name (required)");
  cmd->add_option("-x,--model-version", opt->version, "Model version (default: latest)");
  cmd->add_option("-u,--url", opt->url,
                  "Server HOST:PORT (default localhost:8000 for http, localhost:8001 for grpc)");
  cmd->add_option("-i,--protocol", opt->protocol, "http or grpc")
      ->check(CLI::IsMember({"http", "grpc"}))
      ->capture_default_str();
  cmd->add_flag("--http-json", opt->http_json,
                "HTTP: send inputs and receive outputs as JSON instead of the binary tensor "
                "extension");
  cmd->add_option("--input-tensor-format", *input_format,
                  "binary or json (perf_analyzer spelling; json = --http-json)")
      ->check(CLI::IsMember({"binary", "json"}));
  cmd->add_option("--output-tensor-format", *output_format,
                  "binary or json (perf_analyzer spelling; json = --http-json)")
      ->check(CLI::IsMember({"binary", "json"}));
  cmd->add_option("-b,--batch-size", opt->batch_size, "Batch size of each request")
      ->capture_default_str();
  cmd->add_option("--shape", opt->shapes,
                  "NAME:d1,d2,... shape of an input without the batch dim (for variable dims; "
                  "repeatable)");
  cmd->add_option("--input-data", opt->input_data,
                  "random (default), zero, a perf_analyzer JSON file, or a directory of "
                  "<input>.npy files");
  cmd->add_option("--string-length", opt->string_length, "Length of random BYTES elements")
      ->capture_default_str();
  auto request_parameters = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--request-parameter", *request_parameters,
                  "name:value:type, a parameter every request carries (type string, int, uint, "
                  "bool or double; repeatable), e.g. precision:int8:string");
  AddLoadFlags(*cmd, *opt);
  cmd->add_option("-f,--latency-report-file", opt->csv_file, "CSV file (perf_analyzer columns)");
  cmd->add_option("--json", opt->json_file, "JSON file: one object per measured point");
  cmd->add_option("--report", opt->report_file,
                  "Self-contained HTML report (latency-throughput curve, stage breakdown)");
  cmd->add_flag("-q,--quiet", opt->quiet, "No progress lines on stderr");
  auto async_flag = std::make_shared<bool>(false);
  cmd->add_flag("-a,--async", *async_flag,
                "Accepted for perf_analyzer scripts; kiln bench is always async");

  auto gen_opt = std::make_shared<bench::GenOptions>();
  gen_opt->command_line = opt->command_line;
  auto rate_text = std::make_shared<std::string>("inf");
  CLI::App* gen = cmd->add_subcommand(
      "generate",
      "Generation mode: streaming load against an OpenAI-compatible endpoint (like vllm bench "
      "serve): TTFT, TPOT, ITL, E2E latency, token throughput and goodput");
  AddGenerateFlags(*gen, *gen_opt, *rate_text);
  return [opt, input_format, output_format, async_flag, gen, gen_opt, rate_text,
          request_parameters]() {
    if (gen->parsed()) {
      if (!ParseRate(*rate_text, gen_opt->request_rate)) {
        std::fprintf(stderr,
                     "kiln bench generate: --request-rate '%s': expected a number > 0 or inf\n",
                     rate_text->c_str());
        return 1;
      }
      if (gen_opt->api_key.empty()) {
        if (const char* key = std::getenv("OPENAI_API_KEY")) gen_opt->api_key = key;
      }
      kiln::Status s = bench::RunGenBench(*gen_opt, stdout);
      if (!s.ok()) {
        std::fprintf(stderr, "kiln bench generate: %s\n", s.message().c_str());
        return 1;
      }
      return 0;
    }
    if (opt->model.empty()) {
      std::fprintf(stderr,
                   "kiln bench: --model is required (for OpenAI-compatible servers: kiln bench "
                   "generate)\n");
      return 2;
    }
    if (*input_format == "json" || *output_format == "json") opt->http_json = true;
    for (const std::string& spec : *request_parameters) {
      kiln::Result<bench::RequestParameter> p = bench::ParseRequestParameter(spec);
      if (!p.ok()) {
        std::fprintf(stderr, "kiln bench: %s\n", p.status().message().c_str());
        return 2;
      }
      opt->request_parameters.push_back(std::move(p).value());
    }
    kiln::Status s = bench::RunBench(*opt, stdout);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln bench: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
