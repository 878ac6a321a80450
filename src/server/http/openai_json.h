// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON side of kiln's OpenAI-compatible API (/v1/completions, /v1/chat/completions,
// /v1/models): request bodies -> GenerateRequest (sched/gen_request.h), and the response,
// streaming chunk, usage, error and model-list documents. Pure functions, no sockets: the HTTP
// server calls these and they are unit- and mutation-tested on their own.
//
//   std::string error_param;
//   Result<OpenAiRequest> parsed = ParseChatCompletionRequest(body, &error_param);
//   if (!parsed.ok()) return Reply(HttpStatusFor(parsed.status().code()),
//                                  OpenAiErrorJson(parsed.status(), error_param));
//   const OpenAiResponseHeader header{id, now_unix_s, parsed->model, parsed->include_usage};
//   // streaming: per GenChunk c of a choice (first: the choice's first chunk)
//   for (const std::string& json : ChatCompletionChunkJson(header, c, first)) out +=
//   SseEvent(json);
//   // at the end
//   if (parsed->include_usage) out += SseEvent(UsageChunkJson(header, OpenAiApi::kChat, usage));
//   out += kSseDone;
//
// Request rules (both endpoints). The body is one JSON object nested at most kMaxJsonDepth deep,
// valid UTF-8 (simdjson validates); keys may come in any order, a repeated key's last value
// wins, unknown keys are ignored (clients send many: tools, tool_choice, parallel_tool_calls,
// store, metadata, ...), and an explicit null means "absent" for every optional field.
//   model             string (absent: empty; the caller picks or refuses).
//   stream            boolean. stream_options: object or null; include_usage boolean; only
//                     with stream: true (vLLM's rule).
//   temperature       number in [0, 2]          top_p        number in (0, 1]
//   top_k             -1 or an integer >= 0 (-1 -> 0: every token)
//   min_p             number in [0, 1]          repetition_penalty   number > 0
//   presence_penalty, frequency_penalty         number in [-2, 2]
//   logit_bias        object {"<token id>": number in [-100, 100]}, at most kMaxLogitBias
//   seed              integer; a negative seed (OpenAI allows them) is kept as the uint64 with
//                     the same two's-complement bits (-1 -> 2^64 - 1)
//   stop              string or array of strings: at most kMaxStopStrings, each non-empty and
//                     at most kMaxStopStringBytes bytes
//   stop_token_ids    array of token ids        ignore_eos, skip_special_tokens   boolean
//   min_tokens        integer >= 0 (<= max_tokens when that is set)
//   max_tokens, max_completion_tokens   integer >= 1; absent: -1 (until the context is full);
//                     both given: max_completion_tokens
//   n                 integer in [1, kMaxChoices]; best_of, if given, must equal n
//   priority          kiln extension: unsigned integer (GenerateRequest::priority)
//   user              string, kept in OpenAiRequest::user and not used otherwise
//   response_format   object whose type is "text" (anything else: 400)
// Integer fields also take a number with no fraction (5.0). Token ids are integers in
// [0, 2^31 - 1]; whether the vocabulary has them is the model's check.
// Completions (/v1/completions):
//   prompt            required: a non-empty string, an array of one such string, a non-empty
//                     array of token ids, or an array of one such array. An array of several
//                     prompts is refused ("batched prompts are not supported").
//   logprobs          integer in [0, 5] (OpenAI's limit): the chosen token and the top k.
//   echo              boolean. echo: true is accepted for a text prompt without logprobs, and
//                     means the CALLER prefixes the prompt text to each choice's text (in a
//                     stream: a first chunk per choice holding the prompt); refused with a
//                     token-id prompt (no text to echo) or with logprobs (prompt logprobs are
//                     not computed).
//   suffix            refused unless null or "" (no fill-in-the-middle).
// Chat completions (/v1/chat/completions):
//   messages          required, a non-empty array of objects with a string `role` (any role
//                     the model's chat template knows) and `content`: a string, an array of
//                     {"type": "text", "text": string} parts, or null / absent for an
//                     "assistant" message (one with tool calls). Other part types (image_url,
//                     input_audio, ...) are refused. GenerateRequest::messages_json is the
//                     array re-serialized with every content array joined into one string
//                     (the parts' texts separated by "\n", as vLLM does) and the other members
//                     of each message (name, tool_calls, tool_call_id, ...) kept as sent.
//   logprobs          boolean; top_logprobs integer in [0, kMaxTopLogprobs]; top_logprobs > 0
//                     needs logprobs: true.
//   add_generation_prompt  boolean (vLLM's extension; default true).
// Errors are INVALID_ARGUMENT naming the field and what was sent ("'temperature' must be a
// number between 0 and 2, got 3"); RESOURCE_EXHAUSTED only when the parser cannot allocate.
// The field also goes to *error_param (OpenAI's error "param"): the top-level key, or a path
// such as "messages[1].content"; empty when the error is not about one field (malformed JSON).
//
// Response documents follow OpenAI's shapes (vLLM's where OpenAI has none):
//   - logprob values below -9999 (and -inf) are written as -9999.0, as vLLM does, so that every
//     client reads a number;
//   - token texts in logprobs are the token's bytes: they may be part of a UTF-8 character, so
//     `token` has invalid sequences replaced by U+FFFD (JsonWriter's rule) and `bytes` (chat)
//     gives the raw bytes as integers, as OpenAI does; the completions `top_logprobs` maps are
//     keyed by that replaced text (two tokens with the same text give a repeated key);
//   - completions text_offset: the offset of each token in the choice's text in characters
//     (UTF-8 code points, what Python's str indexes), counting the token bytes before it;
//   - "stop_reason" (vLLM's extension) is written only when a stop string ended the choice;
//   - errors use vLLM's convention: {"error":{"message", "type", "param", "code"}} with type the
//     OpenAI SDK's exception name for the HTTP status ("BadRequestError", "NotFoundError", ...),
//     code that HTTP status as an integer, and param null when empty.
//
// Thread safety: stateless functions; call from any thread.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "sched/gen_request.h"

