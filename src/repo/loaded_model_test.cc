// SPDX-License-Identifier: Apache-2.0
#include "repo/loaded_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstring>
#include <future>
#include <optional>
#include <thread>

#include "repo/model_config.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

using ::kiln::testing::D;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::ParseConfigOrDie;
using ::kiln::testing::PassthroughGraph;
using ::kiln::testing::Sym;
using ::kiln::testing::ZeroInput;
using ::testing::HasSubstr;

ModelSignature AddSubSignature() {
  ModelSignature sig;
  sig.name = "add_sub";
  sig.max_batch_size = 8;
  sig.inputs = {{"INPUT0", DataType::kFloat32, {16}}, {"INPUT1", DataType::kFloat32, {16}}};
  sig.outputs = {{"OUTPUT0", DataType::kFloat32, {16}}, {"OUTPUT1", DataType::kFloat32, {16}}};
  return sig;
}

std::unique_ptr<InferRequest> Request(std::vector<InferInput> inputs,
                                      std::vector<std::string> outputs = {}) {
  auto r = std::make_unique<InferRequest>();
  r->inputs = std::move(inputs);
  for (std::string& o : outputs) r->outputs.push_back({std::move(o)});
  return r;
}

TEST(ValidateInferRequest, AcceptsValidRequests) {
  const ModelSignature sig = AddSubSignature();
  for (int64_t b : {1, 3, 8}) {
    auto r = Request({ZeroInput("INPUT1", DataType::kFloat32, {b, 16}),
                      ZeroInput("INPUT0", DataType::kFloat32, {b, 16})},
                     {"OUTPUT1"});
    EXPECT_TRUE(ValidateInferRequest(sig, *r).ok()) << b;
  }
  ModelSignature fixed = sig;
  fixed.max_batch_size = 0;
  fixed.inputs[1].dims = {-1, 2};
  auto r = Request({ZeroInput("INPUT0", DataType::kFloat32, {16}),
                    ZeroInput("INPUT1", DataType::kFloat32, {0, 2})});
  EXPECT_TRUE(ValidateInferRequest(fixed, *r).ok());
}

TEST(ValidateInferRequest, EveryError) {
  const ModelSignature sig = AddSubSignature();
  struct Case {
    std::unique_ptr<InferRequest> request;
    std::string_view message;
  };
  const auto in0 = [](std::vector<int64_t> dims, DataType t = DataType::kFloat32) {
    return ZeroInput("INPUT0", t, std::move(dims));
  };
  const auto in1 = [](std::vector<int64_t> dims) {
    return ZeroInput("INPUT1", DataType::kFloat32, std::move(dims));
  };
  std::vector<Case> cases;
  cases.push_back({Request({in0({2, 16})}),
                   "input 'INPUT1' is missing: model 'add_sub' expects inputs ['INPUT0', "
                   "'INPUT1']"});
  cases.push_back({Request({in0({2, 16}), in1({2, 16}), in0({2, 16})}),
                   "input 'INPUT0' is given more than once"});
  cases.push_back(
      {Request({in0({2, 16}), in1({2, 16}), ZeroInput("INPUT9", DataType::kFloat32, {2, 16})}),
       "unexpected inference input 'INPUT9' for model 'add_sub'"});
  cases.push_back({Request({in0({2, 16}, DataType::kInt32), in1({2, 16})}),
                   "input 'INPUT0': expected datatype FP32, got INT32"});
  cases.push_back({Request({in0({2, 15}), in1({2, 16})}),
                   "input 'INPUT0': expected shape [-1,16], got [2,15]"});
  cases.push_back(
      {Request({in0({16}), in1({2, 16})}), "input 'INPUT0': expected shape [-1,16], got [16]"});
  cases.push_back({Request({in0({2, 16, 1}), in1({2, 16})}),
                   "input 'INPUT0': expected shape [-1,16], got [2,16,1]"});
  cases.push_back({Request({in0({9, 16}), in1({9, 16})}),
                   "input 'INPUT0': batch size 9 is out of range 1..8 (max_batch_size)"});
  cases.push_back(
      {Request({in0({0, 16}), in1({0, 16})}), "input 'INPUT0': batch size 0 is out of range 1..8"});
  cases.push_back({Request({in0({2, 16}), in1({3, 16})}),
                   "input 'INPUT1': batch size 3 differs from batch size 2 of input 'INPUT0'"});
  cases.push_back({Request({in0({2, 16}), in1({2, 16})}, {"OUTPUT7"}),
                   "unexpected inference output 'OUTPUT7' for model 'add_sub'"});
  cases.push_back({Request({in0({2, 16}), in1({2, 16})}, {"OUTPUT0", "OUTPUT0"}),
                   "output 'OUTPUT0' is requested more than once"});
  cases.push_back(
      {Request({InferInput{"INPUT0", OwnedTensor()}, in1({2, 16})}), "input 'INPUT0' has no data"});
  for (const Case& c : cases) {
    Status s = ValidateInferRequest(sig, *c.request);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }

  ModelSignature fixed = sig;
  fixed.max_batch_size = 0;
  Status s = ValidateInferRequest(fixed, *Request({in0({2, 16}), in1({16})}));
  EXPECT_THAT(s.message(), HasSubstr("input 'INPUT0': expected shape [16], got [2,16]"));
}

