// SPDX-License-Identifier: Apache-2.0
// Tests for Gradient expansion: small models built with the onnx protobuf API are imported (so
// the checker, shape inference and the importer's hook take part) and run through a Session.
// Each gradient is compared with a central finite-difference estimate of d(sum(y))/dx computed
// here by running the forward graph alone, so expected values do not depend on the rules under
// test. DOUBLE models keep the estimate accurate; one FLOAT model covers the other dtype.

#include "graph/onnx/gradient.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/check.h"
#include "graph/onnx/importer.h"
#include "graph/onnx/onnx_test_util.h"
#include "onnx/onnx_pb.h"
#include "runtime/session.h"

namespace kiln {
namespace {

using ::kiln::testing::SetInt;
using ::kiln::testing::SetInts;
using ::kiln::testing::SetString;
using ::kiln::testing::SetStrings;
using onnx::TensorProto;

// ---------------------------------------------------------------------------------------------
// Model building.

struct Input {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<double> values;
};

using Forward = std::function<void(onnx::GraphProto*)>;

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name = "") {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + std::to_string(g->node_size()) : name);
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  return n;
}

void AddDoubleInitializer(onnx::GraphProto* g, const std::string& name,
                          const std::vector<int64_t>& dims, const std::vector<double>& values) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::DOUBLE);
  for (int64_t d : dims) t->add_dims(d);
  for (double v : values) t->add_double_data(v);
}

void AddInt64Initializer(onnx::GraphProto* g, const std::string& name,
                         const std::vector<int64_t>& values) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

void AddValueInfo(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                  const std::string& name, int32_t elem, const std::vector<int64_t>* dims) {
  onnx::ValueInfoProto* vi = list->Add();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  onnx::TensorShapeProto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (int64_t d : *dims) shape->add_dim()->set_dim_value(d);
}

// A model with `inputs`, the `forward` nodes (which compute "y"), and, when `xs` is non-empty, a
// Gradient node with outputs "grad_<x>". Outputs: sum(y) (a scalar, so its type is known
// without inferring y's), then the gradients.
onnx::ModelProto BuildModel(const Forward& forward, const std::vector<Input>& inputs,
                            const std::vector<std::string>& xs, int64_t opset,
                            int32_t elem = TensorProto::DOUBLE) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln gradient_test");
  onnx::OperatorSetIdProto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  op = m.add_opset_import();
  op->set_domain(kTrainingDomain);
  op->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  for (const Input& in : inputs) AddValueInfo(g->mutable_input(), in.name, elem, &in.dims);
  forward(g);
  SetInt(AddNode(g, "ReduceSum", {"y"}, {"y_sum"}, "y_sum"), "keepdims", 0);
  const std::vector<int64_t> scalar;
  AddValueInfo(g->mutable_output(), "y_sum", elem, &scalar);
  if (!xs.empty()) {
    std::vector<std::string> outs;
    for (const std::string& x : xs) outs.push_back("grad_" + x);
    onnx::NodeProto* n = AddNode(g, "Gradient", xs, outs, "grad");
    n->set_domain(kTrainingDomain);
    SetStrings(n, "xs", xs);
    SetString(n, "y", "y");
    for (const std::string& x : xs) {
      for (const Input& in : inputs) {
        if (in.name == x) AddValueInfo(g->mutable_output(), "grad_" + x, elem, &in.dims);
      }
    }
  }
  return m;
}

