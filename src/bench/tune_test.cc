// SPDX-License-Identifier: Apache-2.0
// kiln tune's pure parts: scores and the winner, the concurrency ramp, the coordinate descent on
// a synthetic cost model, the outputs, and the config edits on the real inference.ModelConfig
// (reached through the gRPC protocol's messages, which carry it).

#include "bench/tune.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#ifdef KILN_HAVE_GRPC
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include "grpc_service.pb.h"
#endif

namespace kiln::bench {
namespace {

TunePoint Point(int concurrency, double throughput, double p99_us, uint64_t errors = 0) {
  TunePoint p;
  p.concurrency = concurrency;
  p.throughput = throughput;
  p.p50_us = p99_us / 2;
  p.p99_us = p99_us;
  p.requests = 100;
  p.errors = errors;
  return p;
}

TuneConfigResult Config(int max_batch, std::vector<TunePoint> points) {
  TuneConfigResult r;
  r.settings.max_batch_size = max_batch;
  r.points = std::move(points);
  return r;
}

TEST(TuneWinner, HighestThroughputMeetingTheBudget) {
  std::vector<TuneConfigResult> results = {
      Config(1, {Point(1, 100, 500), Point(2, 180, 900), Point(4, 260, 2500)}),
      Config(4, {Point(1, 120, 600), Point(2, 230, 950), Point(4, 300, 1100)}),
      Config(8, {Point(1, 90, 700), Point(2, 250, 800, /*errors=*/3)}),
  };
  // Budget 1 ms: 300 (over budget), 250 (errors) and 260 (over budget) do not count.
  std::optional<PointRef> w = PickWinner(results, 1000);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, (PointRef{1, 1}));
  // A looser budget admits the 300 infer/s point.
  w = PickWinner(results, 1100);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, (PointRef{1, 2}));
  EXPECT_TRUE(MeetsBudget(Point(1, 1, 1000), 1000));
  EXPECT_FALSE(MeetsBudget(Point(1, 1, 1001), 1000));
}

TEST(TuneWinner, TiesGoToLowerP99ThenLowerConcurrencyThenEarlierConfig) {
  std::vector<TuneConfigResult> results = {
      Config(1, {Point(1, 200, 900)}),
      Config(2, {Point(2, 200, 800)}),
      Config(4, {Point(4, 200, 800), Point(1, 200, 800)}),
      Config(8, {Point(1, 200, 800)}),
  };
  std::optional<PointRef> w = PickWinner(results, 1000);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, (PointRef{2, 1}));  // p99 800 beats 900; concurrency 1 beats 2; #2 before #3
  results.erase(results.begin() + 2);
  w = PickWinner(results, 1000);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, (PointRef{2, 0}));  // now #2 (max_batch 8) at concurrency 1 is the only c=1 one
  results.pop_back();
  EXPECT_EQ(*PickWinner(results, 1000), (PointRef{1, 0}));
}

TEST(TuneWinner, NoneMeetingGivesNoWinnerAndTheClosestPoint) {
  std::vector<TuneConfigResult> results = {
      Config(1, {Point(1, 100, 5000), Point(2, 150, 9000)}),
      Config(4, {Point(1, 120, 4000), Point(2, 200, 4000)}),
      Config(8, {}),
  };
  results[2].error = "load answered HTTP 400";
  EXPECT_FALSE(PickWinner(results, 1000).has_value());
  std::optional<PointRef> c = ClosestPoint(results);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, (PointRef{1, 1}));  // lowest p99, then the higher throughput
  EXPECT_FALSE(ClosestPoint(std::vector<TuneConfigResult>{Config(1, {})}).has_value());
}

TEST(TuneScore, ConfigComparison) {
  TuneConfigResult meets = Config(1, {Point(1, 100, 900)});
  TuneConfigResult faster_meets = Config(2, {Point(1, 150, 990)});
  TuneConfigResult over = Config(4, {Point(1, 500, 1200)});
  TuneConfigResult closer_over = Config(8, {Point(1, 10, 1100)});
  TuneConfigResult failed = Config(16, {});
  EXPECT_TRUE(BetterConfig(faster_meets, meets, 1000));
  EXPECT_FALSE(BetterConfig(meets, faster_meets, 1000));
  EXPECT_TRUE(BetterConfig(meets, over, 1000));  // meeting beats any throughput over budget
  EXPECT_TRUE(BetterConfig(closer_over, over, 1000));
  EXPECT_TRUE(BetterConfig(over, failed, 1000));
  EXPECT_FALSE(BetterConfig(failed, over, 1000));
  EXPECT_FALSE(BetterConfig(meets, meets, 1000));  // a tie keeps the earlier one
  EXPECT_EQ(
      BestPointOf(Config(1, {Point(1, 100, 500), Point(2, 190, 800), Point(4, 250, 1500)}), 1000),
      1u);
}

