// SPDX-License-Identifier: Apache-2.0
// One JSONL row run on a (fake) model: the output lines, the errors (batch_rows.h).

#include "server/batch/batch_rows.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include <optional>
#include <string>

namespace kiln::batch {
namespace {

namespace dom = simdjson::dom;

// A tensor model: OUTPUT = 2 * INPUT (FP32), answered at once on the calling thread.
class DoublingModel final : public LoadedModel {
 public:
  DoublingModel() {
    signature_.name = name_;
    signature_.platform = "onnxruntime_onnx";
    signature_.inputs = {{"INPUT", DataType::kFloat32, {-1}}};
    signature_.outputs = {{"OUTPUT", DataType::kFloat32, {-1}}};
  }
  const std::string& name() const override { return name_; }
  int64_t version() const override { return 3; }
  const ModelSignature& signature() const override { return signature_; }
  void Infer(std::unique_ptr<InferRequest> request, std::shared_ptr<ResponseSink> sink) override {
    if (request->inputs.size() != 1 || request->inputs[0].tensor.dtype() != DataType::kFloat32) {
      sink->Finish(Status::InvalidArgument("expected one FP32 input 'INPUT'"));
      return;
    }
    const OwnedTensor& in = request->inputs[0].tensor;
    Result<OwnedTensor> out = OwnedTensor::Allocate(DataType::kFloat32, in.shape());
    ASSERT_TRUE(out.ok());
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      out->data<float>()[i] = 2 * in.data<float>()[i];
    }
    InferResponse response;
    response.model_name = name_;
    response.model_version = 3;
    response.id = request->id;
    response.outputs.push_back({"OUTPUT", std::move(out).value()});
    sink->Finish(std::move(response));
  }

 private:
  const std::string name_ = "double";
  ModelSignature signature_;
};

// A generative model that answers "Hello" + " world" (or fails with `failure`), recording the
// last request.
class EchoLm final : public LoadedModel {
 public:
  explicit EchoLm(Status failure = Status::OK()) : failure_(std::move(failure)) {}
  const std::string& name() const override { return name_; }
  int64_t version() const override { return 1; }
  const ModelSignature& signature() const override { return signature_; }
  bool generative() const override { return true; }
  void Infer(std::unique_ptr<InferRequest>, std::shared_ptr<ResponseSink> sink) override {
    sink->Finish(Status::Unimplemented("not here"));
  }
  void Generate(std::unique_ptr<GenerateRequest> request,
                std::shared_ptr<GenerationSink> sink) override {
    last = *request;
    if (!failure_.ok()) {
      sink->Finish(failure_);
      return;
    }
    GenChunk a;
    a.text = "Hello";
    a.token_ids = {7};
    sink->Send(a);
    GenChunk b;
    b.text = " world";
    b.token_ids = {8};
    b.finish_reason = FinishReason::kLength;
    sink->Send(b);
    GenFinal final;
    final.usage.prompt_tokens = 5;
    final.usage.completion_tokens = 2;
    sink->Finish(final);
  }

  std::optional<GenerateRequest> last;

