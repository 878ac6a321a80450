// SPDX-License-Identifier: Apache-2.0
// Router table: every path form of KSERVE-V2.md 1.1 that kiln serves (health, metadata, ready,
// infer, statistics, repository), the ones it does not serve yet (404), wrong methods (405), and
// version edge cases.
#include "server/http/router.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

struct RouteCase {
  const char* method;
  const char* target;
  RouteKind kind;
  const char* model = "";
  int64_t version = -1;
};

std::string KindName(RouteKind k) {
  switch (k) {
    case RouteKind::kNotFound:
      return "NotFound";
    case RouteKind::kMethodNotAllowed:
      return "MethodNotAllowed";
    case RouteKind::kBadRequest:
      return "BadRequest";
    case RouteKind::kHealthLive:
      return "HealthLive";
    case RouteKind::kHealthReady:
      return "HealthReady";
    case RouteKind::kServerMetadata:
      return "ServerMetadata";
    case RouteKind::kModelMetadata:
      return "ModelMetadata";
    case RouteKind::kModelReady:
      return "ModelReady";
    case RouteKind::kModelInfer:
      return "ModelInfer";
    case RouteKind::kModelConfig:
      return "ModelConfig";
    case RouteKind::kModelStats:
      return "ModelStats";
    case RouteKind::kRepositoryIndex:
      return "RepositoryIndex";
    case RouteKind::kRepositoryLoad:
      return "RepositoryLoad";
    case RouteKind::kRepositoryUnload:
      return "RepositoryUnload";
    case RouteKind::kLoggingGet:
      return "LoggingGet";
    case RouteKind::kLoggingUpdate:
      return "LoggingUpdate";
    case RouteKind::kTraceGet:
      return "TraceGet";
    case RouteKind::kTraceUpdate:
      return "TraceUpdate";
  }
  return "?";
}

using K = RouteKind;

