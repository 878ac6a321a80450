// SPDX-License-Identifier: Apache-2.0
// Batcher: the threads around the policy, with a fake executor and (where time matters) a fake
// clock. Waits are on futures and condition variables with generous bounds; nothing sleeps.
#include "sched/batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "base/mutex.h"

namespace kiln {
namespace {

constexpr int64_t kUs = 1000;
constexpr auto kWait = std::chrono::seconds(20);

// Runs batches by echoing each request's id; requests whose id is blocked wait for Release.
class FakeExecutor final : public BatchExecutor {
 public:
  struct Run {
    int instance;
    std::vector<std::string> ids;
    BatchShape shape;
  };

  std::vector<RequestOutcome> Execute(int instance, std::span<const InferRequest* const> requests,
                                      const BatchShape& shape) override {
    std::vector<std::string> ids;
    for (const InferRequest* r : requests) ids.push_back(r->id);
    MutexLock lock(mu_);
    runs_.push_back({instance, ids, shape});
    if (++running_ >= need_concurrent_) concurrent_reached_ = true;
    cv_.NotifyAll();
    cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) {
      for (const std::string& id : ids) {
        if (blocked_.count(id)) return false;
      }
      return concurrent_reached_;
    });
    --running_;
    lock.Unlock();
    std::vector<RequestOutcome> out;
    for (const InferRequest* r : requests) {
      RequestOutcome o;
      if (r->id.starts_with("fail")) {
        o.response = Status::InvalidArgument("bad request " + r->id);
      } else {
        InferResponse response;
        response.id = r->id;
        o.response = std::move(response);
      }
      o.compute_input_ns = 10;
      o.compute_infer_ns = 20;
      o.compute_output_ns = 30;
      out.push_back(std::move(o));
    }
    return out;
  }

  void Block(const std::string& id) {
    MutexLock lock(mu_);
    blocked_.insert(id);
  }
  void Release(const std::string& id) {
    MutexLock lock(mu_);
    blocked_.erase(id);
    cv_.NotifyAll();
  }
  // Every Execute waits until `n` run at the same time.
  void NeedConcurrent(int n) {
    MutexLock lock(mu_);
    need_concurrent_ = n;
    concurrent_reached_ = false;
  }
  // Waits until `n` batches have started; false after kWait.
  bool WaitRuns(size_t n) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, kWait, [&]() KILN_REQUIRES(mu_) { return runs_.size() >= n; });
  }
  std::vector<Run> runs() {
    MutexLock lock(mu_);
    return runs_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<Run> runs_ KILN_GUARDED_BY(mu_);
  std::set<std::string> blocked_ KILN_GUARDED_BY(mu_);
  int running_ KILN_GUARDED_BY(mu_) = 0;
  int need_concurrent_ KILN_GUARDED_BY(mu_) = 0;
  bool concurrent_reached_ KILN_GUARDED_BY(mu_) = true;
};

// A sink that fails the test when Finish is called twice or Send at all (tensor models send no
// partial responses).
class OnceSink final : public ResponseSink {
 public:
  OnceSink(InferCallback done, std::string id) : done_(std::move(done)), id_(std::move(id)) {}
  void Send(InferResponse) override { ADD_FAILURE() << id_ << ": a partial response"; }
  void Finish(Result<InferResponse> result) override {
    if (finished_.exchange(true)) {
      ADD_FAILURE() << id_ << ": Finish called twice";
      return;
    }
    done_(std::move(result));
  }

 private:
  InferCallback done_;
  std::string id_;
  std::atomic<bool> finished_{false};
};

