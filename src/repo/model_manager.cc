// SPDX-License-Identifier: Apache-2.0
// ModelManager implementation.
//
// NOTE (design): two locks. `ops_mu_` serializes lifecycle operations (the initial load,
// LoadModel, UnloadModel, a poll); `mu_` guards the state map and is held only for short reads
// and for publishing a result. A load builds every version (config, graph, validation, session,
// workers, warmup) with only `ops_mu_` held, then publishes under `mu_`: new versions become
// READY and the versions they replace leave the map in the same step, so GetModel never sees a
// gap. Replaced and unloaded versions are then retired outside `mu_`: retiring waits (briefly,
// bounded) until nobody else holds the model (a caller between GetModel and Infer), shuts it
// down (refuses new requests, runs the accepted ones, joins its workers), drops it, and returns
// the freed heap to the operating system. Shutdown does not take `ops_mu_`: it marks every
// serving version UNLOADING and drains it at once; an operation still running sees `shut_down_`
// when it publishes and retires what it built.
//
// NOTE (change detection): every load records the fingerprint of the model directory it read
// (repository.h). A poll reloads a model whose fingerprint differs; the reload reuses a serving
// version whose own files and whose model-level files (config.pbtxt, warmup data, ...) are
// unchanged, so adding version 3 does not reload version 2.
#include "repo/model_manager.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "base/logging.h"
#include "base/mutex.h"
#include "repo/builtin_models.h"
#include "repo/ensemble.h"
#include "repo/llm_model.h"
#include "repo/loaded_model.h"
#include "repo/model_config.h"
#include "repo/model_manager_impl.h"
#include "repo/repository.h"
#include "repo/rollout.h"
#include "repo/warmup.h"
#include "runtime/session.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "graph/onnx/importer.h"
#include "quant/quantizer.h"

namespace kiln {

namespace fs = std::filesystem;

GraphLoader DefaultGraphLoader() {
  return [](const std::string& path) { return ImportOnnxModel(path); };
}

namespace {

// Reads each output's label_filename (relative to the model directory): one label per line.
Result<OutputLabels> ReadOutputLabels(const inference::ModelConfig& config,
                                      const fs::path& model_dir) {
  OutputLabels labels;
  for (const inference::ModelOutput& out : config.output()) {
    if (out.label_filename().empty()) continue;
    const fs::path path = model_dir / out.label_filename();
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      return Status::InvalidArgument(
          fmt::format("model '{}': cannot read label_filename '{}' of output '{}' ({})",
                      config.name(), out.label_filename(), out.name(), path.string()));
    }
    std::vector<std::string>& lines = labels[out.name()];
    std::string line;
    while (std::getline(file, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
    }
  }
  return labels;
}

// How long retiring a model waits for callers that hold it (between GetModel and Infer)
// before shutting it down anyway; they then get UNAVAILABLE.
constexpr auto kRetireQuiesceTimeout = std::chrono::seconds(2);

constexpr std::string_view kControlModeError =
    "explicit model load / unload is not allowed if polling is enabled";

// The outcome of loading one version from disk, before it is published.
struct VersionLoad {
  int64_t version = -1;
  Status status;
  std::shared_ptr<ServedModel> model;        // set when status is OK
  bool reused = false;                       // `model` is the version already serving
  std::string files;                         // the version's fingerprint
  std::vector<ComposingModelRef> composing;  // an ensemble's composing models
};
struct ModelLoad {
  Status status;  // model-level failure (config, layout); then `versions` may be empty
  std::vector<VersionLoad> versions;
  std::optional<ModelDirFingerprint> files;              // what the load read
  std::shared_ptr<const inference::ModelConfig> config;  // the completed config, when it got one
};

std::string JoinVersions(std::span<const int64_t> versions) {
  std::string out = "[";
  for (size_t i = 0; i < versions.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(versions[i]);
  }
  return out + "]";
}

// Gives the memory freed by an unload back to the operating system. glibc keeps freed heap
// pages of its arenas (only blocks above the mmap threshold are unmapped on free), so a model's
// many small and mid-size buffers would otherwise stay in the process RSS.
void ReturnFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

Result<inference::ModelConfig> ParseModelConfigJson(std::string_view json) {
  inference::ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  options.case_insensitive_enum_parsing = true;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &config, options);
  if (!status.ok()) {
    return Status::InvalidArgument(
        fmt::format("the 'config' parameter is not a valid model configuration: {}",
                    status.message().as_string()));
  }
  return config;
}

// What a manager's ensembles resolve their composing models through: the manager's GetModel
// while the manager exists (a caller may hold an ensemble past it). Thread-safe.
class ComposingHub {
 public:
  explicit ComposingHub(const ModelManager* manager) : manager_(manager) {}
  Result<std::shared_ptr<LoadedModel>> Resolve(std::string_view name, int64_t version) const
      KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (manager_ == nullptr) return Status::Unavailable("the model manager is gone");
    return manager_->GetModel(name, version);
  }
  void Detach() KILN_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    manager_ = nullptr;
  }

 private:
  mutable Mutex mu_;
  const ModelManager* manager_ KILN_GUARDED_BY(mu_);
};

// How deep ensembles may nest (an ensemble step running an ensemble ...).
constexpr int kMaxEnsembleDepth = 16;

class ModelManagerImpl final : public ModelManager {
 public:
  ModelManagerImpl(ModelManagerOptions options, GraphLoader loader)
      : options_(std::move(options)),
        loader_(std::move(loader)),
        hub_(std::make_shared<ComposingHub>(this)) {}
  ~ModelManagerImpl() override {
    Shutdown();
    hub_->Detach();
  }

