// SPDX-License-Identifier: Apache-2.0
// Prints a /metrics document with every family (the response cache's and the ensemble steps'
// included), three model versions (one with a name that needs escaping, one an ensemble) and
// awkward values, for the independent format check (tests/server/prometheus_text.py).
#include <cstdio>
#include <vector>

#include "server/metrics/metrics_report.h"

int main() {
  using namespace kiln;
  StatsCollector a;
  a.RecordExecution(3, 1000, 250'000, 1000);
  a.RecordExecution(1, 1000, 90'000, 1000);
  a.RecordSuccess(2, 40'000, 1000, 250'000, 1000, 300'000, 1);
  a.RecordSuccess(1, 45'000, 1000, 250'000, 1000, 310'000, 1);
  a.RecordSuccess(1, 0, 1000, 90'000, 1000, 20'000'000'000, 1);  // 20 s: above every bound
  a.RecordFailure(FailureReason::kQueueFull, 0, 2);
  a.RecordFailure(FailureReason::kBackend, 5000, 2);
  a.RecordFailure(FailureReason::kInvalid, 0, 2);
  a.RecordCacheMiss(1'234);
  a.RecordCacheHit(2'000, 3'000, 3);
  StatsCollector b;
  StatsCollector e;  // an ensemble of two steps
  EnsembleStepStatistics step;
  step.model = "pre\"process";
  std::vector<EnsembleStepStatistics> steps = {step, step};
  steps[1].step = 1;
  steps[1].model = "classify";
  e.SetEnsembleSteps(steps);
  e.RecordStepSuccess(0, 1'500'000, 20'000, 1'000, 900'000, 1'000);
  e.RecordStepFailure(1, 300);

  std::vector<ModelMetrics> models(3);
  models[0].name = "add_sub";
  models[0].version = 1;
  models[0].stats = a.Snapshot();
  models[0].pending_requests = 2;
  models[0].load_duration_seconds = 0.0123;
  models[0].weight_bytes = 4096;
  models[0].stats.response_cache = true;
  models[1].name = "we\"ird\\name\nline";
  models[1].version = 12;
  models[1].stats = b.Snapshot();
  models[2].name = "pipeline";
  models[2].version = 1;
  models[2].stats = e.Snapshot();
  SystemMetrics system;
  system.cpu_utilization = 0.375;
  system.memory = MemoryInfo{25'000'000'000, 1'234'567'890};
  system.process_rss_bytes = 52'428'800;
  ResponseCacheStats cache;
  cache.capacity_bytes = 1 << 20;
  cache.used_bytes = 3000;
  cache.entries = 3;
  cache.lookups = 10;
  cache.hits = 6;
  cache.misses = 4;
  cache.insertions = 4;
  cache.evictions = 1;
  cache.lookup_ns = 5000;
  cache.insertion_ns = 7000;
  system.response_cache = cache;
  const std::string text = RenderMetrics(models, system);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