// Collects callback results, in the order the callbacks ran.
class Answers {
 public:
  InferCallback Callback(const std::string& name) {
    return [this, name](Result<InferResponse> r) {
      MutexLock lock(mu_);
      order_.push_back(name);
      results_.emplace(name, std::move(r));
      cv_.NotifyAll();
    };
  }
  bool Wait(size_t n) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, kWait, [&]() KILN_REQUIRES(mu_) { return order_.size() >= n; });
  }
  std::vector<std::string> order() {
    MutexLock lock(mu_);
    return order_;
  }
  bool has(const std::string& name) {
    MutexLock lock(mu_);
    return results_.count(name) > 0;
  }
  Status status(const std::string& name) {
    MutexLock lock(mu_);
    auto it = results_.find(name);
    if (it == results_.end()) return Status::NotFound("no answer for " + name);
    return it->second.ok() ? Status::OK() : it->second.status();
  }
  // The timing a successful answer carries (all zero when there is none).
  RequestTiming timing(const std::string& name) {
    MutexLock lock(mu_);
    auto it = results_.find(name);
    return it == results_.end() || !it->second.ok() ? RequestTiming{} : it->second->timing;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::string> order_ KILN_GUARDED_BY(mu_);
  std::map<std::string, Result<InferResponse>> results_ KILN_GUARDED_BY(mu_);
};

struct Fixture {
  explicit Fixture(BatchPolicyConfig policy, int instances = 1, const Clock* clock = nullptr) {
    executor = std::make_shared<FakeExecutor>();
    stats = std::make_shared<StatsCollector>();
    BatcherOptions options;
    options.name = "model 'm' version 1";
    options.policy = std::move(policy);
    options.num_instances = instances;
    options.clock = clock;
    options.stats = stats;
    Result<std::unique_ptr<Batcher>> b = Batcher::Create(std::move(options), executor);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    batcher = std::move(b).value();
  }

  Status Enqueue(const std::string& id, uint64_t priority = 0, int64_t batch_size = 1,
                 BatchShape shape = BatchShape{{{4}}},
                 std::shared_ptr<const Cancellation> cancellation = nullptr) {
    auto request = std::make_unique<InferRequest>();
    request->id = id;
    request->priority = priority;
    request->cancellation = std::move(cancellation);
    std::shared_ptr<ResponseSink> sink = std::make_shared<OnceSink>(answers.Callback(id), id);
    Status s = batcher->Enqueue(request, sink, std::move(shape), batch_size);
    if (s.ok()) {
      EXPECT_EQ(request, nullptr);
      EXPECT_EQ(sink, nullptr);
    } else {
      EXPECT_NE(request, nullptr);  // handed back
      EXPECT_NE(sink, nullptr);
    }
    return s;
  }

  std::shared_ptr<FakeExecutor> executor;
  std::shared_ptr<StatsCollector> stats;
  Answers answers;
  std::unique_ptr<Batcher> batcher;
};

BatchPolicyConfig Dynamic(int64_t max_batch, uint64_t delay_us = 0) {
  BatchPolicyConfig c;
  c.dynamic_batching = true;
  c.max_batch_size = max_batch;
  c.max_queue_delay_us = delay_us;
  return c;
}

TEST(BatcherTest, RunsRequestsAndRecordsStatistics) {
  Fixture f(BatchPolicyConfig{});
  ASSERT_TRUE(f.Enqueue("a").ok());
  ASSERT_TRUE(f.Enqueue("fail-b").ok());
  ASSERT_TRUE(f.answers.Wait(2));
  EXPECT_TRUE(f.answers.status("a").ok());
  EXPECT_EQ(f.answers.status("fail-b").code(), StatusCode::kInvalidArgument);
  f.batcher->Shutdown();
  const ModelStatistics s = f.stats->Snapshot();
  EXPECT_EQ(s.inference.success.count, 1u);
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.inference.compute_infer.count, 1u);
  EXPECT_EQ(s.inference.compute_infer.ns, 20u);
  EXPECT_EQ(s.inference.compute_output.ns, 30u);
  EXPECT_EQ(s.inference.queue.count, 1u);
  EXPECT_EQ(s.inference_count, 1u);
  EXPECT_GT(s.last_inference_ms, 0u);
}

