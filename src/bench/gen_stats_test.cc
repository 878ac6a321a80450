// SPDX-License-Identifier: Apache-2.0
// The metrics of kiln bench generate on a hand-made trace (expected values worked out in the
// comments), percentiles and the --goodput parser.
#include "bench/gen_stats.h"

#include <gtest/gtest.h>

namespace kiln::bench {
namespace {

constexpr int64_t kMs = 1'000'000;

GenRecord Ok(int64_t intended_ms, int64_t send_ms, std::vector<int64_t> chunks_ms, int64_t done_ms,
             int64_t prompt_tokens, int64_t completion_tokens, int64_t dataset_input) {
  GenRecord r;
  r.intended_ns = intended_ms * kMs;
  r.send_ns = send_ms * kMs;
  for (int64_t c : chunks_ms) r.chunk_ns.push_back(c * kMs);
  r.done_ns = done_ms * kMs;
  r.prompt_tokens = prompt_tokens;
  r.completion_tokens = completion_tokens;
  r.dataset_input_tokens = dataset_input;
  r.ok = true;
  return r;
}

GenRecord Failed(const std::string& kind, const std::string& message) {
  GenRecord r;
  r.error_kind = kind;
  r.error = message;
  return r;
}

// R1: sent at 0, chunks at 100, 120, 150, ends at 150; usage 10 prompt / 3 completion tokens.
//     TTFT 100, E2E 150, TPOT (150 - 100) / (3 - 1) = 25, ITL 20, 30.
// R2: intended 990, sent 1000 (10 ms late), chunks at 1300..1340 every 10, ends at 1345; no usage
//     (5 chunks = 5 output tokens, 20 input tokens from the dataset).
//     TTFT 300, E2E 345, TPOT (345 - 300) / 4 = 11.25, ITL 10, 10, 10, 10.
// R3: HTTP 404. R4: an error event.
// R5: sent at 2000, one chunk at 2050, ends at 2060; usage 4 / 1. TTFT 50, E2E 60, no TPOT.
// Duration 2.5 s.
std::vector<GenRecord> Trace() {
  return {Ok(0, 0, {100, 120, 150}, 150, 10, 3, 99),
          Ok(990, 1000, {1300, 1310, 1320, 1330, 1340}, 1345, -1, -1, 20),
          Failed("HTTP 404", "HTTP 404: The model 'x' does not exist"),
          Failed("error event", "out of memory"), Ok(2000, 2000, {2050}, 2060, 4, 1, 99)};
}

TEST(GenStatsTest, HandMadeTrace) {
  auto records = Trace();
  GenMetrics m = ComputeGenMetrics(records, 2.5, GoodputSlo{});
  EXPECT_EQ(m.completed, 3u);
  EXPECT_EQ(m.failed, 2u);
  EXPECT_EQ(m.total_output_tokens, 3 + 5 + 1);
  EXPECT_EQ(m.total_input_tokens, 10 + 20 + 4);
  EXPECT_DOUBLE_EQ(m.request_throughput, 3 / 2.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 9 / 2.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 43 / 2.5);
  EXPECT_FALSE(m.goodput_given);
  // TTFT {50, 100, 300}: mean 150, median 100, p99 at rank 1.98 = 100 + 0.98 * 200.
  EXPECT_EQ(m.ttft.count, 3u);
  EXPECT_DOUBLE_EQ(m.ttft.mean_ms, 150);
  EXPECT_DOUBLE_EQ(m.ttft.median_ms, 100);
  EXPECT_NEAR(m.ttft.p99_ms, 296, 1e-9);
  EXPECT_DOUBLE_EQ(m.ttft.max_ms, 300);
  // TPOT {11.25, 25}: mean = median = 18.125, p99 = 11.25 + 0.99 * 13.75.
  EXPECT_EQ(m.tpot.count, 2u);
  EXPECT_DOUBLE_EQ(m.tpot.mean_ms, 18.125);
  EXPECT_DOUBLE_EQ(m.tpot.median_ms, 18.125);
  EXPECT_NEAR(m.tpot.p99_ms, 24.8625, 1e-9);
  // ITL {10, 10, 10, 10, 20, 30}: mean 15, median 10, p99 at rank 4.95 = 20 + 0.95 * 10.
  EXPECT_EQ(m.itl.count, 6u);
  EXPECT_DOUBLE_EQ(m.itl.mean_ms, 15);
  EXPECT_DOUBLE_EQ(m.itl.median_ms, 10);
  EXPECT_NEAR(m.itl.p99_ms, 29.5, 1e-9);
  // E2E {60, 150, 345}: mean 185, median 150, p99 = 150 + 0.98 * 195.
  EXPECT_DOUBLE_EQ(m.e2el.mean_ms, 185);
  EXPECT_DOUBLE_EQ(m.e2el.median_ms, 150);
  EXPECT_NEAR(m.e2el.p99_ms, 341.1, 1e-9);
  // Send delay {0, 10, 0}.
  EXPECT_NEAR(m.send_delay.mean_ms, 10.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(m.send_delay.max_ms, 10);
  EXPECT_EQ(m.errors_by_kind,
            (std::map<std::string, uint64_t>{{"HTTP 404", 1}, {"error event", 1}}));
  EXPECT_EQ(m.first_error, "HTTP 404: The model 'x' does not exist");
}

TEST(GenStatsTest, GoodputCountsRequestsMeetingEverySlo) {
  auto records = Trace();
  struct Case {
    GoodputSlo slo;
    uint64_t good;
  };
  // TTFT 100 / 300 / 50, TPOT 25 / 11.25 / none (0 for the SLO), E2E 150 / 345 / 60.
  const Case cases[] = {
      {{100, -1, -1}, 2},    // R1 (100 <= 100) and R5
      {{-1, 20, -1}, 2},     // R2 and R5
      {{100, 20, -1}, 1},    // R5 only
      {{-1, -1, 100}, 1},    // R5 only
      {{1000, 30, 400}, 3},  // all
      {{10, -1, -1}, 0},
  };
  for (const Case& c : cases) {
    GenMetrics m = ComputeGenMetrics(records, 2.5, c.slo);
    EXPECT_TRUE(m.goodput_given);
    EXPECT_EQ(m.good, c.good) << c.slo.ttft_ms << " " << c.slo.tpot_ms << " " << c.slo.e2el_ms;
    EXPECT_DOUBLE_EQ(m.goodput, static_cast<double>(c.good) / 2.5);
  }
}

TEST(GenStatsTest, PerRequestMetrics) {
  RequestMetrics r2 = MetricsOf(Trace()[1]);
  EXPECT_TRUE(r2.ok);
  EXPECT_EQ(r2.output_tokens, 5);
  EXPECT_EQ(r2.input_tokens, 20);
  EXPECT_DOUBLE_EQ(r2.ttft_ms, 300);
  EXPECT_DOUBLE_EQ(r2.tpot_ms, 11.25);
  EXPECT_DOUBLE_EQ(r2.e2el_ms, 345);
  EXPECT_DOUBLE_EQ(r2.send_delay_ms, 10);
  EXPECT_EQ(MetricsOf(Trace()[4]).tpot_ms, -1);
  EXPECT_FALSE(MetricsOf(Trace()[2]).ok);
}

TEST(GenStatsTest, NoRecords) {
  GenMetrics m = ComputeGenMetrics({}, 0, GoodputSlo{});
  EXPECT_EQ(m.completed, 0u);
  EXPECT_EQ(m.ttft.count, 0u);
  EXPECT_EQ(m.ttft.mean_ms, 0);
}

TEST(GenStatsTest, PercentileInterpolatesLinearly) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(PercentileLinear(v, 0), 1);
  EXPECT_DOUBLE_EQ(PercentileLinear(v, 25), 1.75);  // rank 0.75
  EXPECT_DOUBLE_EQ(PercentileLinear(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(PercentileLinear(v, 100), 4);
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(PercentileLinear(one, 99), 7);
}

TEST(GenStatsTest, ParseGoodput) {
  auto slo = ParseGoodput({"ttft:500", "tpot:50.5", "e2el:3000"});
  ASSERT_TRUE(slo.ok()) << slo.status().ToString();
  EXPECT_EQ(slo->ttft_ms, 500);
  EXPECT_EQ(slo->tpot_ms, 50.5);
  EXPECT_EQ(slo->e2el_ms, 3000);
  auto only = ParseGoodput({"tpot:20"});
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->ttft_ms, -1);
  EXPECT_TRUE(only->any());
  EXPECT_FALSE(ParseGoodput({})->any());
  for (const char* bad : {"foo:1", "ttft", "ttft:", "ttft:-1", "ttft:1ms", "ttft:nan"}) {
    auto r = ParseGoodput({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
  auto twice = ParseGoodput({"ttft:1", "ttft:2"});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos);
}

}  // namespace
}  // namespace kiln::bench
