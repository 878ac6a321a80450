// SPDX-License-Identifier: Apache-2.0
// Tests of the ggml block types (ggml_quants.h): dequantization of hand-packed blocks against
// values computed here from the layout description, the reference quantizers' rounding rules on
// hand-picked inputs, quantize -> dequantize error bounds, and the error paths.

#include "llm/ggml_quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"

namespace kiln::llm {
namespace {

uint16_t Half(float f) { return FloatToFloat16(f).bits; }

TEST(GgmlQuantsTest, BlockGeometry) {
  EXPECT_EQ(sizeof(BlockQ4_0), 18u);
  EXPECT_EQ(sizeof(BlockQ8_0), 34u);
  EXPECT_EQ(sizeof(BlockQ4_K), 144u);
  EXPECT_EQ(sizeof(BlockQ6_K), 210u);
  EXPECT_EQ(sizeof(BlockQ8_K), 292u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ8_K, bsums), 260u);
}

TEST(GgmlQuantsTest, DequantizeQ4_0HandBuilt) {
  uint8_t raw[18];
  const uint16_t d = 0x3800;  // 0.5
  std::memcpy(raw, &d, 2);
  for (int j = 0; j < 16; ++j) raw[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_0, raw, y, 32).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j)) << j;
  }
}

TEST(GgmlQuantsTest, DequantizeQ8_0HandBuilt) {
  uint8_t raw[2 * 34];
  for (int b = 0; b < 2; ++b) {
    const uint16_t d = b == 0 ? 0x3400 : 0xc000;  // 0.25, -2
    std::memcpy(raw + 34 * b, &d, 2);
    for (int j = 0; j < 32; ++j) raw[34 * b + 2 + j] = static_cast<uint8_t>(int8_t(j * 8 - 128));
  }
  float y[64];
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_0, raw, y, 64).ok());
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 0.25f * static_cast<float>(j * 8 - 128));
    EXPECT_EQ(y[32 + j], -2.0f * static_cast<float>(j * 8 - 128));
  }
}

// A Q4_K block packed here from the layout description: 6-bit scales / mins, bytes 0..3 hold
// sc[0..3] plus the top two bits of sc[4..7], bytes 4..7 m[0..3] plus the top bits of m[4..7],
// bytes 8..11 the low nibbles of sc[4..7] (low) and m[4..7] (high).
TEST(GgmlQuantsTest, DequantizeQ4_KHandBuilt) {
  const int sc[8] = {1, 2, 3, 63, 17, 32, 45, 5};
  const int mn[8] = {0, 1, 2, 3, 63, 20, 33, 7};
  auto code = [](int e) { return (e * 7 + 3) % 16; };
  uint8_t raw[144] = {};
  const uint16_t d = 0x3c00, dmin = 0x3800;  // 1.0, 0.5
  std::memcpy(raw, &d, 2);
  std::memcpy(raw + 2, &dmin, 2);
  uint8_t* s = raw + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  uint8_t* qs = raw + 16;
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * g + l] = static_cast<uint8_t>(code(64 * g + l) | (code(64 * g + 32 + l) << 4));
    }
  }
  float y[256];
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_K, raw, y, 256).ok());
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32;
    const double want = 1.0 * sc[j] * code(e) - 0.5 * mn[j];
    EXPECT_NEAR(y[e], want, 1e-4) << e;
  }
  // The unpacking helper agrees with the hand packing.
  uint8_t usc[8], um[8];
  UnpackQ4KScales(s, usc, um);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(usc[j], sc[j]);
    EXPECT_EQ(um[j], mn[j]);
  }
}

// A Q6_K block packed here: element 32q + l of half h (l < 32, q < 4) keeps its low nibble in
// ql[64h + l + 32(q & 1)] (bits 4(q >> 1)..), its high two bits in qh[32h + l] (bits 2q..).
TEST(GgmlQuantsTest, DequantizeQ6_KHandBuilt) {
  auto code = [](int e) { return (e * 13 + 5) % 64; };
  auto scale = [](int g) { return g * 9 - 70; };
  uint8_t raw[210] = {};
  uint8_t* ql = raw;
  uint8_t* qh = raw + 128;
  auto* scales = reinterpret_cast<int8_t*>(raw + 192);
  const uint16_t d = 0x3000;  // 0.125
  std::memcpy(raw + 208, &d, 2);
  for (int g = 0; g < 16; ++g) scales[g] = static_cast<int8_t>(scale(g));
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, q = (e % 128) / 32, l = e % 32;
    ql[64 * h + l + 32 * (q & 1)] |= static_cast<uint8_t>((code(e) & 15) << (4 * (q >> 1)));
    qh[32 * h + l] |= static_cast<uint8_t>((code(e) >> 4) << (2 * q));
  }
  float y[256];
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ6_K, raw, y, 256).ok());
  for (int e = 0; e < 256; ++e) {
    const double want = 0.125 * scale(e / 16) * (code(e) - 32);
    EXPECT_NEAR(y[e], want, 1e-4) << e;
  }
}

