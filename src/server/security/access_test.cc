// SPDX-License-Identifier: Apache-2.0
// TenantGate on a fake clock: key lookup (plain and sha256 keys), 401 / 403 without leaking,
// open groups, request rate limits with Retry-After, concurrency quotas, the token bucket of
// generations, and the per-tenant counters.
#include "server/security/access.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

std::string HexOf(const KeyDigest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

AuthConfig Config() {
  const std::string json = R"({
    "tenants": [
      {"name": "acme", "keys": ["acme-key-0001"],
       "limits": {"requests_per_second": 2, "burst": 2, "max_concurrency": 5,
                  "tokens_per_second": 10, "token_burst": 10}},
      {"name": "beta", "keys": ["sha256:)" +
                           HexOf(DigestKey("beta-key-0001")) + R"("],
       "service_class": "best_effort",
       "limits": {"max_concurrency": 1}}
    ],
    "groups": {"health": "open", "inference": ["acme", "beta"], "model-repository": ["acme"],
               "metadata": "authenticated"}
  })";
  Result<AuthConfig> c = ParseAuthConfig(json, "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(BearerKeyTest, ParsesTheHeader) {
  EXPECT_EQ(BearerKey("Bearer abc"), "abc");
  EXPECT_EQ(BearerKey("bearer   abc  "), "abc");
  EXPECT_EQ(BearerKey("BEARER\tabc"), "abc");
  EXPECT_EQ(BearerKey("Basic abc"), "");
  EXPECT_EQ(BearerKey("Bearer"), "");
  EXPECT_EQ(BearerKey("Bearerabc"), "");
  EXPECT_EQ(BearerKey(""), "");
}

TEST(TenantGateTest, KeysMapToTenants) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  EXPECT_EQ(gate.Authorize(ApiGroup::kInference, "acme-key-0001").value(), 0);
  EXPECT_EQ(gate.Authorize(ApiGroup::kInference, "beta-key-0001").value(), 1);  // sha256 key
  EXPECT_EQ(gate.tenant_name(1), "beta");
  EXPECT_TRUE(gate.best_effort(1));
  EXPECT_FALSE(gate.best_effort(0));
  EXPECT_FALSE(gate.best_effort(TenantGate::kAnonymous));
}

TEST(TenantGateTest, MissingOrBadKeyIsUnauthenticatedWithoutEcho) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  Result<int> none = gate.Authorize(ApiGroup::kInference, "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(none.status().message().find("Authorization: Bearer"), std::string::npos);
  Result<int> bad = gate.Authorize(ApiGroup::kInference, "acme-key-0002");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(bad.status().message(), "the API key is not valid");
}

TEST(TenantGateTest, TenantOutsideTheGroupIsForbidden) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  Result<int> r = gate.Authorize(ApiGroup::kModelRepository, "beta-key-0001");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message(), "tenant 'beta' may not use the 'model-repository' API");
  EXPECT_EQ(gate.Authorize(ApiGroup::kModelRepository, "acme-key-0001").value(), 0);
  // "authenticated": any tenant.
  EXPECT_EQ(gate.Authorize(ApiGroup::kMetadata, "beta-key-0001").value(), 1);
}

TEST(TenantGateTest, OpenGroupsNeedNoKeyAndIgnoreUnknownOnes) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  EXPECT_EQ(gate.Authorize(ApiGroup::kHealth, "").value(), TenantGate::kAnonymous);
  EXPECT_EQ(gate.Authorize(ApiGroup::kHealth, "who-knows-this").value(), TenantGate::kAnonymous);
  EXPECT_EQ(gate.Authorize(ApiGroup::kHealth, "acme-key-0001").value(), 0);
  // Groups not listed follow "default" (open here).
  EXPECT_EQ(gate.Authorize(ApiGroup::kLogging, "").value(), TenantGate::kAnonymous);
}

