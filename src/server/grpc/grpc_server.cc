// SPDX-License-Identifier: Apache-2.0
// The gRPC front end over the async (completion queue) API; see grpc_server.h.
//
// Every call is an object whose address is the completion-queue tag of its next operation
// (streams use one small tag per kind of operation, since a read and a write may be pending
// together). A call object deletes itself when its last operation completes.
#include "server/grpc/grpc_server.h"

#include <fmt/format.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "grpc_service.grpc.pb.h"
#include "repo/model_config.pb.h"
#include "repo/model_manager.h"
#include "server/grpc/infer_grpc.h"
#include "server/inference.h"
#include "server/log_settings.h"
#include "server/security/access.h"
#include "server/security/api_groups.h"
#include "server/server_metadata.h"
#include "server/status_map.h"
#include "server/trace.h"

namespace kiln {
namespace {

// The generated AsyncService, except that ModelInfer and ModelStreamInfer are received as raw
// bytes: kiln parses them itself, so that a message that does not parse (malformed protobuf, a
// string field with invalid UTF-8) is answered INVALID_ARGUMENT naming the problem, where the
// generated method would answer INTERNAL before kiln sees the call.
using gen = inference::GRPCInferenceService;
using Service = gen::WithAsyncMethod_ServerLive<
    gen::WithAsyncMethod_ServerReady<gen::WithAsyncMethod_ModelReady<
        gen::WithAsyncMethod_ServerMetadata<gen::WithAsyncMethod_ModelMetadata<
            gen::WithRawMethod_ModelInfer<gen::WithRawMethod_ModelStreamInfer<
                gen::WithAsyncMethod_ModelConfig<gen::WithAsyncMethod_ModelStatistics<
                    gen::WithAsyncMethod_RepositoryIndex<gen::WithAsyncMethod_RepositoryModelLoad<
                        gen::WithAsyncMethod_RepositoryModelUnload<
                            gen::WithAsyncMethod_SystemSharedMemoryStatus<
                                gen::WithAsyncMethod_SystemSharedMemoryRegister<
                                    gen::WithAsyncMethod_SystemSharedMemoryUnregister<
                                        gen::WithAsyncMethod_CudaSharedMemoryStatus<
                                            gen::WithAsyncMethod_CudaSharedMemoryRegister<
                                                gen::WithAsyncMethod_CudaSharedMemoryUnregister<
                                                    gen::WithAsyncMethod_TraceSetting<
                                                        gen::WithAsyncMethod_LogSettings<
                                                            gen::Service>>>>>>>>>>>>>>>>>>>>;

// Parses a raw request; INVALID_ARGUMENT naming the message type when the bytes do not parse.
Status ParseRawRequest(grpc::ByteBuffer* raw, inference::ModelInferRequest* msg) {
  const grpc::Status s =
      grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(raw, msg);
  if (s.ok()) return Status::OK();
  return Status::InvalidArgument(
      "the request is not a valid inference.ModelInferRequest: the bytes are not a protobuf "
      "message of that type, or a string field holds invalid UTF-8");
}

template <typename Msg>
Status SerializeResponse(const Msg& msg, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  const grpc::Status s = grpc::SerializationTraits<Msg>::Serialize(msg, out, &own_buffer);
  if (s.ok()) return Status::OK();
  return Status::Internal("cannot serialize the response: " + s.error_message());
}

// A message in wire form as gRPC's buffer, without joining it: the bytes kiln wrote are copied
// into slices (they are small), and each borrowed output tensor becomes a slice over its own
// memory that holds the tensor until gRPC has written it.
grpc::ByteBuffer ToByteBuffer(WireMessage wire) {
  std::vector<grpc::Slice> slices;
  slices.reserve(wire.pieces().size());
  for (WireMessage::Piece& p : wire.pieces()) {
    if (!p.tensor.valid()) {
      slices.emplace_back(p.bytes);
      continue;
    }
    auto* held = new OwnedTensor(std::move(p.tensor));
    slices.emplace_back(
        held->raw_data(), held->size_bytes(),
        [](void* tensor) { delete static_cast<OwnedTensor*>(tensor); }, held);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(GrpcStatusFor(status.code())),
                      std::string(status.message()));
}

class Tag {
 public:
  virtual ~Tag() = default;
  virtual void Proceed(bool ok) = 0;
};

// The key of the call's `authorization: Bearer <key>` metadata; empty when none.
std::string_view BearerKeyOf(const grpc::ServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return {};
  return BearerKey(std::string_view(it->second.data(), it->second.size()));
}

}  // namespace

class GrpcServer::Impl {
 public:
  Impl(const GrpcServerOptions& options, ModelManager* manager)
      : options_(options), manager_(manager) {}
  ~Impl() { Stop(); }

  Status Start();
  void Stop();
  int port() const { return port_.load(); }
  void SetReady(bool ready) {
    ready_.store(ready);
    UpdateHealth();
  }
  void StartDraining() {
    draining_.store(true);
    UpdateHealth();
  }
  size_t InferencesInFlight() const { return in_flight_.load(); }

  bool Ready() const { return ready_.load() && !draining_.load() && manager_->AllModelsReady(); }
  bool draining() const { return draining_.load(); }
  ModelManager* manager() const { return manager_; }
  Service* service() { return &service_; }
  grpc::AsyncGenericService* unknown_methods() { return &unknown_methods_; }
  bool accepting() const { return accepting_.load(); }
  const GrpcServerOptions& options() const { return options_; }
  TenantGate* gate() const { return options_.gate.get(); }

