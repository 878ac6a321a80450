// SPDX-License-Identifier: Apache-2.0
// A ModelRunner over a session placed on a device assembles its batches in the device's host
// buffer type (pinned memory for a GPU; the test device's tracked host memory here) and answers
// with outputs in it, equal to a CPU-only runner's.

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "kernels/testdev/test_device.h"
#include "repo/model_runner.h"

namespace kiln {
namespace {

ValueType FloatType(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

// y = Relu(x + x), x [batch, 4].
std::shared_ptr<Graph> DoubleRelu() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const ValueType t = FloatType({Dim{-1, "batch"}, Dim{4, ""}});
  const int x = g->AddValue({"x", t, -1, nullptr});
  g->inputs.push_back(x);
  const int s = g->AddValue({"s", t, -1, nullptr});
  const int y = g->AddValue({"y", t, -1, nullptr});
  Node add;
  add.name = "add";
  add.op_type = "Add";
  add.inputs = {x, x};
  add.outputs = {s};
  g->AddNode(std::move(add));
  Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {s};
  relu.outputs = {y};
  g->AddNode(std::move(relu));
  g->outputs = {y};
  return g;
}

inference::ModelConfig Config() {
  inference::ModelConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
                                                              name: "double_relu"
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
                                                            )pb",
                                                            &c));
  return c;
}

InferRequest Request(int rows, float base) {
  InferRequest r;
  OwnedTensor x = OwnedTensor::Allocate(DataType::kFloat32, Shape{rows, 4}).value();
  for (int i = 0; i < rows * 4; ++i) x.data<float>()[i] = base + static_cast<float>(i) - 5.0f;
  r.inputs.push_back({"x", std::move(x)});
  return r;
}

TEST(ModelRunnerDeviceTest, StagesBatchesInTheDevicesHostMemory) {
  ASSERT_TRUE(RegisterTestDevice().ok());
  SessionOptions o;
  o.device = Device::Test(0);
  std::unique_ptr<Session> dev_session = Session::Create(DoubleRelu(), o).value();
  ASSERT_EQ(dev_session->placement(0), Device::Test(0));
  std::unique_ptr<ModelRunner> dev = ModelRunner::Create(Config(), std::move(dev_session)).value();
  std::unique_ptr<ModelRunner> cpu =
      ModelRunner::Create(Config(), Session::Create(DoubleRelu()).value()).value();

  const int64_t pinned0 = GetTestDeviceCounters().pinned_bytes_live;
  const InferRequest a = Request(2, 0.5f), b = Request(3, 9.0f);
  const InferRequest* batch[] = {&a, &b};
  BatchShape shape = RequestBatchShape(dev->plan(), a);
  std::vector<RequestOutcome> got = dev->RunBatch(batch, shape, 1);
  std::vector<RequestOutcome> want = cpu->RunBatch(batch, shape, 1);
  ASSERT_EQ(got.size(), 2u);
  int64_t held = 0;
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(got[i].response.ok()) << got[i].response.status().ToString();
    ASSERT_TRUE(want[i].response.ok()) << want[i].response.status().ToString();
    const OwnedTensor& y = got[i].response->outputs[0].tensor;
    const OwnedTensor& w = want[i].response->outputs[0].tensor;
    ASSERT_EQ(y.shape(), w.shape());
    EXPECT_EQ(y.view().device(), Device::Cpu());
    EXPECT_EQ(std::memcmp(y.raw_data(), w.raw_data(), y.size_bytes()), 0) << "request " << i;
    EXPECT_TRUE(BackendRegistry::Find(Device::Test(0))->host_buffer_type().Owns(y.raw_data()))
        << "request " << i << "'s output is not in the device's host buffer type";
    held += static_cast<int64_t>(y.size_bytes());
  }
  // The responses hold their outputs in the device's host memory; the batch tensors are gone.
  EXPECT_GE(GetTestDeviceCounters().pinned_bytes_live - pinned0, held);
  got.clear();
  EXPECT_EQ(GetTestDeviceCounters().pinned_bytes_live, pinned0);
}

}  // namespace
}  // namespace kiln
