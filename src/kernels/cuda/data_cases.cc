// SPDX-License-Identifier: Apache-2.0
// Harness cases of the CUDA data-movement kernels (data.cc): every KernelDef of DataKernelDefs in
// FP32, FP16 and BF16 and in at least one integer type, with the attribute variants, odd sizes,
// negative axes, size-1 and zero-size dims, and sizes past one block of the grid-stride loops.
//
// Each case is written once over a list of element types: `make` receives the generator of the
// case's data tensors (FP32 values the harness converts for FP16 / BF16, or values of the integer
// or FP64 type itself). Shape-like inputs (shapes, axes, pads, repeats, scales, sizes, indices)
// are INT64 / FP32 tensors kept as they are (KeepConstInput, KeepInput).

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/test_cases.h"

namespace kiln::cuda::testing {
namespace {

using ref::testing::FloatAttr;
using ref::testing::IntAttr;
using ref::testing::IntsAttr;
using ref::testing::MakeTensor;
using ref::testing::StringAttr;

// A data tensor of the case's type.
using Data = std::function<OwnedTensor(const Shape&, std::mt19937&)>;
using Make = std::function<void(CaseInputs&, std::mt19937&, const Data&)>;

struct Type {
  DataType dtype;
  std::string name;
  Data data;
};

Type F32() {
  return {DataType::kFloat32, "f32", [](const Shape& s, std::mt19937& r) { return Random(s, r); }};
}
Type F16() {
  return {DataType::kFloat16, "f16", [](const Shape& s, std::mt19937& r) { return Random(s, r); }};
}
Type BF16() {
  return {DataType::kBFloat16, "bf16",
          [](const Shape& s, std::mt19937& r) { return Random(s, r); }};
}
Type F64() {
  return {DataType::kFloat64, "f64", [](const Shape& s, std::mt19937& r) {
            return MakeTensor<double>(s, ref::testing::RandomValues<double>(s.NumElements(), r));
          }};
}
Type I64() {
  return {DataType::kInt64, "i64",
          [](const Shape& s, std::mt19937& r) { return RandomInts<int64_t>(s, r, -1000, 1000); }};
}
Type I32() {
  return {DataType::kInt32, "i32",
          [](const Shape& s, std::mt19937& r) { return RandomInts<int32_t>(s, r, -1000, 1000); }};
}
Type I8() {
  return {DataType::kInt8, "i8",
          [](const Shape& s, std::mt19937& r) { return RandomInts<int8_t>(s, r, -128, 127); }};
}
Type U8() {
  return {DataType::kUint8, "u8",
          [](const Shape& s, std::mt19937& r) { return RandomInts<uint8_t>(s, r, 0, 255); }};
}
Type Bool() {
  return {DataType::kBool, "bool", [](const Shape& s, std::mt19937& r) {
            std::bernoulli_distribution coin;
            std::vector<bool> v(static_cast<size_t>(s.NumElements()));
            for (size_t i = 0; i < v.size(); ++i) v[i] = coin(r);
            return MakeTensor<bool>(s, v);
          }};
}

// FP32, FP16, BF16 and the given others.
std::vector<Type> Floats(std::vector<Type> more = {}) {
  std::vector<Type> t = {F32(), F16(), BF16()};
  t.insert(t.end(), more.begin(), more.end());
  return t;
}

OwnedTensor Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeTensor<int64_t>(Shape{n}, v);
}
OwnedTensor Floats32(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return MakeTensor<float>(Shape{n}, v);
}
// Indices in [lo, hi] of `shape`.
OwnedTensor Indices(const Shape& shape, std::mt19937& rng, int64_t lo, int64_t hi) {
  return RandomInts<int64_t>(shape, rng, lo, hi);
}

class Cases {
 public:
  // One case per type: "<name> <type>".
  void Add(const std::string& name, const std::string& op, int64_t opset,
           const std::vector<Type>& types, Make make, double tolerance = 0.0) {
    for (const Type& t : types) {
      CudaCase c;
      c.name = name + " " + t.name;
      c.op = op;
      c.opset = opset;
      c.dtype = t.dtype;
      c.make = [make, data = t.data](CaseInputs& in, std::mt19937& rng) { make(in, rng, data); };
      c.tolerance = tolerance;
      cases_.push_back(std::move(c));
    }
  }
  std::vector<CudaCase> Take() { return std::move(cases_); }