 private:
  const Status failure_;
  const std::string name_ = "lm";
  ModelSignature signature_;
};

// Runs one row and returns its outcome (the fakes answer before Start returns).
RowOutcome RunKserve(std::shared_ptr<LoadedModel> model, int64_t row, std::string line) {
  std::optional<RowOutcome> outcome;
  StartKserveRow(std::move(model), row, std::move(line),
                 [&](RowFinisher finish) { outcome = finish(); });
  EXPECT_TRUE(outcome.has_value());
  return outcome.value_or(RowOutcome{});
}

RowOutcome RunOpenAi(std::shared_ptr<LoadedModel> model, int64_t row, std::string line) {
  std::optional<RowOutcome> outcome;
  StartOpenAiRow(std::move(model), row, std::move(line),
                 [&](RowFinisher finish) { outcome = finish(); });
  EXPECT_TRUE(outcome.has_value());
  return outcome.value_or(RowOutcome{});
}

// The output line parsed; fails the test when it is not one JSON object ending in '\n'.
struct ParsedLine {
  dom::parser parser;
  dom::element root;
  explicit ParsedLine(const std::string& line) {
    EXPECT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line";
    EXPECT_EQ(parser.parse(line).get(root), simdjson::SUCCESS) << line;
  }
  dom::element at(std::string_view pointer) {
    dom::element e;
    EXPECT_EQ(root.at_pointer(pointer).get(e), simdjson::SUCCESS) << pointer;
    return e;
  }
  std::string str(std::string_view pointer) {
    std::string_view s;
    EXPECT_EQ(at(pointer).get(s), simdjson::SUCCESS) << pointer;
    return std::string(s);
  }
  int64_t num(std::string_view pointer) {
    int64_t v = -1;
    EXPECT_EQ(at(pointer).get(v), simdjson::SUCCESS) << pointer;
    return v;
  }
  bool is_null(std::string_view pointer) { return at(pointer).is_null(); }
};

constexpr const char* kRequest =
    R"({"id":"r1","inputs":[{"name":"INPUT","datatype":"FP32","shape":[3],"data":[1,2.5,-1]}]})";

TEST(KserveRowTest, AnswersAsTheServer) {
  RowOutcome outcome = RunKserve(std::make_shared<DoublingModel>(), 4, kRequest);
  EXPECT_TRUE(outcome.ok);
  EXPECT_EQ(outcome.line,
            "{\"row\":4,\"id\":\"r1\",\"response\":{\"id\":\"r1\",\"model_name\":\"double\","
            "\"model_version\":\"3\",\"outputs\":[{\"name\":\"OUTPUT\",\"datatype\":\"FP32\","
            "\"shape\":[3],\"data\":[2.0,5.0,-2.0]}]}}\n");
}

TEST(KserveRowTest, BinaryOutputsComeBackAsJson) {
  RowOutcome outcome =
      RunKserve(std::make_shared<DoublingModel>(), 0,
                R"({"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1],"data":[1]}],)"
                R"("parameters":{"binary_data_output":true},)"
                R"("outputs":[{"name":"OUTPUT","parameters":{"binary_data":true}}]})");
  ASSERT_TRUE(outcome.ok) << outcome.error;
  ParsedLine line(outcome.line);
  EXPECT_TRUE(line.is_null("/id"));
  EXPECT_EQ(line.at("/response/outputs/0/data/0").get_double().value_unsafe(), 2.0);
}

TEST(KserveRowTest, AMalformedLineIsTheRowsError) {
  RowOutcome outcome = RunKserve(std::make_shared<DoublingModel>(), 2, R"({"id":"x","inputs":5})");
  EXPECT_FALSE(outcome.ok);
  EXPECT_FALSE(outcome.error.empty());
  ParsedLine line(outcome.line);
  EXPECT_EQ(line.num("/row"), 2);
  EXPECT_EQ(line.str("/id"), "x");  // read from the line although it did not parse
  EXPECT_EQ(line.num("/error/code"), 400);
  EXPECT_EQ(line.str("/error/message"), outcome.error);

  RowOutcome garbage = RunKserve(std::make_shared<DoublingModel>(), 3, "{\"inputs\": [");
  EXPECT_FALSE(garbage.ok);
  ParsedLine g(garbage.line);
  EXPECT_TRUE(g.is_null("/id"));
  EXPECT_EQ(g.num("/error/code"), 400);
}

TEST(KserveRowTest, TheModelsErrorIsTheRowsError) {
  RowOutcome outcome = RunKserve(
      std::make_shared<DoublingModel>(), 1,
      R"({"id":"i","inputs":[{"name":"INPUT","datatype":"INT32","shape":[1],"data":[1]}]})");
  EXPECT_FALSE(outcome.ok);
  EXPECT_EQ(outcome.line,
            "{\"row\":1,\"id\":\"i\",\"error\":{\"code\":400,\"message\":\"expected one FP32 "
            "input 'INPUT'\"}}\n");
}

std::string ChatLine(std::string_view custom_id, std::string_view body) {
  return fmt::format(
      R"({{"custom_id":"{}","method":"POST","url":"/v1/chat/completions","body":{}}})", custom_id,
      body);
}