// A passthrough model (outputs are the inputs) served by LoadedModelImpl; no kernels needed.
std::shared_ptr<LoadedModelImpl> MakePassthroughModel(std::string_view config_text,
                                                      std::shared_ptr<Graph> graph, int instances,
                                                      InstanceOptions options = {}) {
  inference::ModelConfig config = ParseConfigOrDie(config_text);
  EXPECT_TRUE(NormalizeModelConfig(&config, instances).ok());
  EXPECT_TRUE(ValidateModelConfig(config).ok()) << ValidateModelConfig(config).ToString();
  Status v = ValidateConfigAgainstGraph(config, *graph);
  EXPECT_TRUE(v.ok()) << v.ToString();
  if (options.cpu_threads == 0) options.oversubscribe = true;  // whatever this machine's cores
  Result<std::shared_ptr<LoadedModelImpl>> model =
      LoadedModelImpl::Create(3, config, std::move(graph), options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return std::move(model).value();
}

constexpr std::string_view kPairConfig = R"cfg(
  name: "pair" max_batch_size: 8
  input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
          { name: "B" data_type: TYPE_FP32 dims: [ -1 ] } ]
  output [ { name: "B" data_type: TYPE_FP32 dims: [ -1 ] },
           { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ])cfg";

std::shared_ptr<Graph> PairGraph() {
  return PassthroughGraph({{"A", DataType::kFloat32, {Sym("batch"), D(4)}},
                           {"B", DataType::kFloat32, {Sym("batch"), Sym("n")}}});
}

Result<InferResponse> InferSync(LoadedModel& model, std::unique_ptr<InferRequest> request) {
  std::promise<Result<InferResponse>> done;
  std::future<Result<InferResponse>> result = done.get_future();
  model.Infer(std::move(request),
              [&done](Result<InferResponse> r) { done.set_value(std::move(r)); });
  return result.get();
}

TEST(LoadedModel, RunsAndOrdersOutputs) {
  auto model = MakePassthroughModel(kPairConfig, PairGraph(), 1);
  EXPECT_EQ(model->name(), "pair");
  EXPECT_EQ(model->version(), 3);
  EXPECT_EQ(model->signature().max_batch_size, 8);

  auto request = std::make_unique<InferRequest>();
  request->id = "req-1";
  request->inputs.push_back(FloatInput("B", {1, 2}, {5, 6}));
  request->inputs.push_back(FloatInput("A", {1, 4}, {1, 2, 3, 4}));
  Result<InferResponse> r = InferSync(*model, std::move(request));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_name, "pair");
  EXPECT_EQ(r->model_version, 3);
  EXPECT_EQ(r->id, "req-1");
  ASSERT_EQ(r->outputs.size(), 2u);  // config order: B, A
  EXPECT_EQ(r->outputs[0].name, "B");
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{5, 6}));
  EXPECT_EQ(r->outputs[1].name, "A");
  EXPECT_EQ(r->outputs[1].tensor.shape(), (Shape{1, 4}));

  request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("A", {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  request->inputs.push_back(FloatInput("B", {2, 1}, {5, 6}));
  request->outputs = {{"A"}};
  r = InferSync(*model, std::move(request));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "A");
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(LoadedModel, ValidationErrorsComeBackOnTheCallerThread) {
  auto model = MakePassthroughModel(kPairConfig, PairGraph(), 1);
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("A", {1, 3}, {1, 2, 3}));
  request->inputs.push_back(FloatInput("B", {1, 1}, {1}));
  bool called = false;
  const std::thread::id caller = std::this_thread::get_id();
  model->Infer(std::move(request), [&](const Result<InferResponse>& r) {
    called = true;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("input 'A': expected shape [-1,4], got [1,3]"));
  });
  EXPECT_TRUE(called);
  bool null_called = false;
  model->Infer(nullptr, [&](const Result<InferResponse>& r) {
    null_called = true;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(null_called);
}

TEST(LoadedModel, ReshapeIdiomForBatchOnlyTensors) {
  // The model's tensor is [batch]; the config says dims [1] + reshape { shape: [] }.
  auto graph = PassthroughGraph({{"v", DataType::kFloat32, {Sym("batch")}}});
  auto model = MakePassthroughModel(R"cfg(
    name: "vec" max_batch_size: 4
    input { name: "v" data_type: TYPE_FP32 dims: [1] reshape { shape: [] } }
    output { name: "v" data_type: TYPE_FP32 dims: [1] reshape { shape: [] } })cfg",
                                    graph, 1);
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("v", {3, 1}, {7, 8, 9}));
  Result<InferResponse> r = InferSync(*model, std::move(request));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor.shape(), (Shape{3, 1}));
  EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{7, 8, 9}));
}

