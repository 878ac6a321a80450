// SPDX-License-Identifier: Apache-2.0
#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace kiln::internal {

void CheckFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "kiln: check failed at %s:%d: %s%s%s\n", file, line, cond,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace kiln::internal
