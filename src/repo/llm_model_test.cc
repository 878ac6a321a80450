// SPDX-License-Identifier: Apache-2.0
// LlmModel on the random-weight test models (KILN_LLM_TEST_MODELS, the CTest fixture
// llm_test_models): what continuous batching returns is checked against the engine run alone,
// one sequence at a time (one prompt step, then one decode step per token, argmax): chunked
// prefill, batching with other sequences, preemption by recompute and n > 1 must not change a
// greedy output. Also: stop strings, cancellation returning the KV blocks, the queue limit,
// refusals, the config parameters.
#include "repo/llm_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "llm/engine.h"
#include "llm/model.h"
#include "llm/sampling.h"
#include "repo/model_config.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string ModelPath(const std::string& file) {
  const char* dir = std::getenv("KILN_LLM_TEST_MODELS");
  return dir == nullptr ? std::string() : (fs::path(dir) / file).string();
}

// Collects one request's chunks; Wait returns its final result.
class CollectSink final : public GenerationSink {
 public:
  void Send(GenChunk chunk) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (chunk.index >= static_cast<int32_t>(text_.size())) {
      text_.resize(static_cast<size_t>(chunk.index) + 1);
      ids_.resize(text_.size());
      finish_.resize(text_.size());
    }
    const auto i = static_cast<size_t>(chunk.index);
    text_[i] += chunk.text;
    ids_[i].insert(ids_[i].end(), chunk.token_ids.begin(), chunk.token_ids.end());
    if (chunk.finish_reason.has_value()) finish_[i] = chunk.finish_reason;
    if (chunks_ == 0) first_chunk_at_ = std::chrono::steady_clock::now();
    ++chunks_;
  }
  void Finish(Result<GenFinal> result) override {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(result);
    finished_at_ = std::chrono::steady_clock::now();
    done_ = true;
    cv_.notify_all();
  }
  Result<GenFinal> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(120), [&] { return done_; })) {
      return Status::DeadlineExceeded("test sink: no answer in 120 s");
    }
    return result_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  int chunks() {
    std::lock_guard<std::mutex> lock(mu_);
    return chunks_;
  }
  // When the first chunk and the final answer came (the scheduler calls a sink from its own
  // thread, in the order of its steps).
  std::chrono::steady_clock::time_point first_chunk_at() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_chunk_at_;
  }
  std::chrono::steady_clock::time_point finished_at() {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_at_;
  }
  std::vector<int32_t> ids(size_t choice = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    return choice < ids_.size() ? ids_[choice] : std::vector<int32_t>();
  }
  std::string text(size_t choice = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    return choice < text_.size() ? text_[choice] : std::string();
  }
  std::optional<FinishReason> finish(size_t choice = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    return choice < finish_.size() ? finish_[choice] : std::nullopt;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> text_;
  std::vector<std::vector<int32_t>> ids_;
  std::vector<std::optional<FinishReason>> finish_;
  int chunks_ = 0;
  bool done_ = false;
  std::chrono::steady_clock::time_point first_chunk_at_{}, finished_at_{};
  Result<GenFinal> result_ = Status::Internal("unset");
};

// The scheduler's gauges settle just after the last answer (the policy frees a finished
// sequence after its last chunk was sent): waits until nothing runs and no block is used.
ModelStatistics SettledStatistics(const LoadedModel& model) {
  const auto start = std::chrono::steady_clock::now();
  ModelStatistics s = model.Statistics();
  while ((s.generation.running != 0 || s.generation.kv_blocks_used != 0) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s = model.Statistics();
  }
  return s;
}

