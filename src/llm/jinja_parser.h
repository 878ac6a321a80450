// SPDX-License-Identifier: Apache-2.0
#pragma once
// The syntax of kiln's Jinja subset (chat_template.h): the lexer and parser that turn template
// text into the tree jinja_eval.h executes. They follow Jinja2's own lexer and parser
// (jinja2/lexer.py, jinja2/parser.py) with the options transformers renders chat templates
// with: trim_blocks and lstrip_blocks on, keep_trailing_newline off, the loopcontrols
// extension (break, continue) and transformers' {% generation %} block. Internal to src/llm.
//
// Everything the subset lacks is refused here, at load time, with the line and the name of the
// construct: an unknown tag, filter or test, a Python method or global function kiln does not
// implement, *args / **kwargs in calls, recursive loops.
//
// Thread safety: ParseTemplate is reentrant; a Program is immutable once built.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

enum class ExprKind : uint8_t {
  kConst,     // value
  kName,      // name
  kList,      // items
  kTuple,     // items
  kDict,      // items: key, value, key, value, ...
  kGetattr,   // a.name
  kGetitem,   // a[b]; b may be a kSlice
  kSlice,     // a:b:c, each may be null
  kCall,      // a(items..., kwargs...)
  kFilter,    // a | name(items..., kwargs...); a is null in a filter block or set block
  kTest,      // a is name(items..., kwargs...)
  kNeg,       // -a
  kPos,       // +a
  kNot,       // not a
  kBinary,    // a bin_op b
  kAnd,       // a and b
  kOr,        // a or b
  kConcat,    // items[0] ~ items[1] ~ ...
  kCompare,   // a cmp_ops[0] items[0] cmp_ops[1] items[1] ...
  kCondExpr,  // b if a else c (c may be null)
};
enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  BinOp bin_op = BinOp::kAdd;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<CmpOp> cmp_ops;
};

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (test, body)..., else_body
  kFor,          // for targets in expr [if cond]: body, else_body
  kSet,          // set targets = expr; or set targets[0].ns_attr = expr
  kSetBlock,     // set targets[0] [| filter chain in expr] body endset (ns_attr as in kSet)
  kMacro,        // macro name(params = defaults): body
  kBreak,        // break
  kContinue,     // continue
  kFilterBlock,  // filter chain (expr): body
  kWith,         // with targets = values: body
  kScope,        // body in a new scope (transformers' {% generation %})
  kSequence,     // body in the current scope ({% print a, b %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  bool unpack = false;  // targets form a tuple (for a, b in ...)
  std::string ns_attr;  // set ns.attr: targets[0] is the namespace's name
  std::string name;     // macro name
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  std::vector<ExprPtr> values;    // with
  // Jinja2 gives a scope a slot for each name assigned in it; a name assigned before any use in
  // that scope, with no slot in an enclosing scope, starts out undefined even where the
  // template's variables have it. These are those names for the scope of `body` (for loops:
  // each iteration) and of `else_body` (for loops); see jinja2/idtracking.py.
  std::vector<std::string> body_undefined;
  std::vector<std::string> else_undefined;
};

struct Program {
  Body body;
  std::vector<std::string> undefined_at_entry;  // as Stmt::body_undefined, for the template
};

// Templates longer than this are refused (real chat templates are a few KiB).
inline constexpr size_t kMaxTemplateBytes = size_t{1} << 20;

// Parses template text. Errors are InvalidArgument "chat template line N: <what>" naming the
// construct: "filter 'wordcount' is not supported", "tag 'include' is not supported",
// "unexpected end of template: '{% for %}' opened on line 2 is not closed".
Result<std::unique_ptr<Program>> ParseTemplate(std::string_view source);

}  // namespace kiln::llm::jinja
