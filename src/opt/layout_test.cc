// SPDX-License-Identifier: Apache-2.0
// layout_selection: which convolutions it blocks and where it converts (node counts and
// attributes), and that the rewritten graph computes the same outputs as the unoptimized one on
// random inputs, with the reference kernels only and with the fast CPU kernels: region edges,
// residual Adds, channel counts that are not a multiple of the block (3, 17, 24), batch 1 and 2,
// a graph output inside a region, and a value read both inside and outside a region.

#include <gtest/gtest.h>

#include "kernels/target.h"
#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

// The pass blocks where the CPU kernels report a channel block (oneDNN's blocked kernels, AVX2
// and up; OptimizeAll passes their target); below that it must leave the graph as it is, which
// LayoutSelectionTest.BelowAvx2ChangesNothing checks.
#define KILN_REQUIRE_BLOCKED_LAYOUT()                                                     \
  if (KernelTargetFor(DeviceType::kCpu).channel_block == 0) {                             \
    GTEST_SKIP() << "no blocked layout below AVX2 (BelowAvx2ChangesNothing covers this)"; \
  }

constexpr double kTol = 1e-4;
// Conv weights are drawn from [-0.25, 0.25] so that activations stay near 1 through a chain of
// convs (FP32 sums of up to 180 products without large cancellations against a 1e-4 tolerance).

// Output `i` of `g` run on `inputs` with only `provider`'s kernels ("" : the best of each node).
std::vector<OwnedTensor> RunWith(const Graph& g, const std::vector<OwnedTensor>& inputs,
                                 const std::string& provider) {
  SessionOptions options;
  options.kernel_provider = provider;
  Result<std::unique_ptr<Session>> s = Session::Create(std::make_shared<const Graph>(g), options);
  KILN_CHECK(s.ok(), s.status().ToString());
  std::vector<Tensor> views;
  views.reserve(inputs.size());
  for (const OwnedTensor& t : inputs) views.push_back(t.view());
  Result<std::vector<OwnedTensor>> out = (*s)->Run(views);
  KILN_CHECK(out.ok(), out.status().ToString());
  return std::move(out).value();
}

// The unoptimized graph on the reference kernels against `optimized` on the reference kernels
// and on the CPU kernels, for batch (symbol N) 1 and 2.
void ExpectSameOnBothProviders(const Graph& original, const Graph& optimized) {
  for (int64_t batch : {1, 2}) {
    std::mt19937 rng(static_cast<unsigned>(17 + batch));
    std::vector<OwnedTensor> inputs = RandomInputs(original, rng, batch);
    std::vector<OwnedTensor> want = RunWith(original, inputs, "ref");
    for (const std::string provider : {"ref", ""}) {
      std::vector<OwnedTensor> got = RunWith(optimized, inputs, provider);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
        const float* pw = want[i].data<const float>();
        const float* pg = got[i].data<const float>();
        int reported = 0;
        for (int64_t k = 0; k < want[i].num_elements(); ++k) {
          const double tol = kTol * std::max(1.0, std::abs(double(pw[k])));
          if (std::abs(double(pw[k]) - double(pg[k])) > tol && reported++ < 5) {
            ADD_FAILURE() << "provider '" << provider << "' batch " << batch << " output " << i
                          << " element " << k << ": " << pg[k] << ", expected " << pw[k];
          }
        }
      }
    }
  }
}

int CountBlockedConvs(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes()) {
    if (node.op_type == kFusedConvOp && node.GetInt(kAttrYBlock, 0) > 0) ++n;
  }
  return n;
}

// x [N,3,10,10] -> Conv 3x3 (17) + Relu -> Conv 1x1 (24) = c2 -> depthwise 3x3 + Clip = c3
//   -> Conv 1x1 (24) + c2 = s -> Add(s, c3) -> Relu = out (a graph output);
// c2 is also read outside the region (GlobalAveragePool, a second graph output).
struct Chain {
  std::shared_ptr<const Graph> graph;
};

