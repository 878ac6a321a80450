// SPDX-License-Identifier: Apache-2.0
// Sessions placed on a second device (the test device, kernels/testdev/test_device.h): placement
// with CPU fallback, copies at device edges, constants uploaded once, stream ordering (the test
// device runs its work on its own thread, late, and poisons what it has not written yet),
// errors, concurrent runs, and device memory given back.

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "kernels/testdev/test_device.h"
#include "runtime/session.h"

namespace kiln {
namespace {

class SessionDeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(RegisterTestDevice().ok()); }
};

ValueType FloatType(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

int AddInput(Graph& g, const std::string& name, ValueType type) {
  const int id = g.AddValue({name, std::move(type), -1, nullptr});
  g.inputs.push_back(id);
  return id;
}

int AddNode(Graph& g, const std::string& op, std::vector<int> inputs, const std::string& out,
            ValueType type) {
  const int y = g.AddValue({out, std::move(type), -1, nullptr});
  Node n;
  n.name = op + "_" + out;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {y};
  g.AddNode(std::move(n));
  return y;
}

int AddConstant(Graph& g, const std::string& name, OwnedTensor value) {
  ValueType t;
  t.dtype = value.dtype();
  t.has_shape = true;
  for (int i = 0; i < value.view().rank(); ++i) t.dims.push_back(Dim{value.view().dim(i), ""});
  return g.AddValue({name, t, -1, std::make_shared<OwnedTensor>(std::move(value))});
}

OwnedTensor Int64s(std::vector<int64_t> v) {
  OwnedTensor t =
      OwnedTensor::Allocate(DataType::kInt64, Shape{static_cast<int64_t>(v.size())}).value();
  std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

OwnedTensor Floats(const Shape& shape, uint32_t seed) {
  OwnedTensor t = OwnedTensor::Allocate(DataType::kFloat32, shape).value();
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// s = a + b (device), r = Reshape(s, [6, 2]) (CPU: the device declines Reshape),
// y = Relu(r) (device), z = Mul(y, w) with a constant w (device); outputs z and s.
std::shared_ptr<Graph> EdgeGraph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const int a = AddInput(*g, "a", FloatType({Dim{3, ""}, Dim{4, ""}}));
  const int b = AddInput(*g, "b", FloatType({Dim{3, ""}, Dim{4, ""}}));
  const int shape = AddConstant(*g, "shape", Int64s({6, 2}));
  const int w = AddConstant(*g, "w", Floats(Shape{6, 2}, 7));
  const int s = AddNode(*g, "Add", {a, b}, "s", FloatType({Dim{3, ""}, Dim{4, ""}}));
  const int r = AddNode(*g, "Reshape", {s, shape}, "r", FloatType({Dim{6, ""}, Dim{2, ""}}));
  const int y = AddNode(*g, "Relu", {r}, "y", FloatType({Dim{6, ""}, Dim{2, ""}}));
  const int z = AddNode(*g, "Mul", {y, w}, "z", FloatType({Dim{6, ""}, Dim{2, ""}}));
  g->outputs = {z, s};
  return g;
}

std::vector<OwnedTensor> RunOrDie(const Session& s, std::span<const Tensor> inputs) {
  Result<std::vector<OwnedTensor>> out = s.Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<OwnedTensor>();
}

void ExpectSameBytes(const std::vector<OwnedTensor>& a, const std::vector<OwnedTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << "output " << i;
    ASSERT_EQ(a[i].view().device(), Device::Cpu()) << "output " << i;
    ASSERT_EQ(b[i].view().device(), Device::Cpu()) << "output " << i;
    EXPECT_EQ(std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].size_bytes()), 0)
        << "output " << i;
  }
}

TEST_F(SessionDeviceTest, PlacesNodesFallsBackAndCopiesAtTheEdges) {
  SessionOptions cpu_options;
  SessionOptions dev_options;
  dev_options.device = Device::Test(0);
  std::unique_ptr<Session> cpu = Session::Create(EdgeGraph(), cpu_options).value();
  const TestDeviceCounters before_create = GetTestDeviceCounters();
  std::unique_ptr<Session> dev = Session::Create(EdgeGraph(), dev_options).value();
  const TestDeviceCounters created = GetTestDeviceCounters();
  // The constant w, read on the device, went there once; `shape` is read on the CPU only.
  EXPECT_EQ(created.copies_to_device - before_create.copies_to_device, 1);

  EXPECT_EQ(dev->placement(0), Device::Test(0));  // Add
  EXPECT_EQ(dev->placement(1), Device::Cpu());    // Reshape: declined
  EXPECT_EQ(dev->placement(2), Device::Test(0));  // Relu
  EXPECT_EQ(dev->placement(3), Device::Test(0));  // Mul
  EXPECT_EQ(dev->provider(0), "test");
  EXPECT_EQ(cpu->placement(0), Device::Cpu());
  EXPECT_EQ(cpu->device_copies_per_run(), 0);
  // a and b in; s out to Reshape (and as an output: the same host copy); r in; z out.
  EXPECT_EQ(dev->device_copies_per_run(), 6);

  const OwnedTensor a = Floats(Shape{3, 4}, 1), b = Floats(Shape{3, 4}, 2);
  const Tensor inputs[] = {a.view(), b.view()};
  const std::vector<OwnedTensor> want = RunOrDie(*cpu, inputs);
  for (int run = 0; run < 5; ++run) {
    const TestDeviceCounters c0 = GetTestDeviceCounters();
    const std::vector<OwnedTensor> got = RunOrDie(*dev, inputs);
    const TestDeviceCounters c1 = GetTestDeviceCounters();
    ExpectSameBytes(want, got);
    EXPECT_EQ(c1.launches - c0.launches, 3) << "Add, Relu, Mul";
    EXPECT_EQ(c1.copies_to_device - c0.copies_to_device, 3) << "a, b, r";
    EXPECT_EQ(c1.copies_to_host - c0.copies_to_host, 2) << "s, z";
  }
}

