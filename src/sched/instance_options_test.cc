// SPDX-License-Identifier: Apache-2.0
#include "sched/instance_options.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(InstanceBudgetTest, Table) {
  struct Case {
    int requested;
    int cpu_threads;
    int intra_op;
    bool oversubscribe;
    int hardware;
    int want;
  };
  const Case cases[] = {
      {1, 0, 1, false, 2, 1},   // fits
      {2, 0, 1, false, 2, 2},   // 2 x 1 <= 2 cores
      {4, 0, 1, false, 2, 2},   // capped to the cores
      {4, 0, 2, false, 4, 2},   // 2 instances x 2 threads
      {3, 0, 4, false, 2, 1},   // never below one instance
      {4, 3, 1, false, 64, 3},  // an explicit budget wins over the hardware count
      {4, 0, 1, true, 2, 4},    // oversubscription allowed
      {5, 0, 1, false, 0, 5},   // hardware unknown, no explicit budget: not enforced
      {8, 16, 0, false, 2, 8},  // intra_op 0 counts as 1
  };
  for (const Case& c : cases) {
    InstanceOptions o;
    o.cpu_threads = c.cpu_threads;
    o.intra_op_threads = c.intra_op;
    o.oversubscribe = c.oversubscribe;
    EXPECT_EQ(InstanceCountWithinBudget(c.requested, o, c.hardware), c.want)
        << c.requested << " " << c.cpu_threads << " " << c.intra_op << " " << c.hardware;
  }
}

}  // namespace
}  // namespace kiln
