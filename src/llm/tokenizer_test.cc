// SPDX-License-Identifier: Apache-2.0
// Tests of the tokenizers (tokenizer.h) on small hand-made vocabularies whose expected ids are
// worked out by hand in the comments, of the pre-tokenizer splits (worked out from the regexes),
// of the Unicode classes, and of LoadHfTokenizer on hand-written tokenizer.json files. The
// comparison with a reference implementation on real vocabularies is the CTest
// llm_tokenizer_reference (tests/llm/tokenizer/compare.py).
#include "llm/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/testing/mutate.h"
#include "text/unicode.h"

namespace kiln::llm {

using text::AppendUtf8;
using text::DecodeUtf8;
using text::FindInvalidUtf8;
using text::IsLetter;
using text::IsNumber;
using text::IsWhitespace;
using text::RepairUtf8;
using text::Utf8SequenceLength;
namespace {

using Ids = std::vector<int32_t>;
using Words = std::vector<std::string_view>;
constexpr const char* kRepl = "\xEF\xBF\xBD";  // U+FFFD

// ---------------------------------------------------------------------------------------------
// A SentencePiece-style vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then:
constexpr int32_t kSp = 259;    // "▁"
constexpr int32_t kA = 260;     // "a"
constexpr int32_t kB = 261;     // "b"
constexpr int32_t kC = 262;     // "c"
constexpr int32_t kAB = 263;    // "ab"   score 5
constexpr int32_t kBC = 264;    // "bc"   score 10
constexpr int32_t kSpA = 265;   // "▁a"   score 3
constexpr int32_t kSpAB = 266;  // "▁ab"  score 1
constexpr int32_t kABC = 267;   // "abc"  score 0
constexpr int32_t kCA = 268;    // "ca"   score 5 (ties with "ab")
constexpr int32_t kUser = 269;  // "<|user|>", user-defined
constexpr int32_t ByteId(int b) { return 3 + b; }

TokenizerSpec SpmSpec() {
  TokenizerSpec s;
  s.model = TokenizerSpec::Model::kSpm;
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  s.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.token_types.push_back(6);
    s.scores.push_back(0);
  }
  const std::pair<const char*, float> pieces[] = {{"\xE2\x96\x81", -100},
                                                  {"a", -100},
                                                  {"b", -100},
                                                  {"c", -100},
                                                  {"ab", 5},
                                                  {"bc", 10},
                                                  {"\xE2\x96\x81"
                                                   "a",
                                                   3},
                                                  {"\xE2\x96\x81"
                                                   "ab",
                                                   1},
                                                  {"abc", 0},
                                                  {"ca", 5}};
  for (const auto& [text, score] : pieces) {
    s.tokens.push_back(text);
    s.token_types.push_back(1);
    s.scores.push_back(score);
  }
  s.tokens.push_back("<|user|>");
  s.token_types.push_back(4);
  s.scores.push_back(0);
  s.bos_id = 1;
  s.eos_id = 2;
  s.unk_id = 0;
  s.add_bos = true;
  s.add_space_prefix = true;
  return s;
}

std::unique_ptr<Tokenizer> Make(TokenizerSpec spec) {
  auto t = Tokenizer::Create(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

Ids Enc(const Tokenizer& t, std::string_view text, bool add_special = false,
        bool parse_special = false) {
  auto r = t.Encode(text, add_special, parse_special);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Ids{};
}

std::string Dec(const Tokenizer& t, const Ids& ids, bool skip_special = false) {
  auto r = t.Decode(ids, skip_special);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : "";
}

TEST(SpmTokenizer, MergesByScore) {
  auto t = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  // "▁abc": pairs ▁a(3) ab(5) bc(10). bc first -> ▁ a bc; then ▁a(3) -> ▁a bc ("▁abc" no token).
  EXPECT_EQ(Enc(*t, "abc"), (Ids{kSpA, kBC}));
  // "▁ab": ab(5) before ▁a(3) -> ▁ ab -> ▁ab(1).
  EXPECT_EQ(Enc(*t, "ab"), (Ids{kSpAB}));
  // "▁a▁b": only ▁a merges.
  EXPECT_EQ(Enc(*t, "a b"), (Ids{kSpA, kSp, kB}));
  // "▁▁": no "▁▁" token.
  EXPECT_EQ(Enc(*t, " "), (Ids{kSp, kSp}));
  EXPECT_EQ(Enc(*t, ""), Ids{});
}

TEST(SpmTokenizer, WithoutSpacePrefixAndTies) {
  TokenizerSpec spec = SpmSpec();
  spec.add_space_prefix = false;
  auto t = Make(std::move(spec));
  ASSERT_NE(t, nullptr);
  // "abc": bc(10) -> a bc -> abc(0).
  EXPECT_EQ(Enc(*t, "abc"), (Ids{kABC}));
  // "cab": ca(5) and ab(5) tie; the leftmost merges first -> ca b.
  EXPECT_EQ(Enc(*t, "cab"), (Ids{kCA, kB}));
  EXPECT_EQ(Dec(*t, {kCA, kB}), "cab");
}

TEST(SpmTokenizer, ByteFallbackAndUnknown) {
  auto t = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  // "▁é": é (C3 A9) is no token -> its bytes.
  EXPECT_EQ(Enc(*t, "\xC3\xA9"), (Ids{kSp, ByteId(0xC3), ByteId(0xA9)}));
  EXPECT_EQ(Dec(*t, {kSp, ByteId(0xC3), ByteId(0xA9)}), "\xC3\xA9");
  // Without byte tokens a character that is no token becomes <unk>, once.
  TokenizerSpec spec;
  spec.model = TokenizerSpec::Model::kSpm;
  spec.tokens = {"<unk>", "\xE2\x96\x81", "x"};
  spec.unk_id = 0;
  auto u = Make(std::move(spec));
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(Enc(*u, "x\xC3\xA9x"), (Ids{1, 2, 0, 2}));
}

TEST(SpmTokenizer, SpecialTokens) {
  auto t = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Enc(*t, "ab", /*add_special=*/true), (Ids{1, kSpAB}));
  EXPECT_EQ(Enc(*t, "", /*add_special=*/true), (Ids{1}));
  // parse_special: <s> is the control token and the text after it gets a space prefix.
  EXPECT_EQ(Enc(*t, "<s>ab", false, /*parse_special=*/true), (Ids{1, kSpAB}));
  // Without parse_special "<s>" is text: ▁ < s > as bytes, then ab.
  EXPECT_EQ(Enc(*t, "<s>ab"), (Ids{kSp, ByteId('<'), ByteId('s'), ByteId('>'), kAB}));
  // User-defined tokens are split out even without parse_special.
  EXPECT_EQ(Enc(*t, "a<|user|>b"), (Ids{kSpA, kUser, kSp, kB}));
  // Adjacent special tokens, and a special token at the end.
  EXPECT_EQ(Enc(*t, "<s></s>", false, true), (Ids{1, 2}));
  EXPECT_EQ(Enc(*t, "a</s>", false, true), (Ids{kSpA, 2}));
  TokenizerSpec spec = SpmSpec();
  spec.add_eos = true;
  auto e = Make(std::move(spec));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Enc(*e, "ab", true), (Ids{1, kSpAB, 2}));
}

TEST(SpmTokenizer, DecodeAndTokenBytes) {
  auto t = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->TokenBytes(kSpA), " a");
  EXPECT_EQ(t->TokenBytes(1), "<s>");
  EXPECT_EQ(t->TokenBytes(1, /*render_special=*/false), "");
  EXPECT_EQ(t->TokenBytes(ByteId(0xC3)), "\xC3");
  EXPECT_EQ(t->TokenBytes(kUser, false), "<|user|>");
  EXPECT_EQ(t->TokenBytes(-1), "");
  EXPECT_EQ(t->TokenBytes(100000), "");
  // One leading space of the whole text is removed.
  EXPECT_EQ(Dec(*t, {kSpA, kUser, kSp, kB}), "a<|user|> b");
  EXPECT_EQ(Dec(*t, {1, kSpA}, /*skip_special=*/true), "a");
  EXPECT_EQ(Dec(*t, {1, kSpA}, /*skip_special=*/false), "<s> a");
  EXPECT_EQ(Dec(*t, {kSp, kSpA}), " a");
  // An incomplete character becomes U+FFFD.
  EXPECT_EQ(Dec(*t, {ByteId(0xC3)}), kRepl);
  auto bad = t->Decode(Ids{kA, 5000}, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("5000"), std::string::npos);
  for (const char* text :
       {"abc", " abc", "a  b\tc\n", "cab ab", "\xC3\xA9t\xC3\xA9 \xF0\x9F\xA6\x99"}) {
    EXPECT_EQ(Dec(*t, Enc(*t, text)), text) << text;
  }
}

