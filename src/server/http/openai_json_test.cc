// SPDX-License-Identifier: Apache-2.0
// OpenAI-compatible JSON: every request field's accepted values and its refusal (message and
// error param), prompt and messages forms, the exact documents of every writer for small fixed
// inputs (expected strings written by hand), SSE framing, UTF-8 handling of token texts, and a
// mutation test of both request parsers.
#include "server/http/openai_json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "base/testing/mutate.h"

namespace kiln {
namespace {

constexpr const char* kChatPrefix = R"({"messages":[{"role":"user","content":"hi"}])";
constexpr const char* kCompletionPrefix = R"({"prompt":"hi")";

// A body with `fields` (comma-separated members, may be empty) after a valid prompt/messages,
// or `fields` itself when it is a whole object.
std::string Body(OpenAiApi api, const std::string& fields) {
  if (!fields.empty() && fields[0] == '{') return fields;
  std::string body = api == OpenAiApi::kChat ? kChatPrefix : kCompletionPrefix;
  if (!fields.empty()) body += "," + fields;
  return body + "}";
}

Result<OpenAiRequest> Parse(OpenAiApi api, const std::string& body, std::string* param = nullptr) {
  return api == OpenAiApi::kChat ? ParseChatCompletionRequest(body, param)
                                 : ParseCompletionRequest(body, param);
}

OpenAiRequest ParseOk(OpenAiApi api, const std::string& fields) {
  const std::string body = Body(api, fields);
  auto r = Parse(api, body);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << body;
  return r.ok() ? std::move(r).value() : OpenAiRequest{};
}

TEST(OpenAiParseTest, Defaults) {
  for (OpenAiApi api : {OpenAiApi::kCompletions, OpenAiApi::kChat}) {
    const OpenAiRequest r = ParseOk(api, "");
    EXPECT_EQ(r.model, "");
    EXPECT_FALSE(r.stream);
    EXPECT_FALSE(r.include_usage);
    EXPECT_FALSE(r.echo);
    EXPECT_EQ(r.logprobs, -1);
    EXPECT_EQ(r.user, "");
    const GenSamplingParams& s = r.request.sampling;
    EXPECT_EQ(s.temperature, 1.0f);
    EXPECT_EQ(s.top_p, 1.0f);
    EXPECT_EQ(s.top_k, 0);
    EXPECT_EQ(s.min_p, 0.0f);
    EXPECT_EQ(s.repetition_penalty, 1.0f);
    EXPECT_EQ(s.presence_penalty, 0.0f);
    EXPECT_EQ(s.frequency_penalty, 0.0f);
    EXPECT_TRUE(s.logit_bias.empty());
    EXPECT_FALSE(s.seed.has_value());
    EXPECT_TRUE(s.stop.empty());
    EXPECT_TRUE(s.stop_token_ids.empty());
    EXPECT_FALSE(s.ignore_eos);
    EXPECT_EQ(s.min_tokens, 0);
    EXPECT_EQ(s.max_tokens, -1);
    EXPECT_EQ(s.logprobs, -1);
    EXPECT_EQ(s.n, 1);
    EXPECT_TRUE(s.skip_special_tokens);
    EXPECT_EQ(r.request.priority, 0u);
    EXPECT_TRUE(r.request.add_generation_prompt);
  }
  EXPECT_EQ(ParseOk(OpenAiApi::kCompletions, "").request.prompt, "hi");
  EXPECT_EQ(ParseOk(OpenAiApi::kChat, "").request.messages_json,
            R"([{"role":"user","content":"hi"}])");
}

struct HappyCase {
  std::string fields;
  std::function<void(const OpenAiRequest&)> check;
};

// Every shared and common field, on both endpoints.
TEST(OpenAiParseTest, FieldsAccepted) {
  using R = const OpenAiRequest&;
  const std::vector<HappyCase> cases = {
      {R"("model":"llama")", [](R r) { EXPECT_EQ(r.model, "llama"); }},
      {R"("stream":true)", [](R r) { EXPECT_TRUE(r.stream); }},
      {R"("stream":true,"stream_options":{"include_usage":true})",
       [](R r) { EXPECT_TRUE(r.include_usage); }},
      {R"("stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true})",
       [](R r) { EXPECT_FALSE(r.include_usage); }},
      {R"("stream":true,"stream_options":{})", [](R r) { EXPECT_FALSE(r.include_usage); }},
      {R"("stream":false,"stream_options":null)", [](R r) { EXPECT_FALSE(r.stream); }},
      {R"("user":"u-1")", [](R r) { EXPECT_EQ(r.user, "u-1"); }},
      {R"("priority":3)", [](R r) { EXPECT_EQ(r.request.priority, 3u); }},
      {R"("priority":18446744073709551615)",
       [](R r) { EXPECT_EQ(r.request.priority, std::numeric_limits<uint64_t>::max()); }},
      {R"("temperature":0)", [](R r) { EXPECT_EQ(r.request.sampling.temperature, 0.0f); }},
      {R"("temperature":2)", [](R r) { EXPECT_EQ(r.request.sampling.temperature, 2.0f); }},
      {R"("temperature":0.7)", [](R r) { EXPECT_EQ(r.request.sampling.temperature, 0.7f); }},
      {R"("temperature":null)", [](R r) { EXPECT_EQ(r.request.sampling.temperature, 1.0f); }},
      {R"("top_p":1)", [](R r) { EXPECT_EQ(r.request.sampling.top_p, 1.0f); }},
      {R"("top_p":0.05)", [](R r) { EXPECT_EQ(r.request.sampling.top_p, 0.05f); }},
      {R"("top_k":-1)", [](R r) { EXPECT_EQ(r.request.sampling.top_k, 0); }},
      {R"("top_k":0)", [](R r) { EXPECT_EQ(r.request.sampling.top_k, 0); }},
      {R"("top_k":40)", [](R r) { EXPECT_EQ(r.request.sampling.top_k, 40); }},
      {R"("top_k":40.0)", [](R r) { EXPECT_EQ(r.request.sampling.top_k, 40); }},
      {R"("min_p":0)", [](R r) { EXPECT_EQ(r.request.sampling.min_p, 0.0f); }},
      {R"("min_p":1)", [](R r) { EXPECT_EQ(r.request.sampling.min_p, 1.0f); }},
      {R"("min_p":0.05)", [](R r) { EXPECT_EQ(r.request.sampling.min_p, 0.05f); }},
      {R"("repetition_penalty":1.3)",
       [](R r) { EXPECT_EQ(r.request.sampling.repetition_penalty, 1.3f); }},
      {R"("repetition_penalty":0.5)",
       [](R r) { EXPECT_EQ(r.request.sampling.repetition_penalty, 0.5f); }},
      {R"("presence_penalty":-2)",
       [](R r) { EXPECT_EQ(r.request.sampling.presence_penalty, -2.0f); }},
      {R"("presence_penalty":1.5)",
       [](R r) { EXPECT_EQ(r.request.sampling.presence_penalty, 1.5f); }},
      {R"("frequency_penalty":2)",
       [](R r) { EXPECT_EQ(r.request.sampling.frequency_penalty, 2.0f); }},
      {R"("frequency_penalty":-0.25)",
       [](R r) { EXPECT_EQ(r.request.sampling.frequency_penalty, -0.25f); }},
      {R"("logit_bias":{"50256":-100,"13":5.5,"0":100})",
       [](R r) {
         const std::vector<std::pair<int32_t, float>> want = {
             {50256, -100.0f}, {13, 5.5f}, {0, 100.0f}};
         EXPECT_EQ(r.request.sampling.logit_bias, want);
       }},
      {R"("logit_bias":{"7":1,"7":-2})",  // repeated id: the last wins
       [](R r) {
         const std::vector<std::pair<int32_t, float>> want = {{7, -2.0f}};
         EXPECT_EQ(r.request.sampling.logit_bias, want);
       }},
      {R"("logit_bias":{})", [](R r) { EXPECT_TRUE(r.request.sampling.logit_bias.empty()); }},
      {R"("seed":42)", [](R r) { EXPECT_EQ(r.request.sampling.seed, 42u); }},
      {R"("seed":0)", [](R r) { EXPECT_EQ(r.request.sampling.seed, 0u); }},
      {R"("seed":-1)", [](R r) { EXPECT_EQ(r.request.sampling.seed, 18446744073709551615u); }},
      {R"("seed":-9223372036854775808)",
       [](R r) { EXPECT_EQ(r.request.sampling.seed, 9223372036854775808u); }},
      {R"("seed":18446744073709551615)",
       [](R r) { EXPECT_EQ(r.request.sampling.seed, 18446744073709551615u); }},
      {R"("seed":7.0)", [](R r) { EXPECT_EQ(r.request.sampling.seed, 7u); }},
      {R"("stop":"\n")",
       [](R r) { EXPECT_EQ(r.request.sampling.stop, std::vector<std::string>{"\n"}); }},
      {R"("stop":["a","\u00e9"])",
       [](R r) {
         EXPECT_EQ(r.request.sampling.stop, (std::vector<std::string>{"a", "\xC3\xA9"}));
       }},
      {R"("stop":[])", [](R r) { EXPECT_TRUE(r.request.sampling.stop.empty()); }},
      {R"("stop_token_ids":[1,2,2147483647])",
       [](R r) {
         EXPECT_EQ(r.request.sampling.stop_token_ids, (std::vector<int32_t>{1, 2, 2147483647}));
       }},
      {R"("ignore_eos":true)", [](R r) { EXPECT_TRUE(r.request.sampling.ignore_eos); }},
      {R"("min_tokens":3)", [](R r) { EXPECT_EQ(r.request.sampling.min_tokens, 3); }},
      {R"("min_tokens":3,"max_tokens":3)",
       [](R r) { EXPECT_EQ(r.request.sampling.min_tokens, 3); }},
      {R"("max_tokens":5)", [](R r) { EXPECT_EQ(r.request.sampling.max_tokens, 5); }},
      {R"("max_tokens":1)", [](R r) { EXPECT_EQ(r.request.sampling.max_tokens, 1); }},
      {R"("max_completion_tokens":7)", [](R r) { EXPECT_EQ(r.request.sampling.max_tokens, 7); }},
      {R"("max_completion_tokens":7,"max_tokens":5)",
       [](R r) { EXPECT_EQ(r.request.sampling.max_tokens, 7); }},
      {R"("max_tokens":5,"max_completion_tokens":9)",
       [](R r) { EXPECT_EQ(r.request.sampling.max_tokens, 9); }},
      {R"("n":16)", [](R r) { EXPECT_EQ(r.request.sampling.n, 16); }},
      {R"("n":3,"best_of":3)", [](R r) { EXPECT_EQ(r.request.sampling.n, 3); }},
      {R"("skip_special_tokens":false)",
       [](R r) { EXPECT_FALSE(r.request.sampling.skip_special_tokens); }},
      {R"("response_format":{"type":"text"})", [](R) {}},
      // Unknown keys, whatever their value, are ignored.
      {R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto",)"
       R"("parallel_tool_calls":false,"store":true,"metadata":{"a":"b"},"logit_bias_x":5,)"
       R"("service_tier":"auto","deep":[[[[{"x":null}]]]])",
       [](R r) { EXPECT_EQ(r.request.sampling.temperature, 1.0f); }},
      // A repeated key: the last value wins.
      {R"("temperature":0.5,"temperature":1.5)",
       [](R r) { EXPECT_EQ(r.request.sampling.temperature, 1.5f); }},
  };
  for (OpenAiApi api : {OpenAiApi::kCompletions, OpenAiApi::kChat}) {
    for (const HappyCase& c : cases) {
      SCOPED_TRACE(c.fields);
      c.check(ParseOk(api, c.fields));
    }
  }
}

