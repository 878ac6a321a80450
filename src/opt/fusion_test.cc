// SPDX-License-Identifier: Apache-2.0
// Conv+BatchNormalization folding and the fusion passes: each fires on its pattern (node counts),
// computes the same outputs as the unfused graph on random inputs (1e-4 relative), and leaves
// alone the patterns it must not touch (an intermediate with a second reader, an intermediate
// that is a graph output, shapes it cannot prove).

#include <gtest/gtest.h>

#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

constexpr double kFusedTol = 1e-4;

// Conv(x [N,3,8,8], w [4,3,3,3], b) -> BatchNormalization.
int ConvBn(TestGraph& t, int x, std::mt19937& rng, int* conv_out = nullptr) {
  const int w = t.Random("w", {4, 3, 3, 3}, rng);
  const int b = t.Random("b", {4}, rng);
  const int c = t.Op("Conv", {x, w, b}, {Attribute::Ints("pads", {1, 1, 1, 1})}, {{-1, 4, 8, 8}});
  if (conv_out) *conv_out = c;
  return t.Op("BatchNormalization",
              {c, t.Random("scale", {4}, rng, 0.5, 1.5), t.Random("shift", {4}, rng),
               t.Random("mean", {4}, rng), t.Random("var", {4}, rng, 0.1, 2.0)},
              {FloatAttr("epsilon", 1e-3f)}, {{-1, 4, 8, 8}});
}

