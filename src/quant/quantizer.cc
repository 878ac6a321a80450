// SPDX-License-Identifier: Apache-2.0
// The quantize and validate workflows (quantizer.h).

#include "quant/quantizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <system_error>

#include "graph/onnx/exporter.h"
#include "graph/onnx/importer.h"
#include "kernels/target.h"
#include "opt/optimizer.h"
#include "quant/model_metadata.h"
#include "runtime/session.h"

namespace kiln::quant {
namespace {

namespace fs = std::filesystem;

void Log(const LogFn& log, std::string_view line) {
  if (log) log(line);
}

// A session over `graph` as kiln serves it: the full optimizer, the best kernels.
// `weight_precision`: OptimizerOptions::weight_precision ("" auto, or "fp16" / "bf16" for the
// half-precision runs, so the constant weights are held as the model stores them).
Result<std::unique_ptr<Session>> MakeSession(const std::shared_ptr<const Graph>& graph, int threads,
                                             const std::string& weight_precision) {
  OptimizerOptions opt_options;
  opt_options.weight_precision = weight_precision;
  opt_options.target = KernelTargetFor(DeviceType::kCpu);
  KILN_ASSIGN_OR_RETURN(OptimizedGraph optimized, OptimizeGraph(graph, opt_options));
  SessionOptions options;
  options.intra_op_threads = threads;
  return Session::Create(optimized.graph, options);
}

struct Evaluation {
  std::unique_ptr<Session> session;  // kept for further timing passes
  RunResult run;
  Metrics metrics;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

// Runs `graph` over `data`; with `log`, a progress line at every quarter of a long run.
Result<Evaluation> Evaluate(const std::shared_ptr<const Graph>& graph, const Dataset& data,
                            const RunOptions& run_options, const Tensor* reference,
                            const LogFn& log = nullptr, const std::string& weight_precision = "") {
  Evaluation e;
  KILN_ASSIGN_OR_RETURN(e.session, MakeSession(graph, run_options.threads, weight_precision));
  const Session* session = e.session.get();
  int64_t last_quarter = 0;
  const bool long_run =
      data.num_samples > 8 * EffectiveBatchSize(session->graph(), run_options.batch_size);
  KILN_ASSIGN_OR_RETURN(e.run,
                        RunDataset(*session, data, run_options, [&](int64_t done, int64_t total) {
                          const int64_t quarter = 4 * done / std::max<int64_t>(total, 1);
                          if (log && long_run && quarter > last_quarter && done < total) {
                            last_quarter = quarter;
                            log(fmt::format("  {}/{} samples", done, total));
                          }
                        }));
  const Tensor* labels = data.labels ? &data.labels->view() : nullptr;
  KILN_ASSIGN_OR_RETURN(e.metrics, ComputeMetrics(e.run.output.view(), reference, labels));
  e.metrics.items_per_s =
      e.run.seconds > 0 ? static_cast<double>(e.run.samples) / e.run.seconds : 0;
  return e;
}

bool HasQdq(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.domain.empty() && (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear")) {
      return true;
    }
  }
  return false;
}

Result<std::string> ReadFile(const std::string& path, std::string_view kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("cannot open {} '{}'", kind, path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::InvalidArgument(fmt::format("cannot read {} '{}'", kind, path));
  return ss.str();
}

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

// --- JSON ---------------------------------------------------------------------------------------

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);
}

std::string MetricsJsonFields(const Metrics& m) {
  std::string s = fmt::format("\"samples\": {}", m.samples);
  if (m.top1) s += fmt::format(", \"top1\": {}", JsonNumber(*m.top1));
  if (m.top5) s += fmt::format(", \"top5\": {}", JsonNumber(*m.top5));
  s += fmt::format(", \"agreement_top1\": {}, \"mean_cosine\": {}, \"items_per_s\": {}",
                   JsonNumber(m.agreement_top1), JsonNumber(m.mean_cosine),
                   JsonNumber(m.items_per_s));
  return s;
}

std::string Percent(const std::optional<double>& v) {
  return v ? fmt::format("{:.2f}%", *v) : std::string("-");
}

std::string_view ActivationTypeName(ActivationType t) {
  return t == ActivationType::kUint8 ? "uint8 asymmetric" : "int8 symmetric";
}

}  // namespace

Result<Int8Target> ResolveInt8Target(std::string_view target_cpu) {
  const bool native = target_cpu == "native";
  if (!native && target_cpu != "avx2" && target_cpu != "vnni") {
    return Status::InvalidArgument(
        fmt::format("unknown --target-cpu '{}' (expected native, avx2 or vnni)", target_cpu));
  }
  const bool here_vnni = KernelTargetFor(DeviceType::kCpu).int8_dot_products;
  Int8Target t;
  t.cpu = native ? (here_vnni ? "vnni" : "avx2") : std::string(target_cpu);
  const bool vnni = t.cpu == "vnni";
  t.weight_max = vnni ? kWeightMax8Bit : kWeightMax7Bit;
  t.weight_bits = vnni ? 8 : 7;
  const std::string why = native ? fmt::format("--target-cpu native: this CPU {} VNNI dot products",
                                               here_vnni ? "has" : "has no")
                                 : fmt::format("--target-cpu {}", t.cpu);
  t.note = vnni ? fmt::format(
                      "8-bit weights in [-127, 127] for CPUs with VNNI ({}); on a CPU "
                      "without VNNI they run exact at about half the INT8 speed "
                      "(quantize with --target-cpu avx2 for those)",
                      why)
                : fmt::format(
                      "7-bit weights in [-64, 64] for AVX2 CPUs ({}): exact at full "
                      "speed on every AVX2 CPU, with or without VNNI",
                      why);
  return t;
}

Status WriteFile(const std::string& path, std::string_view bytes, std::string_view kind) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status::InvalidArgument(fmt::format("cannot write {} '{}'", kind, path));
  return Status::OK();
}

