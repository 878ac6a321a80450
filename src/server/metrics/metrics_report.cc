// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/metrics_report.h"

#include <array>
#include <string>
#include <vector>

#include "repo/model_manager.h"
#include "server/metrics/exposition.h"

namespace kiln {
namespace {

constexpr std::array<std::string_view, 4> kReferenceReasons = {"REJECTED", "CANCELED", "BACKEND",
                                                               "OTHER"};
constexpr std::array<FailureReason, 4> kRejectionReasons = {
    FailureReason::kQueueFull, FailureReason::kTimeout, FailureReason::kShuttingDown,
    FailureReason::kInvalid};

// Whole microseconds (truncated), as the reference server's *_duration_us counters count.
double Micros(uint64_t ns) {
  const uint64_t us = ns / 1000;
  return static_cast<double>(us);
}

// A family with one sample per model version.
template <typename F>
void PerModel(ExpositionWriter& w, std::span<const ModelMetrics> models, std::string_view name,
              MetricType type, std::string_view help, F value) {
  w.BeginFamily(name, type, help);
  for (const ModelMetrics& m : models) {
    const std::string version = std::to_string(m.version);
    w.Sample({{"model", m.name}, {"version", version}}, value(m));
  }
}

template <typename F>
void PerModelHistogram(ExpositionWriter& w, std::span<const ModelMetrics> models,
                       std::string_view name, std::string_view help, F histogram) {
  w.BeginFamily(name, MetricType::kHistogram, help);
  for (const ModelMetrics& m : models) {
    const std::string version = std::to_string(m.version);
    w.HistogramSample({{"model", m.name}, {"version", version}}, histogram(m));
  }
}

// The generation families (docs/metrics.md maps each to vLLM's name), over the generative
// models only; nothing when there is none.
void RenderGenerationMetrics(ExpositionWriter& w, std::span<const ModelMetrics> all) {
  std::vector<ModelMetrics> gen;
  for (const ModelMetrics& m : all) {
    if (m.stats.generation.present) gen.push_back(m);
  }
  if (gen.empty()) return;
  using T = MetricType;
  using G = GenerationStatistics;
  const auto hist = [&](std::string_view name, std::string_view help, Histogram G::*field) {
    PerModelHistogram(w, gen, name, help, [field](const ModelMetrics& m) -> const Histogram& {
      return m.stats.generation.*field;
    });
  };
  hist("kiln_gen_time_to_first_token_seconds",
       "Generation requests: arrival to the first output token, in seconds", &G::ttft_seconds);
  hist("kiln_gen_inter_token_latency_seconds",
       "Time between two consecutive output tokens of a sequence, in seconds", &G::itl_seconds);
  hist("kiln_gen_time_per_output_token_seconds",
       "Generation requests: (end to end - time to first token) / (output tokens - 1), seconds",
       &G::tpot_seconds);
  hist("kiln_gen_e2e_request_latency_seconds",
       "Generation requests: arrival to the last token, in seconds", &G::e2e_seconds);
  hist("kiln_gen_queue_time_seconds",
       "Generation requests: arrival to the first engine step, in seconds", &G::queue_seconds);
  hist("kiln_gen_prompt_tokens", "Prompt length of each finished request, in tokens",
       &G::prompt_tokens);
  hist("kiln_gen_generation_tokens",
       "Generated tokens of each finished request (all choices), in tokens", &G::generation_tokens);
  hist("kiln_gen_step_duration_seconds", "Duration of one engine step (all its sequences)",
       &G::step_seconds);
  const auto counter = [&](std::string_view name, T type, std::string_view help, auto field) {
    PerModel(w, gen, name, type, help, [field](const ModelMetrics& m) {
      return static_cast<double>(m.stats.generation.*field);
    });
  };
  counter("kiln_gen_prompt_tokens_total", T::kCounter, "Prompt tokens of finished requests",
          &G::prompt_tokens_total);
  counter("kiln_gen_generation_tokens_total", T::kCounter, "Generated tokens",
          &G::generation_tokens_total);
  w.BeginFamily("kiln_gen_requests_finished_total", T::kCounter,
                "Finished choices by reason: stop (end of generation, stop string or token), "
                "length (max_tokens or the context), abort (cancelled, timed out, cut, failed)");
  for (const ModelMetrics& m : gen) {
    const std::string version = std::to_string(m.version);
    const G& g = m.stats.generation;
    w.Sample({{"model", m.name}, {"version", version}, {"reason", "stop"}},
             static_cast<double>(g.finished_stop));
    w.Sample({{"model", m.name}, {"version", version}, {"reason", "length"}},
             static_cast<double>(g.finished_length));
    w.Sample({{"model", m.name}, {"version", version}, {"reason", "abort"}},
             static_cast<double>(g.finished_abort));
  }
  counter("kiln_gen_forward_seconds_total", T::kCounter,
          "Time in the engine's forward passes, in seconds", &G::forward_seconds_total);
  counter("kiln_gen_scheduler_seconds_total", T::kCounter,
          "Time the scheduler spent planning and completing steps, in seconds",
          &G::scheduler_seconds_total);
  counter("kiln_gen_preemptions_total", T::kCounter,
          "Sequences preempted (KV cache full) and recomputed later", &G::preemptions);
  counter("kiln_gen_prefix_cache_queries_total", T::kCounter,
          "Prompt tokens looked up in the prefix cache", &G::prefix_queries_tokens);
  counter("kiln_gen_prefix_cache_hits_total", T::kCounter,
          "Prompt tokens found in the prefix cache", &G::prefix_hits_tokens);
  counter("kiln_gen_cancellations_total", T::kCounter, "Generation requests whose client went away",
          &G::cancellations);
  counter("kiln_gen_stream_cuts_total", T::kCounter,
          "Streams cut because the client read too slowly", &G::stream_cuts);
  counter("kiln_gen_running_sequences", T::kGauge, "Sequences running (in the engine's batch)",
          &G::running);
  counter("kiln_gen_waiting_sequences", T::kGauge,
          "Sequences waiting for admission (queued or preempted)", &G::waiting);
  w.BeginFamily("kiln_gen_kv_cache_blocks", T::kGauge,
                "KV cache blocks by state: used (held by sequences), cached (free, holding a "
                "reusable prefix), free");
  for (const ModelMetrics& m : gen) {
    const std::string version = std::to_string(m.version);
    const G& g = m.stats.generation;
    w.Sample({{"model", m.name}, {"version", version}, {"state", "used"}},
             static_cast<double>(g.kv_blocks_used));
    w.Sample({{"model", m.name}, {"version", version}, {"state", "cached"}},
             static_cast<double>(g.kv_blocks_cached));
    w.Sample({{"model", m.name}, {"version", version}, {"state", "free"}},
             static_cast<double>(g.kv_blocks_free));
  }
  counter("kiln_gen_kv_cache_tokens", T::kGauge,
          "Positions holding K/V of the running sequences (used blocks x block size minus this "
          "is the slack of their last blocks)",
          &G::kv_tokens);
  counter("kiln_gen_kv_cache_block_size", T::kGauge, "Tokens per KV cache block",
          &G::kv_block_size);
  PerModel(w, gen, "kiln_gen_kv_cache_usage_ratio", T::kGauge,
           "Share of the KV cache blocks held by sequences (0..1)", [](const ModelMetrics& m) {
             const G& g = m.stats.generation;
             return g.kv_blocks_total > 0 ? static_cast<double>(g.kv_blocks_used) /
                                                static_cast<double>(g.kv_blocks_total)
                                          : 0.0;
           });
}

// The per-step families of the ensembles (ModelStatistics::ensemble_steps): one series per step,
// labelled with the ensemble's model and version, the step's index and its composing model;
// nothing when no ensemble is loaded.
void RenderEnsembleStepMetrics(ExpositionWriter& w, std::span<const ModelMetrics> all) {
  std::vector<const ModelMetrics*> ensembles;
  for (const ModelMetrics& m : all) {
    if (!m.stats.ensemble_steps.empty()) ensembles.push_back(&m);
  }
  if (ensembles.empty()) return;
  const auto family = [&](std::string_view name, std::string_view help, auto value) {
    w.BeginFamily(name, MetricType::kCounter, help);
    for (const ModelMetrics* m : ensembles) {
      const std::string version = std::to_string(m->version);
      for (const EnsembleStepStatistics& s : m->stats.ensemble_steps) {
        const std::string step = std::to_string(s.step);
        w.Sample(
            {{"model", m->name}, {"version", version}, {"step", step}, {"step_model", s.model}},
            value(s));
      }
    }
  };
  using S = EnsembleStepStatistics;
  const auto seconds = [](const StatDuration& d) { return static_cast<double>(d.ns) / 1e9; };
  family("kiln_ensemble_step_success_total",
         "Step requests an ensemble handed to the step's composing model and got a response for",
         [](const S& s) { return static_cast<double>(s.success.count); });
  family("kiln_ensemble_step_failure_total",
         "Step requests an ensemble handed to the step's composing model that failed",
         [](const S& s) { return static_cast<double>(s.fail.count); });
  family("kiln_ensemble_step_duration_seconds_total",
         "Time from hand-off to response of the successful step requests, in seconds",
         [&](const S& s) { return seconds(s.success); });
  family("kiln_ensemble_step_queue_seconds_total",
         "Queue time the composing model reported for the successful step requests, in seconds",
         [&](const S& s) { return seconds(s.queue); });
  family("kiln_ensemble_step_compute_input_seconds_total",
         "Compute input time the composing model reported for the successful step requests, in "
         "seconds",
         [&](const S& s) { return seconds(s.compute_input); });
  family("kiln_ensemble_step_compute_infer_seconds_total",
         "Compute infer time the composing model reported for the successful step requests, in "
         "seconds",
         [&](const S& s) { return seconds(s.compute_infer); });
  family("kiln_ensemble_step_compute_output_seconds_total",
         "Compute output time the composing model reported for the successful step requests, in "
         "seconds",
         [&](const S& s) { return seconds(s.compute_output); });
}

// The rollout families (ModelStatistics::rollout, repo/rollout.h): per version of a model with a
// rollout config, the requests its split sent it and what its precision variants served; per
// version with shadow traffic, the mirrored requests and their agreement. Nothing when no model
// has a rollout.
void RenderRolloutMetrics(ExpositionWriter& w, std::span<const ModelMetrics> all) {
  std::vector<const ModelMetrics*> rollouts;
  std::vector<const ModelMetrics*> shadows;
  for (const ModelMetrics& m : all) {
    if (!m.stats.rollout.present) continue;
    rollouts.push_back(&m);
    if (m.stats.rollout.shadow_version > 0) shadows.push_back(&m);
  }
  if (rollouts.empty()) return;
  using T = MetricType;
  w.BeginFamily("kiln_rollout_routed_total", T::kCounter,
                "Requests naming no version that the model's weighted split sent to this version");
  for (const ModelMetrics* m : rollouts) {
    w.Sample({{"model", m->name}, {"version", std::to_string(m->version)}},
             static_cast<double>(m->stats.rollout.routed));
  }
  const auto variant_family = [&](std::string_view name, std::string_view help, auto value) {
    w.BeginFamily(name, T::kCounter, help);
    for (const ModelMetrics* m : rollouts) {
      const std::string version = std::to_string(m->version);
      for (const RolloutStatistics::Variant& v : m->stats.rollout.variants) {
        w.Sample({{"model", m->name},
                  {"version", version},
                  {"precision", v.precision.empty() ? "own" : v.precision}},
                 value(v));
      }
    }
  };
  variant_family(
      "kiln_precision_requests_total",
      "Requests each precision variant of the version served (\"own\": the "
      "version's configured precision)",
      [](const RolloutStatistics::Variant& v) { return static_cast<double>(v.requests); });
  variant_family(
      "kiln_precision_overload_moves_total",
      "Best-effort requests moved to the variant because the version was overloaded",
      [](const RolloutStatistics::Variant& v) { return static_cast<double>(v.overload_moves); });
  w.BeginFamily("kiln_precision_overloaded", T::kGauge,
                "1 while best-effort requests of the version move to its best-effort variant");
  for (const ModelMetrics* m : rollouts) {
    w.Sample({{"model", m->name}, {"version", std::to_string(m->version)}},
             m->stats.rollout.overloaded ? 1.0 : 0.0);
  }
  if (shadows.empty()) return;
  const auto shadow_family = [&](std::string_view name, std::string_view help, auto value) {
    w.BeginFamily(name, T::kCounter, help);
    for (const ModelMetrics* m : shadows) {
      const RolloutStatistics& r = m->stats.rollout;
      w.Sample({{"model", m->name},
                {"version", std::to_string(m->version)},
                {"shadow_version", std::to_string(r.shadow_version)}},
               static_cast<double>(value(r)));
    }
  };
  using R = RolloutStatistics;
  shadow_family("kiln_shadow_requests_total",
                "Served requests mirrored to the shadow version (answers discarded)",
                [](const R& r) { return r.shadow_requests; });
  shadow_family("kiln_shadow_failures_total",
                "Mirrored requests the shadow version failed or could not take (the served "
                "answers unaffected)",
                [](const R& r) { return r.shadow_failures; });
  shadow_family("kiln_shadow_compared_total",
                "Mirrored requests whose shadow and served answers were compared",
                [](const R& r) { return r.shadow_compared; });
  shadow_family("kiln_shadow_top1_rows_total",
                "Batch items of compared outputs whose top-1 class was compared",
                [](const R& r) { return r.shadow_top1_rows; });
  shadow_family("kiln_shadow_top1_agreements_total",
                "Compared batch items whose top-1 class agreed between the versions",
                [](const R& r) { return r.shadow_top1_agree; });
  w.BeginFamily("kiln_shadow_max_abs_diff", T::kHistogram,
                "Per compared request, the largest absolute difference between the shadow and "
                "served answers over all outputs");
  for (const ModelMetrics* m : shadows) {
    const RolloutStatistics& r = m->stats.rollout;
    w.HistogramSample({{"model", m->name},
                       {"version", std::to_string(m->version)},
                       {"shadow_version", std::to_string(r.shadow_version)}},
                      r.shadow_max_abs_diff);
  }
}

// The response cache families: per model for the versions that use the cache (the reference's
// names and units: counts, microseconds), and the server-wide cache's gauges (the names the
// reference server used for its built-in cache).
void RenderCacheMetrics(ExpositionWriter& w, std::span<const ModelMetrics> all,
                        const std::optional<ResponseCacheStats>& cache) {
  using T = MetricType;
  std::vector<ModelMetrics> cached;
  for (const ModelMetrics& m : all) {
    if (m.stats.response_cache) cached.push_back(m);
  }
  if (!cached.empty()) {
    PerModel(w, cached, "nv_cache_num_hits_per_model", T::kCounter,
             "Number of cache hits per model", [](const ModelMetrics& m) {
               return static_cast<double>(m.stats.inference.cache_hit.count);
             });
    PerModel(w, cached, "nv_cache_num_misses_per_model", T::kCounter,
             "Number of cache misses per model", [](const ModelMetrics& m) {
               return static_cast<double>(m.stats.inference.cache_miss.count);
             });
    PerModel(w, cached, "nv_cache_hit_duration_per_model", T::kCounter,
             "Total cache hit duration per model, in microseconds (hashing and looking up)",
             [](const ModelMetrics& m) { return Micros(m.stats.inference.cache_hit.ns); });
    PerModel(w, cached, "nv_cache_miss_duration_per_model", T::kCounter,
             "Total cache miss duration per model, in microseconds (hashing, looking up and "
             "inserting)",
             [](const ModelMetrics& m) { return Micros(m.stats.inference.cache_miss.ns); });
  }
  if (!cache.has_value()) return;
  const ResponseCacheStats& c = *cache;
  const auto gauge = [&](std::string_view name, std::string_view help, double value) {
    w.BeginFamily(name, T::kGauge, help);
    w.Sample({}, value);
  };
  gauge("nv_cache_num_entries", "Number of responses stored in response cache",
        static_cast<double>(c.entries));
  gauge("nv_cache_num_lookups", "Number of cache lookups in response cache",
        static_cast<double>(c.lookups));
  gauge("nv_cache_num_hits", "Number of cache hits in response cache", static_cast<double>(c.hits));
  gauge("nv_cache_num_misses", "Number of cache misses in response cache",
        static_cast<double>(c.misses));
  gauge("nv_cache_num_evictions", "Number of cache evictions in response cache",
        static_cast<double>(c.evictions));
  gauge("nv_cache_lookup_duration", "Total cache lookup duration (hit and miss), in microseconds",
        Micros(c.lookup_ns));
  gauge("nv_cache_insertion_duration", "Total cache insertion duration, in microseconds",
        Micros(c.insertion_ns));
  gauge("nv_cache_util", "Cache utilization [0.0 - 1.0]",
        c.capacity_bytes > 0
            ? static_cast<double>(c.used_bytes) / static_cast<double>(c.capacity_bytes)
            : 0.0);
  gauge("kiln_response_cache_used_bytes",
        "Bytes charged for the responses in the response cache (tensors, names, bookkeeping)",
        static_cast<double>(c.used_bytes));
  gauge("kiln_response_cache_capacity_bytes", "Byte budget of the response cache (--cache-config)",
        static_cast<double>(c.capacity_bytes));
  w.BeginFamily("kiln_response_cache_oversize_total", T::kCounter,
                "Responses not cached because they are larger than the whole cache");
  w.Sample({}, static_cast<double>(c.oversize));
}

}  // namespace

std::string_view ReferenceFailureReason(FailureReason reason) {
  switch (reason) {
    case FailureReason::kQueueFull:
    case FailureReason::kTimeout:
    case FailureReason::kShuttingDown:
      return "REJECTED";
    case FailureReason::kCanceled:
      return "CANCELED";
    case FailureReason::kBackend:
      return "BACKEND";
    case FailureReason::kInvalid:
    case FailureReason::kOther:
      return "OTHER";
  }
  return "OTHER";
}

std::vector<ModelMetrics> CollectModelMetrics(const ModelManager& manager) {
  std::vector<ModelMetrics> out;
  for (const ModelIndexEntry& e : manager.Index()) {  // sorted by name, then version
    if (e.state != ModelState::kReady || e.version < 0) continue;
    Result<std::shared_ptr<LoadedModel>> model = manager.GetModel(e.name, e.version);
    if (!model.ok()) continue;  // unloaded since the index was taken
    ModelMetrics& m = out.emplace_back();
    m.name = e.name;
    m.version = e.version;
    m.stats = (*model)->Statistics();
    m.pending_requests = (*model)->PendingRequestCount();
    m.load_duration_seconds = (*model)->LoadDurationSeconds();
    m.weight_bytes = (*model)->WeightBytes();
  }
  return out;
}

std::string RenderMetrics(std::span<const ModelMetrics> models, const SystemMetrics& system) {
  ExpositionWriter w;
  using T = MetricType;

  // Reference families (KSERVE-V2.md section 4).
  PerModel(w, models, "nv_inference_request_success", T::kCounter,
           "Number of successful inference requests, all batch sizes", [](const ModelMetrics& m) {
             return static_cast<double>(m.stats.inference.success.count);
           });
  w.BeginFamily("nv_inference_request_failure", T::kCounter,
                "Number of failed inference requests, all batch sizes");
  for (const ModelMetrics& m : models) {
    const std::string version = std::to_string(m.version);
    for (std::string_view reference : kReferenceReasons) {
      uint64_t n = 0;
      for (size_t r = 0; r < kNumFailureReasons; ++r) {
        if (ReferenceFailureReason(static_cast<FailureReason>(r)) == reference) {
          n += m.stats.failures[r];
        }
      }
      w.Sample({{"model", m.name}, {"version", version}, {"reason", reference}},
               static_cast<double>(n));
    }
  }
  PerModel(w, models, "nv_inference_count", T::kCounter,
           "Number of inferences performed (a batch of n counts n)",
           [](const ModelMetrics& m) { return static_cast<double>(m.stats.inference_count); });
  PerModel(w, models, "nv_inference_exec_count", T::kCounter,
           "Number of model executions performed (a dynamically formed batch counts 1)",
           [](const ModelMetrics& m) { return static_cast<double>(m.stats.execution_count); });
  PerModel(w, models, "nv_inference_pending_request_count", T::kGauge,
           "Instantaneous number of requests queued and not yet started on an instance",
           [](const ModelMetrics& m) { return static_cast<double>(m.pending_requests); });
  PerModel(w, models, "nv_inference_request_duration_us", T::kCounter,
           "Cumulative inference request duration in microseconds (successful requests)",
           [](const ModelMetrics& m) { return Micros(m.stats.inference.success.ns); });
  PerModel(w, models, "nv_inference_queue_duration_us", T::kCounter,
           "Cumulative inference queuing duration in microseconds (successful requests)",
           [](const ModelMetrics& m) { return Micros(m.stats.inference.queue.ns); });
  PerModel(w, models, "nv_inference_compute_input_duration_us", T::kCounter,
           "Cumulative compute input duration in microseconds",
           [](const ModelMetrics& m) { return Micros(m.stats.inference.compute_input.ns); });
  PerModel(w, models, "nv_inference_compute_infer_duration_us", T::kCounter,
           "Cumulative compute inference duration in microseconds",
           [](const ModelMetrics& m) { return Micros(m.stats.inference.compute_infer.ns); });
  PerModel(w, models, "nv_inference_compute_output_duration_us", T::kCounter,
           "Cumulative inference compute output duration in microseconds",
           [](const ModelMetrics& m) { return Micros(m.stats.inference.compute_output.ns); });
  PerModel(w, models, "nv_model_load_duration_secs", T::kGauge,
           "Model load time in seconds (graph import, sessions, warmup)",
           [](const ModelMetrics& m) { return m.load_duration_seconds; });
  RenderCacheMetrics(w, models, system.response_cache);
  if (system.tracing) {
    w.BeginFamily("kiln_trace_traces_total", T::kCounter,
                  "Requests traced (--trace-config, /v2/trace/setting)");
    w.Sample({}, static_cast<double>(system.tracing->traces));
    w.BeginFamily("kiln_trace_spans_exported_total", T::kCounter,
                  "Trace spans the OTLP collector accepted");
    w.Sample({}, static_cast<double>(system.tracing->spans_exported));
    w.BeginFamily("kiln_trace_spans_dropped_total", T::kCounter,
                  "Trace spans dropped: the export queue was full or the export failed");
    w.Sample({}, static_cast<double>(system.tracing->spans_dropped));
  }
  if (!system.tenants.empty()) {
    // Tenants (--auth-file, docs/security.md): one series per tenant and outcome.
    w.BeginFamily("kiln_tenant_requests_total", T::kCounter,
                  "Requests per tenant by outcome: ok (let through), unauthenticated (401; "
                  "tenant \"anonymous\"), forbidden (403), rate_limited (429)");
    for (const SystemMetrics::Tenant& t : system.tenants) {
      w.Sample({{"tenant", t.name}, {"outcome", "ok"}}, static_cast<double>(t.ok));
      w.Sample({{"tenant", t.name}, {"outcome", "unauthenticated"}},
               static_cast<double>(t.unauthenticated));
      w.Sample({{"tenant", t.name}, {"outcome", "forbidden"}}, static_cast<double>(t.forbidden));
      w.Sample({{"tenant", t.name}, {"outcome", "rate_limited"}},
               static_cast<double>(t.rate_limited));
    }
    w.BeginFamily("kiln_tenant_inflight", T::kGauge,
                  "Inference requests of the tenant admitted and not answered yet");
    for (const SystemMetrics::Tenant& t : system.tenants) {
      w.Sample({{"tenant", t.name}}, static_cast<double>(t.inflight));
    }
    w.BeginFamily("kiln_tenant_generated_tokens_total", T::kCounter,
                  "Tokens generated for the tenant (charged to its tokens_per_second limit)");
    for (const SystemMetrics::Tenant& t : system.tenants) {
      w.Sample({{"tenant", t.name}}, static_cast<double>(t.generated_tokens));
    }
  }
  if (system.cpu_utilization) {
    w.BeginFamily("nv_cpu_utilization", T::kGauge,
                  "CPU utilization rate [0.0 - 1.0] since the previous scrape");
    w.Sample({}, *system.cpu_utilization);
  }
  if (system.memory) {
    w.BeginFamily("nv_cpu_memory_total_bytes", T::kGauge, "CPU total memory (RAM), in bytes");
    w.Sample({}, static_cast<double>(system.memory->total_bytes));
    w.BeginFamily("nv_cpu_memory_used_bytes", T::kGauge,
                  "CPU used memory (RAM), in bytes (total - available)");
    w.Sample({}, static_cast<double>(system.memory->used_bytes));
  }

  // GPU families (NVML), one sample per GPU labelled with its UUID, as the reference server's.
  auto gpu_family = [&](const char* name, const char* help, auto value) {
    bool begun = false;
    for (const GpuReading& g : system.gpus) {
      const std::optional<double> v = value(g);
      if (!v) continue;
      if (!begun) w.BeginFamily(name, T::kGauge, help);
      begun = true;
      w.Sample({{"gpu_uuid", g.uuid}}, *v);
    }
  };
  gpu_family("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)",
             [](const GpuReading& g) { return g.utilization; });
  gpu_family("nv_gpu_memory_total_bytes", "GPU total memory, in bytes",
             [](const GpuReading& g) -> std::optional<double> {
               if (!g.memory_total_bytes) return std::nullopt;
               return static_cast<double>(*g.memory_total_bytes);
             });
  gpu_family("nv_gpu_memory_used_bytes", "GPU used memory, in bytes",
             [](const GpuReading& g) -> std::optional<double> {
               if (!g.memory_used_bytes) return std::nullopt;
               return static_cast<double>(*g.memory_used_bytes);
             });
  gpu_family("nv_gpu_power_usage", "GPU power usage in watts",
             [](const GpuReading& g) { return g.power_watts; });

  // kiln's own families.
  PerModelHistogram(
      w, models, "kiln_request_duration_seconds",
      "Time from arrival to response of successful requests, in seconds",
      [](const ModelMetrics& m) -> const Histogram& { return m.stats.request_seconds; });
  PerModelHistogram(
      w, models, "kiln_queue_duration_seconds",
      "Time successful requests waited in the scheduler queue, in seconds",
      [](const ModelMetrics& m) -> const Histogram& { return m.stats.queue_seconds; });
  PerModelHistogram(
      w, models, "kiln_compute_duration_seconds",
      "Compute time (input + infer + output) of the batch each successful request ran in, in "
      "seconds",
      [](const ModelMetrics& m) -> const Histogram& { return m.stats.compute_seconds; });
  PerModelHistogram(w, models, "kiln_batch_size",
                    "Batch size of each model execution, in batch elements",
                    [](const ModelMetrics& m) -> const Histogram& { return m.stats.batch_size; });
  PerModel(w, models, "kiln_queue_depth", T::kGauge,
           "Requests queued in the scheduler and not yet started on an instance",
           [](const ModelMetrics& m) { return static_cast<double>(m.pending_requests); });
  w.BeginFamily("kiln_requests_rejected_total", T::kCounter,
                "Requests refused before they ran, by reason");
  for (const ModelMetrics& m : models) {
    const std::string version = std::to_string(m.version);
    for (FailureReason r : kRejectionReasons) {
      w.Sample({{"model", m.name}, {"version", version}, {"reason", FailureReasonName(r)}},
               static_cast<double>(m.stats.failures[static_cast<size_t>(r)]));
    }
  }
  RenderGenerationMetrics(w, models);
  RenderEnsembleStepMetrics(w, models);
  RenderRolloutMetrics(w, models);
  PerModel(w, models, "kiln_model_weight_bytes", T::kGauge,
           "Bytes of model weights (graph initializers) held in memory",
           [](const ModelMetrics& m) { return static_cast<double>(m.weight_bytes); });
  if (system.process_rss_bytes) {
    w.BeginFamily("kiln_process_resident_memory_bytes", T::kGauge,
                  "Resident set size of the kiln process, in bytes");
    w.Sample({}, static_cast<double>(*system.process_rss_bytes));
  }
  return std::move(w).Take();
}

}  // namespace kiln
