// SPDX-License-Identifier: Apache-2.0
#pragma once
// The harness of the kernel microbenchmarks (kernels_bench, int8_bench): one node of an op in a
// graph of its own, with random inputs (constant ones become initializers, as weights are), the
// kernel a provider builds for it, and a Google Benchmark loop over Kernel::Compute.

#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "graph/ir.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

namespace kiln::bench_kernels {

struct In {
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> dims;
  bool constant = false;
  double lo = -1, hi = 1;  // uniform range (integers: inclusive)
  bool omitted = false;    // an optional input left out
};

inline OwnedTensor RandomTensor(const In& in, std::mt19937& rng) {
  OwnedTensor t = OwnedTensor::Allocate(in.dtype, Shape(std::span<const int64_t>(in.dims))).value();
  const int64_t n = t.num_elements();
  if (in.dtype == DataType::kFloat32) {
    std::uniform_real_distribution<float> d(float(in.lo), float(in.hi));
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(rng);
    return t;
  }
  std::uniform_int_distribution<int> d(int(in.lo), int(in.hi));
  for (int64_t i = 0; i < n; ++i) {
    const int v = d(rng);
    switch (in.dtype) {
      case DataType::kUint8:
        t.data<uint8_t>()[i] = uint8_t(v);
        break;
      case DataType::kInt8:
        t.data<int8_t>()[i] = int8_t(v);
        break;
      default:
        t.data<int32_t>()[i] = v;
        break;
    }
  }
  return t;
}

// A built kernel with its graph and inputs.
struct Prepared {
  std::shared_ptr<Graph> graph;
  std::unique_ptr<Kernel> kernel;
  std::vector<OwnedTensor> feeds;
  std::vector<Tensor> inputs;
};

// The node `op` (in `domain`) on random `inputs`, with the kernel of `provider`; nullptr when
// the provider has none for it.
inline std::unique_ptr<Prepared> PrepareNode(const std::string& op, const std::string& domain,
                                             const std::vector<In>& inputs,
                                             const std::vector<Attribute>& attrs,
                                             std::string_view provider) {
  auto p = std::make_unique<Prepared>();
  p->graph = std::make_shared<Graph>();
  Graph& g = *p->graph;
  g.opset_imports[""] = 17;
  if (!domain.empty()) g.opset_imports[domain] = 1;
  std::mt19937 rng(1);
  Node node;
  node.name = op;
  node.op_type = op;
  node.domain = domain;
  node.attributes = attrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].omitted) {
      node.inputs.push_back(kNoValue);
      p->inputs.emplace_back();
      continue;
    }
    Value v;
    v.name = "in" + std::to_string(i);
    v.type.dtype = inputs[i].dtype;
    OwnedTensor t = RandomTensor(inputs[i], rng);
    p->inputs.push_back(t.view());
    if (inputs[i].constant) {
      v.constant = std::make_shared<const OwnedTensor>(t);
    } else {
      g.inputs.push_back(g.num_values());
    }
    p->feeds.push_back(std::move(t));
    node.inputs.push_back(g.AddValue(std::move(v)));
  }
  Value out;
  out.name = "out";
  node.outputs.push_back(g.AddValue(std::move(out)));
  g.AddNode(std::move(node));
  const Node& n = g.nodes()[0];
  const NodeDesc desc = DescribeNode(g, n);
  const KernelInfo info(desc);
  for (const KernelDef& def : KernelRegistry::Global().defs()) {
    if (def.provider != provider || def.op_type != op || def.domain != domain) continue;
    if (info.opset() < def.since_version || info.opset() > def.end_version) continue;
    if (def.supports != nullptr && !def.supports(info)) continue;
    Result<std::unique_ptr<Kernel>> k = def.create(info);
    if (k.ok()) p->kernel = std::move(k).value();
  }
  if (p->kernel == nullptr) return nullptr;
  return p;
}

// Times Kernel::Compute of `p` (nullptr: skipped with "no kernel").
inline void RunKernel(benchmark::State& state, Prepared* p) {
  if (p == nullptr) {
    state.SkipWithError("no kernel");
    return;
  }
  for (auto _ : state) {
    std::vector<OwnedTensor> outputs(1);
    KernelContext ctx(p->inputs, outputs);
    Status s = p->kernel->Compute(ctx);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(outputs[0].raw_data());
  }
}

}  // namespace kiln::bench_kernels
