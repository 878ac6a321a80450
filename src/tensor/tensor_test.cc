// SPDX-License-Identifier: Apache-2.0
#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace kiln {
namespace {

TEST(DataTypeTest, EveryProtocolNameRoundTrips) {
  const char* names[] = {"BOOL",  "UINT8", "UINT16", "UINT32", "UINT64", "INT8",  "INT16",
                         "INT32", "INT64", "FP16",   "FP32",   "FP64",   "BYTES", "BF16"};
  for (const char* name : names) {
    std::optional<DataType> dt = DataTypeFromName(name);
    ASSERT_TRUE(dt.has_value()) << name;
    EXPECT_EQ(DataTypeName(*dt), name);
  }
  EXPECT_FALSE(DataTypeFromName("FLOAT32").has_value());
  EXPECT_FALSE(DataTypeFromName("fp32").has_value());  // the protocol is case-sensitive
  EXPECT_FALSE(DataTypeFromName("").has_value());
}

TEST(DataTypeTest, ConfigNamesMatchConfigEnumNumbers) {
  // ModelConfig DataType numbering: TYPE_BOOL=1 ... TYPE_STRING=13, TYPE_BF16=14.
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_BOOL")), 1);
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_UINT64")), 5);
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_INT64")), 9);
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_FP16")), 10);
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_FP32")), 11);
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_STRING")), 13);
  EXPECT_EQ(static_cast<int>(*DataTypeFromConfigName("TYPE_BF16")), 14);
  EXPECT_EQ(DataTypeName(*DataTypeFromConfigName("TYPE_STRING")), "BYTES");
  EXPECT_FALSE(DataTypeFromConfigName("TYPE_BYTES").has_value());
}

TEST(DataTypeTest, Sizes) {
  EXPECT_EQ(DataTypeSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kUint64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kInvalid), 0u);
  EXPECT_TRUE(IsFloatingPoint(DataType::kBFloat16));
  EXPECT_FALSE(IsFloatingPoint(DataType::kInt32));
  EXPECT_TRUE(IsInteger(DataType::kUint16));
  EXPECT_FALSE(IsInteger(DataType::kBool));
}

TEST(Float16Test, KnownBitPatterns) {
  EXPECT_EQ(FloatToFloat16(1.0f).bits, 0x3c00);
  EXPECT_EQ(FloatToFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(FloatToFloat16(65504.0f).bits, 0x7bff);                // max finite
  EXPECT_EQ(FloatToFloat16(1e6f).bits, 0x7c00);                    // overflow to inf
  EXPECT_EQ(FloatToFloat16(5.9604644775390625e-8f).bits, 0x0001);  // min subnormal
  EXPECT_EQ(FloatToFloat16(0.0f).bits, 0x0000);
  EXPECT_TRUE(std::isnan(Float16ToFloat(FloatToFloat16(std::nanf("")))));
  EXPECT_EQ(Float16ToFloat({0x3555}), 0.333251953125f);
}

TEST(Float16Test, RoundTripEveryHalfValue) {
  // Every finite half converts to float and back to the same bits.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const Float16 h{static_cast<uint16_t>(b)};
    if (((b >> 10) & 0x1f) == 0x1f) continue;  // inf/nan
    EXPECT_EQ(FloatToFloat16(Float16ToFloat(h)).bits, h.bits) << std::hex << b;
  }
}

TEST(Float16Test, RoundsToNearest) {
  // Independent check: the chosen half is the nearest of its neighbours.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-60000.f, 60000.f);
  for (int i = 0; i < 20000; ++i) {
    const float f = dist(rng) * (i % 2 ? 1e-4f : 1.f);
    const Float16 h = FloatToFloat16(f);
    const float got = Float16ToFloat(h);
    const float up = Float16ToFloat({static_cast<uint16_t>(h.bits + 1)});
    const float down = Float16ToFloat({static_cast<uint16_t>(h.bits - 1)});
    EXPECT_LE(std::fabs(got - f), std::fabs(up - f)) << f;
    EXPECT_LE(std::fabs(got - f), std::fabs(down - f)) << f;
  }
}

