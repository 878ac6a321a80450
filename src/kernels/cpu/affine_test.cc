// SPDX-License-Identifier: Apache-2.0
// ai.kiln ChannelAffine's fast kernel against its reference: plain X of rank 2 to 5, blocked X
// (8 and 16 lanes, channel counts with a padded last block whose input lanes hold non-zero
// values), every fused activation, and the layouts the op refuses.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_test_util.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

KernelCase Affine(OwnedTensor x, int64_t channels, int64_t block, const std::string& act,
                  std::vector<float> params, std::mt19937& rng) {
  KernelCase c(std::string(kChannelAffineOp), 17);
  c.Domain(std::string(kKilnDomain), 1);
  c.Input(std::move(x));
  c.ConstInput(RandomTensor(Shape{channels}, rng, 0.5, 1.5));
  c.ConstInput(RandomTensor(Shape{channels}, rng, -0.5, 0.5));
  if (block > 0) c.Attr(IntAttr(std::string(kAttrBlock), block));
  if (!act.empty()) c.Attr(StringAttr("activation", act));
  if (!params.empty()) c.Attr(FloatsAttr("activation_params", params));
  return c;
}

TEST(CpuChannelAffineTest, PlainMatchesReference) {
  std::mt19937 rng(1);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {3, 7}, {2, 5, 9}, {1, 24, 13, 11}, {2, 40, 7, 7}, {1, 8, 2, 3, 4}}) {
    for (const char* act : {"", "Relu", "HardSwish", "Sigmoid"}) {
      KernelCase c = Affine(RandomTensor(Shape(std::span<const int64_t>(dims)), rng, -2, 2),
                            dims[1], 0, act, {}, rng);
      EXPECT_EQ(c.PickedProvider(), "cpu");
      ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-6,
                  fmt::format("plain [{}] {}", fmt::join(dims, ","), act));
    }
  }
}

TEST(CpuChannelAffineTest, BlockedMatchesReferenceAndZeroesPadding) {
  std::mt19937 rng(2);
  for (int64_t b : {8, 16}) {
    for (int64_t channels : {5, 16, 20, 40}) {
      for (const std::vector<int64_t>& spatial :
           std::vector<std::vector<int64_t>>{{7, 7}, {1, 1}, {3, 4, 5}}) {
        std::vector<int64_t> dims = {2, (channels + b - 1) / b};
        dims.insert(dims.end(), spatial.begin(), spatial.end());
        dims.push_back(b);
        // Random everywhere, the padding lanes included: the output's must still be zeros.
        KernelCase c = Affine(RandomTensor(Shape(std::span<const int64_t>(dims)), rng, -2, 2),
                              channels, b, "Clip", {-1.0f, 1.5f}, rng);
        ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-6,
                    fmt::format("blocked {} channels block {} spatial [{}]", channels, b,
                                fmt::join(spatial, ",")));
      }
    }
  }
}

TEST(CpuChannelAffineTest, EveryActivation) {
  std::mt19937 rng(3);
  struct A {
    const char* name;
    std::vector<float> params;
  };
  for (const A& a : std::vector<A>{{"Relu", {}},
                                   {"LeakyRelu", {0.1f}},
                                   {"HardSigmoid", {0.2f, 0.5f}},
                                   {"HardSwish", {}},
                                   {"Tanh", {}},
                                   {"Gelu", {}},
                                   {"SiLU", {}}}) {
    KernelCase c =
        Affine(RandomTensor(Shape{2, 2, 5, 5, 16}, rng, -3, 3), 32, 16, a.name, a.params, rng);
    ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-5, a.name);
  }
}

TEST(CpuChannelAffineTest, WrongLayoutIsTheReferenceError) {
  std::mt19937 rng(4);
  // 20 channels with block 16 need 2 channel slots, not 3.
  KernelCase c = Affine(RandomTensor(Shape{1, 3, 4, 4, 16}, rng), 20, 16, "", {}, rng);
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a blocked tensor of 20 channels"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace kiln::cpu
