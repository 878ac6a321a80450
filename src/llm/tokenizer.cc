// SPDX-License-Identifier: Apache-2.0
// Tokenizers (tokenizer.h).
//
// NOTE on the algorithms. Both merge loops keep the symbols of one word in a doubly linked list
// over an array and candidate pairs in a binary heap; a popped pair is applied only if both
// symbols are still what they were when it was pushed (otherwise it is stale and dropped), so a
// word of n symbols costs O(n log n). kSpm follows llama.cpp's llm_tokenizer_spm (priority:
// the merged token's score, ties to the leftmost pair); kBpe follows llama.cpp's
// llm_tokenizer_bpe and Hugging Face's BPE (priority: the merge rank, ties to the leftmost).
// The pre-tokenizers are llama.cpp's regexes written out as hand matchers over code points:
// at each position the alternatives are tried in order with the regex's greedy/backtracking
// outcome computed directly (see MatchLlama3Style and MatchGpt2).
#include "llm/tokenizer.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <queue>
#include <utility>

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

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 '▁'

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the others to U+0100 and up.
const std::array<char32_t, 256>& ByteToUnicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      t[b] = keep ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// The inverse of ByteToUnicode: code point -> byte, -1 when not in the table (cp < 324).
int UnicodeToByte(char32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t;
    t.fill(-1);
    const auto& fwd = ByteToUnicode();
    for (int b = 0; b < 256; ++b) t[fwd[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

// "<0xAB>" -> 0xAB; -1 when `text` is not exactly that form.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (const char c : s.substr(0, 80)) {
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers.

enum CpClass : uint8_t { kOther, kLetter, kNumber, kSpaceClass };

struct CodePoints {
  std::vector<char32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<uint32_t> off;  // byte offset of each code point; off[size] = text size
};

// REQUIRES: text is valid UTF-8.
void DecodeCodePoints(std::string_view text, CodePoints* out) {
  out->cp.clear();
  out->cls.clear();
  out->off.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    out->off.push_back(static_cast<uint32_t>(pos));
    char32_t c = static_cast<unsigned char>(text[pos]);
    if (c < 0x80) {
      ++pos;
    } else if (!DecodeUtf8(text, &pos, &c)) {
      c = 0xFFFD;  // not reached for validated text
      ++pos;
    }
    out->cp.push_back(c);
    uint8_t k = kOther;
    if (IsWhitespace(c)) {
      k = kSpaceClass;
    } else if (IsLetter(c)) {
      k = kLetter;
    } else if (IsNumber(c)) {
      k = kNumber;
    }
    out->cls.push_back(k);
  }
  out->off.push_back(static_cast<uint32_t>(text.size()));
}

char32_t AsciiLower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// 's 't 're 've 'm 'll 'd at i (ASCII case-insensitive when `fold`): the end, or i.
size_t MatchContraction(const CodePoints& t, size_t i, size_t n, bool fold) {
  if (t.cp[i] != '\'' || i + 1 >= n) return i;
  const auto low = [&](size_t k) { return fold ? AsciiLower(t.cp[k]) : t.cp[k]; };
  const char32_t a = low(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= n) return i;
  const char32_t b = low(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return i;
}

size_t RunEnd(const CodePoints& t, size_t i, size_t n, uint8_t k) {
  while (i < n && t.cls[i] == k) ++i;
  return i;
}

bool IsCrLf(char32_t c) { return c == '\r' || c == '\n'; }

// Whitespace alternatives shared by the regexes, at i where cls[i] is whitespace:
// [\s*[\r\n]+ |] \s+(?!\S) | \s+.
size_t MatchSpaces(const CodePoints& t, size_t i, size_t n, bool newline_alt) {
  const size_t j = RunEnd(t, i, n, kSpaceClass);
  if (newline_alt) {
    for (size_t k = j; k > i; --k) {
      if (IsCrLf(t.cp[k - 1])) return k;  // \s* up to the last newline, [\r\n]+ ends there
    }
  }
  if (j == n) return j;          // \s+(?!\S) at the end
  if (j - i >= 2) return j - 1;  // \s+(?!\S): leave the last space to the next word
  return j;                      // \s+
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+          (Llama 3: 3 digits; Qwen2: 1)
size_t MatchLlama3Style(const CodePoints& t, size_t i, size_t n, size_t max_digits) {
  if (size_t e = MatchContraction(t, i, n, /*fold=*/true); e > i) return e;
  const uint8_t k = t.cls[i];
  if (k == kLetter) return RunEnd(t, i, n, kLetter);
  if (k != kNumber && !IsCrLf(t.cp[i]) && i + 1 < n && t.cls[i + 1] == kLetter) {
    return RunEnd(t, i + 1, n, kLetter);
  }
  if (k == kNumber) {
    size_t j = i;
    while (j < n && t.cls[j] == kNumber && j - i < max_digits) ++j;
    return j;
  }
  size_t s = i;
  if (t.cp[i] == ' ' && i + 1 < n && t.cls[i + 1] == kOther) s = i + 1;
  if (t.cls[s] == kOther) {
    size_t j = RunEnd(t, s, n, kOther);
    while (j < n && IsCrLf(t.cp[j])) ++j;
    return j;
  }
  return MatchSpaces(t, i, n, /*newline_alt=*/true);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+   (GPT-2)
size_t MatchGpt2(const CodePoints& t, size_t i, size_t n) {
  if (size_t e = MatchContraction(t, i, n, /*fold=*/false); e > i) return e;
  size_t s = i;
  if (t.cp[i] == ' ' && i + 1 < n && t.cls[i + 1] != kSpaceClass) s = i + 1;
  if (t.cls[s] != kSpaceClass) return RunEnd(t, s, n, t.cls[s]);
  return MatchSpaces(t, i, n, /*newline_alt=*/false);
}

// Splits valid UTF-8 `text` into the words of pre-tokenizer `kind` (PreName::kind).
void SplitWords(int kind, std::string_view text, std::vector<std::string_view>* words) {
  CodePoints t;
  DecodeCodePoints(text, &t);
  const size_t n = t.cp.size();
  const auto emit = [&](size_t a, size_t b) {
    words->push_back(text.substr(t.off[a], t.off[b] - t.off[a]));
  };
  const auto split = [&](size_t begin, size_t end) {
    size_t i = begin;
    while (i < end) {
      size_t e = kind == 1   ? MatchLlama3Style(t, i, end, 3)
                 : kind == 2 ? MatchLlama3Style(t, i, end, 1)
                             : MatchGpt2(t, i, end);
      if (e <= i) e = i + 1;  // not reached: every code point matches some alternative
      emit(i, e);
      i = e;
    }
  };
  if (kind != 4) {
    split(0, n);
    return;
  }
  // \p{N} first (each digit a word), then the GPT-2 regex over the text between digits.
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (t.cls[i] != kNumber) continue;
    split(start, i);
    emit(i, i + 1);
    start = i + 1;
  }
  split(start, n);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Spec helpers.

namespace {

struct PreName {
  std::string_view name;
  int kind;  // 1 llama3, 2 qwen2, 3 gpt2, 4 digits + gpt2
};
constexpr PreName kPreNames[] = {
    {"llama3", 1},
    {"llama-v3", 1},
    {"llama-bpe", 1},
    {"falcon3", 1},
    {"pixtral", 1},
    {"qwen2", 2},
    {"deepseek-r1-qwen", 2},
    {"megrez", 2},
    {"stablelm2", 2},
    {"gpt2", 3},
    {"gpt-2", 3},
    {"phi-2", 3},
    {"mpt", 3},
    {"olmo", 3},
    {"smollm", 4},
    {"starcoder", 4},
    {"refact", 4},
    {"codeshell", 4},
};

int PreKind(std::string_view name) {
  for (const PreName& p : kPreNames) {
    if (p.name == name) return p.kind;
  }
  return 0;
}

}  // namespace

Result<std::vector<std::string_view>> PreTokenize(std::string_view pre, std::string_view text) {
  const int kind = PreKind(pre);
  if (kind == 0) {
    return Status::InvalidArgument(
        fmt::format("byte-level BPE pre-tokenizer '{}' is not supported (supported: {})", pre,
                    SupportedPreTokenizers()));
  }
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return Status::InvalidArgument(fmt::format("text is not valid UTF-8 at offset {}", bad));
  }
  std::vector<std::string_view> words;
  SplitWords(kind, text, &words);
  return words;
}

std::string_view SupportedPreTokenizers() {
  static const std::string names = [] {
    std::string s;
    for (const PreName& p : kPreNames) {
      if (!s.empty()) s += ", ";
      s += p.name;
    }
    return s;
  }();
  return names;
}

void AddDefaultEogTokens(TokenizerSpec* spec) {
  static constexpr std::string_view kTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end_of_text|>",
      "<|eom_id|>", "<|end|>",    "<end_of_turn>", "<EOT>",
  };
  for (size_t id = 0; id < spec->tokens.size(); ++id) {
    const std::string& t = spec->tokens[id];
    if (std::find(std::begin(kTexts), std::end(kTexts), t) == std::end(kTexts)) continue;
    const bool control = id < spec->token_types.size() &&
                         spec->token_types[id] == static_cast<int32_t>(TokenType::kControl);
    if (!control && static_cast<int32_t>(id) != spec->eos_id) continue;
    const int32_t i = static_cast<int32_t>(id);
    if (std::find(spec->eog_ids.begin(), spec->eog_ids.end(), i) == spec->eog_ids.end()) {
      spec->eog_ids.push_back(i);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tokenizer.

Result<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerSpec spec) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->spec_ = std::move(spec);
  KILN_RETURN_IF_ERROR(t->Init());
  return t;
}

Status Tokenizer::Init() {
  const size_t n = spec_.tokens.size();
  const bool spm = spec_.model == TokenizerSpec::Model::kSpm;
  if (n == 0) return Status::InvalidArgument("tokenizer has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument(fmt::format("tokenizer has {} tokens; at most 2^31-1", n));
  }
  if (!spec_.scores.empty() && spec_.scores.size() != n) {
    return Status::InvalidArgument(
        fmt::format("tokenizer has {} scores for {} tokens", spec_.scores.size(), n));
  }
  if (!spec_.token_types.empty() && spec_.token_types.size() != n) {
    return Status::InvalidArgument(
        fmt::format("tokenizer has {} token types for {} tokens", spec_.token_types.size(), n));
  }
  const std::pair<const char*, int32_t> ids[] = {{"bos", spec_.bos_id},
                                                 {"eos", spec_.eos_id},
                                                 {"unknown", spec_.unk_id},
                                                 {"padding", spec_.pad_id}};
  for (const auto& [what, id] : ids) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return Status::InvalidArgument(
          fmt::format("{} token id {} is out of range [0, {})", what, id, n));
    }
  }
  for (const int32_t id : spec_.eog_ids) {
    if (id < 0 || id >= static_cast<int64_t>(n)) {
      return Status::InvalidArgument(
          fmt::format("end-of-generation token id {} is out of range [0, {})", id, n));
    }
  }
  if (spec_.add_bos && spec_.bos_id < 0) {
    return Status::InvalidArgument("tokenizer adds BOS but has no BOS token");
  }
  if (spec_.add_eos && spec_.eos_id < 0) {
    return Status::InvalidArgument("tokenizer adds EOS but has no EOS token");
  }

  if (spec_.token_types.empty()) {
    spec_.token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
    for (size_t i = 0; i < n; ++i) {
      if (spm && ParseByteToken(spec_.tokens[i]) >= 0) {
        spec_.token_types[i] = static_cast<int32_t>(TokenType::kByte);
      }
    }
    for (const int32_t id : {spec_.bos_id, spec_.eos_id, spec_.pad_id}) {
      if (id >= 0) spec_.token_types[id] = static_cast<int32_t>(TokenType::kControl);
    }
    if (spec_.unk_id >= 0) {
      spec_.token_types[spec_.unk_id] = static_cast<int32_t>(TokenType::kUnknown);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t ty = spec_.token_types[i];
    if (ty < 0 || ty > 6) {
      return Status::InvalidArgument(fmt::format("token {} ({}) has type {}; valid types are 0..6",
                                                 i, Quote(spec_.tokens[i]), ty));
    }
  }

  if (!spm) {
    pre_kind_ = PreKind(spec_.pre);
    if (pre_kind_ == 1) spec_.ignore_merges = true;
    if (pre_kind_ == 0) {
      return Status::InvalidArgument(
          fmt::format("byte-level BPE pre-tokenizer '{}' is not supported (supported: {})",
                      spec_.pre, SupportedPreTokenizers()));
    }
  }

  ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) ids_.emplace(spec_.tokens[i], static_cast<int32_t>(i));

  // Rendered bytes of every token.
  bytes_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = spec_.tokens[i];
    const auto type = static_cast<TokenType>(spec_.token_types[i]);
    std::string& out = bytes_[i];
    if (type == TokenType::kByte && ParseByteToken(text) >= 0) {
      out.push_back(static_cast<char>(ParseByteToken(text)));
    } else if (type == TokenType::kNormal || type == TokenType::kUndefined) {
      if (spm) {
        for (size_t p = 0; p < text.size();) {
          if (text.compare(p, kSpace.size(), kSpace) == 0) {
            out.push_back(' ');
            p += kSpace.size();
          } else {
            out.push_back(text[p++]);
          }
        }
      } else {
        size_t p = 0;
        while (p < text.size()) {
          const size_t start = p;
          char32_t cp = 0;
          if (!DecodeUtf8(text, &p, &cp)) {
            out.push_back(text[p++]);
            continue;
          }
          const int b = UnicodeToByte(cp);
          if (b >= 0) {
            out.push_back(static_cast<char>(b));
          } else {
            out.append(text, start, p - start);
          }
        }
      }
    } else {
      out = text;
    }
  }

  // Byte -> token.
  const auto& b2u = ByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = -1;
    if (spm) {
      const int32_t id = Find(fmt::format("<0x{:02X}>", b));
      if (id >= 0 && spec_.token_types[id] == static_cast<int32_t>(TokenType::kByte)) {
        byte_ids_[b] = id;
      } else {
        byte_ids_[b] = Find(std::string(1, static_cast<char>(b)));
      }
    } else {
      std::string mapped;
      AppendUtf8(b2u[b], &mapped);
      byte_ids_[b] = Find(mapped);
    }
  }

  // Merges.
  if (!spm) {
    merges_.reserve(spec_.merges.size());
    for (size_t r = 0; r < spec_.merges.size(); ++r) {
      const std::string& m = spec_.merges[r];
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) {
        return Status::InvalidArgument(
            fmt::format("merge {} {} is not two tokens separated by a space", r, Quote(m)));
      }
      const std::string_view left = std::string_view(m).substr(0, sp);
      const std::string_view right = std::string_view(m).substr(sp + 1);
      const int32_t a = Find(left);
      const int32_t b = Find(right);
      const int32_t c = Find(std::string(left) + std::string(right));
      if (a < 0 || b < 0 || c < 0) {
        return Status::InvalidArgument(
            fmt::format("merge {} {}: {} is not a token", r, Quote(m),
                        a < 0   ? Quote(left)
                        : b < 0 ? Quote(right)
                                : Quote(std::string(left) + std::string(right))));
      }
      const uint64_t key =
          (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
      merges_.emplace(key, MergeResult{static_cast<int32_t>(r), c});
    }
  }

  // Special tokens to split out of text.
  for (size_t i = 0; i < n; ++i) {
    const auto type = static_cast<TokenType>(spec_.token_types[i]);
    if (type != TokenType::kControl && type != TokenType::kUnknown &&
        type != TokenType::kUserDefined) {
      continue;
    }
    const std::string& text = spec_.tokens[i];
    if (text.empty() || FindInvalidUtf8(text) != std::string_view::npos) continue;
    if (ids_.at(text) != static_cast<int32_t>(i)) continue;  // a duplicate text
    special_by_byte_[static_cast<uint8_t>(text[0])].push_back(static_cast<int32_t>(i));
  }
  for (auto& bucket : special_by_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
      return spec_.tokens[a].size() > spec_.tokens[b].size();
    });
  }

  AddDefaultEogTokens(&spec_);  // as llama.cpp does at load, whatever the metadata lists
  eog_.assign(n, 0);
  if (spec_.eos_id >= 0) eog_[spec_.eos_id] = 1;
  for (const int32_t id : spec_.eog_ids) eog_[id] = 1;
  return Status::OK();
}

