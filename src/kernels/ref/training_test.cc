// SPDX-License-Identifier: Apache-2.0
// Tests for the training-domain optimizer kernels (training.cc): Adagrad, Adam and Momentum
// (standard and Nesterov) on hand-checked values, several tensors in one node, omitted outputs,
// FLOAT and DOUBLE, and the load-time and run-time error paths. The nodes live in the
// "ai.onnx.preview.training" domain (OpTest::Domain).

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ref/ref_test_util.h"
#include "kernels/registry.h"

namespace kiln::ref::testing {
namespace {

constexpr char kTrainingDomain[] = "ai.onnx.preview.training";

// One optimizer node in a graph of its own (OpTest in the training domain), with `num_outputs`
// present output slots.
OpTest OptimizerTest(std::string op, int num_outputs, std::string domain = kTrainingDomain,
                     int64_t opset = 1) {
  OpTest t(std::move(op), domain.empty() ? opset : 17);
  if (!domain.empty()) t.Domain(std::move(domain), opset);
  t.Outputs(std::vector<bool>(static_cast<size_t>(num_outputs), true));
  return t;
}

OwnedTensor R(float r) { return MakeTensor<float>({}, {r}); }
OwnedTensor T(int64_t t) { return MakeTensor<int64_t>({}, {t}); }

constexpr double kTol = 1e-6;

TEST(TrainingTest, AdagradHandChecked) {
  // R 0.5, T 1, decay_factor 1: r = 0.5 / (1 + 1 * 1) = 0.25; norm_coefficient 0, epsilon 0.
  //   X {1, 2}, G {3, 4}, H {0, 9}: H_new = H + G^2 = {9, 25}, sqrt {3, 5};
  //   X_new = X - r * G / sqrt(H_new) = {1 - 0.25 * 3 / 3, 2 - 0.25 * 4 / 5} = {0.75, 1.8}.
  std::vector<OwnedTensor> out = OptimizerTest("Adagrad", 2)
                                     .Attr(FloatAttr("decay_factor", 1))
                                     .Attr(FloatAttr("epsilon", 0))
                                     .Input(R(0.5f))
                                     .Input(T(1))
                                     .Input(MakeTensor<float>({2}, {1, 2}))
                                     .Input(MakeTensor<float>({2}, {3, 4}))
                                     .Input(MakeTensor<float>({2}, {0, 9}))
                                     .RunAll();
  ASSERT_EQ(out.size(), 2u);
  ExpectTensor<float>(out[0], {2}, {0.75f, 1.8f}, kTol);
  ExpectTensor<float>(out[1], {2}, {9, 25}, kTol);
}

TEST(TrainingTest, AdagradNormCoefficientAndDoubleRate) {
  // DOUBLE X with a DOUBLE R 0.3, T 0 (r = R), norm_coefficient 1, epsilon 0:
  //   X {1}, G {1}: g = 1 * 1 + 1 = 2; H {5}: H_new = 5 + 4 = 9; X_new = 1 - 0.3 * 2 / 3 = 0.8.
  std::vector<OwnedTensor> out = OptimizerTest("Adagrad", 2)
                                     .Attr(FloatAttr("norm_coefficient", 1))
                                     .Attr(FloatAttr("epsilon", 0))
                                     .Input(MakeTensor<double>({}, {0.3}))
                                     .Input(T(0))
                                     .Input(MakeTensor<double>({1}, {1}))
                                     .Input(MakeTensor<double>({1}, {1}))
                                     .Input(MakeTensor<double>({1}, {5}))
                                     .RunAll();
  ASSERT_EQ(out.size(), 2u);
  ExpectTensor<double>(out[0], {1}, {0.8}, 1e-12);
  ExpectTensor<double>(out[1], {1}, {9}, 1e-12);
}

TEST(TrainingTest, AdagradMultipleTensorsKeepTheirOrder) {
  // R 1, T 0, epsilon 0. Inputs R, T, X1, X2, G1, G2, H1, H2; outputs X1, X2, H1, H2 new.
  //   X1 {1}, G1 {3}, H1 {16}: H1_new = 25, X1_new = 1 - 3 / 5 = 0.4.
  //   X2 [2, 1] {10, 20}, G2 {1, -2}, H2 {0, 0}: H2_new = {1, 4},
  //   X2_new = {10 - 1 / 1, 20 + 2 / 2} = {9, 21}.
  std::vector<OwnedTensor> out = OptimizerTest("Adagrad", 4)
                                     .Attr(FloatAttr("epsilon", 0))
                                     .Input(R(1))
                                     .Input(T(0))
                                     .Input(MakeTensor<float>({1}, {1}))
                                     .Input(MakeTensor<float>({2, 1}, {10, 20}))
                                     .Input(MakeTensor<float>({1}, {3}))
                                     .Input(MakeTensor<float>({2, 1}, {1, -2}))
                                     .Input(MakeTensor<float>({1}, {16}))
                                     .Input(MakeTensor<float>({2, 1}, {0, 0}))
                                     .RunAll();
  ASSERT_EQ(out.size(), 4u);
  ExpectTensor<float>(out[0], {1}, {0.4f}, kTol);
  ExpectTensor<float>(out[1], {2, 1}, {9, 21}, kTol);
  ExpectTensor<float>(out[2], {1}, {25}, kTol);
  ExpectTensor<float>(out[3], {2, 1}, {1, 4}, kTol);
}

TEST(TrainingTest, AdamHandCheckedWithTwoTensors) {
  // alpha 0.75, beta 0.75, epsilon 0, norm_coefficient 0, norm_coefficient_post 0.5; R 0.1, T 1:
  //   r = R * sqrt(1 - 0.75) / (1 - 0.75) = 0.1 * 0.5 / 0.25 = 0.2.
  //   X1 {1}, G1 {4}, V1 {0}, H1 {0}: V_new = 0.25 * 4 = 1, H_new = 0.25 * 16 = 4 (sqrt 2),
  //   X_new = 0.5 * (1 - 0.2 * 1 / 2) = 0.45.
  //   X2 {2}, G2 {-4}, V2 {0}, H2 {0}: V_new = -1, H_new = 4, X_new = 0.5 * (2 + 0.1) = 1.05.
  // Outputs X1, X2, V1, V2, H1, H2 new.
  std::vector<OwnedTensor> out = OptimizerTest("Adam", 6)
                                     .Attr(FloatAttr("alpha", 0.75f))
                                     .Attr(FloatAttr("beta", 0.75f))
                                     .Attr(FloatAttr("epsilon", 0))
                                     .Attr(FloatAttr("norm_coefficient_post", 0.5f))
                                     .Input(R(0.1f))
                                     .Input(T(1))
                                     .Input(MakeTensor<float>({1}, {1}))
                                     .Input(MakeTensor<float>({1}, {2}))
                                     .Input(MakeTensor<float>({1}, {4}))
                                     .Input(MakeTensor<float>({1}, {-4}))
                                     .Input(MakeTensor<float>({1}, {0}))
                                     .Input(MakeTensor<float>({1}, {0}))
                                     .Input(MakeTensor<float>({1}, {0}))
                                     .Input(MakeTensor<float>({1}, {0}))
                                     .RunAll();
  ASSERT_EQ(out.size(), 6u);
  ExpectTensor<float>(out[0], {1}, {0.45f}, kTol);
  ExpectTensor<float>(out[1], {1}, {1.05f}, kTol);
  ExpectTensor<float>(out[2], {1}, {1}, kTol);
  ExpectTensor<float>(out[3], {1}, {-1}, kTol);
  ExpectTensor<float>(out[4], {1}, {4}, kTol);
  ExpectTensor<float>(out[5], {1}, {4}, kTol);
}

TEST(TrainingTest, AdamFirstStepHasNoBiasCorrectionAndOutputsMayBeOmitted) {
  // T 0: r = R = 0.1. alpha 0.5, beta 0.75, epsilon 0, norm_coefficient 1 (DOUBLE):
  //   X {1}, G {1}: g = 1 + 1 = 2; V {2}: V_new = 0.5 * 2 + 0.5 * 2 = 2;
  //   H {4}: H_new = 0.75 * 4 + 0.25 * 4 = 4 (sqrt 2); X_new = 1 - 0.1 * 2 / 2 = 0.9.
  // Only X_new and H_new are requested.
  std::vector<OwnedTensor> out = OptimizerTest("Adam", 3)
                                     .Attr(FloatAttr("alpha", 0.5f))
                                     .Attr(FloatAttr("beta", 0.75f))
                                     .Attr(FloatAttr("epsilon", 0))
                                     .Attr(FloatAttr("norm_coefficient", 1))
                                     .Input(R(0.1f))
                                     .Input(T(0))
                                     .Input(MakeTensor<double>({1}, {1}))
                                     .Input(MakeTensor<double>({1}, {1}))
                                     .Input(MakeTensor<double>({1}, {2}))
                                     .Input(MakeTensor<double>({1}, {4}))
                                     .Outputs({true, false, true})
                                     .RunAll();
  ASSERT_EQ(out.size(), 2u);
  ExpectTensor<double>(out[0], {1}, {0.9}, 1e-7);  // R is FLOAT: 0.1f
  ExpectTensor<double>(out[1], {1}, {4}, 1e-12);
}

OpTest Momentum(const std::string& mode, int64_t t, float norm_coefficient) {
  // R 0.1, alpha 0.5, beta 0.25; X {1}, G {2}, V {4}.
  return std::move(OptimizerTest("Momentum", 2)
                       .Attr(FloatAttr("alpha", 0.5f))
                       .Attr(FloatAttr("beta", 0.25f))
                       .Attr(FloatAttr("norm_coefficient", norm_coefficient))
                       .Attr(StringAttr("mode", mode))
                       .Input(R(0.1f))
                       .Input(T(t))
                       .Input(MakeTensor<float>({1}, {1}))
                       .Input(MakeTensor<float>({1}, {2}))
                       .Input(MakeTensor<float>({1}, {4})));
}

TEST(TrainingTest, MomentumHandChecked) {
  // Standard, T 0 (beta taken as 1): V_new = 0.5 * 4 + 1 * 2 = 4; X_new = 1 - 0.1 * 4 = 0.6.
  std::vector<OwnedTensor> out = Momentum("standard", 0, 0).RunAll();
  ExpectTensor<float>(out[0], {1}, {0.6f}, kTol);
  ExpectTensor<float>(out[1], {1}, {4}, kTol);
  // Standard, T 1: V_new = 2 + 0.25 * 2 = 2.5; X_new = 1 - 0.25 = 0.75.
  out = Momentum("standard", 1, 0).RunAll();
  ExpectTensor<float>(out[0], {1}, {0.75f}, kTol);
  ExpectTensor<float>(out[1], {1}, {2.5f}, kTol);
  // Standard, T 1, norm_coefficient 1: g = 1 + 2 = 3; V_new = 2 + 0.75 = 2.75;
  // X_new = 1 - 0.275 = 0.725.
  out = Momentum("standard", 1, 1).RunAll();
  ExpectTensor<float>(out[0], {1}, {0.725f}, kTol);
  ExpectTensor<float>(out[1], {1}, {2.75f}, kTol);
  // Nesterov, T 1: V_new = 2.5; X_new = 1 - 0.1 * (2 + 0.5 * 2.5) = 1 - 0.325 = 0.675.
  out = Momentum("nesterov", 1, 0).RunAll();
  ExpectTensor<float>(out[0], {1}, {0.675f}, kTol);
  ExpectTensor<float>(out[1], {1}, {2.5f}, kTol);
}

TEST(TrainingTest, EmptyTensorsAreUpdatedToEmptyOutputs) {
  std::vector<OwnedTensor> out = OptimizerTest("Adagrad", 2)
                                     .Input(R(1))
                                     .Input(T(0))
                                     .Input(MakeTensor<float>({0, 3}, {}))
                                     .Input(MakeTensor<float>({0, 3}, {}))
                                     .Input(MakeTensor<float>({0, 3}, {}))
                                     .RunAll();
  ASSERT_EQ(out.size(), 2u);
  ExpectTensor<float>(out[0], {0, 3}, {});
  ExpectTensor<float>(out[1], {0, 3}, {});
}

TEST(TrainingTest, LoadErrors) {
  auto adagrad = [](int num_x_inputs, int num_outputs) {
    OpTest t = OptimizerTest("Adagrad", num_outputs);
    t.Input(R(1)).Input(T(0));
    for (int i = 0; i < num_x_inputs; ++i) t.Input(MakeTensor<float>({1}, {1}));
    return t;
  };
  // Inputs after R and T must come in groups of three.
  ExpectInvalid(adagrad(4, 2).Create(), {"Adagrad", "groups", "got 6 inputs"});
  ExpectInvalid(adagrad(0, 1).Create(), {"Adagrad", "got 2 inputs"});
  // One tensor has two outputs.
  ExpectInvalid(adagrad(3, 3).Create(), {"Adagrad", "output 2 is not supported"});
  // The ops exist only in the training domain, at its version 1 (the first node below is in the
  // default domain, imported at opset 1).
  ExpectInvalid(OptimizerTest("Adagrad", 2, "")
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"op Adagrad (opset 1) is not supported"});
  ExpectInvalid(OptimizerTest("Adagrad", 2, kTrainingDomain, 2)
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"op ai.onnx.preview.training.Adagrad (opset 2) is not supported"});
  // X must be FLOAT or DOUBLE.
  ExpectInvalid(OptimizerTest("Adagrad", 2)
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Input(MakeTensor<int32_t>({1}, {1}))
                    .Create(),
                {"Adagrad", "not supported for dtype"});
  // Declared types: T INT64, R FLOAT/DOUBLE, the rest like X.
  ExpectInvalid(OptimizerTest("Adagrad", 2)
                    .Input(R(1))
                    .Input(MakeTensor<int32_t>({}, {0}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Adagrad", "T must be INT64"});
  ExpectInvalid(OptimizerTest("Adagrad", 2)
                    .Input(T(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Adagrad", "R must be FLOAT or DOUBLE"});
  ExpectInvalid(OptimizerTest("Adagrad", 2)
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<double>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Adagrad", "input 3 is declared FP64"});
  // Attributes: types, Momentum's required ones, its mode.
  ExpectInvalid(OptimizerTest("Adam", 3)
                    .Attr(IntAttr("alpha", 1))
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Adam", "'alpha' must be a FLOAT"});
  ExpectInvalid(Momentum("sideways", 0, 0).Create(), {"Momentum", "mode", "sideways"});
  ExpectInvalid(OptimizerTest("Momentum", 2)
                    .Attr(FloatAttr("alpha", 0.5f))
                    .Attr(FloatAttr("norm_coefficient", 0))
                    .Attr(StringAttr("mode", "standard"))
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Momentum", "required attribute 'beta'"});
  ExpectInvalid(OptimizerTest("Momentum", 2)
                    .Attr(FloatAttr("alpha", 0.5f))
                    .Attr(FloatAttr("beta", 0.5f))
                    .Attr(FloatAttr("norm_coefficient", 0))
                    .Input(R(1))
                    .Input(T(0))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Input(MakeTensor<float>({1}, {1}))
                    .Create(),
                {"Momentum", "required attribute 'mode'"});
}

TEST(TrainingTest, RunErrors) {
  auto adagrad = [](OwnedTensor r, OwnedTensor t, OwnedTensor g, OwnedTensor h) {
    return OptimizerTest("Adagrad", 2)
        .Input(std::move(r), DataType::kInvalid)
        .Input(std::move(t), DataType::kInvalid)
        .Input(MakeTensor<float>({2}, {1, 2}))
        .Input(std::move(g), DataType::kInvalid)
        .Input(std::move(h), DataType::kInvalid)
        .RunStatus();
  };
  auto f2 = [] { return MakeTensor<float>({2}, {1, 1}); };
  EXPECT_TRUE(adagrad(R(1), T(0), f2(), f2()).ok());
  // G's shape must be X's.
  ExpectInvalid(adagrad(R(1), T(0), MakeTensor<float>({1}, {1}), f2()),
                {"Adagrad", "input 3 has shape", "like X input 2"});
  ExpectInvalid(adagrad(R(1), T(0), f2(), MakeTensor<float>({2, 1}, {1, 1})),
                {"Adagrad", "input 4 has shape"});
  // H's dtype must be X's.
  ExpectInvalid(adagrad(R(1), T(0), f2(), MakeTensor<double>({2}, {1, 1})),
                {"Adagrad", "input 4 is FP64, expected FP32"});
  // R and T: one value each, of the right type.
  ExpectInvalid(adagrad(MakeTensor<float>({2}, {1, 1}), T(0), f2(), f2()),
                {"Adagrad", "R must be one FLOAT or DOUBLE value"});
  ExpectInvalid(adagrad(MakeTensor<int64_t>({}, {1}), T(0), f2(), f2()),
                {"Adagrad", "R must be one"});
  ExpectInvalid(adagrad(R(1), MakeTensor<int32_t>({}, {0}), f2(), f2()),
                {"Adagrad", "T must be one INT64 value"});
  ExpectInvalid(adagrad(R(1), MakeTensor<int64_t>({0}, {}), f2(), f2()),
                {"Adagrad", "T must be one INT64 value"});
}

TEST(TrainingTest, DirectComputeWithTooFewInputsIsAnError) {
  // Driven directly, a kernel built for five inputs is handed four.
  const NodeDesc desc = Momentum("standard", 0, 0).Describe();
  const KernelInfo info(desc);
  Result<const KernelDef*> def = KernelRegistry::Global().Find(info, DeviceType::kCpu);
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  Result<std::unique_ptr<Kernel>> kernel = (*def)->create(info);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  const OwnedTensor r = R(1), t = T(0), x = MakeTensor<float>({1}, {1});
  const std::vector<Tensor> inputs = {r.view(), t.view(), x.view(), x.view()};
  std::vector<OwnedTensor> outputs(2);
  KernelContext ctx(inputs, outputs);
  ExpectInvalid((*kernel)->Compute(ctx), {"Momentum", "expects 5 inputs", "got 4"});
  // With a single output slot only X_new is written.
  const std::vector<Tensor> all = {r.view(), t.view(), x.view(), x.view(), x.view()};
  std::vector<OwnedTensor> one(1);
  KernelContext ctx1(all, one);
  ASSERT_TRUE((*kernel)->Compute(ctx1).ok());
  // V_new = 0.5 * 1 + 1 * 1 = 1.5 (T 0); X_new = 1 - 1 * 1.5 = -0.5.
  ExpectTensor<float>(one[0], {1}, {-0.5f}, kTol);
}

}  // namespace
}  // namespace kiln::ref::testing
