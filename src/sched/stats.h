// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per model-version inference statistics: the counters of the reference statistics extension
// (../shared/protocol/KSERVE-V2.md section 1.6), collected by the scheduler and read by the
// statistics endpoints and /metrics.
//
//   StatsCollector stats;
//   stats.RecordExecution(/*batch_size=*/4, input_ns, infer_ns, output_ns);
//   for (each request of the batch) stats.RecordSuccess(queue_ns, input_ns, infer_ns, output_ns,
//                                                       total_ns, now_ms);
//   ModelStatistics s = stats.Snapshot();
//
// Besides the cumulative counters it keeps fixed-bucket histograms (request, queue and compute
// time of successful requests; executed batch sizes) and failure counts by reason, for /metrics.
//
// Time of a batched execution is charged in full to every request of the batch (as the
// reference server does), so the count of every inference_stats member equals success.count,
// except for requests answered from the response cache (repo/response_cache.h): a hit counts as
// a success, with queue time 0 and its lookup time as cache_hit, but runs nothing, so
// compute_input / compute_infer / compute_output count success.count - cache_hit.count (as the
// reference's do), and inference_count and execution_count exclude hits. A successful request
// that missed the cache also counts in cache_miss (the time to hash, look up and insert it);
// for a model with the cache, cache_hit.count + cache_miss.count == success.count.
//
// Thread safety: every method of StatsCollector is thread-safe.

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/mutex.h"

namespace kiln {

struct StatDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(uint64_t n) {
    ++count;
    ns += n;
  }
};

// Why a request was answered with an error.
enum class FailureReason : uint8_t {
  kQueueFull,     // refused at admission: its priority level's queue was full
  kTimeout,       // its timeout passed while it was queued
  kShuttingDown,  // refused because the model was shutting down
  kInvalid,       // refused by validation (bad inputs, unknown outputs, bad priority)
  kCanceled,      // cancelled before it ran
  kBackend,       // running the model failed
  kOther,
};
inline constexpr size_t kNumFailureReasons = 7;
// "queue_full", "timeout", "shutting_down", "invalid", "canceled", "backend", "other".
std::string_view FailureReasonName(FailureReason reason);

// Fixed-bucket histogram. counts[i] counts the observations v with bounds[i-1] < v <= bounds[i]
// (not cumulative); counts.back() those above the last bound. Not thread-safe by itself.
// (Defined in this header, as ModelStatistics is, so that readers of statistics need only it.)
struct Histogram {
  std::vector<double> bounds;    // ascending upper bounds
  std::vector<uint64_t> counts;  // bounds.size() + 1
  uint64_t count = 0;
  double sum = 0;

  Histogram() : counts(1, 0) {}
  // REQUIRES: `upper_bounds` strictly ascending and finite.
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {
    for (size_t i = 1; i < bounds.size(); ++i) {
      KILN_CHECK(bounds[i - 1] < bounds[i], "histogram bounds must be strictly ascending");
    }
  }
  void Observe(double v) {
    ++counts[static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) -
                                 bounds.begin())];
    ++count;
    sum += v;
  }
};

// Upper bounds (seconds) of the duration histograms: 50 us .. 10 s.
inline const std::vector<double>& DurationBucketsSeconds() {
  static const std::vector<double> kBounds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                              0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                              0.5,     1,      2.5,     5,      10};
  return kBounds;
}
// Upper bounds of the batch-size histogram: 1, 2, 4, .. 1024.
inline const std::vector<double>& BatchSizeBuckets() {
  static const std::vector<double> kBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return kBounds;
}

