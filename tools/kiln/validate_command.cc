// SPDX-License-Identifier: Apache-2.0
// `kiln validate`: accuracy and speed of a model on a labeled (or unlabeled) dataset; for a
// quantized (INT8) or half-precision (FP16/BF16) model, side by side with its FP32 source
// (quant/quantizer.h, docs/quantization.md).
//
//   kiln validate model.onnx --data val/ --precision fp32
//   kiln validate model.int8.onnx --data val/ --precision int8 [--reference model.onnx] --json
//   kiln validate model.fp16.onnx --data val/            # auto: fp16, reference from metadata
//   kiln validate model.onnx --data val/ --precision bf16  # FP32 model converted at load
//   kiln validate model.int8.onnx --input image=val.npy --labels val_labels.npy
//   kiln validate model.int8.onnx --inputs-dir test_data_set_0   # input_0.pb, ...
//
// The samples come from --data DIR (the dataset layouts of quant/dataset.h) or, instead, from
// input files as `kiln run` reads them (--input NAME=FILE, --inputs, --inputs-dir;
// tools/kiln/input_files.h): each file holds all the samples of one graph input stacked on axis 0
// (a model with a fixed batch dim takes any sample count), and labels come from --labels only.
//
// Progress goes to stderr, the result to stdout (a table, or one JSON object with --json).
// Exit status: 0 on success; 1 with a one-line reason on stderr on any error.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "quant/quantizer.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/input_files.h"

namespace kiln::tools {
namespace {

struct ValidateFlags {
  quant::ValidateOptions options;
  InputFileFlags inputs;  // the samples from files instead of --data
  bool json = false;
  bool quiet = false;
};

// The samples of every input of `graph` from the files `flags` name: tensors, one file each.
Result<std::vector<quant::InputSamples>> ReadSamples(const InputFileFlags& flags,
                                                     const Graph& graph, const std::string& model) {
  KILN_ASSIGN_OR_RETURN(InputFiles files, ReadInputFiles(flags, graph, model));
  KILN_RETURN_IF_ERROR(RequireEveryInput(files, graph));
  std::vector<quant::InputSamples> samples;
  for (size_t i = 0; i < files.values.size(); ++i) {
    const RuntimeValue& value = files.values[i];
    if (!value.is_tensor()) {
      return Status::InvalidArgument(
          fmt::format("input '{}' from '{}' is a {}; kiln validate reads tensors only",
                      graph.value(graph.inputs[i]).name, files.paths[i], value.Describe()));
    }
    samples.push_back({files.paths[i], value.tensor()});
  }
  return samples;
}

Status Validate(ValidateFlags& f) {
  if (!f.inputs.empty()) {
    f.options.load_inputs = [inputs = f.inputs, model = f.options.model](const Graph& graph) {
      return ReadSamples(inputs, graph, model);
    };
  }
  if (!f.quiet) {
    f.options.log = [](std::string_view line) {
      std::fprintf(stderr, "kiln validate: %.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  KILN_ASSIGN_OR_RETURN(quant::ValidateReport report, quant::ValidateModel(f.options));
  if (f.json) {
    std::printf("%s\n", quant::ValidateReportJson(report).c_str());
  } else {
    std::fputs(quant::FormatValidateReport(report).c_str(), stdout);
  }
  return Status::OK();
}

}  // namespace

CommandMain AddValidateCommand(CLI::App& app) {
  auto f = std::make_shared<ValidateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Measure a model's accuracy (top-1/top-5 with labels; agreement and cosine similarity "
      "with the FP32 model) and speed on a dataset");
  cmd->add_option("model", f->options.model,
                  "ONNX model file (FP32, INT8 QDQ, or FP16/BF16 weights from `kiln quantize`)")
      ->required();
  cmd->add_option("--data", f->options.data_dir,
                  "Data directory: inputs.npy (or <input_name>.npy per input), samples stacked on "
                  "axis 0, or one .npy/.pb file per sample; labels.npy (INT64 [N]) for accuracy. "
                  "Required unless the samples come from --input / --inputs / --inputs-dir");
  AddInputFileOptions(*cmd, f->inputs,
                      "instead of --data: each file holds every sample of its input stacked on "
                      "axis 0 (labels from --labels)");
  cmd->add_option("--labels", f->options.labels,
                  "Labels file (.npy/.pb, integers [N]) instead of DIR/labels.npy; with input "
                  "files, the only source of labels");
  cmd->add_option("--precision", f->options.precision,
                  "fp32; int8 (a QDQ model from `kiln quantize`, compared with its FP32 "
                  "reference); fp16 or bf16 (a half-precision model, compared with its FP32 "
                  "reference, or a FP32 model converted at load and compared with itself); auto: "
                  "int8 when the model holds QuantizeLinear/DequantizeLinear, fp16/bf16 when its "
                  "metadata or FLOAT16/BFLOAT16 initializers say so, else fp32")
      ->check(CLI::IsMember({"auto", "fp32", "int8", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--reference", f->options.reference,
                  "FP32 model the INT8/FP16/BF16 outputs are compared with (default: the source "
                  "that `kiln quantize` recorded in the model's metadata)");
  cmd->add_option("--batch-size", f->options.batch_size,
                  "Samples per run (a model with a fixed batch dim uses its own)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  cmd->add_option("--max-samples", f->options.max_samples, "Use only the first N samples (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", f->options.threads,
                  "Intra-op threads of every run (0 = the machine's hardware threads)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--repeat", f->options.repeat,
                  "Time N passes over the data (FP32 and the converted model alternating) and "
                  "report the median "
                  "items/s of each")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print one JSON object instead of a table");
  cmd->add_flag("--quiet", f->quiet, "No progress lines on stderr");
  return [f] {
    Status s = Validate(*f);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln validate: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
