// SPDX-License-Identifier: Apache-2.0
// Unicode helpers for the tokenizers; see unicode_props.h.
#include "llm/unicode_props.h"

#include <algorithm>

namespace kiln::llm {

namespace unicode_internal {
// unicode_tables.cc (generated).
extern const char kUnicodeVersion[];
extern const size_t kClassRunCount;
extern const uint32_t kClassRuns[];
}  // namespace unicode_internal

namespace {

constexpr uint32_t kClassOther = 0;
constexpr uint32_t kClassLetter = 1;
constexpr uint32_t kClassNumber = 2;

uint32_t ClassOf(char32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return kClassLetter;
    if (cp >= '0' && cp <= '9') return kClassNumber;
    return kClassOther;
  }
  if (cp > 0x10FFFF) return kClassOther;
  using unicode_internal::kClassRunCount;
  using unicode_internal::kClassRuns;
  // The last run whose first code point is <= cp: entries are (first << 2) | class, so any
  // key (cp << 2) | 3 sorts after every entry starting at or before cp.
  const uint32_t key = (static_cast<uint32_t>(cp) << 2) | 3u;
  const uint32_t* end = kClassRuns + kClassRunCount;
  const uint32_t* it = std::upper_bound(kClassRuns, end, key);
  if (it == kClassRuns) return kClassOther;
  return *(it - 1) & 3u;
}

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// The valid range of the second byte of a sequence led by `lead` (the first continuation byte
// carries the overlong, surrogate and > U+10FFFF restrictions).
void SecondByteRange(uint8_t lead, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead == 0xE0) *lo = 0xA0;
  if (lead == 0xED) *hi = 0x9F;
  if (lead == 0xF0) *lo = 0x90;
  if (lead == 0xF4) *hi = 0x8F;
}

// How many bytes of s starting at pos form a valid prefix of one character (0 when s[pos]
// cannot start one), and whether the prefix is the complete character.
size_t ValidPrefix(std::string_view s, size_t pos, bool* complete) {
  const uint8_t lead = static_cast<uint8_t>(s[pos]);
  const int len = Utf8SequenceLength(lead);
  *complete = false;
  if (len == 0) return 0;
  if (len == 1) {
    *complete = true;
    return 1;
  }
  size_t n = 1;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  SecondByteRange(lead, &lo, &hi);
  while (n < static_cast<size_t>(len) && pos + n < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[pos + n]);
    if (n == 1 ? (b < lo || b > hi) : !IsContinuation(b)) return n;
    ++n;
  }
  *complete = n == static_cast<size_t>(len);
  return n;
}

}  // namespace

std::string_view UnicodeTableVersion() { return unicode_internal::kUnicodeVersion; }

bool IsLetter(char32_t cp) { return ClassOf(cp) == kClassLetter; }
bool IsNumber(char32_t cp) { return ClassOf(cp) == kClassNumber; }

bool IsWhitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int Utf8SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

bool DecodeUtf8(std::string_view s, size_t* pos, char32_t* cp) {
  bool complete = false;
  const size_t n = ValidPrefix(s, *pos, &complete);
  if (!complete) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + *pos;
  char32_t c = 0;
  switch (n) {
    case 1:
      c = p[0];
      break;
    case 2:
      c = (char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
      break;
    case 3:
      c = (char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
      break;
    default:
      c = (char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
          (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu);
      break;
  }
  *cp = c;
  *pos += n;
  return true;
}

size_t FindInvalidUtf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp = 0;
    if (!DecodeUtf8(s, &pos, &cp)) return pos;
  }
  return std::string_view::npos;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t RepairUtf8(std::string_view bytes, bool final, std::string* out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool complete = false;
    const size_t n = ValidPrefix(bytes, pos, &complete);
    if (complete) {
      out->append(bytes.substr(pos, n));
      pos += n;
    } else if (n == 0) {
      out->append(kReplacement);  // a byte that cannot start a character
      ++pos;
    } else if (pos + n == bytes.size() && !final) {
      break;  // a valid prefix cut off by the end: wait for more bytes
    } else {
      out->append(kReplacement);  // a valid prefix followed by a byte that cannot continue it
      pos += n;
    }
  }
  return pos;
}

}  // namespace kiln::llm
