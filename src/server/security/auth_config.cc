// SPDX-License-Identifier: Apache-2.0
// Parsing of the auth file; see auth_config.h.
#include "server/security/auth_config.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "server/http/json_read.h"

namespace kiln {
namespace {

namespace dom = simdjson::dom;
using json_read::JsonTypeName;
using json_read::JsonValueForMessage;
using T = dom::element_type;

constexpr size_t kMinPlainKeyBytes = 8;
constexpr std::string_view kDigestPrefix = "sha256:";

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Status Error(std::string_view field, std::string_view what) const {
    return Status::InvalidArgument(fmt::format("auth file {}: {}: {}", source_, field, what));
  }

  Result<AuthConfig> Parse(std::string_view json) {
    dom::parser parser;
    simdjson::padded_string padded(json);
    dom::element root;
    if (auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS) {
      return Status::InvalidArgument(fmt::format("auth file {}: {}: not valid JSON ({})", source_,
                                                 LineOfJsonError(json),
                                                 simdjson::error_message(err)));
    }
    if (root.type() != T::OBJECT) {
      return Error("(top level)",
                   fmt::format("must be an object, got {}", JsonTypeName(root.type())));
    }
    AuthConfig config;
    bool default_open = true;
    std::optional<dom::object> groups;
    for (dom::key_value_pair kv : dom::object(root)) {
      if (kv.key == "tenants") {
        KILN_RETURN_IF_ERROR(ParseTenants(kv.value, &config));
      } else if (kv.key == "groups") {
        if (kv.value.type() != T::OBJECT) {
          return Error("groups", fmt::format("must be an object of group name -> access, got {}",
                                             JsonTypeName(kv.value.type())));
        }
        groups = dom::object(kv.value);
      } else if (kv.key == "default") {
        KILN_ASSIGN_OR_RETURN(default_open, ParseDefault(kv.value));
      } else {
        return Error(kv.key, "unknown field (expected tenants, groups, default)");
      }
    }
    for (GroupAccess& g : config.groups) {
      g.open = default_open;
      g.any_tenant = !default_open;
    }
    if (groups) {
      for (dom::key_value_pair kv : *groups) {
        const std::string field = fmt::format("groups.{}", kv.key);
        const std::optional<ApiGroup> group = ParseApiGroup(kv.key);
        if (!group) {
          return Error(field,
                       "unknown API group (expected health, metadata, inference, shared-memory, "
                       "model-config, model-repository, statistics, trace, logging, metrics)");
        }
        KILN_RETURN_IF_ERROR(
            ParseAccess(kv.value, field, config, &config.groups[static_cast<size_t>(*group)]));
      }
    }
    return config;
  }

