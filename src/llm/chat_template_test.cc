// SPDX-License-Identifier: Apache-2.0
// ChatTemplate against Jinja2 itself: every real template of tests/llm/templates/ and every
// language case below is rendered by kiln and by tests/llm/render_templates.py (Debian's
// python3-jinja2 in the environment transformers uses), and the two texts must be equal byte
// for byte; where Jinja2 fails, kiln must fail too (with the same message for
// raise_exception). The expectations are computed by Jinja2 at test time, never copied from
// kiln. The remaining tests check kiln's own errors and limits by hand.

#include "llm/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "llm/jinja_value.h"

namespace kiln::llm {
namespace {

namespace fs = std::filesystem;
using jinja::DictData;
using jinja::Value;

// --- the Jinja2 reference ---------------------------------------------------------------------

struct Case {
  std::string name;           // for messages
  std::string template_file;  // a file under tests/llm/templates/, or
  std::string template_text;  // the template itself
  std::string messages_json = "[]";
  bool add_generation_prompt = false;
  std::string bos = "<s>";
  std::string eos = "</s>";
  std::string variables_json = "{}";  // an object: name -> value
  std::optional<std::time_t> now;
};

struct Outcome {
  bool ok = false;
  std::string text;        // when ok
  std::string error_type;  // when not: the Python exception's class
  std::string error;       // its message
};

std::string JsonString(const std::string& s) {
  return jinja::ToJson(Value::String(s), jinja::JsonOptions()).value();
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TemplatePath(const std::string& file) {
  return (fs::path(KILN_CHAT_TEMPLATES_DIR) / file).string();
}

// Renders every case with Jinja2. nullopt (with `why`) when python3-jinja2 is unavailable.
std::optional<std::vector<Outcome>> RenderWithJinja2(const std::vector<Case>& cases,
                                                     std::string* why) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("kiln_chat_template_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  fs::create_directories(dir);
  const fs::path request = dir / "request.json";
  const fs::path response = dir / "response.json";
  {
    std::ofstream out(request, std::ios::binary);
    out << "{\"cases\": [";
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      if (i) out << ",\n";
      out << "{";
      if (!c.template_file.empty()) {
        out << "\"template_file\": " << JsonString(TemplatePath(c.template_file));
      } else {
        out << "\"template\": " << JsonString(c.template_text);
      }
      out << ", \"messages\": " << c.messages_json
          << ", \"add_generation_prompt\": " << (c.add_generation_prompt ? "true" : "false")
          << ", \"bos_token\": " << JsonString(c.bos) << ", \"eos_token\": " << JsonString(c.eos)
          << ", \"variables\": " << c.variables_json;
      if (c.now) out << ", \"now\": " << *c.now;
      out << "}";
    }
    out << "]}";
  }
  const std::string command = std::string(KILN_PYTHON) + " " + KILN_RENDER_TEMPLATES_PY +
                              " --request " + request.string() + " --output " + response.string() +
                              " 2>" + (dir / "stderr.txt").string();
  const int rc = std::system(command.c_str());
  const std::string stderr_text = ReadFile(dir / "stderr.txt");
  const std::string text = ReadFile(response);
  fs::remove_all(dir);
  if (rc != 0) {
    *why = "render_templates.py failed (exit " + std::to_string(rc) + "): " + stderr_text;
    return std::nullopt;
  }
  Result<Value> parsed = jinja::ParseJson(text);
  if (!parsed.ok() || !parsed->is_list() || parsed->list().items.size() != cases.size()) {
    *why = "render_templates.py gave an unreadable answer: " + text.substr(0, 200);
    return std::nullopt;
  }
  std::vector<Outcome> outcomes;
  for (const Value& item : parsed->list().items) {
    Outcome o;
    o.ok = item.dict().FindString("ok")->as_bool();
    if (o.ok) {
      o.text = item.dict().FindString("text")->str();
    } else {
      o.error_type = item.dict().FindString("error_type")->str();
      o.error = item.dict().FindString("error")->str();
    }
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

// Renders one case with kiln.
Result<std::string> RenderWithKiln(const Case& c) {
  const std::string source =
      c.template_file.empty() ? c.template_text : ReadFile(TemplatePath(c.template_file));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> t, ChatTemplate::Parse(source));
  ChatRenderOptions options;
  options.add_generation_prompt = c.add_generation_prompt;
  options.bos_token = c.bos;
  options.eos_token = c.eos;
  options.now = c.now;
  Result<Value> vars = jinja::ParseJson(c.variables_json);
  if (!vars.ok()) return vars.status();
  for (const auto& [k, v] : vars->dict().items()) {
    options.json_variables.emplace_back(k.str(), jinja::ToJson(v, jinja::JsonOptions()).value());
  }
  return t->RenderJson(c.messages_json, options);
}

// Renders every case with both and compares.
void ExpectSameAsJinja2(const std::vector<Case>& cases) {
  std::string why;
  std::optional<std::vector<Outcome>> expected = RenderWithJinja2(cases, &why);
  if (!expected) GTEST_SKIP() << why;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Outcome& want = (*expected)[i];
    Result<std::string> got = RenderWithKiln(c);
    SCOPED_TRACE(c.name);
    if (want.ok) {
      if (!got.ok()) {
        ADD_FAILURE() << c.name << ": Jinja2 renders it but kiln fails: " << got.status().ToString()
                      << "\nJinja2 gives:\n"
                      << want.text;
        continue;
      }
      EXPECT_EQ(*got, want.text) << c.name;
    } else {
      if (got.ok()) {
        ADD_FAILURE() << c.name << ": Jinja2 fails (" << want.error_type << ": " << want.error
                      << ") but kiln renders:\n"
                      << *got;
        continue;
      }
      if (want.error_type == "TemplateError") {  // raise_exception
        EXPECT_EQ(got.status().message(), want.error) << c.name;
      }
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

// --- real templates ---------------------------------------------------------------------------

struct TemplateInfo {
  const char* file;
  const char* bos;
  const char* eos;
};

constexpr TemplateInfo kTemplates[] = {
    {"llama-2-chat.jinja", "<s>", "</s>"},
    {"llama-3-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"llama-3.1-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"llama-3.2-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"tinyllama-zephyr.jinja", "<s>", "</s>"},
    {"mistral-7b-instruct-v0.1.jinja", "<s>", "</s>"},
    {"mistral-7b-instruct-v0.3.jinja", "<s>", "</s>"},
    {"qwen2.5-instruct.jinja", "", "<|im_end|>"},
    {"qwen3.jinja", "", "<|im_end|>"},
    {"smollm2-instruct.jinja", "<|im_start|>", "<|im_end|>"},
    {"deepseek-r1-distill-qwen.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
};

// A fixed moment for strftime_now: 2024-07-26 12:00 UTC.
constexpr std::time_t kNow = 1721995200;

struct Conversation {
  const char* name;
  const char* json;
};

const Conversation kConversations[] = {
    {"system+user",
     R"([{"role": "system", "content": "You are a helpful assistant."},
         {"role": "user", "content": "Hello!"}])"},
    {"user only", R"([{"role": "user", "content": "What is 2+2?"}])"},
    {"multi-turn with system",
     R"([{"role": "system", "content": "You are terse."},
         {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello! How can I help?"},
         {"role": "user", "content": "Tell me a joke."}])"},
    {"multi-turn without system",
     R"([{"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."},
         {"role": "user", "content": "Bye"},
         {"role": "assistant", "content": "Goodbye!"}])"},
    {"tricky content",
     R"([{"role": "system", "content": "  Be \"precise\" & {{careful}} {% raw %}\n\ttabs\n"},
         {"role": "user", "content": "Line1\nLine2 \u2014 \u00fcn\u00efc\u00f6d\u00e9 \u65e5\u672c\u8a9e \ud83d\ude42 'quotes' \\ back\\slash {#x#} </s> <|im_end|>"},
         {"role": "assistant", "content": "  answer with spaces \u3000 \n"},
         {"role": "user", "content": "<think>not really</think> final?"}])"},
    {"roles do not alternate",
     R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"},
    {"no messages", "[]"},
    {"assistant first",
     R"([{"role": "assistant", "content": "I start."}, {"role": "user", "content": "ok"}])"},
    {"reasoning in history",
     R"([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
         {"role": "user", "content": "3+3?"},
         {"role": "assistant", "content": "<think>\nagain\n</think>\n\n6"}])"},
};

TEST(ChatTemplateJinja2, RealTemplatesOnConversations) {
  std::vector<Case> cases;
  for (const TemplateInfo& t : kTemplates) {
    for (const Conversation& conv : kConversations) {
      for (bool agp : {true, false}) {
        Case c;
        c.name = std::string(t.file) + " / " + conv.name + (agp ? " / generation prompt" : "");
        c.template_file = t.file;
        c.messages_json = conv.json;
        c.add_generation_prompt = agp;
        c.bos = t.bos;
        c.eos = t.eos;
        c.now = kNow;
        cases.push_back(std::move(c));
      }
    }
  }
  ExpectSameAsJinja2(cases);
}

// Render (ChatMessage) and RenderJson agree, and match Jinja2 through the comparison above.
TEST(ChatTemplate, RenderMatchesRenderJson) {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."},
                                             {"user", "Hi \"there\"\n\u00fc"},
                                             {"assistant", "Hello"},
                                             {"user", "Again"}};
  const std::string json =
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \"there\"\n\u00fc"},)"
      R"({"role":"assistant","content":"Hello"},{"role":"user","content":"Again"}])";
  for (const TemplateInfo& info : kTemplates) {
    SCOPED_TRACE(info.file);
    auto t = ChatTemplate::Parse(ReadFile(TemplatePath(info.file)));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ChatRenderOptions options;
    options.add_generation_prompt = true;
    options.bos_token = info.bos;
    options.eos_token = info.eos;
    options.now = kNow;
    Result<std::string> a = (*t)->Render(messages, options);
    Result<std::string> b = (*t)->RenderJson(json, options);
    ASSERT_EQ(a.ok(), b.ok());
    if (a.ok()) {
      EXPECT_EQ(*a, *b);
    } else {
      EXPECT_EQ(a.status().message(), b.status().message());
    }
  }
}

