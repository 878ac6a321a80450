// SPDX-License-Identifier: Apache-2.0
#include "server/http/compression.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace kiln {
namespace {

// Independent reference: zlib's one-shot compress() writes the zlib (RFC 1950) format.
std::string ZlibCompress(const std::string& in) {
  uLongf n = compressBound(static_cast<uLong>(in.size()));
  std::string out(n, '\0');
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(out.data()), &n,
                     reinterpret_cast<const Bytef*>(in.data()), static_cast<uLong>(in.size())),
            Z_OK);
  out.resize(n);
  return out;
}

TEST(CompressionTest, ParseContentEncoding) {
  EXPECT_EQ(ParseContentEncoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("identity"), ContentCoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding(" GZIP "), ContentCoding::kGzip);
  EXPECT_EQ(ParseContentEncoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ParseContentEncoding("br"), std::nullopt);
  EXPECT_EQ(ParseContentEncoding("gzip, br"), std::nullopt);
}

TEST(CompressionTest, ChooseResponseCoding) {
  EXPECT_EQ(ChooseResponseCoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("gzip"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ChooseResponseCoding("gzip, deflate"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("gzip;q=0.5, deflate"), ContentCoding::kDeflate);
  EXPECT_EQ(ChooseResponseCoding("gzip;q=0, identity"), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("br"), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("*"), ContentCoding::kGzip);
  EXPECT_EQ(ChooseResponseCoding("identity;q=1, deflate;q=0.9"), ContentCoding::kIdentity);
  EXPECT_EQ(ChooseResponseCoding("gzip;q=abc, deflate;q=0.1"), ContentCoding::kDeflate);
}

TEST(CompressionTest, RoundTripsBothCodings) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i * 7919 % 1000) + ",";
  for (ContentCoding c : {ContentCoding::kGzip, ContentCoding::kDeflate}) {
    Result<std::string> z = Compress(text, c);
    ASSERT_TRUE(z.ok());
    EXPECT_LT(z->size(), text.size());
    Result<std::string> back = Decompress(*z, c, text.size(), 64);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, text);
    EXPECT_GE(back->capacity(), text.size() + 64);
  }
  // gzip magic bytes.
  Result<std::string> gz = Compress("x", ContentCoding::kGzip);
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(static_cast<unsigned char>((*gz)[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[1]), 0x8b);
}

TEST(CompressionTest, DecompressesIndependentZlibData) {
  const std::string text = "{\"inputs\":[]}";
  Result<std::string> back = Decompress(ZlibCompress(text), ContentCoding::kDeflate, 1000);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

TEST(CompressionTest, ZipBombStopsAtTheLimit) {
  const std::string zeros(64 << 20, '\0');  // 64 MiB of zeros compress to ~64 KiB
  const std::string bomb = ZlibCompress(zeros);
  Result<std::string> r = Decompress(bomb, ContentCoding::kDeflate, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("exceeds the limit of 1048576 bytes"), std::string::npos);
  // Exactly at the limit is fine.
  EXPECT_TRUE(Decompress(ZlibCompress(std::string(1000, 'a')), ContentCoding::kDeflate, 1000).ok());
  EXPECT_FALSE(
      Decompress(ZlibCompress(std::string(1001, 'a')), ContentCoding::kDeflate, 1000).ok());
}

TEST(CompressionTest, CorruptTruncatedAndTrailingData) {
  const std::string z = ZlibCompress("hello hello hello");
  Result<std::string> truncated =
      Decompress(z.substr(0, z.size() - 3), ContentCoding::kDeflate, 100);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("not valid deflate data"), std::string::npos);
  Result<std::string> trailing = Decompress(z + "xy", ContentCoding::kDeflate, 100);
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.status().message().find("2 bytes after the end"), std::string::npos);
  Result<std::string> garbage = Decompress("not compressed", ContentCoding::kGzip, 100);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("not valid gzip data"), std::string::npos);
  EXPECT_FALSE(Decompress("", ContentCoding::kGzip, 100).ok());
  // deflate data declared as gzip is refused (no auto-detection of the wrapper).
  EXPECT_FALSE(Decompress(z, ContentCoding::kGzip, 100).ok());
}

}  // namespace
}  // namespace kiln
