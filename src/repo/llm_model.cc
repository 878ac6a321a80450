// SPDX-License-Identifier: Apache-2.0
// LlmModel: the model side of continuous batching.
//
// NOTE (design). Three kinds of state, three owners:
//  - GenPolicy (inside GenScheduler) owns the order: which sequences wait, run, are preempted;
//    it knows only token counts.
//  - Core (this file) owns each sequence's content: tokens, block table, sampler, detokenizer,
//    stop filter, and the request it answers. Sequences are created by Generate (any thread)
//    under seqs_mu_ and then touched only by the scheduler's thread (Execute, the GenKvSpace
//    calls, Dropped), so their fields need no lock; the map itself is guarded.
//  - The engine and its block manager are used only from the scheduler's thread.
// A request with n choices is one sequence until its prompt is computed; the step that samples
// its first token forks n - 1 children that share the prompt's blocks (copy-on-write) and
// sample their own first token from the same logits. Sequence ids are (request number << 5) |
// choice, so a cancellation can name every choice without a lookup.
#include "repo/llm_model.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/mutex.h"
#include "llm/chat_template.h"
#include "llm/engine.h"
#include "llm/model.h"
#include "llm/prompt.h"
#include "llm/sampling.h"
#include "llm/stop_strings.h"
#include "llm/tokenizer.h"
#include "repo/model_config.h"
#include "sched/gen_scheduler.h"
#include "sched/stats.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr int kChoiceBits = 5;  // kMaxChoices <= 32
static_assert(kMaxChoices <= (1 << kChoiceBits));

GenSeqId SeqId(uint64_t request, int32_t choice) {
  return (request << kChoiceBits) | static_cast<uint64_t>(choice);
}

int64_t NowNs(const Clock& clock) { return clock.NowNs(); }

// ---- config parameters ----

Result<int64_t> ParseInt(std::string_view model, std::string_view key, std::string_view text,
                         int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return Status::InvalidArgument(
        fmt::format("model '{}': parameter '{}' must be an integer in [{}, {}], got '{}'", model,
                    key, lo, hi, text));
  }
  return v;
}

Result<float> ParseFloat(std::string_view model, std::string_view key, std::string_view text,
                         float lo, float hi) {
  float v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v >= lo && v <= hi)) {
    return Status::InvalidArgument(
        fmt::format("model '{}': parameter '{}' must be a number in [{}, {}], got '{}'", model, key,
                    lo, hi, text));
  }
  return v;
}

Result<bool> ParseBool(std::string_view model, std::string_view key, std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return Status::InvalidArgument(fmt::format(
      "model '{}': parameter '{}' must be \"true\" or \"false\", got '{}'", model, key, text));
}

}  // namespace

Result<LlmServingOptions> LlmOptionsFromConfig(const inference::ModelConfig& config) {
  constexpr int64_t kDefaultMinQueue = 256;
  LlmServingOptions o;
  const std::string& m = config.name();
  constexpr int64_t kMaxI = int64_t{1} << 50;
  for (const auto& [key, param] : config.parameters()) {
    const std::string& v = param.string_value();
    if (key == "context_length") {
      KILN_ASSIGN_OR_RETURN(o.context_length, ParseInt(m, key, v, 1, kMaxI));
    } else if (key == "kv_cache_bytes") {
      KILN_ASSIGN_OR_RETURN(o.kv_cache_bytes, ParseInt(m, key, v, 1, kMaxI));
    } else if (key == "kv_cache_dtype") {
      if (v != "f16" && v != "f32" && v != "bf16") {
        return Status::InvalidArgument(fmt::format(
            "model '{}': parameter 'kv_cache_dtype' must be f16, f32 or bf16, got '{}'", m, v));
      }
      o.kv_cache_dtype = v;
    } else if (key == "block_size") {
      KILN_ASSIGN_OR_RETURN(int64_t b, ParseInt(m, key, v, 1, 1024));
      o.block_size = static_cast<int>(b);
    } else if (key == "max_num_seqs") {
      KILN_ASSIGN_OR_RETURN(o.policy.max_num_seqs, ParseInt(m, key, v, 1, 4096));
    } else if (key == "max_num_batched_tokens") {
      KILN_ASSIGN_OR_RETURN(o.policy.max_num_batched_tokens, ParseInt(m, key, v, 1, 1 << 20));
    } else if (key == "enable_chunked_prefill") {
      KILN_ASSIGN_OR_RETURN(o.policy.chunked_prefill, ParseBool(m, key, v));
    } else if (key == "enable_prefix_caching") {
      KILN_ASSIGN_OR_RETURN(o.prefix_caching, ParseBool(m, key, v));
    } else if (key == "batching") {
      if (v != "continuous" && v != "static" && v != "static_padded") {
        return Status::InvalidArgument(fmt::format(
            "model '{}': parameter 'batching' must be continuous, static or static_padded, got "
            "'{}'",
            m, v));
      }
      o.policy.static_batching = v != "continuous";
      o.pad_static_batches = v == "static_padded";
    } else if (key == "max_stream_backlog") {
      KILN_ASSIGN_OR_RETURN(int64_t b, ParseInt(m, key, v, 1, 1 << 20));
      o.max_stream_backlog = static_cast<size_t>(b);
    } else if (key == "temperature") {
      KILN_ASSIGN_OR_RETURN(o.temperature, ParseFloat(m, key, v, 0.0f, 2.0f));
    } else if (key == "top_p") {
      KILN_ASSIGN_OR_RETURN(o.top_p, ParseFloat(m, key, v, 1e-6f, 1.0f));
    } else if (key == "top_k") {
      KILN_ASSIGN_OR_RETURN(int64_t k, ParseInt(m, key, v, 0, 1 << 24));
      o.top_k = static_cast<int32_t>(k);
    } else if (key == "max_tokens") {
      KILN_ASSIGN_OR_RETURN(o.max_tokens, ParseInt(m, key, v, 1, kMaxI));
    } else {
      return Status::InvalidArgument(fmt::format(
          "model '{}': unknown parameter '{}' for backend '{}' (known: context_length, "
          "kv_cache_bytes, kv_cache_dtype, block_size, max_num_seqs, max_num_batched_tokens, "
          "enable_chunked_prefill, enable_prefix_caching, batching, max_stream_backlog, "
          "temperature, top_p, top_k, max_tokens)",
          m, key, kLlmBackend));
    }
  }
  if (config.has_dynamic_batching()) {
    const inference::ModelDynamicBatching& db = config.dynamic_batching();
    if (db.priority_levels() > 0) {
      o.policy.priority_levels = static_cast<uint32_t>(db.priority_levels());
      o.policy.default_priority =
          static_cast<uint32_t>(db.default_priority_level() > 0 ? db.default_priority_level() : 1);
      if (o.policy.default_priority > o.policy.priority_levels) {
        return Status::InvalidArgument(
            fmt::format("model '{}': default_priority_level {} is above priority_levels {}", m,
                        o.policy.default_priority, o.policy.priority_levels));
      }
    }
    if (db.has_default_queue_policy()) {
      o.policy.max_queue_size = static_cast<size_t>(db.default_queue_policy().max_queue_size());
      o.default_timeout_us =
          static_cast<int64_t>(db.default_queue_policy().default_timeout_microseconds());
    }
  }
  if (!config.has_dynamic_batching() || !config.dynamic_batching().has_default_queue_policy()) {
    // No queue policy: a bounded queue all the same (a config may ask for an unbounded one
    // with max_queue_size 0).
    o.policy.max_queue_size =
        static_cast<size_t>(std::max<int64_t>(kDefaultMinQueue, 4 * o.policy.max_num_seqs));
  }
  return o;
}

