// SPDX-License-Identifier: Apache-2.0
// Tests for the reference binary and variadic math kernels (math_binary.cc) and the dtypes the
// math family adds to Add/Sub/Mul/Div (elementwise.cc): hand-checked values, integer edge rules
// (Mod signs, Pow exactness, shifts, wrap-around), randomized broadcasting of Where/Max/Sum/PRelu
// against an index-by-index computation, and error cases.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(MathBinaryTest, ArithmeticOnNewDtypes) {
  // uint8 wraps: 200 + 100 = 300 - 256 = 44; 10 - 20 = 246; 16 * 17 = 272 - 256 = 16; 7 / 2 = 3.
  auto u8 = [](const char* op) {
    return OpTest(op, 14)
        .Input(MakeTensor<uint8_t>({1}, {op[0] == 'A'   ? uint8_t{200}
                                         : op[0] == 'S' ? uint8_t{10}
                                         : op[0] == 'M' ? uint8_t{16}
                                                        : uint8_t{7}}))
        .Input(MakeTensor<uint8_t>({1}, {op[0] == 'A'   ? uint8_t{100}
                                         : op[0] == 'S' ? uint8_t{20}
                                         : op[0] == 'M' ? uint8_t{17}
                                                        : uint8_t{2}}))
        .RunOne();
  };
  ExpectTensor<uint8_t>(u8("Add"), {1}, {44});
  ExpectTensor<uint8_t>(u8("Sub"), {1}, {246});
  ExpectTensor<uint8_t>(u8("Mul"), {1}, {16});
  ExpectTensor<uint8_t>(u8("Div"), {1}, {3});
  // uint16 65535 * 65535 = 2^32 - 2^17 + 1 = 1 (mod 2^16), without signed overflow.
  ExpectTensor<uint16_t>(OpTest("Mul", 14)
                             .Input(MakeTensor<uint16_t>({1}, {65535}))
                             .Input(MakeTensor<uint16_t>({1}, {65535}))
                             .RunOne(),
                         {1}, {1});
  // INT8_MIN / -1 wraps to INT8_MIN.
  ExpectTensor<int8_t>(OpTest("Div", 14)
                           .Input(MakeTensor<int8_t>({1}, {-128}))
                           .Input(MakeTensor<int8_t>({1}, {-1}))
                           .RunOne(),
                       {1}, {-128});
  // FP16: 1 + 2^-11 rounds to even (1.0, 0x3C00); 1.5 + 0.25 = 1.75 (0x3F00).
  OwnedTensor h =
      OpTest("Add", 13)
          .Input(MakeTensor<Float16>({2}, {FloatToFloat16(1), FloatToFloat16(1.5f)}))
          .Input(MakeTensor<Float16>({2}, {FloatToFloat16(0.00048828125f), FloatToFloat16(0.25f)}))
          .RunOne();
  ASSERT_EQ(h.dtype(), DataType::kFloat16);
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x3C00);
  EXPECT_EQ(h.data<Float16>()[1].bits, 0x3F00);
  // uint8 is an Add type only from opset 14; a zero uint8 divisor is an error.
  ExpectInvalid(OpTest("Add", 13)
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Create(),
                {"not supported for dtype UINT8"});
  ExpectInvalid(OpTest("Div", 14)
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Input(MakeTensor<uint8_t>({1}, {0}))
                    .RunStatus(),
                {"Div", "division by zero"});
}

TEST(MathBinaryTest, ModSigns) {
  // fmod=0 (divisor's sign): -7 mod 3 = 2, 7 mod -3 = -2, -7 mod -3 = -1, 6 mod 3 = 0.
  ExpectTensor<int32_t>(OpTest("Mod", 13)
                            .Input(MakeTensor<int32_t>({4}, {-7, 7, -7, 6}))
                            .Input(MakeTensor<int32_t>({4}, {3, -3, -3, 3}))
                            .RunOne(),
                        {4}, {2, -2, -1, 0});
  // fmod=1 (dividend's sign): -7 fmod 3 = -1, 7 fmod -3 = 1; INT64_MIN fmod -1 = 0.
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  ExpectTensor<int64_t>(OpTest("Mod", 10)
                            .Attr(IntAttr("fmod", 1))
                            .Input(MakeTensor<int64_t>({3}, {-7, 7, kMin64}))
                            .Input(MakeTensor<int64_t>({3}, {3, -3, -1}))
                            .RunOne(),
                        {3}, {-1, 1, 0});
  // Floats: C fmod, -5.5 fmod 2 = -1.5; x fmod 0 = NaN.
  ExpectTensor<double>(OpTest("Mod", 13)
                           .Attr(IntAttr("fmod", 1))
                           .Input(MakeTensor<double>({2}, {-5.5, 1}))
                           .Input(MakeTensor<double>({2}, {2, 0}))
                           .RunOne(),
                       {2}, {-1.5, kNaN});
  ExpectInvalid(OpTest("Mod", 13)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .RunStatus(),
                {"Mod", "need fmod=1"});
  ExpectInvalid(OpTest("Mod", 13)
                    .Input(MakeTensor<uint8_t>({2}, {1, 2}))
                    .Input(MakeTensor<uint8_t>({2}, {1, 0}))
                    .RunStatus(),
                {"Mod", "modulo by zero"});
  ExpectInvalid(OpTest("Mod", 13)
                    .Attr(IntAttr("fmod", 2))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Create(),
                {"Mod", "'fmod' must be 0 or 1"});
}