  Status LoadInitialModels() override KILN_EXCLUDES(ops_mu_, mu_);
  Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                int64_t version) const override KILN_EXCLUDES(mu_);
  std::vector<int64_t> ReadyVersions(std::string_view name) const override KILN_EXCLUDES(mu_);
  std::vector<ModelIndexEntry> Index() const override KILN_EXCLUDES(mu_);
  bool AllModelsReady() const override KILN_EXCLUDES(mu_);
  void Shutdown() override KILN_EXCLUDES(shutdown_mu_, mu_);
  Status LoadModel(std::string_view name, const ModelLoadOptions& options) override
      KILN_EXCLUDES(ops_mu_, mu_);
  Status UnloadModel(std::string_view name, const ModelUnloadOptions& options) override
      KILN_EXCLUDES(ops_mu_, mu_);
  using ModelManager::UnloadModel;
  Status Poll() override KILN_EXCLUDES(ops_mu_, mu_);

 private:
  struct VersionEntry {
    ModelState state = ModelState::kUnknown;
    std::string reason;
    std::shared_ptr<ServedModel> model;  // set while READY (and during Shutdown's drain)
    std::string files;                   // fingerprint of the files `model` was loaded from
    // An ensemble's composing models: while one of them has no ready version, the version is
    // shown UNAVAILABLE (naming it) and GetModel refuses it, though it stays loaded.
    std::vector<ComposingModelRef> composing;
  };
  struct ModelEntry {
    bool should_load = false;
    ModelState state = ModelState::kUnknown;  // model-level state, used while `versions` is empty
    std::string reason;
    std::map<int64_t, VersionEntry> versions;
    // The directory as the last load attempt read it (poll compares against it).
    std::optional<ModelDirFingerprint> seen;
    // The completed config the READY versions run with, and whether it came from a load
    // request's override (then a later load re-reads config.pbtxt instead of reusing it).
    std::shared_ptr<const inference::ModelConfig> config;
    std::string config_files;  // seen->model of the load that produced `config`
    bool config_overridden = false;
    // Loaded on its own (LoadModel named it, or it was loaded at start), not only as a composing
    // model of an ensemble being loaded: UnloadModel's unload_dependents leaves it loaded.
    bool loaded_on_its_own = false;
  };
  // What a reload may keep of the versions serving now.
  struct Reuse {
    std::shared_ptr<const inference::ModelConfig> config;  // null: complete the config anew
    std::string config_files;
    std::map<int64_t, VersionEntry> ready;  // READY versions with their files
  };
  using Retired = std::vector<std::shared_ptr<ServedModel>>;

  // Builds every selected version of model `name`. No lock held.
  // `model_dir`: where the model's files are (its repository directory, or the directory of
  // files sent with a load request).
  ModelLoad LoadModelFromDisk(const std::string& name, const fs::path& model_dir,
                              const Reuse& reuse,
                              const inference::ModelConfig* override_config) const;
  // The one place a LoadedModelImpl is created: one version with a completed, validated
  // config.
  Result<std::shared_ptr<LoadedModelImpl>> LoadVersion(const inference::ModelConfig& config,
                                                       std::shared_ptr<Graph> graph,
                                                       int64_t version,
                                                       const fs::path& model_dir) const;

  // A version of a model whose config has a rollout (repo/rollout.h), wrapped: its precision
  // variants loaded (each from the version's model file with the config's precision replaced)
  // and warmed up, and the best-effort variant chosen (measured at load when the config names
  // none). `tensor_model`: an ONNX model (variants need one). No lock held.
  Result<std::shared_ptr<ServedModel>> WithRollout(const inference::ModelConfig& config,
                                                   std::shared_ptr<ServedModel> model,
                                                   int64_t version, const fs::path& model_dir,
                                                   bool tensor_model) const;

  // Lifecycle operations, under ops_mu_ (they take mu_ themselves).
  // Loads or reloads `name` and publishes the result; appends one message per failure
  // ("version 3: ..." or the model-level reason) to `failures`.
  // `dir_override`: load from this directory instead of the repository's (files sent with the
  // request); null: the repository.
  void LoadLocked(const std::string& name, const inference::ModelConfig* override_config,
                  std::vector<std::string>* failures, const fs::path* dir_override = nullptr)
      KILN_REQUIRES(ops_mu_) KILN_EXCLUDES(mu_);
  // Unloads every version of `name`; `forget` also drops the model from the index.
  void UnloadLocked(const std::string& name, bool forget) KILN_REQUIRES(ops_mu_) KILN_EXCLUDES(mu_);
  Status PollLocked() KILN_REQUIRES(ops_mu_) KILN_EXCLUDES(mu_);

  // Publishes `load` as the state of `name`. Moves the models that stop serving to `retired`
  // and returns the versions shown as UNLOADING meanwhile.
  std::vector<int64_t> PublishLocked(const std::string& name, ModelLoad& load, Retired* retired)
      KILN_REQUIRES(mu_);
  // Waits until each model is held only by `models`, shuts it down (drains), frees it.
  void Retire(Retired models) const KILN_EXCLUDES(mu_);
  // Marks the given UNLOADING versions of `name` UNAVAILABLE "unloaded" (after Retire).
  void MarkUnloaded(const std::string& name, const std::vector<int64_t>& versions)
      KILN_EXCLUDES(mu_);

  void PollLoop() KILN_EXCLUDES(ops_mu_, mu_);

  // --- ensembles ---
  // LoadLocked(name, ...) after loading, depth-first, the composing models its config names
  // that are in the repository, have no ready version and are not in `attempted` (each is added
  // to it). `chain`: the ensembles being loaded around this one (a composing model already in
  // it is a cycle: reported, not loaded). A composing model's failures are appended to
  // `failures` as "composing model 'x': ...".
  void LoadWithComposingLocked(const std::string& name,
                               const inference::ModelConfig* override_config,
                               std::vector<std::string>* failures, const fs::path* dir_override,
                               std::set<std::string>* attempted, std::vector<std::string>* chain)
      KILN_REQUIRES(ops_mu_) KILN_EXCLUDES(mu_);
  // The composing models the config of `name` names (`override_config`, else its config.pbtxt in
  // the repository); empty when it is not an ensemble or its config cannot be read (the load
  // reports that).
  std::vector<std::string> ComposingNamesOf(const std::string& name,
                                            const inference::ModelConfig* override_config) const;
  // `names` reordered so that a composing model comes before the ensembles in `names` that use
  // it (otherwise in the given order).
  std::vector<std::string> OrderByComposing(const std::vector<std::string>& names) const;
  bool HasReadyVersion(const std::string& name) const KILN_EXCLUDES(mu_);
  // Why the composing models `refs` are not all ready ("" when they are): the first one that
  // has no ready version (whose own composing models are ready), with its reason.
  std::string ComposingProblemLocked(const std::vector<ComposingModelRef>& refs, int depth) const
      KILN_REQUIRES(mu_);
  // The dependency cycle ("a -> b -> a") that ensemble `name` over `refs` would close with the
  // ensembles loaded now, or "".
  std::string ComposingCycleLocked(const std::string& name,
                                   const std::vector<ComposingModelRef>& refs,
                                   std::vector<std::string>* path, int depth) const
      KILN_REQUIRES(mu_);
  // Why model entry `e` serves nothing: its reason, its last version's, or its state.
  static std::string UnavailableReason(const ModelEntry& e);
  // The models loaded model `name` names as steps: as its versions and its config name them,
  // or, when the manager has neither (a failed load), as its config.pbtxt in the repository
  // does; empty for a model that is not an ensemble or not loaded.
  std::vector<std::string> LoadedComposingNames(const std::string& name) const KILN_EXCLUDES(mu_);
  // Whether a loaded model other than `name` names `name` as a step.
  bool UsedByLoadedModel(const std::string& name) const KILN_EXCLUDES(mu_);

  const ModelManagerOptions options_;
  const GraphLoader loader_;
  const std::shared_ptr<ComposingHub> hub_;

  Mutex shutdown_mu_;  // serializes Shutdown callers
  // Serializes lifecycle operations; acquired before mu_, never after.
  Mutex ops_mu_ KILN_ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  CondVar poll_cv_;  // with mu_: wakes the poll thread
  std::map<std::string, ModelEntry, std::less<>> models_ KILN_GUARDED_BY(mu_);
  bool initial_load_started_ KILN_GUARDED_BY(mu_) = false;
  bool initial_load_done_ KILN_GUARDED_BY(mu_) = false;
  bool shut_down_ KILN_GUARDED_BY(mu_) = false;
  std::thread poll_thread_ KILN_GUARDED_BY(mu_);
};

