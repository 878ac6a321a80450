// SPDX-License-Identifier: Apache-2.0
#pragma once
// BatchPolicy: the pure decision procedure of a model's scheduler. It sees a snapshot of the
// queue and the time, never a thread, a lock or a clock of its own, and returns plain data:
// which requests to answer as expired, which to run now as one batch (with the shape they share),
// and when to look again. The Batcher (sched/batcher.h) owns the queue and the threads and acts
// on the decisions.
//
//   BatchPolicy policy(config);                         // config: dynamic_batching, in kiln terms
//   Result<Admission> a = policy.Admit(priority, timeout_us, now_ns, queued_per_level);
//   ...                                                 // the request joins the queue
//   BatchDecision d = policy.Decide(queue_view, now_ns, /*instance_free=*/true, /*flush=*/false);
//   // answer d.expired with DEADLINE_EXCEEDED, run d.batch, call Decide again by d.wake_at_ns.
//
// NOTE (rules). These follow the reference server's dynamic batcher (KSERVE-V2.md 3.7):
//   Admission. A request's priority p picks level p; 0 or a value above priority_levels picks
//     default_priority_level (the reference server does the same). With priority_levels 0 there
//     is one level. The level's queue policy is priority_queue_policy[level], else
//     default_queue_policy. A level already holding max_queue_size requests (0: no limit)
//     refuses the request: RESOURCE_EXHAUSTED. The timeout is default_timeout_microseconds (0:
//     none); when allow_timeout_override is set, a non-zero request timeout replaces it only if
//     it is shorter (it may shorten, never lengthen, the default; with no default any request
//     timeout applies). The deadline is arrival + timeout.
//   Order. Level 1 first; within a level, arrival order, except that requests of a DELAY level
//     whose deadline has passed run after that level's other requests (still before the next
//     level's).
//   Expiry. A request of a REJECT level whose deadline has passed is reported in `expired` at
//     the next decision, whether or not an instance is free; `wake_at_ns` is never later than
//     the next such deadline, so expiry does not wait for a free instance.
//   Batches (only when an instance is free). The head of the order always runs in the next
//     batch. Without dynamic batching (or with max_batch_size 0) it runs alone. Otherwise the
//     candidates are the requests, in order, whose shape equals the head's and whose batch size
//     still fits in max_batch_size (the sum of members' batch sizes). Other requests are
//     skipped over, except with preserve_ordering, where the first one that does not fit or
//     does not match ends the candidates (batches stay contiguous in the order). Then:
//       - the candidates fill max_batch_size, or `flush` is set: run them all;
//       - else the largest prefix of the candidates whose total is a preferred batch size: run it;
//       - else once the oldest candidate has waited max_queue_delay_microseconds: run them all;
//       - else wait until then (wake_at_ns).
//
// Thread safety: a BatchPolicy is immutable; its methods are const and may be called from any
// thread.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "sched/clock.h"

