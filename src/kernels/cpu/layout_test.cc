// SPDX-License-Identifier: Apache-2.0
// The blocked channel layout's CPU kernels (layout.cc; conv.cc with FusedConv x_block / y_block)
// against the reference kernels, on random shapes with channel counts that are and are not a
// multiple of the block, batch > 1, ranks 3 to 5. The blocked form of a tensor is built here by
// a direct loop from the definition in op/kiln_ops.h, so the padding checks do not rely on
// either kernel under test.

#include "kernels/cpu/layout.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <random>

#include "kernels/cpu/cpu_test_util.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

const std::vector<std::vector<int64_t>>& ReorderShapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {1, 1, 1, 1},  {1, 3, 5, 5}, {2, 17, 4, 3}, {1, 24, 7, 7},   {1, 16, 1, 1},
      {3, 33, 2, 9}, {2, 5, 11},   {1, 8, 13},    {1, 5, 2, 3, 4}, {2, 40, 3, 2, 2},
  };
  return shapes;
}

TEST(CpuLayoutTest, ReorderToBlockedMatchesReference) {
  std::mt19937 rng(11);
  for (int64_t b : {8, 16}) {
    for (const std::vector<int64_t>& dims : ReorderShapes()) {
      const std::string what = fmt::format("to b={} [{}]", b, fmt::join(dims, ","));
      OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(dims)), rng);
      KernelCase c("ReorderToBlocked", 17);
      c.Domain(std::string(kKilnDomain), 1).Attr(IntAttr("block", b)).Input(x);
      EXPECT_EQ(c.PickedProvider(), "cpu");
      OwnedTensor got = c.Run("cpu");
      ExpectClose(got, c.Run("ref"), 0, what);
      ExpectClose(got, Block(x, b), 0, what + " vs definition");
      ExpectZeroPadding(got, dims[1], what);
    }
  }
}

TEST(CpuLayoutTest, ReorderFromBlockedMatchesReference) {
  std::mt19937 rng(12);
  for (int64_t b : {8, 16}) {
    for (const std::vector<int64_t>& dims : ReorderShapes()) {
      const std::string what = fmt::format("from b={} [{}]", b, fmt::join(dims, ","));
      OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(dims)), rng);
      KernelCase c("ReorderFromBlocked", 17);
      c.Domain(std::string(kKilnDomain), 1)
          .Attr(IntAttr("block", b))
          .Attr(IntAttr("channels", dims[1]))
          .Input(Block(x, b));
      OwnedTensor got = c.Run("cpu");
      ExpectClose(got, c.Run("ref"), 0, what);
      ExpectClose(got, x, 0, what + " round trip");
    }
  }
}

