// SPDX-License-Identifier: Apache-2.0
// ModelManager lifecycle on temporary repositories with a fake graph loader: explicit load /
// unload (and their errors), reloads that keep serving, repository polling (added, changed and
// removed models and versions), warmup at load, and a threaded stress test (clients inferring
// while models are loaded, reloaded and unloaded) that must run clean under TSan.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include "repo/model_manager.h"
#include "repo/model_manager_impl.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::D;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::PassthroughGraph;
using ::kiln::testing::Sym;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A model file's first word names its graph; the rest of the file is free (tests change it to
// make the file differ).
Result<std::shared_ptr<Graph>> FakeLoader(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  if (word == "pair") {
    return PassthroughGraph({{"INPUT0", DataType::kFloat32, {Sym("batch"), D(16)}},
                             {"INPUT1", DataType::kFloat32, {Sym("batch"), D(16)}}});
  }
  if (word == "single") return PassthroughGraph({{"X", DataType::kFloat32, {Sym("b"), D(4)}}});
  return Status::InvalidArgument(fmt::format("'{}' is not a valid ONNX model: parse error", path));
}

std::unique_ptr<InferRequest> PairRequest(float value, int64_t batch = 1) {
  auto request = std::make_unique<InferRequest>();
  const size_t n = static_cast<size_t>(batch * 16);
  request->inputs.push_back(FloatInput("INPUT0", {batch, 16}, std::vector<float>(n, value)));
  request->inputs.push_back(FloatInput("INPUT1", {batch, 16}, std::vector<float>(n, -value)));
  return request;
}

Result<InferResponse> InferSync(LoadedModel& model, std::unique_ptr<InferRequest> request) {
  std::promise<Result<InferResponse>> p;
  auto f = p.get_future();
  model.Infer(std::move(request), [&p](Result<InferResponse> r) { p.set_value(std::move(r)); });
  return f.get();
}

const ModelIndexEntry* Find(const std::vector<ModelIndexEntry>& index, std::string_view name,
                            int64_t version) {
  for (const ModelIndexEntry& e : index) {
    if (e.name == name && e.version == version) return &e;
  }
  return nullptr;
}

std::string StateOf(ModelManager& m, std::string_view name, int64_t version) {
  const std::vector<ModelIndexEntry> index = m.Index();
  const ModelIndexEntry* e = Find(index, name, version);
  return e ? std::string(ModelStateName(e->state)) : std::string("absent");
}

class LifecycleTest : public ::testing::Test {
 protected:
  const fs::path& repo() const { return repo_.path(); }

  std::unique_ptr<ModelManager> Make(ModelControlMode mode, std::vector<std::string> startup = {},
                                     int poll_secs = 0) {
    ModelManagerOptions options;
    options.repository_path = repo().string();
    options.control_mode = mode;
    options.startup_models = std::move(startup);
    options.repository_poll_secs = poll_secs;
    Result<std::unique_ptr<ModelManager>> m = CreateModelManager(options, FakeLoader);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  TempDir repo_;
};

TEST_F(LifecycleTest, ExplicitLoadAndUnload) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "b" / "1" / "model.onnx", "single");
  auto m = Make(ModelControlMode::kExplicit);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  EXPECT_TRUE(m->AllModelsReady());  // nothing asked for yet
  EXPECT_EQ(StateOf(*m, "a", -1), "UNKNOWN");

  ASSERT_TRUE(m->LoadModel("a", {}).ok());
  EXPECT_EQ(StateOf(*m, "a", 1), "READY");
  EXPECT_TRUE(m->AllModelsReady());
  Result<std::shared_ptr<LoadedModel>> a = m->GetModel("a", -1);
  ASSERT_TRUE(a.ok());
  Result<InferResponse> r = InferSync(**a, PairRequest(2.f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), std::vector<float>(16, 2.f));

  // Loading an unchanged, loaded model keeps the very same instance.
  ASSERT_TRUE(m->LoadModel("a", {}).ok());
  EXPECT_EQ(m->GetModel("a", 1)->get(), a->get());

  std::shared_ptr<LoadedModel> held = *a;
  a = Status::NotFound("released");
  ASSERT_TRUE(m->UnloadModel("a").ok());
  const std::vector<ModelIndexEntry> index = m->Index();
  ASSERT_NE(Find(index, "a", 1), nullptr);
  EXPECT_EQ(Find(index, "a", 1)->state, ModelState::kUnavailable);
  EXPECT_EQ(Find(index, "a", 1)->reason, "unloaded");
  EXPECT_EQ(m->GetModel("a", -1).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(m->AllModelsReady());  // unloaded on purpose: not a readiness failure
  // A holder of the unloaded model gets UNAVAILABLE, not a crash.
  EXPECT_EQ(InferSync(*held, PairRequest(1.f)).status().code(), StatusCode::kUnavailable);
  held.reset();

  // Unloading what is not loaded, or unknown, succeeds.
  EXPECT_TRUE(m->UnloadModel("a").ok());
  EXPECT_TRUE(m->UnloadModel("b").ok());
  EXPECT_TRUE(m->UnloadModel("ghost").ok());

  // Load again after unload.
  ASSERT_TRUE(m->LoadModel("a", {}).ok());
  EXPECT_EQ(StateOf(*m, "a", 1), "READY");
  EXPECT_TRUE(m->GetModel("a", -1).ok());
}

