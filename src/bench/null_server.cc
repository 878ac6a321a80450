// SPDX-License-Identifier: Apache-2.0
#include "bench/null_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>

namespace kiln::bench {
namespace {

std::string Response(int status, const std::string& body, const char* content_type) {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n{}", status,
                     status == 200 ? "OK" : "Not Found", content_type, body.size(), body);
}

const std::string& Metadata() {
  static const std::string r = Response(
      200,
      R"({"name":"add_sub","versions":["1"],"platform":"null","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,16]},{"name":"INPUT1","datatype":"FP32","shape":[-1,16]}],"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,16]},{"name":"OUTPUT1","datatype":"FP32","shape":[-1,16]}]})",
      "application/json");
  return r;
}
const std::string& Config() {
  static const std::string r =
      Response(200, R"({"name":"add_sub","max_batch_size":8})", "application/json");
  return r;
}
const std::string& Infer() {
  static const std::string r = Response(
      200,
      R"({"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]},{"name":"OUTPUT1","datatype":"FP32","shape":[1,16],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]})",
      "application/json");
  return r;
}
const std::string& NotFound() {
  static const std::string r =
      Response(404, R"({"error":"the null server has no such endpoint"})", "application/json");
  return r;
}

struct Conn {
  std::string in;
  std::string out;
};

}  // namespace

Result<std::unique_ptr<NullServer>> NullServer::Start(int port, int threads) {
  std::unique_ptr<NullServer> s(new NullServer());
  s->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(s->listen_fd_, 1024) != 0) {
    return Status::Unavailable(
        fmt::format("null server: cannot listen on 127.0.0.1:{}: {}", port, std::strerror(errno)));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(addr.sin_port);
  for (int i = 0; i < std::max(1, threads); ++i) {
    s->threads_.emplace_back([p = s.get()] { p->Loop(); });
  }
  return s;
}

NullServer::~NullServer() { Stop(); }

void NullServer::Stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void NullServer::Loop() {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd_, &ev);
  std::unordered_map<int, Conn> conns;
  epoll_event events[128];
  char buf[65536];
  auto close_conn = [&](int fd) {
    ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    int n = ::epoll_wait(ep, events, 128, 20);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        while (true) {
          int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
          conns[c];
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Conn& conn = it->second;
      bool closed = false;
      while (true) {
        ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
        if (r > 0) {
          conn.in.append(buf, static_cast<size_t>(r));
          continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
        break;
      }
      if (closed) {
        close_conn(fd);
        continue;
      }
      // Answer every complete request in the buffer.
      while (true) {
        size_t end = conn.in.find("\r\n\r\n");
        if (end == std::string::npos) break;
        size_t body = 0;
        size_t cl = conn.in.find("\r\nContent-Length: ");
        if (cl != std::string::npos && cl < end) {
          body = std::strtoull(conn.in.c_str() + cl + 18, nullptr, 10);
        }
        if (conn.in.size() < end + 4 + body) break;
        const std::string* reply;
        if (conn.in.compare(0, 5, "POST ") == 0) {
          reply = &Infer();
          requests_.fetch_add(1, std::memory_order_relaxed);
        } else {
          size_t sp = conn.in.find(' ', 4);
          std::string path = conn.in.substr(4, sp - 4);
          if (path.ends_with("/config"))
            reply = &Config();
          else if (path.find("/stats") == std::string::npos &&
                   path.rfind("/v2/models/add_sub", 0) == 0)
            reply = &Metadata();
          else  // statistics (/stats) are not served, nor any other path
            reply = &NotFound();
        }
        conn.out += *reply;
        conn.in.erase(0, end + 4 + body);
      }
      // Small replies: a blocking-free send normally takes them whole.
      size_t off = 0;
      while (off < conn.out.size()) {
        ssize_t w = ::send(fd, conn.out.data() + off, conn.out.size() - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      if (off < conn.out.size()) {
        close_conn(fd);  // a client that does not read its answers: drop it
        continue;
      }
      conn.out.clear();
    }
  }
  for (auto& [fd, c] : conns) ::close(fd);
  ::close(ep);
}

}  // namespace kiln::bench