  // Calls accepted and not finished yet: Stop lets them finish before it closes connections.
  void CallStarted() { active_calls_.fetch_add(1); }
  void CallEnded() {
    if (active_calls_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      idle_cv_.notify_all();
    }
  }
  // Inference bookkeeping: Stop waits until every model callback has run.
  void InferenceStarted() { in_flight_.fetch_add(1); }
  void InferenceDone() {
    if (in_flight_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      idle_cv_.notify_all();
    }
  }
  // The standard health service: the server ("" service) is SERVING when Ready(); each model,
  // under its own name, when one of its versions is READY and the server is not draining.
  // Called on every readiness change the server makes, after every load / unload (before its
  // answer), and once a second by the control thread (polled repositories change models on their
  // own).
  void UpdateHealth() {
    if (server_ == nullptr) return;
    grpc::HealthCheckServiceInterface* h = server_->GetHealthCheckService();
    if (h == nullptr) return;
    const bool serving = ready_.load() && !draining_.load();
    std::map<std::string, bool> models;
    for (const ModelIndexEntry& e : manager_->Index()) {
      bool& ready = models[e.name];
      ready = ready || (serving && e.state == ModelState::kReady);
    }
    h->SetServingStatus("", serving && manager_->AllModelsReady());
    for (const auto& [name, ready] : models) h->SetServingStatus(name, ready);
  }

  // Runs `fn` on the control thread (model load / unload: they take seconds).
  void PostControl(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    control_queue_.push_back(std::move(fn));
    control_cv_.notify_one();
  }

 private:
  void RegisterCalls(grpc::ServerCompletionQueue* cq);
  void PollLoop(grpc::ServerCompletionQueue* cq);
  void ControlLoop();

  GrpcServerOptions options_;
  ModelManager* manager_;
  Service service_;
  // Receives every call of a method no registered service has (answered UNIMPLEMENTED, naming
  // the method).
  grpc::AsyncGenericService unknown_methods_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::vector<std::thread> threads_;
  std::thread control_thread_;
  std::atomic<int> port_{0};
  std::atomic<bool> ready_{true};
  std::atomic<bool> draining_{false};
  std::atomic<bool> accepting_{false};
  std::atomic<size_t> in_flight_{0};
  std::atomic<int> active_calls_{0};
  std::mutex mu_;
  std::condition_variable idle_cv_;
  std::condition_variable control_cv_;
  std::deque<std::function<void()>> control_queue_;  // guarded by mu_
  bool control_stop_ = false;                        // guarded by mu_
  bool started_ = false;                             // guarded by mu_
  bool stopped_ = false;                             // guarded by mu_
};

namespace {

using Impl = GrpcServer::Impl;

// The life of a call answered once: its first completion starts it (counted by CallStarted /
// CallEnded; the next call of the same method is asked for while the server accepts), then
// Handle() answers it; the completion after the answer ends it.
//
// A call that watches for cancellation (WatchDone, before the call is requested) also gets
// gRPC's done notification (AsyncNotifyWhenDone): a cancelled call (the client went away, its
// deadline passed) sets cancellation(). The object then lives until both the answer's
// completion and the done notification have arrived; both come on this call's queue, whose one
// thread runs them in turn. A call that never started gets no done notification.
class OneAnswerCall : public Tag {
 public:
  void Proceed(bool ok) final {
    if (finishing_ || !ok) {
      answered_ = true;
      MaybeDelete();
      return;
    }
    started_ = true;
    server_->CallStarted();
    if (server_->accepting()) ListenAgain();
    Handle();
  }

 protected:
  OneAnswerCall(Impl* server, grpc::ServerCompletionQueue* cq) : server_(server), cq_(cq) {}
  ~OneAnswerCall() override {
    if (started_) server_->CallEnded();
  }
  virtual void ListenAgain() = 0;
  virtual void Handle() = 0;

  // Watches `ctx` (this call's context) for cancellation. REQUIRES: before the call is requested.
  void WatchDone(grpc::ServerContext& ctx) {
    watch_ = std::make_shared<Cancellation>();
    watched_ctx_ = &ctx;
    ctx.AsyncNotifyWhenDone(&done_tag_);
  }
  // Set when the watched call is cancelled; null unless WatchDone was called.
  const std::shared_ptr<Cancellation>& cancellation() const { return watch_; }

  Impl* server_;
  grpc::ServerCompletionQueue* cq_;
  bool finishing_ = false;  // the answer was sent: the next completion is the last

 private:
  struct DoneTag final : Tag {
    explicit DoneTag(OneAnswerCall* c) : call(c) {}
    void Proceed(bool) override { call->OnDone(); }
    OneAnswerCall* call;
  };
  void OnDone() {
    done_ = true;
    if (watched_ctx_->IsCancelled()) watch_->Cancel();
    MaybeDelete();
  }
  void MaybeDelete() {
    if (!started_ || (answered_ && (watch_ == nullptr || done_))) delete this;
  }

