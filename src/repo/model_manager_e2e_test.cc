// SPDX-License-Identifier: Apache-2.0
// ModelManager end to end on the demo repository generated at build time
// (tools/demo/make_demo_models.py -> KILN_DEMO_MODELS_DIR): the real ONNX importer, the
// reference kernels, auto-completed and file configs, every request check, a broken model next
// to good ones, and shutdown with requests in flight.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <future>
#include <random>
#include <sstream>

#include "kernels/registry.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::kiln::testing::ZeroInput;
using ::testing::HasSubstr;

const fs::path kDemo = KILN_DEMO_MODELS_DIR;

bool HaveKernels() {
  for (std::string_view op : {"Add", "Sub", "Gemm", "Relu", "Softmax"}) {
    const auto defs = KernelRegistry::Global().defs();
    if (std::none_of(defs.begin(), defs.end(),
                     [&](const KernelDef& d) { return d.op_type == op; })) {
      return false;
    }
  }
  return true;
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The numbers of the JSON array that follows `"key": [` in `text` (the demo files' layout).
std::vector<float> JsonFloats(const std::string& text, std::string_view key) {
  std::vector<float> out;
  size_t pos = text.find("\"" + std::string(key) + "\"");
  if (pos == std::string::npos) return out;
  pos = text.find('[', pos);
  const size_t end = text.find(']', pos);
  std::string body = text.substr(pos + 1, end - pos - 1);
  for (char& c : body) {
    if (c == ',') c = ' ';
  }
  std::istringstream in(body);
  float v;
  while (in >> v) out.push_back(v);
  return out;
}

class DemoRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveKernels()) GTEST_SKIP() << "reference kernels Add/Sub/Gemm/Relu/Softmax missing";
    ASSERT_TRUE(fs::exists(kDemo / "add_sub" / "1" / "model.onnx"))
        << "build the demo_models target first";
  }

  static std::unique_ptr<ModelManager> Load(const fs::path& repo, int workers = 1) {
    ModelManagerOptions options;
    options.repository_path = repo.string();
    options.workers_per_model = workers;
    Result<std::unique_ptr<ModelManager>> m = ModelManager::Create(options);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }

  static Result<InferResponse> InferSync(LoadedModel& model,
                                         std::unique_ptr<InferRequest> request) {
    std::promise<Result<InferResponse>> p;
    auto f = p.get_future();
    model.Infer(std::move(request), [&p](Result<InferResponse> r) { p.set_value(std::move(r)); });
    return f.get();
  }
};

TEST_F(DemoRepoTest, LoadsEveryDemoModel) {
  auto manager = Load(kDemo);
  Status s = manager->LoadInitialModels();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(manager->AllModelsReady());
  const std::vector<ModelIndexEntry> index = manager->Index();
  ASSERT_EQ(index.size(), 6u);
  EXPECT_EQ(index[0].name, "add_sub");
  EXPECT_EQ(index[1].name, "digits");
  EXPECT_EQ(index[2].name, "digits_image");
  EXPECT_EQ(index[3].name, "digits_pipeline");
  EXPECT_EQ(index[4].name, "digits_top3");
  EXPECT_EQ(index[5].name, "tiny_lm");
  // tiny_lm has no config: its model.gguf makes it a generative model.
  Result<std::shared_ptr<LoadedModel>> lm = manager->GetModel("tiny_lm", -1);
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  EXPECT_TRUE((*lm)->generative());
  EXPECT_EQ((*lm)->signature().platform, "kiln_llm");
  ASSERT_FALSE((*lm)->signature().inputs.empty());
  EXPECT_EQ((*lm)->signature().inputs[0].name, "text_input");
  for (const ModelIndexEntry& e : index) {
    EXPECT_EQ(e.version, 1);
    EXPECT_EQ(e.state, ModelState::kReady);
  }

  Result<std::shared_ptr<LoadedModel>> add_sub = manager->GetModel("add_sub", -1);
  ASSERT_TRUE(add_sub.ok());
  const ModelSignature& a = (*add_sub)->signature();
  EXPECT_EQ(a.max_batch_size, 8);
  EXPECT_EQ(a.platform, "onnxruntime_onnx");
  ASSERT_EQ(a.inputs.size(), 2u);
  EXPECT_EQ(a.inputs[0].name, "INPUT0");
  EXPECT_EQ(a.inputs[0].dims, std::vector<int64_t>{16});

  // digits has no config.pbtxt: derived from the graph.
  Result<std::shared_ptr<LoadedModel>> digits = manager->GetModel("digits", 1);
  ASSERT_TRUE(digits.ok());
  const ModelSignature& d = (*digits)->signature();
  EXPECT_EQ(d.max_batch_size, 4);
  EXPECT_EQ(d.platform, "onnxruntime_onnx");
  EXPECT_EQ(d.backend, "onnxruntime");
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_EQ(d.inputs[0].name, "pixels");
  EXPECT_EQ(d.inputs[0].dtype, DataType::kFloat32);
  EXPECT_EQ(d.inputs[0].dims, std::vector<int64_t>{64});
  ASSERT_EQ(d.outputs.size(), 1u);
  EXPECT_EQ(d.outputs[0].name, "probabilities");
  EXPECT_EQ(d.outputs[0].dims, std::vector<int64_t>{10});
}

