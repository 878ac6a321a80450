// SPDX-License-Identifier: Apache-2.0
// `kiln serve`: load a model repository and serve it over KServe v2 HTTP and gRPC, with
// Prometheus metrics on --metrics-port (src/server/metrics/metrics_report.h). Flag names follow
// the reference server's where the same setting exists, so existing launch scripts keep working.
//
// Model control (--model-control-mode): none loads every model at start; poll also rescans the
// repository every --repository-poll-secs and loads, reloads and unloads what changed; explicit
// loads the --load-model models at start and then only what POST /v2/repository/models/{m}/load
// asks for (and unloads on .../unload).
//
// Shutdown (SIGINT or SIGTERM): readiness turns false at once (HTTP and gRPC) and new inference
// requests get 503 / UNAVAILABLE; queued and in-flight requests run to completion and are
// answered, for at most --exit-timeout-secs; then the listeners close and the process exits 0.
// If the timeout cuts the drain short (or a second signal arrives), it logs how many requests
// were abandoned and exits 0 anyway: stopping was asked for, and it happened.
//
// Tenants and TLS (docs/security.md): --auth-file names the tenants, their keys and limits and
// who may use each API group; --http-use-ssl / --grpc-use-ssl (with their -server-cert,
// -server-key, -root-cert and -use-ssl-mutual flags, named as the reference server's gRPC ones)
// serve TLS. Both are read and checked before any model loads: a missing file, a malformed auth
// file or a certificate that is expired makes `kiln serve` exit 2 with a message naming the
// flag, the file and the problem.

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/logging.h"
#include "repo/model_manager.h"
#include "repo/response_cache.h"
#include "runtime/thread_budget.h"
#include "server/grpc/grpc_server.h"
#include "server/http/http_server.h"
#include "server/metrics/gpu_metrics.h"
#include "server/metrics/metrics_report.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/system_metrics.h"
#include "server/security/access.h"
#include "server/security/api_groups.h"
#include "server/security/auth_config.h"
#include "server/security/tls.h"
#include "server/trace.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/devices.h"