 private:
  std::vector<CudaCase> cases_;
};

void ViewCases(Cases& c) {
  c.Add("Reshape-13 infer", "Reshape", 13, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({2, 3, 5}, rng)).KeepConstInput(Ints({5, -1}));
        });
  c.Add("Reshape-13 copy dim", "Reshape", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({4, 3, 7}, rng)).KeepConstInput(Ints({0, 21, 1}));
        });
  c.Add("Reshape-14 allowzero", "Reshape", 14, Floats({I8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("allowzero", 1)).Input(data({0, 3}, rng)).KeepConstInput(Ints({3, 0}));
        });
  c.Add("Reshape-17 large", "Reshape", 17, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({70001}, rng)).KeepConstInput(Ints({-1, 1}));
        });
  c.Add("Flatten-9 axis 2", "Flatten", 9, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 2)).Input(data({2, 3, 4, 5}, rng));
        });
  c.Add("Flatten-13 negative axis", "Flatten", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", -1)).Input(data({3, 1, 7}, rng));
        });
  c.Add("Flatten-13 axis 0", "Flatten", 13, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 0)).Input(data({3, 4}, rng));
        });
  c.Add("Squeeze-7 axes", "Squeeze", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("axes", {0, 2})).Input(data({1, 5, 1, 3}, rng));
        });
  c.Add("Squeeze-11 negative axes", "Squeeze", 11, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("axes", {-1})).Input(data({4, 3, 1}, rng));
        });
  c.Add("Squeeze-13 axes input", "Squeeze", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({1, 6, 1}, rng)).KeepConstInput(Ints({-3}));
        });
  c.Add("Squeeze-13 all", "Squeeze", 13, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({1, 6, 1, 5, 1}, rng));
        });
  c.Add("Unsqueeze-7 axes", "Unsqueeze", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("axes", {0, 3})).Input(data({5, 3}, rng));
        });
  c.Add("Unsqueeze-11 negative axes", "Unsqueeze", 11, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("axes", {-1})).Input(data({5, 3}, rng));
        });
  c.Add("Unsqueeze-13 axes input", "Unsqueeze", 13, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({7}, rng)).KeepConstInput(Ints({0, -1}));
        });
  c.Add("Unsqueeze-13 scalar", "Unsqueeze", 13, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({}, rng)).KeepConstInput(Ints({0}));
        });
  c.Add("Identity-13", "Identity", 13, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({3, 70000}, rng));
        });
  c.Add("Identity-14", "Identity", 14, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({4, 5}, rng));
        });
  c.Add("Identity-16", "Identity", 16, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) { in.Input(data({7}, rng)); });
  c.Add("Identity-16 empty", "Identity", 16, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({0, 2}, rng));
        });
}

void TransposeCases(Cases& c) {
  auto add = [&](const std::string& name, const Shape& shape, std::vector<int64_t> perm,
                 const std::vector<Type>& types) {
    c.Add("Transpose " + name, "Transpose", 13, types,
          [shape, perm](CaseInputs& in, std::mt19937& rng, const Data& data) {
            if (!perm.empty()) in.Attr(IntsAttr("perm", perm));
            in.Input(data(shape, rng));
          });
  };
  add("default perm", {3, 4, 5}, {}, Floats({I64()}));
  add("2-D odd", {70, 131}, {1, 0}, Floats({I8(), F64()}));
  add("2-D large", {300, 257}, {1, 0}, Floats());
  add("batched last two", {4, 33, 65}, {0, 2, 1}, Floats({I32()}));
  add("NCHW to NHWC", {2, 5, 7, 9}, {0, 2, 3, 1}, Floats({U8()}));
  add("NHWC to NCHW", {2, 7, 9, 5}, {0, 3, 1, 2}, Floats({Bool()}));
  add("heads", {2, 3, 5, 8}, {0, 2, 1, 3}, Floats({I64()}));
  add("general", {3, 4, 5, 6}, {3, 1, 0, 2}, Floats({I64()}));
  add("size-1 dims", {1, 6, 1, 7}, {3, 2, 0, 1}, Floats());
  add("5-D large", {3, 10, 7, 13, 26}, {4, 2, 0, 3, 1}, Floats());
  add("identity", {4, 6}, {0, 1}, Floats());
  add("ones", {1, 1, 1}, {2, 0, 1}, Floats({I64()}));
  add("empty", {0, 4}, {1, 0}, Floats());
}

