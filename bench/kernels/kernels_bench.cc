// SPDX-License-Identifier: Apache-2.0
// Microbenchmarks of the fast CPU kernels (provider "cpu") against the reference kernels
// ("ref") on shapes from ResNet-50, MobileNetV2 and BERT-base. Each case runs as
// <case>/ref and <case>/cpu; at the end a table prints the speedup ref time / cpu time.
// ai.kiln ops have no reference kernel in this binary's registry when none is registered; those
// cases print the cpu time only.
//
//   OMP_NUM_THREADS=2 build/bench/kernels/kernels_bench --benchmark_min_time=0.2
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true [--benchmark_filter=conv]
// Times are wall-clock (the kernels are multi-threaded); the table uses the median when
// repetitions are on.

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "single_node.h"

namespace kiln {
namespace {

struct In {
  std::vector<int64_t> dims;
  bool constant = false;
};

struct Case {
  std::string name;
  std::string op;
  std::string domain;
  std::vector<In> inputs;
  std::vector<Attribute> attrs;
};

// The case on the kernel of `provider` (single_node.h), FP32 inputs in [-1, 1].
std::unique_ptr<bench_kernels::Prepared> Prepare(const Case& c, std::string_view provider) {
  std::vector<bench_kernels::In> inputs;
  for (const In& in : c.inputs) inputs.push_back({DataType::kFloat32, in.dims, in.constant});
  return bench_kernels::PrepareNode(c.op, c.domain, inputs, c.attrs, provider);
}

void Run(benchmark::State& state, const Case& c, std::string provider) {
  std::unique_ptr<bench_kernels::Prepared> p = Prepare(c, provider);
  bench_kernels::RunKernel(state, p.get());
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  auto conv = [&](std::string name, std::vector<int64_t> x, std::vector<int64_t> w, int64_t stride,
                  int64_t pad, int64_t group) {
    Case c{name, "Conv", "", {{x}, {w, true}, {{w[0]}, true}}, {}};
    c.attrs = {Attribute::Ints("strides", {stride, stride}),
               Attribute::Ints("pads", {pad, pad, pad, pad}), Attribute::Int("group", group)};
    v.push_back(c);
  };
  conv("conv_resnet50_7x7s2_b1", {1, 3, 224, 224}, {64, 3, 7, 7}, 2, 3, 1);
  conv("conv_resnet50_3x3_64_b1", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1);
  conv("conv_resnet50_1x1_256to64_b1", {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, 1);
  conv("conv_resnet50_3x3_512_b1", {1, 512, 7, 7}, {512, 512, 3, 3}, 1, 1, 1);
  conv("conv_mobilenetv2_dw3x3_144_b1", {1, 144, 56, 56}, {144, 1, 3, 3}, 1, 1, 144);
  v.push_back({"matmul_bert_qkv_768x768", "MatMul", "", {{{1, 128, 768}}, {{768, 768}, true}}, {}});
  v.push_back(
      {"matmul_bert_ffn_768x3072", "MatMul", "", {{{1, 128, 768}}, {{768, 3072}, true}}, {}});
  v.push_back(
      {"matmul_bert_scores_12x128x64", "MatMul", "", {{{1, 12, 128, 64}}, {{1, 12, 64, 128}}}, {}});
  v.push_back(
      {"matmul_bert_tiny_1x8x128x128", "MatMul", "", {{{1, 8, 128}}, {{128, 128}, true}}, {}});
  v.push_back({"add_bert_tiny_1x8x128", "Add", "", {{{1, 8, 128}}, {{128}, true}}, {}});
  v.push_back({"gemm_transB_1x2048x1000",
               "Gemm",
               "",
               {{{1, 2048}}, {{1000, 2048}, true}, {{1000}, true}},
               {Attribute::Int("transB", 1)}});
  v.push_back({"maxpool_resnet50_3x3s2",
               "MaxPool",
               "",
               {{{1, 64, 112, 112}}},
               {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                Attribute::Ints("pads", {1, 1, 1, 1})}});
  v.push_back({"avgpool_3x3s1p1_inception",
               "AveragePool",
               "",
               {{{1, 192, 28, 28}}},
               {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1}),
                Attribute::Int("count_include_pad", 1)}});
  v.push_back({"globalavgpool_resnet50", "GlobalAveragePool", "", {{{1, 2048, 7, 7}}}, {}});
  v.push_back(
      {"softmax_bert_scores", "Softmax", "", {{{1, 12, 128, 128}}}, {Attribute::Int("axis", -1)}});
  v.push_back({"add_bert_bias", "Add", "", {{{1, 128, 768}}, {{768}, true}}, {}});
  v.push_back({"add_bert_residual", "Add", "", {{{1, 128, 768}}, {{1, 128, 768}}}, {}});
  v.push_back(
      {"mul_channel_1x256x56x56", "Mul", "", {{{1, 256, 56, 56}}, {{256, 1, 1}, true}}, {}});
  v.push_back({"erf_bert_ffn", "Erf", "", {{{1, 128, 3072}}}, {}});
  v.push_back({"tanh_bert_ffn", "Tanh", "", {{{1, 128, 3072}}}, {}});
  v.push_back({"sigmoid_bert_ffn", "Sigmoid", "", {{{1, 128, 3072}}}, {}});
  v.push_back({"relu_resnet50", "Relu", "", {{{1, 256, 56, 56}}}, {}});
  v.push_back({"gelu_bert_ffn", "Gelu", "ai.kiln", {{{1, 128, 3072}}}, {}});
  v.push_back({"gelu_tanh_bert_ffn",
               "Gelu",
               "ai.kiln",
               {{{1, 128, 3072}}},
               {Attribute::String("approximate", "tanh")}});
  v.push_back({"layernorm_bert",
               "LayerNormalization",
               "ai.kiln",
               {{{1, 128, 768}}, {{768}, true}, {{768}, true}},
               {}});
  v.push_back({"fusedconv_resnet50_3x3_64_relu_z",
               "FusedConv",
               "ai.kiln",
               {{{1, 64, 56, 56}}, {{64, 64, 3, 3}, true}, {{64}, true}, {{1, 64, 56, 56}}},
               {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::String("activation", "Relu")}});
  v.push_back({"fusedmatmul_bert_ffn_bias_gelu",
               "FusedMatMul",
               "ai.kiln",
               {{{1, 128, 768}}, {{768, 3072}, true}, {{3072}, true}},
               {Attribute::String("activation", "Gelu")}});
  v.push_back({"attention_bert_base_s128",
               "Attention",
               "ai.kiln",
               {{{1, 12, 128, 64}}, {{1, 12, 128, 64}}, {{1, 12, 128, 64}}, {{1, 1, 1, 128}}},
               {}});
  v.push_back({"transpose_bert_heads",
               "Transpose",
               "",
               {{{1, 128, 12, 64}}},
               {Attribute::Ints("perm", {0, 2, 1, 3})}});
  v.push_back({"transpose_2d_768x3072",
               "Transpose",
               "",
               {{{768, 3072}}},
               {Attribute::Ints("perm", {1, 0})}});
  v.push_back({"reducemean_bert_hidden",
               "ReduceMean",
               "",
               {{{1, 128, 768}}},
               {Attribute::Ints("axes", {-1})}});
  return v;
}

// Records each run's time so the speedups can be printed at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      // With --benchmark_repetitions, keep the median.
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      std::string name = r.run_name.function_name;
      times_[name] = r.GetAdjustedRealTime();
    }
  }
  void PrintRatios() const {
    fmt::print("\n{:<36} {:>12} {:>12} {:>9}\n", "case", "ref", "cpu", "speedup");
    for (const Case& c : Cases()) {
      auto r = times_.find(c.name + "/ref");
      auto f = times_.find(c.name + "/cpu");
      if (f == times_.end()) continue;
      if (r == times_.end()) {
        fmt::print("{:<36} {:>12} {:>12.1f} {:>9}\n", c.name, "-", f->second, "(no ref)");
      } else {
        fmt::print("{:<36} {:>12.1f} {:>12.1f} {:>8.1f}x\n", c.name, r->second, f->second,
                   r->second / f->second);
      }
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  for (const kiln::Case& c : kiln::Cases()) {
    for (const char* provider : {"ref", "cpu"}) {
      benchmark::RegisterBenchmark(
          (c.name + "/" + provider).c_str(),
          [c, provider](benchmark::State& s) { kiln::Run(s, c, provider); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  kiln::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
