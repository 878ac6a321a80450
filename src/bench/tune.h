// SPDX-License-Identifier: Apache-2.0
#pragma once
// `kiln tune`: the pure parts of tuning a served model's config under a latency budget. The
// search (which config to measure next), the concurrency ramp of one config, the choice of the
// winner, the edits of the model config and the outputs (table, CSV, HTML, config.pbtxt) are
// plain functions and one small state machine here; tune_run.h drives them against a live
// server.
//
//   CoordinateSearch search(space, SettingsFromConfig(start_config), max_configs, max_passes);
//   while (std::optional<TuneSettings> s = search.Next()) {
//     TuneConfigResult r = ...load *s, ramp the concurrency with NextConcurrency, measure...;
//     search.Report(r);
//   }
//   std::optional<PointRef> winner = PickWinner(results, budget_us);
//
// NOTE (search): the full grid of every swept field multiplies out quickly, so the search is a
// coordinate descent. It measures the starting config first, then goes through the dimensions in
// a fixed order (kDimensionOrder: max_batch_size, max_queue_delay_us, preferred_batch_size,
// instances, threads, precision): for each, it measures the current best config with that one field
// set to each listed value, and the best of them becomes the current best before the next
// dimension. A pass over all dimensions that does not improve the best ends the search, as do
// `max_passes` passes or `max_configs` measured configs. Configs already measured are not measured
// again. Changing a batching field (max_batch_size, max_queue_delay_us, preferred_batch_size) turns
// dynamic_batching on: without it the server runs every request alone and those fields do
// nothing.
//
// NOTE (scores): a point meets the budget when it had no errors and its p99 <= the budget. A
// config's score is its best point meeting the budget (highest throughput; then lower p99, then
// lower concurrency). A config with such a point beats one without; two with one compare by
// throughput (then p99); two without compare by their lowest p99 (the closest to the budget); a
// config that failed to load or served nothing is worst. On a full tie the config measured
// first stays best.
//
// Thread safety: plain values and functions; a CoordinateSearch is used from one thread.

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace google::protobuf {
class Message;
}

namespace kiln::bench {

// The swept settings of one model config.
struct TuneSettings {
  int instances = 1;  // instance_group count (one group)
  int max_batch_size = 0;
  bool dynamic_batching = false;  // false: max_queue_delay_us and preferred are not applied
  int64_t max_queue_delay_us = 0;
  std::vector<int> preferred_batch_sizes;
  std::string precision;  // optimization.precision; "" = as the model stores its weights
  // Threads one session run of each instance uses: the config parameter kiln.intra_op_threads
  // (repo/model_config.h); 0 = the server's setting.
  int threads = 0;

  bool operator==(const TuneSettings&) const = default;
  // "instances=2 threads=1 max_batch=8 delay_us=500 preferred=4,8 precision=bf16";
  // "batching=off" in place of the delay and preferred sizes without dynamic_batching;
  // "threads=server" for 0 and "precision=default" for "".
  std::string Label() const;
};

// The same settings with what the server would not act on removed: preferred sizes above
// max_batch_size, and the delay and preferred sizes without dynamic_batching.
TuneSettings Normalized(TuneSettings s);

// The values to try per dimension; an empty list is not swept.
struct TuneSpace {
  std::vector<int> max_batch_size;
  std::vector<int64_t> max_queue_delay_us;
  std::vector<std::vector<int>> preferred_batch_sizes;  // each entry one choice; {} = none
  std::vector<int> instances;
  std::vector<int> threads;  // 0 = the server's setting
  std::vector<std::string> precision;
};

enum class TuneDimension {
  kMaxBatchSize,
  kMaxQueueDelay,
  kPreferred,
  kInstances,
  kThreads,
  kPrecision
};
inline constexpr TuneDimension kDimensionOrder[] = {
    TuneDimension::kMaxBatchSize, TuneDimension::kMaxQueueDelay, TuneDimension::kPreferred,
    TuneDimension::kInstances,    TuneDimension::kThreads,       TuneDimension::kPrecision};

// "max_batch_size", "max_queue_delay_us", "preferred_batch_size", "instances", "threads",
// "precision".
const char* DimensionName(TuneDimension d);

// The settings `base` with dimension `d` set to value number `index` of `space` (batching
// dimensions also turn dynamic_batching on), normalized.
// REQUIRES: index < the number of values of `d` in `space`.
TuneSettings WithValue(const TuneSettings& base, const TuneSpace& space, TuneDimension d,
                       size_t index);

// One measured load level of one config.
struct TunePoint {
  int concurrency = 0;
  double throughput = 0;  // inferences/s
  double p50_us = 0;
  double p99_us = 0;
  uint64_t requests = 0;  // completed, errors included
  uint64_t errors = 0;
  std::string first_error;
};

// True when `p` had successful requests, no errors and p99 <= budget_us.
bool MeetsBudget(const TunePoint& p, double budget_us);

// One measured config: its settings, the load failure if it did not load, its points in order.
struct TuneConfigResult {
  TuneSettings settings;
  std::string error;  // non-empty: the config failed to load or to be measured
  std::vector<TunePoint> points;
};

// The concurrency to measure next for a config whose points so far are `points` (1, 2, 4, ...),
// or 0 to stop: after a point over the budget, with errors or without successful requests; after
// a point whose throughput is below (1 + min_gain) x the best of the earlier points; or when
// doubling would pass max_concurrency.
int NextConcurrency(std::span<const TunePoint> points, double budget_us, int max_concurrency,
                    double min_gain);

// Where a point is: config `config` of the results, its point `point`.
struct PointRef {
  size_t config = 0;
  size_t point = 0;
  bool operator==(const PointRef&) const = default;
};

// The best point of one config under the score rule (NOTE above): the best meeting the budget,
// else the one with the lowest p99 among those with successful requests; nullopt when it has
// none.
std::optional<size_t> BestPointOf(const TuneConfigResult& config, double budget_us);

// True when config `a` scores strictly better than config `b` (NOTE above).
bool BetterConfig(const TuneConfigResult& a, const TuneConfigResult& b, double budget_us);

// The winner: the point of highest throughput meeting the budget over every config (ties: lower
// p99, then lower concurrency, then the earlier config); nullopt when no point meets it.
std::optional<PointRef> PickWinner(std::span<const TuneConfigResult> results, double budget_us);

// The point closest to meeting the budget (lowest p99 among points with successful requests;
// ties: higher throughput); for the message when none meets it.
std::optional<PointRef> ClosestPoint(std::span<const TuneConfigResult> results);

// The coordinate descent of the NOTE above, as a step function: Next() says which config to
// measure, Report() takes its result.
class CoordinateSearch {
 public:
  // REQUIRES: max_configs >= 1, max_passes >= 1.
  CoordinateSearch(TuneSpace space, TuneSettings start, double budget_us, int max_configs,
                   int max_passes);

