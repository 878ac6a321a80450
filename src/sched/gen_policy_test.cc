// SPDX-License-Identifier: Apache-2.0
// GenPolicy: the step plans of scripted scenarios, against plans written out by hand. The KV
// space is FakeKv (block counters per sequence, optional prefix hits); the "engine" samples a
// token for every chunk that wants logits and finishes a sequence after its max_new tokens.
#include "sched/gen_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "sched/clock.h"

namespace kiln {
namespace {

// A counter-based GenKvSpace: each sequence holds ceil(len / block_size) blocks for the
// positions it reserved. A prefix hit (SetHit) is taken as blocks of the pool (as if cached and
// unreferenced). A fork borrows its parent's blocks (they are not its own to free).
class FakeKv final : public GenKvSpace {
 public:
  FakeKv(int64_t num_blocks, int64_t block_size)
      : num_blocks_(num_blocks), block_size_(block_size) {}

  int64_t num_free_blocks() const override { return num_blocks_ - used_ - external_; }
  int64_t num_blocks() const override { return num_blocks_; }
  int64_t BlocksToAdmit(GenSeqId seq, int64_t new_len) const override {
    EXPECT_EQ(held(seq), 0) << "BlocksToAdmit of sequence " << seq << " holding blocks";
    ++blocks_to_admit_calls_;
    return Blocks(std::max(new_len, hit(seq)));
  }
  int64_t MatchPrefix(GenSeqId seq) override {
    EXPECT_EQ(held(seq), 0) << "MatchPrefix of sequence " << seq << " holding blocks";
    const int64_t h = hit(seq);
    Take(seq, Blocks(h));
    return h;
  }
  bool Reserve(GenSeqId seq, int64_t new_len) override {
    const int64_t need = Blocks(new_len) - held(seq);
    if (need <= 0) return true;
    if (need > num_free_blocks()) return false;
    Take(seq, need);
    return true;
  }
  void Free(GenSeqId seq) override {
    auto it = seqs_.find(seq);
    ++frees_[seq];
    if (it == seqs_.end()) return;
    used_ -= it->second.blocks - it->second.borrowed;
    seqs_.erase(it);
  }
  void Fork(GenSeqId parent, GenSeqId child) override {
    EXPECT_EQ(held(child), 0);
    const int64_t b = held(parent);
    seqs_[child] = {b, b};
    forks_.push_back({parent, child});
  }

  void SetHit(GenSeqId seq, int64_t tokens) { hits_[seq] = tokens; }
  // Blocks held by something outside the policy.
  void SetExternal(int64_t blocks) { external_ = blocks; }
  int64_t held(GenSeqId seq) const {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? 0 : it->second.blocks;
  }
  int frees(GenSeqId seq) const {
    auto it = frees_.find(seq);
    return it == frees_.end() ? 0 : it->second;
  }
  const std::vector<std::pair<GenSeqId, GenSeqId>>& forks() const { return forks_; }
  int64_t blocks_to_admit_calls() const { return blocks_to_admit_calls_; }

 private:
  struct Held {
    int64_t blocks = 0;
    int64_t borrowed = 0;  // shared with the parent (Fork)
  };
  int64_t Blocks(int64_t len) const { return (len + block_size_ - 1) / block_size_; }
  int64_t hit(GenSeqId seq) const {
    auto it = hits_.find(seq);
    return it == hits_.end() ? 0 : it->second;
  }
  void Take(GenSeqId seq, int64_t n) {
    seqs_[seq].blocks += n;
    used_ += n;
  }

