// SPDX-License-Identifier: Apache-2.0
// The engine's contract on real (random-weight) model files from tests/llm/make_models.py (the
// folder in KILN_LLM_TEST_MODELS, written by the CTest fixture llm_test_models): a flattened
// batch gives each sequence what it would get alone, a prompt in chunks what it gets in one
// step, prefix-cache hits and copy-on-write forks what recomputation gives; bad steps are
// refused before the cache is touched. The logits themselves are checked against the NumPy
// reference (tests/llm/reference.py) and llama.cpp by the CTests llm_reference and llm_llamacpp.

#include "llm/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "llm/llm_matmul.h"
#include "llm/model.h"
#include "llm/tokenizer.h"

namespace kiln::llm {
namespace {

std::string ModelPath(const std::string& name) {
  const char* dir = std::getenv("KILN_LLM_TEST_MODELS");
  return std::string(dir ? dir : "") + "/" + name;
}

class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = ModelPath(GetParam());
    if (std::getenv("KILN_LLM_TEST_MODELS") == nullptr || !std::filesystem::exists(path)) {
      GTEST_FAIL() << "model " << path
                   << " missing: set KILN_LLM_TEST_MODELS to make_models.py --preset test's folder";
    }
    Result<std::unique_ptr<Model>> m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    vocab_ = model_->config().vocab;
  }

  std::unique_ptr<Engine> NewEngine(bool prefix_caching = true, KvDtype dtype = KvDtype::kF32) {
    EngineOptions o;
    o.kv_dtype = dtype;
    o.kv_budget_bytes = 64 << 20;
    o.prefix_caching = prefix_caching;
    o.context_length = 512;
    Result<std::unique_ptr<Engine>> e = Engine::Create(*model_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }

  std::vector<int32_t> Tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& id : t)
      id = static_cast<int32_t>(300 + rng() % static_cast<uint32_t>(vocab_ - 300));
    return t;
  }

  // Runs `tokens` through a fresh sequence in steps of `chunk` tokens; returns the logits of
  // every position (one row each).
  std::vector<float> RunAlone(Engine& e, const std::vector<int32_t>& tokens, int chunk) {
    SequenceBlocks seq;
    std::vector<float> out(tokens.size() * static_cast<size_t>(vocab_));
    for (size_t p = 0; p < tokens.size(); p += static_cast<size_t>(chunk)) {
      const size_t n = std::min(static_cast<size_t>(chunk), tokens.size() - p);
      std::vector<BlockCopy> copies;
      EXPECT_TRUE(e.kv_cache().blocks().Reserve(&seq, static_cast<int64_t>(p + n), &copies).ok());
      StepSequence s{&seq, static_cast<int64_t>(p), std::span<const int32_t>(tokens).subspan(p, n),
                     static_cast<int64_t>(n)};
      Status st = e.Forward({&s, 1}, copies, out.data() + p * static_cast<size_t>(vocab_));
      EXPECT_TRUE(st.ok()) << st.ToString();
      e.kv_cache().blocks().Commit(&seq, tokens, static_cast<int64_t>(p + n));
    }
    e.kv_cache().blocks().Free(&seq);
    return out;
  }

  std::unique_ptr<Model> model_;
  int64_t vocab_ = 0;
};

double MaxAbsDiff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Rounding bounds. A row's products do not depend on the other rows of the step for quantized
// and F32 weights, and attention's tiles depend only on the sequence, so the differences are
// summation-order rounding. Half weights round the activations to 16 bits before the dot
// products, and the prompt (tiled) and decode kernels sum in different orders, so a last-bit
// difference upstream can move an activation across a 16-bit rounding boundary: about 1e-3 of
// the logits' scale for F16 (11-bit mantissa), 8 times that for BF16 (8 bits; measured 1.3e-2
// with the AVX2 kernels).
double Tolerance(const Model& m) {
  const std::string& t = m.config().file_type;
  if (t == "bf16") return 4e-2;
  return t == "f16" ? 1e-2 : 2e-4;
}

