// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as the body of /v1/completions, /v1/chat/completions,
// /v2/models/{m}/generate and as the sampling_parameters input. Parsing must return a request or
// an error Status, never crash; an accepted request's parameters are written back through the
// response writers (a chunk with the prompt as text, the error body) to exercise them on
// whatever the parsers let through. Run with `make fuzz`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/generate_json.h"
#include "server/http/openai_json.h"

namespace {

void WriteBack(const kiln::GenerateRequest& r) {
  kiln::GenChunk chunk;
  chunk.text = r.prompt;
  chunk.finish_reason = kiln::FinishReason::kStop;
  if (!r.sampling.stop.empty()) chunk.stop_reason = r.sampling.stop.front();
  const kiln::OpenAiResponseHeader header{"id", 0, r.messages_json, true};
  (void)kiln::CompletionChunkJson(header, chunk);
  (void)kiln::ChatCompletionChunkJson(header, chunk, true);
  (void)kiln::GenerateChunkJson("m", 1, chunk);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  std::string param;
  if (auto r = kiln::ParseCompletionRequest(body, &param); r.ok()) {
    WriteBack(r->request);
  } else {
    (void)kiln::OpenAiErrorJson(r.status(), param);
  }
  if (auto r = kiln::ParseChatCompletionRequest(body, &param); r.ok()) WriteBack(r->request);
  if (auto r = kiln::ParseGenerateRequest(body); r.ok()) WriteBack(r->request);
  kiln::GenSamplingParams params;
  (void)kiln::ParseSamplingParametersJson(body, &params);
  return 0;
}
