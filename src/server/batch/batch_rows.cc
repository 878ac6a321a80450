// SPDX-License-Identifier: Apache-2.0
// One JSONL row run on a model (batch_rows.h).

#include "server/batch/batch_rows.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <optional>
#include <utility>
#include <vector>

#include "server/batch/batch_jsonl.h"
#include "server/http/gen_http.h"
#include "server/http/infer_json.h"
#include "server/http/openai_json.h"
#include "server/inference.h"

namespace kiln::batch {
namespace {

namespace dom = simdjson::dom;

RowOutcome Failed(std::string line, const Status& status) {
  return RowOutcome{std::move(line), false, std::string(status.message())};
}

// ---- KServe v2 ----

// The parsed request's id: nullopt when it has none.
std::optional<std::string> RequestId(const std::string& id) {
  if (id.empty()) return std::nullopt;
  return id;
}

RowOutcome KserveOutcome(int64_t row, const std::optional<std::string>& id,
                         const Result<InferResponse>& result, const ResponseEncoding& encoding) {
  if (!result.ok()) return Failed(KserveErrorLine(row, id, result.status()), result.status());
  EncodedInferResponse encoded;
  if (Status s = EncodeInferResponse(*result, encoding, &encoded); !s.ok()) {
    return Failed(KserveErrorLine(row, id, s), s);
  }
  return RowOutcome{KserveResultLine(row, id, encoded.body), true, {}};
}

// ---- OpenAI ----

// What a line says besides its body; the error and its param when it says it wrongly.
struct OpenAiEnvelope {
  std::optional<std::string> custom_id;
  bool chat = true;
  std::string body;  // the body object, as JSON
};

Status EnvelopeError(std::string message, std::string_view param, std::string* error_param) {
  *error_param = std::string(param);
  return Status::InvalidArgument(std::move(message));
}

// Reads the envelope; on error *custom_id holds the custom_id when it was read.
Status ParseEnvelope(std::string_view line, OpenAiEnvelope* out, std::string* error_param) {
  dom::parser parser;
  dom::element root;
  KILN_RETURN_IF_ERROR(ParseJsonRequestBody(parser, line, &root, "the batch request line"));
  dom::element value;
  if (root.at_key("custom_id").get(value) != simdjson::SUCCESS ||
      value.type() != dom::element_type::STRING) {
    return EnvelopeError("the batch request line needs a string 'custom_id'", "custom_id",
                         error_param);
  }
  out->custom_id = std::string(value.get_string().value_unsafe());
  std::string_view method;
  if (root.at_key("method").get(value) != simdjson::SUCCESS || value.get(method) ||
      method != "POST") {
    return EnvelopeError("'method' must be \"POST\"", "method", error_param);
  }
  std::string_view url;
  if (root.at_key("url").get(value) != simdjson::SUCCESS || value.get(url)) {
    return EnvelopeError("'url' must be \"/v1/chat/completions\" or \"/v1/completions\" (a string)",
                         "url", error_param);
  }
  if (url != "/v1/chat/completions" && url != "/v1/completions") {
    return EnvelopeError(
        fmt::format("'url' must be \"/v1/chat/completions\" or \"/v1/completions\", got \"{}\"",
                    url.substr(0, 64)),
        "url", error_param);
  }
  out->chat = url == "/v1/chat/completions";
  if (root.at_key("body").get(value) != simdjson::SUCCESS ||
      value.type() != dom::element_type::OBJECT) {
    return EnvelopeError("'body' must be a JSON object: the request body", "body", error_param);
  }
  out->body = simdjson::to_string(value);
  return Status::OK();
}

// Collects the chunks of one generation and hands the finished answer on.
class OpenAiRowSink final : public GenerationSink {
 public:
  OpenAiRowSink(int64_t row, std::optional<std::string> custom_id, std::string request_id,
                std::unique_ptr<GenHttpFormat> format, RowDone done)
      : row_(row),
        custom_id_(std::move(custom_id)),
        request_id_(std::move(request_id)),
        format_(std::move(format)),
        done_(std::move(done)) {}

  void Send(GenChunk chunk) override { format_->Chunk(chunk); }

