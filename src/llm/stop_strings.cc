// SPDX-License-Identifier: Apache-2.0
#include "llm/stop_strings.h"

#include <algorithm>
#include <utility>

namespace kiln::llm {
namespace {

// Whether byte `i` of `s` begins a UTF-8 character (is not a continuation byte 10xxxxxx).
bool AtBoundary(std::string_view s, size_t i) {
  return i >= s.size() || (static_cast<unsigned char>(s[i]) & 0xC0u) != 0x80u;
}

}  // namespace

StopStringFilter::StopStringFilter(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopStringFilter::Push(std::string_view text) {
  if (stopped_) return {};
  if (stops_.empty()) return std::string(text);
  const size_t old_size = held_.size();
  held_.append(text);
  const std::string_view buf(held_);

  // The earliest match: smallest end, then smallest start. The held part had none, so a match
  // ends in the new text; for each stop string its first occurrence there is its earliest.
  size_t best_start = std::string_view::npos, best_end = std::string_view::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stops_) {
    size_t from = old_size + 1 > s.size() ? old_size + 1 - s.size() : 0;
    for (;;) {
      const size_t pos = buf.find(s, from);
      if (pos == std::string_view::npos) break;
      if (!AtBoundary(buf, pos)) {
        from = pos + 1;
        continue;
      }
      const size_t end = pos + s.size();
      if (end < best_end || (end == best_end && pos < best_start)) {
        best_start = pos;
        best_end = end;
        best = &s;
      }
      break;
    }
  }
  if (best != nullptr) {
    std::string out = held_.substr(0, best_start);
    stopped_ = true;
    matched_ = *best;
    held_.clear();
    return out;
  }

  // Hold back the longest tail (starting at a character boundary) that is a proper prefix of a
  // stop string.
  size_t hold_from = buf.size();
  for (const std::string& s : stops_) {
    const size_t longest = std::min(s.size() - 1, buf.size());
    // Tails longer than the one already held are the only ones worth checking.
    for (size_t len = longest; len > 0 && buf.size() - len < hold_from; --len) {
      const size_t start = buf.size() - len;
      if (buf[start] != s[0] || !AtBoundary(buf, start)) continue;
      if (buf.compare(start, len, s, 0, len) == 0) {
        hold_from = start;
        break;
      }
    }
  }
  std::string out = held_.substr(0, hold_from);
  held_.erase(0, hold_from);
  return out;
}

std::string StopStringFilter::Flush() {
  if (stopped_) return {};
  return std::exchange(held_, std::string());
}

}  // namespace kiln::llm
