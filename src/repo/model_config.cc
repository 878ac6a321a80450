// SPDX-License-Identifier: Apache-2.0
#include "repo/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "repo/ensemble.h"
#include "repo/repository.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using inference::ModelConfig;
using inference::ModelInstanceGroup;

// Collects every text-format problem as "source:line:column: message (in `line text`)"; the
// line text names the field even when protobuf's message does not ("Expected integer").
class ConfigErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  ConfigErrorCollector(std::string_view text, std::string_view source)
      : text_(text), source_(source) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_.push_back(Format(line, column, message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    errors_.push_back(Format(line, column, "warning: " + message));
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string Format(int line, int column, const std::string& message) const {
    std::string out = fmt::format("{}:{}:{}: {}", source_, line + 1, column + 1, message);
    const std::string_view text = LineText(line);
    if (!text.empty()) out += fmt::format(" (in `{}`)", text);
    return out;
  }
  // Line `line` (0-based) without surrounding blanks, shortened to 80 characters.
  std::string_view LineText(int line) const {
    size_t start = 0;
    for (int i = 0; i < line && start != std::string_view::npos; ++i) {
      start = text_.find('\n', start);
      if (start != std::string_view::npos) ++start;
    }
    if (start == std::string_view::npos || start >= text_.size()) return {};
    size_t end = text_.find('\n', start);
    if (end == std::string_view::npos) end = text_.size();
    std::string_view l = text_.substr(start, end - start);
    while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t' || l.back() == '\r')) {
      l.remove_suffix(1);
    }
    return l.substr(0, 80);
  }

  std::string_view text_;
  std::string source_;
  std::vector<std::string> errors_;
};

// Config dims with the implicit batch dim prepended (-1) when the model batches, and with the
// reshape applied when there is one: the shape the graph itself sees.
std::vector<int64_t> ModelSideShape(const ModelConfig& config,
                                    const google::protobuf::RepeatedField<int64_t>& dims,
                                    bool has_reshape, const inference::ModelTensorReshape& reshape,
                                    bool ragged = false) {
  std::vector<int64_t> shape;
  // A ragged input of a batching model reaches the model flat: every request's elements
  // concatenated (repo/batching.h).
  if (ragged && config.max_batch_size() > 0) return {-1};
  if (config.max_batch_size() > 0) shape.push_back(-1);
  const auto& per_item = has_reshape ? reshape.shape() : dims;
  shape.insert(shape.end(), per_item.begin(), per_item.end());
  return shape;
}

std::string GraphShapeString(const ValueType& type) {
  if (!type.has_shape) return "[?]";
  std::string out = "[";
  for (size_t i = 0; i < type.dims.size(); ++i) {
    if (i) out += ",";
    const Dim& d = type.dims[i];
    if (d.known())
      out += std::to_string(d.value);
    else if (!d.symbol.empty())
      out += d.symbol;
    else
      out += "?";
  }
  return out + "]";
}

bool DimIsDynamic(const Dim& d) { return !d.known(); }

// Per-item dims of a graph value as a config would state them (-1 for dynamic dims), with the
// first dim dropped when `batching`.
std::vector<int64_t> ConfigDimsFromGraph(const ValueType& type, bool batching) {
  std::vector<int64_t> dims;
  for (size_t i = batching ? 1 : 0; i < type.dims.size(); ++i) {
    dims.push_back(type.dims[i].known() ? type.dims[i].value : -1);
  }
  return dims;
}

template <typename TensorConfig>
Status FillTensorFromGraph(const Graph& graph, int value_id, bool batching, std::string_view kind,
                           const std::string& model, TensorConfig* t) {
  const Value& v = graph.value(value_id);
  if (t->data_type() == inference::TYPE_INVALID) {
    if (v.type.dtype == DataType::kInvalid) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': cannot derive the datatype of {} '{}' from the model; list it in {}", model,
          kind, v.name, kConfigFileName));
    }
    t->set_data_type(ToConfigDataType(v.type.dtype));
  }
  if (t->dims_size() == 0 && !t->has_reshape()) {
    if (!v.type.has_shape) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': the model does not declare the shape of {} '{}'; list its dims in {}", model,
          kind, v.name, kConfigFileName));
    }
    std::vector<int64_t> dims = ConfigDimsFromGraph(v.type, batching);
    if (dims.empty()) {
      // A scalar item: the protocol idiom is dims [1] seen by the model as shape [].
      t->add_dims(1);
      t->mutable_reshape();
    } else {
      for (int64_t d : dims) t->add_dims(d);
    }
  }
  return Status::OK();
}