bool IsGenerativeModelDir(const fs::path& version_dir, const inference::ModelConfig& config) {
  std::error_code ec;
  const std::string& file = config.default_model_filename();
  if (!file.empty()) {
    return file.size() > 5 && file.ends_with(".gguf") && fs::exists(version_dir / file, ec);
  }
  if (fs::is_regular_file(version_dir / kGgufModelFileName, ec)) return true;
  if (!fs::is_regular_file(version_dir / "config.json", ec)) return false;
  for (fs::directory_iterator it(version_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".safetensors") return true;
  }
  return false;
}

fs::path LlmModelPath(const fs::path& version_dir, const inference::ModelConfig& config) {
  const std::string file = config.default_model_filename().empty()
                               ? std::string(kGgufModelFileName)
                               : config.default_model_filename();
  std::error_code ec;
  if (fs::is_regular_file(version_dir / file, ec)) return version_dir / file;
  return version_dir;
}

Status AutoCompleteLlmConfig(inference::ModelConfig* config) {
  config->set_platform(std::string(kLlmBackend));
  config->set_backend(std::string(kLlmBackend));
  if (config->max_batch_size() != 0) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': a generative model batches its sequences itself; max_batch_size must be 0, "
        "got {}",
        config->name(), config->max_batch_size()));
  }
  struct Io {
    const char* name;
    inference::DataType type;
    int64_t dim;
    bool optional;
  };
  const Io inputs[] = {{"text_input", inference::TYPE_STRING, 1, false},
                       {"stream", inference::TYPE_BOOL, 1, true},
                       {"sampling_parameters", inference::TYPE_STRING, 1, true},
                       {"exclude_input_in_output", inference::TYPE_BOOL, 1, true}};
  if (config->input_size() == 0) {
    for (const Io& io : inputs) {
      inference::ModelInput* in = config->add_input();
      in->set_name(io.name);
      in->set_data_type(io.type);
      in->add_dims(io.dim);
      in->set_optional(io.optional);
    }
  } else {
    for (const inference::ModelInput& in : config->input()) {
      const auto it = std::find_if(std::begin(inputs), std::end(inputs),
                                   [&](const Io& io) { return in.name() == io.name; });
      if (it == std::end(inputs) || in.data_type() != it->type) {
        return Status::InvalidArgument(fmt::format(
            "model '{}': input '{}' is not one of a generative model's (text_input BYTES, "
            "stream BOOL, sampling_parameters BYTES, exclude_input_in_output BOOL)",
            config->name(), in.name()));
      }
    }
  }
  if (config->output_size() == 0) {
    inference::ModelOutput* out = config->add_output();
    out->set_name("text_output");
    out->set_data_type(inference::TYPE_STRING);
    out->add_dims(-1);
  } else if (config->output_size() != 1 || config->output(0).name() != "text_output" ||
             config->output(0).data_type() != inference::TYPE_STRING) {
    return Status::InvalidArgument(fmt::format(
        "model '{}': a generative model has one output, text_output BYTES", config->name()));
  }
  config->mutable_model_transaction_policy()->set_decoupled(true);
  if (config->instance_group_size() == 0) {
    inference::ModelInstanceGroup* g = config->add_instance_group();
    g->set_count(1);
    g->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------

namespace {

// One request: its sink and what its choices share.
struct GenRequestState {
  std::shared_ptr<GenerationSink> sink;
  std::shared_ptr<const Cancellation> cancellation;
  GenSamplingParams params;
  uint64_t number = 0;  // the request counter: sequence ids are SeqId(number, choice)
  int64_t prompt_len = 0;
  int64_t max_tokens = 0;  // resolved: >= 1
  int32_t open_choices = 0;
  bool done = false;  // answered (Finish called)
  GenUsage usage;
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = -1;
  int64_t first_token_ns = -1;
};

// One choice's sequence.
struct GenSequence {
  GenSeqId id = 0;
  int32_t choice = 0;
  std::shared_ptr<GenRequestState> req;
  std::vector<int32_t> tokens;  // prompt, then the sampled tokens
  llm::SequenceBlocks kv;
  std::unique_ptr<llm::Sampler> sampler;
  std::unique_ptr<llm::IncrementalDetokenizer> detok;
  std::unique_ptr<llm::StopStringFilter> stop;
  int64_t generated = 0;
  int64_t last_token_ns = -1;
  bool admitted_once = false;
  bool forked = false;    // the children of an n > 1 request exist
  bool finished = false;  // its last chunk was sent (or its request failed)
  // static_padded batching: finished (answered), still run as a padding row of its batch.
  bool padding = false;
};

}  // namespace

class LlmModel::Core final : public GenKvSpace, public GenExecutor {
 public:
  Core(std::unique_ptr<llm::Model> model, std::unique_ptr<llm::Engine> engine,
       std::unique_ptr<llm::ChatTemplate> tmpl, const LlmServingOptions& options, int threads,
       const Clock& clock, std::string name)
      : model_(std::move(model)),
        engine_(std::move(engine)),
        template_(std::move(tmpl)),
        options_(options),
        threads_(threads),
        clock_(clock),
        name_(std::move(name)),
        scheduler_(options.policy, this, this, clock) {
    const llm::Tokenizer& tok = model_->tokenizer();
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if (tok.IsEog(id)) eog_ids_.push_back(id);
    }
    const int64_t blocks = engine_->kv_cache().num_blocks();
    stats_.generation.present = true;
    stats_.generation.kv_blocks_total = blocks;
    stats_.generation.kv_block_size = engine_->kv_cache().block_size();
    stats_.generation.kv_blocks_free = blocks;
  }

  Status Start() { return scheduler_.Start(); }
  void Shutdown() { scheduler_.Shutdown(NowNs(clock_) + options_.drain_timeout_ns); }

  const llm::Model& model() const { return *model_; }
  const llm::Engine& engine() const { return *engine_; }
  int64_t queued() const { return scheduler_.stats().policy.waiting; }

  void Generate(std::unique_ptr<GenerateRequest> request, std::shared_ptr<GenerationSink> sink,
                const std::weak_ptr<Core>& self);

  ModelStatistics Statistics() const {
    const GenSchedulerStats sched = scheduler_.stats();
    MutexLock lock(stats_mu_);
    ModelStatistics out = stats_;
    out.generation.present = true;
    out.generation.running = sched.policy.running;
    out.generation.waiting = sched.policy.waiting;
    out.generation.preemptions = static_cast<uint64_t>(sched.policy.preemptions);
    out.generation.scheduler_seconds_total = static_cast<double>(sched.policy_ns) * 1e-9;
    return out;
  }
  void ResetStatistics() {
    MutexLock lock(stats_mu_);
    const GenerationStatistics g = stats_.generation;
    stats_ = ModelStatistics();
    // The gauges describe the cache, not the requests: keep them.
    stats_.generation.kv_blocks_total = g.kv_blocks_total;
    stats_.generation.kv_blocks_used = g.kv_blocks_used;
    stats_.generation.kv_blocks_free = g.kv_blocks_free;
    stats_.generation.kv_blocks_cached = g.kv_blocks_cached;
    stats_.generation.kv_block_size = g.kv_block_size;
  }

  // ---- GenKvSpace (scheduler thread) ----
  int64_t num_free_blocks() const override { return blocks().num_free_blocks(); }
  int64_t num_blocks() const override { return blocks().num_blocks(); }
  int64_t BlocksToAdmit(GenSeqId seq, int64_t new_len) const override {
    return blocks().BlocksToAdmit(Get(seq).tokens, new_len);
  }
  int64_t MatchPrefix(GenSeqId id) override {
    GenSequence& s = Get(id);
    const int64_t hit = mutable_blocks().MatchPrefix(s.tokens, &s.kv);
    if (!s.admitted_once) {
      s.admitted_once = true;
      if (s.choice == 0) s.req->usage.cached_prompt_tokens = std::min(hit, s.req->prompt_len);
    }
    return hit;
  }
  bool Reserve(GenSeqId id, int64_t new_len) override {
    return mutable_blocks().Reserve(&Get(id).kv, new_len, &copies_).ok();
  }
  void Free(GenSeqId id) override {
    GenSequence* s = Find(id);
    if (s == nullptr) return;
    mutable_blocks().Free(&s->kv);
    // A padding row freed by preemption stays in the table until its cancellation removes it
    // from the policy (Preempted).
    if (s->finished && !s->padding) Erase(id);
    SampleKvGauges();
  }
  void Fork(GenSeqId parent, GenSeqId child) override {
    mutable_blocks().Fork(Get(parent).kv, &Get(child).kv);
  }

  // ---- GenExecutor (scheduler thread) ----
  void Execute(const StepPlan& plan, std::vector<ChunkOutcome>* outcomes,
               std::vector<GenFork>* forks) override;
  void Dropped(GenSeqId seq, const Status& why) override;
  void Preempted(std::span<const GenSeqId> seqs) override;

 private:
  const llm::BlockManager& blocks() const { return engine_->kv_cache().blocks(); }
  llm::BlockManager& mutable_blocks() { return engine_->kv_cache().blocks(); }

  // The sequence `id`: null when it is not (or no longer) in the table.
  GenSequence* Find(GenSeqId id) const {
    MutexLock lock(seqs_mu_);
    const auto it = seqs_.find(id);
    return it == seqs_.end() ? nullptr : it->second.get();
  }
  // REQUIRES: the policy holds `id`, so the table does too.
  GenSequence& Get(GenSeqId id) const {
    GenSequence* s = Find(id);
    KILN_CHECK(s != nullptr, "generation sequence ", id, " is not in the sequence table");
    return *s;
  }
  void Erase(GenSeqId id) {
    MutexLock lock(seqs_mu_);
    seqs_.erase(id);
  }

  // Copies the block manager's counts into the statistics (scheduler thread).
  void SampleKvGauges();
  // Answers the whole request with an error (once) and cancels its other choices.
  void Fail(GenRequestState& req, const Status& why);
  // Appends `token` to s, streams its text, decides whether s is finished.
  void Accept(GenSequence& s, int32_t token, const llm::TokenLogprobs* lp, int64_t now);
  void FinishChoice(GenSequence& s, FinishReason reason, std::string text, GenChunk chunk);
  Result<std::vector<int32_t>> PromptIds(const GenerateRequest& r) const;

  std::unique_ptr<llm::Model> model_;
  std::unique_ptr<llm::Engine> engine_;
  std::unique_ptr<llm::ChatTemplate> template_;
  const LlmServingOptions options_;
  const int threads_;
  const Clock& clock_;
  const std::string name_;
  std::vector<int32_t> eog_ids_;  // the tokenizer's end-of-generation ids

  mutable Mutex seqs_mu_;
  std::unordered_map<GenSeqId, std::unique_ptr<GenSequence>> seqs_ KILN_GUARDED_BY(seqs_mu_);
  std::atomic<uint64_t> next_request_{1};

  mutable Mutex stats_mu_;
  ModelStatistics stats_ KILN_GUARDED_BY(stats_mu_);

  // Scheduler-thread scratch.
  std::vector<llm::BlockCopy> copies_;
  std::vector<llm::StepSequence> steps_;
  std::vector<float> logits_;
  std::vector<float> row_;

  GenScheduler scheduler_;  // last: its thread stops before the rest is destroyed
};

