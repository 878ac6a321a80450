// SPDX-License-Identifier: Apache-2.0
// Serving on a GPU end to end: a model loaded with a KIND_GPU instance group (its nodes on cuda:0,
// batches staged in pinned memory, two streams in flight) answers concurrent requests as a CPU
// instance does, within 1e-3 (TF32 off); and unloading it gives its device memory back
// (cudaMemGetInfo). Without a GPU the tests skip, saying so.

#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "base/settings.h"
#include "kernels/cuda/cuda_kernels.h"
#include "repo/loaded_model.h"
#include "repo/model_config.h"

namespace kiln {
namespace {

constexpr int64_t kIn = 4096, kOut = 8192;  // a 128 MiB FP32 weight

// y = Relu(x W + b), x [batch, kIn], W [kIn, kOut] (seeded), b [kOut].
std::shared_ptr<Graph> DenseGraph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  auto type = [](std::vector<Dim> dims) {
    ValueType t;
    t.dtype = DataType::kFloat32;
    t.has_shape = true;
    t.dims = std::move(dims);
    return t;
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.02f, 0.02f);
  auto w = std::make_shared<OwnedTensor>(
      OwnedTensor::Allocate(DataType::kFloat32, Shape{kIn, kOut}).value());
  for (int64_t i = 0; i < w->num_elements(); ++i) w->data<float>()[i] = u(rng);
  auto b =
      std::make_shared<OwnedTensor>(OwnedTensor::Allocate(DataType::kFloat32, Shape{kOut}).value());
  for (int64_t i = 0; i < kOut; ++i) b->data<float>()[i] = u(rng);
  const int x = g->AddValue({"x", type({Dim{-1, "batch"}, Dim{kIn, ""}}), -1, nullptr});
  const int wv = g->AddValue({"w", type({Dim{kIn, ""}, Dim{kOut, ""}}), -1, w});
  const int bv = g->AddValue({"b", type({Dim{kOut, ""}}), -1, b});
  const int m = g->AddValue({"m", type({Dim{-1, "batch"}, Dim{kOut, ""}}), -1, nullptr});
  const int s = g->AddValue({"s", type({Dim{-1, "batch"}, Dim{kOut, ""}}), -1, nullptr});
  const int y = g->AddValue({"y", type({Dim{-1, "batch"}, Dim{kOut, ""}}), -1, nullptr});
  g->inputs = {x};
  auto node = [&](std::string op, std::vector<int> in, int out) {
    Node n;
    n.name = op;
    n.op_type = std::move(op);
    n.inputs = std::move(in);
    n.outputs = {out};
    g->AddNode(std::move(n));
  };
  node("MatMul", {x, wv}, m);
  node("Add", {m, bv}, s);
  node("Relu", {s}, y);
  g->outputs = {y};
  return g;
}

inference::ModelConfig Config(const std::string& group) {
  inference::ModelConfig c;
  c.set_name("dense");
  c.set_max_batch_size(8);
  auto* in = c.add_input();
  in->set_name("x");
  in->set_data_type(inference::TYPE_FP32);
  in->add_dims(kIn);
  auto* out = c.add_output();
  out->set_name("y");
  out->set_data_type(inference::TYPE_FP32);
  out->add_dims(kOut);
  c.mutable_dynamic_batching()->set_max_queue_delay_microseconds(2000);
  auto* g = c.add_instance_group();
  g->set_kind(group == "gpu" ? inference::ModelInstanceGroup::KIND_GPU
                             : inference::ModelInstanceGroup::KIND_CPU);
  if (group == "gpu") g->add_gpus(0);
  EXPECT_TRUE(NormalizeModelConfig(&c).ok());
  return c;
}

std::vector<Result<InferResponse>> InferMany(LoadedModelImpl& model, int requests) {
  std::vector<std::promise<Result<InferResponse>>> done(static_cast<size_t>(requests));
  for (int r = 0; r < requests; ++r) {
    auto request = std::make_unique<InferRequest>();
    OwnedTensor x = OwnedTensor::Allocate(DataType::kFloat32, Shape{1, kIn}).value();
    std::mt19937 rng(static_cast<uint32_t>(r));
    std::normal_distribution<float> n;
    for (int64_t i = 0; i < kIn; ++i) x.data<float>()[i] = n(rng);
    request->inputs.push_back({"x", std::move(x)});
    model.Infer(std::move(request),
                [&done, r](Result<InferResponse> res) { done[r].set_value(std::move(res)); });
  }
  std::vector<Result<InferResponse>> out;
  for (auto& d : done) out.push_back(d.get_future().get());
  return out;
}

class CudaServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "needs a GPU: " << why;
    ASSERT_TRUE(RegisterCudaKernels().ok());
    ASSERT_TRUE(RegisterCudaBackends().ok());
  }
  ScopedSetting tf32_{Setting::kCudaTf32, "0"};
};

TEST_F(CudaServingTest, GpuInstanceAnswersAsTheCpuDoes) {
  std::shared_ptr<Graph> graph = DenseGraph();
  auto gpu = LoadedModelImpl::Create(1, Config("gpu"), graph);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto cpu = LoadedModelImpl::Create(1, Config("cpu"), graph);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  const std::vector<Result<InferResponse>> got = InferMany(**gpu, 40);
  const std::vector<Result<InferResponse>> want = InferMany(**cpu, 40);
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_TRUE(got[r].ok()) << r << ": " << got[r].status().ToString();
    ASSERT_TRUE(want[r].ok()) << r << ": " << want[r].status().ToString();
    const OwnedTensor& a = got[r]->outputs[0].tensor;
    const OwnedTensor& e = want[r]->outputs[0].tensor;
    ASSERT_EQ(a.shape(), e.shape());
    for (int64_t i = 0; i < e.num_elements(); ++i) {
      const float x = a.data<const float>()[i], y = e.data<const float>()[i];
      ASSERT_LE(std::fabs(x - y), 1e-3 * (1 + std::fabs(y))) << "request " << r << " element " << i;
    }
  }
  const ModelStatistics stats = (*gpu)->Statistics();
  std::printf("GPU instance: %lld executions for 40 requests\n",
              static_cast<long long>(stats.execution_count));
}

TEST_F(CudaServingTest, UnloadGivesTheDeviceMemoryBack) {
  std::shared_ptr<Graph> graph = DenseGraph();
  const int64_t weight_bytes = kIn * kOut * 4;
  // A first load and unload settles what stays for the process (handles, module code).
  {
    auto warm = LoadedModelImpl::Create(1, Config("gpu"), graph);
    ASSERT_TRUE(warm.ok()) << warm.status().ToString();
    ASSERT_TRUE(InferMany(**warm, 4)[0].ok());
  }
  const CudaMemoryInfo before = GetCudaMemoryInfo(0).value();
  auto model = LoadedModelImpl::Create(1, Config("gpu"), graph);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(InferMany(**model, 4)[0].ok());
  const CudaMemoryInfo loaded = GetCudaMemoryInfo(0).value();
  EXPECT_GE(static_cast<int64_t>(before.free_bytes) - static_cast<int64_t>(loaded.free_bytes),
            weight_bytes)
      << "the weights are on the device while the model is loaded";
  model->reset();
  const CudaMemoryInfo after = GetCudaMemoryInfo(0).value();
  EXPECT_GE(static_cast<int64_t>(after.free_bytes),
            static_cast<int64_t>(before.free_bytes) - (int64_t{16} << 20))
      << "free before " << before.free_bytes << ", loaded " << loaded.free_bytes << ", after "
      << after.free_bytes;
}

}  // namespace
}  // namespace kiln