int FindGraphIo(const Graph& graph, const std::vector<int>& ids, std::string_view name) {
  for (int id : ids) {
    if (graph.value(id).name == name) return id;
  }
  return -1;
}

template <typename TensorConfig>
Status ValidateTensorConfig(const ModelConfig& config, const TensorConfig& t, std::string_view kind,
                            std::set<std::string>* seen) {
  const std::string& model = config.name();
  if (t.name().empty()) {
    return Status::InvalidArgument(fmt::format("model '{}': an {} has no name", model, kind));
  }
  if (!seen->insert(t.name()).second) {
    return Status::InvalidArgument(
        fmt::format("model '{}': {} '{}' is listed more than once", model, kind, t.name()));
  }
  if (t.data_type() == inference::TYPE_INVALID || !inference::DataType_IsValid(t.data_type())) {
    return Status::InvalidArgument(
        fmt::format("model '{}': {} '{}' has no valid data_type", model, kind, t.name()));
  }
  for (int64_t d : t.dims()) {
    if (d < -1) {
      return Status::InvalidArgument(
          fmt::format("model '{}': {} '{}': dims {} must each be -1 (variable) or >= 0", model,
                      kind, t.name(), DimsToString(AsSpan(t.dims()))));
    }
  }
  if (t.has_reshape()) {
    for (int64_t d : t.reshape().shape()) {
      if (d < -1) {
        return Status::InvalidArgument(
            fmt::format("model '{}': {} '{}': reshape {} must have dims -1 or >= 0", model, kind,
                        t.name(), DimsToString(AsSpan(t.reshape().shape()))));
      }
    }
    const auto count_var = [](const auto& v) { return std::count(v.begin(), v.end(), -1); };
    const auto fixed_product = [](const auto& v) {
      int64_t p = 1;
      for (int64_t d : v) {
        if (d >= 0) p *= d;
      }
      return p;
    };
    if (count_var(t.dims()) != count_var(t.reshape().shape()) ||
        fixed_product(t.dims()) != fixed_product(t.reshape().shape())) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': {} '{}': reshape {} is not compatible with dims {} (same element count "
          "and the same number of -1 dims required)",
          model, kind, t.name(), DimsToString(AsSpan(t.reshape().shape())),
          DimsToString(AsSpan(t.dims()))));
    }
  }
  return Status::OK();
}

// Compares a config tensor with the graph value it names.
Status CheckAgainstGraphValue(const ModelConfig& config, std::string_view kind,
                              const std::string& name, inference::DataType config_dtype,
                              const std::vector<int64_t>& config_shape, const Value& value) {
  const std::string& model = config.name();
  const DataType want = FromConfigDataType(config_dtype);
  if (value.type.dtype != DataType::kInvalid && value.type.dtype != want) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': {} '{}': config data_type {} does not match the model's {}", model, kind, name,
        inference::DataType_Name(config_dtype), DataTypeConfigName(value.type.dtype)));
  }
  if (!value.type.has_shape) return Status::OK();
  const std::string shapes = fmt::format("config shape {} (max_batch_size {}{}) vs model shape {}",
                                         DimsToString(config_shape), config.max_batch_size(),
                                         config.max_batch_size() > 0 ? ", batch dim first" : "",
                                         GraphShapeString(value.type));
  if (config_shape.size() != value.type.dims.size()) {
    return Status::InvalidArgument(
        fmt::format("model '{}': {} '{}': rank differs: {}", model, kind, name, shapes));
  }
  for (size_t i = 0; i < config_shape.size(); ++i) {
    const Dim& g = value.type.dims[i];
    if (i == 0 && config.max_batch_size() > 0) {
      if (g.known()) {
        return Status::InvalidArgument(fmt::format(
            "model '{}': {} '{}': max_batch_size {} needs a dynamic first (batch) dim, but the "
            "model fixes it to {}: {}; set max_batch_size: 0 and list the full shape in dims",
            model, kind, name, config.max_batch_size(), g.value, shapes));
      }
      continue;
    }
    if (g.known() && config_shape[i] != -1 && config_shape[i] != g.value) {
      return Status::InvalidArgument(
          fmt::format("model '{}': {} '{}': dim {} differs: {}", model, kind, name, i, shapes));
    }
  }
  return Status::OK();
}

}  // namespace