Result<std::shared_ptr<Graph>> Import(const onnx::ModelProto& m) {
  return ImportOnnxModelFromString(m.SerializeAsString(), "gradient.onnx");
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
// Running and finite differences.

OwnedTensor MakeDouble(const Input& in) {
  Result<OwnedTensor> t =
      OwnedTensor::Allocate(DataType::kFloat64, Shape(std::span<const int64_t>(in.dims)));
  KILN_CHECK(t.ok(), t.status().ToString());
  KILN_CHECK(static_cast<int64_t>(in.values.size()) == t->num_elements(), "value count");
  std::copy(in.values.begin(), in.values.end(), t->data<double>());
  return std::move(t).value();
}

std::vector<OwnedTensor> Run(const std::shared_ptr<Graph>& g, const std::vector<Input>& inputs) {
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  std::vector<OwnedTensor> owned;
  for (const Input& in : inputs) owned.push_back(MakeDouble(in));
  std::vector<Tensor> feeds;
  for (const OwnedTensor& t : owned) feeds.push_back(t.view());
  Result<std::vector<OwnedTensor>> out = (*s)->Run(feeds);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<OwnedTensor>{};
}

// Checks every gradient output of the model against central differences of sum(y).
void CheckGradients(const Forward& forward, std::vector<Input> inputs,
                    const std::vector<std::string>& xs, int64_t opset = 13) {
  Result<std::shared_ptr<Graph>> with_grad = Import(BuildModel(forward, inputs, xs, opset));
  ASSERT_TRUE(with_grad.ok()) << with_grad.status().ToString();
  for (const Node& n : (*with_grad)->nodes()) EXPECT_NE(n.op_type, "Gradient");
  Result<std::shared_ptr<Graph>> plain = Import(BuildModel(forward, inputs, {}, opset));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const std::vector<OwnedTensor> out = Run(*with_grad, inputs);
  ASSERT_EQ(out.size(), xs.size() + 1);
  const double kStep = 1e-6;
  for (size_t k = 0; k < xs.size(); ++k) {
    size_t which = 0;
    while (inputs[which].name != xs[k]) ++which;
    const OwnedTensor& grad = out[k + 1];
    EXPECT_EQ(grad.shape(), Shape(std::span<const int64_t>(inputs[which].dims))) << xs[k];
    ASSERT_EQ(grad.num_elements(), static_cast<int64_t>(inputs[which].values.size()));
    for (size_t e = 0; e < inputs[which].values.size(); ++e) {
      const double saved = inputs[which].values[e];
      inputs[which].values[e] = saved + kStep;
      const std::vector<OwnedTensor> up = Run(*plain, inputs);
      inputs[which].values[e] = saved - kStep;
      const std::vector<OwnedTensor> down = Run(*plain, inputs);
      inputs[which].values[e] = saved;
      ASSERT_EQ(up.size(), 1u);
      ASSERT_EQ(down.size(), 1u);
      const double expected =
          (up[0].data<const double>()[0] - down[0].data<const double>()[0]) / (2 * kStep);
      const double got = grad.data<const double>()[e];
      EXPECT_NEAR(got, expected, 1e-5 * std::max(1.0, std::abs(expected)))
          << "d sum(y) / d " << xs[k] << "[" << e << "]";
    }
  }
}

Forward Binary(const std::string& op) {
  return [op](onnx::GraphProto* g) { AddNode(g, op, {"a", "b"}, {"y"}); };
}

Forward Unary(const std::string& op) {
  return [op](onnx::GraphProto* g) { AddNode(g, op, {"a"}, {"y"}); };
}

const Input kA23{"a", {2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 0.3}};
const Input kB23{"b", {2, 3}, {1.5, 0.25, -2.0, 0.7, 1.1, -0.4}};
const Input kPositive23{"a", {2, 3}, {0.5, 1.25, 2.0, 1.5, 0.75, 3.0}};

// ---------------------------------------------------------------------------------------------
// Rules.

TEST(GradientTest, ElementwiseBinaryOps) {
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(op);
    CheckGradients(Binary(op), {kA23, kB23}, {"a", "b"});
  }
}

TEST(GradientTest, BroadcastOperandsGetSummedGradients) {
  const Input a{"a", {2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 0.3}};
  const Input row{"b", {3}, {1.5, 0.25, -2.0}};
  const Input col{"b", {2, 1}, {0.8, -1.3}};
  const Input scalar{"b", {}, {1.7}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(op);
    CheckGradients(Binary(op), {a, row}, {"a", "b"});
    CheckGradients(Binary(op), {a, col}, {"a", "b"});
    CheckGradients(Binary(op), {a, scalar}, {"a", "b"});
  }
  // Both operands broadcast: [2, 1] with [1, 3].
  const Input a21{"a", {2, 1}, {0.5, -1.25}};
  const Input b13{"b", {1, 3}, {1.5, 0.25, -2.0}};
  CheckGradients(Binary("Mul"), {a21, b13}, {"a", "b"});
}

