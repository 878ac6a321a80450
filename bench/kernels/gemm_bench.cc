// SPDX-License-Identifier: Apache-2.0
// kiln's batch-invariant FP32 GEMM (src/kernels/cpu/gemm.h) against oneDNN's matmul primitive
// (B pre-packed in the format oneDNN picks) on MatMul shapes of the benchmark models, interleaved
// case by case. Each case runs as <shape>/kiln and <shape>/onednn; the table at the end prints
// GFLOP/s and the ratio kiln / oneDNN. On a CPU without AVX-512 (or under
// ONEDNN_MAX_CPU_ISA=AVX2) oneDNN runs its jit sgemm, which is what kiln's GEMM replaces there.
//
//   OMP_NUM_THREADS=2 ONEDNN_MAX_CPU_ISA=AVX2 build/bench/kernels/gemm_bench
//       --benchmark_min_time=0.2 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace kiln {
namespace {

struct Shape3 {
  const char* what;
  int64_t m, k, n;
};

const std::vector<Shape3>& Shapes() {
  static const std::vector<Shape3> shapes = {
      {"classifier_b1", 1, 1280, 1000},
      {"digits_b8", 8, 64, 32},
      {"resnet_fc_b32", 32, 2048, 1000},
      {"bert_qkv", 128, 768, 768},
      {"bert_ffn_up", 128, 768, 3072},
      {"bert_ffn_down", 128, 3072, 768},
      {"vit_mlp", 197, 768, 3072},
      {"tiny_b1", 1, 128, 128},
      {"bert_tiny_qkv", 128, 128, 384},
      {"bert_tiny_ffn_up", 128, 128, 512},
      {"bert_tiny_ffn_down", 128, 512, 128},
      {"bert_b8_qkv", 1024, 768, 768},
      {"bert_b8_ffn_up", 1024, 768, 3072},
      {"bert_b8_ffn_down", 1024, 3072, 768},
      {"square_1024", 1024, 1024, 1024},
      // Transformer MLPs (bench/kernels/transformer_gemm.py): ViT-B/16 at batch 1 and 8, the
      // breadth suite's encoder_small and decoder chunk.
      {"vit_mlp_down", 197, 3072, 768},
      {"vit_b8_mlp", 1576, 768, 3072},
      {"vit_b8_mlp_down", 1576, 3072, 768},
      {"encoder_small_up", 128, 384, 1536},
      {"decoder_chunk_up", 32, 512, 2048},
      // CNN classifiers: ResNet-50 / EfficientNet at batch 1, VGG / AlexNet fc layers.
      {"resnet_fc_b1", 1, 2048, 1000},
      {"fc4096_b1", 1, 4096, 4096},
      {"alexnet_fc6_b1", 1, 9216, 4096},
      {"vgg_fc6_b8", 8, 25088, 4096},
      {"square_2048", 2048, 2048, 2048},
  };
  return shapes;
}

std::map<std::string, double>& Seconds() {
  static std::map<std::string, double> s;
  return s;
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

float* Aligned(int64_t floats) {
  return static_cast<float*>(
      std::aligned_alloc(64, (static_cast<size_t>(floats) * 4 + 63) / 64 * 64));
}

void Record(benchmark::State& state, const std::string& key, int64_t macs) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(macs),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(key);
}

void BM_Kiln(benchmark::State& state, Shape3 s) {
  const std::vector<float> a = Random(s.m * s.k, 1), b = Random(s.k * s.n, 2);
  float* panels = Aligned(cpu::GemmPackedElements(s.k, s.n));
  cpu::GemmPackB(b.data(), s.k, s.n, s.n, 1, panels);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  cpu::GemmEpilogue e;
  for (auto _ : state) {
    cpu::Gemm(s.m, a.data(), s.k, 1, cpu::GemmB{panels, s.k, s.n}, c.data(), s.n, e);
    benchmark::DoNotOptimize(c.data());
  }
  Record(state, "kiln", s.m * s.k * s.n);
  std::free(panels);
}

void BM_Onednn(benchmark::State& state, Shape3 s) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<float> a = Random(s.m * s.k, 1), b = Random(s.k * s.n, 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  const dnnl::memory::desc a_md({s.m, s.k}, dt::f32, tag::ab), b_any({s.k, s.n}, dt::f32, tag::any),
      c_md({s.m, s.n}, dt::f32, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  dnnl::memory b_user({{s.k, s.n}, dt::f32, tag::ab}, eng, b.data());
  dnnl::memory b_packed(pd.weights_desc(), eng);
  dnnl::reorder(b_user, b_packed).execute(strm, b_user, b_packed);
  strm.wait();
  const dnnl::matmul prim(pd);
  dnnl::memory a_mem(a_md, eng, a.data()), c_mem(c_md, eng, c.data());
  for (auto _ : state) {
    prim.execute(strm,
                 {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_packed}, {DNNL_ARG_DST, c_mem}});
    strm.wait();
  }
  Record(state, pd.impl_info_str(), s.m * s.k * s.n);
}

class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      if (r.error_occurred) continue;
      Seconds()[r.benchmark_name()] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  using namespace kiln;
  for (const Shape3& s : Shapes()) {
    const std::string base = fmt::format("{}_{}x{}x{}", s.what, s.m, s.k, s.n);
    benchmark::RegisterBenchmark((base + "/kiln").c_str(), BM_Kiln, s)->UseRealTime();
    benchmark::RegisterBenchmark((base + "/onednn").c_str(), BM_Onednn, s)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  TableReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\n%-34s %12s %12s %10s\n", "shape", "kiln GF/s", "oneDNN GF/s", "kiln/oneDNN");
  for (const Shape3& s : Shapes()) {
    const std::string base = fmt::format("{}_{}x{}x{}", s.what, s.m, s.k, s.n);
    auto find = [&](const std::string& suffix) {
      for (const auto& [name, t] : Seconds()) {
        if (name.rfind(base + suffix, 0) == 0) return t;
      }
      return 0.0;
    };
    const double tk = find("/kiln"), to = find("/onednn");
    if (tk <= 0 || to <= 0) continue;
    const double gf = 2.0 * static_cast<double>(s.m * s.k * s.n) / 1e9;
    // Adjusted times are in the benchmark's unit (ns by default).
    std::printf("%-34s %12.1f %12.1f %9.2fx\n", base.c_str(), gf / (tk * 1e-9), gf / (to * 1e-9),
                to / tk);
  }
  benchmark::Shutdown();
  return 0;
}
