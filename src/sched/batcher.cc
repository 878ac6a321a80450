// SPDX-License-Identifier: Apache-2.0
// NOTE (design): one mutex (State::mu) guards the queue and the instance slots; a thread holds
// it only while it builds the policy's view and moves entries out (ScheduleLocked), never while
// a callback or the model runs. Callbacks are called with no lock held. With preserve_ordering, a
// small combiner (State::order_mu) releases completed responses in arrival order: the thread
// that completes the next-in-line request delivers every consecutive ready response; others
// only deposit theirs.
#include "sched/batcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <system_error>

namespace kiln {

namespace {

struct Entry {
  uint64_t id = 0;
  int64_t arrival_ns = 0;
  Admission admission;
  int64_t batch_size = 1;
  BatchShape shape;
  std::unique_ptr<InferRequest> request;
  std::shared_ptr<ResponseSink> sink;
};

// A response on its way out; `sink` null: a placeholder for a request answered out of order.
struct Delivery {
  uint64_t id = 0;
  std::shared_ptr<ResponseSink> sink;
  Result<InferResponse> result = Status::Internal("no result");
};

struct Work {
  std::vector<Entry> entries;
  BatchShape shape;
  int64_t dispatch_ns = 0;
};

// The batcher whose batch this thread runs inside Enqueue, if any.
thread_local const void* t_inline_state = nullptr;

uint64_t Elapsed(int64_t from_ns, int64_t to_ns) {
  return to_ns > from_ns ? static_cast<uint64_t>(to_ns - from_ns) : 0;
}

}  // namespace

struct Batcher::State {
  struct Instance {
    CondVar cv;  // with mu: the instance's thread waits on it for work
  };
  // What an instance has been handed (State::slots).
  struct Slot {
    std::optional<Work> work;
    bool busy = false;  // has work or is running it
  };

  State(BatcherOptions o, std::shared_ptr<BatchExecutor> e)
      : options(std::move(o)),
        policy(options.policy),
        clock(options.clock != nullptr ? options.clock : &SteadyClock()),
        executor(std::move(e)),
        levels(policy.num_levels()),
        slots(static_cast<size_t>(options.num_instances)),
        free_instances(options.num_instances) {
    for (int i = 0; i < options.num_instances; ++i) {
      instances.push_back(std::make_unique<Instance>());
    }
  }

  const BatcherOptions options;
  const BatchPolicy policy;
  const Clock* const clock;
  const std::shared_ptr<BatchExecutor> executor;

  mutable Mutex mu;
  CondVar cv;  // with mu: the scheduling thread waits on it
  std::vector<std::deque<Entry>> levels KILN_GUARDED_BY(mu);  // [level - 1], id order
  size_t queued KILN_GUARDED_BY(mu) = 0;
  uint64_t next_id KILN_GUARDED_BY(mu) = 1;
  bool stopping KILN_GUARDED_BY(mu) = false;
  bool scheduler_done KILN_GUARDED_BY(mu) = false;   // no more work will be handed out
  std::vector<std::unique_ptr<Instance>> instances;  // [instance index]; fixed at construction
  std::vector<Slot> slots KILN_GUARDED_BY(mu);       // [instance index]
  int free_instances KILN_GUARDED_BY(mu) = 0;

  Mutex order_mu;
  uint64_t next_to_deliver KILN_GUARDED_BY(order_mu) = 1;
  std::map<uint64_t, Delivery> ready KILN_GUARDED_BY(order_mu);
  bool delivering KILN_GUARDED_BY(order_mu) = false;

  int64_t deadline_entries KILN_GUARDED_BY(mu) = 0;        // queued requests with a deadline
  bool scheduler_waiting KILN_GUARDED_BY(mu) = false;      // the scheduling thread sleeps
  int64_t scheduler_wake_ns KILN_GUARDED_BY(mu) = kNever;  // ... until then
  std::vector<QueueEntry> view KILN_GUARDED_BY(mu);        // scratch for the policy's view
  int64_t exec_average_ns KILN_GUARDED_BY(mu) = -1;  // moving average of Execute; -1: none yet
  int inline_runs KILN_GUARDED_BY(mu) = 0;           // batches running on Enqueue's caller
  CondVar inline_cv;  // with mu: Shutdown waits on it for inline_runs == 0

