// SPDX-License-Identifier: Apache-2.0
#include "sched/batch_policy.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {
namespace {

// now + us, saturating at kNever.
int64_t DeadlineAfter(int64_t now_ns, uint64_t timeout_us) {
  constexpr uint64_t kMaxUs = static_cast<uint64_t>(kNever) / 1000;
  if (timeout_us >= kMaxUs) return kNever;
  const int64_t delta = static_cast<int64_t>(timeout_us) * 1000;
  if (now_ns > kNever - delta) return kNever;
  return now_ns + delta;
}

}  // namespace

Status ValidateBatchPolicyConfig(const BatchPolicyConfig& c) {
  if (c.max_batch_size < 0) {
    return Status::InvalidArgument(
        fmt::format("max_batch_size must be >= 0, got {}", c.max_batch_size));
  }
  for (int64_t p : c.preferred_batch_sizes) {
    if (p < 1 || (c.max_batch_size > 0 && p > c.max_batch_size) ||
        (c.max_batch_size == 0 && p != 1)) {
      return Status::InvalidArgument(fmt::format(
          "dynamic_batching.preferred_batch_size {} is out of range 1..{} (max_batch_size)", p,
          std::max<int64_t>(c.max_batch_size, 1)));
    }
  }
  if (c.priority_levels == 0) {
    if (c.default_priority_level != 0) {
      return Status::InvalidArgument(fmt::format(
          "dynamic_batching.default_priority_level is {} but priority_levels is 0 (priorities "
          "are off)",
          c.default_priority_level));
    }
  } else if (c.default_priority_level < 1 || c.default_priority_level > c.priority_levels) {
    return Status::InvalidArgument(fmt::format(
        "dynamic_batching.default_priority_level must be in 1..{} (priority_levels), got {}",
        c.priority_levels, c.default_priority_level));
  }
  for (const auto& [level, policy] : c.level_queue_policies) {
    if (level < 1 || level > c.priority_levels) {
      return Status::InvalidArgument(fmt::format(
          "dynamic_batching.priority_queue_policy has a policy for level {}, but the levels are "
          "1..{} (priority_levels)",
          level, c.priority_levels));
    }
  }
  return Status::OK();
}

std::string BatchShapeToString(const BatchShape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.inputs.size(); ++i) {
    if (i) out += ",";
    out += "[";
    for (size_t d = 0; d < shape.inputs[i].size(); ++d) {
      if (d) out += ",";
      out += std::to_string(shape.inputs[i][d]);
    }
    out += "]";
  }
  return out + "]";
}

BatchPolicy::BatchPolicy(BatchPolicyConfig config) : config_(std::move(config)) {
  const Status s = ValidateBatchPolicyConfig(config_);
  KILN_CHECK(s.ok(), "BatchPolicy with an invalid config: ", s.ToString());
  num_levels_ = std::max<uint64_t>(config_.priority_levels, 1);
}

const QueuePolicy& BatchPolicy::PolicyFor(uint64_t level) const {
  auto it = config_.level_queue_policies.find(level);
  return it == config_.level_queue_policies.end() ? config_.default_queue_policy : it->second;
}

Result<Admission> BatchPolicy::Admit(uint64_t priority, uint64_t timeout_us, int64_t now_ns,
                                     std::span<const size_t> queued_per_level) const {
  KILN_CHECK(queued_per_level.size() == num_levels_, "Admit: ", queued_per_level.size(),
             " queue counts for ", num_levels_, " levels");
  Admission a;
  if (config_.priority_levels == 0) {
    a.level = 1;
  } else if (priority == 0 || priority > config_.priority_levels) {
    a.level = config_.default_priority_level;
  } else {
    a.level = priority;
  }
  const QueuePolicy& policy = PolicyFor(a.level);
  const size_t queued = queued_per_level[a.level - 1];
  if (policy.max_queue_size > 0 && queued >= policy.max_queue_size) {
    return Status::ResourceExhausted(
        fmt::format("the queue of priority level {} is full ({} requests, max_queue_size {})",
                    a.level, queued, policy.max_queue_size));
  }
  uint64_t timeout = policy.default_timeout_us;
  if (policy.allow_timeout_override && timeout_us != 0 && (timeout == 0 || timeout_us < timeout)) {
    timeout = timeout_us;
  }
  a.deadline_ns = timeout == 0 ? kNever : DeadlineAfter(now_ns, timeout);
  a.timeout_action = policy.timeout_action;
  return a;
}

