// SPDX-License-Identifier: Apache-2.0
// ModelManager implementation.
//
// NOTE (design): loading is done outside the manager's lock. LoadInitialModels marks the models
// LOADING, builds each model (config, graph, validation, session, workers) with no lock held,
// then publishes the result under the lock. GetModel/Index/AllModelsReady only read the state
// map. Shutdown refuses further work, then drains and joins every loaded model's workers
// (LoadedModelImpl::Shutdown) before it drops the models; holders of a LoadedModel keep it alive
// but get UNAVAILABLE from Infer.
#include "repo/model_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <system_error>

#include "base/logging.h"
#include "repo/loaded_model.h"
#include "repo/model_config.h"
#include "repo/model_manager_impl.h"
#include "repo/repository.h"
#include "runtime/session.h"

#ifdef KILN_HAVE_ONNX_IMPORTER
#include "graph/onnx/importer.h"
#endif

namespace kiln {

namespace fs = std::filesystem;

std::string_view ModelStateName(ModelState state) {
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

GraphLoader DefaultGraphLoader() {
#ifdef KILN_HAVE_ONNX_IMPORTER
  return [](const std::string& path) { return ImportOnnxModel(path); };
#else
  return [](const std::string& path) -> Result<std::shared_ptr<Graph>> {
    return Status::Unavailable(
        fmt::format("cannot load {}: this build has no ONNX importer", path));
  };
#endif
}

namespace {

// The outcome of loading one model from disk, before it is published.
struct VersionLoad {
  int64_t version = -1;
  Status status;
  std::shared_ptr<LoadedModelImpl> model;  // set when status is OK
};
struct ModelLoad {
  Status status;  // model-level failure (config, layout); then `versions` may be empty
  std::vector<VersionLoad> versions;
};

std::string JoinVersions(std::span<const int64_t> versions) {
  std::string out = "[";
  for (size_t i = 0; i < versions.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(versions[i]);
  }
  return out + "]";
}

class ModelManagerImpl final : public ModelManager {
 public:
  ModelManagerImpl(ModelManagerOptions options, GraphLoader loader)
      : options_(std::move(options)), loader_(std::move(loader)) {}
  ~ModelManagerImpl() override { Shutdown(); }

  Status LoadInitialModels() override;
  Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                int64_t version) const override;
  std::vector<int64_t> ReadyVersions(std::string_view name) const override;
  std::vector<ModelIndexEntry> Index() const override;
  bool AllModelsReady() const override;
  void Shutdown() override;

 private:
  struct VersionEntry {
    ModelState state = ModelState::kUnknown;
    std::string reason;
    std::shared_ptr<LoadedModelImpl> model;  // set while READY
  };
  struct ModelEntry {
    bool should_load = false;
    ModelState state = ModelState::kUnknown;  // model-level state, used while `versions` is empty
    std::string reason;
    std::map<int64_t, VersionEntry> versions;
  };

  // Builds every selected version of model `name`. No lock held.
  ModelLoad LoadModelFromDisk(const std::string& name) const;
  // Loads one version with a completed, validated config.
  Result<std::shared_ptr<LoadedModelImpl>> LoadVersion(const inference::ModelConfig& config,
                                                       std::shared_ptr<Graph> graph,
                                                       int64_t version) const;

  const ModelManagerOptions options_;
  const GraphLoader loader_;

  std::mutex shutdown_mu_;  // serializes Shutdown callers
  mutable std::mutex mu_;
  std::map<std::string, ModelEntry, std::less<>> models_;  // guarded by mu_
  bool initial_load_started_ = false;                      // guarded by mu_
  bool initial_load_done_ = false;                         // guarded by mu_
  bool shut_down_ = false;                                 // guarded by mu_
};

Result<std::shared_ptr<LoadedModelImpl>> ModelManagerImpl::LoadVersion(
    const inference::ModelConfig& config, std::shared_ptr<Graph> graph, int64_t version) const {
  KILN_RETURN_IF_ERROR(ValidateConfigAgainstGraph(config, *graph));
  return LoadedModelImpl::Create(version, config, std::move(graph), options_.instance_options);
}

ModelLoad ModelManagerImpl::LoadModelFromDisk(const std::string& name) const {
  ModelLoad load;
  const fs::path dir = fs::path(options_.repository_path) / name;
  const auto fail_model = [&](const Status& s) {
    load.status = s;
    return load;
  };

  Result<std::optional<inference::ModelConfig>> file = ReadModelConfigFile(dir);
  if (!file.ok()) return fail_model(file.status());
  inference::ModelConfig config = file->value_or(inference::ModelConfig());

  Result<std::vector<int64_t>> found = ScanVersionDirs(dir);
  if (!found.ok()) return fail_model(found.status());
  if (found->empty()) {
    return fail_model(Status::Unavailable(fmt::format(
        "model '{}' has no version directory (a decimal name without leading zero, e.g. "
        "'{}/1/{}')",
        name, name,
        config.default_model_filename().empty() ? std::string(kOnnxModelFileName)
                                                : config.default_model_filename())));
  }
  // The policy may be unset here (SelectVersions treats that as latest 1); the platform is
  // detected from the highest selected version, the one whose graph completes the config.
  std::vector<int64_t> missing;
  const std::vector<int64_t> selected = SelectVersions(config.version_policy(), *found, &missing);
  const int64_t probe_version = selected.empty() ? found->back() : selected.back();
  Status s = AutoCompleteServerFields(name, dir / std::to_string(probe_version), &config);
  if (s.ok()) s = NormalizeModelConfig(&config, options_.workers_per_model);
  if (!s.ok()) return fail_model(s);

  for (int64_t v : missing) {
    load.versions.push_back({v,
                             Status::Unavailable(fmt::format(
                                 "version directory '{}' not found in model '{}'", v, name)),
                             nullptr});
  }
  if (selected.empty()) {
    return fail_model(Status::Unavailable(
        fmt::format("model '{}': the version policy selects none of the available versions {}",
                    name, JoinVersions(*found))));
  }

  // Highest version first: its graph completes the config when the config leaves gaps.
  bool completed = false;
  Status model_error;
  for (auto it = selected.rbegin(); it != selected.rend(); ++it) {
    const int64_t version = *it;
    VersionLoad& v = load.versions.emplace_back();
    v.version = version;
    if (!model_error.ok()) {
      v.status = model_error;
      continue;
    }
    Result<fs::path> path = ResolveModelFile(dir / std::to_string(version), config);
    if (!path.ok()) {
      v.status = Status::Unavailable(path.status().message());
      continue;
    }
    Result<std::shared_ptr<Graph>> graph = loader_(path->string());
    if (!graph.ok()) {  // the importer's messages name the file
      v.status = Status::Unavailable(graph.status().message());
      continue;
    }
    if (!completed) {
      Status c = AutoCompleteFromGraph(**graph, kDefaultMaxBatchSize, &config);
      if (c.ok()) c = ValidateModelConfig(config);
      if (!c.ok()) {
        model_error = Status::Unavailable(c.message());
        v.status = model_error;
        continue;
      }
      completed = true;
      const std::vector<std::string> ignored = UnimplementedConfigFields(config);
      if (!ignored.empty()) {
        std::string list;
        for (const std::string& f : ignored) list += (list.empty() ? "" : ", ") + f;
        KILN_LOG_WARN("model '{}': config fields accepted but not acted on yet: {}", name, list);
      }
    }
    Result<std::shared_ptr<LoadedModelImpl>> model =
        LoadVersion(config, std::move(graph).value(), version);
    if (!model.ok()) {
      v.status = model.status().code() == StatusCode::kUnavailable
                     ? model.status()
                     : Status::Unavailable(model.status().message());
      continue;
    }
    v.model = std::move(model).value();
  }
  return load;
}

Status ModelManagerImpl::LoadInitialModels() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return Status::Unavailable("the model manager is shut down");
    if (initial_load_started_) {
      return Status::FailedPrecondition("LoadInitialModels was already called");
    }
    initial_load_started_ = true;
  }
  if (options_.control_mode == ModelControlMode::kPoll) {
    KILN_LOG_WARN(
        "model control mode 'poll' is not implemented yet: models are loaded once at start and "
        "the repository is not re-scanned (same as 'none')");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> dirs, ListModelDirs(options_.repository_path));