  void Finish(Result<GenFinal> result) override {
    std::shared_ptr<GenHttpFormat> format = std::move(format_);
    done_([row = row_, custom_id = custom_id_, request_id = request_id_, format,
           result = std::move(result)]() -> RowOutcome {
      if (!result.ok()) {
        return Failed(OpenAiErrorLine(row, custom_id, result.status(), {}), result.status());
      }
      return RowOutcome{
          OpenAiResultLine(row, custom_id, request_id, format->Finish(*result)), true, {}};
    });
  }

 private:
  const int64_t row_;
  const std::optional<std::string> custom_id_;
  const std::string request_id_;
  std::unique_ptr<GenHttpFormat> format_;
  RowDone done_;
};

}  // namespace

void StartKserveRow(std::shared_ptr<LoadedModel> model, int64_t row, std::string line,
                    RowDone done) {
  // Room past the end so the parser reads the line in place.
  line.reserve(line.size() + kJsonPaddingBytes);
  auto body = std::make_shared<const std::string>(std::move(line));
  Result<ParsedInferRequest> parsed = ParseInferRequest(body, body->size());
  if (!parsed.ok()) {
    std::optional<std::string> id = PeekStringMember(*body, "id");
    done([row, id = std::move(id), status = parsed.status()] {
      return Failed(KserveErrorLine(row, id, status), status);
    });
    return;
  }
  std::unique_ptr<InferRequest> request = std::move(parsed->request);
  ResponseEncoding encoding = std::move(parsed->encoding);
  std::vector<ClassifyOutput> classify;
  for (const OutputEncoding& o : encoding.outputs) {
    if (o.class_count > 0) classify.push_back({o.name, o.class_count});
  }
  // A line holds JSON only: every output goes out as "data".
  encoding.binary_data_output = false;
  for (OutputEncoding& o : encoding.outputs) o.binary_data.reset();
  auto shared_encoding = std::make_shared<const ResponseEncoding>(std::move(encoding));
  std::optional<std::string> id = RequestId(request->id);
  std::shared_ptr<ResponseSink> sink = CallbackSink(
      [row, id, shared_encoding, done = std::move(done)](Result<InferResponse> result) {
        auto shared = std::make_shared<const Result<InferResponse>>(std::move(result));
        done([row, id, shared_encoding, shared] {
          return KserveOutcome(row, id, *shared, *shared_encoding);
        });
      });
  StartInference(std::move(model), std::move(request), std::move(classify), std::move(sink));
}

void StartOpenAiRow(std::shared_ptr<LoadedModel> model, int64_t row, std::string line,
                    RowDone done) {
  const auto fail = [&](const std::optional<std::string>& custom_id, const Status& status,
                        std::string param) {
    done([row, custom_id, status, param = std::move(param)] {
      return Failed(OpenAiErrorLine(row, custom_id, status, param), status);
    });
  };
  OpenAiEnvelope envelope;
  std::string param;
  if (Status s = ParseEnvelope(line, &envelope, &param); !s.ok()) {
    fail(envelope.custom_id, s, param);
    return;
  }
  Result<OpenAiRequest> parsed = envelope.chat ? ParseChatCompletionRequest(envelope.body, &param)
                                               : ParseCompletionRequest(envelope.body, &param);
  if (!parsed.ok()) {
    fail(envelope.custom_id, parsed.status(), param);
    return;
  }
  if (parsed->stream) {
    fail(envelope.custom_id,
         Status::InvalidArgument(
             "'stream' must be false or absent: a batch answers each request with one body"),
         "stream");
    return;
  }
  std::string request_id = NewOpenAiResponseId(envelope.chat);
  std::unique_ptr<GenHttpFormat> format =
      MakeOpenAiFormat(*parsed, envelope.chat, request_id, UnixSecondsNow(),
                       parsed->model.empty() ? model->name() : parsed->model);
  auto request = std::make_unique<GenerateRequest>(std::move(parsed->request));
  ApplyOpenAiDefaults(envelope.chat, request.get());  // as the HTTP server does
  auto sink =
      std::make_shared<OpenAiRowSink>(row, std::move(envelope.custom_id), std::move(request_id),
                                      std::move(format), std::move(done));
  model->Generate(std::move(request), std::move(sink));
}

}  // namespace kiln::batch
