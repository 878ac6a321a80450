// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as the texts of a kiln_text request. The first byte splits
// the input into a text and its pair; both go through WordPiece tokenization (text/wordpiece.h)
// on a small vocabulary, uncased and cased. Encoding must return ids or an INVALID_ARGUMENT
// naming the bad byte, never crash; every id must be inside the vocabulary and rows must keep
// [CLS] and [SEP] within max_length. Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/wordpiece.h"

namespace {

const kiln::text::WordPieceTokenizer& Tokenizer(bool lowercase) {
  static const std::vector<std::string> vocab = {
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a", "b", "##b",
      "ab",    "中",    "!",     "é",     "##é",    "σ", "ς",   "i", "##\xCC\x87"};
  auto make = [](bool lower) {
    kiln::text::WordPieceOptions o;
    o.lowercase = lower;
    o.max_input_chars_per_word = 20;
    auto t = kiln::text::WordPieceTokenizer::Create(vocab, o);
    if (!t.ok()) std::abort();
    return std::move(t).value();
  };
  static const kiln::text::WordPieceTokenizer uncased = make(true);
  static const kiln::text::WordPieceTokenizer cased = make(false);
  return lowercase ? uncased : cased;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t split = std::min<size_t>(data[0], all.size());
  const std::string_view text = all.substr(0, split);
  const std::string_view pair = all.substr(split);
  for (bool lowercase : {true, false}) {
    const auto& tok = Tokenizer(lowercase);
    for (int64_t max_length : {3, 16}) {
      auto e = tok.Encode(text, data[0] & 1 ? std::optional<std::string_view>(pair) : std::nullopt,
                          max_length);
      if (!e.ok()) continue;
      if (e->ids.size() > static_cast<size_t>(max_length) || e->ids.size() != e->type_ids.size() ||
          e->ids.front() != 2 || e->ids.back() != 3) {
        std::abort();
      }
      for (int64_t id : e->ids) {
        if (id < 0 || id >= tok.vocabulary_size()) std::abort();
      }
    }
  }
  return 0;
}