namespace {

// The prepared graph, its layers and the activation parameters from calibration.
struct Calibrated {
  std::shared_ptr<const Graph> graph;
  std::vector<QuantizableLayer> layers;
  std::map<int, ActivationParams> params;
  int64_t samples = 0;
};

Result<Calibrated> PrepareAndCalibrate(const std::shared_ptr<const Graph>& imported,
                                       const std::string& what, const std::string& calib_dir,
                                       CalibrationMethod method, double percentile,
                                       ActivationType activation_type, int64_t calib_samples,
                                       const RunOptions& run_options, const LogFn& log) {
  if (HasQdq(*imported)) {
    return Status::FailedPrecondition(fmt::format(
        "{} already holds QuantizeLinear/DequantizeLinear nodes; quantize its FP32 source", what));
  }
  Calibrated c;
  Log(log, "preparing the graph (constant folding, Conv+BatchNormalization folding)");
  KILN_ASSIGN_OR_RETURN(c.graph, PrepareGraph(imported));
  c.layers = FindQuantizableLayers(*c.graph);
  if (c.layers.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "{} has no quantizable layer (Conv, Gemm or MatMul on FP32 activations)", what));
  }
  Log(log, fmt::format("{} quantizable layers", c.layers.size()));
  KILN_ASSIGN_OR_RETURN(Dataset calib, LoadDataset(calib_dir, *c.graph, calib_samples));
  c.samples = calib.num_samples;
  const std::vector<int> observed = ActivationsToCalibrate(*c.graph, c.layers);
  Log(log, fmt::format("calibrating {} activations on {} samples from '{}' ({})", observed.size(),
                       calib.num_samples, calib_dir, CalibrationMethodName(method)));
  int64_t last_pct = -1;
  KILN_ASSIGN_OR_RETURN(
      auto hists,
      CollectHistograms(*c.graph, observed, calib, run_options, [&](int64_t done, int64_t total) {
        const int64_t pct = 100 * done / std::max<int64_t>(total, 1);
        if (pct / 25 != last_pct / 25 || done == total) {
          last_pct = pct;
          Log(log, fmt::format("  calibration {}/{} samples", done, total));
        }
      }));
  for (const auto& [id, h] : hists) {
    const TensorRange r = ComputeRange(h, method, percentile);
    Result<ActivationParams> p = ComputeActivationParams(r.min, r.max, activation_type);
    if (!p.ok()) {
      return p.status().WithContext(fmt::format("activation '{}'", c.graph->value(id).name));
    }
    c.params[id] = p.value();
  }
  ShareScalesThroughDataMovement(*c.graph, c.params);
  return c;
}

}  // namespace

Result<QuantizedGraph> QuantizeGraph(const std::shared_ptr<const Graph>& graph,
                                     const std::string& calib_dir,
                                     const QuantizeGraphOptions& options) {
  if (graph == nullptr) return Status::InvalidArgument("QuantizeGraph: null graph");
  RunOptions run_options;
  run_options.batch_size = options.batch_size;
  run_options.threads = options.threads;
  KILN_ASSIGN_OR_RETURN(
      Calibrated c,
      PrepareAndCalibrate(graph, "the model", calib_dir, options.method, options.percentile,
                          options.activation_type, options.calib_samples, run_options, nullptr));
  KILN_ASSIGN_OR_RETURN(Int8Target target, ResolveInt8Target("native"));
  QdqOptions qdq_options;
  qdq_options.per_channel = options.per_channel;
  qdq_options.weight_max = target.weight_max;
  KILN_ASSIGN_OR_RETURN(
      QdqResult q, InsertQdq(*c.graph, c.layers, std::vector<bool>(c.layers.size(), true), c.params,
                             qdq_options));
  QuantizedGraph out;
  out.graph = std::move(q.graph);
  out.layers = static_cast<int>(c.layers.size());
  out.calib_samples = c.samples;
  return out;
}

// --- quantize -----------------------------------------------------------------------------------

namespace {

// The metadata_props of a model written from the FP32 model at `model` (content `source_bytes`).
std::vector<std::pair<std::string, std::string>> SourceMetadata(const std::string& model,
                                                                std::string_view source_bytes,
                                                                std::string_view method) {
  std::error_code ec;
  const fs::path abs = fs::absolute(model, ec);
  return {{std::string(kSourceKey), ec ? model : abs.string()},
          {std::string(kSourceHashKey), ContentHash(source_bytes)},
          {std::string(kMethodKey), std::string(method)}};
}

// The INT8-only settings, refused for a half-precision conversion rather than ignored.
Status CheckHalfOptions(const QuantizeOptions& o) {
  auto refuse = [&](std::string_view flag, std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("{} does not apply to --precision {}: {}", flag, o.precision, why));
  };
  constexpr std::string_view kNoCalibration =
      "half-precision weights need no calibration (evaluation data goes in --data)";
  constexpr std::string_view kAllLayers =
      "every layer keeps computing in FP32 and only the storage of large weights changes, so "
      "there is no per-layer choice to make";
  if (!o.calib_dir.empty()) return refuse("--calib-dir", kNoCalibration);
  if (o.calib_samples != 0) return refuse("--calib-samples", kNoCalibration);
  if (o.method != CalibrationMethod::kMinMax) return refuse("--method", kNoCalibration);
  if (o.per_channel) return refuse("--per-channel", "half-precision weights have no scales");
  if (o.target_cpu != "native") {
    return refuse("--target-cpu",
                  "it chooses the INT8 weight range; half-precision weights have none");
  }
  if (o.activation_type != ActivationType::kUint8) {
    return refuse("--symmetric-activations", "activations stay FP32");
  }
  if (o.keep_fp32 != 0) return refuse("--keep-fp32", kAllLayers);
  if (o.max_accuracy_drop) return refuse("--max-accuracy-drop", kAllLayers);
  if (o.sensitivity) return refuse("--sensitivity", kAllLayers);
  return Status::OK();
}

// FP32 and the written half-precision model on `options.data_dir`, into `report`.
Status EvaluateHalf(const QuantizeOptions& options, DataType dtype,
                    const std::shared_ptr<const Graph>& graph, QuantizeReport& report) {
  const LogFn& log = options.log;
  RunOptions run_options;
  run_options.batch_size = options.batch_size;
  run_options.threads = options.threads;
  KILN_ASSIGN_OR_RETURN(Dataset eval, LoadDataset(options.data_dir, *graph, options.eval_samples));
  report.eval_dir = options.data_dir;
  report.eval_labels = eval.labels.has_value();
  Log(log,
      fmt::format("FP32 reference on {} samples from '{}'", eval.num_samples, report.eval_dir));
  KILN_ASSIGN_OR_RETURN(Evaluation fp32, Evaluate(graph, eval, run_options, nullptr, log));
  report.fp32 = fp32.metrics;
  // The written file, as kiln loads it.
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> written, ImportOnnxModel(options.out));
  Log(log, fmt::format("{} on {} samples", DataTypeName(dtype), eval.num_samples));
  KILN_ASSIGN_OR_RETURN(Evaluation e, Evaluate(written, eval, run_options, &fp32.run.output.view(),
                                               log, report.precision));
  report.quantized = e.metrics;
  return Status::OK();
}

// The FP32 model a half-precision conversion starts from: not quantized, not half already.
Result<std::shared_ptr<Graph>> ImportHalfSource(const QuantizeOptions& options,
                                                const std::string& source_bytes) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> imported,
                        ImportOnnxModelFromString(source_bytes, options.model));
  if (HasQdq(*imported)) {
    return Status::FailedPrecondition(
        fmt::format("'{}' holds QuantizeLinear/DequantizeLinear nodes; convert its FP32 source",
                    options.model));
  }
  if (std::optional<DataType> held = HalfInitializerType(*imported)) {
    return Status::FailedPrecondition(
        fmt::format("'{}' already holds {} initializers; convert its FP32 source", options.model,
                    DataTypeName(*held)));
  }
  return imported;
}

