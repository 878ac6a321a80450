// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model repository manager: finds models in a repository directory, loads them (config.pbtxt or
// a config derived from the ONNX graph), serves their ready versions, and loads, reloads and
// unloads them while the server runs.
//
// Layout: <repo>/<model>/config.pbtxt (optional), <repo>/<model>/<version>/model.onnx. Version
// directories are decimal numbers without a leading 0. The version policy (default: latest 1)
// picks the versions to load.
//
// Model control modes (KSERVE-V2.md section 3.12), as the reference server has them:
//   kNone      every model is loaded at start; the repository is not watched; LoadModel and
//              UnloadModel fail.
//   kPoll      every model is loaded at start; a thread rescans the repository every
//              repository_poll_secs and loads added models and versions, reloads changed ones
//              (config.pbtxt or any file of a version), and unloads removed ones.
//   kExplicit  startup_models are loaded at start ("*": all); afterwards LoadModel / UnloadModel.
// A reload never costs availability: the new version is loaded, warmed up and published before
// the version it replaces is unloaded, a version whose reload fails keeps serving the old one,
// and an unchanged version is not reloaded at all. Unloading drains: the version stops taking
// requests, the requests it already accepted finish, then its memory is freed (and returned to
// the operating system).
//
// Ensembles (platform "ensemble", repo/ensemble.h; docs/ensembles.md) run other models of this
// manager as their steps. They load after their composing models (at start and on a poll,
// whatever the names; an explicit LoadModel of an ensemble first loads its composing models
// that are not loaded), and their load checks every step against the composing model serving
// then. An ensemble is ready only while each composing model has a ready version: otherwise
// Index shows it UNAVAILABLE with the reason ("composing model 'x' has no ready version
// (unloaded)"), GetModel refuses it with that reason and ReadyVersions omits it; it comes back
// by itself when the composing model is loaded again. AllModelsReady counts the composing
// models themselves, not this borrowed state.
//
//   KILN_ASSIGN_OR_RETURN(auto manager, ModelManager::Create(options));
//   Status s = manager->LoadInitialModels();   // failures are reported; other models still load
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, manager->GetModel("add_sub", -1));
//   m->Infer(std::move(request), [](Result<InferResponse> r) { ... });
//   KILN_RETURN_IF_ERROR(manager->UnloadModel("add_sub"));   // kExplicit
//
// Thread safety: every method of ModelManager and LoadedModel is thread-safe. Lifecycle
// operations (LoadInitialModels, LoadModel, UnloadModel, Poll and the poll thread) run one at a
// time; GetModel, ReadyVersions, Index and AllModelsReady never wait for them. A LoadedModel is
// held by shared_ptr, so a model being unloaded stays alive until in-flight requests finish.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "sched/gen_request.h"
#include "sched/instance_options.h"
#include "sched/request.h"
#include "sched/stats.h"
#include "tensor/dtype.h"

namespace inference {
class ModelConfig;
}  // namespace inference

namespace kiln {

// Declared tensor of a model, as its (normalized) config states it.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> dims;  // config dims: no batch dim when max_batch_size > 0; -1 = variable
};

// What the metadata endpoint reports about one model version.
struct ModelSignature {
  std::string name;
  std::string platform;  // "onnxruntime_onnx" for ONNX models (what clients expect)
  std::string backend;
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // Classification labels by output name: the lines of the output's config label_filename.
  std::map<std::string, std::vector<std::string>, std::less<>> output_labels;
};

enum class ModelState { kUnknown, kLoading, kReady, kUnloading, kUnavailable };

// "READY", "UNAVAILABLE", ... (the index's state strings). Inline: the protocol front ends use
// it without linking the manager.
constexpr std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kUnknown:
      return "UNKNOWN";
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnloading:
      return "UNLOADING";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

// The reason of a version that was unloaded on purpose (UnloadModel, dropped by the version
// policy, removed from the repository, server shutdown); such versions do not make the server
// unready.
inline constexpr std::string_view kUnloadedReason = "unloaded";