TEST(LoadedModel, SessionErrorsComeBackThroughTheCallback) {
  // The config accepts any length for B; the graph insists on 2: Session::Run rejects it.
  auto graph = PassthroughGraph({{"A", DataType::kFloat32, {Sym("batch"), D(4)}},
                                 {"B", DataType::kFloat32, {Sym("batch"), D(2)}}});
  auto model = MakePassthroughModel(kPairConfig, graph, 1);
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("A", {1, 4}, {1, 2, 3, 4}));
  request->inputs.push_back(FloatInput("B", {1, 3}, {1, 2, 3}));
  Result<InferResponse> r = InferSync(*model, std::move(request));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("input 'B'"));
}

TEST(LoadedModel, ManyConcurrentRequestsEachAnsweredOnce) {
  auto model = MakePassthroughModel(kPairConfig, PairGraph(), 3);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::atomic<int> ok{0};
  std::atomic<int> calls{0};
  std::vector<std::thread> clients;
  clients.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const float x = static_cast<float>(t * 1000 + i);
        auto request = std::make_unique<InferRequest>();
        request->inputs.push_back(FloatInput("A", {1, 4}, {x, x, x, x}));
        request->inputs.push_back(FloatInput("B", {1, 1}, {-x}));
        model->Infer(std::move(request), [&, x](Result<InferResponse> r) {
          calls++;
          if (r.ok() && FloatValues(r->outputs[0].tensor) == std::vector<float>{-x}) ok++;
        });
      }
    });
  }
  for (auto& c : clients) c.join();
  model->Shutdown();  // drains the queue
  EXPECT_EQ(calls.load(), kThreads * kPerThread);
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
}

TEST(LoadedModel, ShutdownDrainsQueuedRequestsThenRefuses) {
  auto model = MakePassthroughModel(kPairConfig, PairGraph(), 1);
  const auto make_request = [] {
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back(FloatInput("A", {1, 4}, {1, 2, 3, 4}));
    request->inputs.push_back(FloatInput("B", {1, 1}, {5}));
    return request;
  };
  // The first callback blocks the only worker, so later requests stay queued.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> first_running;
  model->Infer(make_request(), [&](const Result<InferResponse>& r) {
    EXPECT_TRUE(r.ok());
    first_running.set_value();
    released.wait();
  });
  first_running.get_future().wait();

  std::atomic<int> ok{0};
  std::atomic<int> unavailable{0};
  const auto count = [&](const Result<InferResponse>& r) {
    if (r.ok())
      ok++;
    else if (r.status().code() == StatusCode::kUnavailable)
      unavailable++;
  };
  for (int i = 0; i < 5; ++i) model->Infer(make_request(), count);
  EXPECT_EQ(model->queued(), 5u);
  EXPECT_EQ(model->PendingRequestCount(), 5u);

  std::thread stopper([&] { model->Shutdown(); });
  // Requests keep arriving until Shutdown has begun; every later one is refused synchronously.
  int accepted = 5;
  for (;;) {
    auto refused = std::make_shared<std::atomic<bool>>(false);
    model->Infer(make_request(), [&count, refused](const Result<InferResponse>& r) {
      if (!r.ok() && r.status().code() == StatusCode::kUnavailable) *refused = true;
      count(r);
    });
    if (*refused) break;
    ++accepted;
  }
  release.set_value();
  stopper.join();
  EXPECT_EQ(ok.load(), accepted);  // every accepted request ran
  EXPECT_EQ(unavailable.load(), 1);
  EXPECT_EQ(model->queued(), 0u);

  bool refused = false;
  model->Infer(make_request(), [&](const Result<InferResponse>& r) {
    refused = true;
    EXPECT_THAT(r.status().message(), HasSubstr("model 'pair' version 3 is shutting down"));
  });
  EXPECT_TRUE(refused);
}

