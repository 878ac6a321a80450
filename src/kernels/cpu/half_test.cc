// SPDX-License-Identifier: Apache-2.0
// Half-precision weights on the CPU kernels: the FLOAT16 / BFLOAT16 -> FP32 conversions
// (half_kernels.h, scalar, AVX2+F16C and AVX-512 paths) against the scalar tensor/dtype.h
// functions on every 16-bit pattern (infinities, NaNs, denormals) and on edge lengths; FusedConv /
// FusedMatMul / FusedGemm with a half W / B against the reference kernel and against the FP32
// kernel run on the weights rounded independently here; and the resident packed weight bytes of
// a half kernel, half those of the FP32 kernel.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_test_util.h"
#include "kernels/cpu/dnnl_util.h"
#include "kernels/cpu/half_kernels.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/layout.h"
#include "op/kiln_ops.h"

namespace kiln::cpu {
namespace {

using namespace testing;  // NOLINT

float Widen(DataType dt, uint16_t bits) {
  return dt == DataType::kFloat16 ? Float16ToFloat(Float16{bits}) : BFloat16ToFloat(BFloat16{bits});
}

// Every 16-bit pattern, then a pseudo-random tail, so each length sees specials and normals.
std::vector<uint16_t> AllPatterns(int64_t n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  std::mt19937 rng(11);
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] = i < 65536 ? static_cast<uint16_t>(i) : static_cast<uint16_t>(rng());
  }
  return v;
}

void ExpectWidened(DataType dt, const std::vector<uint16_t>& x, const std::vector<float>& y,
                   int64_t offset, const std::string& what) {
  int failures = 0;
  for (size_t i = 0; i < x.size() && failures < 5; ++i) {
    const float e = Widen(dt, x[i]);
    const float a = y[i];
    uint32_t ab, eb;
    std::memcpy(&ab, &a, 4);
    std::memcpy(&eb, &e, 4);
    const bool ok = std::isnan(e) ? std::isnan(a) && std::signbit(a) == std::signbit(e) : ab == eb;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << ": element " << (static_cast<int64_t>(i) + offset) << " bits 0x"
                    << std::hex << x[i] << " gave " << a << " (0x" << ab << "), expected " << e
                    << " (0x" << eb << ")";
    }
  }
}

using Convert = void (*)(const uint16_t*, float*, int64_t);

TEST(HalfKernelsTest, EveryPathMatchesDtypeFunctions) {
  struct Path {
    std::string name;
    Convert fp16, bf16;
    bool available;
  };
  const bool avx2 = DetectedIsa() >= Isa::kAvx2;
  const std::vector<Path> paths = {
      {"scalar", &scalar::Fp16ToFloat, &scalar::Bf16ToFloat, true},
      {"avx2", &avx2::Fp16ToFloat, &avx2::Bf16ToFloat, avx2 && CpuHasF16C()},
      {"avx512", &avx512::Fp16ToFloat, &avx512::Bf16ToFloat, DetectedIsa() >= Isa::kAvx512},
  };
  for (const Path& p : paths) {
    if (!p.available) continue;
    for (int64_t n : {1, 7, 8, 15, 16, 17, 1000, 1031, 65536, 65536 + 23}) {
      // Unaligned start: offset 1 in a larger buffer.
      const std::vector<uint16_t> all = AllPatterns(n + 1);
      const std::vector<uint16_t> x(all.begin() + 1, all.end());
      for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
        std::vector<float> y(static_cast<size_t>(n) + 1, -7.0f);
        (dt == DataType::kFloat16 ? p.fp16 : p.bf16)(x.data(), y.data(), n);
        EXPECT_EQ(y.back(), -7.0f) << p.name << " wrote past the end, n " << n;
        y.pop_back();
        ExpectWidened(dt, x, y, 1, fmt::format("{} {} n {}", p.name, DataTypeName(dt), n));
      }
    }
  }
}

