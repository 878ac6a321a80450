// SPDX-License-Identifier: Apache-2.0
// ModelManager on temporary repositories, with a fake graph loader: a "model file" holds a word
// naming a hand-built graph, so layout, config, state and scheduling logic are tested without
// the ONNX importer or kernels (model_manager_e2e_test.cc covers those).
#include "repo/model_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <fstream>
#include <future>
#include <sstream>

#include "repo/model_manager_impl.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::D;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::MakeDirs;
using ::kiln::testing::PassthroughGraph;
using ::kiln::testing::SignatureGraph;
using ::kiln::testing::Sym;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;

Result<std::shared_ptr<Graph>> FakeLoader(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  if (word == "pair") {
    return PassthroughGraph({{"INPUT0", DataType::kFloat32, {Sym("batch"), D(16)}},
                             {"INPUT1", DataType::kFloat32, {Sym("batch"), D(16)}}});
  }
  if (word == "fixed") return PassthroughGraph({{"X", DataType::kFloat32, {D(2), D(3)}}});
  if (word == "unsupported") {
    return SignatureGraph({{"x", DataType::kFloat32, {Sym("batch"), D(4)}}},
                          {{"y", DataType::kFloat32, {Sym("batch"), D(4)}}}, "FancyOp");
  }
  return Status::InvalidArgument(fmt::format("'{}' is not a valid ONNX model: parse error", path));
}

constexpr std::string_view kPairIo = R"cfg(
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
)cfg";

// A repository with one model per rule under test.
class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& r = repo_.path();
    const auto model = [&](std::string_view name, std::string_view config,
                           const std::vector<std::pair<std::string, std::string>>& files) {
      if (!config.empty()) WriteFile(r / name / "config.pbtxt", config);
      for (const auto& [rel, word] : files) WriteFile(r / name / rel, word);
    };
    model("pair_cfg", "name: \"pair_cfg\" max_batch_size: 8 " + std::string(kPairIo),
          {{"1/model.onnx", "pair"},
           {"2/model.onnx", "pair"},
           {"3/model.onnx", "pair"},
           {"01/model.onnx", "pair"},
           {"abc/model.onnx", "pair"},
           {"notes.txt", "x"}});
    model("derived", "", {{"1/model.onnx", "pair"}});
    model("fixed", "", {{"1/model.onnx", "fixed"}});
    model("dirmodel", "", {{"1/model.onnx/model.onnx", "pair"}});
    model("broken", "", {{"1/model.onnx", "garbage"}});
    model("noversions", "max_batch_size: 0", {});
    model("unsupported", "", {{"1/model.onnx", "unsupported"}});
    model("badconfig", "name: \"badconfig\"\nmax_batch: 3\n", {{"1/model.onnx", "pair"}});
    model("allpolicy", "version_policy: { all { } }",
          {{"1/model.onnx", "pair"}, {"2/model.onnx", "pair"}});
    model("specific", "version_policy: { specific: { versions: [1, 3] } }",
          {{"1/model.onnx", "pair"}, {"2/model.onnx", "pair"}});
    model("gpu", "instance_group [ { kind: KIND_GPU } ]", {{"1/model.onnx", "pair"}});
    model("mismatch", "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]",
          {{"1/model.onnx", "pair"}});
    model("wrongname", "name: \"other\"", {{"1/model.onnx", "pair"}});
    model("nobatch", "max_batch_size: 4", {{"1/model.onnx", "fixed"}});
    model(
        "warned",
        "max_batch_size: 8 optimization { priority: PRIORITY_MAX } response_cache { enable: true } "
        "dynamic_batching { } instance_group [ { count: 2 } ] " +
            std::string(kPairIo),
        {{"1/model.onnx", "pair"}});
    MakeDirs(r / ".git");
  }

  std::unique_ptr<ModelManager> MakeManager(ModelControlMode mode = ModelControlMode::kNone,
                                            std::vector<std::string> startup = {},
                                            int workers = 1) {
    ModelManagerOptions options;
    options.repository_path = repo_.path().string();
    options.control_mode = mode;
    options.startup_models = std::move(startup);
    options.workers_per_model = workers;
    Result<std::unique_ptr<ModelManager>> m = CreateModelManager(options, FakeLoader);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  static const ModelIndexEntry* Find(const std::vector<ModelIndexEntry>& index,
                                     std::string_view name, int64_t version) {
    for (const ModelIndexEntry& e : index) {
      if (e.name == name && e.version == version) return &e;
    }
    return nullptr;
  }

  TempDir repo_;
};

