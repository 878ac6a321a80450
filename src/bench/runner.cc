// SPDX-License-Identifier: Apache-2.0
#include "bench/runner.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "bench/control.h"
#include "bench/http_load.h"
#include "bench/inputs.h"
#include "bench/net.h"
#include "bench/point.h"
#include "bench/range.h"
#include "bench/request_bytes.h"
#include "bench/stamp.h"
#include "bench/stats.h"
#include "bench/writers.h"
#ifdef KILN_HAVE_GRPC
#include "bench/grpc_load.h"
#endif

namespace kiln::bench {
namespace {

int64_t CpuNs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return static_cast<int64_t>(tv.tv_sec) * 1'000'000'000 +
           static_cast<int64_t>(tv.tv_usec) * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

struct Window {
  std::vector<Sample> samples;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t cpu_end_ns = 0;
  uint64_t sent_end = 0;  // requests sent by the end of the window
  bool stats_ok = false;
  ServerCounters stats_end;
  WindowMeasure measure;
};

class Runner {
 public:
  Runner(const BenchOptions& o, LoadEngine& engine, ControlClient& control)
      : o_(o), engine_(engine), control_(control), tty_(::isatty(2) == 1) {}

  Result<PointResult> Measure(const LoadConfig& config) {
    std::string label = config.open_loop ? fmt::format("rate {:g}/s", config.rate)
                                         : fmt::format("concurrency {}", config.concurrency);
    int64_t start_ns = NowNs();
    KILN_RETURN_IF_ERROR(engine_.Start(config, start_ns));
    std::vector<Sample> pending;
    std::map<int, std::string> first_errors;
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.warmup_ms));
    const int64_t t0 = NowNs();
    engine_.TakeSamples(pending, first_errors);
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](const Sample& s) { return s.done_ns < t0; }),
                  pending.end());
    Window start;
    start.end_ns = t0;
    start.cpu_end_ns = CpuNs();
    start.sent_end = engine_.sent();
    auto stats0 = control_.GetStats(o_.model, o_.version);
    start.stats_ok = stats0.ok();
    if (stats0.ok()) start.stats_end = *stats0;
    if (!stats0.ok() && !warned_stats_) {
      std::fprintf(stderr, "kiln bench: no server-side breakdown: %s\n",
                   stats0.status().message().c_str());
      warned_stats_ = true;
    }
    std::vector<Window> windows{std::move(start)};
    std::vector<WindowMeasure> measures;
    std::vector<WindowResult> window_results;
    bool stable = false;
    const int64_t interval_ns = static_cast<int64_t>(o_.measurement_interval_ms) * 1'000'000;
    for (int k = 1; k <= o_.max_trials; ++k) {
      Window w;
      w.begin_ns = windows.back().end_ns;
      w.end_ns = t0 + interval_ns * k;
      while (true) {
        int64_t left = w.end_ns - NowNs();
        if (left <= 0) break;
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(left, 250'000'000)));
      }
      engine_.TakeSamples(pending, first_errors);
      w.cpu_end_ns = CpuNs();
      w.sent_end = engine_.sent();
      auto it = std::partition(pending.begin(), pending.end(),
                               [&](const Sample& s) { return s.done_ns < w.end_ns; });
      w.samples.assign(pending.begin(), it);
      pending.erase(pending.begin(), it);
      auto stats = control_.GetStats(o_.model, o_.version);
      w.stats_ok = stats.ok();
      if (stats.ok()) w.stats_end = *stats;
      // The window's stability numbers.
      std::vector<uint64_t> lat;
      for (const Sample& s : w.samples) {
        if (s.status == 0) lat.push_back(static_cast<uint64_t>(s.latency_ns));
      }
      LatencySummary sum = Summarize(lat, o_.percentile);
      double secs = static_cast<double>(w.end_ns - w.begin_ns) / 1e9;
      w.measure.throughput = static_cast<double>(lat.size()) * o_.batch_size / secs;
      w.measure.latency_us = sum.custom_us;
      measures.push_back(w.measure);
      stable = IsStable(measures, o_.stability_pct);
      size_t errors = w.samples.size() - lat.size();
      WindowResult wr;
      wr.throughput = w.measure.throughput;
      wr.avg_us = sum.avg_us;
      wr.p50_us = sum.p50_us;
      wr.p99_us = sum.p99_us;
      wr.errors = errors;
      if (w.stats_ok && windows.back().stats_ok) {
        wr.server = Diff(windows.back().stats_end, w.stats_end);
      }
      window_results.push_back(wr);
      if (!o_.quiet) {
        std::string line = fmt::format(
            "[{}] window {}/{}: {:.1f} infer/s, p50 {:.0f} us, p99 {:.0f} us, {} errors{}", label,
            k, o_.max_trials, w.measure.throughput, sum.p50_us, sum.p99_us, errors,
            stable ? ", stable" : "");
        if (tty_) {
          std::fprintf(stderr, "\r\033[K%s", line.c_str());
        } else {
          std::fprintf(stderr, "%s\n", line.c_str());
        }
        std::fflush(stderr);
      }
      windows.push_back(std::move(w));
      if (stable) break;
    }
    engine_.Stop();
    if (!o_.quiet && tty_) std::fprintf(stderr, "\n");

    // Merge the last (up to) 3 windows.
    const size_t n = windows.size() - 1;
    const size_t first = n >= 3 ? n - 2 : 1;
    PointResult p;
    p.open_loop = config.open_loop;
    p.concurrency = config.concurrency;
    p.request_rate = config.rate;
    p.stable = stable;
    p.windows = static_cast<int>(n);
    p.window_results = std::move(window_results);
    const Window& before = windows[first - 1];
    const Window& last = windows.back();
    p.window_s = static_cast<double>(last.end_ns - before.end_ns) / 1e9;
    std::vector<uint64_t> lat, lag;
    for (size_t i = first; i <= n; ++i) {
      for (const Sample& s : windows[i].samples) {
        ++p.request_count;
        lag.push_back(static_cast<uint64_t>(std::max<int64_t>(0, s.lag_ns)));
        if (s.status == 0) {
          lat.push_back(static_cast<uint64_t>(s.latency_ns));
        } else {
          ++p.errors;
          ++p.errors_by_status[StatusLabel(s.status)];
          if (p.first_error.empty()) {
            auto e = first_errors.find(s.status);
            if (e != first_errors.end()) p.first_error = e->second;
          }
        }
      }
    }
    p.latency = Summarize(lat, o_.percentile);
    p.throughput = static_cast<double>(lat.size()) * o_.batch_size / p.window_s;
    p.achieved_rate = static_cast<double>(last.sent_end - before.sent_end) / p.window_s;
    p.client_cpu_pct = 100.0 * static_cast<double>(last.cpu_end_ns - before.cpu_end_ns) /
                       static_cast<double>(last.end_ns - before.end_ns);
    if (config.open_loop && !lag.empty()) {
      LatencySummary l = Summarize(lag, -1);
      p.send_lag_avg_us = l.avg_us;
      p.send_lag_p99_us = l.p99_us;
      p.send_lag_max_us = l.max_us;
    }
    if (before.stats_ok && last.stats_ok) p.server = Diff(before.stats_end, last.stats_end);
    return p;
  }

 private:
  const BenchOptions& o_;
  LoadEngine& engine_;
  ControlClient& control_;
  const bool tty_;
  bool warned_stats_ = false;
};

}  // namespace

