// SPDX-License-Identifier: Apache-2.0
#include "bench/http_load.h"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "base/check.h"

namespace kiln::bench {
namespace {

constexpr int64_t kReconnectDelayNs = 10'000'000;  // after a failed connection
constexpr uint64_t kTimerTag = ~uint64_t{0};

bool IEquals(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return true;
}

class HttpWorker final : public LoadEngine::Worker {
 public:
  HttpWorker(const Endpoint& ep, const std::vector<std::string>& requests, SampleSink& sink,
             const LoadConfig& config, int connections, int shard, int shards, int64_t start_ns,
             const std::atomic<bool>& stop, std::atomic<uint64_t>& sent)
      : ep_(ep),
        requests_(requests),
        sink_(sink),
        open_loop_(config.open_loop),
        connections_(connections),
        start_ns_(start_ns),
        stop_(stop),
        sent_(sent),
        next_request_(static_cast<size_t>(shard)) {
    if (open_loop_) {
      schedule_ = std::make_unique<ArrivalSchedule>(config.rate, config.distribution, config.seed,
                                                    shard, shards);
    }
  }

  void Run() override {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    KILN_CHECK(epfd_ >= 0, "epoll_create1 failed");
    if (open_loop_) {
      timerfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
      KILN_CHECK(timerfd_ >= 0, "timerfd_create failed");
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kTimerTag;
      ::epoll_ctl(epfd_, EPOLL_CTL_ADD, timerfd_, &ev);
      next_ns_ = start_ns_ + schedule_->Next();
      // A few connections up front; more are opened while the backlog needs them.
      for (int i = 0; i < std::min(connections_, 4); ++i) {
        int c = NewConn();
        idle_.push_back(c);
      }
    } else {
      for (int i = 0; i < connections_; ++i) Send(NewConn(), NowNs());
    }
    epoll_event events[128];
    while (!stop_.load(std::memory_order_relaxed)) {
      if (open_loop_) Dispatch();
      if (dead_ > 0) Revive();
      int n = ::epoll_wait(epfd_, events, 128, 20);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kTimerTag) {
          uint64_t expirations;
          [[maybe_unused]] ssize_t r = ::read(timerfd_, &expirations, sizeof(expirations));
          continue;
        }
        int c = static_cast<int>(events[i].data.u64);
        Conn& conn = *conns_[c];
        if (conn.fd < 0) continue;
        if ((events[i].events & EPOLLOUT) && conn.writing) Flush(c);
        if (conn.fd >= 0 && (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) Read(c);
      }
    }
    for (auto& conn : conns_) {
      if (conn->fd >= 0) ::close(conn->fd);
    }
    if (timerfd_ >= 0) ::close(timerfd_);
    ::close(epfd_);
  }

 private:
  struct Conn {
    int fd = -1;
    bool busy = false;
    bool writing = false;  // EPOLLOUT armed
    const std::string* request = nullptr;
    size_t written = 0;
    std::vector<char> buf = std::vector<char>(65536);
    size_t len = 0;
    size_t header_end = 0;  // 0 = headers not complete yet
    size_t body_len = 0;
    int status = 0;
    bool close_after = false;
    int64_t start_ns = 0;
    int64_t lag_ns = 0;
    int64_t retry_at_ns = 0;  // > 0: dead, reconnect then
  };

  int NewConn() {
    conns_.push_back(std::make_unique<Conn>());
    int c = static_cast<int>(conns_.size() - 1);
    Open(c);
    return c;
  }

  void Open(int c) {
    Conn& conn = *conns_[c];
    auto fd = Connect(ep_, true);
    if (!fd.ok()) {
      conn.fd = -1;
      conn.retry_at_ns = NowNs() + kReconnectDelayNs;
      ++dead_;
      return;
    }
    conn.fd = *fd;
    conn.retry_at_ns = 0;
    conn.writing = false;
    conn.len = 0;
    conn.header_end = 0;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(c);
    ::epoll_ctl(epfd_, EPOLL_CTL_ADD, conn.fd, &ev);
  }

  void Revive() {
    int64_t now = NowNs();
    for (size_t c = 0; c < conns_.size(); ++c) {
      Conn& conn = *conns_[c];
      if (conn.retry_at_ns == 0 || conn.retry_at_ns > now) continue;
      --dead_;
      Open(static_cast<int>(c));
      if (conn.fd < 0) continue;
      if (open_loop_) {
        Released(static_cast<int>(c));
      } else {
        Send(static_cast<int>(c), now);
      }
    }
  }

