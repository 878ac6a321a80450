// SPDX-License-Identifier: Apache-2.0
#pragma once
// API groups: the endpoints of the HTTP and gRPC front ends grouped as the reference server
// groups them for its restricted APIs (Triton's --http-restricted-api and
// --grpc-restricted-protocol), plus kiln's own `metrics` group for the Prometheus port. The auth
// file (auth_config.h) opens each group to everyone or restricts it to named tenants.
//
//   std::optional<ApiGroup> g = ApiGroupOfRoute(route.kind);           // HTTP
//   std::optional<ApiGroup> g = ApiGroupOfGrpcMethod("ModelInfer");    // gRPC
//   if (g) status = gate->Authorize(*g, credential);                   // access.h
//
// The mapping (docs/security.md restates it):
//   health            GET /v2/health/live, /v2/health/ready, /v2/models/{m}/ready;
//                     ServerLive, ServerReady, ModelReady
//   metadata          GET /v2, GET /v2/models/{m}, GET /v1/models[/{id}];
//                     ServerMetadata, ModelMetadata
//   inference         POST .../infer, .../generate, .../generate_stream, /v1/completions,
//                     /v1/chat/completions; ModelInfer, ModelStreamInfer
//   shared-memory     the (System|Cuda)SharedMemory* RPCs (kiln answers UNIMPLEMENTED)
//   model-config      GET /v2/models/{m}/config; ModelConfig
//   model-repository  /v2/repository/index, .../load, .../unload; RepositoryIndex,
//                     RepositoryModelLoad, RepositoryModelUnload
//   statistics        GET /v2/models[/{m}]/stats; ModelStatistics
//   trace             /v2/trace/setting, /v2/models/{m}/trace/setting; TraceSetting
//   logging           /v2/logging; LogSettings
//   metrics           GET /metrics on the metrics port (kiln's own group)
// Routes that are no endpoint (404, 405, a malformed path) and unknown gRPC methods belong to no
// group: they are answered as they are without credentials, and say nothing about any tenant.
//
// Thread safety: pure functions.

#include <array>
#include <optional>
#include <string_view>

#include "server/http/router.h"

namespace kiln {

enum class ApiGroup : int {
  kHealth = 0,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
  kMetrics,
};

inline constexpr int kApiGroupCount = 10;

// Every group, in enum order.
const std::array<ApiGroup, kApiGroupCount>& AllApiGroups();

// The reference server's spelling: "health", "metadata", "inference", "shared-memory",
// "model-config", "model-repository", "statistics", "trace", "logging"; and "metrics".
std::string_view ApiGroupName(ApiGroup group);

// The group named `name` (ApiGroupName's spelling); nullopt for any other string.
std::optional<ApiGroup> ParseApiGroup(std::string_view name);

// The group of a routed HTTP request; nullopt for kNotFound, kMethodNotAllowed, kBadRequest.
std::optional<ApiGroup> ApiGroupOfRoute(RouteKind kind);

// The group of a method of inference.GRPCInferenceService, given as its name ("ModelInfer") or
// its full path ("/inference.GRPCInferenceService/ModelInfer"); nullopt for any other method.
std::optional<ApiGroup> ApiGroupOfGrpcMethod(std::string_view method);

}  // namespace kiln
