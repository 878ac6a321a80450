// SPDX-License-Identifier: Apache-2.0
#include "llm/jinja_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>

#include "text/unicode.h"

namespace kiln::llm::jinja {
namespace {

// Jinja's sandbox caps range() (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Status Err(std::string msg) { return Status::InvalidArgument(std::move(msg)); }

bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

constexpr std::string_view kLinePrefix = "chat template line ";

// Adds the template line to an error that has none yet. raise_exception's errors (kAborted
// internally) keep the template's own message.
Status WithLine(const Status& s, int line) {
  if (s.ok() || s.code() == StatusCode::kAborted) return s;
  if (s.message().compare(0, kLinePrefix.size(), kLinePrefix) == 0) return s;
  return Status::InvalidArgument(fmt::format("{}{}: {}", kLinePrefix, line, s.message()));
}

Status UndefinedError(const Value& v) {
  std::string_view hint = v.undefined_hint();
  return Err(hint.empty() ? std::string("an undefined value was used") : std::string(hint));
}

// --- call arguments ---------------------------------------------------------------------------

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Binds `args` to `params` as Python would (positional first, then by keyword). Missing ones
// stay nullopt.
Result<std::vector<std::optional<Value>>> Bind(std::string_view what, const Args& args,
                                               std::initializer_list<std::string_view> params) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.pos.size() > params.size()) {
    return Err(fmt::format("{} takes at most {} argument(s), {} given", what, params.size(),
                           args.pos.size()));
  }
  for (size_t i = 0; i < args.pos.size(); ++i) out[i] = args.pos[i];
  for (const auto& [key, value] : args.kw) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++i;
    }
    if (i == params.size()) {
      return Err(fmt::format("{} got an unexpected keyword argument '{}'", what, key));
    }
    if (out[i].has_value()) {
      return Err(fmt::format("{} got multiple values for argument '{}'", what, key));
    }
    out[i] = value;
  }
  return out;
}

bool IsNoneLike(const std::optional<Value>& v) { return !v.has_value() || v->is_none(); }

Result<int64_t> ToIndex(const Value& v, std::string_view what) {
  if (!v.is_integral()) {
    return Err(fmt::format("{} must be an integer, not '{}'", what, v.TypeName()));
  }
  return v.as_int();
}

// --- string helpers (Python str methods on UTF-8) ---------------------------------------------

// Python's case conversions over the scripts jinja_value.h maps (AppendUpper / AppendLower).
std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : DecodeUtf8(s)) AppendUpper(out, c);
  return out;
}

// str.lower(): Unicode's full lowercase mapping, final sigma included (text/unicode.h).
std::string PyLower(std::string_view s) {
  const std::vector<char32_t> cps = DecodeUtf8(s);
  return text::EncodeUtf8(text::ToLower(std::u32string(cps.begin(), cps.end())));
}

// Title case: upper case except where Unicode's title case differs (U+00DF -> "Ss").
void AppendTitle(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "Ss";
    return;
  }
  AppendUpper(out, c);
}

// str.capitalize(): the first character in title case, the rest in lower case.
std::string Capitalize(std::string_view s) {
  const std::vector<char32_t> cps = DecodeUtf8(s);
  if (cps.empty()) return std::string();
  std::string out;
  AppendTitle(out, cps[0]);
  std::string rest;
  for (size_t i = 1; i < cps.size(); ++i) AppendUtf8(rest, cps[i]);
  return out + PyLower(rest);
}

// str.title(): a cased letter after a cased letter is lowered, any other is title-cased.
std::string TitleMethod(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (prev_cased) {
      AppendLower(out, c);
    } else {
      AppendTitle(out, c);
    }
    prev_cased = IsCased(c);
  }
  return out;
}

// Jinja's |title: each piece between runs of [-\s({\[<] becomes piece[0].upper() +
// piece[1:].lower().
std::string TitleFilter(std::string_view s) {
  std::string out;
  std::string word;
  bool at_word_start = true;
  auto flush = [&]() {
    out += PyLower(word);
    word.clear();
  };
  for (char32_t c : DecodeUtf8(s)) {
    const bool sep = IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      flush();
      AppendUtf8(out, c);
      at_word_start = true;
    } else if (at_word_start) {
      AppendUpper(out, c);
      at_word_start = false;
    } else {
      AppendUtf8(word, c);
    }
  }
  flush();
  return out;
}

std::string StripChars(std::string_view s, const std::optional<std::string>& chars, bool left,
                       bool right) {
  if (!chars.has_value()) return std::string(PyStrip(s, left, right));
  const std::vector<char32_t> set = DecodeUtf8(*chars);
  std::vector<char32_t> cps = DecodeUtf8(s);
  auto in_set = [&](char32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && in_set(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && in_set(cps[end - 1])) --end;
  }
  return EncodeUtf8(std::u32string(cps.begin() + begin, cps.begin() + end));
}

// str.split / str.rsplit.
Result<std::vector<std::string>> Split(std::string_view s, const std::optional<std::string>& sep,
                                       int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep.has_value()) {
    if (sep->empty()) return Err("empty separator");
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t at = s.find(*sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, at - start));
        start = at + sep->size();
      }
      parts.emplace_back(s.substr(start));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size()) break;
        const size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string_view::npos) break;
        rev.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
      }
      rev.emplace_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
    return parts;
  }
  // Runs of whitespace.
  const std::vector<char32_t> cps = DecodeUtf8(s);
  const int64_t n = static_cast<int64_t>(cps.size());
  if (!from_right) {
    int64_t i = 0;
    while (true) {
      while (i < n && IsPySpace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(EncodeUtf8(std::u32string(cps.begin() + i, cps.end())));
        break;
      }
      int64_t j = i;
      while (j < n && !IsPySpace(cps[j])) ++j;
      parts.push_back(EncodeUtf8(std::u32string(cps.begin() + i, cps.begin() + j)));
      i = j;
    }
  } else {
    int64_t i = n;
    std::vector<std::string> rev;
    while (true) {
      while (i > 0 && IsPySpace(cps[i - 1])) --i;
      if (i <= 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) >= maxsplit) {
        rev.push_back(EncodeUtf8(std::u32string(cps.begin(), cps.begin() + i)));
        break;
      }
      int64_t j = i;
      while (j > 0 && !IsPySpace(cps[j - 1])) --j;
      rev.push_back(EncodeUtf8(std::u32string(cps.begin() + j, cps.begin() + i)));
      i = j;
    }
    parts.assign(rev.rbegin(), rev.rend());
  }
  return parts;
}

// str.splitlines() (without keepends).
std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<std::string> lines;
  const std::vector<char32_t> cps = DecodeUtf8(s);
  std::u32string cur;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                     c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      cur.push_back(c);
      continue;
    }
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    lines.push_back(EncodeUtf8(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(EncodeUtf8(cur));
  return lines;
}

std::string Replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every character and at the end.
    const std::vector<char32_t> cps = DecodeUtf8(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      AppendUtf8(out, c);
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(repl);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

// Python's str.isX() family. Letters are those jinja_value.h knows the case of; digits are
// ASCII digits.
Value StrPredicate(std::string_view name, std::string_view s) {
  const std::vector<char32_t> cps = DecodeUtf8(s);
  if (name == "islower" || name == "isupper") {
    bool any_cased = false;
    for (char32_t c : cps) {
      if (IsUpperCase(c)) {
        if (name == "islower") return Value::Bool(false);
        any_cased = true;
      } else if (IsLowerCase(c)) {
        if (name == "isupper") return Value::Bool(false);
        any_cased = true;
      }
    }
    return Value::Bool(any_cased);
  }
  if (cps.empty()) return Value::Bool(name == "isascii");
  for (char32_t c : cps) {
    bool ok;
    if (name == "isdigit") {
      ok = c >= '0' && c <= '9';
    } else if (name == "isalpha") {
      ok = IsCased(c);
    } else if (name == "isalnum") {
      ok = IsCased(c) || (c >= '0' && c <= '9');
    } else if (name == "isspace") {
      ok = IsPySpace(c);
    } else {  // isascii
      ok = c < 0x80;
    }
    if (!ok) return Value::Bool(false);
  }
  return Value::Bool(true);
}

// Code point index of the byte offset `at` in `s`.
int64_t CpIndex(std::string_view s, size_t at) {
  return static_cast<int64_t>(CodepointCount(s.substr(0, at)));
}

// Python's slice index normalisation (PySlice_AdjustIndices) and the selected positions.
Result<std::vector<int64_t>> SliceIndices(int64_t len, const Value& start_v, const Value& stop_v,
                                          const Value& step_v) {
  int64_t step = 1;
  if (!step_v.is_none()) step = step_v.as_int();
  if (step == 0) return Err("slice step cannot be zero");
  int64_t start, stop;
  if (start_v.is_none()) {
    start = step < 0 ? len - 1 : 0;
  } else {
    start = start_v.as_int();
    if (start < 0) {
      start += len;
      if (start < 0) start = step < 0 ? -1 : 0;
    } else if (start >= len) {
      start = step < 0 ? len - 1 : len;
    }
  }
  if (stop_v.is_none()) {
    stop = step < 0 ? -1 : len;
  } else {
    stop = stop_v.as_int();
    if (stop < 0) {
      stop += len;
      if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
      stop = step < 0 ? len - 1 : len;
    }
  }
  std::vector<int64_t> out;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) out.push_back(i);
  } else {
    for (int64_t i = start; i > stop; i += step) out.push_back(i);
  }
  return out;
}

// --- objects the evaluator defines ------------------------------------------------------------

struct Frame {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, Value, Hash, std::equal_to<>> vars;
  std::shared_ptr<Frame> parent;
};

class Interp;
using BuiltinFn = Result<Value> (*)(Interp&, const Args&);

class BuiltinFunction : public Object {
 public:
  BuiltinFunction(std::string name, BuiltinFn fn) : name(std::move(name)), fn(fn) {}
  std::string_view TypeName() const override { return "function"; }
  std::string name;
  BuiltinFn fn;
};

// A macro and the scope it was defined in. The scope is held weakly (the Interp keeps it alive
// for the render) so that a frame holding its own macros is not a reference cycle.
class MacroObject : public Object {
 public:
  MacroObject(const Stmt* def, std::weak_ptr<Frame> closure)
      : def(def), closure(std::move(closure)) {}
  std::string_view TypeName() const override { return "Macro"; }
  const Stmt* def;
  std::weak_ptr<Frame> closure;
};

class LoopObject : public Object {
 public:
  std::string_view TypeName() const override { return "LoopContext"; }
  Result<std::string> Str() const override {
    return fmt::format("<LoopContext {}/{}>", index0 + 1, items->size());
  }
  std::shared_ptr<const std::vector<Value>> items;
  int64_t index0 = 0;
};

