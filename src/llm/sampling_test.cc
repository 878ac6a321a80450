// SPDX-License-Identifier: Apache-2.0
// Sampler: greedy ties, logit_bias, each penalty and their order, the min_tokens mask, top-k /
// top-p / min-p cuts and temperature against hand-computed distributions drawn with the
// documented uniform, logprobs against a hand-computed log_softmax, seeds (determinism, forks,
// ChoiceSeed), parameter validation, and the defaults against the previous sampler's algorithm
// (kept here as the reference) on a large vocabulary.
#include "llm/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace kiln::llm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams Greedy() { return SamplingParams{}; }

// The documented uniform: the top 53 bits of the generator's next output, in [0, 1).
double Uniform53(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

// Inverse CDF along `order` (tokens, most likely first) with unnormalized weights.
int32_t DrawFrom(double r, const std::vector<int32_t>& order, const std::vector<double>& weights) {
  double mass = 0;
  for (double w : weights) mass += w;
  double acc = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    acc += weights[i];
    if (r * mass < acc) return order[i];
  }
  return order.back();
}

// log p for p = {0.4, 0.3, 0.15, 0.1, 0.05}: at temperature 1 the distribution is p itself.
std::vector<float> LogP() {
  return {std::log(0.4f), std::log(0.3f), std::log(0.15f), std::log(0.1f), std::log(0.05f)};
}

// Draws `steps` tokens per seed for seeds 0..seeds-1 and compares each with the hand-computed
// distribution (order + weights) drawn with the documented uniform.
void ExpectDraws(const SamplingParams& base, const std::vector<float>& logits,
                 const std::vector<int32_t>& order, const std::vector<double>& weights,
                 int seeds = 200, int steps = 3) {
  for (int seed = 0; seed < seeds; ++seed) {
    SamplingParams p = base;
    p.seed = static_cast<uint64_t>(seed);
    Sampler sampler(p, static_cast<int32_t>(logits.size()));
    std::mt19937_64 g(p.seed);
    for (int step = 0; step < steps; ++step) {
      std::vector<float> row = logits;
      const int32_t got = sampler.Sample(row);
      EXPECT_EQ(got, DrawFrom(Uniform53(g), order, weights)) << "seed " << seed << " step " << step;
    }
  }
}

TEST(SamplerTest, GreedyTakesTheLowestIdAmongTies) {
  Sampler s(Greedy(), 5);
  std::vector<float> row = {1, 3, 3, 2, -1};
  EXPECT_EQ(s.Sample(row), 1);
  std::vector<float> nan_row = {std::nanf(""), 0, 0};
  Sampler s3(Greedy(), 3);
  EXPECT_EQ(s3.Sample(nan_row), 1);
  EXPECT_EQ(Argmax(std::vector<float>{-kInf, -kInf}), 0);
}

TEST(SamplerTest, LogitBiasIsAddedAndCanForceOrBanAToken) {
  SamplingParams p = Greedy();
  p.logit_bias = {{0, 100.0f}, {3, -2.5f}};
  Sampler s(p, 5);
  std::vector<float> row = {1, 2, 3, 4, 5};
  EXPECT_EQ(s.Sample(row), 0);
  EXPECT_EQ(row, (std::vector<float>{101, 2, 3, 1.5f, 5}));

  p.logit_bias = {{4, -100.0f}};
  Sampler ban(p, 5);
  row = {1, 2, 3, 4, 5};
  EXPECT_EQ(ban.Sample(row), 3);

  // Sampling at temperature 1: token 0 carries all but e^-96 of the mass.
  p.logit_bias = {{0, 100.0f}};
  p.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    p.seed = seed;
    Sampler t(p, 5);
    row = {1, 2, 3, 4, 5};
    EXPECT_EQ(t.Sample(row), 0) << seed;
  }
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  SamplingParams p = Greedy();
  p.repetition_penalty = 2.0f;
  Sampler s(p, 5);
  s.SetPrompt(std::vector<int32_t>{0, 0, 0, 7, -1});  // repeated: once; out of range: ignored
  s.Accept(1);
  s.Accept(1);
  std::vector<float> row = {3.0f, -1.0f, 2.0f, 0.5f, 1.0f};
  // 0: 3 / 2 = 1.5 (once, however often it appears); 1: -1 * 2 = -2; the rest unchanged.
  EXPECT_EQ(s.Sample(row), 2);
  EXPECT_EQ(row, (std::vector<float>{1.5f, -2.0f, 2.0f, 0.5f, 1.0f}));

  // A new prompt replaces the old one; output tokens stay.
  s.SetPrompt(std::vector<int32_t>{3});
  row = {3.0f, -1.0f, 2.0f, 0.5f, 1.0f};
  EXPECT_EQ(s.Sample(row), 0);
  EXPECT_EQ(row, (std::vector<float>{3.0f, -2.0f, 2.0f, 0.25f, 1.0f}));
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesCountOutputTokensOnly) {
  SamplingParams p = Greedy();
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p, 5);
  s.SetPrompt(std::vector<int32_t>{1, 1});  // the prompt does not count
  for (int32_t t : {2, 2, 2, 4}) s.Accept(t);
  std::vector<float> row = {0, 0, 0, 0, 0};
  EXPECT_EQ(s.Sample(row), 0);
  // 2: 0 - 0.5 - 3 * 0.25 = -1.25; 4: 0 - 0.5 - 0.25 = -0.75.
  EXPECT_EQ(row, (std::vector<float>{0, 0, -1.25f, 0, -0.75f}));

  // A negative presence penalty encourages: token 4 wins.
  p.presence_penalty = -1.0f;
  p.frequency_penalty = 0.0f;
  Sampler e(p, 5);
  e.Accept(4);
  row = {0.5f, 0, 0, 0, 0};
  EXPECT_EQ(e.Sample(row), 4);
  EXPECT_EQ(row[4], 1.0f);
}

