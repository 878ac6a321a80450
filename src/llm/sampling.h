// SPDX-License-Identifier: Apache-2.0
#pragma once
// Choosing the next token from a row of logits: greedy (temperature 0) or sampling with
// temperature, top-k and top-p from a seeded generator. The same seed and logits give the same
// token on every machine (the generator is std::mt19937_64 and the draw is computed in double).
//
// Thread safety: a Sampler is used by one thread at a time (it holds the generator).

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace kiln::llm {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax; the lowest id wins a tie)
  int32_t top_k = 0;         // 0: all tokens
  float top_p = 1.0f;        // nucleus: the smallest set whose probability reaches top_p
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // The chosen token. REQUIRES: !logits.empty().
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

// argmax with the lowest index winning ties (NaN never wins).
int32_t Argmax(std::span<const float> logits);

}  // namespace kiln::llm