  // One policy decision, under mu.
  struct Step {
    std::vector<Entry> expired;   // moved out of the queue; answer them without the lock
    int dispatched = -1;          // the instance handed a batch (to be notified); -1: none
    bool expired_left = false;    // take_expired was false and some requests expired
    int64_t wake_at_ns = kNever;  // the policy's next decision time
  };
  Instance& instance(int index) const { return *instances[static_cast<size_t>(index)]; }
  Slot& slot(int index) KILN_REQUIRES(mu) { return slots[static_cast<size_t>(index)]; }
  // The policy's view of the queue (only the part a decision depends on).
  void BuildViewLocked(bool instance_free) KILN_REQUIRES(mu);
  // Decides at `now`: moves the batch to a free instance (`prefer` when it is free; -1: any)
  // and, when `take_expired`, the expired requests into the step; otherwise leaves the queue
  // unchanged when some expired.
  Step ScheduleLocked(int64_t now, int prefer, bool take_expired) KILN_REQUIRES(mu);
  // The scheduling thread sleeps past `wake_at_ns`, or must see that shutdown can finish.
  bool SchedulerMustWakeLocked(int64_t wake_at_ns) const KILN_REQUIRES(mu);
  // Answers requests that expired in the queue (no lock held).
  void AnswerExpired(std::vector<Entry> expired, int64_t now) KILN_EXCLUDES(mu, order_mu);
  // Answers CANCELLED requests the client gave up on (no lock held), keeping the delivery order.
  void AnswerCancelled(std::vector<Entry> cancelled, int64_t now) KILN_EXCLUDES(mu, order_mu);
  // The request `id` was cancelled: drops it from the queue and answers it when it is still
  // queued; a request already handed to an instance is skipped before its batch runs.
  void CancelQueued(uint64_t id) KILN_EXCLUDES(mu, order_mu);
  // Runs `work` on instance `index`, records it and delivers the responses (no lock held).
  void RunWork(int index, Work work) KILN_EXCLUDES(mu, order_mu);
  // Instance `self` finished its batch: it is free, and takes the next batch when the policy
  // has one; that batch runs on self's thread (woken unless `own_thread`, the caller being it).
  // Releases mu while it answers expired requests, and holds it again on return.
  void InstanceFreeLocked(int self, bool own_thread) KILN_REQUIRES(mu) KILN_EXCLUDES(order_mu);
  void SchedulerLoop() KILN_EXCLUDES(mu, order_mu);
  void InstanceLoop(int index) KILN_EXCLUDES(mu, order_mu);
  // Calls the callbacks of `items` (sorted by id), in id order across threads when
  // preserve_ordering is set.
  void Deliver(std::vector<Delivery> items) KILN_EXCLUDES(mu, order_mu);
  void RecordFailure(FailureReason reason, int64_t arrival_ns, int64_t now_ns) {
    if (options.stats) {
      options.stats->RecordFailure(reason, Elapsed(arrival_ns, now_ns), WallClockMs());
    }
  }
};

void Batcher::State::BuildViewLocked(bool instance_free) {
  view.clear();
  // Without deadlines the decision depends only on the queue's head up to the entry that
  // completes its batch (BatchCandidates), and on nothing at all when no instance is free.
  const bool whole_queue = deadline_entries > 0;
  if (!whole_queue && !instance_free) return;
  BatchCandidates candidates(policy);
  for (const std::deque<Entry>& level : levels) {
    for (const Entry& e : level) {
      view.push_back({e.id, e.arrival_ns, e.admission.deadline_ns, e.admission.level,
                      e.admission.timeout_action, e.batch_size, &e.shape});
      if (!whole_queue) {
        candidates.Offer(view.back());
        if (candidates.full()) return;
      }
    }
  }
}

Batcher::State::Step Batcher::State::ScheduleLocked(int64_t now, int prefer, bool take_expired) {
  Step step;
  const bool instance_free = free_instances > 0;
  BuildViewLocked(instance_free);
  BatchDecision d = policy.Decide(view, now, instance_free, stopping);
  step.wake_at_ns = d.wake_at_ns;
  if (!d.expired.empty() && !take_expired) {
    step.expired_left = true;
    return step;
  }
  if (d.expired.empty() && d.batch.empty()) return step;

  // Move the expired and the batch members out of the queue (each level is in id order).
  std::vector<Entry> batch(d.batch.size());
  const auto take = [&](uint64_t id) KILN_REQUIRES(mu) -> Entry {
    for (std::deque<Entry>& level : levels) {
      auto it = std::lower_bound(level.begin(), level.end(), id,
                                 [](const Entry& e, uint64_t v) { return e.id < v; });
      if (it == level.end() || it->id != id) continue;
      Entry e = std::move(*it);
      level.erase(it);
      --queued;
      if (e.admission.deadline_ns != kNever) --deadline_entries;
      return e;
    }
    KILN_CHECK(false, "the policy chose request ", id, " which is not queued");
    return Entry{};
  };
  for (uint64_t id : d.expired) step.expired.push_back(take(id));
  for (size_t i = 0; i < d.batch.size(); ++i) batch[i] = take(d.batch[i]);
  if (!batch.empty()) {
    int target = prefer >= 0 && !slot(prefer).busy ? prefer : -1;
    for (int i = 0; target < 0 && i < static_cast<int>(slots.size()); ++i) {
      if (!slot(i).busy) target = i;
    }
    KILN_CHECK(target >= 0, "the policy chose a batch with no free instance");
    slot(target).busy = true;
    --free_instances;
    slot(target).work = Work{std::move(batch), std::move(d.shape), now};
    step.dispatched = target;
  }
  return step;
}

bool Batcher::State::SchedulerMustWakeLocked(int64_t wake_at_ns) const {
  return scheduler_waiting && (wake_at_ns < scheduler_wake_ns || (stopping && queued == 0));
}

void Batcher::State::AnswerExpired(std::vector<Entry> expired, int64_t now) {
  if (expired.empty()) return;
  std::vector<Delivery> placeholders;
  for (Entry& e : expired) {
    const int64_t waited_us = (now - e.arrival_ns) / 1000;
    const int64_t timeout_us = (e.admission.deadline_ns - e.arrival_ns) / 1000;
    Status s = Status::DeadlineExceeded(
        fmt::format("{}: the request timed out in the queue (waited {} us, timeout {} us)",
                    options.name, waited_us, timeout_us));
    e.request.reset();
    RecordFailure(FailureReason::kTimeout, e.arrival_ns, now);
    std::shared_ptr<ResponseSink> sink = std::move(e.sink);
    sink->Finish(std::move(s));
    placeholders.push_back({e.id, nullptr, Status::Cancelled("answered out of order")});
  }
  if (options.policy.preserve_ordering) {
    std::sort(placeholders.begin(), placeholders.end(),
              [](const Delivery& a, const Delivery& b) { return a.id < b.id; });
    Deliver(std::move(placeholders));
  }
}

void Batcher::State::AnswerCancelled(std::vector<Entry> cancelled, int64_t now) {
  if (cancelled.empty()) return;
  std::vector<Delivery> placeholders;
  for (Entry& e : cancelled) {
    e.request.reset();
    RecordFailure(FailureReason::kCanceled, e.arrival_ns, now);
    std::shared_ptr<ResponseSink> sink = std::move(e.sink);
    sink->Finish(Status::Cancelled(
        fmt::format("{}: the request was cancelled (the client went away)", options.name)));
    placeholders.push_back({e.id, nullptr, Status::Cancelled("answered out of order")});
  }
  if (options.policy.preserve_ordering) {
    std::sort(placeholders.begin(), placeholders.end(),
              [](const Delivery& a, const Delivery& b) { return a.id < b.id; });
    Deliver(std::move(placeholders));
  }
}

void Batcher::State::CancelQueued(uint64_t id) {
  std::vector<Entry> found;
  {
    MutexLock lock(mu);
    for (std::deque<Entry>& level : levels) {
      auto it = std::lower_bound(level.begin(), level.end(), id,
                                 [](const Entry& e, uint64_t v) { return e.id < v; });
      if (it == level.end() || it->id != id) continue;
      if (it->admission.deadline_ns != kNever) --deadline_entries;
      found.push_back(std::move(*it));
      level.erase(it);
      --queued;
      break;
    }
  }
  // The scheduling thread's timer may have been the cancelled request's; it wakes at that time
  // anyway and finds nothing to do. Shutdown waits for queued == 0, which this may have reached.
  if (!found.empty()) cv.NotifyOne();
  AnswerCancelled(std::move(found), clock->NowNs());
}

void Batcher::State::SchedulerLoop() {
  MutexLock lock(mu);
  for (;;) {
    const int64_t now = clock->NowNs();
    Step step = ScheduleLocked(now, -1, /*take_expired=*/true);
    if (step.dispatched >= 0 || !step.expired.empty()) {
      lock.Unlock();
      if (step.dispatched >= 0) instance(step.dispatched).cv.NotifyOne();
      AnswerExpired(std::move(step.expired), now);
      lock.Lock();
      continue;  // another instance may be free
    }
    if (stopping && queued == 0) break;
    scheduler_waiting = true;
    scheduler_wake_ns = step.wake_at_ns;
    clock->WaitUntil(cv, mu, step.wake_at_ns);
    scheduler_waiting = false;
  }
  scheduler_done = true;
  lock.Unlock();
  for (const auto& inst : instances) inst->cv.NotifyAll();
}

void Batcher::State::RunWork(int index, Work work) {
  // The safe point of a tensor model: requests cancelled since they were dispatched are
  // answered now and not run.
  if (std::any_of(work.entries.begin(), work.entries.end(),
                  [](const Entry& e) { return e.request->cancelled(); })) {
    std::vector<Entry> cancelled, kept;
    for (Entry& e : work.entries) {
      (e.request->cancelled() ? cancelled : kept).push_back(std::move(e));
    }
    work.entries = std::move(kept);
    AnswerCancelled(std::move(cancelled), clock->NowNs());
    if (work.entries.empty()) return;
  }
  std::vector<const InferRequest*> requests;
  requests.reserve(work.entries.size());
  for (const Entry& e : work.entries) requests.push_back(e.request.get());
  const int64_t started = clock->NowNs();
  std::vector<RequestOutcome> outcomes = executor->Execute(index, requests, work.shape);
  KILN_CHECK(outcomes.size() == work.entries.size(), "Execute returned ", outcomes.size(),
             " outcomes for ", work.entries.size(), " requests");
  const int64_t now = clock->NowNs();
  {
    MutexLock lock(mu);
    const int64_t took = now - started;
    exec_average_ns = exec_average_ns < 0 ? took : (exec_average_ns * 7 + took) / 8;
  }
  const uint64_t now_ms = WallClockMs();
  std::vector<Delivery> items;
  items.reserve(work.entries.size());
  for (size_t i = 0; i < work.entries.size(); ++i) {
    Entry& e = work.entries[i];
    RequestOutcome& o = outcomes[i];
    const uint64_t queue_ns = Elapsed(e.arrival_ns, work.dispatch_ns);
    if (o.response.ok()) {
      o.response->timing = {queue_ns, o.compute_input_ns, o.compute_infer_ns, o.compute_output_ns};
    }
    if (options.stats) {
      if (o.response.ok()) {
        options.stats->RecordSuccess(static_cast<uint64_t>(e.batch_size), queue_ns,
                                     o.compute_input_ns, o.compute_infer_ns, o.compute_output_ns,
                                     Elapsed(e.arrival_ns, now), now_ms);
      } else {
        options.stats->RecordFailure(FailureReason::kBackend, Elapsed(e.arrival_ns, now), now_ms);
      }
    }
    e.request.reset();
    items.push_back({e.id, std::move(e.sink), std::move(o.response)});
  }
  std::sort(items.begin(), items.end(),
            [](const Delivery& a, const Delivery& b) { return a.id < b.id; });
  Deliver(std::move(items));
}

void Batcher::State::InstanceFreeLocked(int self, bool own_thread) {
  slot(self).busy = false;
  ++free_instances;
  for (;;) {
    const int64_t at = clock->NowNs();
    Step step = ScheduleLocked(at, self, /*take_expired=*/true);
    // `self` got the next batch: its own thread runs it (already awake when own_thread).
    const bool wake_self = step.dispatched == self && !own_thread;
    if (!step.expired.empty()) {
      mu.Unlock();
      if (step.dispatched >= 0 && (step.dispatched != self || wake_self)) {
        instance(step.dispatched).cv.NotifyOne();
      }
      AnswerExpired(std::move(step.expired), at);
      mu.Lock();
      if (step.dispatched >= 0) return;
      continue;
    }
    if (wake_self) instance(self).cv.NotifyOne();
    if (step.dispatched < 0 && SchedulerMustWakeLocked(step.wake_at_ns)) {
      cv.NotifyOne();
    }
    return;
  }
}

void Batcher::State::InstanceLoop(int index) {
  Instance& self = instance(index);
  for (;;) {
    Work work;
    {
      MutexLock lock(mu);
      self.cv.Wait(
          mu, [&]() KILN_REQUIRES(mu) { return slot(index).work.has_value() || scheduler_done; });
      if (!slot(index).work.has_value()) return;
      work = std::move(*slot(index).work);
      slot(index).work.reset();
    }
    RunWork(index, std::move(work));
    // Free again: take the next batch here when the policy has one, without a round trip
    // through the scheduling thread; wake that thread only when its timer must change.
    MutexLock lock(mu);
    InstanceFreeLocked(index, /*own_thread=*/true);
  }
}

void Batcher::State::Deliver(std::vector<Delivery> items) {
  if (!options.policy.preserve_ordering) {
    for (Delivery& d : items) {
      if (d.sink) d.sink->Finish(std::move(d.result));
    }
    return;
  }
  MutexLock lock(order_mu);
  for (Delivery& d : items) {
    const uint64_t id = d.id;
    ready.emplace(id, std::move(d));
  }
  if (delivering) return;  // the thread delivering now will reach ours
  delivering = true;
  for (;;) {
    std::vector<Delivery> run;
    while (!ready.empty() && ready.begin()->first == next_to_deliver) {
      run.push_back(std::move(ready.begin()->second));
      ready.erase(ready.begin());
      ++next_to_deliver;
    }
    if (run.empty()) {
      delivering = false;
      return;
    }
    lock.Unlock();
    for (Delivery& d : run) {
      if (d.sink) d.sink->Finish(std::move(d.result));
    }
    lock.Lock();
  }
}

Batcher::Batcher(std::shared_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<Batcher>> Batcher::Create(BatcherOptions options,
                                                 std::shared_ptr<BatchExecutor> executor) {
  KILN_CHECK(executor != nullptr, "Batcher::Create: null executor");
  if (options.num_instances < 1) {
    return Status::InvalidArgument(fmt::format("{}: needs at least one instance, got {}",
                                               options.name, options.num_instances));
  }
  if (Status s = ValidateBatchPolicyConfig(options.policy); !s.ok()) {
    return s.WithContext(options.name);
  }
  auto state = std::make_shared<State>(std::move(options), std::move(executor));
  std::unique_ptr<Batcher> batcher(new Batcher(state));
  MutexLock lock(batcher->threads_mu_);
  try {
    batcher->threads_.emplace_back([state] { state->SchedulerLoop(); });
    for (int i = 0; i < state->options.num_instances; ++i) {
      batcher->threads_.emplace_back([state, i] { state->InstanceLoop(i); });
    }
  } catch (const std::system_error& e) {
    // `batcher` is destroyed on return (after `lock`) and joins the threads already started.
    return Status::Internal(
        fmt::format("{}: cannot start a scheduler thread: {}", state->options.name, e.what()));
  }
  return batcher;
}

Batcher::~Batcher() { Shutdown(); }

Status Batcher::Enqueue(std::unique_ptr<InferRequest>& request, std::shared_ptr<ResponseSink>& sink,
                        BatchShape shape, int64_t batch_size) {
  KILN_CHECK(request != nullptr && sink != nullptr, "Batcher::Enqueue: null request or sink");
  KILN_CHECK(batch_size >= 1, "Batcher::Enqueue: batch size ", batch_size);
  if (request->cancelled()) {
    return Status::Cancelled(
        fmt::format("{}: the request was cancelled (the client went away)", state_->options.name));
  }
  // The request's callback may destroy this Batcher before Enqueue returns: keep the state.
  const std::shared_ptr<State> keep = state_;
  State& s = *keep;
  const int64_t now = s.clock->NowNs();
  int dispatched = -1;
  std::optional<Work> inline_work;
  bool wake_scheduler = false;
  uint64_t id = 0;
  // Held past the move into the queue: the cancellation is watched once the lock is released.
  const std::shared_ptr<const Cancellation> cancellation = request->cancellation;
  {
    MutexLock lock(s.mu);
    if (s.stopping) {
      return Status::Unavailable(fmt::format("{} is shutting down", s.options.name));
    }
    std::vector<size_t> counts(s.levels.size());
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = s.levels[i].size();
    Result<Admission> admission =
        s.policy.Admit(request->priority, request->timeout_us, now, counts);
    if (!admission.ok()) return admission.status().WithContext(s.options.name);
    Entry e;
    e.id = id = s.next_id++;
    e.arrival_ns = now;
    e.admission = *admission;
    e.batch_size = batch_size;
    e.shape = std::move(shape);
    e.request = std::move(request);
    e.sink = std::move(sink);
    if (e.admission.deadline_ns != kNever) ++s.deadline_entries;
    const int64_t deadline_ns = e.admission.deadline_ns;
    s.levels[e.admission.level - 1].push_back(std::move(e));
    ++s.queued;
    // A free instance takes the request from here when the policy runs it now; the
    // scheduling thread is woken only when its timer must change or requests expired.
    if (s.free_instances > 0) {
      State::Step step = s.ScheduleLocked(now, -1, /*take_expired=*/false);
      dispatched = step.dispatched;
      wake_scheduler = s.scheduler_waiting &&
                       (step.expired_left ||
                        (step.dispatched < 0 && s.SchedulerMustWakeLocked(step.wake_at_ns)));
      // A fast model runs the batch right here: no hand-off to the instance's thread.
      if (dispatched >= 0 && s.options.inline_max_ns > 0 && s.exec_average_ns >= 0 &&
          s.exec_average_ns <= s.options.inline_max_ns) {
        inline_work = std::move(*s.slot(dispatched).work);
        s.slot(dispatched).work.reset();
        ++s.inline_runs;
      }
    } else {
      wake_scheduler = s.SchedulerMustWakeLocked(deadline_ns);
    }
  }
  if (wake_scheduler) s.cv.NotifyOne();
  if (cancellation != nullptr) {
    // Registered with no lock held (it may run at once). The request may have left the queue
    // by then: CancelQueued then finds nothing, and the instance skips it if it has not run.
    cancellation->OnCancel([weak = std::weak_ptr<State>(keep), id] {
      if (std::shared_ptr<State> state = weak.lock()) state->CancelQueued(id);
    });
  }
  if (dispatched < 0) return Status::OK();
  if (!inline_work.has_value()) {
    s.instance(dispatched).cv.NotifyOne();
    return Status::OK();
  }
  const void* outer = t_inline_state;
  t_inline_state = &s;
  s.RunWork(dispatched, std::move(*inline_work));
  t_inline_state = outer;
  MutexLock lock(s.mu);
  s.InstanceFreeLocked(dispatched, /*own_thread=*/false);
  if (--s.inline_runs == 0) s.inline_cv.NotifyAll();
  return Status::OK();
}

void Batcher::Shutdown() {
  {
    MutexLock lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.NotifyAll();
  MutexLock lock(threads_mu_);
  const bool on_own_thread =
      std::any_of(threads_.begin(), threads_.end(),
                  [](const std::thread& t) { return t.get_id() == std::this_thread::get_id(); });
  for (std::thread& t : threads_) {
    if (on_own_thread) {
      // Joining would wait for this very thread: the threads hold the state and finish the
      // queued work by themselves.
      t.detach();
    } else if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
  // Batches running on Enqueue's callers finish before Shutdown returns, unless this is one of
  // them (a callback shutting its own batcher down).
  if (!on_own_thread && t_inline_state != state_.get()) {
    MutexLock state_lock(state_->mu);
    state_->inline_cv.Wait(state_->mu,
                           [&]() KILN_REQUIRES(state_->mu) { return state_->inline_runs == 0; });
  }
}

size_t Batcher::queued() const {
  MutexLock lock(state_->mu);
  return state_->queued;
}

const BatchPolicy& Batcher::policy() const { return state_->policy; }

}  // namespace kiln