  // Starts a request on connection c; `intended_ns` is when it should have left.
  void Send(int c, int64_t intended_ns) {
    Conn& conn = *conns_[c];
    if (conn.fd < 0) return;  // dead: Revive sends when it reconnects
    int64_t now = NowNs();
    conn.busy = true;
    conn.start_ns = intended_ns;
    conn.lag_ns = now - intended_ns;
    conn.request = &requests_[next_request_++ % requests_.size()];
    conn.written = 0;
    sent_.fetch_add(1, std::memory_order_relaxed);
    Flush(c);
  }

  void Flush(int c) {
    Conn& conn = *conns_[c];
    const std::string& r = *conn.request;
    while (conn.written < r.size()) {
      ssize_t n = ::send(conn.fd, r.data() + conn.written, r.size() - conn.written, MSG_NOSIGNAL);
      if (n > 0) {
        conn.written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!conn.writing) SetWriting(conn, c, true);
        return;
      }
      Fail(c, fmt::format("send to {}: {}", ep_.ToString(), std::strerror(errno)));
      return;
    }
    if (conn.writing) SetWriting(conn, c, false);
  }

  void SetWriting(Conn& conn, int c, bool on) {
    conn.writing = on;
    epoll_event ev{};
    ev.events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(c);
    ::epoll_ctl(epfd_, EPOLL_CTL_MOD, conn.fd, &ev);
  }

  void Read(int c) {
    Conn& conn = *conns_[c];
    while (conn.fd >= 0) {
      if (conn.len == conn.buf.size()) conn.buf.resize(conn.buf.size() * 2);
      ssize_t n = ::recv(conn.fd, conn.buf.data() + conn.len, conn.buf.size() - conn.len, 0);
      if (n > 0) {
        conn.len += static_cast<size_t>(n);
        if (!Parse(c)) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0) {
        Fail(c, fmt::format("{} closed the connection", ep_.ToString()));
      } else {
        Fail(c, fmt::format("recv from {}: {}", ep_.ToString(), std::strerror(errno)));
      }
      return;
    }
  }

  // Returns false when the connection was closed or replaced (stop reading it).
  bool Parse(int c) {
    Conn& conn = *conns_[c];
    if (conn.header_end == 0) {
      const char* b = conn.buf.data();
      const char* end = static_cast<const char*>(memmem(b, conn.len, "\r\n\r\n", 4));
      if (end == nullptr) return true;
      conn.header_end = static_cast<size_t>(end - b) + 4;
      if (conn.len < 12 || std::memcmp(b, "HTTP/1.", 7) != 0) {
        Fail(c, "malformed HTTP response");
        return false;
      }
      conn.status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
      bool have_length = false;
      conn.close_after = false;
      for (const char* line = static_cast<const char*>(memchr(b, '\n', conn.header_end)) + 1;
           line < b + conn.header_end - 2;) {
        const char* eol = static_cast<const char*>(memchr(line, '\n', b + conn.header_end - line));
        size_t n = static_cast<size_t>(eol - line);
        if (n > 15 && IEquals(line, "content-length:", 15)) {
          conn.body_len = static_cast<size_t>(std::strtoull(line + 15, nullptr, 10));
          have_length = true;
        } else if (n > 18 && IEquals(line, "transfer-encoding:", 18)) {
          Fail(c, "chunked HTTP responses are not supported");
          return false;
        } else if (n > 11 && IEquals(line, "connection:", 11)) {
          std::string_view v(line + 11, n - 11);
          if (v.find("close") != std::string_view::npos) conn.close_after = true;
        }
        line = eol + 1;
      }
      if (!have_length) {
        if (conn.status == 204 || conn.status == 304 || conn.status / 100 == 1) {
          conn.body_len = 0;
        } else {
          Fail(c, fmt::format("HTTP {} response without Content-Length", conn.status));
          return false;
        }
      }
      if (conn.header_end + conn.body_len > conn.buf.size()) {
        conn.buf.resize(conn.header_end + conn.body_len);
      }
    }
    if (conn.len < conn.header_end + conn.body_len) return true;
    Complete(c);
    return conns_[c]->fd >= 0;
  }