  bool started_ = false;   // the call arrived (it counts in CallStarted / CallEnded)
  bool answered_ = false;  // the last completion of the call itself arrived
  bool done_ = false;      // the done notification arrived
  std::shared_ptr<Cancellation> watch_;
  grpc::ServerContext* watched_ctx_ = nullptr;
  DoneTag done_tag_{this};
};

// One unary call of one method. `Handler` fills the response and calls Finish (at once, or
// later from another thread).
template <typename Req, typename Resp>
class UnaryCall final : public OneAnswerCall {
 public:
  using RequestFn = void (Service::*)(grpc::ServerContext*, Req*,
                                      grpc::ServerAsyncResponseWriter<Resp>*,
                                      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  using Handler = void (*)(Impl*, UnaryCall*);

  // Asks gRPC for the next call of this method (of API group `group`) on `cq`; with
  // `watch_cancel` the call's cancellation() is set if the client cancels it.
  static void Listen(Impl* server, grpc::ServerCompletionQueue* cq, RequestFn request,
                     Handler handler, ApiGroup group, bool watch_cancel = false) {
    auto* call = new UnaryCall(server, cq, request, handler, group, watch_cancel);
    if (watch_cancel) call->WatchDone(call->ctx_);
    (server->service()->*request)(&call->ctx_, &call->request_, &call->responder_, cq, cq, call);
  }
  using OneAnswerCall::cancellation;

  const Req& request() const { return request_; }
  Req* mutable_request() { return &request_; }
  const grpc::ServerContext& context() const { return ctx_; }
  grpc::ServerContext* mutable_context() { return &ctx_; }
  // The caller's tenant (TenantGate::kAnonymous without one or without a gate).
  int tenant() const { return tenant_; }
  Resp* response() { return &response_; }
  void Finish(const grpc::Status& status) {
    finishing_ = true;
    if (status.ok()) {
      responder_.Finish(response_, status, this);
    } else {
      responder_.FinishWithError(status, this);
    }
  }
  void Finish(const Status& status) { Finish(ToGrpc(status)); }

 private:
  UnaryCall(Impl* server, grpc::ServerCompletionQueue* cq, RequestFn request, Handler handler,
            ApiGroup group, bool watch_cancel)
      : OneAnswerCall(server, cq),
        request_fn_(request),
        handler_(handler),
        group_(group),
        watch_cancel_(watch_cancel),
        responder_(&ctx_) {}
  void ListenAgain() override {
    Listen(server_, cq_, request_fn_, handler_, group_, watch_cancel_);
  }
  void Handle() override {
    if (TenantGate* gate = server_->gate()) {
      Result<int> tenant = gate->Authorize(group_, BearerKeyOf(ctx_));
      if (!tenant.ok()) {
        Finish(tenant.status());
        return;
      }
      tenant_ = *tenant;
    }
    handler_(server_, this);
  }

  RequestFn request_fn_;
  Handler handler_;
  ApiGroup group_;
  int tenant_ = TenantGate::kAnonymous;
  bool watch_cancel_;
  grpc::ServerContext ctx_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_;
};

// `ctx`: the call whose metadata a model's rollout may route by (null: none).
Result<std::shared_ptr<LoadedModel>> ResolveModel(Impl* server, const std::string& name,
                                                  const std::string& version,
                                                  const grpc::ServerContext* ctx = nullptr) {
  KILN_ASSIGN_OR_RETURN(int64_t v, ParseModelVersion(version));
  if (ctx == nullptr) return FindModel(*server->manager(), name, v);
  return FindModel(*server->manager(), name, v, [ctx](std::string_view key) {
    const auto& md = ctx->client_metadata();
    auto it = md.find(grpc::string_ref(key.data(), key.size()));
    return it == md.end() ? std::string_view()
                          : std::string_view(it->second.data(), it->second.size());
  });
}

// The gRPC side of one inference (server/inference.h guarantees one Finish): the final result
// goes to `done`, and the server counts it in flight until then (Stop waits for it).
// ModelStreamInfer passes `partial` (a decoupled model's responses before its final one, each
// a message of the stream) and `backlog` (messages queued and not yet written); ModelInfer
// answers once and passes neither.
class GrpcInferSink final : public ResponseSink {
 public:
  GrpcInferSink(Impl* server, std::function<void(Result<InferResponse>)> done,
                std::function<void(InferResponse)> partial, std::function<size_t()> backlog,
                std::shared_ptr<TenantLease> lease)
      : server_(server),
        done_(std::move(done)),
        partial_(std::move(partial)),
        backlog_(std::move(backlog)),
        lease_(std::move(lease)) {
    server_->InferenceStarted();
  }
  void Send(InferResponse response) override {
    Charge(response);
    if (partial_) partial_(std::move(response));
  }
  void Finish(Result<InferResponse> result) override {
    if (result.ok()) Charge(*result);
    lease_.reset();
    done_(std::move(result));
    server_->InferenceDone();
  }
  size_t backlog() const override { return backlog_ ? backlog_() : 0; }
  bool streaming() const override { return static_cast<bool>(partial_); }

 private:
  Impl* server_;
  std::function<void(Result<InferResponse>)> done_;
  std::function<void(InferResponse)> partial_;
  std::function<size_t()> backlog_;
  std::shared_ptr<TenantLease> lease_;  // the tenant's admission; null without a tenant

