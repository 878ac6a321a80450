// SPDX-License-Identifier: Apache-2.0
#pragma once
// ExpositionWriter: writes the Prometheus text exposition format, version 0.0.4 (what
// `GET /metrics` answers with Content-Type kExpositionContentType).
//
//   ExpositionWriter w;
//   w.BeginFamily("nv_inference_count", MetricType::kCounter, "Number of inferences");
//   w.Sample({{"model", "resnet"}, {"version", "1"}}, 42);
//   w.BeginFamily("kiln_request_duration_seconds", MetricType::kHistogram, "Request time");
//   w.HistogramSample({{"model", "resnet"}, {"version", "1"}}, histogram);
//   std::string body = std::move(w).Take();
//
// Each family is written as `# HELP`, `# TYPE`, then its samples, so every sample follows the
// TYPE line of its family. A histogram becomes `<name>_bucket{...,le="<bound>"}` with
// cumulative counts (the last one `le="+Inf"`, equal to `_count`), `<name>_sum` and
// `<name>_count`. Label values are escaped (backslash, double quote, newline), HELP text too
// (backslash, newline). Numbers: integral values below 2^53 in plain decimal ("42"), others in
// the shortest form that reads back exactly ("0.25", "5e-05"), and "+Inf", "-Inf", "NaN";
// never locale-dependent.
//
// Metric and label names are constants of the program: an invalid name, a family begun twice,
// or a sample before any family is a bug (KILN_CHECK), not an error.
//
// Thread safety: none; one writer per scrape.

#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include "sched/stats.h"

namespace kiln {

inline constexpr std::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

struct MetricLabel {
  std::string_view name;
  std::string_view value;
};

class ExpositionWriter {
 public:
  // Starts family `name` (REQUIRES: a valid metric name, not begun before in this writer).
  void BeginFamily(std::string_view name, MetricType type, std::string_view help);
  // One counter or gauge sample of the current family. REQUIRES: the family is not a histogram.
  void Sample(std::initializer_list<MetricLabel> labels, double value);
  // One histogram series of the current family. REQUIRES: the family is a histogram and no
  // label is named "le".
  void HistogramSample(std::initializer_list<MetricLabel> labels, const Histogram& h);

  const std::string& text() const { return out_; }
  std::string Take() && { return std::move(out_); }

 private:
  void WriteSeries(std::string_view suffix, std::initializer_list<MetricLabel> labels,
                   const MetricLabel* extra, double value);

  std::string out_;
  std::string family_;
  MetricType type_ = MetricType::kCounter;
  std::set<std::string, std::less<>> families_;
};

// "+Inf", "-Inf", "NaN", plain integers below 2^53, otherwise the shortest exact form.
std::string FormatMetricValue(double v);
// Escapes backslash, double quote and newline for a label value.
std::string EscapeLabelValue(std::string_view value);
// [a-zA-Z_:][a-zA-Z0-9_:]* / [a-zA-Z_][a-zA-Z0-9_]* (label names starting "__" are reserved).
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);

}  // namespace kiln
