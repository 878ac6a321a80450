// SPDX-License-Identifier: Apache-2.0
#include "sched/clock.h"

#include <chrono>

#include "base/check.h"

namespace kiln {
namespace {

class SteadyClockImpl final : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void WaitUntil(CondVar& cv, Mutex& mu, int64_t deadline_ns) const override KILN_REQUIRES(mu) {
    if (deadline_ns == kNever) {
      cv.Wait(mu);
      return;
    }
    cv.WaitUntil(mu, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns)));
  }
};

// How long a thread blocked on a fake deadline waits, in real time, before it looks again.
constexpr auto kFakeClockPollInterval = std::chrono::microseconds(200);

}  // namespace

const Clock& SteadyClock() {
  static const SteadyClockImpl* const clock = new SteadyClockImpl();
  return *clock;
}

void FakeClock::WaitUntil(CondVar& cv, Mutex& mu, int64_t deadline_ns) const {
  if (deadline_ns == kNever) {
    cv.Wait(mu);
    return;
  }
  if (NowNs() >= deadline_ns) return;
  cv.WaitFor(mu, kFakeClockPollInterval);
}

void FakeClock::Advance(int64_t delta_ns) {
  KILN_CHECK(delta_ns >= 0, "FakeClock::Advance by a negative delta ", delta_ns);
  now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel);
}

void FakeClock::Set(int64_t now_ns) {
  KILN_CHECK(now_ns >= NowNs(), "FakeClock::Set would move time backwards");
  now_ns_.store(now_ns, std::memory_order_release);
}

uint64_t WallClockMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace kiln
