// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helpers for the reference kernel tests: host tensors from value lists, attribute
// builders, and OpTest, which wraps one node in a kiln Graph and runs it through Session (so the
// registry lookup, the factory and Compute are all exercised).
//
//   OpTest t("Add", 13);
//   t.Input(MakeTensor<float>({2}, {1, 2})).Input(MakeTensor<float>({}, {10}));
//   Result<std::vector<OwnedTensor>> out = t.Run();
//   ExpectTensor<float>(out->at(0), {2}, {11, 12});
//
// Ops on sequences and optionals take ValueInput()s and run with RunValues().

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "runtime/session.h"
#include "tensor/runtime_value.h"
#include "tensor/tensor.h"

namespace kiln::ref::testing {

// A host tensor holding `values` (row-major). REQUIRES: values.size() == shape.NumElements().
template <typename T>
OwnedTensor MakeTensor(const Shape& shape, const std::vector<T>& values) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataTypeOf<T>(), shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  KILN_CHECK(static_cast<int64_t>(values.size()) == shape.NumElements(),
             "MakeTensor: ", values.size(), " values for shape ", shape.ToString());
  T* p = t->data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return std::move(t).value();
}

template <typename T>
std::vector<T> ToVector(const OwnedTensor& t) {
  const T* p = t.data<const T>();
  return std::vector<T>(p, p + t.num_elements());
}

// Uniform random values in [lo, hi] (integers: inclusive).
template <typename T>
std::vector<T> RandomValues(int64_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (T& x : v) x = static_cast<T>(dist(rng));
  } else {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (T& x : v) x = static_cast<T>(dist(rng));
  }
  return v;
}

inline Attribute IntAttr(std::string name, int64_t v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kInt;
  a.i = v;
  return a;
}
inline Attribute IntsAttr(std::string name, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute FloatAttr(std::string name, float v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloat;
  a.f = v;
  return a;
}
inline Attribute FloatsAttr(std::string name, std::vector<float> v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kFloats;
  a.floats = std::move(v);
  return a;
}
inline Attribute StringAttr(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kString;
  a.s = std::move(v);
  return a;
}
inline Attribute StringsAttr(std::string name, std::vector<std::string> v) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kStrings;
  a.strings = std::move(v);
  return a;
}
inline Attribute TensorAttr(std::string name, OwnedTensor t) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::kTensor;
  a.t = std::make_shared<const OwnedTensor>(std::move(t));
  return a;
}

// One node of `op` at `opset` in a graph of its own. Inputs are graph inputs (declared with their
// dtype and unknown shape) or initializers; every present output is a graph output.
class OpTest {
 public:
  OpTest(std::string op, int64_t opset) : op_(std::move(op)), opset_(opset) {}

  OpTest& Attr(Attribute a) {
    attrs_.push_back(std::move(a));
    return *this;
  }
  // A graph input fed at Run(). `declared` overrides the declared dtype (kInvalid: unknown).
  OpTest& Input(OwnedTensor t, std::optional<DataType> declared = std::nullopt) {
    inputs_.push_back({std::move(t), false, false, declared, RuntimeValue(), ValueType()});
    return *this;
  }
  // An initializer (constant input).
  OpTest& ConstInput(OwnedTensor t) {
    inputs_.push_back({std::move(t), true, false, std::nullopt, RuntimeValue(), ValueType()});
    return *this;
  }
  // An omitted optional input (kNoValue).
  OpTest& OmittedInput() {
    inputs_.push_back({OwnedTensor(), false, true, std::nullopt, RuntimeValue(), ValueType()});
    return *this;
  }
  // A graph input of any kind (a sequence, a none, or a tensor), declared as `declared` (by
  // default unknown, which accepts anything); fed only by RunValues().
  OpTest& ValueInput(RuntimeValue v, ValueType declared = {}) {
    inputs_.push_back(
        {OwnedTensor(), false, false, std::nullopt, std::move(v), std::move(declared)});
    return *this;
  }
  // Declared type of output `i` (for ops whose kernels read it).
  OpTest& OutputValueType(int i, ValueType type) {
    output_value_types_.emplace_back(i, std::move(type));
    return *this;
  }
  // Output slots: `present[i]` false makes output i omitted. Default: one present output.
  OpTest& Outputs(std::vector<bool> present) {
    outputs_ = std::move(present);
    return *this;
  }
  OpTest& OutputType(DataType dtype) {
    output_type_ = dtype;
    return *this;
  }
  // Puts the node in `domain` at `domain_opset` (the default ONNX domain stays at the opset
  // given to the constructor).
  OpTest& Domain(std::string domain, int64_t domain_opset) {
    domain_ = std::move(domain);
    domain_opset_ = domain_opset;
    return *this;
  }

