// SPDX-License-Identifier: Apache-2.0
#pragma once
// Batcher: one model version's scheduler. It owns the request queue, one scheduling thread that
// applies a BatchPolicy (sched/batch_policy.h), and one thread per model instance that runs the
// batches it is handed through a BatchExecutor. Responses leave through each request's
// ResponseSink (sched/request.h); the scheduling thread never runs a model and never blocks on
// I/O.
//
//   auto executor = std::make_shared<MyExecutor>();            // runs a batch on instance i
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> b, Batcher::Create(options, executor));
//   Status s = b->Enqueue(request, sink, shape, batch_size);  // on error both are handed back
//   ...
//   b->Shutdown();  // refuses new requests, runs every queued one, joins the threads
//
// Life of a request: Enqueue admits it (priority level, deadline, queue-size limit) and queues
// it. Whoever changes the queue asks the policy what to do: Enqueue, when an instance is free
// (a request the policy runs now goes straight to that instance); an instance thread that
// finished its batch (it takes the next one itself, so a busy model needs no thread hand-off
// between batches); and the scheduling thread, which keeps the policy's timers (max queue delay,
// deadlines) and answers expired requests at once with DEADLINE_EXCEEDED (also while every
// instance is busy). The others wake it only when its timer must change. The instance thread
// calls BatchExecutor::Execute, records the statistics, calls the callbacks (in arrival order
// when preserve_ordering is set; expired requests are answered at once and do not wait for
// their turn), and only then takes the next batch. A decision looks only at the part of the
// queue it depends on (BatchCandidates) unless a queued request has a deadline. For a fast
// model (BatcherOptions::inline_max_ns) Enqueue runs a batch that goes to a free instance
// itself, as that instance, instead of waking the instance's thread; the batch after it goes
// back to the instance's thread.
//
// Cancellation: a queued request whose Cancellation is set is taken out of the queue at once
// (on the cancelling thread) and answered CANCELLED; one already handed to an instance is
// answered CANCELLED and left out when its batch is about to run (the safe point of a tensor
// model); a request that has run is answered as usual. Both count as failures with reason
// kCanceled.
//
// Statistics: per request success / fail with queue time (arrival to dispatch), the compute
// times the executor reports, and total time (arrival to response); failures include expired
// requests (reason kTimeout) and requests whose run failed (kBackend); a refused Enqueue is
// recorded by the caller, which answers it. Executions and batch sizes are recorded by the executor
// (it knows how often it ran the model, e.g. after splitting a batch). A successful response
// carries the same queue and compute times in InferResponse::timing (sched/request.h), so a
// caller (an ensemble step) sees what this request cost without reading the statistics.
//
// Ownership and lifetimes: the threads share the queue state, the executor and the statistics
// with the Batcher through shared_ptr, so a Batcher may be destroyed from inside one of its own
// callbacks (its threads then finish the queued work on their own and exit). The clock must
// outlive the threads.
//
// Thread safety: Enqueue, Shutdown and the accessors are thread-safe.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "sched/batch_policy.h"
#include "sched/clock.h"
#include "sched/request.h"
#include "sched/stats.h"

namespace kiln {

// The result of one request of an executed batch, with the time the batch spent in each phase
// (charged in full to every request of the batch).
struct RequestOutcome {
  Result<InferResponse> response = Status::Internal("request was not run");
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
};

// Runs batches; implemented by the model (repo/loaded_model.h).
class BatchExecutor {
 public:
  virtual ~BatchExecutor() = default;
  // Runs `requests` (non-empty; every one has per-item input shapes `shape`) as one batch on
  // instance `instance`. Called on that instance's thread, so never concurrently for one
  // instance. Returns one outcome per request, in order. Must not call the callbacks.
  virtual std::vector<RequestOutcome> Execute(int instance,
                                              std::span<const InferRequest* const> requests,
                                              const BatchShape& shape) = 0;
};

struct BatcherOptions {
  std::string name;  // "model 'x' version 3": starts error messages
  BatchPolicyConfig policy;
  int num_instances = 1;                  // >= 1
  const Clock* clock = nullptr;           // nullptr: SteadyClock()
  std::shared_ptr<StatsCollector> stats;  // nullptr: none recorded
  // Inline execution: a request that finds an instance free and is to run at once runs on
  // Enqueue's caller, inside Enqueue, when the model's recent batches took at most this long on
  // average (a moving average of BatchExecutor::Execute); the hand-off to the instance's thread
  // costs more than such a model's run. 0: never (every batch runs on its instance's thread).
  // Callers must accept `done` being called before Enqueue returns.
  int64_t inline_max_ns = 0;
};

class Batcher {
 public:
  // Starts the scheduling thread and one thread per instance. INVALID_ARGUMENT for an invalid
  // policy config; INTERNAL when a thread cannot be started.
  static Result<std::unique_ptr<Batcher>> Create(BatcherOptions options,
                                                 std::shared_ptr<BatchExecutor> executor);
  // Shuts down (see Shutdown) if that has not happened yet.
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `request` (REQUIRES: non-null) with `sink` (REQUIRES: non-null), whose input shapes
  // are `shape` and whose batch size is `batch_size` (>= 1; 1 when the model has no batch dim).
  // On OK the batcher owns both (both are reset) and calls sink->Finish exactly once, on one of
  // its threads (or, with inline_max_ns, maybe on this one before returning; on cancellation,
  // on the cancelling thread). On error neither is touched (the caller answers): UNAVAILABLE
  // after Shutdown began; RESOURCE_EXHAUSTED when the request's priority level is full;
  // CANCELLED when the request is cancelled already.
  Status Enqueue(std::unique_ptr<InferRequest>& request, std::shared_ptr<ResponseSink>& sink,
                 BatchShape shape, int64_t batch_size);

  // Refuses new requests, runs every queued request (every callback is called), then joins the
  // threads. Idempotent. Called from one of the batcher's own threads (a callback destroying the
  // last owner), it returns at once and the threads drain the queue and exit by themselves.
  void Shutdown() KILN_EXCLUDES(threads_mu_);

  // Requests queued and not yet handed to an instance.
  size_t queued() const;
  const BatchPolicy& policy() const;

 private:
  struct State;
  explicit Batcher(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
  Mutex threads_mu_;
  std::vector<std::thread> threads_ KILN_GUARDED_BY(threads_mu_);  // empty once shut down
};

}  // namespace kiln