  const int64_t num_blocks_;
  const int64_t block_size_;
  int64_t used_ = 0;
  int64_t external_ = 0;
  std::map<GenSeqId, Held> seqs_;
  std::map<GenSeqId, int64_t> hits_;
  std::map<GenSeqId, int> frees_;
  std::vector<std::pair<GenSeqId, GenSeqId>> forks_;
  mutable int64_t blocks_to_admit_calls_ = 0;
};

// One chunk of a plan, as written in the tables.
struct C {
  GenSeqId seq;
  int64_t pos0;
  int64_t n;
  bool logits;
  bool prompt;
  bool operator==(const C&) const = default;
};
constexpr bool L = true;   // wants logits
constexpr bool P = true;   // a prompt chunk
constexpr bool D = false;  // a decode token (or: no logits)

void PrintTo(const C& c, std::ostream* os) {
  *os << "{seq " << c.seq << " [" << c.pos0 << ", +" << c.n << ")" << (c.logits ? " L" : "")
      << (c.prompt ? " P" : " D") << "}";
}

std::vector<C> Chunks(const StepPlan& plan) {
  std::vector<C> out;
  for (const ScheduledChunk& c : plan.run) {
    out.push_back({c.seq, c.pos0, c.num_tokens, c.wants_logits, c.is_prompt});
  }
  return out;
}

struct Seq {
  GenSeqId id;
  int64_t prompt;
  int64_t max_new = 1'000'000;  // finishes after this many sampled tokens
  uint32_t priority = 1;
  int64_t arrival = -1;  // -1: the id
  int64_t deadline_ns = 0;
  int add_before_step = 1;  // added just before this step (1-based)
};

// The policy, the fake KV space and a fake engine.
class Harness {
 public:
  Harness(const GenPolicyOptions& options, int64_t num_blocks = 100'000, int64_t block_size = 16)
      : kv(num_blocks, block_size), policy(options, &kv) {}

  void Add(const Seq& s) {
    GenSeqInfo info;
    info.id = s.id;
    info.num_tokens = s.prompt;
    info.priority = s.priority;
    info.arrival = s.arrival < 0 ? static_cast<int64_t>(s.id) : s.arrival;
    info.deadline_ns = s.deadline_ns;
    ASSERT_TRUE(policy.Add(info).ok()) << s.id;
    max_new[s.id] = s.max_new;
  }

  // Schedules one step at `now` and completes it: every chunk with logits samples a token; a
  // sequence that reached its max_new tokens finishes.
  StepPlan Step(int64_t now_ns = 0) {
    StepPlan plan = policy.Schedule(now_ns);
    int64_t sum = 0;
    std::vector<ChunkOutcome> outcomes;
    for (const ScheduledChunk& c : plan.run) {
      sum += c.num_tokens;
      ChunkOutcome o;
      o.seq = c.seq;
      if (c.wants_logits) {
        o.appended = true;
        o.finished = ++generated[c.seq] >= max_new[c.seq];
      }
      outcomes.push_back(o);
    }
    EXPECT_EQ(plan.num_batched_tokens, sum);
    policy.Complete(plan, outcomes);
    return plan;
  }

  FakeKv kv;
  GenPolicy policy;
  std::map<GenSeqId, int64_t> max_new;
  std::map<GenSeqId, int64_t> generated;
};

GenPolicyOptions Options(int64_t budget, int64_t max_num_seqs = 64) {
  GenPolicyOptions o;
  o.max_num_batched_tokens = budget;
  o.max_num_seqs = max_num_seqs;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Scripted scenarios: sequences (some added before later steps) and the chunks of each step.

struct PlanCase {
  std::string name;
  GenPolicyOptions options;
  int64_t num_blocks = 100'000;
  int64_t block_size = 16;
  std::vector<Seq> seqs;
  std::vector<std::vector<C>> steps;
  std::vector<std::vector<GenSeqId>> preempted = {};  // per step; missing: none
};

void PrintTo(const PlanCase& c, std::ostream* os) { *os << c.name; }

std::vector<PlanCase> PlanCases() {
  std::vector<PlanCase> cases;
  {
    // 300 + 212 fill the first step; the rest of B and all of C fit the second beside A's
    // decode (512 - 1 - 88 = 423 >= 300).
    PlanCase c{"TokenBudgetSharedByPrompts",
               Options(512),
               100'000,
               16,
               {{1, 300}, {2, 300}, {3, 300}},
               {}};
    c.steps = {{{1, 0, 300, L, P}, {2, 0, 212, D, P}},
               {{1, 300, 1, L, D}, {2, 212, 88, L, P}, {3, 0, 300, L, P}},
               {{1, 301, 1, L, D}, {2, 300, 1, L, D}, {3, 300, 1, L, D}}};
    cases.push_back(c);
  }
  {
    // 1200 = 512 + 512 + 176.
    PlanCase c{"LongPromptInChunks", Options(512), 100'000, 16, {{1, 1200}}, {}};
    c.steps = {
        {{1, 0, 512, D, P}}, {{1, 512, 512, D, P}}, {{1, 1024, 176, L, P}}, {{1, 1200, 1, L, D}}};
    cases.push_back(c);
  }
  {
    // A chunk that stops one token short of the prompt leaves that token as a decode.
    PlanCase c{"LastPromptTokenRunsAsDecode", Options(4), 100'000, 16, {{1, 5}}, {}};
    c.steps = {{{1, 0, 4, D, P}}, {{1, 4, 1, L, D}}, {{1, 5, 1, L, D}}};
    cases.push_back(c);
  }
  {
    // The running decode of a priority-2 sequence goes before the prompt of a priority-1 one.
    GenPolicyOptions o = Options(512);
    o.priority_levels = 2;
    PlanCase c{"DecodeFirst", o, 100'000, 16, {}, {}};
    c.seqs = {{.id = 1, .prompt = 10, .priority = 2},
              {.id = 2, .prompt = 20, .priority = 1, .add_before_step = 2}};
    c.steps = {{{1, 0, 10, L, P}}, {{1, 10, 1, L, D}, {2, 0, 20, L, P}}};
    cases.push_back(c);
  }
  {
    // More decodes than budget: the first ones in policy order run, nothing is admitted.
    PlanCase c{"DecodesBeyondTheBudget", Options(2), 100'000, 16, {{1, 1}, {2, 1}, {3, 1}}, {}};
    c.steps = {{{1, 0, 1, L, P}, {2, 0, 1, L, P}},
               {{1, 1, 1, L, D}, {2, 1, 1, L, D}},
               {{1, 2, 1, L, D}, {2, 2, 1, L, D}}};
    cases.push_back(c);
  }
  {
    // Level 1 first although it arrived later.
    GenPolicyOptions o = Options(300);
    o.priority_levels = 2;
    PlanCase c{"PriorityLevelOneFirst", o, 100'000, 16, {}, {}};
    c.seqs = {{.id = 1, .prompt = 300, .priority = 2}, {.id = 2, .prompt = 300, .priority = 1}};
    c.steps = {{{2, 0, 300, L, P}}, {{2, 300, 1, L, D}, {1, 0, 299, D, P}}};
    cases.push_back(c);
  }
  {
    // Within a level, by arrival (not by the order of Add).
    PlanCase c{"FcfsWithinALevel", Options(100), 100'000, 16, {}, {}};
    c.seqs = {{.id = 1, .prompt = 100, .arrival = 5}, {.id = 2, .prompt = 100, .arrival = 3}};
    c.steps = {{{2, 0, 100, L, P}}, {{2, 100, 1, L, D}, {1, 0, 99, D, P}}};
    cases.push_back(c);
  }
  {
    // Priority 0 is the default (2); 7 is clamped to the last level (3). One at a time.
    GenPolicyOptions o = Options(10, /*max_num_seqs=*/1);
    o.priority_levels = 3;
    o.default_priority = 2;
    PlanCase c{"DefaultAndClampedPriority", o, 100'000, 16, {}, {}};
    c.seqs = {{.id = 1, .prompt = 10, .max_new = 1, .priority = 7, .arrival = 0},
              {.id = 2, .prompt = 10, .max_new = 1, .priority = 0, .arrival = 1},
              {.id = 3, .prompt = 10, .max_new = 1, .priority = 2, .arrival = 2}};
    c.steps = {{{2, 0, 10, L, P}}, {{3, 0, 10, L, P}}, {{1, 0, 10, L, P}}, {}};
    cases.push_back(c);
  }
  {
    // Two run at most; the third is admitted in the step after the first finished.
    PlanCase c{"MaxNumSeqs", Options(512, /*max_num_seqs=*/2), 100'000, 16, {}, {}};
    c.seqs = {{.id = 1, .prompt = 10, .max_new = 1}, {2, 10}, {3, 10}};
    c.steps = {{{1, 0, 10, L, P}, {2, 0, 10, L, P}}, {{2, 10, 1, L, D}, {3, 0, 10, L, P}}};
    cases.push_back(c);
  }
  {
    // Chunked prefill off: 600 does not fit beside A (512 - 100), and 50 does not overtake it.
    // Once nothing runs, 600 runs in budget-sized chunks; 50 runs whole beside its last chunk.
    GenPolicyOptions o = Options(512);
    o.chunked_prefill = false;
    PlanCase c{"ChunkedPrefillOff", o, 100'000, 16, {}, {}};
    c.seqs = {{.id = 1, .prompt = 100, .max_new = 2}, {2, 600}, {3, 50}};
    c.steps = {{{1, 0, 100, L, P}},
               {{1, 100, 1, L, D}},
               {{2, 0, 512, D, P}},
               {{2, 512, 88, L, P}, {3, 0, 50, L, P}}};
    cases.push_back(c);
  }
  {
    // Chunked prefill off: a prompt that fits the rest of the budget runs whole beside decodes.
    GenPolicyOptions o = Options(512);
    o.chunked_prefill = false;
    PlanCase c{"ChunkedPrefillOffWholePromptFits", o, 100'000, 16, {}, {}};
    c.seqs = {{1, 100}, {.id = 2, .prompt = 511, .add_before_step = 2}};
    c.steps = {{{1, 0, 100, L, P}}, {{1, 100, 1, L, D}, {2, 0, 511, L, P}}};
    cases.push_back(c);
  }
  {
    // Block size 4, 6 blocks; three 7-token prompts take 2 blocks each. At the third step the
    // 9th position of the first needs a third block: the victim is the lowest priority (B),
    // not the latest arrival (C).
    GenPolicyOptions o = Options(512);
    o.priority_levels = 2;
    PlanCase c{"VictimIsLowestPriority", o, 6, 4, {}, {}};
    c.seqs = {{.id = 1, .prompt = 7, .priority = 1},
              {.id = 2, .prompt = 7, .priority = 2},
              {.id = 3, .prompt = 7, .priority = 1}};
    c.steps = {{{1, 0, 7, L, P}, {3, 0, 7, L, P}, {2, 0, 7, L, P}},
               {{1, 7, 1, L, D}, {3, 7, 1, L, D}, {2, 7, 1, L, D}},
               {{1, 8, 1, L, D}, {3, 8, 1, L, D}}};
    c.preempted = {{}, {}, {2}};
    cases.push_back(c);
  }
  {
    // The same with one level: the latest arrival (C) is the victim.
    PlanCase c{"VictimIsLatestArrival", Options(512), 6, 4, {{1, 7}, {2, 7}, {3, 7}}, {}};
    c.steps = {{{1, 0, 7, L, P}, {2, 0, 7, L, P}, {3, 0, 7, L, P}},
               {{1, 7, 1, L, D}, {2, 7, 1, L, D}, {3, 7, 1, L, D}},
               {{1, 8, 1, L, D}, {2, 8, 1, L, D}}};
    c.preempted = {{}, {}, {3}};
    cases.push_back(c);
  }
  {
    // Block size 4, 5 blocks. X (9 tokens, 3 blocks) and Y (7 tokens, 2 blocks). At step 3, Y's
    // 9th position needs a third block and Y is the cheapest: it preempts itself. Z (arrived
    // after Y) does not overtake Y while X runs; X finishes at step 4, and Y resumes first with
    // all its 9 tokens (7 of prompt, 2 sampled) recomputed as its prompt.
    PlanCase c{"PreemptedResumesInItsPlace", Options(512), 5, 4, {}, {}};
    c.seqs = {{.id = 1, .prompt = 9, .max_new = 4},
              {.id = 2, .prompt = 7},
              {.id = 3, .prompt = 4, .add_before_step = 3}};
    c.steps = {{{1, 0, 9, L, P}, {2, 0, 7, L, P}},
               {{1, 9, 1, L, D}, {2, 7, 1, L, D}},
               {{1, 10, 1, L, D}},
               {{1, 11, 1, L, D}},
               {{2, 0, 9, L, P}, {3, 0, 4, L, P}},
               {{2, 9, 1, L, D}, {3, 4, 1, L, D}}};
    c.preempted = {{}, {}, {2}};
    cases.push_back(c);
  }
  {
    // Block size 4, 5 blocks, budget 8. D (priority 2) decodes; P (priority 1) is in its
    // prompt. At step 3, D's decode takes the last free block, then P's chunk [7, 14) needs two
    // more: D, the victim, is taken out of the plan.
    GenPolicyOptions o = Options(8);
    o.priority_levels = 2;
    PlanCase c{"VictimTakenOutOfThePlan", o, 5, 4, {}, {}};
    c.seqs = {{.id = 2, .prompt = 7, .priority = 2},
              {.id = 1, .prompt = 20, .priority = 1, .add_before_step = 2}};
    c.steps = {{{2, 0, 7, L, P}}, {{2, 7, 1, L, D}, {1, 0, 7, D, P}}, {{1, 7, 7, D, P}}};
    c.preempted = {{}, {}, {2}};
    cases.push_back(c);
  }
  return cases;
}

class GenPolicyPlanTest : public testing::TestWithParam<PlanCase> {};

TEST_P(GenPolicyPlanTest, StepsMatch) {
  const PlanCase& c = GetParam();
  Harness h(c.options, c.num_blocks, c.block_size);
  for (size_t step = 0; step < c.steps.size(); ++step) {
    for (const Seq& s : c.seqs) {
      if (static_cast<size_t>(s.add_before_step) == step + 1) h.Add(s);
    }
    StepPlan plan = h.Step();
    EXPECT_EQ(Chunks(plan), c.steps[step]) << "step " << step + 1;
    const std::vector<GenSeqId> none;
    EXPECT_EQ(plan.preempted, step < c.preempted.size() ? c.preempted[step] : none)
        << "step " << step + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, GenPolicyPlanTest, testing::ValuesIn(PlanCases()),
                         [](const testing::TestParamInfo<PlanCase>& info) {
                           return info.param.name;
                         });

// ---------------------------------------------------------------------------------------------

TEST(GenPolicyTest, PreemptionKeepsTokensAndCounts) {
  // PreemptedResumesInItsPlace, looking at the counts: Y keeps its 9 tokens, holds no block
  // while waiting, and the preemption is counted.
  Harness h(Options(512), /*num_blocks=*/5, /*block_size=*/4);
  h.Add({.id = 1, .prompt = 9, .max_new = 4});
  h.Add({.id = 2, .prompt = 7});
  h.Step();
  h.Step();
  StepPlan plan = h.Step();
  ASSERT_EQ(plan.preempted, std::vector<GenSeqId>{2});
  EXPECT_EQ(h.kv.held(2), 0);
  EXPECT_EQ(h.kv.frees(2), 1);
  EXPECT_EQ(h.kv.held(1), 3);
  GenPolicyStats st = h.policy.stats();
  EXPECT_EQ(st.running, 1);
  EXPECT_EQ(st.waiting, 1);
  EXPECT_EQ(st.preemptions, 1);
}

TEST(GenPolicyTest, FairnessLongPromptBesideDecodes) {
  // 16 sequences decode; a 4000-token prompt arrives with budget 512: every step still gives
  // each of the 16 its decode token first, and the prompt takes the other 496 tokens:
  // ceil(4000 / 496) = 9 steps (8 x 496 = 3968, then 32).
  Harness h(Options(512));
  for (GenSeqId id = 1; id <= 16; ++id) h.Add({id, 8});
  StepPlan first = h.Step();
  ASSERT_EQ(first.run.size(), 16u);
  h.Add({.id = 100, .prompt = 4000, .arrival = 100});
  int steps = 0;
  bool done = false;
  while (!done) {
    ASSERT_LT(steps, 20);
    StepPlan plan = h.Step();
    ++steps;
    ASSERT_EQ(plan.run.size(), 17u) << "step " << steps;
    for (size_t i = 0; i < 16; ++i) {
      EXPECT_EQ(Chunks(plan)[i], (C{i + 1, 8 + steps - 1, 1, L, D})) << "step " << steps;
    }
    const ScheduledChunk& last = plan.run[16];
    EXPECT_EQ(last.seq, 100u);
    EXPECT_EQ(last.pos0, 496 * (steps - 1));
    EXPECT_EQ(last.num_tokens, steps < 9 ? 496 : 32);
    done = last.wants_logits;
  }
  EXPECT_EQ(steps, 9);
  // Then 17 decodes.
  StepPlan plan = h.Step();
  ASSERT_EQ(plan.run.size(), 17u);
  EXPECT_EQ(Chunks(plan)[16], (C{100, 4000, 1, L, D}));
}

TEST(GenPolicyTest, AdmissionByBlocksAndWatermark) {
  // Block size 16, 10 blocks: A (95 tokens) takes 6; B (63 tokens) needs 4 of the 4 left,
  // which passes with watermark 0 and not with watermark 1.
  struct Case {
    int64_t watermark;
    std::vector<C> step1;
    std::vector<C> step2;
  };
  const std::vector<Case> cases = {
      {0, {{1, 0, 95, L, P}, {2, 0, 63, L, P}}, {{1, 95, 1, L, D}, {2, 63, 1, L, D}}},
      {1, {{1, 0, 95, L, P}}, {{1, 95, 1, L, D}}},
  };
  for (const Case& c : cases) {
    GenPolicyOptions o = Options(512);
    o.watermark_blocks = c.watermark;
    Harness h(o, /*num_blocks=*/10, /*block_size=*/16);
    h.Add({1, 95});
    h.Add({2, 63});
    EXPECT_EQ(Chunks(h.Step()), c.step1) << "watermark " << c.watermark;
    EXPECT_EQ(Chunks(h.Step()), c.step2) << "watermark " << c.watermark;
  }
}

TEST(GenPolicyTest, StaticBatchingWaitsForTheWholeBatch) {
  // Request-level batching: A (2 new tokens) and B (4) form a batch; C, added after their
  // first step, waits until both finished (continuous batching admits it at once).
  for (const bool static_batching : {true, false}) {
    GenPolicyOptions o = Options(512);
    o.static_batching = static_batching;
    Harness h(o);
    h.Add({1, 10, 2});
    h.Add({2, 10, 4});
    EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 0, 10, L, P}, {2, 0, 10, L, P}}));
    h.Add({3, 5, 1});
    if (!static_batching) {
      EXPECT_EQ(Chunks(h.Step()),
                (std::vector<C>{{1, 10, 1, L, D}, {2, 10, 1, L, D}, {3, 0, 5, L, P}}));
      continue;
    }
    EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 10, 1, L, D}, {2, 10, 1, L, D}}));  // A done
    EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{2, 11, 1, L, D}}));
    EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{2, 12, 1, L, D}}));  // B done
    EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{3, 0, 5, L, P}}));
  }
}