// QuantizeModel for fp16 / bf16: half-precision weights, no calibration.
Result<QuantizeReport> QuantizeHalf(const QuantizeOptions& options, DataType dtype,
                                    std::chrono::steady_clock::time_point start) {
  KILN_RETURN_IF_ERROR(CheckHalfOptions(options));
  const LogFn& log = options.log;
  QuantizeReport report;
  report.precision = std::string(HalfPrecisionName(dtype));
  report.model = options.model;
  report.out = options.out;

  KILN_ASSIGN_OR_RETURN(std::string source_bytes, ReadFile(options.model, "model file"));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> imported, ImportHalfSource(options, source_bytes));
  Log(log, "preparing the graph (constant folding, Conv+BatchNormalization folding)");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> graph, PrepareGraph(imported));
  KILN_ASSIGN_OR_RETURN(HalfWeights half, ConvertWeightsToHalf(*graph, dtype));
  report.tensors_converted = half.tensors;
  report.elements_converted = half.elements;
  report.overflows = half.overflows;
  Log(log, fmt::format("{} weight tensors ({} values) stored in {}", half.tensors, half.elements,
                       DataTypeName(dtype)));
  if (half.overflows > 0) {
    Log(log, fmt::format("warning: {} weight values beyond the {} range became infinite",
                         half.overflows, DataTypeName(dtype)));
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxModel(*half.graph));
  AppendMetadata(bytes, SourceMetadata(options.model, source_bytes, report.precision));
  KILN_RETURN_IF_ERROR(WriteFile(options.out, bytes, "converted model"));
  report.fp32_bytes = static_cast<int64_t>(source_bytes.size());
  report.out_bytes = FileSize(options.out);
  report.cpu = DetectCpuHalfSupport();
  report.compute_note = HalfComputeNote(dtype, report.cpu);
  Log(log, fmt::format("wrote {}", options.out));

  if (options.data_dir.empty()) {
    report.evaluated = false;
  } else {
    KILN_RETURN_IF_ERROR(EvaluateHalf(options, dtype, graph, report));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

// The settings QuantizeModel checks before reading anything; the precision dispatch aside.
Status CheckQuantizeOptions(const QuantizeOptions& options) {
  if (options.model.empty()) return Status::InvalidArgument("no model given");
  if (options.out.empty()) return Status::InvalidArgument("--out is required");
  std::error_code ec;
  if (fs::equivalent(options.model, options.out, ec)) {
    return Status::InvalidArgument(fmt::format(
        "--out '{}' is the model itself; write the quantized model elsewhere", options.out));
  }
  return Status::OK();
}

// The INT8 settings, checked before reading anything; the weight range they ask for.
Result<Int8Target> CheckInt8Options(const QuantizeOptions& options) {
  if (options.calib_dir.empty()) {
    return Status::InvalidArgument("--calib-dir is required with --precision int8 (the default)");
  }
  KILN_ASSIGN_OR_RETURN(Int8Target target, ResolveInt8Target(options.target_cpu));
  if (options.keep_fp32 > 0 && options.max_accuracy_drop) {
    return Status::InvalidArgument("--keep-fp32 and --max-accuracy-drop exclude each other");
  }
  if (options.keep_fp32 < 0) return Status::InvalidArgument("--keep-fp32 must be >= 0");
  if (options.max_accuracy_drop && !(*options.max_accuracy_drop >= 0)) {
    return Status::InvalidArgument("--max-accuracy-drop must be >= 0");
  }
  if (options.method == CalibrationMethod::kPercentile &&
      !(options.percentile > 0 && options.percentile <= 100)) {
    return Status::InvalidArgument("--percentile must be in (0, 100]");
  }
  return target;
}

QuantizeReport NewInt8Report(const QuantizeOptions& options, const Int8Target& target) {
  QuantizeReport report;
  report.model = options.model;
  report.out = options.out;
  report.method = options.method;
  report.percentile = options.percentile;
  report.per_channel = options.per_channel;
  report.activation_type = options.activation_type;
  report.target = target;
  report.budget = options.max_accuracy_drop;
  return report;
}

// The calibrated graph and what every candidate INT8 model is measured on: the evaluation set
// (data_dir, else the calibration set) and the FP32 outputs on it.
struct Int8Candidates {
  Calibrated calibrated;
  QdqOptions qdq_options;
  RunOptions run_options;
  Dataset eval;
  Evaluation fp32;

  size_t num_layers() const { return calibrated.layers.size(); }
  // The model with the layers where `quantize` is true in INT8.
  Result<QdqResult> Build(const std::vector<bool>& quantize) const {
    return InsertQdq(*calibrated.graph, calibrated.layers, quantize, calibrated.params,
                     qdq_options);
  }
  // Its metrics on the evaluation set, against the labels and the FP32 outputs.
  Result<Metrics> Measure(const std::vector<bool>& quantize) const {
    KILN_ASSIGN_OR_RETURN(QdqResult q, Build(quantize));
    KILN_ASSIGN_OR_RETURN(Evaluation e,
                          Evaluate(q.graph, eval, run_options, &fp32.run.output.view()));
    return e.metrics;
  }
};

// Loads the evaluation set and measures FP32 on it (report: eval_dir, labels, fp32, budget unit).
Status EvaluateFp32(const QuantizeOptions& options, Int8Candidates& c, QuantizeReport& report) {
  const Graph& graph = *c.calibrated.graph;
  report.eval_dir = options.data_dir.empty() ? options.calib_dir : options.data_dir;
  KILN_ASSIGN_OR_RETURN(c.eval, LoadDataset(report.eval_dir, graph, options.eval_samples));
  report.eval_labels = c.eval.labels.has_value();
  report.budget_unit = report.eval_labels ? "top-1 points" : "output error points";
  Log(options.log,
      fmt::format("FP32 reference on {} samples from '{}'", c.eval.num_samples, report.eval_dir));
  KILN_ASSIGN_OR_RETURN(c.fp32,
                        Evaluate(c.calibrated.graph, c.eval, c.run_options, nullptr, options.log));
  report.fp32 = c.fp32.metrics;
  return Status::OK();
}

// Each layer quantized alone: its accuracy drop (labels) and output error into report.layers.
// Returns the layer indices, most sensitive first (accuracy drop, then output error).
Result<std::vector<size_t>> MeasureSensitivities(const Int8Candidates& c, QuantizeReport& report,
                                                 const LogFn& log) {
  const size_t n = c.num_layers();
  Log(log, fmt::format("sensitivity: {} layers, each quantized alone", n));
  std::vector<std::pair<double, double>> keys(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<bool> only(n, false);
    only[i] = true;
    KILN_ASSIGN_OR_RETURN(Metrics m, c.Measure(only));
    LayerReport& lr = report.layers[i];
    if (report.eval_labels) lr.accuracy_drop = report.fp32.top1.value_or(0) - m.top1.value_or(0);
    lr.output_error = 100.0 * (1.0 - m.mean_cosine);
    keys[i] = {lr.accuracy_drop.value_or(0), *lr.output_error};
    Log(log, fmt::format("  [{}/{}] {} ({}): output error {:.4f}{}", i + 1, n, lr.name, lr.op_type,
                         *lr.output_error,
                         lr.accuracy_drop ? fmt::format(", top-1 drop {:.2f}", *lr.accuracy_drop)
                                          : std::string()));
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return keys[a] > keys[b]; });
  return order;
}

