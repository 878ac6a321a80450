// SPDX-License-Identifier: Apache-2.0
// StopStringFilter: held-back prefixes released once they stop matching, matches across pushes,
// overlapping stop strings (earliest end, then earliest start), a stop at the very start, text
// after a match dropped, multibyte characters and boundaries, empty stop strings, many stop
// strings, and random splits of random texts against a brute-force reference.
#include "llm/stop_strings.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kiln::llm {
namespace {

TEST(StopStringFilterTest, NoStopStringsPassesTextThrough) {
  StopStringFilter f({});
  EXPECT_EQ(f.Push("hello "), "hello ");
  EXPECT_EQ(f.Push("world"), "world");
  EXPECT_EQ(f.Flush(), "");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.matched(), "");
}

TEST(StopStringFilterTest, HeldBackPrefixIsReleasedWhenItStopsMatching) {
  StopStringFilter f({"STOP"});
  EXPECT_EQ(f.Push("abc ST"), "abc ");
  EXPECT_EQ(f.held_bytes(), 2u);
  EXPECT_EQ(f.Push("O"), "");
  EXPECT_EQ(f.Push("RM"), "STORM");
  EXPECT_EQ(f.held_bytes(), 0u);
  // A shorter tail can still match after a longer one fails: "SS" -> "S" held.
  EXPECT_EQ(f.Push(" SS"), " S");
  EXPECT_EQ(f.Push("x"), "Sx");
  EXPECT_FALSE(f.stopped());
}

TEST(StopStringFilterTest, MatchAcrossPushesAndTextAfterItIsDropped) {
  StopStringFilter f({"STOP"});
  EXPECT_EQ(f.Push("xS"), "x");
  EXPECT_EQ(f.Push("T"), "");
  EXPECT_EQ(f.Push("O"), "");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.Push("P and more"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched(), "STOP");
  EXPECT_EQ(f.Push("later"), "");
  EXPECT_EQ(f.Flush(), "");
}

TEST(StopStringFilterTest, MatchInsideOnePush) {
  StopStringFilter f({"\n\n"});
  EXPECT_EQ(f.Push("one\ntwo\n\nthree"), "one\ntwo");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched(), "\n\n");
}

TEST(StopStringFilterTest, StopAtTheVeryStart) {
  StopStringFilter f({"Hello"});
  EXPECT_EQ(f.Push("Hello world"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched(), "Hello");
}

TEST(StopStringFilterTest, FlushReleasesTheHeldTail) {
  StopStringFilter f({"END"});
  EXPECT_EQ(f.Push("the EN"), "the ");
  EXPECT_EQ(f.Flush(), "EN");
  EXPECT_FALSE(f.stopped());
}

TEST(StopStringFilterTest, OverlappingStopsTheEarliestEndWins) {
  {
    StopStringFilter f({"bc", "ab"});
    EXPECT_EQ(f.Push("xabc"), "x");
    EXPECT_EQ(f.matched(), "ab");  // ends at 3, "bc" at 4
  }
  {
    StopStringFilter f({"ab", "bc"});
    EXPECT_EQ(f.Push("xbc"), "x");
    EXPECT_EQ(f.matched(), "bc");
  }
  {
    StopStringFilter f({"abcd", "bc"});
    EXPECT_EQ(f.Push("abcd"), "a");
    EXPECT_EQ(f.matched(), "bc");
  }
  {
    // The same end: the earlier start (the longer string) wins.
    StopStringFilter f({"cd", "bcd"});
    EXPECT_EQ(f.Push("abcd"), "a");
    EXPECT_EQ(f.matched(), "bcd");
  }
  {
    // Across pushes: a held prefix released when the next text breaks it, then "bc" completes.
    StopStringFilter f({"ab", "bc"});
    EXPECT_EQ(f.Push("a"), "");
    EXPECT_EQ(f.Push("c"), "ac");
    EXPECT_EQ(f.Push("b"), "");
    EXPECT_EQ(f.Push("b"), "b");
    EXPECT_EQ(f.Push("c"), "");
    EXPECT_TRUE(f.stopped());
    EXPECT_EQ(f.matched(), "bc");
  }
}

TEST(StopStringFilterTest, MultibyteCharacters) {
  StopStringFilter f({"日本"});
  EXPECT_EQ(f.Push("今日"), "今");  // "日" (3 bytes) may begin "日本"
  EXPECT_EQ(f.held_bytes(), 3u);
  EXPECT_EQ(f.Push("は"), "日は");
  EXPECT_EQ(f.Push("x日"), "x");
  EXPECT_EQ(f.Push("本語"), "");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched(), "日本");

  // A character sharing a lead byte with the stop string's first character is not held.
  StopStringFilter g({"é!"});   // C3 A9 21
  EXPECT_EQ(g.Push("ã"), "ã");  // C3 A3
  EXPECT_EQ(g.Push("é"), "");
  EXPECT_EQ(g.Push("é!"), "é");
  EXPECT_EQ(g.matched(), "é!");
}

