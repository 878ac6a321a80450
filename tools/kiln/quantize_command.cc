// SPDX-License-Identifier: Apache-2.0
// `kiln quantize`: calibrate a FP32 model on representative data, write it as a QDQ (INT8) ONNX
// model and report what was done and what it cost in accuracy (quant/quantizer.h,
// docs/quantization.md); or, with --precision fp16|bf16, store its large weights in half
// precision (no calibration).
//
//   kiln quantize model.onnx --calib-dir calib/ --out model.int8.onnx
//   kiln quantize model.onnx --calib-dir calib/ --out model.int8.onnx --data val/
//       --method entropy --per-channel --max-accuracy-drop 0.5 --report report.json
//   kiln quantize model.onnx --calib-dir calib/ --out model.int8.onnx --target-cpu avx2
//   kiln quantize model.onnx --out model.fp16.onnx --precision fp16 [--data val/]
//
// Progress goes to stderr; the report to stdout (text, or one JSON object with --json) and to
// --report FILE.json. Exit status: 0 on success; 1 with a one-line reason on stderr on any error
// (an accuracy budget that cannot be met included: nothing is written then).

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "quant/quantizer.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

struct QuantizeFlags {
  quant::QuantizeOptions options;
  std::string method = "minmax";
  bool symmetric = false;
  double max_drop = -1;
  std::string report;
  bool json = false;
  bool quiet = false;
  // The INT8-only flags, refused by name when given with --precision fp16/bf16.
  std::vector<CLI::Option*> int8_only;
};

