// SPDX-License-Identifier: Apache-2.0
#include "bench/writers.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <sstream>

namespace kiln::bench {
namespace {

std::vector<PointResult> TwoPoints() {
  PointResult a;
  a.concurrency = 4;
  a.throughput = 2000;
  a.latency.p50_us = 1500;
  a.latency.p90_us = 1800;
  a.latency.p95_us = 1900;
  a.latency.p99_us = 2500;
  a.latency.p999_us = 3000;
  a.latency.avg_us = 1600;
  a.errors = 2;
  a.errors_by_status["HTTP 400"] = 2;
  a.stable = true;
  a.server.present = true;
  a.server.queue_us = 100;
  a.server.compute_input_us = 10;
  a.server.compute_infer_us = 500;
  a.server.compute_output_us = 20;
  a.server.mean_batch = 3.5;
  WindowResult w1, w2;
  w1.throughput = 1990;
  w1.p99_us = 2400;
  w1.server.present = true;
  w1.server.queue_us = 90;
  w2.throughput = 2010;
  w2.p99_us = 2600;
  a.window_results = {w1, w2};
  PointResult b;  // lower throughput: CSV sorts it first
  b.concurrency = 1;
  b.throughput = 900.5;
  b.latency.p50_us = 1000;
  b.latency.p99_us = 1200;
  b.latency.avg_us = 1050;
  return {a, b};
}

std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    std::istringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

TEST(CsvTest, PerfAnalyzerColumnsSortedByThroughput) {
  auto points = TwoPoints();
  auto rows = ParseCsv(FormatCsv(points));
  ASSERT_EQ(rows.size(), 3u);
  const auto& h = rows[0];
  ASSERT_GE(h.size(), 13u);
  EXPECT_EQ(h[0], "Concurrency");
  EXPECT_EQ(h[1], "Inferences/Second");
  EXPECT_EQ(h[4], "Server Queue");
  EXPECT_EQ(h[6], "Server Compute Infer");
  EXPECT_EQ(h[9], "p50 latency");
  EXPECT_EQ(h[12], "p99 latency");
  for (const auto& r : rows) EXPECT_EQ(r.size(), h.size());
  EXPECT_EQ(rows[1][0], "1");  // 900.5 infer/s first
  EXPECT_EQ(rows[1][1], "900.50");
  EXPECT_EQ(rows[2][0], "4");
  EXPECT_EQ(rows[2][4], "100");
  EXPECT_EQ(rows[2][9], "1500");
  EXPECT_EQ(rows[2][12], "2500");
  // Network+Server = avg - (queue + compute) = 1600 - 630.
  EXPECT_EQ(rows[2][3], "970");
  // Open loop names the first column "Request Rate".
  points[0].open_loop = points[1].open_loop = true;
  points[0].request_rate = 100;
  EXPECT_EQ(ParseCsv(FormatCsv(points))[0][0], "Request Rate");
}

TEST(JsonTest, OnePointObjectWithTheRequiredKeys) {
  RunInfo info;
  info.command_line = "kiln bench -m \"add_sub\"";
  info.model = "add_sub";
  info.cpu_model = "Some CPU\t@ 2GHz";
  std::string text = FormatJson(info, TwoPoints());
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(text).get(root), simdjson::SUCCESS) << text;
  std::string_view cmd;
  ASSERT_EQ(root["run"]["command"].get(cmd), simdjson::SUCCESS);
  EXPECT_EQ(cmd, info.command_line);
  simdjson::dom::array points;
  ASSERT_EQ(root["points"].get(points), simdjson::SUCCESS);
  ASSERT_EQ(points.size(), 2u);
  simdjson::dom::element p0 = points.at(0);
  int64_t conc;
  double v;
  ASSERT_EQ(p0["concurrency"].get(conc), simdjson::SUCCESS);
  EXPECT_EQ(conc, 4);
  ASSERT_EQ(p0["throughput"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 2000);
  ASSERT_EQ(p0["p50_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 1500);
  ASSERT_EQ(p0["p90_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 1800);
  ASSERT_EQ(p0["p95_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 1900);
  ASSERT_EQ(p0["p99_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 2500);
  ASSERT_EQ(p0["avg_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 1600);
  int64_t errors;
  ASSERT_EQ(p0["errors"].get(errors), simdjson::SUCCESS);
  EXPECT_EQ(errors, 2);
  ASSERT_EQ(p0["errors_by_status"]["HTTP 400"].get(errors), simdjson::SUCCESS);
  EXPECT_EQ(errors, 2);
  ASSERT_EQ(p0["server"]["mean_batch"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 3.5);
  // The point without server statistics has no "server" object.
  EXPECT_NE(points.at(1)["server"].error(), simdjson::SUCCESS);
  // Per-window details, in order, with the server's per-window breakdown when present.
  simdjson::dom::array wins;
  ASSERT_EQ(p0["window_details"].get(wins), simdjson::SUCCESS);
  ASSERT_EQ(wins.size(), 2u);
  ASSERT_EQ(wins.at(1)["p99_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 2600);
  ASSERT_EQ(wins.at(0)["server_queue_us"].get(v), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(v, 90);
  EXPECT_NE(wins.at(1)["server_queue_us"].error(), simdjson::SUCCESS);
}

TEST(JsonTest, OpenLoopPointsCarryTheRate) {
  auto points = TwoPoints();
  points[0].open_loop = true;
  points[0].request_rate = 250;
  points[0].send_lag_p99_us = 12;
  std::string text = FormatJson(RunInfo{}, std::span(points).first(1));
  simdjson::dom::parser parser;
  double rate;
  ASSERT_EQ(parser.parse(text)["points"].at(0)["request_rate"].get(rate), simdjson::SUCCESS);
  EXPECT_DOUBLE_EQ(rate, 250);
}

TEST(JsonTest, QuoteEscapes) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(HtmlTest, SelfContainedWithSvgAndStamp) {
  RunInfo info;
  info.command_line = "kiln bench -m <x>";
  info.git_commit = "0123abcd";
  info.cpu_model = "Test CPU";
  std::string html = FormatHtml(info, TwoPoints());
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("0123abcd"), std::string::npos);
  EXPECT_NE(html.find("Test CPU"), std::string::npos);
  EXPECT_NE(html.find("kiln bench -m &lt;x&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("kiln bench -m <x>"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no external URL
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_NE(html.find("compute infer"), std::string::npos);
}

}  // namespace
}  // namespace kiln::bench