// LOADING while a load runs, UNLOADING while an unload waits for a holder of the model.
TEST_F(LifecycleTest, IndexShowsLoadingAndUnloading) {
  WriteFile(repo() / "gated" / "1" / "model.onnx", "pair");
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  std::atomic<bool> loader_waiting{false};
  ModelManagerOptions options;
  options.repository_path = repo().string();
  options.control_mode = ModelControlMode::kExplicit;
  auto created = CreateModelManager(options, [&](const std::string& path) {
    loader_waiting = true;
    opened.wait();
    return FakeLoader(path);
  });
  ASSERT_TRUE(created.ok());
  ModelManager& m = **created;
  ASSERT_TRUE(m.LoadInitialModels().ok());

  std::thread load([&] { EXPECT_TRUE(m.LoadModel("gated", {}).ok()); });
  while (!loader_waiting.load()) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(StateOf(m, "gated", -1), "LOADING");
  EXPECT_EQ(m.GetModel("gated", -1).status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(m.AllModelsReady());
  gate.set_value();
  load.join();
  EXPECT_EQ(StateOf(m, "gated", 1), "READY");

  std::shared_ptr<LoadedModel> held = *m.GetModel("gated", 1);
  std::atomic<bool> unloaded{false};
  std::thread unload([&] {
    EXPECT_TRUE(m.UnloadModel("gated").ok());
    unloaded = true;
  });
  while (StateOf(m, "gated", 1) == "READY") std::this_thread::sleep_for(1ms);
  EXPECT_EQ(StateOf(m, "gated", 1), "UNLOADING");
  EXPECT_EQ(m.GetModel("gated", 1).status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(unloaded.load());                         // waiting (bounded) for `held`
  EXPECT_TRUE(InferSync(*held, PairRequest(1.f)).ok());  // a holder's request still runs
  held.reset();
  unload.join();
  EXPECT_EQ(StateOf(m, "gated", 1), "UNAVAILABLE");
}

TEST_F(LifecycleTest, LoadAndUnloadNeedExplicitMode) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  for (ModelControlMode mode : {ModelControlMode::kNone, ModelControlMode::kPoll}) {
    auto m = Make(mode);
    ASSERT_TRUE(m->LoadInitialModels().ok());
    for (const Status& s : {m->LoadModel("a", {}), m->UnloadModel("a")}) {
      EXPECT_EQ(s.code(), StatusCode::kUnavailable);
      EXPECT_EQ(s.message(), "explicit model load / unload is not allowed if polling is enabled");
    }
    EXPECT_TRUE(m->GetModel("a", 1).ok());  // untouched
  }
  auto explicit_mode = Make(ModelControlMode::kExplicit);
  EXPECT_EQ(explicit_mode->Poll().code(), StatusCode::kFailedPrecondition);
}

TEST_F(LifecycleTest, LoadErrors) {
  WriteFile(repo() / "good" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "broken" / "1" / "model.onnx", "garbage");
  WriteFile(repo() / "badconfig" / "config.pbtxt", "max_batch: 3");
  WriteFile(repo() / "badconfig" / "1" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kExplicit, {"good"});
  ASSERT_TRUE(m->LoadInitialModels().ok());

  Status s = m->LoadModel("ghost", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("failed to load 'ghost', failed to poll from model "
                                     "repository: model 'ghost' is not in the repository"));
  for (std::string_view evil : {"../good", "good/1", "", ".", ".."}) {
    EXPECT_EQ(m->LoadModel(evil, {}).code(), StatusCode::kInvalidArgument) << evil;
  }

  s = m->LoadModel("broken", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("load failed for model 'broken': version 1: "));
  EXPECT_THAT(s.message(), HasSubstr("is not a valid ONNX model"));
  std::vector<ModelIndexEntry> index = m->Index();
  ASSERT_NE(Find(index, "broken", 1), nullptr);
  EXPECT_EQ(Find(index, "broken", 1)->state, ModelState::kUnavailable);
  EXPECT_THAT(Find(index, "broken", 1)->reason, HasSubstr("is not a valid ONNX model"));
  EXPECT_FALSE(m->AllModelsReady());  // asked for and failed

  s = m->LoadModel("badconfig", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("badconfig/config.pbtxt:1:"));
  index = m->Index();
  ASSERT_NE(Find(index, "badconfig", -1), nullptr);
  EXPECT_EQ(Find(index, "badconfig", -1)->state, ModelState::kUnavailable);

  // The failures did not disturb the model that serves.
  Result<std::shared_ptr<LoadedModel>> good = m->GetModel("good", -1);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(InferSync(**good, PairRequest(1.f)).ok());

  // Unloading a failed model clears its failure (and the server's readiness again).
  ASSERT_TRUE(m->UnloadModel("broken").ok());
  ASSERT_TRUE(m->UnloadModel("badconfig").ok());
  EXPECT_TRUE(m->AllModelsReady());
}

TEST_F(LifecycleTest, LoadWithConfigOverride) {
  WriteFile(repo() / "a" / "config.pbtxt", "max_batch_size: 8");
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kExplicit, {"a"});
  ASSERT_TRUE(m->LoadInitialModels().ok());
  EXPECT_EQ((*m->GetModel("a", -1))->signature().max_batch_size, 8);

  ModelLoadOptions options;
  options.config_json = R"({"max_batch_size": 2, "input": [
      {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]},
      {"name": "INPUT1", "data_type": "type_fp32", "dims": [16]}]})";
  ASSERT_TRUE(m->LoadModel("a", options).ok());
  const ModelSignature& sig = (*m->GetModel("a", -1))->signature();
  EXPECT_EQ(sig.max_batch_size, 2);
  EXPECT_EQ(sig.inputs.size(), 2u);

  // Without the override the repository's config applies again.
  ASSERT_TRUE(m->LoadModel("a", {}).ok());
  EXPECT_EQ((*m->GetModel("a", -1))->signature().max_batch_size, 8);

  for (std::string_view bad :
       {"{", R"({"max_batch_size": "x"})", R"({"no_such_field": 1})", R"({"name": "other"})"}) {
    options.config_json = std::string(bad);
    Status s = m->LoadModel("a", options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("load failed for model 'a'")) << bad;
    EXPECT_EQ((*m->GetModel("a", -1))->signature().max_batch_size, 8) << bad;  // still serving
  }
}