TEST(LoadedModel, LastReferenceDroppedInsideItsOwnCallback) {
  auto model = MakePassthroughModel(kPairConfig, PairGraph(), 2);
  std::promise<void> done;
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("A", {1, 4}, {1, 2, 3, 4}));
  request->inputs.push_back(FloatInput("B", {1, 1}, {5}));
  LoadedModel* raw = model.get();
  // The callback owns the only reference; destroying the model on its worker must not deadlock.
  std::shared_ptr<LoadedModel> holder = std::move(model);
  raw->Infer(std::move(request),
             [&done, keep = std::move(holder)](const Result<InferResponse>& r) mutable {
               EXPECT_TRUE(r.ok());
               keep.reset();
               done.set_value();
             });
  EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(LoadedModel, StatisticsCountEveryAnswer) {
  auto model = MakePassthroughModel(kPairConfig, PairGraph(), 1);
  RequestTiming sum;  // what the responses report, request by request
  for (int64_t b : {1, 2, 1}) {
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back(FloatInput("A", {b, 4}, std::vector<float>(b * 4, 1.f)));
    request->inputs.push_back(FloatInput("B", {b, 1}, std::vector<float>(b, 2.f)));
    Result<InferResponse> r = InferSync(*model, std::move(request));
    ASSERT_TRUE(r.ok());
    EXPECT_GT(r->timing.compute_infer_ns, 0u);
    sum.queue_ns += r->timing.queue_ns;
    sum.compute_input_ns += r->timing.compute_input_ns;
    sum.compute_infer_ns += r->timing.compute_infer_ns;
    sum.compute_output_ns += r->timing.compute_output_ns;
  }
  auto bad = std::make_unique<InferRequest>();
  bad->inputs.push_back(FloatInput("A", {1, 3}, {1, 2, 3}));
  EXPECT_FALSE(InferSync(*model, std::move(bad)).ok());
  const ModelStatistics s = model->Statistics();
  EXPECT_EQ(s.inference.success.count, 3u);
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kInvalid)], 1u);
  EXPECT_EQ(s.inference_count, 4u);
  EXPECT_EQ(s.execution_count, 3u);
  EXPECT_EQ(s.request_seconds.count, 3u);
  EXPECT_EQ(s.batch_size.count, 3u);
  EXPECT_DOUBLE_EQ(s.batch_size.sum, 4);
  EXPECT_EQ(s.inference.queue.count, 3u);
  EXPECT_EQ(s.inference.compute_input.count, 3u);
  EXPECT_EQ(s.inference.compute_output.count, 3u);
  ASSERT_EQ(s.batches.size(), 2u);
  EXPECT_EQ(s.batches.at(1).compute_infer.count, 2u);
  EXPECT_EQ(s.batches.at(2).compute_infer.count, 1u);
  EXPECT_GT(s.last_inference_ms, 0u);
  // The responses carried exactly the times the statistics recorded.
  EXPECT_EQ(sum.queue_ns, s.inference.queue.ns);
  EXPECT_EQ(sum.compute_input_ns, s.inference.compute_input.ns);
  EXPECT_EQ(sum.compute_infer_ns, s.inference.compute_infer.ns);
  EXPECT_EQ(sum.compute_output_ns, s.inference.compute_output.ns);
}

TEST(LoadedModel, InstanceCountWithinTheThreadBudget) {
  const std::string config = std::string(kPairConfig) + " instance_group { count: 4 }";
  InstanceOptions budget;
  budget.cpu_threads = 2;
  EXPECT_EQ(MakePassthroughModel(config, PairGraph(), 1, budget)->instance_count(), 2);
  budget.intra_op_threads = 2;
  EXPECT_EQ(MakePassthroughModel(config, PairGraph(), 1, budget)->instance_count(), 1);
  InstanceOptions all;
  all.oversubscribe = true;
  EXPECT_EQ(MakePassthroughModel(config, PairGraph(), 1, all)->instance_count(), 4);
  // The manager's default count fills groups that leave count unset.
  EXPECT_EQ(MakePassthroughModel(kPairConfig, PairGraph(), 3)->instance_count(), 3);
}

// OpenMP's thread count on the instance thread that answers one request of the pair model (the
// width its session ran with).
int OmpThreadsOfOneRequest(LoadedModel& model) {
  std::promise<int> threads;
  auto request = std::make_unique<InferRequest>();
  request->inputs.push_back(FloatInput("A", {1, 4}, {1, 2, 3, 4}));
  request->inputs.push_back(FloatInput("B", {1, 1}, {5}));
  model.Infer(std::move(request), [&](const Result<InferResponse>& r) {
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    threads.set_value(omp_get_max_threads());
  });
  return threads.get_future().get();
}

// The instances split the budget: 2 instances in 6 threads run their sessions 3-wide (OpenMP's
// thread count on the instance thread, which also answers the request).
TEST(LoadedModel, InstancesSplitTheThreadBudget) {
  const std::string config = std::string(kPairConfig) + " instance_group { count: 2 }";
  InstanceOptions budget;
  budget.cpu_threads = 6;
  auto model = MakePassthroughModel(config, PairGraph(), 1, budget);
  EXPECT_EQ(model->instance_count(), 2);
  EXPECT_EQ(OmpThreadsOfOneRequest(*model), 3);
}

// A model's own kiln.intra_op_threads (or ONNX Runtime's intra_op_thread_count) replaces the
// server-wide width for its instances: 2-wide in a budget of 6 leaves room for 3 of 4 instances,
// and each run is 2-wide.
TEST(LoadedModel, ModelIntraOpThreadsParameter) {
  for (const char* key : {"kiln.intra_op_threads", "intra_op_thread_count"}) {
    const std::string config = std::string(kPairConfig) +
                               " instance_group { count: 4 } parameters { key: \"" + key +
                               "\" value: { string_value: \"2\" } }";
    InstanceOptions budget;
    budget.cpu_threads = 6;
    budget.intra_op_threads = 1;  // the server-wide setting the model overrides
    auto model = MakePassthroughModel(config, PairGraph(), 1, budget);
    EXPECT_EQ(model->instance_count(), 3) << key;
    EXPECT_EQ(OmpThreadsOfOneRequest(*model), 2) << key;
  }
}