  void Complete(int c) {
    Conn& conn = *conns_[c];
    int64_t now = NowNs();
    Sample s{now, now - conn.start_ns, conn.lag_ns, conn.status == 200 ? 0 : conn.status};
    if (s.status == 0) {
      sink_.Add(s);
    } else {
      size_t n = std::min<size_t>(conn.body_len, 300);
      sink_.AddError(s, std::string(conn.buf.data() + conn.header_end, n));
    }
    conn.busy = false;
    conn.len = 0;  // one request in flight: nothing can follow the response
    conn.header_end = 0;
    if (conn.buf.size() > (1u << 20)) conn.buf.resize(65536);
    if (conn.close_after) {
      ::close(conn.fd);
      conn.fd = -1;
      Open(c);
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    if (open_loop_) {
      Released(c);
    } else {
      Send(c, now);
    }
  }

  // Open loop: connection c is free; give it the oldest late request or park it.
  void Released(int c) {
    if (!backlog_.empty()) {
      int64_t intended = backlog_.front();
      backlog_.pop_front();
      Send(c, intended);
    } else {
      idle_.push_back(c);
    }
  }

  void Fail(int c, const std::string& message) {
    Conn& conn = *conns_[c];
    int64_t now = NowNs();
    if (conn.busy) {
      sink_.AddError(Sample{now, now - conn.start_ns, conn.lag_ns, kTransportError}, message);
      conn.busy = false;  // counted as failed, not sent again
    }
    if (conn.fd >= 0) {
      ::epoll_ctl(epfd_, EPOLL_CTL_DEL, conn.fd, nullptr);
      ::close(conn.fd);
    }
    conn.fd = -1;
    conn.len = 0;
    conn.header_end = 0;
    conn.writing = false;
    conn.retry_at_ns = now + kReconnectDelayNs;
    ++dead_;
  }

  void Dispatch() {
    int64_t now = NowNs();
    while (next_ns_ <= now) {
      if (!idle_.empty()) {
        int c = idle_.back();
        idle_.pop_back();
        if (conns_[c]->fd < 0) continue;  // died while idle; Revive will bring it back
        Send(c, next_ns_);
      } else if (static_cast<int>(conns_.size()) < connections_) {
        Send(NewConn(), next_ns_);
      } else {
        backlog_.push_back(next_ns_);
      }
      next_ns_ = start_ns_ + schedule_->Next();
    }
    itimerspec its{};
    its.it_value.tv_sec = next_ns_ / 1'000'000'000;
    its.it_value.tv_nsec = next_ns_ % 1'000'000'000;
    ::timerfd_settime(timerfd_, TFD_TIMER_ABSTIME, &its, nullptr);
  }

  const Endpoint& ep_;
  const std::vector<std::string>& requests_;
  SampleSink& sink_;
  const bool open_loop_;
  const int connections_;
  const int64_t start_ns_;
  const std::atomic<bool>& stop_;
  std::atomic<uint64_t>& sent_;
  size_t next_request_;
  std::unique_ptr<ArrivalSchedule> schedule_;
  int64_t next_ns_ = 0;
  int epfd_ = -1;
  int timerfd_ = -1;
  int dead_ = 0;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<int> idle_;
  std::deque<int64_t> backlog_;
};

class HttpLoad : public LoadEngine {
 public:
  HttpLoad(const Endpoint& ep, std::vector<std::string> requests)
      : ep_(ep), requests_(std::move(requests)) {
    KILN_CHECK(!requests_.empty(), "no requests to send");
  }
  ~HttpLoad() override { Stop(); }

 private:
  // Fail early and clearly when nothing listens.
  Status CheckReachable() override {
    KILN_ASSIGN_OR_RETURN(int probe, Connect(ep_, false));
    ::close(probe);
    return Status::OK();
  }
  std::unique_ptr<LoadEngine::Worker> MakeWorker(const WorkerSpec& w) override {
    return std::make_unique<HttpWorker>(ep_, requests_, *w.sink, *w.config, w.slots, w.index,
                                        w.workers, w.start_ns, stop_, sent_);
  }

  Endpoint ep_;
  std::vector<std::string> requests_;
};

}  // namespace

std::unique_ptr<LoadEngine> MakeHttpLoad(const Endpoint& endpoint,
                                         std::vector<std::string> requests) {
  return std::make_unique<HttpLoad>(endpoint, std::move(requests));
}

std::string StatusLabel(int status) {
  if (status == kTransportError) return "connection error";
  if (status >= kGrpcStatusBase) {
    static const char* kNames[] = {"OK",
                                   "CANCELLED",
                                   "UNKNOWN",
                                   "INVALID_ARGUMENT",
                                   "DEADLINE_EXCEEDED",
                                   "NOT_FOUND",
                                   "ALREADY_EXISTS",
                                   "PERMISSION_DENIED",
                                   "RESOURCE_EXHAUSTED",
                                   "FAILED_PRECONDITION",
                                   "ABORTED",
                                   "OUT_OF_RANGE",
                                   "UNIMPLEMENTED",
                                   "INTERNAL",
                                   "UNAVAILABLE",
                                   "DATA_LOSS",
                                   "UNAUTHENTICATED"};
    int code = status - kGrpcStatusBase;
    return code >= 0 && code <= 16 ? std::string("gRPC ") + kNames[code]
                                   : fmt::format("gRPC {}", code);
  }
  return fmt::format("HTTP {}", status);
}

}  // namespace kiln::bench
