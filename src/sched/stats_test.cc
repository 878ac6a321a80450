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
  c.RecordFailure(FailureReason::kBackend, 50, 1002);
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

TEST(StatsCollectorTest, EnsembleStepsCountTheirStepRequests) {
  StatsCollector c;
  EXPECT_TRUE(c.Snapshot().ensemble_steps.empty());  // not an ensemble
  EnsembleStepStatistics declared;
  declared.step = 1;
  declared.model = "b";
  declared.model_version = 3;
  declared.success.Add(99);  // ignored: counters start at zero
  EnsembleStepStatistics first;
  first.model = "a";
  c.SetEnsembleSteps({first, declared});
  c.RecordStepSuccess(1, 100, 10, 1, 20, 2);
  c.RecordStepSuccess(1, 200, 30, 3, 40, 4);
  c.RecordStepFailure(1, 7);
  c.RecordStepFailure(0, 5);
  ModelStatistics s = c.Snapshot();
  ASSERT_EQ(s.ensemble_steps.size(), 2u);
  const EnsembleStepStatistics& a = s.ensemble_steps[0];
  EXPECT_EQ(a.step, 0);
  EXPECT_EQ(a.model, "a");
  EXPECT_EQ(a.model_version, -1);
  EXPECT_EQ(a.success.count, 0u);
  EXPECT_EQ(a.fail.count, 1u);
  EXPECT_EQ(a.fail.ns, 5u);
  const EnsembleStepStatistics& b = s.ensemble_steps[1];
  EXPECT_EQ(b.step, 1);
  EXPECT_EQ(b.model, "b");
  EXPECT_EQ(b.model_version, 3);
  EXPECT_EQ(b.success.count, 2u);
  EXPECT_EQ(b.success.ns, 300u);
  EXPECT_EQ(b.fail.count, 1u);
  EXPECT_EQ(b.fail.ns, 7u);
  EXPECT_EQ(b.queue.count, 2u);
  EXPECT_EQ(b.queue.ns, 40u);
  EXPECT_EQ(b.compute_input.ns, 4u);
  EXPECT_EQ(b.compute_infer.count, 2u);
  EXPECT_EQ(b.compute_infer.ns, 60u);
  EXPECT_EQ(b.compute_output.ns, 6u);
  // The ensemble's own counters are separate.
  EXPECT_EQ(s.inference.success.count, 0u);
  // Reset zeroes the counters and keeps the steps.
  c.Reset();
  s = c.Snapshot();
  ASSERT_EQ(s.ensemble_steps.size(), 2u);
  EXPECT_EQ(s.ensemble_steps[1].model, "b");
  EXPECT_EQ(s.ensemble_steps[1].model_version, 3);
  EXPECT_EQ(s.ensemble_steps[1].success.count, 0u);
  EXPECT_EQ(s.ensemble_steps[1].queue.ns, 0u);
  EXPECT_EQ(s.ensemble_steps[0].fail.count, 0u);
}

TEST(StatsCollectorTest, CountsFailuresByReason) {
  StatsCollector c;
  c.RecordFailure(FailureReason::kQueueFull, 0, 1);
  c.RecordFailure(FailureReason::kQueueFull, 0, 2);
  c.RecordFailure(FailureReason::kTimeout, 40, 3);
  c.RecordFailure(FailureReason::kInvalid, 0, 4);
  const ModelStatistics s = c.Snapshot();
  EXPECT_EQ(s.inference.fail.count, 4u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kQueueFull)], 2u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kTimeout)], 1u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kInvalid)], 1u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kBackend)], 0u);
  EXPECT_EQ(FailureReasonName(FailureReason::kQueueFull), "queue_full");
  EXPECT_EQ(FailureReasonName(FailureReason::kShuttingDown), "shutting_down");
}

TEST(StatsCollectorTest, HistogramsCountSuccessesAndExecutions) {
  StatsCollector c;
  c.RecordExecution(3, 0, 0, 0);
  c.RecordExecution(1, 0, 0, 0);
  c.RecordExecution(5, 0, 0, 0);
  // total 2 ms, queue 0.2 ms, compute 0.1 + 0.3 + 0.1 = 0.5 ms.
  c.RecordSuccess(1, 200'000, 100'000, 300'000, 100'000, 2'000'000, 1);
  // total exactly on the 1 ms bound (bounds are inclusive), queue 0.
  c.RecordSuccess(1, 0, 0, 0, 0, 1'000'000, 2);
  c.RecordFailure(FailureReason::kBackend, 5'000'000, 3);  // failures are not observed
  const ModelStatistics s = c.Snapshot();

  const auto bucket_of = [](const Histogram& h, double bound) {
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      if (h.bounds[i] == bound) return h.counts[i];
    }
    ADD_FAILURE() << "no bucket " << bound;
    return uint64_t{0};
  };
  EXPECT_EQ(s.request_seconds.count, 2u);
  EXPECT_DOUBLE_EQ(s.request_seconds.sum, 0.003);
  EXPECT_EQ(bucket_of(s.request_seconds, 0.001), 1u);
  EXPECT_EQ(bucket_of(s.request_seconds, 0.0025), 1u);
  EXPECT_EQ(s.queue_seconds.count, 2u);
  EXPECT_EQ(bucket_of(s.queue_seconds, 0.00025), 1u);  // 0.2 ms
  EXPECT_EQ(bucket_of(s.queue_seconds, 0.00005), 1u);  // 0
  EXPECT_EQ(s.compute_seconds.count, 2u);
  EXPECT_DOUBLE_EQ(s.compute_seconds.sum, 0.0005);
  EXPECT_EQ(bucket_of(s.compute_seconds, 0.0005), 1u);

  EXPECT_EQ(s.batch_size.count, s.execution_count);
  EXPECT_DOUBLE_EQ(s.batch_size.sum, 9);
  EXPECT_EQ(bucket_of(s.batch_size, 1), 1u);
  EXPECT_EQ(bucket_of(s.batch_size, 4), 1u);  // 3
  EXPECT_EQ(bucket_of(s.batch_size, 8), 1u);  // 5
}