Status RunBench(const BenchOptions& o, std::FILE* out) {
  if (o.model.empty()) return Status::InvalidArgument("-m MODEL is required");
  if (o.protocol != "http" && o.protocol != "grpc") {
    return Status::InvalidArgument(fmt::format("-i '{}': expected http or grpc", o.protocol));
  }
  if (o.http_json && o.protocol != "http") {
    return Status::InvalidArgument("--http-json applies to -i http only");
  }
  if (!o.concurrency_range.empty() && !o.request_rate_range.empty()) {
    return Status::InvalidArgument(
        "give either --concurrency-range (closed loop) or --request-rate-range (open loop)");
  }
  if (o.measurement_interval_ms <= 0 || o.max_trials < 1 || o.warmup_ms < 0) {
    return Status::InvalidArgument(
        "--measurement-interval and --max-trials must be positive, --warmup-interval >= 0");
  }
  if (o.percentile >= 0 && (o.percentile > 100 || o.percentile == 0)) {
    return Status::InvalidArgument(
        fmt::format("--percentile {}: expected a value in (0, 100]", o.percentile));
  }
  Distribution distribution;
  if (o.distribution == "constant") {
    distribution = Distribution::kConstant;
  } else if (o.distribution == "poisson") {
    distribution = Distribution::kPoisson;
  } else {
    return Status::InvalidArgument(
        fmt::format("--request-distribution '{}': expected constant or poisson", o.distribution));
  }
  const bool open_loop = !o.request_rate_range.empty();
  KILN_ASSIGN_OR_RETURN(
      std::vector<double> levels,
      ExpandRange(open_loop ? o.request_rate_range
                            : (o.concurrency_range.empty() ? "1" : o.concurrency_range),
                  !open_loop));
  if (o.protocol == "grpc") {
#ifndef KILN_HAVE_GRPC
    return Status::Unimplemented("this kiln was built without gRPC; use -i http");
#endif
  }
  const std::string url =
      !o.url.empty() ? o.url : (o.protocol == "grpc" ? "localhost:8001" : "localhost:8000");

  InputOptions in;
  in.batch_size = o.batch_size;
  in.input_data = o.input_data;
  in.seed = o.seed;
  in.string_length = o.string_length;
  for (const std::string& s : o.shapes) {
    KILN_ASSIGN_OR_RETURN(auto shape, ParseShapeFlag(s));
    in.shapes[shape.first] = shape.second;
  }

  std::unique_ptr<ControlClient> control;
  std::unique_ptr<LoadEngine> engine;
  Endpoint ep;
  if (o.protocol == "http") {
    KILN_ASSIGN_OR_RETURN(ep, ResolveEndpoint(url));
    control = MakeHttpControl(url);
  }
#ifdef KILN_HAVE_GRPC
  if (o.protocol == "grpc") control = MakeGrpcControl(url);
#endif
  KILN_ASSIGN_OR_RETURN(ModelInfo model, control->GetModel(o.model, o.version));
  if (model.name.empty()) model.name = o.model;
  KILN_ASSIGN_OR_RETURN(std::vector<InputSet> inputs, MakeInputs(model, in));
  if (o.protocol == "http") {
    std::vector<std::string> requests;
    requests.reserve(inputs.size());
    const std::string path = InferPath(o.model, o.version);
    for (const InputSet& set : inputs) {
      requests.push_back(
          HttpInferRequest(ep.host, path, set, model.outputs, !o.http_json, o.request_parameters));
    }
    engine = MakeHttpLoad(ep, std::move(requests));
  }
#ifdef KILN_HAVE_GRPC
  if (o.protocol == "grpc") {
    engine = MakeGrpcLoad(url, o.model, o.version, inputs, model.outputs, o.request_parameters);
  }
#endif

  RunInfo info;
  info.command_line = o.command_line;
  info.git_commit = GitCommit();
  info.cpu_model = CpuModel();
  info.cpu_count = static_cast<int>(std::thread::hardware_concurrency());
  info.start_time_utc = UtcNow();
  info.model = o.model;
  info.model_version = o.version;
  info.url = url;
  info.protocol = o.protocol == "grpc" ? "grpc" : (o.http_json ? "http-json" : "http-binary");
  info.batch_size = o.batch_size;
  info.percentile = o.percentile;
  info.stabilizing_latency = o.percentile < 0 ? "avg" : fmt::format("p{:g}", o.percentile);

  const int cores = std::max(1, info.cpu_count);
  Runner runner(o, *engine, *control);
  std::vector<PointResult> points;
  Status failure;
  for (double level : levels) {
    LoadConfig config;
    config.open_loop = open_loop;
    config.concurrency = open_loop ? 0 : static_cast<int>(level);
    config.rate = open_loop ? level : 0;
    config.distribution = distribution;
    config.seed = o.seed;
    config.max_inflight = std::max(1, o.max_connections);
    const int slots = open_loop ? config.max_inflight : config.concurrency;
    config.threads = o.threads > 0 ? o.threads : std::min(slots, std::max(1, cores / 2));
    KILN_ASSIGN_OR_RETURN(PointResult p, runner.Measure(config));
    points.push_back(p);
    if (p.latency.count == 0 && p.errors > 0) {
      failure = Status::Unavailable(fmt::format(
          "every request failed at {} {}: {} x {}{}", open_loop ? "rate" : "concurrency", level,
          p.errors, p.errors_by_status.begin()->first,
          p.first_error.empty() ? "" : " (first: " + p.first_error + ")"));
      break;
    }
  }
  std::fputs(FormatTable(info, points).c_str(), out);
  std::fflush(out);
  if (!o.csv_file.empty()) KILN_RETURN_IF_ERROR(WriteFile(o.csv_file, FormatCsv(points)));
  if (!o.json_file.empty()) KILN_RETURN_IF_ERROR(WriteFile(o.json_file, FormatJson(info, points)));
  if (!o.report_file.empty()) {
    KILN_RETURN_IF_ERROR(WriteFile(o.report_file, FormatHtml(info, points)));
  }
  return failure;
}

}  // namespace kiln::bench
