// SPDX-License-Identifier: Apache-2.0
#pragma once
// Model configuration: reading config.pbtxt, completing it from the model's graph, checking it
// against that graph, and turning it into the plain ModelSignature the server reports.
//
// Every step is a pure function over an inference::ModelConfig (repo/model_config.proto), so
// each can be tested without files, threads or an ONNX importer. The model manager chains them:
//
//   KILN_ASSIGN_OR_RETURN(std::optional<inference::ModelConfig> file, ReadModelConfigFile(dir));
//   inference::ModelConfig config = file.value_or(inference::ModelConfig());
//   KILN_RETURN_IF_ERROR(AutoCompleteServerFields(name, first_version_dir, &config));
//   KILN_RETURN_IF_ERROR(AutoCompleteFromGraph(*graph, kDefaultMaxBatchSize, &config));
//   KILN_RETURN_IF_ERROR(NormalizeModelConfig(&config));
//   KILN_RETURN_IF_ERROR(ValidateModelConfig(config));
//   KILN_RETURN_IF_ERROR(ValidateConfigAgainstGraph(config, *graph));
//   for (const std::string& f : UnimplementedConfigFields(config)) ...   // one warning per model
//   ModelSignature sig = MakeModelSignature(config);
//
// What kiln acts on today: name, platform, backend, version_policy, max_batch_size, input,
// output (name, data_type, dims, reshape, allow_ragged_batch, and kiln's padding / crop
// extension), dynamic_batching, ensemble_scheduling (repo/ensemble.h), instance_group kind, count
// and gpus (KIND_GPU on the CUDA backend), default_model_filename, model_warmup,
// response_cache, optimization (graph level, kiln's precision and calibration fields), kiln's
// rollout extension (repo/rollout.h) and the kiln.* parameters below. Everything else parses
// and is kept, but UnimplementedConfigFields names it so the manager can warn.
//
// Thread safety: all functions are reentrant; they touch only their arguments.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "graph/ir.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "tensor/dtype.h"

