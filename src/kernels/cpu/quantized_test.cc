// SPDX-License-Identifier: Apache-2.0
// INT8 CPU kernels (quantized.cc) against the reference kernels: QConv / QMatMul / QLinearConv /
// QLinearMatMul within 1 in the last place of a quantized output (oneDNN rounds the
// requantization in another FP32 order) and within 1e-5 relative for FP32 outputs;
// ConvInteger / MatMulInteger exactly; QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear
// and ai.kiln QAdd exactly, on both the AVX2 and the scalar path, including halves (round half to
// even), saturation, NaN and infinities, zero points and per-axis parameters. Shapes include edge
// sizes (1, 7, 17), channels not a multiple of 16, groups and depthwise, strides, pads and batch
// > 1.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_test_util.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quantized_kernels.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT
using ref::testing::RandomValues;
using ref::testing::ToVector;

template <typename T>
OwnedTensor RandomInts(const Shape& shape, std::mt19937& rng, int lo, int hi) {
  return MakeTensor<T>(shape, RandomValues<T>(shape.NumElements(), rng, lo, hi));
}

template <typename T>
OwnedTensor Scalar(T v) {
  return MakeTensor<T>(Shape{}, {v});
}

// |a - e| <= lsb elementwise for quantized outputs (UINT8 / INT8 / INT32), and the number of
// elements that differ at all.
int64_t ExpectWithinLsb(const OwnedTensor& a, const OwnedTensor& e, int lsb,
                        const std::string& what) {
  EXPECT_TRUE(a.valid() && e.valid()) << what;
  if (!a.valid() || !e.valid()) return 0;
  EXPECT_EQ(a.dtype(), e.dtype()) << what;
  EXPECT_EQ(a.shape(), e.shape()) << what;
  if (a.dtype() != e.dtype() || a.shape() != e.shape()) return 0;
  int64_t differ = 0;
  int failures = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    int64_t av = 0, ev = 0;
    switch (a.dtype()) {
      case DataType::kUint8:
        av = a.data<const uint8_t>()[i];
        ev = e.data<const uint8_t>()[i];
        break;
      case DataType::kInt8:
        av = a.data<const int8_t>()[i];
        ev = e.data<const int8_t>()[i];
        break;
      case DataType::kInt32:
        av = a.data<const int32_t>()[i];
        ev = e.data<const int32_t>()[i];
        break;
      default:
        ADD_FAILURE() << what << ": unexpected dtype";
        return 0;
    }
    if (av != ev) ++differ;
    if (std::abs(av - ev) > lsb && failures++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << av << ", expected " << ev;
    }
  }
  return differ;
}

using QConvCase = ConvShape;  // X is [N, C, H, W]

const std::vector<QConvCase>& ConvCases() {
  static const std::vector<QConvCase> cases = {
      {{1, 1, 1, 1}, 1, {1, 1}},
      {{1, 3, 7, 7}, 4, {3, 3}, 1, {}, {1, 1, 1, 1}},
      {{2, 17, 9, 11}, 7, {3, 3}, 1, {2, 2}, {1, 1, 1, 1}},
      {{1, 8, 9, 9}, 8, {3, 3}, 8, {1, 1}, {1, 1, 1, 1}},     // depthwise
      {{2, 24, 7, 7}, 24, {3, 3}, 24, {2, 2}, {1, 0, 1, 2}},  // depthwise, stride 2, asym pads
      {{1, 6, 11, 13}, 9, {3, 2}, 3, {1, 2}, {0, 1, 2, 0}},   // groups
      {{3, 17, 7, 7}, 33, {1, 1}},                            // pointwise, batch 3
      {{2, 64, 14, 14}, 32, {1, 1}, 1, {2, 2}},
      {{1, 32, 17, 17}, 48, {3, 3}, 1, {1, 1}, {1, 1, 1, 1}},
      {{2, 5, 19}, 6, {3}, 1, {2}, {1, 1}},  // 1-D
  };
  return cases;
}

// Quantization options of one QConv / QMatMul case.
struct QOptions {
  DataType x_type = DataType::kUint8;
  bool per_channel = true;
  int y = 1;     // 0: FP32 output, 1: UINT8, 2: INT8
  int bias = 1;  // 0: none, 1: INT32, 2: FP32
  std::string act;
};

std::vector<QOptions> OptionSets() {
  return {{DataType::kUint8, true, 1, 1, ""},      {DataType::kUint8, true, 1, 1, "Relu"},
          {DataType::kUint8, false, 2, 2, "Clip"}, {DataType::kUint8, true, 0, 1, ""},
          {DataType::kUint8, true, 0, 2, "Relu"},  {DataType::kUint8, false, 1, 0, ""},
          {DataType::kInt8, true, 2, 1, "Relu"},   {DataType::kInt8, true, 1, 0, ""}};
}

