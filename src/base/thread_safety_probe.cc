// SPDX-License-Identifier: Apache-2.0
// Proof that the Clang build's thread-safety analysis is live: thread_safety_probe.cmake compiles
// this file once as it is (it must compile cleanly) and once per KILN_PROBE_CASE, each a lock
// mistake that the build must reject with a -Wthread-safety error. Never linked into anything.
#include <cstdint>

#include "base/mutex.h"

namespace kiln {
namespace {

class Account {
 public:
  void Deposit(int64_t n) KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    AddLocked(n);
    cv_.NotifyAll();
  }
  int64_t WaitForAtLeast(int64_t n) KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return balance_ >= n; });
    return balance_;
  }
  int64_t BalanceAfterUnlock() KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    const int64_t b = balance_;
    lock.Unlock();
    lock.Lock();
    return b + balance_;
  }

#if KILN_PROBE_CASE == 1  // reads a guarded member without the lock
  int64_t Peek() const { return balance_; }
#elif KILN_PROBE_CASE == 2  // writes a guarded member without the lock
  void Reset() { balance_ = 0; }
#elif KILN_PROBE_CASE == 3  // calls a REQUIRES function without the lock
  void AddUnlocked(int64_t n) { AddLocked(n); }
#elif KILN_PROBE_CASE == 4  // calls an EXCLUDES function with the lock held
  void DepositTwice(int64_t n) {
    MutexLock lock(mu_);
    Deposit(n);
  }
#elif KILN_PROBE_CASE == 5  // returns with the mutex still held
  void LockAndForget() { mu_.Lock(); }
#elif KILN_PROBE_CASE == 6  // a wait predicate that does not say it runs under the lock
  void WaitPositive() {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [&] { return balance_ > 0; });
  }
#elif KILN_PROBE_CASE == 7  // reads after releasing the lock early
  int64_t ReadAfterUnlock() {
    MutexLock lock(mu_);
    lock.Unlock();
    return balance_;
  }
#elif KILN_PROBE_CASE == 8  // waits without holding the mutex
  void WaitUnlocked() { cv_.Wait(mu_); }
#endif

 private:
  void AddLocked(int64_t n) KILN_REQUIRES(mu_) { balance_ += n; }

  Mutex mu_;
  CondVar cv_;  // with mu_: notified on every deposit
  int64_t balance_ KILN_GUARDED_BY(mu_) = 0;
};

}  // namespace

// Referenced so that the unused class is still analyzed as written.
int64_t ThreadSafetyProbe() {
  Account a;
  a.Deposit(1);
  return a.WaitForAtLeast(1) + a.BalanceAfterUnlock();
}

}  // namespace kiln