TEST(CpuLayoutTest, ReorderFromBlockedRejectsWrongShape) {
  std::mt19937 rng(13);
  KernelCase c("ReorderFromBlocked", 17);
  c.Domain(std::string(kKilnDomain), 1)
      .Attr(IntAttr("block", 16))
      .Attr(IntAttr("channels", 40))  // needs 3 blocks, the input has 2
      .Input(RandomTensor(Shape({1, 2, 3, 3, 16}), rng));
  Result<OwnedTensor> r = c.TryRun("cpu");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

struct BlockedConvCase {
  std::vector<int64_t> x;  // plain [N, C, H, W]
  int64_t m;               // output channels
  std::vector<int64_t> k;
  int64_t group = 1;
  std::vector<int64_t> strides{}, pads{};
};

TEST(CpuLayoutTest, BlockedFusedConvMatchesReference) {
  const std::vector<BlockedConvCase> cases = {
      {{1, 3, 9, 9}, 17, {3, 3}, 1, {2, 2}, {1, 1, 1, 1}},    // stem-like: 3 channels in
      {{2, 17, 7, 5}, 24, {1, 1}},                            // pointwise, batch 2
      {{1, 24, 8, 8}, 24, {3, 3}, 24, {1, 1}, {1, 1, 1, 1}},  // depthwise, C % 16 != 0
      {{1, 32, 9, 9}, 32, {3, 3}, 32, {2, 2}, {1, 0, 1, 2}},  // depthwise, stride 2
      {{2, 16, 6, 6}, 33, {3, 3}, 1, {1, 1}, {0, 0, 0, 0}},
      {{1, 32, 5, 5}, 64, {3, 3}, 2, {1, 1}, {1, 1, 1, 1}},  // 2 groups of 16
      {{1, 1, 4, 4}, 1, {1, 1}},
      {{4, 8, 16, 16}, 16, {3, 3}, 1, {2, 2}},  // fewer channels than the block
      {{1, 24, 9, 9}, 20, {1, 1}, 1, {2, 2}},   // pointwise, stride 2
      {{2, 40, 3, 3}, 12, {1, 1}},              // pointwise, fewer outputs than the block
  };
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  const std::vector<Act> acts = {{"", {}}, {"Clip", {0, 6}}, {"Sigmoid", {}}};
  std::mt19937 rng(14);
  int n = 0;
  for (const BlockedConvCase& cc : cases) {
    for (int64_t b : {8, 16}) {
      for (auto [xb, yb] : {std::pair<int64_t, int64_t>{b, b}, {0, b}, {b, 0}}) {
        for (bool with_z : {false, true}) {
          const Act& act = acts[static_cast<size_t>(n++) % acts.size()];
          OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(cc.x)), rng);
          std::vector<int64_t> wd = {cc.m, cc.x[1] / cc.group, cc.k[0], cc.k[1]};
          KernelCase c("FusedConv", 13);
          c.Domain(std::string(kKilnDomain), 1);
          c.Input(xb > 0 ? Block(x, xb) : x);
          c.ConstInput(RandomTensor(Shape(std::span<const int64_t>(wd)), rng));
          const bool bias = n % 4 != 1;  // every activation with and without a bias
          if (bias) {
            c.ConstInput(RandomTensor(Shape({cc.m}), rng));
          } else if (with_z) {
            c.OmittedInput();
          }
          if (with_z) {
            // Z has Y's shape; the plain output dims follow from stride and pads.
            const int64_t sh = cc.strides.empty() ? 1 : cc.strides[0];
            const int64_t sw = cc.strides.empty() ? 1 : cc.strides[1];
            const int64_t ph = cc.pads.empty() ? 0 : cc.pads[0] + cc.pads[2];
            const int64_t pw = cc.pads.empty() ? 0 : cc.pads[1] + cc.pads[3];
            const int64_t oh = (cc.x[2] + ph - cc.k[0]) / sh + 1;
            const int64_t ow = (cc.x[3] + pw - cc.k[1]) / sw + 1;
            OwnedTensor z = RandomTensor(Shape({cc.x[0], cc.m, oh, ow}), rng);
            c.Input(yb > 0 ? Block(z, yb) : z);
          }
          if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
          if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
          if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
          if (!act.name.empty()) c.Attr(StringAttr("activation", act.name));
          if (!act.params.empty()) c.Attr(FloatsAttr("activation_params", act.params));
          c.Attr(IntAttr("x_block", xb)).Attr(IntAttr("y_block", yb));
          const std::string what =
              fmt::format("x [{}] m {} group {} x_block {} y_block {} bias {} z {} {}",
                          fmt::join(cc.x, ","), cc.m, cc.group, xb, yb, bias, with_z, act.name);
          EXPECT_EQ(c.PickedProvider(), "cpu") << what;
          OwnedTensor got = c.Run("cpu");
          ExpectClose(got, c.Run("ref"), 1e-4, what);
          if (yb > 0) ExpectZeroPadding(got, cc.m, what);
        }
      }
    }
  }
}

