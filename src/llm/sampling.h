// SPDX-License-Identifier: Apache-2.0
#pragma once
// Choosing the next token of one sequence from its row of logits: logit bias, repetition /
// presence / frequency penalties, the min_tokens mask, then greedy (temperature 0) or sampling
// with temperature, top-k, top-p and min-p from the sequence's own seeded generator; optionally
// the log-probabilities OpenAI's `logprobs` reports.
//
// One Sampler per sequence (per choice), driven once per decode step:
//
//   SamplingParams params;                        // from the request (the model glue converts)
//   params.temperature = 0.7f; params.top_p = 0.9f; params.seed = seed;
//   params.stop_token_ids = eog_and_stop_ids;     // masked while fewer than min_tokens generated
//   KILN_RETURN_IF_ERROR(ValidateSamplingParams(params, vocab));
//   Sampler base(params, vocab);
//   base.SetPrompt(prompt_tokens);                // for the repetition penalty
//   std::vector<Sampler> choices;                 // n > 1: one fork per choice
//   for (uint64_t i = 0; i < n; ++i) choices.push_back(base.Fork(i));
//   TokenLogprobs lp;                             // reused: no allocation per step
//   // each step, for each choice's row of logits (modified in place):
//   int32_t token = choices[i].Sample(row, params.top_logprobs >= 0 ? &lp : nullptr);
//   choices[i].Accept(token);                     // a token the sequence keeps
//
// NOTE on the design.
//  - Order of processing, each on the logits of this step: logit_bias is added; the penalties
//    are applied (repetition: for each distinct token of the prompt or the output, a positive
//    logit is divided by the penalty and a negative one multiplied, as Hugging Face and vLLM;
//    presence and frequency, over the output only, as OpenAI: logit -= presence * (count > 0) +
//    frequency * count); while fewer than min_tokens tokens were accepted, stop_token_ids are
//    set to -inf. Then temperature 0 is greedy: the argmax of those logits (the lowest id wins a
//    tie). Otherwise the tokens with a finite logit are ordered by logit (ties: lower id first),
//    cut to the top_k best, their weights are w_i = exp((logit_i - max) / temperature) (in
//    double), the order is cut to the shortest prefix whose share of the weight reaches top_p,
//    then to the tokens with w_i >= min_p (w_i is p_i / p_max), and the token is drawn by
//    inverse CDF along that order with u = (53 random bits of the generator) * 2^-53 * (the
//    prefix's weight). The defaults (no bias, penalties, min_p or min_tokens) give exactly the
//    tokens of kiln's earlier temperature / top-k / top-p sampler.
//  - Determinism: each Sampler owns its generator (std::mt19937_64, whose output the C++
//    standard fixes) and the draw is computed in double in a fixed order, so the same seed and
//    logits give the same tokens on every machine (with the same C library's exp) and whatever
//    else runs in the batch. Choice i of a request with seed s draws from ChoiceSeed(s, i)
//    (choice 0 from s itself).
//  - Logprobs are log_softmax of the logits as the model produced them, before bias, penalties,
//    masking and temperature: the model's own distribution, which is what OpenAI reports (and
//    vLLM's default). A token whose raw logit is -inf has logprob -inf.
//  - Cost per step (V = vocabulary): greedy is two light passes (max, then its first index).
//    Sampling gathers the candidates in one pass, dropping those whose weight is below 2^-60
//    (they change no sum the draw makes, so the draw is still exactly the one above) and, with
//    min_p and top_p = 1, those min_p will cut; top_k > 0 then uses a partial sort
//    (O(V log k)); otherwise the survivors get a stable radix sort (O(V), the same order as a
//    comparison sort: the exact order is what reproduces the earlier sampler's sums bit for bit,
//    which a partial selection cannot). Penalties touch only the tokens seen (a sorted table of
//    counts, kept only when a penalty is on). Logprobs add one pass (log-sum-exp around the max,
//    and a top-k insertion). The O(V) scratch is per thread, not per Sampler, and grows once:
//    the steady state allocates nothing. On one core at V = 151936, about: greedy 25 us,
//    top_k 40 170 us, min_p 0.05 130 us, temperature / top_p alone 1 ms (half of it the exps
//    the exact sums need), logprobs +0.45 ms (the earlier sampler: 10 ms without top_k).
//
// Thread safety: a Sampler is used by one thread at a time (it holds the generator); distinct
// Samplers may be used concurrently.

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kiln::llm {

inline constexpr int32_t kMaxSamplerTopLogprobs = 20;

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax; the lowest id wins a tie)
  int32_t top_k = 0;         // <= 0: all tokens
  float top_p = 1.0f;        // (0, 1]; nucleus: the smallest set whose probability reaches top_p
  uint64_t seed = 0;
  float min_p = 0.0f;               // [0, 1]; drop tokens whose probability < min_p * p(max)
  float repetition_penalty = 1.0f;  // > 0; 1: off
  float presence_penalty = 0.0f;    // 0: off
  float frequency_penalty = 0.0f;   // 0: off
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to its logit
  int64_t min_tokens = 0;
  // The ids that would end generation (the model's end-of-generation ids unless the request
  // ignores them, and the request's stop token ids): masked to -inf while fewer than min_tokens
  // tokens were accepted. The Sampler never stops a sequence itself.
  std::vector<int32_t> stop_token_ids;
  int32_t top_logprobs = -1;  // -1: no logprobs; 0..20: the chosen token's and the top k
};

