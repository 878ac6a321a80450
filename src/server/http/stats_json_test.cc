// SPDX-License-Identifier: Apache-2.0
// Statistics JSON (KSERVE-V2.md 1.6): the exact document for known numbers, and that every
// member perf_analyzer reads is present, typed as it expects (unsigned integers, version as a
// string), with the three compute counts equal.
#include "server/http/stats_json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace kiln {
namespace {

namespace dom = simdjson::dom;

ModelStatistics Sample() {
  ModelStatistics s;
  s.last_inference_ms = 1700000000123;
  s.inference_count = 9;
  s.execution_count = 2;
  s.inference.success = {3, 3000};
  s.inference.fail = {1, 10};
  s.inference.queue = {3, 300};
  s.inference.compute_input = {3, 30};
  s.inference.compute_infer = {3, 2400};
  s.inference.compute_output = {3, 60};
  s.batches[1] = {{1, 5}, {1, 700}, {1, 9}};
  s.batches[8] = {{1, 20}, {1, 1000}, {1, 21}};
  return s;
}

TEST(StatsJsonTest, ExactDocument) {
  const std::vector<ModelStatisticsEntry> entries = {{"add_sub", 1, Sample()}};
  EXPECT_EQ(ModelStatisticsJson(entries),
            R"({"model_stats":[{"name":"add_sub","version":"1","last_inference":1700000000123,)"
            R"("inference_count":9,"execution_count":2,"inference_stats":{)"
            R"("success":{"count":3,"ns":3000},"fail":{"count":1,"ns":10},)"
            R"("queue":{"count":3,"ns":300},"compute_input":{"count":3,"ns":30},)"
            R"("compute_infer":{"count":3,"ns":2400},"compute_output":{"count":3,"ns":60},)"
            R"("cache_hit":{"count":0,"ns":0},"cache_miss":{"count":0,"ns":0}},)"
            R"("response_stats":{},"batch_stats":[)"
            R"({"batch_size":1,"compute_input":{"count":1,"ns":5},)"
            R"("compute_infer":{"count":1,"ns":700},"compute_output":{"count":1,"ns":9}},)"
            R"({"batch_size":8,"compute_input":{"count":1,"ns":20},)"
            R"("compute_infer":{"count":1,"ns":1000},"compute_output":{"count":1,"ns":21}}],)"
            R"("memory_usage":[]}]})");
  EXPECT_EQ(ModelStatisticsJson({}), R"({"model_stats":[]})");
}

// A model with the response cache: hits and misses appear with their counts and times.
TEST(StatsJsonTest, CacheHitsAndMisses) {
  ModelStatistics s = Sample();
  s.inference.success = {5, 3500};
  s.inference.queue = {5, 300};
  s.inference.cache_hit = {2, 700};
  s.inference.cache_miss = {3, 1100};
  const std::vector<ModelStatisticsEntry> entries = {{"digits", 1, s}};
  const std::string json = ModelStatisticsJson(entries);
  EXPECT_NE(json.find(R"("success":{"count":5,"ns":3500})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("cache_hit":{"count":2,"ns":700},"cache_miss":{"count":3,"ns":1100}})"),
            std::string::npos)
      << json;
}

// An ensemble's entry ends with its steps; other models have no such member.
TEST(StatsJsonTest, EnsembleSteps) {
  ModelStatistics e;
  EnsembleStepStatistics a;
  a.step = 0;
  a.model = "pre\"process";  // escaped like any string
  a.model_version = -1;
  a.success = {4, 9000};
  a.fail = {1, 70};
  a.queue = {4, 400};
  a.compute_input = {4, 40};
  a.compute_infer = {4, 4000};
  a.compute_output = {4, 44};
  EnsembleStepStatistics b;
  b.step = 1;
  b.model = "classify";
  b.model_version = 3;
  e.ensemble_steps = {a, b};
  const std::vector<ModelStatisticsEntry> entries = {{"pipe", 1, e}, {"plain", 2, Sample()}};
  const std::string json = ModelStatisticsJson(entries);
  const std::string steps =
      R"("memory_usage":[],"ensemble_steps":[)"
      R"({"step":0,"model":"pre\"process","model_version":"-1",)"
      R"("success":{"count":4,"ns":9000},"fail":{"count":1,"ns":70},)"
      R"("queue":{"count":4,"ns":400},"compute_input":{"count":4,"ns":40},)"
      R"("compute_infer":{"count":4,"ns":4000},"compute_output":{"count":4,"ns":44}},)"
      R"({"step":1,"model":"classify","model_version":"3",)"
      R"("success":{"count":0,"ns":0},"fail":{"count":0,"ns":0},)"
      R"("queue":{"count":0,"ns":0},"compute_input":{"count":0,"ns":0},)"
      R"("compute_infer":{"count":0,"ns":0},"compute_output":{"count":0,"ns":0}}]},)"
      R"({"name":"plain")";
  EXPECT_NE(json.find(steps), std::string::npos) << json;
  EXPECT_EQ(json.find("ensemble_steps"), json.rfind("ensemble_steps")) << "only the ensemble";