const RouteCase kCases[] = {
    // Server endpoints.
    {"GET", "/v2", K::kServerMetadata},
    {"GET", "/v2?verbose=1", K::kServerMetadata},
    {"GET", "/v2/health/live", K::kHealthLive},
    {"GET", "/v2/health/ready", K::kHealthReady},
    {"GET", "/v2/health/ready?x", K::kHealthReady},
    // Model endpoints, with and without a version.
    {"GET", "/v2/models/add_sub", K::kModelMetadata, "add_sub"},
    {"GET", "/v2/models/add_sub/versions/3", K::kModelMetadata, "add_sub", 3},
    {"GET", "/v2/models/add_sub/ready", K::kModelReady, "add_sub"},
    {"GET", "/v2/models/add_sub/versions/1/ready", K::kModelReady, "add_sub", 1},
    {"POST", "/v2/models/add_sub/infer", K::kModelInfer, "add_sub"},
    {"POST", "/v2/models/add_sub/versions/12/infer", K::kModelInfer, "add_sub", 12},
    {"POST", "/v2/models/add_sub/versions/007/infer", K::kModelInfer, "add_sub", 7},
    {"POST", "/v2/models/add_sub/versions/0/infer", K::kModelInfer, "add_sub", 0},
    {"POST", "/v2/models/add_sub/versions/9223372036854775807/infer", K::kModelInfer, "add_sub",
     9223372036854775807},
    // Names: any non-empty segment, percent-decoded; "versions"/"stats" as names.
    {"GET", "/v2/models/my%20model", K::kModelMetadata, "my model"},
    {"GET", "/v2/models/a%2Fb/ready", K::kModelReady, "a/b"},
    {"GET", "/v2/models/versions", K::kModelMetadata, "versions"},
    {"GET", "/v2/models/versions/versions/2", K::kModelMetadata, "versions", 2},
    {"GET", "/v2/models/stats/ready", K::kModelReady, "stats"},
    {"GET", "/v2/models/m.onnx-v2_x", K::kModelMetadata, "m.onnx-v2_x"},
    // Wrong methods on known paths.
    {"POST", "/v2", K::kMethodNotAllowed},
    {"POST", "/v2/health/live", K::kMethodNotAllowed},
    {"DELETE", "/v2/health/ready", K::kMethodNotAllowed},
    {"POST", "/v2/models/m", K::kMethodNotAllowed},
    {"PUT", "/v2/models/m/versions/1/ready", K::kMethodNotAllowed},
    {"GET", "/v2/models/m/infer", K::kMethodNotAllowed},
    {"HEAD", "/v2/models/m/versions/1/infer", K::kMethodNotAllowed},
    // Version segment not [0-9]+ -> the path does not match.
    {"GET", "/v2/models/m/versions/abc", K::kNotFound},
    {"GET", "/v2/models/m/versions/-1/ready", K::kNotFound},
    {"POST", "/v2/models/m/versions/1.0/infer", K::kNotFound},
    {"POST", "/v2/models/m/versions//infer", K::kNotFound},
    {"GET", "/v2/models/m/versions", K::kNotFound},
    {"GET", "/v2/models/m/versions/+1", K::kNotFound},
    // Overflowing version -> 400 (only when the rest of the path matches).
    {"POST", "/v2/models/m/versions/9223372036854775808/infer", K::kBadRequest},
    {"GET", "/v2/models/m/versions/99999999999999999999999", K::kBadRequest},
    {"GET", "/v2/models/m/versions/99999999999999999999999/bogus", K::kNotFound},
    // Statistics: all models (the literal is checked before model names), one model, one version.
    {"GET", "/v2/models/stats", K::kModelStats, ""},
    {"GET", "/v2/models/stats?x=1", K::kModelStats, ""},
    {"GET", "/v2/models/m/stats", K::kModelStats, "m"},
    {"GET", "/v2/models/m/config", K::kModelConfig, "m"},
    {"GET", "/v2/models/m/versions/2/config", K::kModelConfig, "m", 2},
    {"POST", "/v2/models/m/config", K::kMethodNotAllowed, "m"},
    {"GET", "/v2/models/m/versions/1/stats", K::kModelStats, "m", 1},
    {"GET", "/v2/models/stats/stats", K::kModelStats, "stats"},
    {"POST", "/v2/models/stats", K::kMethodNotAllowed},
    {"POST", "/v2/models/m/versions/1/stats", K::kMethodNotAllowed},
    {"GET", "/v2/models/m/versions/x/stats", K::kNotFound},
    {"GET", "/v2/models/m/stats/", K::kNotFound},
    // Repository (more in RepositoryRoutes).
    {"POST", "/v2/repository/index", K::kRepositoryIndex},
    {"POST", "/v2/repository/models/m/load", K::kRepositoryLoad, "m"},
    {"POST", "/v2/repository/models/m/unload", K::kRepositoryUnload, "m"},
    {"GET", "/v2/repository/index", K::kMethodNotAllowed},
    {"GET", "/v2/repository/models/m/load", K::kMethodNotAllowed},
    {"POST", "/v2/repository", K::kNotFound},
    {"POST", "/v2/repository/", K::kNotFound},
    {"POST", "/v2/repository//index", K::kNotFound},
    {"POST", "/v2/repository/models//load", K::kNotFound},
    {"POST", "/v2/repository/models/m/reload", K::kNotFound},
    {"POST", "/v2/repository/models/m", K::kNotFound},
    {"POST", "/v2/repository/a/b/models/m/load", K::kNotFound},
    {"POST", "/v2/repository/index/", K::kNotFound},
    // Logging: GET and POST; anything else is 405 naming both.
    {"GET", "/v2/logging", K::kLoggingGet},
    {"POST", "/v2/logging", K::kLoggingUpdate},
    {"PUT", "/v2/logging", K::kMethodNotAllowed},
    {"GET", "/v2/logging?x=1", K::kLoggingGet},
    {"GET", "/v2/logging/", K::kNotFound},
    {"GET", "/v2/Logging", K::kNotFound},
    // Triton's generate extension and the OpenAI-compatible API.
    {"POST", "/v2/models/m/generate", K::kModelGenerate, "m"},
    {"POST", "/v2/models/m/generate_stream", K::kModelGenerateStream, "m"},
    {"POST", "/v2/models/m/versions/2/generate", K::kModelGenerate, "m", 2},
    {"GET", "/v2/models/m/generate", K::kMethodNotAllowed},
    {"POST", "/v2/models/m/generate/x", K::kNotFound},
    {"GET", "/v1/models", K::kOpenAiModels},
    {"POST", "/v1/models", K::kMethodNotAllowed},
    {"GET", "/v1/models/org/name", K::kOpenAiModel, "org/name"},
    {"GET", "/v1/models/a%20b", K::kOpenAiModel, "a b"},
    {"GET", "/v1/models/", K::kNotFound},
    {"POST", "/v1/completions", K::kOpenAiCompletions},
    {"GET", "/v1/completions", K::kMethodNotAllowed},
    {"POST", "/v1/chat/completions", K::kOpenAiChatCompletions},
    {"POST", "/v1/chat/completions?x=1", K::kOpenAiChatCompletions},
    {"POST", "/v1/embeddings", K::kNotFound},
    {"POST", "/v1", K::kNotFound},
    // Endpoints of later issues answer 404 whatever the method.
    {"GET", "/v2/models/m/trace/setting", K::kTraceGet},
    {"POST", "/v2/models/m/trace/setting", K::kTraceUpdate},
    {"GET", "/v2/models/m/versions/1/trace/setting", K::kNotFound},
    {"GET", "/v2/trace/setting", K::kTraceGet},
    {"POST", "/v2/trace/setting", K::kTraceUpdate},
    {"PUT", "/v2/trace/setting", K::kMethodNotAllowed},
    {"GET", "/v2/trace", K::kNotFound},
    {"GET", "/v2/systemsharedmemory/status", K::kNotFound},
    {"GET", "/v2/cudasharedmemory/region/r/status", K::kNotFound},
    // Anything else.
    {"GET", "/", K::kNotFound},
    {"GET", "", K::kNotFound},
    {"GET", "/v2/", K::kNotFound},
    {"GET", "/v1/models/m", K::kOpenAiModel, "m"},
    {"GET", "/v2x", K::kNotFound},
    {"GET", "/V2/health/live", K::kNotFound},
    {"GET", "/v2/health/Live", K::kNotFound},
    {"GET", "/v2/health/live/", K::kNotFound},
    {"GET", "/v2/health", K::kNotFound},
    {"GET", "/v2/models", K::kNotFound},
    {"GET", "/v2/models/", K::kNotFound},
    {"GET", "/v2/models//ready", K::kNotFound},
    {"GET", "/v2/models/m/", K::kNotFound},
    {"GET", "/v2/models/m/ready/", K::kNotFound},
    {"POST", "/v2/models/m/infer/x", K::kNotFound},
    {"POST", "/v2/models/m/INFER", K::kNotFound},
    {"GET", "/v2//models/m", K::kNotFound},
    {"GET", "http://host/v2", K::kNotFound},
};