// For --max-accuracy-drop: keeps the most sensitive layers (`order`) in FP32, one more at a
// time, until the drop fits the budget. FAILED_PRECONDITION when it never does.
Result<std::vector<bool>> FitAccuracyBudget(const Int8Candidates& c,
                                            const std::vector<size_t>& order, double budget,
                                            const QuantizeReport& report, const LogFn& log) {
  // Drop of a candidate against FP32, in the budget's unit.
  auto drop_of = [&](const Metrics& m) {
    if (report.eval_labels) return report.fp32.top1.value_or(0) - m.top1.value_or(0);
    return 100.0 * (1.0 - m.mean_cosine);
  };
  double drop = 0;
  for (size_t kept = 0; kept < order.size(); ++kept) {
    std::vector<bool> trial(c.num_layers(), true);
    for (size_t k = 0; k < kept; ++k) trial[order[k]] = false;
    KILN_ASSIGN_OR_RETURN(Metrics m, c.Measure(trial));
    drop = drop_of(m);
    Log(log, fmt::format("  {} layer(s) in FP32: drop {:.3f} {}", kept, drop, report.budget_unit));
    if (drop <= budget) return trial;
  }
  return Status::FailedPrecondition(fmt::format(
      "cannot meet --max-accuracy-drop {} ({}): with all but one layer in FP32 the drop is still "
      "{:.3f}; nothing written",
      budget, report.budget_unit, drop));
}

// Which layers go INT8: all, unless sensitivities are measured and --keep-fp32 or
// --max-accuracy-drop keep the most sensitive ones in FP32.
Result<std::vector<bool>> ChooseInt8Layers(const QuantizeOptions& options, const Int8Candidates& c,
                                           QuantizeReport& report) {
  std::vector<bool> quantize(c.num_layers(), true);
  const bool need_sensitivity =
      options.sensitivity || options.keep_fp32 > 0 || options.max_accuracy_drop.has_value();
  if (!need_sensitivity) return quantize;
  KILN_ASSIGN_OR_RETURN(std::vector<size_t> order, MeasureSensitivities(c, report, options.log));
  if (options.keep_fp32 > 0) {
    for (size_t k = 0; k < order.size() && k < static_cast<size_t>(options.keep_fp32); ++k) {
      quantize[order[k]] = false;
    }
  } else if (options.max_accuracy_drop) {
    return FitAccuracyBudget(c, order, *options.max_accuracy_drop, report, options.log);
  }
  return quantize;
}

// Exports the chosen model with its metadata to options.out (report: layers, sizes).
Status WriteInt8Model(const QuantizeOptions& options, const Int8Candidates& c,
                      const std::vector<bool>& quantize, const std::string& source_bytes,
                      QuantizeReport& report) {
  KILN_ASSIGN_OR_RETURN(QdqResult final_q, c.Build(quantize));
  report.qdq_pairs = final_q.qdq_pairs;
  for (size_t i = 0; i < c.num_layers(); ++i) {
    report.layers[i].quantized = quantize[i];
    report.layers[i].q = final_q.layers[i];
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxModel(*final_q.graph));
  std::vector<std::pair<std::string, std::string>> metadata =
      SourceMetadata(options.model, source_bytes, CalibrationMethodName(options.method));
  metadata.emplace_back(std::string(kTargetCpuKey), report.target.cpu);
  metadata.emplace_back(std::string(kWeightBitsKey), std::to_string(report.target.weight_bits));
  AppendMetadata(bytes, metadata);
  KILN_RETURN_IF_ERROR(WriteFile(options.out, bytes, "quantized model"));
  report.fp32_bytes = static_cast<int64_t>(source_bytes.size());
  report.out_bytes = FileSize(options.out);
  Log(options.log, fmt::format("wrote {}", options.out));
  return Status::OK();
}

// Imports the FP32 model, prepares and calibrates it, and measures FP32 on the evaluation set.
Result<Int8Candidates> CalibrateInt8(const QuantizeOptions& options,
                                     const std::string& source_bytes, QuantizeReport& report) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> imported,
                        ImportOnnxModelFromString(source_bytes, options.model));
  Int8Candidates c;
  c.run_options.batch_size = options.batch_size;
  c.run_options.threads = options.threads;
  KILN_ASSIGN_OR_RETURN(
      c.calibrated,
      PrepareAndCalibrate(imported, fmt::format("'{}'", options.model), options.calib_dir,
                          options.method, options.percentile, options.activation_type,
                          options.calib_samples, c.run_options, options.log));
  report.calib_samples = c.calibrated.samples;
  const size_t num_layers = c.num_layers();
  if (static_cast<size_t>(options.keep_fp32) >= num_layers) {
    return Status::InvalidArgument(fmt::format(
        "--keep-fp32 {} keeps every one of the model's {} quantizable layers in FP32: nothing "
        "left to quantize",
        options.keep_fp32, num_layers));
  }
  KILN_RETURN_IF_ERROR(EvaluateFp32(options, c, report));
  Log(options.log, fmt::format("weights: {}", report.target.note));
  c.qdq_options.per_channel = options.per_channel;
  c.qdq_options.weight_max = report.target.weight_max;
  report.layers.resize(num_layers);
  for (size_t i = 0; i < num_layers; ++i) {
    report.layers[i].name = c.calibrated.layers[i].name;
    report.layers[i].op_type = c.calibrated.layers[i].op_type;
  }
  return c;
}

}  // namespace

Result<QuantizeReport> QuantizeModel(const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(CheckQuantizeOptions(options));
  if (options.precision != "int8") {
    const std::optional<DataType> half = HalfTypeFromPrecision(options.precision);
    if (!half) {
      return Status::InvalidArgument(
          fmt::format("unknown --precision '{}' (expected int8, fp16 or bf16)", options.precision));
    }
    return QuantizeHalf(options, *half, start);
  }
  KILN_ASSIGN_OR_RETURN(Int8Target target, CheckInt8Options(options));
  QuantizeReport report = NewInt8Report(options, target);
  KILN_ASSIGN_OR_RETURN(std::string source_bytes, ReadFile(options.model, "model file"));
  KILN_ASSIGN_OR_RETURN(Int8Candidates c, CalibrateInt8(options, source_bytes, report));
  KILN_ASSIGN_OR_RETURN(std::vector<bool> quantize, ChooseInt8Layers(options, c, report));
  KILN_RETURN_IF_ERROR(WriteInt8Model(options, c, quantize, source_bytes, report));
  // The written file, as kiln loads it.
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> written, ImportOnnxModel(options.out));
  Log(options.log, fmt::format("INT8 on {} samples", c.eval.num_samples));
  KILN_ASSIGN_OR_RETURN(Evaluation int8, Evaluate(written, c.eval, c.run_options,
                                                  &c.fp32.run.output.view(), options.log));
  report.quantized = int8.metrics;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

