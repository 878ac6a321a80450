// SPDX-License-Identifier: Apache-2.0
// If, Loop and Scan on hand-built graphs whose subgraphs read outer-scope values (the ONNX test
// data barely exercises captures). Expected values are worked out in the comments.
#include "runtime/control_flow.h"

#include <gtest/gtest.h>

#include "runtime/session.h"

namespace kiln {
namespace {

ValueType Type(DataType dtype, std::vector<int64_t> dims) {
  ValueType t;
  t.dtype = dtype;
  t.has_shape = true;
  for (int64_t d : dims) t.dims.push_back(Dim{d, {}});
  return t;
}

int AddValue(Graph& g, const std::string& name, ValueType type = {}) {
  return g.AddValue({name, std::move(type), -1, nullptr});
}

int AddConstant(Graph& g, const std::string& name, std::vector<float> data) {
  auto t = OwnedTensor::Allocate(DataType::kFloat32, Shape{static_cast<int64_t>(data.size())});
  KILN_CHECK(t.ok(), "alloc");
  std::copy(data.begin(), data.end(), t->data<float>());
  return g.AddValue({name, Type(DataType::kFloat32, {static_cast<int64_t>(data.size())}), -1,
                     std::make_shared<const OwnedTensor>(std::move(*t))});
}

void AddNode(Graph& g, const std::string& op, std::vector<int> in, std::vector<int> out,
             std::vector<Attribute> attrs = {}, std::vector<int> implicit = {}) {
  Node n;
  n.name = op + std::to_string(g.num_nodes());
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  n.implicit_inputs = std::move(implicit);
  g.AddNode(std::move(n));
}

Attribute GraphAttr(const std::string& name, std::shared_ptr<Graph> g) {
  Attribute a;
  a.name = name;
  a.type = AttributeType::kGraph;
  a.g = std::move(g);
  return a;
}

Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = AttributeType::kInt;
  a.i = v;
  return a;
}

Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.type = AttributeType::kInts;
  a.ints = std::move(v);
  return a;
}

std::shared_ptr<Graph> NewGraph(const std::string& name) {
  auto g = std::make_shared<Graph>();
  g->name = name;
  g->opset_imports[""] = 16;
  return g;
}

// If: then = x + c (x captured from the outer graph), else = x - c.
std::shared_ptr<Graph> IfModel() {
  auto branch = [](const std::string& op) {
    auto b = NewGraph(op);
    const int x = AddValue(*b, "x");  // captured
    const int c = AddConstant(*b, "c_" + op, {10, 20});
    const int y = AddValue(*b, "y_" + op);
    AddNode(*b, op, {x, c}, {y});
    b->outputs = {y};
    return b;
  };
  auto g = NewGraph("main");
  const int cond = AddValue(*g, "cond", Type(DataType::kBool, {}));
  const int x = AddValue(*g, "x", Type(DataType::kFloat32, {2}));
  g->inputs = {cond, x};
  const int out = AddValue(*g, "out");
  AddNode(*g, "If", {cond}, {out},
          {GraphAttr("then_branch", branch("Add")), GraphAttr("else_branch", branch("Sub"))},
          {x});
  g->outputs = {out};
  return g;
}

