// SPDX-License-Identifier: Apache-2.0
#pragma once
// One row of a `kiln batch` JSONL input run on a model, answered exactly as the HTTP server
// answers the same request (docs/batch.md): the same parsers (http/infer_json.h,
// http/openai_json.h), the one inference path (inference.h) and the same response documents
// (http/gen_http.h), with no sockets.
//
//   StartKserveRow(model, row, line, [&](RowFinisher finish) {
//     queue.push(std::move(finish));    // on the model's thread (or this one, for a bad line)
//   });
//   ...
//   RowOutcome outcome = finish();      // on the writer's thread: encodes the output line
//   write(outcome.line);
//
// `done` is called exactly once, on any thread, possibly before the Start call returns. The
// finisher it gets builds the output line (batch_jsonl.h); it runs where the caller wants, so
// encoding large responses does not hold up the model's threads.
//
// Differences from the HTTP answer, all for the file format: a KServe response always carries
// its outputs as JSON "data" (a request's binary_data / binary_data_output choices are ignored:
// a line holds no binary section); an OpenAI request must not ask to stream (400, param
// "stream"), and its body's "model" is only echoed: the batch's model answers every row.
//
// Thread safety: the functions may be called from any thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "repo/model_manager.h"

namespace kiln::batch {

// What one row produced.
struct RowOutcome {
  std::string line;   // its output line, ending in '\n'
  bool ok = true;     // false: the line records an error
  std::string error;  // the error's message when !ok
};

using RowFinisher = std::function<RowOutcome()>;
using RowDone = std::function<void(RowFinisher finish)>;

// A KServe v2 inference request line (kKserve) run on `model` (a tensor model, or a generative
// one with Triton's text_input convention: gen_infer.h). A line that does not parse is that
// row's error (400), as are the model's errors.
void StartKserveRow(std::shared_ptr<LoadedModel> model, int64_t row, std::string line,
                    RowDone done);

// An OpenAI batch request line (kOpenAi) run on `model`. REQUIRES: model->generative().
// The row's errors: a line that is not a JSON object with a string custom_id, "method" other
// than "POST", a "url" other than /v1/chat/completions or /v1/completions, a "body" that is not
// an object or not a valid request (the server's messages and param), then the model's errors.
// The response's "model" is the body's, or the model's name when the body names none.
void StartOpenAiRow(std::shared_ptr<LoadedModel> model, int64_t row, std::string line,
                    RowDone done);

}  // namespace kiln::batch
