// SPDX-License-Identifier: Apache-2.0
#include "server/log_settings.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

// Restores the settings in force around each test (they are process-wide).
class LogSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = GetLogSettings(); }
  void TearDown() override { ASSERT_TRUE(ApplyLogSettings(saved_).ok()); }
  LogSettings saved_;
};

LogSettingUpdate Bool(std::string name, bool v) {
  LogSettingUpdate u;
  u.name = std::move(name);
  u.kind = LogSettingUpdate::Kind::kBool;
  u.bool_value = v;
  return u;
}
LogSettingUpdate Int(std::string name, int64_t v) {
  LogSettingUpdate u;
  u.name = std::move(name);
  u.kind = LogSettingUpdate::Kind::kInteger;
  u.int_value = v;
  return u;
}
LogSettingUpdate Str(std::string name, std::string v) {
  LogSettingUpdate u;
  u.name = std::move(name);
  u.kind = LogSettingUpdate::Kind::kString;
  u.string_value = std::move(v);
  return u;
}
LogSettingUpdate Null(std::string name) {
  LogSettingUpdate u;
  u.name = std::move(name);
  return u;
}

TEST_F(LogSettingsTest, AppliesEverySetting) {
  std::vector<LogSettingUpdate> updates = {
      Bool("log_info", false),     Bool("log_warning", false),   Bool("log_error", false),
      Int("log_verbose_level", 2), Str("log_format", "ISO8601"), Str("log_file", "")};
  ASSERT_TRUE(UpdateLogSettings(updates).ok());
  const LogSettings s = GetLogSettings();
  EXPECT_FALSE(s.info);
  EXPECT_FALSE(s.warning);
  EXPECT_FALSE(s.error);
  EXPECT_EQ(s.verbose_level, 2u);
  EXPECT_EQ(s.format, LogFormat::kIso8601);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::trace);
  ASSERT_TRUE(UpdateLogSettings(std::vector{Int("log_verbose_level", 0)}).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST_F(LogSettingsTest, NullLeavesTheSettingAlone) {
  ASSERT_TRUE(UpdateLogSettings(std::vector{Bool("log_warning", false)}).ok());
  ASSERT_TRUE(UpdateLogSettings(std::vector{Null("log_warning"), Null("log_file")}).ok());
  EXPECT_FALSE(GetLogSettings().warning);
}

TEST_F(LogSettingsTest, RefusalsNameTheSettingAndChangeNothing) {
  struct Case {
    LogSettingUpdate update;
    StatusCode code;
    std::string needle;
  };
  LogSettingUpdate overflow = Int("log_verbose_level", 0);
  overflow.int_overflow = true;
  LogSettingUpdate array;
  array.name = "log_info";
  array.kind = LogSettingUpdate::Kind::kOther;
  array.type_name = "an array";
  const std::vector<Case> cases = {
      {Str("log_info", "true"), StatusCode::kInvalidArgument, "'log_info' must be a boolean"},
      {Int("log_error", 1), StatusCode::kInvalidArgument, "'log_error' must be a boolean"},
      {array, StatusCode::kInvalidArgument, "got an array"},
      {Int("log_verbose_level", -1), StatusCode::kInvalidArgument, "'log_verbose_level'"},
      {overflow, StatusCode::kInvalidArgument, "'log_verbose_level'"},
      {Int("log_verbose_level", 1LL << 33), StatusCode::kInvalidArgument, "between 0 and"},
      {Bool("log_verbose_level", true), StatusCode::kInvalidArgument, "non-negative integer"},
      {Str("log_format", "iso"), StatusCode::kInvalidArgument, "\"iso\""},
      {Str("log_file", "/tmp/kiln.log"), StatusCode::kUnimplemented, "--log-file"},
      {Bool("log_warnings", true), StatusCode::kInvalidArgument, "unknown log setting"},
  };
  for (const Case& c : cases) {
    // A valid update first in the same request: it must not take effect either.
    const std::vector<LogSettingUpdate> updates = {Bool("log_info", false), c.update};
    const Status st = UpdateLogSettings(updates);
    EXPECT_EQ(st.code(), c.code) << c.update.name << ": " << st.message();
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << st.message();
    EXPECT_TRUE(GetLogSettings().info) << c.update.name;
  }
}

TEST_F(LogSettingsTest, FieldsListEverySettingInProtocolOrder) {
  LogSettings s;
  s.file = "f.log";
  s.warning = false;
  s.verbose_level = 3;
  s.format = LogFormat::kIso8601;
  const std::vector<LogSettingField> f = LogSettingFields(s);
  ASSERT_EQ(f.size(), 6u);
  EXPECT_STREQ(f[0].name, "log_file");
  EXPECT_EQ(f[0].string_value, "f.log");
  EXPECT_STREQ(f[2].name, "log_warning");
  EXPECT_FALSE(f[2].bool_value);
  EXPECT_STREQ(f[4].name, "log_verbose_level");
  EXPECT_EQ(f[4].uint_value, 3u);
  EXPECT_STREQ(f[5].name, "log_format");
  EXPECT_EQ(f[5].string_value, "ISO8601");
}

}  // namespace
}  // namespace kiln
