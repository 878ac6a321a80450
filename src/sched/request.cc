// SPDX-License-Identifier: Apache-2.0
#include "sched/request.h"

#include <fmt/format.h>

#include <utility>

namespace kiln {

Status SetRoutingParameter(std::string_view key, std::string_view value, InferRequest* request) {
  if (key == "precision") {
    if (value != "fp32" && value != "fp16" && value != "bf16" && value != "int8") {
      return Status::InvalidArgument(fmt::format(
          "request parameter 'precision' must be one of fp32, fp16, bf16, int8; got '{}'", value));
    }
    request->precision = std::string(value);
    return Status::OK();
  }
  if (key == "service_class") {
    if (value != "guaranteed" && value != "best_effort") {
      return Status::InvalidArgument(fmt::format(
          "request parameter 'service_class' must be 'guaranteed' or 'best_effort'; got '{}'",
          value));
    }
    request->service_class = value == "guaranteed" ? std::string() : std::string(value);
    return Status::OK();
  }
  return Status::InvalidArgument(fmt::format("'{}' is not a routing parameter", key));
}

void Cancellation::Cancel() {
  std::vector<std::function<void()>> run;
  {
    MutexLock lock(mu_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    run.swap(callbacks_);
  }
  for (std::function<void()>& fn : run) fn();
}

void Cancellation::OnCancel(std::function<void()> fn) const {
  {
    MutexLock lock(mu_);
    if (!cancelled_.load(std::memory_order_acquire)) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

namespace {

class FunctionSink final : public ResponseSink {
 public:
  FunctionSink(InferCallback done, std::function<void(InferResponse)> partial)
      : done_(std::move(done)), partial_(std::move(partial)) {}
  void Send(InferResponse partial) override {
    if (partial_) partial_(std::move(partial));
  }
  void Finish(Result<InferResponse> result) override {
    InferCallback done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(result));
  }

 private:
  InferCallback done_;
  std::function<void(InferResponse)> partial_;
};

}  // namespace

std::shared_ptr<ResponseSink> CallbackSink(InferCallback done,
                                           std::function<void(InferResponse)> partial) {
  return std::make_shared<FunctionSink>(std::move(done), std::move(partial));
}

}  // namespace kiln
