// SPDX-License-Identifier: Apache-2.0
// `kiln serve`: load a model repository and serve it over KServe v2 HTTP. Flag names follow the
// reference server's where the same setting exists, so existing launch scripts keep working.
//
// Shutdown (SIGINT or SIGTERM): readiness flips to false, queued and in-flight requests drain
// for up to --exit-timeout-secs, the listener closes, the process exits 0.

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "repo/model_manager.h"
#include "server/http/http_server.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

struct ServeOptions {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_thread_count = 0;
  int grpc_port = 8001;
  int metrics_port = 8002;
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  int exit_timeout_secs = 30;
  int log_verbose = 0;
  uint64_t max_request_bytes = 64ull << 20;
  int model_workers = 1;
};

Result<ModelControlMode> ParseControlMode(const std::string& mode) {
  if (mode == "none") return ModelControlMode::kNone;
  if (mode == "poll") return ModelControlMode::kPoll;
  if (mode == "explicit") return ModelControlMode::kExplicit;
  return Status::InvalidArgument(
      fmt::format("--model-control-mode '{}' is not one of none, poll, explicit", mode));
}

// Runs `fn` on a helper thread and waits at most `timeout`; returns false on timeout (the thread
// is detached and the process exits anyway).
template <typename Fn>
bool RunWithTimeout(Fn fn, std::chrono::seconds timeout) {
  auto state = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
  auto done = std::make_shared<bool>(false);
  std::thread t([fn, state, done] {
    fn();
    std::lock_guard<std::mutex> lock(state->first);
    *done = true;
    state->second.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->first);
  const bool finished = state->second.wait_for(lock, timeout, [&] { return *done; });
  lock.unlock();
  if (finished) t.join();
  else t.detach();
  return finished;
}

int Serve(const ServeOptions& opt, const CLI::App& cmd) {
  SetLogVerbosity(opt.log_verbose);
  Result<ModelControlMode> mode = ParseControlMode(opt.model_control_mode);
  if (!mode.ok()) {
    KILN_LOG_ERROR("{}", mode.status().message());
    return 1;
  }
  if (cmd.count("--grpc-port") > 0) {
    KILN_LOG_WARN("--grpc-port {}: this build has no gRPC endpoint yet; the flag is ignored",
                  opt.grpc_port);
  }
  if (cmd.count("--metrics-port") > 0) {
    KILN_LOG_WARN("--metrics-port {}: this build has no metrics endpoint yet; the flag is ignored",
                  opt.metrics_port);
  }
  if (*mode == ModelControlMode::kPoll) {
    KILN_LOG_WARN("--model-control-mode=poll: the repository is loaded once at start; changes "
                  "are not polled yet (--repository-poll-secs {} ignored)",
                  opt.repository_poll_secs);
  }

  // Block the shutdown signals before any thread starts so every thread inherits the mask and
  // only sigwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ModelManagerOptions mopt;
  mopt.repository_path = opt.model_repository;
  mopt.control_mode = *mode;
  mopt.startup_models = opt.load_models;
  mopt.workers_per_model = opt.model_workers;
  Result<std::unique_ptr<ModelManager>> manager = ModelManager::Create(mopt);
  if (!manager.ok()) {
    KILN_LOG_ERROR("{}", manager.status().message());
    return 1;
  }
  Status load = (*manager)->LoadInitialModels();
  if (!load.ok()) KILN_LOG_ERROR("some models failed to load: {}", load.message());

  HttpServerOptions hopt;
  hopt.address = opt.http_address;
  hopt.port = opt.http_port;
  hopt.threads = opt.http_thread_count;
  hopt.max_request_bytes = opt.max_request_bytes;
  hopt.server_version = KILN_VERSION;
  Result<std::unique_ptr<HttpServer>> server = HttpServer::Create(hopt, manager->get());
  if (!server.ok()) {
    KILN_LOG_ERROR("{}", server.status().message());
    return 1;
  }
  Status started = (*server)->Start();
  if (!started.ok()) {
    KILN_LOG_ERROR("{}", started.message());
    (*manager)->Shutdown();
    return 1;
  }
  KILN_LOG_INFO("serving KServe v2 HTTP on {}:{} (repository '{}')", opt.http_address,
                (*server)->port(), opt.model_repository);
  (*server)->SetReady(true);

  int sig = 0;
  sigwait(&signals, &sig);
  KILN_LOG_INFO("received {}, shutting down (draining up to {} s)",
                sig == SIGINT ? "SIGINT" : "SIGTERM", opt.exit_timeout_secs);
  (*server)->SetReady(false);
  ModelManager* m = manager->get();
  const bool drained = RunWithTimeout([m] { m->Shutdown(); },
                                      std::chrono::seconds(opt.exit_timeout_secs));
  if (!drained) {
    KILN_LOG_WARN("in-flight requests did not finish within {} s; exiting anyway",
                  opt.exit_timeout_secs);
  }
  (*server)->Stop();
  KILN_LOG_INFO("stopped");
  if (!drained) std::_Exit(1);  // a worker may still be running; do not run destructors
  return 0;
}

}  // namespace

CommandMain AddServeCommand(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model repository over KServe v2 HTTP");
  cmd->add_option("--model-repository", opt->model_repository,
                  "Model repository directory: <repo>/<model>/[config.pbtxt] and "
                  "<repo>/<model>/<version>/model.onnx")
      ->required();
  cmd->add_option("--http-address", opt->http_address, "Address the HTTP server binds")
      ->capture_default_str();
  cmd->add_option("--http-port", opt->http_port, "HTTP port (0 picks a free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--http-thread-count", opt->http_thread_count,
                  "HTTP I/O threads (0 = number of cores, at least 2)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--grpc-port", opt->grpc_port,
                  "gRPC port (accepted for compatibility; this build has no gRPC endpoint yet)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--metrics-port", opt->metrics_port,
                  "Prometheus metrics port (accepted for compatibility; this build has no "
                  "metrics endpoint yet)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--model-control-mode", opt->model_control_mode,
                  "none: load every model at start; explicit: load only --load-model models; "
                  "poll: like none (repository changes are not polled yet)")
      ->check(CLI::IsMember({"none", "poll", "explicit"}))
      ->capture_default_str();
  cmd->add_option("--repository-poll-secs", opt->repository_poll_secs,
                  "Poll interval for --model-control-mode=poll")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--load-model", opt->load_models,
                  "Model to load at start in explicit mode ('*' = all); repeatable");
  cmd->add_option("--exit-timeout-secs", opt->exit_timeout_secs,
                  "On SIGINT/SIGTERM, how long to let in-flight requests finish")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--log-verbose", opt->log_verbose, "Log verbosity: 0 info, 1 debug, 2 trace")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", opt->max_request_bytes,
                  "Largest accepted HTTP request body; larger requests get an error and the "
                  "connection is closed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--model-workers", opt->model_workers,
                  "Worker threads per model version running inference requests")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  return [opt, cmd] { return Serve(*opt, *cmd); };
}

}  // namespace kiln::tools