namespace kiln {

enum class TimeoutAction { kReject, kDelay };

// ModelQueuePolicy of the config, per priority level.
struct QueuePolicy {
  TimeoutAction timeout_action = TimeoutAction::kReject;
  uint64_t default_timeout_us = 0;  // 0: no timeout
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;  // 0: unbounded
};

// The scheduling part of a model config (dynamic_batching + max_batch_size), in kiln terms.
struct BatchPolicyConfig {
  bool dynamic_batching = false;  // false: every request runs alone, in order
  int64_t max_batch_size = 0;     // largest sum of batch sizes in one run; 0: no batch dim
  std::vector<int64_t> preferred_batch_sizes;  // each in 1..max_batch_size
  uint64_t max_queue_delay_us = 0;
  bool preserve_ordering = false;
  uint64_t priority_levels = 0;         // 0: one level
  uint64_t default_priority_level = 0;  // in 1..priority_levels when priority_levels > 0
  QueuePolicy default_queue_policy;
  std::map<uint64_t, QueuePolicy> level_queue_policies;  // keys in 1..priority_levels
};

// INVALID_ARGUMENT naming the field (as the config spells it) when the config is inconsistent:
// negative max_batch_size, a preferred batch size outside 1..max_batch_size, a default priority
// level outside 1..priority_levels, a per-level policy for a level that does not exist.
Status ValidateBatchPolicyConfig(const BatchPolicyConfig& config);

// The per-item input shapes a request runs with (after any padding): requests share a batch only
// when these are equal.
struct BatchShape {
  // One entry per model input (config order); empty for an input whose shape may differ within
  // a batch (allow_ragged_batch).
  std::vector<std::vector<int64_t>> inputs;
  bool operator==(const BatchShape&) const = default;
};
// "[[16],[]]"-style text for messages and logs (ragged inputs print as []).
std::string BatchShapeToString(const BatchShape& shape);

// Where an admitted request goes and how long it may wait.
struct Admission {
  uint64_t level = 1;  // 1 = highest
  int64_t deadline_ns = kNever;
  TimeoutAction timeout_action = TimeoutAction::kReject;
};

// What the policy sees of one queued request.
struct QueueEntry {
  uint64_t id = 0;  // unique; increases with arrival
  int64_t arrival_ns = 0;
  int64_t deadline_ns = kNever;
  uint64_t level = 1;
  TimeoutAction timeout_action = TimeoutAction::kReject;
  int64_t batch_size = 1;             // >= 1; 1 when the model has no batch dim
  const BatchShape* shape = nullptr;  // never null; valid during the Decide call
};

struct BatchDecision {
  std::vector<uint64_t> expired;  // ids to answer with DEADLINE_EXCEEDED now
  std::vector<uint64_t> batch;    // ids to run now as one batch, in batch order; may be empty
  BatchShape shape;               // the shape every member of `batch` has
  int64_t batch_size = 0;         // sum of the members' batch sizes
  int64_t wake_at_ns = kNever;    // decide again at this time if nothing else happens first
};

class BatchPolicy;

// The batch candidates of a queue, offered in execution order: the head, then every request
// with the head's shape whose batch size still fits (BatchPolicy's "Batches" rule). Decide uses
// it, and a queue owner uses it to learn how much of its queue a decision must see: when no
// queued request has a deadline, the decision depends only on the entries up to the one after
// which full() turns true (or the whole queue if it never does).
class BatchCandidates {
 public:
  explicit BatchCandidates(const BatchPolicy& policy);
  // Offers the next entry in order; true when it joins the batch.
  bool Offer(const QueueEntry& entry);
  // No later entry can join: max_batch_size is reached, or (preserve_ordering) an entry did not
  // join, or batches do not combine and the head is taken.
  bool full() const { return full_; }
  int64_t total() const { return total_; }

 private:
  const BatchShape* head_shape_ = nullptr;
  int64_t total_ = 0;
  int64_t max_ = 0;
  bool combine_ = false;
  bool preserve_ordering_ = false;
  bool full_ = false;
};

class BatchPolicy {
 public:
  // REQUIRES: ValidateBatchPolicyConfig(config) is OK (checked).
  explicit BatchPolicy(BatchPolicyConfig config);

  const BatchPolicyConfig& config() const { return config_; }
  // Number of priority levels (>= 1).
  uint64_t num_levels() const { return num_levels_; }
  // The queue policy of `level` (1-based).
  const QueuePolicy& PolicyFor(uint64_t level) const;

  // Admission of a request with the given `priority` and `timeout_us` parameters arriving at
  // `now_ns`. `queued_per_level[l - 1]` is the number of requests queued at level l
  // (REQUIRES: size() == num_levels()). RESOURCE_EXHAUSTED when the level's queue is full.
  Result<Admission> Admit(uint64_t priority, uint64_t timeout_us, int64_t now_ns,
                          std::span<const size_t> queued_per_level) const;

  // The decision for `queue` at `now_ns`. REQUIRES: `queue` is ordered by (level, id).
  // `instance_free`: an instance can take a batch now (else only expiry is decided).
  // `flush`: no more requests will come (shutdown): run what is there without waiting.
  BatchDecision Decide(std::span<const QueueEntry> queue, int64_t now_ns, bool instance_free,
                       bool flush) const;

 private:
  BatchPolicyConfig config_;
  uint64_t num_levels_ = 1;
};

}  // namespace kiln
