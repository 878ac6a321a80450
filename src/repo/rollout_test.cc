// SPDX-License-Identifier: Apache-2.0
// Rollout routing without the importer or kernels: fake served versions that answer with a
// tensor of their own, a fake manager holding them.
#include "repo/rollout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "repo/model_config.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using testing::FloatInput;
using testing::FloatValues;
using ::testing::HasSubstr;
using testing::ParseConfigOrDie;

// Answers every request with Y = `scale` * X (or fails with `fail`), reporting `queue_ns` as its
// queue time and `pending` as its queue length.
class FakeModel final : public ServedModel {
 public:
  FakeModel(int64_t version, float scale, inference::ModelConfig config)
      : version_(version), scale_(scale), config_(std::move(config)) {
    signature_.name = config_.name();
    signature_.max_batch_size = config_.max_batch_size();
  }
  const std::string& name() const override { return config_.name(); }
  int64_t version() const override { return version_; }
  const ModelSignature& signature() const override { return signature_; }
  const inference::ModelConfig* model_config() const override { return &config_; }
  size_t PendingRequestCount() const override { return pending; }
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    ++requests;
    last_precision = request->precision;
    if (!fail.ok()) {
      sink->Finish(fail);
      return;
    }
    InferResponse r;
    r.model_name = name();
    r.model_version = version_;
    r.timing.queue_ns = queue_ns;
    std::vector<float> v = FloatValues(request->inputs.at(0).tensor);
    for (float& x : v) x *= scale_;
    const Shape shape = request->inputs.at(0).tensor.view().shape();
    r.outputs.push_back(
        {"Y", FloatInput("Y", std::vector<int64_t>(shape.dims().begin(), shape.dims().end()), v)
                  .tensor});
    sink->Finish(std::move(r));
  }
  void Shutdown() override { shut_down = true; }
  void SetLoadDuration(uint64_t) override {}

  int requests = 0;
  std::string last_precision;
  Status fail;
  uint64_t queue_ns = 0;
  size_t pending = 0;
  bool shut_down = false;

 private:
  int64_t version_;
  float scale_;
  inference::ModelConfig config_;
  ModelSignature signature_;
};

class FakeManager final : public ModelManager {
 public:
  Status LoadInitialModels() override { return Status::OK(); }
  Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                int64_t version) const override {
    if (name != "m" || versions.empty()) return Status::NotFound("unknown model");
    if (version == -1) return versions.rbegin()->second;
    auto it = versions.find(version);
    if (it == versions.end()) return Status::NotFound("unknown version");
    return it->second;
  }
  std::vector<int64_t> ReadyVersions(std::string_view) const override { return {}; }
  std::vector<ModelIndexEntry> Index() const override { return {}; }
  bool AllModelsReady() const override { return true; }
  void Shutdown() override {}
  Status LoadModel(std::string_view, const ModelLoadOptions&) override { return Status::OK(); }
  Status UnloadModel(std::string_view, const ModelUnloadOptions&) override { return Status::OK(); }
  Status Poll() override { return Status::OK(); }

  std::map<int64_t, std::shared_ptr<LoadedModel>> versions;
};

constexpr char kSplitConfig[] = R"(
  name: "m" max_batch_size: 4
  input { name: "X" data_type: TYPE_FP32 dims: 2 }
  output { name: "Y" data_type: TYPE_FP32 dims: 2 }
  rollout {
    split { version: 1 weight: 30 } split { version: 2 weight: 70 }
    sticky_header: "x-user"
  })";

std::unique_ptr<InferRequest> Request(std::vector<float> x = {1, 2}) {
  auto r = std::make_unique<InferRequest>();
  const auto n = static_cast<int64_t>(x.size());
  r->inputs.push_back(FloatInput("X", {1, n}, std::move(x)));
  return r;
}

Result<InferResponse> Answer(LoadedModel& model, std::unique_ptr<InferRequest> request) {
  std::optional<Result<InferResponse>> out;
  model.Infer(std::move(request), [&](Result<InferResponse> r) { out = std::move(r); });
  EXPECT_TRUE(out.has_value());
  return out.has_value() ? std::move(*out) : Result<InferResponse>(Status::Internal("none"));
}

