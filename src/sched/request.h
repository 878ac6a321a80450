// SPDX-License-Identifier: Apache-2.0
#pragma once
// Internal inference request and response: what server/ translates the wire protocols to and
// from. Nothing here knows about HTTP, JSON or gRPC.
//
// Ownership: a request is handed to a model with std::unique_ptr (the model owns it from then
// on); the response reaches the caller through an InferCallback, called exactly once, on any
// thread, with either a response or an error Status.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace kiln {

struct InferInput {
  std::string name;
  OwnedTensor tensor;  // whole-batch shape as sent (batch dim included when the model batches)
};

struct RequestedOutput {
  std::string name;
};

struct InferRequest {
  std::string model_name;
  int64_t model_version = -1;  // -1: the server picks (highest ready version)
  std::string id;              // echoed in the response; may be empty
  std::vector<InferInput> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every model output, in model order
  // Scheduling parameters (the "priority" and "timeout" request parameters).
  uint64_t priority = 0;    // 0: the model's default priority level; 1 is the highest
  uint64_t timeout_us = 0;  // 0: the queue policy's default timeout (microseconds)
};

struct InferOutput {
  std::string name;
  OwnedTensor tensor;
};

struct InferResponse {
  std::string model_name;
  int64_t model_version = 0;
  std::string id;
  std::vector<InferOutput> outputs;  // requested order, or model order when none were requested
};

using InferCallback = std::function<void(Result<InferResponse>)>;

}  // namespace kiln
