// SPDX-License-Identifier: Apache-2.0
#pragma once
// Small socket helpers for the HTTP side of `kiln bench`: resolving "host:port" once, connecting
// (blocking or not) with TCP_NODELAY, and a blocking one-shot HTTP/1.1 exchange for the control
// calls (metadata, config, statistics). The load path is http_load.h.

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace kiln::bench {

struct Endpoint {
  std::string host;  // as given (for the Host header)
  int port = 0;
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Resolves "host:port" (IPv4 or IPv6 literal in brackets, or a name). InvalidArgument for a
// malformed value, Unavailable when the name does not resolve.
Result<Endpoint> ResolveEndpoint(const std::string& url);

// A connected TCP socket with TCP_NODELAY; non-blocking when asked (the connect may then still
// be in progress: EINPROGRESS is success). Unavailable naming the endpoint on failure.
Result<int> Connect(const Endpoint& ep, bool non_blocking);

struct HttpReply {
  int status = 0;
  std::string body;
};

// One request on a fresh connection (Connection: close), waiting at most `timeout`.
Result<HttpReply> HttpExchange(const Endpoint& ep, const std::string& method,
                               const std::string& path, const std::string& body = "",
                               std::chrono::milliseconds timeout = std::chrono::seconds(30));

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln::bench
