// SPDX-License-Identifier: Apache-2.0
// The protocol-neutral inference path (inference.h).

#include "server/inference.h"

#include <fmt/format.h>

#include <atomic>
#include <span>
#include <utility>

#include "base/logging.h"
#include "repo/rollout.h"
#include "server/gen_infer.h"
#include "server/trace.h"
#include "tensor/classification.h"

namespace kiln {
namespace {

// Replaces each output named in `classify` by its top-k classes, with the labels of the model's
// label_filename.
Status ClassifyOutputs(const ModelSignature& signature, const std::vector<ClassifyOutput>& classify,
                       InferResponse* response) {
  for (const ClassifyOutput& c : classify) {
    for (InferOutput& output : response->outputs) {
      if (output.name != c.name) continue;
      const auto labels = signature.output_labels.find(c.name);
      Result<OwnedTensor> classes = Classify(
          output.tensor.view(), c.k, signature.max_batch_size > 0,
          labels == signature.output_labels.end() ? std::span<const std::string>()
                                                  : std::span<const std::string>(labels->second));
      if (!classes.ok()) {
        return Status::InvalidArgument(
            fmt::format("output '{}': {}", c.name, classes.status().message()));
      }
      output.tensor = std::move(classes).value();
    }
  }
  return Status::OK();
}

// Between the model and the protocol's sink: classification, and exactly one Finish.
class InferenceSink final : public ResponseSink {
 public:
  InferenceSink(std::shared_ptr<LoadedModel> model, std::vector<ClassifyOutput> classify,
                std::shared_ptr<ResponseSink> out, std::shared_ptr<RequestTrace> trace)
      : model_(std::move(model)),
        classify_(std::move(classify)),
        out_(std::move(out)),
        trace_(std::move(trace)) {}

  // A model that drops the request without answering (a broken LoadedModel contract) still gets
  // it answered, so no connection and no drain ever waits for it.
  ~InferenceSink() override {
    if (!finished_.load(std::memory_order_acquire)) {
      Finish(
          Status::Internal(fmt::format("model '{}' version {} dropped the request without "
                                       "answering it",
                                       model_->name(), model_->version())));
    }
  }

  void Send(InferResponse partial) override {
    if (finished_.load(std::memory_order_acquire)) return;
    if (Status s = Classified(partial); !s.ok()) {
      // The request fails with the error; the model's own final answer is then dropped quietly.
      failed_early_.store(true, std::memory_order_release);
      Finish(std::move(s));
      return;
    }
    out_->Send(std::move(partial));
  }

  void Finish(Result<InferResponse> result) override {
    if (finished_.exchange(true, std::memory_order_acq_rel)) {
      if (failed_early_.load(std::memory_order_acquire)) return;
      KILN_LOG_ERROR(
          "model '{}' version {} answered a request twice; the second answer is "
          "dropped",
          model_->name(), model_->version());
      return;
    }
    if (result.ok()) {
      if (Status s = Classified(*result); !s.ok()) result = std::move(s);
    }
    if (trace_ != nullptr) {
      if (result.ok()) {
        trace_->End(Status::OK(), &result->timing, &result->step_timings);
      } else {
        trace_->End(result.status(), nullptr, nullptr);
      }
    }
    out_->Finish(std::move(result));
  }

  size_t backlog() const override { return out_->backlog(); }
  bool streaming() const override { return out_->streaming(); }

 private:
  Status Classified(InferResponse& response) const {
    return classify_.empty() ? Status::OK()
                             : ClassifyOutputs(model_->signature(), classify_, &response);
  }

  std::shared_ptr<LoadedModel> model_;
  std::vector<ClassifyOutput> classify_;
  std::shared_ptr<ResponseSink> out_;
  const std::shared_ptr<RequestTrace> trace_;  // null: not traced
  std::atomic<bool> finished_{false};
  std::atomic<bool> failed_early_{false};  // a partial response failed classification
};

}  // namespace

Result<std::shared_ptr<LoadedModel>> FindModel(const ModelManager& manager, std::string_view name,
                                               int64_t version, const HeaderLookup& headers) {
  if (name.empty()) return Status::InvalidArgument("the request names no model ('name' is empty)");
  return RouteModel(manager, name, version, headers);
}

void StartInference(std::shared_ptr<LoadedModel> model, std::unique_ptr<InferRequest> request,
                    std::vector<ClassifyOutput> classify, std::shared_ptr<ResponseSink> sink) {
  std::shared_ptr<LoadedModel> model_ref = model;
  LoadedModel& target = *model;
  const bool generative = target.generative();
  std::shared_ptr<RequestTrace> trace = Tracer::Global().StartRequest(
      target.name(), target.version(), request->id, request->traceparent);
  auto guarded = std::make_shared<InferenceSink>(std::move(model), std::move(classify),
                                                 std::move(sink), std::move(trace));
  if (generative) {
    StartGenerativeInference(std::move(model_ref), std::move(request), std::move(guarded));
    return;
  }
  target.Infer(std::move(request), std::move(guarded));
}

}  // namespace kiln
