// SPDX-License-Identifier: Apache-2.0
// Ensembles without the model manager: the validation tables (structure, then each step against
// its composing model's signature), the plan, and EnsembleModel over test-double composing models
// that answer when the test says so (steps in flight at once, a failing step among running ones,
// max_inflight_requests, cancellation, buffers handed on without copies).
#include "repo/ensemble.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <future>
#include <map>
#include <thread>

#include "base/mutex.h"
#include "repo/model_config.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::ParseConfigOrDie;
using ::testing::HasSubstr;

TensorSpec F32(std::string name, std::vector<int64_t> dims) {
  return {std::move(name), DataType::kFloat32, std::move(dims)};
}

ModelSignature Sig(std::string name, int max_batch_size, std::vector<TensorSpec> inputs,
                   std::vector<TensorSpec> outputs) {
  ModelSignature s;
  s.name = std::move(name);
  s.max_batch_size = max_batch_size;
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  return s;
}

// The composing models the tables use, by name.
const std::map<std::string, ModelSignature>& Signatures() {
  static const auto* sigs = new std::map<std::string, ModelSignature>{
      {"a", Sig("a", 8, {F32("x", {4})}, {F32("y", {4})})},
      {"b", Sig("b", 8, {F32("x", {4})}, {F32("y", {4})})},
      {"c", Sig("c", 8, {F32("p", {4}), F32("q", {4})}, {F32("z", {4})})},
      {"i", Sig("i", 8, {{"x", DataType::kInt32, {4}}}, {{"y", DataType::kInt32, {4}}})},
      {"n", Sig("n", 0, {F32("x", {-1, 4})}, {F32("y", {-1, 4})})},
      {"small", Sig("small", 2, {F32("x", {4})}, {F32("y", {4})})},
      {"wide", Sig("wide", 8, {F32("x", {5})}, {F32("y", {5})})},
      {"two", Sig("two", 8, {F32("x", {4})}, {F32("y", {4}), F32("w", {4})})},
  };
  return *sigs;
}

// One step: model, "model_input:tensor" pairs, "model_output:tensor" pairs.
std::string Step(std::string_view model, std::vector<std::string_view> in,
                 std::vector<std::string_view> out) {
  const auto maps = [](std::string_view field, const std::vector<std::string_view>& pairs) {
    std::string text;
    for (std::string_view p : pairs) {
      const size_t colon = p.find(':');
      text += fmt::format(" {} {{ key: \"{}\" value: \"{}\" }}", field, p.substr(0, colon),
                          p.substr(colon + 1));
    }
    return text;
  };
  return fmt::format("{{ model_name: \"{}\" model_version: -1{}{} }}", model, maps("input_map", in),
                     maps("output_map", out));
}

std::string Steps(std::vector<std::string> steps) {
  return fmt::format("ensemble_scheduling {{ step [ {} ] }}", fmt::join(steps, ", "));
}

constexpr std::string_view kHead = R"cfg(
  name: "e" platform: "ensemble" max_batch_size: 8
  input { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }
  output { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }
)cfg";

const std::string kChain = Steps({Step("a", {"x:IN"}, {"y:t"}), Step("b", {"x:t"}, {"y:OUT"})});

// ValidateEnsemble with each step's signature from Signatures() (an unknown model gets an
// empty one).
Status Validate(const inference::ModelConfig& config) {
  std::vector<ModelSignature> sigs;
  for (const auto& s : config.ensemble_scheduling().step()) {
    auto it = Signatures().find(s.model_name());
    sigs.push_back(it == Signatures().end() ? ModelSignature() : it->second);
  }
  return ValidateEnsemble(config, sigs);
}