namespace {

// `optimization { precision: "int8" ... }`: the graph calibrated on the model's calibration
// directory and quantized to the QDQ form (quant/quantizer.h); any other precision: unchanged.
Result<std::shared_ptr<Graph>> ApplyPrecision(const inference::ModelConfig& config,
                                              std::shared_ptr<Graph> graph, int64_t version,
                                              const fs::path& model_dir) {
  const inference::ModelOptimizationPolicy& opt = config.optimization();
  if (opt.precision() != "int8") return graph;
  quant::QuantizeGraphOptions options;
  if (!opt.calibration_method().empty()) {
    KILN_ASSIGN_OR_RETURN(options.method, quant::ParseCalibrationMethod(opt.calibration_method()));
  }
  options.per_channel = opt.per_channel();
  fs::path dir(opt.calibration_dir());
  if (dir.is_relative()) dir = model_dir / dir;
  Result<quant::QuantizedGraph> q = quant::QuantizeGraph(graph, dir.string(), options);
  if (!q.ok()) {
    return q.status().WithContext(
        fmt::format("model '{}' version {}: INT8 quantization at load", config.name(), version));
  }
  KILN_LOG_INFO(
      "model '{}' version {}: quantized to INT8 at load ({} layers, {} calibration "
      "samples from '{}', {})",
      config.name(), version, q->layers, q->calib_samples, dir.string(),
      quant::CalibrationMethodName(options.method));
  return q->graph;
}

// The server-side completion of an ensemble config (it has no graph): the name from the
// directory, the normalization, the checks that need no composing model, and the warning about
// fields accepted but not acted on.
Status CompleteEnsembleConfig(const std::string& name, inference::ModelConfig* config) {
  if (config->name().empty()) config->set_name(name);
  if (config->name() != name) {
    return Status::InvalidArgument(
        fmt::format("model '{}': {} names the model '{}', but the model directory is '{}'", name,
                    kConfigFileName, config->name(), name));
  }
  NormalizeEnsembleConfig(config);
  KILN_RETURN_IF_ERROR(ValidateModelConfig(*config));
  const std::vector<std::string> ignored = UnimplementedConfigFields(*config);
  if (!ignored.empty()) {
    KILN_LOG_WARN("model '{}': config fields accepted but not acted on yet: {}", name,
                  fmt::join(ignored, ", "));
  }
  if (config->response_cache().enable()) {
    KILN_LOG_WARN(
        "ensemble '{}': response_cache is not applied to an ensemble as a whole; enable it on "
        "its composing models (each step is then cached on its own)",
        name);
  }
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<LoadedModelImpl>> ModelManagerImpl::LoadVersion(
    const inference::ModelConfig& config, std::shared_ptr<Graph> graph, int64_t version,
    const fs::path& model_dir) const {
  KILN_RETURN_IF_ERROR(ValidateConfigAgainstGraph(config, *graph));
  KILN_ASSIGN_OR_RETURN(graph, ApplyPrecision(config, std::move(graph), version, model_dir));
  KILN_ASSIGN_OR_RETURN(OutputLabels labels, ReadOutputLabels(config, model_dir));
  return LoadedModelImpl::Create(version, config, std::move(graph), options_.instance_options,
                                 labels);
}

ModelLoad ModelManagerImpl::LoadModelFromDisk(const std::string& name, const fs::path& dir,
                                              const Reuse& reuse,
                                              const inference::ModelConfig* override_config) const {
  ModelLoad load;
  const auto fail_model = [&](const Status& s) {
    load.status = s;
    return std::move(load);
  };

  // Fingerprint before reading anything: a change made while loading is seen by the next poll.
  Result<ModelDirFingerprint> files = FingerprintModelDir(dir);
  if (!files.ok()) return fail_model(files.status());
  load.files = *files;

  inference::ModelConfig config;
  // Serving versions may be kept only when they run with exactly the config this load uses.
  const bool same_config =
      override_config == nullptr && reuse.config != nullptr && reuse.config_files == files->model;
  bool completed = false;
  if (override_config != nullptr) {
    config = *override_config;
  } else if (same_config) {
    config = *reuse.config;  // the model-level files did not change: same completed config
    completed = true;
  } else {
    Result<std::optional<inference::ModelConfig>> file = ReadModelConfigFile(dir);
    if (!file.ok()) return fail_model(file.status());
    config = file->value_or(inference::ModelConfig());
  }

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
  // An ensemble (repo/ensemble.h): its steps are other models of this manager.
  const bool ensemble = IsEnsembleConfig(config);
  // A generative model: its backend says so, or its version directory holds a GGUF file or a
  // Hugging Face checkpoint (no config needed).
  const bool generative =
      !ensemble && (config.backend() == kLlmBackend || config.platform() == kLlmBackend ||
                    (config.backend().empty() && config.platform().empty() &&
                     IsGenerativeModelDir(dir / std::to_string(probe_version), config)));
  if (!completed && ensemble) {
    Status s = CompleteEnsembleConfig(name, &config);
    if (!s.ok()) return fail_model(s);
    completed = true;
  }
  // A model of a built-in backend (repo/builtin_models.h): its graph comes from its config.
  const bool builtin = !ensemble && IsBuiltinModelConfig(config);
  std::shared_ptr<Graph> builtin_graph;
  if (builtin) {
    Result<std::shared_ptr<Graph>> g = BuildBuiltinModel(name, dir, &config);
    Status s = g.status();
    if (s.ok() && !completed) s = NormalizeModelConfig(&config, options_.workers_per_model);
    if (s.ok()) s = ValidateModelConfig(config);
    if (!s.ok()) return fail_model(Status::Unavailable(s.message()));
    if (!completed) {
      const std::vector<std::string> ignored = UnimplementedConfigFields(config);
      if (!ignored.empty()) {
        KILN_LOG_WARN("model '{}': config fields accepted but not acted on yet: {}", name,
                      fmt::join(ignored, ", "));
      }
    }
    builtin_graph = std::move(g).value();
    completed = true;
  }
  if (!completed) {
    Status s;
    if (generative) {
      if (config.name().empty()) config.set_name(name);
      if (config.name() != name) {
        s = Status::InvalidArgument(
            fmt::format("model '{}': {} names the model '{}', but the model directory is '{}'",
                        name, kConfigFileName, config.name(), name));
      }
      if (s.ok()) s = AutoCompleteLlmConfig(&config);
    } else {
      s = AutoCompleteServerFields(name, dir / std::to_string(probe_version), &config);
    }
    if (s.ok()) s = NormalizeModelConfig(&config, options_.workers_per_model);
    if (!s.ok()) return fail_model(s);
  }
  std::optional<LlmServingOptions> llm_options;
  if (generative) {
    Result<LlmServingOptions> o = LlmOptionsFromConfig(config);
    if (!o.ok()) return fail_model(Status::Unavailable(o.status().message()));
    o->drain_timeout_ns = options_.instance_options.drain_timeout_ns;
    llm_options = *o;
    completed = true;
  }

  for (int64_t v : missing) {
    load.versions.push_back({v,
                             Status::Unavailable(fmt::format(
                                 "version directory '{}' not found in model '{}'", v, name)),
                             nullptr,
                             false,
                             {},
                             {}});
  }
  if (selected.empty()) {
    return fail_model(Status::Unavailable(
        fmt::format("model '{}': the version policy selects none of the available versions {}",
                    name, JoinVersions(*found))));
  }

  // Highest version first: its graph completes the config when the config leaves gaps.
  Status model_error;
  std::optional<Result<std::vector<WarmupSample>>> warmup;  // built once the config is complete
  const std::vector<ComposingModelRef> composing =
      ensemble ? EnsembleComposingModels(config) : std::vector<ComposingModelRef>();
  if (ensemble) {
    std::vector<std::string> path{name};
    std::string cycle;
    {
      MutexLock lock(mu_);
      cycle = ComposingCycleLocked(name, composing, &path, 0);
    }
    if (!cycle.empty()) {
      model_error = Status::Unavailable(
          fmt::format("ensemble '{}' would close a cycle of ensembles: {}", name, cycle));
    }
  }
  for (auto it = selected.rbegin(); it != selected.rend(); ++it) {
    const int64_t version = *it;
    VersionLoad& v = load.versions.emplace_back();
    v.version = version;
    const auto version_files = files->versions.find(version);
    v.files = version_files == files->versions.end() ? std::string() : version_files->second;
    if (!model_error.ok()) {
      v.status = model_error;
      continue;
    }
    if (same_config) {
      const auto serving = reuse.ready.find(version);
      if (serving != reuse.ready.end() && serving->second.files == v.files) {
        v.model = serving->second.model;  // unchanged: keep serving it, no reload
        v.composing = serving->second.composing;
        v.reused = true;
        continue;
      }
    }
    const auto load_start = std::chrono::steady_clock::now();
    if (ensemble) {
      const std::shared_ptr<ComposingHub> hub = hub_;
      Result<std::shared_ptr<EnsembleModel>> model = EnsembleModel::Create(
          version, config,
          [hub](std::string_view model_name, int64_t model_version) {
            return hub->Resolve(model_name, model_version);
          },
          options_.instance_options);
      if (!model.ok()) {
        v.status = Status::Unavailable(model.status().message());
        continue;
      }
      (*model)->SetLoadDuration(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - load_start)
                                    .count()));
      v.model = std::move(model).value();
      v.composing = composing;
      continue;
    }
    if (generative) {
      Result<std::shared_ptr<LlmModel>> model =
          LlmModel::Create(version, config, LlmModelPath(dir / std::to_string(version), config),
                           *llm_options, options_.instance_options);
      if (!model.ok()) {
        v.status = Status::Unavailable(model.status().message());
        continue;
      }
      (*model)->SetLoadDuration(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - load_start)
                                    .count()));
      v.model = std::move(model).value();
      continue;
    }
    Result<std::shared_ptr<Graph>> graph = builtin_graph;
    if (!builtin) {
      Result<fs::path> path = ResolveModelFile(dir / std::to_string(version), config);
      if (!path.ok()) {
        v.status = Status::Unavailable(path.status().message());
        continue;
      }
      graph = loader_(path->string());
    }
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
        KILN_LOG_WARN("model '{}': config fields accepted but not acted on yet: {}", name,
                      fmt::join(ignored, ", "));
      }
    }
    Result<std::shared_ptr<LoadedModelImpl>> model =
        LoadVersion(config, std::move(graph).value(), version, dir);
    if (!model.ok()) {
      v.status = model.status().code() == StatusCode::kUnavailable
                     ? model.status()
                     : Status::Unavailable(model.status().message());
      continue;
    }
    if (config.model_warmup_size() > 0) {
      if (!warmup.has_value()) warmup = BuildWarmupSamples(config, dir);
      Status warmed = warmup->ok() ? RunWarmup(**model, **warmup) : warmup->status();
      if (!warmed.ok()) {
        (*model)->Shutdown();
        v.status = Status::Unavailable(warmed.message());
        continue;
      }
      // Warmup samples are not served requests: statistics start at zero when the version
      // serves. (Every warmup callback has returned, and the scheduler records a request's
      // statistics before calling its callback.)
      (*model)->ResetStatistics();
    }
    (*model)->SetLoadDuration(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - load_start)
                                  .count()));
    v.model = std::move(model).value();
  }
  if (completed && config.has_rollout()) {
    for (VersionLoad& v : load.versions) {
      if (v.model == nullptr || v.reused) continue;
      Result<std::shared_ptr<ServedModel>> wrapped =
          WithRollout(config, v.model, v.version, dir, !ensemble && !generative && !builtin);
      if (!wrapped.ok()) {
        v.model->Shutdown();
        v.model = nullptr;
        v.status = Status::Unavailable(wrapped.status().message());
        continue;
      }
      v.model = std::move(wrapped).value();
    }
  }
  if (completed) load.config = std::make_shared<const inference::ModelConfig>(std::move(config));
  return load;
}