struct RefusalCase {
  std::string fields;
  std::string message;  // the whole message, or a prefix of it when it ends with "..."
  std::string param;
};

void ExpectRefusals(OpenAiApi api, const std::vector<RefusalCase>& cases) {
  for (const RefusalCase& c : cases) {
    const std::string body = Body(api, c.fields);
    SCOPED_TRACE(body.size() > 300 ? body.substr(0, 300) + "..." : body);
    std::string param = "stale";
    auto r = Parse(api, body, &param);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    if (c.message.size() > 3 && c.message.ends_with("...")) {
      const std::string prefix = c.message.substr(0, c.message.size() - 3);
      EXPECT_TRUE(r.status().message().starts_with(prefix)) << r.status().message();
    } else {
      EXPECT_EQ(r.status().message(), c.message);
    }
    EXPECT_EQ(param, c.param);
  }
}

std::string ManyLogitBias(int n) {
  std::string s = R"("logit_bias":{)";
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + ("\"" + std::to_string(i) + "\":1");
  return s + "}";
}

std::string ManyStops(int n) {
  std::string s = R"("stop":[)";
  for (int i = 0; i < n; ++i) s += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return s + "]";
}

TEST(OpenAiParseTest, FieldsRefused) {
  const std::vector<RefusalCase> cases = {
      {R"("temperature":3)", "'temperature' must be a number between 0 and 2, got 3",
       "temperature"},
      {R"("temperature":-0.5)", "'temperature' must be a number between 0 and 2, got -0.5",
       "temperature"},
      {R"("temperature":"0.5")", "'temperature' must be a number between 0 and 2, got \"0.5\"",
       "temperature"},
      {R"("temperature":true)", "'temperature' must be a number between 0 and 2, got true",
       "temperature"},
      {R"("top_p":0)", "'top_p' must be a number in (0, 1], got 0", "top_p"},
      {R"("top_p":1.5)", "'top_p' must be a number in (0, 1], got 1.5", "top_p"},
      {R"("top_k":-2)", "'top_k' must be -1 or an integer in [0, 2147483647], got -2", "top_k"},
      {R"("top_k":1.5)", "'top_k' must be -1 or an integer in [0, 2147483647], got 1.5", "top_k"},
      {R"("top_k":2147483648)",
       "'top_k' must be -1 or an integer in [0, 2147483647], got 2147483648", "top_k"},
      {R"("min_p":1.5)", "'min_p' must be a number between 0 and 1, got 1.5", "min_p"},
      {R"("min_p":-0.1)", "'min_p' must be a number between 0 and 1, got -0.1", "min_p"},
      {R"("repetition_penalty":0)", "'repetition_penalty' must be a number greater than 0, got 0",
       "repetition_penalty"},
      {R"("repetition_penalty":-1)", "'repetition_penalty' must be a number greater than 0, got -1",
       "repetition_penalty"},
      {R"("repetition_penalty":1e300)",
       "'repetition_penalty' must be a number greater than 0, got 1e+300", "repetition_penalty"},
      {R"("presence_penalty":2.5)", "'presence_penalty' must be a number between -2 and 2, got 2.5",
       "presence_penalty"},
      {R"("frequency_penalty":-3)", "'frequency_penalty' must be a number between -2 and 2, got -3",
       "frequency_penalty"},
      {R"("logit_bias":[])",
       "'logit_bias' must be an object mapping token ids to numbers between -100 and 100, got an "
       "array",
       "logit_bias"},
      {R"("logit_bias":{"x":1})",
       "'logit_bias' key \"x\" is not a token id (an integer in [0, 2147483647])", "logit_bias"},
      {R"("logit_bias":{"-1":1})",
       "'logit_bias' key \"-1\" is not a token id (an integer in [0, 2147483647])", "logit_bias"},
      {R"("logit_bias":{"2147483648":1})",
       "'logit_bias' key \"2147483648\" is not a token id (an integer in [0, 2147483647])",
       "logit_bias"},
      {R"("logit_bias":{"5":101})", "'logit_bias.5' must be a number between -100 and 100, got 101",
       "logit_bias"},
      {R"("logit_bias":{"5":"1"})",
       "'logit_bias.5' must be a number between -100 and 100, got \"1\"", "logit_bias"},
      {ManyLogitBias(1025), "'logit_bias' has 1025 entries, more than the limit of 1024",
       "logit_bias"},
      {R"("seed":1.5)", "'seed' must be an integer, got 1.5", "seed"},
      {R"("seed":"1")", "'seed' must be an integer, got \"1\"", "seed"},
      {R"("seed":1e30)", "'seed' must be an integer, got 1e+30", "seed"},
      {R"("stop":5)", "'stop' must be a string or an array of strings, got 5", "stop"},
      {R"("stop":{"a":1})", "'stop' must be a string or an array of strings, got an object",
       "stop"},
      {R"("stop":["a",1])", "'stop' element 1 must be a string, got 1", "stop"},
      {R"("stop":"")", "'stop' strings must not be empty", "stop"},
      {R"("stop":["a",""])", "'stop' strings must not be empty", "stop"},
      {ManyStops(17), "'stop' has 17 strings, more than the limit of 16", "stop"},
      {R"("stop":")" + std::string(257, 'x') + "\"",
       "'stop' string 0 is 257 bytes, more than the limit of 256", "stop"},
      {R"("stop_token_ids":5)", "'stop_token_ids' must be an array of token ids, got 5",
       "stop_token_ids"},
      {R"("stop_token_ids":[1,-1])",
       "'stop_token_ids' element 1 must be a token id (an integer in [0, 2147483647]), got -1",
       "stop_token_ids"},
      {R"("stop_token_ids":[2147483648])",
       "'stop_token_ids' element 0 must be a token id (an integer in [0, 2147483647]), got "
       "2147483648",
       "stop_token_ids"},
      {R"("ignore_eos":1)", "'ignore_eos' must be a boolean, got 1", "ignore_eos"},
      {R"("ignore_eos":"true")", "'ignore_eos' must be a boolean, got \"true\"", "ignore_eos"},
      {R"("skip_special_tokens":"no")", "'skip_special_tokens' must be a boolean, got \"no\"",
       "skip_special_tokens"},
      {R"("min_tokens":-1)", "'min_tokens' must be an integer >= 0, got -1", "min_tokens"},
      {R"("max_tokens":0)", "'max_tokens' must be an integer >= 1, got 0", "max_tokens"},
      {R"("max_tokens":2.5)", "'max_tokens' must be an integer >= 1, got 2.5", "max_tokens"},
      {R"("max_tokens":18446744073709551615)",
       "'max_tokens' must be an integer >= 1, got 18446744073709551615", "max_tokens"},
      {R"("max_completion_tokens":0)", "'max_completion_tokens' must be an integer >= 1, got 0",
       "max_completion_tokens"},
      {R"("min_tokens":5,"max_tokens":3)", "'min_tokens' (5) must not exceed 'max_tokens' (3)",
       "min_tokens"},
      {R"("n":0)", "'n' must be an integer between 1 and 16, got 0", "n"},
      {R"("n":17)", "'n' must be an integer between 1 and 16, got 17", "n"},
      {R"("best_of":2)",
       "'best_of' must equal 'n' (1): kiln does not sample extra choices to choose from, got 2",
       "best_of"},
      {R"("best_of":0)", "'best_of' must be an integer >= 1, got 0", "best_of"},
      {R"("priority":-1)", "'priority' must be a non-negative integer, got -1", "priority"},
      {R"("priority":"1")", "'priority' must be a non-negative integer, got \"1\"", "priority"},
      {R"("model":5)", "'model' must be a string, got 5", "model"},
      {R"("user":["u"])", "'user' must be a string, got an array", "user"},
      {R"("stream":"yes")", "'stream' must be a boolean, got \"yes\"", "stream"},
      {R"("stream":true,"stream_options":1)", "'stream_options' must be an object, got 1",
       "stream_options"},
      {R"("stream":true,"stream_options":{"include_usage":1})",
       "'stream_options.include_usage' must be a boolean, got 1", "stream_options.include_usage"},
      {R"("stream_options":{"include_usage":true})",
       "'stream_options' is only allowed when 'stream' is true", "stream_options"},
      {R"("response_format":{"type":"json_object"})",
       "'response_format' type \"json_object\" is not supported; only \"text\" is",
       "response_format"},
      {R"("response_format":"text")",
       "'response_format' must be an object with a string 'type', got \"text\"", "response_format"},
      {R"("response_format":{})",
       "'response_format' must be an object with a string 'type', got "
       "an object",
       "response_format"},
  };
  ExpectRefusals(OpenAiApi::kCompletions, cases);
  ExpectRefusals(OpenAiApi::kChat, cases);
}

