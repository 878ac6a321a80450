// SPDX-License-Identifier: Apache-2.0
#pragma once
// Request tracing (docs/tracing.md): OpenTelemetry spans exported over OTLP/HTTP (JSON) in
// batches, or the reference server's file mode (one JSON document of timestamps per trace), with
// the W3C `traceparent` of HTTP headers and gRPC metadata taken as the parent. Settings follow
// the reference server's `--trace-config` and its trace extension (/v2/trace/setting), and
// change at run time.
//
//   TraceSettings s;
//   KILN_RETURN_IF_ERROR(ApplyTraceConfig("mode=opentelemetry", &s));
//   KILN_RETURN_IF_ERROR(ApplyTraceConfig("opentelemetry,url=localhost:4318/v1/traces", &s));
//   KILN_RETURN_IF_ERROR(Tracer::Global().Configure(s));
//   std::shared_ptr<RequestTrace> t = Tracer::Global().StartRequest("m", 1, id, traceparent);
//   ... if (t) t->End(status, &response.timing, &response.step_timings);
//
// A traced request gives the spans
//   "<model> request" (SERVER; the child of the client's traceparent when it sent a valid one)
//     "queue"                       arrival to dispatch
//     "compute"                     with "compute_input", "compute_infer", "compute_output"
//     "step N <model>" per ensemble step that ran, each with its own queue and compute
//     (a generation request, TraceGeneration: "queue", "prefill", "decode" instead)
// placed from the request's RequestTiming (sched/request.h): the phases are durations, laid end
// to end from the request's start. Attributes: kiln.model, kiln.model_version, kiln.request_id,
// and the error message on a failed request (status ERROR).
//
// Sampling: with trace_level TIMESTAMPS, a request whose traceparent says "sampled" is traced;
// otherwise 1 in `rate` requests are, while `count` (when not -1) lasts. trace_level OFF traces
// nothing (one atomic load per request).
//
// Exporting never blocks a request: finished traces go to a bounded queue (max_queue_size spans)
// that one background thread drains, in batches of max_export_batch_size or every
// schedule_delay_ms; spans that find the queue full, or whose export fails, are dropped and
// counted (spans_dropped, the metric kiln_trace_spans_dropped_total).
//
// Thread safety: every function and method may be called from any thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sched/gen_request.h"
#include "sched/request.h"

namespace kiln {

struct TraceSettings {
  enum class Level : uint8_t { kOff, kTimestamps };
  enum class Mode : uint8_t { kTriton, kOpenTelemetry };
  Level level = Level::kOff;
  Mode mode = Mode::kTriton;
  int64_t rate = 1000;        // trace 1 in `rate` requests (>= 1)
  int64_t count = -1;         // traces still to take; -1: no limit
  int64_t log_frequency = 0;  // file mode: flush the file every N traces (0: every trace)
  std::string file;           // file mode: where the traces go (JSON lines)
  std::string url = "http://localhost:4318/v1/traces";  // OTLP/HTTP endpoint
  // OpenTelemetry resource attributes (service.name is "kiln" unless set).
  std::vector<std::pair<std::string, std::string>> resource;
  size_t max_queue_size = 2048;        // spans waiting for export
  size_t max_export_batch_size = 512;  // spans per export
  int64_t schedule_delay_ms = 5000;    // longest wait before exporting what is queued
};

// Applies one `--trace-config` value to *s, as the reference server reads them:
//   level=OFF|TIMESTAMPS  rate=N  count=N  mode=triton|opentelemetry
//   triton,file=PATH  triton,log-frequency=N
//   opentelemetry,url=[http://]HOST:PORT/PATH  opentelemetry,resource=KEY=VALUE
//   opentelemetry,bsp_max_queue_size=N  opentelemetry,bsp_max_export_batch_size=N
//   opentelemetry,bsp_schedule_delay=MS
// (global settings also accept the mode prefix). INVALID_ARGUMENT naming the value otherwise.
Status ApplyTraceConfig(std::string_view flag, TraceSettings* s);

// The trace extension's settings (/v2/trace/setting, gRPC TraceSetting) by name, values as
// strings: trace_level (["OFF"] or ["TIMESTAMPS"]), trace_rate, trace_count, log_frequency,
// trace_file, trace_mode (read only).
using TraceSettingFields = std::vector<std::pair<std::string, std::vector<std::string>>>;
TraceSettingFields TraceSettingsAsFields(const TraceSettings& s);
// Applies a client's update (name -> values; no values: leave the setting as it is) to *s. An
// unknown setting, a malformed or out-of-range value, or a change of trace_mode is
// INVALID_ARGUMENT naming the setting, and *s is left unchanged.
Status UpdateTraceSettings(const TraceSettingFields& update, TraceSettings* s);

// A W3C trace context (version 00).
struct TraceParent {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  bool sampled = false;
};
// The context of a `traceparent` header, or nullopt when it is malformed (a wrong length,
// non-hex or upper-case digits, version ff, an all-zero trace or span id); a malformed header is
// ignored and the request starts a new trace, as the W3C rules say.
std::optional<TraceParent> ParseTraceParent(std::string_view header);
std::string FormatTraceParent(const TraceParent& p);

class Tracer;

// One traced request, from StartRequest to End (exactly once; a trace dropped without End is
// not exported).
class RequestTrace {
 public:
  // Ends the request: its spans go to the exporter. `timing` and `steps` may be null (unknown).
  void End(const Status& status, const RequestTiming* timing, const std::vector<StepTiming>* steps);
  // Ends a generation request: "queue", "prefill" and "decode" spans from `timing` (may be null).
  void EndGeneration(const Status& status, const GenTiming* timing);
  const std::array<uint8_t, 16>& trace_id() const { return trace_id_; }