  // The next config to measure, nullopt when the search is over. REQUIRES: the config the
  // previous Next() returned has been reported.
  std::optional<TuneSettings> Next();
  // The result of the config the last Next() returned.
  void Report(TuneConfigResult result);

  // Every reported result, in order, and the index of the best one (0 before any report).
  const std::vector<TuneConfigResult>& results() const { return results_; }
  size_t best() const { return best_; }
  // Which dimension the config Next() last returned varies (nullopt for the starting config).
  std::optional<TuneDimension> dimension() const { return dimension_; }

 private:
  // Queues the values of the current dimension around the current best; false when the search
  // is over.
  bool Advance();

  TuneSpace space_;
  double budget_us_;
  int max_configs_;
  int max_passes_;
  std::vector<TuneConfigResult> results_;
  std::set<std::string> seen_;  // labels of normalized settings returned by Next()
  std::vector<TuneSettings> queue_;
  std::optional<TuneSettings> start_;
  std::optional<TuneDimension> dimension_;
  size_t best_ = 0;
  size_t dim_index_ = 0;  // next dimension to queue
  int pass_ = 0;
  size_t best_at_pass_start_ = 0;
  bool pending_ = false;
  bool done_ = false;
};

// Model config edits, by field name through protobuf reflection on any message with the fields
// of inference.ModelConfig (src/repo/model_config.proto), so this part needs no server code.
//
// The settings a config holds: instances = the sum of instance_group counts (1 with no group).
TuneSettings SettingsFromConfig(const google::protobuf::Message& config);
// Writes `s` into `config`. FailedPrecondition naming the problem when `config` has several
// instance groups and s.instances differs from their sum, or lacks one of the fields.
Status ApplySettings(const TuneSettings& s, google::protobuf::Message* config);
// optimization.calibration_dir ("" when unset): int8 needs one.
std::string CalibrationDir(const google::protobuf::Message& config);
// JSON text (as GET /v2/models/{m}/config answers) into `config`; unknown fields are ignored.
Status ParseConfigJson(std::string_view json, google::protobuf::Message* config);
// JSON text for the repository load request's "config" parameter (field names as in the proto).
Result<std::string> ConfigJson(const google::protobuf::Message& config);
// The protobuf text format of config.pbtxt, after `header` (each line prefixed with "# ").
std::string ConfigPbtxt(const google::protobuf::Message& config,
                        std::span<const std::string> header);

// Outputs. `budget_us` marks which points meet the budget; `winner` the winning point.
//
// results.csv: one row per measured point: config (its index), instances, max_batch_size,
// dynamic_batching, max_queue_delay_us, preferred_batch_size (sizes separated by spaces),
// precision, concurrency, throughput_infer_s, p50_us, p99_us, requests, errors, meets_budget
// (0/1), winner (0/1).
std::string FormatTuneCsv(std::span<const TuneConfigResult> results, double budget_us,
                          std::optional<PointRef> winner);
// The terminal table: config, concurrency, infer/s, p50 ms, p99 ms, meets budget, with the
// winner marked, and a line per config that failed.
std::string FormatTuneTable(std::span<const TuneConfigResult> results, double budget_us,
                            std::optional<PointRef> winner);
// One page, no external assets: p99 latency against throughput per config as an inline SVG,
// the budget as a dashed line, the winner circled, then the table. `title` heads the page.
std::string FormatTuneHtml(std::span<const TuneConfigResult> results, double budget_us,
                           std::optional<PointRef> winner, const std::string& title);

// Parses a --max-batch-size / --instances style list "1,4,8" (positive integers; `allow_zero`
// admits 0). InvalidArgument naming `flag` on a malformed list.
Result<std::vector<int64_t>> ParseIntList(std::string_view text, std::string_view flag,
                                          bool allow_zero);
// Parses one --preferred-batch-size choice: "none" (no preferred sizes) or "4,8".
Result<std::vector<int>> ParsePreferredChoice(std::string_view text);

}  // namespace kiln::bench
