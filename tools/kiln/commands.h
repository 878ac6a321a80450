// SPDX-License-Identifier: Apache-2.0
#pragma once
// The `kiln` subcommands. Each Add*Command registers its CLI11 subcommand and flags; the returned
// callback runs it and returns the process exit code. main.cc wires them together.

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace CLI {
class App;
}

namespace kiln::tools {

using CommandMain = std::function<int()>;

// `--weight-precision auto|fp32|fp16|bf16` into `value` (OptimizerOptions::weight_precision, with
// "auto" for ""), shared by run, profile and optimize (defined in optimize_command.cc).
void AddWeightPrecisionOption(CLI::App& cmd, std::string& value);

// `kiln run MODEL.onnx ...`: one inference from tensor files.
CommandMain AddRunCommand(CLI::App& app);
// `kiln profile MODEL.onnx ...`: latency, throughput, memory plan and per-node times.
CommandMain AddProfileCommand(CLI::App& app);
// `kiln optimize MODEL.onnx --out OPT.onnx ...`: write the optimized graph.
CommandMain AddOptimizeCommand(CLI::App& app);
// `kiln quantize MODEL.onnx --calib-dir DIR --out INT8.onnx ...`: calibrate and write a QDQ model.
CommandMain AddQuantizeCommand(CLI::App& app);
// `kiln validate MODEL.onnx --data DIR ...`: accuracy and speed, INT8 side by side with FP32.
CommandMain AddValidateCommand(CLI::App& app);
// `kiln serve --model-repository DIR ...`: the inference server.
CommandMain AddServeCommand(CLI::App& app);
// `kiln bench -m MODEL ...`: the load generator (closed and open loop, HTTP and gRPC).
CommandMain AddBenchCommand(CLI::App& app, int argc, char** argv);
// `kiln tune -m MODEL --latency-budget-ms MS ...`: the best config under a p99 budget, searched
// on a live server (src/bench/tune_run.h).
CommandMain AddTuneCommand(CLI::App& app);
// `kiln profile MODEL.gguf` (or a Hugging Face checkpoint directory): the decoder engine's
// prompt processing, token generation and batched decode speed, with per-kernel times
// (llm_profile.cc).
struct LlmProfileOptions {
  std::string model;
  int threads = 0;
  int64_t prompt_tokens = 512;
  int64_t gen_tokens = 128;
  int64_t parallel = 16;
  int64_t parallel_prompt_tokens = 32;
  int64_t batch_size = 512;
  int repetitions = 3;
  int warmup = 4;
  bool json = false;
};
Status ProfileLlm(const LlmProfileOptions& options);

// `kiln generate MODEL.gguf --prompt TEXT ...`: continue a prompt with a generative model.
CommandMain AddGenerateCommand(CLI::App& app);
// `kiln batch --model-repository DIR --model M --input PATH ...`: offline batch inference.
CommandMain AddBatchCommand(CLI::App& app);

}  // namespace kiln::tools