TEST(ValidateEnsemble, Table) {
  struct Case {
    std::string config;     // the whole config
    std::string_view want;  // "" valid, else a part of the INVALID_ARGUMENT message
  };
  const std::string head(kHead);
  const std::string no_platform = R"cfg(name: "e" max_batch_size: 8
      input { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }
      output { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] })cfg";
  const Case cases[] = {
      {head + kChain, ""},
      // A non-batching model in the middle that states the batch dim itself.
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("n", {"x:t"}, {"y:u"}),
                     Step("b", {"x:u"}, {"y:OUT"})}),
       ""},
      // Diamond: two independent steps joined by a third.
      {head + Steps({Step("a", {"x:IN"}, {"y:s"}), Step("b", {"x:IN"}, {"y:o"}),
                     Step("c", {"p:s", "q:o"}, {"z:OUT"})}),
       ""},
      // --- structure ---
      {no_platform + kChain, "model 'e': ensemble_scheduling is set, but the platform is ''"},
      {head, "ensemble 'e': platform 'ensemble' needs ensemble_scheduling"},
      {head + kChain + " instance_group { count: 2 }",
       "ensemble 'e': instance_group is not allowed on an ensemble"},
      {head + kChain + " model_warmup { name: \"w\" batch_size: 1 }",
       "ensemble 'e': model_warmup is not allowed"},
      {head + kChain + " optimization { graph { level: 1 } }",
       "ensemble 'e': optimization is not allowed"},
      {head + "ensemble_scheduling { }", "ensemble 'e': ensemble_scheduling lists no step"},
      {head + "ensemble_scheduling { step [ { input_map { key: \"x\" value: \"IN\" } } ] }",
       "ensemble 'e' step 0: model_name is not set"},
      {head + Steps({Step("e", {"x:IN"}, {"y:OUT"})}),
       "ensemble 'e' step 0 (model 'e'): a step cannot run the ensemble itself"},
      {head + "ensemble_scheduling { step [ { model_name: \"a\" model_version: -3 input_map { key: "
              "\"x\" value: \"IN\" } output_map { key: \"y\" value: \"OUT\" } } ] }",
       "ensemble 'e' step 0 (model 'a'): model_version must be -1 (the latest) or a version, got "
       "-3"},
      {head + Steps({Step("a", {}, {"y:OUT"})}),
       "ensemble 'e' step 0 (model 'a'): input_map is empty"},
      {head + Steps({Step("a", {"x:IN"}, {}), Step("b", {"x:IN"}, {"y:OUT"})}),
       "ensemble 'e' step 0 (model 'a'): output_map is empty"},
      {head + Steps({Step("a", {"x:IN"}, {"y:OUT"}), Step("b", {"x:IN"}, {"y:OUT"})}),
       "ensemble 'e' step 1 (model 'b'): output 'y' goes to ensemble tensor 'OUT', which step 0 "
       "(model 'a') also produces (an ensemble tensor is produced once)"},
      {head + Steps({Step("two", {"x:IN"}, {"y:OUT", "w:OUT"})}),
       "ensemble 'e' step 0 (model 'two'): output 'y' goes to ensemble tensor 'OUT', which another "
       "output of this step also produces"},
      {head + Steps({Step("a", {"x:IN"}, {"y:IN"}), Step("b", {"x:IN"}, {"y:OUT"})}),
       "ensemble 'e' step 0 (model 'a'): output 'y' goes to ensemble tensor 'IN', which is an "
       "ensemble input"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("c", {"p:t", "q:nope"}, {"z:OUT"})}),
       "ensemble 'e' step 1 (model 'c'): input 'q' reads ensemble tensor 'nope', which is neither "
       "an ensemble input nor an output of any step"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("b", {"x:t"}, {"y:t2"}),
                     Step("c", {"p:t2", "q:t"}, {"z:t3"})}),
       "ensemble 'e': output 'OUT' is not produced by any step"},
      {head + "input { name: \"IN2\" data_type: TYPE_FP32 dims: [ 4 ] }" + kChain,
       "ensemble 'e': input 'IN2' is not read by any step"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("b", {"x:t"}, {"y:OUT"}),
                     Step("a", {"x:IN"}, {"y:dead"})}),
       "ensemble 'e' step 2 (model 'a'): output 'y' goes to ensemble tensor 'dead', which no step "
       "reads and which is not an ensemble output"},
      {head + Steps({Step("a", {"x:t1"}, {"y:t0"}), Step("b", {"x:t0"}, {"y:t1"}),
                     Step("c", {"p:IN", "q:t0"}, {"z:OUT"})}),
       "ensemble 'e': its steps form a cycle: step 0 (model 'a') -> 't0' -> step 1 (model 'b') -> "
       "'t1' -> step 0 (model 'a')"},
      {head + Steps({Step("c", {"p:IN", "q:t"}, {"z:t"}), Step("a", {"x:t"}, {"y:OUT"})}),
       "ensemble 'e': its steps form a cycle: step 0 (model 'c') -> 't' -> step 0 (model 'c')"},
      {head +
           "input { name: \"P\" data_type: TYPE_FP32 dims: [ -1 ] padding { dims: [ 0 ] "
           "buckets: [ 4 ] } }" +
           kChain,
       "ensemble 'e': input padding is not allowed"},
      // --- against the composing models ---
      {head + Steps({Step("a", {"nope:IN"}, {"y:OUT"})}),
       "ensemble 'e' step 0 (model 'a'): input_map names 'nope', which is not an input of model "
       "'a' (its inputs: ['x'])"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("c", {"p:t"}, {"z:OUT"})}),
       "ensemble 'e' step 1 (model 'c'): input 'q' of model 'c' is not mapped to any ensemble "
       "tensor"},
      {head + Steps({Step("a", {"x:IN"}, {"w:OUT"})}),
       "ensemble 'e' step 0 (model 'a'): output_map names 'w', which is not an output of model "
       "'a' (its outputs: ['y'])"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("i", {"x:t"}, {"y:OUT"})}),
       "ensemble 'e' step 1 (model 'i'): ensemble tensor 't': input 'x' takes INT32 [-1,4], but "
       "step 0 (model 'a') output 'y' produces FP32 [-1,4] (datatypes differ)"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("wide", {"x:t"}, {"y:OUT"})}),
       "ensemble 'e' step 1 (model 'wide'): ensemble tensor 't': input 'x' takes FP32 [-1,5], but "
       "step 0 (model 'a') output 'y' produces FP32 [-1,4] (shapes differ)"},
      {R"cfg(name: "e" platform: "ensemble" max_batch_size: 8
             input { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }
             output { name: "OUT" data_type: TYPE_FP32 dims: [ 5 ] })cfg" +
           kChain,
       "ensemble 'e': ensemble tensor 'OUT': the ensemble output 'OUT' declares FP32 [-1,5], but "
       "step 1 (model 'b') output 'y' produces FP32 [-1,4] (shapes differ)"},
      {R"cfg(name: "e" platform: "ensemble" max_batch_size: 8
             input { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] }
             output { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] })cfg" +
           kChain,
       "ensemble 'e' step 0 (model 'a'): ensemble tensor 'IN': input 'x' takes FP32 [-1,4], but "
       "the ensemble input 'IN' declares FP32 [-1,3] (shapes differ)"},
      {head + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("small", {"x:t"}, {"y:OUT"})}),
       "ensemble 'e' step 1 (model 'small'): the ensemble's max_batch_size 8 exceeds the model's "
       "max_batch_size 2"},
  };
  for (const Case& c : cases) {
    const inference::ModelConfig config = ParseConfigOrDie(c.config);
    const Status s = Validate(config);
    if (c.want.empty()) {
      EXPECT_TRUE(s.ok()) << c.config << "\n" << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.config;
    EXPECT_THAT(s.message(), HasSubstr(c.want)) << c.config;
  }
}

TEST(ValidateEnsemble, StructuralChecksNeedNoComposingModel) {
  // ValidateModelConfig runs the structural part at config time.
  inference::ModelConfig ok = ParseConfigOrDie(std::string(kHead) + kChain);
  EXPECT_TRUE(ValidateModelConfig(ok).ok()) << ValidateModelConfig(ok).ToString();
  inference::ModelConfig bad = ParseConfigOrDie(
      std::string(kHead) + Steps({Step("a", {"x:IN"}, {"y:t"}), Step("b", {"x:u"}, {"y:OUT"})}));
  EXPECT_THAT(ValidateModelConfig(bad).message(),
              HasSubstr("input 'x' reads ensemble tensor 'u', which is neither"));
  EXPECT_THAT(ValidateEnsembleConfig(bad).message(), HasSubstr("ensemble 'e' step 1 (model 'b')"));
}

