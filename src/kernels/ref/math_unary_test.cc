// SPDX-License-Identifier: Apache-2.0
// Tests for the reference unary math kernels (math_unary.cc) and the dtypes the math family adds
// to Relu/Sigmoid/Tanh (elementwise.cc): hand-checked values per op, integer edge rules, FP16/BF16
// rounding, attribute and opset errors, and a randomized check of the activations against their
// textbook formulas.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/ref/ref_test_util.h"

namespace kiln::ref::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct UnaryCase {
  std::string op;
  int64_t opset;
  std::vector<Attribute> attrs;
  std::vector<double> x;
  std::vector<double> y;  // worked out by hand (see the comment on each row)
};

void RunDoubleCase(const UnaryCase& c) {
  SCOPED_TRACE(c.op);
  OpTest t(c.op, c.opset);
  for (const Attribute& a : c.attrs) t.Attr(a);
  const int64_t n = static_cast<int64_t>(c.x.size());
  // 1e-7: FLOAT attributes (0.01f, the Selu constants) carry float rounding.
  ExpectTensor<double>(t.Input(MakeTensor<double>({n}, c.x)).RunOne(), {n}, c.y, 1e-7);
}

TEST(MathUnaryTest, HandCheckedDoubleValues) {
  const std::vector<UnaryCase> cases = {
      {"Abs", 13, {}, {-2.5, 0, 3}, {2.5, 0, 3}},
      {"Neg", 13, {}, {-2.5, 0, 3}, {2.5, 0, -3}},
      {"Exp", 13, {}, {0, 1, -kInf}, {1, 2.718281828459045, 0}},
      {"Log", 13, {}, {1, 2.718281828459045, 0, -1}, {0, 1, -kInf, kNaN}},
      {"Sqrt", 13, {}, {4, 2.25, -1}, {2, 1.5, kNaN}},
      {"Reciprocal", 13, {}, {4, -0.5, 0}, {0.25, -2, kInf}},
      {"Floor", 13, {}, {1.5, -1.5, 2}, {1, -2, 2}},
      {"Ceil", 13, {}, {1.5, -1.5, 2}, {2, -1, 2}},
      // Half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2, 2.6 -> 3.
      {"Round", 11, {}, {0.5, 1.5, 2.5, -2.5, 2.6}, {0, 2, 2, -2, 3}},
      {"Sign", 13, {}, {-3, 0, 0.1, kNaN}, {-1, 0, 1, kNaN}},
      // sin(pi/2) = 1, cos(pi) = -1, tan(pi/4) = 1.
      {"Sin", 7, {}, {1.5707963267948966}, {1}},
      {"Cos", 7, {}, {3.141592653589793}, {-1}},
      {"Tan", 7, {}, {0.7853981633974483}, {1}},
      {"Asin", 7, {}, {1, 2}, {1.5707963267948966, kNaN}},
      {"Acos", 7, {}, {-1}, {3.141592653589793}},
      {"Atan", 7, {}, {1}, {0.7853981633974483}},
      // sinh(1) = (e - 1/e)/2 = 1.1752011936438014; cosh(1) = 1.5430806348152437.
      {"Sinh", 9, {}, {1}, {1.1752011936438014}},
      {"Cosh", 9, {}, {1}, {1.5430806348152437}},
      // asinh(1) = ln(1 + sqrt 2); acosh(1) = 0; atanh(0.5) = ln(3)/2.
      {"Asinh", 9, {}, {1}, {0.881373587019543}},
      {"Acosh", 9, {}, {1, 0.5}, {0, kNaN}},
      {"Atanh", 9, {}, {0.5, 1}, {0.5493061443340549, kInf}},
      // erf(1) = 0.8427007929497149.
      {"Erf", 13, {}, {0, 1, -1}, {0, 0.8427007929497149, -0.8427007929497149}},
      // alpha * x for x < 0 (alpha 0.01 by default).
      {"LeakyRelu", 16, {}, {-2, 3}, {-0.02, 3}},
      {"LeakyRelu", 7, {FloatAttr("alpha", 0.5f)}, {-2, 3}, {-1, 3}},
      // alpha * (e^x - 1) for x < 0: 2 * (e^-1 - 1) = -1.2642411176571153.
      {"Elu", 7, {FloatAttr("alpha", 2.0f)}, {-1, 0, 4}, {-1.2642411176571153, 0, 4}},
      // gamma * x for x > 0; gamma * alpha * (e^x - 1) for x <= 0, with alpha 2, gamma 3:
      // 3 * 2 * (e^-1 - 1) = -3.792723352971346.
      {"Selu",
       7,
       {FloatAttr("alpha", 2.0f), FloatAttr("gamma", 3.0f)},
       {-1, 2},
       {-3.792723352971346, 6}},
      // Default alpha/gamma: selu(1) = gamma = 1.0507009873554805.
      {"Selu", 7, {}, {1, 0}, {1.0507009873554805, 0}},
      // clamp(alpha * x + beta, 0, 1) with 0.2, 0.5: -5 -> 0, 0 -> 0.5, 1 -> 0.7, 5 -> 1.
      {"HardSigmoid", 7, {}, {-5, 0, 1, 5}, {0, 0.5, 0.7, 1}},
      // x * clamp(x/6 + 1/2, 0, 1): -4 -> 0, 0 -> 0, 1 -> 2/3, 4 -> 4.
      {"HardSwish", 14, {}, {-4, 0, 1, 4}, {0, 0, 0.6666666666666666, 4}},
      // ln(1 + e^x): ln 2 at 0; ~x for large x; ~0 for very negative x.
      {"Softplus", 7, {}, {0, 1000, -1000}, {0.6931471805599453, 1000, 0}},
      {"Softsign", 7, {}, {1, -3, 0}, {0.5, -0.75, 0}},
      {"ThresholdedRelu", 10, {}, {0.5, 1, 2}, {0, 0, 2}},
      {"ThresholdedRelu", 10, {FloatAttr("alpha", 0.25f)}, {0.5, 0.25}, {0.5, 0}},
      // lambd 1.5, bias 0.5: x < -1.5 -> x + 0.5; x > 1.5 -> x - 0.5; else 0.
      {"Shrink",
       9,
       {FloatAttr("lambd", 1.5f), FloatAttr("bias", 0.5f)},
       {-2, -1, 0, 1, 2},
       {-1.5, 0, 0, 0, 1.5}},
      // Clip with attribute bounds (opsets 6-10) and without bounds (identity).
      {"Clip",
       7,
       {FloatAttr("min", -1.0f), FloatAttr("max", 2.0f)},
       {-5, 0, 5, kNaN},
       {-1, 0, 2, kNaN}},
      {"Clip", 13, {}, {-1e300, 1e300}, {-1e300, 1e300}},
  };
  for (const UnaryCase& c : cases) RunDoubleCase(c);
}