std::string Describe(const QOptions& o) {
  return fmt::format("x {} per_channel {} y {} bias {} act '{}'", DataTypeName(o.x_type),
                     o.per_channel, o.y, o.bias, o.act);
}

// The quantized inputs 1.. (after X) of a QConv / QMatMul / QLinear* node for W of shape
// `w_shape` with `channels` output channels, in QLinearConv's order.
void AddQuantInputs(KernelCase& c, const QOptions& o, const Shape& w_shape, int64_t channels,
                    int64_t reduction, std::mt19937& rng, bool kiln_op) {
  const float x_scale = 0.02f;
  if (o.x_type == DataType::kUint8) {
    c.ConstInput(Scalar<float>(x_scale)).ConstInput(Scalar<uint8_t>(117));
  } else {
    c.ConstInput(Scalar<float>(x_scale)).ConstInput(Scalar<int8_t>(0));
  }
  c.ConstInput(RandomInts<int8_t>(w_shape, rng, -127, 127));
  const int64_t ns = o.per_channel ? channels : 1;
  std::vector<float> ws = RandomValues<float>(ns, rng, 0.002, 0.01);
  c.ConstInput(o.per_channel ? MakeTensor<float>(Shape{ns}, ws) : Scalar<float>(ws[0]));
  c.ConstInput(o.per_channel ? MakeTensor<int8_t>(Shape{ns}, std::vector<int8_t>(size_t(ns), 0))
                             : Scalar<int8_t>(0));
  // y_scale sized so that one standard deviation of the accumulator (about 74 * 73 per sqrt of
  // the reduction length) spans about 40 output steps.
  const float y_scale = x_scale * 0.006f * std::sqrt(float(reduction)) * 74.0f * 73.0f / 40.0f;
  if (o.y == 1) {
    c.ConstInput(Scalar<float>(y_scale)).ConstInput(Scalar<uint8_t>(o.act.empty() ? 128 : 3));
  } else if (o.y == 2) {
    c.ConstInput(Scalar<float>(y_scale)).ConstInput(Scalar<int8_t>(-5));
  } else if (o.bias != 0) {
    c.OmittedInput().OmittedInput();
  }
  if (o.bias == 1) {
    c.ConstInput(RandomInts<int32_t>(Shape{channels}, rng, -20000, 20000));
  } else if (o.bias == 2) {
    c.ConstInput(MakeTensor<float>(Shape{channels}, RandomValues<float>(channels, rng, -0.5, 0.5)));
  }
  if (kiln_op && !o.act.empty()) {
    c.Attr(StringAttr("activation", o.act));
    if (o.act == "Clip") c.Attr(FloatsAttr("activation_params", {-20 * y_scale, 30 * y_scale}));
  }
}

void CompareProviders(const KernelCase& c, const std::string& what) {
  ASSERT_EQ(c.PickedProvider(), "cpu") << what;
  OwnedTensor got = c.Run("cpu");
  OwnedTensor want = c.Run("ref");
  ASSERT_TRUE(got.valid() && want.valid()) << what;
  if (want.dtype() == DataType::kFloat32) {
    ExpectClose(got, want, 1e-5, what);
  } else {
    ExpectWithinLsb(got, want, 1, what);
    // The case exercises requantization, not only saturation: many distinct output values.
    if (want.num_elements() >= 200) {
      std::set<int> distinct;
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        distinct.insert(want.dtype() == DataType::kUint8 ? int{want.data<const uint8_t>()[i]}
                                                         : int{want.data<const int8_t>()[i]});
      }
      EXPECT_GE(distinct.size(), 20u) << what;
    }
  }
}

KernelCase MakeQConv(const QConvCase& cc, const QOptions& o, std::mt19937& rng,
                     const std::string& op) {
  KernelCase c(op, 13);
  const bool kiln_op = op == kQConvOp;
  if (kiln_op) c.Domain(std::string(kKilnDomain), 1);
  const Shape xs{std::span<const int64_t>(cc.x)};
  if (o.x_type == DataType::kUint8) {
    c.Input(RandomInts<uint8_t>(xs, rng, 0, 255));
  } else {
    c.Input(RandomInts<int8_t>(xs, rng, -128, 127));
  }
  std::vector<int64_t> wd = {cc.m, cc.x[1] / cc.group};
  wd.insert(wd.end(), cc.k.begin(), cc.k.end());
  int64_t reduction = cc.x[1] / cc.group;
  for (int64_t k : cc.k) reduction *= k;
  AddQuantInputs(c, o, Shape(std::span<const int64_t>(wd)), cc.m, reduction, rng, kiln_op);
  if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
  if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
  if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
  return c;
}

