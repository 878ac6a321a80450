// SPDX-License-Identifier: Apache-2.0
#pragma once
// How one generation request is answered over HTTP, for each API that starts one: the
// OpenAI-compatible /v1/completions and /v1/chat/completions (streaming as Server-Sent Events or
// one JSON body) and Triton's /generate (one JSON body) and /generate_stream (SSE). The HTTP
// server feeds a GenHttpFormat every chunk the model sends (GenChunk, sched/gen_request.h) and
// the final result, and writes the bytes it returns; a format keeps what a non-streaming answer
// needs (each choice's text, tokens, log-probabilities and finish reason). No sockets: tested on
// its own.
//
//   std::unique_ptr<GenHttpFormat> f = MakeOpenAiFormat(parsed, /*id=*/"cmpl-1", created, "m");
//   for (const GenChunk& c : chunks) server.Write(f->Chunk(c));        // SSE bytes, or ""
//   server.Write(f->Finish(final));                                    // last SSE bytes or body
//
// Thread safety: one format per request, used on one thread at a time.

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "sched/gen_request.h"

namespace kiln {

struct OpenAiRequest;
struct TritonGenerateRequest;

class GenHttpFormat {
 public:
  virtual ~GenHttpFormat() = default;
  // Server-Sent Events (text/event-stream, chunked) or one JSON body.
  virtual bool stream() const = 0;
  // Streaming: the bytes of one chunk's event(s) (may be empty). Not streaming: records the
  // chunk and returns "".
  virtual std::string Chunk(const GenChunk& chunk) = 0;
  // Streaming: the bytes after the last chunk (the usage event when asked, "data: [DONE]").
  // Not streaming: the whole response body.
  virtual std::string Finish(const GenFinal& final) = 0;
  // An error before anything was written: the body of the error response (the HTTP status
  // comes from server/status_map.h).
  virtual std::string ErrorBody(const Status& status) const = 0;
  // Streaming: an error after the stream started: an error event and the end of the stream.
  virtual std::string StreamError(const Status& status) const = 0;
};

// /v1/completions (chat == false) or /v1/chat/completions. `id` names the response
// ("cmpl-..." / "chatcmpl-..."), `created` is its Unix time, `model` the model's name as the
// client sent it.
std::unique_ptr<GenHttpFormat> MakeOpenAiFormat(const OpenAiRequest& request, bool chat,
                                                std::string id, int64_t created, std::string model);

// A new OpenAI response id: "chatcmpl-" (chat) or "cmpl-" and 16 random hex digits.
std::string NewOpenAiResponseId(bool chat);
// The time now in Unix seconds (an OpenAI response's `created`).
int64_t UnixSecondsNow();
// What OpenAI leaves to the server when a request does not say: legacy completions stop after 16
// tokens (max_tokens); chat goes on until the context is full.
void ApplyOpenAiDefaults(bool chat, GenerateRequest* request);

// Triton's generate extension: `stream` for generate_stream. With exclude_input_in_output
// false the text_input is prefixed to the output (the first event of a stream).
std::unique_ptr<GenHttpFormat> MakeGenerateFormat(const TritonGenerateRequest& request, bool stream,
                                                  std::string model_name, int64_t model_version);
}  // namespace kiln
