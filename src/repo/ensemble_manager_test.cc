// SPDX-License-Identifier: Apache-2.0
// Ensembles end to end through the model manager, on a temporary repository of small graphs
// built in C++ (a "model file" names the graph; the session runs them on the CPU kernels):
// loading in dependency order, correct outputs of a chain, a diamond and a nested ensemble,
// requests of many ensemble calls batched together at a step, a step that fails one request,
// and the ensemble's state following its composing models through unload, reload and polls.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include "repo/ensemble.h"
#include "repo/model_manager.h"
#include "repo/model_manager_impl.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::MakeDirs;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;

ValueType F32Type(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

// y = x <op> k, x FP32 [batch, n].
std::shared_ptr<Graph> ConstOpGraph(const std::string& op, float k) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const ValueType t = F32Type({Dim{-1, "batch"}, Dim{-1, "n"}});
  const int x = g->AddValue({"x", t, -1, nullptr});
  Result<OwnedTensor> kt = OwnedTensor::Allocate(DataType::kFloat32, Shape{1});
  EXPECT_TRUE(kt.ok());
  kt->data<float>()[0] = k;
  const int kv = g->AddValue(
      {"k", F32Type({Dim{1, ""}}), -1, std::make_shared<const OwnedTensor>(std::move(kt).value())});
  const int y = g->AddValue({"y", t, -1, nullptr});
  g->inputs = {x};
  Node n;
  n.name = "n0";
  n.op_type = op;
  n.inputs = {x, kv};
  n.outputs = {y};
  g->AddNode(std::move(n));
  g->outputs = {y};
  return g;
}

// z = p + q, FP32 [batch, n].
std::shared_ptr<Graph> SumGraph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const ValueType t = F32Type({Dim{-1, "batch"}, Dim{-1, "n"}});
  const int p = g->AddValue({"p", t, -1, nullptr});
  const int q = g->AddValue({"q", t, -1, nullptr});
  const int z = g->AddValue({"z", t, -1, nullptr});
  g->inputs = {p, q};
  Node n;
  n.name = "sum";
  n.op_type = "Add";
  n.inputs = {p, q};
  n.outputs = {z};
  g->AddNode(std::move(n));
  g->outputs = {z};
  return g;
}

Result<std::shared_ptr<Graph>> Loader(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  if (word == "times2") return ConstOpGraph("Mul", 2);
  if (word == "plus1") return ConstOpGraph("Add", 1);
  if (word == "sum") return SumGraph();
  return Status::InvalidArgument(fmt::format("'{}': not a test graph", path));
}

// A batching unary model with dynamic batching: requests meet in batches of up to 8.
std::string UnaryConfig(std::string_view name, std::string_view dims = "-1") {
  return fmt::format(R"cfg(name: "{}" max_batch_size: 8
    input {{ name: "x" data_type: TYPE_FP32 dims: [ {} ] }}
    output {{ name: "y" data_type: TYPE_FP32 dims: [ {} ] }}
    dynamic_batching {{ preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 20000 }})cfg",
                     name, dims, dims);
}

std::string EnsembleConfig(std::string_view name, std::string_view steps,
                           std::string_view out_type = "TYPE_FP32") {
  return fmt::format(R"cfg(name: "{}" platform: "ensemble" max_batch_size: 8
    input {{ name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }}
    output {{ name: "OUT" data_type: {} dims: [ -1 ] }}
    ensemble_scheduling {{ step [ {} ] }})cfg",
                     name, out_type, steps);
}

std::string Step(std::string_view model, std::string_view maps) {
  return fmt::format("{{ model_name: \"{}\" model_version: -1 {} }}", model, maps);
}

std::string Map(std::string_view field, std::string_view key, std::string_view value) {
  return fmt::format("{} {{ key: \"{}\" value: \"{}\" }} ", field, key, value);
}

class EnsembleManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AddModel("times2", UnaryConfig("times2"), "times2");
    AddModel("plus1", UnaryConfig("plus1"), "plus1");
    AddModel("strict", UnaryConfig("strict", "4"), "plus1");
    AddModel("sum", R"cfg(name: "sum" max_batch_size: 8
        input { name: "p" data_type: TYPE_FP32 dims: [ -1 ] }
        input { name: "q" data_type: TYPE_FP32 dims: [ -1 ] }
        output { name: "z" data_type: TYPE_FP32 dims: [ -1 ] })cfg",
             "sum");
    // Names sort before their composing models': the manager must order the loads.
    // OUT = 2x + 1.
    AddEnsemble(
        "a_chain",
        EnsembleConfig(
            "a_chain",
            Step("times2", Map("input_map", "x", "IN") + Map("output_map", "y", "t")) + ", " +
                Step("plus1", Map("input_map", "x", "t") + Map("output_map", "y", "OUT"))));
    // OUT = 2x + (x + 1).
    AddEnsemble(
        "a_diamond",
        EnsembleConfig(
            "a_diamond",
            Step("times2", Map("input_map", "x", "IN") + Map("output_map", "y", "doubled")) + ", " +
                Step("plus1", Map("input_map", "x", "IN") + Map("output_map", "y", "next")) + ", " +
                Step("sum", Map("input_map", "p", "doubled") + Map("input_map", "q", "next") +
                                Map("output_map", "z", "OUT"))));
    // The second step takes 4 values only.
    AddEnsemble(
        "a_failing",
        EnsembleConfig(
            "a_failing",
            Step("times2", Map("input_map", "x", "IN") + Map("output_map", "y", "t")) + ", " +
                Step("strict", Map("input_map", "x", "t") + Map("output_map", "y", "OUT"))));
    // An ensemble step running an ensemble: OUT = (2x + 1) + 1.
    AddEnsemble(
        "z_nested",
        EnsembleConfig(
            "z_nested",
            Step("a_chain", Map("input_map", "IN", "IN") + Map("output_map", "OUT", "t")) + ", " +
                Step("plus1", Map("input_map", "x", "t") + Map("output_map", "y", "OUT"))));
  }

  void AddModel(const std::string& name, const std::string& config, const std::string& word) {
    WriteFile(repo_.path() / name / "config.pbtxt", config);
    WriteFile(repo_.path() / name / "1" / "model.onnx", word);
  }
  void AddEnsemble(const std::string& name, const std::string& config) {
    WriteFile(repo_.path() / name / "config.pbtxt", config);
    MakeDirs(repo_.path() / name / "1");  // ensembles have (empty) version directories too
  }

  std::unique_ptr<ModelManager> MakeManager(ModelControlMode mode,
                                            std::vector<std::string> startup = {}) {
    ModelManagerOptions options;
    options.repository_path = repo_.path().string();
    options.control_mode = mode;
    options.startup_models = std::move(startup);
    options.instance_options.cpu_threads = 2;
    options.instance_options.oversubscribe = true;
    Result<std::unique_ptr<ModelManager>> m = CreateModelManager(options, Loader);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  static std::unique_ptr<InferRequest> Request(std::vector<float> values) {
    auto r = std::make_unique<InferRequest>();
    r->inputs.push_back(FloatInput("IN", {1, static_cast<int64_t>(values.size())}, values));
    return r;
  }

  static Result<InferResponse> InferSync(ModelManager& m, std::string_view name,
                                         std::vector<float> values) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> model, m.GetModel(name, -1));
    std::promise<Result<InferResponse>> done;
    model->Infer(Request(std::move(values)),
                 [&done](Result<InferResponse> r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  }

  static std::string State(const ModelManager& m, std::string_view name, int64_t version = 1) {
    for (const ModelIndexEntry& e : m.Index()) {
      if (e.name == name && e.version == version) {
        return std::string(ModelStateName(e.state)) + (e.reason.empty() ? "" : ": " + e.reason);
      }
    }
    return "absent";
  }

  TempDir repo_;
};

