// SPDX-License-Identifier: Apache-2.0
#include "bench/gen_client.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>

#include "base/check.h"
#include "bench/gen_stream.h"
#include "server/json_writer.h"

namespace kiln::bench {
namespace {

constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kMaxErrorBodyBytes = 2048;
constexpr int64_t kTimeoutCheckNs = 100'000'000;
constexpr int64_t kProgressNs = 1'000'000'000;
constexpr int64_t kDrainGraceNs = 1'000'000'000;  // for the body to end after [DONE]

// The message of an error body: OpenAI's {"error": {"message"}}, {"error": "..."}, FastAPI's
// {"detail": ...}, {"message": ...}, else the body's start.
std::string ErrorBodyMessage(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::string_view s;
  if (parser.parse(body).get(root) == simdjson::SUCCESS) {
    simdjson::dom::element e;
    if (root["error"].get(e) == simdjson::SUCCESS) {
      if (e.get(s) == simdjson::SUCCESS || e["message"].get(s) == simdjson::SUCCESS) {
        return std::string(s);
      }
    }
    if (root["detail"].get(s) == simdjson::SUCCESS || root["message"].get(s) == simdjson::SUCCESS) {
      return std::string(s);
    }
    if (root["detail"].get(e) == simdjson::SUCCESS) return simdjson::minify(e).substr(0, 300);
  }
  std::string out = body.substr(0, 300);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

class StreamLoop {
 public:
  StreamLoop(const Endpoint& ep, std::span<const GenWork> work, const GenStreamOptions& options,
             int64_t start_ns, const std::function<void(const GenProgress&)>& progress)
      : ep_(ep),
        work_(work),
        options_(options),
        start_ns_(start_ns),
        progress_(progress),
        records_(work.size()),
        retried_(work.size(), false) {}

  std::vector<GenRecord> Run() {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    KILN_CHECK(epfd_ >= 0, "epoll_create1 failed: ", std::strerror(errno));
    for (size_t i = 0; i < work_.size(); ++i) {
      records_[i].intended_ns = start_ns_ + work_[i].offset_ns;
      records_[i].due_ns = work_[i].offset_ns;
      records_[i].dataset_input_tokens = work_[i].dataset_input_tokens;
    }
    int64_t next_check = NowNs() + kTimeoutCheckNs;
    int64_t next_progress = NowNs() + kProgressNs;
    epoll_event events[256];
    while (finished_ < work_.size()) {
      int64_t now = NowNs();
      while (next_ < work_.size() && records_[next_].intended_ns <= now)
        pending_.push_back(next_++);
      while (!pending_.empty() &&
             (options_.max_concurrency <= 0 || in_flight_ < options_.max_concurrency)) {
        size_t i = pending_.front();
        pending_.pop_front();
        Start(i);
      }
      if (finished_ >= work_.size()) break;
      int wait_ms = 100;
      if (next_ < work_.size() && pending_.empty()) {
        int64_t until = records_[next_].intended_ns - now;
        wait_ms = static_cast<int>(std::clamp<int64_t>((until + 999'999) / 1'000'000, 0, 100));
      }
      int n = ::epoll_wait(epfd_, events, 256, wait_ms);
      for (int k = 0; k < n; ++k) {
        size_t c = static_cast<size_t>(events[k].data.u64);
        if (c >= conns_.size() || conns_[c]->fd < 0) continue;
        if ((events[k].events & EPOLLOUT) && conns_[c]->want_out) Flush(c);
        if (conns_[c]->fd >= 0 && (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) Read(c);
      }
      now = NowNs();
      if (now >= next_check) {
        CheckTimeouts(now);
        next_check = now + kTimeoutCheckNs;
      }
      if (progress_ && now >= next_progress) {
        progress_(GenProgress{work_.size(), finished_, failed_, static_cast<size_t>(in_flight_)});
        next_progress = now + kProgressNs;
      }
    }
    for (size_t c = 0; c < conns_.size(); ++c) {
      if (conns_[c]->fd >= 0) ::close(conns_[c]->fd);
    }
    ::close(epfd_);
    if (progress_) progress_(GenProgress{work_.size(), finished_, failed_, 0});
    return std::move(records_);
  }

 private:
  enum class Framing { kChunked, kLength, kUntilClose };

  struct Conn {
    int fd = -1;
    int64_t req = -1;      // the request holding it; -1 when idle
    bool decided = false;  // the request's outcome is recorded; the rest of the body is skipped
    bool reused = false;   // carried an earlier response
    bool want_out = false;
    size_t written = 0;
    // The current response.
    bool got_bytes = false;
    bool head_done = false;
    std::string head_buf;
    ResponseHead head;
    Framing framing = Framing::kUntilClose;
    ChunkedDecoder chunked;
    int64_t body_left = 0;
    SseParser sse;
    std::string error_body;
  };

  void ResetResponse(Conn& conn) {
    conn.decided = false;
    conn.got_bytes = false;
    conn.head_done = false;
    conn.head_buf.clear();
    conn.head = ResponseHead{};
    conn.framing = Framing::kUntilClose;
    conn.chunked = ChunkedDecoder{};
    conn.body_left = 0;
    conn.sse = SseParser{};
    conn.error_body.clear();
  }

  // A new connection slot, or -1 with `error` set.
  int64_t Open(std::string& error) {
    auto fd = Connect(ep_, true);
    if (!fd.ok()) {
      error = fd.status().message();
      return -1;
    }
    size_t c;
    if (!free_.empty()) {
      c = free_.back();
      free_.pop_back();
      *conns_[c] = Conn{};
    } else {
      conns_.push_back(std::make_unique<Conn>());
      c = conns_.size() - 1;
    }
    conns_[c]->fd = *fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c;
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, *fd, &ev);
    return static_cast<int64_t>(c);
  }

  void CloseConn(size_t c) {
    Conn& conn = *conns_[c];
    if (conn.fd < 0) return;
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, conn.fd, nullptr);
    ::close(conn.fd);
    conn.fd = -1;
    conn.req = -1;
    auto it = std::find(idle_.begin(), idle_.end(), c);
    if (it != idle_.end()) idle_.erase(it);
    free_.push_back(c);
  }

  void Start(size_t i) {
    ++in_flight_;
    records_[i].send_ns = NowNs();
    Assign(i);
  }

  // Puts request i on an idle connection or a new one.
  void Assign(size_t i) {
    int64_t c = -1;
    while (c < 0 && !idle_.empty()) {
      c = static_cast<int64_t>(idle_.back());
      idle_.pop_back();
      if (conns_[c]->fd < 0) c = -1;
    }
    if (c < 0) {
      std::string error;
      c = Open(error);
      if (c < 0) {
        FailUnsent(i, error);
        return;
      }
    }
    Conn& conn = *conns_[c];
    ResetResponse(conn);
    conn.req = static_cast<int64_t>(i);
    conn.written = 0;
    Flush(static_cast<size_t>(c));
  }

  void Flush(size_t c) {
    Conn& conn = *conns_[c];
    if (conn.req < 0) return;
    const std::string& r = work_[conn.req].http_request;
    while (conn.written < r.size()) {
      ssize_t n = ::send(conn.fd, r.data() + conn.written, r.size() - conn.written, MSG_NOSIGNAL);
      if (n > 0) {
        conn.written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!conn.want_out) SetWantOut(c, true);
        return;
      }
      Lost(c, fmt::format("sending to {}: {}", ep_.ToString(), std::strerror(errno)));
      return;
    }
    if (conn.want_out) SetWantOut(c, false);
  }

  void SetWantOut(size_t c, bool on) {
    Conn& conn = *conns_[c];
    conn.want_out = on;
    epoll_event ev{};
    ev.events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
    ev.data.u64 = c;
    ::epoll_ctl(epfd_, EPOLL_CTL_MOD, conn.fd, &ev);
  }

  void Read(size_t c) {
    char buf[65536];
    while (conns_[c]->fd >= 0) {
      ssize_t n = ::recv(conns_[c]->fd, buf, sizeof(buf), 0);
      if (n > 0) {
        Consume(c, std::string_view(buf, static_cast<size_t>(n)), NowNs());
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0) {
        Eof(c);
      } else {
        Lost(c, fmt::format("receiving from {}: {}", ep_.ToString(), std::strerror(errno)));
      }
      return;
    }
  }

  void Consume(size_t c, std::string_view data, int64_t now) {
    Conn& conn = *conns_[c];
    if (conn.req < 0) {
      CloseConn(c);  // bytes on an idle connection: nothing to pair them with
      return;
    }
    conn.got_bytes = true;
    std::string rest;
    if (!conn.head_done) {
      conn.head_buf.append(data);
      size_t end = conn.head_buf.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (conn.head_buf.size() > kMaxHeadBytes) Bad(c, now, "response head too large");
        return;
      }
      if (!ParseResponseHead(std::string_view(conn.head_buf).substr(0, end + 2), conn.head)) {
        Bad(c, now, "malformed HTTP response: " + conn.head_buf.substr(0, 80));
        return;
      }
      rest = conn.head_buf.substr(end + 4);
      conn.head_buf.clear();
      if (conn.head.status / 100 == 1) {  // 100 Continue and friends: the real head follows
        conn.head = ResponseHead{};
        if (!rest.empty()) Consume(c, rest, now);
        return;
      }
      conn.head_done = true;
      if (conn.head.chunked) {
        conn.framing = Framing::kChunked;
      } else if (conn.head.content_length >= 0) {
        conn.framing = Framing::kLength;
        conn.body_left = conn.head.content_length;
      } else if (conn.head.status == 204 || conn.head.status == 304) {
        conn.framing = Framing::kLength;
        conn.body_left = 0;
      } else {
        conn.framing = Framing::kUntilClose;
      }
      data = rest;
      if (conn.framing == Framing::kLength && conn.body_left == 0) {
        BodyEnd(c, now);
        return;
      }
    }
    bool ended = false;
    if (conn.framing == Framing::kChunked) {
      std::string payload;
      int64_t used = conn.chunked.Feed(data, payload);
      if (used < 0) {
        Bad(c, now, "malformed chunked encoding in the response");
        return;
      }
      Payload(c, payload, now);
      ended = conn.chunked.done();
    } else if (conn.framing == Framing::kLength) {
      size_t take = std::min<size_t>(data.size(), static_cast<size_t>(conn.body_left));
      Payload(c, data.substr(0, take), now);
      conn.body_left -= static_cast<int64_t>(take);
      ended = conn.body_left == 0;
    } else {
      Payload(c, data, now);
    }
    if (ended) BodyEnd(c, now);
  }

  void Payload(size_t c, std::string_view bytes, int64_t now) {
    Conn& conn = *conns_[c];
    if (conn.decided || bytes.empty()) return;  // the rest of a decided response is skipped
    if (conn.head.status != 200) {
      size_t room = kMaxErrorBodyBytes - std::min(kMaxErrorBodyBytes, conn.error_body.size());
      conn.error_body.append(bytes.substr(0, room));
      return;
    }
    events_.clear();
    conn.sse.Feed(bytes, events_);
    const size_t i = static_cast<size_t>(conn.req);
    GenRecord& rec = records_[i];
    for (const SseEvent& ev : events_) {
      StreamChunk chunk = ReadStreamChunk(ev);
      if (chunk.prompt_tokens >= 0) rec.prompt_tokens = chunk.prompt_tokens;
      if (chunk.completion_tokens >= 0) rec.completion_tokens = chunk.completion_tokens;
      switch (chunk.kind) {
        case StreamChunk::Kind::kContent:
          rec.chunk_ns.push_back(now);
          break;
        case StreamChunk::Kind::kDone:
          Decide(conn, now, "", "");
          return;
        case StreamChunk::Kind::kError:
          Decide(conn, now, "error event", chunk.error);
          return;
        case StreamChunk::Kind::kInvalid:
          Decide(conn, now, "bad response", chunk.error);
          return;
        case StreamChunk::Kind::kOther:
          break;
      }
    }
  }

  // The response body is complete (chunked end or Content-Length reached, not a close): the
  // request is over and the connection is free again.
  void BodyEnd(size_t c, int64_t now) {
    Conn& conn = *conns_[c];
    if (conn.head.status != 200) {
      Decide(conn, now, fmt::format("HTTP {}", conn.head.status),
             fmt::format("HTTP {}: {}", conn.head.status, ErrorBodyMessage(conn.error_body)));
    } else {
      Decide(conn, now, "", "");  // a stream that ends without [DONE]
    }
    Release(c);
    if (conn.head.close) {
      CloseConn(c);
      return;
    }
    ResetResponse(conn);
    conn.reused = true;
    idle_.push_back(c);
  }

  void Eof(size_t c) {
    Conn& conn = *conns_[c];
    if (conn.req >= 0 && conn.head_done && conn.framing == Framing::kUntilClose) {
      if (conn.head.status != 200 || conn.decided) {
        // An error body, or a stream after its [DONE], delimited by the close.
        BodyEnd(c, NowNs());
        CloseConn(c);
        return;
      }
    }
    Lost(c, conn.head_done
                ? fmt::format("{} closed the connection before the stream ended", ep_.ToString())
                : fmt::format("{} closed the connection without answering", ep_.ToString()));
  }

  // The connection is gone (EOF, reset, send error).
  void Lost(size_t c, const std::string& message) {
    Conn& conn = *conns_[c];
    const int64_t req = conn.req;
    if (req < 0) {
      CloseConn(c);
      return;
    }
    if (conn.reused && !conn.got_bytes && !retried_[req]) {
      // A keep-alive connection the server had closed while idle: resend once.
      retried_[req] = true;
      conn.req = -1;
      CloseConn(c);
      Assign(static_cast<size_t>(req));
      return;
    }
    Decide(conn, NowNs(), "connection error", message);
    Release(c);
    CloseConn(c);
  }

  // A malformed response: fail its request and drop the connection.
  void Bad(size_t c, int64_t now, const std::string& message) {
    Decide(*conns_[c], now, "bad response", message);
    Release(c);
    CloseConn(c);
  }

  void CheckTimeouts(int64_t now) {
    for (size_t c = 0; c < conns_.size(); ++c) {
      Conn& conn = *conns_[c];
      if (conn.fd < 0 || conn.req < 0) continue;
      if (conn.decided) {
        // [DONE] (or an error) came but the body has not ended: give the server a moment to
        // finish it, then stop waiting (the outcome stands).
        if (now - records_[conn.req].done_ns >= kDrainGraceNs) {
          Release(c);
          CloseConn(c);
        }
        continue;
      }
      if (now - records_[conn.req].send_ns < options_.request_timeout_ns) continue;
      Decide(conn, now, "timeout",
             fmt::format("no complete answer within {:g} s (--request-timeout)",
                         static_cast<double>(options_.request_timeout_ns) / 1e9));
      Release(c);
      CloseConn(c);
    }
  }

  // Records the outcome of the connection's request once (later calls are ignored): success
  // when `kind` is empty and it carried content. The request keeps its slot until Release.
  void Decide(Conn& conn, int64_t now, std::string kind, std::string message) {
    if (conn.decided || conn.req < 0) return;
    conn.decided = true;
    GenRecord& rec = records_[conn.req];
    rec.done_ns = now;
    if (kind.empty() && rec.chunk_ns.empty()) {
      kind = "no content";
      message = "the stream ended without a content chunk";
    }
    rec.ok = kind.empty();
    rec.error_kind = std::move(kind);
    rec.error = std::move(message);
  }

  // The connection's request is over: its slot is free. REQUIRES: decided.
  void Release(size_t c) {
    Conn& conn = *conns_[c];
    if (conn.req < 0) return;
    KILN_DCHECK(conn.decided, "request released without an outcome");
    if (!records_[conn.req].ok) ++failed_;
    ++finished_;
    --in_flight_;
    conn.req = -1;
  }

  // A request that never got a connection.
  void FailUnsent(size_t i, const std::string& message) {
    GenRecord& rec = records_[i];
    rec.done_ns = NowNs();
    rec.ok = false;
    rec.error_kind = "connection error";
    rec.error = message;
    ++failed_;
    ++finished_;
    --in_flight_;
  }

  const Endpoint& ep_;
  std::span<const GenWork> work_;
  const GenStreamOptions options_;
  const int64_t start_ns_;
  const std::function<void(const GenProgress&)>& progress_;
  std::vector<GenRecord> records_;
  std::vector<bool> retried_;
  int epfd_ = -1;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<size_t> idle_;
  std::vector<size_t> free_;
  std::deque<size_t> pending_;  // due, waiting for a concurrency slot
  size_t next_ = 0;             // the next request not yet due
  size_t finished_ = 0;
  size_t failed_ = 0;
  int in_flight_ = 0;
  std::vector<SseEvent> events_;
};

}  // namespace

std::string BuildGenRequestBody(const GenPrompt& prompt, const std::string& model, bool chat,
                                double temperature) {
  std::string b = "{\"model\":";
  AppendJsonString(&b, model);
  if (chat) {
    b += ",\"messages\":";
    if (!prompt.messages_json.empty()) {
      b += prompt.messages_json;
    } else {
      b += "[{\"role\":\"user\",\"content\":";
      AppendJsonString(&b, prompt.text);
      b += "}]";
    }
  } else {
    b += ",\"prompt\":";
    if (!prompt.token_ids.empty()) {
      b += '[';
      for (size_t k = 0; k < prompt.token_ids.size(); ++k) {
        if (k > 0) b += ',';
        b += std::to_string(prompt.token_ids[k]);
      }
      b += ']';
    } else {
      AppendJsonString(&b, prompt.text);
    }
  }
  b += fmt::format(",\"max_tokens\":{},\"temperature\":", prompt.output_tokens);
  AppendJsonDouble(&b, temperature);
  b += ",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true}";
  return b;
}

std::string BuildGenHttpRequest(const Endpoint& endpoint, const std::string& path,
                                const std::string& body, const std::string& api_key) {
  std::string host =
      endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
  std::string r = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: kiln-bench\r\nContent-Type: "
      "application/json\r\nAccept: text/event-stream\r\n",
      path, host, endpoint.port);
  if (!api_key.empty()) r += "Authorization: Bearer " + api_key + "\r\n";
  r += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  r += body;
  return r;
}

std::vector<GenRecord> RunGenStreams(const Endpoint& endpoint, std::span<const GenWork> work,
                                     const GenStreamOptions& options, int64_t start_ns,
                                     const std::function<void(const GenProgress&)>& progress) {
  StreamLoop loop(endpoint, work, options, start_ns, progress);
  return loop.Run();
}

}  // namespace kiln::bench