TEST(SpmTokenizer, Accessors) {
  TokenizerSpec spec = SpmSpec();
  spec.eog_ids = {kUser};
  auto t = Make(std::move(spec));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 270);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_TRUE(t->IsEog(2));
  EXPECT_TRUE(t->IsEog(kUser));
  EXPECT_FALSE(t->IsEog(1));
  EXPECT_FALSE(t->IsEog(-5));
  EXPECT_TRUE(t->IsControl(1));
  EXPECT_FALSE(t->IsControl(kA));
  EXPECT_EQ(t->Piece(kSpA),
            "\xE2\x96\x81"
            "a");
  EXPECT_EQ(t->Piece(9999), "");
  EXPECT_EQ(t->Find("ab"), kAB);
  EXPECT_EQ(t->Find("zz"), -1);
  EXPECT_EQ(t->Type(ByteId(7)), TokenType::kByte);
}

// ---------------------------------------------------------------------------------------------
// A byte-level BPE vocabulary: ids 0..255 are the bytes (GPT-2's byte-to-unicode spelling), then
// 256 "Ġt" (merge rank 0), 257 "he" (1), 258 "Ġthe" (2), 259 "ab" (3), 260 "abc" (no merge
// makes it), 261 "bc" (4), 262 "<|end|>" control, 263 "<tool>" user-defined.