TEST(RolloutTest, StickySlotIsFnv1aOfModelAndKeyModHundred) {
  // Worked out with Python: FNV-1a 64 over b"m\0alice" and b"resnet\0user-42", mod 100.
  EXPECT_EQ(StickySlot("m", "alice"), 50u);
  EXPECT_EQ(StickySlot("resnet", "user-42"), 86u);
  // The model is part of the key: the same user may land elsewhere on another model.
  EXPECT_NE(StickySlot("a", "k"), StickySlot("b", "k"));
}

TEST(RolloutTest, ArmForSlotFollowsCumulativeWeights) {
  const inference::ModelConfig c = ParseConfigOrDie(kSplitConfig);
  EXPECT_EQ(ArmForSlot(c.rollout(), 0), 1);
  EXPECT_EQ(ArmForSlot(c.rollout(), 29), 1);
  EXPECT_EQ(ArmForSlot(c.rollout(), 30), 2);
  EXPECT_EQ(ArmForSlot(c.rollout(), 99), 2);
}

TEST(RolloutTest, ValidationNamesTheProblem) {
  const auto error = [](std::string rollout) {
    inference::ModelConfig c = ParseConfigOrDie(kSplitConfig);
    c.clear_rollout();
    inference::ModelConfig r = ParseConfigOrDie("name: \"m\" rollout { " + rollout + " }");
    *c.mutable_rollout() = r.rollout();
    return std::string(ValidateRolloutConfig(c).message());
  };
  EXPECT_EQ(error("split { version: 1 weight: 50 } split { version: 2 weight: 50 }"), "");
  EXPECT_THAT(error("split { version: 1 weight: 60 } split { version: 2 weight: 30 }"),
              HasSubstr("weights sum to 90, not 100"));
  EXPECT_THAT(error("split { version: 1 weight: 50 } split { version: 1 weight: 50 }"),
              HasSubstr("names version 1 twice"));
  EXPECT_THAT(error("split { version: 0 weight: 100 }"), HasSubstr("versions are >= 1"));
  EXPECT_THAT(error("split { version: 1 weight: 100 } sticky_header: \"X-User\""),
              HasSubstr("must be a lowercase header name"));
  EXPECT_THAT(error("sticky_header: \"x-user\""), HasSubstr("needs a split"));
  EXPECT_THAT(error("shadow { version: 2 fraction: 0 }"), HasSubstr("fraction must be in (0, 1]"));
  EXPECT_THAT(error("shadow { version: 2 fraction: 1.5 }"), HasSubstr("fraction must be"));
  EXPECT_THAT(error("precision_variants: \"fp8\""), HasSubstr("is not one of fp32"));
  EXPECT_THAT(error("precision_variants: \"int8\""), HasSubstr("needs optimization"));
  EXPECT_THAT(error("precision_variants: \"bf16\" precision_variants: \"bf16\""),
              HasSubstr("listed twice"));
  EXPECT_THAT(error("precision_variants: \"bf16\" best_effort_precision: \"fp16\""),
              HasSubstr("not one of its precision_variants"));
  EXPECT_THAT(error("overload_queue_us: 100"), HasSubstr("needs precision_variants"));
}

TEST(RolloutTest, RouteModelSplitsStickyAndFallsBack) {
  const inference::ModelConfig c = ParseConfigOrDie(kSplitConfig);
  FakeManager manager;
  auto v1 = std::make_shared<RolloutModel>(std::make_shared<FakeModel>(1, 1.0f, c),
                                           std::vector<RolloutModel::Variant>{}, c.rollout(), "");
  auto v2 = std::make_shared<RolloutModel>(std::make_shared<FakeModel>(2, 2.0f, c),
                                           std::vector<RolloutModel::Variant>{}, c.rollout(), "");
  manager.versions = {{1, v1}, {2, v2}};
  int counts[3] = {0, 0, 0};
  for (int user = 0; user < 400; ++user) {
    const std::string key = "u" + std::to_string(user);
    const int64_t expected = StickySlot("m", key) < 30 ? 1 : 2;
    for (int repeat = 0; repeat < 2; ++repeat) {
      Result<std::shared_ptr<LoadedModel>> m =
          RouteModel(manager, "m", -1, [&](std::string_view h) {
            return h == "x-user" ? std::string_view(key) : std::string_view();
          });
      ASSERT_TRUE(m.ok());
      ASSERT_EQ((*m)->version(), expected) << key;
    }
    ++counts[expected];
  }
  EXPECT_GT(counts[1], 80);  // about 120 of 400
  EXPECT_LT(counts[1], 160);
  EXPECT_EQ(v1->Statistics().rollout.routed + v2->Statistics().rollout.routed, 800u);
  // An explicit version is served as asked and not counted.
  ASSERT_EQ((*RouteModel(manager, "m", 1, nullptr))->version(), 1);
  EXPECT_EQ(v1->Statistics().rollout.routed + v2->Statistics().rollout.routed, 800u);
  // Version 2 gone: its share goes to the highest ready version (1).
  manager.versions.erase(2);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ((*RouteModel(manager, "m", -1, nullptr))->version(), 1);
  }
}

