// SPDX-License-Identifier: Apache-2.0
// WordPiece on a small vocabulary whose expected ids are worked out by hand from the steps in
// wordpiece.h. tests/text/wordpiece_reference.py checks the real bert-base-uncased vocabulary
// against transformers.js token for token.

#include "text/wordpiece.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::text {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello",
                                         "world", ",",     "!",     "un",    "##aff",  "##able",
                                         "cafe",  "中",    "国",    "the",   "##s",    ".",
                                         "'",     "a",     "##b",   "ab",    "##ab"};

WordPieceTokenizer Make(WordPieceOptions o = {}) {
  Result<WordPieceTokenizer> t = WordPieceTokenizer::Create(kVocab, std::move(o));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

std::vector<int64_t> Ids(const WordPieceTokenizer& t, std::string_view text) {
  Result<std::vector<int64_t>> r = t.Tokenize(text);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<int64_t>{};
}

TEST(WordPiece, NormalizesAndSplits) {
  const WordPieceTokenizer t = Make();
  EXPECT_THAT(Ids(t, "Hello, World!"), ElementsAre(5, 7, 6, 8));
  EXPECT_THAT(Ids(t, "unaffable"), ElementsAre(9, 10, 11));
  EXPECT_THAT(Ids(t, "Café"), ElementsAre(12));                        // lowercased, accent gone
  EXPECT_THAT(Ids(t, "CAFE\xCC\x81"), ElementsAre(12));                // a combining accent
  EXPECT_THAT(Ids(t, "中国"), ElementsAre(13, 14));                    // ideographs split apart
  EXPECT_THAT(Ids(t, "hello\tworld\xE2\x80\x8B"), ElementsAre(5, 6));  // U+200B removed
  EXPECT_THAT(Ids(t, "hel\xE2\x80\x8Blo"), ElementsAre(5));            // ... even inside a word
  EXPECT_THAT(Ids(t, "  hello\u3000world  "), ElementsAre(5, 6));      // any White_Space
  EXPECT_THAT(Ids(t, ""), ElementsAre());
  EXPECT_THAT(Ids(t, " \n "), ElementsAre());
}

TEST(WordPiece, GreedyLongestMatchAndUnknownWords) {
  const WordPieceTokenizer t = Make();
  EXPECT_THAT(Ids(t, "abb"), ElementsAre(21, 20));  // "ab" then "##b", not "a" "##b" "##b"
  EXPECT_THAT(Ids(t, "abab"), ElementsAre(21, 22));
  EXPECT_THAT(Ids(t, "xyz"), ElementsAre(1));
  EXPECT_THAT(Ids(t, "helloxyz world"), ElementsAre(1, 6));  // a partial match is [UNK] whole
  EXPECT_THAT(Ids(t, "hello's"), ElementsAre(5, 18, 1));     // "'" splits; "s" alone unknown
}

TEST(WordPiece, SpecialTokensInTheText) {
  const WordPieceTokenizer t = Make();
  EXPECT_THAT(Ids(t, "hello[SEP]world"), ElementsAre(5, 3, 6));
  EXPECT_THAT(Ids(t, "[CLS] a [MASK]"), ElementsAre(2, 19, 4));
  EXPECT_THAT(Ids(t, "[sep]"), ElementsAre(1, 1, 1));  // case matters: "[", "sep", "]"
}

TEST(WordPiece, Options) {
  WordPieceOptions cased;
  cased.lowercase = false;
  const WordPieceTokenizer c = Make(cased);
  EXPECT_THAT(Ids(c, "Hello hello"), ElementsAre(1, 5));
  EXPECT_THAT(Ids(c, "café"), ElementsAre(1));  // no lowercasing: no accent stripping either
  WordPieceOptions keep_accents;
  keep_accents.strip_accents = false;
  EXPECT_THAT(Ids(Make(keep_accents), "Café"), ElementsAre(1));
  WordPieceOptions short_words;
  short_words.max_input_chars_per_word = 5;
  EXPECT_THAT(Ids(Make(short_words), "unaffable hello"), ElementsAre(1, 5));
  WordPieceOptions no_cjk;
  no_cjk.handle_chinese_chars = false;
  EXPECT_THAT(Ids(Make(no_cjk), "中国"), ElementsAre(1));
}

TEST(WordPiece, EncodeAddsSpecialTokensAndTruncates) {
  const WordPieceTokenizer t = Make();
  Result<WordPieceEncoding> e = t.Encode("hello world", std::nullopt, 16);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 6, 3));
  EXPECT_THAT(e->type_ids, ElementsAre(0, 0, 0, 0));
  e = t.Encode("hello world", std::nullopt, 3);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 3));  // [SEP] stays
  e = t.Encode("hello world", std::string_view("the a"), 16);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 6, 3, 15, 19, 3));
  EXPECT_THAT(e->type_ids, ElementsAre(0, 0, 0, 0, 1, 1, 1));
}

TEST(WordPiece, PairTruncationLongestFirst) {
  const WordPieceTokenizer t = Make();
  // Budget 3: the shorter (1) stays whole, the longer keeps 2.
  Result<WordPieceEncoding> e = t.Encode("hello hello hello hello", std::string_view("a"), 6);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 5, 3, 19, 3));
  // Budget 5, both cut: 2 and 3, the longer (second) getting the odd one.
  e = t.Encode("hello hello hello hello", std::string_view("a a a a a"), 8);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 5, 3, 19, 19, 19, 3));
  // The first longer: it gets the odd one.
  e = t.Encode("hello hello hello hello hello", std::string_view("a a a a"), 8);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 5, 5, 3, 19, 19, 3));
  // Equal: the second gets it.
  e = t.Encode("hello hello hello hello", std::string_view("a a a a"), 8);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 5, 5, 3, 19, 19, 19, 3));
  EXPECT_THAT(e->type_ids, ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
}

TEST(WordPiece, Errors) {
  const WordPieceTokenizer t = Make();
  Result<std::vector<int64_t>> r = t.Tokenize("ok \xFF");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("byte offset 3"));
  EXPECT_FALSE(t.Encode("a", std::string_view("a"), 2).ok());
  std::vector<std::string> no_cls = kVocab;
  no_cls[2] = "[XLS]";
  Result<WordPieceTokenizer> bad = WordPieceTokenizer::Create(no_cls, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("no CLS token '[CLS]'"));
  EXPECT_FALSE(WordPieceTokenizer::Create({}, {}).ok());
  Result<WordPieceTokenizer> bad_utf8 = WordPieceTokenizer::Create({"[UNK]", "\xC3"}, {});
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_THAT(bad_utf8.status().message(), HasSubstr("line 2"));
}

}  // namespace
}  // namespace kiln::text
