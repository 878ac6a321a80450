// SPDX-License-Identifier: Apache-2.0
// The workload of kiln bench generate: datasets (lengths, determinism, the ShareGPT-like shape,
// prompt files) and the arrival times.
#include "bench/gen_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace kiln::bench {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kiln_gen_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

int64_t CountSpaces(const std::string& s) { return std::count(s.begin(), s.end(), ' '); }

TEST(GenDatasetTest, RandomLengthsStayInTheRangeAndIdsInTheVocabulary) {
  DatasetOptions o;
  o.input_len = 100;
  o.output_len = 20;
  o.range_ratio = 0.5;
  o.vocab_size = 1000;
  o.num_prompts = 2000;
  auto prompts = MakeDataset(o);
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  ASSERT_EQ(prompts->size(), 2000u);
  int64_t in_min = 1 << 30, in_max = 0, out_min = 1 << 30, out_max = 0;
  for (const GenPrompt& p : *prompts) {
    // [100 * 0.5, 100 * 1.5] and [20 * 0.5, 20 * 1.5].
    ASSERT_EQ(static_cast<int64_t>(p.token_ids.size()), p.input_tokens);
    in_min = std::min(in_min, p.input_tokens);
    in_max = std::max(in_max, p.input_tokens);
    out_min = std::min(out_min, p.output_tokens);
    out_max = std::max(out_max, p.output_tokens);
    for (int32_t id : p.token_ids) {
      ASSERT_GE(id, 100);
      ASSERT_LT(id, 1000);
    }
    EXPECT_TRUE(p.text.empty());
  }
  EXPECT_EQ(in_min, 50);  // 101 values, 2000 draws: both ends are hit
  EXPECT_EQ(in_max, 150);
  EXPECT_EQ(out_min, 10);
  EXPECT_EQ(out_max, 30);
}

TEST(GenDatasetTest, RangeRatioZeroGivesExactLengths) {
  DatasetOptions o;
  o.input_len = 37;
  o.output_len = 5;
  o.num_prompts = 10;
  auto prompts = MakeDataset(o);
  ASSERT_TRUE(prompts.ok());
  for (const GenPrompt& p : *prompts) {
    EXPECT_EQ(p.token_ids.size(), 37u);
    EXPECT_EQ(p.output_tokens, 5);
  }
  EXPECT_NE((*prompts)[0].token_ids, (*prompts)[1].token_ids);  // distinct prompts
}

TEST(GenDatasetTest, TheSeedDecides) {
  DatasetOptions o;
  o.input_len = 64;
  o.output_len = 16;
  o.range_ratio = 0.25;
  o.num_prompts = 20;
  o.seed = 7;
  auto a = MakeDataset(o);
  auto b = MakeDataset(o);
  o.seed = 8;
  auto c = MakeDataset(o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool all_same_as_c = true;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].token_ids, (*b)[i].token_ids);
    EXPECT_EQ((*a)[i].output_tokens, (*b)[i].output_tokens);
    all_same_as_c &= (*a)[i].token_ids == (*c)[i].token_ids;
  }
  EXPECT_FALSE(all_same_as_c);
  // The sharegpt-like lengths too.
  o.kind = "sharegpt-like";
  auto d = MakeDataset(o);
  auto e = MakeDataset(o);
  ASSERT_TRUE(d.ok() && e.ok());
  for (size_t i = 0; i < d->size(); ++i) {
    EXPECT_EQ((*d)[i].input_tokens, (*e)[i].input_tokens);
    EXPECT_EQ((*d)[i].output_tokens, (*e)[i].output_tokens);
  }
}

TEST(GenDatasetTest, ChatPromptsAreWords) {
  DatasetOptions o;
  o.chat = true;
  o.input_len = 12;
  o.output_len = 3;
  o.num_prompts = 4;
  auto prompts = MakeDataset(o);
  ASSERT_TRUE(prompts.ok());
  for (const GenPrompt& p : *prompts) {
    EXPECT_TRUE(p.token_ids.empty());
    EXPECT_EQ(CountSpaces(p.text), 11);  // 12 words
    EXPECT_EQ(p.input_tokens, 12);
  }
}

