// SPDX-License-Identifier: Apache-2.0
// Mutex, MutexLock and CondVar behave as the std types they wrap: mutual exclusion, TryLock,
// early release and re-acquisition, and waits with and without a predicate or a deadline.
#include "base/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace kiln {
namespace {

struct Counter {
  Mutex mu;
  CondVar cv;  // with mu: notified when `value` changes
  int64_t value KILN_GUARDED_BY(mu) = 0;

  void Add(int64_t n) KILN_EXCLUDES(mu) {
    MutexLock lock(mu);
    value += n;
    cv.NotifyAll();
  }
  int64_t Get() KILN_EXCLUDES(mu) {
    MutexLock lock(mu);
    return value;
  }
};

// True when another thread can take `mu` right now.
bool FreeElsewhere(Mutex& mu) {
  bool took = false;
  std::thread t([&] {
    if (mu.TryLock()) {
      took = true;
      mu.Unlock();
    }
  });
  t.join();
  return took;
}

TEST(MutexTest, IncrementsFromManyThreadsAreNotLost) {
  Counter c;
  constexpr int kThreads = 4;
  constexpr int kAdds = 20000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < kAdds; ++j) c.Add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.Get(), int64_t{kThreads} * kAdds);
}

TEST(MutexTest, TryLockFailsWhileHeldAndSucceedsWhenFree) {
  Mutex mu;
  EXPECT_TRUE(FreeElsewhere(mu));
  mu.Lock();
  EXPECT_FALSE(FreeElsewhere(mu));
  mu.Unlock();
  if (mu.TryLock()) {
    EXPECT_FALSE(FreeElsewhere(mu));
    mu.Unlock();
  } else {
    ADD_FAILURE() << "TryLock failed on a free mutex";
  }
}

TEST(MutexTest, MutexLockHoldsForItsScopeAndCanReleaseEarly) {
  Mutex mu;
  {
    MutexLock lock(mu);
    EXPECT_FALSE(FreeElsewhere(mu));
    lock.Unlock();
    EXPECT_TRUE(FreeElsewhere(mu));
    lock.Lock();
    EXPECT_FALSE(FreeElsewhere(mu));
  }
  EXPECT_TRUE(FreeElsewhere(mu));
  {
    MutexLock lock(mu);
    lock.Unlock();  // the destructor must not release it a second time
  }
  EXPECT_TRUE(FreeElsewhere(mu));
}

TEST(CondVarTest, WaitWithPredicateReturnsOnceItHolds) {
  Counter c;
  std::thread producer([&] {
    for (int i = 0; i < 5; ++i) c.Add(1);
  });
  {
    MutexLock lock(c.mu);
    c.cv.Wait(c.mu, [&]() KILN_REQUIRES(c.mu) { return c.value == 5; });
    EXPECT_EQ(c.value, 5);
  }
  producer.join();
}

TEST(CondVarTest, WaitForWithPredicateReportsTimeoutAndSuccess) {
  Counter c;
  {
    MutexLock lock(c.mu);
    EXPECT_FALSE(c.cv.WaitFor(c.mu, std::chrono::milliseconds(20),
                              [&]() KILN_REQUIRES(c.mu) { return c.value > 0; }));
  }
  std::thread producer([&] { c.Add(7); });
  {
    MutexLock lock(c.mu);
    EXPECT_TRUE(c.cv.WaitFor(c.mu, std::chrono::seconds(20),
                             [&]() KILN_REQUIRES(c.mu) { return c.value > 0; }));
    EXPECT_EQ(c.value, 7);
  }
  producer.join();
}

TEST(CondVarTest, WaitUntilAPastDeadlineTimesOutAndKeepsTheMutex) {
  Counter c;
  MutexLock lock(c.mu);
  EXPECT_FALSE(c.cv.WaitUntil(c.mu, std::chrono::steady_clock::now() - std::chrono::seconds(1)));
  EXPECT_FALSE(FreeElsewhere(c.mu));
  EXPECT_FALSE(c.cv.WaitFor(c.mu, std::chrono::nanoseconds(0)));
  EXPECT_FALSE(FreeElsewhere(c.mu));
}

TEST(CondVarTest, NotifyWakesAWaiter) {
  Counter c;
  bool woke = false;
  std::thread waiter([&] {
    MutexLock lock(c.mu);
    while (c.value == 0) c.cv.Wait(c.mu);
    woke = true;
  });
  c.Add(1);
  waiter.join();
  EXPECT_TRUE(woke);
}

}  // namespace
}  // namespace kiln
