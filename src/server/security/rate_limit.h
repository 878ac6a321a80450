// SPDX-License-Identifier: Apache-2.0
#pragma once
// Token buckets for per-tenant limits, driven by an injected time (nanoseconds, as
// sched/clock.h), so refill, burst and Retry-After are tested without sleeping.
//
//   TokenBucket requests(/*rate_per_s=*/10, /*capacity=*/20, clock.NowNs());
//   int64_t wait_ns = 0;
//   if (!requests.TryTake(1, clock.NowNs(), &wait_ns))
//     answer 429 with Retry-After: RetryAfterSeconds(wait_ns)
//   tokens.Charge(n, clock.NowNs());           // generated tokens; the level may go negative
//   if (!tokens.NonNegative(clock.NowNs(), &wait_ns)) refuse new generations
//
// NOTE on the semantics. A bucket holds at most `capacity` units and gains `rate_per_s` units a
// second; it starts full. A request takes one unit or is refused without taking any (the wait
// is the time until one unit is there). Generated tokens are charged as they are produced,
// whether or not the bucket holds them, so one long generation can drive it below zero; new
// generations are refused until it has refilled to zero, which spreads a tenant's tokens over
// time at `rate_per_s` on average while letting a running generation finish.
//
// Thread safety: none; the owner (access.h) locks.

#include <cstdint>

namespace kiln {

class TokenBucket {
 public:
  // REQUIRES: rate_per_s > 0, capacity > 0.
  TokenBucket(double rate_per_s, double capacity, int64_t now_ns);

  // Takes `n` units when the bucket holds them; else takes nothing, sets *wait_ns to the time
  // until it will (0 < *wait_ns) and returns false. REQUIRES: 0 < n <= capacity.
  bool TryTake(double n, int64_t now_ns, int64_t* wait_ns);
  // Takes `n` units unconditionally; the level may go below zero. REQUIRES: n >= 0.
  void Charge(double n, int64_t now_ns);
  // True when the level is >= 0; else sets *wait_ns to the time until it is.
  bool NonNegative(int64_t now_ns, int64_t* wait_ns);
  // The level after refilling to `now_ns`.
  double Level(int64_t now_ns);

  double rate_per_s() const { return rate_per_s_; }
  double capacity() const { return capacity_; }

 private:
  void Refill(int64_t now_ns);
  int64_t WaitFor(double deficit) const;

  double rate_per_s_;
  double capacity_;
  double level_;
  int64_t last_ns_;
};

// Whole seconds a client should wait before retrying after `wait_ns`: rounded up, at least 1
// (the HTTP Retry-After header's unit).
int64_t RetryAfterSeconds(int64_t wait_ns);

}  // namespace kiln
