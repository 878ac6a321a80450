// SPDX-License-Identifier: Apache-2.0
// A run's width does not change its results: the same graph (convolutions, a pool, matrix
// products of a weight with few and with many rows, Softmax, a reduction) run 1-wide and 2-wide
// gives bitwise the same outputs, which is what lets the thread governor (thread_governor.h)
// switch widths between runs. And an adaptive session keeps giving those outputs while it
// probes and switches.

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/session.h"

namespace kiln {
namespace {

class GraphBuilder {
 public:
  GraphBuilder() {
    g_ = std::make_shared<Graph>();
    g_->opset_imports[""] = 17;
  }
  int Input(const std::string& name, std::vector<int64_t> dims) {
    const int v = g_->AddValue({name, Type(dims), -1, nullptr});
    g_->inputs.push_back(v);
    return v;
  }
  int Weight(const std::string& name, std::vector<int64_t> dims, std::mt19937& rng) {
    const Shape shape{std::span<const int64_t>(dims)};
    Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
    std::normal_distribution<float> dist(0.0f, 0.1f);
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = dist(rng);
    return g_->AddValue(
        {name, Type(dims), -1, std::make_shared<const OwnedTensor>(std::move(t).value())});
  }
  int Op(const std::string& op, std::vector<int> inputs, std::vector<Attribute> attrs = {}) {
    const int out = g_->AddValue({op + std::to_string(count_), ValueType(), -1, nullptr});
    Node n;
    n.name = op + std::to_string(count_++);
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    n.attributes = std::move(attrs);
    g_->AddNode(std::move(n));
    return out;
  }
  void Output(int v) { g_->outputs.push_back(v); }
  std::shared_ptr<const Graph> Build() { return g_; }

 private:
  static ValueType Type(const std::vector<int64_t>& dims) {
    ValueType t;
    t.dtype = DataType::kFloat32;
    t.has_shape = true;
    for (int64_t d : dims) t.dims.push_back(Dim{d, {}});
    return t;
  }
  std::shared_ptr<Graph> g_;
  int count_ = 0;
};

// x [1,32,28,28] -> Conv 3x3 (64) -> Relu -> Conv 3x3 stride 2 (64) -> MaxPool -> ... -> Flatten
// -> Gemm with a [4096, 12544]-ish weight (a GEMV: one row, a long reduction) -> Softmax; and
// t [64, 768] -> MatMul [768, 3072] -> ReduceMean.
std::shared_ptr<const Graph> MixedGraph() {
  std::mt19937 rng(7);
  GraphBuilder b;
  const int x = b.Input("x", {1, 32, 28, 28});
  const int c1 = b.Op("Relu", {b.Op("Conv", {x, b.Weight("w1", {64, 32, 3, 3}, rng)},
                                    {Attribute::Ints("pads", {1, 1, 1, 1})})});
  const int c2 = b.Op("Conv", {c1, b.Weight("w2", {64, 64, 3, 3}, rng)},
                      {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2})});
  const int p = b.Op("MaxPool", {c2},
                     {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("strides", {2, 2})});
  const int f = b.Op("Flatten", {p});
  const int fc = b.Op("Gemm", {f, b.Weight("wf", {3136, 1000}, rng)});
  b.Output(b.Op("Softmax", {fc}, {Attribute::Int("axis", 1)}));
  const int t = b.Input("t", {64, 768});
  const int m = b.Op("MatMul", {t, b.Weight("wm", {768, 3072}, rng)});
  b.Output(b.Op("ReduceMean", {m}, {Attribute::Ints("axes", {1})}));
  return b.Build();
}

std::vector<OwnedTensor> Inputs() {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<OwnedTensor> in;
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{1, 32, 28, 28}, {64, 768}}) {
    Result<OwnedTensor> t =
        OwnedTensor::Allocate(DataType::kFloat32, Shape(std::span<const int64_t>(dims)));
    for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = dist(rng);
    in.push_back(std::move(t).value());
  }
  return in;
}

std::vector<OwnedTensor> RunOnce(const Session& s, const std::vector<OwnedTensor>& in) {
  std::vector<Tensor> views;
  for (const OwnedTensor& t : in) views.push_back(t.view());
  Result<std::vector<OwnedTensor>> out = s.Run(views);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? std::move(out).value() : std::vector<OwnedTensor>();
}

