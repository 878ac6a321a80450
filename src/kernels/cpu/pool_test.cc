// SPDX-License-Identifier: Apache-2.0
// oneDNN MaxPool / AveragePool and the own global pools against the reference kernels: edge
// sizes, strides, pads, auto_pad, ceil_mode, dilations, count_include_pad, 1-D to 3-D; the
// Indices output staying on the reference; and ai.kiln BlockedPool (every pool on blocked
// tensors of 8 and 16 lanes, channel counts with a padded last block) against its reference.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "kernels/cpu/cpu_test_util.h"
#include "kernels/cpu/isa.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

struct PoolCase {
  std::vector<int64_t> x{}, k{}, strides{}, pads{}, dilations{};
  int ceil = 0;
  std::string auto_pad{};
};

KernelCase MakePool(const std::string& op, const PoolCase& pc, std::mt19937& rng,
                    int include_pad = 0) {
  KernelCase c(op, 17);
  c.Input(RandomTensor(Shape(std::span<const int64_t>(pc.x)), rng));
  c.Attr(IntsAttr("kernel_shape", pc.k));
  if (!pc.strides.empty()) c.Attr(IntsAttr("strides", pc.strides));
  if (!pc.pads.empty()) c.Attr(IntsAttr("pads", pc.pads));
  if (!pc.dilations.empty()) c.Attr(IntsAttr("dilations", pc.dilations));
  if (pc.ceil) c.Attr(IntAttr("ceil_mode", 1));
  if (!pc.auto_pad.empty()) c.Attr(StringAttr("auto_pad", pc.auto_pad));
  if (op == "AveragePool") c.Attr(IntAttr("count_include_pad", include_pad));
  return c;
}

const std::vector<PoolCase>& Cases() {
  static const std::vector<PoolCase> cases = {
      {{1, 1, 1, 1}, {1, 1}},
      {{1, 3, 7, 7}, {2, 2}, {2, 2}},
      {{2, 17, 9, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
      {{1, 4, 7, 7}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {}, 1},
      {{1, 4, 8, 9}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}, 1},
      {{1, 2, 10, 10}, {2, 2}, {1, 1}, {}, {2, 2}},
      {{1, 5, 9, 9}, {3, 3}, {2, 2}, {}, {}, 0, "SAME_UPPER"},
      {{1, 5, 8, 8}, {3, 3}, {3, 3}, {}, {}, 0, "SAME_LOWER"},
      {{2, 3, 17}, {3}, {2}, {1, 1}},
      {{1, 2, 5, 6, 7}, {2, 2, 2}, {2, 2, 2}, {}, {}, 1},
      {{1, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
  };
  return cases;
}

TEST(CpuPoolTest, MaxPoolMatchesReference) {
  std::mt19937 rng(1);
  for (const PoolCase& pc : Cases()) {
    KernelCase c = MakePool("MaxPool", pc, rng);
    EXPECT_EQ(c.PickedProvider(), "cpu");
    ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-6,
                fmt::format("MaxPool x [{}]", fmt::join(pc.x, ",")));
  }
}

TEST(CpuPoolTest, AveragePoolMatchesReference) {
  std::mt19937 rng(2);
  for (const PoolCase& pc : Cases()) {
    if (!pc.dilations.empty()) continue;  // AveragePool has dilations from opset 19 only
    for (int include_pad : {0, 1}) {
      KernelCase c = MakePool("AveragePool", pc, rng, include_pad);
      ExpectClose(
          c.Run("cpu"), c.Run("ref"), 1e-5,
          fmt::format("AveragePool x [{}] include_pad {}", fmt::join(pc.x, ","), include_pad));
    }
  }
}

TEST(CpuPoolTest, IndicesOutputStaysOnReference) {
  ref::testing::OpTest t("MaxPool", 12);
  std::mt19937 rng(3);
  t.Input(RandomTensor(Shape({1, 1, 4, 4}), rng)).Attr(IntsAttr("kernel_shape", {2, 2}));
  t.Outputs({true, true});
  const NodeDesc desc = t.Describe();
  const KernelInfo info(desc);
  Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ((*def)->provider, "ref");
}

TEST(CpuPoolTest, GlobalPoolsMatchReference) {
  std::mt19937 rng(4);
  for (Isa isa : IsaLevels()) {
    ScopedMaxIsa cap(isa);
    for (const std::vector<int64_t>& x : std::vector<std::vector<int64_t>>{
             {1, 1, 1, 1}, {2, 3, 7, 7}, {1, 17, 17}, {2, 2048, 7, 7}, {1, 5, 3, 4, 5}}) {
      for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
        KernelCase c(op, 13);
        c.Input(RandomTensor(Shape(std::span<const int64_t>(x)), rng));
        ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-5,
                    fmt::format("{} x [{}] {}", op, fmt::join(x, ","), IsaName(isa)));
      }
    }
  }
}

