// SPDX-License-Identifier: Apache-2.0
// Statistics JSON writer; see stats_json.h.
#include "server/http/stats_json.h"

#include "server/json_writer.h"

namespace kiln {
namespace {

void WriteDuration(JsonWriter* w, std::string_view key, const StatDuration& d) {
  w->Key(key);
  w->BeginObject();
  w->Key("count");
  w->Uint(d.count);
  w->Key("ns");
  w->Uint(d.ns);
  w->EndObject();
}

void WriteUint(JsonWriter* w, std::string_view key, uint64_t value) {
  w->Key(key);
  w->Uint(value);
}

}  // namespace

std::string ModelStatisticsJson(std::span<const ModelStatisticsEntry> entries) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("model_stats");
  w.BeginArray();
  for (const ModelStatisticsEntry& e : entries) {
    const ModelStatistics& s = e.stats;
    w.BeginObject();
    w.KeyString("name", e.name);
    w.KeyString("version", std::to_string(e.version));
    WriteUint(&w, "last_inference", s.last_inference_ms);
    WriteUint(&w, "inference_count", s.inference_count);
    WriteUint(&w, "execution_count", s.execution_count);
    w.Key("inference_stats");
    w.BeginObject();
    WriteDuration(&w, "success", s.inference.success);
    WriteDuration(&w, "fail", s.inference.fail);
    WriteDuration(&w, "queue", s.inference.queue);
    WriteDuration(&w, "compute_input", s.inference.compute_input);
    WriteDuration(&w, "compute_infer", s.inference.compute_infer);
    WriteDuration(&w, "compute_output", s.inference.compute_output);
    WriteDuration(&w, "cache_hit", s.inference.cache_hit);
    WriteDuration(&w, "cache_miss", s.inference.cache_miss);
    w.EndObject();
    w.Key("response_stats");
    w.BeginObject();
    w.EndObject();
    w.Key("batch_stats");
    w.BeginArray();
    for (const auto& [batch_size, b] : s.batches) {
      w.BeginObject();
      WriteUint(&w, "batch_size", batch_size);
      WriteDuration(&w, "compute_input", b.compute_input);
      WriteDuration(&w, "compute_infer", b.compute_infer);
      WriteDuration(&w, "compute_output", b.compute_output);
      w.EndObject();
    }
    w.EndArray();
    w.Key("memory_usage");
    w.BeginArray();
    w.EndArray();
    if (!s.ensemble_steps.empty()) {
      w.Key("ensemble_steps");
      w.BeginArray();
      for (const EnsembleStepStatistics& step : s.ensemble_steps) {
        w.BeginObject();
        WriteUint(&w, "step", static_cast<uint64_t>(step.step));
        w.KeyString("model", step.model);
        w.KeyString("model_version", std::to_string(step.model_version));
        WriteDuration(&w, "success", step.success);
        WriteDuration(&w, "fail", step.fail);
        WriteDuration(&w, "queue", step.queue);
        WriteDuration(&w, "compute_input", step.compute_input);
        WriteDuration(&w, "compute_infer", step.compute_infer);
        WriteDuration(&w, "compute_output", step.compute_output);
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace kiln
