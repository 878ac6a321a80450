// SPDX-License-Identifier: Apache-2.0
// `kiln profile`: run a model many times on random inputs and report where the time goes.
//
//   kiln profile model.onnx --batch 8 --iterations 100 --warmup 10 --threads 2
//   kiln profile bert.onnx --shape input_ids:1,128 --shape attention_mask:1,128 --json
//   kiln profile model.onnx --trace trace.json     # open in https://ui.perfetto.dev
//   kiln profile model.onnx --weight-precision fp16 # weights held in FLOAT16
//
// Inputs are random data of each input's declared dtype (floats uniform in [-1, 1), integers in
// [0, 10), booleans 0/1) and shape: a symbolic first dim becomes --batch, any other symbolic dim
// must be given with --shape NAME:d1,d2,... (which sets the whole shape of that input). After
// --warmup untimed runs (the first records the memory plan of the shape), --iterations runs are
// timed end to end and per node (Session::RunWithProfile). The report: latency median / p99 /
// mean, throughput (batch x runs per second), the memory plan, and a per-node table sorted by
// total time with % of the node total, calls, op type, provider and GFLOP/s for the ops with a
// FLOP count, then the same summed per op type. --json prints one JSON object instead; --trace
// writes a Chrome trace (one "X" event per run and per node call, in microseconds).
//
// Exit status: 0 on success; 1 with a one-line reason on stderr on any error.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/onnx/importer.h"
#include "kernels/cpu/cpu_kernels.h"
#include "opt/optimizer.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "server/json_writer.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

struct ProfileOptions {
  std::string model;
  int64_t batch = 1;
  std::vector<std::string> shapes;  // NAME:d1,d2,...
  int iterations = 100;
  int warmup = 10;
  int threads = 0;
  bool json = false;
  std::string trace;
  bool no_memory_plan = false;
  bool no_optimize = false;
  std::vector<std::string> disabled_passes;
  std::string weight_precision = "auto";  // auto | fp32 | fp16 | bf16
};

// A "VmRSS" / "VmHWM" line of /proc/self/status in bytes; 0 where unavailable.
uint64_t ProcStatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

// Parses "NAME:d1,d2,..." (an empty dim list is a scalar).
Result<std::pair<std::string, std::vector<int64_t>>> ParseShapeSpec(const std::string& spec) {
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(fmt::format("--shape '{}' is not NAME:d1,d2,...", spec));
  }
  std::vector<int64_t> dims;
  const std::string list = spec.substr(colon + 1);
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(pos, comma - pos);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || end == nullptr || *end != '\0' || v < 0) {
      return Status::InvalidArgument(
          fmt::format("--shape '{}': '{}' is not a non-negative dim", spec, item));
    }
    dims.push_back(v);
    pos = comma + 1;
  }
  return std::make_pair(spec.substr(0, colon), dims);
}

// The shape to feed input `v`, or an error naming what is missing.
Result<Shape> ResolveInputShape(const Value& v,
                                const std::map<std::string, std::vector<int64_t>>& given,
                                int64_t batch, bool* used_batch) {
  if (auto it = given.find(v.name); it != given.end()) {
    if (v.type.has_shape && it->second.size() != v.type.dims.size()) {
      return Status::InvalidArgument(
          fmt::format("--shape for input '{}' has rank {}, the model "
                      "declares {}",
                      v.name, it->second.size(), v.type.ToString()));
    }
    return Shape::Create(it->second);
  }
  if (!v.type.has_shape) {
    return Status::InvalidArgument(fmt::format(
        "input '{}' has no declared shape; give it with --shape {}:d1,d2,...", v.name, v.name));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < v.type.dims.size(); ++i) {
    const Dim& d = v.type.dims[i];
    if (d.known()) {
      dims.push_back(d.value);
    } else if (i == 0) {
      dims.push_back(batch);
      *used_batch = true;
    } else {
      return Status::InvalidArgument(fmt::format(
          "input '{}' ({}): dim {} ('{}') is symbolic; give the shape with --shape {}:d1,d2,...",
          v.name, v.type.ToString(), i, d.symbol.empty() ? "?" : d.symbol, v.name));
    }
  }
  return Shape::Create(dims);
}