Chain MakeChain(std::mt19937& rng) {
  TestGraph t;
  const std::vector<int64_t> d17 = {-1, 17, 10, 10}, d24 = {-1, 24, 10, 10};
  const Attribute pads = Attribute::Ints("pads", {1, 1, 1, 1});
  const int x = t.Input("x", {-1, 3, 10, 10});
  const int c1 = t.Op(
      "Relu",
      {t.Op("Conv", {x, t.Random("w1", {17, 3, 3, 3}, rng, -0.25, 0.25), t.Random("b1", {17}, rng)},
            {pads}, d17)},
      {}, d17);
  const int c2 = t.Op("Conv", {c1, t.Random("w2", {24, 17, 1, 1}, rng, -0.25, 0.25)}, {}, d24);
  const int dw =
      t.Op("Conv", {c2, t.Random("w3", {24, 1, 3, 3}, rng, -0.25, 0.25), t.Random("b3", {24}, rng)},
           {pads, Attribute::Int("group", 24)}, d24);
  const int c3 = t.Op("Clip", {dw, t.Scalar("lo", 0), t.Scalar("hi", 6)}, {}, d24);
  const int c4 = t.Op("Conv", {c3, t.Random("w4", {24, 24, 1, 1}, rng, -0.25, 0.25)}, {}, d24);
  const int s = t.Op("Add", {c4, c2}, {}, d24);
  t.Output(t.Op("Relu", {t.Op("Add", {s, c3}, {}, d24)}, {}, d24));
  t.Output(t.Op("GlobalAveragePool", {c2}, {}, {{-1, 24, 1, 1}}));
  return Chain{t.Build()};
}

TEST(LayoutSelectionTest, ChainRunsBlockedWithConversionsOnlyAtEdges) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  std::mt19937 rng(1);
  Chain c = MakeChain(rng);
  OptimizedGraph o = OptimizeAll(c.graph);
  const Graph& g = *o.graph;
  EXPECT_EQ(CountBlockedConvs(g), 4) << FormatPassReport(o);
  // The stem reads its 3-channel input plain; nothing else enters the region.
  EXPECT_EQ(CountOps(g, "ReorderToBlocked", "ai.kiln"), 0);
  // Exits: the graph output (Relu) and c2 for the GlobalAveragePool.
  EXPECT_EQ(CountOps(g, "ReorderFromBlocked", "ai.kiln"), 2);
  int plain_input_convs = 0;
  for (const Node& n : g.nodes()) {
    if (n.op_type == kFusedConvOp && n.GetInt(kAttrXBlock, -1) == 0) ++plain_input_convs;
    if (n.op_type == "Add" || n.op_type == "Relu") {
      // Elementwise ops inside the region read blocked tensors.
      EXPECT_EQ(g.value(n.inputs[0]).type.dims.size(), 5u) << n.op_type;
    }
  }
  EXPECT_EQ(plain_input_convs, 1);
  // Graph outputs keep their names and plain shapes.
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    EXPECT_EQ(g.value(g.outputs[i]).name, c.graph->value(c.graph->outputs[i]).name);
    EXPECT_EQ(g.value(g.outputs[i]).type.dims.size(), 4u);
  }
  ExpectSameOnBothProviders(*c.graph, g);
}

TEST(LayoutSelectionTest, BelowAvx2ChangesNothing) {
  if (KernelTargetFor(DeviceType::kCpu).channel_block != 0) {
    GTEST_SKIP() << "this CPU has blocked kernels";
  }
  std::mt19937 rng(1);
  Chain c = MakeChain(rng);
  OptimizedGraph o = OptimizeAll(c.graph);
  EXPECT_EQ(CountBlockedConvs(*o.graph), 0) << FormatPassReport(o);
  EXPECT_EQ(CountOps(*o.graph, "ReorderToBlocked", "ai.kiln"), 0);
}

