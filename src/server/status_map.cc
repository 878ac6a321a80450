// SPDX-License-Identifier: Apache-2.0
// The StatusCode -> HTTP / gRPC table; see status_map.h for the reasons behind each row.
#include "server/status_map.h"

#include <array>

namespace kiln {
namespace {

using C = StatusCode;

constexpr std::array<ProtocolStatus, 17> kTable = {{
    {C::kOk, 200, 0, false},
    {C::kCancelled, 400, 1, false},
    {C::kUnknown, 400, 2, false},
    {C::kInvalidArgument, 400, 3, false},
    {C::kDeadlineExceeded, 504, 4, false},
    {C::kNotFound, 404, 5, false},
    {C::kAlreadyExists, 400, 6, false},
    {C::kPermissionDenied, 403, 7, false},
    {C::kResourceExhausted, 429, 8, true},
    {C::kFailedPrecondition, 400, 9, false},
    {C::kAborted, 400, 10, false},
    {C::kOutOfRange, 400, 11, false},
    {C::kUnimplemented, 501, 12, false},
    {C::kInternal, 500, 13, false},
    {C::kUnavailable, 503, 14, false},
    {C::kDataLoss, 500, 15, false},
    {C::kUnauthenticated, 401, 16, false},
}};

constexpr bool TableIsOrderedAndIdentityForGrpc() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].code) != i) return false;
    if (kTable[i].grpc != static_cast<int>(kTable[i].code)) return false;
  }
  return true;
}
static_assert(TableIsOrderedAndIdentityForGrpc(),
              "one row per StatusCode, in code order, gRPC code == kiln code");
static_assert(static_cast<int>(StatusCode::kUnauthenticated) + 1 == static_cast<int>(kTable.size()),
              "a StatusCode was added: give it a row");

}  // namespace

std::span<const ProtocolStatus> ProtocolStatusTable() { return kTable; }

const ProtocolStatus& ProtocolStatusFor(StatusCode code) {
  const auto index = static_cast<size_t>(code);
  if (index >= kTable.size()) return kTable[static_cast<size_t>(StatusCode::kUnknown)];
  return kTable[index];
}

}  // namespace kiln
