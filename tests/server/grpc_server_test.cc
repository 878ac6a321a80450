// SPDX-License-Identifier: Apache-2.0
// In-process gRPC server test: a real GrpcServer on a free port, a fake ModelManager with fake
// models (one doubles its input at once, one answers from another thread after a delay, one
// fails, one drops its callback), and the generated synchronous client stub. Covers inference
// and its error codes, many concurrent clients, a stream with interleaved good and bad requests,
// a dropped callback, draining, and Stop() while an inference is in flight. The test to run
// under TSan for the server's threading.
#include "server/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "grpc_service.grpc.pb.h"
#include "queue_model.h"
#include "repo/model_manager.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

enum class Behavior { kDouble, kSlow, kFail, kDrop };

// OUTPUT = 2 * INPUT for one FP32 input.
Result<InferResponse> DoubleIt(const InferRequest& request) {
  if (request.inputs.size() != 1 || request.inputs[0].tensor.dtype() != DataType::kFloat32) {
    return Status::InvalidArgument("expected one FP32 input 'INPUT'");
  }
  const OwnedTensor& in = request.inputs[0].tensor;
  KILN_ASSIGN_OR_RETURN(OwnedTensor out, OwnedTensor::Allocate(DataType::kFloat32, in.shape()));
  for (int64_t i = 0; i < in.num_elements(); ++i) out.data<float>()[i] = 2 * in.data<float>()[i];
  InferResponse response;
  response.id = request.id;
  response.outputs.push_back({"OUTPUT", std::move(out)});
  return response;
}

class FakeModel : public LoadedModel {
 public:
  FakeModel(std::string name, Behavior behavior) : name_(std::move(name)), behavior_(behavior) {
    signature_.name = name_;
    signature_.platform = "onnxruntime_onnx";
    signature_.inputs = {{"INPUT", DataType::kFloat32, {-1}}};
    signature_.outputs = {{"OUTPUT", DataType::kFloat32, {-1}}};
  }
  ~FakeModel() override { Join(); }
  void Join() {
    std::vector<std::thread> threads;
    {
      MutexLock lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }
  const std::string& name() const override { return name_; }
  int64_t version() const override { return 1; }
  const ModelSignature& signature() const override { return signature_; }
  // A final response names the model, its version and the request (LoadedModel::Infer).
  Result<InferResponse> Named(Result<InferResponse> r, const InferRequest& request) const {
    if (r.ok()) {
      r->model_name = name_;
      r->model_version = 1;
      r->id = request.id;
    }
    return r;
  }
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    ++calls;
    switch (behavior_) {
      case Behavior::kDouble:
        sink->Finish(Named(DoubleIt(*request), *request));
        return;
      case Behavior::kFail:
        sink->Finish(Status::ResourceExhausted("queue of model 'fail' is full"));
        return;
      case Behavior::kDrop:
        return;
      case Behavior::kSlow: {
        MutexLock lock(mu_);
        threads_.emplace_back([request = std::shared_ptr<InferRequest>(std::move(request)),
                               sink = std::move(sink), this] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
          sink->Finish(Named(DoubleIt(*request), *request));
        });
        return;
      }
    }
  }
  std::atomic<int> calls{0};
  std::atomic<int> delay_ms{20};

 private:
  const std::string name_;
  const Behavior behavior_;
  ModelSignature signature_;
  Mutex mu_;
  std::vector<std::thread> threads_ KILN_GUARDED_BY(mu_);
};

ModelSignature QueueSignature() {
  ModelSignature sig;
  sig.name = "queue";
  sig.platform = "onnxruntime_onnx";
  sig.inputs = {{"INPUT", DataType::kFloat32, {-1}}};
  sig.outputs = {{"OUTPUT", DataType::kFloat32, {-1}}};
  return sig;
}

