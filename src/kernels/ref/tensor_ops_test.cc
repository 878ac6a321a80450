// SPDX-License-Identifier: Apache-2.0
// Tests for the reference data-movement kernels (tensor_ops.cc): Reshape, Flatten, Transpose,
// Concat, Identity and Constant. Hand-checked cases, every dtype (BYTES, BOOL, FP16, BF16
// included) against element moves computed in the test, and errors.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

OwnedTensor ShapeTensor(const std::vector<int64_t>& dims) {
  const int64_t n = static_cast<int64_t>(dims.size());
  return MakeTensor<int64_t>({n}, dims);
}

TEST(ReshapeTest, InfersAndCopiesDims) {
  // [2,3] -> [3,-1] = [3,2]; the data keeps its row-major order.
  ExpectTensor<float>(OpTest("Reshape", 13)
                          .Input(MakeTensor<float>({2, 3}, Iota(6)))
                          .ConstInput(ShapeTensor({3, -1}))
                          .RunOne(),
                      {3, 2}, Iota(6));
  // 0 copies the input dim: [2,3,4] -> [0,-1] = [2,12]. The shape may be a runtime input.
  ExpectTensor<float>(OpTest("Reshape", 7)
                          .Input(MakeTensor<float>({2, 3, 4}, Iota(24)))
                          .Input(ShapeTensor({0, -1}))
                          .RunOne(),
                      {2, 12}, Iota(24));
  // To a scalar and back.
  ExpectTensor<float>(OpTest("Reshape", 14)
                          .Input(MakeTensor<float>({1, 1}, {7}))
                          .ConstInput(ShapeTensor({}))
                          .RunOne(),
                      {}, {7});
}

TEST(ReshapeTest, AllowZero) {
  // x [0,3] (no elements) to [3,0]: with allowzero the 0 is a real zero dim.
  const OwnedTensor x = MakeTensor<float>({0, 3}, {});
  ExpectTensor<float>(OpTest("Reshape", 14)
                          .Attr(IntAttr("allowzero", 1))
                          .Input(x)
                          .ConstInput(ShapeTensor({3, 0}))
                          .RunOne(),
                      {3, 0}, {});
  // Without allowzero the 0 copies x's dim 1 (3): [3,3] has 9 elements, x has 0.
  ExpectInvalid(OpTest("Reshape", 14).Input(x).ConstInput(ShapeTensor({3, 0})).RunStatus(),
                {"Reshape", "cannot reshape input [0,3] (0 elements) to [3,3] (9 elements)"});
  ExpectInvalid(OpTest("Reshape", 14)
                    .Attr(IntAttr("allowzero", 1))
                    .Input(x)
                    .ConstInput(ShapeTensor({0, -1}))
                    .RunStatus(),
                {"Reshape", "both 0 and -1"});
  ExpectInvalid(OpTest("Reshape", 13)
                    .Attr(IntAttr("allowzero", 1))
                    .Input(x)
                    .ConstInput(ShapeTensor({3, 0}))
                    .Create(),
                {"Reshape", "'allowzero' is not defined before opset 14"});
}