TEST(SamplerTest, BiasComesBeforePenaltiesAndTheMaskLast) {
  SamplingParams p = Greedy();
  p.logit_bias = {{0, 3.0f}, {1, 10.0f}};
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 1.0f;
  p.min_tokens = 1;
  p.stop_token_ids = {1};
  Sampler s(p, 3);
  s.SetPrompt(std::vector<int32_t>{0});
  // Nothing accepted yet: token 1 is masked whatever its bias.
  std::vector<float> row = {1.0f, 0.0f, 1.0f};
  EXPECT_EQ(s.Sample(row), 0);
  EXPECT_EQ(row, (std::vector<float>{2.0f, -kInf, 1.0f}));
  s.Accept(2);
  row = {1.0f, 0.0f, 1.0f};
  // 0: (1 + 3) / 2 = 2 (the other order would give 1 / 2 + 3 = 3.5); 1: 0 + 10, no longer
  // masked; 2: 1 / 2 - 1 = -0.5.
  EXPECT_EQ(s.Sample(row), 1);
  EXPECT_EQ(row, (std::vector<float>{2.0f, 10.0f, -0.5f}));
}

TEST(SamplerTest, MinTokensMasksStopTokensUntilEnoughWereAccepted) {
  SamplingParams p = Greedy();
  p.min_tokens = 2;
  p.stop_token_ids = {1, 4};  // e.g. EOS and a request's stop token
  Sampler s(p, 5);
  const std::vector<float> logits = {0, 5, 1, 2, 3};
  std::vector<float> row = logits;
  EXPECT_EQ(s.Sample(row), 3);
  EXPECT_EQ(row[1], -kInf);
  EXPECT_EQ(row[4], -kInf);
  s.Accept(3);
  row = logits;
  EXPECT_EQ(s.Sample(row), 3);
  s.Accept(3);
  row = logits;
  EXPECT_EQ(s.Sample(row), 1);
  EXPECT_EQ(s.num_accepted(), 2);

  // Sampling never draws a masked token: the rest in proportion {e^0, e^1, e^2} (ids 0, 2, 3).
  SamplingParams t = p;
  t.temperature = 1.0f;
  ExpectDraws(t, logits, {3, 2, 0}, {1.0, std::exp(-1.0), std::exp(-2.0)}, 200, 2);
}

TEST(SamplerTest, TemperatureOneDrawsFromTheSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  ExpectDraws(p, LogP(), {0, 1, 2, 3, 4}, {0.4, 0.3, 0.15, 0.1, 0.05});
}