TEST(GenPolicyTest, StaticBatchIsTheFirstMaxNumSeqsWaiting) {
  // max_num_seqs 3, budget 20, prompts of 10: the batch {1, 2, 3} needs two steps to admit
  // (1 and 2 decode meanwhile); 4 and 5 wait until the whole batch has finished.
  GenPolicyOptions o = Options(20, /*max_num_seqs=*/3);
  o.static_batching = true;
  Harness h(o);
  for (GenSeqId id = 1; id <= 5; ++id) h.Add({id, 10, 2});
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 0, 10, L, P}, {2, 0, 10, L, P}}));
  EXPECT_EQ(Chunks(h.Step()),
            (std::vector<C>{{1, 10, 1, L, D}, {2, 10, 1, L, D}, {3, 0, 10, L, P}}));  // 1, 2 done
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{3, 10, 1, L, D}}));                    // 3 done
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{4, 0, 10, L, P}, {5, 0, 10, L, P}}));
}

TEST(GenPolicyTest, WatermarkWaivedWhenNothingRuns) {
  // 4 blocks, watermark 2: a 64-token prompt needs all 4 and still runs when it is alone.
  GenPolicyOptions o = Options(512);
  o.watermark_blocks = 2;
  Harness h(o, /*num_blocks=*/4, /*block_size=*/16);
  h.Add({1, 64});
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 0, 64, L, P}}));
}