constexpr const char* kWeatherTools = R"([
  {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather \"now\" \u00e0 la carte",
    "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "description": "City name"},
                     "unit": {"type": "string", "enum": ["c", "f"]},
                     "days": {"type": "integer", "minimum": 1, "maximum": 7.5}},
      "required": ["city"]}}},
  {"type": "function", "function": {"name": "noop", "description": "", "parameters": {},
    "return": {"type": "null"}}}])";

Case ToolCase(std::string name, const char* file, std::string messages, std::string variables,
              bool agp = true) {
  Case c;
  c.name = std::move(name);
  c.template_file = file;
  c.messages_json = std::move(messages);
  c.variables_json = std::move(variables);
  c.add_generation_prompt = agp;
  c.now = kNow;
  return c;
}

TEST(ChatTemplateJinja2, ToolsAndReasoning) {
  const std::string tools = std::string(R"({"tools": )") + kWeatherTools + "}";
  const std::string qwen_tool_chat = R"([
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Paris and Berlin?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
      {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Berlin\"}"}}]},
    {"role": "tool", "content": "{\"temp\": 21.5}"},
    {"role": "tool", "content": "{\"temp\": 18}"},
    {"role": "assistant", "content": "<think>\nBoth are mild.\n</think>\n\nParis 21.5\u00b0C, Berlin 18\u00b0C."},
    {"role": "user", "content": "Thanks!"}])";
  const std::string qwen3_thinking = R"([
    {"role": "user", "content": "<tool_response>x</tool_response>"},
    {"role": "user", "content": "Real question"},
    {"role": "assistant", "content": "Short answer", "reasoning_content": "\nI thought hard.\n"},
    {"role": "user", "content": "<tool_response>late</tool_response>"},
    {"role": "assistant", "content": "<think>\nmore\n</think>\n\nFinal", "tool_calls": [
      {"function": {"name": "noop", "arguments": {}}}]}])";
  const std::string llama_tool_chat = R"([
    {"role": "system", "content": "  Use tools.  "},
    {"role": "user", "content": "  Weather in Paris?  "},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "ipython", "content": {"temp": 22, "unit": "c"}},
    {"role": "assistant", "content": "It is 21 degrees."}])";
  const std::string llama_builtin_chat = R"([
    {"role": "user", "content": "Search kiln"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "brave_search", "arguments": {"query": "kiln", "count": "3"}}}]},
    {"role": "ipython", "content": "results..."}])";
  const std::string mistral_tool_chat = R"([
    {"role": "system", "content": "You answer weather questions."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "tool_calls": [{"id": "abc123xyz", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "abc123xyz", "content": "21 C"},
    {"role": "assistant", "content": "It is 21 C."},
    {"role": "user", "content": "Thanks"}])";
  const std::string mistral_bad_id = R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "tool_calls": [{"id": "short", "function": {"name": "get_weather", "arguments": {}}}]}])";
  const std::string r1_tool_chat = R"([
    {"role": "system", "content": "Sys prompt"},
    {"role": "user", "content": "Weather in two cities?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
    {"role": "tool", "content": "21"},
    {"role": "tool", "content": "25"},
    {"role": "assistant", "content": "<think>warm</think>Both warm."},
    {"role": "user", "content": "And tomorrow?"}])";

  std::vector<Case> cases = {
      ToolCase("qwen2.5 tools", "qwen2.5-instruct.jinja", qwen_tool_chat, tools),
      ToolCase("qwen2.5 tools, no system", "qwen2.5-instruct.jinja",
               R"([{"role": "user", "content": "hi"}])", tools),
      ToolCase("qwen3 tools", "qwen3.jinja", qwen_tool_chat, tools),
      ToolCase("qwen3 thinking off", "qwen3.jinja", R"([{"role": "user", "content": "hi"}])",
               R"({"enable_thinking": false})"),
      ToolCase("qwen3 thinking on", "qwen3.jinja", R"([{"role": "user", "content": "hi"}])",
               R"({"enable_thinking": true})"),
      ToolCase("qwen3 reasoning content", "qwen3.jinja", qwen3_thinking, "{}", false),
      ToolCase("qwen3 reasoning content + tools", "qwen3.jinja", qwen3_thinking, tools),
      ToolCase("llama3.1 tools", "llama-3.1-instruct.jinja", llama_tool_chat, tools),
      ToolCase("llama3.1 tools in system", "llama-3.1-instruct.jinja", llama_tool_chat,
               std::string(
                   R"({"tools_in_user_message": false, "date_string": "01 Jan 2025", "tools": )") +
                   kWeatherTools + "}"),
      ToolCase("llama3.1 builtin tools", "llama-3.1-instruct.jinja", llama_builtin_chat,
               R"({"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]})"),
      ToolCase("llama3.1 custom_tools", "llama-3.1-instruct.jinja",
               R"([{"role": "user", "content": "x"}])",
               std::string(R"({"custom_tools": )") + kWeatherTools + "}"),
      ToolCase("llama3.1 tools without a user message", "llama-3.1-instruct.jinja",
               R"([{"role": "system", "content": "s"}])", tools),
      ToolCase("llama3.1 two tool calls", "llama-3.1-instruct.jinja",
               R"([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
                   {"function": {"name": "a", "arguments": {}}},
                   {"function": {"name": "b", "arguments": {}}}]}])",
               "{}"),
      ToolCase("llama3.2 tools", "llama-3.2-instruct.jinja", llama_tool_chat, tools),
      ToolCase("llama3.2 date_string", "llama-3.2-instruct.jinja",
               R"([{"role": "user", "content": "x"}])", R"({"date_string": "09 Sep 2029"})"),
      ToolCase("mistral v0.3 tools", "mistral-7b-instruct-v0.3.jinja", mistral_tool_chat, tools),
      ToolCase("mistral v0.3 bad tool call id", "mistral-7b-instruct-v0.3.jinja", mistral_bad_id,
               tools),
      ToolCase("mistral v0.3 unknown role", "mistral-7b-instruct-v0.3.jinja",
               R"([{"role": "narrator", "content": "x"}])", "{}"),
      ToolCase("deepseek r1 tools", "deepseek-r1-distill-qwen.jinja", r1_tool_chat, "{}"),
      ToolCase("deepseek r1 tools, generation prompt off", "deepseek-r1-distill-qwen.jinja",
               r1_tool_chat, "{}", false),
  };
  ExpectSameAsJinja2(cases);
}

