// SPDX-License-Identifier: Apache-2.0
#pragma once
// GenPolicy: iteration-level (continuous) batching of generation sequences, as pure policy.
// Every engine step is a fresh decision over the sequences it holds; the decision is data
// (StepPlan) that the caller executes and then reports back (Complete). No threads, no clock of
// its own, no model: the KV cache is seen through GenKvSpace, time through the `now_ns` argument.
//
//   GenPolicy policy(options, &kv);
//   KILN_RETURN_IF_ERROR(policy.Add(seq));               // RESOURCE_EXHAUSTED: queue full
//   StepPlan plan = policy.Schedule(clock.NowNs());      // what runs in this step
//   ... run plan.run on the engine, sample where wants_logits ...
//   policy.Complete(plan, outcomes);                     // tokens appended, finished sequences
//
// The decision, each step (vLLM's scheduler with chunked prefill):
//  1. Cancelled sequences (Cancel) leave: their blocks are freed, they are listed in `cancelled`.
//     Waiting sequences whose deadline has passed leave, listed in `expired`. Deadlines apply
//     only to sequences that have never run: a preempted sequence keeps its place and does not
//     expire (it has answered its client already, in part).
//  2. Running sequences that have finished their prompt (num_computed == num_tokens - 1: only
//     the last known token is left) get their decode token first (one token each), in policy
//     order, while the budget lasts. When the KV space cannot hold a decode token, the policy
//     preempts the cheapest running sequence (lowest priority, then latest arrival; possibly
//     the one being scheduled) by recompute: its blocks are freed, num_computed drops to 0 and it
//     goes back to the waiting queue in its original place (its priority and arrival are kept, so
//     it is the first of its level to be resumed). Its tokens (prompt and sampled) are kept by the
//     caller; on resumption they are all recomputed as its "prompt" (a prefix-cache hit makes
//     that cheap). A victim already in this step's plan (only possible in 3, a prompt chunk
//     preempting a cheaper decode) is taken out of the plan and its tokens go back to the
//     budget. A sequence that cannot get its blocks while it is the only one running can never
//     fit: it is removed and listed in `rejected` instead.
//  3. The rest of the token budget (max_num_batched_tokens) goes to prompt chunks: first the
//     running sequences still in their prompt (preempting as in 2), then waiting sequences in
//     policy order (priority level 1 first, FCFS by arrival within a level). A waiting sequence
//     is admitted when running < max_num_seqs and its first chunk's blocks
//     (GenKvSpace::BlocksToAdmit, the chunk counted from position 0 as the prefix hit is not
//     known before MatchPrefix) leave at least `watermark_blocks` free; the watermark is waived
//     when nothing runs (it keeps room for running decodes). Once admitted, MatchPrefix's hit
//     is computed already: the chunk starts there and runs up to the remaining budget. A prompt
//     chunk is at most the remaining budget (chunked prefill); with chunked prefill off a prompt
//     runs whole (its whole token count must fit the remaining budget) or waits. Admission stops
//     at the first waiting sequence that cannot be admitted (no overtaking within the order),
//     except that with nothing running and nothing planned, a prompt larger than the budget
//     still runs in budget-sized chunks (otherwise it would wait forever). A waiting sequence
//     that needs more blocks than the whole cache (BlocksToAdmit of all its tokens >
//     num_blocks()) is listed in `rejected` and skipped. No sequence is admitted in a step that
//     preempted one (the blocks just freed would be taken back at once).
//  4. A chunk that reaches the end of a sequence's known tokens wants logits (the caller
//     samples the next token from them); an earlier chunk does not.
// Every step with sequences left plans some work or removes some sequence, given a GenKvSpace
// whose free blocks are all of num_blocks() when no sequence holds any: a caller that finds an
// empty plan with nothing removed may sleep until something changes (Add, Cancel, a deadline).
//
// Thread safety: none; the scheduler's thread owns the policy.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"

