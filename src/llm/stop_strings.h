// SPDX-License-Identifier: Apache-2.0
#pragma once
// StopStringFilter: cuts one choice's detokenized text stream at the first stop string, holding
// back just enough text that no stop string (nor the start of one) is ever released. It sits
// between the IncrementalDetokenizer and the client:
//
//   IncrementalDetokenizer detok(tokenizer);
//   StopStringFilter stops(request.stop);
//   for each sampled token:
//     std::string text = stops.Push(detok.Push(token));   // send `text` (may be empty)
//     if (stops.stopped()) { /* finish: reason "stop", stop_reason stops.matched() */ }
//   at the end of generation (length, end-of-generation token):
//     std::string text = stops.Push(detok.Flush()) + stops.Flush();
//
// NOTE on the design (vLLM's detokenizer holds back the same way).
//  - Push appends the new text to a held-back buffer, then looks for a stop string in it. The
//    earliest match wins: the one that ends first, and among those ending at the same place the
//    one that starts first (the longest). The text before the match is released, stopped()
//    becomes true, and the match and everything after it are dropped (later Push and Flush
//    return nothing).
//  - Without a match, the longest tail of the buffer that is a proper prefix of some stop string
//    is held back and the rest released. Any later match must start inside that tail, so
//    released text never needs taking back; the tail is released as soon as it can no longer
//    begin a match (or by Flush).
//  - Matches and held-back tails start only at UTF-8 character boundaries (never at a
//    continuation byte), so released text splits no character when the input is whole
//    characters. For valid UTF-8 stop strings this changes nothing; a stop string beginning
//    with a continuation byte never matches.
//  - Empty stop strings are ignored (an empty string would match before any text); duplicates
//    are harmless. With no (non-empty) stop string, Push returns its input.
//  - Cost: a stop string is searched only where a match can end in the new text, and the held
//    tail is shorter than the longest stop string, so a Push costs O(new text + held tail) per
//    stop string.
//
// Thread safety: one stream, one thread (not thread-safe).

#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);

  // Feeds new text (whole UTF-8 characters); returns the text that can be released now: all of
  // it except a held-back tail that may still begin a stop string; when a stop string completes,
  // the text before it (and stopped() turns true). After stopped(), returns "".
  std::string Push(std::string_view text);
  // End of generation: returns the held-back tail ("" once stopped).
  std::string Flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched; empty until stopped().
  const std::string& matched() const { return matched_; }
  // Bytes held back now (for tests and stats).
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;  // non-empty
  std::string held_;                // text not yet released: a tail that may begin a stop string
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace kiln::llm
