// SPDX-License-Identifier: Apache-2.0
#include "bench/writers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/stamp.h"
#include "server/json_writer.h"

namespace kiln::bench {
namespace {

std::vector<const PointResult*> ByThroughput(std::span<const PointResult> points) {
  std::vector<const PointResult*> sorted;
  for (const PointResult& p : points) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](const PointResult* a, const PointResult* b) {
    return a->throughput < b->throughput;
  });
  return sorted;
}

std::string LoadLabel(const PointResult& p) {
  return p.open_loop ? fmt::format("{:g}/s", p.request_rate) : fmt::format("{}", p.concurrency);
}

// JSON numbers: finite only (NaN / inf become 0, never invalid JSON).
std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  return fmt::format("{:.6g}", v);
}

double NetworkServerUs(const PointResult& p) {
  if (!p.server.present) return p.latency.avg_us;
  double server = p.server.queue_us + p.server.compute_input_us + p.server.compute_infer_us +
                  p.server.compute_output_us;
  return std::max(0.0, p.latency.avg_us - server);
}

}  // namespace

std::string JsonQuote(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);  // the server's escaping: also valid JSON for invalid UTF-8
  return out;
}

std::string FormatCsv(std::span<const PointResult> points) {
  bool open = !points.empty() && points[0].open_loop;
  std::string out = fmt::format(
      "{},Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
      "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
      "p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,p99.9 latency,Errors,"
      "Client CPU %\n",
      open ? "Request Rate" : "Concurrency");
  for (const PointResult* p : ByThroughput(points)) {
    out += fmt::format(
        "{},{:.2f},0,{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},0,{:.0f},{:.0f},{:.0f},"
        "{:.0f},{:.0f},{:.0f},{},{:.1f}\n",
        p->open_loop ? fmt::format("{:g}", p->request_rate) : fmt::format("{}", p->concurrency),
        p->throughput, NetworkServerUs(*p), p->server.queue_us, p->server.compute_input_us,
        p->server.compute_infer_us, p->server.compute_output_us, p->latency.p50_us,
        p->latency.p90_us, p->latency.p95_us, p->latency.p99_us, p->latency.avg_us,
        p->latency.p999_us, p->errors, p->client_cpu_pct);
  }
  return out;
}

