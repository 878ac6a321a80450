// SPDX-License-Identifier: Apache-2.0
#pragma once
// TenantGate: who is calling (an API key -> a tenant), whether that tenant may use an API group,
// and whether its limits admit one more inference request. The HTTP, gRPC and metrics front
// ends ask it before they handle a request; it answers with a Status they map as any other
// (UNAUTHENTICATED 401, PERMISSION_DENIED 403, RESOURCE_EXHAUSTED 429 with Retry-After).
//
//   auto gate = std::make_shared<TenantGate>(LoadAuthFile(path).value());
//   Result<int> tenant = gate->Authorize(ApiGroup::kInference, BearerKey(authorization));
//   if (!tenant.ok()) answer tenant.status();
//   TenantGate::Admission a = gate->Admit(*tenant, /*generation=*/false);
//   if (!a.status.ok()) answer a.status with Retry-After: a.retry_after_s;
//   ... the request's sink holds a.lease until its answer; generated tokens are charged with
//   a.lease->ChargeTokens(n) as they come.
//
// Keys are compared as SHA-256 digests, each presented key against every key of every tenant
// with a constant-time compare and no early exit, so the time taken says nothing about which
// keys exist. Messages never echo a key and never say whether a key belongs to another tenant.
// Open groups need no key; a valid key sent to an open group still identifies its tenant (its
// limits and metrics apply), an unknown one is ignored there. Limits apply to the inference
// group only (rate_limit.h has the bucket semantics): a request takes one unit of the tenant's
// request bucket and a concurrency slot; a generation is also refused while the tenant's token
// bucket is below zero. Requests without a tenant (an open group) have no limits.
//
// Thread safety: every method is thread-safe; a TenantLease may be used and destroyed on any
// thread and keeps its tenant's state alive.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "sched/clock.h"
#include "server/security/api_groups.h"
#include "server/security/auth_config.h"

namespace kiln {

// The key of an `Authorization: Bearer <key>` header value (the scheme case-insensitive, spaces
// around the key ignored); empty when the value is empty or not a Bearer credential.
std::string_view BearerKey(std::string_view authorization);

// Per-tenant counters for /metrics (name "anonymous": requests without a tenant).
struct TenantSnapshot {
  std::string name;
  uint64_t ok = 0;               // requests let through
  uint64_t unauthenticated = 0;  // 401 (counted under "anonymous": no tenant is known)
  uint64_t forbidden = 0;        // 403
  uint64_t rate_limited = 0;     // 429
  int64_t inflight = 0;          // inference requests admitted and not answered
  uint64_t generated_tokens = 0;
};

class TenantLease;

class TenantGate {
 public:
  static constexpr int kAnonymous = -1;

  // REQUIRES: `clock` outlives the gate.
  explicit TenantGate(AuthConfig config, const Clock* clock = &SteadyClock());
  ~TenantGate();
  TenantGate(const TenantGate&) = delete;
  TenantGate& operator=(const TenantGate&) = delete;

  // The tenant that sends `key` (empty: none) for a request of `group`: its index, or
  // kAnonymous for an open group used without a valid key. UNAUTHENTICATED when the group is
  // not open and the key is missing or no tenant's; PERMISSION_DENIED when the tenant may not
  // use the group. Counts the outcome (ok is counted here for every group but inference, whose
  // requests count when Admit lets them through).
  Result<int> Authorize(ApiGroup group, std::string_view key);

  struct Admission {
    Status status;                       // OK or RESOURCE_EXHAUSTED
    int64_t retry_after_s = 0;           // with RESOURCE_EXHAUSTED: seconds until a retry may pass
    std::shared_ptr<TenantLease> lease;  // null for kAnonymous
  };
  // Admits one inference request of `tenant` (a generation when `generation`): takes a unit of
  // the request bucket and a concurrency slot, held by the lease until it is destroyed.
  Admission Admit(int tenant, bool generation);

  // The tenant's service class is "best_effort". False for kAnonymous.
  bool best_effort(int tenant) const;
  // "anonymous" for kAnonymous.
  const std::string& tenant_name(int tenant) const;
  int tenant_count() const { return static_cast<int>(tenants_.size()); }

  // Every tenant in file order, then "anonymous".
  std::vector<TenantSnapshot> Snapshot() const;

  struct State;  // public for TenantLease

 private:
  State* StateOf(int tenant) const;

  const AuthConfig config_;
  const Clock* const clock_;
  std::vector<std::shared_ptr<State>> tenants_;  // one per config_.tenants entry
  std::shared_ptr<State> anonymous_;
};

// One admitted inference request's hold on its tenant's concurrency slot.
class TenantLease {
 public:
  TenantLease(std::shared_ptr<TenantGate::State> state, const Clock* clock);
  ~TenantLease();  // frees the slot
  TenantLease(const TenantLease&) = delete;
  TenantLease& operator=(const TenantLease&) = delete;

  // Charges `n` generated tokens to the tenant's token bucket (and its counter).
  void ChargeTokens(int64_t n);

 private:
  std::shared_ptr<TenantGate::State> state_;
  const Clock* clock_;
};

}  // namespace kiln