TEST(SamplerTest, TemperatureSharpensOrFlattens) {
  SamplingParams p;
  p.temperature = 0.5f;  // p^2
  ExpectDraws(p, LogP(), {0, 1, 2, 3, 4}, {0.16, 0.09, 0.0225, 0.01, 0.0025});
  p.temperature = 2.0f;  // sqrt(p)
  ExpectDraws(p, LogP(), {0, 1, 2, 3, 4},
              {std::sqrt(0.4), std::sqrt(0.3), std::sqrt(0.15), std::sqrt(0.1), std::sqrt(0.05)});
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  ExpectDraws(p, LogP(), {0, 1}, {0.4, 0.3});
}

TEST(SamplerTest, TopPKeepsTheShortestPrefixReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.6f;  // 0.4 < 0.6 <= 0.7
  ExpectDraws(p, LogP(), {0, 1}, {0.4, 0.3});
  p.top_p = 0.75f;  // 0.7 < 0.75 <= 0.85
  ExpectDraws(p, LogP(), {0, 1, 2}, {0.4, 0.3, 0.15});
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.3f;  // threshold 0.12: 0.15 stays, 0.1 goes
  ExpectDraws(p, LogP(), {0, 1, 2}, {0.4, 0.3, 0.15});
  p.min_p = 1.0f;  // only the best
  ExpectDraws(p, LogP(), {0}, {1.0});
  // At temperature 0.5 the ratios are squared: 0.5625, 0.140625, 0.0625, ...; min_p 0.1 keeps 3.
  p.temperature = 0.5f;
  p.min_p = 0.1f;
  ExpectDraws(p, LogP(), {0, 1, 2}, {0.16, 0.09, 0.0225});
}

TEST(SamplerTest, TopKThenTopPThenMinP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;     // {0.4, 0.3, 0.15}, sum 0.85
  p.top_p = 0.9f;  // shares 0.47, 0.82, 1.0: all three
  p.min_p = 0.5f;  // 0.3 / 0.4 = 0.75 stays, 0.15 / 0.4 = 0.375 goes
  ExpectDraws(p, LogP(), {0, 1}, {0.4, 0.3});
}

TEST(SamplerTest, EqualLogitsAreOrderedByIdForTheDraw) {
  SamplingParams p;
  p.temperature = 1.0f;
  ExpectDraws(p, {0, 1, 0, 1, 0}, {1, 3, 0, 2, 4},
              {1.0, 1.0, std::exp(-1.0), std::exp(-1.0), std::exp(-1.0)});
}

TEST(SamplerTest, SameSeedSameTokensWhateverElseIsSampledInBetween) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<std::vector<float>> rows(40, std::vector<float>(64));
  for (auto& r : rows) {
    for (float& x : r) x = dist(gen);
  }
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  p.frequency_penalty = 0.3f;
  auto run = [&](bool interleave) {
    Sampler a(p, 64);
    SamplingParams q = p;
    q.seed = 99;
    Sampler other(q, 64);
    std::vector<int32_t> out;
    for (const auto& r : rows) {
      if (interleave) {
        std::vector<float> junk(64, 0.0f);
        other.Accept(other.Sample(junk));
      }
      std::vector<float> row = r;
      out.push_back(a.Sample(row));
      a.Accept(out.back());
    }
    return out;
  };
  const std::vector<int32_t> alone = run(false);
  EXPECT_EQ(run(false), alone);
  EXPECT_EQ(run(true), alone);
}

TEST(SamplerTest, ChoiceSeedIsDocumented) {
  EXPECT_EQ(ChoiceSeed(42, 0), 42u);
  // SplitMix64 seeded with 0: its first output (the reference implementation's published value).
  EXPECT_EQ(ChoiceSeed(0, 1), 0xE220A8397B1DCDAFull);
  EXPECT_NE(ChoiceSeed(42, 1), ChoiceSeed(42, 2));
}

TEST(SamplerTest, ForkCopiesTheStateAndReseedsTheGenerator) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 5;
  p.frequency_penalty = 1.0f;
  Sampler base(p, 5);
  base.Accept(2);
  std::vector<float> row = LogP();
  base.Sample(row);  // draws: the forks start afresh regardless

  for (uint64_t choice : {0u, 1u, 3u}) {
    Sampler fork = base.Fork(choice);
    EXPECT_EQ(fork.num_accepted(), 1);
    std::mt19937_64 g(ChoiceSeed(5, choice));
    for (int step = 0; step < 4; ++step) {
      std::vector<float> r = {0, 0, 0, 0, 0};
      const int32_t got = fork.Sample(r);
      EXPECT_EQ(r[2], -1.0f);  // the penalty of the copied output
      EXPECT_EQ(got, DrawFrom(Uniform53(g), {0, 1, 3, 4, 2}, {1.0, 1.0, 1.0, 1.0, std::exp(-1.0)}))
          << "choice " << choice << " step " << step;
    }
  }
}

