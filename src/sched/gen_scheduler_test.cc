// SPDX-License-Identifier: Apache-2.0
// GenScheduler: the thread around GenPolicy, with a fake executor, a counter KV space and a fake
// clock. Waits are on condition variables with generous bounds; nothing sleeps to pass time.
#include "sched/gen_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "sched/clock.h"

namespace kiln {
namespace {

constexpr auto kWait = std::chrono::seconds(20);
// Enough for a sequence that decodes "forever" (until the test cancels it or shuts down).
constexpr int64_t kManyBlocks = int64_t{1} << 50;

// A counter GenKvSpace (block size 16). Called from the scheduler's thread only; the test reads
// it once the scheduler has been shut down, or through the executor's lock (see FakeExecutor).
class FakeKv final : public GenKvSpace {
 public:
  explicit FakeKv(int64_t num_blocks) : num_blocks_(num_blocks) {}
  int64_t num_free_blocks() const override { return num_blocks_ - used_ - external_; }
  int64_t num_blocks() const override { return num_blocks_; }
  int64_t BlocksToAdmit(GenSeqId, int64_t new_len) const override {
    ++admit_calls_;
    return Blocks(new_len);
  }
  int64_t MatchPrefix(GenSeqId) override { return 0; }
  bool Reserve(GenSeqId seq, int64_t new_len) override {
    const int64_t need = Blocks(new_len) - held_[seq];
    if (need <= 0) return true;
    if (need > num_free_blocks()) return false;
    held_[seq] += need;
    used_ += need;
    return true;
  }
  void Free(GenSeqId seq) override {
    used_ -= held_[seq];
    held_.erase(seq);
  }
  void Fork(GenSeqId, GenSeqId child) override { held_[child] = 0; }

  int64_t used() const { return used_; }
  int64_t admit_calls() const { return admit_calls_.load(); }
  std::atomic<int64_t> external_{0};  // blocks held outside the policy

 private:
  static int64_t Blocks(int64_t len) { return (len + 15) / 16; }
  const int64_t num_blocks_;
  int64_t used_ = 0;
  std::map<GenSeqId, int64_t> held_;
  mutable std::atomic<int64_t> admit_calls_{0};
};

// Samples a token for each chunk that wants logits; a sequence finishes after max_new tokens
// (set per sequence; unset: never). Sequences listed in fork_after_first get one fork (id +
// 1000) after their first token. Execute can be held (Hold/Release) to freeze the loop.
class FakeExecutor final : public GenExecutor {
 public:
  void Execute(const StepPlan& plan, std::vector<ChunkOutcome>* outcomes,
               std::vector<GenFork>* forks) override {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [&]() KILN_REQUIRES(mu_) { return !held_; });
    for (const ScheduledChunk& c : plan.run) {
      ChunkOutcome o;
      o.seq = c.seq;
      if (c.wants_logits) {
        o.appended = true;
        const int64_t n = ++generated_[c.seq];
        auto it = max_new_.find(c.seq);
        o.finished = it != max_new_.end() && n >= it->second;
        if (o.finished) finished_.push_back(c.seq);
        if (n == 1 && fork_after_first_.count(c.seq) > 0 && !o.finished) {
          forks->push_back({c.seq, c.seq + 1000, c.pos0 + c.num_tokens + 1});
        }
      }
      outcomes->push_back(o);
      ++chunks_[c.seq];
    }
    ++steps_;
    cv_.NotifyAll();
  }
  void Dropped(GenSeqId seq, const Status& why) override {
    MutexLock lock(mu_);
    dropped_[seq] = why;
    cv_.NotifyAll();
  }
  void Preempted(std::span<const GenSeqId> seqs) override {
    MutexLock lock(mu_);
    preempted_ += static_cast<int64_t>(seqs.size());
  }

