// SPDX-License-Identifier: Apache-2.0
// The trace extension's JSON: the settings object, and updates with their errors.

#include "server/http/trace_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(TraceJson, SettingsAsTheReferenceServerWritesThem) {
  TraceSettings s;
  EXPECT_EQ(TraceSettingsJson(s),
            R"({"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1",)"
            R"("log_frequency":"0","trace_file":"","trace_mode":"triton"})");
}

TEST(TraceJson, UpdatesAndErrors) {
  TraceSettings s;
  ASSERT_TRUE(ApplyTraceSettingsRequest(
                  R"({"trace_level":["TIMESTAMPS"],"trace_rate":"10","trace_count":5,)"
                  R"("log_frequency":null,"trace_file":"/tmp/t.json","trace_mode":"triton"})",
                  &s)
                  .ok());
  EXPECT_EQ(s.level, TraceSettings::Level::kTimestamps);
  EXPECT_EQ(s.rate, 10);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(s.log_frequency, 0);
  EXPECT_EQ(s.file, "/tmp/t.json");
  ASSERT_TRUE(ApplyTraceSettingsRequest("", &s).ok());
  EXPECT_EQ(s.rate, 10);
  const TraceSettings before = s;
  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"trace_rate":"0"})", "'trace_rate'"},
           {R"({"trace_rate":"x"})", "'trace_rate'"},
           {R"({"trace_count":"-2"})", "'trace_count'"},
           {R"({"trace_level":["ALL"]})", "'trace_level'"},
           {R"({"trace_rate":"5","trace_mode":"opentelemetry"})", "cannot change at run time"},
           {R"({"trace_rate":{}})", "'trace_rate' must be a string"},
           {R"({"trace_rate":["1","2"]})", "takes one value"},
           {R"({"sampling":"1"})", "unknown trace setting 'sampling'"},
           {R"([1])", "JSON object"},
       }) {
    Status st = ApplyTraceSettingsRequest(body, &s);
    ASSERT_FALSE(st.ok()) << body;
    EXPECT_THAT(st.message(), HasSubstr(want)) << body;
    EXPECT_EQ(s.rate, before.rate) << body;  // nothing changed
  }
}

}  // namespace
}  // namespace kiln
