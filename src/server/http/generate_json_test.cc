// SPDX-License-Identifier: Apache-2.0
// Triton generate extension JSON: the request's fields (in `parameters`, at the top level, as
// strings), refusals, `sampling_parameters`, the exact response / stream / error documents, and a
// mutation test of both parsers.
#include "server/http/generate_json.h"

#include <gtest/gtest.h>

#include <random>

#include "base/testing/mutate.h"
#include "server/http/openai_json.h"

namespace kiln {
namespace {

TritonGenerateRequest ParseOk(const std::string& body) {
  auto r = ParseGenerateRequest(body);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << body;
  return r.ok() ? std::move(r).value() : TritonGenerateRequest{};
}

void ExpectInvalid(const std::string& body, const std::string& message) {
  SCOPED_TRACE(body);
  auto r = ParseGenerateRequest(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  if (message.ends_with("...")) {
    EXPECT_TRUE(r.status().message().starts_with(message.substr(0, message.size() - 3)))
        << r.status().message();
  } else {
    EXPECT_EQ(r.status().message(), message);
  }
}

TEST(GenerateParseTest, Minimal) {
  const TritonGenerateRequest r = ParseOk(R"({"text_input":"client input"})");
  EXPECT_EQ(r.request.prompt, "client input");
  EXPECT_TRUE(r.request.prompt_tokens.empty());
  EXPECT_TRUE(r.request.messages_json.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.exclude_input_in_output);
  EXPECT_EQ(r.request.id, "");
  EXPECT_EQ(r.request.priority, 0u);
  EXPECT_EQ(r.request.timeout_us, 0u);
  EXPECT_EQ(r.request.sampling.temperature, 1.0f);
  EXPECT_EQ(r.request.sampling.max_tokens, -1);
  EXPECT_EQ(r.request.sampling.n, 1);
}

TEST(GenerateParseTest, Parameters) {
  const TritonGenerateRequest r = ParseOk(
      R"({"id":"g1","text_input":"x","parameters":{"stream":true,"temperature":0,)"
      R"("max_tokens":20,"top_k":-1,"top_p":0.5,"min_p":0.25,"stop":["\n","."],)"
      R"("exclude_input_in_output":false,"priority":2,"timeout":5000,"seed":7,)"
      R"("ignore_eos":true,"min_tokens":2,"stop_token_ids":[9],"repetition_penalty":1.5,)"
      R"("presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"3":2},)"
      R"("skip_special_tokens":false,"n":1,"custom_model_param":"abc","return_finish_reason":1}})");
  EXPECT_EQ(r.request.id, "g1");
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.exclude_input_in_output);
  EXPECT_EQ(r.request.priority, 2u);
  EXPECT_EQ(r.request.timeout_us, 5000u);
  const GenSamplingParams& s = r.request.sampling;
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.max_tokens, 20);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.min_p, 0.25f);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"\n", "."}));
  EXPECT_EQ(s.seed, 7u);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_EQ(s.stop_token_ids, std::vector<int32_t>{9});
  EXPECT_EQ(s.repetition_penalty, 1.5f);
  EXPECT_EQ(s.presence_penalty, 0.5f);
  EXPECT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, 2.0f}}));
  EXPECT_FALSE(s.skip_special_tokens);
}

TEST(GenerateParseTest, StringValues) {
  // Triton's vLLM clients send numbers and booleans as strings.
  const TritonGenerateRequest r = ParseOk(
      R"({"text_input":"x","parameters":{"temperature":"0.5","max_tokens":"16",)"
      R"("ignore_eos":"true","stream":"True","exclude_input_in_output":"false","seed":"-1",)"
      R"("top_k":"40","priority":"3","timeout":"18446744073709551615","min_tokens":"2.0"}})");
  EXPECT_EQ(r.request.sampling.temperature, 0.5f);
  EXPECT_EQ(r.request.sampling.max_tokens, 16);
  EXPECT_TRUE(r.request.sampling.ignore_eos);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.exclude_input_in_output);
  EXPECT_EQ(r.request.sampling.seed, 18446744073709551615u);
  EXPECT_EQ(r.request.sampling.top_k, 40);
  EXPECT_EQ(r.request.priority, 3u);
  EXPECT_EQ(r.request.timeout_us, 18446744073709551615u);
  EXPECT_EQ(r.request.sampling.min_tokens, 2);
}

TEST(GenerateParseTest, TopLevelKeys) {
  // TensorRT-LLM's ensemble style: sampling keys as top-level inputs; other keys ignored.
  TritonGenerateRequest r = ParseOk(
      R"({"text_input":"x","max_tokens":20,"temperature":0.5,"bad_words":"","stop_words":"",)"
      R"("stream":true})");
  EXPECT_EQ(r.request.sampling.max_tokens, 20);
  EXPECT_EQ(r.request.sampling.temperature, 0.5f);
  EXPECT_TRUE(r.stream);
  // `parameters` overrides the top level, wherever it comes.
  r = ParseOk(R"({"parameters":{"max_tokens":5},"max_tokens":20,"temperature":0.5,)"
              R"("text_input":"x"})");
  EXPECT_EQ(r.request.sampling.max_tokens, 5);
  EXPECT_EQ(r.request.sampling.temperature, 0.5f);
  // null: absent.
  r = ParseOk(R"({"text_input":"x","parameters":null,"temperature":null,"id":null})");
  EXPECT_EQ(r.request.sampling.temperature, 1.0f);
  r = ParseOk(R"({"text_input":"x","parameters":{"temperature":null,"stream":null}})");
  EXPECT_EQ(r.request.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.stream);
}

