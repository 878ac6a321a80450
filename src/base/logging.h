// SPDX-License-Identifier: Apache-2.0
#pragma once
// Logging: thin wrapper over spdlog so the rest of the code has one way to log and one place
// that sets what is logged, where and how. Messages use fmt syntax.
//
//   KILN_LOG_INFO("loaded model '{}' version {}", name, version);
//
// What is logged is a LogSettings value (the `kiln serve --log-*` flags at start, the
// /v2/logging endpoint and the gRPC LogSettings RPC at run time): each severity switched on or
// off, a verbose level for debug/trace lines, a line format, and a destination (standard error
// or a file chosen at start).
//
// Thread safety: logging and Get/ApplyLogSettings are safe from any thread.

#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace kiln {

enum class LogFormat : uint8_t {
  kDefault,  // "2026-11-30 15:37:07.123 I message", local time
  kIso8601,  // "2026-11-30T15:37:07.123Z I message", UTC
};

struct LogSettings {
  std::string file;  // empty: standard error
  bool info = true;
  bool warning = true;
  bool error = true;
  uint32_t verbose_level = 0;  // 0: no debug lines; 1: debug; 2+: trace as well
  LogFormat format = LogFormat::kDefault;
};

// "default" / "ISO8601", and back (false for any other name).
const char* LogFormatName(LogFormat format);
bool ParseLogFormat(std::string_view name, LogFormat* format);

// The settings in force.
LogSettings GetLogSettings();
// Makes `settings` the settings in force. Opening a new log file may fail (the message names
// the file); nothing changes then.
Status ApplyLogSettings(const LogSettings& settings);

// verbose 0: info and above; 1+: debug; 2+: trace. quiet: warnings and errors only. Keeps the
// destination and format.
void SetLogVerbosity(int verbose, bool quiet = false);

}  // namespace kiln

#define KILN_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define KILN_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define KILN_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define KILN_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define KILN_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