struct ModelIndexEntry {
  std::string name;
  int64_t version = -1;  // -1 when no version is known (never loaded, or the model failed)
  ModelState state = ModelState::kUnknown;  // kUnknown with version -1: found, never loaded
  std::string reason;                       // why it is UNAVAILABLE; empty otherwise
};

enum class ModelControlMode { kNone, kPoll, kExplicit };

struct ModelManagerOptions {
  std::string repository_path;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // Models to load at start in explicit mode; "*" loads all.
  std::vector<std::string> startup_models;
  // kPoll: seconds between two scans of the repository by the poll thread; 0 starts no thread
  // (the repository is then rescanned only by Poll()).
  int repository_poll_secs = 0;
  // Instances per model version for instance groups that do not set `count` (and for the group
  // a config without instance_group gets). Each instance runs batches on its own thread.
  int workers_per_model = 1;
  // Thread budget, allocator and clock of every model's instances (sched/instance_options.h).
  InstanceOptions instance_options;
};

// The optional parts of an explicit load request (KSERVE-V2.md section 1.7).
struct ModelLoadOptions {
  // JSON text of a ModelConfig (the JSON form of section 1.5; enum names case-insensitive)
  // that replaces the model's config.pbtxt for this load; empty: use the repository's config.
  std::string config_json;
  // Model files sent with the request (the "file:<path>" parameters, decoded): when any is
  // given they form the whole model directory for this load instead of the repository's (the
  // model need not be in the repository), and config_json is required. Paths are relative,
  // '/'-separated ("1/model.onnx"), without empty, "." or ".." components.
  struct File {
    std::string path;
    std::string content;
  };
  std::vector<File> files;
};

// The optional parts of an explicit unload request (KSERVE-V2.md section 1.7).
struct ModelUnloadOptions {
  // The "unload_dependents" parameter: also unload the models the unloaded model depends on (an
  // ensemble's composing models, recursively) that were loaded along with it and that no other
  // loaded model uses (see ModelManager::UnloadModel).
  bool unload_dependents = false;
};

// One loaded, ready model version.
class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual const std::string& name() const = 0;
  virtual int64_t version() const = 0;
  virtual const ModelSignature& signature() const = 0;
  // Validates the request against the signature (inputs: names, datatypes, shapes, batch size;
  // requested outputs: known, each once) and runs it. Its answers go to `sink`
  // (sched/request.h): sink->Finish exactly once, possibly on another thread, possibly before
  // Infer returns (for a request that fails validation); a final response names this model,
  // version and the request's id. Errors: INVALID_ARGUMENT naming the tensor and what is wrong;
  // UNAVAILABLE when the model is shutting down; CANCELLED when the request's cancellation was
  // set before it ran.
  virtual void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) = 0;
  // The same with a callback for the final result (CallbackSink).
  void Infer(std::unique_ptr<InferRequest> request, InferCallback done) {
    Infer(std::move(request), CallbackSink(std::move(done)));
  }
  // Generative models only (docs/generation.md): tokenizes the prompt (or renders the chat
  // messages with the model's template), queues the sequence with the continuous-batching
  // scheduler and streams its output to `sink` (sched/gen_request.h). Errors, as
  // sink->Finish(error) before any chunk: INVALID_ARGUMENT for a bad parameter or a prompt that
  // does not fit the context (naming both lengths); RESOURCE_EXHAUSTED when the waiting queue is
  // full; UNAVAILABLE when the model is unloading. A tensor model answers UNIMPLEMENTED.
  virtual void Generate(std::unique_ptr<GenerateRequest> request,
                        std::shared_ptr<GenerationSink> sink) {
    (void)request;
    sink->Finish(Status::Unimplemented("model '" + name() +
                                       "' is not a generative model (it has no /generate or "
                                       "OpenAI completions endpoint)"));
  }
  // True for a generative model (Generate works; Infer takes Triton's LLM tensors).
  virtual bool generative() const { return false; }
  // Cumulative statistics of this version since it was loaded.
  virtual ModelStatistics Statistics() const { return {}; }
  // The complete, normalized config this version runs with (what the ModelConfig RPC returns);
  // nullptr when the model has none (test doubles). Valid as long as the model is held.
  virtual const inference::ModelConfig* model_config() const { return nullptr; }
  // Requests accepted and not yet started on an instance (queued in the scheduler).
  virtual size_t PendingRequestCount() const { return 0; }
  // Seconds the version took to load (graph import, sessions, warmup); 0 when unknown.
  virtual double LoadDurationSeconds() const { return 0; }
  // Bytes of the model's weights (graph initializers) held in memory; 0 when unknown.
  virtual uint64_t WeightBytes() const { return 0; }
};