TEST(MathBinaryTest, BitShift) {
  // 1 << 3 = 8; 255 << 1 = 254 (uint8); 16 >> 2 = 4; shifts of 8 or more give 0.
  ExpectTensor<uint8_t>(OpTest("BitShift", 11)
                            .Attr(StringAttr("direction", "LEFT"))
                            .Input(MakeTensor<uint8_t>({3}, {1, 255, 1}))
                            .Input(MakeTensor<uint8_t>({3}, {3, 1, 8}))
                            .RunOne(),
                        {3}, {8, 254, 0});
  ExpectTensor<uint64_t>(OpTest("BitShift", 11)
                             .Attr(StringAttr("direction", "RIGHT"))
                             .Input(MakeTensor<uint64_t>({2}, {16, 16}))
                             .Input(MakeTensor<uint64_t>({2}, {2, 64}))
                             .RunOne(),
                         {2}, {4, 0});
  ExpectInvalid(OpTest("BitShift", 11)
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Create(),
                {"BitShift", "'direction' is required"});
  ExpectInvalid(OpTest("BitShift", 11)
                    .Attr(StringAttr("direction", "UP"))
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Input(MakeTensor<uint8_t>({1}, {1}))
                    .Create(),
                {"BitShift", "LEFT or RIGHT"});
  ExpectInvalid(OpTest("BitShift", 11)
                    .Attr(StringAttr("direction", "LEFT"))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Create(),
                {"not supported for dtype INT32"});
}

TEST(MathBinaryTest, PowMixedTypes) {
  // Float base, float exponent: 2^0.5 = 1.4142135623730951, 4^-1 = 0.25.
  ExpectTensor<double>(OpTest("Pow", 15)
                           .Input(MakeTensor<double>({2}, {2, 4}))
                           .Input(MakeTensor<double>({2}, {0.5, -1}))
                           .RunOne(),
                       {2}, {1.4142135623730951, 0.25}, 1e-15);
  // Integer base and exponent are exact: 3^40 mod 2^64 wraps; 3^3 = 27; (-2)^3 = -8.
  // 3^40 = 12157665459056928801 = 2^64 - 6289078614652622815 -> -6289078614652622815 as int64.
  ExpectTensor<int64_t>(OpTest("Pow", 15)
                            .Input(MakeTensor<int64_t>({3}, {3, 3, -2}))
                            .Input(MakeTensor<int64_t>({3}, {40, 3, 3}))
                            .RunOne(),
                        {3}, {-6289078614652622815LL, 27, -8});
  // Negative integer exponents: 1 -> 1, -1 -> -1 (odd), 2 -> 0 (1/2 truncated).
  ExpectTensor<int32_t>(OpTest("Pow", 15)
                            .Input(MakeTensor<int32_t>({3}, {1, -1, 2}))
                            .Input(MakeTensor<int32_t>({3}, {-2, -3, -1}))
                            .RunOne(),
                        {3}, {1, -1, 0});
  // Integer base, float exponent: 2^1.5 = 2.83 -> 2; float base, integer exponent: 1.5^2 = 2.25.
  ExpectTensor<int32_t>(OpTest("Pow", 15)
                            .Input(MakeTensor<int32_t>({1}, {2}))
                            .Input(MakeTensor<float>({1}, {1.5f}))
                            .RunOne(),
                        {1}, {2});
  ExpectTensor<float>(OpTest("Pow", 12)
                          .Input(MakeTensor<float>({1}, {1.5f}))
                          .Input(MakeTensor<uint8_t>({1}, {2}))
                          .RunOne(),
                      {1}, {2.25f});
  ExpectInvalid(OpTest("Pow", 15)
                    .Input(MakeTensor<int32_t>({1}, {0}))
                    .Input(MakeTensor<int32_t>({1}, {-1}))
                    .RunStatus(),
                {"Pow", "zero raised to a negative power"});
  ExpectInvalid(OpTest("Pow", 7)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<double>({1}, {1}))
                    .Create(),
                {"Pow", "one dtype before opset 12"});
  // Numpy broadcasting from opset 7: B [3] on A [2,3]. 2^[1,2,3] and 3^[1,2,3].
  ExpectTensor<float>(OpTest("Pow", 7)
                          .Input(MakeTensor<float>({2, 3}, {2, 2, 2, 3, 3, 3}))
                          .Input(MakeTensor<float>({3}, {1, 2, 3}))
                          .RunOne(),
                      {2, 3}, {2, 4, 8, 3, 9, 27});
}