namespace kiln {

using GenSeqId = uint64_t;

// The KV cache as the policy sees it: block accounting per sequence. The model implements it
// over its block manager (it knows each sequence's tokens); tests implement it with counters.
// Every call comes from the policy's thread.
class GenKvSpace {
 public:
  virtual ~GenKvSpace() = default;
  // Blocks available to allocations now (free + evictable cached).
  virtual int64_t num_free_blocks() const = 0;
  virtual int64_t num_blocks() const = 0;
  // A sequence holding no blocks: the allocatable blocks that claiming its cached prefix and
  // reserving positions [0, new_len) would take. Pure.
  virtual int64_t BlocksToAdmit(GenSeqId seq, int64_t new_len) const = 0;
  // A sequence holding no blocks: claims the cached prefix of its tokens; returns the number of
  // tokens found (they are computed: num_computed starts there; always < its token count).
  virtual int64_t MatchPrefix(GenSeqId seq) = 0;
  // Makes the sequence's blocks cover positions [0, new_len); all or nothing. False when the
  // blocks cannot be had (nothing changed).
  virtual bool Reserve(GenSeqId seq, int64_t new_len) = 0;
  // Releases every block of the sequence (finished, cancelled, expired or preempted).
  virtual void Free(GenSeqId seq) = 0;
  // child shares parent's blocks (copy-on-write): n choices of one prompt.
  virtual void Fork(GenSeqId parent, GenSeqId child) = 0;
};

struct GenPolicyOptions {
  int64_t max_num_seqs = 64;             // running sequences at most
  int64_t max_num_batched_tokens = 512;  // tokens in one step (decode + prompt chunks)
  bool chunked_prefill = true;
  int64_t watermark_blocks = 0;  // blocks admission leaves free for running decodes
  size_t max_queue_size = 0;     // waiting sequences at most; 0: unbounded
  uint32_t priority_levels = 1;  // priorities 1..priority_levels (1 highest)
  uint32_t default_priority = 1;
  // Request-level (static) batching, for comparison: when nothing runs, the first
  // max_num_seqs waiting sequences form a batch; they are admitted (their prompts chunked by
  // the token budget as usual) and the batch runs until its longest member finishes before the
  // next one forms. Off: continuous batching.
  bool static_batching = false;
};

struct GenSeqInfo {
  GenSeqId id = 0;
  int64_t num_tokens = 0;   // known tokens: the prompt (>= 1)
  uint32_t priority = 0;    // 0: default_priority; clamped to priority_levels
  int64_t arrival = 0;      // ordering within a level (smaller first); e.g. a counter or now_ns
  int64_t deadline_ns = 0;  // while waiting: expires when now_ns >= deadline_ns; 0: none
};

struct ScheduledChunk {
  GenSeqId seq = 0;
  int64_t pos0 = 0;           // positions [0, pos0) hold K/V (num_computed)
  int64_t num_tokens = 0;     // tokens [pos0, pos0 + num_tokens) run this step
  bool wants_logits = false;  // pos0 + num_tokens == the sequence's known tokens
  bool is_prompt = false;     // a prompt (or recompute) chunk, not a decode token
};

struct StepPlan {
  std::vector<ScheduledChunk> run;  // decode tokens first, then prompt chunks
  std::vector<GenSeqId> preempted;  // freed this step, back in the waiting queue
  std::vector<GenSeqId> cancelled;  // removed (Cancel)
  std::vector<GenSeqId> expired;    // removed (deadline passed while waiting)
  // Removed because they can never fit the KV cache, even with every other sequence freed;
  // rejected_blocks[i]: the blocks rejected[i] needs (compare GenKvSpace::num_blocks()).
  std::vector<GenSeqId> rejected;
  std::vector<int64_t> rejected_blocks;
  int64_t num_batched_tokens = 0;  // sum of run[i].num_tokens
  bool empty() const { return run.empty(); }
};

// What happened to one scheduled sequence in the step.
struct ChunkOutcome {
  GenSeqId seq = 0;
  bool appended = false;  // a token was sampled and appended (num_tokens + 1)
  bool finished = false;  // the sequence is done: it leaves, its blocks are freed
};

struct GenPolicyStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t preemptions = 0;  // total since creation
};

class GenPolicy {
 public:
  // REQUIRES: kv outlives the policy; options valid (max_num_seqs >= 1,
  // max_num_batched_tokens >= 1, priority_levels >= 1).
  GenPolicy(const GenPolicyOptions& options, GenKvSpace* kv);
  ~GenPolicy();
  GenPolicy(const GenPolicy&) = delete;
  GenPolicy& operator=(const GenPolicy&) = delete;

  // Queues a new sequence. RESOURCE_EXHAUSTED when the waiting queue is full; INVALID_ARGUMENT
  // for num_tokens < 1 or an id already present.
  Status Add(const GenSeqInfo& seq);
  // n > 1: after parent's step that sampled its first token, child becomes a running sequence
  // with the parent's counts, priority and arrival, sharing its blocks (GenKvSpace::Fork).
  // INVALID_ARGUMENT when parent is not running, child exists or child_num_tokens <= the
  // parent's num_computed. A fork may take the running count past max_num_seqs (the choices of
  // one request run together).
  Status AddFork(GenSeqId parent, GenSeqId child, int64_t child_num_tokens);
  // Marks the sequence cancelled; it leaves at the next Schedule (a sequence in the plan being
  // executed is completed as usual first, and is not listed when it finishes there). Unknown ids
  // are ignored.
  void Cancel(GenSeqId seq);
  // Removes every sequence (shutdown), freeing their blocks; returns their ids.
  std::vector<GenSeqId> Clear();

  StepPlan Schedule(int64_t now_ns);
  // REQUIRES: plan is the latest Schedule's; one outcome per chunk of plan.run, same order; a
  // chunk that wants logits is appended or finished, any other is not appended.
  void Complete(const StepPlan& plan, std::span<const ChunkOutcome> outcomes);

  bool idle() const;  // nothing running or waiting
  // The earliest deadline among waiting sequences (kNever-like INT64_MAX when none): when the
  // scheduler thread must wake to expire it.
  int64_t next_deadline_ns() const;
  GenPolicyStats stats() const;

 private:
  struct Impl;  // the sequence table and the queues (gen_policy.cc)
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