TEST(HalfKernelsTest, DispatchAndParallelMatchOnEveryIsaCap) {
  for (Isa cap : IsaLevels()) {
    ScopedMaxIsa scoped(cap);
    for (int64_t n : {1, 7, 17, 1000, 65536 + 5, 300001}) {
      const std::vector<uint16_t> x = AllPatterns(n);
      for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
        std::vector<float> y(static_cast<size_t>(n));
        HalfToFloat(dt, x.data(), y.data(), n);
        ExpectWidened(dt, x, y, 0, fmt::format("{} {} n {}", IsaName(cap), DataTypeName(dt), n));
        std::vector<float> yp(static_cast<size_t>(n));
        HalfToFloatParallel(dt, x.data(), yp.data(), n);
        ExpectWidened(dt, x, yp, 0,
                      fmt::format("parallel {} {} n {}", IsaName(cap), DataTypeName(dt), n));
      }
    }
  }
}

TEST(HalfKernelsTest, NarrowingMatchesDtypeFunctions) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1e-8f,
                          -3e-6f,
                          6.1e-5f,
                          65504.0f,
                          65520.0f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          1.0f + 1.0f / 2048,
                          1.0f + 3.0f / 2048};
  for (int i = 0; i < 70000; ++i) x.push_back(dist(rng) * (i % 3 == 0 ? 1e-6f : 1.0f));
  const int64_t n = static_cast<int64_t>(x.size());
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<uint16_t> y(x.size());
    FloatToHalfParallel(dt, x.data(), y.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t e =
          dt == DataType::kFloat16 ? FloatToFloat16(x[i]).bits : FloatToBFloat16(x[i]).bits;
      ASSERT_EQ(y[i], e) << DataTypeName(dt) << " element " << i << " " << x[i];
    }
  }
}

// --- Kernels with half weights ------------------------------------------------------------------

// `t` (FP32) in `dt`, rounded to nearest even by dtype.h.
OwnedTensor ToHalf(const OwnedTensor& t, DataType dt) {
  OwnedTensor out = OwnedTensor::Allocate(dt, t.shape()).value();
  const float* p = t.data<const float>();
  uint16_t* q = static_cast<uint16_t*>(out.raw_data());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    q[i] = dt == DataType::kFloat16 ? FloatToFloat16(p[i]).bits : FloatToBFloat16(p[i]).bits;
  }
  return out;
}

// The FP32 values of `t` rounded to `dt` and back.
OwnedTensor RoundedThroughHalf(const OwnedTensor& t, DataType dt) {
  OwnedTensor out = OwnedTensor::CopyOf(t.view()).value();
  float* p = out.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    p[i] = dt == DataType::kFloat16 ? Float16ToFloat(FloatToFloat16(p[i]))
                                    : BFloat16ToFloat(FloatToBFloat16(p[i]));
  }
  return out;
}

const std::vector<ConvShape>& ConvShapes() {
  static const std::vector<ConvShape> shapes = {
      {{1, 3, 7, 7}, 4, {3, 3}, 1, {}, {1, 1, 1, 1}},
      {{2, 5, 9, 11}, 17, {3, 3}, 1, {2, 2}, {0, 1, 1, 0}},
      {{1, 17, 7, 7}, 7, {1, 1}},                         // pointwise: W used in its plain layout
      {{1, 16, 9, 9}, 16, {3, 3}, 16, {}, {1, 1, 1, 1}},  // depthwise
      {{1, 6, 8, 8}, 9, {3, 3}, 3},                       // groups
      {{2, 3, 19}, 5, {3}},                               // 1-D
      {{1, 2, 5, 6, 7}, 3, {3, 3, 3}},                    // 3-D
      {{1, 32, 14, 14}, 64, {3, 3}, 1, {}, {1, 1, 1, 1}},
  };
  return shapes;
}