  std::shared_ptr<const Graph> BuildGraph() const {
    auto g = std::make_shared<Graph>();
    g->opset_imports[""] = opset_;
    if (!domain_.empty()) g->opset_imports[domain_] = domain_opset_;
    Node node;
    node.name = "node";
    node.op_type = op_;
    node.domain = domain_;
    node.attributes = attrs_;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const InputSpec& in = inputs_[i];
      if (in.omitted) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      Value v;
      v.name = "in" + std::to_string(i);
      v.type.dtype = in.declared.value_or(in.tensor.dtype());
      if (in.value.valid()) v.type = in.value_type;
      if (in.constant) v.constant = std::make_shared<const OwnedTensor>(in.tensor);
      const int id = g->AddValue(std::move(v));
      if (!in.constant) g->inputs.push_back(id);
      node.inputs.push_back(id);
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (!outputs_[i]) {
        node.outputs.push_back(kNoValue);
        continue;
      }
      Value v;
      v.name = "out" + std::to_string(i);
      if (i == 0) v.type.dtype = output_type_;
      for (const auto& [index, type] : output_value_types_) {
        if (static_cast<size_t>(index) == i) v.type = type;
      }
      const int id = g->AddValue(std::move(v));
      g->outputs.push_back(id);
      node.outputs.push_back(id);
    }
    g->AddNode(std::move(node));
    return g;
  }

  // Sessions of these tests run the reference kernels only (the fast CPU kernels have their own
  // tests, against these).
  static SessionOptions RefOnly() {
    SessionOptions options;
    options.kernel_provider = "ref";
    return options;
  }

  // Session::Create's status (registry lookup and factory).
  Status Create() const {
    Result<std::unique_ptr<Session>> s = Session::Create(BuildGraph(), RefOnly());
    return s.ok() ? Status::OK() : s.status();
  }

  // Creates the session and runs it once.
  Result<std::vector<OwnedTensor>> Run() const {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                          Session::Create(BuildGraph(), RefOnly()));
    std::vector<Tensor> feeds;
    for (const InputSpec& in : inputs_) {
      if (!in.omitted && !in.constant) feeds.push_back(in.tensor.view());
    }
    return session->Run(feeds);
  }

  // Creates the session and runs it once over RuntimeValues (tensor inputs are fed as tensor
  // values).
  Result<std::vector<RuntimeValue>> RunValues() const {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                          Session::Create(BuildGraph(), RefOnly()));
    std::vector<RuntimeValue> feeds;
    for (const InputSpec& in : inputs_) {
      if (in.omitted || in.constant) continue;
      feeds.push_back(in.value.valid() ? in.value : RuntimeValue(in.tensor));
    }
    return session->RunValues(feeds);
  }

  // RunValues' output 0, failing the test (and returning an invalid value) on error.
  RuntimeValue RunOneValue() const {
    Result<std::vector<RuntimeValue>> r = RunValues();
    EXPECT_TRUE(r.ok()) << op_ << ": " << r.status().ToString();
    if (!r.ok() || r->empty()) return RuntimeValue();
    return r->at(0);
  }

  // The status of RunValues() (OK or the error).
  Status RunValuesStatus() const {
    Result<std::vector<RuntimeValue>> r = RunValues();
    return r.ok() ? Status::OK() : r.status();
  }

  // Runs and returns output 0, failing the test (and returning an empty tensor) on error.
  OwnedTensor RunOne() const {
    Result<std::vector<OwnedTensor>> r = Run();
    EXPECT_TRUE(r.ok()) << op_ << ": " << r.status().ToString();
    if (!r.ok() || r->empty()) return OwnedTensor();
    return r->at(0);
  }

  // Runs and returns every present output, failing the test on error.
  std::vector<OwnedTensor> RunAll() const {
    Result<std::vector<OwnedTensor>> r = Run();
    EXPECT_TRUE(r.ok()) << op_ << ": " << r.status().ToString();
    return r.ok() ? std::move(r).value() : std::vector<OwnedTensor>(outputs_.size());
  }

  // The status of Run() (OK or the error).
  Status RunStatus() const {
    Result<std::vector<OwnedTensor>> r = Run();
    return r.ok() ? Status::OK() : r.status();
  }

 private:
  struct InputSpec {
    OwnedTensor tensor;
    bool constant = false;
    bool omitted = false;
    std::optional<DataType> declared;
    RuntimeValue value;    // a ValueInput (valid) instead of `tensor`
    ValueType value_type;  // its declared type
  };
  std::string op_;
  int64_t opset_;
  std::string domain_;
  int64_t domain_opset_ = 0;
  std::vector<Attribute> attrs_;
  std::vector<InputSpec> inputs_;
  std::vector<bool> outputs_ = {true};
  DataType output_type_ = DataType::kInvalid;
  std::vector<std::pair<int, ValueType>> output_value_types_;
};

