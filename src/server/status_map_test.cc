// SPDX-License-Identifier: Apache-2.0
// The StatusCode -> HTTP / gRPC table: one row per code, the KSERVE-V2.md 1.1 classes, and the
// identity mapping to gRPC.
#include "server/status_map.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(StatusMapTest, OneRowPerCodeInOrder) {
  const auto table = ProtocolStatusTable();
  ASSERT_EQ(table.size(), 17u);
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(table[i].code), i);
    EXPECT_EQ(&ProtocolStatusFor(table[i].code), &table[i]);
  }
}

TEST(StatusMapTest, GrpcIsIdentity) {
  for (const ProtocolStatus& row : ProtocolStatusTable()) {
    EXPECT_EQ(row.grpc, static_cast<int>(row.code)) << StatusCodeName(row.code);
    EXPECT_EQ(GrpcStatusFor(row.code), static_cast<int>(row.code));
  }
}

struct HttpCase {
  StatusCode code;
  int http;
};

TEST(StatusMapTest, HttpStatusPerKserveTable) {
  const HttpCase cases[] = {
      {StatusCode::kOk, 200},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kUnknown, 400},
      {StatusCode::kCancelled, 400},
      {StatusCode::kAlreadyExists, 400},
      {StatusCode::kFailedPrecondition, 400},
      {StatusCode::kAborted, 400},
      {StatusCode::kOutOfRange, 400},
      {StatusCode::kNotFound, 404},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kUnimplemented, 501},
      {StatusCode::kInternal, 500},
      {StatusCode::kDataLoss, 500},
      {StatusCode::kUnauthenticated, 401},
      {StatusCode::kPermissionDenied, 403},
      {StatusCode::kResourceExhausted, 429},
      {StatusCode::kDeadlineExceeded, 504},
  };
  for (const HttpCase& c : cases) {
    EXPECT_EQ(HttpStatusFor(c.code), c.http) << StatusCodeName(c.code);
  }
}

TEST(StatusMapTest, RetryAfterOnlyForFullQueues) {
  for (const ProtocolStatus& row : ProtocolStatusTable()) {
    EXPECT_EQ(row.http_retry_after, row.code == StatusCode::kResourceExhausted)
        << StatusCodeName(row.code);
  }
}

TEST(StatusMapTest, OutOfRangeValueMapsLikeUnknown) {
  EXPECT_EQ(HttpStatusFor(static_cast<StatusCode>(99)), 400);
  EXPECT_EQ(GrpcStatusFor(static_cast<StatusCode>(-1)), 2);
}

}  // namespace
}  // namespace kiln
