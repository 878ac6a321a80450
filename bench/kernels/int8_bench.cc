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
#include "graph/kiln_ops.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

struct In {
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> dims;
  bool constant = false;
  double lo = -1, hi = 1;  // uniform range (integers: inclusive)
};

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

OwnedTensor Random(const In& in, std::mt19937& rng) {
  OwnedTensor t = OwnedTensor::Allocate(in.dtype, Shape(std::span<const int64_t>(in.dims))).value();
  const int64_t n = t.num_elements();
  if (in.dtype == DataType::kFloat32) {
    std::uniform_real_distribution<float> d(float(in.lo), float(in.hi));
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(rng);
    return t;
  }
  std::uniform_int_distribution<int> d(int(in.lo), int(in.hi));
  for (int64_t i = 0; i < n; ++i) {
    const int v = d(rng);
    switch (in.dtype) {
      case DataType::kUint8:
        t.data<uint8_t>()[i] = uint8_t(v);
        break;
      case DataType::kInt8:
        t.data<int8_t>()[i] = int8_t(v);
        break;
      default:
        t.data<int32_t>()[i] = v;
        break;
    }
  }
  return t;
}

struct Prepared {
  std::shared_ptr<Graph> graph;
  std::unique_ptr<Kernel> kernel;
  std::vector<OwnedTensor> feeds;
  std::vector<Tensor> inputs;
};

std::unique_ptr<Prepared> Prepare(const Case& c) {
  auto p = std::make_unique<Prepared>();
  p->graph = std::make_shared<Graph>();
  Graph& g = *p->graph;
  g.opset_imports[""] = 17;
  g.opset_imports[std::string(kKilnDomain)] = 1;
  std::mt19937 rng(1);
  Node node;
  node.name = c.op;
  node.op_type = c.op;
  node.domain = c.op == "MatMul" ? "" : std::string(kKilnDomain);
  node.attributes = c.attrs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Value v;
    v.name = "in" + std::to_string(i);
    v.type.dtype = c.inputs[i].dtype;
    if (c.inputs[i].dims.empty() && c.inputs[i].lo > c.inputs[i].hi) {  // omitted
      node.inputs.push_back(kNoValue);
      p->inputs.emplace_back();
      continue;
    }
    OwnedTensor t = Random(c.inputs[i], rng);
    p->inputs.push_back(t.view());
    if (c.inputs[i].constant) {
      v.constant = std::make_shared<const OwnedTensor>(t);
    } else {
      g.inputs.push_back(g.num_values());
    }
    p->feeds.push_back(std::move(t));
    node.inputs.push_back(g.AddValue(std::move(v)));
  }
  Value out;
  out.name = "out";
  node.outputs.push_back(g.AddValue(std::move(out)));
  g.AddNode(std::move(node));
  const Node& n = g.nodes()[0];
  KernelInfo info(g, n, g.OpsetFor(n.domain));
  Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
  if (!def.ok() || (*def)->provider != "cpu") return nullptr;
  Result<std::unique_ptr<Kernel>> k = (*def)->create(info);
  if (!k.ok()) return nullptr;
  p->kernel = std::move(k).value();
  return p;
}

void Run(benchmark::State& state, const Case& c) {
  std::unique_ptr<Prepared> p = Prepare(c);
  if (p == nullptr) {
    state.SkipWithError("no cpu kernel");
    return;
  }
  for (auto _ : state) {
    std::vector<OwnedTensor> outputs(1);
    KernelContext ctx(p->inputs, outputs);
    Status s = p->kernel->Compute(ctx);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
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