TEST_F(ManagerTest, LoadsWhatItCanAndExplainsTheRest) {
  auto manager = MakeManager();
  Status s = manager->LoadInitialModels();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("'broken'"));
  EXPECT_FALSE(manager->AllModelsReady());

  const std::vector<ModelIndexEntry> index = manager->Index();
  const auto state = [&](std::string_view name, int64_t version) {
    const ModelIndexEntry* e = Find(index, name, version);
    return e ? std::string(ModelStateName(e->state)) : std::string("absent");
  };
  const auto reason = [&](std::string_view name, int64_t version) {
    const ModelIndexEntry* e = Find(index, name, version);
    return e ? e->reason : std::string("absent");
  };
  // Policy latest 1 over {1, 2, 3}; "01" and "abc" are not versions.
  EXPECT_EQ(state("pair_cfg", 3), "READY");
  EXPECT_EQ(state("pair_cfg", 1), "absent");
  EXPECT_EQ(state("derived", 1), "READY");
  EXPECT_EQ(state("fixed", 1), "READY");
  EXPECT_EQ(state("dirmodel", 1), "READY");
  EXPECT_EQ(state("allpolicy", 1), "READY");
  EXPECT_EQ(state("allpolicy", 2), "READY");
  EXPECT_EQ(state("specific", 1), "READY");
  EXPECT_EQ(state("specific", 2), "absent");
  EXPECT_EQ(state("specific", 3), "UNAVAILABLE");
  EXPECT_THAT(reason("specific", 3), HasSubstr("version directory '3' not found"));
  EXPECT_EQ(state("warned", 1), "READY");

  EXPECT_EQ(state("broken", 1), "UNAVAILABLE");
  EXPECT_THAT(reason("broken", 1), HasSubstr("is not a valid ONNX model"));
  EXPECT_EQ(state("noversions", -1), "UNAVAILABLE");
  EXPECT_THAT(reason("noversions", -1), HasSubstr("has no version directory"));
  EXPECT_EQ(state("unsupported", 1), "UNAVAILABLE");
  EXPECT_THAT(reason("unsupported", 1), HasSubstr("op FancyOp (opset 13) is not supported"));
  EXPECT_EQ(state("badconfig", -1), "UNAVAILABLE");
  EXPECT_THAT(reason("badconfig", -1), HasSubstr("badconfig/config.pbtxt:2:"));
  EXPECT_THAT(reason("badconfig", -1), HasSubstr("max_batch"));
  EXPECT_EQ(state("gpu", 1), "UNAVAILABLE");
  EXPECT_THAT(reason("gpu", 1), HasSubstr("KIND_GPU"));
  EXPECT_EQ(state("mismatch", 1), "UNAVAILABLE");
  EXPECT_THAT(reason("mismatch", 1),
              HasSubstr("input 'INPUT0': config data_type TYPE_INT32 does not match the model's "
                        "TYPE_FP32"));
  EXPECT_EQ(state("wrongname", -1), "UNAVAILABLE");
  EXPECT_THAT(reason("wrongname", -1), HasSubstr("'other'"));
  EXPECT_EQ(state("nobatch", 1), "UNAVAILABLE");
  EXPECT_THAT(reason("nobatch", 1), HasSubstr("max_batch_size is 4"));
  EXPECT_EQ(Find(index, ".git", -1), nullptr);

  // Derived configs.
  Result<std::shared_ptr<LoadedModel>> derived = manager->GetModel("derived", -1);
  ASSERT_TRUE(derived.ok());
  const ModelSignature& sig = (*derived)->signature();
  EXPECT_EQ(sig.platform, "onnxruntime_onnx");
  EXPECT_EQ(sig.backend, "onnxruntime");
  EXPECT_EQ(sig.max_batch_size, 4);
  ASSERT_EQ(sig.inputs.size(), 2u);
  EXPECT_EQ(sig.inputs[0].dims, std::vector<int64_t>{16});
  Result<std::shared_ptr<LoadedModel>> fixed = manager->GetModel("fixed", 1);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ((*fixed)->signature().max_batch_size, 0);
  EXPECT_EQ((*fixed)->signature().inputs[0].dims, (std::vector<int64_t>{2, 3}));
}

