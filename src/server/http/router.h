// SPDX-License-Identifier: Apache-2.0
#pragma once
// HTTP routing for the KServe v2 REST API as a pure function: (method, request target) -> Route.
// No sockets, no Beast; the server dispatches on Route::kind and the router is table-tested.
//
// Path rules (KSERVE-V2.md 1.1): everything starts with /v2; strings are case-sensitive;
// `/v2/models/{name}[/versions/{version}][/suffix]` with {name} one non-empty segment
// (percent-decoded) and {version} matching [0-9]+. A non-numeric version makes the path not
// match (404); a numeric one that overflows int64 is a 400. A query string is ignored.
// `/v2/models/stats` (checked first) is the all-models statistics endpoint. Repository paths are
// `/v2/repository[/{repo}]/index` and `/v2/repository[/{repo}]/models/{name}/(load|unload)`;
// the optional {repo} segment is reported in Route::repository (the server refuses it).
// `/v2/logging` takes GET and POST. `/v2/models/{m}[/versions/{v}]/generate` and
// `.../generate_stream` are Triton's generate extension. `/v1/...` is the OpenAI-compatible API
// (`/v1/models`, `/v1/models/{id}`, `/v1/completions`, `/v1/chat/completions`). Endpoints kiln
// does not implement yet (shared memory) answer 404 like any unknown path. A known path
// with the wrong method is 405.
//
// Thread safety: pure function; call from any thread.

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class RouteKind {
  kNotFound,          // 404 {"error":"Not Found"}
  kMethodNotAllowed,  // 405 {"error":"Method Not Allowed"}; Route::allow names the method
  kBadRequest,        // 400; Route::error says why
  kHealthLive,        // GET /v2/health/live
  kHealthReady,       // GET /v2/health/ready
  kServerMetadata,    // GET /v2
  kModelMetadata,     // GET /v2/models/{m}[/versions/{v}]
  kModelReady,        // GET /v2/models/{m}[/versions/{v}]/ready
  kModelInfer,        // POST /v2/models/{m}[/versions/{v}]/infer
  kModelStats,        // GET /v2/models/stats (model empty) or /v2/models/{m}[/versions/{v}]/stats
  kModelConfig,       // GET /v2/models/{m}[/versions/{v}]/config
  kRepositoryIndex,   // POST /v2/repository[/{repo}]/index
  kRepositoryLoad,    // POST /v2/repository[/{repo}]/models/{m}/load
  kRepositoryUnload,  // POST /v2/repository[/{repo}]/models/{m}/unload
  kLoggingGet,        // GET /v2/logging
  kLoggingUpdate,     // POST /v2/logging
  kTraceGet,          // GET /v2/trace/setting, /v2/models/{m}/trace/setting
  kTraceUpdate,       // POST /v2/trace/setting, /v2/models/{m}/trace/setting
  kModelGenerate,     // POST /v2/models/{m}[/versions/{v}]/generate
  kModelGenerateStream,    // POST /v2/models/{m}[/versions/{v}]/generate_stream
  kOpenAiModels,           // GET /v1/models
  kOpenAiModel,            // GET /v1/models/{id} (id: the rest of the path, '/' allowed)
  kOpenAiCompletions,      // POST /v1/completions
  kOpenAiChatCompletions,  // POST /v1/chat/completions
};

struct Route {
  RouteKind kind = RouteKind::kNotFound;
  std::string model;       // decoded model name (model and repository load/unload routes)
  std::string repository;  // decoded {repo} segment of a repository route; empty when absent
  int64_t version = -1;    // -1: no version in the path (the server picks)
  std::string allow;       // kMethodNotAllowed: the methods the path accepts ("GET, POST")
  std::string error;       // kBadRequest: the message
};

// `method` is the request method as sent ("GET"); `target` the request-target ("/v2?x=1").
Route RouteRequest(std::string_view method, std::string_view target);

// Decodes %XX escapes. False on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out);

}  // namespace kiln
