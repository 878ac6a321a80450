// SPDX-License-Identifier: Apache-2.0
// Session-level tests of the memory planner (plans per input signature, arenas, fallbacks) and of
// the intra-op thread setting.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "base/mutex.h"
#include "runtime/session.h"

namespace kiln {
namespace {

// Counts the allocations it serves and their bytes.
class CountingAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    ++count;
    total_bytes += bytes;
    return HostAllocator().Allocate(bytes, alignment);
  }
  void Free(void* ptr, size_t bytes) override { HostAllocator().Free(ptr, bytes); }
  Device device() const override { return Device::Cpu(); }
  void Reset() {
    count = 0;
    total_bytes = 0;
  }
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> total_bytes{0};
};

ValueType Type(DataType dtype, std::vector<Dim> dims) {
  ValueType t;
  t.dtype = dtype;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

int AddOp(Graph& g, const std::string& op, std::vector<int> inputs, const std::string& out,
          std::vector<Attribute> attrs = {}) {
  const int y = g.AddValue({out, ValueType{}, -1, nullptr});
  Node n;
  n.name = op + "_" + out;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {y};
  n.attributes = std::move(attrs);
  g.AddNode(std::move(n));
  return y;
}

int AddConstant(Graph& g, const std::string& name, int rows, int cols, float scale) {
  Result<OwnedTensor> w = OwnedTensor::Allocate(DataType::kFloat32, Shape{rows, cols});
  KILN_CHECK(w.ok(), "allocation");
  for (int i = 0; i < rows * cols; ++i) w->data<float>()[i] = scale * std::sin(0.37f * i);
  return g.AddValue({name, Type(DataType::kFloat32, {Dim{rows, ""}, Dim{cols, ""}}), -1,
                     std::make_shared<const OwnedTensor>(*w)});
}

constexpr int kWidth = 64;

// y = Sigmoid(Relu(x W1) W2) + x, x [batch, 64]: four intermediates in a chain, one output.
std::shared_ptr<Graph> MlpGraph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int x = g->AddValue(
      {"x", Type(DataType::kFloat32, {Dim{-1, "batch"}, Dim{kWidth, ""}}), -1, nullptr});
  g->inputs.push_back(x);
  const int w1 = AddConstant(*g, "w1", kWidth, kWidth, 0.1f);
  const int w2 = AddConstant(*g, "w2", kWidth, kWidth, 0.2f);
  const int m1 = AddOp(*g, "MatMul", {x, w1}, "m1");
  const int r1 = AddOp(*g, "Relu", {m1}, "r1");
  const int m2 = AddOp(*g, "MatMul", {r1, w2}, "m2");
  const int s2 = AddOp(*g, "Sigmoid", {m2}, "s2");
  g->outputs = {AddOp(*g, "Add", {s2, x}, "y")};
  return g;
}

std::vector<float> RandomInput(int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(batch) * kWidth);
  for (float& f : v) f = u(rng);
  return v;
}

std::unique_ptr<Session> MakeSession(std::shared_ptr<const Graph> g,
                                     const SessionOptions& options) {
  Result<std::unique_ptr<Session>> s = Session::Create(std::move(g), options);
  KILN_CHECK(s.ok(), s.status().ToString());
  return std::move(s).value();
}

std::vector<float> RunMlp(const Session& s, std::vector<float>& x, int batch) {
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{batch, kWidth}, x.data())};
  Result<std::vector<OwnedTensor>> out = s.Run(in);
  KILN_CHECK(out.ok(), out.status().ToString());
  const float* p = (*out)[0].data<float>();
  return std::vector<float>(p, p + (*out)[0].num_elements());
}

