// SPDX-License-Identifier: Apache-2.0
#pragma once
// The quantization workflow behind `kiln quantize` and `kiln validate` (docs/quantization.md).
//
//   QuantizeOptions q;
//   q.model = "m.onnx"; q.calib_dir = "calib/"; q.out = "m.int8.onnx"; q.data_dir = "val/";
//   KILN_ASSIGN_OR_RETURN(QuantizeReport report, QuantizeModel(q));
//   fmt::print("{}", FormatQuantizeReport(report));
//
//   ValidateOptions v;
//   v.model = "m.int8.onnx"; v.data_dir = "val/";   // the FP32 reference comes from metadata
//   KILN_ASSIGN_OR_RETURN(ValidateReport r, ValidateModel(v));
//
// QuantizeModel: import, PrepareGraph (qdq.h), calibrate every candidate activation on the
// calibration set (calibration.h), measure each layer's sensitivity when mixed precision needs it
// (or when asked): the accuracy drop (labels) and output error, 100 * (1 - mean cosine) against
// the FP32 outputs, of the model with only that layer quantized; keep the worst `keep_fp32`
// layers in FP32, or, for a `max_accuracy_drop` budget, greedily keep the next worst until the
// whole model's drop (top-1 points with labels, else output error points) fits; then write the
// QDQ model with metadata_props naming its FP32 source (kiln.quantize.source, its content hash
// kiln.quantize.source_hash, kiln.quantize.method), and measure FP32 and INT8 on the evaluation
// set (`data_dir`, else the calibration set). The models run as kiln serves them: through the
// full optimizer and the best kernels.
//
// With `precision` "fp16" or "bf16" QuantizeModel calibrates nothing: it stores the large
// Conv/ConvTranspose/MatMul/Gemm weights of the prepared graph in half precision behind Cast
// nodes (half_precision.h), writes the model with the same metadata (method "fp16" / "bf16"),
// and, only with `data_dir`, measures FP32 and the written model on it.
//
// ValidateModel: accuracy and speed of one model on a dataset (a directory, or input files the
// caller read); for a quantized (INT8 or half-precision) model, side by side with its FP32
// reference (`reference`, else the one recorded in the metadata, which must still exist and hash
// the same). A FP32 model validated as fp16/bf16 is converted in memory, as `kiln quantize` would
// write it, and compared with itself in FP32.
//
// Progress goes to `log` (one line per step; the tools print it on stderr).
//
// Thread safety: each call is independent.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "quant/calibration.h"
#include "quant/dataset.h"
#include "quant/half_precision.h"
#include "quant/qdq.h"
#include "quant/qparams.h"