DataType FromConfigDataType(inference::DataType dtype) {
  const int v = static_cast<int>(dtype);
  if (v <= 0 || v >= kNumDataTypes) return DataType::kInvalid;
  return static_cast<DataType>(v);
}

inference::DataType ToConfigDataType(DataType dtype) {
  const int v = static_cast<int>(dtype);
  if (!inference::DataType_IsValid(v)) return inference::TYPE_INVALID;
  return static_cast<inference::DataType>(v);
}

std::string DimsToString(std::span<const int64_t> dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

Result<inference::ModelConfig> ParseModelConfigText(std::string_view text,
                                                    std::string_view source) {
  ModelConfig config;
  ConfigErrorCollector errors(text, source);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  const bool ok = parser.ParseFromString(std::string(text), &config);
  if (!ok) {
    if (errors.errors().empty()) {
      return Status::InvalidArgument(fmt::format("{}: cannot parse model configuration", source));
    }
    return Status::InvalidArgument(fmt::format("{}", fmt::join(errors.errors(), "; ")));
  }
  return config;
}

Result<std::optional<inference::ModelConfig>> ReadModelConfigFile(const fs::path& model_dir) {
  const fs::path path = model_dir / kConfigFileName;
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (ec) {
    return Status::Unavailable(fmt::format("cannot access {}: {}", path.string(), ec.message()));
  }
  if (!exists) return std::optional<inference::ModelConfig>();
  if (fs::is_directory(path, ec)) {
    return Status::InvalidArgument(fmt::format("{} is a directory", path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Unavailable(fmt::format("cannot read {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Unavailable(fmt::format("error reading {}", path.string()));
  const std::string source = fmt::format("{}/{}", model_dir.filename().string(), kConfigFileName);
  KILN_ASSIGN_OR_RETURN(inference::ModelConfig config, ParseModelConfigText(text.str(), source));
  return std::optional<inference::ModelConfig>(std::move(config));
}

Status AutoCompleteServerFields(std::string_view model_name, const fs::path& first_version_dir,
                                inference::ModelConfig* config) {
  if (config->name().empty()) {
    config->set_name(std::string(model_name));
  } else if (config->name() != model_name) {
    return Status::InvalidArgument(
        fmt::format("model '{}': {} names the model '{}', but the model directory is '{}'",
                    model_name, kConfigFileName, config->name(), model_name));
  }
  if (config->platform().empty() && config->backend().empty()) {
    const std::string file = config->default_model_filename().empty()
                                 ? std::string(kOnnxModelFileName)
                                 : config->default_model_filename();
    std::error_code ec;
    const bool found = !first_version_dir.empty() && fs::exists(first_version_dir / file, ec);
    if (!found) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': cannot tell the model's platform: {} sets neither platform nor backend, "
          "and version directory '{}' has no '{}' (kiln serves ONNX models)",
          model_name, kConfigFileName, first_version_dir.filename().string(), file));
    }
    config->set_platform(std::string(kOnnxPlatform));
    config->set_backend(std::string(kOnnxBackend));
  } else if (config->platform().empty() && config->backend() == kOnnxBackend) {
    config->set_platform(std::string(kOnnxPlatform));
  } else if (config->backend().empty() && config->platform() == kOnnxPlatform) {
    config->set_backend(std::string(kOnnxBackend));
  }
  if (config->platform() != kOnnxPlatform || config->backend() != kOnnxBackend) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': platform '{}' / backend '{}' is not supported: kiln serves ONNX models "
        "(platform '{}', backend '{}')",
        model_name, config->platform(), config->backend(), kOnnxPlatform, kOnnxBackend));
  }
  if (config->default_model_filename().empty()) {
    config->set_default_model_filename(std::string(kOnnxModelFileName));
  }
  return Status::OK();
}

