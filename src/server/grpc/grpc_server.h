// SPDX-License-Identifier: Apache-2.0
#pragma once
// GrpcServer: the KServe v2 gRPC front end (KSERVE-V2.md section 2): service
// inference.GRPCInferenceService plus the standard grpc.health.v1.Health service (grpc++'s
// built-in one: SERVING from Start while the readiness flag is set, NOT_SERVING once draining
// begins; unlike ServerReady it does not follow the models' load state). It translates calls
// to the ModelManager / LoadedModel interface; gRPC types stay out of this header.
//
//   GrpcServerOptions options;
//   options.port = 8001;
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> grpc, GrpcServer::Create(options, manager));
//   KILN_RETURN_IF_ERROR(grpc->Start());   // returns once listening
//   ...                                     // on SIGTERM:
//   grpc->StartDraining();                  // not ready; new inference answered UNAVAILABLE
//   manager->Shutdown();                    // queued and running requests finish
//   grpc->Stop();                           // answers are sent, then it returns
//
// Threads: `threads` completion-queue threads run every handler; none of them ever waits for
// a model: ModelInfer hands the request to LoadedModel::Infer and finishes the call from the
// model's callback, and repository load / unload run on a separate control thread.
// ModelStreamInfer answers each request of a stream with one response, in completion order;
// a request's error goes in that response's error_message and the stream stays open. Message
// size limits: INT32_MAX both ways (the reference server's). The shared-memory RPCs answer
// UNIMPLEMENTED; TraceSetting and LogSettings change the settings of the whole server. Error codes
// come from server/status_map.h.
//
// Tenants and TLS (docs/security.md): with a TenantGate each call of
// inference.GRPCInferenceService is authorized for its method's API group
// (server/security/api_groups.h) from its `authorization: Bearer <key>` metadata: UNAUTHENTICATED
// or PERMISSION_DENIED otherwise. Each inference request (each message of a ModelStreamInfer
// stream) is admitted by the tenant's limits: RESOURCE_EXHAUSTED with a `retry-after` trailing
// metadata entry (whole seconds) for ModelInfer, an error response in the stream for
// ModelStreamInfer. The standard health service is not gated. With TLS the port serves only TLS
// (grpc::SslServerCredentials); under mutual TLS a client must present a certificate that chains
// to the root certificates and is valid now.
//
// Thread safety: Start, Stop, SetReady, StartDraining, port and InferencesInFlight may be
// called from any thread (not from a model callback). Stop is idempotent; the destructor calls
// it.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "server/security/tls.h"

namespace kiln {

class ModelManager;
class TenantGate;

struct GrpcServerOptions {
  std::string address = "0.0.0.0";  // IP literal or host name to listen on
  int port = 8001;                  // 0 = pick a free port (see GrpcServer::port())
  int threads = 0;                  // completion-queue threads; 0 = number of cores, at least 2
  std::string server_version;       // ServerMetadata's version
  // Tenants: who may call what, and their limits; null = no authentication, no limits.
  std::shared_ptr<TenantGate> gate;
  // TLS (checked by LoadTlsMaterial); unset = plaintext.
  std::optional<TlsMaterial> tls;
};

class GrpcServer {
 public:
  // Validates the options (port 0..65535, threads >= 0); INVALID_ARGUMENT otherwise.
  // REQUIRES: manager != nullptr and outlives the server.
  static Result<std::unique_ptr<GrpcServer>> Create(const GrpcServerOptions& options,
                                                    ModelManager* manager);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds, listens, starts the threads and returns. UNAVAILABLE naming address:port when it
  // cannot listen; FAILED_PRECONDITION when called twice or after Stop.
  Status Start();
  // The bound port (the chosen one when options.port was 0); 0 before Start.
  int port() const;
  // Readiness flag (initially true): ServerReady and the health service answer ready only when
  // it is set and ModelManager::AllModelsReady().
  void SetReady(bool ready);
  // Shutdown begins: readiness turns false for good; new inference and model loads are answered
  // UNAVAILABLE; everything else keeps answering, and accepted requests are answered.
  void StartDraining();
  // Inference requests handed to a model and not answered by it yet.
  size_t InferencesInFlight() const;
  // Stops accepting calls, lets the calls in progress finish (those still open after a 5 s
  // grace period, such as a stream the client keeps open, are cancelled), closes every
  // connection, waits for every model callback and joins the threads.
  // REQUIRES: every model callback for an accepted request is eventually called.
  void Stop();

  class Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
