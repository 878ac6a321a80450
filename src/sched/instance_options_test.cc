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
      {8, 16, 0, false, 2, 8},  // automatic split: 8 instances x 2 threads
      {4, 0, 0, false, 2, 2},   // automatic split: capped to the cores, 1 thread each
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

// The default (intra_op_threads 0) splits the budget between the instances.
TEST(InstanceBudgetTest, AutomaticSplit) {
  struct Case {
    int requested;
    int cpu_threads;
    int intra_op;
    bool oversubscribe;
    int hardware;
    int want_instances;
    int want_threads;
  };
  const Case cases[] = {
      {1, 0, 0, false, 2, 1, 2},   // one instance takes the machine
      {2, 0, 0, false, 2, 2, 1},   // two share it
      {3, 0, 0, false, 16, 3, 5},  // 16 / 3, rounded down
      {4, 0, 0, false, 16, 4, 4},
      {32, 0, 0, false, 16, 16, 1},  // never more instances than threads
      {32, 0, 0, true, 16, 32, 1},   // unless oversubscription is allowed
      {2, 8, 0, false, 64, 2, 4},    // an explicit budget wins over the hardware count
      {3, 0, 0, false, 0, 3, 1},     // unknown machine: 1 thread each
      {2, 0, 3, false, 16, 2, 3},    // an explicit per-instance count is kept
      {8, 0, 3, false, 16, 5, 3},    // ... and caps the instances: 5 x 3 <= 16
  };
  for (const Case& c : cases) {
    InstanceOptions o;
    o.cpu_threads = c.cpu_threads;
    o.intra_op_threads = c.intra_op;
    o.oversubscribe = c.oversubscribe;
    const InstancePlan plan = PlanInstances(c.requested, o, c.hardware);
    EXPECT_EQ(plan.instances, c.want_instances)
        << c.requested << " " << c.cpu_threads << " " << c.intra_op << " " << c.hardware;
    EXPECT_EQ(plan.intra_op_threads, c.want_threads)
        << c.requested << " " << c.cpu_threads << " " << c.intra_op << " " << c.hardware;
    if (!c.oversubscribe && c.hardware > 0) {
      EXPECT_LE(plan.instances * plan.intra_op_threads,
                c.cpu_threads > 0 ? c.cpu_threads : c.hardware);
    }
  }
}

}  // namespace
}  // namespace kiln