std::string FormatJson(const RunInfo& info, std::span<const PointResult> points) {
  std::string out = "{\n  \"run\": {";
  out += fmt::format(
      "\"command\": {}, \"git_commit\": {}, \"cpu_model\": {}, \"cpu_count\": {}, "
      "\"start_time_utc\": {}, \"model\": {}, \"model_version\": {}, \"url\": {}, "
      "\"protocol\": {}, \"batch_size\": {}, \"stabilizing_latency\": {}",
      JsonQuote(info.command_line), JsonQuote(info.git_commit), JsonQuote(info.cpu_model),
      info.cpu_count, JsonQuote(info.start_time_utc), JsonQuote(info.model),
      JsonQuote(info.model_version), JsonQuote(info.url), JsonQuote(info.protocol), info.batch_size,
      JsonQuote(info.stabilizing_latency));
  out += "},\n  \"points\": [";
  for (size_t i = 0; i < points.size(); ++i) {
    const PointResult& p = points[i];
    out += i == 0 ? "\n    {" : ",\n    {";
    if (p.open_loop) {
      out += fmt::format(
          "\"request_rate\": {}, \"send_lag_avg_us\": {}, \"send_lag_p99_us\": {}, "
          "\"send_lag_max_us\": {}, ",
          Num(p.request_rate), Num(p.send_lag_avg_us), Num(p.send_lag_p99_us),
          Num(p.send_lag_max_us));
    } else {
      out += fmt::format("\"concurrency\": {}, ", p.concurrency);
    }
    out += fmt::format(
        "\"throughput\": {}, \"achieved_rate\": {}, \"request_count\": {}, \"avg_us\": {}, "
        "\"stddev_us\": {}, \"p50_us\": {}, \"p90_us\": {}, \"p95_us\": {}, \"p99_us\": {}, "
        "\"p999_us\": {}, \"max_us\": {}, \"errors\": {}, \"errors_by_status\": {{",
        Num(p.throughput), Num(p.achieved_rate), p.request_count, Num(p.latency.avg_us),
        Num(p.latency.stddev_us), Num(p.latency.p50_us), Num(p.latency.p90_us),
        Num(p.latency.p95_us), Num(p.latency.p99_us), Num(p.latency.p999_us), Num(p.latency.max_us),
        p.errors);
    bool first = true;
    for (const auto& [k, v] : p.errors_by_status) {
      out += fmt::format("{}{}: {}", first ? "" : ", ", JsonQuote(k), v);
      first = false;
    }
    out += fmt::format(
        "}}, \"stable\": {}, \"windows\": {}, \"window_s\": {}, "
        "\"client_cpu_pct\": {}",
        p.stable ? "true" : "false", p.windows, Num(p.window_s), Num(p.client_cpu_pct));
    if (!p.first_error.empty())
      out += fmt::format(", \"first_error\": {}", JsonQuote(p.first_error));
    if (p.server.present) {
      const ServerBreakdown& s = p.server;
      out += fmt::format(
          ", \"server\": {{\"inference_count\": {}, \"execution_count\": {}, "
          "\"success_count\": {}, \"request_us\": {}, \"queue_us\": {}, \"compute_input_us\": {}, "
          "\"compute_infer_us\": {}, \"compute_output_us\": {}, \"overhead_us\": {}, "
          "\"mean_batch\": {}}}",
          s.inference_count, s.execution_count, s.success_count, Num(s.request_us), Num(s.queue_us),
          Num(s.compute_input_us), Num(s.compute_infer_us), Num(s.compute_output_us),
          Num(s.overhead_us), Num(s.mean_batch));
    }
    out += ", \"window_details\": [";
    for (size_t w = 0; w < p.window_results.size(); ++w) {
      const WindowResult& r = p.window_results[w];
      out += fmt::format(
          "{}{{\"throughput\": {}, \"avg_us\": {}, \"p50_us\": {}, \"p99_us\": {}, "
          "\"errors\": {}",
          w == 0 ? "" : ", ", Num(r.throughput), Num(r.avg_us), Num(r.p50_us), Num(r.p99_us),
          r.errors);
      if (r.server.present) {
        out += fmt::format(
            ", \"server_queue_us\": {}, \"server_compute_input_us\": {}, "
            "\"server_compute_infer_us\": {}, \"server_compute_output_us\": {}, "
            "\"server_mean_batch\": {}",
            Num(r.server.queue_us), Num(r.server.compute_input_us), Num(r.server.compute_infer_us),
            Num(r.server.compute_output_us), Num(r.server.mean_batch));
      }
      out += "}";
    }
    out += "]}";
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string FormatTable(const RunInfo& info, std::span<const PointResult> points) {
  bool open = !points.empty() && points[0].open_loop;
  std::string out = fmt::format("kiln bench: {} v{} at {} over {}, batch {}\n", info.model,
                                info.model_version.empty() ? "latest" : info.model_version,
                                info.url, info.protocol, info.batch_size);
  out += fmt::format("{:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>6}",
                     open ? "rate/s" : "concur.", "infer/s", "avg us", "sd us", "p50 us", "p90 us",
                     "p95 us", "p99 us", "p99.9 us", "errors", "cpu %", "stable");
  if (open) out += fmt::format(" {:>9} {:>9}", "sent/s", "late p99");
  out += fmt::format("  {:>8} {:>8} {:>8} {:>6}\n", "srv q us", "infer us", "other us", "batch");
  for (const PointResult& p : points) {
    out += fmt::format(
        "{:>10} {:>11.1f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>9.0f} {:>7} "
        "{:>6.1f} {:>6}",
        LoadLabel(p), p.throughput, p.latency.avg_us, p.latency.stddev_us, p.latency.p50_us,
        p.latency.p90_us, p.latency.p95_us, p.latency.p99_us, p.latency.p999_us, p.errors,
        p.client_cpu_pct, p.stable ? "yes" : "NO");
    if (open) out += fmt::format(" {:>9.1f} {:>9.0f}", p.achieved_rate, p.send_lag_p99_us);
    if (p.server.present) {
      out += fmt::format(
          "  {:>8.0f} {:>8.0f} {:>8.0f} {:>6.2f}", p.server.queue_us, p.server.compute_infer_us,
          p.server.compute_input_us + p.server.compute_output_us + p.server.overhead_us,
          p.server.mean_batch);
    } else {
      out += "  (no server statistics)";
    }
    out += "\n";
  }
  for (const PointResult& p : points) {
    for (const auto& [k, v] : p.errors_by_status) {
      out += fmt::format("  at {}: {} x {}{}\n", LoadLabel(p), v, k,
                         p.first_error.empty() ? "" : " (first: " + p.first_error + ")");
    }
    if (!p.stable) {
      out += fmt::format(
          "  at {}: not stable after {} window(s) (stable = throughput and {} "
          "latency of the last 3 windows within the stability percentage); the "
          "numbers are from the last {} window(s)\n",
          LoadLabel(p), p.windows, info.stabilizing_latency, std::min(p.windows, 3));
    }
  }
  out +=
      "cpu % = the bench process's own CPU time over wall time (100 = one core); latencies are "
      "client-side, from the " +
      std::string(open ? "intended send time" : "send") + " to the full response.\n";
  return out;
}

std::string FormatHtml(const RunInfo& info, std::span<const PointResult> points) {
  const double w = 640, h = 360, ml = 70, mr = 20, mt = 20, mb = 50;
  auto sorted = ByThroughput(points);
  double xmax = 1, ymax = 1;
  for (const PointResult* p : sorted) {
    xmax = std::max(xmax, p->throughput);
    ymax = std::max(ymax, p->latency.p99_us);
  }
  xmax *= 1.05;
  ymax *= 1.1;
  auto X = [&](double v) { return ml + (w - ml - mr) * v / xmax; };
  auto Y = [&](double v) { return h - mb - (h - mt - mb) * v / ymax; };
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' viewBox='0 0 {0} {1}'>"
      "<rect width='100%' height='100%' fill='white'/>",
      w, h);
  // Axes and ticks.
  svg += fmt::format(
      "<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>"
      "<line x1='{0}' y1='{1}' x2='{0}' y2='{3}' stroke='black'/>",
      ml, h - mb, w - mr, mt);
  for (int i = 0; i <= 5; ++i) {
    double xv = xmax * i / 5, yv = ymax * i / 5;
    svg += fmt::format(
        "<text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='middle'>{:.0f}"
        "</text><text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='end'>{:.0f}"
        "</text><line x1='{:.1f}' y1='{:.1f}' x2='{:.1f}' y2='{:.1f}' "
        "stroke='#ddd'/>",
        X(xv), h - mb + 16, xv, ml - 6, Y(yv) + 4, yv, ml, Y(yv), w - mr, Y(yv));
  }
  svg += fmt::format(
      "<text x='{:.1f}' y='{:.1f}' font-size='12' text-anchor='middle'>"
      "throughput (infer/s)</text>"
      "<text x='14' y='{:.1f}' font-size='12' text-anchor='middle' "
      "transform='rotate(-90 14 {:.1f})'>latency (us)</text>",
      (ml + w - mr) / 2, h - 12, (mt + h - mb) / 2, (mt + h - mb) / 2);
  struct Series {
    const char* name;
    const char* color;
    double LatencySummary::*field;
  };
  const Series series[] = {{"p50", "#1f77b4", &LatencySummary::p50_us},
                           {"p99", "#d62728", &LatencySummary::p99_us}};
  int legend = 0;
  for (const Series& s : series) {
    std::string pts;
    for (const PointResult* p : sorted) {
      pts += fmt::format("{:.1f},{:.1f} ", X(p->throughput), Y(p->latency.*s.field));
    }
    svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2' points='{}'/>", s.color,
                       pts);
    for (const PointResult* p : sorted) {
      svg += fmt::format(
          "<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'><title>{} {}: {:.0f} "
          "infer/s, {} {:.0f} us</title></circle>",
          X(p->throughput), Y(p->latency.*s.field), s.color, p->open_loop ? "rate" : "concurrency",
          LoadLabel(*p), p->throughput, s.name, p->latency.*s.field);
    }
    svg += fmt::format(
        "<rect x='{}' y='{}' width='12' height='3' fill='{}'/><text x='{}' y='{}' "
        "font-size='12'>{}</text>",
        ml + 10, mt + 8 + 16 * legend, s.color, ml + 28, mt + 13 + 16 * legend, s.name);
    ++legend;
  }
  svg += "</svg>";

  // Stage breakdown: one stacked horizontal bar per point (client avg latency split into server
  // queue, compute input, infer, output and the rest = network + server overhead + client).
  std::string bars;
  const double bw = 640, row = 22, label_w = 90;
  double lat_max = 1;
  for (const PointResult& p : points) lat_max = std::max(lat_max, p.latency.avg_us);
  bars += fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' "
      "viewBox='0 0 {0} {1}'><rect width='100%' height='100%' fill='white'/>",
      bw, row * (points.size() + 2));
  const char* colors[] = {"#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#bbbbbb"};
  const char* names[] = {"server queue", "compute input", "compute infer", "compute output",
                         "network + other"};
  for (size_t i = 0; i < points.size(); ++i) {
    const PointResult& p = points[i];
    double parts[5] = {p.server.queue_us, p.server.compute_input_us, p.server.compute_infer_us,
                       p.server.compute_output_us, NetworkServerUs(p)};
    double x = label_w;
    double y = row * i + 4;
    bars += fmt::format("<text x='4' y='{:.1f}' font-size='11'>{}</text>", y + 12,
                        HtmlEscape((p.open_loop ? "rate " : "c=") + LoadLabel(p)));
    for (int k = 0; k < 5; ++k) {
      double width = (bw - label_w - 10) * parts[k] / lat_max;
      if (width <= 0) continue;
      bars += fmt::format(
          "<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='16' fill='{}'>"
          "<title>{}: {:.1f} us</title></rect>",
          x, y, width, colors[k], names[k], parts[k]);
      x += width;
    }
  }
  double ly = row * points.size() + 16;
  for (int k = 0, lx = 4; k < 5; ++k) {
    bars += fmt::format(
        "<rect x='{}' y='{:.1f}' width='10' height='10' fill='{}'/><text x='{}' "
        "y='{:.1f}' font-size='11'>{}</text>",
        lx, ly, colors[k], lx + 14, ly + 9, names[k]);
    lx += 125;
  }
  bars += "</svg>";

  std::string table =
      "<table><tr><th>load</th><th>infer/s</th><th>avg us</th><th>p50 us</th>"
      "<th>p90 us</th><th>p95 us</th><th>p99 us</th><th>p99.9 us</th>"
      "<th>errors</th><th>client CPU %</th><th>stable</th><th>server queue us"
      "</th><th>server infer us</th><th>mean batch</th></tr>";
  for (const PointResult& p : points) {
    table += fmt::format(
        "<tr><td>{}</td><td>{:.1f}</td><td>{:.0f}</td><td>{:.0f}</td><td>{:.0f}</td>"
        "<td>{:.0f}</td><td>{:.0f}</td><td>{:.0f}</td><td>{}</td><td>{:.1f}</td><td>{}</td>"
        "<td>{:.0f}</td><td>{:.0f}</td><td>{:.2f}</td></tr>",
        HtmlEscape(LoadLabel(p)), p.throughput, p.latency.avg_us, p.latency.p50_us,
        p.latency.p90_us, p.latency.p95_us, p.latency.p99_us, p.latency.p999_us, p.errors,
        p.client_cpu_pct, p.stable ? "yes" : "no", p.server.queue_us, p.server.compute_infer_us,
        p.server.mean_batch);
  }
  table += "</table>";

  std::string page = "<!DOCTYPE html><html><head><meta charset='utf-8'><title>kiln bench: " +
                     HtmlEscape(info.model) +
                     "</title><style>body{font-family:sans-serif;"
                     "margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
                     "padding:2px 6px;text-align:right}code{background:#f4f4f4}</style></head>"
                     "<body>";
  page += fmt::format("<h1>kiln bench: {} ({})</h1>", HtmlEscape(info.model),
                      HtmlEscape(info.protocol));
  page += fmt::format(
      "<p>Command: <code>{}</code><br>Commit: {}<br>CPU: {} ({} logical)<br>Started: {} UTC<br>"
      "Server: {}, model version {}, batch size {}</p>",
      HtmlEscape(info.command_line),
      HtmlEscape(info.git_commit.empty() ? "unknown" : info.git_commit), HtmlEscape(info.cpu_model),
      info.cpu_count, HtmlEscape(info.start_time_utc), HtmlEscape(info.url),
      HtmlEscape(info.model_version.empty() ? "latest" : info.model_version), info.batch_size);
  page += "<h2>Latency against throughput</h2>" + svg;
  page +=
      "<h2>Where the average latency goes</h2><p>Server stages from the statistics "
      "endpoint; the rest is network, server front end and client.</p>" +
      bars;
  page += "<h2>Points</h2>" + table;
  page +=
      "<p>Client CPU % is the bench process's own CPU time (user + system) over the "
      "measured wall time; 100 = one core.</p></body></html>\n";
  return page;
}

Status WriteFile(const std::string& path, std::string_view text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return Status::Unavailable(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  }
  size_t n = std::fwrite(text.data(), 1, text.size(), f);
  int close_rc = std::fclose(f);
  if (n != text.size() || close_rc != 0) {
    return Status::Unavailable(fmt::format("writing '{}' failed: {}", path, std::strerror(errno)));
  }
  return Status::OK();
}

}  // namespace kiln::bench
