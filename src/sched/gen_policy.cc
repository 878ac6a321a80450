// SPDX-License-Identifier: Apache-2.0
// NOTE (design): the sequences live in one hash table (id -> Seq); the waiting and the running
// sequences are each an ordered set of OrderKey (priority level, arrival, id), so both are kept
// in policy order at O(log n) per change: admission walks the waiting set from its front, the
// decode and prompt passes walk the running set from its front, and the preemption victim is
// the running set's last element. Deadlines of never-run waiting sequences are a third ordered
// set, so expiry and next_deadline_ns look at its front only; cancellations are a list of ids
// handled at the next Schedule. A Schedule therefore costs O(running + admitted + removed) set
// operations, independent of how many sequences wait behind the first one that is not admitted.
//
// Preemption victims are chosen from every running sequence, planned ones included: in the
// decode pass every planned sequence comes before the one being scheduled in policy order, so
// the victim (the last) is never planned there; in the prompt pass a victim may be a planned
// decode of a cheaper sequence, which is then taken out of the plan and its token refunded.
#include "sched/gen_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <compare>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/check.h"
#include "sched/clock.h"

namespace kiln {

struct GenPolicy::Impl {
  // Policy order: priority level first (1 highest), then arrival, then id (a fork shares its
  // parent's level and arrival).
  struct OrderKey {
    uint32_t level = 0;
    int64_t arrival = 0;
    GenSeqId id = 0;
    auto operator<=>(const OrderKey&) const = default;
  };
  struct Seq {
    GenSeqInfo info;  // info.priority is the clamped level
    int64_t num_computed = 0;
    bool running = false;  // holds blocks
    bool cancelled = false;
    bool ever_ran = false;      // admitted once: its deadline no longer applies
    int64_t prompt_tokens = 0;  // num_tokens when added: more means it has generated
    OrderKey key() const { return {info.priority, info.arrival, info.id}; }
  };

  Impl(const GenPolicyOptions& o, GenKvSpace* k) : options(o), kv(k) {}

  uint32_t Level(uint32_t priority) const {
    const uint32_t p = priority == 0 ? options.default_priority : priority;
    return std::clamp<uint32_t>(p, 1, options.priority_levels);
  }

  // Removes `id` from every structure; frees its blocks when it holds any.
  void Remove(GenSeqId id) {
    auto it = seqs.find(id);
    KILN_CHECK(it != seqs.end(), "GenPolicy: removing unknown sequence ", id);
    Seq& s = it->second;
    if (s.running) {
      kv->Free(id);
      running.erase(s.key());
    } else {
      waiting.erase(s.key());
    }
    if (s.info.deadline_ns > 0 && !s.ever_ran) deadlines.erase({s.info.deadline_ns, id});
    seqs.erase(it);
  }

  // Preempts running sequence `s` by recompute (see the header), taking it out of `plan.run`
  // when it is there and refunding its tokens to `budget`.
  void Preempt(Seq& s, StepPlan& plan, int64_t& budget) {
    kv->Free(s.info.id);
    s.num_computed = 0;
    s.running = false;
    running.erase(s.key());
    waiting.insert(s.key());
    plan.preempted.push_back(s.info.id);
    ++preemptions;
    auto planned = std::find_if(plan.run.begin(), plan.run.end(),
                                [&](const ScheduledChunk& c) { return c.seq == s.info.id; });
    if (planned != plan.run.end()) {
      budget += planned->num_tokens;
      plan.run.erase(planned);
    }
  }

  // Makes running sequence `s` cover [0, new_len), preempting the cheapest running sequences
  // until it fits. False when `s` itself was preempted or (alone and still not fitting) rejected.
  bool ReserveOrPreempt(Seq& s, int64_t new_len, StepPlan& plan, int64_t& budget) {
    const GenSeqId id = s.info.id;
    for (;;) {
      if (kv->Reserve(id, new_len)) return true;
      const OrderKey victim = *running.rbegin();
      if (victim.id != id) {
        Preempt(seqs.at(victim.id), plan, budget);
        continue;
      }
      if (running.size() > 1) {
        Preempt(s, plan, budget);
        return false;
      }
      // Alone, every other block is free or evictable: it needs more than the whole cache.
      kv->Free(id);
      const int64_t needed = kv->BlocksToAdmit(id, new_len);
      running.erase(s.key());
      seqs.erase(id);  // ran already: no deadline entry
      plan.rejected.push_back(id);
      plan.rejected_blocks.push_back(needed);
      return false;
    }
  }