bool GraphSupportsBatching(const Graph& graph) {
  const auto batchable = [&](int id) {
    const ValueType& t = graph.value(id).type;
    return t.has_shape && !t.dims.empty() && DimIsDynamic(t.dims[0]);
  };
  if (graph.inputs.empty() && graph.outputs.empty()) return false;
  return std::all_of(graph.inputs.begin(), graph.inputs.end(), batchable) &&
         std::all_of(graph.outputs.begin(), graph.outputs.end(), batchable);
}

Status AutoCompleteFromGraph(const Graph& graph, int default_max_batch_size,
                             inference::ModelConfig* config) {
  if (config->input_size() > 0 && config->output_size() > 0) return Status::OK();
  const std::string& model = config->name();
  const bool can_batch = GraphSupportsBatching(graph);
  if (can_batch && config->max_batch_size() == 0) {
    config->set_max_batch_size(default_max_batch_size);
  } else if (!can_batch && config->max_batch_size() > 0) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': max_batch_size is {} but the model cannot batch: every input and output "
        "needs a dynamic first dimension; set max_batch_size: 0",
        model, config->max_batch_size()));
  }
  const bool batching = config->max_batch_size() > 0;

  if (config->input_size() == 0) {
    for (int id : graph.inputs) config->add_input()->set_name(graph.value(id).name);
  }
  if (config->output_size() == 0) {
    for (int id : graph.outputs) config->add_output()->set_name(graph.value(id).name);
  }
  for (inference::ModelInput& in : *config->mutable_input()) {
    const int id = FindGraphIo(graph, graph.inputs, in.name());
    if (id < 0) continue;  // reported by ValidateConfigAgainstGraph
    KILN_RETURN_IF_ERROR(FillTensorFromGraph(graph, id, batching, "input", model, &in));
  }
  for (inference::ModelOutput& out : *config->mutable_output()) {
    const int id = FindGraphIo(graph, graph.outputs, out.name());
    if (id < 0) continue;
    KILN_RETURN_IF_ERROR(FillTensorFromGraph(graph, id, batching, "output", model, &out));
  }
  // The reference backend gives a batching model without a scheduler the dynamic batcher, with
  // preferred_batch_size [max_batch_size] and no delay.
  if (config->max_batch_size() > 1 && !config->has_dynamic_batching() &&
      !config->has_sequence_batching() && !config->has_ensemble_scheduling()) {
    config->mutable_dynamic_batching()->add_preferred_batch_size(config->max_batch_size());
  }
  return Status::OK();
}

