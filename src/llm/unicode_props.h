// SPDX-License-Identifier: Apache-2.0
#pragma once
// Unicode helpers for the tokenizers (tokenizer.h): strict UTF-8 decoding and validation, UTF-8
// encoding, a repairing UTF-8 scanner for streamed bytes, and the code point classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \s).
//
// The letter and number classes come from a table generated from Python's unicodedata by
// tests/llm/gen_unicode_tables.py (unicode_tables.cc; kUnicodeVersion says which version).
// Whitespace is the Unicode White_Space property (what \s means in the Rust regex crate that
// Hugging Face tokenizers use, and in llama.cpp's tables).
//
// Thread safety: all functions are pure and may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::llm {

// The Unicode version of the generated class table, e.g. "14.0.0".
std::string_view UnicodeTableVersion();

// \p{L}: general category Lu, Ll, Lt, Lm or Lo.
bool IsLetter(char32_t cp);
// \p{N}: general category Nd, Nl or No.
bool IsNumber(char32_t cp);
// \s: the White_Space property (U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000).
bool IsWhitespace(char32_t cp);

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

}  // namespace kiln::llm