void ConcatSplitCases(Cases& c) {
  c.Add("Concat-7 axis 1", "Concat", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1)).Input(data({2, 3, 4}, rng)).Input(data({2, 5, 4}, rng));
        });
  c.Add("Concat-13 negative axis", "Concat", 13, Floats({I8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", -1))
              .Input(data({3, 5}, rng))
              .Input(data({3, 1}, rng))
              .Input(data({3, 7}, rng));
        });
  c.Add("Concat-13 empty input", "Concat", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 0))
              .Input(data({2, 6}, rng))
              .Input(data({0, 6}, rng))
              .Input(data({3, 6}, rng));
        });
  c.Add("Concat-13 wide", "Concat", 13, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1))
              .Input(data({2, 8, 64, 70}, rng))
              .Input(data({2, 4, 64, 70}, rng));
        });
  c.Add("Concat-13 40 inputs", "Concat", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1));
          for (int i = 0; i < 40; ++i) in.Input(data({3, 1 + i % 4, 5}, rng));
        });
  c.Add("Split-7 attribute", "Split", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1)).Attr(IntsAttr("split", {2, 5})).Input(data({3, 7, 2}, rng));
          in.Outputs(2);
        });
  c.Add("Split-11 equal negative axis", "Split", 11, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", -1)).Input(data({4, 9}, rng)).Outputs(3);
        });
  c.Add("Split-13 input", "Split", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 0)).Input(data({10, 3}, rng)).KeepConstInput(Ints({1, 0, 6, 3}));
          in.Outputs(4);
        });
  c.Add("Split-13 equal large", "Split", 13, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1)).Input(data({2, 6, 100, 120}, rng)).Outputs(2);
        });
  c.Add("Split-13 40 outputs", "Split", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", -2)).Input(data({2, 40, 3}, rng)).Outputs(40);
        });
}

void SliceCases(Cases& c) {
  c.Add("Slice-9 attributes", "Slice", 9, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("starts", {1, 0}))
              .Attr(IntsAttr("ends", {3, -1}))
              .Attr(IntsAttr("axes", {0, 2}))
              .Input(data({4, 3, 5}, rng));
        });
  c.Add("Slice-9 default axes clamped", "Slice", 9, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("starts", {-100, 2}))
              .Attr(IntsAttr("ends", {100, 1000}))
              .Input(data({4, 6}, rng));
        });
  c.Add("Slice-10 steps", "Slice", 10, Floats({I8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({7, 9}, rng))
              .KeepConstInput(Ints({1, 0}))
              .KeepConstInput(Ints({7, 9}))
              .KeepConstInput(Ints({0, 1}))
              .KeepConstInput(Ints({2, 3}));
        });
  c.Add("Slice-11 negative axes", "Slice", 11, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({5, 6, 7}, rng))
              .KeepConstInput(MakeTensor<int32_t>({1}, {2}))
              .KeepConstInput(MakeTensor<int32_t>({1}, {-1}))
              .KeepConstInput(MakeTensor<int32_t>({1}, {-2}));
        });
  c.Add("Slice-13 negative steps", "Slice", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({6, 8, 5}, rng))
              .KeepConstInput(Ints({-1, std::numeric_limits<int64_t>::max()}))
              .KeepConstInput(Ints({std::numeric_limits<int64_t>::min(), 1}))
              .KeepConstInput(Ints({0, 1}))
              .KeepConstInput(Ints({-2, -3}));
        });
  c.Add("Slice-13 channels", "Slice", 13, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({2, 16, 40, 24}, rng))
              .KeepConstInput(Ints({4}))
              .KeepConstInput(Ints({12}))
              .KeepConstInput(Ints({1}));
        });
  c.Add("Slice-13 large", "Slice", 13, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({300, 301}, rng))
              .KeepConstInput(Ints({1, 3}))
              .KeepConstInput(Ints({299, 300}))
              .OmittedInput()
              .KeepConstInput(Ints({1, 1}));
        });
  c.Add("Slice-13 everything", "Slice", 13, Floats({I8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({3, 4, 5}, rng))
              .KeepConstInput(Ints({0, -100}))
              .KeepConstInput(Ints({100, 100}))
              .KeepConstInput(Ints({2, 0}));
        });
  c.Add("Slice-13 empty", "Slice", 13, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({4, 5}, rng))
              .KeepConstInput(Ints({3}))
              .KeepConstInput(Ints({1}))
              .KeepConstInput(Ints({1}));
        });
}