// strftime_now reads the clock it is given (Llama 3.2 formats today's date with it).
TEST(ChatTemplateJinja2, StrftimeNow) {
  std::vector<Case> cases;
  for (std::time_t now : {kNow, std::time_t{0}, std::time_t{2000000000}}) {
    Case c;
    c.name = "strftime_now at " + std::to_string(now);
    c.template_text = "{{ strftime_now('%d %b %Y|%Y-%m-%d %H:%M:%S|%A %B %j|%%|%y') }}";
    c.now = now;
    cases.push_back(c);
    c.name = "llama3.2 at " + std::to_string(now);
    c.template_text.clear();
    c.template_file = "llama-3.2-instruct.jinja";
    c.messages_json = R"([{"role": "user", "content": "What day is it?"}])";
    c.add_generation_prompt = true;
    cases.push_back(c);
  }
  ExpectSameAsJinja2(cases);
}

// --- the language, case by case ---------------------------------------------------------------

struct Snippet {
  const char* source;
  const char* variables = "{}";
};

const Snippet kSnippets[] = {
    // Whitespace control, trim_blocks, lstrip_blocks.
    {"a\n{% if true %}\nb\n{% endif %}\nc"},
    {"  {% if true %}x{% endif %}  \n  y"},
    {"{%- if true -%}  x  {%- endif -%}  z"},
    {"a  {{- 'b' -}}  c\n  {{- 'd' }}"},
    {"{# comment #}\nx\n  {# indented comment #}\ny {#- tight -#} z"},
    {"  {%+ if true %}x{% endif +%}\ny\n"},
    {"\t{% for i in [1, 2] %}\n\t{{ i }}\n\t{% endfor %}\n"},
    {"x {% if true %}y{% endif %} {% if true %}\nz{% endif %}"},
    {"{% if true %}   \n{% endif %}w"},
    {"{{ 'a' }}\n{{ 'b' }}\n"},
    {"line\n\n"},
    {"a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\rd"},
    {"{% raw %}{{ not parsed }} {% if %}{% endraw %}|{%- raw -%}  x  {%- endraw -%}  |"},
    {"  {% raw %}\n  y\n  {% endraw %}\nz"},
    {"{%- for i in range(3) %}\n  {{- i }}\n{%- endfor %}"},
    {"\u00a0 {%- if true %}x{% endif -%} \u3000\u2028y"},
    {"{% if true %}{# c #}{% endif %}\n  {# c2 -#}\n\nq"},
    // Literals and printing.
    {"{{ [1, 'a', none, true, 1.5, -2] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {'a': 1, 'b': [1]} "
     "}} "
     "{{ {} }} {{ True }} {{ None }} {{ false }}"},
    {"{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'back\\\\slash'] }}"},
    {"{{ ['\\u00e9', '\\u65e5\\u672c', '\\n\\t\\r', '\\x00\\x7f', '\\u00a0', '\\u2028', "
     "'\\U0001F600'] }}"},
    {"{{ 'a\\tb\\n\\'c\\' \"d\" \\x41\\u00e9\\U0001F600 \\\\ \\q \\101' }}|{{ \"x\\\"y\" }}"},
    {"{{ 'a' 'b' \"c\" }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2E-3 }}"},
    {"{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-7 }} {{ 0.0001 }} {{ 123456789.0 * "
     "1000 }} "
     "{{ 1.0 }} {{ 100.0 / 3 }} {{ -0.0 }} {{ 2.5e16 }} {{ 1/3 }} {{ 2 ** 0.5 }}"},
    // Operators.
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} "
     "{{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 + 1 }} {{ 10 / 4 }} "
     "{{ 3 * 'ab' }} {{ 'ab' * 0 }} {{ [1] * 3 }} {{ [1, 2] + [3] }} {{ 'a' + 'b' }} {{ true + 1 "
     "}}"},
    {"{{ 7.5 // 2 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }} {{ -1 % 0.3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 "
     "}}"},
    {"{{ 'a' ~ 1 ~ none ~ true ~ [1, 'x'] ~ 1.0 ~ x }}|{{ -3|abs }} {{ -(3)|abs }}"},
    {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} "
     "{{ true == 1 }} {{ none == none }} {{ 'a' != 'b' }} {{ 2 >= 2.0 }} {{ 'B' < 'a' }} {{ [1] == "
     "(1,) }}"},
    {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in y }} "
     "{{ '' in 'abc' }} {{ 1.0 in [1] }} {{ (1, 2) in [(1, 2)] }}"},
    {"{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ '' or none }} {{ not 0 }} {{ not none }} "
     "{{ not not 'a' }} {{ x or 'fallback' }} {{ [] or {} }}"},
    {"{{ 'y' if true else 'n' }} {{ 'y' if false }}|{{ 1 if 0 else 2 if 1 else 3 }}|"
     "{{ ('a' if x is defined else 'b') ~ '!' }}"},
    // Attribute, item, slice.
    {"{{ d.a.b[1] }} {{ d['a']['b'][-1] }} {{ d.a.b.0 }} {{ d.missing }}|{{ d.missing is defined "
     "}} "
     "{{ l[10] }}|{{ l[-1] }} {{ d['items'] }} {{ d.items is defined }} {{ none.x }}|{{ l.x }}|",
     R"({"d": {"a": {"b": [10, 20]}, "items": 5}, "l": [1, 2, 3]})"},
    {"{{ 'abc'[1] }} {{ 'abc'[-1] }} {{ 'h\u00e9llo'[1:3] }} {{ 'abcdef'[::2] }} {{ 'abc'[::-1] }} "
     "{{ 'abc'[5:] }}|{{ [1, 2, 3, 4][1:-1] }} {{ [1, 2, 3][::-1] }} {{ (1, 2, 3)[:2] }} "
     "{{ 'abcdef'[-2:] }} {{ 'abcdef'[4:1:-1] }} {{ [1, 2, 3][-10:10] }}|"},
    {"{{ messages[1:] }} {{ messages[::-1]|map(attribute='role')|join(',') }}", R"({"x": 1})"},
    // Undefined.
    {"{{ x }}|{{ x|length }}|{{ x is defined }}|{{ x is undefined }}|{{ x == x }}|{{ "
     "x|default('d') }}|"
     "{{ x ~ 'a' }}|{% for i in x %}no{% else %}empty{% endfor %}|{{ 'a' in x }}|{{ x|string }}|"
     "{{ x|trim }}|{{ x|list }}|{{ x|first }}|{{ x|upper }}|{{ x is none }}|{{ not x }}"},
    // Filters.
    {"{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Hello World'|upper }}|{{ 'Hello'|lower }}|"
     "{{ 'hello WORLD'|capitalize }}|{{ 'hello-world foo(bar) x_y'|title }}|{{ 42|upper }}"},
    {"{{ [1, 2, 3]|length }} {{ 'h\u00e9llo'|length }} {{ {'a': 1}|count }} {{ ''|length }}"},
    {"{{ [1, 2, 3]|join(', ') }} {{ [1, 2, 3]|join }} {{ [{'n': 'a'}, {'n': 'b'}]|join('-', "
     "attribute='n') }} "
     "{{ ['x', none, 1.5]|join('|') }} {{ 'abc'|join('.') }}"},
    {"{{ [3, 1, 2]|first }} {{ [3, 1, 2]|last }} {{ 'abc'|first }} {{ []|first }}|{{ 'abc'|list }} "
     "{{ {'a': 1, 'b': 2}|list }} {{ {'a': 1, 'b': 2}|last }}"},
    {"{{ {'a': 1, 'b': 2}|items|list }} {% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% "
     "endfor %}"},
    {"{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} "
     "{{ 12|replace('1', 'x') }}"},
    {"{{ 42|string ~ 'x' }} {{ [1]|string }} {{ none|string }} {{ 1.5|string }}"},
    {"{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s|capitalize }}|{{ s.title() }}|{{ s.upper() }}|"
     "{{ s.lower() }}|{{ s.capitalize() }}|{{ s is lower }}|{{ s|upper is upper }}|{{ "
     "'x\\u00df'.upper() }}|"
     "{{ '\\u00df'.title() }}|{{ '\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3'.lower() }}|"
     "{{ '\\u0130'.lower()|length }}|{{ s.isalpha() }}",
     R"({"s": "\u00e9t\u00e9 \u00c0 \u0141\u00f3d\u017a \u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430 Vi\u1ec7t \u65e5\u672c 1-2"})"},
    {"{% set g = 'x'|items %}{{ g is iterable }} {{ not g }} {% set h = [1]|map('int', 'bad') "
     "%}ok"},
    {"{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ -3.9|int }} "
     "{{ true|int }} {{ ' 12 '|int }} {{ '0x1A'|int(0, 16) }} {{ '1_000'|int }} {{ none|int }} "
     "{{ '3.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ '1e3'|float }} {{ '-7'|int }}"},
    {"{{ none|default('d') }} {{ ''|default('d', true) }} {{ 0|d('z', boolean=true) }} {{ "
     "0|default('z') }} "
     "{{ x|d }}|"},
    {"{{ v|tojson }}\n{{ v|tojson(indent=2) }}\n{{ v|tojson(sort_keys=true) }}\n"
     "{{ v|tojson(separators=(',', ':')) }}\n{{ v|tojson(indent='\\t') }}\n{{ "
     "'\u00e9\U0001F600'|tojson(true) }}\n"
     "{{ v|tojson(indent=0) }}\n{{ [1, [2, [3, {}], []]]|tojson(indent=1) }}\n{{ "
     "'a\\u0001\\b\\f</'|tojson }}\n"
     "{{ {1: 2, 1.5: 'x', true: none, none: 1}|tojson }} {{ (1, 2)|tojson }} {{ 1e100|tojson }}",
     R"({"v": {"b": [1, 2.5, "x\"y\n", null, true, -0.0, 1e-10], "a": {"\u00e9": "\u00fc"}, "c": [], "d": {}}})"},
    {"{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list }} "
     "{{ ms|rejectattr('role', 'eq', 'user')|list|length }} {{ [1, 2, 3, 4]|select('odd')|list }} "
     "{{ [1, 2, 3, 4]|reject('even')|list }} {{ ms|map(attribute='role')|unique|list }} "
     "{{ ['a', 'B', 'c']|map('upper')|join }} {{ ms|selectattr('c')|list|length }} "
     "{{ ms|map(attribute='zz', default='-')|join }} {{ [0, 1, '', 'a']|select|list }} "
     "{{ ms|selectattr('c', 'gt', 1)|map(attribute='c')|join(',') }} {{ ['a', 'b']|map('replace', "
     "'a', 'x')|list }}",
     R"({"ms": [{"role": "user", "c": 1}, {"role": "assistant", "c": 2}, {"role": "user", "c": 3}]})"},
    {"{% if [1]|select('even') %}T{% endif %} {% set g = [1, 2]|select('odd') %}{{ g|list }}{{ "
     "g|list }} "
     "{{ [1, 2]|reverse|list }} {{ 'abc'|reverse }} {{ {'a': 1, 'b': 2}|reverse|list }}"},
    {"{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) "
     "}} "
     "{{ [3, 1, 2]|sort(reverse=true) }} {{ ms|sort(attribute='c', "
     "reverse=true)|map(attribute='c')|list }} "
     "{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }} "
     "{{ ms|sort(attribute='role,c')|map(attribute='c')|list }}",
     R"({"ms": [{"role": "user", "c": 1}, {"role": "assistant", "c": 2}, {"role": "user", "c": 3}]})"},
    {"{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum(start=1) }} "
     "{{ ['b', 'A']|min }} {{ []|max }}|{{ [{'c': 5}, {'c': 3}]|sum(attribute='c') }}"},
    {"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', "
     "blank=true) }}|"
     "{{ ''|indent }}|{{ 'x\\n'|indent(1) }}|"},
    {"{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }} {{ '<i>'|safe }}"},
    {"{{ {'a': 1}|attr('a') }}|{{ ns_like|attr('x') }}|", R"({"ns_like": {"x": 3}})"},
    {"{% filter upper %}abc {{ 'd' }}{% endfilter %} {% filter trim|replace('b', 'B') %}  abc  {% "
     "endfilter %}"},
    // Tests.
    {"{{ 1 is odd }} {{ 2 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ none is "
     "none }} "
     "{{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1 is integer }} {{ 1.0 is "
     "float }} "
     "{{ true is boolean }} {{ false is false }} {{ 1 is true }} {{ 'a' is string }} {{ {} is "
     "mapping }} "
     "{{ [] is iterable }} {{ 'a' is iterable }} {{ x is iterable }} {{ 1 is iterable }} {{ [] is "
     "sequence }} "
     "{{ {} is sequence }} {{ 'a' is lower }} {{ 'A' is upper }} {{ 1 is in [1] }} {{ 1 is eq 1 }} "
     "{{ 2 is gt 1 }} {{ 1 is lessthan 2 }} {{ 'x' is ne 'y' }} {{ none is sameas none }} "
     "{{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }} {{ x is not defined }} "
     "{{ 3 is >= 3 }} {{ 2 is == 2 }} {{ 'a' is equalto 'a' }} {{ x is callable }} {{ 'a1' is "
     "lower }}"},
    {"{{ 1 is defined and 2 is odd }} {{ x is defined or 'no' }} {{ not x is defined }}"},
    // Statements.
    {"{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
     "loop.revindex0 }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}"
     "{{ loop.cycle('a', 'b') }}{{ loop.depth }};{% endfor %}"},
    {"{% for x in range(10) if x is odd %}{{ x }}{{ loop.last }}{{ loop.length }},{% endfor %}"},
    {"{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index "
     "}}"
     "{{ a }}{{ b }} {% endfor %}{% endfor %}"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% "
     "endif %}"
     "{{ i }}{% endfor %}|{% for i in [] %}x{% else %}none{% endfor %}|{% for i in [1] %}{% break "
     "%}{% else %}E{% endfor %}"},
    {"{% set x = 1 %}{% for i in [1, 2, 3] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x "
     "}}"},
    {"{% for i in [1, 2, 3] %}{% if i > 1 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}|{{ y "
     "}}|{{ i }}"},
    {"{% set x = 5 %}{% for i in [1, 2] %}{% if i == 2 %}{% set x = 7 %}{% endif %}{{ x }}{% "
     "endfor %}{{ x }}"},
    {"{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
     "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}"},
    {"{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }}{{ ns.b }}|{{ ns }}|{{ namespace({'k': "
     "2}, j=3) }}"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }}{% set e = 1, 2 %}{{ "
     "e }}"},
    {"{% set x %}a{{ 1 + 1 }}b{% endset %}{{ x }}|{% set y | upper %}hi{% endset %}{{ y }}"},
    {"{% set x %}{% set inner = 1 %}a{% endset %}{{ inner }}|{% with a = 1 %}{% set b = 2 %}{% "
     "endwith %}{{ b }}|"
     "{% filter upper %}{% set c = 3 %}{% endfilter %}{{ c }}|{% for i in [] %}{% else %}{% set d "
     "= 4 %}{% endfor %}{{ d }}|"
     "{% if true %}{% set e = 5 %}{% endif %}{{ e }}"},
    {"{% set a = 'outer' %}{% with a = 1, b = a %}{{ a }} {{ b }}{% endwith %}|"
     "{% macro m(p, q=p ~ '!') %}{{ p }}{{ q }}{% endmacro %}{{ m('x') }}|"
     "{% macro n() %}{{ a }}{% set a = 'in' %}{{ a }}{% endmacro %}{{ n() }}{{ a }}"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} "
     "{{ greet('Al', punct='?') }} {{ greet(name='Z') }} {{ greet() }}|"},
    {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"},
    {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|{% print 'x', 1 %}|"
     "{% generation %}gen{% endgeneration %}"},
    {"{% for v in [0, 1, 2] %}{% if v == 0 %}zero{% elif v == 1 %}one{% else %}many{% endif %} {% "
     "endfor %}"},
    {"{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %} {% for a, b in [[1, 2], [3, 4]] %}{{ a "
     "}}{{ b }}{% endfor %} "
     "{% for a, b in ['xy'] %}{{ a }}{{ b }}{% endfor %} {% for c in 'h\u00e9' %}[{{ c }}]{% "
     "endfor %}"},
    {"{% set messages = messages[1:] %}{{ messages|length }}{% for m in messages %}{{ m.role }}{% "
     "endfor %}"},
    {"{{ loop }}|{% for i in [1] %}{{ loop.index }}{% endfor %}{{ loop }}|"},
    // Jinja's static scoping: a name assigned in a scope before any use there starts out
    // undefined in that scope, even where the template's variables have it.
    {"{{ y }}{% for i in [1] %}{{ y }}{% endfor %}{% set y = 1 %}{{ y }}", R"({"y": 5})"},
    {"{% for i in [1] %}[{{ y }}]{% endfor %}{% set y = 1 %}{{ y }}", R"({"y": 5})"},
    {"{% for x in [1, 2] if y %}{{ x }}{% endfor %}{% set y = 1 %}", R"({"y": 5})"},
    {"{% for x in [1, 2] if y %}{% set y = 0 %}{{ x }}{{ y }}{% endfor %}", R"({"y": 5})"},
    {"{% for x in [1, 2] %}{% for z in [1] if y %}{{ z }}{% endfor %}{% set y = 1 %}{{ x }}{% "
     "endfor %}",
     R"({"y": 5})"},
    {"{% macro m() %}{{ y }}{% set y = 2 %}{{ y }}{% endmacro %}{{ m() }}|"
     "{% macro k() %}{% for i in [1] %}[{{ y }}]{% endfor %}{% set y = 2 %}{{ y }}{% endmacro %}{{ "
     "k() }}",
     R"({"y": 5})"},
    {"{% for i in [1] %}[{{ y }}]{% endfor %}{% if c %}{% set y = 2 %}{% else %}{% set y = 3 %}{% "
     "endif %}|"
     "{% for i in [1] %}[{{ z }}]{% endfor %}{% if c %}{% set z = 2 %}{% elif d %}{% set z = 4 %}"
     "{% else %}{% set z = 3 %}{% endif %}|{% for i in [1] %}[{{ w }}]{% endfor %}{% if c %}"
     "{% set w = 2 %}{% endif %}{{ w }}",
     R"({"y": 5, "z": 6, "w": 7, "c": false, "d": false})"},
    {"{% set y = y + 1 %}{% for i in [1] %}{{ y }}{% endfor %}|{% with %}{% for i in [1] %}[{{ q "
     "}}]{% endfor %}"
     "{% set q = 1 %}{% endwith %}|{% filter upper %}{% for i in [1] %}[{{ q }}]{% endfor %}{% set "
     "q = 'x' %}"
     "{{ q }}{% endfilter %}|{% set b %}{% for i in [1] %}[{{ q }}]{% endfor %}{% set q = 2 %}{% "
     "endset %}{{ b }}",
     R"({"y": 5, "q": 9})"},
    {"{% for a in [1, 2] %}{% for b in [1] %}[{{ t }}]{% endfor %}{% set t = a %}{{ t }}{% endfor "
     "%}"
     "{% for a in [] %}{% else %}{% for b in [1] %}[{{ t }}]{% endfor %}{% set t = 0 %}{% endfor "
     "%}",
     R"({"t": 5})"},
    // Methods.
    {"{{ '  ab  '.strip() }}|{{ 'xxabxx'.strip('x') }}|{{ '\\n\\nab\\n'.lstrip('\\n') }}|{{ "
     "'ab\\n\\n'.rstrip() }}|"
     "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ "
     "'a,b,c'.rsplit(',', 1) }}|"
     "{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aXb'.upper() }}|"
     "{{ 'hello wORLD'.title() }}|{{ 'abc'.replace('b', 'B') }}|{{ 'abcabc'.find('c') }}|"
     "{{ 'h\u00e9llo'.find('l') }}|{{ 'abc'.rfind('z') }}|{{ 'aaa'.count('a') }}|{{ '-'.join(['a', "
     "'b']) }}|"
     "{{ '123'.isdigit() }}|{{ 'prefix_x'.removeprefix('prefix_') }}|{{ 'a=b=c'.partition('=') }}|"
     "{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ ' x '.split(' ') }}|{{ 'a b  c '.rsplit(None, 1) }}|"
     "{{ '\\u00a0x\\u3000'.strip() }}|{{ 'ab'.lower() }}|{{ 'hello world'.capitalize() }}"},
    {"{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.items()|list }} {{ d.keys()|list "
     "}} "
     "{{ d.values()|list }} {% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d.copy() }}",
     R"({"d": {"a": 1, "b": 2}})"},
    {"{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {% set f = 'ab'.upper %}{{ f() }}"},
    {"{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list "
     "}} "
     "{{ dict(a=1, b='x') }} {{ 3 in range(5) }}"},
    {"{{ content }}|{{ content|length }}|{{ content.split('\\n')[-1] }}",
     R"({"content": "{{ not a template }} {% if %} \u00e9\n\ud83d\ude00"})"},
    // Errors in Jinja2 that kiln must report too.
    {"{{ x.y }}"},
    {"{{ x + 1 }}"},
    {"{{ x[0] }}"},
    {"{{ x() }}"},
    {"{{ 1 + 'a' }}"},
    {"{{ 1 // 0 }}"},
    {"{{ 1 < 'a' }}"},
    {"{{ x < 1 }}"},
    {"{{ 1 in 5 }}"},
    {"{{ 1 in 'abc' }}"},
    {"{% for a, b in [1] %}{% endfor %}"},
    {"{% for a, b in [[1, 2, 3]] %}{% endfor %}"},
    {"{{ [1].append(2) }}"},
    {"{{ {}.update(a=1) }}"},
    {"{{ x|tojson }}"},
    {"{{ 'abc'[1:2:0] }}"},
    {"{{ n[::-1] }}", R"({"n": 5})"},
    {"{{ d[1:] }}", R"({"d": {"a": 1}})"},
    {"{% set z = none %}{{ z[1:] }}"},
    {"{{ x[1:] }}"},
    {"{% set i = 1.5 %}{{ 'ab'[i:] }}"},
    {"{{ 5|length }}"},
    {"{{ ([1]|select)|length }}"},
    {"{{ 1 is divisibleby 0 }}"},
    {"{% set n = 1 %}{% set n.a = 2 %}"},
    {"{{ none|items|list }}"},
    {"{{ [1]|map('int', 'bad')|list }}"},
    {"{{ [1]|selectattr|list }}"},
    {"{{ range(1000000)|length }}"},
    {"{{ raise_exception('boom: ' ~ 42) }}"},
    {"{% if true %}{{ raise_exception(\"it's \\\"quoted\\\"\") }}{% endif %}"},
    {"{{ 'a'.split('') }}"},
    {"{{ foo.bar }}"},
    {"{{ 1 + }}"},
    {"{% if true %}unclosed"},
    {"{% for x in %}{% endfor %}"},
    {"{% endif %}"},
    {"{{ 'unterminated }}"},
    {"{# unterminated comment"},
    {"{{ (1, 2 }}"},
    {"{% set %}"},
    {"{{ a.b( }}"},
    {"{% break %}"},
    {"{% macro m(a=1, b) %}{% endmacro %}"},
};