  // A generative model's tokens (the tensor path, server/gen_infer.h) go to the tenant's bucket.
  void Charge(const InferResponse& response) {
    if (lease_ != nullptr && response.generated_tokens > 0) {
      lease_->ChargeTokens(response.generated_tokens);
    }
  }
};

// The client's W3C traceparent metadata (server/trace.h), or "" when it sent none.
std::string TraceParentOf(const grpc::ServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("traceparent");
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Decodes and starts one inference of `tenant`; `done` is called exactly once (maybe before
// this returns). `cancellation` (may be null) is set when the client goes away. A refusal by the
// tenant's limits adds the `retry-after` trailing metadata to `trailing` when it is not null.
// The request's numeric raw inputs borrow the message's bytes: `msg` lives until they are gone.
void StartGrpcInference(Impl* server,
                        const std::shared_ptr<const inference::ModelInferRequest>& msg_ptr,
                        std::shared_ptr<const Cancellation> cancellation,
                        const grpc::ServerContext& ctx, int tenant, grpc::ServerContext* trailing,
                        std::function<void(Result<InferResponse>)> done,
                        std::function<void(InferResponse)> partial = {},
                        std::function<size_t()> backlog = {}) {
  const inference::ModelInferRequest& msg = *msg_ptr;
  if (server->draining()) {
    done(Status::Unavailable("the server is shutting down: no new inference requests"));
    return;
  }
  Result<std::shared_ptr<LoadedModel>> model =
      ResolveModel(server, msg.model_name(), msg.model_version(), &ctx);
  if (!model.ok()) {
    done(model.status());
    return;
  }
  std::shared_ptr<TenantLease> lease;
  TenantGate* gate = server->gate();
  if (gate != nullptr) {
    // A request to a generative model is a generation (server/gen_infer.h).
    TenantGate::Admission admission = gate->Admit(tenant, (*model)->generative());
    if (!admission.status.ok()) {
      if (trailing != nullptr) {
        trailing->AddTrailingMetadata("retry-after", std::to_string(admission.retry_after_s));
      }
      done(admission.status);
      return;
    }
    lease = std::move(admission.lease);
  }
  Result<std::unique_ptr<InferRequest>> request = DecodeModelInferRequest(msg, msg_ptr);
  if (!request.ok()) {
    done(request.status());
    return;
  }
  (*request)->cancellation = std::move(cancellation);
  (*request)->traceparent = TraceParentOf(ctx);
  if ((*request)->service_class.empty() && gate != nullptr && gate->best_effort(tenant)) {
    (*request)->service_class = "best_effort";
  }
  // Classification extension: outputs asked for their top-k classes are replaced by them.
  std::vector<ClassifyOutput> classify;
  for (const auto& out : msg.outputs()) {
    const Result<int64_t> k = ClassCount(out);  // checked by DecodeModelInferRequest
    if (k.ok() && *k > 0) classify.push_back({out.name(), *k});
  }
  StartInference(std::move(model).value(), std::move(request).value(), std::move(classify),
                 std::make_shared<GrpcInferSink>(server, std::move(done), std::move(partial),
                                                 std::move(backlog), std::move(lease)));
}

// ---- unary handlers ----

using LiveCall = UnaryCall<inference::ServerLiveRequest, inference::ServerLiveResponse>;
void HandleLive(Impl*, LiveCall* call) {
  call->response()->set_live(true);
  call->Finish(grpc::Status::OK);
}

using ReadyCall = UnaryCall<inference::ServerReadyRequest, inference::ServerReadyResponse>;
void HandleReady(Impl* server, ReadyCall* call) {
  call->response()->set_ready(server->Ready());
  call->Finish(grpc::Status::OK);
}

using ModelReadyCall = UnaryCall<inference::ModelReadyRequest, inference::ModelReadyResponse>;
void HandleModelReady(Impl* server, ModelReadyCall* call) {
  Result<std::shared_ptr<LoadedModel>> model =
      ResolveModel(server, call->request().name(), call->request().version());
  call->response()->set_ready(model.ok());
  call->Finish(model.ok() ? Status::OK() : model.status());
}

using ServerMetaCall =
    UnaryCall<inference::ServerMetadataRequest, inference::ServerMetadataResponse>;
void HandleServerMetadata(Impl* server, ServerMetaCall* call) {
  auto* r = call->response();
  r->set_name(std::string(kServerName));
  r->set_version(server->options().server_version);
  for (std::string_view e : kServerExtensions) r->add_extensions(std::string(e));
  call->Finish(grpc::Status::OK);
}

using ModelMetaCall = UnaryCall<inference::ModelMetadataRequest, inference::ModelMetadataResponse>;
void HandleModelMetadata(Impl* server, ModelMetaCall* call) {
  const auto& req = call->request();
  Result<std::shared_ptr<LoadedModel>> model = ResolveModel(server, req.name(), req.version());
  if (!model.ok()) {
    call->Finish(model.status());
    return;
  }
  auto* r = call->response();
  r->set_name(req.name());
  std::vector<int64_t> versions;
  if (!req.version().empty()) {
    versions.push_back((*model)->version());
  } else {
    versions = server->manager()->ReadyVersions(req.name());
    if (versions.empty()) versions.push_back((*model)->version());
  }
  for (int64_t v : versions) r->add_versions(std::to_string(v));
  const ModelSignature& sig = (*model)->signature();
  r->set_platform(sig.platform.empty() ? sig.backend : sig.platform);
  const bool batched = sig.max_batch_size > 0;
  const auto add = [batched](const std::vector<TensorSpec>& specs, auto* field) {
    for (const TensorSpec& spec : specs) {
      auto* t = field->Add();
      t->set_name(spec.name);
      t->set_datatype(std::string(DataTypeName(spec.dtype)));
      if (batched) t->add_shape(-1);
      for (int64_t d : spec.dims) t->add_shape(d);
    }
  };
  add(sig.inputs, r->mutable_inputs());
  add(sig.outputs, r->mutable_outputs());
  call->Finish(grpc::Status::OK);
}

using ConfigCall = UnaryCall<inference::ModelConfigRequest, inference::ModelConfigResponse>;
void HandleModelConfig(Impl* server, ConfigCall* call) {
  const auto& req = call->request();
  Result<std::shared_ptr<LoadedModel>> model = ResolveModel(server, req.name(), req.version());
  if (!model.ok()) {
    call->Finish(model.status());
    return;
  }
  const inference::ModelConfig* config = (*model)->model_config();
  if (config == nullptr) {
    call->Finish(
        Status::Unavailable(fmt::format("model '{}' has no configuration to report", req.name())));
    return;
  }
  *call->response()->mutable_config() = *config;
  call->Finish(grpc::Status::OK);
}

using StatsCall = UnaryCall<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>;
void HandleStatistics(Impl* server, StatsCall* call) {
  const auto& req = call->request();
  ModelManager* manager = server->manager();
  auto* r = call->response();
  const auto add = [&](const std::string& name, int64_t version) {
    // A version unloaded since it was listed is skipped, as if it had not been ready.
    Result<std::shared_ptr<LoadedModel>> model = manager->GetModel(name, version);
    if (!model.ok()) return;
    FillModelStatistics(name, version, (*model)->Statistics(), r->add_model_stats());
  };
  if (req.name().empty()) {
    for (const ModelIndexEntry& e : manager->Index()) {
      if (e.state == ModelState::kReady) add(e.name, e.version);
    }
    call->Finish(grpc::Status::OK);
    return;
  }
  Result<int64_t> version = ParseModelVersion(req.version());
  if (!version.ok()) {
    call->Finish(version.status());
    return;
  }
  const std::vector<int64_t> ready = manager->ReadyVersions(req.name());
  if (ready.empty()) {
    call->Finish(
        Status::InvalidArgument(fmt::format("requested model '{}' is not available", req.name())));
    return;
  }
  if (*version >= 0) {
    if (std::find(ready.begin(), ready.end(), *version) == ready.end()) {
      call->Finish(Status::InvalidArgument(
          fmt::format("requested model version is not available for model '{}'", req.name())));
      return;
    }
    add(req.name(), *version);
  } else {
    for (int64_t v : ready) add(req.name(), v);
  }
  call->Finish(grpc::Status::OK);
}

using IndexCall = UnaryCall<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse>;
void HandleIndex(Impl* server, IndexCall* call) {
  if (!call->request().repository_name().empty()) {
    call->Finish(Status::Unimplemented("'repository_name' specification is not supported"));
    return;
  }
  for (const ModelIndexEntry& e : server->manager()->Index()) {
    if (call->request().ready() && e.state != ModelState::kReady) continue;
    auto* m = call->response()->add_models();
    m->set_name(e.name);
    if (e.version >= 0) m->set_version(std::to_string(e.version));
    if (e.state != ModelState::kUnknown) m->set_state(std::string(ModelStateName(e.state)));
    m->set_reason(e.reason);
  }
  call->Finish(grpc::Status::OK);
}

using LoadCall =
    UnaryCall<inference::RepositoryModelLoadRequest, inference::RepositoryModelLoadResponse>;
void HandleLoad(Impl* server, LoadCall* call) {
  const auto& req = call->request();
  if (!req.repository_name().empty()) {
    call->Finish(Status::Unimplemented("'repository_name' specification is not supported"));
    return;
  }
  ModelLoadOptions options;
  for (const auto& [key, p] : req.parameters()) {
    if (key == "config") {
      if (p.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        call->Finish(Status::InvalidArgument(
            "load parameter 'config' must be a string_param holding the config JSON"));
        return;
      }
      options.config_json = p.string_param();
    } else if (key.starts_with("file:")) {
      if (p.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        call->Finish(Status::InvalidArgument(fmt::format(
            "load parameter '{}' must be a bytes_param holding the file's bytes", key)));
        return;
      }
      options.files.push_back({key.substr(5), p.bytes_param()});
    }
  }
  if (server->draining()) {
    call->Finish(Status::Unavailable("the server is shutting down: no model loads"));
    return;
  }
  // The health service learns of the load before the client does.
  server->PostControl([server, call, name = req.model_name(), options = std::move(options)] {
    const Status loaded = server->manager()->LoadModel(name, options);
    server->UpdateHealth();
    call->Finish(loaded);
  });
}

using UnloadCall =
    UnaryCall<inference::RepositoryModelUnloadRequest, inference::RepositoryModelUnloadResponse>;
void HandleUnload(Impl* server, UnloadCall* call) {
  const auto& req = call->request();
  if (!req.repository_name().empty()) {
    call->Finish(Status::Unimplemented("'repository_name' specification is not supported"));
    return;
  }
  Result<bool> dependents = UnloadDependents(req);
  if (!dependents.ok()) {
    call->Finish(dependents.status());
    return;
  }
  ModelUnloadOptions options;
  options.unload_dependents = *dependents;
  server->PostControl([server, call, name = req.model_name(), options] {
    const Status unloaded = server->manager()->UnloadModel(name, options);
    server->UpdateHealth();
    call->Finish(unloaded);
  });
}

// ModelInfer arrives raw (see Service): the request bytes are parsed here, and the response is
// encoded straight into the call's response buffer. The parsed request lives as long as the
// inputs that borrow its bytes.
using InferCall = UnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>;
void HandleInfer(Impl* server, InferCall* call) {
  auto request = std::make_shared<inference::ModelInferRequest>();
  const Status parsed = ParseRawRequest(call->mutable_request(), request.get());
  call->mutable_request()->Clear();
  if (!parsed.ok()) {
    call->Finish(parsed);
    return;
  }
  StartGrpcInference(server, request, call->cancellation(), call->context(), call->tenant(),
                     call->mutable_context(), [call](Result<InferResponse> result) {
                       if (!result.ok()) {
                         call->Finish(result.status());
                         return;
                       }
                       Result<WireMessage> wire = EncodeModelInferResponse(*result);
                       if (!wire.ok()) {
                         call->Finish(wire.status());
                         return;
                       }
                       *call->response() = ToByteBuffer(std::move(wire).value());
                       call->Finish(Status::OK());
                     });
}

using LogCall = UnaryCall<inference::LogSettingsRequest, inference::LogSettingsResponse>;
void HandleLogSettings(Impl*, LogCall* call) {
  std::vector<LogSettingUpdate> updates;
  for (const auto& [name, value] : call->request().settings()) {
    LogSettingUpdate u;
    u.name = name;
    using P = inference::LogSettingsRequest::SettingValue;
    switch (value.parameter_choice_case()) {
      case P::kBoolParam:
        u.kind = LogSettingUpdate::Kind::kBool;
        u.bool_value = value.bool_param();
        break;
      case P::kUint32Param:
        u.kind = LogSettingUpdate::Kind::kInteger;
        u.int_value = value.uint32_param();
        break;
      case P::kStringParam:
        u.kind = LogSettingUpdate::Kind::kString;
        u.string_value = value.string_param();
        break;
      case P::PARAMETER_CHOICE_NOT_SET:
        u.kind = LogSettingUpdate::Kind::kNull;
        break;
    }
    updates.push_back(std::move(u));
  }
  if (Status st = UpdateLogSettings(updates); !st.ok()) {
    call->Finish(st);
    return;
  }
  auto* settings = call->response()->mutable_settings();
  for (const LogSettingField& f : LogSettingFields(GetLogSettings())) {
    inference::LogSettingsResponse::SettingValue& v = (*settings)[f.name];
    switch (f.kind) {
      case LogSettingField::Kind::kBool:
        v.set_bool_param(f.bool_value);
        break;
      case LogSettingField::Kind::kUint:
        v.set_uint32_param(f.uint_value);
        break;
      case LogSettingField::Kind::kString:
        v.set_string_param(f.string_value);
        break;
    }
  }
  call->Finish(grpc::Status::OK);
}

using TraceCall = UnaryCall<inference::TraceSettingRequest, inference::TraceSettingResponse>;
// The trace extension (server/trace.h): one setting for the server; a model's is the server's.
void HandleTraceSetting(Impl*, TraceCall* call) {
  TraceSettingFields update;
  for (const auto& [name, value] : call->request().settings()) {
    update.emplace_back(name, std::vector<std::string>(value.value().begin(), value.value().end()));
  }
  TraceSettings s = Tracer::Global().settings();
  Status st = UpdateTraceSettings(update, &s);
  if (st.ok() && !update.empty()) st = Tracer::Global().Configure(s);
  if (!st.ok()) {
    call->Finish(st);
    return;
  }
  auto* settings = call->response()->mutable_settings();
  for (const auto& [name, values] : TraceSettingsAsFields(Tracer::Global().settings())) {
    for (const std::string& v : values) (*settings)[name].add_value(v);
  }
  call->Finish(grpc::Status::OK);
}

template <typename Req, typename Resp>
void HandleUnimplemented(Impl*, UnaryCall<Req, Resp>* call) {
  call->Finish(Status::Unimplemented(
      "this RPC is not supported by kiln (no shared memory, trace or log settings)"));
}

// A call of a method that no registered service serves: UNIMPLEMENTED with a message naming the
// method (gRPC's own answer has an empty message).
class UnknownMethodCall final : public OneAnswerCall {
 public:
  static void Listen(Impl* server, grpc::ServerCompletionQueue* cq) {
    auto* call = new UnknownMethodCall(server, cq);
    server->unknown_methods()->RequestCall(&call->ctx_, &call->stream_, cq, cq, call);
  }

  // "/package.Service/Method" -> which of the two kiln does not know.
  static std::string Message(const std::string& path) {
    constexpr std::string_view kInference = "inference.GRPCInferenceService";
    const size_t slash = path.find('/', 1);
    const std::string service =
        path.size() > 1 && slash != std::string::npos ? path.substr(1, slash - 1) : "";
    const std::string method = slash != std::string::npos ? path.substr(slash + 1) : path;
    if (service == kInference || service == "grpc.health.v1.Health") {
      return fmt::format("method '{}' is not part of {} (called as '{}')", method, service, path);
    }
    return fmt::format(
        "unknown service '{}' (called as '{}'): kiln serves {} and grpc.health.v1.Health", service,
        path, kInference);
  }

 private:
  UnknownMethodCall(Impl* server, grpc::ServerCompletionQueue* cq)
      : OneAnswerCall(server, cq), stream_(&ctx_) {}
  void ListenAgain() override { Listen(server_, cq_); }
  void Handle() override {
    finishing_ = true;
    stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, Message(ctx_.method())), this);
  }

  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_;
};

// ---- ModelStreamInfer ----

class StreamCall {
 public:
  static void Listen(Impl* server, grpc::ServerCompletionQueue* cq) {
    auto* call = new StreamCall(server, cq);
    call->ctx_.AsyncNotifyWhenDone(&call->done_tag_);
    server->service()->RequestModelStreamInfer(&call->ctx_, &call->stream_, cq, cq,
                                               &call->accept_tag_);
  }