// The engine alone: the prompt in one step, then one token per step, greedy.
std::vector<int32_t> GreedyAlone(const std::string& path, const std::vector<int32_t>& prompt,
                                 int64_t max_tokens) {
  Result<std::unique_ptr<llm::Model>> model = llm::Model::Load(path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  llm::EngineOptions eo;
  eo.kv_budget_bytes = 64 << 20;
  Result<std::unique_ptr<llm::Engine>> engine = llm::Engine::Create(**model, eo);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  llm::BlockManager& bm = (*engine)->kv_cache().blocks();
  const int64_t vocab = (*model)->config().vocab;
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::vector<int32_t> tokens = prompt;
  llm::SequenceBlocks seq;
  std::vector<int32_t> out;
  int64_t pos0 = 0;
  while (static_cast<int64_t>(out.size()) < max_tokens) {
    std::vector<llm::BlockCopy> copies;
    EXPECT_TRUE(bm.Reserve(&seq, static_cast<int64_t>(tokens.size()), &copies).ok());
    llm::StepSequence step;
    step.kv = &seq;
    step.pos0 = pos0;
    step.tokens = std::span<const int32_t>(tokens).subspan(static_cast<size_t>(pos0));
    EXPECT_TRUE((*engine)->Forward({&step, 1}, copies, logits.data()).ok());
    bm.Commit(&seq, tokens, static_cast<int64_t>(tokens.size()));
    pos0 = static_cast<int64_t>(tokens.size());
    const int32_t t = llm::Argmax(logits);
    out.push_back(t);
    tokens.push_back(t);
  }
  return out;
}

std::vector<int32_t> RandomPrompt(std::mt19937& rng, int64_t len) {
  std::uniform_int_distribution<int32_t> id(300, 30000);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int32_t& t : p) t = id(rng);
  return p;
}

inference::ModelConfig Config(const std::string& name) {
  inference::ModelConfig c;
  c.set_name(name);
  EXPECT_TRUE(AutoCompleteLlmConfig(&c).ok());
  return c;
}

std::unique_ptr<GenerateRequest> Greedy(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  auto r = std::make_unique<GenerateRequest>();
  r->prompt_tokens = prompt;
  r->sampling.temperature = 0;
  r->sampling.max_tokens = max_tokens;
  r->sampling.ignore_eos = true;
  return r;
}

// Submits every prompt at once (greedy, news[i] tokens each) and checks each answer against
// expected[i].
void ExpectGreedyOutputs(LlmModel& model, const std::vector<std::vector<int32_t>>& prompts,
                         const std::vector<int64_t>& news,
                         const std::vector<std::vector<int32_t>>& expected) {
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sinks.push_back(std::make_shared<CollectSink>());
    model.Generate(Greedy(prompts[i], news[i]), sinks.back());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<GenFinal> r = sinks[i]->Wait();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(sinks[i]->ids(), expected[i]) << "prompt " << i;
  }
}

class LlmModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = ModelPath(GetParam());
    if (path_.empty() || !fs::exists(path_)) {
      GTEST_SKIP() << "test model " << GetParam()
                   << " missing: set KILN_LLM_TEST_MODELS to make_models.py --preset test's "
                      "folder";
    }
  }
  std::shared_ptr<LlmModel> Make(const LlmServingOptions& o) {
    Result<std::shared_ptr<LlmModel>> m = LlmModel::Create(1, Config("m"), path_, o, {});
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : nullptr;
  }
  std::string path_;
};

// Many prompts of mixed lengths at once, with a small token budget (every long prompt is
// chunked, decodes interleave with prompt chunks): each output equals the engine alone.
TEST_P(LlmModelTest, BatchedChunkedGreedyEqualsAlone) {
  std::mt19937 rng(7);
  const std::vector<int64_t> lengths = {5, 17, 64, 150, 33, 300, 9, 90};
  constexpr int64_t kNew = 12;
  std::vector<std::vector<int32_t>> prompts, expected;
  for (int64_t len : lengths) {
    prompts.push_back(RandomPrompt(rng, len));
    expected.push_back(GreedyAlone(path_, prompts.back(), kNew));
  }
  LlmServingOptions o;
  o.policy.max_num_batched_tokens = 64;
  o.kv_cache_bytes = 64 << 20;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  std::vector<std::shared_ptr<CollectSink>> sinks;
  for (const auto& p : prompts) {
    sinks.push_back(std::make_shared<CollectSink>());
    model->Generate(Greedy(p, kNew), sinks.back());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<GenFinal> r = sinks[i]->Wait();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(sinks[i]->ids(), expected[i]) << "prompt " << i << " (" << lengths[i] << " tokens)";
    EXPECT_EQ(sinks[i]->finish(), FinishReason::kLength);
    EXPECT_EQ(r->usage.prompt_tokens, lengths[i]);
    EXPECT_EQ(r->usage.completion_tokens, kNew);
  }
  const ModelStatistics s = SettledStatistics(*model);
  EXPECT_EQ(s.generation.running, 0);
  EXPECT_EQ(s.generation.kv_blocks_used, 0);
  EXPECT_EQ(s.generation.generation_tokens_total, kNew * static_cast<int64_t>(lengths.size()));
}

