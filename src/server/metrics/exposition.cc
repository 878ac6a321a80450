// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/exposition.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "base/check.h"

namespace kiln {
namespace {

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string EscapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || !(IsAlpha(name[0]) || name[0] == ':')) return false;
  for (char c : name) {
    if (!(IsAlpha(c) || IsDigit(c) || c == ':')) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || !IsAlpha(name[0]) || name.starts_with("__")) return false;
  for (char c : name) {
    if (!(IsAlpha(c) || IsDigit(c))) return false;
  }
  return true;
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (v == std::floor(v) && std::fabs(v) < kExactIntegers) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);  // shortest round-trip form, locale-independent
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void ExpositionWriter::BeginFamily(std::string_view name, MetricType type, std::string_view help) {
  KILN_CHECK(IsValidMetricName(name), "invalid metric name '", name, "'");
  KILN_CHECK(families_.insert(std::string(name)).second, "metric family '", name,
             "' written twice");
  family_ = name;
  type_ = type;
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(help),
                 name, TypeName(type));
}

void ExpositionWriter::WriteSeries(std::string_view suffix,
                                   std::initializer_list<MetricLabel> labels,
                                   const MetricLabel* extra, double value) {
  out_ += family_;
  out_ += suffix;
  if (labels.size() > 0 || extra != nullptr) {
    out_ += '{';
    bool first = true;
    const auto add = [&](const MetricLabel& l) {
      KILN_CHECK(IsValidLabelName(l.name), "invalid label name '", l.name, "'");
      if (!first) out_ += ',';
      first = false;
      out_ += l.name;
      out_ += "=\"";
      out_ += EscapeLabelValue(l.value);
      out_ += '"';
    };
    for (const MetricLabel& l : labels) add(l);
    if (extra != nullptr) add(*extra);
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatMetricValue(value);
  out_ += '\n';
}

void ExpositionWriter::Sample(std::initializer_list<MetricLabel> labels, double value) {
  KILN_CHECK(!family_.empty(), "metric sample before any family");
  KILN_CHECK(type_ != MetricType::kHistogram, "plain sample in histogram family '", family_, "'");
  WriteSeries("", labels, nullptr, value);
}

void ExpositionWriter::HistogramSample(std::initializer_list<MetricLabel> labels,
                                       const Histogram& h) {
  KILN_CHECK(type_ == MetricType::kHistogram && !family_.empty(), "histogram sample in family '",
             family_, "', which is not a histogram");
  for (const MetricLabel& l : labels) {
    KILN_CHECK(l.name != "le", "a histogram series may not have a label 'le'");
  }
  KILN_CHECK(h.counts.size() == h.bounds.size() + 1, "histogram with ", h.bounds.size(),
             " bounds and ", h.counts.size(), " counts");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    const std::string le = FormatMetricValue(h.bounds[i]);
    const MetricLabel bound{"le", le};
    WriteSeries("_bucket", labels, &bound, static_cast<double>(cumulative));
  }
  cumulative += h.counts.back();
  const MetricLabel inf{"le", "+Inf"};
  WriteSeries("_bucket", labels, &inf, static_cast<double>(cumulative));
  WriteSeries("_sum", labels, nullptr, h.sum);
  WriteSeries("_count", labels, nullptr, static_cast<double>(h.count));
}

}  // namespace kiln
