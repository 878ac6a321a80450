// SPDX-License-Identifier: Apache-2.0
#pragma once
// Triton's LLM convention over the tensor protocols (KServe v2 HTTP /infer, gRPC ModelInfer and
// ModelStreamInfer): a generative model takes
//   text_input               BYTES [1]  the prompt (required)
//   stream                   BOOL  [1]  stream the output (only where the protocol can:
//                                       gRPC ModelStreamInfer, decoupled)
//   sampling_parameters      BYTES [1]  a JSON object of sampling parameters, the keys of the
//                                       generate extension's `parameters` (temperature, top_p,
//                                       max_tokens, stop, seed, ...)
//   exclude_input_in_output  BOOL  [1]  false: the output starts with the prompt (default true)
// and answers text_output BYTES [1]. Streaming: one response per chunk of new text, the last
// one marked final (triton_final_response) and carrying the last text; not streaming: one
// response with the whole text. StartInference (inference.h) sends every request for a
// generative model here.
//
// Thread safety: as StartInference.

#include <memory>

#include "repo/model_manager.h"
#include "sched/request.h"

namespace kiln {

// Translates `request` to a GenerateRequest and runs it on `model` (REQUIRES:
// model->generative()), answering `sink`. Errors (sink->Finish): INVALID_ARGUMENT naming the
// input for a missing or malformed input, an unknown requested output, stream true on a sink
// that cannot stream, n > 1; then the model's own errors.
void StartGenerativeInference(std::shared_ptr<LoadedModel> model,
                              std::unique_ptr<InferRequest> request,
                              std::shared_ptr<ResponseSink> sink);

}  // namespace kiln