// A method looked up without calling it at once ({% set f = s.strip %}{{ f() }}).
class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self(std::move(self)), name(std::move(name)) {}
  std::string_view TypeName() const override { return "builtin_function_or_method"; }
  Value self;
  std::string name;
};

constexpr std::string_view kStrMethods[] = {
    "strip",      "lstrip",   "rstrip",       "split",        "rsplit",    "splitlines",
    "startswith", "endswith", "upper",        "lower",        "title",     "capitalize",
    "replace",    "find",     "rfind",        "index",        "rindex",    "count",
    "join",       "isdigit",  "isalpha",      "isalnum",      "isspace",   "islower",
    "isupper",    "isascii",  "removeprefix", "removesuffix", "partition", "rpartition"};
constexpr std::string_view kDictMethods[] = {"get", "items",   "keys",       "values", "copy",
                                             "pop", "popitem", "setdefault", "update", "clear"};
constexpr std::string_view kListMethods[] = {"count",   "index",  "copy", "append",
                                             "extend",  "insert", "pop",  "remove",
                                             "reverse", "sort",   "clear"};
constexpr std::string_view kUnsupportedMethods[] = {
    "casefold",  "center",       "encode",    "expandtabs",  "format",  "format_map",
    "isdecimal", "isidentifier", "isnumeric", "isprintable", "istitle", "ljust",
    "maketrans", "rjust",        "swapcase",  "translate",   "zfill",   "fromkeys"};