void ExpectBitwiseEqual(const std::vector<OwnedTensor>& a, const std::vector<OwnedTensor>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << what << " output " << i;
    EXPECT_EQ(std::memcmp(a[i].raw_data(), b[i].raw_data(),
                          static_cast<size_t>(a[i].num_elements()) * sizeof(float)),
              0)
        << what << ": output " << i << " differs";
  }
}

std::unique_ptr<Session> Make(int threads, bool adapt) {
  SessionOptions o;
  o.intra_op_threads = threads;
  o.adapt_threads = adapt;
  Result<std::unique_ptr<Session>> s = Session::Create(MixedGraph(), o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(SessionThreadsTest, OneAndTwoThreadsGiveBitwiseTheSameOutputs) {
  const std::vector<OwnedTensor> in = Inputs();
  std::unique_ptr<Session> one = Make(1, false);
  std::unique_ptr<Session> two = Make(2, false);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const std::vector<OwnedTensor> want = RunOnce(*one, in);
  for (int run = 0; run < 3; ++run) {  // the first run records the memory plan, the rest use it
    ExpectBitwiseEqual(RunOnce(*two, in), want, "2 threads, run " + std::to_string(run));
  }
}

TEST(SessionThreadsTest, AnAdaptiveSessionKeepsItsOutputsWhileItProbes) {
  const std::vector<OwnedTensor> in = Inputs();
  std::unique_ptr<Session> fixed = Make(2, false);
  std::unique_ptr<Session> adaptive = Make(2, true);
  ASSERT_NE(fixed, nullptr);
  ASSERT_NE(adaptive, nullptr);
  EXPECT_EQ(fixed->adapted_threads(), 2);
  const std::vector<OwnedTensor> want = RunOnce(*fixed, in);
  // Enough runs for the governor's first narrow probes (runs 3, 5 and 7) and more.
  for (int run = 0; run < 40; ++run) {
    ExpectBitwiseEqual(RunOnce(*adaptive, in), want, "adaptive run " + std::to_string(run));
  }
  const int width = adaptive->adapted_threads();
  EXPECT_TRUE(width == 1 || width == 2) << width;
  EXPECT_EQ(fixed->thread_switches(), 0);
}

TEST(SessionThreadsTest, SessionsSharingABudgetHoldNoMoreThreadsThanIt) {
  // Two 2-wide sessions run at once from two threads on a budget of 2: each run gets 2 threads
  // when the other is idle, else 1 (or waits); the outputs stay those of a lone 2-wide run.
  ThreadBudget budget(2);
  SessionOptions o;
  o.intra_op_threads = 2;
  o.adapt_threads = false;
  o.thread_budget = &budget;
  Result<std::unique_ptr<Session>> a = Session::Create(MixedGraph(), o);
  Result<std::unique_ptr<Session>> b = Session::Create(MixedGraph(), o);
  ASSERT_TRUE(a.ok() && b.ok());
  std::unique_ptr<Session> alone = Make(2, false);
  const std::vector<OwnedTensor> in = Inputs();
  const std::vector<OwnedTensor> want = RunOnce(*alone, in);
  std::vector<std::thread> threads;
  for (Session* s : {a->get(), b->get()}) {
    threads.emplace_back([&, s] {
      for (int run = 0; run < 10; ++run) ExpectBitwiseEqual(RunOnce(*s, in), want, "shared");
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(budget.in_use(), 0);
  EXPECT_GT(budget.narrowed() + budget.waited(), 0) << "the two sessions never overlapped";
}

TEST(SessionThreadsTest, OneThreadSessionsDoNotAdapt) {
  std::unique_ptr<Session> s = Make(1, true);
  ASSERT_NE(s, nullptr);
  const std::vector<OwnedTensor> in = Inputs();
  for (int run = 0; run < 20; ++run) RunOnce(*s, in);
  EXPECT_EQ(s->adapted_threads(), 1);
  EXPECT_EQ(s->thread_switches(), 0);
}

}  // namespace
}  // namespace kiln
