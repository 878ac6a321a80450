// SPDX-License-Identifier: Apache-2.0
// Batching end to end with the reference kernels: a batched run gives every request bitwise the
// outputs of running it alone (the demo models add_sub and digits, and a model with a variable
// dim padded to buckets); a batch that runs out of memory is split until only the requests that
// cannot run alone fail; one request's bad data fails that request only; ragged inputs reach the
// model concatenated; the statistics count executions and batch sizes.
//
// Batches are formed deterministically: the models' dynamic_batching waits a long (fake-clock)
// max_queue_delay for a preferred batch size, so a batch runs exactly when the test has queued
// its members.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <sstream>

#include "kernels/registry.h"
#include "repo/loaded_model.h"
#include "repo/model_config.h"
#include "repo/model_manager.h"
#include "repo/repo_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using ::kiln::testing::D;
using ::kiln::testing::FloatInput;
using ::kiln::testing::FloatValues;
using ::kiln::testing::ParseConfigOrDie;
using ::kiln::testing::Sym;
using ::kiln::testing::TempDir;
using ::kiln::testing::WriteFile;
using ::testing::HasSubstr;

const fs::path kDemo = KILN_DEMO_MODELS_DIR;
constexpr auto kWait = std::chrono::seconds(60);
// A max_queue_delay the fake clock never reaches: only preferred sizes (or shutdown) run batches.
constexpr std::string_view kWaitForEight =
    "dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 3600000000 }\n";

bool HaveKernels() {
  const auto defs = KernelRegistry::Global().defs();
  for (std::string_view op :
       {"Add", "Sub", "Gemm", "Relu", "Softmax", "MatMul", "Gather", "ReduceSum", "Mul"}) {
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

// Calls Infer and collects the results; Wait blocks until every callback ran.
class Pending {
 public:
  void Infer(LoadedModel& model, std::unique_ptr<InferRequest> request) {
    auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
    futures_.push_back(promise->get_future());
    model.Infer(std::move(request),
                [promise](Result<InferResponse> r) { promise->set_value(std::move(r)); });
  }
  std::vector<Result<InferResponse>> Wait() {
    std::vector<Result<InferResponse>> out;
    for (auto& f : futures_) {
      if (f.wait_for(kWait) != std::future_status::ready) {
        ADD_FAILURE() << "a request was not answered";
        out.emplace_back(Status::DeadlineExceeded("not answered"));
        continue;
      }
      out.push_back(f.get());
    }
    futures_.clear();
    return out;
  }

 private:
  std::vector<std::future<Result<InferResponse>>> futures_;
};

Result<InferResponse> InferAlone(LoadedModel& model, std::unique_ptr<InferRequest> request) {
  Pending p;
  p.Infer(model, std::move(request));
  return std::move(p.Wait()[0]);
}

std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Same names, dtypes, shapes and bytes.
void ExpectBitwiseEqual(const InferResponse& a, const InferResponse& b) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    SCOPED_TRACE(a.outputs[i].name);
    EXPECT_EQ(a.outputs[i].name, b.outputs[i].name);
    const OwnedTensor& x = a.outputs[i].tensor;
    const OwnedTensor& y = b.outputs[i].tensor;
    ASSERT_EQ(x.dtype(), y.dtype());
    ASSERT_EQ(x.shape(), y.shape());
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.size_bytes()), 0);
  }
}

// Builds small graphs that run on the reference kernels.
class GraphBuilder {
 public:
  GraphBuilder() {
    graph_ = std::make_shared<Graph>();
    graph_->name = "built";
    graph_->opset_imports[""] = 13;
  }
  int Input(std::string name, DataType dtype, std::vector<Dim> dims) {
    const int id = Add(std::move(name), dtype, std::move(dims));
    graph_->inputs.push_back(id);
    return id;
  }
  int Constant(std::string name, OwnedTensor t) {
    Value v;
    v.name = std::move(name);
    v.type.dtype = t.dtype();
    v.type.has_shape = true;
    for (int64_t d : t.shape().dims()) v.type.dims.push_back(D(d));
    v.constant = std::make_shared<const OwnedTensor>(std::move(t));
    return graph_->AddValue(std::move(v));
  }
  int Op(std::string op, std::vector<int> inputs, const std::string& out, DataType dtype,
         std::vector<Attribute> attributes = {}) {
    const int id = Add(out, dtype, {});
    graph_->mutable_value(id).type.has_shape = false;
    Node n;
    n.name = out;
    n.op_type = std::move(op);
    n.inputs = std::move(inputs);
    n.outputs = {id};
    n.attributes = std::move(attributes);
    graph_->AddNode(std::move(n));
    return id;
  }
  void Output(int id, std::vector<Dim> dims) {
    Value& v = graph_->mutable_value(id);
    v.type.has_shape = true;
    v.type.dims = std::move(dims);
    graph_->outputs.push_back(id);
  }
  std::shared_ptr<Graph> graph() const { return graph_; }