Result<OwnedTensor> RandomTensor(const Value& v, const Shape& shape, std::mt19937& rng) {
  if (!v.type.is_tensor() && !v.type.IsUnknown()) {
    return Status::InvalidArgument(fmt::format(
        "input '{}' is a {}; kiln profile feeds tensors only", v.name, v.type.ToString()));
  }
  const DataType dtype = v.type.dtype == DataType::kInvalid ? DataType::kFloat32 : v.type.dtype;
  KILN_ASSIGN_OR_RETURN(OwnedTensor t, OwnedTensor::Allocate(dtype, shape));
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int> small(0, 9);
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DataType::kFloat32:
        t.data<float>()[i] = real(rng);
        break;
      case DataType::kFloat64:
        t.data<double>()[i] = real(rng);
        break;
      case DataType::kFloat16:
        t.data<Float16>()[i] = FloatToFloat16(real(rng));
        break;
      case DataType::kBFloat16:
        t.data<BFloat16>()[i] = FloatToBFloat16(real(rng));
        break;
      case DataType::kBool:
        t.data<bool>()[i] = small(rng) % 2 == 1;
        break;
      case DataType::kUint8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(small(rng));
        break;
      case DataType::kUint16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(small(rng));
        break;
      case DataType::kUint32:
        t.data<uint32_t>()[i] = static_cast<uint32_t>(small(rng));
        break;
      case DataType::kUint64:
        t.data<uint64_t>()[i] = static_cast<uint64_t>(small(rng));
        break;
      case DataType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(small(rng));
        break;
      case DataType::kInt16:
        t.data<int16_t>()[i] = static_cast<int16_t>(small(rng));
        break;
      case DataType::kInt32:
        t.data<int32_t>()[i] = small(rng);
        break;
      case DataType::kInt64:
        t.data<int64_t>()[i] = small(rng);
        break;
      case DataType::kBytes:
        t.data<std::string>()[i] = std::to_string(small(rng));
        break;
      case DataType::kInvalid:
        break;
    }
  }
  return t;
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

struct NodeStats {
  int node = -1;
  int64_t calls = 0;
  int64_t total_ns = 0;
  double flops = 0;
};

std::string NodeName(const Node& node, int index) {
  return node.name.empty() ? fmt::format("{}_{}", node.op_type, index) : node.name;
}

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

