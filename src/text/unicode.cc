// SPDX-License-Identifier: Apache-2.0
// Unicode helpers for the tokenizers; see unicode.h.
#include "text/unicode.h"

#include <algorithm>

namespace kiln::text {

namespace unicode_internal {
// unicode_tables.cc (generated).
extern const char kUnicodeVersion[];
extern const size_t kCategoryRunCount;
extern const size_t kLowerPairCount;
extern const size_t kDecompositionCount;
extern const size_t kCombiningClassCount;
extern const uint32_t kCategoryRuns[];
extern const uint32_t kLowerPairs[][2];
extern const uint32_t kDecompositions[][3];
extern const uint32_t kDecompositionPool[];
extern const uint32_t kCombiningClasses[];
}  // namespace unicode_internal

namespace {

constexpr uint32_t kCategoryMask = 0x1F;
constexpr uint32_t kCasedFlag = 1u << 5;      // cased and not case ignorable
constexpr uint32_t kIgnorableFlag = 1u << 6;  // case ignorable

// The flags of cp's run in kCategoryRuns (category index | case flags).
uint32_t FlagsOf(char32_t cp) {
  if (cp > 0x10FFFF) return static_cast<uint32_t>(GeneralCategory::kCn);
  using unicode_internal::kCategoryRunCount;
  using unicode_internal::kCategoryRuns;
  // The last run whose first code point is <= cp: entries are (first << 8) | flags, so the key
  // (cp << 8) | 0xFF sorts after every entry starting at or before cp.
  const uint32_t key = (static_cast<uint32_t>(cp) << 8) | 0xFFu;
  const uint32_t* end = kCategoryRuns + kCategoryRunCount;
  const uint32_t* it = std::upper_bound(kCategoryRuns, end, key);
  return it == kCategoryRuns ? static_cast<uint32_t>(GeneralCategory::kCn) : *(it - 1) & 0xFFu;
}

// Hangul syllables decompose arithmetically (Unicode 3.12).
constexpr char32_t kHangulS = 0xAC00, kHangulL = 0x1100, kHangulV = 0x1161, kHangulT = 0x11A7;
constexpr char32_t kHangulVCount = 21, kHangulTCount = 28, kHangulCount = 11172;

void AppendDecomposition(char32_t cp, std::u32string* out) {
  if (cp >= kHangulS && cp < kHangulS + kHangulCount) {
    const char32_t s = cp - kHangulS;
    out->push_back(kHangulL + s / (kHangulVCount * kHangulTCount));
    out->push_back(kHangulV + (s % (kHangulVCount * kHangulTCount)) / kHangulTCount);
    if (s % kHangulTCount != 0) out->push_back(kHangulT + s % kHangulTCount);
    return;
  }
  using unicode_internal::kDecompositionCount;
  using unicode_internal::kDecompositions;
  const auto* begin = kDecompositions;
  const auto* end = kDecompositions + kDecompositionCount;
  const auto* it = std::lower_bound(begin, end, static_cast<uint32_t>(cp),
                                    [](const uint32_t(&e)[3], uint32_t c) { return e[0] < c; });
  if (it == end || (*it)[0] != cp) {
    out->push_back(cp);
    return;
  }
  const uint32_t* pool = unicode_internal::kDecompositionPool + (*it)[1];
  out->append(pool, pool + (*it)[2]);
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

GeneralCategory CategoryOf(char32_t cp) {
  return static_cast<GeneralCategory>(FlagsOf(cp) & kCategoryMask);
}

bool IsLetter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return CategoryOf(cp) <= GeneralCategory::kLo;
}

bool IsNumber(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const GeneralCategory c = CategoryOf(cp);
  return c >= GeneralCategory::kNd && c <= GeneralCategory::kNo;
}

bool IsPunctuation(char32_t cp) {
  const GeneralCategory c = CategoryOf(cp);
  return c >= GeneralCategory::kPc && c <= GeneralCategory::kPo;
}

std::u32string ToLower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  using unicode_internal::kLowerPairCount;
  using unicode_internal::kLowerPairs;
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t cp = text[i];
    if (cp < 0x80) {
      out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
      continue;
    }
    if (cp == 0x130) {  // the one mapping to two code points
      out.push_back(U'i');
      out.push_back(0x307);
      continue;
    }
    if (cp == 0x3A3) {  // Final_Sigma: a cased letter before, none after (ignorables skipped)
      auto cased_at = [&](size_t j) { return (FlagsOf(text[j]) & kCasedFlag) != 0; };
      auto ignorable_at = [&](size_t j) { return (FlagsOf(text[j]) & kIgnorableFlag) != 0; };
      size_t b = i;
      while (b > 0 && ignorable_at(b - 1)) --b;
      const bool before = b > 0 && cased_at(b - 1);
      size_t a = i + 1;
      while (a < text.size() && ignorable_at(a)) ++a;
      const bool after = a < text.size() && cased_at(a);
      out.push_back(before && !after ? char32_t{0x3C2} : char32_t{0x3C3});
      continue;
    }
    const auto* end = kLowerPairs + kLowerPairCount;
    const auto* it = std::lower_bound(kLowerPairs, end, static_cast<uint32_t>(cp),
                                      [](const uint32_t(&e)[2], uint32_t c) { return e[0] < c; });
    out.push_back(it != end && (*it)[0] == cp ? static_cast<char32_t>((*it)[1]) : cp);
  }
  return out;
}

uint8_t CombiningClass(char32_t cp) {
  if (cp < 0x300) return 0;
  using unicode_internal::kCombiningClassCount;
  using unicode_internal::kCombiningClasses;
  const uint32_t* end = kCombiningClasses + kCombiningClassCount;
  const uint32_t key = static_cast<uint32_t>(cp) << 8;
  const uint32_t* it = std::lower_bound(kCombiningClasses, end, key);
  return it != end && (*it >> 8) == cp ? static_cast<uint8_t>(*it & 0xFFu) : 0;
}

std::u32string ToNfd(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) {
    if (cp < 0xC0) {
      out.push_back(cp);
    } else {
      AppendDecomposition(cp, &out);
    }
  }
  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  size_t i = 0;
  while (i < out.size()) {
    if (CombiningClass(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && CombiningClass(out[j]) != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i),
                       out.begin() + static_cast<std::ptrdiff_t>(j), [](char32_t a, char32_t b) {
                         return CombiningClass(a) < CombiningClass(b);
                       });
    }
    i = j;
  }
  return out;
}

bool DecodeUtf8String(std::string_view s, std::u32string* out, size_t* bad_offset) {
  out->reserve(out->size() + s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const auto b = static_cast<uint8_t>(s[pos]);
    if (b < 0x80) {
      out->push_back(b);
      ++pos;
      continue;
    }
    char32_t cp = 0;
    if (!DecodeUtf8(s, &pos, &cp)) {
      if (bad_offset != nullptr) *bad_offset = pos;
      return false;
    }
    out->push_back(cp);
  }
  return true;
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

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

}  // namespace kiln::text