TEST_F(DemoRepoTest, AddSubNumbers) {
  auto manager = Load(kDemo, 2);
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("add_sub", 1);
  ASSERT_TRUE(m.ok());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  for (int64_t batch : {1, 3, 8}) {
    std::vector<float> a(static_cast<size_t>(batch * 16)), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
    }
    auto request = std::make_unique<InferRequest>();
    request->id = "r" + std::to_string(batch);
    request->inputs.push_back(FloatInput("INPUT1", {batch, 16}, b));
    request->inputs.push_back(FloatInput("INPUT0", {batch, 16}, a));
    if (batch == 3) request->outputs = {{"OUTPUT1"}, {"OUTPUT0"}};
    Result<InferResponse> r = InferSync(**m, std::move(request));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->id, "r" + std::to_string(batch));
    EXPECT_EQ(r->model_name, "add_sub");
    EXPECT_EQ(r->model_version, 1);
    ASSERT_EQ(r->outputs.size(), 2u);
    const size_t sum = batch == 3 ? 1 : 0;
    EXPECT_EQ(r->outputs[sum].name, "OUTPUT0");
    EXPECT_EQ(r->outputs[1 - sum].name, "OUTPUT1");
    EXPECT_EQ(r->outputs[sum].tensor.shape(), (Shape{batch, 16}));
    const std::vector<float> s = FloatValues(r->outputs[sum].tensor);
    const std::vector<float> diff = FloatValues(r->outputs[1 - sum].tensor);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(s[i], a[i] + b[i]) << i;
      EXPECT_EQ(diff[i], a[i] - b[i]) << i;
    }
  }
}

TEST_F(DemoRepoTest, DigitsSampleMatchesNumpy) {
  auto manager = Load(kDemo);
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("digits", -1);
  ASSERT_TRUE(m.ok());
  const std::string request_json = ReadText(kDemo / "digits" / "sample_request.json");
  const std::string expected_json = ReadText(kDemo / "digits" / "sample_expected.json");
  const std::vector<float> pixels = JsonFloats(request_json, "data");
  const std::vector<float> expected = JsonFloats(expected_json, "probabilities");
  ASSERT_EQ(pixels.size(), 64u);
  ASSERT_EQ(expected.size(), 10u);
  const size_t label_pos = expected_json.find("\"label\":");
  ASSERT_NE(label_pos, std::string::npos);
  const int label = std::atoi(expected_json.c_str() + label_pos + 8);

  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("pixels", {1, 64}, pixels));
  Result<InferResponse> r = InferSync(**m, std::move(request));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "probabilities");
  EXPECT_EQ(r->outputs[0].tensor.shape(), (Shape{1, 10}));
  const std::vector<float> probs = FloatValues(r->outputs[0].tensor);
  float total = 0;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(probs[i], expected[i], 1e-5) << i;
    total += probs[i];
  }
  EXPECT_NEAR(total, 1.f, 1e-5);
  EXPECT_EQ(std::max_element(probs.begin(), probs.end()) - probs.begin(), label);
}