Status NormalizeModelConfig(inference::ModelConfig* config, int default_instance_count) {
  KILN_CHECK(!config->name().empty(), "NormalizeModelConfig before the name is set");
  KILN_CHECK(default_instance_count >= 1, "default instance count ", default_instance_count);
  if (!config->has_version_policy()) {
    config->mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
  if (config->instance_group_size() == 0) {
    ModelInstanceGroup* g = config->add_instance_group();
    g->set_name(config->name());
    g->set_kind(ModelInstanceGroup::KIND_CPU);
    g->set_count(default_instance_count);
    return Status::OK();
  }
  for (int i = 0; i < config->instance_group_size(); ++i) {
    ModelInstanceGroup* g = config->mutable_instance_group(i);
    if (g->name().empty()) g->set_name(fmt::format("{}_{}", config->name(), i));
    if (g->kind() == ModelInstanceGroup::KIND_AUTO) g->set_kind(ModelInstanceGroup::KIND_CPU);
    if (g->count() == 0) g->set_count(default_instance_count);
  }
  return Status::OK();
}

Status ValidateRolloutConfig(const inference::ModelConfig& config) {
  const std::string& model = config.name();
  const inference::KilnRollout& r = config.rollout();
  std::set<int64_t> arms;
  uint64_t total = 0;
  for (const inference::KilnRollout::Arm& arm : r.split()) {
    if (arm.version() < 1) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': rollout split names version {}; versions are >= 1", model, arm.version()));
    }
    if (!arms.insert(arm.version()).second) {
      return Status::InvalidArgument(
          fmt::format("model '{}': rollout split names version {} twice", model, arm.version()));
    }
    total += arm.weight();
  }
  if (!arms.empty() && total != 100) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': rollout split weights sum to {}, not 100 (each weight is a percentage)", model,
        total));
  }
  if (!r.sticky_header().empty()) {
    if (arms.empty()) {
      return Status::InvalidArgument(
          fmt::format("model '{}': rollout sticky_header '{}' needs a split to stick to", model,
                      r.sticky_header()));
    }
    for (char c : r.sticky_header()) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) {
        return Status::InvalidArgument(fmt::format(
            "model '{}': rollout sticky_header '{}' must be a lowercase header name (a-z, 0-9, "
            "'-', '_'), as gRPC metadata keys are",
            model, r.sticky_header()));
      }
    }
  }
  if (r.has_shadow()) {
    if (r.shadow().version() < 1) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': rollout shadow version must be >= 1, got {}", model, r.shadow().version()));
    }
    if (!(r.shadow().fraction() > 0 && r.shadow().fraction() <= 1)) {
      return Status::InvalidArgument(
          fmt::format("model '{}': rollout shadow fraction must be in (0, 1], got {}", model,
                      r.shadow().fraction()));
    }
  }
  const bool ensemble = IsEnsembleConfig(config);
  if (ensemble && (r.has_shadow() || r.precision_variants_size() > 0)) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': an ensemble takes a rollout split only (shadow traffic and precision "
        "variants belong on its composing models)",
        model));
  }
  std::set<std::string> variants;
  for (const std::string& p : r.precision_variants()) {
    if (p != "fp32" && p != "fp16" && p != "bf16" && p != "int8") {
      return Status::InvalidArgument(fmt::format(
          "model '{}': rollout precision variant '{}' is not one of fp32, fp16, bf16, int8", model,
          p));
    }
    if (p == config.optimization().precision()) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': rollout precision variant '{}' is the model's own precision", model, p));
    }
    if (p == "int8" && config.optimization().calibration_dir().empty()) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': the int8 precision variant needs optimization calibration_dir", model));
    }
    if (!variants.insert(p).second) {
      return Status::InvalidArgument(
          fmt::format("model '{}': rollout precision variant '{}' is listed twice", model, p));
    }
  }
  if (!r.best_effort_precision().empty() && !variants.contains(r.best_effort_precision())) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': rollout best_effort_precision '{}' is not one of its precision_variants",
        model, r.best_effort_precision()));
  }
  if (r.overload_queue_us() > 0 && variants.empty()) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': rollout overload_queue_us needs precision_variants to move requests to",
        model));
  }
  return Status::OK();
}

Status ValidateModelConfig(const inference::ModelConfig& config) {
  const std::string& model = config.name();
  if (model.empty()) return Status::InvalidArgument("model configuration has no name");
  if (config.max_batch_size() < 0) {
    return Status::InvalidArgument(fmt::format("model '{}': max_batch_size must be >= 0, got {}",
                                               model, config.max_batch_size()));
  }
  if (config.input_size() == 0) {
    return Status::InvalidArgument(fmt::format("model '{}': the config lists no inputs", model));
  }
  if (config.output_size() == 0) {
    return Status::InvalidArgument(fmt::format("model '{}': the config lists no outputs", model));
  }
  std::set<std::string> seen_inputs;
  for (const inference::ModelInput& in : config.input()) {
    KILN_RETURN_IF_ERROR(ValidateTensorConfig(config, in, "input", &seen_inputs));
  }
  std::set<std::string> seen_outputs;
  for (const inference::ModelOutput& out : config.output()) {
    KILN_RETURN_IF_ERROR(ValidateTensorConfig(config, out, "output", &seen_outputs));
  }
  const inference::ModelOptimizationPolicy& opt = config.optimization();
  if (!opt.precision().empty() && opt.precision() != "fp32" && opt.precision() != "int8" &&
      opt.precision() != "fp16" && opt.precision() != "bf16") {
    return Status::InvalidArgument(
        fmt::format("model '{}': optimization precision '{}' is not one of fp32, fp16, bf16, int8",
                    model, opt.precision()));
  }
  if (opt.precision() == "int8" && opt.calibration_dir().empty()) {
    return Status::InvalidArgument(
        fmt::format("model '{}': optimization precision int8 needs a calibration_dir", model));
  }
  if (!opt.calibration_method().empty() && opt.calibration_method() != "minmax" &&
      opt.calibration_method() != "percentile" && opt.calibration_method() != "entropy") {
    return Status::InvalidArgument(fmt::format(
        "model '{}': optimization calibration_method '{}' is not one of minmax, percentile, "
        "entropy",
        model, opt.calibration_method()));
  }
  const inference::ModelVersionPolicy& policy = config.version_policy();
  if (policy.has_latest() && policy.latest().num_versions() == 0) {
    return Status::InvalidArgument(
        fmt::format("model '{}': version_policy latest needs num_versions >= 1", model));
  }
  if (policy.has_specific() && policy.specific().versions_size() == 0) {
    return Status::InvalidArgument(
        fmt::format("model '{}': version_policy specific lists no versions", model));
  }
  KILN_RETURN_IF_ERROR(ValidateRolloutConfig(config));
  // An ensemble's own rules (repo/ensemble.h): its steps' wiring; no instance groups.
  if (IsEnsembleConfig(config)) return ValidateEnsembleConfig(config);
  return ValidateInstanceGroups(config);
}