TEST(LoadedModel, CreateRefusesGpuInstancesAndBadSchedulingConfigs) {
  const auto create = [](const std::string& extra) {
    inference::ModelConfig config = ParseConfigOrDie(std::string(kPairConfig) + extra);
    EXPECT_TRUE(NormalizeModelConfig(&config).ok());
    return LoadedModelImpl::Create(1, config, PairGraph());
  };
  Result<std::shared_ptr<LoadedModelImpl>> gpu =
      create(" instance_group { name: \"g\" kind: KIND_GPU }");
  EXPECT_EQ(gpu.status().code(), StatusCode::kInvalidArgument);
  // No GPU is registered in this test: the load says so and names what to use instead.
  EXPECT_THAT(gpu.status().message(),
              HasSubstr("model 'pair': instance_group 'g' asks for KIND_GPU, but this kiln has no "
                        "GPU (no cuda device is registered in this process); use KIND_CPU"));
  Result<std::shared_ptr<LoadedModelImpl>> levels =
      create(" dynamic_batching { priority_levels: 2 default_priority_level: 3 }");
  EXPECT_EQ(levels.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(levels.status().message(),
              HasSubstr("model 'pair': dynamic_batching.default_priority_level must be in 1..2"));
  Result<std::shared_ptr<LoadedModelImpl>> padding = create(
      " input { name: \"C\" data_type: TYPE_FP32 dims: [ 3 ] "
      "padding { dims: [0] buckets: [4] } }");
  EXPECT_THAT(padding.status().message(), HasSubstr("input 'C': padding dim 0 is not variable"));
  EXPECT_TRUE(
      create(" instance_group { kind: KIND_AUTO } instance_group { kind: KIND_MODEL }").ok());
}

TEST(LoadedModel, QueueFullAndTimeoutsReachTheCaller) {
  FakeClock clock;
  InstanceOptions options;
  options.clock = &clock;
  auto model = MakePassthroughModel(std::string(kPairConfig) + R"cfg(
    dynamic_batching { default_queue_policy { max_queue_size: 1 allow_timeout_override: true } })cfg",
                                    PairGraph(), 1, options);
  const auto make_request = [](uint64_t timeout_us) {
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back(FloatInput("A", {1, 4}, {1, 2, 3, 4}));
    request->inputs.push_back(FloatInput("B", {1, 1}, {5}));
    request->timeout_us = timeout_us;
    return request;
  };
  // The first callback blocks the only instance.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> first_running;
  model->Infer(make_request(0), [&](const Result<InferResponse>& r) {
    EXPECT_TRUE(r.ok());
    first_running.set_value();
    released.wait();
  });
  first_running.get_future().wait();
  std::promise<Result<InferResponse>> timed;
  model->Infer(make_request(300), [&](Result<InferResponse> r) { timed.set_value(std::move(r)); });
  Status full;
  bool answered = false;
  model->Infer(make_request(0), [&](const Result<InferResponse>& r) {
    answered = true;
    full = r.status();
  });
  EXPECT_TRUE(answered);  // refused on the caller's thread
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "model 'pair' version 3: the queue of priority level 1 is full (1 requests, "
            "max_queue_size 1)");
  clock.Advance(300'000);
  Result<InferResponse> t = timed.get_future().get();  // while the instance is still blocked
  EXPECT_EQ(t.status().code(), StatusCode::kDeadlineExceeded);
  release.set_value();
  model->Shutdown();
  const ModelStatistics s = model->Statistics();
  EXPECT_EQ(s.inference.success.count, 1u);
  EXPECT_EQ(s.inference.fail.count, 2u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kQueueFull)], 1u);
  EXPECT_EQ(s.failures[static_cast<size_t>(FailureReason::kTimeout)], 1u);
}

TEST(LoadedModel, WeightBytesSumTheInitializers) {
  std::shared_ptr<Graph> graph = PairGraph();
  EXPECT_EQ(GraphWeightBytes(*graph), 0u);
  for (int64_t n : {3, 5}) {
    Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, Shape{2, n});
    ASSERT_TRUE(t.ok());
    Value v;
    v.name = "w" + std::to_string(n);
    v.constant = std::make_shared<const OwnedTensor>(std::move(t).value());
    graph->AddValue(std::move(v));
  }
  EXPECT_EQ(GraphWeightBytes(*graph), (6u + 10u) * sizeof(float));
  auto model = MakePassthroughModel(kPairConfig, graph, 1);
  EXPECT_EQ(model->WeightBytes(), 16 * sizeof(float));
  EXPECT_EQ(model->LoadDurationSeconds(), 0);
  model->SetLoadDuration(1'500'000'000);
  EXPECT_DOUBLE_EQ(model->LoadDurationSeconds(), 1.5);
}