TEST(ReshapeTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, Iota(6));
  auto reshape = [&](const std::vector<int64_t>& dims) {
    return OpTest("Reshape", 13).Input(x).ConstInput(ShapeTensor(dims)).RunStatus();
  };
  ExpectInvalid(reshape({4, 2}), {"Reshape", "cannot reshape input [2,3] (6 elements) to [4,2]"});
  ExpectInvalid(reshape({-1, -1}), {"Reshape", "more than one -1"});
  ExpectInvalid(reshape({-2, 3}), {"Reshape", "invalid dim -2"});
  ExpectInvalid(reshape({4, -1}), {"Reshape", "cannot infer the -1"});
  ExpectInvalid(reshape({1, 2, 0}), {"Reshape", "0 at index 2", "rank 2"});
  ExpectInvalid(reshape({1, 1, 1, 1, 1, 1, 1, 1, 6}), {"Reshape", "9 dims"});
  ExpectInvalid(reshape({1LL << 40, 1LL << 40}), {"Reshape", "64 bits"});
  // The shape must be INT64: declared (rejected at load) or found at run time.
  ExpectInvalid(OpTest("Reshape", 13).Input(x).Input(MakeTensor<int32_t>({1}, {6})).Create(),
                {"Reshape", "must be INT64"});
  ExpectInvalid(OpTest("Reshape", 13)
                    .Input(x)
                    .Input(MakeTensor<int32_t>({1}, {6}), DataType::kInvalid)
                    .RunStatus(),
                {"Reshape", "1-D INT64", "INT32"});
  ExpectInvalid(OpTest("Reshape", 13).Input(x).Input(MakeTensor<int64_t>({1, 1}, {6})).RunStatus(),
                {"Reshape", "1-D INT64"});
}

TEST(ReshapeTest, ShapeAttributeIsRejected) {
  // Opset 1-4's `shape` attribute becomes input 1 in the importer's version adapter.
  ExpectInvalid(OpTest("Reshape", 7).Input(MakeTensor<float>({2, 3}, Iota(6))).Create(),
                {"Reshape", "required input 1 is missing"});
  ExpectInvalid(OpTest("Reshape", 7)
                    .Attr(IntsAttr("shape", {6}))
                    .Input(MakeTensor<float>({2, 3}, Iota(6)))
                    .ConstInput(ShapeTensor({6}))
                    .Create(),
                {"Reshape", "'shape' was removed in opset 5"});
}

TEST(FlattenTest, Axes) {
  const OwnedTensor x = MakeTensor<float>({2, 3, 4}, Iota(24));
  auto flatten = [&](int64_t opset, int64_t axis) {
    return OpTest("Flatten", opset).Attr(IntAttr("axis", axis)).Input(x);
  };
  ExpectTensor<float>(OpTest("Flatten", 13).Input(x).RunOne(), {2, 12}, Iota(24));  // default 1
  ExpectTensor<float>(flatten(7, 0).RunOne(), {1, 24}, Iota(24));
  ExpectTensor<float>(flatten(9, 3).RunOne(), {24, 1}, Iota(24));
  ExpectTensor<float>(flatten(11, -1).RunOne(), {6, 4}, Iota(24));
  ExpectTensor<float>(flatten(13, -3).RunOne(), {1, 24}, Iota(24));
  ExpectInvalid(flatten(9, -1).Create(), {"Flatten", "negative axis", "opset 11"});
  ExpectInvalid(flatten(13, 4).RunStatus(), {"Flatten", "axis 4 is out of range [-3, 3]"});
}

TEST(TransposeTest, HandChecked) {
  // [[1,2,3],[4,5,6]] reversed to [[1,4],[2,5],[3,6]].
  ExpectTensor<float>(OpTest("Transpose", 13).Input(MakeTensor<float>({2, 3}, Iota(6))).RunOne(),
                      {3, 2}, {1, 4, 2, 5, 3, 6});
  // [2,1,2] with perm [2,0,1]: out[i][j][k] = x[j][k][i]; x = [[[1,2]],[[3,4]]]
  //   -> [[[1],[3]], [[2],[4]]] of shape [2,2,1].
  ExpectTensor<float>(OpTest("Transpose", 7)
                          .Attr(IntsAttr("perm", {2, 0, 1}))
                          .Input(MakeTensor<float>({2, 1, 2}, {1, 2, 3, 4}))
                          .RunOne(),
                      {2, 2, 1}, {1, 3, 2, 4});
  // A scalar transposes to itself.
  ExpectTensor<int64_t>(OpTest("Transpose", 13).Input(MakeTensor<int64_t>({}, {5})).RunOne(), {},
                        {5});
}

