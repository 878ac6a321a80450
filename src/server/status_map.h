// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one table that maps kiln StatusCodes to protocol status codes: the HTTP status a REST
// endpoint answers with and the gRPC status code a gRPC method returns. Every protocol front end
// (server/http, server/grpc) goes through this table; nothing else in server/ hard-codes a
// status number for an error.
//
//   const ProtocolStatus& p = ProtocolStatusFor(status.code());
//   response.result(p.http);                           // 400, 404, ...
//   if (p.http_retry_after) response.set("Retry-After", "1");
//
// Decisions (KSERVE-V2.md 1.1 fixes the Triton classes; the rest are kiln's choices):
//   OK 200; INVALID_ARGUMENT, UNKNOWN, CANCELLED, ALREADY_EXISTS, FAILED_PRECONDITION, ABORTED,
//   OUT_OF_RANGE 400 (Triton's "anything else"); NOT_FOUND 404; UNAVAILABLE 503;
//   UNIMPLEMENTED 501; INTERNAL 500; PERMISSION_DENIED 403 (Triton's restricted APIs: a tenant
//   outside an API group); UNAUTHENTICATED 401 (a missing or unknown API key; the HTTP front end
//   adds WWW-Authenticate);
//   RESOURCE_EXHAUSTED 429 with Retry-After (a full queue: the request was fine, retry later);
//   DEADLINE_EXCEEDED 504 (the request was fine but not answered in time; a 4xx would tell the
//   client not to retry, 503 would read as "server not ready"); DATA_LOSS 500 (server fault).
//   The gRPC code is the identity: kiln codes are numbered as gRPC's canonical codes.
//
// Thread safety: the table is immutable; call from any thread.

#include <span>

#include "base/status.h"

namespace kiln {

struct ProtocolStatus {
  StatusCode code;
  int http;               // HTTP status code
  int grpc;               // grpc::StatusCode number
  bool http_retry_after;  // the HTTP answer should carry a Retry-After header
};

// The full table, one row per StatusCode, ordered by code value.
std::span<const ProtocolStatus> ProtocolStatusTable();

// The row for `code` (an out-of-range value maps like UNKNOWN).
const ProtocolStatus& ProtocolStatusFor(StatusCode code);

inline int HttpStatusFor(StatusCode code) { return ProtocolStatusFor(code).http; }
inline int GrpcStatusFor(StatusCode code) { return ProtocolStatusFor(code).grpc; }

}  // namespace kiln
