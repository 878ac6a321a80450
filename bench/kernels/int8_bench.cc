// SPDX-License-Identifier: Apache-2.0
// INT8 against FP32 on the fast CPU kernels, same shapes: ai.kiln QConv (UINT8 in and out,
// per-channel INT8 weights, INT32 bias, fused Relu) against ai.kiln FusedConv (FP32, bias, fused
// Relu), and ai.kiln QMatMul (UINT8 in and out) against MatMul, on ResNet-50 / MobileNetV2 convs
// and a BERT-base 768x768 projection at batch 8. Each case runs as <case>/fp32 and <case>/int8;
// a table at the end prints fp32 time / int8 time. Convs also run as <case>/int8_nhwc: X and Y
// channels-last, as qdq_fusion stores the tensors between quantized convs. Both kernels of a case
// run in the same process, back to back, so a loaded machine slows both.
//
//   OMP_NUM_THREADS=1 build/bench/kernels/int8_bench --benchmark_min_time=0.3
//       --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "op/kiln_ops.h"
#include "single_node.h"

namespace kiln {
namespace {

using bench_kernels::In;

struct Case {
  std::string op;
  std::vector<In> inputs;
  std::vector<Attribute> attrs;
};

struct Pair {
  std::string name;
  Case fp32, int8;
  std::optional<Case> int8_cl;  // QConv with X and Y channels-last (as between quantized convs)
};

void Run(benchmark::State& state, const Case& c) {
  const std::string domain = c.op == "MatMul" ? "" : std::string(kKilnDomain);
  std::unique_ptr<bench_kernels::Prepared> p =
      bench_kernels::PrepareNode(c.op, domain, c.inputs, c.attrs, "cpu");
  bench_kernels::RunKernel(state, p.get());
}

In F32(std::vector<int64_t> d, bool constant = false) {
  return {DataType::kFloat32, std::move(d), constant};
}
In Scalar(DataType t, double v) { return {t, {}, true, v, v}; }

// The QConv / QMatMul inputs after X: x_scale, x_zp, W, w_scale [channels], w_zp, y_scale, y_zp.
std::vector<In> QuantTail(std::vector<int64_t> w, int64_t channels) {
  return {Scalar(DataType::kFloat32, 0.02),
          Scalar(DataType::kUint8, 128),
          {DataType::kInt8, std::move(w), true, -127, 127},
          {DataType::kFloat32, {channels}, true, 0.001, 0.01},
          {DataType::kInt8, {channels}, true, 0, 0},
          Scalar(DataType::kFloat32, 0.05),
          Scalar(DataType::kUint8, 0)};
}

std::vector<Pair> Pairs() {
  std::vector<Pair> v;
  auto conv = [&](std::string name, std::vector<int64_t> x, std::vector<int64_t> w, int64_t stride,
                  int64_t pad, int64_t group) {
    std::vector<Attribute> attrs = {
        Attribute::Ints("strides", {stride, stride}), Attribute::Ints("pads", {pad, pad, pad, pad}),
        Attribute::Int("group", group), Attribute::String("activation", "Relu")};
    Case fp32{std::string(kFusedConvOp), {F32(x), F32(w, true), F32({w[0]}, true)}, attrs};
    Case int8{std::string(kQConvOp), {{DataType::kUint8, x, false, 0, 255}}, attrs};
    for (In& in : QuantTail(w, w[0])) int8.inputs.push_back(in);
    int8.inputs.push_back({DataType::kInt32, {w[0]}, true, -1000, 1000});
    Case cl = int8;
    std::rotate(cl.inputs[0].dims.begin() + 1, cl.inputs[0].dims.begin() + 2,
                cl.inputs[0].dims.end());
    cl.attrs.push_back(Attribute::Int("x_channels_last", 1));
    cl.attrs.push_back(Attribute::Int("y_channels_last", 1));
    v.push_back({name, fp32, int8, cl});
  };
  conv("conv_resnet50_3x3_64_56_b8", {8, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1);
  conv("conv_resnet50_1x1_256to64_56_b8", {8, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, 1);
  conv("conv_resnet50_1x1_64to256_56_b8", {8, 64, 56, 56}, {256, 64, 1, 1}, 1, 0, 1);
  conv("conv_resnet50_3x3_256_14_b8", {8, 256, 14, 14}, {256, 256, 3, 3}, 1, 1, 1);
  conv("conv_resnet50_3x3_512_7_b8", {8, 512, 7, 7}, {512, 512, 3, 3}, 1, 1, 1);
  conv("conv_mobilenetv2_dw3x3_144_56_b8", {8, 144, 56, 56}, {144, 1, 3, 3}, 1, 1, 144);
  conv("conv_mobilenetv2_1x1_144to24_56_b8", {8, 144, 56, 56}, {24, 144, 1, 1}, 1, 0, 1);
  {
    Case fp32{"MatMul", {F32({8, 128, 768}), F32({768, 768}, true)}, {}};
    Case int8{std::string(kQMatMulOp), {{DataType::kUint8, {8, 128, 768}, false, 0, 255}}, {}};
    for (In& in : QuantTail({768, 768}, 768)) int8.inputs.push_back(in);
    v.push_back({"matmul_bert_768x768_b8_s128", fp32, int8, std::nullopt});
  }
  return v;
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      times_[r.run_name.function_name] = r.GetAdjustedRealTime();
    }
  }
  void PrintRatios() const {
    fmt::print("\n{:<40} {:>10} {:>10} {:>8} {:>12} {:>8}\n", "case (us)", "fp32", "int8",
               "speedup", "int8_nhwc", "speedup");
    for (const Pair& p : Pairs()) {
      auto f = times_.find(p.name + "/fp32");
      auto q = times_.find(p.name + "/int8");
      if (f == times_.end() || q == times_.end()) continue;
      fmt::print("{:<40} {:>10.1f} {:>10.1f} {:>7.2f}x", p.name, f->second, q->second,
                 f->second / q->second);
      auto c = times_.find(p.name + "/int8_nhwc");
      if (c != times_.end()) {
        fmt::print(" {:>12.1f} {:>7.2f}x", c->second, f->second / c->second);
      }
      fmt::print("\n");
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  for (const kiln::Pair& p : kiln::Pairs()) {
    benchmark::RegisterBenchmark((p.name + "/fp32").c_str(),
                                 [c = p.fp32](benchmark::State& s) { kiln::Run(s, c); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((p.name + "/int8").c_str(),
                                 [c = p.int8](benchmark::State& s) { kiln::Run(s, c); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    if (p.int8_cl) {
      benchmark::RegisterBenchmark((p.name + "/int8_nhwc").c_str(),
                                   [c = *p.int8_cl](benchmark::State& s) { kiln::Run(s, c); })
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
