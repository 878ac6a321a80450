// SPDX-License-Identifier: Apache-2.0
#include "llm/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>

#include "base/check.h"

namespace kiln::llm {
namespace {

// A candidate as one integer whose ascending order is the sampling order: logit descending,
// then id ascending (-0 and +0 equal). High 32 bits: the logit's key; low 32 bits: the id.
inline uint64_t CandidateKey(float logit, int32_t id) {
  const uint32_t bits = std::bit_cast<uint32_t>(logit + 0.0f);  // -0 + 0 = +0
  // Negative: all bits flipped; positive: the sign bit set. Ascending unsigned order of the
  // result is ascending float order (non-NaN); branch-free (the signs of logits are random).
  const uint32_t sign = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31);
  const uint32_t ascending = bits ^ (sign | 0x80000000u);
  return static_cast<uint64_t>(~ascending) << 32 | static_cast<uint32_t>(id);
}
inline int32_t KeyToken(uint64_t key) { return static_cast<int32_t>(static_cast<uint32_t>(key)); }
inline float KeyLogit(uint64_t key) {
  const uint32_t ascending = ~static_cast<uint32_t>(key >> 32);
  const uint32_t bits = (ascending & 0x80000000u) != 0 ? ascending & 0x7FFFFFFFu : ~ascending;
  return std::bit_cast<float>(bits);
}

// The per-thread scratch of Draw: O(vocab), grown once, reused by every Sampler of the thread.
struct Scratch {
  size_t capacity = 0;
  std::unique_ptr<uint64_t[]> keys;
  std::unique_ptr<uint64_t[]> radix_tmp;
  std::unique_ptr<double[]> weights;

  void Reserve(size_t n) {
    if (n <= capacity) return;
    keys = std::make_unique_for_overwrite<uint64_t[]>(n);
    radix_tmp = std::make_unique_for_overwrite<uint64_t[]>(n);
    weights = std::make_unique_for_overwrite<double[]>(n);
    capacity = n;
  }
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Sorts keys[0, n) that were written in id order: LSD radix sort on the high 32 bits (3 passes of
// 11/11/10 bits), stable, so the low 32 bits (ids) stay ascending among equal logits: the same
// order as std::sort of the keys, in O(n). Returns the array holding the result (keys or tmp).
uint64_t* RadixSortKeys(uint64_t* keys, uint64_t* tmp, size_t n) {
  constexpr int kShift[3] = {32, 43, 54};
  constexpr uint32_t kBuckets[3] = {2048, 2048, 1024};
  std::array<std::array<uint32_t, 2048>, 3> hist{};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = keys[i];
    ++hist[0][(k >> 32) & 2047u];
    ++hist[1][(k >> 43) & 2047u];
    ++hist[2][k >> 54];
  }
  for (int pass = 0; pass < 3; ++pass) {
    std::array<uint32_t, 2048>& h = hist[static_cast<size_t>(pass)];
    const uint32_t buckets = kBuckets[pass];
    // A pass whose digit is the same for every element changes nothing.
    if (std::find(h.begin(), h.begin() + buckets, static_cast<uint32_t>(n)) !=
        h.begin() + buckets) {
      continue;
    }
    uint32_t offset = 0;
    for (uint32_t b = 0; b < buckets; ++b) {
      const uint32_t count = h[b];
      h[b] = offset;
      offset += count;
    }
    const int shift = kShift[pass];
    const uint64_t mask = buckets - 1;
    for (size_t i = 0; i < n; ++i) tmp[h[(keys[i] >> shift) & mask]++] = keys[i];
    std::swap(keys, tmp);
  }
  return keys;
}

// The largest logit (NaN never wins; -inf when there is nothing else), over 4 independent lanes.
float MaxLogit(std::span<const float> logits) {
  const float* x = logits.data();
  const size_t n = logits.size();
  float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    m0 = x[i] > m0 ? x[i] : m0;
    m1 = x[i + 1] > m1 ? x[i + 1] : m1;
    m2 = x[i + 2] > m2 ? x[i + 2] : m2;
    m3 = x[i + 3] > m3 ? x[i + 3] : m3;
  }
  for (; i < n; ++i) m0 = x[i] > m0 ? x[i] : m0;
  m0 = m1 > m0 ? m1 : m0;
  m2 = m3 > m2 ? m3 : m2;
  return m2 > m0 ? m2 : m0;
}

// SplitMix64's output function (Steele, Lea, Flood 2014).
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Below this many candidates std::sort is as fast as the radix sort (the same order either way).
constexpr size_t kRadixSortMin = 2048;

// A weight below 2^-60 changes no sum the draw makes: each is accumulated in the sampling order
// onto a partial sum >= 1 (the best token's weight is 1), whose half-ulp is >= 2^-53; and for
// the nucleus' normalized sum, onto one >= 1/sum whose half-ulp exceeds 2^-54/sum. So the tokens
// with (logit - max) / temperature < -42.5 (weight < e^-42 < 2^-60) are dropped before ordering
// without changing any token drawn.
constexpr double kNegligibleLogWeight = -42.5;

}  // namespace