TEST(CpuQuantizedTest, QConvMatchesReference) {
  std::mt19937 rng(11);
  for (const QConvCase& cc : ConvCases()) {
    for (const QOptions& o : OptionSets()) {
      const std::string what =
          fmt::format("x {} m {} group {}: {}", Shape(std::span<const int64_t>(cc.x)).ToString(),
                      cc.m, cc.group, Describe(o));
      CompareProviders(MakeQConv(cc, o, rng, std::string(kQConvOp)), what);
    }
  }
}

// X [N, C, H, W] as [N, H, W, C] (1-byte elements).
OwnedTensor ToChannelsLast(const OwnedTensor& x) {
  const int64_t n = x.shape().dim(0), c = x.shape().dim(1);
  const int64_t s = x.num_elements() / (n * c);
  std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  std::rotate(dims.begin() + 1, dims.begin() + 2, dims.end());
  OwnedTensor y = OwnedTensor::Allocate(x.dtype(), Shape(std::span<const int64_t>(dims))).value();
  const auto* px = static_cast<const uint8_t*>(x.raw_data());
  auto* py = static_cast<uint8_t*>(y.raw_data());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t i = 0; i < s; ++i) py[(b * s + i) * c + ch] = px[(b * c + ch) * s + i];
    }
  }
  return y;
}

TEST(CpuQuantizedTest, QConvChannelsLastMatchesChannelsFirst) {
  // The same conv with X and / or Y channels-last: the reference equals the channels-first
  // reference moved (exactly), and the fast kernel the reference within 1 LSB.
  for (const QConvCase& cc : ConvCases()) {
    for (int flags = 1; flags < 4; ++flags) {
      const bool xl = flags & 1, yl = flags & 2;
      QOptions o;
      std::mt19937 rng(31);
      KernelCase plain = MakeQConv(cc, o, rng, std::string(kQConvOp));
      OwnedTensor want = plain.Run("ref");
      if (yl) want = ToChannelsLast(want);
      // The same case rebuilt from the same seed (MakeQConv's draw order), X moved.
      KernelCase c(std::string(kQConvOp), 13);
      c.Domain(std::string(kKilnDomain), 1);
      std::mt19937 rng3(31);
      OwnedTensor x = RandomInts<uint8_t>(Shape(std::span<const int64_t>(cc.x)), rng3, 0, 255);
      c.Input(xl ? ToChannelsLast(x) : x);
      std::vector<int64_t> wd = {cc.m, cc.x[1] / cc.group};
      wd.insert(wd.end(), cc.k.begin(), cc.k.end());
      int64_t reduction = cc.x[1] / cc.group;
      for (int64_t k : cc.k) reduction *= k;
      AddQuantInputs(c, o, Shape(std::span<const int64_t>(wd)), cc.m, reduction, rng3, true);
      if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
      if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
      if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
      c.Attr(IntAttr("x_channels_last", xl)).Attr(IntAttr("y_channels_last", yl));
      const std::string what = fmt::format(
          "x {} channels-last x {} y {}", Shape(std::span<const int64_t>(cc.x)).ToString(), xl, yl);
      OwnedTensor ref = c.Run("ref");
      EXPECT_EQ(ExpectWithinLsb(ref, want, 0, what + " (ref)"), 0);
      ExpectWithinLsb(c.Run("cpu"), ref, 1, what);
    }
  }
}

TEST(CpuQuantizedTest, QLinearConvMatchesReference) {
  std::mt19937 rng(12);
  for (const QConvCase& cc : ConvCases()) {
    for (int y : {1, 2}) {
      QOptions o;
      o.y = y;
      o.bias = y;  // QLinearConv's bias is INT32; bias 2 means FP32, so only 1 has a bias
      if (o.bias == 2) o.bias = 0;
      const std::string what =
          fmt::format("x {}: {}", Shape(std::span<const int64_t>(cc.x)).ToString(), Describe(o));
      CompareProviders(MakeQConv(cc, o, rng, "QLinearConv"), what);
    }
  }
}

KernelCase MakeQMatMul(const std::vector<int64_t>& a, int64_t n, const QOptions& o,
                       std::mt19937& rng, const std::string& op) {
  KernelCase c(op, 13);
  const bool kiln_op = op == kQMatMulOp;
  if (kiln_op) c.Domain(std::string(kKilnDomain), 1);
  const Shape as{std::span<const int64_t>(a)};
  if (o.x_type == DataType::kUint8) {
    c.Input(RandomInts<uint8_t>(as, rng, 0, 255));
  } else {
    c.Input(RandomInts<int8_t>(as, rng, -128, 127));
  }
  const int64_t k = a.back();
  AddQuantInputs(c, o, Shape{k, n}, n, k, rng, kiln_op);
  return c;
}

const std::vector<std::pair<std::vector<int64_t>, int64_t>>& MatMulCases() {
  static const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {
      {{1, 1}, 1},         {{7, 17}, 5},    {{2, 7, 33}, 17},
      {{3, 2, 5, 64}, 48}, {{16, 768}, 96}, {{1, 9, 100}, 130},
  };
  return cases;
}