// A KV cache too small for every sequence at once: sequences are preempted, recomputed later,
// and still produce the engine-alone output.
TEST_P(LlmModelTest, PreemptionKeepsOutputs) {
  std::mt19937 rng(11);
  constexpr int64_t kNew = 40;
  std::vector<std::vector<int32_t>> prompts, expected;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(RandomPrompt(rng, 30 + 7 * i));
    expected.push_back(GreedyAlone(path_, prompts.back(), kNew));
  }
  Result<std::unique_ptr<llm::Model>> m = llm::Model::Load(path_);
  ASSERT_TRUE(m.ok());
  const llm::ModelConfig& mc = (*m)->config();
  const int64_t block_bytes = 16 * mc.n_layers * mc.n_kv_heads * mc.head_dim * 2 * 2;
  LlmServingOptions o;
  o.kv_cache_bytes = 16 * block_bytes;  // 256 tokens: about three of the six at full length
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->kv_blocks(), 16);
  ExpectGreedyOutputs(*model, prompts, std::vector<int64_t>(prompts.size(), kNew), expected);
  const ModelStatistics s = SettledStatistics(*model);
  EXPECT_GT(s.generation.preemptions, 0u);
  EXPECT_EQ(s.generation.kv_blocks_used, 0);
}

// n = 3: the choices share the prompt; the same seed gives the same three outputs again, and
// choice 0 is what n = 1 with that seed gives.
TEST_P(LlmModelTest, SeededChoicesAreReproducible) {
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = RandomPrompt(rng, 40);
  LlmServingOptions o;
  o.kv_cache_bytes = 64 << 20;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  const auto run = [&](int32_t n, bool with_noise) {
    auto r = std::make_unique<GenerateRequest>();
    r->prompt_tokens = prompt;
    r->sampling.temperature = 0.9f;
    r->sampling.top_p = 0.95f;
    r->sampling.seed = 1234;
    r->sampling.n = n;
    r->sampling.max_tokens = 10;
    r->sampling.ignore_eos = true;
    auto sink = std::make_shared<CollectSink>();
    // Another request in the same steps must not change a seeded output.
    std::shared_ptr<CollectSink> noise;
    if (with_noise) {
      noise = std::make_shared<CollectSink>();
      model->Generate(Greedy(RandomPrompt(rng, 25), 10), noise);
    }
    model->Generate(std::move(r), sink);
    EXPECT_TRUE(sink->Wait().ok());
    if (noise) {
      EXPECT_TRUE(noise->Wait().ok());
    }
    std::vector<std::vector<int32_t>> out;
    for (int32_t c = 0; c < n; ++c) out.push_back(sink->ids(static_cast<size_t>(c)));
    return out;
  };
  const auto a = run(3, false);
  const auto b = run(3, true);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 3u);
  for (const auto& ids : a) EXPECT_EQ(ids.size(), 10u);
  EXPECT_NE(a[0], a[1]);  // different generators (a random collision is vanishingly unlikely)
  EXPECT_EQ(run(1, true)[0], a[0]);
}