TEST(ChatTemplateJinja2, LanguageCases) {
  std::vector<Case> cases;
  int i = 0;
  for (const Snippet& s : kSnippets) {
    Case c;
    c.name = "snippet " + std::to_string(i++) + ": " + s.source;
    c.template_text = s.source;
    c.variables_json = s.variables;
    c.messages_json = R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])";
    c.now = kNow;
    cases.push_back(std::move(c));
  }
  ExpectSameAsJinja2(cases);
}

// Random templates over the whole subset (render_templates.py --random-cases: expressions,
// filters, tests, methods, loops, scopes, whitespace control), rendered by both.
TEST(ChatTemplateJinja2, RandomTemplates) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_chat_template_random_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path out = dir / "random.json";
  const std::string command = std::string(KILN_PYTHON) + " " + KILN_RENDER_TEMPLATES_PY +
                              " --random-cases 1500 --seed 20260501 --output " + out.string() +
                              " 2>/dev/null";
  const int rc = std::system(command.c_str());
  const std::string text = ReadFile(out);
  fs::remove_all(dir);
  if (rc != 0) GTEST_SKIP() << "render_templates.py failed (exit " << rc << ")";
  Result<Value> parsed = jinja::ParseJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& cases = parsed->dict().FindString("cases")->list().items;
  const auto& results = parsed->dict().FindString("results")->list().items;
  ASSERT_EQ(cases.size(), results.size());
  int rendered = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& source = cases[i].dict().FindString("template")->str();
    const DictData& result = results[i].dict();
    ChatRenderOptions options;
    for (const auto& [k, v] : cases[i].dict().FindString("variables")->dict().items()) {
      options.json_variables.emplace_back(k.str(), jinja::ToJson(v, jinja::JsonOptions()).value());
    }
    Result<std::string> got = [&]() -> Result<std::string> {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> t, ChatTemplate::Parse(source));
      return t->RenderJson("[]", options);
    }();
    if (result.FindString("ok")->as_bool()) {
      ++rendered;
      if (!got.ok()) {
        ADD_FAILURE() << "template " << i
                      << ": Jinja2 renders it but kiln fails: " << got.status().ToString() << "\n"
                      << source;
        continue;
      }
      EXPECT_EQ(*got, result.FindString("text")->str()) << "template " << i << ":\n" << source;
    } else {
      EXPECT_FALSE(got.ok()) << "template " << i << ": Jinja2 fails ("
                             << result.FindString("error")->str() << ") but kiln renders\n"
                             << source;
    }
  }
  EXPECT_GT(rendered, 200);  // the comparison covers real output, not only errors
}

