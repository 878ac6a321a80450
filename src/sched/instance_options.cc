// SPDX-License-Identifier: Apache-2.0
#include "sched/instance_options.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

InstancePlan PlanInstances(int requested, const InstanceOptions& options, int hardware_threads) {
  KILN_CHECK(requested >= 1, "PlanInstances: ", requested, " instances requested");
  const int budget = options.cpu_threads > 0 ? options.cpu_threads : hardware_threads;
  InstancePlan plan;
  if (options.intra_op_threads > 0) {
    plan.intra_op_threads = options.intra_op_threads;
    plan.instances = options.oversubscribe || budget <= 0
                         ? requested
                         : std::clamp(budget / options.intra_op_threads, 1, requested);
    return plan;
  }
  if (budget <= 0) {  // unknown machine: one thread each
    plan.instances = requested;
    return plan;
  }
  plan.instances = options.oversubscribe ? requested : std::min(requested, budget);
  plan.intra_op_threads = std::max(1, budget / plan.instances);
  return plan;
}

int InstanceCountWithinBudget(int requested, const InstanceOptions& options, int hardware_threads) {
  return PlanInstances(requested, options, hardware_threads).instances;
}

}  // namespace kiln
