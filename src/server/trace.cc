// SPDX-License-Identifier: Apache-2.0
// Request tracing; see trace.h.
#include "server/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "base/logging.h"
#include "server/json_writer.h"

namespace kiln {
namespace {

int64_t UnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <size_t N>
std::string Hex(const std::array<uint8_t, N>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * N);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

template <size_t N>
bool ParseHex(std::string_view text, std::array<uint8_t, N>* out) {
  if (text.size() != 2 * N) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // W3C: lower-case hex only
  };
  bool nonzero = false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
    nonzero = nonzero || (*out)[i] != 0;
  }
  return nonzero;
}

template <size_t N>
std::array<uint8_t, N> RandomId() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<uint64_t>(SteadyNs()) ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id())};
  std::array<uint8_t, N> id{};
  do {
    for (size_t i = 0; i < N; i += 8) {
      const uint64_t v = rng();
      for (size_t j = 0; j < 8 && i + j < N; ++j) id[i + j] = static_cast<uint8_t>(v >> (8 * j));
    }
  } while (std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; }));
  return id;
}

Result<int64_t> Number(std::string_view name, std::string_view text, int64_t lo) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < lo) {
    return Status::InvalidArgument(
        fmt::format("trace setting '{}' is '{}'; expected an integer >= {}", name, text, lo));
  }
  return v;
}

// A finished span, ready to encode.
struct SpanRecord {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  std::array<uint8_t, 8> parent_id{};
  bool has_parent = false;
  bool server = false;  // kind SERVER (the request) or INTERNAL
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
  std::vector<std::pair<std::string, std::string>> attributes;  // string values
  bool error = false;
  std::string message;
};

// What the export thread takes: OpenTelemetry spans, or one file-mode JSON line.
struct Item {
  std::vector<SpanRecord> spans;
  std::string line;
};

struct Endpoint {
  std::string host, port, target;
};

Result<Endpoint> ParseUrl(std::string_view url) {
  std::string_view rest = url;
  if (rest.substr(0, 7) == "http://") rest.remove_prefix(7);
  if (rest.substr(0, 8) == "https://") {
    return Status::InvalidArgument(fmt::format(
        "trace setting 'url' is '{}': https is not supported; use an OTLP/HTTP collector "
        "listening on http",
        url));
  }
  const size_t slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  Endpoint e;
  e.target = slash == std::string_view::npos ? "/v1/traces" : std::string(rest.substr(slash));
  const size_t colon = hostport.rfind(':');
  e.host = std::string(hostport.substr(0, colon));
  e.port = colon == std::string_view::npos ? "4318" : std::string(hostport.substr(colon + 1));
  int port = 0;
  auto [p, ec] = std::from_chars(e.port.data(), e.port.data() + e.port.size(), port);
  if (e.host.empty() || ec != std::errc() || p != e.port.data() + e.port.size() || port < 1 ||
      port > 65535) {
    return Status::InvalidArgument(
        fmt::format("trace setting 'url' is '{}'; expected [http://]HOST[:PORT][/PATH]", url));
  }
  return e;
}

// POSTs `body` as JSON; OK on a 2xx answer.
Status Post(const Endpoint& e, const std::string& body) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context io;
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(e.host, e.port, ec);
  if (ec) return Status::Unavailable(fmt::format("resolving {}: {}", e.host, ec.message()));
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(results, ec);
  if (ec) {
    return Status::Unavailable(
        fmt::format("connecting to {}:{}: {}", e.host, e.port, ec.message()));
  }
  http::request<http::string_body> req{http::verb::post, e.target, 11};
  req.set(http::field::host, e.host + ":" + e.port);
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (!ec) http::read(stream, buffer, res, ec);
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  if (res.result_int() / 100 != 2) {
    return Status::Unavailable(fmt::format("the collector at {}:{}{} answered {}", e.host, e.port,
                                           e.target, res.result_int()));
  }
  return Status::OK();
}