// The image pipeline on the committed digit PNGs (tools/demo/digit_images): the ensemble
// digits_pipeline (PNG -> digits_image -> digits) answers as the digits model fed the exact
// pixels does, within the 8-bit rounding of the images, with the same top label.
TEST_F(DemoRepoTest, DigitImagesThroughTheEnsemble) {
  auto manager = Load(kDemo);
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> pipeline = manager->GetModel("digits_pipeline", -1);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().ToString();
  Result<std::shared_ptr<LoadedModel>> digits = manager->GetModel("digits", -1);
  ASSERT_TRUE(digits.ok());
  const fs::path images = fs::path(KILN_DEMO_IMAGES_DIR);
  const std::string index = ReadText(images / "images.json");
  int checked = 0, correct = 0;
  for (int k = 0; k < 10; ++k) {
    const std::string file = "digit_" + std::to_string(k) + ".png";
    const size_t at = index.find("\"" + file + "\"");
    ASSERT_NE(at, std::string::npos) << file;
    const size_t label_at = index.find("\"label\":", at);
    const int label = std::atoi(index.c_str() + label_at + 8);
    const size_t open = index.find('[', label_at), close = index.find(']', open);
    const std::vector<float> pixels =
        JsonFloats("{\"data\": " + index.substr(open, close - open + 1) + "}", "data");
    ASSERT_EQ(pixels.size(), 64u) << file;

    auto image_request = std::make_unique<InferRequest>();
    OwnedTensor bytes = OwnedTensor::Allocate(DataType::kBytes, Shape{1, 1}).value();
    bytes.data<std::string>()[0] = ReadText(images / file);
    image_request->inputs.push_back({"IMAGE", std::move(bytes)});
    Result<InferResponse> got = InferSync(**pipeline, std::move(image_request));
    ASSERT_TRUE(got.ok()) << file << ": " << got.status().ToString();

    auto pixel_request = std::make_unique<InferRequest>();
    pixel_request->inputs.push_back(FloatInput("pixels", {1, 64}, pixels));
    Result<InferResponse> want = InferSync(**digits, std::move(pixel_request));
    ASSERT_TRUE(want.ok());
    // The ensemble's outputs, in config order: top3 (the kiln_classify step), probabilities.
    ASSERT_EQ(got->outputs.size(), 2u);
    ASSERT_EQ(got->outputs[1].name, "probabilities");
    const std::vector<float> p = FloatValues(got->outputs[1].tensor);
    const std::vector<float> q = FloatValues(want->outputs[0].tensor);
    ASSERT_EQ(got->outputs[0].name, "top3");
    const std::string& best = got->outputs[0].tensor.data<const std::string>()[0];
    const auto top_index = std::max_element(p.begin(), p.end()) - p.begin();
    static const char* const kNames[] = {"zero", "one", "two",   "three", "four",
                                         "five", "six", "seven", "eight", "nine"};
    EXPECT_TRUE(best.ends_with(":" + std::to_string(top_index) + ":" + kNames[top_index]))
        << file << ": " << best;
    ASSERT_EQ(p.size(), 10u);
    for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(p[i], q[i], 2e-2) << file << " class " << i;
    const auto top = std::max_element(p.begin(), p.end()) - p.begin();
    EXPECT_EQ(top, std::max_element(q.begin(), q.end()) - q.begin()) << file;
    correct += top == label;
    ++checked;
  }
  EXPECT_EQ(checked, 10);
  EXPECT_GE(correct, 9) << "the digits model is right on at least 9 of these 10 held-out images";
}

