// SPDX-License-Identifier: Apache-2.0
// BatchPolicy tables: admission (levels, timeouts, queue limits) and decisions (delay expiry,
// preferred sizes, max_batch_size, priorities, DELAY / REJECT timeouts, shape grouping,
// preserve_ordering, flush). Times are plain numbers; nothing sleeps and no thread runs.
#include "sched/batch_policy.h"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>
#include <vector>

namespace kiln {
namespace {

constexpr int64_t kUs = 1000;  // ns per microsecond
constexpr int64_t kNone = -1;  // no deadline / no wake-up, in the tables

// Shapes by index: requests with equal indices are compatible.
const std::vector<BatchShape> kShapes = {
    BatchShape{{{16}}},
    BatchShape{{{32}}},
    BatchShape{{{16}, {}}},
};

struct Req {
  uint64_t id;
  int64_t arrival_us = 0;
  int64_t deadline_us = kNone;
  uint64_t level = 1;
  TimeoutAction action = TimeoutAction::kReject;
  int64_t batch = 1;
  int shape = 0;
};

BatchPolicyConfig Dynamic(int64_t max_batch, uint64_t delay_us = 0,
                          std::vector<int64_t> preferred = {}) {
  BatchPolicyConfig c;
  c.dynamic_batching = true;
  c.max_batch_size = max_batch;
  c.max_queue_delay_us = delay_us;
  c.preferred_batch_sizes = std::move(preferred);
  return c;
}

BatchPolicyConfig WithLevels(BatchPolicyConfig c, uint64_t levels, uint64_t default_level) {
  c.priority_levels = levels;
  c.default_priority_level = default_level;
  return c;
}

BatchPolicyConfig Ordered(BatchPolicyConfig c) {
  c.preserve_ordering = true;
  return c;
}

struct DecideCase {
  std::string name;
  BatchPolicyConfig config;
  std::vector<Req> queue;  // listed in (level, id) order
  int64_t now_us = 0;
  std::vector<uint64_t> want_batch;
  std::vector<uint64_t> want_expired = {};
  int64_t want_wake_us = kNone;
  bool instance_free = true;
  bool flush = false;
};

std::vector<DecideCase> DecideCases() {
  BatchPolicyConfig none;  // no dynamic_batching: every request alone
  none.max_batch_size = 8;
  std::vector<DecideCase> cases = {
      {"empty queue", Dynamic(8), {}, 0, {}},
      {"no dynamic batching: head alone", none, {{1}, {2}, {3}}, 0, {1}},
      {"delay 0: everything compatible at once", Dynamic(8), {{1}, {2}, {3}}, 0, {1, 2, 3}},
      {"max_batch_size caps the batch", Dynamic(4), {{1}, {2}, {3}, {4}, {5}}, 0, {1, 2, 3, 4}},
      {"batch sizes add up; a request that does not fit is skipped",
       Dynamic(8),
       {{.id = 1, .batch = 3}, {.id = 2, .batch = 6}, {.id = 3, .batch = 3}},
       0,
       {1, 3}},
      {"delay not expired: wait for the oldest member's arrival + delay",
       Dynamic(8, 100),
       {{.id = 1, .arrival_us = 0}, {.id = 2, .arrival_us = 10}},
       50,
       {},
       {},
       100},
      {"delay expired: run what is there",
       Dynamic(8, 100),
       {{.id = 1, .arrival_us = 0}, {.id = 2, .arrival_us = 10}},
       100,
       {1, 2}},
      {"full batch runs before the delay",
       Dynamic(4, 1000),
       {{1}, {2}, {.id = 3, .batch = 2}},
       0,
       {1, 2, 3}},
      {"preferred size reached runs before the delay",
       Dynamic(8, 1000, {2, 4}),
       {{1}, {2}, {3}},
       0,
       {1, 2}},
      {"largest preferred prefix",
       Dynamic(8, 1000, {2, 4}),
       {{1}, {2}, {3}, {4}, {5}},
       0,
       {1, 2, 3, 4}},
      {"preferred size not reachable: wait",
       Dynamic(8, 1000, {4}),
       {{1}, {.id = 2, .batch = 2}},
       0,
       {},
       {},
       1000},
      {"priority: level 1 first, then level 2 in arrival order",
       WithLevels(Dynamic(8), 2, 2),
       {{.id = 3, .level = 1}, {.id = 1, .level = 2}, {.id = 2, .level = 2}},
       0,
       {3, 1, 2}},
      {"priority without dynamic batching: the level-1 request runs alone",
       WithLevels(none, 2, 2),
       {{.id = 3, .level = 1}, {.id = 1, .level = 2}},
       0,
       {3}},
      {"delay is measured from the oldest member, whatever its level",
       WithLevels(Dynamic(8, 100), 2, 1),
       {{.id = 2, .arrival_us = 50, .level = 1}, {.id = 1, .arrival_us = 0, .level = 2}},
       100,
       {2, 1}},
      {"shapes: incompatible requests are skipped",
       Dynamic(8),
       {{.id = 1, .shape = 0}, {.id = 2, .shape = 1}, {.id = 3, .shape = 0}},
       0,
       {1, 3}},
      {"shapes: the head's shape decides",
       Dynamic(8),
       {{.id = 1, .shape = 1}, {.id = 2, .shape = 0}, {.id = 3, .shape = 1}},
       0,
       {1, 3}},
      {"ragged entries compare as equal when the rest matches",
       Dynamic(8),
       {{.id = 1, .shape = 2}, {.id = 2, .shape = 2}},
       0,
       {1, 2}},
      {"preserve_ordering: an incompatible request ends the batch",
       Ordered(Dynamic(8)),
       {{.id = 1, .shape = 0}, {.id = 2, .shape = 1}, {.id = 3, .shape = 0}},
       0,
       {1}},
      {"preserve_ordering: a request that does not fit ends the batch",
       Ordered(Dynamic(4)),
       {{.id = 1, .batch = 3}, {.id = 2, .batch = 2}, {.id = 3, .batch = 1}},
       0,
       {1}},
      {"REJECT: expired requests are answered, the rest runs",
       Dynamic(8),
       {{.id = 1, .deadline_us = 50}, {.id = 2, .deadline_us = 200}, {.id = 3}},
       60,
       {2, 3},
       {1}},
      {"REJECT: expiry while every instance is busy; wake at the next deadline",
       Dynamic(8),
       {{.id = 1, .deadline_us = 50}, {.id = 2, .deadline_us = 200}, {.id = 3, .deadline_us = 150}},
       60,
       {},
       {1},
       150,
       /*instance_free=*/false},
      {"busy instance and no deadlines: no wake-up",
       Dynamic(8, 100),
       {{1}, {2}},
       0,
       {},
       {},
       kNone,
       /*instance_free=*/false},
      {"deadline earlier than the delay decides the wake-up",
       Dynamic(8, 100),
       {{.id = 1, .arrival_us = 0, .deadline_us = 80}},
       10,
       {},
       {},
       80},
      {"wake-up ignores the requests that run now",
       Dynamic(2),
       {{.id = 1, .deadline_us = 500},
        {.id = 2, .deadline_us = 400},
        {.id = 3, .deadline_us = 900}},
       0,
       {1, 2},
       {},
       900},
      {"DELAY: an expired request runs after its level's other requests",
       none,
       {{.id = 1, .deadline_us = 50, .action = TimeoutAction::kDelay}, {.id = 2}},
       60,
       {2}},
      {"DELAY: still before the next level",
       WithLevels(none, 2, 1),
       {{.id = 1, .deadline_us = 50, .level = 1, .action = TimeoutAction::kDelay},
        {.id = 2, .level = 2}},
       60,
       {1}},
      {"DELAY: not yet expired keeps its place",
       none,
       {{.id = 1, .deadline_us = 50, .action = TimeoutAction::kDelay}, {.id = 2}},
       40,
       {1}},
      {"DELAY: expired requests batch with the others",
       Dynamic(8),
       {{.id = 1, .deadline_us = 50, .action = TimeoutAction::kDelay}, {.id = 2}},
       60,
       {2, 1}},
      {"flush (shutdown) runs without waiting for the delay",
       Dynamic(8, 1000),
       {{1}, {2}},
       0,
       {1, 2},
       {},
       kNone,
       true,
       /*flush=*/true},
      {"max_batch_size 0 with dynamic_batching: one request at a time",
       Dynamic(0),
       {{1}, {2}},
       0,
       {1}},
  };
  return cases;
}

TEST(BatchPolicyTest, DecideTable) {
  for (const DecideCase& c : DecideCases()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(ValidateBatchPolicyConfig(c.config).ok());
    BatchPolicy policy(c.config);
    std::vector<QueueEntry> queue;
    for (const Req& r : c.queue) {
      queue.push_back({r.id, r.arrival_us * kUs,
                       r.deadline_us == kNone ? kNever : r.deadline_us * kUs, r.level, r.action,
                       r.batch, &kShapes[static_cast<size_t>(r.shape)]});
    }
    const BatchDecision d = policy.Decide(queue, c.now_us * kUs, c.instance_free, c.flush);
    EXPECT_EQ(d.batch, c.want_batch);
    EXPECT_EQ(d.expired, c.want_expired);
    EXPECT_EQ(d.wake_at_ns, c.want_wake_us == kNone ? kNever : c.want_wake_us * kUs);
    if (!c.want_batch.empty()) {
      int64_t total = 0;
      for (const Req& r : c.queue) {
        if (std::find(c.want_batch.begin(), c.want_batch.end(), r.id) != c.want_batch.end()) {
          total += r.batch;
          EXPECT_EQ(d.shape, kShapes[static_cast<size_t>(r.shape)]);
        }
      }
      EXPECT_EQ(d.batch_size, total);
    } else {
      EXPECT_EQ(d.batch_size, 0);
    }
  }
}

struct AdmitCase {
  std::string name;
  BatchPolicyConfig config;
  uint64_t priority = 0;
  uint64_t timeout_us = 0;
  std::vector<size_t> queued = {0};
  uint64_t want_level = 1;
  int64_t want_deadline_us = kNone;  // relative to now
  TimeoutAction want_action = TimeoutAction::kReject;
  bool want_full = false;
};

BatchPolicyConfig WithPolicy(BatchPolicyConfig c, QueuePolicy p) {
  c.default_queue_policy = p;
  return c;
}

TEST(BatchPolicyTest, AdmitTable) {
  const QueuePolicy t1000{TimeoutAction::kReject, 1000, false, 0};
  const QueuePolicy t1000_override{TimeoutAction::kReject, 1000, true, 0};
  const QueuePolicy t0_override{TimeoutAction::kReject, 0, true, 0};
  const QueuePolicy delay{TimeoutAction::kDelay, 300, false, 0};
  const QueuePolicy max2{TimeoutAction::kReject, 0, false, 2};
  BatchPolicyConfig levels3 = WithLevels(Dynamic(8), 3, 2);
  BatchPolicyConfig per_level = levels3;
  per_level.level_queue_policies[1] = QueuePolicy{TimeoutAction::kReject, 50, false, 1};

  const std::vector<AdmitCase> cases = {
      {"no levels: any priority is level 1", Dynamic(8), 5, 0, {0}, 1},
      {"priority 0: the default level", levels3, 0, 0, {0, 0, 0}, 2},
      {"priority 1: the highest level", levels3, 1, 0, {0, 0, 0}, 1},
      {"priority 3", levels3, 3, 0, {0, 0, 0}, 3},
      {"priority above the levels: the default level", levels3, 4, 0, {0, 0, 0}, 2},
      {"no default timeout, no override: request timeout ignored", Dynamic(8), 0, 100, {0}, 1},
      {"default timeout applies", WithPolicy(Dynamic(8), t1000), 0, 0, {0}, 1, 1000},
      {"no override: request timeout ignored", WithPolicy(Dynamic(8), t1000), 0, 100, {0}, 1, 1000},
      {"override shortens", WithPolicy(Dynamic(8), t1000_override), 0, 100, {0}, 1, 100},
      {"override never lengthens", WithPolicy(Dynamic(8), t1000_override), 0, 5000, {0}, 1, 1000},
      {"override with no request timeout",
       WithPolicy(Dynamic(8), t1000_override),
       0,
       0,
       {0},
       1,
       1000},
      {"override with no default timeout", WithPolicy(Dynamic(8), t0_override), 0, 70, {0}, 1, 70},
      {"DELAY action", WithPolicy(Dynamic(8), delay), 0, 0, {0}, 1, 300, TimeoutAction::kDelay},
      {"queue below max_queue_size", WithPolicy(Dynamic(8), max2), 0, 0, {1}, 1},
      {"queue full",
       WithPolicy(Dynamic(8), max2),
       0,
       0,
       {2},
       1,
       kNone,
       TimeoutAction::kReject,
       true},
      {"per-level policy: level 1 full",
       per_level,
       1,
       0,
       {1, 0, 0},
       1,
       kNone,
       TimeoutAction::kReject,
       true},
      {"per-level policy: level 1 timeout", per_level, 1, 0, {0, 5, 5}, 1, 50},
      {"per-level policy: other levels use the default policy", per_level, 2, 0, {9, 9, 9}, 2},
      {"huge timeout saturates", WithPolicy(Dynamic(8), t0_override), 0, UINT64_MAX, {0}, 1},
  };
  const int64_t now = 7'000'000;
  for (const AdmitCase& c : cases) {
    SCOPED_TRACE(c.name);
    BatchPolicy policy(c.config);
    Result<Admission> a = policy.Admit(c.priority, c.timeout_us, now, c.queued);
    if (c.want_full) {
      ASSERT_FALSE(a.ok());
      EXPECT_EQ(a.status().code(), StatusCode::kResourceExhausted);
      EXPECT_NE(a.status().message().find("is full"), std::string::npos) << a.status().ToString();
      continue;
    }
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->level, c.want_level);
    EXPECT_EQ(a->deadline_ns,
              c.want_deadline_us == kNone ? kNever : now + c.want_deadline_us * kUs);
    EXPECT_EQ(a->timeout_action, c.want_action);
  }
}

TEST(BatchPolicyTest, QueueFullMessageNamesLevelAndLimit) {
  BatchPolicyConfig c = WithLevels(Dynamic(8), 2, 1);
  c.level_queue_policies[2] = QueuePolicy{TimeoutAction::kReject, 0, false, 3};
  BatchPolicy policy(c);
  std::vector<size_t> queued = {0, 3};
  Result<Admission> a = policy.Admit(2, 0, 0, queued);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "the queue of priority level 2 is full (3 requests, max_queue_size 3)");
}