TEST_F(EnsembleManagerTest, LoadsInDependencyOrderAndComputes) {
  auto m = MakeManager(ModelControlMode::kNone);
  Status s = m->LoadInitialModels();
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (const char* name : {"a_chain", "a_diamond", "a_failing", "z_nested", "times2", "plus1"}) {
    EXPECT_EQ(State(*m, name), "READY") << name;
  }
  EXPECT_TRUE(m->AllModelsReady());

  Result<InferResponse> r = InferSync(*m, "a_chain", {1, 2, 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_name, "a_chain");
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "OUT");
  EXPECT_EQ(r->outputs[0].tensor.shape().ToString(), "[1,3]");
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{3, 5, 7}));

  r = InferSync(*m, "a_diamond", {1, 2, 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{4, 7, 10}));

  r = InferSync(*m, "z_nested", {1, 2, 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{4, 6, 8}));

  // Metadata and config of an ensemble.
  Result<std::shared_ptr<LoadedModel>> e = m->GetModel("a_chain", -1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->signature().platform, "ensemble");
  ASSERT_NE((*e)->model_config(), nullptr);
  EXPECT_EQ((*e)->model_config()->ensemble_scheduling().step_size(), 2);
  EXPECT_TRUE((*e)->model_config()->version_policy().has_latest());
  EXPECT_EQ((*e)->model_config()->instance_group_size(), 0);
}

