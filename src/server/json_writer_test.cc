// SPDX-License-Identifier: Apache-2.0
// JsonWriter: structure, escaping (every output parses with simdjson, which validates UTF-8),
// and number formatting (integers exact, floats shortest round-trip, non-finite as strings).
#include "server/json_writer.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace kiln {
namespace {

namespace dom = simdjson::dom;

// Parses `json` (must be valid) and returns the root.
::testing::AssertionResult Parses(const std::string& json) {
  dom::parser parser;
  dom::element root;
  const auto err = parser.parse(json).get(root);
  if (err != simdjson::SUCCESS) {
    return ::testing::AssertionFailure()
           << simdjson::error_message(err) << " in: " << json.substr(0, 200);
  }
  return ::testing::AssertionSuccess();
}

// Writes `s` as a one-element array, parses it back and returns the decoded string.
std::string RoundTripString(std::string_view s) {
  std::string json;
  JsonWriter w(&json);
  w.BeginArray();
  w.String(s);
  w.EndArray();
  dom::parser parser;
  dom::element root;
  EXPECT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  dom::array arr;
  EXPECT_EQ(root.get_array().get(arr), simdjson::SUCCESS);
  std::string_view out;
  EXPECT_EQ(arr.at(0).get_string().get(out), simdjson::SUCCESS);
  return std::string(out);
}

TEST(JsonWriterTest, NestedStructure) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyString("name", "kiln");
  w.Key("shape");
  w.BeginArray();
  w.Int(-1);
  w.Int(16);
  w.EndArray();
  w.Key("empty_array");
  w.BeginArray();
  w.EndArray();
  w.Key("empty_object");
  w.BeginObject();
  w.EndObject();
  w.Key("flags");
  w.BeginArray();
  w.Bool(true);
  w.Bool(false);
  w.Null();
  w.EndArray();
  w.KeyInt("n", 3);
  w.EndObject();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(out, R"({"name":"kiln","shape":[-1,16],"empty_array":[],"empty_object":{},)"
                 R"("flags":[true,false,null],"n":3})");
  EXPECT_TRUE(Parses(out));
}

TEST(JsonWriterTest, AppendsToExistingContent) {
  std::string out = "prefix:";
  JsonWriter w(&out);
  w.Int(7);
  EXPECT_EQ(out, "prefix:7");
}

TEST(JsonWriterTest, EscapesSpecialCharacters) {
  std::string out;
  AppendJsonString(&out, std::string_view("a\"b\\c\n\t\r\b\f\x01\x1f/\x7f", 14));
  EXPECT_EQ(out, R"("a\"b\\c\n\t\r\b\f\u0001\u001f/)"
                 "\x7f\"");
  EXPECT_TRUE(Parses("[" + out + "]"));
}

TEST(JsonWriterTest, EscapesNul) {
  const std::string s("x\0y", 3);
  std::string out;
  AppendJsonString(&out, s);
  EXPECT_EQ(out, R"("x\u0000y")");
  EXPECT_EQ(RoundTripString(s), s);
}

TEST(JsonWriterTest, ValidUtf8PassesThrough) {
  const std::string s = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF \xF4\x8F\xBF\xBF";
  std::string out;
  AppendJsonString(&out, s);
  EXPECT_EQ(out, "\"" + s + "\"");
  EXPECT_EQ(RoundTripString(s), s);
}

struct InvalidUtf8Case {
  std::string input;
  std::string expected;  // decoded value after the round trip
};

TEST(JsonWriterTest, InvalidUtf8IsReplaced) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  const InvalidUtf8Case cases[] = {
      {"\x80", r},  // lone continuation
      {"a\xBF"
       "b",
       "a" + r + "b"},                      // continuation inside ASCII
      {"\xC0\x80", r + r},                  // overlong NUL (C0 is never valid)
      {"\xC1\xBF", r + r},                  // overlong
      {"\xE0\x80\x80", r + r + r},          // overlong 3-byte: E0 needs A0..BF next
      {"\xED\xA0\x80", r + r + r},          // UTF-16 surrogate D800
      {"\xF4\x90\x80\x80", r + r + r + r},  // above U+10FFFF
      {"\xF5\x80", r + r},                  // F5 is never valid
      {"\xFF", r},
      {"\xE2\x82", r},         // truncated 3-byte at end: one maximal subpart
      {"\xE2\x82x", r + "x"},  // truncated before ASCII
      {"\xF0\x9F\x98", r},     // truncated 4-byte
      {"\xC3", r},             // truncated 2-byte
      {"ok\xC3\xA9\xC3", "ok\xC3\xA9" + r},
  };
  for (const InvalidUtf8Case& c : cases) {
    EXPECT_EQ(RoundTripString(c.input), c.expected) << ::testing::PrintToString(c.input);
  }
}