TEST(BFloat16Test, TruncatesWithRounding) {
  EXPECT_EQ(FloatToBFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16ToFloat({0x4049}), 3.140625f);
  EXPECT_EQ(FloatToBFloat16(3.14159f).bits, 0x4049);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(ShapeTest, Basics) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.NumElements(), 24);
  EXPECT_EQ(s.ToString(), "[2,3,4]");
  EXPECT_EQ(Shape().NumElements(), 1);
  EXPECT_EQ(Shape().ToString(), "[]");
  EXPECT_EQ((Shape{0, 5}).NumElements(), 0);
  EXPECT_EQ((Shape{2, 3}), (Shape{2, 3}));
  EXPECT_FALSE((Shape{2, 3}) == (Shape{3, 2}));
  EXPECT_FALSE((Shape{2, 3}) == (Shape{2, 3, 1}));
}

TEST(ShapeTest, CreateRejectsBadInput) {
  const int64_t neg[] = {2, -1};
  EXPECT_EQ(Shape::Create(neg).status().code(), StatusCode::kInvalidArgument);
  const int64_t deep[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_FALSE(Shape::Create(deep).ok());
  const int64_t huge[] = {1ll << 40, 1ll << 40};
  Result<Shape> r = Shape::Create(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("64 bits"), std::string::npos);
  const int64_t zero_and_huge[] = {0, 1ll << 62, 1ll << 62};
  EXPECT_TRUE(Shape::Create(zero_and_huge).ok());
  const int64_t ok[] = {4, 5};
  EXPECT_EQ(Shape::Create(ok)->NumElements(), 20);
}

TEST(TensorTest, ViewStridesAndReshape) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  Tensor t(DataType::kFloat32, Shape{2, 3}, data);
  EXPECT_EQ(t.stride_bytes(0), 12);
  EXPECT_EQ(t.stride_bytes(1), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size_bytes(), 24u);
  EXPECT_TRUE(t.device().is_cpu());
  Result<Tensor> r = t.Reshaped(Shape{3, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<float>()[5], 5.f);
  EXPECT_FALSE(t.Reshaped(Shape{4}).ok());
  EXPECT_FALSE(Tensor().valid());
}

TEST(OwnedTensorTest, AllocateZeroFillsAndAligns) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kInt64, Shape{3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % kDefaultAlignment, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t->data<int64_t>()[i], 0);
  Result<OwnedTensor> empty = OwnedTensor::Allocate(DataType::kFloat32, Shape{0, 4});
  ASSERT_TRUE(empty.ok());
  EXPECT_NE(empty->raw_data(), nullptr);
}

TEST(OwnedTensorTest, BytesElementsAreStrings) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kBytes, Shape{2});
  ASSERT_TRUE(t.ok());
  t->data<std::string>()[0] = "hello";
  t->data<std::string>()[1] = std::string(1000, 'x');  // heap-allocated string, freed on drop
  Result<OwnedTensor> c = OwnedTensor::CopyOf(t->view());
  ASSERT_TRUE(c.ok());
  t = OwnedTensor();
  EXPECT_EQ(c->data<std::string>()[0], "hello");
  EXPECT_EQ(c->data<std::string>()[1].size(), 1000u);
}

TEST(OwnedTensorTest, CopyIsDeepAndReshapeKeepsData) {
  float data[4] = {1, 2, 3, 4};
  Result<OwnedTensor> c = OwnedTensor::CopyOf(Tensor(DataType::kFloat32, Shape{4}, data));
  ASSERT_TRUE(c.ok());
  data[0] = 100;
  EXPECT_EQ(c->data<float>()[0], 1.f);
  ASSERT_TRUE(c->Reshape(Shape{2, 2}).ok());
  EXPECT_EQ(c->shape(), (Shape{2, 2}));
  EXPECT_EQ(c->data<float>()[3], 4.f);
  EXPECT_FALSE(c->Reshape(Shape{3}).ok());
}

TEST(HostAllocatorTest, TooLargeFailsWithStatus) {
  Result<void*> r = HostAllocator().Allocate(std::numeric_limits<size_t>::max() - 8, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kiln