// InvalidArgument (naming the field and value) unless: temperature finite and >= 0, top_p in
// (0, 1], min_p in [0, 1], repetition_penalty finite and > 0, presence / frequency penalties and
// biases finite, logit_bias and stop_token_ids ids in [0, vocab_size), min_tokens >= 0,
// top_logprobs in [-1, 20].
Status ValidateSamplingParams(const SamplingParams& params, int32_t vocab_size);

// The seed of choice `choice_index` of a request seeded with `seed`: `seed` itself for choice 0,
// else SplitMix64's output function applied to seed + choice_index * 0x9E3779B97F4A7C15.
uint64_t ChoiceSeed(uint64_t seed, uint64_t choice_index);

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// The log-probabilities of one sampled token (see the NOTE: the model's raw distribution).
struct TokenLogprobs {
  int32_t token = 0;  // the chosen token
  float logprob = 0;  // its log-probability
  // The top_logprobs most likely tokens, most likely first (ties: lower id first; a token whose
  // raw logit is -inf is never listed); its capacity is reused from step to step.
  std::vector<TopLogprob> top;
};

class Sampler {
 public:
  // REQUIRES: vocab_size > 0; ValidateSamplingParams(params, vocab_size).ok().
  Sampler(const SamplingParams& params, int32_t vocab_size);

  // The prompt's tokens, for the repetition penalty (replaces an earlier prompt). Ids outside the
  // vocabulary are ignored. Allocates (once per request).
  void SetPrompt(std::span<const int32_t> prompt);

  // The chosen token. `logits` is this step's row (vocab_size values, finite or -inf); it is
  // modified in place (bias, penalties, mask). When `out` is non-null and top_logprobs >= 0,
  // *out receives the chosen token's log-probability and the top_logprobs most likely tokens;
  // otherwise *out is untouched. Does not record the token: call Accept for that.
  // REQUIRES: logits.size() == vocab_size.
  int32_t Sample(std::span<float> logits, TokenLogprobs* out = nullptr);

  // Records a token the sequence keeps: it counts for the penalties and for min_tokens.
  void Accept(int32_t token);

  // A copy of this sampler's state (prompt, accepted tokens) whose generator starts afresh from
  // ChoiceSeed(params.seed, choice_index), whatever this one has drawn.
  Sampler Fork(uint64_t choice_index) const;

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }
  int64_t num_accepted() const { return num_accepted_; }

 private:
  struct Seen {
    int32_t token;
    int32_t count;   // in the output
    bool in_prompt;  // in the prompt
  };

  void ApplyPenalties(std::span<float> logits);
  int32_t Draw(std::span<const float> logits);
  // The raw logit of `token` before this step's modifications (saved_ or logits).
  float RawLogit(std::span<const float> logits, int32_t token) const;

  SamplingParams params_;
  int32_t vocab_size_;
  bool track_seen_;  // some penalty is on
  std::mt19937_64 rng_;
  int64_t num_accepted_ = 0;
  std::vector<Seen> seen_;                        // sorted by token
  std::vector<std::pair<int32_t, float>> saved_;  // raw logits of the tokens modified this step
};

// argmax with the lowest index winning ties (NaN never wins; 0 when nothing beats -inf).
int32_t Argmax(std::span<const float> logits);

}  // namespace kiln::llm