  void SetMaxNew(GenSeqId seq, int64_t n) {
    MutexLock lock(mu_);
    max_new_[seq] = n;
  }
  void ForkAfterFirst(GenSeqId seq) {
    MutexLock lock(mu_);
    fork_after_first_[seq] = true;
  }
  void Hold() {
    MutexLock lock(mu_);
    held_ = true;
  }
  void Release() {
    MutexLock lock(mu_);
    held_ = false;
    cv_.NotifyAll();
  }
  // Waits until pred() holds (checked under the lock); false after kWait.
  template <typename Pred>
  bool WaitFor(Pred pred) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, kWait, [&]() KILN_REQUIRES(mu_) { return pred(); });
  }
  bool WaitDropped(GenSeqId seq) {
    return WaitFor([&]() KILN_REQUIRES(mu_) { return dropped_.count(seq) > 0; });
  }
  bool WaitFinished(GenSeqId seq) {
    return WaitFor([&]() KILN_REQUIRES(mu_) {
      return std::find(finished_.begin(), finished_.end(), seq) != finished_.end();
    });
  }
  bool WaitSteps(int64_t n) {
    return WaitFor([&]() KILN_REQUIRES(mu_) { return steps_ >= n; });
  }
  Status dropped(GenSeqId seq) {
    MutexLock lock(mu_);
    auto it = dropped_.find(seq);
    return it == dropped_.end() ? Status::OK() : it->second;
  }
  size_t num_dropped() {
    MutexLock lock(mu_);
    return dropped_.size();
  }
  int64_t chunks(GenSeqId seq) {
    MutexLock lock(mu_);
    return chunks_[seq];
  }
  int64_t steps() {
    MutexLock lock(mu_);
    return steps_;
  }
  int64_t generated(GenSeqId seq) {
    MutexLock lock(mu_);
    return generated_[seq];
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool held_ KILN_GUARDED_BY(mu_) = false;
  std::map<GenSeqId, int64_t> max_new_ KILN_GUARDED_BY(mu_);
  std::map<GenSeqId, bool> fork_after_first_ KILN_GUARDED_BY(mu_);
  std::map<GenSeqId, int64_t> generated_ KILN_GUARDED_BY(mu_);
  std::map<GenSeqId, int64_t> chunks_ KILN_GUARDED_BY(mu_);
  std::map<GenSeqId, Status> dropped_ KILN_GUARDED_BY(mu_);
  std::vector<GenSeqId> finished_ KILN_GUARDED_BY(mu_);
  int64_t steps_ KILN_GUARDED_BY(mu_) = 0;
  int64_t preempted_ KILN_GUARDED_BY(mu_) = 0;
};

GenSeqInfo Info(GenSeqId id, int64_t num_tokens, int64_t deadline_ns = 0) {
  GenSeqInfo info;
  info.id = id;
  info.num_tokens = num_tokens;
  info.arrival = static_cast<int64_t>(id);
  info.deadline_ns = deadline_ns;
  return info;
}

GenPolicyOptions Options(int64_t budget = 512, int64_t max_num_seqs = 64) {
  GenPolicyOptions o;
  o.max_num_batched_tokens = budget;
  o.max_num_seqs = max_num_seqs;
  return o;
}

TEST(GenSchedulerTest, RunsSequencesToTheEnd) {
  FakeKv kv(kManyBlocks);
  FakeExecutor ex;
  FakeClock clock;
  GenScheduler sched(Options(), &kv, &ex, clock);
  ex.SetMaxNew(1, 3);
  ex.SetMaxNew(2, 5);
  ASSERT_TRUE(sched.Start().ok());
  EXPECT_EQ(sched.Start().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());
  ASSERT_TRUE(ex.WaitFinished(1));
  ASSERT_TRUE(sched.Submit(Info(2, 20)).ok());
  ASSERT_TRUE(ex.WaitFinished(2));
  // 1: prompt step + 2 decodes; 2: prompt step + 4 decodes; never together.
  EXPECT_EQ(ex.chunks(1), 3);
  EXPECT_EQ(ex.chunks(2), 5);
  sched.Shutdown(clock.NowNs());
  GenSchedulerStats st = sched.stats();
  EXPECT_EQ(st.steps, 8);
  EXPECT_EQ(st.batched_tokens, 10 + 2 + 20 + 4);
  EXPECT_EQ(st.policy.running, 0);
  EXPECT_EQ(st.policy.waiting, 0);
  EXPECT_EQ(ex.num_dropped(), 0u);
  EXPECT_EQ(kv.used(), 0);
}

