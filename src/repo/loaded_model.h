// SPDX-License-Identifier: Apache-2.0
#pragma once
// One loaded model version: request validation, its instances and its scheduler.
//
//   ValidateInferRequest  pure check of a request against a ModelSignature (no threads);
//   LoadedModelImpl       the LoadedModel of model_manager.h: builds one ModelRunner (Session)
//                         per instance over the shared graph, validates each request on the
//                         caller's thread, then hands it to a Batcher (sched/batcher.h) that
//                         applies the config's dynamic_batching policy and runs the batches on
//                         the instances (repo/model_runner.h: batch assembly, split on OOM).
//
//   KILN_ASSIGN_OR_RETURN(auto model, LoadedModelImpl::Create(1, config, graph, options));
//   model->Infer(std::move(request), [](Result<InferResponse> r) { ... });
//   ModelStatistics stats = model->Statistics();
//   model->Shutdown();   // refuses new requests, runs the queued ones, joins the threads
//
// Instances: KIND_GPU groups start `count` instances on each GPU they list (every GPU of the
// process when they list none; a GPU the process lacks fails the load, naming what it has), each
// a Session that prefers that GPU (nodes without a CUDA kernel run on the CPU), over the graph
// optimized for the GPU. KIND_CPU, KIND_AUTO and KIND_MODEL groups run on the CPU, their counts
// summed and capped by the thread budget of InstanceOptions (sched/instance_options.h). Every
// instance owns its Session (and on a GPU its streams and device memory); the sessions share the
// graph and its weights read-only.
//
// Response cache: when the config has `response_cache { enable: true }` and InstanceOptions
// carries the server's cache (repo/response_cache.h), a valid request is looked up by its key
// first. A hit is answered on the caller's thread before Infer returns, with the cached outputs
// (the same tensors as the response that filled it: bit-identical) and this request's id; it
// is not queued, so the queue's admission (priority, queue size, timeout) does not apply to it.
// A miss runs as any request; its successful response is inserted before it is answered. Failed
// requests are never cached. A cancelled request, and any request once Shutdown began, skips
// the cache (and is refused as usual). Each load is keyed on its own, so a version reloaded with
// new files never answers from the entries of the load it replaced (they age out of the LRU).
// Statistics: sched/stats.h (cache_hit, cache_miss).
//
// Ownership: a LoadedModelImpl owns its batcher, runners and sessions. The batcher's threads
// share them through shared_ptr, so the object may be destroyed on one of its own threads (when
// a callback drops the last reference) without a self-join.
//
// Thread safety: Infer, Shutdown, Statistics and the accessors are thread-safe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "repo/model_runner.h"
#include "repo/response_cache.h"
#include "repo/served_model.h"
#include "sched/batcher.h"
#include "sched/instance_options.h"
#include "sched/request.h"

namespace kiln {

// Checks a request against the signature. INVALID_ARGUMENT, naming the tensor and expected vs
// got, when: an input is unknown, given twice, missing, has no data or the wrong datatype; the
// rank is not dims + 1 (batching) or dims; the batch size is outside 1..max_batch_size or
// differs between inputs; a fixed dim differs; a requested output is unknown or requested twice.
Status ValidateInferRequest(const ModelSignature& signature, const InferRequest& request);

// The statistics reason of a request refused by Batcher::Enqueue with `refused`:
// RESOURCE_EXHAUSTED is a full queue, UNAVAILABLE a shutdown, INVALID_ARGUMENT a bad request,
// CANCELLED a request its client gave up on.
FailureReason EnqueueFailureReason(const Status& refused);

// Bytes of the graph's initializers (the top-level graph's constant values: the weights).
uint64_t GraphWeightBytes(const Graph& graph);

class LoadedModelImpl final : public ServedModel {
 public:
  // Builds the instances' sessions over `graph` and starts the scheduler. REQUIRES: `config` is
  // complete and validated against `graph` (ValidateModelConfig, ValidateConfigAgainstGraph).
  // Errors: INVALID_ARGUMENT for a KIND_GPU group without the GPU, or an inconsistent
  // dynamic_batching / padding config (naming the model and field); the Session's error when a
  // kernel is missing; INTERNAL when a thread cannot be started.
  static Result<std::shared_ptr<LoadedModelImpl>> Create(int64_t version,
                                                         const inference::ModelConfig& config,
                                                         std::shared_ptr<const Graph> graph,
                                                         const InstanceOptions& options = {},
                                                         const OutputLabels& output_labels = {});
  // Shuts down (see Shutdown) if that has not happened yet.
  ~LoadedModelImpl() override;
  LoadedModelImpl(const LoadedModelImpl&) = delete;
  LoadedModelImpl& operator=(const LoadedModelImpl&) = delete;