// The reference server's own example, as written in its documentation: loads unchanged.
TEST(ValidateEnsemble, ReferenceExampleConfig) {
  const inference::ModelConfig config = ParseConfigOrDie(R"cfg(
name: "ensemble_model"
platform: "ensemble"
max_batch_size: 1
input [
  {
    name: "IMAGE"
    data_type: TYPE_STRING
    dims: [ 1 ]
  }
]
output [
  {
    name: "CLASSIFICATION"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  },
  {
    name: "SEGMENTATION"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
ensemble_scheduling {
  step [
    {
      model_name: "image_preprocess_model"
      model_version: -1
      input_map {
        key: "RAW_IMAGE"
        value: "IMAGE"
      }
      output_map {
        key: "PREPROCESSED_OUTPUT"
        value: "preprocessed_image"
      }
    },
    {
      model_name: "classification_model"
      model_version: -1
      input_map {
        key: "FORMATTED_IMAGE"
        value: "preprocessed_image"
      }
      output_map {
        key: "CLASSIFICATION_OUTPUT"
        value: "CLASSIFICATION"
      }
    },
    {
      model_name: "segmentation_model"
      model_version: -1
      input_map {
        key: "FORMATTED_IMAGE"
        value: "preprocessed_image"
      }
      output_map {
        key: "SEGMENTATION_OUTPUT"
        value: "SEGMENTATION"
      }
    }
  ]
})cfg");
  EXPECT_TRUE(ValidateModelConfig(config).ok()) << ValidateModelConfig(config).ToString();
  const std::vector<ModelSignature> sigs = {
      Sig("image_preprocess_model", 4, {{"RAW_IMAGE", DataType::kBytes, {1}}},
          {F32("PREPROCESSED_OUTPUT", {3, 224, 224})}),
      Sig("classification_model", 8, {F32("FORMATTED_IMAGE", {3, 224, 224})},
          {F32("CLASSIFICATION_OUTPUT", {1000})}),
      Sig("segmentation_model", 8, {F32("FORMATTED_IMAGE", {3, 224, 224})},
          {F32("SEGMENTATION_OUTPUT", {3, 224, 224})}),
  };
  EXPECT_TRUE(ValidateEnsemble(config, sigs).ok()) << ValidateEnsemble(config, sigs).ToString();
  EXPECT_EQ(EnsembleComposingModels(config).size(), 3u);
  EXPECT_TRUE(UnimplementedConfigFields(config).empty());
}

TEST(EnsemblePlan, ProducersConsumersAndNeededSteps) {
  const inference::ModelConfig config = ParseConfigOrDie(
      R"cfg(name: "e" platform: "ensemble" max_batch_size: 8
            input { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }
            output { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }
            output { name: "SIDE" data_type: TYPE_FP32 dims: [ 4 ] })cfg" +
      Steps({Step("a", {"x:IN"}, {"y:s"}), Step("b", {"x:IN"}, {"y:o"}),
             Step("c", {"p:s", "q:o"}, {"z:OUT"}), Step("b", {"x:s"}, {"y:SIDE"})}));
  ASSERT_TRUE(Validate(config).ok()) << Validate(config).ToString();
  const EnsemblePlan plan = MakeEnsemblePlan(config);
  ASSERT_EQ(plan.steps.size(), 4u);
  const auto tensor = [&](std::string_view name) {
    return static_cast<int>(std::find(plan.tensors.begin(), plan.tensors.end(), name) -
                            plan.tensors.begin());
  };
  EXPECT_EQ(plan.producer[static_cast<size_t>(tensor("IN"))], -1);
  EXPECT_EQ(plan.producer[static_cast<size_t>(tensor("s"))], 0);
  EXPECT_EQ(plan.consumers[static_cast<size_t>(tensor("s"))], (std::vector<int>{2, 3}));
  EXPECT_EQ(plan.steps[2].input_tensors.size(), 2u);
  const int out = tensor("OUT");
  const int side = tensor("SIDE");
  EXPECT_EQ(NeededSteps(plan, std::vector<int>{out}), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(NeededSteps(plan, std::vector<int>{side}),
            (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(EnsembleComposingModels(config),
            (std::vector<ComposingModelRef>{{"a", -1}, {"b", -1}, {"c", -1}}));
}

TEST(AdaptShapeForConsumer, BatchingAndNonBatchingEnds) {
  using V = std::vector<int64_t>;
  // Same kind of ends: unchanged.
  EXPECT_EQ(AdaptShapeForConsumer(V{4}, true, 3, V{3, 4}), (V{3, 4}));
  EXPECT_EQ(AdaptShapeForConsumer(V{-1, 4}, false, 0, V{3, 4}), (V{3, 4}));
  // Produced without a batch dim, one item: becomes a batch of 1.
  EXPECT_EQ(AdaptShapeForConsumer(V{4}, true, 0, V{4}), (V{1, 4}));
  // ... unless it already has the batch dim.
  EXPECT_EQ(AdaptShapeForConsumer(V{4}, true, 0, V{2, 4}), (V{2, 4}));
  // A batch of one to a model without a batch dim: dropped unless the model states it.
  EXPECT_EQ(AdaptShapeForConsumer(V{4}, false, 1, V{1, 4}), (V{4}));
  EXPECT_EQ(AdaptShapeForConsumer(V{-1, 4}, false, 1, V{1, 4}), (V{1, 4}));
  EXPECT_EQ(AdaptShapeForConsumer(V{4}, false, 2, V{2, 4}), (V{2, 4}));
}

// --- EnsembleModel over test doubles ---

// A composing model: `compute` makes the response; with `manual`, requests wait until the test
// answers them (AnswerOne), else they are answered at once on the caller's thread. Records the
// buffers it was given and the ones it produced.
class FakeModel final : public LoadedModel {
 public:
  using Compute = std::function<Result<InferResponse>(const InferRequest&)>;
  FakeModel(ModelSignature sig, Compute compute, bool manual)
      : sig_(std::move(sig)), compute_(std::move(compute)), manual_(manual) {}

  const std::string& name() const override { return sig_.name; }
  int64_t version() const override { return 1; }
  const ModelSignature& signature() const override { return sig_; }

  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    bool manual;
    {
      MutexLock lock(mu_);
      std::map<std::string, const void*> in;
      for (const InferInput& i : request->inputs) in[i.name] = i.tensor.raw_data();
      inputs_seen_.push_back(std::move(in));
      std::vector<std::string> outs;
      for (const RequestedOutput& o : request->outputs) outs.push_back(o.name);
      outputs_asked_.push_back(std::move(outs));
      ++calls_;
      max_inflight_ = std::max(max_inflight_, ++inflight_);
      manual = manual_;
      if (manual) pending_.push_back({std::move(request), std::move(sink)});
    }
    if (!manual) Answer(*request, *sink);
  }

  // Answers the oldest waiting request; false when none waits.
  bool AnswerOne() {
    Pending p;
    {
      MutexLock lock(mu_);
      if (pending_.empty()) return false;
      p = std::move(pending_.front());
      pending_.pop_front();
    }
    Answer(*p.request, *p.sink);
    return true;
  }
  void set_manual(bool manual) {
    MutexLock lock(mu_);
    manual_ = manual;
  }
  size_t pending() const {
    MutexLock lock(mu_);
    return pending_.size();
  }
  int calls() const {
    MutexLock lock(mu_);
    return calls_;
  }
  int max_inflight() const {
    MutexLock lock(mu_);
    return max_inflight_;
  }
  std::vector<std::map<std::string, const void*>> inputs_seen() const {
    MutexLock lock(mu_);
    return inputs_seen_;
  }
  std::vector<std::vector<std::string>> outputs_asked() const {
    MutexLock lock(mu_);
    return outputs_asked_;
  }
  std::vector<const void*> outputs_made() const {
    MutexLock lock(mu_);
    return outputs_made_;
  }

 private:
  struct Pending {
    std::unique_ptr<InferRequest> request;
    std::shared_ptr<ResponseSink> sink;
  };
  void Answer(const InferRequest& request, ResponseSink& sink) {
    Result<InferResponse> r = compute_(request);
    {
      MutexLock lock(mu_);
      --inflight_;
      if (r.ok()) {
        for (const InferOutput& o : r->outputs) outputs_made_.push_back(o.tensor.raw_data());
      }
    }
    sink.Finish(std::move(r));
  }

  const ModelSignature sig_;
  const Compute compute_;
  mutable Mutex mu_;
  bool manual_ KILN_GUARDED_BY(mu_);
  std::deque<Pending> pending_ KILN_GUARDED_BY(mu_);
  int calls_ KILN_GUARDED_BY(mu_) = 0;
  int inflight_ KILN_GUARDED_BY(mu_) = 0;
  int max_inflight_ KILN_GUARDED_BY(mu_) = 0;
  std::vector<std::map<std::string, const void*>> inputs_seen_ KILN_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> outputs_asked_ KILN_GUARDED_BY(mu_);
  std::vector<const void*> outputs_made_ KILN_GUARDED_BY(mu_);
};

const InferInput* FindIn(const InferRequest& r, std::string_view name) {
  for (const InferInput& i : r.inputs) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

// y = x + k for each requested output (a fresh buffer each); with `fail_negative`, fails for an
// input whose first value is negative (a request whose data makes the step fail).
FakeModel::Compute AddConst(float k, bool fail_negative = false) {
  return [k, fail_negative](const InferRequest& r) -> Result<InferResponse> {
    const InferInput* x = FindIn(r, "x");
    if (x == nullptr) return Status::InvalidArgument("no input x");
    if (fail_negative && x->tensor.num_elements() > 0 && x->tensor.data<float>()[0] < 0) {
      return Status::InvalidArgument("negative input");
    }
    InferResponse resp;
    for (const RequestedOutput& o : r.outputs) {
      Result<OwnedTensor> y = OwnedTensor::Allocate(DataType::kFloat32, x->tensor.shape());
      if (!y.ok()) return y.status();
      for (int64_t i = 0; i < x->tensor.num_elements(); ++i) {
        y->data<float>()[i] = x->tensor.data<float>()[i] + k;
      }
      resp.outputs.push_back({o.name, std::move(y).value()});
    }
    return resp;
  };
}

// z = p + q.
FakeModel::Compute Sum() {
  return [](const InferRequest& r) -> Result<InferResponse> {
    const InferInput* p = FindIn(r, "p");
    const InferInput* q = FindIn(r, "q");
    Result<OwnedTensor> z = OwnedTensor::Allocate(DataType::kFloat32, p->tensor.shape());
    if (!z.ok()) return z.status();
    for (int64_t i = 0; i < p->tensor.num_elements(); ++i) {
      z->data<float>()[i] = p->tensor.data<float>()[i] + q->tensor.data<float>()[i];
    }
    InferResponse resp;
    resp.outputs.push_back({"z", std::move(z).value()});
    return resp;
  };
}

// Composing models by name, replaceable while the ensemble runs.
class Models {
 public:
  void Set(const std::string& name, std::shared_ptr<LoadedModel> model) {
    MutexLock lock(mu_);
    models_[name] = std::move(model);
  }
  void Remove(const std::string& name) {
    MutexLock lock(mu_);
    models_.erase(name);
  }
  ComposingModelResolver Resolver() {
    return [this](std::string_view name, int64_t) -> Result<std::shared_ptr<LoadedModel>> {
      MutexLock lock(mu_);
      auto it = models_.find(std::string(name));
      if (it == models_.end()) return Status::Unavailable(fmt::format("'{}' is unloaded", name));
      return it->second;
    };
  }

 private:
  Mutex mu_;
  std::map<std::string, std::shared_ptr<LoadedModel>> models_ KILN_GUARDED_BY(mu_);
};

std::unique_ptr<InferRequest> Request(std::vector<float> values, std::string id = "r") {
  auto r = std::make_unique<InferRequest>();
  r->id = std::move(id);
  r->inputs.push_back(FloatInput("IN", {1, static_cast<int64_t>(values.size())}, values));
  return r;
}

// The result of one request, delivered to a future.
struct Answer {
  std::promise<Result<InferResponse>> promise;
  std::future<Result<InferResponse>> future = promise.get_future();
  std::shared_ptr<ResponseSink> Sink() {
    return CallbackSink([this](Result<InferResponse> r) { promise.set_value(std::move(r)); });
  }
  bool done() const {
    return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
};

constexpr std::string_view kEnsembleHead = R"cfg(
  name: "e" platform: "ensemble" max_batch_size: 8
  input { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }
  output { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }
)cfg";

std::shared_ptr<EnsembleModel> MakeEnsemble(const std::string& config_text, Models& models,
                                            InstanceOptions options = {}) {
  inference::ModelConfig config = ParseConfigOrDie(config_text);
  NormalizeEnsembleConfig(&config);
  Result<std::shared_ptr<EnsembleModel>> e =
      EnsembleModel::Create(1, config, models.Resolver(), options);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : nullptr;
}

TEST(EnsembleModel, ChainHandsBuffersOnWithoutCopies) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), false);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10), false);
  models.Set("a", a);
  models.Set("b", b);
  auto e = MakeEnsemble(std::string(kEnsembleHead) + kChain, models);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->signature().platform, "ensemble");
  EXPECT_EQ(e->model_config()->name(), "e");

  auto request = Request({1, 2, 3, 4}, "id-7");
  const void* client_buffer = request->inputs[0].tensor.raw_data();
  Answer answer;
  e->Infer(std::move(request), answer.Sink());
  Result<InferResponse> r = answer.future.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_name, "e");
  EXPECT_EQ(r->model_version, 1);
  EXPECT_EQ(r->id, "id-7");
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "OUT");
  EXPECT_EQ(r->outputs[0].tensor.shape().ToString(), "[1,4]");
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{12, 13, 14, 15}));

  // The client's buffer is step 0's input; step 0's output buffer is step 1's input; step 1's
  // output buffer is the ensemble's output: no step input or output was copied.
  ASSERT_EQ(a->inputs_seen().size(), 1u);
  EXPECT_EQ(a->inputs_seen()[0].at("x"), client_buffer);
  ASSERT_EQ(a->outputs_made().size(), 1u);
  ASSERT_EQ(b->inputs_seen().size(), 1u);
  EXPECT_EQ(b->inputs_seen()[0].at("x"), a->outputs_made()[0]);
  ASSERT_EQ(b->outputs_made().size(), 1u);
  EXPECT_EQ(r->outputs[0].tensor.raw_data(), b->outputs_made()[0]);

  const ModelStatistics stats = e->Statistics();
  EXPECT_EQ(stats.inference.success.count, 1u);
  EXPECT_EQ(stats.inference_count, 1u);
  EXPECT_EQ(stats.execution_count, 1u);
  EXPECT_EQ(e->InflightRequests(), 0);
}