// Choice 0 (the sequence the others fork from) may end with its first token while the other
// choices go on: the request still completes every choice.
TEST_P(LlmModelTest, FirstChoiceEndingAtOnceKeepsTheOthers) {
  std::mt19937 rng(23);
  const std::vector<int32_t> prompt = RandomPrompt(rng, 12);
  LlmServingOptions o;
  o.kv_cache_bytes = 64 << 20;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  Result<std::unique_ptr<llm::Model>> m = llm::Model::Load(path_);
  ASSERT_TRUE(m.ok());
  // Half the vocabulary stops a choice: some seed makes choice 0 stop at once while others run.
  std::vector<int32_t> stops;
  for (int32_t id = 0; id < (*m)->config().vocab; id += 2) stops.push_back(id);
  bool seen = false;
  for (uint64_t seed = 1; seed <= 40 && !seen; ++seed) {
    auto r = std::make_unique<GenerateRequest>();
    r->prompt_tokens = prompt;
    r->sampling.temperature = 1.0f;
    r->sampling.seed = seed;
    r->sampling.n = 8;
    r->sampling.max_tokens = 6;
    r->sampling.stop_token_ids = stops;
    auto sink = std::make_shared<CollectSink>();
    model->Generate(std::move(r), sink);
    Result<GenFinal> result = sink->Wait();
    ASSERT_TRUE(result.ok()) << "seed " << seed << ": " << result.status().ToString();
    int64_t total = 0;
    for (size_t c = 0; c < 8; ++c) {
      ASSERT_TRUE(sink->finish(c).has_value()) << "seed " << seed << " choice " << c;
      total += static_cast<int64_t>(sink->ids(c).size());
    }
    EXPECT_EQ(result->usage.completion_tokens, total);
    const bool parent_stopped = sink->ids(0).size() == 1 && sink->finish(0) == FinishReason::kStop;
    bool other_ran = false;
    for (size_t c = 1; c < 8; ++c) other_ran |= sink->ids(c).size() > 1;
    seen = parent_stopped && other_ran;
  }
  EXPECT_TRUE(seen) << "no seed in 1..40 made choice 0 stop at once while another ran";
  EXPECT_EQ(SettledStatistics(*model).generation.kv_blocks_used, 0);
}

// A stop string cuts the output before its first occurrence, even across tokens.
TEST_P(LlmModelTest, StopStringEndsTheOutputBeforeIt) {
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = RandomPrompt(rng, 20);
  LlmServingOptions o;
  o.kv_cache_bytes = 64 << 20;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  auto full = std::make_shared<CollectSink>();
  model->Generate(Greedy(prompt, 24), full);
  ASSERT_TRUE(full->Wait().ok());
  const std::string text = full->text();
  ASSERT_GE(text.size(), 12u);
  // A stop string from the middle of the text, on character boundaries.
  size_t at = text.size() / 2;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  size_t end = std::min(text.size(), at + 4);
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  const std::string stop = text.substr(at, end - at);
  ASSERT_FALSE(stop.empty());
  auto r = Greedy(prompt, 24);
  r->sampling.stop = {stop};
  auto sink = std::make_shared<CollectSink>();
  model->Generate(std::move(r), sink);
  ASSERT_TRUE(sink->Wait().ok());
  EXPECT_EQ(sink->text(), text.substr(0, text.find(stop)));
  EXPECT_EQ(sink->finish(), FinishReason::kStop);
}

// A cancelled request is answered CANCELLED and its blocks come back.
TEST_P(LlmModelTest, CancellationReturnsTheBlocks) {
  std::mt19937 rng(9);
  LlmServingOptions o;
  o.kv_cache_bytes = 64 << 20;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  auto cancel = std::make_shared<Cancellation>();
  auto r = Greedy(RandomPrompt(rng, 50), 1500);
  r->cancellation = cancel;
  auto sink = std::make_shared<CollectSink>();
  model->Generate(std::move(r), sink);
  const auto start = std::chrono::steady_clock::now();
  while (sink->chunks() < 3 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(sink->chunks(), 3);
  EXPECT_GT(model->Statistics().generation.kv_blocks_used, 0);
  cancel->Cancel();
  Result<GenFinal> result = sink->Wait();
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled) << result.status().ToString();
  const ModelStatistics s = SettledStatistics(*model);
  EXPECT_EQ(s.generation.kv_blocks_used, 0);
  EXPECT_EQ(s.generation.cancellations, 1u);
}

// A client that does not read: once more chunks than max_stream_backlog wait, the stream is cut
// (RESOURCE_EXHAUSTED), counted, and its blocks come back.
class StuckSink final : public GenerationSink {
 public:
  void Send(GenChunk) override { ++sent_; }
  void Finish(Result<GenFinal> result) override { inner_.Finish(std::move(result)); }
  size_t backlog() const override { return sent_; }  // nothing is ever written
  CollectSink& inner() { return inner_; }
  size_t sent() const { return sent_; }

 private:
  std::atomic<size_t> sent_{0};
  CollectSink inner_;
};

