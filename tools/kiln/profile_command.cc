// SPDX-License-Identifier: Apache-2.0
// `kiln profile`: run a model many times on random inputs, or on inputs read from files, and
// report where the time goes.
//
//   kiln profile model.onnx --batch 8 --iterations 100 --warmup 10 --threads 2
//   kiln profile bert.onnx --shape input_ids:1,128 --shape attention_mask:1,128 --json
//   kiln profile bert.onnx --input input_ids=ids.npy --input attention_mask=mask.npy
//   kiln profile model.onnx --inputs-dir test_data_set_0    # input_0.pb, input_1.pb, ...
//   kiln profile model.onnx --trace trace.json     # open in https://ui.perfetto.dev
//   kiln profile model.onnx --weight-precision fp16 # weights held in FLOAT16
//
// Inputs given with --input NAME=FILE, --inputs or --inputs-dir (tools/kiln/input_files.h, the
// files `kiln run` reads) are fed to every run as read; they must match the dtype and the known
// dims the model declares. The others are random data of each input's declared dtype (floats
// uniform in [-1, 1), integers in [0, 10), booleans 0/1) and shape: a symbolic first dim becomes
// --batch, any other symbolic dim must be given with --shape NAME:d1,d2,... (which sets the whole
// shape of that input). After --warmup untimed runs (the first records the memory plan of the
// shape), --iterations runs are timed end to end and per node (Session::RunWithProfile) and
// summarized (SummarizeRuns, runtime/profiler.h). The report (profile_writers.h): latency median
// / p99 / mean, throughput (batch x runs per second), the inputs and outputs, the memory plan,
// and a per-node table sorted by total time with % of the node total, calls, op type, provider
// and GFLOP/s for the ops with a FLOP count, then the same summed per op type. --json prints one
// JSON object instead; --trace writes a Chrome trace (one "X" event per run and per node call,
// in microseconds).
//
// Exit status: 0 on success; 1 with a one-line reason on stderr on any error.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/thread_wait.h"
#include "graph/onnx/importer.h"
#include "kernels/cpu/cpu_kernels.h"
#include "opt/optimizer.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/devices.h"
#include "tools/kiln/input_files.h"
#include "tools/kiln/profile_writers.h"

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
  bool fixed_threads = false;
  bool no_optimize = false;
  std::vector<std::string> disabled_passes;
  std::string weight_precision = "auto";  // auto | fp32 | fp16 | bf16
  InputFileFlags input_files;             // inputs fed from files; the others are random
  LlmProfileOptions llm;                  // generative models (llm_profile.cc)
  std::string device = "cpu";             // cpu | cuda:N
  DeviceFlags devices;
};

// "cpu" or "cuda:N".
Result<Device> ParseDeviceFlag(const std::string& text) {
  if (text == "cpu") return Device::Cpu();
  int index = -1;
  if (text.rfind("cuda:", 0) == 0) {
    const char* begin = text.data() + 5;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && begin != end && index >= 0) return Device::Cuda(index);
  }
  return Status::InvalidArgument(
      fmt::format("--device '{}': expected cpu or cuda:N (cuda:0 is the first GPU)", text));
}

// A generative model: a .gguf file or a directory with config.json (a Hugging Face checkpoint).
bool IsGenerativeModel(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  std::ifstream config(path + "/config.json");
  return config.good();
}

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
        "input '{}' has no declared shape; give it with --shape {}:d1,d2,... or the data with "
        "--input {}=FILE",
        v.name, v.name, v.name));
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
          "input '{}' ({}): dim {} ('{}') is symbolic; give the shape with --shape {}:d1,d2,... "
          "or the data with --input {}=FILE",
          v.name, v.type.ToString(), i, d.symbol.empty() ? "?" : d.symbol, v.name, v.name));
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

using ShapeSpecs = std::map<std::string, std::vector<int64_t>>;

Result<ShapeSpecs> ParseShapeSpecs(const std::vector<std::string>& specs) {
  ShapeSpecs given;
  for (const std::string& spec : specs) {
    KILN_ASSIGN_OR_RETURN(auto parsed, ParseShapeSpec(spec));
    given[parsed.first] = parsed.second;
  }
  return given;
}

