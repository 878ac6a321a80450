// SPDX-License-Identifier: Apache-2.0
// Tracing: W3C traceparent parsing, --trace-config values, sampling, and the exporter against a
// collector in the test (a socket that answers one HTTP POST at a time and keeps the bodies),
// whose OTLP JSON is parsed back; file mode; drops when the collector is away or the queue full.

#include "server/trace.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln {
namespace {

TEST(TraceParent, ParsesW3CVersion00) {
  const std::string h = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  std::optional<TraceParent> p = ParseTraceParent(h);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->sampled);
  EXPECT_EQ(p->trace_id[0], 0x0a);
  EXPECT_EQ(p->span_id[7], 0x31);
  EXPECT_EQ(FormatTraceParent(*p), h);
  EXPECT_FALSE(
      ParseTraceParent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")->sampled);
  // A later version may append fields.
  EXPECT_TRUE(ParseTraceParent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra")
                  .has_value());
}

TEST(TraceParent, RefusesMalformedHeaders) {
  for (const char* h : {
           "",
           "garbage",
           "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",    // upper case
           "00-00000000000000000000000000000000-b7ad6b7169203331-01",    // zero trace id
           "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",    // zero span id
           "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",    // version ff
           "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",  // 00 has no more fields
           "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",     // short trace id
           "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
       }) {
    EXPECT_FALSE(ParseTraceParent(h).has_value()) << h;
  }
}

TEST(TraceConfig, AppliesTheReferenceFlags) {
  TraceSettings s;
  for (const char* f :
       {"mode=opentelemetry", "level=TIMESTAMPS", "rate=10", "count=5",
        "opentelemetry,url=collector:4318/v1/traces", "opentelemetry,resource=service.name=kiln-a",
        "opentelemetry,bsp_max_export_batch_size=7", "opentelemetry,bsp_schedule_delay=50",
        "triton,file=/tmp/x.json", "triton,log-frequency=3"}) {
    ASSERT_TRUE(ApplyTraceConfig(f, &s).ok()) << f;
  }
  EXPECT_EQ(s.mode, TraceSettings::Mode::kOpenTelemetry);
  EXPECT_EQ(s.level, TraceSettings::Level::kTimestamps);
  EXPECT_EQ(s.rate, 10);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(s.url, "collector:4318/v1/traces");
  ASSERT_EQ(s.resource.size(), 1u);
  EXPECT_EQ(s.resource[0].second, "kiln-a");
  EXPECT_EQ(s.max_export_batch_size, 7u);
  EXPECT_EQ(s.schedule_delay_ms, 50);
  EXPECT_EQ(s.file, "/tmp/x.json");
  EXPECT_EQ(s.log_frequency, 3);
  for (const char* bad :
       {"rate=0", "rate=x", "level=ALL", "mode=jaeger", "nonsense", "opentelemetry,file=/x",
        "triton,url=h:1/x", "zipkin,rate=1", "opentelemetry,url=https://h:4318/v1/traces",
        "opentelemetry,url=h:99999/x", "opentelemetry,resource=novalue", "count=-2", "what=1"}) {
    Status st = ApplyTraceConfig(bad, &s);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("trace"), std::string::npos) << bad << ": " << st.message();
  }
}

// A collector: accepts connections on a free port and keeps each POST body.
class Collector {
 public:
  Collector() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Collector() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::string target() {
    std::lock_guard lock(mu_);
    return target_;
  }

 private:
  void Loop() {
    for (;;) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      size_t need = std::string::npos;
      while (need == std::string::npos || in.size() < need) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        const size_t head = in.find("\r\n\r\n");
        if (head != std::string::npos && need == std::string::npos) {
          const size_t cl = in.find("Content-Length: ");
          need = head + 4 + std::stoul(in.substr(cl + 16));
        }
      }
      {
        std::lock_guard lock(mu_);
        target_ = in.substr(5, in.find(' ', 5) - 5);
        bodies_.push_back(in.substr(in.find("\r\n\r\n") + 4));
      }
      const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
      (void)write(c, ok.data(), ok.size());
      close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
  std::string target_;
};

struct SpanView {
  std::string trace, id, parent, name;
  int64_t start = 0, end = 0;
  int64_t status = 0;
  std::map<std::string, std::string> attrs;
};

std::vector<SpanView> Spans(const std::vector<std::string>& bodies) {
  std::vector<SpanView> out;
  simdjson::dom::parser parser;
  for (const std::string& b : bodies) {
    simdjson::dom::element doc;
    EXPECT_EQ(parser.parse(b).get(doc), simdjson::SUCCESS) << b;
    for (auto rs : doc["resourceSpans"].get_array()) {
      for (auto ss : rs["scopeSpans"].get_array()) {
        for (auto sp : ss["spans"].get_array()) {
          SpanView v;
          v.trace = std::string(sp["traceId"].get_string().value());
          v.id = std::string(sp["spanId"].get_string().value());
          std::string_view parent;
          if (sp["parentSpanId"].get_string().get(parent) == simdjson::SUCCESS) v.parent = parent;
          v.name = std::string(sp["name"].get_string().value());
          v.start = std::stoll(std::string(sp["startTimeUnixNano"].get_string().value()));
          v.end = std::stoll(std::string(sp["endTimeUnixNano"].get_string().value()));
          v.status = sp["status"]["code"].get_int64().value();
          for (auto a : sp["attributes"].get_array()) {
            v.attrs[std::string(a["key"].get_string().value())] =
                std::string(a["value"]["stringValue"].get_string().value());
          }
          out.push_back(std::move(v));
        }
      }
    }
  }
  return out;
}

