// SPDX-License-Identifier: Apache-2.0
// KIND_GPU instance groups: how many instances start on which GPU, the load errors when a GPU is
// missing, serving through them, and the GPUs' cached memory given back when the model goes.
// Stand-in GPUs (backends registered as cuda:0 and cuda:1 over host memory, with no kernels of
// their own, so every node runs on the CPU) make this testable without a GPU; the CUDA kernels and
// placement on a real GPU are tested by cuda_kernels_test and the device tests.

#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "repo/loaded_model.h"
#include "repo/model_config.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::atomic<int> g_trims{0};

class StandInGpu final : public Backend {
 public:
  explicit StandInGpu(int index) : index_(index) {}
  Device device() const override { return Device::Cuda(index_); }
  std::string name() const override { return "cuda:" + std::to_string(index_) + " (stand-in)"; }
  BufferType& buffer_type() override { return CpuBackend().buffer_type(); }
  BufferType& host_buffer_type() override { return CpuBackend().host_buffer_type(); }
  bool async() const override { return false; }
  Result<std::unique_ptr<Stream>> CreateStream() override { return CpuBackend().CreateStream(); }
  void TrimCachedMemory() override { g_trims.fetch_add(1); }

 private:
  const int index_;
};

void RegisterStandIns() {
  static const bool once = [] {
    EXPECT_TRUE(BackendRegistry::Register(std::make_unique<StandInGpu>(0)).ok());
    EXPECT_TRUE(BackendRegistry::Register(std::make_unique<StandInGpu>(1)).ok());
    return true;
  }();
  (void)once;
}

// y = Relu(x), x [batch, 4].
std::shared_ptr<Graph> ReluGraph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = {Dim{-1, "batch"}, Dim{4, ""}};
  const int x = g->AddValue({"x", t, -1, nullptr});
  const int y = g->AddValue({"y", t, -1, nullptr});
  g->inputs.push_back(x);
  Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {x};
  relu.outputs = {y};
  g->AddNode(std::move(relu));
  g->outputs = {y};
  return g;
}

Result<std::shared_ptr<LoadedModelImpl>> Load(const std::string& groups) {
  inference::ModelConfig c;
  const std::string text = R"pb(
                             name: "relu"
                             max_batch_size: 8
                             input {
                               name: "x"
                               data_type: TYPE_FP32
                               dims: [ 4 ]
                             }
                             output {
                               name: "y"
                               data_type: TYPE_FP32
                               dims: [ 4 ]
                             }
                           )pb" +
                           groups;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  EXPECT_TRUE(NormalizeModelConfig(&c).ok());
  InstanceOptions options;
  options.oversubscribe = true;  // the CPU groups' counts as configured
  return LoadedModelImpl::Create(1, c, ReluGraph(), options);
}

TEST(GpuInstances, CountPerListedGpuPlusCpuGroups) {
  RegisterStandIns();
  Result<std::shared_ptr<LoadedModelImpl>> m =
      Load(R"pb(instance_group {
                  name: "g"
                  kind: KIND_GPU
                  count: 2
                  gpus: [ 0, 1 ]
                }
                instance_group { name: "c" kind: KIND_CPU count: 1 })pb");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->instance_count(), 5);
  // Every GPU when the group lists none.
  Result<std::shared_ptr<LoadedModelImpl>> all =
      Load(R"pb(instance_group { name: "g" kind: KIND_GPU count: 1 })pb");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)->instance_count(), 2);
}

TEST(GpuInstances, MissingGpuFailsTheLoadNamingWhatThereIs) {
  RegisterStandIns();
  Result<std::shared_ptr<LoadedModelImpl>> m = Load(R"pb(instance_group {
                                                           name: "g"
                                                           kind: KIND_GPU
                                                           gpus: [ 0, 3 ]
                                                         })pb");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              HasSubstr("instance_group 'g' asks for KIND_GPU on GPU 3, but this kiln has 2 GPUs: "
                        "cuda:0 (stand-in), cuda:1 (stand-in)"));
}

TEST(GpuInstances, StreamsPerInstanceParameter) {
  RegisterStandIns();
  Result<std::shared_ptr<LoadedModelImpl>> three = Load(
      R"pb(instance_group {
             name: "g"
             kind: KIND_GPU
             gpus: [ 0 ]
           }
           parameters {
             key: "kiln.gpu_streams"
             value: { string_value: "3" }
           })pb");
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ((*three)->instance_count(), 1);
  for (const char* bad : {"0", "9", "two", ""}) {
    Result<std::shared_ptr<LoadedModelImpl>> m =
        Load(std::string(R"pb(instance_group {
                                name: "g"
                                kind: KIND_GPU
                                gpus: [ 0 ]
                              }
                              parameters { key: "kiln.gpu_streams"
                                           value: { string_value: ")pb") +
             bad + "\" } }");
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_THAT(m.status().message(),
                HasSubstr("parameter 'kiln.gpu_streams' must be a number of streams from 1 to 8"))
        << bad;
  }
}

TEST(GpuInstances, ServesAndTrimsEachGpuOnUnload) {
  RegisterStandIns();
  Result<std::shared_ptr<LoadedModelImpl>> m = Load(R"pb(instance_group {
                                                           name: "g"
                                                           kind: KIND_GPU
                                                           count: 1
                                                           gpus: [ 1 ]
                                                         })pb");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto request = std::make_unique<InferRequest>();
  OwnedTensor x = OwnedTensor::Allocate(DataType::kFloat32, Shape{1, 4}).value();
  const float in[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = in[i];
  request->inputs.push_back({"x", std::move(x)});
  std::promise<Result<InferResponse>> done;
  (*m)->Infer(std::move(request), [&](Result<InferResponse> r) { done.set_value(std::move(r)); });
  Result<InferResponse> r = done.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const float* y = r->outputs[0].tensor.data<const float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 4.0f);
  const int before = g_trims.load();
  m->reset();
  EXPECT_EQ(g_trims.load() - before, 1);  // cuda:1 only
}

}  // namespace
}  // namespace kiln