TEST(OpenAiRowTest, ChatAnswersInTheBatchOutputFormat) {
  auto model = std::make_shared<EchoLm>();
  RowOutcome outcome = RunOpenAi(
      model, 6,
      ChatLine("req-1",
               R"({"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0})"));
  ASSERT_TRUE(outcome.ok) << outcome.error;
  ParsedLine line(outcome.line);
  EXPECT_EQ(line.str("/id"), "batch_req_6");
  EXPECT_EQ(line.str("/custom_id"), "req-1");
  EXPECT_TRUE(line.is_null("/error"));
  EXPECT_EQ(line.num("/response/status_code"), 200);
  const std::string request_id = line.str("/response/request_id");
  EXPECT_EQ(request_id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(line.str("/response/body/id"), request_id);
  EXPECT_EQ(line.str("/response/body/object"), "chat.completion");
  EXPECT_EQ(line.str("/response/body/model"), "m");
  EXPECT_EQ(line.str("/response/body/choices/0/message/content"), "Hello world");
  EXPECT_EQ(line.str("/response/body/choices/0/finish_reason"), "length");
  EXPECT_EQ(line.num("/response/body/usage/completion_tokens"), 2);
  ASSERT_TRUE(model->last.has_value());
  EXPECT_EQ(model->last->sampling.temperature, 0.0f);
  EXPECT_NE(model->last->messages_json.find("hi"), std::string::npos);
}

TEST(OpenAiRowTest, CompletionsDefaultTo16TokensAndNameTheModel) {
  auto model = std::make_shared<EchoLm>();
  RowOutcome outcome = RunOpenAi(
      model, 0,
      R"({"custom_id":"c","method":"POST","url":"/v1/completions","body":{"prompt":"Once"}})");
  ASSERT_TRUE(outcome.ok) << outcome.error;
  ParsedLine line(outcome.line);
  EXPECT_EQ(line.str("/response/body/object"), "text_completion");
  EXPECT_EQ(line.str("/response/body/model"), "lm");  // the body named none
  EXPECT_EQ(line.str("/response/body/choices/0/text"), "Hello world");
  EXPECT_EQ(line.str("/response/request_id").rfind("cmpl-", 0), 0u);
  ASSERT_TRUE(model->last.has_value());
  EXPECT_EQ(model->last->sampling.max_tokens, 16);
  EXPECT_EQ(model->last->prompt, "Once");
}

struct BadLine {
  std::string line;
  std::optional<std::string> custom_id;
  int code;
  std::optional<std::string> param;
  std::string message_part;
};

TEST(OpenAiRowTest, BadLinesAreTheRowsErrors) {
  const BadLine cases[] = {
      {"{not json", std::nullopt, 400, std::nullopt, "batch request line"},
      {R"({"method":"POST"})", std::nullopt, 400, "custom_id", "custom_id"},
      {R"({"custom_id":"a","method":"GET","url":"/v1/completions","body":{}})", "a", 400, "method",
       "POST"},
      {R"({"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}})", "a", 400, "url",
       "/v1/embeddings"},
      {R"({"custom_id":"a","method":"POST","url":"/v1/completions","body":"x"})", "a", 400, "body",
       "JSON object"},
      {ChatLine("b", R"({"messages":[{"role":"user","content":"x"}],"temperature":3})"), "b", 400,
       "temperature", "temperature"},
      {ChatLine("b", R"({"messages":[]})"), "b", 400, "messages", "messages"},
      {ChatLine("s", R"({"messages":[{"role":"user","content":"x"}],"stream":true})"), "s", 400,
       "stream", "stream"},
  };
  for (const BadLine& c : cases) {
    auto model = std::make_shared<EchoLm>();
    RowOutcome outcome = RunOpenAi(model, 9, c.line);
    EXPECT_FALSE(outcome.ok) << c.line;
    EXPECT_FALSE(model->last.has_value()) << c.line << ": must not reach the model";
    ParsedLine line(outcome.line);
    EXPECT_EQ(line.str("/id"), "batch_req_9");
    if (c.custom_id.has_value()) {
      EXPECT_EQ(line.str("/custom_id"), *c.custom_id) << c.line;
    } else {
      EXPECT_TRUE(line.is_null("/custom_id")) << c.line;
    }
    EXPECT_TRUE(line.is_null("/response"));
    EXPECT_EQ(line.num("/error/code"), c.code) << c.line;
    EXPECT_EQ(line.str("/error/type"), "BadRequestError");
    if (c.param.has_value()) {
      EXPECT_EQ(line.str("/error/param"), *c.param) << c.line;
    } else {
      EXPECT_TRUE(line.is_null("/error/param")) << c.line;
    }
    EXPECT_NE(line.str("/error/message").find(c.message_part), std::string::npos)
        << c.line << ": " << line.str("/error/message");
  }
}

TEST(OpenAiRowTest, TheModelsErrorIsTheRowsError) {
  auto model = std::make_shared<EchoLm>(Status::ResourceExhausted("queue full"));
  RowOutcome outcome =
      RunOpenAi(model, 1, ChatLine("q", R"({"messages":[{"role":"user","content":"x"}]})"));
  EXPECT_FALSE(outcome.ok);
  EXPECT_EQ(outcome.error, "queue full");
  ParsedLine line(outcome.line);
  EXPECT_EQ(line.num("/error/code"), 429);
  EXPECT_EQ(line.str("/error/type"), "RateLimitError");
  EXPECT_EQ(line.str("/custom_id"), "q");
}

}  // namespace
}  // namespace kiln::batch
