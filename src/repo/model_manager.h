// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model repository manager: finds models in a repository directory, loads them (config.pbtxt or
// a config derived from the ONNX graph), serves their ready versions and answers inference.
//
// Layout: <repo>/<model>/config.pbtxt (optional), <repo>/<model>/<version>/model.onnx. Version
// directories are decimal numbers without a leading 0. The version policy (default: latest 1)
// picks the versions to load.
//
//   KILN_ASSIGN_OR_RETURN(auto manager, ModelManager::Create(options));
//   Status s = manager->LoadInitialModels();   // failures are reported; other models still load
//   KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, manager->GetModel("add_sub", -1));
//   m->Infer(std::move(request), [](Result<InferResponse> r) { ... });
//
// Thread safety: every method of ModelManager and LoadedModel is thread-safe. A LoadedModel is
// held by shared_ptr, so a model being unloaded stays alive until in-flight requests finish.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "sched/instance_options.h"
#include "sched/request.h"
#include "sched/stats.h"
#include "tensor/dtype.h"

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
};

enum class ModelState { kUnknown, kLoading, kReady, kUnloading, kUnavailable };
std::string_view ModelStateName(ModelState state);  // "READY", "UNAVAILABLE", ...

struct ModelIndexEntry {
  std::string name;
  int64_t version = -1;  // -1 when no version was ever loaded
  ModelState state = ModelState::kUnknown;
  std::string reason;  // why it is UNAVAILABLE; empty otherwise
};

enum class ModelControlMode { kNone, kPoll, kExplicit };

struct ModelManagerOptions {
  std::string repository_path;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // Models to load at start in explicit mode; "*" loads all.
  std::vector<std::string> startup_models;
  // Instances per model version for instance groups that do not set `count` (and for the group
  // a config without instance_group gets). Each instance runs batches on its own thread.
  int workers_per_model = 1;
  // Thread budget, allocator and clock of every model's instances (sched/instance_options.h).
  InstanceOptions instance_options;
};

// One loaded, ready model version.
class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual const std::string& name() const = 0;
  virtual int64_t version() const = 0;
  virtual const ModelSignature& signature() const = 0;
  // Validates the request against the signature (names, datatypes, shapes, batch size) and runs
  // it. `done` is called exactly once, possibly on another thread, possibly before Infer
  // returns (for a request that fails validation). Errors: INVALID_ARGUMENT naming the input
  // and what is wrong; UNAVAILABLE when the model is shutting down.
  virtual void Infer(std::unique_ptr<InferRequest> request, InferCallback done) = 0;
  // Cumulative statistics of this version since it was loaded.
  virtual ModelStatistics Statistics() const { return {}; }
};

class ModelManager {
 public:
  virtual ~ModelManager() = default;
  // Checks that the repository directory exists; loads nothing yet.
  static Result<std::unique_ptr<ModelManager>> Create(const ModelManagerOptions& options);

  // Loads the models the control mode asks for at start (all in kNone / kPoll; the
  // startup_models in kExplicit). Each failure is logged and recorded (state UNAVAILABLE with
  // its reason); the returned Status summarizes failures (OK when every model loaded).
  virtual Status LoadInitialModels() = 0;

  // Ready version `version` of model `name`; -1 picks the highest ready version.
  // NOT_FOUND: unknown model or version ("Request for unknown model: 'x' is not found");
  // UNAVAILABLE: known but not ready.
  virtual Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                        int64_t version) const = 0;
  // Ready versions of `name`, ascending (empty when none).
  virtual std::vector<int64_t> ReadyVersions(std::string_view name) const = 0;
  // Every model in the repository and every version the manager has state for.
  virtual std::vector<ModelIndexEntry> Index() const = 0;
  // True when every model that should be loaded is READY (the server's readiness).
  virtual bool AllModelsReady() const = 0;
  // Stops accepting requests, drains in-flight work, unloads everything.
  virtual void Shutdown() = 0;
};

}  // namespace kiln