TEST(OpenAiParseTest, CompletionPrompt) {
  OpenAiRequest r = ParseOk(OpenAiApi::kCompletions, R"({"prompt":"Once upon"})");
  EXPECT_EQ(r.request.prompt, "Once upon");
  EXPECT_TRUE(r.request.prompt_tokens.empty());
  EXPECT_TRUE(r.request.messages_json.empty());
  r = ParseOk(OpenAiApi::kCompletions, R"({"prompt":["caf\u00e9"]})");
  EXPECT_EQ(r.request.prompt, "caf\xC3\xA9");
  r = ParseOk(OpenAiApi::kCompletions, R"({"prompt":[1,2,2147483647]})");
  EXPECT_EQ(r.request.prompt, "");
  EXPECT_EQ(r.request.prompt_tokens, (std::vector<int32_t>{1, 2, 2147483647}));
  r = ParseOk(OpenAiApi::kCompletions, R"({"prompt":[[4,5]]})");
  EXPECT_EQ(r.request.prompt_tokens, (std::vector<int32_t>{4, 5}));
  // A repeated prompt: the last one, whatever its form.
  r = ParseOk(OpenAiApi::kCompletions, R"({"prompt":[1,2],"prompt":"text"})");
  EXPECT_EQ(r.request.prompt, "text");
  EXPECT_TRUE(r.request.prompt_tokens.empty());
}

