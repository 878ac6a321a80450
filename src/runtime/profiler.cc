// SPDX-License-Identifier: Apache-2.0
#include "runtime/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/check.h"
#include "op/kiln_ops.h"

namespace kiln {

int64_t ProfileNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

const Tensor* InputAt(std::span<const Tensor> inputs, size_t i) {
  return i < inputs.size() && inputs[i].valid() ? &inputs[i] : nullptr;
}

// 2 * out * (W elements per output channel): Conv and FusedConv (W [M, C/group, k...]); `out`
// counts Y's real elements (a blocked Y's padding channels excluded).
double ConvFlops(std::span<const Tensor> inputs, std::span<const OwnedTensor> outputs) {
  const Tensor* w = InputAt(inputs, 1);
  if (w == nullptr || outputs.empty() || !outputs[0].valid() || w->rank() < 1 || w->dim(0) == 0) {
    return 0;
  }
  double out = static_cast<double>(outputs[0].num_elements());
  const Tensor& y = outputs[0].view();
  if (y.rank() == w->rank() + 1 && y.dim(1) > 0 && y.dim(y.rank() - 1) > 0) {
    // A channel-blocked Y (kiln_ops.h, [N, ceil(M/b), spatial..., b]): its padding is not work.
    out =
        out * static_cast<double>(w->dim(0)) / static_cast<double>(y.dim(1) * y.dim(y.rank() - 1));
  }
  // Exact: W's element count is a multiple of its first dim.
  const int64_t per_channel = w->num_elements() / w->dim(0);
  return 2.0 * out * static_cast<double>(per_channel);
}

// 2 * X elements * (W elements per input channel): ConvTranspose (W [C, M/group, k...]).
double ConvTransposeFlops(std::span<const Tensor> inputs) {
  const Tensor* x = InputAt(inputs, 0);
  const Tensor* w = InputAt(inputs, 1);
  if (x == nullptr || w == nullptr || w->rank() < 1 || w->dim(0) == 0) return 0;
  const int64_t per_channel = w->num_elements() / w->dim(0);  // exact, as in ConvFlops
  return 2.0 * static_cast<double>(x->num_elements()) * static_cast<double>(per_channel);
}

// 2 * Y elements * K, K the reduced dim of A.
double MatMulFlops(std::span<const Tensor> inputs, std::span<const OwnedTensor> outputs,
                   bool trans_a) {
  const Tensor* a = InputAt(inputs, 0);
  if (a == nullptr || a->rank() < 1 || outputs.empty() || !outputs[0].valid()) return 0;
  const int64_t k = trans_a && a->rank() >= 2 ? a->dim(a->rank() - 2) : a->dim(a->rank() - 1);
  return 2.0 * static_cast<double>(outputs[0].num_elements()) * static_cast<double>(k);
}

// Q K^T and P V: 2*S*T*D + 2*S*T*Dv per leading index.
double AttentionFlops(std::span<const Tensor> inputs) {
  const Tensor* q = InputAt(inputs, 0);
  const Tensor* k = InputAt(inputs, 1);
  const Tensor* v = InputAt(inputs, 2);
  if (q == nullptr || k == nullptr || v == nullptr || q->rank() < 2 || k->rank() < 2 ||
      v->rank() < 2) {
    return 0;
  }
  const double s = static_cast<double>(q->dim(q->rank() - 2));
  const double d = static_cast<double>(q->dim(q->rank() - 1));
  const double t = static_cast<double>(k->dim(k->rank() - 2));
  const double dv = static_cast<double>(v->dim(v->rank() - 1));
  const double lead = s * d == 0 ? 0 : static_cast<double>(q->num_elements()) / (s * d);
  return lead * (2.0 * s * t * d + 2.0 * s * t * dv);
}

}  // namespace

