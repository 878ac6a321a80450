// SPDX-License-Identifier: Apache-2.0
#include "bench/gen_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/check.h"

namespace kiln::bench {
namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

RequestMetrics MetricsOf(const GenRecord& r) {
  RequestMetrics m;
  if (!r.ok || r.chunk_ns.empty()) return m;
  m.ok = true;
  m.output_tokens =
      r.completion_tokens >= 0 ? r.completion_tokens : static_cast<int64_t>(r.chunk_ns.size());
  m.input_tokens = r.prompt_tokens >= 0 ? r.prompt_tokens : r.dataset_input_tokens;
  m.ttft_ms = Ms(r.chunk_ns.front() - r.send_ns);
  m.e2el_ms = Ms(r.done_ns - r.send_ns);
  if (m.output_tokens > 1) {
    m.tpot_ms = (m.e2el_ms - m.ttft_ms) / static_cast<double>(m.output_tokens - 1);
  }
  m.send_delay_ms = Ms(r.send_ns - r.intended_ns);
  return m;
}

Result<GoodputSlo> ParseGoodput(const std::vector<std::string>& values) {
  GoodputSlo slo;
  for (const std::string& v : values) {
    size_t colon = v.find(':');
    std::string name = v.substr(0, colon);
    double* target = name == "ttft"   ? &slo.ttft_ms
                     : name == "tpot" ? &slo.tpot_ms
                     : name == "e2el" ? &slo.e2el_ms
                                      : nullptr;
    if (colon == std::string::npos || target == nullptr) {
      return Status::InvalidArgument(
          fmt::format("--goodput '{}': expected ttft:MS, tpot:MS or e2el:MS (milliseconds)", v));
    }
    double ms = -1;
    const char* begin = v.data() + colon + 1;
    const char* end = v.data() + v.size();
    auto [ptr, ec] = std::from_chars(begin, end, ms);
    if (ec != std::errc() || ptr != end || !(ms >= 0) || !std::isfinite(ms)) {
      return Status::InvalidArgument(
          fmt::format("--goodput '{}': the SLO must be a number of milliseconds >= 0", v));
    }
    if (*target >= 0) {
      return Status::InvalidArgument(fmt::format("--goodput: {} given twice", name));
    }
    *target = ms;
  }
  return slo;
}

double PercentileLinear(std::span<const double> sorted, double p) {
  KILN_CHECK(!sorted.empty(), "percentile of no samples");
  KILN_CHECK(p >= 0 && p <= 100, "percentile out of range");
  double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

MetricSummary SummarizeMs(std::vector<double>& ms) {
  MetricSummary s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  s.count = ms.size();
  s.mean_ms = sum / static_cast<double>(ms.size());
  double sq = 0;
  for (double v : ms) sq += (v - s.mean_ms) * (v - s.mean_ms);
  s.std_ms = std::sqrt(sq / static_cast<double>(ms.size()));
  s.median_ms = PercentileLinear(ms, 50);
  s.p90_ms = PercentileLinear(ms, 90);
  s.p99_ms = PercentileLinear(ms, 99);
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  return s;
}

GenMetrics ComputeGenMetrics(std::span<const GenRecord> records, double duration_s,
                             const GoodputSlo& slo) {
  KILN_CHECK(records.empty() || duration_s > 0, "metrics over a run without duration");
  GenMetrics m;
  m.duration_s = duration_s;
  m.goodput_given = slo.any();
  std::vector<double> ttft, tpot, itl, e2el, delay;
  for (const GenRecord& r : records) {
    RequestMetrics q = MetricsOf(r);
    if (!q.ok) {
      ++m.failed;
      ++m.errors_by_kind[r.error_kind.empty() ? "error" : r.error_kind];
      if (m.first_error.empty()) m.first_error = r.error;
      continue;
    }
    ++m.completed;
    m.total_output_tokens += q.output_tokens;
    m.total_input_tokens += q.input_tokens;
    ttft.push_back(q.ttft_ms);
    e2el.push_back(q.e2el_ms);
    delay.push_back(q.send_delay_ms);
    if (q.tpot_ms >= 0) tpot.push_back(q.tpot_ms);
    for (size_t i = 1; i < r.chunk_ns.size(); ++i) {
      itl.push_back(Ms(r.chunk_ns[i] - r.chunk_ns[i - 1]));
    }
    // One-token outputs have no TPOT: 0 against the SLO, as vLLM counts them.
    double tpot_for_slo = std::max(0.0, q.tpot_ms);
    if (m.goodput_given && (slo.ttft_ms < 0 || q.ttft_ms <= slo.ttft_ms) &&
        (slo.tpot_ms < 0 || tpot_for_slo <= slo.tpot_ms) &&
        (slo.e2el_ms < 0 || q.e2el_ms <= slo.e2el_ms)) {
      ++m.good;
    }
  }
  if (duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
    m.goodput = static_cast<double>(m.good) / duration_s;
  }
  m.ttft = SummarizeMs(ttft);
  m.tpot = SummarizeMs(tpot);
  m.itl = SummarizeMs(itl);
  m.e2el = SummarizeMs(e2el);
  m.send_delay = SummarizeMs(delay);
  return m;
}

}  // namespace kiln::bench