TEST(GgmlQuantsTest, DequantizeQ8_KAndFloats) {
  BlockQ8_K b{};
  b.d = -0.5f;
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<int8_t>(j - 128);
  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_K, &b, y.data(), 256).ok());
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], -0.5f * static_cast<float>(j - 128));

  const uint16_t h[4] = {0x3c00, 0xc000, 0x3555, 0x0001};  // 1, -2, 0.33325..., 2^-24
  float f[4];
  ASSERT_TRUE(DequantizeRow(GgmlType::kF16, h, f, 4).ok());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 0.333251953125f);
  EXPECT_EQ(f[3], std::ldexp(1.0f, -24));
  const uint16_t bf[3] = {0x3f80, 0xc040, 0x4049};  // 1, -3, 3.140625
  ASSERT_TRUE(DequantizeRow(GgmlType::kBF16, bf, f, 3).ok());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -3.0f);
  EXPECT_EQ(f[2], 3.140625f);
  const float src[2] = {1.5f, -7.25f};
  ASSERT_TRUE(DequantizeRow(GgmlType::kF32, src, f, 2).ok());
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -7.25f);
}

TEST(GgmlQuantsTest, QuantizeQ4_0Rounding) {
  // Values -8..7 (and repeats) times 0.25: the value of largest magnitude is -2, so d = -2 / -8
  // = 0.25 and each code is v / 0.25 + 8 exactly.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * static_cast<float>((j % 16) - 8);
  BlockQ4_0 b;
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ4_0, x, &b, 32).ok());
  EXPECT_EQ(b.d, Half(0.25f));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(b.qs[j] & 15, j) << j;
    EXPECT_EQ(b.qs[j] >> 4, j) << j;
  }
  // A positive maximum gives a negative d; the opposite extreme clamps to code 15.
  float z[32] = {};
  z[0] = 4.0f;   // d = -0.5
  z[1] = -4.0f;  // -4 / -0.5 + 8.5 = 16.5 -> 16 -> clamped 15
  z[2] = 0.74f;  // 0.74 / -0.5 + 8.5 = 7.02 -> 7
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ4_0, z, &b, 32).ok());
  EXPECT_EQ(b.d, Half(-0.5f));
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  EXPECT_EQ(b.qs[2] & 15, 7);
  EXPECT_EQ(b.qs[3] & 15, 8);
}

TEST(GgmlQuantsTest, QuantizeQ8_0AndQ8_KRounding) {
  // Q8_0: d = amax / 127 = 1, codes round half away from zero (roundf).
  float x[32] = {};
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  x[4] = -0.4f;
  BlockQ8_0 b;
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, x, &b, 32).ok());
  EXPECT_EQ(b.d, Half(1.0f));
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 4);
  EXPECT_EQ(b.qs[4], 0);
  // Q8_K: iscale = -127 / max (max the value of largest magnitude, 127 here), so d = -1; codes
  // round half to even.
  std::vector<float> xk(256, 0.0f);
  xk[0] = 127.0f;
  xk[1] = 2.5f;
  xk[2] = 3.5f;
  xk[17] = -1.0f;
  BlockQ8_K k;
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_K, xk.data(), &k, 256).ok());
  EXPECT_EQ(k.d, -1.0f);
  EXPECT_EQ(k.qs[0], -127);
  EXPECT_EQ(k.qs[1], -2);
  EXPECT_EQ(k.qs[2], -4);
  EXPECT_EQ(k.qs[17], 1);
  EXPECT_EQ(k.bsums[0], -127 - 2 - 4);
  EXPECT_EQ(k.bsums[1], 1);
  for (int g = 2; g < 16; ++g) EXPECT_EQ(k.bsums[g], 0);
}

std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<float> RoundTrip(GgmlType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(RowBytes(type, n));
  EXPECT_TRUE(QuantizeRow(type, x.data(), q.data(), n).ok());
  std::vector<float> y(x.size());
  EXPECT_TRUE(DequantizeRow(type, q.data(), y.data(), n).ok());
  return y;
}

