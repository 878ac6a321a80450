// SPDX-License-Identifier: Apache-2.0
// Triton generate extension bodies and `sampling_parameters`: parsed with the field validators
// of openai_json.cc (one per field, lenient style), written with JsonWriter.
#include "server/http/generate_json.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "server/http/openai_json.h"
#include "server/json_writer.h"

namespace kiln {
namespace {

namespace dom = simdjson::dom;

constexpr JsonValueStyle kLenient = JsonValueStyle::kLenient;

// One parameter (from `parameters` or a top-level key). Unknown keys are ignored.
Status ApplyParameter(std::string_view key, dom::element value, TritonGenerateRequest* out) {
  if (key == "stream") return ParseBoolField(key, value, kLenient, &out->stream);
  if (key == "exclude_input_in_output") {
    return ParseBoolField(key, value, kLenient, &out->exclude_input_in_output);
  }
  if (key == "priority") return ParseUintField(key, value, kLenient, &out->request.priority);
  if (key == "timeout") return ParseUintField(key, value, kLenient, &out->request.timeout_us);
  KILN_ASSIGN_OR_RETURN(bool known,
                        ParseSamplingField(key, value, kLenient, &out->request.sampling));
  (void)known;
  return Status::OK();
}

}  // namespace

Result<TritonGenerateRequest> ParseGenerateRequest(std::string_view body) {
  dom::parser parser;
  dom::element root;
  KILN_RETURN_IF_ERROR(ParseJsonRequestBody(parser, body, &root));
  dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return Status::Internal("parsed request body is not an object");
  }
  TritonGenerateRequest out;
  bool has_text_input = false;
  std::optional<dom::object> parameters;
  for (dom::key_value_pair kv : obj) {
    if (kv.value.is_null()) continue;  // null: absent
    if (kv.key == "text_input") {
      std::string_view text;
      if (kv.value.get_string().get(text) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            fmt::format("'text_input' must be a string, got {}", DescribeJsonValue(kv.value)));
      }
      if (text.empty()) return Status::InvalidArgument("'text_input' must not be empty");
      out.request.prompt.assign(text);
      has_text_input = true;
    } else if (kv.key == "parameters") {
      dom::object p;
      if (kv.value.get_object().get(p) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            fmt::format("'parameters' must be an object, got {}", DescribeJsonValue(kv.value)));
      }
      parameters = p;
    } else if (kv.key == "id") {
      std::string_view id;
      if (kv.value.get_string().get(id) != simdjson::SUCCESS) {
        return Status::InvalidArgument(
            fmt::format("'id' must be a string, got {}", DescribeJsonValue(kv.value)));
      }
      out.request.id.assign(id);
    } else {
      KILN_RETURN_IF_ERROR(ApplyParameter(kv.key, kv.value, &out));
    }
  }
  if (!has_text_input) return Status::InvalidArgument("'text_input' is required");
  if (parameters) {
    for (dom::key_value_pair kv : *parameters) {
      KILN_RETURN_IF_ERROR(ApplyParameter(kv.key, kv.value, &out));
    }
  }
  if (out.request.sampling.n != 1) {
    return Status::InvalidArgument(
        fmt::format("'n' must be 1 for the generate endpoint (it returns one text_output), got {}",
                    out.request.sampling.n));
  }
  KILN_RETURN_IF_ERROR(CheckSamplingParams(out.request.sampling));
  return out;
}

Status ParseSamplingParametersJson(std::string_view json, GenSamplingParams* params) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::OK();
  dom::parser parser;
  dom::element root;
  KILN_RETURN_IF_ERROR(ParseJsonRequestBody(parser, json, &root, "sampling_parameters"));
  dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return Status::Internal("parsed sampling_parameters is not an object");
  }
  GenSamplingParams parsed = *params;  // *params changes only on success
  for (dom::key_value_pair kv : obj) {
    KILN_ASSIGN_OR_RETURN(bool known, ParseSamplingField(kv.key, kv.value, kLenient, &parsed));
    (void)known;
  }
  KILN_RETURN_IF_ERROR(CheckSamplingParams(parsed));
  *params = std::move(parsed);
  return Status::OK();
}

namespace {

void WriteModelHeader(JsonWriter& w, std::string_view model_name, int64_t model_version) {
  w.KeyString("model_name", model_name);
  w.KeyString("model_version", std::to_string(model_version));
}

}  // namespace

std::string GenerateResponseJson(std::string_view model_name, int64_t model_version,
                                 std::string_view text_output,
                                 std::optional<FinishReason> finish_reason) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  WriteModelHeader(w, model_name, model_version);
  w.KeyString("text_output", text_output);
  if (finish_reason) w.KeyString("finish_reason", FinishReasonName(*finish_reason));
  w.EndObject();
  return out;
}

std::string GenerateChunkJson(std::string_view model_name, int64_t model_version,
                              const GenChunk& chunk) {
  return GenerateResponseJson(model_name, model_version, chunk.text, chunk.finish_reason);
}

std::string GenerateErrorJson(std::string_view message) { return JsonErrorBody(message); }

}  // namespace kiln
