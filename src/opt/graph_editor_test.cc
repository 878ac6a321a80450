// SPDX-License-Identifier: Apache-2.0
// GraphEditor: use lists, Bypass (with and without a graph output in the way), and Finish
// (dead nodes and unused values dropped, topological order restored, ids renumbered).

#include "opt/graph_editor.h"

#include <gtest/gtest.h>

#include "opt/opt_test_util.h"

namespace kiln::opt::testing {
namespace {

TEST(GraphEditorTest, FinishRestoresTopologicalOrderAndDropsDeadParts) {
  TestGraph t;
  const int x = t.Input("x", {2});
  const int a = t.Op("Relu", {x}, {}, {{2}});
  const int b = t.Op("Neg", {a}, {}, {{2}});
  t.Output(b);
  t.Const("unused", FloatTensor(Shape{1}, {1}));
  GraphEditor ed(*t.Build());
  EXPECT_EQ(ed.Consumers(a), std::vector<int>{1});
  // Replace Relu by a Sigmoid appended after its reader.
  Node sig;
  sig.name = "sig";
  sig.op_type = "Sigmoid";
  sig.inputs = {x};
  sig.outputs = {a};
  ed.RemoveNode(0);
  EXPECT_TRUE(ed.Consumers(x).empty());
  ed.AddNode(sig);
  EXPECT_EQ(ed.Producer(a), 2);
  Result<Graph> g = ed.Finish();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 2);
  EXPECT_EQ(g->node(0).op_type, "Sigmoid");
  EXPECT_EQ(g->node(1).op_type, "Neg");
  EXPECT_EQ(g->FindValue("unused"), -1);
  EXPECT_TRUE(VerifyGraph(*g).ok());
}

TEST(GraphEditorTest, BypassKeepsTheOutputName) {
  TestGraph t;
  const int x = t.Input("x", {2});
  const int a = t.Op("Relu", {x}, {}, {{2}});
  const int y = t.Op("Identity", {a}, {}, {{2}});
  t.Output(y);
  t.Output(t.Op("Neg", {a}, {}, {{2}}));
  GraphEditor ed(*t.Build());
  ASSERT_TRUE(ed.Bypass(1, a, y));
  // The Relu now writes y and the Neg reads y.
  EXPECT_EQ(ed.node(0).outputs[0], y);
  EXPECT_EQ(ed.node(2).inputs[0], y);
  Result<Graph> g = ed.Finish();
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->value(g->outputs[0]).name, t.graph().value(y).name);
  EXPECT_EQ(g->FindValue(t.graph().value(a).name), -1);
}

TEST(GraphEditorTest, BypassRefusesAGraphInputFeedingAGraphOutput) {
  TestGraph t;
  const int x = t.Input("x", {2});
  const int y = t.Op("Identity", {x}, {}, {{2}});
  t.Output(y);
  GraphEditor ed(*t.Build());
  EXPECT_FALSE(ed.Bypass(0, x, y));
  EXPECT_TRUE(ed.alive(0));
}

TEST(GraphEditorTest, FinishReportsTwoProducers) {
  TestGraph t;
  const int x = t.Input("x", {2});
  const int a = t.Op("Relu", {x}, {}, {{2}});
  t.Output(a);
  GraphEditor ed(*t.Build());
  Node dup;
  dup.op_type = "Neg";
  dup.inputs = {x};
  dup.outputs = {a};
  ed.AddNode(dup);
  Result<Graph> g = ed.Finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInternal);
  EXPECT_NE(g.status().message().find("produced twice"), std::string::npos);
}

}  // namespace
}  // namespace kiln::opt::testing
