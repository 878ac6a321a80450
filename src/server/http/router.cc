// SPDX-License-Identifier: Apache-2.0
// RouteRequest: the KServe v2 path table; see router.h.
#include "server/http/router.h"

#include <charconv>
#include <vector>

namespace kiln {
namespace {

std::vector<std::string_view> SplitSegments(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      parts.push_back(path.substr(start));
      return parts;
    }
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
}

Route Make(RouteKind kind) {
  Route r;
  r.kind = kind;
  return r;
}

// Applies the method rule to a matched path.
Route WithMethod(Route route, std::string_view method, std::string_view expected) {
  if (method == expected) return route;
  Route r = Make(RouteKind::kMethodNotAllowed);
  r.allow = std::string(expected);
  return r;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

Route BadName(std::string_view what, std::string_view segment) {
  Route bad = Make(RouteKind::kBadRequest);
  bad.error =
      "malformed percent-encoding in " + std::string(what) + " '" + std::string(segment) + "'";
  return bad;
}

// parts[0] == "repository": [repository, (repo,)? index] or
// [repository, (repo,)? models, name, load|unload].
Route RouteRepository(std::string_view method, const std::vector<std::string_view>& parts) {
  for (std::string_view p : parts) {
    if (p.empty()) return Make(RouteKind::kNotFound);
  }
  Route route;
  std::string_view repo;
  std::string_view name;
  if (parts.size() == 2 && parts[1] == "index") {
    route.kind = RouteKind::kRepositoryIndex;
  } else if (parts.size() == 3 && parts[2] == "index") {
    route.kind = RouteKind::kRepositoryIndex;
    repo = parts[1];
  } else if (parts.size() == 4 && parts[1] == "models" &&
             (parts[3] == "load" || parts[3] == "unload")) {
    route.kind = parts[3] == "load" ? RouteKind::kRepositoryLoad : RouteKind::kRepositoryUnload;
    name = parts[2];
  } else if (parts.size() == 5 && parts[2] == "models" &&
             (parts[4] == "load" || parts[4] == "unload")) {
    route.kind = parts[4] == "load" ? RouteKind::kRepositoryLoad : RouteKind::kRepositoryUnload;
    repo = parts[1];
    name = parts[3];
  } else {
    return Make(RouteKind::kNotFound);
  }
  if (!PercentDecode(repo, &route.repository)) return BadName("repository name", repo);
  if (!PercentDecode(name, &route.model)) return BadName("model name", name);
  return WithMethod(std::move(route), method, "POST");
}

}  // namespace

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// The OpenAI-compatible API: /v1/models[/{id}], /v1/completions, /v1/chat/completions.
Route RouteOpenAi(std::string_view method, std::string_view path) {
  if (path == "/v1/models") return WithMethod(Make(RouteKind::kOpenAiModels), method, "GET");
  if (path == "/v1/completions") {
    return WithMethod(Make(RouteKind::kOpenAiCompletions), method, "POST");
  }
  if (path == "/v1/chat/completions") {
    return WithMethod(Make(RouteKind::kOpenAiChatCompletions), method, "POST");
  }
  constexpr std::string_view kModel = "/v1/models/";
  if (path.starts_with(kModel)) {
    // A model id may contain '/' (Hugging Face names: "org/name"): the rest of the path.
    const std::string_view id = path.substr(kModel.size());
    if (id.empty()) return Make(RouteKind::kNotFound);
    Route route = Make(RouteKind::kOpenAiModel);
    if (!PercentDecode(id, &route.model)) return BadName("model name", id);
    return WithMethod(std::move(route), method, "GET");
  }
  return Make(RouteKind::kNotFound);
}

Route RouteRequest(std::string_view method, std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  if (path.starts_with("/v1/")) return RouteOpenAi(method, path);
  if (path == "/v2") return WithMethod(Make(RouteKind::kServerMetadata), method, "GET");
  constexpr std::string_view kPrefix = "/v2/";
  if (!path.starts_with(kPrefix)) return Make(RouteKind::kNotFound);
  const std::vector<std::string_view> parts = SplitSegments(path.substr(kPrefix.size()));

  if (parts.size() == 2 && parts[0] == "health") {
    if (parts[1] == "live") return WithMethod(Make(RouteKind::kHealthLive), method, "GET");
    if (parts[1] == "ready") return WithMethod(Make(RouteKind::kHealthReady), method, "GET");
    return Make(RouteKind::kNotFound);
  }
  if (parts[0] == "repository") return RouteRepository(method, parts);
  // The trace extension: one setting for the server; a model's setting is the server's.
  if ((parts.size() == 2 && parts[0] == "trace" && parts[1] == "setting") ||
      (parts.size() == 4 && parts[0] == "models" && parts[2] == "trace" && parts[3] == "setting")) {
    if (method == "GET") return Make(RouteKind::kTraceGet);
    if (method == "POST") return Make(RouteKind::kTraceUpdate);
    Route r = Make(RouteKind::kMethodNotAllowed);
    r.allow = "GET, POST";
    return r;
  }
  if (parts.size() == 1 && parts[0] == "logging") {
    if (method == "GET") return Make(RouteKind::kLoggingGet);
    if (method == "POST") return Make(RouteKind::kLoggingUpdate);
    Route r = Make(RouteKind::kMethodNotAllowed);
    r.allow = "GET, POST";
    return r;
  }
  if (parts.size() < 2 || parts[0] != "models" || parts[1].empty()) {
    return Make(RouteKind::kNotFound);
  }
  // /v2/models/stats is the all-models statistics endpoint.
  if (parts.size() == 2 && parts[1] == "stats") {
    return WithMethod(Make(RouteKind::kModelStats), method, "GET");
  }

  size_t next = 2;
  std::string_view version_text;
  if (parts.size() >= 4 && parts[2] == "versions") {
    if (!AllDigits(parts[3])) return Make(RouteKind::kNotFound);
    version_text = parts[3];
    next = 4;
  }
  const size_t suffix_len = parts.size() - next;
  Route route;
  std::string_view expected_method = "GET";
  if (suffix_len == 0) {
    route.kind = RouteKind::kModelMetadata;
  } else if (suffix_len == 1 && parts[next] == "ready") {
    route.kind = RouteKind::kModelReady;
  } else if (suffix_len == 1 && parts[next] == "infer") {
    route.kind = RouteKind::kModelInfer;
    expected_method = "POST";
  } else if (suffix_len == 1 && parts[next] == "stats") {
    route.kind = RouteKind::kModelStats;
  } else if (suffix_len == 1 && parts[next] == "config") {
    route.kind = RouteKind::kModelConfig;
  } else if (suffix_len == 1 && (parts[next] == "generate" || parts[next] == "generate_stream")) {
    route.kind =
        parts[next] == "generate" ? RouteKind::kModelGenerate : RouteKind::kModelGenerateStream;
    expected_method = "POST";
  } else {
    return Make(RouteKind::kNotFound);
  }

  if (!version_text.empty()) {
    int64_t version = 0;
    const auto res =
        std::from_chars(version_text.data(), version_text.data() + version_text.size(), version);
    if (res.ec != std::errc() || res.ptr != version_text.data() + version_text.size()) {
      Route bad = Make(RouteKind::kBadRequest);
      bad.error = "model version '" + std::string(version_text) + "' is out of range";
      return bad;
    }
    route.version = version;
  }
  if (!PercentDecode(parts[1], &route.model)) return BadName("model name", parts[1]);
  return WithMethod(std::move(route), method, expected_method);
}

}  // namespace kiln
