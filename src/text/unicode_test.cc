// SPDX-License-Identifier: Apache-2.0
// Unicode data: categories, full lowercasing with the final-sigma rule, canonical decomposition
// and ordering, strict UTF-8 decoding. The expected values are the Unicode Character Database's
// (checked by hand against the code charts); tests/text/gen_unicode_tables.py --check keeps the
// tables equal to Python's unicodedata.

#include "text/unicode.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::text {
namespace {

TEST(Unicode, Categories) {
  EXPECT_EQ(CategoryOf(U'A'), GeneralCategory::kLu);
  EXPECT_EQ(CategoryOf(U'a'), GeneralCategory::kLl);
  EXPECT_EQ(CategoryOf(0x301), GeneralCategory::kMn);   // combining acute accent
  EXPECT_EQ(CategoryOf(0x4E2D), GeneralCategory::kLo);  // 中
  EXPECT_EQ(CategoryOf(0x3002), GeneralCategory::kPo);  // ideographic full stop
  EXPECT_EQ(CategoryOf(0x200B), GeneralCategory::kCf);  // zero width space
  EXPECT_EQ(CategoryOf(0xE000), GeneralCategory::kCo);  // private use
  EXPECT_EQ(CategoryOf(0x0378), GeneralCategory::kCn);  // unassigned
  EXPECT_EQ(CategoryOf(0x110000), GeneralCategory::kCn);
  EXPECT_EQ(CategoryOf(U'$'), GeneralCategory::kSc);
  EXPECT_TRUE(IsPunctuation(U'!'));
  EXPECT_TRUE(IsPunctuation(0x00BF));  // inverted question mark
  EXPECT_FALSE(IsPunctuation(U'$'));   // a symbol, not punctuation
  EXPECT_TRUE(IsLetter(0x00E9));
  EXPECT_TRUE(IsNumber(0x0663));  // Arabic-Indic three
  EXPECT_FALSE(IsLetter(U'1'));
}

std::u32string Lower(std::u32string_view s) { return ToLower(s); }

TEST(Unicode, LowerFullMapping) {
  EXPECT_EQ(Lower(U"ABC xyz ÀÉÎ"), U"abc xyz àéî");
  EXPECT_EQ(Lower(U"\u0130"), U"i\u0307");             // one code point to two
  EXPECT_EQ(Lower(U"\u0410\u042F"), U"\u0430\u044F");  // Cyrillic
  EXPECT_EQ(Lower(U"\u2160"), U"\u2170");              // Roman numeral one (Nl)
  EXPECT_EQ(Lower(U"\U00010400"), U"\U00010428");      // Deseret, an astral plane
  EXPECT_EQ(Lower(U"ß"), U"ß");
}

TEST(Unicode, LowerFinalSigma) {
  // Σ is final after a cased letter with no cased letter following.
  EXPECT_EQ(Lower(U"ΟΣΟΣ ΣΑ"), U"οσος σα");
  EXPECT_EQ(Lower(U"ΌΣΟΣ"), U"όσος");
  EXPECT_EQ(Lower(U"Σ"), U"σ");                // nothing before
  EXPECT_EQ(Lower(U"ΑΣ."), U"ας.");            // punctuation after is not cased
  EXPECT_EQ(Lower(U"ΑΣ'Α"), U"ασ'α");          // the apostrophe is case ignorable: Α follows
  EXPECT_EQ(Lower(U"Α\u0301Σ"), U"α\u0301ς");  // a combining mark before is skipped
}

TEST(Unicode, Nfd) {
  EXPECT_EQ(ToNfd(U"é"), U"e\u0301");
  EXPECT_EQ(ToNfd(U"\uD55C"), U"\u1112\u1161\u11AB");  // 한: Hangul L V T
  EXPECT_EQ(ToNfd(U"\uAC00"), U"\u1100\u1161");        // 가: no trailing consonant
  // Recursive decomposition and canonical order: ḍ̇ (U+1E0B U+0323) -> d U+0323 U+0307, the
  // below mark (class 220) before the above one (230).
  EXPECT_EQ(ToNfd(U"\u1E0B\u0323"), U"d\u0323\u0307");
  EXPECT_EQ(ToNfd(U"\u01D5"), U"U\u0308\u0304");  // Ǖ: two levels
  EXPECT_EQ(ToNfd(U"abc"), U"abc");
  EXPECT_EQ(CombiningClass(0x301), 230);
  EXPECT_EQ(CombiningClass(0x323), 220);
  EXPECT_EQ(CombiningClass(U'a'), 0);
}

TEST(Unicode, DecodeUtf8String) {
  std::u32string out;
  EXPECT_TRUE(DecodeUtf8String("a\xC3\xA9\xF0\x9F\x98\x80", &out));
  EXPECT_EQ(out, U"aé\U0001F600");
  EXPECT_EQ(EncodeUtf8(out), "a\xC3\xA9\xF0\x9F\x98\x80");
  out.clear();
  size_t bad = 99;
  EXPECT_FALSE(DecodeUtf8String("ab\xC0\x80", &out, &bad));  // an overlong NUL
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(DecodeUtf8String("\xED\xA0\x80", &out, &bad));  // a surrogate
}

}  // namespace
}  // namespace kiln::text