TEST(BatcherTest, DelayExpiryFormsOneBatch) {
  FakeClock clock(1'000'000);
  Fixture f(Dynamic(8, 1000), 1, &clock);
  for (std::string id : {"a", "b", "c"}) ASSERT_TRUE(f.Enqueue(id).ok());
  // Fake time does not move: the policy waits for the delay, so nothing can have run.
  EXPECT_EQ(f.batcher->queued(), 3u);
  EXPECT_TRUE(f.executor->runs().empty());
  clock.Advance(999 * kUs);
  EXPECT_EQ(f.batcher->queued(), 3u);
  clock.Advance(1 * kUs);
  ASSERT_TRUE(f.answers.Wait(3));
  const auto runs = f.executor->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].ids, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(runs[0].shape, (BatchShape{{{4}}}));
  f.batcher->Shutdown();
  const ModelStatistics s = f.stats->Snapshot();
  EXPECT_EQ(s.inference.success.count, 3u);
  EXPECT_EQ(s.inference.queue.ns, 3u * 1000 * kUs);  // each waited exactly the delay
  // Each response carries what the statistics recorded for it.
  for (std::string id : {"a", "b", "c"}) {
    const RequestTiming t = f.answers.timing(id);
    EXPECT_EQ(t.queue_ns, static_cast<uint64_t>(1000 * kUs)) << id;
    EXPECT_EQ(t.compute_input_ns, 10u) << id;
    EXPECT_EQ(t.compute_infer_ns, 20u) << id;
    EXPECT_EQ(t.compute_output_ns, 30u) << id;
  }
}

TEST(BatcherTest, IncompatibleShapesRunInSeparateBatches) {
  FakeClock clock;
  Fixture f(Dynamic(8, 100), 1, &clock);
  ASSERT_TRUE(f.Enqueue("a", 0, 1, BatchShape{{{4}}}).ok());
  ASSERT_TRUE(f.Enqueue("b", 0, 2, BatchShape{{{5}}}).ok());
  ASSERT_TRUE(f.Enqueue("c", 0, 3, BatchShape{{{4}}}).ok());
  clock.Advance(100 * kUs);
  ASSERT_TRUE(f.answers.Wait(3));
  const auto runs = f.executor->runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].ids, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(runs[1].ids, (std::vector<std::string>{"b"}));
  EXPECT_EQ(runs[1].shape, (BatchShape{{{5}}}));
  f.batcher->Shutdown();
  EXPECT_EQ(f.stats->Snapshot().inference_count, 6u);  // batch elements, not requests
}

TEST(BatcherTest, DeadlineEnforcedWhileEveryInstanceIsBusy) {
  FakeClock clock;
  BatchPolicyConfig c = Dynamic(4);
  c.default_queue_policy.default_timeout_us = 500;
  Fixture f(c, 1, &clock);
  f.executor->Block("first");
  ASSERT_TRUE(f.Enqueue("first").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));  // the only instance is now busy
  ASSERT_TRUE(f.Enqueue("late").ok());
  clock.Advance(400 * kUs);
  EXPECT_FALSE(f.answers.has("late"));
  clock.Advance(100 * kUs);
  ASSERT_TRUE(f.answers.Wait(1));  // answered although the instance is still blocked
  EXPECT_EQ(f.answers.order(), std::vector<std::string>{"late"});
  const Status late = f.answers.status("late");
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(late.message(),
            "model 'm' version 1: the request timed out in the queue (waited 500 us, timeout "
            "500 us)");
  f.executor->Release("first");
  ASSERT_TRUE(f.answers.Wait(2));
  EXPECT_TRUE(f.answers.status("first").ok());
  f.batcher->Shutdown();
  EXPECT_EQ(f.executor->runs().size(), 1u);
  const ModelStatistics s = f.stats->Snapshot();
  EXPECT_EQ(s.inference.fail.count, 1u);
  EXPECT_EQ(s.inference.fail.ns, 500u * kUs);
  EXPECT_EQ(s.inference.success.count, 1u);
}

