// SPDX-License-Identifier: Apache-2.0
// `kiln optimize`: import a model, run the graph optimizer (opt/optimizer.h), write the
// optimized graph as an ONNX file (kiln's fused operators in domain ai.kiln, with an opset
// import for it) and print what each pass did.
//
//   kiln optimize model.onnx --out model.opt.onnx
//   kiln optimize model.onnx --out model.opt.onnx --disable-pass attention_fusion
//   kiln optimize model.onnx --out model.fp16.onnx --weight-precision fp16
//   kiln optimize --list-passes
//
// The written file imports and runs with `kiln run` / `kiln serve` like any model (they
// optimize again at load; a second round finds nothing left to do).
// Exit status: 0 on success; 1 with a one-line reason on stderr on any error.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "graph/onnx/exporter.h"
#include "graph/onnx/importer.h"
#include "opt/optimizer.h"
#include "tools/kiln/commands.h"

namespace kiln::tools {
namespace {

struct OptimizeOptions {
  std::string model;
  std::string out;
  std::vector<std::string> disabled;
  bool list = false;
  int max_iterations = OptimizerOptions().max_iterations;
  std::string weight_precision = "auto";  // auto | fp32 | fp16 | bf16
};

Status Optimize(const OptimizeOptions& opt) {
  if (opt.model.empty()) return Status::InvalidArgument("no model given");
  if (opt.out.empty()) return Status::InvalidArgument("--out is required");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph, ImportOnnxModel(opt.model));
  OptimizerOptions options;
  options.disabled_passes = opt.disabled;
  options.max_iterations = opt.max_iterations;
  options.target = KernelTargetFor(DeviceType::kCpu);
  options.weight_precision = opt.weight_precision == "auto" ? "" : opt.weight_precision;
  KILN_ASSIGN_OR_RETURN(OptimizedGraph result, OptimizeGraph(graph, options));
  KILN_RETURN_IF_ERROR(WriteOnnxModel(*result.graph, opt.out));
  std::fputs(FormatPassReport(result).c_str(), stdout);
  std::printf("wrote %s\n", opt.out.c_str());
  return Status::OK();
}

}  // namespace

void AddWeightPrecisionOption(CLI::App& cmd, std::string& value) {
  cmd.add_option("--weight-precision", value,
                 "How Conv / MatMul / Gemm weights are held: auto (FLOAT16 / BFLOAT16 when the "
                 "model stores them so, else FP32), fp32, fp16 or bf16 (half the memory; computed "
                 "in FP32, except BF16 convolutions and matrix products on CPUs with AVX512-BF16)")
      ->check(CLI::IsMember({"auto", "fp32", "fp16", "bf16"}))
      ->capture_default_str();
}

CommandMain AddOptimizeCommand(CLI::App& app) {
  auto opt = std::make_shared<OptimizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "optimize", "Optimize a model's graph and write it as an ONNX file (fused ops in ai.kiln)");
  cmd->add_option("model", opt->model, "ONNX model file");
  cmd->add_option("--out", opt->out, "Where to write the optimized ONNX model");
  cmd->add_option("--disable-pass", opt->disabled,
                  "Do not run the optimizer pass NAME (repeatable; see --list-passes)");
  cmd->add_option("--max-iterations", opt->max_iterations, "Rounds of the pass pipeline at most")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  AddWeightPrecisionOption(*cmd, opt->weight_precision);
  cmd->add_flag("--list-passes", opt->list, "List the optimizer passes in pipeline order and exit");
  return [opt] {
    if (opt->list) {
      for (const PassInfo& p : ListPasses()) {
        std::printf("%-34s %s\n", std::string(p.name).c_str(), std::string(p.description).c_str());
      }
      return 0;
    }
    Status s = Optimize(*opt);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln optimize: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
