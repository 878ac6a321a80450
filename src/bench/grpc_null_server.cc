// SPDX-License-Identifier: Apache-2.0
#include "bench/grpc_null_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "grpc_service.grpc.pb.h"

namespace kiln::bench {

namespace {

using Gen = inference::GRPCInferenceService;
using Service = Gen::WithAsyncMethod_ModelMetadata<
    Gen::WithAsyncMethod_ModelConfig<Gen::WithAsyncMethod_ModelInfer<Gen::Service>>>;

class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

// One unary call; `Fill` writes the fixed response. Each answered call re-arms its method.
template <typename Req, typename Resp>
class Call final : public Tag {
 public:
  using RequestFn = void (Service::*)(grpc::ServerContext*, Req*,
                                      grpc::ServerAsyncResponseWriter<Resp>*,
                                      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  using Fill = void (*)(const Req&, Resp*);

  static void Listen(Service* service, grpc::ServerCompletionQueue* cq, RequestFn request,
                     Fill fill, std::atomic<uint64_t>* counter) {
    auto* call = new Call(service, cq, request, fill, counter);
    (service->*request)(&call->ctx_, &call->request_, &call->responder_, cq, cq, call);
  }

  void Proceed(bool ok) override {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    Listen(service_, cq_, request_fn_, fill_, counter_);
    fill_(request_, &response_);
    if (counter_ != nullptr) counter_->fetch_add(1, std::memory_order_relaxed);
    finishing_ = true;
    responder_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  Call(Service* service, grpc::ServerCompletionQueue* cq, RequestFn request, Fill fill,
       std::atomic<uint64_t>* counter)
      : service_(service),
        cq_(cq),
        request_fn_(request),
        fill_(fill),
        counter_(counter),
        responder_(&ctx_) {}

  Service* service_;
  grpc::ServerCompletionQueue* cq_;
  RequestFn request_fn_;
  Fill fill_;
  std::atomic<uint64_t>* counter_;
  grpc::ServerContext ctx_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_;
  bool finishing_ = false;
};

constexpr const char* kNames[2][2] = {{"INPUT0", "INPUT1"}, {"OUTPUT0", "OUTPUT1"}};

void FillMetadata(const inference::ModelMetadataRequest& req,
                  inference::ModelMetadataResponse* resp) {
  resp->set_name(req.name());
  resp->add_versions("1");
  resp->set_platform("null");
  for (int io = 0; io < 2; ++io) {
    for (const char* name : kNames[io]) {
      auto* t = io == 0 ? resp->add_inputs() : resp->add_outputs();
      t->set_name(name);
      t->set_datatype("FP32");
      t->add_shape(-1);
      t->add_shape(16);
    }
  }
}

void FillConfig(const inference::ModelConfigRequest& req, inference::ModelConfigResponse* resp) {
  resp->mutable_config()->set_name(req.name());
  resp->mutable_config()->set_max_batch_size(8);
}

void FillInfer(const inference::ModelInferRequest& req, inference::ModelInferResponse* resp) {
  static const std::string zeros(16 * sizeof(float), '\0');
  resp->set_model_name(req.model_name());
  resp->set_model_version("1");
  resp->set_id(req.id());
  for (const char* name : kNames[1]) {
    auto* out = resp->add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    out->add_shape(1);
    out->add_shape(16);
    resp->add_raw_output_contents(zeros);
  }
}

}  // namespace

struct GrpcNullServer::Impl {
  Service service;
  std::unique_ptr<grpc::Server> server;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> requests{0};
  int port = 0;
  bool stopped = false;
};

GrpcNullServer::GrpcNullServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<GrpcNullServer>> GrpcNullServer::Start(int port, int threads) {
  auto impl = std::make_unique<Impl>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("127.0.0.1:{}", port), grpc::InsecureServerCredentials(),
                           &impl->port);
  builder.RegisterService(&impl->service);
  for (int i = 0; i < std::max(1, threads); ++i) impl->cqs.push_back(builder.AddCompletionQueue());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return Status::Unavailable(
        fmt::format("gRPC null server: cannot listen on 127.0.0.1:{}", port));
  }
  Impl* p = impl.get();
  for (auto& cq : p->cqs) {
    using MetaCall = Call<inference::ModelMetadataRequest, inference::ModelMetadataResponse>;
    using ConfigCall = Call<inference::ModelConfigRequest, inference::ModelConfigResponse>;
    using InferCall = Call<inference::ModelInferRequest, inference::ModelInferResponse>;
    MetaCall::Listen(&p->service, cq.get(), &Service::RequestModelMetadata, &FillMetadata, nullptr);
    ConfigCall::Listen(&p->service, cq.get(), &Service::RequestModelConfig, &FillConfig, nullptr);
    for (int i = 0; i < 8; ++i) {
      InferCall::Listen(&p->service, cq.get(), &Service::RequestModelInfer, &FillInfer,
                        &p->requests);
    }
    p->threads.emplace_back([q = cq.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (q->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
    });
  }
  return std::unique_ptr<GrpcNullServer>(new GrpcNullServer(std::move(impl)));
}

GrpcNullServer::~GrpcNullServer() { Stop(); }

int GrpcNullServer::port() const { return impl_->port; }

uint64_t GrpcNullServer::requests() const {
  return impl_->requests.load(std::memory_order_relaxed);
}

void GrpcNullServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now());
  for (auto& cq : impl_->cqs) cq->Shutdown();
  for (std::thread& t : impl_->threads) t.join();
}

}  // namespace kiln::bench