const std::string kDiamond = Steps({Step("a", {"x:IN"}, {"y:s"}), Step("b", {"x:IN"}, {"y:o"}),
                                    Step("c", {"p:s", "q:o"}, {"z:OUT"})});

TEST(EnsembleModel, IndependentStepsRunAtOnce) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10), true);
  auto c = std::make_shared<FakeModel>(Signatures().at("c"), Sum(), true);
  models.Set("a", a);
  models.Set("b", b);
  models.Set("c", c);
  auto e = MakeEnsemble(std::string(kEnsembleHead) + kDiamond, models);
  ASSERT_NE(e, nullptr);
  Answer answer;
  e->Infer(Request({1, 2, 3, 4}), answer.Sink());
  // Both branches are in flight before either answers; the join waits for both.
  EXPECT_EQ(a->pending(), 1u);
  EXPECT_EQ(b->pending(), 1u);
  EXPECT_EQ(c->pending(), 0u);
  ASSERT_TRUE(b->AnswerOne());
  EXPECT_EQ(c->pending(), 0u);
  ASSERT_TRUE(a->AnswerOne());
  EXPECT_EQ(c->pending(), 1u);
  EXPECT_FALSE(answer.done());
  ASSERT_TRUE(c->AnswerOne());
  Result<InferResponse> r = answer.future.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // (x + 1) + (x + 10).
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{13, 15, 17, 19}));
  // The input fed both branches from the one client buffer.
  EXPECT_EQ(a->inputs_seen()[0].at("x"), b->inputs_seen()[0].at("x"));
}