namespace simdjson::dom {
class element;
class parser;
}  // namespace simdjson::dom

namespace kiln {

// Largest `logprobs` of /v1/completions (OpenAI's documented maximum).
inline constexpr int32_t kMaxCompletionLogprobs = 5;

// A parsed /v1/completions or /v1/chat/completions body.
struct OpenAiRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the caller prefixes the prompt (see above)
  int32_t logprobs = -1;       // -1: none; k >= 0: chosen token + top k (== sampling.logprobs)
  std::string user;
  GenerateRequest request;  // prompt / prompt_tokens or messages_json, sampling, priority
};

// Parse a request body. On error, *error_param (when not null) receives the offending field.
Result<OpenAiRequest> ParseCompletionRequest(std::string_view body,
                                             std::string* error_param = nullptr);
Result<OpenAiRequest> ParseChatCompletionRequest(std::string_view body,
                                                 std::string* error_param = nullptr);

// ---- Response documents ----

enum class OpenAiApi { kCompletions, kChat };

// What every document of one response repeats. The caller makes the id ("cmpl-...",
// "chatcmpl-...") and the unix time, so tests are deterministic. The views must outlive the
// calls that use the header.
struct OpenAiResponseHeader {
  std::string_view id;
  int64_t created = 0;  // unix seconds
  std::string_view model;
  bool include_usage = false;  // streaming chunks carry "usage": null (OpenAI's rule)
};

// One whole choice of a non-streaming response.
struct OpenAiChoice {
  int32_t index = 0;
  std::string text;
  std::optional<FinishReason> finish_reason;  // null when unset
  std::string stop_reason;                    // the stop string that ended it, if any
  bool has_logprobs = false;                  // false: "logprobs": null
  std::vector<GenTokenLogprob> logprobs;
};

// {"id","object":"text_completion","created","model","choices":[{"index","text","logprobs",
// "finish_reason"}],"usage"}; logprobs {"tokens","token_logprobs","top_logprobs","text_offset"}.
std::string CompletionResponseJson(const OpenAiResponseHeader& header,
                                   std::span<const OpenAiChoice> choices, const GenUsage& usage);
// {"id","object":"chat.completion","created","model","choices":[{"index","message":{"role":
// "assistant","content"},"logprobs","finish_reason"}],"usage"}; logprobs {"content":[{"token",
// "logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]}]}.
std::string ChatCompletionResponseJson(const OpenAiResponseHeader& header,
                                       std::span<const OpenAiChoice> choices,
                                       const GenUsage& usage);