template <size_t N>
bool In(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

bool HasMethod(const Value& v, std::string_view name) {
  if (v.is_string()) return In(kStrMethods, name);
  if (v.is_dict()) return In(kDictMethods, name);
  if (v.is_list()) return In(kListMethods, name);
  return false;
}

// --- the interpreter --------------------------------------------------------------------------

using FilterFn = Result<Value> (*)(Interp&, const Value&, const Args&);
using TestFn = Result<bool> (*)(Interp&, const Value&, const Args&);
const std::unordered_map<std::string_view, FilterFn>& Filters();
const std::unordered_map<std::string_view, TestFn>& Tests();

class Interp {
 public:
  explicit Interp(const RenderContext& ctx) : ctx_(ctx) {
    auto builtins = std::make_shared<Frame>();
    auto add = [&](const char* name, BuiltinFn fn) {
      builtins->vars.emplace(name, Value::FromObject(std::make_shared<BuiltinFunction>(name, fn)));
    };
    add("range", &Interp::FnRange);
    add("namespace", &Interp::FnNamespace);
    add("dict", &Interp::FnDict);
    add("raise_exception", &Interp::FnRaiseException);
    add("strftime_now", &Interp::FnStrftimeNow);
    auto globals = std::make_shared<Frame>();
    globals->parent = builtins;
    if (ctx.variables != nullptr) {
      for (const auto& [k, v] : ctx.variables->items()) {
        if (k.is_string()) globals->vars[k.str()] = v;
      }
    }
    frame_ = std::make_shared<Frame>();
    frame_->parent = globals;
  }

  ~Interp() {
    // Break namespace reference cycles ({% set ns.self = ns %}).
    for (const auto& ns : namespaces_) ns->attrs.clear();
  }

  Result<std::string> Run(const Program& program) {
    std::string out;
    DeclareUndefined(*frame_, program.undefined_at_entry);
    KILN_RETURN_IF_ERROR(ExecBody(program.body, out));
    return out;
  }

  // Gives a new scope the names Jinja2 starts out undefined there (Stmt::body_undefined).
  static void DeclareUndefined(Frame& frame, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      frame.vars[name] = Value::MakeUndefined(fmt::format("'{}' is undefined", name));
    }
  }

  // --- helpers used by filters and builtins ---

  const RenderContext& ctx() const { return ctx_; }

  Status Step() {
    if (++steps_ > ctx_.limits.max_steps) {
      return Err(fmt::format("the template ran more than {} steps (an unbounded loop?)",
                             ctx_.limits.max_steps));
    }
    return Status::OK();
  }

  Status CheckSize(size_t bytes) const {
    if (bytes > ctx_.limits.max_string_bytes) {
      return Err(fmt::format("the template built a string of more than {} bytes",
                             ctx_.limits.max_string_bytes));
    }
    return Status::OK();
  }

  Result<Value> MakeString(std::string s) const {
    KILN_RETURN_IF_ERROR(CheckSize(s.size()));
    return Value::String(std::move(s));
  }

  Value NewNamespace(std::vector<std::pair<std::string, Value>> attrs) {
    auto ns = std::make_shared<NamespaceData>();
    for (auto& [k, v] : attrs) ns->Set(k, std::move(v));
    namespaces_.push_back(ns);
    return Value::Namespace(std::move(ns));
  }

  // Python's iter(): the items a for loop, |list or |join sees.
  Result<std::vector<Value>> Iterate(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return std::vector<Value>();
      case Value::Kind::kString: {
        std::vector<Value> out;
        for (char32_t c : DecodeUtf8(v.str())) {
          std::string s;
          AppendUtf8(s, c);
          out.push_back(Value::String(std::move(s)));
        }
        return out;
      }
      case Value::Kind::kList:
        return v.list().items;
      case Value::Kind::kDict: {
        std::vector<Value> out;
        out.reserve(v.dict().size());
        for (const auto& [k, val] : v.dict().items()) out.push_back(k);
        return out;
      }
      case Value::Kind::kGenerator: {
        GeneratorData& g = *v.generator();
        if (g.consumed) return std::vector<Value>();
        g.consumed = true;
        if (!g.error.ok()) return g.error;
        return g.items;
      }
      default:
        return Err(fmt::format("'{}' object is not iterable", v.TypeName()));
    }
  }

  Result<int64_t> Length(const Value& v) const {
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return int64_t{0};
      case Value::Kind::kString:
        return static_cast<int64_t>(CodepointCount(v.str()));
      case Value::Kind::kList:
        return static_cast<int64_t>(v.list().items.size());
      case Value::Kind::kDict:
        return static_cast<int64_t>(v.dict().size());
      default:
        return Err(fmt::format("object of type '{}' has no len()", v.TypeName()));
    }
  }

  // Python's `item in container`.
  Result<bool> Contains(const Value& container, const Value& item) {
    switch (container.kind()) {
      case Value::Kind::kString:
        if (!item.is_string()) {
          return Err(fmt::format("'in <string>' requires string as left operand, not {}",
                                 item.TypeName()));
        }
        return container.str().find(item.str()) != std::string::npos;
      case Value::Kind::kList:
        for (const Value& x : container.list().items) {
          if (Equals(x, item)) return true;
        }
        return false;
      case Value::Kind::kDict:
        if (item.is_list() && !item.is_tuple()) return Err("unhashable type: 'list'");
        if (item.is_dict()) return Err("unhashable type: 'dict'");
        return container.dict().Find(item) != nullptr;
      case Value::Kind::kUndefined:
      case Value::Kind::kGenerator: {
        KILN_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(container));
        for (const Value& x : items) {
          if (Equals(x, item)) return true;
        }
        return false;
      }
      default:
        return Err(fmt::format("argument of type '{}' is not iterable", container.TypeName()));
    }
  }

  // Jinja's environment.getattr: Python attribute first, then item.
  Result<Value> GetAttr(const Value& obj, std::string_view name) {
    if (obj.is_undefined()) return UndefinedError(obj);
    if (!name.empty() && name[0] == '_') {
      return Value::MakeUndefined(
          fmt::format("access to attribute '{}' of '{}' object is unsafe", name, obj.TypeName()));
    }
    if (HasMethod(obj, name)) {
      return Value::FromObject(std::make_shared<BoundMethod>(obj, std::string(name)));
    }
    if (obj.is_dict()) {
      if (const Value* v = obj.dict().FindString(name)) return *v;
    } else if (obj.is_namespace()) {
      if (const Value* v = obj.ns()->Find(name)) return *v;
    } else if (obj.is_object()) {
      if (auto* loop = dynamic_cast<const LoopObject*>(obj.object().get())) {
        return LoopAttr(obj, *loop, name);
      }
    }
    return Value::MakeUndefined(
        fmt::format("'{} object' has no attribute '{}'", obj.TypeName(), name));
  }

  Value LoopAttr(const Value& self, const LoopObject& loop, std::string_view name) const {
    const auto& items = *loop.items;
    const int64_t n = static_cast<int64_t>(items.size());
    const int64_t i = loop.index0;
    if (name == "index0") return Value::Int(i);
    if (name == "index") return Value::Int(i + 1);
    if (name == "revindex") return Value::Int(n - i);
    if (name == "revindex0") return Value::Int(n - i - 1);
    if (name == "first") return Value::Bool(i == 0);
    if (name == "last") return Value::Bool(i == n - 1);
    if (name == "length") return Value::Int(n);
    if (name == "depth") return Value::Int(1);
    if (name == "depth0") return Value::Int(0);
    if (name == "previtem") {
      return i > 0 ? items[i - 1] : Value::MakeUndefined("there is no previous item");
    }
    if (name == "nextitem") {
      return i + 1 < n ? items[i + 1] : Value::MakeUndefined("there is no next item");
    }
    if (name == "cycle") return Value::FromObject(std::make_shared<BoundMethod>(self, "cycle"));
    return Value::MakeUndefined(fmt::format("'LoopContext object' has no attribute '{}'", name));
  }

  // Jinja's environment.getitem: item first, then attribute for string keys.
  Result<Value> GetItem(const Value& obj, const Value& key) {
    if (obj.is_undefined()) return UndefinedError(obj);
    if (obj.is_dict()) {
      if (!(key.is_list() && !key.is_tuple()) && !key.is_dict()) {
        if (const Value* v = obj.dict().Find(key)) return *v;
      }
    } else if (obj.is_list() || obj.is_string()) {
      if (key.is_integral()) {
        const int64_t len = obj.is_list() ? static_cast<int64_t>(obj.list().items.size())
                                          : static_cast<int64_t>(CodepointCount(obj.str()));
        int64_t i = key.as_int();
        if (i < 0) i += len;
        if (i < 0 || i >= len) {
          return Value::MakeUndefined(
              fmt::format("{} object has no element {}", obj.TypeName(), key.as_int()));
        }
        if (obj.is_list()) return obj.list().items[static_cast<size_t>(i)];
        const std::vector<char32_t> cps = DecodeUtf8(obj.str());
        std::string s;
        AppendUtf8(s, cps[static_cast<size_t>(i)]);
        return Value::String(std::move(s));
      }
    }
    if (key.is_string()) return GetAttr(obj, key.str());
    return Value::MakeUndefined(fmt::format("{} object has no element", obj.TypeName()));
  }

  Result<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
    // Jinja compiles a slice to a plain Python subscript (no environment.getitem fallback),
    // so everything but a sequence is an error.
    if (obj.is_undefined()) return UndefinedError(obj);
    if (!obj.is_list() && !obj.is_string()) {
      if (obj.is_dict()) return Err("unhashable type: 'slice'");
      return Err(fmt::format("'{}' object is not subscriptable", obj.TypeName()));
    }
    for (const Value* v : {&start, &stop, &step}) {
      if (!v->is_none() && !v->is_integral()) {
        return Err("slice indices must be integers or None or have an __index__ method");
      }
    }
    if (obj.is_list()) {
      const auto& items = obj.list().items;
      KILN_ASSIGN_OR_RETURN(auto idx,
                            SliceIndices(static_cast<int64_t>(items.size()), start, stop, step));
      std::vector<Value> out;
      out.reserve(idx.size());
      for (int64_t i : idx) out.push_back(items[static_cast<size_t>(i)]);
      return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
    }
    const std::vector<char32_t> cps = DecodeUtf8(obj.str());
    KILN_ASSIGN_OR_RETURN(auto idx,
                          SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step));
    std::string out;
    for (int64_t i : idx) AppendUtf8(out, cps[static_cast<size_t>(i)]);
    return Value::String(std::move(out));
  }

  // --- expressions ---

  Result<Value> Eval(const Expr& e) {
    if (++depth_ > ctx_.limits.max_depth) {
      --depth_;
      return WithLine(Err("the template nests too deeply (unbounded macro recursion?)"), e.line);
    }
    Result<Value> r = EvalInner(e);
    --depth_;
    if (!r.ok()) return WithLine(r.status(), e.line);
    return r;
  }

  Result<Value> Lookup(std::string_view name) const {
    for (const Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return it->second;
    }
    return Value::MakeUndefined(fmt::format("'{}' is undefined", name));
  }

  Result<Args> EvalArgs(const Expr& e) {
    Args args;
    args.pos.reserve(e.items.size());
    for (const ExprPtr& a : e.items) {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*a));
      args.pos.push_back(std::move(v));
    }
    for (const auto& [k, a] : e.kwargs) {
      KILN_ASSIGN_OR_RETURN(Value v, Eval(*a));
      args.kw.emplace_back(k, std::move(v));
    }
    return args;
  }

  Result<Value> EvalInner(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kConst:
        return e.value;
      case ExprKind::kName:
        return Lookup(e.name);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        items.reserve(e.items.size());
        for (const ExprPtr& x : e.items) {
          KILN_ASSIGN_OR_RETURN(Value v, Eval(*x));
          items.push_back(std::move(v));
        }
        return e.kind == ExprKind::kList ? Value::List(std::move(items))
                                         : Value::Tuple(std::move(items));
      }
      case ExprKind::kDict: {
        DictData dict;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          KILN_ASSIGN_OR_RETURN(Value k, Eval(*e.items[i]));
          KILN_ASSIGN_OR_RETURN(Value v, Eval(*e.items[i + 1]));
          if ((k.is_list() && !k.is_tuple()) || k.is_dict() || k.is_namespace() ||
              k.is_generator()) {
            return Err(fmt::format("unhashable type: '{}'", k.TypeName()));
          }
          dict.Set(std::move(k), std::move(v));
        }
        return Value::Dict(std::move(dict));
      }
      case ExprKind::kGetattr: {
        KILN_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
        return GetAttr(obj, e.name);
      }
      case ExprKind::kGetitem: {
        KILN_ASSIGN_OR_RETURN(Value obj, Eval(*e.a));
        if (e.b->kind == ExprKind::kSlice) {
          Value parts[3] = {Value::MakeNone(), Value::MakeNone(), Value::MakeNone()};
          const Expr* exprs[3] = {e.b->a.get(), e.b->b.get(), e.b->c.get()};
          for (int i = 0; i < 3; ++i) {
            if (exprs[i] != nullptr) {
              KILN_ASSIGN_OR_RETURN(parts[i], Eval(*exprs[i]));
            }
          }
          return Slice(obj, parts[0], parts[1], parts[2]);
        }
        KILN_ASSIGN_OR_RETURN(Value key, Eval(*e.b));
        return GetItem(obj, key);
      }
      case ExprKind::kSlice:
        return Err("a slice is only valid inside []");
      case ExprKind::kCall:
        return EvalCall(e);
      case ExprKind::kFilter: {
        KILN_ASSIGN_OR_RETURN(Value input, Eval(*e.a));
        return ApplyFilter(e, input);
      }
      case ExprKind::kTest: {
        KILN_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
        KILN_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
        KILN_ASSIGN_OR_RETURN(bool b, RunTest(e.name, v, args));
        return Value::Bool(b);
      }
      case ExprKind::kNeg:
      case ExprKind::kPos: {
        KILN_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
        if (v.is_undefined()) return UndefinedError(v);
        if (v.is_float())
          return Value::Float(e.kind == ExprKind::kNeg ? -v.as_float() : v.as_float());
        if (!v.is_integral()) {
          return Err(fmt::format("bad operand type for unary {}: '{}'",
                                 e.kind == ExprKind::kNeg ? '-' : '+', v.TypeName()));
        }
        if (e.kind == ExprKind::kPos) return Value::Int(v.as_int());
        if (v.as_int() == std::numeric_limits<int64_t>::min()) return Err("integer overflow");
        return Value::Int(-v.as_int());
      }
      case ExprKind::kNot: {
        KILN_ASSIGN_OR_RETURN(Value v, Eval(*e.a));
        return Value::Bool(!Truthy(v));
      }
      case ExprKind::kBinary: {
        KILN_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
        KILN_ASSIGN_OR_RETURN(Value b, Eval(*e.b));
        return BinaryOp(e.bin_op, a, b);
      }
      case ExprKind::kAnd: {
        KILN_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
        if (!Truthy(a)) return a;
        return Eval(*e.b);
      }
      case ExprKind::kOr: {
        KILN_ASSIGN_OR_RETURN(Value a, Eval(*e.a));
        if (Truthy(a)) return a;
        return Eval(*e.b);
      }
      case ExprKind::kConcat: {
        std::string out;
        for (const ExprPtr& x : e.items) {
          KILN_ASSIGN_OR_RETURN(Value v, Eval(*x));
          KILN_ASSIGN_OR_RETURN(std::string s, ToStr(v));
          out += s;
          KILN_RETURN_IF_ERROR(CheckSize(out.size()));
        }
        return Value::String(std::move(out));
      }
      case ExprKind::kCompare: {
        KILN_ASSIGN_OR_RETURN(Value left, Eval(*e.a));
        for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
          KILN_ASSIGN_OR_RETURN(Value right, Eval(*e.items[i]));
          KILN_ASSIGN_OR_RETURN(bool ok, CompareOp(e.cmp_ops[i], left, right));
          if (!ok) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case ExprKind::kCondExpr: {
        KILN_ASSIGN_OR_RETURN(Value test, Eval(*e.a));
        if (Truthy(test)) return Eval(*e.b);
        if (e.c) return Eval(*e.c);
        return Value::MakeUndefined(fmt::format(
            "the inline if-expression on line {} evaluated to false and no else section was "
            "defined",
            e.line));
      }
    }
    return Err("unknown expression");
  }

  Result<bool> CompareOp(CmpOp op, const Value& a, const Value& b) {
    switch (op) {
      case CmpOp::kEq:
        return Equals(a, b);
      case CmpOp::kNe:
        return !Equals(a, b);
      case CmpOp::kIn:
        return Contains(b, a);
      case CmpOp::kNotIn: {
        KILN_ASSIGN_OR_RETURN(bool in, Contains(b, a));
        return !in;
      }
      default:
        break;
    }
    if (a.is_undefined()) return UndefinedError(a);
    if (b.is_undefined()) return UndefinedError(b);
    Result<int> c = Compare(a, b);
    if (!c.ok()) {
      const char* sym = op == CmpOp::kLt   ? "<"
                        : op == CmpOp::kLe ? "<="
                        : op == CmpOp::kGt ? ">"
                                           : ">=";
      return Err(fmt::format("'{}' not supported between instances of '{}' and '{}'", sym,
                             a.TypeName(), b.TypeName()));
    }
    switch (op) {
      case CmpOp::kLt:
        return *c < 0;
      case CmpOp::kLe:
        return *c <= 0;
      case CmpOp::kGt:
        return *c > 0;
      default:
        return *c >= 0;
    }
  }

  Result<Value> BinaryOp(BinOp op, const Value& a, const Value& b) {
    if (a.is_undefined()) return UndefinedError(a);
    if (b.is_undefined()) return UndefinedError(b);
    static constexpr const char* kSym[] = {"+", "-", "*", "/", "//", "%", "**"};
    auto unsupported = [&]() {
      return Err(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'",
                             kSym[static_cast<int>(op)], a.TypeName(), b.TypeName()));
    };
    const bool ints = a.is_integral() && b.is_integral();
    const bool nums = a.is_number() && b.is_number();
    switch (op) {
      case BinOp::kAdd:
        if (ints) {
          int64_t r;
          if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Err("integer overflow");
          return Value::Int(r);
        }
        if (nums) return Value::Float(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) {
          KILN_RETURN_IF_ERROR(CheckSize(a.str().size() + b.str().size()));
          return Value::String(a.str() + b.str());
        }
        if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
          std::vector<Value> items = a.list().items;
          items.insert(items.end(), b.list().items.begin(), b.list().items.end());
          return a.is_tuple() ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
        }
        return unsupported();
      case BinOp::kSub:
        if (ints) {
          int64_t r;
          if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return Err("integer overflow");
          return Value::Int(r);
        }
        if (nums) return Value::Float(a.as_float() - b.as_float());
        return unsupported();
      case BinOp::kMul: {
        if (ints) {
          int64_t r;
          if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Err("integer overflow");
          return Value::Int(r);
        }
        if (nums) return Value::Float(a.as_float() * b.as_float());
        const Value* seq = a.is_integral() ? &b : &a;
        const Value* times = a.is_integral() ? &a : &b;
        if (!times->is_integral() || !(seq->is_string() || seq->is_list())) return unsupported();
        const int64_t n = std::max<int64_t>(times->as_int(), 0);
        if (seq->is_string()) {
          const size_t unit = seq->str().size();
          if (unit != 0 && static_cast<uint64_t>(n) > ctx_.limits.max_string_bytes / unit) {
            return CheckSize(ctx_.limits.max_string_bytes + 1);
          }
          std::string out;
          out.reserve(unit * static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) out += seq->str();
          return Value::String(std::move(out));
        }
        const size_t unit = seq->list().items.size();
        if (unit != 0 && static_cast<uint64_t>(n) > ctx_.limits.max_string_bytes / unit / 16) {
          return Err("the template built a list that is too long");
        }
        std::vector<Value> items;
        for (int64_t i = 0; i < n; ++i) {
          items.insert(items.end(), seq->list().items.begin(), seq->list().items.end());
        }
        return seq->is_tuple() ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
      }
      case BinOp::kDiv:
        if (!nums) return unsupported();
        if (b.as_float() == 0.0) return Err("division by zero");
        return Value::Float(a.as_float() / b.as_float());
      case BinOp::kFloorDiv:
      case BinOp::kMod: {
        if (a.is_string() && op == BinOp::kMod) {
          return Err("printf-style string formatting ('%' on a string) is not supported");
        }
        if (!nums) return unsupported();
        if (ints) {
          const int64_t x = a.as_int(), y = b.as_int();
          if (y == 0) return Err("integer division or modulo by zero");
          if (x == std::numeric_limits<int64_t>::min() && y == -1) {
            if (op == BinOp::kMod) return Value::Int(0);
            return Err("integer overflow");
          }
          int64_t q = x / y, r = x % y;
          if (r != 0 && ((r < 0) != (y < 0))) {
            q -= 1;
            r += y;
          }
          return Value::Int(op == BinOp::kFloorDiv ? q : r);
        }
        const double x = a.as_float(), y = b.as_float();
        if (y == 0.0) return Err("float division by zero");
        double mod = std::fmod(x, y);
        double div = (x - mod) / y;
        if (mod != 0.0) {
          if ((y < 0) != (mod < 0)) {
            mod += y;
            div -= 1.0;
          }
        } else {
          mod = std::copysign(0.0, y);
        }
        if (op == BinOp::kMod) return Value::Float(mod);
        double floordiv;
        if (div != 0.0) {
          floordiv = std::floor(div);
          if (div - floordiv > 0.5) floordiv += 1.0;
        } else {
          floordiv = std::copysign(0.0, x / y);
        }
        return Value::Float(floordiv);
      }
      case BinOp::kPow: {
        if (!nums) return unsupported();
        if (ints && b.as_int() >= 0) {
          int64_t result = 1, base = a.as_int(), e = b.as_int();
          while (e > 0) {
            if (e & 1) {
              if (__builtin_mul_overflow(result, base, &result)) return Err("integer overflow");
            }
            e >>= 1;
            if (e > 0 && __builtin_mul_overflow(base, base, &base)) return Err("integer overflow");
          }
          return Value::Int(result);
        }
        const double x = a.as_float(), y = b.as_float();
        if (x == 0.0 && y < 0) return Err("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) return Err("a negative number to a fractional power");
        return Value::Float(std::pow(x, y));
      }
    }
    return unsupported();
  }

  Result<Value> EvalCall(const Expr& e) {
    Value callee;
    if (e.a->kind == ExprKind::kGetattr) {
      KILN_ASSIGN_OR_RETURN(Value obj, Eval(*e.a->a));
      if (HasMethod(obj, e.a->name)) {
        KILN_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
        return CallMethod(obj, e.a->name, args);
      }
      KILN_ASSIGN_OR_RETURN(callee, GetAttr(obj, e.a->name));
    } else {
      KILN_ASSIGN_OR_RETURN(callee, Eval(*e.a));
    }
    KILN_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
    return CallValue(callee, args);
  }

  Result<Value> CallValue(const Value& callee, const Args& args) {
    if (callee.is_undefined()) return UndefinedError(callee);
    if (callee.is_object()) {
      const Object* o = callee.object().get();
      if (auto* fn = dynamic_cast<const BuiltinFunction*>(o)) return fn->fn(*this, args);
      if (auto* macro = dynamic_cast<const MacroObject*>(o)) return CallMacro(*macro, args);
      if (auto* method = dynamic_cast<const BoundMethod*>(o)) {
        return CallMethod(method->self, method->name, args);
      }
    }
    return Err(fmt::format("'{}' object is not callable", callee.TypeName()));
  }

  Result<Value> CallMacro(const MacroObject& macro, const Args& args) {
    const Stmt& def = *macro.def;
    if (args.pos.size() > def.params.size()) {
      return Err(fmt::format("macro '{}' takes not more than {} argument(s)", def.name,
                             def.params.size()));
    }
    auto frame = std::make_shared<Frame>();
    frame->parent = macro.closure.lock();
    DeclareUndefined(*frame, def.body_undefined);
    std::vector<bool> bound(def.params.size(), false);
    for (size_t i = 0; i < args.pos.size(); ++i) {
      frame->vars[def.params[i]] = args.pos[i];
      bound[i] = true;
    }
    for (const auto& [k, v] : args.kw) {
      auto it = std::find(def.params.begin(), def.params.end(), k);
      if (it == def.params.end()) {
        return Err(fmt::format("macro '{}' has no argument named '{}'", def.name, k));
      }
      const size_t i = static_cast<size_t>(it - def.params.begin());
      if (bound[i]) {
        return Err(fmt::format("macro '{}' got multiple values for argument '{}'", def.name, k));
      }
      frame->vars[k] = v;
      bound[i] = true;
    }
    std::shared_ptr<Frame> saved = frame_;
    frame_ = frame;
    const size_t first_default = def.params.size() - def.defaults.size();
    for (size_t i = 0; i < def.params.size(); ++i) {
      if (bound[i]) continue;
      if (i >= first_default) {
        Result<Value> d = Eval(*def.defaults[i - first_default]);
        if (!d.ok()) {
          frame_ = saved;
          return d.status();
        }
        frame->vars[def.params[i]] = *d;
      } else {
        frame->vars[def.params[i]] =
            Value::MakeUndefined(fmt::format("parameter '{}' was not provided", def.params[i]));
      }
    }
    std::string out;
    ++depth_;
    Status s = depth_ > ctx_.limits.max_depth
                   ? Err("the template nests too deeply (unbounded macro recursion?)")
                   : ExecBody(def.body, out);
    --depth_;
    frame_ = saved;
    flow_ = Flow::kNormal;
    KILN_RETURN_IF_ERROR(s);
    return Value::String(std::move(out));
  }

  Result<Value> CallMethod(const Value& self, std::string_view name, const Args& args) {
    if (self.is_string()) return StrMethod(self.str(), name, args);
    if (self.is_dict()) return DictMethod(self, name, args);
    if (self.is_list()) return ListMethod(self, name, args);
    if (self.is_object()) {
      if (auto* loop = dynamic_cast<const LoopObject*>(self.object().get())) {
        if (name == "cycle") {
          if (args.pos.empty()) return Err("no items for cycling given");
          return args.pos[static_cast<size_t>(loop->index0) % args.pos.size()];
        }
      }
    }
    return Err(fmt::format("'{}' object has no method '{}'", self.TypeName(), name));
  }

  Result<std::optional<std::string>> OptStr(const std::optional<Value>& v, std::string_view what) {
    if (IsNoneLike(v)) return std::optional<std::string>();
    if (!v->is_string()) {
      return Err(fmt::format("{} must be a string or None, not '{}'", what, v->TypeName()));
    }
    return std::optional<std::string>(v->str());
  }

  Result<Value> StrMethod(const std::string& s, std::string_view name, const Args& args) {
    const std::string what = fmt::format("str.{}()", name);
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"chars"}));
      KILN_ASSIGN_OR_RETURN(auto chars, OptStr(p[0], "chars"));
      return Value::String(StripChars(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"sep", "maxsplit"}));
      KILN_ASSIGN_OR_RETURN(auto sep, OptStr(p[0], "sep"));
      int64_t maxsplit = -1;
      if (p[1].has_value()) {
        KILN_ASSIGN_OR_RETURN(maxsplit, ToIndex(*p[1], "maxsplit"));
      }
      KILN_ASSIGN_OR_RETURN(auto parts, Split(s, sep, maxsplit, name == "rsplit"));
      std::vector<Value> out;
      for (auto& part : parts) out.push_back(Value::String(std::move(part)));
      return Value::List(std::move(out));
    }
    if (name == "splitlines") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {}));
      std::vector<Value> out;
      for (auto& line : SplitLines(s)) out.push_back(Value::String(std::move(line)));
      return Value::List(std::move(out));
    }
    if (name == "startswith" || name == "endswith") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"prefix"}));
      if (!p[0].has_value()) return Err(fmt::format("{} takes exactly one argument", what));
      std::vector<std::string> candidates;
      if (p[0]->is_string()) {
        candidates.push_back(p[0]->str());
      } else if (p[0]->is_tuple()) {
        for (const Value& v : p[0]->list().items) {
          if (!v.is_string()) return Err(fmt::format("{}: tuple items must be strings", what));
          candidates.push_back(v.str());
        }
      } else {
        return Err(fmt::format("{} argument must be str or a tuple of str, not {}", what,
                               p[0]->TypeName()));
      }
      for (const std::string& c : candidates) {
        const bool hit =
            name == "startswith"
                ? s.compare(0, c.size(), c) == 0
                : s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0;
        if (hit) return Value::Bool(true);
      }
      return Value::Bool(false);
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {}));
      if (name == "upper") return Value::String(PyUpper(s));
      if (name == "lower") return Value::String(PyLower(s));
      if (name == "title") return Value::String(TitleMethod(s));
      return Value::String(Capitalize(s));
    }
    if (name == "replace") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"old", "new", "count"}));
      if (!p[0].has_value() || !p[1].has_value() || !p[0]->is_string() || !p[1]->is_string()) {
        return Err(fmt::format("{} needs two string arguments", what));
      }
      int64_t count = -1;
      if (p[2].has_value()) {
        KILN_ASSIGN_OR_RETURN(count, ToIndex(*p[2], "count"));
      }
      return MakeString(Replace(s, p[0]->str(), p[1]->str(), count));
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" ||
        name == "count") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"sub"}));
      if (!p[0].has_value() || !p[0]->is_string()) {
        return Err(fmt::format("{} needs a string argument", what));
      }
      const std::string& sub = p[0]->str();
      if (name == "count") {
        if (sub.empty()) return Value::Int(static_cast<int64_t>(CodepointCount(s)) + 1);
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) {
          ++n;
        }
        return Value::Int(n);
      }
      const size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (at == std::string::npos) {
        if (name == "index" || name == "rindex") return Err("substring not found");
        return Value::Int(-1);
      }
      return Value::Int(CpIndex(s, at));
    }
    if (name == "join") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"iterable"}));
      if (!p[0].has_value()) return Err("str.join() takes exactly one argument");
      KILN_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*p[0]));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          return Err(fmt::format("sequence item {}: expected str instance, {} found", i,
                                 items[i].TypeName()));
        }
        if (i) out += s;
        out += items[i].str();
        KILN_RETURN_IF_ERROR(CheckSize(out.size()));
      }
      return Value::String(std::move(out));
    }
    if (name == "removeprefix" || name == "removesuffix") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"affix"}));
      if (!p[0].has_value() || !p[0]->is_string()) {
        return Err(fmt::format("{} needs a string argument", what));
      }
      const std::string& a = p[0]->str();
      if (name == "removeprefix" && s.compare(0, a.size(), a) == 0) {
        return Value::String(s.substr(a.size()));
      }
      if (name == "removesuffix" && !a.empty() && s.size() >= a.size() &&
          s.compare(s.size() - a.size(), a.size(), a) == 0) {
        return Value::String(s.substr(0, s.size() - a.size()));
      }
      return Value::String(s);
    }
    if (name == "partition" || name == "rpartition") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"sep"}));
      if (!p[0].has_value() || !p[0]->is_string()) {
        return Err(fmt::format("{} needs a string argument", what));
      }
      const std::string& sep = p[0]->str();
      if (sep.empty()) return Err("empty separator");
      const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
      if (at == std::string::npos) {
        if (name == "partition") {
          return Value::Tuple({Value::String(s), Value::String(""), Value::String("")});
        }
        return Value::Tuple({Value::String(""), Value::String(""), Value::String(s)});
      }
      return Value::Tuple({Value::String(s.substr(0, at)), Value::String(sep),
                           Value::String(s.substr(at + sep.size()))});
    }
    KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {}));
    return StrPredicate(name, s);
  }

  Result<Value> DictMethod(const Value& self, std::string_view name, const Args& args) {
    const std::string what = fmt::format("dict.{}()", name);
    const DictData& d = self.dict();
    if (name == "get") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"key", "default"}));
      if (!p[0].has_value()) return Err("dict.get() needs a key");
      if (const Value* v = d.Find(*p[0])) return *v;
      return p[1].has_value() ? *p[1] : Value::MakeNone();
    }
    if (name == "items" || name == "keys" || name == "values") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {}));
      std::vector<Value> out;
      for (const auto& [k, v] : d.items()) {
        if (name == "items") {
          out.push_back(Value::Tuple({k, v}));
        } else {
          out.push_back(name == "keys" ? k : v);
        }
      }
      return Value::List(std::move(out));
    }
    if (name == "copy") return self;
    return Err(fmt::format("{} would modify a dict, which the template sandbox forbids", what));
  }

  Result<Value> ListMethod(const Value& self, std::string_view name, const Args& args) {
    const std::string what = fmt::format("list.{}()", name);
    const auto& items = self.list().items;
    if (name == "count" || name == "index") {
      KILN_ASSIGN_OR_RETURN(auto p, Bind(what, args, {"value"}));
      if (!p[0].has_value()) return Err(fmt::format("{} takes exactly one argument", what));
      int64_t n = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!Equals(items[i], *p[0])) continue;
        if (name == "index") return Value::Int(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") return Err("value is not in list");
      return Value::Int(n);
    }
    if (name == "copy") return self;
    return Err(fmt::format("{} would modify a list, which the template sandbox forbids", what));
  }

  // --- filters and tests ---

  Result<Value> ApplyFilter(const Expr& e, const Value& input) {
    auto it = Filters().find(e.name);
    if (it == Filters().end()) return Err(fmt::format("filter '{}' is not supported", e.name));
    KILN_ASSIGN_OR_RETURN(Args args, EvalArgs(e));
    return it->second(*this, input, args);
  }

  // A filter chain parsed with a missing innermost operand ({% filter %}, {% set %} blocks).
  Result<Value> ApplyFilterChain(const Expr& e, const Value& input) {
    Value operand = input;
    if (e.a) {
      KILN_ASSIGN_OR_RETURN(operand, ApplyFilterChain(*e.a, input));
    }
    Result<Value> r = ApplyFilter(e, operand);
    if (!r.ok()) return WithLine(r.status(), e.line);
    return r;
  }

  Result<Value> CallFilterByName(std::string_view name, const Value& input, const Args& args) {
    auto it = Filters().find(name);
    if (it == Filters().end()) return Err(fmt::format("filter '{}' is not supported", name));
    return it->second(*this, input, args);
  }

  Result<bool> RunTest(std::string_view name, const Value& v, const Args& args) {
    auto it = Tests().find(name);
    if (it == Tests().end()) return Err(fmt::format("test '{}' is not supported", name));
    return it->second(*this, v, args);
  }

  // --- statements ---

  enum class Flow { kNormal, kBreak, kContinue };

  Status ExecBody(const Body& body, std::string& out) {
    for (const auto& stmt : body) {
      KILN_RETURN_IF_ERROR(Step());
      Status s = Exec(*stmt, out);
      if (!s.ok()) return WithLine(s, stmt->line);
      if (flow_ != Flow::kNormal) return Status::OK();
    }
    return Status::OK();
  }

  Status Assign(const Stmt& s, Value v) {
    if (!s.ns_attr.empty()) {
      KILN_ASSIGN_OR_RETURN(Value ns, Lookup(s.targets[0]));
      if (!ns.is_namespace()) {
        return Err(fmt::format("cannot assign attribute '{}' on '{}': it is not a namespace",
                               s.ns_attr, s.targets[0]));
      }
      ns.ns()->Set(s.ns_attr, std::move(v));
      return Status::OK();
    }
    if (!s.unpack) {
      frame_->vars[s.targets[0]] = std::move(v);
      return Status::OK();
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Value> items, Unpack(v, s.targets.size()));
    for (size_t i = 0; i < items.size(); ++i) frame_->vars[s.targets[i]] = std::move(items[i]);
    return Status::OK();
  }

  Result<std::vector<Value>> Unpack(const Value& v, size_t n) {
    if (!(v.is_list() || v.is_string() || v.is_dict() || v.is_generator())) {
      return Err(fmt::format("cannot unpack non-iterable {} object", v.TypeName()));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    if (items.size() > n) return Err(fmt::format("too many values to unpack (expected {})", n));
    if (items.size() < n) {
      return Err(fmt::format("not enough values to unpack (expected {}, got {})", n, items.size()));
    }
    return items;
  }

  Status Append(std::string& out, std::string_view s) const {
    out.append(s);
    return CheckSize(out.size());
  }

  // Runs `body` in a new scope whose parent is the current one.
  Status ExecScoped(const Body& body, const std::vector<std::string>& undefined, std::string& out) {
    auto frame = std::make_shared<Frame>();
    frame->parent = frame_;
    DeclareUndefined(*frame, undefined);
    std::shared_ptr<Frame> saved = frame_;
    frame_ = frame;
    Status s = ExecBody(body, out);
    frame_ = saved;
    return s;
  }

  Status Exec(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText:
        return Append(out, s.text);
      case StmtKind::kOutput: {
        KILN_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        KILN_ASSIGN_OR_RETURN(std::string text, ToStr(v));
        return Append(out, text);
      }
      case StmtKind::kIf:
        for (const auto& [test, body] : s.branches) {
          KILN_ASSIGN_OR_RETURN(Value t, Eval(*test));
          if (Truthy(t)) return ExecBody(body, out);
        }
        return ExecBody(s.else_body, out);
      case StmtKind::kFor:
        return ExecFor(s, out);
      case StmtKind::kSet: {
        KILN_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        return Assign(s, std::move(v));
      }
      case StmtKind::kSetBlock: {
        std::string text;
        KILN_RETURN_IF_ERROR(ExecScoped(s.body, s.body_undefined, text));
        Value v = Value::String(std::move(text));
        if (s.expr) {
          KILN_ASSIGN_OR_RETURN(v, ApplyFilterChain(*s.expr, v));
        }
        return Assign(s, std::move(v));
      }
      case StmtKind::kMacro:
        macro_scopes_.push_back(frame_);
        frame_->vars[s.name] = Value::FromObject(std::make_shared<MacroObject>(&s, frame_));
        return Status::OK();
      case StmtKind::kBreak:
        flow_ = Flow::kBreak;
        return Status::OK();
      case StmtKind::kContinue:
        flow_ = Flow::kContinue;
        return Status::OK();
      case StmtKind::kFilterBlock: {
        std::string text;
        KILN_RETURN_IF_ERROR(ExecScoped(s.body, s.body_undefined, text));
        KILN_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(*s.expr, Value::String(std::move(text))));
        KILN_ASSIGN_OR_RETURN(std::string rendered, ToStr(v));
        return Append(out, rendered);
      }
      case StmtKind::kWith: {
        auto frame = std::make_shared<Frame>();
        frame->parent = frame_;
        DeclareUndefined(*frame, s.body_undefined);
        for (size_t i = 0; i < s.targets.size(); ++i) {
          KILN_ASSIGN_OR_RETURN(Value v, Eval(*s.values[i]));
          frame->vars[s.targets[i]] = std::move(v);
        }
        std::shared_ptr<Frame> saved = frame_;
        frame_ = frame;
        Status st = ExecBody(s.body, out);
        frame_ = saved;
        return st;
      }
      case StmtKind::kScope:
        return ExecScoped(s.body, s.body_undefined, out);
      case StmtKind::kSequence:
        return ExecBody(s.body, out);
    }
    return Err("unknown statement");
  }

  Status ExecFor(const Stmt& s, std::string& out) {
    KILN_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
    KILN_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
    std::shared_ptr<Frame> outer = frame_;
    auto bind = [&](Frame& frame, const Value& item) -> Status {
      if (!s.unpack) {
        frame.vars[s.targets[0]] = item;
        return Status::OK();
      }
      KILN_ASSIGN_OR_RETURN(std::vector<Value> parts, Unpack(item, s.targets.size()));
      for (size_t i = 0; i < parts.size(); ++i) frame.vars[s.targets[i]] = std::move(parts[i]);
      return Status::OK();
    };
    if (s.cond) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        KILN_RETURN_IF_ERROR(Step());
        auto frame = std::make_shared<Frame>();
        frame->parent = outer;
        KILN_RETURN_IF_ERROR(bind(*frame, item));
        frame_ = frame;
        Result<Value> keep = Eval(*s.cond);
        frame_ = outer;
        if (!keep.ok()) return keep.status();
        if (Truthy(*keep)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return ExecScoped(s.else_body, s.else_undefined, out);
    auto loop = std::make_shared<LoopObject>();
    loop->items = std::make_shared<const std::vector<Value>>(std::move(items));
    const Value loop_value = Value::FromObject(loop);
    // Jinja runs the else block unless some iteration reached the end of the body (one that
    // ended in break or continue does not count).
    bool completed_an_iteration = false;
    Status status;
    for (size_t i = 0; i < loop->items->size(); ++i) {
      KILN_RETURN_IF_ERROR(Step());
      loop->index0 = static_cast<int64_t>(i);
      auto frame = std::make_shared<Frame>();
      frame->parent = outer;
      DeclareUndefined(*frame, s.body_undefined);
      KILN_RETURN_IF_ERROR(bind(*frame, (*loop->items)[i]));
      frame->vars["loop"] = loop_value;
      frame_ = frame;
      status = ExecBody(s.body, out);
      frame_ = outer;
      if (!status.ok()) return status;
      if (flow_ == Flow::kBreak) {
        flow_ = Flow::kNormal;
        break;
      }
      completed_an_iteration = completed_an_iteration || flow_ == Flow::kNormal;
      flow_ = Flow::kNormal;
    }
    if (!completed_an_iteration && !s.else_body.empty()) {
      return ExecScoped(s.else_body, s.else_undefined, out);
    }
    return Status::OK();
  }

  // --- global functions ---

  static Result<Value> FnRange(Interp&, const Args& args) {
    if (!args.kw.empty()) return Err("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3) {
      return Err(fmt::format("range expected 1 to 3 arguments, got {}", args.pos.size()));
    }
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < args.pos.size(); ++i) {
      if (!args.pos[i].is_integral()) {
        return Err(
            fmt::format("'{}' object cannot be interpreted as an integer", args.pos[i].TypeName()));
      }
    }
    if (args.pos.size() == 1) {
      v[1] = args.pos[0].as_int();
    } else {
      v[0] = args.pos[0].as_int();
      v[1] = args.pos[1].as_int();
      if (args.pos.size() == 3) v[2] = args.pos[2].as_int();
    }
    if (v[2] == 0) return Err("range() arg 3 must not be zero");
    const long double span = static_cast<long double>(v[1]) - static_cast<long double>(v[0]);
    const long double count = std::ceil(span / static_cast<long double>(v[2]));
    if (count > kMaxRange) {
      return Err(fmt::format("range too big, maximum size for range is {}", kMaxRange));
    }
    std::vector<Value> out;
    if (v[2] > 0) {
      for (int64_t i = v[0]; i < v[1]; i += v[2]) out.push_back(Value::Int(i));
    } else {
      for (int64_t i = v[0]; i > v[1]; i += v[2]) out.push_back(Value::Int(i));
    }
    return Value::List(std::move(out));
  }

  static Result<std::vector<std::pair<std::string, Value>>> DictArgs(const Args& args,
                                                                     std::string_view what) {
    std::vector<std::pair<std::string, Value>> attrs;
    if (args.pos.size() > 1)
      return Err(fmt::format("{} takes at most 1 positional argument", what));
    if (args.pos.size() == 1) {
      if (!args.pos[0].is_dict()) {
        return Err(fmt::format("{} positional argument must be a dict", what));
      }
      for (const auto& [k, v] : args.pos[0].dict().items()) {
        if (!k.is_string()) return Err(fmt::format("{} keys must be strings", what));
        attrs.emplace_back(k.str(), v);
      }
    }
    for (const auto& [k, v] : args.kw) attrs.emplace_back(k, v);
    return attrs;
  }

  static Result<Value> FnNamespace(Interp& in, const Args& args) {
    KILN_ASSIGN_OR_RETURN(auto attrs, DictArgs(args, "namespace()"));
    return in.NewNamespace(std::move(attrs));
  }

  static Result<Value> FnDict(Interp&, const Args& args) {
    KILN_ASSIGN_OR_RETURN(auto attrs, DictArgs(args, "dict()"));
    DictData d;
    for (auto& [k, v] : attrs) d.Set(Value::String(k), std::move(v));
    return Value::Dict(std::move(d));
  }

  static Result<Value> FnRaiseException(Interp&, const Args& args) {
    if (args.pos.size() != 1 || !args.kw.empty()) {
      return Err("raise_exception() takes exactly one argument");
    }
    KILN_ASSIGN_OR_RETURN(std::string msg, ToStr(args.pos[0]));
    return Status::Aborted(std::move(msg));
  }

  static Result<Value> FnStrftimeNow(Interp& in, const Args& args) {
    KILN_ASSIGN_OR_RETURN(auto p, Bind("strftime_now()", args, {"format"}));
    if (!p[0].has_value() || !p[0]->is_string()) {
      return Err("strftime_now() needs a format string");
    }
    const std::string& format = p[0]->str();
    if (format.empty()) return Value::String("");
    std::tm tm{};
    const std::time_t now = in.ctx().now;
    localtime_r(&now, &tm);
    std::string buf(format.size() * 4 + 64, '\0');
    for (int attempt = 0; attempt < 8; ++attempt) {
      const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
      if (n > 0) {
        buf.resize(n);
        return Value::String(std::move(buf));
      }
      buf.resize(buf.size() * 4);
    }
    return Value::String("");
  }

  // Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
  Result<Value> AttrPath(const Value& item, const Value& attribute) {
    if (!attribute.is_string()) return GetItem(item, attribute);
    Value cur = item;
    std::string_view path = attribute.str();
    while (true) {
      const size_t dot = path.find('.');
      const std::string_view part = path.substr(0, dot);
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
      if (digits) {
        int64_t index = 0;
        std::from_chars(part.data(), part.data() + part.size(), index);
        KILN_ASSIGN_OR_RETURN(cur, GetItem(cur, Value::Int(index)));
      } else {
        KILN_ASSIGN_OR_RETURN(cur, GetItem(cur, Value::String(std::string(part))));
      }
      if (dot == std::string_view::npos) break;
      path.remove_prefix(dot + 1);
    }
    return cur;
  }

 private:
  const RenderContext& ctx_;
  std::shared_ptr<Frame> frame_;
  int64_t steps_ = 0;
  int depth_ = 0;
  Flow flow_ = Flow::kNormal;
  std::vector<std::shared_ptr<NamespaceData>> namespaces_;
  std::vector<std::shared_ptr<Frame>> macro_scopes_;  // the scopes macros were defined in
};