TEST(CpuQuantizedTest, QMatMulMatchesReference) {
  std::mt19937 rng(13);
  for (const auto& [a, n] : MatMulCases()) {
    for (const QOptions& o : OptionSets()) {
      const std::string what = fmt::format(
          "A {} N {}: {}", Shape(std::span<const int64_t>(a)).ToString(), n, Describe(o));
      CompareProviders(MakeQMatMul(a, n, o, rng, std::string(kQMatMulOp)), what);
    }
  }
}

TEST(CpuQuantizedTest, QLinearMatMulMatchesReference) {
  std::mt19937 rng(14);
  for (const auto& [a, n] : MatMulCases()) {
    for (int y : {1, 2}) {
      QOptions o;
      o.y = y;
      o.bias = 0;
      const std::string what = fmt::format(
          "A {} N {}: {}", Shape(std::span<const int64_t>(a)).ToString(), n, Describe(o));
      CompareProviders(MakeQMatMul(a, n, o, rng, "QLinearMatMul"), what);
    }
  }
}

TEST(CpuQuantizedTest, ConvIntegerAndMatMulIntegerAreExact) {
  std::mt19937 rng(15);
  for (const QConvCase& cc : ConvCases()) {
    KernelCase c("ConvInteger", 13);
    c.Input(RandomInts<uint8_t>(Shape(std::span<const int64_t>(cc.x)), rng, 0, 255));
    std::vector<int64_t> wd = {cc.m, cc.x[1] / cc.group};
    wd.insert(wd.end(), cc.k.begin(), cc.k.end());
    c.ConstInput(RandomInts<int8_t>(Shape(std::span<const int64_t>(wd)), rng, -128, 127));
    c.Input(Scalar<uint8_t>(99));  // a runtime zero point, as DynamicQuantizeLinear gives
    if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
    if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
    if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
    ASSERT_EQ(c.PickedProvider(), "cpu");
    EXPECT_EQ(ExpectWithinLsb(c.Run("cpu"), c.Run("ref"), 0, "ConvInteger"), 0);
  }
  for (const auto& [a, n] : MatMulCases()) {
    KernelCase c("MatMulInteger", 13);
    c.Input(RandomInts<uint8_t>(Shape(std::span<const int64_t>(a)), rng, 0, 255));
    c.ConstInput(RandomInts<int8_t>(Shape{a.back(), n}, rng, -128, 127));
    c.Input(Scalar<uint8_t>(131));
    ASSERT_EQ(c.PickedProvider(), "cpu");
    EXPECT_EQ(ExpectWithinLsb(c.Run("cpu"), c.Run("ref"), 0, "MatMulInteger"), 0);
  }
}

// The values where the INT8 kernels of CPUs without VNNI would saturate: X at the top of its range
// and W at +-127 (or +-64 for 7-bit weights) with long runs of one sign, so that every pair of
// products sums beyond 16 bits. The integer ops must stay exact and the quantized ones within an
// LSB, on every ISA level (quantized.cc's NOTE on CPUs without VNNI).
template <typename X>
OwnedTensor ExtremeX(const Shape& shape, std::mt19937& rng) {
  std::vector<X> v(static_cast<size_t>(shape.NumElements()));
  std::uniform_int_distribution<int> d(0, 9);
  const int hi = std::numeric_limits<X>::max(), lo = std::numeric_limits<X>::min();
  for (X& x : v) x = static_cast<X>(d(rng) == 0 ? lo : hi - d(rng) % 3);
  return MakeTensor<X>(shape, v);
}

OwnedTensor ExtremeW(const Shape& shape, int wmax, std::mt19937& rng) {
  std::vector<int8_t> v(static_cast<size_t>(shape.NumElements()));
  std::uniform_int_distribution<int> d(0, 15);
  for (size_t i = 0; i < v.size(); ++i) {
    const int sign = (i / 8) % 2 == 0 ? 1 : -1;  // runs of 8 of one sign
    v[i] = static_cast<int8_t>(sign * (wmax - d(rng) % 2));
  }
  return MakeTensor<int8_t>(shape, v);
}