TEST(OpenAiParseTest, CompletionFields) {
  OpenAiRequest r = ParseOk(OpenAiApi::kCompletions, R"("logprobs":0)");
  EXPECT_EQ(r.logprobs, 0);
  EXPECT_EQ(r.request.sampling.logprobs, 0);
  r = ParseOk(OpenAiApi::kCompletions, R"("logprobs":5)");
  EXPECT_EQ(r.logprobs, 5);
  EXPECT_EQ(r.request.sampling.logprobs, 5);
  r = ParseOk(OpenAiApi::kCompletions, R"("logprobs":null)");
  EXPECT_EQ(r.logprobs, -1);
  r = ParseOk(OpenAiApi::kCompletions, R"("echo":true)");
  EXPECT_TRUE(r.echo);
  r = ParseOk(OpenAiApi::kCompletions, R"("echo":false,"logprobs":2)");
  EXPECT_FALSE(r.echo);
  r = ParseOk(OpenAiApi::kCompletions, R"("suffix":"")");
  r = ParseOk(OpenAiApi::kCompletions, R"("suffix":null)");
  // Chat-only keys mean nothing here.
  r = ParseOk(OpenAiApi::kCompletions, R"("messages":5,"top_logprobs":"x")");
  EXPECT_TRUE(r.request.messages_json.empty());
}

TEST(OpenAiParseTest, CompletionRefusals) {
  ExpectRefusals(
      OpenAiApi::kCompletions,
      {
          {"{}", "'prompt' is required", "prompt"},
          {R"({"prompt":null})", "'prompt' is required", "prompt"},
          {R"("prompt":"")", "'prompt' must not be empty", "prompt"},
          {R"("prompt":[])", "'prompt' must not be empty", "prompt"},
          {R"("prompt":[""])", "'prompt' must not be empty", "prompt"},
          {R"("prompt":[[]])", "'prompt' must not be empty", "prompt"},
          {R"("prompt":["a","b"])",
           "batched prompts are not supported: 'prompt' is an array of 2 prompts; send one per "
           "request",
           "prompt"},
          {R"("prompt":[[1],[2],[3]])",
           "batched prompts are not supported: 'prompt' is an array of 3 prompts; send one per "
           "request",
           "prompt"},
          {R"("prompt":5)",
           "'prompt' must be a string, an array of one string, or an array of token ids, got 5",
           "prompt"},
          {R"("prompt":{"text":"a"})",
           "'prompt' must be a string, an array of one string, or an array of token ids, got an "
           "object",
           "prompt"},
          {R"("prompt":[1,"a"])",
           "'prompt' element 1 must be a token id (an integer in [0, 2147483647]), got \"a\"",
           "prompt"},
          {R"("prompt":[-1])",
           "'prompt' element 0 must be a token id (an integer in [0, 2147483647]), got -1",
           "prompt"},
          {R"("prompt":[[1,-2]])",
           "'prompt[0]' element 1 must be a token id (an integer in [0, 2147483647]), got -2",
           "prompt"},
          {R"("prompt":[1,[2]])",
           "'prompt' element 1 must be a token id (an integer in [0, 2147483647]), got an array",
           "prompt"},
          {R"("logprobs":6)", "'logprobs' must be an integer between 0 and 5, got 6", "logprobs"},
          {R"("logprobs":-1)", "'logprobs' must be an integer between 0 and 5, got -1", "logprobs"},
          {R"("logprobs":true)", "'logprobs' must be an integer between 0 and 5, got true",
           "logprobs"},
          {R"("echo":1)", "'echo' must be a boolean, got 1", "echo"},
          {R"({"prompt":[1,2],"echo":true})",
           "'echo' needs a text prompt; a prompt of token ids has no text to echo", "echo"},
          {R"("echo":true,"logprobs":1)",
           "'echo' with 'logprobs' is not supported (prompt logprobs are not computed)", "echo"},
          {R"("suffix":"x")", "'suffix' is not supported (no fill-in-the-middle)", "suffix"},
          {R"("suffix":1)", "'suffix' must be a string, got 1", "suffix"},
      });
}

