// SPDX-License-Identifier: Apache-2.0
// NOTE (design): one mutex (mu_) guards the policy; the scheduler's thread holds it only while it
// asks the policy for a plan and while it reports the outcome back, never while the executor
// runs, so Submit and Cancel wait at most for one Schedule or Complete. Cancel only marks the
// sequence: the policy drops it at the next Schedule, which is also where its blocks are freed
// (the GenKvSpace is touched from the scheduler's thread only).
#include "sched/gen_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <system_error>
#include <utility>

#include "base/check.h"

namespace kiln {

namespace {

// Something left or changed in this plan (so the loop goes on without sleeping).
bool PlanDidSomething(const StepPlan& plan) {
  return !plan.run.empty() || !plan.cancelled.empty() || !plan.expired.empty() ||
         !plan.rejected.empty() || !plan.preempted.empty();
}

}  // namespace

GenScheduler::GenScheduler(const GenPolicyOptions& options, GenKvSpace* kv, GenExecutor* executor,
                           const Clock& clock)
    : clock_(clock), kv_(kv), executor_(executor), policy_(options, kv) {
  KILN_CHECK(executor != nullptr, "GenScheduler: null executor");
}

GenScheduler::~GenScheduler() { Shutdown(clock_.NowNs()); }

Status GenScheduler::Start() {
  MutexLock thread_lock(thread_mu_);
  {
    MutexLock lock(mu_);
    if (started_ || stopping_) {
      return Status::FailedPrecondition(started_ ? "the generation scheduler was started already"
                                                 : "the generation scheduler is shutting down");
    }
    started_ = true;
  }
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    MutexLock lock(mu_);
    started_ = false;
    return Status::Internal(
        fmt::format("cannot start the generation scheduler's thread: {}", e.what()));
  }
  return Status::OK();
}

Status GenScheduler::Submit(const GenSeqInfo& seq) {
  {
    MutexLock lock(mu_);
    if (stopping_) return Status::Unavailable("the generation scheduler is shutting down");
    KILN_RETURN_IF_ERROR(policy_.Add(seq));
  }
  cv_.NotifyOne();
  return Status::OK();
}

void GenScheduler::Cancel(GenSeqId seq) {
  {
    MutexLock lock(mu_);
    policy_.Cancel(seq);
  }
  cv_.NotifyOne();
}

void GenScheduler::Shutdown(int64_t drain_deadline_ns) {
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      drain_deadline_ns_ = drain_deadline_ns;
    }
  }
  cv_.NotifyOne();
  MutexLock thread_lock(thread_mu_);
  if (thread_.joinable()) {
    thread_.join();  // the loop drains, clears and drops what is left
    return;
  }
  // Never started (or joined by an earlier call): drop what was submitted here.
  std::vector<GenSeqId> left;
  {
    MutexLock lock(mu_);
    left = policy_.Clear();
  }
  for (GenSeqId id : left) {
    executor_->Dropped(id, Status::Unavailable("the generation scheduler is shutting down"));
  }
}

GenSchedulerStats GenScheduler::stats() const {
  MutexLock lock(mu_);
  GenSchedulerStats s = stats_;
  s.policy = policy_.stats();
  return s;
}

void GenScheduler::Loop() {
  std::vector<ChunkOutcome> outcomes;
  std::vector<GenFork> forks;
  std::vector<std::pair<GenSeqId, Status>> fork_errors;
  MutexLock lock(mu_);
  for (;;) {
    const int64_t now = clock_.NowNs();
    if (stopping_ && (policy_.idle() || now >= drain_deadline_ns_)) break;
    const auto schedule_start = std::chrono::steady_clock::now();
    StepPlan plan = policy_.Schedule(now);
    const auto schedule_end = std::chrono::steady_clock::now();
    if (!PlanDidSomething(plan)) {
      // Idle, or what waits cannot be admitted now: sleep until something changes.
      int64_t wake_ns = policy_.next_deadline_ns();
      if (stopping_) wake_ns = std::min(wake_ns, drain_deadline_ns_);
      clock_.WaitUntil(cv_, mu_, wake_ns);
      continue;
    }
    lock.Unlock();
    for (GenSeqId id : plan.cancelled) {
      executor_->Dropped(id, Status::Cancelled("request cancelled"));
    }
    for (GenSeqId id : plan.expired) {
      executor_->Dropped(id, Status::DeadlineExceeded("request timed out in the queue"));
    }
    for (size_t i = 0; i < plan.rejected.size(); ++i) {
      executor_->Dropped(plan.rejected[i], Status::ResourceExhausted(fmt::format(
                                               "the request needs {} KV blocks, the cache has {}",
                                               plan.rejected_blocks[i], kv_->num_blocks())));
    }
    if (!plan.preempted.empty()) executor_->Preempted(plan.preempted);
    outcomes.clear();
    forks.clear();
    if (!plan.run.empty()) executor_->Execute(plan, &outcomes, &forks);
    lock.Lock();
    if (plan.run.empty()) continue;
    const auto complete_start = std::chrono::steady_clock::now();
    policy_.Complete(plan, outcomes);
    ++stats_.steps;
    stats_.batched_tokens += plan.num_batched_tokens;
    fork_errors.clear();
    for (const GenFork& f : forks) {
      if (Status s = policy_.AddFork(f.parent, f.child, f.child_num_tokens); !s.ok()) {
        fork_errors.emplace_back(f.child, std::move(s));
      }
    }
    // Wall time of the policy's own work (the executor's is the model's to measure).
    stats_.policy_ns +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            (schedule_end - schedule_start) + (std::chrono::steady_clock::now() - complete_start))
            .count();
    if (!fork_errors.empty()) {
      lock.Unlock();
      for (auto& [child, why] : fork_errors) executor_->Dropped(child, why);
      lock.Lock();
    }
  }
  std::vector<GenSeqId> left = policy_.Clear();
  lock.Unlock();
  for (GenSeqId id : left) {
    executor_->Dropped(id, Status::Unavailable("the generation scheduler is shutting down"));
  }
}

}  // namespace kiln
