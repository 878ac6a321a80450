// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helpers for the optimizer: a small graph builder, running a graph in a Session on random
// inputs, and the check every pass test makes: the optimized graph computes the same outputs as
// the original on the same random inputs.
//
//   TestGraph t;
//   int x = t.Input("x", {-1, 3, 8, 8});             // -1: the symbolic dim "N"
//   int w = t.Random("w", {4, 3, 3, 3}, rng);
//   int y = t.Op("Conv", {x, w}, {}, {{-1, 4, 6, 6}});
//   t.Output(t.Op("Relu", {y}, {}, {{-1, 4, 6, 6}}));
//   std::shared_ptr<const Graph> g = t.Build();
//   OptimizedGraph o = OptimizeOnly(g, {"bias_activation_fusion"});
//   ExpectSameOutputs(*g, *o.graph, 1e-4);

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "op/kiln_ops.h"
#include "opt/optimizer.h"
#include "runtime/session.h"

namespace kiln::opt::testing {

inline OwnedTensor RandomTensor(const Shape& shape, std::mt19937& rng, double lo = -1,
                                double hi = 1) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = float(dist(rng));
  return std::move(t).value();
}

inline OwnedTensor FloatTensor(const Shape& shape, const std::vector<float>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  KILN_CHECK(int64_t(values.size()) == shape.NumElements(), "FloatTensor: value count");
  for (size_t i = 0; i < values.size(); ++i) t->data<float>()[i] = values[i];
  return std::move(t).value();
}

inline OwnedTensor Int64Tensor(const Shape& shape, const std::vector<int64_t>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (size_t i = 0; i < values.size(); ++i) t->data<int64_t>()[i] = values[i];
  return std::move(t).value();
}

inline Attribute FloatAttr(std::string name, float v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloat;
  a.f = v;
  return a;
}

inline Attribute StringAttr(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kString;
  a.s = std::move(v);
  return a;
}

class TestGraph {
 public:
  explicit TestGraph(int64_t opset = 17) {
    graph_ = std::make_shared<Graph>();
    graph_->name = "test";
    graph_->opset_imports[""] = opset;
    graph_->ir_version = 8;
  }

  static ValueType Type(std::optional<std::vector<int64_t>> dims,
                        DataType dtype = DataType::kFloat32) {
    ValueType t;
    t.dtype = dtype;
    if (dims) {
      t.has_shape = true;
      for (int64_t d : *dims) t.dims.push_back(d >= 0 ? Dim{d, {}} : Dim{-1, "N"});
    }
    return t;
  }

  int Input(const std::string& name, std::vector<int64_t> dims,
            DataType dtype = DataType::kFloat32) {
    Value v;
    v.name = name;
    v.type = Type(std::move(dims), dtype);
    const int id = graph_->AddValue(std::move(v));
    graph_->inputs.push_back(id);
    return id;
  }

  int Const(const std::string& name, OwnedTensor t) {
    Value v;
    v.name = name;
    v.type.dtype = t.dtype();
    v.type.has_shape = true;
    for (int64_t d : t.shape().dims()) v.type.dims.push_back(Dim{d, {}});
    v.constant = std::make_shared<const OwnedTensor>(std::move(t));
    return graph_->AddValue(std::move(v));
  }
  int Scalar(const std::string& name, float value) {
    return Const(name, FloatTensor(Shape{}, {value}));
  }
  int Random(const std::string& name, std::vector<int64_t> dims, std::mt19937& rng, double lo = -1,
             double hi = 1) {
    return Const(name, RandomTensor(Shape(std::span<const int64_t>(dims)), rng, lo, hi));
  }

  // Adds a node with one output of the given type (dims nullopt: rank unknown) and returns it.
  int Op(const std::string& op, std::vector<int> inputs, std::vector<Attribute> attrs = {},
         const std::optional<std::vector<int64_t>>& dims = std::nullopt,
         DataType dtype = DataType::kFloat32, const std::string& domain = "") {
    return OpN(op, std::move(inputs), 1, std::move(attrs), dims, dtype, domain)[0];
  }
  std::vector<int> OpN(const std::string& op, std::vector<int> inputs, int num_outputs,
                       std::vector<Attribute> attrs = {},
                       const std::optional<std::vector<int64_t>>& dims = std::nullopt,
                       DataType dtype = DataType::kFloat32, const std::string& domain = "") {
    Node n;
    n.name = op + std::to_string(counter_);
    n.op_type = op;
    n.domain = domain;
    n.inputs = std::move(inputs);
    n.attributes = std::move(attrs);
    std::vector<int> outs;
    for (int i = 0; i < num_outputs; ++i) {
      Value v;
      v.name = "v" + std::to_string(counter_) + "_" + std::to_string(i);
      v.type = i == 0 ? Type(dims, dtype) : ValueType{};
      outs.push_back(graph_->AddValue(std::move(v)));
    }
    ++counter_;
    n.outputs = outs;
    graph_->AddNode(std::move(n));
    return outs;
  }

