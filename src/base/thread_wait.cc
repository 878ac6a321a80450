// SPDX-License-Identifier: Apache-2.0
#include "base/thread_wait.h"

#include <unistd.h>

#include <cstdlib>

#include "base/settings.h"

namespace kiln {

void ApplyThreadWaitPolicy(char** argv) {
  if (SettingValue(Setting::kThreadWait) == "openmp") return;
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) {
    return;  // set by the user (or by this function, before the re-execution)
  }
  if (setenv("GOMP_SPINCOUNT", kBoundedSpinCount, /*overwrite=*/1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when execv failed (no /proc, say): carry on with libgomp's defaults, and keep
  // the environment as it was for child processes.
  unsetenv("GOMP_SPINCOUNT");
}

std::string DescribeThreadWait() {
  std::string out;
  for (const char* name : {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"}) {
    if (const char* v = std::getenv(name); v != nullptr) {
      if (!out.empty()) out += " ";
      out += std::string(name) + "=" + v;
    }
  }
  return out.empty() ? "OpenMP default" : out;
}

}  // namespace kiln