// --- kiln's own errors and limits -------------------------------------------------------------

Status ParseError(std::string_view source) {
  Result<std::unique_ptr<ChatTemplate>> t = ChatTemplate::Parse(source);
  return t.ok() ? Status::OK() : t.status();
}

Result<std::string> RenderText(std::string_view source,
                               const std::vector<ChatMessage>& messages = {},
                               ChatRenderOptions options = {}) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ChatTemplate> t, ChatTemplate::Parse(source));
  return t->Render(messages, options);
}

TEST(ChatTemplate, UnsupportedConstructsAreNamedWithTheirLine) {
  EXPECT_EQ(ParseError("line 1\n\n{{ text|wordcount }}").message(),
            "chat template line 3: filter 'wordcount' is not supported");
  EXPECT_EQ(ParseError("{% if x is escaped_html %}{% endif %}").message(),
            "chat template line 1: test 'escaped_html' is not supported");
  EXPECT_EQ(ParseError("a\n{% include 'other.jinja' %}").message(),
            "chat template line 2: tag 'include' is not supported");
  EXPECT_EQ(ParseError("{% do x.append(1) %}").message(),
            "chat template line 1: tag 'do' is not supported");
  EXPECT_EQ(ParseError("\n\n\n{{ '{}'.format(1) }}").message(),
            "chat template line 4: method 'format' is not supported");
  EXPECT_EQ(ParseError("{% set c = cycler('a') %}").message(),
            "chat template line 1: function 'cycler' is not supported");
  EXPECT_EQ(ParseError("{% for x in y recursive %}{% endfor %}").message(),
            "chat template line 1: recursive for-loops are not supported");
  EXPECT_EQ(ParseError("{{ f(*args) }}").message(),
            "chat template line 1: *args and **kwargs in calls are not supported");
  EXPECT_EQ(ParseError("{{ xs|selectattr('a', 'shiny') }}").message(),
            "chat template line 1: test 'shiny' is not supported");
  for (const char* bad : {"{{ x|wordcount }}", "{% include 'x' %}", "{{ 'a'.zfill(3) }}"}) {
    EXPECT_EQ(ParseError(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(ParseError("ok\n{% for m in messages %}\n{{ m }}").message(),
            "chat template line 2: unexpected end of template: '{% for %}' is not closed "
            "(expected '{% endfor %}')");
  EXPECT_EQ(ParseError("x\n\n{{ 'a' ").message(),
            "chat template line 3: unexpected end of template: '{{' is not closed");
  EXPECT_EQ(ParseError("{# never closed").message(),
            "chat template line 1: unterminated comment: '{#' has no matching '#}'");
  EXPECT_EQ(ParseError("{{ 'abc }}").message(),
            "chat template line 1: unterminated string literal");
  EXPECT_EQ(ParseError("{% endif %}").message(), "chat template line 1: unexpected tag 'endif'");
  EXPECT_EQ(ParseError("{{ (1 ]] }}").message(),
            "chat template line 1: unexpected ']', expected ')'");
  EXPECT_EQ(ParseError("\n{% break %}").message(),
            "chat template line 2: 'break' outside of a loop");
  EXPECT_EQ(
      ParseError("{{ 99999999999999999999 }}").message(),
      "chat template line 1: integer literal 99999999999999999999 is out of the 64-bit range");
  EXPECT_EQ(ParseError("{% raw %}x").message(),
            "chat template line 1: unterminated raw block: '{% raw %}' has no '{% endraw %}'");
}

TEST(ChatTemplate, RaiseExceptionGivesItsMessage) {
  Result<std::string> r =
      RenderText("a{% if messages|length == 0 %}{{ raise_exception('no messages!') }}{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "no messages!");
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  Result<std::string> r = RenderText("x\n{{ messages[0].content }}");  // no messages
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "chat template line 2: list object has no element 0");
  r = RenderText("{% set a = 1 %}\n\n{{ a + 'x' }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "chat template line 3: unsupported operand type(s) for +: 'int' and 'str'");
  r = RenderText("{{ undefined_thing.attr }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "chat template line 1: 'undefined_thing' is undefined");
}

TEST(ChatTemplate, UndefinedPrintsEmptyAndIsFalse) {
  Result<std::string> r = RenderText("[{{ nothing }}]{% if nothing %}T{% else %}F{% endif %}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "[]F");
}

TEST(ChatTemplate, HugeLoopsAreStopped) {
  Result<std::string> r = RenderText(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("steps"), std::string::npos) << r.status().message();
  r = RenderText("{{ range(100001)|length }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("range too big"), std::string::npos);
}

TEST(ChatTemplate, DeepRecursionIsStopped) {
  Result<std::string> r = RenderText("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests too deeply"), std::string::npos)
      << r.status().message();
  std::string deep(5000, '(');
  deep = "{{ " + deep + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(ParseError(deep).message().find("nested too deeply"), std::string::npos);
}

TEST(ChatTemplate, HugeStringsAreStopped) {
  Result<std::string> r = RenderText("{{ 'x' * 1000000000 }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("string of more than"), std::string::npos);
  r = RenderText(
      "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("string of more than"), std::string::npos);
}

TEST(ChatTemplate, NamespaceCyclesDoNotHang) {
  Result<std::string> r = RenderText("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_FALSE(r.ok());
  r = RenderText("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "True");
}

TEST(ChatTemplate, BadInputIsRefused) {
  EXPECT_EQ(ParseError("\xff\xfe").message(), "chat template is not valid UTF-8");
  EXPECT_EQ(ParseError(std::string(2 << 20, 'x')).code(), StatusCode::kInvalidArgument);
  auto t = ChatTemplate::Parse("{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  ChatRenderOptions options;
  const std::vector<ChatMessage> bad = {{"user", "\xc3\x28"}};
  EXPECT_EQ((*t)->Render(bad, options).status().message(), "message 0 is not valid UTF-8");
  EXPECT_EQ((*t)->RenderJson("{\"role\": 1}", options).status().message(),
            "chat messages: expected a JSON array of message objects");
  EXPECT_FALSE((*t)->RenderJson("[{\"role\": ", options).ok());
  EXPECT_FALSE((*t)->RenderJson("[\"\\ud800\"]", options).ok());
  options.json_variables = {{"tools", "[1, 2"}};
  EXPECT_EQ(
      (*t)->RenderJson("[]", options).status().message().rfind("chat template variable 'tools'", 0),
      0u);
  options.json_variables = {{"messages", "[]"}};
  EXPECT_FALSE((*t)->RenderJson("[]", options).ok());
}

TEST(ChatTemplate, JsonVariablesReachTheTemplate) {
  ChatRenderOptions options;
  options.json_variables = {{"enable_thinking", "false"}, {"n", "3"}, {"s", "\"x\\ny\""}};
  Result<std::string> r =
      RenderText("{{ enable_thinking is false }}|{{ n * 2 }}|{{ s }}|{{ tools }}|{{ documents }}",
                 {}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "True|6|x\ny|None|None");
}

// One parsed template rendered from many threads gives the same text everywhere.
TEST(ChatTemplate, RenderIsThreadSafe) {
  auto t = ChatTemplate::Parse(ReadFile(TemplatePath("qwen3.jinja")));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::vector<ChatMessage> messages = {
      {"system", "s"}, {"user", "u"}, {"assistant", "<think>r</think>a"}, {"user", "v"}};
  ChatRenderOptions options;
  options.add_generation_prompt = true;
  Result<std::string> want = (*t)->Render(messages, options);
  ASSERT_TRUE(want.ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        Result<std::string> got = (*t)->Render(messages, options);
        if (!got.ok() || *got != *want) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Every stored template parses (whatever the machine has for Python).
TEST(ChatTemplate, AllStoredTemplatesParse) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(KILN_CHAT_TEMPLATES_DIR)) {
    if (entry.path().extension() != ".jinja") continue;
    ++n;
    auto t = ChatTemplate::Parse(ReadFile(entry.path()));
    EXPECT_TRUE(t.ok()) << entry.path() << ": " << t.status().ToString();
  }
  EXPECT_GE(n, 11);
}

}  // namespace
}  // namespace kiln::llm