TEST(TuneRamp, DoublesUntilOverBudgetFlatOrAtTheCap) {
  std::vector<TunePoint> points;
  EXPECT_EQ(NextConcurrency(points, 1000, 64, 0.05), 1);
  points.push_back(Point(1, 100, 300));
  EXPECT_EQ(NextConcurrency(points, 1000, 64, 0.05), 2);
  points.push_back(Point(2, 190, 400));
  EXPECT_EQ(NextConcurrency(points, 1000, 64, 0.05), 4);
  // Over the budget: stop.
  std::vector<TunePoint> over = points;
  over.push_back(Point(4, 300, 1001));
  EXPECT_EQ(NextConcurrency(over, 1000, 64, 0.05), 0);
  // Throughput grew by less than 5 %: stop.
  std::vector<TunePoint> flat = points;
  flat.push_back(Point(4, 199, 600));
  EXPECT_EQ(NextConcurrency(flat, 1000, 64, 0.05), 0);
  flat.back().throughput = 200;
  EXPECT_EQ(NextConcurrency(flat, 1000, 64, 0.05), 8);
  // Errors: stop.
  std::vector<TunePoint> errors = points;
  errors.push_back(Point(4, 300, 500, 1));
  EXPECT_EQ(NextConcurrency(errors, 1000, 64, 0.05), 0);
  // The cap.
  EXPECT_EQ(NextConcurrency(points, 1000, 3, 0.05), 0);
  EXPECT_EQ(NextConcurrency(std::vector<TunePoint>{}, 1000, 0, 0.05), 0);
}

// A synthetic server: capacity grows with the batch size, the instances, bf16 and the queue
// delay; a max_batch_size of 8 costs 20 ms of p99.
struct CostModel {
  double budget_us = 10000;
  int measured = 0;

  TunePoint At(const TuneSettings& s, int c) const {
    double cap = 100.0 * std::sqrt(std::max(1, s.max_batch_size)) * (s.instances == 2 ? 1.5 : 1) *
                 (s.precision == "bf16" ? 1.1 : 1) *
                 (1 + static_cast<double>(s.max_queue_delay_us) / 5000);
    double base = 1000 + static_cast<double>(s.max_queue_delay_us) +
                  (s.max_batch_size == 8 && s.dynamic_batching ? 20000 : 0);
    if (!s.dynamic_batching) base += 20000;
    TunePoint p = Point(c, std::min(cap, 60.0 * c), base * (1 + 0.1 * std::log2(c)));
    return p;
  }

  TuneConfigResult Measure(const TuneSettings& s) {
    ++measured;
    TuneConfigResult r;
    r.settings = s;
    for (int c = NextConcurrency(r.points, budget_us, 64, 0.05); c > 0;
         c = NextConcurrency(r.points, budget_us, 64, 0.05)) {
      r.points.push_back(At(s, c));
    }
    return r;
  }
};

TuneSpace SyntheticSpace() {
  TuneSpace space;
  space.max_batch_size = {1, 4, 8};
  space.max_queue_delay_us = {0, 500};
  space.instances = {1, 2};
  space.precision = {"", "bf16"};
  return space;
}

TuneSettings SyntheticStart() {
  TuneSettings start;
  start.instances = 1;
  start.max_batch_size = 8;
  return start;
}