TEST(MathBinaryTest, LogicAndComparisons) {
  const std::vector<bool> a = {true, true, false, false}, b = {true, false, true, false};
  auto logic = [&](const char* op) {
    return OpTest(op, 7).Input(MakeTensor<bool>({4}, a)).Input(MakeTensor<bool>({4}, b)).RunOne();
  };
  ExpectTensor<bool>(logic("And"), {4}, {true, false, false, false});
  ExpectTensor<bool>(logic("Or"), {4}, {true, true, true, false});
  ExpectTensor<bool>(logic("Xor"), {4}, {false, true, true, false});
  // [1, 2, 3] vs 2 (broadcast), NaN compares false.
  const std::vector<float> x = {1, 2, 3, static_cast<float>(kNaN)};
  auto cmp = [&](const char* op, int64_t opset) {
    return OpTest(op, opset)
        .Input(MakeTensor<float>({4}, x))
        .Input(MakeTensor<float>({}, {2}))
        .RunOne();
  };
  ExpectTensor<bool>(cmp("Equal", 13), {4}, {false, true, false, false});
  ExpectTensor<bool>(cmp("Less", 13), {4}, {true, false, false, false});
  ExpectTensor<bool>(cmp("Greater", 13), {4}, {false, false, true, false});
  ExpectTensor<bool>(cmp("LessOrEqual", 16), {4}, {true, true, false, false});
  ExpectTensor<bool>(cmp("GreaterOrEqual", 12), {4}, {false, true, true, false});
  // Equal on BOOL and on uint64 (opset 11+).
  ExpectTensor<bool>(
      OpTest("Equal", 11).Input(MakeTensor<bool>({4}, a)).Input(MakeTensor<bool>({4}, b)).RunOne(),
      {4}, {true, false, false, true});
  ExpectTensor<bool>(OpTest("Equal", 13)
                         .Input(MakeTensor<uint64_t>({2}, {~uint64_t{0}, 1}))
                         .Input(MakeTensor<uint64_t>({2}, {~uint64_t{0}, 2}))
                         .RunOne(),
                     {2}, {true, false});
  // B [2, 1] on A [2, 2]: along rows.
  ExpectTensor<bool>(OpTest("And", 7)
                         .Input(MakeTensor<bool>({2, 2}, {true, true, true, true}))
                         .Input(MakeTensor<bool>({2, 1}, {true, false}))
                         .RunOne(),
                     {2, 2}, {true, true, false, false});
  // Errors: floats in Equal before 11, mixed dtypes, incompatible shapes, non-BOOL logic.
  ExpectInvalid(OpTest("Equal", 7)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"not supported for dtype FP32"});
  ExpectInvalid(OpTest("Less", 13)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<double>({1}, {1}))
                    .RunStatus(),
                {"Less", "different dtypes"});
  ExpectInvalid(OpTest("Greater", 13)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({3}, {1, 2, 3}))
                    .RunStatus(),
                {"Greater", "incompatible broadcast shapes"});
  ExpectInvalid(OpTest("Or", 7)
                    .Input(MakeTensor<bool>({1}, {true}))
                    .Input(MakeTensor<int32_t>({1}, {1}), DataType::kInvalid)
                    .RunStatus(),
                {"Or", "must be BOOL"});
  ExpectInvalid(OpTest("Xor", 7)
                    .Attr(IntAttr("broadcast", 1))
                    .Input(MakeTensor<bool>({1}, {true}))
                    .Input(MakeTensor<bool>({1}, {true}))
                    .Create(),
                {"Xor", "'broadcast' was removed in opset 7"});
}

