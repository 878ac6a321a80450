// SPDX-License-Identifier: Apache-2.0
// oneDNN Conv / FusedConv against the reference Conv: random shapes with edge sizes, groups and
// depthwise, strides, dilations, pads and auto_pad, constant and runtime weights, every fused
// activation, concurrent Compute.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_test_util.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

struct ConvCase {
  std::vector<int64_t> x{};  // [N, C, spatial...]
  int64_t m = 1;             // output channels
  std::vector<int64_t> k{};  // kernel spatial
  int64_t group = 1;
  std::vector<int64_t> strides{}, dilations{}, pads{};
  std::string auto_pad{};
};

KernelCase MakeConvCase(const ConvCase& cc, std::mt19937& rng, bool const_w, bool bias,
                        std::string_view op = "Conv") {
  KernelCase c(std::string(op), 13);
  if (op != "Conv") c.Domain(std::string(kKilnDomain), 1);
  std::vector<int64_t> wdims = {cc.m, cc.x[1] / cc.group};
  wdims.insert(wdims.end(), cc.k.begin(), cc.k.end());
  c.Input(RandomTensor(Shape(std::span<const int64_t>(cc.x)), rng));
  OwnedTensor w = RandomTensor(Shape(std::span<const int64_t>(wdims)), rng);
  if (const_w) {
    c.ConstInput(std::move(w));
  } else {
    c.Input(std::move(w));
  }
  if (bias) c.ConstInput(RandomTensor(Shape({cc.m}), rng));
  if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
  if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
  if (!cc.dilations.empty()) c.Attr(IntsAttr("dilations", cc.dilations));
  if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
  if (!cc.auto_pad.empty()) c.Attr(StringAttr("auto_pad", cc.auto_pad));
  return c;
}

const std::vector<ConvCase>& Cases() {
  static const std::vector<ConvCase> cases = {
      {{1, 1, 1, 1}, 1, {1, 1}},
      {{1, 3, 7, 7}, 4, {3, 3}},
      {{2, 3, 17, 9}, 5, {3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}},
      {{1, 8, 9, 9}, 8, {3, 3}, 8, {1, 1}, {}, {1, 1, 1, 1}},        // depthwise
      {{1, 16, 7, 7}, 16, {3, 3}, 16, {2, 2}, {}, {1, 0, 1, 2}},     // depthwise, asymmetric pads
      {{1, 6, 11, 13}, 9, {3, 2}, 3, {1, 2}, {2, 1}, {0, 1, 2, 0}},  // groups + dilations
      {{1, 17, 7, 7}, 7, {1, 1}},  // pointwise on a small image: blocked, reorders at the edges
      {{3, 4, 8, 8}, 17, {5, 5}, 1, {2, 2}, {}, {}, "SAME_UPPER"},
      {{1, 4, 8, 7}, 3, {4, 4}, 1, {3, 3}, {}, {}, "SAME_LOWER"},
      {{1, 5, 9, 9}, 6, {3, 3}, 1, {1, 1}, {}, {}, "VALID"},
      {{2, 3, 19}, 4, {3}, 1, {2}, {2}, {1, 1}},                              // 1-D
      {{1, 2, 5, 6, 7}, 3, {3, 3, 3}, 1, {1, 2, 1}, {}, {1, 1, 1, 1, 1, 1}},  // 3-D
      {{1, 32, 14, 14}, 64, {3, 3}, 1, {1, 1}, {}, {1, 1, 1, 1}},
      {{2, 24, 9, 9}, 20, {1, 1}},  // pointwise on a larger image: a GEMM over NCHW in place
  };
  return cases;
}

TEST(CpuConvTest, PickedOverRef) {
  std::mt19937 rng(1);
  EXPECT_EQ(MakeConvCase(Cases()[1], rng, true, true).PickedProvider(), "cpu");
}

TEST(CpuRegistryTest, OnlyProviderRestrictsTheChoice) {
  std::mt19937 rng(1);
  ref::testing::OpTest t("Conv", 13);
  t.Input(RandomTensor(Shape({1, 3, 7, 7}), rng))
      .ConstInput(RandomTensor(Shape({4, 3, 3, 3}), rng));
  const NodeDesc desc = t.Describe();
  const KernelInfo info(desc);
  const KernelRegistry& reg = KernelRegistry::Global();
  EXPECT_EQ((*reg.Find(info, DeviceType::kCpu))->provider, "cpu");
  EXPECT_EQ((*reg.Find(info, DeviceType::kCpu, "ref"))->provider, "ref");
  EXPECT_FALSE(reg.Find(info, DeviceType::kCpu, "cuda").ok());
}

