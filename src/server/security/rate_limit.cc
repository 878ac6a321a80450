// SPDX-License-Identifier: Apache-2.0
// Token bucket arithmetic; see rate_limit.h.
#include "server/security/rate_limit.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace kiln {

namespace {
constexpr double kNsPerSecond = 1e9;
}  // namespace

TokenBucket::TokenBucket(double rate_per_s, double capacity, int64_t now_ns)
    : rate_per_s_(rate_per_s), capacity_(capacity), level_(capacity), last_ns_(now_ns) {
  KILN_CHECK(rate_per_s > 0 && capacity > 0, "token bucket needs a positive rate and capacity");
}

void TokenBucket::Refill(int64_t now_ns) {
  if (now_ns <= last_ns_) return;
  const double gained = static_cast<double>(now_ns - last_ns_) / kNsPerSecond * rate_per_s_;
  level_ = std::min(capacity_, level_ + gained);
  last_ns_ = now_ns;
}

int64_t TokenBucket::WaitFor(double deficit) const {
  const double ns = std::ceil(deficit / rate_per_s_ * kNsPerSecond);
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(ns, 1e18)));
}

bool TokenBucket::TryTake(double n, int64_t now_ns, int64_t* wait_ns) {
  Refill(now_ns);
  if (level_ >= n) {
    level_ -= n;
    return true;
  }
  *wait_ns = WaitFor(n - level_);
  return false;
}

void TokenBucket::Charge(double n, int64_t now_ns) {
  Refill(now_ns);
  level_ -= n;
}

bool TokenBucket::NonNegative(int64_t now_ns, int64_t* wait_ns) {
  Refill(now_ns);
  if (level_ >= 0) return true;
  *wait_ns = WaitFor(-level_);
  return false;
}

double TokenBucket::Level(int64_t now_ns) {
  Refill(now_ns);
  return level_;
}

int64_t RetryAfterSeconds(int64_t wait_ns) {
  const int64_t s = wait_ns / 1'000'000'000 + (wait_ns % 1'000'000'000 != 0 ? 1 : 0);
  return std::max<int64_t>(1, s);
}

}  // namespace kiln