TEST_F(EnsembleManagerTest, ConcurrentEnsembleRequestsBatchAtEachStep) {
  auto m = MakeManager(ModelControlMode::kNone);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> e = m->GetModel("a_chain", -1);
  ASSERT_TRUE(e.ok());
  constexpr int kRequests = 64;
  std::vector<std::promise<Result<InferResponse>>> done(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    const float x = static_cast<float>(i);
    (*e)->Infer(Request({x, x + 1, x + 2}), [&done, i](Result<InferResponse> r) {
      done[static_cast<size_t>(i)].set_value(std::move(r));
    });
  }
  for (int i = 0; i < kRequests; ++i) {
    Result<InferResponse> r = done[static_cast<size_t>(i)].get_future().get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const float x = static_cast<float>(i);
    EXPECT_EQ(FloatValues(r->outputs[0].tensor),
              (std::vector<float>{2 * x + 1, 2 * x + 3, 2 * x + 5}));
  }
  // Each step's own statistics: the ensemble's requests met in batches there.
  for (const char* step : {"times2", "plus1"}) {
    Result<std::shared_ptr<LoadedModel>> model = m->GetModel(step, -1);
    ASSERT_TRUE(model.ok());
    const ModelStatistics s = (*model)->Statistics();
    EXPECT_EQ(s.inference.success.count, static_cast<uint64_t>(kRequests)) << step;
    EXPECT_EQ(s.inference_count, static_cast<uint64_t>(kRequests)) << step;
    EXPECT_LT(s.execution_count, static_cast<uint64_t>(kRequests)) << step;
    uint64_t batched = 0;
    for (const auto& [size, b] : s.batches) batched += size > 1 ? b.compute_infer.count : 0;
    EXPECT_GT(batched, 0u) << step;
  }
  // The ensemble's own: one execution per request, end-to-end time.
  const ModelStatistics es = (*e)->Statistics();
  EXPECT_EQ(es.inference.success.count, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(es.execution_count, static_cast<uint64_t>(kRequests));
  EXPECT_GT(es.inference.success.ns, 0u);

  // Per step: every request reached each step once, and the times the steps' responses
  // reported are exactly what each composing model recorded (only this ensemble used them).
  ASSERT_EQ(es.ensemble_steps.size(), 2u);
  InferStatistics sum;  // over the composing models' own statistics
  for (size_t i = 0; i < 2; ++i) {
    const EnsembleStepStatistics& step = es.ensemble_steps[i];
    const char* name = i == 0 ? "times2" : "plus1";
    EXPECT_EQ(step.step, static_cast<int>(i));
    EXPECT_EQ(step.model, name);
    EXPECT_EQ(step.model_version, -1);
    EXPECT_EQ(step.success.count, static_cast<uint64_t>(kRequests)) << name;
    EXPECT_EQ(step.fail.count, 0u) << name;
    EXPECT_GT(step.success.ns, 0u) << name;
    EXPECT_EQ(step.compute_infer.count, static_cast<uint64_t>(kRequests)) << name;
    EXPECT_GT(step.compute_infer.ns, 0u) << name;
    const ModelStatistics own = (*m->GetModel(name, -1))->Statistics();
    EXPECT_EQ(step.queue.ns, own.inference.queue.ns) << name;
    EXPECT_EQ(step.compute_input.ns, own.inference.compute_input.ns) << name;
    EXPECT_EQ(step.compute_infer.ns, own.inference.compute_infer.ns) << name;
    EXPECT_EQ(step.compute_output.ns, own.inference.compute_output.ns) << name;
    // A step's time from hand-off to answer covers its model's queue and compute.
    EXPECT_GE(step.success.ns, own.inference.queue.ns + own.inference.compute_infer.ns) << name;
    sum.queue.ns += own.inference.queue.ns;
    sum.compute_input.ns += own.inference.compute_input.ns;
    sum.compute_infer.ns += own.inference.compute_infer.ns;
    sum.compute_output.ns += own.inference.compute_output.ns;
  }
  // The ensemble's queue and compute are the sums over its steps (no max_inflight_requests).
  EXPECT_EQ(es.inference.queue.ns, sum.queue.ns);
  EXPECT_EQ(es.inference.compute_input.ns, sum.compute_input.ns);
  EXPECT_EQ(es.inference.compute_infer.ns, sum.compute_infer.ns);
  EXPECT_EQ(es.inference.compute_output.ns, sum.compute_output.ns);
  EXPECT_EQ(es.inference.compute_infer.count, static_cast<uint64_t>(kRequests));
}

TEST_F(EnsembleManagerTest, NestedEnsembleStepReportsTheInnerEnsemblesSums) {
  auto m = MakeManager(ModelControlMode::kNone);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  constexpr int kRequests = 5;
  for (int i = 0; i < kRequests; ++i) {
    Result<InferResponse> r = InferSync(*m, "z_nested", {1, 2, 3});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->timing.compute_infer_ns, 0u);
  }
  const ModelStatistics outer = (*m->GetModel("z_nested", -1))->Statistics();
  const ModelStatistics inner = (*m->GetModel("a_chain", -1))->Statistics();
  ASSERT_EQ(outer.ensemble_steps.size(), 2u);
  const EnsembleStepStatistics& step0 = outer.ensemble_steps[0];
  EXPECT_EQ(step0.model, "a_chain");
  EXPECT_EQ(step0.success.count, static_cast<uint64_t>(kRequests));
  // Step 0 ran the inner ensemble, which reported the sums over its own steps.
  EXPECT_EQ(inner.inference.success.count, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(step0.queue.ns, inner.inference.queue.ns);
  EXPECT_EQ(step0.compute_infer.ns, inner.inference.compute_infer.ns);
  EXPECT_GT(step0.compute_infer.ns, 0u);
  const uint64_t plus1_infer = outer.ensemble_steps[1].compute_infer.ns;
  EXPECT_GT(plus1_infer, 0u);
  EXPECT_EQ(outer.inference.compute_infer.ns, inner.inference.compute_infer.ns + plus1_infer);
}

TEST_F(EnsembleManagerTest, AFailingStepFailsOnlyThatRequest) {
  auto m = MakeManager(ModelControlMode::kNone);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> e = m->GetModel("a_failing", -1);
  ASSERT_TRUE(e.ok());
  std::vector<std::promise<Result<InferResponse>>> done(9);
  for (size_t i = 0; i < done.size(); ++i) {
    std::vector<float> values = i == 4 ? std::vector<float>{1, 2, 3, 4, 5}  // 5 values: refused
                                       : std::vector<float>{1, 2, 3, 4};
    (*e)->Infer(Request(values),
                [&done, i](Result<InferResponse> r) { done[i].set_value(std::move(r)); });
  }
  for (size_t i = 0; i < done.size(); ++i) {
    Result<InferResponse> r = done[i].get_future().get();
    if (i != 4) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{3, 5, 7, 9}));
      continue;
    }
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              "ensemble 'a_failing' step 1 (model 'strict'): input 'x': expected shape [-1,4], "
              "got [1,5]");
  }
  const ModelStatistics s = (*e)->Statistics();
  EXPECT_EQ(s.inference.success.count, 8u);
  EXPECT_EQ(s.inference.fail.count, 1u);
  // Every request passed step 0; step 1 refused one.
  ASSERT_EQ(s.ensemble_steps.size(), 2u);
  EXPECT_EQ(s.ensemble_steps[0].success.count, 9u);
  EXPECT_EQ(s.ensemble_steps[0].fail.count, 0u);
  EXPECT_EQ(s.ensemble_steps[1].model, "strict");
  EXPECT_EQ(s.ensemble_steps[1].success.count, 8u);
  EXPECT_EQ(s.ensemble_steps[1].fail.count, 1u);
}

