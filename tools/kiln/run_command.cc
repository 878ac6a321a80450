// SPDX-License-Identifier: Apache-2.0
// `kiln run`: import a model, optimize its graph (opt/optimizer.h; --no-optimize skips it,
// --disable-pass NAME switches one pass off, --weight-precision fp16 holds weights in half), read
// its inputs from tensor files (.pb TensorProto or .npy), run it once, write every output to a
// file (the input flags: tools/kiln/input_files.h). Used by people checking a model and by the
// ONNX conformance runner. Inputs and outputs declared as sequences or optionals are .pb
// SequenceProto / OptionalProto files (the model's declared type says which), as in the ONNX
// backend test data.
//
//   kiln run model.onnx --input x=x.npy --output-dir out/
//   kiln run model.onnx --inputs-dir test_data_set_0 --output-dir out/   # input_0.pb, ...
//   kiln run model.onnx --inputs a.pb,b.pb --output-dir out/ --output-format npy
//   kiln run model.onnx --inputs-dir set --output-dir out/ --implementations -  # per-node kernels
//
// Exit status: 0 on success; 1 with a one-line reason on stderr on any error.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "graph/onnx/importer.h"
#include "graph/onnx/tensor_file.h"
#include "opt/optimizer.h"
#include "runtime/session.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/input_files.h"

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;

struct RunOptions {
  std::string model;
  InputFileFlags inputs;
  std::string output_dir;
  std::string output_format = "pb";
  int threads = 0;  // intra-op threads; 0: the machine's hardware threads
  bool no_optimize = false;
  std::vector<std::string> disabled_passes;
  std::string weight_precision = "auto";  // auto | fp32 | fp16 | bf16
  std::string implementations;            // --implementations FILE ("-": stdout)
};

// One line per node that ran: "<node>\t<op>\t<provider>\t<implementation>" (tab-separated; the
// implementation may be empty: the provider's own kernel).
Status WriteImplementations(const Session& session, const std::string& path) {
  std::string text;
  const Graph& g = session.graph();
  for (int n = 0; n < static_cast<int>(g.nodes().size()); ++n) {
    const Node& node = g.node(n);
    text += fmt::format("{}\t{}\t{}\t{}\n", node.name.empty() ? node.op_type : node.name,
                        node.op_type, session.provider(n), session.implementation(n));
  }
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return Status::OK();
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return Status::InvalidArgument(fmt::format("cannot write --implementations '{}'", path));
  }
  const bool ok = std::fputs(text.c_str(), f) >= 0;
  if (std::fclose(f) != 0 || !ok) {
    return Status::Internal(fmt::format("writing --implementations '{}' failed", path));
  }
  return Status::OK();
}

Status RunModel(const RunOptions& opt) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> graph, ImportOnnxModel(opt.model));
  if (!opt.no_optimize) {
    OptimizerOptions options;
    options.disabled_passes = opt.disabled_passes;
    options.weight_precision = opt.weight_precision == "auto" ? "" : opt.weight_precision;
    options.target = KernelTargetFor(DeviceType::kCpu);
    KILN_ASSIGN_OR_RETURN(OptimizedGraph optimized, OptimizeGraph(graph, options));
    graph = optimized.graph;
  }
  SessionOptions session_options;
  session_options.intra_op_threads = opt.threads;
  session_options.adapt_threads = false;  // one run: nothing to adapt to
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(graph, session_options));
  KILN_ASSIGN_OR_RETURN(InputFiles files, ReadInputFiles(opt.inputs, *graph, opt.model));
  KILN_RETURN_IF_ERROR(RequireEveryInput(files, *graph));
  const std::vector<RuntimeValue>& values = files.values;

  KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outputs, session->RunValues(values));
  if (!opt.implementations.empty()) {
    KILN_RETURN_IF_ERROR(WriteImplementations(*session, opt.implementations));
  }

  std::error_code ec;
  fs::create_directories(opt.output_dir, ec);
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("cannot create --output-dir '{}': {}", opt.output_dir, ec.message()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string path = fmt::format("{}/output_{}.{}", opt.output_dir, i, opt.output_format);
    const Value& output = graph->value(graph->outputs[i]);
    KILN_RETURN_IF_ERROR(WriteValueFile(path, outputs[i], output.type, output.name));
  }
  return Status::OK();
}

}  // namespace

CommandMain AddRunCommand(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a model once on inputs read from files and write its outputs to files");
  cmd->add_option("model", opt->model, "ONNX model file")->required();
  AddInputFileOptions(*cmd, opt->inputs, "");
  cmd->add_option("--output-dir", opt->output_dir,
                  "Directory that receives output_0.<fmt>, output_1.<fmt>, ... in graph-output "
                  "order (created if missing)")
      ->required();
  cmd->add_option("--output-format", opt->output_format,
                  "Output file format: pb or npy (sequence and none outputs need pb)")
      ->check(CLI::IsMember({"pb", "npy"}))
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads,
                  "Intra-op threads of the run (0 = the machine's hardware threads)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_flag("--no-optimize", opt->no_optimize,
                "Run the graph as imported, without the graph optimizer");
  cmd->add_option("--disable-pass", opt->disabled_passes,
                  "Do not run the optimizer pass NAME (repeatable; `kiln optimize --list-passes` "
                  "lists them)");
  cmd->add_option("--implementations", opt->implementations,
                  "Also write, per node, the kernel implementations it ran on (tab-separated "
                  "node, op, provider, implementation: \"oneDNN jit:avx2\", \"kiln ref\", ...) "
                  "to FILE, or to stdout with -");
  AddWeightPrecisionOption(*cmd, opt->weight_precision);
  return [opt] {
    Status s = RunModel(*opt);
    if (!s.ok()) {
      std::fprintf(stderr, "kiln run: %s\n", s.message().c_str());
      return 1;
    }
    return 0;
  };
}

}  // namespace kiln::tools