TEST(GradientTest, BroadcastingAlsoWorksAtOpset12) {
  // ReduceSum takes its axes as an attribute before opset 13.
  const Input row{"b", {3}, {1.5, 0.25, -2.0}};
  CheckGradients(Binary("Mul"), {kA23, row}, {"a", "b"}, 12);
}

TEST(GradientTest, UnaryOps) {
  for (const char* op : {"Neg", "Identity", "Relu", "Sigmoid", "Tanh", "Exp"}) {
    SCOPED_TRACE(op);
    CheckGradients(Unary(op), {kA23}, {"a"});
  }
  for (const char* op : {"Log", "Sqrt"}) {
    SCOPED_TRACE(op);
    CheckGradients(Unary(op), {kPositive23}, {"a"});
  }
}

TEST(GradientTest, PowWithConstantExponent) {
  const Forward scalar_exponent = [](onnx::GraphProto* g) {
    AddDoubleInitializer(g, "p", {}, {3.0});
    AddNode(g, "Pow", {"a", "p"}, {"y"});
  };
  CheckGradients(scalar_exponent, {kPositive23}, {"a"});
  // A broadcast exponent ([2, 3] result from a [3] base) and a non-integer power.
  const Forward broadcast = [](onnx::GraphProto* g) {
    AddDoubleInitializer(g, "p", {2, 3}, {0.5, 2.0, 1.5, -1.0, 3.0, 2.5});
    AddNode(g, "Pow", {"a", "p"}, {"y"});
  };
  CheckGradients(broadcast, {{"a", {3}, {0.7, 1.3, 2.1}}}, {"a"});
}

TEST(GradientTest, MatMul2DAndBatched) {
  CheckGradients(Binary("MatMul"),
                 {{"a", {2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 0.3}},
                  {"b", {3, 2}, {1.5, 0.25, -2.0, 0.7, 1.1, -0.4}}},
                 {"a", "b"});
  CheckGradients(Binary("MatMul"),
                 {{"a", {2, 2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 0.3, 1, 2, 3, -1, -2, 0.5}},
                  {"b", {2, 3, 1}, {1.5, 0.25, -2.0, 0.7, 1.1, -0.4}}},
                 {"a", "b"});
  // b is broadcast over a's batch dimension.
  CheckGradients(Binary("MatMul"),
                 {{"a", {2, 2, 3}, {0.5, -1.25, 2.0, 1.5, -0.75, 0.3, 1, 2, 3, -1, -2, 0.5}},
                  {"b", {3, 2}, {1.5, 0.25, -2.0, 0.7, 1.1, -0.4}}},
                 {"a", "b"});
}

TEST(GradientTest, Reductions) {
  for (const char* op : {"ReduceSum", "ReduceMean"}) {
    SCOPED_TRACE(op);
    for (int64_t keepdims : {0, 1}) {
      // Opset 13: ReduceSum takes axes as an input, ReduceMean as an attribute.
      const Forward f = [op, keepdims](onnx::GraphProto* g) {
        onnx::NodeProto* n;
        if (std::string(op) == "ReduceSum") {
          AddInt64Initializer(g, "axes", {1});
          n = AddNode(g, op, {"a", "axes"}, {"r"});
        } else {
          n = AddNode(g, op, {"a"}, {"r"});
          SetInts(n, "axes", {1});
        }
        SetInt(n, "keepdims", keepdims);
        AddNode(g, "Mul", {"r", "r"}, {"y"});  // a non-uniform incoming gradient
      };
      CheckGradients(f, {kA23}, {"a"});
    }
    // All axes (the default).
    const Forward all = [op](onnx::GraphProto* g) {
      AddNode(g, op, {"a"}, {"r"});
      AddNode(g, "Mul", {"r", "r"}, {"y"});
    };
    CheckGradients(all, {kA23}, {"a"});
  }
  // Opset 12: ReduceSum's axes are an attribute.
  const Forward f12 = [](onnx::GraphProto* g) {
    onnx::NodeProto* n = AddNode(g, "ReduceSum", {"a"}, {"r"});
    SetInts(n, "axes", {0});
    SetInt(n, "keepdims", 0);
    AddNode(g, "Mul", {"r", "r"}, {"y"});
  };
  CheckGradients(f12, {kA23}, {"a"}, 12);
}