TEST(GenerateParseTest, Refusals) {
  ExpectInvalid("", "request body is empty; expected a JSON object");
  ExpectInvalid("{", "malformed JSON request body: ...");
  ExpectInvalid("{\"text_input\":\"\xff\"}", "malformed JSON request body: ...");
  ExpectInvalid("[]", "request body must be a JSON object, got an array");
  ExpectInvalid("{}", "'text_input' is required");
  ExpectInvalid(R"({"text_input":null})", "'text_input' is required");
  ExpectInvalid(R"({"text_input":5})", "'text_input' must be a string, got 5");
  ExpectInvalid(R"({"text_input":["a"]})", "'text_input' must be a string, got an array");
  ExpectInvalid(R"({"text_input":""})", "'text_input' must not be empty");
  ExpectInvalid(R"({"text_input":"x","parameters":5})", "'parameters' must be an object, got 5");
  ExpectInvalid(R"({"text_input":"x","parameters":[]})",
                "'parameters' must be an object, got an array");
  ExpectInvalid(R"({"text_input":"x","id":5})", "'id' must be a string, got 5");
  ExpectInvalid(R"({"text_input":"x","parameters":{"temperature":3}})",
                "'temperature' must be a number between 0 and 2, got 3");
  ExpectInvalid(R"({"text_input":"x","parameters":{"temperature":"hot"}})",
                "'temperature' must be a number between 0 and 2, got \"hot\"");
  ExpectInvalid(R"({"text_input":"x","parameters":{"temperature":"nan"}})",
                "'temperature' must be a number between 0 and 2, got \"nan\"");
  ExpectInvalid(R"({"text_input":"x","parameters":{"top_p":"0"}})",
                "'top_p' must be a number in (0, 1], got \"0\"");
  ExpectInvalid(R"({"text_input":"x","parameters":{"max_tokens":"1.5"}})",
                "'max_tokens' must be an integer >= 1, got \"1.5\"");
  ExpectInvalid(R"({"text_input":"x","parameters":{"max_tokens":" 5"}})",
                "'max_tokens' must be an integer >= 1, got \" 5\"");
  ExpectInvalid(R"({"text_input":"x","max_tokens":0})",
                "'max_tokens' must be an integer >= 1, got 0");
  ExpectInvalid(R"({"text_input":"x","parameters":{"stream":"maybe"}})",
                "'stream' must be a boolean, got \"maybe\"");
  ExpectInvalid(R"({"text_input":"x","parameters":{"exclude_input_in_output":1}})",
                "'exclude_input_in_output' must be a boolean, got 1");
  ExpectInvalid(R"({"text_input":"x","parameters":{"priority":-1}})",
                "'priority' must be a non-negative integer, got -1");
  ExpectInvalid(R"({"text_input":"x","parameters":{"timeout":1.5}})",
                "'timeout' must be a non-negative integer, got 1.5");
  ExpectInvalid(R"({"text_input":"x","parameters":{"stop":[""]}})",
                "'stop' strings must not be empty");
  ExpectInvalid(R"({"text_input":"x","parameters":{"n":2}})",
                "'n' must be 1 for the generate endpoint (it returns one text_output), got 2");
  ExpectInvalid(R"({"text_input":"x","parameters":{"n":17}})",
                "'n' must be an integer between 1 and 16, got 17");
  ExpectInvalid(R"({"text_input":"x","parameters":{"min_tokens":9,"max_tokens":3}})",
                "'min_tokens' (9) must not exceed 'max_tokens' (3)");
}

TEST(SamplingParametersJsonTest, Parse) {
  GenSamplingParams p;
  ASSERT_TRUE(ParseSamplingParametersJson(
                  R"({"temperature":"0.1","top_p":"0.95","max_tokens":64,"n":"2",)"
                  R"("stop":"###","stream":false,"exclude_input_in_output":true,"other":[1]})",
                  &p)
                  .ok());
  EXPECT_EQ(p.temperature, 0.1f);
  EXPECT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.max_tokens, 64);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.stop, std::vector<std::string>{"###"});
  // Empty text: nothing changes; named fields only change.
  ASSERT_TRUE(ParseSamplingParametersJson("", &p).ok());
  ASSERT_TRUE(ParseSamplingParametersJson(" \n", &p).ok());
  ASSERT_TRUE(ParseSamplingParametersJson(R"({"top_k":5})", &p).ok());
  EXPECT_EQ(p.temperature, 0.1f);
  EXPECT_EQ(p.top_k, 5);
}

