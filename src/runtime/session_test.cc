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
  // s, y and z, then the arena the memory plan of this input shape holds s in (made up front).
  EXPECT_EQ(alloc.served.load(), 4);
  alloc.fail = true;
  out = (*s)->Run(inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("out of memory"), std::string::npos);
}

TEST(SessionTest, RunsNodesInOrderAndReturnsOutputs) {
  SessionOptions ref_only;
  ref_only.kernel_provider = "ref";
  Result<std::unique_ptr<Session>> s = Session::Create(MakeGraph(), ref_only);
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
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
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
  const int id =
      g->AddValue({"c", FloatType({Dim{2, ""}}), -1, std::make_shared<const OwnedTensor>(*c)});
  g->outputs = {id};
  Result<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_TRUE(s.ok());
  Result<std::vector<OwnedTensor>> r = (*s)->Run({});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].data<float>()[1], 7.f);
}

// ---------------------------------------------------------------------------------------------
// Sequences and optionals.

OwnedTensor Floats(const Shape& shape, float fill = 0) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kFloat32, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = fill;
  return std::move(t).value();
}

RuntimeValue FloatSeq(const std::vector<Shape>& shapes) {
  std::vector<OwnedTensor> elements;
  elements.reserve(shapes.size());
  for (const Shape& s : shapes) elements.push_back(Floats(s));
  Result<TensorSequence> seq = TensorSequence::Create(DataType::kFloat32, std::move(elements));
  KILN_CHECK(seq.ok(), seq.status().ToString());
  return RuntimeValue(std::move(seq).value());
}

int AddNodeOut(Graph& g, const std::string& op, std::vector<int> inputs, const std::string& out) {
  const int y = g.AddValue({out, ValueType{}, -1, nullptr});
  Node n;
  n.name = op + "_" + out;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {y};
  g.AddNode(std::move(n));
  return y;
}

// n = SequenceLength(s), with s declared as `type`.
std::unique_ptr<Session> LengthSession(ValueType type) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 16;
  const int s = AddInput(*g, "s", std::move(type));
  g->outputs = {AddNodeOut(*g, "SequenceLength", {s}, "n")};
  Result<std::unique_ptr<Session>> session = Session::Create(g);
  KILN_CHECK(session.ok(), session.status().ToString());
  return std::move(session).value();
}

std::string RunError(const Session& s, RuntimeValue v) {
  std::vector<RuntimeValue> in;
  in.push_back(std::move(v));
  Result<std::vector<RuntimeValue>> r = s.RunValues(in);
  return r.ok() ? "OK" : r.status().message();
}

TEST(SessionValuesTest, ChecksValuesAgainstDeclaredKinds) {
  std::unique_ptr<Session> seq = LengthSession(ValueType::Sequence(FloatType({Dim{2, ""}})));
  {
    std::vector<RuntimeValue> in = {FloatSeq({Shape{2}, Shape{2}, Shape{2}})};
    Result<std::vector<RuntimeValue>> r = seq->RunValues(in);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE((*r)[0].is_tensor());
    EXPECT_EQ(*(*r)[0].tensor().data<int64_t>(), 3);
  }
  EXPECT_EQ(RunError(*seq, RuntimeValue(Floats({2}))),
            "input 's': expected seq(FP32[2]), got tensor FP32[2]");
  EXPECT_EQ(RunError(*seq, RuntimeValue(TensorSequence(DataType::kInt64))),
            "input 's': expected seq(FP32[2]), got sequence of 0 INT64 tensors");
  EXPECT_EQ(RunError(*seq, FloatSeq({Shape{2}, Shape{3}})),
            "input 's' element 1: expected shape FP32[2], got [3] (dim 0 differs)");
  EXPECT_EQ(RunError(*seq, RuntimeValue::None()),
            "input 's': expected seq(FP32[2]), got none (an empty optional)");
  EXPECT_EQ(RunError(*seq, RuntimeValue()), "input 's': no value given");
  // The tensor Run cannot feed a sequence input.
  float f[2] = {};
  Tensor t[] = {Tensor(DataType::kFloat32, Shape{2}, f)};
  Result<std::vector<OwnedTensor>> r = seq->Run(t);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "input 's': expected seq(FP32[2]), got a tensor FP32[2]");

  // An optional sequence accepts none or a matching sequence (the kernel then sees none).
  std::unique_ptr<Session> opt =
      LengthSession(ValueType::Optional(ValueType::Sequence(FloatType({Dim{}}))));
  EXPECT_EQ(RunError(*opt, FloatSeq({Shape{4}})), "OK");
  EXPECT_NE(RunError(*opt, RuntimeValue::None()).find("input 0 must be a sequence, got none"),
            std::string::npos);
  EXPECT_EQ(RunError(*opt, RuntimeValue(Floats({4}))),
            "input 's': expected seq(FP32[?]), got tensor FP32[4]");
  EXPECT_EQ(RunError(*opt, FloatSeq({Shape{4, 1}})),
            "input 's' element 0: expected shape FP32[?] (rank 1), got [4,1]");

  // An unknown type accepts any value; the kernel judges it.
  std::unique_ptr<Session> any = LengthSession(ValueType{});
  EXPECT_EQ(RunError(*any, FloatSeq({})), "OK");
}