TraceSettings OtelTo(int port) {
  TraceSettings s;
  s.level = TraceSettings::Level::kTimestamps;
  s.mode = TraceSettings::Mode::kOpenTelemetry;
  s.rate = 1;
  s.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
  s.schedule_delay_ms = 20;
  return s;
}

template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 500 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(Tracer, ExportsOtlpSpansWithTheClientsParent) {
  Collector collector;
  Tracer tracer;
  ASSERT_TRUE(tracer.Configure(OtelTo(collector.port())).ok());
  auto t = tracer.StartRequest("m", 3, "req-1",
                               "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  ASSERT_NE(t, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  RequestTiming timing{1000000, 200000, 2000000, 300000};  // 1 ms queue, 2.5 ms compute
  t->End(Status::OK(), &timing, nullptr);
  ASSERT_TRUE(WaitFor([&] { return tracer.spans_exported() == 6; })) << tracer.spans_exported();
  EXPECT_EQ(collector.target(), "/v1/traces");
  std::vector<SpanView> spans = Spans(collector.bodies());
  ASSERT_EQ(spans.size(), 6u);
  std::map<std::string, SpanView> by_name;
  for (const SpanView& s : spans) {
    EXPECT_EQ(s.trace, "0af7651916cd43dd8448eb211c80319c");
    by_name[s.name] = s;
  }
  SpanView& root = by_name["m request"];
  EXPECT_EQ(root.parent, "b7ad6b7169203331");
  EXPECT_EQ(root.attrs["kiln.model"], "m");
  EXPECT_EQ(root.attrs["kiln.model_version"], "3");
  EXPECT_EQ(root.attrs["kiln.request_id"], "req-1");
  EXPECT_EQ(root.status, 1);
  EXPECT_GE(root.end - root.start, 5000000);
  EXPECT_EQ(by_name["queue"].parent, root.id);
  EXPECT_EQ(by_name["queue"].end - by_name["queue"].start, 1000000);
  EXPECT_EQ(by_name["compute"].parent, root.id);
  EXPECT_EQ(by_name["compute"].start, by_name["queue"].end);
  EXPECT_EQ(by_name["compute_infer"].parent, by_name["compute"].id);
  EXPECT_EQ(by_name["compute_infer"].end - by_name["compute_infer"].start, 2000000);
  EXPECT_EQ(by_name["compute_output"].end, by_name["compute"].end);
  tracer.Shutdown();
}

TEST(Tracer, EnsembleStepsAndErrors) {
  Collector collector;
  Tracer tracer;
  ASSERT_TRUE(tracer.Configure(OtelTo(collector.port())).ok());
  auto t = tracer.StartRequest("e", 1, "", "");
  ASSERT_NE(t, nullptr);
  std::vector<StepTiming> steps(2);
  steps[0] = {0, "pre", 0, 3000, RequestTiming{1000, 0, 2000, 0}, true};
  steps[1] = {1, "clf", 3000, 1000, RequestTiming{}, false};
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  t->End(Status::OK(), nullptr, &steps);
  auto failed = tracer.StartRequest("e", 1, "bad", "");
  failed->End(Status::InvalidArgument("input 'x': wrong shape"), nullptr, nullptr);
  ASSERT_TRUE(WaitFor([&] { return tracer.spans_exported() == 9; })) << tracer.spans_exported();
  std::vector<SpanView> spans = Spans(collector.bodies());
  std::map<std::string, int> names;
  std::string step0, failed_step;
  for (SpanView& s : spans) {
    ++names[s.name];
    if (s.name == "step 0 pre") step0 = s.id;
    if (s.name == "step 1 clf") {
      EXPECT_EQ(s.status, 2);
    }
    if (s.name == "e request" && s.attrs["kiln.request_id"] == "bad") {
      EXPECT_EQ(s.status, 2);
    }
  }
  EXPECT_EQ(names["e request"], 2);
  EXPECT_EQ(names["step 0 pre"], 1);
  EXPECT_EQ(names["step 1 clf"], 1);
  EXPECT_EQ(names["queue"], 1);  // only the step that succeeded has phases
  for (const SpanView& s : spans) {
    if (s.name == "queue") {
      EXPECT_EQ(s.parent, step0);
    }
  }
  tracer.Shutdown();
}

TEST(Tracer, GenerationPhases) {
  Collector collector;
  Tracer tracer;
  ASSERT_TRUE(tracer.Configure(OtelTo(collector.port())).ok());
  auto t = tracer.StartRequest("lm", 1, "", "");
  ASSERT_NE(t, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  GenTiming timing{100000, 300000, 900000};
  t->EndGeneration(Status::OK(), &timing);
  ASSERT_TRUE(WaitFor([&] { return tracer.spans_exported() == 4; })) << tracer.spans_exported();
  std::map<std::string, SpanView> by_name;
  for (const SpanView& s : Spans(collector.bodies())) by_name[s.name] = s;
  const std::string root = by_name["lm request"].id;
  for (const char* name : {"queue", "prefill", "decode"}) {
    EXPECT_EQ(by_name[name].parent, root) << name;
  }
  EXPECT_EQ(by_name["prefill"].start, by_name["queue"].end);
  EXPECT_EQ(by_name["prefill"].end - by_name["prefill"].start, 300000);
  EXPECT_EQ(by_name["decode"].start, by_name["prefill"].end);
  EXPECT_EQ(by_name["decode"].end - by_name["decode"].start, 900000);
  tracer.Shutdown();
}

TEST(Tracer, SamplesOneInRateAndStopsAtCount) {
  Tracer tracer;
  TraceSettings s;
  s.level = TraceSettings::Level::kTimestamps;
  s.mode = TraceSettings::Mode::kOpenTelemetry;
  s.rate = 4;
  s.url = "http://127.0.0.1:9/v1/traces";
  ASSERT_TRUE(tracer.Configure(s).ok());
  int taken = 0;
  for (int i = 0; i < 40; ++i) taken += tracer.StartRequest("m", 1, "", "") != nullptr;
  EXPECT_EQ(taken, 10);
  // A sampled parent is always taken; an unsampled one goes by the rate.
  EXPECT_NE(
      tracer.StartRequest("m", 1, "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
      nullptr);
  s.count = 2;
  ASSERT_TRUE(tracer.Configure(s).ok());
  taken = 0;
  for (int i = 0; i < 40; ++i) taken += tracer.StartRequest("m", 1, "", "") != nullptr;
  EXPECT_EQ(taken, 2);
  s.level = TraceSettings::Level::kOff;
  ASSERT_TRUE(tracer.Configure(s).ok());
  EXPECT_EQ(
      tracer.StartRequest("m", 1, "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
      nullptr);
  tracer.Shutdown();
}

TEST(Tracer, DropsWhenTheCollectorIsAwayOrTheQueueIsFull) {
  Tracer tracer;
  TraceSettings s = OtelTo(1);  // nothing listens on port 1
  s.max_queue_size = 12;
  s.schedule_delay_ms = 100000;  // export only when a batch is full
  s.max_export_batch_size = 100;
  ASSERT_TRUE(tracer.Configure(s).ok());
  RequestTiming timing{};
  for (int i = 0; i < 3; ++i) {
    tracer.StartRequest("m", 1, "", "")->End(Status::OK(), &timing, nullptr);  // 6 spans each
  }
  EXPECT_EQ(tracer.spans_dropped(), 6u);  // the third found the queue full
  tracer.Shutdown();                      // exports the rest: refused by the absent collector
  EXPECT_EQ(tracer.spans_dropped(), 18u);
  EXPECT_EQ(tracer.spans_exported(), 0u);
}

TEST(Tracer, FileModeWritesTimestamps) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("kiln_trace_" + std::to_string(getpid()) + ".json");
  std::filesystem::remove(file);
  Tracer tracer;
  TraceSettings s;
  s.level = TraceSettings::Level::kTimestamps;
  s.rate = 1;
  EXPECT_FALSE(tracer.Configure(s).ok());  // file mode needs a file
  s.file = file.string();
  ASSERT_TRUE(tracer.Configure(s).ok());
  RequestTiming timing{100, 10, 20, 30};
  auto t = tracer.StartRequest("m", 2, "r", "");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // longer than the phases
  t->End(Status::OK(), &timing, nullptr);
  tracer.Shutdown();
  std::ifstream in(file);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS) << line;
  EXPECT_EQ(std::string_view(doc["model_name"].get_string().value()), "m");
  EXPECT_EQ(doc["model_version"].get_int64().value(), 2);
  std::vector<std::string> names;
  std::vector<int64_t> ns;
  for (auto ts : doc["timestamps"].get_array()) {
    names.emplace_back(ts["name"].get_string().value());
    ns.push_back(ts["ns"].get_int64().value());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"REQUEST_START", "QUEUE_START", "COMPUTE_START",
                                             "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START",
                                             "COMPUTE_END", "REQUEST_END"}));
  ASSERT_EQ(ns.size(), 7u);
  EXPECT_EQ(ns[2] - ns[1], 100);
  EXPECT_EQ(ns[3] - ns[2], 10);
  EXPECT_EQ(ns[4] - ns[3], 20);
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace kiln
