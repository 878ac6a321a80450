// SPDX-License-Identifier: Apache-2.0
// Tests for the version adapter: the step table against libonnx's schema registry, and each
// rewrite on a small old-opset model (built with the onnx protobuf API and imported, so the
// checker, shape inference and the importer's hook all take part) or, for inputs the checker
// refuses, on a Graph built directly. Each converted model also runs through a Session, against
// expected values computed here.

#include "graph/onnx/version_adapter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/onnx/importer.h"
#include "graph/onnx/onnx_test_util.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "runtime/session.h"

namespace kiln {
namespace {

using ::kiln::testing::SetFloat;
using ::kiln::testing::SetInt;
using ::kiln::testing::SetInts;
using ::kiln::testing::SetString;
using onnx::AttributeProto;
using onnx::TensorProto;

// ---------------------------------------------------------------------------------------------
// Model building.

onnx::ModelProto NewModel(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(3);
  m.set_producer_name("kiln version_adapter_test");
  onnx::OperatorSetIdProto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void SetType(onnx::ValueInfoProto* vi, int32_t elem, const std::vector<int64_t>& dims) {
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  onnx::TensorShapeProto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

void AddInput(onnx::GraphProto* g, const std::string& name, int32_t elem,
              const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto* vi = g->add_input();
  vi->set_name(name);
  SetType(vi, elem, dims);
}

void AddOutput(onnx::GraphProto* g, const std::string& name, int32_t elem,
               const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto* vi = g->add_output();
  vi->set_name(name);
  SetType(vi, elem, dims);
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  return n;
}

void AddFloatInitializer(onnx::GraphProto* g, const std::string& name,
                         const std::vector<int64_t>& dims, const std::vector<float>& values) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  // Opset 1-6 models list initializers among the graph inputs.
  AddInput(g, name, TensorProto::FLOAT, dims);
}

void AddInt64Initializer(onnx::GraphProto* g, const std::string& name,
                         const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
  AddInput(g, name, TensorProto::INT64, dims);
}

Result<std::shared_ptr<Graph>> Import(const onnx::ModelProto& m) {
  return ImportOnnxModelFromString(m.SerializeAsString(), "old.onnx");
}

std::shared_ptr<Graph> ImportOk(const onnx::ModelProto& m) {
  Result<std::shared_ptr<Graph>> g = Import(m);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

void ExpectError(const Result<std::shared_ptr<Graph>>& g, StatusCode code,
                 const std::vector<std::string>& parts) {
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), code) << g.status().ToString();
  for (const std::string& part : parts) {
    EXPECT_NE(g.status().message().find(part), std::string::npos)
        << "missing '" << part << "' in: " << g.status().ToString();
  }
}

// ---------------------------------------------------------------------------------------------
// Inspecting and running adapted graphs.

const Node& NodeOfType(const Graph& g, std::string_view op) {
  for (const Node& n : g.nodes()) {
    if (n.op_type == op) return n;
  }
  KILN_CHECK(false, "no node of type ", op);
  return g.node(0);
}

int CountNodes(const Graph& g, std::string_view op) {
  int count = 0;
  for (const Node& n : g.nodes()) count += n.op_type == op ? 1 : 0;
  return count;
}

std::set<std::string> AttributeNames(const Node& n) {
  std::set<std::string> names;
  for (const Attribute& a : n.attributes) names.insert(a.name);
  return names;
}

std::vector<int64_t> DimsOf(const Value& v) {
  std::vector<int64_t> dims;
  for (const Dim& d : v.type.dims) dims.push_back(d.value);
  return dims;
}

template <typename T>
OwnedTensor MakeTensor(const Shape& shape, const std::vector<T>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataTypeOf<T>(), shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  KILN_CHECK(static_cast<int64_t>(values.size()) == shape.NumElements(), "value count");
  std::copy(values.begin(), values.end(), t->data<T>());
  return std::move(t).value();
}

template <typename T>
std::vector<T> ToVector(const OwnedTensor& t) {
  const T* p = t.data<const T>();
  return std::vector<T>(p, p + t.num_elements());
}

std::vector<float> Iota(int64_t n, float start = 0, float step = 1) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// Runs `g` (a Session built from it) on `inputs`; fails the test on any error.
std::vector<OwnedTensor> RunGraph(const std::shared_ptr<Graph>& g,
                                  const std::vector<OwnedTensor>& inputs) {
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  std::vector<Tensor> feeds;
  for (const OwnedTensor& t : inputs) feeds.push_back(t.view());
  Result<std::vector<OwnedTensor>> out = (*s)->Run(feeds);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<OwnedTensor>{};
}

template <typename T>
void ExpectValues(const std::vector<OwnedTensor>& outputs, size_t i,
                  const std::vector<int64_t>& dims, const std::vector<T>& expected,
                  double tolerance = 1e-6) {
  ASSERT_GT(outputs.size(), i);
  EXPECT_EQ(outputs[i].shape(), Shape(std::span<const int64_t>(dims)));
  const std::vector<T> got = ToVector<T>(outputs[i]);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t k = 0; k < got.size(); ++k) {
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_NEAR(got[k], expected[k], tolerance) << "element " << k;
    } else {
      EXPECT_EQ(got[k], expected[k]) << "element " << k;
    }
  }
}

// A one-node Graph built directly (for nodes the ONNX checker would refuse): inputs named
// in0.. with the given types (no shape when `ranked` is false) and one output.
struct DirectInput {
  DataType dtype;
  std::vector<int64_t> dims;
  bool ranked = true;
  std::shared_ptr<const OwnedTensor> constant = nullptr;
};

std::shared_ptr<Graph> DirectGraph(int64_t opset, const std::string& op,
                                   const std::vector<DirectInput>& inputs,
                                   std::vector<Attribute> attributes,
                                   const std::string& node_name = "n") {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  Node node;
  node.name = node_name;
  node.op_type = op;
  node.attributes = std::move(attributes);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value v;
    v.name = "in" + std::to_string(i);
    v.type.dtype = inputs[i].dtype;
    v.type.has_shape = inputs[i].ranked;
    for (int64_t d : inputs[i].dims) v.type.dims.push_back(Dim{d, {}});
    v.constant = inputs[i].constant;
    const int id = g->AddValue(std::move(v));
    if (!inputs[i].constant) g->inputs.push_back(id);
    node.inputs.push_back(id);
  }
  Value out;
  out.name = "out";
  const int out_id = g->AddValue(std::move(out));
  node.outputs.push_back(out_id);
  g->outputs.push_back(out_id);
  g->AddNode(std::move(node));
  return g;
}