TEST(SessionValuesTest, TensorRunNamesTheNonTensorOutputAndRunValuesReturnsIt) {
  // s = SequenceConstruct(x); outputs s and x.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 16;
  const int x = AddInput(*g, "x", FloatType({Dim{2, ""}}));
  const int s = AddNodeOut(*g, "SequenceConstruct", {x, x}, "s");
  g->outputs = {s, x};
  Result<std::unique_ptr<Session>> session = Session::Create(g);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  float f[2] = {3, 4};
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{2}, f)};
  Result<std::vector<OwnedTensor>> r = (*session)->Run(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.status().message(),
            "graph output 's' is a sequence of 2 FP32 tensors, not a tensor; this Run returns "
            "tensors only (RunValues returns any value)");

  std::vector<RuntimeValue> values = {RuntimeValue(Floats({2}, 5))};
  Result<std::vector<RuntimeValue>> v = (*session)->RunValues(values);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE((*v)[0].is_sequence());
  EXPECT_EQ((*v)[0].sequence().size(), 2);
  EXPECT_EQ((*v)[0].sequence().at(1).data<float>()[0], 5.f);
  ASSERT_TRUE((*v)[1].is_tensor());  // the input passed through, copied
  EXPECT_NE((*v)[1].tensor().raw_data(), values[0].tensor().raw_data());
  EXPECT_EQ((*v)[1].tensor().data<float>()[1], 5.f);
}

// Counts live bytes and their peak.
class PeakAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes, size_t alignment) override {
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return HostAllocator().Allocate(bytes, alignment);
  }
  void Free(void* ptr, size_t bytes) override {
    live_ -= bytes;
    HostAllocator().Free(ptr, bytes);
  }
  Device device() const override { return Device::Cpu(); }
  size_t peak() const { return peak_; }

 private:
  size_t live_ = 0;
  size_t peak_ = 0;
};

TEST(SessionValuesTest, SequencesAreReleasedAfterTheirLastReader) {
  // s = SequenceConstruct(x) copies x; n = SequenceLength(s) is s's last reader; y = Identity(x)
  // copies x again. With s released after n, at most one copy of x (plus n) is ever live.
  PeakAllocator alloc;
  SessionOptions options;
  options.allocator = &alloc;
  options.memory_planning = false;  // measures the executor's releases, not the planner's arena
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  const int x = AddInput(*g, "x", FloatType({Dim{1000, ""}}));
  const int s = AddNodeOut(*g, "SequenceConstruct", {x}, "s");
  const int n = AddNodeOut(*g, "SequenceLength", {s}, "n");
  const int y = AddNodeOut(*g, "Identity", {x}, "y");
  g->outputs = {n, y};
  Result<std::unique_ptr<Session>> session = Session::Create(g, options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<float> data(1000, 1.f);
  Tensor in[] = {Tensor(DataType::kFloat32, Shape{1000}, data.data())};
  Result<std::vector<OwnedTensor>> r = (*session)->Run(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*(*r)[0].data<int64_t>(), 1);
  const size_t x_bytes = 1000 * sizeof(float);
  EXPECT_GE(alloc.peak(), x_bytes);
  EXPECT_LT(alloc.peak(), 2 * x_bytes);
}

}  // namespace
}  // namespace kiln