TEST(ControlFlowTest, IfRunsTheChosenBranchWithCapturedValues) {
  Result<std::unique_ptr<Session>> s = Session::Create(IfModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->provider(0), "runtime");
  float x[2] = {1, 2};
  for (bool c : {true, false}) {
    bool cond = c;
    Tensor in[] = {Tensor(DataType::kBool, Shape{}, &cond), Tensor(DataType::kFloat32, Shape{2}, x)};
    auto out = (*s)->Run(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    // then: [1+10, 2+20] = [11, 22]; else: [1-10, 2-20] = [-9, -18]
    EXPECT_EQ((*out)[0].data<float>()[0], c ? 11.f : -9.f);
    EXPECT_EQ((*out)[0].data<float>()[1], c ? 22.f : -18.f);
  }
  int32_t bad = 1;
  Tensor in[] = {Tensor(DataType::kInt32, Shape{}, &bad), Tensor(DataType::kFloat32, Shape{2}, x)};
  EXPECT_FALSE((*s)->Run(in).ok());
}

// Loop: acc_{i+1} = acc_i + step (step captured), scan output = acc after each iteration;
// stops when the body's cond (acc < limit, computed as Less) turns false or after M trips.
std::shared_ptr<Graph> LoopModel() {
  auto body = NewGraph("body");
  const int iter = AddValue(*body, "iter", Type(DataType::kInt64, {}));
  const int cond_in = AddValue(*body, "cond_in", Type(DataType::kBool, {}));
  const int acc_in = AddValue(*body, "acc_in", Type(DataType::kFloat32, {1}));
  body->inputs = {iter, cond_in, acc_in};
  const int step = AddValue(*body, "step");    // captured
  const int limit = AddValue(*body, "limit");  // captured
  const int acc_out = AddValue(*body, "acc_out");
  AddNode(*body, "Add", {acc_in, step}, {acc_out});
  const int cond_out = AddValue(*body, "cond_out");
  AddNode(*body, "Less", {acc_out, limit}, {cond_out});
  const int scan = AddValue(*body, "scan");
  AddNode(*body, "Identity", {acc_out}, {scan});
  body->outputs = {cond_out, acc_out, scan};

  auto g = NewGraph("main");
  const int m = AddValue(*g, "M", Type(DataType::kInt64, {}));
  const int cond = AddValue(*g, "cond", Type(DataType::kBool, {}));
  const int acc = AddValue(*g, "acc", Type(DataType::kFloat32, {1}));
  const int step_v = AddValue(*g, "step", Type(DataType::kFloat32, {1}));
  const int limit_v = AddValue(*g, "limit", Type(DataType::kFloat32, {1}));
  g->inputs = {m, cond, acc, step_v, limit_v};
  const int final_acc = AddValue(*g, "final");
  const int scans = AddValue(*g, "scans");
  AddNode(*g, "Loop", {m, cond, acc}, {final_acc, scans}, {GraphAttr("body", body)},
          {step_v, limit_v});
  g->outputs = {final_acc, scans};
  return g;
}

TEST(ControlFlowTest, LoopCarriesValuesCollectsScanOutputsAndStops) {
  Result<std::unique_ptr<Session>> s = Session::Create(LoopModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  struct Case {
    int64_t m;
    float limit;
    std::vector<float> scans;  // acc after each trip, from acc = 0 and step = 2
  };
  // limit 5: trips give 2 (2<5 go on), 4 (go on), 6 (6<5 false: stop) -> 3 trips.
  // limit 100, M 2: two trips (2, 4). M 0: no trip, empty scan, final = initial 0.
  const Case cases[] = {{10, 5, {2, 4, 6}}, {2, 100, {2, 4}}, {0, 100, {}}};
  for (const Case& c : cases) {
    int64_t m = c.m;
    bool cond = true;
    float acc = 0, step = 2, limit = c.limit;
    Tensor in[] = {Tensor(DataType::kInt64, Shape{}, &m), Tensor(DataType::kBool, Shape{}, &cond),
                   Tensor(DataType::kFloat32, Shape{1}, &acc),
                   Tensor(DataType::kFloat32, Shape{1}, &step),
                   Tensor(DataType::kFloat32, Shape{1}, &limit)};
    auto out = (*s)->Run(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const float want_final = c.scans.empty() ? 0.f : c.scans.back();
    EXPECT_EQ((*out)[0].data<float>()[0], want_final);
    ASSERT_EQ((*out)[1].num_elements(), static_cast<int64_t>(c.scans.size()));
    if (!c.scans.empty()) {
      EXPECT_EQ((*out)[1].shape(), (Shape{static_cast<int64_t>(c.scans.size()), 1}));
    }
    for (size_t i = 0; i < c.scans.size(); ++i) {
      EXPECT_EQ((*out)[1].data<float>()[i], c.scans[i]);
    }
  }
}

// Scan (opset 16): running sum over the rows of X (axis 0), scanned in reverse, with an offset
// captured from the outer graph added to each scan output.
TEST(ControlFlowTest, ScanReverseWithCapture) {
  auto body = NewGraph("body");
  const int sum_in = AddValue(*body, "sum_in", Type(DataType::kFloat32, {2}));
  const int row = AddValue(*body, "row", Type(DataType::kFloat32, {2}));
  body->inputs = {sum_in, row};
  const int offset = AddValue(*body, "offset");  // captured
  const int sum_out = AddValue(*body, "sum_out");
  AddNode(*body, "Add", {sum_in, row}, {sum_out});
  const int shifted = AddValue(*body, "shifted");
  AddNode(*body, "Add", {sum_out, offset}, {shifted});
  body->outputs = {sum_out, shifted};

  auto g = NewGraph("main");
  const int init = AddValue(*g, "init", Type(DataType::kFloat32, {2}));
  const int x = AddValue(*g, "X", Type(DataType::kFloat32, {3, 2}));
  const int off = AddValue(*g, "offset", Type(DataType::kFloat32, {2}));
  g->inputs = {init, x, off};
  const int final_sum = AddValue(*g, "final");
  const int ys = AddValue(*g, "ys");
  AddNode(*g, "Scan", {init, x}, {final_sum, ys},
          {GraphAttr("body", body), IntAttr("num_scan_inputs", 1),
           IntsAttr("scan_input_directions", {1})},
          {off});
  g->outputs = {final_sum, ys};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();

  float in0[2] = {0, 0}, xs[6] = {1, 2, 3, 4, 5, 6}, o[2] = {100, 200};
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{2}, in0),
                 Tensor(DataType::kFloat32, Shape{3, 2}, xs),
                 Tensor(DataType::kFloat32, Shape{2}, o)};
  auto out = (*s)->Run(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Rows in reverse: [5,6] -> sum [5,6]; [3,4] -> [8,10]; [1,2] -> [9,12].
  EXPECT_EQ((*out)[0].data<float>()[0], 9.f);
  EXPECT_EQ((*out)[0].data<float>()[1], 12.f);
  // Scan outputs in iteration order plus the offset: [105,206], [108,210], [109,212].
  const float want[6] = {105, 206, 108, 210, 109, 212};
  ASSERT_EQ((*out)[1].shape(), (Shape{3, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ((*out)[1].data<float>()[i], want[i]) << i;
}

TEST(ControlFlowTest, BadSubgraphsFailAtLoad) {
  // A body with an unsupported op fails the whole session, naming the subgraph.
  auto body = NewGraph("body");
  const int a = AddValue(*body, "iter", Type(DataType::kInt64, {}));
  const int b = AddValue(*body, "cond_in", Type(DataType::kBool, {}));
  body->inputs = {a, b};
  const int c = AddValue(*body, "c");
  AddNode(*body, "NoSuchOp", {b}, {c});
  body->outputs = {c};
  auto g = NewGraph("main");
  const int m = AddValue(*g, "M", Type(DataType::kInt64, {}));
  g->inputs = {m};
  AddNode(*g, "Loop", {m, kNoValue}, {}, {GraphAttr("body", body)});
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("subgraph 'body'"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("op NoSuchOp (opset 16) is not supported"),
            std::string::npos);

  // A missing graph attribute.
  auto g2 = NewGraph("main");
  const int cond = AddValue(*g2, "cond", Type(DataType::kBool, {}));
  g2->inputs = {cond};
  AddNode(*g2, "If", {cond}, {});
  Result<std::unique_ptr<Session>> s2 = Session::Create(g2);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.status().message().find("graph attribute 'then_branch' is missing"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