TEST(TransposeTest, Errors) {
  const OwnedTensor x = MakeTensor<float>({2, 3}, Iota(6));
  ExpectInvalid(OpTest("Transpose", 13).Attr(IntsAttr("perm", {0, 0})).Input(x).Create(),
                {"Transpose", "not a permutation"});
  ExpectInvalid(OpTest("Transpose", 13).Attr(IntsAttr("perm", {0, 2})).Input(x).Create(),
                {"Transpose", "not a permutation"});
  ExpectInvalid(OpTest("Transpose", 13).Attr(IntsAttr("perm", {1, 2, 0})).Input(x).RunStatus(),
                {"Transpose", "3 entries", "rank 2"});
}

TEST(ConcatTest, HandChecked) {
  // [[1,2],[3,4]] ++ [[5],[6]] along axis 1 = [[1,2,5],[3,4,6]].
  const OwnedTensor a = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  const OwnedTensor b = MakeTensor<float>({2, 1}, {5, 6});
  ExpectTensor<float>(OpTest("Concat", 7).Attr(IntAttr("axis", 1)).Input(a).Input(b).RunOne(),
                      {2, 3}, {1, 2, 5, 3, 4, 6});
  ExpectTensor<float>(OpTest("Concat", 11).Attr(IntAttr("axis", -1)).Input(a).Input(b).RunOne(),
                      {2, 3}, {1, 2, 5, 3, 4, 6});
  // Axis 0 with an empty input in the middle: [1,2] ++ [] ++ [[3,4],[5,6]].
  ExpectTensor<int32_t>(OpTest("Concat", 13)
                            .Attr(IntAttr("axis", 0))
                            .Input(MakeTensor<int32_t>({1, 2}, {1, 2}))
                            .Input(MakeTensor<int32_t>({0, 2}, {}))
                            .Input(MakeTensor<int32_t>({2, 2}, {3, 4, 5, 6}))
                            .RunOne(),
                        {3, 2}, {1, 2, 3, 4, 5, 6});
  // A single input is copied.
  ExpectTensor<float>(OpTest("Concat", 13).Attr(IntAttr("axis", 0)).Input(b).RunOne(), {2, 1},
                      {5, 6});
}

TEST(ConcatTest, Errors) {
  const OwnedTensor a = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  auto concat = [&](int64_t opset, std::optional<int64_t> axis, const OwnedTensor& b) {
    OpTest t("Concat", opset);
    if (axis) t.Attr(IntAttr("axis", *axis));
    return t.Input(a).Input(b);
  };
  ExpectInvalid(concat(13, 0, MakeTensor<float>({4}, {1, 2, 3, 4})).RunStatus(),
                {"Concat", "input 1 [4] has rank 1", "rank 2"});
  ExpectInvalid(concat(13, 0, MakeTensor<float>({1, 3}, {1, 2, 3})).RunStatus(),
                {"Concat", "input 1 [1,3] differs from input 0 [2,2] at dim 1"});
  ExpectInvalid(concat(13, 0, MakeTensor<double>({1, 2}, {1, 2})).RunStatus(),
                {"Concat", "dtype FP64"});
  ExpectInvalid(concat(13, 2, a).RunStatus(), {"Concat", "axis 2 is out of range"});
  ExpectInvalid(concat(7, -1, a).Create(), {"Concat", "negative axis", "opset 11"});
  ExpectInvalid(concat(7, std::nullopt, a).Create(), {"Concat", "'axis' is required"});
  ExpectInvalid(OpTest("Concat", 13)
                    .Attr(IntAttr("axis", 0))
                    .Input(MakeTensor<float>({}, {1}))
                    .Input(MakeTensor<float>({}, {2}))
                    .RunStatus(),
                {"Concat", "rank >= 1"});
}

// Every dtype kiln has.
std::vector<DataType> AllDataTypes() {
  std::vector<DataType> types;
  for (int v = 1; v < kNumDataTypes; ++v) types.push_back(static_cast<DataType>(v));
  return types;
}