namespace kiln::tools {
namespace {

struct ServeOptions {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_thread_count = 0;
  bool allow_grpc = true;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;
  int metrics_port = 8002;
  bool allow_metrics = true;
  std::string metrics_address = "0.0.0.0";
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  int exit_timeout_secs = 30;
  DeviceFlags devices;
  int log_verbose = 0;
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  std::string log_format = "default";
  std::string log_file;
  uint64_t max_request_bytes = 64ull << 20;
  size_t http_max_connections = 1000;
  int model_workers = 1;
  int model_thread_budget = 0;
  int intra_op_threads = 0;
  int64_t inline_execution_us = 100;
  bool allow_thread_oversubscription = false;
  bool fixed_intra_op_threads = false;
  int thread_budget = 0;
  std::vector<std::string> cache_config;  // --cache-config values
  uint64_t response_cache_byte_size = 0;  // the reference's older flag: local,size=N
  std::vector<std::string> trace_config;  // --trace-config values
  std::string auth_file;
  TlsFiles http_tls{"--http", "", "", "", false};
  bool http_use_ssl = false;
  TlsFiles grpc_tls{"--grpc", "", "", "", false};
  bool grpc_use_ssl = false;
};

// What --auth-file and the TLS flags set up, checked before the models load.
struct Security {
  std::shared_ptr<TenantGate> gate;  // null without --auth-file
  std::optional<TlsMaterial> http_tls;
  std::optional<TlsMaterial> grpc_tls;
};

// One listener's TLS: unset without --<prefix>-use-ssl (a certificate flag without it is
// ignored, with a warning).
Result<std::optional<TlsMaterial>> LoadListenerTls(bool use_ssl, const TlsFiles& files) {
  if (!use_ssl) {
    if (!files.cert_file.empty() || !files.key_file.empty() || files.mutual) {
      KILN_LOG_WARN("{}-server-cert / -server-key / -use-ssl-mutual are ignored without {}-use-ssl",
                    files.flag_prefix, files.flag_prefix);
    }
    return std::optional<TlsMaterial>();
  }
  KILN_ASSIGN_OR_RETURN(TlsMaterial tls, LoadTlsMaterial(files));
  return std::optional<TlsMaterial>(std::move(tls));
}

Result<Security> LoadSecurity(const ServeOptions& opt) {
  Security sec;
  if (!opt.auth_file.empty()) {
    KILN_ASSIGN_OR_RETURN(AuthConfig config, LoadAuthFile(opt.auth_file));
    KILN_LOG_INFO("auth file '{}': {} tenant(s)", opt.auth_file, config.tenants.size());
    sec.gate = std::make_shared<TenantGate>(std::move(config));
  }
  KILN_ASSIGN_OR_RETURN(sec.http_tls, LoadListenerTls(opt.http_use_ssl, opt.http_tls));
  KILN_ASSIGN_OR_RETURN(sec.grpc_tls, LoadListenerTls(opt.grpc_use_ssl, opt.grpc_tls));
  return sec;
}

// Request tracing from --trace-config (server/trace.h); INVALID_ARGUMENT naming a bad value.
Status ConfigureTracing(const ServeOptions& opt) {
  if (opt.trace_config.empty()) return Status::OK();
  TraceSettings s;
  for (const std::string& v : opt.trace_config) KILN_RETURN_IF_ERROR(ApplyTraceConfig(v, &s));
  KILN_RETURN_IF_ERROR(Tracer::Global().Configure(s));
  if (s.level != TraceSettings::Level::kOff) {
    KILN_LOG_INFO("tracing 1 in {} requests to {}", s.rate,
                  s.mode == TraceSettings::Mode::kOpenTelemetry ? "OTLP/HTTP " + s.url
                                                                : "the file " + s.file);
  }
  return Status::OK();
}

Result<ModelControlMode> ParseControlMode(const std::string& mode) {
  if (mode == "none") return ModelControlMode::kNone;
  if (mode == "poll") return ModelControlMode::kPoll;
  if (mode == "explicit") return ModelControlMode::kExplicit;
  return Status::InvalidArgument(
      fmt::format("--model-control-mode '{}' is not one of none, poll, explicit", mode));
}

// Checks the flag combinations CLI11 cannot express.
Status CheckControlFlags(const ServeOptions& opt, ModelControlMode mode) {
  const auto& models = opt.load_models;
  if (std::find(models.begin(), models.end(), "*") != models.end() && models.size() > 1) {
    return Status::InvalidArgument("--load-model=* must be the only --load-model argument");
  }
  if (!models.empty() && mode != ModelControlMode::kExplicit) {
    KILN_LOG_WARN("--load-model is used only with --model-control-mode=explicit; ignored");
  }
  if (mode == ModelControlMode::kPoll && opt.repository_poll_secs == 0) {
    KILN_LOG_WARN(
        "--model-control-mode=poll with --repository-poll-secs=0: the repository is "
        "loaded at start and not rescanned");
  }
  return Status::OK();
}

// The server's response cache from --cache-config (or the older --response-cache-byte-size);
// null when neither asks for one. INVALID_ARGUMENT naming the flag for a bad value.
Result<std::shared_ptr<ResponseCache>> MakeResponseCache(const ServeOptions& opt) {
  std::vector<std::string> values = opt.cache_config;
  if (opt.response_cache_byte_size > 0) {
    if (!values.empty()) {
      return Status::InvalidArgument(
          "--response-cache-byte-size and --cache-config both configure the response cache; "
          "use --cache-config local,size=BYTES alone");
    }
    values.push_back(fmt::format("local,size={}", opt.response_cache_byte_size));
  }
  KILN_ASSIGN_OR_RETURN(std::optional<ResponseCacheOptions> options, ParseCacheConfig(values));
  if (!options.has_value()) return std::shared_ptr<ResponseCache>();
  KILN_LOG_INFO(
      "response cache: local, {} bytes (models opt in with response_cache {{ enable: true }})",
      options->size_bytes);
  return std::make_shared<ResponseCache>(*options);
}

// Blocks until one of `signals` arrives; returns it.
int WaitForSignal(const sigset_t& signals) {
  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  return sig;
}

const char* SignalName(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// The gRPC server's part of readiness, drain and stop; nothing in a build without gRPC.
#ifdef KILN_HAVE_GRPC
void SetGrpcReady(GrpcServer* grpc) {
  if (grpc != nullptr) grpc->SetReady(true);
}
void DrainGrpc(GrpcServer* grpc) {
  if (grpc != nullptr) grpc->StartDraining();
}
void StopGrpc(GrpcServer* grpc) {
  if (grpc != nullptr) grpc->Stop();
}
size_t GrpcInFlight(const GrpcServer* grpc) {
  return grpc != nullptr ? grpc->InferencesInFlight() : 0;
}
#else
void SetGrpcReady(GrpcServer*) {}
void DrainGrpc(GrpcServer*) {}
void StopGrpc(GrpcServer*) {}
size_t GrpcInFlight(const GrpcServer*) { return 0; }
#endif

// Drains and stops on a helper thread; the calling thread waits until it is done, the deadline
// passes, or a second signal asks to stop now. True when the drain completed.
bool DrainAndStop(ModelManager* manager, HttpServer* server, GrpcServer* grpc,
                  const sigset_t& signals, std::chrono::seconds timeout) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread drain([manager, server, grpc, done] {
    manager->Shutdown();  // every queued and running request is answered
    server->Stop();       // every answer is written
    StopGrpc(grpc);
    done->store(true);
  });
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done->load()) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::seconds(0)) break;
    const auto slice =
        std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig > 0) {
      KILN_LOG_WARN("received {} again: stopping without waiting for the drain", SignalName(sig));
      break;
    }
  }
  if (done->load()) {
    drain.join();
    return true;
  }
  drain.detach();  // the process exits without it
  return false;
}