  void Output(int id) { graph_->outputs.push_back(id); }
  Graph& graph() { return *graph_; }
  std::shared_ptr<const Graph> Build() { return graph_; }
  // The graph being built, for what the helpers above do not cover (subgraph nodes).
  Graph& mutable_graph() { return *graph_; }

 private:
  std::shared_ptr<Graph> graph_;
  int counter_ = 0;
};

inline int CountOps(const Graph& g, std::string_view op, std::string_view domain = "") {
  int n = 0;
  for (const Node& node : g.nodes()) {
    if (node.op_type == op && node.domain == domain) ++n;
  }
  return n;
}

// The options kiln optimizes with for this machine's CPU kernels (the target they report).
inline OptimizerOptions HostOptions() {
  OptimizerOptions options;
  options.target = KernelTargetFor(DeviceType::kCpu);
  return options;
}

// Runs the optimizer for the host CPU with every pass but `enabled` switched off.
inline OptimizedGraph OptimizeOnly(const std::shared_ptr<const Graph>& g,
                                   std::vector<std::string> enabled) {
  OptimizerOptions options = HostOptions();
  for (const PassInfo& p : ListPasses()) {
    if (std::find(enabled.begin(), enabled.end(), p.name) == enabled.end()) {
      options.disabled_passes.emplace_back(p.name);
    }
  }
  Result<OptimizedGraph> r = OptimizeGraph(g, options);
  KILN_CHECK(r.ok(), r.status().ToString());
  return std::move(r).value();
}

// Runs every pass for the host CPU.
inline OptimizedGraph OptimizeAll(const std::shared_ptr<const Graph>& g) {
  Result<OptimizedGraph> r = OptimizeGraph(g, HostOptions());
  KILN_CHECK(r.ok(), r.status().ToString());
  return std::move(r).value();
}

// Random FP32 inputs for `g` (symbolic dims become `symbol_value`).
inline std::vector<OwnedTensor> RandomInputs(const Graph& g, std::mt19937& rng,
                                             int64_t symbol_value = 2) {
  std::vector<OwnedTensor> inputs;
  for (int id : g.inputs) {
    const ValueType& t = g.value(id).type;
    std::vector<int64_t> dims;
    for (const Dim& d : t.dims) dims.push_back(d.known() ? d.value : symbol_value);
    inputs.push_back(RandomTensor(Shape(std::span<const int64_t>(dims)), rng));
  }
  return inputs;
}

inline std::vector<OwnedTensor> RunGraph(std::shared_ptr<const Graph> g,
                                         const std::vector<OwnedTensor>& inputs) {
  Result<std::unique_ptr<Session>> s = Session::Create(std::move(g));
  KILN_CHECK(s.ok(), s.status().ToString());
  std::vector<Tensor> views;
  views.reserve(inputs.size());
  for (const OwnedTensor& t : inputs) views.push_back(t.view());
  Result<std::vector<OwnedTensor>> out = (*s)->Run(views);
  KILN_CHECK(out.ok(), out.status().ToString());
  return std::move(out).value();
}

// Runs both graphs on the same random inputs and expects every output within `rtol`
// (|a - b| <= rtol * max(1, |a|)).
inline void ExpectSameOutputs(const Graph& original, const Graph& optimized, double rtol,
                              int seed = 7, int64_t symbol_value = 2) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<OwnedTensor> inputs = RandomInputs(original, rng, symbol_value);
  auto a_graph = std::make_shared<const Graph>(original);
  auto b_graph = std::make_shared<const Graph>(optimized);
  std::vector<OwnedTensor> a = RunGraph(a_graph, inputs);
  std::vector<OwnedTensor> b = RunGraph(b_graph, inputs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << "output " << i;
    ASSERT_EQ(a[i].shape(), b[i].shape()) << "output " << i;
    if (a[i].dtype() != DataType::kFloat32) continue;
    const float* pa = a[i].data<const float>();
    const float* pb = b[i].data<const float>();
    int reported = 0;
    for (int64_t k = 0; k < a[i].num_elements(); ++k) {
      const double tol = rtol * std::max(1.0, std::abs(double(pa[k])));
      if (std::abs(double(pa[k]) - double(pb[k])) > tol && reported++ < 5) {
        ADD_FAILURE() << "output " << i << " element " << k << ": original " << pa[k]
                      << ", optimized " << pb[k];
      }
    }
  }
}

}  // namespace kiln::opt::testing
