// SPDX-License-Identifier: Apache-2.0
#pragma once
// The cases of the CUDA kernel harness (cuda_kernels_test.cc): one node each, built with fresh
// random inputs every run, run by the reference kernel on the CPU and by the CUDA kernel on the
// GPU, every output compared. Each group of ops lists its cases in its own *_cases.cc.
//
// A case is written in FP32 (and integer tensors where the op takes them) and run at `dtype`:
// for FP16 / BF16 the harness rounds every FP32 input through `dtype`, runs the reference on the
// rounded FP32 values, runs the CUDA kernel on the inputs converted to `dtype`, and compares the
// CUDA outputs widened to FP32 with the reference's, |cuda - ref| <= tol * (1 + |ref|).
// Inputs marked Keep are handed to both unchanged (the FP32 operands of a half-weight op, indices,
// a Cast's input, an input already in a half type).
//
//   CudaCase c{"Add broadcast row", "Add", "", 14, DataType::kFloat16};
//   c.make = [](CaseInputs& in, std::mt19937& rng) {
//     in.Input(Random({4, 8}, rng)).Input(Random({8}, rng));
//   };

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/ref/ref_test_util.h"
#include "op/attribute.h"
#include "tensor/tensor.h"

namespace kiln::cuda::testing {

// The node's attributes and inputs, as a case builds them.
struct CaseInputs {
  struct In {
    OwnedTensor tensor;  // invalid for an omitted input
    bool constant = false;
    bool keep = false;  // not converted to the case's dtype
  };
  std::vector<Attribute> attributes;
  std::vector<In> inputs;
  int num_outputs = 1;

  CaseInputs& Attr(Attribute a) {
    attributes.push_back(std::move(a));
    return *this;
  }
  CaseInputs& Input(OwnedTensor t) {
    inputs.push_back({std::move(t), false, false});
    return *this;
  }
  CaseInputs& ConstInput(OwnedTensor t) {
    inputs.push_back({std::move(t), true, false});
    return *this;
  }
  CaseInputs& KeepInput(OwnedTensor t) {
    inputs.push_back({std::move(t), false, true});
    return *this;
  }
  CaseInputs& KeepConstInput(OwnedTensor t) {
    inputs.push_back({std::move(t), true, true});
    return *this;
  }
  CaseInputs& OmittedInput() {
    inputs.push_back({});
    return *this;
  }
  CaseInputs& Outputs(int n) {
    num_outputs = n;
    return *this;
  }
};

struct CudaCase {
  std::string name;  // unique within the harness: "Add broadcast row f16"
  std::string op;
  std::string domain;  // "" (ONNX) or "ai.kiln"
  int64_t opset = 17;  // of the node's domain
  DataType dtype = DataType::kFloat32;
  std::function<void(CaseInputs&, std::mt19937&)> make;
  // |cuda - ref| <= tolerance * (1 + |ref|); 0: the dtype's default (DefaultTolerance).
  double tolerance = 0.0;
};

// FP32 1e-5, FP16 2e-3, BF16 1.6e-2 (a few units in the last place of the output type, after
// FP32 arithmetic); integers and booleans exactly. Matrix products and convolutions state their
// own (TF32 and the order of long sums).
double DefaultTolerance(DataType dtype);

// Uniform FP32 values in [lo, hi).
inline OwnedTensor Random(const Shape& shape, std::mt19937& rng, double lo = -1.0,
                          double hi = 1.0) {
  return ref::testing::MakeTensor<float>(
      shape, ref::testing::RandomValues<float>(shape.NumElements(), rng, lo, hi));
}
// Uniform integers in [lo, hi] of type T (int64_t, int32_t, ...).
template <typename T>
OwnedTensor RandomInts(const Shape& shape, std::mt19937& rng, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<T> v(static_cast<size_t>(shape.NumElements()));
  for (T& x : v) x = static_cast<T>(dist(rng));
  return ref::testing::MakeTensor<T>(shape, v);
}

// The cases of each group.
std::vector<CudaCase> ElementwiseCases();  // elementwise_cases.cc
std::vector<CudaCase> ReduceCases();       // reduce_cases.cc
std::vector<CudaCase> DataCases();         // data_cases.cc
std::vector<CudaCase> BlasCases();         // blas_cases.cc
std::vector<CudaCase> DnnCases();          // dnn_cases.cc

}  // namespace kiln::cuda::testing
