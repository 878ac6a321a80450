// SPDX-License-Identifier: Apache-2.0
#pragma once
// Encodes an input set as the bytes of a complete HTTP/1.1 inference request, once, before the
// load starts: JSON (tensor data as JSON arrays, outputs as JSON) or the binary tensor data
// extension (protocol §1.13: JSON header with binary_data_size per input, raw tensors after
// it, every output requested with binary_data: true, Inference-Header-Content-Length), which is
// what perf_analyzer's C++ client sends by default.

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "bench/inputs.h"

namespace kiln::bench {

// A request parameter every request carries (perf_analyzer's --request-parameter
// "name:value:type"): type string, int, uint, bool or double.
struct RequestParameter {
  std::string name;
  std::string value;  // as given; checked against `type` by ParseRequestParameter
  std::string type;
};
// "name:value:type" (the value may hold ':'; the name and the type may not). INVALID_ARGUMENT
// naming the spec for a missing part, an unknown type or a value that is not of the type.
Result<RequestParameter> ParseRequestParameter(std::string_view spec);

// "/v2/models/M/infer" or "/v2/models/M/versions/V/infer".
std::string InferPath(const std::string& model, const std::string& version);

// The JSON inference request body (binary == false), or the JSON header of a binary request
// (binary == true; the raw tensors follow it in the body). Output names are requested with
// binary_data: true when binary.
// `parameters`: the request's top-level "parameters" object (omitted when empty).
std::string InferJsonHeader(const InputSet& inputs, const std::vector<TensorSpec>& outputs,
                            bool binary, const std::vector<RequestParameter>& parameters = {});

// The whole request: request line, Host, Content-Type, Content-Length,
// [Inference-Header-Content-Length], keep-alive, then the body.
std::string HttpInferRequest(const std::string& host, const std::string& path,
                             const InputSet& inputs, const std::vector<TensorSpec>& outputs,
                             bool binary, const std::vector<RequestParameter>& parameters = {});

}  // namespace kiln::bench