namespace {

double SizeRatio(const QuantizeReport& r) {
  return r.fp32_bytes > 0 ? static_cast<double>(r.out_bytes) / static_cast<double>(r.fp32_bytes)
                          : 0.0;
}

std::string MetricsHeader() {
  return fmt::format("{:<10} {:>8} {:>8} {:>11} {:>12} {:>10}\n", "precision", "top1", "top5",
                     "agree top1", "mean cosine", "items/s");
}

std::string MetricsRow(std::string_view name, const Metrics& m) {
  return fmt::format("{:<10} {:>8} {:>8} {:>10.2f}% {:>12.6f} {:>10.1f}\n", name, Percent(m.top1),
                     Percent(m.top5), m.agreement_top1, m.mean_cosine, m.items_per_s);
}

std::string CpuJson(const CpuHalfSupport& cpu) {
  return fmt::format("{{\"f16c\": {}, \"avx512fp16\": {}, \"avx512bf16\": {}}}",
                     cpu.f16c ? "true" : "false", cpu.avx512fp16 ? "true" : "false",
                     cpu.avx512bf16 ? "true" : "false");
}

std::string FormatHalfReport(const QuantizeReport& r) {
  const std::string half = r.precision == "bf16" ? "BFLOAT16" : "FLOAT16";
  std::string s;
  s += fmt::format("model        {}\n", r.model);
  s += fmt::format("converted    {}\n", r.out);
  s += fmt::format(
      "weights      {} Conv/ConvTranspose/MatMul/Gemm weight tensors ({} values, "
      ">= {} each) stored as {}; other tensors FP32\n",
      r.tensors_converted, r.elements_converted, kHalfMinElements, half);
  if (r.overflows > 0) {
    s += fmt::format("warning      {} weight values beyond the {} range became infinite\n",
                     r.overflows, half);
  }
  s += fmt::format("compute      {}\n", r.compute_note);
  s += fmt::format("cpu          F16C {}, AVX512-FP16 {}, AVX512-BF16 {}\n",
                   r.cpu.f16c ? "yes" : "no", r.cpu.avx512fp16 ? "yes" : "no",
                   r.cpu.avx512bf16 ? "yes" : "no");
  s += fmt::format("size         fp32 {} bytes, {} {} bytes ({:.1f}%)\n", r.fp32_bytes, r.precision,
                   r.out_bytes, 100.0 * SizeRatio(r));
  if (!r.evaluated) return s;
  s += fmt::format("\nevaluation on {} samples from {}{}\n", r.quantized.samples, r.eval_dir,
                   r.eval_labels ? "" : " (no labels: agreement with FP32 only)");
  s += MetricsHeader();
  s += MetricsRow("fp32", r.fp32);
  s += MetricsRow(r.precision, r.quantized);
  return s;
}

std::string HalfReportJson(const QuantizeReport& r) {
  std::string s = fmt::format("{{\"precision\": \"{}\"", r.precision);
  if (r.evaluated) {
    s += fmt::format(", {}", MetricsJsonFields(r.quantized));
    s += fmt::format(", \"fp32\": {{\"precision\": \"fp32\", {}}}", MetricsJsonFields(r.fp32));
  }
  s += fmt::format(", \"model\": {}, \"output\": {}", JsonString(r.model), JsonString(r.out));
  if (r.evaluated) s += fmt::format(", \"eval_data\": {}", JsonString(r.eval_dir));
  s += fmt::format(", \"method\": \"{}\"", r.precision);
  s += fmt::format(", \"size_bytes\": {{\"fp32\": {}, \"{}\": {}, \"ratio\": {}}}", r.fp32_bytes,
                   r.precision, r.out_bytes, JsonNumber(SizeRatio(r)));
  s += fmt::format(", \"tensors_converted\": {}, \"elements_converted\": {}, \"overflows\": {}",
                   r.tensors_converted, r.elements_converted, r.overflows);
  s += fmt::format(
      ", \"weights_dtype\": \"{}\", \"compute_dtype\": \"fp32\", \"cpu\": {}, "
      "\"compute\": {}",
      r.precision == "bf16" ? "BFLOAT16" : "FLOAT16", CpuJson(r.cpu), JsonString(r.compute_note));
  if (r.evaluated && r.quantized.top1 && r.fp32.top1) {
    s += fmt::format(", \"top1_drop\": {}", JsonNumber(*r.fp32.top1 - *r.quantized.top1));
  }
  s += fmt::format(", \"seconds\": {}}}", JsonNumber(r.seconds));
  return s;
}

}  // namespace

std::string FormatQuantizeReport(const QuantizeReport& r) {
  if (r.precision != "int8") return FormatHalfReport(r);
  std::string s;
  s += fmt::format("model        {}\n", r.model);
  s += fmt::format("quantized    {}\n", r.out);
  s += fmt::format(
      "calibration  {}{} on {} samples; activations {}; weights int8 symmetric {}\n",
      CalibrationMethodName(r.method),
      r.method == CalibrationMethod::kPercentile ? fmt::format(" {}", r.percentile) : std::string(),
      r.calib_samples, ActivationTypeName(r.activation_type),
      r.per_channel ? "per channel" : "per tensor");
  s += fmt::format("target cpu   {}: {}\n", r.target.cpu, r.target.note);
  size_t name_width = 5;
  for (const LayerReport& l : r.layers) name_width = std::max(name_width, l.name.size());
  s += fmt::format("\n{:<{}} {:<7} {:>10} {:>4} {:>10} {:>4} {:>21} {:>10} {:>10} {}\n", "layer",
                   name_width, "op", "in scale", "zp", "out scale", "zp", "weight scales",
                   "top1 drop", "out error", "precision");
  for (const LayerReport& l : r.layers) {
    std::string in_s = "-", in_z = "-", out_s = "-", out_z = "-", w = "-";
    if (l.quantized) {
      in_s = fmt::format("{:.4g}", l.q.input.scale);
      in_z = fmt::format("{}", l.q.input.zero_point);
      if (l.q.has_output) {
        out_s = fmt::format("{:.4g}", l.q.output.scale);
        out_z = fmt::format("{}", l.q.output.zero_point);
      }
      if (l.q.weight_channels > 0) {
        w = fmt::format("{:.3g}..{:.3g}", l.q.weight_scale_min, l.q.weight_scale_max);
      }
    }
    s += fmt::format("{:<{}} {:<7} {:>10} {:>4} {:>10} {:>4} {:>21} {:>10} {:>10} {}\n", l.name,
                     name_width, l.op_type, in_s, in_z, out_s, out_z, w,
                     l.accuracy_drop ? fmt::format("{:.2f}", *l.accuracy_drop) : "-",
                     l.output_error ? fmt::format("{:.4f}", *l.output_error) : "-",
                     l.quantized ? "int8" : "fp32");
  }
  const int kept = static_cast<int>(std::count_if(
      r.layers.begin(), r.layers.end(), [](const LayerReport& l) { return !l.quantized; }));
  s += fmt::format("\n{} of {} layers int8, {} kept fp32; {} activation QDQ pairs\n",
                   r.layers.size() - static_cast<size_t>(kept), r.layers.size(), kept, r.qdq_pairs);
  s += fmt::format("size         fp32 {} bytes, int8 {} bytes ({:.1f}%)\n", r.fp32_bytes,
                   r.out_bytes, 100.0 * SizeRatio(r));
  s += fmt::format("\nevaluation on {} samples from {}{}\n", r.quantized.samples, r.eval_dir,
                   r.eval_labels ? "" : " (no labels: agreement with FP32 only)");
  s += MetricsHeader();
  s += MetricsRow("fp32", r.fp32);
  s += MetricsRow("int8", r.quantized);
  if (r.budget) {
    s += fmt::format("budget       max drop {} {}: met\n", *r.budget, r.budget_unit);
  }
  return s;
}

