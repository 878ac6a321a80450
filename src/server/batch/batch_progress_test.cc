// SPDX-License-Identifier: Apache-2.0
// Progress and summary text of kiln batch (batch_progress.h).

#include "server/batch/batch_progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::batch {
namespace {

TEST(FormatDurationTest, Table) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(7.4), "0:07");
  EXPECT_EQ(FormatDuration(59.6), "1:00");
  EXPECT_EQ(FormatDuration(754), "12:34");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "--:--");
  EXPECT_EQ(FormatDuration(std::numeric_limits<double>::infinity()), "--:--");
  EXPECT_EQ(FormatDuration(std::nan("")), "--:--");
}

TEST(RowsPerSecondTest, CountsOnlyThisRunsRows) {
  BatchCounts c{.total = 100, .skipped = 50, .succeeded = 8, .failed = 2};
  EXPECT_DOUBLE_EQ(RowsPerSecond(c, 2.0), 5.0);
  EXPECT_EQ(RowsPerSecond(c, 0), 0);
}

TEST(ProgressLineTest, RateEtaFailuresSkipped) {
  BatchCounts c{.total = 1000, .skipped = 200, .succeeded = 310, .failed = 2};
  // 312 rows in 2.6 s: 120 rows/s; 488 left: about 4 s.
  EXPECT_EQ(ProgressLine(c, 2.6),
            "512/1000 rows (51%), 120 rows/s, ETA 0:04, 2 failed, 200 skipped");
  BatchCounts start{.total = 10};
  EXPECT_EQ(ProgressLine(start, 0.5), "0/10 rows (0%), 0.0 rows/s, ETA --:--");
  BatchCounts all{.total = 3, .succeeded = 3};
  EXPECT_EQ(ProgressLine(all, 1.5), "3/3 rows (100%), 2.0 rows/s, ETA 0:00");
  BatchCounts none;
  EXPECT_EQ(ProgressLine(none, 1), "0/0 rows (100%), 0.0 rows/s, ETA 0:00");
}

TEST(ProgressBarTest, FitsTheWidth) {
  BatchCounts c{.total = 100, .succeeded = 25};
  const std::string bar = ProgressBar(c, 5, 80);
  EXPECT_LE(bar.size(), 80u);
  EXPECT_EQ(bar.substr(0, 12), "[##########.");
  EXPECT_NE(bar.find("] 25/100  25% 5.0 rows/s ETA 0:15"), std::string::npos) << bar;
  // No room for a bar: the counts alone.
  EXPECT_EQ(ProgressBar(c, 5, 20), "25/100  25% 5.0 rows/s ETA 0:15");
  BatchCounts f{.total = 4, .succeeded = 2, .failed = 2};
  const std::string full = ProgressBar(f, 1, 60);
  EXPECT_LE(full.size(), 60u);
  EXPECT_NE(full.find("4/4 100% 4.0 rows/s ETA 0:00 2 failed"), std::string::npos) << full;
  EXPECT_EQ(full.substr(0, full.find(']')).find('.'), std::string::npos) << "full: " << full;
}

TEST(SummaryLineTest, Counts) {
  BatchCounts c{.total = 1000, .skipped = 200, .succeeded = 798, .failed = 2};
  EXPECT_EQ(SummaryLine(c, 6.65),
            "1000 rows: 798 succeeded, 2 failed, 200 skipped (resumed) in 6.65 s (120 rows/s)");
  c.skipped_failed = 3;
  EXPECT_EQ(SummaryLine(c, 12.5),
            "1000 rows: 798 succeeded, 2 failed, 200 skipped (resumed; 3 of them had failed) in "
            "12.5 s (64.0 rows/s)");
}

}  // namespace
}  // namespace kiln::batch
