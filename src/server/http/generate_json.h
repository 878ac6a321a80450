// SPDX-License-Identifier: Apache-2.0
#pragma once
// The JSON side of Triton's generate extension (POST v2/models/<m>[/versions/<v>]/generate and
// /generate_stream; triton-inference-server/server docs/protocol/extension_generate.md) and of
// the KServe v2 tensor convention's `sampling_parameters` input: bodies -> GenerateRequest
// (sched/gen_request.h), and the response, stream event and error documents. Pure functions,
// no sockets.
//
//   Result<TritonGenerateRequest> parsed = ParseGenerateRequest(body);
//   if (!parsed.ok()) return Reply(HttpStatusFor(parsed.status().code()),
//                                  GenerateErrorJson(parsed.status().message()));
//   // /generate:        GenerateResponseJson(model, version, whole_text, finish_reason)
//   // /generate_stream: per GenChunk c: SseEvent(GenerateChunkJson(model, version, c))
//   //                   (SseEvent: server/http/openai_json.h); an error after the first event:
//   //                   SseEvent(GenerateErrorJson(message)).
//
// Request rules. The body is one JSON object (at most kMaxJsonDepth deep, valid UTF-8):
//   text_input   required, a non-empty string: the prompt, tokenized with special tokens.
//   parameters   optional object. Its keys are the sampling keys shared with the OpenAI API and
//                validated by the same code (openai_json.h: temperature, top_p, top_k, min_p,
//                repetition_penalty, presence_penalty, frequency_penalty, logit_bias, seed, stop,
//                stop_token_ids, ignore_eos, min_tokens, max_tokens, n, skip_special_tokens),
//                plus:
//                  stream                   boolean, reported in `stream` (the URL decides how
//                                           the caller answers; Triton's examples send
//                                           "stream": false to /generate)
//                  exclude_input_in_output  boolean, default TRUE in kiln (text_output is the
//                                           generated text only); false: the CALLER prefixes
//                                           text_input to text_output (in a stream: a first
//                                           event holding it), as Triton's vLLM backend does
//                  priority, timeout        unsigned integers -> GenerateRequest::priority /
//                                           timeout_us (microseconds), as in v2 infer requests
//                Values may also be strings holding a number or "true"/"false" (the lenient
//                style: Triton's vLLM clients send {"temperature": "0.1"}); n must be 1 (one
//                text_output); other keys are ignored (Triton passes them to the model).
//   id           optional string, GenerateRequest::id.
//   Any other top-level key is one of the model's other inputs in Triton. kiln's generation
//   models have none, so a top-level key that is one of the parameter names above is read as
//   that parameter (TensorRT-LLM's ensemble takes max_tokens, temperature, stream, ... as
//   inputs), and the others are ignored. A key in `parameters` overrides the same top-level key.
// An explicit null leaves a field at its default. Errors are INVALID_ARGUMENT naming the field
// ("'temperature' must be a number between 0 and 2, got 3"); RESOURCE_EXHAUSTED only when the
// parser cannot allocate.
//
// Thread safety: stateless functions; call from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "sched/gen_request.h"

namespace kiln {

struct TritonGenerateRequest {
  GenerateRequest request;              // prompt (text_input), sampling, priority, timeout_us, id
  bool stream = false;                  // parameters.stream
  bool exclude_input_in_output = true;  // false: the caller prefixes text_input (see above)
};

Result<TritonGenerateRequest> ParseGenerateRequest(std::string_view body);

// The KServe v2 tensor convention's `sampling_parameters` input: a JSON object text with the
// keys of the generate `parameters` object that are sampling keys (lenient style; n in
// [1, kMaxChoices]); other keys are ignored. An empty or all-blank text sets nothing. Fields not
// named keep their value in *params. INVALID_ARGUMENT naming the field, or for a text that is not
// one JSON object.
Status ParseSamplingParametersJson(std::string_view json, GenSamplingParams* params);

// /generate: {"model_name","model_version","text_output"} (+ "finish_reason" when given).
// model_version is written as a string, as in every v2 response.
std::string GenerateResponseJson(std::string_view model_name, int64_t model_version,
                                 std::string_view text_output,
                                 std::optional<FinishReason> finish_reason = std::nullopt);
// One /generate_stream event's object: the same members with text_output the chunk's new text,
// and "finish_reason" on the choice's last chunk.
std::string GenerateChunkJson(std::string_view model_name, int64_t model_version,
                              const GenChunk& chunk);
// {"error":"<message>"}: the generate error object (and every v2 error body).
std::string GenerateErrorJson(std::string_view message);

}  // namespace kiln