std::vector<std::string> UploadDirs() {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("kiln-upload-")) found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

TEST_F(LifecycleTest, LoadWithUploadedFiles) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kExplicit);
  const std::vector<std::string> before = UploadDirs();
  ModelLoadOptions options;
  options.files = {{"1/model.onnx", "pair"}, {"3/model.onnx", "pair"}};
  // "u" is not in the repository: the files are the whole model directory.
  options.config_json = R"({"max_batch_size": 4, "version_policy": {"all": {}}})";
  Status s = m->LoadModel("u", options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(StateOf(*m, "u", 1), "READY");
  EXPECT_EQ(StateOf(*m, "u", 3), "READY");
  Result<std::shared_ptr<LoadedModel>> u1 = m->GetModel("u", 1);
  ASSERT_TRUE(u1.ok());
  EXPECT_EQ((*u1)->signature().max_batch_size, 4);
  Result<InferResponse> r = InferSync(**u1, PairRequest(2.f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FloatValues(r->outputs[0].tensor)[0], 2.f);
  EXPECT_EQ(UploadDirs(), before) << "the temporary model directory was not removed";

  struct Bad {
    std::string model;
    std::vector<ModelLoadOptions::File> files;
    bool with_config;
    std::string needle;
  };
  const std::vector<Bad> bad = {
      {"v", {{"1/model.onnx", "pair"}}, false, "'config' parameter, which is required"},
      {"v", {{"../x/1/model.onnx", "pair"}}, true, "'file:../x/1/model.onnx'"},
      {"v", {{"/etc/1/model.onnx", "pair"}}, true, "relative"},
      {"v", {{"1//model.onnx", "pair"}}, true, "empty, '.' or '..'"},
      {"v", {{"./1/model.onnx", "pair"}}, true, "empty, '.' or '..'"},
      {"v", {{"1/model.onnx/", "pair"}}, true, "empty, '.' or '..'"},
      {"v", {{"", "pair"}}, true, "empty"},
      {"..", {{"1/model.onnx", "pair"}}, true, "cannot name a model directory"},
      {"x/y", {{"1/model.onnx", "pair"}}, true, "cannot name a model directory"},
      {"v", {{"1/model.onnx", "garbage"}}, true, "not a valid ONNX model"},
  };
  for (const Bad& b : bad) {
    ModelLoadOptions o;
    if (b.with_config) o.config_json = "{}";
    o.files = b.files;
    Status st = m->LoadModel(b.model, o);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.needle << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(b.needle));
  }
  EXPECT_EQ(UploadDirs(), before);
  EXPECT_EQ(StateOf(*m, "u", 1), "READY");  // refusals left the uploaded model serving
}