int32_t Tokenizer::Find(std::string_view text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

bool Tokenizer::IsEog(int32_t id) const { return id >= 0 && id < vocab_size() && eog_[id] != 0; }

bool Tokenizer::IsControl(int32_t id) const { return Type(id) == TokenType::kControl; }

TokenType Tokenizer::Type(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::kUndefined;
  return static_cast<TokenType>(spec_.token_types[id]);
}

std::string_view Tokenizer::Piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return spec_.tokens[id];
}

std::string Tokenizer::TokenBytes(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_size()) return {};
  if (!render_special) {
    const TokenType t = Type(id);
    if (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused) return {};
  }
  return bytes_[id];
}

void Tokenizer::SplitSpecial(std::string_view text, bool parse_special,
                             std::vector<Fragment>* out) const {
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    int32_t found = -1;
    for (const int32_t id : special_by_byte_[static_cast<uint8_t>(text[i])]) {
      if (!parse_special && Type(id) != TokenType::kUserDefined) continue;
      const std::string& piece = spec_.tokens[id];
      if (text.compare(i, piece.size(), piece) == 0) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ++i;
      continue;
    }
    if (i > start) out->push_back({false, -1, text.substr(start, i - start)});
    out->push_back({true, found, {}});
    i += spec_.tokens[found].size();
    start = i;
  }
  if (start < text.size()) out->push_back({false, -1, text.substr(start)});
}