TEST(CpuConvTest, MatchesReference) {
  std::mt19937 rng(42);
  for (const ConvCase& cc : Cases()) {
    for (bool const_w : {true, false}) {
      for (bool bias : {true, false}) {
        KernelCase c = MakeConvCase(cc, rng, const_w, bias);
        const std::string what = fmt::format("x [{}] m {} group {} const_w {} bias {}",
                                             fmt::join(cc.x, ","), cc.m, cc.group, const_w, bias);
        OwnedTensor expected = c.Run("ref");
        ExpectClose(c.Run("cpu"), expected, 1e-4, what);
        ExpectClose(c.Run("cpu"), expected, 1e-4, what + " (cached plan)");
      }
    }
  }
}

TEST(CpuConvTest, ErrorsAreStatuses) {
  std::mt19937 rng(3);
  KernelCase c("Conv", 13);
  c.Input(RandomTensor(Shape({1, 3, 5, 5}), rng)).Input(RandomTensor(Shape({4, 2, 3, 3}), rng));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  KernelCase small("Conv", 13);
  small.Input(RandomTensor(Shape({1, 1, 2, 2}), rng)).Input(RandomTensor(Shape({1, 1, 3, 3}), rng));
  EXPECT_FALSE(small.TryRun("cpu").ok());
}

Activation ParseActivation(const std::string& name, const std::vector<float>& params) {
  NodeDesc node;
  node.op_type = "FusedConv";
  node.domain = std::string(kKilnDomain);
  node.opset = 1;
  if (!name.empty()) node.attributes.push_back(StringAttr("activation", name));
  if (!params.empty()) node.attributes.push_back(FloatsAttr("activation_params", params));
  const KernelInfo info(node);
  Result<Activation> a = ReadActivation(info);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : Activation{};
}

TEST(CpuConvTest, FusedConvWithResidualAndActivations) {
  std::mt19937 rng(7);
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  const std::vector<Act> acts = {
      {"", {}},         {"Relu", {}},        {"Clip", {0, 6}},      {"Sigmoid", {}},
      {"SiLU", {}},     {"HardSigmoid", {}}, {"HardSwish", {}},     {"Gelu", {}},
      {"GeluTanh", {}}, {"Tanh", {}},        {"LeakyRelu", {0.1f}}, {"HardSigmoid", {0.3f, 0.4f}}};
  int seed = 100;
  for (const ConvCase& cc : {Cases()[2], Cases()[3], Cases()[6], Cases()[12], Cases()[13]}) {
    for (const Act& act : acts) {
      for (bool with_z : {false, true}) {
        ++seed;
        std::mt19937 r1(seed), r2(seed);
        KernelCase plain = MakeConvCase(cc, r1, true, true);
        KernelCase fused = MakeConvCase(cc, r2, true, true, "FusedConv");
        OwnedTensor base = plain.Run("ref");
        ASSERT_TRUE(base.valid());
        OwnedTensor z = RandomTensor(base.shape(), rng, -2, 2);
        if (with_z) fused.Input(z);
        if (!act.name.empty()) fused.Attr(StringAttr("activation", act.name));
        if (!act.params.empty()) fused.Attr(FloatsAttr("activation_params", act.params));
        const Activation a = ParseActivation(act.name, act.params);
        OwnedTensor expected = OwnedTensor::CopyOf(base.view()).value();
        float* pe = expected.data<float>();
        for (int64_t i = 0; i < expected.num_elements(); ++i) {
          pe[i] = ApplyActivation(a, with_z ? pe[i] + z.data<const float>()[i] : pe[i]);
        }
        ExpectClose(fused.Run("cpu"), expected, 1e-4,
                    fmt::format("FusedConv act '{}' z {} m {}", act.name, with_z, cc.m));
      }
    }
  }
}

TEST(CpuConvTest, UnknownActivationIsInvalid) {
  std::mt19937 rng(5);
  KernelCase f = MakeConvCase(Cases()[1], rng, true, true, "FusedConv");
  f.Attr(StringAttr("activation", "Swoosh"));
  Result<OwnedTensor> r = f.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Swoosh"), std::string::npos);
}

TEST(CpuConvTest, ConcurrentComputeOnOneKernel) {
  std::mt19937 rng(11);
  for (bool const_w : {true, false}) {
    KernelCase c = MakeConvCase(Cases()[12], rng, const_w, true);
    OwnedTensor expected = c.Run("ref");
    Result<KernelCase::Prepared> p = c.Prepare("cpu");
    ASSERT_TRUE(p.ok());
    ExpectConcurrentRunsMatch(c, *p, expected);
  }
}

}  // namespace
}  // namespace kiln::cpu