TEST(LoadedModel, EnqueueRefusalsMapToFailureReasons) {
  EXPECT_EQ(EnqueueFailureReason(Status::ResourceExhausted("full")), FailureReason::kQueueFull);
  EXPECT_EQ(EnqueueFailureReason(Status::Unavailable("stopping")), FailureReason::kShuttingDown);
  EXPECT_EQ(EnqueueFailureReason(Status::InvalidArgument("priority")), FailureReason::kInvalid);
  EXPECT_EQ(EnqueueFailureReason(Status::Internal("x")), FailureReason::kOther);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// X -> Relu -> t -> Identity -> Y: the optimizer's identity_elimination removes the Identity.
std::shared_ptr<Graph> ReluIdentityGraph() {
  auto g = std::make_shared<Graph>();
  g->name = "relu_identity";
  g->opset_imports[""] = 13;
  const auto value = [&](const char* name) {
    Value v;
    v.name = name;
    v.type.dtype = DataType::kFloat32;
    v.type.has_shape = true;
    v.type.dims = {Sym("batch"), D(4)};
    return g->AddValue(std::move(v));
  };
  const int x = value("X");
  const int t = value("t");
  const int y = value("Y");
  g->inputs.push_back(x);
  g->outputs.push_back(y);
  Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {x};
  relu.outputs = {t};
  g->AddNode(std::move(relu));
  Node identity;
  identity.name = "identity";
  identity.op_type = "Identity";
  identity.inputs = {t};
  identity.outputs = {y};
  g->AddNode(std::move(identity));
  return g;
}

Result<std::shared_ptr<LoadedModelImpl>> LoadReluIdentity(const std::string& extra) {
  inference::ModelConfig config = ParseConfigOrDie(
      "name: \"relu\" max_batch_size: 4 "
      "input [ { name: \"X\" data_type: TYPE_FP32 dims: [ 4 ] } ] "
      "output [ { name: \"Y\" data_type: TYPE_FP32 dims: [ 4 ] } ] " +
      extra);
  EXPECT_TRUE(NormalizeModelConfig(&config, 1).ok());
  InstanceOptions options;
  options.oversubscribe = true;
  return LoadedModelImpl::Create(1, config, ReluIdentityGraph(), options);
}

TEST(LoadedModel, ConfigTurnsTheGraphOptimizerOffOrDisablesPasses) {
  struct Case {
    std::string extra;
    int nodes;  // in the graph the instances run
  };
  const Case cases[] = {
      {"", 1},
      {"optimization { graph { level: 1 } }", 1},
      {"optimization { graph { level: -1 } }", 2},
      {"parameters { key: \"kiln.disabled_passes\" value: { string_value: "
       "\"constant_folding, identity_elimination\" } }",
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra);
    Result<std::shared_ptr<LoadedModelImpl>> model = LoadReluIdentity(c.extra);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    EXPECT_EQ((*model)->graph().num_nodes(), c.nodes);
    // Either way the model computes Relu.
    auto request = std::make_unique<InferRequest>();
    request->inputs.push_back(FloatInput("X", {1, 4}, {-1, 2, -3, 4}));
    Result<InferResponse> r = InferSync(**model, std::move(request));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(FloatValues(r->outputs[0].tensor), (std::vector<float>{0, 2, 0, 4}));
  }
}

TEST(LoadedModel, BadGraphOptimizationConfigFailsTheLoadNamingIt) {
  Result<std::shared_ptr<LoadedModelImpl>> model =
      LoadReluIdentity("optimization { graph { level: 3 } }");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("optimization.graph.level"));
  EXPECT_THAT(model.status().message(), HasSubstr("got 3"));

  model = LoadReluIdentity(
      "parameters { key: \"kiln.disabled_passes\" value: { string_value: \"no_such_pass\" } }");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("kiln.disabled_passes"));
  EXPECT_THAT(model.status().message(), HasSubstr("no_such_pass"));

  model = LoadReluIdentity(
      "parameters { key: \"kiln.disabled_passes\" value: { string_value: \"a,,b\" } }");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("empty pass name"));
}

// --- Response cache (repo/response_cache.h) ---

std::unique_ptr<InferRequest> PairRequest(std::string id, float a, std::vector<float> b,
                                          std::vector<std::string> outputs = {}) {
  auto request = Request({FloatInput("A", {1, 4}, {a, a + 1, a + 2, a + 3}),
                          FloatInput("B", {1, static_cast<int64_t>(b.size())}, b)},
                         std::move(outputs));
  request->id = std::move(id);
  return request;
}

bool SameBits(const OwnedTensor& x, const OwnedTensor& y) {
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.size_bytes()) == 0;
}