namespace {

// Warmup samples that time a variant: the config's own, or one batch-1 sample of zeros with
// every variable dim at 1.
Result<std::vector<WarmupSample>> ProbeSamples(const inference::ModelConfig& config,
                                               const fs::path& model_dir) {
  if (config.model_warmup_size() > 0) return BuildWarmupSamples(config, model_dir);
  inference::ModelConfig probe = config;
  inference::ModelWarmup* w = probe.add_model_warmup();
  w->set_name("rollout_probe");
  w->set_batch_size(config.max_batch_size() > 0 ? 1 : 0);
  for (const inference::ModelInput& in : config.input()) {
    inference::ModelWarmup::Input& i = (*w->mutable_inputs())[in.name()];
    i.set_data_type(in.data_type());
    for (int64_t d : in.dims()) i.add_dims(d < 0 ? 1 : d);
    i.set_zero_data(true);
  }
  return BuildWarmupSamples(probe, model_dir);
}

}  // namespace

Result<std::shared_ptr<ServedModel>> ModelManagerImpl::WithRollout(
    const inference::ModelConfig& config, std::shared_ptr<ServedModel> model, int64_t version,
    const fs::path& model_dir, bool tensor_model) const {
  const inference::KilnRollout& rollout = config.rollout();
  if (!tensor_model && (rollout.has_shadow() || rollout.precision_variants_size() > 0)) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': rollout shadow traffic and precision variants need an ONNX tensor model "
        "(this model's versions take a split only)",
        config.name()));
  }
  std::vector<RolloutModel::Variant> variants;
  const auto shutdown_all = [&variants] {
    for (RolloutModel::Variant& v : variants) v.model->Shutdown();
  };
  for (const std::string& precision : rollout.precision_variants()) {
    inference::ModelConfig vc = config;
    vc.mutable_optimization()->set_precision(precision);
    vc.clear_rollout();
    Result<fs::path> path = ResolveModelFile(model_dir / std::to_string(version), vc);
    Result<std::shared_ptr<Graph>> graph =
        path.ok() ? loader_(path->string()) : Result<std::shared_ptr<Graph>>(path.status());
    Result<std::shared_ptr<LoadedModelImpl>> variant =
        graph.ok() ? LoadVersion(vc, std::move(graph).value(), version, model_dir)
                   : Result<std::shared_ptr<LoadedModelImpl>>(graph.status());
    if (variant.ok() && vc.model_warmup_size() > 0) {
      Result<std::vector<WarmupSample>> samples = BuildWarmupSamples(vc, model_dir);
      Status warmed = samples.ok() ? RunWarmup(**variant, *samples) : samples.status();
      if (!warmed.ok()) {
        (*variant)->Shutdown();
        variant = warmed;
      } else {
        (*variant)->ResetStatistics();
      }
    }
    if (!variant.ok()) {
      shutdown_all();
      return variant.status().WithContext(fmt::format(
          "model '{}' version {}: the {} precision variant", config.name(), version, precision));
    }
    variants.push_back({precision, std::move(variant).value()});
  }
  std::string best_effort = rollout.best_effort_precision();
  if (best_effort.empty() && rollout.overload_queue_us() > 0 && !variants.empty()) {
    // The fastest variant, by the best of three timed passes over the probe samples each
    // (after one untimed pass), the variants taking turns.
    Result<std::vector<WarmupSample>> samples = ProbeSamples(config, model_dir);
    if (!samples.ok()) {
      shutdown_all();
      return samples.status().WithContext(fmt::format(
          "model '{}' version {}: timing the precision variants", config.name(), version));
    }
    std::vector<LoadedModel*> candidates = {model.get()};
    for (RolloutModel::Variant& v : variants) candidates.push_back(v.model.get());
    std::vector<double> best(candidates.size(), std::numeric_limits<double>::infinity());
    for (int pass = 0; pass < 4; ++pass) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (Status s = RunWarmup(*candidates[i], *samples); !s.ok()) {
          shutdown_all();
          return s.WithContext(fmt::format("model '{}' version {}: timing the precision variants",
                                           config.name(), version));
        }
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (pass > 0) best[i] = std::min(best[i], ms);
      }
    }
    const size_t fastest =
        static_cast<size_t>(std::min_element(best.begin(), best.end()) - best.begin());
    std::vector<std::string> timings = {fmt::format(
        "{} {:.3f} ms",
        config.optimization().precision().empty() ? "own" : config.optimization().precision(),
        best[0])};
    for (size_t i = 1; i < candidates.size(); ++i) {
      timings.push_back(fmt::format("{} {:.3f} ms", variants[i - 1].precision, best[i]));
    }
    if (fastest == 0) {
      KILN_LOG_WARN(
          "model '{}' version {}: no precision variant is faster than the version's own ({}); "
          "best-effort requests stay on it under overload",
          config.name(), version, fmt::join(timings, ", "));
    } else {
      best_effort = variants[fastest - 1].precision;
      KILN_LOG_INFO(
          "model '{}' version {}: best-effort requests move to the {} variant under overload "
          "(fastest at load: {})",
          config.name(), version, best_effort, fmt::join(timings, ", "));
    }
    model->ResetStatistics();
    for (RolloutModel::Variant& v : variants) v.model->ResetStatistics();
  }
  return std::shared_ptr<ServedModel>(
      std::make_shared<RolloutModel>(std::move(model), std::move(variants), rollout, best_effort));
}

