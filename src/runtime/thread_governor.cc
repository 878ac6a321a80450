// SPDX-License-Identifier: Apache-2.0
#include "runtime/thread_governor.h"

#include <algorithm>

namespace kiln {

ThreadGovernor::ThreadGovernor(ThreadGovernorOptions options)
    : options_(options),
      chosen_(std::max(1, options.max_threads)),
      probe_period_(std::max(1, options.first_probe_period)) {}

int ThreadGovernor::Choose() {
  if (options_.max_threads <= 1) return 1;
  MutexLock lock(mu_);
  // No probe before the full width has one measured run (its first builds the plans).
  if (chosen_ != 1 && wide_.samples < 2) return chosen_;
  if (++runs_since_probe_ < probe_period_) return chosen_;
  runs_since_probe_ = 0;
  return chosen_ == 1 ? options_.max_threads : 1;
}

void ThreadGovernor::Record(int threads, int64_t duration_ns) {
  if (options_.max_threads <= 1 || duration_ns <= 0) return;
  MutexLock lock(mu_);
  Width& w = width(threads);
  // The first run at a width builds its kernels' plans (oneDNN primitives made for that many
  // threads): not a measure of the width.
  if (w.samples++ == 0) return;
  const double ns = static_cast<double>(duration_ns);
  w.average_ns = w.samples == 2 ? ns : (1 - options_.alpha) * w.average_ns + options_.alpha * ns;
  const size_t window = static_cast<size_t>(std::max(1, options_.min_probes));
  if (w.recent.size() < window) {
    w.recent.push_back(ns);
  } else {
    w.recent[w.next] = ns;
    w.next = (w.next + 1) % window;
  }
  if (threads == chosen_) {
    if (w.samples == 2 && switches_ == 0) {
      // The full width's first measured run: probe next, unless its runs are long (no early
      // probes then).
      if (ns > static_cast<double>(options_.early_probe_max_ns)) {
        probe_period_ = std::max(probe_period_, std::max(1, options_.min_probe_period));
        runs_since_probe_ = 0;
      } else {
        runs_since_probe_ = probe_period_ - 1;
      }
    }
    if (best_chosen_ns_ == 0 || w.average_ns < best_chosen_ns_) best_chosen_ns_ = w.average_ns;
    if (w.average_ns > options_.rise_ratio * best_chosen_ns_) {
      // Slower than it has been at this width: the machine may be busier; look at the other
      // width again soon.
      probe_period_ = std::max(1, options_.min_probe_period);
      best_chosen_ns_ = w.average_ns;
    }
    return;
  }
  // A probe of the other width.
  const Width& current = width(chosen_);
  if (++probes_since_switch_ < options_.min_probes || current.samples < 2) return;
  if (w.RecentMean() < options_.switch_ratio * current.average_ns) {
    chosen_ = threads;
    w.average_ns = w.RecentMean();
    ++switches_;
    probes_since_switch_ = 0;
    best_chosen_ns_ = w.average_ns;
    probe_period_ = std::max(1, options_.min_probe_period);
    runs_since_probe_ = 0;
    width(threads == 1 ? options_.max_threads : 1).recent.clear();
    return;
  }
  probe_period_ = std::min(std::max(1, options_.max_probe_period), probe_period_ * 2);
}

double ThreadGovernor::Width::RecentMean() const {
  double sum = 0;
  for (double v : recent) sum += v;
  return recent.empty() ? 0 : sum / static_cast<double>(recent.size());
}

int ThreadGovernor::chosen() const {
  MutexLock lock(mu_);
  return chosen_;
}

int64_t ThreadGovernor::switches() const {
  MutexLock lock(mu_);
  return switches_;
}

ThreadGovernors::ThreadGovernors(ThreadGovernorOptions options, size_t max_signatures)
    : options_(options), max_signatures_(max_signatures), overflow_(options) {}

ThreadGovernor& ThreadGovernors::For(const std::vector<int64_t>& signature) {
  MutexLock lock(mu_);
  auto it = by_signature_.find(signature);
  ThreadGovernor* g = nullptr;
  if (it != by_signature_.end()) {
    g = it->second.get();
  } else if (by_signature_.size() < max_signatures_) {
    g = by_signature_.emplace(signature, std::make_unique<ThreadGovernor>(options_))
            .first->second.get();
  } else {
    g = &overflow_;
  }
  latest_ = g;
  return *g;
}

int ThreadGovernors::chosen() const {
  MutexLock lock(mu_);
  return latest_ != nullptr ? latest_->chosen() : std::max(1, options_.max_threads);
}

int64_t ThreadGovernors::switches() const {
  MutexLock lock(mu_);
  int64_t n = overflow_.switches();
  for (const auto& [signature, g] : by_signature_) n += g->switches();
  return n;
}

}  // namespace kiln