 private:
  // Where a JSON parser stops in `json`: "line L, column C" (1-based) of the first byte that
  // cannot continue a JSON document (simdjson reports no location, so a small validating scan
  // finds it).
  static std::string LineOfJsonError(std::string_view json) {
    size_t pos = 0;
    const auto skip_ws = [&] {
      while (pos < json.size() &&
             (json[pos] == ' ' || json[pos] == '\t' || json[pos] == '\n' || json[pos] == '\r')) {
        ++pos;
      }
    };
    const auto string = [&]() -> bool {
      if (pos >= json.size() || json[pos] != '"') return false;
      for (++pos; pos < json.size(); ++pos) {
        const char c = json[pos];
        if (c == '\\') {
          ++pos;
        } else if (c == '"') {
          ++pos;
          return true;
        } else if (static_cast<unsigned char>(c) < 0x20) {
          return false;
        }
      }
      return false;
    };
    // Iterative over a stack of containers: '{' expects key, '[' expects value.
    std::string stack;
    bool ok = true;
    bool fresh = false;  // a container was just opened
    const auto value = [&]() -> bool {
      skip_ws();
      fresh = false;
      if (pos >= json.size()) return false;
      const char c = json[pos];
      if (c == '"') return string();
      if (c == '{' || c == '[') {
        stack.push_back(c);
        ++pos;
        fresh = true;
        return true;
      }
      for (std::string_view lit : {"true", "false", "null"}) {
        if (json.substr(pos, lit.size()) == lit) {
          pos += lit.size();
          return true;
        }
      }
      const size_t start = pos;
      while (pos < json.size() && (std::isdigit(static_cast<unsigned char>(json[pos])) ||
                                   std::strchr("+-.eE", json[pos]) != nullptr)) {
        ++pos;
      }
      return pos > start;
    };
    ok = value();
    // After each value or container opening: close, comma, or (objects) the next member.
    while (ok && !stack.empty()) {
      skip_ws();
      if (pos >= json.size()) {
        ok = false;
        break;
      }
      const char close = stack.back() == '{' ? '}' : ']';
      if (json[pos] == close) {
        ++pos;
        stack.pop_back();
        fresh = false;
        continue;
      }
      if (!fresh) {
        if (json[pos] != ',') {
          ok = false;
          break;
        }
        ++pos;
        skip_ws();
      }
      if (stack.back() == '{') {
        if (!string()) {
          ok = false;
          break;
        }
        skip_ws();
        if (pos >= json.size() || json[pos] != ':') {
          ok = false;
          break;
        }
        ++pos;
      }
      ok = value();
    }
    if (ok) {
      skip_ws();
      ok = pos >= json.size();
    }
    pos = std::min(pos, json.size());
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < pos; ++i) {
      if (json[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return fmt::format("line {}, column {}", line, pos - line_start + 1);
  }

  Result<bool> ParseDefault(dom::element e) const {
    if (e.type() == T::STRING) {
      const std::string_view s = json_read::AsString(e);
      if (s == "open") return true;
      if (s == "authenticated") return false;
    }
    return Error("default", fmt::format("must be \"open\" or \"authenticated\", got {}",
                                        JsonValueForMessage(e)));
  }

  Status ParseAccess(dom::element e, const std::string& field, const AuthConfig& config,
                     GroupAccess* out) const {
    *out = GroupAccess{};
    if (e.type() == T::STRING) {
      const std::string_view s = json_read::AsString(e);
      if (s == "open") return Status::OK();
      if (s == "authenticated") {
        out->open = false;
        out->any_tenant = true;
        return Status::OK();
      }
    }
    if (e.type() != T::ARRAY) {
      return Error(field, fmt::format("must be \"open\", \"authenticated\" or an array of tenant "
                                      "names, got {}",
                                      JsonValueForMessage(e)));
    }
    out->open = false;
    size_t i = 0;
    for (dom::element name : dom::array(e)) {
      const std::string item = fmt::format("{}[{}]", field, i++);
      if (name.type() != T::STRING) {
        return Error(item, fmt::format("must be a tenant name, got {}", JsonValueForMessage(name)));
      }
      const std::string_view n = json_read::AsString(name);
      auto it = std::find_if(config.tenants.begin(), config.tenants.end(),
                             [n](const TenantConfig& t) { return t.name == n; });
      if (it == config.tenants.end()) {
        return Error(item, fmt::format("no tenant is named '{}'", n));
      }
      out->tenants.push_back(static_cast<int>(it - config.tenants.begin()));
    }
    return Status::OK();
  }

  Status ParseTenants(dom::element e, AuthConfig* config) {
    if (e.type() != T::ARRAY) {
      return Error("tenants", fmt::format("must be an array, got {}", JsonTypeName(e.type())));
    }
    size_t i = 0;
    for (dom::element t : dom::array(e)) {
      const std::string field = fmt::format("tenants[{}]", i++);
      KILN_ASSIGN_OR_RETURN(TenantConfig tenant, ParseTenant(t, field));
      for (const TenantConfig& other : config->tenants) {
        if (other.name == tenant.name) {
          return Error(field + ".name", fmt::format("tenant '{}' is declared twice", tenant.name));
        }
        for (const KeyDigest& k : tenant.keys) {
          if (std::find(other.keys.begin(), other.keys.end(), k) != other.keys.end()) {
            return Error(field + ".keys",
                         fmt::format("a key of tenant '{}' is also a key of tenant '{}'",
                                     tenant.name, other.name));
          }
        }
      }
      config->tenants.push_back(std::move(tenant));
    }
    return Status::OK();
  }

  Result<TenantConfig> ParseTenant(dom::element e, const std::string& field) const {
    if (e.type() != T::OBJECT) {
      return Error(field, fmt::format("must be an object, got {}", JsonTypeName(e.type())));
    }
    TenantConfig tenant;
    bool have_name = false;
    bool have_keys = false;
    for (dom::key_value_pair kv : dom::object(e)) {
      const std::string f = fmt::format("{}.{}", field, kv.key);
      if (kv.key == "name") {
        if (kv.value.type() != T::STRING) {
          return Error(f, fmt::format("must be a string, got {}", JsonValueForMessage(kv.value)));
        }
        tenant.name = std::string(json_read::AsString(kv.value));
        if (tenant.name.empty() || tenant.name.size() > 64 ||
            !std::all_of(tenant.name.begin(), tenant.name.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                     c == '.';
            })) {
          return Error(f, "must be 1 to 64 characters of A-Z a-z 0-9 _ - .");
        }
        if (tenant.name == "anonymous") {
          return Error(f, "'anonymous' is reserved (requests without a tenant)");
        }
        have_name = true;
      } else if (kv.key == "keys") {
        KILN_RETURN_IF_ERROR(ParseKeys(kv.value, f, &tenant.keys));
        have_keys = true;
      } else if (kv.key == "service_class") {
        const std::string_view s =
            kv.value.type() == T::STRING ? json_read::AsString(kv.value) : std::string_view();
        if (s != "guaranteed" && s != "best_effort") {
          return Error(f, fmt::format("must be \"guaranteed\" or \"best_effort\", got {}",
                                      JsonValueForMessage(kv.value)));
        }
        tenant.best_effort = s == "best_effort";
      } else if (kv.key == "limits") {
        KILN_RETURN_IF_ERROR(ParseLimits(kv.value, f, &tenant.limits));
      } else {
        return Error(f, "unknown field (expected name, keys, service_class, limits)");
      }
    }
    if (!have_name) return Error(field, "missing 'name'");
    if (!have_keys) return Error(field, "missing 'keys'");
    return tenant;
  }

  Status ParseKeys(dom::element e, const std::string& field, std::vector<KeyDigest>* keys) const {
    if (e.type() != T::ARRAY) {
      return Error(field, fmt::format("must be an array of keys, got {}", JsonTypeName(e.type())));
    }
    size_t i = 0;
    for (dom::element k : dom::array(e)) {
      const std::string f = fmt::format("{}[{}]", field, i++);
      // Messages name the field only: the value may be a secret.
      if (k.type() != T::STRING) {
        return Error(f, fmt::format("must be a string, got {}", JsonTypeName(k.type())));
      }
      const std::string_view key = json_read::AsString(k);
      if (key.starts_with(kDigestPrefix)) {
        const std::string_view hex = key.substr(kDigestPrefix.size());
        KeyDigest d{};
        if (hex.size() != 64 || !DecodeHex(hex, &d)) {
          return Error(f, "a \"sha256:\" key must be followed by exactly 64 hex digits");
        }
        keys->push_back(d);
        continue;
      }
      if (key.size() < kMinPlainKeyBytes) {
        return Error(f, fmt::format("a key must have at least {} characters", kMinPlainKeyBytes));
      }
      if (std::any_of(key.begin(), key.end(), [](char c) {
            return std::isspace(static_cast<unsigned char>(c)) ||
                   std::iscntrl(static_cast<unsigned char>(c));
          })) {
        return Error(f, "a key must not contain whitespace or control characters");
      }
      keys->push_back(DigestKey(key));
    }
    if (keys->empty()) return Error(field, "must hold at least one key");
    return Status::OK();
  }

  static bool DecodeHex(std::string_view hex, KeyDigest* out) {
    const auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (size_t i = 0; i < out->size(); ++i) {
      const int hi = nibble(hex[2 * i]);
      const int lo = nibble(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) return false;
      (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
    return true;
  }

  Status ParseLimits(dom::element e, const std::string& field, TenantLimits* limits) const {
    if (e.type() != T::OBJECT) {
      return Error(field, fmt::format("must be an object, got {}", JsonTypeName(e.type())));
    }
    for (dom::key_value_pair kv : dom::object(e)) {
      const std::string f = fmt::format("{}.{}", field, kv.key);
      const T type = kv.value.type();
      const bool number = type == T::INT64 || type == T::UINT64 || type == T::DOUBLE;
      const double v = number ? json_read::AsDouble(kv.value) : -1;
      if (!number || !(v >= 0) || !std::isfinite(v) || v > 1e12) {
        return Error(f, fmt::format("must be a number from 0 to 1e12, got {}",
                                    JsonValueForMessage(kv.value)));
      }
      if (kv.key == "requests_per_second") {
        limits->requests_per_second = v;
      } else if (kv.key == "burst") {
        limits->burst = v;
      } else if (kv.key == "tokens_per_second") {
        limits->tokens_per_second = v;
      } else if (kv.key == "token_burst") {
        limits->token_burst = v;
      } else if (kv.key == "max_concurrency") {
        if (v != std::floor(v)) {
          return Error(
              f, fmt::format("must be a whole number, got {}", JsonValueForMessage(kv.value)));
        }
        limits->max_concurrency = static_cast<int64_t>(v);
      } else {
        return Error(f,
                     "unknown field (expected requests_per_second, burst, tokens_per_second, "
                     "token_burst, max_concurrency)");
      }
    }
    return Status::OK();
  }

  std::string source_;
};

}  // namespace

KeyDigest DigestKey(std::string_view key) {
  KeyDigest d{};
  unsigned int size = 0;
  EVP_Digest(key.data(), key.size(), d.data(), &size, EVP_sha256(), nullptr);
  return d;
}

Result<AuthConfig> ParseAuthConfig(std::string_view json, std::string_view source) {
  return Parser(source).Parse(json);
}

Result<AuthConfig> LoadAuthFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(
        fmt::format("cannot read the auth file '{}': {}", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseAuthConfig(text.str(), "'" + path + "'");
}

}  // namespace kiln
