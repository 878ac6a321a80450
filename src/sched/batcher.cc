// SPDX-License-Identifier: Apache-2.0
// NOTE (design): one mutex (State::mu) guards the queue and the instance slots; the scheduling
// thread holds it only while it builds the policy's view and moves entries out, never while a
// callback or the model runs. Callbacks are called with no lock held. With preserve_ordering, a
// small combiner (State::order_mu) releases completed responses in arrival order: the thread
// that completes the next-in-line request delivers every consecutive ready response; others
// only deposit theirs.
#include "sched/batcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
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
  InferCallback done;
};

// A response on its way out; `done` empty: a placeholder for a request answered out of order.
struct Delivery {
  uint64_t id = 0;
  InferCallback done;
  Result<InferResponse> result = Status::Internal("no result");
};

struct Work {
  std::vector<Entry> entries;
  BatchShape shape;
  int64_t dispatch_ns = 0;
};

uint64_t Elapsed(int64_t from_ns, int64_t to_ns) {
  return to_ns > from_ns ? static_cast<uint64_t>(to_ns - from_ns) : 0;
}

}  // namespace

struct Batcher::State {
  struct Instance {
    std::condition_variable cv;
    std::optional<Work> work;  // guarded by mu
    bool busy = false;         // guarded by mu: has work or is running it
  };

  State(BatcherOptions o, std::shared_ptr<BatchExecutor> e)
      : options(std::move(o)),
        policy(options.policy),
        clock(options.clock != nullptr ? options.clock : &SteadyClock()),
        executor(std::move(e)),
        levels(policy.num_levels()) {
    for (int i = 0; i < options.num_instances; ++i) {
      instances.push_back(std::make_unique<Instance>());
    }
  }

  const BatcherOptions options;
  const BatchPolicy policy;
  const Clock* const clock;
  const std::shared_ptr<BatchExecutor> executor;

  mutable std::mutex mu;
  std::condition_variable cv;             // the scheduling thread waits on it
  std::vector<std::deque<Entry>> levels;  // guarded by mu; [level - 1], id order
  size_t queued = 0;                      // guarded by mu
  uint64_t next_id = 1;                   // guarded by mu
  bool stopping = false;                  // guarded by mu
  bool scheduler_done = false;            // guarded by mu: no more work will be handed out
  std::vector<std::unique_ptr<Instance>> instances;  // slots guarded by mu
  int free_instances = 0;                            // guarded by mu

  std::mutex order_mu;
  uint64_t next_to_deliver = 1;        // guarded by order_mu
  std::map<uint64_t, Delivery> ready;  // guarded by order_mu
  bool delivering = false;             // guarded by order_mu

  void SchedulerLoop();
  void InstanceLoop(int index);
  // Calls the callbacks of `items` (sorted by id), in id order across threads when
  // preserve_ordering is set.
  void Deliver(std::vector<Delivery> items);
  void RecordFailure(FailureReason reason, int64_t arrival_ns, int64_t now_ns) {
    if (options.stats) {
      options.stats->RecordFailure(reason, Elapsed(arrival_ns, now_ns), WallClockMs());
    }
  }
};

void Batcher::State::SchedulerLoop() {
  std::vector<QueueEntry> view;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    view.clear();
    view.reserve(queued);
    for (const std::deque<Entry>& level : levels) {
      for (const Entry& e : level) {
        view.push_back({e.id, e.arrival_ns, e.admission.deadline_ns, e.admission.level,
                        e.admission.timeout_action, e.batch_size, &e.shape});
      }
    }
    const int64_t now = clock->NowNs();
    BatchDecision d = policy.Decide(view, now, free_instances > 0, stopping);

    // Move the expired and the batch members out of the queue.
    std::vector<Entry> expired;
    std::vector<Entry> batch(d.batch.size());
    if (!d.expired.empty() || !d.batch.empty()) {
      std::vector<std::pair<uint64_t, size_t>> wanted;  // id -> position in batch, or npos
      for (uint64_t id : d.expired) wanted.push_back({id, SIZE_MAX});
      for (size_t i = 0; i < d.batch.size(); ++i) wanted.push_back({d.batch[i], i});
      std::sort(wanted.begin(), wanted.end());
      for (std::deque<Entry>& level : levels) {
        std::erase_if(level, [&](Entry& e) {
          auto it =
              std::lower_bound(wanted.begin(), wanted.end(), std::pair<uint64_t, size_t>{e.id, 0});
          if (it == wanted.end() || it->first != e.id) return false;
          if (it->second == SIZE_MAX) {
            expired.push_back(std::move(e));
          } else {
            batch[it->second] = std::move(e);
          }
          return true;
        });
      }
      queued -= wanted.size();
    }
    if (!batch.empty()) {
      Instance* target = nullptr;
      for (const auto& inst : instances) {
        if (!inst->busy) {
          target = inst.get();
          break;
        }
      }
      KILN_CHECK(target != nullptr, "the policy chose a batch with no free instance");
      target->busy = true;
      --free_instances;
      target->work = Work{std::move(batch), std::move(d.shape), now};
      target->cv.notify_one();
    }
    if (!expired.empty()) {
      lock.unlock();
      std::vector<Delivery> placeholders;
      for (Entry& e : expired) {
        const int64_t waited_us = (now - e.arrival_ns) / 1000;
        const int64_t timeout_us = (e.admission.deadline_ns - e.arrival_ns) / 1000;
        Status s = Status::DeadlineExceeded(
            fmt::format("{}: the request timed out in the queue (waited {} us, timeout {} us)",
                        options.name, waited_us, timeout_us));
        e.request.reset();
        RecordFailure(FailureReason::kTimeout, e.arrival_ns, now);
        InferCallback done = std::move(e.done);
        done(std::move(s));
        placeholders.push_back({e.id, nullptr, Status::Cancelled("answered out of order")});
      }
      if (options.policy.preserve_ordering) {
        std::sort(placeholders.begin(), placeholders.end(),
                  [](const Delivery& a, const Delivery& b) { return a.id < b.id; });
        Deliver(std::move(placeholders));
      }
      lock.lock();
      continue;
    }
    if (!d.batch.empty()) continue;  // another instance may be free
    if (stopping && queued == 0) break;
    clock->WaitUntil(cv, lock, d.wake_at_ns);
  }
  scheduler_done = true;
  for (const auto& inst : instances) inst->cv.notify_all();
}