TEST(LayoutSelectionTest, BlocksByTheTargetItIsGiven) {
  // The block is the target's, whatever this machine's kernels are: the rewrite is decided
  // without hardware (the graphs are not run here).
  std::mt19937 rng(1);
  Chain c = MakeChain(rng);
  for (int64_t block : {8, 16}) {
    OptimizerOptions options;
    options.target.channel_block = block;
    Result<OptimizedGraph> o = OptimizeGraph(c.graph, options);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(CountBlockedConvs(*o->graph), 4) << "block " << block;
    for (const Node& n : o->graph->nodes()) {
      if (n.op_type == kFusedConvOp) {
        EXPECT_EQ(n.GetInt(kAttrYBlock, 0), block);
      }
      if (n.op_type == kReorderToBlockedOp) {
        EXPECT_EQ(n.GetInt(kAttrBlock, 0), block);
      }
    }
  }
  // No target (the default) and a block the kernels do not have select no blocked layout.
  for (int64_t block : {0, 4}) {
    OptimizerOptions options;
    options.target.channel_block = block;
    Result<OptimizedGraph> o = OptimizeGraph(c.graph, options);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(CountBlockedConvs(*o->graph), 0) << "block " << block;
    EXPECT_EQ(CountOps(*o->graph, "ReorderToBlocked", "ai.kiln"), 0) << "block " << block;
  }
}

TEST(LayoutSelectionTest, DisabledByName) {
  std::mt19937 rng(1);
  Chain c = MakeChain(rng);
  OptimizerOptions options;
  options.target.channel_block = 8;
  options.disabled_passes = {"layout_selection"};
  Result<OptimizedGraph> o = OptimizeGraph(c.graph, options);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(CountBlockedConvs(*o->graph), 0);
  EXPECT_EQ(CountOps(*o->graph, "ReorderFromBlocked", "ai.kiln"), 0);
}

TEST(LayoutSelectionTest, SecondRunChangesNothing) {
  std::mt19937 rng(1);
  Chain c = MakeChain(rng);
  OptimizedGraph once = OptimizeAll(c.graph);
  OptimizedGraph twice = OptimizeAll(once.graph);
  for (const PassReport& p : twice.passes) {
    if (p.name == "layout_selection") {
      EXPECT_EQ(p.changes, 0);
    }
  }
  EXPECT_EQ(twice.graph->num_nodes(), once.graph->num_nodes());
  ExpectSameOnBothProviders(*c.graph, *twice.graph);
}

TEST(LayoutSelectionTest, WideInputEntersThroughOneSharedReorder) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // x (24 channels) feeds two convs of one region: one ReorderToBlocked serves both.
  std::mt19937 rng(2);
  TestGraph t;
  const std::vector<int64_t> d = {-1, 24, 6, 6};
  const int x = t.Input("x", d);
  const int a = t.Op("Conv", {x, t.Random("wa", {24, 24, 1, 1}, rng, -0.25, 0.25)}, {}, d);
  const int b = t.Op("Conv", {x, t.Random("wb", {24, 24, 3, 3}, rng, -0.25, 0.25)},
                     {Attribute::Ints("pads", {1, 1, 1, 1})}, d);
  t.Output(t.Op("Add", {a, b}, {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "ReorderToBlocked", "ai.kiln"), 1) << FormatPassReport(o);
  EXPECT_EQ(CountOps(*o.graph, "ReorderFromBlocked", "ai.kiln"), 1);
  EXPECT_EQ(CountBlockedConvs(*o.graph), 2);
  ExpectSameOnBothProviders(*g, *o.graph);
}