// A tensor of `dtype` with arbitrary contents: random bytes (BOOL: 0 or 1), or "s<i>" strings.
OwnedTensor ArbitraryTensor(DataType dtype, const Shape& shape, std::mt19937& rng) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(dtype, shape);
  KILN_CHECK(t.ok(), t.status().ToString());
  if (dtype == DataType::kBytes) {
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      t->data<std::string>()[i] =
          "s" + std::to_string(i) + std::string(static_cast<size_t>(i % 5), 'x');
    }
  } else {
    auto* bytes = static_cast<unsigned char*>(t->raw_data());
    for (size_t i = 0; i < t->size_bytes(); ++i) {
      bytes[i] = static_cast<unsigned char>(dtype == DataType::kBool ? rng() % 2 : rng() % 256);
    }
  }
  return std::move(t).value();
}

// Element `i` of `a` is bit-identical to (or, for BYTES, the same string as) element `j` of `b`.
bool SameElement(const OwnedTensor& a, int64_t i, const OwnedTensor& b, int64_t j) {
  if (a.dtype() == DataType::kBytes) return a.data<std::string>()[i] == b.data<std::string>()[j];
  const size_t size = DataTypeSize(a.dtype());
  return std::memcmp(static_cast<const char*>(a.raw_data()) + static_cast<size_t>(i) * size,
                     static_cast<const char*>(b.raw_data()) + static_cast<size_t>(j) * size,
                     size) == 0;
}

// Checks y's shape, then that y[i] == x[source(i)] for every element i.
template <typename F>
void ExpectMoved(const OwnedTensor& y, const Shape& shape, const OwnedTensor& x, F source) {
  ASSERT_TRUE(y.valid());
  ASSERT_EQ(y.dtype(), x.dtype());
  ASSERT_EQ(y.shape(), shape) << y.shape().ToString();
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    ASSERT_TRUE(SameElement(y, i, x, source(i))) << "element " << i;
  }
}

TEST(DataMovementTest, EveryDtype) {
  std::mt19937 rng(29);
  const std::vector<int64_t> dims = {2, 3, 4};
  for (DataType dtype : AllDataTypes()) {
    SCOPED_TRACE(std::string(DataTypeName(dtype)));
    const OwnedTensor x = ArbitraryTensor(dtype, Shape(dims), rng);
    auto same_index = [](int64_t i) { return i; };
    ExpectMoved(OpTest("Reshape", 14).Input(x).ConstInput(ShapeTensor({4, -1})).RunOne(), {4, 6}, x,
                same_index);
    ExpectMoved(OpTest("Flatten", 13).Attr(IntAttr("axis", 2)).Input(x).RunOne(), {6, 4}, x,
                same_index);
    ExpectMoved(OpTest("Identity", 16).Input(x).RunOne(), Shape(dims), x, same_index);
    // Transpose perm [2,0,1]: output [4,2,3]; output coordinate i along axis d is input
    // coordinate perm[d].
    const std::vector<int64_t> perm = {2, 0, 1}, out_dims = {4, 2, 3};
    const std::vector<int64_t> in_strides = RowMajorStrides(dims);
    ExpectMoved(OpTest("Transpose", 13).Attr(IntsAttr("perm", perm)).Input(x).RunOne(),
                Shape(out_dims), x, [&](int64_t i) {
                  const std::vector<int64_t> oc = Unravel(i, out_dims);
                  int64_t src = 0;
                  for (size_t d = 0; d < 3; ++d) {
                    src += oc[d] * in_strides[static_cast<size_t>(perm[d])];
                  }
                  return src;
                });
    // Concat x with itself along axis 1: [2,6,4], row j >= 3 repeats row j - 3.
    ExpectMoved(OpTest("Concat", 13).Attr(IntAttr("axis", 1)).Input(x).Input(x).RunOne(), {2, 6, 4},
                x, [&](int64_t i) {
                  const std::vector<int64_t> c = Unravel(i, {2, 6, 4});
                  return (c[0] * 3 + c[1] % 3) * 4 + c[2];
                });
    // Constant holding x.
    ExpectMoved(OpTest("Constant", 13).Attr(TensorAttr("value", x)).RunOne(), Shape(dims), x,
                same_index);
  }
}