std::vector<int64_t> ModelManagerImpl::PublishLocked(const std::string& name, ModelLoad& load,
                                                     Retired* retired) {
  ModelEntry& e = models_[name];
  e.should_load = true;
  e.seen = load.files;
  if (shut_down_) {  // Shutdown already drained what was serving; drop what was built since
    for (VersionLoad& v : load.versions) {
      if (v.model && !v.reused) retired->push_back(std::move(v.model));
    }
    return {};
  }

  std::map<int64_t, VersionEntry> next;
  bool any_ready = false;
  for (VersionLoad& v : load.versions) {
    if (v.model) {
      next[v.version] = {ModelState::kReady, {}, std::move(v.model), v.files, v.composing};
      any_ready = true;
      continue;
    }
    const auto old = e.versions.find(v.version);
    if (old != e.versions.end() && old->second.state == ModelState::kReady) {
      next[v.version] = old->second;  // a failed reload keeps the version that serves
    } else {
      next[v.version] = {ModelState::kUnavailable, v.status.message(), nullptr, {}, {}};
    }
  }
  std::vector<int64_t> unloading;
  for (auto& [version, old] : e.versions) {
    if (old.state != ModelState::kReady) continue;
    const auto replaced = next.find(version);
    if (replaced != next.end()) {
      if (replaced->second.model != old.model) retired->push_back(std::move(old.model));
      continue;
    }
    if (!any_ready) {  // nothing of the new set loaded: do not lose what serves
      next[version] = std::move(old);
      continue;
    }
    retired->push_back(std::move(old.model));  // no longer selected
    next[version] = {ModelState::kUnloading, {}, nullptr, {}, {}};
    unloading.push_back(version);
  }
  e.versions = std::move(next);
  if (!load.status.ok() && e.versions.empty()) {
    e.state = ModelState::kUnavailable;
    e.reason = load.status.message();
  } else {
    e.state = ModelState::kUnknown;
    e.reason.clear();
  }
  if (any_ready && load.config != nullptr) {
    e.config = load.config;
    e.config_files = load.files ? load.files->model : std::string();
  }
  return unloading;
}

void ModelManagerImpl::Retire(Retired models) const {
  if (models.empty()) return;
  const auto deadline = std::chrono::steady_clock::now() + kRetireQuiesceTimeout;
  for (const auto& m : models) {
    // Holders other than `models` are callers between GetModel and Infer; let them enqueue.
    while (m.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (const auto& m : models) m->Shutdown();  // refuses new requests, runs accepted ones
  for (const auto& m : models) {
    KILN_LOG_INFO("unloaded model '{}' version {}", m->name(), m->version());
  }
  models.clear();  // the last references: frees sessions, weights and workers' state
  ReturnFreedMemory();
}

void ModelManagerImpl::MarkUnloaded(const std::string& name, const std::vector<int64_t>& versions) {
  if (versions.empty()) return;
  MutexLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return;
  for (int64_t version : versions) {
    auto v = it->second.versions.find(version);
    if (v != it->second.versions.end() && v->second.state == ModelState::kUnloading &&
        v->second.model == nullptr) {
      v->second.state = ModelState::kUnavailable;
      v->second.reason = std::string(kUnloadedReason);
    }
  }
}

void ModelManagerImpl::LoadLocked(const std::string& name,
                                  const inference::ModelConfig* override_config,
                                  std::vector<std::string>* failures,
                                  const fs::path* dir_override) {
  Reuse reuse;
  {
    MutexLock lock(mu_);
    ModelEntry& e = models_[name];
    if (shut_down_) {
      const std::string why = "the server shut down before the model was loaded";
      if (e.versions.empty()) {
        e.state = ModelState::kUnavailable;
        e.reason = why;
      }
      failures->push_back(why);
      return;
    }
    e.should_load = true;
    bool serving = false;
    for (auto& [version, v] : e.versions) {
      if (v.state == ModelState::kReady) {
        reuse.ready[version] = v;
        serving = true;
      } else {
        v.state = ModelState::kLoading;
        v.reason.clear();
      }
    }
    if (!serving && e.versions.empty()) {
      e.state = ModelState::kLoading;
      e.reason.clear();
    }
    if (!e.config_overridden) {
      reuse.config = e.config;
      reuse.config_files = e.config_files;
    }
  }

  const fs::path dir =
      dir_override != nullptr ? *dir_override : fs::path(options_.repository_path) / name;
  ModelLoad load = LoadModelFromDisk(name, dir, reuse, override_config);
  reuse = Reuse();  // drop the references to the serving versions before retiring any

  Retired retired;
  std::vector<int64_t> unloading;
  {
    MutexLock lock(mu_);
    unloading = PublishLocked(name, load, &retired);
    if (override_config != nullptr && load.config != nullptr) {
      models_[name].config_overridden = true;
    } else if (load.config != nullptr) {
      models_[name].config_overridden = false;
    }
  }
  Retire(std::move(retired));
  MarkUnloaded(name, unloading);
  // The import's temporaries (file bytes, protobuf copies of the weights) are freed by now.
  ReturnFreedMemory();

  if (!load.status.ok()) {
    KILN_LOG_ERROR("failed to load model '{}': {}", name, load.status.message());
    failures->push_back(load.status.message());
  }
  for (const VersionLoad& v : load.versions) {
    if (v.status.ok()) {
      if (!v.reused) KILN_LOG_INFO("loaded model '{}' version {}", name, v.version);
    } else {
      KILN_LOG_ERROR("failed to load model '{}' version {}: {}", name, v.version,
                     v.status.message());
      failures->push_back(fmt::format("version {}: {}", v.version, v.status.message()));
    }
  }
}

void ModelManagerImpl::UnloadLocked(const std::string& name, bool forget) {
  Retired retired;
  std::vector<int64_t> unloading;
  {
    MutexLock lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    ModelEntry& e = it->second;
    e.should_load = false;
    std::map<int64_t, VersionEntry> next;
    for (auto& [version, v] : e.versions) {
      if (v.state != ModelState::kReady) continue;  // nothing serves: forget the failure
      retired.push_back(std::move(v.model));
      next[version] = {ModelState::kUnloading, {}, nullptr, {}, {}};
      unloading.push_back(version);
    }
    e.versions = std::move(next);
    e.state = ModelState::kUnknown;
    e.reason.clear();
    e.seen.reset();
    e.config.reset();
    e.config_files.clear();
    e.config_overridden = false;
    e.loaded_on_its_own = false;
  }
  Retire(std::move(retired));
  MarkUnloaded(name, unloading);
  if (forget) {
    MutexLock lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && !it->second.should_load) models_.erase(it);
  }
}

Status ModelManagerImpl::LoadInitialModels() {
  {
    MutexLock lock(mu_);
    if (shut_down_) return Status::Unavailable("the model manager is shut down");
    if (initial_load_started_) {
      return Status::FailedPrecondition("LoadInitialModels was already called");
    }
    initial_load_started_ = true;
  }
  MutexLock ops(ops_mu_);
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
    MutexLock lock(mu_);
    for (const std::string& d : dirs) models_[d];
    for (const std::string& m : to_load) {
      ModelEntry& e = models_[m];
      e.should_load = true;
      e.loaded_on_its_own = true;
      e.state = ModelState::kLoading;
    }
  }

  std::vector<std::string> failures;
  std::set<std::string> attempted;
  // Composing models load before the ensembles that use them.
  for (const std::string& name : OrderByComposing(to_load)) {
    if (attempted.contains(name)) continue;  // loaded already as a composing model
    std::vector<std::string> model_failures;
    if (!std::binary_search(dirs.begin(), dirs.end(), name)) {
      const std::string why =
          fmt::format("model '{}' is not in the repository {}", name, options_.repository_path);
      KILN_LOG_ERROR("failed to load model '{}': {}", name, why);
      MutexLock lock(mu_);
      ModelEntry& e = models_[name];
      e.state = ModelState::kUnavailable;
      e.reason = why;
      model_failures.push_back(why);
    } else {
      std::vector<std::string> chain;
      LoadWithComposingLocked(name, nullptr, &model_failures, nullptr, &attempted, &chain);
    }
    for (const std::string& f : model_failures) {
      failures.push_back(f.starts_with("version ") ? fmt::format("'{}' {}", name, f)
                                                   : fmt::format("'{}': {}", name, f));
    }
  }

  {
    MutexLock lock(mu_);
    initial_load_done_ = true;
    if (options_.control_mode == ModelControlMode::kPoll && options_.repository_poll_secs > 0 &&
        !shut_down_) {
      try {
        poll_thread_ = std::thread([this] { PollLoop(); });
      } catch (const std::system_error& e) {
        failures.push_back(fmt::format("cannot start the repository poll thread: {}", e.what()));
      }
    }
  }
  if (failures.empty()) return Status::OK();
  return Status::Unavailable(
      fmt::format("{} model load failure(s): {}", failures.size(), fmt::join(failures, "; ")));
}