TEST_P(EngineTest, ChunkedPrefillMatchesOneStep) {
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> tokens = Tokens(45, 1);
  const std::vector<float> one = RunAlone(*e, tokens, 45);
  const std::vector<float> chunked = RunAlone(*e, tokens, 7);
  const std::vector<float> decode = RunAlone(*e, tokens, 1);
  EXPECT_LT(MaxAbsDiff(one.data(), chunked.data(), static_cast<int64_t>(one.size())),
            Tolerance(*model_));
  EXPECT_LT(MaxAbsDiff(one.data(), decode.data(), static_cast<int64_t>(one.size())),
            Tolerance(*model_));
}

TEST_P(EngineTest, MixedBatchMatchesSequencesAlone) {
  std::unique_ptr<Engine> e = NewEngine();
  // Three sequences: A is decoding (40 tokens in), B runs a prompt chunk at position 20, C starts.
  const std::vector<int32_t> a = Tokens(41, 2), b = Tokens(33, 3), c = Tokens(9, 4);
  const std::vector<float> a_alone = RunAlone(*e, a, 41);
  const std::vector<float> b_alone = RunAlone(*e, b, 33);
  const std::vector<float> c_alone = RunAlone(*e, c, 9);
  BlockManager& bm = e->kv_cache().blocks();
  SequenceBlocks sa, sb, sc;
  std::vector<BlockCopy> copies;
  std::vector<float> scratch(64 * static_cast<size_t>(vocab_));
  // History: A's first 40, B's first 20.
  ASSERT_TRUE(bm.Reserve(&sa, 40, &copies).ok());
  ASSERT_TRUE(bm.Reserve(&sb, 20, &copies).ok());
  StepSequence hist[] = {{&sa, 0, std::span<const int32_t>(a).first(40), 0},
                         {&sb, 0, std::span<const int32_t>(b).first(20), 0}};
  ASSERT_TRUE(e->Forward(hist, copies, scratch.data()).ok());
  bm.Commit(&sa, a, 40);
  bm.Commit(&sb, b, 20);
  // The mixed step: A's decode token, B's 13-token chunk (all logits), C's whole prompt (last).
  ASSERT_TRUE(bm.Reserve(&sa, 41, &copies).ok());
  ASSERT_TRUE(bm.Reserve(&sb, 33, &copies).ok());
  ASSERT_TRUE(bm.Reserve(&sc, 9, &copies).ok());
  StepSequence step[] = {{&sa, 40, std::span<const int32_t>(a).subspan(40, 1), 1},
                         {&sb, 20, std::span<const int32_t>(b).subspan(20, 13), 13},
                         {&sc, 0, std::span<const int32_t>(c), 1}};
  std::vector<float> logits(15 * static_cast<size_t>(vocab_));
  ASSERT_TRUE(e->Forward(step, copies, logits.data()).ok());
  const int64_t v = vocab_;
  EXPECT_LT(MaxAbsDiff(logits.data(), a_alone.data() + 40 * v, v), Tolerance(*model_));
  EXPECT_LT(MaxAbsDiff(logits.data() + v, b_alone.data() + 20 * v, 13 * v), Tolerance(*model_));
  EXPECT_LT(MaxAbsDiff(logits.data() + 14 * v, c_alone.data() + 8 * v, v), Tolerance(*model_));
  bm.Free(&sa);
  bm.Free(&sb);
  bm.Free(&sc);
  EXPECT_EQ(bm.stats().used, 0);
}

TEST_P(EngineTest, PrefixCacheHitGivesRecomputedLogits) {
  std::unique_ptr<Engine> e = NewEngine(/*prefix_caching=*/true);
  std::unique_ptr<Engine> plain = NewEngine(/*prefix_caching=*/false);
  std::vector<int32_t> first = Tokens(50, 5);
  std::vector<int32_t> second(first.begin(), first.begin() + 40);
  for (int32_t t : Tokens(12, 6)) second.push_back(t);
  BlockManager& bm = e->kv_cache().blocks();
  SequenceBlocks s1;
  std::vector<BlockCopy> copies;
  std::vector<float> logits(static_cast<size_t>(vocab_));
  ASSERT_TRUE(bm.Reserve(&s1, 50, &copies).ok());
  StepSequence st1{&s1, 0, first, 1};
  ASSERT_TRUE(e->Forward({&st1, 1}, copies, logits.data()).ok());
  bm.Commit(&s1, first, 50);
  bm.Free(&s1);  // its full blocks stay cached
  SequenceBlocks s2;
  const int64_t matched = bm.MatchPrefix(second, &s2);
  EXPECT_EQ(matched, 32);  // two full 16-token blocks of the shared 40
  ASSERT_TRUE(bm.Reserve(&s2, static_cast<int64_t>(second.size()), &copies).ok());
  StepSequence st2{&s2, matched, std::span<const int32_t>(second).subspan(matched),
                   static_cast<int64_t>(second.size()) - matched};
  std::vector<float> hit(static_cast<size_t>(st2.num_logits * vocab_));
  ASSERT_TRUE(e->Forward({&st2, 1}, copies, hit.data()).ok());
  const std::vector<float> fresh = RunAlone(*plain, second, 52);
  EXPECT_LT(
      MaxAbsDiff(hit.data(), fresh.data() + matched * vocab_, static_cast<int64_t>(hit.size())),
      Tolerance(*model_));
  bm.Free(&s2);
}