  std::vector<std::string> to_load;
  if (options_.control_mode != ModelControlMode::kExplicit ||
      std::find(options_.startup_models.begin(), options_.startup_models.end(), "*") !=
          options_.startup_models.end()) {
    to_load = dirs;
  } else {
    for (const std::string& m : options_.startup_models) {
      if (std::find(to_load.begin(), to_load.end(), m) == to_load.end()) to_load.push_back(m);
    }
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& d : dirs) models_[d];
    for (const std::string& m : to_load) {
      ModelEntry& e = models_[m];
      e.should_load = true;
      e.state = ModelState::kLoading;
    }
  }

  std::vector<std::string> failures;
  for (const std::string& name : to_load) {
    ModelLoad load;
    bool stopped = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped = shut_down_;
    }
    if (stopped) {
      load.status = Status::Unavailable("the server shut down before the model was loaded");
    } else if (!std::binary_search(dirs.begin(), dirs.end(), name)) {
      load.status = Status::Unavailable(
          fmt::format("model '{}' is not in the repository {}", name, options_.repository_path));
    } else {
      load = LoadModelFromDisk(name);
    }

    std::vector<std::shared_ptr<LoadedModelImpl>> orphans;  // loaded after Shutdown began
    {
      std::lock_guard<std::mutex> lock(mu_);
      ModelEntry& e = models_[name];
      e.versions.clear();
      if (!load.status.ok() && load.versions.empty()) {
        e.state = ModelState::kUnavailable;
        e.reason = load.status.message();
      } else {
        e.state = ModelState::kUnknown;
        e.reason.clear();
      }
      for (VersionLoad& v : load.versions) {
        VersionEntry& ve = e.versions[v.version];
        if (shut_down_ && v.model) {
          orphans.push_back(std::move(v.model));
          ve.state = ModelState::kUnavailable;
          ve.reason = "unloaded";
        } else if (v.model) {
          ve.state = ModelState::kReady;
          ve.model = std::move(v.model);
        } else {
          ve.state = ModelState::kUnavailable;
          ve.reason = v.status.message();
        }
      }
    }
    for (auto& m : orphans) m->Shutdown();

    if (!load.status.ok()) {
      KILN_LOG_ERROR("failed to load model '{}': {}", name, load.status.message());
      failures.push_back(fmt::format("'{}': {}", name, load.status.message()));
    }
    for (const VersionLoad& v : load.versions) {
      if (v.status.ok()) {
        KILN_LOG_INFO("loaded model '{}' version {}", name, v.version);
      } else {
        KILN_LOG_ERROR("failed to load model '{}' version {}: {}", name, v.version,
                       v.status.message());
        failures.push_back(fmt::format("'{}' version {}: {}", name, v.version, v.status.message()));
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    initial_load_done_ = true;
  }
  if (failures.empty()) return Status::OK();
  std::string msg = fmt::format("{} model load failure(s): ", failures.size());
  for (size_t i = 0; i < failures.size(); ++i) msg += (i ? "; " : "") + failures[i];
  return Status::Unavailable(std::move(msg));
}

