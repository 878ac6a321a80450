// SPDX-License-Identifier: Apache-2.0
#include "bench/gen_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/stamp.h"
#include "server/json_writer.h"

namespace kiln::bench {
namespace {

std::string RateLabel(double rate) {
  return std::isinf(rate) ? std::string("inf") : fmt::format("{:g}", rate);
}

std::string SloText(const GoodputSlo& slo) {
  std::string out;
  auto add = [&](const char* name, double v) {
    if (v < 0) return;
    out += fmt::format("{}{} <= {:g} ms", out.empty() ? "" : ", ", name, v);
  };
  add("TTFT", slo.ttft_ms);
  add("TPOT", slo.tpot_ms);
  add("E2E", slo.e2el_ms);
  return out;
}

struct Row {
  const char* name;
  const char* key;  // vLLM's key infix: mean_<key>_ms
  const MetricSummary* s;
};

std::vector<Row> Rows(const GenMetrics& m) {
  return {{"TTFT", "ttft", &m.ttft},
          {"TPOT", "tpot", &m.tpot},
          {"ITL", "itl", &m.itl},
          {"E2E", "e2el", &m.e2el}};
}

// A cumulative distribution chart of some latency series (ms on x, fraction on y).
struct Series {
  std::string name;
  const char* color;
  std::vector<double> sorted_ms;
};

std::string CdfSvg(const std::vector<Series>& series, const std::string& title) {
  const double w = 640, h = 320, ml = 60, mr = 20, mt = 30, mb = 45;
  double xmax = 0;
  for (const Series& s : series) {
    if (!s.sorted_ms.empty()) xmax = std::max(xmax, s.sorted_ms.back());
  }
  if (xmax <= 0) xmax = 1;
  xmax *= 1.05;
  auto X = [&](double v) { return ml + (w - ml - mr) * v / xmax; };
  auto Y = [&](double f) { return h - mb - (h - mt - mb) * f; };
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' viewBox='0 0 {0} {1}'>"
      "<rect width='100%' height='100%' fill='white'/>"
      "<text x='{2}' y='18' font-size='13' text-anchor='middle'>{3}</text>"
      "<line x1='{4}' y1='{5}' x2='{6}' y2='{5}' stroke='black'/>"
      "<line x1='{4}' y1='{5}' x2='{4}' y2='{7}' stroke='black'/>",
      w, h, w / 2, HtmlEscape(title), ml, h - mb, w - mr, mt);
  for (int i = 0; i <= 5; ++i) {
    double xv = xmax * i / 5, f = i / 5.0;
    svg += fmt::format(
        "<text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='middle'>{:.4g}</text>"
        "<text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='end'>{:.1f}</text>"
        "<line x1='{:.1f}' y1='{:.1f}' x2='{:.1f}' y2='{:.1f}' stroke='#ddd'/>",
        X(xv), h - mb + 16, xv, ml - 6, Y(f) + 4, f, ml, Y(f), w - mr, Y(f));
  }
  svg += fmt::format(
      "<text x='{:.1f}' y='{:.1f}' font-size='12' text-anchor='middle'>ms</text>"
      "<text x='14' y='{:.1f}' font-size='12' text-anchor='middle' "
      "transform='rotate(-90 14 {:.1f})'>fraction of requests (ITL: of gaps)</text>",
      (ml + w - mr) / 2, h - 10, (mt + h - mb) / 2, (mt + h - mb) / 2);
  int legend = 0;
  for (const Series& s : series) {
    if (s.sorted_ms.empty()) continue;
    std::string pts = fmt::format("{:.1f},{:.1f} ", X(s.sorted_ms.front()), Y(0));
    const size_t n = s.sorted_ms.size();
    const size_t step = std::max<size_t>(1, n / 400);  // at most ~400 points per curve
    for (size_t i = 0; i < n; i += step) {
      pts += fmt::format("{:.1f},{:.1f} ", X(s.sorted_ms[i]),
                         Y(static_cast<double>(i + 1) / static_cast<double>(n)));
    }
    pts += fmt::format("{:.1f},{:.1f}", X(s.sorted_ms.back()), Y(1));
    svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2' points='{}'/>", s.color,
                       pts);
    svg += fmt::format(
        "<rect x='{}' y='{}' width='12' height='3' fill='{}'/><text x='{}' y='{}' "
        "font-size='12'>{}</text>",
        ml + 10, mt + 8 + 16 * legend, s.color, ml + 28, mt + 13 + 16 * legend, HtmlEscape(s.name));
    ++legend;
  }
  svg += "</svg>";
  return svg;
}

}  // namespace

