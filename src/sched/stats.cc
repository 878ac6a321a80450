// SPDX-License-Identifier: Apache-2.0
#include "sched/stats.h"

namespace kiln {

std::string_view FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kQueueFull:
      return "queue_full";
    case FailureReason::kTimeout:
      return "timeout";
    case FailureReason::kShuttingDown:
      return "shutting_down";
    case FailureReason::kInvalid:
      return "invalid";
    case FailureReason::kCanceled:
      return "canceled";
    case FailureReason::kBackend:
      return "backend";
    case FailureReason::kOther:
      return "other";
  }
  return "other";
}

namespace {
double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// Zero counters, same identity.
void ClearCounters(EnsembleStepStatistics* s) {
  s->success = s->fail = s->queue = {};
  s->compute_input = s->compute_infer = s->compute_output = {};
}
}  // namespace

void StatsCollector::RecordExecution(uint64_t batch_size, uint64_t input_ns, uint64_t infer_ns,
                                     uint64_t output_ns) {
  MutexLock lock(mu_);
  ++stats_.execution_count;
  stats_.batch_size.Observe(static_cast<double>(batch_size));
  BatchStatistics& b = stats_.batches[batch_size];
  b.compute_input.Add(input_ns);
  b.compute_infer.Add(infer_ns);
  b.compute_output.Add(output_ns);
}

void StatsCollector::RecordSuccess(uint64_t batch_elements, uint64_t queue_ns, uint64_t input_ns,
                                   uint64_t infer_ns, uint64_t output_ns, uint64_t total_ns,
                                   uint64_t now_ms) {
  MutexLock lock(mu_);
  stats_.inference_count += batch_elements;
  stats_.last_inference_ms = now_ms;
  InferStatistics& s = stats_.inference;
  s.success.Add(total_ns);
  s.queue.Add(queue_ns);
  s.compute_input.Add(input_ns);
  s.compute_infer.Add(infer_ns);
  s.compute_output.Add(output_ns);
  stats_.request_seconds.Observe(Seconds(total_ns));
  stats_.queue_seconds.Observe(Seconds(queue_ns));
  stats_.compute_seconds.Observe(Seconds(input_ns + infer_ns + output_ns));
}

void StatsCollector::RecordFailure(FailureReason reason, uint64_t total_ns, uint64_t now_ms) {
  MutexLock lock(mu_);
  stats_.inference.fail.Add(total_ns);
  ++stats_.failures[static_cast<size_t>(reason)];
  stats_.last_inference_ms = now_ms;
}

void StatsCollector::RecordCacheHit(uint64_t lookup_ns, uint64_t total_ns, uint64_t now_ms) {
  MutexLock lock(mu_);
  stats_.last_inference_ms = now_ms;
  InferStatistics& s = stats_.inference;
  s.success.Add(total_ns);
  s.queue.Add(0);
  s.cache_hit.Add(lookup_ns);
  stats_.request_seconds.Observe(Seconds(total_ns));
  stats_.queue_seconds.Observe(0);
}

void StatsCollector::RecordCacheMiss(uint64_t ns) {
  MutexLock lock(mu_);
  stats_.inference.cache_miss.Add(ns);
}

void StatsCollector::SetEnsembleSteps(std::vector<EnsembleStepStatistics> steps) {
  for (EnsembleStepStatistics& s : steps) ClearCounters(&s);
  MutexLock lock(mu_);
  stats_.ensemble_steps = std::move(steps);
}

void StatsCollector::RecordStepSuccess(size_t step, uint64_t total_ns, uint64_t queue_ns,
                                       uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
  MutexLock lock(mu_);
  KILN_CHECK(step < stats_.ensemble_steps.size(), "RecordStepSuccess: step ", step, " of ",
             stats_.ensemble_steps.size());
  EnsembleStepStatistics& s = stats_.ensemble_steps[step];
  s.success.Add(total_ns);
  s.queue.Add(queue_ns);
  s.compute_input.Add(input_ns);
  s.compute_infer.Add(infer_ns);
  s.compute_output.Add(output_ns);
}

void StatsCollector::RecordStepFailure(size_t step, uint64_t total_ns) {
  MutexLock lock(mu_);
  KILN_CHECK(step < stats_.ensemble_steps.size(), "RecordStepFailure: step ", step, " of ",
             stats_.ensemble_steps.size());
  stats_.ensemble_steps[step].fail.Add(total_ns);
}

void StatsCollector::Reset() {
  MutexLock lock(mu_);
  std::vector<EnsembleStepStatistics> steps = std::move(stats_.ensemble_steps);
  stats_ = ModelStatistics{};
  for (EnsembleStepStatistics& s : steps) ClearCounters(&s);
  stats_.ensemble_steps = std::move(steps);
}

ModelStatistics StatsCollector::Snapshot() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace kiln