TEST(SessionMemoryTest, SecondRunOfAShapeAllocatesOnlyItsOutputs) {
  CountingAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  std::unique_ptr<Session> s = MakeSession(MlpGraph(), options);
  const int batch = 4;
  const int64_t row_bytes = kWidth * sizeof(float);
  std::vector<float> x = RandomInput(batch, 1);
  RunMlp(*s, x, batch);
  // Recording run: m1, r1, m2, s2 and y, then one arena for the plan.
  EXPECT_EQ(alloc.count.load(), 6);
  for (int run = 0; run < 3; ++run) {
    alloc.Reset();
    RunMlp(*s, x, batch);
    EXPECT_EQ(alloc.count.load(), 1) << "run " << run;  // the graph output y only
    EXPECT_EQ(alloc.total_bytes.load(), batch * row_bytes) << "run " << run;
  }
  MemoryPlanStats stats = s->memory_plan_stats();
  ASSERT_EQ(stats.plans.size(), 1u);
  // Four intermediates of batch x 64 floats; a chain never has more than two live at once.
  EXPECT_EQ(stats.plans[0].unplanned_bytes, static_cast<size_t>(4 * batch * row_bytes));
  EXPECT_EQ(stats.plans[0].arena_bytes, static_cast<size_t>(2 * batch * row_bytes));
  EXPECT_EQ(stats.plans[0].live_peak_bytes, static_cast<size_t>(2 * batch * row_bytes));
  EXPECT_EQ(stats.plans[0].planned_allocations, 4);
  EXPECT_EQ(stats.plans[0].heap_nodes, 1);  // the Add making y
  EXPECT_EQ(stats.recorded_runs, 1);
  EXPECT_EQ(stats.planned_runs, 3);
  EXPECT_EQ(stats.heap_fallbacks, 0);
}

TEST(SessionMemoryTest, RunValuesOverTensorsIsPlannedToo) {
  CountingAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  std::unique_ptr<Session> s = MakeSession(MlpGraph(), options);
  SessionOptions off;
  off.memory_planning = false;
  std::unique_ptr<Session> plain = MakeSession(MlpGraph(), off);
  std::vector<float> x = RandomInput(3, 9);
  const std::vector<float> want = RunMlp(*plain, x, 3);
  Result<OwnedTensor> in =
      OwnedTensor::CopyOf(Tensor(DataType::kFloat32, Shape{3, kWidth}, x.data()));
  ASSERT_TRUE(in.ok());
  std::vector<RuntimeValue> values = {RuntimeValue(*in)};
  for (int run = 0; run < 3; ++run) {
    alloc.Reset();
    Result<std::vector<RuntimeValue>> out = s->RunValues(values);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const OwnedTensor& y = (*out)[0].tensor();
    EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + y.num_elements()), want);
    EXPECT_EQ(alloc.count.load(), run == 0 ? 6 : 1) << "run " << run;
  }
  EXPECT_EQ(s->memory_plan_stats().planned_runs, 2);
}

TEST(SessionMemoryTest, OutputsMatchUnplannedRunsAcrossShapes) {
  SessionOptions off;
  off.memory_planning = false;
  std::unique_ptr<Session> plain = MakeSession(MlpGraph(), off);
  std::unique_ptr<Session> planned = MakeSession(MlpGraph(), {});
  const int batches[] = {1, 3, 4, 3, 1, 7, 4};
  uint32_t seed = 10;
  for (int batch : batches) {
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<float> x = RandomInput(batch, ++seed);
      EXPECT_EQ(RunMlp(*planned, x, batch), RunMlp(*plain, x, batch)) << "batch " << batch;
    }
  }
  MemoryPlanStats stats = planned->memory_plan_stats();
  ASSERT_EQ(stats.plans.size(), 4u);  // batches 1, 3, 4 and 7: one plan each
  EXPECT_EQ(stats.recorded_runs, 4);
  EXPECT_EQ(stats.planned_runs, 21 - 4);
  // Most recently used first: batch 4, then 7; their arenas scale with the batch.
  EXPECT_EQ(stats.plans[0].arena_bytes, static_cast<size_t>(2 * 4 * kWidth * sizeof(float)));
  EXPECT_EQ(stats.plans[1].arena_bytes, static_cast<size_t>(2 * 7 * kWidth * sizeof(float)));
  EXPECT_EQ(plain->memory_plan_stats().plans.size(), 0u);
}