TEST(CpuQuantizedTest, ExtremeValuesStayExact) {
  std::mt19937 rng(19);
  const std::vector<QConvCase> convs = {
      {{1, 64, 6, 6}, 32, {1, 1}},                         // pointwise
      {{2, 32, 7, 7}, 16, {3, 3}, 1, {}, {1, 1, 1, 1}},    // 3x3
      {{1, 3, 9, 9}, 8, {3, 3}, 1, {2, 2}, {1, 1, 1, 1}},  // RGB stem
      {{1, 16, 6, 6}, 16, {3, 3}, 16, {}, {1, 1, 1, 1}},   // depthwise
      {{1, 8, 6, 6}, 16, {3, 3}, 8, {}, {1, 1, 1, 1}},     // depthwise, multiplier 2
      {{1, 32, 5, 5}, 32, {3, 3}, 4, {}, {1, 1, 1, 1}},    // groups of 8
      {{1, 256, 5, 5}, 16, {3, 3}, 1, {}, {1, 1, 1, 1}},   // sums beyond 2^24
  };
  for (int wmax : {127, 64}) {
    for (const QConvCase& cc : convs) {
      std::vector<int64_t> wd = {cc.m, cc.x[1] / cc.group};
      wd.insert(wd.end(), cc.k.begin(), cc.k.end());
      const Shape ws{std::span<const int64_t>(wd)};
      const Shape xs{std::span<const int64_t>(cc.x)};
      const std::string what =
          fmt::format("x {} m {} group {} |w| <= {}", xs.ToString(), cc.m, cc.group, wmax);
      // ConvInteger: exact, with and without a zero point.
      for (int zp : {0, 200}) {
        KernelCase c("ConvInteger", 13);
        c.Input(ExtremeX<uint8_t>(xs, rng)).ConstInput(ExtremeW(ws, wmax, rng));
        c.Input(Scalar<uint8_t>(static_cast<uint8_t>(zp)));
        if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
        if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
        if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
        ASSERT_EQ(c.PickedProvider(), "cpu");
        EXPECT_EQ(ExpectWithinLsb(c.Run("cpu"), c.Run("ref"), 0,
                                  fmt::format("ConvInteger {} zp {}", what, zp)),
                  0);
      }
      // QLinearConv on UINT8 and INT8 sources: within an LSB.
      for (DataType xt : {DataType::kUint8, DataType::kInt8}) {
        KernelCase c("QLinearConv", 13);
        c.Input(xt == DataType::kUint8 ? ExtremeX<uint8_t>(xs, rng) : ExtremeX<int8_t>(xs, rng));
        c.ConstInput(Scalar<float>(0.02f));
        if (xt == DataType::kUint8) {
          c.ConstInput(Scalar<uint8_t>(10));
        } else {
          c.ConstInput(Scalar<int8_t>(-3));
        }
        c.ConstInput(ExtremeW(ws, wmax, rng)).ConstInput(Scalar<float>(0.004f));
        c.ConstInput(Scalar<int8_t>(0));
        int64_t reduction = cc.x[1] / cc.group;
        for (int64_t k : cc.k) reduction *= k;
        // Large enough that the extreme sums stay mostly inside the output range.
        c.ConstInput(
            Scalar<float>(0.02f * 0.004f * 255.0f * float(wmax) * float(reduction) / 100.0f));
        c.ConstInput(Scalar<uint8_t>(128));
        if (cc.group != 1) c.Attr(IntAttr("group", cc.group));
        if (!cc.strides.empty()) c.Attr(IntsAttr("strides", cc.strides));
        if (!cc.pads.empty()) c.Attr(IntsAttr("pads", cc.pads));
        ASSERT_EQ(c.PickedProvider(), "cpu");
        ExpectWithinLsb(c.Run("cpu"), c.Run("ref"), 1,
                        fmt::format("QLinearConv {} x {}", what, DataTypeName(xt)));
      }
    }
    for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 64, 32}, {7, 256, 40}, {16, 768, 96}}) {
      const std::string what = fmt::format("[{}, {}] x [{}, {}] |w| <= {}", m, k, k, n, wmax);
      for (int zp : {0, 7}) {
        KernelCase c("MatMulInteger", 13);
        c.Input(ExtremeX<uint8_t>(Shape{m, k}, rng)).ConstInput(ExtremeW(Shape{k, n}, wmax, rng));
        c.Input(Scalar<uint8_t>(static_cast<uint8_t>(zp)));
        ASSERT_EQ(c.PickedProvider(), "cpu");
        EXPECT_EQ(ExpectWithinLsb(c.Run("cpu"), c.Run("ref"), 0,
                                  fmt::format("MatMulInteger {} zp {}", what, zp)),
                  0);
      }
      KernelCase s("MatMulInteger", 13);
      s.Input(ExtremeX<int8_t>(Shape{m, k}, rng)).ConstInput(ExtremeW(Shape{k, n}, wmax, rng));
      s.Input(Scalar<int8_t>(-9));
      ASSERT_EQ(s.PickedProvider(), "cpu");
      EXPECT_EQ(ExpectWithinLsb(s.Run("cpu"), s.Run("ref"), 0, "MatMulInteger INT8 A " + what), 0);
    }
  }
}