TEST(OpenAiParseTest, ChatMessagesNormalized) {
  const std::string body =
      R"({"messages":[)"
      R"({"role":"system","content":"Be brief."},)"
      R"({"role":"user","name":"bob","content":[{"type":"text","text":"a"},)"
      R"({"type":"text","text":"b\u00e9"}]},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
      R"("function":{"name":"f","arguments":"{\"x\": 1}"}}]},)"
      R"({"role":"tool","content":"42","tool_call_id":"c1","extra":[1.5,-2,1e2,true,null]},)"
      R"({"role":"assistant","tool_calls":[]},)"
      R"({"role":"user","content":"x","content":"y"},)"
      R"({"role":"user","content":[]})"
      R"(],"model":"m"})";
  const OpenAiRequest r = ParseOk(OpenAiApi::kChat, body);
  EXPECT_EQ(
      r.request.messages_json,
      R"([{"role":"system","content":"Be brief."},)"
      "{\"role\":\"user\",\"name\":\"bob\",\"content\":\"a\\nb\xC3\xA9\"},"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
      R"("function":{"name":"f","arguments":"{\"x\": 1}"}}]},)"
      R"({"role":"tool","content":"42","tool_call_id":"c1","extra":[1.5,-2,100.0,true,null]},)"
      R"({"role":"assistant","tool_calls":[]},)"
      R"({"role":"user","content":"y"},)"
      R"({"role":"user","content":""}])");
  EXPECT_TRUE(r.request.prompt.empty());
  EXPECT_TRUE(r.request.prompt_tokens.empty());
  // The normalized text is valid JSON.
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(r.request.messages_json).get(root), simdjson::SUCCESS);
}

TEST(OpenAiParseTest, ChatFields) {
  OpenAiRequest r = ParseOk(OpenAiApi::kChat, R"("logprobs":true)");
  EXPECT_EQ(r.logprobs, 0);
  EXPECT_EQ(r.request.sampling.logprobs, 0);
  r = ParseOk(OpenAiApi::kChat, R"("logprobs":true,"top_logprobs":20)");
  EXPECT_EQ(r.logprobs, 20);
  EXPECT_EQ(r.request.sampling.logprobs, 20);
  r = ParseOk(OpenAiApi::kChat, R"("top_logprobs":3,"logprobs":true)");
  EXPECT_EQ(r.logprobs, 3);
  r = ParseOk(OpenAiApi::kChat, R"("logprobs":false,"top_logprobs":0)");
  EXPECT_EQ(r.logprobs, -1);
  r = ParseOk(OpenAiApi::kChat, R"("add_generation_prompt":false)");
  EXPECT_FALSE(r.request.add_generation_prompt);
  // Completions-only keys mean nothing here.
  r = ParseOk(OpenAiApi::kChat, R"("prompt":5,"echo":"x","suffix":"s")");
  EXPECT_TRUE(r.request.prompt.empty());
  EXPECT_FALSE(r.echo);
}

TEST(OpenAiParseTest, ChatRefusals) {
  ExpectRefusals(
      OpenAiApi::kChat,
      {
          {"{}", "'messages' is required", "messages"},
          {R"("messages":{})", "'messages' must be a non-empty array of messages, got an object",
           "messages"},
          {R"("messages":[])", "'messages' must be a non-empty array of messages, got []",
           "messages"},
          {R"("messages":[1])", "'messages[0]' must be an object, got 1", "messages[0]"},
          {R"("messages":[{"content":"x"}])", "'messages[0].role' is required", "messages[0].role"},
          {R"("messages":[{"role":5,"content":"x"}])",
           "'messages[0].role' must be a non-empty string, got 5", "messages[0].role"},
          {R"("messages":[{"role":"","content":"x"}])",
           "'messages[0].role' must be a non-empty string, got an empty string",
           "messages[0].role"},
          {R"("messages":[{"role":"user"}])",
           "'messages[0].content' is required for role \"user\" (only an assistant message may "
           "have none)",
           "messages[0].content"},
          {R"("messages":[{"role":"user","content":"a"},{"role":"system","content":null}])",
           "'messages[1].content' is required for role \"system\" (only an assistant message may "
           "have none)",
           "messages[1].content"},
          {R"("messages":[{"role":"user","content":5}])",
           "'messages[0].content' must be a string or an array of text parts, got 5",
           "messages[0].content"},
          {R"("messages":[{"role":"user","content":{"type":"text"}}])",
           "'messages[0].content' must be a string or an array of text parts, got an object",
           "messages[0].content"},
          {R"("messages":[{"role":"user","content":["x"]}])",
           "'messages[0].content[0]' must be an object, got \"x\"", "messages[0].content[0]"},
          {R"("messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}])",
           "'messages[0].content[0]' has type \"image_url\": only \"text\" content parts are "
           "supported",
           "messages[0].content[0].type"},
          {R"("messages":[{"role":"user","content":[{"text":"x"}]}])",
           "'messages[0].content[0].type' is required", "messages[0].content[0].type"},
          {R"("messages":[{"role":"user","content":[{"type":1,"text":"x"}]}])",
           "'messages[0].content[0].type' must be a string, got 1", "messages[0].content[0].type"},
          {R"("messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text"}]}])",
           "'messages[0].content[1].text' is required", "messages[0].content[1].text"},
          {R"("messages":[{"role":"user","content":[{"type":"text","text":1}]}])",
           "'messages[0].content[0].text' must be a string, got 1", "messages[0].content[0].text"},
          {R"("logprobs":1)", "'logprobs' must be a boolean, got 1", "logprobs"},
          {R"("logprobs":true,"top_logprobs":21)",
           "'top_logprobs' must be an integer between 0 and 20, got 21", "top_logprobs"},
          {R"("logprobs":true,"top_logprobs":-1)",
           "'top_logprobs' must be an integer between 0 and 20, got -1", "top_logprobs"},
          {R"("top_logprobs":3)", "'top_logprobs' needs 'logprobs': true", "top_logprobs"},
          {R"("logprobs":false,"top_logprobs":3)", "'top_logprobs' needs 'logprobs': true",
           "top_logprobs"},
          {R"("add_generation_prompt":"x")", "'add_generation_prompt' must be a boolean, got \"x\"",
           "add_generation_prompt"},
      });
}

TEST(OpenAiParseTest, MalformedBodies) {
  const std::string deep =
      R"({"prompt":"hi","x":)" + std::string(101, '[') + std::string(101, ']') + "}";
  const std::vector<RefusalCase> cases = {
      {"", "request body is empty; expected a JSON object", ""},
      {" \n\t", "request body is empty; expected a JSON object", ""},
      {"{", "malformed JSON request body: ...", ""},
      {R"({"prompt":"hi",})", "malformed JSON request body: ...", ""},
      {R"({"prompt":"hi"} x)", "malformed JSON request body: ...", ""},
      {"{\"prompt\":\"\xff\"}", "malformed JSON request body: ...", ""},
      {"{\"prompt\":\"\xC3\"}", "malformed JSON request body: ...", ""},
      {"[1]", "request body must be a JSON object, got an array", ""},
      {"\"text\"", "request body must be a JSON object, got a string", ""},
      {deep, "malformed JSON request body: nesting deeper than 100 levels", ""},
  };
  for (OpenAiApi api : {OpenAiApi::kCompletions, OpenAiApi::kChat}) {
    for (const RefusalCase& c : cases) {
      SCOPED_TRACE(c.fields.substr(0, 80));
      std::string param = "stale";
      auto r = Parse(api, c.fields, &param);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      if (c.message.ends_with("...")) {
        EXPECT_TRUE(r.status().message().starts_with(c.message.substr(0, c.message.size() - 3)))
            << r.status().message();
      } else {
        EXPECT_EQ(r.status().message(), c.message);
      }
      EXPECT_EQ(param, "");
    }
  }
  // The error param pointer is optional.
  EXPECT_FALSE(ParseCompletionRequest("{}").ok());
}

