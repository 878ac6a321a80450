// SPDX-License-Identifier: Apache-2.0
#pragma once
// GenScheduler: the one thread that drives continuous batching. It owns a GenPolicy
// (sched/gen_policy.h) and loops: take the plan of the next step, hand it to the executor (the
// model: engine step, sampling, detokenization, chunks to the clients), report the outcome back
// to the policy. It sleeps when there is nothing to run and wakes on Submit, Cancel, a waiting
// sequence's deadline, or Shutdown.
//
//   GenScheduler sched(options, &kv, &executor, SteadyClock());
//   KILN_RETURN_IF_ERROR(sched.Start());
//   KILN_RETURN_IF_ERROR(sched.Submit(info));   // RESOURCE_EXHAUSTED: the waiting queue is full
//   sched.Cancel(id);                           // the client left: dropped at the next step
//   sched.Shutdown(deadline_ns);                // drain until the deadline, then drop the rest
//
// The loop, each iteration: under the mutex, policy.Schedule(now); without it, Dropped for the
// cancelled, expired and rejected sequences, Preempted, then Execute; under the mutex again,
// policy.Complete and policy.AddFork for each fork. When a step plans nothing and removes
// nothing (the policy is idle, or what waits cannot be admitted yet) the thread sleeps on the
// clock until a Submit or Cancel wakes it, or until the earliest waiting deadline (or the
// drain deadline while shutting down); it never spins.
//
// Thread safety: Submit, Cancel, stats and Shutdown may be called from any thread (not from the
// executor's callbacks, except Cancel). The executor and the GenKvSpace are called only from the
// scheduler's thread (or, when it was never started, from Shutdown's caller).

#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "sched/clock.h"
#include "sched/gen_policy.h"

namespace kiln {

struct GenFork {
  GenSeqId parent = 0;
  GenSeqId child = 0;
  int64_t child_num_tokens = 0;
};

// The model side of the loop. Called from the scheduler's thread only.
class GenExecutor {
 public:
  virtual ~GenExecutor() = default;
  // Runs one step: every chunk of plan.run, sampling a token for those that want logits. Fills
  // one ChunkOutcome per chunk (same order) and the forks to add (n > 1: a parent's choices
  // after its first token). A failed step marks its sequences finished (the executor answers
  // them with the error).
  virtual void Execute(const StepPlan& plan, std::vector<ChunkOutcome>* outcomes,
                       std::vector<GenFork>* forks) = 0;
  // A sequence left without finishing: cancelled (CANCELLED), expired while waiting
  // (DEADLINE_EXCEEDED), too large for the whole KV cache (RESOURCE_EXHAUSTED), a fork the
  // policy refused (INVALID_ARGUMENT) or dropped at shutdown (UNAVAILABLE). Its blocks are
  // already freed; the executor answers its client with `why` and forgets it.
  virtual void Dropped(GenSeqId seq, const Status& why) = 0;
  // Preempted sequences of the step that was just planned (before Execute): their K/V is gone
  // and they will be recomputed. For counting and logging; nothing to answer.
  virtual void Preempted(std::span<const GenSeqId> seqs) { (void)seqs; }
};

struct GenSchedulerStats {
  GenPolicyStats policy;
  int64_t steps = 0;           // engine steps run
  int64_t batched_tokens = 0;  // tokens over all steps
  int64_t policy_ns = 0;       // steady-clock time spent planning and completing steps
};

class GenScheduler {
 public:
  // REQUIRES: kv, executor and clock outlive the scheduler.
  GenScheduler(const GenPolicyOptions& options, GenKvSpace* kv, GenExecutor* executor,
               const Clock& clock);
  ~GenScheduler();  // Shutdown(now) when still running
  GenScheduler(const GenScheduler&) = delete;
  GenScheduler& operator=(const GenScheduler&) = delete;

  // Starts the thread. INTERNAL when it cannot be started; FAILED_PRECONDITION when called twice
  // or after Shutdown began.
  Status Start() KILN_EXCLUDES(mu_, thread_mu_);
  // Queues a sequence (the executor already knows its tokens). RESOURCE_EXHAUSTED when the
  // waiting queue is full, UNAVAILABLE after Shutdown began, INVALID_ARGUMENT as GenPolicy::Add.
  Status Submit(const GenSeqInfo& seq) KILN_EXCLUDES(mu_);
  void Cancel(GenSeqId seq) KILN_EXCLUDES(mu_);
  // Stops taking sequences, keeps stepping until nothing is left or the clock reaches
  // drain_deadline_ns, then drops what is left (Dropped with UNAVAILABLE) and joins the thread.
  // Never started: drops what was submitted, on the calling thread. Idempotent (a later call's
  // deadline is ignored); not from the executor's callbacks.
  void Shutdown(int64_t drain_deadline_ns) KILN_EXCLUDES(mu_, thread_mu_);
  GenSchedulerStats stats() const KILN_EXCLUDES(mu_);

 private:
  void Loop() KILN_EXCLUDES(mu_);

  const Clock& clock_;
  GenKvSpace* kv_;
  GenExecutor* executor_;
  mutable Mutex mu_;
  CondVar cv_;
  GenPolicy policy_ KILN_GUARDED_BY(mu_);
  bool started_ KILN_GUARDED_BY(mu_) = false;
  bool stopping_ KILN_GUARDED_BY(mu_) = false;
  int64_t drain_deadline_ns_ KILN_GUARDED_BY(mu_) = 0;
  GenSchedulerStats stats_ KILN_GUARDED_BY(mu_);
  Mutex thread_mu_;  // serializes Start and Shutdown's join
  std::thread thread_ KILN_GUARDED_BY(thread_mu_);
};

}  // namespace kiln