// --- filters ----------------------------------------------------------------------------------

Result<std::string> SoftStr(const Value& v) { return ToStr(v); }

Result<Value> FilterTrim(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'trim'", args, {"chars"}));
  KILN_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  std::optional<std::string> chars;
  if (!IsNoneLike(p[0])) {
    if (!p[0]->is_string()) return Err("trim: chars must be a string");
    chars = p[0]->str();
  }
  return Value::String(StripChars(s, chars, true, true));
}

template <int kWhich>
Result<Value> FilterCase(Interp&, const Value& v, const Args& args) {
  static constexpr const char* kNames[] = {"upper", "lower", "capitalize", "title"};
  KILN_ASSIGN_OR_RETURN(auto p, Bind(fmt::format("filter '{}'", kNames[kWhich]), args, {}));
  KILN_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  switch (kWhich) {
    case 0:
      return Value::String(PyUpper(s));
    case 1:
      return Value::String(PyLower(s));
    case 2:
      return Value::String(Capitalize(s));
    default:
      return Value::String(TitleFilter(s));
  }
}

Result<Value> FilterLength(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'length'", args, {}));
  KILN_ASSIGN_OR_RETURN(int64_t n, in.Length(v));
  return Value::Int(n);
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Result<Value> FilterToJson(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(
      auto p, Bind("filter 'tojson'", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = p[0].has_value() && Truthy(*p[0]);
  if (!IsNoneLike(p[1])) {
    if (p[1]->is_string()) {
      o.indent = p[1]->str();
    } else if (p[1]->is_integral()) {
      o.indent =
          std::string(static_cast<size_t>(std::clamp<int64_t>(p[1]->as_int(), 0, 1024)), ' ');
    } else {
      return Err("tojson: indent must be an integer or a string");
    }
  }
  if (o.indent) o.item_separator = ",";
  if (!IsNoneLike(p[2])) {
    if (!p[2]->is_list() || p[2]->list().items.size() != 2 || !p[2]->list().items[0].is_string() ||
        !p[2]->list().items[1].is_string()) {
      return Err("tojson: separators must be a pair of strings");
    }
    o.item_separator = p[2]->list().items[0].str();
    o.key_separator = p[2]->list().items[1].str();
  }
  o.sort_keys = p[3].has_value() && Truthy(*p[3]);
  KILN_ASSIGN_OR_RETURN(std::string s, ToJson(v, o));
  return in.MakeString(std::move(s));
}

Result<Value> FilterJoin(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'join'", args, {"d", "attribute"}));
  std::string sep;
  if (p[0].has_value()) {
    KILN_ASSIGN_OR_RETURN(sep, SoftStr(*p[0]));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    KILN_RETURN_IF_ERROR(in.Step());
    Value item = items[i];
    if (!IsNoneLike(p[1])) {
      KILN_ASSIGN_OR_RETURN(item, in.AttrPath(item, *p[1]));
    }
    KILN_ASSIGN_OR_RETURN(std::string s, SoftStr(item));
    if (i) out += sep;
    out += s;
    KILN_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  return Value::String(std::move(out));
}

Result<Value> FilterDefault(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'default'", args, {"default_value", "boolean"}));
  const bool boolean = p[1].has_value() && Truthy(*p[1]);
  if (v.is_undefined() || (boolean && !Truthy(v))) {
    return p[0].has_value() ? *p[0] : Value::String("");
  }
  return v;
}

Result<Value> FilterFirst(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'first'", args, {}));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  if (items.empty()) return Value::MakeUndefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> FilterLast(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'last'", args, {}));
  if (v.is_generator()) return Err("'generator' object is not reversible");
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  if (items.empty()) return Value::MakeUndefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> FilterList(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'list'", args, {}));
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  return Value::List(std::move(items));
}

Result<Value> FilterItemsImpl(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'items'", args, {}));
  if (v.is_undefined()) return Value::Generator({});
  if (!v.is_dict()) return Err("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().items()) out.push_back(Value::Tuple({k, val}));
  return Value::Generator(std::move(out));
}

Result<Value> FilterReplace(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'replace'", args, {"old", "new", "count"}));
  if (!p[0].has_value() || !p[1].has_value()) return Err("replace needs two arguments");
  KILN_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  KILN_ASSIGN_OR_RETURN(std::string old, SoftStr(*p[0]));
  KILN_ASSIGN_OR_RETURN(std::string repl, SoftStr(*p[1]));
  int64_t count = -1;
  if (!IsNoneLike(p[2])) {
    KILN_ASSIGN_OR_RETURN(count, ToIndex(*p[2], "replace count"));
  }
  return in.MakeString(Replace(s, old, repl, count));
}

Result<Value> FilterString(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'string'", args, {}));
  if (v.is_string()) return v;
  KILN_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  return Value::String(std::move(s));
}

// Python's float(str): optional sign, digits with single underscores, inf / nan words.
std::optional<double> ParsePyFloat(std::string_view s) {
  s = PyStrip(s, true, true);
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !IsDigitChar(s[i - 1]) || !IsDigitChar(s[i + 1])) {
        return std::nullopt;
      }
      continue;
    }
    t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i]))));
  }
  std::string_view body = t;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") {
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  if (body == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (body.empty() || !(IsDigitChar(body[0]) || body[0] == '.')) return std::nullopt;
  double d = 0;
  auto r = std::from_chars(body.data(), body.data() + body.size(), d);
  if (r.ptr != body.data() + body.size()) return std::nullopt;
  if (r.ec == std::errc::result_out_of_range) {
    d = body.find("e-") != std::string_view::npos ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return negative ? -d : d;
}

Result<Value> FilterInt(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'int'", args, {"default", "base"}));
  const Value fallback = p[0].has_value() ? *p[0] : Value::Int(0);
  int64_t base = 10;
  if (p[1].has_value()) {
    KILN_ASSIGN_OR_RETURN(base, ToIndex(*p[1], "int base"));
  }
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.as_int());
  auto from_float = [&](double d) -> Result<Value> {
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) return Err("cannot convert float infinity to integer");
    if (d >= 9.2233720368547758e18 || d < -9.2233720368547758e18) return Err("integer overflow");
    return Value::Int(static_cast<int64_t>(d));
  };
  if (v.is_float()) return from_float(v.as_float());
  if (!v.is_string()) return fallback;
  std::string_view s = PyStrip(v.str(), true, true);
  std::string digits;
  bool negative = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 16 || base == 8 || base == 2) {
    const char prefix = base == 16 ? 'x' : base == 8 ? 'o' : 'b';
    if (i + 1 < s.size() && s[i] == '0' && (s[i + 1] | 0x20) == prefix) i += 2;
  }
  bool ok = i < s.size() && base >= 2 && base <= 36 && s[i] != '-' && s[i] != '+';
  for (; ok && i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits.push_back(s[i]);
  }
  if (ok) {
    int64_t value = 0;
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), value,
                             static_cast<int>(base));
    if (r.ptr == digits.data() + digits.size() && !digits.empty()) {
      if (r.ec != std::errc()) return Err("integer out of the 64-bit range");
      return Value::Int(negative ? -value : value);
    }
  }
  if (std::optional<double> d = ParsePyFloat(v.str())) return from_float(*d);
  return fallback;
}