TEST(StatsCollectorTest, MergeTensorStatisticsAddsCountsAndHistograms) {
  StatsCollector a, b;
  a.RecordExecution(2, 10, 20, 30);
  a.RecordSuccess(2, 100, 10, 20, 30, 1'000'000, 5);
  b.RecordExecution(2, 1, 2, 3);
  b.RecordExecution(4, 1, 2, 3);
  b.RecordSuccess(4, 200, 1, 2, 3, 3'000'000, 9);
  b.RecordFailure(FailureReason::kBackend, 7, 11);
  ModelStatistics merged = a.Snapshot();
  MergeTensorStatistics(b.Snapshot(), &merged);
  EXPECT_EQ(merged.inference_count, 6u);
  EXPECT_EQ(merged.execution_count, 3u);
  EXPECT_EQ(merged.last_inference_ms, 11u);  // the later of the two
  EXPECT_EQ(merged.inference.success.count, 2u);
  EXPECT_EQ(merged.inference.queue.ns, 300u);
  EXPECT_EQ(merged.inference.fail.count, 1u);
  EXPECT_EQ(merged.failures[static_cast<size_t>(FailureReason::kBackend)], 1u);
  EXPECT_EQ(merged.batches.at(2).compute_infer.ns, 22u);
  EXPECT_EQ(merged.batches.at(4).compute_infer.count, 1u);
  EXPECT_EQ(merged.request_seconds.count, 2u);
  EXPECT_DOUBLE_EQ(merged.request_seconds.sum, 0.004);
  EXPECT_EQ(merged.batch_size.count, 3u);
  EXPECT_DOUBLE_EQ(merged.batch_size.sum, 8);
}

// Response cache hits are successes that run nothing: the reference's count rules (KSERVE-V2.md
// 1.6) must hold, or perf_analyzer's arithmetic breaks.
TEST(StatsCollectorTest, CacheHitsAndMissesFollowTheReferenceCounts) {
  StatsCollector c;
  // One miss that ran (batch of 2 elements), then two hits of 3 us and 5 us lookups.
  c.RecordExecution(2, 10, 100, 5);
  c.RecordSuccess(2, 7, 10, 100, 5, 130, 1000);
  c.RecordCacheMiss(40);
  c.RecordCacheHit(3000, 4000, 1001);
  c.RecordCacheHit(5000, 6000, 1002);
  const ModelStatistics s = c.Snapshot();
  EXPECT_EQ(s.inference.success.count, 3u);
  EXPECT_EQ(s.inference.success.ns, 130u + 4000 + 6000);
  EXPECT_EQ(s.inference.queue.count, 3u);  // == success.count
  EXPECT_EQ(s.inference.queue.ns, 7u);     // hits never queue
  EXPECT_EQ(s.inference.cache_hit.count, 2u);
  EXPECT_EQ(s.inference.cache_hit.ns, 8000u);
  EXPECT_EQ(s.inference.cache_miss.count, 1u);
  EXPECT_EQ(s.inference.cache_miss.ns, 40u);
  EXPECT_EQ(s.inference.cache_hit.count + s.inference.cache_miss.count, s.inference.success.count);
  // compute counts: success - cache_hit, all three equal.
  EXPECT_EQ(s.inference.compute_input.count, 1u);
  EXPECT_EQ(s.inference.compute_infer.count, 1u);
  EXPECT_EQ(s.inference.compute_output.count, 1u);
  EXPECT_EQ(s.inference_count, 2u);  // the miss's 2 elements; hits excluded
  EXPECT_EQ(s.execution_count, 1u);
  EXPECT_EQ(s.last_inference_ms, 1002u);
  EXPECT_EQ(s.request_seconds.count, 3u);
  EXPECT_EQ(s.queue_seconds.count, 3u);
  EXPECT_EQ(s.compute_seconds.count, 1u);
  EXPECT_FALSE(s.response_cache);  // set by the model, not the collector
}

TEST(HistogramTest, BucketsAreUpperBoundInclusiveWithOverflow) {
  Histogram h({1, 10});
  ASSERT_EQ(h.counts.size(), 3u);
  for (double v : {0.5, 1.0, 1.5, 10.0, 11.0, 1e9}) h.Observe(v);
  EXPECT_EQ(h.counts[0], 2u);
  EXPECT_EQ(h.counts[1], 2u);
  EXPECT_EQ(h.counts[2], 2u);
  EXPECT_EQ(h.count, 6u);
  EXPECT_DOUBLE_EQ(h.sum, 0.5 + 1 + 1.5 + 10 + 11 + 1e9);
  Histogram empty;
  empty.Observe(3);
  EXPECT_EQ(empty.counts, std::vector<uint64_t>{1});
}

}  // namespace
}  // namespace kiln