// ---------------------------------------------------------------------------------------------
// The step table.

TEST(VersionAdapterTest, StepsCoverEverySchemaChangeBeforeOpset7) {
  // Schema versions of every default-domain op, from the registry.
  std::map<std::string, std::set<int>> versions;
  for (const onnx::OpSchema& s : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    if (s.domain() == onnx::ONNX_DOMAIN) versions[s.Name()].insert(s.since_version());
  }
  std::set<std::pair<std::string, int>> steps;
  for (const auto& step : VersionAdapterSteps()) {
    EXPECT_TRUE(steps.insert(step).second) << "duplicate step " << step.first << " " << step.second;
    ASSERT_TRUE(versions.count(step.first)) << step.first;
    EXPECT_TRUE(versions[step.first].count(step.second))
        << step.first << " has no schema version " << step.second;
    EXPECT_LT(step.second, kAdaptedOpset) << step.first;
  }
  // Every schema version in force at an opset below 7 that differs from the version at opset 7
  // has a step, and nothing else does.
  std::set<std::pair<std::string, int>> needed;
  for (const auto& [op, vs] : versions) {
    auto at = [&op_versions = vs](int opset) {  // (clang 14 cannot capture a structured binding)
      int v = 0;
      for (int x : op_versions) {
        if (x <= opset) v = x;
      }
      return v;
    };
    const int target = at(kAdaptedOpset);
    for (int x : vs) {
      if (x < target) needed.insert({op, x});
    }
  }
  EXPECT_EQ(steps, needed);
}

TEST(VersionAdapterTest, GraphsAtOpset7OrLaterAreReturnedAsTheyAre) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 7;
  Result<std::shared_ptr<Graph>> out = AdaptToOpset7(g);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->get(), g.get());

  auto other = std::make_shared<Graph>();
  other->opset_imports["ai.onnx.ml"] = 1;
  out = AdaptToOpset7(other);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->get(), other.get());
}

TEST(VersionAdapterTest, UnchangedOpsOnlyGetTheNewOpset) {
  // Softplus has one schema (opset 1): the node is copied as it is.
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {3});
  AddNode(g, "Softplus", {"x"}, {"y"}, "sp");
  AddOutput(g, "y", TensorProto::FLOAT, {3});
  m.mutable_opset_import()->Add()->set_domain("ai.onnx.ml");
  m.mutable_opset_import(1)->set_version(1);
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->opset_imports, (std::map<std::string, int64_t>{{"", 7}, {"ai.onnx.ml", 1}}));
  ASSERT_EQ(graph->num_nodes(), 1);
  EXPECT_TRUE(graph->node(0).attributes.empty());
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({3}, {-1, 0, 2})});
  ExpectValues<float>(out, 0, {3},
                      {std::log1p(std::exp(-1.0f)), std::log(2.0f), std::log1p(std::exp(2.0f))});
}

// ---------------------------------------------------------------------------------------------
// consumed_inputs.

TEST(VersionAdapterTest, ConsumedInputsIsDropped) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {4});
  SetInts(AddNode(g, "Relu", {"x"}, {"r"}, "relu"), "consumed_inputs", {0});
  onnx::NodeProto* lr = AddNode(g, "LeakyRelu", {"r"}, {"l"}, "leaky");
  SetInts(lr, "consumed_inputs", {0});
  SetFloat(lr, "alpha", 0.5f);
  onnx::NodeProto* mx = AddNode(g, "Max", {"x", "l"}, {"y"}, "max");
  SetInts(mx, "consumed_inputs", {0, 0});
  AddOutput(g, "y", TensorProto::FLOAT, {4});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->OpsetFor(""), 7);
  for (const Node& n : graph->nodes()) {
    EXPECT_EQ(n.FindAttribute("consumed_inputs"), nullptr) << n.op_type;
  }
  EXPECT_FLOAT_EQ(NodeOfType(*graph, "LeakyRelu").GetFloat("alpha", 0), 0.5f);
  // y = max(x, relu(x)) = max(x, 0).
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({4}, {-2, -1, 0, 3})});
  ExpectValues<float>(out, 0, {4}, {0, 0, 0, 3});
}

// ---------------------------------------------------------------------------------------------
// Legacy broadcasting.

TEST(VersionAdapterTest, BroadcastAxisUnsqueezesAComputedB) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {2, 3, 4});
  AddInput(g, "b", TensorProto::FLOAT, {3});
  onnx::NodeProto* add = AddNode(g, "Add", {"a", "b"}, {"y"}, "add");
  SetInt(add, "broadcast", 1);
  SetInt(add, "axis", 1);
  AddOutput(g, "y", TensorProto::FLOAT, {2, 3, 4});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(graph->num_nodes(), 2);
  const Node& unsqueeze = graph->node(0);
  EXPECT_EQ(unsqueeze.op_type, "Unsqueeze");
  EXPECT_EQ(unsqueeze.inputs, std::vector<int>{graph->FindValue("b")});
  // B [3] at axis 1 of A [2, 3, 4] is B [3, 1] under numpy broadcasting.
  EXPECT_EQ(unsqueeze.GetInts("axes"), (std::vector<int64_t>{1}));
  const Value& b3 = graph->value(unsqueeze.outputs[0]);
  EXPECT_EQ(b3.name, "b_unsqueezed");
  EXPECT_EQ(b3.type.dtype, DataType::kFloat32);
  EXPECT_EQ(DimsOf(b3), (std::vector<int64_t>{3, 1}));
  const Node& adapted = graph->node(1);
  EXPECT_EQ(adapted.op_type, "Add");
  EXPECT_TRUE(AttributeNames(adapted).empty());
  EXPECT_EQ(adapted.inputs[1], unsqueeze.outputs[0]);

  const std::vector<float> a = Iota(24), b = {100, 200, 300};
  const std::vector<OwnedTensor> out =
      RunGraph(graph, {MakeTensor<float>({2, 3, 4}, a), MakeTensor<float>({3}, b)});
  std::vector<float> expected(24);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) expected[(i * 3 + j) * 4 + k] = a[(i * 3 + j) * 4 + k] + b[j];
    }
  }
  ExpectValues<float>(out, 0, {2, 3, 4}, expected);
}

