// SPDX-License-Identifier: Apache-2.0
#pragma once
// The workload of `kiln bench generate`: which prompts are sent (random token ids, a
// ShareGPT-shaped length distribution, or a prompts file) with how many output tokens each, and
// when (Poisson or gamma arrivals).
//
//   DatasetOptions o;
//   o.kind = "random";
//   o.input_len = 512; o.output_len = 128; o.range_ratio = 0.5; o.num_prompts = 100;
//   KILN_ASSIGN_OR_RETURN(std::vector<GenPrompt> prompts, MakeDataset(o));
//   std::vector<int64_t> at_ns = ArrivalOffsetsNs(prompts.size(), /*rate=*/8, /*burst=*/1, 0);
//
// NOTE (token ids): on /v1/completions the random and sharegpt-like prompts are arrays of token
// ids (OpenAI's `prompt` may be an integer array), drawn uniformly from [100, vocab_size), so the
// input length is exact without a tokenizer; ids below 100 are left out to avoid the special
// tokens most vocabularies put first. On /v1/chat/completions (text only) they are words from a
// fixed list of common short English words, about one token each: the length is approximate.
//
// NOTE (sharegpt-like): lengths are log-normal, ln(len) ~ N(mu, sigma^2), with the means the vLLM
// paper reports for ShareGPT (Kwon et al., SOSP 2023, Fig. 11: input 161.31, output 337.99
// tokens) and sigma = 1 (assumed, not fitted: a long right tail with median = mean / e^0.5).
// Pairs are redrawn until they pass the filter vLLM's benchmark applies to ShareGPT (input in
// [4, 1024], output >= 4, input + output <= 2048). docs/bench.md states the same.
//
// Deterministic for a given options struct (seed included), with every standard library: the
// draws are kiln's own over std::mt19937_64 (uniform, Box-Muller normal, Marsaglia-Tsang gamma).
//
// Thread safety: pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace kiln::bench {

// The ShareGPT-shaped distribution's parameters (see the NOTE above).
inline constexpr double kShareGptInputMean = 161.31;
inline constexpr double kShareGptOutputMean = 337.99;
inline constexpr double kShareGptSigma = 1.0;
inline constexpr int64_t kShareGptInputMin = 4;
inline constexpr int64_t kShareGptInputMax = 1024;
inline constexpr int64_t kShareGptOutputMin = 4;
inline constexpr int64_t kShareGptTotalMax = 2048;
// The smallest token id a random prompt uses.
inline constexpr int64_t kFirstRandomTokenId = 100;

struct DatasetOptions {
  std::string kind = "random";  // "random" | "sharegpt-like" | "file"
  std::string prompts_file;     // kind "file": one prompt per line, or JSONL
  bool chat = false;            // the endpoint is /v1/chat/completions (text prompts only)
  int64_t input_len = 1024;     // random: mean input length, tokens
  int64_t output_len = 128;     // random: mean output length; file: max_tokens when not given
  double range_ratio = 0;       // random: lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1
  int64_t vocab_size = 32000;   // token ids are drawn from [100, vocab_size)
  int64_t num_prompts = 0;      // 0: 1000 for random / sharegpt-like, every line for file
  uint64_t seed = 0;
};

// One request's prompt and output length. Exactly one of token_ids, text and messages_json is
// set.
struct GenPrompt {
  std::vector<int32_t> token_ids;  // completions: the prompt as token ids
  std::string text;                // the prompt as text (chat: the one user message)
  std::string messages_json;       // chat: a JSON array of messages from the file, verbatim
  int64_t input_tokens = 0;        // exact for token ids; for text the number of words
  int64_t output_tokens = 0;       // max_tokens (>= 1)
};

// Builds the prompts. InvalidArgument naming the flag for a bad length, ratio, vocabulary size or
// kind; file errors name the file and line (unreadable, bad JSON, neither "prompt" nor
// "messages", "messages" for the completions endpoint, a bad "max_tokens", no prompts).
Result<std::vector<GenPrompt>> MakeDataset(const DatasetOptions& options);

// Reads a prompts file's text (exposed for tests; `name` is used in messages). Lines that start
// with '{' are JSON objects with "prompt" (a string) or "messages" (an array), and optionally
// "max_tokens"; other non-blank lines are prompts as they stand. `default_output_len` is used when
// a line gives no max_tokens.
Result<std::vector<GenPrompt>> ParsePrompts(const std::string& text, const std::string& name,
                                            bool chat, int64_t default_output_len);

// Intended send times of `n` requests, in ns from the start of the run: the first at 0, then
// gaps drawn from a gamma distribution with shape `burstiness` and mean 1/rate (vLLM's
// --burstiness: 1 = Poisson, which uses ArrivalSchedule of schedule.h; < 1 burstier, > 1 more
// regular). rate = +inf sends everything at 0. REQUIRES: rate > 0, burstiness > 0.
std::vector<int64_t> ArrivalOffsetsNs(size_t n, double rate_per_s, double burstiness,
                                      uint64_t seed);

}  // namespace kiln::bench