TEST(EnsembleModel, FailingStepFailsOnlyItsRequestAfterRunningStepsFinish) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10, true), true);
  auto c = std::make_shared<FakeModel>(Signatures().at("c"), Sum(), false);
  models.Set("a", a);
  models.Set("b", b);
  models.Set("c", c);
  auto e = MakeEnsemble(std::string(kEnsembleHead) + kDiamond, models);
  ASSERT_NE(e, nullptr);
  Answer bad, good;
  e->Infer(Request({-5, 1, 1, 1}, "bad"), bad.Sink());
  e->Infer(Request({1, 1, 1, 1}, "good"), good.Sink());
  ASSERT_EQ(a->pending(), 2u);
  ASSERT_EQ(b->pending(), 2u);
  ASSERT_TRUE(b->AnswerOne());  // "bad" fails at step 1 while its step 0 still runs
  EXPECT_FALSE(bad.done());     // ... so the request waits for that step
  ASSERT_TRUE(a->AnswerOne());  // step 0 of "bad" succeeds
  ASSERT_TRUE(bad.done());
  Result<InferResponse> r = bad.future.get();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "ensemble 'e' step 1 (model 'b'): negative input");
  EXPECT_EQ(c->calls(), 0);  // the join never ran for the failed request
  ASSERT_TRUE(a->AnswerOne());
  ASSERT_TRUE(b->AnswerOne());
  Result<InferResponse> ok = good.future.get();
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->id, "good");
  EXPECT_EQ(c->calls(), 1);
  const ModelStatistics stats = e->Statistics();
  EXPECT_EQ(stats.inference.success.count, 1u);
  EXPECT_EQ(stats.inference.fail.count, 1u);
  EXPECT_EQ(stats.failures[static_cast<size_t>(FailureReason::kInvalid)], 1u);
}

