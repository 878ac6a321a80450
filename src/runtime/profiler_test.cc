// SPDX-License-Identifier: Apache-2.0
#include "runtime/profiler.h"

#include <gtest/gtest.h>

#include "graph/kiln_ops.h"
#include "runtime/session.h"

namespace kiln {
namespace {

Node MakeNode(std::string op, std::string domain = "") {
  Node n;
  n.op_type = std::move(op);
  n.domain = std::move(domain);
  return n;
}

// Views with shapes only: NodeFlops never reads data.
Tensor View(std::vector<int64_t> dims) {
  static float dummy;
  return Tensor(DataType::kFloat32, *Shape::Create(dims), &dummy);
}

OwnedTensor Out(std::vector<int64_t> dims) {
  return *OwnedTensor::Allocate(DataType::kFloat32, *Shape::Create(dims));
}

TEST(NodeFlopsTest, CountsMultiplyAddsAsTwoFromRunTimeShapes) {
  // Conv: X [2,6,9,9], W [4,3,3,3] (group 2), Y [2,4,7,7]: 2 * |Y| * 3*3*3.
  {
    Tensor in[] = {View({2, 6, 9, 9}), View({4, 3, 3, 3})};
    OwnedTensor out[] = {Out({2, 4, 7, 7})};
    EXPECT_EQ(NodeFlops(MakeNode("Conv"), in, out), 2.0 * (2 * 4 * 7 * 7) * 27);
    EXPECT_EQ(NodeFlops(MakeNode(std::string(kFusedConvOp), std::string(kKilnDomain)), in, out),
              2.0 * (2 * 4 * 7 * 7) * 27);
  }
  // ConvTranspose: X [1,4,5,5], W [4,2,3,3]: every input pixel scatters 2*3*3 products.
  {
    Tensor in[] = {View({1, 4, 5, 5}), View({4, 2, 3, 3})};
    OwnedTensor out[] = {Out({1, 2, 7, 7})};
    EXPECT_EQ(NodeFlops(MakeNode("ConvTranspose"), in, out), 2.0 * 100 * 18);
  }
  // MatMul with batch broadcast: [3,5,8] x [8,6] -> [3,5,6], K 8.
  {
    Tensor in[] = {View({3, 5, 8}), View({8, 6})};
    OwnedTensor out[] = {Out({3, 5, 6})};
    EXPECT_EQ(NodeFlops(MakeNode("MatMul"), in, out), 2.0 * 90 * 8);
    EXPECT_EQ(NodeFlops(MakeNode(std::string(kFusedMatMulOp), std::string(kKilnDomain)), in, out),
              2.0 * 90 * 8);
  }
  // Gemm with transA: A [7,4] is A' [4,7], K 7.
  {
    Node gemm = MakeNode("Gemm");
    Attribute trans;
    trans.name = "transA";
    trans.type = AttributeType::kInt;
    trans.i = 1;
    gemm.attributes.push_back(trans);
    Tensor in[] = {View({7, 4}), View({7, 3})};
    OwnedTensor out[] = {Out({4, 3})};
    EXPECT_EQ(NodeFlops(gemm, in, out), 2.0 * 12 * 7);
    EXPECT_EQ(NodeFlops(MakeNode("Gemm"), in, out), 2.0 * 12 * 4);  // without it, K is A's dim 1
  }
  // Attention: Q [2,3,4,8] K [2,3,6,8] V [2,3,6,5]: per (b, h) 2*S*T*D + 2*S*T*Dv.
  {
    Tensor in[] = {View({2, 3, 4, 8}), View({2, 3, 6, 8}), View({2, 3, 6, 5})};
    OwnedTensor out[] = {Out({2, 3, 4, 5})};
    EXPECT_EQ(NodeFlops(MakeNode(std::string(kAttentionOp), std::string(kKilnDomain)), in, out),
              6.0 * (2 * 4 * 6 * 8 + 2 * 4 * 6 * 5));
  }
  // Ops without a count, and a MatMul in another domain.
  {
    Tensor in[] = {View({3, 5})};
    OwnedTensor out[] = {Out({3, 5})};
    EXPECT_EQ(NodeFlops(MakeNode("Relu"), in, out), 0);
    EXPECT_EQ(NodeFlops(MakeNode("MatMul", "com.example"), in, out), 0);
  }
}

TEST(RunWithProfileTest, TimesEveryNodeInOrder) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = {Dim{2, ""}, Dim{3, ""}};
  const int x = g->AddValue({"x", t, -1, nullptr});
  g->inputs.push_back(x);
  int prev = x;
  const char* ops[] = {"Relu", "Sigmoid", "Neg"};
  for (int i = 0; i < 3; ++i) {
    const int y = g->AddValue({"v" + std::to_string(i), ValueType{}, -1, nullptr});
    Node n;
    n.name = std::string("n") + std::to_string(i);
    n.op_type = ops[i];
    n.inputs = {prev};
    n.outputs = {y};
    g->AddNode(std::move(n));
    prev = y;
  }
  g->outputs = {prev};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  float data[6] = {1, -2, 3, -4, 5, -6};
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{2, 3}, data)};
  RunProfile profile;
  for (int run = 0; run < 2; ++run) {  // a recording run, then a planned one
    Result<std::vector<OwnedTensor>> out = (*s)->RunWithProfile(in, &profile);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(profile.nodes.size(), 3u);
    int64_t last_end = profile.start_ns;
    for (int i = 0; i < 3; ++i) {
      const NodeTiming& nt = profile.nodes[static_cast<size_t>(i)];
      EXPECT_EQ(nt.node, i);
      EXPECT_GE(nt.start_ns, last_end);
      EXPECT_GE(nt.duration_ns, 0);
      EXPECT_EQ(nt.flops, 0);
      last_end = nt.start_ns + nt.duration_ns;
    }
    EXPECT_LE(last_end, profile.end_ns);
  }
  // Plain runs leave a profile alone.
  ASSERT_TRUE((*s)->Run(in).ok());
  EXPECT_EQ(profile.nodes.size(), 3u);
}

}  // namespace
}  // namespace kiln
