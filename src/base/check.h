// SPDX-License-Identifier: Apache-2.0
#pragma once
// KILN_CHECK / KILN_DCHECK: invariants of the program itself (bugs), never input validation.
// A failed check prints file, line, the condition and the message parts, then aborts.
// KILN_CHECK is always on; KILN_DCHECK only when NDEBUG is not defined.
//
//   KILN_CHECK(index < size_, "index ", index, " out of range ", size_);

#include <sstream>
#include <string>

namespace kiln::internal {

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);

template <typename... Args>
std::string CheckMessage(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace kiln::internal

#define KILN_CHECK(cond, ...)                                                     \
  do {                                                                            \
    if (!(cond)) [[unlikely]]                                                     \
      ::kiln::internal::CheckFailed(__FILE__, __LINE__, #cond,                    \
                                    ::kiln::internal::CheckMessage(__VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define KILN_DCHECK(cond, ...) \
  do {                         \
  } while (false && (cond))
#else
#define KILN_DCHECK(cond, ...) KILN_CHECK(cond, __VA_ARGS__)
#endif
