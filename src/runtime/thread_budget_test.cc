// SPDX-License-Identifier: Apache-2.0
// ThreadBudget: a run gets its width when that many threads are free, one thread otherwise, and
// waits while none is; runs of sessions that share a budget never hold more threads than it has.

#include "runtime/thread_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln {
namespace {

TEST(ThreadBudgetTest, FullWidthWhenFreeElseOneThread) {
  ThreadBudget b(4);
  EXPECT_EQ(b.Acquire(4), 4);
  EXPECT_EQ(b.in_use(), 4);
  b.Release(4);
  EXPECT_EQ(b.Acquire(3), 3);  // 1 left
  EXPECT_EQ(b.Acquire(2), 1);  // not 2 free: one thread, not a partial width
  EXPECT_EQ(b.narrowed(), 1);
  EXPECT_EQ(b.in_use(), 4);
  b.Release(1);
  b.Release(3);
  EXPECT_EQ(b.in_use(), 0);
  EXPECT_EQ(b.Acquire(16), 4);  // capped at the capacity, counted as a full width
  EXPECT_EQ(b.narrowed(), 1);
  b.Release(4);
}

TEST(ThreadBudgetTest, WaitsWhileNoThreadIsFree) {
  ThreadBudget b(2);
  ASSERT_EQ(b.Acquire(2), 2);
  std::atomic<int> got{0};
  std::thread waiter([&] { got = b.Acquire(2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(got.load(), 0) << "took a thread while none was free";
  b.Release(2);
  waiter.join();
  EXPECT_EQ(got.load(), 2);
  EXPECT_EQ(b.waited(), 1);
  b.Release(2);
}

TEST(ThreadBudgetTest, ConcurrentRunsNeverExceedTheBudget) {
  ThreadBudget b(3);
  std::atomic<int> held{0}, peak{0};
  std::vector<std::thread> runs;
  for (int t = 0; t < 6; ++t) {
    runs.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        ThreadBudgetLease lease(&b, 1 + (t + i) % 3);
        const int now = held += lease.threads();
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        std::this_thread::yield();
        held -= lease.threads();
      }
    });
  }
  for (std::thread& r : runs) r.join();
  EXPECT_LE(peak.load(), 3);
  EXPECT_EQ(b.in_use(), 0);
}

TEST(ThreadBudgetTest, NoBudgetGrantsTheWidthAsked) {
  ThreadBudgetLease lease(nullptr, 8);
  EXPECT_EQ(lease.threads(), 8);
}

}  // namespace
}  // namespace kiln