TEST(JsonWriterTest, RandomBytesAlwaysGiveValidJson) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xFF);
    std::string out = "[";
    AppendJsonString(&out, s);
    out += "]";
    ASSERT_TRUE(Parses(out)) << ::testing::PrintToString(s);
  }
}

TEST(JsonWriterTest, IntegersExact) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Int(0);
  w.Int(std::numeric_limits<int64_t>::min());
  w.Int(std::numeric_limits<int64_t>::max());
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.EndArray();
  EXPECT_EQ(out, "[0,-9223372036854775808,9223372036854775807,18446744073709551615]");
  dom::parser parser;
  dom::element root;
  ASSERT_EQ(parser.parse(out).get(root), simdjson::SUCCESS);
  uint64_t big = 0;
  ASSERT_EQ(root.at(3).get_uint64().get(big), simdjson::SUCCESS);
  EXPECT_EQ(big, std::numeric_limits<uint64_t>::max());
  int64_t small = 0;
  ASSERT_EQ(root.at(1).get_int64().get(small), simdjson::SUCCESS);
  EXPECT_EQ(small, std::numeric_limits<int64_t>::min());
}

TEST(JsonWriterTest, FloatFormatting) {
  struct Case {
    float value;
    const char* text;
  };
  const Case cases[] = {
      {1.0f, "1.0"},     {-0.0f, "-0.0"},
      {0.1f, "0.1"},     {2.5f, "2.5"},
      {1e21f, "1e+21"},  {3.4028235e38f, "3.4028235e+38"},
      {1e-45f, "1e-45"}, {16777216.0f, "16777216.0"},
  };
  for (const Case& c : cases) {
    std::string out;
    AppendJsonFloat(&out, c.value);
    EXPECT_EQ(out, c.text);
  }
  std::string out;
  AppendJsonDouble(&out, 0.1);
  EXPECT_EQ(out, "0.1");
}

TEST(JsonWriterTest, NonFiniteAsStrings) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Float(std::numeric_limits<float>::quiet_NaN());
  w.Double(std::numeric_limits<double>::infinity());
  w.Double(-std::numeric_limits<double>::infinity());
  w.EndArray();
  EXPECT_EQ(out, R"(["NaN","Infinity","-Infinity"])");
  EXPECT_TRUE(Parses(out));
}

// Shortest representation must read back to the identical bits.
TEST(JsonWriterTest, FloatAndDoubleRoundTrip) {
  std::mt19937_64 rng(42);
  dom::parser parser;
  for (int iter = 0; iter < 20000; ++iter) {
    const uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    float f;
    const auto fbits = static_cast<uint32_t>(bits >> 32);
    std::memcpy(&f, &fbits, sizeof(f));
    if (!std::isfinite(d) || !std::isfinite(f)) continue;
    std::string out = "[";
    AppendJsonDouble(&out, d);
    out += ",";
    AppendJsonFloat(&out, f);
    out += "]";
    dom::element root;
    ASSERT_EQ(parser.parse(out).get(root), simdjson::SUCCESS) << out;
    double d2 = 0, f2 = 0;
    ASSERT_EQ(root.at(0).get_double().get(d2), simdjson::SUCCESS) << out;
    ASSERT_EQ(root.at(1).get_double().get(f2), simdjson::SUCCESS) << out;
    EXPECT_EQ(std::bit_cast<uint64_t>(d2), std::bit_cast<uint64_t>(d)) << out;  // same bits
    EXPECT_EQ(static_cast<float>(f2), f) << out;
  }
}

TEST(JsonWriterTest, ErrorBody) {
  EXPECT_EQ(JsonErrorBody("Not Found"), R"({"error":"Not Found"})");
  EXPECT_EQ(JsonErrorBody("bad \"x\"\n"), R"({"error":"bad \"x\"\n"})");
  EXPECT_TRUE(Parses(JsonErrorBody("\xFF\xFE")));
}

}  // namespace
}  // namespace kiln