TEST_F(LifecycleTest, FailedReloadKeepsTheServingVersion) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kExplicit, {"a"});
  ASSERT_TRUE(m->LoadInitialModels().ok());
  LoadedModel* before = m->GetModel("a", 1)->get();

  WriteFile(repo() / "a" / "1" / "model.onnx", "garbage");
  Status s = m->LoadModel("a", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("version 1"));
  Result<std::shared_ptr<LoadedModel>> after = m->GetModel("a", 1);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->get(), before);
  EXPECT_TRUE(InferSync(**after, PairRequest(3.f)).ok());
  EXPECT_EQ(StateOf(*m, "a", 1), "READY");

  // A successful reload replaces it; the old instance is drained and shut down.
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair again");
  std::shared_ptr<LoadedModel> old = *after;
  after = Status::NotFound("released");
  std::thread reload([&] { EXPECT_TRUE(m->LoadModel("a", {}).ok()); });
  // The reload waits (bounded) for holders like `old` before it shuts the old version down, so
  // a request sent through it meanwhile is still answered.
  EXPECT_TRUE(InferSync(*old, PairRequest(4.f)).ok());
  old.reset();
  reload.join();
  EXPECT_NE(m->GetModel("a", 1)->get(), before);
}

TEST_F(LifecycleTest, ReloadOnlyTouchesChangedVersions) {
  WriteFile(repo() / "a" / "config.pbtxt", "version_policy: { all { } }");
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "a" / "2" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kExplicit, {"a"});
  ASSERT_TRUE(m->LoadInitialModels().ok());
  LoadedModel* v1 = m->GetModel("a", 1)->get();
  LoadedModel* v2 = m->GetModel("a", 2)->get();

  WriteFile(repo() / "a" / "2" / "model.onnx", "pair v2-b");
  ASSERT_TRUE(m->LoadModel("a", {}).ok());
  EXPECT_EQ(m->GetModel("a", 1)->get(), v1);
  EXPECT_NE(m->GetModel("a", 2)->get(), v2);
  v2 = m->GetModel("a", 2)->get();

  // A model-level change (config.pbtxt) reloads every version.
  WriteFile(repo() / "a" / "config.pbtxt", "version_policy: { all { } }\nmax_batch_size: 6");
  ASSERT_TRUE(m->LoadModel("a", {}).ok());
  EXPECT_NE(m->GetModel("a", 1)->get(), v1);
  EXPECT_NE(m->GetModel("a", 2)->get(), v2);
  EXPECT_EQ((*m->GetModel("a", 1))->signature().max_batch_size, 6);
}

