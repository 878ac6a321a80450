// SPDX-License-Identifier: Apache-2.0
#pragma once
// The /metrics document: what kiln exports, in one place (docs/metrics.md lists the same
// families). RenderMetrics is a pure function of plain data, so the catalogue is tested without
// servers or threads; CollectModelMetrics gathers that data from a ModelManager.
//
//   std::vector<ModelMetrics> models = CollectModelMetrics(*manager);
//   SystemMetrics system = {cpu.Sample(), ReadMemoryInfo(), ReadProcessRssBytes()};
//   std::string body = RenderMetrics(models, system);   // Prometheus text format 0.0.4
//
// Per-model families carry the labels model="<name>" and version="<n>", one series per ready
// version. Reference names (nv_*) keep the reference units (microseconds, seconds); kiln_*
// histograms are in seconds (durations) and batch elements (batch size). The failure counter
// nv_inference_request_failure has a series for each reference reason (REJECTED, CANCELED,
// BACKEND, OTHER), zero included; kiln_requests_rejected_total one for each reason a request
// can be refused before it runs (queue_full, timeout, shutting_down, invalid). The response
// cache families, as the reference names them: per model (nv_cache_*_per_model) only for the
// versions that use the cache (ModelStatistics::response_cache), server-wide (nv_cache_num_*,
// nv_cache_util, ...) only when the server has a cache. The ensemble step families
// (kiln_ensemble_step_*, counters in requests and seconds) have one series per step of each
// ensemble version (ModelStatistics::ensemble_steps), labelled model, version, step (its index
// from 0) and step_model (the composing model it names); absent when no ensemble is loaded.
//
// Thread safety: RenderMetrics is thread-safe; CollectModelMetrics as the ModelManager is.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "repo/response_cache.h"
#include "sched/stats.h"
#include "server/metrics/gpu_metrics.h"
#include "server/metrics/system_metrics.h"

namespace kiln {

class ModelManager;

struct ModelMetrics {
  std::string name;
  int64_t version = 0;
  ModelStatistics stats;
  uint64_t pending_requests = 0;
  double load_duration_seconds = 0;
  uint64_t weight_bytes = 0;
};

struct SystemMetrics {
  std::optional<double> cpu_utilization;  // 0..1
  std::optional<MemoryInfo> memory;
  std::optional<uint64_t> process_rss_bytes;
  std::vector<GpuReading> gpus;  // empty without NVML (server/metrics/gpu_metrics.h)
  // The server's response cache (repo/response_cache.h); unset without --cache-config.
  std::optional<ResponseCacheStats> response_cache;
  // Request tracing (server/trace.h): spans exported and dropped; unset when tracing never ran.
  struct Tracing {
    uint64_t spans_exported = 0;
    uint64_t spans_dropped = 0;
    uint64_t traces = 0;
  };
  std::optional<Tracing> tracing;
  // Tenants (server/security/access.h): counters per tenant, "anonymous" last; empty without
  // --auth-file.
  struct Tenant {
    std::string name;
    uint64_t ok = 0;
    uint64_t unauthenticated = 0;
    uint64_t forbidden = 0;
    uint64_t rate_limited = 0;
    int64_t inflight = 0;
    uint64_t generated_tokens = 0;
  };
  std::vector<Tenant> tenants;
};

// The reference failure reason of a kiln failure reason: queue full, timeout and shutdown are
// REJECTED (refused by the scheduler), a failed run BACKEND, cancellation CANCELED, anything
// else (invalid requests included) OTHER.
std::string_view ReferenceFailureReason(FailureReason reason);

// Every ready model version of `manager`, sorted by name then version.
std::vector<ModelMetrics> CollectModelMetrics(const ModelManager& manager);

std::string RenderMetrics(std::span<const ModelMetrics> models, const SystemMetrics& system);

}  // namespace kiln