TEST(VersionAdapterTest, BroadcastAxisReshapesAnInitializerB) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {2, 3, 2});
  AddFloatInitializer(g, "b", {2, 3}, {1, 2, 3, 4, 5, 6});
  onnx::NodeProto* mul = AddNode(g, "Mul", {"a", "b"}, {"y"}, "mul");
  SetInt(mul, "broadcast", 1);
  SetInt(mul, "axis", 0);
  AddOutput(g, "y", TensorProto::FLOAT, {2, 3, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(graph->num_nodes(), 1);  // no Unsqueeze: a new initializer instead
  const Node& adapted = graph->node(0);
  EXPECT_TRUE(AttributeNames(adapted).empty());
  const Value& b3 = graph->value(adapted.inputs[1]);
  ASSERT_TRUE(b3.is_constant());
  EXPECT_EQ(b3.constant->shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(DimsOf(b3), (std::vector<int64_t>{2, 3, 1}));
  const Value& b = graph->value(graph->FindValue("b"));
  EXPECT_EQ(b3.constant->raw_data(), b.constant->raw_data());  // the data is shared

  const std::vector<float> a = Iota(12, 1);
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({2, 3, 2}, a)});
  std::vector<float> expected(12);
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < 2; ++k) expected[i * 2 + k] = a[i * 2 + k] * static_cast<float>(i + 1);
  }
  ExpectValues<float>(out, 0, {2, 3, 2}, expected);
}

TEST(VersionAdapterTest, BroadcastWithoutAxisOrAtTheTrailingAxisOnlyDropsTheAttributes) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {2, 3});
  AddInput(g, "b", TensorProto::FLOAT, {3});
  AddInput(g, "c", TensorProto::FLOAT, {2, 1});
  onnx::NodeProto* sub = AddNode(g, "Sub", {"a", "b"}, {"s"}, "sub");
  SetInt(sub, "broadcast", 1);
  // A [2, 3] minus C [2, 1] at axis 0: a run of A's dims with a broadcasting 1 (Caffe2 style).
  onnx::NodeProto* div = AddNode(g, "Div", {"s", "c"}, {"d"}, "div");
  SetInt(div, "broadcast", 1);
  SetInt(div, "axis", 0);
  onnx::NodeProto* add = AddNode(g, "Add", {"d", "a"}, {"y"}, "add");
  SetInt(add, "broadcast", 0);
  AddOutput(g, "y", TensorProto::FLOAT, {2, 3});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(graph->num_nodes(), 3);
  for (const Node& n : graph->nodes()) EXPECT_TRUE(AttributeNames(n).empty()) << n.op_type;
  EXPECT_EQ(graph->node(1).inputs[1], graph->FindValue("c"));

  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 1, 2}, c = {2, 4};
  const std::vector<OwnedTensor> out = RunGraph(
      graph,
      {MakeTensor<float>({2, 3}, a), MakeTensor<float>({3}, b), MakeTensor<float>({2, 1}, c)});
  std::vector<float> expected(6);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      expected[i * 3 + j] = (a[i * 3 + j] - b[j]) / c[i] + a[i * 3 + j];
    }
  }
  ExpectValues<float>(out, 0, {2, 3}, expected);
}

TEST(VersionAdapterTest, LogicComparisonAndPowBroadcastFromOpset1) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 2});
  AddInput(g, "e", TensorProto::FLOAT, {2});
  AddInput(g, "t", TensorProto::FLOAT, {2});
  AddInput(g, "mask", TensorProto::BOOL, {2});
  onnx::NodeProto* pow = AddNode(g, "Pow", {"x", "e"}, {"p"}, "pow");
  SetInt(pow, "broadcast", 1);
  SetInt(pow, "axis", 0);  // exponent per row
  onnx::NodeProto* gt = AddNode(g, "Greater", {"p", "t"}, {"big"}, "gt");
  SetInt(gt, "broadcast", 1);  // threshold per column
  onnx::NodeProto* band = AddNode(g, "And", {"big", "mask"}, {"y"}, "and");
  SetInt(band, "broadcast", 1);
  SetInt(band, "axis", 0);  // mask per row
  AddOutput(g, "y", TensorProto::BOOL, {2, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(CountNodes(*graph, "Unsqueeze"), 2);
  for (const Node& n : graph->nodes()) {
    EXPECT_EQ(n.FindAttribute("broadcast"), nullptr) << n.op_type;
  }
  const std::vector<float> x = {2, 3, 2, 3}, e = {2, 3}, t = {5, 8};
  const std::vector<bool> mask = {true, false};
  OwnedTensor mask_t = MakeTensor<bool>({2}, {true, false});
  const std::vector<OwnedTensor> out = RunGraph(
      graph,
      {MakeTensor<float>({2, 2}, x), MakeTensor<float>({2}, e), MakeTensor<float>({2}, t), mask_t});
  std::vector<bool> expected(4);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      expected[i * 2 + j] = std::pow(x[i * 2 + j], e[i]) > t[j] && mask[i];
    }
  }
  ASSERT_EQ(out.size(), 1u);
  const bool* got = out[0].data<const bool>();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(got[k], expected[k]) << k;
}

