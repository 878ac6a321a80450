// SPDX-License-Identifier: Apache-2.0
#include "server/raw_tensor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

namespace kiln {
namespace {

std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

TEST(RawTensorTest, Fp32BorrowsAlignedData) {
  auto owner = std::make_shared<std::string>();
  // 1.0f, -2.5f little-endian, written byte by byte.
  *owner = std::string("\x00\x00\x80\x3f\x00\x00\x20\xc0", 8);
  Result<OwnedTensor> t = DecodeRawTensor("x", DataType::kFloat32, Shape{2}, *owner, owner);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->raw_data(), owner->data());  // no copy (std::string data is 16-byte aligned)
  EXPECT_EQ(t->data<float>()[0], 1.0f);
  EXPECT_EQ(t->data<float>()[1], -2.5f);
  const long uses = owner.use_count();
  EXPECT_GE(uses, 2);  // the tensor keeps the body alive
}

TEST(RawTensorTest, MisalignedDataIsCopied) {
  auto owner = std::make_shared<std::string>(std::string("\x01\x02\x00\x03\x00", 5));
  Result<OwnedTensor> t =
      DecodeRawTensor("x", DataType::kInt16, Shape{2}, std::string_view(*owner).substr(1), owner);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(t->raw_data(), owner->data() + 1);
  EXPECT_EQ(t->data<int16_t>()[0], 2);
  EXPECT_EQ(t->data<int16_t>()[1], 3);
}

TEST(RawTensorTest, SizeMustMatchShape) {
  Result<OwnedTensor> t =
      DecodeRawTensor("in0", DataType::kFloat32, Shape{3}, std::string(8, '\0'), nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("in0"), std::string::npos);
  EXPECT_NE(t.status().message().find("12 bytes"), std::string::npos);
}

TEST(RawTensorTest, BoolBytesMustBeZeroOrOne) {
  EXPECT_TRUE(
      DecodeRawTensor("b", DataType::kBool, Shape{2}, std::string("\x00\x01", 2), nullptr).ok());
  Result<OwnedTensor> t =
      DecodeRawTensor("b", DataType::kBool, Shape{2}, std::string("\x00\x02", 2), nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("BOOL element 1"), std::string::npos);
}

TEST(RawTensorTest, BytesElements) {
  const std::string data = Le32(3) + "abc" + Le32(0) + Le32(2) + std::string("\xff\x00", 2);
  Result<OwnedTensor> t = DecodeRawTensor("s", DataType::kBytes, Shape{3}, data, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->data<std::string>()[0], "abc");
  EXPECT_EQ(t->data<std::string>()[1], "");
  EXPECT_EQ(t->data<std::string>()[2], std::string("\xff\x00", 2));
  std::string back;
  ASSERT_TRUE(AppendRawTensor(t->view(), &back).ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ(RawTensorBytes(t->view()), data.size());
}

TEST(RawTensorTest, BadBytesFraming) {
  struct Case {
    std::string data;
    int64_t count;
    std::string message;
  };
  const Case cases[] = {
      {Le32(5) + "abc", 1, "declares 5 bytes but only 3 remain"},
      {Le32(1) + "abc" + std::string("\x01", 1), 2, "truncated length prefix"},
      {Le32(1) + "ab", 1, "1 bytes left"},
      {Le32(0), 2, "cannot hold 2 elements"},
      {Le32(0xffffffffu), 1, "declares 4294967295 bytes"},
      {"", 1000000000, "cannot hold"},
  };
  for (const Case& c : cases) {
    Result<OwnedTensor> t = DecodeRawTensor("s", DataType::kBytes, Shape{c.count}, c.data, nullptr);
    ASSERT_FALSE(t.ok()) << c.message;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.message), std::string::npos) << t.status().message();
  }
}

TEST(RawTensorTest, AppendFixedSize) {
  Result<OwnedTensor> t = OwnedTensor::Allocate(DataType::kUint16, Shape{2});
  ASSERT_TRUE(t.ok());
  t->data<uint16_t>()[0] = 0x0102;
  t->data<uint16_t>()[1] = 0xa0b0;
  std::string out = "h";
  ASSERT_TRUE(AppendRawTensor(t->view(), &out).ok());
  EXPECT_EQ(out, std::string("h\x02\x01\xb0\xa0", 5));
}

}  // namespace
}  // namespace kiln