// Logs `status` and returns `exit_code`: how a start-up step fails.
int Fail(const Status& status, int exit_code = 1) {
  KILN_LOG_ERROR("{}", status.message());
  return exit_code;
}

// --log-* flags; 2 (bad flags) on error, else 0.
int ConfigureLogging(const ServeOptions& opt) {
  LogSettings log;
  log.file = opt.log_file;
  log.info = opt.log_info;
  log.warning = opt.log_warning;
  log.error = opt.log_error;
  log.verbose_level = static_cast<uint32_t>(std::max(0, opt.log_verbose));
  if (!ParseLogFormat(opt.log_format, &log.format)) {
    KILN_LOG_ERROR("--log-format must be 'default' or 'ISO8601', got '{}'", opt.log_format);
    return 2;
  }
  if (Status st = ApplyLogSettings(log); !st.ok()) return Fail(st, 2);
  return 0;
}

// The model control mode, after the checks of the flags that go with it and with gRPC.
Result<ModelControlMode> CheckServeFlags(const ServeOptions& opt,
                                         [[maybe_unused]] const CLI::App& cmd) {
  KILN_ASSIGN_OR_RETURN(ModelControlMode mode, ParseControlMode(opt.model_control_mode));
  KILN_RETURN_IF_ERROR(CheckControlFlags(opt, mode));
#ifndef KILN_HAVE_GRPC
  if (opt.allow_grpc && (cmd.count("--grpc-port") > 0 || cmd.count("--grpc-address") > 0)) {
    return Status::InvalidArgument(
        "this build has no gRPC server (gRPC was not found at configure time; run "
        "scripts/install-deps and reconfigure); drop --grpc-port / --grpc-address or "
        "pass --allow-grpc=false");
  }
#endif
  return mode;
}