std::string FormatGenTable(const GenRunInfo& info, const GenMetrics& m) {
  std::string out = fmt::format(
      "kiln bench generate: {} at {}{}, dataset {}, {} prompts, rate {}/s{}, max concurrency "
      "{}\n",
      info.model, info.url, info.endpoint, info.dataset, info.num_prompts,
      RateLabel(info.request_rate),
      info.burstiness != 1 ? fmt::format(" (burstiness {:g})", info.burstiness) : "",
      info.max_concurrency > 0 ? std::to_string(info.max_concurrency) : "unlimited");
  out += fmt::format("{:<34}{:>14.2f}\n", "Benchmark duration (s):", m.duration_s);
  out += fmt::format("{:<34}{:>14}\n", "Successful requests:", m.completed);
  out += fmt::format("{:<34}{:>14}\n", "Failed requests:", m.failed);
  out += fmt::format("{:<34}{:>14}\n", "Total input tokens:", m.total_input_tokens);
  out += fmt::format("{:<34}{:>14}\n", "Total generated tokens:", m.total_output_tokens);
  out += fmt::format("{:<34}{:>14.2f}\n", "Request throughput (req/s):", m.request_throughput);
  if (m.goodput_given) {
    out +=
        fmt::format("{:<34}{:>14.2f}   ({} of {} completed meet {})\n",
                    "Request goodput (req/s):", m.goodput, m.good, m.completed, SloText(info.slo));
  }
  out += fmt::format("{:<34}{:>14.2f}\n", "Output token throughput (tok/s):", m.output_throughput);
  out +=
      fmt::format("{:<34}{:>14.2f}\n", "Total token throughput (tok/s):", m.total_token_throughput);
  out += fmt::format("{:<10}{:>10} {:>10} {:>10} {:>10} {:>10}\n", "(ms)", "mean", "median", "p99",
                     "max", "count");
  for (const Row& r : Rows(m)) {
    out += fmt::format("{:<10}{:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10}\n", r.name,
                       r.s->mean_ms, r.s->median_ms, r.s->p99_ms, r.s->max_ms, r.s->count);
  }
  if (m.send_delay.max_ms >= 1) {
    out += fmt::format(
        "Send delay (intended send to send; --max-concurrency waits, client lag): mean {:.2f} "
        "ms, p99 {:.2f} ms, max {:.2f} ms\n",
        m.send_delay.mean_ms, m.send_delay.p99_ms, m.send_delay.max_ms);
  }
  for (const auto& [kind, n] : m.errors_by_kind) out += fmt::format("  {} x {}\n", n, kind);
  if (!m.first_error.empty()) out += "  first error: " + m.first_error + "\n";
  out +=
      "Latencies count from the send; TTFT = first content chunk, ITL = gaps between chunks, "
      "TPOT = (E2E - TTFT) / (output tokens - 1).\n";
  return out;
}

