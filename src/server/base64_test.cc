// SPDX-License-Identifier: Apache-2.0
#include "server/base64.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln {
namespace {

// An independent encoder written from RFC 4648's description (bit groups of 6 over the
// concatenated bytes), for round trips.
std::string Encode(std::string_view bytes, bool pad) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bits;
  for (unsigned char c : bytes) {
    for (int b = 7; b >= 0; --b) bits.push_back((c >> b) & 1 ? '1' : '0');
  }
  while (bits.size() % 6 != 0) bits.push_back('0');
  std::string out;
  for (size_t i = 0; i < bits.size(); i += 6)
    out.push_back(kAlphabet[std::stoi(bits.substr(i, 6), nullptr, 2)]);
  while (pad && out.size() % 4 != 0) out.push_back('=');
  return out;
}

TEST(Base64Test, Rfc4648TestVectors) {
  // RFC 4648 section 10.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    Result<std::string> r = DecodeBase64(encoded, "v");
    ASSERT_TRUE(r.ok()) << encoded << ": " << r.status().message();
    EXPECT_EQ(*r, plain) << encoded;
  }
}

TEST(Base64Test, RandomBytesRoundTripPaddedAndUnpadded) {
  std::mt19937 rng(5);
  for (int n = 0; n < 200; ++n) {
    std::string bytes(static_cast<size_t>(n % 37), '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (bool pad : {true, false}) {
      Result<std::string> r = DecodeBase64(Encode(bytes, pad), "v");
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(*r, bytes);
    }
  }
}

TEST(Base64Test, MalformedInputIsRefusedNamingWhatAndWhere) {
  const std::pair<const char*, const char*> bad[] = {
      {"Zm9v!", "'!' at offset 4"},
      {"Zm 9v", "' ' at offset 2"},
      {"Zm9v\n", "0x0a at offset 4"},
      {"Zm-_", "'-' at offset 2"},
      {"Z", "final group of one"},
      {"Zm9vY", "final group of one"},
      {"Zg=", "padding"},
      {"Zg===", "'=' at offset 2"},
      {"Z=g=", "'=' at offset 1"},
      {"Zh==", "non-zero unused bits"},
      {"Zm9=", "non-zero unused bits"},
  };
  for (const auto& [text, needle] : bad) {
    Result<std::string> r = DecodeBase64(text, "parameter 'file:1/model.onnx'");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("parameter 'file:1/model.onnx': invalid base64"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << text << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace kiln