BatchCandidates::BatchCandidates(const BatchPolicy& policy)
    : max_(policy.config().max_batch_size),
      combine_(policy.config().dynamic_batching && policy.config().max_batch_size > 0),
      preserve_ordering_(policy.config().preserve_ordering) {}

bool BatchCandidates::Offer(const QueueEntry& entry) {
  if (full_) return false;
  if (head_shape_ == nullptr) {
    head_shape_ = entry.shape;
    total_ = entry.batch_size;
    full_ = !combine_ || total_ >= max_;
    return true;
  }
  if (total_ + entry.batch_size <= max_ && *entry.shape == *head_shape_) {
    total_ += entry.batch_size;
    full_ = total_ >= max_;
    return true;
  }
  if (preserve_ordering_) full_ = true;
  return false;
}

BatchDecision BatchPolicy::Decide(std::span<const QueueEntry> queue, int64_t now_ns,
                                  bool instance_free, bool flush) const {
  BatchDecision d;
  // Expiry, and the execution order: per level, live requests then delayed ones.
  std::vector<const QueueEntry*> order;
  std::vector<const QueueEntry*> delayed;
  order.reserve(queue.size());
  for (size_t i = 0; i < queue.size(); ++i) {
    const QueueEntry& e = queue[i];
    KILN_DCHECK(e.shape != nullptr, "queue entry ", e.id, " has no shape");
    KILN_DCHECK(i == 0 || queue[i - 1].level < e.level ||
                    (queue[i - 1].level == e.level && queue[i - 1].id < e.id),
                "Decide: the queue is not ordered by (level, id)");
    if (i > 0 && queue[i - 1].level != e.level) {
      order.insert(order.end(), delayed.begin(), delayed.end());
      delayed.clear();
    }
    if (e.deadline_ns <= now_ns) {
      if (e.timeout_action == TimeoutAction::kReject) {
        d.expired.push_back(e.id);
      } else {
        delayed.push_back(&e);
      }
      continue;
    }
    order.push_back(&e);
  }
  order.insert(order.end(), delayed.begin(), delayed.end());
  // The next expiry among the requests that stay queued.
  const auto wake_for_deadlines = [&](std::span<const QueueEntry* const> staying) {
    for (const QueueEntry* e : staying) {
      if (e->timeout_action == TimeoutAction::kReject && e->deadline_ns > now_ns) {
        d.wake_at_ns = std::min(d.wake_at_ns, e->deadline_ns);
      }
    }
  };
  if (!instance_free || order.empty()) {
    wake_for_deadlines(order);
    return d;
  }

  const QueueEntry& head = *order.front();
  const bool combine = config_.dynamic_batching && config_.max_batch_size > 0;
  std::vector<const QueueEntry*> members;
  BatchCandidates candidates(*this);
  for (size_t i = 0; i < order.size() && !candidates.full(); ++i) {
    if (candidates.Offer(*order[i])) members.push_back(order[i]);
  }
  const int64_t total = candidates.total();

  size_t take = 0;  // members[0, take) run now
  if (!combine || flush || total >= config_.max_batch_size) {
    take = members.size();
  } else {
    const std::vector<int64_t>& preferred = config_.preferred_batch_sizes;
    int64_t prefix = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      prefix += members[i]->batch_size;
      if (std::find(preferred.begin(), preferred.end(), prefix) != preferred.end()) take = i + 1;
    }
    if (take == 0) {
      int64_t oldest = head.arrival_ns;
      for (const QueueEntry* m : members) oldest = std::min(oldest, m->arrival_ns);
      const int64_t send_at = DeadlineAfter(oldest, config_.max_queue_delay_us);
      if (now_ns >= send_at) {
        take = members.size();
      } else {
        wake_for_deadlines(order);
        d.wake_at_ns = std::min(d.wake_at_ns, send_at);
        return d;
      }
    }
  }
  d.shape = *head.shape;
  std::vector<const QueueEntry*> staying;
  for (const QueueEntry* e : order) {
    if (std::find(members.begin(), members.begin() + static_cast<ptrdiff_t>(take), e) ==
        members.begin() + static_cast<ptrdiff_t>(take)) {
      staying.push_back(e);
    }
  }
  for (size_t i = 0; i < take; ++i) {
    d.batch.push_back(members[i]->id);
    d.batch_size += members[i]->batch_size;
  }
  wake_for_deadlines(staying);
  return d;
}

}  // namespace kiln
