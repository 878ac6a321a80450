// SPDX-License-Identifier: Apache-2.0
// The endpoint -> API group tables; see api_groups.h.
#include "server/security/api_groups.h"

#include <utility>

namespace kiln {
namespace {

using G = ApiGroup;

constexpr std::array<std::string_view, kApiGroupCount> kNames = {
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging",       "metrics",
};

constexpr std::pair<std::string_view, G> kGrpcMethods[] = {
    {"ServerLive", G::kHealth},
    {"ServerReady", G::kHealth},
    {"ModelReady", G::kHealth},
    {"ServerMetadata", G::kMetadata},
    {"ModelMetadata", G::kMetadata},
    {"ModelInfer", G::kInference},
    {"ModelStreamInfer", G::kInference},
    {"ModelConfig", G::kModelConfig},
    {"ModelStatistics", G::kStatistics},
    {"RepositoryIndex", G::kModelRepository},
    {"RepositoryModelLoad", G::kModelRepository},
    {"RepositoryModelUnload", G::kModelRepository},
    {"SystemSharedMemoryStatus", G::kSharedMemory},
    {"SystemSharedMemoryRegister", G::kSharedMemory},
    {"SystemSharedMemoryUnregister", G::kSharedMemory},
    {"CudaSharedMemoryStatus", G::kSharedMemory},
    {"CudaSharedMemoryRegister", G::kSharedMemory},
    {"CudaSharedMemoryUnregister", G::kSharedMemory},
    {"TraceSetting", G::kTrace},
    {"LogSettings", G::kLogging},
};

constexpr std::string_view kGrpcService = "/inference.GRPCInferenceService/";

}  // namespace

const std::array<ApiGroup, kApiGroupCount>& AllApiGroups() {
  static constexpr std::array<ApiGroup, kApiGroupCount> kAll = {
      G::kHealth,          G::kMetadata,   G::kInference, G::kSharedMemory, G::kModelConfig,
      G::kModelRepository, G::kStatistics, G::kTrace,     G::kLogging,      G::kMetrics,
  };
  return kAll;
}

std::string_view ApiGroupName(ApiGroup group) {
  const auto i = static_cast<size_t>(group);
  return i < kNames.size() ? kNames[i] : std::string_view("unknown");
}

std::optional<ApiGroup> ParseApiGroup(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ApiGroup>(i);
  }
  return std::nullopt;
}

std::optional<ApiGroup> ApiGroupOfRoute(RouteKind kind) {
  switch (kind) {
    case RouteKind::kNotFound:
    case RouteKind::kMethodNotAllowed:
    case RouteKind::kBadRequest:
      return std::nullopt;
    case RouteKind::kHealthLive:
    case RouteKind::kHealthReady:
    case RouteKind::kModelReady:
      return G::kHealth;
    case RouteKind::kServerMetadata:
    case RouteKind::kModelMetadata:
    case RouteKind::kOpenAiModels:
    case RouteKind::kOpenAiModel:
      return G::kMetadata;
    case RouteKind::kModelInfer:
    case RouteKind::kModelGenerate:
    case RouteKind::kModelGenerateStream:
    case RouteKind::kOpenAiCompletions:
    case RouteKind::kOpenAiChatCompletions:
      return G::kInference;
    case RouteKind::kModelStats:
      return G::kStatistics;
    case RouteKind::kModelConfig:
      return G::kModelConfig;
    case RouteKind::kRepositoryIndex:
    case RouteKind::kRepositoryLoad:
    case RouteKind::kRepositoryUnload:
      return G::kModelRepository;
    case RouteKind::kLoggingGet:
    case RouteKind::kLoggingUpdate:
      return G::kLogging;
    case RouteKind::kTraceGet:
    case RouteKind::kTraceUpdate:
      return G::kTrace;
  }
  return std::nullopt;
}

std::optional<ApiGroup> ApiGroupOfGrpcMethod(std::string_view method) {
  if (method.starts_with(kGrpcService)) method.remove_prefix(kGrpcService.size());
  for (const auto& [name, group] : kGrpcMethods) {
    if (name == method) return group;
  }
  return std::nullopt;
}

}  // namespace kiln