TEST_P(EngineTest, ForkedSequencesCopyOnWrite) {
  std::unique_ptr<Engine> e = NewEngine();
  const std::vector<int32_t> prompt = Tokens(21, 7);  // ends inside the second block
  BlockManager& bm = e->kv_cache().blocks();
  SequenceBlocks parent, child;
  std::vector<BlockCopy> copies;
  std::vector<float> logits(2 * static_cast<size_t>(vocab_));
  ASSERT_TRUE(bm.Reserve(&parent, 21, &copies).ok());
  StepSequence st{&parent, 0, prompt, 1};
  ASSERT_TRUE(e->Forward({&st, 1}, copies, logits.data()).ok());
  bm.Commit(&parent, prompt, 21);
  bm.Fork(parent, &child);
  // Each continues with its own token at position 21, in one step.
  std::vector<int32_t> pa = prompt, pb = prompt;
  pa.push_back(1000);
  pb.push_back(2000);
  copies.clear();
  ASSERT_TRUE(bm.Reserve(&parent, 22, &copies).ok());
  ASSERT_TRUE(bm.Reserve(&child, 22, &copies).ok());
  EXPECT_EQ(copies.size(), 1u);  // the shared partial block is copied once
  StepSequence both[] = {{&parent, 21, std::span<const int32_t>(pa).subspan(21), 1},
                         {&child, 21, std::span<const int32_t>(pb).subspan(21), 1}};
  ASSERT_TRUE(e->Forward(both, copies, logits.data()).ok());
  const std::vector<float> a = RunAlone(*e, pa, 22);
  const std::vector<float> b = RunAlone(*e, pb, 22);
  EXPECT_LT(MaxAbsDiff(logits.data(), a.data() + 21 * vocab_, vocab_), Tolerance(*model_));
  EXPECT_LT(MaxAbsDiff(logits.data() + vocab_, b.data() + 21 * vocab_, vocab_), Tolerance(*model_));
  bm.Free(&parent);
  bm.Free(&child);
  EXPECT_EQ(bm.stats().used, 0);
}

