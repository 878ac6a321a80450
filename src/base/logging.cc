// SPDX-License-Identifier: Apache-2.0
#include "base/logging.h"

namespace kiln {

void SetLogVerbosity(int verbose, bool quiet) {
  spdlog::level::level_enum level = spdlog::level::info;
  if (quiet) level = spdlog::level::warn;
  else if (verbose >= 2) level = spdlog::level::trace;
  else if (verbose == 1) level = spdlog::level::debug;
  spdlog::set_level(level);
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ %v");
}

}  // namespace kiln