TEST(GenPolicyTest, PrefixHitStartsTheChunkLater) {
  struct Case {
    std::string name;
    int64_t budget;
    int64_t num_blocks;
    int64_t hit;
    std::vector<C> step1;
  };
  // Block size 16, prompt 100. The budget pays only for tokens past the hit.
  const std::vector<Case> cases = {
      {"whole", 512, 100, 32, {{1, 32, 68, L, P}}},
      {"chunk", 50, 100, 32, {{1, 32, 50, D, P}}},
      // 7 blocks, budget 32: first chunk checked as [0, 32) (the 48-token hit: 3 blocks);
      // [48, 80) needs 5 blocks, 4 are free once another holds 3: falls back to [48, 49).
      {"fallback", 33, 7, 48, {{2, 33, 1, L, D}, {1, 48, 1, D, P}}},
  };
  for (const Case& c : cases) {
    Harness h(Options(c.budget), c.num_blocks, /*block_size=*/16);
    h.kv.SetHit(1, c.hit);
    if (c.name == "fallback") {
      // Sequence 2 (33 tokens, 3 blocks) runs first and is decoding at the step checked.
      h.Add({.id = 2, .prompt = 33, .arrival = 0});
      h.Step();
    }
    h.Add({1, 100});
    StepPlan plan = h.Step();
    EXPECT_EQ(Chunks(plan), c.step1) << c.name;
  }
}