TEST(SamplingParametersJsonTest, Refusals) {
  const struct {
    std::string json;
    std::string message;
  } cases[] = {
      {"[]", "sampling_parameters must be a JSON object, got an array"},
      {"{", "malformed JSON sampling_parameters: ..."},
      {"\"x\"", "sampling_parameters must be a JSON object, got a string"},
      {R"({"temperature":5})", "'temperature' must be a number between 0 and 2, got 5"},
      {R"({"n":0})", "'n' must be an integer between 1 and 16, got 0"},
      {R"({"max_tokens":1,"min_tokens":2})", "'min_tokens' (2) must not exceed 'max_tokens' (1)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    GenSamplingParams p;
    p.temperature = 0.25f;
    p.max_tokens = 9;
    Status s = ParseSamplingParametersJson(c.json, &p);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    if (c.message.ends_with("...")) {
      EXPECT_TRUE(s.message().starts_with(c.message.substr(0, c.message.size() - 3)))
          << s.message();
    } else {
      EXPECT_EQ(s.message(), c.message);
    }
    // A refused text changes nothing.
    EXPECT_EQ(p.temperature, 0.25f);
    EXPECT_EQ(p.max_tokens, 9);
  }
  // Partly valid: the valid keys before the bad one are not applied either.
  GenSamplingParams p;
  EXPECT_FALSE(ParseSamplingParametersJson(R"({"top_k":3,"top_p":2})", &p).ok());
  EXPECT_EQ(p.top_k, 0);
}

TEST(GenerateWriteTest, Documents) {
  EXPECT_EQ(GenerateResponseJson("mymodel", 1, "model output"),
            R"({"model_name":"mymodel","model_version":"1","text_output":"model output"})");
  EXPECT_EQ(GenerateResponseJson("m", 12, "a\"b\n", FinishReason::kLength),
            R"({"model_name":"m","model_version":"12","text_output":"a\"b\n",)"
            R"("finish_reason":"length"})");
  GenChunk c;
  c.text = "\xC3\xA9";
  EXPECT_EQ(GenerateChunkJson("m", 3, c),
            "{\"model_name\":\"m\",\"model_version\":\"3\",\"text_output\":\"\xC3\xA9\"}");
  c.text = "";
  c.finish_reason = FinishReason::kStop;
  EXPECT_EQ(GenerateChunkJson("m", 3, c),
            R"({"model_name":"m","model_version":"3","text_output":"","finish_reason":"stop"})");
  EXPECT_EQ(SseEvent(GenerateChunkJson("m", 3, c)),
            "data: {\"model_name\":\"m\",\"model_version\":\"3\",\"text_output\":\"\","
            "\"finish_reason\":\"stop\"}\n\n");
  EXPECT_EQ(GenerateErrorJson("bad \"x\""), R"({"error":"bad \"x\""})");
  EXPECT_EQ(GenerateErrorJson("\xff"), "{\"error\":\"\xEF\xBF\xBD\"}");
}

// ---- Mutation test ----

constexpr char kInterestingBytes[] = "[]{}\",:-.0123456789eE+tfn\\u\x00\xff\x80 ";
constexpr std::string_view kInteresting(kInterestingBytes, sizeof(kInterestingBytes) - 1);

TEST(GenerateFuzzTest, MutationsNeverCrash) {
  const std::vector<std::string> seeds = {
      (R"({"text_input":"Hello","parameters":{"stream":false,"temperature":0.5,)"
       R"("max_tokens":"32","stop":["\n"],"seed":"-7","exclude_input_in_output":"true"}})"),
      (R"({"text_input":"x","max_tokens":20,"top_k":5,"bad_words":"","id":"r",)"
       R"("parameters":{"logit_bias":{"1":-5},"priority":1,"timeout":100}})"),
  };
  const std::string sampling_seed =
      R"({"temperature":"0.1","top_p":0.95,"n":"2","stop":["a","b"],"stop_token_ids":[1]})";
  for (const std::string& s : seeds) ASSERT_TRUE(ParseGenerateRequest(s).ok()) << s;
  GenSamplingParams unused;
  ASSERT_TRUE(ParseSamplingParametersJson(sampling_seed, &unused).ok());
  std::mt19937 rng(7);
  int ok = 0;
  int errors = 0;
  constexpr int kIterations = 20000;
  for (int i = 0; i < kIterations; ++i) {
    const std::string body =
        testing::MutateBytes(seeds[static_cast<size_t>(i) % seeds.size()], rng, kInteresting);
    auto r = ParseGenerateRequest(body);
    if (r.ok()) {
      ++ok;
      ASSERT_FALSE(r->request.prompt.empty());
      ASSERT_EQ(r->request.sampling.n, 1);
      ASSERT_TRUE(r->request.sampling.temperature >= 0 && r->request.sampling.temperature <= 2);
    } else {
      ++errors;
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    }
    GenSamplingParams p;
    Status s =
        ParseSamplingParametersJson(testing::MutateBytes(sampling_seed, rng, kInteresting), &p);
    ASSERT_TRUE(s.ok() || s.code() == StatusCode::kInvalidArgument) << s.ToString();
  }
  EXPECT_GT(ok, kIterations / 50);
  EXPECT_GT(errors, kIterations / 4);
}

}  // namespace
}  // namespace kiln
