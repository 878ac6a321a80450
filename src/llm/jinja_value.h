// SPDX-License-Identifier: Apache-2.0
#pragma once
// The data model of kiln's Jinja subset (chat_template.h): the values a chat template computes
// with, shaped after the Python objects Jinja2 hands a template (None, bool, int, float, str,
// list, tuple, dict, Jinja's Undefined and Namespace, generators), with Python's semantics for
// truth, equality, ordering, str(), repr() and json.dumps(). Internal to src/llm.
//
// Ownership: a Value is a small handle; strings, lists and dicts are immutable and shared
// between copies (the template sandbox transformers uses forbids mutating them), a Namespace
// is mutable and shared by reference, as in Python.
//
// Thread safety: Values reachable from a parsed template (constants) are only read and may be
// shared between threads; everything a render creates stays on the rendering thread.
//
// Strings are UTF-8. Where Python counts characters (len, indexing, slicing) the functions
// here count code points; every string that enters (template source, messages, variables) is
// checked to be valid UTF-8 first.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace kiln::llm::jinja {

class Value;

// Jinja's Undefined: what a missing variable, attribute or item evaluates to. `hint` says why
// (used in the error when the undefined value is then used where Jinja raises).
struct Undefined {
  std::shared_ptr<const std::string> hint;
};
struct None {};

// list or tuple (a tuple only prints and compares differently).
struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
};

// An insertion-ordered dict, as Python's. Keys are any scalar Value; string keys are indexed.
class DictData {
 public:
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const;  // defined below Value (pair<Value, Value> needs it complete)
  // nullptr when absent. Keys compare with Python's == (1 == 1.0 == True).
  const Value* Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;
  // Inserts or, for an existing key, replaces the value in place (Python's d[k] = v).
  void Set(Value key, Value value);

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> string_index_;
};

// jinja2.utils.Namespace: the one mutable object a template may change ({% set ns.x = 1 %}).
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* Find(std::string_view name) const;
  void Set(const std::string& name, Value value);
};

// A Python generator (what select, map, reverse... return): iterable once, no len(), always
// true. `consumed` flips on the first iteration, as a real generator is exhausted by it. A
// generator function fails only when iterated: `error`, if not OK, is what iterating gives.
struct GeneratorData {
  std::vector<Value> items;
  bool consumed = false;
  Status error;
};

// Anything else a template can hold: functions, macros, bound methods, the loop variable.
// Defined by the evaluator.
class Object {
 public:
  virtual ~Object() = default;
  // Python's type name, for messages ("function", "LoopContext").
  virtual std::string_view TypeName() const = 0;
  // The text Python's str() gives, or an error where that text is not reproducible.
  virtual Result<std::string> Str() const;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kGenerator,
    kObject,
  };

  Value() : v_(Undefined{}) {}  // Undefined without a hint
  static Value MakeUndefined(std::string hint);
  static Value MakeNone() { return Value(None{}); }
  static Value Bool(bool b) { return Value(b); }
  static Value Int(int64_t i) { return Value(i); }
  static Value Float(double d) { return Value(d); }
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value Dict(DictData dict);
  static Value Namespace(std::shared_ptr<NamespaceData> ns);
  static Value Generator(std::vector<Value> items);
  static Value FailingGenerator(Status error);
  static Value FromObject(std::shared_ptr<Object> object);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }  // list or tuple
  bool is_tuple() const { return is_list() && list().is_tuple; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_generator() const { return kind() == Kind::kGenerator; }
  bool is_object() const { return kind() == Kind::kObject; }
  // int or bool (Python's bool is an int).
  bool is_integral() const { return is_int() || is_bool(); }
  bool is_number() const { return is_integral() || is_float(); }

  // REQUIRES: the matching kind.
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(v_); }
  double as_float() const {
    return is_float() ? std::get<double>(v_) : static_cast<double>(as_int());
  }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(v_); }
  const ListData& list() const { return *std::get<std::shared_ptr<const ListData>>(v_); }
  const DictData& dict() const { return *std::get<std::shared_ptr<const DictData>>(v_); }
  const std::shared_ptr<NamespaceData>& ns() const {
    return std::get<std::shared_ptr<NamespaceData>>(v_);
  }
  const std::shared_ptr<GeneratorData>& generator() const {
    return std::get<std::shared_ptr<GeneratorData>>(v_);
  }
  const std::shared_ptr<Object>& object() const { return std::get<std::shared_ptr<Object>>(v_); }
  // The undefined value's hint, or "" (REQUIRES: is_undefined()).
  std::string_view undefined_hint() const;

  // Python's type name: "NoneType", "bool", "int", "float", "str", "list", "tuple", "dict",
  // "Namespace", "generator", "Undefined" or the object's.
  std::string_view TypeName() const;

  // Python identity where it is observable (`is sameas`): same container, or equal scalars.
  bool SameAs(const Value& other) const;

 private:
  using Storage = std::variant<Undefined, None, bool, int64_t, double,
                               std::shared_ptr<const std::string>, std::shared_ptr<const ListData>,
                               std::shared_ptr<const DictData>, std::shared_ptr<NamespaceData>,
                               std::shared_ptr<GeneratorData>, std::shared_ptr<Object>>;
  template <typename T>
  explicit Value(T v) : v_(std::move(v)) {}
  Storage v_;
};