TEST_F(DemoRepoTest, RequestValidationErrors) {
  auto manager = Load(kDemo);
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("add_sub", -1);
  ASSERT_TRUE(m.ok());
  const auto in = [](std::string name, std::vector<int64_t> dims, DataType t = DataType::kFloat32) {
    return ZeroInput(std::move(name), t, std::move(dims));
  };
  struct Case {
    std::vector<InferInput> inputs;
    std::vector<std::string> outputs;
    std::string message;
  };
  std::vector<Case> cases;
  const auto add = [&](std::vector<InferInput> inputs, std::vector<std::string> outputs,
                       std::string message) {
    cases.push_back({std::move(inputs), std::move(outputs), std::move(message)});
  };
  {
    std::vector<InferInput> v;
    v.push_back(in("INPUT0", {1, 16}));
    add(std::move(v), {}, "input 'INPUT1' is missing");
  }
  {
    std::vector<InferInput> v;
    v.push_back(in("INPUT0", {2, 15}));
    v.push_back(in("INPUT1", {2, 16}));
    add(std::move(v), {}, "input 'INPUT0': expected shape [-1,16], got [2,15]");
  }
  {
    std::vector<InferInput> v;
    v.push_back(in("INPUT0", {2, 16}, DataType::kFloat64));
    v.push_back(in("INPUT1", {2, 16}));
    add(std::move(v), {}, "input 'INPUT0': expected datatype FP32, got FP64");
  }
  {
    std::vector<InferInput> v;
    v.push_back(in("INPUT0", {9, 16}));
    v.push_back(in("INPUT1", {9, 16}));
    add(std::move(v), {}, "batch size 9 is out of range 1..8");
  }
  {
    std::vector<InferInput> v;
    v.push_back(in("INPUT0", {1, 16}));
    v.push_back(in("INPUT1", {1, 16}));
    v.push_back(in("INPUT2", {1, 16}));
    add(std::move(v), {}, "unexpected inference input 'INPUT2' for model 'add_sub'");
  }
  {
    std::vector<InferInput> v;
    v.push_back(in("INPUT0", {1, 16}));
    v.push_back(in("INPUT1", {1, 16}));
    add(std::move(v), {"OUTPUT2"}, "unexpected inference output 'OUTPUT2' for model 'add_sub'");
  }
  for (Case& c : cases) {
    auto request = std::make_unique<InferRequest>();
    request->inputs = std::move(c.inputs);
    for (std::string& o : c.outputs) request->outputs.push_back({o});
    Result<InferResponse> r = InferSync(**m, std::move(request));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST_F(DemoRepoTest, BrokenModelNextToGoodOnes) {
  TempDir repo;
  fs::copy(kDemo, repo.path(), fs::copy_options::recursive);
  WriteFile(repo.path() / "broken" / "1" / "model.onnx", "this is not protobuf");
  auto manager = Load(repo.path());
  Status s = manager->LoadInitialModels();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("'broken'"));
  EXPECT_FALSE(manager->AllModelsReady());
  for (const ModelIndexEntry& e : manager->Index()) {
    if (e.name == "broken") {
      EXPECT_EQ(e.state, ModelState::kUnavailable);
      EXPECT_THAT(e.reason, HasSubstr("model.onnx"));
    } else {
      EXPECT_EQ(e.state, ModelState::kReady) << e.name;
    }
  }
  EXPECT_TRUE(manager->GetModel("add_sub", -1).ok());
  EXPECT_EQ(manager->GetModel("broken", -1).status().code(), StatusCode::kUnavailable);
}

TEST_F(DemoRepoTest, ShutdownWithRequestsInFlight) {
  auto manager = Load(kDemo, 2);
  ASSERT_TRUE(manager->LoadInitialModels().ok());
  Result<std::shared_ptr<LoadedModel>> m = manager->GetModel("digits", -1);
  ASSERT_TRUE(m.ok());
  constexpr int kRequests = 300;
  std::atomic<int> ok{0};
  std::atomic<int> calls{0};
  for (int i = 0; i < kRequests; ++i) {
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back(FloatInput("pixels", {4, 64}, std::vector<float>(256, 0.25f)));
    (*m)->Infer(std::move(request), [&](const Result<InferResponse>& r) {
      calls++;
      if (r.ok()) ok++;
    });
  }
  manager->Shutdown();
  EXPECT_EQ(calls.load(), kRequests);
  EXPECT_EQ(ok.load(), kRequests);
  bool refused = false;
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("pixels", {1, 64}, std::vector<float>(64, 0.f)));
  (*m)->Infer(std::move(request), [&](const Result<InferResponse>& r) {
    refused = r.status().code() == StatusCode::kUnavailable;
  });
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace kiln
