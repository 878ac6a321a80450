// SPDX-License-Identifier: Apache-2.0
#pragma once
// ChatTemplate: renders a model's chat template (GGUF `tokenizer.chat_template`, Hugging Face
// `chat_template` in tokenizer_config.json) into the prompt text the model was trained on.
//
// Chat templates are Jinja2 programs. kiln implements the subset the supported model families'
// templates use (Llama 2, Llama 3 / 3.1 / 3.2, TinyLlama / Zephyr, Mistral Instruct, Qwen2.5,
// Qwen3, SmolLM2, DeepSeek-R1 distills; tests/llm/templates/ has them) and renders them
// byte-for-byte as transformers' apply_chat_template does (checked by chat_template_test against
// Debian's python3-jinja2, 3.1.2, including Jinja's static scoping of assigned names): the
// sandboxed environment with trim_blocks and lstrip_blocks,
// raise_exception, strftime_now, transformers' tojson, break / continue, and the variables
// messages, tools and documents (None unless given), add_generation_prompt, bos_token,
// eos_token.
//
// The subset: text, {{ }}, {% %}, {# #}, whitespace control (- and +), {% raw %}; if / elif /
// else, for (else, `if` filter, tuple unpacking, loop.index / index0 / revindex / first / last /
// length / previtem / nextitem / cycle), set (tuples, namespace attributes, blocks), macro,
// filter blocks, with, break, continue; Python literals and operators (+ - * / // % ** ~,
// comparisons, and / or / not, in, is, conditional expressions), attribute, item and slice
// access; the filters abs attr capitalize count d default dictsort e escape first float indent
// int items join last length list lower map max min reject rejectattr replace reverse safe
// select selectattr sort string sum title tojson trim unique upper; the tests of Jinja2; the
// methods of str (strip, split, startswith, replace, find, join, ...), dict (get, items, keys,
// values) and list (count, index); range(), namespace(), dict().
//
// Everything else is refused when the template is parsed, with its line: "chat template line 3:
// filter 'wordcount' is not supported". Jinja2 itself only fails when such a construct runs,
// so a template that merely contains one in a branch it never takes is refused by kiln.
// Known differences from Python: ints are 64-bit (an overflow is an error); case conversions
// (upper, lower, title, capitalize) know Latin, Greek and Cyrillic letters only; a generator
// or function is never converted to text (Python prints its memory address; kiln fails);
// range() and dict.items() / keys() / values() give lists (printed as lists, not as
// "range(0, 3)" or "dict_items([...])"); printf-style `%` formatting of strings and complex
// numbers are not supported.
//
// Limits: a render stops with an error after 5M steps (statements, loop iterations, items
// filtered), at 200 levels of nesting (macro recursion) or when a string passes 64 MiB; range()
// is capped at 100000 items as in Jinja's sandbox. Parsing and rendering need about 256 KiB
// of stack.
//
// Ownership and thread safety: a ChatTemplate is immutable after Parse and owns its parsed
// program; Render may be called from many threads at once.

#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace kiln::llm {

namespace jinja {
struct Program;
}  // namespace jinja

// One turn of a conversation: role "system", "user", "assistant" (or "tool", ...) and its text.
struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatRenderOptions {
  // Appends the header that opens the assistant's turn (transformers' add_generation_prompt).
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  // Further template variables, each given as JSON text: {"tools", "[{...}]"},
  // {"enable_thinking", "false"}, {"date_string", "\"26 Jul 2024\""}. They override the
  // defaults (tools, documents, bos_token, ...); the name "messages" is refused.
  std::vector<std::pair<std::string, std::string>> json_variables;
  // The clock strftime_now() reads (seconds since the epoch, formatted in local time);
  // nullopt: the current time.
  std::optional<std::time_t> now;
};

class ChatTemplate {
 public:
  // Parses a Jinja2 template. An unsupported construct is InvalidArgument naming it and its
  // line; so is a syntax error, invalid UTF-8, or a template over 1 MiB.
  static Result<std::unique_ptr<ChatTemplate>> Parse(std::string_view source);

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

  // Renders `messages` (each a dict {"role", "content"} to the template).
  // Errors are InvalidArgument: raise_exception(msg) in the template gives exactly `msg`
  // ("Conversation roles must alternate user/assistant/user/assistant/..."); anything else the
  // template does wrong gives "chat template line N: <what>" (an undefined variable used where
  // Jinja raises, a type error, a loop or recursion past the render limits, output over
  // 64 MiB). Invalid UTF-8 in a message or a bad JSON variable is an error too.
  Result<std::string> Render(std::span<const ChatMessage> messages,
                             const ChatRenderOptions& options) const;

  // As Render, with the messages given as a JSON array of objects, so that they may carry
  // more than role and content (tool_calls, tool_call_id, reasoning_content, content as a list
  // of parts): exactly what Hugging Face's apply_chat_template receives.
  Result<std::string> RenderJson(std::string_view messages_json,
                                 const ChatRenderOptions& options) const;

 private:
  explicit ChatTemplate(std::unique_ptr<jinja::Program> program);
  std::unique_ptr<jinja::Program> program_;
};

}  // namespace kiln::llm
