// SPDX-License-Identifier: Apache-2.0
#include "server/http/logging_json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace kiln {
namespace {

using K = LogSettingUpdate::Kind;

TEST(LoggingJsonTest, DecodesEachValueAsSent) {
  Result<std::vector<LogSettingUpdate>> r = ParseLogSettingsRequest(
      R"({"log_info": false, "log_verbose_level": 3, "log_format": "ISO8601", "log_file": null,
          "a": 1.5, "b": [1], "c": {}, "d": -2, "e": 18446744073709551615})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 9u);
  const auto& u = *r;
  EXPECT_EQ(u[0].name, "log_info");
  EXPECT_EQ(u[0].kind, K::kBool);
  EXPECT_FALSE(u[0].bool_value);
  EXPECT_EQ(u[1].kind, K::kInteger);
  EXPECT_EQ(u[1].int_value, 3);
  EXPECT_EQ(u[2].kind, K::kString);
  EXPECT_EQ(u[2].string_value, "ISO8601");
  EXPECT_EQ(u[3].kind, K::kNull);
  EXPECT_EQ(u[4].kind, K::kOther);
  EXPECT_EQ(u[5].kind, K::kOther);
  EXPECT_EQ(u[5].type_name, "an array");
  EXPECT_EQ(u[6].type_name, "an object");
  EXPECT_EQ(u[7].kind, K::kInteger);
  EXPECT_EQ(u[7].int_value, -2);
  EXPECT_EQ(u[8].kind, K::kInteger);
  EXPECT_TRUE(u[8].int_overflow);
}

TEST(LoggingJsonTest, EmptyBodyIsNoUpdateAndBadBodiesAreRefused) {
  Result<std::vector<LogSettingUpdate>> empty = ParseLogSettingsRequest(" \n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  for (const char* body : {"[]", "{", "{\"log_info\": tru}", "\"x\"", "1"}) {
    Result<std::vector<LogSettingUpdate>> r = ParseLogSettingsRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.status().message().find("log settings request"), std::string::npos);
  }
}

TEST(LoggingJsonTest, WritesEverySettingWithItsJsonType) {
  LogSettings s;
  s.file = "x\"y";
  s.error = false;
  s.verbose_level = 7;
  const std::string json = LogSettingsJson(s);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(root["log_file"]), "x\"y");
  EXPECT_TRUE(bool(root["log_info"]));
  EXPECT_TRUE(bool(root["log_warning"]));
  EXPECT_FALSE(bool(root["log_error"]));
  EXPECT_EQ(uint64_t(root["log_verbose_level"]), 7u);
  EXPECT_EQ(std::string_view(root["log_format"]), "default");
  EXPECT_EQ(root.get_object().size(), 6u);
}

}  // namespace
}  // namespace kiln
