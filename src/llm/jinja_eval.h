// SPDX-License-Identifier: Apache-2.0
#pragma once
// The evaluator of kiln's Jinja subset (chat_template.h): runs a parsed Program against a set of
// global variables with the semantics of Jinja2 in the sandbox transformers uses
// (ImmutableSandboxedEnvironment: lists and dicts cannot be modified, range() is capped at
// 100000 items) plus transformers' globals raise_exception and strftime_now and its tojson
// filter. Also the inventory of the filters, tests and methods it implements, which the parser
// checks templates against. Internal to src/llm.
//
// Thread safety: Render may run concurrently on one Program; each call has its own state.

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

#include "base/result.h"
#include "llm/jinja_parser.h"
#include "llm/jinja_value.h"

namespace kiln::llm::jinja {

// Bounds on one render: a template that exceeds one fails with InvalidArgument instead of
// hanging or exhausting memory. Real templates take ~10 steps per message; 5M steps run in
// under a second. At max_depth the evaluator uses about 200 KiB of stack (release build).
struct RenderLimits {
  int64_t max_steps = 5'000'000;               // statements run + loop iterations + filter items
  size_t max_string_bytes = size_t{64} << 20;  // the output and every string built
  int max_depth = 200;                         // nested evaluation (macro recursion included)
};

struct RenderContext {
  // The template's variables (messages, add_generation_prompt, ...), shadowing the builtins.
  const DictData* variables = nullptr;
  // What strftime_now() formats (local time).
  std::time_t now = 0;
  RenderLimits limits;
};

// Renders `program`. Errors are InvalidArgument: "chat template line N: <what>", except that
// raise_exception(msg) gives exactly `msg`.
Result<std::string> Render(const Program& program, const RenderContext& context);

// The inventory the parser checks against.
bool IsSupportedFilter(std::string_view name);
bool IsSupportedTest(std::string_view name);
// A method of Python's str, list or dict that kiln does not implement (format, zfill, ...);
// calling it is refused at load time.
bool IsUnsupportedMethod(std::string_view name);
// A global function of Jinja2 that kiln does not implement (cycler, joiner, lipsum).
bool IsUnsupportedGlobal(std::string_view name);

}  // namespace kiln::llm::jinja