 private:
  int Add(std::string name, DataType dtype, std::vector<Dim> dims) {
    Value v;
    v.name = std::move(name);
    v.type.dtype = dtype;
    v.type.has_shape = true;
    v.type.dims = std::move(dims);
    return graph_->AddValue(std::move(v));
  }
  std::shared_ptr<Graph> graph_;
};

std::shared_ptr<LoadedModelImpl> MakeModel(std::string_view config_text,
                                           std::shared_ptr<const Graph> graph,
                                           const InstanceOptions& options) {
  inference::ModelConfig config = ParseConfigOrDie(config_text);
  EXPECT_TRUE(NormalizeModelConfig(&config).ok());
  Status s = ValidateModelConfig(config);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = ValidateConfigAgainstGraph(config, *graph);
  EXPECT_TRUE(s.ok()) << s.ToString();
  Result<std::shared_ptr<LoadedModelImpl>> model =
      LoadedModelImpl::Create(1, config, std::move(graph), options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? *model : nullptr;
}

// Fails every allocation larger than `limit_bytes`; otherwise host memory. Thread-safe.
class CappedAllocator final : public Allocator {
 public:
  explicit CappedAllocator(size_t limit_bytes) : limit_bytes_(limit_bytes) {}
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    if (bytes > limit_bytes_) {
      refused_.fetch_add(1);
      return Status::ResourceExhausted(
          fmt::format("test allocator: {} bytes is over the {}-byte cap", bytes, limit_bytes_));
    }
    return HostAllocator().Allocate(bytes, alignment);
  }
  void Free(void* ptr, size_t bytes) override { HostAllocator().Free(ptr, bytes); }
  Device device() const override { return Device::Cpu(); }
  int refused() const { return refused_.load(); }

 private:
  const size_t limit_bytes_;
  std::atomic<int> refused_{0};
};

class BatchingE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveKernels()) GTEST_SKIP() << "reference kernels missing";
    ASSERT_TRUE(fs::exists(kDemo / "add_sub" / "1" / "model.onnx"))
        << "build the demo_models target first";
  }

  // A repository with the demo models under other names and configs.
  void AddModel(const std::string& name, const std::string& demo, const std::string& config) {
    fs::create_directories(repo_.path() / name / "1");
    fs::copy_file(kDemo / demo / "1" / "model.onnx", repo_.path() / name / "1" / "model.onnx");
    WriteFile(repo_.path() / name / "config.pbtxt", config);
  }
  std::string AddSubConfig(const std::string& name, std::string_view extra) {
    std::string text = ReadText(kDemo / "add_sub" / "config.pbtxt");
    const std::string from = "name: \"add_sub\"";
    text.replace(text.find(from), from.size(), "name: \"" + name + "\"");
    return text + std::string(extra);
  }
  std::unique_ptr<ModelManager> Load(InstanceOptions options) {
    ModelManagerOptions o;
    o.repository_path = repo_.path().string();
    o.instance_options = options;
    Result<std::unique_ptr<ModelManager>> m = ModelManager::Create(o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    Status s = (*m)->LoadInitialModels();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::move(m).value();
  }
  std::shared_ptr<LoadedModel> Get(ModelManager& m, const std::string& name) {
    Result<std::shared_ptr<LoadedModel>> model = m.GetModel(name, -1);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    return model.ok() ? *model : nullptr;
  }

  TempDir repo_;
  FakeClock clock_;
};