// Which path an INT8 layer takes: on a CPU without VNNI, 8-bit weights are split (the kernel says
// so in its note, and oneDNN sees twice the input channels) while 7-bit weights run as they are;
// with VNNI neither is split.
TEST(CpuQuantizedTest, WideWeightsAreSplitOnlyWithoutVnni) {
  std::mt19937 rng(20);
  const bool vnni = CpuKernelsHaveInt8DotProducts();
  for (int wmax : {127, 64}) {
    KernelCase c("ConvInteger", 13);
    c.Input(ExtremeX<uint8_t>(Shape{1, 32, 5, 5}, rng))
        .ConstInput(ExtremeW(Shape{16, 32, 1, 1}, wmax, rng));
    Result<KernelCase::Prepared> p = c.Prepare("cpu");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    const bool split = !vnni && wmax > 64;
    EXPECT_EQ(!p->kernel->Note().empty(), split) << "wmax " << wmax << " vnni " << vnni;
    std::string log;
    Result<OwnedTensor> r = SecondRunVerbose(c, &log);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_NE(log.find(split ? "ic64oc16" : "ic32oc16"), std::string::npos)
        << "wmax " << wmax << " vnni " << vnni << ": " << log;
  }
}

TEST(CpuQuantizedTest, ConcurrentComputeOnOneKernel) {
  // One QConv and one QMatMul kernel instance run from 4 threads at once: every result equals
  // the single-threaded one.
  std::mt19937 rng(17);
  QOptions o;
  o.act = "Relu";
  for (int which = 0; which < 2; ++which) {
    KernelCase c = which == 0 ? MakeQConv(ConvCases()[8], o, rng, std::string(kQConvOp))
                              : MakeQMatMul({4, 16, 100}, 48, o, rng, std::string(kQMatMulOp));
    OwnedTensor expected = c.Run("cpu");
    Result<KernelCase::Prepared> p = c.Prepare("cpu");
    ASSERT_TRUE(p.ok());
    std::vector<std::thread> threads;
    std::vector<OwnedTensor> results(4);
    for (size_t t = 0; t < results.size(); ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 3; ++i) results[t] = c.Execute(*p).value();
      });
    }
    for (auto& th : threads) th.join();
    for (const OwnedTensor& r : results) {
      EXPECT_EQ(ExpectWithinLsb(r, expected, 0, "concurrent"), 0);
    }
  }
}

TEST(CpuQuantizedTest, NonZeroWeightZeroPointGoesToReference) {
  std::mt19937 rng(16);
  KernelCase c("QLinearConv", 13);
  c.Input(RandomInts<uint8_t>(Shape{1, 2, 4, 4}, rng, 0, 255))
      .ConstInput(Scalar<float>(0.1f))
      .ConstInput(Scalar<uint8_t>(3))
      .ConstInput(RandomInts<int8_t>(Shape{2, 2, 1, 1}, rng, -10, 10))
      .ConstInput(Scalar<float>(0.1f))
      .ConstInput(Scalar<int8_t>(1))
      .ConstInput(Scalar<float>(0.5f))
      .ConstInput(Scalar<uint8_t>(10));
  EXPECT_EQ(c.PickedProvider(), "ref");
}

// Values that probe rounding and saturation for scale `s`: exact halves, near-halves, the
// saturation edges, huge values, infinities, NaN, zero, and random values.
std::vector<float> ProbeValues(float s, std::mt19937& rng, int64_t n) {
  std::vector<float> v;
  for (int k = -300; k <= 300; ++k) v.push_back((float(k) + 0.5f) * s);
  for (int k = -300; k <= 300; k += 7) v.push_back(float(k) * s);
  for (float f : {0.0f, -0.0f, 1e30f, -1e30f, 3e9f, -3e9f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::nanf("")}) {
    v.push_back(f);
  }
  std::vector<float> r = RandomValues<float>(n, rng, -200 * s, 200 * s);
  v.insert(v.end(), r.begin(), r.end());
  return v;
}

template <typename Q>
void ExpectSameBytes(const OwnedTensor& a, const OwnedTensor& e, const std::string& what) {
  ASSERT_TRUE(a.valid() && e.valid()) << what;
  ASSERT_EQ(a.dtype(), e.dtype()) << what;
  ASSERT_EQ(a.shape(), e.shape()) << what;
  const std::vector<Q> av = ToVector<Q>(a), ev = ToVector<Q>(e);
  int failures = 0;
  for (size_t i = 0; i < av.size() && failures < 5; ++i) {
    const bool same = std::is_floating_point_v<Q> && std::isnan(double(ev[i]))
                          ? std::isnan(double(av[i]))
                          : av[i] == ev[i];
    if (!same) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << " is " << double(av[i]) << ", expected "
                    << double(ev[i]);
    }
  }
}

class QuantizeIsaTest : public ::testing::TestWithParam<Isa> {};