void Batcher::State::InstanceLoop(int index) {
  Instance& self = *instances[static_cast<size_t>(index)];
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu);
      self.cv.wait(lock, [&] { return self.work.has_value() || scheduler_done; });
      if (!self.work.has_value()) return;
      work = std::move(*self.work);
      self.work.reset();
    }
    std::vector<const InferRequest*> requests;
    requests.reserve(work.entries.size());
    for (const Entry& e : work.entries) requests.push_back(e.request.get());
    std::vector<RequestOutcome> outcomes = executor->Execute(index, requests, work.shape);
    KILN_CHECK(outcomes.size() == work.entries.size(), "Execute returned ", outcomes.size(),
               " outcomes for ", work.entries.size(), " requests");
    const int64_t now = clock->NowNs();
    const uint64_t now_ms = WallClockMs();
    std::vector<Delivery> items;
    items.reserve(work.entries.size());
    for (size_t i = 0; i < work.entries.size(); ++i) {
      Entry& e = work.entries[i];
      RequestOutcome& o = outcomes[i];
      if (options.stats) {
        if (o.response.ok()) {
          options.stats->RecordSuccess(static_cast<uint64_t>(e.batch_size),
                                       Elapsed(e.arrival_ns, work.dispatch_ns), o.compute_input_ns,
                                       o.compute_infer_ns, o.compute_output_ns,
                                       Elapsed(e.arrival_ns, now), now_ms);
        } else {
          options.stats->RecordFailure(FailureReason::kBackend, Elapsed(e.arrival_ns, now), now_ms);
        }
      }
      e.request.reset();
      items.push_back({e.id, std::move(e.done), std::move(o.response)});
    }
    std::sort(items.begin(), items.end(),
              [](const Delivery& a, const Delivery& b) { return a.id < b.id; });
    Deliver(std::move(items));
    {
      std::lock_guard<std::mutex> lock(mu);
      self.busy = false;
      ++free_instances;
    }
    cv.notify_one();
  }
}

void Batcher::State::Deliver(std::vector<Delivery> items) {
  if (!options.policy.preserve_ordering) {
    for (Delivery& d : items) {
      if (d.done) d.done(std::move(d.result));
    }
    return;
  }
  std::unique_lock<std::mutex> lock(order_mu);
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
    lock.unlock();
    for (Delivery& d : run) {
      if (d.done) d.done(std::move(d.result));
    }
    lock.lock();
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
  state->free_instances = state->options.num_instances;
  std::unique_ptr<Batcher> batcher(new Batcher(state));
  std::lock_guard<std::mutex> lock(batcher->threads_mu_);
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

Status Batcher::Enqueue(std::unique_ptr<InferRequest>& request, InferCallback& done,
                        BatchShape shape, int64_t batch_size) {
  KILN_CHECK(request != nullptr && done, "Batcher::Enqueue: null request or callback");
  KILN_CHECK(batch_size >= 1, "Batcher::Enqueue: batch size ", batch_size);
  // The request's callback may destroy this Batcher before Enqueue returns: keep the state.
  const std::shared_ptr<State> keep = state_;
  State& s = *keep;
  const int64_t now = s.clock->NowNs();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stopping) {
      return Status::Unavailable(fmt::format("{} is shutting down", s.options.name));
    }
    std::vector<size_t> counts(s.levels.size());
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = s.levels[i].size();
    Result<Admission> admission =
        s.policy.Admit(request->priority, request->timeout_us, now, counts);
    if (!admission.ok()) return admission.status().WithContext(s.options.name);
    Entry e;
    e.id = s.next_id++;
    e.arrival_ns = now;
    e.admission = *admission;
    e.batch_size = batch_size;
    e.shape = std::move(shape);
    e.request = std::move(request);
    e.done = std::move(done);
    s.levels[e.admission.level - 1].push_back(std::move(e));
    ++s.queued;
  }
  s.cv.notify_one();
  return Status::OK();
}

void Batcher::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  std::lock_guard<std::mutex> lock(threads_mu_);
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
}

size_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->queued;
}

const BatchPolicy& Batcher::policy() const { return state_->policy; }

}  // namespace kiln