TEST(EnsembleModel, RequestedOutputsOnlyAndUnneededStepsSkipped) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), false);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10), false);
  auto c = std::make_shared<FakeModel>(Signatures().at("c"), Sum(), false);
  models.Set("a", a);
  models.Set("b", b);
  models.Set("c", c);
  // OUT = c(a(IN), b(IN)); SIDE = b(a(IN)).
  auto e = MakeEnsemble(
      R"cfg(name: "e" platform: "ensemble" max_batch_size: 8
      input { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }
      output { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }
      output { name: "SIDE" data_type: TYPE_FP32 dims: [ 4 ] })cfg" +
          Steps({Step("a", {"x:IN"}, {"y:s"}), Step("b", {"x:IN"}, {"y:o"}),
                 Step("c", {"p:s", "q:o"}, {"z:OUT"}), Step("b", {"x:s"}, {"y:SIDE"})}),
      models);
  ASSERT_NE(e, nullptr);
  {
    auto request = Request({1, 2, 3, 4});
    request->outputs.push_back({"SIDE"});
    Answer answer;
    e->Infer(std::move(request), answer.Sink());
    Result<InferResponse> r = answer.future.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].name, "SIDE");
    EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{12, 13, 14, 15}));
    EXPECT_EQ(c->calls(), 0);  // OUT was not asked for: its step did not run
    EXPECT_EQ(a->calls(), 1);
    EXPECT_EQ(b->calls(), 1);
  }
  {
    Answer answer;
    e->Infer(Request({1, 2, 3, 4}), answer.Sink());  // no outputs named: all, config order
    Result<InferResponse> r = answer.future.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->outputs.size(), 2u);
    EXPECT_EQ(r->outputs[0].name, "OUT");
    EXPECT_EQ(r->outputs[1].name, "SIDE");
    EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{13, 15, 17, 19}));
    EXPECT_EQ(c->calls(), 1);
  }
  // Each step asked its model only for the mapped outputs.
  EXPECT_EQ(a->outputs_asked()[0], (std::vector<std::string>{"y"}));
}

TEST(EnsembleModel, RefusalsBeforeAnyStep) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), false);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(1), false);
  models.Set("a", a);
  models.Set("b", b);
  auto e = MakeEnsemble(std::string(kEnsembleHead) + kChain, models);
  ASSERT_NE(e, nullptr);
  const auto run = [&](std::unique_ptr<InferRequest> r) {
    Answer answer;
    e->Infer(std::move(r), answer.Sink());
    return answer.future.get().status();
  };
  Status s = run(Request({1, 2, 3}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'IN': expected shape [-1,4], got [1,3]"));
  auto unknown_output = Request({1, 2, 3, 4});
  unknown_output->outputs.push_back({"t"});  // an intermediate tensor is not an output
  EXPECT_THAT(run(std::move(unknown_output)).message(),
              HasSubstr("unexpected inference output 't' for model 'e'"));
  auto cancelled = Request({1, 2, 3, 4});
  auto cancel = std::make_shared<Cancellation>();
  cancel->Cancel();
  cancelled->cancellation = cancel;
  EXPECT_EQ(run(std::move(cancelled)).code(), StatusCode::kCancelled);

  models.Remove("b");
  s = run(Request({1, 2, 3, 4}));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "ensemble 'e' step 1 (model 'b'): composing model not available: 'b' is unloaded");
  EXPECT_EQ(a->calls(), 0);  // nothing ran

  // A composing model that comes back with another signature: refused, naming step and tensor.
  models.Set("b", std::make_shared<FakeModel>(Sig("b", 8, {F32("x", {5})}, {F32("y", {5})}),
                                              AddConst(1), false));
  s = run(Request({1, 2, 3, 4}));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(),
              HasSubstr("composing models changed since the ensemble was loaded and no longer "
                        "fit it: ensemble 'e' step 1 (model 'b'): ensemble tensor 't'"));
  models.Set("b", b);
  EXPECT_TRUE(run(Request({1, 2, 3, 4})).ok());
  EXPECT_EQ(e->Statistics().inference.fail.count, 5u);

  e->Shutdown();
  s = run(Request({1, 2, 3, 4}));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("ensemble 'e' version 1 is unloading"));
}

TEST(EnsembleModel, CreateNamesTheStepOfAMissingOrMismatchedModel) {
  Models models;
  models.Set("a", std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), false));
  inference::ModelConfig config = ParseConfigOrDie(std::string(kEnsembleHead) + kChain);
  NormalizeEnsembleConfig(&config);
  Result<std::shared_ptr<EnsembleModel>> e = EnsembleModel::Create(1, config, models.Resolver());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(e.status().message(),
            "ensemble 'e' step 1 (model 'b'): composing model not available: 'b' is unloaded");
  models.Set("b", std::make_shared<FakeModel>(Signatures().at("i"), AddConst(1), false));
  e = EnsembleModel::Create(1, config, models.Resolver());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("ensemble 'e' step 1 (model 'b'): ensemble tensor "
                                              "'t': input 'x' takes INT32"));
}

TEST(EnsembleModel, MaxInflightRequestsParksStepsWithoutBlocking) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10), false);
  models.Set("a", a);
  models.Set("b", b);
  FakeClock clock(1000);
  InstanceOptions options;
  options.clock = &clock;
  auto e = MakeEnsemble(
      std::string(kEnsembleHead) + "ensemble_scheduling { max_inflight_requests: 2 step [ " +
          Step("a", {"x:IN"}, {"y:t"}) + ", " + Step("b", {"x:t"}, {"y:OUT"}) + " ] }",
      models, options);
  ASSERT_NE(e, nullptr);
  constexpr int kRequests = 5;
  std::vector<Answer> answers(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    e->Infer(Request({static_cast<float>(i), 0, 0, 0}), answers[static_cast<size_t>(i)].Sink());
  }
  // Infer returned for all five (nothing blocked); two reached the model, three wait.
  EXPECT_EQ(a->pending(), 2u);
  EXPECT_EQ(e->PendingRequestCount(), 3u);
  clock.Advance(5000);
  while (a->AnswerOne()) {
    EXPECT_LE(a->pending(), 2u);
  }
  EXPECT_EQ(a->max_inflight(), 2);
  EXPECT_EQ(e->PendingRequestCount(), 0u);
  for (int i = 0; i < kRequests; ++i) {
    Result<InferResponse> r = answers[static_cast<size_t>(i)].future.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(FloatValues(r->outputs[0].tensor)[0], static_cast<float>(i) + 11);
  }
  // The three that waited charged their wait to the ensemble's queue time.
  const ModelStatistics stats = e->Statistics();
  EXPECT_EQ(stats.inference.success.count, 5u);
  EXPECT_EQ(stats.inference.queue.ns, 3u * 5000u);
  EXPECT_EQ(stats.inference.success.ns, 5u * 5000u);
}