KernelCase FusedConvCase(const ConvShape& s, const OwnedTensor& x, const OwnedTensor& w,
                         const OwnedTensor& b) {
  KernelCase c("FusedConv", 1);
  c.Domain(std::string(kKilnDomain), 1);
  c.Input(x).ConstInput(w).ConstInput(b);
  c.Attr(StringAttr("activation", "Relu"));
  if (s.group != 1) c.Attr(IntAttr("group", s.group));
  if (!s.strides.empty()) c.Attr(IntsAttr("strides", s.strides));
  if (!s.pads.empty()) c.Attr(IntsAttr("pads", s.pads));
  return c;
}

TEST(HalfWeightsKernelTest, FusedConvMatchesReferenceAndRoundedFp32) {
  std::mt19937 rng(21);
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    for (const ConvShape& s : ConvShapes()) {
      std::vector<int64_t> wd = {s.m, s.x[1] / s.group};
      wd.insert(wd.end(), s.k.begin(), s.k.end());
      const OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(s.x)), rng);
      const OwnedTensor w = RandomTensor(Shape(std::span<const int64_t>(wd)), rng);
      const OwnedTensor b = RandomTensor(Shape({s.m}), rng);
      const KernelCase half = FusedConvCase(s, x, ToHalf(w, dt), b);
      const KernelCase rounded = FusedConvCase(s, x, RoundedThroughHalf(w, dt), b);
      const std::string what =
          fmt::format("{} x [{}] m {}", DataTypeName(dt), fmt::join(s.x, ","), s.m);
      EXPECT_EQ(half.PickedProvider(), "cpu") << what;
      const OwnedTensor expected = rounded.Run("ref");
      ExpectClose(half.Run("ref"), expected, 1e-5, what + " ref vs rounded FP32");
      if (dt == DataType::kBFloat16 && CpuComputesBf16()) {
        // BF16 compute: X is rounded to BF16 too; the products of BF16 values are exact in FP32,
        // so the result is the FP32 reference on rounded X and W up to summation order.
        const OwnedTensor x_bf16 = RoundedThroughHalf(x, dt);
        const OwnedTensor native =
            FusedConvCase(s, x_bf16, RoundedThroughHalf(w, dt), b).Run("ref");
        ExpectClose(half.Run("cpu"), native, 1e-4, what + " cpu vs BF16 X and W");
        ExpectClose(half.Run("cpu"), expected, 3e-2, what + " cpu vs FP32 X (BF16 rounding)");
        continue;
      }
      ExpectClose(half.Run("cpu"), half.Run("ref"), 1e-4, what + " cpu vs ref");
      ExpectClose(half.Run("cpu"), expected, 1e-4, what + " cpu vs rounded FP32");
      {
        ScopedMaxIsa scalar_only(Isa::kScalar);
        ExpectClose(half.Run("cpu"), expected, 1e-4, what + " scalar widening");
      }
    }
  }
}

TEST(HalfWeightsKernelTest, BlockedFusedConvMatchesReferenceWithZeroPadding) {
  // Half weights inside a blocked region (a BF16 convolution where the CPU computes BF16): the
  // result matches the reference, and the padding lanes of Y are zero whatever the activation
  // makes of a zero (Sigmoid: 0.5), on NaN-filled output memory.
  const int64_t block = PreferredChannelBlock();
  if (block == 0) GTEST_SKIP() << "below AVX2 layout_selection blocks nothing";
  std::mt19937 rng(23);
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    for (const char* act : {"Relu", "Sigmoid"}) {
      for (int64_t k : {1, 3}) {
        const int64_t c = 20, m = 20;
        const OwnedTensor x = RandomTensor(Shape({2, c, 6, 6}), rng);
        const OwnedTensor w = RandomTensor(Shape({m, c, k, k}), rng);
        const OwnedTensor b = RandomTensor(Shape({m}), rng);
        const auto make = [&](const OwnedTensor& xv, const OwnedTensor& wv) {
          KernelCase kc("FusedConv", 1);
          kc.Domain(std::string(kKilnDomain), 1);
          kc.Input(Block(xv, block)).ConstInput(wv).ConstInput(b);
          kc.Attr(StringAttr("activation", act))
              .Attr(IntsAttr("pads", {k / 2, k / 2, k / 2, k / 2}))
              .Attr(IntAttr("x_block", block))
              .Attr(IntAttr("y_block", block));
          return kc;
        };
        const std::string what = fmt::format("{} {} {}x{}", DataTypeName(dt), act, k, k);
        const OwnedTensor got = make(x, ToHalf(w, dt)).Run("cpu");
        ExpectZeroPadding(got, m, what);
        const bool bf16_compute = dt == DataType::kBFloat16 && CpuComputesBf16();
        const OwnedTensor expected =
            make(bf16_compute ? RoundedThroughHalf(x, dt) : x, RoundedThroughHalf(w, dt))
                .Run("ref");
        ExpectClose(got, expected, 1e-4, what);
      }
    }
  }
}

