// SPDX-License-Identifier: Apache-2.0
#pragma once
// WordPiece (BERT) tokenization from a vocabulary file, as Hugging Face's BertTokenizerFast (and
// transformers.js) compute it, for the kiln_text processing step (docs/text.md):
//
//   // vocab.txt: one token per line, the id is the line number from 0 (the lines as
//   // tensor/classification.h ParseLabelFile reads a label file)
//   KILN_ASSIGN_OR_RETURN(WordPieceTokenizer tok,
//                         WordPieceTokenizer::Create(ParseLabelFile(vocab_txt), {}));
//   KILN_ASSIGN_OR_RETURN(WordPieceEncoding e, tok.Encode("Hello, world!", std::nullopt, 128));
//   // e.ids {101, 7592, 1010, 2088, 999, 102} with bert-base-uncased's vocabulary
//
// The steps, in order:
//   1. special tokens: occurrences of the special tokens ([UNK], [CLS], [SEP], [PAD], [MASK] by
//      default, those the vocabulary has) in the raw text are taken as those tokens, leftmost and
//      longest first; the text between them goes through 2-5 on its own;
//   2. clean: U+0000, U+FFFD and control code points (categories Cc, Cf, Co, Cs, except tab, line
//      feed and carriage return) are removed; whitespace (White_Space) becomes a space;
//   3. CJK ideographs (the BERT ranges, astral planes included) get a space on either side;
//   4. with `lowercase`: the full lowercase mapping (text/unicode.h ToLower); then with
//      `strip_accents` (default: as `lowercase`): NFD, and nonspacing marks (Mn) removed;
//   5. pre-tokenize: split at whitespace, and every punctuation code point (\p{P}, and the ASCII
//      symbols ! through /, : through @, [ through `, { through ~) is a word of its own;
//   6. each word becomes word pieces by greedy longest match from its start, continuations with
//      the "##" prefix; a word with a code point sequence no piece matches, or longer than
//      `max_input_chars_per_word` code points, becomes [UNK] as a whole.
// Encode adds [CLS] A [SEP] (and B [SEP] for a pair, token type 1) and truncates to max_length
// first: a single text keeps its first max_length - 2 tokens; a pair shares L = max_length - 3
// longest first, as Hugging Face's Rust tokenizers cut it: when the shorter fits in half of L
// it stays whole and the longer keeps L minus it, otherwise each keeps L / 2, the longer (the
// second when they are equal) one more when L is odd.
//
// Thread safety: a tokenizer is immutable after Create; its methods may be called from any
// number of threads.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace kiln::text {

struct WordPieceOptions {
  bool lowercase = true;
  std::optional<bool> strip_accents;  // unset: the same as `lowercase`
  bool handle_chinese_chars = true;
  int max_input_chars_per_word = 100;
  std::string continuing_subword_prefix = "##";
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string mask_token = "[MASK]";  // optional: used only when the vocabulary has it
};

struct WordPieceEncoding {
  std::vector<int64_t> ids;       // [CLS] A [SEP] (B [SEP])
  std::vector<int64_t> type_ids;  // 0 for [CLS] A [SEP], 1 for B [SEP]
};

class WordPieceTokenizer {
 public:
  // INVALID_ARGUMENT for an empty vocabulary, a token that is not valid UTF-8 (naming its line),
  // an unknown, CLS, SEP or PAD token missing from it (named), or max_input_chars_per_word < 1.
  // A token listed twice keeps its last id, as the reference's vocab.txt loader does.
  static Result<WordPieceTokenizer> Create(std::vector<std::string> vocabulary,
                                           WordPieceOptions options);

  // The word-piece ids of one text, no special tokens added. INVALID_ARGUMENT for a text that is
  // not valid UTF-8 (naming the byte offset).
  Result<std::vector<int64_t>> Tokenize(std::string_view text) const;

  // The model input of a text (and a second one, for pair tasks), truncated to max_length ids
  // (see the file comment). INVALID_ARGUMENT for invalid UTF-8, or max_length below the number of
  // special tokens added (2, or 3 with a pair).
  Result<WordPieceEncoding> Encode(std::string_view text, std::optional<std::string_view> pair,
                                   int64_t max_length) const;

  int64_t pad_id() const { return pad_id_; }
  int64_t vocabulary_size() const { return static_cast<int64_t>(tokens_.size()); }
  // The token of an id. REQUIRES: 0 <= id < vocabulary_size().
  const std::string& token(int64_t id) const { return tokens_[static_cast<size_t>(id)]; }

 private:
  WordPieceTokenizer() = default;
  // Steps 2-6 of the file comment on a text without special tokens.
  void TokenizeSection(std::u32string_view section, std::vector<int64_t>* out) const;
  void TokenizeWord(std::u32string_view word, std::vector<int64_t>* out) const;

  WordPieceOptions options_;
  bool strip_accents_ = true;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  // The special tokens matched in raw text: (code points, id), longest first.
  std::vector<std::pair<std::u32string, int64_t>> specials_;
  int64_t unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, pad_id_ = 0;
};

}  // namespace kiln::text