// `compute`, with `timing` on every response (what a composing model's scheduler measured).
FakeModel::Compute WithTiming(FakeModel::Compute compute, RequestTiming timing) {
  return [compute = std::move(compute), timing](const InferRequest& r) -> Result<InferResponse> {
    Result<InferResponse> response = compute(r);
    if (response.ok()) response->timing = timing;
    return response;
  };
}

TEST(EnsembleModel, StatisticsSumTheStepsTimesAndCountEachStep) {
  Models models;
  auto a = std::make_shared<FakeModel>(
      Signatures().at("a"), WithTiming(AddConst(1, /*fail_negative=*/true), {100, 1, 1000, 2}),
      true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"),
                                       WithTiming(AddConst(10), {300, 3, 5000, 4}), false);
  models.Set("a", a);
  models.Set("b", b);
  FakeClock clock(1000);
  InstanceOptions options;
  options.clock = &clock;
  auto e = MakeEnsemble(
      std::string(kEnsembleHead) + "ensemble_scheduling { max_inflight_requests: 1 step [ " +
          Step("a", {"x:IN"}, {"y:t"}) + ", " + Step("b", {"x:t"}, {"y:OUT"}) + " ] }",
      models, options);
  ASSERT_NE(e, nullptr);
  Answer first, second, bad;
  e->Infer(Request({1, 2, 3, 4}), first.Sink());
  e->Infer(Request({5, 6, 7, 8}), second.Sink());  // waits at step 0's gate
  EXPECT_EQ(a->pending(), 1u);
  clock.Advance(7000);
  // First: step 0 answers 7000 after its hand-off, step 1 at once; second enters step 0 now.
  ASSERT_TRUE(a->AnswerOne());
  ASSERT_TRUE(first.done());
  clock.Advance(2000);
  ASSERT_TRUE(a->AnswerOne());  // second: step 0 took 2000
  ASSERT_TRUE(second.done());
  e->Infer(Request({-1, 0, 0, 0}), bad.Sink());  // fails at step 0, after 500
  clock.Advance(500);
  ASSERT_TRUE(a->AnswerOne());
  ASSERT_TRUE(bad.done());

  // Each response carries the sums over its steps; the queue adds the gate's wait.
  Result<InferResponse> r1 = first.future.get();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->timing.queue_ns, 100u + 300u);
  EXPECT_EQ(r1->timing.compute_input_ns, 1u + 3u);
  EXPECT_EQ(r1->timing.compute_infer_ns, 1000u + 5000u);
  EXPECT_EQ(r1->timing.compute_output_ns, 2u + 4u);
  Result<InferResponse> r2 = second.future.get();
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->timing.queue_ns, 7000u + 100u + 300u);
  EXPECT_EQ(r2->timing.compute_infer_ns, 6000u);
  EXPECT_FALSE(bad.future.get().ok());

  const ModelStatistics s = e->Statistics();
  EXPECT_EQ(s.inference.success.count, 2u);
  EXPECT_EQ(s.inference.success.ns, 7000u + 9000u);  // end to end: arrival to answer
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.inference.fail.ns, 500u);
  EXPECT_EQ(s.inference.queue.count, 2u);
  EXPECT_EQ(s.inference.queue.ns, 400u + 7400u);
  EXPECT_EQ(s.inference.compute_input.count, 2u);
  EXPECT_EQ(s.inference.compute_input.ns, 8u);
  EXPECT_EQ(s.inference.compute_infer.count, 2u);
  EXPECT_EQ(s.inference.compute_infer.ns, 12000u);
  EXPECT_EQ(s.inference.compute_output.count, 2u);
  EXPECT_EQ(s.inference.compute_output.ns, 12u);
  EXPECT_EQ(s.execution_count, 2u);
  ASSERT_EQ(s.batches.count(1), 1u);
  EXPECT_EQ(s.batches.at(1).compute_infer.count, 2u);
  EXPECT_EQ(s.batches.at(1).compute_infer.ns, 12000u);

  ASSERT_EQ(s.ensemble_steps.size(), 2u);
  const EnsembleStepStatistics& s0 = s.ensemble_steps[0];
  EXPECT_EQ(s0.step, 0);
  EXPECT_EQ(s0.model, "a");
  EXPECT_EQ(s0.model_version, -1);
  EXPECT_EQ(s0.success.count, 2u);
  EXPECT_EQ(s0.success.ns, 7000u + 2000u);  // hand-off to answer: the gate's wait is not in it
  EXPECT_EQ(s0.fail.count, 1u);
  EXPECT_EQ(s0.fail.ns, 500u);
  EXPECT_EQ(s0.queue.count, 2u);
  EXPECT_EQ(s0.queue.ns, 200u);
  EXPECT_EQ(s0.compute_input.ns, 2u);
  EXPECT_EQ(s0.compute_infer.count, 2u);
  EXPECT_EQ(s0.compute_infer.ns, 2000u);
  EXPECT_EQ(s0.compute_output.ns, 4u);
  const EnsembleStepStatistics& s1 = s.ensemble_steps[1];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.model, "b");
  EXPECT_EQ(s1.success.count, 2u);  // the failed request never reached step 1
  EXPECT_EQ(s1.success.ns, 0u);
  EXPECT_EQ(s1.fail.count, 0u);
  EXPECT_EQ(s1.queue.ns, 600u);
  EXPECT_EQ(s1.compute_input.ns, 6u);
  EXPECT_EQ(s1.compute_infer.ns, 10000u);
  EXPECT_EQ(s1.compute_output.ns, 8u);

  // Reset zeroes every counter and keeps the steps.
  e->ResetStatistics();
  const ModelStatistics z = e->Statistics();
  EXPECT_EQ(z.inference.success.count, 0u);
  ASSERT_EQ(z.ensemble_steps.size(), 2u);
  EXPECT_EQ(z.ensemble_steps[1].model, "b");
  EXPECT_EQ(z.ensemble_steps[1].success.count, 0u);
}

