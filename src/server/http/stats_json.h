// SPDX-License-Identifier: Apache-2.0
#pragma once
// JSON of the statistics extension (KSERVE-V2.md 1.6), the body of GET /v2/models/stats,
// /v2/models/{m}/stats and /v2/models/{m}/versions/{v}/stats. A pure function, tested without a
// server.
//
//   std::vector<ModelStatisticsEntry> entries = {{"add_sub", 1, model->Statistics()}};
//   std::string body = ModelStatisticsJson(entries);
//
// The shape perf_analyzer and the official clients read without presence checks:
//   {"model_stats": [ {"name", "version" (decimal string), "last_inference",
//     "inference_count", "execution_count",
//     "inference_stats": {"success", "fail", "queue", "compute_input", "compute_infer",
//                         "compute_output", "cache_hit", "cache_miss"},   each {"count","ns"}
//     "response_stats": {},  (kiln's models answer once per request: no per-response stats)
//     "batch_stats": [ {"batch_size", "compute_input", "compute_infer", "compute_output"} ],
//     "memory_usage": [],
//     "ensemble_steps": [ {"step", "model", "model_version" (decimal string; "-1": the highest
//                          ready version), "success", "fail", "queue", "compute_input",
//                          "compute_infer", "compute_output"} ] }, ... ]}
// Every number is a JSON unsigned integer; batch_stats is ordered by batch size.
// "ensemble_steps" is kiln's extension (ModelStatistics::ensemble_steps, one entry per step in
// config order, each member {"count","ns"}): present only for an ensemble. Clients read the
// members they know by name and ignore it (the Python clients return the parsed JSON as is;
// perf_analyzer looks up named members).
//
// Thread safety: stateless; call from any thread.

#include <cstdint>
#include <span>
#include <string>

#include "repo/model_manager.h"
#include "sched/stats.h"

namespace kiln {

struct ModelStatisticsEntry {
  std::string name;
  int64_t version = 0;
  ModelStatistics stats;
};

std::string ModelStatisticsJson(std::span<const ModelStatisticsEntry> entries);

}  // namespace kiln