std::unique_ptr<InferRequest> AddSubRequest(int64_t batch, std::mt19937& rng, std::string id) {
  auto r = std::make_unique<InferRequest>();
  r->id = std::move(id);
  r->inputs.push_back(FloatInput("INPUT0", {batch, 16}, RandomFloats(batch * 16, rng)));
  r->inputs.push_back(FloatInput("INPUT1", {batch, 16}, RandomFloats(batch * 16, rng)));
  return r;
}

std::unique_ptr<InferRequest> Copy(const InferRequest& r) {
  auto c = std::make_unique<InferRequest>();
  c->id = r.id;
  c->outputs = r.outputs;
  for (const InferInput& in : r.inputs) {
    c->inputs.push_back({in.name, OwnedTensor::CopyOf(in.tensor.view()).value()});
  }
  return c;
}

TEST_F(BatchingE2eTest, DemoModelsBatchedEqualAlone) {
  AddModel("add_sub", "add_sub", AddSubConfig("add_sub", kWaitForEight));
  AddModel("add_sub_alone", "add_sub", AddSubConfig("add_sub_alone", ""));
  AddModel("digits", "digits", "max_batch_size: 8\n" + std::string(kWaitForEight));
  AddModel("digits_alone", "digits", "max_batch_size: 8\n");
  InstanceOptions options;
  options.clock = &clock_;
  auto manager = Load(options);
  std::mt19937 rng(11);

  struct Pair {
    std::string batched, alone;
  };
  for (const Pair& names : {Pair{"add_sub", "add_sub_alone"}, Pair{"digits", "digits_alone"}}) {
    SCOPED_TRACE(names.batched);
    auto batched = Get(*manager, names.batched);
    auto alone = Get(*manager, names.alone);
    ASSERT_TRUE(batched && alone);
    std::vector<std::unique_ptr<InferRequest>> requests;
    int64_t rows = 0;
    for (int64_t b : {1, 2, 3, 2}) {  // 8 rows: one batch
      if (names.batched == "add_sub") {
        requests.push_back(AddSubRequest(b, rng, "r" + std::to_string(rows)));
      } else {
        auto r = std::make_unique<InferRequest>();
        std::uniform_real_distribution<float> pixel(0.f, 1.f);
        std::vector<float> v(static_cast<size_t>(b * 64));
        for (float& x : v) x = pixel(rng);
        r->inputs.push_back(FloatInput("pixels", {b, 64}, v));
        requests.push_back(std::move(r));
      }
      rows += b;
    }
    if (names.batched == "add_sub") requests[2]->outputs = {{"OUTPUT1"}};  // a subset, reordered
    Pending pending;
    for (const auto& r : requests) pending.Infer(*batched, Copy(*r));
    std::vector<Result<InferResponse>> got = pending.Wait();
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
      Result<InferResponse> want = InferAlone(*alone, Copy(*requests[i]));
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      EXPECT_EQ(got[i]->id, requests[i]->id);
      EXPECT_EQ(got[i]->model_name, names.batched);
      ExpectBitwiseEqual(*got[i], *want);
    }
    const ModelStatistics s = batched->Statistics();
    EXPECT_EQ(s.execution_count, 1u);
    EXPECT_EQ(s.inference_count, 8u);
    EXPECT_EQ(s.inference.success.count, 4u);
    ASSERT_EQ(s.batches.size(), 1u);
    EXPECT_EQ(s.batches.count(8), 1u);
    EXPECT_EQ(alone->Statistics().execution_count, 4u);
  }
  // add_sub's numbers, independently.
  auto model = Get(*manager, "add_sub_alone");
  auto r = AddSubRequest(2, rng, "x");
  const std::vector<float> a = FloatValues(r->inputs[0].tensor);
  const std::vector<float> b = FloatValues(r->inputs[1].tensor);
  Result<InferResponse> res = InferAlone(*model, std::move(r));
  ASSERT_TRUE(res.ok());
  const std::vector<float> sum = FloatValues(res->outputs[0].tensor);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(sum[i], a[i] + b[i]);
}

