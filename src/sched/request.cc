// SPDX-License-Identifier: Apache-2.0
#include "sched/request.h"

#include <utility>

namespace kiln {

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
