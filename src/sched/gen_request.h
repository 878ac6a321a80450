// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal generation request and its streamed answer: what the protocols (OpenAI-compatible
// /v1/completions and /v1/chat/completions, Triton's generate extension, the KServe v2 tensor
// convention text_input / text_output) translate to and from. Nothing here knows about HTTP,
// JSON, tokenizers or the engine.
//
// The contract of one generation request, from the protocol down to the model:
//   - the request is handed over with std::unique_ptr (LoadedModel::Generate);
//   - its answers go to a GenerationSink: zero or more chunks (Send), each carrying new text of
//     one choice (index 0..n-1) and, on a choice's last chunk, its finish reason; then exactly
//     one Finish (the usage, or an error Status), on any thread, never concurrently. A request
//     refused before it ran (validation, a full queue, a prompt longer than the context) gets
//     Finish(error) and no chunk;
//   - chunk text is always whole UTF-8 characters, never holds a stop string or the prefix of one
//     that may still complete, and the concatenation of a choice's chunks is its whole output;
//   - flow control: the model reads the sink's backlog() (chunks handed over and not yet written
//     to the client) and cuts the request (Finish with RESOURCE_EXHAUSTED) when it passes the
//     stream buffer limit, so a slow reader never makes the server buffer without bound;
//   - cancellation: the request's Cancellation (sched/request.h), set by the protocol when the
//     client leaves; the scheduler drops the sequence at its next step and frees its KV blocks,
//     then answers Finish(CANCELLED).
//
// Thread safety: plain data; a sink is called by one thread at a time.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "sched/request.h"

namespace kiln {

// Per-request sampling and stopping parameters (OpenAI's names; vLLM's extensions).
struct GenSamplingParams {
  float temperature = 1.0f;         // 0: greedy
  float top_p = 1.0f;               // (0, 1]
  int32_t top_k = 0;                // 0 (or -1 on the wire): every token
  float min_p = 0.0f;               // [0, 1]: drop tokens below min_p * p(max)
  float repetition_penalty = 1.0f;  // > 0; 1: off (divides positive logits of seen tokens)
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias in [-100, 100]
  std::optional<uint64_t> seed;                       // unset: a seed drawn per request
  std::vector<std::string> stop;                      // stop strings (not included in the output)
  std::vector<int32_t> stop_token_ids;  // stop tokens besides the model's end-of-generation ones
  bool ignore_eos = false;
  int64_t min_tokens = 0;   // end-of-generation and stop tokens are masked before this many
  int64_t max_tokens = -1;  // -1: until the context is full
  int32_t logprobs = -1;    // -1: none; k >= 0: the chosen token's logprob and the top k
  int32_t n = 1;            // choices, sharing the prompt's KV blocks
  bool skip_special_tokens = true;
};

// Limits the protocols check (documented in docs/generation.md).
inline constexpr int32_t kMaxChoices = 16;          // n
inline constexpr size_t kMaxStopStrings = 16;       // stop
inline constexpr size_t kMaxStopStringBytes = 256;  // each stop string
inline constexpr int32_t kMaxTopLogprobs = 20;      // logprobs / top_logprobs
inline constexpr size_t kMaxLogitBias = 1024;       // logit_bias entries

struct GenerateRequest {
  std::string id;  // the client's id (echoed); may be empty
  // The prompt: exactly one of
  std::string prompt;                  // text (completions), tokenized with special tokens
  std::vector<int32_t> prompt_tokens;  // token ids (completions with an array of integers)
  std::string messages_json;           // a JSON array of chat messages (chat completions)
  bool add_generation_prompt = true;   // chat: end the rendered prompt with the assistant's turn
  GenSamplingParams sampling;
  uint64_t priority = 0;    // 0: the model's default priority level; 1 is the highest
  uint64_t timeout_us = 0;  // 0: the queue policy's default (microseconds)
  std::shared_ptr<const Cancellation> cancellation;

  bool cancelled() const { return cancellation != nullptr && cancellation->cancelled(); }
};

enum class FinishReason { kStop, kLength };

// "stop" / "length" (OpenAI's finish_reason strings).
constexpr const char* FinishReasonName(FinishReason r) {
  return r == FinishReason::kStop ? "stop" : "length";
}

struct GenTopLogprob {
  int32_t token = 0;
  std::string text;  // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;
};

struct GenTokenLogprob {
  int32_t token = 0;
  std::string text;
  float logprob = 0;               // of the chosen token, from the model's distribution
  std::vector<GenTopLogprob> top;  // the k most likely tokens, most likely first
};

// New output of one choice.
struct GenChunk {
  int32_t index = 0;                      // the choice, 0..n-1
  std::string text;                       // new text: whole UTF-8 characters; may be empty
  std::vector<int32_t> token_ids;         // tokens sampled since the previous chunk of this choice
  std::vector<GenTokenLogprob> logprobs;  // one per token of token_ids when asked
  std::optional<FinishReason> finish_reason;  // set on the choice's last chunk
  std::string stop_reason;  // the stop string that ended it (kStop by a stop string), if any
};

struct GenUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;     // over every choice
  int64_t cached_prompt_tokens = 0;  // prompt tokens found in the prefix cache
};

// Where a generation request's time went (for its trace, server/trace.h): queue is arrival to
// its first scheduled step, prefill from there to its first sampled token, decode from the first
// token to the answer. All zero when unknown.
struct GenTiming {
  uint64_t queue_ns = 0;
  uint64_t prefill_ns = 0;
  uint64_t decode_ns = 0;
};

struct GenFinal {
  GenUsage usage;
  GenTiming timing;
};

class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual void Send(GenChunk chunk) = 0;
  virtual void Finish(Result<GenFinal> result) = 0;
  // Chunks handed to Send and not yet written out by the consumer.
  virtual size_t backlog() const { return 0; }
};

}  // namespace kiln