void Tokenizer::EncodeSpm(std::string_view text, bool space_prefix,
                          std::vector<int32_t>* out) const {
  std::string s;
  s.reserve(text.size() + 8);
  if (space_prefix) s.append(kSpace);
  for (const char c : text) {
    if (c == ' ') {
      s.append(kSpace);
    } else {
      s.push_back(c);
    }
  }
  if (s.empty()) return;

  struct Symbol {
    int32_t prev, next;
    uint32_t start, len;
  };
  std::vector<Symbol> sym;
  for (size_t p = 0; p < s.size();) {
    const int len = std::max(1, Utf8SequenceLength(static_cast<uint8_t>(s[p])));
    const size_t l = std::min<size_t>(len, s.size() - p);
    const auto idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, idx + 1, static_cast<uint32_t>(p), static_cast<uint32_t>(l)});
    p += l;
  }
  sym.back().next = -1;

  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t len;
  };
  const auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> heap(worse);
  const auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = Find(std::string_view(s).substr(sym[l].start, len));
    if (id < 0) return;
    heap.push({spec_.scores.empty() ? 0.0f : spec_.scores[id], l, r, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);
  while (!heap.empty()) {
    const Bigram bg = heap.top();
    heap.pop();
    Symbol& l = sym[bg.left];
    Symbol& r = sym[bg.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = std::string_view(s).substr(sym[i].start, sym[i].len);
    const int32_t id = Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // Byte fallback; a character some of whose bytes have no token is one <unk>.
    const bool bytes = std::all_of(piece.begin(), piece.end(),
                                   [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; });
    if (bytes) {
      for (const char c : piece) out->push_back(byte_ids_[static_cast<uint8_t>(c)]);
    } else if (spec_.unk_id >= 0) {
      out->push_back(spec_.unk_id);
    }
  }
}

void Tokenizer::EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (spec_.ignore_merges) {
    const auto& b2u = ByteToUnicode();
    std::string mapped;
    for (const char c : word) AppendUtf8(b2u[static_cast<uint8_t>(c)], &mapped);
    if (const int32_t id = Find(mapped); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  const auto n = static_cast<int32_t>(word.size());
  std::vector<int32_t> id(n), prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) {
    id[i] = byte_ids_[static_cast<uint8_t>(word[i])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Pair {
    int32_t rank, left, left_id, right_id, result;
  };
  const auto worse = [](const Pair& a, const Pair& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> heap(worse);
  const auto try_add = [&](int32_t l) {
    if (l < 0 || next[l] < 0) return;
    const int32_t a = id[l];
    const int32_t b = id[next[l]];
    if (a < 0 || b < 0) return;
    const auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
                                 static_cast<uint32_t>(b));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, l, a, b, it->second.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i);
  constexpr int32_t kDead = -2;
  while (!heap.empty()) {
    const Pair p = heap.top();
    heap.pop();
    const int32_t r = next[p.left];
    if (id[p.left] != p.left_id || r < 0 || id[r] != p.right_id) continue;
    id[p.left] = p.result;
    id[r] = kDead;
    next[p.left] = next[r];
    if (next[r] >= 0) prev[next[r]] = p.left;
    try_add(prev[p.left]);
    try_add(p.left);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) {
    if (id[i] >= 0) {
      out->push_back(id[i]);
    } else if (spec_.unk_id >= 0) {
      out->push_back(spec_.unk_id);  // a byte the vocabulary lacks
    }
  }
}

void Tokenizer::EncodeBpeText(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<std::string_view> words;
  SplitWords(pre_kind_, text, &words);
  for (const std::string_view w : words) EncodeBpeWord(w, out);
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text, bool add_special,
                                               bool parse_special) const {
  // Offsets inside the encoders are 32-bit (kSpm's escaped text is up to 3x the input).
  constexpr size_t kMaxTextBytes = size_t{1} << 30;
  if (text.size() > kMaxTextBytes) {
    return Status::InvalidArgument(fmt::format(
        "text is {} bytes; at most {} can be tokenized at once", text.size(), kMaxTextBytes));
  }
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("text is not valid UTF-8: byte 0x{:02X} at offset {} does not begin a valid "
                    "character",
                    static_cast<uint8_t>(text[bad]), bad));
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && spec_.add_bos) out.push_back(spec_.bos_id);
  std::vector<Fragment> fragments;
  SplitSpecial(text, parse_special, &fragments);
  const bool spm = spec_.model == TokenizerSpec::Model::kSpm;
  bool prev_special = true;  // llama.cpp: a space prefix at the start and after special tokens
  for (const Fragment& f : fragments) {
    if (f.is_token) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    if (spm) {
      EncodeSpm(f.text, spec_.add_space_prefix && prev_special, &out);
    } else {
      EncodeBpeText(f.text, &out);
    }
    prev_special = false;
  }
  if (add_special && spec_.add_eos) out.push_back(spec_.eos_id);
  return out;
}

Result<std::string> Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return Status::InvalidArgument(fmt::format(
          "token id {} (at position {}) is out of range [0, {})", ids[i], i, vocab_size()));
    }
    const std::string b = TokenBytes(ids[i], !skip_special);
    raw += b;
  }
  size_t from = 0;
  if (strips_leading_space() && !raw.empty() && raw[0] == ' ') from = 1;
  std::string out;
  out.reserve(raw.size());
  RepairUtf8(std::string_view(raw).substr(from), /*final=*/true, &out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// IncrementalDetokenizer.

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special,
                                               bool strip_leading_space)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      strip_leading_space_(strip_leading_space) {}

