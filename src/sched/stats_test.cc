// SPDX-License-Identifier: Apache-2.0
#include "sched/stats.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(StatsCollectorTest, ChargesBatchTimeToEveryRequestAndCountsElements) {
  StatsCollector c;
  c.RecordExecution(3, 10, 100, 5);
  c.RecordSuccess(2, 7, 10, 100, 5, 130, 1000);
  c.RecordSuccess(1, 9, 10, 100, 5, 140, 1001);
  c.RecordFailure(50, 1002);
  ModelStatistics s = c.Snapshot();
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.inference_count, 3u);
  EXPECT_EQ(s.last_inference_ms, 1002u);
  EXPECT_EQ(s.inference.success.count, 2u);
  EXPECT_EQ(s.inference.success.ns, 270u);
  EXPECT_EQ(s.inference.queue.ns, 16u);
  EXPECT_EQ(s.inference.compute_infer.count, 2u);
  EXPECT_EQ(s.inference.compute_infer.ns, 200u);
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.inference.fail.ns, 50u);
  ASSERT_EQ(s.batches.count(3), 1u);
  EXPECT_EQ(s.batches.at(3).compute_infer.count, 1u);
  EXPECT_EQ(s.batches.at(3).compute_output.ns, 5u);
  EXPECT_EQ(s.inference.cache_hit.count, 0u);
  c.Reset();
  s = c.Snapshot();
  EXPECT_EQ(s.execution_count, 0u);
  EXPECT_EQ(s.inference.success.count, 0u);
  EXPECT_TRUE(s.batches.empty());
}

}  // namespace
}  // namespace kiln
