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

  // See LoadedModel::Infer. Never blocks on inference: validation runs on the caller, the run
  // on an instance thread. Errors: INVALID_ARGUMENT (validation), RESOURCE_EXHAUSTED (the
  // request's priority level queue is full), DEADLINE_EXCEEDED (timed out in the queue),
  // UNAVAILABLE (after Shutdown began), or the error of running the request alone.
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override;
  using LoadedModel::Infer;

  // Cumulative statistics since the model was loaded (every request answered, including those
  // refused by validation or the queue, counts as a success or a failure).
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

 private:
  class Executor;
  LoadedModelImpl(int64_t version, std::shared_ptr<const ModelRunner> first_runner,
                  std::shared_ptr<StatsCollector> stats, int instance_count);

  const int64_t version_;
  std::shared_ptr<const ModelRunner> runner_;  // instance 0's: config, signature and plan
  std::shared_ptr<StatsCollector> stats_;
  const int instance_count_;
  uint64_t weight_bytes_ = 0;  // set by Create
  std::atomic<uint64_t> load_duration_ns_{0};
  std::vector<Device> gpus_;  // the GPUs of its instances (set by Create), trimmed at the end
  std::unique_ptr<Batcher> batcher_;
};

}  // namespace kiln