// The graph profiled: what the server runs, the optimized graph (inputs and outputs keep their
// names), unless --no-optimize.
struct ProfiledGraph {
  std::shared_ptr<const Graph> graph;
  int imported_nodes = 0;
  std::string weight_precision = "as imported";  // resolved by the optimizer
  uint64_t weight_bytes = 0;  // initializers run with (half weights count 2 bytes an element)
};

Result<ProfiledGraph> ImportProfiledGraph(const ProfileOptions& opt) {
  ProfiledGraph p;
  KILN_ASSIGN_OR_RETURN(p.graph, ImportOnnxModel(opt.model));
  p.imported_nodes = p.graph->num_nodes();
  if (!opt.no_optimize) {
    OptimizerOptions optimizer;
    optimizer.disabled_passes = opt.disabled_passes;
    optimizer.target = KernelTargetFor(opt.device == "cpu" ? DeviceType::kCpu : DeviceType::kCuda);
    optimizer.weight_precision = opt.weight_precision == "auto" ? "" : opt.weight_precision;
    KILN_ASSIGN_OR_RETURN(OptimizedGraph optimized, OptimizeGraph(p.graph, optimizer));
    p.graph = optimized.graph;
    p.weight_precision = optimized.weight_precision;
  }
  for (int v = 0; v < p.graph->num_values(); ++v) {
    const Value& value = p.graph->value(v);
    if (value.constant != nullptr) p.weight_bytes += value.constant->size_bytes();
  }
  return p;
}

// What every run feeds, in graph-input order.
struct ProfileInputs {
  std::vector<OwnedTensor> tensors;
  std::vector<Tensor> views;
  std::vector<ProfiledValue> described;
  int64_t batch = 1;  // items per run
};

// The tensor read for input `v` from `path`, checked against the model.
Result<OwnedTensor> FileInput(const Value& v, const RuntimeValue& value, const std::string& path,
                              const ShapeSpecs& shapes) {
  if (shapes.count(v.name) > 0) {
    return Status::InvalidArgument(fmt::format(
        "input '{}' is read from '{}'; --shape applies to random inputs only", v.name, path));
  }
  if (!value.is_tensor()) {
    return Status::InvalidArgument(
        fmt::format("input '{}' from '{}' is a {}; kiln profile feeds tensors only", v.name, path,
                    value.Describe()));
  }
  KILN_RETURN_IF_ERROR(CheckInputFile(value, v, path, /*check_dims=*/true));
  return value.tensor();
}

Result<ProfileInputs> MakeProfileInputs(const ProfileOptions& opt, const ShapeSpecs& shapes,
                                        const Graph& graph) {
  for (const auto& [name, dims] : shapes) {
    bool found = false;
    for (int id : graph.inputs) found = found || graph.value(id).name == name;
    if (!found) {
      return Status::InvalidArgument(
          fmt::format("--shape names '{}', which is not an input of the model", name));
    }
  }
  KILN_ASSIGN_OR_RETURN(InputFiles files, ReadInputFiles(opt.input_files, graph, opt.model));
  std::mt19937 rng(20240611);
  ProfileInputs in;
  bool used_batch = false;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const Value& v = graph.value(graph.inputs[i]);
    OwnedTensor t;
    if (files.given(i)) {
      KILN_ASSIGN_OR_RETURN(t, FileInput(v, files.values[i], files.paths[i], shapes));
    } else {
      KILN_ASSIGN_OR_RETURN(Shape shape, ResolveInputShape(v, shapes, opt.batch, &used_batch));
      KILN_ASSIGN_OR_RETURN(t, RandomTensor(v, shape, rng));
    }
    in.described.push_back({v.name, t.dtype(), t.shape(), files.paths[i]});
    in.tensors.push_back(std::move(t));
  }
  for (const OwnedTensor& t : in.tensors) in.views.push_back(t.view());
  // Items per run: --batch when it was substituted, else the first input's leading dim.
  in.batch = opt.batch;
  if (!used_batch) in.batch = !in.views.empty() && in.views[0].rank() > 0 ? in.views[0].dim(0) : 1;
  return in;
}

struct TimedRuns {
  std::vector<RunProfile> runs;
  std::vector<OwnedTensor> outputs;  // of the last run
};

