// SPDX-License-Identifier: Apache-2.0
#include "server/metrics/exposition.h"

#include <gtest/gtest.h>

#include <clocale>
#include <limits>

namespace kiln {
namespace {

TEST(Exposition, FormatsValuesAsPrometheusReadsThem) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(42), "42");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(1e15), "1000000000000000");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(0.00005), "5e-05");
  EXPECT_EQ(FormatMetricValue(1e300), "1e+300");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  // Shortest form that reads back to the same double.
  EXPECT_EQ(std::stod(FormatMetricValue(0.1 + 0.2)), 0.1 + 0.2);
}

TEST(Exposition, ValuesIgnoreTheLocale) {
  const char* old = std::setlocale(LC_NUMERIC, nullptr);
  const std::string saved = old != nullptr ? old : "C";
  if (std::setlocale(LC_NUMERIC, "de_DE.UTF-8") == nullptr) {
    GTEST_SKIP() << "no de_DE locale on this machine";
  }
  EXPECT_EQ(FormatMetricValue(0.5), "0.5");
  std::setlocale(LC_NUMERIC, saved.c_str());
}

TEST(Exposition, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeLabelValue(""), "");
}

TEST(Exposition, ValidatesNames) {
  EXPECT_TRUE(IsValidMetricName("nv_inference_count"));
  EXPECT_TRUE(IsValidMetricName("a:b_c9"));
  EXPECT_FALSE(IsValidMetricName("9a"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_TRUE(IsValidLabelName("model"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

TEST(Exposition, WritesCountersAndGaugesWithHelpAndType) {
  ExpositionWriter w;
  w.BeginFamily("requests_total", MetricType::kCounter, "Requests \\ served\nso far");
  w.Sample({{"model", "m\"1"}, {"version", "2"}}, 7);
  w.Sample({}, 1);
  w.BeginFamily("temperature", MetricType::kGauge, "Degrees");
  w.Sample({{"room", "a"}}, -1.5);
  EXPECT_EQ(w.text(),
            "# HELP requests_total Requests \\\\ served\\nso far\n"
            "# TYPE requests_total counter\n"
            "requests_total{model=\"m\\\"1\",version=\"2\"} 7\n"
            "requests_total 1\n"
            "# HELP temperature Degrees\n"
            "# TYPE temperature gauge\n"
            "temperature{room=\"a\"} -1.5\n");
}

TEST(Exposition, WritesHistogramsCumulativeWithInfSumAndCount) {
  Histogram h({0.001, 0.01});
  for (double v : {0.0005, 0.001, 0.005, 2.0}) h.Observe(v);
  ExpositionWriter w;
  w.BeginFamily("lat_seconds", MetricType::kHistogram, "Latency");
  w.HistogramSample({{"model", "x"}}, h);
  EXPECT_EQ(w.text(),
            "# HELP lat_seconds Latency\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{model=\"x\",le=\"0.001\"} 2\n"
            "lat_seconds_bucket{model=\"x\",le=\"0.01\"} 3\n"
            "lat_seconds_bucket{model=\"x\",le=\"+Inf\"} 4\n"
            "lat_seconds_sum{model=\"x\"} 2.0065\n"
            "lat_seconds_count{model=\"x\"} 4\n");
}

TEST(ExpositionDeathTest, RefusesProgramErrors) {
  EXPECT_DEATH(
      {
        ExpositionWriter w;
        w.BeginFamily("a", MetricType::kGauge, "");
        w.BeginFamily("a", MetricType::kGauge, "");
      },
      "written twice");
  EXPECT_DEATH(
      {
        ExpositionWriter w;
        w.BeginFamily("bad-name", MetricType::kGauge, "");
      },
      "invalid metric name");
  EXPECT_DEATH(
      {
        ExpositionWriter w;
        w.BeginFamily("h", MetricType::kHistogram, "");
        w.Sample({}, 1);
      },
      "histogram");
}

}  // namespace
}  // namespace kiln
