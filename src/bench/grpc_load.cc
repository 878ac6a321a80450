// SPDX-License-Identifier: Apache-2.0
#include "bench/grpc_load.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <charconv>
#include <deque>

#include "base/check.h"
#include "bench/net.h"
#include "grpc_service.grpc.pb.h"

namespace kiln::bench {
namespace {

using inference::GRPCInferenceService;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& url, int index) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A channel of its own per worker: distinct args keep gRPC from sharing one subchannel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kiln.bench.worker", index);
  return grpc::CreateCustomChannel(url, grpc::InsecureChannelCredentials(), args);
}

gpr_timespec Deadline(int64_t steady_ns) {
  // AsyncNext takes a deadline; express a steady-clock time as a relative one.
  int64_t rel = std::max<int64_t>(0, steady_ns - NowNs());
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(rel, GPR_TIMESPAN));
}

class GrpcWorker final : public LoadEngine::Worker {
 public:
  GrpcWorker(const std::string& url, int index,
             const std::vector<inference::ModelInferRequest>& reqs, SampleSink& sink,
             const LoadConfig& config, int slots, int shards, int64_t start_ns,
             const std::atomic<bool>& stop, std::atomic<uint64_t>& sent)
      : stub_(GRPCInferenceService::NewStub(NewChannel(url, index))),
        requests_(reqs),
        sink_(sink),
        open_loop_(config.open_loop),
        slots_(slots),
        start_ns_(start_ns),
        stop_(stop),
        sent_(sent),
        next_request_(static_cast<size_t>(index)) {
    if (open_loop_) {
      schedule_ = std::make_unique<ArrivalSchedule>(config.rate, config.distribution, config.seed,
                                                    index, shards);
    }
  }

  void Run() override {
    calls_.resize(static_cast<size_t>(slots_));
    for (auto& c : calls_) c = std::make_unique<Call>();
    int64_t now = NowNs();
    if (open_loop_) {
      for (auto& c : calls_) idle_.push_back(c.get());
      next_ns_ = start_ns_ + schedule_->Next();
    } else {
      for (auto& c : calls_) Issue(c.get(), now);
    }
    while (!stop_.load(std::memory_order_relaxed)) {
      int64_t wake = NowNs() + 20'000'000;
      if (open_loop_) {
        Dispatch();
        wake = std::min(wake, next_ns_);
      }
      void* tag;
      bool ok;
      auto st = cq_.AsyncNext(&tag, &ok, Deadline(wake));
      if (st == grpc::CompletionQueue::SHUTDOWN) break;
      if (st == grpc::CompletionQueue::GOT_EVENT) Done(static_cast<Call*>(tag));
    }
    // Cancel what is in flight and drain the queue before it is destroyed.
    for (auto& c : calls_) {
      if (c->busy) c->context->TryCancel();
    }
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) static_cast<Call*>(tag)->busy = false;
  }

 private:
  struct Call {
    std::unique_ptr<grpc::ClientContext> context;
    inference::ModelInferResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> reader;
    int64_t start_ns = 0;
    int64_t lag_ns = 0;
    bool busy = false;
  };

  void Issue(Call* c, int64_t intended_ns) {
    c->context = std::make_unique<grpc::ClientContext>();
    c->start_ns = intended_ns;
    c->lag_ns = NowNs() - intended_ns;
    c->busy = true;
    sent_.fetch_add(1, std::memory_order_relaxed);
    const auto& req = requests_[next_request_++ % requests_.size()];
    c->reader = stub_->AsyncModelInfer(c->context.get(), req, &cq_);
    c->reader->Finish(&c->response, &c->status, c);
  }

  void Done(Call* c) {
    c->busy = false;
    int64_t now = NowNs();
    Sample s{now, now - c->start_ns, c->lag_ns, 0};
    if (c->status.ok()) {
      sink_.Add(s);
    } else {
      s.status = kGrpcStatusBase + static_cast<int>(c->status.error_code());
      sink_.AddError(s, c->status.error_message());
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    if (!open_loop_) {
      Issue(c, now);
    } else if (!backlog_.empty()) {
      int64_t intended = backlog_.front();
      backlog_.pop_front();
      Issue(c, intended);
    } else {
      idle_.push_back(c);
    }
  }

  void Dispatch() {
    int64_t now = NowNs();
    while (next_ns_ <= now) {
      if (!idle_.empty()) {
        Call* c = idle_.back();
        idle_.pop_back();
        Issue(c, next_ns_);
      } else {
        backlog_.push_back(next_ns_);
      }
      next_ns_ = start_ns_ + schedule_->Next();
    }
  }

  std::unique_ptr<GRPCInferenceService::Stub> stub_;
  const std::vector<inference::ModelInferRequest>& requests_;
  SampleSink& sink_;
  const bool open_loop_;
  const int slots_;
  const int64_t start_ns_;
  const std::atomic<bool>& stop_;
  std::atomic<uint64_t>& sent_;
  size_t next_request_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Call>> calls_;
  std::vector<Call*> idle_;
  std::deque<int64_t> backlog_;
  std::unique_ptr<ArrivalSchedule> schedule_;
  int64_t next_ns_ = 0;
};

class GrpcLoad : public LoadEngine {
 public:
  GrpcLoad(std::string url, std::vector<inference::ModelInferRequest> requests)
      : url_(std::move(url)), requests_(std::move(requests)) {
    KILN_CHECK(!requests_.empty(), "no requests to send");
  }
  ~GrpcLoad() override { Stop(); }