// Blocks the shutdown signals before any thread starts so every thread inherits the mask and
// only the waits of the main thread see them.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// The model manager with the models to load at start loaded (a model that fails is logged and
// the others are served).
Result<std::unique_ptr<ModelManager>> StartModels(const ServeOptions& opt, ModelControlMode mode,
                                                  std::shared_ptr<ResponseCache> cache) {
  ModelManagerOptions mopt;
  mopt.repository_path = opt.model_repository;
  mopt.control_mode = mode;
  mopt.startup_models = opt.load_models;
  mopt.repository_poll_secs = mode == ModelControlMode::kPoll ? opt.repository_poll_secs : 0;
  mopt.workers_per_model = opt.model_workers;
  mopt.instance_options.cpu_threads = opt.model_thread_budget;
  mopt.instance_options.intra_op_threads = opt.intra_op_threads;
  mopt.instance_options.inline_max_ns = opt.inline_execution_us * 1000;
  mopt.instance_options.oversubscribe = opt.allow_thread_oversubscription;
  mopt.instance_options.drain_timeout_ns = int64_t{opt.exit_timeout_secs} * 1'000'000'000;
  mopt.instance_options.adapt_threads = !opt.fixed_intra_op_threads;
  mopt.instance_options.response_cache = std::move(cache);
  if (!opt.allow_thread_oversubscription) {
    // One budget for the runs of every model, for the life of the process (the manager and its
    // instances never outlive it).
    static std::unique_ptr<ThreadBudget> budget;
    const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    budget = std::make_unique<ThreadBudget>(opt.thread_budget > 0 ? opt.thread_budget : hardware);
    mopt.instance_options.thread_budget = budget.get();
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelManager> manager, ModelManager::Create(mopt));
  Status load = manager->LoadInitialModels();
  if (!load.ok()) KILN_LOG_ERROR("some models failed to load: {}", load.message());
  return manager;
}

Result<std::unique_ptr<HttpServer>> MakeHttpServer(const ServeOptions& opt, ModelManager* manager,
                                                   const Security& sec) {
  HttpServerOptions hopt;
  hopt.gate = sec.gate;
  hopt.tls = sec.http_tls;
  hopt.address = opt.http_address;
  hopt.port = opt.http_port;
  hopt.threads = opt.http_thread_count;
  hopt.max_request_bytes = opt.max_request_bytes;
  hopt.max_connections = opt.http_max_connections;
  hopt.server_version = KILN_VERSION;
  return HttpServer::Create(hopt, manager);
}

// The gRPC listener: null without --allow-grpc, and in a build without gRPC.
#ifdef KILN_HAVE_GRPC
using GrpcHolder = std::unique_ptr<GrpcServer>;

Result<GrpcHolder> StartGrpc(const ServeOptions& opt, ModelManager* manager, const Security& sec) {
  if (!opt.allow_grpc) return GrpcHolder();
  GrpcServerOptions gopt;
  gopt.gate = sec.gate;
  gopt.tls = sec.grpc_tls;
  gopt.address = opt.grpc_address;
  gopt.port = opt.grpc_port;
  gopt.server_version = KILN_VERSION;
  KILN_ASSIGN_OR_RETURN(GrpcHolder grpc, GrpcServer::Create(gopt, manager));
  grpc->SetReady(false);  // until every listener is up (Serve)
  KILN_RETURN_IF_ERROR(grpc->Start());
  KILN_LOG_INFO("serving KServe v2 gRPC{} on {}:{}",
                !sec.grpc_tls ? "" : (sec.grpc_tls->mutual ? " (mutual TLS)" : " (TLS)"),
                opt.grpc_address, grpc->port());
  return grpc;
}
#else
struct GrpcHolder {
  GrpcServer* get() const { return nullptr; }
};

Result<GrpcHolder> StartGrpc(const ServeOptions&, ModelManager*, const Security&) {
  return GrpcHolder();
}
#endif