// Upper bounds (seconds) of the generation latency histograms (time to first token,
// inter-token latency, time per output token, end to end): 1 ms .. 640 s.
inline const std::vector<double>& GenLatencyBucketsSeconds() {
  static const std::vector<double> kBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                              0.15,  0.2,   0.3,  0.4,  0.5,  0.75, 1,    2.5,
                                              5,     7.5,   10,   20,   40,   80,   160,  640};
  return kBounds;
}
// Upper bounds of the shadow traffic's absolute-difference histogram: 1e-7 .. 1e3, by decades.
inline const std::vector<double>& AbsDiffBuckets() {
  static const std::vector<double> kBounds = {1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2,
                                              1e-1, 1,    10,   100,  1000};
  return kBounds;
}
// Upper bounds of the token-count histograms (prompt and generation lengths): 1 .. 100000.
inline const std::vector<double>& TokenCountBuckets() {
  static const std::vector<double> kBounds = {1,   2,    5,    10,   20,    50,    100,   200,
                                              500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
  return kBounds;
}

// Generation statistics of a generative model (docs/metrics.md maps each to vLLM's name).
struct GenerationStatistics {
  bool present = false;  // false for tensor models
  // Per request (successful ones): time to first token, end to end, waiting before the first
  // step, time per output token ((e2e - ttft) / (tokens - 1)); per token: inter-token latency.
  Histogram ttft_seconds{GenLatencyBucketsSeconds()};
  Histogram e2e_seconds{GenLatencyBucketsSeconds()};
  Histogram queue_seconds{GenLatencyBucketsSeconds()};
  Histogram tpot_seconds{GenLatencyBucketsSeconds()};
  Histogram itl_seconds{GenLatencyBucketsSeconds()};
  Histogram prompt_tokens{TokenCountBuckets()};
  Histogram generation_tokens{TokenCountBuckets()};
  Histogram step_seconds{GenLatencyBucketsSeconds()};  // one engine step
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t finished_stop = 0;  // requests by finish reason (all choices done)
  uint64_t finished_length = 0;
  uint64_t finished_abort = 0;  // cancelled, timed out, cut, failed
  uint64_t cancellations = 0;   // requests whose client left
  uint64_t stream_cuts = 0;     // streams cut because the client read too slowly
  uint64_t preemptions = 0;
  uint64_t prefix_queries_tokens = 0;
  uint64_t prefix_hits_tokens = 0;
  uint64_t steps = 0;
  // Where a step's time goes: the engine's forward pass, and the scheduler's planning (the rest
  // of step_seconds is sampling, detokenization and handing chunks to the clients).
  double forward_seconds_total = 0;
  double scheduler_seconds_total = 0;
  // Gauges, read when the statistics are taken.
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_blocks_cached = 0;
  int64_t kv_tokens = 0;  // positions holding K/V of the running sequences
  int64_t kv_block_size = 0;
};

struct InferStatistics {
  StatDuration success;         // total time from arrival to response, successful requests
  StatDuration fail;            // total time of failed requests (rejected, timed out, errors)
  StatDuration queue;           // time waiting in the scheduler queue
  StatDuration compute_input;   // batching inputs (copy into the batch tensors)
  StatDuration compute_infer;   // running the session
  StatDuration compute_output;  // slicing outputs back into responses
  StatDuration cache_hit;       // answered from the response cache: hash + lookup time
  StatDuration cache_miss;      // successful after a cache miss: hash + lookup + insertion time
};

struct BatchStatistics {
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
};

// One step of an ensemble (repo/ensemble.h): the step requests the ensemble handed to the
// step's composing model (steps that never reached it, because another step failed first or
// the request was cancelled while the step waited for max_inflight_requests, count nowhere).
struct EnsembleStepStatistics {
  int step = 0;                // index in the ensemble's config, from 0
  std::string model;           // the composing model the step names
  int64_t model_version = -1;  // as the step names it; -1: the highest ready version
  StatDuration success;        // answered with a response: time from hand-off to answer
  StatDuration fail;           // answered with an error: time from hand-off to answer
  // Of the successful step requests, what their responses report (InferResponse::timing): the
  // composing model's queue and compute times (zero for a response-cache hit). Each count
  // equals success.count.
  StatDuration queue;
  StatDuration compute_input;
  StatDuration compute_infer;
  StatDuration compute_output;
};

// A version's rollout (repo/rollout.h; docs/rollouts.md): requests the weighted split sent to
// it, what its precision variants served, and the agreement of its shadow version's answers.
struct RolloutStatistics {
  bool present = false;  // false: the model has no rollout config
  uint64_t routed = 0;   // requests the split sent to this version
  // Requests served by each precision variant (the version's own precision is ""), and how many
  // of those were moved there because the version was overloaded.
  struct Variant {
    std::string precision;
    uint64_t requests = 0;
    uint64_t overload_moves = 0;
  };
  std::vector<Variant> variants;
  bool overloaded = false;  // best-effort requests are being moved now
  // Shadow traffic: the version mirrored to, requests mirrored, the mirrored requests that failed
  // on it (the user's answers unaffected), those whose answers were compared (both succeeded),
  // the outputs compared by top-1 class and those whose top-1 agreed, and the per-request
  // largest absolute difference over all outputs.
  int64_t shadow_version = 0;  // 0: no shadow
  uint64_t shadow_requests = 0;
  uint64_t shadow_failures = 0;
  uint64_t shadow_compared = 0;
  uint64_t shadow_top1_rows = 0;
  uint64_t shadow_top1_agree = 0;
  Histogram shadow_max_abs_diff{AbsDiffBuckets()};
};

struct ModelStatistics {
  uint64_t last_inference_ms = 0;  // wall-clock ms since the epoch of the last response; 0: never
  uint64_t inference_count = 0;    // successful inferences, counting every batch element
  uint64_t execution_count = 0;    // session runs (one per executed batch)
  InferStatistics inference;
  std::map<uint64_t, BatchStatistics> batches;  // by executed batch size

  // Failed requests by reason (indexed by FailureReason); they sum to inference.fail.count.
  std::array<uint64_t, kNumFailureReasons> failures{};
  // Successful requests: arrival to response, arrival to dispatch (count ==
  // inference.success.count, cache hits included), and the compute time (input + infer +
  // output) of the batch they ran in (count == success.count - cache_hit.count).
  Histogram request_seconds{DurationBucketsSeconds()};
  Histogram queue_seconds{DurationBucketsSeconds()};
  Histogram compute_seconds{DurationBucketsSeconds()};
  // Executed batch sizes, one observation per session run; count == execution_count.
  Histogram batch_size{BatchSizeBuckets()};
  GenerationStatistics generation;
  // Whether the version uses the response cache (its config enables it and the server has one):
  // /metrics then exports its cache families. Set by the model, not by StatsCollector.
  bool response_cache = false;
  // An ensemble's steps, in config order (SetEnsembleSteps); empty for every other model.
  std::vector<EnsembleStepStatistics> ensemble_steps;
  RolloutStatistics rollout;
};

// Adds the request, batch and failure statistics of `from` (a tensor model's: generation,
// ensemble steps and rollout are left alone) to `into`: the statistics of one version served by
// several precision variants (repo/rollout.h).
void MergeTensorStatistics(const ModelStatistics& from, ModelStatistics* into);

class StatsCollector {
 public:
  // One session run of `batch_size` (>= 1) batch elements, whatever the number of requests.
  void RecordExecution(uint64_t batch_size, uint64_t input_ns, uint64_t infer_ns,
                       uint64_t output_ns) KILN_EXCLUDES(mu_);
  // One request answered with a response; `batch_elements` is its own batch size (>= 1).
  void RecordSuccess(uint64_t batch_elements, uint64_t queue_ns, uint64_t input_ns,
                     uint64_t infer_ns, uint64_t output_ns, uint64_t total_ns, uint64_t now_ms)
      KILN_EXCLUDES(mu_);
  // One request answered with an error (after `total_ns` in the server).
  void RecordFailure(FailureReason reason, uint64_t total_ns, uint64_t now_ms) KILN_EXCLUDES(mu_);
  // One request answered from the response cache: `lookup_ns` to hash and find it, `total_ns`
  // from arrival to response. A success with queue time 0; no inference, execution or compute.
  void RecordCacheHit(uint64_t lookup_ns, uint64_t total_ns, uint64_t now_ms) KILN_EXCLUDES(mu_);
  // A request that missed the response cache and succeeded (RecordSuccess counts it as such):
  // `ns` spent hashing, looking it up and inserting its response.
  void RecordCacheMiss(uint64_t ns) KILN_EXCLUDES(mu_);

  // Ensembles: declares the steps (identity fields of each entry; counters are ignored and
  // start at zero) whose step requests RecordStepSuccess / RecordStepFailure count.
  void SetEnsembleSteps(std::vector<EnsembleStepStatistics> steps) KILN_EXCLUDES(mu_);
  // A step request answered with a response, `total_ns` after its hand-off to the composing
  // model, reporting the given queue and compute times. REQUIRES: step < the declared steps.
  void RecordStepSuccess(size_t step, uint64_t total_ns, uint64_t queue_ns, uint64_t input_ns,
                         uint64_t infer_ns, uint64_t output_ns) KILN_EXCLUDES(mu_);
  // A step request answered with an error, `total_ns` after its hand-off.
  // REQUIRES: step < the declared steps.
  void RecordStepFailure(size_t step, uint64_t total_ns) KILN_EXCLUDES(mu_);

  ModelStatistics Snapshot() const KILN_EXCLUDES(mu_);
  // Forgets everything recorded so far (warmup runs are not served requests); declared ensemble
  // steps stay declared, with zero counters.
  void Reset() KILN_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  ModelStatistics stats_ KILN_GUARDED_BY(mu_);
};

}  // namespace kiln