std::string QuantizeReportJson(const QuantizeReport& r) {
  if (r.precision != "int8") return HalfReportJson(r);
  std::string s = "{";
  s += fmt::format("\"precision\": \"int8\", {}", MetricsJsonFields(r.quantized));
  s += fmt::format(", \"fp32\": {{\"precision\": \"fp32\", {}}}", MetricsJsonFields(r.fp32));
  s += fmt::format(", \"model\": {}, \"output\": {}, \"eval_data\": {}", JsonString(r.model),
                   JsonString(r.out), JsonString(r.eval_dir));
  s += fmt::format(", \"method\": \"{}\"", CalibrationMethodName(r.method));
  if (r.method == CalibrationMethod::kPercentile) {
    s += fmt::format(", \"percentile\": {}", JsonNumber(r.percentile));
  }
  s +=
      fmt::format(", \"per_channel\": {}, \"activation_type\": \"{}\", \"calibration_samples\": {}",
                  r.per_channel ? "true" : "false",
                  r.activation_type == ActivationType::kUint8 ? "uint8" : "int8", r.calib_samples);
  s += fmt::format(
      ", \"target_cpu\": \"{}\", \"weight_bits\": {}, \"weight_range\": [{}, {}], "
      "\"weights\": {}",
      r.target.cpu, r.target.weight_bits, -r.target.weight_max, r.target.weight_max,
      JsonString(r.target.note));
  s += fmt::format(", \"size_bytes\": {{\"fp32\": {}, \"int8\": {}, \"ratio\": {}}}", r.fp32_bytes,
                   r.out_bytes, JsonNumber(SizeRatio(r)));
  if (r.quantized.top1 && r.fp32.top1) {
    s += fmt::format(", \"top1_drop\": {}", JsonNumber(*r.fp32.top1 - *r.quantized.top1));
  }
  if (r.budget) {
    s += fmt::format(", \"max_accuracy_drop\": {}, \"budget_unit\": {}", JsonNumber(*r.budget),
                     JsonString(r.budget_unit));
  }
  s += ", \"layers\": [";
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const LayerReport& l = r.layers[i];
    s += fmt::format("{}{{\"name\": {}, \"op\": {}, \"precision\": \"{}\"", i ? ", " : "",
                     JsonString(l.name), JsonString(l.op_type), l.quantized ? "int8" : "fp32");
    if (l.quantized) {
      s += fmt::format(", \"input_scale\": {}, \"input_zero_point\": {}",
                       JsonNumber(l.q.input.scale), l.q.input.zero_point);
      if (l.q.has_output) {
        s += fmt::format(", \"output_scale\": {}, \"output_zero_point\": {}",
                         JsonNumber(l.q.output.scale), l.q.output.zero_point);
      }
      if (l.q.weight_channels > 0) {
        s += fmt::format(
            ", \"weight_scale_min\": {}, \"weight_scale_max\": {}, "
            "\"weight_scales\": {}",
            JsonNumber(l.q.weight_scale_min), JsonNumber(l.q.weight_scale_max),
            l.q.weight_channels);
      }
    }
    if (l.accuracy_drop)
      s += fmt::format(", \"sensitivity_top1_drop\": {}", JsonNumber(*l.accuracy_drop));
    if (l.output_error)
      s += fmt::format(", \"sensitivity_output_error\": {}", JsonNumber(*l.output_error));
    s += "}";
  }
  s += fmt::format("], \"seconds\": {}}}", JsonNumber(r.seconds));
  return s;
}

// --- validate -----------------------------------------------------------------------------------

