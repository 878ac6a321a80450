// SPDX-License-Identifier: Apache-2.0
// half_weights and the weight precision resolution: with fp16 / bf16 a Conv+Relu+Gemm+MatMul
// graph keeps its large weights as FLOAT16 / BFLOAT16 initializers read by ai.kiln ops, runs on
// the CPU kernels and on the reference kernels, and computes what the FP32 graph computes with
// the weights rounded to the half type here in the test (1e-4 relative), and the unrounded FP32
// graph within the half rounding error. Auto precision keeps a model's half weights half (a
// Cast of a FLOAT16 / BFLOAT16 initializer, bit for bit), leaves FP32 models FP32, and an
// unknown precision is INVALID_ARGUMENT.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

float RoundThrough(DataType dt, float v) {
  return dt == DataType::kFloat16 ? Float16ToFloat(FloatToFloat16(v))
                                  : BFloat16ToFloat(FloatToBFloat16(v));
}

OwnedTensor RoundedTensor(const OwnedTensor& t, DataType dt) {
  OwnedTensor out = OwnedTensor::CopyOf(t.view()).value();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    out.data<float>()[i] = RoundThrough(dt, out.data<float>()[i]);
  }
  return out;
}

OwnedTensor HalfTensor(const OwnedTensor& t, DataType dt) {
  OwnedTensor out = OwnedTensor::Allocate(dt, t.shape()).value();
  uint16_t* q = static_cast<uint16_t*>(out.raw_data());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const float v = t.data<const float>()[i];
    q[i] = dt == DataType::kFloat16 ? FloatToFloat16(v).bits : FloatToBFloat16(v).bits;
  }
  return out;
}

struct Weights {
  OwnedTensor conv_w, conv_b, gemm_b, gemm_c, mm_b, small_b;
};

Weights RandomWeights(std::mt19937& rng) {
  return {RandomTensor(Shape{16, 8, 3, 3}, rng),
          RandomTensor(Shape{16}, rng),
          RandomTensor(Shape{1024, 24}, rng, -0.1, 0.1),
          RandomTensor(Shape{24}, rng),
          RandomTensor(Shape{24, 64}, rng),
          RandomTensor(Shape{64, 4}, rng)};
}

// x [N, 8, 10, 10] -> Conv(W 16x8x3x3, B) -> Relu -> Flatten -> Gemm(B 1024x24, C) -> MatMul
// (B 24x64) -> MatMul (B 64x4, too small to narrow). The MatMul with B 24x64 has 1536 elements.
std::shared_ptr<const Graph> ModelGraph(const Weights& w) {
  TestGraph t;
  const int x = t.Input("x", {-1, 8, 10, 10});
  const int conv = t.Op("Conv",
                        {x, t.Const("conv_w", OwnedTensor::CopyOf(w.conv_w.view()).value()),
                         t.Const("conv_b", OwnedTensor::CopyOf(w.conv_b.view()).value())},
                        {}, {{-1, 16, 8, 8}});
  const int relu = t.Op("Relu", {conv}, {}, {{-1, 16, 8, 8}});
  const int flat = t.Op("Flatten", {relu}, {Attribute::Int("axis", 1)}, {{-1, 1024}});
  const int gemm = t.Op("Gemm",
                        {flat, t.Const("gemm_b", OwnedTensor::CopyOf(w.gemm_b.view()).value()),
                         t.Const("gemm_c", OwnedTensor::CopyOf(w.gemm_c.view()).value())},
                        {}, {{-1, 24}});
  const int mm = t.Op("MatMul", {gemm, t.Const("mm_b", OwnedTensor::CopyOf(w.mm_b.view()).value())},
                      {}, {{-1, 64}});
  t.Output(t.Op("MatMul", {mm, t.Const("small_b", OwnedTensor::CopyOf(w.small_b.view()).value())},
                {}, {{-1, 4}}));
  return t.Build();
}

std::vector<OwnedTensor> RunOn(std::shared_ptr<const Graph> g, const std::vector<OwnedTensor>& in,
                               const std::string& provider) {
  SessionOptions so;
  so.kernel_provider = provider;
  Result<std::unique_ptr<Session>> s = Session::Create(std::move(g), so);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  std::vector<Tensor> views;
  views.reserve(in.size());
  for (const OwnedTensor& t : in) views.push_back(t.view());
  Result<std::vector<OwnedTensor>> out = (*s)->Run(views);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<OwnedTensor>{};
}

