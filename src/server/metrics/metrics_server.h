// SPDX-License-Identifier: Apache-2.0
#pragma once
// MetricsServer: the Prometheus scrape endpoint (`GET /metrics` on --metrics-port, default
// 8002). A small HTTP/1.1 listener (Boost.Beast over Asio, one io thread) separate from the
// inference server, as in the reference server; the document comes from a callback.
//
//   MetricsServerOptions options;
//   options.port = 8002;
//   KILN_ASSIGN_OR_RETURN(auto metrics, MetricsServer::Create(options, [&] { return Render(); }));
//   KILN_RETURN_IF_ERROR(metrics->Start());   // returns once listening
//   ...
//   metrics->Stop();
//
// Requests: GET (and HEAD) of /metrics or /metrics/ answer 200 with the callback's text and
// Content-Type kExpositionContentType; another method on that path 405 (with Allow); any other
// path 404. Keep-alive; a connection idle for 30 s, or a request over 8 KiB, is closed. With
// an `authorize` callback (the tenants' `metrics` API group, docs/security.md) a scrape is
// answered only when it returns OK for the request's Authorization header; otherwise 401 (with
// WWW-Authenticate: Bearer) or 403 and the message as text. The endpoint is plain HTTP.
//
// Thread safety: Start, Stop and port may be called from any thread; the callback runs on the
// io thread (one scrape at a time) and must be thread-safe with respect to the rest of the
// program. Stop is idempotent and the destructor calls it.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln {

struct MetricsServerOptions {
  std::string address = "0.0.0.0";  // IP literal or host name to listen on
  int port = 8002;                  // 0 = pick a free port (see MetricsServer::port())
  // Called on the io thread with the Authorization header's value (empty when absent) of each
  // GET / HEAD /metrics; an error status refuses the scrape. Empty: every scrape is answered.
  std::function<Status(std::string_view authorization)> authorize;
};

class MetricsServer {
 public:
  using RenderFn = std::function<std::string()>;
  // INVALID_ARGUMENT for a port outside 0..65535. REQUIRES: render is non-empty.
  static Result<std::unique_ptr<MetricsServer>> Create(const MetricsServerOptions& options,
                                                       RenderFn render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds, listens and starts the io thread. UNAVAILABLE naming address:port when it cannot
  // bind; INVALID_ARGUMENT for an address that does not resolve; FAILED_PRECONDITION when
  // called twice or after Stop.
  Status Start();
  // The bound port (the chosen one when options.port was 0); 0 before Start.
  int port() const;
  // Closes the listener and every connection and joins the io thread.
  void Stop();

 private:
  class Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
