// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one inference path of every protocol. A protocol front end (HTTP, gRPC unary, gRPC
// streams) only parses and encodes:
//
//   request -> parse (protocol) -> StartInference: model lookup, validation (the model's, once),
//   the run, classification, exactly-once completion -> sink (protocol): encode and send
//
//   Result<std::shared_ptr<LoadedModel>> model = FindModel(manager, name, version);
//   ... parse the wire request into `request` (the HTTP parser needs model->signature()) ...
//   StartInference(*model, std::move(request), classify, my_sink);
//
// The sink the protocol passes gets every partial response and then exactly one Finish: a final
// response (named by the model, version and request id, its classified outputs replaced) or an
// error; Finish with INTERNAL if the model ever dropped the request without answering, and a
// second answer from a faulty model is dropped (logged). The request's Cancellation, when the
// protocol sets one, reaches the scheduler through the request itself (sched/request.h).
//
// Thread safety: StartInference may be called from any thread; the sink is called from the
// model's threads (or this one, for a request refused at once), never concurrently.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "repo/model_manager.h"
#include "sched/request.h"

namespace kiln {

// An output the client asked to classify: replaced by its top `k` classes
// (tensor/classification.h).
struct ClassifyOutput {
  std::string name;
  int64_t k = 0;
};

// The ready version `version` of model `name`. -1: the version the model's rollout picks
// (repo/rollout.h: a weighted split sticky by a header that `headers` looks up, shadow
// traffic, precision variants), or the highest ready one when it has no rollout. INVALID_ARGUMENT
// for an empty name; otherwise ModelManager::GetModel's errors.
Result<std::shared_ptr<LoadedModel>> FindModel(const ModelManager& manager, std::string_view name,
                                               int64_t version,
                                               const HeaderLookup& headers = nullptr);

// Runs `request` on `model` and answers `sink` as described above.
void StartInference(std::shared_ptr<LoadedModel> model, std::unique_ptr<InferRequest> request,
                    std::vector<ClassifyOutput> classify, std::shared_ptr<ResponseSink> sink);

}  // namespace kiln