// Prometheus metrics on their own listener, serving until the drain is over; null without
// --allow-metrics.
Result<std::unique_ptr<MetricsServer>> StartMetrics(const ServeOptions& opt,
                                                    ModelManager* model_manager,
                                                    std::shared_ptr<const ResponseCache> cache,
                                                    std::shared_ptr<TenantGate> gate) {
  if (!opt.allow_metrics) return std::unique_ptr<MetricsServer>();
  MetricsServerOptions metrics_options;
  metrics_options.address = opt.metrics_address;
  metrics_options.port = opt.metrics_port;
  if (gate != nullptr) {
    metrics_options.authorize = [gate](std::string_view authorization) {
      return gate->Authorize(ApiGroup::kMetrics, BearerKey(authorization)).status();
    };
  }
  auto cpu = std::make_shared<CpuUtilizationSampler>();
  // GPU series through NVML when it loads; none (and no error) otherwise.
  auto gpus = std::make_shared<GpuMetricsReader>();
  if (!gpus->available()) KILN_LOG_INFO("no GPU metrics: {}", gpus->why_not());
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<MetricsServer> metrics,
      MetricsServer::Create(metrics_options, [model_manager, cpu, gpus, cache, gate] {
        const std::vector<ModelMetrics> models = CollectModelMetrics(*model_manager);
        SystemMetrics system;
        system.cpu_utilization = cpu->Sample();
        system.memory = ReadMemoryInfo();
        system.process_rss_bytes = ReadProcessRssBytes();
        system.gpus = gpus->Read();
        if (cache != nullptr) system.response_cache = cache->Stats();
        const Tracer& tracer = Tracer::Global();
        if (tracer.traces_started() > 0 || tracer.settings().level != TraceSettings::Level::kOff) {
          system.tracing = SystemMetrics::Tracing{tracer.spans_exported(), tracer.spans_dropped(),
                                                  tracer.traces_started()};
        }
        if (gate != nullptr) {
          for (const TenantSnapshot& t : gate->Snapshot()) {
            system.tenants.push_back({t.name, t.ok, t.unauthenticated, t.forbidden, t.rate_limited,
                                      t.inflight, t.generated_tokens});
          }
        }
        return RenderMetrics(models, system);
      }));
  KILN_RETURN_IF_ERROR(metrics->Start());
  KILN_LOG_INFO("serving Prometheus metrics on {}:{}/metrics", opt.metrics_address,
                metrics->port());
  return metrics;
}

// A listener after HTTP failed to start: HTTP drains and stops, the models shut down; exit 1.
int AbortAfterHttp(const Status& status, ModelManager* manager, HttpServer* server) {
  KILN_LOG_ERROR("{}", status.message());
  server->StartDraining();
  manager->Shutdown();
  server->Stop();
  return 1;
}

// Waits for SIGINT / SIGTERM, then turns readiness off, drains and stops. Returns the exit code
// (0), or does not return when the drain timed out (std::_Exit with worker threads still
// running).
int ServeUntilSignal(const ServeOptions& opt, const sigset_t& signals, ModelManager* manager,
                     HttpServer* server, GrpcServer* grpc, MetricsServer* metrics) {
  const int sig = WaitForSignal(signals);
  KILN_LOG_INFO(
      "received {}: not ready any more; draining {} in-flight request(s) for at most "
      "{} s",
      SignalName(sig), server->InferencesInFlight() + GrpcInFlight(grpc), opt.exit_timeout_secs);
  server->StartDraining();
  DrainGrpc(grpc);
  const bool drained =
      DrainAndStop(manager, server, grpc, signals, std::chrono::seconds(opt.exit_timeout_secs));
  if (drained) {
    Tracer::Global().Shutdown();  // the traces of the last requests are exported
    if (metrics != nullptr) metrics->Stop();
    KILN_LOG_INFO("stopped");
    return 0;
  }
  KILN_LOG_WARN("exit timeout: {} inference request(s) abandoned unanswered",
                server->InferencesInFlight() + GrpcInFlight(grpc));
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  // Worker and io threads may still be running: leave without running destructors under them.
  std::_Exit(0);
}