void GatherCases(Cases& c) {
  c.Add("Gather-7 axis 0", "Gather", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({5, 4}, rng)).KeepInput(Indices({2, 3}, rng, 0, 4));
        });
  c.Add("Gather-11 negative indices and axis", "Gather", 11, Floats({I8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", -1))
              .Input(data({3, 4, 7}, rng))
              .KeepInput(Indices({5}, rng, -7, 6));
        });
  c.Add("Gather-13 int32 indices axis 1", "Gather", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1))
              .Input(data({3, 6, 5}, rng))
              .KeepInput(RandomInts<int32_t>({2, 2}, rng, -6, 5));
        });
  c.Add("Gather-13 scalar index", "Gather", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", 1)).Input(data({4, 9}, rng)).KeepInput(Indices({}, rng, -9, 8));
        });
  c.Add("Gather-13 embedding", "Gather", 13, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({100, 768}, rng)).KeepInput(Indices({2, 50}, rng, -100, 99));
        });
  c.Add("Gather-13 odd rows", "Gather", 13, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({40, 3, 7}, rng)).KeepInput(Indices({3337}, rng, 0, 39));
        });
  c.Add("Gather-13 empty indices", "Gather", 13, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({4, 3}, rng)).KeepInput(Indices({0}, rng, 0, 3));
        });
  c.Add(
      "GatherElements-11", "GatherElements", 11, Floats({I64()}),
      [](CaseInputs& in, std::mt19937& rng, const Data& data) {
        in.Attr(IntAttr("axis", 1)).Input(data({3, 5}, rng)).KeepInput(Indices({3, 7}, rng, -5, 4));
      });
  c.Add("GatherElements-13 negative axis", "GatherElements", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntAttr("axis", -3))
              .Input(data({6, 5, 4}, rng))
              .KeepInput(RandomInts<int32_t>({9, 3, 4}, rng, -6, 5));
        });
  c.Add("GatherElements-13 large", "GatherElements", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({300, 260}, rng)).KeepInput(Indices({280, 250}, rng, -300, 299));
        });
}

