// SPDX-License-Identifier: Apache-2.0
#pragma once
// HttpServer: the KServe v2 HTTP/REST front end (KSERVE-V2.md section 1). It owns the listening
// socket and a pool of io threads (Boost.Beast over Asio); it translates requests to the
// ModelManager / LoadedModel interface and answers with JSON. Beast stays out of this header.
//
//   HttpServerOptions options;
//   options.port = 8000;
//   options.server_version = "0.1.0";
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> http, HttpServer::Create(options, manager));
//   KILN_RETURN_IF_ERROR(http->Start());   // returns once listening
//   ...                                     // on SIGTERM:
//   http->StartDraining();                  // not ready; new inference answered 503
//   manager->Shutdown();                    // queued and running requests finish
//   http->Stop();                           // in-flight responses are written, then it returns
//
// Endpoints: GET /v2/health/live, GET /v2/health/ready, GET /v2 (server metadata),
// GET /v2/models/{m}[/versions/{v}] (model metadata), GET .../ready, POST .../infer (JSON and
// binary tensors, gzip/deflate bodies both ways, classification; see infer_json.h),
// GET /v2/models[/{m}[/versions/{v}]]/stats (statistics), POST /v2/repository/index,
// POST /v2/repository/models/{m}/load and .../unload (model repository; a {repo} path segment
// answers 501). Other protocol paths answer 404 {"error":"Not Found"}; a known path with the
// wrong method 405. Errors are {"error": "..."} with the status from server/status_map.h; a body
// over max_request_bytes is refused with 413 from its Content-Length (or as soon as a chunked body
// passes the limit) without being stored, and that connection is closed.
//
// Connections: HTTP/1.1 keep-alive, at most max_connections open (503 and close beyond), one
// request at a time per connection (pipelined requests are answered in order). Each connection runs
// on its own strand; inference completes through a callback that may run on any thread and posts
// the response back to that strand, so no io thread ever waits for a model. Fixed timeouts: a
// connection idle (or sending a request) for 300 s is closed; a response not taken by the client
// within 60 s closes the connection.
//
// Tenants and TLS (docs/security.md): with a TenantGate every routed request is authorized for
// its API group (server/security/api_groups.h) from its `Authorization: Bearer <key>` header
// before it is handled: 401 (with WWW-Authenticate: Bearer) or 403 {"error": "..."} otherwise;
// inference requests are admitted by the tenant's limits (429 with the computed Retry-After),
// hold a concurrency slot until their answer is handed over, and generations charge their tokens
// as they are produced. A tenant of class best_effort marks its requests' service_class. With
// TLS, every connection starts with a TLS handshake (10 s limit; a failed one closes the
// connection and is logged at debug level), and under mutual TLS the client must present a
// certificate that chains to the root certificates and is valid now. Over TLS a client that
// closes its connection while its answer is pending is noticed when the answer is written (the
// disconnect watch sees TLS records, not the close).
//
// Thread safety: Start, Stop, SetReady and port may be called from any thread (not from a
// model callback). Stop is idempotent and the destructor calls it.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "server/security/tls.h"

namespace kiln {

class ModelManager;
class TenantGate;

struct HttpServerOptions {
  std::string address = "0.0.0.0";       // IP literal or host name to listen on
  int port = 8000;                       // 0 = pick a free port (see HttpServer::port())
  int threads = 0;                       // io threads; 0 = number of cores, at least 2
  size_t max_request_bytes = 64u << 20;  // largest accepted request body (also decompressed)
  // Most connections open at once; 0 = no limit. A connection past it is answered 503
  // {"error": "too many connections ..."} with Retry-After and closed.
  size_t max_connections = 0;
  std::string server_version;  // "version" of GET /v2
  // Tenants: who may call what, and their limits; null = no authentication, no limits.
  std::shared_ptr<TenantGate> gate;
  // HTTPS (checked by LoadTlsMaterial); unset = plain HTTP.
  std::optional<TlsMaterial> tls;
};

class HttpServer {
 public:
  // Validates the options (port 0..65535, threads >= 0, max_request_bytes > 0); INVALID_ARGUMENT
  // otherwise. REQUIRES: manager != nullptr and outlives the server.
  static Result<std::unique_ptr<HttpServer>> Create(const HttpServerOptions& options,
                                                    ModelManager* manager);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens, starts the io threads and returns. UNAVAILABLE naming address:port when
  // the address cannot be bound (port taken, address not local); INVALID_ARGUMENT for an address
  // that does not resolve or TLS material OpenSSL refuses; FAILED_PRECONDITION when called twice
  // or after Stop.
  Status Start();
  // The bound port (the chosen one when options.port was 0); 0 before Start.
  int port() const;
  // Readiness flag (initially true): /v2/health/ready answers 200 only when it is set and
  // ModelManager::AllModelsReady().
  void SetReady(bool ready);
  // Shutdown begins: readiness turns false for good; new inference and model load requests are
  // answered 503 UNAVAILABLE; everything else keeps answering, and requests already accepted
  // are answered normally (until Stop).
  void StartDraining();
  // Inference requests handed to a model and not answered by it yet.
  size_t InferencesInFlight() const;
  // Stops accepting, closes idle connections and those still sending a request, lets requests
  // already being handled finish and write their responses (then closes those connections), and
  // joins the io threads. REQUIRES: every model callback for an accepted request is eventually
  // called (the LoadedModel contract); Stop waits for them.
  void Stop();

  class Impl;  // public only so the implementation's helpers can name it

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