int Serve(const ServeOptions& opt, const CLI::App& cmd) {
  if (int code = ConfigureLogging(opt); code != 0) return code;
  Result<ModelControlMode> mode = CheckServeFlags(opt, cmd);
  if (!mode.ok()) return Fail(mode.status());
  // GPUs first: KIND_GPU models place their instances on them.
  if (Status devices = SetUpDevices(opt.devices); !devices.ok()) return Fail(devices);
  Result<std::shared_ptr<ResponseCache>> cache = MakeResponseCache(opt);
  if (!cache.ok()) return Fail(cache.status(), 2);
  if (Status tracing = ConfigureTracing(opt); !tracing.ok()) return Fail(tracing, 2);
  Result<Security> security = LoadSecurity(opt);
  if (!security.ok()) return Fail(security.status(), 2);
  const sigset_t signals = BlockShutdownSignals();
  Result<std::unique_ptr<ModelManager>> manager = StartModels(opt, *mode, *cache);
  if (!manager.ok()) return Fail(manager.status());
  Result<std::unique_ptr<HttpServer>> server = MakeHttpServer(opt, manager->get(), *security);
  if (!server.ok()) return Fail(server.status());
  // Not ready until the gRPC and metrics listeners are up too (below): a client that saw
  // /v2/health/ready answer 200 finds every port open.
  (*server)->SetReady(false);
  if (Status started = (*server)->Start(); !started.ok()) {
    Fail(started);
    (*manager)->Shutdown();
    return 1;
  }
  KILN_LOG_INFO("serving KServe v2 HTTP on {}:{} (repository '{}', model control mode {})",
                opt.http_address, (*server)->port(), opt.model_repository, opt.model_control_mode);
  Result<GrpcHolder> grpc = StartGrpc(opt, manager->get(), *security);
  if (!grpc.ok()) return AbortAfterHttp(grpc.status(), manager->get(), server->get());
  Result<std::unique_ptr<MetricsServer>> metrics =
      StartMetrics(opt, manager->get(), *cache, security->gate);
  if (!metrics.ok()) return AbortAfterHttp(metrics.status(), manager->get(), server->get());
  // Ready only once every listener is up, so a client that waits for readiness finds them all.
  (*server)->SetReady(true);
  SetGrpcReady(grpc->get());
  return ServeUntilSignal(opt, signals, manager->get(), server->get(), grpc->get(), metrics->get());
}

// --http-*, --grpc-*, --metrics-*: the three listeners.
void AddListenerFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--http-address", opt.http_address, "Address the HTTP server binds")
      ->capture_default_str();
  cmd.add_option("--http-port", opt.http_port, "HTTP port (0 picks a free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--http-thread-count", opt.http_thread_count,
                 "HTTP I/O threads (0 = number of cores, at least 2)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--http-max-connections", opt.http_max_connections,
                 "Most HTTP connections open at once; beyond it a connection gets 503 and is "
                 "closed (0 = no limit; the default stays under the usual 1024 open files)")
      ->capture_default_str();
  cmd.add_option("--allow-grpc", opt.allow_grpc,
                 "Serve KServe v2 gRPC (inference.GRPCInferenceService and grpc.health.v1)")
      ->capture_default_str();
  cmd.add_option("--grpc-address", opt.grpc_address, "Address the gRPC server binds")
      ->capture_default_str();
  cmd.add_option("--grpc-port", opt.grpc_port, "gRPC port (0 picks a free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--metrics-port", opt.metrics_port,
                 "Port of the Prometheus metrics endpoint (GET /metrics); 0 picks a free port")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd.add_option("--allow-metrics", opt.allow_metrics,
                 "Serve Prometheus metrics on --metrics-port (--allow-metrics=false: no listener)")
      ->capture_default_str();
  cmd.add_option("--metrics-address", opt.metrics_address,
                 "Address the metrics endpoint listens on")
      ->capture_default_str();
}