TEST(SessionMemoryTest, PlanCacheEvictsTheLeastRecentlyUsed) {
  SessionOptions options;
  options.memory_plan_cache_size = 2;
  std::unique_ptr<Session> s = MakeSession(MlpGraph(), options);
  for (int batch : {1, 2, 1, 3}) {
    std::vector<float> x = RandomInput(batch, 5);
    RunMlp(*s, x, batch);
  }
  MemoryPlanStats stats = s->memory_plan_stats();
  ASSERT_EQ(stats.plans.size(), 2u);
  EXPECT_EQ(stats.evictions, 1);  // batch 2 went; batch 1 was used more recently
  // One input (f32, rank 2, 3 x kWidth), then the number of captures (none).
  EXPECT_EQ(stats.plans[0].signature,
            (std::vector<int64_t>{1, static_cast<int64_t>(DataType::kFloat32), 2, 3, kWidth, 0}));
  EXPECT_EQ(stats.plans[1].signature[3], 1);
}

TEST(SessionMemoryTest, ConcurrentRunsEachGetTheirOwnArena) {
  SessionOptions off;
  off.memory_planning = false;
  std::unique_ptr<Session> plain = MakeSession(MlpGraph(), off);
  std::unique_ptr<Session> planned = MakeSession(MlpGraph(), {});
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < kThreads; ++t) {
    const int batch = 1 + t % 2;  // two threads per shape: arenas of one plan are shared out
    inputs.push_back(RandomInput(batch, 100 + t));
    expected.push_back(RunMlp(*plain, inputs.back(), batch));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> x = inputs[static_cast<size_t>(t)];
      for (int iter = 0; iter < 200; ++iter) {
        if (RunMlp(*planned, x, 1 + t % 2) != expected[static_cast<size_t>(t)]) ++mismatches;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  MemoryPlanStats stats = planned->memory_plan_stats();
  EXPECT_EQ(stats.plans.size(), 2u);
  EXPECT_EQ(stats.recorded_runs + stats.planned_runs, kThreads * 200);
  EXPECT_EQ(stats.heap_fallbacks, 0);
  for (const MemoryPlanStats::Plan& p : stats.plans) {
    EXPECT_GE(p.idle_arenas, 1);
    EXPECT_LE(p.idle_arenas, kThreads);
  }
}

// t = Transpose(NonZero(Relu(x))), y = Shape(t): NonZero's output size depends on the data, so
// a later run of the same shape deviates from the plan at NonZero and Transpose.
TEST(SessionMemoryTest, DataDependentSizesFallBackToTheHeap) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int x = g->AddValue({"x", Type(DataType::kFloat32, {Dim{8, ""}}), -1, nullptr});
  g->inputs.push_back(x);
  const int r = AddOp(*g, "Relu", {x}, "r");
  const int nz = AddOp(*g, "NonZero", {r}, "nz");
  const int t = AddOp(*g, "Transpose", {nz}, "t");
  g->outputs = {AddOp(*g, "Shape", {t}, "y"), r};
  CountingAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  std::unique_ptr<Session> s = MakeSession(g, options);
  const auto run = [&](std::vector<float> data) {
    Tensor in[] = {Tensor(DataType::kFloat32, Shape{8}, data.data())};
    Result<std::vector<OwnedTensor>> out = s->Run(in);
    KILN_CHECK(out.ok(), out.status().ToString());
    std::vector<float> relu((*out)[1].data<float>(), (*out)[1].data<float>() + 8);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(relu[static_cast<size_t>(i)], std::max(data[i], 0.f));
    return std::vector<int64_t>((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + 2);
  };
  EXPECT_EQ(run({1, -1, 2, -2, 3, -3, 4, -4}), (std::vector<int64_t>{4, 1}));  // records
  EXPECT_EQ(run({1, -1, 2, -2, 3, -3, 4, -4}), (std::vector<int64_t>{4, 1}));  // as planned
  EXPECT_EQ(s->memory_plan_stats().heap_fallbacks, 0);
  EXPECT_EQ(run({1, 1, 1, 1, 1, 1, -1, 1}), (std::vector<int64_t>{7, 1}));  // deviates
  EXPECT_EQ(run({-1, -1, -1, -1, -1, -1, -1, 5}), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(run({1, -1, 2, -2, 3, -3, 4, -4}), (std::vector<int64_t>{4, 1}));  // back on plan
  MemoryPlanStats stats = s->memory_plan_stats();
  EXPECT_EQ(stats.heap_fallbacks, 4);  // nz and t, in each of the two deviating runs
  EXPECT_EQ(stats.plans.size(), 1u);
}

TEST(SessionMemoryTest, PlanningOffAllocatesEveryIntermediate) {
  CountingAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  options.memory_planning = false;
  std::unique_ptr<Session> s = MakeSession(MlpGraph(), options);
  std::vector<float> x = RandomInput(2, 3);
  for (int run = 0; run < 2; ++run) {
    alloc.Reset();
    RunMlp(*s, x, 2);
    EXPECT_EQ(alloc.count.load(), 5);
  }
  EXPECT_EQ(s->memory_plan_stats().planned_runs, 0);
}

// x [batch, 64] -> Relu -> r -> Reshape [batch, 8, 8] -> v -> Sigmoid -> y (and, with
// `reshape_is_output`, v is a graph output too; with `relu_is_output`, r is).
std::shared_ptr<Graph> ViewGraph(bool reshape_is_output, bool relu_is_output = false) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int x = g->AddValue(
      {"x", Type(DataType::kFloat32, {Dim{-1, "batch"}, Dim{kWidth, ""}}), -1, nullptr});
  g->inputs.push_back(x);
  Result<OwnedTensor> shape = OwnedTensor::Allocate(DataType::kInt64, Shape{3});
  KILN_CHECK(shape.ok(), "allocation");
  const int64_t dims[] = {-1, 8, 8};
  std::memcpy(shape->raw_data(), dims, sizeof(dims));
  const int sv = g->AddValue({"shape", Type(DataType::kInt64, {Dim{3, ""}}), -1,
                              std::make_shared<const OwnedTensor>(*shape)});
  const int r = AddOp(*g, "Relu", {x}, "r");
  const int v = AddOp(*g, "Reshape", {r, sv}, "v");
  const int y = AddOp(*g, "Sigmoid", {v}, "y");
  g->outputs = {y};
  if (reshape_is_output) g->outputs.push_back(v);
  if (relu_is_output) g->outputs.push_back(r);
  return g;
}

TEST(SessionMemoryTest, ViewOpsShareTheirInputsMemory) {
  CountingAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  std::unique_ptr<Session> s = MakeSession(ViewGraph(false), options);
  const int batch = 3;
  std::vector<float> x = RandomInput(batch, 7);
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{batch, kWidth}, x.data())};
  for (int run = 0; run < 3; ++run) {
    Result<std::vector<OwnedTensor>> out = s->Run(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ((*out)[0].shape(), Shape({batch, 8, 8}));
    for (int i = 0; i < batch * kWidth; ++i) {
      const float want = 1.0f / (1.0f + std::exp(-std::max(x[static_cast<size_t>(i)], 0.0f)));
      ASSERT_NEAR((*out)[0].data<float>()[i], want, 1e-6f) << "run " << run << " element " << i;
    }
  }
  // One intermediate (r): the Reshape output v is r's memory, not a block of its own.
  MemoryPlanStats stats = s->memory_plan_stats();
  ASSERT_EQ(stats.plans.size(), 1u);
  EXPECT_EQ(stats.plans[0].unplanned_bytes, static_cast<size_t>(batch * kWidth * sizeof(float)));
  EXPECT_EQ(stats.plans[0].planned_allocations, 1);
}