 private:
  struct OpTag final : Tag {
    OpTag(StreamCall* c, void (StreamCall::*f)(bool)) : call(c), fn(f) {}
    void Proceed(bool ok) override { (call->*fn)(ok); }
    StreamCall* call;
    void (StreamCall::*fn)(bool);
  };

  StreamCall(Impl* server, grpc::ServerCompletionQueue* cq)
      : server_(server), cq_(cq), stream_(&ctx_) {}
  ~StreamCall() {
    if (started_) server_->CallEnded();
  }

  void OnAccept(bool ok) {
    if (!ok) {
      delete this;
      return;
    }
    started_ = true;
    server_->CallStarted();
    if (server_->accepting()) Listen(server_, cq_);
    if (TenantGate* gate = server_->gate()) {
      Result<int> tenant = gate->Authorize(ApiGroup::kInference, BearerKeyOf(ctx_));
      if (!tenant.ok()) {
        // Refused before any message is read: the stream ends with the status.
        std::lock_guard<std::mutex> lock(mu_);
        reads_done_ = true;
        finishing_ = true;
        stream_.Finish(ToGrpc(tenant.status()), &finish_tag_);
        return;
      }
      tenant_ = *tenant;
    }
    stream_.Read(&incoming_, &read_tag_);
  }

  void OnRead(bool ok) {
    if (!ok) {
      std::unique_lock<std::mutex> lock(mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    auto request = std::make_shared<inference::ModelInferRequest>();
    const Status parsed = ParseRawRequest(&incoming_, request.get());
    incoming_.Clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++pending_;  // this request's response
    }
    stream_.Read(&incoming_, &read_tag_);
    if (!parsed.ok()) {
      // Answered in the stream, like any failed request; the stream goes on.
      Enqueue(ErrorResponse(parsed, "", "", ""));
      return;
    }
    std::string id = request->id();
    std::string model = request->model_name();
    std::string version = request->model_version();
    StartGrpcInference(
        server_, request, cancel_, ctx_, tenant_, /*trailing=*/nullptr,
        [this, id = std::move(id), model = std::move(model),
         version = std::move(version)](Result<InferResponse> result) {
          Status status = result.status();
          if (status.ok()) {
            Result<WireMessage> wire = EncodeModelInferResponse(*result, FinalResponseHead());
            if (wire.ok()) {
              Enqueue(ToByteBuffer(std::move(wire).value().NestedAs(
                  inference::ModelStreamInferResponse::kInferResponseFieldNumber)));
              return;
            }
            status = wire.status();
          }
          Enqueue(ErrorResponse(status, id, model, version));
        },
        [this](InferResponse partial) {
          inference::ModelInferResponse head;
          (*head.mutable_parameters())["triton_final_response"].set_bool_param(false);
          Result<WireMessage> wire = EncodeModelInferResponse(partial, head);
          if (!wire.ok()) {
            KILN_LOG_ERROR("ModelStreamInfer: {}", wire.status().message());
            return;
          }
          EnqueuePartial(ToByteBuffer(std::move(wire).value().NestedAs(
              inference::ModelStreamInferResponse::kInferResponseFieldNumber)));
        },
        [this] {
          std::lock_guard<std::mutex> lock(mu_);
          return outgoing_.size();
        });
  }

  // A decoupled model's response before its final one: written like an answer, but the
  // request stays pending.
  void EnqueuePartial(grpc::ByteBuffer bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return;
    outgoing_.push_back(std::move(bytes));
    if (!writing_) {
      writing_ = true;
      stream_.Write(outgoing_.front(), &write_tag_);
    }
  }

  // The inner response's parameters of every answer: each request of the stream has one.
  static inference::ModelInferResponse FinalResponseHead() {
    inference::ModelInferResponse head;
    (*head.mutable_parameters())["triton_final_response"].set_bool_param(true);
    return head;
  }

  // A failed request's answer in the stream: the error, and the request's identity.
  static Result<grpc::ByteBuffer> ErrorResponse(const Status& status, const std::string& id,
                                                const std::string& model,
                                                const std::string& version) {
    inference::ModelStreamInferResponse response;
    response.set_error_message(std::string(status.message()));
    inference::ModelInferResponse* r = response.mutable_infer_response();
    *r = FinalResponseHead();
    r->set_id(id);
    r->set_model_name(model);
    r->set_model_version(version);
    grpc::ByteBuffer bytes;
    KILN_RETURN_IF_ERROR(SerializeResponse(response, &bytes));
    return bytes;
  }

  void Enqueue(Result<grpc::ByteBuffer> bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    if (broken_) {
      MaybeFinishLocked();
      return;
    }
    if (!bytes.ok()) {
      KILN_LOG_ERROR("ModelStreamInfer: {}", bytes.status().message());
      MaybeFinishLocked();
      return;
    }
    outgoing_.push_back(std::move(bytes).value());
    if (!writing_) {
      writing_ = true;
      stream_.Write(outgoing_.front(), &write_tag_);
    }
  }

  void OnWrite(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    outgoing_.pop_front();
    if (!ok) {
      broken_ = true;  // the client is gone: drop what is left, give up on what is running
      outgoing_.clear();
      cancel_->Cancel();
    }
    if (!outgoing_.empty()) {
      stream_.Write(outgoing_.front(), &write_tag_);
      return;
    }
    writing_ = false;
    MaybeFinishLocked();
  }

  // REQUIRES: mu_ held.
  void MaybeFinishLocked() {
    if (finishing_ || !reads_done_ || pending_ > 0 || writing_) return;
    finishing_ = true;
    stream_.Finish(grpc::Status::OK, &finish_tag_);
  }

  // The stream's own last completion and gRPC's done notification (a cancelled stream cancels
  // every request of it still queued or running) both come on this call's queue; the object
  // lives until both have.
  void OnFinish(bool) {
    finished_ = true;
    if (done_) delete this;
  }
  void OnDone(bool) {
    done_ = true;
    if (ctx_.IsCancelled()) cancel_->Cancel();
    if (finished_) delete this;
  }

  Impl* server_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;  // raw (Service)
  grpc::ByteBuffer incoming_;            // the pending Read's target (CQ thread only)
  bool started_ = false;                 // the stream was accepted (CQ thread only)
  int tenant_ = TenantGate::kAnonymous;  // the caller's tenant (set on accept)
  OpTag accept_tag_{this, &StreamCall::OnAccept};
  OpTag read_tag_{this, &StreamCall::OnRead};
  OpTag write_tag_{this, &StreamCall::OnWrite};
  OpTag finish_tag_{this, &StreamCall::OnFinish};
  OpTag done_tag_{this, &StreamCall::OnDone};
  // Shared by every request of the stream: set when the client cancels the stream or a write
  // to it fails.
  std::shared_ptr<Cancellation> cancel_ = std::make_shared<Cancellation>();
  bool finished_ = false;  // OnFinish ran (CQ thread only)
  bool done_ = false;      // OnDone ran (CQ thread only)
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> outgoing_;  // serialized responses, front being written; mu_
  int pending_ = 0;                        // requests read and not yet answered; mu_
  bool reads_done_ = false;                // mu_
  bool writing_ = false;                   // mu_
  bool broken_ = false;                    // a write failed; mu_
  bool finishing_ = false;                 // mu_
};

}  // namespace

void GrpcServer::Impl::RegisterCalls(grpc::ServerCompletionQueue* cq) {
  using S = Service;
  LiveCall::Listen(this, cq, &S::RequestServerLive, &HandleLive, ApiGroup::kHealth);
  ReadyCall::Listen(this, cq, &S::RequestServerReady, &HandleReady, ApiGroup::kHealth);
  ModelReadyCall::Listen(this, cq, &S::RequestModelReady, &HandleModelReady, ApiGroup::kHealth);
  ServerMetaCall::Listen(this, cq, &S::RequestServerMetadata, &HandleServerMetadata,
                         ApiGroup::kMetadata);
  ModelMetaCall::Listen(this, cq, &S::RequestModelMetadata, &HandleModelMetadata,
                        ApiGroup::kMetadata);
  ConfigCall::Listen(this, cq, &S::RequestModelConfig, &HandleModelConfig, ApiGroup::kModelConfig);
  StatsCall::Listen(this, cq, &S::RequestModelStatistics, &HandleStatistics, ApiGroup::kStatistics);
  IndexCall::Listen(this, cq, &S::RequestRepositoryIndex, &HandleIndex, ApiGroup::kModelRepository);
  LoadCall::Listen(this, cq, &S::RequestRepositoryModelLoad, &HandleLoad,
                   ApiGroup::kModelRepository);
  UnloadCall::Listen(this, cq, &S::RequestRepositoryModelUnload, &HandleUnload,
                     ApiGroup::kModelRepository);
  // Several pending ModelInfer calls per queue, so a burst of clients is accepted at once.
  for (int i = 0; i < 8; ++i) {
    InferCall::Listen(this, cq, &S::RequestModelInfer, &HandleInfer, ApiGroup::kInference,
                      /*watch_cancel=*/true);
  }
  StreamCall::Listen(this, cq);
  using namespace inference;  // the unimplemented RPCs' message types
  UnaryCall<SystemSharedMemoryStatusRequest, SystemSharedMemoryStatusResponse>::Listen(
      this, cq, &S::RequestSystemSharedMemoryStatus, &HandleUnimplemented, ApiGroup::kSharedMemory);
  UnaryCall<SystemSharedMemoryRegisterRequest, SystemSharedMemoryRegisterResponse>::Listen(
      this, cq, &S::RequestSystemSharedMemoryRegister, &HandleUnimplemented,
      ApiGroup::kSharedMemory);
  UnaryCall<SystemSharedMemoryUnregisterRequest, SystemSharedMemoryUnregisterResponse>::Listen(
      this, cq, &S::RequestSystemSharedMemoryUnregister, &HandleUnimplemented,
      ApiGroup::kSharedMemory);
  UnaryCall<CudaSharedMemoryStatusRequest, CudaSharedMemoryStatusResponse>::Listen(
      this, cq, &S::RequestCudaSharedMemoryStatus, &HandleUnimplemented, ApiGroup::kSharedMemory);
  UnaryCall<CudaSharedMemoryRegisterRequest, CudaSharedMemoryRegisterResponse>::Listen(
      this, cq, &S::RequestCudaSharedMemoryRegister, &HandleUnimplemented, ApiGroup::kSharedMemory);
  UnaryCall<CudaSharedMemoryUnregisterRequest, CudaSharedMemoryUnregisterResponse>::Listen(
      this, cq, &S::RequestCudaSharedMemoryUnregister, &HandleUnimplemented,
      ApiGroup::kSharedMemory);
  TraceCall::Listen(this, cq, &S::RequestTraceSetting, &HandleTraceSetting, ApiGroup::kTrace);
  LogCall::Listen(this, cq, &S::RequestLogSettings, &HandleLogSettings, ApiGroup::kLogging);
  UnknownMethodCall::Listen(this, cq);
}

void GrpcServer::Impl::PollLoop(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
}

void GrpcServer::Impl::ControlLoop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const bool woken = control_cv_.wait_for(lock, std::chrono::seconds(1), [this] {
        return control_stop_ || !control_queue_.empty();
      });
      if (woken && control_queue_.empty()) return;  // stopping
      if (woken) {
        fn = std::move(control_queue_.front());
        control_queue_.pop_front();
      }
    }
    if (fn) fn();
    UpdateHealth();
  }
}

