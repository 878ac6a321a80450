// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/system_metrics.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln {
namespace {

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Parses the unsigned numbers of `text` separated by blanks; stops at the first non-number.
std::vector<uint64_t> ParseNumbers(std::string_view text) {
  std::vector<uint64_t> out;
  size_t i = 0;
  for (;;) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i == text.size()) break;
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (ec != std::errc()) break;
    out.push_back(v);
    i = static_cast<size_t>(end - text.data());
  }
  return out;
}

// The line starting with `key` (e.g. "MemTotal:"), without the key; nullopt when absent.
std::optional<std::string_view> FindLine(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with(key)) return line.substr(key.size());
    pos = end + 1;
  }
  return std::nullopt;
}

// "  16318960 kB" -> bytes.
std::optional<uint64_t> KilobytesField(std::string_view text, std::string_view key) {
  std::optional<std::string_view> rest = FindLine(text, key);
  if (!rest) return std::nullopt;
  std::vector<uint64_t> n = ParseNumbers(*rest);
  if (n.empty()) return std::nullopt;
  return n[0] * 1024;
}

}  // namespace

std::optional<CpuTimes> ParseProcStat(std::string_view text) {
  std::optional<std::string_view> rest = FindLine(text, "cpu ");
  if (!rest) return std::nullopt;
  const std::vector<uint64_t> n = ParseNumbers(*rest);
  // user nice system idle iowait irq softirq steal [guest guest_nice]
  if (n.size() < 4) return std::nullopt;
  CpuTimes t;
  for (size_t i = 0; i < n.size() && i < 8; ++i) t.total += n[i];
  t.idle = n[3] + (n.size() > 4 ? n[4] : 0);
  return t;
}

std::optional<MemoryInfo> ParseMeminfo(std::string_view text) {
  const std::optional<uint64_t> total = KilobytesField(text, "MemTotal:");
  const std::optional<uint64_t> available = KilobytesField(text, "MemAvailable:");
  if (!total || !available) return std::nullopt;
  return MemoryInfo{*total, *total > *available ? *total - *available : 0};
}

std::optional<uint64_t> ParseStatusRss(std::string_view text) {
  return KilobytesField(text, "VmRSS:");
}

std::optional<MemoryInfo> ReadMemoryInfo() {
  const std::optional<std::string> text = ReadFile("/proc/meminfo");
  return text ? ParseMeminfo(*text) : std::nullopt;
}

std::optional<uint64_t> ReadProcessRssBytes() {
  const std::optional<std::string> text = ReadFile("/proc/self/status");
  return text ? ParseStatusRss(*text) : std::nullopt;
}

std::optional<double> CpuUtilization(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total) return std::nullopt;
  const double total = static_cast<double>(after.total - before.total);
  const double idle =
      after.idle > before.idle ? static_cast<double>(after.idle - before.idle) : 0.0;
  const double busy = 1.0 - idle / total;
  return busy < 0 ? 0.0 : (busy > 1 ? 1.0 : busy);
}

namespace {
std::optional<CpuTimes> ReadCpuTimes() {
  const std::optional<std::string> text = ReadFile("/proc/stat");
  return text ? ParseProcStat(*text) : std::nullopt;
}
}  // namespace

CpuUtilizationSampler::CpuUtilizationSampler() : last_(ReadCpuTimes()) {}

std::optional<double> CpuUtilizationSampler::Sample() {
  const std::optional<CpuTimes> now = ReadCpuTimes();
  MutexLock lock(mu_);
  if (!now) return std::nullopt;
  if (last_) {
    const std::optional<double> u = CpuUtilization(*last_, *now);
    if (!u) return last_value_;
    last_value_ = u;
  }
  last_ = now;
  return last_value_;
}

}  // namespace kiln