TEST(GenPolicyTest, RejectsSequenceLargerThanTheCache) {
  // 4 blocks of 16: a 100-token prompt needs 7 and can never run; the next one is admitted.
  Harness h(Options(512), /*num_blocks=*/4, /*block_size=*/16);
  h.Add({1, 100});
  h.Add({2, 20});
  StepPlan plan = h.Step();
  EXPECT_EQ(plan.rejected, std::vector<GenSeqId>{1});
  EXPECT_EQ(plan.rejected_blocks, std::vector<int64_t>{7});
  EXPECT_EQ(Chunks(plan), (std::vector<C>{{2, 0, 20, L, P}}));
  EXPECT_EQ(h.policy.stats().waiting, 0);
}

TEST(GenPolicyTest, RejectsSequenceThatOutgrowsTheCache) {
  // 2 blocks of 4: a 6-token prompt fits; its 9th position needs a third block while it is
  // alone: rejected, its blocks freed.
  Harness h(Options(512), /*num_blocks=*/2, /*block_size=*/4);
  h.Add({1, 6});
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 0, 6, L, P}}));
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 6, 1, L, D}}));
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 7, 1, L, D}}));
  StepPlan plan = h.Step();
  EXPECT_TRUE(plan.run.empty());
  EXPECT_TRUE(plan.preempted.empty());
  EXPECT_EQ(plan.rejected, std::vector<GenSeqId>{1});
  EXPECT_EQ(plan.rejected_blocks, std::vector<int64_t>{3});
  EXPECT_EQ(h.kv.num_free_blocks(), 2);
  EXPECT_TRUE(h.policy.idle());
}

