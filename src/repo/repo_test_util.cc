// SPDX-License-Identifier: Apache-2.0
#include "repo/repo_test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <random>

#include "repo/model_config.h"

namespace kiln::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  for (;;) {
    path_ = fs::temp_directory_path() /
            ("kiln_repo_test_" + std::to_string(rd()) + "_" + std::to_string(counter++));
    std::error_code ec;
    if (fs::create_directory(path_, ec)) break;
  }
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void MakeDirs(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  ASSERT_FALSE(ec) << path << ": " << ec.message();
}

void WriteFile(const fs::path& path, std::string_view content) {
  MakeDirs(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  ASSERT_TRUE(out.good()) << path;
}

namespace {

Value MakeValue(const IoSpec& spec) {
  Value v;
  v.name = spec.name;
  v.type.dtype = spec.dtype;
  v.type.has_shape = spec.has_shape;
  v.type.dims = spec.dims;
  return v;
}

}  // namespace

std::shared_ptr<Graph> PassthroughGraph(const std::vector<IoSpec>& inputs) {
  auto g = std::make_shared<Graph>();
  g->name = "passthrough";
  g->opset_imports[""] = 13;
  for (const IoSpec& in : inputs) {
    const int id = g->AddValue(MakeValue(in));
    g->inputs.push_back(id);
    g->outputs.push_back(id);
  }
  return g;
}

std::shared_ptr<Graph> SignatureGraph(const std::vector<IoSpec>& inputs,
                                      const std::vector<IoSpec>& outputs, std::string op_type) {
  auto g = std::make_shared<Graph>();
  g->name = "signature";
  g->opset_imports[""] = 13;
  Node node;
  node.name = "n0";
  node.op_type = std::move(op_type);
  for (const IoSpec& in : inputs) {
    const int id = g->AddValue(MakeValue(in));
    g->inputs.push_back(id);
    node.inputs.push_back(id);
  }
  for (const IoSpec& out : outputs) {
    const int id = g->AddValue(MakeValue(out));
    g->outputs.push_back(id);
    node.outputs.push_back(id);
  }
  g->AddNode(std::move(node));
  return g;
}

inference::ModelConfig ParseConfigOrDie(std::string_view text) {
  Result<inference::ModelConfig> c = ParseModelConfigText(text, "test.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : inference::ModelConfig();
}

InferInput FloatInput(std::string name, std::vector<int64_t> dims, std::vector<float> values) {
  Result<Shape> shape = Shape::Create(dims);
  EXPECT_TRUE(shape.ok());
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, *shape);
  EXPECT_TRUE(t.ok());
  EXPECT_EQ(static_cast<size_t>(t->num_elements()), values.size());
  std::copy(values.begin(), values.end(), t->data<float>());
  return InferInput{std::move(name), std::move(t).value()};
}

InferInput ZeroInput(std::string name, DataType dtype, std::vector<int64_t> dims) {
  Result<Shape> shape = Shape::Create(dims);
  EXPECT_TRUE(shape.ok());
  Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, *shape);
  EXPECT_TRUE(t.ok());
  return InferInput{std::move(name), std::move(t).value()};
}

std::vector<float> FloatValues(const OwnedTensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.num_elements());
}

}  // namespace kiln::testing