// The CPU kernel of `half` (a product with a half constant weight) against the reference:
// `rounded` is the same node with the weight pre-rounded to FP32, `rounded_a` with the activation
// input rounded to the half type too. Where the CPU computes BF16 in BF16, the kernel must match
// `rounded_a` (products of BF16 values are exact in FP32; only the summation order differs) and
// stay within BF16's rounding of A from `rounded`; else it must match `rounded` exactly as FP32.
void ExpectHalfProduct(const KernelCase& half, const KernelCase& rounded,
                       const KernelCase& rounded_a, DataType dt, const std::string& what) {
  const OwnedTensor got = half.Run("cpu");
  if (dt == DataType::kBFloat16 && CpuComputesBf16()) {
    ExpectClose(got, rounded_a.Run("ref"), 1e-4, what + " cpu vs BF16 A and B");
    ExpectClose(got, rounded.Run("ref"), 3e-2, what + " cpu vs FP32 A (BF16 rounding)");
    return;
  }
  ExpectClose(got, half.Run("ref"), 1e-4, what + " cpu vs ref");
  ExpectClose(got, rounded.Run("ref"), 1e-4, what + " cpu vs rounded FP32");
}

TEST(HalfWeightsKernelTest, FusedMatMulAndGemmMatchReference) {
  std::mt19937 rng(22);
  struct MM {
    std::vector<int64_t> a, b;
  };
  const std::vector<MM> mms = {{{1, 33}, {33, 31}},
                               {{7, 17}, {17, 9}},
                               {{2, 5, 64}, {64, 33}},
                               {{3, 1000}, {1000, 7}},
                               {{4, 128}, {128, 256}}};
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    for (const MM& mm : mms) {
      const OwnedTensor a = RandomTensor(Shape(std::span<const int64_t>(mm.a)), rng);
      const OwnedTensor b = RandomTensor(Shape(std::span<const int64_t>(mm.b)), rng);
      const OwnedTensor bias = RandomTensor(Shape({mm.b.back()}), rng);
      auto make = [&](const OwnedTensor& a_in, const OwnedTensor& weight) {
        KernelCase c("FusedMatMul", 1);
        c.Domain(std::string(kKilnDomain), 1);
        c.Input(a_in).ConstInput(weight).ConstInput(bias);
        c.Attr(StringAttr("activation", "Relu"));
        return c;
      };
      const KernelCase half = make(a, ToHalf(b, dt));
      const std::string what = fmt::format("FusedMatMul {} a [{}] b [{}]", DataTypeName(dt),
                                           fmt::join(mm.a, ","), fmt::join(mm.b, ","));
      EXPECT_EQ(half.PickedProvider(), "cpu") << what;
      ExpectHalfProduct(half, make(a, RoundedThroughHalf(b, dt)),
                        make(RoundedThroughHalf(a, dt), RoundedThroughHalf(b, dt)), dt, what);
    }
    struct G {
      int64_t m, k, n;
    };
    for (const G& g : {G{1, 33, 31}, G{7, 17, 9}, G{16, 300, 65}}) {
      for (int tb : {0, 1}) {
        const OwnedTensor a = RandomTensor(Shape({g.m, g.k}), rng);
        const OwnedTensor b = RandomTensor(tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, rng);
        const OwnedTensor c = RandomTensor(Shape({g.n}), rng);
        auto make = [&](const OwnedTensor& a_in, const OwnedTensor& weight) {
          KernelCase k("FusedGemm", 1);
          k.Domain(std::string(kKilnDomain), 1);
          k.Input(a_in).ConstInput(weight).ConstInput(c);
          k.Attr(IntAttr("transB", tb));
          return k;
        };
        const std::string what =
            fmt::format("FusedGemm {} m {} k {} n {} tb {}", DataTypeName(dt), g.m, g.k, g.n, tb);
        ExpectHalfProduct(make(a, ToHalf(b, dt)), make(a, RoundedThroughHalf(b, dt)),
                          make(RoundedThroughHalf(a, dt), RoundedThroughHalf(b, dt)), dt, what);
      }
    }
  }
}