TEST(BatchPolicyTest, ValidateConfig) {
  struct Case {
    BatchPolicyConfig config;
    std::string message;  // empty: valid
  };
  BatchPolicyConfig bad_level_policy = WithLevels(Dynamic(8), 2, 1);
  bad_level_policy.level_queue_policies[3] = QueuePolicy{};
  BatchPolicyConfig no_levels_policy = Dynamic(8);
  no_levels_policy.level_queue_policies[1] = QueuePolicy{};
  const std::vector<Case> cases = {
      {Dynamic(8, 0, {1, 8}), ""},
      {WithLevels(Dynamic(8), 3, 3), ""},
      {Dynamic(8, 0, {0}), "preferred_batch_size 0 is out of range 1..8"},
      {Dynamic(8, 0, {9}), "preferred_batch_size 9 is out of range 1..8"},
      {Dynamic(-1), "max_batch_size must be >= 0, got -1"},
      {WithLevels(Dynamic(8), 3, 0),
       "default_priority_level must be in 1..3 (priority_levels), got 0"},
      {WithLevels(Dynamic(8), 3, 4), "default_priority_level must be in 1..3"},
      {WithLevels(Dynamic(8), 0, 1), "default_priority_level is 1 but priority_levels is 0"},
      {bad_level_policy, "priority_queue_policy has a policy for level 3, but the levels are 1..2"},
      {no_levels_policy, "priority_queue_policy has a policy for level 1, but the levels are 1..0"},
  };
  for (const Case& c : cases) {
    Status s = ValidateBatchPolicyConfig(c.config);
    if (c.message.empty()) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
}

TEST(BatchPolicyTest, BatchShapeText) {
  EXPECT_EQ(BatchShapeToString(BatchShape{{{2, 3}, {}, {16}}}), "[[2,3],[],[16]]");
}

// The prefix rule the batcher relies on: without deadlines, a decision over the queue's head up
// to the entry after which BatchCandidates is full equals the decision over the whole queue.
// Random queues (sizes, shapes, levels, arrivals) under random configs, against Decide itself on
// the whole queue.
TEST(BatchPolicyTest, CandidatePrefixDecidesLikeTheWholeQueue) {
  std::mt19937 rng(7);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  int prefixes_shorter = 0;
  for (int round = 0; round < 3000; ++round) {
    BatchPolicyConfig config;
    config.dynamic_batching = pick(4) != 0;
    config.max_batch_size = pick(5) == 0 ? 0 : 1 + pick(8);
    if (config.max_batch_size > 0 && pick(2) == 0) {
      config.preferred_batch_sizes = {1 + pick(static_cast<int>(config.max_batch_size))};
    }
    config.max_queue_delay_us = static_cast<uint64_t>(pick(3)) * 100;
    config.preserve_ordering = pick(3) == 0;
    if (pick(2) == 0) {
      config.priority_levels = 2;
      config.default_priority_level = 1;
    }
    const BatchPolicy policy(config);
    std::vector<QueueEntry> queue;
    const int n = pick(12);
    for (uint64_t level = 1; level <= policy.num_levels(); ++level) {
      for (int i = 0; i < n; ++i) {
        if (pick(static_cast<int>(policy.num_levels())) != 0) continue;
        QueueEntry e;
        e.id = level * 1000 + static_cast<uint64_t>(i);
        e.arrival_ns = pick(500) * kUs;
        e.level = level;
        e.batch_size =
            config.max_batch_size > 0 ? 1 + pick(static_cast<int>(config.max_batch_size)) : 1;
        e.shape = &kShapes[static_cast<size_t>(pick(2))];
        queue.push_back(e);
      }
    }
    size_t prefix = queue.size();
    BatchCandidates candidates(policy);
    for (size_t i = 0; i < queue.size(); ++i) {
      candidates.Offer(queue[i]);
      if (candidates.full()) {
        prefix = i + 1;
        break;
      }
    }
    if (prefix < queue.size()) ++prefixes_shorter;
    const int64_t now = pick(800) * kUs;
    const bool flush = pick(5) == 0;
    const BatchDecision whole = policy.Decide(queue, now, /*instance_free=*/true, flush);
    const BatchDecision part =
        policy.Decide(std::span<const QueueEntry>(queue).first(prefix), now, true, flush);
    SCOPED_TRACE(::testing::Message()
                 << "round " << round << ", prefix " << prefix << " of " << queue.size());
    EXPECT_EQ(part.batch, whole.batch);
    EXPECT_EQ(part.batch_size, whole.batch_size);
    EXPECT_EQ(part.wake_at_ns, whole.wake_at_ns);
    EXPECT_TRUE(part.expired.empty() && whole.expired.empty());
    if (!whole.batch.empty()) {
      EXPECT_EQ(part.shape, whole.shape);
    }
  }
  EXPECT_GT(prefixes_shorter, 500);  // the rule is exercised, not vacuous
}

}  // namespace
}  // namespace kiln