// GPT-2's table written out from its definition: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF are
// themselves; the other 68 bytes, in order, are U+0100, U+0101, ...
std::string Gpt2ByteChar(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
    }
    cp = 0x100 + n;
  }
  std::string s;
  AppendUtf8(static_cast<char32_t>(cp), &s);
  return s;
}

TokenizerSpec BpeSpec(const std::string& pre = "gpt2") {
  TokenizerSpec s;
  s.model = TokenizerSpec::Model::kBpe;
  s.pre = pre;
  for (int b = 0; b < 256; ++b) s.tokens.push_back(Gpt2ByteChar(b));
  const std::string G = Gpt2ByteChar(' ');
  s.tokens.insert(s.tokens.end(),
                  {G + "t", "he", G + "the", "ab", "abc", "bc", "<|end|>", "<tool>"});
  s.token_types.assign(s.tokens.size(), 1);
  s.token_types[262] = 3;
  s.token_types[263] = 4;
  s.merges = {G + " t", "h e", G + "t he", "a b", "b c"};
  s.eos_id = 262;
  return s;
}

TEST(BpeTokenizer, ByteToUnicodeSpelling) {
  EXPECT_EQ(Gpt2ByteChar(' '), "\xC4\xA0");   // 'Ġ' U+0120
  EXPECT_EQ(Gpt2ByteChar('\n'), "\xC4\x8A");  // 'Ċ' U+010A
  EXPECT_EQ(Gpt2ByteChar(0xAD), "\xC5\x83");  // U+0143
  EXPECT_EQ(Gpt2ByteChar('A'), "A");
}

