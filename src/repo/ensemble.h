// SPDX-License-Identifier: Apache-2.0
#pragma once
// Ensembles: models whose steps are other models (the reference server's `platform:
// "ensemble"`, protocol/KSERVE-V2.md section 3.9). An ensemble config names its steps and wires
// them with ensemble-scoped tensor names:
//
//   ensemble_scheduling { step [ { model_name: "resize" model_version: -1
//                                  input_map { key: "RAW" value: "IMAGE" }       # model input <-
//                                  tensor output_map { key: "OUT" value: "resized" } },  # model
//                                  output -> tensor
//                                { model_name: "classify" ... } ] }
//
// Three layers, each testable alone:
//   ValidateEnsembleConfig  pure structural checks of the config (no composing model needed):
//                           the wiring is a DAG over tensors produced once, every ensemble input
//                           read, every ensemble output produced (ValidateModelConfig calls it);
//   ValidateEnsemble        the same plus every step against its composing model's signature
//                           (names, every model input mapped, dtype and shape of producer vs
//                           consumer, max_batch_size): the load-time check;
//   EnsembleModel           the ServedModel that runs requests: each step's request is handed to
//                           the composing model's LoadedModel::Infer as soon as its inputs are
//                           ready, so independent steps run concurrently and requests of many
//                           ensemble calls meet in each composing model's own dynamic batcher.
//
//   ComposingModelResolver resolve = [&](std::string_view name, int64_t version) {
//     return manager.GetModel(name, version);
//   };
//   KILN_ASSIGN_OR_RETURN(auto ensemble, EnsembleModel::Create(1, config, resolve, options));
//   ensemble->Infer(std::move(request), sink);   // sink->Finish(...) exactly once
//
// Steps are numbered from 0 in config order, as the reference server numbers them; every error
// about a step names it as "ensemble 'e' step 2 (model 'resize')".
//
// Thread safety: the free functions are pure and reentrant; EnsembleModel is thread-safe (see
// its class comment).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "repo/served_model.h"
#include "sched/instance_options.h"
#include "sched/request.h"

