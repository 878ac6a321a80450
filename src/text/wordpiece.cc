// SPDX-License-Identifier: Apache-2.0
#include "text/wordpiece.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "text/unicode.h"

namespace kiln::text {
namespace {

// Removed by cleaning: NUL, U+FFFD and the control categories (tab, LF and CR are whitespace).
bool IsRemovedControl(char32_t cp) {
  if (cp == 0 || cp == 0xFFFD) return true;
  if (cp == U'\t' || cp == U'\n' || cp == U'\r') return false;
  if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
  const GeneralCategory c = CategoryOf(cp);
  return c == GeneralCategory::kCc || c == GeneralCategory::kCf || c == GeneralCategory::kCo ||
         c == GeneralCategory::kCs;
}

// BERT's CJK ideograph ranges.
bool IsChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// BERT's punctuation: \p{P} and the ASCII symbols.
bool IsBertPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return IsPunctuation(cp);
}

}  // namespace

Result<WordPieceTokenizer> WordPieceTokenizer::Create(std::vector<std::string> vocabulary,
                                                      WordPieceOptions options) {
  if (vocabulary.empty()) return Status::InvalidArgument("the vocabulary is empty");
  if (options.max_input_chars_per_word < 1) {
    return Status::InvalidArgument(fmt::format("max_input_chars_per_word is {}; it must be >= 1",
                                               options.max_input_chars_per_word));
  }
  WordPieceTokenizer t;
  t.ids_.reserve(vocabulary.size());
  for (size_t i = 0; i < vocabulary.size(); ++i) {
    if (FindInvalidUtf8(vocabulary[i]) != std::string_view::npos) {
      return Status::InvalidArgument(
          fmt::format("vocabulary line {}: the token is not valid UTF-8", i + 1));
    }
    t.ids_[vocabulary[i]] = static_cast<int64_t>(i);
  }
  auto special = [&](const std::string& token, std::string_view role, int64_t* id) -> Status {
    auto it = t.ids_.find(token);
    if (it == t.ids_.end()) {
      return Status::InvalidArgument(
          fmt::format("the vocabulary has no {} token '{}'", role, token));
    }
    *id = it->second;
    return Status::OK();
  };
  KILN_RETURN_IF_ERROR(special(options.unk_token, "unknown", &t.unk_id_));
  KILN_RETURN_IF_ERROR(special(options.cls_token, "CLS", &t.cls_id_));
  KILN_RETURN_IF_ERROR(special(options.sep_token, "SEP", &t.sep_id_));
  KILN_RETURN_IF_ERROR(special(options.pad_token, "PAD", &t.pad_id_));
  for (const std::string* s : {&options.pad_token, &options.unk_token, &options.cls_token,
                               &options.sep_token, &options.mask_token}) {
    auto it = t.ids_.find(*s);
    if (it == t.ids_.end() || s->empty()) continue;
    std::u32string cps;
    DecodeUtf8String(*s, &cps);
    if (std::none_of(t.specials_.begin(), t.specials_.end(),
                     [&](const auto& sp) { return sp.first == cps; })) {
      t.specials_.emplace_back(std::move(cps), it->second);
    }
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t.strip_accents_ = options.strip_accents.value_or(options.lowercase);
  t.options_ = std::move(options);
  t.tokens_ = std::move(vocabulary);
  return t;
}

void WordPieceTokenizer::TokenizeWord(std::u32string_view word, std::vector<int64_t>* out) const {
  if (word.size() > static_cast<size_t>(options_.max_input_chars_per_word)) {
    out->push_back(unk_id_);
    return;
  }
  const size_t mark = out->size();
  std::string piece;
  size_t start = 0;
  while (start < word.size()) {
    size_t end = word.size();
    int64_t found = -1;
    while (start < end) {
      piece.clear();
      if (start > 0) piece = options_.continuing_subword_prefix;
      for (size_t i = start; i < end; ++i) AppendUtf8(word[i], &piece);
      if (auto it = ids_.find(piece); it != ids_.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (found < 0) {  // no piece matches: the whole word is unknown
      out->resize(mark);
      out->push_back(unk_id_);
      return;
    }
    out->push_back(found);
    start = end;
  }
}

void WordPieceTokenizer::TokenizeSection(std::u32string_view section,
                                         std::vector<int64_t>* out) const {
  // Clean, and space out CJK ideographs.
  std::u32string text;
  text.reserve(section.size());
  for (char32_t cp : section) {
    if (IsRemovedControl(cp)) continue;
    if (IsWhitespace(cp)) {
      text.push_back(U' ');
    } else if (options_.handle_chinese_chars && IsChineseChar(cp)) {
      text.push_back(U' ');
      text.push_back(cp);
      text.push_back(U' ');
    } else {
      text.push_back(cp);
    }
  }
  if (options_.lowercase) text = ToLower(text);
  if (strip_accents_) {
    std::u32string nfd = ToNfd(text);
    text.clear();
    for (char32_t cp : nfd) {
      if (CategoryOf(cp) != GeneralCategory::kMn) text.push_back(cp);
    }
  }
  // Pre-tokenize and split into pieces.
  size_t i = 0;
  while (i < text.size()) {
    if (IsWhitespace(text[i])) {
      ++i;
    } else if (IsBertPunctuation(text[i])) {
      TokenizeWord(std::u32string_view(text).substr(i, 1), out);
      ++i;
    } else {
      size_t j = i;
      while (j < text.size() && !IsWhitespace(text[j]) && !IsBertPunctuation(text[j])) ++j;
      TokenizeWord(std::u32string_view(text).substr(i, j - i), out);
      i = j;
    }
  }
}

Result<std::vector<int64_t>> WordPieceTokenizer::Tokenize(std::string_view text) const {
  std::u32string cps;
  size_t bad = 0;
  if (!DecodeUtf8String(text, &cps, &bad)) {
    return Status::InvalidArgument(
        fmt::format("the text is not valid UTF-8 (byte offset {})", bad));
  }
  std::vector<int64_t> out;
  const std::u32string_view all(cps);
  size_t start = 0;  // the section since the last special token
  size_t i = 0;
  while (i < all.size()) {
    const std::pair<std::u32string, int64_t>* match = nullptr;
    for (const auto& sp : specials_) {  // longest first
      if (all.substr(i, sp.first.size()) == sp.first) {
        match = &sp;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > start) TokenizeSection(all.substr(start, i - start), &out);
    out.push_back(match->second);
    i += match->first.size();
    start = i;
  }
  if (start < all.size()) TokenizeSection(all.substr(start), &out);
  return out;
}

Result<WordPieceEncoding> WordPieceTokenizer::Encode(std::string_view text,
                                                     std::optional<std::string_view> pair,
                                                     int64_t max_length) const {
  const int64_t added = pair.has_value() ? 3 : 2;
  if (max_length < added) {
    return Status::InvalidArgument(
        fmt::format("max_length {} leaves no room for the {} special tokens", max_length, added));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> a, Tokenize(text));
  std::vector<int64_t> b;
  if (pair.has_value()) {
    KILN_ASSIGN_OR_RETURN(b, Tokenize(*pair));
  }
  const size_t budget = static_cast<size_t>(max_length - added);
  if (!pair.has_value()) {
    if (a.size() > budget) a.resize(budget);
  } else if (a.size() + b.size() > budget) {
    // Hugging Face's LongestFirst: n1 the shorter, n2 the longer.
    const bool swapped = a.size() > b.size();
    size_t n1 = std::min(a.size(), b.size());
    size_t n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
    if (n1 + n2 > budget) {
      n1 = budget / 2;
      n2 = n1 + budget % 2;
    }
    if (swapped) std::swap(n1, n2);
    a.resize(std::min(a.size(), n1));
    b.resize(std::min(b.size(), n2));
  }
  WordPieceEncoding e;
  e.ids.reserve(a.size() + b.size() + static_cast<size_t>(added));
  e.ids.push_back(cls_id_);
  e.ids.insert(e.ids.end(), a.begin(), a.end());
  e.ids.push_back(sep_id_);
  e.type_ids.assign(e.ids.size(), 0);
  if (pair.has_value()) {
    e.ids.insert(e.ids.end(), b.begin(), b.end());
    e.ids.push_back(sep_id_);
    e.type_ids.resize(e.ids.size(), 1);
  }
  return e;
}

}  // namespace kiln::text