Result<std::vector<int32_t>> LlmModel::Core::PromptIds(const GenerateRequest& r) const {
  const llm::Tokenizer& tok = model_->tokenizer();
  if (!r.prompt_tokens.empty()) {
    for (int32_t id : r.prompt_tokens) {
      if (id < 0 || id >= tok.vocab_size()) {
        return Status::InvalidArgument(fmt::format(
            "prompt token id {} is outside the vocabulary [0, {})", id, tok.vocab_size()));
      }
    }
    return r.prompt_tokens;
  }
  if (!r.messages_json.empty()) {
    if (template_ == nullptr) {
      return Status::InvalidArgument(
          fmt::format("model '{}' has no chat template: use /v1/completions with a prompt", name_));
    }
    return llm::ChatPromptIds(*model_, *template_, r.messages_json, r.add_generation_prompt);
  }
  return tok.Encode(r.prompt, /*add_special=*/true, /*parse_special=*/false);
}

void LlmModel::Core::Generate(std::unique_ptr<GenerateRequest> request,
                              std::shared_ptr<GenerationSink> sink,
                              const std::weak_ptr<Core>& self) {
  const int64_t arrival = NowNs(clock_);
  const auto refuse = [&](const Status& s, FailureReason reason) {
    {
      MutexLock lock(stats_mu_);
      ++stats_.failures[static_cast<size_t>(reason)];
      stats_.inference.fail.Add(static_cast<uint64_t>(NowNs(clock_) - arrival));
    }
    sink->Finish(s);
  };
  if (request->cancelled())
    return refuse(Status::Cancelled("request cancelled"), FailureReason::kCanceled);
  if (request->prompt.empty() && request->prompt_tokens.empty() && request->messages_json.empty()) {
    return refuse(Status::InvalidArgument("the prompt is empty"), FailureReason::kInvalid);
  }
  Result<std::vector<int32_t>> ids = PromptIds(*request);
  if (!ids.ok()) return refuse(ids.status(), FailureReason::kInvalid);
  if (ids->empty()) {
    return refuse(Status::InvalidArgument("the prompt is empty (it has no tokens)"),
                  FailureReason::kInvalid);
  }
  GenSamplingParams& p = request->sampling;
  const int64_t vocab = model_->config().vocab;
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab) {
      return refuse(Status::InvalidArgument(fmt::format(
                        "logit_bias names token {}, outside the vocabulary [0, {})", id, vocab)),
                    FailureReason::kInvalid);
    }
  }
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab) {
      return refuse(Status::InvalidArgument(fmt::format(
                        "stop_token_ids has token {}, outside the vocabulary [0, {})", id, vocab)),
                    FailureReason::kInvalid);
    }
  }
  const int64_t ctx = engine_->context_length();
  const int64_t prompt_len = static_cast<int64_t>(ids->size());
  if (prompt_len >= ctx) {
    return refuse(Status::InvalidArgument(fmt::format(
                      "the prompt has {} tokens, but the model's context length is {} tokens "
                      "(the prompt and at least one generated token must fit)",
                      prompt_len, ctx)),
                  FailureReason::kInvalid);
  }
  int64_t max_tokens = p.max_tokens >= 0 ? p.max_tokens : options_.max_tokens;
  if (max_tokens < 0) max_tokens = ctx - prompt_len;
  if (p.max_tokens >= 0 && prompt_len + p.max_tokens > ctx) {
    return refuse(Status::InvalidArgument(fmt::format(
                      "this model's context length is {} tokens, but {} tokens were requested "
                      "({} in the prompt, {} for the completion)",
                      ctx, prompt_len + p.max_tokens, prompt_len, p.max_tokens)),
                  FailureReason::kInvalid);
  }
  // One full-length sequence must fit the cache, else it could never run.
  const int64_t block = blocks().block_size();
  const int64_t needed = (prompt_len + max_tokens + block - 1) / block;
  if (needed > blocks().num_blocks()) {
    return refuse(Status::InvalidArgument(fmt::format(
                      "the request needs up to {} tokens of KV cache ({} blocks), but model "
                      "'{}' has {} blocks ({} tokens); raise kv_cache_bytes or lower max_tokens",
                      prompt_len + max_tokens, needed, name_, blocks().num_blocks(),
                      blocks().num_blocks() * block)),
                  FailureReason::kInvalid);
  }
  if (!p.seed.has_value()) {
    static thread_local std::mt19937_64 seeder(std::random_device{}());
    p.seed = seeder();
  }

  auto req = std::make_shared<GenRequestState>();
  req->sink = std::move(sink);
  req->cancellation = request->cancellation;
  req->params = p;
  req->number = next_request_.fetch_add(1);
  req->prompt_len = prompt_len;
  req->max_tokens = max_tokens;
  req->open_choices = p.n;
  req->usage.prompt_tokens = prompt_len;
  req->arrival_ns = arrival;

  auto seq = std::make_unique<GenSequence>();
  seq->id = SeqId(req->number, 0);
  seq->choice = 0;
  seq->req = req;
  seq->tokens = std::move(ids).value();
  seq->tokens.reserve(static_cast<size_t>(prompt_len + std::min<int64_t>(max_tokens, 4096)));
  llm::SamplingParams sp;
  sp.temperature = p.temperature;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.min_p = p.min_p;
  sp.repetition_penalty = p.repetition_penalty;
  sp.presence_penalty = p.presence_penalty;
  sp.frequency_penalty = p.frequency_penalty;
  sp.logit_bias = p.logit_bias;
  sp.seed = *p.seed;
  sp.min_tokens = p.min_tokens;
  sp.top_logprobs = p.logprobs;
  const llm::Tokenizer& tok = model_->tokenizer();
  if (!p.ignore_eos) sp.stop_token_ids = eog_ids_;
  for (int32_t id : p.stop_token_ids) sp.stop_token_ids.push_back(id);
  if (Status valid = llm::ValidateSamplingParams(sp, static_cast<int32_t>(vocab)); !valid.ok()) {
    return refuse(valid, FailureReason::kInvalid);
  }
  seq->sampler = std::make_unique<llm::Sampler>(sp, static_cast<int32_t>(vocab));
  seq->sampler->SetPrompt(seq->tokens);
  seq->detok = std::make_unique<llm::IncrementalDetokenizer>(tok, p.skip_special_tokens);
  seq->stop = std::make_unique<llm::StopStringFilter>(p.stop);

  GenSeqInfo info;
  info.id = seq->id;
  info.num_tokens = prompt_len;
  info.priority = static_cast<uint32_t>(std::min<uint64_t>(request->priority, UINT32_MAX));
  info.arrival = static_cast<int64_t>(req->number);
  const int64_t timeout_us = request->timeout_us > 0 ? static_cast<int64_t>(request->timeout_us)
                                                     : options_.default_timeout_us;
  info.deadline_ns = timeout_us > 0 ? arrival + timeout_us * 1000 : 0;
  const GenSeqId id = seq->id;
  {
    MutexLock lock(seqs_mu_);
    seqs_.emplace(id, std::move(seq));
  }
  Status submitted = scheduler_.Submit(info);
  if (!submitted.ok()) {
    Erase(id);
    const FailureReason reason =
        submitted.code() == StatusCode::kResourceExhausted ? FailureReason::kQueueFull
        : submitted.code() == StatusCode::kUnavailable     ? FailureReason::kShuttingDown
                                                           : FailureReason::kOther;
    std::shared_ptr<GenerationSink> s = req->sink;
    {
      MutexLock lock(stats_mu_);
      ++stats_.failures[static_cast<size_t>(reason)];
      stats_.inference.fail.Add(static_cast<uint64_t>(NowNs(clock_) - arrival));
    }
    if (submitted.code() == StatusCode::kResourceExhausted) {
      submitted = Status::ResourceExhausted(
          fmt::format("model '{}': the waiting queue is full ({} requests); retry later", name_,
                      options_.policy.max_queue_size));
    }
    s->Finish(submitted);
    return;
  }
  if (request->cancellation != nullptr) {
    const uint64_t number = req->number;
    const int32_t n = p.n;
    request->cancellation->OnCancel([self, number, n] {
      if (std::shared_ptr<Core> core = self.lock()) {
        for (int32_t c = 0; c < n; ++c) core->scheduler_.Cancel(SeqId(number, c));
      }
    });
  }
}

