// SPDX-License-Identifier: Apache-2.0
// The endpoint -> API group tables: every HTTP route kind and every gRPC method of the service,
// with the reference server's group names.
#include "server/security/api_groups.h"

#include <gtest/gtest.h>

#include <string>

#ifdef KILN_HAVE_GRPC
#include "grpc_service.pb.h"
#endif

namespace kiln {
namespace {

struct HttpCase {
  const char* method;
  const char* target;
  std::optional<ApiGroup> group;
};

TEST(ApiGroupsTest, EveryHttpRouteHasTheReferenceGroup) {
  using G = ApiGroup;
  const HttpCase cases[] = {
      {"GET", "/v2/health/live", G::kHealth},
      {"GET", "/v2/health/ready", G::kHealth},
      {"GET", "/v2/models/m/ready", G::kHealth},
      {"GET", "/v2/models/m/versions/2/ready", G::kHealth},
      {"GET", "/v2", G::kMetadata},
      {"GET", "/v2/models/m", G::kMetadata},
      {"GET", "/v1/models", G::kMetadata},
      {"GET", "/v1/models/org/m", G::kMetadata},
      {"POST", "/v2/models/m/infer", G::kInference},
      {"POST", "/v2/models/m/versions/1/infer", G::kInference},
      {"POST", "/v2/models/m/generate", G::kInference},
      {"POST", "/v2/models/m/generate_stream", G::kInference},
      {"POST", "/v1/completions", G::kInference},
      {"POST", "/v1/chat/completions", G::kInference},
      {"GET", "/v2/models/m/config", G::kModelConfig},
      {"GET", "/v2/models/stats", G::kStatistics},
      {"GET", "/v2/models/m/stats", G::kStatistics},
      {"POST", "/v2/repository/index", G::kModelRepository},
      {"POST", "/v2/repository/models/m/load", G::kModelRepository},
      {"POST", "/v2/repository/models/m/unload", G::kModelRepository},
      {"GET", "/v2/logging", G::kLogging},
      {"POST", "/v2/logging", G::kLogging},
      {"GET", "/v2/trace/setting", G::kTrace},
      {"POST", "/v2/models/m/trace/setting", G::kTrace},
      {"GET", "/v2/nothing", std::nullopt},
      {"DELETE", "/v2/health/live", std::nullopt},
      {"GET", "/v2/models/m/versions/99999999999999999999", std::nullopt},
  };
  for (const HttpCase& c : cases) {
    const Route route = RouteRequest(c.method, c.target);
    EXPECT_EQ(ApiGroupOfRoute(route.kind), c.group) << c.method << " " << c.target;
  }
}

TEST(ApiGroupsTest, EveryRouteKindIsMapped) {
  // A RouteKind added without a group would fall to nullopt: every endpoint kind must have one.
  for (int k = static_cast<int>(RouteKind::kHealthLive);
       k <= static_cast<int>(RouteKind::kOpenAiChatCompletions); ++k) {
    EXPECT_TRUE(ApiGroupOfRoute(static_cast<RouteKind>(k)).has_value()) << "route kind " << k;
  }
}

// One method of each group, as the reference server groups them (its --grpc-restricted-protocol
// documentation), and the full method path form.
TEST(ApiGroupsTest, GrpcMethods) {
  using G = ApiGroup;
  EXPECT_EQ(ApiGroupOfGrpcMethod("ServerReady"), G::kHealth);
  EXPECT_EQ(ApiGroupOfGrpcMethod("ModelReady"), G::kHealth);
  EXPECT_EQ(ApiGroupOfGrpcMethod("ModelMetadata"), G::kMetadata);
  EXPECT_EQ(ApiGroupOfGrpcMethod("ModelStreamInfer"), G::kInference);
  EXPECT_EQ(ApiGroupOfGrpcMethod("ModelConfig"), G::kModelConfig);
  EXPECT_EQ(ApiGroupOfGrpcMethod("ModelStatistics"), G::kStatistics);
  EXPECT_EQ(ApiGroupOfGrpcMethod("RepositoryModelUnload"), G::kModelRepository);
  EXPECT_EQ(ApiGroupOfGrpcMethod("CudaSharedMemoryRegister"), G::kSharedMemory);
  EXPECT_EQ(ApiGroupOfGrpcMethod("TraceSetting"), G::kTrace);
  EXPECT_EQ(ApiGroupOfGrpcMethod("LogSettings"), G::kLogging);
  EXPECT_EQ(ApiGroupOfGrpcMethod("/inference.GRPCInferenceService/ModelInfer"), G::kInference);
  EXPECT_EQ(ApiGroupOfGrpcMethod("Nope"), std::nullopt);
  EXPECT_EQ(ApiGroupOfGrpcMethod("/other.Service/ModelInfer"), std::nullopt);
}

#ifdef KILN_HAVE_GRPC
// Every method the service defines (read from the generated descriptor, not from the table)
// has a group, by its name and by its full path: a method added to the .proto without one fails
// here.
TEST(ApiGroupsTest, EveryMethodOfTheServiceIsMapped) {
  const google::protobuf::ServiceDescriptor* service =
      inference::ModelInferRequest::descriptor()->file()->FindServiceByName("GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  ASSERT_GT(service->method_count(), 15);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name = service->method(i)->name();
    EXPECT_TRUE(ApiGroupOfGrpcMethod(name).has_value()) << name;
    EXPECT_EQ(ApiGroupOfGrpcMethod("/" + service->full_name() + "/" + name),
              ApiGroupOfGrpcMethod(name))
        << name;
  }
}
#endif

TEST(ApiGroupsTest, NamesRoundTrip) {
  for (ApiGroup g : AllApiGroups()) EXPECT_EQ(ParseApiGroup(ApiGroupName(g)), g);
  EXPECT_EQ(ApiGroupName(ApiGroup::kModelRepository), "model-repository");
  EXPECT_EQ(ApiGroupName(ApiGroup::kSharedMemory), "shared-memory");
  EXPECT_EQ(ParseApiGroup("model_repository"), std::nullopt);
}

}  // namespace
}  // namespace kiln