TEST_F(ManagerTest, GetModelErrors) {
  auto manager = MakeManager();
  (void)manager->LoadInitialModels();

  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("nope", -1);
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(), "Request for unknown model: 'nope' is not found");
  m = manager->GetModel("pair_cfg", 7);
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(), "Request for unknown model: 'pair_cfg' version 7 is not found");
  m = manager->GetModel("pair_cfg", 2);  // on disk, not selected by the policy
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);

  m = manager->GetModel("broken", -1);
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(m.status().message(), HasSubstr("'broken' has no available versions"));
  EXPECT_THAT(m.status().message(), HasSubstr("not a valid ONNX model"));
  m = manager->GetModel("broken", 1);
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(m.status().message(), HasSubstr("version 1 is not at ready state"));
  m = manager->GetModel("noversions", -1);
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);

  m = manager->GetModel("pair_cfg", -1);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->version(), 3);
  EXPECT_EQ((*m)->name(), "pair_cfg");
  m = manager->GetModel("allpolicy", -1);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->version(), 2);
  EXPECT_EQ(manager->ReadyVersions("allpolicy"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(manager->ReadyVersions("specific"), (std::vector<int64_t>{1}));
  EXPECT_TRUE(manager->ReadyVersions("broken").empty());
  EXPECT_TRUE(manager->ReadyVersions("nope").empty());
}

TEST_F(ManagerTest, InferThroughTheManager) {
  auto manager = MakeManager(ModelControlMode::kNone, {}, 2);
  (void)manager->LoadInitialModels();
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("pair_cfg", -1);
  ASSERT_TRUE(m.ok());
  std::vector<float> a(32), b(32);
  for (int i = 0; i < 32; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i);
    b[static_cast<size_t>(i)] = static_cast<float>(-i);
  }
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("INPUT0", {2, 16}, a));
  request->inputs.push_back(FloatInput("INPUT1", {2, 16}, b));
  request->outputs = {{"INPUT1"}, {"INPUT0"}};
  std::promise<Result<InferResponse>> p;
  (*m)->Infer(std::move(request), [&](Result<InferResponse> r) { p.set_value(std::move(r)); });
  Result<InferResponse> r = p.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_version, 3);
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].name, "INPUT1");
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), b);
  EXPECT_EQ(FloatValues(r->outputs[1].tensor), a);
}

TEST_F(ManagerTest, WarnsOncePerModelAboutFieldsNotActedOn) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  auto manager = MakeManager(ModelControlMode::kExplicit, {"warned"});
  EXPECT_TRUE(manager->LoadInitialModels().ok());
  spdlog::default_logger()->sinks().pop_back();
  const std::string text = log.str();
  EXPECT_THAT(text, HasSubstr("model 'warned': config fields accepted but not acted on yet: "
                              "optimization.priority\n"));
  // response_cache is acted on; without a server cache the load says so instead.
  EXPECT_THAT(text, HasSubstr("its config enables response_cache, but the server has no response "
                              "cache"));
  EXPECT_EQ(text.find("not acted on"), text.rfind("not acted on"));
}

TEST_F(ManagerTest, ExplicitModeLoadsOnlyStartupModels) {
  auto manager = MakeManager(ModelControlMode::kExplicit, {"derived", "allpolicy"});
  EXPECT_TRUE(manager->LoadInitialModels().ok());
  EXPECT_TRUE(manager->AllModelsReady());
  const std::vector<ModelIndexEntry> index = manager->Index();
  const ModelIndexEntry* broken = Find(index, "broken", -1);
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ(broken->state, ModelState::kUnknown);
  EXPECT_TRUE(broken->reason.empty());
  EXPECT_EQ(Find(index, "derived", 1)->state, ModelState::kReady);
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("pair_cfg", -1);
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(m.status().message(), HasSubstr("not loaded"));
  EXPECT_FALSE(manager->LoadInitialModels().ok());  // once only

  auto missing = MakeManager(ModelControlMode::kExplicit, {"derived", "ghost"});
  Status s = missing->LoadInitialModels();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("model 'ghost' is not in the repository"));
  EXPECT_FALSE(missing->AllModelsReady());

  auto all = MakeManager(ModelControlMode::kExplicit, {"*"});
  EXPECT_FALSE(all->LoadInitialModels().ok());
  EXPECT_TRUE(all->GetModel("broken", -1).status().code() == StatusCode::kUnavailable);
  EXPECT_TRUE(all->GetModel("fixed", -1).ok());
}