// A profiled run says where each node ran; the test device keeps no timestamps, so its nodes'
// times stay the host's (a CUDA device's are replaced by event times).
TEST_F(SessionDeviceTest, ProfilesNameEachNodesDevice) {
  SessionOptions dev_options;
  dev_options.device = Device::Test(0);
  std::unique_ptr<Session> dev = Session::Create(EdgeGraph(), dev_options).value();
  const OwnedTensor a = Floats(Shape{3, 4}, 1), b = Floats(Shape{3, 4}, 2);
  const Tensor inputs[] = {a.view(), b.view()};
  RunProfile profile;
  Result<std::vector<OwnedTensor>> out = dev->RunWithProfile(inputs, &profile);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(profile.nodes.size(), 4u);
  for (const NodeTiming& t : profile.nodes) {
    EXPECT_EQ(t.device, dev->placement(t.node)) << "node " << t.node;
    EXPECT_FALSE(t.device_timed) << "node " << t.node;
    EXPECT_GE(t.duration_ns, 0);
  }
  EXPECT_TRUE(profile.device_spans.empty());
}

TEST_F(SessionDeviceTest, DeviceMemoryIsPlannedAndGivenBack) {
  const int64_t live0 = GetTestDeviceCounters().bytes_live;
  {
    SessionOptions o;
    o.device = Device::Test(0);
    std::unique_ptr<Session> dev = Session::Create(EdgeGraph(), o).value();
    const int64_t with_constants = GetTestDeviceCounters().bytes_live;
    EXPECT_GE(with_constants - live0, 6 * 2 * 4);  // w
    const OwnedTensor a = Floats(Shape{3, 4}, 1), b = Floats(Shape{3, 4}, 2);
    const Tensor inputs[] = {a.view(), b.view()};
    // The first run records both sides' allocations and plans them: the device's intermediates
    // get an arena of their own, kept for the next runs, which allocate nothing more.
    RunOrDie(*dev, inputs);
    const int64_t planned = GetTestDeviceCounters().bytes_live;
    const int64_t allocated = GetTestDeviceCounters().bytes_allocated;
    EXPECT_GT(planned, with_constants);
    for (int run = 0; run < 3; ++run) RunOrDie(*dev, inputs);
    EXPECT_EQ(GetTestDeviceCounters().bytes_live, planned);
    EXPECT_EQ(GetTestDeviceCounters().bytes_allocated, allocated) << "a planned run allocated";
    const MemoryPlanStats stats = dev->memory_plan_stats();
    ASSERT_EQ(stats.plans.size(), 1u);
    EXPECT_GT(stats.plans[0].device_arena_bytes, 0u);
    EXPECT_EQ(static_cast<int64_t>(stats.plans[0].device_arena_bytes), planned - with_constants);
    EXPECT_EQ(stats.planned_runs, 3);
    EXPECT_EQ(stats.heap_fallbacks, 0);
  }
  EXPECT_EQ(GetTestDeviceCounters().bytes_live, live0);
}

