// SPDX-License-Identifier: Apache-2.0
#pragma once
// Status: the result of an operation that can fail because of something outside the program
// (a request, a model file, a config, the environment). OK costs one null pointer; an error
// carries a code aligned with the gRPC canonical codes and a message that names the problem.
// Result<T> (result.h) carries a value or a Status.
//
// Thread safety: a Status is a value; distinct objects may be used from distinct threads.
//
//   Status s = Status::InvalidArgument(fmt::format("input '{}' has {} dims", name, n));
//   if (!s.ok()) return s;
//   KILN_RETURN_IF_ERROR(DoThing());

#include <memory>
#include <string>
#include <string_view>

namespace kiln {

// Closed set, numbered as the gRPC canonical codes so the server can map them by table.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "INVALID_ARGUMENT", "NOT_FOUND", ... (the gRPC spelling).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  static Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status Unknown(std::string msg) { return {StatusCode::kUnknown, std::move(msg)}; }
  static Status InvalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  static Status DeadlineExceeded(std::string msg) {
    return {StatusCode::kDeadlineExceeded, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) {
    return {StatusCode::kAlreadyExists, std::move(msg)};
  }
  static Status PermissionDenied(std::string msg) {
    return {StatusCode::kPermissionDenied, std::move(msg)};
  }
  static Status ResourceExhausted(std::string msg) {
    return {StatusCode::kResourceExhausted, std::move(msg)};
  }
  static Status FailedPrecondition(std::string msg) {
    return {StatusCode::kFailedPrecondition, std::move(msg)};
  }
  static Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
  static Status OutOfRange(std::string msg) { return {StatusCode::kOutOfRange, std::move(msg)}; }
  static Status Unimplemented(std::string msg) {
    return {StatusCode::kUnimplemented, std::move(msg)};
  }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status DataLoss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
  static Status Unauthenticated(std::string msg) {
    return {StatusCode::kUnauthenticated, std::move(msg)};
  }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;
  // "OK" or "INVALID_ARGUMENT: message".
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message" (OK stays OK).
  Status WithContext(std::string_view prefix) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

}  // namespace kiln

#define KILN_STATUS_CONCAT_INNER_(a, b) a##b
#define KILN_STATUS_CONCAT_(a, b) KILN_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (a Status); returns it from the enclosing function when not OK.
#define KILN_RETURN_IF_ERROR(expr)                       \
  do {                                                   \
    ::kiln::Status kiln_status_tmp_ = (expr);            \
    if (!kiln_status_tmp_.ok()) return kiln_status_tmp_; \
  } while (0)
