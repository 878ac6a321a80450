// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tokenizers of the generative models: text <-> token ids for the two vocabulary kinds GGUF
// files carry, built from GGUF's tokenizer.ggml.* metadata (TokenizerSpec) or from a Hugging
// Face tokenizer.json (LoadHfTokenizer).
//
//   TokenizerSpec spec = ...;                        // from GGUF metadata or LoadHfTokenizer
//   KILN_ASSIGN_OR_RETURN(auto tok, Tokenizer::Create(std::move(spec)));
//   KILN_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
//                         tok->Encode(prompt, /*add_special=*/true, /*parse_special=*/true));
//   IncrementalDetokenizer detok(*tok);
//   for (int32_t id : generated) std::cout << detok.Push(id);
//   std::cout << detok.Flush();
//
// The models:
// - kSpm (GGUF "llama"; Llama 2, Mistral, TinyLlama): SentencePiece BPE as llama.cpp's
//   llm_tokenizer_spm runs it. Spaces become U+2581 '▁', a '▁' is prepended to each piece of
//   text (at the start and after each special token) when add_space_prefix, the text is split
//   into characters, and the adjacent pair whose concatenation is a token with the highest score
//   is merged (ties: leftmost) until none is left. A character that is no token becomes its
//   UTF-8 bytes as <0xNN> byte tokens (byte fallback), else the unknown token.
// - kBpe (GGUF "gpt2"; Llama 3, Qwen2, SmolLM, GPT-2): byte-level BPE. The text is split by the
//   pre-tokenizer named by `pre` (llama.cpp's regexes, matched by hand over code points), each
//   word's bytes are mapped through GPT-2's byte-to-unicode table, and the adjacent pair with
//   the lowest merge rank is merged until none is left.
// Before either, special tokens are split out of the text: user-defined tokens always, control
// and unknown tokens when parse_special (llama.cpp's rule); at each position the longest
// special token text starting there wins.
//
// Differences from Hugging Face's tokenizers, all shared with llama.cpp: no Unicode normalization
// (Qwen2's tokenizer.json asks for NFC); the case-insensitive contractions of the Llama 3 / Qwen2
// regexes fold ASCII letters only (HF also matches "'ſ" as "'s"); control tokens in text are
// parsed only when asked (HF always splits added tokens out); decoding never applies
// clean_up_tokenization_spaces. Letter and number classes follow the Unicode version of
// text/unicode.h's table, so code points assigned after it are "other".
//
// Thread safety: a Tokenizer is immutable after Create; all its methods are const and may be
// called concurrently. An IncrementalDetokenizer is a single-threaded stream object.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace kiln::llm {

// GGUF's tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,  // treated as normal
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// A vocabulary and its settings: the fields of GGUF's tokenizer.ggml.* keys.
struct TokenizerSpec {
  enum class Model {
    kSpm,  // GGUF "llama": SentencePiece BPE with scores and byte fallback
    kBpe,  // GGUF "gpt2": byte-level BPE with merges
  };
  Model model = Model::kSpm;
  // Pre-tokenizer (kBpe only; ignored for kSpm): llama.cpp's tokenizer.ggml.pre names.
  // SupportedPreTokenizers() lists the accepted ones.
  std::string pre = "default";
  std::vector<std::string> tokens;   // token texts in id order (tokenizer.ggml.tokens)
  std::vector<float> scores;         // per token (kSpm merge priority), or empty (all 0)
  std::vector<int32_t> token_types;  // TokenType per token, or empty (inferred, see Create)
  std::vector<std::string> merges;   // kBpe: "left right" in rank order
  int32_t bos_id = -1;               // -1: none
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> eog_ids;  // end-of-generation tokens besides eos_id
  bool add_bos = false;          // Encode(add_special) prepends BOS
  bool add_eos = false;          // Encode(add_special) appends EOS
  bool add_space_prefix = true;  // kSpm: prepend '▁' to each piece of text
  // kBpe: a word that is a token as a whole is that token, without merging (llama.cpp sets it
  // for the llama3 family, HF's "ignore_merges"). Create sets it for the llama3 family names.
  bool ignore_merges = false;
};

// The pre-tokenizer names Create accepts for kBpe, comma-separated.
std::string_view SupportedPreTokenizers();

// The words byte-level BPE pre-tokenizer `pre` splits `text` into (views into text), as
// Tokenizer::Encode does for each piece of text between special tokens. Exposed for tests and
// tools. Errors: InvalidArgument for an unknown name (the message lists the supported ones) or
// text that is not valid UTF-8.
Result<std::vector<std::string_view>> PreTokenize(std::string_view pre, std::string_view text);

// Adds to spec->eog_ids the end-of-turn tokens llama.cpp recognizes by text when the vocabulary
// has them as control tokens or as the EOS ("<|eot_id|>", "<|im_end|>", "<|endoftext|>",
// "<|end_of_text|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<EOT>"), without duplicates.
void AddDefaultEogTokens(TokenizerSpec* spec);

class Tokenizer {
 public:
  // Validates the spec and builds the lookup tables. Errors (InvalidArgument, naming the item):
  // no tokens; scores or token_types of the wrong length; a token type outside 0..6; a special
  // id out of range; add_bos/add_eos without that token; a kBpe merge without a space or whose
  // parts or result are not tokens; an unknown pre-tokenizer name (the message lists the
  // supported ones). When token_types is empty the types are inferred: "<0xNN>" tokens are byte
  // tokens (kSpm), unk_id unknown, bos/eos/pad control, the rest normal. A text that occurs
  // twice maps to its first id.
  static Result<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  // Text -> ids. add_special: prepend BOS / append EOS as the spec's add_bos / add_eos say.
  // parse_special: control and unknown token texts in `text` become those tokens (user-defined
  // tokens always do). Errors: InvalidArgument when text is not valid UTF-8, naming the byte
  // offset of the first invalid byte, or longer than 1 GiB.
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const;