Status ValidateInstanceGroups(const inference::ModelConfig& config) {
  const std::string& model = config.name();
  for (const ModelInstanceGroup& g : config.instance_group()) {
    if (g.count() < 0) {
      return Status::InvalidArgument(
          fmt::format("model '{}': instance_group '{}' count must be >= 1, got {}", model, g.name(),
                      g.count()));
    }
    if (g.gpus_size() > 0 && g.kind() != ModelInstanceGroup::KIND_GPU) {
      return Status::InvalidArgument(
          fmt::format("model '{}': instance_group '{}' of kind {} must not list gpus", model,
                      g.name(), ModelInstanceGroup::Kind_Name(g.kind())));
    }
    for (int gpu : g.gpus()) {
      if (gpu < 0) {
        return Status::InvalidArgument(
            fmt::format("model '{}': instance_group '{}' lists GPU {}; GPUs are numbered from 0",
                        model, g.name(), gpu));
      }
    }
  }
  return Status::OK();
}

Status ValidateConfigAgainstGraph(const inference::ModelConfig& config, const Graph& graph) {
  const std::string& model = config.name();
  for (const inference::ModelInput& in : config.input()) {
    const int id = FindGraphIo(graph, graph.inputs, in.name());
    if (id < 0) {
      std::vector<std::string> names;
      for (int g : graph.inputs) names.push_back("'" + graph.value(g).name + "'");
      return Status::InvalidArgument(fmt::format(
          "model '{}': config input '{}' is not an input of the model (model inputs: {})", model,
          in.name(), fmt::join(names, ", ")));
    }
    KILN_RETURN_IF_ERROR(CheckAgainstGraphValue(
        config, "input", in.name(), in.data_type(),
        ModelSideShape(config, in.dims(), in.has_reshape(), in.reshape(), in.allow_ragged_batch()),
        graph.value(id)));
  }
  for (int id : graph.inputs) {
    const std::string& name = graph.value(id).name;
    const bool listed =
        std::any_of(config.input().begin(), config.input().end(),
                    [&](const inference::ModelInput& in) { return in.name() == name; });
    if (!listed) {
      return Status::InvalidArgument(fmt::format(
          "model '{}': model input '{}' is missing from the config's inputs", model, name));
    }
  }
  for (const inference::ModelOutput& out : config.output()) {
    const int id = FindGraphIo(graph, graph.outputs, out.name());
    if (id < 0) {
      std::vector<std::string> names;
      for (int g : graph.outputs) names.push_back("'" + graph.value(g).name + "'");
      return Status::InvalidArgument(fmt::format(
          "model '{}': config output '{}' is not an output of the model (model outputs: {})", model,
          out.name(), fmt::join(names, ", ")));
    }
    KILN_RETURN_IF_ERROR(CheckAgainstGraphValue(
        config, "output", out.name(), out.data_type(),
        ModelSideShape(config, out.dims(), out.has_reshape(), out.reshape()), graph.value(id)));
  }
  return Status::OK();
}