Status WriteTrace(const std::string& path, const Session& session,
                  const std::vector<RunProfile>& runs) {
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

Status Profile(const ProfileOptions& opt) {
  if (opt.batch < 1) return Status::InvalidArgument("--batch must be at least 1");
  if (opt.iterations < 1) return Status::InvalidArgument("--iterations must be at least 1");
  std::map<std::string, std::vector<int64_t>> given;
  for (const std::string& spec : opt.shapes) {
    KILN_ASSIGN_OR_RETURN(auto parsed, ParseShapeSpec(spec));
    given[parsed.first] = parsed.second;
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> graph, ImportOnnxModel(opt.model));
  // Profile what the server runs: the optimized graph (inputs and outputs keep their names).
  const int imported_nodes = graph->num_nodes();
  std::string weight_precision = "as imported";  // resolved by the optimizer
  if (!opt.no_optimize) {
    OptimizerOptions optimizer;
    optimizer.disabled_passes = opt.disabled_passes;
    optimizer.weight_precision = opt.weight_precision == "auto" ? "" : opt.weight_precision;
    KILN_ASSIGN_OR_RETURN(OptimizedGraph optimized, OptimizeGraph(graph, optimizer));
    graph = optimized.graph;
    weight_precision = optimized.weight_precision;
  }
  // Bytes of the initializers the session runs with (half weights count 2 bytes an element).
  uint64_t weight_bytes = 0;
  for (int v = 0; v < graph->num_values(); ++v) {
    if (graph->value(v).constant != nullptr) weight_bytes += graph->value(v).constant->size_bytes();
  }
  for (const auto& [name, dims] : given) {
    bool found = false;
    for (int id : graph->inputs) found = found || graph->value(id).name == name;
    if (!found) {
      return Status::InvalidArgument(
          fmt::format("--shape names '{}', which is not an input of "
                      "the model",
                      name));
    }
  }

  std::mt19937 rng(20240611);
  std::vector<OwnedTensor> owned;
  std::vector<Tensor> inputs;
  bool used_batch = false;
  for (int id : graph->inputs) {
    const Value& v = graph->value(id);
    KILN_ASSIGN_OR_RETURN(Shape shape, ResolveInputShape(v, given, opt.batch, &used_batch));
    KILN_ASSIGN_OR_RETURN(OwnedTensor t, RandomTensor(v, shape, rng));
    owned.push_back(std::move(t));
  }
  for (const OwnedTensor& t : owned) inputs.push_back(t.view());
  // Items per run: --batch when it was substituted, else the first input's leading dim.
  int64_t batch = opt.batch;
  if (!used_batch) batch = !inputs.empty() && inputs[0].rank() > 0 ? inputs[0].dim(0) : 1;

  SessionOptions session_options;
  session_options.intra_op_threads = opt.threads;
  session_options.memory_planning = !opt.no_memory_plan;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(graph, session_options));

  for (int i = 0; i < opt.warmup; ++i) {
    Result<std::vector<OwnedTensor>> r = session->Run(inputs);
    if (!r.ok()) return r.status().WithContext("warm-up run");
  }
  std::vector<RunProfile> runs(static_cast<size_t>(opt.iterations));
  for (RunProfile& profile : runs) {
    Result<std::vector<OwnedTensor>> r = session->RunWithProfile(inputs, &profile);
    if (!r.ok()) return r.status().WithContext("timed run");
  }

  std::vector<double> latency_ms;
  double total_ms = 0;
  std::vector<NodeStats> per_node(static_cast<size_t>(graph->num_nodes()));
  for (size_t n = 0; n < per_node.size(); ++n) per_node[n].node = static_cast<int>(n);
  int64_t node_total_ns = 0;
  for (const RunProfile& run : runs) {
    const double ms = static_cast<double>(run.end_ns - run.start_ns) / 1e6;
    latency_ms.push_back(ms);
    total_ms += ms;
    for (const NodeTiming& t : run.nodes) {
      NodeStats& s = per_node[static_cast<size_t>(t.node)];
      ++s.calls;
      s.total_ns += t.duration_ns;
      s.flops += t.flops;
      node_total_ns += t.duration_ns;
    }
  }
  std::sort(latency_ms.begin(), latency_ms.end());
  const double median_ms = Percentile(latency_ms, 50);
  const double p99_ms = Percentile(latency_ms, 99);
  const double mean_ms = total_ms / static_cast<double>(latency_ms.size());
  const double runs_per_s = total_ms > 0 ? static_cast<double>(runs.size()) / (total_ms / 1e3) : 0;
  const double items_per_s = static_cast<double>(batch) * runs_per_s;
  std::erase_if(per_node, [](const NodeStats& s) { return s.calls == 0; });
  std::stable_sort(per_node.begin(), per_node.end(),
                   [](const NodeStats& a, const NodeStats& b) { return a.total_ns > b.total_ns; });
  const MemoryPlanStats memory = session->memory_plan_stats();
  const MemoryPlanStats::Plan* plan = memory.plans.empty() ? nullptr : &memory.plans.front();
  const auto pct = [&](int64_t ns) {
    return node_total_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(node_total_ns)
                             : 0.0;
  };
  const auto gflops_per_s = [](const NodeStats& s) {
    return s.total_ns > 0 ? s.flops / static_cast<double>(s.total_ns) : 0.0;  // flop/ns = GFLOP/s
  };
  double total_flops = 0;
  for (const NodeStats& s : per_node) total_flops += s.flops;
  // The same times summed per op type, sorted by total time.
  struct OpStats {
    std::string op_type;
    int64_t calls = 0;
    int64_t nodes = 0;
    int64_t total_ns = 0;
    double flops = 0;
  };
  std::vector<OpStats> per_op;
  for (const NodeStats& s : per_node) {
    const std::string& op = graph->node(s.node).op_type;
    auto it = std::find_if(per_op.begin(), per_op.end(),
                           [&](const OpStats& o) { return o.op_type == op; });
    if (it == per_op.end()) it = per_op.insert(per_op.end(), OpStats{op});
    it->calls += s.calls;
    it->nodes += 1;
    it->total_ns += s.total_ns;
    it->flops += s.flops;
  }
  std::stable_sort(per_op.begin(), per_op.end(),
                   [](const OpStats& a, const OpStats& b) { return a.total_ns > b.total_ns; });

  // The process after the runs (weights, packed copies, plans) and its high-water mark (the
  // import usually sets it).
  const uint64_t rss = ProcStatusBytes("VmRSS");
  const uint64_t peak_rss = ProcStatusBytes("VmHWM");
  const CpuKernelInfo cpu = DescribeCpuKernels();
  const std::vector<std::pair<std::string, int>> notes = session->KernelNotes();
  if (opt.json) {
    std::string j = "{";
    j += fmt::format("\"model\":{},\"batch\":{},\"threads\":{},\"iterations\":{},\"warmup\":{},",
                     JsonString(opt.model), batch, session->intra_op_threads(), opt.iterations,
                     opt.warmup);
    j += fmt::format("\"optimized\":{},\"imported_nodes\":{},\"nodes_run\":{},",
                     opt.no_optimize ? "false" : "true", imported_nodes, graph->num_nodes());
    j += fmt::format(
        "\"weight_precision\":{},\"weight_bytes\":{},\"rss_bytes\":{},"
        "\"peak_rss_bytes\":{},",
        JsonString(weight_precision), weight_bytes, rss, peak_rss);
    j += fmt::format(
        "\"cpu\":{{\"kiln_isa\":{},\"onednn_isa\":{},\"int8_dot_products\":{},"
        "\"bf16_dot_products\":{}}},\"notes\":[",
        JsonString(cpu.kiln_isa), JsonString(cpu.onednn_isa),
        cpu.int8_dot_products ? "true" : "false", cpu.bf16_dot_products ? "true" : "false");
    for (size_t i = 0; i < notes.size(); ++i) {
      j += fmt::format("{}{{\"note\":{},\"nodes\":{}}}", i ? "," : "", JsonString(notes[i].first),
                       notes[i].second);
    }
    j += "],";
    j += fmt::format(
        "\"median_ms\":{:.6f},\"p99_ms\":{:.6f},\"mean_ms\":{:.6f},\"min_ms\":{:.6f},"
        "\"max_ms\":{:.6f},\"runs_per_s\":{:.3f},\"items_per_s\":{:.3f},\"gflop_per_run\":{:.6f},",
        median_ms, p99_ms, mean_ms, latency_ms.front(), latency_ms.back(), runs_per_s, items_per_s,
        total_flops / static_cast<double>(runs.size()) / 1e9);
    j += "\"inputs\":[";
    for (size_t i = 0; i < inputs.size(); ++i) {
      j += fmt::format("{}{{\"name\":{},\"dtype\":{},\"shape\":[{}]}}", i ? "," : "",
                       JsonString(graph->value(graph->inputs[i]).name),
                       JsonString(DataTypeName(inputs[i].dtype())),
                       fmt::join(inputs[i].shape().dims(), ","));
    }
    j += "],";
    j += fmt::format(
        "\"memory_plan\":{{\"planned\":{},\"arena_bytes\":{},\"unplanned_bytes\":{},"
        "\"live_peak_bytes\":{},\"planned_allocations\":{},\"heap_fallbacks\":{}}},",
        plan != nullptr ? "true" : "false", plan ? plan->arena_bytes : 0,
        plan ? plan->unplanned_bytes : 0, plan ? plan->live_peak_bytes : 0,
        plan ? plan->planned_allocations : 0, memory.heap_fallbacks);
    j += "\"nodes\":[";
    for (size_t i = 0; i < per_node.size(); ++i) {
      const NodeStats& s = per_node[i];
      const Node& node = graph->node(s.node);
      j += fmt::format(
          "{}{{\"name\":{},\"op_type\":{},\"provider\":{},\"calls\":{},\"total_ms\":{:.6f},"
          "\"avg_ms\":{:.6f},\"percent\":{:.3f}",
          i ? "," : "", JsonString(NodeName(node, s.node)), JsonString(node.op_type),
          JsonString(session->provider(s.node)), s.calls, static_cast<double>(s.total_ns) / 1e6,
          static_cast<double>(s.total_ns) / 1e6 / static_cast<double>(s.calls), pct(s.total_ns));
      if (s.flops > 0) {
        j += fmt::format(",\"flops\":{:.0f},\"gflops_per_s\":{:.3f}",
                         s.flops / static_cast<double>(s.calls), gflops_per_s(s));
      }
      j += "}";
    }
    j += "],\"op_types\":[";
    for (size_t i = 0; i < per_op.size(); ++i) {
      const OpStats& o = per_op[i];
      j += fmt::format(
          "{}{{\"op_type\":{},\"nodes\":{},\"calls\":{},\"total_ms\":{:.6f},\"percent\":{:.3f}",
          i ? "," : "", JsonString(o.op_type), o.nodes, o.calls,
          static_cast<double>(o.total_ns) / 1e6, pct(o.total_ns));
      if (o.flops > 0 && o.total_ns > 0) {
        j += fmt::format(",\"gflops_per_s\":{:.3f}", o.flops / static_cast<double>(o.total_ns));
      }
      j += "}";
    }
    j += "]}";
    std::printf("%s\n", j.c_str());
  } else {
    std::string t;
    t += fmt::format("model       {}\n", opt.model);
    std::vector<std::string> shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      shapes.push_back(fmt::format("{} {}{}", graph->value(graph->inputs[i]).name,
                                   DataTypeName(inputs[i].dtype()), inputs[i].shape().ToString()));
    }
    t += fmt::format("inputs      {}\n", fmt::join(shapes, ", "));
    t += fmt::format("batch       {}   threads {}   iterations {} (after {} warm-up)\n", batch,
                     session->intra_op_threads(), opt.iterations, opt.warmup);
    t +=
        fmt::format("cpu         kiln kernels {}, oneDNN {} (INT8 VNNI {}, BF16 dot products {})\n",
                    cpu.kiln_isa, cpu.onednn_isa, cpu.int8_dot_products ? "yes" : "no",
                    cpu.bf16_dot_products ? "yes" : "no");
    for (const auto& [note, nodes] : notes) {
      t += fmt::format("note        {} node{}: {}\n", nodes, nodes == 1 ? "" : "s", note);
    }
    t += fmt::format(
        "weights     {}   initializers {:.1f} MiB   process rss {:.1f} MiB (peak "
        "{:.1f} MiB)\n",
        weight_precision, static_cast<double>(weight_bytes) / (1 << 20),
        static_cast<double>(rss) / (1 << 20), static_cast<double>(peak_rss) / (1 << 20));
    t += fmt::format(
        "latency     median {:.3f} ms   p99 {:.3f} ms   mean {:.3f} ms   min {:.3f} ms\n",
        median_ms, p99_ms, mean_ms, latency_ms.front());
    t += fmt::format("throughput  {:.2f} items/s ({:.2f} runs/s)", items_per_s, runs_per_s);
    if (total_flops > 0 && total_ms > 0) {
      t += fmt::format("   {:.2f} GFLOP/s overall", total_flops / (total_ms * 1e6));
    }
    t += "\n";
    if (plan != nullptr) {
      t += fmt::format(
          "memory      planned arena {:.3f} MiB vs {:.3f} MiB unplanned ({:.1f}%; live peak "
          "{:.3f} MiB), {} intermediates planned, {} heap fallbacks\n",
          static_cast<double>(plan->arena_bytes) / 1048576.0,
          static_cast<double>(plan->unplanned_bytes) / 1048576.0,
          plan->unplanned_bytes ? 100.0 * static_cast<double>(plan->arena_bytes) /
                                      static_cast<double>(plan->unplanned_bytes)
                                : 0.0,
          static_cast<double>(plan->live_peak_bytes) / 1048576.0, plan->planned_allocations,
          memory.heap_fallbacks);
    } else {
      t += "memory      not planned (--no-memory-plan)\n";
    }
    t += fmt::format("\n{:<40} {:<18} {:<8} {:>6} {:>11} {:>10} {:>6} {:>9}\n", "node", "op",
                     "provider", "calls", "total ms", "avg ms", "%", "GFLOP/s");
    for (const NodeStats& s : per_node) {
      const Node& node = graph->node(s.node);
      std::string name = NodeName(node, s.node);
      if (name.size() > 40) name = name.substr(0, 37) + "...";
      const std::string rate = s.flops > 0 ? fmt::format("{:.2f}", gflops_per_s(s)) : "-";
      t += fmt::format("{:<40} {:<18} {:<8} {:>6} {:>11.3f} {:>10.4f} {:>6.1f} {:>9}\n", name,
                       node.op_type, session->provider(s.node), s.calls,
                       static_cast<double>(s.total_ns) / 1e6,
                       static_cast<double>(s.total_ns) / 1e6 / static_cast<double>(s.calls),
                       pct(s.total_ns), rate);
    }
    t += fmt::format("\n{:<24} {:>6} {:>8} {:>11} {:>6} {:>9}\n", "op type", "nodes", "calls",
                     "total ms", "%", "GFLOP/s");
    for (const OpStats& o : per_op) {
      const std::string rate =
          o.flops > 0 && o.total_ns > 0
              ? fmt::format("{:.2f}", o.flops / static_cast<double>(o.total_ns))
              : "-";
      t += fmt::format("{:<24} {:>6} {:>8} {:>11.3f} {:>6.1f} {:>9}\n", o.op_type, o.nodes, o.calls,
                       static_cast<double>(o.total_ns) / 1e6, pct(o.total_ns), rate);
    }
    std::fputs(t.c_str(), stdout);
  }
  if (!opt.trace.empty()) {
    KILN_RETURN_IF_ERROR(WriteTrace(opt.trace, *session, runs));
    if (!opt.json) std::printf("\ntrace written to %s\n", opt.trace.c_str());
  }
  return Status::OK();
}

}  // namespace

