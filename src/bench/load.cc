// SPDX-License-Identifier: Apache-2.0
#include "bench/load.h"

#include <algorithm>

namespace kiln::bench {

Status LoadEngine::Start(const LoadConfig& config, int64_t start_ns) {
  if (Status s = CheckReachable(); !s.ok()) return s;
  stop_ = false;
  sinks_.clear();
  const int slots = config.open_loop ? config.max_inflight : config.concurrency;
  const int workers = std::max(1, std::min(config.threads, slots));
  for (int t = 0; t < workers; ++t) {
    sinks_.push_back(std::make_unique<SampleSink>());
    const int share = slots / workers + (t < slots % workers ? 1 : 0);
    workers_.push_back(MakeWorker({&config, t, workers, share, sinks_.back().get(), start_ns}));
  }
  for (auto& w : workers_) threads_.emplace_back([w = w.get()] { w->Run(); });
  return Status::OK();
}

void LoadEngine::Stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
  workers_.clear();  // the sinks stay: TakeSamples still works after Stop
}

}  // namespace kiln::bench