TEST(SamplerTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  // log(e^1 + ... + e^5) = 5 + log(1 + e^-1 + e^-2 + e^-3 + e^-4) = 5.4519144...
  const double lse =
      5.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0) + std::exp(-4.0));
  EXPECT_NEAR(lse, 5.45191447, 1e-7);
  SamplingParams p;
  p.temperature = 2.0f;  // none of these change the reported values
  p.logit_bias = {{0, 100.0f}};
  p.repetition_penalty = 1.5f;
  p.top_logprobs = 3;
  Sampler s(p, 5);
  s.SetPrompt(std::vector<int32_t>{0, 4});
  TokenLogprobs lp;
  std::vector<float> row = {1, 2, 3, 4, 5};
  const int32_t token = s.Sample(row, &lp);
  EXPECT_EQ(token, 0);
  EXPECT_EQ(lp.token, 0);
  EXPECT_NEAR(lp.logprob, 1.0 - lse, 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 4);
  EXPECT_NEAR(lp.top[0].logprob, 5.0 - lse, 1e-5);
  EXPECT_EQ(lp.top[1].token, 3);
  EXPECT_NEAR(lp.top[1].logprob, 4.0 - lse, 1e-5);
  EXPECT_EQ(lp.top[2].token, 2);
  EXPECT_NEAR(lp.top[2].logprob, 3.0 - lse, 1e-5);

  // Reused: the next step overwrites; k = 0 reports the chosen token only.
  SamplingParams g;
  g.top_logprobs = 0;
  Sampler greedy(g, 4);
  std::vector<float> r2 = {0, std::log(3.0f), -kInf, 0};  // softmax {1/5, 3/5, 0, 1/5}
  EXPECT_EQ(greedy.Sample(r2, &lp), 1);
  EXPECT_NEAR(lp.logprob, std::log(0.6), 1e-6);
  EXPECT_TRUE(lp.top.empty());
}

TEST(SamplerTest, TopLogprobsTiesAndMoreThanTheVocabulary) {
  SamplingParams p;
  p.top_logprobs = 20;
  Sampler s(p, 5);
  TokenLogprobs lp;
  std::vector<float> row = {2, 1, 2, 2, 0};
  EXPECT_EQ(s.Sample(row, &lp), 0);
  ASSERT_EQ(lp.top.size(), 5u);
  const std::vector<int32_t> order = {0, 2, 3, 1, 4};
  const double lse = std::log(3 * std::exp(2.0) + std::exp(1.0) + 1.0);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(lp.top[i].token, order[i]);
    EXPECT_NEAR(lp.top[i].logprob, row[static_cast<size_t>(order[i])] - lse, 1e-5);
  }

  p.top_logprobs = 2;
  Sampler two(p, 5);
  row = {2, 1, 2, 2, 0};
  two.Sample(row, &lp);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token, 0);
  EXPECT_EQ(lp.top[1].token, 2);
}

TEST(SamplerTest, NoLogprobsUnlessAsked) {
  Sampler s(Greedy(), 3);  // top_logprobs -1
  TokenLogprobs lp;
  lp.token = 77;
  std::vector<float> row = {0, 1, 0};
  EXPECT_EQ(s.Sample(row, &lp), 1);
  EXPECT_EQ(lp.token, 77);
}

TEST(SamplerTest, ValidationNamesTheField) {
  auto error = [](const SamplingParams& p) {
    const Status s = ValidateSamplingParams(p, 10);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}, 10).ok());
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(error(p).find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_NE(error(p).find("top_p"), std::string::npos);
  p = {};
  p.min_p = 1.5f;
  EXPECT_NE(error(p).find("min_p"), std::string::npos);
  p = {};
  p.repetition_penalty = 0;
  EXPECT_NE(error(p).find("repetition_penalty"), std::string::npos);
  p = {};
  p.frequency_penalty = std::nanf("");
  EXPECT_NE(error(p).find("frequency_penalty"), std::string::npos);
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(error(p).find("logit_bias token id 10"), std::string::npos);
  p = {};
  p.stop_token_ids = {-1};
  EXPECT_NE(error(p).find("stop token id -1"), std::string::npos);
  p = {};
  p.min_tokens = -1;
  EXPECT_NE(error(p).find("min_tokens"), std::string::npos);
  p = {};
  p.top_logprobs = 21;
  EXPECT_NE(error(p).find("top_logprobs"), std::string::npos);
}