// ---- Writers ----

const OpenAiResponseHeader kHeader{"cmpl-1", 1700000000, "tiny", false};

GenTokenLogprob Token(int32_t id, std::string text, float logprob,
                      std::vector<GenTopLogprob> top = {}) {
  GenTokenLogprob t;
  t.token = id;
  t.text = std::move(text);
  t.logprob = logprob;
  t.top = std::move(top);
  return t;
}

TEST(OpenAiWriteTest, CompletionResponse) {
  std::vector<OpenAiChoice> choices(2);
  choices[0].index = 0;
  choices[0].text = "Hello \"world\"\n";
  choices[0].finish_reason = FinishReason::kLength;
  choices[1].index = 1;
  choices[1].text = "Bye";
  choices[1].finish_reason = FinishReason::kStop;
  choices[1].stop_reason = "###";
  const GenUsage usage{5, 7, 2};
  EXPECT_EQ(CompletionResponseJson(kHeader, choices, usage),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[{"index":0,"text":"Hello \"world\"\n","logprobs":null,)"
            R"("finish_reason":"length"},)"
            R"({"index":1,"text":"Bye","logprobs":null,"finish_reason":"stop",)"
            R"("stop_reason":"###"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,)"
            R"("prompt_tokens_details":{"cached_tokens":2}}})");
  EXPECT_EQ(CompletionResponseJson(kHeader, {}, GenUsage{}),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,)"
            R"("prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(OpenAiWriteTest, CompletionLogprobs) {
  // "é" split over two tokens (0xC3 | 0xA9), then " a": text offsets count code points.
  OpenAiChoice c;
  c.text = "\xC3\xA9 a";
  c.finish_reason = FinishReason::kLength;
  c.has_logprobs = true;
  c.logprobs = {Token(10, "\xC3", -0.5f, {{10, "\xC3", -0.5f}, {11, "x", -1.0f}}),
                Token(12, "\xA9", -0.25f, {{12, "\xA9", -0.25f}}),
                Token(13, " a", -std::numeric_limits<float>::infinity(), {})};
  EXPECT_EQ(CompletionResponseJson(kHeader, std::span(&c, 1), GenUsage{1, 3, 0}),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            "\"choices\":[{\"index\":0,\"text\":\"\xC3\xA9 a\",\"logprobs\":{"
            "\"tokens\":[\"\xEF\xBF\xBD\",\"\xEF\xBF\xBD\",\" a\"],"
            R"("token_logprobs":[-0.5,-0.25,-9999.0],)"
            "\"top_logprobs\":[{\"\xEF\xBF\xBD\":-0.5,\"x\":-1.0},{\"\xEF\xBF\xBD\":-0.25},{}],"
            R"("text_offset":[0,1,1]},"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4,)"
            R"("prompt_tokens_details":{"cached_tokens":0}}})");
}

TEST(OpenAiWriteTest, ChatResponse) {
  OpenAiChoice c;
  c.text = "Hi!";
  c.finish_reason = FinishReason::kStop;
  c.has_logprobs = true;
  c.logprobs = {Token(1, "Hi", -0.125f, {{1, "Hi", -0.125f}, {2, "\xE4\xBD", -3.0f}}),
                Token(3, "!", -1.0f, {})};
  const OpenAiResponseHeader header{"chatcmpl-9", 12, "m", false};
  EXPECT_EQ(ChatCompletionResponseJson(header, std::span(&c, 1), GenUsage{4, 2, 0}),
            R"({"id":"chatcmpl-9","object":"chat.completion","created":12,"model":"m",)"
            R"("choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},)"
            R"("logprobs":{"content":[)"
            R"({"token":"Hi","logprob":-0.125,"bytes":[72,105],"top_logprobs":[)"
            R"({"token":"Hi","logprob":-0.125,"bytes":[72,105]},)"
            "{\"token\":\"\xEF\xBF\xBD\",\"logprob\":-3.0,\"bytes\":[228,189]}]},"
            R"({"token":"!","logprob":-1.0,"bytes":[33],"top_logprobs":[]}]},)"
            R"("finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6,)"
            R"("prompt_tokens_details":{"cached_tokens":0}}})");
  OpenAiChoice plain;
  plain.text = "ok";
  EXPECT_EQ(ChatCompletionResponseJson(header, std::span(&plain, 1), GenUsage{}),
            R"({"id":"chatcmpl-9","object":"chat.completion","created":12,"model":"m",)"
            R"("choices":[{"index":0,"message":{"role":"assistant","content":"ok"},)"
            R"("logprobs":null,"finish_reason":null}],)"
            R"("usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,)"
            R"("prompt_tokens_details":{"cached_tokens":0}}})");
}

GenChunk Chunk(int32_t index, std::string text, std::optional<FinishReason> finish = std::nullopt) {
  GenChunk c;
  c.index = index;
  c.text = std::move(text);
  c.finish_reason = finish;
  return c;
}