TEST(LoadedModelCache, RepeatedRequestIsAHitOnTheCallerThreadBitIdentical) {
  auto cache = std::make_shared<ResponseCache>(ResponseCacheOptions{1 << 20, std::nullopt});
  InstanceOptions options;
  options.response_cache = cache;
  auto model = MakePassthroughModel(std::string(kPairConfig) + " response_cache { enable: true }",
                                    PairGraph(), 1, options);
  EXPECT_EQ(model->response_cache(), cache);

  Result<InferResponse> miss = InferSync(*model, PairRequest("first", 1, {5, 6}));
  ASSERT_TRUE(miss.ok()) << miss.status().ToString();
  EXPECT_EQ(cache->Stats().entries, 1u);

  // The same request (another id): answered before Infer returns, on this thread.
  std::optional<Result<InferResponse>> hit;
  const std::thread::id caller = std::this_thread::get_id();
  model->Infer(PairRequest("second", 1, {5, 6}), [&](Result<InferResponse> r) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    hit = std::move(r);
  });
  ASSERT_TRUE(hit.has_value()) << "a hit is answered at once";
  ASSERT_TRUE(hit->ok()) << hit->status().ToString();
  EXPECT_EQ((*hit)->id, "second");
  // The miss ran; the hit reports its own times (it waited and ran nothing), not the miss's.
  EXPECT_GT(miss->timing.compute_infer_ns, 0u);
  EXPECT_EQ((*hit)->timing.queue_ns, 0u);
  EXPECT_EQ((*hit)->timing.compute_input_ns, 0u);
  EXPECT_EQ((*hit)->timing.compute_infer_ns, 0u);
  EXPECT_EQ((*hit)->timing.compute_output_ns, 0u);
  EXPECT_EQ((*hit)->model_name, "pair");
  EXPECT_EQ((*hit)->model_version, 3);
  ASSERT_EQ((*hit)->outputs.size(), miss->outputs.size());
  for (size_t i = 0; i < miss->outputs.size(); ++i) {
    EXPECT_EQ((*hit)->outputs[i].name, miss->outputs[i].name);
    EXPECT_TRUE(SameBits((*hit)->outputs[i].tensor, miss->outputs[i].tensor)) << i;
    EXPECT_EQ((*hit)->outputs[i].tensor.raw_data(), miss->outputs[i].tensor.raw_data());
  }

  // Other inputs, or other requested outputs: misses that run.
  Result<InferResponse> other = InferSync(*model, PairRequest("third", 2, {5, 6}));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(FloatValues(other->outputs[1].tensor), (std::vector<float>{2, 3, 4, 5}));
  Result<InferResponse> only_a = InferSync(*model, PairRequest("fourth", 1, {5, 6}, {"A"}));
  ASSERT_TRUE(only_a.ok());
  ASSERT_EQ(only_a->outputs.size(), 1u);
  EXPECT_EQ(only_a->outputs[0].name, "A");
  Result<InferResponse> only_a_again = InferSync(*model, PairRequest("fifth", 1, {5, 6}, {"A"}));
  ASSERT_TRUE(only_a_again.ok());
  ASSERT_EQ(only_a_again->outputs.size(), 1u);
  EXPECT_TRUE(SameBits(only_a_again->outputs[0].tensor, only_a->outputs[0].tensor));

  const ModelStatistics s = model->Statistics();
  EXPECT_TRUE(s.response_cache);
  EXPECT_EQ(s.inference.success.count, 5u);
  EXPECT_EQ(s.inference.cache_hit.count, 2u);
  EXPECT_EQ(s.inference.cache_miss.count, 3u);
  EXPECT_EQ(s.inference.queue.count, 5u);
  EXPECT_EQ(s.inference.compute_infer.count, 3u);  // success - cache_hit
  EXPECT_EQ(s.inference.compute_input.count, 3u);
  EXPECT_EQ(s.inference.compute_output.count, 3u);
  EXPECT_EQ(s.execution_count, 3u);
  EXPECT_EQ(s.inference_count, 3u);
  EXPECT_EQ(s.request_seconds.count, 5u);
  const ResponseCacheStats c = cache->Stats();
  EXPECT_EQ(c.entries, 3u);
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.misses, 3u);
}

TEST(LoadedModelCache, FailedRequestsAreNotCached) {
  // The config accepts any length for B; the graph insists on 2: the run fails.
  auto graph = PassthroughGraph({{"A", DataType::kFloat32, {Sym("batch"), D(4)}},
                                 {"B", DataType::kFloat32, {Sym("batch"), D(2)}}});
  auto cache = std::make_shared<ResponseCache>(ResponseCacheOptions{1 << 20, std::nullopt});
  InstanceOptions options;
  options.response_cache = cache;
  auto model = MakePassthroughModel(std::string(kPairConfig) + " response_cache { enable: true }",
                                    graph, 1, options);
  for (int i = 0; i < 2; ++i) {
    Result<InferResponse> r = InferSync(*model, PairRequest("bad", 1, {1, 2, 3}));
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << i;
  }
  // Refused by validation: never looked up.
  auto invalid = Request({FloatInput("A", {1, 3}, {1, 2, 3})});
  EXPECT_FALSE(InferSync(*model, std::move(invalid)).ok());
  ModelStatistics s = model->Statistics();
  EXPECT_EQ(s.inference.fail.count, 3u);
  EXPECT_EQ(s.inference.cache_hit.count, 0u);
  EXPECT_EQ(s.inference.cache_miss.count, 0u);
  ResponseCacheStats c = cache->Stats();
  EXPECT_EQ(c.entries, 0u);
  EXPECT_EQ(c.lookups, 2u);
  EXPECT_EQ(c.hits, 0u);

  // A good request is cached; after Shutdown the same request is refused, not answered.
  ASSERT_TRUE(InferSync(*model, PairRequest("good", 1, {1, 2})).ok());
  ASSERT_TRUE(InferSync(*model, PairRequest("good", 1, {1, 2})).ok());
  EXPECT_EQ(model->Statistics().inference.cache_hit.count, 1u);
  model->Shutdown();
  Result<InferResponse> after = InferSync(*model, PairRequest("good", 1, {1, 2}));
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(model->Statistics().inference.cache_hit.count, 1u);
}

