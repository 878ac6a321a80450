// SPDX-License-Identifier: Apache-2.0
// The auth file: a full example, defaults, and each malformed input with the field it names
// (never the key).
#include "server/security/auth_config.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

TEST(AuthConfigTest, FullExample) {
  const std::string json = R"({
    "default": "authenticated",
    "tenants": [
      {"name": "acme", "keys": ["secret-key-1", "sha256:)" +
                           std::string(64, 'a') + R"("],
       "service_class": "best_effort",
       "limits": {"requests_per_second": 5, "burst": 10, "tokens_per_second": 100,
                  "token_burst": 200, "max_concurrency": 2}},
      {"name": "beta", "keys": ["beta-key-123"]}
    ],
    "groups": {"health": "open", "inference": ["acme"], "metadata": "authenticated"}
  })";
  Result<AuthConfig> c = ParseAuthConfig(json, "t.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->tenants.size(), 2u);
  const TenantConfig& acme = c->tenants[0];
  EXPECT_EQ(acme.name, "acme");
  ASSERT_EQ(acme.keys.size(), 2u);
  EXPECT_EQ(acme.keys[0], DigestKey("secret-key-1"));
  KeyDigest a{};
  a.fill(0xaa);
  EXPECT_EQ(acme.keys[1], a);
  EXPECT_TRUE(acme.best_effort);
  EXPECT_EQ(acme.limits.requests_per_second, 5);
  EXPECT_EQ(acme.limits.burst, 10);
  EXPECT_EQ(acme.limits.tokens_per_second, 100);
  EXPECT_EQ(acme.limits.token_burst, 200);
  EXPECT_EQ(acme.limits.max_concurrency, 2);
  EXPECT_FALSE(c->tenants[1].best_effort);
  const auto& g = c->groups;
  EXPECT_TRUE(g[static_cast<size_t>(ApiGroup::kHealth)].open);
  const GroupAccess& inference = g[static_cast<size_t>(ApiGroup::kInference)];
  EXPECT_FALSE(inference.open);
  EXPECT_FALSE(inference.any_tenant);
  EXPECT_EQ(inference.tenants, std::vector<int>{0});
  EXPECT_TRUE(g[static_cast<size_t>(ApiGroup::kMetadata)].any_tenant);
  // Not listed: the default.
  EXPECT_FALSE(g[static_cast<size_t>(ApiGroup::kLogging)].open);
  EXPECT_TRUE(g[static_cast<size_t>(ApiGroup::kLogging)].any_tenant);
}

TEST(AuthConfigTest, GroupsDefaultToOpen) {
  Result<AuthConfig> c = ParseAuthConfig(R"({"tenants": []})", "t.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const GroupAccess& g : c->groups) EXPECT_TRUE(g.open);
}

TEST(AuthConfigTest, DigestKeyIsSha256) {
  const KeyDigest d = DigestKey("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[1], 0x78);
  EXPECT_EQ(d[31], 0xad);
}

struct BadCase {
  const char* json;
  const char* expect;  // part of the message
};

TEST(AuthConfigTest, MalformedFilesNameTheField) {
  const BadCase cases[] = {
      {"{", "line 1, column 2: not valid JSON"},
      {"{\n\"tenants\": [\n{\"name\": \"a\" \"keys\": []}\n]}", "line 3, column 14"},
      {"{\"tenants\": [1, 2,]}", "line 1, column 19"},
      {"[]", "(top level): must be an object"},
      {R"({"tenant": []})", "tenant: unknown field"},
      {R"({"tenants": {}})", "tenants: must be an array"},
      {R"({"tenants": [{"keys": ["abcdefgh"]}]})", "tenants[0]: missing 'name'"},
      {R"({"tenants": [{"name": "a"}]})", "tenants[0]: missing 'keys'"},
      {R"({"tenants": [{"name": "a b", "keys": ["abcdefgh"]}]})", "tenants[0].name: must be"},
      {R"({"tenants": [{"name": "anonymous", "keys": ["abcdefgh"]}]})", "reserved"},
      {R"({"tenants": [{"name": "a", "keys": []}]})", "tenants[0].keys: must hold at least one"},
      {R"({"tenants": [{"name": "a", "keys": ["short"]}]})",
       "tenants[0].keys[0]: a key must have at least 8"},
      {R"({"tenants": [{"name": "a", "keys": ["sha256:abc"]}]})",
       "tenants[0].keys[0]: a \"sha256:\" key must be followed by exactly 64 hex digits"},
      {R"({"tenants": [{"name": "a", "keys": [7]}]})", "tenants[0].keys[0]: must be a string"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"], "color": 1}]})",
       "tenants[0].color: unknown field"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"], "service_class": "gold"}]})",
       "tenants[0].service_class: must be"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"], "limits": {"requests_per_second": -1}}]})",
       "tenants[0].limits.requests_per_second: must be a number from 0"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"], "limits": {"max_concurrency": 1.5}}]})",
       "tenants[0].limits.max_concurrency: must be a whole number"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"], "limits": {"rps": 1}}]})",
       "tenants[0].limits.rps: unknown field"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"]}, {"name": "a", "keys": ["ijklmnop"]}]})",
       "tenants[1].name: tenant 'a' is declared twice"},
      {R"({"tenants": [{"name": "a", "keys": ["abcdefgh"]}, {"name": "b", "keys": ["abcdefgh"]}]})",
       "tenants[1].keys: a key of tenant 'b' is also a key of tenant 'a'"},
      {R"({"groups": {"inferense": "open"}})", "groups.inferense: unknown API group"},
      {R"({"groups": {"inference": "closed"}})", "groups.inference: must be"},
      {R"({"groups": {"inference": ["nobody"]}})", "groups.inference[0]: no tenant is named"},
      {R"({"groups": []})", "groups: must be an object"},
      {R"({"default": "closed"})", "default: must be"},
  };
  for (const BadCase& c : cases) {
    Result<AuthConfig> r = ParseAuthConfig(c.json, "'t.json'");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_NE(r.status().message().find("auth file 't.json': "), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.json << "\n  got: " << r.status().message();
    EXPECT_EQ(r.status().message().find("abcdefgh"), std::string::npos) << "a key leaked";
  }
}

TEST(AuthConfigTest, MissingFileNamesIt) {
  Result<AuthConfig> r = LoadAuthFile("/nonexistent/tenants.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/tenants.json"), std::string::npos);
}

}  // namespace
}  // namespace kiln