Result<Value> FilterFloat(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'float'", args, {"default"}));
  const Value fallback = p[0].has_value() ? *p[0] : Value::Float(0.0);
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_number()) return Value::Float(v.as_float());
  if (v.is_string()) {
    if (std::optional<double> d = ParsePyFloat(v.str())) return Value::Float(*d);
  }
  return fallback;
}

Result<Value> FilterAbs(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'abs'", args, {}));
  if (v.is_float()) return Value::Float(std::fabs(v.as_float()));
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return Err("integer overflow");
    return Value::Int(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_undefined()) return UndefinedError(v);
  return Err(fmt::format("bad operand type for abs(): '{}'", v.TypeName()));
}

// select / reject / selectattr / rejectattr.
template <bool kAttr, bool kReject>
Result<Value> FilterSelectImpl(Interp& in, const Value& v, const Args& args) {
  if (!Truthy(v)) return Value::Generator({});
  size_t off = 0;
  Value attr;
  if (kAttr) {
    if (args.pos.empty()) return Err("Missing parameter for attribute name");
    attr = args.pos[0];
    off = 1;
  }
  std::optional<std::string> test;
  Args test_args;
  if (args.pos.size() > off) {
    if (!args.pos[off].is_string()) return Err("the test name must be a string");
    test = args.pos[off].str();
    test_args.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), args.pos.end());
  }
  test_args.kw = args.kw;
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value> out;
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(in.Step());
    Value probe = item;
    if (kAttr) {
      KILN_ASSIGN_OR_RETURN(probe, in.AttrPath(item, attr));
    }
    bool pass;
    if (test) {
      KILN_ASSIGN_OR_RETURN(pass, in.RunTest(*test, probe, test_args));
    } else {
      pass = Truthy(probe);
    }
    if (pass != kReject) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Result<Value> FilterMapImpl(Interp& in, const Value& v, const Args& args) {
  if (!Truthy(v)) return Value::Generator({});
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value> out;
  if (args.pos.empty()) {
    std::optional<Value> attribute, fallback;
    for (const auto& [k, val] : args.kw) {
      if (k == "attribute") {
        attribute = val;
      } else if (k == "default") {
        fallback = val;
      } else {
        return Err(fmt::format("Unexpected keyword argument '{}'", k));
      }
    }
    if (!attribute) return Err("map requires a filter argument");
    for (const Value& item : items) {
      KILN_RETURN_IF_ERROR(in.Step());
      KILN_ASSIGN_OR_RETURN(Value x, in.AttrPath(item, *attribute));
      if (fallback.has_value() && !fallback->is_none() && x.is_undefined()) x = *fallback;
      out.push_back(std::move(x));
    }
    return Value::Generator(std::move(out));
  }
  if (!args.pos[0].is_string()) return Err("map: the filter name must be a string");
  const std::string name = args.pos[0].str();
  if (!IsSupportedFilter(name)) return Err(fmt::format("filter '{}' is not supported", name));
  Args rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(in.Step());
    KILN_ASSIGN_OR_RETURN(Value x, in.CallFilterByName(name, item, rest));
    out.push_back(std::move(x));
  }
  return Value::Generator(std::move(out));
}