TEST(RouterTest, Table) {
  for (const RouteCase& c : kCases) {
    SCOPED_TRACE(std::string(c.method) + " " + c.target);
    const Route r = RouteRequest(c.method, c.target);
    EXPECT_EQ(KindName(r.kind), KindName(c.kind));
    if (c.kind == K::kModelMetadata || c.kind == K::kModelReady || c.kind == K::kModelInfer ||
        c.kind == K::kModelStats || c.kind == K::kRepositoryLoad ||
        c.kind == K::kRepositoryUnload) {
      EXPECT_EQ(r.model, c.model);
      EXPECT_EQ(r.version, c.version);
    }
  }
}

TEST(RouterTest, RepositoryRoutes) {
  Route r = RouteRequest("POST", "/v2/repository/index");
  EXPECT_EQ(r.kind, K::kRepositoryIndex);
  EXPECT_EQ(r.repository, "");
  r = RouteRequest("POST", "/v2/repository/my%20repo/index");
  EXPECT_EQ(r.kind, K::kRepositoryIndex);
  EXPECT_EQ(r.repository, "my repo");
  // "models" as a repository name, as the reference server's pattern reads it.
  r = RouteRequest("POST", "/v2/repository/models/index");
  EXPECT_EQ(r.kind, K::kRepositoryIndex);
  EXPECT_EQ(r.repository, "models");
  r = RouteRequest("POST", "/v2/repository/models/a%2Fb/load");
  EXPECT_EQ(r.kind, K::kRepositoryLoad);
  EXPECT_EQ(r.model, "a/b");
  EXPECT_EQ(r.repository, "");
  r = RouteRequest("POST", "/v2/repository/r1/models/m/unload?x");
  EXPECT_EQ(r.kind, K::kRepositoryUnload);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.repository, "r1");
  r = RouteRequest("POST", "/v2/repository/r1/models/m%zz/load");
  EXPECT_EQ(r.kind, K::kBadRequest);
  EXPECT_NE(r.error.find("m%zz"), std::string::npos) << r.error;
  r = RouteRequest("POST", "/v2/repository/%g/index");
  EXPECT_EQ(r.kind, K::kBadRequest);
  EXPECT_EQ(RouteRequest("GET", "/v2/repository/index").allow, "POST");
}

TEST(RouterTest, MethodNotAllowedNamesTheMethod) {
  EXPECT_EQ(RouteRequest("GET", "/v2/models/m/infer").allow, "POST");
  EXPECT_EQ(RouteRequest("POST", "/v2/health/live").allow, "GET");
  EXPECT_EQ(RouteRequest("DELETE", "/v2/logging").allow, "GET, POST");
}

TEST(RouterTest, BadRequestSaysWhy) {
  const Route r = RouteRequest("POST", "/v2/models/m/versions/9223372036854775808/infer");
  ASSERT_EQ(r.kind, K::kBadRequest);
  EXPECT_NE(r.error.find("9223372036854775808"), std::string::npos) << r.error;
  const Route bad_name = RouteRequest("GET", "/v2/models/a%zz/ready");
  ASSERT_EQ(bad_name.kind, K::kBadRequest);
  EXPECT_NE(bad_name.error.find("a%zz"), std::string::npos) << bad_name.error;
}

TEST(RouterTest, PercentDecode) {
  std::string out;
  EXPECT_TRUE(PercentDecode("a%41%7a%2F", &out));
  EXPECT_EQ(out, "aAz/");
  EXPECT_FALSE(PercentDecode("%", &out));
  EXPECT_FALSE(PercentDecode("%4", &out));
  EXPECT_FALSE(PercentDecode("%G0", &out));
  EXPECT_TRUE(PercentDecode("plain+text", &out));
  EXPECT_EQ(out, "plain+text");
}

}  // namespace
}  // namespace kiln