// One streamed completions chunk object ("object":"text_completion", one choice; finish_reason
// on the choice's last). *text_offset (may be null: 0) is the choice's text length in code
// points before this chunk, for the logprobs' text_offset; it is advanced past the chunk's
// tokens.
std::string CompletionChunkJson(const OpenAiResponseHeader& header, const GenChunk& chunk,
                                int64_t* text_offset = nullptr);
// The chat chunk objects ("object":"chat.completion.chunk") for one GenChunk, 0 to 2 of them, in
// order: a content chunk, when the GenChunk is the choice's first (`first_of_choice`; its delta
// then also carries "role":"assistant") or has text or logprobs; then, on the choice's last
// GenChunk, a chunk with an empty delta and the finish_reason.
std::vector<std::string> ChatCompletionChunkJson(const OpenAiResponseHeader& header,
                                                 const GenChunk& chunk, bool first_of_choice);
// The include_usage chunk sent last: "choices":[] and the usage. Its object is
// "text_completion" (kCompletions) or "chat.completion.chunk" (kChat).
std::string UsageChunkJson(const OpenAiResponseHeader& header, OpenAiApi api,
                           const GenUsage& usage);

// Server-sent events framing: "data: <json>\n\n". REQUIRES: json has no newline (JsonWriter
// output never has one).
std::string SseEvent(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// The OpenAI SDK exception name for an HTTP status: 400 BadRequestError, 401
// AuthenticationError, 403 PermissionDeniedError, 404 NotFoundError, 409 ConflictError, 422
// UnprocessableEntityError, 429 RateLimitError, 501 NotImplementedError, 503
// ServiceUnavailableError, other 5xx InternalServerError, other 4xx BadRequestError.
std::string_view OpenAiErrorType(int http_status);
// {"error":{"message","type","param","code"}}; param null when empty.
std::string OpenAiErrorJson(std::string_view message, std::string_view type, std::string_view param,
                            int code);
// The same for a failed Status: code its HTTP status (server/status_map.h), type from that.
std::string OpenAiErrorJson(const Status& status, std::string_view param = {});

struct OpenAiModelInfo {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string owned_by;
};
// GET /v1/models: {"object":"list","data":[<model>...]}.
std::string ModelsListJson(std::span<const OpenAiModelInfo> models);
// GET /v1/models/{id}: {"id","object":"model","created","owned_by"}.
std::string ModelJson(const OpenAiModelInfo& model);

// ---- Field validators shared with generate_json.cc (one per field, written once) ----

// kLenient also takes numbers and booleans written as strings ("0.7", "true"), as Triton's vLLM
// backend clients send sampling parameters; kStrict (OpenAI) takes JSON types only.
enum class JsonValueStyle { kStrict, kLenient };

// Parses `body` (with `parser`, at most kMaxJsonDepth deep) into *root, which must be an object.
// INVALID_ARGUMENT, starting with `what`, for an empty (or all-blank) or malformed body, invalid
// UTF-8 or another JSON value; RESOURCE_EXHAUSTED when memory runs out. *root lives in `parser`.
Status ParseJsonRequestBody(simdjson::dom::parser& parser, std::string_view body,
                            simdjson::dom::element* root, std::string_view what = "request body");

// Sets the field of *params that `key` names from `value` when `key` is one of the shared
// sampling keys (temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty,
// frequency_penalty, logit_bias, seed, stop, stop_token_ids, ignore_eos, min_tokens, max_tokens,
// n, skip_special_tokens); null leaves it unchanged. Returns whether `key` is one;
// INVALID_ARGUMENT naming `key` for a wrong type or value.
Result<bool> ParseSamplingField(std::string_view key, const simdjson::dom::element& value,
                                JsonValueStyle style, GenSamplingParams* params);
// Checks across fields, once every key is read (min_tokens <= max_tokens). On error
// *error_param (when not null) names the field.
Status CheckSamplingParams(const GenSamplingParams& params, std::string* error_param = nullptr);

// `value` as it was sent, for messages: numbers and booleans as written, strings quoted (cut at
// 32 bytes), otherwise its JSON type ("an object").
std::string DescribeJsonValue(const simdjson::dom::element& value);

// Boolean / unsigned integer fields with the messages above ("'stream' must be a boolean, got
// 1"). null leaves *out unchanged.
Status ParseBoolField(std::string_view key, const simdjson::dom::element& value,
                      JsonValueStyle style, bool* out);
Status ParseUintField(std::string_view key, const simdjson::dom::element& value,
                      JsonValueStyle style, uint64_t* out);

}  // namespace kiln
