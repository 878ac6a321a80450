// SPDX-License-Identifier: Apache-2.0
#include "sched/instance_options.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

int InstanceCountWithinBudget(int requested, const InstanceOptions& options, int hardware_threads) {
  KILN_CHECK(requested >= 1, "InstanceCountWithinBudget: ", requested, " instances requested");
  if (options.oversubscribe) return requested;
  const int budget = options.cpu_threads > 0 ? options.cpu_threads : hardware_threads;
  if (budget <= 0) return requested;
  const int per_instance = std::max(1, options.intra_op_threads);
  return std::clamp(budget / per_instance, 1, requested);
}

}  // namespace kiln