// |a - e| <= tol(e) elementwise.
template <typename Tol>
void ExpectNear(const OwnedTensor& a, const OwnedTensor& e, Tol tol, const std::string& what) {
  ASSERT_EQ(a.shape(), e.shape()) << what;
  int reported = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const double av = a.data<const float>()[i], ev = e.data<const float>()[i];
    if (!(std::abs(av - ev) <= tol(ev)) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << av << ", expected " << ev;
    }
  }
}

// The dtypes of input 1 of the nodes reading weights, by op.
std::vector<std::pair<std::string, DataType>> WeightDtypes(const Graph& g) {
  std::vector<std::pair<std::string, DataType>> out;
  for (const Node& n : g.nodes()) {
    if (n.inputs.size() < 2 || n.inputs[1] == kNoValue) continue;
    const Value& v = g.value(n.inputs[1]);
    if (v.constant != nullptr) out.emplace_back(n.op_type, v.constant->dtype());
  }
  return out;
}

class HalfWeightsTest : public ::testing::TestWithParam<DataType> {};

// Whether the CPU kernels compute convolutions with `dt` weights in BF16 here (BFLOAT16 weights
// on a CPU with BF16 dot products; docs/quantization.md).
bool BF16Compute(DataType dt) { return dt == DataType::kBFloat16 && CpuKernelsComputeBf16(); }

TEST_P(HalfWeightsTest, NarrowsLargeWeightsAndMatchesRoundedFp32) {
  const DataType dt = GetParam();
  const std::string precision = dt == DataType::kFloat16 ? "fp16" : "bf16";
  std::mt19937 rng(5);
  const Weights w = RandomWeights(rng);
  const std::shared_ptr<const Graph> g = ModelGraph(w);
  OptimizerOptions options;
  options.weight_precision = precision;
  Result<OptimizedGraph> o = OptimizeGraph(g, options);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->weight_precision, precision);
  int half = 0, fp32 = 0;
  for (const auto& [op, wdt] : WeightDtypes(*o->graph)) {
    if (wdt == dt) {
      ++half;
      EXPECT_TRUE(op == "FusedConv" || op == "FusedGemm" || op == "FusedMatMul") << op;
    } else {
      ++fp32;
      EXPECT_EQ(wdt, DataType::kFloat32) << op;
    }
  }
  EXPECT_EQ(half, 3) << FormatPassReport(*o);  // conv W, gemm B, mm B
  EXPECT_EQ(fp32, 1) << FormatPassReport(*o);  // the 64x4 B
  for (const Node& n : o->graph->nodes()) EXPECT_TRUE(n.domain.empty() || n.domain == "ai.kiln");

  // Expected: the FP32 graph with the weights rounded here, on the reference kernels.
  Weights rounded = {RoundedTensor(w.conv_w, dt), OwnedTensor::CopyOf(w.conv_b.view()).value(),
                     RoundedTensor(w.gemm_b, dt), OwnedTensor::CopyOf(w.gemm_c.view()).value(),
                     RoundedTensor(w.mm_b, dt),   OwnedTensor::CopyOf(w.small_b.view()).value()};
  std::mt19937 in_rng(9);
  const std::vector<OwnedTensor> inputs = RandomInputs(*g, in_rng, 3);
  const std::vector<OwnedTensor> expected = RunOn(ModelGraph(rounded), inputs, "ref");
  const std::vector<OwnedTensor> unrounded = RunOn(g, inputs, "ref");
  ASSERT_EQ(expected.size(), 1u);
  for (const std::string provider : {"", "ref"}) {
    // The CPU kernels compute BF16 convolutions and products in BF16 where the CPU has BF16 dot
    // products: their inputs are rounded to BF16 too (2^-8 relative), so the bound is that
    // rounding's.
    const double tol = provider.empty() && BF16Compute(dt) ? 2e-2 : 1e-4;
    auto rel = [tol](double e) { return tol * std::max(1.0, std::abs(e)); };
    const std::vector<OwnedTensor> got = RunOn(o->graph, inputs, provider);
    ASSERT_EQ(got.size(), 1u);
    ExpectNear(got[0], expected[0], rel,
               fmt::format("{} provider '{}' vs rounded", precision, provider));
    // Against the unrounded model: each weight moved by at most u relative (u = 2^-11 / 2^-8),
    // so an output moves by at most about u times the sum of the magnitudes of its terms per
    // layer; three narrowed layers, bounded by 4u times the largest output.
    const double u = dt == DataType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    double max_abs = 0;
    for (int64_t i = 0; i < unrounded[0].num_elements(); ++i) {
      max_abs = std::max(max_abs, double(std::abs(unrounded[0].data<const float>()[i])));
    }
    ExpectNear(
        got[0], unrounded[0], [&](double) { return 4 * u * max_abs; }, precision + " vs unrounded");
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, HalfWeightsTest,
                         ::testing::Values(DataType::kFloat16, DataType::kBFloat16),
                         [](const auto& info) {
                           return info.param == DataType::kFloat16 ? "fp16" : "bf16";
                         });