namespace {

using Metadata = std::map<std::string, std::string>;

// What ValidateModel measures, decided from the model, its metadata and the options.
struct ValidatePlan {
  std::string precision;                // "fp32" / "int8" / "fp16" / "bf16"
  bool quantized = false;               // the model holds QDQ nodes
  std::optional<DataType> stored_half;  // the model's weights are half (metadata or initializers)
  bool written_half = false;            // ... recorded by `kiln quantize --precision`
  std::optional<DataType> half;         // the precision validated is fp16 / bf16
  bool converted_at_load = false;       // a FP32 model validated as fp16/bf16
  bool alone = false;                   // a half model with no FP32 reference to compare with
};

Status CheckValidateOptions(const ValidateOptions& options) {
  if (options.model.empty()) return Status::InvalidArgument("no model given");
  if (options.data_dir.empty() && !options.load_inputs) {
    return Status::InvalidArgument(
        "no data given: --data DIR, or the inputs' files with --input NAME=FILE, --inputs or "
        "--inputs-dir");
  }
  if (!options.data_dir.empty() && options.load_inputs) {
    return Status::InvalidArgument(
        "--data and input files (--input, --inputs, --inputs-dir) exclude each other: give the "
        "samples one way");
  }
  if (options.precision != "auto" && options.precision != "fp32" && options.precision != "int8" &&
      !HalfTypeFromPrecision(options.precision)) {
    return Status::InvalidArgument(fmt::format(
        "unknown --precision '{}' (expected auto, fp32, int8, fp16 or bf16)", options.precision));
  }
  return Status::OK();
}

// The precision to validate: the requested one, else what the model holds.
ValidatePlan DetectPrecision(const ValidateOptions& options, const Graph& graph,
                             const Metadata& props) {
  ValidatePlan plan;
  plan.quantized = HasQdq(graph);
  // A half-precision model: by the method `kiln quantize` recorded, else by its initializers.
  if (auto m = props.find(std::string(kMethodKey)); m != props.end()) {
    plan.stored_half = HalfTypeFromPrecision(m->second);
  }
  plan.written_half = plan.stored_half.has_value();
  if (!plan.stored_half) plan.stored_half = HalfInitializerType(graph);
  if (options.precision != "auto") {
    plan.precision = options.precision;
  } else if (plan.quantized) {
    plan.precision = "int8";
  } else if (plan.stored_half) {
    plan.precision = std::string(HalfPrecisionName(*plan.stored_half));
  } else {
    plan.precision = "fp32";
  }
  plan.half = HalfTypeFromPrecision(plan.precision);
  plan.converted_at_load = plan.half.has_value() && !plan.stored_half;
  // A half-precision model from elsewhere (no recorded source, no --reference) is measured alone.
  plan.alone = plan.half && !plan.converted_at_load && options.reference.empty() &&
               props.count(std::string(kSourceKey)) == 0;
  return plan;
}

// The requested precision must be the model's.
Status CheckPrecisionFits(const ValidateOptions& options, const ValidatePlan& plan) {
  const std::string& model = options.model;
  const bool requested_half = HalfTypeFromPrecision(options.precision).has_value();
  if (plan.precision == "int8" && !plan.quantized) {
    return Status::InvalidArgument(fmt::format(
        "'{}' has no QuantizeLinear/DequantizeLinear nodes: it is not an INT8 (QDQ) model; "
        "quantize it with `kiln quantize` or validate it with --precision fp32",
        model));
  }
  if ((plan.precision == "fp32" || requested_half) && plan.quantized) {
    return Status::InvalidArgument(
        fmt::format("'{}' is a quantized (QDQ) model; validate it with --precision int8", model));
  }
  if ((plan.precision == "fp32" || plan.precision == "int8") && plan.stored_half) {
    return Status::InvalidArgument(
        fmt::format("'{}' stores its weights in {}; validate it with --precision {}", model,
                    DataTypeName(*plan.stored_half), HalfPrecisionName(*plan.stored_half)));
  }
  if (plan.half && plan.stored_half && *plan.half != *plan.stored_half) {
    return Status::InvalidArgument(
        fmt::format("'{}' stores its weights in {}, not {}; validate it with --precision {}", model,
                    DataTypeName(*plan.stored_half), DataTypeName(*plan.half),
                    HalfPrecisionName(*plan.stored_half)));
  }
  if (plan.converted_at_load && !options.reference.empty()) {
    return Status::InvalidArgument(fmt::format(
        "--reference applies to a converted (INT8, FP16 or BF16) model; '{}' is FP32 and is "
        "compared with itself converted to {}",
        model, DataTypeName(*plan.half)));
  }
  return Status::OK();
}

// The samples: the data directory, or the input files the caller read; labels from
// `options.labels` when given.
Result<Dataset> LoadValidateData(const ValidateOptions& options, const Graph& graph) {
  Dataset data;
  if (options.load_inputs) {
    KILN_ASSIGN_OR_RETURN(std::vector<InputSamples> inputs, options.load_inputs(graph));
    std::vector<std::string> files;
    files.reserve(inputs.size());
    for (const InputSamples& in : inputs) files.push_back(in.file);
    KILN_ASSIGN_OR_RETURN(data,
                          MakeDataset(std::move(inputs), graph,
                                      fmt::format("the input files ({})", fmt::join(files, ", ")),
                                      options.max_samples));
  } else {
    KILN_ASSIGN_OR_RETURN(data, LoadDataset(options.data_dir, graph, options.max_samples));
  }
  if (!options.labels.empty()) {
    // A labels file given explicitly: load it through a dataset-shaped check.
    KILN_ASSIGN_OR_RETURN(OwnedTensor l, LoadLabels(options.labels));
    if (l.shape().dim(0) < data.num_samples ||
        (options.max_samples == 0 && l.shape().dim(0) != data.num_samples)) {
      return Status::InvalidArgument(
          fmt::format("'{}' holds {} labels but the inputs hold {} samples", options.labels,
                      l.shape().dim(0), data.num_samples));
    }
    if (l.shape().dim(0) > data.num_samples) {  // --max-samples: the first samples' labels
      KILN_ASSIGN_OR_RETURN(
          l, OwnedTensor::CopyOf(Tensor(DataType::kInt64, Shape{data.num_samples}, l.raw_data())));
    }
    data.labels = std::move(l);
  }
  return data;
}

// The FP32 model a converted one is compared with: `options.reference`, else the source its
// metadata records, which must still exist and hash the same.
Result<std::string> ReferencePath(const ValidateOptions& options, const Metadata& props) {
  if (!options.reference.empty()) return options.reference;
  auto it = props.find(std::string(kSourceKey));
  if (it == props.end()) {
    return Status::FailedPrecondition(fmt::format(
        "'{}' does not record its FP32 source (metadata {}); pass --reference FP32_MODEL",
        options.model, kSourceKey));
  }
  const std::string& path = it->second;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status::NotFound(fmt::format(
        "the FP32 source recorded in '{}', '{}', does not exist (moved or deleted?); pass "
        "--reference FP32_MODEL",
        options.model, path));
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, "model file"));
  auto h = props.find(std::string(kSourceHashKey));
  if (h != props.end() && h->second != ContentHash(bytes)) {
    return Status::FailedPrecondition(fmt::format(
        "the FP32 source recorded in '{}', '{}', changed since it was quantized (content "
        "hash {} recorded, {} now); pass --reference FP32_MODEL to compare with it anyway",
        options.model, path, h->second, ContentHash(bytes)));
  }
  return path;
}

// The FP32 side of a validation: evaluates the reference model (none for fp32 and for a half
// model measured alone) into `report`. For a FP32 model validated as fp16/bf16, `*evaluated`
// becomes the model converted as `kiln quantize --precision` would write it.
Result<std::optional<Evaluation>> EvaluateReference(
    const ValidateOptions& options, const ValidatePlan& plan, const Metadata& props,
    const std::shared_ptr<const Graph>& graph, const Dataset& data, const RunOptions& run_options,
    ValidateReport& report, std::shared_ptr<const Graph>* evaluated) {
  const LogFn& log = options.log;
  if (plan.alone) {
    Log(log, fmt::format("'{}' records no FP32 source and no --reference is given: measured alone",
                         options.model));
    return std::optional<Evaluation>();
  }
  if (plan.precision == "fp32") return std::optional<Evaluation>();
  std::shared_ptr<const Graph> ref_graph = graph;
  if (plan.converted_at_load) {
    report.reference_model = options.model;
    Log(log, fmt::format("FP32 '{}' on {} samples", options.model, data.num_samples));
  } else {
    KILN_ASSIGN_OR_RETURN(report.reference_model, ReferencePath(options, props));
    KILN_ASSIGN_OR_RETURN(ref_graph, ImportOnnxModel(report.reference_model));
    Log(log,
        fmt::format("FP32 reference '{}' on {} samples", report.reference_model, data.num_samples));
  }
  KILN_ASSIGN_OR_RETURN(Evaluation e, Evaluate(ref_graph, data, run_options, nullptr, log));
  report.reference = e.metrics;
  if (plan.converted_at_load) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> prepared, PrepareGraph(graph));
    KILN_ASSIGN_OR_RETURN(HalfWeights h, ConvertWeightsToHalf(*prepared, *plan.half));
    Log(log, fmt::format("{} weight tensors converted to {} at load", h.tensors,
                         DataTypeName(*plan.half)));
    *evaluated = std::move(h.graph);
  }
  return std::optional<Evaluation>(std::move(e));
}

