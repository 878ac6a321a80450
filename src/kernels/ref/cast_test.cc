// SPDX-License-Identifier: Apache-2.0
// Tests for the reference Cast and CastLike kernels (cast.cc): hand-checked conversions between
// numbers, BOOL, FP16/BF16 and strings, the defined out-of-range rules, `to` spelled as a name
// (opset 1-5) and a number, and error cases.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

// ONNX TensorProto.DataType numbers.
constexpr int64_t kOnnxFloat = 1, kOnnxUint8 = 2, kOnnxInt8 = 3, kOnnxInt32 = 6, kOnnxInt64 = 7,
                  kOnnxString = 8, kOnnxBool = 9, kOnnxFloat16 = 10, kOnnxDouble = 11,
                  kOnnxUint64 = 13, kOnnxBFloat16 = 16;

OpTest CastTo(int64_t to, int64_t opset = 13) {
  OpTest t("Cast", opset);
  t.Attr(IntAttr("to", to));
  return t;
}

TEST(CastTest, FloatToIntegers) {
  // Truncation toward zero: 2.7 -> 2, -2.7 -> -2; NaN -> 0.
  ExpectTensor<int32_t>(
      CastTo(kOnnxInt32).Input(MakeTensor<float>({3}, {2.7f, -2.7f, NAN})).RunOne(), {3},
      {2, -2, 0});
  // Out of range wraps modulo 2^8 after truncation: 300.5 -> 300 -> 44; -1 -> 255.
  ExpectTensor<uint8_t>(CastTo(kOnnxUint8).Input(MakeTensor<double>({2}, {300.5, -1})).RunOne(),
                        {2}, {44, 255});
  // Beyond int64 saturates: 1e300 -> INT64_MAX; uint64 keeps values above 2^63.
  ExpectTensor<int64_t>(CastTo(kOnnxInt64).Input(MakeTensor<double>({1}, {1e300})).RunOne(), {1},
                        {std::numeric_limits<int64_t>::max()});
  ExpectTensor<uint64_t>(
      CastTo(kOnnxUint64).Input(MakeTensor<double>({1}, {1.8446744073709552e19 / 2})).RunOne(), {1},
      {uint64_t{1} << 63});
}

TEST(CastTest, IntegersAndBool) {
  // int32 -> int8 keeps the low byte: 300 -> 44, -129 -> 127.
  ExpectTensor<int8_t>(CastTo(kOnnxInt8).Input(MakeTensor<int32_t>({2}, {300, -129})).RunOne(), {2},
                       {44, 127});
  // -> BOOL is x != 0 (NaN is true); BOOL -> FLOAT is 0/1.
  ExpectTensor<bool>(CastTo(kOnnxBool).Input(MakeTensor<float>({3}, {0.0f, -0.5f, NAN})).RunOne(),
                     {3}, {false, true, true});
  ExpectTensor<float>(CastTo(kOnnxFloat).Input(MakeTensor<bool>({2}, {true, false})).RunOne(), {2},
                      {1, 0});
  // int64 2^53 + 1 -> double rounds to 2^53 (one rounding).
  ExpectTensor<double>(
      CastTo(kOnnxDouble).Input(MakeTensor<int64_t>({1}, {(int64_t{1} << 53) + 1})).RunOne(), {1},
      {9007199254740992.0});
}

TEST(CastTest, HalfTypes) {
  // 1/3 as FP16 is 0x3555 (0.333251953125); as BF16 0x3EAB (0.333984375).
  OwnedTensor h = CastTo(kOnnxFloat16).Input(MakeTensor<double>({1}, {1.0 / 3})).RunOne();
  ASSERT_EQ(h.dtype(), DataType::kFloat16);
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x3555);
  OwnedTensor b = CastTo(kOnnxBFloat16).Input(MakeTensor<float>({1}, {1.0f / 3})).RunOne();
  ASSERT_EQ(b.dtype(), DataType::kBFloat16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x3EAB);
  // Double rounding check: 1 + 2^-11 + 2^-40 is just above the FP16 halfway point between 1 and
  // 1 + 2^-10, so it rounds up (0x3C01); via float it would round to 1 + 2^-11 and then to even
  // (0x3C00).
  OwnedTensor up =
      CastTo(kOnnxFloat16)
          .Input(MakeTensor<double>({1}, {1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)}))
          .RunOne();
  EXPECT_EQ(up.data<Float16>()[0].bits, 0x3C01);
  // FP16 -> FLOAT is exact.
  ExpectTensor<float>(
      CastTo(kOnnxFloat).Input(MakeTensor<Float16>({1}, {Float16{0x3555}})).RunOne(), {1},
      {0.333251953125f});
}