TEST(GenSchedulerTest, SubmitAnswersAtOnce) {
  FakeKv kv(kManyBlocks);
  FakeExecutor ex;
  FakeClock clock;
  GenPolicyOptions o = Options();
  o.max_queue_size = 1;
  {
    GenScheduler sched(o, &kv, &ex, clock);  // not started: nothing is taken off the queue
    ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());
    EXPECT_EQ(sched.Submit(Info(2, 10)).code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(sched.Submit(Info(3, 0)).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(sched.stats().policy.waiting, 1);
    sched.Shutdown(clock.NowNs());  // never started: drops 1 here
    EXPECT_EQ(ex.dropped(1).code(), StatusCode::kUnavailable);
    EXPECT_EQ(sched.Submit(Info(4, 10)).code(), StatusCode::kUnavailable);
    EXPECT_EQ(sched.Start().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(ex.num_dropped(), 1u);
}

TEST(GenSchedulerTest, CancelWaitingAndRunning) {
  FakeKv kv(kManyBlocks);
  FakeExecutor ex;
  FakeClock clock;
  GenScheduler sched(Options(512, /*max_num_seqs=*/1), &kv, &ex, clock);
  ASSERT_TRUE(sched.Start().ok());
  ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());  // runs forever
  ASSERT_TRUE(ex.WaitSteps(1));
  ASSERT_TRUE(sched.Submit(Info(2, 10)).ok());  // waits behind max_num_seqs
  sched.Cancel(2);
  ASSERT_TRUE(ex.WaitDropped(2));
  Status why = ex.dropped(2);
  EXPECT_EQ(why.code(), StatusCode::kCancelled);
  EXPECT_EQ(why.message(), "request cancelled");
  EXPECT_EQ(ex.chunks(2), 0);
  sched.Cancel(1);
  ASSERT_TRUE(ex.WaitDropped(1));
  EXPECT_EQ(ex.dropped(1).code(), StatusCode::kCancelled);
  sched.Shutdown(clock.NowNs());
  EXPECT_EQ(kv.used(), 0);
  EXPECT_TRUE(sched.stats().policy.running == 0);
}

TEST(GenSchedulerTest, WaitingSequenceExpires) {
  FakeKv kv(kManyBlocks);
  FakeExecutor ex;
  FakeClock clock(1'000);
  GenScheduler sched(Options(512, /*max_num_seqs=*/1), &kv, &ex, clock);
  ASSERT_TRUE(sched.Start().ok());
  ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());  // decodes forever
  ASSERT_TRUE(ex.WaitSteps(1));
  ASSERT_TRUE(sched.Submit(Info(2, 10, /*deadline_ns=*/5'000)).ok());
  const int64_t steps = ex.steps();
  ASSERT_TRUE(ex.WaitSteps(steps + 3));
  EXPECT_TRUE(ex.dropped(2).ok());  // not yet
  clock.Set(5'000);
  ASSERT_TRUE(ex.WaitDropped(2));
  Status why = ex.dropped(2);
  EXPECT_EQ(why.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(why.message(), "request timed out in the queue");
  sched.Shutdown(clock.NowNs());
  EXPECT_EQ(ex.dropped(1).code(), StatusCode::kUnavailable);
}

TEST(GenSchedulerTest, ExpiresWhileNothingCanRun) {
  // Nothing runs (the free blocks are held elsewhere) and the loop sleeps: it still wakes for
  // the deadline.
  FakeKv kv(10);
  kv.external_ = 8;
  FakeExecutor ex;
  FakeClock clock;
  GenScheduler sched(Options(), &kv, &ex, clock);
  ASSERT_TRUE(sched.Start().ok());
  ASSERT_TRUE(sched.Submit(Info(1, 64, /*deadline_ns=*/1'000)).ok());  // 4 blocks
  clock.Advance(1'000);
  ASSERT_TRUE(ex.WaitDropped(1));
  EXPECT_EQ(ex.dropped(1).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ex.steps(), 0);
}

TEST(GenSchedulerTest, DoesNotSpinWhenNothingCanBeAdmitted) {
  FakeKv kv(10);
  kv.external_ = 8;
  FakeExecutor ex;
  FakeClock clock;
  GenScheduler sched(Options(), &kv, &ex, clock);
  ASSERT_TRUE(sched.Start().ok());
  ASSERT_TRUE(sched.Submit(Info(1, 64)).ok());  // 4 blocks: fits the cache, not the free part
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // A spinning loop would have asked thousands of times; a sleeping one once per wake-up.
  EXPECT_LE(kv.admit_calls(), 10);
  EXPECT_EQ(ex.steps(), 0);
  kv.external_ = 0;
  ex.SetMaxNew(2, 1);
  ASSERT_TRUE(sched.Submit(Info(2, 16)).ok());  // wakes the loop: both run now
  ASSERT_TRUE(ex.WaitFinished(2));
  EXPECT_GE(ex.chunks(1), 1);
}

TEST(GenSchedulerTest, RejectsSequenceLargerThanTheCache) {
  FakeKv kv(4);
  FakeExecutor ex;
  FakeClock clock;
  GenScheduler sched(Options(), &kv, &ex, clock);
  ASSERT_TRUE(sched.Start().ok());
  ASSERT_TRUE(sched.Submit(Info(1, 100)).ok());  // 7 blocks of 16
  ASSERT_TRUE(ex.WaitDropped(1));
  Status why = ex.dropped(1);
  EXPECT_EQ(why.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(why.message().find("needs 7 KV blocks, the cache has 4"), std::string::npos)
      << why.message();
  EXPECT_EQ(ex.steps(), 0);
}

TEST(GenSchedulerTest, ForksJoinTheBatch) {
  FakeKv kv(kManyBlocks);
  FakeExecutor ex;
  FakeClock clock;
  GenScheduler sched(Options(), &kv, &ex, clock);
  ex.ForkAfterFirst(1);
  ex.SetMaxNew(1, 3);
  ex.SetMaxNew(1001, 3);
  ASSERT_TRUE(sched.Start().ok());
  ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());
  ASSERT_TRUE(ex.WaitFinished(1));
  ASSERT_TRUE(ex.WaitFinished(1001));
  // The fork continues from its parent's first step: its 3 tokens take 3 decode steps.
  EXPECT_EQ(ex.chunks(1001), 3);
  EXPECT_EQ(ex.num_dropped(), 0u);
}

TEST(GenSchedulerTest, ShutdownDrainsThenDrops) {
  // Drain: everything finishes before the deadline, nothing is dropped.
  {
    FakeKv kv(kManyBlocks);
    FakeExecutor ex;
    FakeClock clock;
    GenScheduler sched(Options(), &kv, &ex, clock);
    ex.SetMaxNew(1, 4);
    ex.SetMaxNew(2, 6);
    ex.Hold();
    ASSERT_TRUE(sched.Start().ok());
    ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());
    ASSERT_TRUE(sched.Submit(Info(2, 10)).ok());
    std::thread stopper([&] { sched.Shutdown(kNever); });
    ex.Release();
    stopper.join();
    EXPECT_EQ(ex.generated(1), 4);
    EXPECT_EQ(ex.generated(2), 6);
    EXPECT_EQ(ex.num_dropped(), 0u);
    EXPECT_EQ(kv.used(), 0);
  }
  // Deadline: a sequence that never ends is dropped once the clock reaches it.
  {
    FakeKv kv(kManyBlocks);
    FakeExecutor ex;
    FakeClock clock;
    GenScheduler sched(Options(), &kv, &ex, clock);
    ASSERT_TRUE(sched.Start().ok());
    ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());
    ASSERT_TRUE(ex.WaitSteps(1));
    std::thread stopper([&] { sched.Shutdown(1'000); });
    // Shutdown began once Submit answers UNAVAILABLE (an invalid sequence is never queued).
    const auto until = std::chrono::steady_clock::now() + kWait;
    while (sched.Submit(Info(2, 0)).code() != StatusCode::kUnavailable &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    EXPECT_EQ(sched.Submit(Info(2, 10)).code(), StatusCode::kUnavailable);
    const int64_t steps = ex.steps();
    EXPECT_TRUE(ex.WaitSteps(steps + 3));  // still stepping while draining
    clock.Set(1'000);
    stopper.join();
    EXPECT_EQ(ex.dropped(1).code(), StatusCode::kUnavailable);
    EXPECT_EQ(kv.used(), 0);
    sched.Shutdown(0);  // idempotent
    EXPECT_EQ(ex.num_dropped(), 1u);
  }
}

TEST(GenSchedulerTest, DestructorShutsDown) {
  FakeKv kv(kManyBlocks);
  FakeExecutor ex;
  FakeClock clock;
  {
    GenScheduler sched(Options(), &kv, &ex, clock);
    ASSERT_TRUE(sched.Start().ok());
    ASSERT_TRUE(sched.Submit(Info(1, 10)).ok());
    ASSERT_TRUE(ex.WaitSteps(1));
  }
  EXPECT_EQ(ex.dropped(1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(kv.used(), 0);
}

}  // namespace
}  // namespace kiln