TEST_P(EngineTest, BadStepsAreRefused) {
  std::unique_ptr<Engine> e = NewEngine();
  BlockManager& bm = e->kv_cache().blocks();
  SequenceBlocks seq;
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.Reserve(&seq, 4, &copies).ok());
  std::vector<float> logits(4 * static_cast<size_t>(vocab_));
  const std::vector<int32_t> bad_id = {1, 2, static_cast<int32_t>(vocab_), 3};
  StepSequence s{&seq, 0, bad_id, 1};
  Status st = e->Forward({&s, 1}, copies, logits.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos) << st.message();
  const std::vector<int32_t> ok = {1, 2, 3, 4, 5};
  StepSequence too_long{&seq, 0, ok, 1};  // 5 positions, table covers 16: fine; past: refused
  StepSequence uncovered{&seq, 14, ok, 1};
  st = e->Forward({&uncovered, 1}, copies, logits.data());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  StepSequence past{&seq, e->context_length() - 2, ok, 1};
  st = e->Forward({&past, 1}, copies, logits.data());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  StepSequence many_logits{&seq, 0, ok, 6};
  EXPECT_EQ(e->Forward({&many_logits, 1}, copies, logits.data()).code(),
            StatusCode::kInvalidArgument);
  StepSequence empty{&seq, 0, {}, 0};
  EXPECT_EQ(e->Forward({&empty, 1}, copies, logits.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(e->Forward({&too_long, 1}, copies, logits.data()).ok());
  bm.Free(&seq);
  // A context longer than the model's.
  EngineOptions o;
  o.context_length = model_->config().context_length + 1;
  Result<std::unique_ptr<Engine>> longer = Engine::Create(*model_, o);
  EXPECT_EQ(longer.status().code(), StatusCode::kInvalidArgument);
}

TEST_P(EngineTest, HalfPrecisionKvCacheStaysClose) {
  // F16 and BF16 K/V change the logits by rounding only: by ~1e-3 of their scale for float
  // weights, and up to the activation quantization's own error (a few %: check_reference.py)
  // for quantized weights, where a rounded K/V value can move an activation across a
  // quantization step.
  std::unique_ptr<Engine> f32 = NewEngine(true, KvDtype::kF32);
  std::unique_ptr<Engine> f16 = NewEngine(true, KvDtype::kF16);
  std::unique_ptr<Engine> bf16 = NewEngine(true, KvDtype::kBF16);
  const std::vector<int32_t> tokens = Tokens(30, 8);
  const std::vector<float> a = RunAlone(*f32, tokens, 30);
  const std::vector<float> b = RunAlone(*f16, tokens, 30);
  const std::vector<float> c = RunAlone(*bf16, tokens, 30);
  double scale = 0;
  for (float x : a) scale = std::max(scale, std::abs(static_cast<double>(x)));
  const double f16_diff = MaxAbsDiff(a.data(), b.data(), static_cast<int64_t>(a.size()));
  const double bf16_diff = MaxAbsDiff(a.data(), c.data(), static_cast<int64_t>(a.size()));
  EXPECT_LT(f16_diff, 5e-2 * scale);
  EXPECT_LT(bf16_diff, 1e-1 * scale);
  EXPECT_GT(bf16_diff, 0.0);  // it did round
}

// A model loaded while the kernels read Q4_0 / Q8_0 packed holds packed copies, and its logits
// are those of the same model loaded without them (loaded under an AVX2 cap, then run by the
// same AVX-512 kernels on the weights as stored): the packed layout changes where the bytes are,
// not the arithmetic, so the two agree bit for bit.
TEST_P(EngineTest, PackedWeightsGiveTheSameLogits) {
  const bool packs = MatMulReadsPacked(GgmlType::kQ4_0);
  const std::string& type = model_->config().file_type;
  const bool packable = type == "q4_0" || type == "q8_0";
  if (!packs || !packable) {
    EXPECT_EQ(model_->packed_bytes(), 0u) << type << " on " << MatMulKernelName();
    GTEST_SKIP() << "no packed copies: " << type << " weights, " << MatMulKernelName()
                 << " kernels";
  }
  EXPECT_GT(model_->packed_bytes(), 0u);
  std::unique_ptr<Model> as_stored;
  {
    cpu::ScopedMaxIsa cap(cpu::Isa::kAvx2);
    Result<std::unique_ptr<Model>> m = Model::Load(ModelPath(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    as_stored = std::move(*m);
  }
  EXPECT_EQ(as_stored->packed_bytes(), 0u);
  const std::vector<int32_t> tokens = Tokens(21, 5);
  std::unique_ptr<Engine> packed_engine = NewEngine();
  EngineOptions o;  // as NewEngine's
  o.kv_dtype = KvDtype::kF32;
  o.kv_budget_bytes = 64 << 20;
  o.prefix_caching = true;
  o.context_length = 512;
  Result<std::unique_ptr<Engine>> plain_engine = Engine::Create(*as_stored, o);
  ASSERT_TRUE(plain_engine.ok()) << plain_engine.status().ToString();
  for (int chunk : {21, 1}) {  // a prompt step and decode steps
    const std::vector<float> packed = RunAlone(*packed_engine, tokens, chunk);
    const std::vector<float> plain = RunAlone(**plain_engine, tokens, chunk);
    EXPECT_EQ(packed, plain) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineTest,
                         ::testing::Values("llama-small-f32.gguf", "llama-small-q4_0.gguf",
                                           "llama-small256-q4_k_m.gguf", "qwen2-small-q8_0.gguf",
                                           "qwen3-small-f16.gguf", "llama-small-bf16-hf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace kiln::llm
