// SPDX-License-Identifier: Apache-2.0
#pragma once
// Unicode helpers for the tokenizers (llm/tokenizer.h, text/wordpiece.h): strict UTF-8 decoding
// and validation, UTF-8 encoding, a repairing UTF-8 scanner for streamed bytes, general
// categories (the classes the pre-tokenizer regexes use: \p{L}, \p{N}, \p{P}, \p{Mn}, ...),
// whitespace, full lowercasing and canonical decomposition (NFD).
//
// Categories, case mappings and decompositions come from tables generated from Python's
// unicodedata by tests/text/gen_unicode_tables.py (unicode_tables.cc; UnicodeTableVersion says
// which version); code points unassigned in that version are Cn. Whitespace is the Unicode
// White_Space property (what \s means in the Rust regex crate that Hugging Face tokenizers use,
// and in llama.cpp's tables).
//
// Thread safety: all functions are pure and may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::text {

// The general categories, in the order of the generated table.
enum class GeneralCategory : uint8_t {
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
  kCn
};
// The general category of cp (Cn above U+10FFFF).
GeneralCategory CategoryOf(char32_t cp);
// \p{P}: Pc, Pd, Ps, Pe, Pi, Pf or Po.
bool IsPunctuation(char32_t cp);

// The Unicode version of the generated class table, e.g. "14.0.0".
std::string_view UnicodeTableVersion();

// \p{L}: general category Lu, Ll, Lt, Lm or Lo.
bool IsLetter(char32_t cp);
// \p{N}: general category Nd, Nl or No.
bool IsNumber(char32_t cp);
// \s: the White_Space property (U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000).
bool IsWhitespace(char32_t cp);

// The full lowercase mapping of a text, as Python's str.lower() and JavaScript's
// String.prototype.toLowerCase() compute it: one code point may become two (U+0130 -> "i\u0307"),
// and a capital sigma becomes final (U+03C2) when a cased letter precedes it and none follows
// (skipping case-ignorable code points both ways: Unicode's Final_Sigma condition).
std::u32string ToLower(std::u32string_view text);

// The canonical decomposition (Unicode normalization form D) of a text: every code point
// replaced by its full canonical decomposition (Hangul syllables into their jamo), then each run
// of combining marks put in canonical order (stable sort by combining class).
std::u32string ToNfd(std::u32string_view text);
// The canonical combining class of cp (0 for most).
uint8_t CombiningClass(char32_t cp);

// Decodes strictly valid UTF-8 into code points. Returns false (and leaves *out with what was
// decoded before) at the first invalid byte, whose offset goes to *bad_offset when not null.
bool DecodeUtf8String(std::string_view s, std::u32string* out, size_t* bad_offset = nullptr);
// The UTF-8 encoding of code points (each <= U+10FFFF and not a surrogate).
std::string EncodeUtf8(std::u32string_view cps);

// The length of the UTF-8 sequence a lead byte starts (1..4), or 0 for a byte that cannot
// start a sequence (continuation bytes, 0xC0, 0xC1, 0xF5..0xFF).
int Utf8SequenceLength(uint8_t lead);

// Decodes one strictly valid UTF-8 character at s[*pos] (no overlong forms, no surrogates,
// nothing above U+10FFFF). On success stores it in *cp, advances *pos and returns true; on
// failure leaves *pos unchanged and returns false.
// REQUIRES: *pos < s.size().
bool DecodeUtf8(std::string_view s, size_t* pos, char32_t* cp);

// The byte offset of the first byte that does not begin a valid UTF-8 character in s, or
// std::string_view::npos when all of s is valid UTF-8.
size_t FindInvalidUtf8(std::string_view s);

// Appends the UTF-8 encoding of cp. REQUIRES: cp <= 0x10FFFF and not a surrogate.
void AppendUtf8(char32_t cp, std::string* out);

// Repairs a stream of bytes into valid UTF-8: appends to *out every complete valid character of
// `bytes` and one U+FFFD for each maximal invalid subpart (the Unicode "maximal subpart"
// practice, as WHATWG's decoder does). When `final` is false, a trailing sequence that is still
// a valid prefix of some character is left unconsumed (it may complete later); when true it
// becomes one U+FFFD. Returns the number of bytes consumed.
size_t RepairUtf8(std::string_view bytes, bool final, std::string* out);

}  // namespace kiln::text