Status GrpcServer::Impl::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_ || stopped_) {
      return Status::FailedPrecondition("the gRPC server was already started");
    }
    started_ = true;
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string address =
      fmt::format("{}:{}",
                  options_.address.find(':') != std::string::npos ? "[" + options_.address + "]"
                                                                  : options_.address,
                  options_.port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options_.tls) {
    grpc::SslServerCredentialsOptions ssl(
        options_.tls->mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_root_certs = options_.tls->root_pem;
    ssl.pem_key_cert_pairs.push_back({options_.tls->key_pem, options_.tls->cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(address, credentials, &bound_port);
  builder.RegisterService(&service_);
  builder.RegisterAsyncGenericService(&unknown_methods_);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  int threads = options_.threads;
  if (threads == 0) threads = std::max(2u, std::thread::hardware_concurrency());
  for (int i = 0; i < threads; ++i) cqs_.push_back(builder.AddCompletionQueue());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port == 0) {
    server_.reset();
    for (auto& cq : cqs_) {
      cq->Shutdown();
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) {
      }
    }
    cqs_.clear();
    return Status::Unavailable(
        fmt::format("cannot listen for gRPC on {} (address in use or not local?)", address));
  }
  port_.store(bound_port);
  accepting_.store(true);
  UpdateHealth();
  control_thread_ = std::thread([this] { ControlLoop(); });
  for (auto& cq : cqs_) {
    RegisterCalls(cq.get());
    threads_.emplace_back([this, q = cq.get()] { PollLoop(q); });
  }
  return Status::OK();
}

void GrpcServer::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || stopped_) {
      stopped_ = true;
      return;
    }
    stopped_ = true;
  }
  draining_.store(true);
  accepting_.store(false);
  if (grpc::HealthCheckServiceInterface* h = server_->GetHealthCheckService()) h->Shutdown();
  // Calls in progress get a grace period, the CQ threads serving them meanwhile; then the
  // server closes every connection (idle clients keep theirs open otherwise) and cancels what
  // is left.
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait_for(lock, std::chrono::seconds(5),
                      [this] { return active_calls_.load() == 0 && in_flight_.load() == 0; });
  }
  server_->Shutdown(std::chrono::system_clock::now());
  {
    std::unique_lock<std::mutex> lock(mu_);
    control_stop_ = true;
    control_cv_.notify_all();
  }
  control_thread_.join();
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [this] { return in_flight_.load() == 0; });
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() = default;

Result<std::unique_ptr<GrpcServer>> GrpcServer::Create(const GrpcServerOptions& options,
                                                       ModelManager* manager) {
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument(fmt::format("gRPC port {} is not in 0..65535", options.port));
  }
  if (options.threads < 0) {
    return Status::InvalidArgument(
        fmt::format("gRPC thread count {} is negative", options.threads));
  }
  if (manager == nullptr) return Status::InvalidArgument("the gRPC server needs a model manager");
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::make_unique<Impl>(options, manager)));
}

Status GrpcServer::Start() { return impl_->Start(); }
int GrpcServer::port() const { return impl_->port(); }
void GrpcServer::SetReady(bool ready) { impl_->SetReady(ready); }
void GrpcServer::StartDraining() { impl_->StartDraining(); }
size_t GrpcServer::InferencesInFlight() const { return impl_->InferencesInFlight(); }
void GrpcServer::Stop() { impl_->Stop(); }

}  // namespace kiln