TEST(GenPolicyTest, DeadlineExpiresWaitingSequences) {
  // One runs at a time; B waits with deadline 100.
  Harness h(Options(512, /*max_num_seqs=*/1));
  h.Add({1, 10});
  h.Add({.id = 2, .prompt = 10, .deadline_ns = 100});
  EXPECT_EQ(h.policy.next_deadline_ns(), 100);
  EXPECT_TRUE(h.Step(0).expired.empty());
  EXPECT_TRUE(h.Step(99).expired.empty());
  StepPlan plan = h.Step(100);
  EXPECT_EQ(plan.expired, std::vector<GenSeqId>{2});
  EXPECT_EQ(Chunks(plan), (std::vector<C>{{1, 11, 1, L, D}}));
  EXPECT_EQ(h.policy.next_deadline_ns(), kNever);
  EXPECT_EQ(h.policy.stats().waiting, 0);
  EXPECT_EQ(h.kv.frees(2), 0);  // held nothing
}

TEST(GenPolicyTest, DeadlineDoesNotApplyOnceRun) {
  // PreemptedResumesInItsPlace with a deadline on Y: preempted at step 3, it waits past its
  // deadline and is not expired.
  Harness h(Options(512), /*num_blocks=*/5, /*block_size=*/4);
  h.Add({.id = 1, .prompt = 9, .max_new = 4});
  h.Add({.id = 2, .prompt = 7, .deadline_ns = 50});
  h.Step(0);
  EXPECT_EQ(h.policy.next_deadline_ns(), kNever);
  h.Step(10);
  ASSERT_EQ(h.Step(20).preempted, std::vector<GenSeqId>{2});
  EXPECT_TRUE(h.Step(1000).expired.empty());
  StepPlan plan = h.Step(2000);
  EXPECT_TRUE(plan.expired.empty());
  EXPECT_EQ(Chunks(plan), (std::vector<C>{{2, 0, 9, L, P}}));
}

