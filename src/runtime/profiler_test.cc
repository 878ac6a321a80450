// SPDX-License-Identifier: Apache-2.0
#include "runtime/profiler.h"

#include <gtest/gtest.h>

#include "op/kiln_ops.h"
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

TEST(NearestRankPercentileTest, PicksTheValueAtTheCeilingRank) {
  const std::vector<double> v = {1, 2, 3, 4, 5};
  EXPECT_EQ(NearestRankPercentile(v, 50), 3);   // rank ceil(2.5) = 3
  EXPECT_EQ(NearestRankPercentile(v, 30), 2);   // rank ceil(1.5) = 2
  EXPECT_EQ(NearestRankPercentile(v, 99), 5);   // rank ceil(4.95) = 5
  EXPECT_EQ(NearestRankPercentile(v, 100), 5);  // rank 5
  EXPECT_EQ(NearestRankPercentile(v, 0), 1);    // rank 0, clamped to 1
  EXPECT_EQ(NearestRankPercentile({}, 50), 0);
  EXPECT_EQ(GflopsPerSecond(3000, 1500), 2.0);  // 3000 FLOPs in 1.5 us
  EXPECT_EQ(GflopsPerSecond(3000, 0), 0);
}

// Nodes a (Conv), b (Relu), c (Conv), d (Add); d never runs.
std::shared_ptr<Graph> FourNodeGraph() {
  auto g = std::make_shared<Graph>();
  const char* ops[] = {"Conv", "Relu", "Conv", "Add"};
  const char* names[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.name = names[i];
    n.op_type = ops[i];
    g->AddNode(std::move(n));
  }
  return g;
}

RunProfile MakeRun(int64_t start_ns, int64_t end_ns, std::vector<NodeTiming> nodes) {
  RunProfile r;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.nodes = std::move(nodes);
  return r;
}

TEST(SummarizeRunsTest, SumsPerNodeAndPerOpTypeAndTakesLatencyPercentiles) {
  const std::shared_ptr<Graph> g = FourNodeGraph();
  // Four runs of 4, 1, 3 and 2 ms. a and c run every time (100 ns each, 1000 and 500 FLOPs); b
  // runs in the first two only, 400 ns each.
  std::vector<RunProfile> runs;
  const int64_t ms = 1000000;
  const int64_t lengths_ms[] = {4, 1, 3, 2};
  for (int r = 0; r < 4; ++r) {
    const int64_t t0 = 10 * ms * r;
    auto timing = [](int node, int64_t start, int64_t duration, double flops) {
      NodeTiming t;
      t.node = node;
      t.start_ns = start;
      t.duration_ns = duration;
      t.flops = flops;
      return t;
    };
    std::vector<NodeTiming> nodes = {timing(0, t0, 100, 1000), timing(2, t0 + 200, 100, 500)};
    if (r < 2) nodes.insert(nodes.begin() + 1, timing(1, t0 + 100, 400, 0));
    runs.push_back(MakeRun(t0, t0 + lengths_ms[r] * ms, nodes));
  }
  const RunsSummary s = SummarizeRuns(*g, runs);
  EXPECT_EQ(s.runs, 4);
  // Sorted latencies 1, 2, 3, 4: median rank ceil(2) = 2, p99 rank ceil(3.96) = 4.
  EXPECT_DOUBLE_EQ(s.median_ms, 2);
  EXPECT_DOUBLE_EQ(s.p99_ms, 4);
  EXPECT_DOUBLE_EQ(s.mean_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.max_ms, 4);
  EXPECT_DOUBLE_EQ(s.total_ms, 10);
  EXPECT_DOUBLE_EQ(s.runs_per_s, 400);  // 4 runs in 10 ms
  EXPECT_EQ(s.node_total_ns, 4 * 100 + 2 * 400 + 4 * 100);
  EXPECT_EQ(s.flops, 4 * 1000 + 4 * 500);

  // b 800 ns first; a and c tie at 400 ns and keep graph order; d never ran.
  ASSERT_EQ(s.nodes.size(), 3u);
  EXPECT_EQ(s.nodes[0].node, 1);
  EXPECT_EQ(s.nodes[0].calls, 2);
  EXPECT_EQ(s.nodes[0].total_ns, 800);
  EXPECT_EQ(s.nodes[0].flops, 0);
  EXPECT_EQ(s.nodes[1].node, 0);
  EXPECT_EQ(s.nodes[1].calls, 4);
  EXPECT_EQ(s.nodes[1].total_ns, 400);
  EXPECT_EQ(s.nodes[1].flops, 4000);
  EXPECT_EQ(s.nodes[2].node, 2);
  EXPECT_EQ(s.nodes[2].flops, 2000);
  EXPECT_DOUBLE_EQ(s.PercentOfNodeTime(800), 50);
  EXPECT_DOUBLE_EQ(s.PercentOfNodeTime(400), 25);

  // Relu 800 ns and Conv (a + c) 800 ns tie: Relu appears first in `nodes`.
  ASSERT_EQ(s.op_types.size(), 2u);
  EXPECT_EQ(s.op_types[0].op_type, "Relu");
  EXPECT_EQ(s.op_types[0].nodes, 1);
  EXPECT_EQ(s.op_types[0].calls, 2);
  EXPECT_EQ(s.op_types[0].total_ns, 800);
  EXPECT_EQ(s.op_types[1].op_type, "Conv");
  EXPECT_EQ(s.op_types[1].nodes, 2);
  EXPECT_EQ(s.op_types[1].calls, 8);
  EXPECT_EQ(s.op_types[1].total_ns, 800);
  EXPECT_EQ(s.op_types[1].flops, 6000);
  EXPECT_DOUBLE_EQ(GflopsPerSecond(s.op_types[1].flops, s.op_types[1].total_ns), 7.5);
}

TEST(SummarizeRunsTest, NoRunsGiveZeros) {
  const std::shared_ptr<Graph> g = FourNodeGraph();
  const RunsSummary s = SummarizeRuns(*g, {});
  EXPECT_EQ(s.runs, 0);
  EXPECT_EQ(s.median_ms, 0);
  EXPECT_EQ(s.runs_per_s, 0);
  EXPECT_TRUE(s.nodes.empty());
  EXPECT_TRUE(s.op_types.empty());
  EXPECT_EQ(s.PercentOfNodeTime(5), 0);
}

}  // namespace
}  // namespace kiln
