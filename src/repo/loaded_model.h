// SPDX-License-Identifier: Apache-2.0
#pragma once
// One loaded model version and its default scheduler.
//
// Three layers, each usable alone:
//   ValidateInferRequest  pure check of a request against a ModelSignature (no threads);
//   ModelRunner           runs one request on a Session: binds request inputs to graph inputs
//                         by name, applies config reshapes, picks and orders the outputs;
//   LoadedModelImpl       the LoadedModel of model_manager.h: validates, then queues the request
//                         to `num_workers` worker threads (a plain FIFO + condition variable;
//                         each request runs alone, the dynamic batcher comes later) which call
//                         the callback with the result.
//
//   KILN_ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, std::move(session)));
//   KILN_ASSIGN_OR_RETURN(auto model, LoadedModelImpl::Create(1, std::move(runner), 2));
//   model->Infer(std::move(request), [](Result<InferResponse> r) { ... });
//   model->Shutdown();   // refuses new requests, runs the queued ones, joins the workers
//
// Ownership: a LoadedModelImpl owns its runner (and through it the Session and graph). Its
// worker threads share the queue state through a shared_ptr, so the object may be destroyed on
// one of its own workers (when a callback drops the last reference) without a self-join.
//
// Thread safety: Infer, Shutdown and the accessors are thread-safe. ModelRunner::Run is const
// and thread-safe (Session::Run is).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "runtime/session.h"
#include "sched/request.h"

namespace kiln {

// Checks a request against the signature. INVALID_ARGUMENT, naming the tensor and expected vs
// got, when: an input is unknown, given twice, missing, has no data or the wrong datatype; the
// rank is not dims + 1 (batching) or dims; the batch size is outside 1..max_batch_size or
// differs between inputs; a fixed dim differs; a requested output is unknown or requested twice.
Status ValidateInferRequest(const ModelSignature& signature, const InferRequest& request);

class ModelRunner {
 public:
  // REQUIRES: `config` is complete and was validated against session->graph()
  // (ValidateModelConfig, ValidateConfigAgainstGraph). INTERNAL if the binding still fails.
  static Result<std::unique_ptr<ModelRunner>> Create(const inference::ModelConfig& config,
                                                     std::unique_ptr<Session> session);
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const ModelSignature& signature() const { return signature_; }
  const inference::ModelConfig& config() const { return config_; }

  // Runs one request. REQUIRES: ValidateInferRequest(signature(), request) is OK. The response
  // carries the requested outputs in requested order, else every config output in config order.
  // Session errors come back as they are.
  Result<InferResponse> Run(const InferRequest& request, int64_t version) const;

 private:
  struct InputBinding {
    std::string name;
    const inference::ModelInput* config = nullptr;  // points into config_
  };
  struct OutputBinding {
    std::string name;
    int graph_output = -1;  // index into Session::Run's results
    const inference::ModelOutput* config = nullptr;
  };
  ModelRunner(inference::ModelConfig config, std::unique_ptr<Session> session);

  inference::ModelConfig config_;
  ModelSignature signature_;
  std::unique_ptr<Session> session_;
  std::vector<InputBinding> inputs_;    // graph input order
  std::vector<OutputBinding> outputs_;  // config output order
};

class LoadedModelImpl final : public LoadedModel {
 public:
  // Starts `num_workers` (>= 1) worker threads. INTERNAL when a thread cannot be started.
  static Result<std::shared_ptr<LoadedModelImpl>> Create(int64_t version,
                                                         std::unique_ptr<ModelRunner> runner,
                                                         int num_workers);
  // Shuts down (see Shutdown) if that has not happened yet.
  ~LoadedModelImpl() override;
  LoadedModelImpl(const LoadedModelImpl&) = delete;
  LoadedModelImpl& operator=(const LoadedModelImpl&) = delete;

  const std::string& name() const override;
  int64_t version() const override;
  const ModelSignature& signature() const override;
  const inference::ModelConfig& config() const;

  // See LoadedModel::Infer. Never blocks on inference: validation runs on the caller, the run
  // on a worker. After Shutdown began: UNAVAILABLE.
  void Infer(std::unique_ptr<InferRequest> request, InferCallback done) override;

  // Refuses new requests, lets the workers run every queued request (each callback is called),
  // then joins them. Idempotent; concurrent callers return once the workers are gone.
  // REQUIRES: not called from inside an InferCallback of this model.
  void Shutdown();

  // Requests accepted but not yet picked up by a worker (for tests and stats).
  size_t queued() const;

 private:
  struct Core;
  LoadedModelImpl(std::shared_ptr<Core> core);

  std::shared_ptr<Core> core_;
  std::mutex threads_mu_;
  std::vector<std::thread> threads_;  // guarded by threads_mu_; empty once shut down
};

}  // namespace kiln