 private:
  std::unique_ptr<LoadEngine::Worker> MakeWorker(const WorkerSpec& w) override {
    return std::make_unique<GrpcWorker>(url_, w.index, requests_, *w.sink, *w.config, w.slots,
                                        w.workers, w.start_ns, stop_, sent_);
  }

  std::string url_;
  std::vector<inference::ModelInferRequest> requests_;
};

Status FromGrpc(const grpc::Status& s, const std::string& what, const std::string& url) {
  std::string msg =
      fmt::format("{} on {} failed: gRPC {}: {}", what, url,
                  StatusLabel(kGrpcStatusBase + s.error_code()).substr(5), s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::NotFound(msg);
    default:
      return Status::Unavailable(msg);
  }
}

class GrpcControl : public ControlClient {
 public:
  explicit GrpcControl(std::string url)
      : url_(std::move(url)),
        stub_(GRPCInferenceService::NewStub(
            grpc::CreateChannel(url_, grpc::InsecureChannelCredentials()))) {}

  Result<ModelInfo> GetModel(const std::string& model, const std::string& version) override {
    inference::ModelMetadataRequest req;
    req.set_name(model);
    req.set_version(version);
    inference::ModelMetadataResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = stub_->ModelMetadata(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s, fmt::format("model metadata of '{}'", model), url_);
    ModelInfo info;
    info.name = resp.name();
    for (const auto& v : resp.versions()) info.versions.push_back(v);
    for (const auto& t : resp.inputs()) {
      info.inputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    for (const auto& t : resp.outputs()) {
      info.outputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    }
    inference::ModelConfigRequest creq;
    creq.set_name(model);
    creq.set_version(version);
    inference::ModelConfigResponse cresp;
    grpc::ClientContext cctx;
    cctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s = stub_->ModelConfig(&cctx, creq, &cresp);
    if (!s.ok()) return FromGrpc(s, fmt::format("model config of '{}'", model), url_);
    info.max_batch_size = cresp.config().max_batch_size();
    if (info.inputs.empty()) return Status::InvalidArgument("model metadata lists no inputs");
    return info;
  }

  Result<ServerCounters> GetStats(const std::string& model, const std::string& version) override {
    inference::ModelStatisticsRequest req;
    req.set_name(model);
    req.set_version(version);
    inference::ModelStatisticsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = stub_->ModelStatistics(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s, "statistics", url_);
    const inference::ModelStatistics* best = nullptr;
    long best_version = -1;
    for (const auto& m : resp.model_stats()) {
      long v = std::atol(m.version().c_str());
      if ((!version.empty() && m.version() == version) || (version.empty() && v > best_version)) {
        best = &m;
        best_version = v;
      }
    }
    if (best == nullptr) return Status::NotFound("statistics: no entry for the model version");
    ServerCounters c;
    c.inference_count = best->inference_count();
    c.execution_count = best->execution_count();
    const auto& is = best->inference_stats();
    auto d = [](const inference::StatisticDuration& x) {
      return ServerCounters::Duration{x.count(), x.ns()};
    };
    c.success = d(is.success());
    c.fail = d(is.fail());
    c.queue = d(is.queue());
    c.compute_input = d(is.compute_input());
    c.compute_infer = d(is.compute_infer());
    c.compute_output = d(is.compute_output());
    return c;
  }

 private:
  std::string url_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

}  // namespace

std::unique_ptr<ControlClient> MakeGrpcControl(const std::string& url) {
  return std::make_unique<GrpcControl>(url);
}

std::unique_ptr<LoadEngine> MakeGrpcLoad(const std::string& url, const std::string& model,
                                         const std::string& version,
                                         const std::vector<InputSet>& inputs,
                                         const std::vector<TensorSpec>& outputs,
                                         const std::vector<RequestParameter>& parameters) {
  std::vector<inference::ModelInferRequest> requests;
  for (const InputSet& set : inputs) {
    inference::ModelInferRequest r;
    r.set_model_name(model);
    r.set_model_version(version);
    for (const TensorData& t : set) {
      auto* in = r.add_inputs();
      in->set_name(t.name);
      in->set_datatype(t.datatype);
      for (int64_t d : t.shape) in->add_shape(d);
      r.add_raw_input_contents(t.raw);
    }
    for (const TensorSpec& o : outputs) r.add_outputs()->set_name(o.name);
    for (const RequestParameter& p : parameters) {
      inference::InferParameter& param = (*r.mutable_parameters())[p.name];
      if (p.type == "string") param.set_string_param(p.value);
      if (p.type == "bool") param.set_bool_param(p.value == "true");
      // Values were checked by ParseRequestParameter.
      const char* begin = p.value.data();
      const char* end = begin + p.value.size();
      if (p.type == "int") {
        int64_t v = 0;
        std::from_chars(begin, end, v);
        param.set_int64_param(v);
      }
      if (p.type == "uint") {
        uint64_t v = 0;
        std::from_chars(begin, end, v);
        param.set_uint64_param(v);
      }
      if (p.type == "double") {
        double v = 0;
        std::from_chars(begin, end, v);
        param.set_double_param(v);
      }
    }
    requests.push_back(std::move(r));
  }
  return std::make_unique<GrpcLoad>(url, std::move(requests));
}

}  // namespace kiln::bench