 private:
  friend class Tracer;
  RequestTrace() = default;
  Tracer* tracer_ = nullptr;
  std::array<uint8_t, 16> trace_id_{};
  std::array<uint8_t, 8> parent_span_{};  // the client's span, or zeros
  bool has_parent_ = false;
  std::string model;
  int64_t version = 0;
  std::string request_id;
  int64_t start_unix_ns = 0;
  int64_t start_steady_ns = 0;
  std::atomic<bool> ended_{false};
};

class Tracer {
 public:
  // The process's tracer (kiln serve configures it from --trace-config; starts OFF).
  static Tracer& Global();
  Tracer();
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Validates and applies `settings` (rate >= 1, count >= -1, log_frequency >= 0, a file in file
  // mode when tracing is on, an http URL in OpenTelemetry mode, queue and batch sizes >= 1):
  // INVALID_ARGUMENT naming the setting, and nothing changes. Starts the export thread when
  // needed; traces queued under the old settings are still exported.
  Status Configure(TraceSettings settings);
  TraceSettings settings() const;

  // A new trace when this request is sampled (see the file comment), else null.
  std::shared_ptr<RequestTrace> StartRequest(std::string_view model, int64_t version,
                                             std::string_view request_id,
                                             std::string_view traceparent);

  // Exports what is queued and stops the export thread (kiln serve at exit; Configure restarts
  // it). Waits at most for one export.
  void Shutdown();

  uint64_t spans_exported() const { return spans_exported_.load(std::memory_order_relaxed); }
  uint64_t spans_dropped() const { return spans_dropped_.load(std::memory_order_relaxed); }
  uint64_t traces_started() const { return traces_started_.load(std::memory_order_relaxed); }

  struct State;  // trace.cc

 private:
  friend class RequestTrace;
  void Submit(RequestTrace& trace, const Status& status, const RequestTiming* timing,
              const std::vector<StepTiming>* steps, const GenTiming* generation);

  std::unique_ptr<State> state_;
  std::atomic<bool> on_{false};
  std::atomic<uint64_t> spans_exported_{0};
  std::atomic<uint64_t> spans_dropped_{0};
  std::atomic<uint64_t> traces_started_{0};
};

// A generation request's sink (the OpenAI and generate APIs, kiln batch): wrapped, when the
// global tracer samples this request, so that its Finish ends the request's trace; otherwise
// `sink` itself.
std::shared_ptr<GenerationSink> TraceGeneration(std::shared_ptr<GenerationSink> sink,
                                                std::string_view model, int64_t version,
                                                std::string_view request_id,
                                                std::string_view traceparent);

}  // namespace kiln