// y[b, n, 3] = Relu(x[b, n, 4] . W[4, 3]), n variable.
std::shared_ptr<Graph> SequenceGraph() {
  GraphBuilder g;
  const int x = g.Input("x", DataType::kFloat32, {Sym("batch"), Sym("n"), D(4)});
  OwnedTensor w = OwnedTensor::Allocate(DataType::kFloat32, Shape{4, 3}).value();
  for (int i = 0; i < 12; ++i) w.data<float>()[i] = 0.25f * static_cast<float>(i) - 1.3f;
  const int wid = g.Constant("w", std::move(w));
  const int h = g.Op("MatMul", {x, wid}, "h", DataType::kFloat32);
  const int y = g.Op("Relu", {h}, "y", DataType::kFloat32);
  g.Output(y, {Sym("batch"), Sym("n"), D(3)});
  return g.graph();
}

TEST_F(BatchingE2eTest, VariableDimPaddedToBucketsEqualsUnpaddedAlone) {
  const std::string io = R"cfg(
    name: "seq" max_batch_size: 8
    input { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] %PAD% }
    output { name: "y" data_type: TYPE_FP32 dims: [ -1, 3 ] %CROP% }
  )cfg";
  const auto config = [&](bool padded, bool batched) {
    std::string text = io;
    text.replace(text.find("%PAD%"), 5, padded ? "padding { dims: [ 0 ] buckets: [ 4, 8 ] }" : "");
    text.replace(text.find("%CROP%"), 6,
                 padded ? "crop { dims { dim: 0 input: \"x\" input_dim: 0 } }" : "");
    return batched ? text + std::string(kWaitForEight) : text;
  };
  InstanceOptions options;
  options.clock = &clock_;
  auto batched = MakeModel(config(true, true), SequenceGraph(), options);
  auto padded_alone = MakeModel(config(true, false), SequenceGraph(), options);
  auto plain_alone = MakeModel(config(false, false), SequenceGraph(), options);
  ASSERT_TRUE(batched && padded_alone && plain_alone);

  std::mt19937 rng(5);
  struct Sizes {
    int64_t batch, n;
  };
  // Lengths 1..4 share bucket 4 (8 rows: one batch); length 6 pads to 8 and runs on its own.
  const std::vector<Sizes> sizes = {{1, 3}, {2, 4}, {1, 6}, {1, 1}, {3, 2}, {1, 4}};
  std::vector<std::unique_ptr<InferRequest>> requests;
  for (const Sizes& s : sizes) {
    auto r = std::make_unique<InferRequest>();
    r->id = fmt::format("b{}n{}", s.batch, s.n);
    r->inputs.push_back(FloatInput("x", {s.batch, s.n, 4}, RandomFloats(s.batch * s.n * 4, rng)));
    requests.push_back(std::move(r));
  }
  Pending pending;
  for (const auto& r : requests) pending.Infer(*batched, Copy(*r));
  batched->Shutdown();  // flushes the length-6 request, which waits for a batch of 8
  std::vector<Result<InferResponse>> got = pending.Wait();

  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(requests[i]->id);
    ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
    ASSERT_EQ(got[i]->outputs.size(), 1u);
    EXPECT_EQ(got[i]->outputs[0].tensor.shape(), (Shape{sizes[i].batch, sizes[i].n, 3}));
    Result<InferResponse> padded = InferAlone(*padded_alone, Copy(*requests[i]));
    Result<InferResponse> plain = InferAlone(*plain_alone, Copy(*requests[i]));
    ASSERT_TRUE(padded.ok() && plain.ok());
    ExpectBitwiseEqual(*got[i], *padded);
    ExpectBitwiseEqual(*got[i], *plain);
    // And the numbers themselves.
    const std::vector<float> x = FloatValues(requests[i]->inputs[0].tensor);
    const std::vector<float> y = FloatValues(got[i]->outputs[0].tensor);
    for (size_t row = 0; row < y.size() / 3; ++row) {
      for (size_t j = 0; j < 3; ++j) {
        float acc = 0;
        for (size_t k = 0; k < 4; ++k) acc += x[row * 4 + k] * (0.25f * float(k * 3 + j) - 1.3f);
        EXPECT_NEAR(y[row * 3 + j], std::max(acc, 0.f), 1e-5) << row << "," << j;
      }
    }
  }
  const ModelStatistics s = batched->Statistics();
  EXPECT_EQ(s.execution_count, 2u);
  EXPECT_EQ(s.inference_count, 9u);
  ASSERT_EQ(s.batches.size(), 2u);
  EXPECT_EQ(s.batches.count(8), 1u);
  EXPECT_EQ(s.batches.count(1), 1u);
}