TEST(MathBinaryTest, PRelu) {
  // Opset 16: slope [2] broadcast along the last dim of [2,2]: x < 0 -> slope * x.
  ExpectTensor<float>(OpTest("PRelu", 16)
                          .Input(MakeTensor<float>({2, 2}, {-1, -1, 2, -4}))
                          .Input(MakeTensor<float>({2}, {0.5f, 0.25f}))
                          .RunOne(),
                      {2, 2}, {-0.5f, -0.25f, 2, -1});
  // A [C, 1] slope applies along dim 1 of [N, C, W]: channel 0 slope 0.5, channel 1 slope 2
  // (the form the importer's version adapter gives opset 6's [C] slopes).
  ExpectTensor<float>(OpTest("PRelu", 7)
                          .Input(MakeTensor<float>({1, 2, 2}, {-2, 3, -2, 3}))
                          .Input(MakeTensor<float>({2, 1}, {0.5f, 2}))
                          .RunOne(),
                      {1, 2, 2}, {-1, 3, -4, 3});
  // Integers from opset 9 (int32 -3 * 2 = -6).
  ExpectTensor<int32_t>(OpTest("PRelu", 9)
                            .Input(MakeTensor<int32_t>({2}, {-3, 3}))
                            .Input(MakeTensor<int32_t>({1}, {2}))
                            .RunOne(),
                        {2}, {-6, 3});
  // The slope must broadcast to X (not the other way round).
  ExpectInvalid(OpTest("PRelu", 16)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({2, 2}, {1, 2, 3, 4}))
                    .RunStatus(),
                {"PRelu", "does not broadcast"});
}

TEST(MathBinaryTest, WhereAndVariadicHandChecked) {
  // Where([[T,F],[F,T]], [[1,2],[3,4]], 9) = [[1,9],[9,4]].
  ExpectTensor<int64_t>(OpTest("Where", 16)
                            .Input(MakeTensor<bool>({2, 2}, {true, false, false, true}))
                            .Input(MakeTensor<int64_t>({2, 2}, {1, 2, 3, 4}))
                            .Input(MakeTensor<int64_t>({}, {9}))
                            .RunOne(),
                        {2, 2}, {1, 9, 9, 4});
  // Strings are selected as well.
  OwnedTensor s = OpTest("Where", 9)
                      .Input(MakeTensor<bool>({2}, {true, false}))
                      .Input(MakeTensor<std::string>({2}, {"a", "b"}))
                      .Input(MakeTensor<std::string>({2}, {"c", "d"}))
                      .RunOne();
  ASSERT_EQ(s.dtype(), DataType::kBytes);
  EXPECT_EQ(s.data<std::string>()[0], "a");
  EXPECT_EQ(s.data<std::string>()[1], "d");
  ExpectInvalid(OpTest("Where", 16)
                    .Input(MakeTensor<int32_t>({1}, {1}), DataType::kInvalid)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .RunStatus(),
                {"Where", "condition must be BOOL"});
  // Max/Min/Sum/Mean over [1,5], [3,2] and the scalar 4: max [4,5], min [1,2], sum [8,11],
  // mean [8/3, 11/3].
  auto variadic = [](const char* op) {
    return OpTest(op, 13)
        .Input(MakeTensor<double>({2}, {1, 5}))
        .Input(MakeTensor<double>({2}, {3, 2}))
        .Input(MakeTensor<double>({}, {4}))
        .RunOne();
  };
  ExpectTensor<double>(variadic("Max"), {2}, {4, 5});
  ExpectTensor<double>(variadic("Min"), {2}, {1, 2});
  ExpectTensor<double>(variadic("Sum"), {2}, {8, 11});
  ExpectTensor<double>(variadic("Mean"), {2}, {8.0 / 3, 11.0 / 3}, 1e-15);
  // NaN propagates through Max; one input is a copy; integers from opset 12.
  ExpectTensor<float>(OpTest("Max", 13)
                          .Input(MakeTensor<float>({2}, {static_cast<float>(kNaN), 1}))
                          .Input(MakeTensor<float>({2}, {1, static_cast<float>(kNaN)}))
                          .RunOne(),
                      {2}, {static_cast<float>(kNaN), static_cast<float>(kNaN)});
  ExpectTensor<float>(OpTest("Sum", 13).Input(MakeTensor<float>({1}, {7})).RunOne(), {1}, {7});
  ExpectTensor<uint8_t>(OpTest("Min", 12)
                            .Input(MakeTensor<uint8_t>({2}, {200, 3}))
                            .Input(MakeTensor<uint8_t>({2}, {100, 250}))
                            .RunOne(),
                        {2}, {100, 3});
  // Errors: integer Max before 12; no broadcasting before opset 8; incompatible shapes.
  ExpectInvalid(OpTest("Max", 8)
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Create(),
                {"not supported for dtype INT32"});
  ExpectInvalid(OpTest("Max", 7)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .RunStatus(),
                {"Max", "no broadcasting before opset 8"});
  ExpectInvalid(OpTest("Sum", 13)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({3}, {1, 2, 3}))
                    .RunStatus(),
                {"Sum", "incompatible broadcast shapes"});
  ExpectInvalid(OpTest("Mean", 13).Create(), {"Mean"});
}

