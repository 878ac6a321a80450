// SPDX-License-Identifier: Apache-2.0
#pragma once
// Encodes an input set as the bytes of a complete HTTP/1.1 inference request, once, before the
// load starts: JSON (tensor data as JSON arrays, outputs as JSON) or the binary tensor data
// extension (protocol §1.13: JSON header with binary_data_size per input, raw tensors after
// it, every output requested with binary_data: true, Inference-Header-Content-Length), which is
// what perf_analyzer's C++ client sends by default.

#include <string>
#include <vector>

#include "bench/inputs.h"

namespace kiln::bench {

// "/v2/models/M/infer" or "/v2/models/M/versions/V/infer".
std::string InferPath(const std::string& model, const std::string& version);

// The JSON inference request body (binary == false), or the JSON header of a binary request
// (binary == true; the raw tensors follow it in the body). Output names are requested with
// binary_data: true when binary.
std::string InferJsonHeader(const InputSet& inputs, const std::vector<TensorSpec>& outputs,
                            bool binary);

// The whole request: request line, Host, Content-Type, Content-Length,
// [Inference-Header-Content-Length], keep-alive, then the body.
std::string HttpInferRequest(const std::string& host, const std::string& path,
                             const InputSet& inputs, const std::vector<TensorSpec>& outputs,
                             bool binary);

}  // namespace kiln::bench