TEST(VersionAdapterTest, BroadcastEdgeCasesKeepTheirOldMeaning) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};  // [[1,2,3],[4,5,6]]
  // A one-element B broadcasts anywhere: A - 1.
  std::shared_ptr<Graph> g =
      DirectGraph(6, "Sub", {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {1}}},
                  {Attribute::Int("broadcast", 1)});
  Result<std::shared_ptr<Graph>> adapted = AdaptToOpset7(g);
  ASSERT_TRUE(adapted.ok()) << adapted.status().ToString();
  ExpectValues<float>(
      RunGraph(*adapted, {MakeTensor<float>({2, 3}, a), MakeTensor<float>({1}, {1})}), 0, {2, 3},
      {0, 1, 2, 3, 4, 5});
  // With an axis, too: B [1] at axis 0 becomes [1, 1].
  g = DirectGraph(6, "Sub", {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {1}}},
                  {Attribute::Int("broadcast", 1), Attribute::Int("axis", 0)});
  adapted = AdaptToOpset7(g);
  ASSERT_TRUE(adapted.ok()) << adapted.status().ToString();
  ExpectValues<float>(
      RunGraph(*adapted, {MakeTensor<float>({2, 3}, a), MakeTensor<float>({1}, {1})}), 0, {2, 3},
      {0, 1, 2, 3, 4, 5});
  // broadcast=0 (the default) requires equal shapes, even where numpy would broadcast.
  g = DirectGraph(6, "Mul", {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {3}}}, {});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"op Mul (opset 6)", "different shapes and broadcast=0"});
  // B must be a run of A's dims from `axis`: B [3] at axis 0 of A [2, 3] becomes [3, 1], which
  // does not broadcast to [2, 3], so running fails.
  g = DirectGraph(6, "Add", {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {3}}},
                  {Attribute::Int("broadcast", 1), Attribute::Int("axis", 0)});
  adapted = AdaptToOpset7(g);
  ASSERT_TRUE(adapted.ok()) << adapted.status().ToString();
  Result<std::unique_ptr<Session>> session = Session::Create(*adapted);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const OwnedTensor ta = MakeTensor<float>({2, 3}, a), tb = MakeTensor<float>({3}, {1, 2, 3});
  const std::vector<Tensor> feeds = {ta.view(), tb.view()};
  Result<std::vector<OwnedTensor>> out = (*session)->Run(feeds);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Add"), std::string::npos) << out.status().ToString();
}

TEST(VersionAdapterTest, BroadcastAxisNeedsKnownRanks) {
  std::shared_ptr<Graph> g =
      DirectGraph(6, "Add", {{DataType::kFloat32, {}, /*ranked=*/false}, {DataType::kFloat32, {3}}},
                  {Attribute::Int("broadcast", 1), Attribute::Int("axis", 1)}, "add_1");
  ExpectError(AdaptToOpset7(g), StatusCode::kUnimplemented,
              {"op Add (opset 6) cannot be converted to opset 7: ", "rank of A is unknown",
               "(node 'add_1')"});

  g = DirectGraph(6, "Add", {{DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {3}}},
                  {Attribute::Int("broadcast", 1), Attribute::Int("axis", 2)});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"op Add (opset 6)", "broadcast axis 2 does not fit B (rank 1) into A (rank 2)"});
}

TEST(VersionAdapterTest, NewValueNamesAvoidExistingOnes) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {2, 2});
  AddInput(g, "b", TensorProto::FLOAT, {2});
  AddNode(g, "Neg", {"a"}, {"b_unsqueezed"}, "");
  onnx::NodeProto* add = AddNode(g, "Add", {"b_unsqueezed", "b"}, {"y"}, "");
  SetInt(add, "broadcast", 1);
  SetInt(add, "axis", 0);
  AddOutput(g, "y", TensorProto::FLOAT, {2, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  const Node& unsqueeze = NodeOfType(*graph, "Unsqueeze");
  EXPECT_EQ(graph->value(unsqueeze.outputs[0]).name, "b_unsqueezed_1");
  EXPECT_TRUE(unsqueeze.name.empty());
  const std::vector<OwnedTensor> out =
      RunGraph(graph, {MakeTensor<float>({2, 2}, {1, 2, 3, 4}), MakeTensor<float>({2}, {10, 20})});
  ExpectValues<float>(out, 0, {2, 2}, {9, 8, 17, 16});
}

// ---------------------------------------------------------------------------------------------
// Gemm, PRelu, BatchNormalization, Dropout.

TEST(VersionAdapterTest, GemmBroadcastIsDropped) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {2, 3});
  AddInput(g, "b", TensorProto::FLOAT, {3, 2});
  AddFloatInitializer(g, "c", {2}, {0.5f, -0.5f});
  onnx::NodeProto* gemm = AddNode(g, "Gemm", {"a", "b", "c"}, {"y"}, "gemm");
  SetInt(gemm, "broadcast", 1);
  SetFloat(gemm, "beta", 2.0f);
  AddOutput(g, "y", TensorProto::FLOAT, {2, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(AttributeNames(graph->node(0)), (std::set<std::string>{"beta"}));
  const std::vector<float> a = Iota(6, 1), b = Iota(6, -2);
  const std::vector<OwnedTensor> out =
      RunGraph(graph, {MakeTensor<float>({2, 3}, a), MakeTensor<float>({3, 2}, b)});
  std::vector<float> expected(4);
  const float c[2] = {0.5f, -0.5f};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k) acc += a[i * 3 + k] * b[k * 2 + j];
      expected[i * 2 + j] = acc + 2 * c[j];
    }
  }
  ExpectValues<float>(out, 0, {2, 2}, expected);
}

TEST(VersionAdapterTest, GemmWithoutBroadcastNeedsAFullC) {
  std::shared_ptr<Graph> g = DirectGraph(
      6, "Gemm",
      {{DataType::kFloat32, {2, 2}}, {DataType::kFloat32, {2, 3}}, {DataType::kFloat32, {3}}}, {});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"op Gemm (opset 6)", "C is not [M, N] and broadcast=0"});
  // transB: N is B's dim 0.
  g = DirectGraph(
      6, "Gemm",
      {{DataType::kFloat32, {2, 2}}, {DataType::kFloat32, {3, 2}}, {DataType::kFloat32, {2, 2}}},
      {Attribute::Int("transB", 1)});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument, {"C is not [M, N]"});
  g = DirectGraph(
      6, "Gemm",
      {{DataType::kFloat32, {2, 2}}, {DataType::kFloat32, {3, 2}}, {DataType::kFloat32, {2, 3}}},
      {Attribute::Int("transB", 1), Attribute::Int("broadcast", 0)});
  Result<std::shared_ptr<Graph>> adapted = AdaptToOpset7(g);
  ASSERT_TRUE(adapted.ok()) << adapted.status().ToString();
  EXPECT_EQ(AttributeNames((*adapted)->node(0)), (std::set<std::string>{"transB"}));
  // [[1,2],[3,4]] x [[1,0],[0,1],[1,1]]^T + C.
  const std::vector<OwnedTensor> out =
      RunGraph(*adapted, {MakeTensor<float>({2, 2}, {1, 2, 3, 4}),
                          MakeTensor<float>({3, 2}, {1, 0, 0, 1, 1, 1}),
                          MakeTensor<float>({2, 3}, {10, 20, 30, 40, 50, 60})});
  ExpectValues<float>(out, 0, {2, 3}, {11, 22, 33, 43, 54, 67});
}

