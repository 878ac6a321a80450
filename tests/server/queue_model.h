// SPDX-License-Identifier: Apache-2.0
#pragma once
// A model for the protocol tests with a real scheduler behind it (sched/batcher.h: one
// instance, no batching) and an executor that holds each run until released, so a request
// sent behind a running one waits in the queue as on a busy model. The cancellation tests of
// both protocols use it: a client that leaves must get its queued request dropped from the
// queue, and its running request's cancellation set.
//
//   auto m = std::make_shared<QueueModel>("queue", signature);
//   m->executor().Hold(true);
//   ... send a request, m->executor().WaitStarted(1), send another, close its connection ...
//   EXPECT_TRUE(m->WaitCanceled(1));   // counted as kCanceled, never run

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "repo/model_manager.h"
#include "sched/batcher.h"
#include "sched/stats.h"

namespace kiln::testing {

// OUTPUT = 2 * INPUT (FP32), once released; records whether each request it runs is cancelled
// by the time the run is released.
class HoldingExecutor final : public BatchExecutor {
 public:
  explicit HoldingExecutor(std::string model) : model_(std::move(model)) {}

  std::vector<RequestOutcome> Execute(int, std::span<const InferRequest* const> requests,
                                      const BatchShape&) override {
    MutexLock lock(mu_);
    ++started_;
    running_ = requests.empty() ? nullptr : requests[0];
    cv_.NotifyAll();
    cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return !hold_ || release_one_ > 0; });
    if (release_one_ > 0) --release_one_;
    running_ = nullptr;
    std::vector<RequestOutcome> out;
    for (const InferRequest* r : requests) {
      cancelled_when_released_.push_back(r->cancelled());
      RequestOutcome o;
      InferResponse response;
      response.model_name = model_;
      response.model_version = 1;
      response.id = r->id;
      if (!r->inputs.empty() && r->inputs[0].tensor.dtype() == DataType::kFloat32) {
        const OwnedTensor& in = r->inputs[0].tensor;
        OwnedTensor t = OwnedTensor::Allocate(DataType::kFloat32, in.shape()).value();
        for (int64_t i = 0; i < in.num_elements(); ++i)
          t.data<float>()[i] = 2 * in.data<float>()[i];
        response.outputs.push_back({"OUTPUT", std::move(t)});
      }
      o.response = std::move(response);
      out.push_back(std::move(o));
    }
    return out;
  }

  void Hold(bool hold) {
    MutexLock lock(mu_);
    hold_ = hold;
    cv_.NotifyAll();
  }
  // Lets one held run finish.
  void ReleaseOne() {
    MutexLock lock(mu_);
    ++release_one_;
    cv_.NotifyAll();
  }
  bool WaitStarted(int n) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, std::chrono::seconds(10),
                       [&]() KILN_REQUIRES(mu_) { return started_ >= n; });
  }
  // Waits until the request running now (held) is cancelled.
  bool WaitRunningCancelled() {
    for (int i = 0; i < 1000; ++i) {
      {
        MutexLock lock(mu_);
        if (running_ != nullptr && running_->cancelled()) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  int started() {
    MutexLock lock(mu_);
    return started_;
  }
  std::vector<bool> cancelled_when_released() {
    MutexLock lock(mu_);
    return cancelled_when_released_;
  }

 private:
  const std::string model_;
  Mutex mu_;
  CondVar cv_;
  bool hold_ KILN_GUARDED_BY(mu_) = false;
  int release_one_ KILN_GUARDED_BY(mu_) = 0;
  int started_ KILN_GUARDED_BY(mu_) = 0;
  const InferRequest* running_ KILN_GUARDED_BY(mu_) = nullptr;
  std::vector<bool> cancelled_when_released_ KILN_GUARDED_BY(mu_);
};

class QueueModel final : public LoadedModel {
 public:
  QueueModel(std::string name, ModelSignature signature)
      : name_(std::move(name)),
        signature_(std::move(signature)),
        executor_(std::make_shared<HoldingExecutor>(name_)),
        stats_(std::make_shared<StatsCollector>()) {
    BatcherOptions options;
    options.name = "model '" + name_ + "' version 1";
    options.stats = stats_;
    batcher_ = Batcher::Create(std::move(options), executor_).value();
  }
  ~QueueModel() override {
    executor_->Hold(false);
    batcher_->Shutdown();
  }

  HoldingExecutor& executor() { return *executor_; }

  const std::string& name() const override { return name_; }
  int64_t version() const override { return 1; }
  const ModelSignature& signature() const override { return signature_; }
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    Status s = batcher_->Enqueue(request, sink, BatchShape{}, 1);
    if (!s.ok()) sink->Finish(std::move(s));
  }
  ModelStatistics Statistics() const override { return stats_->Snapshot(); }
  size_t PendingRequestCount() const override { return batcher_->queued(); }

  // Waits until `n` requests were answered CANCELLED by the scheduler.
  bool WaitCanceled(uint64_t n) const {
    for (int i = 0; i < 1000; ++i) {
      if (Statistics().failures[static_cast<size_t>(FailureReason::kCanceled)] >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  const std::string name_;
  const ModelSignature signature_;
  std::shared_ptr<HoldingExecutor> executor_;
  std::shared_ptr<StatsCollector> stats_;
  std::unique_ptr<Batcher> batcher_;
};

}  // namespace kiln::testing