int32_t Argmax(std::span<const float> logits) {
  const float best = MaxLogit(logits);
  if (!(best > -INFINITY)) return 0;
  // The first index holding the maximum.
  return static_cast<int32_t>(std::find(logits.begin(), logits.end(), best) - logits.begin());
}

Status ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0) {
    return Status::InvalidArgument(
        fmt::format("temperature {} is not a finite number >= 0", p.temperature));
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return Status::InvalidArgument(fmt::format("top_p {} is not in (0, 1]", p.top_p));
  }
  if (!(p.min_p >= 0 && p.min_p <= 1)) {
    return Status::InvalidArgument(fmt::format("min_p {} is not in [0, 1]", p.min_p));
  }
  if (!std::isfinite(p.repetition_penalty) || !(p.repetition_penalty > 0)) {
    return Status::InvalidArgument(
        fmt::format("repetition_penalty {} is not a finite number > 0", p.repetition_penalty));
  }
  if (!std::isfinite(p.presence_penalty)) {
    return Status::InvalidArgument(
        fmt::format("presence_penalty {} is not finite", p.presence_penalty));
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return Status::InvalidArgument(
        fmt::format("frequency_penalty {} is not finite", p.frequency_penalty));
  }
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= vocab_size) {
      return Status::InvalidArgument(fmt::format(
          "logit_bias token id {} is outside the vocabulary ({} tokens)", token, vocab_size));
    }
    if (!std::isfinite(bias)) {
      return Status::InvalidArgument(
          fmt::format("logit_bias of token {} is {}, not finite", token, bias));
    }
  }
  for (int32_t token : p.stop_token_ids) {
    if (token < 0 || token >= vocab_size) {
      return Status::InvalidArgument(
          fmt::format("stop token id {} is outside the vocabulary ({} tokens)", token, vocab_size));
    }
  }
  if (p.min_tokens < 0) {
    return Status::InvalidArgument(fmt::format("min_tokens {} is negative", p.min_tokens));
  }
  if (p.top_logprobs < -1 || p.top_logprobs > kMaxSamplerTopLogprobs) {
    return Status::InvalidArgument(
        fmt::format("top_logprobs {} is not in [-1, {}]", p.top_logprobs, kMaxSamplerTopLogprobs));
  }
  return Status::OK();
}

uint64_t ChoiceSeed(uint64_t seed, uint64_t choice_index) {
  if (choice_index == 0) return seed;
  return Mix64(seed + choice_index * 0x9E3779B97F4A7C15ull);
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size)
    : params_(params),
      vocab_size_(vocab_size),
      track_seen_(params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                  params.frequency_penalty != 0.0f),
      rng_(params.seed) {
  KILN_CHECK(vocab_size > 0, "a Sampler needs a vocabulary, got size ", vocab_size);
}

