// SPDX-License-Identifier: Apache-2.0
#include "sched/stats.h"

#include <algorithm>

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
void Add(const StatDuration& from, StatDuration* into) {
  into->count += from.count;
  into->ns += from.ns;
}

void Add(const Histogram& from, Histogram* into) {
  if (from.bounds != into->bounds) return;  // same catalogue on both sides
  for (size_t i = 0; i < from.counts.size(); ++i) into->counts[i] += from.counts[i];
  into->count += from.count;
  into->sum += from.sum;
}

}  // namespace

void MergeTensorStatistics(const ModelStatistics& from, ModelStatistics* into) {
  into->last_inference_ms = std::max(into->last_inference_ms, from.last_inference_ms);
  into->inference_count += from.inference_count;
  into->execution_count += from.execution_count;
  const InferStatistics& f = from.inference;
  InferStatistics& t = into->inference;
  Add(f.success, &t.success);
  Add(f.fail, &t.fail);
  Add(f.queue, &t.queue);
  Add(f.compute_input, &t.compute_input);
  Add(f.compute_infer, &t.compute_infer);
  Add(f.compute_output, &t.compute_output);
  Add(f.cache_hit, &t.cache_hit);
  Add(f.cache_miss, &t.cache_miss);
  for (const auto& [size, b] : from.batches) {
    BatchStatistics& to = into->batches[size];
    Add(b.compute_input, &to.compute_input);
    Add(b.compute_infer, &to.compute_infer);
    Add(b.compute_output, &to.compute_output);
  }
  for (size_t i = 0; i < from.failures.size(); ++i) into->failures[i] += from.failures[i];
  Add(from.request_seconds, &into->request_seconds);
  Add(from.queue_seconds, &into->queue_seconds);
  Add(from.compute_seconds, &into->compute_seconds);
  Add(from.batch_size, &into->batch_size);
}

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