TEST(RolloutTest, CompareAnswersTopOneAndMaxDifference) {
  InferResponse a, b;
  a.outputs.push_back({"Y", FloatInput("Y", {2, 3}, {0.1f, 0.7f, 0.2f, 0.5f, 0.4f, 0.1f}).tensor});
  b.outputs.push_back({"Y", FloatInput("Y", {2, 3}, {0.1f, 0.6f, 0.3f, 0.3f, 0.6f, 0.1f}).tensor});
  const Agreement g = CompareAnswers(a, b, /*batched=*/true);
  EXPECT_TRUE(g.comparable);
  EXPECT_EQ(g.top1_rows, 2u);
  EXPECT_EQ(g.top1_agree, 1u);  // row 0: 1 and 1; row 1: 0 and 1
  EXPECT_NEAR(g.max_abs_diff, 0.2, 1e-6);
  // Another shape: nothing comparable.
  InferResponse c;
  c.outputs.push_back({"Y", FloatInput("Y", {3, 2}, {0, 0, 0, 0, 0, 0}).tensor});
  EXPECT_FALSE(CompareAnswers(a, c, true).comparable);
}

TEST(RolloutTest, ShadowFailureLeavesTheAnswerAndIsCounted) {
  inference::ModelConfig c = ParseConfigOrDie(kSplitConfig);
  c.mutable_rollout()->clear_split();
  c.mutable_rollout()->clear_sticky_header();
  c.mutable_rollout()->mutable_shadow()->set_version(2);
  c.mutable_rollout()->mutable_shadow()->set_fraction(1.0);
  FakeManager manager;
  auto served =
      std::make_shared<RolloutModel>(std::make_shared<FakeModel>(1, 1.0f, c),
                                     std::vector<RolloutModel::Variant>{}, c.rollout(), "");
  auto shadow = std::make_shared<FakeModel>(2, 3.0f, c);
  manager.versions = {{1, served}};
  // With the shadow version absent, every mirror is a failure; the answers are served.
  for (int i = 0; i < 3; ++i) {
    Result<std::shared_ptr<LoadedModel>> m = RouteModel(manager, "m", -1, nullptr);
    ASSERT_TRUE(m.ok());
    Result<InferResponse> r = Answer(**m, Request({1, 2}));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{1, 2}));
  }
  RolloutStatistics s = served->Statistics().rollout;
  EXPECT_EQ(s.shadow_failures, 3u);
  EXPECT_EQ(s.shadow_compared, 0u);

  // A shadow version that fails its requests: counted, the answers still the served ones.
  shadow->fail = Status::Internal("shadow broke");
  manager.versions = {{1, served}, {2, shadow}};
  Result<std::shared_ptr<LoadedModel>> m = RouteModel(manager, "m", 1, nullptr);
  ASSERT_EQ((*m)->version(), 1);  // explicit: no shadow
  ASSERT_TRUE(Answer(**m, Request({4, 5})).ok());
  EXPECT_EQ(shadow->requests, 0);
  served->ResetStatistics();
  // Mirrored, as RouteModel's wrapper does for a request naming no version.
  served->InferShadowed(Request({4, 5}), CallbackSink([&](Result<InferResponse> r) {
                          ASSERT_TRUE(r.ok());
                          EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{4, 5}));
                        }),
                        shadow, served);
  EXPECT_EQ(shadow->requests, 1);
  s = served->Statistics().rollout;
  EXPECT_EQ(s.shadow_requests, 1u);
  EXPECT_EQ(s.shadow_failures, 1u);

  // A working shadow: compared, difference observed (3x vs 1x of {4, 5}: 10).
  shadow->fail = Status::OK();
  served->InferShadowed(Request({4, 5}), CallbackSink([](Result<InferResponse>) {}), shadow,
                        served);
  s = served->Statistics().rollout;
  EXPECT_EQ(s.shadow_requests, 2u);
  EXPECT_EQ(s.shadow_compared, 1u);
  EXPECT_EQ(s.shadow_top1_rows, 1u);
  EXPECT_EQ(s.shadow_top1_agree, 1u);
  EXPECT_EQ(s.shadow_max_abs_diff.count, 1u);
  EXPECT_DOUBLE_EQ(s.shadow_max_abs_diff.sum, 10.0);
}