TEST_F(ManagerTest, PollModeLoadsEverythingLikeNone) {
  auto manager = MakeManager(ModelControlMode::kPoll);
  EXPECT_FALSE(manager->LoadInitialModels().ok());
  EXPECT_TRUE(manager->GetModel("derived", -1).ok());
}

TEST_F(ManagerTest, AllModelsReadyWhenEveryModelLoads) {
  TempDir good;
  WriteFile(good.path() / "a" / "1" / "model.onnx", "pair");
  WriteFile(good.path() / "b" / "4" / "model.onnx", "fixed");
  ModelManagerOptions options;
  options.repository_path = good.path().string();
  auto manager = CreateModelManager(options, FakeLoader);
  ASSERT_TRUE(manager.ok());
  EXPECT_FALSE((*manager)->AllModelsReady());  // nothing loaded yet
  EXPECT_TRUE((*manager)->LoadInitialModels().ok());
  EXPECT_TRUE((*manager)->AllModelsReady());
  EXPECT_EQ((*manager)->Index().size(), 2u);
}

TEST_F(ManagerTest, ShutdownDrainsInFlightRequests) {
  auto manager = MakeManager(ModelControlMode::kExplicit, {"derived"}, 1);
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("derived", 1);
  ASSERT_TRUE(m.ok());
  std::shared_ptr<LoadedModel> model = *m;
  constexpr int kRequests = 200;
  std::atomic<int> ok{0};
  std::atomic<int> calls{0};
  for (int i = 0; i < kRequests; ++i) {
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back(FloatInput("INPUT0", {1, 16}, std::vector<float>(16, 1.f)));
    request->inputs.push_back(FloatInput("INPUT1", {1, 16}, std::vector<float>(16, 2.f)));
    model->Infer(std::move(request), [&](const Result<InferResponse>& r) {
      calls++;
      if (r.ok()) ok++;
    });
  }
  manager->Shutdown();
  EXPECT_EQ(calls.load(), kRequests);
  EXPECT_EQ(ok.load(), kRequests);
  EXPECT_FALSE(manager->AllModelsReady());
  EXPECT_EQ(manager->GetModel("derived", 1).status().code(), StatusCode::kUnavailable);
  const std::vector<ModelIndexEntry> index = manager->Index();
  const ModelIndexEntry* e = Find(index, "derived", 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state, ModelState::kUnavailable);
  EXPECT_EQ(e->reason, "unloaded");

  // The held model refuses new work; a second Shutdown is a no-op.
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("INPUT0", {1, 16}, std::vector<float>(16, 1.f)));
  request->inputs.push_back(FloatInput("INPUT1", {1, 16}, std::vector<float>(16, 2.f)));
  bool refused = false;
  model->Infer(std::move(request), [&](const Result<InferResponse>& r) {
    refused = r.status().code() == StatusCode::kUnavailable;
  });
  EXPECT_TRUE(refused);
  manager->Shutdown();
  EXPECT_EQ(manager->LoadInitialModels().code(), StatusCode::kUnavailable);
}

TEST(ModelManagerCreate, Errors) {
  ModelManagerOptions options;
  EXPECT_EQ(ModelManager::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.repository_path = "/nonexistent/kiln/repo";
  Result<std::unique_ptr<ModelManager>> m = ModelManager::Create(options);
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent/kiln/repo"));
  TempDir tmp;
  options.repository_path = tmp.path().string();
  options.workers_per_model = 0;
  EXPECT_EQ(ModelManager::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.workers_per_model = 1;
  m = ModelManager::Create(options);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*m)->LoadInitialModels().ok());  // empty repository
  EXPECT_TRUE((*m)->Index().empty());
  EXPECT_TRUE((*m)->AllModelsReady());
}

TEST(ModelStateName, Names) {
  EXPECT_EQ(ModelStateName(ModelState::kReady), "READY");
  EXPECT_EQ(ModelStateName(ModelState::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(ModelStateName(ModelState::kLoading), "LOADING");
  EXPECT_EQ(ModelStateName(ModelState::kUnloading), "UNLOADING");
  EXPECT_EQ(ModelStateName(ModelState::kUnknown), "UNKNOWN");
}

}  // namespace
}  // namespace kiln