TEST_F(SessionDeviceTest, ConcurrentRunsEachGetAStream) {
  SessionOptions o;
  o.device = Device::Test(0);
  std::unique_ptr<Session> dev = Session::Create(EdgeGraph(), o).value();
  std::unique_ptr<Session> cpu = Session::Create(EdgeGraph()).value();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int run = 0; run < 20; ++run) {
        const OwnedTensor a = Floats(Shape{3, 4}, 100 * t + run), b = Floats(Shape{3, 4}, 7);
        const Tensor inputs[] = {a.view(), b.view()};
        Result<std::vector<OwnedTensor>> want = cpu->Run(inputs);
        Result<std::vector<OwnedTensor>> got = dev->Run(inputs);
        if (!want.ok() || !got.ok() ||
            std::memcmp((*want)[0].raw_data(), (*got)[0].raw_data(), (*want)[0].size_bytes()) !=
                0) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(SessionDeviceTest, DeviceKernelErrorsFailTheRunNotTheSession) {
  // Add of [3, 4] and [5]: the shapes do not broadcast, found by the kernel on the device.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const int a = AddInput(*g, "a", FloatType({Dim{-1, "n"}, Dim{-1, "m"}}));
  const int b = AddInput(*g, "b", FloatType({Dim{-1, "k"}}));
  const int s = AddNode(*g, "Add", {a, b}, "s", FloatType({Dim{-1, "n"}, Dim{-1, "m"}}));
  g->outputs = {s};
  SessionOptions o;
  o.device = Device::Test(0);
  std::unique_ptr<Session> dev = Session::Create(g, o).value();
  ASSERT_EQ(dev->placement(0), Device::Test(0));
  const OwnedTensor x = Floats(Shape{3, 4}, 1), bad = Floats(Shape{5}, 2),
                    good = Floats(Shape{4}, 3);
  const Tensor bad_inputs[] = {x.view(), bad.view()};
  Result<std::vector<OwnedTensor>> out = dev->Run(bad_inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Add_s"), std::string::npos) << out.status().ToString();
  const Tensor good_inputs[] = {x.view(), good.view()};
  out = dev->Run(good_inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float* y = (*out)[0].data<float>();
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(y[i], x.data<float>()[i] + good.data<float>()[i % 4]) << i;
  }
}

TEST_F(SessionDeviceTest, UnknownDeviceIsALoadError) {
  SessionOptions o;
  o.device = Device::Cuda(3);
  Result<std::unique_ptr<Session>> s = Session::Create(EdgeGraph(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no backend for device cuda:3"), std::string::npos)
      << s.status().ToString();
  EXPECT_NE(s.status().message().find("test:0"), std::string::npos) << s.status().ToString();
}

// The streams themselves: order, events, errors, waits across streams, poisoned destinations.
TEST_F(SessionDeviceTest, StreamsRunInOrderWithEventsAndErrors) {
  Backend* dev = BackendRegistry::Find(Device::Test(0));
  ASSERT_NE(dev, nullptr);
  EXPECT_TRUE(dev->async());
  EXPECT_FALSE(dev->buffer_type().host_accessible());
  EXPECT_TRUE(dev->host_buffer_type().host_accessible());
  std::unique_ptr<Stream> s = dev->CreateStream().value();
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    s->Launch([&order, i] {
      order.push_back(i);
      return Status::OK();
    });
  }
  // A copy enqueued after the launches: its destination is poisoned at once, filled later.
  void* dmem = dev->buffer_type().allocator().Allocate(64, 64).value();
  EXPECT_TRUE(dev->buffer_type().Owns(dmem));
  EXPECT_FALSE(dev->buffer_type().Owns(&order));
  std::vector<unsigned char> host(64, 7), back(64, 0);
  s->CopyAsync(dmem, host.data(), 64);
  s->CopyAsync(back.data(), dmem, 64);
  std::unique_ptr<Event> e = s->Record();
  ASSERT_TRUE(e->Synchronize().ok());
  EXPECT_TRUE(e->Ready());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_EQ(back, host);

  // Another stream waits for an event of this one.
  std::unique_ptr<Stream> other = dev->CreateStream().value();
  std::atomic<bool> first_done{false}, second_saw_first{false};
  s->Launch([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    first_done = true;
    return Status::OK();
  });
  other->Wait(std::shared_ptr<Event>(s->Record()));
  other->Launch([&] {
    second_saw_first = first_done.load();
    return Status::OK();
  });
  ASSERT_TRUE(other->Synchronize().ok());
  EXPECT_TRUE(second_saw_first.load());

  // An error fails the stream: later work is skipped, events after it report it.
  bool ran_after = false;
  s->Launch([] { return Status::Internal("boom"); });
  s->Launch([&] {
    ran_after = true;
    return Status::OK();
  });
  std::unique_ptr<Event> after = s->Record();
  EXPECT_EQ(after->Synchronize().message(), "boom");
  EXPECT_EQ(s->Synchronize().message(), "boom");
  EXPECT_FALSE(ran_after);
  dev->buffer_type().allocator().Free(dmem, 64);

  // The CPU's stream runs everything at once.
  std::unique_ptr<Stream> cpu = CpuBackend().CreateStream().value();
  int x = 0;
  cpu->Launch([&] {
    x = 1;
    return Status::OK();
  });
  EXPECT_EQ(x, 1);
  EXPECT_TRUE(cpu->Record()->Ready());
  EXPECT_EQ(BackendRegistry::Find(Device::Cpu()), &CpuBackend());
  EXPECT_FALSE(BackendRegistry::Register(nullptr).ok());
}

}  // namespace
}  // namespace kiln
