// SPDX-License-Identifier: Apache-2.0
#include "bench/range.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

namespace kiln::bench {
namespace {

constexpr size_t kMaxLevels = 10000;

Result<double> ParseNumber(std::string_view text, std::string_view whole, std::string_view what,
                           bool integral) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(value)) {
    return Status::InvalidArgument(
        fmt::format("range '{}': {} '{}' is not a number", whole, what, text));
  }
  if (integral && value != std::floor(value)) {
    return Status::InvalidArgument(
        fmt::format("range '{}': {} '{}' must be a whole number", whole, what, text));
  }
  return value;
}

}  // namespace

Result<std::vector<double>> ExpandRange(std::string_view text, bool integral) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (true) {
    size_t colon = text.find(':', begin);
    parts.push_back(text.substr(begin, colon == std::string_view::npos ? colon : colon - begin));
    if (colon == std::string_view::npos) break;
    begin = colon + 1;
  }
  if (parts.size() > 3) {
    return Status::InvalidArgument(
        fmt::format("range '{}': expected START[:END[:STEP]] (STEP may be xN)", text));
  }
  KILN_ASSIGN_OR_RETURN(double start, ParseNumber(parts[0], text, "START", integral));
  double end = start;
  if (parts.size() >= 2) {
    KILN_ASSIGN_OR_RETURN(end, ParseNumber(parts[1], text, "END", integral));
  }
  bool factor = false;
  double step = 1;
  if (parts.size() == 3) {
    std::string_view s = parts[2];
    if (!s.empty() && (s[0] == 'x' || s[0] == 'X')) {
      factor = true;
      KILN_ASSIGN_OR_RETURN(step, ParseNumber(s.substr(1), text, "factor", false));
    } else {
      KILN_ASSIGN_OR_RETURN(step, ParseNumber(s, text, "STEP", integral));
    }
  }
  if (start <= 0) {
    return Status::InvalidArgument(fmt::format("range '{}': START must be > 0", text));
  }
  if (end == 0 && parts.size() >= 2) {
    return Status::InvalidArgument(fmt::format(
        "range '{}': END 0 (sweep until a latency threshold) is not supported; give an END", text));
  }
  if (end < start) {
    return Status::InvalidArgument(
        fmt::format("range '{}': END {} is below START {}", text, end, start));
  }
  if (factor ? step <= 1 : step <= 0) {
    return Status::InvalidArgument(
        fmt::format("range '{}': the step must advance ({} > {} required)", text,
                    factor ? "factor" : "STEP", factor ? 1 : 0));
  }
  std::vector<double> levels;
  // A relative tolerance so that 0.1-steps land on END despite binary rounding.
  const double limit = end * (1 + 1e-9);
  for (int k = 0;; ++k) {
    double v = factor ? start * std::pow(step, k) : start + step * k;
    if (integral) v = std::round(v);
    if (v > limit) break;
    if (levels.size() >= kMaxLevels) {
      return Status::InvalidArgument(
          fmt::format("range '{}' has more than {} levels", text, kMaxLevels));
    }
    if (!levels.empty() && v == levels.back()) continue;  // x1.5 on small integers
    levels.push_back(v);
  }
  return levels;
}

}  // namespace kiln::bench