// Per 32-block bounds: Q8_0 rounds to d = amax/127 (stored f16: |q| * |d - d16| <= 127 * d *
// 2^-11 more); Q4_0 to |d| = amax/8, with one step more at the clamped extreme.
TEST(GgmlQuantsTest, RoundTripQ8_0AndQ4_0) {
  const std::vector<float> x = RandomRow(32 * 64, 7);
  const std::vector<float> y8 = RoundTrip(GgmlType::kQ8_0, x);
  const std::vector<float> y4 = RoundTrip(GgmlType::kQ4_0, x);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float d8 = amax / 127, d4 = amax / 8;
    for (int j = 0; j < 32; ++j) {
      const size_t i = 32 * b + j;
      EXPECT_LE(std::fabs(x[i] - y8[i]), 0.5f * d8 + 127 * d8 / 2048 + 1e-6f) << i;
      EXPECT_LE(std::fabs(x[i] - y4[i]), d4 * 1.001f + 1e-6f) << i;
    }
  }
}

double RelativeRms(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

// K-quants: 16 levels over a 32-value sub-block of normal samples (range about 4 sigma) leave
// an RMS error near 0.27 / sqrt(12) = 0.08 sigma; 64 levels over 16 values about 0.02 sigma.
TEST(GgmlQuantsTest, RoundTripKQuants) {
  const std::vector<float> x = RandomRow(256 * 32, 11);
  EXPECT_LT(RelativeRms(x, RoundTrip(GgmlType::kQ4_K, x)), 0.10);
  EXPECT_LT(RelativeRms(x, RoundTrip(GgmlType::kQ6_K, x)), 0.03);
  const std::vector<float> y = RoundTrip(GgmlType::kQ8_K, x);
  for (size_t b = 0; b < x.size() / 256; ++b) {
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[256 * b + j]));
    for (int j = 0; j < 256; ++j) {
      EXPECT_LE(std::fabs(x[256 * b + j] - y[256 * b + j]), 0.5f * amax / 127 * 1.0001f);
    }
  }
  // All-zero and constant super-blocks stay exact.
  std::vector<float> z(512, 0.0f);
  for (int j = 256; j < 512; ++j) z[j] = 0.75f;
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_K}) {
    const std::vector<float> r = RoundTrip(t, z);
    for (int j = 0; j < 256; ++j) EXPECT_EQ(r[j], 0.0f) << static_cast<int>(t);
    for (int j = 256; j < 512; ++j) EXPECT_NEAR(r[j], 0.75f, 0.75f * 0.02f) << static_cast<int>(t);
  }
}

TEST(GgmlQuantsTest, RoundTripHalves) {
  const std::vector<float> x = RandomRow(1000, 3);
  const std::vector<float> h = RoundTrip(GgmlType::kF16, x);
  const std::vector<float> b = RoundTrip(GgmlType::kBF16, x);
  const std::vector<float> f = RoundTrip(GgmlType::kF32, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(x[i] - h[i]), std::fabs(x[i]) * 0x1p-11f + 0x1p-24f);
    EXPECT_LE(std::fabs(x[i] - b[i]), std::fabs(x[i]) * 0x1p-8f);
    EXPECT_EQ(x[i], f[i]);
  }
}

TEST(GgmlQuantsTest, DequantizeRowsPicksRows) {
  const int64_t cols = 64, rows = 5;
  const size_t row_bytes = RowBytes(GgmlType::kQ8_0, cols) + 6;  // padded rows
  std::vector<uint8_t> data(row_bytes * rows, 0xee);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> x = RandomRow(cols, 100 + static_cast<uint32_t>(r));
    ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, x.data(), data.data() + r * row_bytes, cols).ok());
  }
  std::vector<float> out(2 * cols), want(cols);
  ASSERT_TRUE(DequantizeRows(GgmlType::kQ8_0, data.data(), row_bytes, 2, 2, cols, out.data()).ok());
  for (int64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        DequantizeRow(GgmlType::kQ8_0, data.data() + (2 + i) * row_bytes, want.data(), cols).ok());
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(out[i * cols + c], want[c]);
  }
}

TEST(GgmlQuantsTest, Errors) {
  float x[64] = {};
  uint8_t buf[256] = {};
  Status s = DequantizeRow(GgmlType::kQ5_1, buf, x, 32);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q5_1"), std::string::npos) << s.message();
  s = QuantizeRow(GgmlType::kQ4_0, x, buf, 33);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("33"), std::string::npos) << s.message();
  EXPECT_FALSE(DequantizeRow(GgmlType::kQ4_K, buf, x, -256).ok());
  EXPECT_FALSE(QuantizeRow(GgmlType::kIQ2_XS, x, buf, 256).ok());
  s = DequantizeRows(GgmlType::kQ8_0, buf, 33, 0, 1, 32, x);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("34"), std::string::npos) << s.message();
  EXPECT_FALSE(DequantizeRows(GgmlType::kQ8_0, buf, 34, -1, 1, 32, x).ok());
  EXPECT_TRUE(DequantizeRow(GgmlType::kQ8_0, buf, x, 0).ok());
}

}  // namespace
}  // namespace kiln::llm