  const std::string& name() const override;
  int64_t version() const override;
  const ModelSignature& signature() const override;
  const inference::ModelConfig& config() const;
  const inference::ModelConfig* model_config() const override { return &config(); }
  // Instances actually started (the configured count, capped by the thread budget).
  int instance_count() const { return instance_count_; }
  // The graph every instance runs: the optimizer's output unless the config turned it off
  // (GraphOptimizationFromConfig).
  const Graph& graph() const;

  // See LoadedModel::Infer. Never blocks on inference: validation (and a response cache hit)
  // runs on the caller, the run on an instance thread. Errors: INVALID_ARGUMENT (validation),
  // RESOURCE_EXHAUSTED (the request's priority level queue is full), DEADLINE_EXCEEDED (timed out
  // in the queue), UNAVAILABLE (after Shutdown began), or the error of running the request alone.
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override;
  using LoadedModel::Infer;

  // Cumulative statistics since the model was loaded (every request answered, including those
  // refused by validation or the queue, counts as a success or a failure; response cache hits
  // are successes). ModelStatistics::response_cache tells whether this version uses the cache.
  ModelStatistics Statistics() const override;
  // Zeroes the statistics (after warmup, before the version serves).
  void ResetStatistics() override;

  // Refuses new requests, runs every queued request (each callback is called), then joins the
  // threads. Idempotent; concurrent callers return once the threads are gone.
  // REQUIRES: not called from inside a ResponseSink of this model.
  void Shutdown() override;

  // Requests accepted but not yet handed to an instance (for tests and stats).
  size_t queued() const;
  size_t PendingRequestCount() const override;
  // Set by the model manager once the version is loaded and warmed up.
  double LoadDurationSeconds() const override;
  void SetLoadDuration(uint64_t ns) override;
  uint64_t WeightBytes() const override { return weight_bytes_; }
  // The response cache this version uses; null when it uses none.
  const std::shared_ptr<ResponseCache>& response_cache() const { return cache_; }

 private:
  class Executor;
  class CacheInsertSink;
  LoadedModelImpl(int64_t version, std::shared_ptr<const ModelRunner> first_runner,
                  std::shared_ptr<StatsCollector> stats, int instance_count);
  // Answers `request` from the cache when it is there (true: `sink` is finished). Otherwise, on
  // a cacheable request, wraps `sink` so that a successful response is inserted.
  bool AnswerFromCache(const InferRequest& request, int64_t arrival_ns,
                       std::shared_ptr<ResponseSink>& sink);

  const int64_t version_;
  std::shared_ptr<const ModelRunner> runner_;  // instance 0's: config, signature and plan
  std::shared_ptr<StatsCollector> stats_;
  const int instance_count_;
  uint64_t weight_bytes_ = 0;  // set by Create
  std::atomic<uint64_t> load_duration_ns_{0};
  std::vector<Device> gpus_;  // the GPUs of its instances (set by Create), trimmed at the end
  std::shared_ptr<ResponseCache> cache_;  // set by Create when the config enables it
  const Clock* clock_ = nullptr;          // set by Create: times cache hits and misses
  uint64_t load_id_ = 0;  // set by Create: numbers the loads of the process (in cache keys)
  std::atomic<bool> shutting_down_{false};  // set by Shutdown: the cache answers no more
  std::unique_ptr<Batcher> batcher_;
};

}  // namespace kiln
