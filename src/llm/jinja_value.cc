// SPDX-License-Identifier: Apache-2.0
#include "llm/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::llm::jinja {
namespace {

// Values nested deeper than this (only possible through namespace cycles or huge JSON) are
// refused by the recursive operations below instead of overflowing the stack.
constexpr int kMaxNesting = 600;

}  // namespace

// --- Object, DictData, NamespaceData ----------------------------------------------------------

Result<std::string> Object::Str() const {
  return Status::InvalidArgument(
      fmt::format("cannot convert a {} to a string (Python would print its address)", TypeName()));
}

const Value* DictData::Find(const Value& key) const {
  if (key.is_string()) return FindString(key.str());
  for (const auto& [k, v] : items_) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::FindString(std::string_view key) const {
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &items_[it->second].second;
}

void DictData::Set(Value key, Value value) {
  if (key.is_string()) {
    auto it = string_index_.find(key.str());
    if (it != string_index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
    string_index_.emplace(key.str(), items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : items_) {
    if (Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

const Value* NamespaceData::Find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

void NamespaceData::Set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

// --- Value ------------------------------------------------------------------------------------

Value Value::MakeUndefined(std::string hint) {
  return Value(Undefined{std::make_shared<const std::string>(std::move(hint))});
}
Value Value::String(std::string s) {
  return Value(std::shared_ptr<const std::string>(std::make_shared<std::string>(std::move(s))));
}
Value Value::List(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}
Value Value::Tuple(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->is_tuple = true;
  return Value(std::shared_ptr<const ListData>(std::move(data)));
}
Value Value::Dict(DictData dict) {
  return Value(std::shared_ptr<const DictData>(std::make_shared<DictData>(std::move(dict))));
}
Value Value::Namespace(std::shared_ptr<NamespaceData> ns) { return Value(std::move(ns)); }
Value Value::Generator(std::vector<Value> items) {
  auto data = std::make_shared<GeneratorData>();
  data->items = std::move(items);
  return Value(std::move(data));
}
Value Value::FailingGenerator(Status error) {
  auto data = std::make_shared<GeneratorData>();
  data->error = std::move(error);
  return Value(std::move(data));
}
Value Value::FromObject(std::shared_ptr<Object> object) { return Value(std::move(object)); }

std::string_view Value::undefined_hint() const {
  const auto& hint = std::get<Undefined>(v_).hint;
  return hint ? std::string_view(*hint) : std::string_view();
}

std::string_view Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return is_tuple() ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kGenerator:
      return "generator";
    case Kind::kObject:
      return object()->TypeName();
  }
  return "object";
}

bool Value::SameAs(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return as_bool() == other.as_bool();
    case Kind::kInt:
      return as_int() == other.as_int();
    case Kind::kFloat:
      return as_float() == other.as_float();
    case Kind::kString:
      return &str() == &other.str();
    case Kind::kList:
      return &list() == &other.list();
    case Kind::kDict:
      return &dict() == &other.dict();
    case Kind::kNamespace:
      return ns() == other.ns();
    case Kind::kGenerator:
      return generator() == other.generator();
    case Kind::kObject:
      return object() == other.object();
  }
  return false;
}

// --- truth, equality, ordering ----------------------------------------------------------------

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kList:
      return !v.list().items.empty();
    case Value::Kind::kDict:
      return v.dict().size() != 0;
    case Value::Kind::kNamespace:
    case Value::Kind::kGenerator:
    case Value::Kind::kObject:
      return true;
  }
  return false;
}

namespace {

bool EqualsAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      const ListData& x = a.list();
      const ListData& y = b.list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!EqualsAt(x.items[i], y.items[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* w = y.Find(k);
        if (w == nullptr || !EqualsAt(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.SameAs(b);
  }
}

Result<int> CompareAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) return Status::InvalidArgument("values nested too deeply to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (EqualsAt(x[i], y[i], depth + 1)) continue;
      return CompareAt(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return Status::InvalidArgument(fmt::format("'<' not supported between instances of '{}' and '{}'",
                                             a.TypeName(), b.TypeName()));
}

}  // namespace

bool Equals(const Value& a, const Value& b) { return EqualsAt(a, b, 0); }
Result<int> Compare(const Value& a, const Value& b) { return CompareAt(a, b, 0); }

// --- UTF-8 ------------------------------------------------------------------------------------

namespace {

// Decodes one code point of valid UTF-8 at s[i]; advances i.
char32_t NextCodepoint(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  char32_t cp = c & (0x3F >> n);
  ++i;
  for (int k = 0; k < n && i < s.size(); ++k, ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  }
  return cp;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int n;
    char32_t min;
    char32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(NextCodepoint(s, i));
  return out;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(out, cp);
  return out;
}

size_t CodepointCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool IsPySpace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

// The simple (one code point to one code point) case pairs of the scripts kiln maps:
// {upper, lower}. Ranges where upper and lower alternate are listed by their first pair.
struct CaseRange {
  char32_t first_upper, last_upper;  // inclusive
  int32_t delta;                     // lower - upper
  int stride;                        // 1: a block; 2: alternating pairs
};
constexpr CaseRange kCaseRanges[] = {
    {0x41, 0x5A, 32, 1},    {0xC0, 0xD6, 32, 1},    {0xD8, 0xDE, 32, 1},   {0x100, 0x12E, 1, 2},
    {0x132, 0x136, 1, 2},   {0x139, 0x147, 1, 2},   {0x14A, 0x176, 1, 2},  {0x179, 0x17D, 1, 2},
    {0x386, 0x386, 38, 1},  {0x388, 0x38A, 37, 1},  {0x38C, 0x38C, 64, 1}, {0x38E, 0x38F, 63, 1},
    {0x391, 0x3A1, 32, 1},  {0x3A3, 0x3AB, 32, 1},  {0x400, 0x40F, 80, 1}, {0x410, 0x42F, 32, 1},
    {0x460, 0x480, 1, 2},   {0x48A, 0x4BE, 1, 2},   {0x4C1, 0x4CD, 1, 2},  {0x4D0, 0x52E, 1, 2},
    {0x1E00, 0x1E94, 1, 2}, {0x1EA0, 0x1EFE, 1, 2},
};

// Upper case of a lower-case letter with no pair in kCaseRanges (or 0).
char32_t SpecialUpper(char32_t cp) {
  switch (cp) {
    case 0xB5:
      return 0x39C;  // micro sign -> Greek capital mu
    case 0xFF:
      return 0x178;
    case 0x131:
      return 0x49;  // dotless i -> I
    case 0x17F:
      return 0x53;  // long s -> S
    case 0x3C2:
      return 0x3A3;  // final sigma
    default:
      return 0;
  }
}

// Lower case of an upper-case letter with no pair in kCaseRanges (or 0).
char32_t SpecialLower(char32_t cp) {
  switch (cp) {
    case 0x178:
      return 0xFF;
    case 0x130:
      return 0x69;  // Python gives "i\u0307"; handled in AppendLower
    case 0x4C0:
      return 0x4CF;
    case 0x1E9E:
      return 0xDF;
    default:
      return 0;
  }
}

// The lower case of an upper-case `cp` in kCaseRanges, or 0.
char32_t RangeLower(char32_t cp) {
  for (const CaseRange& r : kCaseRanges) {
    if (cp < r.first_upper || cp > r.last_upper) continue;
    if (r.stride == 2 && (cp - r.first_upper) % 2 != 0) continue;
    return static_cast<char32_t>(static_cast<int32_t>(cp) + r.delta);
  }
  return 0;
}

// The upper case of a lower-case `cp` in kCaseRanges, or 0.
char32_t RangeUpper(char32_t cp) {
  for (const CaseRange& r : kCaseRanges) {
    const char32_t first_lower =
        static_cast<char32_t>(static_cast<int32_t>(r.first_upper) + r.delta);
    const char32_t last_lower = static_cast<char32_t>(static_cast<int32_t>(r.last_upper) + r.delta);
    if (cp < first_lower || cp > last_lower) continue;
    if (r.stride == 2 && (cp - first_lower) % 2 != 0) continue;
    return static_cast<char32_t>(static_cast<int32_t>(cp) - r.delta);
  }
  return 0;
}

}  // namespace

bool IsUpperCase(char32_t cp) { return RangeLower(cp) != 0 || SpecialLower(cp) != 0; }

bool IsLowerCase(char32_t cp) {
  return RangeUpper(cp) != 0 || SpecialUpper(cp) != 0 || cp == 0xDF || cp == 0x138 || cp == 0x149 ||
         cp == 0x390 || cp == 0x3B0;
}

bool IsCased(char32_t cp) { return IsUpperCase(cp) || IsLowerCase(cp); }

void AppendUpper(std::string& out, char32_t cp) {
  if (cp == 0xDF) {
    out += "SS";
    return;
  }
  if (cp == 0x149) {  // n preceded by apostrophe
    AppendUtf8(out, 0x2BC);
    out.push_back('N');
    return;
  }
  char32_t u = RangeUpper(cp);
  if (u == 0) u = SpecialUpper(cp);
  AppendUtf8(out, u != 0 ? u : cp);
}

void AppendLower(std::string& out, char32_t cp) {
  if (cp == 0x130) {  // capital I with dot above
    out.push_back('i');
    AppendUtf8(out, 0x307);
    return;
  }
  char32_t l = RangeLower(cp);
  if (l == 0) l = SpecialLower(cp);
  AppendUtf8(out, l != 0 ? l : cp);
}

std::string_view PyStrip(std::string_view s, bool left, bool right) {
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!IsPySpace(NextCodepoint(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t next = start;
      if (!IsPySpace(NextCodepoint(s, next))) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

// --- str(), repr() ----------------------------------------------------------------------------

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exp);
  const int n = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (n <= exp + 1) {
        out += digits;
        out.append(static_cast<size_t>(exp + 1 - n), '0');
        out += ".0";
      } else {
        out += digits.substr(0, static_cast<size_t>(exp + 1));
        out.push_back('.');
        out += digits.substr(static_cast<size_t>(exp + 1));
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    }
    return out;
  }
  out.push_back(digits[0]);
  if (n > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out;
}

namespace {

// Python's str.isprintable() for one non-ASCII code point, approximately: the separators,
// format and private-use characters a chat template could meet. (Unassigned code points, which
// Python also escapes, are printed as they are.)
bool IsPrintableNonAscii(char32_t cp) {
  if (cp <= 0xA0 || cp == 0xAD) return false;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F) return false;
  if (cp == 0x1680 || cp == 0x180E || (cp >= 0x2000 && cp <= 0x200F)) return false;
  if ((cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F)) return false;
  if (cp == 0x3000 || (cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF) return false;
  if ((cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF) return false;
  if ((cp >= 0xE0000 && cp <= 0xE007F) || cp >= 0xF0000) return false;
  return true;
}

std::string ReprString(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  size_t i = 0;
  while (i < s.size()) {
    const char32_t cp = NextCodepoint(s, i);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x7F || IsPrintableNonAscii(cp)) {
      AppendUtf8(out, cp);
    } else if (cp <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
  }
  out.push_back(quote);
  return out;
}

Result<std::string> ReprAt(const Value& v, int depth);

Result<std::string> NamespaceRepr(const NamespaceData& ns, int depth) {
  std::string out = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : ns.attrs) {
    if (!first) out += ", ";
    first = false;
    out += ReprString(k);
    out += ": ";
    KILN_ASSIGN_OR_RETURN(std::string item, ReprAt(v, depth + 1));
    out += item;
  }
  out += "}>";
  return out;
}

Result<std::string> ReprAt(const Value& v, int depth) {
  if (depth > kMaxNesting) return Status::InvalidArgument("value nested too deeply to print");
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::string("Undefined");
    case Value::Kind::kNone:
      return std::string("None");
    case Value::Kind::kBool:
      return std::string(v.as_bool() ? "True" : "False");
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return FormatFloat(v.as_float());
    case Value::Kind::kString:
      return ReprString(v.str());
    case Value::Kind::kList: {
      const ListData& l = v.list();
      std::string out(1, l.is_tuple ? '(' : '[');
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        KILN_ASSIGN_OR_RETURN(std::string item, ReprAt(l.items[i], depth + 1));
        out += item;
      }
      if (l.is_tuple && l.items.size() == 1) out.push_back(',');
      out.push_back(l.is_tuple ? ')' : ']');
      return out;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.dict().items()) {
        if (!first) out += ", ";
        first = false;
        KILN_ASSIGN_OR_RETURN(std::string key, ReprAt(k, depth + 1));
        KILN_ASSIGN_OR_RETURN(std::string item, ReprAt(val, depth + 1));
        out += key;
        out += ": ";
        out += item;
      }
      out += "}";
      return out;
    }
    case Value::Kind::kNamespace:
      return NamespaceRepr(*v.ns(), depth);
    case Value::Kind::kGenerator:
      return Status::InvalidArgument(
          "cannot convert a generator to a string (Python would print its address; apply "
          "|list first)");
    case Value::Kind::kObject:
      return v.object()->Str();
  }
  return std::string();
}

}  // namespace

Result<std::string> Repr(const Value& v) { return ReprAt(v, 0); }

Result<std::string> ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::string();
    case Value::Kind::kString:
      return v.str();
    default:
      return ReprAt(v, 0);
  }
}