// ln(len) ~ N(mu, 1) with mean exp(mu + 1/2) = 161.31 (input) and 337.99 (output): the medians
// are exp(mu) = 161.31 / e^0.5 = 97.8 and 337.99 / e^0.5 = 205.0 before the vLLM filter, which
// drops about 1% of pairs from the top and moves them to about 97 and 201. With 20000 draws the
// sample median's standard error is about 1.2 (input) and 2.6 (output): the ranges below are 4+
// standard errors wide on each side.
TEST(GenDatasetTest, ShareGptLikeMediansAndBounds) {
  DatasetOptions o;
  o.kind = "sharegpt-like";
  o.num_prompts = 20000;
  o.seed = 3;
  auto prompts = MakeDataset(o);
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  std::vector<int64_t> in, out;
  for (const GenPrompt& p : *prompts) {
    ASSERT_GE(p.input_tokens, 4);
    ASSERT_LE(p.input_tokens, 1024);
    ASSERT_GE(p.output_tokens, 4);
    ASSERT_LE(p.input_tokens + p.output_tokens, 2048);
    ASSERT_EQ(static_cast<int64_t>(p.token_ids.size()), p.input_tokens);
    in.push_back(p.input_tokens);
    out.push_back(p.output_tokens);
  }
  std::sort(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  EXPECT_GE(in[in.size() / 2], 90);
  EXPECT_LE(in[in.size() / 2], 105);
  EXPECT_GE(out[out.size() / 2], 190);
  EXPECT_LE(out[out.size() / 2], 215);
  // A long right tail: the mean is well above the median.
  double mean_in = 0;
  for (int64_t v : in) mean_in += static_cast<double>(v) / static_cast<double>(in.size());
  EXPECT_GT(mean_in, 1.3 * static_cast<double>(in[in.size() / 2]));
}

TEST(GenDatasetTest, BadValuesNameTheFlag) {
  DatasetOptions o;
  o.range_ratio = 1;
  auto r = MakeDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--range-ratio"), std::string::npos);
  o = DatasetOptions{};
  o.vocab_size = 100;
  r = MakeDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--vocab-size"), std::string::npos);
  o = DatasetOptions{};
  o.input_len = 0;
  r = MakeDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--input-len"), std::string::npos);
  o = DatasetOptions{};
  o.kind = "sharegpt";
  r = MakeDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sharegpt-like"), std::string::npos);
  o.kind = "file";
  r = MakeDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--prompts"), std::string::npos);
  o.prompts_file = TempPath("missing.txt");
  r = MakeDataset(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.txt"), std::string::npos);
}

TEST(GenDatasetTest, PromptLinesAndJsonl) {
  std::string text =
      "Tell me a story\r\n"
      "\n"
      "{\"prompt\": \"two words\", \"max_tokens\": 7}\n"
      "{\"prompt\": [101, 102, 103]}\n"
      "   \n";
  auto p = ParsePrompts(text, "p.txt", false, 50);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].text, "Tell me a story");
  EXPECT_EQ((*p)[0].input_tokens, 4);
  EXPECT_EQ((*p)[0].output_tokens, 50);
  EXPECT_EQ((*p)[1].text, "two words");
  EXPECT_EQ((*p)[1].output_tokens, 7);
  EXPECT_EQ((*p)[2].token_ids, (std::vector<int32_t>{101, 102, 103}));
  EXPECT_EQ((*p)[2].input_tokens, 3);

  auto chat = ParsePrompts(
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there you"}], "max_tokens": 9})",
      "c.jsonl", true, 50);
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  EXPECT_EQ((*chat)[0].messages_json,
            R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi there you"}])");
  EXPECT_EQ((*chat)[0].input_tokens, 5);
  EXPECT_EQ((*chat)[0].output_tokens, 9);
}