namespace {

Status CheckUploadedFilePath(std::string_view path) {
  const auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("model file parameter 'file:{}': {}", path, why));
  };
  if (path.empty()) return bad("the path is empty");
  if (path.front() == '/') return bad("the path must be relative to the model directory");
  if (path.find('\\') != std::string_view::npos || path.find('\0') != std::string_view::npos) {
    return bad("the path must not contain '\\' or NUL");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return bad("the path must not have empty, '.' or '..' components");
    }
    start = end + 1;
  }
  return Status::OK();
}

// A directory removed (with its contents) when the object goes.
class TempDir {
 public:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, fs::path())) {}
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

Result<TempDir> WriteUploadedModel(const std::string& model,
                                   const std::vector<ModelLoadOptions::File>& files) {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return Status::Internal("no temporary directory: " + ec.message());
  std::string templ = (base / "kiln-upload-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) {
    return Status::Internal(
        fmt::format("cannot create a directory under {}: {}", base.string(), std::strerror(errno)));
  }
  TempDir dir{fs::path(templ)};
  for (const ModelLoadOptions::File& f : files) {
    const fs::path target = dir.path() / model / f.path;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return Status::Internal(
          fmt::format("cannot create {}: {}", target.parent_path().string(), ec.message()));
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    out.write(f.content.data(), static_cast<std::streamsize>(f.content.size()));
    out.close();
    if (!out) return Status::Internal(fmt::format("cannot write {}", target.string()));
  }
  return dir;
}

}  // namespace

Status ModelManagerImpl::LoadModel(std::string_view name, const ModelLoadOptions& options) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return Status::Unavailable(std::string(kControlModeError));
  }
  std::optional<inference::ModelConfig> override_config;
  if (!options.config_json.empty()) {
    Result<inference::ModelConfig> parsed = ParseModelConfigJson(options.config_json);
    if (!parsed.ok()) {
      return Status::InvalidArgument(
          fmt::format("load failed for model '{}': {}", name, parsed.status().message()));
    }
    override_config = std::move(parsed).value();
  }
  const std::string model(name);
  if (!options.files.empty() && !override_config.has_value()) {
    return Status::InvalidArgument(fmt::format(
        "load failed for model '{}': model files were sent without the 'config' parameter, "
        "which is required with them",
        name));
  }
  if (!options.files.empty() &&
      (model.empty() || model == "." || model == ".." ||
       model.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos)) {
    return Status::InvalidArgument(fmt::format(
        "load failed: '{}' cannot name a model directory (no '/', '\\', NUL, '.' or '..')", name));
  }
  for (const ModelLoadOptions::File& f : options.files) {
    if (Status s = CheckUploadedFilePath(f.path); !s.ok()) {
      return Status::InvalidArgument(
          fmt::format("load failed for model '{}': {}", name, s.message()));
    }
  }
  MutexLock ops(ops_mu_);
  {
    MutexLock lock(mu_);
    if (shut_down_) return Status::Unavailable("the model manager is shut down");
  }
  // A model a load request names is loaded on its own (unload_dependents leaves it loaded).
  const auto mark_loaded_on_its_own = [&] {
    MutexLock lock(mu_);
    models_[model].loaded_on_its_own = true;
  };
  if (!options.files.empty()) {
    // The files form the model directory for this load, written to a private temporary folder
    // that is removed once the model is built (the model keeps nothing open there).
    Result<TempDir> tmp = WriteUploadedModel(model, options.files);
    if (!tmp.ok()) {
      return Status::Internal(
          fmt::format("load failed for model '{}': {}", name, tmp.status().message()));
    }
    std::vector<std::string> failures;
    const fs::path dir = tmp->path() / model;
    std::set<std::string> attempted;
    std::vector<std::string> chain;
    mark_loaded_on_its_own();
    LoadWithComposingLocked(model, &*override_config, &failures, &dir, &attempted, &chain);
    if (failures.empty()) return Status::OK();
    return Status::InvalidArgument(
        fmt::format("load failed for model '{}': {}", name, fmt::join(failures, "; ")));
  }
  Result<std::vector<std::string>> dirs = ListModelDirs(options_.repository_path);
  if (!dirs.ok()) {
    return Status::InvalidArgument(
        fmt::format("failed to load '{}', failed to poll from model repository: {}", name,
                    dirs.status().message()));
  }
  if (!std::binary_search(dirs->begin(), dirs->end(), model)) {
    UnloadLocked(model, /*forget=*/true);  // its directory is gone: it must not keep serving
    return Status::InvalidArgument(fmt::format(
        "failed to load '{}', failed to poll from model repository: model '{}' is not in the "
        "repository {}",
        name, name, options_.repository_path));
  }
  std::vector<std::string> failures;
  std::set<std::string> attempted;
  std::vector<std::string> chain;
  // An ensemble's composing models that are not loaded are loaded first, as the reference
  // server does.
  mark_loaded_on_its_own();
  LoadWithComposingLocked(model, override_config ? &*override_config : nullptr, &failures, nullptr,
                          &attempted, &chain);
  if (failures.empty()) return Status::OK();
  return Status::InvalidArgument(
      fmt::format("load failed for model '{}': {}", name, fmt::join(failures, "; ")));
}

Status ModelManagerImpl::UnloadModel(std::string_view name, const ModelUnloadOptions& options) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return Status::Unavailable(std::string(kControlModeError));
  }
  MutexLock ops(ops_mu_);
  const std::string model(name);
  bool loaded = false;
  {
    MutexLock lock(mu_);
    if (shut_down_) return Status::Unavailable("the model manager is shut down");
    auto it = models_.find(model);
    loaded = it != models_.end() && it->second.should_load;
  }
  // The models it depends on, named before it is unloaded (its versions name them until then).
  std::vector<std::pair<std::string, std::string>> candidates;  // (composing model, its user)
  if (options.unload_dependents && loaded) {
    for (std::string& dep : LoadedComposingNames(model)) candidates.emplace_back(dep, model);
  }
  UnloadLocked(model, /*forget=*/false);
  // The reference server's unload_dependents: a composing model loaded along with an ensemble
  // goes once no loaded model names it any more. A candidate still used now is looked at again
  // when another of its users is unloaded here (the last one decides).
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto [dep, user] = candidates[i];
    {
      MutexLock lock(mu_);
      auto it = models_.find(dep);
      if (it == models_.end() || !it->second.should_load || it->second.loaded_on_its_own) continue;
    }
    if (UsedByLoadedModel(dep)) continue;
    std::vector<std::string> next = LoadedComposingNames(dep);
    KILN_LOG_INFO("unloading model '{}', a composing model of '{}' (unload_dependents)", dep, user);
    UnloadLocked(dep, /*forget=*/false);
    for (std::string& d : next) candidates.emplace_back(std::move(d), dep);
  }
  return Status::OK();
}