// Tenants (--auth-file) and TLS on the HTTP and gRPC listeners (docs/security.md).
void AddSecurityFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--auth-file", opt.auth_file,
                 "JSON file of tenants (API keys, service class, rate and concurrency limits) and "
                 "of which tenants may use each API group (health, metadata, inference, "
                 "shared-memory, model-config, model-repository, statistics, trace, logging, "
                 "metrics); keys arrive as 'Authorization: Bearer <key>' (docs/security.md)");
  for (auto [prefix, use_ssl, files] :
       {std::tuple{std::string("--http"), &opt.http_use_ssl, &opt.http_tls},
        std::tuple{std::string("--grpc"), &opt.grpc_use_ssl, &opt.grpc_tls}}) {
    const std::string what = prefix == "--http" ? "HTTP" : "gRPC";
    cmd.add_option(prefix + "-use-ssl", *use_ssl,
                   "Serve " + what + " over TLS only (needs " + prefix + "-server-cert and " +
                       prefix + "-server-key)")
        ->capture_default_str();
    cmd.add_option(prefix + "-server-cert", files->cert_file,
                   "PEM file: the " + what + " server certificate, then its chain");
    cmd.add_option(prefix + "-server-key", files->key_file,
                   "PEM file: the unencrypted private key of " + prefix + "-server-cert");
    cmd.add_option(prefix + "-root-cert", files->root_file,
                   "PEM file: CA certificates client certificates must chain to (with " + prefix +
                       "-use-ssl-mutual)");
    cmd.add_option(prefix + "-use-ssl-mutual", files->mutual,
                   "Mutual TLS on " + what + ": refuse clients without a valid certificate from " +
                       prefix + "-root-cert")
        ->capture_default_str();
  }
}

// Which models load when, and how long a shutdown waits for them.
void AddModelControlFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--model-control-mode", opt.model_control_mode,
                 "none: load every model at start, ignore later repository changes (load/unload "
                 "requests fail); poll: load every model at start, then rescan the repository "
                 "every --repository-poll-secs and load added, reload changed and unload "
                 "removed models and versions; explicit: load the --load-model models at start, "
                 "then load/unload on POST /v2/repository/models/{name}/load|unload")
      ->check(CLI::IsMember({"none", "poll", "explicit"}))
      ->capture_default_str();
  cmd.add_option("--repository-poll-secs", opt.repository_poll_secs,
                 "Seconds between two repository scans with --model-control-mode=poll (0: no "
                 "rescans)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--load-model", opt.load_models,
                 "With --model-control-mode=explicit: a model to load at start; repeatable; "
                 "--load-model=* (alone) loads every model of the repository")
      ->allow_extra_args(false);
  cmd.add_option("--exit-timeout-secs", opt.exit_timeout_secs,
                 "On SIGINT/SIGTERM: readiness turns false and new inference is refused (503) "
                 "at once; queued and in-flight requests get this many seconds to finish, then "
                 "the process exits 0 (logging how many requests it abandoned)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// --log-*, as the reference server names them.
void AddLogFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--log-verbose", opt.log_verbose,
                 "Log verbosity: 0 info, 1 debug, 2 trace (changeable at run time: "
                 "POST /v2/logging {\"log_verbose_level\": N})")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--log-info", opt.log_info, "Log info lines (true/false; also /v2/logging)")
      ->capture_default_str();
  cmd.add_option("--log-warning", opt.log_warning,
                 "Log warning lines (true/false; also /v2/logging)")
      ->capture_default_str();
  cmd.add_option("--log-error", opt.log_error, "Log error lines (true/false; also /v2/logging)")
      ->capture_default_str();
  cmd.add_option("--log-format", opt.log_format,
                 "Log line format: 'default' (local time) or 'ISO8601' (UTC); also /v2/logging")
      ->capture_default_str();
  cmd.add_option("--log-file", opt.log_file,
                 "Append the log to this file instead of standard error (fixed at start)");
}

