// SPDX-License-Identifier: Apache-2.0
// ONNX exporter: a graph exported and imported again has the same structure (names, domains,
// opset imports, types, attributes of every simple kind, initializers) and computes the same
// outputs.

#include "graph/onnx/exporter.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "graph/onnx/importer.h"
#include "runtime/session.h"

namespace kiln {
namespace {

OwnedTensor Floats(const Shape& shape, std::vector<float> v) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), "alloc");
  for (size_t i = 0; i < v.size(); ++i) t->data<float>()[i] = v[i];
  return std::move(t).value();
}

// y = FusedMatMul(x, w, bias, activation LeakyRelu [0.5]) then Transpose, z = Cast(y) to FP64.
std::shared_ptr<Graph> SampleGraph() {
  auto g = std::make_shared<Graph>();
  g->name = "sample";
  g->ir_version = 8;
  g->opset_imports[""] = 17;
  g->opset_imports["ai.kiln"] = 1;
  Value x;
  x.name = "x";
  x.type.dtype = DataType::kFloat32;
  x.type.has_shape = true;
  x.type.dims = {Dim{-1, "batch"}, Dim{2, {}}};
  const int xi = g->AddValue(x);
  g->inputs.push_back(xi);
  Value w;
  w.name = "w";
  w.constant = std::make_shared<const OwnedTensor>(Floats(Shape{2, 3}, {1, 2, 3, -4, -5, -6}));
  w.type.dtype = DataType::kFloat32;
  w.type.has_shape = true;
  w.type.dims = {Dim{2, {}}, Dim{3, {}}};
  const int wi = g->AddValue(w);
  Value b = w;
  b.name = "bias";
  b.constant = std::make_shared<const OwnedTensor>(Floats(Shape{3}, {0.5f, 0, -0.5f}));
  b.type.dims = {Dim{3, {}}};
  const int bi = g->AddValue(b);
  Value y;
  y.name = "y";
  y.type.dtype = DataType::kFloat32;
  y.type.has_shape = true;
  y.type.dims = {Dim{-1, "batch"}, Dim{3, {}}};
  const int yi = g->AddValue(y);
  Value yt;
  yt.name = "yt";
  const int yti = g->AddValue(yt);
  Value z;
  z.name = "z";
  z.type.dtype = DataType::kFloat64;
  z.type.has_shape = true;  // the checker wants a shape on graph outputs
  z.type.dims = {Dim{3, {}}, Dim{-1, "batch"}};
  const int zi = g->AddValue(z);
  Node fused;
  fused.name = "fused";
  fused.op_type = "FusedMatMul";
  fused.domain = "ai.kiln";
  fused.inputs = {xi, wi, bi};
  fused.outputs = {yi};
  Attribute act;
  act.name = "activation";
  act.type = AttributeType::kString;
  act.s = "LeakyRelu";
  Attribute params;
  params.name = "activation_params";
  params.type = AttributeType::kFloats;
  params.floats = {0.5f};
  fused.attributes = {act, params};
  g->AddNode(fused);
  Node tr;
  tr.name = "tr";
  tr.op_type = "Transpose";
  tr.inputs = {yi};
  tr.outputs = {yti};
  tr.attributes = {Attribute::Ints("perm", {1, 0})};
  g->AddNode(tr);
  Node cast;
  cast.name = "cast";
  cast.op_type = "Cast";
  cast.inputs = {yti};
  cast.outputs = {zi};
  cast.attributes = {Attribute::Int("to", 11)};
  g->AddNode(cast);
  g->outputs = {zi, yi};
  return g;
}

TEST(ExporterTest, RoundTripsStructure) {
  std::shared_ptr<Graph> g = SampleGraph();
  Result<std::string> bytes = ExportOnnxModel(*g);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Result<std::shared_ptr<Graph>> back = ImportOnnxModelFromString(*bytes, "exported");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const Graph& h = **back;
  EXPECT_EQ(h.name, "sample");
  EXPECT_EQ(h.OpsetFor(""), 17);
  EXPECT_EQ(h.OpsetFor("ai.kiln"), 1);
  ASSERT_EQ(h.num_nodes(), 3);
  EXPECT_EQ(h.node(0).domain, "ai.kiln");
  EXPECT_EQ(h.node(0).GetString("activation", ""), "LeakyRelu");
  EXPECT_EQ(h.node(0).GetFloats("activation_params"), std::vector<float>{0.5f});
  EXPECT_EQ(h.node(1).GetInts("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(h.node(2).GetInt("to", 0), 11);
  ASSERT_EQ(h.inputs.size(), 1u);
  EXPECT_EQ(h.value(h.inputs[0]).type.ToString(), "FP32[batch,2]");
  ASSERT_EQ(h.outputs.size(), 2u);
  EXPECT_EQ(h.value(h.outputs[0]).name, "z");
  EXPECT_EQ(h.value(h.outputs[1]).type.ToString(), "FP32[batch,3]");
  const int w = h.FindValue("w");
  ASSERT_GE(w, 0);
  ASSERT_TRUE(h.value(w).is_constant());
  EXPECT_EQ(h.value(w).constant->data<const float>()[3], -4.0f);
}

TEST(ExporterTest, ExportedModelComputesTheSame) {
  std::shared_ptr<Graph> g = SampleGraph();
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln_exporter_test.onnx").string();
  ASSERT_TRUE(WriteOnnxModel(*g, path).ok());
  Result<std::shared_ptr<Graph>> back = ImportOnnxModel(path);
  std::remove(path.c_str());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  OwnedTensor x = Floats(Shape{2, 2}, {1, 0, -1, 2});
  std::vector<Tensor> in = {x.view()};
  Result<std::unique_ptr<Session>> s1 = Session::Create(g);
  Result<std::unique_ptr<Session>> s2 = Session::Create(*back);
  ASSERT_TRUE(s1.ok() && s2.ok()) << s2.status().ToString();
  Result<std::vector<OwnedTensor>> a = (*s1)->Run(in);
  Result<std::vector<OwnedTensor>> b = (*s2)->Run(in);
  ASSERT_TRUE(a.ok() && b.ok());
  // y row 0: x=[1,0] -> [1,2,3] + bias -> [1.5, 2, 2.5]; row 1: x=[-1,2] -> [-9,-12,-15] +
  // bias -> [-8.5,-12,-15.5], LeakyRelu 0.5 -> [-4.25,-6,-7.75]. z = y^T as FP64.
  const std::vector<double> want = {1.5, -4.25, 2, -6, 2.5, -7.75};
  for (const auto* outs : {&*a, &*b}) {
    ASSERT_EQ(outs->at(0).dtype(), DataType::kFloat64);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_DOUBLE_EQ(outs->at(0).data<const double>()[i], want[i]) << i;
    }
  }
}

TEST(ExporterTest, UnwritablePathIsAnError) {
  Status s = WriteOnnxModel(*SampleGraph(), "/nonexistent-dir/x.onnx");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/x.onnx"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace kiln