// Bytes the kernel holds after one run on `c`.
int64_t PackedBytesAfterOneRun(const KernelCase& c) {
  Result<KernelCase::Prepared> p = c.Prepare("cpu");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return -1;
  Result<OwnedTensor> y = c.Execute(*p);
  EXPECT_TRUE(y.ok()) << y.status().ToString();
  return p->kernel->PackedWeightBytes();
}

TEST(HalfWeightsKernelTest, PackedWeightsTakeHalfTheBytes) {
  std::mt19937 rng(23);
  // A 3x3 convolution and a MatMul whose weights oneDNN repacks into a blocked format.
  const ConvShape s = {{1, 32, 14, 14}, 64, {3, 3}, 1, {}, {1, 1, 1, 1}};
  const OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(s.x)), rng);
  const OwnedTensor w = RandomTensor(Shape({64, 32, 3, 3}), rng);
  const OwnedTensor b = RandomTensor(Shape({64}), rng);
  const int64_t conv32 = PackedBytesAfterOneRun(FusedConvCase(s, x, w, b));
  ASSERT_GE(conv32, 64 * 32 * 9 * 4);
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    EXPECT_EQ(PackedBytesAfterOneRun(FusedConvCase(s, x, ToHalf(w, dt), b)) * 2, conv32)
        << DataTypeName(dt);
  }
  const OwnedTensor a = RandomTensor(Shape({8, 256}), rng);
  const OwnedTensor mb = RandomTensor(Shape({256, 512}), rng);
  auto mm = [&](const OwnedTensor& weight) {
    KernelCase c("FusedMatMul", 1);
    c.Domain(std::string(kKilnDomain), 1);
    c.Input(a).ConstInput(weight);
    return c;
  };
  const int64_t mm32 = PackedBytesAfterOneRun(mm(mb));
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    // Either both repack (half the bytes) or neither does (the plain constant is used: 0 bytes).
    EXPECT_EQ(PackedBytesAfterOneRun(mm(ToHalf(mb, dt))) * 2, mm32) << DataTypeName(dt);
  }
}

TEST(HalfWeightsKernelTest, ConcurrentComputeOnOneKernel) {
  // The first calls race to pack the 16-bit copy; every call widens into its own thread's scratch.
  std::mt19937 rng(25);
  const ConvShape s = {{2, 32, 14, 14}, 64, {3, 3}, 1, {}, {1, 1, 1, 1}};
  const OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(s.x)), rng);
  const OwnedTensor w = RandomTensor(Shape({64, 32, 3, 3}), rng);
  const OwnedTensor b = RandomTensor(Shape({64}), rng);
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    const KernelCase c = FusedConvCase(s, x, ToHalf(w, dt), b);
    // What the CPU kernel computes: X rounded to BF16 too where it computes in BF16.
    const bool native = dt == DataType::kBFloat16 && CpuComputesBf16();
    const OwnedTensor expected =
        FusedConvCase(s, native ? RoundedThroughHalf(x, dt) : x, RoundedThroughHalf(w, dt), b)
            .Run("ref");
    Result<KernelCase::Prepared> p = c.Prepare("cpu");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ExpectConcurrentRunsMatch(c, *p, expected);
    EXPECT_EQ(p->kernel->PackedWeightBytes(), 64 * 32 * 9 * 2) << DataTypeName(dt);
  }
}