void LlmModel::Core::Fail(GenRequestState& req, const Status& why) {
  if (req.done) return;
  req.done = true;
  for (int32_t c = 0; c < req.params.n; ++c) scheduler_.Cancel(SeqId(req.number, c));
  const FailureReason reason =
      why.code() == StatusCode::kCancelled          ? FailureReason::kCanceled
      : why.code() == StatusCode::kDeadlineExceeded ? FailureReason::kTimeout
      : why.code() == StatusCode::kUnavailable      ? FailureReason::kShuttingDown
                                                    : FailureReason::kBackend;
  {
    MutexLock lock(stats_mu_);
    ++stats_.failures[static_cast<size_t>(reason)];
    stats_.inference.fail.Add(static_cast<uint64_t>(NowNs(clock_) - req.arrival_ns));
    stats_.last_inference_ms = WallClockMs();
    stats_.generation.finished_abort += 1;
    if (why.code() == StatusCode::kCancelled) stats_.generation.cancellations += 1;
    stats_.generation.generation_tokens_total += static_cast<uint64_t>(req.usage.completion_tokens);
  }
  req.sink->Finish(why);
}

void LlmModel::Core::Dropped(GenSeqId id, const Status& why) {
  GenSequence* s = Find(id);
  if (s == nullptr) return;
  std::shared_ptr<GenRequestState> req = s->req;
  Erase(id);
  Fail(*req, why);
}