TEST(BatcherTest, DelayActionRunsExpiredRequestsLater) {
  FakeClock clock;
  BatchPolicyConfig c = Dynamic(1);
  c.default_queue_policy.timeout_action = TimeoutAction::kDelay;
  c.default_queue_policy.default_timeout_us = 100;
  c.default_queue_policy.allow_timeout_override = true;
  Fixture f(c, 1, &clock);
  f.executor->Block("first");
  ASSERT_TRUE(f.Enqueue("first").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  ASSERT_TRUE(f.Enqueue("old").ok());
  clock.Advance(200 * kUs);  // "old" is past its deadline: delayed, not rejected
  ASSERT_TRUE(f.Enqueue("new").ok());
  f.executor->Release("first");
  ASSERT_TRUE(f.answers.Wait(3));
  EXPECT_EQ(f.answers.order(), (std::vector<std::string>{"first", "new", "old"}));
  EXPECT_TRUE(f.answers.status("old").ok());
}

TEST(BatcherTest, QueueFullHandsTheRequestBack) {
  BatchPolicyConfig c = Dynamic(1);
  c.default_queue_policy.max_queue_size = 1;
  Fixture f(c);
  f.executor->Block("running");
  ASSERT_TRUE(f.Enqueue("running").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  ASSERT_TRUE(f.Enqueue("queued").ok());
  Status full = f.Enqueue("refused");
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "model 'm' version 1: the queue of priority level 1 is full (1 requests, "
            "max_queue_size 1)");
  f.executor->Release("running");
  ASSERT_TRUE(f.answers.Wait(2));
  f.batcher->Shutdown();
  EXPECT_FALSE(f.answers.has("refused"));
}

TEST(BatcherTest, CancelledQueuedRequestIsDroppedAndAnsweredAtOnce) {
  Fixture f(Dynamic(1));
  f.executor->Block("running");
  ASSERT_TRUE(f.Enqueue("running").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  auto cancel = std::make_shared<Cancellation>();
  ASSERT_TRUE(f.Enqueue("queued", 0, 1, BatchShape{{{4}}}, cancel).ok());
  ASSERT_TRUE(f.Enqueue("next").ok());
  EXPECT_EQ(f.batcher->queued(), 2u);
  cancel->Cancel();  // the client went away while its request waited
  ASSERT_TRUE(f.answers.Wait(1));
  EXPECT_EQ(f.answers.order(), std::vector<std::string>{"queued"});
  EXPECT_EQ(f.answers.status("queued").code(), StatusCode::kCancelled);
  EXPECT_EQ(f.batcher->queued(), 1u);
  cancel->Cancel();  // idempotent
  f.executor->Release("running");
  ASSERT_TRUE(f.answers.Wait(3));
  EXPECT_TRUE(f.answers.status("next").ok());
  for (const FakeExecutor::Run& run : f.executor->runs()) {
    EXPECT_EQ(std::count(run.ids.begin(), run.ids.end(), "queued"), 0) << "a cancelled request ran";
  }
  const ModelStatistics stats = f.stats->Snapshot();
  EXPECT_EQ(stats.failures[static_cast<size_t>(FailureReason::kCanceled)], 1u);
  EXPECT_EQ(stats.inference.success.count, 2u);
}

TEST(BatcherTest, CancelledBeforeEnqueueIsHandedBack) {
  Fixture f(Dynamic(1));
  auto cancel = std::make_shared<Cancellation>();
  cancel->Cancel();
  Status s = f.Enqueue("late", 0, 1, BatchShape{{{4}}}, cancel);
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  f.batcher->Shutdown();
  EXPECT_FALSE(f.answers.has("late"));
}

// A request cancelled after it was handed to an instance is answered CANCELLED and not run when
// its batch has not started yet, and answered normally when it has; never both, never twice.
TEST(BatcherTest, CancelAfterDispatchIsAnsweredOnceAndRunsAtMostOnce) {
  Fixture f(Dynamic(1), 2);
  int cancelled = 0, answered = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string id = "r" + std::to_string(i);
    auto cancel = std::make_shared<Cancellation>();
    ASSERT_TRUE(f.Enqueue(id, 0, 1, BatchShape{{{4}}}, cancel).ok());
    cancel->Cancel();
    ASSERT_TRUE(f.answers.Wait(static_cast<size_t>(i) + 1));
    const Status st = f.answers.status(id);
    size_t ran = 0;
    for (const FakeExecutor::Run& run : f.executor->runs()) {
      ran += static_cast<size_t>(std::count(run.ids.begin(), run.ids.end(), id));
    }
    if (st.code() == StatusCode::kCancelled) {
      ++cancelled;
      EXPECT_EQ(ran, 0u) << id << " was answered CANCELLED but ran";
    } else {
      ++answered;
      EXPECT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(ran, 1u) << id;
    }
  }
  f.batcher->Shutdown();
  EXPECT_EQ(f.answers.order().size(), 200u);  // each exactly once
  EXPECT_EQ(cancelled + answered, 200);
  EXPECT_EQ(f.stats->Snapshot().failures[static_cast<size_t>(FailureReason::kCanceled)],
            static_cast<uint64_t>(cancelled));
}

TEST(BatcherTest, PrioritiesOrderTheQueue) {
  BatchPolicyConfig c = Dynamic(1);
  c.priority_levels = 2;
  c.default_priority_level = 2;
  Fixture f(c);
  f.executor->Block("running");
  ASSERT_TRUE(f.Enqueue("running").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  ASSERT_TRUE(f.Enqueue("low-1", 0).ok());
  ASSERT_TRUE(f.Enqueue("low-2", 2).ok());
  ASSERT_TRUE(f.Enqueue("high", 1).ok());
  f.executor->Release("running");
  ASSERT_TRUE(f.answers.Wait(4));
  EXPECT_EQ(f.answers.order(), (std::vector<std::string>{"running", "high", "low-1", "low-2"}));
}

TEST(BatcherTest, InstancesRunBatchesConcurrently) {
  Fixture f(Dynamic(1), 3);
  f.executor->NeedConcurrent(3);  // each run waits until three run at once
  for (std::string id : {"a", "b", "c"}) ASSERT_TRUE(f.Enqueue(id).ok());
  ASSERT_TRUE(f.answers.Wait(3));
  std::set<int> instances;
  for (const auto& r : f.executor->runs()) instances.insert(r.instance);
  EXPECT_EQ(instances, (std::set<int>{0, 1, 2}));
}

TEST(BatcherTest, PreserveOrderingHoldsLaterResponses) {
  BatchPolicyConfig c = Dynamic(1);
  c.preserve_ordering = true;
  Fixture f(c, 2);
  f.executor->Block("slow");
  ASSERT_TRUE(f.Enqueue("slow").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  ASSERT_TRUE(f.Enqueue("fast-1").ok());
  ASSERT_TRUE(f.executor->WaitRuns(2));
  // The second instance finished fast-1 (and delivered, or rather held, its response) before it
  // can start fast-2.
  ASSERT_TRUE(f.Enqueue("fast-2").ok());
  ASSERT_TRUE(f.executor->WaitRuns(3));
  ASSERT_TRUE(f.Enqueue("fast-3").ok());
  ASSERT_TRUE(f.executor->WaitRuns(4));
  EXPECT_TRUE(f.answers.order().empty());
  f.executor->Release("slow");
  ASSERT_TRUE(f.answers.Wait(4));
  EXPECT_EQ(f.answers.order(), (std::vector<std::string>{"slow", "fast-1", "fast-2", "fast-3"}));
}

TEST(BatcherTest, PreserveOrderingDoesNotHoldExpiredAnswers) {
  FakeClock clock;
  BatchPolicyConfig c = Dynamic(1);
  c.preserve_ordering = true;
  c.default_queue_policy.default_timeout_us = 100;
  Fixture f(c, 1, &clock);
  f.executor->Block("slow");
  ASSERT_TRUE(f.Enqueue("slow").ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  ASSERT_TRUE(f.Enqueue("expires").ok());
  clock.Advance(100 * kUs);
  ASSERT_TRUE(f.answers.Wait(1));
  EXPECT_EQ(f.answers.order(), std::vector<std::string>{"expires"});
  f.executor->Release("slow");
  ASSERT_TRUE(f.Enqueue("next").ok());
  ASSERT_TRUE(f.answers.Wait(3));
  EXPECT_EQ(f.answers.order(), (std::vector<std::string>{"expires", "slow", "next"}));
}

TEST(BatcherTest, ShutdownDrainsEverythingThenRefuses) {
  FakeClock clock;
  Fixture f(Dynamic(4, 1'000'000), 1, &clock);  // a long delay: only the flush runs them
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(f.Enqueue("r" + std::to_string(i)).ok());
  ASSERT_TRUE(f.executor->WaitRuns(1));
  EXPECT_EQ(f.batcher->queued(), 2u);  // a full batch of 4 ran at once; 2 wait for the delay
  f.batcher->Shutdown();
  EXPECT_EQ(f.answers.order().size(), 6u);
  EXPECT_EQ(f.batcher->queued(), 0u);
  Status s = f.Enqueue("after");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "model 'm' version 1 is shutting down");
}

TEST(BatcherTest, DestroyedFromItsOwnCallback) {
  auto executor = std::make_shared<FakeExecutor>();
  BatcherOptions options;
  options.name = "m";
  options.num_instances = 2;
  auto batcher = std::shared_ptr<Batcher>(Batcher::Create(options, executor).value().release());
  std::promise<void> done;
  auto request = std::make_unique<InferRequest>();
  Batcher* raw = batcher.get();
  InferCallback callback = [&done,
                            keep = std::move(batcher)](const Result<InferResponse>& r) mutable {
    EXPECT_TRUE(r.ok());
    keep.reset();  // the last owner: ~Batcher runs on the batcher's own thread
    done.set_value();
  };
  std::shared_ptr<ResponseSink> sink = CallbackSink(std::move(callback));
  ASSERT_TRUE(raw->Enqueue(request, sink, BatchShape{}, 1).ok());
  EXPECT_EQ(done.get_future().wait_for(kWait), std::future_status::ready);
}

// Records the thread each batch runs on; with a clock, advances it by `cost_ns` per batch (the
// batch's measured run time).
class ThreadRecordingExecutor final : public BatchExecutor {
 public:
  explicit ThreadRecordingExecutor(FakeClock* clock = nullptr, int64_t cost_ns = 0)
      : clock_(clock), cost_ns_(cost_ns) {}
  std::vector<RequestOutcome> Execute(int, std::span<const InferRequest* const> requests,
                                      const BatchShape&) override {
    {
      MutexLock lock(mu_);
      threads_.push_back(std::this_thread::get_id());
      cv_.NotifyAll();
      cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return !hold_; });
    }
    if (clock_ != nullptr) clock_->Advance(cost_ns_);
    std::vector<RequestOutcome> out(requests.size());
    for (RequestOutcome& o : out) o.response = InferResponse{};
    return out;
  }
  std::vector<std::thread::id> threads() {
    MutexLock lock(mu_);
    return threads_;
  }
  void Hold(bool hold) {
    MutexLock lock(mu_);
    hold_ = hold;
    cv_.NotifyAll();
  }
  bool WaitRuns(size_t n) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, kWait, [&]() KILN_REQUIRES(mu_) { return threads_.size() >= n; });
  }

 private:
  FakeClock* clock_;
  int64_t cost_ns_;
  Mutex mu_;
  CondVar cv_;
  std::vector<std::thread::id> threads_ KILN_GUARDED_BY(mu_);
  bool hold_ KILN_GUARDED_BY(mu_) = false;
};