Status ModelManagerImpl::Poll() {
  if (options_.control_mode != ModelControlMode::kPoll) {
    return Status::FailedPrecondition("the repository is polled only in model control mode poll");
  }
  MutexLock ops(ops_mu_);
  return PollLocked();
}

Status ModelManagerImpl::PollLocked() {
  {
    MutexLock lock(mu_);
    if (shut_down_) return Status::Unavailable("the model manager is shut down");
  }
  Result<std::vector<std::string>> dirs = ListModelDirs(options_.repository_path);
  if (!dirs.ok()) {
    KILN_LOG_ERROR("repository poll: {}", dirs.status().message());
    return dirs.status();
  }
  std::vector<std::string> failures;
  std::vector<std::string> changed_models;
  std::set<std::string> added;
  for (const std::string& name : *dirs) {
    Result<ModelDirFingerprint> files =
        FingerprintModelDir(fs::path(options_.repository_path) / name);
    if (!files.ok()) {
      KILN_LOG_WARN("repository poll: model '{}' skipped: {}", name, files.status().message());
      continue;
    }
    bool known = false;
    bool changed = true;
    {
      MutexLock lock(mu_);
      if (shut_down_) break;
      auto it = models_.find(name);
      known = it != models_.end() && it->second.seen.has_value();
      changed = !known || *it->second.seen != *files;
    }
    if (!changed) continue;
    changed_models.push_back(name);
    if (!known) added.insert(name);
  }
  // Composing models load before the ensembles that use them.
  for (const std::string& name : OrderByComposing(changed_models)) {
    {
      MutexLock lock(mu_);
      if (shut_down_) break;
    }
    KILN_LOG_INFO("repository poll: model '{}' {}; loading", name,
                  added.contains(name) ? "added" : "changed");
    std::vector<std::string> model_failures;
    LoadLocked(name, nullptr, &model_failures);
    for (const std::string& f : model_failures)
      failures.push_back(fmt::format("'{}': {}", name, f));
  }
  std::vector<std::string> removed;
  {
    MutexLock lock(mu_);
    for (const auto& [name, e] : models_) {
      if (!std::binary_search(dirs->begin(), dirs->end(), name)) removed.push_back(name);
    }
  }
  for (const std::string& name : removed) {
    KILN_LOG_INFO("repository poll: model '{}' was removed from the repository; unloading", name);
    UnloadLocked(name, /*forget=*/true);
  }
  if (failures.empty()) return Status::OK();
  return Status::Unavailable(
      fmt::format("{} model load failure(s): {}", failures.size(), fmt::join(failures, "; ")));
}

void ModelManagerImpl::PollLoop() {
  const auto interval = std::chrono::seconds(options_.repository_poll_secs);
  MutexLock lock(mu_);
  while (!shut_down_) {
    poll_cv_.WaitFor(mu_, interval, [this]() KILN_REQUIRES(mu_) { return shut_down_; });
    if (shut_down_) break;
    lock.Unlock();
    {
      MutexLock ops(ops_mu_);
      (void)PollLocked();  // failures are logged and recorded in the index
    }
    lock.Lock();
  }
}

Result<std::shared_ptr<LoadedModel>> ModelManagerImpl::GetModel(std::string_view name,
                                                                int64_t version) const {
  MutexLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return Status::NotFound(fmt::format("Request for unknown model: '{}' is not found", name));
  }
  const ModelEntry& e = it->second;
  if (version == -1) {
    std::string blocked;  // why the ready versions of an ensemble cannot serve
    for (auto v = e.versions.rbegin(); v != e.versions.rend(); ++v) {
      if (v->second.state != ModelState::kReady) continue;
      std::string problem = ComposingProblemLocked(v->second.composing, 0);
      if (problem.empty()) return std::shared_ptr<LoadedModel>(v->second.model);
      if (blocked.empty()) blocked = std::move(problem);
    }
    const std::string why = blocked.empty() ? UnavailableReason(e) : blocked;
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
  if (std::string problem = ComposingProblemLocked(v->second.composing, 0); !problem.empty()) {
    return Status::Unavailable(
        fmt::format("Request for unknown model: '{}' version {} is not at ready state ({}: {})",
                    name, version, ModelStateName(ModelState::kUnavailable), problem));
  }
  return std::shared_ptr<LoadedModel>(v->second.model);
}

std::string ModelManagerImpl::UnavailableReason(const ModelEntry& e) {
  std::string why = e.reason;
  if (why.empty() && !e.versions.empty()) why = e.versions.rbegin()->second.reason;
  if (why.empty() && !e.versions.empty()) {
    why = ModelStateName(e.versions.rbegin()->second.state);
  }
  if (why.empty()) why = e.should_load ? "not loaded yet" : "not loaded";
  return why;
}

std::string ModelManagerImpl::ComposingProblemLocked(const std::vector<ComposingModelRef>& refs,
                                                     int depth) const {
  if (refs.empty()) return {};
  if (depth >= kMaxEnsembleDepth) {
    return fmt::format("ensembles nest more than {} deep", kMaxEnsembleDepth);
  }
  for (const ComposingModelRef& ref : refs) {
    auto it = models_.find(ref.name);
    if (it == models_.end()) return fmt::format("composing model '{}' is not loaded", ref.name);
    const ModelEntry& e = it->second;
    if (ref.version == -1) {
      std::string blocked;
      bool ready = false;
      for (auto v = e.versions.rbegin(); v != e.versions.rend() && !ready; ++v) {
        if (v->second.state != ModelState::kReady) continue;
        std::string problem = ComposingProblemLocked(v->second.composing, depth + 1);
        ready = problem.empty();
        if (!ready && blocked.empty()) blocked = std::move(problem);
      }
      if (!ready) {
        return fmt::format("composing model '{}' has no ready version ({})", ref.name,
                           blocked.empty() ? UnavailableReason(e) : blocked);
      }
      continue;
    }
    auto v = e.versions.find(ref.version);
    if (v == e.versions.end()) {
      return fmt::format("composing model '{}' version {} is not loaded", ref.name, ref.version);
    }
    if (v->second.state != ModelState::kReady) {
      return fmt::format("composing model '{}' version {} is {}{}{}", ref.name, ref.version,
                         ModelStateName(v->second.state), v->second.reason.empty() ? "" : ": ",
                         v->second.reason);
    }
    if (std::string problem = ComposingProblemLocked(v->second.composing, depth + 1);
        !problem.empty()) {
      return fmt::format("composing model '{}' version {}: {}", ref.name, ref.version, problem);
    }
  }
  return {};
}

std::string ModelManagerImpl::ComposingCycleLocked(const std::string& name,
                                                   const std::vector<ComposingModelRef>& refs,
                                                   std::vector<std::string>* path,
                                                   int depth) const {
  if (depth >= kMaxEnsembleDepth) return {};
  for (const ComposingModelRef& ref : refs) {
    path->push_back(ref.name);
    if (ref.name == name) return fmt::format("{}", fmt::join(*path, " -> "));
    auto it = models_.find(ref.name);
    if (it != models_.end()) {
      for (const auto& [version, v] : it->second.versions) {
        if (ref.version != -1 && version != ref.version) continue;
        std::string cycle = ComposingCycleLocked(name, v.composing, path, depth + 1);
        if (!cycle.empty()) return cycle;
      }
    }
    path->pop_back();
  }
  return {};
}

std::vector<std::string> ModelManagerImpl::LoadedComposingNames(const std::string& name) const {
  std::vector<std::string> names;
  const auto add = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  {
    MutexLock lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.should_load) return names;
    const ModelEntry& e = it->second;
    for (const auto& [version, v] : e.versions) {
      for (const ComposingModelRef& ref : v.composing) add(ref.name);
    }
    if (e.config != nullptr) {
      if (IsEnsembleConfig(*e.config)) {
        for (const ComposingModelRef& ref : EnsembleComposingModels(*e.config)) add(ref.name);
      }
      return names;
    }
    if (!names.empty()) return names;
  }
  return ComposingNamesOf(name, nullptr);
}