TEST(BpeTokenizer, MergesByRank) {
  auto t = Make(BpeSpec());
  ASSERT_NE(t, nullptr);
  // " the": Ġ t h e -> Ġt(0) -> he(1) -> Ġthe(2).
  EXPECT_EQ(Enc(*t, " the"), (Ids{258}));
  // "the": t h e -> he(1); no (t, he) merge.
  EXPECT_EQ(Enc(*t, "the"), (Ids{'t', 257}));
  // "abc": ab(3) before bc(4) -> ab c.
  EXPECT_EQ(Enc(*t, "abc"), (Ids{259, 'c'}));
  // Words never merge across the pre-tokenizer's boundaries: "the the" -> "the", " the".
  EXPECT_EQ(Enc(*t, "the the"), (Ids{'t', 257, 258}));
  // Bytes of a multi-byte character.
  EXPECT_EQ(Enc(*t, "\xC3\xA9"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(Enc(*t, ""), Ids{});
}

TEST(BpeTokenizer, IgnoreMerges) {
  // The llama3 family: a word that is a token is taken whole ("abc" although no merge makes it).
  auto l3 = Make(BpeSpec("llama-bpe"));
  ASSERT_NE(l3, nullptr);
  EXPECT_EQ(Enc(*l3, "abc"), (Ids{260}));
  auto q = Make(BpeSpec("qwen2"));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(Enc(*q, "abc"), (Ids{259, 'c'}));
}

TEST(BpeTokenizer, SpecialTokensAndDecode) {
  auto t = Make(BpeSpec());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Enc(*t, "<|end|>", false, true), (Ids{262}));
  // As text: GPT-2 words "<|", "end", "|>" as bytes.
  EXPECT_EQ(Enc(*t, "<|end|>"), (Ids{'<', '|', 'e', 'n', 'd', '|', '>'}));
  EXPECT_EQ(Enc(*t, "x<tool>y"), (Ids{'x', 263, 'y'}));
  EXPECT_EQ(t->TokenBytes(256), " t");
  EXPECT_EQ(t->TokenBytes('\n'), "\n");
  EXPECT_EQ(Dec(*t, {258}), " the");  // no leading-space rule for byte-level BPE
  EXPECT_EQ(Dec(*t, {'x', 262, 'y'}, /*skip_special=*/true), "xy");
  EXPECT_EQ(Dec(*t, {'x', 262, 'y'}, false), "x<|end|>y");
  EXPECT_TRUE(t->IsEog(262));
  for (const char* text : {" the theabc", "  \n\t x", "h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\xA6\x99",
                           "\xE4\xBD\xA0\xE5\xA5\xBD 123"}) {
    EXPECT_EQ(Dec(*t, Enc(*t, text)), text) << text;
  }
}

TEST(BpeTokenizer, DefaultEndOfGeneration) {
  TokenizerSpec spec = BpeSpec();
  spec.tokens.push_back("<|im_end|>");  // 264, control: end of generation as llama.cpp finds it
  spec.token_types.push_back(3);
  spec.tokens.push_back("<|eot_id|>");  // 265, a normal token: not
  spec.token_types.push_back(1);
  auto t = Make(std::move(spec));
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->IsEog(262));  // EOS
  EXPECT_TRUE(t->IsEog(264));
  EXPECT_FALSE(t->IsEog(265));
  EXPECT_FALSE(t->IsEog(263));
}

TEST(Tokenizer, InvalidUtf8IsAnError) {
  auto t = Make(BpeSpec());
  auto s = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  ASSERT_NE(s, nullptr);
  const std::pair<std::string, size_t> cases[] = {
      {"ab\xFF"
       "cd",
       2},                      // never valid
      {"\xC0\xAF", 0},          // overlong '/'
      {"x\xED\xA0\x80", 1},     // surrogate U+D800
      {"ok \xE6\x97", 3},       // truncated at the end
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"a\x80", 1},             // lone continuation byte
  };
  for (const auto& [text, offset] : cases) {
    for (const Tokenizer* tok : {t.get(), s.get()}) {
      auto r = tok->Encode(text, false, false);
      ASSERT_FALSE(r.ok()) << text;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("offset " + std::to_string(offset)), std::string::npos)
          << r.status().message();
    }
  }
}

TEST(Tokenizer, CreateValidates) {
  const auto fails_with = [](TokenizerSpec spec, const std::string& needle) {
    auto r = Tokenizer::Create(std::move(spec));
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  fails_with(TokenizerSpec{}, "no tokens");
  TokenizerSpec s = SpmSpec();
  s.scores.pop_back();
  fails_with(s, "scores");
  s = SpmSpec();
  s.token_types[5] = 9;
  fails_with(s, "type 9");
  s = SpmSpec();
  s.bos_id = 270;
  fails_with(s, "bos token id 270");
  s = SpmSpec();
  s.bos_id = -1;
  fails_with(s, "adds BOS");
  s = SpmSpec();
  s.eog_ids = {-3};
  fails_with(s, "-3");
  TokenizerSpec b = BpeSpec();
  b.merges.push_back("nospace");
  fails_with(b, "nospace");
  b = BpeSpec();
  b.merges.push_back("t zz");
  fails_with(b, "'zz' is not a token");
  b = BpeSpec("default");
  fails_with(b, "pre-tokenizer 'default' is not supported (supported: llama3");
}

TEST(Tokenizer, InfersTypesWhenAbsent) {
  TokenizerSpec s = SpmSpec();
  s.token_types.clear();
  auto t = Make(std::move(s));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Type(0), TokenType::kUnknown);
  EXPECT_EQ(t->Type(1), TokenType::kControl);
  EXPECT_EQ(t->Type(ByteId(0x41)), TokenType::kByte);
  EXPECT_EQ(Enc(*t, "\xC3\xA9"), (Ids{kSp, ByteId(0xC3), ByteId(0xA9)}));
}

