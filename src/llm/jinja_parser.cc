// SPDX-License-Identifier: Apache-2.0
#include "llm/jinja_parser.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <map>
#include <set>

#include "llm/jinja_eval.h"

namespace kiln::llm::jinja {
namespace {

// Expressions nested deeper than this are refused (Python's own parser gives up near 100-200).
constexpr int kMaxParseDepth = 200;

Status LineError(int line, std::string_view what) {
  return Status::InvalidArgument(fmt::format("chat template line {}: {}", line, what));
}

// --- lexer ------------------------------------------------------------------------------------

enum class Tok : uint8_t {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  int line = 1;
  std::string text;  // data, name, decoded string, operator
  int64_t i = 0;
  double f = 0;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

int CountNewlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Length in bytes of the Python whitespace code point at s[i], or 0.
size_t SpaceAt(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return IsPySpace(c) ? 1 : 0;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (i + n > s.size()) return 0;
  const std::vector<char32_t> cp = DecodeUtf8(s.substr(i, n));
  return cp.size() == 1 && IsPySpace(cp[0]) ? n : 0;
}

size_t SkipSpaces(std::string_view s, size_t i) {
  while (size_t n = SpaceAt(s, i)) i += n;
  return i;
}

bool IsAllSpace(std::string_view s) { return SkipSpaces(s, 0) == s.size(); }

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // Jinja's newline handling: \r\n and \r become \n; one trailing newline is dropped
    // (keep_trailing_newline=False).
    s_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        s_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        s_.push_back(source[i]);
      }
    }
    if (!s_.empty() && s_.back() == '\n') s_.pop_back();
  }

  Result<std::vector<Token>> Run() {
    while (pos_ < s_.size()) {
      KILN_RETURN_IF_ERROR(LexRoot());
    }
    Token eof;
    eof.type = Tok::kEof;
    eof.line = line_;
    out_.push_back(std::move(eof));
    return std::move(out_);
  }

 private:
  bool StartsWith(size_t at, std::string_view what) const {
    return s_.compare(at, what.size(), what) == 0;
  }

  void Emit(Tok type, int line, std::string text = {}) {
    Token t;
    t.type = type;
    t.line = line;
    t.text = std::move(text);
    out_.push_back(std::move(t));
  }

  // Text up to the next tag, then the tag.
  Status LexRoot() {
    size_t q = pos_;
    while (true) {
      q = s_.find('{', q);
      if (q == std::string::npos || q + 1 >= s_.size()) {
        q = std::string::npos;
        break;
      }
      const char k = s_[q + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++q;
    }
    if (q == std::string::npos) {
      Emit(Tok::kData, line_, s_.substr(pos_));
      line_ += CountNewlines(std::string_view(s_).substr(pos_));
      pos_ = s_.size();
      return Status::OK();
    }
    const char kind = s_[q + 1];
    size_t after = q + 2;
    char sign = 0;
    if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];

    // {% raw %} ... {% endraw %}
    size_t raw_end = 0;
    if (kind == '%') {
      size_t j = SkipSpaces(s_, after);
      if (StartsWith(j, "raw")) {
        j = SkipSpaces(s_, j + 3);
        if (StartsWith(j, "-%}")) {
          raw_end = SkipSpaces(s_, j + 3);
        } else if (StartsWith(j, "%}")) {
          raw_end = j + 2;
        }
      }
    }

    std::string_view text = std::string_view(s_).substr(pos_, q - pos_);
    const int text_newlines = CountNewlines(text);
    if (sign == '-') {
      text = PyStrip(text, false, true);
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: drop the spaces between a line start and a block or comment tag.
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() && IsAllSpace(text.substr(l_pos))) {
        text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) Emit(Tok::kData, line_, std::string(text));
    line_ += text_newlines;
    line_starting_ = false;
    const int tag_line = line_;

    if (raw_end != 0) return LexRaw(raw_end, tag_line);
    pos_ = after;
    if (kind == '#') return LexComment(tag_line);
    return LexTag(kind == '%', tag_line);
  }

  Status LexComment(int tag_line) {
    const size_t start = pos_;
    const size_t r = s_.find("#}", start);
    if (r == std::string::npos) {
      return LineError(tag_line, "unterminated comment: '{#' has no matching '#}'");
    }
    char end_sign = 0;
    if (r > start && (s_[r - 1] == '-' || s_[r - 1] == '+')) end_sign = s_[r - 1];
    size_t after = r + 2;
    if (end_sign == '-') {
      after = SkipSpaces(s_, after);
    } else if (end_sign == 0 && after < s_.size() && s_[after] == '\n') {
      ++after;  // trim_blocks
    }
    line_ += CountNewlines(std::string_view(s_).substr(start, after - start));
    line_starting_ = s_[after - 1] == '\n';
    pos_ = after;
    return Status::OK();
  }

  Status LexRaw(size_t content_start, int tag_line) {
    line_ += CountNewlines(std::string_view(s_).substr(pos_, content_start - pos_));
    // The first {%[-+] endraw [-+]%} ends it.
    size_t q = content_start;
    while (true) {
      q = s_.find("{%", q);
      if (q == std::string::npos) {
        return LineError(tag_line, "unterminated raw block: '{% raw %}' has no '{% endraw %}'");
      }
      size_t j = q + 2;
      char sign = 0;
      if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) sign = s_[j++];
      j = SkipSpaces(s_, j);
      if (!StartsWith(j, "endraw")) {
        q += 2;
        continue;
      }
      j = SkipSpaces(s_, j + 6);
      size_t end;
      if (StartsWith(j, "+%}")) {
        end = j + 3;
      } else if (StartsWith(j, "-%}")) {
        end = SkipSpaces(s_, j + 3);
      } else if (StartsWith(j, "%}")) {
        end = j + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;
      } else {
        q += 2;
        continue;
      }
      std::string_view text = std::string_view(s_).substr(content_start, q - content_start);
      if (sign == '-') {
        text = PyStrip(text, false, true);
      } else if (sign != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        const bool at_line_start = l_pos > 0 || s_[content_start - 1] == '\n';
        if (at_line_start && l_pos < text.size() && IsAllSpace(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      if (!text.empty()) Emit(Tok::kData, line_, std::string(text));
      line_ += CountNewlines(std::string_view(s_).substr(content_start, end - content_start));
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return Status::OK();
    }
  }

  Status LexTag(bool is_block, int tag_line) {
    Emit(is_block ? Tok::kBlockBegin : Tok::kVarBegin, tag_line);
    std::string balance;  // expected closing brackets
    while (true) {
      if (pos_ >= s_.size()) {
        return LineError(tag_line, fmt::format("unexpected end of template: '{}' is not closed",
                                               is_block ? "{%" : "{{"));
      }
      if (balance.empty()) {
        size_t end = 0;
        if (is_block) {
          if (StartsWith(pos_, "+%}")) {
            end = pos_ + 3;
          } else if (StartsWith(pos_, "-%}")) {
            end = SkipSpaces(s_, pos_ + 3);
          } else if (StartsWith(pos_, "%}")) {
            end = pos_ + 2;
            if (end < s_.size() && s_[end] == '\n') ++end;  // trim_blocks
          }
        } else {
          if (StartsWith(pos_, "-}}")) {
            end = SkipSpaces(s_, pos_ + 3);
          } else if (StartsWith(pos_, "}}")) {
            end = pos_ + 2;
          }
        }
        if (end != 0) {
          Emit(is_block ? Tok::kBlockEnd : Tok::kVarEnd, line_);
          line_ += CountNewlines(std::string_view(s_).substr(pos_, end - pos_));
          line_starting_ = s_[end - 1] == '\n';
          pos_ = end;
          return Status::OK();
        }
      }
      if (size_t n = SpaceAt(s_, pos_)) {
        line_ += s_[pos_] == '\n';
        pos_ += n;
        continue;
      }
      const char c = s_[pos_];
      if (IsDigit(c)) {
        KILN_RETURN_IF_ERROR(LexNumber());
        continue;
      }
      if (IsNameStart(c)) {
        const size_t start = pos_;
        while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
        Emit(Tok::kName, line_, s_.substr(start, pos_ - start));
        continue;
      }
      if (c == '\'' || c == '"') {
        KILN_RETURN_IF_ERROR(LexString());
        continue;
      }
      static constexpr std::string_view kTwoCharOps[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (std::string_view two : kTwoCharOps) {
        if (StartsWith(pos_, two)) op = two;
      }
      if (op.empty() && std::strchr("+-/*%~[](){}><=.:|,;", c) != nullptr && c != '\0') {
        op = std::string(1, c);
      }
      if (op.empty()) {
        if (static_cast<unsigned char>(c) >= 0x80) {
          return LineError(line_, "unexpected non-ASCII character in a tag");
        }
        return LineError(line_, fmt::format("unexpected character '{}' in a tag", c));
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) return LineError(line_, fmt::format("unexpected '{}'", op));
        if (balance.back() != op[0]) {
          return LineError(line_,
                           fmt::format("unexpected '{}', expected '{}'", op, balance.back()));
        }
        balance.pop_back();
      }
      Emit(Tok::kOp, line_, op);
      pos_ += op.size();
    }
  }

  // Digits with single underscores between them (Python's "(\d+_)*\d+"); returns the end.
  size_t DigitRun(size_t i) const {
    if (i >= s_.size() || !IsDigit(s_[i])) return i;
    while (i < s_.size()) {
      if (IsDigit(s_[i])) {
        ++i;
      } else if (s_[i] == '_' && i + 1 < s_.size() && IsDigit(s_[i + 1])) {
        ++i;
      } else {
        break;
      }
    }
    return i;
  }

  Status LexNumber() {
    const size_t start = pos_;
    const bool after_dot = start > 0 && s_[start - 1] == '.';
    // Float: digits, then (fraction? exponent) or fraction.
    if (!after_dot) {
      const size_t int_end = DigitRun(start);
      size_t frac_end = int_end;
      if (int_end < s_.size() && s_[int_end] == '.') {
        const size_t f = DigitRun(int_end + 1);
        if (f > int_end + 1) frac_end = f;
      }
      size_t exp_end = frac_end;
      if (frac_end < s_.size() && (s_[frac_end] == 'e' || s_[frac_end] == 'E')) {
        size_t j = frac_end + 1;
        if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
        const size_t e = DigitRun(j);
        if (e > j) exp_end = e;
      }
      if (exp_end > int_end) {
        std::string text;
        for (size_t k = start; k < exp_end; ++k) {
          if (s_[k] != '_') text.push_back(s_[k]);
        }
        double d = 0;
        auto r = std::from_chars(text.data(), text.data() + text.size(), d);
        if (r.ec == std::errc::result_out_of_range) {
          const bool tiny =
              text.find("e-") != std::string::npos || text.find("E-") != std::string::npos;
          d = tiny ? 0.0 : std::numeric_limits<double>::infinity();
        }
        Token t;
        t.type = Tok::kFloat;
        t.line = line_;
        t.f = d;
        out_.push_back(std::move(t));
        pos_ = exp_end;
        return Status::OK();
      }
    }
    // Integer: 0b / 0o / 0x prefixes, [1-9](_?\d)*, 0(_?0)*.
    int base = 10;
    size_t digits_start = start;
    size_t end = start;
    if (s_[start] == '0' && start + 1 < s_.size() && std::strchr("bBoOxX", s_[start + 1]) &&
        s_[start + 1] != '\0') {
      const char p = static_cast<char>(s_[start + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      digits_start = start + 2;
      end = digits_start;
      auto is_base_digit = [&](char ch) {
        if (base == 2) return ch == '0' || ch == '1';
        if (base == 8) return ch >= '0' && ch <= '7';
        return IsDigit(ch) || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
      };
      while (end < s_.size()) {
        if (is_base_digit(s_[end])) {
          ++end;
        } else if (s_[end] == '_' && end + 1 < s_.size() && is_base_digit(s_[end + 1])) {
          ++end;
        } else {
          break;
        }
      }
      if (end == digits_start) {
        base = 10;
        digits_start = start;
        end = start;
      }
    }
    if (base == 10) {
      if (s_[start] == '0') {
        end = start + 1;
        while (end < s_.size() &&
               (s_[end] == '0' || (s_[end] == '_' && end + 1 < s_.size() && s_[end + 1] == '0'))) {
          ++end;
        }
      } else {
        end = DigitRun(start);
      }
    }
    std::string digits;
    for (size_t k = digits_start; k < end; ++k) {
      if (s_[k] != '_') digits.push_back(s_[k]);
    }
    int64_t value = 0;
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (r.ec != std::errc()) {
      return LineError(line_, fmt::format("integer literal {} is out of the 64-bit range",
                                          s_.substr(start, end - start)));
    }
    Token t;
    t.type = Tok::kInt;
    t.line = line_;
    t.i = value;
    out_.push_back(std::move(t));
    pos_ = end;
    return Status::OK();
  }

  // A quoted string with Python's escapes (Jinja decodes with "unicode-escape").
  Status LexString() {
    const char quote = s_[pos_];
    const int line = line_;
    size_t j = pos_ + 1;
    while (j < s_.size() && s_[j] != quote) j += s_[j] == '\\' ? 2 : 1;
    if (j >= s_.size()) return LineError(line, "unterminated string literal");
    const std::string_view raw = std::string_view(s_).substr(pos_ + 1, j - pos_ - 1);
    std::string out;
    out.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\') {
        out.push_back(raw[i]);
        continue;
      }
      const char e = raw[++i];
      auto hex = [&](size_t n) -> Result<char32_t> {
        if (i + n >= raw.size()) {
          return LineError(line, fmt::format("truncated \\{} escape in a string", e));
        }
        char32_t v = 0;
        for (size_t k = 1; k <= n; ++k) {
          const char h = raw[i + k];
          v <<= 4;
          if (IsDigit(h)) {
            v |= static_cast<char32_t>(h - '0');
          } else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') {
            v |= static_cast<char32_t>((h | 0x20) - 'a' + 10);
          } else {
            return LineError(line, fmt::format("truncated \\{} escape in a string", e));
          }
        }
        i += n;
        return v;
      };
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          KILN_ASSIGN_OR_RETURN(char32_t cp, hex(e == 'x' ? 2 : e == 'u' ? 4 : 8));
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return LineError(line, "string escape names a surrogate or an invalid code point");
          }
          AppendUtf8(out, cp);
          break;
        }
        case 'N':
          return LineError(line, "\\N{...} escapes in strings are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7';
                 ++k) {
              v = v * 8 + static_cast<char32_t>(raw[++i] - '0');
            }
            AppendUtf8(out, v);
          } else {
            out.push_back('\\');  // Python keeps unknown escapes
            --i;
          }
      }
    }
    Token t;
    t.type = Tok::kString;
    t.line = line;
    t.text = std::move(out);
    out_.push_back(std::move(t));
    line_ += CountNewlines(std::string_view(s_).substr(pos_, j + 1 - pos_));
    pos_ = j + 1;
    return Status::OK();
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