void LlmModel::Core::Preempted(std::span<const GenSeqId> seqs) {
  // A padding row is not recomputed: it leaves the batch. The policy holds it as waiting until
  // the cancellation removes it, at the start of the next step, before any admission.
  for (GenSeqId id : seqs) {
    GenSequence* s = Find(id);
    if (s == nullptr || !s->padding) continue;
    scheduler_.Cancel(id);
    Erase(id);
  }
  if (!seqs.empty()) {
    KILN_LOG_DEBUG("model '{}': preempted {} sequence(s) (KV cache full); they will recompute",
                   name_, seqs.size());
  }
}

void LlmModel::Core::FinishChoice(GenSequence& s, FinishReason reason, std::string text,
                                  GenChunk chunk) {
  (void)text;
  s.finished = true;
  chunk.finish_reason = reason;
  GenRequestState& req = *s.req;
  if (!req.done) {
    MutexLock lock(stats_mu_);
    (reason == FinishReason::kStop ? stats_.generation.finished_stop
                                   : stats_.generation.finished_length) += 1;
  }
  if (!req.done) req.sink->Send(std::move(chunk));
  if (--req.open_choices > 0 || req.done) return;
  req.done = true;
  const int64_t now = NowNs(clock_);
  {
    MutexLock lock(stats_mu_);
    const uint64_t total = static_cast<uint64_t>(now - req.arrival_ns);
    const uint64_t queue =
        static_cast<uint64_t>(std::max<int64_t>(0, req.first_scheduled_ns - req.arrival_ns));
    stats_.inference.success.Add(total);
    stats_.inference.queue.Add(queue);
    stats_.inference.compute_infer.Add(total - std::min(total, queue));
    stats_.inference_count += 1;
    stats_.request_seconds.Observe(static_cast<double>(total) * 1e-9);
    stats_.queue_seconds.Observe(static_cast<double>(queue) * 1e-9);
    stats_.last_inference_ms = WallClockMs();
    GenerationStatistics& g = stats_.generation;
    g.e2e_seconds.Observe(static_cast<double>(total) * 1e-9);
    g.queue_seconds.Observe(static_cast<double>(queue) * 1e-9);
    if (req.first_token_ns >= 0) {
      const double ttft = static_cast<double>(req.first_token_ns - req.arrival_ns) * 1e-9;
      g.ttft_seconds.Observe(ttft);
      const int64_t per_choice = req.usage.completion_tokens / std::max(1, req.params.n);
      if (per_choice > 1) {
        g.tpot_seconds.Observe((static_cast<double>(total) * 1e-9 - ttft) /
                               static_cast<double>(per_choice - 1));
      }
    }
    g.prompt_tokens.Observe(static_cast<double>(req.usage.prompt_tokens));
    g.generation_tokens.Observe(static_cast<double>(req.usage.completion_tokens));
    g.prompt_tokens_total += static_cast<uint64_t>(req.usage.prompt_tokens);
    g.generation_tokens_total += static_cast<uint64_t>(req.usage.completion_tokens);
  }
  GenTiming timing;
  if (req.first_scheduled_ns >= 0) {
    timing.queue_ns =
        static_cast<uint64_t>(std::max<int64_t>(0, req.first_scheduled_ns - req.arrival_ns));
    if (req.first_token_ns >= 0) {
      timing.prefill_ns =
          static_cast<uint64_t>(std::max<int64_t>(0, req.first_token_ns - req.first_scheduled_ns));
      timing.decode_ns = static_cast<uint64_t>(std::max<int64_t>(0, now - req.first_token_ns));
    }
  }
  req.sink->Finish(GenFinal{req.usage, timing});
}