// --warmup untimed runs, then --iterations timed ones.
Result<TimedRuns> TimeRuns(const Session& session, std::span<const Tensor> inputs,
                           const ProfileOptions& opt) {
  for (int i = 0; i < opt.warmup; ++i) {
    Result<std::vector<OwnedTensor>> r = session.Run(inputs);
    if (!r.ok()) return r.status().WithContext("warm-up run");
  }
  TimedRuns timed;
  timed.runs.resize(static_cast<size_t>(opt.iterations));
  for (RunProfile& profile : timed.runs) {
    Result<std::vector<OwnedTensor>> r = session.RunWithProfile(inputs, &profile);
    if (!r.ok()) return r.status().WithContext("timed run");
    timed.outputs = std::move(r).value();
  }
  return timed;
}

ProfileReport MakeReport(const ProfileOptions& opt, const ProfiledGraph& pg, ProfileInputs inputs,
                         const Session& session, const TimedRuns& timed) {
  const Graph& graph = *pg.graph;
  ProfileReport r;
  r.model = opt.model;
  r.batch = inputs.batch;
  r.threads = session.intra_op_threads();
  r.adaptive = !opt.fixed_threads && r.threads > 1;
  for (const RunProfile& run : timed.runs) r.narrow_runs += run.threads == 1 ? 1 : 0;
  r.width_switches = session.thread_switches();
  r.iterations = opt.iterations;
  r.warmup = opt.warmup;
  r.optimized = !opt.no_optimize;
  r.imported_nodes = pg.imported_nodes;
  r.nodes_run = graph.num_nodes();
  r.weight_precision = pg.weight_precision;
  r.weight_bytes = pg.weight_bytes;
  // The process after the runs (weights, packed copies, plans) and its high-water mark (the
  // import usually sets it).
  r.rss_bytes = ProcStatusBytes("VmRSS");
  r.peak_rss_bytes = ProcStatusBytes("VmHWM");
  r.cpu = DescribeCpuKernels();
  r.kernel_notes = session.KernelNotes();
  r.thread_wait = DescribeThreadWait();
  r.inputs = std::move(inputs.described);
  for (size_t i = 0; i < timed.outputs.size() && i < graph.outputs.size(); ++i) {
    const OwnedTensor& t = timed.outputs[i];
    r.outputs.push_back({graph.value(graph.outputs[i]).name, t.dtype(), t.shape(), ""});
  }
  r.memory = session.memory_plan_stats();
  r.summary = SummarizeRuns(graph, timed.runs);
  return r;
}

Status Profile(const ProfileOptions& opt) {
  if (opt.batch < 1) return Status::InvalidArgument("--batch must be at least 1");
  if (opt.iterations < 1) return Status::InvalidArgument("--iterations must be at least 1");
  KILN_ASSIGN_OR_RETURN(ShapeSpecs shapes, ParseShapeSpecs(opt.shapes));
  KILN_ASSIGN_OR_RETURN(const Device device, ParseDeviceFlag(opt.device));
  if (!device.is_cpu()) {
    KILN_RETURN_IF_ERROR(SetUpDevices(opt.devices, /*log=*/false));
    if (BackendRegistry::Find(device) == nullptr) {
      return Status::InvalidArgument(fmt::format(
          "--device {}: no such GPU ({})", device.ToString(),
          BackendRegistry::OfType(DeviceType::kCuda).empty()
              ? BackendRegistry::MissingReason(DeviceType::kCuda)
              : "this machine has " +
                    std::to_string(BackendRegistry::OfType(DeviceType::kCuda).size()) + " GPU(s)"));
    }
  }
  KILN_ASSIGN_OR_RETURN(ProfiledGraph pg, ImportProfiledGraph(opt));
  KILN_ASSIGN_OR_RETURN(ProfileInputs inputs, MakeProfileInputs(opt, shapes, *pg.graph));
  SessionOptions session_options;
  session_options.device = device;
  session_options.intra_op_threads = opt.threads;
  session_options.memory_planning = !opt.no_memory_plan;
  session_options.adapt_threads = !opt.fixed_threads;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        Session::Create(pg.graph, session_options));
  KILN_ASSIGN_OR_RETURN(TimedRuns timed, TimeRuns(*session, inputs.views, opt));
  const ProfileReport report = MakeReport(opt, pg, std::move(inputs), *session, timed);
  if (opt.json) {
    std::printf("%s\n", ProfileReportJson(report, *session).c_str());
  } else {
    std::fputs(FormatProfileReport(report, *session).c_str(), stdout);
  }
  if (!opt.trace.empty()) {
    KILN_RETURN_IF_ERROR(WriteChromeTrace(opt.trace, *session, timed.runs));
    if (!opt.json) std::printf("\ntrace written to %s\n", opt.trace.c_str());
  }
  return Status::OK();
}

}  // namespace

