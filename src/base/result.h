// SPDX-License-Identifier: Apache-2.0
#pragma once
// Result<T>: a value of type T or an error Status (never an OK Status without a value).
//
//   Result<Shape> r = Shape::Create(dims);
//   if (!r.ok()) return r.status();
//   KILN_ASSIGN_OR_RETURN(Shape shape, Shape::Create(dims));

#include <optional>
#include <utility>

#include "base/check.h"
#include "base/status.h"

namespace kiln {

template <typename T>
class [[nodiscard]] Result {
 public:
  // REQUIRES: !status.ok().
  Result(Status status) : status_(std::move(status)) {  // NOLINT(runtime/explicit)
    KILN_CHECK(!status_.ok(), "Result constructed from an OK Status without a value");
  }
  Result(T value) : value_(std::move(value)) {}  // NOLINT(runtime/explicit)
  template <typename U>
  requires(std::is_convertible_v<U&&, T> && !std::is_same_v<std::decay_t<U>, Status> &&
           !std::is_same_v<std::decay_t<U>, T>) Result(U&& value)
      : value_(std::forward<U>(value)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & {
    KILN_CHECK(ok(), "Result::value() on error: ", status_.ToString());
    return *value_;
  }
  const T& value() const& {
    KILN_CHECK(ok(), "Result::value() on error: ", status_.ToString());
    return *value_;
  }
  T&& value() && {
    KILN_CHECK(ok(), "Result::value() on error: ", status_.ToString());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace kiln

// Evaluates `rexpr` (a Result<T>); on error returns its Status, else moves the value into `lhs`
// (which may be a declaration: `KILN_ASSIGN_OR_RETURN(auto x, F())`).
#define KILN_ASSIGN_OR_RETURN(lhs, rexpr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_STATUS_CONCAT_(kiln_result_, __LINE__), lhs, rexpr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