void LlmModel::Core::Accept(GenSequence& s, int32_t token, const llm::TokenLogprobs* lp,
                            int64_t now) {
  GenRequestState& req = *s.req;
  const GenSamplingParams& p = req.params;
  s.tokens.push_back(token);
  s.sampler->Accept(token);
  ++s.generated;
  ++req.usage.completion_tokens;
  if (req.first_token_ns < 0) req.first_token_ns = now;
  if (s.last_token_ns >= 0) {
    MutexLock lock(stats_mu_);
    stats_.generation.itl_seconds.Observe(static_cast<double>(now - s.last_token_ns) * 1e-9);
  }
  s.last_token_ns = now;

  GenChunk chunk;
  chunk.index = s.choice;
  chunk.token_ids.push_back(token);
  if (lp != nullptr && p.logprobs >= 0) {
    const llm::Tokenizer& tok = model_->tokenizer();
    GenTokenLogprob g;
    g.token = token;
    g.text = tok.TokenBytes(token);
    g.logprob = lp->logprob;
    for (const llm::TopLogprob& t : lp->top) {
      g.top.push_back(GenTopLogprob{t.token, tok.TokenBytes(t.token), t.logprob});
    }
    chunk.logprobs.push_back(std::move(g));
  }

  const llm::Tokenizer& tok = model_->tokenizer();
  std::optional<FinishReason> finish;
  const bool eog = tok.IsEog(token) && !p.ignore_eos;
  const bool stop_token =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  std::string text;
  if (eog || stop_token) {
    finish = FinishReason::kStop;
  } else {
    text = s.stop->Push(s.detok->Push(token));
    if (s.stop->stopped()) {
      finish = FinishReason::kStop;
      chunk.stop_reason = s.stop->matched();
    }
  }
  if (!finish.has_value() && (s.generated >= req.max_tokens ||
                              static_cast<int64_t>(s.tokens.size()) >= engine_->context_length())) {
    finish = FinishReason::kLength;
  }
  if (finish.has_value() && !s.stop->stopped()) {
    text += s.stop->Push(s.detok->Flush());
    if (s.stop->stopped()) {
      finish = FinishReason::kStop;
      chunk.stop_reason = s.stop->matched();
    } else {
      text += s.stop->Flush();
    }
  }
  chunk.text = std::move(text);
  if (finish.has_value()) {
    FinishChoice(s, *finish, {}, std::move(chunk));
    return;
  }
  if (!req.done) {
    req.sink->Send(std::move(chunk));
    const size_t backlog = req.sink->backlog();
    if (backlog > options_.max_stream_backlog) {
      {
        MutexLock lock(stats_mu_);
        stats_.generation.stream_cuts += 1;
      }
      Fail(req, Status::ResourceExhausted(fmt::format(
                    "the client reads too slowly: {} chunks are waiting to be sent (limit {}); "
                    "the stream was cut",
                    backlog, options_.max_stream_backlog)));
    }
  }
}

namespace {

bool ForkedThisStep(const std::vector<GenFork>& forks, GenSeqId parent) {
  return std::any_of(forks.begin(), forks.end(),
                     [parent](const GenFork& f) { return f.parent == parent; });
}

}  // namespace

