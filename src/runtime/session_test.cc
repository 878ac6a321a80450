// SPDX-License-Identifier: Apache-2.0
#include "runtime/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace kiln {
namespace {

ValueType FloatType(std::vector<Dim> dims) {
  ValueType t;
  t.dtype = DataType::kFloat32;
  t.has_shape = true;
  t.dims = std::move(dims);
  return t;
}

int AddInput(Graph& g, const std::string& name, ValueType type) {
  int id = g.AddValue({name, std::move(type), -1, nullptr});
  g.inputs.push_back(id);
  return id;
}

int AddNode(Graph& g, const std::string& op, std::vector<int> inputs, const std::string& out) {
  int y = g.AddValue({out, FloatType({Dim{}, Dim{-1, "n"}}), -1, nullptr});
  Node n;
  n.name = op + "_" + out;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {y};
  g.AddNode(std::move(n));
  return y;
}

// y = relu(a + b); z = y * a   (a is read by two nodes; y is an intermediate and an output)
std::shared_ptr<Graph> MakeGraph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int a = AddInput(*g, "a", FloatType({Dim{-1, "batch"}, Dim{3, ""}}));
  const int b = AddInput(*g, "b", FloatType({Dim{-1, "batch"}, Dim{3, ""}}));
  const int s = AddNode(*g, "Add", {a, b}, "s");
  const int y = AddNode(*g, "Relu", {s}, "y");
  const int z = AddNode(*g, "Mul", {y, a}, "z");
  g->outputs = {z, y, a};
  return g;
}

// Fails every allocation once `fail` is set; counts the ones it served.
class SwitchableAllocator final : public Allocator {
 public:
  std::atomic<bool> fail{false};
  std::atomic<int> served{0};
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    if (fail) return Status::ResourceExhausted("test allocator: out of memory");
    ++served;
    return HostAllocator().Allocate(bytes, alignment);
  }
  void Free(void* ptr, size_t bytes) override { HostAllocator().Free(ptr, bytes); }
  Device device() const override { return Device::Cpu(); }
};

TEST(SessionTest, AllocatesOutputsFromTheConfiguredAllocator) {
  SwitchableAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  Result<std::unique_ptr<Session>> s = Session::Create(MakeGraph(), options);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  float a[3] = {1, 2, 3};
  float b[3] = {1, 1, 1};
  Tensor inputs[] = {Tensor(DataType::kFloat32, Shape{1, 3}, a),
                     Tensor(DataType::kFloat32, Shape{1, 3}, b)};
  Result<std::vector<OwnedTensor>> out = (*s)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(alloc.served.load(), 3);  // s, y and z
  alloc.fail = true;
  out = (*s)->Run(inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("out of memory"), std::string::npos);
}

TEST(SessionTest, RunsNodesInOrderAndReturnsOutputs) {
  Result<std::unique_ptr<Session>> s = Session::Create(MakeGraph());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->provider(0), "ref");
  float a[6] = {1, -2, 3, 4, 5, -6};
  float b[6] = {1, 1, -4, 0, -6, 1};
  Tensor inputs[] = {Tensor(DataType::kFloat32, Shape{2, 3}, a),
                     Tensor(DataType::kFloat32, Shape{2, 3}, b)};
  Result<std::vector<OwnedTensor>> out = (*s)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 3u);
  for (int i = 0; i < 6; ++i) {
    const float y = std::max(a[i] + b[i], 0.f);
    EXPECT_EQ((*out)[1].data<float>()[i], y) << i;
    EXPECT_EQ((*out)[0].data<float>()[i], y * a[i]) << i;
    EXPECT_EQ((*out)[2].data<float>()[i], a[i]) << i;  // graph input passed through, copied
  }
  a[0] = 100;  // the returned copy of input 'a' does not alias the caller's memory
  EXPECT_EQ((*out)[2].data<float>()[0], 1.f);
}

TEST(SessionTest, RunIsRepeatableAndThreadSafe) {
  Result<std::unique_ptr<Session>> s = Session::Create(MakeGraph());
  ASSERT_TRUE(s.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 50; ++iter) {
        float a[3] = {float(t), float(iter), 1};
        float b[3] = {1, 1, 1};
        Tensor in[] = {Tensor(DataType::kFloat32, Shape{1, 3}, a),
                       Tensor(DataType::kFloat32, Shape{1, 3}, b)};
        auto out = (*s)->Run(in);
        if (!out.ok() || (*out)[1].data<float>()[1] != float(iter + 1)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(SessionTest, ChecksInputsAgainstDeclaredTypes) {
  Result<std::unique_ptr<Session>> s = Session::Create(MakeGraph());
  ASSERT_TRUE(s.ok());
  float f[8] = {};
  int32_t i32[6] = {};
  {
    Tensor in[] = {Tensor(DataType::kFloat32, Shape{2, 3}, f)};
    Result<std::vector<OwnedTensor>> r = (*s)->Run(in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "expected 2 inputs, got 1");
  }
  {
    Tensor in[] = {Tensor(DataType::kInt32, Shape{2, 3}, i32),
                   Tensor(DataType::kFloat32, Shape{2, 3}, f)};
    Result<std::vector<OwnedTensor>> r = (*s)->Run(in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "input 'a': expected datatype FP32, got INT32");
  }
  {
    Tensor in[] = {Tensor(DataType::kFloat32, Shape{2, 4}, f),
                   Tensor(DataType::kFloat32, Shape{2, 4}, f)};
    Result<std::vector<OwnedTensor>> r = (*s)->Run(in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(),
              "input 'a': expected shape FP32[batch,3], got [2,4] (dim 1 differs)");
  }
  {
    Tensor in[] = {Tensor(DataType::kFloat32, Shape{6}, f),
                   Tensor(DataType::kFloat32, Shape{6}, f)};
    EXPECT_FALSE((*s)->Run(in).ok());
  }
}

TEST(SessionTest, KernelErrorsNameTheNode) {
  // Both inputs have an unknown second dim, so mismatched shapes reach the Add kernel.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int a = AddInput(*g, "a", FloatType({Dim{}, Dim{}}));
  const int b = AddInput(*g, "b", FloatType({Dim{}, Dim{}}));
  g->outputs = {AddNode(*g, "Add", {a, b}, "s")};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_TRUE(s.ok());
  float f[12] = {};
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{2, 3}, f),
                 Tensor(DataType::kFloat32, Shape{2, 4}, f)};
  Result<std::vector<OwnedTensor>> r = (*s)->Run(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("node 'Add_s'"), std::string::npos) << r.status().message();
}

TEST(SessionTest, UnsupportedOpFailsAtCreate) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int a = AddInput(*g, "a", FloatType({Dim{2, ""}}));
  g->outputs = {AddNode(*g, "NoSuchOp", {a}, "y")};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "op NoSuchOp (opset 13) is not supported (node 'NoSuchOp_y')");
}

TEST(SessionTest, OutputThatIsAnInitializerIsCopiedOut) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  Result<OwnedTensor> c = OwnedTensor::Allocate(DataType::kFloat32, Shape{2});
  ASSERT_TRUE(c.ok());
  c->data<float>()[1] = 7;
  const int id = g->AddValue(
      {"c", FloatType({Dim{2, ""}}), -1, std::make_shared<const OwnedTensor>(*c)});
  g->outputs = {id};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_TRUE(s.ok());
  Result<std::vector<OwnedTensor>> r = (*s)->Run({});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].data<float>()[1], 7.f);
}

}  // namespace
}  // namespace kiln
