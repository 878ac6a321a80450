// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/metrics_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelMetrics SampleModel() {
  StatsCollector c;
  c.RecordExecution(2, 1000, 2000, 3000);
  c.RecordSuccess(1, 500'000, 1000, 2000, 3000, 1'000'000, 1);
  c.RecordSuccess(1, 700'000, 1000, 2000, 3000, 2'000'000, 1);
  c.RecordFailure(FailureReason::kQueueFull, 0, 1);
  c.RecordFailure(FailureReason::kTimeout, 9, 1);
  c.RecordFailure(FailureReason::kInvalid, 0, 1);
  c.RecordFailure(FailureReason::kBackend, 0, 1);
  ModelMetrics m;
  m.name = "add_sub";
  m.version = 3;
  m.stats = c.Snapshot();
  m.pending_requests = 4;
  m.load_duration_seconds = 0.5;
  m.weight_bytes = 1024;
  return m;
}

TEST(MetricsReport, ReferenceFamiliesCarryModelAndVersion) {
  const std::vector<ModelMetrics> models = {SampleModel()};
  const std::string text = RenderMetrics(models, {});
  const std::string l = "{model=\"add_sub\",version=\"3\"}";
  EXPECT_THAT(text, HasSubstr("# TYPE nv_inference_request_success counter\n"
                              "nv_inference_request_success" +
                              l + " 2\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_count" + l + " 2\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_exec_count" + l + " 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE nv_inference_pending_request_count gauge\n"
                              "nv_inference_pending_request_count" +
                              l + " 4\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_duration_us" + l + " 3000\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_queue_duration_us" + l + " 1200\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_compute_input_duration_us" + l + " 2\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_compute_infer_duration_us" + l + " 4\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_compute_output_duration_us" + l + " 6\n"));
  EXPECT_THAT(text, HasSubstr("nv_model_load_duration_secs" + l + " 0.5\n"));
  EXPECT_THAT(text, HasSubstr("kiln_model_weight_bytes" + l + " 1024\n"));
  EXPECT_THAT(text, HasSubstr("kiln_queue_depth" + l + " 4\n"));
}

TEST(MetricsReport, FailureReasonsArePreCreatedAndMapped) {
  const std::vector<ModelMetrics> models = {SampleModel()};
  const std::string text = RenderMetrics(models, {});
  const std::string l = "{model=\"add_sub\",version=\"3\",reason=";
  EXPECT_THAT(text, HasSubstr("nv_inference_request_failure" + l + "\"REJECTED\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_failure" + l + "\"CANCELED\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_failure" + l + "\"BACKEND\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_request_failure" + l + "\"OTHER\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_requests_rejected_total" + l + "\"queue_full\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_requests_rejected_total" + l + "\"timeout\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_requests_rejected_total" + l + "\"shutting_down\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("kiln_requests_rejected_total" + l + "\"invalid\"} 1\n"));
  EXPECT_EQ(ReferenceFailureReason(FailureReason::kShuttingDown), "REJECTED");
  EXPECT_EQ(ReferenceFailureReason(FailureReason::kOther), "OTHER");
}

TEST(MetricsReport, HistogramsAndSystemGauges) {
  const std::vector<ModelMetrics> models = {SampleModel()};
  SystemMetrics system;
  system.cpu_utilization = 0.25;
  system.memory = MemoryInfo{1000, 400};
  system.process_rss_bytes = 123;
  const std::string text = RenderMetrics(models, system);
  const std::string l = "model=\"add_sub\",version=\"3\"";
  // Requests of 1 ms and 2 ms: one in the 1 ms bucket, both by 2.5 ms.
  EXPECT_THAT(text, HasSubstr("kiln_request_duration_seconds_bucket{" + l +
                              ",le=\"0.0005\"} 0\n"
                              "kiln_request_duration_seconds_bucket{" +
                              l +
                              ",le=\"0.001\"} 1\n"
                              "kiln_request_duration_seconds_bucket{" +
                              l + ",le=\"0.0025\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("kiln_request_duration_seconds_bucket{" + l +
                              ",le=\"+Inf\"} 2\n"
                              "kiln_request_duration_seconds_sum{" +
                              l +
                              "} 0.003\n"
                              "kiln_request_duration_seconds_count{" +
                              l + "} 2\n"));
  EXPECT_THAT(text, HasSubstr("kiln_batch_size_bucket{" + l +
                              ",le=\"1\"} 0\n"
                              "kiln_batch_size_bucket{" +
                              l + ",le=\"2\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_batch_size_count{" + l + "} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_queue_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_compute_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("nv_cpu_utilization 0.25\n"));
  EXPECT_THAT(text, HasSubstr("nv_cpu_memory_total_bytes 1000\n"));
  EXPECT_THAT(text, HasSubstr("nv_cpu_memory_used_bytes 400\n"));
  EXPECT_THAT(text, HasSubstr("kiln_process_resident_memory_bytes 123\n"));
}

TEST(MetricsReport, NoModelsStillDescribesEveryFamilyAndLeavesOutUnknownSystemFigures) {
  const std::string text = RenderMetrics({}, {});
  EXPECT_THAT(text, HasSubstr("# TYPE nv_inference_request_success counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_batch_size histogram\n"));
  EXPECT_THAT(text, Not(HasSubstr("nv_cpu_utilization")));
  EXPECT_THAT(text, Not(HasSubstr("kiln_process_resident_memory_bytes")));
  EXPECT_THAT(text, Not(HasSubstr("nv_gpu_")));
  EXPECT_THAT(text, Not(HasSubstr("nv_cache_")));
  EXPECT_THAT(text, Not(HasSubstr("kiln_trace_")));
}

TEST(MetricsReport, TracingCounters) {
  SystemMetrics system;
  system.tracing = SystemMetrics::Tracing{40, 6, 9};
  const std::string text = RenderMetrics({}, system);
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_trace_spans_exported_total counter\n"
                              "kiln_trace_spans_exported_total 40\n"));
  EXPECT_THAT(text, HasSubstr("kiln_trace_spans_dropped_total 6\n"));
  EXPECT_THAT(text, HasSubstr("kiln_trace_traces_total 9\n"));
}

TEST(MetricsReport, TenantFamilies) {
  SystemMetrics system;
  system.tenants.push_back({"acme", 7, 0, 1, 2, 3, 120});
  system.tenants.push_back({"anonymous", 4, 5, 0, 0, 0, 0});
  const std::string text = RenderMetrics({}, system);
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_tenant_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("kiln_tenant_requests_total{tenant=\"acme\",outcome=\"ok\"} 7\n"));
  EXPECT_THAT(text,
              HasSubstr("kiln_tenant_requests_total{tenant=\"acme\",outcome=\"forbidden\"} 1\n"));
  EXPECT_THAT(
      text, HasSubstr("kiln_tenant_requests_total{tenant=\"acme\",outcome=\"rate_limited\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("kiln_tenant_requests_total{tenant=\"anonymous\",outcome="
                              "\"unauthenticated\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("kiln_tenant_inflight{tenant=\"acme\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("kiln_tenant_generated_tokens_total{tenant=\"acme\"} 120\n"));
  EXPECT_THAT(RenderMetrics({}, {}), Not(HasSubstr("kiln_tenant_")));
}

// One sample per GPU, labelled with its UUID; a figure NVML refused leaves its sample out, and a
// family with no sample at all is left out.
TEST(MetricsReport, GpuFamiliesPerGpu) {
  SystemMetrics system;
  GpuReading a;
  a.uuid = "GPU-aaaa";
  a.utilization = 0.5;
  a.memory_total_bytes = 1000;
  a.memory_used_bytes = 250;
  a.power_watts = 123.5;
  GpuReading b;
  b.uuid = "GPU-bbbb";
  b.memory_total_bytes = 2000;
  b.memory_used_bytes = 0;
  system.gpus = {a, b};
  const std::string text = RenderMetrics({}, system);
  EXPECT_THAT(text, HasSubstr("# TYPE nv_gpu_utilization gauge\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_utilization{gpu_uuid=\"GPU-aaaa\"} 0.5\n"));
  EXPECT_THAT(text, Not(HasSubstr("nv_gpu_utilization{gpu_uuid=\"GPU-bbbb\"}")));
  EXPECT_THAT(text, HasSubstr("nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-bbbb\"} 2000\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-aaaa\"} 250\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_power_usage{gpu_uuid=\"GPU-aaaa\"} 123.5\n"));
  system.gpus = {b};
  EXPECT_THAT(RenderMetrics({}, system), Not(HasSubstr("nv_gpu_power_usage")));
}

// Response cache families: per model only for the versions that use the cache (as the
// reference), in counts and whole microseconds; the server-wide gauges only with a cache.
TEST(MetricsReport, ResponseCacheFamilies) {
  StatsCollector c;
  c.RecordExecution(1, 1000, 2000, 3000);
  c.RecordSuccess(1, 500, 1000, 2000, 3000, 10'000, 1);
  c.RecordCacheMiss(2'600);
  c.RecordCacheHit(1'900, 2'500, 2);
  c.RecordCacheHit(3'300, 4'000, 3);
  ModelMetrics cached;
  cached.name = "digits";
  cached.version = 1;
  cached.stats = c.Snapshot();
  cached.stats.response_cache = true;
  const std::vector<ModelMetrics> models = {cached, SampleModel()};  // add_sub: no cache

  std::string text = RenderMetrics(models, {});
  const std::string l = "{model=\"digits\",version=\"1\"}";
  EXPECT_THAT(text, HasSubstr("# TYPE nv_cache_num_hits_per_model counter\n"
                              "nv_cache_num_hits_per_model" +
                              l + " 2\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE nv_cache_num_misses_per_model counter\n"
                              "nv_cache_num_misses_per_model" +
                              l + " 1\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_hit_duration_per_model" + l + " 5\n"));  // 5.2 us
  EXPECT_THAT(text, HasSubstr("nv_cache_miss_duration_per_model" + l + " 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("nv_cache_num_hits_per_model{model=\"add_sub\"")));
  // Hits are successes; inferences and executions exclude them.
  EXPECT_THAT(text, HasSubstr("nv_inference_request_success" + l + " 3\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_count" + l + " 1\n"));
  EXPECT_THAT(text, HasSubstr("nv_inference_exec_count" + l + " 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("nv_cache_num_entries")));

  SystemMetrics system;
  ResponseCacheStats s;
  s.capacity_bytes = 1000;
  s.used_bytes = 250;
  s.entries = 2;
  s.lookups = 9;
  s.hits = 5;
  s.misses = 4;
  s.insertions = 3;
  s.evictions = 1;
  s.oversize = 7;
  s.lookup_ns = 12'999;
  s.insertion_ns = 4'000;
  system.response_cache = s;
  text = RenderMetrics({}, system);
  EXPECT_THAT(text, Not(HasSubstr("_per_model")));
  EXPECT_THAT(text, HasSubstr("# TYPE nv_cache_num_entries gauge\nnv_cache_num_entries 2\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_num_lookups 9\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_num_hits 5\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_num_misses 4\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_num_evictions 1\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_lookup_duration 12\n"));
  EXPECT_THAT(text, HasSubstr("nv_cache_insertion_duration 4\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE nv_cache_util gauge\nnv_cache_util 0.25\n"));
  EXPECT_THAT(text, HasSubstr("kiln_response_cache_used_bytes 250\n"));
  EXPECT_THAT(text, HasSubstr("kiln_response_cache_capacity_bytes 1000\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_response_cache_oversize_total counter\n"
                              "kiln_response_cache_oversize_total 7\n"));
}

TEST(MetricsReport, EnsembleStepFamilies) {
  StatsCollector c;
  EnsembleStepStatistics pre;
  pre.model = "preprocess";
  EnsembleStepStatistics cls;
  cls.step = 1;
  cls.model = "classifier";
  c.SetEnsembleSteps({pre, cls});
  c.RecordStepSuccess(0, 2'000'000, 500'000, 1'000, 1'250'000'000, 3'000);
  c.RecordStepSuccess(0, 1'000'000, 250'000, 1'000, 250'000'000, 3'000);
  c.RecordStepFailure(0, 7);
  c.RecordStepSuccess(1, 4'000'000, 0, 0, 2'000'000, 0);
  ModelMetrics pipe;
  pipe.name = "pipe";
  pipe.version = 2;
  pipe.stats = c.Snapshot();
  const std::vector<ModelMetrics> models = {SampleModel(), pipe};
  const std::string text = RenderMetrics(models, {});
  const std::string s0 = "{model=\"pipe\",version=\"2\",step=\"0\",step_model=\"preprocess\"}";
  const std::string s1 = "{model=\"pipe\",version=\"2\",step=\"1\",step_model=\"classifier\"}";
  EXPECT_THAT(text, HasSubstr("# TYPE kiln_ensemble_step_success_total counter\n"
                              "kiln_ensemble_step_success_total" +
                              s0 + " 2\nkiln_ensemble_step_success_total" + s1 + " 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_failure_total" + s0 + " 1\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_failure_total" + s1 + " 0\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_duration_seconds_total" + s0 + " 0.003\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_duration_seconds_total" + s1 + " 0.004\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_queue_seconds_total" + s0 + " 0.00075\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_compute_input_seconds_total" + s0 + " 2e-06\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_compute_infer_seconds_total" + s0 + " 1.5\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_compute_infer_seconds_total" + s1 + " 0.002\n"));
  EXPECT_THAT(text, HasSubstr("kiln_ensemble_step_compute_output_seconds_total" + s0 + " 6e-06\n"));
  // Only the ensemble has step series.
  EXPECT_THAT(text, Not(HasSubstr("kiln_ensemble_step_success_total{model=\"add_sub\"")));
  // No ensemble, no step families.
  const std::vector<ModelMetrics> plain = {SampleModel()};
  EXPECT_THAT(RenderMetrics(plain, {}), Not(HasSubstr("kiln_ensemble_step")));
}

// Without NVML there are no GPU readings, and that is not an error.
TEST(GpuMetricsReader, MissingLibraryMeansNoGpus) {
  GpuMetricsReader reader("libkiln-no-such-nvml.so.1");
  EXPECT_FALSE(reader.available());
  EXPECT_FALSE(reader.why_not().empty());
  EXPECT_TRUE(reader.Read().empty());
}

}  // namespace
}  // namespace kiln