TEST(TuneSearch, CoordinateDescentVisitsOneDimensionAtATimeInOrder) {
  CostModel model;
  CoordinateSearch search(SyntheticSpace(), SyntheticStart(), model.budget_us, 100, 2);
  std::vector<std::string> visited;
  std::vector<std::string> dimensions;
  while (std::optional<TuneSettings> s = search.Next()) {
    visited.push_back(s->Label());
    dimensions.push_back(search.dimension() ? DimensionName(*search.dimension()) : "start");
    search.Report(model.Measure(*s));
  }
  const std::vector<std::string> want = {
      // The start, then max_batch_size around it (batching turned on).
      "instances=1 threads=server max_batch=8 batching=off precision=default",
      "instances=1 threads=server max_batch=1 delay_us=0 preferred=none precision=default",
      "instances=1 threads=server max_batch=4 delay_us=0 preferred=none precision=default",
      "instances=1 threads=server max_batch=8 delay_us=0 preferred=none precision=default",
      // max_batch 4 won (8 is over the budget); the delay 0 is already measured.
      "instances=1 threads=server max_batch=4 delay_us=500 preferred=none precision=default",
      "instances=2 threads=server max_batch=4 delay_us=500 preferred=none precision=default",
      "instances=2 threads=server max_batch=4 delay_us=500 preferred=none precision=bf16",
      // Pass 2 around the new best: nothing improves, and it ends.
      "instances=2 threads=server max_batch=1 delay_us=500 preferred=none precision=bf16",
      "instances=2 threads=server max_batch=8 delay_us=500 preferred=none precision=bf16",
      "instances=2 threads=server max_batch=4 delay_us=0 preferred=none precision=bf16",
      "instances=1 threads=server max_batch=4 delay_us=500 preferred=none precision=bf16",
  };
  EXPECT_EQ(visited, want);
  const std::vector<std::string> want_dims = {
      "start",     "max_batch_size", "max_batch_size", "max_batch_size", "max_queue_delay_us",
      "instances", "precision",      "max_batch_size", "max_batch_size", "max_queue_delay_us",
      "instances"};
  EXPECT_EQ(dimensions, want_dims);
  EXPECT_EQ(search.best(), 6u);
  EXPECT_EQ(search.results()[search.best()].settings.Label(), want[6]);
  // The winner is the best config's best point.
  std::optional<PointRef> w = PickWinner(search.results(), model.budget_us);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->config, 6u);
}

TEST(TuneSearch, StopsAtMaxConfigsAndAfterAPassWithoutGain) {
  CostModel model;
  CoordinateSearch capped(SyntheticSpace(), SyntheticStart(), model.budget_us, 5, 3);
  while (std::optional<TuneSettings> s = capped.Next()) capped.Report(model.Measure(*s));
  EXPECT_EQ(capped.results().size(), 5u);
  EXPECT_FALSE(capped.Next().has_value());

  // A space where nothing beats the start: one pass, then the end.
  TuneSpace space;
  space.max_batch_size = {8};
  space.instances = {1};
  TuneSettings start;
  start.max_batch_size = 4;
  start.dynamic_batching = true;
  CoordinateSearch flat(space, start, model.budget_us, 100, 5);
  std::vector<std::string> visited;
  while (std::optional<TuneSettings> s = flat.Next()) {
    visited.push_back(s->Label());
    flat.Report(model.Measure(*s));
  }
  ASSERT_EQ(visited.size(), 2u);  // the start and max_batch 8; instances 1 is the start itself
  EXPECT_EQ(flat.best(), 0u);
}

TEST(TuneSearch, ThreadsDimensionComesAfterInstances) {
  TuneSpace space;
  space.instances = {2};
  space.threads = {0, 1};
  TuneSettings start;
  start.max_batch_size = 4;
  EXPECT_EQ(WithValue(start, space, TuneDimension::kThreads, 1).threads, 1);
  EXPECT_EQ(WithValue(start, space, TuneDimension::kThreads, 1).Label(),
            "instances=1 threads=1 max_batch=4 batching=off precision=default");
  CostModel model;
  CoordinateSearch search(space, start, model.budget_us, 100, 1);
  std::vector<std::string> dims;
  while (std::optional<TuneSettings> s = search.Next()) {
    dims.push_back(search.dimension() ? DimensionName(*search.dimension()) : "start");
    search.Report(model.Measure(*s));
  }
  // The start, instances 2, then threads 1 (threads 0 is the start's own value).
  EXPECT_EQ(dims, (std::vector<std::string>{"start", "instances", "threads"}));
}

TEST(TuneSearch, NormalizedDropsWhatTheServerWouldIgnore) {
  TuneSpace space;
  space.preferred_batch_sizes = {{8, 2, 16}, {}};
  TuneSettings base;
  base.max_batch_size = 8;
  TuneSettings s = WithValue(base, space, TuneDimension::kPreferred, 0);
  EXPECT_TRUE(s.dynamic_batching);
  EXPECT_EQ(s.preferred_batch_sizes, (std::vector<int>{2, 8}));
  EXPECT_EQ(s.Label(),
            "instances=1 threads=server max_batch=8 delay_us=0 preferred=2,8 precision=default");
  TuneSettings off = base;
  off.max_queue_delay_us = 500;
  off.preferred_batch_sizes = {4};
  EXPECT_EQ(Normalized(off), base);
}

