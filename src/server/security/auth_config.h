// SPDX-License-Identifier: Apache-2.0
#pragma once
// The auth file (`kiln serve --auth-file FILE`): tenants, their API keys, service class and
// limits, and which tenants may use each API group (api_groups.h). JSON:
//
//   {
//     "default": "open",                       // groups not listed: "open" or "authenticated"
//     "tenants": [
//       {"name": "acme",
//        "keys": ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
//                 "a-plain-key-also-works"],
//        "service_class": "guaranteed",        // or "best_effort"; default "guaranteed"
//        "limits": {"requests_per_second": 50, "burst": 100, "tokens_per_second": 2000,
//                   "token_burst": 4000, "max_concurrency": 8}}
//     ],
//     "groups": {"health": "open", "metrics": "open", "inference": ["acme"],
//                "model-repository": "authenticated"}
//   }
//
// A group's access is "open" (no key needed), "authenticated" (any tenant's valid key) or an
// array of tenant names. A key is a plain string (at least 8 characters, no whitespace) or
// "sha256:" and the 64 hex digits of its SHA-256, so the file need not hold the secret. Keys
// are kept only as SHA-256 digests. Limits are optional, 0 meaning "no limit"; see
// rate_limit.h for what they mean. Unknown fields are errors (a typo would silently open an
// API otherwise), and every error names the file and the field ("tenants.json: tenants[1].keys[0]:
// ..."), never a key.
//
// Thread safety: pure functions; an AuthConfig is a plain value.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "server/security/api_groups.h"

namespace kiln {

using KeyDigest = std::array<uint8_t, 32>;  // SHA-256

struct TenantLimits {
  double requests_per_second = 0;  // refill of the request bucket; 0: no request limit
  double burst = 0;                // request bucket size; 0: max(1, requests_per_second)
  double tokens_per_second = 0;    // refill of the generated-token bucket; 0: no token limit
  double token_burst = 0;          // token bucket size; 0: max(1, tokens_per_second)
  int64_t max_concurrency = 0;     // inference requests in flight at once; 0: no limit
};

struct TenantConfig {
  std::string name;
  std::vector<KeyDigest> keys;
  bool best_effort = false;  // service_class "best_effort" (else "guaranteed")
  TenantLimits limits;
};

struct GroupAccess {
  bool open = true;          // anyone, without a key
  bool any_tenant = false;   // (not open) every tenant with a valid key
  std::vector<int> tenants;  // (not open, not any_tenant) indices into AuthConfig::tenants
};

struct AuthConfig {
  std::vector<TenantConfig> tenants;
  std::array<GroupAccess, kApiGroupCount> groups;  // indexed by ApiGroup
};

// Parses the file's text; `source` names it in errors. INVALID_ARGUMENT naming the field.
Result<AuthConfig> ParseAuthConfig(std::string_view json, std::string_view source);

// Reads and parses `path`; NOT_FOUND / INVALID_ARGUMENT naming the file.
Result<AuthConfig> LoadAuthFile(const std::string& path);

// The SHA-256 of `key`.
KeyDigest DigestKey(std::string_view key);

}  // namespace kiln