// --- parser -----------------------------------------------------------------------------------

std::string Describe(const Token& t) {
  switch (t.type) {
    case Tok::kData:
      return "template text";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kVarEnd:
      return "'}}'";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "'%}'";
    case Tok::kName:
      return "'" + t.text + "'";
    case Tok::kString:
      return "a string";
    case Tok::kInt:
    case Tok::kFloat:
      return "a number";
    case Tok::kOp:
      return "'" + t.text + "'";
    case Tok::kEof:
      return "the end of the template";
  }
  return "?";
}

ExprPtr MakeExpr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<std::unique_ptr<Program>> ParseProgram() {
    auto program = std::make_unique<Program>();
    KILN_ASSIGN_OR_RETURN(program->body, Subparse({}));
    if (Cur().type != Tok::kEof) {
      return LineError(Cur().line, fmt::format("unexpected tag {}", Describe(Cur())));
    }
    return program;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool IsName(std::string_view v) const { return Cur().type == Tok::kName && Cur().text == v; }
  bool IsOp(std::string_view v) const { return Cur().type == Tok::kOp && Cur().text == v; }
  bool SkipName(std::string_view v) {
    if (!IsName(v)) return false;
    Next();
    return true;
  }
  bool SkipOp(std::string_view v) {
    if (!IsOp(v)) return false;
    Next();
    return true;
  }
  Status Unexpected(std::string_view wanted) const {
    return LineError(Cur().line, fmt::format("expected {}, got {}", wanted, Describe(Cur())));
  }
  Status ExpectOp(std::string_view v) {
    if (!SkipOp(v)) return Unexpected(fmt::format("'{}'", v));
    return Status::OK();
  }
  Status ExpectType(Tok type, std::string_view wanted) {
    if (Cur().type != type) return Unexpected(wanted);
    Next();
    return Status::OK();
  }
  Result<std::string> ExpectName() {
    if (Cur().type != Tok::kName) return Unexpected("a name");
    std::string name = Cur().text;
    Next();
    return name;
  }

  // --- statements ---

  // Parses until a block tag whose name is in `end_tags` (left current) or the end.
  Result<Body> Subparse(const std::vector<std::string_view>& end_tags) {
    Body body;
    while (Cur().type != Tok::kEof) {
      const Token& tok = Cur();
      if (tok.type == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        Next();
      } else if (tok.type == Tok::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = tok.line;
        KILN_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, {}, false));
        KILN_RETURN_IF_ERROR(ExpectType(Tok::kVarEnd, "'}}'"));
        body.push_back(std::move(s));
      } else if (tok.type == Tok::kBlockBegin) {
        Next();
        if (Cur().type == Tok::kName) {
          for (std::string_view end : end_tags) {
            if (Cur().text == end) return body;
          }
        }
        KILN_ASSIGN_OR_RETURN(auto stmt, ParseStatement());
        body.push_back(std::move(stmt));
        KILN_RETURN_IF_ERROR(ExpectType(Tok::kBlockEnd, "'%}'"));
      } else {
        return LineError(tok.line, fmt::format("unexpected {}", Describe(tok)));
      }
    }
    return body;
  }

  // "%}" body, up to one of `end_tags` (current on return); end_tags.front() closes `opener`.
  Result<Body> ParseStatements(const std::vector<std::string_view>& end_tags,
                               std::string_view opener, int opener_line) {
    SkipOp(":");
    KILN_RETURN_IF_ERROR(ExpectType(Tok::kBlockEnd, "'%}'"));
    KILN_ASSIGN_OR_RETURN(Body body, Subparse(end_tags));
    if (Cur().type == Tok::kEof) {
      return LineError(opener_line,
                       fmt::format("unexpected end of template: '{{% {} %}}' is not closed "
                                   "(expected '{{% {} %}}')",
                                   opener, end_tags.front()));
    }
    return body;
  }

  Result<std::unique_ptr<Stmt>> ParseStatement() {
    if (Cur().type != Tok::kName) return Unexpected("a tag name");
    const std::string tag = Cur().text;
    const int line = Cur().line;
    if (tag == "if") return ParseIf();
    if (tag == "for") return ParseFor();
    if (tag == "set") return ParseSet();
    if (tag == "macro") return ParseMacro();
    if (tag == "filter") return ParseFilterBlock();
    if (tag == "with") return ParseWith();
    if (tag == "print") {  // {% print a, b %} prints a then b
      Next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kSequence;
      s->line = line;
      while (Cur().type != Tok::kBlockEnd) {
        if (!s->body.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
        auto out = std::make_unique<Stmt>();
        out->kind = StmtKind::kOutput;
        out->line = Cur().line;
        KILN_ASSIGN_OR_RETURN(out->expr, ParseExpression(true));
        s->body.push_back(std::move(out));
      }
      return s;
    }
    if (tag == "generation") {
      Next();
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kScope;
      s->line = line;
      KILN_ASSIGN_OR_RETURN(s->body, ParseStatements({"endgeneration"}, "generation", line));
      Next();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return LineError(line, fmt::format("'{}' outside of a loop", tag));
      Next();
      auto s = std::make_unique<Stmt>();
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      s->line = line;
      return s;
    }
    static constexpr std::string_view kEndTags[] = {
        "endif",     "elif",    "else",   "endfor",  "endset",        "endmacro",
        "endfilter", "endwith", "endraw", "endcall", "endgeneration", "endblock"};
    for (std::string_view end : kEndTags) {
      if (tag == end) return LineError(line, fmt::format("unexpected tag '{}'", tag));
    }
    return LineError(line, fmt::format("tag '{}' is not supported", tag));
  }

  Result<std::unique_ptr<Stmt>> ParseIf() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kIf;
    s->line = Cur().line;
    Next();  // if
    while (true) {
      const int line = Cur().line;
      KILN_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, false, {}, false));
      KILN_ASSIGN_OR_RETURN(Body body, ParseStatements({"endif", "elif", "else"}, "if", line));
      s->branches.emplace_back(std::move(test), std::move(body));
      const std::string which = Cur().text;
      Next();
      if (which == "elif") continue;
      if (which == "else") {
        KILN_ASSIGN_OR_RETURN(s->else_body, ParseStatements({"endif"}, "if", line));
        Next();
      }
      break;
    }
    return s;
  }

  // Names separated by commas, up to `stop` (a name such as "in") or the tag end.
  Status ParseTargets(Stmt& s, std::string_view stop) {
    while (true) {
      if (Cur().type != Tok::kName || Cur().text == stop) {
        return LineError(Cur().line, fmt::format("expected a variable name to assign to, got {}",
                                                 Describe(Cur())));
      }
      s.targets.push_back(Cur().text);
      Next();
      if (!IsOp(",")) break;
      s.unpack = true;
      Next();
      if ((!stop.empty() && IsName(stop)) || IsOp("=") || Cur().type == Tok::kBlockEnd) break;
    }
    for (const std::string& t : s.targets) {
      if (t == "true" || t == "false" || t == "none" || t == "True" || t == "False" ||
          t == "None") {
        return LineError(s.line, fmt::format("cannot assign to '{}'", t));
      }
    }
    return Status::OK();
  }

  Result<std::unique_ptr<Stmt>> ParseFor() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kFor;
    s->line = Cur().line;
    Next();  // for
    KILN_RETURN_IF_ERROR(ParseTargets(*s, "in"));
    if (!SkipName("in")) return Unexpected("'in'");
    KILN_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, false, {"recursive"}, false));
    if (SkipName("if")) {
      KILN_ASSIGN_OR_RETURN(s->cond, ParseExpression(true));
    }
    if (IsName("recursive")) return LineError(Cur().line, "recursive for-loops are not supported");
    ++loop_depth_;
    KILN_ASSIGN_OR_RETURN(s->body, ParseStatements({"endfor", "else"}, "for", s->line));
    --loop_depth_;
    const bool has_else = Cur().text == "else";
    Next();
    if (has_else) {
      KILN_ASSIGN_OR_RETURN(s->else_body, ParseStatements({"endfor"}, "for", s->line));
      Next();
    }
    return s;
  }

  Result<std::unique_ptr<Stmt>> ParseSet() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kSet;
    s->line = Cur().line;
    Next();  // set
    if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == ".") {
      s->targets.push_back(Cur().text);
      Next();
      Next();
      KILN_ASSIGN_OR_RETURN(s->ns_attr, ExpectName());
    } else {
      KILN_RETURN_IF_ERROR(ParseTargets(*s, ""));
    }
    if (SkipOp("=")) {
      KILN_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, {}, false));
      return s;
    }
    if (s->unpack) return Unexpected("'='");
    s->kind = StmtKind::kSetBlock;
    if (IsOp("|")) {
      KILN_ASSIGN_OR_RETURN(s->expr, ParseFilter(nullptr, false));
    }
    KILN_ASSIGN_OR_RETURN(s->body, ParseStatements({"endset"}, "set", s->line));
    Next();
    return s;
  }

  Result<std::unique_ptr<Stmt>> ParseMacro() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kMacro;
    s->line = Cur().line;
    Next();  // macro
    KILN_ASSIGN_OR_RETURN(s->name, ExpectName());
    KILN_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!s->params.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      KILN_ASSIGN_OR_RETURN(std::string param, ExpectName());
      s->params.push_back(std::move(param));
      if (SkipOp("=")) {
        KILN_ASSIGN_OR_RETURN(ExprPtr d, ParseExpression(true));
        s->defaults.push_back(std::move(d));
      } else if (!s->defaults.empty()) {
        return LineError(s->line, "non-default macro argument follows a default argument");
      }
    }
    Next();  // )
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    KILN_ASSIGN_OR_RETURN(s->body, ParseStatements({"endmacro"}, "macro", s->line));
    loop_depth_ = saved_loop_depth;
    Next();
    return s;
  }

  Result<std::unique_ptr<Stmt>> ParseFilterBlock() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kFilterBlock;
    s->line = Cur().line;
    Next();  // filter
    KILN_ASSIGN_OR_RETURN(s->expr, ParseFilter(nullptr, true));
    KILN_ASSIGN_OR_RETURN(s->body, ParseStatements({"endfilter"}, "filter", s->line));
    Next();
    return s;
  }

  Result<std::unique_ptr<Stmt>> ParseWith() {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kWith;
    s->line = Cur().line;
    Next();  // with
    while (Cur().type != Tok::kBlockEnd) {
      if (!s->targets.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      KILN_ASSIGN_OR_RETURN(std::string target, ExpectName());
      KILN_RETURN_IF_ERROR(ExpectOp("="));
      KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      s->targets.push_back(std::move(target));
      s->values.push_back(std::move(value));
    }
    KILN_ASSIGN_OR_RETURN(s->body, ParseStatements({"endwith"}, "with", s->line));
    Next();
    return s;
  }

  // --- expressions (jinja2/parser.py's grammar and precedence) ---

  class DepthGuard {
   public:
    explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
    ~DepthGuard() { --depth_; }

   private:
    int& depth_;
  };

  bool IsTupleEnd(const std::vector<std::string_view>& extra) const {
    if (Cur().type == Tok::kVarEnd || Cur().type == Tok::kBlockEnd || IsOp(")")) return true;
    for (std::string_view e : extra) {
      if (IsName(e)) return true;
    }
    return false;
  }

  Result<ExprPtr> ParseTuple(bool simplified, bool with_condexpr,
                             const std::vector<std::string_view>& extra, bool explicit_parens) {
    const int line = Cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra)) break;
      if (simplified) {
        KILN_ASSIGN_OR_RETURN(ExprPtr e, ParsePrimary());
        args.push_back(std::move(e));
      } else {
        KILN_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
        args.push_back(std::move(e));
      }
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) return Unexpected("an expression");
    }
    ExprPtr t = MakeExpr(ExprKind::kTuple, line);
    t->items = std::move(args);
    return t;
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard guard(depth_);
    if (depth_ > kMaxParseDepth) return LineError(Cur().line, "expression nested too deeply");
    if (!with_condexpr) return ParseOr();
    const int line = Cur().line;
    KILN_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
    while (SkipName("if")) {
      KILN_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        KILN_ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
      }
      ExprPtr e = MakeExpr(ExprKind::kCondExpr, line);
      e->a = std::move(test);
      e->b = std::move(expr1);
      e->c = std::move(otherwise);
      expr1 = std::move(e);
    }
    return expr1;
  }

  Result<ExprPtr> ParseOr() {
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const int line = Cur().line;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      ExprPtr e = MakeExpr(ExprKind::kOr, line);
      e->a = std::move(left);
      e->b = std::move(right);
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const int line = Cur().line;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      ExprPtr e = MakeExpr(ExprKind::kAnd, line);
      e->a = std::move(left);
      e->b = std::move(right);
      left = std::move(e);
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(depth_);
      if (depth_ > kMaxParseDepth) return LineError(Cur().line, "expression nested too deeply");
      const int line = Cur().line;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      ExprPtr e = MakeExpr(ExprKind::kNot, line);
      e->a = std::move(operand);
      return e;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    const int line = Cur().line;
    KILN_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      CmpOp op;
      if (IsOp("==")) {
        op = CmpOp::kEq;
      } else if (IsOp("!=")) {
        op = CmpOp::kNe;
      } else if (IsOp("<")) {
        op = CmpOp::kLt;
      } else if (IsOp("<=")) {
        op = CmpOp::kLe;
      } else if (IsOp(">")) {
        op = CmpOp::kGt;
      } else if (IsOp(">=")) {
        op = CmpOp::kGe;
      } else if (IsName("in")) {
        op = CmpOp::kIn;
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = CmpOp::kNotIn;
        Next();
      } else {
        break;
      }
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      if (!cmp) {
        cmp = MakeExpr(ExprKind::kCompare, line);
        cmp->a = std::move(first);
      }
      cmp->cmp_ops.push_back(op);
      cmp->items.push_back(std::move(operand));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  Result<ExprPtr> ParseMath1() {
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const BinOp op = IsOp("+") ? BinOp::kAdd : BinOp::kSub;
      const int line = Cur().line;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(op, line, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParseConcat() {
    const int line = Cur().line;
    KILN_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
    if (!IsOp("~")) return first;
    ExprPtr e = MakeExpr(ExprKind::kConcat, line);
    e->items.push_back(std::move(first));
    while (SkipOp("~")) {
      KILN_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
      e->items.push_back(std::move(next));
    }
    return e;
  }

  Result<ExprPtr> ParseMath2() {
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string& t = Cur().text;
      const BinOp op = t == "*"    ? BinOp::kMul
                       : t == "/"  ? BinOp::kDiv
                       : t == "//" ? BinOp::kFloorDiv
                                   : BinOp::kMod;
      const int line = Cur().line;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(op, line, std::move(left), std::move(right));
    }
    return left;
  }

  Result<ExprPtr> ParsePow() {
    KILN_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      const int line = Cur().line;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Binary(BinOp::kPow, line, std::move(left), std::move(right));
    }
    return left;
  }

  static ExprPtr Binary(BinOp op, int line, ExprPtr a, ExprPtr b) {
    ExprPtr e = MakeExpr(ExprKind::kBinary, line);
    e->bin_op = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(depth_);
    if (depth_ > kMaxParseDepth) return LineError(Cur().line, "expression nested too deeply");
    const int line = Cur().line;
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const ExprKind kind = IsOp("-") ? ExprKind::kNeg : ExprKind::kPos;
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node = MakeExpr(kind, line);
      node->a = std::move(operand);
    } else {
      KILN_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    KILN_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      KILN_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& tok = Cur();
    const int line = tok.line;
    if (tok.type == Tok::kName) {
      ExprPtr e;
      if (tok.text == "true" || tok.text == "True" || tok.text == "false" || tok.text == "False") {
        e = MakeExpr(ExprKind::kConst, line);
        e->value = Value::Bool(tok.text == "true" || tok.text == "True");
      } else if (tok.text == "none" || tok.text == "None") {
        e = MakeExpr(ExprKind::kConst, line);
        e->value = Value::MakeNone();
      } else {
        e = MakeExpr(ExprKind::kName, line);
        e->name = tok.text;
      }
      Next();
      return e;
    }
    if (tok.type == Tok::kString) {
      std::string s;
      while (Cur().type == Tok::kString) {
        s += Cur().text;
        Next();
      }
      ExprPtr e = MakeExpr(ExprKind::kConst, line);
      e->value = Value::String(std::move(s));
      return e;
    }
    if (tok.type == Tok::kInt || tok.type == Tok::kFloat) {
      ExprPtr e = MakeExpr(ExprKind::kConst, line);
      e->value = tok.type == Tok::kInt ? Value::Int(tok.i) : Value::Float(tok.f);
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      KILN_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(false, true, {}, true));
      KILN_RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp("[")) {
      Next();
      ExprPtr e = MakeExpr(ExprKind::kList, line);
      while (!IsOp("]")) {
        if (!e->items.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("]")) break;
        KILN_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
        e->items.push_back(std::move(item));
      }
      Next();
      return e;
    }
    if (IsOp("{")) {
      Next();
      ExprPtr e = MakeExpr(ExprKind::kDict, line);
      while (!IsOp("}")) {
        if (!e->items.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("}")) break;
        KILN_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
        KILN_RETURN_IF_ERROR(ExpectOp(":"));
        KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->items.push_back(std::move(key));
        e->items.push_back(std::move(value));
      }
      Next();
      return e;
    }
    return LineError(line, fmt::format("unexpected {}", Describe(tok)));
  }

  Result<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".") || IsOp("[")) {
        KILN_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        KILN_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        KILN_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
      } else if (IsName("is")) {
        KILN_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        KILN_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr node) {
    const int line = Cur().line;
    if (SkipOp(".")) {
      if (Cur().type == Tok::kName) {
        ExprPtr e = MakeExpr(ExprKind::kGetattr, line);
        e->a = std::move(node);
        e->name = Cur().text;
        Next();
        return e;
      }
      if (Cur().type != Tok::kInt) return Unexpected("a name or number after '.'");
      ExprPtr key = MakeExpr(ExprKind::kConst, line);
      key->value = Value::Int(Cur().i);
      Next();
      ExprPtr e = MakeExpr(ExprKind::kGetitem, line);
      e->a = std::move(node);
      e->b = std::move(key);
      return e;
    }
    Next();  // [
    std::vector<ExprPtr> args;
    while (!IsOp("]")) {
      if (!args.empty()) KILN_RETURN_IF_ERROR(ExpectOp(","));
      KILN_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
      args.push_back(std::move(arg));
    }
    Next();  // ]
    if (args.empty()) return LineError(line, "expected a subscript expression");
    ExprPtr e = MakeExpr(ExprKind::kGetitem, line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      e->b = MakeExpr(ExprKind::kTuple, line);
      e->b->items = std::move(args);
    }
    return e;
  }

  Result<ExprPtr> ParseSubscribed() {
    const int line = Cur().line;
    ExprPtr parts[3];
    if (IsOp(":")) {
      Next();
    } else {
      KILN_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(true));
      if (!IsOp(":")) return first;
      Next();
      parts[0] = std::move(first);
    }
    if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
      KILN_ASSIGN_OR_RETURN(parts[1], ParseExpression(true));
    }
    if (SkipOp(":")) {
      if (!IsOp("]") && !IsOp(",")) {
        KILN_ASSIGN_OR_RETURN(parts[2], ParseExpression(true));
      }
    }
    ExprPtr e = MakeExpr(ExprKind::kSlice, line);
    e->a = std::move(parts[0]);
    e->b = std::move(parts[1]);
    e->c = std::move(parts[2]);
    return e;
  }

  Status ParseCallArgs(Expr& e) {
    const int line = Cur().line;
    KILN_RETURN_IF_ERROR(ExpectOp("("));
    bool require_comma = false;
    while (!IsOp(")")) {
      if (require_comma) {
        KILN_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      if (IsOp("*") || IsOp("**")) {
        return LineError(line, "*args and **kwargs in calls are not supported");
      }
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e.kwargs.empty()) {
          return LineError(line, "a positional argument follows a keyword argument");
        }
        KILN_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e.items.push_back(std::move(value));
      }
      require_comma = true;
    }
    Next();  // )
    return Status::OK();
  }

  Result<ExprPtr> ParseCall(ExprPtr callee) {
    const int line = Cur().line;
    if (callee->kind == ExprKind::kGetattr && IsUnsupportedMethod(callee->name)) {
      return LineError(line, fmt::format("method '{}' is not supported", callee->name));
    }
    if (callee->kind == ExprKind::kName && IsUnsupportedGlobal(callee->name)) {
      return LineError(line, fmt::format("function '{}' is not supported", callee->name));
    }
    ExprPtr e = MakeExpr(ExprKind::kCall, line);
    e->a = std::move(callee);
    KILN_RETURN_IF_ERROR(ParseCallArgs(*e));
    return e;
  }

  Result<std::string> ParseDottedName() {
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (SkipOp(".")) {
      KILN_ASSIGN_OR_RETURN(std::string part, ExpectName());
      name += "." + part;
    }
    return name;
  }

  // `node | f(args) | g ...`; with start_inline the first '|' is implied (filter blocks).
  Result<ExprPtr> ParseFilter(ExprPtr node, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Next();
      start_inline = false;
      const int line = Cur().line;
      KILN_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
      if (!IsSupportedFilter(name)) {
        return LineError(line, fmt::format("filter '{}' is not supported", name));
      }
      ExprPtr e = MakeExpr(ExprKind::kFilter, line);
      e->a = std::move(node);
      e->name = std::move(name);
      if (IsOp("(")) KILN_RETURN_IF_ERROR(ParseCallArgs(*e));
      KILN_RETURN_IF_ERROR(CheckTestNameArgs(*e));
      node = std::move(e);
    }
    return node;
  }

  // select / reject / selectattr / rejectattr name a test by a string: check it when literal.
  Status CheckTestNameArgs(const Expr& e) {
    size_t index;
    if (e.name == "select" || e.name == "reject") {
      index = 0;
    } else if (e.name == "selectattr" || e.name == "rejectattr") {
      index = 1;
    } else {
      return Status::OK();
    }
    if (index < e.items.size() && e.items[index]->kind == ExprKind::kConst &&
        e.items[index]->value.is_string() && !IsSupportedTest(e.items[index]->value.str())) {
      return LineError(e.line,
                       fmt::format("test '{}' is not supported", e.items[index]->value.str()));
    }
    return Status::OK();
  }

  Result<ExprPtr> ParseTest(ExprPtr node) {
    const int line = Cur().line;
    Next();  // is
    const bool negated = SkipName("not");
    KILN_ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    if (!IsSupportedTest(name)) {
      return LineError(line, fmt::format("test '{}' is not supported", name));
    }
    ExprPtr e = MakeExpr(ExprKind::kTest, line);
    e->a = std::move(node);
    e->name = std::move(name);
    const Token& cur = Cur();
    if (IsOp("(")) {
      KILN_RETURN_IF_ERROR(ParseCallArgs(*e));
    } else if ((cur.type == Tok::kName || cur.type == Tok::kString || cur.type == Tok::kInt ||
                cur.type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return LineError(cur.line, "you cannot chain multiple tests with 'is'");
      KILN_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      KILN_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->items.push_back(std::move(arg));
    }
    if (!negated) return e;
    ExprPtr n = MakeExpr(ExprKind::kNot, line);
    n->a = std::move(e);
    return n;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

// --- scope analysis ---------------------------------------------------------------------------

// Jinja2's symbol tracking (jinja2/idtracking.py), reduced to what changes a render: which
// names a scope initialises as undefined. Every other name resolves as a plain lookup through
// the enclosing scopes to the template's variables, which is what kiln's evaluator does.
class Symbols {
 public:
  enum class Init : uint8_t { kResolve, kUndefined, kAlias, kParameter };

  explicit Symbols(const Symbols* parent) : parent_(parent) {}

  bool FindRef(const std::string& name) const {
    return refs_.count(name) != 0 || (parent_ != nullptr && parent_->FindRef(name));
  }
  void Load(const std::string& name) {
    if (!FindRef(name)) refs_[name] = Init::kResolve;
  }
  void Store(const std::string& name) {
    stores_.insert(name);
    if (refs_.count(name) != 0) return;
    refs_[name] = parent_ != nullptr && parent_->FindRef(name) ? Init::kAlias : Init::kUndefined;
  }
  void Parameter(const std::string& name) {
    stores_.insert(name);
    refs_[name] = Init::kParameter;
  }
  // Merges the symbols of the branches of an if (body, elifs, else): a name stored in some
  // branches only resolves from outside until it is stored.
  void BranchUpdate(const std::vector<Symbols>& branches) {
    std::map<std::string, size_t> counts;
    for (const Symbols& b : branches) {
      for (const std::string& t : b.stores_) {
        if (stores_.count(t) == 0) ++counts[t];
      }
    }
    for (const Symbols& b : branches) {
      for (const auto& [name, load] : b.refs_) refs_[name] = load;
      stores_.insert(b.stores_.begin(), b.stores_.end());
    }
    for (const auto& [name, count] : counts) {
      if (count == branches.size()) continue;
      refs_[name] = parent_ != nullptr && parent_->FindRef(name) ? Init::kAlias : Init::kResolve;
    }
  }
  std::vector<std::string> UndefinedNames() const {
    std::vector<std::string> out;
    for (const auto& [name, load] : refs_) {
      if (load == Init::kUndefined) out.push_back(name);
    }
    return out;
  }

 private:
  const Symbols* parent_;
  std::map<std::string, Init> refs_;
  std::set<std::string> stores_;
};

void LoadNames(const Expr* e, Symbols& sym) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::kName) sym.Load(e->name);
  LoadNames(e->a.get(), sym);
  LoadNames(e->b.get(), sym);
  LoadNames(e->c.get(), sym);
  for (const ExprPtr& x : e->items) LoadNames(x.get(), sym);
  for (const auto& kv : e->kwargs) LoadNames(kv.second.get(), sym);
}

