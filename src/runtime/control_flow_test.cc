// SPDX-License-Identifier: Apache-2.0
// If, Loop and Scan on hand-built graphs whose subgraphs read outer-scope values (the ONNX test
// data barely exercises captures). Expected values are worked out in the comments.
#include "runtime/control_flow.h"

#include <gtest/gtest.h>

#include "runtime/session.h"

namespace kiln {
namespace {

ValueType Type(DataType dtype, const std::vector<int64_t>& dims) {
  ValueType t;
  t.dtype = dtype;
  t.has_shape = true;
  for (int64_t d : dims) t.dims.push_back(d >= 0 ? Dim{d, {}} : Dim{});
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
// `x_dims`: x's declared dims (-1: unknown).
std::shared_ptr<Graph> IfModel(std::vector<int64_t> x_dims = {2}) {
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
  const int x = AddValue(*g, "x", Type(DataType::kFloat32, x_dims));
  g->inputs = {cond, x};
  const int out = AddValue(*g, "out");
  AddNode(*g, "If", {cond}, {out},
          {GraphAttr("then_branch", branch("Add")), GraphAttr("else_branch", branch("Sub"))}, {x});
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
    Tensor in[] = {Tensor(DataType::kBool, Shape{}, &cond),
                   Tensor(DataType::kFloat32, Shape{2}, x)};
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

TEST(ControlFlowTest, BodiesPlanTheirMemoryPerSignature) {
  // The Loop body runs once per trip: the first trip of a signature (inputs and captures)
  // records a plan, the others use it; a new capture shape records a second one. Results are
  // those of the unplanned body.
  SessionOptions planned;
  SessionOptions unplanned;
  unplanned.memory_planning = false;
  Result<std::unique_ptr<Session>> s = Session::Create(LoopModel(), planned);
  Result<std::unique_ptr<Session>> u = Session::Create(LoopModel(), unplanned);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  int64_t m = 6;
  bool cond = true;
  float acc = 0, step = 2, limit = 100;
  Tensor in[] = {Tensor(DataType::kInt64, Shape{}, &m), Tensor(DataType::kBool, Shape{}, &cond),
                 Tensor(DataType::kFloat32, Shape{1}, &acc),
                 Tensor(DataType::kFloat32, Shape{1}, &step),
                 Tensor(DataType::kFloat32, Shape{1}, &limit)};
  for (int run = 0; run < 2; ++run) {
    auto got = (*s)->Run(in);
    auto want = (*u)->Run(in);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (size_t i = 0; i < want->size(); ++i) {
      ASSERT_EQ((*got)[i].shape(), (*want)[i].shape());
      for (int64_t k = 0; k < (*want)[i].num_elements(); ++k) {
        EXPECT_EQ((*got)[i].data<float>()[k], (*want)[i].data<float>()[k]);
      }
    }
  }
  // 2 runs x 6 trips: one trip recorded, 11 planned.
  MemoryPlanStats stats = (*s)->memory_plan_stats();
  EXPECT_EQ(stats.subgraph_recorded_runs, 1);
  EXPECT_EQ(stats.subgraph_planned_runs, 11);
  EXPECT_EQ(stats.subgraph_unplanned_runs, 0);
  EXPECT_EQ((*u)->memory_plan_stats().subgraph_planned_runs, 0);
}

TEST(ControlFlowTest, ACapturedValueOfAnotherShapeIsAnotherSignature) {
  // The If branches read x from the outer graph: x [2] and x [1] (broadcast against the
  // branch's constant [2]) record one plan each; a second run of x [2] uses its plan.
  Result<std::unique_ptr<Session>> s = Session::Create(IfModel({-1}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  bool cond = true;
  float x2[2] = {1, 2}, x1[1] = {5};
  Tensor two[] = {Tensor(DataType::kBool, Shape{}, &cond),
                  Tensor(DataType::kFloat32, Shape{2}, x2)};
  Tensor one[] = {Tensor(DataType::kBool, Shape{}, &cond),
                  Tensor(DataType::kFloat32, Shape{1}, x1)};
  ASSERT_TRUE((*s)->Run(two).ok());
  auto out = (*s)->Run(one);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].data<float>()[0], 15.f);  // 5 + 10
  EXPECT_EQ((*out)[0].data<float>()[1], 25.f);  // 5 + 20
  ASSERT_TRUE((*s)->Run(two).ok());
  const MemoryPlanStats stats = (*s)->memory_plan_stats();
  EXPECT_EQ(stats.subgraph_recorded_runs, 2);
  EXPECT_EQ(stats.subgraph_planned_runs, 1);
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

// ---------------------------------------------------------------------------------------------
// Sequences and optionals through If, Loop and SequenceMap.

OwnedTensor FloatTensor(std::vector<float> v) {
  Result<OwnedTensor> t =
      OwnedTensor::Allocate(DataType::kFloat32, Shape{static_cast<int64_t>(v.size())});
  KILN_CHECK(t.ok(), "alloc");
  std::copy(v.begin(), v.end(), t->data<float>());
  return std::move(t).value();
}

RuntimeValue FloatSeq(const std::vector<std::vector<float>>& elements) {
  std::vector<OwnedTensor> tensors;
  tensors.reserve(elements.size());
  for (const auto& e : elements) tensors.push_back(FloatTensor(e));
  Result<TensorSequence> s = TensorSequence::Create(DataType::kFloat32, std::move(tensors));
  KILN_CHECK(s.ok(), s.status().ToString());
  return RuntimeValue(std::move(s).value());
}

RuntimeValue BoolValue(bool b) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kBool, Shape{});
  KILN_CHECK(t.ok(), "alloc");
  *t->data<bool>() = b;
  return RuntimeValue(std::move(t).value());
}

RuntimeValue Int64Value(int64_t v) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, Shape{});
  KILN_CHECK(t.ok(), "alloc");
  *t->data<int64_t>() = v;
  return RuntimeValue(std::move(t).value());
}

// The elements of a sequence of floats, as vectors.
std::vector<std::vector<float>> Elements(const RuntimeValue& v) {
  std::vector<std::vector<float>> out;
  if (!v.is_sequence()) return out;
  for (const OwnedTensor& t : v.sequence().elements()) {
    out.emplace_back(t.data<const float>(), t.data<const float>() + t.num_elements());
  }
  return out;
}

Attribute TypeAttr(ValueType t) {
  Attribute a;
  a.name = "type";
  a.type = AttributeType::kTypeProto;
  a.tp = std::make_shared<const ValueType>(std::move(t));
  return a;
}

ValueType SeqOf(DataType dtype) {
  ValueType e;
  e.dtype = dtype;
  return ValueType::Sequence(e);
}

// If: then = (SequenceInsert(s, x), Optional(s)); else = (SequenceErase(s), none). `s` and `x`
// are captured from the main graph.
TEST(ControlFlowValuesTest, IfBranchesProduceSequencesAndOptionals) {
  auto then_branch = NewGraph("then");
  {
    const int s = AddValue(*then_branch, "s");
    const int x = AddValue(*then_branch, "x");
    const int out = AddValue(*then_branch, "then_seq");
    AddNode(*then_branch, "SequenceInsert", {s, x}, {out});
    const int opt = AddValue(*then_branch, "then_opt");
    AddNode(*then_branch, "Optional", {s}, {opt});
    then_branch->outputs = {out, opt};
  }
  auto else_branch = NewGraph("else");
  {
    const int s = AddValue(*else_branch, "s");
    const int out = AddValue(*else_branch, "else_seq");
    AddNode(*else_branch, "SequenceErase", {s}, {out});
    const int opt = AddValue(*else_branch, "else_opt");
    AddNode(*else_branch, "Optional", {}, {opt}, {TypeAttr(SeqOf(DataType::kFloat32))});
    else_branch->outputs = {out, opt};
  }
  auto g = NewGraph("main");
  const int cond = AddValue(*g, "cond", Type(DataType::kBool, {}));
  const int s = AddValue(*g, "s", SeqOf(DataType::kFloat32));
  const int x = AddValue(*g, "x", Type(DataType::kFloat32, {1}));
  g->inputs = {cond, s, x};
  const int seq_out = AddValue(*g, "seq_out");
  const int opt_out = AddValue(*g, "opt_out");
  AddNode(*g, "If", {cond}, {seq_out, opt_out},
          {GraphAttr("then_branch", then_branch), GraphAttr("else_branch", else_branch)}, {s, x});
  g->outputs = {seq_out, opt_out};
  Result<std::unique_ptr<Session>> session = Session::Create(g);
  ASSERT_TRUE(session.ok()) << session.status().ToString();

  const RuntimeValue seq = FloatSeq({{1, 2}, {3}});
  for (bool c : {true, false}) {
    std::vector<RuntimeValue> in = {BoolValue(c), seq, RuntimeValue(FloatTensor({9}))};
    Result<std::vector<RuntimeValue>> out = (*session)->RunValues(in);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    if (c) {
      EXPECT_EQ(Elements((*out)[0]), (std::vector<std::vector<float>>{{1, 2}, {3}, {9}}));
      EXPECT_EQ(Elements((*out)[1]), (std::vector<std::vector<float>>{{1, 2}, {3}}));
    } else {
      EXPECT_EQ(Elements((*out)[0]), (std::vector<std::vector<float>>{{1, 2}}));
      EXPECT_TRUE((*out)[1].is_none());
    }
  }
}

// Loop over M = 3 trips carrying a sequence and an optional:
//   seq_{i+1} = SequenceInsert(seq_i, x)   (x captured); scan output: SequenceLength(seq_{i+1})
//   opt_{i+1} = Identity(opt_i)            (none stays none)
std::shared_ptr<Graph> SequenceLoopModel(bool sequence_scan_output) {
  auto body = NewGraph("body");
  const int iter = AddValue(*body, "iter", Type(DataType::kInt64, {}));
  const int cond_in = AddValue(*body, "cond_in", Type(DataType::kBool, {}));
  const int seq_in = AddValue(*body, "seq_in", SeqOf(DataType::kFloat32));
  const int opt_in = AddValue(*body, "opt_in", ValueType::Optional(SeqOf(DataType::kFloat32)));
  body->inputs = {iter, cond_in, seq_in, opt_in};
  const int x = AddValue(*body, "x");  // captured
  const int cond_out = AddValue(*body, "cond_out");
  AddNode(*body, "Identity", {cond_in}, {cond_out});
  const int seq_out = AddValue(*body, "seq_out");
  AddNode(*body, "SequenceInsert", {seq_in, x}, {seq_out});
  const int opt_out = AddValue(*body, "opt_out");
  AddNode(*body, "Identity", {opt_in}, {opt_out});
  int scan = AddValue(*body, "len");
  AddNode(*body, "SequenceLength", {seq_out}, {scan});
  if (sequence_scan_output) scan = seq_out;
  body->outputs = {cond_out, seq_out, opt_out, scan};

  auto g = NewGraph("main");
  const int m = AddValue(*g, "M", Type(DataType::kInt64, {}));
  const int seq = AddValue(*g, "seq", SeqOf(DataType::kFloat32));
  const int opt = AddValue(*g, "opt", ValueType::Optional(SeqOf(DataType::kFloat32)));
  const int x_v = AddValue(*g, "x", Type(DataType::kFloat32, {1}));
  g->inputs = {m, seq, opt, x_v};
  const int final_seq = AddValue(*g, "final_seq");
  const int final_opt = AddValue(*g, "final_opt");
  const int lengths = AddValue(*g, "lengths");
  AddNode(*g, "Loop", {m, kNoValue, seq, opt}, {final_seq, final_opt, lengths},
          {GraphAttr("body", body)}, {x_v});
  g->outputs = {final_seq, final_opt, lengths};
  return g;
}

TEST(ControlFlowValuesTest, LoopCarriesSequencesAndNones) {
  Result<std::unique_ptr<Session>> session = Session::Create(SequenceLoopModel(false));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<RuntimeValue> in = {Int64Value(3), RuntimeValue(TensorSequence(DataType::kFloat32)),
                                  RuntimeValue::None(), RuntimeValue(FloatTensor({7}))};
  Result<std::vector<RuntimeValue>> out = (*session)->RunValues(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Elements((*out)[0]), (std::vector<std::vector<float>>{{7}, {7}, {7}}));
  EXPECT_TRUE((*out)[1].is_none());
  ASSERT_TRUE((*out)[2].is_tensor());
  const OwnedTensor& lengths = (*out)[2].tensor();
  ASSERT_EQ(lengths.shape(), (Shape{3}));
  EXPECT_EQ(lengths.data<int64_t>()[0], 1);
  EXPECT_EQ(lengths.data<int64_t>()[2], 3);

  // Zero trips: the initial values come out unchanged; a sequence initial value stays typed.
  in[0] = Int64Value(0);
  in[2] = FloatSeq({{1}});
  out = (*session)->RunValues(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE((*out)[0].is_sequence());
  EXPECT_EQ((*out)[0].sequence().size(), 0);
  EXPECT_EQ((*out)[0].sequence().elem_dtype(), DataType::kFloat32);
  EXPECT_EQ(Elements((*out)[1]), (std::vector<std::vector<float>>{{1}}));

  // Scan outputs must be tensors.
  Result<std::unique_ptr<Session>> bad = Session::Create(SequenceLoopModel(true));
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  in[0] = Int64Value(1);
  Result<std::vector<RuntimeValue>> r = (*bad)->RunValues(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "Loop: scan output 0 of the body must be a tensor, got a sequence of 1 FP32"),
            std::string::npos)
      << r.status().message();
}

// SequenceMap over (a, b, c): a and b sequences walked together, c a tensor given whole.
//   sum_i = a_i + b_i + c;  shape_i = Shape(a_i)
std::shared_ptr<Graph> SequenceMapModel(ValueType sum_type, ValueType shape_out_type) {
  auto body = NewGraph("body");
  body->opset_imports[""] = 17;
  const int a = AddValue(*body, "a_i");
  const int b = AddValue(*body, "b_i");
  const int c = AddValue(*body, "c_in");
  body->inputs = {a, b, c};
  const int ab = AddValue(*body, "ab");
  AddNode(*body, "Add", {a, b}, {ab});
  const int sum = AddValue(*body, "sum", std::move(sum_type));
  AddNode(*body, "Add", {ab, c}, {sum});
  const int shape = AddValue(*body, "shape");
  AddNode(*body, "Shape", {a}, {shape});
  body->outputs = {sum, shape};

  auto g = NewGraph("main");
  g->opset_imports[""] = 17;
  const int a_v = AddValue(*g, "a");
  const int b_v = AddValue(*g, "b");
  const int c_v = AddValue(*g, "c");
  g->inputs = {a_v, b_v, c_v};
  const int sums = AddValue(*g, "sums");
  const int shapes = AddValue(*g, "shapes", std::move(shape_out_type));
  AddNode(*g, "SequenceMap", {a_v, b_v, c_v}, {sums, shapes}, {GraphAttr("body", body)});
  g->outputs = {sums, shapes};
  return g;
}

TEST(ControlFlowValuesTest, SequenceMapRunsTheBodyPerElement) {
  Result<std::unique_ptr<Session>> s = Session::Create(SequenceMapModel({}, {}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->provider(0), "runtime");
  const RuntimeValue a = FloatSeq({{1, 2, 3}, {4}});
  const RuntimeValue b = FloatSeq({{10, 20, 30}, {40}});
  std::vector<RuntimeValue> in = {a, b, RuntimeValue(FloatTensor({100}))};
  Result<std::vector<RuntimeValue>> out = (*s)->RunValues(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Elements((*out)[0]), (std::vector<std::vector<float>>{{111, 122, 133}, {144}}));
  ASSERT_TRUE((*out)[1].is_sequence());
  ASSERT_EQ((*out)[1].sequence().size(), 2);
  EXPECT_EQ((*out)[1].sequence().elem_dtype(), DataType::kInt64);
  EXPECT_EQ((*out)[1].sequence().at(0).data<int64_t>()[0], 3);
  EXPECT_EQ((*out)[1].sequence().at(1).data<int64_t>()[0], 1);

  // Sequences of different lengths, and a tensor where the sequence to walk belongs.
  in = {a, FloatSeq({{1}}), RuntimeValue(FloatTensor({0}))};
  Result<std::vector<RuntimeValue>> r = (*s)->RunValues(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("SequenceMap: input 1 has 1 elements but input 0 has 2"),
            std::string::npos)
      << r.status().message();
  in = {RuntimeValue(FloatTensor({1})), b, RuntimeValue(FloatTensor({0}))};
  r = (*s)->RunValues(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("SequenceMap: input 0 must be a sequence, got a tensor"),
            std::string::npos)
      << r.status().message();
  in = {a, b, RuntimeValue::None()};
  r = (*s)->RunValues(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 2 must be a sequence or a tensor, got none"),
            std::string::npos)
      << r.status().message();

  // An empty input: each output is an empty sequence of its declared element type, which must
  // be known (from the body's output or the node's output type).
  in = {RuntimeValue(TensorSequence(DataType::kFloat32)),
        RuntimeValue(TensorSequence(DataType::kFloat32)), RuntimeValue(FloatTensor({0}))};
  r = (*s)->RunValues(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output 0 is an empty sequence whose element type the "
                                      "model does not declare"),
            std::string::npos)
      << r.status().message();
  Result<std::unique_ptr<Session>> typed =
      Session::Create(SequenceMapModel(Type(DataType::kFloat32, {1}), SeqOf(DataType::kInt64)));
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  out = (*typed)->RunValues(in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].sequence().elem_dtype(), DataType::kFloat32);
  EXPECT_EQ((*out)[0].sequence().size(), 0);
  EXPECT_EQ((*out)[1].sequence().elem_dtype(), DataType::kInt64);
}

TEST(ControlFlowValuesTest, SequenceMapBodyMustMatchTheNode) {
  auto body = NewGraph("body");
  body->opset_imports[""] = 17;
  const int a = AddValue(*body, "a_i");
  body->inputs = {a};
  body->outputs = {a};
  auto g = NewGraph("main");
  g->opset_imports[""] = 17;
  const int a_v = AddValue(*g, "a");
  const int b_v = AddValue(*g, "b");
  g->inputs = {a_v, b_v};
  const int out = AddValue(*g, "out");
  AddNode(*g, "SequenceMap", {a_v, b_v}, {out}, {GraphAttr("body", body)});
  g->outputs = {out};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("the node has 2 inputs but the body takes 1"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace kiln
