// SPDX-License-Identifier: Apache-2.0
#pragma once
// How a model's instances are built: the thread budget, the allocator hook, the clock and the
// response cache. The model manager passes one InstanceOptions to every model it loads.
//
// Thread budget. Each instance (instance_group count, summed over the groups) has one thread
// that runs its session; a session run uses `intra_op_threads` OpenMP threads (set on the
// instance's thread by every run, so instances never share a budget). PlanInstances decides:
//   budget = cpu_threads, or the machine's hardware threads when 0
//   intra_op_threads 0 (the default): split the budget between the instances: at most `budget`
//     instances, each with budget / instances threads (at least 1). One instance on a 16-thread
//     machine runs 16-wide; 4 instances run 4-wide each.
//   intra_op_threads N > 0: every instance runs N-wide and at most budget / N instances start
//     (instances x N <= budget).
// A model logs a warning when it starts fewer instances than its config asks for.
// `oversubscribe` starts every configured instance regardless (an automatic split then still
// gives each budget / instances threads, at least 1). The budget is per model: models share the
// machine.
//
// Thread safety: a plain value; InstanceCountWithinBudget is pure.

#include <cstdint>
#include <memory>

#include "sched/clock.h"
#include "tensor/buffer.h"

namespace kiln {

class ThreadBudget;
class ResponseCache;  // repo/response_cache.h

struct InstanceOptions {
  int cpu_threads = 0;         // thread budget of one model's instances; 0: hardware threads
  int intra_op_threads = 0;    // threads one session run uses; 0: split the budget
  bool oversubscribe = false;  // start every configured instance, even past the budget
  // Each run's width adapts between intra_op_threads and 1 to what the machine gives
  // (SessionOptions::adapt_threads); false: always intra_op_threads.
  bool adapt_threads = true;
  // The intra-op threads the runs of every model may hold at once (SessionOptions::
  // thread_budget, runtime/thread_budget.h); nullptr: no limit. Not owned.
  ThreadBudget* thread_budget = nullptr;
  // Where the sessions allocate node outputs and the batcher assembles batch inputs; nullptr:
  // HostAllocator(). Must outlive every model built with it. (Tests inject failing allocators.)
  Allocator* allocator = nullptr;
  const Clock* clock = nullptr;  // the schedulers' time source; nullptr: SteadyClock()
  // BatcherOptions::inline_max_ns: a model whose runs average at most this long runs a request
  // that finds an instance free on the caller's (protocol) thread; 0: never.
  int64_t inline_max_ns = 0;
  // How long unloading a generative model lets its running sequences finish before it cancels
  // them (`kiln serve --exit-timeout-secs`).
  int64_t drain_timeout_ns = 30'000'000'000;
  // The server's response cache (`kiln serve --cache-config`), shared by every model whose
  // config has `response_cache { enable: true }`; null: no cache (such a model loads with a
  // warning and runs every request).
  std::shared_ptr<ResponseCache> response_cache;
};

// What PlanInstances decided.
struct InstancePlan {
  int instances = 1;         // >= 1
  int intra_op_threads = 1;  // per instance, >= 1
};

// The instances to start, and their threads, when the config asks for `requested` (>= 1)
// instances and the machine has `hardware_threads` (0 when unknown: then the budget is not
// enforced and an automatic split gives 1 thread per instance).
InstancePlan PlanInstances(int requested, const InstanceOptions& options, int hardware_threads);

// PlanInstances(...).instances.
int InstanceCountWithinBudget(int requested, const InstanceOptions& options, int hardware_threads);

}  // namespace kiln