TEST_P(QuantizeIsaTest, QuantizeLinearIsExact) {
  ScopedMaxIsa cap(GetParam());
  std::mt19937 rng(21);
  for (float s : {0.05f, 1.0f, 0.0137f}) {
    const std::vector<float> v = ProbeValues(s, rng, 1000);
    const int64_t n = static_cast<int64_t>(v.size());
    for (int zp : {0, 77, 255}) {
      KernelCase c("QuantizeLinear", 13);
      c.Input(MakeTensor<float>(Shape{n}, v)).ConstInput(Scalar<float>(s));
      c.ConstInput(Scalar<uint8_t>(static_cast<uint8_t>(zp)));
      ASSERT_EQ(c.PickedProvider(), "cpu");
      ExpectSameBytes<uint8_t>(c.Run("cpu"), c.Run("ref"), fmt::format("u8 s {} zp {}", s, zp));
    }
    for (int zp : {0, -128, 100}) {
      KernelCase c("QuantizeLinear", 13);
      c.Input(MakeTensor<float>(Shape{n}, v)).ConstInput(Scalar<float>(s));
      c.ConstInput(Scalar<int8_t>(static_cast<int8_t>(zp)));
      ExpectSameBytes<int8_t>(c.Run("cpu"), c.Run("ref"), fmt::format("s8 s {} zp {}", s, zp));
    }
  }
  // Per axis: [2, 3, 37] along axis 1, and the default UINT8 output without a zero point.
  const Shape shape{2, 3, 37};
  KernelCase c("QuantizeLinear", 13);
  c.Input(RandomTensor(shape, rng, -3, 3))
      .ConstInput(MakeTensor<float>(Shape{3}, {0.01f, 0.02f, 0.5f}))
      .ConstInput(MakeTensor<int8_t>(Shape{3}, {0, -3, 5}));
  ExpectSameBytes<int8_t>(c.Run("cpu"), c.Run("ref"), "per axis");
  KernelCase d("QuantizeLinear", 13);
  d.Input(RandomTensor(shape, rng, -3, 3)).ConstInput(Scalar<float>(0.02f));
  ExpectSameBytes<uint8_t>(d.Run("cpu"), d.Run("ref"), "no zero point");
}

TEST_P(QuantizeIsaTest, QuantizeRoundsHalfToEvenAndSaturates) {
  // Expected values worked out by hand: scale 1, zero point 10, UINT8.
  ScopedMaxIsa cap(GetParam());
  std::vector<float> x = {0.5f,  1.5f,   2.5f,   -0.5f, -1.5f,        -10.5f,
                          -11.f, 245.5f, 244.5f, 1e9f,  std::nanf("")};
  while (x.size() < 40) x.push_back(2.5f);  // long enough for the vector loop
  KernelCase c("QuantizeLinear", 13);
  c.Input(MakeTensor<float>(Shape{int64_t(x.size())}, x))
      .ConstInput(Scalar<float>(1.0f))
      .ConstInput(Scalar<uint8_t>(10));
  const std::vector<uint8_t> got = ToVector<uint8_t>(c.Run("cpu"));
  const std::vector<uint8_t> want = {10, 12, 12, 10, 8, 0, 0, 255, 254, 255, 10};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
  for (size_t i = want.size(); i < got.size(); ++i) EXPECT_EQ(got[i], 12) << "element " << i;
}

TEST_P(QuantizeIsaTest, DequantizeLinearIsExact) {
  ScopedMaxIsa cap(GetParam());
  std::mt19937 rng(22);
  for (int64_t n : {1, 7, 17, 1000}) {
    KernelCase c("DequantizeLinear", 13);
    c.Input(RandomInts<uint8_t>(Shape{n}, rng, 0, 255))
        .ConstInput(Scalar<float>(0.037f))
        .ConstInput(Scalar<uint8_t>(128));
    ExpectSameBytes<float>(c.Run("cpu"), c.Run("ref"), fmt::format("u8 n {}", n));
    KernelCase d("DequantizeLinear", 13);
    d.Input(RandomInts<int8_t>(Shape{n}, rng, -128, 127))
        .ConstInput(Scalar<float>(0.5f))
        .ConstInput(Scalar<int8_t>(-7));
    ExpectSameBytes<float>(d.Run("cpu"), d.Run("ref"), fmt::format("s8 n {}", n));
  }
  // Per channel on axis 0, as INT8 weights are.
  KernelCase w("DequantizeLinear", 13);
  w.Input(RandomInts<int8_t>(Shape{5, 3, 3, 3}, rng, -127, 127))
      .ConstInput(MakeTensor<float>(Shape{5}, RandomValues<float>(5, rng, 0.001, 0.1)))
      .ConstInput(MakeTensor<int8_t>(Shape{5}, std::vector<int8_t>(5, 0)))
      .Attr(IntAttr("axis", 0));
  ExpectSameBytes<float>(w.Run("cpu"), w.Run("ref"), "per channel");
  // Hand-worked: (x - zp) * scale.
  KernelCase h("DequantizeLinear", 13);
  h.Input(MakeTensor<uint8_t>(Shape{3}, {0, 10, 255}))
      .ConstInput(Scalar<float>(0.5f))
      .ConstInput(Scalar<uint8_t>(10));
  EXPECT_EQ(ToVector<float>(h.Run("cpu")), (std::vector<float>{-5.0f, 0.0f, 122.5f}));
}