Value IgnoreCase(const Value& v) { return v.is_string() ? Value::String(PyLower(v.str())) : v; }

Result<Value> FilterUniqueImpl(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'unique'", args, {"case_sensitive", "attribute"}));
  const bool case_sensitive = p[0].has_value() && Truthy(*p[0]);
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value> seen, out;
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(in.Step());
    Value key = item;
    if (!IsNoneLike(p[1])) {
      KILN_ASSIGN_OR_RETURN(key, in.AttrPath(item, *p[1]));
    }
    if (!case_sensitive) key = IgnoreCase(key);
    if ((key.is_list() && !key.is_tuple()) || key.is_dict()) {
      return Err(fmt::format("unhashable type: '{}'", key.TypeName()));
    }
    bool dup = false;
    for (const Value& s : seen) dup = dup || Equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

// Jinja's generator filters (select, map, unique, items...) run their body only when the result
// is iterated, so their errors surface then, not where the filter is applied.
template <Result<Value> (*kImpl)(Interp&, const Value&, const Args&)>
Result<Value> Lazily(Interp& in, const Value& v, const Args& args) {
  Result<Value> r = kImpl(in, v, args);
  if (!r.ok()) return Value::FailingGenerator(r.status());
  return r;
}

Result<Value> FilterReverse(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'reverse'", args, {}));
  if (v.is_string()) {
    std::vector<char32_t> cps = DecodeUtf8(v.str());
    return Value::String(EncodeUtf8(std::u32string(cps.rbegin(), cps.rend())));
  }
  const bool was_generator = v.is_generator();
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::reverse(items.begin(), items.end());
  return was_generator ? Value::List(std::move(items)) : Value::Generator(std::move(items));
}

Result<Value> SortItems(Interp& in, std::vector<Value> items, const std::vector<Value>& keys,
                        bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    Result<int> c = Compare(keys[a], keys[b]);
    if (!c.ok()) {
      if (error.ok()) error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  KILN_RETURN_IF_ERROR(error);
  KILN_RETURN_IF_ERROR(in.Step());
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return Value::List(std::move(out));
}

Result<Value> FilterSort(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p,
                        Bind("filter 'sort'", args, {"reverse", "case_sensitive", "attribute"}));
  const bool reverse = p[0].has_value() && Truthy(*p[0]);
  const bool case_sensitive = p[1].has_value() && Truthy(*p[1]);
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  std::vector<Value> keys;
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(in.Step());
    if (IsNoneLike(p[2])) {
      keys.push_back(case_sensitive ? item : IgnoreCase(item));
      continue;
    }
    // "a,b": sort by a list of attributes.
    std::vector<Value> parts;
    std::string_view spec = p[2]->is_string() ? std::string_view(p[2]->str()) : "";
    if (!p[2]->is_string()) {
      KILN_ASSIGN_OR_RETURN(Value k, in.AttrPath(item, *p[2]));
      parts.push_back(case_sensitive ? k : IgnoreCase(k));
    }
    while (p[2]->is_string()) {
      const size_t comma = spec.find(',');
      KILN_ASSIGN_OR_RETURN(Value k,
                            in.AttrPath(item, Value::String(std::string(spec.substr(0, comma)))));
      parts.push_back(case_sensitive ? k : IgnoreCase(k));
      if (comma == std::string_view::npos) break;
      spec.remove_prefix(comma + 1);
    }
    keys.push_back(Value::List(std::move(parts)));
  }
  return SortItems(in, std::move(items), keys, reverse);
}