  // The bytes token `id` contributes to text: byte tokens <0xAB> -> that byte; kSpm normal
  // tokens with '▁' -> ' '; kBpe normal tokens through the byte-to-unicode table reversed;
  // user-defined tokens -> their text; control, unknown and unused tokens -> their text when
  // render_special, else nothing. An id out of range -> nothing.
  std::string TokenBytes(int32_t id, bool render_special = true) const;

  // Ids -> text: the concatenated TokenBytes (special tokens skipped when skip_special), with
  // invalid UTF-8 replaced by U+FFFD. kSpm with add_space_prefix: one leading space of the
  // result is removed (Hugging Face's Strip decoder), so Decode(Encode(x)) == x for valid x when
  // no special tokens are added. Errors: InvalidArgument for an id out of range.
  Result<std::string> Decode(std::span<const int32_t> ids, bool skip_special) const;

  int32_t vocab_size() const { return static_cast<int32_t>(spec_.tokens.size()); }
  int32_t bos_id() const { return spec_.bos_id; }
  int32_t eos_id() const { return spec_.eos_id; }
  int32_t unk_id() const { return spec_.unk_id; }
  int32_t pad_id() const { return spec_.pad_id; }
  bool add_bos() const { return spec_.add_bos; }
  bool add_eos() const { return spec_.add_eos; }
  TokenizerSpec::Model model() const { return spec_.model; }
  // kSpm with add_space_prefix: decoding drops one leading space.
  bool strips_leading_space() const {
    return spec_.model == TokenizerSpec::Model::kSpm && spec_.add_space_prefix;
  }
  // EOS, one of the spec's eog_ids, or an end-of-turn token AddDefaultEogTokens recognizes (Create
  // applies it, as llama.cpp does at load). False for ids out of range.
  bool IsEog(int32_t id) const;
  // Control-type token (also false for ids out of range).
  bool IsControl(int32_t id) const;
  TokenType Type(int32_t id) const;
  // The token's text as stored in the vocabulary; empty for ids out of range.
  std::string_view Piece(int32_t id) const;
  // The id of a token text, or -1.
  int32_t Find(std::string_view text) const;

 private:
  struct Fragment {
    bool is_token;
    int32_t id;
    std::string_view text;
  };
  struct MergeResult {
    int32_t rank;
    int32_t id;
  };

  Tokenizer() = default;
  Status Init();
  void SplitSpecial(std::string_view text, bool parse_special, std::vector<Fragment>* out) const;
  void EncodeSpm(std::string_view text, bool space_prefix, std::vector<int32_t>* out) const;
  void EncodeBpeText(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const;

  TokenizerSpec spec_;
  int pre_kind_ = 0;  // kBpe: which pre-tokenizer (tokenizer.cc's PreName table)
  std::unordered_map<std::string_view, int32_t> ids_;  // views into spec_.tokens
  std::vector<std::string> bytes_;                     // TokenBytes of each token, rendered
  std::vector<uint8_t> eog_;                           // per token
  int32_t byte_ids_[256] = {};                         // byte -> token, -1 if none
  std::unordered_map<uint64_t, MergeResult> merges_;   // (left << 32 | right) -> result
  // Special token ids whose text starts with each byte, longest text first.
  std::vector<int32_t> special_by_byte_[256];
};

// Streams generated ids into text that is always complete UTF-8: bytes of a character split
// across tokens are held until it completes; bytes that cannot complete a character become one
// U+FFFD each maximal invalid subpart as soon as that is certain.
//
// Lifetime: `tokenizer` must outlive this object. Not thread-safe (one stream, one thread).
class IncrementalDetokenizer {
 public:
  // skip_special: control/unknown/unused tokens contribute nothing. strip_leading_space: drop one
  // space at the very start of the stream, as Decode does for kSpm (off by default: a
  // continuation of a prompt keeps its first space).
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true,
                                  bool strip_leading_space = false);
  // Adds one token; returns the text that became complete (possibly empty). An id out of range
  // contributes nothing.
  std::string Push(int32_t id);
  // Ends the stream: returns held bytes, an incomplete character as U+FFFD. The object may then
  // be reused for a new stream (the leading-space rule applies again).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool strip_leading_space_;
  bool at_start_ = true;
  std::string pending_;
};

// Reads a Hugging Face tokenizer directory: tokenizer.json (model "BPE") and, when present,
// tokenizer_config.json (add_bos_token, add_eos_token, bos/eos/unk/pad tokens). Byte-level BPE
// (a ByteLevel pre-tokenizer, with the pre-tokenizer recognized from its Split regex or Digits
// step) -> kBpe. SentencePiece-style BPE with byte_fallback and '▁' (a Prepend + Replace
// normalizer or a Metaspace pre-tokenizer prepending always) -> kSpm with scores derived from
// the merge ranks (score = -(rank of the first merge producing the token)), which reproduces the
// merge order of vocabularies converted from SentencePiece. Added tokens are control when
// special (or looking like "<|...|>"), else user-defined; eog_ids as AddDefaultEogTokens.
// Without add_bos_token in the config, add_bos/add_eos follow a TemplateProcessing
// post-processor. Errors: NotFound for a missing tokenizer.json, InvalidArgument for malformed
// JSON or fields, Unimplemented for a model, normalizer or pre-tokenizer kiln does not support
// (named in the message).
Result<TokenizerSpec> LoadHfTokenizer(const std::string& dir);

}  // namespace kiln::llm