class FakeManager : public ModelManager {
 public:
  // A real scheduler behind a held executor (queue_model.h), served as "queue".
  std::shared_ptr<testing::QueueModel> queue =
      std::make_shared<testing::QueueModel>("queue", QueueSignature());
  FakeManager() {
    for (auto [name, b] : {std::pair{"double", Behavior::kDouble},
                           {"slow", Behavior::kSlow},
                           {"fail", Behavior::kFail},
                           {"drop", Behavior::kDrop}}) {
      models_[name] = std::make_shared<FakeModel>(name, b);
    }
  }
  FakeModel* Get(const std::string& name) { return models_.at(name).get(); }
  Status LoadInitialModels() override { return Status::OK(); }
  Result<std::shared_ptr<LoadedModel>> GetModel(std::string_view name,
                                                int64_t version) const override {
    if (name == "queue") return std::shared_ptr<LoadedModel>(queue);
    auto it = models_.find(std::string(name));
    if (it == models_.end() || (version != -1 && version != 1)) {
      return Status::NotFound("Request for unknown model: '" + std::string(name) +
                              "' is not found");
    }
    return std::shared_ptr<LoadedModel>(it->second);
  }
  std::vector<int64_t> ReadyVersions(std::string_view name) const override {
    return models_.count(std::string(name)) ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  }
  std::vector<ModelIndexEntry> Index() const override {
    std::vector<ModelIndexEntry> out;
    for (const auto& [name, m] : models_) out.push_back({name, 1, ModelState::kReady, ""});
    return out;
  }
  bool AllModelsReady() const override { return true; }
  void Shutdown() override {}
  Status LoadModel(std::string_view name, const ModelLoadOptions&) override {
    std::this_thread::sleep_for(50ms);  // a load takes a while: must not block a CQ thread
    return name == "double" ? Status::OK() : Status::InvalidArgument("no such model");
  }
  Status UnloadModel(std::string_view name, const ModelUnloadOptions& options) override {
    MutexLock lock(unloads_mu_);
    unloads_.push_back(std::string(name) + (options.unload_dependents ? " dependents" : ""));
    return Status::OK();
  }
  using ModelManager::UnloadModel;
  std::vector<std::string> Unloads() {
    MutexLock lock(unloads_mu_);
    return unloads_;
  }
  Status Poll() override { return Status::FailedPrecondition("not polling"); }

 private:
  std::map<std::string, std::shared_ptr<FakeModel>> models_;
  Mutex unloads_mu_;
  std::vector<std::string> unloads_ KILN_GUARDED_BY(unloads_mu_);
};

inference::ModelInferRequest Request(const std::string& model, std::vector<float> values,
                                     const std::string& id = "") {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id(id);
  auto* in = r.add_inputs();
  in->set_name("INPUT");
  in->set_datatype("FP32");
  in->add_shape(static_cast<int64_t>(values.size()));
  r.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return r;
}