// Random strings over a pool of code points: Decode(Encode(x)) == x, and random bytes never crash.
TEST(Tokenizer, RoundTripProperty) {
  auto spm = Make(SpmSpec());
  auto bpe = Make(BpeSpec("llama3"));
  ASSERT_NE(spm, nullptr);
  ASSERT_NE(bpe, nullptr);
  const char32_t pool[] = {'a', 'b', 'c',  ' ',    ' ',     '\n',   '\t',   '1',  '7',   '\'',
                           's', '!', 0xE9, 0x4E2D, 0x1F999, 0x200D, 0x3000, 0xA0, 0x2581};
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) AppendUtf8(pool[rng() % std::size(pool)], &text);
    EXPECT_EQ(Dec(*bpe, Enc(*bpe, text)), text);
    // kSpm spells ' ' as '▁', so U+2581 in the text decodes as a space.
    std::string spaced = text;
    for (size_t p = 0; (p = spaced.find("\xE2\x96\x81", p)) != std::string::npos;) {
      spaced.replace(p, 3, " ");
    }
    EXPECT_EQ(Dec(*spm, Enc(*spm, text)), spaced);
    std::string bytes(rng() % 16, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto r = bpe->Encode(bytes, true, true);
    EXPECT_EQ(r.ok(), FindInvalidUtf8(bytes) == std::string_view::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers: splits worked out from the regexes by hand.

Words Split(std::string_view pre, std::string_view text) {
  auto r = PreTokenize(pre, text);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Words{};
}

TEST(PreTokenize, Llama3) {
  EXPECT_EQ(Split("llama3", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split("llama3", "I'm here"), (Words{"I", "'m", " here"}));
  EXPECT_EQ(Split("llama3", "I'M WE'LL"), (Words{"I", "'M", " WE", "'LL"}));  // (?i:...)
  EXPECT_EQ(Split("llama3", "12345"), (Words{"123", "45"}));
  EXPECT_EQ(Split("llama3", "a  b"), (Words{"a", " ", " b"}));
  EXPECT_EQ(Split("llama3", "a\n\nb"), (Words{"a", "\n\n", "b"}));
  // \s*[\r\n]+ ends at the last newline of a whitespace run; then \s+(?!\S) leaves one space.
  EXPECT_EQ(Split("llama3", "x  \n  y"), (Words{"x", "  \n", " ", " y"}));
  EXPECT_EQ(Split("llama3", "hello!!\n\nworld"), (Words{"hello", "!!\n\n", "world"}));
  EXPECT_EQ(Split("llama3", " (x)"), (Words{" (", "x", ")"}));
  EXPECT_EQ(Split("llama3", "$100"), (Words{"$", "100"}));
  EXPECT_EQ(Split("llama3", "\tfoo"), (Words{"\tfoo"}));
  EXPECT_EQ(Split("llama3", "\xE6\x97\xA5\xE6\x9C\xAC"), (Words{"\xE6\x97\xA5\xE6\x9C\xAC"}));
  // An emoji is neither letter nor number: [^\r\n\p{L}\p{N}]?\p{L}+ takes it with the word.
  EXPECT_EQ(Split("llama3", "\xF0\x9F\xA6\x99x"), (Words{"\xF0\x9F\xA6\x99x"}));
  EXPECT_EQ(Split("llama3", "a   "), (Words{"a", "   "}));
  EXPECT_EQ(Split("llama3", ""), Words{});
}

TEST(PreTokenize, Qwen2) {
  EXPECT_EQ(Split("qwen2", "12345"), (Words{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(Split("qwen2", "x 42"), (Words{"x", " ", "4", "2"}));
}

TEST(PreTokenize, Gpt2AndDigits) {
  EXPECT_EQ(Split("gpt2", "I'm here"), (Words{"I", "'m", " here"}));
  EXPECT_EQ(Split("gpt2", "I'M"), (Words{"I", "'", "M"}));  // case-sensitive contractions
  EXPECT_EQ(Split("gpt2", "a  b"), (Words{"a", " ", " b"}));
  EXPECT_EQ(Split("gpt2", "12345 x"), (Words{"12345", " x"}));
  EXPECT_EQ(Split("gpt2", "\tfoo"), (Words{"\t", "foo"}));
  EXPECT_EQ(Split("gpt2", "hello!!\n\nworld"), (Words{"hello", "!!", "\n", "\n", "world"}));
  EXPECT_EQ(Split("smollm", "abc123 x"), (Words{"abc", "1", "2", "3", " x"}));
  auto bad = PreTokenize("nope", "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'nope' is not supported (supported: llama3"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Unicode helpers.

TEST(Unicode, Classes) {
  EXPECT_TRUE(IsLetter('a'));
  EXPECT_TRUE(IsLetter(0xE9));    // é Ll
  EXPECT_TRUE(IsLetter(0x4E2D));  // 中 Lo
  EXPECT_TRUE(IsLetter(0x2B0));   // ʰ Lm
  EXPECT_FALSE(IsLetter(0x300));  // combining grave, Mn
  EXPECT_FALSE(IsLetter(0x1F999));
  EXPECT_TRUE(IsNumber('7'));
  EXPECT_TRUE(IsNumber(0x661));   // Arabic-Indic one, Nd
  EXPECT_TRUE(IsNumber(0xBD));    // ½ No
  EXPECT_TRUE(IsNumber(0x2167));  // Ⅷ Nl
  EXPECT_FALSE(IsNumber('x'));
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_TRUE(IsWhitespace(0x85));
  EXPECT_FALSE(IsWhitespace(0x200B));  // zero width space is not White_Space
  EXPECT_FALSE(IsLetter(0x110000));
}

TEST(Unicode, RepairUtf8) {
  std::string out;
  EXPECT_EQ(RepairUtf8("a\xC3", /*final=*/false, &out), 1u);  // C3 may still complete
  EXPECT_EQ(out, "a");
  out.clear();
  EXPECT_EQ(RepairUtf8("a\xC3", /*final=*/true, &out), 2u);
  EXPECT_EQ(out, std::string("a") + kRepl);
  out.clear();
  // E0 80: 80 cannot follow E0 (overlong), so E0 and 80 are each replaced.
  EXPECT_EQ(RepairUtf8("\xE0\x80z", false, &out), 3u);
  EXPECT_EQ(out, std::string(kRepl) + kRepl + "z");
  out.clear();
  // E6 97 then 'x': one replacement for the maximal subpart E6 97.
  RepairUtf8("\xE6\x97x", false, &out);
  EXPECT_EQ(out, std::string(kRepl) + "x");
}

// ---------------------------------------------------------------------------------------------
// IncrementalDetokenizer.

TEST(IncrementalDetokenizer, HoldsPartialCharacters) {
  auto t = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(*t);
  EXPECT_EQ(d.Push(kSpA), " a");  // a continuation keeps its space by default
  EXPECT_EQ(d.Push(ByteId(0xC3)), "");
  EXPECT_EQ(d.Push(ByteId(0xA9)), "\xC3\xA9");
  // 🦙 = F0 9F A6 99 across four pushes.
  EXPECT_EQ(d.Push(ByteId(0xF0)), "");
  EXPECT_EQ(d.Push(ByteId(0x9F)), "");
  EXPECT_EQ(d.Push(ByteId(0xA6)), "");
  EXPECT_EQ(d.Push(ByteId(0x99)), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(d.Push(1), "");  // control, skipped
  EXPECT_EQ(d.Push(kB), "b");
  EXPECT_EQ(d.Flush(), "");
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacement) {
  auto t = Make(SpmSpec());
  ASSERT_NE(t, nullptr);
  IncrementalDetokenizer d(*t, /*skip_special=*/false, /*strip_leading_space=*/true);
  EXPECT_EQ(d.Push(kSpA), "a");            // the stream's first space stripped
  EXPECT_EQ(d.Push(ByteId(0xFF)), kRepl);  // can never start a character
  EXPECT_EQ(d.Push(ByteId(0xC3)), "");
  EXPECT_EQ(d.Push(kB), std::string(kRepl) + "b");  // C3 cannot be completed by 'b'
  EXPECT_EQ(d.Push(1), "<s>");                      // rendered when not skipping special tokens
  EXPECT_EQ(d.Push(ByteId(0xE6)), "");
  EXPECT_EQ(d.Push(ByteId(0x97)), "");
  EXPECT_EQ(d.Flush(), kRepl);   // the stream ended inside a character
  EXPECT_EQ(d.Push(kSpA), "a");  // a new stream
}

TEST(IncrementalDetokenizer, MatchesDecodeOnEmoji) {
  auto t = Make(BpeSpec());
  ASSERT_NE(t, nullptr);
  // 👨‍👩‍👧 (a ZWJ sequence) as single bytes, pushed one by one.
  const std::string text =
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7!";
  const Ids ids = Enc(*t, text);
  IncrementalDetokenizer d(*t);
  std::string streamed;
  for (const int32_t id : ids) {
    const std::string piece = d.Push(id);
    EXPECT_EQ(FindInvalidUtf8(piece), std::string_view::npos);
    streamed += piece;
  }
  streamed += d.Flush();
  EXPECT_EQ(streamed, text);
}

// ---------------------------------------------------------------------------------------------
// LoadHfTokenizer.

class HfTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("kiln_tok_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::string dir() const { return dir_.string(); }
  std::filesystem::path dir_;
};

constexpr const char* kLlama3Split =
    R"({"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false})";

std::string ByteLevelJson(const std::string& split, const std::string& merges) {
  return std::string(R"({"version":"1.0","added_tokens":[
      {"id":5,"content":"<|end|>","special":true},{"id":6,"content":"<tool>","special":false},
      {"id":4,"content":"<|begin|>","special":true}],
    "normalizer":null,
    "pre_tokenizer":{"type":"Sequence","pretokenizers":[)") +
         split + R"(,{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},
    "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|begin|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]},
    "decoder":{"type":"ByteLevel"},
    "model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"\u0120":3},"merges":)" +
         merges + "}}";
}

TEST_F(HfTokenizerTest, ByteLevel) {
  Write("tokenizer.json", ByteLevelJson(kLlama3Split, R"(["a b"])"));
  Write("tokenizer_config.json",
        R"({"model_max_length": 1000000000000000019884624838656, "bos_token": "<|begin|>",
            "eos_token": {"content": "<|end|>", "special": true}})");
  auto spec = LoadHfTokenizer(dir());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model, TokenizerSpec::Model::kBpe);
  EXPECT_EQ(spec->pre, "llama3");
  ASSERT_EQ(spec->tokens.size(), 7u);
  EXPECT_EQ(spec->tokens[5], "<|end|>");
  EXPECT_EQ(spec->token_types, (std::vector<int32_t>{1, 1, 1, 1, 3, 3, 4}));
  EXPECT_EQ(spec->merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(spec->bos_id, 4);
  EXPECT_EQ(spec->eos_id, 5);
  EXPECT_TRUE(spec->add_bos);  // from the TemplateProcessing post-processor
  EXPECT_FALSE(spec->add_eos);
  EXPECT_EQ(spec->eog_ids, (Ids{5}));
  auto t = Make(*spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Enc(*t, "ab<tool>", /*add_special=*/true), (Ids{4, 2, 6}));
}

TEST_F(HfTokenizerTest, MergesAsPairsAndConfigOverride) {
  Write("tokenizer.json", ByteLevelJson(kLlama3Split, R"([["a","b"]])"));
  Write("tokenizer_config.json", R"({"add_bos_token": false})");
  auto spec = LoadHfTokenizer(dir());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->merges, (std::vector<std::string>{"a b"}));
  EXPECT_FALSE(spec->add_bos);
}

TEST_F(HfTokenizerTest, SentencePieceStyle) {
  Write("tokenizer.json", R"({"added_tokens":[
      {"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},
      {"id":2,"content":"</s>","special":true}],
    "normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"\u2581"},
      {"type":"Replace","pattern":{"String":" "},"content":"\u2581"}]},
    "pre_tokenizer":null,
    "model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>",
      "vocab":{"<unk>":0,"<s>":1,"</s>":2,"<0x41>":3,"\u2581":4,"a":5,"b":6,"ab":7,
               "\u2581ab":8,"\u2581a":9},
      "merges":["a b","\u2581 ab","\u2581 a"]}})");
  Write("tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<s>",
      "eos_token": "</s>", "unk_token": "<unk>", "pad_token": null})");
  auto spec = LoadHfTokenizer(dir());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model, TokenizerSpec::Model::kSpm);
  EXPECT_TRUE(spec->add_space_prefix);
  // Scores: minus the rank of the first merge making the token.
  ASSERT_EQ(spec->scores.size(), 10u);
  EXPECT_EQ(spec->scores[7], 0.0f);
  EXPECT_EQ(spec->scores[8], -1.0f);
  EXPECT_EQ(spec->scores[9], -2.0f);
  EXPECT_EQ(spec->token_types[0], 2);
  EXPECT_EQ(spec->token_types[1], 3);
  EXPECT_EQ(spec->token_types[3], 6);
  EXPECT_EQ(spec->unk_id, 0);
  EXPECT_EQ(spec->bos_id, 1);
  EXPECT_EQ(spec->pad_id, -1);
  EXPECT_TRUE(spec->add_bos);
  auto t = Make(*spec);
  ASSERT_NE(t, nullptr);
  // "▁ab": ab (rank 0) first, then ▁ ab (rank 1).
  EXPECT_EQ(Enc(*t, "ab", true), (Ids{1, 8}));
  EXPECT_EQ(Enc(*t, "A"), (Ids{4, 3}));  // 'A' by byte fallback
  EXPECT_EQ(Dec(*t, {1, 8}, true), "ab");
}