TEST_F(LifecycleTest, PollPicksUpAddedChangedAndRemovedModelsAndVersions) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kPoll);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  EXPECT_TRUE(m->Poll().ok());  // nothing changed
  LoadedModel* a1 = m->GetModel("a", 1)->get();

  // Added model.
  WriteFile(repo() / "b" / "1" / "model.onnx", "single");
  EXPECT_EQ(StateOf(*m, "b", -1), "UNKNOWN");  // listed, not loaded yet
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_EQ(StateOf(*m, "b", 1), "READY");
  EXPECT_EQ(m->GetModel("a", 1)->get(), a1);  // untouched

  // Added version: latest 1 moves to version 2; version 1 is unloaded after 2 is ready.
  WriteFile(repo() / "a" / "2" / "model.onnx", "pair");
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_EQ(StateOf(*m, "a", 2), "READY");
  EXPECT_EQ(StateOf(*m, "a", 1), "UNAVAILABLE");
  EXPECT_EQ((*m->GetModel("a", -1))->version(), 2);
  EXPECT_TRUE(m->AllModelsReady());

  // Changed config: the model is reloaded with it.
  WriteFile(repo() / "a" / "config.pbtxt", "version_policy: { all { } }");
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_EQ(m->ReadyVersions("a"), (std::vector<int64_t>{1, 2}));

  // Changed model file of one version.
  LoadedModel* a2 = m->GetModel("a", 2)->get();
  a1 = m->GetModel("a", 1)->get();
  WriteFile(repo() / "a" / "2" / "model.onnx", "pair changed");
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_NE(m->GetModel("a", 2)->get(), a2);
  EXPECT_EQ(m->GetModel("a", 1)->get(), a1);

  // Removed version, then removed model.
  fs::remove_all(repo() / "a" / "1");
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_EQ(m->ReadyVersions("a"), (std::vector<int64_t>{2}));
  fs::remove_all(repo() / "b");
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_EQ(m->GetModel("b", -1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(StateOf(*m, "b", 1), "absent");
  EXPECT_TRUE(m->AllModelsReady());

  // A broken addition is reported and retried only once its files change.
  WriteFile(repo() / "c" / "1" / "model.onnx", "garbage");
  Status s = m->Poll();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("'c'"));
  EXPECT_EQ(StateOf(*m, "c", 1), "UNAVAILABLE");
  EXPECT_FALSE(m->AllModelsReady());
  EXPECT_TRUE(m->Poll().ok());  // unchanged: not retried
  WriteFile(repo() / "c" / "1" / "model.onnx", "single");
  ASSERT_TRUE(m->Poll().ok());
  EXPECT_EQ(StateOf(*m, "c", 1), "READY");
  EXPECT_TRUE(m->AllModelsReady());
}