void LlmModel::Core::Execute(const StepPlan& plan, std::vector<ChunkOutcome>* outcomes,
                             std::vector<GenFork>* forks) {
  omp_set_num_threads(threads_);
  const int64_t start = NowNs(clock_);
  outcomes->assign(plan.run.size(), ChunkOutcome{});
  steps_.clear();
  std::vector<GenSequence*> seqs(plan.run.size(), nullptr);
  // static_padded: the batch ends (its padding rows leave unrun) when no member is active.
  bool batch_active = false;
  if (options_.pad_static_batches) {
    for (const ScheduledChunk& c : plan.run) batch_active |= !Get(c.seq).finished;
  }
  int64_t num_logits = 0;
  int64_t num_tokens = 0;
  for (size_t i = 0; i < plan.run.size(); ++i) {
    const ScheduledChunk& c = plan.run[i];
    GenSequence& s = Get(c.seq);
    seqs[i] = &s;
    (*outcomes)[i].seq = c.seq;
    if (s.padding && (!batch_active || c.pos0 + c.num_tokens >= engine_->context_length())) {
      s.padding = false;
      (*outcomes)[i].finished = true;
      continue;
    }
    if (!s.padding && (s.finished || s.req->done ||
                       (s.req->cancellation != nullptr && s.req->cancellation->cancelled()))) {
      if (!s.req->done && !s.finished) Fail(*s.req, Status::Cancelled("request cancelled"));
      s.finished = true;
      (*outcomes)[i].finished = true;
      continue;
    }
    if (s.req->first_scheduled_ns < 0) s.req->first_scheduled_ns = start;
    num_tokens += c.num_tokens;
    llm::StepSequence step;
    step.kv = &s.kv;
    step.pos0 = c.pos0;
    step.tokens = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(c.pos0),
                                                             static_cast<size_t>(c.num_tokens));
    step.num_logits = c.wants_logits ? 1 : 0;
    num_logits += step.num_logits;
    steps_.push_back(step);
  }
  const int64_t vocab = model_->config().vocab;
  if (!steps_.empty()) {
    logits_.resize(static_cast<size_t>(std::max<int64_t>(num_logits, 1) * vocab));
    const auto forward_start = std::chrono::steady_clock::now();
    Status s = engine_->Forward(steps_, copies_, logits_.data());
    {
      MutexLock lock(stats_mu_);
      stats_.generation.forward_seconds_total +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    }
    copies_.clear();
    if (!s.ok()) {
      KILN_LOG_ERROR("model '{}': engine step failed: {}", name_, s.message());
      for (size_t i = 0; i < plan.run.size(); ++i) {
        if ((*outcomes)[i].finished) continue;
        seqs[i]->finished = true;
        (*outcomes)[i].finished = true;
        Fail(*seqs[i]->req, Status::Internal("model '" + name_ + "': " + s.message()));
      }
      return;
    }
  }
  copies_.clear();
  const int64_t now = NowNs(clock_);
  int64_t row = 0;
  llm::TokenLogprobs lp;
  for (size_t i = 0; i < plan.run.size(); ++i) {
    if ((*outcomes)[i].finished) continue;
    const ScheduledChunk& c = plan.run[i];
    GenSequence& s = *seqs[i];
    mutable_blocks().Commit(&s.kv, s.tokens, c.pos0 + c.num_tokens);
    if (!c.wants_logits) continue;
    const float* logits = logits_.data() + row * vocab;
    ++row;
    if (s.padding) {
      s.tokens.push_back(s.tokens.back());  // its logits are computed and not used
      (*outcomes)[i].appended = true;
      continue;
    }
    GenRequestState& req = *s.req;
    const bool want_lp = req.params.logprobs >= 0;
    // n > 1: the first token of the prompt's step is sampled for every choice from the same
    // logits; choices 1..n-1 become sequences sharing the prompt's blocks.
    if (req.params.n > 1 && s.choice == 0 && !s.forked) {
      s.forked = true;
      for (int32_t ch = 1; ch < req.params.n && !req.done; ++ch) {
        auto child = std::make_unique<GenSequence>();
        child->id = SeqId(req.number, ch);
        child->choice = ch;
        child->req = s.req;
        child->tokens = s.tokens;
        child->sampler = std::make_unique<llm::Sampler>(s.sampler->Fork(static_cast<uint64_t>(ch)));
        child->detok = std::make_unique<llm::IncrementalDetokenizer>(
            model_->tokenizer(), req.params.skip_special_tokens);
        child->stop = std::make_unique<llm::StopStringFilter>(req.params.stop);
        child->admitted_once = true;
        child->forked = true;
        GenSequence& ref = *child;
        {
          MutexLock lock(seqs_mu_);
          seqs_.emplace(child->id, std::move(child));
        }
        row_.assign(logits, logits + vocab);
        const int32_t t = ref.sampler->Sample(row_, want_lp ? &lp : nullptr);
        Accept(ref, t, want_lp ? &lp : nullptr, now);
        if (ref.finished) {
          Erase(ref.id);
        } else {
          forks->push_back(GenFork{s.id, ref.id, static_cast<int64_t>(ref.tokens.size())});
        }
      }
    }
    if (req.done) {
      s.finished = true;
      (*outcomes)[i].finished = true;
      continue;
    }
    row_.assign(logits, logits + vocab);
    const int32_t t = s.sampler->Sample(row_, want_lp ? &lp : nullptr);
    Accept(s, t, want_lp ? &lp : nullptr, now);
    (*outcomes)[i].appended = true;
    if (s.finished && options_.pad_static_batches && !ForkedThisStep(*forks, s.id)) {
      s.padding = true;  // answered; runs on as a padding row of its batch
    } else if (req.done) {
      s.finished = true;
      (*outcomes)[i].finished = true;
    } else if (s.finished && !ForkedThisStep(*forks, s.id)) {
      (*outcomes)[i].finished = true;
    }
    // A parent whose own choice ended with its first token while its forks go on stays in
    // the policy for one more step (the forks are added after this step completes and share
    // its blocks); the next step finds it finished and lets it go.
  }
  const int64_t end = NowNs(clock_);
  if (num_tokens > 0) {  // a step that ran something (not one that only let rows go)
    MutexLock lock(stats_mu_);
    stats_.execution_count += 1;
    stats_.compute_seconds.Observe(static_cast<double>(end - start) * 1e-9);
    stats_.batch_size.Observe(static_cast<double>(num_tokens));
    stats_.generation.steps += 1;
    stats_.generation.step_seconds.Observe(static_cast<double>(end - start) * 1e-9);
  }
  SampleKvGauges();
}

void LlmModel::Core::SampleKvGauges() {
  const llm::KvStats kv = blocks().stats();
  // Positions holding K/V, over the sequences that hold blocks (a block shared by n choices
  // counts once per choice: the figure is an upper bound of the cache's useful slots then).
  int64_t filled = 0;
  {
    MutexLock lock(seqs_mu_);
    for (const auto& [id, s] : seqs_) {
      if (!s->kv.blocks.empty()) filled += s->kv.num_computed;
    }
  }
  MutexLock lock(stats_mu_);
  stats_.generation.kv_tokens = filled;
  GenerationStatistics& g = stats_.generation;
  g.kv_blocks_total = kv.total;
  g.kv_blocks_used = kv.used;
  g.kv_blocks_free = kv.free;
  g.kv_blocks_cached = kv.cached;
  g.prefix_queries_tokens = static_cast<uint64_t>(kv.prefix_queries_tokens);
  g.prefix_hits_tokens = static_cast<uint64_t>(kv.prefix_hits_tokens);
}

