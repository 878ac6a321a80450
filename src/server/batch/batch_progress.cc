// SPDX-License-Identifier: Apache-2.0
// Progress and summary text of kiln batch (batch_progress.h).

#include "server/batch/batch_progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::batch {
namespace {

// Percent of the rows done, rounded down (100 only when all are).
int64_t Percent(const BatchCounts& c) {
  if (c.total <= 0) return 100;
  return std::min<int64_t>(100, c.done() * 100 / c.total);
}

std::string Rate(double rate) {
  return rate >= 100 ? fmt::format("{:.0f}", rate) : fmt::format("{:.1f}", rate);
}

std::string Eta(const BatchCounts& c, double elapsed_s) {
  if (c.left() == 0) return FormatDuration(0);
  const double rate = RowsPerSecond(c, elapsed_s);
  if (c.finished() == 0 || rate <= 0) return FormatDuration(-1);
  return FormatDuration(static_cast<double>(c.left()) / rate);
}

}  // namespace

double RowsPerSecond(const BatchCounts& counts, double elapsed_s) {
  if (!(elapsed_s > 0)) return 0;
  return static_cast<double>(counts.finished()) / elapsed_s;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  // Past about 11 million days the integer would overflow; nobody waits that long.
  const int64_t s = static_cast<int64_t>(std::min(seconds, 1e12) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string ProgressBar(const BatchCounts& counts, double elapsed_s, int width) {
  std::string tail =
      fmt::format(" {}/{} {:3}% {} rows/s ETA {}", counts.done(), counts.total, Percent(counts),
                  Rate(RowsPerSecond(counts, elapsed_s)), Eta(counts, elapsed_s));
  if (counts.failed > 0) tail += fmt::format(" {} failed", counts.failed);
  // The bar takes what is left, between 10 and 40 cells; none below 10.
  const int room = width - static_cast<int>(tail.size()) - 2;
  if (room < 10) return tail.substr(1);
  const int cells = std::min(room, 40);
  const int filled =
      counts.total <= 0
          ? cells
          : static_cast<int>(std::min<int64_t>(cells, counts.done() * cells / counts.total));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(cells - filled), '.') + "]" + tail;
}

std::string ProgressLine(const BatchCounts& counts, double elapsed_s) {
  std::string line =
      fmt::format("{}/{} rows ({}%), {} rows/s, ETA {}", counts.done(), counts.total,
                  Percent(counts), Rate(RowsPerSecond(counts, elapsed_s)), Eta(counts, elapsed_s));
  if (counts.failed > 0) line += fmt::format(", {} failed", counts.failed);
  if (counts.skipped > 0) line += fmt::format(", {} skipped", counts.skipped);
  return line;
}

std::string SummaryLine(const BatchCounts& counts, double elapsed_s) {
  const double elapsed = std::max(0.0, elapsed_s);
  return fmt::format("{} rows: {} succeeded, {} failed, {} skipped (resumed{}) in {} s ({} rows/s)",
                     counts.total, counts.succeeded, counts.failed, counts.skipped,
                     counts.skipped_failed > 0
                         ? fmt::format("; {} of them had failed", counts.skipped_failed)
                         : std::string(),
                     elapsed < 10 ? fmt::format("{:.2f}", elapsed) : fmt::format("{:.1f}", elapsed),
                     Rate(RowsPerSecond(counts, elapsed)));
}

}  // namespace kiln::batch