TEST(TenantGateTest, RequestRateLimitWithRetryAfter) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  std::vector<std::shared_ptr<TenantLease>> held;
  for (int i = 0; i < 2; ++i) {
    TenantGate::Admission a = gate.Admit(0, false);
    ASSERT_TRUE(a.status.ok()) << i;
    held.push_back(a.lease);
  }
  TenantGate::Admission over = gate.Admit(0, false);
  EXPECT_EQ(over.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(over.retry_after_s, 1);  // 0.5 s to the next unit, rounded up
  EXPECT_NE(over.status.message().find("request rate limit (2 requests/s)"), std::string::npos)
      << over.status.message();
  clock.Advance(kSecond / 2);
  EXPECT_TRUE(gate.Admit(0, false).status.ok());
}

TEST(TenantGateTest, ConcurrencyQuotaFreedByTheLease) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  TenantGate::Admission first = gate.Admit(1, false);
  ASSERT_TRUE(first.status.ok());
  TenantGate::Admission second = gate.Admit(1, false);
  EXPECT_EQ(second.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(second.status.message().find("1 requests in flight"), std::string::npos);
  EXPECT_EQ(gate.Snapshot()[1].inflight, 1);
  first.lease.reset();
  EXPECT_EQ(gate.Snapshot()[1].inflight, 0);
  EXPECT_TRUE(gate.Admit(1, false).status.ok());
}

TEST(TenantGateTest, GeneratedTokensRefuseNewGenerationsWhileNegative) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  TenantGate::Admission gen = gate.Admit(0, true);
  ASSERT_TRUE(gen.status.ok());
  gen.lease->ChargeTokens(25);  // bucket 10 -> -15 at 10 tokens/s
  gen.lease.reset();
  clock.Advance(kSecond);  // request bucket full again; tokens at -5
  TenantGate::Admission next = gate.Admit(0, true);
  EXPECT_EQ(next.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(next.retry_after_s, 1);
  EXPECT_NE(next.status.message().find("generated-token rate limit"), std::string::npos);
  // A tensor request is not a generation: the token bucket does not apply.
  EXPECT_TRUE(gate.Admit(0, false).status.ok());
  clock.Advance(kSecond / 2);
  EXPECT_TRUE(gate.Admit(0, true).status.ok());
  EXPECT_EQ(gate.Snapshot()[0].generated_tokens, 25u);
}

TEST(TenantGateTest, AnonymousRequestsHaveNoLimits) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  for (int i = 0; i < 10; ++i) {
    TenantGate::Admission a = gate.Admit(TenantGate::kAnonymous, true);
    EXPECT_TRUE(a.status.ok());
    EXPECT_EQ(a.lease, nullptr);
  }
}

TEST(TenantGateTest, CountsOutcomesPerTenant) {
  FakeClock clock;
  TenantGate gate(Config(), &clock);
  (void)gate.Authorize(ApiGroup::kInference, "");
  (void)gate.Authorize(ApiGroup::kInference, "nope-nope-nope");
  (void)gate.Authorize(ApiGroup::kModelRepository, "beta-key-0001");
  (void)gate.Authorize(ApiGroup::kMetadata, "acme-key-0001");
  (void)gate.Authorize(ApiGroup::kInference, "acme-key-0001");  // counted by Admit
  auto a = gate.Admit(0, false);
  auto b = gate.Admit(0, false);
  auto c = gate.Admit(0, false);  // rate limited
  const std::vector<TenantSnapshot> s = gate.Snapshot();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "acme");
  EXPECT_EQ(s[0].ok, 3u);  // metadata + two admitted
  EXPECT_EQ(s[0].rate_limited, 1u);
  EXPECT_EQ(s[0].inflight, 2);
  EXPECT_EQ(s[1].forbidden, 1u);
  EXPECT_EQ(s[2].name, "anonymous");
  EXPECT_EQ(s[2].unauthenticated, 2u);
}

}  // namespace
}  // namespace kiln
