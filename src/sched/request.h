// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal inference request and response: what server/ translates the wire protocols to and
// from. Nothing here knows about HTTP, JSON or gRPC.
//
// The contract of one request, from the protocol down to the scheduler and the model:
//   - the request is handed over with std::unique_ptr (the model owns it from then on);
//   - its answers go to a ResponseSink: zero or more partial responses (Send; a generative
//     model streams its tokens this way, a tensor model sends none), then exactly one final
//     result (Finish: a last response or an error Status), on any thread, never concurrently;
//   - flow control: a producer of partial responses reads the sink's backlog() (responses
//     handed over that the consumer has not written yet) and pauses while it is too high;
//   - cancellation travels the other way: the request may carry a Cancellation that the
//     protocol sets when the client goes away (HTTP connection closed, gRPC call cancelled); the
//     scheduler drops a cancelled request from its queue at once and skips it at the next safe
//     point (for a tensor model: before its batch runs), answering it CANCELLED.
//
//   auto cancel = std::make_shared<Cancellation>();
//   request->cancellation = cancel;
//   model->Infer(std::move(request), sink);   // sink->Finish(...) exactly once
//   cancel->Cancel();                          // the client left
//
// Identity: the request carries only the client's id; which model and version answered is
// known where the request was routed (server/inference.h writes it onto the response once).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

struct InferInput {
  std::string name;
  OwnedTensor tensor;  // whole-batch shape as sent (batch dim included when the model batches)
};

struct RequestedOutput {
  std::string name;
};

// A request's cancellation: set once (Cancel), read anywhere (cancelled), and callbacks that
// run once when it is set. Thread-safe.
class Cancellation {
 public:
  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Sets it (idempotent) and runs the registered callbacks, on this thread, with no lock held.
  void Cancel() KILN_EXCLUDES(mu_);
  // Runs `fn` once when the cancellation is set: later, on the thread that sets it, or now, on
  // this thread, when it is set already. `fn` must not block.
  // (const: the holders of a request may watch its cancellation but only the protocol sets it.)
  void OnCancel(std::function<void()> fn) const KILN_EXCLUDES(mu_);

 private:
  std::atomic<bool> cancelled_{false};
  mutable Mutex mu_;
  // Run once by Cancel.
  mutable std::vector<std::function<void()>> callbacks_ KILN_GUARDED_BY(mu_);
};

struct InferRequest {
  std::string id;  // the client's request id, echoed in the response; may be empty
  std::vector<InferInput> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every model output, in model order
  // Scheduling parameters (the "priority" and "timeout" request parameters).
  uint64_t priority = 0;    // 0: the model's default priority level; 1 is the highest
  uint64_t timeout_us = 0;  // 0: the queue policy's default timeout (microseconds)
  // Set when the client goes away; null: the request cannot be cancelled.
  std::shared_ptr<const Cancellation> cancellation;
  // The client's W3C `traceparent` (HTTP header or gRPC metadata), as sent; empty when none.
  std::string traceparent;
  // The "precision" request parameter: which precision variant of the model serves it
  // (repo/rollout.h); empty: the model's own.
  std::string precision;
  // The request's service class (the "service_class" request parameter, or the class of the
  // tenant that sent it): "best_effort" requests move to the model's fastest precision variant
  // while its queue is over the overload threshold (repo/rollout.h); empty: guaranteed.
  std::string service_class;

  bool cancelled() const { return cancellation != nullptr && cancellation->cancelled(); }
};

struct InferOutput {
  std::string name;
  OwnedTensor tensor;
};

// Where the server's time on one request went, as its model's statistics record it
// (sched/stats.h): queue (arrival to dispatch) and the compute phases of the batch it ran in,
// charged in full to every request of the batch. All zero when unknown (a model that does not
// measure them) and for an answer from the response cache, which waits in no queue and runs
// nothing. For an ensemble, the sums over the steps that ran (repo/ensemble.h). Plain data:
// filling it costs no allocation.
struct RequestTiming {
  uint64_t queue_ns = 0;
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
};

// One ensemble step of a request, for its trace (repo/ensemble.h fills them; server/trace.h
// makes spans of them).
struct StepTiming {
  int step = 0;
  std::string model;
  uint64_t start_offset_ns = 0;  // hand-off to the composing model, from the request's start
  uint64_t duration_ns = 0;      // hand-off to its answer
  RequestTiming timing;          // what the composing model's response reported
  bool ok = true;
};

struct InferResponse {
  std::string model_name;
  int64_t model_version = 0;
  std::string id;
  std::vector<InferOutput> outputs;  // requested order, or model order when none were requested
  // Set on the final response by the scheduler that ran the request (zero on partial ones).
  RequestTiming timing;
  // An ensemble's steps that ran, in the order they were answered (empty for other models).
  std::vector<StepTiming> step_timings;
  // Tokens a generative model sampled for this response since the previous one (the tensor path
  // of generation, server/gen_infer.h): what the tenant's token rate is charged.
  int64_t generated_tokens = 0;
};

// Where one request's responses go (see the contract above). Implemented by the protocols (and
// by CallbackSink); called by the scheduler and the model.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // A partial response, before Finish, in order.
  virtual void Send(InferResponse partial) = 0;
  // The final result, exactly once, after every Send.
  virtual void Finish(Result<InferResponse> result) = 0;
  // Partial responses handed to Send and not yet written out by the consumer.
  virtual size_t backlog() const { return 0; }
  // Whether Send reaches the client (a decoupled stream); false: partial responses are dropped,
  // so a request that can only stream is refused.
  virtual bool streaming() const { return false; }
};

// Sets the "precision" (fp32, fp16, bf16, int8) or "service_class" (guaranteed, best_effort)
// request parameter on `request`; INVALID_ARGUMENT naming the parameter and the values allowed.
Status SetRoutingParameter(std::string_view key, std::string_view value, InferRequest* request);

using InferCallback = std::function<void(Result<InferResponse>)>;

// A sink that hands the final result to `done` and each partial response to `partial` (dropped
// when `partial` is empty): for callers that want a callback (tests, warmup, tools).
std::shared_ptr<ResponseSink> CallbackSink(InferCallback done,
                                           std::function<void(InferResponse)> partial = {});

}  // namespace kiln