TEST(CastTest, NumbersToStrings) {
  OwnedTensor s = CastTo(kOnnxString)
                      .Input(MakeTensor<float>(
                          {8}, {0.1f, 1.0f, -2.5f, 1e-5f, 1.5e16f, 123456.0f, NAN, -INFINITY}))
                      .RunOne();
  ASSERT_EQ(s.dtype(), DataType::kBytes);
  // numpy str(): shortest float32 digits, positional in [1e-4, 1e16), "x.0" for integral values.
  const std::vector<std::string> want = {"0.1",     "1.0",      "-2.5", "1e-05",
                                         "1.5e+16", "123456.0", "nan",  "-inf"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(s.data<std::string>()[i], want[i]) << i;
  OwnedTensor i = CastTo(kOnnxString).Input(MakeTensor<int64_t>({2}, {-42, 7})).RunOne();
  EXPECT_EQ(i.data<std::string>()[0], "-42");
  EXPECT_EQ(i.data<std::string>()[1], "7");
  OwnedTensor h = CastTo(kOnnxString).Input(MakeTensor<Float16>({1}, {Float16{0x3555}})).RunOne();
  EXPECT_EQ(h.data<std::string>()[0], "0.3333");  // shortest text that reads back to 0x3555
}

TEST(CastTest, StringsToNumbers) {
  ExpectTensor<float>(
      CastTo(kOnnxFloat)
          .Input(MakeTensor<std::string>({6}, {"0.5", " -1.25e2 ", "+3", "NaN", "INF", "-inf"}))
          .RunOne(),
      {6}, {0.5f, -125.0f, 3.0f, NAN, INFINITY, -INFINITY});
  ExpectTensor<int64_t>(
      CastTo(kOnnxInt64).Input(MakeTensor<std::string>({2}, {"-9000000000", "2.9"})).RunOne(), {2},
      {-9000000000LL, 2});
  ExpectTensor<bool>(
      CastTo(kOnnxBool).Input(MakeTensor<std::string>({3}, {"True", "0", "2"})).RunOne(), {3},
      {true, false, true});
  ExpectInvalid(CastTo(kOnnxFloat).Input(MakeTensor<std::string>({2}, {"1", "abc"})).RunStatus(),
                {"Cast", "element 1 ('abc') is not a FP32 number"});
  ExpectInvalid(CastTo(kOnnxFloat).Input(MakeTensor<std::string>({1}, {""})).RunStatus(),
                {"Cast", "element 0"});
}

TEST(CastTest, AttributeForms) {
  // `to` is a number (opset 1-5's type names are converted by the importer's version adapter).
  ExpectInvalid(
      OpTest("Cast", 7).Attr(StringAttr("to", "INT32")).Input(MakeTensor<float>({1}, {1})).Create(),
      {"Cast", "'to' must be an INT"});
  ExpectInvalid(OpTest("Cast", 13).Input(MakeTensor<float>({1}, {1})).Create(),
                {"Cast", "'to' is required"});
  ExpectInvalid(CastTo(14).Input(MakeTensor<float>({1}, {1})).Create(),  // COMPLEX64
                {"Cast", "'to' is 14"});
  ExpectInvalid(CastTo(kOnnxString, 7).Input(MakeTensor<float>({1}, {1})).Create(),
                {"Cast", "STRING needs opset 9"});
  ExpectInvalid(CastTo(kOnnxBFloat16, 12).Input(MakeTensor<float>({1}, {1})).Create(),
                {"Cast", "BFLOAT16 needs opset 13"});
  ExpectInvalid(CastTo(kOnnxFloat, 8).Input(MakeTensor<std::string>({1}, {"1"})).Create(),
                {"not supported for dtype BYTES"});
}

TEST(CastTest, CastLikeTakesTheSecondInputsDtype) {
  ExpectTensor<int32_t>(OpTest("CastLike", 15)
                            .Input(MakeTensor<double>({2}, {1.5, -7.9}))
                            .Input(MakeTensor<int32_t>({0}, {}))
                            .RunOne(),
                        {2}, {1, -7});
  OwnedTensor s = OpTest("CastLike", 15)
                      .Input(MakeTensor<bool>({1}, {true}))
                      .Input(MakeTensor<std::string>({}, {""}))
                      .RunOne();
  EXPECT_EQ(s.data<std::string>()[0], "True");
  ExpectInvalid(OpTest("CastLike", 15).Input(MakeTensor<float>({1}, {1})).Create(),
                {"CastLike", "required input 1 is missing"});
}

}  // namespace
}  // namespace kiln::ref::testing