TEST(GenPolicyTest, CancelWaitingAndRunning) {
  Harness h(Options(512, /*max_num_seqs=*/1), /*num_blocks=*/10, /*block_size=*/16);
  h.Add({1, 40});  // 3 blocks
  h.Add({2, 10});
  h.Step();
  EXPECT_EQ(h.kv.num_free_blocks(), 7);
  h.policy.Cancel(2);
  h.policy.Cancel(99);  // unknown: ignored
  StepPlan plan = h.Step();
  EXPECT_EQ(plan.cancelled, std::vector<GenSeqId>{2});
  EXPECT_EQ(Chunks(plan), (std::vector<C>{{1, 40, 1, L, D}}));
  EXPECT_EQ(h.kv.frees(2), 0);
  h.policy.Cancel(1);
  h.policy.Cancel(1);  // twice: listed once
  plan = h.Step();
  EXPECT_EQ(plan.cancelled, std::vector<GenSeqId>{1});
  EXPECT_TRUE(plan.run.empty());
  EXPECT_EQ(h.kv.num_free_blocks(), 10);
  EXPECT_EQ(h.kv.frees(1), 1);
  EXPECT_TRUE(h.policy.idle());
}

TEST(GenPolicyTest, CancelDuringTheStep) {
  // Cancelled between Schedule and Complete: completed as usual, dropped at the next Schedule
  // unless it finished in that step.
  for (bool finishes : {false, true}) {
    FakeKv kv(100, 16);
    GenPolicy policy(Options(512), &kv);
    ASSERT_TRUE(policy.Add({.id = 1, .num_tokens = 10}).ok());
    StepPlan plan = policy.Schedule(0);
    policy.Cancel(1);
    const ChunkOutcome o{1, true, finishes};
    policy.Complete(plan, std::span(&o, 1));
    plan = policy.Schedule(0);
    EXPECT_EQ(plan.cancelled, finishes ? std::vector<GenSeqId>{} : std::vector<GenSeqId>{1});
    EXPECT_TRUE(plan.run.empty());
    EXPECT_TRUE(policy.idle());
    EXPECT_EQ(kv.num_free_blocks(), 100);
  }
}