TEST(VersionAdapterTest, PReluChannelSlopeAppliesAlongDim1) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 3, 2});
  AddFloatInitializer(g, "slope", {3}, {0.1f, 0.2f, 0.3f});
  AddNode(g, "PRelu", {"x", "slope"}, {"y"}, "prelu");
  AddOutput(g, "y", TensorProto::FLOAT, {2, 3, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(graph->num_nodes(), 1);
  const Value& slope = graph->value(graph->node(0).inputs[1]);
  ASSERT_TRUE(slope.is_constant());
  EXPECT_EQ(slope.constant->shape(), (Shape{3, 1}));
  const std::vector<float> x = Iota(12, -6);
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({2, 3, 2}, x)});
  std::vector<float> expected(12);
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int w = 0; w < 2; ++w) {
        const float v = x[(n * 3 + c) * 2 + w];
        expected[(n * 3 + c) * 2 + w] = v < 0 ? v * 0.1f * static_cast<float>(c + 1) : v;
      }
    }
  }
  ExpectValues<float>(out, 0, {2, 3, 2}, expected);
}

TEST(VersionAdapterTest, PReluSlopesThatNumpyAlreadyPlacesAreKept) {
  // Rank-2 X (dim 1 is the last dim), a one-element slope, and a slope that matches the last dim
  // but not the channels: no rewrite.
  for (const auto& [xdims, sdims] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{2, 3}, {3}}, {{2, 3, 4}, {1}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 4}}}) {
    std::shared_ptr<Graph> g =
        DirectGraph(6, "PRelu", {{DataType::kFloat32, xdims}, {DataType::kFloat32, sdims}}, {});
    Result<std::shared_ptr<Graph>> out = AdaptToOpset7(g);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ((*out)->num_nodes(), 1);
    EXPECT_EQ((*out)->node(0).inputs[1], 1);
  }
}

TEST(VersionAdapterTest, PReluComputedSlopeIsUnsqueezed) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {1, 2, 2, 1});
  AddInput(g, "slope", TensorProto::FLOAT, {2});
  SetInts(AddNode(g, "PRelu", {"x", "slope"}, {"y"}, "prelu"), "consumed_inputs", {0, 0});
  AddOutput(g, "y", TensorProto::FLOAT, {1, 2, 2, 1});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(graph->num_nodes(), 2);
  EXPECT_EQ(graph->node(0).GetInts("axes"), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(AttributeNames(graph->node(1)).empty());
  const std::vector<OwnedTensor> out = RunGraph(
      graph, {MakeTensor<float>({1, 2, 2, 1}, {-1, 1, -2, 2}), MakeTensor<float>({2}, {0.5f, 3})});
  ExpectValues<float>(out, 0, {1, 2, 2, 1}, {-0.5f, 1, -6, 2});
}

TEST(VersionAdapterTest, PReluWithUnknownRankFails) {
  std::shared_ptr<Graph> g = DirectGraph(
      6, "PRelu", {{DataType::kFloat32, {}, /*ranked=*/false}, {DataType::kFloat32, {3}}}, {});
  ExpectError(AdaptToOpset7(g), StatusCode::kUnimplemented,
              {"op PRelu (opset 6) cannot be converted to opset 7", "rank of X is unknown"});
}

void AddBatchNorm(onnx::GraphProto* g, int64_t is_test, bool consumed) {
  AddInput(g, "x", TensorProto::FLOAT, {1, 2, 2});
  AddFloatInitializer(g, "scale", {2}, {1, 2});
  AddFloatInitializer(g, "bias", {2}, {0, 1});
  AddFloatInitializer(g, "mean", {2}, {1, -1});
  AddFloatInitializer(g, "var", {2}, {4, 0.25f});
  onnx::NodeProto* bn =
      AddNode(g, "BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, "bn");
  if (is_test >= 0) SetInt(bn, "is_test", is_test);
  if (consumed) SetInts(bn, "consumed_inputs", {0, 0, 0, 1, 1});
  SetFloat(bn, "epsilon", 0);
  AddOutput(g, "y", TensorProto::FLOAT, {1, 2, 2});
}

TEST(VersionAdapterTest, BatchNormalizationInTestModeLosesIsTest) {
  for (int64_t opset : {1, 6}) {
    onnx::ModelProto m = NewModel(opset);
    AddBatchNorm(m.mutable_graph(), 1, opset == 1);
    std::shared_ptr<Graph> graph = ImportOk(m);
    ASSERT_NE(graph, nullptr);
    EXPECT_EQ(AttributeNames(graph->node(0)), (std::set<std::string>{"epsilon"})) << opset;
    // y = (x - mean) / sqrt(var) * scale + bias per channel.
    const std::vector<OwnedTensor> out =
        RunGraph(graph, {MakeTensor<float>({1, 2, 2}, {3, 5, 0, 1})});
    ExpectValues<float>(out, 0, {1, 2, 2}, {1, 2, 5, 9});
  }
}

TEST(VersionAdapterTest, BatchNormalizationInTrainingModeFails) {
  for (int64_t is_test : {0, -1}) {  // -1: absent, which means 0
    onnx::ModelProto m = NewModel(6);
    AddBatchNorm(m.mutable_graph(), is_test, false);
    ExpectError(Import(m), StatusCode::kUnimplemented,
                {"'old.onnx': op BatchNormalization (opset 6) cannot be converted to opset 7: ",
                 "is_test=0 (training mode", "(node 'bn')"});
  }
}

TEST(VersionAdapterTest, DropoutLosesIsTestAndStaysTheIdentity) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {3});
  onnx::NodeProto* d = AddNode(g, "Dropout", {"x"}, {"y"}, "drop");
  SetInt(d, "is_test", 0);
  SetFloat(d, "ratio", 0.75f);
  SetInts(d, "consumed_inputs", {0});
  AddOutput(g, "y", TensorProto::FLOAT, {3});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(AttributeNames(graph->node(0)), (std::set<std::string>{"ratio"}));
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({3}, {1, -2, 3})});
  ExpectValues<float>(out, 0, {3}, {1, -2, 3});
}