Result<GraphOptimizationConfig> GraphOptimizationFromConfig(const inference::ModelConfig& config) {
  GraphOptimizationConfig out;
  const int level = config.optimization().graph().level();
  if (level < -1 || level > 1) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': optimization.graph.level must be -1 (no graph optimization), 0 or 1 (every "
        "pass), got {}",
        config.name(), level));
  }
  out.enabled = level != -1;
  auto it = config.parameters().find(std::string(kDisabledPassesParameter));
  if (it != config.parameters().end()) {
    for (std::string_view rest = it->second.string_value(); !rest.empty();) {
      const size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      if (name.empty()) {
        return Status::InvalidArgument(
            fmt::format("model '{}': parameter '{}' has an empty pass name in '{}'", config.name(),
                        kDisabledPassesParameter, it->second.string_value()));
      }
      out.disabled_passes.emplace_back(name);
    }
  }
  return out;
}

Result<int> GpuStreamsFromConfig(const inference::ModelConfig& config) {
  auto it = config.parameters().find(std::string(kGpuStreamsParameter));
  if (it == config.parameters().end()) return kDefaultGpuStreams;
  const std::string& text = it->second.string_value();
  int streams = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), streams);
  if (ec != std::errc() || end != text.data() + text.size() || streams < 1 || streams > 8) {
    return Status::InvalidArgument(
        fmt::format("model '{}': parameter '{}' must be a number of streams from 1 to 8, got '{}'",
                    config.name(), kGpuStreamsParameter, text));
  }
  return streams;
}

Result<int> IntraOpThreadsFromConfig(const inference::ModelConfig& config) {
  int threads = 0;
  std::string_view from;
  for (std::string_view key : {kIntraOpThreadsParameter, kOrtIntraOpThreadsParameter}) {
    auto it = config.parameters().find(std::string(key));
    if (it == config.parameters().end()) continue;
    const std::string& text = it->second.string_value();
    const int min = key == kOrtIntraOpThreadsParameter ? 0 : 1;
    int n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < min || n > 1024) {
      return Status::InvalidArgument(
          fmt::format("model '{}': parameter '{}' must be a thread count from {} to 1024, got '{}'",
                      config.name(), key, min, text));
    }
    if (n == 0) continue;  // ONNX Runtime's "default"
    if (threads != 0 && n != threads) {
      return Status::InvalidArgument(
          fmt::format("model '{}': parameters '{}' ({}) and '{}' ({}) disagree", config.name(),
                      from, threads, key, n));
    }
    threads = n;
    from = key;
  }
  return threads;
}