// A scope to analyse once its enclosing scope's symbols are complete.
struct PendingScope {
  Stmt* stmt;
  enum Which { kBody, kElse } which;
};

void VisitStatements(const Body& body, Symbols& sym, std::vector<PendingScope>& children);

void VisitStatement(Stmt& s, Symbols& sym, std::vector<PendingScope>& children) {
  switch (s.kind) {
    case StmtKind::kText:
    case StmtKind::kBreak:
    case StmtKind::kContinue:
      return;
    case StmtKind::kOutput:
      LoadNames(s.expr.get(), sym);
      return;
    case StmtKind::kSequence:
      VisitStatements(s.body, sym, children);
      return;
    case StmtKind::kIf: {
      // Jinja's If is (test, body, elifs, else); each elif is an If of its own.
      LoadNames(s.branches[0].first.get(), sym);
      std::vector<Symbols> branches(3, sym);
      VisitStatements(s.branches[0].second, branches[0], children);
      for (size_t i = 1; i < s.branches.size(); ++i) {
        Symbols& elif = branches[1];
        LoadNames(s.branches[i].first.get(), elif);
        std::vector<Symbols> inner(3, elif);
        VisitStatements(s.branches[i].second, inner[0], children);
        elif.BranchUpdate(inner);
      }
      VisitStatements(s.else_body, branches[2], children);
      sym.BranchUpdate(branches);
      return;
    }
    case StmtKind::kFor:
      LoadNames(s.expr.get(), sym);
      children.push_back({&s, PendingScope::kBody});
      children.push_back({&s, PendingScope::kElse});
      return;
    case StmtKind::kSet:
      LoadNames(s.expr.get(), sym);
      if (!s.ns_attr.empty()) {
        sym.Load(s.targets[0]);
      } else {
        for (const std::string& t : s.targets) sym.Store(t);
      }
      return;
    case StmtKind::kSetBlock:
      if (!s.ns_attr.empty()) {
        sym.Load(s.targets[0]);
      } else {
        sym.Store(s.targets[0]);
      }
      children.push_back({&s, PendingScope::kBody});
      return;
    case StmtKind::kMacro:
      sym.Store(s.name);
      children.push_back({&s, PendingScope::kBody});
      return;
    case StmtKind::kFilterBlock:
      LoadNames(s.expr.get(), sym);
      children.push_back({&s, PendingScope::kBody});
      return;
    case StmtKind::kWith:
      for (const ExprPtr& v : s.values) LoadNames(v.get(), sym);
      children.push_back({&s, PendingScope::kBody});
      return;
    case StmtKind::kScope:
      children.push_back({&s, PendingScope::kBody});
      return;
  }
}

