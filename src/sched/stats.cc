// SPDX-License-Identifier: Apache-2.0
#include "sched/stats.h"

namespace kiln {

void StatsCollector::RecordExecution(uint64_t batch_size, uint64_t input_ns, uint64_t infer_ns,
                                     uint64_t output_ns) {
  std::lock_guard lock(mu_);
  ++stats_.execution_count;
  BatchStatistics& b = stats_.batches[batch_size];
  b.compute_input.Add(input_ns);
  b.compute_infer.Add(infer_ns);
  b.compute_output.Add(output_ns);
}

void StatsCollector::RecordSuccess(uint64_t batch_elements, uint64_t queue_ns, uint64_t input_ns,
                                   uint64_t infer_ns, uint64_t output_ns, uint64_t total_ns,
                                   uint64_t now_ms) {
  std::lock_guard lock(mu_);
  stats_.inference_count += batch_elements;
  stats_.last_inference_ms = now_ms;
  InferStatistics& s = stats_.inference;
  s.success.Add(total_ns);
  s.queue.Add(queue_ns);
  s.compute_input.Add(input_ns);
  s.compute_infer.Add(infer_ns);
  s.compute_output.Add(output_ns);
}

void StatsCollector::RecordFailure(uint64_t total_ns, uint64_t now_ms) {
  std::lock_guard lock(mu_);
  stats_.inference.fail.Add(total_ns);
  stats_.last_inference_ms = now_ms;
}

void StatsCollector::Reset() {
  std::lock_guard lock(mu_);
  stats_ = ModelStatistics{};
}

ModelStatistics StatsCollector::Snapshot() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace kiln