bool ModelManagerImpl::UsedByLoadedModel(const std::string& name) const {
  std::vector<std::string> loaded;
  {
    MutexLock lock(mu_);
    for (const auto& [other, e] : models_) {
      if (e.should_load && other != name) loaded.push_back(other);
    }
  }
  for (const std::string& other : loaded) {
    const std::vector<std::string> steps = LoadedComposingNames(other);
    if (std::find(steps.begin(), steps.end(), name) != steps.end()) return true;
  }
  return false;
}

bool ModelManagerImpl::HasReadyVersion(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return false;
  return std::any_of(it->second.versions.begin(), it->second.versions.end(),
                     [](const auto& v) { return v.second.state == ModelState::kReady; });
}

std::vector<std::string> ModelManagerImpl::ComposingNamesOf(
    const std::string& name, const inference::ModelConfig* override_config) const {
  std::optional<inference::ModelConfig> config;
  if (override_config != nullptr) {
    config = *override_config;
  } else {
    Result<std::optional<inference::ModelConfig>> file =
        ReadModelConfigFile(fs::path(options_.repository_path) / name);
    if (file.ok()) config = *file;
  }
  std::vector<std::string> names;
  if (!config.has_value() || !IsEnsembleConfig(*config)) return names;
  for (const ComposingModelRef& ref : EnsembleComposingModels(*config)) {
    if (std::find(names.begin(), names.end(), ref.name) == names.end()) names.push_back(ref.name);
  }
  return names;
}

std::vector<std::string> ModelManagerImpl::OrderByComposing(
    const std::vector<std::string>& names) const {
  const std::set<std::string> listed(names.begin(), names.end());
  std::set<std::string> done;
  std::set<std::string> visiting;
  std::vector<std::string> out;
  // Depth-first, composing models first; a cycle is cut where it closes (its load fails).
  const auto visit = [&](const auto& self, const std::string& name, int depth) -> void {
    if (done.contains(name) || visiting.contains(name)) return;
    visiting.insert(name);
    if (depth < kMaxEnsembleDepth) {
      for (const std::string& dep : ComposingNamesOf(name, nullptr)) {
        if (listed.contains(dep)) self(self, dep, depth + 1);
      }
    }
    visiting.erase(name);
    done.insert(name);
    out.push_back(name);
  };
  for (const std::string& name : names) visit(visit, name, 0);
  return out;
}

void ModelManagerImpl::LoadWithComposingLocked(const std::string& name,
                                               const inference::ModelConfig* override_config,
                                               std::vector<std::string>* failures,
                                               const fs::path* dir_override,
                                               std::set<std::string>* attempted,
                                               std::vector<std::string>* chain) {
  attempted->insert(name);
  const std::vector<std::string> composing = ComposingNamesOf(name, override_config);
  if (!composing.empty()) {
    Result<std::vector<std::string>> dirs = ListModelDirs(options_.repository_path);
    chain->push_back(name);
    for (const std::string& dep : composing) {
      if (std::find(chain->begin(), chain->end(), dep) != chain->end()) {
        failures->push_back(
            fmt::format("composing models form a cycle: {} -> {}", fmt::join(*chain, " -> "), dep));
        continue;
      }
      if (attempted->contains(dep) || HasReadyVersion(dep) || !dirs.ok() ||
          !std::binary_search(dirs->begin(), dirs->end(), dep)) {
        continue;  // loaded, tried already, or not there (the ensemble's load names it)
      }
      KILN_LOG_INFO("loading model '{}', a composing model of ensemble '{}'", dep, name);
      std::vector<std::string> dep_failures;
      LoadWithComposingLocked(dep, nullptr, &dep_failures, nullptr, attempted, chain);
      for (const std::string& f : dep_failures) {
        failures->push_back(fmt::format("composing model '{}': {}", dep, f));
      }
    }
    chain->pop_back();
  }
  LoadLocked(name, override_config, failures, dir_override);
}

std::vector<int64_t> ModelManagerImpl::ReadyVersions(std::string_view name) const {
  std::vector<int64_t> out;
  MutexLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [version, v] : it->second.versions) {
    if (v.state == ModelState::kReady && ComposingProblemLocked(v.composing, 0).empty()) {
      out.push_back(version);
    }
  }
  return out;
}

std::vector<ModelIndexEntry> ModelManagerImpl::Index() const {
  // Directories added since the last load show up too (as never loaded), like the reference
  // server's index, which lists the repository on every call.
  Result<std::vector<std::string>> dirs = ListModelDirs(options_.repository_path);
  std::vector<ModelIndexEntry> out;
  MutexLock lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, e] : models_) names.push_back(name);
  if (dirs.ok()) {
    for (const std::string& d : *dirs) {
      if (!models_.contains(d)) names.push_back(d);
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto it = models_.find(name);
    if (it == models_.end()) {
      out.push_back({name, -1, ModelState::kUnknown, {}});
      continue;
    }
    const ModelEntry& e = it->second;
    if (e.versions.empty()) {
      out.push_back({name, -1, e.state, e.reason});
      continue;
    }
    for (const auto& [version, v] : e.versions) {
      std::string problem;
      if (v.state == ModelState::kReady) problem = ComposingProblemLocked(v.composing, 0);
      if (problem.empty()) {
        out.push_back({name, version, v.state, v.reason});
      } else {
        out.push_back({name, version, ModelState::kUnavailable, std::move(problem)});
      }
    }
  }
  return out;
}

bool ModelManagerImpl::AllModelsReady() const {
  MutexLock lock(mu_);
  if (shut_down_ || !initial_load_done_) return false;
  for (const auto& [name, e] : models_) {
    if (!e.should_load) continue;
    if (e.versions.empty()) return false;
    for (const auto& [version, v] : e.versions) {
      const bool unloaded = (v.state == ModelState::kUnavailable && v.reason == kUnloadedReason) ||
                            v.state == ModelState::kUnloading;
      if (v.state != ModelState::kReady && !unloaded) return false;
    }
    const bool any_ready = std::any_of(e.versions.begin(), e.versions.end(), [](const auto& v) {
      return v.second.state == ModelState::kReady;
    });
    if (!any_ready) return false;
  }
  return true;
}

void ModelManagerImpl::Shutdown() {
  MutexLock serialize(shutdown_mu_);
  std::vector<std::shared_ptr<ServedModel>> models;
  std::thread poll_thread;
  {
    MutexLock lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    poll_thread = std::move(poll_thread_);
    for (auto& [name, e] : models_) {
      for (auto& [version, v] : e.versions) {
        if (v.model) {
          models.push_back(v.model);
          v.state = ModelState::kUnloading;
        }
      }
    }
  }
  poll_cv_.NotifyAll();
  for (const auto& m : models) m->Shutdown();  // drains queued requests, joins workers
  {
    MutexLock lock(mu_);
    for (auto& [name, e] : models_) {
      for (auto& [version, v] : e.versions) {
        if (v.model) {
          v.model.reset();
          v.state = ModelState::kUnavailable;
          v.reason = std::string(kUnloadedReason);
        }
      }
    }
  }
  // The poll thread finishes the model it may be loading (and retires it: shut_down_ is set).
  if (poll_thread.joinable()) poll_thread.join();
  if (!models.empty()) KILN_LOG_INFO("unloaded {} model version(s)", models.size());
  models.clear();
  ReturnFreedMemory();
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
  if (options.repository_poll_secs < 0) {
    return Status::InvalidArgument(
        fmt::format("repository_poll_secs must be >= 0, got {}", options.repository_poll_secs));
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
