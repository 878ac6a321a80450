// SPDX-License-Identifier: Apache-2.0
#pragma once
// How a model's instances are built: the thread budget, the allocator hook and the clock. The
// model manager passes one InstanceOptions to every model it loads.
//
// Thread budget. Each instance (instance_group count, summed over the groups) has one thread
// that runs its session; a session run uses `intra_op_threads` threads (1 today: kernels are
// single-threaded). By default a model starts at most as many instances as fit
//   instances x intra_op_threads <= cpu_threads   (cpu_threads 0: the machine's hardware threads)
// and logs a warning when it starts fewer than its config asks for. `oversubscribe` starts
// every configured instance regardless. The budget is per model: models share the machine.
//
// Thread safety: a plain value; InstanceCountWithinBudget is pure.

#include "sched/clock.h"
#include "tensor/buffer.h"

namespace kiln {

struct InstanceOptions {
  int cpu_threads = 0;         // thread budget of one model's instances; 0: hardware threads
  int intra_op_threads = 1;    // threads one session run uses (>= 1)
  bool oversubscribe = false;  // start every configured instance, even past the budget
  // Where the sessions allocate node outputs and the batcher assembles batch inputs; nullptr:
  // HostAllocator(). Must outlive every model built with it. (Tests inject failing allocators.)
  Allocator* allocator = nullptr;
  const Clock* clock = nullptr;  // the schedulers' time source; nullptr: SteadyClock()
};

// The number of instances to start when the config asks for `requested` (>= 1) and the machine
// has `hardware_threads` (0 when unknown: then the budget is not enforced). At least 1.
int InstanceCountWithinBudget(int requested, const InstanceOptions& options, int hardware_threads);

}  // namespace kiln