TEST(LoadedModelCache, CachedOnlyWhenTheConfigAndTheServerBothEnableIt) {
  auto cache = std::make_shared<ResponseCache>(ResponseCacheOptions{1 << 20, std::nullopt});
  // The server has a cache, the config does not enable it.
  InstanceOptions with_cache;
  with_cache.response_cache = cache;
  auto plain = MakePassthroughModel(kPairConfig, PairGraph(), 1, with_cache);
  EXPECT_EQ(plain->response_cache(), nullptr);
  // The config enables it, the server has none: loads (with a warning) and runs every request.
  auto no_server_cache = MakePassthroughModel(
      std::string(kPairConfig) + " response_cache { enable: true }", PairGraph(), 1);
  EXPECT_EQ(no_server_cache->response_cache(), nullptr);
  for (LoadedModelImpl* m : {plain.get(), no_server_cache.get()}) {
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(InferSync(*m, PairRequest("x", 1, {5, 6})).ok());
    const ModelStatistics s = m->Statistics();
    EXPECT_FALSE(s.response_cache);
    EXPECT_EQ(s.execution_count, 2u);
    EXPECT_EQ(s.inference.cache_hit.count, 0u);
    EXPECT_EQ(s.inference.cache_miss.count, 0u);
  }
  EXPECT_EQ(cache->Stats().lookups, 0u);
}

// Two models, and two loads of one version, share the server's cache without mixing answers.
TEST(LoadedModelCache, ModelsShareTheCacheWithoutMixingAnswers) {
  auto cache = std::make_shared<ResponseCache>(ResponseCacheOptions{1 << 20, std::nullopt});
  InstanceOptions options;
  options.response_cache = cache;
  options.oversubscribe = true;
  const std::string config = std::string(kPairConfig) + " response_cache { enable: true }";
  auto pair = MakePassthroughModel(config, PairGraph(), 1, options);
  inference::ModelConfig renamed = ParseConfigOrDie(config);
  renamed.set_name("pair2");
  ASSERT_TRUE(NormalizeModelConfig(&renamed, 1).ok());
  Result<std::shared_ptr<LoadedModelImpl>> pair2 =
      LoadedModelImpl::Create(3, renamed, PairGraph(), options);
  ASSERT_TRUE(pair2.ok()) << pair2.status().ToString();
  ASSERT_TRUE(InferSync(*pair, PairRequest("x", 1, {5, 6})).ok());
  ASSERT_TRUE(InferSync(**pair2, PairRequest("x", 1, {5, 6})).ok());
  EXPECT_EQ(pair->Statistics().inference.cache_miss.count, 1u);
  EXPECT_EQ((*pair2)->Statistics().inference.cache_miss.count, 1u) << "another model's entry";
  Result<InferResponse> again = InferSync(**pair2, PairRequest("x", 1, {5, 6}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->model_name, "pair2");
  EXPECT_EQ((*pair2)->Statistics().inference.cache_hit.count, 1u);
  EXPECT_EQ(cache->Stats().entries, 2u);
  // A reload of the same name and version (its files may have changed): keyed on its own.
  auto reloaded = MakePassthroughModel(config, PairGraph(), 1, options);
  ASSERT_TRUE(InferSync(*reloaded, PairRequest("x", 1, {5, 6})).ok());
  EXPECT_EQ(reloaded->Statistics().inference.cache_miss.count, 1u);
  EXPECT_EQ(reloaded->Statistics().inference.cache_hit.count, 0u);
  EXPECT_EQ(cache->Stats().entries, 3u);
}

// Many clients repeating a few requests: every answer is right, and hits + misses = successes.
TEST(LoadedModelCache, ConcurrentClientsGetTheirOwnAnswers) {
  auto cache = std::make_shared<ResponseCache>(ResponseCacheOptions{1 << 20, std::nullopt});
  InstanceOptions options;
  options.response_cache = cache;
  auto model = MakePassthroughModel(std::string(kPairConfig) + " response_cache { enable: true }",
                                    PairGraph(), 2, options);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const float x = static_cast<float>((t + i) % 8);
        Result<InferResponse> r =
            InferSync(*model, PairRequest(std::to_string(i), x, {-x}, {"B", "A"}));
        if (r.ok() && r->id == std::to_string(i) &&
            FloatValues(r->outputs[0].tensor) == std::vector<float>{-x} &&
            FloatValues(r->outputs[1].tensor) == std::vector<float>{x, x + 1, x + 2, x + 3}) {
          ++ok;
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  const ModelStatistics s = model->Statistics();
  EXPECT_EQ(s.inference.success.count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(s.inference.cache_hit.count + s.inference.cache_miss.count, s.inference.success.count);
  EXPECT_GE(s.inference.cache_hit.count,
            static_cast<uint64_t>(kThreads * kPerThread - 8 * kThreads));
  EXPECT_EQ(cache->Stats().entries, 8u);
}

}  // namespace
}  // namespace kiln
