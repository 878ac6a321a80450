// SPDX-License-Identifier: Apache-2.0
#pragma once
// ThreadBudget: the intra-op threads that every session run of a process may use at once.
//
// Each model instance runs its batches on its own thread, N intra-op threads wide. Two models (or
// two instances) running at the same moment would put 2N threads on N cores; the OpenMP teams of
// both then wait for one another at the end of every node. Sessions that share a ThreadBudget
// (SessionOptions::thread_budget; the server gives every model's instances the process's one)
// take their run's threads from it instead: a run gets the width it asked for when that many
// threads are free, else one thread (one more thread on a busy machine costs little; a second
// wide team costs a lot), and a run that finds no thread free waits until one is, so the runs
// of a process never hold more threads than the budget. Widths stay either the asked one or 1,
// so a kernel keeps at most two plans per shape (plans are keyed by thread count).
//
// Thread safety: every method may be called from any thread.

#include <cstdint>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace kiln {

class ThreadBudget {
 public:
  // `threads` >= 1.
  explicit ThreadBudget(int threads);
  ThreadBudget(const ThreadBudget&) = delete;
  ThreadBudget& operator=(const ThreadBudget&) = delete;

  // Takes `want` (>= 1) threads when that many are free, else 1, waiting while none is; returns
  // the count taken. A `want` above the capacity is served as the capacity.
  int Acquire(int want) KILN_EXCLUDES(mu_);
  // Returns threads taken by Acquire.
  void Release(int taken) KILN_EXCLUDES(mu_);

  int capacity() const { return capacity_; }
  int in_use() const KILN_EXCLUDES(mu_);
  // Runs that got fewer threads than they asked for, and runs that waited for a thread.
  int64_t narrowed() const KILN_EXCLUDES(mu_);
  int64_t waited() const KILN_EXCLUDES(mu_);

 private:
  const int capacity_;
  mutable Mutex mu_;
  CondVar freed_;
  int free_ KILN_GUARDED_BY(mu_);
  int64_t narrowed_ KILN_GUARDED_BY(mu_) = 0;
  int64_t waited_ KILN_GUARDED_BY(mu_) = 0;
};

// Takes threads from a budget for one scope (a run); a null budget grants `want` as is.
class ThreadBudgetLease {
 public:
  ThreadBudgetLease(ThreadBudget* budget, int want)
      : budget_(budget), threads_(budget != nullptr ? budget->Acquire(want) : want) {}
  ~ThreadBudgetLease() {
    if (budget_ != nullptr) budget_->Release(threads_);
  }
  ThreadBudgetLease(const ThreadBudgetLease&) = delete;
  ThreadBudgetLease& operator=(const ThreadBudgetLease&) = delete;

  int threads() const { return threads_; }

 private:
  ThreadBudget* budget_;
  int threads_;
};

}  // namespace kiln
