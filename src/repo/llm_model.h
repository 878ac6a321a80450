// SPDX-License-Identifier: Apache-2.0
#pragma once
// LlmModel: a generative model version served with continuous batching (docs/generation.md).
// It owns the decoder (llm::Model, the weights memory-mapped), the engine and its paged KV
// cache, and a GenScheduler (sched/gen_scheduler.h) whose one thread runs the engine steps. This
// file's executor is the model side of that loop: it keeps each sequence's tokens, block table,
// sampler, detokenizer and stop-string filter, samples the next token of every sequence whose
// chunk wanted logits, and streams the new text to the request's GenerationSink.
//
//   KILN_ASSIGN_OR_RETURN(LlmServingOptions o, LlmOptionsFromConfig(config));
//   KILN_ASSIGN_OR_RETURN(auto model, LlmModel::Create(1, config, "repo/m/1/model.gguf", o,
//                                                      instance_options));
//   model->Generate(std::move(request), sink);   // chunks, then Finish
//   model->Shutdown();                           // drain (up to the drain limit), then cancel
//
// Repository layout: <repo>/<model>/<version>/model.gguf, or a Hugging Face checkpoint
// directory (config.json, *.safetensors, tokenizer.json) as the version directory itself. No
// config.pbtxt is needed; one with `backend: "kiln_llm"` carries the parameters below.
//
// Thread safety: every public method is thread-safe.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "base/result.h"
#include "repo/model_config.pb.h"
#include "repo/served_model.h"
#include "sched/gen_policy.h"
#include "sched/gen_request.h"
#include "sched/instance_options.h"

namespace kiln {

inline constexpr std::string_view kLlmBackend = "kiln_llm";
inline constexpr std::string_view kGgufModelFileName = "model.gguf";

// What a generative model's config says, with defaults filled in. Parameters (config.pbtxt
// `parameters { key: "..." value { string_value: "..." } }`):
//   context_length           longest sequence (prompt + output); default: the model's
//   kv_cache_bytes           KV cache budget; default: llm::KvCache::DefaultBudgetBytes() (a
//                            share of free memory), at most what max_num_seqs sequences at
//                            full context need
//   kv_cache_dtype           "f16" (default), "f32" or "bf16"
//   block_size               tokens per KV block (default 16)
//   max_num_seqs             running sequences at most (default 64)
//   max_num_batched_tokens   tokens per engine step (default 512)
//   enable_chunked_prefill   "true" (default) / "false"
//   enable_prefix_caching    "true" (default) / "false"
//   batching                 "continuous" (default) or "static" (request-level batching: a
//                            batch runs until its longest member finishes; for comparison)
//   max_stream_backlog       chunks a client may leave unread before its stream is cut (256)
//   temperature, top_p, top_k, max_tokens   default sampling parameters of requests that do not
//                            set them (defaults: 1.0, 1.0, 0 = all, until the context is full)
// and dynamic_batching's priority_levels, default_priority_level, default_queue_policy
// { max_queue_size, default_timeout_microseconds } (the waiting queue: a request past
// max_queue_size is answered 429; 0 = unbounded; a timeout of 0 = none). Without a
// default_queue_policy the queue holds max(256, 4 x max_num_seqs) sequences.
struct LlmServingOptions {
  int64_t context_length = 0;
  int64_t kv_cache_bytes = 0;
  std::string kv_cache_dtype = "f16";
  int block_size = 16;
  bool prefix_caching = true;
  GenPolicyOptions policy;
  // batching "static_padded" (policy.static_batching too): a sequence that has finished keeps
  // running as a padding row of its batch (fed its last token, nothing sent) until the batch's
  // longest member finishes, as a request-level framework computes its fixed-shape batch.
  bool pad_static_batches = false;
  int64_t default_timeout_us = 0;
  size_t max_stream_backlog = 256;
  // Defaults for what a request leaves unset (temperature, top_p, top_k, max_tokens).
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  int64_t max_tokens = -1;
  // How long Shutdown lets running sequences finish before cancelling them (ns).
  int64_t drain_timeout_ns = 30'000'000'000;
};

// INVALID_ARGUMENT naming the parameter and the model for a value that does not parse or is
// out of range, or an unknown parameter key.
Result<LlmServingOptions> LlmOptionsFromConfig(const inference::ModelConfig& config);

// Whether `version_dir` holds a generative model: a model.gguf file (or the config's
// default_model_filename ending in .gguf), or a Hugging Face checkpoint (config.json and at
// least one .safetensors file).
bool IsGenerativeModelDir(const std::filesystem::path& version_dir,
                          const inference::ModelConfig& config);

// Fills the config of a generative model: platform and backend "kiln_llm", the tensor
// signature of Triton's LLM convention (inputs text_input BYTES [1], stream BOOL [1],
// sampling_parameters BYTES [1], exclude_input_in_output BOOL [1], the last three optional;
// output text_output BYTES [-1]), max_batch_size 0, decoupled transactions.
// INVALID_ARGUMENT when the config declares inputs or outputs of its own that differ.
Status AutoCompleteLlmConfig(inference::ModelConfig* config);

// The path llm::Model::Load reads for one version: <dir>/<default_model_filename or
// model.gguf> when that file exists, else the directory (a Hugging Face checkpoint).
std::filesystem::path LlmModelPath(const std::filesystem::path& version_dir,
                                   const inference::ModelConfig& config);

class LlmModel final : public ServedModel {
 public:
  // Loads the weights (memory-mapped), allocates the KV cache, starts the scheduler thread.
  // Errors: the loader's (unsupported architecture or tensor type, missing tensor, ...), a
  // context longer than the model allows, a KV budget too small for one full-length sequence
  // (naming the bytes needed), INTERNAL when the thread cannot start.
  static Result<std::shared_ptr<LlmModel>> Create(int64_t version,
                                                  const inference::ModelConfig& config,
                                                  const std::filesystem::path& model_path,
                                                  const LlmServingOptions& options,
                                                  const InstanceOptions& instance_options);
  ~LlmModel() override;
  LlmModel(const LlmModel&) = delete;
  LlmModel& operator=(const LlmModel&) = delete;

  const std::string& name() const override;
  int64_t version() const override;
  const ModelSignature& signature() const override;
  const inference::ModelConfig* model_config() const override;
  bool generative() const override { return true; }
  void Generate(std::unique_ptr<GenerateRequest> request,
                std::shared_ptr<GenerationSink> sink) override;
  // Tensor requests reach a generative model through the server's LLM convention
  // (server/gen_infer.h), which calls Generate; a direct Infer is UNIMPLEMENTED.
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override;
  using LoadedModel::Infer;
  ModelStatistics Statistics() const override;
  size_t PendingRequestCount() const override;
  double LoadDurationSeconds() const override;
  uint64_t WeightBytes() const override;
  void Shutdown() override;
  void ResetStatistics() override;
  void SetLoadDuration(uint64_t ns) override;

  // The engine's context length and the KV cache's size, for tests and logs.
  int64_t context_length() const;
  int64_t kv_blocks() const;

  class Core;  // engine, scheduler and executor; public only for the implementation's helpers

 private:
  LlmModel(int64_t version, inference::ModelConfig config, std::shared_ptr<Core> core);

  const int64_t version_;
  const inference::ModelConfig config_;
  ModelSignature signature_;
  std::shared_ptr<Core> core_;
  std::atomic<uint64_t> load_duration_ns_{0};
};

}  // namespace kiln