TEST_F(LifecycleTest, PollThreadPicksUpChanges) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  auto m = Make(ModelControlMode::kPoll, {}, /*poll_secs=*/1);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  WriteFile(repo() / "b" / "1" / "model.onnx", "single");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!m->GetModel("b", 1).ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(m->GetModel("b", 1).ok());
  m->Shutdown();  // stops the thread
  EXPECT_EQ(m->Poll().code(), StatusCode::kUnavailable);
}

// Requests accepted by a version that a poll replaces all complete successfully.
TEST_F(LifecycleTest, VersionSwitchDrainsTheOldVersion) {
  WriteFile(repo() / "a" / "1" / "model.onnx", "pair");
  ModelManagerOptions options;
  options.repository_path = repo().string();
  options.control_mode = ModelControlMode::kPoll;
  options.workers_per_model = 1;
  auto created = CreateModelManager(options, FakeLoader);
  ASSERT_TRUE(created.ok());
  ModelManager& m = **created;
  ASSERT_TRUE(m.LoadInitialModels().ok());
  std::shared_ptr<LoadedModel> v1 = *m.GetModel("a", -1);
  constexpr int kRequests = 300;
  std::atomic<int> ok{0};
  std::atomic<int> calls{0};
  for (int i = 0; i < kRequests; ++i) {
    v1->Infer(PairRequest(static_cast<float>(i), 4), [&](const Result<InferResponse>& r) {
      calls++;
      if (r.ok()) ok++;
    });
  }
  v1.reset();
  WriteFile(repo() / "a" / "2" / "model.onnx", "pair");
  ASSERT_TRUE(m.Poll().ok());
  EXPECT_EQ(calls.load(), kRequests);  // the unload waited for every accepted request
  EXPECT_EQ(ok.load(), kRequests);
  EXPECT_EQ((*m.GetModel("a", -1))->version(), 2);
}

TEST_F(LifecycleTest, WarmupRunsBeforeReadyAndAFailingWarmupFailsTheLoad) {
  const std::string io = R"(max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
)";
  WriteFile(repo() / "warm" / "config.pbtxt", io + R"(model_warmup [ {
  name: "mixed" batch_size: 3 count: 2
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
  inputs { key: "INPUT1" value: { data_type: TYPE_FP32 dims: [ 16 ] input_data_file: "in1" } }
} ])");
  WriteFile(repo() / "warm" / "warmup" / "in1", std::string(64, '\0'));
  WriteFile(repo() / "warm" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "cold" / "config.pbtxt", io + R"(model_warmup [ {
  name: "wrong_shape" batch_size: 1
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 15 ] random_data: true } }
  inputs { key: "INPUT1" value: { data_type: TYPE_FP32 dims: [ 16 ] random_data: true } }
} ])");
  WriteFile(repo() / "cold" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "nofile" / "config.pbtxt", io + R"(model_warmup [ {
  name: "missing" batch_size: 1
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
  inputs { key: "INPUT1" value: { data_type: TYPE_FP32 dims: [ 16 ] input_data_file: "x" } }
} ])");
  WriteFile(repo() / "nofile" / "1" / "model.onnx", "pair");

  auto m = Make(ModelControlMode::kExplicit);
  ASSERT_TRUE(m->LoadInitialModels().ok());
  ASSERT_TRUE(m->LoadModel("warm", {}).ok());
  EXPECT_EQ(StateOf(*m, "warm", 1), "READY");
  // Warmup ran (2 x batch 3) but served nothing: statistics start at zero.
  Result<std::shared_ptr<LoadedModel>> warm = m->GetModel("warm", 1);
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ((*warm)->Statistics().inference_count, 0u);
  EXPECT_EQ((*warm)->Statistics().execution_count, 0u);
  EXPECT_EQ((*warm)->Statistics().inference.success.count, 0u);

  Status s = m->LoadModel("cold", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("warmup sample 'wrong_shape' failed: input 'INPUT0'"));
  const std::vector<ModelIndexEntry> index = m->Index();
  ASSERT_NE(Find(index, "cold", 1), nullptr);
  EXPECT_EQ(Find(index, "cold", 1)->state, ModelState::kUnavailable);
  EXPECT_THAT(Find(index, "cold", 1)->reason, HasSubstr("warmup sample 'wrong_shape' failed"));
  EXPECT_EQ(m->GetModel("cold", -1).status().code(), StatusCode::kUnavailable);

  s = m->LoadModel("nofile", {});
  EXPECT_THAT(s.message(), HasSubstr("warmup sample 'missing': input 'INPUT1'"));
  EXPECT_THAT(s.message(), HasSubstr("nofile/warmup/x not found"));
}

