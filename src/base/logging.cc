// SPDX-License-Identifier: Apache-2.0
#include "base/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "base/mutex.h"

namespace kiln {
namespace {

// Forwards a line to the destination sink unless its severity is switched off. spdlog's own
// level is a threshold; the severities here are switched one by one, as the protocol's
// log_info / log_warning / log_error settings ask.
class SeverityFilterSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit SeverityFilterSink(std::shared_ptr<spdlog::sinks::sink> target)
      : target_(std::move(target)) {}

  void Configure(const LogSettings& s) {
    info_.store(s.info, std::memory_order_relaxed);
    warning_.store(s.warning, std::memory_order_relaxed);
    error_.store(s.error, std::memory_order_relaxed);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    switch (msg.level) {
      case spdlog::level::info:
        if (!info_.load(std::memory_order_relaxed)) return;
        break;
      case spdlog::level::warn:
        if (!warning_.load(std::memory_order_relaxed)) return;
        break;
      case spdlog::level::err:
      case spdlog::level::critical:
        if (!error_.load(std::memory_order_relaxed)) return;
        break;
      default:
        break;
    }
    target_->log(msg);
  }
  void flush_() override { target_->flush(); }
  void set_pattern_(const std::string& pattern) override {
    target_->set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern));
  }
  void set_formatter_(std::unique_ptr<spdlog::formatter> formatter) override {
    target_->set_formatter(std::move(formatter));
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> target_;
  std::atomic<bool> info_{true};
  std::atomic<bool> warning_{true};
  std::atomic<bool> error_{true};
};

struct LogState {
  Mutex mu;
  LogSettings settings KILN_GUARDED_BY(mu);
  // SetLogVerbosity's quiet: info off regardless of settings.info.
  bool quiet KILN_GUARDED_BY(mu) = false;
  std::shared_ptr<SeverityFilterSink> filter KILN_GUARDED_BY(mu);
};

LogState& State() {
  static LogState* state = new LogState();  // lives for the process; loggers may log at exit
  return *state;
}

spdlog::level::level_enum Threshold(const LogSettings& s) {
  if (s.verbose_level >= 2) return spdlog::level::trace;
  if (s.verbose_level == 1) return spdlog::level::debug;
  return spdlog::level::info;
}

std::unique_ptr<spdlog::formatter> Formatter(LogFormat format) {
  if (format == LogFormat::kIso8601) {
    return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ %^%L%$ %v",
                                                       spdlog::pattern_time_type::utc);
  }
  return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%d %H:%M:%S.%e %^%L%$ %v");
}

Status ApplyLocked(LogState& state, const LogSettings& settings) KILN_REQUIRES(state.mu) {
  if (state.filter == nullptr || settings.file != state.settings.file) {
    std::shared_ptr<spdlog::sinks::sink> target;
    if (settings.file.empty()) {
      target = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    } else {
      try {
        target = std::make_shared<spdlog::sinks::basic_file_sink_mt>(settings.file);
      } catch (const spdlog::spdlog_ex& e) {
        return Status::InvalidArgument("cannot open log file '" + settings.file + "': " + e.what());
      }
    }
    state.filter = std::make_shared<SeverityFilterSink>(std::move(target));
    auto logger = std::make_shared<spdlog::logger>("kiln", state.filter);
    spdlog::set_default_logger(std::move(logger));
  }
  LogSettings effective = settings;
  if (state.quiet) effective.info = false;
  state.filter->Configure(effective);
  spdlog::default_logger()->set_formatter(Formatter(settings.format));
  spdlog::set_level(Threshold(settings));
  spdlog::flush_on(spdlog::level::warn);
  state.settings = settings;
  return Status::OK();
}

}  // namespace

const char* LogFormatName(LogFormat format) {
  return format == LogFormat::kIso8601 ? "ISO8601" : "default";
}

bool ParseLogFormat(std::string_view name, LogFormat* format) {
  if (name == "default") {
    *format = LogFormat::kDefault;
    return true;
  }
  if (name == "ISO8601") {
    *format = LogFormat::kIso8601;
    return true;
  }
  return false;
}

LogSettings GetLogSettings() {
  LogState& state = State();
  MutexLock lock(state.mu);
  return state.settings;
}

Status ApplyLogSettings(const LogSettings& settings) {
  LogState& state = State();
  MutexLock lock(state.mu);
  return ApplyLocked(state, settings);
}

void SetLogVerbosity(int verbose, bool quiet) {
  LogState& state = State();
  MutexLock lock(state.mu);
  LogSettings s = state.settings;
  s.verbose_level = verbose > 0 ? static_cast<uint32_t>(verbose) : 0;
  state.quiet = quiet;
  (void)ApplyLocked(state, s);  // same destination: cannot fail
}

}  // namespace kiln