TEST(MathUnaryTest, CeluOnFloat) {
  // max(0, x) + min(0, alpha * (e^(x/alpha) - 1)), alpha 2: x = -2 -> 2 * (e^-1 - 1).
  ExpectTensor<float>(OpTest("Celu", 12)
                          .Attr(FloatAttr("alpha", 2.0f))
                          .Input(MakeTensor<float>({2}, {-2, 3}))
                          .RunOne(),
                      {2}, {-1.2642411f, 3}, 1e-6);
  ExpectInvalid(
      OpTest("Celu", 12).Attr(FloatAttr("alpha", 0.0f)).Input(MakeTensor<float>({1}, {1})).Create(),
      {"Celu", "alpha", "must not be 0"});
}

TEST(MathUnaryTest, IntegerRules) {
  constexpr int8_t kMin8 = std::numeric_limits<int8_t>::min();
  // |INT8_MIN| and -INT8_MIN wrap to INT8_MIN.
  ExpectTensor<int8_t>(OpTest("Abs", 13).Input(MakeTensor<int8_t>({3}, {-5, kMin8, 7})).RunOne(),
                       {3}, {5, kMin8, 7});
  ExpectTensor<int8_t>(OpTest("Neg", 13).Input(MakeTensor<int8_t>({3}, {-5, kMin8, 7})).RunOne(),
                       {3}, {5, kMin8, -7});
  ExpectTensor<uint16_t>(OpTest("Abs", 7).Input(MakeTensor<uint16_t>({1}, {65535})).RunOne(), {1},
                         {65535});
  ExpectTensor<int64_t>(OpTest("Sign", 13).Input(MakeTensor<int64_t>({3}, {-9, 0, 4})).RunOne(),
                        {3}, {-1, 0, 1});
  ExpectTensor<uint8_t>(OpTest("Sign", 9).Input(MakeTensor<uint8_t>({2}, {0, 200})).RunOne(), {2},
                        {0, 1});
  // Shrink on integers (lambd 1.5, bias 0.5): -3 -> -2.5 -> -2 (toward zero); 3 -> 2.5 -> 2.
  ExpectTensor<int32_t>(OpTest("Shrink", 9)
                            .Attr(FloatAttr("lambd", 1.5f))
                            .Attr(FloatAttr("bias", 0.5f))
                            .Input(MakeTensor<int32_t>({3}, {-3, 1, 3}))
                            .RunOne(),
                        {3}, {-2, 0, 2});
  // Relu takes INT8/INT16 from opset 14.
  ExpectTensor<int8_t>(OpTest("Relu", 14).Input(MakeTensor<int8_t>({2}, {-1, 1})).RunOne(), {2},
                       {0, 1});
}