TEST(OpenAiWriteTest, CompletionChunks) {
  EXPECT_EQ(CompletionChunkJson(kHeader, Chunk(1, "ab")),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[{"index":1,"text":"ab","logprobs":null,"finish_reason":null}]})");
  GenChunk last = Chunk(0, "", FinishReason::kStop);
  last.stop_reason = "\n\n";
  OpenAiResponseHeader with_usage = kHeader;
  with_usage.include_usage = true;
  EXPECT_EQ(CompletionChunkJson(with_usage, last),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"stop",)"
            R"("stop_reason":"\n\n"}],"usage":null})");
  // Text offsets carry over from chunk to chunk: "日" is one code point of three bytes.
  int64_t offset = 0;
  GenChunk a = Chunk(0, "\xE6\x97\xA5");
  a.logprobs = {Token(5, "\xE6\x97\xA5", -1.5f, {{5, "\xE6\x97\xA5", -1.5f}})};
  GenChunk b = Chunk(0, "ok", FinishReason::kLength);
  b.logprobs = {Token(6, "o", -0.5f, {}), Token(7, "k", -0.5f, {})};
  EXPECT_EQ(CompletionChunkJson(kHeader, a, &offset),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            "\"choices\":[{\"index\":0,\"text\":\"\xE6\x97\xA5\",\"logprobs\":{"
            "\"tokens\":[\"\xE6\x97\xA5\"],\"token_logprobs\":[-1.5],"
            "\"top_logprobs\":[{\"\xE6\x97\xA5\":-1.5}],\"text_offset\":[0]},"
            R"("finish_reason":null}]})");
  EXPECT_EQ(offset, 1);
  EXPECT_EQ(CompletionChunkJson(kHeader, b, &offset),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[{"index":0,"text":"ok","logprobs":{"tokens":["o","k"],)"
            R"("token_logprobs":[-0.5,-0.5],"top_logprobs":[{},{}],"text_offset":[1,2]},)"
            R"("finish_reason":"length"}]})");
  EXPECT_EQ(offset, 3);
}

TEST(OpenAiWriteTest, ChatChunks) {
  const OpenAiResponseHeader h{"chatcmpl-2", 5, "m", false};
  const std::string prefix =
      R"({"id":"chatcmpl-2","object":"chat.completion.chunk","created":5,"model":"m",)";
  // First chunk of a choice: role and content.
  EXPECT_EQ(ChatCompletionChunkJson(h, Chunk(0, "He"), true),
            std::vector<std::string>{
                prefix + R"("choices":[{"index":0,"delta":{"role":"assistant","content":"He"},)"
                         R"("logprobs":null,"finish_reason":null}]})"});
  // A first chunk with no text still announces the role.
  EXPECT_EQ(ChatCompletionChunkJson(h, Chunk(2, ""), true),
            std::vector<std::string>{
                prefix + R"("choices":[{"index":2,"delta":{"role":"assistant","content":""},)"
                         R"("logprobs":null,"finish_reason":null}]})"});
  // A middle chunk: content only.
  EXPECT_EQ(ChatCompletionChunkJson(h, Chunk(0, "llo"), false),
            std::vector<std::string>{prefix + R"("choices":[{"index":0,"delta":{"content":"llo"},)"
                                              R"("logprobs":null,"finish_reason":null}]})"});
  // Nothing new: no chunk.
  EXPECT_TRUE(ChatCompletionChunkJson(h, Chunk(0, ""), false).empty());
  // The last chunk with text: the content, then an empty delta with the finish reason.
  GenChunk last = Chunk(1, "!", FinishReason::kStop);
  last.stop_reason = "END";
  EXPECT_EQ(
      ChatCompletionChunkJson(h, last, false),
      (std::vector<std::string>{prefix + R"("choices":[{"index":1,"delta":{"content":"!"},)"
                                         R"("logprobs":null,"finish_reason":null}]})",
                                prefix + R"("choices":[{"index":1,"delta":{},"logprobs":null,)"
                                         R"("finish_reason":"stop","stop_reason":"END"}]})"}));
  // The last chunk with no text: the finish chunk only.
  EXPECT_EQ(ChatCompletionChunkJson(h, Chunk(0, "", FinishReason::kLength), false),
            std::vector<std::string>{prefix + R"("choices":[{"index":0,"delta":{},"logprobs":null,)"
                                              R"("finish_reason":"length"}]})"});
  // A whole choice in one chunk: role + content, then the finish.
  EXPECT_EQ(ChatCompletionChunkJson(h, Chunk(0, "x", FinishReason::kLength), true).size(), 2u);
  // Logprobs and include_usage.
  OpenAiResponseHeader hu = h;
  hu.include_usage = true;
  GenChunk lp = Chunk(0, "a");
  lp.logprobs = {Token(4, "a", -0.5f, {{4, "a", -0.5f}})};
  EXPECT_EQ(ChatCompletionChunkJson(hu, lp, false),
            std::vector<std::string>{
                prefix + R"("choices":[{"index":0,"delta":{"content":"a"},)"
                         R"("logprobs":{"content":[{"token":"a","logprob":-0.5,"bytes":[97],)"
                         R"("top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[97]}]}]},)"
                         R"("finish_reason":null}],"usage":null})"});
}

TEST(OpenAiWriteTest, UsageChunk) {
  const GenUsage usage{10, 20, 8};
  EXPECT_EQ(UsageChunkJson(kHeader, OpenAiApi::kCompletions, usage),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,)"
            R"("total_tokens":30,"prompt_tokens_details":{"cached_tokens":8}}})");
  EXPECT_EQ(UsageChunkJson(kHeader, OpenAiApi::kChat, usage),
            R"({"id":"cmpl-1","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"tiny","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,)"
            R"("total_tokens":30,"prompt_tokens_details":{"cached_tokens":8}}})");
}

TEST(OpenAiWriteTest, SseFraming) {
  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseEvent(""), "data: \n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // A chunk whose text has newlines stays one event: JSON escapes them.
  const std::string event = SseEvent(CompletionChunkJson(kHeader, Chunk(0, "a\n\nb\r")));
  EXPECT_EQ(event.find('\n'), event.size() - 2);
  EXPECT_EQ(event.find('\r'), std::string::npos);
}

TEST(OpenAiWriteTest, Errors) {
  EXPECT_EQ(OpenAiErrorJson(Status::InvalidArgument("'n' must be 1"), "n"),
            R"({"error":{"message":"'n' must be 1","type":"BadRequestError","param":"n",)"
            R"("code":400}})");
  EXPECT_EQ(OpenAiErrorJson(Status::NotFound("model 'x' not found")),
            R"({"error":{"message":"model 'x' not found","type":"NotFoundError","param":null,)"
            R"("code":404}})");
  EXPECT_EQ(OpenAiErrorJson("bad \"q\"", "MyError", "", 418),
            R"({"error":{"message":"bad \"q\"","type":"MyError","param":null,"code":418}})");
  const struct {
    Status status;
    int code;
    std::string_view type;
  } cases[] = {
      {Status::InvalidArgument("x"), 400, "BadRequestError"},
      {Status::NotFound("x"), 404, "NotFoundError"},
      {Status::ResourceExhausted("x"), 429, "RateLimitError"},
      {Status::Unimplemented("x"), 501, "NotImplementedError"},
      {Status::Internal("x"), 500, "InternalServerError"},
      {Status::Unavailable("x"), 503, "ServiceUnavailableError"},
      {Status::PermissionDenied("x"), 403, "PermissionDeniedError"},
      {Status::DeadlineExceeded("x"), 504, "InternalServerError"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(OpenAiErrorJson(c.status), R"({"error":{"message":"x","type":")" +
                                             std::string(c.type) + R"(","param":null,"code":)" +
                                             std::to_string(c.code) + "}}")
        << c.status.ToString();
  }
  EXPECT_EQ(OpenAiErrorType(401), "AuthenticationError");
  EXPECT_EQ(OpenAiErrorType(409), "ConflictError");
  EXPECT_EQ(OpenAiErrorType(422), "UnprocessableEntityError");
  EXPECT_EQ(OpenAiErrorType(413), "BadRequestError");
  // Invalid UTF-8 in a message still gives valid JSON.
  EXPECT_EQ(OpenAiErrorJson("a\xff", "T", "p\xC3", 400),
            "{\"error\":{\"message\":\"a\xEF\xBF\xBD\",\"type\":\"T\",\"param\":\"p\xEF\xBF\xBD\","
            "\"code\":400}}");
}

