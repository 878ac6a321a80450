// SPDX-License-Identifier: Apache-2.0
#pragma once
// Clock: the time source of the scheduler, injected so that policies and the batcher can be
// tested without sleeping. Times are nanoseconds on a monotonic scale (int64_t, "_ns"); only
// differences between them mean anything.
//
//   const Clock& clock = SteadyClock();          // production
//   FakeClock fake;                              // tests: time moves only when told
//   fake.Advance(/*ns=*/1'000'000);
//
// WaitUntil is how a thread sleeps "until the clock reads t": the real clock waits on the
// condition variable with that deadline; the fake clock waits in short real-time slices and
// returns once its own time has reached t (or on a notification), so a thread blocked on a fake
// deadline wakes soon after a test advances the fake time.
//
// Thread safety: every method of both clocks is thread-safe.

#include <atomic>
#include <cstdint>
#include <limits>

#include "base/mutex.h"

namespace kiln {

// "No time": a deadline that never comes, a wake-up that is not needed.
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

class Clock {
 public:
  virtual ~Clock() = default;
  // Current time in nanoseconds; never decreases.
  virtual int64_t NowNs() const = 0;
  // Blocks on `cv` (REQUIRES: the caller holds `mu`, the mutex `cv` is used with) until it is
  // notified, or NowNs() >= deadline_ns; spurious returns are possible, so callers re-check their
  // state. deadline_ns == kNever waits for a notification only.
  virtual void WaitUntil(CondVar& cv, Mutex& mu, int64_t deadline_ns) const KILN_REQUIRES(mu) = 0;
};

// std::chrono::steady_clock. The process-wide instance lives forever.
const Clock& SteadyClock();

// A clock that moves only when Advance or Set is called. Starts at `start_ns`.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ns = 0) : now_ns_(start_ns) {}
  int64_t NowNs() const override { return now_ns_.load(std::memory_order_acquire); }
  void WaitUntil(CondVar& cv, Mutex& mu, int64_t deadline_ns) const override KILN_REQUIRES(mu);
  // REQUIRES: delta_ns >= 0.
  void Advance(int64_t delta_ns);
  // REQUIRES: now_ns >= NowNs().
  void Set(int64_t now_ns);

 private:
  std::atomic<int64_t> now_ns_;
};

// Wall-clock milliseconds since the Unix epoch (for "last inference" timestamps).
uint64_t WallClockMs();

}  // namespace kiln