std::vector<float> Floats(const std::string& raw) {
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
  return v;
}

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GrpcServerOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.server_version = "test";
    auto server = GrpcServer::Create(options, &manager_);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    return stub_->ModelInfer(&ctx, request, response);
  }

  FakeManager manager_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcServerTest, InferAndErrorCodes) {
  inference::ModelInferResponse response;
  grpc::Status s = Infer(Request("double", {1, 2, 3}, "x"), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.id(), "x");
  EXPECT_EQ(response.model_name(), "double");
  EXPECT_EQ(response.model_version(), "1");
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(Floats(response.raw_output_contents(0)), (std::vector<float>{2, 4, 6}));

  EXPECT_EQ(Infer(Request("nope", {1}), &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Infer(Request("fail", {1}), &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  auto bad = Request("double", {1, 2});
  bad.mutable_inputs(0)->set_datatype("FLOAT");
  s = Infer(bad, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("FLOAT"), std::string::npos) << s.error_message();
  s = Infer(Request("drop", {1}), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(s.error_message().find("dropped"), std::string::npos) << s.error_message();
  EXPECT_TRUE(Infer(Request("double", {1}), &response).ok());
  // The server counts an inference done when its completion event comes back, which may be just
  // after the client has the response.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server_->InferencesInFlight() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(server_->InferencesInFlight(), 0u);
}

// Typed contents only (no raw_input_contents), so the decoded request borrows nothing from the
// message, and requested outputs, which the server reads from the message after decoding: the
// message must live until then (under ASan a freed message fails this test).
TEST_F(GrpcServerTest, TypedContentsWithRequestedOutputs) {
  inference::ModelInferRequest request;
  request.set_model_name("double");
  request.set_id("typed");
  auto* in = request.add_inputs();
  in->set_name("INPUT");
  in->set_datatype("FP32");
  in->add_shape(3);
  for (float v : {1.f, 3.f, 2.f}) in->mutable_contents()->add_fp32_contents(v);
  request.add_outputs()->set_name("OUTPUT");

  inference::ModelInferResponse response;
  grpc::Status s = Infer(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.id(), "typed");
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(Floats(response.raw_output_contents(0)), (std::vector<float>{2, 6, 4}));

  // The same with the classification extension: the top two of {2, 6, 4} as BYTES elements
  // (4-byte little-endian length, then the text).
  (*request.mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(2);
  s = Infer(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).datatype(), "BYTES");
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  const std::string& raw = response.raw_output_contents(0);
  std::vector<std::string> classes;
  for (size_t at = 0; at + 4 <= raw.size();) {
    uint32_t n = 0;
    std::memcpy(&n, raw.data() + at, 4);
    classes.push_back(raw.substr(at + 4, n));
    at += 4 + n;
  }
  EXPECT_EQ(classes, (std::vector<std::string>{"6.000000:1", "4.000000:2"}));
}

TEST_F(GrpcServerTest, ConcurrentClients) {
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        inference::ModelInferResponse response;
        const float x = static_cast<float>(c * 100 + i);
        grpc::Status s = Infer(Request(i % 2 ? "slow" : "double", {x}), &response);
        if (s.ok() && response.raw_output_contents_size() == 1 &&
            Floats(response.raw_output_contents(0)) == std::vector<float>{2 * x}) {
          ++ok;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST_F(GrpcServerTest, StreamAnswersEveryRequestInBand) {
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  int sent_good = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string id = std::to_string(i);
    if (i % 3 == 0) {
      ASSERT_TRUE(stream->Write(Request("nope", {1}, id)));
    } else {
      ASSERT_TRUE(stream->Write(Request(i % 2 ? "slow" : "double", {float(i)}, id)));
      ++sent_good;
    }
  }
  stream->WritesDone();
  inference::ModelStreamInferResponse response;
  std::map<std::string, std::string> errors;
  int good = 0;
  while (stream->Read(&response)) {
    const std::string& id = response.infer_response().id();
    if (!response.error_message().empty()) {
      errors[id] = response.error_message();
    } else if (Floats(response.infer_response().raw_output_contents(0)) ==
               std::vector<float>{2 * std::stof(id)}) {
      ++good;
    }
    EXPECT_TRUE(response.infer_response().parameters().at("triton_final_response").bool_param());
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(good, sent_good);
  EXPECT_EQ(errors.size(), 4u);
  EXPECT_NE(errors["3"].find("nope"), std::string::npos) << errors["3"];
}

// A client that cancels its call: a queued request is dropped from the model's queue (never
// run), a running one has its cancellation set; the server goes on serving.
TEST_F(GrpcServerTest, CancelledCallsCancelTheirQueuedAndRunningRequests) {
  testing::QueueModel& m = *manager_.queue;
  m.executor().Hold(true);
  grpc::ClientContext running_ctx, queued_ctx;
  grpc::Status running_status, queued_status;
  std::thread running([&] {
    inference::ModelInferResponse r;
    running_status = stub_->ModelInfer(&running_ctx, Request("queue", {1, 2}), &r);
  });
  ASSERT_TRUE(m.executor().WaitStarted(1));
  std::thread queued([&] {
    inference::ModelInferResponse r;
    queued_status = stub_->ModelInfer(&queued_ctx, Request("queue", {3, 4}), &r);
  });
  for (int i = 0; i < 1000 && m.PendingRequestCount() == 0; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(m.PendingRequestCount(), 1u);
  queued_ctx.TryCancel();
  queued.join();
  EXPECT_EQ(queued_status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(m.WaitCanceled(1)) << "the queued request was not dropped";
  EXPECT_EQ(m.PendingRequestCount(), 0u);
  running_ctx.TryCancel();
  EXPECT_TRUE(m.executor().WaitRunningCancelled()) << "the running request was not cancelled";
  m.executor().Hold(false);
  running.join();
  EXPECT_EQ(running_status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(m.executor().started(), 1);
  inference::ModelInferResponse r;
  ASSERT_TRUE(Infer(Request("queue", {5}), &r).ok());
  EXPECT_EQ(Floats(r.raw_output_contents(0)), std::vector<float>{10});
}

// A cancelled stream cancels every request of it still queued or running.
TEST_F(GrpcServerTest, CancelledStreamCancelsItsRequests) {
  testing::QueueModel& m = *manager_.queue;
  m.executor().Hold(true);
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(Request("queue", {1}, "a")));
  ASSERT_TRUE(m.executor().WaitStarted(1));
  ASSERT_TRUE(stream->Write(Request("queue", {2}, "b")));
  for (int i = 0; i < 1000 && m.PendingRequestCount() == 0; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(m.PendingRequestCount(), 1u);
  ctx.TryCancel();
  EXPECT_TRUE(m.WaitCanceled(1)) << "the queued request of the stream was not dropped";
  EXPECT_TRUE(m.executor().WaitRunningCancelled()) << "the running request was not cancelled";
  m.executor().Hold(false);
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(m.executor().started(), 1);
}

TEST_F(GrpcServerTest, RepositoryLoadDoesNotBlockOtherCalls) {
  std::thread load([&] {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("double");
    inference::RepositoryModelLoadResponse resp;
    EXPECT_TRUE(stub_->RepositoryModelLoad(&ctx, req, &resp).ok());
  });
  grpc::ClientContext ctx;
  inference::RepositoryModelLoadRequest req;
  req.set_model_name("other");
  inference::RepositoryModelLoadResponse resp;
  EXPECT_EQ(stub_->RepositoryModelLoad(&ctx, req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  load.join();
}

TEST_F(GrpcServerTest, RepositoryUnloadPassesUnloadDependents) {
  const auto unload = [&](std::optional<inference::ModelRepositoryParameter> param) {
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest req;
    req.set_model_name("e");
    if (param) (*req.mutable_parameters())["unload_dependents"] = *param;
    inference::RepositoryModelUnloadResponse resp;
    return stub_->RepositoryModelUnload(&ctx, req, &resp);
  };
  inference::ModelRepositoryParameter yes;
  yes.set_bool_param(true);
  inference::ModelRepositoryParameter text;
  text.set_string_param("true");
  EXPECT_TRUE(unload(std::nullopt).ok());
  EXPECT_TRUE(unload(yes).ok());
  const grpc::Status bad = unload(text);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "unload parameter 'unload_dependents' must be a bool_param");
  EXPECT_EQ(manager_.Unloads(), (std::vector<std::string>{"e", "e dependents"}));
}

TEST_F(GrpcServerTest, DrainThenStopAnswersInFlight) {
  manager_.Get("slow")->delay_ms = 300;
  std::atomic<bool> answered{false};
  std::thread client([&] {
    inference::ModelInferResponse response;
    answered = Infer(Request("slow", {4}), &response).ok();
  });
  while (manager_.Get("slow")->calls.load() == 0) std::this_thread::sleep_for(1ms);
  server_->StartDraining();
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &ready).ok());
    EXPECT_FALSE(ready.ready());
  }
  inference::ModelInferResponse response;
  EXPECT_EQ(Infer(Request("double", {1}), &response).error_code(), grpc::StatusCode::UNAVAILABLE);
  server_->Stop();
  client.join();
  EXPECT_TRUE(answered.load());
  EXPECT_EQ(server_->InferencesInFlight(), 0u);
}

}  // namespace
}  // namespace kiln