TEST(SessionMemoryTest, AViewThatIsAGraphOutputOutlivesTheNextRun) {
  // v (a Reshape of the intermediate r) is returned: its memory must not be an arena block the
  // next run reuses, and it must not be shared with another output.
  SessionOptions options;
  std::unique_ptr<Session> s = MakeSession(ViewGraph(true), options);
  const int batch = 2;
  std::vector<float> x1 = RandomInput(batch, 8), x2 = RandomInput(batch, 9);
  Tensor in1[] = {Tensor(DataType::kFloat32, Shape{batch, kWidth}, x1.data())};
  Tensor in2[] = {Tensor(DataType::kFloat32, Shape{batch, kWidth}, x2.data())};
  ASSERT_TRUE(s->Run(in1).ok());  // the recording run; later runs are planned
  Result<std::vector<OwnedTensor>> first = s->Run(in1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::vector<OwnedTensor>> second = s->Run(in2);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_NE((*first)[0].raw_data(), (*first)[1].raw_data());
  EXPECT_NE((*first)[1].raw_data(), (*second)[1].raw_data());
  for (int i = 0; i < batch * kWidth; ++i) {
    const size_t u = static_cast<size_t>(i);
    EXPECT_EQ((*first)[1].data<float>()[i], std::max(x1[u], 0.0f)) << "element " << i;
    EXPECT_EQ((*second)[1].data<float>()[i], std::max(x2[u], 0.0f)) << "element " << i;
  }
  EXPECT_EQ(s->memory_plan_stats().heap_fallbacks, 0);
}

TEST(SessionMemoryTest, AViewOfAGraphOutputIsACopy) {
  // r and its Reshape v are both returned: the caller gets two tensors that share no memory.
  std::unique_ptr<Session> s = MakeSession(ViewGraph(true, true), SessionOptions());
  const int batch = 2;
  std::vector<float> x = RandomInput(batch, 10);
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{batch, kWidth}, x.data())};
  for (int run = 0; run < 2; ++run) {
    Result<std::vector<OwnedTensor>> out = s->Run(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 3u);
    EXPECT_NE((*out)[1].raw_data(), (*out)[2].raw_data()) << "run " << run;
    EXPECT_EQ(std::memcmp((*out)[1].raw_data(), (*out)[2].raw_data(), (*out)[1].size_bytes()), 0);
  }
}