TEST(GradientTest, ReshapeAndTranspose) {
  const Forward reshape = [](onnx::GraphProto* g) {
    AddInt64Initializer(g, "shape", {3, 2});
    AddNode(g, "Reshape", {"a", "shape"}, {"r"});
    AddDoubleInitializer(g, "w", {3, 2}, {1, 2, 3, 4, 5, 6});
    AddNode(g, "Mul", {"r", "w"}, {"y"});
  };
  CheckGradients(reshape, {kA23}, {"a"});
  const Forward transpose = [](onnx::GraphProto* g) {
    onnx::NodeProto* n = AddNode(g, "Transpose", {"a"}, {"t"});
    SetInts(n, "perm", {1, 2, 0});
    AddDoubleInitializer(g, "w", {3, 4, 2}, {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                             13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24});
    AddNode(g, "Mul", {"t", "w"}, {"y"});
  };
  std::vector<double> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1 * static_cast<double>(i) - 1;
  CheckGradients(transpose, {{"a", {2, 3, 4}, values}}, {"a"});
  const Forward reverse = [](onnx::GraphProto* g) {
    AddNode(g, "Transpose", {"a"}, {"t"});
    AddDoubleInitializer(g, "w", {3, 2}, {1, 2, 3, 4, 5, 6});
    AddNode(g, "Mul", {"t", "w"}, {"y"});
  };
  CheckGradients(reverse, {kA23}, {"a"});
}

TEST(GradientTest, ChainWithSharedValuesAndShapeOps) {
  // c feeds two consumers, so its gradient is a sum; Shape on the path carries none.
  const Forward f = [](onnx::GraphProto* g) {
    AddNode(g, "Add", {"a", "b"}, {"c"});
    AddNode(g, "Mul", {"c", "a"}, {"d"});
    AddNode(g, "Tanh", {"c"}, {"e"});
    AddNode(g, "Sub", {"d", "e"}, {"f"});
    AddNode(g, "Shape", {"f"}, {"s"});
    AddNode(g, "Reshape", {"f", "s"}, {"h"});
    AddNode(g, "Sigmoid", {"h"}, {"y"});
  };
  CheckGradients(f, {kA23, kB23}, {"a", "b"});
}

TEST(GradientTest, UnusedXGetsZerosOfItsShape) {
  const Forward f = [](onnx::GraphProto* g) { AddNode(g, "Exp", {"a"}, {"y"}); };
  const Input b{"b", {4}, {1, 2, 3, 4}};
  CheckGradients(f, {kA23, b}, {"a", "b"});
}

TEST(GradientTest, FloatModelMatchesTheDefinition) {
  // y = (a + b) * a, so dy/da = 2a + b and dy/db = a (the backend test's graph, on tensors).
  const Forward f = [](onnx::GraphProto* g) {
    AddNode(g, "Add", {"a", "b"}, {"c"});
    AddNode(g, "Mul", {"c", "a"}, {"y"});
  };
  const std::vector<Input> inputs = {{"a", {3}, {1, 2, 3}}, {"b", {3}, {4, 5, 6}}};
  Result<std::shared_ptr<Graph>> g =
      Import(BuildModel(f, inputs, {"a", "b"}, 13, TensorProto::FLOAT));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Result<std::unique_ptr<Session>> s = Session::Create(*g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<OwnedTensor> owned;
  for (const Input& in : inputs) {
    Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, Shape{3});
    ASSERT_TRUE(t.ok());
    for (size_t i = 0; i < 3; ++i) t->data<float>()[i] = static_cast<float>(in.values[i]);
    owned.push_back(std::move(t).value());
  }
  std::vector<Tensor> feeds = {owned[0].view(), owned[1].view()};
  Result<std::vector<OwnedTensor>> out = (*s)->Run(feeds);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  const float* da = (*out)[1].data<const float>();
  const float* db = (*out)[2].data<const float>();
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(da[i], static_cast<float>(2 * inputs[0].values[i] + inputs[1].values[i]));
    EXPECT_FLOAT_EQ(db[i], static_cast<float>(inputs[0].values[i]));
  }
}