Result<Value> FilterDictSort(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p,
                        Bind("filter 'dictsort'", args, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return Err("dictsort: the value must be a dict");
  const bool case_sensitive = p[0].has_value() && Truthy(*p[0]);
  int pos = 0;
  if (p[1].has_value()) {
    if (p[1]->is_string() && p[1]->str() == "value") {
      pos = 1;
    } else if (!(p[1]->is_string() && p[1]->str() == "key")) {
      return Err("You can only sort by either \"key\" or \"value\"");
    }
  }
  const bool reverse = p[2].has_value() && Truthy(*p[2]);
  std::vector<Value> items, keys;
  for (const auto& [k, val] : v.dict().items()) {
    items.push_back(Value::Tuple({k, val}));
    const Value& key = pos == 0 ? k : val;
    keys.push_back(case_sensitive ? key : IgnoreCase(key));
  }
  return SortItems(in, std::move(items), keys, reverse);
}

template <bool kMax>
Result<Value> FilterMinMax(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(
      auto p, Bind(kMax ? "filter 'max'" : "filter 'min'", args, {"case_sensitive", "attribute"}));
  const bool case_sensitive = p[0].has_value() && Truthy(*p[0]);
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  if (items.empty()) return Value::MakeUndefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = items[i];
    if (!IsNoneLike(p[1])) {
      KILN_ASSIGN_OR_RETURN(key, in.AttrPath(items[i], *p[1]));
    }
    if (!case_sensitive) key = IgnoreCase(key);
    if (i == 0) {
      best_key = key;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int c, Compare(key, best_key));
    if (kMax ? c > 0 : c < 0) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Result<Value> FilterSum(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'sum'", args, {"attribute", "start"}));
  Value total = p[1].has_value() ? *p[1] : Value::Int(0);
  KILN_ASSIGN_OR_RETURN(std::vector<Value> items, in.Iterate(v));
  for (const Value& item : items) {
    KILN_RETURN_IF_ERROR(in.Step());
    Value x = item;
    if (!IsNoneLike(p[0])) {
      KILN_ASSIGN_OR_RETURN(x, in.AttrPath(item, *p[0]));
    }
    if (x.is_string()) return Err("unsupported operand type(s) for +: 'int' and 'str'");
    KILN_ASSIGN_OR_RETURN(total, in.BinaryOp(BinOp::kAdd, total, x));
  }
  return total;
}

Result<Value> FilterIdentity(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'safe'", args, {}));
  if (v.is_undefined() || v.is_string()) return v.is_undefined() ? Value::String("") : v;
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Value::String(std::move(s));
}

Result<Value> FilterEscape(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'escape'", args, {}));
  KILN_ASSIGN_OR_RETURN(std::string s, SoftStr(v));
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return in.MakeString(std::move(out));
}

Result<Value> FilterIndent(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'indent'", args, {"width", "first", "blank"}));
  std::string indention = "    ";
  if (p[0].has_value()) {
    if (p[0]->is_string()) {
      indention = p[0]->str();
    } else if (p[0]->is_integral()) {
      indention.assign(static_cast<size_t>(std::clamp<int64_t>(p[0]->as_int(), 0, 1024)), ' ');
    } else {
      return Err("indent: width must be an integer or a string");
    }
  }
  const bool first = p[1].has_value() && Truthy(*p[1]);
  const bool blank = p[2].has_value() && Truthy(*p[2]);
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_string()) {
    return Err(fmt::format("indent: expected a string, not '{}'", v.TypeName()));
  }
  std::string s = v.str() + "\n";
  std::vector<std::string> lines = SplitLines(s);
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (first) out = indention + out;
  return in.MakeString(std::move(out));
}

Result<Value> FilterAttr(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("filter 'attr'", args, {"name"}));
  if (!p[0].has_value() || !p[0]->is_string()) return Err("attr: the name must be a string");
  const std::string& name = p[0]->str();
  if (v.is_dict() && !HasMethod(v, name)) {
    return Value::MakeUndefined(fmt::format("'dict object' has no attribute '{}'", name));
  }
  return in.GetAttr(v, name);
}