// ---------------------------------------------------------------------------------------------

Result<std::shared_ptr<LlmModel>> LlmModel::Create(int64_t version,
                                                   const inference::ModelConfig& config,
                                                   const fs::path& model_path,
                                                   const LlmServingOptions& options,
                                                   const InstanceOptions& instance_options) {
  const std::string& name = config.name();
  Result<std::unique_ptr<llm::Model>> model = llm::Model::Load(model_path.string());
  if (!model.ok()) {
    return model.status().WithContext(fmt::format("model '{}' version {}", name, version));
  }
  llm::EngineOptions eo;
  eo.kv_dtype = options.kv_cache_dtype == "f32"    ? llm::KvDtype::kF32
                : options.kv_cache_dtype == "bf16" ? llm::KvDtype::kBF16
                                                   : llm::KvDtype::kF16;
  eo.block_size = options.block_size;
  eo.kv_budget_bytes = options.kv_cache_bytes;
  if (eo.kv_budget_bytes == 0) {
    // The default share of free memory, but no more than every sequence at full context
    // needs (a small model would otherwise reserve gigabytes it can never use).
    const llm::ModelConfig& mc = (*model)->config();
    const int64_t ctx = options.context_length > 0 ? options.context_length : mc.context_length;
    const int64_t token_bytes =
        mc.n_layers * mc.n_kv_heads * mc.head_dim * 2 * (eo.kv_dtype == llm::KvDtype::kF32 ? 4 : 2);
    const int64_t blocks_per_seq = (ctx + eo.block_size - 1) / eo.block_size;
    const int64_t full = options.policy.max_num_seqs * blocks_per_seq * eo.block_size * token_bytes;
    eo.kv_budget_bytes = std::min<int64_t>(llm::KvCache::DefaultBudgetBytes(), full);
  }
  eo.context_length = options.context_length;
  eo.prefix_caching = options.prefix_caching;
  Result<std::unique_ptr<llm::Engine>> engine = llm::Engine::Create(**model, eo);
  if (!engine.ok()) {
    return engine.status().WithContext(fmt::format("model '{}' version {}", name, version));
  }
  std::unique_ptr<llm::ChatTemplate> tmpl;
  if (!(*model)->chat_template().empty()) {
    Result<std::unique_ptr<llm::ChatTemplate>> t =
        llm::ChatTemplate::Parse((*model)->chat_template());
    if (!t.ok()) {
      // A model whose template kiln cannot render still serves completions.
      KILN_LOG_WARN(
          "model '{}' version {}: chat template not usable, /v1/chat/completions "
          "will refuse requests: {}",
          name, version, t.status().message());
    } else {
      tmpl = std::move(t).value();
    }
  }
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  const InstancePlan plan = PlanInstances(1, instance_options, hardware);
  const Clock& clock = instance_options.clock != nullptr ? *instance_options.clock : SteadyClock();
  LlmServingOptions o = options;
  o.policy.watermark_blocks =
      std::max<int64_t>(o.policy.watermark_blocks, (*engine)->kv_cache().num_blocks() / 100);
  auto core = std::make_shared<Core>(std::move(model).value(), std::move(engine).value(),
                                     std::move(tmpl), o, plan.intra_op_threads, clock, name);
  KILN_RETURN_IF_ERROR(core->Start());
  const llm::ModelConfig& mc = core->model().config();
  KILN_LOG_INFO(
      "model '{}' version {}: {} {} ({} layers, vocab {}), context {}, KV cache {} blocks of {} "
      "tokens ({:.1f} MiB {}), {} threads",
      name, version, mc.architecture, mc.file_type, mc.n_layers, mc.vocab,
      core->engine().context_length(), core->engine().kv_cache().num_blocks(),
      core->engine().kv_cache().block_size(),
      static_cast<double>(core->engine().kv_cache().bytes()) / (1 << 20), o.kv_cache_dtype,
      plan.intra_op_threads);
  return std::shared_ptr<LlmModel>(new LlmModel(version, config, std::move(core)));
}

LlmModel::LlmModel(int64_t version, inference::ModelConfig config, std::shared_ptr<Core> core)
    : version_(version),
      config_(std::move(config)),
      signature_(MakeModelSignature(config_)),
      core_(std::move(core)) {}

LlmModel::~LlmModel() { Shutdown(); }

const std::string& LlmModel::name() const { return config_.name(); }
int64_t LlmModel::version() const { return version_; }
const ModelSignature& LlmModel::signature() const { return signature_; }
const inference::ModelConfig* LlmModel::model_config() const { return &config_; }

void LlmModel::Generate(std::unique_ptr<GenerateRequest> request,
                        std::shared_ptr<GenerationSink> sink) {
  core_->Generate(std::move(request), std::move(sink), core_);
}

void LlmModel::Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) {
  (void)request;
  sink->Finish(Status::Unimplemented(fmt::format(
      "model '{}' is generative: send text_input through the server's inference path or use "
      "/v2/models/{}/generate or /v1/completions",
      name(), name())));
}

ModelStatistics LlmModel::Statistics() const { return core_->Statistics(); }
size_t LlmModel::PendingRequestCount() const { return static_cast<size_t>(core_->queued()); }
double LlmModel::LoadDurationSeconds() const {
  return static_cast<double>(load_duration_ns_.load()) * 1e-9;
}
uint64_t LlmModel::WeightBytes() const { return core_->model().weight_bytes(); }
void LlmModel::Shutdown() { core_->Shutdown(); }
void LlmModel::ResetStatistics() { core_->ResetStatistics(); }
void LlmModel::SetLoadDuration(uint64_t ns) { load_duration_ns_.store(ns); }
int64_t LlmModel::context_length() const { return core_->engine().context_length(); }
int64_t LlmModel::kv_blocks() const { return core_->engine().kv_cache().num_blocks(); }

}  // namespace kiln
