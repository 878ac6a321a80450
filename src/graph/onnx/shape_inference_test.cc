// SPDX-License-Identifier: Apache-2.0
// Tests for shape inference in a child process: inferred types reach the parent's model (main
// graph and subgraphs), and every failure (an inference error, a crash, a timeout) leaves the
// model as it was.

#include "graph/onnx/shape_inference.h"

#include <gtest/gtest.h>

namespace kiln::onnx_internal {
namespace {

using onnx::TensorProto;

void AddTensorInfo(onnx::ValueInfoProto* vi, const std::string& name, int32_t elem,
                   const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  for (const std::string& in : inputs) n->add_input(in);
  for (const std::string& out : outputs) n->add_output(out);
  return n;
}

// x -> Relu -> h -> If(cond){ Neg(h) -> t } -> y, with no value_info.
onnx::ModelProto Model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  AddTensorInfo(g->add_input(), "x", TensorProto::FLOAT, {2, 3});
  AddTensorInfo(g->add_input(), "cond", TensorProto::BOOL, {});
  AddNode(g, "Relu", {"x"}, {"h"});
  onnx::NodeProto* if_node = AddNode(g, "If", {"cond"}, {"y"});
  for (const char* name : {"then_branch", "else_branch"}) {
    onnx::AttributeProto* a = if_node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* sub = a->mutable_g();
    sub->set_name(name);
    AddNode(sub, "Neg", {"h"}, {"t"});
    AddNode(sub, "Abs", {"t"}, {"u"});
    AddTensorInfo(sub->add_output(), "u", TensorProto::FLOAT, {2, 3});
  }
  AddTensorInfo(g->add_output(), "y", TensorProto::FLOAT, {2, 3});
  return m;
}

TEST(ShapeInferenceTest, InferredTypesReachEveryGraph) {
  onnx::ModelProto m = Model();
  Status s = InferShapesIsolated(&m, std::chrono::seconds(60));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(m.graph().value_info_size(), 1);
  EXPECT_EQ(m.graph().value_info(0).name(), "h");
  EXPECT_EQ(m.graph().value_info(0).type().tensor_type().shape().dim(1).dim_value(), 3);
  for (int b = 0; b < 2; ++b) {
    const onnx::GraphProto& sub = m.graph().node(1).attribute(b).g();
    ASSERT_EQ(sub.value_info_size(), 1) << sub.name();
    EXPECT_EQ(sub.value_info(0).name(), "t");
    EXPECT_EQ(sub.value_info(0).type().tensor_type().elem_type(), TensorProto::FLOAT);
  }
}

TEST(ShapeInferenceTest, FailuresLeaveTheModelUnchanged) {
  // An inference error: the declared output type contradicts the inferred one.
  onnx::ModelProto bad = Model();
  bad.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::INT64);
  const std::string before = bad.SerializeAsString();
  Status s = InferShapesIsolated(&bad, std::chrono::seconds(60));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("Inferred elem type differs"), std::string::npos) << s.ToString();
  EXPECT_EQ(bad.SerializeAsString(), before);

  // A crash inside libonnx (LayerNormalization with an absurd axis).
  onnx::ModelProto crash;
  crash.set_ir_version(8);
  crash.add_opset_import()->set_version(17);
  onnx::GraphProto* g = crash.mutable_graph();
  AddTensorInfo(g->add_input(), "X", TensorProto::FLOAT, {2, 3, 5});
  AddTensorInfo(g->add_input(), "W", TensorProto::FLOAT, {3, 5});
  onnx::NodeProto* ln = AddNode(g, "LayerNormalization", {"X", "W"}, {"Y", "Mean"});
  onnx::AttributeProto* axis = ln->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-67108866);
  AddTensorInfo(g->add_output(), "Y", TensorProto::FLOAT, {2, 3, 5});
  AddTensorInfo(g->add_output(), "Mean", TensorProto::FLOAT, {2, 1, 1});
  const std::string crash_before = crash.SerializeAsString();
  s = InferShapesIsolated(&crash, std::chrono::seconds(60));
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_EQ(crash.SerializeAsString(), crash_before);

  // No time at all: the child is killed and nothing changes.
  onnx::ModelProto slow = Model();
  const std::string slow_before = slow.SerializeAsString();
  s = InferShapesIsolated(&slow, std::chrono::milliseconds(0));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ(slow.SerializeAsString(), slow_before);
}

}  // namespace
}  // namespace kiln::onnx_internal
