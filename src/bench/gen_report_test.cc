// SPDX-License-Identifier: Apache-2.0
// kiln bench generate's outputs: the JSON file (vLLM's keys, valid JSON), the table and the HTML
// page.
#include "bench/gen_report.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <limits>

namespace kiln::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

// Two requests: one completed (due and sent at 0, chunks at 40 and 60 ms, ends at 60 ms, usage
// 8 / 2), one due at 25.5 ms that failed with HTTP 500. Duration 0.5 s.
std::vector<GenRecord> Records() {
  GenRecord ok;
  ok.send_ns = 0;
  ok.chunk_ns = {40 * kMs, 60 * kMs};
  ok.done_ns = 60 * kMs;
  ok.prompt_tokens = 8;
  ok.completion_tokens = 2;
  ok.ok = true;
  GenRecord bad;
  bad.due_ns = 25 * kMs + kMs / 2;
  bad.error_kind = "HTTP 500";
  bad.error = "HTTP 500: <boom>";
  return {ok, bad};
}

GenRunInfo Info() {
  GenRunInfo info;
  info.command_line = "kiln bench generate --model m<1>";
  info.url = "http://127.0.0.1:8000";
  info.endpoint = "/v1/completions";
  info.model = "m<1>";
  info.dataset = "random";
  info.num_prompts = 2;
  info.request_rate = std::numeric_limits<double>::infinity();
  info.slo.ttft_ms = 50;
  return info;
}

TEST(GenReportTest, JsonHasVllmKeysAndIsValid) {
  auto records = Records();
  GoodputSlo slo;
  slo.ttft_ms = 50;
  GenMetrics m = ComputeGenMetrics(records, 0.5, slo);
  std::string json = FormatGenJson(Info(), m, records);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  auto num = [&](const char* key) {
    double v = -1;
    EXPECT_EQ(root[key].get(v), simdjson::SUCCESS) << key;
    return v;
  };
  EXPECT_EQ(num("duration"), 0.5);
  EXPECT_EQ(num("request_throughput"), 2.0);       // 1 completed / 0.5 s
  EXPECT_EQ(num("output_throughput"), 4.0);        // 2 tokens / 0.5 s
  EXPECT_EQ(num("total_token_throughput"), 20.0);  // (8 + 2) / 0.5
  EXPECT_EQ(num("request_goodput"), 2.0);          // TTFT 40 <= 50
  EXPECT_EQ(num("mean_ttft_ms"), 40.0);
  EXPECT_EQ(num("median_itl_ms"), 20.0);
  EXPECT_EQ(num("p99_e2el_ms"), 60.0);
  EXPECT_EQ(num("mean_tpot_ms"), 20.0);  // (60 - 40) / (2 - 1)
  int64_t completed = 0, failed = 0;
  EXPECT_EQ(root["completed"].get(completed), simdjson::SUCCESS);
  EXPECT_EQ(root["failed"].get(failed), simdjson::SUCCESS);
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(failed, 1);
  std::string_view rate;
  EXPECT_EQ(root["request_rate"].get(rate), simdjson::SUCCESS);
  EXPECT_EQ(rate, "inf");
  EXPECT_TRUE(root["max_concurrency"].is_null());
  int64_t http500 = 0;
  EXPECT_EQ(root["errors_by_kind"]["HTTP 500"].get(http500), simdjson::SUCCESS);
  EXPECT_EQ(http500, 1);
  simdjson::dom::array requests;
  ASSERT_EQ(root["requests"].get(requests), simdjson::SUCCESS);
  ASSERT_EQ(requests.size(), 2u);
  bool ok = false;
  EXPECT_EQ(requests.at(1)["ok"].get(ok), simdjson::SUCCESS);
  EXPECT_FALSE(ok);
  // Every request, answered or not, says when the arrival schedule had it due.
  double due0 = -1, due1 = -1;
  EXPECT_EQ(requests.at(0)["due_ms"].get(due0), simdjson::SUCCESS);
  EXPECT_EQ(requests.at(1)["due_ms"].get(due1), simdjson::SUCCESS);
  EXPECT_EQ(due0, 0.0);
  EXPECT_EQ(due1, 25.5);
  std::string_view run_model;
  EXPECT_EQ(root["model_id"].get(run_model), simdjson::SUCCESS);
  EXPECT_EQ(run_model, "m<1>");
}

TEST(GenReportTest, TableAndHtml) {
  auto records = Records();
  GoodputSlo slo;
  slo.ttft_ms = 50;
  GenMetrics m = ComputeGenMetrics(records, 0.5, slo);
  std::string table = FormatGenTable(Info(), m);
  EXPECT_NE(table.find("Successful requests:"), std::string::npos);
  EXPECT_NE(table.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_NE(table.find("1 x HTTP 500"), std::string::npos);
  EXPECT_NE(table.find("TTFT"), std::string::npos);
  std::string html = FormatGenHtml(Info(), m, records);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("m&lt;1&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("m<1>"), std::string::npos);
  EXPECT_NE(html.find("HTTP 500: &lt;boom&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);  // no external assets
  EXPECT_EQ(html.find("src="), std::string::npos);
}

}  // namespace
}  // namespace kiln::bench