double NodeFlops(const Node& node, std::span<const Tensor> inputs,
                 std::span<const OwnedTensor> outputs) {
  const std::string& op = node.op_type;
  if (node.domain.empty()) {
    if (op == "Conv") return ConvFlops(inputs, outputs);
    if (op == "ConvTranspose") return ConvTransposeFlops(inputs);
    if (op == "MatMul") return MatMulFlops(inputs, outputs, false);
    if (op == "Gemm") return MatMulFlops(inputs, outputs, node.GetInt("transA", 0) != 0);
    return 0;
  }
  if (node.domain == kKilnDomain) {
    if (op == kFusedConvOp) return ConvFlops(inputs, outputs);
    if (op == kFusedMatMulOp) return MatMulFlops(inputs, outputs, false);
    if (op == kFusedGemmOp) return MatMulFlops(inputs, outputs, node.GetInt("transA", 0) != 0);
    if (op == kAttentionOp) return AttentionFlops(inputs);
  }
  return 0;
}

double NearestRankPercentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double GflopsPerSecond(double flops, int64_t ns) {
  return ns > 0 ? flops / static_cast<double>(ns) : 0.0;  // FLOP/ns = GFLOP/s
}

double RunsSummary::PercentOfNodeTime(int64_t ns) const {
  return node_total_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(node_total_ns)
                           : 0.0;
}

namespace {

void SummarizeLatency(std::span<const RunProfile> runs, RunsSummary* s) {
  std::vector<double> latency_ms;
  latency_ms.reserve(runs.size());
  for (const RunProfile& run : runs) {
    const double ms = static_cast<double>(run.end_ns - run.start_ns) / 1e6;
    latency_ms.push_back(ms);
    s->total_ms += ms;
  }
  s->runs = static_cast<int64_t>(runs.size());
  if (latency_ms.empty()) return;
  std::sort(latency_ms.begin(), latency_ms.end());
  s->median_ms = NearestRankPercentile(latency_ms, 50);
  s->p99_ms = NearestRankPercentile(latency_ms, 99);
  s->mean_ms = s->total_ms / static_cast<double>(latency_ms.size());
  s->min_ms = latency_ms.front();
  s->max_ms = latency_ms.back();
  s->runs_per_s = s->total_ms > 0 ? static_cast<double>(runs.size()) / (s->total_ms / 1e3) : 0;
}

void SummarizeNodes(const Graph& graph, std::span<const RunProfile> runs, RunsSummary* s) {
  std::vector<NodeSummary> per_node(static_cast<size_t>(graph.num_nodes()));
  for (size_t n = 0; n < per_node.size(); ++n) per_node[n].node = static_cast<int>(n);
  for (const RunProfile& run : runs) {
    for (const NodeTiming& t : run.nodes) {
      KILN_CHECK(t.node >= 0 && t.node < graph.num_nodes(), "node ", t.node, " of a RunProfile ",
                 "is not in a graph of ", graph.num_nodes(), " nodes");
      NodeSummary& n = per_node[static_cast<size_t>(t.node)];
      ++n.calls;
      n.total_ns += t.duration_ns;
      n.flops += t.flops;
      s->node_total_ns += t.duration_ns;
      s->flops += t.flops;
    }
  }
  std::erase_if(per_node, [](const NodeSummary& n) { return n.calls == 0; });
  std::stable_sort(
      per_node.begin(), per_node.end(),
      [](const NodeSummary& a, const NodeSummary& b) { return a.total_ns > b.total_ns; });
  s->nodes = std::move(per_node);
}

void SummarizeOpTypes(const Graph& graph, RunsSummary* s) {
  std::vector<OpTypeSummary>& per_op = s->op_types;
  for (const NodeSummary& n : s->nodes) {
    const std::string& op = graph.node(n.node).op_type;
    auto it = std::find_if(per_op.begin(), per_op.end(),
                           [&](const OpTypeSummary& o) { return o.op_type == op; });
    if (it == per_op.end()) it = per_op.insert(per_op.end(), OpTypeSummary{op});
    it->nodes += 1;
    it->calls += n.calls;
    it->total_ns += n.total_ns;
    it->flops += n.flops;
  }
  std::stable_sort(
      per_op.begin(), per_op.end(),
      [](const OpTypeSummary& a, const OpTypeSummary& b) { return a.total_ns > b.total_ns; });
}

}  // namespace

RunsSummary SummarizeRuns(const Graph& graph, std::span<const RunProfile> runs) {
  RunsSummary s;
  SummarizeLatency(runs, &s);
  SummarizeNodes(graph, runs, &s);
  SummarizeOpTypes(graph, &s);
  return s;
}

}  // namespace kiln
