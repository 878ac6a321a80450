// SPDX-License-Identifier: Apache-2.0
#pragma once
// The non-load calls `kiln bench` makes: model metadata + config (to build inputs) and the
// statistics endpoint (the server-side breakdown per window), over HTTP or gRPC.
//
// Thread safety: a ControlClient is used from the runner thread only.

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "bench/inputs.h"
#include "bench/point.h"

namespace kiln::bench {

// Cumulative counters of one model version (protocol §1.6).
struct ServerCounters {
  struct Duration {
    uint64_t count = 0;
    uint64_t ns = 0;
  };
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  Duration success, fail, queue, compute_input, compute_infer, compute_output;
};

// perf_analyzer's arithmetic over two snapshots: per-request averages of each phase,
// overhead = request - (queue + compute) floored at 0, mean batch = Δinference / Δexecution.
ServerBreakdown Diff(const ServerCounters& before, const ServerCounters& after);

class ControlClient {
 public:
  virtual ~ControlClient() = default;
  // Metadata and max_batch_size. NotFound / InvalidArgument with the server's message when the
  // model is unknown; Unavailable naming the address when the server cannot be reached.
  virtual Result<ModelInfo> GetModel(const std::string& model, const std::string& version) = 0;
  // The counters of `version` (or of the highest ready version when empty).
  virtual Result<ServerCounters> GetStats(const std::string& model, const std::string& version) = 0;
};

// "host:port".
std::unique_ptr<ControlClient> MakeHttpControl(const std::string& url);
#ifdef KILN_HAVE_GRPC
std::unique_ptr<ControlClient> MakeGrpcControl(const std::string& url);
#endif

// Parsers of the HTTP JSON answers, exposed for tests.
Result<ModelInfo> ParseModelMetadataJson(const std::string& body);
Result<int> ParseMaxBatchSizeJson(const std::string& body);
Result<ServerCounters> ParseStatsJson(const std::string& body, const std::string& version);

}  // namespace kiln::bench