// --- JSON -------------------------------------------------------------------------------------

namespace {

void AppendJsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t start = i;
      const char32_t cp = NextCodepoint(s, i);
      if (!ensure_ascii) {
        out.append(s.substr(start, i - start));
      } else if (cp < 0x10000) {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      } else {
        const char32_t v = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xD800 + (v >> 10)),
                           static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FormatFloat(d);
}

Status NotSerializable(const Value& v) {
  return Status::InvalidArgument(
      fmt::format("Object of type {} is not JSON serializable", v.TypeName()));
}

Result<std::string> JsonKey(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.str();
    case Value::Kind::kInt:
      return std::to_string(k.as_int());
    case Value::Kind::kFloat:
      return JsonFloat(k.as_float());
    case Value::Kind::kBool:
      return std::string(k.as_bool() ? "true" : "false");
    case Value::Kind::kNone:
      return std::string("null");
    default:
      return Status::InvalidArgument(
          fmt::format("keys must be str, int, float, bool or None, not {}", k.TypeName()));
  }
}

void NewlineIndent(std::string& out, const JsonOptions& o, int level) {
  out.push_back('\n');
  for (int i = 0; i < level; ++i) out += *o.indent;
}

Status JsonAt(const Value& v, const JsonOptions& o, int level, std::string& out) {
  if (level > kMaxNesting) return Status::InvalidArgument("value nested too deeply for JSON");
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return Status::OK();
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return Status::OK();
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return Status::OK();
    case Value::Kind::kFloat:
      out += JsonFloat(v.as_float());
      return Status::OK();
    case Value::Kind::kString:
      AppendJsonString(out, v.str(), o.ensure_ascii);
      return Status::OK();
    case Value::Kind::kList: {
      const auto& items = v.list().items;
      if (items.empty()) {
        out += "[]";
        return Status::OK();
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) NewlineIndent(out, o, level + 1);
        KILN_RETURN_IF_ERROR(JsonAt(items[i], o, level + 1, out));
      }
      if (o.indent) NewlineIndent(out, o, level);
      out.push_back(']');
      return Status::OK();
    }
    case Value::Kind::kDict: {
      const auto& items = v.dict().items();
      if (items.empty()) {
        out += "{}";
        return Status::OK();
      }
      std::vector<const std::pair<Value, Value>*> order;
      order.reserve(items.size());
      for (const auto& item : items) order.push_back(&item);
      if (o.sort_keys) {
        Status error;
        std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
          Result<int> c = Compare(a->first, b->first);
          if (!c.ok()) {
            if (error.ok()) error = c.status();
            return false;
          }
          return *c < 0;
        });
        KILN_RETURN_IF_ERROR(error);
      }
      out.push_back('{');
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) NewlineIndent(out, o, level + 1);
        KILN_ASSIGN_OR_RETURN(std::string key, JsonKey(order[i]->first));
        AppendJsonString(out, key, o.ensure_ascii);
        out += o.key_separator;
        KILN_RETURN_IF_ERROR(JsonAt(order[i]->second, o, level + 1, out));
      }
      if (o.indent) NewlineIndent(out, o, level);
      out.push_back('}');
      return Status::OK();
    }
    default:
      return NotSerializable(v);
  }
}