Status Quantize(QuantizeFlags& f) {
  if (f.options.precision != "int8") {
    for (const CLI::Option* o : f.int8_only) {
      if (o->count() > 0) {
        return Status::InvalidArgument(fmt::format(
            "{} does not apply to --precision {}: it is an INT8 calibration or mixed-precision "
            "setting (half-precision weights need no calibration; evaluation data goes in "
            "--data)",
            o->get_name(), f.options.precision));
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(f.options.method, quant::ParseCalibrationMethod(f.method));
  f.options.activation_type =
      f.symmetric ? quant::ActivationType::kInt8 : quant::ActivationType::kUint8;
  if (f.max_drop >= 0) f.options.max_accuracy_drop = f.max_drop;
  if (!f.quiet) {
    f.options.log = [](std::string_view line) {
      std::fprintf(stderr, "kiln quantize: %.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  KILN_ASSIGN_OR_RETURN(quant::QuantizeReport report, quant::QuantizeModel(f.options));
  const std::string json = quant::QuantizeReportJson(report);
  if (!f.report.empty()) KILN_RETURN_IF_ERROR(quant::WriteFile(f.report, json + "\n", "report"));
  if (f.json) {
    std::printf("%s\n", json.c_str());
  } else {
    std::fputs(quant::FormatQuantizeReport(report).c_str(), stdout);
  }
  return Status::OK();
}

// The INT8 settings: calibration method, weight and activation ranges, mixed precision. Returns
// them, to refuse them by name with --precision fp16/bf16.
std::vector<CLI::Option*> AddInt8Flags(CLI::App& cmd, QuantizeFlags& f) {
  CLI::Option* method =
      cmd.add_option("--method", f.method,
                     "Calibration method: minmax (observed range), percentile (clip the tails, see "
                     "--percentile) or entropy (KL divergence, TensorRT's method)")
          ->check(CLI::IsMember({"minmax", "percentile", "entropy"}))
          ->capture_default_str();
  CLI::Option* percentile =
      cmd.add_option("--percentile", f.options.percentile,
                     "Percentile of values kept by --method percentile (each tail clipped at "
                     "100 - P percent)")
          ->check(CLI::Range(50.0, 100.0))
          ->capture_default_str();
  CLI::Option* per_channel =
      cmd.add_flag("--per-channel", f.options.per_channel,
                   "Quantize weights per output channel (one scale per channel; needs opset 13) "
                   "instead of one scale per tensor");
  CLI::Option* symmetric =
      cmd.add_flag("--symmetric-activations", f.symmetric,
                   "Quantize activations to int8 with zero point 0 instead of asymmetric uint8");
  CLI::Option* target =
      cmd.add_option(
             "--target-cpu", f.options.target_cpu,
             "CPUs the INT8 model is for: avx2 (7-bit weights in [-64, 64]: exact and full "
             "speed on every AVX2 CPU), vnni (8-bit weights for CPUs with VNNI dot products, "
             "AVX512-VNNI or AVX-VNNI: exact elsewhere too, at about half the INT8 speed), "
             "or native (this CPU's class)")
          ->check(CLI::IsMember({"native", "avx2", "vnni"}))
          ->capture_default_str();
  auto* keep = cmd.add_option("--keep-fp32", f.options.keep_fp32,
                              "Keep the N most sensitive layers in FP32 (measures every layer's "
                              "sensitivity first)")
                   ->check(CLI::NonNegativeNumber);
  CLI::Option* max_drop =
      cmd.add_option(
             "--max-accuracy-drop", f.max_drop,
             "Keep as many of the most sensitive layers in FP32 as needed for the INT8 model "
             "to lose at most X top-1 points on the evaluation data (with labels; without, X "
             "bounds the output error, 100 * (1 - mean cosine) against FP32)")
          ->check(CLI::NonNegativeNumber)
          ->excludes(keep);
  CLI::Option* sensitivity =
      cmd.add_flag("--sensitivity", f.options.sensitivity,
                   "Measure every layer's sensitivity for the report even without --keep-fp32 or "
                   "--max-accuracy-drop");
  return {method, percentile, per_channel, symmetric, target, keep, max_drop, sensitivity};
}

}  // namespace

CommandMain AddQuantizeCommand(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Calibrate a FP32 ONNX model and write it quantized to INT8 (ONNX QuantizeLinear/"
      "DequantizeLinear), or store its weights in FP16/BF16, with a report of the accuracy cost");
  cmd->add_option("model", f->options.model, "FP32 ONNX model file")->required();
  cmd->add_option("--precision", f->options.precision,
                  "int8 (calibrated QDQ model), or fp16 / bf16: the Conv/ConvTranspose/MatMul/Gemm "
                  "weights with >= 1024 values stored in half precision behind Cast nodes (half "
                  "the size; no calibration data; computed in FP32, except BF16 convolutions and "
                  "matrix products on "
                  "CPUs with AVX512-BF16)")
      ->check(CLI::IsMember({"int8", "fp16", "bf16"}))
      ->capture_default_str();
  CLI::Option* calib =
      cmd->add_option("--calib-dir", f->options.calib_dir,
                      "Calibration data (required with --precision int8): a directory with "
                      "inputs.npy (or <input_name>.npy per input), samples stacked on axis 0, or "
                      "one .npy/.pb file per sample; use samples like the ones the model will "
                      "serve (a few hundred are enough)");
  cmd->add_option("--out", f->options.out, "Where to write the quantized ONNX model")->required();
  cmd->add_option("--data", f->options.data_dir,
                  "Evaluation data (same layout, labels.npy for accuracy): accuracy FP32 vs INT8 "
                  "(or FP16/BF16) in the report, and the data for sensitivity; default: the "
                  "calibration data (agreement with FP32 only, unless it has labels); fp16/bf16 "
                  "without --data: no evaluation");
  std::vector<CLI::Option*> int8_only = AddInt8Flags(*cmd, *f);
  cmd->add_option("--batch-size", f->options.batch_size,
                  "Samples per run (a model with a fixed batch dim uses its own)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  CLI::Option* calib_samples = cmd->add_option("--calib-samples", f->options.calib_samples,
                                               "Use only the first N calibration samples (0: all)")
                                   ->check(CLI::NonNegativeNumber)
                                   ->capture_default_str();
  cmd->add_option("--eval-samples", f->options.eval_samples,
                  "Use only the first N evaluation samples (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--report", f->report, "Also write the report as JSON to FILE");
  cmd->add_option("--threads", f->options.threads,
                  "Intra-op threads of every run (0 = the machine's hardware threads)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print the report as one JSON object instead of text");
  cmd->add_flag("--quiet", f->quiet, "No progress lines on stderr");
  int8_only.insert(int8_only.begin(), calib);  // refused in this order
  int8_only.push_back(calib_samples);
  f->int8_only = std::move(int8_only);
  return [f] {
    Status s = Quantize(*f);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln quantize: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