TEST(GenDatasetTest, PromptFileErrorsNameFileAndLine) {
  auto r = ParsePrompts("ok\n{\"messages\": []}\n", "f.jsonl", false, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.jsonl:2"), std::string::npos);
  EXPECT_NE(r.status().message().find("/v1/chat/completions"), std::string::npos);
  r = ParsePrompts("{\"prompt\": \"x\", \"max_tokens\": 0}\n", "f.jsonl", false, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.jsonl:1"), std::string::npos);
  EXPECT_NE(r.status().message().find("max_tokens"), std::string::npos);
  r = ParsePrompts("{\"text\": \"x\"}\n", "f.jsonl", false, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"prompt\""), std::string::npos);
  r = ParsePrompts("{not json\n", "f.jsonl", false, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.jsonl:1"), std::string::npos);
  r = ParsePrompts("\n\n", "empty.txt", false, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no prompts"), std::string::npos);
}

TEST(GenDatasetTest, FileDatasetUsesEveryLineOrCyclesToNumPrompts) {
  std::string path = TempPath("prompts.txt");
  {
    std::ofstream f(path);
    f << "first prompt\nsecond prompt here\n";
  }
  DatasetOptions o;
  o.kind = "file";
  o.prompts_file = path;
  o.output_len = 11;
  auto all = MakeDataset(o);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].text, "second prompt here");
  EXPECT_EQ((*all)[1].output_tokens, 11);
  o.num_prompts = 5;
  auto five = MakeDataset(o);
  ASSERT_TRUE(five.ok());
  ASSERT_EQ(five->size(), 5u);
  EXPECT_EQ((*five)[4].text, "first prompt");  // 0 1 0 1 0
  std::filesystem::remove(path);
}

// Mean and squared coefficient of variation of the gaps between arrivals.
std::pair<double, double> GapStats(const std::vector<int64_t>& at) {
  std::vector<double> gaps;
  for (size_t i = 1; i < at.size(); ++i) gaps.push_back(static_cast<double>(at[i] - at[i - 1]));
  double mean = 0, var = 0;
  for (double g : gaps) mean += g / static_cast<double>(gaps.size());
  for (double g : gaps) var += (g - mean) * (g - mean) / static_cast<double>(gaps.size());
  return {mean, var / (mean * mean)};
}

TEST(GenArrivalsTest, InfiniteRateSendsEverythingAtOnce) {
  auto at = ArrivalOffsetsNs(5, std::numeric_limits<double>::infinity(), 1, 0);
  EXPECT_EQ(at, (std::vector<int64_t>{0, 0, 0, 0, 0}));
}

// Gamma gaps with shape B and scale 1 / (rate * B): mean 1 / rate = 0.1 s at 10 req/s, and
// variance B / (rate * B)^2, so CV^2 = 1 / B (1 for Poisson, 2 for B = 0.5, 0.25 for B = 4).
// 20000 gaps: the mean is within a few percent, CV^2 within about 10%.
TEST(GenArrivalsTest, PoissonAndGammaGapMeansAndSpread) {
  struct Case {
    double burstiness;
    double cv2;
  };
  for (const Case& c : {Case{1, 1.0}, Case{0.5, 2.0}, Case{4, 0.25}}) {
    auto at = ArrivalOffsetsNs(20001, 10, c.burstiness, 42);
    EXPECT_EQ(at[0], 0);
    EXPECT_TRUE(std::is_sorted(at.begin(), at.end()));
    auto [mean_ns, cv2] = GapStats(at);
    EXPECT_NEAR(mean_ns / 1e8, 1.0, 0.04) << "burstiness " << c.burstiness;
    EXPECT_NEAR(cv2 / c.cv2, 1.0, 0.12) << "burstiness " << c.burstiness;
  }
  EXPECT_EQ(ArrivalOffsetsNs(100, 10, 0.5, 1), ArrivalOffsetsNs(100, 10, 0.5, 1));
  EXPECT_NE(ArrivalOffsetsNs(100, 10, 0.5, 1), ArrivalOffsetsNs(100, 10, 0.5, 2));
}

}  // namespace
}  // namespace kiln::bench
