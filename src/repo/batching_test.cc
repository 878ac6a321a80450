// SPDX-License-Identifier: Apache-2.0
// Batch assembly: the plan from the config (padding, crops, ragged inputs, every config error),
// the policy config from dynamic_batching, request shapes under padding, and the copies that
// build batch tensors and slice outputs back (expected values written out by hand).
#include "repo/batching.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "repo/model_config.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::ParseConfigOrDie;
using ::testing::HasSubstr;

constexpr std::string_view kPadded = R"cfg(
  name: "seq" max_batch_size: 8
  input [ { name: "tokens" data_type: TYPE_FP32 dims: [ -1, 2 ]
            padding { dims: [ 0 ] buckets: [ 2, 4, 8 ] } },
          { name: "scale" data_type: TYPE_FP32 dims: [ 1 ] } ]
  output [ { name: "out" data_type: TYPE_FP32 dims: [ -1, 2 ]
             crop { dims { dim: 0 input: "tokens" input_dim: 0 } } },
           { name: "sum" data_type: TYPE_FP32 dims: [ 1 ] } ])cfg";

std::unique_ptr<InferRequest> Request(std::vector<InferInput> inputs) {
  auto r = std::make_unique<InferRequest>();
  r->inputs = std::move(inputs);
  return r;
}

std::vector<float> Iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(BatchingPlanTest, PaddingCropAndRaggedFromConfig) {
  Result<BatchingPlan> plan = MakeBatchingPlan(ParseConfigOrDie(kPadded));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->batching);
  EXPECT_TRUE(plan->reshapes_inputs);
  ASSERT_EQ(plan->inputs.size(), 2u);
  EXPECT_EQ(plan->inputs[0].pad_dims, std::vector<int>{0});
  EXPECT_EQ(plan->inputs[0].buckets, (std::vector<int64_t>{2, 4, 8}));
  EXPECT_TRUE(plan->inputs[1].pad_dims.empty());
  ASSERT_EQ(plan->outputs.size(), 2u);
  ASSERT_EQ(plan->outputs[0].crops.size(), 1u);
  EXPECT_EQ(plan->outputs[0].crops[0].input, 0);
  EXPECT_TRUE(plan->outputs[1].crops.empty());

  Result<BatchingPlan> ragged = MakeBatchingPlan(ParseConfigOrDie(R"cfg(
    name: "r" max_batch_size: 4
    input { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
    output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] })cfg"));
  ASSERT_TRUE(ragged.ok());
  EXPECT_TRUE(ragged->inputs[0].ragged);
  // Without a batch dim there is nothing to be ragged along.
  Result<BatchingPlan> unbatched = MakeBatchingPlan(ParseConfigOrDie(R"cfg(
    name: "r" max_batch_size: 0
    input { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
    output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] })cfg"));
  ASSERT_TRUE(unbatched.ok());
  EXPECT_FALSE(unbatched->inputs[0].ragged);
  EXPECT_FALSE(unbatched->reshapes_inputs);
}

TEST(BatchingPlanTest, ConfigErrors) {
  const auto with = [](std::string input_extra, std::string output_extra = "", int max_batch = 8) {
    return fmt::format(R"cfg(
      name: "m" max_batch_size: {}
      input {{ name: "x" data_type: TYPE_FP32 dims: [ -1, 3 ] {} }}
      output {{ name: "y" data_type: TYPE_FP32 dims: [ -1, 3 ] {} }})cfg",
                       max_batch, input_extra, output_extra);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with("padding { dims: [0] buckets: [4] }", "", 0),
       "model 'm': input 'x': padding needs a batching model (max_batch_size > 0)"},
      {with("padding { dims: [2] buckets: [4] }"),
       "input 'x': padding dim 2 is out of range for dims [-1,3]"},
      {with("padding { dims: [1] buckets: [4] }"),
       "input 'x': padding dim 1 is not variable (-1) in dims [-1,3]"},
      {with("padding { dims: [0, 0] buckets: [4] }"), "padding dim 0 is listed twice"},
      {with("padding { buckets: [4] }"), "padding lists no dims"},
      {with("padding { dims: [0] }"), "padding lists no buckets"},
      {with("padding { dims: [0] buckets: [4, 4] }"),
       "padding buckets must be increasing sizes >= 1, got [4,4]"},
      {with("padding { dims: [0] buckets: [0, 4] }"), "padding buckets must be increasing"},
      {with("allow_ragged_batch: true padding { dims: [0] buckets: [4] }"),
       "padding cannot be combined with allow_ragged_batch"},
      {with("allow_ragged_batch: true reshape { shape: [ -1 ] }"),
       "allow_ragged_batch cannot be combined with reshape"},
      {with("padding { dims: [0] buckets: [4] }", "crop { dims { dim: 1 input: \"x\" } }"),
       "output 'y': crop dim 1 is not a variable (-1) dim of dims [-1,3]"},
      {with("padding { dims: [0] buckets: [4] }", "crop { dims { dim: 0 input: \"z\" } }"),
       "crop dim 0 follows input 'z', which is not an input"},
      {with("", "crop { dims { dim: 0 input: \"x\" } }"),
       "crop dim 0 follows dim 0 of input 'x', which is not padded"},
      {with("padding { dims: [0] buckets: [4] }",
            "crop { dims { dim: 0 input: \"x\" } dims { dim: 0 input: \"x\" } }"),
       "crop dim 0 is listed twice"},
      {with("", "crop { dims { dim: 0 input: \"x\" } }", 0),
       "output 'y': crop needs a batching model"},
  };
  for (const auto& [text, message] : cases) {
    Result<BatchingPlan> plan = MakeBatchingPlan(ParseConfigOrDie(text));
    ASSERT_FALSE(plan.ok()) << message;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr(message));
  }
}