TEST_F(HfTokenizerTest, MetaspacePreTokenizer) {
  const auto json = [](const std::string& scheme) {
    return R"({"added_tokens":[{"id":0,"content":"<unk>","special":true}],"normalizer":null,
      "pre_tokenizer":{"type":"Metaspace","replacement":"\u2581","prepend_scheme":")" +
           scheme + R"(","split":false},
      "model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>",
        "vocab":{"<unk>":0,"\u2581":1,"x":2,"\u2581x":3},"merges":["\u2581 x"]}})";
  };
  Write("tokenizer.json", json("always"));
  auto spec = LoadHfTokenizer(dir());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model, TokenizerSpec::Model::kSpm);
  auto t = Make(*spec);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Enc(*t, "x x"), (Ids{3, 3}));  // "▁x▁x"
  Write("tokenizer.json", json("first"));
  auto first = LoadHfTokenizer(dir());
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(first.status().message().find("prepend_scheme 'first'"), std::string::npos);
}

TEST_F(HfTokenizerTest, Errors) {
  auto missing = LoadHfTokenizer(dir() + "/nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  Write("tokenizer.json", "{\"model\": ");
  auto broken = LoadHfTokenizer(dir());
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);

  Write("tokenizer.json", R"({"model":{"type":"Unigram","vocab":[]}})");
  auto unigram = LoadHfTokenizer(dir());
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(unigram.status().message().find("'Unigram'"), std::string::npos);

  Write("tokenizer.json",
        ByteLevelJson(R"({"type":"Split","pattern":{"Regex":"\\d+"},"behavior":"Isolated"})",
                      R"(["a b"])"));
  auto regex = LoadHfTokenizer(dir());
  ASSERT_FALSE(regex.ok());
  EXPECT_EQ(regex.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(regex.status().message().find("\\d+"), std::string::npos);

  Write("tokenizer.json", ByteLevelJson(kLlama3Split, R"(["a b"])"));
  Write("tokenizer_config.json", R"({"bos_token": "<nope>"})");
  auto bos = LoadHfTokenizer(dir());
  ASSERT_FALSE(bos.ok());
  EXPECT_NE(bos.status().message().find("'<nope>' is not in the vocabulary"), std::string::npos);
}

// Mutated tokenizer.json files give a spec or an error, never a crash; a spec that loads gives a
// tokenizer or an error.
TEST_F(HfTokenizerTest, MutatedFilesNeverCrash) {
  const std::string seed = ByteLevelJson(kLlama3Split, R"(["a b"])");
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    Write("tokenizer.json", testing::MutateBytes(seed, rng, "[]{}\",:0123456789ab"));
    auto spec = LoadHfTokenizer(dir());
    if (!spec.ok()) continue;
    auto t = Tokenizer::Create(std::move(spec).value());
    if (t.ok()) (void)(*t)->Encode("ab a<tool>", true, true);
  }
}

}  // namespace
}  // namespace kiln::llm