TEST(OpenAiWriteTest, Models) {
  const std::vector<OpenAiModelInfo> models = {{"llama", 1700000000, "kiln"}, {"qwen", 7, "me"}};
  EXPECT_EQ(ModelsListJson(models),
            R"({"object":"list","data":[)"
            R"({"id":"llama","object":"model","created":1700000000,"owned_by":"kiln"},)"
            R"({"id":"qwen","object":"model","created":7,"owned_by":"me"}]})");
  EXPECT_EQ(ModelsListJson({}), R"({"object":"list","data":[]})");
  EXPECT_EQ(ModelJson(models[1]), R"({"id":"qwen","object":"model","created":7,"owned_by":"me"})");
}

// ---- Mutation test ----

const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> seeds = {
      (R"({"model":"m","prompt":"Once upon a time","max_tokens":16,"temperature":0.7,)"
       R"("top_p":0.9,"stop":["\n","END"],"seed":-3,"logprobs":2,"stream":true,)"
       R"("stream_options":{"include_usage":true},"logit_bias":{"13":-100}})"),
      (R"({"prompt":[[1,2,3]],"n":2,"best_of":2,"top_k":-1,"min_p":0.1,"echo":false,)"
       R"("stop_token_ids":[2],"min_tokens":1,"max_completion_tokens":8,"user":"u"})"),
      (R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
       R"({"role":"user","content":[{"type":"text","text":"Hi \u00e9"}]},)"
       R"({"role":"assistant","content":null,"tool_calls":[{"id":"1","function":{"name":"f"}}]}],)"
       R"("logprobs":true,"top_logprobs":3,"frequency_penalty":0.5,"presence_penalty":-0.5,)"
       R"("response_format":{"type":"text"},"tools":[],"priority":2})"),
      (R"({"messages":[{"role":"user","content":"x"}],"repetition_penalty":1.1,)"
       R"("ignore_eos":true,"skip_special_tokens":false,"add_generation_prompt":false})"),
  };
  return seeds;
}

constexpr char kInterestingBytes[] = "[]{}\",:-.0123456789eE+tfn\\u\x00\xff\x80 ";
constexpr std::string_view kInteresting(kInterestingBytes, sizeof(kInterestingBytes) - 1);

void CheckConsistent(OpenAiApi api, const OpenAiRequest& r) {
  const GenerateRequest& req = r.request;
  const GenSamplingParams& s = req.sampling;
  if (api == OpenAiApi::kCompletions) {
    ASSERT_NE(req.prompt.empty(), req.prompt_tokens.empty());
  } else {
    ASSERT_FALSE(req.messages_json.empty());
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    ASSERT_EQ(parser.parse(req.messages_json).get(root), simdjson::SUCCESS) << req.messages_json;
    ASSERT_TRUE(root.is_array());
  }
  ASSERT_TRUE(s.temperature >= 0 && s.temperature <= 2);
  ASSERT_TRUE(s.top_p > 0 && s.top_p <= 1);
  ASSERT_GE(s.top_k, 0);
  ASSERT_TRUE(s.min_p >= 0 && s.min_p <= 1);
  ASSERT_GT(s.repetition_penalty, 0);
  ASSERT_TRUE(std::fabs(s.presence_penalty) <= 2 && std::fabs(s.frequency_penalty) <= 2);
  ASSERT_LE(s.logit_bias.size(), kMaxLogitBias);
  ASSERT_LE(s.stop.size(), kMaxStopStrings);
  for (const std::string& stop : s.stop) {
    ASSERT_TRUE(!stop.empty() && stop.size() <= kMaxStopStringBytes);
  }
  ASSERT_TRUE(s.max_tokens == -1 || s.max_tokens >= 1);
  ASSERT_GE(s.min_tokens, 0);
  ASSERT_TRUE(s.n >= 1 && s.n <= kMaxChoices);
  ASSERT_TRUE(s.logprobs >= -1 && s.logprobs <= kMaxTopLogprobs);
  ASSERT_EQ(r.logprobs, s.logprobs);
  ASSERT_TRUE(!r.include_usage || r.stream);
}

TEST(OpenAiFuzzTest, SeedsParse) {
  for (size_t i = 0; i < Seeds().size(); ++i) {
    const OpenAiApi api = i < 2 ? OpenAiApi::kCompletions : OpenAiApi::kChat;
    auto r = Parse(api, Seeds()[i]);
    ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << Seeds()[i];
    CheckConsistent(api, *r);
  }
}

TEST(OpenAiFuzzTest, MutationsNeverCrash) {
  std::mt19937 rng(20250117);
  int ok = 0;
  int errors = 0;
  constexpr int kIterations = 30000;
  for (int i = 0; i < kIterations; ++i) {
    const size_t seed = static_cast<size_t>(i) % Seeds().size();
    const OpenAiApi api = seed < 2 ? OpenAiApi::kCompletions : OpenAiApi::kChat;
    const std::string body = testing::MutateBytes(Seeds()[seed], rng, kInteresting);
    std::string param;
    auto r = Parse(api, body, &param);
    if (r.ok()) {
      ++ok;
      CheckConsistent(api, *r);
      ASSERT_TRUE(param.empty());
    } else {
      ++errors;
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString() << "\n"
                                                                 << body;
      ASSERT_FALSE(r.status().message().empty());
      // The error document is valid JSON whatever the message holds.
      simdjson::dom::parser parser;
      simdjson::dom::element root;
      ASSERT_EQ(parser.parse(OpenAiErrorJson(r.status(), param)).get(root), simdjson::SUCCESS);
    }
  }
  RecordProperty("accepted", ok);
  RecordProperty("rejected", errors);
  EXPECT_GT(ok, kIterations / 50);
  EXPECT_GT(errors, kIterations / 4);
}

TEST(OpenAiFuzzTest, EveryTruncationOfEverySeed) {
  for (size_t i = 0; i < Seeds().size(); ++i) {
    const OpenAiApi api = i < 2 ? OpenAiApi::kCompletions : OpenAiApi::kChat;
    for (size_t n = 0; n < Seeds()[i].size(); ++n) {
      auto r = Parse(api, Seeds()[i].substr(0, n));
      ASSERT_FALSE(r.ok()) << Seeds()[i].substr(0, n);
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace kiln
