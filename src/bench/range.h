// SPDX-License-Identifier: Apache-2.0
#pragma once
// Load sweeps for `kiln bench`: "START:END:STEP" as perf_analyzer reads --concurrency-range and
// --request-rate-range, plus kiln's factor step "START:END:xN" (START, START*N, START*N^2, ...).
//
//   ExpandRange("1:64:x2", /*integral=*/true)   -> {1, 2, 4, 8, 16, 32, 64}
//   ExpandRange("100:400:100", false)           -> {100, 200, 300, 400}
//   ExpandRange("8", true)                      -> {8}
//
// As in perf_analyzer a level is included while it is <= END (END itself only when a step lands
// on it); STEP defaults to 1 and END to START. perf_analyzer's END = 0 ("until a latency
// threshold") is not supported and is refused with a message.

#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::bench {

// `integral`: every level must be a positive integer (concurrency); otherwise positive reals
// (request rates). Returns InvalidArgument naming the text for a malformed range, a step that
// does not advance (0, x1, xN with N <= 1), END < START, or more than 10000 levels.
Result<std::vector<double>> ExpandRange(std::string_view text, bool integral);

}  // namespace kiln::bench
