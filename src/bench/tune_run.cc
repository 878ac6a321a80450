// SPDX-License-Identifier: Apache-2.0
#include "bench/tune_run.h"

#include <fmt/format.h>
#include <google/protobuf/message.h>
#include <simdjson.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "bench/net.h"
#include "bench/runner.h"
#include "bench/stamp.h"
#include "bench/writers.h"

namespace kiln::bench {
namespace {

using google::protobuf::Message;

// The "error" string of a JSON error body, else the start of the body.
std::string ServerMessage(const HttpReply& r) {
  simdjson::dom::parser parser;
  std::string_view text;
  if (parser.parse(r.body).get_object()["error"].get(text) == simdjson::SUCCESS) {
    return std::string(text);
  }
  return r.body.size() > 300 ? r.body.substr(0, 300) : r.body;
}

// The host of "http://host:port" / "host:port" with `port` in place of its port.
std::string WithPort(const std::string& url, int port) {
  std::string host = url;
  if (host.rfind("http://", 0) == 0) host = host.substr(7);
  const size_t colon = host.rfind(':');
  if (colon != std::string::npos && host.find(']', colon) == std::string::npos) {
    host = host.substr(0, colon);
  }
  return fmt::format("{}:{}", host, port);
}

// "tune-<model>-20261205-105929".
std::string DefaultOutputDir(const std::string& model) {
  std::string stamp;
  for (char c : UtcNow()) {
    if (c == 'T') {
      stamp += '-';
    } else if (c != '-' && c != ':' && c != 'Z') {
      stamp += c;
    }
  }
  return fmt::format("tune-{}-{}", model, stamp);
}

// The single point of a one-level `kiln bench --json` file.
Result<TunePoint> ReadBenchPoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("no bench result in {}", path));
  std::stringstream text;
  text << in.rdbuf();
  simdjson::dom::parser parser;
  simdjson::dom::array points;
  if (parser.parse(text.str())["points"].get(points) != simdjson::SUCCESS || points.size() == 0) {
    return Status::Internal(fmt::format("{}: no \"points\" in the bench result", path));
  }
  simdjson::dom::element e = points.at(0);
  TunePoint p;
  int64_t concurrency = 0;
  uint64_t count = 0, errors = 0;
  if (e["concurrency"].get(concurrency) != simdjson::SUCCESS ||
      e["throughput"].get(p.throughput) != simdjson::SUCCESS ||
      e["p50_us"].get(p.p50_us) != simdjson::SUCCESS ||
      e["p99_us"].get(p.p99_us) != simdjson::SUCCESS ||
      e["request_count"].get(count) != simdjson::SUCCESS ||
      e["errors"].get(errors) != simdjson::SUCCESS) {
    return Status::Internal(fmt::format("{}: a bench point lacks a field kiln tune reads", path));
  }
  p.concurrency = static_cast<int>(concurrency);
  p.requests = count;
  p.errors = errors;
  std::string_view first;
  if (e["first_error"].get(first) == simdjson::SUCCESS) p.first_error = first;
  return p;
}

class Tuner {
 public:
  Tuner(const TuneOptions& o, const Message& prototype, std::string dir)
      : o_(o), prototype_(prototype), dir_(std::move(dir)) {}

  Status Start() {
    KILN_ASSIGN_OR_RETURN(ep_, ResolveEndpoint(o_.url));
    KILN_ASSIGN_OR_RETURN(HttpReply r,
                          HttpExchange(ep_, "GET", "/v2/models/" + o_.model + "/config"));
    if (r.status != 200) {
      return Status::NotFound(fmt::format(
          "model '{}' on {}: HTTP {}: {} (kiln tune starts from the config of a loaded model)",
          o_.model, ep_.ToString(), r.status, ServerMessage(r)));
    }
    start_config_.reset(prototype_.New());
    KILN_RETURN_IF_ERROR(ParseConfigJson(r.body, start_config_.get()));
    start_ = SettingsFromConfig(*start_config_);
    return Status::OK();
  }

  const TuneSettings& start() const { return start_; }
  const Message& start_config() const { return *start_config_; }