void PadTileCases(Cases& c) {
  c.Add("Pad-7 value", "Pad", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(IntsAttr("pads", {1, 0, 2, 3}))
              .Attr(FloatAttr("value", 1.5f))
              .Input(data({3, 4}, rng));
        });
  c.Add("Pad-7 reflect", "Pad", 7, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(StringAttr("mode", "reflect"))
              .Attr(IntsAttr("pads", {0, 3, 0, 2}))
              .Input(data({2, 4}, rng));
        });
  c.Add("Pad-11 constant value", "Pad", 11, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({2, 3, 5}, rng))
              .KeepConstInput(Ints({0, 1, 2, 0, 2, 1}))
              .ConstInput(data({}, rng));
        });
  c.Add("Pad-13 edge", "Pad", 13, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(StringAttr("mode", "edge"))
              .Input(data({2, 3, 4}, rng))
              .KeepConstInput(Ints({0, 2, 1, 0, 3, 4}));
        });
  c.Add("Pad-13 reflect wide", "Pad", 13, Floats({I8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(StringAttr("mode", "reflect"))
              .Input(data({3, 3}, rng))
              .KeepConstInput(Ints({5, 1, 6, 7}));
        });
  c.Add("Pad-13 negative pads", "Pad", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({5, 6, 7}, rng)).KeepConstInput(Ints({-1, 0, 2, 1, 0, -3}));
        });
  c.Add("Pad-13 channels large", "Pad", 13, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({2, 5, 64, 64}, rng))
              .KeepConstInput(Ints({0, 1, 0, 0, 0, 2, 0, 0}))
              .ConstInput(data({1}, rng));
        });
  c.Add("Pad-13 no padding", "Pad", 13, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({3, 1, 5}, rng)).KeepConstInput(Ints({0, 0, 0, 0, 0, 0}));
        });
  c.Add("Pad-13 empty dim", "Pad", 13, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({0, 3}, rng)).KeepConstInput(Ints({1, 0, 1, 0}));
        });
  c.Add("Tile-7", "Tile", 7, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({2, 3}, rng)).KeepConstInput(Ints({3, 2}));
        });
  c.Add("Tile-13 mixed", "Tile", 13, Floats({Bool()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({2, 1, 3, 5}, rng)).KeepConstInput(Ints({1, 4, 1, 3}));
        });
  c.Add("Tile-13 large", "Tile", 13, Floats({F64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({7, 64}, rng)).KeepConstInput(Ints({160, 1}));
        });
  c.Add("Tile-13 zero repeat", "Tile", 13, Floats({I32()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({3, 4}, rng)).KeepConstInput(Ints({0, 2}));
        });
}