TEST(BatchPolicyConfigTest, FromDynamicBatching) {
  Result<BatchPolicyConfig> none =
      MakeBatchPolicyConfig(ParseConfigOrDie(R"cfg(name: "m" max_batch_size: 4)cfg"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->dynamic_batching);
  EXPECT_EQ(none->max_batch_size, 4);

  Result<BatchPolicyConfig> c = MakeBatchPolicyConfig(ParseConfigOrDie(R"cfg(
    name: "m" max_batch_size: 8
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 preserve_ordering: true
      priority_levels: 2 default_priority_level: 2
      default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5
                             allow_timeout_override: true max_queue_size: 3 }
      priority_queue_policy { key: 1 value: { default_timeout_microseconds: 9 } }
    })cfg"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->dynamic_batching);
  EXPECT_EQ(c->preferred_batch_sizes, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(c->max_queue_delay_us, 100u);
  EXPECT_TRUE(c->preserve_ordering);
  EXPECT_EQ(c->priority_levels, 2u);
  EXPECT_EQ(c->default_priority_level, 2u);
  EXPECT_EQ(c->default_queue_policy.timeout_action, TimeoutAction::kDelay);
  EXPECT_EQ(c->default_queue_policy.default_timeout_us, 5u);
  EXPECT_TRUE(c->default_queue_policy.allow_timeout_override);
  EXPECT_EQ(c->default_queue_policy.max_queue_size, 3u);
  ASSERT_EQ(c->level_queue_policies.count(1), 1u);
  EXPECT_EQ(c->level_queue_policies.at(1).timeout_action, TimeoutAction::kReject);
  EXPECT_EQ(c->level_queue_policies.at(1).default_timeout_us, 9u);

  Result<BatchPolicyConfig> bad = MakeBatchPolicyConfig(ParseConfigOrDie(
      R"cfg(name: "m" max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 6 ] })cfg"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "model 'm': dynamic_batching.preferred_batch_size 6 is out of range 1..4 "
            "(max_batch_size)");
  bad = MakeBatchPolicyConfig(ParseConfigOrDie(
      R"cfg(name: "m" max_batch_size: 4 dynamic_batching { priority_levels: 2 })cfg"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("default_priority_level must be in 1..2 (priority_levels), got 0"));
}

TEST(BatchingTest, RequestShapesUnderPadding) {
  const BatchingPlan plan = MakeBatchingPlan(ParseConfigOrDie(kPadded)).value();
  const auto shape_of = [&](int64_t batch, int64_t n) {
    auto r = Request({FloatInput("scale", {batch, 1}, Iota(batch, 0)),
                      FloatInput("tokens", {batch, n, 2}, Iota(batch * n * 2, 0))});
    EXPECT_EQ(RequestBatchSize(plan, *r), batch);
    return RequestBatchShape(plan, *r);
  };
  EXPECT_EQ(shape_of(1, 1), (BatchShape{{{2, 2}, {1}}}));
  EXPECT_EQ(shape_of(3, 2), (BatchShape{{{2, 2}, {1}}}));
  EXPECT_EQ(shape_of(1, 3), (BatchShape{{{4, 2}, {1}}}));
  EXPECT_EQ(shape_of(2, 8), (BatchShape{{{8, 2}, {1}}}));
  EXPECT_EQ(shape_of(1, 9), (BatchShape{{{9, 2}, {1}}}));  // above the largest bucket
  EXPECT_EQ(shape_of(1, 0), (BatchShape{{{2, 2}, {1}}}));
}

TEST(BatchingTest, GatherPadsAndConcatenates) {
  const BatchingPlan plan = MakeBatchingPlan(ParseConfigOrDie(kPadded)).value();
  // Request a: batch 1, 3 tokens; request b: batch 2, 4 tokens. Both pad to bucket 4.
  auto a = Request(
      {FloatInput("tokens", {1, 3, 2}, {1, 2, 3, 4, 5, 6}), FloatInput("scale", {1, 1}, {10})});
  auto b = Request(
      {FloatInput("tokens", {2, 4, 2}, Iota(16, 100)), FloatInput("scale", {2, 1}, {20, 30})});
  const BatchShape shape = RequestBatchShape(plan, *a);
  ASSERT_EQ(shape, RequestBatchShape(plan, *b));
  const InferRequest* both[] = {a.get(), b.get()};
  Result<OwnedTensor> tokens = GatherInput(plan, 0, both, shape, HostAllocator());
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(tokens->shape(), (Shape{3, 4, 2}));
  std::vector<float> want = {1, 2, 3, 4, 5, 6, 0, 0};  // a, padded from 3 to 4 tokens
  for (float v : Iota(16, 100)) want.push_back(v);
  EXPECT_EQ(FloatValues(*tokens), want);
  Result<OwnedTensor> scale = GatherInput(plan, 1, both, shape, HostAllocator());
  ASSERT_TRUE(scale.ok());
  EXPECT_EQ(scale->shape(), (Shape{3, 1}));
  EXPECT_EQ(FloatValues(*scale), (std::vector<float>{10, 20, 30}));
}

TEST(BatchingTest, GatherPadsAnInnerDim) {
  const BatchingPlan plan = MakeBatchingPlan(ParseConfigOrDie(R"cfg(
    name: "m" max_batch_size: 4
    input { name: "x" data_type: TYPE_INT32 dims: [ 2, -1 ] padding { dims: [1] buckets: [3] } }
    output { name: "y" data_type: TYPE_INT32 dims: [ 2, -1 ] })cfg"))
                                .value();
  auto r = std::make_unique<InferRequest>();
  OwnedTensor t = OwnedTensor::Allocate(DataType::kInt32, Shape{1, 2, 2}).value();
  for (int i = 0; i < 4; ++i) t.data<int32_t>()[i] = i + 1;
  r->inputs.push_back({"x", t});
  const InferRequest* one[] = {r.get()};
  Result<OwnedTensor> x = GatherInput(plan, 0, one, RequestBatchShape(plan, *r), HostAllocator());
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->shape(), (Shape{1, 2, 3}));
  const int32_t* p = x->data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(p, p + 6), (std::vector<int32_t>{1, 2, 0, 3, 4, 0}));
}

TEST(BatchingTest, GatherRaggedIsFlat) {
  const BatchingPlan plan = MakeBatchingPlan(ParseConfigOrDie(R"cfg(
    name: "r" max_batch_size: 4
    input { name: "x" data_type: TYPE_STRING dims: [ -1 ] allow_ragged_batch: true }
    output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] })cfg"))
                                .value();
  const auto strings = [](std::vector<std::string> v) {
    OwnedTensor t =
        OwnedTensor::Allocate(DataType::kBytes, Shape{1, static_cast<int64_t>(v.size())}).value();
    for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
    return t;
  };
  auto a = std::make_unique<InferRequest>();
  a->inputs.push_back({"x", strings({"a", "bb"})});
  auto b = std::make_unique<InferRequest>();
  b->inputs.push_back({"x", strings({"ccc", "", "e"})});
  EXPECT_EQ(RequestBatchShape(plan, *a), RequestBatchShape(plan, *b));
  const InferRequest* both[] = {a.get(), b.get()};
  Result<OwnedTensor> x = GatherInput(plan, 0, both, RequestBatchShape(plan, *a), HostAllocator());
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->shape(), (Shape{5}));
  const std::string* s = x->data<std::string>();
  EXPECT_EQ(std::vector<std::string>(s, s + 5),
            (std::vector<std::string>{"a", "bb", "ccc", "", "e"}));
}