// Runs a DOUBLE model on `inputs` and returns its outputs.
std::vector<OwnedTensor> RunModel(const onnx::ModelProto& m, const std::vector<Input>& inputs) {
  Result<std::shared_ptr<Graph>> g = Import(m);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  return Run(*g, inputs);
}

std::vector<double> Doubles(const OwnedTensor& t) {
  const double* p = t.data<const double>();
  return std::vector<double>(p, p + t.num_elements());
}

TEST(GradientTest, ZsAreConstantsAndGradientNodesMayPrecedeY) {
  // y = a * z + b; the Gradient node comes first in the node list, names z in zs, and its
  // output feeds a later node; a second Gradient node differentiates the same y w.r.t. b.
  onnx::ModelProto m = BuildModel([](onnx::GraphProto*) {}, {}, {}, 13);
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_node();
  g->clear_output();
  const std::vector<int64_t> dims = {3};
  for (const char* name : {"a", "z", "b"}) {
    AddValueInfo(g->mutable_input(), name, TensorProto::DOUBLE, &dims);
  }
  onnx::NodeProto* n = AddNode(g, "Gradient", {"a", "z"}, {"ga"}, "first");
  n->set_domain(kTrainingDomain);
  SetStrings(n, "xs", {"a"});
  SetStrings(n, "zs", {"z"});
  SetString(n, "y", "y");
  AddNode(g, "Add", {"ga", "ga"}, {"twice_ga"});
  AddNode(g, "Mul", {"a", "z"}, {"p"});
  AddNode(g, "Add", {"p", "b"}, {"y"});
  n = AddNode(g, "Gradient", {"b"}, {"gb"}, "second");
  n->set_domain(kTrainingDomain);
  SetStrings(n, "xs", {"b"});
  SetString(n, "y", "y");
  for (const char* name : {"twice_ga", "gb"}) {
    AddValueInfo(g->mutable_output(), name, TensorProto::DOUBLE, &dims);
  }
  const std::vector<OwnedTensor> out =
      RunModel(m, {{"a", {3}, {1, 2, 3}}, {"z", {3}, {0.5, -1, 4}}, {"b", {3}, {7, 8, 9}}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Doubles(out[0]), (std::vector<double>{1, -2, 8}));
  EXPECT_EQ(Doubles(out[1]), (std::vector<double>{1, 1, 1}));
}

TEST(GradientTest, GraphsWithoutGradientAreReturnedAsTheyAre) {
  Result<std::shared_ptr<Graph>> g = Import(BuildModel(Unary("Exp"), {kA23}, {}, 13));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Result<std::shared_ptr<Graph>> same = ExpandGradients(*g);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->get(), g->get());
}

// ---------------------------------------------------------------------------------------------
// Errors.

TEST(GradientTest, OpWithoutRuleIsUnimplemented) {
  const Forward f = [](onnx::GraphProto* g) {
    AddNode(g, "Exp", {"a"}, {"e"});
    AddNode(g, "Erf", {"e"}, {"y"}, "erf_node");
  };
  ExpectError(Import(BuildModel(f, {kA23}, {"a"}, 13)), StatusCode::kUnimplemented,
              {"op Erf on the path from 'a' to 'y' has no gradient rule", "node 'erf_node'"});
}

TEST(GradientTest, ExponentDependingOnXIsUnimplemented) {
  ExpectError(Import(BuildModel(Binary("Pow"), {kPositive23, kB23}, {"a", "b"}, 13)),
              StatusCode::kUnimplemented, {"exponent of Pow depends on 'b'"});
}