Result<std::shared_ptr<LoadedModel>> ModelManagerImpl::GetModel(std::string_view name,
                                                                int64_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return Status::NotFound(fmt::format("Request for unknown model: '{}' is not found", name));
  }
  const ModelEntry& e = it->second;
  if (version == -1) {
    for (auto v = e.versions.rbegin(); v != e.versions.rend(); ++v) {
      if (v->second.state == ModelState::kReady)
        return std::shared_ptr<LoadedModel>(v->second.model);
    }
    std::string why = e.reason;
    if (why.empty() && !e.versions.empty()) why = e.versions.rbegin()->second.reason;
    if (why.empty()) why = e.should_load ? "not loaded yet" : "not loaded";
    return Status::Unavailable(
        fmt::format("Request for unknown model: '{}' has no available versions ({})", name, why));
  }
  auto v = e.versions.find(version);
  if (v == e.versions.end()) {
    return Status::NotFound(
        fmt::format("Request for unknown model: '{}' version {} is not found", name, version));
  }
  if (v->second.state != ModelState::kReady) {
    return Status::Unavailable(fmt::format(
        "Request for unknown model: '{}' version {} is not at ready state ({}{}{})", name, version,
        ModelStateName(v->second.state), v->second.reason.empty() ? "" : ": ", v->second.reason));
  }
  return std::shared_ptr<LoadedModel>(v->second.model);
}

