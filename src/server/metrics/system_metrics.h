// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host and process figures for /metrics, read from Linux /proc: CPU utilization from the
// difference of two /proc/stat readings, RAM total and used from /proc/meminfo (used = MemTotal
// - MemAvailable), and the process's resident set from /proc/self/status (VmRSS).
//
//   CpuUtilizationSampler cpu;            // takes a first reading
//   ...
//   std::optional<double> u = cpu.Sample();   // busy fraction since the previous Sample
//
// The parsers are pure functions of the file text (tested on fixed text). A figure that cannot
// be read is std::nullopt and its series is left out of the scrape.
//
// Thread safety: the functions are thread-safe; CpuUtilizationSampler::Sample is thread-safe.

#include <cstdint>
#include <optional>
#include <string_view>

#include "base/mutex.h"

namespace kiln {

struct CpuTimes {
  uint64_t idle = 0;   // idle + iowait jiffies
  uint64_t total = 0;  // every jiffy of the "cpu" line (guest time is already in user / nice)
};

// The aggregate "cpu " line of /proc/stat; nullopt when it is missing or malformed.
std::optional<CpuTimes> ParseProcStat(std::string_view text);

struct MemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;  // MemTotal - MemAvailable
};
// nullopt when MemTotal or MemAvailable is missing.
std::optional<MemoryInfo> ParseMeminfo(std::string_view text);

// VmRSS of /proc/<pid>/status text, in bytes; nullopt when missing.
std::optional<uint64_t> ParseStatusRss(std::string_view text);

// Readings of the live system (nullopt off Linux or when /proc is unreadable).
std::optional<MemoryInfo> ReadMemoryInfo();
std::optional<uint64_t> ReadProcessRssBytes();

// Busy fraction of all CPUs between two /proc/stat readings: 1 - idle delta / total delta,
// in [0, 1]; nullopt when no time passed between them.
std::optional<double> CpuUtilization(const CpuTimes& before, const CpuTimes& after);

class CpuUtilizationSampler {
 public:
  CpuUtilizationSampler();
  // Utilization since the previous Sample (or construction). When too little time passed for
  // the counters to move, the previous answer is repeated.
  std::optional<double> Sample() KILN_EXCLUDES(mu_);

 private:
  Mutex mu_;
  std::optional<CpuTimes> last_ KILN_GUARDED_BY(mu_);
  std::optional<double> last_value_ KILN_GUARDED_BY(mu_);
};

}  // namespace kiln
