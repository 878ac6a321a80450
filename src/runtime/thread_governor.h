// SPDX-License-Identifier: Apache-2.0
#pragma once
// ThreadGovernor: how many intra-op threads a session's next run uses, adapted to what the
// machine gives it.
//
// A session runs N-wide by default (SessionOptions::intra_op_threads). On a machine that other
// work shares, the N threads of each parallel node wait for one another at its end, and a
// thread the scheduler has set aside for a time slice holds up the whole node: a model of many
// short nodes can then run slower N-wide than on one thread. The governor measures it instead
// of guessing: it times every run at the width it chose, keeps a moving average per width, and
// now and then runs one probe at the other width (1 when it runs N-wide, N when it runs narrow);
// when the other width has been faster by a clear margin over several probes it switches. Probes
// are sparse when they keep losing (the period doubles up to a bound, so a quiet machine pays at
// most one narrow run in `max_probe_period`) and frequent again when the latency at the chosen
// width rises well above the best it has seen (the machine got busy).
//
// Decisions are data: Choose() and Record() are a pure policy over the measured durations (no
// clock, no threads of its own), tested with made-up timings.
//
// Thread safety: Choose and Record may be called from several threads at once (concurrent runs
// of one session); each call takes a mutex for a few arithmetic operations.

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace kiln {

struct ThreadGovernorOptions {
  int max_threads = 1;  // the session's width (N); 1 disables the governor
  // Runs at the chosen width between two probes: at first (a process that starts on a busy
  // machine finds out within a few runs), and after a switch or a rise; doubled after every
  // probe that loses, up to max_probe_period. The first probe waits for one measured run at
  // the full width (the first run builds plans and is not a measure).
  int first_probe_period = 2;
  // Runs that take longer than this at the full width skip the early probes (the period starts
  // at min_probe_period): one narrow run of a large model costs more than a later switch saves,
  // and a few runs of it are all a short measurement makes.
  int64_t early_probe_max_ns = 20'000'000;
  int min_probe_period = 8;
  int max_probe_period = 256;
  // The other width wins when its average is below this share of the chosen width's average.
  double switch_ratio = 0.85;
  // Probes of the other width before it may win.
  int min_probes = 2;
  // The chosen width's average rising above this multiple of the best average it has had makes
  // probes frequent again (min_probe_period).
  double rise_ratio = 1.5;
  // Weight of a new duration in the moving averages.
  double alpha = 0.25;
};

class ThreadGovernor {
 public:
  explicit ThreadGovernor(ThreadGovernorOptions options);

  // The width of the next run: the chosen one, or the other one when a probe is due.
  int Choose() KILN_EXCLUDES(mu_);
  // Reports that a run `threads` wide took `duration_ns`.
  void Record(int threads, int64_t duration_ns) KILN_EXCLUDES(mu_);

  // The width runs use when no probe is due (max_threads or 1).
  int chosen() const KILN_EXCLUDES(mu_);
  // Switches between the widths so far.
  int64_t switches() const KILN_EXCLUDES(mu_);

 private:
  struct Width {
    double average_ns = 0;  // moving average; 0 before the first sample
    int64_t samples = 0;
    // The last min_probes durations (a ring): probes are sparse, so the other width is judged
    // on its recent runs alone, not an average that remembers a busier time.
    std::vector<double> recent;
    size_t next = 0;
    double RecentMean() const;
  };
  Width& width(int threads) KILN_REQUIRES(mu_) { return threads == 1 ? narrow_ : wide_; }

  const ThreadGovernorOptions options_;
  mutable Mutex mu_;
  int chosen_ KILN_GUARDED_BY(mu_);
  Width wide_ KILN_GUARDED_BY(mu_);
  Width narrow_ KILN_GUARDED_BY(mu_);
  double best_chosen_ns_ KILN_GUARDED_BY(mu_) = 0;  // lowest average of the chosen width
  int probe_period_ KILN_GUARDED_BY(mu_);
  int runs_since_probe_ KILN_GUARDED_BY(mu_) = 0;
  int probes_since_switch_ KILN_GUARDED_BY(mu_) = 0;
  int64_t switches_ KILN_GUARDED_BY(mu_) = 0;
};

// One ThreadGovernor per input signature (Session's: dtypes and dims of the inputs): a run's
// duration is compared only with runs of the same shapes. A server's dynamic batches vary in
// size, and a batch of 8 measured at one width against a batch of 1 at the other says nothing
// about the widths; each signature's first run at a width (its kernels' plans being built) is
// skipped by its own governor. At most `max_signatures` governors: the runs of further
// signatures share one more.
//
// Thread safety: For, chosen and switches may be called from any thread; the governors live as
// long as this object.
class ThreadGovernors {
 public:
  explicit ThreadGovernors(ThreadGovernorOptions options, size_t max_signatures = 64);

  ThreadGovernor& For(const std::vector<int64_t>& signature) KILN_EXCLUDES(mu_);
  // The width the governor of the latest signature asked for runs at (max_threads before any).
  int chosen() const KILN_EXCLUDES(mu_);
  // Switches of all the governors.
  int64_t switches() const KILN_EXCLUDES(mu_);

 private:
  const ThreadGovernorOptions options_;
  const size_t max_signatures_;
  mutable Mutex mu_;
  std::map<std::vector<int64_t>, std::unique_ptr<ThreadGovernor>> by_signature_
      KILN_GUARDED_BY(mu_);
  ThreadGovernor overflow_;
  const ThreadGovernor* latest_ KILN_GUARDED_BY(mu_) = nullptr;
};

}  // namespace kiln