  // The model's config with `s` applied, as the load request's JSON.
  Result<std::unique_ptr<Message>> ConfigWith(const TuneSettings& s) {
    std::unique_ptr<Message> config(start_config_->New());
    config->CopyFrom(*start_config_);
    KILN_RETURN_IF_ERROR(ApplySettings(s, config.get()));
    return config;
  }

  // Loads the model with `config` (nullptr: from its repository) and waits until it is ready.
  // `mode_error` is set when the server refuses explicit loads.
  Status Load(const Message* config, bool* mode_error) {
    std::string body = "{}";
    if (config != nullptr) {
      KILN_ASSIGN_OR_RETURN(std::string json, ConfigJson(*config));
      body = "{\"parameters\":{\"config\":" + JsonQuote(json) + "}}";
    }
    KILN_ASSIGN_OR_RETURN(
        HttpReply r, HttpExchange(ep_, "POST", "/v2/repository/models/" + o_.model + "/load", body,
                                  std::chrono::minutes(10)));
    if (r.status != 200) {
      const std::string message = ServerMessage(r);
      if (mode_error != nullptr) {
        *mode_error = r.status == 503 || message.find("not allowed") != std::string::npos;
      }
      return Status::FailedPrecondition(
          fmt::format("load answered HTTP {}: {}", r.status, message));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (true) {
      KILN_ASSIGN_OR_RETURN(HttpReply ready,
                            HttpExchange(ep_, "GET", "/v2/models/" + o_.model + "/ready"));
      if (ready.status == 200) return Status::OK();
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::DeadlineExceeded(fmt::format(
            "model '{}' not ready 60 s after its load (HTTP {})", o_.model, ready.status));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // One load level, measured by kiln bench's runner.
  Result<TunePoint> Measure(int concurrency) {
    BenchOptions b;
    b.model = o_.model;
    b.protocol = o_.protocol;
    b.url = o_.protocol == "grpc" ? (o_.grpc_url.empty() ? WithPort(o_.url, 8001) : o_.grpc_url)
                                  : o_.url;
    b.batch_size = o_.batch_size;
    b.shapes = o_.shapes;
    b.input_data = o_.input_data;
    b.concurrency_range = std::to_string(concurrency);
    b.measurement_interval_ms =
        std::max(20, static_cast<int>(std::lround(o_.duration_s * 1000 / 3)));
    b.max_trials = 3;
    b.warmup_ms = o_.warmup_ms;
    b.percentile = 99;
    b.quiet = true;
    b.json_file = (std::filesystem::path(dir_) / ".point.json").string();
    std::error_code ec;
    std::filesystem::remove(b.json_file, ec);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> sink(std::fopen("/dev/null", "w"),
                                                         &std::fclose);
    if (!sink) return Status::Internal("cannot open /dev/null");
    Status run = RunBench(b, sink.get());
    Result<TunePoint> point = ReadBenchPoint(b.json_file);
    std::filesystem::remove(b.json_file, ec);
    // A level where every request failed still has its point; anything else is the run's error.
    if (!run.ok() && !point.ok()) return run;
    return point;
  }

 private:
  const TuneOptions& o_;
  const Message& prototype_;
  const std::string dir_;
  Endpoint ep_;
  std::unique_ptr<Message> start_config_;
  TuneSettings start_;
};

Status CheckOptions(const TuneOptions& o) {
  if (o.model.empty()) return Status::InvalidArgument("--model is required");
  if (!(o.latency_budget_ms > 0) || !std::isfinite(o.latency_budget_ms)) {
    return Status::InvalidArgument("--latency-budget-ms must be a number > 0");
  }
  if (o.protocol != "http" && o.protocol != "grpc") {
    return Status::InvalidArgument(
        fmt::format("--protocol '{}': expected http or grpc", o.protocol));
  }
  if (!(o.duration_s > 0) || o.warmup_ms < 0 || o.max_configs < 1 || o.max_passes < 1 ||
      o.max_concurrency < 1 || o.batch_size < 1 || o.min_gain < 0) {
    return Status::InvalidArgument(
        "--duration-s, --max-configs, --max-passes, --max-concurrency and --batch-size must be "
        "positive, --warmup-ms and --min-gain >= 0");
  }
  return Status::OK();
}

// The space with what the model cannot take removed, one note per removal.
TuneSpace Feasible(TuneSpace space, const TuneSettings& start, const Message& config,
                   int batch_size, std::vector<std::string>& notes) {
  if (start.max_batch_size == 0 &&
      (!space.max_batch_size.empty() || !space.max_queue_delay_us.empty() ||
       !space.preferred_batch_sizes.empty())) {
    notes.push_back(
        "the model has no batch dimension (max_batch_size 0): max_batch_size, max_queue_delay_us "
        "and preferred_batch_size are not swept");
    space.max_batch_size.clear();
    space.max_queue_delay_us.clear();
    space.preferred_batch_sizes.clear();
  }
  if (std::erase_if(space.max_batch_size, [&](int b) { return b < batch_size; }) > 0) {
    notes.push_back(
        fmt::format("max_batch_size values below the request batch size {} skipped", batch_size));
  }
  if (CalibrationDir(config).empty() &&
      std::erase_if(space.precision, [](const std::string& p) { return p == "int8"; }) > 0) {
    notes.push_back(
        "precision int8 skipped: the model's config has no optimization.calibration_dir to "
        "calibrate on");
  }
  return space;
}

std::string PointLine(const TunePoint& p, double budget_us) {
  std::string line = fmt::format("concurrency {}: {:.1f} infer/s, p50 {:.3f} ms, p99 {:.3f} ms",
                                 p.concurrency, p.throughput, p.p50_us / 1000, p.p99_us / 1000);
  if (p.errors > 0) {
    line += fmt::format(", {} errors{}", p.errors,
                        p.first_error.empty() ? "" : " (first: " + p.first_error + ")");
  }
  return line + (MeetsBudget(p, budget_us) ? " (meets budget)" : " (over budget)");
}

}  // namespace

Status RunTune(const TuneOptions& o, const Message& config_prototype, std::FILE* out) {
  KILN_RETURN_IF_ERROR(CheckOptions(o));
  const double budget_us = o.latency_budget_ms * 1000;
  const std::string dir = o.output_dir.empty() ? DefaultOutputDir(o.model) : o.output_dir;
  Tuner tuner(o, config_prototype, dir);
  KILN_RETURN_IF_ERROR(tuner.Start());
  std::error_code ec;
  const bool dir_existed = std::filesystem::is_directory(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument(fmt::format("--output-dir {}: {}", dir, ec.message()));
  std::vector<std::string> notes;
  TuneSpace space = Feasible(o.space, tuner.start(), tuner.start_config(), o.batch_size, notes);
  for (const std::string& n : notes) std::fprintf(stderr, "kiln tune: note: %s\n", n.c_str());

  CoordinateSearch search(space, tuner.start(), budget_us, o.max_configs, o.max_passes);
  bool loaded = false;  // a candidate config was loaded: the model must be restored
  Status failure;
  while (std::optional<TuneSettings> s = search.Next()) {
    const size_t index = search.results().size();
    TuneConfigResult result;
    result.settings = *s;
    if (!o.quiet) {
      std::string why = search.dimension()
                            ? fmt::format("varying {}", DimensionName(*search.dimension()))
                            : std::string("starting config");
      std::fprintf(stderr, "kiln tune: config #%zu (%s): %s\n", index, why.c_str(),
                   s->Label().c_str());
    }
    Result<std::unique_ptr<Message>> config = tuner.ConfigWith(*s);
    bool mode_error = false;
    Status load = config.ok() ? tuner.Load(config->get(), &mode_error) : config.status();
    if (!load.ok()) {
      if (mode_error) {
        failure = Status::FailedPrecondition(fmt::format(
            "the server refused to load '{}' ({}): kiln tune loads every candidate config "
            "through the repository API, so the server must run with "
            "--model-control-mode=explicit",
            o.model, load.message()));
        break;
      }
      result.error = std::string(load.message());
      if (!o.quiet) std::fprintf(stderr, "kiln tune:   load failed: %s\n", result.error.c_str());
      search.Report(std::move(result));
      continue;
    }
    loaded = true;
    for (int c = NextConcurrency(result.points, budget_us, o.max_concurrency, o.min_gain); c > 0;
         c = NextConcurrency(result.points, budget_us, o.max_concurrency, o.min_gain)) {
      Result<TunePoint> p = tuner.Measure(c);
      if (!p.ok()) {
        failure =
            p.status().WithContext(fmt::format("measuring config #{} at concurrency {}", index, c));
        break;
      }
      if (!o.quiet) {
        std::fprintf(stderr, "kiln tune:   %s\n", PointLine(*p, budget_us).c_str());
      }
      result.points.push_back(std::move(p).value());
    }
    search.Report(std::move(result));
    if (!failure.ok()) break;
  }

  const std::vector<TuneConfigResult>& results = search.results();
  const std::optional<PointRef> winner = PickWinner(results, budget_us);
  if (results.empty() && !dir_existed) std::filesystem::remove(dir, ec);  // nothing to write
  if (!results.empty()) {
    std::fputs(FormatTuneTable(results, budget_us, winner).c_str(), out);
    std::fflush(out);
    const std::string title =
        fmt::format("kiln tune: {} (p99 budget {:g} ms)", o.model, o.latency_budget_ms);
    KILN_RETURN_IF_ERROR(WriteFile((std::filesystem::path(dir) / "results.csv").string(),
                                   FormatTuneCsv(results, budget_us, winner)));
    KILN_RETURN_IF_ERROR(WriteFile((std::filesystem::path(dir) / "frontier.html").string(),
                                   FormatTuneHtml(results, budget_us, winner, title)));
  }
  std::unique_ptr<Message> winning;
  if (winner) {
    const TuneConfigResult& r = results[winner->config];
    const TunePoint& p = r.points[winner->point];
    KILN_ASSIGN_OR_RETURN(winning, tuner.ConfigWith(r.settings));
    const std::string header[] = {
        fmt::format("Written by kiln tune at {}: config #{} of {} measured.", UtcNow(),
                    winner->config, results.size()),
        fmt::format("{}", r.settings.Label()),
        fmt::format("{:.1f} infer/s at concurrency {}, p50 {:.3f} ms, p99 {:.3f} ms <= {:g} ms.",
                    p.throughput, p.concurrency, p.p50_us / 1000, p.p99_us / 1000,
                    o.latency_budget_ms)};
    KILN_RETURN_IF_ERROR(WriteFile((std::filesystem::path(dir) / "config.pbtxt").string(),
                                   ConfigPbtxt(*winning, header)));
    std::fprintf(out, "winner: #%zu %s at concurrency %d: %.1f infer/s, p99 %.3f ms\n",
                 winner->config, r.settings.Label().c_str(), p.concurrency, p.throughput,
                 p.p99_us / 1000);
  }
  if (!results.empty()) std::fprintf(out, "outputs: %s/\n", dir.c_str());

  if (loaded) {
    const bool keep = o.keep && winning != nullptr;
    Status restore = tuner.Load(keep ? winning.get() : nullptr, nullptr);
    if (!restore.ok()) {
      return restore.WithContext(keep ? "loading the winning config"
                                      : "restoring the model's repository config");
    }
    if (!o.quiet) {
      std::fprintf(stderr, "kiln tune: %s\n",
                   keep ? "the winning config stays loaded (--keep)"
                        : "the model was reloaded from its repository");
    }
  }
  if (!failure.ok()) return failure;
  if (!winner) {
    std::optional<PointRef> closest = ClosestPoint(results);
    if (!closest) {
      return Status::FailedPrecondition(
          fmt::format("no point met the p99 budget of {:g} ms: no config served a request",
                      o.latency_budget_ms));
    }
    const TuneConfigResult& r = results[closest->config];
    const TunePoint& p = r.points[closest->point];
    return Status::FailedPrecondition(fmt::format(
        "no point met the p99 budget of {:g} ms; the closest: config #{} ({}) at concurrency {}: "
        "p99 {:.3f} ms, {:.1f} infer/s",
        o.latency_budget_ms, closest->config, r.settings.Label(), p.concurrency, p.p99_us / 1000,
        p.throughput));
  }
  return Status::OK();
}

}  // namespace kiln::bench