TEST_P(LlmModelTest, SlowReaderStreamIsCut) {
  std::mt19937 rng(13);
  LlmServingOptions o;
  o.kv_cache_bytes = 64 << 20;
  o.max_stream_backlog = 8;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  auto sink = std::make_shared<StuckSink>();
  model->Generate(Greedy(RandomPrompt(rng, 20), 500), sink);
  Result<GenFinal> result = sink->inner().Wait();
  EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted) << result.status().ToString();
  EXPECT_NE(result.status().message().find("reads too slowly"), std::string::npos);
  EXPECT_EQ(sink->sent(), 9u);  // cut at the first chunk past the limit
  const ModelStatistics s = SettledStatistics(*model);
  EXPECT_EQ(s.generation.stream_cuts, 1u);
  EXPECT_EQ(s.generation.kv_blocks_used, 0);
}

// A request that cannot fit the KV cache even alone is refused, naming what it needs.
TEST_P(LlmModelTest, KvCacheTooSmallForTheRequest) {
  std::mt19937 rng(17);
  Result<std::unique_ptr<llm::Model>> m = llm::Model::Load(path_);
  ASSERT_TRUE(m.ok());
  const llm::ModelConfig& mc = (*m)->config();
  LlmServingOptions o;
  o.kv_cache_bytes = 4 * 16 * mc.n_layers * mc.n_kv_heads * mc.head_dim * 2 * 2;  // 4 blocks
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  auto sink = std::make_shared<CollectSink>();
  model->Generate(Greedy(RandomPrompt(rng, 60), 10), sink);  // 70 tokens: 5 blocks
  Result<GenFinal> result = sink->Wait();
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().ToString();
  EXPECT_NE(result.status().message().find("5 blocks"), std::string::npos)
      << result.status().ToString();
  auto fits = std::make_shared<CollectSink>();
  model->Generate(Greedy(RandomPrompt(rng, 40), 10), fits);
  EXPECT_TRUE(fits->Wait().ok());
}