void ResizeCases(Cases& c) {
  // Opset 13: X, roi (omitted), scales or sizes.
  auto scales13 = [](const Shape& shape, std::vector<float> scales,
                     std::vector<Attribute> attrs) -> Make {
    return [=](CaseInputs& in, std::mt19937& rng, const Data& data) {
      for (const Attribute& a : attrs) in.Attr(a);
      in.Input(data(shape, rng)).OmittedInput().KeepConstInput(Floats32(scales));
    };
  };
  auto sizes13 = [](const Shape& shape, std::vector<int64_t> sizes,
                    std::vector<Attribute> attrs) -> Make {
    return [=](CaseInputs& in, std::mt19937& rng, const Data& data) {
      for (const Attribute& a : attrs) in.Attr(a);
      in.Input(data(shape, rng)).OmittedInput().OmittedInput().KeepConstInput(Ints(sizes));
    };
  };
  const Attribute linear = StringAttr("mode", "linear");
  auto coord = [](const char* m) { return StringAttr("coordinate_transformation_mode", m); };
  auto nearest = [](const char* m) { return StringAttr("nearest_mode", m); };
  // FP64 linear sums in another order than the reference's double sums: a few ulps.
  const double kF64Linear = 1e-12;

  // Opset 10: X, scales; asymmetric, nearest floor.
  c.Add("Resize-10 nearest", "Resize", 10, Floats({I64()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Input(data({1, 2, 3, 5}, rng)).KeepConstInput(Floats32({1, 1, 2, 1.5f}));
        });
  c.Add("Resize-10 linear", "Resize", 10, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(StringAttr("mode", "linear"))
              .Input(data({2, 3, 4, 5}, rng))
              .KeepConstInput(Floats32({1, 1, 1.75f, 0.6f}));
        });
  // Opset 11: X, roi (empty), scales (empty when sizes is given), sizes.
  c.Add("Resize-11 tf_half_pixel_for_nn", "Resize", 11, Floats({U8()}),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(StringAttr("coordinate_transformation_mode", "tf_half_pixel_for_nn"))
              .Input(data({1, 3, 5, 6}, rng))
              .KeepConstInput(Floats32({}))
              .KeepConstInput(Floats32({1, 1, 1.6f, 1}));
        });
  c.Add("Resize-11 align_corners sizes", "Resize", 11, Floats(),
        [](CaseInputs& in, std::mt19937& rng, const Data& data) {
          in.Attr(StringAttr("mode", "linear"))
              .Attr(StringAttr("coordinate_transformation_mode", "align_corners"))
              .Input(data({1, 2, 4, 6}, rng))
              .KeepConstInput(Floats32({}))
              .KeepConstInput(Floats32({}))
              .KeepConstInput(Ints({1, 2, 7, 3}));
        });
  c.Add("Resize-13 nearest half_pixel", "Resize", 13, Floats({Bool(), F64()}),
        scales13({2, 3, 5, 7}, {1, 1, 2, 3}, {}));
  c.Add("Resize-13 nearest ceil asymmetric", "Resize", 13, Floats({I32()}),
        scales13({1, 2, 6, 5}, {1, 1, 0.5f, 2.5f}, {coord("asymmetric"), nearest("ceil")}));
  c.Add("Resize-13 nearest round_prefer_ceil", "Resize", 13, Floats({I8()}),
        sizes13({2, 7, 9}, {2, 10, 4}, {nearest("round_prefer_ceil")}));
  c.Add("Resize-13 nearest floor align_corners", "Resize", 13, Floats(),
        sizes13({3, 8, 5}, {3, 5, 9}, {coord("align_corners"), nearest("floor")}));
  c.Add("Resize-13 nearest pytorch_half_pixel", "Resize", 13, Floats(),
        sizes13({2, 5, 6}, {2, 1, 9}, {coord("pytorch_half_pixel")}));
  c.Add("Resize-13 nearest large", "Resize", 13, Floats(),
        scales13({1, 3, 100, 60}, {1, 1, 2, 2}, {}));
  c.Add("Resize-13 linear half_pixel", "Resize", 13, Floats(),
        scales13({2, 3, 5, 7}, {1, 1, 2, 1.5f}, {linear}));
  c.Add("Resize-13 linear downsample", "Resize", 13, Floats(),
        sizes13({1, 2, 9, 11}, {1, 2, 4, 5}, {linear}));
  c.Add("Resize-13 linear pytorch_half_pixel", "Resize", 13, Floats(),
        sizes13({2, 4, 5, 1}, {2, 4, 11, 1}, {linear, coord("pytorch_half_pixel")}));
  c.Add("Resize-13 trilinear asymmetric", "Resize", 13, Floats(),
        scales13({1, 3, 4, 5, 6}, {1, 1, 1.5f, 2, 0.5f}, {linear, coord("asymmetric")}));
  c.Add("Resize-13 linear large", "Resize", 13, Floats(),
        sizes13({1, 2, 64, 48}, {1, 2, 128, 96}, {linear, coord("align_corners")}));
  c.Add("Resize-13 linear f64", "Resize", 13, {F64()},
        sizes13({1, 2, 6, 7}, {1, 2, 11, 4}, {linear}), kF64Linear);
  c.Add("Resize-13 linear identity", "Resize", 13, Floats(),
        scales13({2, 3, 4}, {1, 1, 1}, {linear}));
  c.Add("Resize-13 nearest downsample", "Resize", 13, Floats({I64()}),
        scales13({2, 30, 17}, {1, 0.3f, 0.45f}, {nearest("round_prefer_ceil")}));
  c.Add("Resize-13 empty", "Resize", 13, Floats(), sizes13({2, 3, 4}, {2, 0, 5}, {}));
}

}  // namespace

std::vector<CudaCase> DataCases() {
  Cases c;
  ViewCases(c);
  TransposeCases(c);
  ConcatSplitCases(c);
  SliceCases(c);
  GatherCases(c);
  PadTileCases(c);
  ResizeCases(c);
  return c.Take();
}

}  // namespace kiln::cuda::testing