TEST_F(BatchingE2eTest, OutOfMemorySplitsTheBatchUntilOnlyOversizedRequestsFail) {
  AddModel("add_sub", "add_sub", AddSubConfig("add_sub", kWaitForEight));
  // 256 bytes: at most 4 rows of 16 floats per tensor.
  CappedAllocator allocator(256);
  InstanceOptions options;
  options.clock = &clock_;
  options.allocator = &allocator;
  auto manager = Load(options);
  auto model = Get(*manager, "add_sub");
  ASSERT_TRUE(model);
  std::mt19937 rng(3);

  const auto run = [&](const std::vector<int64_t>& batch_sizes) {
    std::vector<std::vector<float>> sums;
    Pending pending;
    for (int64_t b : batch_sizes) {
      auto r = AddSubRequest(b, rng, "b" + std::to_string(b));
      std::vector<float> s = FloatValues(r->inputs[0].tensor);
      const std::vector<float> y = FloatValues(r->inputs[1].tensor);
      for (size_t i = 0; i < s.size(); ++i) s[i] += y[i];
      sums.push_back(s);
      pending.Infer(*model, std::move(r));
    }
    std::vector<Result<InferResponse>> got = pending.Wait();
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].ok()) {
        EXPECT_EQ(FloatValues(got[i]->outputs[0].tensor), sums[i]) << i;
      }
    }
    return got;
  };

  // Eight rows do not fit; two halves of four do.
  std::vector<Result<InferResponse>> got = run({1, 1, 1, 1, 1, 1, 1, 1});
  for (const auto& r : got) EXPECT_TRUE(r.ok()) << r.status().ToString();
  ModelStatistics s = model->Statistics();
  EXPECT_EQ(s.execution_count, 2u);
  EXPECT_EQ(s.batches.count(4), 1u);
  EXPECT_EQ(s.batches.at(4).compute_infer.count, 2u);
  EXPECT_GT(allocator.refused(), 0);

  // 5 + 1 + 1 + 1: [5,1] is still too big, 5 alone too; the three single rows succeed.
  got = run({5, 1, 1, 1});
  EXPECT_EQ(got[0].status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(got[0].status().message(), HasSubstr("over the 256-byte cap"));
  for (size_t i = 1; i < got.size(); ++i) EXPECT_TRUE(got[i].ok()) << i;
  s = model->Statistics();
  EXPECT_EQ(s.execution_count, 4u);  // + [1] and [1, 1]
  EXPECT_EQ(s.batches.count(1), 1u);
  EXPECT_EQ(s.batches.count(2), 1u);
  EXPECT_EQ(s.inference.success.count, 11u);
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.inference_count, 11u);
}

TEST_F(BatchingE2eTest, BadDataFailsOnlyItsRequest) {
  // out[b, 1] = table[idx[b, 1]]: an index out of range is found only when the model runs.
  GraphBuilder g;
  OwnedTensor table = OwnedTensor::Allocate(DataType::kFloat32, Shape{10}).value();
  for (int i = 0; i < 10; ++i) table.data<float>()[i] = 1.5f * static_cast<float>(i);
  const int t = g.Constant("table", std::move(table));
  const int idx = g.Input("idx", DataType::kInt64, {Sym("batch"), D(1)});
  const int out = g.Op("Gather", {t, idx}, "out", DataType::kFloat32, {Attribute::Int("axis", 0)});
  g.Output(out, {Sym("batch"), D(1)});
  InstanceOptions options;
  options.clock = &clock_;
  auto model = MakeModel(R"cfg(
    name: "lookup" max_batch_size: 8
    input { name: "idx" data_type: TYPE_INT64 dims: [ 1 ] }
    output { name: "out" data_type: TYPE_FP32 dims: [ 1 ] }
    dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 3600000000 }
  )cfg",
                         g.graph(), options);
  ASSERT_TRUE(model);
  Pending pending;
  for (int64_t i : {2, 99, 5, 0}) {
    auto r = std::make_unique<InferRequest>();
    OwnedTensor v = OwnedTensor::Allocate(DataType::kInt64, Shape{1, 1}).value();
    v.data<int64_t>()[0] = i;
    r->inputs.push_back({"idx", std::move(v)});
    pending.Infer(*model, std::move(r));
  }
  std::vector<Result<InferResponse>> got = pending.Wait();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1].status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(got[1].status().message(), HasSubstr("Gather"));
  const float want[] = {3.0f, 0, 7.5f, 0.0f};
  for (size_t i : {0u, 2u, 3u}) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(FloatValues(got[i]->outputs[0].tensor), std::vector<float>{want[i]});
  }
  const ModelStatistics s = model->Statistics();
  EXPECT_EQ(s.inference.success.count, 3u);
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.execution_count, 3u);  // the failed batch of 4 is not an execution
  EXPECT_EQ(s.batches.count(1), 1u);
  EXPECT_EQ(s.batches.count(4), 0u);
}