// ---------------------------------------------------------------------------------------------
// Attributes that changed form.

TEST(VersionAdapterTest, CastTypeNameBecomesItsNumber) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {4});
  SetString(AddNode(g, "Cast", {"x"}, {"y"}, "cast"), "to", "INT32");
  AddOutput(g, "y", TensorProto::INT32, {4});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  const Attribute* to = graph->node(0).FindAttribute("to");
  ASSERT_NE(to, nullptr);
  EXPECT_EQ(to->type, AttributeType::kInt);
  EXPECT_EQ(to->i, TensorProto::INT32);
  const std::vector<OwnedTensor> out =
      RunGraph(graph, {MakeTensor<float>({4}, {1.9f, -1.9f, 0, 300})});
  ExpectValues<int32_t>(out, 0, {4}, {1, -1, 0, 300});
}

TEST(VersionAdapterTest, CastWithABadTypeNameFails) {
  Attribute to;
  to.name = "to";
  to.type = AttributeType::kString;
  to.s = "FLOATY";
  std::shared_ptr<Graph> g = DirectGraph(1, "Cast", {{DataType::kFloat32, {1}}}, {to});
  ExpectError(
      AdaptToOpset7(g), StatusCode::kInvalidArgument,
      {"op Cast (opset 1) cannot be converted to opset 7", "names no known type: 'FLOATY'"});
  g = DirectGraph(1, "Cast", {{DataType::kFloat32, {1}}}, {Attribute::Int("to", 6)});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"attribute 'to' must be a STRING type name before opset 6"});
}

TEST(VersionAdapterTest, ReshapeShapeAttributeBecomesAnInitializerInput) {
  onnx::ModelProto m = NewModel(4);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 3});
  onnx::NodeProto* r = AddNode(g, "Reshape", {"x"}, {"y"}, "reshape");
  SetInts(r, "shape", {3, -1, 1});
  SetInts(r, "consumed_inputs", {1});
  AddOutput(g, "y", TensorProto::FLOAT, {3, 2, 1});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  const Node& reshape = graph->node(0);
  EXPECT_TRUE(AttributeNames(reshape).empty());
  ASSERT_EQ(reshape.inputs.size(), 2u);
  const Value& shape = graph->value(reshape.inputs[1]);
  EXPECT_EQ(shape.name, "x_shape");
  ASSERT_TRUE(shape.is_constant());
  EXPECT_EQ(shape.constant->dtype(), DataType::kInt64);
  EXPECT_EQ(ToVector<int64_t>(*shape.constant), (std::vector<int64_t>{3, -1, 1}));
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({2, 3}, Iota(6))});
  ExpectValues<float>(out, 0, {3, 2, 1}, Iota(6));
}

TEST(VersionAdapterTest, ConcatGetsTheOldDefaultAxis) {
  onnx::ModelProto m = NewModel(3);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "a", TensorProto::FLOAT, {2, 1});
  AddInput(g, "b", TensorProto::FLOAT, {2, 2});
  AddNode(g, "Concat", {"a", "b"}, {"y"}, "concat");
  AddOutput(g, "y", TensorProto::FLOAT, {2, 3});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->node(0).GetInt("axis", -1), 1);
  const std::vector<OwnedTensor> out = RunGraph(
      graph, {MakeTensor<float>({2, 1}, {1, 2}), MakeTensor<float>({2, 2}, {10, 11, 20, 21})});
  ExpectValues<float>(out, 0, {2, 3}, {1, 10, 11, 2, 20, 21});
}

TEST(VersionAdapterTest, PadPaddingsBecomePads) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {1, 2});
  onnx::NodeProto* pad = AddNode(g, "Pad", {"x"}, {"y"}, "pad");
  SetInts(pad, "paddings", {0, 1, 1, 0});
  SetFloat(pad, "value", 7);
  AddOutput(g, "y", TensorProto::FLOAT, {2, 3});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(AttributeNames(graph->node(0)), (std::set<std::string>{"pads", "value"}));
  EXPECT_EQ(graph->node(0).GetInts("pads"), (std::vector<int64_t>{0, 1, 1, 0}));
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({1, 2}, {1, 2})});
  ExpectValues<float>(out, 0, {2, 3}, {7, 1, 2, 7, 7, 7});
}

TEST(VersionAdapterTest, SplitSizesInputBecomesTheAttribute) {
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {5});
  AddInt64Initializer(g, "sizes", {2}, {2, 3});
  AddNode(g, "Split", {"x", "sizes"}, {"y0", "y1"}, "split");
  AddOutput(g, "y0", TensorProto::FLOAT, {2});
  AddOutput(g, "y1", TensorProto::FLOAT, {3});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->node(0).inputs.size(), 1u);
  EXPECT_EQ(graph->node(0).GetInts("split"), (std::vector<int64_t>{2, 3}));
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({5}, Iota(5))});
  ExpectValues<float>(out, 0, {2}, {0, 1});
  ExpectValues<float>(out, 1, {3}, {2, 3, 4});
}

TEST(VersionAdapterTest, SplitSizesComputedAtRunTimeFail) {
  std::shared_ptr<Graph> g =
      DirectGraph(1, "Split", {{DataType::kFloat32, {5}}, {DataType::kInt64, {2}}}, {});
  ExpectError(
      AdaptToOpset7(g), StatusCode::kUnimplemented,
      {"op Split (opset 1) cannot be converted to opset 7", "must be a constant", "(node 'n')"});
}

TEST(VersionAdapterTest, TileInputsBecomeRepeats) {
  onnx::ModelProto m = NewModel(5);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {2, 2});
  AddInt64Initializer(g, "tiles", {}, {3});
  AddInt64Initializer(g, "axis", {}, {1});
  AddNode(g, "Tile", {"x", "tiles", "axis"}, {"y"}, "tile");
  AddOutput(g, "y", TensorProto::FLOAT, {2, 6});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  const Node& tile = graph->node(0);
  ASSERT_EQ(tile.inputs.size(), 2u);
  const Value& repeats = graph->value(tile.inputs[1]);
  ASSERT_TRUE(repeats.is_constant());
  EXPECT_EQ(ToVector<int64_t>(*repeats.constant), (std::vector<int64_t>{1, 3}));
  const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({2, 2}, {1, 2, 3, 4})});
  ExpectValues<float>(out, 0, {2, 6}, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
}