TEST(LayoutSelectionTest, LeavesLoneConvAndBroadcastAddsAlone) {
  std::mt19937 rng(3);
  TestGraph t;
  const std::vector<int64_t> d = {-1, 8, 5, 5};
  const int x = t.Input("x", d);
  // One conv: no region. Its output then goes through a broadcasting Add (not layout-blind).
  const int a = t.Op("Conv", {x, t.Random("wa", {8, 8, 1, 1}, rng, -0.25, 0.25)}, {}, d);
  const int y = t.Input("y", {1, 8, 1, 1});
  t.Output(t.Op("Add", {a, y}, {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountBlockedConvs(*o.graph), 0);
  EXPECT_EQ(CountOps(*o.graph, "ReorderToBlocked", "ai.kiln"), 0);
  ExpectSameOnBothProviders(*g, *o.graph);
}

TEST(LayoutSelectionTest, MaxPoolStaysInTheRegion) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // conv, conv -> MaxPool -> conv, conv: one region; the MaxPool pools the blocked tensor
  // (ai.kiln BlockedPool) instead of converting out and back in around it.
  std::mt19937 rng(4);
  TestGraph t;
  const int x = t.Input("x", {-1, 16, 8, 8});
  const Attribute pads = Attribute::Ints("pads", {1, 1, 1, 1});
  const int a =
      t.Op("Conv", {x, t.Random("wa", {20, 16, 3, 3}, rng, -0.25, 0.25)}, {pads}, {{-1, 20, 8, 8}});
  const int b =
      t.Op("Conv", {a, t.Random("wb", {20, 20, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 20, 8, 8}});
  const int p = t.Op("MaxPool", {b},
                     {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("strides", {2, 2})},
                     {{-1, 20, 4, 4}});
  const int c =
      t.Op("Conv", {p, t.Random("wc", {17, 20, 3, 3}, rng, -0.25, 0.25)}, {pads}, {{-1, 17, 4, 4}});
  t.Output(t.Op("Conv", {c, t.Random("wd", {5, 17, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 5, 4, 4}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountBlockedConvs(*o.graph), 4);
  EXPECT_EQ(CountOps(*o.graph, "ReorderToBlocked", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "ReorderFromBlocked", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "MaxPool"), 0);
  EXPECT_EQ(CountOps(*o.graph, "BlockedPool", "ai.kiln"), 1);
  ExpectSameOnBothProviders(*g, *o.graph);
}

TEST(LayoutSelectionTest, PoolsOfEveryKindInARegion) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // Each pool between two convs, on 20 channels (a padded last block at 8 and 16): MaxPool with
  // ceil_mode and pads, AveragePool with and without count_include_pad, GlobalAveragePool and
  // GlobalMaxPool (a graph output: the blocked [N, C, 1, 1] leaves the region).
  const Attribute k3 = Attribute::Ints("kernel_shape", {3, 3});
  const Attribute s2 = Attribute::Ints("strides", {2, 2});
  const Attribute pad1 = Attribute::Ints("pads", {1, 1, 1, 1});
  struct PoolCase {
    std::string op;
    std::vector<Attribute> attrs;
    std::vector<int64_t> out;
  };
  const std::vector<PoolCase> cases = {
      {"MaxPool", {k3, s2, Attribute::Int("ceil_mode", 1)}, {-1, 20, 5, 5}},
      {"MaxPool", {k3, s2, pad1}, {-1, 20, 5, 5}},
      {"AveragePool", {k3, s2, pad1}, {-1, 20, 5, 5}},
      {"AveragePool", {k3, s2, pad1, Attribute::Int("count_include_pad", 1)}, {-1, 20, 5, 5}},
      {"AveragePool", {k3, Attribute::Ints("strides", {1, 1})}, {-1, 20, 7, 7}},
      {"GlobalAveragePool", {}, {-1, 20, 1, 1}},
      {"GlobalMaxPool", {}, {-1, 20, 1, 1}},
  };
  for (const PoolCase& pc : cases) {
    std::mt19937 rng(6);
    TestGraph t;
    const int x = t.Input("x", {-1, 16, 9, 9});
    const int a = t.Op("Conv", {x, t.Random("wa", {20, 16, 3, 3}, rng, -0.25, 0.25)}, {pad1},
                       {{-1, 20, 9, 9}});
    const int b = t.Op(
        "Relu",
        {t.Op("Conv", {a, t.Random("wb", {20, 20, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 20, 9, 9}})},
        {}, {{-1, 20, 9, 9}});
    const int p = t.Op(pc.op, {b}, pc.attrs, pc.out);
    std::vector<int64_t> c_dims = pc.out;
    c_dims[1] = 24;
    t.Output(t.Op("Conv", {p, t.Random("wc", {24, 20, 1, 1}, rng, -0.25, 0.25)}, {}, c_dims));
    t.Output(p);
    std::shared_ptr<const Graph> g = t.Build();
    OptimizedGraph o = OptimizeAll(g);
    SCOPED_TRACE(pc.op);
    EXPECT_EQ(CountBlockedConvs(*o.graph), 3) << FormatPassReport(o);
    EXPECT_EQ(CountOps(*o.graph, "BlockedPool", "ai.kiln"), 1);
    EXPECT_EQ(CountOps(*o.graph, pc.op), 0);
    ExpectSameOnBothProviders(*g, *o.graph);
  }
}

TEST(LayoutSelectionTest, SqueezeExcitationConcatAndBatchNormStayBlocked) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // x [N,16,8,8] -> conv 32 = a
  //   SE: GAP(a) -> conv 16 + Relu -> conv 32 -> HardSigmoid = s; m = a * s ([N,32,1,1] scale)
  //   branches: conv 1x1 (16) of m, MaxPool 3x3/1 of m -> conv 1x1 (20); Concat [48+... ]
  //   c = Concat(conv16(m), m, conv20(pool(m))) (16 + 32 + 20 channels)
  //   DenseNet-style: BN(c) -> Relu -> conv 1x1 (24); a per-channel Mul and a scalar Add
  //   -> Sigmoid -> graph output.
  std::mt19937 rng(7);
  TestGraph t;
  const Attribute pad1 = Attribute::Ints("pads", {1, 1, 1, 1});
  const int x = t.Input("x", {-1, 16, 8, 8});
  const int a =
      t.Op("Conv", {x, t.Random("wa", {32, 16, 3, 3}, rng, -0.25, 0.25)}, {pad1}, {{-1, 32, 8, 8}});
  const int gap = t.Op("GlobalAveragePool", {a}, {}, {{-1, 32, 1, 1}});
  const int se1 = t.Op(
      "Relu", {t.Op("Conv", {gap, t.Random("ws1", {16, 32, 1, 1}, rng)}, {}, {{-1, 16, 1, 1}})}, {},
      {{-1, 16, 1, 1}});
  const int se2 = t.Op("Conv", {se1, t.Random("ws2", {32, 16, 1, 1}, rng)}, {}, {{-1, 32, 1, 1}});
  const int s = t.Op("HardSigmoid", {se2}, {}, {{-1, 32, 1, 1}});
  const int m = t.Op("Mul", {a, s}, {}, {{-1, 32, 8, 8}});
  const int b1 =
      t.Op("Conv", {m, t.Random("wb1", {16, 32, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 16, 8, 8}});
  const int pool =
      t.Op("MaxPool", {m}, {Attribute::Ints("kernel_shape", {3, 3}), pad1}, {{-1, 32, 8, 8}});
  const int b3 =
      t.Op("Conv", {pool, t.Random("wb3", {20, 32, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 20, 8, 8}});
  const int c = t.Op("Concat", {b1, m, b3}, {Attribute::Int("axis", 1)}, {{-1, 68, 8, 8}});
  const int bn = t.Op("BatchNormalization",
                      {c, t.Random("gamma", {68}, rng, 0.5, 1.5), t.Random("beta", {68}, rng),
                       t.Random("mean", {68}, rng), t.Random("var", {68}, rng, 0.5, 2)},
                      {}, {{-1, 68, 8, 8}});
  const int r = t.Op("Relu", {bn}, {}, {{-1, 68, 8, 8}});
  const int d =
      t.Op("Conv", {r, t.Random("wd", {24, 68, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 24, 8, 8}});
  const int scaled = t.Op("Mul", {d, t.Random("chan", {24, 1, 1}, rng)}, {}, {{-1, 24, 8, 8}});
  const int shifted = t.Op("Add", {scaled, t.Scalar("one", 1.0f)}, {}, {{-1, 24, 8, 8}});
  t.Output(t.Op("Sigmoid", {shifted}, {}, {{-1, 24, 8, 8}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountBlockedConvs(*o.graph), 6) << FormatPassReport(o);
  // Only x enters and the final Sigmoid's output leaves.
  EXPECT_EQ(CountOps(*o.graph, "ReorderToBlocked", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "ReorderFromBlocked", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "BatchNormalization"), 0);
  EXPECT_EQ(CountOps(*o.graph, "BlockedPool", "ai.kiln"), 2);
  for (const Node& n : o.graph->nodes()) {
    if (n.op_type == "Concat" || n.op_type == "Mul" || n.op_type == "Sigmoid") {
      EXPECT_EQ(o.graph->value(n.inputs[0]).type.dims.size(), 5u) << n.op_type;
    }
  }
  ExpectSameOnBothProviders(*g, *o.graph);
}

TEST(LayoutSelectionTest, ThreeDimensionalConvolutionsAndPoolsRunBlocked) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // A video stem: x [N,3,4,10,10] -> Conv3d 3x3x3 (24, pads 1) + Relu -> MaxPool3d (1,2,2)
  // -> Conv3d 1x3x3 (20) -> a per-channel constant Mul and a BatchNormalization -> Conv3d 1x1x1
  // (16) -> GlobalAveragePool: one region, the stem reading its 3 channels plain.
  std::mt19937 rng(9);
  TestGraph t;
  const int x = t.Input("x", {-1, 3, 4, 10, 10});
  const int a = t.Op("Relu",
                     {t.Op("Conv", {x, t.Random("wa", {24, 3, 3, 3, 3}, rng, -0.25, 0.25)},
                           {Attribute::Ints("pads", {1, 1, 1, 1, 1, 1})}, {{-1, 24, 4, 10, 10}})},
                     {}, {{-1, 24, 4, 10, 10}});
  const int p =
      t.Op("MaxPool", {a},
           {Attribute::Ints("kernel_shape", {1, 2, 2}), Attribute::Ints("strides", {1, 2, 2})},
           {{-1, 24, 4, 5, 5}});
  const int b = t.Op("Conv", {p, t.Random("wb", {20, 24, 1, 3, 3}, rng, -0.25, 0.25)},
                     {Attribute::Ints("pads", {0, 1, 1, 0, 1, 1})}, {{-1, 20, 4, 5, 5}});
  const int m =
      t.Op("Mul", {b, t.Random("scale", {20, 1, 1, 1}, rng, 0.5, 1.5)}, {}, {{-1, 20, 4, 5, 5}});
  const int bn = t.Op("BatchNormalization",
                      {m, t.Random("gamma", {20}, rng, 0.5, 1.5), t.Random("beta", {20}, rng),
                       t.Random("mean", {20}, rng), t.Random("var", {20}, rng, 0.5, 2)},
                      {}, {{-1, 20, 4, 5, 5}});
  const int c = t.Op("Conv", {bn, t.Random("wc", {16, 20, 1, 1, 1}, rng, -0.25, 0.25)}, {},
                     {{-1, 16, 4, 5, 5}});
  t.Output(t.Op("GlobalAveragePool", {c}, {}, {{-1, 16, 1, 1, 1}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountBlockedConvs(*o.graph), 3) << FormatPassReport(o);
  EXPECT_EQ(CountOps(*o.graph, "BlockedPool", "ai.kiln"), 2);
  EXPECT_EQ(CountOps(*o.graph, "ReorderToBlocked", "ai.kiln"), 0);
  EXPECT_EQ(CountOps(*o.graph, "ReorderFromBlocked", "ai.kiln"), 1);
  for (const Node& n : o.graph->nodes()) {
    if (n.op_type == kFusedConvOp && n.GetInt(kAttrYBlock, 0) > 0) {
      EXPECT_EQ(o.graph->value(n.outputs[0]).type.dims.size(), 6u) << n.name;
    }
  }
  ExpectSameOnBothProviders(*g, *o.graph);
}

TEST(LayoutSelectionTest, ConcatWithAnUnalignedMiddleInputStaysPlain) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // 12 channels then 16: the first input would leave padding in the middle of the blocked
  // concatenation, so the Concat runs plain.
  std::mt19937 rng(8);
  TestGraph t;
  const int x = t.Input("x", {-1, 16, 6, 6});
  const int a =
      t.Op("Conv", {x, t.Random("wa", {12, 16, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 12, 6, 6}});
  const int b =
      t.Op("Conv", {x, t.Random("wb", {16, 16, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 16, 6, 6}});
  const int c = t.Op("Concat", {a, b}, {Attribute::Int("axis", 1)}, {{-1, 28, 6, 6}});
  t.Output(
      t.Op("Conv", {c, t.Random("wc", {16, 28, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 16, 6, 6}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  for (const Node& n : o.graph->nodes()) {
    if (n.op_type == "Concat") {
      EXPECT_EQ(o.graph->value(n.outputs[0]).type.dims.size(), 4u);
    }
  }
  ExpectSameOnBothProviders(*g, *o.graph);
}

TEST(LayoutSelectionTest, ThinConvInsideAChainReadsPlain) {
  KILN_REQUIRE_BLOCKED_LAYOUT();
  // 16 -> 8 -> 16 channels: with a block of 16 the middle conv's 8-channel X is read plain (it
  // leaves the region through ReorderFromBlocked); with a block of 8 it stays blocked. Either
  // way no blocked X has fewer channels than its block, and the numerics hold.
  std::mt19937 rng(5);
  TestGraph t;
  const Attribute pads = Attribute::Ints("pads", {1, 1, 1, 1});
  const int x = t.Input("x", {-1, 16, 6, 6});
  const int a =
      t.Op("Conv", {x, t.Random("wa", {8, 16, 3, 3}, rng, -0.25, 0.25)}, {pads}, {{-1, 8, 6, 6}});
  const int b =
      t.Op("Conv", {a, t.Random("wb", {16, 8, 3, 3}, rng, -0.25, 0.25)}, {pads}, {{-1, 16, 6, 6}});
  const int c =
      t.Op("Conv", {b, t.Random("wc", {16, 16, 1, 1}, rng, -0.25, 0.25)}, {}, {{-1, 16, 6, 6}});
  t.Output(t.Op("Conv", {c, t.Random("wd", {16, 16, 3, 3}, rng, -0.25, 0.25)}, {pads},
                {{-1, 16, 6, 6}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_GE(CountBlockedConvs(*o.graph), 3) << FormatPassReport(o);
  for (const Node& n : o.graph->nodes()) {
    const int64_t xb = n.GetInt(kAttrXBlock, 0);
    if (n.op_type != kFusedConvOp || xb == 0) continue;
    const OwnedTensor* w = o.graph->value(n.inputs[1]).constant.get();
    ASSERT_NE(w, nullptr);
    EXPECT_GE(w->shape().dim(1) * n.GetInt("group", 1), xb) << n.name;
  }
  ExpectSameOnBothProviders(*g, *o.graph);
}

}  // namespace
}  // namespace kiln::opt::testing
