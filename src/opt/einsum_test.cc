// SPDX-License-Identifier: Apache-2.0
// einsum_lowering: every matrix-product form of Einsum becomes one MatMul with only the
// Transposes and Reshapes it needs, no Einsum is left, and the lowered graph computes the
// reference Einsum's output on random data (FP32 rounding: the reference accumulates in double);
// equations that are not plain matrix products stay Einsum.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

// MatMul in FP32 against the reference Einsum's double accumulation, values in [-1, 1].
constexpr double kTol = 1e-5;

struct Case {
  std::string equation;
  std::vector<int64_t> a, b;  // -1: the symbolic dim "N"
  int transposes = 0;         // the nodes the lowering needs besides the MatMul
  int reshapes = 0;
};

std::shared_ptr<const Graph> EinsumGraph(const std::string& equation, const std::vector<int64_t>& a,
                                         const std::vector<int64_t>& b) {
  TestGraph t;
  const int ia = t.Input("a", a);
  const int ib = t.Input("b", b);
  t.Output(t.Op("Einsum", {ia, ib}, {StringAttr("equation", equation)}));
  return t.Build();
}

TEST(EinsumLoweringTest, LowersEveryMatrixProductForm) {
  const std::vector<Case> cases = {
      // Attention scores and context (ViT-style heads), batched products.
      {"bhid,bhjd->bhij", {-1, 2, 5, 8}, {-1, 2, 7, 8}, 1, 0},
      {"bhij,bhjd->bhid", {-1, 2, 5, 7}, {-1, 2, 7, 8}, 0, 0},
      {"bij,bjk->bik", {3, 4, 5}, {3, 5, 6}, 0, 0},
      {"ij,jk->ik", {4, 5}, {5, 6}, 0, 0},
      // A weight without batch dims: MatMul broadcasts it over A's leading dims.
      {"bnd,dk->bnk", {-1, 7, 8}, {8, 3}, 0, 0},
      // MaxViT's equations, spaces and upper case as PyTorch writes them.
      {"B G H I D, B G H J D -> B G H I J", {-1, 3, 2, 5, 4}, {-1, 3, 2, 6, 4}, 1, 0},
      {"BGHIJ,BGHJD->BGHID", {-1, 3, 2, 5, 6}, {-1, 3, 2, 6, 4}, 0, 0},
      // Leading ellipsis, broadcast between operands of different ranks.
      {"...ij,...jk->...ik", {2, 3, 4, 5}, {3, 5, 6}, 0, 0},
      {"...ij,jk->...ik", {2, 3, 4, 5}, {5, 6}, 0, 0},
      // Implicit outputs: the labels used once, upper case first ("Ba" here).
      {"ij,jk", {4, 5}, {5, 6}, 0, 0},
      {"ja,jB", {4, 5}, {4, 6}, 2, 0},
      // No k (outer product), no m or n (batched dot product).
      {"i,j->ij", {4}, {5}, 0, 2},
      {"bk,bk->b", {-1, 6}, {-1, 6}, 0, 3},
      // Two contracted labels merged into K.
      {"bijk,bjkl->bil", {-1, 3, 4, 5}, {-1, 4, 5, 6}, 0, 2},
      // Output in another order; a batch label that is not leading.
      {"bij,bjk->bki", {2, 3, 4}, {2, 4, 5}, 1, 0},
      {"ij,jk->ijk", {3, 4}, {4, 5}, 2, 2},
      // Two m labels in another order than A's, merged into M and split again.
      {"bmkn,bkp->bpnm", {2, 3, 4, 5}, {2, 4, 6}, 2, 2},
      // A contracted dim known only as the same symbol on both sides.
      {"bij,bjk->bik", {2, 3, -1}, {2, -1, 4}, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    std::shared_ptr<const Graph> g = EinsumGraph(c.equation, c.a, c.b);
    OptimizedGraph o = OptimizeOnly(g, {"einsum_lowering"});
    EXPECT_EQ(CountOps(*o.graph, "Einsum"), 0);
    EXPECT_EQ(CountOps(*o.graph, "MatMul"), 1);
    EXPECT_EQ(CountOps(*o.graph, "Transpose"), c.transposes);
    EXPECT_EQ(CountOps(*o.graph, "Reshape"), c.reshapes);
    EXPECT_EQ(o.graph->num_nodes(), 1 + c.transposes + c.reshapes);
    // The output keeps its name, and its dims are declared now.
    ASSERT_EQ(o.graph->outputs.size(), 1u);
    EXPECT_EQ(o.graph->value(o.graph->outputs[0]).name, g->value(g->outputs[0]).name);
    EXPECT_TRUE(o.graph->value(o.graph->outputs[0]).type.has_shape);
    // The symbol "N" as 2 and as 3.
    ExpectSameOutputs(*g, *o.graph, kTol, 7, 2);
    ExpectSameOutputs(*g, *o.graph, kTol, 8, 3);
  }
}

TEST(EinsumLoweringTest, LeavesOtherEquations) {
  const std::vector<Case> cases = {
      {"ij,jk->i", {3, 4}, {4, 5}},            // k summed over B alone
      {"ij,kl->ijk", {3, 4}, {4, 5}},          // l summed over B alone
      {"ii,ij->ij", {3, 3}, {3, 5}},           // a diagonal
      {"i...j,jk->i...k", {3, 2, 4}, {4, 5}},  // an ellipsis inside a term
      {"ij,jk->ik", {3, 1}, {4, 5}},           // k broadcast from size 1
      {"...ij,jk->...ik", {-1, 4}, {-1, 5}},   // j: 4 against the symbol N, unproven
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    std::shared_ptr<const Graph> g = EinsumGraph(c.equation, c.a, c.b);
    OptimizedGraph o = OptimizeOnly(g, {"einsum_lowering"});
    EXPECT_EQ(CountOps(*o.graph, "Einsum"), 1);
    EXPECT_EQ(CountOps(*o.graph, "MatMul"), 0);
  }
  // A contracted dim that is a symbol on one side and known on the other: not provably equal.
  EXPECT_EQ(
      CountOps(*OptimizeOnly(EinsumGraph("ij,jk->ik", {3, -1}, {4, 5}), {"einsum_lowering"}).graph,
               "Einsum"),
      1);
  // One operand, three operands, and an FP64 product.
  {
    TestGraph t;
    const int a = t.Input("a", {3, 4});
    t.Output(t.Op("Einsum", {a}, {StringAttr("equation", "ij->ji")}));
    const int b = t.Input("b", {4, 5});
    const int c = t.Input("c", {5, 2});
    t.Output(t.Op("Einsum", {a, b, c}, {StringAttr("equation", "ij,jk,kl->il")}));
    const int d = t.Input("d", {3, 4}, DataType::kFloat64);
    const int e = t.Input("e", {4, 5}, DataType::kFloat64);
    t.Output(t.Op("Einsum", {d, e}, {StringAttr("equation", "ij,jk->ik")}, std::nullopt,
                  DataType::kFloat64));
    OptimizedGraph o = OptimizeOnly(t.Build(), {"einsum_lowering"});
    EXPECT_EQ(CountOps(*o.graph, "Einsum"), 3);
  }
}

// MaxViT's attention as PyTorch exports it: scaled q against k, a relative position bias, the
// Softmax, then the probabilities against v. Only the inputs have declared shapes, so the
// second Einsum's first operand gets its dims through the first one's lowering and the next
// round's type propagation; the whole pipeline leaves no Einsum.
TEST(EinsumLoweringTest, MaxVitAttentionInThePipeline) {
  std::mt19937 rng(5);
  TestGraph t(13);
  const std::vector<int64_t> qkv = {-1, 3, 2, 5, 4};
  const int q = t.Input("q", qkv);
  const int k = t.Input("k", qkv);
  const int v = t.Input("v", qkv);
  const int qs = t.Op("Mul", {q, t.Scalar("scale", 0.5f)});
  const int s =
      t.Op("Einsum", {qs, k}, {StringAttr("equation", "B G H I D, B G H J D -> B G H I J")});
  const int biased = t.Op("Add", {s, t.Random("rel_bias", {2, 5, 5}, rng)});
  const int p = t.Op("Softmax", {biased}, {Attribute::Int("axis", -1)});
  t.Output(t.Op("Einsum", {p, v}, {StringAttr("equation", "B G H I J, B G H J D -> B G H I D")}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "Einsum"), 0);
  ExpectSameOutputs(*g, *o.graph, kTol, 7, 2);
  ExpectSameOutputs(*g, *o.graph, kTol, 8, 1);
  // With the pass disabled the Einsums stay.
  OptimizerOptions options = HostOptions();
  options.disabled_passes = {"einsum_lowering"};
  Result<OptimizedGraph> off = OptimizeGraph(g, options);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(CountOps(*off->graph, "Einsum"), 2);
}

// MaxViT's attention as the opset-13 export has it, where no value after the window partition
// has a declared shape: q, k, v are Slices of one projection, reshaped by a Concat of
// Gather(Shape(x), i) pieces and constants to [B, G, P, H, D] and transposed to [B, G, H, P, D];
// the scores get a constant relative bias [1, H, P, P]. The contracted sizes are proven by
// walking back through those nodes: D from the Reshape's constant, P (the second Einsum's J)
// from the bias on one side and, through Gather(Shape(x), 2), from the partition's Reshape on
// the other.
TEST(EinsumLoweringTest, MaxVitWindowAttentionWithoutDeclaredShapes) {
  std::mt19937 rng(12);
  TestGraph t(13);
  int names = 0;  // constant names must be unique
  auto i64 = [&](const std::string& name, std::vector<int64_t> v) {
    return t.Const(name + std::to_string(names++),
                   Int64Tensor(Shape({static_cast<int64_t>(v.size())}), v));
  };
  auto dim_of = [&](int v, int64_t i) {  // Unsqueeze(Gather(Shape(v), i)): undeclared types
    const int shape = t.Op("Shape", {v}, {}, std::nullopt, DataType::kInt64);
    const int g =
        t.Op("Gather", {shape, t.Const("i" + std::to_string(names++), Int64Tensor(Shape{}, {i}))},
             {Attribute::Int("axis", 0)}, std::nullopt, DataType::kInt64);
    return t.Op("Unsqueeze", {g, i64("ax0", {0})}, {}, std::nullopt, DataType::kInt64);
  };
  // x [B, G=4, P=9, C=16] from the partition's Reshape (no declared output shape).
  const int x0 = t.Input("x0", {-1, 4, 9, 16});
  const int x = t.Op(
      "Reshape", {x0, t.Op("Concat", {dim_of(x0, 0), i64("g", {4}), i64("p", {9}), i64("c", {16})},
                           {Attribute::Int("axis", 0)}, std::nullopt, DataType::kInt64)});
  const int qkv = t.Op(
      "Add", {t.Op("MatMul", {x, t.Random("w_qkv", {16, 48}, rng)}), t.Random("b_qkv", {48}, rng)});
  const int target =
      t.Op("Concat", {dim_of(x, 0), dim_of(x, 1), dim_of(x, 2), i64("h", {2}), i64("d", {8})},
           {Attribute::Int("axis", 0)}, std::nullopt, DataType::kInt64);
  auto head = [&](int64_t begin) {
    const int slice =
        t.Op("Slice", {qkv, i64("s", {begin}), i64("e", {begin + 16}), i64("a", {-1})});
    return t.Op("Transpose", {t.Op("Reshape", {slice, target})},
                {Attribute::Ints("perm", {0, 1, 3, 2, 4})});
  };
  const int q = head(0);
  const int k = t.Op("Mul", {head(16), t.Scalar("scale", 0.35f)});
  const int v = head(32);
  const int s =
      t.Op("Einsum", {q, k}, {StringAttr("equation", "B G H I D, B G H J D -> B G H I J")});
  const int p = t.Op("Softmax", {t.Op("Add", {s, t.Random("rel_bias", {1, 2, 9, 9}, rng)})},
                     {Attribute::Int("axis", -1)});
  t.Output(t.Op("Einsum", {p, v}, {StringAttr("equation", "B G H I J, B G H J D -> B G H I D")}));
  std::shared_ptr<const Graph> g = t.Build();
  for (bool all : {false, true}) {
    SCOPED_TRACE(all ? "every pass" : "einsum_lowering alone");
    OptimizedGraph o = all ? OptimizeAll(g) : OptimizeOnly(g, {"einsum_lowering"});
    EXPECT_EQ(CountOps(*o.graph, "Einsum"), 0);
    ExpectSameOutputs(*g, *o.graph, kTol, 7, 2);
    ExpectSameOutputs(*g, *o.graph, kTol, 8, 1);
  }
}

// A linear layer written as Einsum with a constant weight, then a bias: the lowered MatMul
// takes the bias (and the weight stays a constant 2-D B for the fast kernels).
TEST(EinsumLoweringTest, ConstantWeightJoinsBiasFusion) {
  std::mt19937 rng(6);
  TestGraph t;
  const int x = t.Input("x", {-1, 7, 8});
  const int y =
      t.Op("Einsum", {x, t.Random("w", {8, 3}, rng)}, {StringAttr("equation", "bnd,dk->bnk")});
  t.Output(t.Op("Add", {y, t.Random("bias", {3}, rng)}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "Einsum"), 0);
  EXPECT_EQ(CountOps(*o.graph, "FusedMatMul", "ai.kiln"), 1);
  EXPECT_EQ(o.graph->num_nodes(), 1);
  ExpectSameOutputs(*g, *o.graph, kTol, 7, 2);
  ExpectSameOutputs(*g, *o.graph, kTol, 8, 3);
}

}  // namespace
}  // namespace kiln::opt::testing