TEST(VersionAdapterTest, TileNeedsConstantsAndARank) {
  auto scalar = [](int64_t v) {
    Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, Shape{});
    KILN_CHECK(t.ok(), "allocation");
    t->data<int64_t>()[0] = v;
    return std::make_shared<const OwnedTensor>(std::move(t).value());
  };
  std::shared_ptr<Graph> g = DirectGraph(
      1, "Tile",
      {{DataType::kFloat32, {2}}, {DataType::kInt64, {}}, {DataType::kInt64, {}, true, scalar(0)}},
      {});
  ExpectError(AdaptToOpset7(g), StatusCode::kUnimplemented,
              {"op Tile (opset 1) cannot be converted", "input 'tiles' is not a constant"});
  g = DirectGraph(1, "Tile",
                  {{DataType::kFloat32, {}, false},
                   {DataType::kInt64, {}, true, scalar(2)},
                   {DataType::kInt64, {}, true, scalar(0)}},
                  {});
  ExpectError(AdaptToOpset7(g), StatusCode::kUnimplemented, {"the rank of the input is unknown"});
  g = DirectGraph(1, "Tile",
                  {{DataType::kFloat32, {2}},
                   {DataType::kInt64, {}, true, scalar(2)},
                   {DataType::kInt64, {}, true, scalar(1)}},
                  {});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"axis 1 is out of range for an input of rank 1"});
}

TEST(VersionAdapterTest, UpsampleScaleAttributesBecomeScales) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {1, 1, 2, 2});
  onnx::NodeProto* up = AddNode(g, "Upsample", {"x"}, {"y"}, "up");
  SetFloat(up, "height_scale", 2);
  SetFloat(up, "width_scale", 3);
  SetString(up, "mode", "nearest");
  AddOutput(g, "y", TensorProto::FLOAT, {1, 1, 4, 6});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(AttributeNames(graph->node(0)), (std::set<std::string>{"mode", "scales"}));
  EXPECT_EQ(graph->node(0).GetFloats("scales"), (std::vector<float>{1, 1, 2, 3}));
  const std::vector<OwnedTensor> out =
      RunGraph(graph, {MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4})});
  ExpectValues<float>(out, 0, {1, 1, 4, 6},
                      {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});

  Attribute mode;
  mode.name = "mode";
  mode.type = AttributeType::kString;
  mode.s = "bilinear";
  std::shared_ptr<Graph> direct =
      DirectGraph(1, "Upsample", {{DataType::kFloat32, {1, 1, 2, 2}}},
                  {Attribute::Float("height_scale", 2), Attribute::Float("width_scale", 2), mode});
  Result<std::shared_ptr<Graph>> adapted = AdaptToOpset7(direct);
  ASSERT_TRUE(adapted.ok()) << adapted.status().ToString();
  EXPECT_EQ((*adapted)->node(0).GetString("mode", ""), "linear");
  direct = DirectGraph(1, "Upsample", {{DataType::kFloat32, {2, 2}}},
                       {Attribute::Float("height_scale", 2), Attribute::Float("width_scale", 2)});
  ExpectError(AdaptToOpset7(direct), StatusCode::kInvalidArgument,
              {"X must be 4-D [N, C, H, W], it has rank 2"});
}

TEST(VersionAdapterTest, RecurrentOpsLoseOutputSequence) {
  // GRU-1 goes through GRU-3 (compatible) to GRU-7.
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    const int gates = std::string(op) == "RNN" ? 1 : std::string(op) == "GRU" ? 3 : 4;
    onnx::ModelProto m = NewModel(1);
    onnx::GraphProto* g = m.mutable_graph();
    AddInput(g, "x", TensorProto::FLOAT, {1, 1, 1});
    AddFloatInitializer(g, "w", {1, gates, 1}, std::vector<float>(static_cast<size_t>(gates), 0));
    AddFloatInitializer(g, "r", {1, gates, 1}, std::vector<float>(static_cast<size_t>(gates), 0));
    const bool lstm = std::string(op) == "LSTM";
    std::vector<std::string> outputs = {"y", "y_h"};
    if (lstm) outputs.push_back("y_c");
    onnx::NodeProto* n = AddNode(g, op, {"x", "w", "r"}, outputs, "rec");
    SetInt(n, "hidden_size", 1);
    SetInt(n, "output_sequence", 1);
    AddOutput(g, "y", TensorProto::FLOAT, {1, 1, 1, 1});
    AddOutput(g, "y_h", TensorProto::FLOAT, {1, 1, 1});
    if (lstm) AddOutput(g, "y_c", TensorProto::FLOAT, {1, 1, 1});
    std::shared_ptr<Graph> graph = ImportOk(m);
    ASSERT_NE(graph, nullptr);
    EXPECT_EQ(AttributeNames(graph->node(0)), (std::set<std::string>{"hidden_size"})) << op;
    // Zero weights and biases: every cell output is 0 (tanh(0); GRU/LSTM gates of 0.5 times 0).
    const std::vector<OwnedTensor> out = RunGraph(graph, {MakeTensor<float>({1, 1, 1}, {5})});
    ExpectValues<float>(out, 0, {1, 1, 1, 1}, {0});
    ExpectValues<float>(out, 1, {1, 1, 1}, {0});
  }
}

