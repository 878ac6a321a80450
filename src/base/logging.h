// SPDX-License-Identifier: Apache-2.0
#pragma once
// Logging: thin wrapper over spdlog so the rest of the code has one way to log and one place
// that sets the level. Messages use fmt syntax.
//
//   KILN_LOG_INFO("loaded model '{}' version {}", name, version);
//
// Thread safety: safe from any thread.

#include <spdlog/spdlog.h>

namespace kiln {

// verbose 0: info and above; 1+: debug; 2+: trace. quiet: warnings and errors only.
void SetLogVerbosity(int verbose, bool quiet = false);

}  // namespace kiln

#define KILN_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define KILN_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define KILN_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define KILN_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define KILN_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