TEST(RolloutTest, PrecisionVariantsAndOverloadMoves) {
  inference::ModelConfig c = ParseConfigOrDie(kSplitConfig);
  c.clear_rollout();
  c.mutable_rollout()->add_precision_variants("bf16");
  c.mutable_rollout()->add_precision_variants("int8");
  c.mutable_rollout()->set_overload_queue_us(1000);  // 1 ms
  auto own = std::make_shared<FakeModel>(1, 1.0f, c);
  auto bf16 = std::make_shared<FakeModel>(1, 2.0f, c);
  auto int8 = std::make_shared<FakeModel>(1, 3.0f, c);
  RolloutModel model(own, {{"bf16", bf16}, {"int8", int8}}, c.rollout(), "int8");

  // Asked for by name; the own precision of an as-stored model answers "fp32".
  EXPECT_EQ(FloatValues(Answer(model, Request({1, 1}))->outputs[0].tensor)[0], 1.0f);
  auto ask = [&](std::string p) {
    auto r = Request({1, 1});
    r->precision = std::move(p);
    return Answer(model, std::move(r));
  };
  EXPECT_EQ(FloatValues(ask("bf16")->outputs[0].tensor)[0], 2.0f);
  EXPECT_EQ(FloatValues(ask("int8")->outputs[0].tensor)[0], 3.0f);
  EXPECT_EQ(FloatValues(ask("fp32")->outputs[0].tensor)[0], 1.0f);
  Result<InferResponse> missing = ask("fp16");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("no 'fp16' precision variant"));
  EXPECT_THAT(missing.status().message(), HasSubstr("as stored, bf16, int8"));

  auto best_effort = [&] {
    auto r = Request({1, 1});
    r->service_class = "best_effort";
    return FloatValues(Answer(model, std::move(r))->outputs[0].tensor)[0];
  };
  // Not overloaded: best-effort requests stay.
  EXPECT_EQ(best_effort(), 1.0f);
  EXPECT_FALSE(model.Overloaded());
  // The own variant's answers report 5 ms in the queue, and it has a queue: overloaded after
  // enough answers lift the weighted mean over 1 ms.
  own->queue_ns = 5'000'000;
  own->pending = 3;
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(Answer(model, Request()).ok());
  EXPECT_TRUE(model.Overloaded());
  EXPECT_EQ(best_effort(), 3.0f);  // moved to int8
  {
    auto r = Request({1, 1});  // a guaranteed request stays
    EXPECT_EQ(FloatValues(Answer(model, std::move(r))->outputs[0].tensor)[0], 1.0f);
  }
  // The queue empties: moves stop at once.
  own->pending = 0;
  EXPECT_FALSE(model.Overloaded());
  EXPECT_EQ(best_effort(), 1.0f);
  // Queue times recover: no longer overloaded even with a queue.
  own->pending = 3;
  own->queue_ns = 0;
  for (int i = 0; i < 60; ++i) EXPECT_TRUE(Answer(model, Request()).ok());
  EXPECT_FALSE(model.Overloaded());

  const RolloutStatistics s = model.Statistics().rollout;
  ASSERT_EQ(s.variants.size(), 3u);
  EXPECT_EQ(s.variants[0].precision, "");
  EXPECT_EQ(s.variants[1].precision, "bf16");
  EXPECT_EQ(s.variants[1].requests, 1u);
  EXPECT_EQ(s.variants[2].requests, 2u);  // asked once, moved once
  EXPECT_EQ(s.variants[2].overload_moves, 1u);
  EXPECT_EQ(s.variants[0].overload_moves, 0u);

  model.Shutdown();
  EXPECT_TRUE(own->shut_down && bf16->shut_down && int8->shut_down);
}

}  // namespace
}  // namespace kiln