// The sampler before penalties and min_p (kiln's first one), verbatim in substance: the defaults
// must give its tokens exactly.
int32_t PreviousSample(const SamplingParams& params, std::mt19937_64& rng,
                       std::span<const float> logits) {
  if (!(params.temperature > 0.0f)) return Argmax(logits);
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isnan(logits[i])) c.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + params.top_k, c.end(), better);
    c.resize(static_cast<size_t>(params.top_k));
  } else {
    std::sort(c.begin(), c.end(), better);
  }
  std::vector<double> p(c.size());
  const double top = c[0].first;
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    p[i] = std::exp((static_cast<double>(c[i].first) - top) / params.temperature);
    sum += p[i];
  }
  size_t n = c.size();
  if (params.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      acc += p[i] / sum;
      if (acc >= params.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (size_t i = 0; i < n; ++i) mass += p[i];
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * mass;
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += p[i];
    if (u < acc) return c[i].second;
  }
  return c[n - 1].second;
}

TEST(SamplerTest, DefaultsGiveThePreviousSamplersTokensOnALargeVocabulary) {
  constexpr int32_t kVocab = 40000;  // past the radix sort's threshold
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Config {
    float temperature;
    int32_t top_k;
    float top_p;
  };
  // Low temperatures put most of the vocabulary below the negligible-weight floor.
  for (const Config& config :
       {Config{1.0f, 0, 1.0f}, Config{0.7f, 0, 0.9f}, Config{1.3f, 50, 1.0f},
        Config{0.8f, 40, 0.95f}, Config{2.0f, 0, 0.5f}, Config{0.2f, 0, 1.0f},
        Config{0.25f, 0, 0.999f}, Config{0.1f, 30000, 0.9f}}) {
    SamplingParams p;
    p.temperature = config.temperature;
    p.top_k = config.top_k;
    p.top_p = config.top_p;
    p.seed = 11;
    Sampler s(p, kVocab);
    std::mt19937_64 reference_rng(p.seed);
    for (int step = 0; step < 20; ++step) {
      std::vector<float> row(kVocab);
      for (float& x : row) x = std::round(normal(gen) * 4) / 4;  // many ties
      if (step % 2 == 1) {
        // The best logit 0, held by ~1300 tokens, +0 and -0 alternately (equal: ordered by id).
        for (size_t i = 0; i < row.size(); ++i) {
          row[i] = row[i] == 0 ? (i % 2 == 0 ? 0.0f : -0.0f) : -std::abs(row[i]);
        }
      }
      row[17] = -kInf;
      const int32_t expected = PreviousSample(p, reference_rng, row);
      EXPECT_EQ(s.Sample(row), expected) << "T " << config.temperature << " k " << config.top_k
                                         << " p " << config.top_p << " step " << step;
    }
  }
}

// min_p on a large vocabulary (the early cut before ordering) against a plain reference: order
// everything, weights, keep w >= min_p, draw.
TEST(SamplerTest, MinPOnALargeVocabularyMatchesAPlainReference) {
  constexpr int32_t kVocab = 30000;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  SamplingParams p;
  p.temperature = 0.9f;
  p.min_p = 0.05f;
  p.seed = 3;
  Sampler s(p, kVocab);
  std::mt19937_64 g(p.seed);
  for (int step = 0; step < 30; ++step) {
    std::vector<float> row(kVocab);
    for (float& x : row) x = normal(gen);
    std::vector<int32_t> order(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] ||
             (row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);
    });
    const double top = row[static_cast<size_t>(order[0])];
    std::vector<int32_t> kept;
    std::vector<double> weights;
    for (int32_t t : order) {
      const double w = std::exp((row[static_cast<size_t>(t)] - top) / p.temperature);
      if (w < p.min_p) break;
      kept.push_back(t);
      weights.push_back(w);
    }
    EXPECT_LT(kept.size(), 2000u);  // the cut is doing something
    EXPECT_EQ(s.Sample(row), DrawFrom(Uniform53(g), kept, weights)) << "step " << step;
  }
}

}  // namespace
}  // namespace kiln::llm
