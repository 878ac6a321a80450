// SPDX-License-Identifier: Apache-2.0
#pragma once
// ServedModel: what the model manager holds of one loaded version, whatever its kind: a tensor
// model (LoadedModelImpl, repo/loaded_model.h) or a generative model (LlmModel,
// repo/llm_model.h). The protocols see only LoadedModel; the manager also drains, times and
// resets the versions it serves.
//
// Thread safety: as LoadedModel; every method is thread-safe.

#include <cstdint>

#include "repo/model_manager.h"

namespace kiln {

class ServedModel : public LoadedModel {
 public:
  // Refuses new requests, finishes (or, past the model's drain limit, cancels) the accepted
  // ones, joins the model's threads and frees its memory. Idempotent. REQUIRES: not called from
  // one of the model's own callbacks.
  virtual void Shutdown() = 0;
  // Zeroes the statistics (after warmup, before the version serves).
  virtual void ResetStatistics() {}
  // Set by the model manager once the version is loaded and warmed up.
  virtual void SetLoadDuration(uint64_t ns) = 0;
};

}  // namespace kiln