// Broadcast index of `out_coord` in an input of `dims` aligned to the right of the output.
int64_t InputIndex(const std::vector<int64_t>& out_coord, const std::vector<int64_t>& dims) {
  const size_t offset = out_coord.size() - dims.size();
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  int64_t idx = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    idx += (dims[d] == 1 ? 0 : out_coord[d + offset]) * strides[d];
  }
  return idx;
}

// A random shape of `rank` whose dims are 1 or the matching dim of `full` (so it broadcasts).
std::vector<int64_t> RandomBroadcastable(const std::vector<int64_t>& full, std::mt19937& rng) {
  std::uniform_int_distribution<int> coin(0, 2);
  const size_t drop = static_cast<size_t>(coin(rng)) % (full.size() + 1);
  std::vector<int64_t> dims(full.begin() + static_cast<std::ptrdiff_t>(drop), full.end());
  for (int64_t& d : dims) {
    if (coin(rng) == 0) d = 1;
  }
  return dims;
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

TEST(MathBinaryTest, RandomBroadcastingMatchesIndexComputation) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int64_t> dim(1, 4);
  for (int iter = 0; iter < 40; ++iter) {
    std::vector<int64_t> full(static_cast<size_t>(1 + iter % 4));
    for (int64_t& d : full) d = dim(rng);
    const std::vector<int64_t> dc = RandomBroadcastable(full, rng);
    const std::vector<int64_t> dx = RandomBroadcastable(full, rng);
    const std::vector<int64_t> dy = full;  // guarantees the output shape is `full`
    std::vector<bool> cond;
    for (int64_t i = 0; i < Product(dc); ++i) cond.push_back((rng() & 1u) != 0);
    const std::vector<float> x = RandomValues<float>(Product(dx), rng, -3, 3);
    const std::vector<float> y = RandomValues<float>(Product(dy), rng, -3, 3);
    const Shape sc{std::span<const int64_t>(dc)}, sx{std::span<const int64_t>(dx)},
        sy{std::span<const int64_t>(dy)}, sf{std::span<const int64_t>(full)};
    std::vector<float> where, max, sum, prelu;
    for (int64_t o = 0; o < Product(full); ++o) {
      const std::vector<int64_t> c = Unravel(o, full);
      const float vx = x[static_cast<size_t>(InputIndex(c, dx))];
      const float vy = y[static_cast<size_t>(InputIndex(c, dy))];
      where.push_back(cond[static_cast<size_t>(InputIndex(c, dc))] ? vx : vy);
      max.push_back(std::max(vx, vy));
      sum.push_back(vx + vy);
      prelu.push_back(vy < 0 ? vx * vy : vy);  // X = y (full shape), slope = x
    }
    SCOPED_TRACE(iter);
    ExpectTensor<float>(OpTest("Where", 16)
                            .Input(MakeTensor<bool>(sc, cond))
                            .Input(MakeTensor<float>(sx, x))
                            .Input(MakeTensor<float>(sy, y))
                            .RunOne(),
                        sf, where);
    ExpectTensor<float>(
        OpTest("Max", 13).Input(MakeTensor<float>(sx, x)).Input(MakeTensor<float>(sy, y)).RunOne(),
        sf, max);
    ExpectTensor<float>(
        OpTest("Sum", 13).Input(MakeTensor<float>(sx, x)).Input(MakeTensor<float>(sy, y)).RunOne(),
        sf, sum, 1e-6);
    ExpectTensor<float>(OpTest("PRelu", 16)
                            .Input(MakeTensor<float>(sy, y))
                            .Input(MakeTensor<float>(sx, x))
                            .RunOne(),
                        sf, prelu, 1e-6);
  }
}

}  // namespace
}  // namespace kiln::ref::testing