std::string IncrementalDetokenizer::Push(int32_t id) {
  std::string bytes = tokenizer_.TokenBytes(id, !skip_special_);
  if (bytes.empty()) return {};
  if (at_start_) {
    at_start_ = false;
    if (strip_leading_space_ && bytes[0] == ' ') bytes.erase(0, 1);
  }
  pending_ += bytes;
  std::string out;
  const size_t used = RepairUtf8(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  RepairUtf8(pending_, /*final=*/true, &out);
  pending_.clear();
  at_start_ = true;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Hugging Face tokenizer.json.

namespace {

namespace dom = simdjson::dom;

// Stores the value of an optional JSON field in *out when it is present with the right type.
template <typename T, typename R>
void Optional(R&& result, T* out) {
  T v{};
  if (std::forward<R>(result).get(v) == simdjson::SUCCESS) *out = v;
}

Status JsonError(const std::string& path, std::string_view what) {
  return Status::InvalidArgument(fmt::format("{}: {}", path, what));
}

// tokenizer_config.json files carry integers beyond 64 bits (model_max_length is often
// 1000000000000000019884624838656), which simdjson rejects: this copy of `json` writes every
// integer literal of more than 18 digits outside strings as a floating-point literal.
std::string WidenBigIntegers(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < json.size();) {
    const char c = json[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < json.size()) {
        out.push_back(json[i + 1]);
        i += 2;
        continue;
      }
      if (c == '"') in_string = false;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.push_back(c);
      ++i;
      continue;
    }
    if (c >= '0' && c <= '9' &&
        (i == 0 || !(json[i - 1] == '.' || json[i - 1] == 'e' || json[i - 1] == 'E' ||
                     json[i - 1] == '+' || (json[i - 1] >= '0' && json[i - 1] <= '9')))) {
      size_t j = i;
      while (j < json.size() && json[j] >= '0' && json[j] <= '9') ++j;
      out.append(json.substr(i, j - i));
      const bool fraction = j < json.size() && (json[j] == '.' || json[j] == 'e' || json[j] == 'E');
      if (j - i > 18 && !fraction) out.append(".0");
      i = j;
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

// Reads and parses a JSON file into `parser` (which owns the document `*root` points into).
Status ParseJsonFile(const std::string& path, simdjson::padded_string* text, dom::parser* parser,
                     dom::element* root) {
  if (const auto err = simdjson::padded_string::load(path).get(*text); err != simdjson::SUCCESS) {
    return Status::NotFound(fmt::format("cannot read {}: {}", path, simdjson::error_message(err)));
  }
  auto err = parser->parse(*text).get(*root);
  if (err == simdjson::NUMBER_ERROR || err == simdjson::NUMBER_OUT_OF_RANGE) {
    *text = simdjson::padded_string(WidenBigIntegers(std::string_view(*text)));
    err = parser->parse(*text).get(*root);
  }
  if (err != simdjson::SUCCESS) {
    return JsonError(path, fmt::format("not valid JSON: {}", simdjson::error_message(err)));
  }
  return Status::OK();
}

// The string of a field that is a string or an object {"content": string}; empty if neither.
std::string SpecialText(dom::element e) {
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  dom::object o;
  if (e.get_object().get(o) == simdjson::SUCCESS &&
      o["content"].get_string().get(s) == simdjson::SUCCESS) {
    return std::string(s);
  }
  return {};
}

bool LooksSpecial(std::string_view t) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return wrapped("<|", "|>") || wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || t == "<pad>" ||
         t == "<mask>" || t == "<2mass>" || t == "[@BOS@]";
}

// The pre-tokenizer regexes of tokenizer.json files (Split with behavior Isolated) kiln knows.
constexpr std::string_view kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct HfPre {
  bool byte_level = false;
  bool byte_level_regex = false;   // ByteLevel with use_regex (the GPT-2 regex)
  bool byte_level_prefix = false;  // ByteLevel add_prefix_space
  bool digits = false;             // Digits individual_digits
  std::string split_regex;
  bool metaspace = false;
  std::string metaspace_scheme;
};

Status ReadPreTokenizer(const std::string& path, dom::element e, HfPre* pre) {
  if (e.is_null()) return Status::OK();
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) {
    return JsonError(path, "pre_tokenizer has no type");
  }
  if (type == "Sequence") {
    dom::array list;
    if (e["pretokenizers"].get_array().get(list) != simdjson::SUCCESS) {
      return JsonError(path, "pre_tokenizer Sequence has no pretokenizers list");
    }
    for (dom::element item : list) KILN_RETURN_IF_ERROR(ReadPreTokenizer(path, item, pre));
    return Status::OK();
  }
  if (type == "ByteLevel") {
    pre->byte_level = true;
    bool b = false;
    if (e["use_regex"].get_bool().get(b) == simdjson::SUCCESS) pre->byte_level_regex = b;
    if (e["add_prefix_space"].get_bool().get(b) == simdjson::SUCCESS) pre->byte_level_prefix = b;
    return Status::OK();
  }
  if (type == "Split") {
    std::string_view regex;
    std::string_view behavior;
    bool invert = false;
    if (e["pattern"]["Regex"].get_string().get(regex) != simdjson::SUCCESS) {
      return Status::Unimplemented(
          fmt::format("{}: pre_tokenizer Split without a Regex pattern is not supported", path));
    }
    Optional(e["behavior"].get_string(), &behavior);
    Optional(e["invert"].get_bool(), &invert);
    if (behavior != "Isolated" || invert || !pre->split_regex.empty()) {
      return Status::Unimplemented(
          fmt::format("{}: pre_tokenizer Split with behavior '{}'{} is not supported", path,
                      behavior, invert ? " inverted" : ""));
    }
    pre->split_regex = std::string(regex);
    return Status::OK();
  }
  if (type == "Digits") {
    bool individual = false;
    Optional(e["individual_digits"].get_bool(), &individual);
    if (!individual) {
      return Status::Unimplemented(
          fmt::format("{}: pre_tokenizer Digits without individual_digits is not supported", path));
    }
    pre->digits = true;
    return Status::OK();
  }
  if (type == "Metaspace") {
    std::string_view rep;
    std::string_view scheme = "always";
    bool split = false;
    Optional(e["replacement"].get_string(), &rep);
    Optional(e["prepend_scheme"].get_string(), &scheme);
    Optional(e["split"].get_bool(), &split);
    bool add_prefix = true;
    if (e["add_prefix_space"].get_bool().get(add_prefix) == simdjson::SUCCESS && !add_prefix) {
      scheme = "never";
    }
    if (rep != kSpace || split) {
      return Status::Unimplemented(fmt::format(
          "{}: pre_tokenizer Metaspace with replacement {} and split {} is not supported", path,
          Quote(rep), split));
    }
    pre->metaspace = true;
    pre->metaspace_scheme = std::string(scheme);
    return Status::OK();
  }
  return Status::Unimplemented(
      fmt::format("{}: pre_tokenizer type '{}' is not supported", path, type));
}

// Normalizers: NFC (accepted, not applied), Prepend('▁') and Replace(' ' -> '▁') for the
// SentencePiece style; `spm_prefix` / `spm_replace` record the latter two.
Status ReadNormalizer(const std::string& path, dom::element e, bool* spm_prefix,
                      bool* spm_replace) {
  if (e.is_null()) return Status::OK();
  std::string_view type;
  if (e["type"].get_string().get(type) != simdjson::SUCCESS) {
    return JsonError(path, "normalizer has no type");
  }
  if (type == "Sequence") {
    dom::array list;
    if (e["normalizers"].get_array().get(list) != simdjson::SUCCESS) {
      return JsonError(path, "normalizer Sequence has no normalizers list");
    }
    for (dom::element item : list) {
      KILN_RETURN_IF_ERROR(ReadNormalizer(path, item, spm_prefix, spm_replace));
    }
    return Status::OK();
  }
  if (type == "NFC") return Status::OK();
  if (type == "Prepend") {
    std::string_view s;
    if (e["prepend"].get_string().get(s) == simdjson::SUCCESS && s == kSpace) {
      *spm_prefix = true;
      return Status::OK();
    }
  }
  if (type == "Replace") {
    std::string_view from;
    std::string_view to;
    if (e["pattern"]["String"].get_string().get(from) == simdjson::SUCCESS &&
        e["content"].get_string().get(to) == simdjson::SUCCESS && from == " " && to == kSpace) {
      *spm_replace = true;
      return Status::OK();
    }
  }
  return Status::Unimplemented(
      fmt::format("{}: normalizer '{}' is not supported (supported: NFC, which is not applied; "
                  "Prepend '▁' and Replace ' ' -> '▁')",
                  path, type));
}

// add_bos / add_eos from a TemplateProcessing post-processor's "single" template.
void ReadPostProcessor(dom::element e, bool* add_bos, bool* add_eos) {
  std::string_view type;
  if (e.is_null() || e["type"].get_string().get(type) != simdjson::SUCCESS) return;
  if (type == "Sequence") {
    dom::array list;
    if (e["processors"].get_array().get(list) != simdjson::SUCCESS) return;
    for (dom::element item : list) ReadPostProcessor(item, add_bos, add_eos);
    return;
  }
  if (type != "TemplateProcessing") return;
  dom::array single;
  if (e["single"].get_array().get(single) != simdjson::SUCCESS || single.size() == 0) return;
  dom::element first;
  dom::element last;
  if (single.at(0).get(first) != simdjson::SUCCESS ||
      single.at(single.size() - 1).get(last) != simdjson::SUCCESS) {
    return;
  }
  dom::element unused;
  *add_bos = first["SpecialToken"].get(unused) == simdjson::SUCCESS;
  *add_eos = single.size() > 1 && last["SpecialToken"].get(unused) == simdjson::SUCCESS;
}

}  // namespace

Result<TokenizerSpec> LoadHfTokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return Status::NotFound(fmt::format("{} not found", path));
  }
  simdjson::padded_string json;
  if (const auto err = simdjson::padded_string::load(path).get(json); err != simdjson::SUCCESS) {
    return Status::NotFound(fmt::format("cannot read {}: {}", path, simdjson::error_message(err)));
  }
  dom::parser parser;
  dom::element root;
  if (const auto err = parser.parse(json).get(root); err != simdjson::SUCCESS) {
    return JsonError(path, fmt::format("not valid JSON: {}", simdjson::error_message(err)));
  }
  dom::object model;
  if (root["model"].get_object().get(model) != simdjson::SUCCESS) {
    return JsonError(path, "no \"model\" object");
  }
  std::string_view model_type;
  if (model["type"].get_string().get(model_type) != simdjson::SUCCESS) {
    // Older files omit the type of a BPE model; recognize it by its merges.
    dom::element m;
    if (model["merges"].get(m) != simdjson::SUCCESS) {
      return JsonError(path, "model has no type");
    }
    model_type = "BPE";
  }
  if (model_type != "BPE") {
    return Status::Unimplemented(fmt::format(
        "{}: tokenizer model '{}' is not supported (supported: BPE)", path, model_type));
  }

  // Vocabulary and added tokens.
  dom::object vocab;
  if (model["vocab"].get_object().get(vocab) != simdjson::SUCCESS) {
    return JsonError(path, "model has no vocab object");
  }
  std::vector<std::pair<int64_t, std::string>> entries;
  int64_t max_id = -1;
  for (const auto field : vocab) {
    int64_t id = 0;
    if (field.value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id >= (1 << 30)) {
      return JsonError(path, fmt::format("vocab entry {} has no valid id", Quote(field.key)));
    }
    entries.emplace_back(id, std::string(field.key));
    max_id = std::max(max_id, id);
  }
  struct Added {
    int64_t id;
    std::string text;
    bool special;
  };
  std::vector<Added> added;
  dom::array added_list;
  if (root["added_tokens"].get_array().get(added_list) == simdjson::SUCCESS) {
    for (dom::element a : added_list) {
      int64_t id = 0;
      std::string_view content;
      bool special = false;
      if (a["id"].get_int64().get(id) != simdjson::SUCCESS || id < 0 || id >= (1 << 30) ||
          a["content"].get_string().get(content) != simdjson::SUCCESS) {
        return JsonError(path, "an added_tokens entry has no valid id or content");
      }
      Optional(a["special"].get_bool(), &special);
      added.push_back({id, std::string(content), special});
      max_id = std::max(max_id, id);
    }
  }
  if (max_id < 0) return JsonError(path, "vocabulary is empty");

  TokenizerSpec spec;
  const size_t n = static_cast<size_t>(max_id) + 1;
  spec.tokens.assign(n, std::string());
  std::vector<uint8_t> present(n, 0);
  for (auto& [id, text] : entries) {
    spec.tokens[id] = std::move(text);
    present[id] = 1;
  }
  spec.token_types.assign(n, static_cast<int32_t>(TokenType::kNormal));
  for (const Added& a : added) {
    if (present[a.id] == 1 && spec.tokens[a.id] != a.text) {
      return JsonError(path, fmt::format("added token {} has id {}, which is {}", Quote(a.text),
                                         a.id, Quote(spec.tokens[a.id])));
    }
    spec.tokens[a.id] = a.text;
    present[a.id] = 2;
    spec.token_types[a.id] = static_cast<int32_t>(
        a.special || LooksSpecial(a.text) ? TokenType::kControl : TokenType::kUserDefined);
  }
  for (size_t i = 0; i < n; ++i) {
    if (present[i] == 0) {  // a hole in the ids, as the GGUF converter pads
      spec.tokens[i] = fmt::format("[PAD{}]", i);
      spec.token_types[i] = static_cast<int32_t>(TokenType::kUnused);
    }
  }

  // Merges.
  dom::array merges;
  if (model["merges"].get_array().get(merges) != simdjson::SUCCESS) {
    return JsonError(path, "model has no merges list");
  }
  spec.merges.reserve(merges.size());
  for (dom::element m : merges) {
    std::string_view s;
    dom::array pair;
    if (m.get_string().get(s) == simdjson::SUCCESS) {
      spec.merges.emplace_back(s);
    } else if (m.get_array().get(pair) == simdjson::SUCCESS && pair.size() == 2) {
      std::string_view a;
      std::string_view b;
      if (pair.at(0).get_string().get(a) != simdjson::SUCCESS ||
          pair.at(1).get_string().get(b) != simdjson::SUCCESS) {
        return JsonError(path, "a merge is not a pair of strings");
      }
      spec.merges.push_back(fmt::format("{} {}", a, b));
    } else {
      return JsonError(path, "a merge is neither \"a b\" nor [a, b]");
    }
  }

  // Model kind.
  HfPre pre;
  dom::element field;
  if (root["pre_tokenizer"].get(field) == simdjson::SUCCESS) {
    KILN_RETURN_IF_ERROR(ReadPreTokenizer(path, field, &pre));
  }
  bool spm_prefix = false;
  bool spm_replace = false;
  if (root["normalizer"].get(field) == simdjson::SUCCESS) {
    KILN_RETURN_IF_ERROR(ReadNormalizer(path, field, &spm_prefix, &spm_replace));
  }
  bool byte_fallback = false;
  Optional(model["byte_fallback"].get_bool(), &byte_fallback);
  bool ignore_merges = false;
  Optional(model["ignore_merges"].get_bool(), &ignore_merges);
  std::string_view unk_text;
  Optional(model["unk_token"].get_string(), &unk_text);

  if (pre.byte_level) {
    spec.model = TokenizerSpec::Model::kBpe;
    if (pre.byte_level_prefix) {
      return Status::Unimplemented(
          fmt::format("{}: ByteLevel with add_prefix_space is not supported", path));
    }
    if (spm_prefix || spm_replace) {
      return Status::Unimplemented(fmt::format(
          "{}: a '▁' normalizer with a ByteLevel pre-tokenizer is not supported", path));
    }
    if (!pre.split_regex.empty()) {
      if (pre.byte_level_regex || pre.digits) {
        return Status::Unimplemented(fmt::format(
            "{}: a Split pre-tokenizer combined with a regex ByteLevel or Digits is not supported",
            path));
      }
      if (pre.split_regex == kLlama3Regex) {
        spec.pre = "llama3";
      } else if (pre.split_regex == kQwen2Regex) {
        spec.pre = "qwen2";
      } else if (pre.split_regex == kGpt2Regex) {
        spec.pre = "gpt2";
      } else {
        return Status::Unimplemented(fmt::format(
            "{}: pre-tokenizer regex {} is not supported (supported: the Llama 3, Qwen2 and "
            "GPT-2 regexes)",
            path, Quote(pre.split_regex)));
      }
    } else if (pre.byte_level_regex) {
      spec.pre = pre.digits ? "smollm" : "gpt2";
    } else {
      return Status::Unimplemented(
          fmt::format("{}: ByteLevel without a splitting regex is not supported", path));
    }
    spec.ignore_merges = ignore_merges;
  } else if (pre.metaspace && pre.metaspace_scheme != "always") {
    return Status::Unimplemented(
        fmt::format("{}: Metaspace prepend_scheme '{}' is not supported (supported: 'always')",
                    path, pre.metaspace_scheme));
  } else if (byte_fallback && ((spm_prefix && spm_replace) || pre.metaspace)) {
    spec.model = TokenizerSpec::Model::kSpm;
    spec.add_space_prefix = true;
    // Scores from merge ranks: a token made by merge r scores -r; the first merge producing a
    // token sets its score. Other tokens (single characters, bytes, specials) score 0 unless
    // longer than one character, then lowest.
    std::unordered_map<std::string_view, int32_t> index;
    index.reserve(n);
    for (size_t i = 0; i < n; ++i) index.emplace(spec.tokens[i], static_cast<int32_t>(i));
    spec.scores.assign(n, 0.0f);
    std::vector<uint8_t> scored(n, 0);
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const std::string& m = spec.merges[r];
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) continue;
      const std::string joined = m.substr(0, sp) + m.substr(sp + 1);
      const auto it = index.find(joined);
      if (it == index.end() || scored[it->second]) continue;
      spec.scores[it->second] = -static_cast<float>(r);
      scored[it->second] = 1;
    }
    for (size_t i = 0; i < n; ++i) {
      const TokenType t = static_cast<TokenType>(spec.token_types[i]);
      if (ParseByteToken(spec.tokens[i]) >= 0 && t == TokenType::kNormal) {
        spec.token_types[i] = static_cast<int32_t>(TokenType::kByte);
      } else if (!scored[i] && t == TokenType::kNormal) {
        size_t pos = 0;
        char32_t cp = 0;
        const bool one_char = DecodeUtf8(spec.tokens[i], &pos, &cp) && pos == spec.tokens[i].size();
        if (!one_char) spec.scores[i] = -1e30f;
      }
    }
    spec.merges.clear();
  } else {
    return Status::Unimplemented(fmt::format(
        "{}: BPE tokenizer without a ByteLevel pre-tokenizer or SentencePiece-style '▁' with "
        "byte_fallback is not supported",
        path));
  }

  const auto find = [&](std::string_view text) -> int32_t {
    if (text.empty()) return -1;
    for (size_t i = 0; i < n; ++i) {
      if (spec.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return -1;
  };
  if (!unk_text.empty()) {
    spec.unk_id = find(unk_text);
    if (spec.unk_id >= 0 && spec.model == TokenizerSpec::Model::kSpm) {
      spec.token_types[spec.unk_id] = static_cast<int32_t>(TokenType::kUnknown);
    }
  }

  // tokenizer_config.json.
  bool add_bos = false;
  bool add_eos = false;
  if (root["post_processor"].get(field) == simdjson::SUCCESS) {
    ReadPostProcessor(field, &add_bos, &add_eos);
  }
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  simdjson::padded_string config_json;
  dom::parser config_parser;
  dom::element config;
  if (fs::is_regular_file(config_path, ec)) {
    KILN_RETURN_IF_ERROR(ParseJsonFile(config_path, &config_json, &config_parser, &config));
    bool b = false;
    if (config["add_bos_token"].get_bool().get(b) == simdjson::SUCCESS) add_bos = b;
    if (config["add_eos_token"].get_bool().get(b) == simdjson::SUCCESS) add_eos = b;
    const std::pair<const char*, int32_t*> specials[] = {{"bos_token", &spec.bos_id},
                                                         {"eos_token", &spec.eos_id},
                                                         {"unk_token", &spec.unk_id},
                                                         {"pad_token", &spec.pad_id}};
    for (const auto& [key, id] : specials) {
      dom::element e;
      if (config[key].get(e) != simdjson::SUCCESS || e.is_null()) continue;
      const std::string text = SpecialText(e);
      const int32_t found = find(text);
      if (found < 0) {
        return JsonError(config_path,
                         fmt::format("{} {} is not in the vocabulary", key, Quote(text)));
      }
      *id = found;
    }
  }
  spec.add_bos = add_bos && spec.bos_id >= 0;
  spec.add_eos = add_eos && spec.eos_id >= 0;
  AddDefaultEogTokens(&spec);
  return spec;
}

}  // namespace kiln::llm
