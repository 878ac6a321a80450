// SPDX-License-Identifier: Apache-2.0
#include "llm/chat_template.h"

#include <fmt/format.h>

#include "llm/jinja_eval.h"
#include "llm/jinja_parser.h"
#include "llm/jinja_value.h"

namespace kiln::llm {
namespace {

// Renders with `messages` (already a list Value) and the options' variables.
Result<std::string> RenderWith(const jinja::Program& program, jinja::Value messages,
                               const ChatRenderOptions& options) {
  using jinja::Value;
  jinja::DictData vars;
  vars.Set(Value::String("messages"), std::move(messages));
  vars.Set(Value::String("tools"), Value::MakeNone());
  vars.Set(Value::String("documents"), Value::MakeNone());
  vars.Set(Value::String("add_generation_prompt"), Value::Bool(options.add_generation_prompt));
  for (const auto& [name, token] :
       {std::pair<const char*, const std::string*>{"bos_token", &options.bos_token},
        {"eos_token", &options.eos_token}}) {
    if (!jinja::IsValidUtf8(*token)) {
      return Status::InvalidArgument(fmt::format("{} is not valid UTF-8", name));
    }
    vars.Set(Value::String(name), Value::String(*token));
  }
  for (const auto& [name, json] : options.json_variables) {
    if (name == "messages") {
      return Status::InvalidArgument("chat template variable 'messages' is given twice");
    }
    Result<Value> v = jinja::ParseJson(json);
    if (!v.ok()) {
      return Status::InvalidArgument(
          fmt::format("chat template variable '{}': {}", name, v.status().message()));
    }
    vars.Set(Value::String(name), std::move(v).value());
  }
  jinja::RenderContext context;
  context.variables = &vars;
  context.now = options.now.has_value() ? *options.now : std::time(nullptr);
  return jinja::Render(program, context);
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<jinja::Program> program)
    : program_(std::move(program)) {}

ChatTemplate::~ChatTemplate() = default;

Result<std::unique_ptr<ChatTemplate>> ChatTemplate::Parse(std::string_view source) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<jinja::Program> program, jinja::ParseTemplate(source));
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(program)));
}

Result<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                         const ChatRenderOptions& options) const {
  using jinja::Value;
  std::vector<Value> list;
  list.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!jinja::IsValidUtf8(m.role) || !jinja::IsValidUtf8(m.content)) {
      return Status::InvalidArgument(fmt::format("message {} is not valid UTF-8", i));
    }
    jinja::DictData d;
    d.Set(Value::String("role"), Value::String(m.role));
    d.Set(Value::String("content"), Value::String(m.content));
    list.push_back(Value::Dict(std::move(d)));
  }
  return RenderWith(*program_, Value::List(std::move(list)), options);
}

Result<std::string> ChatTemplate::RenderJson(std::string_view messages_json,
                                             const ChatRenderOptions& options) const {
  Result<jinja::Value> messages = jinja::ParseJson(messages_json);
  if (!messages.ok()) {
    return Status::InvalidArgument(fmt::format("chat messages: {}", messages.status().message()));
  }
  if (!messages->is_list() || messages->is_tuple()) {
    return Status::InvalidArgument("chat messages: expected a JSON array of message objects");
  }
  return RenderWith(*program_, std::move(messages).value(), options);
}

}  // namespace kiln::llm