// Expects an INVALID_ARGUMENT whose message contains every one of `parts`.
inline void ExpectInvalid(const Status& s, std::initializer_list<std::string_view> parts) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (std::string_view p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "message '" << s.message() << "' lacks '" << p << "'";
  }
}

// Expects `t` to have `shape` and elements equal to `expected` (within `tol`, absolute plus
// relative, for floating point).
template <typename T>
void ExpectTensor(const OwnedTensor& t, const Shape& shape, const std::vector<T>& expected,
                  double tol = 0) {
  ASSERT_TRUE(t.valid());
  ASSERT_EQ(t.dtype(), DataTypeOf<T>());
  ASSERT_EQ(t.shape(), shape) << t.shape().ToString() << " vs " << shape.ToString();
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(expected.size()));
  const T* p = t.data<const T>();
  for (size_t i = 0; i < expected.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      const double e = static_cast<double>(expected[i]), a = static_cast<double>(p[i]);
      if (std::isnan(e)) {
        EXPECT_TRUE(std::isnan(a)) << "element " << i;
      } else if (std::isinf(e)) {
        EXPECT_EQ(a, e) << "element " << i;
      } else {
        EXPECT_NEAR(a, e, tol * (1 + std::abs(e))) << "element " << i;
      }
    } else {
      const T e = expected[i];  // also unpacks std::vector<bool>
      EXPECT_EQ(p[i], e) << "element " << i;
    }
  }
}

// Row-major strides of `dims` (in elements).
inline std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * dims[static_cast<size_t>(i) + 1];
  }
  return s;
}

// Coordinates of flat index `i` in `dims` (row-major).
inline std::vector<int64_t> Unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    const size_t du = static_cast<size_t>(d);
    c[du] = dims[du] == 0 ? 0 : i % dims[du];
    if (dims[du] != 0) i /= dims[du];
  }
  return c;
}

inline std::vector<int64_t> DimsOf(const Shape& s) {
  return std::vector<int64_t>(s.dims().begin(), s.dims().end());
}

}  // namespace kiln::ref::testing