TEST_F(EnsembleManagerTest, ExplicitLoadUnloadAndReloadOfAComposingModel) {
  auto m = MakeManager(ModelControlMode::kExplicit);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  EXPECT_EQ(State(*m, "times2", -1), "UNKNOWN");
  // Loading the ensemble loads its composing models first.
  Status s = m->LoadModel("a_chain", {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(State(*m, "a_chain"), "READY");
  EXPECT_EQ(State(*m, "times2"), "READY");
  EXPECT_EQ(State(*m, "plus1"), "READY");
  EXPECT_EQ(State(*m, "sum", -1), "UNKNOWN");  // not a composing model of this one
  ASSERT_TRUE(InferSync(*m, "a_chain", {1}).ok());

  // Unloading a composing model: the ensemble stays loaded but is unavailable, naming it.
  ASSERT_TRUE(m->UnloadModel("plus1").ok());
  EXPECT_EQ(State(*m, "a_chain"),
            "UNAVAILABLE: composing model 'plus1' has no ready version (unloaded)");
  Result<std::shared_ptr<LoadedModel>> e = m->GetModel("a_chain", -1);
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(e.status().message(), HasSubstr("composing model 'plus1' has no ready version"));
  e = m->GetModel("a_chain", 1);
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(e.status().message(), HasSubstr("composing model 'plus1'"));
  EXPECT_TRUE(m->ReadyVersions("a_chain").empty());
  // The unloaded composing model was unloaded on purpose: the server stays ready.
  EXPECT_TRUE(m->AllModelsReady());

  // Loading it again brings the ensemble back.
  ASSERT_TRUE(m->LoadModel("plus1", {}).ok());
  EXPECT_EQ(State(*m, "a_chain"), "READY");
  Result<InferResponse> r = InferSync(*m, "a_chain", {5});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{11}));

  // Unloading the ensemble leaves its composing models serving.
  ASSERT_TRUE(m->UnloadModel("a_chain").ok());
  EXPECT_EQ(State(*m, "a_chain"), "UNAVAILABLE: unloaded");
  EXPECT_EQ(State(*m, "times2"), "READY");

  // A nested ensemble loads its ensemble step, which loads its own composing models.
  ASSERT_TRUE(m->UnloadModel("times2").ok());
  s = m->LoadModel("z_nested", {});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(State(*m, "a_chain"), "READY");
  EXPECT_EQ(State(*m, "times2"), "READY");
  r = InferSync(*m, "z_nested", {1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{4}));
  // Two levels down: unloading times2 makes both ensembles unavailable.
  ASSERT_TRUE(m->UnloadModel("times2").ok());
  EXPECT_THAT(State(*m, "z_nested"),
              HasSubstr("UNAVAILABLE: composing model 'a_chain' has no ready version (composing "
                        "model 'times2' has no ready version (unloaded))"));
}