TEST(StopStringFilterTest, NoMatchOrHoldStartsInsideACharacter) {
  // A stop string beginning with a continuation byte (0xA9, the second byte of "é") never
  // matches, and never holds back half of a character.
  StopStringFilter f({"\xA9x"});
  EXPECT_EQ(f.Push("é"), "é");
  EXPECT_EQ(f.Push("x"), "x");
  EXPECT_EQ(f.Push("éx"), "éx");
  EXPECT_FALSE(f.stopped());
}

TEST(StopStringFilterTest, EmptyStopStringsAreIgnored) {
  StopStringFilter only_empty({""});
  EXPECT_EQ(only_empty.Push("abc"), "abc");
  EXPECT_FALSE(only_empty.stopped());
  StopStringFilter f({"", "b", "b"});
  EXPECT_EQ(f.Push("abc"), "a");
  EXPECT_EQ(f.matched(), "b");
}

TEST(StopStringFilterTest, ManyStopStrings) {
  std::vector<std::string> stops(16);
  for (int i = 0; i < 16; ++i) stops[static_cast<size_t>(i)] = "<s" + std::to_string(i) + ">";
  StopStringFilter f(stops);
  const std::string text = "hello <s1x> <s> world <s12> tail <s3>";
  std::string out;
  size_t max_held = 0;
  for (char c : text) {
    out += f.Push(std::string_view(&c, 1));
    max_held = std::max(max_held, f.held_bytes());
    if (f.stopped()) break;
  }
  EXPECT_EQ(out, "hello <s1x> <s> world ");
  EXPECT_EQ(f.matched(), "<s12>");
  EXPECT_LE(max_held, 4u);  // shorter than the longest stop string
}

// The expected output by brute force: the text before the match with the smallest end, then
// the smallest start, among matches starting at character boundaries.
std::string Reference(const std::string& text, const std::vector<std::string>& stops,
                      std::string* matched) {
  for (size_t end = 1; end <= text.size(); ++end) {
    for (size_t start = 0; start < end; ++start) {
      if ((static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) continue;
      for (const std::string& s : stops) {
        if (!s.empty() && end - start == s.size() && text.compare(start, s.size(), s) == 0) {
          *matched = s;
          return text.substr(0, start);
        }
      }
    }
  }
  matched->clear();
  return text;
}

TEST(StopStringFilterTest, RandomSplitsMatchTheReference) {
  // Small alphabets so that stop strings and partial matches are frequent; "é" and "€" are
  // multibyte characters.
  const std::vector<std::string> alphabet = {"a", "b", "c", "é", "€"};
  std::mt19937 gen(1);
  auto pick = [&](int n) {
    return static_cast<size_t>(std::uniform_int_distribution<>(0, n - 1)(gen));
  };
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::string> stops(1 + pick(4));
    for (std::string& s : stops) {
      const size_t len = 1 + pick(4);
      for (size_t i = 0; i < len; ++i) s += alphabet[pick(5)];
    }
    std::vector<std::string> chars(pick(30));
    std::string text;
    for (std::string& c : chars) {
      c = alphabet[pick(5)];
      text += c;
    }
    std::string matched;
    const std::string expected = Reference(text, stops, &matched);

    StopStringFilter f(stops);
    std::string out;
    size_t i = 0;
    while (i < chars.size()) {
      const size_t n = std::min(chars.size() - i, 1 + pick(4));  // 1..4 whole characters
      std::string piece;
      for (size_t j = 0; j < n; ++j) piece += chars[i + j];
      i += n;
      const std::string released = f.Push(piece);
      out += released;
      // Released text is final: always a prefix of the expected output.
      ASSERT_EQ(expected.compare(0, out.size(), out), 0) << "round " << round;
    }
    out += f.Flush();
    ASSERT_EQ(out, expected) << "round " << round << " text " << text;
    EXPECT_EQ(f.stopped(), !matched.empty()) << "round " << round;
    EXPECT_EQ(f.matched(), matched) << "round " << round;
  }
}

}  // namespace
}  // namespace kiln::llm
