// SPDX-License-Identifier: Apache-2.0
// The text, JSON and Chrome trace outputs of `kiln profile` (profile_writers.h).

#include "tools/kiln/profile_writers.h"

#include <fmt/format.h>

#include <fstream>

#include "server/json_writer.h"

namespace kiln::tools {
namespace {

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

const char* JsonBool(bool b) { return b ? "true" : "false"; }

std::string NodeName(const Node& node, int index) {
  return node.name.empty() ? fmt::format("{}_{}", node.op_type, index) : node.name;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// --- JSON ---------------------------------------------------------------------------------------

std::string ValuesJson(const std::vector<ProfiledValue>& values, bool inputs) {
  std::string j = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    const ProfiledValue& v = values[i];
    j +=
        fmt::format("{}{{\"name\":{},\"dtype\":{},\"shape\":[{}]", i ? "," : "", JsonString(v.name),
                    JsonString(DataTypeName(v.dtype)), fmt::join(v.shape.dims(), ","));
    if (inputs && v.file.empty()) j += ",\"data\":\"random\"";
    if (inputs && !v.file.empty())
      j += fmt::format(",\"data\":\"file\",\"file\":{}", JsonString(v.file));
    j += "}";
  }
  return j + "]";
}

std::string SetupJson(const ProfileReport& r) {
  std::string j;
  j += fmt::format(
      "\"model\":{},\"batch\":{},\"threads\":{},\"thread_wait\":{},\"iterations\":{},"
      "\"warmup\":{},",
      JsonString(r.model), r.batch, r.threads, JsonString(r.thread_wait), r.iterations, r.warmup);
  j += fmt::format("\"adaptive_threads\":{},\"narrow_runs\":{},\"width_switches\":{},",
                   JsonBool(r.adaptive), r.narrow_runs, r.width_switches);
  j += fmt::format("\"optimized\":{},\"imported_nodes\":{},\"nodes_run\":{},",
                   JsonBool(r.optimized), r.imported_nodes, r.nodes_run);
  j += fmt::format(
      "\"weight_precision\":{},\"weight_bytes\":{},\"rss_bytes\":{},\"peak_rss_bytes\":{},",
      JsonString(r.weight_precision), r.weight_bytes, r.rss_bytes, r.peak_rss_bytes);
  j += fmt::format(
      "\"cpu\":{{\"kiln_isa\":{},\"onednn_isa\":{},\"int8_dot_products\":{},"
      "\"bf16_dot_products\":{}}},\"notes\":[",
      JsonString(r.cpu.kiln_isa), JsonString(r.cpu.onednn_isa), JsonBool(r.cpu.int8_dot_products),
      JsonBool(r.cpu.bf16_dot_products));
  for (size_t i = 0; i < r.kernel_notes.size(); ++i) {
    j += fmt::format("{}{{\"note\":{},\"nodes\":{}}}", i ? "," : "",
                     JsonString(r.kernel_notes[i].first), r.kernel_notes[i].second);
  }
  return j + "],";
}

std::string TimingJson(const ProfileReport& r) {
  const RunsSummary& s = r.summary;
  const double items_per_s = static_cast<double>(r.batch) * s.runs_per_s;
  const double gflop_per_run = s.runs > 0 ? s.flops / static_cast<double>(s.runs) / 1e9 : 0;
  return fmt::format(
      "\"median_ms\":{:.6f},\"p99_ms\":{:.6f},\"mean_ms\":{:.6f},\"min_ms\":{:.6f},"
      "\"max_ms\":{:.6f},\"runs_per_s\":{:.3f},\"items_per_s\":{:.3f},\"gflop_per_run\":{:.6f},",
      s.median_ms, s.p99_ms, s.mean_ms, s.min_ms, s.max_ms, s.runs_per_s, items_per_s,
      gflop_per_run);
}

std::string MemoryPlanJson(const MemoryPlanStats& memory) {
  const MemoryPlanStats::Plan* plan = memory.plans.empty() ? nullptr : &memory.plans.front();
  return fmt::format(
      "\"memory_plan\":{{\"planned\":{},\"arena_bytes\":{},\"unplanned_bytes\":{},"
      "\"live_peak_bytes\":{},\"planned_allocations\":{},\"heap_fallbacks\":{},"
      "\"subgraph_planned_runs\":{},\"subgraph_unplanned_runs\":{},"
      "\"subgraph_recorded_runs\":{}}},",
      JsonBool(plan != nullptr), plan ? plan->arena_bytes : 0, plan ? plan->unplanned_bytes : 0,
      plan ? plan->live_peak_bytes : 0, plan ? plan->planned_allocations : 0, memory.heap_fallbacks,
      memory.subgraph_planned_runs, memory.subgraph_unplanned_runs, memory.subgraph_recorded_runs);
}

std::string NodesJson(const RunsSummary& s, const Session& session) {
  const Graph& graph = session.graph();
  std::string j = "\"nodes\":[";
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeSummary& n = s.nodes[i];
    const Node& node = graph.node(n.node);
    j += fmt::format(
        "{}{{\"name\":{},\"op_type\":{},\"provider\":{},\"device\":{},\"implementation\":{},"
        "\"calls\":{},\"total_ms\":{:.6f},\"avg_ms\":{:.6f},\"percent\":{:.3f}",
        i ? "," : "", JsonString(NodeName(node, n.node)), JsonString(node.op_type),
        JsonString(session.provider(n.node)), JsonString(session.placement(n.node).ToString()),
        JsonString(session.implementation(n.node)), n.calls, Ms(n.total_ns),
        Ms(n.total_ns) / static_cast<double>(n.calls), s.PercentOfNodeTime(n.total_ns));
    if (n.flops > 0) {
      j +=
          fmt::format(",\"flops\":{:.0f},\"gflops_per_s\":{:.3f}",
                      n.flops / static_cast<double>(n.calls), GflopsPerSecond(n.flops, n.total_ns));
    }
    j += "}";
  }
  j += "],\"op_types\":[";
  for (size_t i = 0; i < s.op_types.size(); ++i) {
    const OpTypeSummary& o = s.op_types[i];
    j += fmt::format(
        "{}{{\"op_type\":{},\"nodes\":{},\"calls\":{},\"total_ms\":{:.6f},\"percent\":{:.3f}",
        i ? "," : "", JsonString(o.op_type), o.nodes, o.calls, Ms(o.total_ns),
        s.PercentOfNodeTime(o.total_ns));
    if (o.flops > 0 && o.total_ns > 0) {
      j += fmt::format(",\"gflops_per_s\":{:.3f}", GflopsPerSecond(o.flops, o.total_ns));
    }
    j += "}";
  }
  return j + "]";
}

// --- text ---------------------------------------------------------------------------------------

std::string ValuesText(const std::vector<ProfiledValue>& values) {
  std::vector<std::string> items;
  items.reserve(values.size());
  for (const ProfiledValue& v : values) {
    items.push_back(fmt::format("{} {}{}{}", v.name, DataTypeName(v.dtype), v.shape.ToString(),
                                v.file.empty() ? "" : fmt::format(" from {}", v.file)));
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

std::string SetupText(const ProfileReport& r) {
  std::string t;
  t += fmt::format("model       {}\n", r.model);
  t += fmt::format("inputs      {}\n", ValuesText(r.inputs));
  t += fmt::format("outputs     {}\n", ValuesText(r.outputs));
  t += fmt::format(
      "batch       {}   threads {} (idle wait: {})   iterations {} (after {} warm-up)\n", r.batch,
      r.threads, r.thread_wait, r.iterations, r.warmup);
  if (r.adaptive) {
    t += fmt::format("widths      adaptive: {} of {} timed runs on one thread ({} switch{})\n",
                     r.narrow_runs, r.iterations, r.width_switches,
                     r.width_switches == 1 ? "" : "es");
  }
  t += fmt::format("cpu         kiln kernels {}, oneDNN {} (INT8 VNNI {}, BF16 dot products {})\n",
                   r.cpu.kiln_isa, r.cpu.onednn_isa, r.cpu.int8_dot_products ? "yes" : "no",
                   r.cpu.bf16_dot_products ? "yes" : "no");
  for (const auto& [note, nodes] : r.kernel_notes) {
    t += fmt::format("note        {} node{}: {}\n", nodes, nodes == 1 ? "" : "s", note);
  }
  t += fmt::format(
      "weights     {}   initializers {:.1f} MiB   process rss {:.1f} MiB (peak {:.1f} MiB)\n",
      r.weight_precision, MiB(r.weight_bytes), MiB(r.rss_bytes), MiB(r.peak_rss_bytes));
  return t;
}

std::string TimingText(const ProfileReport& r) {
  const RunsSummary& s = r.summary;
  std::string t =
      fmt::format("latency     median {:.3f} ms   p99 {:.3f} ms   mean {:.3f} ms   min {:.3f} ms\n",
                  s.median_ms, s.p99_ms, s.mean_ms, s.min_ms);
  t += fmt::format("throughput  {:.2f} items/s ({:.2f} runs/s)",
                   static_cast<double>(r.batch) * s.runs_per_s, s.runs_per_s);
  if (s.flops > 0 && s.total_ms > 0) {
    t += fmt::format("   {:.2f} GFLOP/s overall", s.flops / (s.total_ms * 1e6));
  }
  t += "\n";
  const MemoryPlanStats::Plan* plan = r.memory.plans.empty() ? nullptr : &r.memory.plans.front();
  if (plan == nullptr) return t + "memory      not planned (--no-memory-plan)\n";
  const double pct = plan->unplanned_bytes ? 100.0 * static_cast<double>(plan->arena_bytes) /
                                                 static_cast<double>(plan->unplanned_bytes)
                                           : 0.0;
  t += fmt::format(
      "memory      planned arena {:.3f} MiB vs {:.3f} MiB unplanned ({:.1f}%; live peak "
      "{:.3f} MiB), {} intermediates planned, {} heap fallbacks\n",
      MiB(plan->arena_bytes), MiB(plan->unplanned_bytes), pct, MiB(plan->live_peak_bytes),
      plan->planned_allocations, r.memory.heap_fallbacks);
  const MemoryPlanStats& m = r.memory;
  if (m.subgraph_planned_runs + m.subgraph_unplanned_runs + m.subgraph_recorded_runs > 0) {
    t += fmt::format(
        "subgraphs   {} body runs planned, {} recorded a plan, {} unplanned (sequence or none "
        "values)\n",
        m.subgraph_planned_runs, m.subgraph_recorded_runs, m.subgraph_unplanned_runs);
  }
  return t;
}

std::string NodesText(const RunsSummary& s, const Session& session) {
  const Graph& graph = session.graph();
  std::string t =
      fmt::format("\n{:<40} {:<18} {:<8} {:>6} {:>11} {:>10} {:>6} {:>9}  {}\n", "node", "op",
                  "provider", "calls", "total ms", "avg ms", "%", "GFLOP/s", "implementation");
  for (const NodeSummary& n : s.nodes) {
    const Node& node = graph.node(n.node);
    std::string name = NodeName(node, n.node);
    if (name.size() > 40) name = name.substr(0, 37) + "...";
    const std::string rate =
        n.flops > 0 ? fmt::format("{:.2f}", GflopsPerSecond(n.flops, n.total_ns)) : "-";
    t += fmt::format("{:<40} {:<18} {:<8} {:>6} {:>11.3f} {:>10.4f} {:>6.1f} {:>9}  {}\n", name,
                     node.op_type, session.provider(n.node), n.calls, Ms(n.total_ns),
                     Ms(n.total_ns) / static_cast<double>(n.calls), s.PercentOfNodeTime(n.total_ns),
                     rate, session.implementation(n.node));
  }
  t += fmt::format("\n{:<24} {:>6} {:>8} {:>11} {:>6} {:>9}\n", "op type", "nodes", "calls",
                   "total ms", "%", "GFLOP/s");
  for (const OpTypeSummary& o : s.op_types) {
    const std::string rate = o.flops > 0 && o.total_ns > 0
                                 ? fmt::format("{:.2f}", GflopsPerSecond(o.flops, o.total_ns))
                                 : "-";
    t += fmt::format("{:<24} {:>6} {:>8} {:>11.3f} {:>6.1f} {:>9}\n", o.op_type, o.nodes, o.calls,
                     Ms(o.total_ns), s.PercentOfNodeTime(o.total_ns), rate);
  }
  return t;
}

}  // namespace

std::string FormatProfileReport(const ProfileReport& report, const Session& session) {
  return SetupText(report) + TimingText(report) + NodesText(report.summary, session);
}

std::string ProfileReportJson(const ProfileReport& report, const Session& session) {
  return "{" + SetupJson(report) + TimingJson(report) +
         fmt::format("\"inputs\":{},\"outputs\":{},", ValuesJson(report.inputs, true),
                     ValuesJson(report.outputs, false)) +
         MemoryPlanJson(report.memory) + NodesJson(report.summary, session) + "}";
}

Status WriteChromeTrace(const std::string& path, const Session& session,
                        std::span<const RunProfile> runs) {
  std::ofstream out(path);
  if (!out) return Status::InvalidArgument(fmt::format("cannot write --trace '{}'", path));
  const Graph& g = session.graph();
  const int64_t t0 = runs.empty() ? 0 : runs.front().start_ns;
  const auto us = [&](int64_t ns) { return static_cast<double>(ns - t0) / 1000.0; };
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out << fmt::format(
      "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{{\"name\":{}}}}}",
      JsonString("kiln profile " + g.name));
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunProfile& run = runs[r];
    out << fmt::format(
        ",\n{{\"name\":\"run\",\"cat\":\"run\",\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},"
        "\"pid\":1,\"tid\":1,\"args\":{{\"iteration\":{}}}}}",
        us(run.start_ns), static_cast<double>(run.end_ns - run.start_ns) / 1000.0, r);
    for (const NodeTiming& t : run.nodes) {
      const Node& node = g.node(t.node);
      out << fmt::format(
          ",\n{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":1,"
          "\"tid\":1,\"args\":{{\"node\":{},\"op_type\":{},\"provider\":{},\"node_index\":{}}}}}",
          JsonString(NodeName(node, t.node)), JsonString(node.op_type), us(t.start_ns),
          static_cast<double>(t.duration_ns) / 1000.0, JsonString(NodeName(node, t.node)),
          JsonString(node.op_type), JsonString(session.provider(t.node)), t.node);
    }
  }
  out << "\n]}\n";
  out.close();
  if (!out) return Status::InvalidArgument(fmt::format("cannot write --trace '{}'", path));
  return Status::OK();
}

}  // namespace kiln::tools