// Python's bool(x).
bool Truthy(const Value& v);
// Python's a == b (Undefined equals Undefined only). Deeply nested or cyclic values give false.
bool Equals(const Value& a, const Value& b);
// Python's ordering (<): -1, 0 or 1 for numbers, strings and lists; an error for the rest
// ("'<' not supported between instances of 'dict' and 'int'").
Result<int> Compare(const Value& a, const Value& b);

// Python's str(x): the text {{ x }} prints. Undefined prints "". Generators and functions give
// an error (Python prints their memory address).
Result<std::string> ToStr(const Value& v);
// Python's repr(x).
Result<std::string> Repr(const Value& v);
// Python's repr(float): shortest round-trip digits, "1e-05", "1e+16", "0.1", "2.0", "inf".
std::string FormatFloat(double d);

// json.dumps options (transformers' tojson filter passes these through).
struct JsonOptions {
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_separator = ", ";  // json.dumps's defaults follow from indent
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v, ...). Undefined, namespaces, generators and objects are errors (Python:
// "Object of type Undefined is not JSON serializable").
Result<std::string> ToJson(const Value& v, const JsonOptions& options);

// Parses JSON text (RFC 8259) into Values: objects become dicts in document order (a repeated
// key keeps its first position and last value, as json.loads), integers that fit in int64
// become ints, other numbers floats. Errors name the byte offset. Nesting deeper than 512 is an
// error.
Result<Value> ParseJson(std::string_view text);

// --- UTF-8 and Python string helpers ---------------------------------------------------------

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);
// The code points of valid UTF-8 `s`.
std::vector<char32_t> DecodeUtf8(std::string_view s);
void AppendUtf8(std::string& out, char32_t cp);
std::string EncodeUtf8(const std::u32string& cps);
// Number of code points of valid UTF-8 `s`.
size_t CodepointCount(std::string_view s);
// Python's str.isspace() for one code point.
bool IsPySpace(char32_t cp);
// Python's case mapping for one code point, for Latin (ASCII, Latin-1, Extended-A and
// Additional), Greek and Cyrillic; other scripts are uncased here (Python maps a few more).
// ToUpperCase appends the upper case (two letters for U+00DF), ToLowerCase the lower case.
bool IsCased(char32_t cp);
bool IsUpperCase(char32_t cp);
bool IsLowerCase(char32_t cp);
void AppendUpper(std::string& out, char32_t cp);
void AppendLower(std::string& out, char32_t cp);
// Python's str.strip()/lstrip()/rstrip() without arguments (Unicode whitespace).
std::string_view PyStrip(std::string_view s, bool left, bool right);

inline size_t DictData::size() const { return items_.size(); }

}  // namespace kiln::llm::jinja
