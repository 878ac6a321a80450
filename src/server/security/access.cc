// SPDX-License-Identifier: Apache-2.0
// TenantGate; see access.h.
#include "server/security/access.h"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/mutex.h"
#include "server/security/rate_limit.h"

namespace kiln {

struct TenantGate::State {
  std::string name;
  bool best_effort = false;
  int64_t max_concurrency = 0;
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> unauthenticated{0};
  std::atomic<uint64_t> forbidden{0};
  std::atomic<uint64_t> rate_limited{0};
  std::atomic<uint64_t> generated_tokens{0};
  Mutex mu;
  std::optional<TokenBucket> requests KILN_GUARDED_BY(mu);
  std::optional<TokenBucket> tokens KILN_GUARDED_BY(mu);
  int64_t inflight KILN_GUARDED_BY(mu) = 0;
};

namespace {

bool IEqualsAscii(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view BearerKey(std::string_view authorization) {
  authorization = Trim(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() ||
      !IEqualsAscii(authorization.substr(0, kScheme.size()), kScheme) ||
      (authorization[kScheme.size()] != ' ' && authorization[kScheme.size()] != '\t')) {
    return {};
  }
  return Trim(authorization.substr(kScheme.size()));
}

TenantGate::TenantGate(AuthConfig config, const Clock* clock)
    : config_(std::move(config)), clock_(clock) {
  const int64_t now = clock_->NowNs();
  for (const TenantConfig& t : config_.tenants) {
    auto state = std::make_shared<State>();
    state->name = t.name;
    state->best_effort = t.best_effort;
    state->max_concurrency = t.limits.max_concurrency;
    MutexLock lock(state->mu);
    if (t.limits.requests_per_second > 0) {
      const double burst =
          t.limits.burst > 0 ? t.limits.burst : std::max(1.0, t.limits.requests_per_second);
      state->requests.emplace(t.limits.requests_per_second, std::max(1.0, burst), now);
    }
    if (t.limits.tokens_per_second > 0) {
      const double burst = t.limits.token_burst > 0 ? t.limits.token_burst
                                                    : std::max(1.0, t.limits.tokens_per_second);
      state->tokens.emplace(t.limits.tokens_per_second, burst, now);
    }
    tenants_.push_back(std::move(state));
  }
  anonymous_ = std::make_shared<State>();
  anonymous_->name = "anonymous";
}

TenantGate::~TenantGate() = default;

TenantGate::State* TenantGate::StateOf(int tenant) const {
  return tenant >= 0 && tenant < tenant_count() ? tenants_[static_cast<size_t>(tenant)].get()
                                                : anonymous_.get();
}

Result<int> TenantGate::Authorize(ApiGroup group, std::string_view key) {
  // Every key of every tenant is compared, whatever matches, in constant time per compare.
  int found = kAnonymous;
  if (!key.empty()) {
    const KeyDigest digest = DigestKey(key);
    for (size_t t = 0; t < config_.tenants.size(); ++t) {
      for (const KeyDigest& k : config_.tenants[t].keys) {
        const bool equal = CRYPTO_memcmp(k.data(), digest.data(), digest.size()) == 0;
        found = equal ? static_cast<int>(t) : found;
      }
    }
  }
  const GroupAccess& access = config_.groups[static_cast<size_t>(group)];
  State* state = StateOf(found);
  const bool counts_ok_here = group != ApiGroup::kInference;
  if (access.open) {
    if (counts_ok_here) state->ok.fetch_add(1, std::memory_order_relaxed);
    return found;
  }
  if (found == kAnonymous) {
    anonymous_->unauthenticated.fetch_add(1, std::memory_order_relaxed);
    if (key.empty()) {
      return Status::Unauthenticated(
          fmt::format("the '{}' API needs an API key: send 'Authorization: Bearer <key>'",
                      ApiGroupName(group)));
    }
    return Status::Unauthenticated("the API key is not valid");
  }
  if (!access.any_tenant &&
      std::find(access.tenants.begin(), access.tenants.end(), found) == access.tenants.end()) {
    state->forbidden.fetch_add(1, std::memory_order_relaxed);
    return Status::PermissionDenied(
        fmt::format("tenant '{}' may not use the '{}' API", state->name, ApiGroupName(group)));
  }
  if (counts_ok_here) state->ok.fetch_add(1, std::memory_order_relaxed);
  return found;
}

TenantGate::Admission TenantGate::Admit(int tenant, bool generation) {
  Admission a;
  State* state = StateOf(tenant);
  if (tenant == kAnonymous || state == anonymous_.get()) {
    anonymous_->ok.fetch_add(1, std::memory_order_relaxed);
    return a;
  }
  const int64_t now = clock_->NowNs();
  int64_t wait_ns = 0;
  std::string why;
  {
    MutexLock lock(state->mu);
    if (state->max_concurrency > 0 && state->inflight >= state->max_concurrency) {
      why = fmt::format("{} requests in flight, the most it may have at once",
                        state->max_concurrency);
      wait_ns = 1'000'000'000;
    } else if (generation && state->tokens && !state->tokens->NonNegative(now, &wait_ns)) {
      why = fmt::format("its generated-token rate limit ({} tokens/s) is used up",
                        state->tokens->rate_per_s());
    } else if (state->requests && !state->requests->TryTake(1, now, &wait_ns)) {
      why = fmt::format("its request rate limit ({} requests/s) is used up",
                        state->requests->rate_per_s());
    } else {
      ++state->inflight;
    }
  }
  if (!why.empty()) {
    state->rate_limited.fetch_add(1, std::memory_order_relaxed);
    a.retry_after_s = RetryAfterSeconds(wait_ns);
    a.status = Status::ResourceExhausted(fmt::format(
        "tenant '{}' is over its limits: {}; retry after {} s", state->name, why, a.retry_after_s));
    return a;
  }
  state->ok.fetch_add(1, std::memory_order_relaxed);
  a.lease = std::make_shared<TenantLease>(tenants_[static_cast<size_t>(tenant)], clock_);
  return a;
}

bool TenantGate::best_effort(int tenant) const {
  return tenant != kAnonymous && StateOf(tenant)->best_effort;
}

const std::string& TenantGate::tenant_name(int tenant) const { return StateOf(tenant)->name; }

std::vector<TenantSnapshot> TenantGate::Snapshot() const {
  std::vector<TenantSnapshot> out;
  const auto add = [&out](State& s) {
    TenantSnapshot snap;
    snap.name = s.name;
    snap.ok = s.ok.load(std::memory_order_relaxed);
    snap.unauthenticated = s.unauthenticated.load(std::memory_order_relaxed);
    snap.forbidden = s.forbidden.load(std::memory_order_relaxed);
    snap.rate_limited = s.rate_limited.load(std::memory_order_relaxed);
    snap.generated_tokens = s.generated_tokens.load(std::memory_order_relaxed);
    {
      MutexLock lock(s.mu);
      snap.inflight = s.inflight;
    }
    out.push_back(std::move(snap));
  };
  for (const auto& t : tenants_) add(*t);
  add(*anonymous_);
  return out;
}

TenantLease::TenantLease(std::shared_ptr<TenantGate::State> state, const Clock* clock)
    : state_(std::move(state)), clock_(clock) {}

TenantLease::~TenantLease() {
  MutexLock lock(state_->mu);
  --state_->inflight;
}

void TenantLease::ChargeTokens(int64_t n) {
  if (n <= 0) return;
  state_->generated_tokens.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  const int64_t now = clock_->NowNs();
  MutexLock lock(state_->mu);
  if (state_->tokens) state_->tokens->Charge(static_cast<double>(n), now);
}

}  // namespace kiln