// OTLP/HTTP JSON (ExportTraceServiceRequest): ids in hex, times as decimal strings.
std::string EncodeOtlp(const std::vector<SpanRecord>& spans, const TraceSettings& s) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("resourceSpans");
  w.BeginArray();
  w.BeginObject();
  w.Key("resource");
  w.BeginObject();
  w.Key("attributes");
  w.BeginArray();
  bool named = false;
  auto attr = [&](std::string_view k, std::string_view v) {
    w.BeginObject();
    w.Key("key");
    w.String(k);
    w.Key("value");
    w.BeginObject();
    w.Key("stringValue");
    w.String(v);
    w.EndObject();
    w.EndObject();
  };
  for (const auto& [k, v] : s.resource) {
    named = named || k == "service.name";
    attr(k, v);
  }
  if (!named) attr("service.name", "kiln");
  w.EndArray();
  w.EndObject();
  w.Key("scopeSpans");
  w.BeginArray();
  w.BeginObject();
  w.Key("scope");
  w.BeginObject();
  w.Key("name");
  w.String("kiln");
  w.EndObject();
  w.Key("spans");
  w.BeginArray();
  for (const SpanRecord& sp : spans) {
    w.BeginObject();
    w.Key("traceId");
    w.String(Hex(sp.trace_id));
    w.Key("spanId");
    w.String(Hex(sp.span_id));
    if (sp.has_parent) {
      w.Key("parentSpanId");
      w.String(Hex(sp.parent_id));
    }
    w.Key("name");
    w.String(sp.name);
    w.Key("kind");
    w.Int(sp.server ? 2 : 1);  // SPAN_KIND_SERVER : SPAN_KIND_INTERNAL
    w.Key("startTimeUnixNano");
    w.String(std::to_string(sp.start_ns));
    w.Key("endTimeUnixNano");
    w.String(std::to_string(sp.end_ns));
    w.Key("attributes");
    w.BeginArray();
    for (const auto& [k, v] : sp.attributes) attr(k, v);
    w.EndArray();
    w.Key("status");
    w.BeginObject();
    w.Key("code");
    w.Int(sp.error ? 2 : 1);  // STATUS_CODE_ERROR : STATUS_CODE_OK
    if (sp.error) {
      w.Key("message");
      w.String(sp.message);
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace

struct Tracer::State {
  std::mutex configure_mu;  // serializes Configure and Shutdown (the worker's start and join)
  mutable std::mutex mu;
  std::atomic<bool> file_mode{true};  // settings.mode == kTriton, for Submit without the lock
  std::condition_variable cv;
  TraceSettings settings;
  std::deque<Item> queue;
  size_t queued_spans = 0;
  bool stop = false;
  bool flush = false;
  std::thread worker;
  std::atomic<uint64_t> sampled{0};  // requests seen while on, for the 1-in-rate choice
  std::atomic<int64_t> count_left{-1};
  std::atomic<int64_t> rate{1000};
  std::ofstream file;
  std::string file_path;
  int64_t unflushed = 0;
};

Tracer& Tracer::Global() {
  static Tracer* tracer = new Tracer();  // never destroyed: requests may trace during exit
  return *tracer;
}

Tracer::Tracer() : state_(std::make_unique<State>()) {}

Tracer::~Tracer() { Shutdown(); }

Status ApplyTraceConfig(std::string_view flag, TraceSettings* s) {
  std::string_view mode;
  std::string_view rest = flag;
  const size_t comma = flag.find(',');
  const size_t eq = flag.find('=');
  if (comma != std::string_view::npos && (eq == std::string_view::npos || comma < eq)) {
    mode = flag.substr(0, comma);
    rest = flag.substr(comma + 1);
    if (mode != "triton" && mode != "opentelemetry") {
      return Status::InvalidArgument(fmt::format(
          "--trace-config '{}': unknown mode '{}' (triton or opentelemetry)", flag, mode));
    }
  }
  const size_t e = rest.find('=');
  if (e == std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("--trace-config '{}': expected [MODE,]SETTING=VALUE", flag));
  }
  const std::string_view key = rest.substr(0, e);
  const std::string_view value = rest.substr(e + 1);
  auto wrong_mode = [&](std::string_view want) {
    return Status::InvalidArgument(
        fmt::format("--trace-config '{}': '{}' is a setting of mode {}", flag, key, want));
  };
  if (key == "level") {
    if (value == "OFF") {
      s->level = TraceSettings::Level::kOff;
    } else if (value == "TIMESTAMPS") {
      s->level = TraceSettings::Level::kTimestamps;
    } else {
      return Status::InvalidArgument(
          fmt::format("--trace-config '{}': level is OFF or TIMESTAMPS, not '{}'", flag, value));
    }
  } else if (key == "rate") {
    KILN_ASSIGN_OR_RETURN(s->rate, Number("rate", value, 1));
  } else if (key == "count") {
    KILN_ASSIGN_OR_RETURN(s->count, Number("count", value, -1));
  } else if (key == "mode") {
    if (value == "triton") {
      s->mode = TraceSettings::Mode::kTriton;
    } else if (value == "opentelemetry") {
      s->mode = TraceSettings::Mode::kOpenTelemetry;
    } else {
      return Status::InvalidArgument(fmt::format(
          "--trace-config '{}': mode is triton or opentelemetry, not '{}'", flag, value));
    }
  } else if (key == "file") {
    if (mode == "opentelemetry") return wrong_mode("triton");
    s->file = std::string(value);
  } else if (key == "log-frequency" || key == "log_frequency") {
    if (mode == "opentelemetry") return wrong_mode("triton");
    KILN_ASSIGN_OR_RETURN(s->log_frequency, Number("log-frequency", value, 0));
  } else if (key == "url") {
    if (mode == "triton") return wrong_mode("opentelemetry");
    KILN_RETURN_IF_ERROR(ParseUrl(value).status());
    s->url = std::string(value);
  } else if (key == "resource") {
    if (mode == "triton") return wrong_mode("opentelemetry");
    const size_t r = value.find('=');
    if (r == std::string_view::npos || r == 0) {
      return Status::InvalidArgument(
          fmt::format("--trace-config '{}': resource is KEY=VALUE", flag));
    }
    s->resource.emplace_back(std::string(value.substr(0, r)), std::string(value.substr(r + 1)));
  } else if (key == "bsp_max_queue_size" || key == "bsp_max_export_batch_size") {
    if (mode == "triton") return wrong_mode("opentelemetry");
    KILN_ASSIGN_OR_RETURN(int64_t n, Number(key, value, 1));
    (key == "bsp_max_queue_size" ? s->max_queue_size : s->max_export_batch_size) =
        static_cast<size_t>(n);
  } else if (key == "bsp_schedule_delay") {
    if (mode == "triton") return wrong_mode("opentelemetry");
    KILN_ASSIGN_OR_RETURN(s->schedule_delay_ms, Number(key, value, 1));
  } else {
    return Status::InvalidArgument(
        fmt::format("--trace-config '{}': unknown setting '{}' (level, rate, count, mode, file, "
                    "log-frequency, url, resource, bsp_max_queue_size, bsp_max_export_batch_size, "
                    "bsp_schedule_delay)",
                    flag, key));
  }
  return Status::OK();
}

namespace {
std::string_view ModeName(TraceSettings::Mode m) {
  return m == TraceSettings::Mode::kOpenTelemetry ? "opentelemetry" : "triton";
}
}  // namespace

TraceSettingFields TraceSettingsAsFields(const TraceSettings& s) {
  return {{"trace_level", {s.level == TraceSettings::Level::kOff ? "OFF" : "TIMESTAMPS"}},
          {"trace_rate", {std::to_string(s.rate)}},
          {"trace_count", {std::to_string(s.count)}},
          {"log_frequency", {std::to_string(s.log_frequency)}},
          {"trace_file", {s.file}},
          {"trace_mode", {std::string(ModeName(s.mode))}}};
}

Status UpdateTraceSettings(const TraceSettingFields& update, TraceSettings* s) {
  TraceSettings next = *s;
  for (const auto& field : update) {
    const std::string& name = field.first;  // (not a structured binding: the lambda uses it)
    const std::vector<std::string>& values = field.second;
    if (values.empty()) continue;
    auto one = [&]() -> Result<std::string> {
      if (values.size() != 1) {
        return Status::InvalidArgument(
            fmt::format("trace setting '{}' takes one value, got {}", name, values.size()));
      }
      return values[0];
    };
    if (name == "trace_level") {
      next.level = TraceSettings::Level::kOff;
      for (const std::string& v : values) {
        if (v != "OFF" && v != "TIMESTAMPS") {
          return Status::InvalidArgument(
              fmt::format("trace setting 'trace_level' is OFF or TIMESTAMPS, not '{}'", v));
        }
        if (v == "TIMESTAMPS") next.level = TraceSettings::Level::kTimestamps;
      }
    } else if (name == "trace_rate" || name == "trace_count" || name == "log_frequency") {
      KILN_ASSIGN_OR_RETURN(std::string v, one());
      const int64_t lo = name == "trace_rate" ? 1 : name == "trace_count" ? -1 : 0;
      KILN_ASSIGN_OR_RETURN(int64_t n, Number(name, v, lo));
      (name == "trace_rate"    ? next.rate
       : name == "trace_count" ? next.count
                               : next.log_frequency) = n;
    } else if (name == "trace_file") {
      KILN_ASSIGN_OR_RETURN(next.file, one());
    } else if (name == "trace_mode") {
      KILN_ASSIGN_OR_RETURN(std::string v, one());
      if (v != ModeName(s->mode)) {
        return Status::InvalidArgument(fmt::format(
            "trace setting 'trace_mode' cannot change at run time (it is '{}'; start kiln with "
            "--trace-config mode=...)",
            ModeName(s->mode)));
      }
    } else {
      return Status::InvalidArgument(fmt::format(
          "unknown trace setting '{}' (trace_level, trace_rate, trace_count, log_frequency, "
          "trace_file, trace_mode)",
          name));
    }
  }
  *s = std::move(next);
  return Status::OK();
}

std::optional<TraceParent> ParseTraceParent(std::string_view h) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55 characters
  // (a later version may append fields after another "-").
  if (h.size() < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  const bool version_zero = h.substr(0, 2) == "00";
  if (!version_zero && !ParseHex(h.substr(0, 2), &version)) return std::nullopt;
  if (h.substr(0, 2) == "ff") return std::nullopt;
  if (version_zero && h.size() != 55) return std::nullopt;
  if (!version_zero && h.size() > 55 && h[55] != '-') return std::nullopt;
  TraceParent p;
  if (!ParseHex(h.substr(3, 32), &p.trace_id) || !ParseHex(h.substr(36, 16), &p.span_id)) {
    return std::nullopt;
  }
  if (h.substr(53, 2) != "00" && !ParseHex(h.substr(53, 2), &flags)) return std::nullopt;
  p.sampled = (flags[0] & 1) != 0;
  return p;
}

std::string FormatTraceParent(const TraceParent& p) {
  return fmt::format("00-{}-{}-{:02x}", Hex(p.trace_id), Hex(p.span_id), p.sampled ? 1 : 0);
}

Status Tracer::Configure(TraceSettings s) {
  if (s.rate < 1) return Status::InvalidArgument("trace setting 'rate' must be >= 1");
  if (s.count < -1) return Status::InvalidArgument("trace setting 'count' must be >= -1");
  if (s.log_frequency < 0) {
    return Status::InvalidArgument("trace setting 'log_frequency' must be >= 0");
  }
  if (s.max_queue_size < 1 || s.max_export_batch_size < 1 || s.schedule_delay_ms < 1) {
    return Status::InvalidArgument(
        "trace settings bsp_max_queue_size, bsp_max_export_batch_size and bsp_schedule_delay "
        "must be >= 1");
  }
  const bool on = s.level != TraceSettings::Level::kOff;
  if (on && s.mode == TraceSettings::Mode::kTriton && s.file.empty()) {
    return Status::InvalidArgument(
        "tracing in mode triton needs a file: --trace-config triton,file=PATH");
  }
  if (s.mode == TraceSettings::Mode::kOpenTelemetry) KILN_RETURN_IF_ERROR(ParseUrl(s.url).status());
  State& st = *state_;
  std::lock_guard configure_lock(st.configure_mu);
  {
    std::unique_lock lock(st.mu);
    if (on && s.mode == TraceSettings::Mode::kTriton && s.file != st.file_path) {
      std::ofstream f(s.file, std::ios::app);
      if (!f) {
        return Status::InvalidArgument(
            fmt::format("trace setting 'file': cannot open '{}' for writing", s.file));
      }
      st.file = std::move(f);
      st.file_path = s.file;
    }
    st.settings = s;
    st.file_mode.store(s.mode == TraceSettings::Mode::kTriton, std::memory_order_release);
    st.rate.store(s.rate, std::memory_order_relaxed);
    st.count_left.store(s.count, std::memory_order_relaxed);
    st.stop = false;
  }
  if (on && !st.worker.joinable()) {
    st.worker = std::thread([this] {
      State& w = *state_;
      std::unique_lock lock(w.mu);
      for (;;) {
        const auto delay = std::chrono::milliseconds(w.settings.schedule_delay_ms);
        w.cv.wait_for(lock, delay, [&] {
          return w.stop || w.flush || w.queued_spans >= w.settings.max_export_batch_size ||
                 (!w.queue.empty() && !w.queue.front().line.empty());
        });
        if (w.queue.empty()) {
          w.flush = false;
          if (w.stop) return;
          continue;
        }
        // Take one batch.
        std::vector<SpanRecord> spans;
        std::vector<std::string> lines;
        while (!w.queue.empty() && spans.size() < w.settings.max_export_batch_size) {
          Item& item = w.queue.front();
          w.queued_spans -= item.spans.size();
          for (SpanRecord& sp : item.spans) spans.push_back(std::move(sp));
          if (!item.line.empty()) lines.push_back(std::move(item.line));
          w.queue.pop_front();
        }
        const TraceSettings settings = w.settings;
        lock.unlock();
        for (const std::string& line : lines) {  // file mode
          std::unique_lock file_lock(w.mu);
          w.file << line << '\n';
          if (settings.log_frequency == 0 || ++w.unflushed >= settings.log_frequency) {
            w.file.flush();
            w.unflushed = 0;
          }
        }
        if (!spans.empty()) {
          Result<Endpoint> e = ParseUrl(settings.url);
          Status sent = e.ok() ? Post(*e, EncodeOtlp(spans, settings)) : e.status();
          if (sent.ok()) {
            spans_exported_.fetch_add(spans.size(), std::memory_order_relaxed);
          } else {
            spans_dropped_.fetch_add(spans.size(), std::memory_order_relaxed);
            KILN_LOG_WARN("trace export of {} spans failed: {}", spans.size(), sent.message());
          }
        }
        lock.lock();
      }
    });
  }
  on_.store(on, std::memory_order_release);
  return Status::OK();
}

TraceSettings Tracer::settings() const {
  std::unique_lock lock(state_->mu);
  return state_->settings;
}

void Tracer::Shutdown() {
  State& st = *state_;
  std::lock_guard configure_lock(st.configure_mu);
  {
    std::unique_lock lock(st.mu);
    st.stop = true;
    st.cv.notify_all();
  }
  if (st.worker.joinable()) st.worker.join();
  std::unique_lock lock(st.mu);
  if (st.file.is_open()) st.file.flush();
}

std::shared_ptr<RequestTrace> Tracer::StartRequest(std::string_view model, int64_t version,
                                                   std::string_view request_id,
                                                   std::string_view traceparent) {
  if (!on_.load(std::memory_order_acquire)) return nullptr;
  State& st = *state_;
  const std::optional<TraceParent> parent =
      traceparent.empty() ? std::nullopt : ParseTraceParent(traceparent);
  bool take = parent.has_value() && parent->sampled;
  if (!take) {
    const uint64_t n = st.sampled.fetch_add(1, std::memory_order_relaxed);
    take = n % static_cast<uint64_t>(st.rate.load(std::memory_order_relaxed)) == 0;
  }
  if (!take) return nullptr;
  // count: -1 is no limit; otherwise take one while some are left.
  int64_t left = st.count_left.load(std::memory_order_relaxed);
  while (left != -1) {
    if (left == 0) return nullptr;
    if (st.count_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) break;
  }
  auto t = std::shared_ptr<RequestTrace>(new RequestTrace());
  t->tracer_ = this;
  if (parent) {
    t->trace_id_ = parent->trace_id;
    t->parent_span_ = parent->span_id;
    t->has_parent_ = true;
  } else {
    t->trace_id_ = RandomId<16>();
  }
  t->model = std::string(model);
  t->version = version;
  t->request_id = std::string(request_id);
  t->start_unix_ns = UnixNs();
  t->start_steady_ns = SteadyNs();
  traces_started_.fetch_add(1, std::memory_order_relaxed);
  return t;
}

void RequestTrace::End(const Status& status, const RequestTiming* timing,
                       const std::vector<StepTiming>* steps) {
  if (ended_.exchange(true)) return;
  tracer_->Submit(*this, status, timing, steps, nullptr);
}

void RequestTrace::EndGeneration(const Status& status, const GenTiming* timing) {
  if (ended_.exchange(true)) return;
  tracer_->Submit(*this, status, nullptr, nullptr, timing);
}

namespace {
class TracedGenerationSink final : public GenerationSink {
 public:
  TracedGenerationSink(std::shared_ptr<GenerationSink> out, std::shared_ptr<RequestTrace> trace)
      : out_(std::move(out)), trace_(std::move(trace)) {}
  void Send(GenChunk chunk) override { out_->Send(std::move(chunk)); }
  void Finish(Result<GenFinal> result) override {
    if (result.ok()) {
      trace_->EndGeneration(Status::OK(), &result->timing);
    } else {
      trace_->EndGeneration(result.status(), nullptr);
    }
    out_->Finish(std::move(result));
  }
  size_t backlog() const override { return out_->backlog(); }

 private:
  const std::shared_ptr<GenerationSink> out_;
  const std::shared_ptr<RequestTrace> trace_;
};
}  // namespace

std::shared_ptr<GenerationSink> TraceGeneration(std::shared_ptr<GenerationSink> sink,
                                                std::string_view model, int64_t version,
                                                std::string_view request_id,
                                                std::string_view traceparent) {
  std::shared_ptr<RequestTrace> trace =
      Tracer::Global().StartRequest(model, version, request_id, traceparent);
  if (trace == nullptr) return sink;
  return std::make_shared<TracedGenerationSink>(std::move(sink), std::move(trace));
}

void Tracer::Submit(RequestTrace& t, const Status& status, const RequestTiming* timing,
                    const std::vector<StepTiming>* steps, const GenTiming* generation) {
  const int64_t end = t.start_unix_ns + (SteadyNs() - t.start_steady_ns);
  const int64_t start = t.start_unix_ns;
  std::vector<SpanRecord> spans;
  SpanRecord root;
  root.trace_id = t.trace_id_;
  root.span_id = RandomId<8>();
  root.parent_id = t.parent_span_;
  root.has_parent = t.has_parent_;
  root.server = true;
  root.name = t.model + " request";
  root.start_ns = start;
  root.end_ns = end;
  root.attributes = {{"kiln.model", t.model},
                     {"kiln.model_version", std::to_string(t.version)},
                     {"kiln.request_id", t.request_id}};
  root.error = !status.ok();
  root.message = status.ok() ? std::string() : std::string(status.message());
  auto child = [&](const std::array<uint8_t, 8>& parent, std::string name, int64_t from,
                   int64_t length) {
    SpanRecord s;
    s.trace_id = t.trace_id_;
    s.span_id = RandomId<8>();
    s.parent_id = parent;
    s.has_parent = true;
    s.name = std::move(name);
    s.start_ns = std::min(from, end);
    s.end_ns = std::min(from + std::max<int64_t>(length, 0), end);
    spans.push_back(std::move(s));
    return spans.back().span_id;
  };
  // queue, then compute (input, infer, output), laid end to end from `from`.
  auto phases = [&](const std::array<uint8_t, 8>& parent, const RequestTiming& tm, int64_t from) {
    child(parent, "queue", from, static_cast<int64_t>(tm.queue_ns));
    const int64_t c0 = from + static_cast<int64_t>(tm.queue_ns);
    const auto in = static_cast<int64_t>(tm.compute_input_ns);
    const auto inf = static_cast<int64_t>(tm.compute_infer_ns);
    const auto out = static_cast<int64_t>(tm.compute_output_ns);
    const std::array<uint8_t, 8> c = child(parent, "compute", c0, in + inf + out);
    child(c, "compute_input", c0, in);
    child(c, "compute_infer", c0 + in, inf);
    child(c, "compute_output", c0 + in + inf, out);
  };
  const bool ensemble = steps != nullptr && !steps->empty();
  if (ensemble) {
    for (const StepTiming& st : *steps) {
      const int64_t s0 = start + static_cast<int64_t>(st.start_offset_ns);
      const std::array<uint8_t, 8> id =
          child(root.span_id, fmt::format("step {} {}", st.step, st.model), s0,
                static_cast<int64_t>(st.duration_ns));
      if (!st.ok) {
        spans.back().error = true;
        spans.back().message = "the step failed";
      }
      if (st.ok) phases(id, st.timing, s0);
    }
  } else if (generation != nullptr && status.ok()) {
    const auto q = static_cast<int64_t>(generation->queue_ns);
    const auto pre = static_cast<int64_t>(generation->prefill_ns);
    child(root.span_id, "queue", start, q);
    child(root.span_id, "prefill", start + q, pre);
    child(root.span_id, "decode", start + q + pre, static_cast<int64_t>(generation->decode_ns));
  } else if (timing != nullptr && status.ok()) {
    phases(root.span_id, *timing, start);
  }
  spans.insert(spans.begin(), std::move(root));

  State& st = *state_;
  Item item;
  if (st.file_mode.load(std::memory_order_acquire)) {
    // File mode: the reference server's timestamp names, in Unix nanoseconds.
    JsonWriter w(&item.line);
    w.BeginObject();
    w.Key("id");
    w.Uint(traces_started());
    w.Key("trace_id");
    w.String(Hex(t.trace_id_));
    w.Key("model_name");
    w.String(t.model);
    w.Key("model_version");
    w.Int(t.version);
    w.Key("request_id");
    w.String(t.request_id);
    if (!status.ok()) {
      w.Key("error");
      w.String(status.message());
    }
    w.Key("timestamps");
    w.BeginArray();
    auto stamp = [&](std::string_view name, int64_t ns) {
      w.BeginObject();
      w.Key("name");
      w.String(name);
      w.Key("ns");
      w.Int(ns);
      w.EndObject();
    };
    stamp("REQUEST_START", start);
    if (generation != nullptr && status.ok()) {
      const int64_t q = start + static_cast<int64_t>(generation->queue_ns);
      const int64_t first = q + static_cast<int64_t>(generation->prefill_ns);
      stamp("QUEUE_START", start);
      stamp("COMPUTE_START", std::min(q, end));
      stamp("FIRST_TOKEN", std::min(first, end));
      stamp("COMPUTE_END", std::min(first + static_cast<int64_t>(generation->decode_ns), end));
    }
    if (timing != nullptr && status.ok()) {
      const int64_t q = start + static_cast<int64_t>(timing->queue_ns);
      const int64_t in = q + static_cast<int64_t>(timing->compute_input_ns);
      const int64_t inf = in + static_cast<int64_t>(timing->compute_infer_ns);
      stamp("QUEUE_START", start);
      stamp("COMPUTE_START", std::min(q, end));
      stamp("COMPUTE_INPUT_END", std::min(in, end));
      stamp("COMPUTE_OUTPUT_START", std::min(inf, end));
      stamp("COMPUTE_END", std::min(inf + static_cast<int64_t>(timing->compute_output_ns), end));
    }
    stamp("REQUEST_END", end);
    w.EndArray();
    w.EndObject();
  } else {
    item.spans = std::move(spans);
  }
  const size_t n = item.spans.size();
  std::unique_lock lock(st.mu);
  if (st.queued_spans + n > st.settings.max_queue_size ||
      (n == 0 && st.queue.size() >= st.settings.max_queue_size)) {
    spans_dropped_.fetch_add(n == 0 ? 1 : n, std::memory_order_relaxed);
    return;
  }
  st.queued_spans += n;
  st.queue.push_back(std::move(item));
  st.cv.notify_one();
}

}  // namespace kiln