// A blocked [N, ceil(C/b), H, W, b] input whose padding lanes hold finite non-zero values (the
// layout allows them, kiln_ops.h): the kernels must neither read them into a real channel nor
// copy them into the output's padding, which the reference writes as zeros.
OwnedTensor BlockedInput(int64_t n, int64_t c, int64_t h, int64_t w, int64_t b, std::mt19937& rng) {
  return RandomTensor(Shape({n, (c + b - 1) / b, h, w, b}), rng, -2.0, 2.0);
}

TEST(CpuPoolTest, BlockedPoolMatchesReference) {
  std::mt19937 rng(5);
  struct BlockedCase {
    std::string pool;
    std::vector<Attribute> attrs;
    std::vector<int64_t> x;  // N, C, H, W
  };
  const std::vector<BlockedCase> cases = {
      {"MaxPool",
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}),
        IntsAttr("pads", {1, 1, 1, 1})},
       {2, 20, 9, 9}},
      {"MaxPool",
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntAttr("ceil_mode", 1)},
       {1, 64, 14, 14}},
      {"MaxPool", {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})}, {1, 5, 8, 8}},
      {"AveragePool",
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1}),
        IntAttr("count_include_pad", 0)},
       {1, 40, 7, 7}},
      {"AveragePool",
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}),
        IntsAttr("pads", {1, 1, 1, 1}), IntAttr("count_include_pad", 1)},
       {2, 24, 8, 8}},
      {"GlobalAveragePool", {}, {2, 40, 7, 7}},
      {"GlobalAveragePool", {}, {1, 5, 1, 1}},
      {"GlobalMaxPool", {}, {2, 20, 5, 3}},
  };
  for (int64_t b : {8, 16}) {
    for (const BlockedCase& bc : cases) {
      KernelCase c(std::string(kBlockedPoolOp), 17);
      c.Domain(std::string(kKilnDomain), 1);
      c.Input(BlockedInput(bc.x[0], bc.x[1], bc.x[2], bc.x[3], b, rng));
      c.Attr(StringAttr(std::string(kAttrPool), bc.pool));
      c.Attr(IntAttr(std::string(kAttrBlock), b));
      c.Attr(IntAttr(std::string(kAttrChannels), bc.x[1]));
      for (const Attribute& a : bc.attrs) c.Attr(a);
      EXPECT_EQ(c.PickedProvider(), "cpu");
      ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-5,
                  fmt::format("{} x [{}] block {}", bc.pool, fmt::join(bc.x, ","), b));
    }
  }
}

TEST(CpuPoolTest, BlockedGlobalPoolsPropagateNan) {
  // A NaN anywhere in a lane's pixels makes its maximum and its mean NaN, first or later.
  std::mt19937 rng(7);
  for (int64_t b : {8, 16}) {
    for (const char* pool : {"GlobalMaxPool", "GlobalAveragePool"}) {
      OwnedTensor x = BlockedInput(2, 20, 5, 3, b, rng);
      float* p = x.data<float>();
      p[3] = std::numeric_limits<float>::quiet_NaN();          // first pixel, lane 3
      p[7 * b + 5] = std::numeric_limits<float>::quiet_NaN();  // a later pixel, lane 5
      p[x.num_elements() - 1 - b] = std::numeric_limits<float>::quiet_NaN();  // last block
      KernelCase c(std::string(kBlockedPoolOp), 17);
      c.Domain(std::string(kKilnDomain), 1);
      c.Input(std::move(x));
      c.Attr(StringAttr(std::string(kAttrPool), pool));
      c.Attr(IntAttr(std::string(kAttrBlock), b));
      c.Attr(IntAttr(std::string(kAttrChannels), 20));
      ExpectClose(c.Run("cpu"), c.Run("ref"), 1e-5, fmt::format("{} block {}", pool, b));
    }
  }
}

TEST(CpuPoolTest, BlockedPoolRefusesAnotherBlockedShape) {
  // X is not the blocked form of 20 channels with block 8 ([N, 3, H, W, 8]): the reference's
  // error, not a wrong read.
  std::mt19937 rng(6);
  KernelCase c(std::string(kBlockedPoolOp), 17);
  c.Domain(std::string(kKilnDomain), 1);
  c.Input(RandomTensor(Shape({1, 2, 4, 4, 8}), rng));
  c.Attr(StringAttr(std::string(kAttrPool), "GlobalAveragePool"));
  c.Attr(IntAttr(std::string(kAttrBlock), 8));
  c.Attr(IntAttr(std::string(kAttrChannels), 20));
  Result<OwnedTensor> r = c.TryRun("cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a blocked tensor"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace kiln::cpu