const std::unordered_map<std::string_view, FilterFn>& Filters() {
  static const auto* table = new std::unordered_map<std::string_view, FilterFn>{
      {"abs", &FilterAbs},
      {"attr", &FilterAttr},
      {"capitalize", &FilterCase<2>},
      {"count", &FilterLength},
      {"d", &FilterDefault},
      {"default", &FilterDefault},
      {"dictsort", &FilterDictSort},
      {"e", &FilterEscape},
      {"escape", &FilterEscape},
      {"first", &FilterFirst},
      {"float", &FilterFloat},
      {"indent", &FilterIndent},
      {"int", &FilterInt},
      {"items", &Lazily<&FilterItemsImpl>},
      {"join", &FilterJoin},
      {"last", &FilterLast},
      {"length", &FilterLength},
      {"list", &FilterList},
      {"lower", &FilterCase<1>},
      {"map", &Lazily<&FilterMapImpl>},
      {"max", &FilterMinMax<true>},
      {"min", &FilterMinMax<false>},
      {"reject", &Lazily<&FilterSelectImpl<false, true>>},
      {"rejectattr", &Lazily<&FilterSelectImpl<true, true>>},
      {"replace", &FilterReplace},
      {"reverse", &FilterReverse},
      {"safe", &FilterIdentity},
      {"select", &Lazily<&FilterSelectImpl<false, false>>},
      {"selectattr", &Lazily<&FilterSelectImpl<true, false>>},
      {"sort", &FilterSort},
      {"string", &FilterString},
      {"sum", &FilterSum},
      {"title", &FilterCase<3>},
      {"tojson", &FilterToJson},
      {"trim", &FilterTrim},
      {"unique", &Lazily<&FilterUniqueImpl>},
      {"upper", &FilterCase<0>},
  };
  return *table;
}

// --- tests ------------------------------------------------------------------------------------

Result<std::optional<Value>> OneArg(std::string_view test, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind(fmt::format("test '{}'", test), args, {"other"}));
  return p[0];
}

template <typename Pred>
Result<bool> NoArgTest(std::string_view name, const Args& args, Pred pred) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind(fmt::format("test '{}'", name), args, {}));
  return pred();
}

#define KILN_JINJA_SIMPLE_TEST(fn, name, expr)                    \
  Result<bool> fn(Interp& in, const Value& v, const Args& args) { \
    (void)in;                                                     \
    (void)v;                                                      \
    return NoArgTest(name, args, [&]() -> bool { return expr; }); \
  }

KILN_JINJA_SIMPLE_TEST(TestDefined, "defined", !v.is_undefined())
KILN_JINJA_SIMPLE_TEST(TestUndefined, "undefined", v.is_undefined())
KILN_JINJA_SIMPLE_TEST(TestNone, "none", v.is_none())
KILN_JINJA_SIMPLE_TEST(TestBoolean, "boolean", v.is_bool())
KILN_JINJA_SIMPLE_TEST(TestFalse, "false", v.is_bool() && !v.as_bool())
KILN_JINJA_SIMPLE_TEST(TestTrue, "true", v.is_bool() && v.as_bool())
KILN_JINJA_SIMPLE_TEST(TestInteger, "integer", v.is_int())
KILN_JINJA_SIMPLE_TEST(TestFloat, "float", v.is_float())
KILN_JINJA_SIMPLE_TEST(TestNumber, "number", v.is_number())
KILN_JINJA_SIMPLE_TEST(TestString, "string", v.is_string())
KILN_JINJA_SIMPLE_TEST(TestMapping, "mapping", v.is_dict())
KILN_JINJA_SIMPLE_TEST(TestIterable, "iterable",
                       v.is_string() || v.is_list() || v.is_dict() || v.is_generator() ||
                           v.is_undefined())
KILN_JINJA_SIMPLE_TEST(TestSequence, "sequence",
                       v.is_string() || v.is_list() || v.is_dict() || v.is_undefined())
KILN_JINJA_SIMPLE_TEST(TestCallable, "callable", v.is_object() || v.is_undefined())
KILN_JINJA_SIMPLE_TEST(TestEscaped, "escaped", false)
#undef KILN_JINJA_SIMPLE_TEST

Result<bool> TestCase(const Value& v, const Args& args, bool upper) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind(upper ? "test 'upper'" : "test 'lower'", args, {}));
  KILN_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Truthy(StrPredicate(upper ? "isupper" : "islower", s));
}
Result<bool> TestLower(Interp&, const Value& v, const Args& args) {
  return TestCase(v, args, false);
}
Result<bool> TestUpper(Interp&, const Value& v, const Args& args) {
  return TestCase(v, args, true);
}

Result<bool> TestModulo(Interp& in, const Value& v, const Value& divisor, int64_t remainder) {
  KILN_ASSIGN_OR_RETURN(Value r, in.BinaryOp(BinOp::kMod, v, divisor));
  return Equals(r, Value::Int(remainder));
}
Result<bool> TestOdd(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("test 'odd'", args, {}));
  return TestModulo(in, v, Value::Int(2), 1);
}
Result<bool> TestEven(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("test 'even'", args, {}));
  return TestModulo(in, v, Value::Int(2), 0);
}
Result<bool> TestDivisibleBy(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto other, OneArg("divisibleby", args));
  if (!other.has_value()) return Err("test 'divisibleby' needs an argument");
  return TestModulo(in, v, *other, 0);
}

Result<bool> TestSameAs(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto other, OneArg("sameas", args));
  if (!other.has_value()) return Err("test 'sameas' needs an argument");
  return v.SameAs(*other);
}

Result<bool> TestIn(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto other, OneArg("in", args));
  if (!other.has_value()) return Err("test 'in' needs an argument");
  return in.Contains(*other, v);
}

template <CmpOp kOp>
Result<bool> TestCompare(Interp& in, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto other, OneArg("comparison", args));
  if (!other.has_value()) return Err("a comparison test needs an argument");
  return in.CompareOp(kOp, v, *other);
}

Result<bool> TestFilterName(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("test 'filter'", args, {}));
  return v.is_string() && IsSupportedFilter(v.str());
}
Result<bool> TestTestName(Interp&, const Value& v, const Args& args) {
  KILN_ASSIGN_OR_RETURN(auto p, Bind("test 'test'", args, {}));
  return v.is_string() && IsSupportedTest(v.str());
}

const std::unordered_map<std::string_view, TestFn>& Tests() {
  static const auto* table = new std::unordered_map<std::string_view, TestFn>{
      {"odd", &TestOdd},
      {"even", &TestEven},
      {"divisibleby", &TestDivisibleBy},
      {"defined", &TestDefined},
      {"undefined", &TestUndefined},
      {"filter", &TestFilterName},
      {"test", &TestTestName},
      {"none", &TestNone},
      {"boolean", &TestBoolean},
      {"false", &TestFalse},
      {"true", &TestTrue},
      {"integer", &TestInteger},
      {"float", &TestFloat},
      {"lower", &TestLower},
      {"upper", &TestUpper},
      {"string", &TestString},
      {"mapping", &TestMapping},
      {"number", &TestNumber},
      {"sequence", &TestSequence},
      {"iterable", &TestIterable},
      {"callable", &TestCallable},
      {"sameas", &TestSameAs},
      {"escaped", &TestEscaped},
      {"in", &TestIn},
      {"==", &TestCompare<CmpOp::kEq>},
      {"eq", &TestCompare<CmpOp::kEq>},
      {"equalto", &TestCompare<CmpOp::kEq>},
      {"!=", &TestCompare<CmpOp::kNe>},
      {"ne", &TestCompare<CmpOp::kNe>},
      {">", &TestCompare<CmpOp::kGt>},
      {"gt", &TestCompare<CmpOp::kGt>},
      {"greaterthan", &TestCompare<CmpOp::kGt>},
      {">=", &TestCompare<CmpOp::kGe>},
      {"ge", &TestCompare<CmpOp::kGe>},
      {"<", &TestCompare<CmpOp::kLt>},
      {"lt", &TestCompare<CmpOp::kLt>},
      {"lessthan", &TestCompare<CmpOp::kLt>},
      {"<=", &TestCompare<CmpOp::kLe>},
      {"le", &TestCompare<CmpOp::kLe>},
  };
  return *table;
}

}  // namespace

Result<std::string> Render(const Program& program, const RenderContext& context) {
  Interp interp(context);
  Result<std::string> r = interp.Run(program);
  if (!r.ok() && r.status().code() == StatusCode::kAborted) {
    return Status::InvalidArgument(r.status().message());
  }
  return r;
}

bool IsSupportedFilter(std::string_view name) { return Filters().count(name) != 0; }
bool IsSupportedTest(std::string_view name) { return Tests().count(name) != 0; }
bool IsUnsupportedMethod(std::string_view name) { return In(kUnsupportedMethods, name); }
bool IsUnsupportedGlobal(std::string_view name) {
  return name == "cycler" || name == "joiner" || name == "lipsum";
}

}  // namespace kiln::llm::jinja