// Enqueues one request and waits for its answer; true when `done` ran on this thread, inside
// Enqueue.
bool RunOne(Batcher& batcher) {
  auto request = std::make_unique<InferRequest>();
  std::promise<void> answered;
  std::atomic<bool> returned{false};
  bool here = false;
  const std::thread::id caller = std::this_thread::get_id();
  InferCallback done = [&](const Result<InferResponse>& r) {
    EXPECT_TRUE(r.ok());
    here = std::this_thread::get_id() == caller && !returned.load();
    answered.set_value();
  };
  std::shared_ptr<ResponseSink> sink = CallbackSink(done);
  EXPECT_TRUE(batcher.Enqueue(request, sink, BatchShape{}, 1).ok());
  returned = true;
  EXPECT_EQ(answered.get_future().wait_for(kWait), std::future_status::ready);
  return here;
}

// Options for the inline-execution tests: one model "m" on `clock`; with two instances the
// second is surely free when the first answers (the first may still be on its way back to the
// queue).
BatcherOptions InlineOptions(const FakeClock* clock, int64_t inline_max_ns, int instances = 2) {
  BatcherOptions options;
  options.name = "m";
  options.clock = clock;
  options.inline_max_ns = inline_max_ns;
  options.num_instances = instances;
  return options;
}