std::vector<std::string> UnimplementedConfigFields(const inference::ModelConfig& config) {
  std::vector<std::string> fields;
  const auto add = [&](std::string f) {
    if (std::find(fields.begin(), fields.end(), f) == fields.end()) fields.push_back(std::move(f));
  };
  if (!config.runtime().empty()) add("runtime");
  if (config.has_sequence_batching()) add("sequence_batching");
  for (const inference::ModelEnsembling::Step& step : config.ensemble_scheduling().step()) {
    if (!step.model_namespace().empty()) add("ensemble_scheduling.step.model_namespace");
  }
  if (config.has_optimization()) {
    // graph.level and kiln's quantization fields (model_manager.cc) are acted on.
    const inference::ModelOptimizationPolicy& o = config.optimization();
    if (o.priority() != inference::ModelOptimizationPolicy::PRIORITY_DEFAULT) {
      add("optimization.priority");
    }
    if (o.has_cuda()) add("optimization.cuda");
    if (o.has_execution_accelerators()) add("optimization.execution_accelerators");
    if (o.has_input_pinned_memory()) add("optimization.input_pinned_memory");
    if (o.has_output_pinned_memory()) add("optimization.output_pinned_memory");
    if (o.gather_kernel_buffer_threshold() != 0) add("optimization.gather_kernel_buffer_threshold");
    if (o.eager_batching()) add("optimization.eager_batching");
  }
  if (config.batch_input_size() > 0) add("batch_input");
  if (config.batch_output_size() > 0) add("batch_output");
  for (const ModelInstanceGroup& g : config.instance_group()) {
    if (g.has_rate_limiter()) add("instance_group.rate_limiter");
    if (g.secondary_devices_size() > 0) add("instance_group.secondary_devices");
    if (g.profile_size() > 0) add("instance_group.profile");
    if (g.passive()) add("instance_group.passive");
    if (!g.host_policy().empty()) add("instance_group.host_policy");
  }
  for (const inference::ModelInput& in : config.input()) {
    if (in.format() != inference::ModelInput::FORMAT_NONE) add("input.format");
    if (in.is_shape_tensor()) add("input.is_shape_tensor");
    if (in.optional()) add("input.optional (the input is required)");
    if (in.is_non_linear_format_io()) add("input.is_non_linear_format_io");
  }
  for (const inference::ModelOutput& out : config.output()) {
    if (out.is_shape_tensor()) add("output.is_shape_tensor");
    if (out.is_non_linear_format_io()) add("output.is_non_linear_format_io");
  }
  if (!config.cc_model_filenames().empty()) add("cc_model_filenames");
  if (!config.metric_tags().empty()) add("metric_tags");
  // kiln's own parameters, and a kiln_image model's steps (repo/image_model.h), are acted on.
  static constexpr std::string_view kImageParameters[] = {"color", "resize", "filter",    "crop",
                                                          "mean",  "std",    "max_pixels"};
  const bool image = config.backend() == "kiln_image" || config.platform() == "kiln_image";
  for (const auto& [key, value] : config.parameters()) {
    if (key == kDisabledPassesParameter || key == kGpuStreamsParameter ||
        key == kIntraOpThreadsParameter || key == kOrtIntraOpThreadsParameter) {
      continue;
    }
    if (image && std::find(std::begin(kImageParameters), std::end(kImageParameters), key) !=
                     std::end(kImageParameters)) {
      continue;
    }
    add("parameters." + key);
  }
  if (config.has_model_operations()) add("model_operations");
  if (config.model_transaction_policy().decoupled()) add("model_transaction_policy.decoupled");
  if (config.has_model_repository_agents()) add("model_repository_agents");
  if (config.has_model_metrics()) add("model_metrics");
  return fields;
}

ModelSignature MakeModelSignature(const inference::ModelConfig& config) {
  ModelSignature sig;
  sig.name = config.name();
  sig.platform = config.platform();
  sig.backend = config.backend();
  sig.max_batch_size = config.max_batch_size();
  for (const inference::ModelInput& in : config.input()) {
    sig.inputs.push_back({in.name(), FromConfigDataType(in.data_type()),
                          std::vector<int64_t>(in.dims().begin(), in.dims().end())});
  }
  for (const inference::ModelOutput& out : config.output()) {
    sig.outputs.push_back({out.name(), FromConfigDataType(out.data_type()),
                           std::vector<int64_t>(out.dims().begin(), out.dims().end())});
  }
  return sig;
}

Result<std::vector<int64_t>> MapReshape(std::span<const int64_t> from,
                                        std::span<const int64_t> actual,
                                        std::span<const int64_t> to) {
  if (from.size() != actual.size()) {
    return Status::InvalidArgument(
        fmt::format("shape {} does not conform to {}", DimsToString(actual), DimsToString(from)));
  }
  std::vector<int64_t> variable;
  int64_t actual_count = 1;
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == -1) variable.push_back(actual[i]);
    actual_count *= actual[i];
  }
  std::vector<int64_t> out(to.begin(), to.end());
  size_t next = 0;
  int64_t out_count = 1;
  for (int64_t& d : out) {
    if (d == -1) {
      if (next >= variable.size()) break;
      d = variable[next++];
    }
    out_count *= d;
  }
  if (next != variable.size() || std::count(out.begin(), out.end(), -1) != 0 ||
      out_count != actual_count) {
    return Status::InvalidArgument(fmt::format("cannot reshape {} (pattern {}) to pattern {}",
                                               DimsToString(actual), DimsToString(from),
                                               DimsToString(to)));
  }
  return out;
}

}  // namespace kiln