TEST(CpuLayoutTest, BlockedFusedConvRejectsMismatchedBlockedInput) {
  std::mt19937 rng(15);
  KernelCase c("FusedConv", 13);
  c.Domain(std::string(kKilnDomain), 1)
      .Input(RandomTensor(Shape({1, 2, 4, 4, 16}), rng))   // 2 blocks: 17..32 channels
      .ConstInput(RandomTensor(Shape({8, 8, 1, 1}), rng))  // but W says 8 channels
      .Attr(IntAttr("x_block", 16))
      .Attr(IntAttr("y_block", 16));
  Result<OwnedTensor> r = c.TryRun("cpu");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CpuLayoutTest, BlockedFusedConvRunsOnOneDnnWithoutReorders) {
  // The blocked kernel must not quietly take its reference fallback, and must execute the
  // convolution alone: oneDNN's verbose log of the second call (the plan and the packed weights
  // exist by then) shows one primitive, a convolution (not oneDNN's reference one) on blocked
  // source and destination.
  std::mt19937 rng(16);
  // The block the layout pass would choose on this machine (16 with AVX-512, 8 with AVX2 only).
  const int64_t b = PreferredChannelBlock();
  if (b == 0)
    GTEST_SKIP() << "below AVX2 oneDNN runs blocked convolutions on its reference code, "
                    "so layout_selection blocks nothing (CpuLayoutTest checks the "
                    "numerics of blocked convs at every level)";
  for (auto [xb, c, dw] : {std::tuple<int64_t, int64_t, bool>{b, 24, false},
                           {b, 24, true},
                           {b, 17, false},
                           {b, 40, true}}) {
    KernelCase k("FusedConv", 13);
    k.Domain(std::string(kKilnDomain), 1)
        .Input(Block(RandomTensor(Shape({1, c, 6, 6}), rng), xb))
        .ConstInput(RandomTensor(Shape({c, dw ? 1 : c, 3, 3}), rng))
        .Attr(IntsAttr("pads", {1, 1, 1, 1}))
        .Attr(IntAttr("x_block", xb))
        .Attr(IntAttr("y_block", xb));
    if (dw) k.Attr(IntAttr("group", c));
    std::string log;
    Result<OwnedTensor> r = SecondRunVerbose(k, &log);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    int execs = 0, convs = 0;
    for (size_t at = log.find("exec,cpu,"); at != std::string::npos;
         at = log.find("exec,cpu,", at + 1)) {
      ++execs;
      if (log.compare(at, 20, "exec,cpu,convolution") == 0) ++convs;
    }
    EXPECT_EQ(execs, 1) << log;
    EXPECT_EQ(convs, 1) << log;
    // "src_f32[:p]:blocked:aBcd16b:f0 wei_..." and "dst_f32[:p]:blocked:aBcd16b:f0,attr..."
    EXPECT_NE(log.find(fmt::format("blocked:aBcd{}b:f0 wei", xb)), std::string::npos) << log;
    EXPECT_NE(log.find(fmt::format("blocked:aBcd{}b:f0,attr", xb)), std::string::npos) << log;
    EXPECT_EQ(log.find(",ref:"), std::string::npos) << log;
  }
}

TEST(CpuLayoutTest, BlockedDilatedConvNeverPlansOneDnnReference) {
  // oneDNN 2.6 has no 8-blocked AVX2 kernel for a dilated 3x3 convolution (its blocked formats
  // fixed, it offers only ref:any, 44 s for one layer of a segmentation model). The kernel must
  // take another format (reorders at the edges, oneDNN's GEMM convolution) and stay exact.
  std::mt19937 rng(17);
  for (int64_t b : {8, 16}) {
    for (int64_t dilation : {2, 4}) {
      KernelCase k("FusedConv", 13);
      k.Domain(std::string(kKilnDomain), 1)
          .Input(Block(RandomTensor(Shape({1, 32, 13, 13}), rng), b))
          .ConstInput(RandomTensor(Shape({24, 32, 3, 3}), rng))
          .ConstInput(RandomTensor(Shape({24}), rng))
          .Attr(IntsAttr("pads", {dilation, dilation, dilation, dilation}))
          .Attr(IntsAttr("dilations", {dilation, dilation}))
          .Attr(IntAttr("x_block", b))
          .Attr(IntAttr("y_block", b));
      const std::string what = fmt::format("block {} dilation {}", b, dilation);
      Result<KernelCase::Prepared> p = k.Prepare("cpu");
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      Result<OwnedTensor> got = k.Execute(*p);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectClose(*got, k.Run("ref"), 1e-4, what);
      ExpectZeroPadding(*got, 24, what);
      const std::string impl = p->kernel->Implementation();
      EXPECT_EQ(impl.find("oneDNN ref"), std::string::npos) << what << ": " << impl;
      // Below AVX2 no blocked region is formed; above it, oneDNN runs the layer itself.
      if (PreferredChannelBlock() > 0) {
        EXPECT_EQ(impl.rfind("oneDNN ", 0), 0u) << what << ": " << impl;
      }
    }
  }
}