// Unloading drains: running sequences finish within the drain limit; past it they are
// cancelled (UNAVAILABLE), and requests after Shutdown are refused.
TEST_P(LlmModelTest, ShutdownDrainsThenCancels) {
  std::mt19937 rng(19);
  for (const bool long_drain : {true, false}) {
    LlmServingOptions o;
    o.kv_cache_bytes = 64 << 20;
    o.drain_timeout_ns = long_drain ? 60'000'000'000 : 0;
    std::shared_ptr<LlmModel> model = Make(o);
    ASSERT_NE(model, nullptr);
    auto running = std::make_shared<CollectSink>();
    model->Generate(Greedy(RandomPrompt(rng, 20), long_drain ? 40 : 1900), running);
    while (running->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    model->Shutdown();
    Result<GenFinal> result = running->Wait();
    if (long_drain) {
      EXPECT_TRUE(result.ok()) << result.status().ToString();
      EXPECT_EQ(running->ids().size(), 40u);
    } else {
      EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
      EXPECT_LT(running->ids().size(), 1900u);
    }
    auto after = std::make_shared<CollectSink>();
    model->Generate(Greedy(RandomPrompt(rng, 5), 2), after);
    EXPECT_EQ(after->Wait().status().code(), StatusCode::kUnavailable);
  }
}

// Refusals, each answered before any chunk, and the model keeps serving.
TEST_P(LlmModelTest, RefusesWhatCannotRun) {
  LlmServingOptions o;
  o.kv_cache_bytes = 64 << 20;
  o.context_length = 256;
  o.policy.max_queue_size = 1;
  o.policy.max_num_seqs = 1;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  std::mt19937 rng(1);
  const auto expect_refused = [&](std::unique_ptr<GenerateRequest> r, StatusCode code,
                                  const std::string& needle) {
    auto sink = std::make_shared<CollectSink>();
    model->Generate(std::move(r), sink);
    Result<GenFinal> result = sink->Wait();
    EXPECT_EQ(result.status().code(), code) << result.status().ToString();
    EXPECT_NE(result.status().message().find(needle), std::string::npos)
        << result.status().ToString();
    EXPECT_EQ(sink->chunks(), 0);
  };
  expect_refused(Greedy(RandomPrompt(rng, 256), 1), StatusCode::kInvalidArgument,
                 "the prompt has 256 tokens, but the model's context length is 256");
  expect_refused(Greedy(RandomPrompt(rng, 200), 100), StatusCode::kInvalidArgument,
                 "300 tokens were requested (200 in the prompt, 100 for the completion)");
  expect_refused(Greedy({}, 1), StatusCode::kInvalidArgument, "empty");
  auto bias = Greedy(RandomPrompt(rng, 5), 1);
  bias->sampling.logit_bias = {{1 << 30, 1.0f}};
  expect_refused(std::move(bias), StatusCode::kInvalidArgument, "outside the vocabulary");
  // One running, one waiting: the third is refused (the queue holds one).
  auto first = std::make_shared<CollectSink>(), second = std::make_shared<CollectSink>();
  model->Generate(Greedy(RandomPrompt(rng, 10), 200), first);
  while (first->chunks() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  model->Generate(Greedy(RandomPrompt(rng, 10), 2), second);
  expect_refused(Greedy(RandomPrompt(rng, 10), 2), StatusCode::kResourceExhausted, "full");
  EXPECT_TRUE(first->Wait().ok());
  EXPECT_TRUE(second->Wait().ok());
}

INSTANTIATE_TEST_SUITE_P(Models, LlmModelTest,
                         ::testing::Values("llama-small-q8_0.gguf", "qwen2-small-f32.gguf",
                                           "llama-small256-q4_k_m.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// Starts a greedy request and returns once its first step has run: requests submitted next wait
// behind it (static batching admits nothing while a batch runs) and then form one batch.
std::shared_ptr<CollectSink> StartHolder(LlmModel& model, const std::vector<int32_t>& prompt,
                                         int64_t new_tokens) {
  auto holder = std::make_shared<CollectSink>();
  model.Generate(Greedy(prompt, new_tokens), holder);
  const auto t0 = std::chrono::steady_clock::now();
  while (holder->chunks() == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return holder;
}

// Static batching is scheduling, not kernels: one model is enough (the batched outputs against
// the engine alone are checked on every model and ISA level above).
class LlmStaticBatchingTest : public LlmModelTest {
 protected:
  void SetUp() override {
    path_ = ModelPath("llama-small-q8_0.gguf");
    if (!fs::exists(path_)) GTEST_SKIP() << "test model llama-small-q8_0.gguf missing";
  }
};

// Static batching, compacting and padded: a batch forms from what waits when nothing runs and
// runs until its longest member finishes. Padded, a member that has finished keeps running (one
// row per step) until then; compacting, it leaves. The tokens the engine ran are counted from
// that definition: a holder request runs alone while four requests queue behind it, then the
// four form one batch (their prompts in one step, which samples each one's first token).
TEST_F(LlmStaticBatchingTest, BatchesRunUntilTheLongestMember) {
  std::mt19937 rng(29);
  const std::vector<int64_t> lengths = {5, 17, 30, 9};
  const std::vector<int64_t> news = {2, 5, 9, 3};
  constexpr int64_t kHolderPrompt = 6, kHolderNew = 150;
  std::vector<std::vector<int32_t>> prompts, expected;
  for (size_t i = 0; i < lengths.size(); ++i) {
    prompts.push_back(RandomPrompt(rng, lengths[i]));
    expected.push_back(GreedyAlone(path_, prompts.back(), news[i]));
  }
  const std::vector<int32_t> holder_prompt = RandomPrompt(rng, kHolderPrompt);
  for (const bool padded : {false, true}) {
    SCOPED_TRACE(padded ? "static_padded" : "static");
    LlmServingOptions o;
    o.kv_cache_bytes = 64 << 20;
    o.policy.max_num_seqs = 4;
    o.policy.static_batching = true;
    o.pad_static_batches = padded;
    std::shared_ptr<LlmModel> model = Make(o);
    ASSERT_NE(model, nullptr);
    std::shared_ptr<CollectSink> holder = StartHolder(*model, holder_prompt, kHolderNew);
    ASSERT_GT(holder->chunks(), 0);
    std::vector<std::shared_ptr<CollectSink>> sinks;
    for (size_t i = 0; i < prompts.size(); ++i) {
      sinks.push_back(std::make_shared<CollectSink>());
      model->Generate(Greedy(prompts[i], news[i]), sinks.back());
    }
    ASSERT_TRUE(holder->Wait().ok());
    int64_t prompt_total = 0, new_total = 0, longest = 0, compact_rows = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Result<GenFinal> r = sinks[i]->Wait();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(sinks[i]->first_chunk_at() >= holder->finished_at())
          << "prompt " << i << " ran before the holder finished";
      EXPECT_EQ(sinks[i]->ids(), expected[i]) << "prompt " << i;
      EXPECT_EQ(r->usage.completion_tokens, news[i]);
      prompt_total += lengths[i];
      new_total += news[i];
      longest = std::max(longest, news[i]);
      compact_rows += news[i] - 1;
    }
    const ModelStatistics s = SettledStatistics(*model);
    EXPECT_EQ(s.generation.running, 0);
    EXPECT_EQ(s.generation.kv_blocks_used, 0);
    EXPECT_EQ(s.generation.generation_tokens_total, static_cast<uint64_t>(kHolderNew + new_total));
    const int64_t holder_tokens = kHolderPrompt + kHolderNew - 1;
    const int64_t decode_rows =
        padded ? static_cast<int64_t>(prompts.size()) * (longest - 1) : compact_rows;
    EXPECT_EQ(static_cast<int64_t>(s.batch_size.sum), holder_tokens + prompt_total + decode_rows);
    EXPECT_EQ(static_cast<int64_t>(s.generation.steps), kHolderNew + longest);
  }
}

// Padded rows hold KV blocks; under KV pressure a padding row that the policy preempts leaves
// the batch instead of being recomputed, and the answers are unchanged.
TEST_F(LlmStaticBatchingTest, PaddingRowsLeaveWhenPreempted) {
  std::mt19937 rng(31);
  Result<std::unique_ptr<llm::Model>> m = llm::Model::Load(path_);
  ASSERT_TRUE(m.ok());
  const llm::ModelConfig& mc = (*m)->config();
  const int64_t block_bytes = 16 * mc.n_layers * mc.n_kv_heads * mc.head_dim * 2 * 2;
  // The long one arrives first (the policy preempts the latest arrival): 20 + 80 tokens need 7
  // blocks; the short ones (20 + 2) finish at once and pad alongside it, 2 blocks each and more.
  const std::vector<int64_t> news = {80, 2, 2, 2};
  std::vector<std::vector<int32_t>> prompts, expected;
  for (int64_t n : news) {
    prompts.push_back(RandomPrompt(rng, 20));
    expected.push_back(GreedyAlone(path_, prompts.back(), n));
  }
  LlmServingOptions o;
  o.kv_cache_bytes = 12 * block_bytes;
  o.policy.max_num_seqs = 4;
  o.policy.static_batching = true;
  o.pad_static_batches = true;
  std::shared_ptr<LlmModel> model = Make(o);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->kv_blocks(), 12);
  // Behind a holder (6 + 100 tokens, 7 blocks, alone), the four form one batch.
  std::shared_ptr<CollectSink> holder = StartHolder(*model, RandomPrompt(rng, 6), 100);
  ASSERT_GT(holder->chunks(), 0);
  ExpectGreedyOutputs(*model, prompts, news, expected);
  ASSERT_TRUE(holder->Wait().ok());
  const ModelStatistics s = SettledStatistics(*model);
  EXPECT_GT(s.generation.preemptions, 0u);
  EXPECT_EQ(s.generation.running, 0);
  EXPECT_EQ(s.generation.waiting, 0);
  EXPECT_EQ(s.generation.kv_blocks_used, 0);
  // A later request runs: nothing is left holding the batch.
  auto after = std::make_shared<CollectSink>();
  model->Generate(Greedy(prompts[1], 2), after);
  ASSERT_TRUE(after->Wait().ok());
  EXPECT_EQ(after->ids(), expected[1]);
}

// ---- config ----

TEST(LlmOptionsTest, ParametersAndRefusals) {
  inference::ModelConfig c;
  c.set_name("m");
  const auto set = [&](const std::string& k, const std::string& v) {
    (*c.mutable_parameters())[k].set_string_value(v);
  };
  set("max_num_seqs", "8");
  set("max_num_batched_tokens", "256");
  set("enable_prefix_caching", "false");
  set("kv_cache_dtype", "f32");
  set("batching", "static");
  c.mutable_dynamic_batching()->set_priority_levels(3);
  c.mutable_dynamic_batching()->set_default_priority_level(2);
  c.mutable_dynamic_batching()->mutable_default_queue_policy()->set_max_queue_size(5);
  c.mutable_dynamic_batching()->mutable_default_queue_policy()->set_default_timeout_microseconds(
      7000);
  Result<LlmServingOptions> o = LlmOptionsFromConfig(c);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->policy.max_num_seqs, 8);
  EXPECT_EQ(o->policy.max_num_batched_tokens, 256);
  EXPECT_FALSE(o->prefix_caching);
  EXPECT_EQ(o->kv_cache_dtype, "f32");
  EXPECT_TRUE(o->policy.static_batching);
  EXPECT_FALSE(o->pad_static_batches);
  set("batching", "static_padded");
  Result<LlmServingOptions> padded = LlmOptionsFromConfig(c);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  EXPECT_TRUE(padded->policy.static_batching);
  EXPECT_TRUE(padded->pad_static_batches);
  set("batching", "continuous");
  Result<LlmServingOptions> cont = LlmOptionsFromConfig(c);
  ASSERT_TRUE(cont.ok()) << cont.status().ToString();
  EXPECT_FALSE(cont->policy.static_batching);
  EXPECT_FALSE(cont->pad_static_batches);
  EXPECT_EQ(o->policy.priority_levels, 3u);
  EXPECT_EQ(o->policy.default_priority, 2u);
  EXPECT_EQ(o->policy.max_queue_size, 5u);
  EXPECT_EQ(o->default_timeout_us, 7000);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"max_num_seqs", "0"},      {"max_num_seqs", "x"}, {"block_size", "2000"},
      {"kv_cache_dtype", "int8"}, {"temperature", "3"},  {"enable_chunked_prefill", "y"},
      {"batching", "dynamic"},    {"unknown_key", "1"},  {"top_p", "0"},
      {"max_tokens", "-5"},
  };
  for (const auto& [k, v] : bad) {
    inference::ModelConfig b;
    b.set_name("m");
    (*b.mutable_parameters())[k].set_string_value(v);
    Result<LlmServingOptions> r = LlmOptionsFromConfig(b);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << k << "=" << v;
    EXPECT_NE(r.status().message().find("'" + k + "'"), std::string::npos) << r.status().ToString();
  }
}