CommandMain AddProfileCommand(CLI::App& app) {
  auto opt = std::make_shared<ProfileOptions>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Time a model on random inputs or inputs from files: latency percentiles, throughput, "
      "memory plan, per-node table, Chrome trace");
  cmd->add_option("model", opt->model,
                  "ONNX model file, or a generative model (GGUF file or Hugging Face directory)")
      ->required();
  cmd->add_option("--batch", opt->batch,
                  "Batch size: replaces a symbolic first dim of the random inputs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--shape", opt->shapes,
                  "NAME:d1,d2,...: the whole shape of random input NAME (for symbolic dims other "
                  "than the first, or to override); repeatable");
  AddInputFileOptions(*cmd, opt->input_files,
                      "fed to every run as read (dtype and known dims must match the model); "
                      "inputs without a file get random data");
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
  cmd->add_flag("--fixed-threads", opt->fixed_threads,
                "Run every iteration on all --threads threads (by default a run's width adapts "
                "between --threads and 1 to what the machine gives; the report says how many "
                "runs were narrow)");
  cmd->add_flag("--json", opt->json, "Print one JSON object instead of the table");
  cmd->add_flag("--no-optimize", opt->no_optimize,
                "Profile the graph as imported, without the graph optimizer");
  cmd->add_option("--disable-pass", opt->disabled_passes,
                  "Do not run the optimizer pass NAME (repeatable; `kiln optimize --list-passes`)");
  AddWeightPrecisionOption(*cmd, opt->weight_precision);
  cmd->add_flag("--no-memory-plan", opt->no_memory_plan,
                "Run without static memory plans (every intermediate allocated as it comes), to "
                "compare");
  cmd->add_option("--device", opt->device,
                  "Where the model runs: cpu, or cuda:N (nodes without a CUDA kernel run on the "
                  "CPU; the per-node table then shows device times measured with CUDA events and "
                  "Nsight sees each node as an NVTX range)")
      ->capture_default_str();
  AddDeviceFlags(*cmd, &opt->devices);
  cmd->add_option("--trace", opt->trace,
                  "Write a Chrome trace (JSON; chrome://tracing or ui.perfetto.dev) to this file");
  auto* llm = cmd->add_option_group("generative models", "For a GGUF file or HF directory");
  llm->add_option("--prompt-tokens", opt->llm.prompt_tokens, "Prompt-processing tokens (pp)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  llm->add_option("--gen-tokens", opt->llm.gen_tokens, "Decode steps (tg)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  llm->add_option("--parallel", opt->llm.parallel,
                  "Sequences decoded together in the batched-decode test (1: skip it)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  llm->add_option("--parallel-prompt-tokens", opt->llm.parallel_prompt_tokens,
                  "Prompt tokens of each batched-decode sequence")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  llm->add_option("--batch-size", opt->llm.batch_size, "Prompt tokens per step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  llm->add_option("--repetitions", opt->llm.repetitions,
                  "Runs of each test (the median is reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return [opt] {
    if (IsGenerativeModel(opt->model)) {
      opt->llm.model = opt->model;
      opt->llm.threads = opt->threads;
      opt->llm.json = opt->json;
      opt->llm.warmup = std::max(opt->warmup, 1);
      Status s = ProfileLlm(opt->llm);
      if (!s.ok()) {
        std::fprintf(stderr, "kiln profile: %s\n", s.message().c_str());
        return 1;
      }
      return 0;
    }
    Status s = Profile(*opt);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln profile: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