TEST(CpuLayoutTest, WideBlockedSpatialConvRunsOnBrgemmAndMatchesReference) {
  // A 3x3 convolution of a blocked X with 160 or more input channels runs on oneDNN's BRGEMM
  // kernel (channels-last, reorders at its edges) where oneDNN has one (AVX-512), with and
  // without a residual; at every level it matches the reference kernel, padding lanes zero.
  std::mt19937 rng(18);
  const int64_t b = PreferredChannelBlock();
  if (b == 0) GTEST_SKIP() << "below AVX2 layout_selection blocks nothing";
  const bool avx512 = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  for (auto [c, m, stride] : {std::tuple<int64_t, int64_t, int64_t>{170, 40, 1},
                              {256, 32, 2},
                              {128, 24, 1}}) {  // narrower: the direct blocked kernel
    for (bool with_z : {false, true}) {
      const int64_t oh = (7 + 2 - 3) / stride + 1;
      KernelCase k("FusedConv", 13);
      k.Domain(std::string(kKilnDomain), 1)
          .Input(Block(RandomTensor(Shape({2, c, 7, 7}), rng), b))
          .ConstInput(RandomTensor(Shape({m, c, 3, 3}), rng))
          .ConstInput(RandomTensor(Shape({m}), rng));
      if (with_z) k.Input(Block(RandomTensor(Shape({2, m, oh, oh}), rng), b));
      k.Attr(IntsAttr("pads", {1, 1, 1, 1}))
          .Attr(IntsAttr("strides", {stride, stride}))
          .Attr(StringAttr("activation", "Relu"))
          .Attr(IntAttr("x_block", b))
          .Attr(IntAttr("y_block", b));
      const std::string what = fmt::format("c {} m {} stride {} z {}", c, m, stride, with_z);
      Result<KernelCase::Prepared> p = k.Prepare("cpu");
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      Result<OwnedTensor> got = k.Execute(*p);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectClose(*got, k.Run("ref"), 1e-4, what);
      ExpectZeroPadding(*got, m, what);
      const std::string impl = p->kernel->Implementation();
      EXPECT_EQ(impl.find("ref"), std::string::npos) << what << ": " << impl;
      const bool brgemm = impl.find("brgconv") != std::string::npos;
      EXPECT_EQ(brgemm, avx512 && c >= 160) << what << ": " << impl;
    }
  }
}

TEST(CpuLayoutTest, ResidualOfAFixedFormatConvIsReadInPlace) {
  // A residual Z in Y's fixed format (blocked, or a plain pointwise conv on an image of more
  // than 8x8 pixels) is added by a binary-add post-op reading Z itself: one primitive, no copy,
  // no reorder, no reference code; and the result matches the reference kernel.
  std::mt19937 rng(17);
  const int64_t b = PreferredChannelBlock();
  for (int64_t yb : {b, int64_t{0}}) {
    const int64_t c = 20, m = 24;
    OwnedTensor x = RandomTensor(Shape({2, c, 9, 9}), rng);
    OwnedTensor z = RandomTensor(Shape({2, m, 9, 9}), rng);
    KernelCase k("FusedConv", 13);
    k.Domain(std::string(kKilnDomain), 1)
        .Input(yb > 0 ? Block(x, yb) : x)
        .ConstInput(RandomTensor(Shape({m, c, 1, 1}), rng))
        .ConstInput(RandomTensor(Shape({m}), rng))
        .Input(yb > 0 ? Block(z, yb) : z)
        .Attr(StringAttr("activation", "Relu"))
        .Attr(IntAttr("x_block", yb))
        .Attr(IntAttr("y_block", yb));
    std::string log;
    Result<OwnedTensor> r = SecondRunVerbose(k, &log);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(log.find("exec,cpu,", log.find("exec,cpu,") + 1), std::string::npos) << log;
    EXPECT_NE(log.find("exec,cpu,convolution"), std::string::npos) << log;
    EXPECT_NE(log.find("binary_add"), std::string::npos) << log;
    EXPECT_EQ(log.find(",ref:"), std::string::npos) << log;
    ExpectClose(*r, k.Run("ref"), 1e-4, fmt::format("y_block {}", yb));
    if (yb > 0) ExpectZeroPadding(*r, m, "residual conv");
  }
}

}  // namespace
}  // namespace kiln::cpu