TEST(MathUnaryTest, HalfTypesComputeInFloatAndRound) {
  // exp(1) = 2.71828 rounds to the FP16 2.71875 (0x4170) and the BF16 2.71875 (0x402E).
  OwnedTensor h = OpTest("Exp", 13).Input(MakeTensor<Float16>({1}, {FloatToFloat16(1)})).RunOne();
  ASSERT_EQ(h.dtype(), DataType::kFloat16);
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x4170);
  OwnedTensor b = OpTest("Exp", 13).Input(MakeTensor<BFloat16>({1}, {FloatToBFloat16(1)})).RunOne();
  ASSERT_EQ(b.dtype(), DataType::kBFloat16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x402E);
  // Sigmoid(0) = 0.5 exactly (0x3800) on FP16.
  OwnedTensor s =
      OpTest("Sigmoid", 13).Input(MakeTensor<Float16>({1}, {FloatToFloat16(0)})).RunOne();
  EXPECT_EQ(s.data<Float16>()[0].bits, 0x3800);
  // BF16 is not an Exp type before opset 13.
  ExpectInvalid(OpTest("Exp", 7).Input(MakeTensor<BFloat16>({1}, {BFloat16{}})).Create(),
                {"not supported for dtype BF16"});
}

TEST(MathUnaryTest, Predicates) {
  const std::vector<double> x = {1, kNaN, kInf, -kInf, 0};
  ExpectTensor<bool>(OpTest("IsNaN", 13).Input(MakeTensor<double>({5}, x)).RunOne(), {5},
                     {false, true, false, false, false});
  ExpectTensor<bool>(OpTest("IsInf", 10).Input(MakeTensor<double>({5}, x)).RunOne(), {5},
                     {false, false, true, true, false});
  ExpectTensor<bool>(OpTest("IsInf", 10)
                         .Attr(IntAttr("detect_positive", 0))
                         .Input(MakeTensor<double>({5}, x))
                         .RunOne(),
                     {5}, {false, false, false, true, false});
  ExpectTensor<bool>(OpTest("IsInf", 10)
                         .Attr(IntAttr("detect_negative", 0))
                         .Input(MakeTensor<double>({5}, x))
                         .RunOne(),
                     {5}, {false, false, true, false, false});
  ExpectInvalid(OpTest("IsInf", 10)
                    .Attr(IntAttr("detect_negative", 2))
                    .Input(MakeTensor<double>({1}, {1}))
                    .Create(),
                {"IsInf", "detect_negative", "must be 0 or 1"});
  ExpectTensor<bool>(OpTest("Not", 7).Input(MakeTensor<bool>({2}, {true, false})).RunOne(), {2},
                     {false, true});
  ExpectInvalid(OpTest("Not", 7).Input(MakeTensor<float>({1}, {1})).Create(),
                {"not supported for dtype FP32"});
}