// A request header (HTTP) or metadata entry (gRPC) by its lowercase name; "" when the request
// has none (repo/rollout.h routes by one).
using HeaderLookup = std::function<std::string_view(std::string_view name)>;

class ModelManager {
 public:
  virtual ~ModelManager() = default;
  // Checks that the repository directory exists; loads nothing yet.
  static Result<std::unique_ptr<ModelManager>> Create(const ModelManagerOptions& options);

  // Loads the models the control mode asks for at start (all in kNone / kPoll; the
  // startup_models in kExplicit). Each failure is logged and recorded (state UNAVAILABLE with
  // its reason); the returned Status summarizes failures (OK when every model loaded). Starts
  // the poll thread in kPoll. FAILED_PRECONDITION when called twice.
  virtual Status LoadInitialModels() = 0;

  // Ready version `version` of model `name`; -1 picks the highest ready version.
  // NOT_FOUND: unknown model or version ("Request for unknown model: 'x' is not found");
  // UNAVAILABLE: known but not ready.
  virtual Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                        int64_t version) const = 0;
  // Ready versions of `name`, ascending (empty when none).
  virtual std::vector<int64_t> ReadyVersions(std::string_view name) const = 0;
  // Every model in the repository (listed now) and every version the manager has state for,
  // sorted by name then version. A model directory never loaded appears once, with version -1
  // and kUnknown.
  virtual std::vector<ModelIndexEntry> Index() const = 0;
  // The server's readiness: the initial load is done, and every model that should be loaded
  // (all in kNone / kPoll; the loaded or failed ones in kExplicit) has a READY version and no
  // version that failed (versions unloaded on purpose do not count).
  virtual bool AllModelsReady() const = 0;
  // Stops accepting requests, drains in-flight work, unloads everything, stops the poll thread.
  virtual void Shutdown() = 0;

  // kExplicit: loads model `name` from the repository, or reloads it when it is loaded (only
  // the versions whose files changed are reloaded; with options.config_json every version is).
  // Returns once the model is READY (warmed up) or failed. Errors: UNAVAILABLE "explicit model
  // load / unload is not allowed if polling is enabled" in the other modes, or after Shutdown;
  // INVALID_ARGUMENT "failed to load 'x', failed to poll from model repository: ..." when the
  // repository has no such model, "load failed for model 'x': <reasons>" when a version fails
  // (a version that was serving before keeps serving) or config_json is not a valid config.
  virtual Status LoadModel(std::string_view name, const ModelLoadOptions& options) = 0;
  // kExplicit: unloads every version of `name`: GetModel refuses it at once (state UNLOADING),
  // accepted requests finish, then the memory is freed; returns after that. Unloading a model
  // that is not loaded, or unknown, succeeds. UNAVAILABLE as LoadModel in other modes.
  // With options.unload_dependents (the reference server's meaning), then also unloads, the
  // same way, each composing model of `name` (an ensemble) that was loaded along with an
  // ensemble rather than on its own (LoadModel naming it, or the models loaded at start) and
  // that no loaded model other than those being unloaded names as a step; recursively, so the
  // composing models of a nested ensemble unloaded this way are considered too.
  virtual Status UnloadModel(std::string_view name, const ModelUnloadOptions& options) = 0;
  // UnloadModel with the default options (composing models stay loaded).
  Status UnloadModel(std::string_view name) { return UnloadModel(name, ModelUnloadOptions{}); }
  // kPoll: rescans the repository now and applies what changed, as the poll thread does every
  // repository_poll_secs. FAILED_PRECONDITION in other modes; otherwise a summary of the load
  // failures (OK when none).
  virtual Status Poll() = 0;
};

}  // namespace kiln