  // Still a document perf_analyzer reads, and the member parses.
  dom::parser parser;
  dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  uint64_t n = 0;
  ASSERT_EQ(
      root["model_stats"].at(0)["ensemble_steps"].at(0)["compute_infer"]["ns"].get_uint64().get(n),
      simdjson::SUCCESS);
  EXPECT_EQ(n, 4000u);
  ASSERT_EQ(root["model_stats"].at(0)["inference_stats"]["success"]["count"].get_uint64().get(n),
            simdjson::SUCCESS);
  dom::element absent;
  EXPECT_NE(root["model_stats"].at(1)["ensemble_steps"].get(absent), simdjson::SUCCESS);
}

// Reads the document the way perf_analyzer does: no presence checks, unsigned integers.
TEST(StatsJsonTest, EveryMemberPerfAnalyzerReads) {
  ModelStatistics big;
  big.inference_count = UINT64_MAX;
  big.inference.success = {UINT64_MAX, UINT64_MAX};
  const std::vector<ModelStatisticsEntry> entries = {{"a", 3, ModelStatistics()}, {"b", 12, big}};
  const std::string json = ModelStatisticsJson(entries);
  dom::parser parser;
  dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  dom::array stats;
  ASSERT_EQ(root["model_stats"].get_array().get(stats), simdjson::SUCCESS);
  ASSERT_EQ(stats.size(), 2u);
  size_t i = 0;
  for (dom::element m : stats) {
    std::string_view name, version;
    EXPECT_EQ(m["name"].get_string().get(name), simdjson::SUCCESS);
    EXPECT_EQ(m["version"].get_string().get(version), simdjson::SUCCESS);
    EXPECT_EQ(version, i == 0 ? "3" : "12");
    uint64_t n = 0;
    for (const char* key : {"last_inference", "inference_count", "execution_count"}) {
      EXPECT_EQ(m[key].get_uint64().get(n), simdjson::SUCCESS) << key;
    }
    for (const char* key : {"success", "fail", "queue", "compute_input", "compute_infer",
                            "compute_output", "cache_hit", "cache_miss"}) {
      EXPECT_EQ(m["inference_stats"][key]["count"].get_uint64().get(n), simdjson::SUCCESS) << key;
      EXPECT_EQ(m["inference_stats"][key]["ns"].get_uint64().get(n), simdjson::SUCCESS) << key;
    }
    dom::array batches;
    EXPECT_EQ(m["batch_stats"].get_array().get(batches), simdjson::SUCCESS);
    ++i;
  }
  uint64_t max = 0;
  ASSERT_EQ(root["model_stats"].at(1)["inference_stats"]["success"]["ns"].get_uint64().get(max),
            simdjson::SUCCESS);
  EXPECT_EQ(max, UINT64_MAX);
}

}  // namespace
}  // namespace kiln