namespace kiln {

inline constexpr std::string_view kConfigFileName = "config.pbtxt";
inline constexpr std::string_view kOnnxPlatform = "onnxruntime_onnx";
inline constexpr std::string_view kOnnxBackend = "onnxruntime";
inline constexpr std::string_view kOnnxModelFileName = "model.onnx";
// max_batch_size given to a batchable model whose config leaves it 0 (the reference backend's
// default-max-batch-size).
inline constexpr int kDefaultMaxBatchSize = 4;

// Config enum <-> kiln DataType (same numbering; TYPE_INVALID <-> kInvalid).
DataType FromConfigDataType(inference::DataType dtype);
inference::DataType ToConfigDataType(DataType dtype);

// Parses protobuf text format. `source` names the text in errors ("add_sub/config.pbtxt").
// INVALID_ARGUMENT on any syntax error, unknown field, unknown enum value or wrong value type,
// with every problem as "source:line:column: problem" (1-based line and column).
Result<inference::ModelConfig> ParseModelConfigText(std::string_view text, std::string_view source);

// Reads <model_dir>/config.pbtxt. nullopt when the file does not exist; INVALID_ARGUMENT when it
// does not parse; UNAVAILABLE when it cannot be read.
Result<std::optional<inference::ModelConfig>> ReadModelConfigFile(
    const std::filesystem::path& model_dir);

// Server-side completion (section 3.13 step 1): name from the directory (a different configured
// name is an error), then platform/backend/default_model_filename. With neither platform nor
// backend set, the model is ONNX when `first_version_dir` holds default_model_filename (or
// model.onnx), as a file or as a directory containing model.onnx. Only ONNX is supported:
// any other platform or backend is INVALID_ARGUMENT. `first_version_dir` may be empty when the
// model has no version directory (then platform detection fails with a clear error).
Status AutoCompleteServerFields(std::string_view model_name,
                                const std::filesystem::path& first_version_dir,
                                inference::ModelConfig* config);

// True when every graph input and output has rank >= 1 and a dynamic (unknown or symbolic)
// first dimension, i.e. the model can take an implicit batch dimension.
bool GraphSupportsBatching(const Graph& graph);

// Backend completion from the graph (section 3.13 step 2). Does nothing when the config already
// lists both inputs and outputs. Otherwise: sets max_batch_size to `default_max_batch_size` when
// the graph supports batching and it is 0; fails when it does not but max_batch_size > 0; fills
// an empty input / output list from the graph (dims without the batch dim, -1 for dynamic dims;
// empty dims become [1] with reshape { shape: [] }); fills data_type and dims of listed tensors
// that leave them unset. A model with max_batch_size > 1 and no scheduling choice gets
// dynamic_batching { preferred_batch_size: [max_batch_size] } (the reference backend's default).
Status AutoCompleteFromGraph(const Graph& graph, int default_max_batch_size,
                             inference::ModelConfig* config);

// Normalization (section 3.13 step 3, the parts kiln uses): version policy latest 1 when absent;
// instance groups: one CPU group named after the model when none, unnamed group i becomes
// "<model>_<i>", KIND_AUTO becomes KIND_CPU, count 0 (unset) becomes `default_instance_count`
// (>= 1; the reference server uses 2 for ONNX models on CPU, kiln 1 unless told otherwise).
// REQUIRES: config->name() is set (AutoCompleteServerFields ran).
Status NormalizeModelConfig(inference::ModelConfig* config, int default_instance_count = 1);

// Checks the config by itself. INVALID_ARGUMENT naming the model and the field for: negative
// max_batch_size; no inputs or outputs; empty, duplicate or TYPE_INVALID tensors; dims other
// than -1 or >= 0; reshape incompatible with dims; empty latest/specific version policies;
// gpus listed on a group that is not KIND_GPU, or negative; negative instance counts. An
// ensemble (platform "ensemble" or ensemble_scheduling) is checked by ValidateEnsembleConfig
// instead of the instance-group rules (repo/ensemble.h). (Whether the GPUs exist, and an
// ensemble's composing models, are the load's checks.)
Status ValidateModelConfig(const inference::ModelConfig& config);
// The instance_group part of ValidateModelConfig: INVALID_ARGUMENT for a negative count, a
// negative GPU, or gpus listed for a group that is not KIND_GPU.
Status ValidateInstanceGroups(const inference::ModelConfig& config);

// Checks a config against the graph it will run. Every config input must be a graph input and
// every graph input must be in the config (the runtime must feed all of them); every config
// output must be a graph output. Datatypes must be equal and shapes compatible: the config shape
// is [batch] + dims (or + reshape.shape) when max_batch_size > 0 ([-1] for an allow_ragged_batch
// input, which the model receives flat); ranks must match; a graph dim
// that is unknown or symbolic accepts anything, a known one requires the config dim to be equal
// or -1; when batching, the graph's first dim must be dynamic. Errors are INVALID_ARGUMENT
// naming the model, the tensor and both shapes.
Status ValidateConfigAgainstGraph(const inference::ModelConfig& config, const Graph& graph);

// How kiln's graph optimizer (src/opt) treats a model, from its config:
//   optimization { graph { level: L } }   -1: no graph optimization (the graph runs as
//                                          imported, still on the fast kernels); 0 (unset) or 1:
//                                          every pass. Other levels are INVALID_ARGUMENT.
//   parameters { key: "kiln.disabled_passes" value: { string_value: "a,b" } }
//                                          optimizer passes not to run, by name (`kiln optimize
//                                          --list-passes`); an unknown name fails the load.
struct GraphOptimizationConfig {
  bool enabled = true;
  std::vector<std::string> disabled_passes;
};
inline constexpr std::string_view kDisabledPassesParameter = "kiln.disabled_passes";
Result<GraphOptimizationConfig> GraphOptimizationFromConfig(const inference::ModelConfig& config);

// Batches one KIND_GPU instance runs at once, each on a stream of its own, so that the copies of
// one batch overlap the compute of another (the multi-stream pipeline):
//   parameters { key: "kiln.gpu_streams" value: { string_value: "2" } }   1..8, default 2.
// INVALID_ARGUMENT for anything else.
inline constexpr std::string_view kGpuStreamsParameter = "kiln.gpu_streams";
inline constexpr int kDefaultGpuStreams = 2;
Result<int> GpuStreamsFromConfig(const inference::ModelConfig& config);

// Threads one session run of each CPU instance uses, for this model only (the server-wide
// --intra-op-threads otherwise; sched/instance_options.h: every instance runs that wide and at
// most budget / N instances start):
//   parameters { key: "kiln.intra_op_threads" value: { string_value: "2" } }   1..1024
// ONNX Runtime backend configs' "intra_op_thread_count" is read the same way (0 there means
// "the default", as in that backend). Returns 0 when neither is set. INVALID_ARGUMENT for
// anything else, or both set to different values.
inline constexpr std::string_view kIntraOpThreadsParameter = "kiln.intra_op_threads";
inline constexpr std::string_view kOrtIntraOpThreadsParameter = "intra_op_thread_count";
Result<int> IntraOpThreadsFromConfig(const inference::ModelConfig& config);

// Config fields that are set but not acted on yet, as dotted field paths
// ("optimization", "instance_group.rate_limiter", "output.label_filename"), each once.
std::vector<std::string> UnimplementedConfigFields(const inference::ModelConfig& config);

// kiln's rollout extension (docs/rollouts.md; part of ValidateModelConfig): split arms distinct,
// versions >= 1, weights summing to 100; a lowercase sticky_header with a split; shadow
// version >= 1 and fraction in (0, 1]; precision variants valid, distinct, not the model's own
// (int8 with a calibration_dir); best_effort_precision one of them; none of shadow or variants
// on an ensemble. INVALID_ARGUMENT naming the model and the field.
Status ValidateRolloutConfig(const inference::ModelConfig& config);

// The metadata view of a (completed) config.
ModelSignature MakeModelSignature(const inference::ModelConfig& config);

// --- shapes at inference time ---

// Maps a per-item shape between a config `dims` and a `reshape` (either direction): `from` is
// the pattern the actual shape `actual` conforms to, `to` the target pattern. Each -1 of `to`
// takes, in order, the actual size of the corresponding -1 of `from`. INVALID_ARGUMENT when the
// number of -1s differs or the element counts do not match.
Result<std::vector<int64_t>> MapReshape(std::span<const int64_t> from,
                                        std::span<const int64_t> actual,
                                        std::span<const int64_t> to);

// "[-1,16]".
std::string DimsToString(std::span<const int64_t> dims);

// A view of a repeated int64 config field (dims, reshape shape).
inline std::span<const int64_t> AsSpan(const google::protobuf::RepeatedField<int64_t>& field) {
  return {field.data(), static_cast<size_t>(field.size())};
}

}  // namespace kiln