// Clients infer on several models while one is unloaded and loaded again and another is
// reloaded (its file changes each time) over and over. Every request gets exactly one answer;
// the models that are never unloaded answer every request successfully.
TEST_F(LifecycleTest, StressInferWhileLoadingAndUnloading) {
  WriteFile(repo() / "steady" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "reloaded" / "1" / "model.onnx", "pair");
  WriteFile(repo() / "toggled" / "1" / "model.onnx", "single");
  ModelManagerOptions options;
  options.repository_path = repo().string();
  options.control_mode = ModelControlMode::kExplicit;
  options.startup_models = {"*"};
  options.workers_per_model = 2;
  auto created = CreateModelManager(options, FakeLoader);
  ASSERT_TRUE(created.ok());
  ModelManager& m = **created;
  ASSERT_TRUE(m.LoadInitialModels().ok());

  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::atomic<int> answered{0};
  std::atomic<int> steady_failures{0};
  std::atomic<int> toggled_ok{0};
  std::vector<std::thread> clients;
  // Each client keeps at most kMaxInFlight requests outstanding, so queues stay short and every
  // unload drains a bounded backlog whatever the machine's speed.
  constexpr int kMaxInFlight = 8;
  std::array<std::atomic<int>, 4> in_flight{};
  clients.reserve(in_flight.size());
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      int i = 0;
      while (!stop.load()) {
        if (in_flight[static_cast<size_t>(c)].load() >= kMaxInFlight) {
          std::this_thread::yield();
          continue;
        }
        const int pick = (i++ + c) % 3;
        const std::string name = pick == 0 ? "toggled" : pick == 1 ? "reloaded" : "steady";
        Result<std::shared_ptr<LoadedModel>> model = m.GetModel(name, -1);
        if (!model.ok()) {
          if (name != "toggled") steady_failures++;
          continue;
        }
        std::unique_ptr<InferRequest> request;
        if (name == "toggled") {
          request = std::make_unique<InferRequest>();
          request->inputs.push_back(FloatInput("X", {1, 4}, {1, 2, 3, 4}));
        } else {
          request = PairRequest(1.f);
        }
        sent++;
        in_flight[static_cast<size_t>(c)]++;
        (*model)->Infer(std::move(request), [&, name, c](const Result<InferResponse>& r) {
          answered++;
          in_flight[static_cast<size_t>(c)]--;
          if (name == "toggled") {
            if (r.ok()) toggled_ok++;
          } else if (!r.ok()) {
            steady_failures++;
          }
        });
      }
    });
  }
  std::thread observer([&] {
    while (!stop.load()) {
      (void)m.Index();
      (void)m.AllModelsReady();
      (void)m.ReadyVersions("reloaded");
    }
  });
  for (int round = 0; round < 15; ++round) {
    ASSERT_TRUE(m.UnloadModel("toggled").ok());
    ASSERT_TRUE(m.LoadModel("toggled", {}).ok());
    WriteFile(repo() / "reloaded" / "1" / "model.onnx", "pair round " + std::to_string(round));
    ASSERT_TRUE(m.LoadModel("reloaded", {}).ok());
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  observer.join();
  m.Shutdown();
  EXPECT_EQ(answered.load(), sent.load());
  EXPECT_EQ(steady_failures.load(), 0);
  EXPECT_GT(toggled_ok.load(), 0);
}

}  // namespace
}  // namespace kiln