TEST(VersionAdapterTest, AveragePoolFromOpset1NeverCountsPadding) {
  // [1..9] as 3x3, kernel 2, stride 2, pads 1: windows cover {1}, {2,3}, {4,7}, {5,6,8,9}, and
  // the average is over the taps inside the input only.
  onnx::ModelProto m = NewModel(1);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", TensorProto::FLOAT, {1, 1, 3, 3});
  onnx::NodeProto* pool = AddNode(g, "AveragePool", {"x"}, {"y"}, "pool");
  SetInts(pool, "kernel_shape", {2, 2});
  SetInts(pool, "strides", {2, 2});
  SetInts(pool, "pads", {1, 1, 1, 1});
  AddOutput(g, "y", TensorProto::FLOAT, {1, 1, 2, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->node(0).FindAttribute("count_include_pad"), nullptr);
  const std::vector<OwnedTensor> out =
      RunGraph(graph, {MakeTensor<float>({1, 1, 3, 3}, Iota(9, 1))});
  ExpectValues<float>(out, 0, {1, 1, 2, 2}, {1, 2.5f, 5.5f, 7});
}

TEST(VersionAdapterTest, AttributesOfLaterVersionsAreRefused) {
  std::shared_ptr<Graph> g = DirectGraph(6, "AveragePool", {{DataType::kFloat32, {1, 1, 2}}},
                                         {Attribute::Int("count_include_pad", 1)});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"op AveragePool (opset 6)", "'count_include_pad' does not exist before opset 7"});
  g = DirectGraph(2, "GRU",
                  {{DataType::kFloat32, {1, 1, 1}},
                   {DataType::kFloat32, {1, 3, 1}},
                   {DataType::kFloat32, {1, 3, 1}}},
                  {Attribute::Int("linear_before_reset", 1)});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"op GRU (opset 2)", "'linear_before_reset' does not exist before opset 3"});
}

TEST(VersionAdapterTest, LpPoolPBecomesAnInteger) {
  std::shared_ptr<Graph> g =
      DirectGraph(1, "GlobalLpPool", {{DataType::kFloat32, {1, 1, 2}}}, {Attribute::Float("p", 3)});
  Result<std::shared_ptr<Graph>> out = AdaptToOpset7(g);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Attribute* p = (*out)->node(0).FindAttribute("p");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->type, AttributeType::kInt);
  EXPECT_EQ(p->i, 3);
  g = DirectGraph(1, "LpPool", {{DataType::kFloat32, {1, 1, 2}}}, {Attribute::Float("p", 2.5f)});
  ExpectError(AdaptToOpset7(g), StatusCode::kUnimplemented,
              {"op LpPool (opset 1) cannot be converted", "p=2.5 is not a positive whole number"});
}

// ---------------------------------------------------------------------------------------------
// Graph-level behaviour.

TEST(VersionAdapterTest, SubgraphsAreAdaptedToo) {
  onnx::ModelProto m = NewModel(6);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "cond", TensorProto::BOOL, {});
  AddInput(g, "a", TensorProto::FLOAT, {2, 2});
  AddInput(g, "b", TensorProto::FLOAT, {2});
  onnx::NodeProto* if_node = AddNode(g, "If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    AttributeProto* attr = if_node->add_attribute();
    attr->set_name(branch);
    attr->set_type(AttributeProto::GRAPH);
    onnx::GraphProto* body = attr->mutable_g();
    body->set_name(branch);
    const bool then = std::string(branch) == "then_branch";
    onnx::NodeProto* n =
        AddNode(body, then ? "Add" : "Sub", {"a", "b"}, {"out"}, then ? "inner_add" : "inner_sub");
    SetInt(n, "broadcast", 1);
    if (then) SetInt(n, "axis", 0);  // b per row
    AddOutput(body, "out", TensorProto::FLOAT, {2, 2});
  }
  AddOutput(g, "y", TensorProto::FLOAT, {2, 2});
  std::shared_ptr<Graph> graph = ImportOk(m);
  ASSERT_NE(graph, nullptr);
  const Node& node = graph->node(0);
  const Attribute* then_attr = node.FindAttribute("then_branch");
  ASSERT_NE(then_attr, nullptr);
  ASSERT_NE(then_attr->g, nullptr);
  EXPECT_EQ(then_attr->g->OpsetFor(""), 7);
  EXPECT_EQ(CountNodes(*then_attr->g, "Unsqueeze"), 1);
  EXPECT_EQ(then_attr->g->Captures().size(), 2u);
  EXPECT_EQ(node.implicit_inputs.size(), 2u);

  const std::vector<float> a = {1, 2, 3, 4}, b = {10, 20};
  OwnedTensor yes = MakeTensor<bool>({}, {true}), no = MakeTensor<bool>({}, {false});
  std::vector<OwnedTensor> out =
      RunGraph(graph, {yes, MakeTensor<float>({2, 2}, a), MakeTensor<float>({2}, b)});
  ExpectValues<float>(out, 0, {2, 2}, {11, 12, 23, 24});
  out = RunGraph(graph, {no, MakeTensor<float>({2, 2}, a), MakeTensor<float>({2}, b)});
  ExpectValues<float>(out, 0, {2, 2}, {-9, -18, -7, -16});
}

TEST(VersionAdapterTest, SubgraphErrorsNameTheOwningNode) {
  std::shared_ptr<Graph> body =
      DirectGraph(6, "Add", {{DataType::kFloat32, {}, false}, {DataType::kFloat32, {2}}},
                  {Attribute::Int("broadcast", 1), Attribute::Int("axis", 0)}, "");
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 6;
  Value cond;
  cond.name = "cond";
  cond.type.dtype = DataType::kBool;
  g->inputs.push_back(g->AddValue(std::move(cond)));
  Node if_node;
  if_node.name = "branch";
  if_node.op_type = "If";
  if_node.inputs = {0};
  Attribute then_attr;
  then_attr.name = "then_branch";
  then_attr.type = AttributeType::kGraph;
  then_attr.g = body;
  if_node.attributes.push_back(then_attr);
  g->AddNode(std::move(if_node));
  ExpectError(AdaptToOpset7(g), StatusCode::kUnimplemented,
              {"attribute 'then_branch' of node 'branch' (If): op Add (opset 6) cannot be "
               "converted to opset 7: ",
               "(node #0)"});
}

TEST(VersionAdapterTest, OpsThatDoNotExistYetAreReported) {
  std::shared_ptr<Graph> g = DirectGraph(6, "Sin", {{DataType::kFloat32, {2}}}, {});
  ExpectError(AdaptToOpset7(g), StatusCode::kInvalidArgument,
              {"op Sin (opset 6) cannot be converted to opset 7: the op does not exist before "
               "opset 7"});
  // Not an ONNX op at all: left for the kernel lookup to report.
  g = DirectGraph(6, "NoSuchOp", {{DataType::kFloat32, {2}}}, {});
  Result<std::shared_ptr<Graph>> out = AdaptToOpset7(g);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)->node(0).op_type, "NoSuchOp");
  EXPECT_EQ((*out)->OpsetFor(""), 7);
}

}  // namespace
}  // namespace kiln