TEST(ConvBnFoldingTest, FoldsIntoConvWeights) {
  std::mt19937 rng(1);
  TestGraph t;
  const int x = t.Input("x", {-1, 3, 8, 8});
  t.Output(ConvBn(t, x, rng));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"conv_bn_folding"});
  EXPECT_EQ(CountOps(*o.graph, "BatchNormalization"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Conv"), 1);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(ConvBnFoldingTest, KeepsConvReadTwice) {
  std::mt19937 rng(1);
  TestGraph t;
  const int x = t.Input("x", {-1, 3, 8, 8});
  int c = -1;
  t.Output(ConvBn(t, x, rng, &c));
  t.Output(t.Op("Relu", {c}, {}, {{-1, 4, 8, 8}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"conv_bn_folding"});
  EXPECT_EQ(CountOps(*o.graph, "BatchNormalization"), 1);
}

TEST(ChannelAffineFusionTest, StandaloneBatchNormAndItsActivationBecomeOneOp) {
  // BN -> Relu on a graph input (nothing to fold into), rank 4 and rank 2 (BatchNorm1d), and a
  // BN -> Clip: each becomes one ai.kiln ChannelAffine with the activation; a BN whose output is
  // also a graph output keeps its Relu apart.
  std::mt19937 rng(11);
  auto bn = [&](TestGraph& t, int x, int64_t c, const std::vector<int64_t>& dims) {
    return t.Op(
        "BatchNormalization",
        {x, t.Random("g" + std::to_string(c), {c}, rng, 0.5, 1.5),
         t.Random("b" + std::to_string(c), {c}, rng), t.Random("m" + std::to_string(c), {c}, rng),
         t.Random("v" + std::to_string(c), {c}, rng, 0.1, 2.0)},
        {FloatAttr("epsilon", 1e-3f)}, dims);
  };
  TestGraph t;
  const int x = t.Input("x", {-1, 8, 5, 5});
  t.Output(t.Op("Relu", {bn(t, x, 8, {-1, 8, 5, 5})}, {}, {{-1, 8, 5, 5}}));
  const int v = t.Input("v", {-1, 6});
  t.Output(
      t.Op("Clip", {bn(t, v, 6, {-1, 6}), t.Scalar("lo", 0), t.Scalar("hi", 6)}, {}, {{-1, 6}}));
  const int z = t.Input("z", {-1, 3, 4});
  const int kept = bn(t, z, 3, {-1, 3, 4});
  t.Output(kept);
  t.Output(t.Op("Relu", {kept}, {}, {{-1, 3, 4}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "BatchNormalization"), 0) << FormatPassReport(o);
  EXPECT_EQ(CountOps(*o.graph, std::string(kChannelAffineOp), std::string(kKilnDomain)), 3);
  EXPECT_EQ(CountOps(*o.graph, "Clip"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Relu"), 1);  // the one after the graph output
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(BiasActivationFusionTest, ConvBiasResidualRelu) {
  std::mt19937 rng(2);
  TestGraph t;
  const int x = t.Input("x", {-1, 4, 6, 6});
  const int w = t.Random("w", {4, 4, 3, 3}, rng);
  const int c = t.Op("Conv", {x, w}, {Attribute::Ints("pads", {1, 1, 1, 1})}, {{-1, 4, 6, 6}});
  const int biased = t.Op("Add", {c, t.Random("bias", {1, 4, 1, 1}, rng)}, {}, {{-1, 4, 6, 6}});
  const int res = t.Op("Add", {x, biased}, {}, {{-1, 4, 6, 6}});
  t.Output(t.Op("Relu", {res}, {}, {{-1, 4, 6, 6}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"bias_activation_fusion"});
  ASSERT_EQ(o.graph->num_nodes(), 1);
  const Node& f = o.graph->node(0);
  EXPECT_EQ(f.op_type, "FusedConv");
  EXPECT_EQ(f.domain, "ai.kiln");
  ASSERT_EQ(f.inputs.size(), 4u);  // X, W, B, Z
  EXPECT_EQ(f.inputs[3], o.graph->inputs[0]);
  EXPECT_EQ(f.GetString("activation", "?"), "Relu");
  EXPECT_EQ(o.graph->OpsetFor("ai.kiln"), 1);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

// MatMul(x [N,5,6], w [6,8]) + bias [8] -> activation built by `act`.
struct ActCase {
  std::string name;
  std::string want;  // the fused activation attribute
  int (*build)(TestGraph&, int);
};

TEST(BiasActivationFusionTest, MatMulBiasEveryActivation) {
  const std::optional<std::vector<int64_t>> d = std::vector<int64_t>{-1, 5, 8};
  static const std::optional<std::vector<int64_t>> kDims = d;
  const std::vector<ActCase> cases = {
      {"Relu", "Relu", [](TestGraph& t, int v) { return t.Op("Relu", {v}, {}, kDims); }},
      {"Sigmoid", "Sigmoid", [](TestGraph& t, int v) { return t.Op("Sigmoid", {v}, {}, kDims); }},
      {"Tanh", "Tanh", [](TestGraph& t, int v) { return t.Op("Tanh", {v}, {}, kDims); }},
      {"HardSwish", "HardSwish",
       [](TestGraph& t, int v) { return t.Op("HardSwish", {v}, {}, kDims); }},
      {"HardSigmoid", "HardSigmoid",
       [](TestGraph& t, int v) {
         return t.Op("HardSigmoid", {v}, {FloatAttr("alpha", 0.3f)}, kDims);
       }},
      {"LeakyRelu", "LeakyRelu",
       [](TestGraph& t, int v) {
         return t.Op("LeakyRelu", {v}, {FloatAttr("alpha", 0.2f)}, kDims);
       }},
      {"Relu6", "Clip",
       [](TestGraph& t, int v) {
         return t.Op("Clip", {v, t.Scalar("lo", 0), t.Scalar("hi", 6)}, {}, kDims);
       }},
      {"SiLU", "SiLU",
       [](TestGraph& t, int v) {
         return t.Op("Mul", {v, t.Op("Sigmoid", {v}, {}, kDims)}, {}, kDims);
       }},
      {"Gelu", "Gelu",
       [](TestGraph& t, int v) {
         return t.Op("Gelu", {v}, {}, kDims, DataType::kFloat32, "ai.kiln");
       }},
      {"HardSwish at opset 13", "HardSwish",
       [](TestGraph& t, int v) {
         const int hs = t.Op("HardSigmoid", {v},
                             {FloatAttr("alpha", 1.0f / 6.0f), FloatAttr("beta", 0.5f)}, kDims);
         return t.Op("Mul", {hs, v}, {}, kDims);
       }},
  };
  for (const ActCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(3);
    TestGraph t;
    t.graph().opset_imports["ai.kiln"] = 1;
    const int x = t.Input("x", {-1, 5, 6});
    const int m = t.Op("MatMul", {x, t.Random("w", {6, 8}, rng, -2, 2)}, {}, kDims);
    const int b = t.Op("Add", {t.Random("bias", {8}, rng), m}, {}, kDims);
    t.Output(c.build(t, b));
    std::shared_ptr<const Graph> g = t.Build();
    OptimizedGraph o = OptimizeOnly(g, {"bias_activation_fusion"});
    ASSERT_EQ(o.graph->num_nodes(), 1);
    EXPECT_EQ(o.graph->node(0).op_type, "FusedMatMul");
    EXPECT_EQ(o.graph->node(0).inputs.size(), 3u);
    EXPECT_EQ(o.graph->node(0).GetString("activation", "?"), c.want);
    ExpectSameOutputs(*g, *o.graph, kFusedTol);
  }
}

TEST(BiasActivationFusionTest, MulByAnotherHardSigmoidIsNoHardSwish) {
  // x * HardSigmoid(x) with PyTorch's default alpha 0.2 is not HardSwish: the bias fuses, the
  // HardSigmoid and the Mul stay.
  std::mt19937 rng(6);
  TestGraph t;
  const std::vector<int64_t> d = {-1, 5, 8};
  const int x = t.Input("x", {-1, 5, 6});
  const int m = t.Op("MatMul", {x, t.Random("w", {6, 8}, rng, -2, 2)}, {}, d);
  const int b = t.Op("Add", {t.Random("bias", {8}, rng), m}, {}, d);
  const int hs = t.Op("HardSigmoid", {b}, {FloatAttr("alpha", 0.2f)}, d);
  t.Output(t.Op("Mul", {b, hs}, {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"bias_activation_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "HardSigmoid"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Mul"), 1);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(BiasActivationFusionTest, GemmBiasThenTanh) {
  std::mt19937 rng(4);
  TestGraph t;
  const int x = t.Input("x", {3, 5});
  const int gm = t.Op("Gemm", {x, t.Random("w", {4, 5}, rng)},
                      {Attribute::Int("transB", 1), FloatAttr("alpha", 0.5f)}, {{3, 4}});
  const int b = t.Op("Add", {gm, t.Random("c", {1, 4}, rng)}, {}, {{3, 4}});
  t.Output(t.Op("Tanh", {b}, {}, {{3, 4}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"bias_activation_fusion"});
  ASSERT_EQ(o.graph->num_nodes(), 1);
  EXPECT_EQ(o.graph->node(0).op_type, "FusedGemm");
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(BiasActivationFusionTest, LeavesIntermediatesWithOtherReaders) {
  std::mt19937 rng(5);
  TestGraph t;
  const int x = t.Input("x", {2, 6});
  const int m = t.Op("MatMul", {x, t.Random("w", {6, 6}, rng)}, {}, {{2, 6}});
  t.Output(t.Op("Relu", {m}, {}, {{2, 6}}));
  t.Output(t.Op("Neg", {m}, {}, {{2, 6}}));  // second reader of the MatMul output
  const int m2 = t.Op("MatMul", {x, t.Random("w2", {6, 6}, rng)}, {}, {{2, 6}});
  t.Output(m2);  // a graph output in the middle of MatMul -> Relu
  t.Output(t.Op("Relu", {m2}, {}, {{2, 6}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"bias_activation_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "FusedMatMul", "ai.kiln"), 0);
  EXPECT_EQ(CountOps(*o.graph, "MatMul"), 2);
}

TEST(BiasActivationFusionTest, OnlyFp32IsFused) {
  TestGraph t;
  const int x = t.Input("x", {2, 3}, DataType::kFloat64);
  Result<OwnedTensor> w = OwnedTensor::Allocate(DataType::kFloat64, Shape{3, 3});
  ASSERT_TRUE(w.ok());
  const int m =
      t.Op("MatMul", {x, t.Const("w", std::move(w).value())}, {}, {{2, 3}}, DataType::kFloat64);
  t.Output(t.Op("Relu", {m}, {}, {{2, 3}}, DataType::kFloat64));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"bias_activation_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "MatMul"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Relu"), 1);
}

TEST(BiasActivationFusionTest, ResidualNeedsProvablySameShape) {
  // The residual broadcasts ([6] against [2, 6]): not a Z; nothing else to fuse.
  std::mt19937 rng(6);
  TestGraph t;
  const int x = t.Input("x", {2, 6});
  const int r = t.Input("r", {6});
  const int m = t.Op("MatMul", {x, t.Random("w", {6, 6}, rng)}, {}, {{2, 6}});
  t.Output(t.Op("Add", {m, r}, {}, {{2, 6}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"bias_activation_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "MatMul"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Add"), 1);
}

// x * 0.5 * (1 + erf(x / sqrt 2)) in the two tail orders PyTorch and TF export.
int GeluErf(TestGraph& t, int x, bool half_first, const std::vector<int64_t>& dims) {
  const int u = t.Op("Div", {x, t.Scalar("sqrt2", 1.4142135f)}, {}, dims);
  const int a = t.Op("Add", {t.Op("Erf", {u}, {}, dims), t.Scalar("one", 1)}, {}, dims);
  if (half_first) {
    return t.Op("Mul", {t.Op("Mul", {x, t.Scalar("half", 0.5f)}, {}, dims), a}, {}, dims);
  }
  return t.Op("Mul", {t.Op("Mul", {x, a}, {}, dims), t.Scalar("half", 0.5f)}, {}, dims);
}

TEST(GeluFusionTest, ErfFormBothOrders) {
  for (bool half_first : {false, true}) {
    TestGraph t;
    const int x = t.Input("x", {-1, 7});
    t.Output(GeluErf(t, x, half_first, {-1, 7}));
    std::shared_ptr<const Graph> g = t.Build();
    OptimizedGraph o = OptimizeOnly(g, {"gelu_fusion"});
    ASSERT_EQ(o.graph->num_nodes(), 1) << half_first;
    EXPECT_EQ(o.graph->node(0).op_type, "Gelu");
    EXPECT_EQ(o.graph->node(0).GetString("approximate", "none"), "none");
    ExpectSameOutputs(*g, *o.graph, kFusedTol);
  }
}

TEST(GeluFusionTest, TanhForm) {
  TestGraph t;
  const std::vector<int64_t> d = {4, 5};
  const int x = t.Input("x", d);
  const int cube = t.Op("Pow", {x, t.Scalar("three", 3)}, {}, d);
  const int inner = t.Op("Add", {x, t.Op("Mul", {cube, t.Scalar("c", 0.044715f)}, {}, d)}, {}, d);
  const int th = t.Op("Tanh", {t.Op("Mul", {inner, t.Scalar("k", 0.7978845608f)}, {}, d)}, {}, d);
  const int a = t.Op("Add", {th, t.Scalar("one", 1)}, {}, d);
  t.Output(t.Op("Mul", {t.Op("Mul", {x, t.Scalar("half", 0.5f)}, {}, d), a}, {}, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"gelu_fusion"});
  ASSERT_EQ(o.graph->num_nodes(), 1);
  EXPECT_EQ(o.graph->node(0).GetString("approximate", "none"), "tanh");
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(GeluFusionTest, LeavesOtherConstantsAndReadIntermediates) {
  TestGraph t;
  const int x = t.Input("x", {3});
  const int u = t.Op("Div", {x, t.Scalar("two", 2.0f)}, {}, {{3}});  // not sqrt 2
  const int a = t.Op("Add", {t.Op("Erf", {u}, {}, {{3}}), t.Scalar("one", 1)}, {}, {{3}});
  t.Output(t.Op("Mul", {t.Op("Mul", {x, a}, {}, {{3}}), t.Scalar("half", 0.5f)}, {}, {{3}}));
  TestGraph t2;
  const int x2 = t2.Input("x", {3});
  const int g2 = GeluErf(t2, x2, false, {3});
  t2.Output(g2);
  t2.Output(t2.graph().node(1).outputs[0]);  // the Erf output is also a graph output
  EXPECT_EQ(CountOps(*OptimizeOnly(t.Build(), {"gelu_fusion"}).graph, "Gelu", "ai.kiln"), 0);
  EXPECT_EQ(CountOps(*OptimizeOnly(t2.Build(), {"gelu_fusion"}).graph, "Gelu", "ai.kiln"), 0);
}

// The LayerNorm decomposition PyTorch exports for nn.LayerNorm(hidden): gamma and beta [hidden].
// `d` is x's shape; the intermediates declare it (x - mean, the Div, Mul and Add outputs) unless
// `declare_shapes` is false, as in PyTorch exports whose x has no inferred shape.
int LayerNormDecomposed(TestGraph& t, int x, std::mt19937& rng, const std::vector<int64_t>& d,
                        int* diff = nullptr, bool declare_shapes = true,
                        std::vector<int64_t> param_dims = {}) {
  const int64_t h = d.back();
  if (param_dims.empty()) param_dims = {h};
  const std::optional<std::vector<int64_t>> dd =
      declare_shapes ? std::optional<std::vector<int64_t>>(d) : std::nullopt;
  const std::vector<Attribute> axes = {Attribute::Ints("axes", {-1})};
  const int mean = t.Op("ReduceMean", {x}, axes, std::nullopt);
  const int dx = t.Op("Sub", {x, mean}, {}, dd);
  if (diff) *diff = dx;
  const int var =
      t.Op("ReduceMean", {t.Op("Pow", {dx, t.Scalar("two", 2)}, {}, dd)}, axes, std::nullopt);
  const int sd = t.Op("Sqrt", {t.Op("Add", {var, t.Scalar("eps", 1e-5f)}, {}, std::nullopt)});
  const int n = t.Op("Div", {dx, sd}, {}, dd);
  const int m = t.Op("Mul", {n, t.Random("gamma", param_dims, rng)}, {}, dd);
  return t.Op("Add", {m, t.Random("beta", param_dims, rng)}, {}, dd);
}

// ViT's token sequence as PyTorch (opset 13, dynamic batch) exports it: the class token expanded
// to the batch by a computed shape, concatenated with the patches [N, 5, 16], plus the position
// embedding. Nothing after the Expand has a declared shape (ONNX's shape inference cannot derive
// one; type_propagation can, from the computed shape), so layer_norm_fusion alone sees an x of
// unknown rank, as in vit_b_16, swin_t and maxvit_t.
int VitTokens(TestGraph& t, int patches, std::mt19937& rng) {
  const std::vector<int64_t> one = {1};
  const int shape = t.Op("Shape", {patches}, {}, std::vector<int64_t>{3}, DataType::kInt64);
  const int n = t.Op("Gather", {shape, t.Const("i0", Int64Tensor(Shape(one), {0}))},
                     {Attribute::Int("axis", 0)}, one, DataType::kInt64);
  const int target = t.Op("Concat",
                          {n, t.Const("c1", Int64Tensor(Shape(one), {1})),
                           t.Const("c16", Int64Tensor(Shape(one), {16}))},
                          {Attribute::Int("axis", 0)}, std::vector<int64_t>{3}, DataType::kInt64);
  const int cls = t.Op("Expand", {t.Random("cls", {1, 1, 16}, rng), target});
  const int tokens = t.Op("Concat", {cls, patches}, {Attribute::Int("axis", 1)});
  return t.Op("Add", {tokens, t.Random("pos", {1, 6, 16}, rng)});
}

TEST(LayerNormFusionTest, FusesTheDecomposition) {
  std::mt19937 rng(7);
  TestGraph t;
  const std::vector<int64_t> d = {-1, 6, 16};
  const int x = t.Input("x", d);
  t.Output(LayerNormDecomposed(t, x, rng, d));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"layer_norm_fusion"});
  ASSERT_EQ(o.graph->num_nodes(), 1);
  EXPECT_EQ(o.graph->node(0).op_type, "LayerNormalization");
  EXPECT_EQ(o.graph->node(0).domain, "ai.kiln");
  EXPECT_FLOAT_EQ(o.graph->node(0).GetFloat("epsilon", 0), 1e-5f);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(LayerNormFusionTest, AdoptsOnnxLayerNormalization) {
  std::mt19937 rng(8);
  TestGraph t(17);
  const int x = t.Input("x", {-1, 4, 10});
  std::vector<int> ln =
      t.OpN("LayerNormalization", {x, t.Random("g", {10}, rng), t.Random("b", {10}, rng)}, 3,
            {FloatAttr("epsilon", 1e-3f)}, {{-1, 4, 10}});
  t.Output(ln[0]);
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"layer_norm_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "LayerNormalization", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "LayerNormalization"), 0);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
  // With the Mean output read, it stays as it is.
  TestGraph t2(17);
  const int x2 = t2.Input("x", {2, 10});
  std::vector<int> ln2 =
      t2.OpN("LayerNormalization", {x2, t2.Random("g", {10}, rng)}, 2, {}, {{2, 10}});
  t2.Output(ln2[0]);
  t2.Output(ln2[1]);
  EXPECT_EQ(CountOps(*OptimizeOnly(t2.Build(), {"layer_norm_fusion"}).graph, "LayerNormalization"),
            1);
}

TEST(LayerNormFusionTest, FusesWhenXHasNoDeclaredShape) {
  std::mt19937 rng(9);
  TestGraph t(13);
  const int patches = t.Input("patches", {-1, 5, 16});
  const int x = VitTokens(t, patches, rng);
  ASSERT_FALSE(t.graph().value(x).type.has_shape);
  t.Output(LayerNormDecomposed(t, x, rng, {-1, 6, 16}, nullptr, /*declare_shapes=*/false));
  std::shared_ptr<const Graph> g = t.Build();
  for (bool all : {false, true}) {
    SCOPED_TRACE(all ? "every pass" : "type_propagation, layer_norm_fusion");
    OptimizedGraph o =
        all ? OptimizeAll(g) : OptimizeOnly(g, {"type_propagation", "layer_norm_fusion"});
    EXPECT_EQ(CountOps(*o.graph, "LayerNormalization", "ai.kiln"), 1);
    for (const char* op : {"ReduceMean", "Pow", "Sqrt", "Div", "Sub"}) {
      EXPECT_EQ(CountOps(*o.graph, op), 0) << op;
    }
    for (const Node& node : o.graph->nodes()) {
      if (node.op_type != "LayerNormalization") continue;
      EXPECT_EQ(node.GetInt("axis", 0), -1);
      EXPECT_FLOAT_EQ(node.GetFloat("epsilon", 0), 1e-5f);
      ASSERT_EQ(node.inputs.size(), 3u);
      const Value& scale = o.graph->value(node.inputs[1]);
      ASSERT_NE(scale.constant, nullptr);
      EXPECT_EQ(scale.constant->shape(), Shape({16}));
    }
    // Batch 2 and 3: the fused graph computes what the decomposition computes.
    ExpectSameOutputs(*g, *o.graph, kFusedTol, 7, 2);
    ExpectSameOutputs(*g, *o.graph, kFusedTol, 8, 3);
  }
}

TEST(LayerNormFusionTest, NormalizedDimsFromTwoDimGammaAndRank) {
  // LayerNorm over the last two axes of x [N, 3, 4, 5] (known rank, unknown dims): gamma [4, 1]
  // pins the first normalized dim, beta [1, 5] the second.
  std::mt19937 rng(10);
  TestGraph t;
  const int x0 = t.Input("x", {-1, 3, 4, 5});
  const int x = t.Op("Relu", {x0}, {}, std::vector<int64_t>{-1, -1, -1, -1});
  t.graph().mutable_value(x).type.dims = {Dim{}, Dim{}, Dim{}, Dim{}};
  const std::vector<Attribute> axes = {Attribute::Ints("axes", {2, 3})};
  const int mean = t.Op("ReduceMean", {x}, axes);
  const int dx = t.Op("Sub", {x, mean});
  const int var = t.Op("ReduceMean", {t.Op("Mul", {dx, dx})}, axes);
  const int sd = t.Op("Sqrt", {t.Op("Add", {t.Scalar("eps", 1e-3f), var})});
  const int n = t.Op("Div", {dx, sd});
  const int m = t.Op("Mul", {t.Random("gamma", {4, 1}, rng), n});
  t.Output(t.Op("Add", {m, t.Random("beta", {1, 5}, rng)}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"layer_norm_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "LayerNormalization", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Mul"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Add"), 0);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(LayerNormFusionTest, LeavesUnprovableNormalizedDims) {
  // No known last dim and only single-element gamma / beta: the normalized dim is not known.
  std::mt19937 rng(11);
  TestGraph t(13);
  const int x = t.Input("x", {-1, -1, -1});
  t.Output(LayerNormDecomposed(t, x, rng, {-1, 6, 16}, nullptr, false, {1}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"type_propagation", "layer_norm_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "LayerNormalization", "ai.kiln"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Pow"), 1);
  ExpectSameOutputs(*g, *o.graph, 0);
  // A gamma of a higher rank than x's does not tell the normalized dim (it grows the output's
  // rank): left.
  TestGraph t2(13);
  const int x2 = t2.Input("x", {-1, -1, -1});
  t2.Output(LayerNormDecomposed(t2, x2, rng, {-1, 6, 16}, nullptr, false, {1, 1, 1, 16}));
  OptimizedGraph o2 = OptimizeOnly(t2.Build(), {"type_propagation", "layer_norm_fusion"});
  EXPECT_EQ(CountOps(*o2.graph, "LayerNormalization", "ai.kiln"), 0);
  // Where type_propagation proves x's rank (3) and last dim (16), the normalization fuses and
  // the Mul by that gamma stays after it, growing the rank as before.
  TestGraph t3(13);
  const int x3 = VitTokens(t3, t3.Input("patches", {-1, 5, 16}), rng);
  t3.Output(LayerNormDecomposed(t3, x3, rng, {-1, 6, 16}, nullptr, false, {1, 1, 1, 16}));
  std::shared_ptr<const Graph> g3 = t3.Build();
  OptimizedGraph o3 = OptimizeOnly(g3, {"type_propagation", "layer_norm_fusion"});
  EXPECT_EQ(CountOps(*o3.graph, "LayerNormalization", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o3.graph, "Mul"), 1);
  ExpectSameOutputs(*g3, *o3.graph, kFusedTol);
}

TEST(LayerNormFusionTest, LeavesDecompositionWithExtraReaders) {
  std::mt19937 rng(7);
  TestGraph t;
  const std::vector<int64_t> d = {2, 16};
  const int x = t.Input("x", d);
  int diff = -1;
  t.Output(LayerNormDecomposed(t, x, rng, d, &diff));
  t.Output(t.Op("Neg", {diff}, {}, d));  // x - mean read elsewhere
  OptimizedGraph o = OptimizeOnly(t.Build(), {"layer_norm_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "LayerNormalization", "ai.kiln"), 0);
}

// Q [N,2,5,8], K [N,2,7,8], V [N,2,7,4], mask [N,1,1,7]:
// Softmax(Q K^T / sqrt 8 + mask) V.
int AttentionBlock(TestGraph& t, int q, int k, int v, int mask, int* probs = nullptr) {
  const int kt = t.Op("Transpose", {k}, {Attribute::Ints("perm", {0, 1, 3, 2})}, {{-1, 2, 8, 7}});
  const int s = t.Op("MatMul", {q, kt}, {}, {{-1, 2, 5, 7}});
  const int scaled = t.Op("Div", {s, t.Scalar("sqrt_d", std::sqrt(8.0f))}, {}, {{-1, 2, 5, 7}});
  const int masked = t.Op("Add", {scaled, mask}, {}, {{-1, 2, 5, 7}});
  const int p = t.Op("Softmax", {masked}, {Attribute::Int("axis", -1)}, {{-1, 2, 5, 7}});
  if (probs) *probs = p;
  return t.Op("MatMul", {p, v}, {}, {{-1, 2, 5, 4}});
}

TEST(AttentionFusionTest, FusesScaledMaskedAttention) {
  TestGraph t;
  const int q = t.Input("q", {-1, 2, 5, 8});
  const int k = t.Input("k", {-1, 2, 7, 8});
  const int v = t.Input("v", {-1, 2, 7, 4});
  const int mask = t.Input("mask", {-1, 1, 1, 7});
  t.Output(AttentionBlock(t, q, k, v, mask));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"attention_fusion"});
  ASSERT_EQ(o.graph->num_nodes(), 1);
  const Node& a = o.graph->node(0);
  EXPECT_EQ(a.op_type, "Attention");
  EXPECT_EQ(a.inputs[1], o.graph->inputs[1]);  // K itself: the Transpose was absorbed
  EXPECT_NEAR(a.GetFloat("scale", 0), 1 / std::sqrt(8.0), 1e-7);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(AttentionFusionTest, UnmaskedWithoutTransposeInsertsOne) {
  TestGraph t;
  const int q = t.Input("q", {3, 4});
  const int kt = t.Input("kt", {4, 6});  // already transposed by the model
  const int v = t.Input("v", {6, 5});
  const int s = t.Op("MatMul", {q, kt}, {}, {{3, 6}});
  const int p = t.Op("Softmax", {t.Op("Mul", {s, t.Scalar("c", 0.25f)}, {}, {{3, 6}})},
                     {Attribute::Int("axis", 1)}, {{3, 6}});
  t.Output(t.Op("MatMul", {p, v}, {}, {{3, 5}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"attention_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "Attention", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Transpose"), 1);
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

TEST(AttentionFusionTest, LeavesProbabilitiesThatAreAlsoOutputs) {
  TestGraph t;
  const int q = t.Input("q", {-1, 2, 5, 8});
  const int k = t.Input("k", {-1, 2, 7, 8});
  const int v = t.Input("v", {-1, 2, 7, 4});
  const int mask = t.Input("mask", {-1, 1, 1, 7});
  int probs = -1;
  t.Output(AttentionBlock(t, q, k, v, mask, &probs));
  t.Output(probs);
  OptimizedGraph o = OptimizeOnly(t.Build(), {"attention_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "Attention", "ai.kiln"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Softmax"), 1);
}

TEST(AttentionFusionTest, LeavesBroadcastingLeadingDims) {
  // K has one head where Q has two: MatMul broadcasts, Attention would not.
  TestGraph t;
  const int q = t.Input("q", {2, 2, 5, 8});
  const int k = t.Input("k", {2, 1, 7, 8});
  const int v = t.Input("v", {2, 2, 7, 4});
  const int kt = t.Op("Transpose", {k}, {Attribute::Ints("perm", {0, 1, 3, 2})}, {{2, 1, 8, 7}});
  const int p = t.Op("Softmax", {t.Op("MatMul", {q, kt}, {}, {{2, 2, 5, 7}})}, {}, {{2, 2, 5, 7}});
  t.Output(t.Op("MatMul", {p, v}, {}, {{2, 2, 5, 4}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"attention_fusion"});
  EXPECT_EQ(CountOps(*o.graph, "Attention", "ai.kiln"), 0);
}

TEST(PipelineTest, SmallCnnAndTransformerBlock) {
  std::mt19937 rng(9);
  TestGraph t;
  // CNN: Conv+BN+Relu, then a residual Conv+BN + Add + Relu.
  const int x = t.Input("x", {-1, 3, 8, 8});
  const int a = t.Op("Relu", {ConvBn(t, x, rng)}, {}, {{-1, 4, 8, 8}});
  const int w2 = t.Random("w2", {4, 4, 3, 3}, rng);
  const int c2 = t.Op("Conv", {a, w2}, {Attribute::Ints("pads", {1, 1, 1, 1})}, {{-1, 4, 8, 8}});
  const int bn2 = t.Op("BatchNormalization",
                       {c2, t.Random("s2", {4}, rng, 0.5, 1.5), t.Random("h2", {4}, rng),
                        t.Random("m2", {4}, rng), t.Random("v2", {4}, rng, 0.1, 2.0)},
                       {}, {{-1, 4, 8, 8}});
  t.Output(t.Op("Relu", {t.Op("Add", {bn2, a}, {}, {{-1, 4, 8, 8}})}, {}, {{-1, 4, 8, 8}}));
  // Transformer-ish: LayerNorm -> MatMul+bias -> GELU, and attention.
  const std::vector<int64_t> d = {-1, 5, 16};
  const int h = t.Input("h", d);
  const int ln = LayerNormDecomposed(t, h, rng, d);
  const int up =
      t.Op("Add",
           {t.Op("MatMul", {ln, t.Random("wu", {16, 16}, rng)}, {}, d), t.Random("bu", {16}, rng)},
           {}, d);
  t.Output(GeluErf(t, up, true, d));
  const int q = t.Input("q", {-1, 2, 5, 8});
  const int k = t.Input("k", {-1, 2, 7, 8});
  const int v = t.Input("v", {-1, 2, 7, 4});
  const int mask = t.Input("mask", {-1, 1, 1, 7});
  t.Output(AttentionBlock(t, q, k, v, mask));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "FusedConv", "ai.kiln"), 2);
  EXPECT_EQ(CountOps(*o.graph, "LayerNormalization", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "FusedMatMul", "ai.kiln"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Attention", "ai.kiln"), 1);
  EXPECT_EQ(o.graph->num_nodes(), 5) << FormatPassReport(o);
  // The GELU went into the FusedMatMul.
  for (const Node& n : o.graph->nodes()) {
    if (n.op_type == "FusedMatMul") {
      EXPECT_EQ(n.GetString("activation", ""), "Gelu");
    }
  }
  ExpectSameOutputs(*g, *o.graph, kFusedTol);
}

}  // namespace
}  // namespace kiln::opt::testing