// Request size, instances and their threads, inline execution.
void AddLimitAndInstanceFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--max-request-bytes", opt.max_request_bytes,
                 "Largest accepted HTTP request body; larger requests get an error and the "
                 "connection is closed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--model-workers", opt.model_workers,
                 "Instances per model version for instance groups that do not set `count` "
                 "(each instance runs one batch at a time on its own thread)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd.add_option("--model-thread-budget", opt.model_thread_budget,
                 "Threads one model's instances may use together: a model starts at most this "
                 "many instances (with a warning when its config asks for more) and splits the "
                 "threads between them (each instance's runs use budget / instances intra-op "
                 "threads); 0 = the machine's hardware threads")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd.add_option("--intra-op-threads", opt.intra_op_threads,
                 "Threads each instance's session runs use (0 = split --model-thread-budget "
                 "between the instances; N > 0 caps the instances at budget / N)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd.add_option("--thread-budget", opt.thread_budget,
                 "Intra-op threads the running batches of all models may hold at once: a batch "
                 "runs with its instance's full width when that many are free, else on one thread, "
                 "and waits while none is, so concurrent models never oversubscribe the cores; 0 = "
                 "the machine's hardware threads")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd.add_flag("--allow-thread-oversubscription", opt.allow_thread_oversubscription,
               "Start every configured instance even past --model-thread-budget, and let "
               "concurrent batches use more threads than --thread-budget");
  cmd.add_flag("--fixed-intra-op-threads", opt.fixed_intra_op_threads,
               "Run every batch with all of an instance's intra-op threads; by default each "
               "instance measures whether its runs are faster on one thread while other work "
               "shares the cores, and runs narrow while they are (docs/kernels.md)");
  cmd.add_option("--inline-execution-us", opt.inline_execution_us,
                 "A model whose runs take at most this long on average runs a request that "
                 "finds an instance free on the protocol thread that received it, saving the "
                 "hand-off to the instance's thread (lower latency for small models); 0 = "
                 "always hand off")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
}

// Request tracing, with the reference server's flags.
void AddTraceFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--trace-config", opt.trace_config,
                 "Request tracing, as the reference server: one [MODE,]SETTING=VALUE per flag "
                 "(repeatable): level=OFF|TIMESTAMPS, rate=N (1 in N requests; a sampled "
                 "traceparent is always traced), count=N (-1: no limit), "
                 "mode=triton|opentelemetry, triton,file=PATH (JSON lines of timestamps), "
                 "triton,log-frequency=N, opentelemetry,url=HOST:PORT/PATH (OTLP/HTTP JSON), "
                 "opentelemetry,resource=KEY=VALUE, opentelemetry,bsp_max_queue_size=N, "
                 "opentelemetry,bsp_max_export_batch_size=N, opentelemetry,bsp_schedule_delay=MS. "
                 "Changeable at run time: /v2/trace/setting (docs/tracing.md)")
      ->allow_extra_args(false);
}

// The response cache, with the reference server's flags.
void AddCacheFlags(CLI::App& cmd, ServeOptions& opt) {
  cmd.add_option("--cache-config", opt.cache_config,
                 "Response cache, as the reference server: --cache-config local,size=BYTES "
                 "(one <cache>,<setting>=<value> per flag; repeatable). The cache is shared by "
                 "the models whose config has response_cache { enable: true }: a repeated "
                 "request is answered from it without running the model; least recently used "
                 "responses are dropped to stay within BYTES (docs/response-cache.md)")
      ->allow_extra_args(false);
  cmd.add_option("--response-cache-byte-size", opt.response_cache_byte_size,
                 "The reference server's older form of --cache-config local,size=BYTES (0: no "
                 "cache)")
      ->capture_default_str();
}

}  // namespace

CommandMain AddServeCommand(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  CLI::App* cmd =
      app.add_subcommand("serve", "Serve a model repository over KServe v2 HTTP and gRPC");
  cmd->add_option("--model-repository", opt->model_repository,
                  "Model repository directory: <repo>/<model>/[config.pbtxt] and "
                  "<repo>/<model>/<version>/model.onnx")
      ->required();
  AddListenerFlags(*cmd, *opt);
  AddModelControlFlags(*cmd, *opt);
  AddLogFlags(*cmd, *opt);
  AddLimitAndInstanceFlags(*cmd, *opt);
  AddCacheFlags(*cmd, *opt);
  AddTraceFlags(*cmd, *opt);
  AddSecurityFlags(*cmd, *opt);
  AddDeviceFlags(*cmd, &opt->devices);
  return [opt, cmd] { return Serve(*opt, *cmd); };
}

}  // namespace kiln::tools
