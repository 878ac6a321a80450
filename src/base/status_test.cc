// SPDX-License-Identifier: Apache-2.0
#include "base/status.h"

#include <gtest/gtest.h>

#include "base/result.h"

namespace kiln {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m"), StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {Status::NotFound("m"), StatusCode::kNotFound, "NOT_FOUND"},
      {Status::Unavailable("m"), StatusCode::kUnavailable, "UNAVAILABLE"},
      {Status::Internal("m"), StatusCode::kInternal, "INTERNAL"},
      {Status::ResourceExhausted("m"), StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {Status::Unimplemented("m"), StatusCode::kUnimplemented, "UNIMPLEMENTED"},
      {Status::DeadlineExceeded("m"), StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {Status::FailedPrecondition("m"), StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {Status::Cancelled("m"), StatusCode::kCancelled, "CANCELLED"},
      {Status::DataLoss("m"), StatusCode::kDataLoss, "DATA_LOSS"},
      {Status::Unauthenticated("m"), StatusCode::kUnauthenticated, "UNAUTHENTICATED"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
}

TEST(StatusTest, CopyAndMovePreserveError) {
  Status a = Status::NotFound("no model 'x'");
  Status b = a;
  EXPECT_EQ(a, b);
  Status c = std::move(a);
  EXPECT_EQ(c.code(), StatusCode::kNotFound);
  EXPECT_EQ(c.message(), "no model 'x'");
  b = Status::OK();
  EXPECT_TRUE(b.ok());
}

TEST(StatusTest, WithContextPrefixesMessage) {
  EXPECT_EQ(Status::InvalidArgument("bad dims").WithContext("input 'x'").message(),
            "input 'x': bad dims");
  EXPECT_TRUE(Status::OK().WithContext("anything").ok());
}

Status FailIf(bool fail) { return fail ? Status::Internal("boom") : Status::OK(); }
Status Chain(bool fail, int* reached) {
  KILN_RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return Status::OK();
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  int reached = 0;
  EXPECT_EQ(Chain(true, &reached).code(), StatusCode::kInternal);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}
Result<int> Quarter(int x) {
  KILN_ASSIGN_OR_RETURN(int h, Half(x));
  KILN_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(ResultTest, ValueOrStatus) {
  Result<int> ok = Quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd");
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(ResultDeathTest, ValueOnErrorAborts) {
  Result<int> r = Status::Internal("x");
  EXPECT_DEATH((void)r.value(), "Result::value\\(\\) on error");
}

}  // namespace
}  // namespace kiln
