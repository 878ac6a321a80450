// SPDX-License-Identifier: Apache-2.0
#pragma once
// The progress and summary text of `kiln batch` (docs/batch.md): pure functions of the row
// counts and the elapsed time, so the command only decides when to print them.
//
//   BatchCounts c{.total = 1000, .skipped = 200};
//   ... c.succeeded / c.failed grow as rows finish ...
//   std::fprintf(stderr, "\r%s\x1b[K", ProgressBar(c, elapsed_s, 80).c_str());  // a terminal
//   std::fprintf(stderr, "%s\n", ProgressLine(c, elapsed_s).c_str());            // a log
//   std::fprintf(stderr, "%s\n", SummaryLine(c, elapsed_s).c_str());             // at the end
//
// The rate counts the rows finished by this run (not the skipped ones) over its elapsed time;
// the ETA is the rows left at that rate ("--:--" until a row has finished).
//
// Thread safety: pure functions.

#include <cstdint>
#include <string>

namespace kiln::batch {

struct BatchCounts {
  int64_t total = 0;           // rows of the input
  int64_t skipped = 0;         // finished by an earlier run (--resume): not redone
  int64_t skipped_failed = 0;  // of those, the ones that failed
  int64_t succeeded = 0;       // finished by this run, with a result
  int64_t failed = 0;          // finished by this run, with an error

  int64_t finished() const { return succeeded + failed; }
  int64_t done() const { return skipped + finished(); }
  int64_t left() const { return total > done() ? total - done() : 0; }
};

// Rows per second finished by this run; 0 before any time has passed.
double RowsPerSecond(const BatchCounts& counts, double elapsed_s);

// "0:07", "12:34", "1:02:03"; "--:--" for a negative or non-finite time.
std::string FormatDuration(double seconds);

// One terminal line of at most `width` columns (at least the counts, whatever the width):
// "[########......] 512/1000  51%  120.3 rows/s  ETA 0:04  2 failed".
std::string ProgressBar(const BatchCounts& counts, double elapsed_s, int width);

// A log line: "512/1000 rows (51%), 120.3 rows/s, ETA 0:04, 2 failed, 200 skipped".
std::string ProgressLine(const BatchCounts& counts, double elapsed_s);

// "1000 rows: 798 succeeded, 2 failed, 200 skipped (resumed) in 6.65 s (120 rows/s)"; the
// skipped part reads "200 skipped (resumed; 3 of them had failed)" when some had.
std::string SummaryLine(const BatchCounts& counts, double elapsed_s);

}  // namespace kiln::batch
