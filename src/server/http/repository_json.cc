// SPDX-License-Identifier: Apache-2.0
// Model repository request parsing (simdjson DOM, error-code API only) and the index writer;
// see repository_json.h.
#include "server/http/repository_json.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "server/base64.h"
#include "server/http/infer_json.h"
#include "server/http/json_body.h"
#include "server/json_writer.h"

namespace kiln {
namespace {

namespace dom = simdjson::dom;

// The "parameters" object of a request, nullopt when absent.
Result<std::optional<dom::object>> Parameters(const std::optional<dom::object>& root,
                                              std::string_view what) {
  dom::element el;
  if (!root || root->at_key("parameters").get(el) != simdjson::SUCCESS) {
    return std::optional<dom::object>();
  }
  dom::object params;
  if (el.get_object().get(params) != simdjson::SUCCESS) {
    return Status::InvalidArgument(fmt::format("{} 'parameters' must be a JSON object", what));
  }
  return std::optional<dom::object>(params);
}

}  // namespace

Result<bool> ParseRepositoryIndexRequest(const std::string& body) {
  dom::parser parser;
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> root,
                        ParseJsonObjectBody(parser, body, "repository index request"));
  dom::element el;
  if (!root || root->at_key("ready").get(el) != simdjson::SUCCESS) return false;
  bool ready = false;
  if (el.get_bool().get(ready) != simdjson::SUCCESS) {
    return Status::InvalidArgument("repository index request: 'ready' must be a boolean");
  }
  return ready;
}

Result<ModelLoadOptions> ParseRepositoryLoadRequest(const std::string& body) {
  dom::parser parser;
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> root,
                        ParseJsonObjectBody(parser, body, "model load request"));
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> params, Parameters(root, "model load request"));
  ModelLoadOptions options;
  if (!params) return options;
  for (dom::key_value_pair kv : *params) {
    if (kv.key == "config") {
      std::string_view config;
      if (kv.value.get_string().get(config) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            "model load request: parameter 'config' must be a string holding the JSON of a "
            "model configuration");
      }
      options.config_json = std::string(config);
    } else if (kv.key.starts_with("file:")) {
      const std::string what = fmt::format("model load request: parameter '{}'", kv.key);
      std::string_view encoded;
      if (kv.value.get_string().get(encoded) != simdjson::SUCCESS) {
        return Status::InvalidArgument(what + " must be a string holding the file's base64");
      }
      KILN_ASSIGN_OR_RETURN(std::string content, DecodeBase64(encoded, what));
      options.files.push_back({std::string(kv.key.substr(5)), std::move(content)});
    }
  }
  return options;
}

Result<ModelUnloadOptions> ParseRepositoryUnloadRequest(const std::string& body) {
  dom::parser parser;
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> root,
                        ParseJsonObjectBody(parser, body, "model unload request"));
  KILN_ASSIGN_OR_RETURN(std::optional<dom::object> params,
                        Parameters(root, "model unload request"));
  ModelUnloadOptions options;
  dom::element el;
  if (params && params->at_key("unload_dependents").get(el) == simdjson::SUCCESS) {
    if (el.get_bool().get(options.unload_dependents) != simdjson::SUCCESS) {
      return Status::InvalidArgument(
          "model unload request: parameter 'unload_dependents' must be a boolean");
    }
  }
  return options;
}

std::string RepositoryIndexJson(std::span<const ModelIndexEntry> index, bool ready_only) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  for (const ModelIndexEntry& e : index) {
    if (ready_only && e.state != ModelState::kReady) continue;
    w.BeginObject();
    w.KeyString("name", e.name);
    if (e.version >= 0) w.KeyString("version", std::to_string(e.version));
    if (e.state != ModelState::kUnknown || e.version >= 0) {
      w.KeyString("state", ModelStateName(e.state));
    }
    if (!e.reason.empty()) w.KeyString("reason", e.reason);
    w.EndObject();
  }
  w.EndArray();
  return out;
}

}  // namespace kiln