TEST(EnsembleModel, CancelledRequestLeavesTheGateAtOnce) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10), false);
  models.Set("a", a);
  models.Set("b", b);
  auto e = MakeEnsemble(
      std::string(kEnsembleHead) + "ensemble_scheduling { max_inflight_requests: 1 step [ " +
          Step("a", {"x:IN"}, {"y:t"}) + ", " + Step("b", {"x:t"}, {"y:OUT"}) + " ] }",
      models);
  ASSERT_NE(e, nullptr);
  Answer first, second;
  e->Infer(Request({1, 0, 0, 0}), first.Sink());
  auto request = Request({2, 0, 0, 0});
  auto cancel = std::make_shared<Cancellation>();
  request->cancellation = cancel;
  e->Infer(std::move(request), second.Sink());
  EXPECT_EQ(e->PendingRequestCount(), 1u);
  cancel->Cancel();
  ASSERT_TRUE(second.done());
  EXPECT_EQ(second.future.get().status().code(), StatusCode::kCancelled);
  EXPECT_EQ(e->PendingRequestCount(), 0u);
  ASSERT_TRUE(a->AnswerOne());
  EXPECT_TRUE(first.future.get().ok());
  EXPECT_EQ(a->calls(), 1);
  EXPECT_EQ(e->Statistics().failures[static_cast<size_t>(FailureReason::kCanceled)], 1u);
}

TEST(EnsembleModel, ParkedStepOfAFailedRequestDoesNotRun) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10, true), true);
  auto c = std::make_shared<FakeModel>(Signatures().at("c"), Sum(), false);
  models.Set("a", a);
  models.Set("b", b);
  models.Set("c", c);
  auto e = MakeEnsemble(std::string(kEnsembleHead) +
                            "ensemble_scheduling { max_inflight_requests: 1 step [ " +
                            Step("a", {"x:IN"}, {"y:s"}) + ", " + Step("b", {"x:IN"}, {"y:o"}) +
                            ", " + Step("c", {"p:s", "q:o"}, {"z:OUT"}) + " ] }",
                        models);
  ASSERT_NE(e, nullptr);
  Answer x, y;
  e->Infer(Request({1, 1, 1, 1}, "x"), x.Sink());   // holds the places of steps 0 and 1
  e->Infer(Request({-1, 1, 1, 1}, "y"), y.Sink());  // parked at both
  EXPECT_EQ(e->PendingRequestCount(), 2u);
  ASSERT_TRUE(b->AnswerOne());  // x's step 1; y's step 1 takes the place ...
  ASSERT_TRUE(b->AnswerOne());  // ... and fails
  EXPECT_FALSE(y.done());       // y's step 0 is still waiting for its place
  ASSERT_TRUE(a->AnswerOne());  // x's step 0: the place goes to y's step 0, which is not run
  ASSERT_TRUE(y.done());
  EXPECT_EQ(y.future.get().status().message(), "ensemble 'e' step 1 (model 'b'): negative input");
  EXPECT_EQ(a->calls(), 1);
  EXPECT_TRUE(x.future.get().ok());
  EXPECT_EQ(e->PendingRequestCount(), 0u);
}

// Thousands of parked steps released by answers given on the releasing thread: the starts are
// queued per thread, not nested (a nested start per parked step would overflow the stack).
TEST(EnsembleModel, ReleasingAGateDoesNotNest) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(1), false);
  models.Set("a", a);
  models.Set("b", b);
  auto e = MakeEnsemble(
      std::string(kEnsembleHead) + "ensemble_scheduling { max_inflight_requests: 1 step [ " +
          Step("a", {"x:IN"}, {"y:t"}) + ", " + Step("b", {"x:t"}, {"y:OUT"}) + " ] }",
      models);
  ASSERT_NE(e, nullptr);
  constexpr int kRequests = 20000;
  std::atomic<int> ok{0};
  for (int i = 0; i < kRequests; ++i) {
    e->Infer(Request({1, 2, 3, 4}), CallbackSink([&](Result<InferResponse> r) {
               if (r.ok()) ok.fetch_add(1);
             }));
  }
  EXPECT_EQ(e->PendingRequestCount(), static_cast<size_t>(kRequests - 1));
  a->set_manual(false);  // from now on `a` answers on the thread that starts its step
  ASSERT_TRUE(a->AnswerOne());
  EXPECT_EQ(ok.load(), kRequests);
  EXPECT_EQ(a->max_inflight(), 1);
}

TEST(EnsembleModel, ShutdownWaitsForAcceptedRequests) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), true);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(1), false);
  models.Set("a", a);
  models.Set("b", b);
  auto e = MakeEnsemble(std::string(kEnsembleHead) + kChain, models);
  ASSERT_NE(e, nullptr);
  Answer answer;
  e->Infer(Request({1, 2, 3, 4}), answer.Sink());
  std::atomic<bool> shut{false};
  std::thread t([&] {
    e->Shutdown();
    shut = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(shut.load());
  ASSERT_TRUE(a->AnswerOne());
  t.join();
  EXPECT_TRUE(shut.load());
  EXPECT_TRUE(answer.future.get().ok());
}

// Many threads, inline and delayed answers mixed: every request answered once, right values.
TEST(EnsembleModel, ConcurrentRequests) {
  Models models;
  auto a = std::make_shared<FakeModel>(Signatures().at("a"), AddConst(1), false);
  auto b = std::make_shared<FakeModel>(Signatures().at("b"), AddConst(10), false);
  auto c = std::make_shared<FakeModel>(Signatures().at("c"), Sum(), false);
  models.Set("a", a);
  models.Set("b", b);
  models.Set("c", c);
  auto e = MakeEnsemble(std::string(kEnsembleHead) +
                            "ensemble_scheduling { max_inflight_requests: 3 step [ " +
                            Step("a", {"x:IN"}, {"y:s"}) + ", " + Step("b", {"x:IN"}, {"y:o"}) +
                            ", " + Step("c", {"p:s", "q:o"}, {"z:OUT"}) + " ] }",
                        models);
  ASSERT_NE(e, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const float x = static_cast<float>(t * kPerThread + i);
        Answer answer;
        e->Infer(Request({x, x, x, x}), answer.Sink());
        Result<InferResponse> r = answer.future.get();
        if (r.ok() && FloatValues(r->outputs[0].tensor)[0] == 2 * x + 11) right.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), kThreads * kPerThread);
  EXPECT_LE(a->max_inflight(), 3);
  EXPECT_EQ(e->Statistics().inference.success.count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(e->InflightRequests(), 0);
}

}  // namespace
}  // namespace kiln