TEST(TuneOutputs, CsvTableAndHtml) {
  std::vector<TuneConfigResult> results = {
      Config(1, {Point(1, 100, 500), Point(2, 180, 1500)}),
      Config(4, {Point(1, 120, 600), Point(2, 230, 950)}),
      Config(8, {}),
  };
  results[1].settings.dynamic_batching = true;
  results[1].settings.preferred_batch_sizes = {2, 4};
  results[1].settings.precision = "bf16";
  results[2].error = "load answered HTTP 400: <bad> config";
  std::optional<PointRef> w = PickWinner(results, 1000);
  ASSERT_TRUE(w.has_value());

  std::string csv = FormatTuneCsv(results, 1000, w);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + 4 points
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "config,instances,threads,max_batch_size,dynamic_batching,max_queue_delay_us,"
            "preferred_batch_size,precision,concurrency,throughput_infer_s,p50_us,p99_us,requests,"
            "errors,meets_budget,winner");
  EXPECT_NE(csv.find("\n0,1,0,1,0,0,,,2,180.00,750.0,1500.0,100,0,0,0\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\n1,1,0,4,1,0,2 4,bf16,2,230.00,475.0,950.0,100,0,1,1\n"), std::string::npos)
      << csv;

  std::string table = FormatTuneTable(results, 1000, w);
  EXPECT_NE(table.find("<- winner"), std::string::npos);
  EXPECT_NE(table.find("failed: load answered HTTP 400"), std::string::npos);
  EXPECT_NE(table.find("230.0"), std::string::npos);

  std::string html = FormatTuneHtml(results, 1000, w, "kiln tune: m");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("class='budget'"), std::string::npos);
  EXPECT_NE(html.find("class='winner'"), std::string::npos);
  EXPECT_NE(html.find("&lt;bad&gt;"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("<bad>"), std::string::npos);
  EXPECT_EQ(html.find("http://") == std::string::npos ||
                html.find("http://") == html.find("http://www.w3.org/2000/svg"),
            true);  // no external assets
  EXPECT_EQ(html.find("<script"), std::string::npos);
  size_t rows = 0;
  for (size_t pos = html.find("<tr"); pos != std::string::npos; pos = html.find("<tr", pos + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 5u);  // header + 4 points
  EXPECT_EQ(FormatTuneHtml(results, 1000, std::nullopt, "t").find("class='winner'"),
            std::string::npos);
}

TEST(TuneFlags, Lists) {
  EXPECT_EQ(*ParseIntList("1,4,16", "--x", false), (std::vector<int64_t>{1, 4, 16}));
  EXPECT_EQ(*ParseIntList("0,500", "--x", true), (std::vector<int64_t>{0, 500}));
  EXPECT_FALSE(ParseIntList("0,500", "--x", false).ok());
  EXPECT_FALSE(ParseIntList("1,,2", "--x", false).ok());
  EXPECT_FALSE(ParseIntList("1,a", "--x", false).ok());
  EXPECT_FALSE(ParseIntList("-1", "--x", true).ok());
  EXPECT_NE(ParseIntList("", "--instances", true).status().message().find("--instances"),
            std::string::npos);
  EXPECT_EQ(*ParsePreferredChoice("none"), std::vector<int>{});
  EXPECT_EQ(*ParsePreferredChoice("4,8"), (std::vector<int>{4, 8}));
  EXPECT_FALSE(ParsePreferredChoice("4;8").ok());
}

#ifdef KILN_HAVE_GRPC

inference::ModelConfig SampleConfig() {
  inference::ModelConfig c;
  const char* text = R"pb(
    name: "add_sub"
    platform: "onnxruntime_onnx"
    max_batch_size: 8
    input { name: "INPUT0" data_type: TYPE_FP32 dims: 16 }
    output { name: "OUTPUT0" data_type: TYPE_FP32 dims: 16 }
    instance_group { name: "add_sub_0" kind: KIND_CPU count: 1 }
  )pb";
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c));
  return c;
}