TEST(BatcherTest, FastModelRunsOnTheCallerOnceMeasured) {
  FakeClock clock;
  auto executor = std::make_shared<ThreadRecordingExecutor>(&clock, 20 * kUs);
  auto batcher = Batcher::Create(InlineOptions(&clock, 100 * kUs), executor).value();
  // No run time is known yet: the first batch runs on the instance's thread.
  EXPECT_FALSE(RunOne(*batcher));
  // 20 us on average: the next ones run inside Enqueue, on this thread.
  EXPECT_TRUE(RunOne(*batcher));
  EXPECT_TRUE(RunOne(*batcher));
  std::vector<std::thread::id> threads = executor->threads();
  ASSERT_EQ(threads.size(), 3u);
  EXPECT_NE(threads[0], std::this_thread::get_id());
  EXPECT_EQ(threads[1], std::this_thread::get_id());
  EXPECT_EQ(threads[2], std::this_thread::get_id());
}

TEST(BatcherTest, SlowModelOrInlineOffRunsOnTheInstanceThread) {
  for (int64_t cost_us : {0, 500}) {
    SCOPED_TRACE(cost_us);
    FakeClock clock;
    auto executor = std::make_shared<ThreadRecordingExecutor>(&clock, cost_us * kUs);
    // A 500 us model is over the 100 us limit; a 0 us one runs with inline execution off.
    auto batcher =
        Batcher::Create(InlineOptions(&clock, cost_us == 0 ? 0 : 100 * kUs, 1), executor).value();
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(RunOne(*batcher));
    for (std::thread::id t : executor->threads()) EXPECT_NE(t, std::this_thread::get_id());
  }
}