// Recursive-descent JSON reader.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : s_(text) {}

  Result<Value> ReadDocument() {
    KILN_ASSIGN_OR_RETURN(Value v, ReadValue(0));
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected data after the JSON value");
    return v;
  }

 private:
  Status Error(std::string_view what) const {
    return Status::InvalidArgument(fmt::format("JSON at byte {}: {}", pos_, what));
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Result<Value> ReadValue(int depth) {
    if (depth > 512) return Error("nesting deeper than 512");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return ReadObject(depth);
    if (c == '[') return ReadArray(depth);
    if (c == '"') {
      KILN_ASSIGN_OR_RETURN(std::string str, ReadString());
      return Value::String(std::move(str));
    }
    if (Consume("true")) return Value::Bool(true);
    if (Consume("false")) return Value::Bool(false);
    if (Consume("null")) return Value::MakeNone();
    if (c == '-' || (c >= '0' && c <= '9')) return ReadNumber();
    return Error(fmt::format("unexpected character '{}'", c));
  }

  Result<Value> ReadObject(int depth) {
    ++pos_;  // {
    DictData dict;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Value::Dict(std::move(dict));
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected a string key");
      KILN_ASSIGN_OR_RETURN(std::string key, ReadString());
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      KILN_ASSIGN_OR_RETURN(Value v, ReadValue(depth + 1));
      dict.Set(Value::String(std::move(key)), std::move(v));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return Value::Dict(std::move(dict));
      }
      return Error("expected ',' or '}'");
    }
  }

  Result<Value> ReadArray(int depth) {
    ++pos_;  // [
    std::vector<Value> items;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Value::List(std::move(items));
    }
    while (true) {
      KILN_ASSIGN_OR_RETURN(Value v, ReadValue(depth + 1));
      items.push_back(std::move(v));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return Value::List(std::move(items));
      }
      return Error("expected ',' or ']'");
    }
  }

  Result<unsigned> ReadHex4() {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        return Error("bad \\u escape");
      }
    }
    return v;
  }

  Result<std::string> ReadString() {
    ++pos_;  // "
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        break;
      }
      if (c < 0x20) return Error("control character in string");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
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
        case 'u': {
          KILN_ASSIGN_OR_RETURN(unsigned hi, ReadHex4());
          char32_t cp = hi;
          if (hi >= 0xD800 && hi <= 0xDBFF) {
            if (!Consume("\\u")) return Error("unpaired surrogate in \\u escape");
            KILN_ASSIGN_OR_RETURN(unsigned lo, ReadHex4());
            if (lo < 0xDC00 || lo > 0xDFFF) return Error("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
          } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
            return Error("unpaired surrogate in \\u escape");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          return Error(fmt::format("bad escape '\\{}'", e));
      }
    }
    if (!IsValidUtf8(out)) return Error("string is not valid UTF-8");
    return out;
  }

  Result<Value> ReadNumber() {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return Error("bad number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    bool is_float = false;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_float = true;
      ++pos_;
      const size_t digits = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == digits) return Error("bad number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_float = true;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      const size_t digits = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == digits) return Error("bad number");
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (!is_float) {
      int64_t i = 0;
      auto r = std::from_chars(first, last, i);
      if (r.ec != std::errc() || r.ptr != last) {
        return Error("integer out of the 64-bit range");
      }
      return Value::Int(i);
    }
    double d = 0;
    auto r = std::from_chars(first, last, d);
    if (r.ptr != last) return Error("bad number");
    if (r.ec == std::errc::result_out_of_range) {
      // Python gives inf for overflow and 0.0 for underflow; from_chars leaves d unchanged.
      const bool negative = *first == '-';
      const std::string_view digits(first, static_cast<size_t>(last - first));
      const size_t e = digits.find_first_of("eE");
      const bool tiny = e != std::string_view::npos && digits[e + 1] == '-';
      d = tiny ? (negative ? -0.0 : 0.0)
               : (negative ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::infinity());
    }
    return Value::Float(d);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  KILN_RETURN_IF_ERROR(JsonAt(v, options, 0, out));
  return out;
}

Result<Value> ParseJson(std::string_view text) { return JsonReader(text).ReadDocument(); }

}  // namespace kiln::llm::jinja