std::vector<int64_t> ModelManagerImpl::ReadyVersions(std::string_view name) const {
  std::vector<int64_t> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [version, v] : it->second.versions) {
    if (v.state == ModelState::kReady) out.push_back(version);
  }
  return out;
}

std::vector<ModelIndexEntry> ModelManagerImpl::Index() const {
  std::vector<ModelIndexEntry> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, e] : models_) {
    if (e.versions.empty()) {
      out.push_back({name, -1, e.state, e.reason});
      continue;
    }
    for (const auto& [version, v] : e.versions) out.push_back({name, version, v.state, v.reason});
  }
  return out;
}

bool ModelManagerImpl::AllModelsReady() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_ || !initial_load_done_) return false;
  for (const auto& [name, e] : models_) {
    if (!e.should_load) continue;
    if (e.versions.empty()) return false;
    for (const auto& [version, v] : e.versions) {
      if (v.state != ModelState::kReady) return false;
    }
  }
  return true;
}

void ModelManagerImpl::Shutdown() {
  std::lock_guard<std::mutex> serialize(shutdown_mu_);
  std::vector<std::shared_ptr<LoadedModelImpl>> models;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [name, e] : models_) {
      for (auto& [version, v] : e.versions) {
        if (v.model) {
          models.push_back(v.model);
          v.state = ModelState::kUnloading;
        }
      }
    }
  }
  for (const auto& m : models) m->Shutdown();  // drains queued requests, joins workers
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, e] : models_) {
      for (auto& [version, v] : e.versions) {
        if (v.model) {
          v.model.reset();
          v.state = ModelState::kUnavailable;
          v.reason = "unloaded";
        }
      }
    }
  }
  if (!models.empty()) KILN_LOG_INFO("unloaded {} model version(s)", models.size());
}

}  // namespace

Result<std::unique_ptr<ModelManager>> CreateModelManager(const ModelManagerOptions& options,
                                                         GraphLoader loader) {
  if (options.repository_path.empty()) {
    return Status::InvalidArgument("no model repository path given");
  }
  if (options.workers_per_model < 1) {
    return Status::InvalidArgument(
        fmt::format("workers_per_model must be >= 1, got {}", options.workers_per_model));
  }
  std::error_code ec;
  if (!fs::is_directory(options.repository_path, ec)) {
    return Status::NotFound(fmt::format("model repository '{}' is not a directory{}",
                                        options.repository_path,
                                        ec ? ": " + ec.message() : std::string()));
  }
  return std::unique_ptr<ModelManager>(new ModelManagerImpl(options, std::move(loader)));
}

Result<std::unique_ptr<ModelManager>> ModelManager::Create(const ModelManagerOptions& options) {
  return CreateModelManager(options, DefaultGraphLoader());
}

}  // namespace kiln