TEST(HalfWeightsPassTest, Fp32PrecisionAndAutoOnFp32ModelChangeNothing) {
  std::mt19937 rng(6);
  const std::shared_ptr<const Graph> g = ModelGraph(RandomWeights(rng));
  for (const std::string precision : {"", "fp32"}) {
    OptimizerOptions options;
    options.weight_precision = precision;
    Result<OptimizedGraph> o = OptimizeGraph(g, options);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->weight_precision, "fp32");
    for (const auto& [op, wdt] : WeightDtypes(*o->graph)) EXPECT_EQ(wdt, DataType::kFloat32) << op;
  }
}

TEST(HalfWeightsPassTest, AutoOnAModelWithSomeFp32WeightsKeepsFp32) {
  // One weight stored in FLOAT16 (behind a Cast), another large one in FP32: auto does not
  // narrow the FP32 one (nor hold the stored one in half); the model runs as stored.
  std::mt19937 rng(10);
  TestGraph t;
  const int x = t.Input("x", {2, 64});
  const OwnedTensor w1 = RandomTensor(Shape{64, 64}, rng);
  const int cast = t.Op("Cast", {t.Const("w1_fp16", HalfTensor(w1, DataType::kFloat16))},
                        {Attribute::Int("to", 1)}, {{64, 64}});
  const int m1 = t.Op("MatMul", {x, cast}, {}, {{2, 64}});
  t.Output(t.Op("MatMul", {m1, t.Random("w2", {64, 64}, rng)}, {}, {{2, 64}}));
  const std::shared_ptr<const Graph> g = t.Build();
  Result<OptimizedGraph> o = OptimizeGraph(g, {});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->weight_precision, "fp32");
  for (const auto& [op, wdt] : WeightDtypes(*o->graph)) EXPECT_EQ(wdt, DataType::kFloat32) << op;
  ExpectSameOutputs(*g, *o->graph, 1e-5);
}

TEST(HalfWeightsPassTest, RunsOnceAfterTheOtherPassesAndChangesNoFusion) {
  // half_weights is final: the other passes reach their fixpoint on FP32 weights (a 16-bit weight
  // in an early round once stopped type propagation and, with it, BERT's LayerNorm and attention
  // fusions), then it runs once; the graph has the same ops as the FP32 pipeline's.
  std::mt19937 rng(11);
  const std::shared_ptr<const Graph> g = ModelGraph(RandomWeights(rng));
  OptimizerOptions fp32;
  fp32.weight_precision = "fp32";
  Result<OptimizedGraph> base = OptimizeGraph(g, fp32);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  for (const std::string precision : {"fp16", "bf16"}) {
    OptimizerOptions options;
    options.weight_precision = precision;
    Result<OptimizedGraph> o = OptimizeGraph(g, options);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->rounds, base->rounds) << precision;
    ASSERT_GE(o->rounds, 2) << FormatPassReport(*o);  // so that "once" means something
    for (const PassReport& p : o->passes) {
      EXPECT_EQ(p.runs, p.name == "half_weights" ? 1 : o->rounds) << precision << " " << p.name;
    }
    // The same ops, except that a plain Gemm / MatMul with a narrowed weight became its ai.kiln
    // Fused form (with no activation): compared without the "Fused" prefix.
    const auto unfused = [](const Graph& graph) {
      std::vector<std::string> ops;
      for (const Node& n : graph.nodes()) {
        const std::string_view op = n.op_type;
        ops.emplace_back(op.substr(0, 5) == "Fused" ? op.substr(5) : op);
      }
      return ops;
    };
    EXPECT_EQ(unfused(*o->graph), unfused(*base->graph)) << precision;
  }
}

