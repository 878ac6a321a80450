// SPDX-License-Identifier: Apache-2.0
#include "runtime/thread_budget.h"

#include <algorithm>

#include "base/check.h"

namespace kiln {

ThreadBudget::ThreadBudget(int threads) : capacity_(threads), free_(threads) {
  KILN_CHECK(threads >= 1, "ThreadBudget: ", threads, " threads");
}

int ThreadBudget::Acquire(int want) {
  want = std::clamp(want, 1, capacity_);
  MutexLock lock(mu_);
  if (free_ <= 0) {
    ++waited_;
    freed_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return free_ > 0; });
  }
  const int taken = free_ >= want ? want : 1;
  if (taken < want) ++narrowed_;
  free_ -= taken;
  return taken;
}

void ThreadBudget::Release(int taken) {
  {
    MutexLock lock(mu_);
    free_ += taken;
  }
  freed_.NotifyAll();
}

int ThreadBudget::in_use() const {
  MutexLock lock(mu_);
  return capacity_ - free_;
}

int64_t ThreadBudget::narrowed() const {
  MutexLock lock(mu_);
  return narrowed_;
}

int64_t ThreadBudget::waited() const {
  MutexLock lock(mu_);
  return waited_;
}

}  // namespace kiln
