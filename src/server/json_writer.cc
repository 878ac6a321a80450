// SPDX-License-Identifier: Apache-2.0
// JsonWriter and the escaping / number formatting helpers; see json_writer.h for the rules.
#include "server/json_writer.h"

#include <charconv>
#include <cmath>

#include "base/check.h"

namespace kiln {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting at s[i] (i < n, s[i] >= 0x80), or, when it is
// invalid, 0 with *bad_len set to the length of its maximal invalid subpart (>= 1).
size_t ValidSequenceLength(const unsigned char* s, size_t i, size_t n, size_t* bad_len) {
  const unsigned char c = s[i];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *bad_len = 1;  // continuation byte without a lead, C0/C1 (overlong), F5..FF
    return 0;
  }
  size_t k = 1;
  for (; k < len; ++k) {
    if (i + k >= n) break;
    const unsigned char b = s[i + k];
    if (k == 1 ? (b < lo || b > hi) : !IsContinuation(b)) break;
  }
  if (k == len) return len;
  *bad_len = k;
  return 0;
}

void AppendShortest(std::string* out, const char* begin, const char* end) {
  bool integral = true;
  for (const char* p = begin; p != end; ++p) {
    if (*p != '-' && (*p < '0' || *p > '9')) {
      integral = false;
      break;
    }
  }
  out->append(begin, end);
  if (integral) out->append(".0");
}

template <typename F>
void AppendFloating(std::string* out, F value) {
  if (std::isnan(value)) {
    out->append("\"NaN\"");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);
  KILN_CHECK(res.ec == std::errc(), "to_chars failed for a finite value");
  AppendShortest(out, buf, res.ptr);
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view value) {
  const auto* s = reinterpret_cast<const unsigned char*>(value.data());
  const size_t n = value.size();
  out->reserve(out->size() + n + 2);
  out->push_back('"');
  size_t run_start = 0;  // start of the pending run of bytes copied verbatim
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t bad_len = 0;
      const size_t len = ValidSequenceLength(s, i, n, &bad_len);
      if (len > 0) {
        i += len;
        continue;
      }
      out->append(value.data() + run_start, i - run_start);
      out->append(kReplacement);
      i += bad_len;
      run_start = i;
      continue;
    }
    out->append(value.data() + run_start, i - run_start);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default: {
        const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out->append(esc, sizeof(esc));
      }
    }
    ++i;
    run_start = i;
  }
  out->append(value.data() + run_start, n - run_start);
  out->push_back('"');
}

void AppendJsonDouble(std::string* out, double value) { AppendFloating(out, value); }
void AppendJsonFloat(std::string* out, float value) { AppendFloating(out, value); }

std::string JsonErrorBody(std::string_view message) {
  std::string body;
  body.reserve(message.size() + 16);
  body.append("{\"error\":");
  AppendJsonString(&body, message);
  body.push_back('}');
  return body;
}

JsonWriter::JsonWriter(std::string* out) : out_(out) {
  KILN_CHECK(out != nullptr, "JsonWriter needs a target string");
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    KILN_DCHECK(!wrote_top_level_, "JsonWriter: a second top-level value");
    wrote_top_level_ = true;
    return;
  }
  Scope& scope = stack_.back();
  switch (scope) {
    case Scope::kArrayFirst:
      scope = Scope::kArray;
      break;
    case Scope::kArray:
      out_->push_back(',');
      break;
    case Scope::kObjectFirst:
    case Scope::kObject:
      KILN_DCHECK(after_key_, "JsonWriter: a value inside an object needs Key() first");
      after_key_ = false;
      break;
  }
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_->push_back('{');
  stack_.push_back(Scope::kObjectFirst);
}

void JsonWriter::EndObject() {
  KILN_DCHECK(!stack_.empty() &&
                  (stack_.back() == Scope::kObjectFirst || stack_.back() == Scope::kObject) &&
                  !after_key_,
              "JsonWriter: EndObject() without a matching BeginObject()");
  stack_.pop_back();
  out_->push_back('}');
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_->push_back('[');
  stack_.push_back(Scope::kArrayFirst);
}

void JsonWriter::EndArray() {
  KILN_DCHECK(
      !stack_.empty() && (stack_.back() == Scope::kArrayFirst || stack_.back() == Scope::kArray),
      "JsonWriter: EndArray() without a matching BeginArray()");
  stack_.pop_back();
  out_->push_back(']');
}

void JsonWriter::Key(std::string_view key) {
  KILN_DCHECK(!stack_.empty() &&
                  (stack_.back() == Scope::kObjectFirst || stack_.back() == Scope::kObject) &&
                  !after_key_,
              "JsonWriter: Key() outside an object or twice in a row");
  if (stack_.back() == Scope::kObject) out_->push_back(',');
  stack_.back() = Scope::kObject;
  AppendJsonString(out_, key);
  out_->push_back(':');
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendJsonString(out_, value);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_->append(value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_->append("null");
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);
  out_->append(buf, res.ptr);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);
  out_->append(buf, res.ptr);
}

void JsonWriter::Double(double value) {
  BeforeValue();
  AppendJsonDouble(out_, value);
}

void JsonWriter::Float(float value) {
  BeforeValue();
  AppendJsonFloat(out_, value);
}

}  // namespace kiln