namespace kiln::quant {

using LogFn = std::function<void(std::string_view)>;

// metadata_props keys written by QuantizeModel.
inline constexpr std::string_view kSourceKey = "kiln.quantize.source";
inline constexpr std::string_view kSourceHashKey = "kiln.quantize.source_hash";
inline constexpr std::string_view kMethodKey = "kiln.quantize.method";
// INT8 only: the CPU class the weights were quantized for ("avx2" / "vnni") and their width
// ("7": [-64, 64]; "8": [-127, 127]).
inline constexpr std::string_view kTargetCpuKey = "kiln.quantize.target_cpu";
inline constexpr std::string_view kWeightBitsKey = "kiln.quantize.weight_bits";

// Which INT8 weight range a target CPU class gets (qparams.h, docs/quantization.md):
//   "avx2": 7-bit weights, [-64, 64]. Exact at full speed on every x86-64 CPU with AVX2, VNNI
//           or not (ONNX Runtime's reduce_range); a little less weight precision.
//   "vnni": 8-bit weights, [-127, 127], for CPUs with VNNI dot products (AVX512-VNNI,
//           AVX-VNNI). Exact everywhere, but on a CPU without VNNI each layer takes twice the
//           INT8 work (its weights are split in two 7-bit halves).
//   "native": the class of this CPU, as kiln's kernels see it (ONEDNN_MAX_CPU_ISA lowers it).
struct Int8Target {
  std::string cpu;      // "avx2" or "vnni"
  int weight_max = 0;   // kWeightMax7Bit or kWeightMax8Bit
  int weight_bits = 0;  // 7 or 8
  std::string note;     // what was chosen and why, for the report
};
// INVALID_ARGUMENT for a name other than native, avx2 and vnni.
Result<Int8Target> ResolveInt8Target(std::string_view target_cpu);

struct QuantizeOptions {
  std::string model;  // FP32 ONNX model
  // "int8" (QDQ, calibrated), "fp16" or "bf16" (half-precision weights). The calibration and
  // mixed-precision settings below are INT8 only: with fp16/bf16, a calib_dir, per_channel,
  // keep_fp32, max_accuracy_drop, sensitivity, a method other than minmax or int8 activations
  // are INVALID_ARGUMENT.
  std::string precision = "int8";
  std::string calib_dir;  // calibration data (dataset.h layouts); int8 only, required there
  std::string out;        // where the QDQ model goes
  std::string data_dir;   // optional evaluation data (labels give accuracy)
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.99;
  bool per_channel = false;
  ActivationType activation_type = ActivationType::kUint8;
  std::string target_cpu = "native";        // ResolveInt8Target; int8 only
  int keep_fp32 = 0;                        // worst layers kept in FP32
  std::optional<double> max_accuracy_drop;  // points; exclusive with keep_fp32 > 0
  bool sensitivity = false;                 // measure sensitivities even when not needed
  int64_t batch_size = 32;
  int64_t calib_samples = 0;  // 0: all
  int64_t eval_samples = 0;   // 0: all
  int threads = 0;            // intra-op threads of every run (0: the machine's)
  LogFn log;
};

struct LayerReport {
  std::string name;
  std::string op_type;
  bool quantized = false;
  LayerQuantization q;
  std::optional<double> accuracy_drop;  // top-1 points, sensitivity with labels
  std::optional<double> output_error;   // 100 * (1 - mean cosine), sensitivity
};

struct QuantizeReport {
  std::string precision = "int8";  // "int8" / "fp16" / "bf16"
  std::string model;
  std::string out;
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 0;
  bool per_channel = false;
  ActivationType activation_type = ActivationType::kUint8;
  Int8Target target;  // int8: the weight range chosen
  int64_t calib_samples = 0;
  int64_t fp32_bytes = 0;
  int64_t out_bytes = 0;  // the written file
  int qdq_pairs = 0;
  // fp16/bf16: initializers stored in half precision, their elements, the finite values that
  // overflowed the half range, and how the weights are stored and computed on this CPU.
  int tensors_converted = 0;
  int64_t elements_converted = 0;
  int64_t overflows = 0;
  std::string compute_note;
  CpuHalfSupport cpu;
  bool evaluated = true;            // false for fp16/bf16 without data_dir
  std::vector<LayerReport> layers;  // graph order
  std::string eval_dir;
  bool eval_labels = false;
  Metrics fp32;                  // on the evaluation set, against the labels
  Metrics quantized;             // the written model: against the labels and the FP32 outputs
  std::optional<double> budget;  // max_accuracy_drop
  std::string budget_unit;       // "top-1 points" / "output error points"
  double seconds = 0;
};

Result<QuantizeReport> QuantizeModel(const QuantizeOptions& options);
// Writes `bytes` to `path` (created or truncated); INVALID_ARGUMENT naming `kind` and the path.
Status WriteFile(const std::string& path, std::string_view bytes, std::string_view kind);

std::string FormatQuantizeReport(const QuantizeReport& report);
std::string QuantizeReportJson(const QuantizeReport& report);

// Quantization of an in-memory graph at model load (the server's `optimization { precision:
// "int8" }`): PrepareGraph, calibration on `calib_dir`, every quantizable layer INT8, weights for
// this CPU (target "native"). No sensitivity, no evaluation, nothing written.
struct QuantizeGraphOptions {
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.99;
  bool per_channel = false;
  ActivationType activation_type = ActivationType::kUint8;
  int64_t batch_size = 32;
  int64_t calib_samples = 0;  // 0: all
  int threads = 0;
};

struct QuantizedGraph {
  std::shared_ptr<Graph> graph;
  int layers = 0;  // layers quantized
  int64_t calib_samples = 0;
};

// Errors: those of PrepareGraph, LoadDataset and the calibration runs; FAILED_PRECONDITION for a
// graph with no quantizable layer or one that is already quantized.
Result<QuantizedGraph> QuantizeGraph(const std::shared_ptr<const Graph>& graph,
                                     const std::string& calib_dir,
                                     const QuantizeGraphOptions& options);

struct ValidateOptions {
  std::string model;
  // The samples: a data directory (dataset.h layouts), or, exclusive with it, `load_inputs`:
  // called with the model's imported graph, it returns every graph input's samples stacked on
  // axis 0, read by the caller (`kiln validate --input / --inputs / --inputs-dir`); they are
  // checked as the stacked layout is (MakeDataset) and labels then come from `labels` only.
  std::string data_dir;
  std::function<Result<std::vector<InputSamples>>(const Graph& graph)> load_inputs;
  std::string labels;     // optional labels file overriding DIR/labels.npy
  std::string reference;  // FP32 model; default: the quantized model's recorded source
  // auto / fp32 / int8 / fp16 / bf16. auto: int8 for a QDQ model, fp16/bf16 for a model whose
  // metadata method says so or that holds FLOAT16/BFLOAT16 initializers, else fp32. A half model
  // that records no FP32 source is measured alone unless `reference` is given.
  std::string precision = "auto";
  int64_t batch_size = 32;
  int64_t max_samples = 0;
  int threads = 0;  // intra-op threads (0: the machine's)
  int repeat = 1;   // timed passes (FP32 and INT8 alternating); items_per_s from the median
  LogFn log;
};

struct ValidateReport {
  std::string model;
  std::string precision;  // "fp32" / "int8" / "fp16" / "bf16"
  Metrics metrics;
  std::string reference_model;       // int8, fp16, bf16
  std::optional<Metrics> reference;  // int8, fp16, bf16: the FP32 model's metrics
  bool labels = false;
  bool converted_at_load = false;  // fp16/bf16 of a FP32 model, converted in memory
  // fp16/bf16 written by `kiln quantize` or converted at load: how the weights are stored and
  // computed.
  std::string compute_note;
};

Result<ValidateReport> ValidateModel(const ValidateOptions& options);
std::string FormatValidateReport(const ValidateReport& report);
std::string ValidateReportJson(const ValidateReport& report);

}  // namespace kiln::quant
