// SPDX-License-Identifier: Apache-2.0
#pragma once
// JsonWriter: a small streaming JSON writer that appends to a std::string. The protocol front
// ends build every JSON body with it (responses, error bodies), so escaping and number formatting
// live in one place.
//
//   std::string body;
//   JsonWriter w(&body);
//   w.BeginObject();
//   w.Key("name"); w.String("kiln");
//   w.Key("shape"); w.BeginArray(); w.Int(2); w.Int(16); w.EndArray();
//   w.EndObject();                                  // {"name":"kiln","shape":[2,16]}
//
// Output is always valid JSON (RFC 8259), whatever bytes it is given:
//   * Strings: '"', '\\' and control characters below 0x20 are escaped (\n, \t, ... or \u00XX);
//     invalid UTF-8 (stray continuation bytes, overlong forms, surrogates, code points above
//     U+10FFFF, truncated sequences) is replaced by U+FFFD, one per maximal invalid subpart.
//     Valid UTF-8 passes through unchanged.
//   * Integers are written exactly.
//   * float / double use the shortest text that reads back to the same value (std::to_chars);
//     a value that would print as an integer gets ".0" appended ("1.0", "-0.0") so it reads
//     back as a floating-point number in every client.
//   * NaN and infinities have no JSON number form. They are written as the strings "NaN",
//     "Infinity" and "-Infinity": valid JSON for every parser, lossless, and numpy converts
//     them back (np.array(["NaN", "Infinity"], dtype=np.float32) gives [nan, inf]), which is
//     what tritonclient's as_numpy() does with the "data" list. The request parser accepts the
//     same three strings for FP32/FP64 inputs so values round-trip.
//
// Misuse (a value in an object without a key, unbalanced End*) is a bug: KILN_DCHECK.
//
// Thread safety: none; one writer per thread. The target string must outlive the writer.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class JsonWriter {
 public:
  // Appends to *out (existing contents are kept). REQUIRES: out != nullptr.
  explicit JsonWriter(std::string* out);
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // Member name; the next call writes its value. REQUIRES: inside an object.
  void Key(std::string_view key);

  void String(std::string_view value);
  void Bool(bool value);
  void Null();
  void Int(int64_t value);
  void Uint(uint64_t value);
  void Double(double value);
  void Float(float value);

  // Convenience for objects: Key(key) then the value.
  void KeyString(std::string_view key, std::string_view value) {
    Key(key);
    String(value);
  }
  void KeyInt(std::string_view key, int64_t value) {
    Key(key);
    Int(value);
  }

  // True once one complete top-level value has been written.
  bool complete() const { return stack_.empty() && wrote_top_level_; }

 private:
  enum class Scope : uint8_t { kArrayFirst, kArray, kObjectFirst, kObject };
  // Writes the separator a new value needs and updates the scope state.
  void BeforeValue();

  std::string* out_;
  std::vector<Scope> stack_;
  bool after_key_ = false;
  bool wrote_top_level_ = false;
};

// Appends `value` as a quoted, escaped JSON string (the rules above).
void AppendJsonString(std::string* out, std::string_view value);
// Appends a JSON number (or "NaN"/"Infinity"/"-Infinity" string) for `value`.
void AppendJsonDouble(std::string* out, double value);
void AppendJsonFloat(std::string* out, float value);

// {"error":"<message>"}: the error body of every failing REST endpoint (KSERVE-V2.md 1.1).
std::string JsonErrorBody(std::string_view message);

}  // namespace kiln