TEST_F(EnsembleManagerTest, UnloadDependentsUnloadsWhatWasLoadedAlongAndIsNotUsedElsewhere) {
  // OUT = 2(x + 1) + 1: its first step's model is also a step of its second step (an ensemble).
  AddEnsemble(
      "y_shared",
      EnsembleConfig(
          "y_shared",
          Step("plus1", Map("input_map", "x", "IN") + Map("output_map", "y", "t")) + ", " +
              Step("a_chain", Map("input_map", "IN", "t") + Map("output_map", "OUT", "OUT"))));
  auto m = MakeManager(ModelControlMode::kExplicit);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  const ModelUnloadOptions dependents{.unload_dependents = true};
  const std::string unloaded = "UNAVAILABLE: unloaded";

  // The composing models an explicit load brought along go with the ensemble; others stay.
  ASSERT_TRUE(m->LoadModel("sum", {}).ok());
  ASSERT_TRUE(m->LoadModel("a_chain", {}).ok());
  ASSERT_EQ(State(*m, "times2"), "READY");
  ASSERT_TRUE(m->UnloadModel("a_chain", dependents).ok());
  EXPECT_EQ(State(*m, "a_chain"), unloaded);
  EXPECT_EQ(State(*m, "times2"), unloaded);
  EXPECT_EQ(State(*m, "plus1"), unloaded);
  EXPECT_EQ(State(*m, "sum"), "READY");
  EXPECT_TRUE(m->AllModelsReady());

  // A composing model loaded on its own stays.
  ASSERT_TRUE(m->LoadModel("plus1", {}).ok());
  ASSERT_TRUE(m->LoadModel("a_chain", {}).ok());
  ASSERT_TRUE(m->UnloadModel("a_chain", dependents).ok());
  EXPECT_EQ(State(*m, "times2"), unloaded);
  EXPECT_EQ(State(*m, "plus1"), "READY");
  ASSERT_TRUE(m->UnloadModel("plus1").ok());

  // A composing model another loaded ensemble uses stays until that one goes too.
  ASSERT_TRUE(m->UnloadModel("sum").ok());
  ASSERT_TRUE(m->LoadModel("a_chain", {}).ok());    // brings times2, plus1
  ASSERT_TRUE(m->LoadModel("a_diamond", {}).ok());  // brings sum; shares times2, plus1
  ASSERT_TRUE(m->UnloadModel("a_chain", dependents).ok());
  EXPECT_EQ(State(*m, "a_chain"), unloaded);
  EXPECT_EQ(State(*m, "times2"), "READY");
  EXPECT_EQ(State(*m, "plus1"), "READY");
  EXPECT_EQ(State(*m, "a_diamond"), "READY");
  ASSERT_TRUE(InferSync(*m, "a_diamond", {1}).ok());
  ASSERT_TRUE(m->UnloadModel("a_diamond", dependents).ok());
  for (const char* name : {"a_diamond", "times2", "plus1", "sum"}) {
    EXPECT_EQ(State(*m, name), unloaded) << name;
  }

  // Without the option, the composing models stay (as before).
  ASSERT_TRUE(m->LoadModel("a_chain", {}).ok());
  ASSERT_TRUE(m->UnloadModel("a_chain").ok());
  EXPECT_EQ(State(*m, "times2"), "READY");
  EXPECT_EQ(State(*m, "plus1"), "READY");
  // ... and they were loaded along, so a later unload_dependents of a model that does not use
  // them leaves them alone; unloading an ensemble that is not loaded unloads nothing else.
  ASSERT_TRUE(m->LoadModel("sum", {}).ok());
  ASSERT_TRUE(m->UnloadModel("sum", dependents).ok());
  ASSERT_TRUE(m->UnloadModel("a_chain", dependents).ok());
  EXPECT_EQ(State(*m, "times2"), "READY");
  EXPECT_EQ(State(*m, "plus1"), "READY");
  ASSERT_TRUE(m->UnloadModel("times2").ok());
  ASSERT_TRUE(m->UnloadModel("plus1").ok());

  // Nested, recursively: the inner ensemble and its composing models, even one (plus1) that the
  // inner ensemble still used when the outer one's steps were first looked at.
  ASSERT_TRUE(m->LoadModel("y_shared", {}).ok());
  Result<InferResponse> r = InferSync(*m, "y_shared", {1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{5}));
  ASSERT_EQ(State(*m, "a_chain"), "READY");
  ASSERT_TRUE(m->UnloadModel("y_shared", dependents).ok());
  for (const char* name : {"y_shared", "a_chain", "times2", "plus1"}) {
    EXPECT_EQ(State(*m, name), unloaded) << name;
  }
  EXPECT_TRUE(m->AllModelsReady());
}

