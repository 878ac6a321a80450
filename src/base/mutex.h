// SPDX-License-Identifier: Apache-2.0
#pragma once
// Mutex, MutexLock and CondVar: std::mutex, a scoped lock and std::condition_variable carrying
// the thread-safety annotations of base/thread_annotations.h, so that Clang's -Wthread-safety
// checks every member marked KILN_GUARDED_BY (libstdc++'s std::mutex is not a capability to the
// analysis). Each is a thin inline wrapper over the std type, with the same cost; every class in
// kiln that owns a mutex uses these.
//
//   class JobQueue {
//    public:
//     void Push(Job job) KILN_EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       jobs_.push_back(std::move(job));
//       cv_.NotifyOne();
//     }
//     Job Pop() KILN_EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return !jobs_.empty(); });
//       Job job = std::move(jobs_.front());
//       jobs_.pop_front();
//       return job;
//     }
//    private:
//     Mutex mu_;
//     CondVar cv_;  // with mu_: signalled when a job is pushed
//     std::deque<Job> jobs_ KILN_GUARDED_BY(mu_);
//   };
//
// A wait predicate that reads guarded members is annotated KILN_REQUIRES(mu) itself: the analysis
// checks a lambda's body as a function of its own, which holds nothing unless it says so.
//
// Thread safety: Mutex and CondVar are thread-safe (they are the std types); a MutexLock is used
// by the thread that made it.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "base/thread_annotations.h"

namespace kiln {

// A non-recursive exclusive mutex (std::mutex). Non-copyable, non-movable.
class KILN_CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until the mutex is held by the calling thread. REQUIRES: not held by it already.
  void Lock() KILN_ACQUIRE() { mu_.lock(); }
  // REQUIRES: held by the calling thread.
  void Unlock() KILN_RELEASE() { mu_.unlock(); }
  // Takes the mutex if it is free; true when it did (then the caller must Unlock it).
  [[nodiscard]] bool TryLock() KILN_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to the end of its scope (std::unique_lock without deferred
// locking). Unlock releases it early and Lock takes it again, for code that must not hold the
// mutex while it runs a callback; the destructor releases it only when held.
class KILN_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KILN_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() KILN_RELEASE() {
    if (locked_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // REQUIRES: held by this lock.
  void Unlock() KILN_RELEASE() {
    mu_.Unlock();
    locked_ = false;
  }
  // REQUIRES: released by Unlock.
  void Lock() KILN_ACQUIRE() {
    mu_.Lock();
    locked_ = true;
  }

 private:
  Mutex& mu_;
  bool locked_ = true;
};

// A condition variable used with a Mutex (std::condition_variable). Every wait REQUIRES the
// mutex held by the calling thread; it is released while the thread sleeps and held again when
// the wait returns. Spurious wake-ups are possible for the waits without a predicate.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex& mu) KILN_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: by the caller
  }
  // Waits until ready() is true (checked with the mutex held, before the first wait too).
  // Not analyzed inside: the analysis cannot tie `ready`'s own KILN_REQUIRES to `mu`; the
  // predicate's body is checked where it is written.
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate ready) KILN_REQUIRES(mu) KILN_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock, std::move(ready));
    lock.release();
  }
  // Waits until notified or `deadline`; false when it returned because the deadline passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      KILN_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  // Waits until notified or for `timeout`; false when it returned because the time was up.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout) KILN_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  // Waits until ready() is true or for `timeout`; returns ready() (false: the time was up).
  // Not analyzed inside, as Wait(mu, ready).
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate ready)
      KILN_REQUIRES(mu) KILN_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool result = cv_.wait_for(lock, timeout, std::move(ready));
    lock.release();
    return result;
  }

  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace kiln