TEST_P(QuantizeIsaTest, DynamicQuantizeLinearIsExact) {
  ScopedMaxIsa cap(GetParam());
  std::mt19937 rng(23);
  for (auto [lo, hi] : std::vector<std::pair<double, double>>{{-1, 1}, {0.5, 3}, {-7, -2}}) {
    for (int64_t n : {1, 7, 17, 5000}) {
      KernelCase c("DynamicQuantizeLinear", 13);
      std::vector<float> v = RandomValues<float>(n, rng, lo, hi);
      if (n > 10) v[3] = std::nanf("");
      c.Input(MakeTensor<float>(Shape{n}, v));
      ASSERT_EQ(c.PickedProvider(), "cpu");
      ExpectSameBytes<uint8_t>(c.Run("cpu"), c.Run("ref"), fmt::format("n {} [{}, {}]", n, lo, hi));
    }
  }
  // All zeros: scale 0, every output the zero point 0.
  KernelCase z("DynamicQuantizeLinear", 13);
  z.Input(MakeTensor<float>(Shape{40}, std::vector<float>(40, 0.0f)));
  EXPECT_EQ(ToVector<uint8_t>(z.Run("cpu")), std::vector<uint8_t>(40, 0));
}

TEST_P(QuantizeIsaTest, QAddIsExact) {
  ScopedMaxIsa cap(GetParam());
  std::mt19937 rng(24);
  struct Types {
    bool a_signed, b_signed, y_signed;
  };
  for (const Types& t : {Types{false, false, false}, Types{true, false, true},
                         Types{false, true, false}, Types{true, true, true}}) {
    for (const std::string act : {"", "Relu", "Clip"}) {
      for (int64_t n : {1, 7, 17, 33, 1000, 4099}) {
        KernelCase c(std::string(kQAddOp), 13);
        c.Domain(std::string(kKilnDomain), 1);
        auto operand = [&](bool is_signed, float scale, int zp) {
          if (is_signed) {
            c.Input(RandomInts<int8_t>(Shape{n}, rng, -128, 127))
                .ConstInput(Scalar<float>(scale))
                .ConstInput(Scalar<int8_t>(static_cast<int8_t>(zp - 128)));
          } else {
            c.Input(RandomInts<uint8_t>(Shape{n}, rng, 0, 255))
                .ConstInput(Scalar<float>(scale))
                .ConstInput(Scalar<uint8_t>(static_cast<uint8_t>(zp)));
          }
        };
        operand(t.a_signed, 0.031f, 120);
        operand(t.b_signed, 0.017f, 131);
        if (t.y_signed) {
          c.ConstInput(Scalar<float>(0.043f)).ConstInput(Scalar<int8_t>(-9));
        } else {
          c.ConstInput(Scalar<float>(0.043f)).ConstInput(Scalar<uint8_t>(act.empty() ? 128 : 0));
        }
        if (!act.empty()) c.Attr(StringAttr("activation", act));
        if (act == "Clip") c.Attr(FloatsAttr("activation_params", {-1.0f, 4.5f}));
        ASSERT_EQ(c.PickedProvider(), "cpu");
        const std::string what = fmt::format("QAdd n {} signed {}{}{} act '{}'", n, t.a_signed,
                                             t.b_signed, t.y_signed, act);
        EXPECT_EQ(ExpectWithinLsb(c.Run("cpu"), c.Run("ref"), 0, what), 0) << what;
      }
    }
  }
}

TEST_P(QuantizeIsaTest, TransposeBytesIsATranspose) {
  ScopedMaxIsa cap(GetParam());
  std::mt19937 rng(25);
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {16, 16}, {17, 33}, {64, 7}, {3, 100}, {48, 64}}) {
    const int64_t src_stride = cols + 5, dst_stride = rows + 3;
    std::vector<uint8_t> src = RandomValues<uint8_t>(rows * src_stride, rng, 0, 255);
    std::vector<uint8_t> dst(static_cast<size_t>(cols * dst_stride), 0);
    TransposeBytes(src.data(), src_stride, dst.data(), dst_stride, rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(dst[size_t(c * dst_stride + r)], src[size_t(r * src_stride + c)])
            << rows << "x" << cols << " at " << r << "," << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, QuantizeIsaTest, ::testing::Values(Isa::kAvx2, Isa::kScalar),
                         [](const auto& info) { return std::string(IsaName(info.param)); });

}  // namespace
}  // namespace kiln::cpu
