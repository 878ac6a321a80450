// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decoder engine: one forward step over a flattened batch of tokens from many sequences, on
// a paged KV cache. The caller (a scheduler, `kiln generate`, a test) decides what runs; the
// engine executes. It keeps no per-request state: a sequence's state is its SequenceBlocks (block
// table and computed length), owned by the caller's sequence table, plus the K/V in the cache.
//
// One step, for sequences s = 0..S-1, each running tokens[s] (n_s >= 1 tokens) at positions
// [pos0_s, pos0_s + n_s) (a prompt chunk or one decode token; any mix):
//
//   for each s: cache.blocks().Reserve(&seq_s, pos0_s + n_s, &copies)    // the caller's
//   bookkeeping engine.Forward(steps, copies, logits);                               // K/V
//   written, logits out for each s: cache.blocks().Commit(&seq_s, all_tokens_s, pos0_s + n_s)
//
// Forward returns the logits of the last `num_logits` tokens of each sequence's chunk (1 by
// default: what the next token is sampled from), rows in step order, [sum num_logits, vocab].
//
// Thread safety: not thread-safe; one Forward at a time (the scheduler's thread). Forward splits
// its work over as many threads as the calling thread's OpenMP setting gives
// (omp_set_num_threads), on the engine's own SpinTeam (base/spin_team.h): its workers keep
// spinning between the step's hundreds of parallel loops whatever else the process runs.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "llm/kv_blocks.h"
#include "llm/kv_cache.h"
#include "llm/model.h"

namespace kiln {
class SpinTeam;
}  // namespace kiln

namespace kiln::llm {

struct EngineOptions {
  KvDtype kv_dtype = KvDtype::kF16;
  int block_size = 16;
  // Bytes for the KV cache; 0: the default share of available memory (kv_cache.h).
  int64_t kv_budget_bytes = 0;
  // The longest context a sequence may reach; 0: the model's context length. Larger than the
  // model's is an error.
  int64_t context_length = 0;
  bool prefix_caching = true;
};

// One sequence's part of a step.
struct StepSequence {
  SequenceBlocks* kv = nullptr;     // covers positions [0, pos0 + tokens.size()) (Reserve'd)
  int64_t pos0 = 0;                 // positions [0, pos0) already hold K/V
  std::span<const int32_t> tokens;  // the tokens run this step
  int64_t num_logits = 1;           // logits of the last num_logits tokens (0..tokens.size())
};

// Per-kernel time of the last Forward (when profiling is on).
struct EngineProfile {
  double embed_us = 0, norm_us = 0, qkv_us = 0, rope_us = 0, kv_write_us = 0, attention_us = 0,
         attn_out_us = 0, ffn_up_us = 0, ffn_act_us = 0, ffn_down_us = 0, logits_us = 0;
  double total_us = 0;
};

class Engine {
 public:
  // The model must outlive the engine. Allocates the KV cache (errors: a budget too small for
  // one block, a context longer than the model allows).
  static Result<std::unique_ptr<Engine>> Create(const Model& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Model& model() const { return model_; }
  KvCache& kv_cache() { return *cache_; }
  const KvCache& kv_cache() const { return *cache_; }
  int64_t context_length() const { return context_length_; }

  // Runs one step. `copies` (from BlockManager::Reserve) are executed first. logits must hold
  // sum(num_logits) * vocab floats. Errors (nothing written to the cache then): a token outside
  // the vocabulary, a position past the context length, a block table that does not cover the
  // step, an empty step.
  Status Forward(std::span<const StepSequence> step, std::span<const BlockCopy> copies,
                 float* logits);

  void set_profiling(bool on) { profiling_ = on; }
  const EngineProfile& profile() const { return profile_; }

 private:
  Engine(const Model& model, std::unique_ptr<KvCache> cache, int64_t context_length);
  void Reserve(int64_t tokens);

  const Model& model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<SpinTeam> team_;  // sized to the caller's thread count at the last Forward
  int team_threads_ = 0;            // the size asked for (the system may have given fewer)
  int64_t context_length_;
  bool profiling_ = false;
  EngineProfile profile_;
  // Scratch, grown to the largest step seen.
  int64_t capacity_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, attn_, tmp_, gate_, up_;
  std::vector<int32_t> positions_;
};

}  // namespace kiln::llm