TEST(TuneConfig, ApplyAndReadSettings) {
  inference::ModelConfig c = SampleConfig();
  TuneSettings start = SettingsFromConfig(c);
  EXPECT_EQ(start.Label(), "instances=1 threads=server max_batch=8 batching=off precision=default");

  TuneSettings s;
  s.instances = 2;
  s.max_batch_size = 16;
  s.dynamic_batching = true;
  s.max_queue_delay_us = 500;
  s.preferred_batch_sizes = {4, 8};
  s.precision = "bf16";
  s.threads = 2;
  (*c.mutable_parameters())["intra_op_thread_count"].set_string_value("4");  // replaced
  (*c.mutable_parameters())["other"].set_string_value("kept");
  ASSERT_TRUE(ApplySettings(s, &c).ok());
  EXPECT_EQ(c.parameters().at("kiln.intra_op_threads").string_value(), "2");
  EXPECT_EQ(c.parameters().count("intra_op_thread_count"), 0u);
  EXPECT_EQ(c.parameters().at("other").string_value(), "kept");
  EXPECT_EQ(c.max_batch_size(), 16);
  EXPECT_EQ(c.instance_group(0).count(), 2);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 500u);
  EXPECT_EQ(c.dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(c.optimization().precision(), "bf16");
  EXPECT_EQ(SettingsFromConfig(c), s);
  EXPECT_EQ(c.input(0).name(), "INPUT0");  // the rest is untouched

  // Batching off removes dynamic_batching; the default precision clears it.
  TuneSettings off = s;
  off.dynamic_batching = false;
  off.precision = "";
  off.threads = 0;
  ASSERT_TRUE(ApplySettings(off, &c).ok());
  EXPECT_EQ(c.parameters().count("kiln.intra_op_threads"), 0u);  // the server's setting
  EXPECT_EQ(c.parameters().size(), 1u);
  EXPECT_FALSE(c.has_dynamic_batching());
  EXPECT_EQ(c.optimization().precision(), "");
  EXPECT_EQ(SettingsFromConfig(c), Normalized(off));

  // Several groups: their sum cannot be set.
  inference::ModelConfig two = SampleConfig();
  two.add_instance_group()->set_count(3);
  TuneSettings same = SettingsFromConfig(two);
  EXPECT_EQ(same.instances, 4);
  EXPECT_TRUE(ApplySettings(same, &two).ok());
  same.instances = 2;
  Status st = ApplySettings(same, &two);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("2 instance groups"), std::string::npos);
}

TEST(TuneConfig, PbtxtAndJsonParseBackToTheSameConfig) {
  inference::ModelConfig c = SampleConfig();
  TuneSettings s = SettingsFromConfig(c);
  s.instances = 3;
  s.dynamic_batching = true;
  s.max_queue_delay_us = 2000;
  s.preferred_batch_sizes = {8};
  s.precision = "fp16";
  ASSERT_TRUE(ApplySettings(s, &c).ok());
  c.mutable_optimization()->set_calibration_dir("calib");
  EXPECT_EQ(CalibrationDir(c), "calib");

  const std::string header[] = {"kiln tune winner", "p99 0.5 ms"};
  std::string pbtxt = ConfigPbtxt(c, header);
  EXPECT_EQ(pbtxt.rfind("# kiln tune winner\n# p99 0.5 ms\n", 0), 0u);
  EXPECT_NE(pbtxt.find("name: \"add_sub\""), std::string::npos);
  inference::ModelConfig back;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(pbtxt, &back));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, c));
  EXPECT_EQ(SettingsFromConfig(back), s);

  Result<std::string> json = ConfigJson(c);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"max_queue_delay_microseconds\""), std::string::npos);  // proto names
  inference::ModelConfig from_json;
  ASSERT_TRUE(ParseConfigJson(*json, &from_json).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(from_json, c));

  // The server's JSON spelling: every field, enums by name, unknown keys ignored.
  inference::ModelConfig served;
  ASSERT_TRUE(ParseConfigJson(R"({"name":"m","max_batch_size":4,"runtime":"","extra":1,
      "instance_group":[{"kind":"KIND_CPU","count":2,"gpus":[]}],
      "dynamic_batching":{"preferred_batch_size":[],"max_queue_delay_microseconds":100}})",
                              &served)
                  .ok());
  EXPECT_EQ(SettingsFromConfig(served).Label(),
            "instances=2 threads=server max_batch=4 delay_us=100 preferred=none precision=default");
  EXPECT_FALSE(ParseConfigJson("{\"max_batch_size\": \"x\"}", &served).ok());
}

#endif  // KILN_HAVE_GRPC

}  // namespace
}  // namespace kiln::bench