// Builds a model whose Gradient node has the given xs and y (the forward graph is y = Exp(a)).
onnx::ModelProto GradientModel(const std::vector<std::string>& xs, const std::string& y,
                               const std::vector<std::string>& outputs) {
  onnx::ModelProto m = BuildModel(Unary("Exp"), {kA23}, {}, 13);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto* n = AddNode(g, "Gradient", {"a"}, outputs, "bad_grad");
  n->set_domain(kTrainingDomain);
  SetStrings(n, "xs", xs);
  SetString(n, "y", y);
  return m;
}

TEST(GradientTest, MalformedGradientNodesAreRejected) {
  ExpectError(Import(GradientModel({"nope"}, "y", {"g0"})), StatusCode::kInvalidArgument,
              {"xs names 'nope', which is not a value of the graph", "node 'bad_grad'"});
  ExpectError(Import(GradientModel({"a"}, "missing", {"g0"})), StatusCode::kInvalidArgument,
              {"y names 'missing'"});
  ExpectError(Import(GradientModel({"a"}, "a_free", {"g0"})), StatusCode::kInvalidArgument,
              {"y names 'a_free'"});
}

TEST(GradientTest, YThatDependsOnNoXIsRejected) {
  const Forward f = [](onnx::GraphProto* g) {
    AddNode(g, "Exp", {"a"}, {"y"});
    AddNode(g, "Neg", {"b"}, {"nb"});
  };
  onnx::ModelProto m = BuildModel(f, {kA23, kB23}, {}, 13);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto* n = AddNode(g, "Gradient", {"b"}, {"gb"}, "g");
  n->set_domain(kTrainingDomain);
  SetStrings(n, "xs", {"b"});
  SetString(n, "y", "y");
  ExpectError(Import(m), StatusCode::kInvalidArgument, {"y 'y' does not depend on any of xs"});
}

TEST(GradientTest, YThatDependsOnTheGradientItselfIsRejected) {
  // y = Exp(grad_a) where grad_a = dy/da: a cycle through the Gradient node.
  onnx::ModelProto m = BuildModel([](onnx::GraphProto*) {}, {kA23}, {}, 13);
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_node();
  g->clear_output();
  onnx::NodeProto* n = AddNode(g, "Gradient", {"a"}, {"grad_a"}, "self");
  n->set_domain(kTrainingDomain);
  SetStrings(n, "xs", {"a"});
  SetString(n, "y", "y");
  AddNode(g, "Exp", {"grad_a"}, {"y"});
  SetInt(AddNode(g, "ReduceSum", {"y"}, {"y_sum"}, "y_sum"), "keepdims", 0);
  const std::vector<int64_t> scalar;
  AddValueInfo(g->mutable_output(), "y_sum", TensorProto::DOUBLE, &scalar);
  ExpectError(Import(m), StatusCode::kInvalidArgument, {"depends on this node's own outputs"});
}

TEST(GradientTest, BroadcastOverUnknownShapesIsUnimplemented) {
  onnx::ModelProto m = BuildModel(Binary("Mul"), {kA23, {"b", {3}, {1, 2, 3}}}, {"a", "b"}, 13);
  // a becomes [batch, 3]: b's broadcast axes are no longer statically known.
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  m.mutable_graph()
      ->mutable_output(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  ExpectError(Import(m), StatusCode::kUnimplemented,
              {"op Mul may broadcast 'b'", "not statically known"});
}

TEST(GradientTest, MatMulOfVectorsIsUnimplemented) {
  ExpectError(Import(BuildModel(Binary("MatMul"), {{"a", {3}, {1, 2, 3}}, {"b", {3}, {4, 5, 6}}},
                                {"a", "b"}, 13)),
              StatusCode::kUnimplemented, {"MatMul needs operands of known rank >= 2"});
}

TEST(GradientTest, WrongOutputCountIsRejected) {
  ExpectError(Import(GradientModel({"a"}, "y", {"g0", "g1"})), StatusCode::kInvalidArgument,
              {"2 outputs for 1 xs"});
}

}  // namespace
}  // namespace kiln