CommandMain AddProfileCommand(CLI::App& app) {
  auto opt = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Time a model on random inputs: latency percentiles, throughput, memory plan, per-node "
      "table, Chrome trace");
  cmd->add_option("model", opt->model, "ONNX model file")->required();
  cmd->add_option("--batch", opt->batch, "Batch size: replaces a symbolic first dim of the inputs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--shape", opt->shapes,
                  "NAME:d1,d2,...: the whole shape of input NAME (for symbolic dims other than "
                  "the first, or to override); repeatable");
  cmd->add_option("--iterations", opt->iterations, "Timed runs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "Untimed runs before the timed ones")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads,
                  "Intra-op threads (0 = the machine's hardware threads)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_flag("--json", opt->json, "Print one JSON object instead of the table");
  cmd->add_flag("--no-optimize", opt->no_optimize,
                "Profile the graph as imported, without the graph optimizer");
  cmd->add_option("--disable-pass", opt->disabled_passes,
                  "Do not run the optimizer pass NAME (repeatable; `kiln optimize --list-passes`)");
  AddWeightPrecisionOption(*cmd, opt->weight_precision);
  cmd->add_flag("--no-memory-plan", opt->no_memory_plan,
                "Run without static memory plans (every intermediate allocated as it comes), to "
                "compare");
  cmd->add_option("--trace", opt->trace,
                  "Write a Chrome trace (JSON; chrome://tracing or ui.perfetto.dev) to this file");
  return [opt] {
    Status s = Profile(*opt);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln profile: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
