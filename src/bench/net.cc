// SPDX-License-Identifier: Apache-2.0
#include "bench/net.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace kiln::bench {

Result<Endpoint> ResolveEndpoint(const std::string& url) {
  std::string text = url;
  if (text.rfind("http://", 0) == 0) text = text.substr(7);
  if (!text.empty() && text.back() == '/') text.pop_back();
  std::string host, port_text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::InvalidArgument(fmt::format("-u '{}': expected [IPv6]:PORT", url));
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      return Status::InvalidArgument(fmt::format("-u '{}': expected HOST:PORT", url));
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  int port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (host.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      port <= 0 || port > 65535) {
    return Status::InvalidArgument(
        fmt::format("-u '{}': expected HOST:PORT with a port in 1..65535", url));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::Unavailable(fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc)));
  }
  Endpoint ep;
  ep.host = host;
  ep.port = port;
  // "localhost" may resolve to ::1 and 127.0.0.1 while the server listens on one of them only:
  // keep the first address that accepts a connection (else the first address).
  std::memcpy(&ep.addr, res->ai_addr, res->ai_addrlen);
  ep.addr_len = res->ai_addrlen;
  for (addrinfo* ai = res->ai_next != nullptr ? res : nullptr; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    bool ok = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    ::close(fd);
    if (ok) {
      std::memcpy(&ep.addr, ai->ai_addr, ai->ai_addrlen);
      ep.addr_len = ai->ai_addrlen;
      break;
    }
  }
  freeaddrinfo(res);
  return ep;
}

Result<int> Connect(const Endpoint& ep, bool non_blocking) {
  int fd = ::socket(ep.addr.ss_family,
                    SOCK_STREAM | SOCK_CLOEXEC | (non_blocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) {
    return Status::Unavailable(fmt::format("socket(): {}", std::strerror(errno)));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&ep.addr), ep.addr_len) != 0 &&
      !(non_blocking && errno == EINPROGRESS)) {
    int err = errno;
    ::close(fd);
    return Status::Unavailable(
        fmt::format("cannot connect to {}: {}", ep.ToString(), std::strerror(err)));
  }
  return fd;
}

Result<HttpReply> HttpExchange(const Endpoint& ep, const std::string& method,
                               const std::string& path, const std::string& body,
                               std::chrono::milliseconds timeout) {
  KILN_ASSIGN_OR_RETURN(int fd, Connect(ep, false));
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string req =
      fmt::format("{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", method, path, ep.host);
  if (!body.empty() || method == "POST") {
    req += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size());
  }
  req += "\r\n" + body;
  for (size_t off = 0; off < req.size();) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return Status::Unavailable(
          fmt::format("sending to {} failed: {}", ep.ToString(), std::strerror(err)));
    }
    off += static_cast<size_t>(n);
  }
  std::string in;
  char buf[16384];
  size_t header_end = std::string::npos;
  int64_t content_length = -1;
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      if (err == EAGAIN || err == EWOULDBLOCK) {
        return Status::Unavailable(fmt::format("no answer from {} for {} {} within {} ms",
                                               ep.ToString(), method, path, timeout.count()));
      }
      return Status::Unavailable(fmt::format("no answer from {} for {} {}: {}", ep.ToString(),
                                             method, path, std::strerror(err)));
    }
    if (n == 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = in.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        std::string head = in.substr(0, header_end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t p = head.find("\r\ncontent-length:");
        if (p != std::string::npos) content_length = std::atoll(head.c_str() + p + 17);
      }
    }
    if (header_end != std::string::npos && content_length >= 0 &&
        in.size() >= header_end + 4 + static_cast<size_t>(content_length)) {
      break;
    }
  }
  ::close(fd);
  if (in.size() < 12 || in.compare(0, 5, "HTTP/") != 0 || header_end == std::string::npos) {
    return Status::Unavailable(
        fmt::format("{} {} on {}: not an HTTP response", method, path, ep.ToString()));
  }
  HttpReply reply;
  reply.status = std::atoi(in.c_str() + 9);
  reply.body = in.substr(header_end + 4);
  if (content_length >= 0 && reply.body.size() > static_cast<size_t>(content_length)) {
    reply.body.resize(static_cast<size_t>(content_length));
  }
  return reply;
}

}  // namespace kiln::bench