TEST(ConstantTest, ValueAttributes) {
  ExpectTensor<float>(
      OpTest("Constant", 7).Attr(TensorAttr("value", MakeTensor<float>({2}, {1, 2}))).RunOne(), {2},
      {1, 2});
  ExpectTensor<float>(OpTest("Constant", 12).Attr(FloatAttr("value_float", 2.5f)).RunOne(), {},
                      {2.5f});
  ExpectTensor<float>(OpTest("Constant", 13).Attr(FloatsAttr("value_floats", {1, 2, 3})).RunOne(),
                      {3}, {1, 2, 3});
  ExpectTensor<int64_t>(OpTest("Constant", 12).Attr(IntAttr("value_int", -4)).RunOne(), {}, {-4});
  ExpectTensor<int64_t>(OpTest("Constant", 17).Attr(IntsAttr("value_ints", {5, 6})).RunOne(), {2},
                        {5, 6});
  ExpectTensor<std::string>(OpTest("Constant", 12).Attr(StringAttr("value_string", "hi")).RunOne(),
                            {}, {"hi"});
  ExpectTensor<std::string>(
      OpTest("Constant", 12).Attr(StringsAttr("value_strings", {"a", "", "c"})).RunOne(), {3},
      {"a", "", "c"});
  // Empty lists give empty 1-D tensors.
  ExpectTensor<int64_t>(OpTest("Constant", 12).Attr(IntsAttr("value_ints", {})).RunOne(), {0}, {});
  // The declared output type selects the kernel (no inputs); a matching one is fine.
  ExpectTensor<bool>(OpTest("Constant", 13)
                         .Attr(TensorAttr("value", MakeTensor<bool>({2}, {true, false})))
                         .OutputType(DataType::kBool)
                         .RunOne(),
                     {2}, {true, false});
}

TEST(ConstantTest, FactoryErrors) {
  ExpectInvalid(OpTest("Constant", 11).Attr(FloatAttr("value_float", 1)).Create(),
                {"Constant", "'value_float' is not defined before opset 12"});
  Attribute sparse;
  sparse.name = "sparse_value";
  sparse.type = AttributeType::kUndefined;  // the IR has no sparse tensors; presence is enough
  ExpectInvalid(OpTest("Constant", 13).Attr(sparse).Create(),
                {"Constant", "'sparse_value'", "not supported"});
  ExpectInvalid(OpTest("Constant", 9).Attr(sparse).Create(),
                {"Constant", "'sparse_value' is not defined before opset 11"});
  ExpectInvalid(OpTest("Constant", 13).Create(), {"Constant", "no value attribute"});
  ExpectInvalid(OpTest("Constant", 13)
                    .Attr(IntAttr("value_int", 1))
                    .Attr(FloatAttr("value_float", 1))
                    .Create(),
                {"Constant", "exactly one"});
  ExpectInvalid(OpTest("Constant", 13).Attr(IntAttr("value_ints", 1)).Create(),
                {"Constant", "'value_ints' must be an INTS"});
  ExpectInvalid(OpTest("Constant", 13).Attr(IntAttr("value", 1)).Create(),
                {"Constant", "'value' must be a TENSOR"});
  ExpectInvalid(
      OpTest("Constant", 13).Attr(IntAttr("value_int", 1)).OutputType(DataType::kFloat32).Create(),
      {"Constant", "declared FP32", "INT64"});
}

}  // namespace
}  // namespace kiln::ref::testing