TEST(MathUnaryTest, ClipBoundInputs) {
  // min 0, max 6 from inputs.
  ExpectTensor<float>(OpTest("Clip", 11)
                          .Input(MakeTensor<float>({4}, {-1, 3, 7, 6}))
                          .Input(MakeTensor<float>({}, {0}))
                          .Input(MakeTensor<float>({}, {6}))
                          .RunOne(),
                      {4}, {0, 3, 6, 6});
  // Only max (min omitted); integers from opset 12.
  ExpectTensor<int8_t>(OpTest("Clip", 12)
                           .Input(MakeTensor<int8_t>({3}, {-128, 0, 127}))
                           .OmittedInput()
                           .Input(MakeTensor<int8_t>({}, {5}))
                           .RunOne(),
                       {3}, {-128, 0, 5});
  // min > max gives max everywhere (numpy's clip).
  ExpectTensor<float>(OpTest("Clip", 13)
                          .Input(MakeTensor<float>({2}, {-1, 9}))
                          .Input(MakeTensor<float>({}, {5}))
                          .Input(MakeTensor<float>({}, {2}))
                          .RunOne(),
                      {2}, {2, 2});
  // Errors: a non-scalar bound, a bound of another dtype, attributes from opset 11, inputs
  // before it.
  ExpectInvalid(OpTest("Clip", 13)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<float>({2}, {0, 0}))
                    .RunStatus(),
                {"Clip", "input 1 must be a scalar"});
  ExpectInvalid(OpTest("Clip", 13)
                    .Input(MakeTensor<float>({2}, {1, 2}))
                    .Input(MakeTensor<double>({}, {0}))
                    .RunStatus(),
                {"Clip", "input 1 has dtype FP64"});
  ExpectInvalid(
      OpTest("Clip", 11).Attr(FloatAttr("min", 0)).Input(MakeTensor<float>({1}, {1})).Create(),
      {"Clip", "'min' was removed in opset 11"});
  ExpectInvalid(OpTest("Clip", 7)
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({}, {0}))
                    .Create(),
                {"Clip", "takes 1 input before opset 11"});
  ExpectInvalid(OpTest("Clip", 11).Input(MakeTensor<int32_t>({1}, {1})).Create(),
                {"not supported for dtype INT32"});
}

TEST(MathUnaryTest, AttributeErrors) {
  ExpectInvalid(
      OpTest("LeakyRelu", 16).Attr(IntAttr("alpha", 1)).Input(MakeTensor<float>({1}, {1})).Create(),
      {"LeakyRelu", "'alpha' must be a FLOAT"});
  // Opset 1-5's consumed_inputs is dropped by the importer's version adapter; later it does not
  // exist.
  ExpectInvalid(OpTest("Elu", 7)
                    .Attr(IntsAttr("consumed_inputs", {0}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Elu", "'consumed_inputs' was removed in opset 6"});
  // Integer types outside an op's ONNX type set are rejected at load.
  ExpectInvalid(OpTest("Neg", 13).Input(MakeTensor<uint8_t>({1}, {1})).Create(),
                {"not supported for dtype UINT8"});
  ExpectInvalid(OpTest("Exp", 13).Input(MakeTensor<int32_t>({1}, {1})).Create(),
                {"not supported for dtype INT32"});
  // An undeclared dtype reaches the kernel, which rejects it at run time.
  ExpectInvalid(
      OpTest("Exp", 13).Input(MakeTensor<int32_t>({1}, {1}), DataType::kInvalid).RunStatus(),
      {"Exp", "unsupported dtype INT32"});
}

TEST(MathUnaryTest, RandomActivationsMatchFormulas) {
  std::mt19937 rng(5);
  const std::vector<double> x = RandomValues<double>(301, rng, -20, 20);
  std::vector<double> elu, softplus, hard_swish, softsign;
  for (double v : x) {
    elu.push_back(v >= 0 ? v : std::exp(v) - 1);
    softplus.push_back(std::log(1 + std::exp(v)));
    hard_swish.push_back(v * std::min(1.0, std::max(0.0, v / 6 + 0.5)));
    softsign.push_back(v / (1 + std::fabs(v)));
  }
  auto run = [&](const char* op, int64_t opset) {
    return OpTest(op, opset).Input(MakeTensor<double>({301}, x)).RunOne();
  };
  ExpectTensor<double>(run("Elu", 7), {301}, elu, 1e-12);
  ExpectTensor<double>(run("Softplus", 7), {301}, softplus, 1e-12);
  ExpectTensor<double>(run("HardSwish", 14), {301}, hard_swish, 1e-12);
  ExpectTensor<double>(run("Softsign", 7), {301}, softsign, 1e-12);
}

}  // namespace
}  // namespace kiln::ref::testing