TEST(HalfWeightsKernelTest, Bf16WeightsComputeInBf16WhereTheCpuCan) {
  // On a CPU with BF16 dot products a BFLOAT16 W runs oneDNN's BF16 convolution or matmul (the
  // input converted to BF16, no widening of W); a FLOAT16 W is widened and runs the FP32 one.
  if (!CpuComputesBf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(26);
  const ConvShape s = {{1, 32, 14, 14}, 64, {3, 3}, 1, {}, {1, 1, 1, 1}};
  const OwnedTensor x = RandomTensor(Shape(std::span<const int64_t>(s.x)), rng);
  const OwnedTensor w = RandomTensor(Shape({64, 32, 3, 3}), rng);
  const OwnedTensor b = RandomTensor(Shape({64}), rng);
  for (DataType dt : {DataType::kBFloat16, DataType::kFloat16}) {
    std::string log;
    Result<OwnedTensor> r = SecondRunVerbose(FusedConvCase(s, x, ToHalf(w, dt), b), &log);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const size_t conv = log.find("exec,cpu,convolution");
    ASSERT_NE(conv, std::string::npos) << log;
    const std::string line = log.substr(conv, log.find('\n', conv) - conv);
    if (dt == DataType::kBFloat16) {
      EXPECT_NE(line.find("src_bf16"), std::string::npos) << line;
      EXPECT_NE(line.find("wei_bf16"), std::string::npos) << line;
    } else {
      EXPECT_NE(line.find("src_f32"), std::string::npos) << line;
      EXPECT_NE(line.find("wei_f32"), std::string::npos) << line;
    }
    EXPECT_NE(line.find("dst_f32"), std::string::npos) << line;
  }
  // The same for a FusedMatMul's B.
  const OwnedTensor a = RandomTensor(Shape({16, 256}), rng);
  const OwnedTensor mb = RandomTensor(Shape({256, 128}), rng);
  for (DataType dt : {DataType::kBFloat16, DataType::kFloat16}) {
    KernelCase c("FusedMatMul", 1);
    c.Domain(std::string(kKilnDomain), 1).Input(a).ConstInput(ToHalf(mb, dt));
    std::string log;
    Result<OwnedTensor> r = SecondRunVerbose(c, &log);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const size_t mm = log.find("exec,cpu,matmul");
    ASSERT_NE(mm, std::string::npos) << log;
    const std::string line = log.substr(mm, log.find('\n', mm) - mm);
    const std::string type = dt == DataType::kBFloat16 ? "bf16" : "f32";
    EXPECT_NE(line.find("src_" + type), std::string::npos) << line;
    EXPECT_NE(line.find("wei_" + type), std::string::npos) << line;
    EXPECT_NE(line.find("dst_f32"), std::string::npos) << line;
  }
}

TEST(HalfWeightsKernelTest, PlainConvWithHalfWeightIsAnError) {
  // Only the ai.kiln ops take half weights; an ONNX Conv mixing FLOAT and FLOAT16 is rejected.
  std::mt19937 rng(24);
  KernelCase c("Conv", 13);
  c.Input(RandomTensor(Shape({1, 3, 7, 7}), rng))
      .ConstInput(ToHalf(RandomTensor(Shape({4, 3, 3, 3}), rng), DataType::kFloat16));
  Result<OwnedTensor> r = c.TryRun("cpu");
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace kiln::cpu
