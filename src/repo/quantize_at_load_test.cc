// SPDX-License-Identifier: Apache-2.0
// Quantization at load (`optimization { precision: "int8" calibration_dir: ... }`, and "fp16" /
// "bf16" half-precision weights), end to end
// through the ModelManager on the demo digits model (KILN_DEMO_MODELS_DIR): the served model
// holds INT8 weights, classifies the demo sample as the FP32 model does with probabilities
// close to FP32's, and a missing calibration directory or a bad precision fails the load with a
// message that names the problem while the other models keep serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <sstream>

#include "repo/model_config.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"
#include "tensor/npy.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;

const fs::path kDemo = KILN_DEMO_MODELS_DIR;

std::unique_ptr<ModelManager> Load(const fs::path& repo) {
  ModelManagerOptions options;
  options.repository_path = repo.string();
  Result<std::unique_ptr<ModelManager>> m = ModelManager::Create(options);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

Result<InferResponse> InferSync(LoadedModel& model, std::unique_ptr<InferRequest> request) {
  std::promise<Result<InferResponse>> p;
  auto f = p.get_future();
  model.Infer(std::move(request), [&p](Result<InferResponse> r) { p.set_value(std::move(r)); });
  return f.get();
}

// Real 8x8 digits, pixels / 16 as the demo model takes them: tests/data/digits/<split>/inputs.npy
// ([N, 1, 8, 8], calib from the training split, val held out) as [N, 64].
OwnedTensor Pixels(const std::string& split) {
  std::ifstream in(fs::path(KILN_DIGITS_DATA_DIR) / split / "inputs.npy", std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  OwnedTensor t = ReadNpy(bytes.str()).value();
  EXPECT_TRUE(t.Reshape(Shape{t.shape().dim(0), 64}).ok());
  return t;
}

// A repository with the demo digits model under `name`, configured by `config` (name added).
void AddDigits(const fs::path& repo, const std::string& name, const std::string& config) {
  fs::create_directories(repo / name / "1");
  fs::copy_file(kDemo / "digits" / "1" / "model.onnx", repo / name / "1" / "model.onnx");
  WriteFile(repo / name / "config.pbtxt", "name: \"" + name + "\"\n" + config);
}

std::vector<float> Probabilities(LoadedModel& m, const OwnedTensor& pixels, int64_t row) {
  auto request = std::make_unique<InferRequest>();
  std::vector<float> v(pixels.data<float>() + row * 64, pixels.data<float>() + (row + 1) * 64);
  request->inputs.push_back(FloatInput("pixels", {1, 64}, v));
  Result<InferResponse> r = InferSync(m, std::move(request));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? FloatValues(r->outputs[0].tensor) : std::vector<float>();
}

// How `other` classifies the first `rows` samples against `fp32`.
struct Comparison {
  int agree = 0;         // same top-1 class
  double max_diff = 0;   // largest probability difference
  bool differs = false;  // some output not bit-identical
};
Comparison CompareModels(LoadedModel& fp32, LoadedModel& other, const OwnedTensor& pixels,
                         int64_t rows) {
  Comparison c;
  for (int64_t i = 0; i < rows; ++i) {
    const std::vector<float> a = Probabilities(fp32, pixels, i);
    const std::vector<float> b = Probabilities(other, pixels, i);
    EXPECT_EQ(a.size(), 10u);
    EXPECT_EQ(b.size(), 10u);
    if (a.size() != 10 || b.size() != 10) return c;
    for (size_t k = 0; k < 10; ++k) {
      c.max_diff = std::max(c.max_diff, static_cast<double>(std::fabs(a[k] - b[k])));
      c.differs = c.differs || a[k] != b[k];
    }
    c.agree += (std::max_element(a.begin(), a.end()) - a.begin()) ==
                       (std::max_element(b.begin(), b.end()) - b.begin())
                   ? 1
                   : 0;
  }
  return c;
}

TEST(QuantizeAtLoadTest, ServesTheInt8ModelCloseToFp32) {
  TempDir repo;
  AddDigits(repo.path(), "fp32", "max_batch_size: 8\n");
  AddDigits(repo.path(), "int8",
            "max_batch_size: 8\noptimization { precision: \"int8\" calibration_dir: \"calib\" }\n");
  WriteFile(repo.path() / "int8" / "calib" / "inputs.npy",
            WriteNpy(Pixels("calib").view()).value());
  auto manager = Load(repo.path());
  Status s = manager->LoadInitialModels();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::shared_ptr<LoadedModel> fp32 = manager->GetModel("fp32", -1).value();
  std::shared_ptr<LoadedModel> int8 = manager->GetModel("int8", -1).value();
  // INT8 weights: about a quarter of the FP32 bytes.
  EXPECT_LT(int8->WeightBytes() * 10, fp32->WeightBytes() * 3)
      << int8->WeightBytes() << " vs " << fp32->WeightBytes();
  const Comparison c = CompareModels(*fp32, *int8, Pixels("val"), 40);
  EXPECT_TRUE(c.differs);  // it is not the FP32 model
  EXPECT_LT(c.max_diff, 0.05);
  EXPECT_GE(c.agree, 39);
}

// optimization { precision: "fp16" / "bf16" }: the large weights are held in half precision
// (no calibration), and the model classifies as the FP32 model does, within the half rounding.
TEST(QuantizeAtLoadTest, ServesHalfPrecisionWeights) {
  TempDir repo;
  AddDigits(repo.path(), "fp32", "max_batch_size: 8\n");
  AddDigits(repo.path(), "fp16", "max_batch_size: 8\noptimization { precision: \"fp16\" }\n");
  AddDigits(repo.path(), "bf16", "max_batch_size: 8\noptimization { precision: \"bf16\" }\n");
  auto manager = Load(repo.path());
  Status s = manager->LoadInitialModels();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::shared_ptr<LoadedModel> fp32 = manager->GetModel("fp32", -1).value();
  const OwnedTensor test = Pixels("val");
  for (const std::string name : {"fp16", "bf16"}) {
    std::shared_ptr<LoadedModel> half = manager->GetModel(name, -1).value();
    const Comparison c = CompareModels(*fp32, *half, test, 40);
    EXPECT_TRUE(c.differs) << name;  // the weights were rounded
    EXPECT_LT(c.max_diff, name == "fp16" ? 0.002 : 0.02) << name;
    EXPECT_GE(c.agree, 39) << name;
  }
}

TEST(QuantizeAtLoadTest, BadSettingsFailTheLoadOnly) {
  TempDir repo;
  AddDigits(repo.path(), "good", "max_batch_size: 8\n");
  AddDigits(repo.path(), "nocalib",
            "max_batch_size: 8\noptimization { precision: \"int8\" calibration_dir: \"calib\" }\n");
  AddDigits(repo.path(), "badprecision",
            "max_batch_size: 8\noptimization { precision: \"int4\" }\n");
  auto manager = Load(repo.path());
  EXPECT_FALSE(manager->LoadInitialModels().ok());
  for (const ModelIndexEntry& e : manager->Index()) {
    if (e.name == "nocalib") {
      EXPECT_EQ(e.state, ModelState::kUnavailable);
      EXPECT_THAT(e.reason, HasSubstr("INT8 quantization at load"));
      EXPECT_THAT(e.reason, HasSubstr("does not exist"));
    } else if (e.name == "badprecision") {
      EXPECT_EQ(e.state, ModelState::kUnavailable);
      EXPECT_THAT(e.reason, HasSubstr("'int4'"));
    } else {
      EXPECT_EQ(e.state, ModelState::kReady) << e.name;
    }
  }
  EXPECT_TRUE(manager->GetModel("good", -1).ok());
}

TEST(QuantizeAtLoadTest, QuantizationFieldsAreNotReportedAsIgnored) {
  inference::ModelConfig c = testing::ParseConfigOrDie(
      "name: \"m\"\noptimization { precision: \"int8\" calibration_dir: \"c\" "
      "calibration_method: \"entropy\" per_channel: true }\n");
  EXPECT_TRUE(UnimplementedConfigFields(c).empty());
  c = testing::ParseConfigOrDie("name: \"m\"\noptimization { eager_batching: true }\n");
  EXPECT_EQ(UnimplementedConfigFields(c),
            (std::vector<std::string>{"optimization.eager_batching"}));
}

}  // namespace
}  // namespace kiln