TEST(BatcherTest, ShutdownWaitsForABatchRunningOnACaller) {
  FakeClock clock;
  auto executor = std::make_shared<ThreadRecordingExecutor>(&clock, 1 * kUs);
  auto batcher = Batcher::Create(InlineOptions(&clock, 100 * kUs), executor).value();
  EXPECT_FALSE(RunOne(*batcher));  // measured: the next one runs inline
  executor->Hold(true);
  std::thread caller([&] { EXPECT_TRUE(RunOne(*batcher)); });
  ASSERT_TRUE(executor->WaitRuns(2));
  std::atomic<bool> shut{false};
  std::thread stopper([&] {
    batcher->Shutdown();
    shut = true;
  });
  // Shutdown cannot finish while the caller's batch runs (it would return with work in flight).
  for (int i = 0; i < 50 && !shut; ++i) std::this_thread::yield();
  EXPECT_FALSE(shut.load());
  executor->Hold(false);
  caller.join();
  stopper.join();
  EXPECT_TRUE(shut.load());
}

TEST(BatcherTest, DestroyedFromItsOwnInlineCallback) {
  FakeClock clock;
  auto executor = std::make_shared<ThreadRecordingExecutor>(&clock, 1 * kUs);
  auto batcher = std::shared_ptr<Batcher>(
      Batcher::Create(InlineOptions(&clock, 100 * kUs), executor).value().release());
  EXPECT_FALSE(RunOne(*batcher));
  std::promise<void> done;
  auto request = std::make_unique<InferRequest>();
  Batcher* raw = batcher.get();
  InferCallback callback = [&done,
                            keep = std::move(batcher)](const Result<InferResponse>& r) mutable {
    EXPECT_TRUE(r.ok());
    keep.reset();  // the last owner: ~Batcher runs inside Enqueue's inline batch
    done.set_value();
  };
  std::shared_ptr<ResponseSink> sink = CallbackSink(std::move(callback));
  ASSERT_TRUE(raw->Enqueue(request, sink, BatchShape{}, 1).ok());
  EXPECT_EQ(done.get_future().wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(executor->threads().back(), std::this_thread::get_id());
}

TEST(BatcherTest, InvalidOptions) {
  auto executor = std::make_shared<FakeExecutor>();
  BatcherOptions options;
  options.name = "model 'm' version 1";
  options.num_instances = 0;
  EXPECT_EQ(Batcher::Create(options, executor).status().code(), StatusCode::kInvalidArgument);
  options.num_instances = 1;
  options.policy = Dynamic(4);
  options.policy.preferred_batch_sizes = {5};
  Result<std::unique_ptr<Batcher>> b = Batcher::Create(options, executor);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "model 'm' version 1: dynamic_batching.preferred_batch_size 5 is out of range 1..4 "
            "(max_batch_size)");
}

}  // namespace
}  // namespace kiln