TEST(HalfWeightsPassTest, UnknownPrecisionIsInvalidArgument) {
  std::mt19937 rng(6);
  OptimizerOptions options;
  options.weight_precision = "fp8";
  Result<OptimizedGraph> o = OptimizeGraph(ModelGraph(RandomWeights(rng)), options);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().ToString().find("fp8"), std::string::npos) << o.status().ToString();
}

TEST(HalfWeightsPassTest, WeightAlsoReadAsDataStaysFp32) {
  std::mt19937 rng(7);
  TestGraph t(11);  // ReduceSum with the axes attribute
  const int x = t.Input("x", {2, 64});
  const int w = t.Random("w", {64, 64}, rng);
  const int mm = t.Op("MatMul", {x, w}, {}, {{2, 64}});
  t.Output(
      t.Op("Add",
           {mm, t.Op("ReduceSum", {w},
                     {Attribute::Int("keepdims", 1), Attribute::Ints("axes", {0})}, {{1, 64}})},
           {}, {{2, 64}}));
  OptimizerOptions options;
  options.weight_precision = "fp16";
  options.disabled_passes = {"constant_folding"};  // keep the ReduceSum reading w
  Result<OptimizedGraph> o = OptimizeGraph(t.Build(), options);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  for (const auto& [op, wdt] : WeightDtypes(*o->graph)) EXPECT_EQ(wdt, DataType::kFloat32) << op;
  ExpectSameOutputs(*t.Build(), *o->graph, 1e-5);
}

// Conv reading Cast(to=FLOAT) of a half initializer, as a model stored in half precision is.
// The weight is 2.4 MB in FP32, above the folding size cap.
std::shared_ptr<const Graph> StoredHalfGraph(DataType dt, const OwnedTensor& w_half) {
  TestGraph t;
  const int x = t.Input("x", {1, 256, 4, 4});
  const int cast = t.Op("Cast", {t.Const("w16", OwnedTensor::CopyOf(w_half.view()).value())},
                        {Attribute::Int("to", 1)}, {{256, 256, 3, 3}});
  t.Output(t.Op("Conv", {x, cast}, {Attribute::Ints("pads", {1, 1, 1, 1})}, {{1, 256, 4, 4}}));
  (void)dt;
  return t.Build();
}

TEST(HalfWeightsPassTest, AutoKeepsStoredHalfWeightsBitForBit) {
  std::mt19937 rng(8);
  const OwnedTensor w = RandomTensor(Shape{256, 256, 3, 3}, rng, -0.05, 0.05);
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    const OwnedTensor w_half = HalfTensor(w, dt);
    const std::shared_ptr<const Graph> g = StoredHalfGraph(dt, w_half);
    Result<OptimizedGraph> o = OptimizeGraph(g, {});
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->weight_precision, dt == DataType::kFloat16 ? "fp16" : "bf16");
    EXPECT_EQ(CountOps(*o->graph, "Cast"), 0) << FormatPassReport(*o);
    ASSERT_EQ(CountOps(*o->graph, "FusedConv", "ai.kiln"), 1) << FormatPassReport(*o);
    const Node& conv = o->graph->nodes().back();
    const OwnedTensor* stored = o->graph->value(conv.inputs[1]).constant.get();
    ASSERT_NE(stored, nullptr);
    ASSERT_EQ(stored->dtype(), dt);
    ASSERT_EQ(stored->size_bytes(), w_half.size_bytes());
    EXPECT_EQ(std::memcmp(stored->raw_data(), w_half.raw_data(), w_half.size_bytes()), 0);
    ExpectSameOutputs(*g, *o->graph, BF16Compute(dt) ? 2e-2 : 1e-4);

    // The optimized graph (as `kiln optimize` writes it) is recognized as half too, and a
    // second optimization leaves its weights as they are.
    Result<OptimizedGraph> again = OptimizeGraph(o->graph, {});
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->weight_precision, o->weight_precision);
    EXPECT_EQ(WeightDtypes(*again->graph), WeightDtypes(*o->graph));

    // Explicit fp32 widens them for good.
    OptimizerOptions fp32;
    fp32.weight_precision = "fp32";
    Result<OptimizedGraph> o32 = OptimizeGraph(g, fp32);
    ASSERT_TRUE(o32.ok()) << o32.status().ToString();
    for (const auto& [op, wdt] : WeightDtypes(*o32->graph)) {
      EXPECT_EQ(wdt, DataType::kFloat32) << op;
    }
  }
}

}  // namespace
}  // namespace kiln::opt::testing
