// SPDX-License-Identifier: Apache-2.0
#pragma once
// ModelRunner: one model instance. It owns a Session over the model's shared graph, binds
// request inputs to graph inputs by name (applying config reshapes, padding and ragged
// concatenation through repo/batching.h), runs a batch of requests as one session run and
// slices the outputs back per request.
//
//   KILN_ASSIGN_OR_RETURN(auto session, Session::Create(graph, session_options));
//   KILN_ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, std::move(session), options));
//   std::vector<RequestOutcome> out = runner->RunBatch(requests, shape, /*version=*/1);
//
// NOTE (faults): a batch whose run fails is not failed as a whole. RESOURCE_EXHAUSTED (the
// allocator refused: memory is short) splits it into halves that are run one after the other,
// recursively, down to single requests; any other error retries every request alone, so one
// request's bad data fails that request only. Only a request that fails alone gets the error.
// Every attempt's time is charged to the requests it included.
//
// Thread safety: RunBatch and Run are const and thread-safe (Session::Run is), but the model
// runs each instance's batches on one thread.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "repo/batching.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "runtime/session.h"
#include "sched/batcher.h"
#include "sched/request.h"
#include "sched/stats.h"

namespace kiln {

// Classification labels per output name (the lines of the output's config label_filename).
using OutputLabels = std::map<std::string, std::vector<std::string>, std::less<>>;

struct ModelRunnerOptions {
  // Where batch input tensors are assembled and requests' sliced outputs are allocated; nullptr:
  // the host buffer type of the session's device (backend/backend.h: pinned host memory for a
  // device that has it, which its copies read fastest; HostAllocator() for the CPU). Must
  // outlive the runner and every response it answered.
  Allocator* allocator = nullptr;
  // Executions and batch sizes are recorded here; nullptr: not recorded.
  std::shared_ptr<StatsCollector> stats;
  // Copied into ModelSignature::output_labels.
  OutputLabels output_labels;
};

class ModelRunner {
 public:
  // REQUIRES: `config` is complete and was validated against session->graph()
  // (ValidateModelConfig, ValidateConfigAgainstGraph). INVALID_ARGUMENT for a bad padding /
  // crop / ragged config (MakeBatchingPlan); INTERNAL if the binding still fails.
  static Result<std::unique_ptr<ModelRunner>> Create(const inference::ModelConfig& config,
                                                     std::unique_ptr<Session> session,
                                                     ModelRunnerOptions options = {});
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const ModelSignature& signature() const { return signature_; }
  const inference::ModelConfig& config() const { return config_; }
  const BatchingPlan& plan() const { return plan_; }
  // The graph the session runs (after the graph optimizer, when it ran).
  const Graph& graph() const { return session_->graph(); }

  // Runs `requests` (non-empty; REQUIRES: each passed ValidateInferRequest and has batch shape
  // `shape`; a non-batching model takes one at a time) as one batch. Returns one outcome per
  // request, in order: a response with the requested outputs in requested order (else every
  // config output in config order), or the error of running it alone (see the NOTE).
  std::vector<RequestOutcome> RunBatch(std::span<const InferRequest* const> requests,
                                       const BatchShape& shape, int64_t version) const;

  // Runs one request alone (RunBatch of one).
  Result<InferResponse> Run(const InferRequest& request, int64_t version) const;

 private:
  struct InputBinding {
    std::string name;
    size_t plan_input = 0;                          // config input index
    const inference::ModelInput* config = nullptr;  // points into config_
  };
  struct OutputBinding {
    std::string name;
    int graph_output = -1;  // index into Session::Run's results
    const inference::ModelOutput* config = nullptr;
  };
  ModelRunner(inference::ModelConfig config, std::unique_ptr<Session> session, BatchingPlan plan,
              ModelRunnerOptions options);

  // One attempt: assembles, runs and slices. On error nothing is written to the responses;
  // the attempt's times are added to `out` in either case.
  Status Execute(std::span<const InferRequest* const> requests, const BatchShape& shape,
                 int64_t version, std::span<RequestOutcome> out) const;
  // Execute with the split / retry-alone fallback.
  void RunGroup(std::span<const InferRequest* const> requests, const BatchShape& shape,
                int64_t version, std::span<RequestOutcome> out) const;

  inference::ModelConfig config_;
  ModelSignature signature_;
  std::unique_ptr<Session> session_;
  BatchingPlan plan_;
  ModelRunnerOptions options_;
  Allocator* allocator_ = nullptr;      // never null
  std::vector<InputBinding> inputs_;    // graph input order
  std::vector<OutputBinding> outputs_;  // config output order
};

}  // namespace kiln
