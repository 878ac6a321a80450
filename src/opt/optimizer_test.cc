// SPDX-License-Identifier: Apache-2.0
// The pass manager, and the folding and cleanup passes. Every rewrite test checks that the pass
// fired (node counts) and that the output graph computes what the input graph computes (both
// run through Session on the same random inputs).

#include "opt/optimizer.h"

#include <gtest/gtest.h>

#include <climits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "opt/graph_editor.h"
#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

TEST(PassManagerTest, ListsEveryPassOnceWithADescription) {
  std::set<std::string_view> names;
  for (const PassInfo& p : ListPasses()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
  }
  for (std::string_view want :
       {"constant_folding", "dead_code_elimination", "common_subexpression_elimination",
        "identity_elimination", "conv_bn_folding", "bias_activation_fusion", "layer_norm_fusion",
        "gelu_fusion", "attention_fusion", "shape_folding", "type_propagation"}) {
    EXPECT_EQ(names.count(want), 1u) << want;
  }
}

TEST(PassManagerTest, UnknownPassNameIsInvalidArgument) {
  TestGraph t;
  t.Output(t.Op("Relu", {t.Input("x", {2})}, {}, {{2}}));
  OptimizerOptions options;
  options.disabled_passes = {"constant_fold"};
  Result<OptimizedGraph> r = OptimizeGraph(t.Build(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown optimizer pass 'constant_fold'"), std::string::npos)
      << r.status().ToString();
}

TEST(PassManagerTest, DisabledPassDoesNothingAndIsReported) {
  TestGraph t;
  const int x = t.Input("x", {2});
  t.Output(t.Op("Relu", {t.Op("Identity", {x}, {}, {{2}})}, {}, {{2}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizerOptions options;
  options.disabled_passes = {"identity_elimination"};
  Result<OptimizedGraph> r = OptimizeGraph(g, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CountOps(*r->graph, "Identity"), 1);
  bool seen = false;
  for (const PassReport& p : r->passes) {
    if (p.name == "identity_elimination") {
      seen = true;
      EXPECT_FALSE(p.enabled);
      EXPECT_EQ(p.runs, 0);
    }
  }
  EXPECT_TRUE(seen);
  EXPECT_NE(FormatPassReport(*r).find("disabled"), std::string::npos);
  // Enabled: removed, counted, and the input graph is untouched.
  Result<OptimizedGraph> all = OptimizeGraph(g);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(CountOps(*all->graph, "Identity"), 0);
  EXPECT_EQ(CountOps(*g, "Identity"), 1);
  EXPECT_EQ(all->nodes_before, 2);
  EXPECT_EQ(all->nodes_after, 1);
  for (const PassReport& p : all->passes) {
    if (p.name == "identity_elimination") {
      EXPECT_EQ(p.changes, 1);
    }
    EXPECT_GE(p.runs, 1) << p.name;
    EXPECT_GE(p.time_ms, 0.0);
  }
}

TEST(PassManagerTest, RoundsAreBounded) {
  // A chain of Identities: one round removes them all, the second finds nothing and stops.
  TestGraph t;
  int v = t.Input("x", {3});
  for (int i = 0; i < 5; ++i) v = t.Op("Identity", {v}, {}, {{3}});
  t.Output(t.Op("Relu", {v}, {}, {{3}}));
  OptimizerOptions options;
  options.max_iterations = 1;
  Result<OptimizedGraph> r = OptimizeGraph(t.Build(), options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rounds, 1);
  Result<OptimizedGraph> r2 = OptimizeGraph(t.Build());
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->rounds, 2);
  EXPECT_EQ(r2->graph->num_nodes(), 1);
}

TEST(VerifyGraphTest, CatchesUseBeforeDefinition) {
  Graph g;
  Value a;
  a.name = "a";
  const int ia = g.AddValue(a);
  Value b;
  b.name = "b";
  const int ib = g.AddValue(b);
  Node n;
  n.op_type = "Relu";
  n.inputs = {ia};  // `a` is neither an input nor produced
  n.outputs = {ib};
  g.AddNode(n);
  g.outputs = {ib};
  Status s = VerifyGraph(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reads 'a' before it is defined"), std::string::npos) << s.ToString();
}

TEST(VerifyGraphTest, SubgraphsMayReadCapturedValues) {
  // `a` has no producer and is no input: an error in a top-level graph, a value captured from the
  // enclosing graph in an If / Loop body.
  Graph g;
  const int ia = g.AddValue({"a", ValueType(), -1, nullptr});
  const int ib = g.AddValue({"b", ValueType(), -1, nullptr});
  Node n;
  n.op_type = "Relu";
  n.inputs = {ia};
  n.outputs = {ib};
  g.AddNode(n);
  g.outputs = {ib};
  EXPECT_FALSE(VerifyGraph(g).ok());
  EXPECT_TRUE(VerifyGraph(g, /*subgraph=*/true).ok());
}

TEST(SubgraphTest, IfBranchesAreOptimizedLikeTheMainGraph) {
  // cond ? Relu(Identity(x) * (2 + 3)) : x - (1 + 1), x captured: each branch folds its constant
  // Add, loses its Identity, and still computes the same outputs for both conditions.
  auto branch = [](bool then) {
    TestGraph b;
    const int x =
        b.mutable_graph().AddValue({"x", TestGraph::Type(std::vector<int64_t>{4}), -1, nullptr});
    if (then) {
      const int k = b.Op("Add", {b.Scalar("two", 2), b.Scalar("three", 3)}, {}, {{}});
      const int id = b.Op("Identity", {x}, {}, {{4}});
      b.Output(b.Op("Relu", {b.Op("Mul", {id, k}, {}, {{4}})}, {}, {{4}}));
    } else {
      const int k = b.Op("Add", {b.Scalar("one", 1), b.Scalar("one_b", 1)}, {}, {{}});
      b.Output(b.Op("Sub", {x, k}, {}, {{4}}));
    }
    return b.Build();
  };
  TestGraph t;
  const int cond = t.Input("cond", {}, DataType::kBool);
  const int x = t.Input("x", {4});
  Node n;
  n.name = "if";
  n.op_type = "If";
  n.inputs = {cond};
  n.implicit_inputs = {x};
  Attribute then_branch, else_branch;
  then_branch.name = "then_branch";
  then_branch.type = AttributeType::kGraph;
  then_branch.g = std::const_pointer_cast<Graph>(branch(true));
  else_branch.name = "else_branch";
  else_branch.type = AttributeType::kGraph;
  else_branch.g = std::const_pointer_cast<Graph>(branch(false));
  n.attributes = {then_branch, else_branch};
  const int y =
      t.mutable_graph().AddValue({"y", TestGraph::Type(std::vector<int64_t>{4}), -1, nullptr});
  n.outputs = {y};
  t.mutable_graph().AddNode(std::move(n));
  t.Output(y);
  std::shared_ptr<const Graph> g = t.Build();
  Result<OptimizedGraph> r = OptimizeGraph(g);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->subgraphs, 2);
  const Node& opt_if = r->graph->node(0);
  ASSERT_EQ(opt_if.op_type, "If");
  const Graph& then_opt = *opt_if.FindAttribute("then_branch")->g;
  const Graph& else_opt = *opt_if.FindAttribute("else_branch")->g;
  EXPECT_EQ(CountOps(then_opt, "Identity"), 0);
  EXPECT_EQ(CountOps(then_opt, "Add"), 0);
  EXPECT_EQ(CountOps(else_opt, "Add"), 0);
  EXPECT_EQ(then_opt.num_nodes(), 2);  // Mul, Relu
  EXPECT_EQ(else_opt.num_nodes(), 1);  // Sub
  for (bool c : {true, false}) {
    bool cv = c;
    float xv[4] = {-1, 0.5f, 2, -3};
    Tensor in[] = {Tensor(DataType::kBool, Shape{}, &cv), Tensor(DataType::kFloat32, Shape{4}, xv)};
    Result<std::unique_ptr<Session>> s0 = Session::Create(g);
    Result<std::unique_ptr<Session>> s1 = Session::Create(r->graph);
    ASSERT_TRUE(s0.ok() && s1.ok());
    auto want = (*s0)->Run(in);
    auto got = (*s1)->Run(in);
    ASSERT_TRUE(want.ok() && got.ok());
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ((*got)[0].data<float>()[i], (*want)[0].data<float>()[i]) << c << " " << i;
    }
  }
}

TEST(ConstantFoldingTest, FoldsConstantSubgraphs) {
  std::mt19937 rng(1);
  TestGraph t;
  const int x = t.Input("x", {-1, 4});
  const int a = t.Random("a", {4}, rng);
  const int b = t.Random("b", {4}, rng);
  const int sum = t.Op("Add", {a, b}, {}, {{4}});
  const int scaled = t.Op("Mul", {sum, t.Scalar("two", 2.0f)}, {}, {{4}});
  t.Output(t.Op("Add", {x, scaled}, {}, {{-1, 4}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"constant_folding"});
  EXPECT_EQ(o.graph->num_nodes(), 1);
  EXPECT_EQ(o.passes[2].name, "constant_folding");
  EXPECT_EQ(o.passes[2].changes, 2);
  ExpectSameOutputs(*g, *o.graph, 1e-6);
  // The folded value is (a + b) * 2, computed here independently.
  const Node& add = o.graph->node(0);
  const OwnedTensor* c = o.graph->value(add.inputs[1]).constant.get();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 4; ++i) {
    const float want = (g->value(a).constant->data<const float>()[i] +
                        g->value(b).constant->data<const float>()[i]) *
                       2.0f;
    EXPECT_FLOAT_EQ(c->data<const float>()[i], want);
  }
}

TEST(ConstantFoldingTest, ConstantNodesBecomeInitializers) {
  TestGraph t;
  const int x = t.Input("x", {3});
  Attribute value;
  value.name = "value";
  value.type = AttributeType::kTensor;
  value.t = std::make_shared<const OwnedTensor>(FloatTensor(Shape{3}, {1, 2, 3}));
  const int c = t.Op("Constant", {}, {value}, {{3}});
  t.Output(t.Op("Mul", {x, c}, {}, {{3}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"constant_folding"});
  EXPECT_EQ(CountOps(*o.graph, "Constant"), 0);
  ExpectSameOutputs(*g, *o.graph, 1e-6);
}

TEST(ConstantFoldingTest, NeverFoldsRandomOps) {
  TestGraph t;
  const int x = t.Input("x", {2});
  const int r = t.Op("RandomUniform", {}, {Attribute::Ints("shape", {2})}, {{2}});
  t.Output(t.Op("Add", {x, t.Op("Relu", {r}, {}, {{2}})}, {}, {{2}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"constant_folding"});
  EXPECT_EQ(CountOps(*o.graph, "RandomUniform"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Relu"), 1);
}

TEST(ConstantFoldingTest, DoesNotMaterializeHugeConstants) {
  TestGraph t;
  const int x = t.Input("x", {1000, 1000});
  const int shape = t.Const("shape", Int64Tensor(Shape{2}, {1000, 1000}));
  const int big = t.Op("Expand", {t.Scalar("one", 1.0f), shape}, {}, {{1000, 1000}});
  t.Output(t.Op("Add", {x, big}, {}, {{1000, 1000}}));
  OptimizerOptions options;
  options.fold_max_bytes = 1 << 16;
  Result<OptimizedGraph> r = OptimizeGraph(t.Build(), options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(CountOps(*r->graph, "Expand"), 1);  // 4 MB result from 12 bytes of input: kept
}

TEST(ConstantFoldingTest, KeepsGraphOutputsAsNodeOutputs) {
  TestGraph t;
  t.Input("x", {1});
  const int y = t.Op("Add", {t.Scalar("a", 1), t.Scalar("b", 2)}, {}, {{}});
  t.Output(y);
  OptimizedGraph o = OptimizeOnly(t.Build(), {"constant_folding"});
  EXPECT_EQ(CountOps(*o.graph, "Add"), 1);
}

TEST(ShapeFoldingTest, FoldsStaticDimsAndKeepsSymbolicOnes) {
  // x [N, 3, 4]: Reshape(x, Concat([-1], Unsqueeze(Gather(Shape(x), 1)) * 4)) is static except
  // N; Gather(Shape(x), 0) reads N and must stay.
  TestGraph t(13);
  const int x = t.Input("x", {-1, 3, 4});
  const int shape = t.Op("Shape", {x}, {}, {{3}}, DataType::kInt64);
  const int axes0 = t.Const("axes0", Int64Tensor(Shape{1}, {0}));
  const int d1 =
      t.Op("Gather", {shape, t.Const("i1", Int64Tensor(Shape{}, {1}))}, {}, {{}}, DataType::kInt64);
  const int d2 =
      t.Op("Gather", {shape, t.Const("i2", Int64Tensor(Shape{}, {2}))}, {}, {{}}, DataType::kInt64);
  const int prod = t.Op("Mul", {d1, d2}, {}, {{}}, DataType::kInt64);
  const int u = t.Op("Unsqueeze", {prod, axes0}, {}, {{1}}, DataType::kInt64);
  const int target = t.Op("Concat", {t.Const("minus1", Int64Tensor(Shape{1}, {-1})), u},
                          {Attribute::Int("axis", 0)}, {{2}}, DataType::kInt64);
  t.Output(t.Op("Reshape", {x, target}, {}, {{-1, 12}}));
  const int n =
      t.Op("Gather", {shape, t.Const("i0", Int64Tensor(Shape{}, {0}))}, {}, {{}}, DataType::kInt64);
  const int nu = t.Op("Unsqueeze", {n, axes0}, {}, {{1}}, DataType::kInt64);
  const int flat = t.Op("Concat", {nu, t.Const("m1", Int64Tensor(Shape{1}, {-1}))},
                        {Attribute::Int("axis", 0)}, {{2}}, DataType::kInt64);
  t.Output(t.Op("Reshape", {x, flat}, {}, {{-1, 12}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o =
      OptimizeOnly(g, {"shape_folding", "constant_folding", "dead_code_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "Reshape"), 2);
  EXPECT_EQ(CountOps(*o.graph, "Mul"), 0);
  EXPECT_EQ(CountOps(*o.graph, "Shape"), 1);   // still needed for N
  EXPECT_EQ(CountOps(*o.graph, "Gather"), 1);  // the one reading N
  EXPECT_EQ(CountOps(*o.graph, "Concat"), 1);
  // The first Reshape's shape is now the constant [-1, 12].
  for (const Node& node : o.graph->nodes()) {
    if (node.op_type != "Reshape") continue;
    const OwnedTensor* c = o.graph->value(node.inputs[1]).constant.get();
    if (c == nullptr) continue;
    ASSERT_EQ(c->num_elements(), 2);
    EXPECT_EQ(c->data<const int64_t>()[0], -1);
    EXPECT_EQ(c->data<const int64_t>()[1], 12);
  }
  ExpectSameOutputs(*g, *o.graph, 0, 3, /*symbol_value=*/5);
}

TEST(TypePropagationTest, ReshapeToComputedShapeKeepsTheBatchSymbol) {
  // x.view(x.shape[0], 8, 4, -1).transpose(1, 2), then .reshape(x.shape[0], 8, -1): the types
  // ONNX's inference leaves unknown after a Reshape to a computed shape.
  TestGraph t(13);
  const int x = t.Input("x", {-1, 8, 32});
  const int s = t.Op("Shape", {x}, {}, {{3}}, DataType::kInt64);
  const int b =
      t.Op("Gather", {s, t.Const("zero", Int64Tensor(Shape{}, {0}))}, {}, {{}}, DataType::kInt64);
  const int u = t.Op("Unsqueeze", {b, t.Const("axes", Int64Tensor(Shape{1}, {0}))}, {}, {{1}},
                     DataType::kInt64);
  const int c = t.Op("Concat", {u, t.Const("rest", Int64Tensor(Shape{3}, {8, 4, -1}))},
                     {Attribute::Int("axis", 0)}, {{4}}, DataType::kInt64);
  const int r = t.Op("Reshape", {x, c}, {}, std::nullopt, DataType::kInvalid);
  const int tr = t.Op("Transpose", {r}, {Attribute::Ints("perm", {0, 2, 1, 3})}, std::nullopt,
                      DataType::kInvalid);
  const int c2 = t.Op("Concat", {u, t.Const("rest2", Int64Tensor(Shape{2}, {8, -1}))},
                      {Attribute::Int("axis", 0)}, {{3}}, DataType::kInt64);
  const int back = t.Op("Reshape", {tr, c2}, {}, std::nullopt, DataType::kInvalid);
  t.Output(t.Op("Relu", {back}, {}, {{-1, 8, 32}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"type_propagation"});
  auto type_of = [&](int id) { return o.graph->value(o.graph->FindValue(g->value(id).name)).type; };
  EXPECT_EQ(type_of(r).ToString(), "FP32[N,8,4,8]");
  EXPECT_EQ(type_of(tr).ToString(), "FP32[N,4,8,8]");
  EXPECT_EQ(type_of(back).ToString(), "FP32[N,8,32]");
  ExpectSameOutputs(*g, *o.graph, 0);
}

TEST(TypePropagationTest, NeverOverridesDeclaredDims) {
  TestGraph t;
  const int x = t.Input("x", {4, 3});
  const int y = t.Op("Relu", {x}, {}, {{-1, 3}});  // declared [N, 3]: the symbol stays
  t.Output(t.Op("Add", {y, t.Input("z", {1, 3})}, {}, std::nullopt));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"type_propagation"});
  EXPECT_EQ(o.graph->value(o.graph->node(0).outputs[0]).type.ToString(), "FP32[N,3]");
  // What follows gets what the derivation proves: y is x's [4, 3], so N is 4 here.
  EXPECT_EQ(o.graph->value(o.graph->node(1).outputs[0]).type.ToString(), "FP32[4,3]");
}

// --- type_propagation on the ops between layers -------------------------------------------------

OwnedTensor Int32Tensor(const Shape& shape, const std::vector<int32_t>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<int32_t>()[i] = values[i];
  return std::move(t).value();
}

OwnedTensor BoolTensor(const Shape& shape, const std::vector<bool>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kBool, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<bool>()[i] = values[i];
  return std::move(t).value();
}

Attribute TensorAttr(std::string name, OwnedTensor value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kTensor;
  a.t = std::make_shared<const OwnedTensor>(std::move(value));
  return a;
}

// A 1-D INT64 constant.
int Ints64(TestGraph& t, const std::string& name, const std::vector<int64_t>& v) {
  return t.Const(name, Int64Tensor(Shape{static_cast<int64_t>(v.size())}, v));
}

// A node whose output has no declared type at all (as after libonnx gave up).
int Untyped(TestGraph& t, const std::string& op, std::vector<int> inputs,
            std::vector<Attribute> attrs = {}, const std::string& domain = "") {
  return t.Op(op, std::move(inputs), std::move(attrs), std::nullopt, DataType::kInvalid, domain);
}

// Runs type_propagation alone and returns the derived type of every graph output, as text. Each
// one is checked against what the kernels compute (the graph runs with the symbol N fed as `n`),
// and the propagated graph must compute exactly what the original does.
std::vector<std::string> PropagateAndRun(const std::shared_ptr<const Graph>& g, int64_t n = 3) {
  OptimizedGraph o = OptimizeOnly(g, {"type_propagation"});
  std::mt19937 rng(5);
  const std::vector<OwnedTensor> inputs = RandomInputs(*g, rng, n);
  const std::vector<OwnedTensor> got = RunGraph(o.graph, inputs);
  std::vector<std::string> types;
  for (size_t i = 0; i < o.graph->outputs.size(); ++i) {
    const ValueType& t = o.graph->value(o.graph->outputs[i]).type;
    types.push_back(t.ToString());
    EXPECT_EQ(t.dtype, got[i].dtype()) << "output " << i << " " << types.back();
    if (!t.has_shape) continue;
    const Shape& s = got[i].shape();
    EXPECT_EQ(static_cast<int>(t.dims.size()), s.rank()) << "output " << i << " " << types.back();
    if (static_cast<int>(t.dims.size()) != s.rank()) continue;
    for (size_t d = 0; d < t.dims.size(); ++d) {
      if (t.dims[d].known()) {
        EXPECT_EQ(t.dims[d].value, s.dim(static_cast<int>(d)))
            << "output " << i << " " << types.back() << " vs " << s.ToString();
      } else if (t.dims[d].symbol == "N") {
        EXPECT_EQ(n, s.dim(static_cast<int>(d)))
            << "output " << i << " " << types.back() << " vs " << s.ToString();
      }
    }
  }
  ExpectSameOutputs(*g, *o.graph, 0, 5, n);
  return types;
}

TEST(TypePropagationTest, SliceClampsKnownDimsAndTakesSymbolicDimsOnlyWhole) {
  TestGraph t(13);
  const int x = t.Input("x", {-1, 10, 8});
  const int64_t kMax = INT64_MAX;
  // [:, 1::2, -3:100] of [N, 10, 8]: the ends clamp, the steps divide.
  t.Output(Untyped(t, "Slice",
                   {x, Ints64(t, "s1", {1, -3}), Ints64(t, "e1", {kMax, 100}),
                    Ints64(t, "a1", {1, 2}), Ints64(t, "st1", {2, 1})}));
  // The batch whole (0 to INT64_MAX) and axis -2 reversed whole (-1 to -INT64_MAX by -1).
  t.Output(Untyped(t, "Slice",
                   {x, Ints64(t, "s2", {0, -1}), Ints64(t, "e2", {kMax, -kMax}),
                    Ints64(t, "a2", {0, -2}), Ints64(t, "st2", {1, -1})}));
  // INT32 bounds, no axes (0 and 1): the batch from 1 on has no provable size.
  t.Output(Untyped(t, "Slice",
                   {x, t.Const("s3", Int32Tensor(Shape{2}, {1, 4})),
                    t.Const("e3", Int32Tensor(Shape{2}, {INT32_MAX, 6}))}));
  // A negative step on a known dim: 6, 4, 2.
  t.Output(Untyped(t, "Slice",
                   {x, Ints64(t, "s4", {6}), Ints64(t, "e4", {1}), Ints64(t, "a4", {2}),
                    Ints64(t, "st4", {-2})}));
  // Bounds beyond the dim and an empty result.
  t.Output(
      Untyped(t, "Slice",
              {x, Ints64(t, "s5", {-100, 7}), Ints64(t, "e5", {100, 3}), Ints64(t, "a5", {1, 2})}));
  const std::vector<std::string> types = PropagateAndRun(t.Build(), 4);
  EXPECT_EQ(types[0], "FP32[N,5,3]");
  EXPECT_EQ(types[1], "FP32[N,10,8]");
  EXPECT_EQ(types[2], "FP32[?,2,8]");
  EXPECT_EQ(types[3], "FP32[N,10,3]");
  EXPECT_EQ(types[4], "FP32[N,10,0]");
  // The opset 1-9 form: starts / ends / axes attributes.
  TestGraph t9(9);
  const int x9 = t9.Input("x", {-1, 10, 8});
  t9.Output(Untyped(t9, "Slice", {x9},
                    {Attribute::Ints("starts", {2, 0}), Attribute::Ints("ends", {-1, kMax}),
                     Attribute::Ints("axes", {2, 0})}));
  EXPECT_EQ(PropagateAndRun(t9.Build())[0], "FP32[N,10,5]");
}

TEST(TypePropagationTest, SplitTypesEveryOutput) {
  TestGraph t(13);
  const int x = t.Input("x", {-1, 12, 5});
  for (int v : t.OpN("Split", {x, Ints64(t, "split", {2, 10})}, 2, {Attribute::Int("axis", 1)},
                     std::nullopt, DataType::kInvalid)) {
    t.Output(v);
  }
  // No sizes: equal parts.
  for (int v :
       t.OpN("Split", {x}, 3, {Attribute::Int("axis", -2)}, std::nullopt, DataType::kInvalid)) {
    t.Output(v);
  }
  // One part of the symbolic batch is the batch.
  t.Output(t.OpN("Split", {x}, 1, {}, std::nullopt, DataType::kInvalid)[0]);
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  const std::vector<std::string> want = {"FP32[N,2,5]", "FP32[N,10,5]", "FP32[N,4,5]",
                                         "FP32[N,4,5]", "FP32[N,4,5]",  "FP32[N,12,5]"};
  EXPECT_EQ(types, want);
  // Opset 11: the sizes as an attribute.
  TestGraph t11(11);
  const int x11 = t11.Input("x", {-1, 12, 5});
  for (int v :
       t11.OpN("Split", {x11}, 2, {Attribute::Int("axis", 2), Attribute::Ints("split", {1, 4})},
               std::nullopt, DataType::kInvalid)) {
    t11.Output(v);
  }
  const std::vector<std::string> want11 = {"FP32[N,12,1]", "FP32[N,12,4]"};
  EXPECT_EQ(PropagateAndRun(t11.Build()), want11);
}

TEST(TypePropagationTest, ConcatSumsTheAxisAndTakesTheOtherDimsFromAnyInput) {
  TestGraph t(13);
  const int x = t.Input("x", {-1, 2, 4});
  const int y = t.Input("y", {-1, 3, 4});
  t.Output(Untyped(t, "Concat", {x, y, x}, {Attribute::Int("axis", 1)}));
  // An input of unknown rank (an Einsum is not derived): the axis dim is unknown.
  const int e = Untyped(t, "Einsum", {y}, {StringAttr("equation", "abc->abc")});
  t.Output(Untyped(t, "Concat", {e, x}, {Attribute::Int("axis", -2)}));
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  EXPECT_EQ(types[0], "FP32[N,7,4]");
  EXPECT_EQ(types[1], "FP32[N,?,4]");
}

TEST(TypePropagationTest, ConvolutionsAndPoolsFollowTheKernelsWindowRules) {
  std::mt19937 rng(3);
  TestGraph t(13);
  t.graph().opset_imports["ai.kiln"] = 1;
  const int x = t.Input("x", {-1, 3, 17, 17});
  // Explicit pads and strides: floor((17 + 2 - 3) / 2) + 1 = 9.
  t.Output(Untyped(t, "Conv", {x, t.Random("w1", {8, 3, 3, 3}, rng)},
                   {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2})}));
  // SAME_UPPER with dilations: ceil(17 / 2) = 9.
  t.Output(Untyped(t, "Conv", {x, t.Random("w2", {4, 3, 3, 3}, rng)},
                   {StringAttr("auto_pad", "SAME_UPPER"), Attribute::Ints("dilations", {2, 2}),
                    Attribute::Ints("strides", {2, 2})}));
  // Grouped, VALID, uneven strides: 17 - 5 + 1 = 13 and floor(12 / 3) + 1 = 5.
  t.Output(Untyped(t, "Conv", {x, t.Random("w3", {6, 1, 5, 5}, rng)},
                   {Attribute::Int("group", 3), StringAttr("auto_pad", "VALID"),
                    Attribute::Ints("strides", {1, 3})}));
  // kernel_shape from W only, with a bias, as ai.kiln FusedConv.
  t.Output(Untyped(t, "FusedConv", {x, t.Random("w4", {5, 3, 1, 1}, rng), t.Random("b4", {5}, rng)},
                   {}, "ai.kiln"));
  // ConvTranspose: 2 * (17 - 1) + 1 + 3 - 2 = 34 rows, W [C, M / group, k, k].
  t.Output(Untyped(t, "ConvTranspose", {x, t.Random("w5", {3, 2, 3, 3}, rng)},
                   {Attribute::Ints("strides", {2, 2}), Attribute::Ints("pads", {1, 1, 1, 1}),
                    Attribute::Ints("output_padding", {1, 1})}));
  // MaxPool with ceil_mode, and its Indices: floor((17 + 1 - 3) / 2) + 1 = 8, rounded up to 9.
  std::vector<int> mp =
      t.OpN("MaxPool", {x}, 2,
            {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
             Attribute::Int("ceil_mode", 1), Attribute::Ints("pads", {0, 0, 1, 1})},
            std::nullopt, DataType::kInvalid);
  t.Output(mp[0]);
  t.Output(mp[1]);
  // AveragePool whose last ceil_mode window would start in the end padding (at 18): it is
  // dropped, floor((17 + 2 - 3) / 3) + 1 = 6 stays 6.
  t.Output(Untyped(t, "AveragePool", {x},
                   {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {3, 3}),
                    Attribute::Int("ceil_mode", 1), Attribute::Ints("pads", {0, 0, 2, 2})}));
  t.Output(Untyped(t, "GlobalAveragePool", {x}));
  t.Output(Untyped(t, "GlobalMaxPool", {x}));
  // Spatial dims of unknown size (the symbol N here): a 3x3 conv padded by 1 with stride 1 keeps
  // them, a strided one does not.
  const int s = t.Input("s", {-1, 2, -1, -1});
  t.Output(Untyped(t, "Conv", {s, t.Random("w6", {4, 2, 3, 3}, rng)},
                   {Attribute::Ints("pads", {1, 1, 1, 1})}));
  t.Output(Untyped(t, "Conv", {s, t.Random("w7", {4, 2, 3, 3}, rng)},
                   {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2})}));
  const std::vector<std::string> types = PropagateAndRun(t.Build(), 5);
  const std::vector<std::string> want = {"FP32[N,8,9,9]",   "FP32[N,4,9,9]",   "FP32[N,6,13,5]",
                                         "FP32[N,5,17,17]", "FP32[N,2,34,34]", "FP32[N,3,9,9]",
                                         "INT64[N,3,9,9]",  "FP32[N,3,6,6]",   "FP32[N,3,1,1]",
                                         "FP32[N,3,1,1]",   "FP32[N,4,N,N]",   "FP32[N,4,?,?]"};
  EXPECT_EQ(types, want);
}

TEST(TypePropagationTest, FlattenGemmSqueezeUnsqueeze) {
  std::mt19937 rng(4);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 4, 1, 3});
  const int flat = Untyped(t, "Flatten", {x});
  t.Output(flat);
  t.Output(Untyped(t, "Flatten", {x}, {Attribute::Int("axis", -2)}));  // [4N, 3]: 4N unknown
  t.Output(Untyped(t, "Flatten", {x}, {Attribute::Int("axis", 0)}));
  t.Output(Untyped(t, "Gemm", {flat, t.Random("b", {5, 12}, rng)}, {Attribute::Int("transB", 1)}));
  t.Output(Untyped(
      t, "Gemm",
      {Untyped(t, "Transpose", {flat}), t.Random("b2", {12, 7}, rng), t.Random("c2", {7}, rng)},
      {Attribute::Int("transA", 1)}));
  t.Output(Untyped(t, "Squeeze", {x, Ints64(t, "sq", {-2})}));
  // No axes: every size-1 dim goes, and N might be 1: unknown.
  t.Output(Untyped(t, "Squeeze", {x}));
  t.Output(Untyped(t, "Unsqueeze", {x, Ints64(t, "usq", {0, -1})}));
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  const std::vector<std::string> want = {"FP32[N,12]", "FP32[?,3]",        "FP32[1,?]",
                                         "FP32[N,5]",  "FP32[N,7]",        "FP32[N,4,3]",
                                         "FP32[?]",    "FP32[1,N,4,1,3,1]"};
  EXPECT_EQ(types, want);
  // Opset 11: axes as attributes.
  TestGraph t11(11);
  const int x11 = t11.Input("x", {-1, 4, 1, 3});
  t11.Output(Untyped(t11, "Squeeze", {x11}, {Attribute::Ints("axes", {2})}));
  t11.Output(Untyped(t11, "Unsqueeze", {x11}, {Attribute::Ints("axes", {1})}));
  const std::vector<std::string> want11 = {"FP32[N,4,3]", "FP32[N,1,4,1,3]"};
  EXPECT_EQ(PropagateAndRun(t11.Build()), want11);
}

TEST(TypePropagationTest, ExpandTilePadWhereGather) {
  std::mt19937 rng(1);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 1, 4});
  t.Output(Untyped(t, "Expand", {x, Ints64(t, "to", {3, 1})}));
  t.Output(Untyped(t, "Tile", {x, Ints64(t, "r1", {1, 2, 2})}));
  t.Output(Untyped(t, "Tile", {x, Ints64(t, "r2", {2, 1, 1})}));  // 2N: unknown
  t.Output(Untyped(t, "Pad", {x, Ints64(t, "pads", {0, 1, 2, 0, 3, -1})}));
  t.Output(Untyped(t, "Where",
                   {t.Const("cond", BoolTensor(Shape{1, 4}, {true, false, true, false})), x,
                    t.Random("other", {3, 1}, rng)}));
  t.Output(Untyped(t, "Gather", {x, t.Const("idx", Int64Tensor(Shape{2, 2}, {0, 3, -1, 1}))},
                   {Attribute::Int("axis", 2)}));
  t.Output(Untyped(t, "Gather", {x, t.Const("i0", Int64Tensor(Shape{}, {0}))}));
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  const std::vector<std::string> want = {"FP32[N,3,4]", "FP32[N,2,8]", "FP32[?,1,4]",
                                         "FP32[N,5,5]", "FP32[N,3,4]", "FP32[N,1,2,2]",
                                         "FP32[1,4]"};
  EXPECT_EQ(types, want);
}

TEST(TypePropagationTest, ReducesWithAxesFromAttributeOrInput) {
  TestGraph t(13);
  const int x = t.Input("x", {-1, 6, 5});
  t.Output(Untyped(t, "ReduceSum", {x, Ints64(t, "ax", {1})}, {Attribute::Int("keepdims", 0)}));
  t.Output(Untyped(t, "ReduceMax", {x}, {Attribute::Ints("axes", {-1})}));
  t.Output(Untyped(t, "ReduceMin", {x}, {Attribute::Int("keepdims", 0)}));
  t.Output(Untyped(t, "ReduceMean", {x}, {Attribute::Ints("axes", {0, 2})}));
  t.Output(Untyped(t, "ArgMax", {x}, {Attribute::Int("axis", 1), Attribute::Int("keepdims", 0)}));
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  const std::vector<std::string> want = {"FP32[N,5]", "FP32[N,6,1]", "FP32[]", "FP32[1,6,1]",
                                         "INT64[N,5]"};
  EXPECT_EQ(types, want);
}

TEST(TypePropagationTest, ResizeWithConstantScalesOrSizes) {
  TestGraph t(13);
  const int x = t.Input("x", {-1, 3, 4, 6});
  t.Output(Untyped(t, "Resize",
                   {x, kNoValue, t.Const("scales", FloatTensor(Shape{4}, {1, 1, 2, 1.5f}))}));
  const int y = t.Input("y", {2, 3, 4, 6});
  t.Output(Untyped(t, "Resize", {y, kNoValue, kNoValue, Ints64(t, "sizes", {2, 3, 5, 7})},
                   {StringAttr("mode", "linear")}));
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  EXPECT_EQ(types[0], "FP32[N,3,8,9]");
  EXPECT_EQ(types[1], "FP32[2,3,5,7]");
}

TEST(TypePropagationTest, ShapeValueArithmeticResolvesReshapeTargets) {
  // x [N, 6, 4]: target [N + 0, 6 * 4 / 8, Cast(3 - 1), -1] = [N, 3, 2, 4]; a target entry N * 2
  // is not provable (no product symbols), so neither is the -1 next to it.
  TestGraph t(13);
  const int x = t.Input("x", {-1, 6, 4});
  const int s = Untyped(t, "Shape", {x});
  const int axes0 = Ints64(t, "axes0", {0});
  auto scalar = [&](const std::string& name, int64_t v) {
    return t.Const(name, Int64Tensor(Shape{}, {v}));
  };
  int count = 0;
  auto at = [&](int v, int64_t i) {
    return Untyped(t, "Gather", {v, scalar("i" + std::to_string(count++), i)});
  };
  const int tail = Untyped(t, "Slice", {s, Ints64(t, "b", {1}), Ints64(t, "e", {3})});
  const int prod = Untyped(t, "Mul", {at(tail, 0), at(tail, 1)});
  const int third = Untyped(t, "Div", {prod, scalar("eight", 8)});
  const int n = Untyped(t, "Add", {at(s, 0), scalar("zero", 0)});
  const int two =
      Untyped(t, "Cast", {Untyped(t, "Sub", {third, scalar("one", 1)})}, {Attribute::Int("to", 7)});
  auto u = [&](int v) { return Untyped(t, "Unsqueeze", {v, axes0}); };
  const int target = Untyped(t, "Concat", {u(n), u(third), u(two), Ints64(t, "m1", {-1})},
                             {Attribute::Int("axis", 0)});
  t.Output(Untyped(t, "Reshape", {x, target}));
  const int twice = Untyped(t, "Mul", {at(s, 0), scalar("two", 2)});
  const int target2 =
      Untyped(t, "Concat", {u(twice), Ints64(t, "three", {3}), Ints64(t, "m1b", {-1})},
              {Attribute::Int("axis", 0)});
  t.Output(Untyped(t, "Reshape", {x, target2}));
  t.Output(target);
  const std::vector<std::string> types = PropagateAndRun(t.Build(), 2);
  EXPECT_EQ(types[0], "FP32[N,3,2,4]");
  EXPECT_EQ(types[1], "FP32[?,3,?]");
  EXPECT_EQ(types[2], "INT64[4]");
}

// ShuffleNet v2's channel shuffle and split as PyTorch exports them with a dynamic batch:
// x.view(b, 2, c / 2, h, w).transpose(1, 2).reshape(b, -1, h, w), then chunk(2, dim=1), the
// second half into the branch convolutions, concatenated with the first half. `inner` (if set)
// receives the intermediates: the grouped view, the transposed one, the shuffled x, both halves
// and the depthwise conv's output.
int ShuffleBlock(TestGraph& t, int x, const std::string& p, std::mt19937& rng,
                 std::vector<int>* inner = nullptr) {
  const int axes0 = Ints64(t, p + "axes0", {0});
  auto dim = [&](int i) {
    const int s = Untyped(t, "Shape", {x});
    return Untyped(t, "Gather",
                   {s, t.Const(p + "i" + std::to_string(i), Int64Tensor(Shape{}, {int64_t{i}}))});
  };
  auto u = [&](int v) { return Untyped(t, "Unsqueeze", {v, axes0}); };
  const int b = u(dim(0)), h = u(dim(2)), w = u(dim(3));
  const int half = u(Untyped(t, "Div", {dim(1), t.Const(p + "two", Int64Tensor(Shape{}, {2}))}));
  const int t1 =
      Untyped(t, "Concat", {b, Ints64(t, p + "g", {2}), half, h, w}, {Attribute::Int("axis", 0)});
  const int grouped = Untyped(t, "Reshape", {x, t1});
  const int shuffled =
      Untyped(t, "Transpose", {grouped}, {Attribute::Ints("perm", {0, 2, 1, 3, 4})});
  const int t2 =
      Untyped(t, "Concat", {b, Ints64(t, p + "m1", {-1}), h, w}, {Attribute::Int("axis", 0)});
  const int y = Untyped(t, "Reshape", {shuffled, t2});
  const int axes1 = Ints64(t, p + "axes1", {1});
  const int first =
      Untyped(t, "Slice", {y, Ints64(t, p + "s0", {0}), Ints64(t, p + "e0", {24}), axes1});
  const int second =
      Untyped(t, "Slice", {y, Ints64(t, p + "s1", {24}), Ints64(t, p + "e1", {48}), axes1});
  const int c1 = Untyped(
      t, "Relu",
      {Untyped(t, "Conv",
               {second, t.Random(p + "w1", {24, 24, 1, 1}, rng), t.Random(p + "b1", {24}, rng)})});
  const int c2 = Untyped(
      t, "Conv", {c1, t.Random(p + "w2", {24, 1, 3, 3}, rng), t.Random(p + "b2", {24}, rng)},
      {Attribute::Int("group", 24), Attribute::Ints("pads", {1, 1, 1, 1})});
  const int c3 = Untyped(
      t, "Relu",
      {Untyped(t, "Conv",
               {c2, t.Random(p + "w3", {24, 24, 1, 1}, rng), t.Random(p + "b3", {24}, rng)})});
  if (inner) *inner = {grouped, shuffled, y, first, second, c2};
  return Untyped(t, "Concat", {first, c3}, {Attribute::Int("axis", 1)});
}

// Two blocks: the second one's shuffle reads the shape of the first one's output, which nothing
// but type_propagation types.
std::shared_ptr<const Graph> ShuffleNetStage(std::mt19937& rng, bool expose_inner) {
  TestGraph t(13);
  const int x = t.Input("x", {-1, 48, 8, 8});
  std::vector<int> inner;
  const int y = ShuffleBlock(t, ShuffleBlock(t, x, "a_", rng), "b_", rng, &inner);
  t.Output(y);
  if (expose_inner) {
    for (int v : inner) t.Output(v);
  }
  return t.Build();
}

TEST(TypePropagationTest, ShuffleNetChannelShuffleAndSplit) {
  std::mt19937 rng(9);
  const std::vector<std::string> types = PropagateAndRun(ShuffleNetStage(rng, true), 2);
  const std::vector<std::string> want = {"FP32[N,48,8,8]", "FP32[N,2,24,8,8]", "FP32[N,24,2,8,8]",
                                         "FP32[N,48,8,8]", "FP32[N,24,8,8]",   "FP32[N,24,8,8]",
                                         "FP32[N,24,8,8]"};
  EXPECT_EQ(types, want);
  // The whole pipeline: the channel counts fold, only the batch is read at run time, and the
  // branch convolutions (their X now has a shape) can take the blocked layout.
  std::shared_ptr<const Graph> g = ShuffleNetStage(rng, false);
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "Div"), 0) << FormatPassReport(o);
  EXPECT_EQ(CountOps(*o.graph, "Shape"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Gather"), 1);
  OptimizerOptions options = HostOptions();
  options.disabled_passes = {"type_propagation"};
  Result<OptimizedGraph> without = OptimizeGraph(g, options);
  ASSERT_TRUE(without.ok());
  EXPECT_GE(CountOps(*without->graph, "Div"), 1);  // the second shuffle's c / 2
  if (HostOptions().target.channel_block > 0) {
    int blocked = 0;
    for (const Node& n : o.graph->nodes()) {
      if (n.op_type == "FusedConv" && n.GetInt("y_block", 0) > 0) ++blocked;
    }
    EXPECT_GE(blocked, 4) << FormatPassReport(o);
    // Without the derived types the convolutions have no X shape and stay plain.
    EXPECT_EQ(CountOps(*without->graph, "ReorderToBlocked", "ai.kiln"), 0);
  }
  ExpectSameOutputs(*g, *o.graph, 1e-4, 3, /*symbol_value=*/2);
  ExpectSameOutputs(*g, *o.graph, 1e-4, 4, /*symbol_value=*/5);
}

TEST(TypePropagationTest, ProvenDimsReachTheValuesAfterADeclaredSymbol) {
  // ViT's class token: Expand(cls, Where(shape == -1, 1, shape)) for shape = [N, -1, -1], which
  // the exporter declares [unk__2, unk__3, 16]. The Expand keeps its declared symbols; the Concat
  // after it gets the proven [N, 1 + 5, 16].
  std::mt19937 rng(2);
  TestGraph t(13);
  const int x = t.Input("x", {-1, 5, 16});
  const int n = Untyped(
      t, "Unsqueeze",
      {Untyped(t, "Gather", {Untyped(t, "Shape", {x}), t.Const("i0", Int64Tensor(Shape{}, {0}))}),
       Ints64(t, "axes", {0})});
  const int shape = Untyped(t, "Concat", {n, Ints64(t, "m1", {-1}), Ints64(t, "m1b", {-1})},
                            {Attribute::Int("axis", 0)});
  const int ones = Untyped(t, "ConstantOfShape", {Untyped(t, "Shape", {shape})},
                           {TensorAttr("value", Int64Tensor(Shape{1}, {1}))});
  const int minus = Untyped(t, "Mul", {ones, t.Const("neg", Int64Tensor(Shape{}, {-1}))});
  const int target = Untyped(t, "Where", {Untyped(t, "Equal", {shape, minus}), ones, shape});
  const int cls = Untyped(t, "Expand", {t.Random("cls", {1, 1, 16}, rng), target});
  ValueType& declared = t.graph().mutable_value(cls).type;
  declared.dtype = DataType::kFloat32;
  declared.has_shape = true;
  declared.dims = {Dim{-1, "unk__2"}, Dim{-1, "unk__3"}, Dim{16, {}}};
  const int tokens = Untyped(t, "Concat", {cls, x}, {Attribute::Int("axis", 1)});
  t.Output(Untyped(t, "Add", {tokens, t.Random("pos", {1, 6, 16}, rng)}));
  t.Output(cls);
  t.Output(target);
  const std::vector<std::string> types = PropagateAndRun(t.Build(), 3);
  EXPECT_EQ(types[0], "FP32[N,6,16]");
  EXPECT_EQ(types[1], "FP32[unk__2,unk__3,16]");
  EXPECT_EQ(types[2], "INT64[3]");
}

TEST(TypePropagationTest, KeepsDeclaredSymbolsAndPrefersTheInputs) {
  // y declared [M, 8] after an input [N, 8]: y keeps M, what follows gets N (a graph input's
  // symbol, the one the other values carry); where nothing better is known, M travels on.
  TestGraph t(13);
  const int x = t.Input("x", {-1, 8});
  const int y = t.Op("Relu", {x}, {}, std::nullopt, DataType::kInvalid);
  ValueType& declared = t.graph().mutable_value(y).type;
  declared.has_shape = true;
  declared.dims = {Dim{-1, "M"}, Dim{8, {}}};
  t.Output(Untyped(t, "Sigmoid", {y}));
  const int e = Untyped(t, "Einsum", {x}, {StringAttr("equation", "ab->ab")});  // not derived
  const int z = t.Op("Relu", {e}, {}, std::nullopt, DataType::kInvalid);
  ValueType& dz = t.graph().mutable_value(z).type;
  dz.has_shape = true;
  dz.dims = {Dim{-1, "M"}, Dim{}};
  t.Output(Untyped(t, "Unsqueeze", {z, Ints64(t, "axes", {0})}));
  t.Output(y);
  t.Output(z);
  const std::vector<std::string> types = PropagateAndRun(t.Build());
  EXPECT_EQ(types[0], "FP32[N,8]");
  EXPECT_EQ(types[1], "FP32[1,M,?]");
  EXPECT_EQ(types[2], "FP32[M,8]");
  EXPECT_EQ(types[3], "FP32[M,?]");
}

TEST(ShapeFoldingTest, BatchSizeReadsShareOneChain) {
  // Four Reshapes each compute the batch size from their own input; after shape folding, CSE
  // and DCE one Shape -> Gather -> Unsqueeze of the graph input remains, and the Reshape of an
  // [N, 4, 6] value to [N, 4, 6] is gone.
  TestGraph t(13);
  const int x = t.Input("x", {-1, 4, 6});
  const int axes = t.Const("axes", Int64Tensor(Shape{1}, {0}));
  int count = 0;
  auto batch_of = [&](int v, int rank) {
    const int s = t.Op("Shape", {v}, {}, {{rank}}, DataType::kInt64);
    const int b =
        t.Op("Gather", {s, t.Const("i" + std::to_string(count++), Int64Tensor(Shape{}, {0}))}, {},
             {{}}, DataType::kInt64);
    return t.Op("Unsqueeze", {b, axes}, {}, {{1}}, DataType::kInt64);
  };
  const int r = t.Op("Relu", {x}, {}, {{-1, 4, 6}});
  const int s1 = t.Op("Concat", {batch_of(r, 3), t.Const("a", Int64Tensor(Shape{1}, {24}))},
                      {Attribute::Int("axis", 0)}, {{2}}, DataType::kInt64);
  const int flat = t.Op("Reshape", {r, s1}, {}, {{-1, 24}});
  const int s2 = t.Op("Concat", {batch_of(flat, 2), t.Const("b", Int64Tensor(Shape{2}, {4, 6}))},
                      {Attribute::Int("axis", 0)}, {{3}}, DataType::kInt64);
  t.Output(t.Op("Reshape", {flat, s2}, {}, {{-1, 4, 6}}));
  const int s3 = t.Op("Concat", {batch_of(flat, 2), t.Const("c", Int64Tensor(Shape{2}, {6, 4}))},
                      {Attribute::Int("axis", 0)}, {{3}}, DataType::kInt64);
  t.Output(t.Op("Reshape", {flat, s3}, {}, {{-1, 6, 4}}));
  const int s4 = t.Op("Concat", {batch_of(r, 3), t.Const("d", Int64Tensor(Shape{2}, {4, 6}))},
                      {Attribute::Int("axis", 0)}, {{3}}, DataType::kInt64);
  t.Output(t.Op("Reshape", {r, s4}, {}, {{-1, 4, 6}}));  // [N,4,6] to [N,4,6]: a no-op
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeAll(g);
  EXPECT_EQ(CountOps(*o.graph, "Shape"), 1) << FormatPassReport(o);
  EXPECT_EQ(CountOps(*o.graph, "Gather"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Unsqueeze"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Reshape"), 3);
  ExpectSameOutputs(*g, *o.graph, 0, 4, /*symbol_value=*/3);
}

TEST(IdentityEliminationTest, RemovesNoOps) {
  TestGraph t(13);
  const int x = t.Input("x", {2, 3});
  int v = t.Op("Identity", {x}, {}, {{2, 3}});
  v = t.OpN("Dropout", {v}, 2, {}, {{2, 3}})[0];
  v = t.Op("Relu", {v}, {}, {{2, 3}});
  v = t.Op("Cast", {v}, {Attribute::Int("to", 1)}, {{2, 3}});
  v = t.Op("Reshape", {v, t.Const("s", Int64Tensor(Shape{2}, {2, 3}))}, {}, {{2, 3}});
  v = t.Op("Transpose", {v}, {Attribute::Ints("perm", {0, 1})}, {{2, 3}});
  t.Output(t.Op("Sigmoid", {v}, {}, {{2, 3}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"identity_elimination"});
  EXPECT_EQ(o.graph->num_nodes(), 2);  // Relu, Sigmoid
  EXPECT_EQ(o.passes[3].changes, 5);   // Identity, Dropout, Cast, Reshape, Transpose
  ExpectSameOutputs(*g, *o.graph, 0);
}

TEST(IdentityEliminationTest, CollapsesTransposeAndReshapeChains) {
  TestGraph t(13);
  const int x = t.Input("x", {2, 3, 4});
  const int a = t.Op("Transpose", {x}, {Attribute::Ints("perm", {1, 2, 0})}, {{3, 4, 2}});
  const int b = t.Op("Transpose", {a}, {Attribute::Ints("perm", {0, 2, 1})}, {{3, 2, 4}});
  const int r1 = t.Op("Reshape", {b, t.Const("s1", Int64Tensor(Shape{2}, {6, 4}))}, {}, {{6, 4}});
  const int r2 =
      t.Op("Reshape", {r1, t.Const("s2", Int64Tensor(Shape{3}, {4, -1, 2}))}, {}, {{4, 3, 2}});
  t.Output(t.Op("Relu", {r2}, {}, {{4, 3, 2}}));
  // A pair that cancels out.
  const int c = t.Op("Transpose", {x}, {Attribute::Ints("perm", {2, 0, 1})}, {{4, 2, 3}});
  const int d = t.Op("Transpose", {c}, {Attribute::Ints("perm", {1, 2, 0})}, {{2, 3, 4}});
  t.Output(t.Op("Neg", {d}, {}, {{2, 3, 4}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"identity_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "Transpose"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Reshape"), 1);
  ExpectSameOutputs(*g, *o.graph, 0);
}

TEST(IdentityEliminationTest, KeepsGraphOutputNames) {
  TestGraph t;
  const int x = t.Input("x", {2});
  const int r = t.Op("Relu", {x}, {}, {{2}});
  const int y = t.Op("Identity", {r}, {}, {{2}});
  t.Output(y);
  t.Output(t.Op("Identity", {x}, {}, {{2}}));  // input -> output: must stay
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"identity_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "Identity"), 1);
  EXPECT_EQ(o.graph->value(o.graph->outputs[0]).name, g->value(y).name);
  EXPECT_EQ(o.graph->node(o.graph->value(o.graph->outputs[0]).producer).op_type, "Relu");
  ExpectSameOutputs(*g, *o.graph, 0);
}

TEST(IdentityEliminationTest, KeepsTrainingDropoutAndUsedMasks) {
  TestGraph t(13);
  const int x = t.Input("x", {4});
  std::vector<int> d = t.OpN("Dropout", {x}, 2, {}, {{4}});
  t.Output(d[0]);
  t.Output(d[1]);  // the mask is read
  OptimizedGraph o = OptimizeOnly(t.Build(), {"identity_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "Dropout"), 1);
}

TEST(IdentityEliminationTest, RemovesTrainingDropoutOfRatioZero) {
  // training_mode true with ratio 0 keeps every element at scale 1: the identity. A non-zero
  // ratio in training mode stays.
  for (float ratio : {0.0f, 0.5f}) {
    TestGraph t(13);
    const int x = t.Input("x", {4});
    std::vector<int> d = t.OpN(
        "Dropout", {x, t.Scalar("ratio", ratio), t.Const("training", BoolTensor(Shape{}, {true}))},
        2, {}, {{4}});
    t.Output(t.Op("Relu", {d[0]}, {}, {{4}}));
    std::shared_ptr<const Graph> g = t.Build();
    OptimizedGraph o = OptimizeOnly(g, {"identity_elimination"});
    EXPECT_EQ(CountOps(*o.graph, "Dropout"), ratio == 0.0f ? 0 : 1) << ratio;
    if (ratio == 0.0f) ExpectSameOutputs(*g, *o.graph, 0);
  }
}

TEST(IdentityEliminationTest, KeepsRealCastsReshapesAndTransposes) {
  TestGraph t(13);
  const int x = t.Input("x", {2, 3});
  t.Output(t.Op("Cast", {x}, {Attribute::Int("to", 7)}, {{2, 3}}, DataType::kInt64));
  t.Output(t.Op("Reshape", {x, t.Const("s", Int64Tensor(Shape{2}, {3, 2}))}, {}, {{3, 2}}));
  t.Output(t.Op("Transpose", {x}, {Attribute::Ints("perm", {1, 0})}, {{3, 2}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"identity_elimination"});
  EXPECT_EQ(o.graph->num_nodes(), 3);
}

TEST(CseTest, MergesIdenticalNodes) {
  TestGraph t;
  const int x = t.Input("x", {3});
  const int a = t.Op("Relu", {x}, {}, {{3}});
  const int b = t.Op("Relu", {x}, {}, {{3}});
  const int e1 = t.Op("Pow", {a, t.Scalar("two", 2)}, {}, {{3}});
  const int e2 = t.Op("Pow", {b, t.Scalar("two_again", 2)}, {}, {{3}});
  t.Output(t.Op("Add", {e1, e2}, {}, {{3}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"common_subexpression_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "Relu"), 1);
  EXPECT_EQ(CountOps(*o.graph, "Pow"), 1);  // needs the two equal constants merged
  ExpectSameOutputs(*g, *o.graph, 0);
}

TEST(CseTest, KeepsNodesThatDiffer) {
  TestGraph t;
  const int x = t.Input("x", {3});
  const int a = t.Op("LeakyRelu", {x}, {FloatAttr("alpha", 0.1f)}, {{3}});
  const int b = t.Op("LeakyRelu", {x}, {FloatAttr("alpha", 0.2f)}, {{3}});
  const int r1 = t.Op("RandomUniformLike", {x}, {}, {{3}});
  const int r2 = t.Op("RandomUniformLike", {x}, {}, {{3}});
  t.Output(t.Op("Sum", {a, b, r1, r2}, {}, {{3}}));
  OptimizedGraph o = OptimizeOnly(t.Build(), {"common_subexpression_elimination"});
  EXPECT_EQ(CountOps(*o.graph, "LeakyRelu"), 2);
  EXPECT_EQ(CountOps(*o.graph, "RandomUniformLike"), 2);
}

TEST(DceTest, RemovesUnreadChains) {
  TestGraph t;
  const int x = t.Input("x", {3});
  const int dead = t.Op("Exp", {t.Op("Neg", {x}, {}, {{3}})}, {}, {{3}});
  (void)dead;
  t.Output(t.Op("Relu", {x}, {}, {{3}}));
  std::shared_ptr<const Graph> g = t.Build();
  OptimizedGraph o = OptimizeOnly(g, {"dead_code_elimination"});
  EXPECT_EQ(o.graph->num_nodes(), 1);
  ExpectSameOutputs(*g, *o.graph, 0);
}

}  // namespace
}  // namespace kiln::opt::testing
