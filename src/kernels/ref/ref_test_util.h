// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helpers for the reference kernel tests: host tensors from value lists, attribute
// builders, and OpTest, which describes one node (op/node_desc.h, as the runtime would), looks
// its reference kernel up in the registry, builds it and runs Compute on the given inputs (so the
// registry lookup, the factory and Compute are all exercised, with no graph and no session).
//
//   OpTest t("Add", 13);
//   t.Input(MakeTensor<float>({2}, {1, 2})).Input(MakeTensor<float>({}, {10}));
//   Result<std::vector<OwnedTensor>> out = t.Run();
//   ExpectTensor<float>(out->at(0), {2}, {11, 12});
//
// Ops on sequences and optionals take ValueInput()s and run with RunValues().

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "op/node_desc.h"
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

// One node of `op` at `opset`, run on the reference kernels. Inputs are fed values (declared with
// their dtype and unknown shape) or constants; every present output is returned. Errors of the
// factory and of Compute are prefixed "node 'node' (Op): " as the runtime prefixes them.
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
  // An omitted optional input.
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

  // The node's description, as the runtime hands it to a kernel factory.
  NodeDesc Describe() const {
    NodeDesc d;
    d.name = "node";
    d.op_type = op_;
    d.domain = domain_;
    d.opset = domain_.empty() ? opset_ : domain_opset_;
    d.attributes = attrs_;
    for (const InputSpec& in : inputs_) {
      OperandDesc o;
      if (!in.omitted) {
        o.present = true;
        o.type.dtype = in.declared.value_or(in.tensor.dtype());
        if (in.value.valid()) o.type = in.value_type;
        if (in.constant) o.constant = std::make_shared<const OwnedTensor>(in.tensor);
      }
      d.inputs.push_back(std::move(o));
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      OperandDesc o;
      o.present = outputs_[i];
      if (o.present && i == 0) o.type.dtype = output_type_;
      for (const auto& [index, type] : output_value_types_) {
        if (o.present && static_cast<size_t>(index) == i) o.type = type;
      }
      d.outputs.push_back(std::move(o));
    }
    return d;
  }

  // The reference kernel for the node (registry lookup and factory).
  Result<std::unique_ptr<Kernel>> Build() const {
    const NodeDesc desc = Describe();
    const KernelInfo info(desc);
    KILN_ASSIGN_OR_RETURN(const KernelDef* def,
                          KernelRegistry::Global().Find(info, DeviceType::kCpu, "ref"));
    Result<std::unique_ptr<Kernel>> kernel = def->create(info);
    if (!kernel.ok()) return kernel.status().WithContext(Label());
    return kernel;
  }

  // Build()'s status.
  Status Create() const { return Build().status(); }

  // Builds the kernel and runs it once; every present output must be a tensor.
  Result<std::vector<OwnedTensor>> Run() const {
    KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> values, RunValues());
    std::vector<OwnedTensor> out;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i].is_tensor()) {
        return Status::Unimplemented(
            fmt::format("{}: output {} is a {}, not a tensor", Label(), i, values[i].Describe()));
      }
      out.push_back(values[i].tensor());
    }
    return out;
  }

  // Builds the kernel and runs it once over values (sequences and nones only for kernels that
  // take them, as the runtime does); returns every present output.
  Result<std::vector<RuntimeValue>> RunValues() const {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, Build());
    const bool takes_values = kernel->TakesNonTensorValues();
    std::vector<Tensor> inputs(inputs_.size());
    std::vector<const RuntimeValue*> values(inputs_.size(), nullptr);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const InputSpec& in = inputs_[i];
      if (in.omitted) continue;
      if (!in.value.valid()) {
        inputs[i] = in.tensor.view();
      } else if (in.value.is_tensor()) {
        inputs[i] = in.value.tensor().view();
      } else if (takes_values) {
        values[i] = &in.value;
      } else {
        return Status::InvalidArgument(fmt::format("{}: input {} is a {}; the kernel takes tensors",
                                                   Label(), i, in.value.Describe()));
      }
    }
    std::vector<OwnedTensor> outputs(outputs_.size());
    std::vector<RuntimeValue> output_values(takes_values ? outputs_.size() : 0);
    KernelContext ctx(inputs, values, outputs, output_values);
    if (Status s = kernel->Compute(ctx); !s.ok()) return s.WithContext(Label());
    std::vector<RuntimeValue> results;
    for (size_t o = 0; o < outputs_.size(); ++o) {
      if (!outputs_[o]) continue;
      if (outputs[o].valid()) {
        results.emplace_back(std::move(outputs[o]));
      } else if (takes_values && output_values[o].valid()) {
        results.push_back(std::move(output_values[o]));
      } else {
        return Status::Internal(fmt::format("{}: output {} was not produced", Label(), o));
      }
    }
    return results;
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
  std::string Label() const { return fmt::format("node 'node' ({})", op_); }

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
      const T& e = expected[i];  // for std::vector<bool>: the unpacked bool (a temporary)
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