std::string FormatGenJson(const GenRunInfo& info, const GenMetrics& m,
                          std::span<const GenRecord> records) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("run");
  w.BeginObject();
  w.KeyString("command", info.command_line);
  w.KeyString("git_commit", info.git_commit);
  w.KeyString("cpu_model", info.cpu_model);
  w.KeyInt("cpu_count", info.cpu_count);
  w.KeyString("start_time_utc", info.start_time_utc);
  w.KeyString("url", info.url);
  w.KeyString("endpoint", info.endpoint);
  w.KeyString("dataset", info.dataset);
  w.EndObject();
  w.KeyString("date", info.start_time_utc);
  w.KeyString("backend", info.endpoint == "/v1/chat/completions" ? "openai-chat" : "openai");
  w.KeyString("model_id", info.model);
  w.KeyInt("num_prompts", info.num_prompts);
  w.Key("request_rate");
  if (std::isinf(info.request_rate)) {
    w.String("inf");
  } else {
    w.Double(info.request_rate);
  }
  w.Key("burstiness");
  w.Double(info.burstiness);
  w.Key("max_concurrency");
  if (info.max_concurrency > 0) {
    w.Int(info.max_concurrency);
  } else {
    w.Null();
  }
  w.Key("duration");
  w.Double(m.duration_s);
  w.Key("completed");
  w.Uint(m.completed);
  w.Key("failed");
  w.Uint(m.failed);
  w.KeyInt("total_input_tokens", m.total_input_tokens);
  w.KeyInt("total_output_tokens", m.total_output_tokens);
  w.Key("request_throughput");
  w.Double(m.request_throughput);
  w.Key("request_goodput");
  if (m.goodput_given) {
    w.Double(m.goodput);
  } else {
    w.Null();
  }
  w.Key("output_throughput");
  w.Double(m.output_throughput);
  w.Key("total_token_throughput");
  w.Double(m.total_token_throughput);
  if (m.goodput_given) {
    w.Key("goodput_slo_ms");
    w.BeginObject();
    if (info.slo.ttft_ms >= 0) {
      w.Key("ttft");
      w.Double(info.slo.ttft_ms);
    }
    if (info.slo.tpot_ms >= 0) {
      w.Key("tpot");
      w.Double(info.slo.tpot_ms);
    }
    if (info.slo.e2el_ms >= 0) {
      w.Key("e2el");
      w.Double(info.slo.e2el_ms);
    }
    w.EndObject();
  }
  auto summary = [&](const std::string& key, const MetricSummary& s) {
    for (auto [stat, v] : {std::pair<const char*, double>{"mean", s.mean_ms},
                           {"median", s.median_ms},
                           {"std", s.std_ms},
                           {"p90", s.p90_ms},
                           {"p99", s.p99_ms},
                           {"max", s.max_ms}}) {
      w.Key(fmt::format("{}_{}_ms", stat, key));
      w.Double(v);
    }
  };
  for (const Row& r : Rows(m)) summary(r.key, *r.s);
  summary("send_delay", m.send_delay);
  w.Key("errors_by_kind");
  w.BeginObject();
  for (const auto& [kind, n] : m.errors_by_kind) {
    w.Key(kind);
    w.Uint(n);
  }
  w.EndObject();
  if (!m.first_error.empty()) w.KeyString("first_error", m.first_error);
  w.Key("requests");
  w.BeginArray();
  for (const GenRecord& r : records) {
    RequestMetrics q = MetricsOf(r);
    w.BeginObject();
    w.Key("due_ms");
    w.Double(static_cast<double>(r.due_ns) / 1e6);
    w.Key("ok");
    w.Bool(q.ok);
    if (q.ok) {
      w.KeyInt("input_tokens", q.input_tokens);
      w.KeyInt("output_tokens", q.output_tokens);
      w.KeyInt("chunks", static_cast<int64_t>(r.chunk_ns.size()));
      w.Key("ttft_ms");
      w.Double(q.ttft_ms);
      w.Key("tpot_ms");
      if (q.tpot_ms >= 0) {
        w.Double(q.tpot_ms);
      } else {
        w.Null();
      }
      w.Key("e2el_ms");
      w.Double(q.e2el_ms);
      w.Key("send_delay_ms");
      w.Double(q.send_delay_ms);
    } else {
      w.KeyString("error_kind", r.error_kind);
      w.KeyString("error", r.error);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  out += '\n';
  return out;
}

std::string FormatGenHtml(const GenRunInfo& info, const GenMetrics& m,
                          std::span<const GenRecord> records) {
  Series ttft{"TTFT", "#1f77b4", {}}, e2el{"E2E", "#d62728", {}};
  Series tpot{"TPOT", "#2ca02c", {}}, itl{"ITL", "#ff7f0e", {}};
  for (const GenRecord& r : records) {
    RequestMetrics q = MetricsOf(r);
    if (!q.ok) continue;
    ttft.sorted_ms.push_back(q.ttft_ms);
    e2el.sorted_ms.push_back(q.e2el_ms);
    if (q.tpot_ms >= 0) tpot.sorted_ms.push_back(q.tpot_ms);
    for (size_t i = 1; i < r.chunk_ns.size(); ++i) {
      itl.sorted_ms.push_back(static_cast<double>(r.chunk_ns[i] - r.chunk_ns[i - 1]) / 1e6);
    }
  }
  for (Series* s : {&ttft, &e2el, &tpot, &itl}) {
    std::sort(s->sorted_ms.begin(), s->sorted_ms.end());
  }

  std::string page =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>kiln bench generate: " +
      HtmlEscape(info.model) +
      "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th:first-child,"
      "td:first-child{text-align:left}code{background:#f4f4f4}</style></head><body>";
  page += fmt::format("<h1>kiln bench generate: {}</h1>", HtmlEscape(info.model));
  page += fmt::format(
      "<p>Command: <code>{}</code><br>Commit: {}<br>CPU: {} ({} logical)<br>Started: {} UTC<br>"
      "Server: {}{}<br>Dataset: {}, {} prompts; request rate {}/s, burstiness {:g}, max "
      "concurrency {}</p>",
      HtmlEscape(info.command_line),
      HtmlEscape(info.git_commit.empty() ? "unknown" : info.git_commit), HtmlEscape(info.cpu_model),
      info.cpu_count, HtmlEscape(info.start_time_utc), HtmlEscape(info.url),
      HtmlEscape(info.endpoint), HtmlEscape(info.dataset), info.num_prompts,
      RateLabel(info.request_rate), info.burstiness,
      info.max_concurrency > 0 ? std::to_string(info.max_concurrency) : "unlimited");
  page += "<h2>Summary</h2><table>";
  auto line = [&](const std::string& name, const std::string& value) {
    page += "<tr><td>" + HtmlEscape(name) + "</td><td>" + HtmlEscape(value) + "</td></tr>";
  };
  line("Benchmark duration (s)", fmt::format("{:.2f}", m.duration_s));
  line("Successful requests", std::to_string(m.completed));
  line("Failed requests", std::to_string(m.failed));
  line("Total input tokens", std::to_string(m.total_input_tokens));
  line("Total generated tokens", std::to_string(m.total_output_tokens));
  line("Request throughput (req/s)", fmt::format("{:.2f}", m.request_throughput));
  if (m.goodput_given) {
    line("Request goodput (req/s), " + SloText(info.slo),
         fmt::format("{:.2f} ({} of {})", m.goodput, m.good, m.completed));
  }
  line("Output token throughput (tok/s)", fmt::format("{:.2f}", m.output_throughput));
  line("Total token throughput (tok/s)", fmt::format("{:.2f}", m.total_token_throughput));
  page +=
      "</table><h2>Latencies (ms)</h2><table><tr><th>metric</th><th>mean</th>"
      "<th>median</th><th>p90</th><th>p99</th><th>max</th><th>count</th></tr>";
  for (const Row& r : Rows(m)) {
    page += fmt::format(
        "<tr><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td>"
        "<td>{:.2f}</td><td>{}</td></tr>",
        r.name, r.s->mean_ms, r.s->median_ms, r.s->p90_ms, r.s->p99_ms, r.s->max_ms, r.s->count);
  }
  page += fmt::format(
      "<tr><td>send delay</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td>"
      "<td>{:.2f}</td><td>{}</td></tr></table>",
      m.send_delay.mean_ms, m.send_delay.median_ms, m.send_delay.p90_ms, m.send_delay.p99_ms,
      m.send_delay.max_ms, m.send_delay.count);
  page += "<h2>Distributions</h2>" + CdfSvg({ttft, e2el}, "TTFT and E2E latency") +
          CdfSvg({tpot, itl}, "TPOT and inter-token latency");
  if (m.failed > 0) {
    page += "<h2>Errors</h2><ul>";
    for (const auto& [kind, n] : m.errors_by_kind) {
      page += fmt::format("<li>{} x {}</li>", n, HtmlEscape(kind));
    }
    page += "</ul><p>First: <code>" + HtmlEscape(m.first_error) + "</code></p>";
  }
  page +=
      "<p>Latencies count from the send. TTFT = first content chunk; ITL = gaps between content "
      "chunks; TPOT = (E2E - TTFT) / (output tokens - 1); percentiles interpolate linearly "
      "(numpy's default, as vLLM).</p></body></html>\n";
  return page;
}

}  // namespace kiln::bench