TEST_F(BatchingE2eTest, RaggedInputsReachTheModelConcatenated) {
  // out[b, 1] = w[b, 1] * sum(x): the model sees every request's x as one flat tensor.
  GraphBuilder g;
  const int x = g.Input("x", DataType::kFloat32, {Sym("n")});
  const int w = g.Input("w", DataType::kFloat32, {Sym("batch"), D(1)});
  const int total =
      g.Op("ReduceSum", {x}, "total", DataType::kFloat32, {Attribute::Int("keepdims", 1)});
  const int out = g.Op("Mul", {w, total}, "out", DataType::kFloat32);
  g.Output(out, {Sym("batch"), D(1)});
  InstanceOptions options;
  options.clock = &clock_;
  const std::string io = R"cfg(
    name: "ragged" max_batch_size: 4
    input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true },
            { name: "w" data_type: TYPE_FP32 dims: [ 1 ] } ]
    output { name: "out" data_type: TYPE_FP32 dims: [ 1 ] }
  )cfg";
  auto batched =
      MakeModel(io + "dynamic_batching { preferred_batch_size: [ 2 ] max_queue_delay_microseconds: "
                     "3600000000 }",
                g.graph(), options);
  auto alone = MakeModel(io, g.graph(), options);
  ASSERT_TRUE(batched && alone);
  const auto request = [](std::vector<float> x, float w) {
    auto r = std::make_unique<InferRequest>();
    const int64_t n = static_cast<int64_t>(x.size());
    r->inputs.push_back(FloatInput("x", {1, n}, std::move(x)));
    r->inputs.push_back(FloatInput("w", {1, 1}, {w}));
    return r;
  };
  Pending pending;
  pending.Infer(*batched, request({1, 2}, 1));  // different lengths, one batch
  pending.Infer(*batched, request({3, 4, 5}, 2));
  std::vector<Result<InferResponse>> got = pending.Wait();
  ASSERT_TRUE(got[0].ok() && got[1].ok()) << got[0].status().ToString();
  EXPECT_EQ(FloatValues(got[0]->outputs[0].tensor), std::vector<float>{15});
  EXPECT_EQ(FloatValues(got[1]->outputs[0].tensor), std::vector<float>{30});
  EXPECT_EQ(batched->Statistics().batches.count(2), 1u);
  Result<InferResponse> one = InferAlone(*alone, request({3, 4, 5}, 2));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(FloatValues(one->outputs[0].tensor), std::vector<float>{24});
}

TEST_F(BatchingE2eTest, InstancesShareTheGraphAndAllRun) {
  AddModel("add_sub", "add_sub",
           AddSubConfig("add_sub", "") + "instance_group [ { kind: KIND_CPU count: 2 } ]\n");
  InstanceOptions options;
  options.oversubscribe = true;
  auto manager = Load(options);
  auto model = Get(*manager, "add_sub");
  ASSERT_TRUE(model);
  EXPECT_EQ(static_cast<LoadedModelImpl&>(*model).instance_count(), 3);  // two groups: 1 + 2
  std::mt19937 rng(9);
  Pending pending;
  for (int i = 0; i < 40; ++i) pending.Infer(*model, AddSubRequest(1, rng, std::to_string(i)));
  for (const auto& r : pending.Wait()) EXPECT_TRUE(r.ok());
  EXPECT_EQ(model->Statistics().inference.success.count, 40u);
}

}  // namespace
}  // namespace kiln