// Host memory that counts what it hands out.
class CountingAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    ++allocations;
    return HostAllocator().Allocate(bytes, alignment);
  }
  void Free(void* ptr, size_t bytes) override { HostAllocator().Free(ptr, bytes); }
  Device device() const override { return HostAllocator().device(); }
  int allocations = 0;
};

// Refuses every allocation.
class RefusingAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t) override {
    return Status::ResourceExhausted(fmt::format("refused {} bytes", bytes));
  }
  void Free(void*, size_t) override {}
  Device device() const override { return HostAllocator().device(); }
};

TEST(BatchingTest, SliceOutputCropsAndShares) {
  CountingAllocator allocator;
  const BatchingPlan plan = MakeBatchingPlan(ParseConfigOrDie(kPadded)).value();
  auto a = Request({FloatInput("tokens", {1, 3, 2}, Iota(6, 0)), FloatInput("scale", {1, 1}, {1})});
  auto b =
      Request({FloatInput("tokens", {2, 4, 2}, Iota(16, 0)), FloatInput("scale", {2, 1}, {1, 1})});
  OwnedTensor out = OwnedTensor::Allocate(DataType::kFloat32, Shape{3, 4, 2}).value();
  for (int i = 0; i < 24; ++i) out.data<float>()[i] = static_cast<float>(i);
  Result<OwnedTensor> ya = SliceOutput(plan, 0, out, 0, *a, allocator);
  ASSERT_TRUE(ya.ok()) << ya.status().ToString();
  EXPECT_EQ(ya->shape(), (Shape{1, 3, 2}));  // cropped from 4 tokens to a's 3
  EXPECT_EQ(FloatValues(*ya), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  Result<OwnedTensor> yb = SliceOutput(plan, 0, out, 1, *b, allocator);
  ASSERT_TRUE(yb.ok());
  EXPECT_EQ(yb->shape(), (Shape{2, 4, 2}));
  EXPECT_EQ(FloatValues(*yb), Iota(16, 8));

  OwnedTensor sums = OwnedTensor::Allocate(DataType::kFloat32, Shape{3, 1}).value();
  for (int i = 0; i < 3; ++i) sums.data<float>()[i] = static_cast<float>(i + 1);
  Result<OwnedTensor> sb = SliceOutput(plan, 1, sums, 1, *b, allocator);
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(FloatValues(*sb), (std::vector<float>{2, 3}));
  // The only request of a batch, nothing to crop: the batch output itself.
  OwnedTensor own = OwnedTensor::Allocate(DataType::kFloat32, Shape{2, 1}).value();
  Result<OwnedTensor> whole = SliceOutput(plan, 1, own, 0, *b, allocator);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->raw_data(), own.raw_data());
  // The three copies above (ya, yb, sb) came from the allocator given; the shared one did not.
  EXPECT_EQ(allocator.allocations, 3);
  RefusingAllocator refusing;
  Result<OwnedTensor> refused = SliceOutput(plan, 0, out, 1, *b, refusing);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);

  Result<OwnedTensor> short_rows = SliceOutput(plan, 1, sums, 2, *b, allocator);
  EXPECT_EQ(short_rows.status().code(), StatusCode::kInternal);
  EXPECT_THAT(short_rows.status().message(),
              HasSubstr("output 'sum' has shape [3,1]: fewer than the 4 rows of the batch"));
  OwnedTensor narrow = OwnedTensor::Allocate(DataType::kFloat32, Shape{3, 2, 2}).value();
  Result<OwnedTensor> bad_crop = SliceOutput(plan, 0, narrow, 0, *a, allocator);
  EXPECT_EQ(bad_crop.status().code(), StatusCode::kInternal);
  EXPECT_THAT(bad_crop.status().message(), HasSubstr("cannot crop dim 0 to 3"));
}

TEST(BatchingTest, ConfigTextOfTheExtension) {
  inference::ModelConfig c = ParseConfigOrDie(kPadded);
  EXPECT_EQ(c.input(0).padding().buckets_size(), 3);
  EXPECT_EQ(c.output(0).crop().dims(0).input(), "tokens");
  // Configs without the extension carry none of it.
  inference::ModelConfig plain = ParseConfigOrDie(R"cfg(
    name: "m" input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] })cfg");
  EXPECT_FALSE(plain.input(0).has_padding());
}

}  // namespace
}  // namespace kiln