TEST(SessionThreadsTest, RunsSetTheCallingThreadsOpenMpThreadCount) {
  SessionOptions three;
  three.intra_op_threads = 3;
  three.adapt_threads = false;  // a governed session may narrow while the other thread runs
  std::unique_ptr<Session> s3 = MakeSession(MlpGraph(), three);
  EXPECT_EQ(s3->intra_op_threads(), 3);
  SessionOptions one;
  one.intra_op_threads = 1;
  std::unique_ptr<Session> s1 = MakeSession(MlpGraph(), one);
  EXPECT_EQ(MakeSession(MlpGraph(), {})->intra_op_threads(), omp_get_num_procs());

  // Each thread keeps the budget of the session it ran, whatever the other thread does.
  Mutex mu;
  std::vector<int> seen(2, -1);
  std::vector<int> team(2, -1);
  const auto work = [&](const Session& s, int slot) {
    std::vector<float> x = RandomInput(1, 7);
    for (int i = 0; i < 20; ++i) RunMlp(s, x, 1);
    int n = 0;
#pragma omp parallel
    {
#pragma omp single
      n = omp_get_num_threads();
    }
    MutexLock lock(mu);
    seen[static_cast<size_t>(slot)] = omp_get_max_threads();
    team[static_cast<size_t>(slot)] = n;
  };
  std::thread a(work, std::cref(*s3), 0);
  std::thread b(work, std::cref(*s1), 1);
  a.join();
  b.join();
  EXPECT_EQ(seen[0], 3);
  EXPECT_EQ(seen[1], 1);
  EXPECT_EQ(team[0], 3);
  EXPECT_EQ(team[1], 1);
}

}  // namespace
}  // namespace kiln