  void Schedule(int64_t now_ns, StepPlan& plan);
  // Walks the waiting queue from its front (step 3 of the header, waiting part).
  void Admit(StepPlan& plan, int64_t& budget);

  const GenPolicyOptions options;
  GenKvSpace* const kv;
  std::unordered_map<GenSeqId, Seq> seqs;
  std::set<OrderKey> waiting;                        // holding no blocks
  std::set<OrderKey> running;                        // holding blocks
  std::set<std::pair<int64_t, GenSeqId>> deadlines;  // (deadline_ns, id): waiting, never ran
  std::vector<GenSeqId> cancel_pending;              // Cancel since the last Schedule
  std::vector<GenSeqId> order;                       // scratch: the running ids of a pass
  int64_t preemptions = 0;
  int64_t static_batch_left = 0;  // static batching: members of the open batch not yet admitted
};

void GenPolicy::Impl::Schedule(int64_t now_ns, StepPlan& plan) {
  // 1. Cancelled and expired sequences leave.
  for (GenSeqId id : cancel_pending) {
    auto it = seqs.find(id);
    if (it == seqs.end() || !it->second.cancelled) continue;  // finished meanwhile
    Remove(id);
    plan.cancelled.push_back(id);
  }
  cancel_pending.clear();
  while (!deadlines.empty() && deadlines.begin()->first <= now_ns) {
    const GenSeqId id = deadlines.begin()->second;
    Remove(id);  // erases the deadline too
    plan.expired.push_back(id);
  }

  int64_t budget = options.max_num_batched_tokens;
  order.clear();
  for (const OrderKey& k : running) order.push_back(k.id);

  // 2. Decode tokens, in policy order.
  for (GenSeqId id : order) {
    if (budget == 0) break;
    auto it = seqs.find(id);
    if (it == seqs.end() || !it->second.running) continue;  // preempted or rejected above
    Seq& s = it->second;
    if (s.num_computed != s.info.num_tokens - 1) continue;
    const int64_t pos0 = s.num_computed;
    if (!ReserveOrPreempt(s, pos0 + 1, plan, budget)) continue;
    plan.run.push_back({id, pos0, 1, /*wants_logits=*/true, /*is_prompt=*/false});
    --budget;
  }

  // 3. Prompt chunks: running sequences still in their prompt, then admissions.
  for (GenSeqId id : order) {
    if (budget == 0) break;
    auto it = seqs.find(id);
    if (it == seqs.end() || !it->second.running) continue;
    Seq& s = it->second;
    if (s.num_computed >= s.info.num_tokens - 1) continue;  // a decode (planned or over budget)
    const int64_t pos0 = s.num_computed;
    const int64_t n = std::min(s.info.num_tokens - pos0, budget);
    if (!ReserveOrPreempt(s, pos0 + n, plan, budget)) continue;
    plan.run.push_back({id, pos0, n, pos0 + n == s.info.num_tokens, /*is_prompt=*/true});
    budget -= n;
  }
  if (plan.preempted.empty()) Admit(plan, budget);

  plan.num_batched_tokens = options.max_num_batched_tokens - budget;
}

void GenPolicy::Impl::Admit(StepPlan& plan, int64_t& budget) {
  if (options.static_batching) {
    // Request-level batching: when nothing runs, the next batch is the first max_num_seqs
    // waiting sequences; they are admitted (over as many steps as their prompts need) and no
    // other sequence is until every one of them has finished.
    if (running.empty() && static_batch_left == 0) {
      static_batch_left =
          std::min<int64_t>(options.max_num_seqs, static_cast<int64_t>(waiting.size()));
    }
    if (static_batch_left == 0) return;
  }
  auto it = waiting.begin();
  while (it != waiting.end() && budget > 0 &&
         static_cast<int64_t>(running.size()) < options.max_num_seqs &&
         (!options.static_batching || static_batch_left > 0)) {
    const GenSeqId id = it->id;
    Seq& s = seqs.at(id);
    const int64_t num_tokens = s.info.num_tokens;
    // The first chunk's end counted from position 0 (the prefix hit is not known yet).
    int64_t want = 0;
    if (options.chunked_prefill || num_tokens <= budget) {
      want = std::min(num_tokens, budget);
    } else if (running.empty() && plan.run.empty()) {
      want = budget;  // larger than the whole budget: chunks, or it would wait forever
    } else {
      break;  // chunked prefill off: runs whole or waits
    }
    // Never fits, even alone: reported now rather than after its first chunks ran.
    const int64_t needed = kv->BlocksToAdmit(id, num_tokens);
    if (needed > kv->num_blocks()) {
      if (s.info.deadline_ns > 0 && !s.ever_ran) deadlines.erase({s.info.deadline_ns, id});
      it = waiting.erase(it);
      seqs.erase(id);
      plan.rejected.push_back(id);
      plan.rejected_blocks.push_back(needed);
      continue;
    }
    const int64_t watermark = running.empty() ? 0 : options.watermark_blocks;
    const int64_t first = want == num_tokens ? needed : kv->BlocksToAdmit(id, want);
    if (first + watermark > kv->num_free_blocks()) break;  // later, when blocks are freed
    const int64_t matched = kv->MatchPrefix(id);
    KILN_CHECK(matched >= 0 && matched < num_tokens, "GenKvSpace::MatchPrefix of sequence ", id,
               " found ", matched, " of its ", num_tokens, " tokens");
    // Prefix hits are computed already: the budget pays for the tokens past them only.
    int64_t end = std::min(num_tokens, matched + budget);
    if (!kv->Reserve(id, end)) {
      // A hit past `want` asks for blocks BlocksToAdmit did not count; fall back to the chunk
      // that was checked (at least one token past the hit).
      const int64_t fallback = std::max(want, matched + 1);
      if (fallback >= end || !kv->Reserve(id, fallback)) {
        kv->Free(id);  // gives back the claimed prefix
        break;
      }
      end = fallback;
    }
    s.num_computed = matched;
    s.running = true;
    if (s.info.deadline_ns > 0 && !s.ever_ran) deadlines.erase({s.info.deadline_ns, id});
    s.ever_ran = true;
    running.insert(*it);
    it = waiting.erase(it);
    plan.run.push_back({id, matched, end - matched, end == num_tokens, /*is_prompt=*/true});
    budget -= end - matched;
    if (options.static_batching) --static_batch_left;
  }
}

GenPolicy::GenPolicy(const GenPolicyOptions& options, GenKvSpace* kv)
    : impl_(std::make_unique<Impl>(options, kv)) {
  KILN_CHECK(kv != nullptr, "GenPolicy: null GenKvSpace");
  KILN_CHECK(options.max_num_seqs >= 1 && options.max_num_batched_tokens >= 1 &&
                 options.priority_levels >= 1,
             "GenPolicy: invalid options (max_num_seqs ", options.max_num_seqs,
             ", max_num_batched_tokens ", options.max_num_batched_tokens, ", priority_levels ",
             options.priority_levels, ")");
}

GenPolicy::~GenPolicy() = default;

Status GenPolicy::Add(const GenSeqInfo& seq) {
  Impl& m = *impl_;
  if (seq.num_tokens < 1) {
    return Status::InvalidArgument(
        fmt::format("sequence {} has {} tokens; it needs at least one", seq.id, seq.num_tokens));
  }
  if (m.seqs.contains(seq.id)) {
    return Status::InvalidArgument(fmt::format("sequence {} is already scheduled", seq.id));
  }
  if (m.options.max_queue_size > 0 && m.waiting.size() >= m.options.max_queue_size) {
    return Status::ResourceExhausted(fmt::format(
        "the generation queue is full ({} sequences waiting)", m.options.max_queue_size));
  }
  Impl::Seq s;
  s.info = seq;
  s.prompt_tokens = seq.num_tokens;
  s.info.priority = m.Level(seq.priority);
  if (s.info.deadline_ns > 0) m.deadlines.insert({s.info.deadline_ns, seq.id});
  m.waiting.insert(s.key());
  m.seqs.emplace(seq.id, std::move(s));
  return Status::OK();
}

Status GenPolicy::AddFork(GenSeqId parent, GenSeqId child, int64_t child_num_tokens) {
  Impl& m = *impl_;
  auto it = m.seqs.find(parent);
  if (it == m.seqs.end() || !it->second.running) {
    return Status::InvalidArgument(
        fmt::format("cannot fork sequence {}: it is not running", parent));
  }
  if (m.seqs.contains(child)) {
    return Status::InvalidArgument(
        fmt::format("cannot fork sequence {} into {}: {} exists", parent, child, child));
  }
  const Impl::Seq& p = it->second;
  if (child_num_tokens <= p.num_computed) {
    return Status::InvalidArgument(
        fmt::format("fork {} of sequence {} has {} tokens; the parent has {} computed already",
                    child, parent, child_num_tokens, p.num_computed));
  }
  Impl::Seq c;
  c.info = p.info;
  c.info.id = child;
  c.info.num_tokens = child_num_tokens;
  c.info.deadline_ns = 0;
  c.num_computed = p.num_computed;
  c.prompt_tokens = p.prompt_tokens;
  c.running = true;
  c.ever_ran = true;
  m.kv->Fork(parent, child);
  m.running.insert(c.key());
  m.seqs.emplace(child, std::move(c));
  return Status::OK();
}

void GenPolicy::Cancel(GenSeqId seq) {
  Impl& m = *impl_;
  auto it = m.seqs.find(seq);
  if (it == m.seqs.end() || it->second.cancelled) return;
  it->second.cancelled = true;
  m.cancel_pending.push_back(seq);
}

std::vector<GenSeqId> GenPolicy::Clear() {
  Impl& m = *impl_;
  std::vector<GenSeqId> ids;
  ids.reserve(m.seqs.size());
  for (const Impl::OrderKey& k : m.running) {
    m.kv->Free(k.id);
    ids.push_back(k.id);
  }
  for (const Impl::OrderKey& k : m.waiting) ids.push_back(k.id);
  m.seqs.clear();
  m.running.clear();
  m.waiting.clear();
  m.deadlines.clear();
  m.cancel_pending.clear();
  return ids;
}

StepPlan GenPolicy::Schedule(int64_t now_ns) {
  StepPlan plan;
  impl_->Schedule(now_ns, plan);
  return plan;
}

void GenPolicy::Complete(const StepPlan& plan, std::span<const ChunkOutcome> outcomes) {
  Impl& m = *impl_;
  KILN_CHECK(outcomes.size() == plan.run.size(), "GenPolicy::Complete: ", outcomes.size(),
             " outcomes for ", plan.run.size(), " chunks");
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const ScheduledChunk& c = plan.run[i];
    const ChunkOutcome& o = outcomes[i];
    KILN_CHECK(o.seq == c.seq, "GenPolicy::Complete: outcome ", i, " is for sequence ", o.seq,
               ", the chunk for ", c.seq);
    auto it = m.seqs.find(c.seq);
    KILN_CHECK(it != m.seqs.end() && it->second.running && it->second.num_computed == c.pos0,
               "GenPolicy::Complete: sequence ", c.seq, " was not planned at position ", c.pos0);
    if (o.finished) {
      m.Remove(c.seq);
      continue;
    }
    KILN_CHECK(o.appended == c.wants_logits, "GenPolicy::Complete: sequence ", c.seq,
               (c.wants_logits ? " wanted logits and was neither appended nor finished"
                               : " was appended by a chunk without logits"));
    Impl::Seq& s = it->second;
    s.num_computed += c.num_tokens;
    if (o.appended) ++s.info.num_tokens;
  }
}

bool GenPolicy::idle() const { return impl_->seqs.empty(); }

int64_t GenPolicy::next_deadline_ns() const {
  return impl_->deadlines.empty() ? kNever : impl_->deadlines.begin()->first;
}

GenPolicyStats GenPolicy::stats() const {
  GenPolicyStats st;
  st.running = static_cast<int64_t>(impl_->running.size());
  st.waiting = static_cast<int64_t>(impl_->waiting.size());
  st.preemptions = impl_->preemptions;
  return st;
}

}  // namespace kiln