TEST(LlmOptionsTest, AutoCompleteGivesTheLlmSignature) {
  inference::ModelConfig c;
  c.set_name("m");
  ASSERT_TRUE(AutoCompleteLlmConfig(&c).ok());
  EXPECT_EQ(c.backend(), "kiln_llm");
  ASSERT_EQ(c.input_size(), 4);
  EXPECT_EQ(c.input(0).name(), "text_input");
  EXPECT_FALSE(c.input(0).optional());
  EXPECT_TRUE(c.input(1).optional());
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).name(), "text_output");
  EXPECT_TRUE(c.model_transaction_policy().decoupled());
  inference::ModelConfig batching;
  batching.set_name("m");
  batching.set_max_batch_size(8);
  EXPECT_EQ(AutoCompleteLlmConfig(&batching).code(), StatusCode::kInvalidArgument);
  inference::ModelConfig wrong;
  wrong.set_name("m");
  wrong.add_input()->set_name("input_ids");
  EXPECT_EQ(AutoCompleteLlmConfig(&wrong).code(), StatusCode::kInvalidArgument);
}

TEST(LlmOptionsTest, RecognizesGenerativeVersionDirectories) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_llm_dir_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "gguf");
  fs::create_directories(dir / "hf");
  fs::create_directories(dir / "onnx");
  std::ofstream(dir / "gguf" / "model.gguf") << "x";
  std::ofstream(dir / "hf" / "config.json") << "{}";
  std::ofstream(dir / "hf" / "model.safetensors") << "x";
  std::ofstream(dir / "onnx" / "model.onnx") << "x";
  inference::ModelConfig none;
  EXPECT_TRUE(IsGenerativeModelDir(dir / "gguf", none));
  EXPECT_TRUE(IsGenerativeModelDir(dir / "hf", none));
  EXPECT_FALSE(IsGenerativeModelDir(dir / "onnx", none));
  EXPECT_EQ(LlmModelPath(dir / "gguf", none), dir / "gguf" / "model.gguf");
  EXPECT_EQ(LlmModelPath(dir / "hf", none), dir / "hf");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