void Sampler::SetPrompt(std::span<const int32_t> prompt) {
  // Only the repetition penalty looks at the prompt.
  if (!track_seen_) return;
  std::erase_if(seen_, [](const Seen& s) { return s.count == 0; });
  for (Seen& s : seen_) s.in_prompt = false;
  if (params_.repetition_penalty == 1.0f) return;
  std::vector<int32_t> ids;
  ids.reserve(prompt.size());
  for (int32_t t : prompt) {
    if (t >= 0 && t < vocab_size_) ids.push_back(t);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<Seen> merged;
  merged.reserve(seen_.size() + ids.size());
  size_t i = 0, j = 0;
  while (i < seen_.size() || j < ids.size()) {
    if (j == ids.size() || (i < seen_.size() && seen_[i].token < ids[j])) {
      merged.push_back(seen_[i++]);
    } else if (i == seen_.size() || ids[j] < seen_[i].token) {
      merged.push_back({ids[j++], 0, true});
    } else {
      merged.push_back({seen_[i].token, seen_[i].count, true});
      ++i, ++j;
    }
  }
  seen_ = std::move(merged);
}

void Sampler::Accept(int32_t token) {
  ++num_accepted_;
  if (!track_seen_ || token < 0 || token >= vocab_size_) return;
  auto it = std::lower_bound(seen_.begin(), seen_.end(), token,
                             [](const Seen& s, int32_t t) { return s.token < t; });
  if (it != seen_.end() && it->token == token) {
    ++it->count;
  } else {
    seen_.insert(it, Seen{token, 1, false});
  }
}

Sampler Sampler::Fork(uint64_t choice_index) const {
  Sampler fork = *this;
  fork.rng_.seed(ChoiceSeed(params_.seed, choice_index));
  return fork;
}

void Sampler::ApplyPenalties(std::span<float> logits) {
  const float rep = params_.repetition_penalty;
  const float presence = params_.presence_penalty;
  const float frequency = params_.frequency_penalty;
  for (const Seen& s : seen_) {
    float& x = logits[static_cast<size_t>(s.token)];
    if (rep != 1.0f) x = x > 0 ? x / rep : x * rep;
    if (s.count > 0) x -= presence + frequency * static_cast<float>(s.count);
  }
}

float Sampler::RawLogit(std::span<const float> logits, int32_t token) const {
  // The first saved value of a token is its raw one (later stages save again).
  for (const auto& [t, v] : saved_) {
    if (t == token) return v;
  }
  return logits[static_cast<size_t>(token)];
}

int32_t Sampler::Sample(std::span<float> logits, TokenLogprobs* out) {
  KILN_CHECK(logits.size() == static_cast<size_t>(vocab_size_), "logits row has ", logits.size(),
             " values for a vocabulary of ", vocab_size_);
  const bool want_logprobs = out != nullptr && params_.top_logprobs >= 0;
  double log_sum = 0;  // log-sum-exp of the raw logits
  if (want_logprobs) {
    // log-sum-exp around the maximum (exp in float, summed in double: plenty for reported
    // values) and, in the same pass, the top k raw logits (insertion into a sorted list).
    const size_t k = static_cast<size_t>(params_.top_logprobs);
    std::vector<TopLogprob>& top = out->top;
    top.clear();
    const float m = MaxLogit(logits);
    double s = 0;
    if (m > -INFINITY && m < INFINITY) {
      float kth = k > 0 ? -INFINITY : INFINITY;  // what enters the top list must beat this
      for (size_t i = 0; i < logits.size(); ++i) {
        const float x = logits[i];
        s += x > -INFINITY ? static_cast<double>(std::exp(x - m)) : 0.0;  // -inf, NaN: 0
        if (x > kth) [[unlikely]] {
          if (top.size() == k) top.pop_back();
          auto pos = std::upper_bound(top.begin(), top.end(), x,
                                      [](float v, const TopLogprob& e) { return v > e.logprob; });
          top.insert(pos, TopLogprob{static_cast<int32_t>(i), x});
          if (top.size() == k) kth = top.back().logprob;
        }
      }
    }
    log_sum = s > 0 ? m + std::log(s) : INFINITY;  // nothing finite: every logprob is -inf
    for (TopLogprob& e : top) e.logprob = static_cast<float>(e.logprob - log_sum);
    saved_.clear();
  }
  auto save = [&](int32_t token) {
    if (want_logprobs) saved_.emplace_back(token, logits[static_cast<size_t>(token)]);
  };

  for (const auto& [token, bias] : params_.logit_bias) {
    if (token < 0 || token >= vocab_size_) continue;
    save(token);
    logits[static_cast<size_t>(token)] += bias;
  }
  if (track_seen_) {
    if (want_logprobs) {
      for (const Seen& s : seen_) save(s.token);
    }
    ApplyPenalties(logits);
  }
  if (num_accepted_ < params_.min_tokens) {
    for (int32_t token : params_.stop_token_ids) {
      if (token < 0 || token >= vocab_size_) continue;
      save(token);
      logits[static_cast<size_t>(token)] = -INFINITY;
    }
  }

  const int32_t chosen = params_.temperature > 0.0f ? Draw(logits) : Argmax(logits);
  if (want_logprobs) {
    out->token = chosen;
    out->logprob = static_cast<float>(static_cast<double>(RawLogit(logits, chosen)) - log_sum);
  }
  return chosen;
}

int32_t Sampler::Draw(std::span<const float> logits) {
  const float max_logit = MaxLogit(logits);
  if (!(max_logit > -INFINITY)) return Argmax(logits);  // nothing with probability > 0
  if (max_logit == INFINITY) return Argmax(logits);     // the lowest id among +inf logits

  // The candidates: logits above a floor, as keys in id order. Below the floor a weight is
  // negligible (kNegligibleLogWeight); with min_p and top_p = 1, below min_p too (top_p < 1
  // needs every candidate in the nucleus' denominator). The floor is conservative: the exact
  // min_p test on the weights decides.
  const double temperature = params_.temperature;
  double log_floor = kNegligibleLogWeight;
  if (params_.min_p > 0.0f && params_.top_p >= 1.0f) {
    log_floor = std::max(log_floor, std::log(static_cast<double>(params_.min_p)) - 1e-6);
  }
  // As a float rounded down (conservative: keeps a few more).
  const double floor = static_cast<double>(max_logit) + temperature * log_floor;
  float floor_f = static_cast<float>(floor);
  if (static_cast<double>(floor_f) > floor) floor_f = std::nextafter(floor_f, -INFINITY);
  Scratch& scratch = ThreadScratch();
  scratch.Reserve(logits.size());
  uint64_t* keys = scratch.keys.get();
  size_t count = 0;
  for (size_t i = 0; i < logits.size(); ++i) {  // branch-free compaction
    keys[count] = CandidateKey(logits[i], static_cast<int32_t>(i));
    count += logits[i] >= floor_f ? 1 : 0;
  }

  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < count) {
    std::partial_sort(keys, keys + params_.top_k, keys + count);
    count = static_cast<size_t>(params_.top_k);
  } else if (count < kRadixSortMin) {
    std::sort(keys, keys + count);
  } else {
    keys = RadixSortKeys(keys, scratch.radix_tmp.get(), count);
  }

  // Weights at the temperature, relative to the best (w_0 = 1), in double.
  const double top = KeyLogit(keys[0]);
  double* w = scratch.weights.get();
  double sum = 0;
  for (size_t i = 0; i < count; ++i) {
    w[i] = std::exp((static_cast<double>(KeyLogit(keys[i])) - top) / params_.temperature);
    sum += w[i];
  }
  // Nucleus: the shortest prefix whose mass reaches top_p.
  size_t n = count;
  if (params_.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < count; ++i) {
      acc += w[i] / sum;
      if (acc >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  // min_p: w_i = p_i / p_max; w_0 = 1 always stays.
  if (params_.min_p > 0.0f) {
    size_t i = 1;
    while (i < n && w[i] >= params_.min_p) ++i;
    n = i;
  }
  double mass = 0;
  for (size_t i = 0; i < n; ++i) mass += w[i];
  // 53 random bits as a double in [0, 1) (std::uniform_real_distribution differs between
  // standard libraries; this does not).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * mass;
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += w[i];
    if (u < acc) return KeyToken(keys[i]);
  }
  // Rounding left u at the very end: the last token of positive weight.
  while (n > 1 && w[n - 1] == 0) --n;
  return KeyToken(keys[n - 1]);
}

}  // namespace kiln::llm