void VisitStatements(const Body& body, Symbols& sym, std::vector<PendingScope>& children) {
  for (const auto& s : body) VisitStatement(*s, sym, children);
}

void AnalyzeChildren(const Symbols& parent, std::vector<PendingScope> children);

// Analyses the scope of one body (with its parameters) and, after it, the scopes inside it.
std::vector<std::string> AnalyzeScope(const Symbols* parent, const std::vector<std::string>& params,
                                      const std::vector<const Expr*>& param_loads,
                                      const Body& body) {
  Symbols sym(parent);
  for (const std::string& p : params) sym.Parameter(p);
  for (const Expr* e : param_loads) LoadNames(e, sym);
  std::vector<PendingScope> children;
  VisitStatements(body, sym, children);
  AnalyzeChildren(sym, std::move(children));
  return sym.UndefinedNames();
}

void AnalyzeChildren(const Symbols& parent, std::vector<PendingScope> children) {
  for (const PendingScope& c : children) {
    Stmt& s = *c.stmt;
    std::vector<std::string> params;
    std::vector<const Expr*> loads;
    switch (s.kind) {
      case StmtKind::kFor:
        if (c.which == PendingScope::kElse) {
          s.else_undefined = AnalyzeScope(&parent, {}, {}, s.else_body);
          continue;
        }
        params = s.targets;
        params.push_back("loop");
        break;
      case StmtKind::kMacro:
        params = s.params;
        for (const ExprPtr& d : s.defaults) loads.push_back(d.get());
        break;
      case StmtKind::kWith:
        params = s.targets;
        break;
      case StmtKind::kFilterBlock:
        loads.push_back(s.expr.get());
        break;
      default:
        break;
    }
    s.body_undefined = AnalyzeScope(&parent, params, loads, s.body);
  }
}

void AnalyzeScopes(Program& program) {
  program.undefined_at_entry = AnalyzeScope(nullptr, {}, {}, program.body);
}

}  // namespace

Result<std::unique_ptr<Program>> ParseTemplate(std::string_view source) {
  if (source.size() > kMaxTemplateBytes) {
    return Status::InvalidArgument(fmt::format("chat template is {} bytes; the limit is {} bytes",
                                               source.size(), kMaxTemplateBytes));
  }
  if (!IsValidUtf8(source)) return Status::InvalidArgument("chat template is not valid UTF-8");
  Lexer lexer(source);
  KILN_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.Run());
  Parser parser(std::move(tokens));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, parser.ParseProgram());
  AnalyzeScopes(*program);
  return program;
}

}  // namespace kiln::llm::jinja