TEST_F(EnsembleManagerTest, UnloadDependentsKeepsModelsNamedAtStart) {
  auto m = MakeManager(ModelControlMode::kExplicit, {"a_chain", "plus1"});
  ASSERT_TRUE(m->LoadInitialModels().ok());
  ASSERT_EQ(State(*m, "times2"), "READY");  // loaded along with a_chain
  ASSERT_TRUE(m->UnloadModel("a_chain", {.unload_dependents = true}).ok());
  EXPECT_EQ(State(*m, "a_chain"), "UNAVAILABLE: unloaded");
  EXPECT_EQ(State(*m, "times2"), "UNAVAILABLE: unloaded");
  EXPECT_EQ(State(*m, "plus1"), "READY");  // named at start
  // Other modes refuse unloads, with or without the option.
  auto none = MakeManager(ModelControlMode::kNone);
  ASSERT_TRUE(none->LoadInitialModels().ok());
  EXPECT_EQ(none->UnloadModel("a_chain", {.unload_dependents = true}).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(State(*none, "times2"), "READY");
}

TEST_F(EnsembleManagerTest, LoadErrorsNameTheStepAndTensor) {
  AddEnsemble("ghost_ens",
              EnsembleConfig("ghost_ens", Step("ghost", Map("input_map", "x", "IN") +
                                                            Map("output_map", "y", "OUT"))));
  AddEnsemble("typed_ens", EnsembleConfig("typed_ens",
                                          Step("times2", Map("input_map", "x", "IN") +
                                                             Map("output_map", "y", "OUT")),
                                          "TYPE_INT32"));
  AddEnsemble("cyc1", EnsembleConfig("cyc1", Step("cyc2", Map("input_map", "IN", "IN") +
                                                              Map("output_map", "OUT", "OUT"))));
  AddEnsemble("cyc2", EnsembleConfig("cyc2", Step("cyc1", Map("input_map", "IN", "IN") +
                                                              Map("output_map", "OUT", "OUT"))));
  auto m = MakeManager(ModelControlMode::kExplicit);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  Status s = m->LoadModel("ghost_ens", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("ensemble 'ghost_ens' step 0 (model 'ghost'): composing model not "
                        "available: Request for unknown model: 'ghost' is not found"));
  EXPECT_THAT(State(*m, "ghost_ens"), HasSubstr("UNAVAILABLE: ensemble 'ghost_ens' step 0"));

  s = m->LoadModel("typed_ens", {});
  EXPECT_THAT(s.message(),
              HasSubstr("ensemble 'typed_ens': ensemble tensor 'OUT': the ensemble output 'OUT' "
                        "declares INT32 [-1,-1], but step 0 (model 'times2') output 'y' produces "
                        "FP32 [-1,-1] (datatypes differ)"));

  s = m->LoadModel("cyc1", {});
  EXPECT_THAT(s.message(), HasSubstr("composing models form a cycle: cyc1 -> cyc2 -> cyc1"));
  EXPECT_NE(State(*m, "cyc1"), "READY");

  // A config sent with the load request works as well, and is checked the same way.
  ModelLoadOptions options;
  options.config_json = R"({"name":"ghost_ens","platform":"ensemble","max_batch_size":8,
      "input":[{"name":"IN","data_type":"TYPE_FP32","dims":[-1]}],
      "output":[{"name":"OUT","data_type":"TYPE_FP32","dims":[-1]}],
      "ensemble_scheduling":{"step":[{"model_name":"plus1","model_version":-1,
        "input_map":{"x":"IN"},"output_map":{"y":"OUT"}}]}})";
  s = m->LoadModel("ghost_ens", options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Result<InferResponse> r = InferSync(*m, "ghost_ens", {1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{2}));
}

TEST_F(EnsembleManagerTest, PollFollowsComposingModelsLeavingAndComingBack) {
  auto m = MakeManager(ModelControlMode::kPoll);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  ASSERT_EQ(State(*m, "a_chain"), "READY");
  const auto moved = repo_.path().parent_path() / (repo_.path().filename().string() + "_plus1");
  std::filesystem::rename(repo_.path() / "plus1", moved);
  (void)m->Poll();
  EXPECT_EQ(State(*m, "a_chain"), "UNAVAILABLE: composing model 'plus1' is not loaded");
  EXPECT_EQ(InferSync(*m, "a_chain", {1}).status().code(), StatusCode::kUnavailable);
  std::filesystem::rename(moved, repo_.path() / "plus1");
  Status s = m->Poll();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(State(*m, "a_chain"), "READY");
  Result<InferResponse> r = InferSync(*m, "a_chain", {1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{3}));
}

}  // namespace
}  // namespace kiln