TEST(GenPolicyTest, AddValidates) {
  GenPolicyOptions o = Options(512, /*max_num_seqs=*/1);
  o.max_queue_size = 2;
  FakeKv kv(100, 16);
  GenPolicy policy(o, &kv);
  EXPECT_EQ(policy.Add({.id = 1, .num_tokens = 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(policy.Add({.id = 1, .num_tokens = 5}).ok());
  EXPECT_EQ(policy.Add({.id = 1, .num_tokens = 5}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(policy.Add({.id = 2, .num_tokens = 5}).ok());
  Status full = policy.Add({.id = 3, .num_tokens = 5});
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full.message();
  // One admitted: room for one more waiting.
  StepPlan plan = policy.Schedule(0);
  ASSERT_EQ(plan.run.size(), 1u);
  EXPECT_EQ(policy.Add({.id = 1, .num_tokens = 5}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(policy.Add({.id = 3, .num_tokens = 5}).ok());
  EXPECT_EQ(policy.Add({.id = 4, .num_tokens = 5}).code(), StatusCode::kResourceExhausted);
}

TEST(GenPolicyTest, AddFork) {
  Harness h(Options(512), /*num_blocks=*/100, /*block_size=*/16);
  h.Add({1, 10});
  h.Add({.id = 5, .prompt = 10, .arrival = 50});
  h.Step();  // both sampled their first token: 11 known, 10 computed
  EXPECT_EQ(h.policy.AddFork(1, 2, 11), Status::OK());
  EXPECT_EQ(h.kv.forks(), (std::vector<std::pair<GenSeqId, GenSeqId>>{{1, 2}}));
  EXPECT_EQ(h.kv.held(2), h.kv.held(1));
  EXPECT_EQ(h.policy.stats().running, 3);
  h.max_new[2] = 1'000'000;
  // The child decodes with its parent's counts, next to it in policy order (same arrival).
  EXPECT_EQ(Chunks(h.Step()),
            (std::vector<C>{{1, 10, 1, L, D}, {2, 10, 1, L, D}, {5, 10, 1, L, D}}));
  EXPECT_EQ(h.policy.AddFork(1, 2, 12).code(), StatusCode::kInvalidArgument);  // exists
  EXPECT_EQ(h.policy.AddFork(1, 3, 11).code(), StatusCode::kInvalidArgument);  // 11 computed
  EXPECT_EQ(h.policy.AddFork(9, 3, 12).code(), StatusCode::kInvalidArgument);  // no parent
  h.Add({.id = 7, .prompt = 10});
  EXPECT_EQ(h.policy.AddFork(7, 3, 12).code(), StatusCode::kInvalidArgument);  // waiting
}

TEST(GenPolicyTest, CompleteFinishedFreesBlocks) {
  Harness h(Options(512), /*num_blocks=*/10, /*block_size=*/16);
  h.Add({.id = 1, .prompt = 40, .max_new = 2});
  h.Step();
  EXPECT_EQ(h.kv.num_free_blocks(), 7);
  h.Step();
  EXPECT_EQ(h.kv.num_free_blocks(), 10);
  EXPECT_EQ(h.kv.frees(1), 1);
  EXPECT_TRUE(h.policy.idle());
  EXPECT_TRUE(h.Step().run.empty());
}

TEST(GenPolicyTest, ClearRemovesEverything) {
  Harness h(Options(512, /*max_num_seqs=*/1), /*num_blocks=*/10, /*block_size=*/16);
  h.Add({1, 40});
  h.Add({2, 10});
  h.Step();
  EXPECT_EQ(h.policy.Clear(), (std::vector<GenSeqId>{1, 2}));
  EXPECT_EQ(h.kv.num_free_blocks(), 10);
  EXPECT_TRUE(h.policy.idle());
  EXPECT_EQ(h.policy.next_deadline_ns(), kNever);
  GenPolicyStats st = h.policy.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
}

TEST(GenPolicyTest, NothingAdmittablePlansNothing) {
  // Blocks held outside the policy: the waiting sequence fits the cache but not the free part.
  // Schedule plans nothing, removes nothing, and does not walk past the first waiting one.
  Harness h(Options(512), /*num_blocks=*/10, /*block_size=*/16);
  h.kv.SetExternal(8);
  h.Add({1, 64});  // 4 blocks
  h.Add({2, 16});  // 1 block: does not overtake
  StepPlan plan = h.policy.Schedule(0);
  EXPECT_TRUE(plan.run.empty());
  EXPECT_TRUE(plan.rejected.empty());
  EXPECT_FALSE(h.policy.idle());
  h.kv.SetExternal(0);
  EXPECT_EQ(Chunks(h.Step()), (std::vector<C>{{1, 0, 64, L, P}, {2, 0, 16, L, P}}));
}

TEST(GenPolicyTest, ManySequencesScheduleQuickly) {
  // A few hundred sequences: 256 decoding, 256 waiting behind max_num_seqs. A coarse guard
  // against quadratic work: 200 steps must not need more BlocksToAdmit calls than steps.
  Harness h(Options(512, /*max_num_seqs=*/256));
  for (GenSeqId id = 1; id <= 512; ++id) h.Add({id, 1});
  h.Step();
  EXPECT_EQ(h.policy.stats().running, 256);
  const int64_t before = h.kv.blocks_to_admit_calls();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(h.Step().run.size(), 256u);
  EXPECT_EQ(h.kv.blocks_to_admit_calls(), before);
}

}  // namespace
}  // namespace kiln