namespace kiln {

inline constexpr std::string_view kEnsemblePlatform = "ensemble";

// True when the config describes an ensemble (platform "ensemble" or ensemble_scheduling set;
// ValidateEnsembleConfig requires both).
bool IsEnsembleConfig(const inference::ModelConfig& config);

// A composing model a step names: model_version -1 is the highest ready version.
struct ComposingModelRef {
  std::string name;
  int64_t version = -1;
  bool operator==(const ComposingModelRef&) const = default;
};
// The distinct composing models of the steps, in step order.
std::vector<ComposingModelRef> EnsembleComposingModels(const inference::ModelConfig& config);

// The normalization of an ensemble config (instead of NormalizeModelConfig, which gives models
// an instance group): version policy latest 1 when absent.
void NormalizeEnsembleConfig(inference::ModelConfig* config);

// Structural checks that need no composing model. INVALID_ARGUMENT naming the ensemble (and the
// step and tensor where there is one) for: ensemble_scheduling without platform "ensemble" or
// the reverse; instance_group, optimization or model_warmup on an ensemble; no steps; a step
// without model_name, input_map or output_map, with a model_version below -1, or naming the
// ensemble itself; an input or output with a kiln padding / crop extension; an ensemble tensor
// produced twice (by two steps, two outputs of one step, or a step and the ensemble's input);
// a tensor read but neither produced nor an ensemble input; a step output no step reads that is
// not an ensemble output; an ensemble input no step reads; an ensemble output no step produces;
// steps that form a cycle (the cycle is named).
Status ValidateEnsembleConfig(const inference::ModelConfig& config);

// ValidateEnsembleConfig, then every step against its composing model's signature
// (step_signatures[i] for step i). INVALID_ARGUMENT naming the step and tensor for: a
// max_batch_size above a batching composing model's; an input_map key that is not an input of
// the model, or an output_map key that is not an output; a model input left unmapped; a
// datatype or shape that differs between a tensor's producer (ensemble input or step output)
// and any of its consumers (step input or ensemble output). Shapes agree when their dims match
// (-1 matches anything) either as written or with the batch dim prepended to each side that
// batches (the reference server's rule: a non-batching model may state the batch dim itself).
// REQUIRES: step_signatures.size() == number of steps.
Status ValidateEnsemble(const inference::ModelConfig& config,
                        std::span<const ModelSignature> step_signatures);

// The dataflow of a (structurally valid) ensemble config, as indices.
struct EnsemblePlan {
  struct Binding {
    std::string model_tensor;  // the composing model's input or output name
    int tensor = -1;           // index into `tensors`
  };
  struct Step {
    ComposingModelRef model;
    std::vector<Binding> inputs;     // sorted by model_tensor
    std::vector<Binding> outputs;    // sorted by model_tensor
    std::vector<int> input_tensors;  // the distinct tensors of `inputs`
  };
  std::vector<std::string> tensors;
  std::vector<int> producer;                // per tensor: its step, or -1 for an ensemble input
  std::vector<std::vector<int>> consumers;  // per tensor: the distinct steps that read it
  std::vector<int> inputs;                  // tensor of each ensemble input, config order
  std::vector<int> outputs;                 // tensor of each ensemble output, config order
  std::vector<Step> steps;                  // config order
};
// REQUIRES: ValidateEnsembleConfig(config) is OK (a violation is a KILN_CHECK failure).
EnsemblePlan MakeEnsemblePlan(const inference::ModelConfig& config);

// Which steps a request needs to produce `outputs` (tensor indices): the steps that produce them
// and, transitively, those producing what those steps read.
std::vector<bool> NeededSteps(const EnsemblePlan& plan, std::span<const int> outputs);

// The shape to hand a tensor to a consumer with: the reference server's conversion between
// batching and non-batching ends. `actual` is the tensor's full shape, `batch` the batch size of
// the request that produced it (0 when its producer does not batch). A batching consumer given
// a tensor produced without batching whose shape matches the consumer's per-item `dims` gets
// [1] + actual; a non-batching consumer given a batch-1 tensor whose shape does not match its
// `dims` gets actual without dim 0; otherwise the shape is unchanged.
std::vector<int64_t> AdaptShapeForConsumer(std::span<const int64_t> dims, bool consumer_batches,
                                           int64_t batch, std::span<const int64_t> actual);

// How an ensemble finds a composing model when a request arrives (and at load): the model
// manager's GetModel. Called from any thread, never with a lock of the ensemble held.
using ComposingModelResolver =
    std::function<Result<std::shared_ptr<LoadedModel>>(std::string_view name, int64_t version)>;

// The ServedModel of one ensemble version.
//
// Execution: Infer validates the request against the ensemble's signature, resolves every
// step's composing model once (so a request runs on one version of each), then starts every
// step whose inputs are ready. A step's request carries the ensemble request's id, priority,
// timeout and cancellation, its inputs as OwnedTensors that share the producer's buffer (no
// bytes are copied; a reshape between batching and non-batching ends changes only the view) and
// asks only for the outputs some needed step or the client reads. Steps that no requested output
// needs are not run. The composing model answers on its own thread; that callback records the
// outputs and starts the steps they complete (never blocking: a step that must wait is parked).
// `ensemble_scheduling.max_inflight_requests` N > 0 bounds the step requests in flight at each
// step across all requests of the ensemble (the reference server's per-step limit): a step that
// finds N in flight waits, parked, until one finishes; a cancelled request leaves the wait at
// once. When a step fails, no further step of that request starts; once its running steps
// finish, the request fails with "ensemble 'e' step N (model 'm'): <the step's error>" and the
// step's status code; other requests are not affected.
//
// Composing models that change: a request whose resolved composing versions differ from those
// last checked re-runs ValidateEnsemble against their signatures (once per change); a mismatch
// fails requests with UNAVAILABLE naming the step and tensor.
//
// Statistics, as the reference server accounts an ensemble: success / failure with the
// end-to-end time (arrival to answer); compute_input / compute_infer / compute_output the sums
// over the request's successful step requests of the times their responses report
// (InferResponse::timing: the composing models' own measurements; a nested ensemble reports its
// sums); queue the sum of those steps' queue times plus the time steps waited for
// max_inflight_requests. Each successful request counts as one execution of its batch size with
// those compute sums, as the reference server counts ensemble executions, and its response
// carries the same queue and compute sums in InferResponse::timing. Per step
// (ModelStatistics::ensemble_steps, config order): the step requests handed to the composing
// model, successful and failed, with their time from hand-off to answer, and the queue and
// compute times the successful ones report.
//
// Thread safety: every method is thread-safe. Ownership: requests in flight share the ensemble's
// state and hold their composing models; the object may be destroyed while they run (they
// finish).
class EnsembleModel final : public ServedModel {
 public:
  // Validates `config` (structure, then each step against the composing model `resolver` finds
  // now) and builds the ensemble. Errors: INVALID_ARGUMENT from ValidateEnsemble; UNAVAILABLE
  // "ensemble 'e' step N (model 'm'): composing model not available: ..." when the resolver
  // fails. REQUIRES: config name set and normalized (NormalizeEnsembleConfig).
  static Result<std::shared_ptr<EnsembleModel>> Create(int64_t version,
                                                       const inference::ModelConfig& config,
                                                       ComposingModelResolver resolver,
                                                       const InstanceOptions& options = {});
  ~EnsembleModel() override;
  EnsembleModel(const EnsembleModel&) = delete;
  EnsembleModel& operator=(const EnsembleModel&) = delete;

  const std::string& name() const override;
  int64_t version() const override;
  const ModelSignature& signature() const override;
  const inference::ModelConfig* model_config() const override;

  // See the class comment and LoadedModel::Infer. Errors answered before any step runs:
  // INVALID_ARGUMENT (the request against the ensemble's signature), UNAVAILABLE (shutting down,
  // or a composing model not available, naming the step), CANCELLED.
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override;
  using LoadedModel::Infer;

  ModelStatistics Statistics() const override;
  void ResetStatistics() override;
  // Step requests parked by max_inflight_requests.
  size_t PendingRequestCount() const override;
  double LoadDurationSeconds() const override;
  void SetLoadDuration(uint64_t ns) override;

  // Refuses new requests and waits until the accepted ones are answered (bounded by
  // InstanceOptions::drain_timeout_ns; they still finish later). Idempotent.
  // REQUIRES: not called from a callback of a request of this ensemble.
  void Shutdown() override;

  // Ensemble requests accepted and not answered yet.
  int64_t InflightRequests() const;

  struct State;  // shared with the requests in flight (ensemble.cc)

 private:
  explicit EnsembleModel(std::shared_ptr<State> state);
  const std::shared_ptr<State> state_;
  std::atomic<uint64_t> load_duration_ns_{0};
};

}  // namespace kiln