// More timed passes, FP32 and the converted model alternating; the median time of each gives
// the reported items/s.
Status TimeRepeatedPasses(const ValidateOptions& options, const Dataset& data,
                          const RunOptions& run_options, const Evaluation& e,
                          const std::optional<Evaluation>& reference, ValidateReport& report) {
  Log(options.log, fmt::format("timing {} passes", options.repeat));
  std::vector<double> seconds = {e.run.seconds};
  std::vector<double> ref_seconds;
  if (reference) ref_seconds.push_back(reference->run.seconds);
  for (int r = 1; r < options.repeat; ++r) {
    if (reference) {
      KILN_ASSIGN_OR_RETURN(RunResult rr, RunDataset(*reference->session, data, run_options));
      ref_seconds.push_back(rr.seconds);
    }
    KILN_ASSIGN_OR_RETURN(RunResult rr, RunDataset(*e.session, data, run_options));
    seconds.push_back(rr.seconds);
  }
  const auto rate = [&](const std::vector<double>& v) {
    const double m = Median(v);
    return m > 0 ? static_cast<double>(data.num_samples) / m : 0.0;
  };
  report.metrics.items_per_s = rate(seconds);
  if (report.reference) report.reference->items_per_s = rate(ref_seconds);
  return Status::OK();
}

}  // namespace

Result<ValidateReport> ValidateModel(const ValidateOptions& options) {
  KILN_RETURN_IF_ERROR(CheckValidateOptions(options));
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(options.model, "model file"));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph,
                        ImportOnnxModelFromString(bytes, options.model));
  KILN_ASSIGN_OR_RETURN(Metadata props, ReadMetadata(bytes));
  const ValidatePlan plan = DetectPrecision(options, *graph, props);
  KILN_RETURN_IF_ERROR(CheckPrecisionFits(options, plan));
  ValidateReport report;
  report.model = options.model;
  report.precision = plan.precision;
  report.converted_at_load = plan.converted_at_load;
  // Only for the layout `kiln quantize` writes: another model's half tensors may be computed in.
  if (plan.half && (plan.written_half || plan.converted_at_load)) {
    report.compute_note = HalfComputeNote(*plan.half, DetectCpuHalfSupport());
  }
  KILN_ASSIGN_OR_RETURN(Dataset data, LoadValidateData(options, *graph));
  report.labels = data.labels.has_value();
  RunOptions run_options;
  run_options.batch_size = options.batch_size;
  run_options.threads = options.threads;
  run_options.max_samples = data.num_samples;

  std::shared_ptr<const Graph> evaluated = graph;
  KILN_ASSIGN_OR_RETURN(
      std::optional<Evaluation> reference,
      EvaluateReference(options, plan, props, graph, data, run_options, report, &evaluated));
  Log(options.log, fmt::format("{} '{}' on {} samples from {}", report.precision, options.model,
                               data.num_samples,
                               options.load_inputs ? data.dir : fmt::format("'{}'", data.dir)));
  KILN_ASSIGN_OR_RETURN(
      Evaluation e,
      Evaluate(evaluated, data, run_options, reference ? &reference->run.output.view() : nullptr,
               options.log, plan.half ? report.precision : std::string()));
  report.metrics = e.metrics;
  if (options.repeat > 1) {
    KILN_RETURN_IF_ERROR(TimeRepeatedPasses(options, data, run_options, e, reference, report));
  }
  return report;
}

std::string FormatValidateReport(const ValidateReport& r) {
  std::string s = fmt::format("model      {}\n", r.model);
  if (!r.reference_model.empty()) {
    s += fmt::format("reference  {}{}\n", r.reference_model,
                     r.converted_at_load ? " (itself in FP32; converted at load)" : "");
  }
  if (!r.compute_note.empty()) s += fmt::format("compute    {}\n", r.compute_note);
  s += fmt::format("samples    {}{}\n\n", r.metrics.samples,
                   r.labels ? "" : " (no labels: agreement with FP32 only)");
  s += fmt::format("{:<10} {:>8} {:>8} {:>11} {:>12} {:>10}\n", "precision", "top1", "top5",
                   "agree top1", "mean cosine", "items/s");
  auto row = [&](std::string_view name, const Metrics& m) {
    s += fmt::format("{:<10} {:>8} {:>8} {:>10.2f}% {:>12.6f} {:>10.1f}\n", name, Percent(m.top1),
                     Percent(m.top5), m.agreement_top1, m.mean_cosine, m.items_per_s);
  };
  if (r.reference) row("fp32", *r.reference);
  row(r.precision, r.metrics);
  if (r.reference) {
    if (r.metrics.top1 && r.reference->top1) {
      s += fmt::format("\ntop-1 drop {:.2f} points", *r.reference->top1 - *r.metrics.top1);
    } else {
      s += "\n";
    }
    if (r.reference->items_per_s > 0) {
      s += fmt::format("{}speed {:.2f}x fp32\n", r.metrics.top1 ? "; " : "",
                       r.metrics.items_per_s / r.reference->items_per_s);
    }
  }
  return s;
}

std::string ValidateReportJson(const ValidateReport& r) {
  std::string s = fmt::format("{{\"precision\": \"{}\", {}, \"model\": {}", r.precision,
                              MetricsJsonFields(r.metrics), JsonString(r.model));
  if (!r.compute_note.empty()) {
    s += fmt::format(", \"converted_at_load\": {}, \"compute\": {}",
                     r.converted_at_load ? "true" : "false", JsonString(r.compute_note));
  }
  if (r.reference) {
    s += fmt::format(", \"reference\": {{\"precision\": \"fp32\", {}, \"model\": {}}}",
                     MetricsJsonFields(*r.reference), JsonString(r.reference_model));
    if (r.metrics.top1 && r.reference->top1) {
      s += fmt::format(", \"top1_drop\": {}", JsonNumber(*r.reference->top1 - *r.metrics.top1));
    }
    if (r.reference->items_per_s > 0) {
      s += fmt::format(", \"speedup\": {}",
                       JsonNumber(r.metrics.items_per_s / r.reference->items_per_s));
    }
  }
  return s + "}";
}

}  // namespace kiln::quant
